//! The `warden` command end to end: the `warden check` contract
//! (docs/design/policy.md#the-warden-check-json-line), the agentpolicy corpus through `warden check
//! --calls`, and bad input (exit 2, nothing decided).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

#[path = "support/approve.rs"]
mod approve;
#[path = "support/bash_oracle.rs"]
mod bash_oracle;
#[path = "support/describe.rs"]
mod describe;
#[path = "support/docs.rs"]
mod docs;
#[path = "support/evidence.rs"]
mod evidence;
#[path = "support/exec.rs"]
mod exec;
#[path = "support/exec_evidence.rs"]
mod exec_evidence;
#[path = "support/export.rs"]
mod export;
#[path = "support/fail_open.rs"]
mod fail_open;
#[path = "support/first_use.rs"]
mod first_use;
#[path = "support/guard.rs"]
mod guard;
#[path = "support/guide.rs"]
mod guide;
#[path = "support/harness.rs"]
mod harness;
#[path = "support/hook.rs"]
mod hook;
#[path = "support/killed_exec.rs"]
mod killed_exec;
#[path = "support/mcp.rs"]
mod mcp;
#[path = "support/mcp_governed.rs"]
mod mcp_governed;
#[path = "support/mcp_http.rs"]
mod mcp_http;
#[path = "support/oracle.rs"]
mod oracle;
#[path = "support/provider_hooks.rs"]
mod provider_hooks;
#[path = "support/replay.rs"]
mod replay;
#[path = "support/roles.rs"]
mod roles;
#[path = "support/scope.rs"]
mod scope;
#[path = "support/shell.rs"]
mod shell;

fn warden(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(args)
        .current_dir(dir)
        .env_remove("CLAUDE_PROJECT_DIR")
        .output()
        .unwrap()
}

fn corpus(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/agentpolicy")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn assert_input_error(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(
        out.stdout.is_empty(),
        "nothing is decided on bad input: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(needle), "{stderr} (want {needle})");
}

#[test]
fn check_prints_the_contract_json() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        dir.path(),
        "project.toml",
        "default = \"ask\"\nallow = [\"bash(git status:*)\"]\ndeny = \"bash(rm:*)\"\n",
    );
    let out = warden(
        &[
            "check",
            "--policy",
            &policy,
            "--tool",
            "bash",
            "--args",
            r#"{"command":"rm -rf /"}"#,
            "--format",
            "json",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0));
    let got = lines(&out);
    assert_eq!(got.len(), 1);
    let v = &got[0];
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "decision",
            "policy_digest",
            "reason",
            "rule",
            "source",
            "subjects"
        ]
    );
    assert_eq!(v["decision"], "deny");
    assert_eq!(v["rule"], "bash(rm:*)");
    assert_eq!(v["source"], "project");
    assert!(v["policy_digest"].as_str().unwrap().starts_with("blake3:"));
    assert_eq!(
        v["subjects"],
        json!([{"text": "rm -rf /", "tool": "bash", "decision": "deny", "rule": "bash(rm:*)"}])
    );

    // The default decides: rule and source are null.
    let out = warden(
        &[
            "check",
            "--policy",
            &policy,
            "--tool",
            "read",
            "--args",
            r#"{"path":"x"}"#,
            "--format",
            "json",
        ],
        dir.path(),
    );
    let v = &lines(&out)[0];
    assert_eq!(
        (v["decision"].as_str(), &v["rule"], &v["source"]),
        (Some("ask"), &Value::Null, &Value::Null)
    );
}

