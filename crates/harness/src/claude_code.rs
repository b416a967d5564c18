//! Claude Code: the `PreToolUse`/`PostToolUse` hook protocol, the tool mapping, the
//! `settings.json` fragment that installs the hook, and the import of Claude Code's own
//! permission rules (the protocol: `docs/design/hooks.md#claude-code`).
//!
//! Claude Code fails *open*: any exit code but 2, a crash, a timeout or unparseable output lets
//! the call proceed. So this module only parses and formats; the caller maps every failure to
//! exit 2.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use warden_policy::{
    Decision, Format, ListKind, LoadedPolicy, PathEnv, PolicyFile, PolicySnapshot, Rule, RuleList,
    SourceDecl, Verdict,
};

use crate::error::HarnessError;
use crate::report::{Entry, Status, TranslationReport};

/// The provider's name in journals and reports.
pub const PROVIDER: &str = "claude-code";

/// Claude Code caps hook output strings at 10,000 characters; reasons are cut well below.
pub const MAX_REASON_CHARS: usize = 9_000;

/// One row of the tool mapping: a Claude Code tool, the Warden tool that decides it, and the
/// argument renamed on the way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolMapping {
    /// Claude Code's tool name (`mcp__server__tool` stands for every MCP tool).
    pub claude: &'static str,
    /// The Warden tool (`server__tool` for MCP tools).
    pub warden: &'static str,
    /// `(from, to)`: the argument renamed to the Warden tool's built-in field.
    pub rename: Option<(&'static str, &'static str)>,
    /// What else happens.
    pub note: &'static str,
}

/// The tool mapping, shared by `warden hook claude-code` and `warden replay`. Any tool not
/// listed is decided under its own name with its arguments unchanged.
pub const TOOL_MAPPING: &[ToolMapping] = &[
    ToolMapping {
        claude: "Bash",
        warden: "bash",
        rename: None,
        note: "`command` is split into subjects by the shell splitter",
    },
    ToolMapping {
        claude: "Read",
        warden: "read",
        rename: Some(("file_path", "path")),
        note: "",
    },
    ToolMapping {
        claude: "Edit",
        warden: "edit",
        rename: Some(("file_path", "path")),
        note: "",
    },
    ToolMapping {
        claude: "MultiEdit",
        warden: "edit",
        rename: Some(("file_path", "path")),
        note: "",
    },
    ToolMapping {
        claude: "Write",
        warden: "write",
        rename: Some(("file_path", "path")),
        note: "",
    },
    ToolMapping {
        claude: "NotebookEdit",
        warden: "edit",
        rename: Some(("notebook_path", "path")),
        note: "",
    },
    ToolMapping {
        claude: "Glob",
        warden: "read",
        rename: None,
        note: "`path`; a missing `path` is the event's `cwd`",
    },
    ToolMapping {
        claude: "Grep",
        warden: "read",
        rename: None,
        note: "`path`; a missing `path` is the event's `cwd`",
    },
    ToolMapping {
        claude: "WebFetch",
        warden: "web_fetch",
        rename: None,
        note: "`url`, matched by domain",
    },
    ToolMapping {
        claude: "mcp__server__tool",
        warden: "server__tool",
        rename: None,
        note: "the `mcp__` prefix is dropped",
    },
];

/// The Warden tool name for a Claude Code tool.
pub fn warden_tool(claude: &str) -> String {
    if let Some(rest) = claude.strip_prefix("mcp__")
        && !rest.is_empty()
    {
        return rest.to_owned();
    }
    TOOL_MAPPING
        .iter()
        .find(|m| m.claude == claude)
        .map_or_else(|| claude.to_owned(), |m| m.warden.to_owned())
}

