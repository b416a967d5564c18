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

/// `argv[1]` that runs a contained program: `<helper> __warden-sandbox-exec <spec json>`.
pub const EXEC_MODE: &str = "__warden-sandbox-exec";
/// `argv[1]` that runs one probe: `<helper> __warden-sandbox-probe <probe> [json]`.
pub const PROBE_MODE: &str = "__warden-sandbox-probe";
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
        Some(EXEC_MODE) => Some(exec_mode(args.get(1).map(String::as_str))),
        Some(PROBE_MODE) => Some(probe_mode(&args[1..])),
        _ => None,
    }
}

fn fail(e: &SandboxError) -> i32 {
    let _ = writeln!(std::io::stderr(), "warden-sandbox: {e}");
    CONFINE_FAILED
}

fn exec_mode(spec: Option<&str>) -> i32 {
    let spec: SandboxSpec = match spec.map(serde_json::from_str) {
        Some(Ok(s)) => s,
        Some(Err(e)) => return fail(&SandboxError::Helper(format!("bad spec: {e}"))),
        None => return fail(&SandboxError::Helper("missing spec".into())),
    };
    if let Err(e) = confine_self(&spec) {
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
    if !spec.network {
        confine::enter_network_namespace()?;
    }
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

fn unsupported(detail: String) -> ProbeResult {
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

/// Whether `path` is a file we can run as the helper.
pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