/// `warden check --calls` of a file holding `calls` against a policy allowing `read` and asking
/// for `edit` (else deny): it exits 0, and the decision of every line, in order.
fn calls_decisions(calls: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let policy = &write(
        dir,
        "p.toml",
        "default = \"deny\"\nallow = [\"read\"]\nask = [\"edit\"]\n",
    );
    let calls = &write(dir, "calls.jsonl", calls);
    let out = warden(
        &[
            "check", "--policy", policy, "--calls", calls, "--format", "json",
        ],
        dir,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lines(&out)
        .iter()
        .map(|v| v["decision"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn calls_mode_answers_in_input_order() {
    let calls = "{\"tool\":\"read\",\"args\":{\"path\":\"a\"}}\n\n{\"tool\":\"edit\",\"args\":{\"path\":\"a\"}}\n{\"tool\":\"bash\",\"args\":{\"command\":\"ls\"}}\n";
    assert_eq!(calls_decisions(calls), ["allow", "ask", "deny"]);
}

#[test]
fn a_calls_file_is_read_as_its_lines_say_whatever_path_a_line_takes() {
    // Lines the fast parse leaves to the documented reader (a repeated key: the last wins; an
    // escaped key or tool name; CRLF; null `time` and `cwd`) decide as plain lines do, in order.
    let calls = "{\"tool\":\"edit\",\"tool\":\"read\",\"args\":{\"path\":\"a\"}}\r\n\
         {\"t\\u006fol\":\"r\\u0065ad\",\"args\":{}}\n\
         {\"tool\":\"edit\",\"args\":{\"path\":\"a\"},\"time\":null,\"cwd\":null}\n\
         {\"tool\":\"bash\",\"args\":{\"command\":\"ls\"}}";
    assert_eq!(calls_decisions(calls), ["allow", "allow", "ask", "deny"]);
}

#[test]
fn a_bad_calls_line_is_reported_before_a_policy_that_does_not_load() {
    // The calls file is decided as it is read, after the policy loads; a policy that does not
    // load still reports the file's bad line first, as when the file was read whole first.
    let dir = tempfile::tempdir().unwrap();
    let bad_policy = write(dir.path(), "bad.toml", "default = \"ask\"\nalow = []\n");
    let good_policy = write(dir.path(), "good.toml", "default = \"ask\"\n");
    let calls = write(
        dir.path(),
        "calls.jsonl",
        "{\"tool\":\"read\",\"args\":{}}\n{\"tool\":\"read\",\"args\":{},\"x\":1}\n",
    );
    for policy in [&bad_policy, &good_policy] {
        let out = warden(
            &[
                "check", "--policy", policy, "--calls", &calls, "--format", "json",
            ],
            dir.path(),
        );
        assert_input_error(&out, "calls.jsonl:2: unknown key `x`");
    }
    let good_calls = write(
        dir.path(),
        "good.jsonl",
        "{\"tool\":\"read\",\"args\":{}}\n",
    );
    let out = warden(
        &[
            "check",
            "--policy",
            &bad_policy,
            "--calls",
            &good_calls,
            "--format",
            "json",
        ],
        dir.path(),
    );
    assert_input_error(&out, "bad.toml:2");
}

#[test]
fn bad_input_is_exit_2_and_decides_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.toml", "default = \"ask\"\n");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "--tool".into(),
                "read".into(),
                "--args".into(),
                "{not json".into(),
            ],
            "--args: invalid JSON",
        ),
        (
            vec![
                "--tool".into(),
                "read".into(),
                "--args".into(),
                "[1]".into(),
            ],
            "--args: must be a JSON object",
        ),
        (
            vec![
                "--calls".into(),
                write(
                    dir.path(),
                    "bad.jsonl",
                    "{\"tool\":\"read\",\"args\":{}}\n{oops\n",
                ),
            ],
            "bad.jsonl:2",
        ),
        (
            vec![
                "--calls".into(),
                write(
                    dir.path(),
                    "bad2.jsonl",
                    "{\"tool\":\"read\",\"args\":\"x\"}\n",
                ),
            ],
            "bad2.jsonl:1: `args` must be a JSON object",
        ),
    ];
    for (extra, needle) in cases {
        let mut args = vec![
            "check".to_owned(),
            "--policy".to_owned(),
            good.clone(),
            "--format".into(),
            "json".into(),
        ];
        args.extend(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_input_error(&warden(&args, dir.path()), needle);
    }
    let policies = [
        (
            "unknown.toml",
            "default = \"ask\"\nalow = []\n",
            "unknown.toml:2",
        ),
        ("nodefault.toml", "allow = [\"read\"]\n", "no `default`"),
        (
            "malformed.toml",
            "default = \"ask\"\ndeny = [\"bash(rm\"]\n",
            "rule `bash(rm`",
        ),
        (
            "matcher.toml",
            "default = \"ask\"\n[tools.x]\nmatch = \"regex\"\nfield = \"f\"\n",
            "matcher.toml:3",
        ),
    ];
    for (name, text, needle) in policies {
        let p = write(dir.path(), name, text);
        assert_input_error(
            &warden(
                &["check", "--policy", &p, "--tool", "read", "--args", "{}"],
                dir.path(),
            ),
            needle,
        );
    }
}

