//! The re-exec helper: a fresh, single-threaded process that confines itself and then `exec`s
//! the program. Confinement never happens in a `pre_exec` closure of a multi-threaded process
//! (where only async-signal-safe calls are allowed and a lock held by another thread deadlocks);
//! the helper has one thread, so every step can allocate, read files and report errors.
//!
//! Any binary can host the helper: call [`dispatch`] first thing in `main` (the `warden` CLI
//! does, and this crate ships `warden-sandbox-helper`).

use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::confine::{self, LandlockOutcome};
use crate::error::SandboxError;
use crate::spec::SandboxSpec;

/// `argv[1]` that runs a contained program: `<helper> __warden-sandbox-exec <spec json> [<pid>]`,
/// where `pid` is the process starting the helper: the helper dies with it, and does nothing if
/// it is already gone.
pub const EXEC_MODE: &str = "__warden-sandbox-exec";
/// `argv[1]` that runs one probe: `<helper> __warden-sandbox-probe <probe> [json]`.
pub const PROBE_MODE: &str = "__warden-sandbox-probe";
/// `argv[1]` of the second stage of an isolated run: PID 1 of the new PID namespace, which
/// confines itself and becomes the program. Started only by the exec mode:
/// `<helper> __warden-sandbox-init <spec json> <first stage's pid>`.
pub const INIT_MODE: &str = "__warden-sandbox-init";
/// Exit code when confinement failed before the program ran.
pub const CONFINE_FAILED: i32 = 125;
/// Exit code when the program could not be executed.
pub const EXEC_FAILED: i32 = 127;
/// The variable the environment probe plants in the helper's own environment.
pub(crate) const CANARY: &str = "WARDEN_SANDBOX_CANARY";

/// Runs the helper when `args` (the process's arguments without `argv[0]`) ask for it, and
/// returns the exit code to exit with; `None` when they do not (the host binary carries on).
/// On success in exec mode this never returns: the process becomes the program.
pub fn dispatch(args: &[String]) -> Option<i32> {
    match args.first().map(String::as_str) {
        Some(EXEC_MODE) => Some(exec_mode(
            args.get(1).map(String::as_str),
            args.get(2).map(String::as_str),
        )),
        Some(INIT_MODE) => Some(init_mode(
            args.get(1).map(String::as_str),
            args.get(2).map(String::as_str),
        )),
        Some(PROBE_MODE) => Some(probe_mode(&args[1..])),
        _ => None,
    }
}

fn fail(e: &SandboxError) -> i32 {
    let _ = writeln!(std::io::stderr(), "warden-sandbox: {e}");
    CONFINE_FAILED
}

fn parse_spec(spec: Option<&str>) -> Result<SandboxSpec, SandboxError> {
    match spec.map(serde_json::from_str) {
        Some(Ok(s)) => Ok(s),
        Some(Err(e)) => Err(SandboxError::Helper(format!("bad spec: {e}"))),
        None => Err(SandboxError::Helper("missing spec".into())),
    }
}

/// A process id passed on the command line.
fn parse_pid(pid: Option<&str>) -> Result<Option<i32>, SandboxError> {
    pid.map(|p| {
        p.parse()
            .map_err(|_| SandboxError::Helper(format!("bad process id {p:?}")))
    })
    .transpose()
}

/// The first stage: dies with the process that started it (`parent`), drops every inherited
/// descriptor, then either confines itself and becomes the program (which keeps the request to
/// die with that process), or (isolated) enters the new namespaces and supervises the second
/// stage.
fn exec_mode(spec: Option<&str>, parent: Option<&str>) -> i32 {
    if let Err(e) = parse_pid(parent).and_then(confine::die_with_parent) {
        return fail(&e);
    }
    let spec = match parse_spec(spec) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    if let Err(e) = confine::close_inherited_descriptors() {
        return fail(&e);
    }
    if spec.isolate_processes {
        return match confine::enter_process_namespaces(!spec.network) {
            Ok(()) => supervise(&spec),
            Err(e) => fail(&e),
        };
    }
    if !spec.network
        && let Err(e) = confine::enter_network_namespace()
    {
        return fail(&e);
    }
    become_program(&spec)
}