/// Maps one Claude Code tool call to the Warden call that decides it (the table
/// [`TOOL_MAPPING`]). `cwd` is the event's working folder: relative paths in the arguments
/// resolve against it, and it stands in for a `Glob`/`Grep` call's missing `path`.
///
/// A mapped field that is missing stays missing: the engine decides such a call (never an
/// allow by a rule with a specifier, a deny when the tool has deny rules with one).
pub fn to_call(tool_name: &str, tool_input: &Value, cwd: Option<&Path>) -> warden_policy::Call {
    let tool = warden_tool(tool_name);
    let mut args = tool_input.clone();
    if let Value::Object(obj) = &mut args {
        let rename = TOOL_MAPPING
            .iter()
            .find(|m| m.claude == tool_name)
            .and_then(|m| m.rename);
        if let Some((from, to)) = rename
            && let Some(v) = obj.remove(from)
        {
            obj.insert(to.to_owned(), v);
        }
        if matches!(tool_name, "Glob" | "Grep")
            && obj.get("path").is_none_or(Value::is_null)
            && let Some(dir) = cwd
        {
            obj.insert(
                "path".into(),
                Value::String(dir.to_string_lossy().into_owned()),
            );
        }
    }
    let call = warden_policy::Call::new(tool, args);
    match cwd {
        Some(dir) => call.with_cwd(dir),
        None => call,
    }
}

/// A tool event from Claude Code.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEvent {
    /// `session_id`, if present.
    pub session_id: Option<String>,
    /// `cwd`, if present.
    pub cwd: Option<PathBuf>,
    /// `tool_name` (always present for `PreToolUse`).
    pub tool_name: Option<String>,
    /// `tool_input` (always an object for `PreToolUse`).
    pub tool_input: Option<Value>,
    /// `tool_use_id`, if present.
    pub tool_use_id: Option<String>,
    /// `tool_response` (`PostToolUse`), if present.
    pub tool_response: Option<Value>,
}

/// The hook events Warden answers.
#[derive(Debug, Clone, PartialEq)]
pub enum HookEvent {
    /// Before a tool runs: decide it.
    PreToolUse(ToolEvent),
    /// After a tool ran: the provider's report of it.
    PostToolUse(ToolEvent),
}

/// Why a hook event cannot be answered (each means exit 2: the call is blocked).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// stdin is not JSON.
    #[error("the hook input is not JSON: {0}")]
    NotJson(String),
    /// stdin is JSON but not an object.
    #[error("the hook input is not a JSON object")]
    NotObject,
    /// `hook_event_name` is missing, not a string, or an event Warden does not answer.
    #[error("unknown hook event {0}: warden answers PreToolUse and PostToolUse")]
    UnknownEvent(String),
    /// A required field is missing.
    #[error("{event} event without `{field}`")]
    Missing {
        /// The event.
        event: &'static str,
        /// The field.
        field: &'static str,
    },
    /// A field has the wrong type.
    #[error("{event} event: `{field}` must be {want}")]
    WrongType {
        /// The event.
        event: &'static str,
        /// The field.
        field: &'static str,
        /// What it must be.
        want: &'static str,
    },
}

/// A string field of `event`'s object ([`crate::hook::opt_string`]), its error in this event's
/// terms.
fn opt_string(
    obj: &Map<String, Value>,
    event: &'static str,
    field: &'static str,
) -> Result<Option<String>, EventError> {
    crate::hook::opt_string(obj, field).map_err(|_| EventError::WrongType {
        event,
        field,
        want: "a string",
    })
}

/// Parses one hook event. Unknown fields are ignored (Claude Code adds fields between
/// versions); `PreToolUse` needs `tool_name` (a non-empty string) and `tool_input` (an object).
pub fn parse_event(text: &str) -> Result<HookEvent, EventError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| EventError::NotJson(e.to_string()))?;
    let Value::Object(obj) = value else {
        return Err(EventError::NotObject);
    };
    let (event, pre) = match obj.get("hook_event_name") {
        Some(Value::String(s)) if s == "PreToolUse" => ("PreToolUse", true),
        Some(Value::String(s)) if s == "PostToolUse" => ("PostToolUse", false),
        Some(Value::String(s)) => return Err(EventError::UnknownEvent(format!("`{s}`"))),
        Some(other) => return Err(EventError::UnknownEvent(other.to_string())),
        None => return Err(EventError::UnknownEvent("(no `hook_event_name`)".into())),
    };
    let tool_name = opt_string(&obj, event, "tool_name")?;
    let tool_input = obj.get("tool_input").filter(|v| !v.is_null()).cloned();
    if pre {
        match &tool_name {
            None => {
                return Err(EventError::Missing {
                    event,
                    field: "tool_name",
                });
            }
            Some(n) if n.is_empty() => {
                return Err(EventError::WrongType {
                    event,
                    field: "tool_name",
                    want: "a non-empty string",
                });
            }
            Some(_) => {}
        }
        match &tool_input {
            None => {
                return Err(EventError::Missing {
                    event,
                    field: "tool_input",
                });
            }
            Some(Value::Object(_)) => {}
            Some(_) => {
                return Err(EventError::WrongType {
                    event,
                    field: "tool_input",
                    want: "an object",
                });
            }
        }
    }
    let e = ToolEvent {
        session_id: opt_string(&obj, event, "session_id")?,
        cwd: opt_string(&obj, event, "cwd")?
            .filter(|c| !c.is_empty())
            .map(PathBuf::from),
        tool_name,
        tool_input,
        tool_use_id: opt_string(&obj, event, "tool_use_id")?,
        tool_response: obj.get("tool_response").cloned(),
    };
    Ok(if pre {
        HookEvent::PreToolUse(e)
    } else {
        HookEvent::PostToolUse(e)
    })
}

