//! [`ActionExecutor`]: the one authoritative path from a request to its effect.
//!
//! The stage order is fixed ([`crate::STAGE_ORDER`], docs/executor.md): resolve → validate →
//! bind the trusted context → admit (containment preflight, capacity lease) → governed
//! evidence checkpoint → session gate → preconditions → policy and security hooks → user
//! transforms → re-validate → re-authorize → evidence checkpoint → invoke once → post/error
//! handlers → typed outcome. Each stage is a function of its own in `crate::stages` (one file
//! per stage); this module holds the executor itself: its state, its public entry points, the
//! race of the stage pipeline with cancellation and deadlines (`race`), and the builder
//! (`builder`). A refusal at any stage ends the request there with a typed outcome; only the
//! invoke stage mints a token.

mod builder;
mod race;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::Poll;

use async_trait::async_trait;
use serde_json::{Map, Value};
use warden_contracts::{
    ActionRef, AdmissionDecision, ApprovalId, ApprovalReceipt, Capability, CapabilityReport,
    Capacity, DecisionEvent, DecisionReason, Digest, ExecutionContext, ExecutionOutcome,
    ExecutionRequest, Executor, Failure, Observer, OperationId, PolicyEvaluator, ReasonCode,
    RequestId, RuntimeProfile, Stage, Timestamp,
};
use warden_policy::Requirement;

pub use self::builder::ExecutorBuilder;
use crate::admission::Clock;
use crate::cancel::CancelToken;
use crate::error::ExecutorError;
use crate::governed::{ExecutionReport, Governance, Operation};
use crate::idempotency;
use crate::interceptor::Handlers;
use crate::plan::{ExecutionPlan, PlanCache};
use crate::receipts::ApprovalBook;
use crate::registry::{Entry, Registry};
use crate::stages;
use crate::trace::Trace;

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
    pub(crate) registry: Registry,
    pub(crate) policies: Vec<Arc<dyn PolicyEvaluator>>,
    pub(crate) handlers: Handlers,
    pub(crate) capacity: Option<Arc<dyn Capacity>>,
    pub(crate) backend: Option<CapabilityReport>,
    pub(crate) backend_digest: Option<Digest>,
    pub(crate) containment: Vec<(Capability, Requirement)>,
    pub(crate) containment_for: HashMap<String, Vec<(Capability, Requirement)>>,
    pub(crate) observers: Vec<Arc<dyn Observer>>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) approval_ttl_ms: u64,
    pub(crate) profile: RuntimeProfile,
    pub(crate) governance: Option<Governance>,
    pub(crate) plans: PlanCache,
    pub(crate) approvals: Mutex<ApprovalBook>,
    pub(crate) idempotency: idempotency::Table,
    /// Governed: the outcomes of keyed operations this process closed, so a replay in this
    /// process answers the full outcome (evidence keeps only digests).
    pub(crate) replays: Mutex<HashMap<OperationId, ExecutionOutcome>>,
    pub(crate) seq: AtomicU64,
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
            .is_used(approval_id)
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

    /// The index of the evaluator `context` selects: the one its snapshot names, else the
    /// first.
    pub(crate) fn policy_index(&self, context: &ExecutionContext) -> Result<usize, ExecutorError> {
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

    /// The cached plan of `entry` under evaluator `policy`, compiled on first use.
    pub(crate) fn plan_for(&self, entry: &Arc<Entry>, policy: usize) -> Option<Arc<ExecutionPlan>> {
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

    pub(crate) fn now(&self) -> Timestamp {
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
    pub async fn execute_reported(
        &self,
        request: ExecutionRequest,
        context: &ExecutionContext,
        options: ExecuteOptions,
    ) -> ExecutionReport {
        // Outside the pipeline, which a cancellation or a deadline may drop: the governed
        // operation and the idempotency reservation are closed with the outcome, whatever it is.
        // (The operation is boxed: its state stays out of the minimal profile's future.)
        let operation = self
            .governance
            .as_ref()
            .map(|g| Box::new(Operation::new(g)));
        let mut idem = OnceLock::new();
        let trace = Trace::new(&self.observers, request.request_id());
        let outcome = race::run(
            self,
            (&request, context),
            &options,
            operation.as_deref(),
            &idem,
            &trace,
        )
        .await;
        stages::outcome(self, &request, operation, idem.take(), &trace, outcome).await
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

    /// The outcome of a request whose pipeline panicked (an interceptor, or the tool once
    /// reached).
    pub(crate) fn panicked(
        &self,
        request: &ExecutionRequest,
        executed: bool,
        panic: &str,
    ) -> ExecutionOutcome {
        tracing::error!(request = %request.request_id(), panic, "execution panicked");
        if executed {
            self.failed(request, "panic".into(), format!("panicked: {panic}"))
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

    pub(crate) fn cancelled(&self, request: &ExecutionRequest, executed: bool) -> ExecutionOutcome {
        ExecutionOutcome::Cancelled {
            request_id: request.request_id().clone(),
            profile: self.profile,
            call_executed: executed,
            evidence: Vec::new(),
            degradations: Vec::new(),
        }
    }

    pub(crate) fn timed_out(&self, request: &ExecutionRequest, executed: bool) -> ExecutionOutcome {
        ExecutionOutcome::TimedOut {
            request_id: request.request_id().clone(),
            profile: self.profile,
            call_executed: executed,
            evidence: Vec::new(),
            degradations: Vec::new(),
        }
    }

    pub(crate) fn denied(
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

    pub(crate) fn succeeded(&self, request: &ExecutionRequest, result: Value) -> ExecutionOutcome {
        ExecutionOutcome::Succeeded {
            request_id: request.request_id().clone(),
            profile: self.profile,
            result,
            evidence: Vec::new(),
            degradations: Vec::new(),
        }
    }

    /// A call that ran and failed (`call_executed = true`).
    pub(crate) fn failed(
        &self,
        request: &ExecutionRequest,
        kind: String,
        message: String,
    ) -> ExecutionOutcome {
        ExecutionOutcome::Failed {
            request_id: request.request_id().clone(),
            profile: self.profile,
            failure: Failure { kind, message },
            call_executed: true,
            evidence: Vec::new(),
            degradations: Vec::new(),
        }
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

/// The digest of an arguments object's canonical JSON.
pub fn arguments_digest(
    args: &Map<String, Value>,
) -> Result<Digest, warden_contracts::ContractError> {
    Digest::of_serialize(args)
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
