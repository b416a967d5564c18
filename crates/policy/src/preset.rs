//! Presets (docs/design/policy.md#presets): named starting points a policy file builds on with
//! `preset = "…"`.
//!
//! A preset answers per tool class (read, edit, execute) what applies when no rule of the
//! policy decides a subject, and supplies the default unless a file sets one. Its class
//! answers are defaults, not rules: deny > ask > allow holds between rules, so if a preset's
//! "edit asks" were an ask rule, no file could ever allow `edit(src/**)` on top of `suggest`.
//! Only `safe` adds rules of its own, the deny rules of its table, as a trusted source named
//! `preset:safe` ranked below every other source, so a file's allow never beats them (a
//! trusted file can still carve one out, as it can any rule of a lower rank).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::decl::Decision;

/// The rank of a preset's own rules: below every source a person declares (the lowest
/// integer a canonical JSON number holds exactly).
pub const PRESET_RANK: i64 = -(1 << 53) + 1;

/// A named preset.
///
/// ```
/// use warden_policy::{Call, Decision, Format, LoadedPolicy, PathEnv, PolicySnapshot};
/// let file = LoadedPolicy::from_text(
///     "preset = \"suggest\"\nallow = [\"edit(src/**)\"]".into(),
///     Format::Toml, "p.toml", "project", None,
/// )?;
/// let env = PathEnv { project_root: "/repo".into(), home: None };
/// let policy = PolicySnapshot::from_files(&[file], env)?;
/// let decide = |tool: &str, args| policy.decide(&Call::new(tool, args)).decision;
/// assert_eq!(decide("read", serde_json::json!({"path": "/repo/a"})), Decision::Allow);
/// assert_eq!(decide("bash", serde_json::json!({"command": "make"})), Decision::Ask);
/// assert_eq!(decide("edit", serde_json::json!({"path": "/repo/README"})), Decision::Ask);
/// // The file's own allow applies on top of the preset.
/// assert_eq!(decide("edit", serde_json::json!({"path": "/repo/src/a.rs"})), Decision::Allow);
/// # Ok::<(), warden_policy::PolicyError>(())
/// ```
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    /// Reads (and read-only shell commands) run; edits and commands are denied; default deny.
    ReadOnly,
    /// Reads run; edits and commands ask; default ask.
    Suggest,
    /// Reads and edits run; commands ask; default ask.
    AutoEdit,
    /// Reads, edits and commands run; any other tool asks (default ask).
    FullAuto,
    /// Reads and edits run; commands ask; `rm`, `sudo`, `chmod`, `kill`, `mkfs` are denied;
    /// default deny.
    Safe,
    /// Everything runs; default allow.
    AllowAll,
    /// Nothing runs; default deny.
    DenyAll,
}

/// The class of a tool, as presets see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolClass {
    /// `read`, `list` and the search tools `grep`, `glob`.
    Read,
    /// `edit`, `write`.
    Edit,
    /// `bash`.
    Execute,
}

impl ToolClass {
    /// The class of a built-in tool name; `None` for any other tool (an MCP tool, a product's
    /// own), which presets leave to the default.
    pub fn of(tool: &str) -> Option<ToolClass> {
        match tool {
            "read" | "list" | "grep" | "glob" => Some(ToolClass::Read),
            "edit" | "write" => Some(ToolClass::Edit),
            "bash" => Some(ToolClass::Execute),
            _ => None,
        }
    }

    /// `read`, `edit` or `execute`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolClass::Read => "read",
            ToolClass::Edit => "edit",
            ToolClass::Execute => "execute",
        }
    }
}

impl Preset {
    /// Every preset, in the order of the preset table (docs/design/policy.md#presets).
    pub const ALL: [Preset; 7] = [
        Preset::ReadOnly,
        Preset::Suggest,
        Preset::AutoEdit,
        Preset::FullAuto,
        Preset::Safe,
        Preset::AllowAll,
        Preset::DenyAll,
    ];