/// The `PreToolUse` answer, exactly
/// `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":…,"permissionDecisionReason":…}}`.
pub fn pre_tool_use_output(decision: Decision, reason: &str) -> String {
    json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision.as_str(),
            "permissionDecisionReason": reason,
        }
    })
    .to_string()
}

/// The reason shown for a verdict: the engine's reason, then the rule, its source and (for a
/// compound command) the deciding subject; cut to [`MAX_REASON_CHARS`].
pub fn hook_reason(verdict: &Verdict) -> String {
    let mut cited = Vec::new();
    match (&verdict.rule, &verdict.source) {
        (Some(rule), Some(source)) => cited.push(format!("rule {rule} from source {source}")),
        (Some(rule), None) => cited.push(format!("rule {rule}")),
        (None, _) if verdict.reason.ends_with("by default") => {
            cited.push("no rule matched: the policy's default decided".into());
        }
        (None, _) => {}
    }
    if let Some(subject) = &verdict.subject {
        cited.push(format!("deciding subject \"{subject}\""));
    }
    let text = if cited.is_empty() {
        format!("Warden: {}", verdict.reason)
    } else {
        format!("Warden: {} [{}]", verdict.reason, cited.join("; "))
    };
    truncate(&text, MAX_REASON_CHARS)
}

/// `text` cut to at most `max` characters (an ellipsis marks the cut).
pub fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((i, _)) => format!("{}…", &text[..i]),
    }
}

/// The `settings.json` fragment that installs the hook for `PreToolUse` and `PostToolUse`
/// (matcher `*`, exec form: `command` is the binary, `args` its arguments, no shell).
pub fn hook_settings(command: &str, args: &[String], timeout_secs: u32) -> Value {
    let handler = json!([{
        "matcher": "*",
        "hooks": [{
            "type": "command",
            "command": command,
            "args": args,
            "timeout": timeout_secs,
        }]
    }]);
    json!({
        "hooks": {
            "PreToolUse": handler.clone(),
            "PostToolUse": handler,
        }
    })
}

/// The Claude Code settings scopes, highest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SettingsScope {
    /// `managed-settings.json` (administrators).
    Managed,
    /// `.claude/settings.local.json` (personal, per project).
    Local,
    /// `.claude/settings.json` (shared, per project).
    Project,
    /// `~/.claude/settings.json`.
    User,
}

impl SettingsScope {
    /// The source name: `managed`, `local`, `project`, `user`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Managed => "managed",
            Self::Local => "local",
            Self::Project => "project",
            Self::User => "user",
        }
    }

    /// The source rank inside the imported policy file: Claude Code's precedence (managed 0,
    /// local -10, project -20, user -30; a policy file may only lower its sources' ranks).
    pub fn rank(self) -> i64 {
        match self {
            Self::Managed => 0,
            Self::Local => -10,
            Self::Project => -20,
            Self::User => -30,
        }
    }

    /// The scope a settings file has, from its name and place: `managed-settings.json`,
    /// `settings.local.json`, `settings.json` in `<home>/.claude` (user) or elsewhere
    /// (project).
    pub fn of_path(path: &Path, home: Option<&Path>) -> Option<Self> {
        let name = path.file_name()?.to_str()?;
        match name {
            "managed-settings.json" => Some(Self::Managed),
            "settings.local.json" => Some(Self::Local),
            "settings.json" => {
                let dir = path.parent()?;
                let user = home.is_some_and(|h| dir == h.join(".claude"));
                Some(if user { Self::User } else { Self::Project })
            }
            _ => None,
        }
    }
}

