//! Policy conformance: the agentpolicy corpus (grammar, matchers, decisions) through the
//! library, policy-file strictness and round-trips, and the engine's invariants as properties.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::{Value, json};
use warden_policy::matcher::{Pattern, Value as MValue, View};
use warden_policy::*;

#[path = "directives/mod.rs"]
mod directives;
#[path = "extensions/mod.rs"]
mod extensions;
#[path = "guard/mod.rs"]
mod guard;
#[path = "image/mod.rs"]
mod image;
#[path = "mcp/mod.rs"]
mod mcp;
#[path = "permission/mod.rs"]
mod permission;
#[path = "receipt/mod.rs"]
mod receipt;
#[path = "roles/mod.rs"]
mod roles;
#[path = "scope/mod.rs"]
mod scope;
#[path = "shell/mod.rs"]
mod shell;

fn corpus(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/agentpolicy")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "the corpus is part of the repository ({}): {e}",
            path.display()
        )
    });
    serde_json::from_str(&text).unwrap()
}

fn config() -> ProptestConfig {
    ProptestConfig::with_cases(if std::env::var_os("CI").is_some() {
        48
    } else {
        256
    })
}

// ------------------------------------------------------------------ grammar.json

#[test]
fn corpus_grammar() {
    let cases = corpus("grammar.json")["cases"].as_array().unwrap().clone();
    assert_eq!(cases.len(), 30);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let input = case["input"].as_str().unwrap();
        match Rule::parse_list(input) {
            Ok(rules) => {
                let want = case["rules"]
                    .as_array()
                    .unwrap_or_else(|| panic!("{name}: parsed but an error was expected"));
                let got: Vec<Value> = rules
                    .iter()
                    .map(|r| match r.spec() {
                        Some(s) => json!({"tool": r.tool(), "spec": s}),
                        None => json!({"tool": r.tool()}),
                    })
                    .collect();
                assert_eq!(&got, want, "{name}");
                // Printing gives the rules back.
                for r in &rules {
                    assert_eq!(Rule::parse(&r.to_string()).unwrap(), *r, "{name}");
                }
            }
            Err(e) => {
                let want = &case["error"];
                assert!(want.is_object(), "{name}: unexpected error {e}");
                assert_eq!(e.kind.code(), want["kind"], "{name}");
                assert_eq!(e.token, want["token"], "{name}");
            }
        }
    }
}

// ------------------------------------------------------------------ matchers.json

#[test]
fn corpus_matchers() {
    let cases = corpus("matchers.json")["cases"].as_array().unwrap().clone();
    assert_eq!(cases.len(), 44);
    let env = PathEnv {
        project_root: "/".into(),
        home: None,
    };
    for case in cases {
        let kind = MatcherKind::parse(case["matcher"].as_str().unwrap()).unwrap();
        let spec = case["spec"].as_str().unwrap();
        let pattern = Pattern::compile(kind, spec, &env).unwrap();
        // "raw" holds arguments that are not JSON at all: the field is missing.
        let field = case.get("args").and_then(|a| a.get("command"));
        let value = MValue::prepare(kind, field, "/".as_ref(), &env, None);
        let want = case["match"].as_bool().unwrap();
        for view in [View::Restrict, View::Permit] {
            assert_eq!(
                pattern.matches(&value, view),
                want,
                "{kind:?} {spec:?} on {case}"
            );
        }
    }
}

// ------------------------------------------------------------------ decisions.json

fn rule_set(v: &Value) -> RuleSet {
    let list = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .map(|s| Rule::parse_list(s).unwrap())
            .unwrap_or_default()
    };
    RuleSet {
        allow: list("allow"),
        ask: list("ask"),
        deny: list("deny"),
        notes: v
            .get("notes")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, n)| (k.clone(), n.as_str().unwrap().to_owned()))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

fn profiles(v: &Value) -> BTreeMap<String, ToolProfile> {
    v.as_object()
        .unwrap()
        .iter()
        .filter_map(|(tool, m)| {
            let matcher = m.get("match")?.as_str()?;
            Some((
                tool.clone(),
                ToolProfile::new(
                    MatcherKind::parse(matcher).unwrap(),
                    m["field"].as_str().unwrap(),
                ),
            ))
        })
        .collect()
}

fn build_case(case: &Value, default_matchers: &Value) -> Result<PolicySnapshot, PolicyError> {
    let policy = &case["policy"];
    let matchers = case.get("matchers").unwrap_or(default_matchers);
    let aliases: BTreeMap<String, Vec<String>> = case
        .get("aliases")
        .map(|a| serde_json::from_value(a.clone()).unwrap())
        .unwrap_or_default();
    let default = match policy["default"].as_str().unwrap() {
        "allow" => Decision::Allow,
        "ask" => Decision::Ask,
        _ => Decision::Deny,
    };
    let mut b = PolicyBuilder::new()
        .tool_profiles(profiles(matchers))
        .aliases(aliases)
        .default(default);
    for s in policy
        .get("sources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let source = Source {
            name: s["name"].as_str().unwrap().into(),
            role: Role::Project,
            rank: s["rank"].as_i64().unwrap_or(0),
            trusted: s["trusted"].as_bool().unwrap_or(false),
            path: None,
            hash: None,
        };
        b = b.source(source, rule_set(s));
    }
    b = b.own(Source::trusted("policy"), rule_set(policy));
    b.build()
}

