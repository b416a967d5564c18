//! [`ActionExecutor`]: the one authoritative path from a request to its effect.
//!
//! The stage order is fixed ([`crate::STAGE_ORDER`], docs/executor.md): resolve → validate →
//! bind the trusted context → admit (containment preflight, capacity lease) → governed
//! evidence checkpoint → session gate → intrinsic guards → policy and security hooks → user
//! transforms → re-validate → re-authorize → evidence checkpoint → invoke once → post/error
//! handlers → typed outcome. A refusal at any stage ends the request there with a typed
//! outcome; only the invoke stage mints a token.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::Poll;

use async_trait::async_trait;
use serde_json::{Map, Value};
use warden_contracts::{
    ActionRef, AdmissionDecision, ApprovalId, ApprovalReceipt, ApprovalRequest, BackendRef,
    Capability, CapabilityEntry, CapabilityReport, CapabilityStatus, Capacity, DecisionEvent,
    DecisionReason, Digest, Disposition, ExecutionContext, ExecutionOutcome, ExecutionRequest,
    Executor, Failure, Observer, PolicyEvaluator, PolicyQuery, ReasonCode, RequestId,
    RuntimeProfile, Stage, StageEvent, StageStatus, Timestamp,
};
use warden_policy::{Containment, NetworkRequirement, Requirement};

use crate::admission::{Clock, SystemClock};
use crate::cancel::CancelToken;
use crate::error::ExecutorError;
use crate::interceptor::{CallView, ErrorDisposition, Handlers, HookVerdict, InvocationFailure};
use crate::plan::{ExecutionPlan, PlanCache, StageMode};
use crate::registry::{Entry, Registry};
use crate::token::InvocationToken;
use crate::tool::ToolError;
use crate::unwind::{CatchUnwind, caught};

/// How long an escalation's approval request stays answerable, by default (one hour).
pub const DEFAULT_APPROVAL_TTL_MS: u64 = 60 * 60 * 1000;

/// Per-call options beyond the request: approvals and cancellation.
#[derive(Debug, Clone, Default)]
pub struct ExecuteOptions {
    /// Approval receipts presented with this attempt; each authorizes exactly the call it is
    /// bound to (action, final-argument digest, policy digest, expiry), once.
    pub approvals: Vec<ApprovalReceipt>,
    /// Cancels the call: it ends as `Cancelled`.
    pub cancel: Option<CancelToken>,
}

impl ExecuteOptions {
    /// No approvals, no cancellation.
    pub fn new() -> Self {
        Self::default()
    }
    /// The same options with one more approval receipt.
    pub fn approval(mut self, receipt: ApprovalReceipt) -> Self {
        self.approvals.push(receipt);
        self
    }
    /// The same options with a cancellation token.
    pub fn cancel(mut self, token: CancelToken) -> Self {
        self.cancel = Some(token);
        self
    }
}

/// Builds an [`ActionExecutor`]. A policy evaluator is required (no policy, no execution).
pub struct ExecutorBuilder {
    registry: Registry,
    policies: Vec<Arc<dyn PolicyEvaluator>>,
    handlers: Handlers,
    capacity: Option<Arc<dyn Capacity>>,
    backend: Option<CapabilityReport>,
    containment: Vec<(Capability, Requirement)>,
    containment_for: HashMap<String, Vec<(Capability, Requirement)>>,
    observers: Vec<Arc<dyn Observer>>,
    clock: Arc<dyn Clock>,
    approval_ttl_ms: u64,
}

impl fmt::Debug for ExecutorBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecutorBuilder")
            .field("registry", &self.registry)
            .field("policies", &self.policies.len())
            .field("handlers", &self.handlers)
            .finish_non_exhaustive()
    }
}

impl ExecutorBuilder {
    fn new(registry: Registry) -> Self {
        Self {
            registry,
            policies: Vec::new(),
            handlers: Handlers::new(),
            capacity: None,
            backend: None,
            containment: Vec::new(),
            containment_for: HashMap::new(),
            observers: Vec::new(),
            clock: Arc::new(SystemClock),
            approval_ttl_ms: DEFAULT_APPROVAL_TTL_MS,
        }
    }

    /// Adds a policy evaluator. The first is used when a context names no snapshot; a context
    /// naming a snapshot gets exactly that one (or a denial, before policy runs).
    pub fn policy(mut self, policy: Arc<dyn PolicyEvaluator>) -> Self {
        self.policies.push(policy);
        self
    }
    /// Sets the handler set (session gate, guards, security hooks, transforms, handlers).
    pub fn handlers(mut self, handlers: Handlers) -> Self {
        self.handlers = handlers;
        self
    }
    /// Sets the capacity admission port (for example [`crate::Limits`]).
    pub fn capacity(mut self, capacity: Arc<dyn Capacity>) -> Self {
        self.capacity = Some(capacity);
        self
    }
    /// Sets the effect backend's capability report; contexts must name this backend.
    pub fn backend(mut self, report: CapabilityReport) -> Self {
        self.backend = Some(report);
        self
    }
    /// Requires a containment capability for every action: a backend that does not enforce it
    /// denies before anything starts. Same as `containment(capability, Requirement::Required)`.
    pub fn require(self, capability: Capability) -> Self {
        self.containment(capability, Requirement::Required)
    }
    /// Requires a containment capability for one action (canonical name).
    pub fn require_for(self, action: impl Into<String>, capability: Capability) -> Self {
        self.containment_for(action, capability, Requirement::Required)
    }
    /// Asks for a containment capability for every action: `Required` → a backend that does
    /// not enforce it denies (`containment`) before anything starts; `Optional` → the call
    /// proceeds and its outcome records the capability in `degradations`. Asked for several
    /// times (here or per action), the strictest requirement wins.
    pub fn containment(mut self, capability: Capability, requirement: Requirement) -> Self {
        self.containment.push((capability, requirement));
        self
    }
    /// [`Self::containment`] for one action (canonical name).
    pub fn containment_for(
        mut self,
        action: impl Into<String>,
        capability: Capability,
        requirement: Requirement,
    ) -> Self {
        self.containment_for
            .entry(action.into())
            .or_default()
            .push((capability, requirement));
        self
    }
    /// A policy's `[containment]` table for one action (canonical name; the actions that run
    /// processes through the effect backend): `write_roots` → `filesystem_write_roots`,
    /// `network_off` → `network_off` (nothing when `allowed`), `env_allowlist` →
    /// `env_allowlist`, each with the table's requirement.
    pub fn policy_containment_for(self, action: impl Into<String>, table: &Containment) -> Self {
        let action = action.into();
        let mut b = self
            .containment_for(
                action.clone(),
                Capability::FilesystemWriteRoots,
                table.write_roots,
            )
            .containment_for(
                action.clone(),
                Capability::EnvAllowlist,
                table.env_allowlist,
            );
        match table.network_off {
            NetworkRequirement::Required => {
                b = b.containment_for(action, Capability::NetworkOff, Requirement::Required);
            }
            NetworkRequirement::Optional => {
                b = b.containment_for(action, Capability::NetworkOff, Requirement::Optional);
            }
            NetworkRequirement::Allowed => {}
        }
        b
    }
    /// Adds an observer of stages, decisions and outcomes.
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observers.push(observer);
        self
    }
    /// Sets the clock (deadlines, rates, approval expiry).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
    /// Sets how long an approval request stays answerable.
    pub fn approval_ttl_ms(mut self, ttl: u64) -> Self {
        self.approval_ttl_ms = ttl.max(1);
        self
    }

    /// Freezes the registry and handler set into an executor.
    pub fn build(self) -> Result<ActionExecutor, ExecutorError> {
        if self.policies.is_empty() {
            return Err(ExecutorError::NoPolicy);
        }
        let mut seen = std::collections::HashSet::new();
        for p in &self.policies {
            if !seen.insert(p.snapshot().digest.clone()) {
                return Err(ExecutorError::DuplicatePolicy {
                    digest: p.snapshot().digest.to_string(),
                });
            }
        }
        let backend_digest = match &self.backend {
            Some(report) => Some(Digest::of_serialize(report).map_err(|e| {
                ExecutorError::InvalidLimit(format!("backend report has no digest: {e}"))
            })?),
            None => None,
        };
        Ok(ActionExecutor {
            plans: PlanCache::new(self.policies.len()),
            registry: self.registry,
            policies: self.policies,
            handlers: self.handlers,
            capacity: self.capacity,
            backend: self.backend,
            backend_digest,
            containment: self.containment,
            containment_for: self.containment_for,
            observers: self.observers,
            clock: self.clock,
            approval_ttl_ms: self.approval_ttl_ms,
            profile: RuntimeProfile::Minimal,
            approvals: Mutex::new(ApprovalBook::default()),
            idempotency: Mutex::new(HashMap::new()),
            seq: AtomicU64::new(0),
        })
    }
}

