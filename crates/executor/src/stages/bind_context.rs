//! Stage 3, `bind_context`: the request agrees with its trusted context
//! (`ExecutionContext::check_request`: scope, principal claim), the context's policy snapshot
//! is one this executor holds, and its backend is this executor's (with the capability digest
//! it was bound to); the action's plan is compiled under that policy, or taken from the cache.
//! Any mismatch is denied (`context_mismatch`), always before any policy runs. Then, ungoverned,
//! the idempotency key is reserved (governed keys are durable, checked at `evidence_start`).

use std::ops::ControlFlow;

use warden_contracts::{BackendRef, DecisionReason, ExecutionOutcome, ReasonCode, Stage};

use super::{Flow, Run, end};
use crate::executor::ActionExecutor;
use crate::idempotency::{IdemKey, Taken};

pub(crate) async fn bind_context(run: &mut Run<'_>) -> Flow {
    run.trace.ran(Stage::BindContext);
    let entry = run.entry(Stage::BindContext)?;
    let mismatch = |run: &Run<'_>, why: String| {
        run.refuse(
            Stage::BindContext,
            DecisionReason::new(ReasonCode::ContextMismatch, why),
            "context",
            false,
        )
    };
    if let Err(e) = run.context.check_request(run.request) {
        return mismatch(run, e.to_string());
    }
    let index = match run.exec.policy_index(run.context) {
        Ok(i) => i,
        Err(e) => return mismatch(run, e.to_string()),
    };
    if let Err(why) = check_backend(run.exec, run.context.effect_backend()) {
        return mismatch(run, why);
    }
    let Some(plan) = run.exec.plan_for(entry, index) else {
        return mismatch(run, "no policy for this context".to_owned());
    };
    run.trace.allow(
        Stage::BindContext,
        "context",
        "request agrees with its trusted context",
        ReasonCode::ContextMismatch,
    );
    let _ = run.plan.set(plan);
    reserve_key(run, entry.descriptor.name())
}

/// The context names this executor's backend (and, if bound, its capability report).
fn check_backend(exec: &ActionExecutor, named: &BackendRef) -> Result<(), String> {
    let Some(report) = &exec.backend else {
        return Ok(());
    };
    if named.name() != report.backend.name() {
        return Err(format!(
            "the context names backend `{}`, this executor runs `{}`",
            named.name(),
            report.backend.name()
        ));
    }
    if let (Some(want), Some(have)) = (named.capability_digest(), &exec.backend_digest)
        && want != have
    {
        return Err(format!(
            "the context was bound to capability report {want}, the backend reports {have}"
        ));
    }
    Ok(())
}

/// Ungoverned idempotency is this process's memory: a key whose call may have had an effect
/// replays its outcome, the same key with other arguments is denied, a key in flight defers.
fn reserve_key(run: &Run<'_>, action: &str) -> Flow {
    let Some(key) = run
        .request
        .idempotency_key()
        .filter(|_| run.progress.gov.is_none())
    else {
        return ControlFlow::Continue(());
    };
    let key = IdemKey {
        principal: run.context.authenticated_principal().id.to_string(),
        scope: run.context.execution_scope().describe(),
        action: action.to_owned(),
        key: key.to_owned(),
    };
    let request = run.request;
    match run.exec.idempotency.reserve(key, &run.args) {
        Ok(guard) => {
            let _ = run.progress.idem.set(guard);
            ControlFlow::Continue(())
        }
        Err(Taken::Replay(outcome)) => {
            tracing::debug!(request = %request.request_id(), "idempotent replay");
            ControlFlow::Break(outcome)
        }
        Err(Taken::OtherArguments) => end(run.exec.denied(
            request,
            DecisionReason::new(
                ReasonCode::InvalidArguments,
                "idempotency key already used with other arguments",
            ),
            "idempotency",
            false,
        )),
        Err(Taken::InFlight) => end(ExecutionOutcome::Deferred {
            request_id: request.request_id().clone(),
            profile: run.exec.profile,
            reason: DecisionReason::new(
                ReasonCode::Capacity,
                "a request with this idempotency key is in flight",
            ),
            retry_at: None,
        }),
    }
}
