//! Gemini CLI: the `BeforeTool` hook protocol (docs/gemini.md), the tool mapping, and the
//! `settings.json` fragment that installs the hook.
//!
//! Gemini reads a JSON object on stdout whatever the exit code: `{"decision":"deny","reason":…}`
//! blocks, `{"decision":"ask",…}` forces its confirmation prompt, and nothing lets its own policy
//! decide. It fails open on a timeout, a crash that exits 1, a signal and an exit with no
//! output, so every failure the caller meets must become [`block`], which answers with both a
//! JSON deny on stdout and exit 2 with the reason on stderr.
//!
//! ```
//! use warden_harness::gemini;
//! let event = r#"{"session_id":"s","cwd":"/repo","hook_event_name":"BeforeTool",
//!   "timestamp":"2026-08-21T16:16:56.123Z","tool_name":"replace",
//!   "tool_input":{"file_path":"src/app.ts","old_string":"a","new_string":"b"}}"#;
//! let request = gemini::parse_event(event)?;
//! let mapped = gemini::to_call(&request)?;
//! assert_eq!(mapped.call.tool, "edit");
//! assert_eq!(mapped.call.args["path"], "src/app.ts");
//! # Ok::<(), warden_harness::hook::HookError>(())
//! ```

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use warden_policy::{Call, Decision, Subject};

use crate::hook::{HookAnswer, HookError, Mapped, ToolRequest, parse_request};

/// The provider's name in journals and reports.
pub const PROVIDER: &str = "gemini";

/// The event Gemini CLI sends before a tool runs.
pub const EVENT: &str = "BeforeTool";

/// Reasons are cut to this many characters.
pub const MAX_REASON_CHARS: usize = 4_000;

/// Gemini's own tools that act only inside the conversation (plans, questions, topics): decided
/// under their own names, so a policy can allow them (`allow = ["write_todos"]`).
pub const CONVERSATION_TOOLS: &[&str] = &[
    "write_todos",
    "ask_user",
    "activate_skill",
    "enter_plan_mode",
    "exit_plan_mode",
    "update_topic",
    "complete_task",
    "get_internal_docs",
    "list_mcp_resources",
    "read_mcp_resource",
    "google_web_search",
];

/// Parses one `BeforeTool` event (its `mcp_context`, when present, is kept for the mapping).
pub fn parse_event(text: &str) -> Result<ToolRequest, HookError> {
    let (mut request, obj) = parse_request(text, EVENT)?;
    request.context = obj.get("mcp_context").filter(|v| !v.is_null()).cloned();
    if !request.tool_input.is_object() {
        return Err(HookError::WrongType {
            field: "tool_input",
            want: "an object",
        });
    }
    Ok(request)
}

/// Maps a Gemini call to the Warden call that decides it: `run_shell_command` → `bash` (in
/// `dir_path` under the event's `cwd`), `write_file` → `write`, `replace` → `edit`,
/// `read_file` → `read`, `read_many_files` → one `read` subject per `include` entry (a glob
/// reads under its fixed prefix), `list_directory` → `list`, `glob` and
/// `grep_search`/`search_file_content` → `read` of the folder searched, `web_fetch` → one
/// `web_fetch` subject per URL in its prompt (none: denied), an MCP tool → `server__tool`
/// from its `mcp_context`, the [`CONVERSATION_TOOLS`] under their own names. Any other tool is
/// [`HookError::UnknownTool`].
pub fn to_call(request: &ToolRequest) -> Result<Mapped, HookError> {
    let cwd = request.cwd.as_path();
    let input = &request.tool_input;
    let field = |name: &str| input.get(name).and_then(Value::as_str);
    let path_call = |tool: &str, path: Option<&str>| {
        let args = match path {
            Some(p) => json!({ "path": p }),
            None => json!({}),
        };
        Mapped::call(Call::new(tool, args).with_cwd(cwd))
    };
    let folder = || {
        field("dir_path")
            .map_or_else(|| cwd.to_path_buf(), |d| cwd.join(d))
            .to_string_lossy()
            .into_owned()
    };
    let name = request.tool_name.as_str();
    Ok(match name {
        "run_shell_command" => {
            let command = field("command").ok_or(HookError::WrongType {
                field: "tool_input.command",
                want: "a string",
            })?;
            let dir: PathBuf = field("dir_path").map_or_else(|| cwd.to_path_buf(), |d| cwd.join(d));
            Mapped::call(Call::new("bash", json!({ "command": command })).with_cwd(dir))
        }
        "write_file" => path_call("write", field("file_path")),
        "replace" => path_call("edit", field("file_path")),
        "read_file" => path_call("read", field("file_path")),
        "list_directory" => path_call("list", Some(&folder())),
        "glob" | "grep_search" | "search_file_content" => path_call("read", Some(&folder())),
        "read_many_files" => many_files(input, cwd),
        "web_fetch" => web_fetch(field("prompt").unwrap_or_default(), cwd),
        _ if request.context.is_some() => mcp_call(request)?,
        _ if CONVERSATION_TOOLS.contains(&name) => {
            Mapped::call(Call::new(name, input.clone()).with_cwd(cwd))
        }
        _ => return Err(HookError::UnknownTool(name.to_owned())),
    })
}

