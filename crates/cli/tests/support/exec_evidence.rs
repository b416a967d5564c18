//! `warden exec --evidence PATH` (governed): one call run governed through the real binary
//! against a real SQLite store; the output carries `call_executed` and every receipt; the
//! store then verifies and certifies with `warden evidence`; idempotency keys replay across
//! processes; a `warden exec` killed with SIGKILL during its call is recovered by the next run
//! (its operation closed as ambiguous, never run again; its boundary abandoned).

use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{lines, warden, write};

const POLICY: &str = r#"
default = "deny"
allow = ["write", "read", "bash(echo:*)", "bash(sleep:*)"]
[containment]
write_roots = "optional"
network_off = "optional"
env_allowlist = "optional"
process_isolation = "optional"
"#;

/// `warden exec` in `dir` (workspace `dir/ws`, store `dir/ev.db`, in-process backend).
fn exec(dir: &Path, tool: &str, args: &Value, extra: &[&str]) -> (Output, Value) {
    let mut all = vec!["--backend", "in-process", "--evidence", "ev.db"];
    all.extend_from_slice(extra);
    let out = super::exec::run_exec(dir, POLICY, tool, args, &all);
    let v = if extra.contains(&"json") {
        let got = lines(&out);
        assert_eq!(got.len(), 1, "{}", String::from_utf8_lossy(&out.stderr));
        got[0].clone()
    } else {
        Value::Null
    };
    (out, v)
}

fn json_exec(dir: &Path, tool: &str, args: &Value, extra: &[&str]) -> (Output, Value) {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(extra);
    exec(dir, tool, args, &all)
}

