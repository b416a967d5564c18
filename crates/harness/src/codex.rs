//! Codex: the `PreToolUse` hook protocol (docs/codex.md), the tool mapping, and the
//! `config.toml` fragment that installs the hook.
//!
//! Codex can only *block*: it has no allow that skips its own approval and no ask, and it fails
//! open on everything but a block it can read (exit 2 with a non-empty stderr, or a strict JSON
//! deny). So a deny and an ask are both exit 2 with the reason on stderr (an ask says approval
//! is required), an allow prints nothing and exits 0, and every failure the caller meets must
//! become [`block`].
//!
//! ```
//! use warden_harness::codex;
//! let event = r#"{"session_id":"s","cwd":"/repo","hook_event_name":"PreToolUse",
//!   "tool_name":"apply_patch","tool_input":{"command":"*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"},
//!   "tool_use_id":"c1"}"#;
//! let request = codex::parse_event(event)?;
//! let mapped = codex::to_call(&request)?;
//! let subjects = mapped.subjects.unwrap().unwrap();
//! assert_eq!((subjects[0].tool.as_str(), subjects[0].args["path"].as_str()), ("write", Some("/repo/a.txt")));
//! # Ok::<(), warden_harness::hook::HookError>(())
//! ```

use std::path::Path;

use serde_json::{Value, json};
use warden_policy::{Call, Decision, Subject};

use crate::hook::{HookAnswer, HookError, Mapped, ToolRequest, parse_request};

/// The provider's name in journals and reports.
pub const PROVIDER: &str = "codex";

/// The event Codex sends before a tool runs.
pub const EVENT: &str = "PreToolUse";

/// Reasons are cut to this many characters (Codex shows them to the model and the user).
pub const MAX_REASON_CHARS: usize = 4_000;

/// Parses one `PreToolUse` event.
pub fn parse_event(text: &str) -> Result<ToolRequest, HookError> {
    parse_request(text, EVENT).map(|(request, _)| request)
}

/// Maps a Codex call to the Warden call that decides it: `Bash` → `bash` (`command`),
/// `apply_patch` → one `write`/`edit` subject per file the patch touches (a patch that does not
/// parse is denied), `mcp__server__tool` → `server__tool` with its arguments. Any other tool is
/// [`HookError::UnknownTool`].
pub fn to_call(request: &ToolRequest) -> Result<Mapped, HookError> {
    let cwd = request.cwd.as_path();
    let name = request.tool_name.as_str();
    if let Some(rest) = name.strip_prefix("mcp__")
        && rest
            .split_once("__")
            .is_some_and(|(s, t)| !s.is_empty() && !t.is_empty())
    {
        let args = match &request.tool_input {
            Value::Object(_) => request.tool_input.clone(),
            // Arguments Codex could not parse as JSON arrive as a string.
            other => json!({ "arguments": other }),
        };
        return Ok(Mapped::call(Call::new(rest, args).with_cwd(cwd)));
    }
    let command = || -> Result<String, HookError> {
        request
            .tool_input
            .get("command")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or(HookError::WrongType {
                field: "tool_input.command",
                want: "a string",
            })
    };
    match name {
        "Bash" => Ok(Mapped::call(
            Call::new("bash", json!({ "command": command()? })).with_cwd(cwd),
        )),
        "apply_patch" => Ok(patch_call(&command()?, cwd)),
        _ => Err(HookError::UnknownTool(name.to_owned())),
    }
}

/// An `apply_patch` call: `edit` on the files it touches, decided per file.
fn patch_call(patch: &str, cwd: &Path) -> Mapped {
    let subjects = parse_patch(patch).map(|files| {
        files
            .into_iter()
            .map(|(tool, path)| {
                let path = cwd.join(path).to_string_lossy().into_owned();
                Subject {
                    tool: tool.to_owned(),
                    text: format!("{tool} {path}"),
                    args: json!({ "path": path }),
                    constrain: false,
                }
            })
            .collect()
    });
    Mapped {
        call: Call::new("edit", json!({ "patch": patch })).with_cwd(cwd),
        subjects: Some(subjects),
    }
}

