//! What an effect backend can prove: capability reports, and the process it is asked to run.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::scope::BackendRef;

/// A containment mechanism a backend may enforce. Namespaced by meaning, versioned by this
/// crate's version.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// Writes only under declared write roots.
    FilesystemWriteRoots,
    /// Reads only under declared read roots.
    FilesystemReadRoots,
    /// No network (no interface but a down loopback).
    NetworkOff,
    /// The environment is cleared to an allowlist.
    EnvAllowlist,
    /// Wall time, CPU, output and process limits.
    ResourceLimits,
    /// The tool runs in processes of its own that can neither see nor signal any other process
    /// of the host (its own PID namespace and `/proc`), and that all end when it ends.
    ProcessIsolation,
    /// The process inherits no descriptor but its standard input, output and error (none its
    /// caller left open, such as a file outside the write roots).
    DescriptorIsolation,
    /// No UNIX socket of the host can be reached: neither a socket file (a container engine's,
    /// an SSH agent's) nor an abstract one. Asked for together with [`Capability::NetworkOff`].
    UnixSocketsOff,
}

impl Capability {
    /// Every capability, in declaration order.
    pub const ALL: [Capability; 8] = [
        Self::FilesystemWriteRoots,
        Self::FilesystemReadRoots,
        Self::NetworkOff,
        Self::EnvAllowlist,
        Self::ResourceLimits,
        Self::ProcessIsolation,
        Self::DescriptorIsolation,
        Self::UnixSocketsOff,
    ];
}

/// Whether a capability holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CapabilityStatus {
    /// Enforced, and proven by a probe on this machine.
    Enforced,
    /// Partly enforced; `detail` says what is missing.
    Degraded,
    /// Not enforced (or its probe failed): never assumed.
    Unsupported,
}

/// One capability's status and how it was established.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilityEntry {
    /// The capability.
    pub capability: Capability,
    /// Its status.
    pub status: CapabilityStatus,
    /// How the status was established (the probe and its result) or why it is missing.
    pub detail: String,
}

/// A backend's honest report: every capability it was asked about, exactly once.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilityReport {
    /// The backend.
    pub backend: BackendRef,
    /// One entry per capability.
    pub entries: Vec<CapabilityEntry>,
}

impl CapabilityReport {
    /// The status of `capability`; a capability the report does not mention is unsupported.
    pub fn status(&self, capability: Capability) -> CapabilityStatus {
        self.entries
            .iter()
            .find(|e| e.capability == capability)
            .map_or(CapabilityStatus::Unsupported, |e| e.status)
    }
}

/// A process an effect backend is asked to run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessSpec {
    /// The program (a path or a name looked up in the allowed `PATH`).
    pub program: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// The working directory.
    pub cwd: String,
    /// Names of environment variables passed through from the backend's environment.
    #[serde(default)]
    pub env_allowlist: Vec<String>,
    /// Environment variables set explicitly (never secrets: those are resolved by the backend).
    #[serde(default)]
    pub env_set: BTreeMap<String, String>,
    /// Standard input, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    /// Directories the process may write under.
    #[serde(default)]
    pub write_roots: Vec<String>,
    /// Directories the process may read under (`None`: everywhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_roots: Option<Vec<String>>,
    /// Whether the process may use the network.
    #[serde(default)]
    pub network: bool,
    /// Wall-time limit in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Limit on captured output, in bytes (stdout and stderr each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<u64>,
    /// Containment the caller accepts running without when the backend has not proven it (the
    /// policy made it optional). Anything not listed is required: the backend refuses to run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degradable: Vec<Capability>,
}

/// What a process did.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessOutput {
    /// The exit code, if it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Captured standard output (lossy UTF-8).
    pub stdout: String,
    /// Captured standard error (lossy UTF-8).
    pub stderr: String,
    /// Whether output was cut at the limit.
    #[serde(default)]
    pub truncated: bool,
    /// Whether the wall-time limit ended it.
    #[serde(default)]
    pub timed_out: bool,
}
