//! `warden mcp proxy` with a person at the client and `--evidence`: an `ask` is put to the
//! client's user through elicitation (the official Python SDK's client answering), every call
//! is one governed operation on the session's chain, which verifies and is closed when the
//! client disconnects, and a call the client cancels is cancelled in the evidence and on the
//! server.

use std::path::Path;

use serde_json::{Value, json};

use super::mcp::{python, reference_server, repo};
use super::{lines, warden, write};

/// A policy over the real filesystem server: reads allowed, writes denied, the rest asked.
fn filesystem_policy(root: &Path) -> String {
    let fs = reference_server("server-filesystem");
    std::fs::create_dir_all(root.join("sandbox")).unwrap();
    std::fs::write(root.join("sandbox/a.txt"), "read through the proxy\n").unwrap();
    let text = format!(
        r#"default = "ask"
allow = ["fs__read_text_file"]
deny = ["fs__write_file"]
[mcp]
allow_commands = true
command_allowlist = ["node"]
env_allow = ["PATH"]
[mcp.servers.fs]
command = "node"
args = [{fs:?}, "sandbox"]
"#,
        fs = fs.display().to_string(),
    );
    write(root, "policy.toml", &text)
}

/// Runs the Python SDK client against `warden mcp proxy --policy POLICY --server fs
/// --evidence STORE`, its user answering `approve`; returns what it saw.
fn python_session(root: &Path, policy: &str, store: &Path, approve: &str, calls: &Value) -> Value {
    let out = std::process::Command::new(python())
        .arg(repo().join("tests/mcp/python_client.py"))
        .args(["--approve", approve])
        .arg(calls.to_string())
        .args(["--", env!("CARGO_BIN_EXE_warden"), "mcp", "proxy"])
        .args(["--policy", policy, "--server", "fs"])
        .arg("--evidence")
        .arg(store)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `warden evidence show --format json`: the chain lines and the operation lines.
fn show(root: &Path, store: &Path) -> (Vec<Value>, Vec<Value>) {
    let out = warden(
        &[
            "evidence",
            "show",
            "--store",
            store.to_str().unwrap(),
            "--format",
            "json",
        ],
        root,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lines(&out).into_iter().partition(|l| l["kind"] == "chain")
}

fn verifies(root: &Path, store: &Path) {
    let out = warden(
        &["evidence", "verify", "--store", store.to_str().unwrap()],
        root,
    );
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_ask_approved_by_the_clients_user_runs_once_and_every_call_is_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let policy = filesystem_policy(&root);
    let store = root.join("evidence.db");
    let sandbox = root.join("sandbox").display().to_string();
    let calls = json!([
        ["read_text_file", {"path": format!("{sandbox}/a.txt")}],
        ["write_file", {"path": format!("{sandbox}/b.txt"), "content": "x"}],
        ["create_directory", {"path": format!("{sandbox}/made")}],
    ]);
    let seen = python_session(&root, &policy, &store, "yes", &calls);
    assert_eq!(seen["calls"][0]["is_error"], false, "{seen}");
    assert_eq!(seen["calls"][1]["is_error"], true, "{seen}");
    assert_eq!(seen["calls"][2]["is_error"], false, "{seen}");
    assert!(root.join("sandbox/made").is_dir(), "the approved call ran");
    assert!(
        !root.join("sandbox/b.txt").exists(),
        "the denied call did not"
    );
    // One question, for the asked call only.
    let questions = seen["questions"].as_array().unwrap();
    assert_eq!(questions.len(), 1, "{seen}");
    assert!(
        questions[0]
            .as_str()
            .unwrap()
            .contains("fs__create_directory"),
        "{seen}"
    );
    verifies(&root, &store);
    let (chains, operations) = show(&root, &store);
    assert_eq!(chains.len(), 1, "one session, one chain: {chains:?}");
    assert!(
        chains[0]["chain_id"]
            .as_str()
            .unwrap()
            .starts_with("mcp-proxy-"),
        "{chains:?}"
    );
    assert_eq!(chains[0]["open_operations"], 0, "{chains:?}");
    let mut rows: Vec<[&str; 3]> = operations
        .iter()
        .map(|o| {
            [
                o["action"].as_str().unwrap(),
                o["decision"].as_str().unwrap(),
                o["outcome"].as_str().unwrap(),
            ]
        })
        .collect();
    rows.sort_unstable();
    // The escalation closes its operation; the approval is a new attempt that ran.
    assert_eq!(
        rows,
        [
            ["fs__create_directory", "allow", "completed"],
            ["fs__create_directory", "escalate", "denied"],
            ["fs__read_text_file", "allow", "completed"],
            ["fs__write_file", "deny", "denied"],
        ],
        "{operations:#?}"
    );
}

#[test]
fn an_ask_the_clients_user_declines_never_reaches_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let policy = filesystem_policy(&root);
    let store = root.join("evidence.db");
    let sandbox = root.join("sandbox").display().to_string();
    let calls = json!([["create_directory", {"path": format!("{sandbox}/made")}]]);
    let seen = python_session(&root, &policy, &store, "no", &calls);
    assert_eq!(seen["calls"][0]["is_error"], true, "{seen}");
    assert!(
        seen["calls"][0]["text"]
            .as_str()
            .unwrap()
            .contains("declined"),
        "{seen}"
    );
    assert!(!root.join("sandbox/made").exists());
    verifies(&root, &store);
}

/// The hostile fixture never answers `echo` in `hang` mode: the client cancels the call; the
/// governed operation ends `cancelled` and the server is told (it writes `cancelled`).
#[test]
fn a_call_the_client_cancels_is_cancelled_in_the_evidence_and_on_the_server() {
    use std::io::{BufRead as _, BufReader, Write as _};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let text = format!(
        r#"default = "deny"
allow = ["hostile__echo"]
[mcp]
allow_commands = true
command_allowlist = ["python3"]
env_allow = ["PATH"]
[mcp.servers.hostile]
command = "python3"
args = [{hostile:?}, "hang"]
"#,
        hostile = repo()
            .join("tests/mcp/hostile_server.py")
            .display()
            .to_string(),
    );
    let policy = write(&root, "policy.toml", &text);
    let store = root.join("evidence.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["mcp", "proxy", "--policy", &policy, "--server", "hostile"])
        .arg("--evidence")
        .arg(&store)
        .current_dir(&root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| {
        stdin.write_all(v.to_string().as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    let mut read = |id: u64| loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the proxy closed its output"
        );
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == id {
            return v;
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
    );
    read(0);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "wait"}}}));
    // Let the call reach the server, then cancel it.
    std::thread::sleep(std::time::Duration::from_millis(500));
    send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "the user pressed stop"}}),
    );
    let cancelled = root.join("cancelled");
    for _ in 0..100 {
        if cancelled.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(cancelled.exists(), "the server was told to cancel its call");
    // The proxy keeps serving.
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    assert!(read(2)["result"]["tools"].is_array());
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("closed at sequence"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    verifies(&root, &store);
    let (_, operations) = show(&root, &store);
    assert_eq!(operations.len(), 1, "{operations:#?}");
    assert_eq!(operations[0]["action"], "hostile__echo");
    assert_eq!(operations[0]["outcome"], "cancelled", "{operations:#?}");
    assert_eq!(operations[0]["call_executed"], true, "{operations:#?}");
}
