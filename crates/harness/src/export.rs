//! A Warden policy translated into a provider's own permission rules: Claude Code
//! `permissions` lists, Codex `.rules` (`prefix_rule`), Gemini CLI policy TOML.
//!
//! Every rule (and the default) is reported exactly once: **exact** (the provider's grammar
//! says the same thing), **approximated** (the provider rule is stricter: it denies or asks for
//! more, or allows less, and the report says how) or **inexpressible** (nothing emitted, and
//! why). An allow that cannot be said is left out, which is stricter; a deny or ask that cannot
//! be said is widened until it can (a whole tool, a whole MCP server, a shorter command prefix)
//! or, when nothing can carry it, reported inexpressible — the one case where the exported file
//! is looser than the policy, and the report says so.
//!
//! "Exact" is about the rule: each provider still matches commands its own way (Claude Code
//! and Warden split compound commands into words; Codex matches argv prefixes; Gemini CLI
//! matches regular expressions over the JSON text of the arguments). Warden's hook remains the
//! enforcement; an export is for teams that also want the provider's own rules in place.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};
use warden_policy::{
    Decision, ListKind, PathEnv, PolicySnapshot, Rule, builtin_aliases, builtin_profiles,
};

use crate::error::HarnessError;
use crate::replay::snapshot_rules;
use crate::report::{Entry, Status, TranslationReport};

/// The export targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// Claude Code `settings.json` `permissions`.
    ClaudeCode,
    /// Codex `.rules` (Starlark `prefix_rule`).
    Codex,
    /// Gemini CLI policy TOML (`[[rule]]`).
    Gemini,
}

impl Target {
    /// `claude-code`, `codex` or `gemini`.
    pub fn name(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude-code",
            Self::Codex => "codex",
            Self::Gemini => "gemini",
        }
    }
}

/// An exported file and its report.
#[derive(Debug, Clone)]
pub struct Export {
    /// The target.
    pub target: Target,
    /// The file's text (JSON, Starlark or TOML).
    pub text: String,
    /// What translated how. Each entry's `to` lists the items it contributed to the file, in
    /// the shape [`items_of`] reads back.
    pub report: TranslationReport,
}

/// One rule as the snapshot declares it.
#[derive(Debug, Clone)]
struct Declared {
    list: ListKind,
    rule: Rule,
    text: String,
    source: String,
    /// The source as the snapshot compiled it (standing, trust, which file).
    info: Option<warden_policy::SourceInfo>,
    trusted: bool,
}

/// The outcome of translating one rule.
struct Tr {
    status: Status,
    to: Vec<Value>,
    how: Option<String>,
}

fn exact(to: Vec<Value>) -> Tr {
    Tr {
        status: Status::Exact,
        to,
        how: None,
    }
}

fn approx(to: Vec<Value>, how: impl Into<String>) -> Tr {
    Tr {
        status: Status::Approximated,
        to,
        how: Some(how.into()),
    }
}

fn none(why: impl Into<String>) -> Tr {
    Tr {
        status: Status::Inexpressible,
        to: Vec::new(),
        how: Some(why.into()),
    }
}

fn read_declared(snapshot: &PolicySnapshot) -> Result<Vec<Declared>, HarnessError> {
    let mut out = Vec::new();
    for r in snapshot_rules(snapshot)? {
        let list = match r.list.as_str() {
            "deny" => ListKind::Deny,
            "ask" => ListKind::Ask,
            _ => ListKind::Allow,
        };
        let rule = Rule::parse(&r.rule)
            .map_err(|e| HarnessError::Policy(format!("rule `{}`: {e}", r.rule)))?;
        let info = snapshot.sources().iter().find(|s| s.name == r.source);
        out.push(Declared {
            list,
            rule,
            text: r.rule,
            source: r.source,
            trusted: info.is_some_and(|s| s.trusted),
            info: info.cloned(),
        });
    }
    Ok(out)
}

/// The tools a rule names (its alias expansion).
fn tools_of(rule: &Rule) -> Vec<String> {
    match builtin_aliases().get(rule.tool()) {
        Some(t) if !rule.is_tool_glob() => t.clone(),
        _ => vec![rule.tool().to_owned()],
    }
}

