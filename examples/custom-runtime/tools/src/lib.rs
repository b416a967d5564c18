//! Three real tools over a folder of notes: `list_notes`, `read_note` and `delete_note`.
//!
//! Each implements [`warden_executor::Tool`]: a descriptor (name, version, input schema, hints)
//! and an `invoke` that does the file I/O. Nothing here can run a tool: `invoke` takes an
//! `InvocationToken` that only Warden's executor mints, after policy, preconditions and
//! approvals have passed. The runtime crate registers these tools in a `Registry` and hands it
//! to the executor.
//!
//! A note is a file directly inside the notes folder, named by a plain file name (`ideas.md`).
//! Names are checked twice: by the input schema and the tool's precondition before any policy
//! is consulted (no separator, no `..`, nothing absolute), and again inside `invoke`, which
//! resolves the file and refuses anything that is not a regular file inside the folder (a
//! symlink pointing out included).

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use warden_contracts::{ActionDescriptor, ActionSource, ContractError, Hints};
use warden_executor::{ExecutorError, InvocationToken, Registry, Tool, ToolError};

/// The longest note name accepted, in bytes.
pub const MAX_NAME: usize = 128;

/// The largest note `read_note` returns, in bytes.
pub const MAX_NOTE_BYTES: u64 = 64 * 1024;

/// Why the tools could not be set up.
#[derive(Debug)]
pub enum SetupError {
    /// The notes folder cannot be used.
    Folder {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A descriptor is invalid (a bug in this crate).
    Descriptor(ContractError),
    /// The registry refused a tool.
    Registry(ExecutorError),
}

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetupError::Folder { path, source } => {
                write!(f, "notes folder {}: {source}", path.display())
            }
            SetupError::Descriptor(e) => write!(f, "tool descriptor: {e}"),
            SetupError::Registry(e) => write!(f, "registry: {e}"),
        }
    }
}

impl std::error::Error for SetupError {}

/// The folder the tools work in, resolved once (symlinks included) so confinement compares
/// real paths.
#[derive(Debug, Clone)]
pub struct NotesFolder {
    root: PathBuf,
}

impl NotesFolder {
    /// The notes folder at `path`, which must exist.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SetupError> {
        let path = path.as_ref();
        let root = path.canonicalize().map_err(|source| SetupError::Folder {
            path: path.to_path_buf(),
            source,
        })?;
        if !root.is_dir() {
            return Err(SetupError::Folder {
                path: path.to_path_buf(),
                source: std::io::Error::other("not a folder"),
            });
        }
        Ok(Self { root })
    }

    /// The folder's resolved path.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The file of an existing note, confined to the folder: the name must be a plain file
    /// name, and the file it resolves to must be a regular file directly inside the folder.
    fn existing(&self, name: &str) -> Result<PathBuf, ToolError> {
        check_name(name).map_err(|m| failed("invalid_name", m))?;
        let resolved = self
            .root
            .join(name)
            .canonicalize()
            .map_err(|e| io(name, &e))?;
        if resolved.parent() != Some(self.root.as_path()) {
            return Err(failed(
                "outside_folder",
                format!("note `{name}` resolves outside the notes folder"),
            ));
        }
        if !resolved.is_file() {
            return Err(failed("not_a_note", format!("`{name}` is not a note file")));
        }
        Ok(resolved)
    }
}

/// Whether `name` is a plain note name: 1 to [`MAX_NAME`] bytes of letters, digits, `.`, `_`
/// and `-`, not starting with `.` (so never `.`, `..` or a hidden file), no separator, nothing
/// absolute. The input schema says the same as a pattern; this is the code that enforces it.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!("a note name has 1 to {MAX_NAME} bytes"));
    }
    if name.starts_with('.') {
        return Err(format!("`{name}`: a note name does not start with `.`"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "`{name}`: {c:?} is not allowed in a note name (letters, digits, `.`, `_`, `-`)"
        ));
    }
    Ok(())
}

/// The JSON Schema of a `{"name": …}` argument object.
fn name_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_NAME,
                "pattern": "^[A-Za-z0-9_-][A-Za-z0-9._-]*$",
                "description": "The note's file name, inside the notes folder"
            }
        },
        "required": ["name"],
        "additionalProperties": false
    })
}

fn failed(kind: &str, message: impl Into<String>) -> ToolError {
    ToolError::Failed {
        kind: kind.to_owned(),
        message: message.into(),
    }
}

fn io(name: &str, e: &std::io::Error) -> ToolError {
    let kind = match e.kind() {
        std::io::ErrorKind::NotFound => "not_found",
        std::io::ErrorKind::PermissionDenied => "permission_denied",
        _ => "io",
    };
    failed(kind, format!("note `{name}`: {e}"))
}

/// The `name` argument (the executor has validated the schema; this is the precondition's
/// copy).
fn name_of(arguments: &Map<String, Value>) -> Result<&str, String> {
    arguments
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| "`name` must be a string".to_owned())
}

/// The precondition every name-taking tool shares: pure, cheap, before any policy.
fn name_precondition(arguments: &Map<String, Value>) -> Result<(), String> {
    check_name(name_of(arguments)?)
}

