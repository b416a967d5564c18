//! The subprocess backend on this machine, for real: probes, write roots, network off,
//! environment allowlist, wall time and output limits, and fail-closed helper errors.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use warden_contracts::{Capability, CapabilityStatus, EffectBackend, ProcessSpec};
use warden_sandbox::SubprocessBackend;

fn helper() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_warden-sandbox-helper"))
}

fn backend() -> &'static SubprocessBackend {
    static B: OnceLock<SubprocessBackend> = OnceLock::new();
    B.get_or_init(|| SubprocessBackend::probe(helper()).unwrap())
}

fn spec(
    program: &str,
    args: &[&str],
    cwd: &std::path::Path,
    write_roots: &[&std::path::Path],
) -> ProcessSpec {
    ProcessSpec {
        program: program.into(),
        args: args.iter().map(|s| (*s).to_owned()).collect(),
        cwd: cwd.to_string_lossy().into_owned(),
        env_allowlist: vec!["PATH".into()],
        env_set: BTreeMap::new(),
        stdin: None,
        write_roots: write_roots
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect(),
        read_roots: None,
        network: false,
        timeout_ms: Some(10_000),
        max_output_bytes: Some(1 << 20),
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn probes_prove_what_this_machine_enforces() {
    let report = backend().capabilities();
    for cap in [
        Capability::FilesystemWriteRoots,
        Capability::NetworkOff,
        Capability::EnvAllowlist,
        Capability::ProcessIsolation,
    ] {
        let entry = report.entries.iter().find(|e| e.capability == cap).unwrap();
        assert_eq!(
            entry.status,
            CapabilityStatus::Enforced,
            "{cap:?}: {}",
            entry.detail
        );
    }
    assert_eq!(
        report.entries.len(),
        6,
        "every capability is reported exactly once"
    );
    assert!(backend().backend_ref().capability_digest().is_some());
}

#[test]
fn writes_outside_the_write_roots_are_refused() {
    let inside = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escaped");
    let script = format!(
        "echo in > {}/ok && echo out > {}",
        inside.path().display(),
        target.display()
    );
    let out = rt()
        .block_on(backend().run(spec(
            "sh",
            &["-c", &script],
            inside.path(),
            &[inside.path()],
        )))
        .unwrap();
    assert_ne!(out.exit_code, Some(0), "{out:?}");
    assert!(out.stderr.contains("Permission denied"), "{out:?}");
    assert!(inside.path().join("ok").exists());
    assert!(!target.exists(), "a write escaped the write root");
}

#[test]
fn the_network_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let out = rt()
        .block_on(backend().run(spec(
            "cat",
            &["/proc/self/net/dev"],
            dir.path(),
            &[dir.path()],
        )))
        .unwrap();
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let interfaces: Vec<&str> = out
        .stdout
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(interfaces, ["lo"]);
}

#[test]
fn the_environment_is_the_allowlist() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec("env", &[], dir.path(), &[dir.path()]);
    s.env_set.insert("GREETING".into(), "hello".into());
    // SAFETY of the test: the variable is only read by the backend when building the child env.
    let out = rt().block_on(backend().run(s)).unwrap();
    let mut names: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.split('=').next())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["GREETING", "PATH"], "{}", out.stdout);
}

#[test]
fn wall_time_and_output_are_limited() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec("sleep", &["5"], dir.path(), &[dir.path()]);
    s.timeout_ms = Some(200);
    let out = rt().block_on(backend().run(s)).unwrap();
    assert!(out.timed_out, "{out:?}");
    let mut s = spec("yes", &[], dir.path(), &[dir.path()]);
    s.max_output_bytes = Some(1000);
    let out = rt().block_on(backend().run(s)).unwrap();
    assert!(out.truncated, "{out:?}");
    assert_eq!(out.stdout.len(), 1000);
}

#[test]
fn the_helper_fails_closed() {
    let out = std::process::Command::new(helper())
        .args(["__warden-sandbox-exec", "{not json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(warden_sandbox::helper::CONFINE_FAILED)
    );
    let out = std::process::Command::new(helper()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
