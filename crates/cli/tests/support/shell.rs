//! The shell corpus through `warden check`: every case of
//! `tests/corpus/shell/cases.jsonl` with its own policy file, through `--calls`; and
//! `warden explain` on a shell call.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::{lines, warden, write};

/// Corpus cases that cannot pass, each with its reason (also in docs/shell.md). Empty.
const SKIP: &[(&str, &str)] = &[];

fn cases() -> Vec<Value> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/shell/cases.jsonl");
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn toml_list(v: &Value) -> String {
    serde_json::to_string(v.as_array().unwrap()).unwrap()
}

/// Writes shell corpus case `case` (the `i`th) as a policy file in `dir`; returns its path.
pub(super) fn case_policy(dir: &std::path::Path, i: usize, case: &Value) -> String {
    write(
        dir,
        &format!("case{i}.toml"),
        &format!(
            "default = \"{}\"\nallow = {}\ndeny = {}\nask = {}\n",
            case["default"].as_str().unwrap(),
            toml_list(&case["allow"]),
            toml_list(&case["deny"]),
            toml_list(&case["ask"]),
        ),
    )
}

#[test]
fn every_shell_corpus_case_through_check() {
    let dir = tempfile::tempdir().unwrap();
    let cases = cases();
    assert_eq!(cases.len(), 112);
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let id = case["id"].as_str().unwrap();
        if let Some((_, why)) = SKIP.iter().find(|(s, _)| *s == id) {
            eprintln!("skipped {id}: {why}");
            continue;
        }
        let policy = case_policy(dir.path(), i, case);
        let call = json!({"tool": "bash", "args": {"command": case["command"]}});
        let calls = write(dir.path(), &format!("case{i}.jsonl"), &format!("{call}\n"));
        let out = warden(
            &[
                "check", "--policy", &policy, "--calls", &calls, "--format", "json",
            ],
            dir.path(),
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{id}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = lines(&out);
        assert_eq!(got.len(), 1, "{id}");
        let want = case["expect"].as_str().unwrap();
        if got[0]["decision"] != want {
            failures.push(format!("{id}: got {} want {want}", got[0]));
        }
        let keys: Vec<&str> = got[0]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "decision",
                "policy_digest",
                "reason",
                "rule",
                "source",
                "subjects"
            ],
            "{id}: the check contract's keys"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn compound_commands_list_every_subject_in_check_output() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        dir.path(),
        "p.toml",
        "default = \"ask\"\nallow = [\"bash(git status:*)\", \"bash(echo:*)\"]\ndeny = [\"bash(rm:*)\", \"edit(/etc/**)\"]\n",
    );
    let out = warden(
        &[
            "check",
            "--policy",
            &policy,
            "--tool",
            "bash",
            "--args",
            r#"{"command":"git status && echo x > /etc/motd; rm -rf /tmp/x"}"#,
            "--format",
            "json",
        ],
        dir.path(),
    );
    let v = &lines(&out)[0];
    assert_eq!(v["decision"], "deny");
    assert_eq!(v["rule"], "write(/etc/**)");
    assert_eq!(
        v["subjects"],
        json!([
            {"text": "git status", "tool": "bash", "decision": "allow", "rule": "bash(git status:*)"},
            {"text": "echo x", "tool": "bash", "decision": "allow", "rule": "bash(echo:*)"},
            {"text": "> /etc/motd", "tool": "write", "decision": "deny", "rule": "write(/etc/**)"},
            {"text": "rm -rf /tmp/x", "tool": "bash", "decision": "deny", "rule": "bash(rm:*)"},
        ])
    );
}

#[test]
fn explain_shows_each_shell_subject_its_readings_and_deciding_rule() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        dir.path(),
        "p.toml",
        "default = \"ask\"\nallow = [\"bash(git status:*)\"]\ndeny = [\"bash(rm:*)\"]\n",
    );
    let out = warden(
        &[
            "explain",
            "--policy",
            &policy,
            "--tool",
            "bash",
            "--args",
            r#"{"command":"git status && FOO=1 sudo /bin/RM -rf /tmp/x | xargs grep x"}"#,
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "subject 1: git status [bash] → allow",
        "decided by bash(git status:*) [p]",
        "subject 2: FOO=1 sudo /bin/RM -rf /tmp/x [bash] → deny",
        "written (allow rules):        FOO=1 sudo /bin/RM -rf /tmp/x",
        "normalized (deny/ask rules):  rm -rf /tmp/x",
        "also tried by deny/ask rules: sudo /bin/RM -rf /tmp/x",
        "decided by bash(rm:*) [p]",
        "deny  bash(rm:*) [p]: matches",
        "subject 3: xargs grep x [bash] → ask",
        "note: reached through xargs",
        "only an allow rule `x:*` can allow it",
        "decided by no rule",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}
