//! `bash {command, timeout_ms?}`: one shell command in the workspace, through the selected
//! effect backend.
//!
//! The tool asks the backend for the containment the policy's `[containment]` table describes
//! ([`BashTool::process_spec`]): writes only under the workspace, reads everywhere, the network
//! off (unless `network_off = "allowed"`), the environment cleared to the table's `env`. Whether
//! any of it is enforced is the backend's capability report's to say; the executor's preflight
//! refuses the call when a *required* capability is not proven, and records an *optional* one
//! as a degradation. For an optional network cut the backend has not proven, the tool asks for
//! the network rather than being refused by the backend: the call runs degraded, as the policy
//! allowed. The in-process backend enforces none of it.
//!
//! Its static hints are the worst case (a command can do anything); its per-call hints
//! ([`Tool::hints_for`]) say read-only when the shell splitter classifies every command of the
//! string as a known read-only one (`warden_policy::shell::is_read_only`).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use warden_contracts::{
    ActionDescriptor, BackendError, Capability, CapabilityStatus, EffectBackend, Hints, ProcessSpec,
};
use warden_executor::{InvocationToken, Tool, ToolError};
use warden_policy::{Containment, NetworkRequirement, Requirement};

use crate::error::ToolsError;
use crate::files::{descriptor, failed};
use crate::output::{TRUNCATION_MARKER, marker, prefix, tail, truncate};
use crate::workspace::Workspace;

/// The default wall-time limit of one command (two minutes).
pub const DEFAULT_BASH_TIMEOUT_MS: u64 = 120_000;
/// The largest `timeout_ms` a call may ask for (ten minutes).
pub const MAX_BASH_TIMEOUT_MS: u64 = 600_000;
/// The default cap on captured output, per stream (1 MiB); past it the command is stopped
/// and the stream ends with a truncation marker.
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1 << 20;

/// How much of a failing command's output its failure message quotes.
const TAIL: usize = 2048;

/// `bash {command, timeout_ms?}`.
///
/// The result of a command that exited 0 is `{exit_code: 0, stdout, stderr, truncated}`. A
/// command whose output passed the cap was stopped: its result has `truncated: true`,
/// `stopped: "output_limit"`, the exit status it ended with (`exit_code` null and `signal` when
/// killed), and the cut stream ends with a marker. Otherwise a non-zero exit is the failure
/// `exit_status` (quoting the output's tails), a command past its time limit the failure
/// `timeout`, a backend refusal `containment` and a spawn error `spawn`.
pub struct BashTool {
    descriptor: ActionDescriptor,
    workspace: Workspace,
    backend: Arc<dyn EffectBackend>,
    containment: Containment,
    timeout_ms: u64,
    max_output_bytes: u64,
}

impl std::fmt::Debug for BashTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BashTool")
            .field("workspace", &self.workspace)
            .field("backend", &self.backend.backend_ref().name())
            .field("containment", &self.containment)
            .finish_non_exhaustive()
    }
}

impl BashTool {
    /// The tool over `workspace`, running on `backend`, asking for full containment (the
    /// default `[containment]` table).
    pub fn new(workspace: Workspace, backend: Arc<dyn EffectBackend>) -> Result<Self, ToolsError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "minLength": 1, "description": "A bash command, run in the workspace."},
                "timeout_ms": {"type": "integer", "minimum": 1, "maximum": MAX_BASH_TIMEOUT_MS, "description": "Wall-time limit in milliseconds (default 120000); the command is killed at it."}
            },
            "required": ["command"],
            "additionalProperties": false
        });
        // A shell command can do anything: destructive, not idempotent, open-world.
        let hints = Hints {
            read_only: Some(false),
            destructive: Some(true),
            idempotent: Some(false),
            open_world: Some(true),
        };
        Ok(Self {
            descriptor: descriptor(
                "bash",
                "Run a bash command in the workspace, under the effect backend's containment.",
                schema,
                hints,
            )?,
            workspace,
            backend,
            containment: Containment::default(),
            timeout_ms: DEFAULT_BASH_TIMEOUT_MS,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
        })
    }

    /// The same tool asking for the containment `table` describes (the network and the
    /// environment allowlist; the workspace is always the only write root).
    pub fn with_containment(mut self, table: Containment) -> Self {
        self.containment = table;
        self
    }

    /// The same tool with another default wall-time limit (a call's `timeout_ms` overrides it).
    pub fn with_timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = ms.clamp(1, MAX_BASH_TIMEOUT_MS);
        self
    }

    /// The same tool with another output cap (per stream).
    pub fn with_max_output_bytes(mut self, bytes: u64) -> Self {
        self.max_output_bytes = bytes.max(1);
        self
    }

    /// What the backend is asked to run for `command`: `bash -c command` in the workspace,
    /// writes only under it, reads everywhere, the network as the containment table says (off
    /// unless `allowed`; for an `optional` cut the backend has not proven, on, so the call runs
    /// degraded instead of being refused), the environment cleared to the table's `env`, the
    /// wall-time limit and the output cap.
    pub fn process_spec(&self, command: &str, timeout_ms: Option<u64>) -> ProcessSpec {
        let root = self.workspace.root().to_string_lossy().into_owned();
        let network = match self.containment.network_off {
            NetworkRequirement::Allowed => true,
            NetworkRequirement::Required => false,
            NetworkRequirement::Optional => {
                self.backend.capabilities().status(Capability::NetworkOff)
                    != CapabilityStatus::Enforced
            }
        };
        ProcessSpec {
            program: "bash".into(),
            args: vec!["-c".into(), command.to_owned()],
            cwd: root.clone(),
            env_allowlist: self.containment.env.clone(),
            env_set: Default::default(),
            stdin: None,
            write_roots: vec![root],
            read_roots: None,
            network,
            timeout_ms: Some(
                timeout_ms
                    .unwrap_or(self.timeout_ms)
                    .clamp(1, MAX_BASH_TIMEOUT_MS),
            ),
            max_output_bytes: Some(self.max_output_bytes),
            degradable: self.degradable(),
        }
    }

    /// The capabilities the containment table made optional: the backend may run without them
    /// when it has not proven them (the executor records the degradation).
    fn degradable(&self) -> Vec<Capability> {
        let mut out = Vec::new();
        if self.containment.write_roots == Requirement::Optional {
            out.push(Capability::FilesystemWriteRoots);
            out.push(Capability::FilesystemReadRoots);
        }
        if self.containment.network_off != NetworkRequirement::Required {
            out.push(Capability::NetworkOff);
        }
        if self.containment.env_allowlist == Requirement::Optional {
            out.push(Capability::EnvAllowlist);
        }
        if self.containment.network_off != NetworkRequirement::Required {
            out.push(Capability::UnixSocketsOff);
        }
        if self.containment.process_isolation == Requirement::Optional {
            out.push(Capability::ProcessIsolation);
            out.push(Capability::DescriptorIsolation);
        }
        out
    }
}

