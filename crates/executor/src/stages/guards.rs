//! Stage 7, `guards`: the intrinsic guards, pure and synchronous: the tool's own
//! `Tool::guard` first (`guard.tool`), then the composition's `Guard`s in order (`guard.1`,
//! …); the first refusal denies (`guard`). Governed, each evaluation is recorded as a hard
//! gate. `reauthorize` runs them again on the final arguments ([`check`]).

use std::ops::ControlFlow;

use warden_contracts::{DecisionReason, ReasonCode, Stage};
use warden_evidence::payload::{GateLevel, GateVerdict};

use super::{Flow, Run};
use crate::plan::ExecutionPlan;

pub(crate) async fn guards(run: &mut Run<'_>) -> Flow {
    let plan = run.plan(Stage::Guards)?;
    check(run, plan, false).await
}

/// Every guard on the current arguments, recorded at the run's gate site. `final_pass`:
/// inside `reauthorize`, which reports (and refuses) for them.
pub(crate) async fn check(run: &Run<'_>, plan: &ExecutionPlan, final_pass: bool) -> Flow {
    let stage = if final_pass {
        Stage::Reauthorize
    } else {
        Stage::Guards
    };
    if !final_pass {
        run.trace.ran(Stage::Guards);
    }
    let call = run.view(plan, &run.args);
    let guards = std::iter::once(None).chain(plan.guards.iter().map(Some));
    for (i, guard) in guards.enumerate() {
        let result = match guard {
            None => plan.entry.tool.guard(&run.args),
            Some(g) => g.check(&call),
        };
        if let Some(site) = &run.site {
            let name = if i == 0 {
                "guard.tool".to_owned()
            } else {
                format!("guard.{i}")
            };
            let (verdict, reason) = match &result {
                Ok(()) => (
                    GateVerdict::Allow,
                    DecisionReason::new(ReasonCode::Guard, "the guard passed"),
                ),
                Err(message) => (
                    GateVerdict::Deny,
                    DecisionReason::new(ReasonCode::Guard, message.clone()),
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
            let reason = DecisionReason::new(ReasonCode::Guard, message);
            return run.refuse(stage, reason, "guard", false);
        }
    }
    if !final_pass {
        run.trace
            .allow(Stage::Guards, "guard", "guards passed", ReasonCode::Guard);
    }
    ControlFlow::Continue(())
}
