//! Stage 12, `evidence_invoke` (governed; skipped otherwise): the pre-call checkpoint.
//! ADR-0121's reducer over the recorded gates answers its permit, the only way to the token,
//! or its recorded denial (`denied` / reducer). A cancellation or deadline that fired during
//! evidence work ends the request here, before a token exists; then the permit becomes the
//! call in flight.

use std::ops::ControlFlow;

use warden_contracts::{ExecutionOutcome, Failure, ReasonCode, Stage};

use super::{Flow, Run, end};

pub(crate) async fn evidence_invoke(run: &mut Run<'_>) -> Flow {
    let Some((_, operation)) = run.governed(Stage::EvidenceInvoke)? else {
        return ControlFlow::Continue(());
    };
    // Governed steps are boxed, and bound before the await: their futures stay out of the
    // pipeline's state, which every minimal call moves and allocates.
    let checkpoint = Box::pin(operation.checkpoint());
    if let Err((reason, evaluator)) = checkpoint.await {
        return run.refuse(Stage::EvidenceInvoke, reason, evaluator, false);
    }
    if operation.stop_requested() {
        // Cancelled or timed out while evidence was being written: the race ends the request
        // here, before a token exists.
        std::future::pending::<()>().await;
    }
    let begin = Box::pin(operation.begin());
    if let Err(e) = begin.await {
        return end(ExecutionOutcome::Failed {
            request_id: run.request.request_id().clone(),
            profile: run.exec.profile,
            failure: Failure {
                kind: "evidence".into(),
                message: format!("the call was not started: {e}"),
            },
            call_executed: false,
            evidence: Vec::new(),
            degradations: Vec::new(),
        });
    }
    run.trace.allow(
        Stage::EvidenceInvoke,
        "evidence",
        "pre-call checkpoint complete",
        ReasonCode::Evidence,
    );
    ControlFlow::Continue(())
}