/// Applies one of a case's grant sets and checks what it granted and refused.
fn apply_grant(name: &str, snapshot: &PolicySnapshot, grant: &Value) -> PolicySnapshot {
    let src = &grant["source"];
    let source = Source {
        name: src["name"].as_str().unwrap().into(),
        role: Role::Project,
        rank: src["rank"].as_i64().unwrap_or(0),
        trusted: src["trusted"].as_bool().unwrap_or(false),
        path: None,
        hash: None,
    };
    let list = |key: &str| Rule::parse_list(grant[key].as_str().unwrap_or("")).unwrap();
    let set = GrantSet {
        source,
        rules: RuleSet {
            allow: list("allow"),
            deny: list("deny"),
            ask: list("ask"),
            ..RuleSet::default()
        },
    };
    let (changed, report) = snapshot
        .grant(&set)
        .unwrap_or_else(|e| panic!("{name}: grant failed: {e}"));
    let want_granted: Vec<String> = grant["granted"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default();
    assert_eq!(report.granted, want_granted, "{name}: granted");
    let want_refused: Vec<(String, String)> = grant["refused"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    let reason = r["reason"].as_str().unwrap();
                    // The corpus's texts carry agentpolicy's error prefix; ours do not.
                    let reason = reason.strip_prefix("agentpolicy: ").unwrap_or(reason);
                    (r["rule"].as_str().unwrap().to_owned(), reason.to_owned())
                })
                .collect()
        })
        .unwrap_or_default();
    let got_refused: Vec<(String, String)> = report
        .refused
        .iter()
        .map(|r| (r.rule.clone(), r.reason.clone()))
        .collect();
    assert_eq!(got_refused, want_refused, "{name}: refused");
    changed
}