/// Approvals this executor issued and receipts it has accepted.
#[derive(Default)]
struct ApprovalBook {
    /// approval id → (the escalated request, expiry).
    issued: HashMap<ApprovalId, (RequestId, Timestamp)>,
    /// approval id → expiry, for receipts already used.
    used: HashMap<ApprovalId, Timestamp>,
}

impl ApprovalBook {
    fn prune(&mut self, now: Timestamp) {
        if self.issued.len() > 4096 {
            self.issued.retain(|_, (_, exp)| *exp > now);
        }
        if self.used.len() > 4096 {
            self.used.retain(|_, exp| *exp > now);
        }
    }
}

/// The idempotency key of a request, scoped to the trusted principal, scope and action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct IdemKey {
    principal: String,
    scope: String,
    action: String,
    key: String,
}

enum IdemState {
    InFlight,
    Done(Box<(Map<String, Value>, ExecutionOutcome)>),
}

/// Holds an in-flight idempotency reservation; released on drop unless completed.
struct IdemGuard<'a> {
    table: &'a Mutex<HashMap<IdemKey, IdemState>>,
    key: Option<IdemKey>,
    arguments: Map<String, Value>,
}

impl IdemGuard<'_> {
    fn complete(mut self, outcome: &ExecutionOutcome) {
        let Some(key) = self.key.take() else { return };
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        // Only outcomes whose call may have had an effect are recorded: replaying them must not
        // run the tool again. A call that never started may simply run when retried.
        if outcome.call_executed() == Some(false) {
            table.remove(&key);
        } else {
            table.insert(
                key,
                IdemState::Done(Box::new((
                    std::mem::take(&mut self.arguments),
                    outcome.clone(),
                ))),
            );
        }
    }
}

impl Drop for IdemGuard<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.table
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&key);
        }
    }
}

/// The authoritative executor.
///
/// ```
/// use std::sync::Arc;
/// use warden_contracts::*;
/// use warden_executor::{ActionExecutor, InvocationToken, Registry, SnapshotPolicy, Tool, ToolError};
/// use warden_policy::{Decision, PolicySnapshot};
///
/// struct Echo(ActionDescriptor);
/// #[async_trait::async_trait]
/// impl Tool for Echo {
///     fn descriptor(&self) -> &ActionDescriptor { &self.0 }
///     async fn invoke(&self, _: InvocationToken, args: serde_json::Value)
///         -> Result<serde_json::Value, ToolError> { Ok(args) }
/// }
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let mut registry = Registry::new();
/// registry.register(Arc::new(Echo(ActionDescriptor::new("echo", "1", ActionSource::Builtin {})?)))?;
/// let policy = PolicySnapshot::builder().default(Decision::Allow).build().unwrap();
/// let executor = ActionExecutor::builder(registry)
///     .policy(Arc::new(SnapshotPolicy::new(Arc::new(policy))))
///     .build()?;
/// let scope = ExecutionScopeRef::Ephemeral { scope_id: ScopeId::new("s")? };
/// let me = PrincipalRef { id: PrincipalId::new("me")?, kind: PrincipalKind::Local };
/// let context = ExecutionContext::new(ContextId::new("c")?, scope.clone(), me, BackendRef::new("in_process")?);
/// let request = ExecutionRequest::new(
///     RequestId::new("r-1")?, ActionRef::new("echo")?, serde_json::json!({"x": 1}), scope,
/// )?;
/// let outcome = executor.execute(request, &context).await;
/// assert!(outcome.is_success());
/// assert_eq!(outcome.profile(), RuntimeProfile::Minimal);
/// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
/// ```
pub struct ActionExecutor {
    registry: Registry,
    policies: Vec<Arc<dyn PolicyEvaluator>>,
    handlers: Handlers,
    capacity: Option<Arc<dyn Capacity>>,
    backend: Option<CapabilityReport>,
    backend_digest: Option<Digest>,
    containment: Vec<(Capability, Requirement)>,
    containment_for: HashMap<String, Vec<(Capability, Requirement)>>,
    observers: Vec<Arc<dyn Observer>>,
    clock: Arc<dyn Clock>,
    approval_ttl_ms: u64,
    profile: RuntimeProfile,
    plans: PlanCache,
    approvals: Mutex<ApprovalBook>,
    idempotency: Mutex<HashMap<IdemKey, IdemState>>,
    seq: AtomicU64,
}

impl fmt::Debug for ActionExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActionExecutor")
            .field("registry", &self.registry)
            .field("profile", &self.profile)
            .field("policies", &self.policies.len())
            .field("plans", &self.plans.len())
            .finish_non_exhaustive()
    }
}