/// The files a patch touches, in order: `write` for an added file and a move's destination,
/// `edit` for an updated, deleted or moved file. Strict: the envelope must be exact, every
/// line must belong to a hunk of the grammar, and every path must be non-empty; anything else is
/// `Err` (a patch Warden cannot read is never guessed at).
pub fn parse_patch(patch: &str) -> Result<Vec<(&'static str, String)>, String> {
    #[derive(PartialEq)]
    enum In {
        Start,
        Add,
        Update,
        Delete,
        End,
    }
    let mut files: Vec<(&'static str, String)> = Vec::new();
    let mut state = In::Start;
    let mut begun = false;
    let mut just_updated = false;
    let fail = |n: usize, why: &str| Err(format!("the patch does not parse (line {n}): {why}"));
    for (i, line) in patch.lines().enumerate() {
        let n = i + 1;
        if !begun {
            if line.trim() != "*** Begin Patch" {
                return fail(n, "it must start with `*** Begin Patch`");
            }
            begun = true;
            continue;
        }
        if state == In::End {
            if line.trim().is_empty() {
                continue;
            }
            return fail(n, "text after `*** End Patch`");
        }
        let header = [
            ("*** Add File: ", "write", In::Add),
            ("*** Update File: ", "edit", In::Update),
            ("*** Delete File: ", "edit", In::Delete),
        ]
        .into_iter()
        .find_map(|(prefix, tool, next)| line.strip_prefix(prefix).map(|p| (p, tool, next)));
        if let Some((path, tool, next)) = header {
            let path = path.trim();
            if path.is_empty() {
                return fail(n, "a file header without a path");
            }
            files.push((tool, path.to_owned()));
            just_updated = next == In::Update;
            state = next;
            continue;
        }
        if let Some(path) = line.strip_prefix("*** Move to: ") {
            let path = path.trim();
            if !just_updated || path.is_empty() {
                return fail(
                    n,
                    "`*** Move to:` must follow `*** Update File:` and name a path",
                );
            }
            files.push(("write", path.to_owned()));
            just_updated = false;
            continue;
        }
        just_updated = false;
        if line.trim() == "*** End Patch" {
            state = In::End;
            continue;
        }
        let fits = match state {
            In::Start => false,
            In::Add => line.starts_with('+'),
            In::Update => {
                line.starts_with("@@")
                    || line.starts_with([' ', '+', '-'])
                    || line.is_empty()
                    || line == "*** End of File"
            }
            In::Delete | In::End => false,
        };
        if !fits {
            return fail(n, "a line that belongs to no hunk of the patch grammar");
        }
    }
    if state != In::End {
        return Err("the patch does not parse: it must end with `*** End Patch`".into());
    }
    if files.is_empty() {
        return Err("the patch does not parse: it touches no file".into());
    }
    Ok(files)
}

/// The answer for a decision: allow → nothing, exit 0 (Codex's own approval and sandbox still
/// apply); ask and deny → exit 2 with the reason on stderr (Codex cannot hold a call for a
/// prompt, so an ask blocks, saying approval is required).
pub fn answer(decision: Decision, reason: &str) -> HookAnswer {
    match decision {
        Decision::Allow => HookAnswer {
            stdout: None,
            stderr: None,
            code: 0,
        },
        Decision::Ask => block(&format!(
            "approval required, and Codex's hooks cannot ask: {reason}"
        )),
        Decision::Deny => block(reason),
    }
}

/// The blocking answer: exit 2 with a non-empty reason on stderr (Codex ignores an exit 2
/// whose stderr is empty), nothing on stdout.
pub fn block(reason: &str) -> HookAnswer {
    let reason = reason.trim();
    let reason = if reason.is_empty() {
        "blocked by Warden"
    } else {
        reason
    };
    HookAnswer {
        stdout: None,
        stderr: Some(crate::claude_code::truncate(reason, MAX_REASON_CHARS)),
        code: 2,
    }
}

/// The `config.toml` fragment that installs the hook: every tool (`matcher = "*"`), the command
/// as a shell string, a timeout in seconds.
pub fn hook_settings(command_line: &str, timeout_secs: u32) -> Result<String, toml::ser::Error> {
    let mut handler = toml::Table::new();
    handler.insert("type".into(), toml::Value::String("command".into()));
    handler.insert(
        "command".into(),
        toml::Value::String(command_line.to_owned()),
    );
    handler.insert(
        "timeout".into(),
        toml::Value::Integer(i64::from(timeout_secs)),
    );
    handler.insert(
        "statusMessage".into(),
        toml::Value::String("Checking the Warden policy".into()),
    );
    let mut group = toml::Table::new();
    group.insert("matcher".into(), toml::Value::String("*".into()));
    group.insert(
        "hooks".into(),
        toml::Value::Array(vec![toml::Value::Table(handler)]),
    );
    let mut hooks = toml::Table::new();
    hooks.insert(
        EVENT.into(),
        toml::Value::Array(vec![toml::Value::Table(group)]),
    );
    let mut root = toml::Table::new();
    root.insert("hooks".into(), toml::Value::Table(hooks));
    toml::to_string(&root)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_patch_names_each_file_it_touches() {
        let p = "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: src/b.rs\n*** Move to: src/c.rs\n@@ fn x\n-a\n+b\n ctx\n*** Delete File: d\n*** End Patch\n";
        assert_eq!(
            parse_patch(p).unwrap(),
            [
                ("write", "a.txt".to_owned()),
                ("edit", "src/b.rs".to_owned()),
                ("write", "src/c.rs".to_owned()),
                ("edit", "d".to_owned()),
            ]
        );
    }

    #[test]
    fn a_patch_outside_the_grammar_is_refused() {
        for bad in [
            "",
            "*** Add File: a\n+x\n*** End Patch\n",
            "*** Begin Patch\n*** Add File: a\n+x\n",
            "*** Begin Patch\n*** Add File: a\nx\n*** End Patch\n",
            "*** Begin Patch\n*** Add File: \n*** End Patch\n",
            "*** Begin Patch\n*** End Patch\n",
            "*** Begin Patch\n*** Delete File: a\n+x\n*** End Patch\n",
            "*** Begin Patch\n*** Add File: a\n*** Move to: b\n*** End Patch\n",
            "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\nrm -rf /\n",
            "*** Begin Patch\n*** Frobnicate File: a\n*** End Patch\n",
        ] {
            assert!(parse_patch(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_settings_fragment_is_toml_codex_reads() {
        let text = hook_settings("/bin/warden hook codex --policy '/a b.toml'", 5).unwrap();
        let v: toml::Value = toml::from_str(&text).unwrap();
        let group = &v["hooks"]["PreToolUse"][0];
        assert_eq!(group["matcher"].as_str(), Some("*"));
        let handler = &group["hooks"][0];
        assert_eq!(handler["type"].as_str(), Some("command"));
        assert_eq!(
            handler["command"].as_str(),
            Some("/bin/warden hook codex --policy '/a b.toml'")
        );
        assert_eq!(handler["timeout"].as_integer(), Some(5));
    }
}
