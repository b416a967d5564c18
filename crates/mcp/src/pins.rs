//! Pinning tool definitions against rug pulls: every definition a server offers (name, title,
//! description, input and output schemas, annotations) is pinned by digest on first sight, or
//! quarantined until approved when the policy sets `require_pin_approval`. A definition that
//! changes later is quarantined until `warden mcp pin` approves the new one, and a description
//! that trips one of the policy's `[guards]` deny patterns (hidden instructions, tool
//! poisoning) is quarantined whatever its pin says.
//!
//! The pins file is JSON (`{"version": 1, "pins": {"server__tool": "blake3:…"}}`), read whole
//! and written atomically (a temporary file renamed over it). A corrupt or foreign file is an
//! error, never an empty set of pins: an empty set would quietly re-pin whatever the servers
//! offer now.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use warden_contracts::Digest;
use warden_policy::GuardSet;

/// The pins file format this version reads and writes.
pub const PINS_VERSION: u32 = 1;

/// One tool definition as a server offered it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDefinition {
    /// The server's name (from the policy).
    pub server: String,
    /// The tool's name on the server.
    pub name: String,
    /// The whole definition object the server sent (`name`, `description`, `inputSchema`, …).
    pub raw: Value,
}

impl ToolDefinition {
    /// The name Warden knows it by: `{server}__{tool}`.
    pub fn qualified(&self) -> String {
        format!("{}__{}", self.server, self.name)
    }

    /// The digest of what a client is shown and what the server is called with: name, title,
    /// description, input and output schemas, annotations (canonical JSON, so key order and
    /// spacing do not count).
    pub fn digest(&self) -> Digest {
        let pick = |k: &str| self.raw.get(k).cloned().unwrap_or(Value::Null);
        let pinned = json!({
            "name": self.name,
            "title": pick("title"),
            "description": pick("description"),
            "inputSchema": pick("inputSchema"),
            "outputSchema": pick("outputSchema"),
            "annotations": pick("annotations"),
        });
        Digest::of_json(&pinned).unwrap_or_else(|_| Digest::of_bytes(pinned.to_string().as_bytes()))
    }

    /// Its description, if it has one.
    pub fn description(&self) -> Option<&str> {
        self.raw.get("description").and_then(Value::as_str)
    }
}

/// What the pins say about one definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinState {
    /// Pinned, and unchanged: offered.
    Pinned,
    /// Seen for the first time and pinned now (the policy does not require approval).
    PinnedNow,
    /// Quarantined: not offered, and a call to it is refused without reaching the server.
    Quarantined(Quarantine),
}

/// Why a definition is quarantined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Quarantine {
    /// Never seen, and the policy requires approval of new definitions.
    New,
    /// It differs from the pinned definition (a rug pull, or an update to review).
    Changed {
        /// The digest that was pinned.
        pinned: String,
    },
    /// Its description trips a deny pattern of the policy's guards.
    Poisoned {
        /// The guard's reason.
        reason: String,
    },
}

impl std::fmt::Display for Quarantine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::New => f.write_str(
                "a new definition, quarantined until approved (`warden mcp pin`), since the policy sets require_pin_approval",
            ),
            Self::Changed { pinned } => write!(
                f,
                "its definition changed since it was pinned ({pinned}); approve the new one with `warden mcp pin`"
            ),
            Self::Poisoned { reason } => {
                write!(f, "its description trips the policy's guards: {reason}")
            }
        }
    }
}

/// Why the pins file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PinsError {
    /// It could not be read or written.
    #[error("pins file {path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// It is not a pins file this version reads.
    #[error("pins file {path} is not a Warden pins file (version {PINS_VERSION}): {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PinsFile {
    version: u32,
    pins: BTreeMap<String, String>,
}

/// The pinned definitions, by `{server}__{tool}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pins {
    path: PathBuf,
    pins: BTreeMap<String, String>,
    changed: bool,
}

impl Pins {
    /// Reads the pins file at `path`; a missing file is no pins yet.
    pub fn load(path: &Path) -> Result<Self, PinsError> {
        let pins = match std::fs::read_to_string(path) {
            Ok(text) => {
                let file: PinsFile =
                    serde_json::from_str(&text).map_err(|e| PinsError::Invalid {
                        path: path.to_owned(),
                        message: e.to_string(),
                    })?;
                if file.version != PINS_VERSION {
                    return Err(PinsError::Invalid {
                        path: path.to_owned(),
                        message: format!("version {}", file.version),
                    });
                }
                file.pins
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => {
                return Err(PinsError::Io {
                    path: path.to_owned(),
                    message: e.to_string(),
                });
            }
        };
        Ok(Self {
            path: path.to_owned(),
            pins,
            changed: false,
        })
    }

    /// Where the pins are kept.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The digest pinned for `qualified`, if any.
    pub fn get(&self, qualified: &str) -> Option<&str> {
        self.pins.get(qualified).map(String::as_str)
    }

    /// Decides what to do with a definition a server offers: checks its description against
    /// `guards`, compares it with its pin, and pins it on first sight unless
    /// `require_approval`.
    pub fn check(
        &mut self,
        def: &ToolDefinition,
        guards: &GuardSet,
        require_approval: bool,
    ) -> PinState {
        if let Some(description) = def.description()
            && let warden_policy::GuardOutcome::Blocked { reason, .. } =
                guards.check_text(description)
        {
            return PinState::Quarantined(Quarantine::Poisoned { reason });
        }
        let digest = def.digest().to_string();
        match self.pins.get(&def.qualified()) {
            Some(pinned) if *pinned == digest => PinState::Pinned,
            Some(pinned) => PinState::Quarantined(Quarantine::Changed {
                pinned: pinned.clone(),
            }),
            None if require_approval => PinState::Quarantined(Quarantine::New),
            None => {
                self.pins.insert(def.qualified(), digest);
                self.changed = true;
                PinState::PinnedNow
            }
        }
    }

    /// Approves `def` as it is now (`warden mcp pin`).
    pub fn approve(&mut self, def: &ToolDefinition) {
        let digest = def.digest().to_string();
        if self.pins.insert(def.qualified(), digest.clone()) != Some(digest) {
            self.changed = true;
        }
    }

    /// Writes the pins if they changed: to a temporary file beside the target, then renamed
    /// over it, so a reader sees the old pins or the new ones, never half of either.
    pub fn save(&mut self) -> Result<(), PinsError> {
        if !self.changed {
            return Ok(());
        }
        let io = |e: std::io::Error| PinsError::Io {
            path: self.path.clone(),
            message: e.to_string(),
        };
        let text = serde_json::to_string_pretty(&PinsFile {
            version: PINS_VERSION,
            pins: self.pins.clone(),
        })
        .map_err(|e| PinsError::Io {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut tmp = self.path.as_os_str().to_owned();
        tmp.push(format!(".tmp{}", std::process::id()));
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, text + "\n").map_err(io)?;
        std::fs::rename(&tmp, &self.path).map_err(io)?;
        self.changed = false;
        Ok(())
    }
}
