//! `read {path}` and `write {path, content}`: UTF-8 text files under the workspace.
//!
//! `write` never leaves a half-written file: it writes a temporary file beside the target and
//! renames it into place.

use std::io::Write as _;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use warden_contracts::{ActionDescriptor, ActionSource, Hints};
use warden_executor::{InvocationToken, Tool, ToolError};

use crate::BUILTIN_VERSION;
use crate::error::ToolsError;
use crate::workspace::Workspace;

/// The largest file `read` returns (10 MiB).
pub const MAX_READ_BYTES: u64 = 10 << 20;

fn path_arg(arguments: &Map<String, Value>) -> Result<&str, String> {
    arguments
        .get("path")
        .and_then(Value::as_str)
        .ok_or_else(|| "`path` must be a string".to_owned())
}

fn failed(kind: &str, message: impl Into<String>) -> ToolError {
    ToolError::Failed {
        kind: kind.to_owned(),
        message: message.into(),
    }
}

fn io_failure(path: &str, e: &std::io::Error) -> ToolError {
    let kind = match e.kind() {
        std::io::ErrorKind::NotFound => "not_found",
        std::io::ErrorKind::PermissionDenied => "permission_denied",
        std::io::ErrorKind::IsADirectory => "is_a_directory",
        _ => "io",
    };
    failed(kind, format!("{path}: {e}"))
}

fn descriptor(
    name: &'static str,
    description: &str,
    schema: Value,
    hints: Hints,
) -> Result<ActionDescriptor, ToolsError> {
    let bad = |e: warden_contracts::ContractError| ToolsError::Descriptor {
        tool: name,
        message: e.to_string(),
    };
    Ok(
        ActionDescriptor::new(name, BUILTIN_VERSION, ActionSource::Builtin {})
            .map_err(bad)?
            .with_input_schema(schema)
            .map_err(bad)?
            .with_hints(hints)
            .with_description(description),
    )
}

/// `read {path}`: a UTF-8 text file under the workspace.
#[derive(Debug)]
pub struct ReadTool {
    descriptor: ActionDescriptor,
    workspace: Workspace,
}

impl ReadTool {
    /// The tool over `workspace`.
    pub fn new(workspace: Workspace) -> Result<Self, ToolsError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": "A file under the workspace (relative or absolute)."}
            },
            "required": ["path"],
            "additionalProperties": false
        });
        let hints = Hints {
            read_only: Some(true),
            destructive: Some(false),
            idempotent: Some(true),
            open_world: Some(false),
        };
        Ok(Self {
            descriptor: descriptor(
                "read",
                "Read a UTF-8 text file under the workspace.",
                schema,
                hints,
            )?,
            workspace,
        })
    }
}

#[async_trait]
impl Tool for ReadTool {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.descriptor
    }

    fn guard(&self, arguments: &Map<String, Value>) -> Result<(), String> {
        self.workspace.resolve(path_arg(arguments)?).map(|_| ())
    }

    async fn invoke(&self, _token: InvocationToken, arguments: Value) -> Result<Value, ToolError> {
        let args = arguments.as_object().cloned().unwrap_or_default();
        let given = path_arg(&args).map_err(|m| failed("invalid_arguments", m))?;
        let path = self
            .workspace
            .resolve(given)
            .map_err(|m| failed("outside_workspace", m))?;
        let meta = std::fs::metadata(&path).map_err(|e| io_failure(given, &e))?;
        if meta.is_dir() {
            return Err(failed("is_a_directory", format!("{given} is a directory")));
        }
        if meta.len() > MAX_READ_BYTES {
            return Err(failed(
                "too_large",
                format!(
                    "{given} has {} bytes; read returns at most {MAX_READ_BYTES}",
                    meta.len()
                ),
            ));
        }
        let bytes = std::fs::read(&path).map_err(|e| io_failure(given, &e))?;
        let content = String::from_utf8(bytes)
            .map_err(|_| failed("not_utf8", format!("{given} is not UTF-8 text")))?;
        Ok(json!({"path": given, "content": content}))
    }
}

/// `write {path, content}`: creates or replaces a UTF-8 text file under the workspace
/// (creating missing folders), atomically.
#[derive(Debug)]
pub struct WriteTool {
    descriptor: ActionDescriptor,
    workspace: Workspace,
}

impl WriteTool {
    /// The tool over `workspace`.
    pub fn new(workspace: Workspace) -> Result<Self, ToolsError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": "A file under the workspace (relative or absolute)."},
                "content": {"type": "string", "description": "The file's new content."}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        });
        // Replacing a file destroys its old content; writing the same content twice leaves
        // the same state.
        let hints = Hints {
            read_only: Some(false),
            destructive: Some(true),
            idempotent: Some(true),
            open_world: Some(false),
        };
        Ok(Self {
            descriptor: descriptor(
                "write",
                "Create or replace a UTF-8 text file under the workspace.",
                schema,
                hints,
            )?,
            workspace,
        })
    }
}

#[async_trait]
impl Tool for WriteTool {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.descriptor
    }

    fn guard(&self, arguments: &Map<String, Value>) -> Result<(), String> {
        let path = self.workspace.resolve(path_arg(arguments)?)?;
        if path == self.workspace.root() {
            return Err("cannot write the workspace folder itself".into());
        }
        Ok(())
    }

    async fn invoke(&self, _token: InvocationToken, arguments: Value) -> Result<Value, ToolError> {
        let args = arguments.as_object().cloned().unwrap_or_default();
        let given = path_arg(&args).map_err(|m| failed("invalid_arguments", m))?;
        let content = args
            .get("content")
            .and_then(Value::as_str)
            .ok_or_else(|| failed("invalid_arguments", "`content` must be a string"))?;
        let path = self
            .workspace
            .resolve(given)
            .map_err(|m| failed("outside_workspace", m))?;
        let Some(parent) = path.parent() else {
            return Err(failed(
                "invalid_arguments",
                format!("{given} has no parent folder"),
            ));
        };
        if path.is_dir() {
            return Err(failed("is_a_directory", format!("{given} is a directory")));
        }
        std::fs::create_dir_all(parent).map_err(|e| io_failure(given, &e))?;
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = parent.join(format!(
            ".{file_name}.warden-{}-{}.tmp",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let written = (|| -> std::io::Result<()> {
            let mut f = std::fs::File::create_new(&tmp)?;
            f.write_all(content.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(io_failure(given, &e));
        }
        Ok(json!({"path": given, "bytes": content.len()}))
    }
}
