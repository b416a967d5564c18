//! The file tools: `read {path, offset?, limit?}`, `list {path}` (read anywhere; the policy
//! decides which paths), `write {path, content}` and `edit {path, old, new, replace_all?}`
//! (inside the workspace only).
//!
//! `write` and `edit` never leave a half-written file: they write a temporary file beside the
//! target (with the target's permissions) and rename it into place.

use std::io::{BufRead as _, Write as _};
use std::path::Path;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use warden_contracts::{ActionDescriptor, ActionSource, Hints};
use warden_executor::{InvocationToken, Tool, ToolError};

use crate::BUILTIN_VERSION;
use crate::error::ToolsError;
use crate::output::{marker, prefix};
use crate::workspace::Workspace;

/// The most lines `read` returns when the call gives no `limit`.
pub const DEFAULT_READ_LINES: u64 = 2_000;
/// The most bytes of content one `read` returns; past it the content ends with a marker.
pub const MAX_READ_OUTPUT_BYTES: usize = 256 * 1024;
/// The largest content `write` accepts and the largest file `edit` rewrites (10 MiB).
pub const MAX_WRITE_BYTES: usize = 10 << 20;
/// The most entries one `list` returns; past it the listing says how many were left out.
pub const MAX_LIST_ENTRIES: usize = 1_000;

const READ_ONLY: Hints = Hints {
    read_only: Some(true),
    destructive: Some(false),
    idempotent: Some(true),
    open_world: Some(false),
};

fn str_arg<'a>(arguments: &'a Map<String, Value>, name: &str) -> Result<&'a str, String> {
    arguments
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`{name}` must be a string"))
}

fn args_of(arguments: &Value) -> Map<String, Value> {
    arguments.as_object().cloned().unwrap_or_default()
}

/// A call's `path` argument as given.
fn path_arg(args: &Map<String, Value>) -> Result<&str, ToolError> {
    str_arg(args, "path").map_err(invalid)
}

/// The precondition of a tool that reads anywhere the policy allows (`read`, `list`): its
/// `path` resolves for reading.
fn readable(workspace: &Workspace, arguments: &Map<String, Value>) -> Result<(), String> {
    workspace
        .resolve_read(str_arg(arguments, "path")?)
        .map(|_| ())
}

fn is_a_directory(given: &str) -> ToolError {
    failed("is_a_directory", format!("{given} is a directory"))
}

pub(crate) fn failed(kind: &str, message: impl Into<String>) -> ToolError {
    ToolError::Failed {
        kind: kind.to_owned(),
        message: message.into(),
    }
}

fn invalid(message: impl Into<String>) -> ToolError {
    failed("invalid_arguments", message)
}

fn io_failure(path: &str, e: &std::io::Error) -> ToolError {
    let kind = match e.kind() {
        std::io::ErrorKind::NotFound => "not_found",
        std::io::ErrorKind::PermissionDenied => "permission_denied",
        std::io::ErrorKind::IsADirectory => "is_a_directory",
        std::io::ErrorKind::NotADirectory => "not_a_directory",
        _ => "io",
    };
    failed(kind, format!("{path}: {e}"))
}

pub(crate) fn descriptor(
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

/// Writes `content` to `path` atomically: a temporary file beside it (created new, with the
/// old file's permissions), synced, then renamed over it.
fn write_atomically(path: &Path, content: &str) -> std::io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("/"));
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
        if let Ok(meta) = std::fs::metadata(path) {
            f.set_permissions(meta.permissions())?;
        }
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

// ---------------------------------------------------------------------------------------------
// read
// ---------------------------------------------------------------------------------------------

/// `read {path, offset?, limit?}`: lines of a UTF-8 text file, anywhere the policy allows.
///
/// `offset` is the first line to return (1-based, default 1), `limit` the most lines (default
/// [`DEFAULT_READ_LINES`]). The result is `{path, content, offset, lines, truncated,
/// next_offset?}`; when more of the file follows (past `limit`, or past
/// [`MAX_READ_OUTPUT_BYTES`] of content) `content` ends with a truncation marker and
/// `next_offset` is where to read on.
#[derive(Debug)]
pub struct ReadTool {
    descriptor: ActionDescriptor,
    workspace: Workspace,
    max_output_bytes: usize,
}

