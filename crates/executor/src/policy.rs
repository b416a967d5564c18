//! The compiled policy plugged into the executor through the contracts [`PolicyEvaluator`] port:
//! [`SnapshotPolicy`] adapts a `warden_policy::PolicySnapshot` (or an `Engine`, which journals
//! each verdict).
//!
//! Mapping: allow → `Allow`; deny → `Deny`; ask → `Escalate` to the `human` authority. The
//! reason cites the rule and source as the engine did (`PolicyRule`), or the default
//! (`PolicyDefault`); a deny with neither a rule nor the default behind it is a call the engine
//! could not evaluate (`Unparseable`).

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use warden_contracts::{
    ApprovalReceipt, DecisionReason, Disposition, EvaluatorError, PolicyAnswer, PolicyEvaluator,
    PolicyQuery, PolicySnapshotRef, ReasonCode, Timestamp,
};
use warden_policy::permission::{PermissionSet, decide_with_permissions_async};
use warden_policy::{Call, Decision, Engine, PolicySnapshot, Verdict, edge};

/// A compiled policy snapshot as a [`PolicyEvaluator`].
///
/// Relative paths in a call's arguments resolve against `cwd` (the workspace for `warden
/// exec`); symlinks in path arguments are resolved at the edge, before the pure decision.
#[derive(Debug, Clone)]
pub struct SnapshotPolicy {
    engine: Engine,
    reference: PolicySnapshotRef,
    cwd: Option<PathBuf>,
    authority: String,
    permissions: Option<Arc<PermissionSet>>,
    /// The policy's `[guards]` are installed as handlers ([`crate::Runtime`] does it); while
    /// they are not, a policy that declares guards refuses every call.
    guards_installed: bool,
}

impl SnapshotPolicy {
    /// Adapts a snapshot.
    pub fn new(snapshot: Arc<PolicySnapshot>) -> Self {
        Self::from_engine(Engine::new(snapshot))
    }

    /// Adapts an engine (a snapshot with verdict observers: each decision is journaled).
    pub fn from_engine(engine: Engine) -> Self {
        let reference = engine.snapshot().reference();
        Self {
            engine,
            reference,
            cwd: None,
            authority: "human".to_owned(),
            permissions: None,
            guards_installed: false,
        }
    }

    /// The same adapter running the snapshot's programmable permissions (the set it
    /// declares; a snapshot that declares permissions denies every call without them).
    pub fn with_permissions(mut self, permissions: Arc<PermissionSet>) -> Self {
        self.permissions = Some(permissions);
        self
    }

    /// Marks the policy's `[guards]` as installed by the composition that holds this adapter.
    pub(crate) fn with_guards_installed(mut self) -> Self {
        self.guards_installed = true;
        self
    }

    /// The same adapter resolving relative paths against `cwd`.
    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// The same adapter naming another approval authority for its escalations.
    pub fn with_authority(mut self, authority: impl Into<String>) -> Self {
        self.authority = authority.into();
        self
    }

    /// The compiled snapshot.
    pub fn compiled(&self) -> &Arc<PolicySnapshot> {
        self.engine.snapshot()
    }

    fn answer(&self, verdict: &Verdict) -> Result<PolicyAnswer, EvaluatorError> {
        self.answer_as(verdict, None)
    }

    /// The answer for `verdict`; `code` overrides the reason code (a permission decided).
    fn answer_as(
        &self,
        verdict: &Verdict,
        code: Option<ReasonCode>,
    ) -> Result<PolicyAnswer, EvaluatorError> {
        let snapshot = self.engine.snapshot();
        let code = code.unwrap_or(match (&verdict.rule, verdict.decision) {
            (Some(_), _) => ReasonCode::PolicyRule,
            (None, d) if d == snapshot.default_decision() => ReasonCode::PolicyDefault,
            (None, _) => ReasonCode::Unparseable,
        });
        let mut reason = DecisionReason::new(code, verdict.reason.to_string());
        if let Some(rule) = &verdict.rule {
            reason = reason.with_rule(rule.to_string());
        }
        if let Some(source) = &verdict.source {
            reason = reason.with_source(source.to_string());
        }
        if let Some(subject) = &verdict.subject {
            reason = reason.with_subject(subject.clone());
        }
        let disposition = match verdict.decision {
            Decision::Allow => Disposition::Allow,
            Decision::Ask => Disposition::Escalate,
            Decision::Deny => Disposition::Deny,
        };
        let fail = |e: warden_contracts::ContractError| EvaluatorError {
            message: e.to_string(),
        };
        let answer = PolicyAnswer::new(disposition, reason, "policy").map_err(fail)?;
        if disposition == Disposition::Escalate {
            answer.with_authority(self.authority.clone()).map_err(fail)
        } else {
            Ok(answer)
        }
    }
}

#[async_trait]
impl PolicyEvaluator for SnapshotPolicy {
    fn snapshot(&self) -> &PolicySnapshotRef {
        &self.reference
    }

    /// With `[approvers]`, only a receipt signed by a declared approver for this policy counts
    /// ([`PolicySnapshot::authenticate_receipt`]); without, the local-operator model.
    fn authenticate_receipt(
        &self,
        receipt: &ApprovalReceipt,
        now: Timestamp,
    ) -> Result<(), String> {
        self.engine
            .snapshot()
            .authenticate_receipt(receipt, now)
            .map_err(|e| e.to_string())
    }

    async fn evaluate(&self, query: &PolicyQuery<'_>) -> Result<PolicyAnswer, EvaluatorError> {
        if !self.guards_installed && !self.engine.snapshot().guards().is_empty() {
            // A declared table is enforced or refused, never silently ignored.
            return Err(EvaluatorError {
                message: "the policy declares [guards], which this executor was composed without: compose it with warden_executor::Runtime, which installs them".into(),
            });
        }
        let mut call = Call::new(query.action.name(), Value::Object(query.arguments.clone()));
        if let Some(hints) = vouched_hints(query.action) {
            call = call.with_vouched_hints(hints);
        }
        if let Some(cwd) = &self.cwd {
            call = call.with_cwd(cwd.clone());
        }
        edge::resolve_call_paths(self.engine.snapshot(), &mut call);
        let Some(permissions) = &self.permissions else {
            let verdict = self.engine.decide(&call);
            return self.answer(&verdict);
        };
        // Programmable permissions: any error but a tool error is the evaluator's error, and
        // the executor fails closed on it; a deny with `stop` stops the turn.
        let decided = decide_with_permissions_async(self.engine.snapshot(), permissions, &call)
            .await
            .map_err(|e| EvaluatorError {
                message: e.to_string(),
            })?;
        let code = decided
            .decided_by
            .is_some()
            .then_some(ReasonCode::Permission);
        let answer = self.answer_as(&decided.verdict, code)?;
        if decided.stop && decided.verdict.decision == Decision::Deny {
            answer.with_stop().map_err(|e| EvaluatorError {
                message: e.to_string(),
            })
        } else {
            Ok(answer)
        }
    }
}

/// The hints of a tool built into the runtime (`ActionSource::Builtin`): its own code says
/// what it does, so the policy believes them (modes and hint rules then tell a reading tool
/// from a destructive one). A plugin's or an MCP server's hints are not vouched for here.
fn vouched_hints(
    action: &warden_contracts::ActionDescriptor,
) -> Option<warden_contracts::EffectiveHints> {
    if !matches!(
        action.source(),
        warden_contracts::ActionSource::Builtin { .. }
    ) {
        return None;
    }
    Some(action.hints().effective())
}
