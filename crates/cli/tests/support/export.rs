//! `warden policy export` and `warden policy import` end to end: every exported file parses
//! back (Claude Code JSON; Codex's Starlark `prefix_rule` subset, with the tiny parser below;
//! Gemini CLI TOML), the set of rules in the file is exactly the set the report says was
//! emitted, and every policy rule is reported exactly once. Claude Code settings import into
//! ranked sources that compile and decide as Claude Code would.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};

use super::{lines, warden, write};

/// A policy exercising every kind of rule the exporters distinguish.
const POLICY: &str = r#"
default = "deny"
allow = [
  "read",
  "bash(git status:*)",
  "bash(npm run build)",
  "bash(echo 'a b':*)",
  "edit(src/**)",
  "write(docs/**)",
  "web_fetch(domain:docs.rs)",
  "github__list_issues",
  "deploy(staging:*)",
  "list",
]
ask = ["bash(git push:*)", "bash(git * main)", "web_fetch(domain:*.example.com)", "edit"]
deny = [
  "bash(rm:*)",
  "bash(sudo:*)",
  "read(.env:*)",
  "read(/etc/shadow)",
  "read(~/.ssh/**)",
  "edit(!src/generated/**)",
  "github__delete_*",
  "*",
]

[source]
rank = -20

[tools.deploy]
match = "prefix"
field = "target"

[[sources]]
name = "vendor"
rank = -5
allow = ["bash(make:*)"]
deny = ["bash(curl:*)"]

[[sources]]
name = "managed"
rank = 0
trusted = true
allow = ["read(!secrets/**)"]
"#;

/// The number of rules in [`POLICY`] (each reported once) plus the default.
const ENTRIES: usize = 10 + 4 + 8 + 2 + 1 + 1;

// ---------------------------------------------------------------------------------------------
// A tiny parser for the Starlark subset the Codex exporter emits: `prefix_rule(k = v, …)` calls
// whose values are strings or (nested) lists of strings; `#` comments.

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Punct(char),
}

fn tokenize(text: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '#' => {
                while chars.peek().is_some_and(|&c| c != '\n') {
                    chars.next();
                }
            }
            '(' | ')' | '[' | ']' | ',' | '=' => {
                out.push(Tok::Punct(c));
                chars.next();
            }
            '"' => {
                chars.next();
                let mut s = String::new();
                loop {
                    match chars.next().expect("unterminated string") {
                        '"' => break,
                        '\\' => match chars.next().expect("dangling escape") {
                            'n' => s.push('\n'),
                            't' => s.push('\t'),
                            'r' => s.push('\r'),
                            c @ ('"' | '\\') => s.push(c),
                            other => panic!("escape \\{other} is not in the subset"),
                        },
                        c => s.push(c),
                    }
                }
                out.push(Tok::Str(s));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut s = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        s.push(c);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(Tok::Ident(s));
            }
            other => panic!("character {other:?} is not in the subset"),
        }
    }
    out
}

fn parse_value(toks: &[Tok], i: &mut usize) -> Value {
    match &toks[*i] {
        Tok::Str(s) => {
            *i += 1;
            Value::String(s.clone())
        }
        Tok::Punct('[') => {
            *i += 1;
            let mut items = Vec::new();
            loop {
                if toks[*i] == Tok::Punct(']') {
                    *i += 1;
                    break;
                }
                items.push(parse_value(toks, i));
                match &toks[*i] {
                    Tok::Punct(',') => *i += 1,
                    Tok::Punct(']') => {}
                    t => panic!("expected , or ] in a list, got {t:?}"),
                }
            }
            Value::Array(items)
        }
        t => panic!("expected a string or a list, got {t:?}"),
    }
}

/// Every `prefix_rule(...)` call's keyword arguments, in order.
fn parse_codex_rules(text: &str) -> Vec<Value> {
    let toks = tokenize(text);
    let mut i = 0;
    let mut calls = Vec::new();
    while i < toks.len() {
        assert_eq!(
            toks[i],
            Tok::Ident("prefix_rule".into()),
            "only prefix_rule calls"
        );
        assert_eq!(toks[i + 1], Tok::Punct('('));
        i += 2;
        let mut kwargs = serde_json::Map::new();
        loop {
            if toks[i] == Tok::Punct(')') {
                i += 1;
                break;
            }
            let Tok::Ident(name) = &toks[i] else {
                panic!("expected a keyword, got {:?}", toks[i]);
            };
            assert_eq!(toks[i + 1], Tok::Punct('='));
            i += 2;
            let v = parse_value(&toks, &mut i);
            assert!(
                kwargs.insert(name.clone(), v).is_none(),
                "duplicate keyword {name}"
            );
            match &toks[i] {
                Tok::Punct(',') => i += 1,
                Tok::Punct(')') => {}
                t => panic!("expected , or ) after an argument, got {t:?}"),
            }
        }
        calls.push(Value::Object(kwargs));
    }
    calls
}