/// The second stage, PID 1 of the new PID namespace: dies with the first stage (host process
/// `first_stage`), mounts its own `/proc`, confines itself and becomes the program.
fn init_mode(spec: Option<&str>, first_stage: Option<&str>) -> i32 {
    let spec = match parse_spec(spec) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    if let Err(e) = parse_pid(first_stage).and_then(confine::become_namespace_init) {
        return fail(&e);
    }
    become_program(&spec)
}

/// Starts the second stage (the first process of the new PID namespace) with this spec and
/// waits for it: its exit code is this process's, and a signal that ended it ends this one too.
fn supervise(spec: &SandboxSpec) -> i32 {
    let json = match serde_json::to_string(spec) {
        Ok(j) => j,
        Err(e) => return fail(&SandboxError::Helper(e.to_string())),
    };
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => return fail(&SandboxError::Helper(format!("current_exe: {e}"))),
    };
    let status = match command(&exe)
        .arg(INIT_MODE)
        .arg(json)
        .arg(std::process::id().to_string())
        .status()
    {
        Ok(s) => s,
        Err(e) => {
            return fail(&SandboxError::Helper(format!(
                "start the namespace's init: {e}"
            )));
        }
    };
    use std::os::unix::process::ExitStatusExt as _;
    if let Some(signal) = status.signal() {
        if let Ok(sig) = nix::sys::signal::Signal::try_from(signal) {
            let _ = nix::sys::signal::raise(sig);
        }
        return 128 + signal;
    }
    status.code().unwrap_or(CONFINE_FAILED)
}

/// Applies the remaining confinement (limits, Landlock, the UNIX socket filter) and becomes the
/// program; returns only on failure.
fn become_program(spec: &SandboxSpec) -> i32 {
    if let Err(e) = confine_self(spec) {
        return fail(&e);
    }
    let err = command(&spec.program)
        .args(&spec.args)
        .env_clear()
        .envs(&spec.env)
        .current_dir(&spec.cwd)
        .exec();
    let _ = writeln!(
        std::io::stderr(),
        "warden-sandbox: exec {}: {err}",
        spec.program
    );
    EXEC_FAILED
}

// This crate owns subprocesses: the helper is where a contained program is started.
#[allow(clippy::disallowed_methods)]
pub(crate) fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    Command::new(program)
}

fn confine_self(spec: &SandboxSpec) -> Result<(), SandboxError> {
    confine::apply_limits(&spec.limits)?;
    if spec.landlock {
        match confine::apply_landlock(&spec.write_roots, spec.read_roots.as_deref())? {
            LandlockOutcome::Full => {}
            LandlockOutcome::Partial => {
                return Err(SandboxError::Confine(
                    "landlock is only partly enforced by this kernel".into(),
                ));
            }
        }
    }
    if spec.unix_sockets_off {
        confine::block_unix_sockets()?;
    }
    Ok(())
}

/// What one probe found, as the helper prints it on stdout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProbeResult {
    /// `enforced`, `degraded` or `unsupported`.
    pub(crate) status: String,
    /// How it was established.
    pub(crate) detail: String,
}

/// Paths for the Landlock probe, made by the parent in a throwaway folder.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct LandlockProbe {
    pub(crate) allowed: PathBuf,
    pub(crate) forbidden: PathBuf,
}

fn probe_mode(args: &[String]) -> i32 {
    let result = match args.first().map(String::as_str) {
        Some("landlock") => probe_landlock(args.get(1).map(String::as_str)),
        Some("netns") => probe_netns(),
        Some("env") => ProbeResult {
            status: if std::env::var_os(CANARY).is_some() {
                "unsupported".into()
            } else {
                "enforced".into()
            },
            detail: "a variable planted in the helper's environment did not reach the program"
                .into(),
        },
        Some("descriptors") => probe_descriptors(args.get(1).map(String::as_str)),
        Some("processes") => probe_processes(args.get(1).map(String::as_str)),
        Some("unix") => probe_unix(args.get(1).map(String::as_str)),
        other => {
            return fail(&SandboxError::Helper(format!("unknown probe {other:?}")));
        }
    };
    match serde_json::to_string(&result) {
        Ok(text) => {
            let _ = writeln!(std::io::stdout(), "{text}");
            0
        }
        Err(e) => fail(&SandboxError::Helper(e.to_string())),
    }
}

