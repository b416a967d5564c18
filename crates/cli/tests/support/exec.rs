//! `warden exec` (the executor issue's contract): one call through the full executor with the
//! built-in tools; one JSON object with `outcome`, `profile`, `reason` / `result`; exit 0
//! succeeded, 1 any other outcome, 2 usage or input error with nothing run.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use super::{lines, warden, write};

const POLICY: &str = r#"
default = "deny"
allow = ["read", "write", "bash(echo:*)"]
ask = ["bash(git push:*)"]
deny = ["bash(rm:*)"]
"#;

fn exec(dir: &Path, tool: &str, args: &Value, extra: &[&str]) -> (Output, Value) {
    let policy = write(dir, "policy.toml", POLICY);
    let args = args.to_string();
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.to_string_lossy().into_owned();
    let mut argv = vec![
        "exec",
        "--policy",
        &policy,
        "--tool",
        tool,
        "--args",
        &args,
        "--workspace",
        &ws,
        "--format",
        "json",
    ];
    argv.extend_from_slice(extra);
    let out = warden(&argv, dir);
    let value = if out.stdout.is_empty() {
        Value::Null
    } else {
        let got = lines(&out);
        assert_eq!(got.len(), 1, "one object per call");
        got[0].clone()
    };
    (out, value)
}

fn input_error(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(out.stdout.is_empty(), "nothing runs on bad input");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(needle), "{stderr} (want {needle})");
}

#[test]
fn exec_runs_a_call_through_the_executor() {
    let dir = tempfile::tempdir().unwrap();
    let (out, v) = exec(dir.path(), "bash", &json!({"command": "echo hello"}), &[]);
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["outcome"], "succeeded");
    assert_eq!(v["profile"], "minimal");
    assert_eq!(v["result"]["stdout"], "hello\n");
    assert!(v.get("reason").is_none());
    assert_eq!(v["backend"], "in_process");

    // write then read, under the workspace.
    let (out, v) = exec(
        dir.path(),
        "write",
        &json!({"path": "a/b.txt", "content": "hi"}),
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/a/b.txt")).unwrap(),
        "hi"
    );
    let (_, v) = exec(dir.path(), "read", &json!({"path": "a/b.txt"}), &[]);
    assert_eq!(v["result"]["content"], "hi");
}

#[test]
fn exec_outcomes_other_than_success_exit_1_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    // Denied by policy: nothing ran.
    let (out, v) = exec(dir.path(), "bash", &json!({"command": "rm -rf x"}), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(v["outcome"], "denied");
    assert_eq!(v["profile"], "minimal");
    assert_eq!(v["rule"], "bash(rm:*)");
    assert!(v["reason"].as_str().unwrap().contains("rm"), "{v}");
    assert!(v.get("result").is_none());
    // Arguments failing the tool's schema: a typed denial naming the problem.
    let (out, v) = exec(dir.path(), "read", &json!({"file": "x"}), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(v["reason_code"], "invalid_arguments");
    // A path outside the workspace: refused by the tool's guard.
    let (out, v) = exec(
        dir.path(),
        "write",
        &json!({"path": "../out.txt", "content": "x"}),
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(v["reason_code"], "guard");
    assert!(!dir.path().join("out.txt").exists());
    // A tool failure.
    let (out, v) = exec(dir.path(), "read", &json!({"path": "missing"}), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(v["outcome"], "failed");
    assert_eq!(v["failure"]["kind"], "not_found");
}

#[test]
fn exec_escalates_and_a_bound_receipt_approves_a_new_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let args = json!({"command": "git push origin main"});
    let (out, v) = exec(dir.path(), "bash", &args, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(v["outcome"], "escalated");
    let approval = &v["approval"];
    assert_eq!(approval["action"], "bash");
    assert_eq!(approval["policy_digest"], v["policy_digest"]);
    // A receipt bound to exactly this call (the approver's answer).
    let receipt = json!({
        "approval_id": approval["approval_id"],
        "action": "bash",
        "arguments_digest": approval["arguments_digest"],
        "policy_digest": approval["policy_digest"],
        "approver": {"id": "bob", "kind": "user"},
        "issued_at": 1,
        "expires_at": 4_000_000_000_000u64,
    });
    let file = write(dir.path(), "receipt.json", &receipt.to_string());
    // `git push` would fail without a repository: the call ran, which is the point.
    let (_, v) = exec(dir.path(), "bash", &args, &["--receipt", &file]);
    assert_ne!(v["outcome"], "escalated", "{v}");
    assert_ne!(v["outcome"], "denied", "{v}");
    // Other arguments are not covered by it.
    let (_, v) = exec(
        dir.path(),
        "bash",
        &json!({"command": "git push --force"}),
        &["--receipt", &file],
    );
    assert_eq!(v["outcome"], "escalated");
}

#[test]
fn exec_input_errors_exit_2_and_run_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = exec(dir.path(), "nope", &json!({}), &[]);
    input_error(&out, "unknown tool `nope`");
    let policy = write(dir.path(), "p.toml", POLICY);
    let out = warden(
        &[
            "exec",
            "--policy",
            &policy,
            "--tool",
            "bash",
            "--args",
            "{not json",
            "--format",
            "json",
        ],
        dir.path(),
    );
    input_error(&out, "invalid JSON");
    let bad = write(dir.path(), "bad.toml", "default = \"maybe\"\n");
    let out = warden(
        &[
            "exec", "--policy", &bad, "--tool", "bash", "--args", "{}", "--format", "json",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let (out, _) = exec(
        dir.path(),
        "bash",
        &json!({"command": "echo x"}),
        &["--backend", "subprocess"],
    );
    input_error(&out, "issue 7");
    let (out, _) = exec(
        dir.path(),
        "bash",
        &json!({"command": "echo x"}),
        &["--evidence", "ev.db"],
    );
    input_error(&out, "issue 8");
    let receipt = write(dir.path(), "r.json", "{\"approval_id\": 1}");
    let (out, _) = exec(
        dir.path(),
        "bash",
        &json!({"command": "echo x"}),
        &["--receipt", &receipt],
    );
    input_error(&out, "--receipt");
    assert!(!dir.path().join("ev.db").exists());
}
