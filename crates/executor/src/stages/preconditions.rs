//! Stage 7, `preconditions`: pure, synchronous argument checks: the tool's own
//! `Tool::precondition` first (`precondition.tool`), then the composition's `Precondition`s in
//! order (`precondition.1`, …); the first refusal denies (`precondition`). Governed, each
//! evaluation is recorded as a hard gate. `reauthorize` runs them again on the final arguments
//! ([`check`]).

use std::ops::ControlFlow;

use warden_contracts::{DecisionReason, ReasonCode, Stage};
use warden_evidence::payload::{GateLevel, GateVerdict};

use super::{Flow, Run, pass_stage};
use crate::plan::ExecutionPlan;

pub(crate) async fn preconditions(run: &mut Run<'_>) -> Flow {
    let plan = run.plan(Stage::Preconditions)?;
    check(run, plan, false).await
}

/// Every precondition on the current arguments, recorded at the run's gate site. `final_pass`:
/// inside `reauthorize`, which reports (and refuses) for them.
pub(crate) async fn check(run: &Run<'_>, plan: &ExecutionPlan, final_pass: bool) -> Flow {
    let stage = pass_stage(Stage::Preconditions, final_pass);
    if !final_pass {
        run.trace.ran(Stage::Preconditions);
    }
    let call = run.view(plan, &run.args);
    let preconditions = std::iter::once(None).chain(plan.preconditions.iter().map(Some));
    for (i, precondition) in preconditions.enumerate() {
        let result = match precondition {
            None => plan.entry.tool.precondition(&run.args),
            Some(p) => p.check(&call),
        };
        if let Some(site) = &run.site {
            let name = if i == 0 {
                "precondition.tool".to_owned()
            } else {
                format!("precondition.{i}")
            };
            let (verdict, reason) = match &result {
                Ok(()) => (
                    GateVerdict::Allow,
                    DecisionReason::new(ReasonCode::Precondition, "the precondition held"),
                ),
                Err(message) => (
                    GateVerdict::Deny,
                    DecisionReason::new(ReasonCode::Precondition, message.clone()),
                ),
            };
            if let Err(r) = site
                .record(&name, stage, GateLevel::Hard, verdict, &reason, None)
                .await
            {
                return run.refuse(stage, r, "evidence", false);
            }
        }
        if let Err(message) = result {
            let reason = DecisionReason::new(ReasonCode::Precondition, message);
            return run.refuse(stage, reason, "precondition", false);
        }
    }
    if !final_pass {
        run.trace.allow(
            Stage::Preconditions,
            "precondition",
            "preconditions held",
            ReasonCode::Precondition,
        );
    }
    ControlFlow::Continue(())
}
