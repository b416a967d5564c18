//! What the parent asks the re-exec helper to do: one process, fully described, serialized as
//! JSON on the helper's command line. The helper trusts nothing else (its own environment is
//! discarded before `exec`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Resource limits the helper applies with `setrlimit` before `exec`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceLimits {
    /// CPU seconds (`RLIMIT_CPU`).
    #[serde(default)]
    pub cpu_seconds: Option<u64>,
    /// Processes for the user (`RLIMIT_NPROC`).
    #[serde(default)]
    pub max_processes: Option<u64>,
    /// Largest file the process may write (`RLIMIT_FSIZE`), in bytes.
    #[serde(default)]
    pub max_file_bytes: Option<u64>,
}

/// One contained process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSpec {
    /// The program (a path, or a name looked up in `PATH` from `env`).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Its whole environment (already reduced to the allowlist by the parent).
    pub env: BTreeMap<String, String>,
    /// Directories it may write under. Landlock denies every other write.
    pub write_roots: Vec<PathBuf>,
    /// Directories it may read under; `None` reads everywhere.
    pub read_roots: Option<Vec<PathBuf>>,
    /// Whether it keeps the network. `false` puts it in a fresh user + network namespace.
    pub network: bool,
    /// Whether to apply Landlock at all (off only for a backend that proved it unsupported and a
    /// policy that made it optional).
    pub landlock: bool,
    /// Resource limits.
    pub limits: ResourceLimits,
    /// Whether it gets processes of its own: a fresh user, mount and PID namespace where it is
    /// PID 1 with its own `/proc`, so it can neither see nor signal the host's processes, and
    /// everything it starts ends with it.
    #[serde(default)]
    pub isolate_processes: bool,
    /// Whether the host's UNIX sockets are out of reach: a seccomp filter refuses to create a
    /// UNIX socket (a socket pair stays allowed) or an io_uring (which could create one).
    /// Used with `network: false`, whose namespace also hides abstract sockets.
    #[serde(default)]
    pub unix_sockets_off: bool,
}
