//! First use of a store by parallel processes: eight `warden exec --evidence PATH` runs, and
//! eight `warden hook claude-code --journal PATH` calls, each started together on a path that
//! does not exist yet, all succeed and every chain verifies.

use std::io::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::json;

use super::{warden, write};

const RUNS: usize = 8;

/// Waits for every child; returns each one's exit code, stdout and stderr.
fn finish(children: Vec<Child>) -> Vec<(Option<i32>, String, String)> {
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        })
        .collect()
}

/// `warden evidence verify` on `store`: exit 0, and one `ok` line per chain of `kind`.
fn verify_lines(dir: &Path, store: &str, kind: &str) -> Vec<String> {
    let verify = warden(&["evidence", "verify", "--store", store], dir);
    let text = String::from_utf8_lossy(&verify.stdout).into_owned();
    assert_eq!(verify.status.code(), Some(0), "{text}");
    text.lines()
        .filter(|l| l.starts_with(&format!("ok    {kind} chain ")))
        .map(str::to_owned)
        .collect()
}

#[test]
fn parallel_exec_runs_that_create_one_evidence_store_all_succeed_and_it_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        dir.path(),
        "policy.toml",
        "default = \"deny\"\nallow = [\"write\"]\n",
    );
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let store = dir.path().join("new/evidence.db");
    assert!(!store.exists());
    let children: Vec<Child> = (0..RUNS)
        .map(|i| {
            let args = json!({"path": format!("out-{i}.txt"), "content": format!("run {i}")});
            Command::new(env!("CARGO_BIN_EXE_warden"))
                .args([
                    "exec",
                    "--policy",
                    &policy,
                    "--tool",
                    "write",
                    "--args",
                    &args.to_string(),
                    "--workspace",
                    ws.to_str().unwrap(),
                    "--backend",
                    "in-process",
                    "--evidence",
                    store.to_str().unwrap(),
                    "--format",
                    "json",
                ])
                .current_dir(dir.path())
                .env_remove("CLAUDE_PROJECT_DIR")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, (code, stdout, stderr)) in finish(children).into_iter().enumerate() {
        assert_eq!(code, Some(0), "run {i}: {stdout} {stderr}");
        assert!(
            stdout.contains("\"outcome\":\"succeeded\""),
            "run {i}: {stdout}"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join(format!("out-{i}.txt"))).unwrap(),
            format!("run {i}")
        );
    }
    assert_eq!(
        verify_lines(dir.path(), store.to_str().unwrap(), "evidence").len(),
        RUNS,
        "one closed boundary per run"
    );
}

#[test]
fn parallel_hook_calls_that_create_one_journal_all_answer_and_it_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        dir.path(),
        "policy.toml",
        "default = \"ask\"\nallow = [\"bash(ls:*)\"]\n",
    );
    let journal = dir.path().join("journal.db");
    let children: Vec<Child> = (0..RUNS)
        .map(|i| {
            let event = json!({
                "session_id": format!("session-{i}"),
                "cwd": dir.path(),
                "hook_event_name": "PreToolUse",
                "tool_name": "Bash",
                "tool_input": {"command": "ls -la"},
                "tool_use_id": format!("toolu_{i}"),
            });
            let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
                .args([
                    "hook",
                    "claude-code",
                    "--policy",
                    &policy,
                    "--journal",
                    journal.to_str().unwrap(),
                ])
                .current_dir(dir.path())
                .env_remove("CLAUDE_PROJECT_DIR")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(event.to_string().as_bytes())
                .unwrap();
            child
        })
        .collect();
    for (i, (code, stdout, stderr)) in finish(children).into_iter().enumerate() {
        assert_eq!(code, Some(0), "call {i}: {stdout} {stderr}");
        assert!(
            stdout.contains("\"permissionDecision\":\"allow\""),
            "call {i}: {stdout}"
        );
        assert_eq!(stderr, "", "call {i}");
    }
    let mut chains = verify_lines(dir.path(), journal.to_str().unwrap(), "journal");
    chains.sort();
    assert_eq!(chains.len(), RUNS, "{chains:?}");
    for (i, line) in chains.iter().enumerate() {
        assert!(
            line.starts_with(&format!(
                "ok    journal chain claude-code-session-{i}: 1 records"
            )),
            "{line}"
        );
    }
}
