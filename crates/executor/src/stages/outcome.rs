//! Stage 15, `outcome`: the typed outcome, after the stage pipeline and outside its race with
//! cancellation and deadlines, so every request gets it, however it ended: the governed
//! operation's one terminal record (crate::governed, `Operation::close`), the idempotency
//! reservation completed, the stage event, then the outcome to every observer.
//!
//! The pipeline (and any handle it held) is gone by now, so this is the one stage that does
//! not take a `Run`: it takes what outlives the pipeline.

use std::sync::PoisonError;

use warden_contracts::{ExecutionOutcome, ExecutionRequest, Stage};

use crate::executor::ActionExecutor;
use crate::governed::{ExecutionReport, Operation};
use crate::idempotency::IdemGuard;
use crate::trace::Trace;

pub(crate) async fn outcome(
    exec: &ActionExecutor,
    request: &ExecutionRequest,
    operation: Option<Box<Operation<'_>>>,
    idem: Option<IdemGuard>,
    trace: &Trace<'_>,
    outcome: ExecutionOutcome,
) -> ExecutionReport {
    let report = match operation {
        None => ExecutionReport {
            outcome,
            operation_id: None,
            receipts: Vec::new(),
            replay_of: None,
            evidence_error: None,
        },
        Some(operation) => {
            // Boxed, and bound before the await: the governed close stays out of the minimal
            // profile's future.
            let closing = Box::pin((*operation).close(outcome, request.deadline()));
            let (report, closed) = closing.await;
            // A keyed operation this process closed: a replay here answers its full outcome.
            if let (Some(op), Some(_), true) =
                (&report.operation_id, request.idempotency_key(), closed)
            {
                let mut replays = exec.replays.lock().unwrap_or_else(PoisonError::into_inner);
                if replays.len() >= 4096 {
                    replays.clear();
                }
                replays.insert(op.clone(), report.outcome.clone());
            }
            report
        }
    };
    if let Some(guard) = idem {
        guard.complete(&report.outcome);
    }
    trace.ran(Stage::Outcome);
    trace.outcome(&report.outcome);
    report
}