/// The mechanism is not available; `detail` says why.
pub(crate) fn unsupported(detail: String) -> ProbeResult {
    ProbeResult {
        status: "unsupported".into(),
        detail,
    }
}

/// Applies a ruleset allowing writes only under `allowed`, then tries a write there (must
/// succeed) and one under `forbidden` (must be refused).
fn probe_landlock(spec: Option<&str>) -> ProbeResult {
    let Some(Ok(p)) = spec.map(serde_json::from_str::<LandlockProbe>) else {
        return unsupported("bad probe spec".into());
    };
    let outcome = match confine::apply_landlock(std::slice::from_ref(&p.allowed), None) {
        Ok(o) => o,
        Err(e) => return unsupported(e.to_string()),
    };
    let inside = std::fs::write(p.allowed.join("probe"), b"ok");
    let outside = std::fs::write(p.forbidden.join("probe"), b"escaped");
    match (inside, outside, outcome) {
        (Ok(()), Err(e), LandlockOutcome::Full)
            if e.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            ProbeResult {
                status: "enforced".into(),
                detail: format!(
                    "landlock ruleset applied; a write outside the write root was refused ({e}) and one inside succeeded"
                ),
            }
        }
        (Ok(()), Err(e), LandlockOutcome::Partial) => ProbeResult {
            status: "degraded".into(),
            detail: format!(
                "landlock only partly enforced by this kernel; outside write refused ({e})"
            ),
        },
        (Ok(()), Ok(()), _) => unsupported("a write outside the write root succeeded".into()),
        (Err(e), _, _) => unsupported(format!("a write inside the write root failed: {e}")),
        (Ok(()), Err(e), _) => unsupported(format!("unexpected error outside the write root: {e}")),
    }
}

/// Enters a new user + network namespace and checks that only a loopback interface exists, the
/// routing table is empty, and even loopback cannot be reached. Sends nothing anywhere.
fn probe_netns() -> ProbeResult {
    if let Err(e) = confine::enter_network_namespace() {
        return unsupported(e.to_string());
    }
    let interfaces = match std::fs::read_to_string("/proc/self/net/dev") {
        Ok(text) => text
            .lines()
            .skip(2)
            .filter_map(|l| l.split(':').next().map(|n| n.trim().to_owned()))
            .collect::<Vec<_>>(),
        Err(e) => return unsupported(format!("/proc/self/net/dev: {e}")),
    };
    if interfaces != ["lo"] {
        return unsupported(format!("interfaces in the new namespace: {interfaces:?}"));
    }
    let routes = std::fs::read_to_string("/proc/self/net/route").unwrap_or_default();
    if routes.lines().skip(1).any(|l| !l.trim().is_empty()) {
        return unsupported("the new namespace has routes".into());
    }
    match std::net::TcpStream::connect(("127.0.0.1", 9)) {
        Err(e) if e.raw_os_error() == Some(nix::libc::ENETUNREACH) => ProbeResult {
            status: "enforced".into(),
            detail: "new user+network namespace: only a down loopback, no routes, connect() fails with ENETUNREACH".into(),
        },
        Err(e) => unsupported(format!("loopback connect failed unexpectedly: {e}")),
        Ok(_) => unsupported("loopback is reachable in the new namespace".into()),
    }
}

/// What the contained side of the descriptor, process and UNIX socket probes is told: a
/// descriptor number the parent left open, a host process id, and the host's sockets.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct IsolationProbe {
    /// The descriptor the parent left open (not close-on-exec) to a file outside.
    #[serde(default)]
    pub(crate) descriptor: Option<i32>,
    /// A host process (the parent) the program must neither see nor signal.
    #[serde(default)]
    pub(crate) host_pid: Option<i32>,
    /// A socket file the parent listens on.
    #[serde(default)]
    pub(crate) socket_path: Option<PathBuf>,
    /// An abstract socket name the parent listens on.
    #[serde(default)]
    pub(crate) abstract_name: Option<String>,
}

