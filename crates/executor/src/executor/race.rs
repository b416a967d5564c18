//! The race: the stage pipeline against the request's cancellation and deadline, a panic
//! anywhere in it caught. Whichever ends first ends the request; evidence work in progress
//! finishes first (the pipeline then stops before it could mint a token).

use std::future::Future;
use std::pin::pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use warden_contracts::{CapabilityEntry, ExecutionContext, ExecutionOutcome, ExecutionRequest};

use super::{ActionExecutor, ExecuteOptions};
use crate::cancel::CancelToken;
use crate::governed::Operation;
use crate::idempotency::IdemGuard;
use crate::stages::{self, Progress};
use crate::trace::Trace;
use crate::unwind::CatchUnwind;

enum Race<T> {
    Done(T),
    Cancelled,
    TimedOut,
}

/// Runs the request's stage pipeline until it ends, is cancelled or times out, and answers
/// the outcome (with the optional containment the backend did not prove, when the call may
/// have run).
pub(super) async fn run(
    exec: &ActionExecutor,
    (request, context): (&ExecutionRequest, &ExecutionContext),
    options: &ExecuteOptions,
    operation: Option<&Operation<'_>>,
    idem: &OnceLock<IdemGuard>,
    trace: &Trace<'_>,
) -> ExecutionOutcome {
    let cancel = options.cancel.as_ref();
    let deadline = request.deadline();
    if cancel.is_some_and(CancelToken::is_cancelled) {
        return exec.cancelled(request, false);
    }
    if deadline.is_some_and(|d| exec.now() >= d) {
        return exec.timed_out(request, false);
    }
    let invoked = AtomicBool::new(false);
    let degraded: OnceLock<Vec<CapabilityEntry>> = OnceLock::new();
    let sleep = deadline.map(|d| {
        let ms = d.unix_millis().saturating_sub(exec.now().unix_millis());
        tokio::time::sleep(std::time::Duration::from_millis(ms))
    });
    let cancelled = cancel.map(CancelToken::cancelled);
    let progress = Progress {
        invoked: &invoked,
        degraded: &degraded,
        idem,
        gov: operation,
    };
    let pipeline = pin!(stages::run(
        exec,
        (request, context),
        &options.approvals,
        progress,
        trace
    ));
    let raced = first(CatchUnwind::new(pipeline), sleep, cancelled, operation).await;
    let executed = invoked.load(Ordering::Acquire);
    let outcome = match raced {
        Race::Done(Ok(o)) => o,
        Race::Done(Err(panic)) => exec.panicked(request, executed, &panic),
        Race::Cancelled => exec.cancelled(request, executed),
        Race::TimedOut => exec.timed_out(request, executed),
    };
    // Optional containment the backend did not prove, on every outcome whose call may have
    // run (set by the admission stage of this request only).
    match degraded.get() {
        Some(entries) if !entries.is_empty() && executed => {
            outcome.with_degradations(entries.clone())
        }
        _ => outcome,
    }
}

/// Polls the pipeline, the deadline and the cancellation until the pipeline ends or one of
/// the others fires with no evidence work in progress.
async fn first<P: Future>(
    pipeline: P,
    sleep: Option<impl Future>,
    cancelled: Option<impl Future>,
    operation: Option<&Operation<'_>>,
) -> Race<P::Output> {
    let mut pipeline = pin!(pipeline);
    let mut sleep = pin!(sleep);
    let mut cancelled = pin!(cancelled);
    let (mut cancel_fired, mut time_fired) = (false, false);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(o) = pipeline.as_mut().poll(cx) {
            return Poll::Ready(Race::Done(o));
        }
        if !cancel_fired
            && let Some(c) = cancelled.as_mut().as_pin_mut()
            && c.poll(cx).is_ready()
        {
            cancel_fired = true;
        }
        if !time_fired
            && let Some(s) = sleep.as_mut().as_pin_mut()
            && s.poll(cx).is_ready()
        {
            time_fired = true;
        }
        // Evidence work in progress finishes first (it wakes this task when done); the
        // pipeline then stops before it could mint a token.
        if (cancel_fired || time_fired) && operation.is_none_or(Operation::request_stop) {
            return Poll::Ready(if cancel_fired {
                Race::Cancelled
            } else {
                Race::TimedOut
            });
        }
        Poll::Pending
    })
    .await
}