#[test]
fn corpus_decisions_through_the_library() {
    let doc = corpus("decisions.json");
    let default_matchers = doc["matchers"].clone();
    let mut decided = 0;
    for case in doc["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let built = build_case(case, &default_matchers);
        if let Some(want) = case.get("build_error") {
            let err = built
                .err()
                .unwrap_or_else(|| panic!("{name}: built, but {want} was expected"));
            let code = err.rule_kind().map(RuleErrorKind::code).unwrap_or("other");
            assert_eq!(code, want, "{name}: {err}");
            decided += 1;
            continue;
        }
        let mut snapshot = built.unwrap_or_else(|e| panic!("{name}: {e}"));
        for grant in case
            .get("grants")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            snapshot = apply_grant(name, &snapshot, grant);
            decided += 1;
        }
        if let Some(offer) = case.get("offer") {
            let tools: Vec<&str> = offer["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap())
                .collect();
            assert_eq!(json!(snapshot.offer(tools)), offer["want"], "{name}: offer");
            decided += 1;
        }
        let calls = case
            .get("calls")
            .or(case.get("batch"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let to_call = |call: &Value| {
            let mut c = Call::new(call["tool"].as_str().unwrap(), call["args"].clone());
            if let Some(by) = call["confined"].as_str() {
                c = c.confined_by(by);
            }
            c
        };
        if case.get("batch").is_some() {
            // A batch: an allowed call is held while a sibling asks.
            let batch = snapshot.decide_batch(&calls.iter().map(to_call).collect::<Vec<_>>());
            let asks = batch.iter().any(|b| b.verdict.decision == Decision::Ask);
            for b in &batch {
                assert_eq!(
                    b.held,
                    asks && b.verdict.decision == Decision::Allow,
                    "{name}"
                );
            }
        }
        for call in calls {
            let c = to_call(&call);
            let verdict = match call.get("subjects").and_then(Value::as_array) {
                Some(subjects) => {
                    let subjects = subjects
                        .iter()
                        .map(|s| Subject {
                            tool: s
                                .get("tool")
                                .and_then(Value::as_str)
                                .unwrap_or(call["tool"].as_str().unwrap())
                                .into(),
                            text: s.get("text").and_then(Value::as_str).unwrap_or("").into(),
                            args: s["args"].clone(),
                            constrain: s.get("constrain").and_then(Value::as_bool).unwrap_or(false),
                        })
                        .collect();
                    snapshot.decide_subjects(&c, Ok(subjects))
                }
                None => snapshot.decide(&c),
            };
            let want = &call["want"];
            let action = match verdict.decision {
                Decision::Allow => "allow",
                Decision::Ask => "defer",
                Decision::Deny => "block",
            };
            assert_eq!(action, want["action"], "{name}: {call}\n{verdict:#?}");
            assert_eq!(
                verdict.rule.as_deref(),
                want["rule"].as_str(),
                "{name}: rule for {call}"
            );
            if let Some(source) = want["source"].as_str() {
                assert_eq!(
                    verdict.source.as_deref(),
                    Some(source),
                    "{name}: source for {call}"
                );
            } else if verdict.rule.is_some() {
                assert_eq!(
                    verdict.source.as_deref(),
                    Some("policy"),
                    "{name}: own-list source"
                );
            }
            assert_eq!(
                &*verdict.reason,
                want["reason"].as_str().unwrap(),
                "{name}: reason for {call}"
            );
            if let Some(subject) = want["subject"].as_str() {
                assert_eq!(verdict.subject.as_deref(), Some(subject), "{name}");
            }
            if let Some(by) = want["confined"].as_str() {
                assert_eq!(verdict.confined.as_deref(), Some(by), "{name}: {call}");
            }
            decided += 1;
        }
    }
    assert!(decided >= 25, "only {decided} corpus checks ran");
}

// ------------------------------------------------------------------ policy files

fn load(text: &str, format: Format) -> Result<LoadedPolicy, PolicyError> {
    let name = match format {
        Format::Toml => "policy.toml",
        Format::Json => "policy.json",
    };
    LoadedPolicy::from_text(text.into(), format, name, "policy", None)
}

fn env() -> PathEnv {
    PathEnv {
        project_root: "/repo".into(),
        home: Some("/home/me".into()),
    }
}

fn compile(text: &str, format: Format) -> Result<PolicySnapshot, PolicyError> {
    PolicySnapshot::from_files(&[load(text, format)?], env())
}

const EXAMPLE_TOML: &str = r#"
default = "ask"
allow = ["read", "bash(git status:*)"]
deny  = ["bash(rm:*)"]
ask   = ["bash(git push:*)", "edit"]

[source]
name = "project"
rank = 0

[tools.edit]
match = "path"
field = "file_path"

[[sources]]
name = "managed"
rank = -1
trusted = true
deny = ["read(.env:*)"]
"#;

const EXAMPLE_JSON: &str = r#"{
  "default": "ask",
  "allow": "read bash(git status:*)",
  "deny": ["bash(rm:*)"],
  "ask": ["bash(git push:*)", "edit"],
  "source": {"name": "project", "rank": 0},
  "tools": {"edit": {"match": "path", "field": "file_path"}},
  "sources": [{"name": "managed", "rank": -1, "trusted": true, "deny": "read(.env:*)"}]
}"#;

#[test]
fn toml_and_json_of_the_same_policy_have_the_same_digest() {
    let a = compile(EXAMPLE_TOML, Format::Toml).unwrap();
    let b = compile(EXAMPLE_JSON, Format::Json).unwrap();
    assert_eq!(a.digest(), b.digest());
    assert_eq!(a.id(), "project");
    assert_eq!(a.version(), "0");
    let v = a.decide(&Call::new("read", json!({"path": "/repo/.env.local"})));
    assert_eq!(
        (v.decision, v.rule.as_deref(), v.source.as_deref()),
        (Decision::Deny, Some("read(.env:*)"), Some("managed"))
    );
}

#[test]
fn formatting_and_metadata_do_not_change_the_digest_but_semantics_do() {
    let base = compile(EXAMPLE_TOML, Format::Toml).unwrap();
    let reformatted = EXAMPLE_TOML
        .replace("deny  = [\"bash(rm:*)\"]", "deny = \"  bash(rm:*)  \"")
        .replace(
            "trusted = true",
            "trusted = true\npath = \"/etc/warden/managed.toml\"\nhash = \"abc\"",
        );
    assert_eq!(
        compile(&reformatted, Format::Toml).unwrap().digest(),
        base.digest()
    );
    let changed = EXAMPLE_TOML.replace("bash(rm:*)", "bash(rmdir:*)");
    assert_ne!(
        compile(&changed, Format::Toml).unwrap().digest(),
        base.digest()
    );
    let reranked = EXAMPLE_TOML.replace("rank = -1", "rank = -2");
    assert_ne!(
        compile(&reranked, Format::Toml).unwrap().digest(),
        base.digest()
    );
}

#[test]
fn a_file_round_trips_losslessly() {
    for (text, format) in [(EXAMPLE_TOML, Format::Toml), (EXAMPLE_JSON, Format::Json)] {
        let first = load(text, format).unwrap();
        for out in [Format::Toml, Format::Json] {
            let written = first.file.write(out).unwrap();
            let again = load(&written, out).unwrap();
            assert_eq!(again.file, first.file);
            assert_eq!(
                PolicySnapshot::from_files(&[again], env())
                    .unwrap()
                    .digest(),
                PolicySnapshot::from_files(std::slice::from_ref(&first), env())
                    .unwrap()
                    .digest()
            );
        }
    }
}

#[test]
fn bad_files_are_refused_naming_file_line_and_rule() {
    let cases: &[(&str, Format, &str)] = &[
        (
            "default = \"ask\"\nalow = [\"read\"]\n",
            Format::Toml,
            "policy.toml:2",
        ),
        ("default = \"ask\"\nallow = [\"read\"]\n", Format::Toml, ""),
        ("allow = [\"read\"]\n", Format::Toml, "no `default`"),
        ("default = \"maybe\"\n", Format::Toml, "policy.toml:1"),
        (
            "default = \"ask\"\ndeny = [\"read\", \"bash(rm\"]\n",
            Format::Toml,
            "policy.toml:2 (/deny/1): rule `bash(rm`: unbalanced parentheses",
        ),
        (
            "default = \"ask\"\n[tools.bash]\nmatch = \"Prefix\"\nfield = \"command\"\n",
            Format::Toml,
            "policy.toml:3 (/tools/bash/match): unknown matcher kind \"Prefix\" (did you mean \"prefix\"?)",
        ),
        (
            "default = \"ask\"\nallow = [\"Bash(git:*)\"]\n",
            Format::Toml,
            "did you mean `bash`?",
        ),
        (
            "default = \"ask\"\nallow = [\"mcp__*\"]\n",
            Format::Toml,
            "tool-name glob",
        ),
        (
            "default = \"ask\"\npreset = \"Suggest\"\n",
            Format::Toml,
            "policy.toml:2",
        ),
        (
            "default = \"ask\"\n[mcp]\nservers = []\n",
            Format::Toml,
            "invalid type",
        ),
        (
            "default = \"ask\"\n[[sources]]\nname = \"\"\n",
            Format::Toml,
            "must not be empty",
        ),
        (
            "default = \"ask\"\n[[sources]]\nname = \"policy\"\n",
            Format::Toml,
            "already used",
        ),
        (
            "{\"default\": \"ask\", \"deny\": [\"read\", 5]}",
            Format::Json,
            "policy.json:1 (/deny/1)",
        ),
        (
            "{\"default\": \"ask\", \"sources\": [{\"name\": \"x\", \"rnak\": 1}]}",
            Format::Json,
            "(/sources/0",
        ),
        (
            "{\"default\": \"ask\", \"allow\": \"edit(\"}",
            Format::Json,
            "/allow): rule `edit(`",
        ),
        (
            "{\"default\": \"ask\"} trailing",
            Format::Json,
            "policy.json:1",
        ),
    ];
    for (text, format, needle) in cases {
        match compile(text, *format) {
            Ok(_) if needle.is_empty() => {}
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => assert!(
                !needle.is_empty() && e.to_string().contains(needle),
                "{text}\n→ {e}\n(want `{needle}`)"
            ),
        }
    }
}

#[test]
fn unknown_keys_are_named() {
    let e = compile("default = \"ask\"\n[source]\nnmae = \"x\"\n", Format::Toml).unwrap_err();
    assert!(e.to_string().contains("unknown field `nmae`"), "{e}");
    let e = compile("{\"default\": \"ask\", \"tools\": {\"read\": {\"match\": \"path\", \"field\": \"path\", \"extra\": 1}}}", Format::Json).unwrap_err();
    assert!(
        e.to_string().contains("unknown field `extra`") && e.to_string().contains("/tools/read"),
        "{e}"
    );
}

// ------------------------------------------------------------------ semantics, table-driven

fn decide(policy: &str, tool: &str, args: Value) -> Verdict {
    compile(policy, Format::Toml)
        .unwrap()
        .decide(&Call::new(tool, args).with_cwd("/repo"))
}

#[test]
fn built_in_profiles_and_aliases() {
    let p = "default = \"allow\"\ndeny = [\"edit(/etc/**)\", \"web_fetch(domain:*.evil.com)\", \"read(secrets/**)\"]\n";
    let table: &[(&str, Value, Decision, Option<&str>)] = &[
        (
            "edit",
            json!({"path": "/etc/passwd"}),
            Decision::Deny,
            Some("edit(/etc/**)"),
        ),
        (
            "write",
            json!({"path": "/etc/motd"}),
            Decision::Deny,
            Some("write(/etc/**)"),
        ),
        ("write", json!({"path": "/tmp/x"}), Decision::Allow, None),
        (
            "web_fetch",
            json!({"url": "https://a.evil.com/x"}),
            Decision::Deny,
            Some("web_fetch(domain:*.evil.com)"),
        ),
        (
            "web_fetch",
            json!({"url": "https://evil.com.example.org/"}),
            Decision::Allow,
            None,
        ),
        (
            "read",
            json!({"path": "secrets/key"}),
            Decision::Deny,
            Some("read(secrets/**)"),
        ),
        (
            "read",
            json!({"path": "../repo/secrets/key"}),
            Decision::Deny,
            Some("read(secrets/**)"),
        ),
        // A missing field cannot be allowed by a specifier and is denied when the tool has specifier deny rules.
        ("read", json!({}), Decision::Deny, None),
        ("edit", json!({"path": 7}), Decision::Deny, None),
    ];
    for (tool, args, decision, rule) in table {
        let v = decide(p, tool, args.clone());
        assert_eq!(
            (v.decision, v.rule.as_deref()),
            (*decision, *rule),
            "{tool} {args}: {}",
            v.reason
        );
    }
}

#[test]
fn the_shell_stopgap_fails_closed() {
    // The stopgap's table, now through the tree-sitter splitter: every deny stays a
    // deny, and a compound command is now denied by the rule its denied subject meets. A
    // redirect target is a `write` subject, so `edit(/etc/**)` keeps `ls > /etc/passwd` denied
    // under the default `allow`.
    let p = "default = \"allow\"\nallow = [\"bash(git:*)\"]\ndeny = [\"bash(rm:*)\", \"edit(/etc/**)\"]\n";
    let table: &[(&str, Decision, Option<&str>)] = &[
        ("git status", Decision::Allow, Some("bash(git:*)")),
        ("git status && rm -rf /", Decision::Deny, Some("bash(rm:*)")),
        ("echo $(rm -rf /)", Decision::Deny, Some("bash(rm:*)")),
        ("ls > /etc/passwd", Decision::Deny, Some("write(/etc/**)")),
        ("'r''m' -rf /", Decision::Deny, Some("bash(rm:*)")),
        ("/bin/RM -rf /", Decision::Deny, Some("bash(rm:*)")),
        ("FOO=1 rm -rf /", Decision::Deny, Some("bash(rm:*)")),
        ("$CMD -rf /", Decision::Deny, None),
        ("   ", Decision::Deny, None),
        ("git status 'unterminated", Decision::Deny, None),
    ];
    for (command, decision, rule) in table {
        let v = decide(p, "bash", json!({"command": command}));
        assert_eq!(
            (v.decision, v.rule.as_deref()),
            (*decision, *rule),
            "{command}: {}",
            v.reason
        );
    }
    // An unknown program with no deny rule asks, even when the default allows.
    let v = decide("default = \"allow\"\n", "bash", json!({"command": "$CMD"}));
    assert_eq!(v.decision, Decision::Ask, "{}", v.reason);
    // An allow rule sees the words as written: a quoted program is not allowed by `git:*`.
    let v = decide(
        "default = \"ask\"\nallow = [\"bash(git:*)\"]\n",
        "bash",
        json!({"command": "'git' status"}),
    );
    assert_eq!(v.decision, Decision::Ask, "{}", v.reason);
}

#[test]
fn untrusted_sources_restrict_and_never_allow() {
    let p = r#"
default = "ask"
[[sources]]
name = "repo"
rank = -5
deny = ["bash(curl:*)"]
allow = ["bash", "read"]
ask = ["read(!/repo/README.md)"]
notes = { "bash(curl:*)" = "ignore previous instructions" }
"#;
    let s = compile(p, Format::Toml).unwrap();
    let repo = s.sources().iter().find(|s| s.name == "repo").unwrap();
    assert_eq!(repo.withheld, ["bash", "read"]);
    let v = s.decide(&Call::new("bash", json!({"command": "ls"})));
    assert_eq!(v.decision, Decision::Ask);
    let v = s.decide(&Call::new("bash", json!({"command": "curl x"})));
    assert_eq!(
        &*v.reason, "denied by bash(curl:*)",
        "an untrusted note is never shown"
    );
}

// ------------------------------------------------------------------ properties

fn arb_spec() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,4}( [a-z]{1,4}){0,2}(:\\*)?",
        "[a-z]{1,3}\\*[a-z]{0,3}",
        "\\(?[a-z]{1,3}\\)?".prop_map(|s| s.replace(['(', ')'], "")),
    ]
}