#[test]
fn policy_compile_and_schema() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let example = root.join("examples/policies/project.toml");
    let out = warden(
        &[
            "policy",
            "compile",
            "--policy",
            example.to_str().unwrap(),
            "--format",
            "json",
        ],
        &root,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = &lines(&out)[0];
    assert_eq!(v["id"], "project");
    assert!(v["digest"].as_str().unwrap().starts_with("blake3:"));
    assert_eq!(v["sources"][0]["name"], "managed");
    let out = warden(&["policy", "schema"], &root);
    let schema: Value = serde_json::from_slice(&out.stdout).unwrap();
    let checked_in: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("docs/schemas/PolicyFile.schema.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(schema, checked_in);
}

#[test]
fn explain_names_subjects_carve_outs_and_withheld_sources() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "p.toml",
        "default = \"allow\"\ndeny = [\"read(.env:*)\", \"read(!.env.example)\"]\n[[sources]]\nname = \"repo\"\nallow = [\"bash\"]\n",
    );
    let out = warden(
        &[
            "explain",
            "--policy",
            &p,
            "--tool",
            "read",
            "--args",
            r#"{"path":".env.example"}"#,
            "--cwd",
            dir.path().to_str().unwrap(),
        ],
        dir.path(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("decision: allow"), "{text}");
    assert!(
        text.contains("carved out by read(!.env.example) [p]"),
        "{text}"
    );
    assert!(text.contains("withheld allow bash"), "{text}");
}

// ------------------------------------------------------------------ the corpus through `warden check --calls`

fn check_calls(dir: &Path, policy: &Value, calls: &[Value]) -> Output {
    let p = write(dir, "policy.json", &policy.to_string());
    let jsonl: String = calls.iter().map(|c| format!("{c}\n")).collect();
    let c = write(dir, "calls.jsonl", &jsonl);
    warden(
        &["check", "--policy", &p, "--calls", &c, "--format", "json"],
        dir,
    )
}

