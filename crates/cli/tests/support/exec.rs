//! `warden exec` (with contained execution): one call
//! through the full executor with the built-in tools; one JSON object with `outcome`,
//! `profile`, `reason` / `result` (and `degradations`); exit 0 succeeded, 1 any other outcome,
//! 2 usage or input error with nothing run.
//!
//! Containment is asserted on effects, through the real binary (which hosts the re-exec helper)
//! and the real subprocess backend: a contained `bash` cannot create a file outside its write
//! root, cannot connect to a listener on 127.0.0.1, does not see variables outside the
//! allowlist, and is killed at its time limit. Probe honesty: with a mechanism simulated
//! unavailable the report says unsupported, a required containment denies before anything
//! runs, and an optional one runs and records the degradation.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use warden_contracts::{Capability, CapabilityStatus, EffectBackend};
use warden_sandbox::{Mechanism, ProbeOptions, SubprocessBackend};

use super::{lines, warden, write};

const POLICY: &str = r#"
default = "deny"
allow = ["read", "edit", "list", "bash(echo:*)", "bash(printf:*)", "bash(cat:*)", "bash(touch:*)", "bash(sleep:*)", "bash(bash connect.sh)"]
ask = ["bash(git push:*)"]
deny = ["bash(rm:*)"]
"#;

/// Every mechanism optional, for the in-process backend or a simulated kernel.
const OPTIONAL: &str = "\n[containment]\nwrite_roots = \"optional\"\nnetwork_off = \"optional\"\nenv_allowlist = \"optional\"\nprocess_isolation = \"optional\"\n";

/// Runs `warden exec` in `dir` with `policy`, workspace `dir/ws` and `extra` arguments (shared
/// with `exec_evidence`).
pub(super) fn run_exec(
    dir: &Path,
    policy: &str,
    tool: &str,
    args: &Value,
    extra: &[&str],
) -> Output {
    let policy = write(dir, "policy.toml", policy);
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
    ];
    argv.extend_from_slice(extra);
    warden(&argv, dir)
}

/// Runs `warden exec` in `dir` with `policy`, workspace `dir/ws`, JSON output.
fn exec_with(
    dir: &Path,
    policy: &str,
    tool: &str,
    args: &Value,
    extra: &[&str],
) -> (Output, Value) {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(extra);
    let out = run_exec(dir, policy, tool, args, &all);
    (out.clone(), parse(&out))
}

fn exec(dir: &Path, tool: &str, args: &Value, extra: &[&str]) -> (Output, Value) {
    exec_with(dir, POLICY, tool, args, extra)
}

fn parse(out: &Output) -> Value {
    if out.stdout.is_empty() {
        return Value::Null;
    }
    let got = lines(out);
    assert_eq!(got.len(), 1, "one object per call");
    got[0].clone()
}

fn succeeded(out: &Output, v: &Value) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{v} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(v["outcome"], "succeeded", "{v}");
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
    succeeded(&out, &v);
    assert_eq!(v["profile"], "minimal");
    assert_eq!(v["result"]["stdout"], "hello\n");
    assert!(v.get("reason").is_none());
    assert!(v.get("degradations").is_none(), "everything was proven");
    assert_eq!(v["backend"], "subprocess", "the default backend");
}

