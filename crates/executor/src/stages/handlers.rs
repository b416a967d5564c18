//! Stage 14, `handlers`: the callable's answer becomes the typed outcome. A result goes
//! through the post handlers (each may replace it; an error goes to the error path, the tool
//! is not re-invoked); a failure, a panic or a failing post handler goes to the error handlers
//! (`Reraise` / `ReplaceResult`, the first replacement wins, a failing handler leaves the
//! original primary); an ambiguous result is never retried and never given to error handlers.

use serde_json::Value;
use warden_contracts::{ExecutionOutcome, Failure, Stage};

use super::{Flow, Run, end};
use crate::interceptor::{ErrorDisposition, InvocationFailure};
use crate::plan::ExecutionPlan;
use crate::tool::ToolError;
use crate::unwind::caught;

pub(crate) async fn handlers(run: &mut Run<'_>) -> Flow {
    let plan = run.plan(Stage::Handlers)?;
    let Some(result) = run.result.take() else {
        return end(run.out_of_order(Stage::Handlers, "the callable's answer"));
    };
    run.trace.planned(plan, Stage::Handlers);
    let request = run.request;
    let failure = match result {
        Ok(Ok(value)) => match post(run, plan, value).await {
            Ok(value) => return end(run.exec.succeeded(request, value)),
            Err(failure) => failure,
        },
        Ok(Err(ToolError::Ambiguous { message })) => {
            tracing::warn!(request = %request.request_id(), %message, "result ambiguous; not retried");
            return end(ExecutionOutcome::Ambiguous {
                request_id: request.request_id().clone(),
                profile: run.exec.profile,
                message,
                evidence: Vec::new(),
                degradations: Vec::new(),
            });
        }
        Ok(Err(ToolError::Failed { kind, message })) => InvocationFailure { kind, message },
        Err(panic) => {
            tracing::error!(request = %request.request_id(), %panic, "tool panicked");
            InvocationFailure {
                kind: "panic".into(),
                message: format!("the tool panicked: {panic}"),
            }
        }
    };
    end(on_error(run, plan, failure).await)
}

/// The post handlers, in order, on the result; the first failure is the call's.
async fn post(
    run: &Run<'_>,
    plan: &ExecutionPlan,
    mut value: Value,
) -> Result<Value, InvocationFailure> {
    let view = run.view(plan, &run.args);
    for h in &plan.post {
        match h.after(&view, &value).await {
            Ok(None) => {}
            Ok(Some(replacement)) => value = replacement,
            Err(e) => {
                return Err(InvocationFailure {
                    kind: "post_handler".into(),
                    message: e.message,
                });
            }
        }
    }
    Ok(value)
}

/// The error handlers on `failure`: the first replacement succeeds, else the call failed.
async fn on_error(
    run: &Run<'_>,
    plan: &ExecutionPlan,
    failure: InvocationFailure,
) -> ExecutionOutcome {
    let request = run.request;
    let view = run.view(plan, &run.args);
    let mut replacement: Option<Value> = None;
    for h in &plan.on_error {
        match caught!(h.on_error(&view, &failure)) {
            Ok(Ok(ErrorDisposition::ReplaceResult(v))) => {
                if replacement.is_none() {
                    replacement = Some(v);
                }
            }
            Ok(Ok(ErrorDisposition::Reraise)) => {}
            Ok(Err(e)) => {
                tracing::warn!(request = %request.request_id(), error = %e, "error handler failed; the original failure stays primary");
            }
            Err(panic) => {
                tracing::warn!(request = %request.request_id(), %panic, "error handler panicked; the original failure stays primary");
            }
        }
    }
    match replacement {
        Some(v) => run.exec.succeeded(request, v),
        None => ExecutionOutcome::Failed {
            request_id: request.request_id().clone(),
            profile: run.exec.profile,
            failure: Failure {
                kind: failure.kind,
                message: failure.message,
            },
            call_executed: true,
            evidence: Vec::new(),
            degradations: Vec::new(),
        },
    }
}
