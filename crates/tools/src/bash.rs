//! `bash {command}`: one shell command in the workspace, through the selected effect backend.
//!
//! The tool asks the backend for the containment it wants (writes under the workspace, no
//! network, a small environment allowlist); whether any of it is enforced is the backend's
//! capability report's to say, and the executor's preflight refuses the call when a required
//! capability is not proven. The in-process backend enforces none of it.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use warden_contracts::{
    ActionDescriptor, ActionSource, BackendError, EffectBackend, Hints, ProcessSpec,
};
use warden_executor::{InvocationToken, Tool, ToolError};

use crate::BUILTIN_VERSION;
use crate::error::ToolsError;
use crate::workspace::Workspace;

/// The default wall-time limit of one command (two minutes).
pub const DEFAULT_BASH_TIMEOUT_MS: u64 = 120_000;
/// The default cap on captured output, per stream (1 MiB).
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1 << 20;

/// How much of a failing command's output its failure message quotes.
const TAIL: usize = 2048;

/// `bash {command}`.
pub struct BashTool {
    descriptor: ActionDescriptor,
    workspace: Workspace,
    backend: Arc<dyn EffectBackend>,
    timeout_ms: u64,
    max_output_bytes: u64,
}

impl std::fmt::Debug for BashTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BashTool")
            .field("workspace", &self.workspace)
            .field("backend", &self.backend.backend_ref().name())
            .finish_non_exhaustive()
    }
}

impl BashTool {
    /// The tool over `workspace`, running on `backend`.
    pub fn new(workspace: Workspace, backend: Arc<dyn EffectBackend>) -> Result<Self, ToolsError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "minLength": 1, "description": "A bash command, run in the workspace."}
            },
            "required": ["command"],
            "additionalProperties": false
        });
        let bad = |e: warden_contracts::ContractError| ToolsError::Descriptor {
            tool: "bash",
            message: e.to_string(),
        };
        // A shell command can do anything: destructive, not idempotent, open-world.
        let hints = Hints {
            read_only: Some(false),
            destructive: Some(true),
            idempotent: Some(false),
            open_world: Some(true),
        };
        let descriptor = ActionDescriptor::new("bash", BUILTIN_VERSION, ActionSource::Builtin {})
            .map_err(bad)?
            .with_input_schema(schema)
            .map_err(bad)?
            .with_hints(hints)
            .with_description("Run a bash command in the workspace.");
        Ok(Self {
            descriptor,
            workspace,
            backend,
            timeout_ms: DEFAULT_BASH_TIMEOUT_MS,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
        })
    }

    /// The same tool with another wall-time limit.
    pub fn with_timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = ms.max(1);
        self
    }

    /// The same tool with another output cap.
    pub fn with_max_output_bytes(mut self, bytes: u64) -> Self {
        self.max_output_bytes = bytes.max(1);
        self
    }
}

fn tail(text: &str) -> &str {
    if text.len() <= TAIL {
        return text;
    }
    let mut start = text.len() - TAIL;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[async_trait]
impl Tool for BashTool {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.descriptor
    }

    async fn invoke(&self, _token: InvocationToken, arguments: Value) -> Result<Value, ToolError> {
        let args: Map<String, Value> = arguments.as_object().cloned().unwrap_or_default();
        let command =
            args.get("command")
                .and_then(Value::as_str)
                .ok_or_else(|| ToolError::Failed {
                    kind: "invalid_arguments".into(),
                    message: "`command` must be a string".into(),
                })?;
        let root = self.workspace.root().to_string_lossy().into_owned();
        let spec = ProcessSpec {
            program: "bash".into(),
            args: vec!["-c".into(), command.to_owned()],
            cwd: root.clone(),
            env_allowlist: ["PATH", "HOME", "LANG", "TERM"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            env_set: Default::default(),
            stdin: None,
            write_roots: vec![root],
            read_roots: None,
            network: false,
            timeout_ms: Some(self.timeout_ms),
            max_output_bytes: Some(self.max_output_bytes),
        };
        let out = self.backend.run(spec).await.map_err(|e| match e {
            BackendError::Containment { message } => ToolError::Failed {
                kind: "containment".into(),
                message,
            },
            BackendError::Spawn { message } => ToolError::Failed {
                kind: "spawn".into(),
                message,
            },
        })?;
        if out.timed_out {
            return Err(ToolError::Failed {
                kind: "timeout".into(),
                message: format!("the command ran past {} ms and was killed", self.timeout_ms),
            });
        }
        match out.exit_code {
            Some(0) => Ok(json!({
                "exit_code": 0,
                "stdout": out.stdout,
                "stderr": out.stderr,
                "truncated": out.truncated,
            })),
            code => Err(ToolError::Failed {
                kind: "exit_status".into(),
                message: format!(
                    "{}; stdout: {}; stderr: {}",
                    match (code, out.signal) {
                        (Some(c), _) => format!("exit code {c}"),
                        (None, Some(s)) => format!("killed by signal {s}"),
                        (None, None) => "no exit status".to_owned(),
                    },
                    tail(&out.stdout).trim_end(),
                    tail(&out.stderr).trim_end()
                ),
            }),
        }
    }
}