#[test]
fn exec_runs_each_builtin_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    // write (through the `edit` alias in the policy), then read it back.
    let (out, v) = exec(
        dir.path(),
        "write",
        &json!({"path": "a/b.txt", "content": "one\ntwo\ntwo\n"}),
        &[],
    );
    succeeded(&out, &v);
    assert_eq!(v["result"]["created"], true);
    assert_eq!(
        std::fs::read_to_string(ws.join("a/b.txt")).unwrap(),
        "one\ntwo\ntwo\n"
    );
    let (out, v) = exec(
        dir.path(),
        "read",
        &json!({"path": "a/b.txt", "offset": 2, "limit": 1}),
        &[],
    );
    succeeded(&out, &v);
    assert!(
        v["result"]["content"]
            .as_str()
            .unwrap()
            .starts_with("two\n\n[warden: output truncated")
    );
    assert_eq!(v["result"]["next_offset"], 3);
    // edit: a non-unique `old` is refused and the file is unchanged; a unique one replaces.
    let (out, v) = exec(
        dir.path(),
        "edit",
        &json!({"path": "a/b.txt", "old": "two", "new": "2"}),
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(v["outcome"], "failed");
    assert_eq!(v["failure"]["kind"], "old_not_unique");
    assert_eq!(
        std::fs::read_to_string(ws.join("a/b.txt")).unwrap(),
        "one\ntwo\ntwo\n"
    );
    let (out, v) = exec(
        dir.path(),
        "edit",
        &json!({"path": "a/b.txt", "old": "two", "new": "2", "replace_all": true}),
        &[],
    );
    succeeded(&out, &v);
    assert_eq!(v["result"]["replacements"], 2);
    assert_eq!(
        std::fs::read_to_string(ws.join("a/b.txt")).unwrap(),
        "one\n2\n2\n"
    );
    // list.
    let (out, v) = exec(dir.path(), "list", &json!({"path": "a"}), &[]);
    succeeded(&out, &v);
    assert_eq!(
        v["result"]["entries"],
        json!([{"name": "b.txt", "kind": "file", "bytes": 8}])
    );
    // bash, contained, reading what the file tools wrote.
    let (out, v) = exec(dir.path(), "bash", &json!({"command": "cat a/b.txt"}), &[]);
    succeeded(&out, &v);
    assert_eq!(v["result"]["stdout"], "one\n2\n2\n");
    // Text output for a human.
    let policy = write(dir.path(), "p.toml", POLICY);
    let ws_arg = ws.to_string_lossy().into_owned();
    let out = warden(
        &[
            "exec",
            "--policy",
            &policy,
            "--tool",
            "list",
            "--args",
            r#"{"path":"."}"#,
            "--workspace",
            &ws_arg,
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("succeeded\n"));
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
    // A write outside the workspace: refused by the tool's precondition, for `..`, absolute
    // paths and symlinks leaving it.
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.path().join("ws/link")).unwrap();
    for path in [
        "../out.txt".to_owned(),
        outside.join("abs.txt").to_string_lossy().into_owned(),
        "link/via-link.txt".to_owned(),
    ] {
        let (out, v) = exec(
            dir.path(),
            "write",
            &json!({"path": path, "content": "x"}),
            &[],
        );
        assert_eq!(out.status.code(), Some(1), "{path}: {v}");
        assert_eq!(v["reason_code"], "precondition", "{path}: {v}");
    }
    assert!(!dir.path().join("out.txt").exists());
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    // A tool failure.
    let (out, v) = exec(dir.path(), "read", &json!({"path": "missing"}), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(v["outcome"], "failed");
    assert_eq!(v["failure"]["kind"], "not_found");
}

#[test]
fn exec_escalates_with_the_approval_request_a_receipt_must_answer() {
    let dir = tempfile::tempdir().unwrap();
    let args = json!({"command": "git push origin main"});
    let (out, v) = exec(dir.path(), "bash", &args, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(v["outcome"], "escalated");
    let approval = &v["approval"];
    assert_eq!(approval["action"], "bash");
    assert_eq!(approval["policy_digest"], v["policy_digest"]);
    // Signed receipts answer it: crates/cli/tests/support/approve.rs.
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
        &json!({"command": "touch ran"}),
        &[
            "--backend",
            "in-process",
            "--simulate-unavailable",
            "landlock",
        ],
    );
    input_error(&out, "--simulate-unavailable");
    let (out, _) = exec(
        dir.path(),
        "bash",
        &json!({"command": "touch ran"}),
        &["--simulate-unavailable", "seccomp"],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown mechanism is a usage error"
    );
    // `--evidence` runs governed: crates/cli/tests/support/exec_evidence.rs. A receipt needs
    // declared approvers (this policy has none): crates/cli/tests/support/approve.rs.
    let receipt = write(dir.path(), "r.json", "{\"approval_id\": 1}");
    let (out, _) = exec(
        dir.path(),
        "bash",
        &json!({"command": "touch ran"}),
        &["--receipt", &receipt],
    );
    input_error(&out, "the policy declares no [approvers]");
    assert!(!dir.path().join("ev.db").exists());
    assert!(!dir.path().join("ws/ran").exists());
}

// ---------------------------------------------------------------------------------------------
// Containment, asserted on effects (subprocess backend)
// ---------------------------------------------------------------------------------------------

#[test]
fn exec_contained_bash_cannot_create_a_file_outside_its_write_root() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escaped");
    let command = format!(
        "touch {t}; echo x > {t}.2; touch inside; echo done",
        t = target.display()
    );
    let (out, v) = exec(dir.path(), "bash", &json!({"command": command}), &[]);
    succeeded(&out, &v);
    assert_eq!(v["result"]["stdout"], "done\n");
    assert!(
        v["result"]["stderr"]
            .as_str()
            .unwrap()
            .contains("Permission denied"),
        "{v}"
    );
    assert!(
        !target.exists(),
        "the file outside does not exist afterwards"
    );
    assert!(!outside.path().join("escaped.2").exists());
    assert!(
        dir.path().join("ws/inside").exists(),
        "the workspace is writable"
    );
    // Nor through a symlink in the workspace that points out.
    std::os::unix::fs::symlink(outside.path(), dir.path().join("ws/out")).unwrap();
    let (out, v) = exec(
        dir.path(),
        "bash",
        &json!({"command": "touch out/via-link; echo done"}),
        &[],
    );
    succeeded(&out, &v);
    assert!(!outside.path().join("via-link").exists());
}