/// Emits stage and decision events, only when someone observes.
struct Trace<'a> {
    observers: &'a [Arc<dyn Observer>],
    request_id: &'a RequestId,
}

impl Trace<'_> {
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

    fn ran(&self, stage: Stage) {
        self.stage(stage, StageStatus::Ran, None);
    }

    fn skipped(&self, stage: Stage, why: &str) {
        self.stage(stage, StageStatus::Skipped, Some(why));
    }

    fn decision(&self, stage: Stage, make: impl FnOnce() -> Option<AdmissionDecision>) {
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

    fn allow(&self, stage: Stage, evaluator: &str, message: &str, code: ReasonCode) {
        self.decision(stage, || {
            AdmissionDecision::new(
                Disposition::Allow,
                DecisionReason::new(code, message),
                evaluator,
            )
            .ok()
        });
    }
}

/// What one security pass concluded.
enum Security {
    Allow {
        replacement: Option<Map<String, Value>>,
        approved_by: Option<ApprovalId>,
    },
    Deny {
        reason: DecisionReason,
        evaluator: String,
        stop: bool,
    },
    Escalate {
        reason: DecisionReason,
        evaluator: String,
        authority: String,
        /// The arguments the escalating pass evaluated, when a security hook replaced them.
        replaced: Option<Map<String, Value>>,
    },
}

/// A request that ended before invocation, or the values needed to build its outcome.
enum Ended {
    Outcome(ExecutionOutcome),
}

impl ActionExecutor {
    /// Starts a builder over a registry (frozen by [`ExecutorBuilder::build`]).
    pub fn builder(registry: Registry) -> ExecutorBuilder {
        ExecutorBuilder::new(registry)
    }

    /// The registry (resolution only: it cannot invoke).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The runtime profile every outcome of this executor carries.
    pub fn profile(&self) -> RuntimeProfile {
        self.profile
    }

    /// How many plans are compiled and cached.
    pub fn cached_plans(&self) -> usize {
        self.plans.len()
    }

    /// The compiled plan for `action` under the policy `context` selects (compiling and
    /// caching it on first use).
    pub fn plan(
        &self,
        action: &ActionRef,
        context: &ExecutionContext,
    ) -> Result<Arc<ExecutionPlan>, ExecutorError> {
        let entry = self.registry.entry(action)?;
        let index = self.policy_index(context)?;
        self.plan_for(&entry, index)
            .ok_or(ExecutorError::UnknownPolicy {
                digest: String::new(),
            })
    }

    fn policy_index(&self, context: &ExecutionContext) -> Result<usize, ExecutorError> {
        match context.policy_snapshot() {
            None => Ok(0),
            Some(r) => self
                .policies
                .iter()
                .position(|p| p.snapshot() == r)
                .ok_or_else(|| ExecutorError::UnknownPolicy {
                    digest: r.digest.to_string(),
                }),
        }
    }

