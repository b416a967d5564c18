//! Operating modes (docs/design/policy.md#operating-modes): layers that can only narrow.
//!
//! A mode caps what a subject may get, by what it does (its [`EffectiveHints`] and tool class):
//!
//! | mode | may run (as the policy decides) | capped |
//! |---|---|---|
//! | `audit_only` | local reads | everything else denied |
//! | `plan_only` | reads, local or open-world | everything else denied |
//! | `draft_only` | reads, edits of files | commands that are not read-only, other effects denied |
//! | `verify_only` | reads, commands (checks, tests) | edits and other effects denied |
//! | `apply_safe` | reads, edits, commands: local effects | open-world and other tools' effects denied |
//! | `apply_approved` | everything local and read-only | destructive or open-world calls ask, and only an approval receipt answers |
//!
//! The effective decision is the strictest of the policy's and every active mode's cap (the
//! intersection of authorities): a mode never widens, whatever the policy allows. The reason
//! names the mode that narrowed.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::decl::Decision;
use crate::hints::EffectiveHints;
use crate::preset::ToolClass;

/// One operating mode.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Local reads only.
    AuditOnly,
    /// Reads only, local or open-world (research for a plan).
    PlanOnly,
    /// Reads and local file edits; nothing runs, nothing leaves.
    DraftOnly,
    /// Reads and commands (checks, tests); no edits.
    VerifyOnly,
    /// Reversible, local effects: reads, edits and commands; nothing open-world.
    ApplySafe,
    /// Consequential or external effects, each with an approval receipt.
    ApplyApproved,
}

/// The `[modes]` table: the modes in force, all of which apply.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Modes {
    /// The active modes (their intersection applies).
    pub active: Vec<Mode>,
}

/// What a mode lets a subject get at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cap {
    /// The policy decides.
    Open,
    /// At most ask, answered only by an approval receipt.
    Receipt,
    /// Denied.
    Closed,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 6] = [
        Mode::AuditOnly,
        Mode::PlanOnly,
        Mode::DraftOnly,
        Mode::VerifyOnly,
        Mode::ApplySafe,
        Mode::ApplyApproved,
    ];

    /// The name written in a policy file.
    pub fn name(self) -> &'static str {
        match self {
            Mode::AuditOnly => "audit_only",
            Mode::PlanOnly => "plan_only",
            Mode::DraftOnly => "draft_only",
            Mode::VerifyOnly => "verify_only",
            Mode::ApplySafe => "apply_safe",
            Mode::ApplyApproved => "apply_approved",
        }
    }

    /// The cap for a subject of `class` (None: not a built-in tool) with `hints`.
    pub(crate) fn cap(self, class: Option<ToolClass>, hints: &EffectiveHints) -> Cap {
        let read = hints.read_only;
        let local = !hints.open_world;
        let open_if = |ok: bool| if ok { Cap::Open } else { Cap::Closed };
        match self {
            Mode::AuditOnly => open_if(read && local),
            Mode::PlanOnly => open_if(read),
            Mode::DraftOnly => open_if(read || class == Some(ToolClass::Edit)),
            Mode::VerifyOnly => open_if(read || class == Some(ToolClass::Execute)),
            Mode::ApplySafe => open_if(match class {
                Some(ToolClass::Edit | ToolClass::Execute) => true,
                _ => read && local,
            }),
            Mode::ApplyApproved => {
                if !hints.destructive && local {
                    Cap::Open
                } else {
                    Cap::Receipt
                }
            }
        }
    }

    /// The decision a cap allows at most.
    pub(crate) fn ceiling(cap: Cap) -> Decision {
        match cap {
            Cap::Open => Decision::Allow,
            Cap::Receipt => Decision::Ask,
            Cap::Closed => Decision::Deny,
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hints(read_only: bool, open_world: bool) -> EffectiveHints {
        crate::hints::declared(Some(read_only), None, None, Some(open_world))
            .unwrap_or_else(|_| crate::hints::cautious())
    }

    /// The module's table, row by row.
    #[test]
    fn caps_follow_the_table() {
        use Cap::{Closed as C, Open as O, Receipt as R};
        let local_read = (Some(ToolClass::Read), hints(true, false));
        let web_read = (None, hints(true, true));
        let edit = (Some(ToolClass::Edit), hints(false, false));
        let command = (Some(ToolClass::Execute), hints(false, true));
        let mcp_write = (None, hints(false, true));
        let rows = [
            (Mode::AuditOnly, [O, C, C, C, C]),
            (Mode::PlanOnly, [O, O, C, C, C]),
            (Mode::DraftOnly, [O, O, O, C, C]),
            (Mode::VerifyOnly, [O, O, C, O, C]),
            (Mode::ApplySafe, [O, C, O, O, C]),
            (Mode::ApplyApproved, [O, R, R, R, R]),
        ];
        for (mode, want) in rows {
            let got =
                [local_read, web_read, edit, command, mcp_write].map(|(c, h)| mode.cap(c, &h));
            assert_eq!(got, want, "{mode}");
        }
    }
}