#[test]
fn the_starlark_subset_parser_reads_what_it_should() {
    let calls = parse_codex_rules(
        "# c\nprefix_rule(\n  pattern = [\"git\", [\"push\", \"fetch\"]],\n  decision = \"prompt\", # x\n  justification = \"say \\\"no\\\"\",\n)\nprefix_rule(pattern=[\"ls\"])\n",
    );
    assert_eq!(
        calls,
        [
            json!({"pattern": ["git", ["push", "fetch"]], "decision": "prompt", "justification": "say \"no\""}),
            json!({"pattern": ["ls"]}),
        ]
    );
}

// ---------------------------------------------------------------------------------------------

fn export(target: &str, policy: &str, dir: &Path) -> (Value, String) {
    let file = dir.join(format!("export.{target}"));
    let out = warden(
        &[
            "policy",
            "export",
            "--to",
            target,
            "--policy",
            policy,
            "--out",
            file.to_str().unwrap(),
            "--format",
            "json",
        ],
        dir,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = lines(&out).remove(0);
    (report, std::fs::read_to_string(&file).unwrap())
}

/// The items in an exported file, in the shape the report's `to` uses.
fn items_in_file(target: &str, text: &str) -> Vec<Value> {
    match target {
        "claude-code" => {
            let v: Value = serde_json::from_str(text).unwrap();
            let perms = v["permissions"].as_object().unwrap();
            let mut out = Vec::new();
            for (k, val) in perms {
                match k.as_str() {
                    "defaultMode" => out.push(json!({"defaultMode": val})),
                    "allow" | "ask" | "deny" => {
                        for r in val.as_array().unwrap() {
                            assert!(r.is_string());
                            out.push(json!({"list": k, "rule": r}));
                        }
                    }
                    other => panic!("unexpected key {other}"),
                }
            }
            out
        }
        "codex" => parse_codex_rules(text)
            .into_iter()
            .map(|c| {
                let pattern = c["pattern"].as_array().unwrap();
                assert!(
                    !pattern.is_empty() && pattern.iter().all(Value::is_string),
                    "{c}"
                );
                assert!(
                    ["allow", "prompt", "forbidden"].contains(&c["decision"].as_str().unwrap())
                );
                assert!(c["justification"].is_string());
                json!({"pattern": c["pattern"], "decision": c["decision"]})
            })
            .collect(),
        "gemini" => {
            let v: toml::Value = toml::from_str(text).unwrap();
            let v: Value = serde_json::to_value(v).unwrap();
            let rules = v["rule"].as_array().unwrap().clone();
            for r in &rules {
                assert!(
                    ["allow", "deny", "ask_user"].contains(&r["decision"].as_str().unwrap()),
                    "{r}"
                );
                let p = r["priority"].as_i64().unwrap();
                assert!((0..=999).contains(&p));
                assert!(
                    r.get("toolName").is_some() || r.get("mcpName").is_some(),
                    "{r}"
                );
                if r.get("commandRegex").is_some() {
                    assert_eq!(r["toolName"], "run_shell_command");
                }
            }
            rules
        }
        other => panic!("{other}"),
    }
}

fn set(items: &[Value]) -> BTreeSet<String> {
    items.iter().map(Value::to_string).collect()
}

#[test]
fn each_export_parses_back_and_holds_exactly_what_the_report_says() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(dir.path(), "policy.toml", POLICY);
    for target in ["claude-code", "codex", "gemini"] {
        let (report, text) = export(target, &policy, dir.path());
        assert_eq!(report["target"], target);
        let mut reported = Vec::new();
        let mut emitted = Vec::new();
        for status in ["exact", "approximated", "inexpressible"] {
            for e in report[status].as_array().unwrap() {
                reported.push((
                    e["list"].as_str().unwrap().to_owned(),
                    e["rule"].as_str().unwrap().to_owned(),
                    e["source"].as_str().unwrap().to_owned(),
                ));
                let to = e["to"].as_array().unwrap();
                match status {
                    "inexpressible" => {
                        assert!(to.is_empty(), "{target}: {e}");
                        assert!(e["how"].is_string(), "{target}: {e}: says why");
                    }
                    "approximated" => assert!(e["how"].is_string(), "{target}: {e}: says how"),
                    _ => {}
                }
                emitted.extend(to.iter().cloned());
            }
        }
        assert_eq!(
            reported.len(),
            ENTRIES,
            "{target}: every rule and the default, once"
        );
        let unique: BTreeSet<_> = reported.iter().collect();
        assert_eq!(unique.len(), ENTRIES, "{target}: no rule twice");
        let in_file = items_in_file(target, &text);
        assert_eq!(
            set(&in_file),
            set(&emitted),
            "{target}: the file holds exactly what the report emitted"
        );
        assert_eq!(
            in_file.len(),
            set(&in_file).len(),
            "{target}: no duplicates in the file"
        );
    }
}