    fn plan_for(&self, entry: &Arc<Entry>, policy: usize) -> Option<Arc<ExecutionPlan>> {
        let name = entry.descriptor.name();
        self.plans.get_or_compile(policy, name, || {
            // The strictest requirement per capability, in the order first asked for.
            let mut required: Vec<Capability> = Vec::new();
            let mut optional: Vec<Capability> = Vec::new();
            let asked = self
                .containment
                .iter()
                .chain(self.containment_for.get(name).into_iter().flatten());
            for (c, need) in asked.clone() {
                if *need == Requirement::Required && !required.contains(c) {
                    required.push(*c);
                }
            }
            for (c, _) in asked {
                if !required.contains(c) && !optional.contains(c) {
                    optional.push(*c);
                }
            }
            let evaluator = self.policies.get(policy).cloned();
            // `policy` is an index checked by `policy_index`; fall back to the default.
            let evaluator = evaluator.unwrap_or_else(|| self.policies[0].clone());
            ExecutionPlan::compile(
                entry.clone(),
                evaluator,
                &self.handlers,
                (required, optional),
                false,
            )
        })
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Runs one request with options (approval receipts, cancellation).
    pub async fn execute_with(
        &self,
        request: ExecutionRequest,
        context: &ExecutionContext,
        options: ExecuteOptions,
    ) -> ExecutionOutcome {
        let invoked = AtomicBool::new(false);
        let degraded: OnceLock<Vec<CapabilityEntry>> = OnceLock::new();
        let mut idem: Option<IdemGuard<'_>> = None;
        let trace = Trace {
            observers: &self.observers,
            request_id: request.request_id(),
        };
        let cancel = options.cancel.clone();
        let deadline = request.deadline();
        let ended = if cancel.as_ref().is_some_and(CancelToken::is_cancelled) {
            Some(self.cancelled(&request, false))
        } else if deadline.is_some_and(|d| self.now() >= d) {
            Some(self.timed_out(&request, false))
        } else {
            None
        };
        let outcome = match ended {
            Some(o) => o,
            None => {
                let sleep = deadline.map(|d| {
                    let ms = d.unix_millis().saturating_sub(self.now().unix_millis());
                    tokio::time::sleep(std::time::Duration::from_millis(ms))
                });
                let cancelled = cancel.as_ref().map(CancelToken::cancelled);
                let pipeline = pin!(self.pipeline(
                    &request,
                    context,
                    &options.approvals,
                    Progress {
                        invoked: &invoked,
                        degraded: &degraded,
                    },
                    &mut idem,
                    &trace,
                ));
                let mut pipeline = pin!(CatchUnwind::new(pipeline));
                let mut sleep = pin!(sleep);
                let mut cancelled = pin!(cancelled);
                let raced = std::future::poll_fn(|cx| {
                    if let Poll::Ready(o) = pipeline.as_mut().poll(cx) {
                        return Poll::Ready(Race::Done(o));
                    }
                    if let Some(c) = cancelled.as_mut().as_pin_mut()
                        && c.poll(cx).is_ready()
                    {
                        return Poll::Ready(Race::Cancelled);
                    }
                    if let Some(s) = sleep.as_mut().as_pin_mut()
                        && s.poll(cx).is_ready()
                    {
                        return Poll::Ready(Race::TimedOut);
                    }
                    Poll::Pending
                })
                .await;
                let executed = invoked.load(Ordering::Acquire);
                let outcome = match raced {
                    Race::Done(Ok(o)) => o,
                    Race::Done(Err(panic)) => self.panicked(&request, executed, &panic),
                    Race::Cancelled => self.cancelled(&request, executed),
                    Race::TimedOut => self.timed_out(&request, executed),
                };
                // Optional containment the backend did not prove, on every outcome whose call
                // may have run (set by the admission stage of this request only).
                match degraded.get() {
                    Some(entries) if !entries.is_empty() && executed => {
                        outcome.with_degradations(entries.clone())
                    }
                    _ => outcome,
                }
            }
        };
        if let Some(guard) = idem.take() {
            guard.complete(&outcome);
        }
        trace.ran(Stage::Outcome);
        for o in &self.observers {
            o.on_outcome(&outcome);
        }
        outcome
    }

    /// Runs a turn's calls concurrently; a denial carrying `stop` cancels the calls still
    /// pending, which end as `Cancelled`. Outcomes come back in request order.
    pub async fn execute_turn(
        &self,
        requests: Vec<ExecutionRequest>,
        context: &ExecutionContext,
    ) -> Vec<ExecutionOutcome> {
        let token = CancelToken::new();
        let mut pending: Vec<Option<Pin<Box<dyn Future<Output = ExecutionOutcome> + Send + '_>>>> =
            requests
                .into_iter()
                .map(|r| {
                    let options = ExecuteOptions::new().cancel(token.clone());
                    let f: Pin<Box<dyn Future<Output = ExecutionOutcome> + Send + '_>> =
                        Box::pin(self.execute_with(r, context, options));
                    Some(f)
                })
                .collect();
        let mut done: Vec<Option<ExecutionOutcome>> = pending.iter().map(|_| None).collect();
        std::future::poll_fn(|cx| {
            let mut again = true;
            while again {
                again = false;
                for (slot, out) in pending.iter_mut().zip(done.iter_mut()) {
                    let Some(fut) = slot else { continue };
                    if let Poll::Ready(o) = fut.as_mut().poll(cx) {
                        *slot = None;
                        if matches!(o, ExecutionOutcome::Denied { stop: true, .. })
                            && !token.is_cancelled()
                        {
                            tracing::info!(request = %o.request_id(), "denial stops the turn");
                            token.cancel();
                            again = true;
                        }
                        *out = Some(o);
                    }
                }
            }
            if pending.iter().all(Option::is_none) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
        done.into_iter().flatten().collect()
    }

    fn panicked(
        &self,
        request: &ExecutionRequest,
        executed: bool,
        panic: &str,
    ) -> ExecutionOutcome {
        tracing::error!(request = %request.request_id(), panic, "execution panicked");
        if executed {
            ExecutionOutcome::Failed {
                request_id: request.request_id().clone(),
                profile: self.profile,
                failure: Failure {
                    kind: "panic".into(),
                    message: format!("panicked: {panic}"),
                },
                call_executed: true,
                evidence: Vec::new(),
                degradations: Vec::new(),
            }
        } else {
            self.denied(
                request,
                DecisionReason::new(
                    ReasonCode::EvaluatorFailed,
                    format!("an interceptor panicked: {panic}"),
                ),
                "executor",
                false,
            )
        }
    }

    fn cancelled(&self, request: &ExecutionRequest, executed: bool) -> ExecutionOutcome {
        ExecutionOutcome::Cancelled {
            request_id: request.request_id().clone(),
            profile: self.profile,
            call_executed: executed,
            degradations: Vec::new(),
        }
    }

    fn timed_out(&self, request: &ExecutionRequest, executed: bool) -> ExecutionOutcome {
        ExecutionOutcome::TimedOut {
            request_id: request.request_id().clone(),
            profile: self.profile,
            call_executed: executed,
            degradations: Vec::new(),
        }
    }

    fn denied(
        &self,
        request: &ExecutionRequest,
        reason: DecisionReason,
        evaluator: &str,
        stop: bool,
    ) -> ExecutionOutcome {
        ExecutionOutcome::Denied {
            request_id: request.request_id().clone(),
            profile: self.profile,
            reason,
            evaluator: evaluator.to_owned(),
            stop,
            evidence: Vec::new(),
        }
    }

    /// A refusal at `stage`: reported to observers, then the typed outcome.
    fn refuse(
        &self,
        trace: &Trace<'_>,
        stage: Stage,
        request: &ExecutionRequest,
        reason: DecisionReason,
        evaluator: &str,
        stop: bool,
    ) -> Ended {
        tracing::debug!(request = %request.request_id(), ?stage, reason = %reason.message, "denied");
        trace.decision(stage, || {
            AdmissionDecision::new(Disposition::Deny, reason.clone(), evaluator).ok()
        });
        Ended::Outcome(self.denied(request, reason, evaluator, stop))
    }

    async fn pipeline<'s>(
        &'s self,
        request: &ExecutionRequest,
        context: &ExecutionContext,
        approvals: &[ApprovalReceipt],
        progress: Progress<'_>,
        idem: &mut Option<IdemGuard<'s>>,
        trace: &Trace<'_>,
    ) -> ExecutionOutcome {
        match self
            .stages(request, context, approvals, progress, idem, trace)
            .await
        {
            Ended::Outcome(o) => o,
        }
    }

    #[allow(clippy::too_many_lines)] // the stage order reads best as one function
    async fn stages<'s>(
        &'s self,
        request: &ExecutionRequest,
        context: &ExecutionContext,
        approvals: &[ApprovalReceipt],
        progress: Progress<'_>,
        idem: &mut Option<IdemGuard<'s>>,
        trace: &Trace<'_>,
    ) -> Ended {
        // 1. Resolve.
        trace.ran(Stage::Resolve);
        let entry = match self.registry.entry(request.action()) {
            Ok(e) => e,
            Err(e) => {
                let code = ReasonCode::UnknownAction;
                return self.refuse(
                    trace,
                    Stage::Resolve,
                    request,
                    DecisionReason::new(code, e.to_string()),
                    "registry",
                    false,
                );
            }
        };
        trace.allow(
            Stage::Resolve,
            "registry",
            entry.descriptor.name(),
            ReasonCode::UnknownAction,
        );

        // 2. Validate against the input schema (no user code runs).
        trace.ran(Stage::Validate);
        let mut args = request.arguments().clone();
        if let Err(message) = validate(&entry, &mut args) {
            return self.refuse(
                trace,
                Stage::Validate,
                request,
                DecisionReason::new(
                    ReasonCode::InvalidArguments,
                    format!(
                        "arguments of `{}` fail its schema: {message}",
                        entry.descriptor.name()
                    ),
                ),
                "schema",
                false,
            );
        }
        trace.allow(
            Stage::Validate,
            "schema",
            "arguments match the schema",
            ReasonCode::InvalidArguments,
        );

        // 3. Bind the trusted context: scope, principal claim, policy snapshot, backend.
        trace.ran(Stage::BindContext);
        if let Err(e) = context.check_request(request) {
            return self.refuse(
                trace,
                Stage::BindContext,
                request,
                DecisionReason::new(ReasonCode::ContextMismatch, e.to_string()),
                "context",
                false,
            );
        }
        let policy_index = match self.policy_index(context) {
            Ok(i) => i,
            Err(e) => {
                return self.refuse(
                    trace,
                    Stage::BindContext,
                    request,
                    DecisionReason::new(ReasonCode::ContextMismatch, e.to_string()),
                    "context",
                    false,
                );
            }
        };
        if let Err(why) = self.check_backend(context.effect_backend()) {
            return self.refuse(
                trace,
                Stage::BindContext,
                request,
                DecisionReason::new(ReasonCode::ContextMismatch, why),
                "context",
                false,
            );
        }
        let Some(plan) = self.plan_for(&entry, policy_index) else {
            return self.refuse(
                trace,
                Stage::BindContext,
                request,
                DecisionReason::new(ReasonCode::ContextMismatch, "no policy for this context"),
                "context",
                false,
            );
        };
        trace.allow(
            Stage::BindContext,
            "context",
            "request agrees with its trusted context",
            ReasonCode::ContextMismatch,
        );
        if let Some(key) = request.idempotency_key() {
            let key = IdemKey {
                principal: context.authenticated_principal().id.to_string(),
                scope: context.execution_scope().describe(),
                action: entry.descriptor.name().to_owned(),
                key: key.to_owned(),
            };
            match self.reserve(key, &args, request, idem) {
                Ok(()) => {}
                Err(o) => return Ended::Outcome(*o),
            }
        }

        // 4. Admission: containment preflight, then the capacity lease (held to the end).
        trace.ran(Stage::Admit);
        match self.preflight(&plan) {
            Err(why) => {
                return self.refuse(
                    trace,
                    Stage::Admit,
                    request,
                    DecisionReason::new(ReasonCode::Containment, why),
                    "backend",
                    false,
                );
            }
            Ok(degraded) => {
                if !degraded.is_empty() {
                    tracing::warn!(
                        request = %request.request_id(),
                        capabilities = ?degraded.iter().map(|e| e.capability).collect::<Vec<_>>(),
                        "optional containment not proven: the call runs degraded"
                    );
                }
                let _ = progress.degraded.set(degraded);
            }
        }
        let _lease = match &self.capacity {
            None => None,
            Some(capacity) => match capacity.try_acquire(entry.descriptor.name(), self.now()) {
                Ok(lease) => Some(lease),
                Err(full) => {
                    let reason = DecisionReason::new(ReasonCode::Capacity, full.reason);
                    trace.decision(Stage::Admit, || {
                        AdmissionDecision::defer(reason.clone(), "capacity", full.retry_at).ok()
                    });
                    return Ended::Outcome(ExecutionOutcome::Deferred {
                        request_id: request.request_id().clone(),
                        profile: self.profile,
                        reason,
                        retry_at: full.retry_at,
                    });
                }
            },
        };
        trace.allow(Stage::Admit, "capacity", "admitted", ReasonCode::Capacity);

        // 5. Governed evidence checkpoint (skipped in the minimal profile).
        self.planned_skip(trace, &plan, Stage::EvidenceStart);

        // 6–8. Session gate, intrinsic guards, policy and security hooks on the request's
        // arguments.
        if let Some(ended) = self
            .gate_and_guards(trace, &plan, request, context, &args, false)
            .await
        {
            return ended;
        }
        trace.ran(Stage::Authorize);
        let mut approved: Vec<ApprovalId> = Vec::new();
        let mut changed = false;
        match self
            .authorize(&plan, request, context, &args, approvals, false)
            .await
        {
            Security::Allow {
                replacement,
                approved_by,
            } => {
                approved.extend(approved_by);
                if let Some(r) = replacement
                    && r != args
                {
                    args = r;
                    changed = true;
                }
                trace.allow(
                    Stage::Authorize,
                    plan.policy.snapshot().policy_id.as_str(),
                    "authorized",
                    ReasonCode::PolicyRule,
                );
            }
            Security::Deny {
                reason,
                evaluator,
                stop,
            } => return self.refuse(trace, Stage::Authorize, request, reason, &evaluator, stop),
            Security::Escalate {
                reason,
                evaluator,
                authority,
                replaced,
            } => {
                return self.escalate(
                    trace,
                    Stage::Authorize,
                    &plan,
                    request,
                    replaced.as_ref().unwrap_or(&args),
                    reason,
                    &evaluator,
                    authority,
                );
            }
        }

        // 9. User transforms, each on the current arguments; a failure denies.
        if plan.transforms.is_empty() {
            self.planned_skip(trace, &plan, Stage::Transform);
        } else {
            trace.ran(Stage::Transform);
            for t in &plan.transforms {
                let call = CallView {
                    request_id: request.request_id(),
                    action: &plan.entry.descriptor,
                    arguments: &args,
                    context,
                    session_id: request.session_id(),
                };
                match t.transform(&call).await {
                    Ok(None) => {}
                    Ok(Some(next)) => {
                        if next != args {
                            args = next;
                            changed = true;
                        }
                    }
                    Err(e) => {
                        return self.refuse(
                            trace,
                            Stage::Transform,
                            request,
                            DecisionReason::new(
                                ReasonCode::Transform,
                                format!("a transform failed: {e}"),
                            ),
                            "transform",
                            false,
                        );
                    }
                }
            }
        }

        // 10–11. Re-validate and re-authorize, when anything changed the arguments.
        if changed {
            trace.ran(Stage::Revalidate);
            if let Err(message) = validate(&plan.entry, &mut args) {
                return self.refuse(
                    trace,
                    Stage::Revalidate,
                    request,
                    DecisionReason::new(
                        ReasonCode::Transform,
                        format!("transformed arguments fail the schema: {message}"),
                    ),
                    "schema",
                    false,
                );
            }
            trace.allow(
                Stage::Revalidate,
                "schema",
                "transformed arguments match the schema",
                ReasonCode::Transform,
            );
            trace.ran(Stage::Reauthorize);
            if let Some(ended) = self
                .gate_and_guards(trace, &plan, request, context, &args, true)
                .await
            {
                return ended;
            }
            match self
                .authorize(&plan, request, context, &args, approvals, true)
                .await
            {
                Security::Allow { approved_by, .. } => {
                    approved.extend(approved_by);
                    trace.allow(
                        Stage::Reauthorize,
                        plan.policy.snapshot().policy_id.as_str(),
                        "final arguments authorized",
                        ReasonCode::PolicyRule,
                    );
                }
                Security::Deny {
                    reason,
                    evaluator,
                    stop,
                } => {
                    return self.refuse(
                        trace,
                        Stage::Reauthorize,
                        request,
                        reason,
                        &evaluator,
                        stop,
                    );
                }
                Security::Escalate {
                    reason,
                    evaluator,
                    authority,
                    ..
                } => {
                    return self.escalate(
                        trace,
                        Stage::Reauthorize,
                        &plan,
                        request,
                        &args,
                        reason,
                        &evaluator,
                        authority,
                    );
                }
            }
        } else {
            trace.skipped(Stage::Revalidate, "arguments unchanged");
            trace.skipped(Stage::Reauthorize, "arguments and policy inputs unchanged");
        }

        // Receipts that approved this call are used now, once, atomically.
        if !approved.is_empty()
            && let Err(id) = self.consume(&approved)
        {
            let stage = if changed {
                Stage::Reauthorize
            } else {
                Stage::Authorize
            };
            return self.refuse(
                trace,
                stage,
                request,
                DecisionReason::new(
                    ReasonCode::ApprovalRefused,
                    format!("approval receipt {id} was already used"),
                ),
                "approval",
                false,
            );
        }

        // 12. Evidence checkpoint before invocation (skipped in the minimal profile).
        self.planned_skip(trace, &plan, Stage::EvidenceInvoke);

        // 13. Consume the token and invoke once.
        trace.ran(Stage::Invoke);
        let keep_args = !(plan.post.is_empty() && plan.on_error.is_empty());
        let call_args = if keep_args {
            Value::Object(args.clone())
        } else {
            Value::Object(std::mem::take(&mut args))
        };
        let token =
            InvocationToken::mint(request.request_id().clone(), plan.entry.descriptor.name());
        progress.invoked.store(true, Ordering::Release);
        let result = caught!(plan.entry.tool.invoke(token, call_args));

        // 14. Post and error handlers, then the typed outcome.
        let view = CallView {
            request_id: request.request_id(),
            action: &plan.entry.descriptor,
            arguments: &args,
            context,
            session_id: request.session_id(),
        };
        let failure = match result {
            Ok(Ok(value)) => {
                if plan.post.is_empty() && plan.on_error.is_empty() {
                    self.planned_skip(trace, &plan, Stage::Handlers);
                    return Ended::Outcome(self.succeeded(request, value));
                }
                trace.ran(Stage::Handlers);
                let mut value = value;
                let mut failure = None;
                for h in &plan.post {
                    match h.after(&view, &value).await {
                        Ok(None) => {}
                        Ok(Some(replacement)) => value = replacement,
                        Err(e) => {
                            failure = Some(InvocationFailure {
                                kind: "post_handler".into(),
                                message: e.message,
                            });
                            break;
                        }
                    }
                }
                match failure {
                    None => return Ended::Outcome(self.succeeded(request, value)),
                    Some(f) => f,
                }
            }
            Ok(Err(ToolError::Ambiguous { message })) => {
                self.planned_skip(trace, &plan, Stage::Handlers);
                tracing::warn!(request = %request.request_id(), %message, "result ambiguous; not retried");
                return Ended::Outcome(ExecutionOutcome::Ambiguous {
                    request_id: request.request_id().clone(),
                    profile: self.profile,
                    message,
                    degradations: Vec::new(),
                });
            }
            Ok(Err(ToolError::Failed { kind, message })) => {
                if keep_args {
                    trace.ran(Stage::Handlers);
                } else {
                    self.planned_skip(trace, &plan, Stage::Handlers);
                }
                InvocationFailure { kind, message }
            }
            Err(panic) => {
                if keep_args {
                    trace.ran(Stage::Handlers);
                } else {
                    self.planned_skip(trace, &plan, Stage::Handlers);
                }
                tracing::error!(request = %request.request_id(), %panic, "tool panicked");
                InvocationFailure {
                    kind: "panic".into(),
                    message: format!("the tool panicked: {panic}"),
                }
            }
        };
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
        Ended::Outcome(match replacement {
            Some(v) => self.succeeded(request, v),
            None => ExecutionOutcome::Failed {
                request_id: request.request_id().clone(),
                profile: self.profile,
                failure: Failure {
                    kind: failure.kind,
                    message: failure.message,
                },
                call_executed: true,
                evidence: Vec::new(),
                degradations: Vec::new(),
            },
        })
    }

    fn succeeded(&self, request: &ExecutionRequest, result: Value) -> ExecutionOutcome {
        ExecutionOutcome::Succeeded {
            request_id: request.request_id().clone(),
            profile: self.profile,
            result,
            evidence: Vec::new(),
            degradations: Vec::new(),
        }
    }

    fn planned_skip(&self, trace: &Trace<'_>, plan: &ExecutionPlan, stage: Stage) {
        match plan.mode(stage) {
            StageMode::Skip(why) => trace.skipped(stage, why),
            StageMode::Run | StageMode::WhenChanged => trace.ran(stage),
        }
    }

    fn check_backend(&self, named: &BackendRef) -> Result<(), String> {
        let Some(report) = &self.backend else {
            return Ok(());
        };
        if named.name() != report.backend.name() {
            return Err(format!(
                "the context names backend `{}`, this executor runs `{}`",
                named.name(),
                report.backend.name()
            ));
        }
        if let (Some(want), Some(have)) = (named.capability_digest(), &self.backend_digest)
            && want != have
        {
            return Err(format!(
                "the context was bound to capability report {want}, the backend reports {have}"
            ));
        }
        Ok(())
    }

    /// The containment preflight: `Err` names every required capability the backend's report
    /// does not show `enforced`; `Ok` lists the optional ones it does not (the degradations).
    fn preflight(&self, plan: &ExecutionPlan) -> Result<Vec<CapabilityEntry>, String> {
        let backend = self
            .backend
            .as_ref()
            .map_or("no backend report", |r| r.backend.name());
        let unproven = |c: &Capability| -> Option<CapabilityEntry> {
            let entry = self
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

    fn reserve<'s>(
        &'s self,
        key: IdemKey,
        args: &Map<String, Value>,
        request: &ExecutionRequest,
        idem: &mut Option<IdemGuard<'s>>,
    ) -> Result<(), Box<ExecutionOutcome>> {
        let mut table = self
            .idempotency
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match table.get(&key) {
            Some(IdemState::Done(done)) => {
                let (arguments, outcome) = &**done;
                if arguments == args {
                    tracing::debug!(request = %request.request_id(), "idempotent replay");
                    return Err(Box::new(outcome.clone()));
                }
                return Err(Box::new(self.denied(
                    request,
                    DecisionReason::new(
                        ReasonCode::InvalidArguments,
                        "idempotency key already used with other arguments",
                    ),
                    "idempotency",
                    false,
                )));
            }
            Some(IdemState::InFlight) => {
                return Err(Box::new(ExecutionOutcome::Deferred {
                    request_id: request.request_id().clone(),
                    profile: self.profile,
                    reason: DecisionReason::new(
                        ReasonCode::Capacity,
                        "a request with this idempotency key is in flight",
                    ),
                    retry_at: None,
                }));
            }
            None => {}
        }
        table.insert(key.clone(), IdemState::InFlight);
        *idem = Some(IdemGuard {
            table: &self.idempotency,
            key: Some(key),
            arguments: args.clone(),
        });
        Ok(())
    }

    /// The session gate (first pass: its own stage) and intrinsic guards.
    async fn gate_and_guards(
        &self,
        trace: &Trace<'_>,
        plan: &ExecutionPlan,
        request: &ExecutionRequest,
        context: &ExecutionContext,
        args: &Map<String, Value>,
        final_pass: bool,
    ) -> Option<Ended> {
        let call = CallView {
            request_id: request.request_id(),
            action: &plan.entry.descriptor,
            arguments: args,
            context,
            session_id: request.session_id(),
        };
        let gate_stage = if final_pass {
            Stage::Reauthorize
        } else {
            Stage::SessionGate
        };
        match &plan.gate {
            None => {
                if !final_pass {
                    self.planned_skip(trace, plan, Stage::SessionGate);
                }
            }
            Some(gate) => {
                if !final_pass {
                    trace.ran(Stage::SessionGate);
                }
                let answer = caught!(gate.authorize(&call));
                let refusal = match answer {
                    Ok(Ok(true)) => None,
                    Ok(Ok(false)) => Some("the session gate refused the call".to_owned()),
                    Ok(Err(e)) => Some(format!("the session gate failed: {e}")),
                    Err(panic) => Some(format!("the session gate panicked: {panic}")),
                };
                if let Some(message) = refusal {
                    return Some(self.refuse(
                        trace,
                        gate_stage,
                        request,
                        DecisionReason::new(ReasonCode::GateDenied, message),
                        "session_gate",
                        false,
                    ));
                }
                if !final_pass {
                    trace.allow(
                        Stage::SessionGate,
                        "session_gate",
                        "the session gate allowed",
                        ReasonCode::GateDenied,
                    );
                }
            }
        }
        let guard_stage = if final_pass {
            Stage::Reauthorize
        } else {
            Stage::Guards
        };
        if !final_pass {
            trace.ran(Stage::Guards);
        }
        let tool_guard = plan.entry.tool.guard(args).err();
        let refusal = tool_guard.or_else(|| plan.guards.iter().find_map(|g| g.check(&call).err()));
        if let Some(message) = refusal {
            return Some(self.refuse(
                trace,
                guard_stage,
                request,
                DecisionReason::new(ReasonCode::Guard, message),
                "guard",
                false,
            ));
        }
        if !final_pass {
            trace.allow(Stage::Guards, "guard", "guards passed", ReasonCode::Guard);
        }
        None
    }

    /// One security pass: the policy, then every security hook, then approval receipts for an
    /// escalation. In the final pass a hook may not change the arguments.
    async fn authorize(
        &self,
        plan: &ExecutionPlan,
        request: &ExecutionRequest,
        context: &ExecutionContext,
        args: &Map<String, Value>,
        approvals: &[ApprovalReceipt],
        final_pass: bool,
    ) -> Security {
        let query = PolicyQuery {
            request_id: request.request_id(),
            action: &plan.entry.descriptor,
            arguments: args,
            context,
            session_id: request.session_id(),
        };
        let mut escalation: Option<(DecisionReason, String, String)> = None;
        match caught!(plan.policy.evaluate(&query)) {
            Err(panic) => {
                return Security::Deny {
                    reason: DecisionReason::new(
                        ReasonCode::EvaluatorFailed,
                        format!("the policy evaluator panicked: {panic}"),
                    ),
                    evaluator: "policy".into(),
                    stop: false,
                };
            }
            Ok(Err(e)) => {
                return Security::Deny {
                    reason: DecisionReason::new(ReasonCode::EvaluatorFailed, e.to_string()),
                    evaluator: "policy".into(),
                    stop: false,
                };
            }
            Ok(Ok(answer)) => match answer.disposition() {
                Disposition::Allow => {}
                Disposition::Deny => {
                    return Security::Deny {
                        reason: answer.reason().clone(),
                        evaluator: answer.evaluator().to_owned(),
                        stop: answer.stop(),
                    };
                }
                Disposition::Escalate => {
                    escalation = Some((
                        answer.reason().clone(),
                        answer.evaluator().to_owned(),
                        answer.authority().to_owned(),
                    ));
                }
                Disposition::Defer => {
                    return Security::Deny {
                        reason: DecisionReason::new(
                            ReasonCode::EvaluatorFailed,
                            "the policy answered defer, which only capacity may",
                        ),
                        evaluator: answer.evaluator().to_owned(),
                        stop: false,
                    };
                }
            },
        }
        let mut current: Option<Map<String, Value>> = None;
        for hook in &plan.security {
            let call = CallView {
                request_id: request.request_id(),
                action: &plan.entry.descriptor,
                arguments: current.as_ref().unwrap_or(args),
                context,
                session_id: request.session_id(),
            };
            let verdict = match caught!(hook.check(&call)) {
                Ok(Ok(v)) => v,
                Ok(Err(e)) => {
                    return Security::Deny {
                        reason: DecisionReason::new(
                            ReasonCode::EvaluatorFailed,
                            format!("security hook `{}` failed: {e}", hook.name()),
                        ),
                        evaluator: hook.name().to_owned(),
                        stop: false,
                    };
                }
                Err(panic) => {
                    return Security::Deny {
                        reason: DecisionReason::new(
                            ReasonCode::EvaluatorFailed,
                            format!("security hook `{}` panicked: {panic}", hook.name()),
                        ),
                        evaluator: hook.name().to_owned(),
                        stop: false,
                    };
                }
            };
            match verdict {
                HookVerdict::Pass => {}
                HookVerdict::Replace(next) => {
                    if final_pass {
                        if &next != call.arguments {
                            return Security::Deny {
                                reason: DecisionReason::new(
                                    ReasonCode::Transform,
                                    format!(
                                        "security hook `{}` changed the arguments during the final pass",
                                        hook.name()
                                    ),
                                ),
                                evaluator: hook.name().to_owned(),
                                stop: false,
                            };
                        }
                    } else {
                        current = Some(next);
                    }
                }
                HookVerdict::Deny { reason, stop } => {
                    return Security::Deny {
                        reason,
                        evaluator: hook.name().to_owned(),
                        stop,
                    };
                }
                HookVerdict::Escalate { reason, authority } => {
                    if escalation.is_none() {
                        escalation = Some((reason, hook.name().to_owned(), authority));
                    }
                }
            }
        }
        let Some((reason, evaluator, authority)) = escalation else {
            return Security::Allow {
                replacement: current,
                approved_by: None,
            };
        };
        // An escalation: a presented receipt bound to exactly this call approves it.
        let evaluated = current.as_ref().unwrap_or(args);
        if !approvals.is_empty() {
            match self.match_receipt(plan, request, evaluated, approvals) {
                Ok(id) => {
                    return Security::Allow {
                        replacement: current,
                        approved_by: Some(id),
                    };
                }
                Err(why) => {
                    let message = format!("{} ({why})", reason.message);
                    let mut reason = reason;
                    reason.message = message;
                    return Security::Escalate {
                        reason,
                        evaluator,
                        authority,
                        replaced: current,
                    };
                }
            }
        }
        Security::Escalate {
            reason,
            evaluator,
            authority,
            replaced: current,
        }
    }

    fn match_receipt(
        &self,
        plan: &ExecutionPlan,
        request: &ExecutionRequest,
        args: &Map<String, Value>,
        approvals: &[ApprovalReceipt],
    ) -> Result<ApprovalId, String> {
        let digest = arguments_digest(args)
            .map_err(|e| format!("no receipt can bind these arguments: {e}"))?;
        let now = self.now();
        let policy = &plan.policy.snapshot().digest;
        let book = self
            .approvals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut why = Vec::new();
        for r in approvals {
            if book.used.contains_key(r.approval_id()) {
                why.push(format!("receipt {} was already used", r.approval_id()));
                continue;
            }
            if let Some((escalated, _)) = book.issued.get(r.approval_id())
                && escalated == request.request_id()
            {
                why.push(format!(
                    "receipt {} answers request {escalated}: an approval starts a new attempt with a new request id",
                    r.approval_id()
                ));
                continue;
            }
            match r.check_binding(plan.entry.descriptor.name(), &digest, Some(policy), now) {
                Ok(()) => return Ok(r.approval_id().clone()),
                Err(m) => why.push(format!("receipt {}: {m}", r.approval_id())),
            }
        }
        Err(why.join("; "))
    }

    fn consume(&self, ids: &[ApprovalId]) -> Result<(), ApprovalId> {
        let mut book = self
            .approvals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(id) = ids.iter().find(|id| book.used.contains_key(*id)) {
            return Err(id.clone());
        }
        let now = self.now();
        let expiry = Timestamp(now.unix_millis().saturating_add(self.approval_ttl_ms));
        for id in ids {
            book.used.insert(id.clone(), expiry);
        }
        book.prune(now);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn escalate(
        &self,
        trace: &Trace<'_>,
        stage: Stage,
        plan: &ExecutionPlan,
        request: &ExecutionRequest,
        args: &Map<String, Value>,
        reason: DecisionReason,
        evaluator: &str,
        authority: String,
    ) -> Ended {
        let digest = match arguments_digest(args) {
            Ok(d) => d,
            Err(e) => {
                return self.refuse(
                    trace,
                    stage,
                    request,
                    DecisionReason::new(
                        ReasonCode::Unparseable,
                        format!("the arguments have no canonical form, so no approval can bind them: {e}"),
                    ),
                    evaluator,
                    false,
                );
            }
        };
        let now = self.now();
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let id_digest = Digest::of_bytes(
            format!("{}\u{0}{n}\u{0}{}", request.request_id(), now.unix_millis()).as_bytes(),
        );
        let approval_id = match ApprovalId::new(format!("ap-{}", &id_digest.hex()[..24])) {
            Ok(id) => id,
            Err(e) => {
                return self.refuse(
                    trace,
                    stage,
                    request,
                    DecisionReason::new(ReasonCode::EvaluatorFailed, e.to_string()),
                    evaluator,
                    false,
                );
            }
        };
        let expires_at = Timestamp(now.unix_millis().saturating_add(self.approval_ttl_ms));
        let approval = ApprovalRequest {
            approval_id: approval_id.clone(),
            request_id: request.request_id().clone(),
            action: plan.entry.descriptor.name().to_owned(),
            arguments_digest: digest,
            policy_digest: Some(plan.policy.snapshot().digest.clone()),
            authority,
            reason: reason.clone(),
            expires_at: Some(expires_at),
        };
        {
            let mut book = self
                .approvals
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            book.issued
                .insert(approval_id, (request.request_id().clone(), expires_at));
            book.prune(now);
        }
        trace.decision(stage, || {
            AdmissionDecision::escalate(reason, evaluator, approval.clone()).ok()
        });
        Ended::Outcome(ExecutionOutcome::Escalated {
            request_id: request.request_id().clone(),
            profile: self.profile,
            approval,
            evidence: Vec::new(),
        })
    }

    /// Reports a reviewer's answer to the observers (used by the approval loop).
    pub(crate) fn observe_review(&self, request_id: &RequestId, decision: AdmissionDecision) {
        let event = DecisionEvent {
            request_id: request_id.clone(),
            stage: Stage::Authorize,
            decision,
        };
        for o in &self.observers {
            o.on_decision(&event);
        }
    }
}

/// What the pipeline tells `execute_with` while it runs (the pipeline may be dropped at a
/// deadline or a cancellation, so these live outside it).
#[derive(Clone, Copy)]
struct Progress<'a> {
    /// The callable was reached.
    invoked: &'a AtomicBool,
    /// Optional containment the backend did not prove (set at admission).
    degraded: &'a OnceLock<Vec<CapabilityEntry>>,
}

/// A capability's name as serialized (`network_off`).
fn capability_name(c: Capability) -> String {
    serde_json::to_value(c)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{c:?}"))
}

enum Race<T> {
    Done(T),
    Cancelled,
    TimedOut,
}

/// The digest of an arguments object's canonical JSON.
pub fn arguments_digest(
    args: &Map<String, Value>,
) -> Result<Digest, warden_contracts::ContractError> {
    Digest::of_serialize(args)
}

/// Validates `args` against the entry's schema without copying them.
fn validate(entry: &Entry, args: &mut Map<String, Value>) -> Result<(), String> {
    let value = Value::Object(std::mem::take(args));
    let result = if entry.validator.is_valid(&value) {
        Ok(())
    } else {
        match entry.validator.validate(&value) {
            Ok(()) => Ok(()),
            Err(e) => {
                let path = e.instance_path().to_string();
                Err(if path.is_empty() {
                    e.to_string()
                } else {
                    format!("{path}: {e}")
                })
            }
        }
    };
    if let Value::Object(m) = value {
        *args = m;
    }
    result
}

#[async_trait]
impl Executor for ActionExecutor {
    async fn execute(
        &self,
        request: ExecutionRequest,
        context: &ExecutionContext,
    ) -> ExecutionOutcome {
        self.execute_with(request, context, ExecuteOptions::default())
            .await
    }
}