fn descriptor(
    name: &str,
    description: &str,
    hints: Hints,
    schema: Value,
) -> Result<ActionDescriptor, SetupError> {
    ActionDescriptor::new(name, "1", ActionSource::Builtin {})
        .and_then(|d| d.with_input_schema(schema))
        .map(|d| d.with_hints(hints).with_description(description))
        .map_err(SetupError::Descriptor)
}

/// Reading, local: what `read_note` and `list_notes` vouch for.
fn reading() -> Hints {
    Hints {
        read_only: Some(true),
        open_world: Some(false),
        ..Hints::default()
    }
}

/// `read_note {"name": …}`: the note's text.
#[derive(Debug)]
pub struct ReadNote {
    folder: Arc<NotesFolder>,
    descriptor: ActionDescriptor,
}

impl ReadNote {
    /// The tool over `folder`.
    pub fn new(folder: Arc<NotesFolder>) -> Result<Self, SetupError> {
        Ok(Self {
            folder,
            descriptor: descriptor(
                "read_note",
                "Read one note's text",
                reading(),
                name_schema(),
            )?,
        })
    }
}

#[async_trait]
impl Tool for ReadNote {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.descriptor
    }

    fn precondition(&self, arguments: &Map<String, Value>) -> Result<(), String> {
        name_precondition(arguments)
    }

    async fn invoke(&self, _token: InvocationToken, arguments: Value) -> Result<Value, ToolError> {
        let name = arguments["name"].as_str().unwrap_or_default();
        let path = self.folder.existing(name)?;
        let size = std::fs::metadata(&path).map_err(|e| io(name, &e))?.len();
        if size > MAX_NOTE_BYTES {
            return Err(failed(
                "too_large",
                format!("note `{name}` has {size} bytes, more than {MAX_NOTE_BYTES}"),
            ));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| io(name, &e))?;
        Ok(json!({ "name": name, "text": text }))
    }
}

/// `list_notes {}`: the names of the notes, sorted.
#[derive(Debug)]
pub struct ListNotes {
    folder: Arc<NotesFolder>,
    descriptor: ActionDescriptor,
}

impl ListNotes {
    /// The tool over `folder`.
    pub fn new(folder: Arc<NotesFolder>) -> Result<Self, SetupError> {
        let schema = json!({ "type": "object", "additionalProperties": false });
        Ok(Self {
            folder,
            descriptor: descriptor("list_notes", "List the notes", reading(), schema)?,
        })
    }
}

#[async_trait]
impl Tool for ListNotes {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.descriptor
    }

    async fn invoke(&self, _token: InvocationToken, _arguments: Value) -> Result<Value, ToolError> {
        let entries = std::fs::read_dir(self.folder.path()).map_err(|e| io(".", &e))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io(".", &e))?;
            let is_file = entry.file_type().map_err(|e| io(".", &e))?.is_file();
            if let Some(name) = entry.file_name().to_str()
                && is_file
                && check_name(name).is_ok()
            {
                names.push(name.to_owned());
            }
        }
        names.sort();
        Ok(json!({ "notes": names }))
    }
}

/// `delete_note {"name": …}`: removes the note. Destructive: the policy asks before it runs.
#[derive(Debug)]
pub struct DeleteNote {
    folder: Arc<NotesFolder>,
    descriptor: ActionDescriptor,
}

impl DeleteNote {
    /// The tool over `folder`.
    pub fn new(folder: Arc<NotesFolder>) -> Result<Self, SetupError> {
        let hints = Hints {
            destructive: Some(true),
            idempotent: Some(false),
            open_world: Some(false),
            ..Hints::default()
        };
        Ok(Self {
            folder,
            descriptor: descriptor("delete_note", "Delete one note", hints, name_schema())?,
        })
    }
}

#[async_trait]
impl Tool for DeleteNote {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.descriptor
    }

    fn precondition(&self, arguments: &Map<String, Value>) -> Result<(), String> {
        name_precondition(arguments)
    }

    async fn invoke(&self, _token: InvocationToken, arguments: Value) -> Result<Value, ToolError> {
        let name = arguments["name"].as_str().unwrap_or_default();
        let path = self.folder.existing(name)?;
        std::fs::remove_file(&path).map_err(|e| io(name, &e))?;
        Ok(json!({ "deleted": name }))
    }
}

/// A registry holding the three tools over the notes folder at `path`.
pub fn registry(path: impl AsRef<Path>) -> Result<Registry, SetupError> {
    let folder = Arc::new(NotesFolder::open(path)?);
    let mut registry = Registry::new();
    let tools: [Arc<dyn Tool>; 3] = [
        Arc::new(ListNotes::new(folder.clone())?),
        Arc::new(ReadNote::new(folder.clone())?),
        Arc::new(DeleteNote::new(folder)?),
    ];
    for tool in tools {
        registry.register(tool).map_err(SetupError::Registry)?;
    }
    Ok(registry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_file_names() {
        for ok in ["ideas.md", "a", "2024-01-02_log.txt", "x.y.z"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "/etc/passwd",
            "a/b",
            ".hidden",
            "a\\b",
            "é",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name(&"a".repeat(MAX_NAME + 1)).is_err());
    }
}