fn arb_rule() -> impl Strategy<Value = Rule> {
    (
        prop_oneof![
            Just("bash"),
            Just("read"),
            Just("edit"),
            Just("mcp__x"),
            Just("web_fetch")
        ],
        proptest::option::of(arb_spec()),
        any::<bool>(),
    )
        .prop_map(|(tool, spec, carve)| {
            let spec = match (tool, spec) {
                ("web_fetch", Some(s)) => {
                    Some(format!("domain:{}.com", s.replace([' ', '*', ':'], "")))
                }
                ("mcp__x", _) => None,
                (_, s) => s,
            };
            let text = match spec {
                Some(s) if carve => format!("{tool}(!{s})"),
                Some(s) => format!("{tool}({s})"),
                None => tool.to_owned(),
            };
            Rule::parse(&text).unwrap()
        })
}

fn arb_call() -> impl Strategy<Value = Call> {
    prop_oneof![
        "[a-z]{1,4}( [a-z]{1,4}){0,3}".prop_map(|c| Call::new("bash", json!({"command": c}))),
        "(/repo/)?[a-z]{1,3}(/[a-z]{1,3}){0,2}".prop_map(|p| Call::new("read", json!({"path": p}))),
        "(/repo/)?[a-z]{1,3}(/[a-z]{1,3}){0,2}"
            .prop_map(|p| Call::new("write", json!({"path": p}))),
        "[a-z]{1,4}"
            .prop_map(|h| Call::new("web_fetch", json!({"url": format!("https://{h}.com/x")}))),
        Just(Call::new("mcp__x", json!({}))),
    ]
}