/// One Claude Code settings file to import.
#[derive(Debug, Clone)]
pub struct SettingsFile {
    /// Its scope.
    pub scope: SettingsScope,
    /// Where it was read from (absolute; `/path` rules are relative to its project).
    pub path: PathBuf,
    /// Its text.
    pub text: String,
}

/// The result of an import: a Warden policy file and the report.
#[derive(Debug, Clone)]
pub struct Import {
    /// The policy: one trusted `[[sources]]` entry per settings file, ranked by scope.
    pub policy: PolicyFile,
    /// What translated exactly, approximately (stricter) or not at all.
    pub report: TranslationReport,
}

/// The folder a settings file's `/path` rules are relative to: the project (the folder that
/// holds `.claude/`), or the settings file's own folder.
fn settings_root(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("/"));
    if dir.file_name().is_some_and(|n| n == ".claude") {
        dir.parent().unwrap_or(dir).to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

/// A Claude Code path specifier as a Warden path pattern.
fn import_path(spec: &str, root: &Path) -> String {
    if spec.starts_with("//") || spec.starts_with("~/") {
        return spec.to_owned();
    }
    // `/x` is relative to the settings file's project, `./x` to Claude Code's working folder
    // (taken to be the project): both become absolute. A bare `x` keeps gitignore's "at any
    // depth", which Warden anchors at the project root.
    if let Some(rest) = spec.strip_prefix('/').or_else(|| spec.strip_prefix("./")) {
        let root = root.to_string_lossy();
        let root = root.trim_end_matches('/');
        return format!("{root}/{rest}");
    }
    spec.to_owned()
}

/// One Claude Code rule translated into Warden rules (`Err` = why it cannot be).
fn import_rule(text: &str, list: ListKind, root: &Path) -> (Status, Vec<String>, Option<String>) {
    let parsed = match Rule::parse(text) {
        Ok(r) => r,
        Err(e) => {
            return (
                Status::Inexpressible,
                Vec::new(),
                Some(format!("not a rule Warden can read: {e}")),
            );
        }
    };
    let tool = parsed.tool();
    let spec = parsed.spec();
    let restricting = list != ListKind::Allow;
    let with = |t: &str, s: Option<String>| match s {
        Some(s) => format!("{t}({s})"),
        None => t.to_owned(),
    };
    match tool {
        "Bash" => (
            Status::Exact,
            vec![with("bash", spec.map(str::to_owned))],
            None,
        ),
        "Read" | "Edit" | "Write" | "MultiEdit" | "NotebookEdit" => {
            let warden = match tool {
                "Read" => "read",
                "Write" => "write",
                _ => "edit",
            };
            (
                Status::Exact,
                vec![with(warden, spec.map(|s| import_path(s, root)))],
                None,
            )
        }
        "Glob" | "Grep" | "LS" if restricting => (
            Status::Approximated,
            vec!["read".into()],
            Some(format!(
                "Warden decides {tool} as `read`, so this also covers Read{}",
                if spec.is_some() {
                    " and every path"
                } else {
                    ""
                }
            )),
        ),
        "Glob" | "Grep" | "LS" => (
            Status::Inexpressible,
            Vec::new(),
            Some(format!(
                "Warden decides {tool} as `read`; allowing it would also allow Read"
            )),
        ),
        "WebFetch" => (
            Status::Exact,
            vec![with("web_fetch", spec.map(str::to_owned))],
            None,
        ),
        _ if tool.starts_with("mcp__") => {
            let rest = &tool["mcp__".len()..];
            let (server, name) = rest.split_once("__").unwrap_or((rest, ""));
            if server.is_empty() {
                return (
                    Status::Inexpressible,
                    Vec::new(),
                    Some("an MCP rule without a server".into()),
                );
            }
            let whole_server = name.is_empty() || name == "*";
            match (whole_server, restricting, spec) {
                (false, _, None) => (Status::Exact, vec![format!("{server}__{name}")], None),
                (true, true, None) => (Status::Exact, vec![format!("{server}__*")], None),
                (true, false, _) => (
                    Status::Inexpressible,
                    Vec::new(),
                    Some("Warden allows no tool-name globs: allow each tool of the server".into()),
                ),
                (false, true, Some(_)) => (
                    Status::Approximated,
                    vec![format!("{server}__{name}")],
                    Some("Warden matches MCP tools by name only: every call of the tool".into()),
                ),
                (true, true, Some(_)) => (
                    Status::Approximated,
                    vec![format!("{server}__*")],
                    Some("every tool of the server".into()),
                ),
                (false, false, Some(_)) => (
                    Status::Inexpressible,
                    Vec::new(),
                    Some("Warden matches MCP tools by name only".into()),
                ),
            }
        }
        _ => match (spec, restricting) {
            (None, _) => (Status::Exact, vec![tool.to_owned()], None),
            (Some(_), true) => (
                Status::Approximated,
                vec![tool.to_owned()],
                Some(format!(
                    "{tool} has no Warden matcher: every {tool} call, whatever its specifier"
                )),
            ),
            (Some(_), false) => (
                Status::Inexpressible,
                Vec::new(),
                Some(format!("{tool} has no Warden matcher for a specifier")),
            ),
        },
    }
}

fn rule_strings(v: Option<&Value>, file: &str, pointer: &str) -> Result<Vec<String>, HarnessError> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| HarnessError::Input {
                        file: file.to_owned(),
                        message: format!("{pointer}: every rule must be a string"),
                    })
            })
            .collect(),
        Some(_) => Err(HarnessError::Input {
            file: file.to_owned(),
            message: format!("{pointer} must be an array of rule strings"),
        }),
    }
}