/// A policy for the side-door tests: the commands are allowed, so only containment stands
/// between them and the host.
const SIDE_DOORS: &str = r#"
default = "deny"
allow = ["bash(echo:*)", "bash(kill:*)", "bash(cat:*)", "bash(python3:*)", "bash(sleep:*)"]
"#;

/// A descriptor the caller of `warden exec` left open on a file outside the workspace does not
/// reach the contained program: `exec 7>>outside; warden exec … 'echo escaped >&7'`.
#[test]
fn exec_contained_bash_cannot_write_through_an_inherited_descriptor() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside.log");
    std::fs::write(&outside, "").unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    let policy = write(dir.path(), "side.toml", SIDE_DOORS);
    let script = format!(
        "exec 7>>{outside}; exec {warden} exec --policy {policy} --cwd ws --format json --tool bash --args '{{\"command\":\"echo escaped >&7\"}}'",
        outside = outside.display(),
        warden = env!("CARGO_BIN_EXE_warden"),
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &script])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let v = parse(&out);
    assert_eq!(v["outcome"], "failed", "{v}");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("Bad file descriptor"),
        "{v}"
    );
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        "",
        "nothing escaped"
    );
    // Uncontained (in-process, containment optional) the write lands: the check is not vacuous.
    let optional = write(
        dir.path(),
        "optional.toml",
        &format!("{SIDE_DOORS}{OPTIONAL}"),
    );
    let script = script.replace(&policy, &format!("{optional} --backend in-process"));
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &script])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(parse(&out)["outcome"], "succeeded");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "escaped\n");
}