impl ReadTool {
    /// The tool, with relative paths under `workspace`.
    pub fn new(workspace: Workspace) -> Result<Self, ToolsError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": "The file: relative to the workspace, or absolute."},
                "offset": {"type": "integer", "minimum": 1, "description": "The first line to return (1-based; default 1)."},
                "limit": {"type": "integer", "minimum": 1, "description": "The most lines to return (default 2000)."}
            },
            "required": ["path"],
            "additionalProperties": false
        });
        Ok(Self {
            descriptor: descriptor(
                "read",
                "Read lines of a UTF-8 text file (relative paths resolve under the workspace).",
                schema,
                READ_ONLY,
            )?,
            workspace,
            max_output_bytes: MAX_READ_OUTPUT_BYTES,
        })
    }

    /// The same tool with another content budget per call.
    pub fn with_max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = bytes.max(1);
        self
    }
}

/// A positive integer argument, or its default.
fn count_arg(args: &Map<String, Value>, name: &str, default: u64) -> Result<u64, ToolError> {
    match args.get(name) {
        None => Ok(default),
        Some(v) => v
            .as_u64()
            .filter(|n| *n >= 1)
            .ok_or_else(|| invalid(format!("`{name}` must be an integer of at least 1"))),
    }
}

#[async_trait]
impl Tool for ReadTool {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.descriptor
    }

    fn precondition(&self, arguments: &Map<String, Value>) -> Result<(), String> {
        readable(&self.workspace, arguments)
    }

    async fn invoke(&self, _token: InvocationToken, arguments: Value) -> Result<Value, ToolError> {
        let args = args_of(&arguments);
        let given = path_arg(&args)?;
        let offset = count_arg(&args, "offset", 1)?;
        let limit = count_arg(&args, "limit", DEFAULT_READ_LINES)?;
        let path = self.workspace.resolve_read(given).map_err(invalid)?;
        let file = std::fs::File::open(&path).map_err(|e| io_failure(given, &e))?;
        if file.metadata().map_err(|e| io_failure(given, &e))?.is_dir() {
            return Err(is_a_directory(given));
        }
        let mut reader = std::io::BufReader::new(file);
        let mut line = Vec::new();
        let mut number: u64 = 0;
        let mut content = String::new();
        let mut returned: u64 = 0;
        let mut next_offset: Option<u64> = None;
        let mut cut = false;
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| io_failure(given, &e))?;
            if n == 0 {
                break;
            }
            number += 1;
            if number < offset {
                continue;
            }
            if returned >= limit {
                next_offset = Some(number);
                break;
            }
            let text = std::str::from_utf8(&line)
                .map_err(|_| failed("not_utf8", format!("{given}: line {number} is not UTF-8")))?;
            let room = self.max_output_bytes.saturating_sub(content.len());
            if text.len() > room {
                content.push_str(prefix(text, room));
                cut = true;
                next_offset = Some(number);
                break;
            }
            content.push_str(text);
            returned += 1;
        }
        let truncated = next_offset.is_some();
        if let Some(next) = next_offset {
            let shown = content.len();
            content.push_str(&marker(shown, None));
            content.push_str(&format!(
                " (read on with offset {next}{})",
                if cut {
                    "; that line is longer than one read returns"
                } else {
                    ""
                }
            ));
        }
        let mut result = json!({
            "path": given,
            "content": content,
            "offset": offset,
            "lines": returned,
            "truncated": truncated,
        });
        if let (Some(next), Some(o)) = (next_offset, result.as_object_mut()) {
            o.insert("next_offset".into(), json!(next));
        }
        Ok(result)
    }
}

// ---------------------------------------------------------------------------------------------
// list
// ---------------------------------------------------------------------------------------------

/// `list {path}`: a directory's entries, sorted by name, anywhere the policy allows.
///
/// The result is `{path, entries: [{name, kind, bytes?}], truncated, omitted?}` with `kind` one
/// of `file`, `dir`, `symlink`, `other` (a symlink is not followed) and `bytes` for files;
/// past [`MAX_LIST_ENTRIES`] entries, `truncated` is true and `omitted` counts the rest.
#[derive(Debug)]
pub struct ListTool {
    descriptor: ActionDescriptor,
    workspace: Workspace,
    max_entries: usize,
}

