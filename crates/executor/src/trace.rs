//! Stage and decision events for the executor's observers, emitted only when someone observes.

use std::sync::Arc;

use warden_contracts::{
    AdmissionDecision, DecisionEvent, DecisionReason, Disposition, Observer, ReasonCode, RequestId,
    Stage, StageEvent, StageStatus,
};

use crate::plan::{ExecutionPlan, StageMode};

/// Emits one request's stage and decision events.
pub(crate) struct Trace<'a> {
    observers: &'a [Arc<dyn Observer>],
    request_id: &'a RequestId,
}

impl<'a> Trace<'a> {
    pub(crate) fn new(observers: &'a [Arc<dyn Observer>], request_id: &'a RequestId) -> Self {
        Self {
            observers,
            request_id,
        }
    }

    fn on(&self) -> bool {
        !self.observers.is_empty()
    }

    fn stage(&self, stage: Stage, status: StageStatus, detail: Option<&str>) {
        if !self.on() {
            return;
        }
        let event = StageEvent {
            request_id: self.request_id.clone(),
            stage,
            status,
            detail: detail.map(str::to_owned),
        };
        for o in self.observers {
            o.on_stage(&event);
        }
    }

    /// `stage` ran.
    pub(crate) fn ran(&self, stage: Stage) {
        self.stage(stage, StageStatus::Ran, None);
    }

    /// `stage` was skipped, for the reason given.
    pub(crate) fn skipped(&self, stage: Stage, why: &str) {
        self.stage(stage, StageStatus::Skipped, Some(why));
    }

    /// `stage` as the plan planned it: skipped with the plan's reason, else ran.
    pub(crate) fn planned(&self, plan: &ExecutionPlan, stage: Stage) {
        match plan.mode(stage) {
            StageMode::Skip(why) => self.skipped(stage, why),
            StageMode::Run | StageMode::WhenChanged => self.ran(stage),
        }
    }

    /// A decision at `stage` (built only when someone observes).
    pub(crate) fn decision(&self, stage: Stage, make: impl FnOnce() -> Option<AdmissionDecision>) {
        if !self.on() {
            return;
        }
        let Some(decision) = make() else { return };
        let event = DecisionEvent {
            request_id: self.request_id.clone(),
            stage,
            decision,
        };
        for o in self.observers {
            o.on_decision(&event);
        }
    }

    /// An allow at `stage`.
    pub(crate) fn allow(&self, stage: Stage, evaluator: &str, message: &str, code: ReasonCode) {
        self.decision(stage, || {
            AdmissionDecision::new(
                Disposition::Allow,
                DecisionReason::new(code, message),
                evaluator,
            )
            .ok()
        });
    }

    /// The outcome, to every observer.
    pub(crate) fn outcome(&self, outcome: &warden_contracts::ExecutionOutcome) {
        for o in self.observers {
            o.on_outcome(outcome);
        }
    }
}
