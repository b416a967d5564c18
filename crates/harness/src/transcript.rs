//! Tool calls in agent transcripts, mapped to Warden calls the way the hook maps them.
//!
//! Three JSON Lines formats, detected from their first recognizable line:
//!
//! | format | a call is | tool and arguments |
//! |---|---|---|
//! | Claude Code session | a `tool_use` block in an `assistant` line's `message.content` | [`crate::claude_code::to_call`], `cwd` from the line |
//! | Codex session | a `function_call`, `local_shell_call` or `custom_tool_call` item (wrapped in `response_item` or not) | `shell`/`exec_command`/`local_shell_call` → `bash`; `apply_patch` → `edit` (one subject per file: `write` for an added file, `edit` otherwise); anything else under its own name |
//! | Warden calls | a `{"tool":…,"args":…}` line (optional `time`, `cwd`) | unchanged |
//!
//! A line that is not JSON, or that is of the detected format but malformed (a `tool_use`
//! without a name, a Codex call whose `arguments` are not JSON), is an error for that line
//! only; lines of other kinds (messages, results, metadata) hold no calls.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use warden_policy::{Call, Subject};

use crate::claude_code;

/// The transcript formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TranscriptFormat {
    /// A Claude Code session (`~/.claude/projects/…/<session>.jsonl`).
    ClaudeCode,
    /// A Codex session (`~/.codex/sessions/…/rollout-….jsonl`).
    Codex,
    /// One `{"tool":…,"args":…}` a line (the `warden check --calls` input).
    WardenCalls,
}

impl TranscriptFormat {
    /// `claude-code`, `codex` or `warden-calls`.
    pub fn name(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude-code",
            Self::Codex => "codex",
            Self::WardenCalls => "warden-calls",
        }
    }

    /// The format a parsed line belongs to, if it is recognizably one.
    pub fn detect(line: &Value) -> Option<Self> {
        let obj = line.as_object()?;
        let ty = obj.get("type").and_then(Value::as_str);
        if obj.get("tool").is_some_and(Value::is_string) && obj.get("args").is_some() {
            return Some(Self::WardenCalls);
        }
        let claude_marker = obj.get("message").is_some_and(Value::is_object)
            || obj.contains_key("sessionId")
            || obj.contains_key("uuid")
            || obj.contains_key("leafUuid");
        if matches!(ty, Some("user" | "assistant" | "system" | "summary")) && claude_marker {
            return Some(Self::ClaudeCode);
        }
        if matches!(
            ty,
            Some("session_meta" | "response_item" | "event_msg" | "turn_context" | "compacted")
        ) && obj.contains_key("payload")
        {
            return Some(Self::Codex);
        }
        // The older Codex rollout: items at top level, after a header line.
        if matches!(
            ty,
            Some(
                "function_call"
                    | "local_shell_call"
                    | "custom_tool_call"
                    | "function_call_output"
                    | "reasoning"
            )
        ) || (ty == Some("message") && obj.contains_key("role") && !claude_marker)
            || (obj.contains_key("instructions") && obj.contains_key("id"))
        {
            return Some(Self::Codex);
        }
        None
    }
}

/// One call found in a transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscriptCall {
    /// Its time as the transcript gives it, if it does.
    pub time: Option<String>,
    /// The provider's tool name.
    pub provider_tool: String,
    /// The Warden call (tool after the mapping, arguments, working folder).
    pub call: Call,
    /// Subjects the caller must decide the call on instead of splitting it (a Codex patch:
    /// one per file), via `PolicySnapshot::decide_subjects`.
    pub subjects: Option<Vec<Subject>>,
}

/// Reads the calls out of a transcript's lines, keeping what later lines depend on (a Codex
/// session's working folder).
#[derive(Debug, Clone)]
pub struct TranscriptReader {
    format: TranscriptFormat,
    cwd: Option<PathBuf>,
}

impl TranscriptReader {
    /// A reader for `format`; `cwd` is where relative paths resolve when the transcript does
    /// not say.
    pub fn new(format: TranscriptFormat, cwd: Option<PathBuf>) -> Self {
        Self { format, cwd }
    }

    /// The format.
    pub fn format(&self) -> TranscriptFormat {
        self.format
    }

    /// The calls on one line (`Err`: the line is malformed, and why).
    pub fn line(&mut self, line: &Value) -> Result<Vec<TranscriptCall>, String> {
        let Some(obj) = line.as_object() else {
            return Err("a line is a JSON object".into());
        };
        match self.format {
            TranscriptFormat::WardenCalls => self.warden_line(obj).map(|c| vec![c]),
            TranscriptFormat::ClaudeCode => self.claude_line(obj),
            TranscriptFormat::Codex => self.codex_line(obj),
        }
    }