/// A captured stream, cut at `cap` bytes with a marker. `stopped`: the backend cut output at
/// the cap and stopped the command, so how much more there was is unknown.
fn clip(text: String, cap: usize, stopped: bool) -> (String, bool) {
    if stopped && text.len() >= cap {
        let kept = prefix(&text, cap);
        let mut out = String::with_capacity(kept.len() + 100);
        out.push_str(kept);
        out.push_str(&marker(kept.len(), None));
        out.push_str(" (the command was stopped at the output limit)");
        return (out, true);
    }
    truncate(text, cap)
}

#[async_trait]
impl Tool for BashTool {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.descriptor
    }

    fn hints_for(&self, arguments: &Map<String, Value>) -> Hints {
        match arguments.get("command").and_then(Value::as_str) {
            Some(command) if warden_policy::shell::is_read_only(command) => Hints {
                read_only: Some(true),
                destructive: Some(false),
                idempotent: Some(true),
                open_world: Some(false),
            },
            _ => self.descriptor.hints(),
        }
    }

    async fn invoke(&self, _token: InvocationToken, arguments: Value) -> Result<Value, ToolError> {
        let args: Map<String, Value> = arguments.as_object().cloned().unwrap_or_default();
        let command = args
            .get("command")
            .and_then(Value::as_str)
            .ok_or_else(|| failed("invalid_arguments", "`command` must be a string"))?;
        let timeout_ms = match args.get("timeout_ms") {
            None => None,
            Some(v) => Some(
                v.as_u64()
                    .filter(|n| (1..=MAX_BASH_TIMEOUT_MS).contains(n))
                    .ok_or_else(|| {
                        failed(
                            "invalid_arguments",
                            format!(
                                "`timeout_ms` must be an integer from 1 to {MAX_BASH_TIMEOUT_MS}"
                            ),
                        )
                    })?,
            ),
        };
        let spec = self.process_spec(command, timeout_ms);
        let limit = spec.timeout_ms.unwrap_or(self.timeout_ms);
        tracing::debug!(
            backend = self.backend.backend_ref().name(),
            network = spec.network,
            "bash"
        );
        let out = self.backend.run(spec).await.map_err(|e| match e {
            BackendError::Containment { message } => failed("containment", message),
            BackendError::Spawn { message } => failed("spawn", message),
        })?;
        if out.timed_out {
            return Err(failed(
                "timeout",
                format!("the command ran past its time limit of {limit} ms and was killed"),
            ));
        }
        let cap = usize::try_from(self.max_output_bytes).unwrap_or(usize::MAX);
        let (stdout, out_cut) = clip(out.stdout, cap, out.truncated);
        let (stderr, err_cut) = clip(out.stderr, cap, out.truncated);
        let truncated = out.truncated || out_cut || err_cut;
        if out.exit_code == Some(0) || out.truncated {
            let mut result = json!({
                "exit_code": out.exit_code,
                "stdout": stdout,
                "stderr": stderr,
                "truncated": truncated,
            });
            if let Some(o) = result.as_object_mut() {
                if let Some(signal) = out.signal {
                    o.insert("signal".into(), json!(signal));
                }
                if out.truncated {
                    o.insert("stopped".into(), json!("output_limit"));
                }
            }
            return Ok(result);
        }
        let status = match (out.exit_code, out.signal) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            (None, None) => "no exit status".to_owned(),
        };
        let quote = |s: &str| {
            let t = tail(s, TAIL);
            if t.len() < s.len() && !s.contains(TRUNCATION_MARKER) {
                format!("…{}", t.trim_end())
            } else {
                t.trim_end().to_owned()
            }
        };
        Err(failed(
            "exit_status",
            format!(
                "{status}; stdout: {}; stderr: {}",
                quote(&stdout),
                quote(&stderr)
            ),
        ))
    }
}