fn entry<'a>(report: &'a Value, rule: &str) -> (&'a str, &'a Value) {
    for status in ["exact", "approximated", "inexpressible"] {
        for e in report[status].as_array().unwrap() {
            if e["rule"] == rule {
                return (status, e);
            }
        }
    }
    panic!("{rule} not reported");
}

#[test]
fn translations_are_exact_or_stricter_rule_by_rule() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let policy = write(&root, "policy.toml", POLICY);
    let r = root.to_string_lossy();

    let (claude, _) = export("claude-code", &policy, &root);
    let to = |rule: &str| entry(&claude, rule).1["to"].clone();
    assert_eq!(entry(&claude, "bash(rm:*)").0, "exact");
    assert_eq!(
        to("bash(rm:*)"),
        json!([{"list": "deny", "rule": "Bash(rm:*)"}])
    );
    assert_eq!(
        to("edit(src/**)"),
        json!([{"list": "allow", "rule": format!("Edit(/{r}/src/**)")}])
    );
    assert_eq!(
        to("read(.env:*)"),
        json!([{"list": "deny", "rule": format!("Read(/{r}/**/.env*)")}])
    );
    assert_eq!(
        to("read(/etc/shadow)"),
        json!([{"list": "deny", "rule": "Read(//etc/shadow)"}])
    );
    assert_eq!(
        to("github__list_issues"),
        json!([{"list": "allow", "rule": "mcp__github__list_issues"}])
    );
    assert_eq!(entry(&claude, "github__delete_*").0, "approximated");
    assert_eq!(
        to("github__delete_*"),
        json!([{"list": "deny", "rule": "mcp__github"}])
    );
    assert_eq!(entry(&claude, "*").0, "inexpressible");
    assert_eq!(
        entry(&claude, "write(docs/**)").0,
        "inexpressible",
        "an Edit allow would also allow edits"
    );
    assert_eq!(entry(&claude, "edit(!src/generated/**)").0, "approximated");
    assert_eq!(
        entry(&claude, "bash(make:*)").1["to"],
        json!([]),
        "an untrusted allow is withheld"
    );
    assert_eq!(
        entry(&claude, "bash(curl:*)").0,
        "exact",
        "an untrusted deny applies"
    );
    // The managed allow-list carve-out drops the `read` allow it reaches (stricter).
    assert_eq!(entry(&claude, "read(!secrets/**)").0, "approximated");
    assert_eq!(entry(&claude, "read").0, "approximated");
    assert_eq!(entry(&claude, "read").1["to"], json!([]));
    assert_eq!(
        entry(&claude, "deny").1["to"],
        json!([{"defaultMode": "dontAsk"}])
    );

    let (codex, _) = export("codex", &policy, &root);
    assert_eq!(
        entry(&codex, "bash(git status:*)").1["to"],
        json!([{"pattern": ["git", "status"], "decision": "allow"}])
    );
    assert_eq!(
        entry(&codex, "bash(npm run build)").0,
        "inexpressible",
        "a prefix would allow more arguments"
    );
    assert_eq!(entry(&codex, "bash(git * main)").0, "approximated");
    assert_eq!(
        entry(&codex, "bash(git * main)").1["to"],
        json!([{"pattern": ["git"], "decision": "prompt"}])
    );
    assert_eq!(entry(&codex, "bash(echo 'a b':*)").0, "inexpressible");
    assert_eq!(entry(&codex, "read(.env:*)").0, "inexpressible");
    assert_eq!(entry(&codex, "deny").0, "inexpressible");

    let (gemini, text) = export("gemini", &policy, &root);
    assert_eq!(
        entry(&gemini, "bash(git status:*)").1["to"],
        json!([{"toolName": "run_shell_command", "commandRegex": "git status(?:[ ]|\\\\[tn]|\")", "decision": "allow", "priority": 100}])
    );
    assert_eq!(
        entry(&gemini, "github__delete_*").1["to"],
        json!([{"mcpName": "github", "decision": "deny", "priority": 300}])
    );
    assert_eq!(entry(&gemini, "*").0, "exact");
    assert_eq!(
        entry(&gemini, "deny").1["to"],
        json!([{"toolName": "*", "decision": "deny", "priority": 0}])
    );
    assert_eq!(
        entry(&gemini, "read(.env:*)").0,
        "approximated",
        "widened to every read"
    );
    assert_eq!(
        entry(&gemini, "deploy(staging:*)").0,
        "inexpressible",
        "a custom matcher"
    );
    assert!(text.starts_with("# Generated by `warden policy export --to gemini`"));
}