#[test]
fn corpus_grammar_through_check() {
    let dir = tempfile::tempdir().unwrap();
    for case in corpus("grammar.json")["cases"].as_array().unwrap() {
        let input = case["input"].as_str().unwrap();
        let mut tools = serde_json::Map::new();
        for r in case["rules"].as_array().into_iter().flatten() {
            if r.get("spec").is_some() {
                tools.insert(
                    r["tool"].as_str().unwrap().into(),
                    json!({"match": "prefix", "field": "x"}),
                );
            }
        }
        let policy = json!({"default": "ask", "deny": input, "tools": tools});
        let out = check_calls(dir.path(), &policy, &[json!({"tool": "t", "args": {}})]);
        if input.trim().is_empty() {
            // The grammar reads an empty list as no rules; a policy file that writes an empty
            // rule (`deny = ""`) is refused, since it is almost surely a mistake.
            assert_input_error(&out, "an empty deny rule");
            continue;
        }
        match case.get("error") {
            Some(e) => assert_input_error(&out, &format!("`{}`", e["token"].as_str().unwrap())),
            None => assert_eq!(
                out.status.code(),
                Some(0),
                "{}: {}",
                case["name"],
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
}

#[test]
fn corpus_matchers_through_check() {
    let dir = tempfile::tempdir().unwrap();
    let mut ran = 0;
    for case in corpus("matchers.json")["cases"].as_array().unwrap() {
        // "raw" cases hand the matcher bytes that are not JSON at all; `--calls` only carries
        // JSON objects, so those run through the library only (crates/policy/tests).
        let Some(args) = case.get("args") else {
            continue;
        };
        let policy = json!({
            "default": "deny",
            "allow": format!("run({})", case["spec"].as_str().unwrap()),
            "tools": {"run": {"match": case["matcher"], "field": "command"}},
        });
        let out = check_calls(dir.path(), &policy, &[json!({"tool": "run", "args": args})]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let want = if case["match"].as_bool().unwrap() {
            "allow"
        } else {
            "deny"
        };
        assert_eq!(lines(&out)[0]["decision"], want, "{case}");
        ran += 1;
    }
    assert_eq!(ran, 40);
}

#[test]
fn corpus_decisions_through_check() {
    let doc = corpus("decisions.json");
    let dir = tempfile::tempdir().unwrap();
    let mut ran = 0;
    for case in doc["cases"].as_array().unwrap() {
        // Expressible as a policy file: the corpus's default matchers, no alias table, no
        // caller-supplied subjects. Grants and confinement belong to the policy-extensions issue.
        if case.get("matchers").is_some()
            || case.get("aliases").is_some()
            || case.get("grants").is_some()
        {
            continue;
        }
        let p = &case["policy"];
        let mut policy = json!({
            "default": p["default"],
            "source": {"name": "policy"},
            "tools": doc["matchers"],
        });
        for k in ["allow", "deny", "ask", "sources"] {
            if let Some(v) = p.get(k) {
                policy[k] = v.clone();
            }
        }
        // A file may only lower its ranks: shift every rank (the file's own at 0 included)
        // down by the highest, which keeps their order.
        let top = policy["sources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["rank"].as_i64())
            .max()
            .unwrap_or(0)
            .max(0);
        policy["source"]["rank"] = json!(-top);
        for s in policy
            .get_mut("sources")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            s["rank"] = json!(s["rank"].as_i64().unwrap_or(0) - top);
        }
        let calls: Vec<Value> = case
            .get("calls")
            .or(case.get("batch"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| c.get("subjects").is_none() && c.get("confined").is_none())
            .cloned()
            .collect();
        let out = check_calls(
            dir.path(),
            &policy,
            &calls
                .iter()
                .map(|c| json!({"tool": c["tool"], "args": c["args"]}))
                .collect::<Vec<_>>(),
        );
        if let Some(code) = case.get("build_error") {
            assert_eq!(
                out.status.code(),
                Some(2),
                "{}: expected {code}",
                case["name"]
            );
            ran += 1;
            continue;
        }
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            case["name"],
            String::from_utf8_lossy(&out.stderr)
        );
        for (call, got) in calls.iter().zip(lines(&out)) {
            let want = &call["want"];
            let action = match got["decision"].as_str().unwrap() {
                "allow" => "allow",
                "ask" => "defer",
                _ => "block",
            };
            assert_eq!(action, want["action"], "{}: {call}", case["name"]);
            assert_eq!(
                got["rule"].as_str(),
                want["rule"].as_str(),
                "{}: {call}",
                case["name"]
            );
            if let Some(s) = want["source"].as_str() {
                assert_eq!(got["source"], s, "{}: {call}", case["name"]);
            }
            assert_eq!(got["reason"], want["reason"], "{}: {call}", case["name"]);
            ran += 1;
        }
    }
    assert!(
        ran >= 15,
        "only {ran} corpus decisions ran through warden check"
    );
}

#[test]
fn sandbox_probe_reports_each_mechanism_with_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let out = warden(&["sandbox", "probe", "--format", "json"], dir.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = &lines(&out)[0];
    let names: Vec<&str> = v["mechanisms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mechanism"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "landlock",
            "network_namespace",
            "environment",
            "rlimits",
            "process_isolation",
            "descriptors",
            "unix_sockets"
        ]
    );
    for m in v["mechanisms"].as_array().unwrap() {
        // These machines have Landlock and user namespaces; each claim carries its evidence.
        assert_eq!(m["supported"], true, "{m}");
        assert!(!m["evidence"].as_str().unwrap().is_empty());
    }
}
