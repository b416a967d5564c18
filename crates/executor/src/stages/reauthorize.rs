//! Stage 11, `reauthorize`: when anything changed the arguments, the session gate, the
//! preconditions and the security pass again on the **final** arguments (governed: recorded with
//! `recheck: true`); a security hook that changes them again fails closed. Skipped, with that
//! fact reported, when nothing changed them. Then the receipts that approved the call are used,
//! once, atomically (a race loses with `approval_refused`).

use std::ops::ControlFlow;
use std::sync::PoisonError;

use warden_contracts::{DecisionReason, ReasonCode, Stage};

use super::security;
use super::{Flow, GateSite, Run, authorize, preconditions, session_gate};
use crate::plan::ExecutionPlan;

pub(crate) async fn reauthorize(run: &mut Run<'_>) -> Flow {
    let plan = run.plan(Stage::Reauthorize)?;
    if run.changed {
        run.trace.ran(Stage::Reauthorize);
        // Boxed (and bound before the await, so the unboxed future is not kept in this one):
        // most requests skip this stage, and its future would otherwise be part of every
        // request's pipeline.
        let pass = Box::pin(final_pass(run, plan));
        pass.await?;
    } else {
        run.trace
            .skipped(Stage::Reauthorize, "arguments and policy inputs unchanged");
    }
    use_receipts(run)
}

/// The session gate, the preconditions and the security pass on the final arguments.
async fn final_pass(run: &mut Run<'_>, plan: &ExecutionPlan) -> Flow {
    run.site = match GateSite::open(run.progress.gov, &run.args, true) {
        Ok(site) => site,
        Err(reason) => return run.refuse(Stage::Reauthorize, reason, "evidence", false),
    };
    session_gate::check(run, plan, true).await?;
    preconditions::check(run, plan, true).await?;
    let security = security::pass(run, plan, true).await;
    authorize::conclude(
        run,
        Stage::Reauthorize,
        plan,
        security,
        "final arguments authorized",
    )
}

/// Receipts that approved this call are used now, once, atomically.
fn use_receipts(run: &Run<'_>) -> Flow {
    if run.approved.is_empty() {
        return ControlFlow::Continue(());
    }
    let exec = run.exec;
    let used = exec
        .approvals
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .consume(&run.approved, &*exec.clock, exec.approval_ttl_ms);
    let Err(id) = used else {
        return ControlFlow::Continue(());
    };
    let stage = if run.changed {
        Stage::Reauthorize
    } else {
        Stage::Authorize
    };
    run.refuse(
        stage,
        DecisionReason::new(
            ReasonCode::ApprovalRefused,
            format!("approval receipt {id} was already used"),
        ),
        "approval",
        false,
    )
}