#[test]
fn without_out_the_file_goes_to_stdout_and_the_report_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        dir.path(),
        "p.toml",
        "default = \"ask\"\ndeny = [\"bash(rm:*)\"]\n",
    );
    let out = warden(
        &[
            "policy",
            "export",
            "--to",
            "claude-code",
            "--policy",
            &policy,
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["permissions"]["deny"], json!(["Bash(rm:*)"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("exact         deny bash(rm:*) [p] -> "),
        "{err}"
    );
    assert!(err.contains("inexpressible default ask"), "{err}");
    // A policy that does not load is exit 2.
    let bad = write(dir.path(), "bad.toml", "allow = [\"read\"]\n");
    let out = warden(
        &["policy", "export", "--to", "codex", "--policy", &bad],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

fn check(policy: &str, tool: &str, args: Value, dir: &Path) -> Value {
    let out = warden(
        &[
            "check",
            "--policy",
            policy,
            "--tool",
            tool,
            "--args",
            &args.to_string(),
            "--format",
            "json",
            "--cwd",
            dir.to_str().unwrap(),
        ],
        dir,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lines(&out).remove(0)
}

#[test]
fn claude_code_settings_import_into_ranked_sources() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(project.join(".claude")).unwrap();
    std::fs::create_dir_all(project.join("etc")).unwrap();
    let shared = write(
        &project.join(".claude"),
        "settings.json",
        r#"{"permissions":{"allow":["Bash(npm run test:*)","Read(./src/**)","Edit(/docs/**)","WebFetch(domain:docs.rs)"],"ask":["Bash(git push:*)"],"deny":["Bash(rm:*)","Read(./.env)"]},"hooks":{}}"#,
    );
    let local = write(
        &project.join(".claude"),
        "settings.local.json",
        r#"{"permissions":{"allow":["Bash(git status:*)","Grep","mcp__github__list_issues"],"deny":["mcp__jira"]}}"#,
    );
    let managed = write(
        &project.join("etc"),
        "managed-settings.json",
        r#"{"permissions":{"deny":["Bash(curl:*)","Agent(Explore)"],"defaultMode":"default"}}"#,
    );
    let user = write(
        &project,
        "mine.json",
        r#"{"permissions":{"allow":["Bash(ls:*)"]}}"#,
    );
    let out_file = project.join("imported.toml");
    let out = warden(
        &[
            "policy",
            "import",
            "--from",
            "claude-code",
            &shared,
            &local,
            &managed,
            &format!("user={user}"),
            "--out",
            out_file.to_str().unwrap(),
            "--format",
            "json",
        ],
        &project,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = lines(&out).remove(0);
    let inexpressible: Vec<&str> = report["inexpressible"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["rule"].as_str().unwrap())
        .collect();
    assert_eq!(inexpressible, ["Grep"]);
    assert_eq!(entry(&report, "Agent(Explore)").0, "approximated");
    assert_eq!(entry(&report, "Bash(rm:*)").1["to"], json!(["bash(rm:*)"]));

    let policy = out_file.to_str().unwrap();
    let compiled = warden(
        &["policy", "compile", "--policy", policy, "--format", "json"],
        &project,
    );
    assert_eq!(
        compiled.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    let c = lines(&compiled).remove(0);
    let sources: Vec<(String, i64, bool)> = c["sources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["rules"]["deny"].as_u64().unwrap()
                + s["rules"]["ask"].as_u64().unwrap()
                + s["rules"]["allow"].as_u64().unwrap()
                > 0
        })
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["rank"].as_i64().unwrap(),
                s["trusted"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        sources,
        [
            ("managed".into(), 0, true),
            ("local".into(), -10, true),
            ("project".into(), -20, true),
            ("user".into(), -30, true)
        ]
    );
    assert_eq!(c["default"], "ask");

    let p = project.to_string_lossy();
    let v = check(policy, "bash", json!({"command": "rm -rf build"}), &project);
    assert_eq!(
        (
            v["decision"].as_str(),
            v["rule"].as_str(),
            v["source"].as_str()
        ),
        (Some("deny"), Some("bash(rm:*)"), Some("project"))
    );
    let v = check(
        policy,
        "bash",
        json!({"command": "curl https://x"}),
        &project,
    );
    assert_eq!(
        (v["decision"].as_str(), v["source"].as_str()),
        (Some("deny"), Some("managed"))
    );
    assert_eq!(
        check(
            policy,
            "bash",
            json!({"command": "npm run test -- unit"}),
            &project
        )["decision"],
        "allow"
    );
    assert_eq!(
        check(policy, "bash", json!({"command": "git push"}), &project)["decision"],
        "ask"
    );
    assert_eq!(
        check(policy, "bash", json!({"command": "ls -la"}), &project)["source"],
        "user"
    );
    assert_eq!(
        check(
            policy,
            "read",
            json!({"path": format!("{p}/src/a.rs")}),
            &project
        )["decision"],
        "allow"
    );
    assert_eq!(
        check(
            policy,
            "read",
            json!({"path": format!("{p}/.env")}),
            &project
        )["decision"],
        "deny"
    );
    assert_eq!(
        check(
            policy,
            "write",
            json!({"path": format!("{p}/docs/x.md")}),
            &project
        )["decision"],
        "allow"
    );
    assert_eq!(
        check(policy, "jira__create", json!({}), &project)["decision"],
        "deny"
    );

    // A file whose scope cannot be told is exit 2.
    let out = warden(
        &["policy", "import", "--from", "claude-code", &user],
        &project,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

#[test]
fn a_claude_code_export_imports_back_with_the_same_decisions() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let policy = write(
        &root,
        "policy.toml",
        "default = \"ask\"\nallow = [\"bash(git status:*)\", \"read(src/**)\", \"github__list_issues\"]\nask = [\"bash(git push:*)\"]\ndeny = [\"bash(rm:*)\", \"read(/etc/**)\", \"edit(.git/**)\"]\n",
    );
    std::fs::create_dir_all(root.join(".claude")).unwrap();
    let settings = root.join(".claude/settings.json");
    let out = warden(
        &[
            "policy",
            "export",
            "--to",
            "claude-code",
            "--policy",
            &policy,
            "--out",
            settings.to_str().unwrap(),
        ],
        &root,
    );
    assert_eq!(out.status.code(), Some(0));
    let imported = root.join("imported.toml");
    let out = warden(
        &[
            "policy",
            "import",
            "--from",
            "claude-code",
            settings.to_str().unwrap(),
            "--out",
            imported.to_str().unwrap(),
        ],
        &root,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = root.to_string_lossy();
    for (tool, args) in [
        ("bash", json!({"command": "git status"})),
        ("bash", json!({"command": "git push origin main"})),
        ("bash", json!({"command": "rm -rf /"})),
        ("bash", json!({"command": "make"})),
        ("read", json!({"path": format!("{r}/src/lib.rs")})),
        ("read", json!({"path": "/etc/passwd"})),
        ("read", json!({"path": format!("{r}/README.md")})),
        ("edit", json!({"path": format!("{r}/.git/config")})),
        ("write", json!({"path": format!("{r}/.git/HEAD")})),
        ("github__list_issues", json!({})),
    ] {
        let a = check(&policy, tool, args.clone(), &root);
        let b = check(imported.to_str().unwrap(), tool, args.clone(), &root);
        assert_eq!(a["decision"], b["decision"], "{tool} {args}");
    }
}