    fn warden_line(&self, obj: &serde_json::Map<String, Value>) -> Result<TranscriptCall, String> {
        warden_call(obj, self.cwd.as_deref())
    }

    fn claude_line(
        &self,
        obj: &serde_json::Map<String, Value>,
    ) -> Result<Vec<TranscriptCall>, String> {
        if obj.get("type").and_then(Value::as_str) != Some("assistant") {
            return Ok(Vec::new());
        }
        let Some(content) = obj.get("message").and_then(|m| m.get("content")) else {
            return Ok(Vec::new());
        };
        let Value::Array(blocks) = content else {
            return Ok(Vec::new());
        };
        let cwd = match obj.get("cwd") {
            Some(Value::String(c)) if !c.is_empty() => Some(PathBuf::from(c)),
            _ => self.cwd.clone(),
        };
        let time = time_of(obj.get("timestamp"));
        let mut out = Vec::new();
        for (i, block) in blocks.iter().enumerate() {
            if block.get("type").and_then(Value::as_str) != Some("tool_use") {
                continue;
            }
            let name = match block.get("name") {
                Some(Value::String(n)) if !n.is_empty() => n.clone(),
                _ => return Err(format!("content block {i}: a tool_use without a name")),
            };
            let input = match block.get("input") {
                Some(v @ Value::Object(_)) => v.clone(),
                _ => {
                    return Err(format!(
                        "content block {i}: `input` of {name} is not an object"
                    ));
                }
            };
            out.push(TranscriptCall {
                time: time.clone(),
                call: claude_code::to_call(&name, &input, cwd.as_deref()),
                provider_tool: name,
                subjects: None,
            });
        }
        Ok(out)
    }

    fn codex_line(
        &mut self,
        obj: &serde_json::Map<String, Value>,
    ) -> Result<Vec<TranscriptCall>, String> {
        let time = time_of(obj.get("timestamp"));
        let ty = obj.get("type").and_then(Value::as_str);
        let item = match ty {
            Some("session_meta" | "turn_context") => {
                if let Some(c) = obj
                    .get("payload")
                    .and_then(|p| p.get("cwd"))
                    .and_then(Value::as_str)
                {
                    self.cwd = Some(PathBuf::from(c));
                }
                return Ok(Vec::new());
            }
            Some("response_item") => match obj.get("payload") {
                Some(Value::Object(p)) => p,
                _ => return Err("a response_item without a payload object".into()),
            },
            _ => obj,
        };
        let call = match item.get("type").and_then(Value::as_str) {
            Some("function_call") => {
                let name = item_name(item, "function_call")?;
                let args: Value = match item.get("arguments") {
                    Some(Value::String(text)) => serde_json::from_str(text)
                        .map_err(|e| format!("the arguments of {name} are not JSON: {e}"))?,
                    Some(v @ Value::Object(_)) => v.clone(),
                    _ => return Err(format!("{name}: `arguments` must be a JSON string")),
                };
                self.codex_function(name, &args)?
            }
            Some("local_shell_call") => {
                let action = item
                    .get("action")
                    .ok_or("a local_shell_call without an action")?;
                let argv = argv_of(action.get("command"))
                    .ok_or("a local_shell_call whose command is not an array of strings")?;
                let cwd = action
                    .get("working_directory")
                    .and_then(Value::as_str)
                    .map(PathBuf::from);
                self.codex_argv("local_shell_call", &argv, cwd)
            }
            Some("custom_tool_call") => {
                let name = item_name(item, "custom_tool_call")?;
                let input = item.get("input").cloned().unwrap_or(Value::Null);
                match (name, &input) {
                    ("apply_patch", Value::String(patch)) => {
                        self.codex_patch(name, patch, self.cwd.clone())
                    }
                    _ => self.own_name(name, json!({ "input": input }), self.cwd.clone()),
                }
            }
            _ => return Ok(Vec::new()),
        };
        Ok(vec![TranscriptCall { time, ..call }])
    }

    fn codex_function(&self, name: &str, args: &Value) -> Result<TranscriptCall, String> {
        let cwd = args
            .get("workdir")
            .and_then(Value::as_str)
            .map(PathBuf::from)
            .or_else(|| self.cwd.clone());
        match name {
            "shell" | "container.exec" | "shell_command" | "local_shell" | "exec_command" => {
                let command = args.get("command").or_else(|| args.get("cmd"));
                match command {
                    Some(Value::String(script)) => Ok(self.bash(name, script.clone(), cwd)),
                    Some(v) => {
                        let argv = argv_of(Some(v)).ok_or_else(|| {
                            format!("{name}: `command` must be a string or an array of strings")
                        })?;
                        Ok(self.codex_argv(name, &argv, cwd))
                    }
                    None => Ok(self.own_name_bash_missing(name, cwd)),
                }
            }
            "apply_patch" => match args.get("input").or_else(|| args.get("patch")) {
                Some(Value::String(patch)) => Ok(self.codex_patch(name, patch, cwd)),
                _ => Ok(self.codex_patch(name, "", cwd)),
            },
            _ => Ok(self.own_name(name, args.clone(), cwd)),
        }
    }