/// Translates `snapshot` for `target`.
pub fn export(snapshot: &PolicySnapshot, target: Target) -> Result<Export, HarnessError> {
    let declared = read_declared(snapshot)?;
    let builtin = builtin_profiles();
    let custom = |tool: &str| snapshot.profiles().get(tool) != builtin.get(tool);
    let env = snapshot.path_env();
    let mut report = TranslationReport::default();
    for d in &declared {
        let entry = |t: Tr| {
            (
                t.status,
                Entry {
                    list: d.list.as_str().into(),
                    rule: d.text.clone(),
                    source: d.source.clone(),
                    to: t.to,
                    how: t.how,
                },
            )
        };
        if d.list == ListKind::Allow && !d.trusted {
            let (s, e) = entry(Tr {
                status: Status::Exact,
                to: Vec::new(),
                how: Some(
                    "withheld: the source is untrusted, so Warden never evaluates it either".into(),
                ),
            });
            report.push(s, e);
            continue;
        }
        if d.rule.is_carve_out() {
            let how = match d.list {
                ListKind::Allow => {
                    "dropped, with the allow rules of the same tool it reaches: the provider has no carve-outs, and leaving those allows out is stricter"
                }
                _ => {
                    "dropped: the provider has no carve-outs, so the rules it narrows apply in full (stricter)"
                }
            };
            let (s, e) = entry(approx(Vec::new(), how));
            report.push(s, e);
            continue;
        }
        if d.list == ListKind::Allow
            && let Some(c) = carving(&declared, d)
        {
            let (s, e) = entry(approx(
                Vec::new(),
                format!(
                    "left out: carve-out {} [{}] narrows it and cannot be expressed",
                    c.text, c.source
                ),
            ));
            report.push(s, e);
            continue;
        }
        let spec_custom = d.rule.spec().is_some() && tools_of(&d.rule).iter().any(|t| custom(t));
        let t = match target {
            Target::ClaudeCode => claude(d, env, spec_custom),
            Target::Codex => codex(d, spec_custom),
            Target::Gemini => gemini(d, spec_custom),
        };
        let (s, e) = entry(t);
        report.push(s, e);
    }
    let default = snapshot.default_decision();
    let t = match target {
        Target::ClaudeCode => claude_default(default),
        Target::Codex => none(
            "Codex .rules have no default: set `approval_policy` in config.toml (\"untrusted\" asks before any command it does not know to be safe)",
        ),
        Target::Gemini => exact(vec![gemini_item(
            json!("*"),
            None,
            None,
            default_decision_gemini(default),
            0,
        )]),
    };
    report.push(
        t.status,
        Entry {
            list: "default".into(),
            rule: default.as_str().into(),
            source: String::new(),
            to: t.to,
            how: t.how,
        },
    );
    let header = format!(
        "Generated by `warden policy export --to {}` from policy {} version {} ({}).",
        target.name(),
        snapshot.id(),
        snapshot.version(),
        snapshot.digest()
    );
    let text = match target {
        Target::ClaudeCode => claude_text(&report)?,
        Target::Codex => codex_text(&report, &header),
        Target::Gemini => gemini_text(&report, &header)?,
    };
    Ok(Export {
        target,
        text,
        report,
    })
}

/// The allow-list carve-out that reaches `d`, if any.
fn carving<'a>(declared: &'a [Declared], d: &Declared) -> Option<&'a Declared> {
    let tools = tools_of(&d.rule);
    declared.iter().find(|c| {
        c.list == ListKind::Allow
            && c.rule.is_carve_out()
            && tools_of(&c.rule).iter().any(|t| tools.contains(t))
            && match (&c.info, &d.info) {
                (Some(by), Some(target)) => by.carve_out_reaches(target),
                _ => c.source == d.source,
            }
    })
}

fn restricting(d: &Declared) -> bool {
    d.list != ListKind::Allow
}

/// Plain command words: no quoting, escapes, expansions or wildcards.
fn plain_word(w: &str) -> bool {
    !w.is_empty()
        && !w
            .chars()
            .any(|c| "'\"\\$`*?[]{}()<>|;&!~#".contains(c) || c.is_control())
}

