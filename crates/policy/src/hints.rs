//! Hint rules: decisions by what a call does rather than by its name.
//!
//! Every subject has [`EffectiveHints`] (alpineagents' four: read-only, destructive, idempotent,
//! open-world). Built-in tools give them (`read`, `list`, `grep`, `glob` read; `edit`,
//! `write` change files; `web_fetch` reads the open world); a `bash` subject is read-only only
//! when the shell splitter knows its (program, flags) pair as read-only (`find -delete`,
//! `sed -i`, `rg --pre` are not); any other tool's hints come with the call
//! ([`crate::Call::hints`]) and are believed only for a tool of a trusted MCP server
//! (`trust_mcp`); unbelieved or absent hints are the cautious defaults (destructive,
//! open-world).
//!
//! A policy file declares hint rules in `[hints]`:
//!
//! ```toml
//! [hints]
//! read_only = "allow"     # a read-only subject is allowed
//! destructive = "ask"     # a destructive one asks
//! open_world = "ask"      # so does one that reaches outside
//! trust_mcp = ["github"]  # believe the hints of github__* tools
//! ```
//!
//! Hint rules decide what no rule of the lists decides, before a preset's class answer and
//! the default: an explicit rule always wins over a hint, and among the hints that apply the
//! strictest decision wins (deny > ask > allow).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::decl::Decision;

/// What a tool call does, as far as its tool says: the contracts' type, every hint decided (the
/// policy has no hints type of its own; this module adds the declaration rules, MCP's lenient
/// fill-in and the built-in tools' hints).
pub use warden_contracts::EffectiveHints;