impl ListTool {
    /// The tool, with relative paths under `workspace`.
    pub fn new(workspace: Workspace) -> Result<Self, ToolsError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": "The directory: relative to the workspace (\".\" for the workspace itself), or absolute."}
            },
            "required": ["path"],
            "additionalProperties": false
        });
        Ok(Self {
            descriptor: descriptor(
                "list",
                "List a directory's entries (relative paths resolve under the workspace).",
                schema,
                READ_ONLY,
            )?,
            workspace,
            max_entries: MAX_LIST_ENTRIES,
        })
    }

    /// The same tool with another entry limit per call.
    pub fn with_max_entries(mut self, entries: usize) -> Self {
        self.max_entries = entries.max(1);
        self
    }
}

#[async_trait]
impl Tool for ListTool {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.descriptor
    }

    fn precondition(&self, arguments: &Map<String, Value>) -> Result<(), String> {
        readable(&self.workspace, arguments)
    }

    async fn invoke(&self, _token: InvocationToken, arguments: Value) -> Result<Value, ToolError> {
        let args = args_of(&arguments);
        let given = path_arg(&args)?;
        let path = self.workspace.resolve_read(given).map_err(invalid)?;
        let dir = std::fs::read_dir(&path).map_err(|e| io_failure(given, &e))?;
        let mut entries: Vec<(String, std::fs::DirEntry)> = Vec::new();
        for entry in dir {
            let entry = entry.map_err(|e| io_failure(given, &e))?;
            entries.push((entry.file_name().to_string_lossy().into_owned(), entry));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let total = entries.len();
        let shown: Vec<Value> = entries
            .into_iter()
            .take(self.max_entries)
            .map(|(name, entry)| {
                let meta = entry.metadata().ok();
                let kind = match entry.file_type() {
                    Ok(t) if t.is_symlink() => "symlink",
                    Ok(t) if t.is_dir() => "dir",
                    Ok(t) if t.is_file() => "file",
                    _ => "other",
                };
                let mut e = json!({"name": name, "kind": kind});
                if kind == "file"
                    && let (Some(m), Some(o)) = (meta, e.as_object_mut())
                {
                    o.insert("bytes".into(), json!(m.len()));
                }
                e
            })
            .collect();
        let omitted = total - shown.len();
        let mut result = json!({
            "path": given,
            "entries": shown,
            "truncated": omitted > 0,
        });
        if omitted > 0
            && let Some(o) = result.as_object_mut()
        {
            o.insert("omitted".into(), json!(omitted));
        }
        Ok(result)
    }
}

// ---------------------------------------------------------------------------------------------
// write
// ---------------------------------------------------------------------------------------------

/// `write {path, content}`: creates or replaces a UTF-8 text file inside the workspace
/// (creating missing folders), atomically. The result is `{path, bytes, created}`.
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
                "path": {"type": "string", "minLength": 1, "description": "A file inside the workspace (relative or absolute)."},
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
                "Create or replace a UTF-8 text file inside the workspace.",
                schema,
                hints,
            )?,
            workspace,
        })
    }
}

/// The write target of `path`, refusing the workspace root itself.
fn write_target(workspace: &Workspace, path: &str) -> Result<std::path::PathBuf, String> {
    let resolved = workspace.resolve_write(path)?;
    if resolved == workspace.root() {
        return Err("cannot write the workspace folder itself".into());
    }
    Ok(resolved)
}

/// [`write_target`] for a call (`outside_workspace` when it refuses).
fn writable(workspace: &Workspace, given: &str) -> Result<std::path::PathBuf, ToolError> {
    write_target(workspace, given).map_err(|m| failed("outside_workspace", m))
}

#[async_trait]
impl Tool for WriteTool {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.descriptor
    }

    fn precondition(&self, arguments: &Map<String, Value>) -> Result<(), String> {
        write_target(&self.workspace, str_arg(arguments, "path")?)?;
        let content = str_arg(arguments, "content")?;
        if content.len() > MAX_WRITE_BYTES {
            return Err(format!(
                "the content has {} bytes; write accepts at most {MAX_WRITE_BYTES}",
                content.len()
            ));
        }
        Ok(())
    }

    async fn invoke(&self, _token: InvocationToken, arguments: Value) -> Result<Value, ToolError> {
        let args = args_of(&arguments);
        let given = path_arg(&args)?;
        let content = str_arg(&args, "content").map_err(invalid)?;
        let path = writable(&self.workspace, given)?;
        if path.is_dir() {
            return Err(is_a_directory(given));
        }
        let created = std::fs::symlink_metadata(&path).is_err();
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_failure(given, &e))?;
        }
        write_atomically(&path, content).map_err(|e| io_failure(given, &e))?;
        tracing::debug!(path = %path.display(), bytes = content.len(), "write");
        Ok(json!({"path": given, "bytes": content.len(), "created": created}))
    }
}

