//! The execution plan: the fixed stage order (docs/design/executor.md#the-stage-plan), compiled
//! once per (action, policy snapshot, handler set) into an immutable value and cached.
//!
//! A plan holds the callable, its compiled schema, the pinned policy evaluator and exactly the
//! interceptors whose scope covers the action. Which stages will run is decided here, once:
//! a stage with nothing to do (no session gate, no transform, an ungoverned profile) is planned
//! as skipped and reported as skipped at run time; re-validation and re-authorization are
//! planned "when changed" and skipped, with that fact reported, only when the arguments did not
//! change.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use warden_contracts::{ActionDescriptor, Capability, PolicyEvaluator, PolicySnapshotRef, Stage};
use warden_evidence::payload::GateLevel;

use crate::interceptor::{
    ErrorHandler, Handlers, PostHandler, Precondition, SecurityHook, SessionGate, Transform,
};
use crate::registry::Entry;

/// How a stage is planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageMode {
    /// Always runs.
    Run,
    /// Runs only when the arguments changed since the first security pass.
    WhenChanged,
    /// Never runs for this plan, for the reason given.
    Skip(&'static str),
}

/// The stage order, as one written invariant: every request passes these stages in this order,
/// each at most once, and only the invoke stage reaches the callable.
pub const STAGE_ORDER: [Stage; 15] = [
    Stage::Resolve,
    Stage::Validate,
    Stage::BindContext,
    Stage::Admit,
    Stage::EvidenceStart,
    Stage::SessionGate,
    Stage::Preconditions,
    Stage::Authorize,
    Stage::Transform,
    Stage::Revalidate,
    Stage::Reauthorize,
    Stage::EvidenceInvoke,
    Stage::Invoke,
    Stage::Handlers,
    Stage::Outcome,
];

/// An immutable, compiled plan for one action under one policy snapshot and handler set.
pub struct ExecutionPlan {
    pub(crate) entry: Arc<Entry>,
    pub(crate) policy: Arc<dyn PolicyEvaluator>,
    pub(crate) gate: Option<Arc<dyn SessionGate>>,
    pub(crate) preconditions: Vec<Arc<dyn Precondition>>,
    pub(crate) security: Vec<(Arc<dyn SecurityHook>, GateLevel)>,
    pub(crate) transforms: Vec<Arc<dyn Transform>>,
    pub(crate) post: Vec<Arc<dyn PostHandler>>,
    pub(crate) on_error: Vec<Arc<dyn ErrorHandler>>,
    pub(crate) required: Vec<Capability>,
    pub(crate) optional: Vec<Capability>,
    stages: [(Stage, StageMode); 15],
}

impl fmt::Debug for ExecutionPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecutionPlan")
            .field("action", &self.entry.descriptor.name())
            .field("policy", &self.policy.snapshot().digest)
            .field("stages", &self.stages)
            .finish()
    }
}

impl ExecutionPlan {
    pub(crate) fn compile(
        entry: Arc<Entry>,
        policy: Arc<dyn PolicyEvaluator>,
        handlers: &Handlers,
        (required, optional): (Vec<Capability>, Vec<Capability>),
        governed: bool,
    ) -> Self {
        let name = entry.descriptor.name().to_owned();
        fn pick<T: ?Sized>(list: &[(crate::InterceptorScope, Arc<T>)], name: &str) -> Vec<Arc<T>> {
            list.iter()
                .filter(|(scope, _)| scope.covers(name))
                .map(|(_, h)| h.clone())
                .collect()
        }
        let preconditions = pick(&handlers.preconditions, &name);
        let security = handlers
            .security
            .iter()
            .filter(|(scope, _, _)| scope.covers(&name))
            .map(|(_, h, level)| (h.clone(), *level))
            .collect();
        let transforms = pick(&handlers.transforms, &name);
        let post = pick(&handlers.post, &name);
        let on_error = pick(&handlers.on_error, &name);
        let gate = handlers.gate.clone();
        let evidence = if governed {
            StageMode::Run
        } else {
            StageMode::Skip("ungoverned profile: no governed evidence")
        };
        let stages = [
            (Stage::Resolve, StageMode::Run),
            (Stage::Validate, StageMode::Run),
            (Stage::BindContext, StageMode::Run),
            (Stage::Admit, StageMode::Run),
            (Stage::EvidenceStart, evidence),
            (
                Stage::SessionGate,
                if gate.is_some() {
                    StageMode::Run
                } else {
                    StageMode::Skip("no session gate")
                },
            ),
            (Stage::Preconditions, StageMode::Run),
            (Stage::Authorize, StageMode::Run),
            (
                Stage::Transform,
                if transforms.is_empty() {
                    StageMode::Skip("no transforms")
                } else {
                    StageMode::Run
                },
            ),
            (Stage::Revalidate, StageMode::WhenChanged),
            (Stage::Reauthorize, StageMode::WhenChanged),
            (Stage::EvidenceInvoke, evidence),
            (Stage::Invoke, StageMode::Run),
            (
                Stage::Handlers,
                if post.is_empty() && on_error.is_empty() {
                    StageMode::Skip("no post or error handlers")
                } else {
                    StageMode::Run
                },
            ),
            (Stage::Outcome, StageMode::Run),
        ];
        Self {
            entry,
            policy,
            gate,
            preconditions,
            security,
            transforms,
            post,
            on_error,
            required,
            optional,
            stages,
        }
    }

    /// The resolved action.
    pub fn action(&self) -> &ActionDescriptor {
        &self.entry.descriptor
    }

    /// The pinned policy snapshot.
    pub fn policy(&self) -> &PolicySnapshotRef {
        self.policy.snapshot()
    }

    /// Every stage in order, with how it is planned.
    pub fn stages(&self) -> &[(Stage, StageMode)] {
        &self.stages
    }

    /// How `stage` is planned.
    pub fn mode(&self, stage: Stage) -> StageMode {
        self.stages
            .iter()
            .find(|(s, _)| *s == stage)
            .map_or(StageMode::Run, |(_, m)| *m)
    }

    /// Containment the backend must prove for this action (not proven → `denied`
    /// `containment` at admission).
    pub fn required_containment(&self) -> &[Capability] {
        &self.required
    }

    /// Containment asked for as optional (not proven → the call runs and its outcome records
    /// the capability in `degradations`). Never contains a required capability.
    pub fn optional_containment(&self) -> &[Capability] {
        &self.optional
    }
}

/// Plans by policy (index into the executor's evaluators), then canonical action name.
#[derive(Default)]
pub(crate) struct PlanCache {
    by_policy: Vec<RwLock<HashMap<String, Arc<ExecutionPlan>>>>,
}

impl PlanCache {
    pub(crate) fn new(policies: usize) -> Self {
        Self {
            by_policy: (0..policies).map(|_| RwLock::new(HashMap::new())).collect(),
        }
    }

    pub(crate) fn get_or_compile(
        &self,
        policy: usize,
        name: &str,
        compile: impl FnOnce() -> ExecutionPlan,
    ) -> Option<Arc<ExecutionPlan>> {
        let slot = self.by_policy.get(policy)?;
        if let Some(plan) = slot
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
        {
            return Some(plan.clone());
        }
        let mut map = slot.write().unwrap_or_else(PoisonError::into_inner);
        let plan = map
            .entry(name.to_owned())
            .or_insert_with(|| Arc::new(compile()))
            .clone();
        Some(plan)
    }

    pub(crate) fn len(&self) -> usize {
        self.by_policy
            .iter()
            .map(|m| m.read().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}
