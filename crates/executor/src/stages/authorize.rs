//! Stage 8, `authorize`: the security pass (security.rs: the policy through the
//! `PolicyEvaluator` port, then every security hook in order) on the request's arguments. A
//! deny ends the request (with `stop`); an escalation that no presented receipt answers ends
//! it at once as `escalated`, with an approval request bound to the action, the arguments it
//! evaluated, the policy and an expiry ([`escalate`]); a hook may replace the arguments.

use std::ops::ControlFlow;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;

use serde_json::{Map, Value};
use warden_contracts::{
    AdmissionDecision, ApprovalId, ApprovalRequest, DecisionReason, Digest, ExecutionOutcome,
    ReasonCode, Stage, Timestamp,
};

use super::security::{self, Security};
use super::{Flow, Run, end};
use crate::executor::arguments_digest;
use crate::plan::ExecutionPlan;

pub(crate) async fn authorize(run: &mut Run<'_>) -> Flow {
    let plan = run.plan(Stage::Authorize)?;
    run.trace.ran(Stage::Authorize);
    let security = security::pass(run, plan, false).await;
    conclude(run, Stage::Authorize, plan, security, "authorized")
}

/// Acts on a security pass's conclusion at `stage`: an allow takes the receipts that approved
/// the call and any replacement arguments (only a first pass replaces them) and continues,
/// traced with `allowed`; a deny refuses; an escalation ends the request as `escalated` for
/// the arguments the pass evaluated ([`escalate`]).
pub(crate) fn conclude(
    run: &mut Run<'_>,
    stage: Stage,
    plan: &ExecutionPlan,
    security: Security,
    allowed: &str,
) -> Flow {
    match security {
        Security::Allow {
            replacement,
            approved_by,
        } => {
            run.approved.extend(approved_by);
            if let Some(r) = replacement
                && r != run.args
            {
                run.args = r;
                run.changed = true;
            }
            run.trace.allow(
                stage,
                plan.policy.snapshot().policy_id.as_str(),
                allowed,
                ReasonCode::PolicyRule,
            );
            ControlFlow::Continue(())
        }
        Security::Deny {
            reason,
            evaluator,
            stop,
        } => run.refuse(stage, reason, &evaluator, stop),
        Security::Escalate {
            reason,
            evaluator,
            authority,
            replaced,
        } => {
            let args = replaced.as_ref().unwrap_or(&run.args);
            escalate(run, stage, plan, args, reason, &evaluator, authority)
        }
    }
}

/// Ends the request as `escalated` at `stage`: an approval request for exactly this call
/// (`args`), recorded in the approval book so its receipt cannot answer this very request.
fn escalate(
    run: &Run<'_>,
    stage: Stage,
    plan: &ExecutionPlan,
    args: &Map<String, Value>,
    reason: DecisionReason,
    evaluator: &str,
    authority: String,
) -> Flow {
    let digest = match arguments_digest(args) {
        Ok(d) => d,
        Err(e) => {
            let reason = DecisionReason::new(
                ReasonCode::Unparseable,
                format!("the arguments have no canonical form, so no approval can bind them: {e}"),
            );
            return run.refuse(stage, reason, evaluator, false);
        }
    };
    let exec = run.exec;
    let request_id = run.request.request_id();
    let now = exec.now();
    let n = exec.seq.fetch_add(1, Ordering::Relaxed);
    let id_digest =
        Digest::of_bytes(format!("{request_id}\u{0}{n}\u{0}{}", now.unix_millis()).as_bytes());
    let approval_id = match ApprovalId::new(format!("ap-{}", &id_digest.hex()[..24])) {
        Ok(id) => id,
        Err(e) => {
            let reason = DecisionReason::new(ReasonCode::EvaluatorFailed, e.to_string());
            return run.refuse(stage, reason, evaluator, false);
        }
    };
    let expires_at = Timestamp(now.unix_millis().saturating_add(exec.approval_ttl_ms));
    let approval = ApprovalRequest {
        approval_id: approval_id.clone(),
        request_id: request_id.clone(),
        action: plan.entry.descriptor.name().to_owned(),
        arguments_digest: digest,
        policy_digest: Some(plan.policy.snapshot().digest.clone()),
        authority,
        reason: reason.clone(),
        expires_at: Some(expires_at),
    };
    exec.approvals
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .issue(approval_id, request_id.clone(), expires_at, now);
    run.trace.decision(stage, || {
        AdmissionDecision::escalate(reason, evaluator, approval.clone()).ok()
    });
    end(ExecutionOutcome::Escalated {
        request_id: request_id.clone(),
        profile: exec.profile,
        approval,
        evidence: Vec::new(),
    })
}
