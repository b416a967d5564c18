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
        degradable: Vec::new(),
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
        Capability::DescriptorIsolation,
        Capability::UnixSocketsOff,
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
        Capability::ALL.len(),
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

#[test]
fn a_listener_on_the_host_loopback_sees_no_connection() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let out = rt()
        .block_on(backend().run(spec("bash", &["-c", &script], dir.path(), &[dir.path()])))
        .unwrap();
    assert_ne!(out.exit_code, Some(0), "{out:?}");
    assert!(!out.stdout.contains("connected"));
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(listener.accept().is_err(), "the listener saw a connection");
}

#[test]
fn a_missing_mechanism_is_reported_and_required_containment_refuses_to_run() {
    use warden_sandbox::{Mechanism, ProbeOptions};
    let options = ProbeOptions {
        simulate_unavailable: vec![Mechanism::Landlock],
    };
    let degraded = SubprocessBackend::probe_with(helper(), &options).unwrap();
    assert_eq!(
        degraded
            .capabilities()
            .status(Capability::FilesystemWriteRoots),
        CapabilityStatus::Unsupported
    );
    let (_, supported, detail) = degraded.mechanisms()[0].clone();
    assert!(!supported && detail.contains("simulated"), "{detail}");
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let err = rt()
        .block_on(degraded.run(spec("sh", &["-c", &script], dir.path(), &[dir.path()])))
        .unwrap_err();
    assert!(
        matches!(err, warden_contracts::BackendError::Containment { .. }),
        "{err}"
    );
    assert!(
        !marker.exists(),
        "nothing runs when required containment is not proven"
    );

    let no_net = SubprocessBackend::probe_with(
        helper(),
        &ProbeOptions {
            simulate_unavailable: vec![Mechanism::NetworkNamespace],
        },
    )
    .unwrap();
    assert!(
        rt().block_on(no_net.run(spec("true", &[], dir.path(), &[dir.path()])))
            .is_err()
    );
    let mut with_network = spec("true", &[], dir.path(), &[dir.path()]);
    with_network.network = true;
    assert_eq!(
        rt().block_on(no_net.run(with_network)).unwrap().exit_code,
        Some(0)
    );
}
