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
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::Poll;

use async_trait::async_trait;
use serde_json::{Map, Value};
use warden_contracts::{
    ActionRef, AdmissionDecision, ApprovalId, ApprovalReceipt, ApprovalRequest, BackendRef,
    Capability, CapabilityEntry, CapabilityReport, CapabilityStatus, Capacity, DecisionEvent,
    DecisionReason, Digest, Disposition, ExecutionContext, ExecutionOutcome, ExecutionRequest,
    Executor, Failure, Observer, OperationId, PolicyEvaluator, PolicyQuery, ReasonCode, RecordId,
    RequestId, RuntimeProfile, Stage, StageEvent, StageStatus, Timestamp,
};
use warden_evidence::payload::{GateLevel, GateVerdict};
use warden_evidence::{GateEvaluation, OperationStart};
use warden_policy::{Containment, NetworkRequirement, Requirement};

use crate::admission::{Clock, SystemClock};
use crate::cancel::CancelToken;
use crate::error::ExecutorError;
use crate::governed::{
    self, ExecutionReport, GovRun, Governance, OpState, Phase, StartAnswer, digest_of,
};
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
/// Low-level: for a Warden policy, [`crate::Runtime`] composes this builder from the policy.
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
    profile: Option<RuntimeProfile>,
    governance: Option<Governance>,
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
            profile: None,
            governance: None,
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
    /// `network_off` → `network_off` and `unix_sockets_off` (nothing when `allowed`),
    /// `env_allowlist` → `env_allowlist`, `process_isolation` → `process_isolation` and
    /// `descriptor_isolation`, each with the table's requirement.
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
            )
            .containment_for(
                action.clone(),
                Capability::ProcessIsolation,
                table.process_isolation,
            )
            .containment_for(
                action.clone(),
                Capability::DescriptorIsolation,
                table.process_isolation,
            );
        let network = match table.network_off {
            NetworkRequirement::Required => Some(Requirement::Required),
            NetworkRequirement::Optional => Some(Requirement::Optional),
            NetworkRequirement::Allowed => None,
        };
        if let Some(requirement) = network {
            b = b
                .containment_for(action.clone(), Capability::NetworkOff, requirement)
                .containment_for(action, Capability::UnixSocketsOff, requirement);
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
    /// Governs the executor: every request that passes admission opens an operation on the
    /// task boundary's chain, records each gate, and invokes only through the reducer's permit
    /// (docs/executor.md, "Governed execution"). The executor's profile becomes the
    /// boundary's (`governed` or `certifiable`). The boundary's policy must be one of the
    /// executor's evaluators.
    pub fn governance(mut self, governance: Governance) -> Self {
        self.governance = Some(governance);
        self
    }
    /// Asserts the runtime profile this composition must run under; `build` refuses a profile
    /// the composition does not back: `governed`/`certifiable` need [`Self::governance`] with
    /// that profile, `minimal` none, and `durable` (a Run state store) is not provided by
    /// Warden yet. Without it the profile follows from the governance (or is `minimal`).
    pub fn profile(mut self, profile: RuntimeProfile) -> Self {
        self.profile = Some(profile);
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
        let profile = match (self.profile, &self.governance) {
            (Some(RuntimeProfile::Durable), _) => {
                return Err(ExecutorError::Profile(
                    "`durable` needs a Run state store, which this composition does not provide"
                        .into(),
                ));
            }
            (None | Some(RuntimeProfile::Minimal), None) => RuntimeProfile::Minimal,
            (Some(p), None) => {
                return Err(ExecutorError::Profile(format!(
                    "`{}` needs governance (a task boundary's evidence recorder)",
                    profile_name(p)
                )));
            }
            (None, Some(g)) => g.profile(),
            (Some(p), Some(g)) => {
                if p != g.profile() {
                    return Err(ExecutorError::Profile(format!(
                        "asked for `{}`, the governance records `{}`",
                        profile_name(p),
                        profile_name(g.profile())
                    )));
                }
                p
            }
        };
        if let Some(g) = &self.governance {
            let bound = &g.recorder().binding().policy;
            if !self.policies.iter().any(|p| p.snapshot() == bound) {
                return Err(ExecutorError::Profile(format!(
                    "the task boundary is bound to policy {}, which no evaluator of this executor holds",
                    bound.digest
                )));
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
            profile,
            governance: self.governance,
            approvals: Mutex::new(ApprovalBook::default()),
            idempotency: Mutex::new(HashMap::new()),
            replays: Mutex::new(HashMap::new()),
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
    governance: Option<Governance>,
    plans: PlanCache,
    approvals: Mutex<ApprovalBook>,
    idempotency: Mutex<HashMap<IdemKey, IdemState>>,
    /// Governed: the outcomes of keyed operations this process closed, so a replay in this
    /// process answers the full outcome (evidence keeps only digests).
    replays: Mutex<HashMap<OperationId, ExecutionOutcome>>,
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
    /// Starts a builder over a registry (frozen by [`ExecutorBuilder::build`]). This is the
    /// low-level composition: it installs nothing a Warden policy declares. For a
    /// `warden-policy` snapshot use [`crate::Runtime`], which installs every table or refuses.
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

    /// The governance (governed and certifiable profiles): the task boundary's recorder.
    pub fn governance(&self) -> Option<&Governance> {
        self.governance.as_ref()
    }

    /// The operation that used approval `approval_id`, if one did: single use is durable in
    /// the governed profiles (the store's `approval_uses` index, written with the
    /// `operation_started` that consumed it, survives restarts); in the minimal profile this
    /// process's memory is all there is (`None` unless governed, see
    /// [`Self::approval_used_here`]).
    pub async fn approval_use(
        &self,
        approval_id: &ApprovalId,
    ) -> Result<Option<warden_evidence::OperationRef>, warden_evidence::GovernanceError> {
        let Some(g) = &self.governance else {
            return Ok(None);
        };
        g.recorder()
            .store()
            .find_approval_use(approval_id)
            .await
            .map_err(|source| warden_evidence::GovernanceError::Evidence {
                call_executed: false,
                source,
            })
    }

    /// Whether this executor (this process) accepted receipt `approval_id` already.
    pub fn approval_used_here(&self, approval_id: &ApprovalId) -> bool {
        self.approvals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .used
            .contains_key(approval_id)
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
                self.governance.is_some(),
            )
        })
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Runs one request in `context` and answers its typed outcome (an inherent method: no
    /// trait import needed; the contracts `Executor` port calls it).
    pub async fn execute(
        &self,
        request: ExecutionRequest,
        context: &ExecutionContext,
    ) -> ExecutionOutcome {
        self.execute_with(request, context, ExecuteOptions::default())
            .await
    }

    /// Runs one request with options (approval receipts, cancellation).
    pub async fn execute_with(
        &self,
        request: ExecutionRequest,
        context: &ExecutionContext,
        options: ExecuteOptions,
    ) -> ExecutionOutcome {
        self.execute_reported(request, context, options)
            .await
            .outcome
    }

    /// [`Self::execute_with`], also answering what governed evidence recorded for the request:
    /// its operation, every receipt (with its record type), the operation an idempotency key
    /// replayed, and an evidence failure (`call_executed()` says on which side of the call).
    #[allow(clippy::too_many_lines)] // one race, one close: they read best together
    pub async fn execute_reported(
        &self,
        request: ExecutionRequest,
        context: &ExecutionContext,
        options: ExecuteOptions,
    ) -> ExecutionReport {
        let invoked = AtomicBool::new(false);
        let degraded: OnceLock<Vec<CapabilityEntry>> = OnceLock::new();
        let mut idem: Option<IdemGuard<'_>> = None;
        let state = tokio::sync::Mutex::new(OpState::default());
        let shield = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let gov = self.governance.as_ref().map(|governance| GovRun {
            governance,
            state: &state,
            shield: &shield,
            stop: &stop,
        });
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
                        gov,
                    },
                    &mut idem,
                    &trace,
                ));
                let mut pipeline = pin!(CatchUnwind::new(pipeline));
                let mut sleep = pin!(sleep);
                let mut cancelled = pin!(cancelled);
                let (mut cancel_fired, mut time_fired) = (false, false);
                let raced = std::future::poll_fn(|cx| {
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
                    if cancel_fired || time_fired {
                        // Evidence work in progress finishes first (it wakes this task when
                        // done); the pipeline then stops before it could mint a token.
                        stop.store(true, Ordering::Release);
                        if shield.load(Ordering::Acquire) == 0 {
                            return Poll::Ready(if cancel_fired {
                                Race::Cancelled
                            } else {
                                Race::TimedOut
                            });
                        }
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
        // The governed operation's one terminal record, outside the race: the pipeline (and
        // any handle it held) is gone, and this is bounded evidence work.
        let governed = self.governance.is_some();
        let mut st = state.into_inner();
        let outcome = if governed {
            Box::pin(governed::close(&mut st, outcome, deadline)).await
        } else {
            outcome
        };
        if let (Some(op), Some(_), Phase::Closed) =
            (&st.operation_id, request.idempotency_key(), &st.phase)
        {
            let mut replays = self.replays.lock().unwrap_or_else(PoisonError::into_inner);
            if replays.len() >= 4096 {
                replays.clear();
            }
            replays.insert(op.clone(), outcome.clone());
        }
        if let Some(guard) = idem.take() {
            guard.complete(&outcome);
        }
        trace.ran(Stage::Outcome);
        for o in &self.observers {
            o.on_outcome(&outcome);
        }
        ExecutionReport {
            outcome,
            operation_id: st.operation_id,
            receipts: st.receipts,
            replay_of: st.replay_of,
            evidence_error: st.error,
        }
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
            evidence: Vec::new(),
            degradations: Vec::new(),
        }
    }

    fn timed_out(&self, request: &ExecutionRequest, executed: bool) -> ExecutionOutcome {
        ExecutionOutcome::TimedOut {
            request_id: request.request_id().clone(),
            profile: self.profile,
            call_executed: executed,
            evidence: Vec::new(),
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
        // Ungoverned idempotency is this process's memory; governed keys are durable and
        // checked when the operation opens (stage 5).
        if let Some(key) = request.idempotency_key().filter(|_| progress.gov.is_none()) {
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

        // 5. Governed evidence checkpoint: open the operation (`policy_bound` and
        // `operation_started`, both receipts required), or answer an idempotent replay. Only
        // requests that passed admission get here: deferrals and containment denials never
        // open an operation.
        let bound: Vec<ApprovalReceipt>;
        let mut unbound: Vec<String> = Vec::new();
        let approvals: &[ApprovalReceipt] = match progress.gov {
            None => {
                self.planned_skip(trace, &plan, Stage::EvidenceStart);
                approvals
            }
            Some(run) => {
                trace.ran(Stage::EvidenceStart);
                // Governed steps are boxed: their futures stay out of the ungoverned
                // profile's state machine (which every minimal call moves and allocates).
                let (start, receipt) = match Box::pin(self.operation_start(
                    &plan,
                    request,
                    context,
                    &args,
                    approvals,
                    &mut unbound,
                ))
                .await
                {
                    Ok(s) => s,
                    Err(reason) => {
                        return self.refuse(
                            trace,
                            Stage::EvidenceStart,
                            request,
                            reason,
                            "evidence",
                            false,
                        );
                    }
                };
                match Box::pin(run.start(start)).await {
                    StartAnswer::Started => {}
                    StartAnswer::Replay(replay) => {
                        tracing::debug!(request = %request.request_id(), operation = %replay.operation.operation_id, "idempotent replay from evidence");
                        return Ended::Outcome(self.replayed(&replay, request));
                    }
                    StartAnswer::Refused(reason) => {
                        return self.refuse(
                            trace,
                            Stage::EvidenceStart,
                            request,
                            reason,
                            "evidence",
                            false,
                        );
                    }
                }
                trace.allow(
                    Stage::EvidenceStart,
                    "evidence",
                    "operation started",
                    ReasonCode::Evidence,
                );
                bound = receipt.into_iter().collect();
                &bound
            }
        };
        let pass = Pass {
            approvals,
            unbound: &unbound,
        };

        // 6–8. Session gate, intrinsic guards, policy and security hooks on the request's
        // arguments (each evaluation recorded as it is produced, when governed).
        let site = match self
            .gates_pass(trace, progress.gov, &plan, request, context, &args, false)
            .await
        {
            Ok(site) => site,
            Err(ended) => return ended,
        };
        trace.ran(Stage::Authorize);
        let mut approved: Vec<ApprovalId> = Vec::new();
        let mut changed = false;
        match self
            .authorize(&plan, request, context, &args, &pass, false, site.as_ref())
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
            let site = match self
                .gates_pass(trace, progress.gov, &plan, request, context, &args, true)
                .await
            {
                Ok(site) => site,
                Err(ended) => return ended,
            };
            match self
                .authorize(&plan, request, context, &args, &pass, true, site.as_ref())
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

        // 12. The pre-call evidence checkpoint: the reducer's permit, or its recorded denial.
        match progress.gov {
            None => self.planned_skip(trace, &plan, Stage::EvidenceInvoke),
            Some(run) => {
                trace.ran(Stage::EvidenceInvoke);
                if let Err((reason, evaluator)) = Box::pin(run.checkpoint()).await {
                    return self.refuse(
                        trace,
                        Stage::EvidenceInvoke,
                        request,
                        reason,
                        evaluator,
                        false,
                    );
                }
                if run.stop_requested() {
                    // Cancelled or timed out while evidence was being written: the race ends
                    // the request here, before a token exists.
                    std::future::pending::<()>().await;
                }
                if let Err(e) = Box::pin(run.begin()).await {
                    return Ended::Outcome(ExecutionOutcome::Failed {
                        request_id: request.request_id().clone(),
                        profile: self.profile,
                        failure: Failure {
                            kind: "evidence".into(),
                            message: format!("the call was not started: {e}"),
                        },
                        call_executed: false,
                        evidence: Vec::new(),
                        degradations: Vec::new(),
                    });
                }
                trace.allow(
                    Stage::EvidenceInvoke,
                    "evidence",
                    "pre-call checkpoint complete",
                    ReasonCode::Evidence,
                );
            }
        }

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
                    evidence: Vec::new(),
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

    /// The session gate (first pass: its own stage) and intrinsic guards, each evaluation
    /// recorded as a hard gate when governed.
    /// Stages 6–8 on `args` (`recheck`: again, after a transform; a failure to digest them is
    /// refused at the session gate, or at re-authorization): the site the evaluations are
    /// recorded at when governed, once the session gate, the guards, the policy and the security
    /// hooks let the call through; `Err` is how the call ended.
    #[allow(clippy::too_many_arguments)]
    async fn gates_pass<'g>(
        &self,
        trace: &Trace<'_>,
        gov: Option<GovRun<'g>>,
        plan: &ExecutionPlan,
        request: &ExecutionRequest,
        context: &ExecutionContext,
        args: &Map<String, Value>,
        recheck: bool,
    ) -> Result<Option<GateSite<'g>>, Ended> {
        let stage = if recheck {
            Stage::Reauthorize
        } else {
            Stage::SessionGate
        };
        let site = gate_site(gov, args, recheck)
            .map_err(|reason| self.refuse(trace, stage, request, reason, "evidence", false))?;
        match self
            .gate_and_guards(trace, plan, request, context, args, recheck, site.as_ref())
            .await
        {
            Some(ended) => Err(ended),
            None => Ok(site),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn gate_and_guards(
        &self,
        trace: &Trace<'_>,
        plan: &ExecutionPlan,
        request: &ExecutionRequest,
        context: &ExecutionContext,
        args: &Map<String, Value>,
        final_pass: bool,
        site: Option<&GateSite<'_>>,
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
        let evidence_failed = |reason: DecisionReason, stage: Stage| {
            self.refuse(trace, stage, request, reason, "evidence", false)
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
                if let Some(site) = site {
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
                            gate_stage,
                            GateLevel::Hard,
                            verdict,
                            &reason,
                            None,
                        )
                        .await
                    {
                        return Some(evidence_failed(r, gate_stage));
                    }
                }
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
        // The tool's own guard first (`guard.tool`), then the composition's in order
        // (`guard.1`, …); the first refusal ends the pass.
        let mut refusal = None;
        let guards = std::iter::once(None).chain(plan.guards.iter().map(Some));
        for (i, guard) in guards.enumerate() {
            let result = match guard {
                None => plan.entry.tool.guard(args),
                Some(g) => g.check(&call),
            };
            if let Some(site) = site {
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
                    .record(&name, guard_stage, GateLevel::Hard, verdict, &reason, None)
                    .await
                {
                    return Some(evidence_failed(r, guard_stage));
                }
            }
            if let Err(message) = result {
                refusal = Some(DecisionReason::new(ReasonCode::Guard, message));
                break;
            }
        }
        if let Some(reason) = refusal {
            return Some(self.refuse(trace, guard_stage, request, reason, "guard", false));
        }
        if !final_pass {
            trace.allow(Stage::Guards, "guard", "guards passed", ReasonCode::Guard);
        }
        None
    }

    /// One security pass: the policy, then every security hook, then the soft denies (an
    /// escalation or a soft hook's denial): an approval receipt bound to exactly this call
    /// resolves the escalations, a recorded exception (governed) covers a soft deny, anything
    /// unresolved escalates (or denies, when no authority could approve it). In the final pass
    /// a hook may not change the arguments. Governed, every evaluation is recorded with its
    /// level as it is produced; soft denies once their resolution is known, at the end of the
    /// pass.
    #[allow(clippy::too_many_arguments, clippy::too_many_lines)]
    async fn authorize(
        &self,
        plan: &ExecutionPlan,
        request: &ExecutionRequest,
        context: &ExecutionContext,
        args: &Map<String, Value>,
        pass: &Pass<'_>,
        final_pass: bool,
        site: Option<&GateSite<'_>>,
    ) -> Security {
        let stage = if final_pass {
            Stage::Reauthorize
        } else {
            Stage::Authorize
        };
        let evidence_failed = |reason: DecisionReason| Security::Deny {
            reason,
            evaluator: "evidence".into(),
            stop: false,
        };
        // Records one evaluation when governed (the reason is built only then).
        macro_rules! record {
            ($gate:expr, $level:expr, $verdict:expr, $reason:expr, $digest:expr) => {
                if let Some(site) = site
                    && let Err(r) = site
                        .record($gate, stage, $level, $verdict, $reason, $digest)
                        .await
                {
                    return evidence_failed(r);
                }
            };
        }
        let query = PolicyQuery {
            request_id: request.request_id(),
            action: &plan.entry.descriptor,
            arguments: args,
            context,
            session_id: request.session_id(),
        };
        let mut pending: Vec<SoftDeny> = Vec::new();
        let deny_hard = |reason: DecisionReason, evaluator: String| (reason, evaluator);
        let policy_failure = match caught!(plan.policy.evaluate(&query)) {
            Err(panic) => Some(deny_hard(
                DecisionReason::new(
                    ReasonCode::EvaluatorFailed,
                    format!("the policy evaluator panicked: {panic}"),
                ),
                "policy".into(),
            )),
            Ok(Err(e)) => Some(deny_hard(
                DecisionReason::new(ReasonCode::EvaluatorFailed, e.to_string()),
                "policy".into(),
            )),
            Ok(Ok(answer)) => match answer.disposition() {
                Disposition::Allow => {
                    record!(
                        "policy",
                        GateLevel::Hard,
                        GateVerdict::Allow,
                        answer.reason(),
                        None
                    );
                    None
                }
                Disposition::Deny => {
                    record!(
                        "policy",
                        GateLevel::Hard,
                        GateVerdict::Deny,
                        answer.reason(),
                        None
                    );
                    return Security::Deny {
                        reason: answer.reason().clone(),
                        evaluator: answer.evaluator().to_owned(),
                        stop: answer.stop(),
                    };
                }
                Disposition::Escalate => {
                    pending.push(SoftDeny {
                        gate: "policy".into(),
                        reason: answer.reason().clone(),
                        evaluator: answer.evaluator().to_owned(),
                        authority: Some(answer.authority().to_owned()),
                        stop: false,
                        digest: None,
                    });
                    None
                }
                Disposition::Defer => Some(deny_hard(
                    DecisionReason::new(
                        ReasonCode::EvaluatorFailed,
                        "the policy answered defer, which only capacity may",
                    ),
                    answer.evaluator().to_owned(),
                )),
            },
        };
        if let Some((reason, evaluator)) = policy_failure {
            record!("policy", GateLevel::Hard, GateVerdict::Deny, &reason, None);
            return Security::Deny {
                reason,
                evaluator,
                stop: false,
            };
        }
        let mut current: Option<Map<String, Value>> = None;
        // The digest of the arguments the hooks see, once a hook replaced them.
        let mut current_digest: Option<Digest> = None;
        for (hook, level) in &plan.security {
            let call = CallView {
                request_id: request.request_id(),
                action: &plan.entry.descriptor,
                arguments: current.as_ref().unwrap_or(args),
                context,
                session_id: request.session_id(),
            };
            let name = hook.name();
            let digest = current_digest.as_ref();
            let verdict = match caught!(hook.check(&call)) {
                Ok(Ok(v)) => v,
                failed => {
                    // A failing evaluator never allows, whatever its level.
                    let message = match failed {
                        Ok(Err(e)) => format!("security hook `{name}` failed: {e}"),
                        Err(panic) => format!("security hook `{name}` panicked: {panic}"),
                        Ok(Ok(_)) => format!("security hook `{name}` failed"),
                    };
                    let reason = DecisionReason::new(ReasonCode::EvaluatorFailed, message);
                    record!(name, GateLevel::Hard, GateVerdict::Deny, &reason, digest);
                    return Security::Deny {
                        reason,
                        evaluator: name.to_owned(),
                        stop: false,
                    };
                }
            };
            let passed = || {
                DecisionReason::new(
                    ReasonCode::Permission,
                    format!("security hook `{name}` passed"),
                )
            };
            match verdict {
                HookVerdict::Pass => {
                    record!(name, *level, GateVerdict::Allow, &passed(), digest);
                }
                HookVerdict::Replace(next) => {
                    if final_pass {
                        if &next != call.arguments {
                            let reason = DecisionReason::new(
                                ReasonCode::Transform,
                                format!(
                                    "security hook `{name}` changed the arguments during the final pass"
                                ),
                            );
                            record!(name, GateLevel::Hard, GateVerdict::Deny, &reason, digest);
                            return Security::Deny {
                                reason,
                                evaluator: name.to_owned(),
                                stop: false,
                            };
                        }
                        record!(name, *level, GateVerdict::Allow, &passed(), digest);
                    } else {
                        record!(name, *level, GateVerdict::Allow, &passed(), digest);
                        if site.is_some() {
                            match digest_of(&next) {
                                Ok(d) => current_digest = Some(d),
                                Err(r) => return evidence_failed(r),
                            }
                        }
                        current = Some(next);
                    }
                }
                HookVerdict::Deny { reason, stop } => match level {
                    GateLevel::Hard => {
                        record!(name, GateLevel::Hard, GateVerdict::Deny, &reason, digest);
                        return Security::Deny {
                            reason,
                            evaluator: name.to_owned(),
                            stop,
                        };
                    }
                    GateLevel::Soft => pending.push(SoftDeny {
                        gate: name.to_owned(),
                        reason,
                        evaluator: name.to_owned(),
                        authority: None,
                        stop,
                        digest: current_digest.clone(),
                    }),
                    GateLevel::Advisory => {
                        tracing::warn!(request = %request.request_id(), hook = name, reason = %reason.message, "advisory denial: the call proceeds");
                        record!(
                            name,
                            GateLevel::Advisory,
                            GateVerdict::Deny,
                            &reason,
                            digest
                        );
                    }
                },
                HookVerdict::Escalate { reason, authority } => match level {
                    GateLevel::Advisory => {
                        tracing::warn!(request = %request.request_id(), hook = name, reason = %reason.message, "advisory escalation: the call proceeds");
                        record!(
                            name,
                            GateLevel::Advisory,
                            GateVerdict::Deny,
                            &reason,
                            digest
                        );
                    }
                    GateLevel::Hard | GateLevel::Soft => pending.push(SoftDeny {
                        gate: name.to_owned(),
                        reason,
                        evaluator: name.to_owned(),
                        authority: Some(authority),
                        stop: false,
                        digest: current_digest.clone(),
                    }),
                },
            }
        }
        if pending.is_empty() {
            return Security::Allow {
                replacement: current,
                approved_by: None,
            };
        }
        // The soft denies: an approval receipt bound to exactly this call resolves every
        // escalation; a recorded exception covers a soft deny; the rest stay unresolved.
        let evaluated = current.as_ref().unwrap_or(args);
        let approval =
            if pending.iter().any(|p| p.authority.is_some()) && !pass.approvals.is_empty() {
                Some(self.match_receipt(plan, request, evaluated, pass.approvals))
            } else {
                None
            };
        let approved_by = approval.as_ref().and_then(|a| a.as_ref().ok()).cloned();
        let now = self.now();
        let mut unresolved: Vec<SoftDeny> = Vec::new();
        for p in pending {
            let digest = p.digest.as_ref();
            if p.authority.is_some()
                && let Some(id) = &approved_by
            {
                let mut reason = p.reason.clone();
                reason.code = ReasonCode::Approved;
                reason.message = format!("{} (approved by receipt {id})", reason.message);
                record!(
                    &p.gate,
                    GateLevel::Soft,
                    GateVerdict::Allow,
                    &reason,
                    digest
                );
                continue;
            }
            if let Some(site) = site {
                let id = match site
                    .record(
                        &p.gate,
                        stage,
                        GateLevel::Soft,
                        GateVerdict::Deny,
                        &p.reason,
                        digest,
                    )
                    .await
                {
                    Ok(id) => id,
                    Err(r) => return evidence_failed(r),
                };
                let covered_digest = digest.unwrap_or(&site.digest).clone();
                if let Some(exception) = site.run.governance.exception_for(
                    plan.entry.descriptor.name(),
                    &p.gate,
                    &covered_digest,
                    now,
                ) {
                    if let Err(r) =
                        Box::pin(site.run.exception(exception, id, covered_digest)).await
                    {
                        return evidence_failed(r);
                    }
                    tracing::warn!(request = %request.request_id(), gate = %p.gate, exception = %exception.exception_id, "soft deny overridden by a recorded exception: any certificate is degraded");
                    continue;
                }
            }
            unresolved.push(p);
        }
        if unresolved.is_empty() {
            return Security::Allow {
                replacement: current,
                approved_by,
            };
        }
        // A soft deny no authority can approve denies.
        if let Some(p) = unresolved.iter().find(|p| p.authority.is_none()) {
            return Security::Deny {
                reason: p.reason.clone(),
                evaluator: p.evaluator.clone(),
                stop: p.stop,
            };
        }
        let p = unresolved.remove(0);
        let mut reason = p.reason;
        match approval {
            Some(Err(why)) => reason.message = format!("{} ({why})", reason.message),
            _ if !pass.unbound.is_empty() => {
                reason.message = format!("{} ({})", reason.message, pass.unbound.join("; "));
            }
            _ => {}
        }
        Security::Escalate {
            reason,
            evaluator: p.evaluator,
            authority: p.authority.unwrap_or_default(),
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
            match receipt_counts(plan, r, &digest, now) {
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

    /// Describes the operation stage 5 opens, from the trusted inputs only (the reference design's
    /// operation-context factory): the canonical action and version, the validated arguments'
    /// digest, the plan's pinned policy, the backend report the preflight used. Binds at most
    /// one presented approval receipt (action, policy and expiry bound, never used, not an
    /// answer to this very request): its single use is made durable by the store in the same
    /// transaction as `operation_started`. An approved attempt's idempotency key is scoped to
    /// its approval, so the escalated operation's key does not replay it.
    async fn operation_start(
        &self,
        plan: &ExecutionPlan,
        request: &ExecutionRequest,
        context: &ExecutionContext,
        args: &Map<String, Value>,
        approvals: &[ApprovalReceipt],
        unbound: &mut Vec<String>,
    ) -> Result<(OperationStart, Option<ApprovalReceipt>), DecisionReason> {
        let invalid = |e: String| {
            DecisionReason::new(
                ReasonCode::Evidence,
                format!("the operation cannot be described: {e}"),
            )
        };
        let operation_id = self
            .mint_operation_id(request)
            .map_err(|e| invalid(e.to_string()))?;
        let mut start = OperationStart::from_request(operation_id, request, context)
            .map_err(|e| invalid(e.to_string()))?;
        let descriptor = &plan.entry.descriptor;
        start.action = descriptor.name().to_owned();
        start.action_version = Some(descriptor.version().to_owned());
        start.arguments_digest = digest_of(args)?;
        start.policy = Some(plan.policy.snapshot().clone());
        if let Some(d) = &self.backend_digest {
            start.capability_digest = Some(d.clone());
        }
        let now = self.now();
        // The first receipt bound to this action and policy (and not expired) scopes the
        // idempotency key, whether or not it can still be used: a repeat of an approved
        // attempt replays it.
        let mut scope: Option<ApprovalId> = None;
        let candidates: Vec<ApprovalReceipt> = {
            let book = self
                .approvals
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            approvals
                .iter()
                .filter(|r| {
                    let id = r.approval_id();
                    if let Err(m) = receipt_counts(plan, r, r.arguments_digest(), now) {
                        unbound.push(format!("receipt {id}: {m}"));
                        return false;
                    }
                    if scope.is_none() {
                        scope = Some(id.clone());
                    }
                    if book.used.contains_key(id) {
                        unbound.push(format!("receipt {id} was already used"));
                        return false;
                    }
                    if let Some((escalated, _)) = book.issued.get(id)
                        && escalated == request.request_id()
                    {
                        unbound.push(format!(
                            "receipt {id} answers request {escalated}: an approval starts a new attempt with a new request id"
                        ));
                        return false;
                    }
                    true
                })
                .cloned()
                .collect()
        };
        let mut chosen = None;
        for r in candidates {
            match self.approval_use(r.approval_id()).await {
                Ok(Some(used)) => unbound.push(format!(
                    "receipt {} was already used by operation {}",
                    r.approval_id(),
                    used.operation_id
                )),
                Ok(None) => {
                    chosen = Some(r);
                    break;
                }
                Err(e) => {
                    return Err(DecisionReason::new(
                        ReasonCode::Evidence,
                        format!("approval uses cannot be read: {e}"),
                    ));
                }
            }
        }
        if let Some(id) = &scope
            && let Some(key) = &start.idempotency_key
        {
            start.idempotency_key = Some(format!("{key}\u{0}approval:{id}"));
        }
        if let Some(r) = &chosen {
            start = start.with_approval(r.clone(), 2);
        }
        Ok((start, chosen))
    }

    /// A fresh operation id: unique per process (counter, clock, process id).
    fn mint_operation_id(
        &self,
        request: &ExecutionRequest,
    ) -> Result<OperationId, warden_contracts::ContractError> {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let d = Digest::of_bytes(
            format!(
                "operation\u{0}{}\u{0}{n}\u{0}{}\u{0}{nanos}\u{0}{}",
                request.request_id(),
                self.now().unix_millis(),
                std::process::id()
            )
            .as_bytes(),
        );
        OperationId::new(format!("op-{}", &d.hex()[..24]))
    }

    /// The answer to an idempotency key that names an earlier operation: the full outcome
    /// when this process closed it, else what its records say. Nothing runs.
    fn replayed(
        &self,
        replay: &warden_evidence::Replay,
        request: &ExecutionRequest,
    ) -> ExecutionOutcome {
        if let Some(o) = self
            .replays
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&replay.operation.operation_id)
        {
            return o.clone();
        }
        governed::replay_outcome(replay, request.request_id(), self.profile)
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
    /// The governed operation (governed and certifiable profiles).
    gov: Option<GovRun<'a>>,
}

/// The receipts one request may use, and why presented ones were not bound (governed).
struct Pass<'a> {
    approvals: &'a [ApprovalReceipt],
    unbound: &'a [String],
}

/// A soft deny waiting for its resolution at the end of a security pass: an escalation (with
/// its authority) or a soft-level hook's denial (no authority can approve it).
struct SoftDeny {
    gate: String,
    reason: DecisionReason,
    evaluator: String,
    authority: Option<String>,
    stop: bool,
    /// The arguments it evaluated, when a hook had replaced them.
    digest: Option<Digest>,
}

/// Where one security pass records its gate evaluations (governed profiles).
struct GateSite<'a> {
    run: GovRun<'a>,
    recheck: bool,
    /// The pass's arguments.
    digest: Digest,
}

impl GateSite<'_> {
    #[allow(clippy::too_many_arguments)]
    async fn record(
        &self,
        gate: &str,
        stage: Stage,
        level: GateLevel,
        verdict: GateVerdict,
        reason: &DecisionReason,
        digest: Option<&Digest>,
    ) -> Result<RecordId, DecisionReason> {
        Box::pin(self.run.gate(GateEvaluation {
            gate: gate.to_owned(),
            stage,
            level,
            verdict,
            reason_code: reason.code,
            rule: reason.rule.clone(),
            source: reason.source.clone(),
            arguments_digest: digest.unwrap_or(&self.digest).clone(),
            recheck: self.recheck,
        }))
        .await
    }
}

/// The gate site of a pass over `args`, when governed.
fn gate_site<'a>(
    gov: Option<GovRun<'a>>,
    args: &Map<String, Value>,
    recheck: bool,
) -> Result<Option<GateSite<'a>>, DecisionReason> {
    match gov {
        None => Ok(None),
        Some(run) => Ok(Some(GateSite {
            run,
            recheck,
            digest: digest_of(args)?,
        })),
    }
}

fn profile_name(p: RuntimeProfile) -> &'static str {
    match p {
        RuntimeProfile::Minimal => "minimal",
        RuntimeProfile::Durable => "durable",
        RuntimeProfile::Governed => "governed",
        RuntimeProfile::Certifiable => "certifiable",
    }
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
        ActionExecutor::execute(self, request, context).await
    }
}

/// Whether receipt `r` may answer a call of this plan's action with arguments `digest` at
/// `now`: bound to the action, the arguments, this plan's policy and unexpired, and
/// authenticated by the policy (with `[approvers]`, signed by a declared approver). Single use
/// is checked by the caller.
fn receipt_counts(
    plan: &ExecutionPlan,
    r: &ApprovalReceipt,
    digest: &Digest,
    now: Timestamp,
) -> Result<(), String> {
    let policy = &plan.policy.snapshot().digest;
    r.check_binding(plan.entry.descriptor.name(), digest, Some(policy), now)
        .map_err(|m| m.to_string())?;
    plan.policy.authenticate_receipt(r, now)
}
