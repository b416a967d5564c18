//! Stage 5, `evidence_start` (governed; skipped otherwise): opens the request's operation
//! (`policy_bound` and `operation_started`, both receipts required), or answers an idempotent
//! replay from the store. Only requests that passed admission get here: deferrals and
//! containment denials never open an operation.
//!
//! The operation is described from the trusted inputs only (the reference design's
//! operation-context factory): the canonical action and version, the validated arguments'
//! digest, the plan's pinned policy, the backend report the preflight used. It binds at most
//! one presented approval receipt (action, policy and expiry bound, never used, not an answer
//! to this very request), whose single use the store makes durable in the same transaction as
//! `operation_started`; only that receipt can approve the call.

use std::ops::ControlFlow;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;

use warden_contracts::{
    ApprovalId, ApprovalReceipt, DecisionReason, Digest, ExecutionOutcome, OperationId, ReasonCode,
    Stage,
};
use warden_evidence::{OperationStart, Replay};

use super::{Flow, Run, end, evidence_digest};
use crate::governed::{Operation, StartAnswer};
use crate::plan::ExecutionPlan;
use crate::receipts::receipt_counts;

pub(crate) async fn evidence_start(run: &mut Run<'_>) -> Flow {
    let Some((plan, operation)) = run.governed(Stage::EvidenceStart)? else {
        return ControlFlow::Continue(());
    };
    // Governed steps are boxed, and bound before the await: their futures stay out of the
    // pipeline's state, which every minimal call moves and allocates.
    let describing = Box::pin(describe(run, plan));
    let (start, receipt) = match describing.await {
        Ok(s) => s,
        Err(reason) => return run.refuse(Stage::EvidenceStart, reason, "evidence", false),
    };
    let starting = Box::pin(operation.start(start));
    match starting.await {
        StartAnswer::Started => {}
        StartAnswer::Replay(replay) => {
            tracing::debug!(request = %run.request.request_id(), operation = %replay.operation.operation_id, "idempotent replay from evidence");
            return end(replayed(run, operation, &replay));
        }
        StartAnswer::Refused(reason) => {
            return run.refuse(Stage::EvidenceStart, reason, "evidence", false);
        }
    }
    run.trace.allow(
        Stage::EvidenceStart,
        "evidence",
        "operation started",
        ReasonCode::Evidence,
    );
    run.bound = Some(receipt.into_iter().collect());
    ControlFlow::Continue(())
}

/// Describes the operation, with the receipt it binds (why others were not: `run.unbound`).
async fn describe(
    run: &mut Run<'_>,
    plan: &ExecutionPlan,
) -> Result<(OperationStart, Option<ApprovalReceipt>), DecisionReason> {
    let invalid = |e: String| {
        DecisionReason::new(
            ReasonCode::Evidence,
            format!("the operation cannot be described: {e}"),
        )
    };
    let operation_id = mint_operation_id(run).map_err(|e| invalid(e.to_string()))?;
    let mut start = OperationStart::from_request(operation_id, run.request, run.context)
        .map_err(|e| invalid(e.to_string()))?;
    let descriptor = &plan.entry.descriptor;
    start.action = descriptor.name().to_owned();
    start.action_version = Some(descriptor.version().to_owned());
    start.arguments_digest = evidence_digest(&run.args)?;
    start.policy = Some(plan.policy.snapshot().clone());
    if let Some(d) = &run.exec.backend_digest {
        start.capability_digest = Some(d.clone());
    }
    let (scope, candidates) = candidates(run, plan);
    let mut chosen = None;
    for r in candidates {
        match run.exec.approval_use(r.approval_id()).await {
            Ok(Some(used)) => run.unbound.push(format!(
                "receipt {} was already used by operation {}",
                r.approval_id(),
                used.operation_id
            )),
            Ok(None) => {
                chosen = Some(r);
                break;
            }
            Err(e) => {
                return Err(DecisionReason::new(
                    ReasonCode::Evidence,
                    format!("approval uses cannot be read: {e}"),
                ));
            }
        }
    }
    // An approved attempt's idempotency key is scoped to its approval, so the escalated
    // operation's key does not replay it.
    if let Some(id) = &scope
        && let Some(key) = &start.idempotency_key
    {
        start.idempotency_key = Some(format!("{key}\u{0}approval:{id}"));
    }
    if let Some(r) = &chosen {
        start = start.with_approval(r.clone(), 2);
    }
    Ok((start, chosen))
}

/// The presented receipts that may be bound (not used here, not answering this very request),
/// and the first one bound to this action and policy (and not expired), which scopes the
/// idempotency key whether or not it can still be used: a repeat of an approved attempt
/// replays it.
fn candidates(
    run: &mut Run<'_>,
    plan: &ExecutionPlan,
) -> (Option<ApprovalId>, Vec<ApprovalReceipt>) {
    let now = run.exec.now();
    let mut scope: Option<ApprovalId> = None;
    let book = run
        .exec
        .approvals
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let candidates = run
        .presented
        .iter()
        .filter(|r| {
            let id = r.approval_id();
            if let Err(m) = receipt_counts(plan, r, r.arguments_digest(), now) {
                run.unbound.push(format!("receipt {id}: {m}"));
                return false;
            }
            if scope.is_none() {
                scope = Some(id.clone());
            }
            if let Some(m) = book.unusable(id, run.request.request_id()) {
                run.unbound.push(m);
                return false;
            }
            true
        })
        .cloned()
        .collect();
    (scope, candidates)
}

/// A fresh operation id: unique per process (counter, clock, process id).
fn mint_operation_id(run: &Run<'_>) -> Result<OperationId, warden_contracts::ContractError> {
    let n = run.exec.seq.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let d = Digest::of_bytes(
        format!(
            "operation\u{0}{}\u{0}{n}\u{0}{}\u{0}{nanos}\u{0}{}",
            run.request.request_id(),
            run.exec.now().unix_millis(),
            std::process::id()
        )
        .as_bytes(),
    );
    OperationId::new(format!("op-{}", &d.hex()[..24]))
}

/// The answer to an idempotency key that names an earlier operation: the full outcome when
/// this process closed it, else what its records say. Nothing runs.
fn replayed(run: &Run<'_>, operation: &Operation<'_>, replay: &Replay) -> ExecutionOutcome {
    if let Some(o) = run
        .exec
        .replays
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&replay.operation.operation_id)
    {
        return o.clone();
    }
    operation.replay_outcome(replay, run.request.request_id(), run.exec.profile)
}
