//! The subprocess backend on this machine, for real: probes, write roots, network off,
//! environment allowlist, wall time and output limits, fail-closed helper errors, a helper
//! whose starter is already gone, and the records of processes that need not die with their
//! starter.
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

#[test]
fn a_helper_whose_starter_is_already_gone_runs_nothing() {
    // The helper is told which process started it; when that is not its parent (the starter
    // died before the helper could ask to die with it), it stops before the program runs.
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let mut s = warden_sandbox::SandboxSpec {
        program: "touch".into(),
        args: vec![marker.to_string_lossy().into_owned()],
        cwd: dir.path().to_owned(),
        env: BTreeMap::from([("PATH".to_owned(), "/usr/bin:/bin".to_owned())]),
        write_roots: vec![dir.path().to_owned()],
        read_roots: None,
        network: true,
        landlock: false,
        limits: warden_sandbox::ResourceLimits::default(),
        isolate_processes: false,
        unix_sockets_off: false,
    };
    let run = |s: &warden_sandbox::SandboxSpec, parent: u32| {
        std::process::Command::new(helper())
            .args([
                "__warden-sandbox-exec",
                &serde_json::to_string(s).unwrap(),
                &parent.to_string(),
            ])
            .output()
            .unwrap()
    };
    let gone = run(&s, std::process::id() + 1);
    assert_eq!(
        gone.status.code(),
        Some(warden_sandbox::helper::CONFINE_FAILED)
    );
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("is gone"),
        "{}",
        String::from_utf8_lossy(&gone.stderr)
    );
    assert!(!marker.exists(), "the program ran");
    // Started by the process it names, the same helper runs the program.
    let out = run(&s, std::process::id());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(marker.exists());
    // Isolated too.
    std::fs::remove_file(&marker).unwrap();
    s.isolate_processes = true;
    assert_eq!(run(&s, std::process::id() + 1).status.code(), Some(125));
    assert!(!marker.exists(), "the isolated program ran");
    assert_eq!(run(&s, std::process::id()).status.code(), Some(0));
    assert!(marker.exists());
}

mod process_records {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use warden_contracts::{Capability, EffectBackend, ProcessSpec};
    use warden_sandbox::{
        InProcessBackend, Mechanism, ProbeOptions, ProcessRecords, RECORD_VARIABLE,
        SubprocessBackend, Survivor,
    };

    use super::{helper, rt, spec};

    /// A shell that creates `running` and then waits until `release` exists.
    fn held(dir: &Path) -> ProcessSpec {
        let script = "touch running; while [ ! -e release ]; do sleep 0.01; done";
        let mut s = spec("sh", &["-c", script], dir, &[dir]);
        s.degradable = vec![Capability::ProcessIsolation];
        s
    }

    /// Runs `held` on `backend` and returns what `records` showed while it ran (with each
    /// running process's command line) and after.
    fn observe(
        backend: &dyn EffectBackend,
        dir: &Path,
        records: &ProcessRecords,
    ) -> (Vec<(Survivor, String)>, Vec<Survivor>) {
        rt().block_on(async {
            let call = backend.run(held(dir));
            let watch = async {
                let deadline = Instant::now() + Duration::from_secs(30);
                while !dir.join("running").exists() {
                    assert!(Instant::now() < deadline, "the process never started");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let during: Vec<(Survivor, String)> = records
                    .survivors()
                    .unwrap()
                    .into_iter()
                    .map(|s| {
                        let line = match &s {
                            Survivor::Running { pid, .. } => cmdline(*pid),
                            Survivor::Unreadable { .. } => String::new(),
                        };
                        (s, line)
                    })
                    .collect();
                std::fs::write(dir.join("release"), "").unwrap();
                during
            };
            let (out, during) = tokio::join!(call, watch);
            assert_eq!(out.unwrap().exit_code, Some(0));
            (during, records.survivors().unwrap())
        })
    }

    fn cmdline(pid: u32) -> String {
        String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap())
            .replace('\0', " ")
    }

    /// The survivors seen while `held` ran: the shell (and, when caught between two of its
    /// `sleep`s, the `sleep` it started, found by the token it inherited), all of one record.
    fn assert_the_shell_runs(during: &[(Survivor, String)]) {
        assert!(
            during
                .iter()
                .any(|(_, line)| line.starts_with("sh -c touch running")),
            "{during:?}"
        );
        for (survivor, line) in during {
            assert!(matches!(survivor, Survivor::Running { .. }), "{survivor:?}");
            assert_eq!(survivor.record(), during[0].0.record());
            assert!(
                line.starts_with("sh -c touch running") || line.starts_with("sleep 0.01"),
                "{line}"
            );
        }
    }