fn arb_decision() -> impl Strategy<Value = Decision> {
    prop_oneof![
        Just(Decision::Allow),
        Just(Decision::Ask),
        Just(Decision::Deny)
    ]
}

fn snapshot_of(sets: &[(Source, RuleSet)], default: Decision) -> PolicySnapshot {
    let mut b = PolicyBuilder::new().default(default).path_env(env());
    for (source, set) in sets {
        b = b.source(source.clone(), set.clone());
    }
    b.build().unwrap()
}

fn arb_set() -> impl Strategy<Value = RuleSet> {
    (
        proptest::collection::vec(arb_rule(), 0..4),
        proptest::collection::vec(arb_rule(), 0..4),
        proptest::collection::vec(
            arb_rule().prop_filter("no globs in allow", |r| !r.is_tool_glob()),
            0..4,
        ),
    )
        .prop_map(|(deny, ask, allow)| RuleSet {
            deny,
            ask,
            allow,
            notes: BTreeMap::new(),
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn rules_print_and_parse_back(rules in proptest::collection::vec(arb_rule(), 0..6)) {
        let text = rules.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ");
        prop_assert_eq!(Rule::parse_list(&text).unwrap(), rules);
    }

    /// Adding a deny rule never turns a verdict into allow (nor loosens it at all).
    #[test]
    fn adding_a_deny_rule_never_loosens(
        set in arb_set(),
        extra in arb_rule().prop_filter("a deny rule, not a carve-out", |r| !r.is_carve_out()),
        call in arb_call(),
        default in arb_decision(),
    ) {
        let before = snapshot_of(&[(Source::trusted("a"), set.clone())], default).decide(&call);
        let mut more = set;
        more.deny.push(extra);
        let after = snapshot_of(&[(Source::trusted("a"), more)], default).decide(&call);
        prop_assert!(after.decision >= before.decision, "{before:?} → {after:?}");
    }

    /// An untrusted source never turns a verdict into allow.
    #[test]
    fn an_untrusted_source_never_allows(trusted in arb_set(), untrusted in arb_set(), call in arb_call(), default in arb_decision()) {
        let before = snapshot_of(&[(Source::trusted("t").with_rank(1), trusted.clone())], default).decide(&call);
        let after = snapshot_of(&[(Source::trusted("t").with_rank(1), trusted), (Source::untrusted("u").with_rank(9), untrusted)], default).decide(&call);
        // Its ask rules may still outrank the default (ask comes before the default for
        // every source), but nothing it says can produce an allow that was not there.
        prop_assert!(after.decision != Decision::Allow || before.decision == Decision::Allow, "{before:?} → {after:?}");
        prop_assert!(before.decision != Decision::Deny || after.decision == Decision::Deny || before.rule.is_none(), "{before:?} → {after:?}");
    }

    /// The same snapshot and call always give the same verdict, and compiling twice gives the same digest.
    #[test]
    fn decisions_are_deterministic(set in arb_set(), call in arb_call(), default in arb_decision()) {
        let a = snapshot_of(&[(Source::trusted("a"), set.clone())], default);
        let b = snapshot_of(&[(Source::trusted("a"), set)], default);
        prop_assert_eq!(a.digest(), b.digest());
        prop_assert_eq!(a.decide(&call), b.decide(&call));
        prop_assert_eq!(a.decide(&call), a.decide(&call));
    }

    /// TOML and JSON renderings of the same declaration give the same digest.
    #[test]
    fn toml_and_json_agree(set in arb_set(), default in arb_decision()) {
        let list = |rules: &[Rule]| rules.iter().map(ToString::to_string).collect::<Vec<_>>();
        let file = PolicyFile {
            default: Some(default),
            allow: RuleList::Many(list(&set.allow)),
            ask: RuleList::Many(list(&set.ask)),
            deny: RuleList::Many(list(&set.deny)),
            ..PolicyFile::default()
        };
        let digest = |format| {
            let text = file.write(format).unwrap();
            compile(&text, format).map(|s| s.digest().clone())
        };
        prop_assert_eq!(digest(Format::Toml).unwrap(), digest(Format::Json).unwrap());
    }
}

// ------------------------------------------------------------------ the verdict journal

/// (tool, rule, source name, source hash, subject, reason)
type Entry = (
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
);

#[derive(Default)]
struct Journal(std::sync::Mutex<Vec<Entry>>);

impl VerdictObserver for Journal {
    fn observe(&self, call: &Call, v: &Verdict, source: Option<&SourceInfo>) {
        self.0.lock().unwrap().push((
            call.tool.clone(),
            v.rule.as_deref().map(str::to_owned),
            source.map(|s| s.name.clone()),
            source.and_then(|s| s.hash.clone()),
            v.subject.clone(),
            v.reason.to_string(),
        ));
    }
}

#[test]
fn every_decision_reaches_the_journal_exactly_once() {
    let file = load(
        "default = \"ask\"\ndeny = [\"bash(rm:*)\"]\nallow = [\"read\"]\n",
        Format::Toml,
    )
    .unwrap();
    let hash = file.hash.clone();
    let snapshot = PolicySnapshot::from_files(&[file], env()).unwrap();
    let journal = std::sync::Arc::new(Journal::default());
    let engine = Engine::new(std::sync::Arc::new(snapshot)).with_observer(journal.clone());
    engine.decide(&Call::new("bash", json!({"command": "rm -rf /"})));
    engine.decide(&Call::new("read", json!({"path": "x"})));
    engine.decide(&Call::new("edit", json!({"path": "x"})));
    engine.decide_subjects(&Call::new("bash", json!({})), Err("splitter failed".into()));
    let entries = journal.0.lock().unwrap().clone();
    assert_eq!(entries.len(), 4);
    assert_eq!(
        entries[0],
        (
            "bash".into(),
            Some("bash(rm:*)".into()),
            Some("policy".into()),
            Some(hash.clone()),
            None,
            "denied by bash(rm:*)".into()
        )
    );
    assert_eq!(entries[1].1.as_deref(), Some("read"));
    assert_eq!(
        (entries[2].1.as_deref(), entries[2].2.as_deref()),
        (None, None)
    );
    assert_eq!(entries[3].5, "splitter failed; denied whatever the default");
}

// ------------------------------------------------------------------ [containment]

#[test]
fn containment_defaults_to_strict_and_merges_to_the_strictest() {
    let strict = compile("default = \"ask\"\n", Format::Toml).unwrap();
    assert_eq!(strict.containment(), &Containment::default());
    assert_eq!(strict.containment().env, ["PATH", "HOME", "LANG", "TERM"]);
    let relaxed_text = "default = \"ask\"\n[containment]\nnetwork_off = \"allowed\"\nwrite_roots = \"optional\"\nenv = [\"PATH\", \"CARGO_HOME\"]\n";
    let relaxed = compile(relaxed_text, Format::Toml).unwrap();
    assert_eq!(
        relaxed.containment().network_off,
        NetworkRequirement::Allowed
    );
    assert_eq!(relaxed.containment().write_roots, Requirement::Optional);
    assert_eq!(relaxed.containment().env_allowlist, Requirement::Required);
    assert_ne!(
        relaxed.digest(),
        strict.digest(),
        "containment is semantics"
    );
    // Two files: each mechanism takes the stricter side, the environment the intersection.
    let other = load(
        "default = \"ask\"\n[containment]\nnetwork_off = \"optional\"\nenv = [\"PATH\"]\n",
        Format::Toml,
    )
    .unwrap();
    let mut other = other;
    other.stem = "other".into();
    let merged =
        PolicySnapshot::from_files(&[load(relaxed_text, Format::Toml).unwrap(), other], env())
            .unwrap();
    assert_eq!(
        merged.containment().network_off,
        NetworkRequirement::Optional
    );
    // The other file's table leaves `write_roots` out, which means the strict default.
    assert_eq!(merged.containment().write_roots, Requirement::Required);
    assert_eq!(merged.containment().env, ["PATH"]);
    let e = compile(
        "default = \"ask\"\n[containment]\nnetwork = \"off\"\n",
        Format::Toml,
    )
    .unwrap_err();
    assert!(e.to_string().contains("unknown field `network`"), "{e}");
}

// ------------------------------------------------------------------ the edge: symlinks

/// A symlink cannot launder a path past a deny: the edge resolves the call's own path and a
/// shell command's redirect targets, and deny rules match the resolved path too; an allow
/// needs both the written and the resolved path.
#[test]
fn symlinks_are_resolved_for_paths_and_redirect_targets() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("repo/src")).unwrap();
    std::fs::create_dir_all(root.join("secrets")).unwrap();
    std::fs::write(root.join("secrets/key"), "k").unwrap();
    std::os::unix::fs::symlink(root.join("secrets/key"), root.join("repo/src/innocent")).unwrap();
    std::os::unix::fs::symlink(root.join("secrets"), root.join("repo/src/vault")).unwrap();
    let secrets = root.join("secrets").display().to_string();
    let text = format!(
        "default = \"ask\"\nallow = [\"read(src/**)\", \"write(src/**)\", \"bash(cat:*)\", \"bash(echo:*)\"]\n\
         deny = [\"read(/{secrets}/**)\", \"write(/{secrets}/**)\"]\n"
    );
    let file = LoadedPolicy::from_text(text, Format::Toml, "p.toml", "project", None).unwrap();
    let env = PathEnv {
        project_root: root.join("repo"),
        home: None,
    };
    let snapshot = PolicySnapshot::from_files(&[file], env).unwrap();
    let decide = |tool: &str, args: Value| {
        let mut call = Call::new(tool, args);
        edge::resolve_call_paths(&snapshot, &mut call);
        snapshot.decide(&call)
    };
    // Without symlinks, the allow rules hold.
    std::fs::write(root.join("repo/src/plain.txt"), "x").unwrap();
    assert_eq!(
        decide("read", json!({"path": "src/plain.txt"})).decision,
        Decision::Allow
    );
    assert_eq!(
        decide("bash", json!({"command": "echo hi > src/out.txt"})).decision,
        Decision::Allow
    );
    // The path argument through a symlink is denied.
    let v = decide("read", json!({"path": "src/innocent"}));
    assert_eq!(v.decision, Decision::Deny, "{v:?}");
    // A redirect target through a symlinked file or folder is denied, in both directions.
    for command in [
        "echo hi > src/innocent",
        "echo hi >> src/vault/new.txt",
        "cat < src/innocent",
    ] {
        let v = decide("bash", json!({ "command": command }));
        assert_eq!(v.decision, Decision::Deny, "{command}: {v:?}");
        assert!(
            v.rule.as_deref().is_some_and(|r| r.contains("secrets")),
            "{command}: {v:?}"
        );
    }
}