fn record_types(v: &Value) -> Vec<&str> {
    v["evidence"]["receipts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["record_type"].as_str().unwrap())
        .collect()
}

#[test]
fn exec_with_evidence_runs_governed_and_the_store_verifies_and_certifies() {
    let dir = tempfile::tempdir().unwrap();
    let (out, v) = json_exec(
        dir.path(),
        "write",
        &json!({"path": "out.txt", "content": "governed"}),
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{v} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(v["outcome"], "succeeded");
    assert_eq!(v["profile"], "certifiable");
    assert_eq!(v["call_executed"], true);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/out.txt")).unwrap(),
        "governed"
    );
    let ev = &v["evidence"];
    let chain = ev["chain_id"].as_str().unwrap().to_owned();
    assert!(chain.starts_with("exec-"), "{ev}");
    assert_eq!(
        record_types(&v),
        [
            "policy_bound",
            "operation_started",
            "gate_evaluated",
            "gate_evaluated",
            "callable_completed"
        ]
    );
    assert!(ev["operation_id"].as_str().unwrap().starts_with("op-"));
    assert!(ev["error"].is_null());
    let head = ev["task_closed"]["chain_hash"].as_str().unwrap().to_owned();
    assert_eq!(ev["task_closed"]["record_type"], "task_closed");
    // Sequences follow the genesis (0) without gaps, the task closed last.
    let sequences: Vec<u64> = ev["receipts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(sequences, [1, 2, 3, 4, 5]);
    assert_eq!(ev["task_closed"]["sequence"], 6);

    // A policy denial opens an operation and closes it denied (exit 1, nothing ran).
    let (out, denied) = json_exec(dir.path(), "list", &json!({"path": "."}), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(denied["outcome"], "denied");
    assert_eq!(denied["call_executed"], false);
    assert_eq!(
        record_types(&denied),
        [
            "policy_bound",
            "operation_started",
            "gate_evaluated",
            "gate_evaluated",
            "operation_denied"
        ]
    );
    let denied_chain = denied["evidence"]["chain_id"].as_str().unwrap().to_owned();
    assert_ne!(denied_chain, chain, "one task boundary per run");

    // The store verifies (both chains), and the first boundary certifies to its head.
    let verify = warden(&["evidence", "verify", "--store", "ev.db"], dir.path());
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    let text = String::from_utf8_lossy(&verify.stdout);
    assert!(
        text.contains(&format!("ok    evidence chain {chain}")),
        "{text}"
    );
    let cert = warden(
        &[
            "evidence",
            "certify",
            "--store",
            "ev.db",
            "--chain",
            &chain,
            "--expected-head",
            &head,
        ],
        dir.path(),
    );
    assert_eq!(
        cert.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&cert.stdout),
        String::from_utf8_lossy(&cert.stderr)
    );
    let cert: Value = serde_json::from_slice(&cert.stdout).unwrap();
    assert_eq!(cert["grade"], "FULL", "{cert}");
    assert_eq!(cert["task_boundary_id"], json!(chain));
    assert_eq!(cert["evidence_chain_head"]["chain_hash"], json!(head));
    let show = warden(
        &[
            "evidence",
            "show",
            "--store",
            "ev.db",
            "--chain",
            &denied_chain,
        ],
        dir.path(),
    );
    assert_eq!(show.status.code(), Some(0));

    // Text output: the outcome, call_executed, each receipt and how to certify.
    let (out, _) = exec(dir.path(), "read", &json!({"path": "out.txt"}), &[]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("succeeded\n"), "{text}");
    for needle in [
        "call_executed: true",
        "operation_started",
        "callable_completed",
        "task closed at sequence 6",
        "certify: warden evidence certify --store ev.db --chain exec-",
    ] {
        assert!(text.contains(needle), "{needle} in {text}");
    }
}

#[test]
fn exec_with_evidence_replays_an_idempotency_key_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let args = json!({"path": "once.txt", "content": "first"});
    let key = ["--idempotency-key", "write-once"];
    let (out, first) = json_exec(dir.path(), "write", &args, &key);
    assert_eq!(out.status.code(), Some(0), "{first}");
    let op = first["evidence"]["operation_id"].clone();
    // Someone changes the file; a repeat of the key must not write it again.
    std::fs::write(dir.path().join("ws/once.txt"), "changed").unwrap();
    let (out, again) = json_exec(dir.path(), "write", &args, &key);
    assert_eq!(out.status.code(), Some(1), "{again}");
    assert_eq!(again["outcome"], "failed");
    assert_eq!(again["failure"]["kind"], "idempotent_replay");
    assert_eq!(
        again["call_executed"], true,
        "it ran once, in the first process"
    );
    assert_eq!(again["evidence"]["replay_of"]["operation_id"], op);
    assert!(again["evidence"]["operation_id"].is_null());
    assert!(
        record_types(&again).is_empty(),
        "a replay opens no operation"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/once.txt")).unwrap(),
        "changed"
    );
    // The same key with other arguments is refused before anything starts.
    let (out, other) = json_exec(
        dir.path(),
        "write",
        &json!({"path": "once.txt", "content": "other"}),
        &key,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(other["reason_code"], "invalid_arguments", "{other}");
    let verify = warden(&["evidence", "verify", "--store", "ev.db"], dir.path());
    assert_eq!(verify.status.code(), Some(0));
}

#[test]
fn a_killed_exec_is_recovered_by_the_next_run_and_its_call_never_runs_again() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(dir.path(), "policy.toml", POLICY);
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let args = json!({"command": "echo ran >> effects.txt; sleep 20"}).to_string();
    let argv = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "exec",
            "--policy",
            &policy,
            "--tool",
            "bash",
            "--args",
            &args,
            "--workspace",
            &ws.to_string_lossy(),
            "--backend",
            "in-process",
            "--evidence",
            "ev.db",
            "--idempotency-key",
            "deploy-1",
            "--format",
            "json",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        v.extend(extra.iter().map(|s| (*s).to_owned()));
        v
    };
    // Its own process group, so the SIGKILL takes the shell with it.
    let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(argv(&[]))
        .current_dir(dir.path())
        .env_remove("CLAUDE_PROJECT_DIR")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let effects = || {
        std::fs::read_to_string(ws.join("effects.txt"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while effects() == 0 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "exited before the call"
        );
        assert!(Instant::now() < deadline, "the call never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    let pgid = format!("-{}", child.id());
    let killed = Command::new("kill")
        .args(["-KILL", "--", &pgid])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(child.wait().unwrap().signal(), Some(9));
    assert_eq!(effects(), 1);

    // The next run recovers the killed run's boundary, then answers the same key from the
    // record: the result is unknown (ambiguous) and the call does not run again.
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(argv(&[]))
        .current_dir(dir.path())
        .env_remove("CLAUDE_PROJECT_DIR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{v} {stderr}");
    assert!(stderr.contains("recovered chain exec-"), "{stderr}");
    let recovered = v["evidence"]["recovered"].as_array().unwrap();
    assert_eq!(recovered.len(), 1, "{v}");
    assert_eq!(recovered[0]["terminal"], "external_result_ambiguous");
    assert_eq!(v["outcome"], "ambiguous", "{v}");
    assert!(v["call_executed"].is_null(), "unknown: {v}");
    assert_eq!(
        v["evidence"]["replay_of"]["operation_id"],
        recovered[0]["operation_id"]
    );
    assert_eq!(effects(), 1, "never re-invoked");
    // Both chains verify; the abandoned boundary cannot be certified.
    let verify = warden(&["evidence", "verify", "--store", "ev.db"], dir.path());
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    let killed_chain = recovered[0]["chain_id"].as_str().unwrap();
    let reader_head = warden(
        &[
            "evidence",
            "show",
            "--store",
            "ev.db",
            "--chain",
            killed_chain,
            "--format",
            "json",
        ],
        dir.path(),
    );
    assert_eq!(reader_head.status.code(), Some(0));
    let shown = lines(&reader_head);
    assert_eq!(shown[0]["state"], "abandoned", "{shown:?}");
    assert_eq!(shown[0]["open_operations"], 0, "{shown:?}");
    let head = shown[0]["head"]["chain_hash"].as_str().unwrap();
    let cert = warden(
        &[
            "evidence",
            "certify",
            "--store",
            "ev.db",
            "--chain",
            killed_chain,
            "--expected-head",
            head,
        ],
        dir.path(),
    );
    assert_eq!(cert.status.code(), Some(1), "an abandoned boundary");
    assert!(String::from_utf8_lossy(&cert.stdout).contains("refused"));
}

/// The evidence store (and its journal files) is protected from the governed call, even when
/// it lives inside the workspace and the policy allows every write: a write, an edit or a
/// shell redirect to it is denied, and the store still verifies.
#[test]
fn the_evidence_store_is_protected_from_the_call_it_governs() {
    let dir = tempfile::tempdir().unwrap();
    let run = |tool: &str, args: Value| {
        let out = super::exec::run_exec(
            dir.path(),
            POLICY,
            tool,
            &args,
            &[
                "--backend",
                "in-process",
                "--evidence",
                "ws/ev.db",
                "--format",
                "json",
            ],
        );
        let got = lines(&out);
        assert_eq!(got.len(), 1, "{}", String::from_utf8_lossy(&out.stderr));
        got[0].clone()
    };
    // A first call creates the store.
    let first = run("write", json!({"path": "notes.txt", "content": "x"}));
    assert_eq!(first["outcome"], "succeeded", "{first}");
    for (tool, args) in [
        ("write", json!({"path": "ev.db", "content": "gone"})),
        ("write", json!({"path": "ev.db-wal", "content": "gone"})),
        ("bash", json!({"command": "echo gone > ev.db"})),
    ] {
        let v = run(tool, args.clone());
        assert_eq!(v["outcome"], "denied", "{tool} {args}: {v}");
        assert!(
            v.to_string().contains("the evidence store"),
            "{tool} {args}: {v}"
        );
    }
    let verify = warden(&["evidence", "verify", "--store", "ws/ev.db"], dir.path());
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
}