/// Imports Claude Code settings files: each becomes a trusted `[[sources]]` entry named and
/// ranked by its scope (managed 40, local 30, project 20, user 10), with `Bash(…)` as
/// `bash(…)` and the rest per [`TOOL_MAPPING`]. The default comes from the highest-ranked
/// `permissions.defaultMode`: `dontAsk` → deny, `bypassPermissions` → allow, anything else →
/// ask (Claude Code prompts).
pub fn import_settings(files: &[SettingsFile]) -> Result<Import, HarnessError> {
    let mut report = TranslationReport::default();
    let mut sources = Vec::new();
    let mut ordered: Vec<&SettingsFile> = files.iter().collect();
    ordered.sort_by_key(|f| f.scope);
    let mut default: Option<(Decision, String, SettingsScope)> = None;
    let mut used_names: Vec<String> = Vec::new();
    for f in ordered {
        let label = f.path.display().to_string();
        let value: Value = serde_json::from_str(&f.text).map_err(|e| HarnessError::Input {
            file: label.clone(),
            message: format!("not JSON: {e}"),
        })?;
        let Value::Object(obj) = value else {
            return Err(HarnessError::Input {
                file: label,
                message: "a settings file is a JSON object".into(),
            });
        };
        let perms = match obj.get("permissions") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(p)) => p.clone(),
            Some(_) => {
                return Err(HarnessError::Input {
                    file: label,
                    message: "`permissions` must be an object".into(),
                });
            }
        };
        let mut name = f.scope.name().to_owned();
        let mut n = 2;
        while used_names.contains(&name) {
            name = format!("{}-{n}", f.scope.name());
            n += 1;
        }
        used_names.push(name.clone());
        let root = settings_root(&f.path);
        let mut lists: [Vec<String>; 3] = Default::default();
        for (slot, list) in ListKind::ORDER.into_iter().enumerate() {
            let pointer = format!("/permissions/{}", list.as_str());
            for text in rule_strings(perms.get(list.as_str()), &label, &pointer)? {
                let (status, to, how) = import_rule(&text, list, &root);
                for r in &to {
                    if !lists[slot].contains(r) {
                        lists[slot].push(r.clone());
                    }
                }
                report.push(
                    status,
                    Entry {
                        list: list.as_str().into(),
                        rule: text,
                        source: name.clone(),
                        to: to.into_iter().map(Value::String).collect(),
                        how,
                    },
                );
            }
        }
        if default.is_none()
            && let Some(mode) = perms.get("defaultMode").and_then(Value::as_str)
        {
            let d = match mode {
                "dontAsk" => Decision::Deny,
                "bypassPermissions" => Decision::Allow,
                _ => Decision::Ask,
            };
            default = Some((d, mode.to_owned(), f.scope));
        }
        let hash = warden_contracts::Digest::of_bytes(f.text.as_bytes()).to_string();
        let [deny, ask, allow] = lists;
        sources.push(SourceDecl {
            name,
            rank: f.scope.rank(),
            trusted: true,
            path: Some(label),
            hash: Some(hash),
            allow: RuleList::Many(allow),
            ask: RuleList::Many(ask),
            deny: RuleList::Many(deny),
            notes: Default::default(),
        });
    }
    let (decision, how) = match &default {
        Some((d, mode, scope)) => (
            *d,
            format!(
                "permissions.defaultMode = \"{mode}\" in the {} settings",
                scope.name()
            ),
        ),
        None => (
            Decision::Ask,
            "no defaultMode: Claude Code prompts for what no rule covers".into(),
        ),
    };
    let status = match default.as_ref().map(|(_, m, _)| m.as_str()) {
        None | Some("default" | "dontAsk" | "bypassPermissions") => Status::Exact,
        Some(_) => Status::Approximated,
    };
    let how = if status == Status::Approximated {
        format!("{how}: imported as ask (Warden has no acceptEdits or plan mode)")
    } else {
        how
    };
    report.push(
        status,
        Entry {
            list: "default".into(),
            rule: decision.as_str().into(),
            source: String::new(),
            to: vec![Value::String(format!("default = \"{decision}\""))],
            how: Some(how),
        },
    );
    let policy = PolicyFile {
        id: Some("claude-code-import".into()),
        default: Some(decision),
        sources,
        ..PolicyFile::default()
    };
    Ok(Import { policy, report })
}