/// The contained program can neither signal nor see a process of the host, and nothing it
/// starts in the background outlives the call.
#[test]
fn exec_contained_bash_cannot_signal_or_see_host_processes_and_leaves_nothing_running() {
    let dir = tempfile::tempdir().unwrap();
    let mut host = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = host.id();
    let command = format!("kill -KILL {pid}; cat /proc/{pid}/status; echo done");
    let (out, v) = exec_with(
        dir.path(),
        SIDE_DOORS,
        "bash",
        &json!({"command": command}),
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{v}");
    let stderr = v["result"]["stderr"].as_str().unwrap();
    assert!(stderr.contains("No such process"), "{v}");
    assert!(stderr.contains("No such file or directory"), "{v}");
    assert!(
        host.try_wait().unwrap().is_none(),
        "the host process was killed from inside"
    );
    // Uncontained (in-process, containment optional) the same command kills it: the check
    // above is not vacuous.
    let optional = format!("{SIDE_DOORS}{OPTIONAL}");
    let (_, v) = exec_with(
        dir.path(),
        &optional,
        "bash",
        &json!({"command": command}),
        &["--backend", "in-process"],
    );
    assert_eq!(v["outcome"], "succeeded", "{v}");
    let status = host.wait().unwrap();
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(status.signal(), Some(9), "{v}");
    // A background job of the call ends with it: its late effect never lands.
    let late = dir.path().join("ws/late");
    let command = format!(
        "(sleep 1; echo late > {}) > /dev/null 2>&1 & echo started",
        late.display()
    );
    let policy = SIDE_DOORS.replace("allow = [", "allow = [\"write\", ");
    let (out, v) = exec_with(
        dir.path(),
        &policy,
        "bash",
        &json!({"command": command}),
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{v}");
    std::thread::sleep(Duration::from_millis(2_000));
    assert!(!late.exists(), "a background job outlived the call");
}

/// With the network off, the host's UNIX sockets are out of reach too: neither a socket file
/// (think docker.sock, an SSH agent) nor an abstract socket sees a connection.
#[test]
fn exec_contained_bash_cannot_reach_a_host_unix_socket() {
    use std::os::linux::net::SocketAddrExt as _;
    use std::os::unix::net::{SocketAddr, UnixListener};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.sock");
    let by_path = UnixListener::bind(&path).unwrap();
    let name = format!("warden-test-{}", std::process::id());
    let by_name =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
    for l in [&by_path, &by_name] {
        l.set_nonblocking(true).unwrap();
    }
    let script = format!(
        "import socket\nfor a in ({path:?}, '\\0{name}'):\n    try:\n        s = socket.socket(socket.AF_UNIX)\n        s.connect(a); print('connected', repr(a))\n    except OSError as e:\n        print('refused', e)\n",
        path = path.display().to_string(),
    );
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    std::fs::write(dir.path().join("ws/connect.py"), &script).unwrap();
    let (out, v) = exec_with(
        dir.path(),
        SIDE_DOORS,
        "bash",
        &json!({"command": "python3 connect.py"}),
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert!(!v.to_string().contains("connected"), "{v}");
    for (l, what) in [
        (&by_path, "the socket file"),
        (&by_name, "the abstract socket"),
    ] {
        match l.accept() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!("{what} saw a connection: {other:?}"),
        }
    }
    // The same script uncontained does connect: the check above is not vacuous.
    let (_, v) = exec_with(
        dir.path(),
        &format!("{SIDE_DOORS}{OPTIONAL}"),
        "bash",
        &json!({"command": "python3 connect.py"}),
        &["--backend", "in-process"],
    );
    assert_eq!(
        v["result"]["stdout"]
            .as_str()
            .unwrap()
            .matches("connected")
            .count(),
        2,
        "{v}"
    );
}

#[test]
fn exec_contained_bash_cannot_connect_to_a_loopback_listener() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    // The policy would refuse `> /dev/tcp/…` written in the command; a script does what its
    // first word does not say, which is what containment is for.
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    std::fs::write(
        dir.path().join("ws/connect.sh"),
        format!("echo hi > /dev/tcp/127.0.0.1/{port} && echo connected\n"),
    )
    .unwrap();
    let command = "bash connect.sh";
    let (out, v) = exec(dir.path(), "bash", &json!({"command": command}), &[]);
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(v["failure"]["kind"], "exit_status", "{v}");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("Network is unreachable"),
        "{v}"
    );
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the listener saw a connection: {other:?}"),
    }
    // The same command, uncontained (in-process, network optional), does connect: the check
    // above is not vacuous.
    let policy = format!("{POLICY}{OPTIONAL}");
    let (out, v) = exec_with(
        dir.path(),
        &policy,
        "bash",
        &json!({"command": command}),
        &["--backend", "in-process"],
    );
    succeeded(&out, &v);
    assert_eq!(v["result"]["stdout"], "connected\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match listener.accept() {
            Ok(_) => break,
            Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("the uncontained control never connected: {e}"),
        }
    }
}