// ---------------------------------------------------------------------------------------------
// edit
// ---------------------------------------------------------------------------------------------

/// `edit {path, old, new, replace_all?}`: replaces text in an existing UTF-8 file inside the
/// workspace, atomically. `old` must occur exactly once unless `replace_all` is true; an `old`
/// that does not occur (`old_not_found`) or occurs several times without `replace_all`
/// (`old_not_unique`) is refused and the file is left as it was. The result is `{path,
/// replacements}`.
#[derive(Debug)]
pub struct EditTool {
    descriptor: ActionDescriptor,
    workspace: Workspace,
}

impl EditTool {
    /// The tool over `workspace`.
    pub fn new(workspace: Workspace) -> Result<Self, ToolsError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": "An existing file inside the workspace (relative or absolute)."},
                "old": {"type": "string", "minLength": 1, "description": "The exact text to replace; must occur exactly once unless replace_all."},
                "new": {"type": "string", "description": "The replacement text."},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence of old (default false)."}
            },
            "required": ["path", "old", "new"],
            "additionalProperties": false
        });
        // Destroys the old text; not idempotent (a `new` containing `old` grows on repeat).
        let hints = Hints {
            read_only: Some(false),
            destructive: Some(true),
            idempotent: Some(false),
            open_world: Some(false),
        };
        Ok(Self {
            descriptor: descriptor(
                "edit",
                "Replace exact text in a UTF-8 file inside the workspace.",
                schema,
                hints,
            )?,
            workspace,
        })
    }
}

#[async_trait]
impl Tool for EditTool {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.descriptor
    }

    fn precondition(&self, arguments: &Map<String, Value>) -> Result<(), String> {
        write_target(&self.workspace, str_arg(arguments, "path")?)?;
        if str_arg(arguments, "old")? == str_arg(arguments, "new")? {
            return Err("`old` and `new` are the same text: nothing to edit".into());
        }
        Ok(())
    }

    async fn invoke(&self, _token: InvocationToken, arguments: Value) -> Result<Value, ToolError> {
        let args = args_of(&arguments);
        let given = path_arg(&args)?;
        let old = str_arg(&args, "old").map_err(invalid)?;
        let new = str_arg(&args, "new").map_err(invalid)?;
        let replace_all = args
            .get("replace_all")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if old.is_empty() {
            return Err(invalid("`old` must not be empty"));
        }
        let path = writable(&self.workspace, given)?;
        let meta = std::fs::metadata(&path).map_err(|e| io_failure(given, &e))?;
        if meta.is_dir() {
            return Err(is_a_directory(given));
        }
        if meta.len() > MAX_WRITE_BYTES as u64 {
            return Err(failed(
                "too_large",
                format!(
                    "{given} has {} bytes; edit rewrites at most {MAX_WRITE_BYTES}",
                    meta.len()
                ),
            ));
        }
        let bytes = std::fs::read(&path).map_err(|e| io_failure(given, &e))?;
        let content = String::from_utf8(bytes)
            .map_err(|_| failed("not_utf8", format!("{given} is not UTF-8 text")))?;
        let found = content.matches(old).count();
        if found == 0 {
            return Err(failed(
                "old_not_found",
                format!("`old` does not occur in {given}; nothing was changed"),
            ));
        }
        if found > 1 && !replace_all {
            return Err(failed(
                "old_not_unique",
                format!(
                    "`old` occurs {found} times in {given}; give more context to make it unique, or set replace_all; nothing was changed"
                ),
            ));
        }
        let edited = if replace_all {
            content.replace(old, new)
        } else {
            content.replacen(old, new, 1)
        };
        if edited.len() > MAX_WRITE_BYTES {
            return Err(failed(
                "too_large",
                format!("the edited file would have {} bytes", edited.len()),
            ));
        }
        write_atomically(&path, &edited).map_err(|e| io_failure(given, &e))?;
        tracing::debug!(path = %path.display(), replacements = found, "edit");
        Ok(json!({"path": given, "replacements": found}))
    }
}