/// Hints that contradict each other.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("contradictory hints: a read-only call is {0}")]
pub struct HintError(&'static str);

/// The cautious defaults: not read-only, destructive, not idempotent, open-world (the
/// contracts' unknown hints, resolved).
pub fn cautious() -> EffectiveHints {
    warden_contracts::Hints::UNKNOWN.effective()
}

/// Hints as a tool declares them; unset ones take the defaults, and a read-only tool is never
/// destructive and always idempotent (saying otherwise is an error).
///
/// ```
/// use warden_policy::hints;
/// let h = hints::declared(Some(true), None, None, Some(false)).unwrap();
/// assert!(h.read_only && !h.destructive && h.idempotent && !h.open_world);
/// assert!(hints::declared(Some(true), Some(true), None, None).is_err());
/// ```
pub fn declared(
    read_only: Option<bool>,
    destructive: Option<bool>,
    idempotent: Option<bool>,
    open_world: Option<bool>,
) -> Result<EffectiveHints, HintError> {
    let read_only = read_only.unwrap_or(false);
    if read_only && destructive == Some(true) {
        return Err(HintError("destructive"));
    }
    if read_only && idempotent == Some(false) {
        return Err(HintError("not idempotent"));
    }
    Ok(EffectiveHints {
        read_only,
        destructive: !read_only && destructive.unwrap_or(true),
        idempotent: read_only || idempotent.unwrap_or(false),
        open_world: open_world.unwrap_or(true),
    })
}

/// Hints from an MCP tool's annotations (`readOnlyHint`, `destructiveHint`, `idempotentHint`,
/// `openWorldHint`), filled in leniently as MCP clients do: a value that is not a boolean is
/// unset, and read-only wins over a contradiction.
pub fn from_mcp_annotations(annotations: &serde_json::Value) -> EffectiveHints {
    let get = |k: &str| annotations.get(k).and_then(serde_json::Value::as_bool);
    let read_only = get("readOnlyHint").unwrap_or(false);
    EffectiveHints {
        read_only,
        destructive: !read_only && get("destructiveHint").unwrap_or(true),
        idempotent: read_only || get("idempotentHint").unwrap_or(false),
        open_world: get("openWorldHint").unwrap_or(true),
    }
}

/// The hints of a built-in tool, which no caller can override; `None` for other tools.
pub fn builtin(tool: &str) -> Option<EffectiveHints> {
    let read = EffectiveHints {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    match tool {
        "read" | "list" | "grep" | "glob" => Some(read),
        "web_fetch" => Some(EffectiveHints {
            open_world: true,
            ..read
        }),
        "edit" | "write" => Some(EffectiveHints {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: false,
        }),
        _ => None,
    }
}

/// The `[hints]` table: hint rules and the MCP servers whose hints are believed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HintRules {
    /// What applies to a read-only subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<Decision>,
    /// What applies to a destructive subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<Decision>,
    /// What applies to an open-world subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world: Option<Decision>,
    /// MCP servers (the `server` of `server__tool`) whose tools' hints are believed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trust_mcp: Vec<String>,
}

impl HintRules {
    /// Whether any hint rule is declared.
    pub fn is_empty(&self) -> bool {
        self.read_only.is_none() && self.destructive.is_none() && self.open_world.is_none()
    }

    /// Merges another file's table: each rule takes the stricter decision, and a server is
    /// trusted only when every table that names trusted servers names it.
    pub fn strictest(&self, other: &HintRules) -> HintRules {
        let max = |a: Option<Decision>, b: Option<Decision>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let trust_mcp = match (self.trust_mcp.is_empty(), other.trust_mcp.is_empty()) {
            (true, _) => other.trust_mcp.clone(),
            (_, true) => self.trust_mcp.clone(),
            _ => self
                .trust_mcp
                .iter()
                .filter(|s| other.trust_mcp.contains(s))
                .cloned()
                .collect(),
        };
        HintRules {
            read_only: max(self.read_only, other.read_only),
            destructive: max(self.destructive, other.destructive),
            open_world: max(self.open_world, other.open_world),
            trust_mcp,
        }
    }

    /// The hints believed for a subject of `tool`: built-in hints for built-in tools; for
    /// `bash`, read-only exactly when the splitter says so; the call's own hints for a tool
    /// of a trusted MCP server; the cautious defaults otherwise.
    pub fn believed(
        &self,
        tool: &str,
        shell_read_only: bool,
        declared: Option<EffectiveHints>,
    ) -> EffectiveHints {
        if let Some(h) = builtin(tool) {
            return h;
        }
        if tool == "bash" {
            return if shell_read_only {
                EffectiveHints {
                    read_only: true,
                    destructive: false,
                    idempotent: true,
                    open_world: false,
                }
            } else {
                cautious()
            };
        }
        let trusted = tool
            .split_once("__")
            .is_some_and(|(server, _)| self.trust_mcp.iter().any(|s| s == server));
        match declared {
            Some(h) if trusted => h,
            _ => cautious(),
        }
    }

    /// The strictest hint rule that applies to `hints`, with the hint's name.
    pub fn decide(&self, hints: &EffectiveHints) -> Option<(Decision, &'static str)> {
        [
            (hints.read_only, self.read_only, "read-only"),
            (hints.destructive, self.destructive, "destructive"),
            (hints.open_world, self.open_world, "open-world"),
        ]
        .into_iter()
        .filter_map(|(applies, rule, name)| Some((rule.filter(|_| applies)?, name)))
        .max_by_key(|(d, _)| *d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// alpineagents' `Hints(...)` constructor cases (corpus/reference/alpineagents.jsonl).
    #[test]
    fn declared_hints_follow_alpineagents() {
        let h = |r, d, i, o| declared(r, d, i, o);
        assert_eq!(h(None, None, None, None).unwrap(), cautious());
        let ro = h(Some(true), None, None, None).unwrap();
        assert!(ro.read_only && !ro.destructive && ro.idempotent && ro.open_world);
        let ro_closed = h(Some(true), None, None, Some(false)).unwrap();
        assert!(!ro_closed.open_world);
        let nd = h(None, Some(false), None, None).unwrap();
        assert!(!nd.read_only && !nd.destructive && !nd.idempotent && nd.open_world);
        assert!(h(Some(true), Some(true), None, None).is_err());
        assert!(h(Some(true), None, Some(false), None).is_err());
        assert!(h(Some(true), Some(false), Some(true), None).is_ok());
    }

    /// alpineagents' lenient MCP fill-in.
    #[test]
    fn mcp_annotations_are_filled_in_leniently() {
        let h = from_mcp_annotations(&serde_json::json!({}));
        assert_eq!(h, cautious());
        let h = from_mcp_annotations(
            &serde_json::json!({"readOnlyHint": true, "destructiveHint": true}),
        );
        assert!(h.read_only && !h.destructive && h.idempotent && h.open_world);
        let h = from_mcp_annotations(&serde_json::json!({"readOnlyHint": "yes"}));
        assert_eq!(h, cautious());
        let h = from_mcp_annotations(
            &serde_json::json!({"readOnlyHint": false, "idempotentHint": true, "openWorldHint": false}),
        );
        assert!(!h.read_only && h.destructive && h.idempotent && !h.open_world);
    }

    #[test]
    fn only_trusted_servers_are_believed() {
        let rules = HintRules {
            read_only: Some(Decision::Allow),
            trust_mcp: vec!["github".into()],
            ..HintRules::default()
        };
        let ro = declared(Some(true), None, None, None).ok();
        assert!(rules.believed("github__get_issue", false, ro).read_only);
        assert!(!rules.believed("files__read", false, ro).read_only);
        assert!(
            !rules.believed("edit", false, ro).read_only,
            "built-ins cannot be spoofed"
        );
        assert!(rules.believed("bash", true, None).read_only);
        assert!(!rules.believed("bash", false, ro).read_only);
    }
}