    /// The name written in a policy file.
    pub fn name(self) -> &'static str {
        match self {
            Preset::ReadOnly => "read_only",
            Preset::Suggest => "suggest",
            Preset::AutoEdit => "auto_edit",
            Preset::FullAuto => "full_auto",
            Preset::Safe => "safe",
            Preset::AllowAll => "allow_all",
            Preset::DenyAll => "deny_all",
        }
    }

    /// The default the preset supplies when no file sets one.
    pub fn default_decision(self) -> Decision {
        match self {
            Preset::ReadOnly | Preset::Safe | Preset::DenyAll => Decision::Deny,
            Preset::Suggest | Preset::AutoEdit | Preset::FullAuto => Decision::Ask,
            Preset::AllowAll => Decision::Allow,
        }
    }

    /// What the preset answers for a subject of `class` that no rule decided; `None` leaves
    /// it to the default. `read_only` is whether a shell command is a known read-only
    /// (program, flags) pair, which `read_only` lets run as a read.
    pub fn class_decision(self, class: Option<ToolClass>, read_only: bool) -> Option<Decision> {
        use Decision::{Allow, Ask, Deny};
        let class = match (self, class) {
            (Preset::ReadOnly, Some(ToolClass::Execute)) if read_only => ToolClass::Read,
            (Preset::AllowAll, _) => return Some(Allow),
            (Preset::DenyAll, _) => return Some(Deny),
            (_, Some(class)) => class,
            (_, None) => return None,
        };
        Some(match (self, class) {
            (_, ToolClass::Read) => Allow,
            (Preset::ReadOnly, _) => Deny,
            (Preset::Suggest, _) => Ask,
            (Preset::AutoEdit | Preset::Safe, ToolClass::Edit) => Allow,
            (Preset::AutoEdit | Preset::Safe, ToolClass::Execute) => Ask,
            (Preset::FullAuto, _) => Allow,
            (Preset::AllowAll, _) => Allow,
            (Preset::DenyAll, _) => Deny,
        })
    }

    /// The deny rules the preset adds (only `safe` has any).
    pub fn deny_rules(self) -> &'static [&'static str] {
        match self {
            Preset::Safe => &[
                "bash(rm:*)",
                "bash(sudo:*)",
                "bash(chmod:*)",
                "bash(kill:*)",
                "bash(mkfs:*)",
            ],
            _ => &[],
        }
    }

    /// The name of the source its deny rules come from.
    pub fn source_name(self) -> String {
        format!("preset:{}", self.name())
    }
}

impl std::fmt::Display for Preset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Preset {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Preset::ALL.iter().map(|p| p.name()).collect();
                format!("unknown preset `{s}` (one of: {})", names.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Decision::{Allow, Ask, Deny};

    /// The preset table (docs/design/policy.md#presets), row by row: (read, edit, execute, other
    /// tool, default).
    #[test]
    fn the_table() {
        let rows = [
            (Preset::ReadOnly, [Allow, Deny, Deny], None, Deny),
            (Preset::Suggest, [Allow, Ask, Ask], None, Ask),
            (Preset::AutoEdit, [Allow, Allow, Ask], None, Ask),
            (Preset::FullAuto, [Allow, Allow, Allow], None, Ask),
            (Preset::Safe, [Allow, Allow, Ask], None, Deny),
            (Preset::AllowAll, [Allow, Allow, Allow], Some(Allow), Allow),
            (Preset::DenyAll, [Deny, Deny, Deny], Some(Deny), Deny),
        ];
        for (preset, classes, other, default) in rows {
            let got = [ToolClass::Read, ToolClass::Edit, ToolClass::Execute]
                .map(|c| preset.class_decision(Some(c), false).unwrap());
            assert_eq!(got, classes, "{preset}");
            assert_eq!(preset.class_decision(None, false), other, "{preset}");
            assert_eq!(preset.default_decision(), default, "{preset}");
            assert_eq!(preset.name().parse::<Preset>(), Ok(preset));
        }
        // Only read_only lets a read-only command run as a read.
        assert_eq!(
            Preset::ReadOnly.class_decision(Some(ToolClass::Execute), true),
            Some(Allow)
        );
        assert_eq!(
            Preset::Suggest.class_decision(Some(ToolClass::Execute), true),
            Some(Ask)
        );
        assert!("Suggest".parse::<Preset>().is_err());
    }
}