    #[test]
    fn an_uncontained_process_is_recorded_while_it_runs_and_forgotten_once_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let records = ProcessRecords::new(dir.path().join("records"));
        let backend = InProcessBackend::new().with_process_records(records.clone());
        let (during, after) = observe(&backend, dir.path(), &records);
        assert_the_shell_runs(&during);
        assert!(after.is_empty(), "{after:?}");
        assert_eq!(
            std::fs::read_dir(records.dir()).unwrap().count(),
            0,
            "no record is left"
        );
    }

    #[test]
    fn the_subprocess_backend_records_only_processes_without_a_pid_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let records = ProcessRecords::new(dir.path().join("records"));
        let isolated = SubprocessBackend::probe(helper())
            .unwrap()
            .with_process_records(records.clone());
        let (during, _) = observe(&isolated, dir.path(), &records);
        assert!(
            during.is_empty(),
            "an isolated process dies with its starter: {during:?}"
        );
        assert!(!records.dir().exists());

        std::fs::remove_file(dir.path().join("running")).unwrap();
        std::fs::remove_file(dir.path().join("release")).unwrap();
        let unisolated = SubprocessBackend::probe_with(
            helper(),
            &ProbeOptions {
                simulate_unavailable: vec![Mechanism::ProcessIsolation],
            },
        )
        .unwrap()
        .with_process_records(records.clone());
        let (during, after) = observe(&unisolated, dir.path(), &records);
        // The helper became the program: the recorded process is the shell.
        assert_the_shell_runs(&during);
        assert!(after.is_empty(), "{after:?}");
    }

    #[test]
    fn a_record_of_an_ended_process_leaves_no_survivor_and_its_token_finds_what_lives_on() {
        let dir = tempfile::tempdir().unwrap();
        let records = ProcessRecords::new(dir.path().join("records"));
        assert!(
            records.survivors().unwrap().is_empty(),
            "no folder, no survivor"
        );
        // The record of a process that ran and ended: copied while it ran, put back after.
        let backend = InProcessBackend::new().with_process_records(records.clone());
        let (path, text) = rt().block_on(async {
            let call = backend.run(held(dir.path()));
            let watch = async {
                let deadline = Instant::now() + Duration::from_secs(30);
                while !dir.path().join("running").exists() {
                    assert!(Instant::now() < deadline, "the process never started");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let entry = std::fs::read_dir(records.dir())
                    .unwrap()
                    .next()
                    .unwrap()
                    .unwrap();
                let copy = (entry.path(), std::fs::read_to_string(entry.path()).unwrap());
                std::fs::write(dir.path().join("release"), "").unwrap();
                copy
            };
            let (out, copy) = tokio::join!(call, watch);
            out.unwrap();
            copy
        });
        assert!(text.starts_with("pid "), "{text:?}");
        std::fs::write(&path, &text).unwrap();
        assert!(
            records.survivors().unwrap().is_empty(),
            "its process has ended"
        );

        // A process that carries the record's token (a descendant, or the process itself when
        // its starter died before writing its id) is found while it lives.
        let token = path.file_stem().unwrap().to_str().unwrap();
        let mut heir = std::process::Command::new("sleep")
            .arg("30")
            .env(RECORD_VARIABLE, token)
            .spawn()
            .unwrap();
        assert_eq!(
            records.survivors().unwrap(),
            vec![Survivor::Running {
                pid: heir.id(),
                record: path.clone()
            }]
        );
        // Also under a record that still says `starting`.
        std::fs::write(&path, "starting\n").unwrap();
        assert_eq!(records.survivors().unwrap().len(), 1);
        heir.kill().unwrap();
        heir.wait().unwrap();
        assert!(
            records.survivors().unwrap().is_empty(),
            "a start never confirmed, and nothing carries its token"
        );
        // A record that cannot be read rules nothing out.
        std::fs::write(&path, "garbage").unwrap();
        assert_eq!(
            records.survivors().unwrap(),
            vec![Survivor::Unreadable { record: path }]
        );
    }
}