/// A shell specifier as (words, `:*`).
fn shell_spec(spec: &str) -> (Vec<&str>, bool) {
    let trimmed = spec.trim();
    let (base, prefix) = match trimmed.strip_suffix(":*") {
        Some(b) => (b, true),
        None => (trimmed, false),
    };
    (base.split_whitespace().collect(), prefix)
}

/// A shell specifier's words, whether it ends in `:*`, and the plain words it starts with
/// (those before its first quoted or wildcard word): for targets that match literal words.
struct ShellWords<'s> {
    words: Vec<&'s str>,
    prefix: bool,
    leading: Vec<&'s str>,
}

impl<'s> ShellWords<'s> {
    fn of(spec: &'s str) -> Self {
        let (words, prefix) = shell_spec(spec);
        let leading = words
            .iter()
            .copied()
            .take_while(|w| plain_word(w))
            .collect();
        Self {
            words,
            prefix,
            leading,
        }
    }

    /// There are words, and every one is plain.
    fn all_plain(&self) -> bool {
        self.leading.len() == self.words.len() && !self.words.is_empty()
    }

    /// A restricting rule widened to every command starting with its leading plain words (the
    /// target's matcher for them built by `item`); `None` for an allow rule, or when the first
    /// word is not plain.
    fn widened(&self, d: &Declared, item: impl FnOnce(&[&str]) -> Value) -> Option<Tr> {
        (restricting(d) && !self.leading.is_empty()).then(|| {
            approx(
                vec![item(&self.leading)],
                format!(
                    "the words before the first quoted or wildcard word: every command starting `{}`",
                    self.leading.join(" ")
                ),
            )
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Claude Code

fn claude_item(list: ListKind, rule: String) -> Value {
    json!({"list": list.as_str(), "rule": rule})
}

/// A Warden path pattern as a Claude Code path specifier (`//abs`, `~/x`), or `None`.
fn claude_path(spec: &str, env: &PathEnv) -> Option<String> {
    let (p, prefix) = match spec.strip_suffix(":*") {
        Some(b) => (b, true),
        None => (spec, false),
    };
    let base = if p.starts_with("//") || p.starts_with("~/") {
        p.to_owned()
    } else if p.starts_with('/') {
        format!("/{p}")
    } else {
        let root = env.project_root.to_string_lossy();
        if root.contains('*') {
            return None;
        }
        let root = root.trim_end_matches('/');
        let p = p.strip_prefix("./").unwrap_or(p);
        if p.trim_end_matches('/').contains('/') {
            format!("/{root}/{p}")
        } else {
            format!("/{root}/**/{p}")
        }
    };
    Some(if prefix { format!("{base}*") } else { base })
}

fn claude(d: &Declared, env: &PathEnv, spec_custom: bool) -> Tr {
    let list = d.list;
    let tool = d.rule.tool();
    let spec = d.rule.spec();
    let item = |r: String| claude_item(list, r);
    if d.rule.is_tool_glob() {
        if let Some((server, rest)) = tool.split_once("__")
            && !server.contains('*')
            && !server.is_empty()
        {
            return if rest == "*" {
                exact(vec![item(format!("mcp__{server}"))])
            } else {
                approx(
                    vec![item(format!("mcp__{server}"))],
                    format!("every tool of MCP server {server}"),
                )
            };
        }
        return none("Claude Code rules name a tool or an MCP server, not a glob over tool names");
    }
    let widen = |provider: &str, what: &str| {
        if restricting(d) {
            approx(
                vec![item(provider.to_owned())],
                format!("every {provider} call: {what}"),
            )
        } else {
            none(format!("{what}; leaving the allow out is stricter"))
        }
    };
    if spec.is_some() && spec_custom {
        return widen(
            &claude_name(tool),
            "the policy sets its own matcher for this tool",
        );
    }
    match (tool, spec) {
        ("bash", Some(s)) => claude_bash(d, s),
        ("list", _) => none("no Claude Code tool is decided as `list`"),
        ("read" | "edit" | "write", None) => exact(vec![item(claude_name(tool))]),
        ("read" | "edit", Some(s)) => match claude_path(s, env) {
            Some(p) => exact(vec![item(format!("{}({p})", claude_name(tool)))]),
            None => widen(
                &claude_name(tool),
                "the project root cannot be written as a Claude Code path",
            ),
        },
        ("write", Some(s)) => match (claude_path(s, env), restricting(d)) {
            (Some(p), true) => approx(
                vec![item(format!("Edit({p})"))],
                "Claude Code path rules for file changes are Edit rules, which also cover edits",
            ),
            _ => none(
                "Claude Code path rules for file changes are Edit rules, which would also allow edits",
            ),
        },
        ("web_fetch", Some(s)) if s.starts_with("domain:") && !s.contains('*') => {
            exact(vec![item(format!("WebFetch({s})"))])
        }
        ("web_fetch", Some(_)) => widen("WebFetch", "Claude Code WebFetch rules name one domain"),
        (_, None) => exact(vec![item(claude_name(tool))]),
        (_, Some(_)) => widen(
            &claude_name(tool),
            "Claude Code rules for this tool take no specifier",
        ),
    }
}

/// A bash rule as a Claude Code `Bash(…)` rule. Warden compares a specifier's words, whatever
/// whitespace separates them; Claude Code compares the text. A specifier spelled with anything
/// but single spaces between its words (a tab, a run of spaces, a line end) would match
/// differently, so it is not exact: a deny or ask rule widens to every command of its first
/// word (stricter), an allow rule is left out.
fn claude_bash(d: &Declared, spec: &str) -> Tr {
    let item = |r: String| claude_item(d.list, r);
    let (words, prefix) = shell_spec(spec);
    let canonical = format!("{}{}", words.join(" "), if prefix { ":*" } else { "" });
    if canonical == spec {
        return exact(vec![item(format!("Bash({spec})"))]);
    }
    match (words.first(), restricting(d)) {
        (Some(first), true) => approx(
            vec![item(format!("Bash({first}:*)"))],
            format!(
                "the rule's words are separated by whitespace other than single spaces, which Claude Code would compare literally: every command starting `{first}`"
            ),
        ),
        _ => none(
            "the rule's words are separated by whitespace other than single spaces, which Claude Code would compare literally; leaving the allow out is stricter",
        ),
    }
}

fn claude_name(tool: &str) -> String {
    match tool {
        "bash" => "Bash".into(),
        "read" => "Read".into(),
        "edit" => "Edit".into(),
        "write" => "Write".into(),
        "web_fetch" => "WebFetch".into(),
        t if t.contains("__") => format!("mcp__{t}"),
        t => t.to_owned(),
    }
}

fn claude_default(default: Decision) -> Tr {
    match default {
        Decision::Deny => approx(
            vec![json!({"defaultMode": "dontAsk"})],
            "dontAsk denies what no allow rule covers, and also denies what Warden's ask rules would put to a person (stricter)",
        ),
        Decision::Ask => none(
            "Claude Code has no default decision: without a rule it prompts, except for read-only tools (Read, Glob, Grep) in its working folder, which it runs; the hook applies Warden's default to those",
        ),
        Decision::Allow => approx(
            Vec::new(),
            "Claude Code cannot allow by default short of bypassPermissions: calls no rule covers prompt instead (stricter)",
        ),
    }
}

fn claude_text(report: &TranslationReport) -> Result<String, HarnessError> {
    let mut lists: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut default_mode: Option<String> = None;
    for item in report.emitted() {
        if let Some(mode) = item.get("defaultMode").and_then(Value::as_str) {
            default_mode = Some(mode.to_owned());
            continue;
        }
        if let (Some(list), Some(rule)) = (
            item.get("list").and_then(Value::as_str),
            item.get("rule").and_then(Value::as_str),
        ) {
            let key = match list {
                "deny" => "deny",
                "ask" => "ask",
                _ => "allow",
            };
            lists.entry(key).or_default().push(rule.to_owned());
        }
    }
    let mut permissions = serde_json::Map::new();
    for key in ["allow", "ask", "deny"] {
        permissions.insert(key.into(), json!(lists.remove(key).unwrap_or_default()));
    }
    if let Some(mode) = default_mode {
        permissions.insert("defaultMode".into(), Value::String(mode));
    }
    let mut text =
        serde_json::to_string_pretty(&json!({ "permissions": permissions })).map_err(|e| {
            HarnessError::Write {
                what: "Claude Code settings",
                message: e.to_string(),
            }
        })?;
    text.push('\n');
    Ok(text)
}

// ---------------------------------------------------------------------------------------------
// Codex

fn codex_decision(list: ListKind) -> &'static str {
    match list {
        ListKind::Deny => "forbidden",
        ListKind::Ask => "prompt",
        ListKind::Allow => "allow",
    }
}

fn codex_item(list: ListKind, words: &[&str]) -> Value {
    json!({"pattern": words, "decision": codex_decision(list)})
}

fn codex(d: &Declared, spec_custom: bool) -> Tr {
    if d.rule.tool() != "bash" || d.rule.is_tool_glob() {
        return none("Codex .rules govern shell commands only");
    }
    let Some(spec) = d.rule.spec() else {
        return none("a prefix_rule needs at least one word, so it cannot name every command");
    };
    if spec_custom {
        return none("the policy sets its own matcher for bash");
    }
    let shell = ShellWords::of(spec);
    if shell.all_plain() {
        if shell.prefix {
            return exact(vec![codex_item(d.list, &shell.words)]);
        }
        return if restricting(d) {
            approx(
                vec![codex_item(d.list, &shell.words)],
                "a prefix_rule also matches the command with more arguments",
            )
        } else {
            none("a prefix_rule would also allow the command with more arguments")
        };
    }
    shell
        .widened(d, |leading| codex_item(d.list, leading))
        .unwrap_or_else(|| none("a prefix_rule matches literal words only"))
}

/// A Starlark string literal.
fn starlark_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn codex_text(report: &TranslationReport, header: &str) -> String {
    let mut out = format!(
        "# {header}\n# Codex .rules: the strictest matching decision wins (forbidden > prompt > allow).\n"
    );
    let mut seen: Vec<Value> = Vec::new();
    for (status, e) in report.entries() {
        for item in &e.to {
            if seen.contains(item) {
                continue;
            }
            seen.push(item.clone());
            let words: Vec<String> = item
                .get("pattern")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(starlark_str)
                        .collect()
                })
                .unwrap_or_default();
            let decision = item
                .get("decision")
                .and_then(Value::as_str)
                .unwrap_or("forbidden");
            out.push_str(&format!(
                "\n# {} {} [{}]: {}\nprefix_rule(\n    pattern = [{}],\n    decision = {},\n    justification = {},\n)\n",
                e.list,
                e.rule,
                e.source,
                status.as_str(),
                words.join(", "),
                starlark_str(decision),
                starlark_str(&format!("warden: {} {} from source {}", e.list, e.rule, e.source)),
            ));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Gemini CLI

const GEMINI_READ: &[&str] = &["read_file", "read_many_files", "glob", "grep_search"];
const GEMINI_EDIT: &[&str] = &["replace", "write_file"];

fn default_decision_gemini(d: Decision) -> &'static str {
    match d {
        Decision::Allow => "allow",
        Decision::Ask => "ask_user",
        Decision::Deny => "deny",
    }
}

fn gemini_priority(list: ListKind) -> i64 {
    match list {
        ListKind::Deny => 300,
        ListKind::Ask => 200,
        ListKind::Allow => 100,
    }
}

fn gemini_item(
    tool_name: Value,
    mcp_name: Option<&str>,
    command_regex: Option<String>,
    decision: &str,
    priority: i64,
) -> Value {
    let mut o = serde_json::Map::new();
    if !tool_name.is_null() {
        o.insert("toolName".into(), tool_name);
    }
    if let Some(m) = mcp_name {
        o.insert("mcpName".into(), Value::String(m.to_owned()));
    }
    if let Some(r) = command_regex {
        o.insert("commandRegex".into(), Value::String(r));
    }
    o.insert("decision".into(), Value::String(decision.to_owned()));
    o.insert("priority".into(), Value::from(priority));
    Value::Object(o)
}

fn regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$/".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The `commandRegex` for plain words: Gemini CLI matches it right after `"command":"` in the
/// arguments' JSON, so the words must be followed by a space, an escaped tab or newline, or
/// (for an exact rule, only) the closing quote.
fn gemini_command_regex(words: &[&str], prefix: bool) -> String {
    let base = regex_escape(&words.join(" "));
    if prefix {
        format!("{base}(?:[ ]|\\\\[tn]|\")")
    } else {
        format!("{base}\"")
    }
}

fn gemini(d: &Declared, spec_custom: bool) -> Tr {
    let list = d.list;
    let decision = default_decision_gemini(list.decision());
    let priority = gemini_priority(list);
    let tool = d.rule.tool();
    let names = |n: &[&str]| {
        if n.len() == 1 { json!(n[0]) } else { json!(n) }
    };
    let item = |tool_name: Value| gemini_item(tool_name, None, None, decision, priority);
    if d.rule.is_tool_glob() {
        if tool == "*" {
            return exact(vec![item(json!("*"))]);
        }
        if let Some((server, rest)) = tool.split_once("__")
            && !server.contains('*')
            && !server.is_empty()
        {
            let it = gemini_item(Value::Null, Some(server), None, decision, priority);
            return if rest == "*" {
                exact(vec![it])
            } else {
                approx(vec![it], format!("every tool of MCP server {server}"))
            };
        }
        return none("Gemini CLI tool-name wildcards cover `*` and whole MCP servers only");
    }
    let (provider, mcp): (Value, Option<String>) = match tool {
        "bash" => (json!("run_shell_command"), None),
        "read" => (names(GEMINI_READ), None),
        "edit" => (names(GEMINI_EDIT), None),
        "write" => (json!("write_file"), None),
        "list" => (json!("list_directory"), None),
        "web_fetch" => (json!("web_fetch"), None),
        t => match t.split_once("__") {
            Some((server, name)) if !server.is_empty() && !name.is_empty() => {
                (json!(name), Some(server.to_owned()))
            }
            _ => (json!(t), None),
        },
    };
    let bare = gemini_item(provider.clone(), mcp.as_deref(), None, decision, priority);
    let Some(spec) = d.rule.spec() else {
        return exact(vec![bare]);
    };
    let widen = |why: &str| {
        if restricting(d) {
            approx(vec![bare.clone()], format!("every call of the tool: {why}"))
        } else {
            none(format!("{why}; leaving the allow out is stricter"))
        }
    };
    if spec_custom {
        return widen("the policy sets its own matcher for this tool");
    }
    if tool != "bash" {
        return widen(match tool {
            "web_fetch" => "Gemini CLI's web_fetch takes a prompt, not a URL",
            "read" | "edit" | "write" | "list" => {
                "Gemini CLI's file tools take different argument names and relative paths, so a path rule is not carried over"
            }
            _ => "Gemini CLI rules for this tool take no specifier",
        });
    }
    let words = ShellWords::of(spec);
    let shell = |w: &[&str], p: bool| {
        gemini_item(
            json!("run_shell_command"),
            None,
            Some(gemini_command_regex(w, p)),
            decision,
            priority,
        )
    };
    if words.all_plain() {
        return exact(vec![shell(&words.words, words.prefix)]);
    }
    words
        .widened(d, |leading| shell(leading, true))
        .unwrap_or_else(|| widen("the command has quoted or wildcard words"))
}

#[derive(Serialize)]
struct GeminiFile {
    rule: Vec<Value>,
}

fn gemini_text(report: &TranslationReport, header: &str) -> Result<String, HarnessError> {
    let file = GeminiFile {
        rule: report.emitted(),
    };
    let body = toml::to_string(&file).map_err(|e| HarnessError::Write {
        what: "Gemini CLI policy",
        message: e.to_string(),
    })?;
    Ok(format!(
        "# {header}\n# Gemini CLI: the highest priority wins; Warden's precedence is kept as deny 300, ask 200, allow 100, default 0.\n\n{body}"
    ))
}

/// The items an exported file holds, read back the way the report's `to` lists them:
/// `{"list","rule"}` and `{"defaultMode"}` for Claude Code; `{"pattern","decision"}` for
/// Codex (from the parsed `prefix_rule` calls' keyword arguments); each `[[rule]]` table for
/// Gemini CLI.
pub fn items_of(target: Target, parsed: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    match target {
        Target::ClaudeCode => {
            let perms = parsed.get("permissions");
            for list in ["deny", "ask", "allow"] {
                for r in perms
                    .and_then(|p| p.get(list))
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                {
                    out.push(json!({"list": list, "rule": r}));
                }
            }
            if let Some(mode) = perms.and_then(|p| p.get("defaultMode")) {
                out.push(json!({ "defaultMode": mode }));
            }
        }
        Target::Codex => {
            for call in parsed.as_array().map(Vec::as_slice).unwrap_or_default() {
                out.push(json!({
                    "pattern": call.get("pattern").cloned().unwrap_or(Value::Null),
                    "decision": call.get("decision").cloned().unwrap_or(Value::Null),
                }));
            }
        }
        Target::Gemini => {
            out.extend(
                parsed
                    .get("rule")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use warden_policy::{Format, LoadedPolicy};

    fn snapshot(text: &str) -> PolicySnapshot {
        let f = LoadedPolicy::from_text(text.into(), Format::Toml, "p.toml", "p", None).unwrap();
        PolicySnapshot::from_files(
            &[f],
            PathEnv {
                project_root: "/repo".into(),
                home: None,
            },
        )
        .unwrap()
    }

    #[test]
    fn claude_paths_become_absolute() {
        let env = PathEnv {
            project_root: "/repo".into(),
            home: None,
        };
        assert_eq!(claude_path("/etc/**", &env).unwrap(), "//etc/**");
        assert_eq!(claude_path("//etc", &env).unwrap(), "//etc");
        assert_eq!(claude_path("~/.ssh/**", &env).unwrap(), "~/.ssh/**");
        assert_eq!(claude_path("src/**", &env).unwrap(), "//repo/src/**");
        assert_eq!(claude_path(".env:*", &env).unwrap(), "//repo/**/.env*");
    }

    #[test]
    fn a_bash_rule_spelled_with_other_whitespace_exports_lossy_and_a_deny_stricter() {
        let s = snapshot(
            "default = \"ask\"\ndeny = [\"bash(git\tpush:*)\"]\nallow = [\"bash(npm  test)\", \"bash(ls -la)\"]\n",
        );
        let e = export(&s, Target::ClaudeCode).unwrap();
        let entries: Vec<_> = e.report.entries().collect();
        let find = |rule: &str| {
            entries
                .iter()
                .find(|(_, entry)| entry.rule == rule)
                .unwrap_or_else(|| panic!("{rule} not reported"))
        };
        let (status, deny) = find("bash(git\tpush:*)");
        assert_eq!(*status, Status::Approximated);
        assert_eq!(deny.to, [json!({"list": "deny", "rule": "Bash(git:*)"})]);
        let (status, allow) = find("bash(npm  test)");
        assert_eq!(*status, Status::Inexpressible);
        assert!(allow.to.is_empty());
        assert_eq!(find("bash(ls -la)").0, Status::Exact);
    }

    #[test]
    fn every_rule_is_reported_once() {
        let s = snapshot(
            "default = \"ask\"\nallow = [\"bash(git status:*)\", \"bash(npm run build)\", \"read\"]\ndeny = [\"bash(rm:*)\", \"edit(/etc/**)\", \"github__delete_*\"]\nask = [\"bash(git push:*)\"]\n",
        );
        for target in [Target::ClaudeCode, Target::Codex, Target::Gemini] {
            let e = export(&s, target).unwrap();
            assert_eq!(e.report.entries().count(), 8, "{target:?}");
        }
        let codex = export(&s, Target::Codex).unwrap();
        let exact: Vec<&str> = codex.report.exact.iter().map(|e| e.rule.as_str()).collect();
        assert_eq!(
            exact,
            ["bash(rm:*)", "bash(git push:*)", "bash(git status:*)"]
        );
        assert!(codex.text.contains("pattern = [\"git\", \"status\"]"));
    }

    #[test]
    fn gemini_regexes_keep_word_boundaries() {
        assert_eq!(
            gemini_command_regex(&["git", "status"], true),
            "git status(?:[ ]|\\\\[tn]|\")"
        );
        assert_eq!(
            gemini_command_regex(&["npm", "run", "build"], false),
            "npm run build\""
        );
        assert_eq!(regex_escape("a.b"), "a\\.b");
    }
}
