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
use crate::spec::ResourceLimits;

/// The newest Landlock ABI this build knows; the kernel may support less (best effort, then
/// checked: anything short of full enforcement of what we asked is reported).
const ABI_TARGET: ABI = ABI::V5;

/// Moves the process into a new user and network namespace: no interface but a down loopback.
pub(crate) fn enter_network_namespace() -> Result<(), SandboxError> {
    unshare_as_self(
        CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET,
        "user+net",
    )
}

/// Unshares the namespaces `flags` names (`what`, in an error), a new user namespace among
/// them, and maps this process's own ids into it so files it creates keep their owner.
fn unshare_as_self(flags: CloneFlags, what: &str) -> Result<(), SandboxError> {
    // Read before the unshare: inside the new user namespace they are unmapped until then.
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    nix::sched::unshare(flags)
        .map_err(|e| SandboxError::Confine(format!("unshare({what}): {e}")))?;
    write_proc("/proc/self/setgroups", "deny")?;
    write_proc("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
    write_proc("/proc/self/gid_map", &format!("{gid} {gid} 1"))?;
    Ok(())
}

fn write_proc(path: &str, text: &str) -> Result<(), SandboxError> {
    std::fs::write(path, text).map_err(|e| SandboxError::Confine(format!("{path}: {e}")))
}

/// Applies the resource limits.
pub(crate) fn apply_limits(limits: &ResourceLimits) -> Result<(), SandboxError> {
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

/// Closes every descriptor but standard input, output and error: whatever the caller left open
/// (`exec 7>>/outside/file` before `warden exec`) must not reach the program. The numbers are
/// read from `/proc/self/fd` first, then closed (the listing's own descriptor is closed by
/// then).
pub(crate) fn close_inherited_descriptors() -> Result<(), SandboxError> {
    let listed: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map_err(|e| SandboxError::Confine(format!("/proc/self/fd: {e}")))?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in listed {
        match nix::unistd::close(fd) {
            // The listing's own descriptor, already closed.
            Ok(()) | Err(nix::errno::Errno::EBADF) => {}
            Err(e) => return Err(SandboxError::Confine(format!("close({fd}): {e}"))),
        }
    }
    Ok(())
}

/// Moves the process into a new user, mount and PID namespace (and network namespace when
/// `network_off`); its next child is PID 1 of the new PID namespace.
pub(crate) fn enter_process_namespaces(network_off: bool) -> Result<(), SandboxError> {
    let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID;
    if network_off {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare_as_self(flags, "user+mount+pid")
}

/// Asks the kernel to kill this process (`SIGKILL`) when the one that started it dies
/// (`PR_SET_PDEATHSIG`), then checks that it has not died already: a parent gone before the
/// request leaves the process to a reaper, and no signal would ever come. `parent` is the
/// parent's process id as the caller passed it (`None`: not passed, nothing to check against).
pub(crate) fn die_with_parent(parent: Option<i32>) -> Result<(), SandboxError> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(|e| SandboxError::Confine(format!("prctl(PDEATHSIG): {e}")))?;
    match parent {
        Some(expected) if nix::unistd::getppid().as_raw() != expected => {
            Err(SandboxError::Confine(format!(
                "the process that started this one ({expected}) is gone"
            )))
        }
        _ => Ok(()),
    }
}

/// The parent's process id as the host's `/proc` (still mounted) shows it. Inside a new PID
/// namespace `getppid()` answers 0 for its PID 1, whose parent is outside; the host's `/proc`
/// numbers processes in the host's namespace.
fn host_parent_pid() -> Result<i32, SandboxError> {
    let stat = std::fs::read_to_string("/proc/self/stat")
        .map_err(|e| SandboxError::Confine(format!("/proc/self/stat: {e}")))?;
    // `pid (comm) state ppid …`; the name may hold spaces and parentheses.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
        .and_then(|ppid| ppid.parse().ok())
        .ok_or_else(|| SandboxError::Confine(format!("/proc/self/stat: cannot read {stat:?}")))
}

/// In the new PID namespace (as its PID 1): dies with the process that started it (the first
/// stage, host process `first_stage`), and mounts a `/proc` of this namespace over the host's,
/// so no host process is visible. Mounts are made private first, so nothing propagates back to
/// the host.
pub(crate) fn become_namespace_init(first_stage: Option<i32>) -> Result<(), SandboxError> {
    use nix::mount::{MsFlags, mount};
    die_with_parent(None)?;
    if let Some(expected) = first_stage {
        let parent = host_parent_pid()?;
        if parent != expected {
            return Err(SandboxError::Confine(format!(
                "the first stage ({expected}) is gone (parent now {parent})"
            )));
        }
    }
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| SandboxError::Confine(format!("mount(/, private): {e}")))?;
    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| SandboxError::Confine(format!("mount(/proc): {e}")))?;
    Ok(())
}

/// Refuses, for this process and everything it starts, to create a UNIX socket (`socket(2)`
/// with `AF_UNIX`; `socketpair(2)` stays allowed, its ends reach nothing else) or an io_uring
/// (whose operations could create one): `EACCES`. Any other architecture's system calls kill
/// the process (seccompiler checks the architecture first).
pub(crate) fn block_unix_sockets() -> Result<(), SandboxError> {
    use std::collections::BTreeMap;

    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let err = |e: &dyn std::fmt::Display| SandboxError::Confine(format!("seccomp: {e}"));
    let arch: TargetArch = std::env::consts::ARCH.try_into().map_err(|e| err(&e))?;
    let af_unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        nix::libc::AF_UNIX as u64,
    )
    .map_err(|e| err(&e))?;
    let unix_socket = SeccompRule::new(vec![af_unix]).map_err(|e| err(&e))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in system_call_numbers(nix::libc::SYS_socket) {
        rules.insert(nr, vec![unix_socket.clone()]);
    }
    for nr in system_call_numbers(nix::libc::SYS_io_uring_setup) {
        rules.insert(nr, Vec::new()); // refused whatever its arguments
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(nix::libc::EACCES as u32),
        arch,
    )
    .map_err(|e| err(&e))?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| err(&e))?;
    seccompiler::apply_filter(&program).map_err(|e| err(&e))
}

/// A system call's numbers: on x86-64 also its x32-ABI number, which the same architecture
/// check lets through.
fn system_call_numbers(nr: nix::libc::c_long) -> Vec<i64> {
    const X32_SYSCALL_BIT: i64 = 0x4000_0000;
    // `c_long` is 32 bits on some targets, 64 on this one.
    #[allow(clippy::useless_conversion)]
    let nr = i64::from(nr);
    if cfg!(target_arch = "x86_64") {
        vec![nr, nr | X32_SYSCALL_BIT]
    } else {
        vec![nr]
    }
}