fn isolation_probe(spec: Option<&str>) -> Result<IsolationProbe, ProbeResult> {
    spec.map(serde_json::from_str::<IsolationProbe>)
        .and_then(Result::ok)
        .ok_or_else(|| unsupported("bad probe spec".into()))
}

/// Run as the contained program: writes through the descriptor the parent left open. Refused
/// (the descriptor is gone) proves the isolation; a write that lands is an escape.
fn probe_descriptors(spec: Option<&str>) -> ProbeResult {
    let fd = match isolation_probe(spec).map(|p| p.descriptor) {
        Ok(Some(fd)) => fd,
        Ok(None) => return unsupported("no descriptor to try".into()),
        Err(r) => return r,
    };
    let path = format!("/proc/self/fd/{fd}");
    let write = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(b"escaped through an inherited descriptor\n"));
    match write {
        Ok(()) => unsupported(format!(
            "a write through inherited descriptor {fd} succeeded"
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => ProbeResult {
            status: "enforced".into(),
            detail: format!(
                "descriptor {fd}, left open by the caller on a file outside, was closed before the program ran; writing through it failed: {e}"
            ),
        },
        Err(e) => unsupported(format!("descriptor {fd}: unexpected error {e}")),
    }
}

/// Run as the contained program (isolated): it must be PID 1 of its own namespace, see no host
/// process in `/proc`, and fail to signal the host process it was told about.
fn probe_processes(spec: Option<&str>) -> ProbeResult {
    let host = match isolation_probe(spec).map(|p| p.host_pid) {
        Ok(Some(pid)) => pid,
        Ok(None) => return unsupported("no host process to try".into()),
        Err(r) => return r,
    };
    let me = std::process::id();
    let visible: Vec<String> = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| {
                let name = e.ok()?.file_name().to_string_lossy().into_owned();
                name.bytes().all(|b| b.is_ascii_digit()).then_some(name)
            })
            .collect()
        })
        .unwrap_or_default();
    let seen = std::path::Path::new(&format!("/proc/{host}")).exists();
    let signal = nix::sys::signal::kill(nix::unistd::Pid::from_raw(host), None);
    match (me, seen, signal) {
        (1, false, Err(e)) => ProbeResult {
            status: "enforced".into(),
            detail: format!(
                "the program is PID 1 of its own PID namespace; /proc shows {} process(es) ({}), not host process {host}; kill({host}, 0) failed: {e}",
                visible.len(),
                visible.join(", ")
            ),
        },
        (_, _, Ok(())) => unsupported(format!("the program could signal host process {host}")),
        (_, true, _) => unsupported(format!("the program sees host process {host} in /proc")),
        (pid, ..) => unsupported(format!(
            "the program is PID {pid}, not PID 1 of a namespace"
        )),
    }
}

/// Run as the contained program (network off, UNIX sockets off): connecting to the host's
/// socket file and to its abstract socket must both fail.
fn probe_unix(spec: Option<&str>) -> ProbeResult {
    use std::os::linux::net::SocketAddrExt as _;
    use std::os::unix::net::{SocketAddr, UnixStream};
    let probe = match isolation_probe(spec) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let (Some(path), Some(name)) = (probe.socket_path, probe.abstract_name) else {
        return unsupported("no sockets to try".into());
    };
    let by_path = UnixStream::connect(&path);
    let by_name = SocketAddr::from_abstract_name(name.as_bytes())
        .and_then(|addr| UnixStream::connect_addr(&addr));
    match (by_path, by_name) {
        (Err(p), Err(n)) => ProbeResult {
            status: "enforced".into(),
            detail: format!(
                "connecting to the host's socket file failed ({p}) and to its abstract socket failed ({n})"
            ),
        },
        (Ok(_), _) => unsupported(format!(
            "connected to the host's socket file {}",
            path.display()
        )),
        (_, Ok(_)) => unsupported(format!("connected to the host's abstract socket @{name}")),
    }
}

/// Whether `path` is a file we can run as the helper.
pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
