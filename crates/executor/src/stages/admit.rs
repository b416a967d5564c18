//! Stage 4, `admit`: the containment preflight (every required capability `enforced` in the
//! backend's report, else `denied` / `containment`; optional ones not enforced become the
//! outcome's `degradations`), then the capacity lease, held to the end of the pipeline
//! (full: `deferred` / `capacity`, never a security verdict).

use std::ops::ControlFlow;

use warden_contracts::{
    AdmissionDecision, Capability, CapabilityEntry, CapabilityStatus, DecisionReason,
    ExecutionOutcome, ReasonCode, Stage,
};

use super::{Flow, Run, end};
use crate::executor::ActionExecutor;
use crate::plan::ExecutionPlan;

pub(crate) async fn admit(run: &mut Run<'_>) -> Flow {
    run.trace.ran(Stage::Admit);
    let plan = run.plan(Stage::Admit)?;
    match preflight(run.exec, plan) {
        Err(why) => {
            return run.refuse(
                Stage::Admit,
                DecisionReason::new(ReasonCode::Containment, why),
                "backend",
                false,
            );
        }
        Ok(degraded) => {
            if !degraded.is_empty() {
                tracing::warn!(
                    request = %run.request.request_id(),
                    capabilities = ?degraded.iter().map(|e| e.capability).collect::<Vec<_>>(),
                    "optional containment not proven: the call runs degraded"
                );
            }
            let _ = run.progress.degraded.set(degraded);
        }
    }
    if let Some(capacity) = &run.exec.capacity {
        match capacity.try_acquire(plan.entry.descriptor.name(), run.exec.now()) {
            Ok(lease) => run.lease = Some(lease),
            Err(full) => {
                let reason = DecisionReason::new(ReasonCode::Capacity, full.reason);
                run.trace.decision(Stage::Admit, || {
                    AdmissionDecision::defer(reason.clone(), "capacity", full.retry_at).ok()
                });
                return end(ExecutionOutcome::Deferred {
                    request_id: run.request.request_id().clone(),
                    profile: run.exec.profile,
                    reason,
                    retry_at: full.retry_at,
                });
            }
        }
    }
    run.trace
        .allow(Stage::Admit, "capacity", "admitted", ReasonCode::Capacity);
    ControlFlow::Continue(())
}

/// The containment preflight: `Err` names every required capability the backend's report
/// does not show `enforced`; `Ok` lists the optional ones it does not (the degradations).
fn preflight(exec: &ActionExecutor, plan: &ExecutionPlan) -> Result<Vec<CapabilityEntry>, String> {
    let backend = exec
        .backend
        .as_ref()
        .map_or("no backend report", |r| r.backend.name());
    let unproven = |c: &Capability| -> Option<CapabilityEntry> {
        let entry = exec
            .backend
            .as_ref()
            .and_then(|r| r.entries.iter().find(|e| e.capability == *c));
        match entry {
            Some(e) if e.status == CapabilityStatus::Enforced => None,
            Some(e) => Some(e.clone()),
            None => Some(CapabilityEntry {
                capability: *c,
                status: CapabilityStatus::Unsupported,
                detail: format!("`{backend}` does not report it"),
            }),
        }
    };
    let missing: Vec<String> = plan
        .required
        .iter()
        .filter_map(unproven)
        .map(|e| format!("{} ({})", capability_name(e.capability), e.detail))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "required containment not proven by `{backend}`: {}",
            missing.join("; ")
        ));
    }
    Ok(plan.optional.iter().filter_map(unproven).collect())
}

/// A capability's name as serialized (`network_off`).
fn capability_name(c: Capability) -> String {
    serde_json::to_value(c)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{c:?}"))
}