    fn codex_argv(&self, provider: &str, argv: &[String], cwd: Option<PathBuf>) -> TranscriptCall {
        let cwd = cwd.or_else(|| self.cwd.clone());
        if let [program, patch] = argv
            && program == "apply_patch"
        {
            return self.codex_patch(provider, patch, cwd);
        }
        self.bash(provider, command_of_argv(argv), cwd)
    }

    fn bash(&self, provider: &str, command: String, cwd: Option<PathBuf>) -> TranscriptCall {
        provided(provider, "bash", json!({ "command": command }), cwd)
    }

    fn own_name_bash_missing(&self, provider: &str, cwd: Option<PathBuf>) -> TranscriptCall {
        // A shell call without a command: decided as `bash` with the field missing.
        provided(provider, "bash", json!({}), cwd)
    }

    fn own_name(&self, name: &str, args: Value, cwd: Option<PathBuf>) -> TranscriptCall {
        let tool = name
            .strip_prefix("mcp__")
            .filter(|r| !r.is_empty())
            .unwrap_or(name);
        provided(name, tool, args, cwd)
    }

    fn codex_patch(&self, provider: &str, patch: &str, cwd: Option<PathBuf>) -> TranscriptCall {
        let files = patch_files(patch);
        let (tool, args) = match files.as_slice() {
            [(tool, one)] => (*tool, json!({ "path": one })),
            _ => (
                "edit",
                json!({ "paths": files.iter().map(|(_, p)| p.clone()).collect::<Vec<_>>() }),
            ),
        };
        let subjects = (files.len() > 1).then(|| {
            files
                .iter()
                .map(|(tool, path)| Subject {
                    tool: (*tool).to_owned(),
                    text: path.clone(),
                    args: json!({ "path": path }),
                    constrain: false,
                })
                .collect()
        });
        TranscriptCall {
            subjects,
            ..provided(provider, tool, args, cwd)
        }
    }
}

/// The provider's `provider` call as the Warden call `tool` with `args`, run in `cwd` (no time,
/// no subjects).
fn provided(provider: &str, tool: &str, args: Value, cwd: Option<PathBuf>) -> TranscriptCall {
    let mut call = Call::new(tool, args);
    call.cwd = cwd;
    TranscriptCall {
        time: None,
        provider_tool: provider.to_owned(),
        call,
        subjects: None,
    }
}

/// One line of Warden's call log, the format `warden check --calls` and `warden replay` both
/// read: `{"tool":…,"args":{…}}` with an optional `"time"` (a string, kept, never decided on)
/// and an optional `"cwd"` (where the call's relative paths resolve; relative to `default_cwd`,
/// which also applies when it is absent). Any other key is an error, so a misspelt key is never
/// silently dropped.
///
/// ```
/// use warden_harness::transcript::warden_call;
/// let line = serde_json::json!({"tool": "read", "args": {"path": "a"}, "time": "t", "cwd": "src"});
/// let call = warden_call(line.as_object().unwrap(), Some(std::path::Path::new("/repo")))?;
/// assert_eq!(call.call.tool, "read");
/// assert_eq!(call.time.as_deref(), Some("t"));
/// assert_eq!(call.call.cwd.as_deref(), Some(std::path::Path::new("/repo/src")));
/// let bad = serde_json::json!({"tool": "read", "args": {}, "when": 1});
/// assert!(warden_call(bad.as_object().unwrap(), None).unwrap_err().contains("unknown key `when`"));
/// # Ok::<(), String>(())
/// ```
pub fn warden_call(
    obj: &serde_json::Map<String, Value>,
    default_cwd: Option<&Path>,
) -> Result<TranscriptCall, String> {
    if let Some(key) = obj
        .keys()
        .find(|k| !matches!(k.as_str(), "tool" | "args" | "time" | "cwd"))
    {
        return Err(format!(
            "unknown key `{key}` (a call is {{\"tool\":…,\"args\":…}} with an optional \"time\" \
             and \"cwd\")"
        ));
    }
    let tool = match obj.get("tool") {
        Some(Value::String(t)) if !t.is_empty() => t.clone(),
        _ => return Err("`tool` must be a non-empty string".into()),
    };
    let args = match obj.get("args") {
        Some(a @ Value::Object(_)) => a.clone(),
        Some(_) => return Err("`args` must be a JSON object".into()),
        None => return Err("`args` is missing".into()),
    };
    let time = match obj.get("time") {
        Some(Value::String(t)) => Some(t.clone()),
        Some(Value::Null) | None => None,
        Some(_) => return Err("`time` must be a string (the call's timestamp)".into()),
    };
    let cwd = match obj.get("cwd") {
        Some(Value::String(c)) => Some(match default_cwd {
            Some(base) => base.join(c),
            None => PathBuf::from(c),
        }),
        Some(Value::Null) | None => default_cwd.map(Path::to_path_buf),
        Some(_) => return Err("`cwd` must be a string".into()),
    };
    let mut call = Call::new(tool.clone(), args);
    call.cwd = cwd;
    Ok(TranscriptCall {
        time,
        provider_tool: tool,
        call,
        subjects: None,
    })
}