/// Checks that an imported policy builds (every translated rule compiles).
pub fn check_import(import: &Import, env: PathEnv) -> Result<PolicySnapshot, HarnessError> {
    let text = import
        .policy
        .write(Format::Toml)
        .map_err(|e| HarnessError::Policy(e.to_string()))?;
    let loaded = LoadedPolicy::from_text(text, Format::Toml, "<import>", "imported", None)
        .map_err(|e| HarnessError::Policy(e.to_string()))?;
    PolicySnapshot::from_files(&[loaded], env).map_err(|e| HarnessError::Policy(e.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn mapping_renames_fields_and_fills_glob_paths() {
        let cwd = Path::new("/repo/sub");
        let c = to_call(
            "Write",
            &json!({"file_path": "/x", "content": "y"}),
            Some(cwd),
        );
        assert_eq!(
            (c.tool.as_str(), &c.args),
            ("write", &json!({"path": "/x", "content": "y"}))
        );
        let c = to_call(
            "NotebookEdit",
            &json!({"notebook_path": "n.ipynb"}),
            Some(cwd),
        );
        assert_eq!(
            (c.tool.as_str(), &c.args),
            ("edit", &json!({"path": "n.ipynb"}))
        );
        let c = to_call("Grep", &json!({"pattern": "x"}), Some(cwd));
        assert_eq!(c.args, json!({"pattern": "x", "path": "/repo/sub"}));
        let c = to_call("Glob", &json!({"pattern": "*", "path": "src"}), Some(cwd));
        assert_eq!(c.args["path"], "src");
        assert_eq!(
            to_call("mcp__github__create_issue", &json!({}), None).tool,
            "github__create_issue"
        );
        assert_eq!(to_call("WebSearch", &json!({}), None).tool, "WebSearch");
        // A missing mapped field stays missing.
        let c = to_call("Read", &json!({}), Some(cwd));
        assert_eq!(c.args, json!({}));
    }

    #[test]
    fn events_parse_strictly_where_it_matters() {
        assert!(matches!(parse_event("nope"), Err(EventError::NotJson(_))));
        assert_eq!(parse_event("[1]"), Err(EventError::NotObject));
        assert!(matches!(
            parse_event(r#"{"hook_event_name":"Stop"}"#),
            Err(EventError::UnknownEvent(_))
        ));
        assert!(matches!(
            parse_event(r#"{"hook_event_name":"PreToolUse","tool_input":{}}"#),
            Err(EventError::Missing {
                field: "tool_name",
                ..
            })
        ));
        assert!(matches!(
            parse_event(r#"{"hook_event_name":"PreToolUse","tool_name":"Bash"}"#),
            Err(EventError::Missing {
                field: "tool_input",
                ..
            })
        ));
        assert!(matches!(
            parse_event(r#"{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":"ls"}"#),
            Err(EventError::WrongType {
                field: "tool_input",
                ..
            })
        ));
        let e = parse_event(
            r#"{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"new_field":1,"cwd":"/r"}"#,
        )
        .unwrap();
        let HookEvent::PreToolUse(e) = e else {
            panic!()
        };
        assert_eq!(e.cwd.as_deref(), Some(Path::new("/r")));
    }

    #[test]
    fn output_is_the_exact_contract_shape() {
        assert_eq!(
            pre_tool_use_output(Decision::Deny, "no"),
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}"#
        );
        assert_eq!(truncate("abcdef", 3), "abc…");
        assert_eq!(truncate("abc", 3), "abc");
    }

    #[test]
    fn scopes_come_from_file_names() {
        let home = Path::new("/home/u");
        assert_eq!(
            SettingsScope::of_path(Path::new("/home/u/.claude/settings.json"), Some(home)),
            Some(SettingsScope::User)
        );
        assert_eq!(
            SettingsScope::of_path(Path::new("/p/.claude/settings.json"), Some(home)),
            Some(SettingsScope::Project)
        );
        assert_eq!(
            SettingsScope::of_path(Path::new("/p/.claude/settings.local.json"), Some(home)),
            Some(SettingsScope::Local)
        );
        assert_eq!(
            SettingsScope::of_path(
                Path::new("/etc/claude-code/managed-settings.json"),
                Some(home)
            ),
            Some(SettingsScope::Managed)
        );
        assert_eq!(
            SettingsScope::of_path(Path::new("/p/other.json"), Some(home)),
            None
        );
    }

    #[test]
    fn import_ranks_scopes_and_translates_rules() {
        let files = vec![
            SettingsFile {
                scope: SettingsScope::Project,
                path: "/p/.claude/settings.json".into(),
                text: r#"{"permissions":{"allow":["Bash(npm run test:*)","Read(/src/**)","Grep","mcp__github"],"deny":["Read(./.env)","WebFetch(domain:evil.com)"]}}"#.into(),
            },
            SettingsFile {
                scope: SettingsScope::Managed,
                path: "/etc/claude-code/managed-settings.json".into(),
                text: r#"{"permissions":{"deny":["Bash(curl:*)","mcp__github__delete_repo"],"defaultMode":"dontAsk"}}"#.into(),
            },
        ];
        let import = import_settings(&files).unwrap();
        let s = &import.policy.sources;
        assert_eq!((s[0].name.as_str(), s[0].rank), ("managed", 0));
        assert_eq!((s[1].name.as_str(), s[1].rank), ("project", -20));
        assert_eq!(
            s[1].allow,
            RuleList::Many(vec![
                "bash(npm run test:*)".into(),
                "read(/p/src/**)".into()
            ])
        );
        assert_eq!(
            s[1].deny,
            RuleList::Many(vec![
                "read(/p/.env)".into(),
                "web_fetch(domain:evil.com)".into()
            ])
        );
        assert_eq!(
            s[0].deny,
            RuleList::Many(vec!["bash(curl:*)".into(), "github__delete_repo".into()])
        );
        assert_eq!(import.policy.default, Some(Decision::Deny));
        let skipped: Vec<&str> = import
            .report
            .inexpressible
            .iter()
            .map(|e| e.rule.as_str())
            .collect();
        assert_eq!(skipped, ["Grep", "mcp__github"]);
        check_import(
            &import,
            PathEnv {
                project_root: "/p".into(),
                home: None,
            },
        )
        .unwrap();
    }
}
