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
    DecisionReason, Disposition, EvaluatorError, PolicyAnswer, PolicyEvaluator, PolicyQuery,
    PolicySnapshotRef, ReasonCode,
};
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
        }
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
        let snapshot = self.engine.snapshot();
        let code = match (&verdict.rule, verdict.decision) {
            (Some(_), _) => ReasonCode::PolicyRule,
            (None, d) if d == snapshot.default_decision() => ReasonCode::PolicyDefault,
            (None, _) => ReasonCode::Unparseable,
        };
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

    async fn evaluate(&self, query: &PolicyQuery<'_>) -> Result<PolicyAnswer, EvaluatorError> {
        let mut call = Call::new(query.action.name(), Value::Object(query.arguments.clone()));
        if let Some(cwd) = &self.cwd {
            call = call.with_cwd(cwd.clone());
        }
        edge::resolve_call_paths(self.engine.snapshot(), &mut call);
        let verdict = self.engine.decide(&call);
        self.answer(&verdict)
    }
}