#[test]
fn exec_contained_bash_sees_only_the_allowlisted_environment() {
    let dir = tempfile::tempdir().unwrap();
    let run = |policy: &str| {
        let policy = write(dir.path(), "env.toml", policy);
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let args = json!({
            "command": "printf '%s|%s|%s' \"${WARDEN_TEST_SECRET:-absent}\" \"${PATH:+path}\" \"${HOME:+home}\""
        })
        .to_string();
        let out = Command::new(env!("CARGO_BIN_EXE_warden"))
            .args([
                "exec",
                "--policy",
                &policy,
                "--tool",
                "bash",
                "--args",
                &args,
                "--workspace",
                &ws.to_string_lossy(),
                "--format",
                "json",
            ])
            .current_dir(dir.path())
            .env("WARDEN_TEST_SECRET", "hunter2")
            .env("HOME", dir.path())
            .output()
            .unwrap();
        let v = parse(&out);
        succeeded(&out, &v);
        v["result"]["stdout"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        run("default = \"deny\"\nallow = [\"bash(printf:*)\"]\n"),
        "absent|path|home"
    );
    // The allowlist is the policy's `[containment].env`.
    assert_eq!(
        run(
            "default = \"deny\"\nallow = [\"bash(printf:*)\"]\n[containment]\nenv = [\"PATH\", \"WARDEN_TEST_SECRET\"]\n"
        ),
        "hunter2|path|",
        "HOME is not on that list"
    );
}

#[test]
fn exec_contained_bash_is_killed_at_its_time_limit() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let (out, v) = exec(
        dir.path(),
        "bash",
        &json!({"command": "sleep 2; touch late", "timeout_ms": 300}),
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(v["outcome"], "failed");
    assert_eq!(v["failure"]["kind"], "timeout");
    assert_eq!(v["call_executed"], true);
    assert!(started.elapsed() < Duration::from_secs(2), "not waited out");
    std::thread::sleep(Duration::from_millis(2_500));
    assert!(
        !dir.path().join("ws/late").exists(),
        "the killed command never went on"
    );
}

// ---------------------------------------------------------------------------------------------
// Probe honesty
// ---------------------------------------------------------------------------------------------

#[test]
fn exec_probe_honesty_a_simulated_missing_mechanism_is_reported_unsupported() {
    let helper = std::path::PathBuf::from(env!("CARGO_BIN_EXE_warden"));
    for (mechanism, capability) in [
        (Mechanism::Landlock, Capability::FilesystemWriteRoots),
        (Mechanism::NetworkNamespace, Capability::NetworkOff),
        (Mechanism::Environment, Capability::EnvAllowlist),
    ] {
        let backend = SubprocessBackend::probe_with(
            helper.clone(),
            &ProbeOptions {
                simulate_unavailable: vec![mechanism],
            },
        )
        .unwrap();
        let report = backend.capabilities();
        assert_eq!(report.status(capability), CapabilityStatus::Unsupported);
        let (_, supported, evidence) = backend
            .mechanisms()
            .into_iter()
            .find(|(m, _, _)| *m == mechanism)
            .unwrap();
        assert!(!supported);
        assert!(evidence.contains("simulated"), "{evidence}");
        // Only that one.
        assert_eq!(
            report
                .entries
                .iter()
                .filter(|e| e.status != CapabilityStatus::Enforced)
                .count(),
            if mechanism == Mechanism::Landlock {
                2 // write and read roots share the ruleset
            } else {
                1
            }
        );
    }
}

#[test]
fn exec_probe_honesty_required_containment_denies_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    for (mechanism, capability) in [
        ("landlock", "filesystem_write_roots"),
        ("network-namespace", "network_off"),
        ("environment", "env_allowlist"),
    ] {
        let (out, v) = exec(
            dir.path(),
            "bash",
            &json!({"command": "touch ran"}),
            &["--simulate-unavailable", mechanism],
        );
        assert_eq!(out.status.code(), Some(1), "{v}");
        assert_eq!(v["outcome"], "denied", "{v}");
        assert_eq!(v["reason_code"], "containment");
        assert_eq!(v["evaluator"], "backend");
        let reason = v["reason"].as_str().unwrap();
        assert!(reason.contains(capability), "{reason}");
        assert!(reason.contains("simulated as unavailable"), "{reason}");
        assert!(
            !dir.path().join("ws/ran").exists(),
            "{mechanism}: nothing ran"
        );
    }
    // The in-process backend proves nothing: required containment denies `bash` there too.
    let (out, v) = exec(
        dir.path(),
        "bash",
        &json!({"command": "touch ran"}),
        &["--backend", "in-process"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(v["reason_code"], "containment");
    assert_eq!(v["backend"], "in_process");
    assert!(!dir.path().join("ws/ran").exists());
}

#[test]
fn exec_probe_honesty_optional_containment_runs_and_records_the_degradation() {
    let dir = tempfile::tempdir().unwrap();
    let policy = format!("{POLICY}\n[containment]\nnetwork_off = \"optional\"\n");
    let (out, v) = exec_with(
        dir.path(),
        &policy,
        "bash",
        &json!({"command": "touch ran; echo ok"}),
        &["--simulate-unavailable", "network-namespace"],
    );
    succeeded(&out, &v);
    assert!(dir.path().join("ws/ran").exists(), "it ran");
    assert_eq!(
        v["degradations"],
        json!([{
            "capability": "network_off",
            "status": "unsupported",
            "detail": "network_namespace simulated as unavailable",
        }])
    );
    // What stays proven is still enforced: writes outside the workspace are refused.
    let outside = tempfile::tempdir().unwrap();
    let (_, v) = exec_with(
        dir.path(),
        &policy,
        "bash",
        &json!({"command": format!("touch {}/x; echo ok", outside.path().display())}),
        &["--simulate-unavailable", "network-namespace"],
    );
    assert_eq!(v["outcome"], "succeeded", "{v}");
    assert!(!outside.path().join("x").exists());

    // In-process with everything optional: it runs, uncontained, and says so.
    let policy = format!("{POLICY}{OPTIONAL}");
    let (out, v) = exec_with(
        dir.path(),
        &policy,
        "bash",
        &json!({"command": "echo ok"}),
        &["--backend", "in-process"],
    );
    succeeded(&out, &v);
    let degraded: Vec<&str> = v["degradations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["capability"].as_str().unwrap())
        .collect();
    assert_eq!(
        degraded,
        [
            "filesystem_write_roots",
            "env_allowlist",
            "process_isolation",
            "descriptor_isolation",
            "network_off",
            "unix_sockets_off"
        ]
    );

    // Landlock optional but missing: the executor admits the call and the backend runs it
    // without Landlock, because the policy listed it as degradable; the outcome says so.
    let policy = format!("{POLICY}\n[containment]\nwrite_roots = \"optional\"\n");
    let (out, v) = exec_with(
        dir.path(),
        &policy,
        "bash",
        &json!({"command": "touch landlock-off"}),
        &["--simulate-unavailable", "landlock"],
    );
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["outcome"], "succeeded", "{v}");
    assert_eq!(v["degradations"][0]["capability"], "filesystem_write_roots");
    assert!(dir.path().join("ws/landlock-off").exists());
}

/// The policy's `[guards]` apply to `warden exec`: a secret in the arguments is redacted before
/// the command runs (or refuses the call), and a secret in the result is redacted (or the
/// result withheld). No output holds the secret.
#[test]
fn exec_applies_the_policys_guards_to_arguments_and_results() {
    let dir = tempfile::tempdir().unwrap();
    let token = format!("gh{}_{}", "p", "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5");
    let guarded =
        |secrets: &str| format!("{POLICY}{OPTIONAL}\n[guards]\nsecrets = \"{secrets}\"\n");
    let in_process = ["--backend", "in-process"];
    // Block: the call is denied before anything runs.
    let marker = dir.path().join("ws/ran.txt");
    let command = format!("echo {token} && touch {}", marker.display());
    let (out, v) = exec_with(
        dir.path(),
        &guarded("block"),
        "bash",
        &json!({"command": command}),
        &in_process,
    );
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(v["outcome"], "denied", "{v}");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("a guard blocked this call"),
        "{v}"
    );
    assert!(!marker.exists());
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&token));
    // Redact: the command runs with the secret replaced.
    let (out, v) = exec_with(
        dir.path(),
        &guarded("redact"),
        "bash",
        &json!({"command": format!("echo {token}")}),
        &in_process,
    );
    succeeded(&out, &v);
    let stdout = v["result"]["stdout"].as_str().unwrap();
    assert!(!stdout.contains(&token) && !stdout.trim().is_empty(), "{v}");
    // A secret the command produces itself (not in its arguments) is redacted in the result.
    let (out, v) = exec_with(
        dir.path(),
        &guarded("redact"),
        "bash",
        &json!({"command": "printf 'gh%s_%s\\n' p aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5"}),
        &in_process,
    );
    succeeded(&out, &v);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(&token),
        "{v}"
    );
}