/// Path rules are case-sensitive; `[paths] case_insensitive = true` folds case, for a
/// case-insensitive file system, in deny and allow rules alike (and any file turning it on
/// turns it on).
#[test]
fn paths_compare_case_sensitively_unless_the_policy_folds_case() {
    let text = "default = \"allow\"\ndeny = [\"write(.git/**)\"]\nallow = [\"edit(src/**)\"]\n";
    let load = |t: &str, name: &str| {
        LoadedPolicy::from_text(t.into(), Format::Toml, &format!("{name}.toml"), name, None)
            .unwrap()
    };
    let env = || PathEnv {
        project_root: "/repo".into(),
        home: None,
    };
    let write = |s: &PolicySnapshot, path: &str| {
        s.decide(&Call::new("write", serde_json::json!({"path": path})))
            .decision
    };
    let sensitive = PolicySnapshot::from_files(&[load(text, "p")], env()).unwrap();
    assert_eq!(write(&sensitive, "/repo/.git/hooks/x"), Decision::Deny);
    assert_eq!(write(&sensitive, "/repo/.GIT/hooks/x"), Decision::Allow);
    let folded_text = format!("{text}[paths]\ncase_insensitive = true\n");
    let folded = PolicySnapshot::from_files(&[load(&folded_text, "p")], env()).unwrap();
    assert_eq!(write(&folded, "/repo/.GIT/hooks/x"), Decision::Deny);
    assert_eq!(write(&folded, "/REPO/.Git/HOOKS/x"), Decision::Deny);
    assert_ne!(folded.digest(), sensitive.digest(), "the digest covers it");
    // Another file turning it on turns it on for every rule.
    let other = load(
        "default = \"allow\"\n[paths]\ncase_insensitive = true\n",
        "q",
    );
    let merged = PolicySnapshot::from_files(&[load(text, "p"), other], env()).unwrap();
    assert_eq!(write(&merged, "/repo/.GIT/x"), Decision::Deny);
    // Unknown keys are refused.
    let bad = LoadedPolicy::from_text(
        "default = \"allow\"\n[paths]\ncase = 1\n".into(),
        Format::Toml,
        "b.toml",
        "b",
        None,
    );
    assert!(bad.is_err() || PolicySnapshot::from_files(&[bad.unwrap()], env()).is_err());
}

