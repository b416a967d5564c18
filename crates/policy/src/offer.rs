//! What a model is offered, and how a batch of calls is decided (agentpolicy).
//!
//! - **Offers**: the tool list offered to a model drops every tool a bare deny removes (a
//!   deny without a specifier, or a tool-name glob) unless a carve-out reaches that rule: a
//!   tool the model can never call is not shown to it, while a tool denied only for some
//!   arguments (`bash(rm:*)`) stays.
//! - **Batches**: when a model asks for several calls at once, an allowed call is held while
//!   a sibling waits for approval, so nothing of the batch runs before the person answers
//!   (and a denied sibling is denied, not held).

use serde::Serialize;

use crate::compile::PolicySnapshot;
use crate::decl::{Decision, ListKind};
use crate::engine::{Call, Verdict};

/// One call's verdict in a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchVerdict {
    /// The call's own verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// An allowed call held while a sibling waits for approval: run it only once every
    /// sibling that asks has been answered.
    pub held: bool,
}

impl PolicySnapshot {
    /// The tools of `tools` to offer a model, in their order: those no bare deny removes.
    ///
    /// ```
    /// use warden_policy::*;
    /// let policy = PolicyBuilder::new()
    ///     .default(Decision::Allow)
    ///     .own(Source::trusted("p"), RuleSet {
    ///         deny: Rule::parse_list("web_fetch bash(rm:*) mcp__*").unwrap(),
    ///         ..RuleSet::default()
    ///     })
    ///     .build()?;
    /// let offered = policy.offer(["bash", "web_fetch", "read", "mcp__github__x"]);
    /// assert_eq!(offered, ["bash", "read"]);
    /// # Ok::<(), PolicyError>(())
    /// ```
    pub fn offer<'a>(&self, tools: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        tools
            .into_iter()
            .filter(|tool| !self.removed(tool))
            .map(str::to_owned)
            .collect()
    }

    /// Whether a bare deny no carve-out reaches removes `tool`.
    fn removed(&self, tool: &str) -> bool {
        self.rules.iter().any(|r| {
            r.list == ListKind::Deny
                && !r.carve_out
                && r.pattern.is_none()
                && match &r.tool_glob {
                    Some(glob) => glob.matches(tool),
                    None => r.rule.tool() == tool,
                }
                && !self.rules.iter().any(|c| {
                    c.list == ListKind::Deny
                        && c.carve_out
                        && c.rule.tool() == tool
                        && self.carve_out_reaches(c, r)
                })
        })
    }

    /// Decides a batch of calls the model asked for together: each call is decided alone, and
    /// an allowed call is held when any sibling asks.
    ///
    /// ```
    /// use warden_policy::*;
    /// let policy = PolicyBuilder::new()
    ///     .default(Decision::Ask)
    ///     .own(Source::trusted("p"), RuleSet {
    ///         allow: Rule::parse_list("read").unwrap(),
    ///         ..RuleSet::default()
    ///     })
    ///     .build()?;
    /// let batch = policy.decide_batch(&[
    ///     Call::new("read", serde_json::json!({"path": "/x"})),
    ///     Call::new("bash", serde_json::json!({"command": "make"})),
    /// ]);
    /// assert_eq!(batch[0].verdict.decision, Decision::Allow);
    /// assert!(batch[0].held, "the read waits for the bash call's approval");
    /// assert_eq!(batch[1].verdict.decision, Decision::Ask);
    /// # Ok::<(), PolicyError>(())
    /// ```
    pub fn decide_batch(&self, calls: &[Call]) -> Vec<BatchVerdict> {
        let verdicts: Vec<Verdict> = calls.iter().map(|c| self.decide(c)).collect();
        let waiting = verdicts.iter().any(|v| v.decision == Decision::Ask);
        verdicts
            .into_iter()
            .map(|verdict| BatchVerdict {
                held: waiting && verdict.decision == Decision::Allow,
                verdict,
            })
            .collect()
    }
}
