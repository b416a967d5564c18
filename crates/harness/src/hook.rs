//! What every provider's pre-tool hook shares: the call an event maps to, the answer a hook
//! process gives (stdout, stderr, exit code), the errors that block, and shell quoting for the
//! settings that install a hook whose command is a shell string.
//!
//! A provider module ([`crate::codex`], [`crate::gemini`]) parses its event into a
//! [`ToolRequest`], maps it to a [`Mapped`] Warden call, and turns a decision into a
//! [`HookAnswer`] in its own terms; the decision itself (guards, the policy, the journal) is the
//! caller's, one path for every provider.

use std::path::PathBuf;

use serde_json::{Map, Value};
use warden_policy::{Call, Subject};

/// One tool call a provider asks about, in the provider's own terms.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRequest {
    /// The session (names the journal's chain), if the event gives one.
    pub session_id: Option<String>,
    /// The provider's id of this call, if it gives one.
    pub tool_use_id: Option<String>,
    /// The event's working folder (absolute).
    pub cwd: PathBuf,
    /// The provider's tool name.
    pub tool_name: String,
    /// The provider's arguments.
    pub tool_input: Value,
    /// Extra context the mapping reads (Gemini's `mcp_context`).
    pub context: Option<Value>,
}

/// The Warden call a provider's call is decided as: the call, and the subjects to decide it
/// on when the mapping split it itself (a patch: one per file), or why it could not be split
/// (the call is then denied).
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped {
    /// The call (tool after the mapping, arguments, working folder).
    pub call: Call,
    /// `None`: the engine splits the call; `Some(Ok)`: decide on these subjects; `Some(Err)`:
    /// the mapping could not read the call, which is denied with this reason.
    pub subjects: Option<Result<Vec<Subject>, String>>,
}

impl Mapped {
    /// A call the engine splits itself.
    pub fn call(call: Call) -> Self {
        Self {
            call,
            subjects: None,
        }
    }
}

/// What the hook process answers: stdout, stderr and the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookAnswer {
    /// Written to stdout (one line), if anything.
    pub stdout: Option<String>,
    /// Written to stderr, if anything.
    pub stderr: Option<String>,
    /// The exit code.
    pub code: u8,
}

/// Why an event cannot be answered; each is the provider's blocking answer, never silence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// stdin is not JSON (or was cut short).
    #[error("the hook input is not JSON: {0}")]
    NotJson(String),
    /// stdin is JSON but not an object.
    #[error("the hook input is not a JSON object")]
    NotObject,
    /// An event this hook does not answer.
    #[error("unknown hook event {found}: this hook answers {expected}")]
    UnknownEvent {
        /// What the event said.
        found: String,
        /// The event it answers.
        expected: &'static str,
    },
    /// A required field is missing.
    #[error("the event has no `{0}`")]
    Missing(&'static str),
    /// A field has the wrong type.
    #[error("the event's `{field}` must be {want}")]
    WrongType {
        /// The field.
        field: &'static str,
        /// What it must be.
        want: &'static str,
    },
    /// A tool whose arguments Warden cannot read.
    #[error("unknown tool `{0}`: Warden does not know what its arguments do, so it is blocked")]
    UnknownTool(String),
}

/// A string field of an event object (`None` when absent or null).
pub(crate) fn opt_string(
    obj: &Map<String, Value>,
    field: &'static str,
) -> Result<Option<String>, HookError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(HookError::WrongType {
            field,
            want: "a string",
        }),
    }
}

/// Parses an event object, checks its event name, and reads what every pre-tool event
/// carries: `tool_name` (non-empty), `tool_input` (present), `cwd` (absolute).
pub(crate) fn parse_request(
    text: &str,
    event: &'static str,
) -> Result<(ToolRequest, Map<String, Value>), HookError> {
    let value: Value = serde_json::from_str(text).map_err(|e| HookError::NotJson(e.to_string()))?;
    let Value::Object(obj) = value else {
        return Err(HookError::NotObject);
    };
    match obj.get("hook_event_name") {
        Some(Value::String(s)) if s == event => {}
        Some(other) => {
            return Err(HookError::UnknownEvent {
                found: other.to_string(),
                expected: event,
            });
        }
        None => return Err(HookError::Missing("hook_event_name")),
    }
    let tool_name = opt_string(&obj, "tool_name")?
        .filter(|n| !n.is_empty())
        .ok_or(HookError::Missing("tool_name"))?;
    let tool_input = obj
        .get("tool_input")
        .filter(|v| !v.is_null())
        .cloned()
        .ok_or(HookError::Missing("tool_input"))?;
    let cwd = opt_string(&obj, "cwd")?
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .ok_or(HookError::WrongType {
            field: "cwd",
            want: "an absolute path",
        })?;
    let request = ToolRequest {
        session_id: opt_string(&obj, "session_id")?,
        tool_use_id: opt_string(&obj, "tool_use_id")?,
        cwd,
        tool_name,
        tool_input,
        context: None,
    };
    Ok((request, obj))
}

/// `word` quoted for a POSIX shell: as is when it is plain, else in single quotes.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A command line for a shell: each word quoted.
pub fn shell_command(program: &str, args: &[String]) -> String {
    std::iter::once(program)
        .chain(args.iter().map(String::as_str))
        .map(shell_quote)
        .collect::<Vec<_>>()
        .join(" ")
}
