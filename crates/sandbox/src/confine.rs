//! The confinement steps the helper applies to itself, in a fresh single-threaded process,
//! before `exec`: network namespace, resource limits, Landlock. Each step fails closed: an
//! error stops the helper before the program runs.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, path_beneath_rules,
};
use nix::sched::CloneFlags;
use nix::sys::resource::{Resource, setrlimit};

use crate::error::SandboxError;
use crate::spec::Limits;

/// The newest Landlock ABI this build knows; the kernel may support less (best effort, then
/// checked: anything short of full enforcement of what we asked is reported).
const ABI_TARGET: ABI = ABI::V5;

/// Moves the process into a new user and network namespace: no interface but a down loopback.
pub(crate) fn enter_network_namespace() -> Result<(), SandboxError> {
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    nix::sched::unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET)
        .map_err(|e| SandboxError::Confine(format!("unshare(user+net): {e}")))?;
    // Map our own ids so files we create keep their owner.
    write_proc("/proc/self/setgroups", "deny")?;
    write_proc("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
    write_proc("/proc/self/gid_map", &format!("{gid} {gid} 1"))?;
    Ok(())
}

fn write_proc(path: &str, text: &str) -> Result<(), SandboxError> {
    std::fs::write(path, text).map_err(|e| SandboxError::Confine(format!("{path}: {e}")))
}

/// Applies the resource limits.
pub(crate) fn apply_limits(limits: &Limits) -> Result<(), SandboxError> {
    let set = |resource, value: Option<u64>, name: &str| match value {
        Some(v) => setrlimit(resource, v, v)
            .map_err(|e| SandboxError::Confine(format!("setrlimit({name}): {e}"))),
        None => Ok(()),
    };
    set(Resource::RLIMIT_CPU, limits.cpu_seconds, "RLIMIT_CPU")?;
    set(Resource::RLIMIT_NPROC, limits.max_processes, "RLIMIT_NPROC")?;
    set(
        Resource::RLIMIT_FSIZE,
        limits.max_file_bytes,
        "RLIMIT_FSIZE",
    )?;
    Ok(())
}

/// How completely Landlock was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LandlockOutcome {
    /// Every requested restriction is enforced by the kernel.
    Full,
    /// Some restrictions are enforced, not all (an older kernel ABI).
    Partial,
}

/// Restricts the process: writes only under `write_roots`, reads only under `read_roots` (or
/// everywhere). Returns how fully the kernel enforces it; not enforced at all is an error.
pub(crate) fn apply_landlock(
    write_roots: &[PathBuf],
    read_roots: Option<&[PathBuf]>,
) -> Result<LandlockOutcome, SandboxError> {
    let err = |e: landlock::RulesetError| SandboxError::Confine(format!("landlock: {e}"));
    let all = AccessFs::from_all(ABI_TARGET);
    let read = AccessFs::from_read(ABI_TARGET);
    let everywhere = [PathBuf::from("/")];
    let readable: &[PathBuf] = read_roots.unwrap_or(&everywhere);
    // Devices every program expects to write; they reach no file.
    let devices: Vec<&Path> = ["/dev/null", "/dev/zero", "/dev/tty"]
        .iter()
        .map(Path::new)
        .filter(|p| p.exists())
        .collect();
    let existing = |roots: &[PathBuf]| -> Vec<PathBuf> {
        roots.iter().filter(|p| p.exists()).cloned().collect()
    };
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(err)?
        .create()
        .map_err(err)?
        .add_rules(path_beneath_rules(existing(readable), read))
        .map_err(err)?
        .add_rules(path_beneath_rules(existing(write_roots), all))
        .map_err(err)?
        .add_rules(path_beneath_rules(
            devices,
            AccessFs::ReadFile | AccessFs::WriteFile,
        ))
        .map_err(err)?
        .restrict_self()
        .map_err(err)?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(LandlockOutcome::Full),
        RulesetStatus::PartiallyEnforced => Ok(LandlockOutcome::Partial),
        RulesetStatus::NotEnforced => Err(SandboxError::Confine(
            "landlock: the kernel does not enforce any restriction".into(),
        )),
    }
}
