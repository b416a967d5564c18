//! Stage 6, `session_gate`: the optional session gate (ADR-0044 D6) on the request's
//! arguments: `false`, an error or a panic denies (`gate_denied`); `true` never skips policy.
//! Governed, it opens the pass's gate site first and records the gate's evaluation as a hard
//! gate. `reauthorize` asks the gate again on the final arguments ([`check`]).

use std::ops::ControlFlow;

use warden_contracts::{DecisionReason, ReasonCode, Stage};
use warden_evidence::payload::{GateLevel, GateVerdict};

use super::{Flow, GateSite, Run, pass_stage};
use crate::plan::ExecutionPlan;
use crate::unwind::caught;

pub(crate) async fn session_gate(run: &mut Run<'_>) -> Flow {
    let plan = run.plan(Stage::SessionGate)?;
    run.site = match GateSite::open(run.progress.gov, &run.args, false) {
        Ok(site) => site,
        Err(reason) => return run.refuse(Stage::SessionGate, reason, "evidence", false),
    };
    check(run, plan, false).await
}

/// The session gate on the current arguments, recorded at the run's gate site.
/// `final_pass`: inside `reauthorize`, which reports (and refuses) for it.
pub(crate) async fn check(run: &Run<'_>, plan: &ExecutionPlan, final_pass: bool) -> Flow {
    let stage = pass_stage(Stage::SessionGate, final_pass);
    let Some(gate) = &plan.gate else {
        if !final_pass {
            run.trace.planned(plan, Stage::SessionGate);
        }
        return ControlFlow::Continue(());
    };
    if !final_pass {
        run.trace.ran(Stage::SessionGate);
    }
    let call = run.view(plan, &run.args);
    let answer = caught!(gate.authorize(&call));
    let refusal = match answer {
        Ok(Ok(true)) => None,
        Ok(Ok(false)) => Some("the session gate refused the call".to_owned()),
        Ok(Err(e)) => Some(format!("the session gate failed: {e}")),
        Err(panic) => Some(format!("the session gate panicked: {panic}")),
    };
    if let Some(site) = &run.site {
        let (verdict, reason) = match &refusal {
            Some(message) => (
                GateVerdict::Deny,
                DecisionReason::new(ReasonCode::GateDenied, message.clone()),
            ),
            None => (
                GateVerdict::Allow,
                DecisionReason::new(ReasonCode::GateDenied, "the session gate allowed"),
            ),
        };
        if let Err(r) = site
            .record(
                "session_gate",
                stage,
                GateLevel::Hard,
                verdict,
                &reason,
                None,
            )
            .await
        {
            return run.refuse(stage, r, "evidence", false);
        }
    }
    if let Some(message) = refusal {
        return run.refuse(
            stage,
            DecisionReason::new(ReasonCode::GateDenied, message),
            "session_gate",
            false,
        );
    }
    if !final_pass {
        run.trace.allow(
            Stage::SessionGate,
            "session_gate",
            "the session gate allowed",
            ReasonCode::GateDenied,
        );
    }
    ControlFlow::Continue(())
}
