//! A `warden exec` killed with SIGKILL in the middle of a call. Contained with processes of its
//! own (the default), the call dies with it: its late effect never lands and none of its
//! processes is left. Uncontained (the in-process backend, containment optional), the call's
//! processes outlive it, and start-up recovery leaves the killed run's boundary open for as
//! long as they run, closing it only once they have ended.

use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{lines, warden, write};

const POLICY: &str = r#"
default = "deny"
allow = ["write", "bash(touch:*)", "bash(sleep:*)", "bash(echo:*)"]
"#;

const OPTIONAL: &str = "\n[containment]\nwrite_roots = \"optional\"\nnetwork_off = \"optional\"\nenv_allowlist = \"optional\"\nprocess_isolation = \"optional\"\n";

/// Starts `warden exec` running `command` with `bash` in `dir/ws`, in a process group of its
/// own (so the test can clean up whatever a failure leaves; the test itself signals only the
/// `warden` process).
fn start(dir: &Path, policy: &str, command: &str, extra: &[&str]) -> Child {
    let policy = write(dir, "policy.toml", policy);
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let args = json!({ "command": command }).to_string();
    let mut argv = vec![
        "exec",
        "--policy",
        &policy,
        "--tool",
        "bash",
        "--args",
        &args,
        "--workspace",
        ws.to_str().unwrap(),
        "--format",
        "json",
    ];
    argv.extend_from_slice(extra);
    Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(argv)
        .current_dir(dir)
        .env_remove("CLAUDE_PROJECT_DIR")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap()
}

/// Waits until the call has created `ws/started` (the call is running), then SIGKILLs the
/// `warden` process, and only it.
fn kill_once_started(dir: &Path, warden: &mut Child) {
    let started = dir.join("ws/started");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !started.exists() {
        if let Some(status) = warden.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut warden.stderr.take().unwrap(), &mut stderr).unwrap();
            panic!("warden exited ({status}) before the call started: {stderr}");
        }
        assert!(Instant::now() < deadline, "the call never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    warden.kill().unwrap(); // SIGKILL to this pid alone
    assert_eq!(warden.wait().unwrap().signal(), Some(9));
}

/// Every live process whose command line (arguments joined by spaces) passes `test` (zombies
/// have none: they ended).
fn processes_where(test: impl Fn(&str) -> bool) -> Vec<(u32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            test(&text).then_some((pid, text))
        })
        .collect()
}

/// Every live process whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<(u32, String)> {
    processes_where(|line| line.contains(needle))
}

/// Kills what is left in the group of `warden` (a failed test must not leave processes).
fn kill_group(warden: &Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", warden.id())])
        .stderr(Stdio::null())
        .status();
}

#[test]
fn a_contained_call_dies_with_a_killed_exec_and_its_late_effect_never_lands() {
    let dir = tempfile::tempdir().unwrap();
    // A sleep no other process on the machine runs, so its survivors can be found by name.
    let nap = format!("2.{:04}", std::process::id() % 10_000);
    let command = format!("touch started; sleep {nap}; echo late > marker");
    let mut exec = start(dir.path(), POLICY, &command, &[]);
    kill_once_started(dir.path(), &mut exec);
    // Longer than the call's sleep: had anything of it survived, the marker would be there.
    std::thread::sleep(Duration::from_secs(3));
    let marker = dir.path().join("ws/marker");
    let survivors = [
        processes_with(&format!("sleep {nap}")),
        processes_with(&dir.path().join("ws").display().to_string()),
    ]
    .concat();
    kill_group(&exec);
    assert!(
        !marker.exists(),
        "the call's effect landed after its executor was killed"
    );
    assert!(
        survivors.is_empty(),
        "processes of the call outlived its executor: {survivors:?}"
    );
}

fn exec_again(dir: &Path, policy: &str) -> (Output, Value) {
    let policy = write(dir, "policy.toml", policy);
    let ws = dir.join("ws");
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args([
            "exec",
            "--policy",
            &policy,
            "--tool",
            "write",
            "--args",
            r#"{"path": "second.txt", "content": "second"}"#,
            "--workspace",
            ws.to_str().unwrap(),
            "--backend",
            "in-process",
            "--evidence",
            "ev.db",
            "--format",
            "json",
        ])
        .current_dir(dir)
        .env_remove("CLAUDE_PROJECT_DIR")
        .output()
        .unwrap();
    let v = lines(&out)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    (out, v)
}

/// The `warden evidence show --format json` line of `chain`.
fn shown(dir: &Path, chain: &str) -> Value {
    let out = warden(
        &[
            "evidence", "show", "--store", "ev.db", "--chain", chain, "--format", "json",
        ],
        dir,
    );
    assert_eq!(out.status.code(), Some(0));
    lines(&out).remove(0)
}

#[test]
fn recovery_leaves_open_the_boundary_of_an_uncontained_call_until_its_process_ends() {
    let dir = tempfile::tempdir().unwrap();
    let policy = format!("{POLICY}{OPTIONAL}");
    let nap = format!("30.{:04}", std::process::id() % 10_000);
    let command = format!("touch started; sleep {nap}; echo late > marker");
    let mut exec = start(
        dir.path(),
        &policy,
        &command,
        &["--backend", "in-process", "--evidence", "ev.db"],
    );
    kill_once_started(dir.path(), &mut exec);
    // The uncontained call outlived its executor: its shell runs on, and so does the sleep it
    // started (the shell's fork carries its command line only until it becomes the sleep).
    let alone = |prefix: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match processes_where(|line| line.starts_with(prefix)).as_slice() {
                [(pid, _)] => return *pid,
                other => assert!(Instant::now() < deadline, "{other:?}"),
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let shell = alone(&format!("bash -c {command}"));
    let sleep = alone(&format!("sleep {nap}"));

    // The next run may recover (no run holds the store) but must not close the killed run's
    // operation while that process may still have effects.
    let (out, v) = exec_again(dir.path(), &policy);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{v} {stderr}");
    assert_eq!(v["evidence"]["recovered"], json!([]), "{v}");
    // The shell is the recorded process; the sleep is found by the token it inherited.
    for pid in [shell, sleep] {
        assert!(
            stderr.contains(&format!("process {pid} is still running")),
            "{stderr}"
        );
    }
    let killed = stderr
        .split_whitespace()
        .find(|w| w.starts_with("exec-"))
        .unwrap()
        .trim_end_matches(',')
        .to_owned();
    let open = shown(dir.path(), &killed);
    assert_eq!(open["open_operations"], 1, "{open}");
    assert_ne!(open["state"], "abandoned", "{open}");

    // Once the call's processes have ended, the next run closes its operation as ambiguous
    // (it may have run) and abandons the boundary.
    kill_group(&exec);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !processes_with(&command).is_empty() {
        assert!(Instant::now() < deadline, "the shell did not end");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (out, v) = exec_again(dir.path(), &policy);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{v} {stderr}");
    let recovered = v["evidence"]["recovered"].as_array().unwrap();
    assert_eq!(recovered.len(), 1, "{v}");
    assert_eq!(recovered[0]["chain_id"], killed.as_str());
    assert_eq!(recovered[0]["terminal"], "external_result_ambiguous");
    let closed = shown(dir.path(), &killed);
    assert_eq!(closed["state"], "abandoned", "{closed}");
    assert_eq!(closed["open_operations"], 0, "{closed}");
    assert!(!dir.path().join("ws/marker").exists());
    assert!(
        !dir.path().join("ev.db.exec-runs").exists(),
        "nothing is left of the runs' process records"
    );
    let verify = warden(&["evidence", "verify", "--store", "ev.db"], dir.path());
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}