/// An MCP tool: `server__tool` from `mcp_context` (the sanitised `mcp_<server>_<tool>` name
/// cannot be split reliably, so it is never read).
fn mcp_call(request: &ToolRequest) -> Result<Mapped, HookError> {
    let context = request.context.as_ref();
    let part = |key: &str| {
        context
            .and_then(|c| c.get(key))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let (Some(server), Some(tool)) = (part("server_name"), part("tool_name")) else {
        return Err(HookError::WrongType {
            field: "mcp_context",
            want: "an object naming `server_name` and `tool_name`",
        });
    };
    Ok(Mapped::call(
        Call::new(format!("{server}__{tool}"), request.tool_input.clone())
            .with_cwd(request.cwd.as_path()),
    ))
}

/// `read_many_files`: one `read` per `include` entry; a pattern reads under its fixed prefix
/// (what it matches cannot be known before it runs).
fn many_files(input: &Value, cwd: &Path) -> Mapped {
    let includes: Result<Vec<String>, String> = match input.get("include") {
        Some(Value::String(one)) => Ok(vec![one.clone()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| "`include` holds something that is not a path".to_owned())
            })
            .collect(),
        _ => Err("read_many_files without `include`".to_owned()),
    };
    let subjects = includes.and_then(|includes| {
        if includes.is_empty() {
            return Err("read_many_files with an empty `include`".to_owned());
        }
        let mut subjects = Vec::new();
        for pattern in &includes {
            let prefix = fixed_prefix(pattern);
            let path = cwd.join(&prefix).to_string_lossy().into_owned();
            subjects.push(Subject {
                tool: "read".into(),
                text: format!("read {pattern}"),
                args: json!({ "path": path }),
                constrain: false,
            });
            if prefix != *pattern {
                // The pattern itself, as a constraint: a deny or ask rule written for what it
                // names (`read(**/.env)`) still matches, though no allow is needed for it.
                subjects.push(Subject {
                    tool: "read".into(),
                    text: format!("read {pattern}"),
                    args: json!({ "path": cwd.join(pattern).to_string_lossy() }),
                    constrain: true,
                });
            }
        }
        Ok(subjects)
    });
    Mapped {
        call: Call::new("read", input.clone()).with_cwd(cwd),
        subjects: Some(subjects),
    }
}

/// The part of a path pattern before its first component with a glob character (the pattern
/// itself when it has none; `.` when it starts with one).
fn fixed_prefix(pattern: &str) -> String {
    let glob = |c: char| "*?[]{}".contains(c);
    if !pattern.contains(glob) {
        return pattern.to_owned();
    }
    let fixed: Vec<&str> = pattern
        .split('/')
        .take_while(|part| !part.contains(glob))
        .collect();
    if fixed.is_empty() {
        ".".into()
    } else if fixed == [""] {
        "/".into()
    } else {
        fixed.join("/")
    }
}

/// `web_fetch`: one subject per URL in the prompt; a prompt without one is denied.
fn web_fetch(prompt: &str, cwd: &Path) -> Mapped {
    let urls: Vec<&str> = prompt
        .split(|c: char| c.is_whitespace() || "<>\"'()[]".contains(c))
        .filter(|w| w.starts_with("http://") || w.starts_with("https://"))
        .map(|w| w.trim_end_matches(['.', ',', ';', ':', '!', '?']))
        .collect();
    let subjects = if urls.is_empty() {
        Err("web_fetch with no http(s) URL in its prompt".to_owned())
    } else {
        Ok(urls
            .iter()
            .map(|url| Subject {
                tool: "web_fetch".into(),
                text: format!("web_fetch {url}"),
                args: json!({ "url": url }),
                constrain: false,
            })
            .collect())
    };
    Mapped {
        call: Call::new("web_fetch", json!({ "prompt": prompt })).with_cwd(cwd),
        subjects: Some(subjects),
    }
}

/// The answer for a decision: allow → nothing, exit 0 (Gemini's own policy still decides);
/// ask → `{"decision":"ask",…}`, exit 0 (Gemini's prompt is forced); deny → [`block`].
pub fn answer(decision: Decision, reason: &str) -> HookAnswer {
    let reason = crate::claude_code::truncate(reason, MAX_REASON_CHARS);
    match decision {
        Decision::Allow => HookAnswer {
            stdout: None,
            stderr: None,
            code: 0,
        },
        Decision::Ask => HookAnswer {
            stdout: Some(
                json!({"decision": "ask", "reason": reason, "systemMessage": reason}).to_string(),
            ),
            stderr: None,
            code: 0,
        },
        Decision::Deny => block(&reason),
    }
}

/// The blocking answer: a JSON deny on stdout (read whatever the exit code) and exit 2 with the
/// reason on stderr (blocking on its own should stdout be lost).
pub fn block(reason: &str) -> HookAnswer {
    let reason = reason.trim();
    let reason = crate::claude_code::truncate(
        if reason.is_empty() {
            "blocked by Warden"
        } else {
            reason
        },
        MAX_REASON_CHARS,
    );
    HookAnswer {
        stdout: Some(json!({"decision": "deny", "reason": reason}).to_string()),
        stderr: Some(reason),
        code: 2,
    }
}

/// The `settings.json` fragment that installs the hook: hooks on, every tool (`matcher`
/// `*`), the command as a shell string, a timeout in milliseconds.
pub fn hook_settings(command_line: &str, timeout_ms: u32) -> Value {
    json!({
        "hooksConfig": { "enabled": true },
        "hooks": {
            EVENT: [{
                "matcher": "*",
                "hooks": [{
                    "name": "warden",
                    "type": "command",
                    "command": command_line,
                    "timeout": timeout_ms,
                    "description": "Warden policy check: every tool call is decided before it runs",
                }]
            }]
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_pattern_reads_under_its_fixed_prefix() {
        assert_eq!(fixed_prefix("src/main.rs"), "src/main.rs");
        assert_eq!(fixed_prefix("src/**/*.rs"), "src");
        assert_eq!(fixed_prefix("**/.env"), ".");
        assert_eq!(fixed_prefix("/etc/*.conf"), "/etc");
        assert_eq!(fixed_prefix("/*"), "/");
    }
}