fn time_of(v: Option<&Value>) -> Option<String> {
    match v {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    }
}

/// A Codex item's tool name (a `what` without one is an error).
fn item_name<'i>(item: &'i serde_json::Map<String, Value>, what: &str) -> Result<&'i str, String> {
    item.get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("a {what} without a name"))
}

fn argv_of(v: Option<&Value>) -> Option<Vec<String>> {
    v?.as_array()?
        .iter()
        .map(|w| w.as_str().map(str::to_owned))
        .collect()
}

/// The shell command an argv stands for: the script of `bash -lc SCRIPT` (also `sh`, `zsh`,
/// `-c`), else the words quoted so the shell splitter reads back the same argv.
pub fn command_of_argv(argv: &[String]) -> String {
    if let [shell, flag, script, ..] = argv {
        let name = Path::new(shell)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(shell);
        if matches!(name, "bash" | "sh" | "zsh") && matches!(flag.as_str(), "-c" | "-lc" | "-cl") {
            return script.clone();
        }
    }
    argv.iter()
        .map(|w| quote_word(w))
        .collect::<Vec<_>>()
        .join(" ")
}

fn quote_word(w: &str) -> String {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c));
    if plain {
        w.to_owned()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// The files an `apply_patch` envelope touches: `write` for an added file, `edit` for an
/// updated, deleted or moved one, in order.
pub fn patch_files(patch: &str) -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = Vec::new();
    for line in patch.lines() {
        let found = [
            ("*** Add File: ", "write"),
            ("*** Update File: ", "edit"),
            ("*** Delete File: ", "edit"),
            ("*** Move to: ", "write"),
        ]
        .iter()
        .find_map(|(prefix, tool)| line.strip_prefix(prefix).map(|p| (*tool, p.trim())));
        if let Some((tool, path)) = found
            && !path.is_empty()
            && !out.iter().any(|(t, p)| *t == tool && p == path)
        {
            out.push((tool, path.to_owned()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn detects_each_format() {
        let d = |s: &str| TranscriptFormat::detect(&serde_json::from_str(s).unwrap());
        assert_eq!(
            d(r#"{"tool":"bash","args":{}}"#),
            Some(TranscriptFormat::WardenCalls)
        );
        assert_eq!(
            d(r#"{"type":"assistant","message":{"content":[]},"uuid":"u"}"#),
            Some(TranscriptFormat::ClaudeCode)
        );
        assert_eq!(
            d(r#"{"type":"summary","summary":"x","leafUuid":"u"}"#),
            Some(TranscriptFormat::ClaudeCode)
        );
        assert_eq!(
            d(r#"{"type":"session_meta","payload":{}}"#),
            Some(TranscriptFormat::Codex)
        );
        assert_eq!(
            d(r#"{"type":"function_call","name":"shell"}"#),
            Some(TranscriptFormat::Codex)
        );
        assert_eq!(d(r#"{"hello":1}"#), None);
    }

    #[test]
    fn argv_becomes_a_command_the_splitter_reads_back() {
        let v = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            command_of_argv(&v(&["bash", "-lc", "ls && pwd"])),
            "ls && pwd"
        );
        assert_eq!(command_of_argv(&v(&["/bin/sh", "-c", "x"])), "x");
        assert_eq!(
            command_of_argv(&v(&["rg", "-n", "a b", "it's"])),
            "rg -n 'a b' 'it'\\''s'"
        );
    }

    #[test]
    fn patches_name_their_files() {
        let p = "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: src/b.rs\n@@\n*** Delete File: c\n*** End Patch\n";
        assert_eq!(
            patch_files(p),
            [
                ("write", "a.txt".to_owned()),
                ("edit", "src/b.rs".to_owned()),
                ("edit", "c".to_owned())
            ]
        );
    }
}
