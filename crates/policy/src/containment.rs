//! The `[containment]` table: what a tool process must be confined to, and how strictly.
//!
//! ```toml
//! [containment]
//! write_roots = "required"      # writes only under the workspace (Landlock)
//! network_off = "required"      # no network (user + network namespace); "allowed" turns it off
//! env_allowlist = "required"    # the environment is cleared to `env`
//! env = ["PATH", "HOME", "LANG", "TERM"]
//! process_isolation = "required" # its own processes (it can neither see nor signal the
//!                                # host's) and no descriptor but its standard streams
//! ```
//!
//! With the network off, no UNIX socket of the host (a socket file or an abstract one) can be
//! reached either: `network_off` asks for both.
//!
//! `required` means a backend that has not proven the mechanism refuses the call before it
//! starts; `optional` means the call proceeds and the degradation is recorded on the outcome.
//! Every key defaults to the strict value, so an absent table asks for full containment.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How strictly one mechanism is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Requirement {
    /// Not proven → the call is denied before it starts.
    Required,
    /// Not proven → the call runs, and the outcome records the degradation.
    Optional,
}

/// Whether the network is cut, and how strictly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NetworkRequirement {
    /// The network must be off; not proven → denied.
    Required,
    /// The network should be off; not proven → runs, degradation recorded.
    Optional,
    /// The process keeps the network.
    Allowed,
}

/// The variables kept by default.
pub const DEFAULT_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "TERM"];

fn default_env() -> Vec<String> {
    DEFAULT_ENV.iter().map(|s| (*s).to_owned()).collect()
}

fn required() -> Requirement {
    Requirement::Required
}

fn network_required() -> NetworkRequirement {
    NetworkRequirement::Required
}

/// The `[containment]` table; every key defaults to the strict value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Containment {
    /// Writes only under the workspace.
    #[serde(default = "required")]
    pub write_roots: Requirement,
    /// The network off.
    #[serde(default = "network_required")]
    pub network_off: NetworkRequirement,
    /// The environment cleared to `env`.
    #[serde(default = "required")]
    pub env_allowlist: Requirement,
    /// The variables kept.
    #[serde(default = "default_env")]
    pub env: Vec<String>,
    /// Processes of its own (a PID namespace and its own `/proc`): it cannot see or signal any
    /// other process, nothing it starts outlives it, and it inherits no descriptor but its
    /// standard streams.
    #[serde(default = "required")]
    pub process_isolation: Requirement,
}

impl Default for Containment {
    fn default() -> Self {
        Self {
            write_roots: Requirement::Required,
            network_off: NetworkRequirement::Required,
            env_allowlist: Requirement::Required,
            env: default_env(),
            process_isolation: Requirement::Required,
        }
    }
}

impl Requirement {
    fn strictest(self, other: Self) -> Self {
        if self == Self::Required || other == Self::Required {
            Self::Required
        } else {
            Self::Optional
        }
    }
}

impl NetworkRequirement {
    fn rank(self) -> u8 {
        match self {
            Self::Allowed => 0,
            Self::Optional => 1,
            Self::Required => 2,
        }
    }
}

impl Containment {
    /// The stricter of two tables: each mechanism's stricter requirement, and only the
    /// variables both keep.
    pub fn strictest(&self, other: &Self) -> Self {
        Self {
            write_roots: self.write_roots.strictest(other.write_roots),
            network_off: if self.network_off.rank() >= other.network_off.rank() {
                self.network_off
            } else {
                other.network_off
            },
            env_allowlist: self.env_allowlist.strictest(other.env_allowlist),
            env: self
                .env
                .iter()
                .filter(|v| other.env.contains(v))
                .cloned()
                .collect(),
            process_isolation: self.process_isolation.strictest(other.process_isolation),
        }
    }
}