#[test]
fn an_empty_rule_is_refused_with_its_place() {
    for (text, pointer) in [
        ("default = \"ask\"\ndeny = [\"\"]\n", "/deny/0"),
        ("default = \"ask\"\ndeny = \"\"\n", "/deny"),
        (
            "default = \"ask\"\nallow = [\"read\", \"  \"]\n",
            "/allow/1",
        ),
        (
            "default = \"ask\"\n[[sources]]\nname = \"s\"\nask = [\"\"]\n",
            "/sources/0/ask/0",
        ),
    ] {
        let e = compile(text, Format::Toml).unwrap_err();
        match &e {
            PolicyError::Rule { at, message, .. } => {
                assert_eq!(at.pointer.as_deref(), Some(pointer), "{text:?}");
                assert!(message.contains("empty"), "{message}");
            }
            other => panic!("{text:?}: {other}"),
        }
    }
    // An empty list is not an empty rule.
    assert!(compile("default = \"ask\"\ndeny = []\n", Format::Toml).is_ok());
}

#[test]
fn a_domain_rule_allows_only_web_urls_of_its_host() {
    let s = compile(
        "default = \"ask\"\nallow = [\"web_fetch(domain:good.com)\"]\ndeny = [\"web_fetch(domain:evil.com)\"]\n",
        Format::Toml,
    )
    .unwrap();
    let fetch = |url: &str| {
        s.decide(&Call::new("web_fetch", json!({ "url": url })))
            .decision
    };
    assert_eq!(fetch("https://good.com/x"), Decision::Allow);
    assert_eq!(fetch("http://good.com/x"), Decision::Allow);
    for url in [
        "file://good.com/etc/passwd",
        "ftp://good.com/x",
        "javascript://good.com/%0aalert(1)",
        "gopher://good.com/x",
    ] {
        assert_eq!(fetch(url), Decision::Ask, "{url}");
    }
    // A deny rule still sees the host, whatever the scheme.
    assert_eq!(fetch("ftp://evil.com/x"), Decision::Deny);
    assert_eq!(fetch("https://evil.com/x"), Decision::Deny);
}
