//! Governed execution (docs/design/evidence.md#governed-execution-rules; docs/executor.md,
//! "Governed execution"): the `governed` and `certifiable` profiles drive `warden-evidence`'s
//! [`GovernedRecorder`] as control flow.
//!
//! A governed executor opens one operation per request after admission (stage 5: `policy_bound`
//! and `operation_started`, both receipts required), records every gate evaluation as it is
//! produced with its level (stages 6–11), runs the reducer at the pre-call checkpoint
//! (stage 12) and invokes only through the permit it returns. Whatever ends the request, the
//! executor closes the operation with exactly one terminal record, after the pipeline, outside
//! the race with cancellation and deadlines. Evidence work is *shielded*: a cancellation or a
//! deadline that fires during an append takes effect when the append returns, so no append is
//! abandoned half way and no handle is lost.
//!
//! Failure rules: an append that fails before the call makes the callable unreachable (the
//! outcome is `denied` / `evidence`, `call_executed = false`, the token is never minted); an
//! append that fails after the call reports `failed` with `call_executed = true` and kind
//! `evidence_unrecorded`, and nothing is retried.
//!
//! The executor reaches all of this through one interface, [`Operation`]: one request's
//! governed operation, whose methods the stages call at their checkpoints (crate::stages) and
//! the executor uses to race and close it. This module imports nothing of the executor or its
//! stages.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use warden_contracts::{
    AppendReceipt, ChainId, DecisionReason, Digest, EvidenceRef, ExecutionOutcome, Failure,
    OperationId, ReasonCode, RecordType, RequestId, RuntimeProfile, Timestamp,
};
use warden_evidence::{
    Authorization, Denial, Escalation, ExceptionGrant, GateEvaluation, GovernanceBinding,
    GovernanceError, GovernedRecorder, GovernedStore, InFlight, InvocationPermit, OperationHandle,
    OperationRef, OperationStart, PolicySnapshotBytes, Recovered, Replay, Started, TerminalKind,
};

/// A soft deny's standing exception, validated and recorded by the composition root before
/// execution (docs/design/executor.md#gate-levels-and-the-reducer: "a soft deny with a
/// prevalidated, already recorded exception becomes ALLOW and permanently degrades any later
/// certificate").
///
/// It covers a soft deny of `action` (canonical name), optionally only from one gate (the
/// evaluator's name: `policy`, a security hook's name) and only for one argument digest, until
/// it expires. When it covers a soft deny, the executor appends `exception_granted` naming the
/// deny's `gate_evaluated` record, and the call proceeds; the task's certificate can then only
/// be `DEGRADED`. A hard deny is never covered; an approval receipt is preferred when one is
/// presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exception {
    /// The exception's id (a label: 1–256 bytes, no control characters).
    pub exception_id: String,
    /// The authority that granted it.
    pub authority: String,
    /// Who granted it.
    pub granted_by: Option<warden_contracts::PrincipalRef>,
    /// The action it covers (canonical name).
    pub action: String,
    /// Only soft denies of this gate (evaluator name); `None`: any gate of the action.
    pub gate: Option<String>,
    /// Only calls with exactly these arguments (`arguments_digest`); `None`: any arguments.
    pub arguments_digest: Option<Digest>,
    /// When it stops covering anything.
    pub expires_at: Option<Timestamp>,
}

impl Exception {
    /// An exception `exception_id` granted by `authority` for soft denies of `action`.
    pub fn new(
        exception_id: impl Into<String>,
        authority: impl Into<String>,
        action: impl Into<String>,
    ) -> Self {
        Self {
            exception_id: exception_id.into(),
            authority: authority.into(),
            granted_by: None,
            action: action.into(),
            gate: None,
            arguments_digest: None,
            expires_at: None,
        }
    }

    /// The same exception, limited to one gate.
    pub fn for_gate(mut self, gate: impl Into<String>) -> Self {
        self.gate = Some(gate.into());
        self
    }

    /// The same exception, limited to one argument digest.
    pub fn for_arguments(mut self, digest: Digest) -> Self {
        self.arguments_digest = Some(digest);
        self
    }

    /// The same exception, naming who granted it.
    pub fn granted_by(mut self, principal: warden_contracts::PrincipalRef) -> Self {
        self.granted_by = Some(principal);
        self
    }

    /// The same exception, expiring at `at`.
    pub fn expires_at(mut self, at: Timestamp) -> Self {
        self.expires_at = Some(at);
        self
    }

    /// Whether it covers a soft deny of `gate` for `action` with `digest` at `now`.
    pub fn covers(&self, action: &str, gate: &str, digest: &Digest, now: Timestamp) -> bool {
        self.action == action
            && self.gate.as_deref().is_none_or(|g| g == gate)
            && self.arguments_digest.as_ref().is_none_or(|d| d == digest)
            && self.expires_at.is_none_or(|e| now < e)
    }
}

/// What a governed composition root hands [`crate::ExecutorBuilder::governance`]: the task
/// boundary's [`GovernedRecorder`] (its profile, `governed` or `certifiable`, becomes the
/// executor's) and the recorded exceptions.
///
/// ```
/// use std::sync::Arc;
/// use warden_contracts::*;
/// use warden_evidence::{FixedClock, MemoryStore, payload::CloseDisposition};
/// use warden_executor::*;
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
/// let snapshot = Arc::new(PolicySnapshot::builder().default(Decision::Allow).build().unwrap());
/// let bytes = PolicySnapshotBytes::new(snapshot.reference(), snapshot.canonical_json())?;
/// let binding = GovernanceBinding {
///     task_boundary: TaskBoundary::new("task-1")?,
///     chain_id: ChainId::new("task-1")?,
///     policy: snapshot.reference(),
///     profile: RuntimeProfile::Certifiable,
/// };
/// let store = Arc::new(MemoryStore::new());
/// let governance =
///     Governance::open(store, binding, &bytes, Arc::new(FixedClock::new(1_700_000_000_000))).await?;
/// let mut registry = Registry::new();
/// registry.register(Arc::new(Echo(ActionDescriptor::new("echo", "1", ActionSource::Builtin {})?)))?;
/// let executor = ActionExecutor::builder(registry)
///     .policy(Arc::new(SnapshotPolicy::new(snapshot)))
///     .governance(governance.clone())
///     .build()?;
/// let scope = ExecutionScopeRef::Ephemeral { scope_id: ScopeId::new("s")? };
/// let me = PrincipalRef { id: PrincipalId::new("me")?, kind: PrincipalKind::Local };
/// let context = ExecutionContext::new(ContextId::new("c")?, scope.clone(), me, BackendRef::new("in_process")?);
/// let request = ExecutionRequest::new(
///     RequestId::new("r-1")?, ActionRef::new("echo")?, serde_json::json!({"x": 1}), scope,
/// )?;
/// let report = executor.execute_reported(request, &context, ExecuteOptions::new()).await;
/// assert!(report.outcome.is_success());
/// assert_eq!(report.outcome.profile(), RuntimeProfile::Certifiable);
/// // policy_bound, operation_started, two gates (the tool's precondition, the policy), the terminal.
/// assert_eq!(report.receipts.len(), 5);
/// assert_eq!(report.receipts[4].record_type, RecordType::CallableCompleted);
/// governance.recorder().close(CloseDisposition::Completed).await?;
/// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Governance {
    recorder: GovernedRecorder,
    exceptions: Vec<Exception>,
}

impl Governance {
    /// Governs with `recorder` (opened, or resumed and recovered, by the caller).
    pub fn new(recorder: GovernedRecorder) -> Self {
        Self {
            recorder,
            exceptions: Vec::new(),
        }
    }

    /// Opens a new task boundary on `store` (its genesis `policy_bound` carries the snapshot's
    /// canonical bytes).
    pub async fn open(
        store: Arc<dyn GovernedStore>,
        binding: GovernanceBinding,
        snapshot: &PolicySnapshotBytes,
        clock: Arc<dyn warden_contracts::Clock>,
    ) -> Result<Self, GovernanceError> {
        GovernedRecorder::open(store, binding, snapshot, clock)
            .await
            .map(Self::new)
    }

    /// Start-up after a restart: resumes the boundary's chain (it must verify) and closes
    /// every operation a crash left open with the terminal it allows, never re-invoking
    /// anything (`operation_cancelled` when no gate was recorded, `operation_denied` when the
    /// recorded gates deny, else `external_result_ambiguous`). Returns what was recovered.
    ///
    /// Call it only once nothing of the boundary's calls can still run: a process contained
    /// with a PID namespace of its own dies with the executor that started it; any other may
    /// outlive it (check `warden_sandbox::ProcessRecords::survivors`, docs/executor.md).
    pub async fn resume(
        store: Arc<dyn GovernedStore>,
        chain_id: ChainId,
        profile: RuntimeProfile,
        clock: Arc<dyn warden_contracts::Clock>,
    ) -> Result<(Self, Vec<Recovered>), GovernanceError> {
        let recorder = GovernedRecorder::resume(store, chain_id, profile, clock).await?;
        let recovered = recorder.recover().await?;
        for r in &recovered {
            tracing::warn!(operation = %r.operation_id, terminal = ?r.terminal, "recovered an operation a crash left open");
        }
        Ok((Self::new(recorder), recovered))
    }

    /// The same governance with one more recorded exception.
    pub fn exception(mut self, exception: Exception) -> Self {
        self.exceptions.push(exception);
        self
    }

    /// The boundary's recorder (close the task with [`GovernedRecorder::close`]).
    pub fn recorder(&self) -> &GovernedRecorder {
        &self.recorder
    }

    /// The profile the boundary records (`governed` or `certifiable`).
    pub fn profile(&self) -> RuntimeProfile {
        self.recorder.binding().profile
    }

    /// The recorded exceptions.
    pub fn exceptions(&self) -> &[Exception] {
        &self.exceptions
    }

    fn exception_for(
        &self,
        action: &str,
        gate: &str,
        digest: &Digest,
        now: Timestamp,
    ) -> Option<&Exception> {
        self.exceptions
            .iter()
            .find(|e| e.covers(action, gate, digest, now))
    }
}

/// One receipt with the type of the record it acknowledges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedReceipt {
    /// The record's type.
    pub record_type: RecordType,
    /// The store's receipt (chain, record, sequence, chain hash).
    pub receipt: AppendReceipt,
}

impl RecordedReceipt {
    /// The receipt as an evidence reference (what outcomes carry).
    pub fn evidence_ref(&self) -> EvidenceRef {
        EvidenceRef {
            chain_id: self.receipt.chain_id.clone(),
            record_id: self.receipt.record_id.clone(),
            chain_hash: self.receipt.chain_hash.clone(),
        }
    }
}

/// One execution with what governed evidence recorded for it
/// ([`crate::ActionExecutor::execute_reported`]). In the minimal profile only `outcome` is set.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionReport {
    /// The typed outcome (the same value `execute_with` returns).
    pub outcome: ExecutionOutcome,
    /// The governed operation this request opened, if it opened one (deferrals, containment
    /// denials, context mismatches and replays open none).
    pub operation_id: Option<OperationId>,
    /// Every receipt of this request's records, in order: `policy_bound`,
    /// `operation_started`, each `gate_evaluated` and `exception_granted`, the terminal.
    pub receipts: Vec<RecordedReceipt>,
    /// The earlier operation an idempotency key named: this request was answered from its
    /// record and nothing ran.
    pub replay_of: Option<OperationRef>,
    /// A governed append that failed (`call_executed()` says on which side of the call).
    pub evidence_error: Option<GovernanceError>,
}

impl ExecutionReport {
    /// The evidence references of the receipts.
    pub fn evidence(&self) -> Vec<EvidenceRef> {
        self.receipts
            .iter()
            .map(RecordedReceipt::evidence_ref)
            .collect()
    }
}

/// Where one request's governed operation is.
#[derive(Debug, Default)]
enum Phase {
    /// No operation (not governed, not started yet, or a replay).
    #[default]
    Idle,
    /// Started on the chain, but the `operation_started` append was not acknowledged
    /// ([`GovernanceError::StartedUnacknowledged`]): no handle, so nothing can gate or invoke;
    /// the closing step takes the recorder's one closing handle for it.
    Unacknowledged(GovernedRecorder),
    /// Started; gates being recorded.
    Open(OperationHandle),
    /// The reducer allowed: the pre-call checkpoint is complete.
    Permitted(InvocationPermit),
    /// The call began.
    InFlight(InFlight),
    /// A terminal append failed and consumed the handle: the operation stays open until
    /// start-up recovery closes it.
    Lost,
    /// The terminal record is durable.
    Closed,
}

/// One request's governed state, shared by the pipeline and the closing step.
#[derive(Debug, Default)]
struct OpState {
    phase: Phase,
    operation_id: Option<OperationId>,
    receipts: Vec<RecordedReceipt>,
    error: Option<GovernanceError>,
    replay_of: Option<OperationRef>,
}

impl OpState {
    fn push(&mut self, record_type: RecordType, receipt: AppendReceipt) {
        self.receipts.push(RecordedReceipt {
            record_type,
            receipt,
        });
    }

    fn fail(&mut self, e: GovernanceError) {
        tracing::error!(operation = ?self.operation_id, error = %e, call_executed = e.call_executed(), "governed evidence failed");
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    /// The closing record is durable: its receipt, and the operation is closed.
    fn closed(&mut self, record_type: RecordType, receipt: AppendReceipt) {
        self.push(record_type, receipt);
        self.phase = Phase::Closed;
    }

    /// A closing append failed and consumed the handle: the operation stays open until
    /// start-up recovery closes it.
    fn lost(&mut self, e: GovernanceError) {
        self.fail(e);
        self.phase = Phase::Lost;
    }

    /// Settles the operation on the result of its closing append ([`Self::closed`] or
    /// [`Self::lost`]).
    fn settle(&mut self, record_type: RecordType, result: Result<AppendReceipt, GovernanceError>) {
        match result {
            Ok(receipt) => self.closed(record_type, receipt),
            Err(e) => self.lost(e),
        }
    }
}

/// One request's governed operation: the one interface between the executor's stage plan and
/// governed evidence (docs/executor.md, "Governed execution").
///
/// The executor creates it when it is governed, lends it to the stages, which call it at
/// their checkpoints ([`Self::start`] at `evidence_start`, [`Self::gate`] and
/// [`Self::exception`] for each evaluation of stages 6–11, [`Self::checkpoint`] and
/// [`Self::begin`] at `evidence_invoke`), asks it whether the race with cancellation and
/// deadlines may end ([`Self::request_stop`]), and closes it after the pipeline
/// ([`Self::close`]). Nothing else of this module is seen by the executor or its stages.
pub(crate) struct Operation<'g> {
    governance: &'g Governance,
    state: tokio::sync::Mutex<OpState>,
    /// Evidence appends in progress.
    shield: AtomicUsize,
    /// A cancellation or deadline fired.
    stop: AtomicBool,
}

impl<'g> Operation<'g> {
    /// No operation yet, under `governance`.
    pub(crate) fn new(governance: &'g Governance) -> Self {
        Self {
            governance,
            state: tokio::sync::Mutex::new(OpState::default()),
            shield: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        }
    }

    /// A cancellation or deadline fired: stop before the token. Answers whether the race may
    /// end now (no evidence work is in progress; else it ends when that work is done, which
    /// wakes the task).
    pub(crate) fn request_stop(&self) -> bool {
        self.stop.store(true, Ordering::Release);
        self.shield.load(Ordering::Acquire) == 0
    }

    /// The recorded exception that covers a soft deny of `gate` for `action` with `digest`.
    pub(crate) fn exception_for(
        &self,
        action: &str,
        gate: &str,
        digest: &Digest,
        now: Timestamp,
    ) -> Option<&'g Exception> {
        self.governance.exception_for(action, gate, digest, now)
    }

    /// Closes the operation with the one terminal record its outcome requires ([`close`]) and
    /// answers the report, with whether the terminal record is durable.
    pub(crate) async fn close(
        self,
        outcome: ExecutionOutcome,
        deadline: Option<Timestamp>,
    ) -> (ExecutionReport, bool) {
        let mut st = self.state.into_inner();
        let closing = Box::pin(close(&mut st, outcome, deadline));
        let outcome = closing.await;
        let closed = matches!(st.phase, Phase::Closed);
        let report = ExecutionReport {
            outcome,
            operation_id: st.operation_id,
            receipts: st.receipts,
            replay_of: st.replay_of,
            evidence_error: st.error,
        };
        (report, closed)
    }

    /// The outcome an idempotent replay answers from `replay`'s records ([`replay_outcome`]).
    pub(crate) fn replay_outcome(
        &self,
        replay: &Replay,
        request_id: &RequestId,
        profile: RuntimeProfile,
    ) -> ExecutionOutcome {
        replay_outcome(replay, request_id, profile)
    }
}

/// Evidence work in progress: a cancellation or deadline waits until it is done.
struct Shield<'a>(&'a AtomicUsize);

impl<'a> Shield<'a> {
    fn enter(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Self(count)
    }
}

impl Drop for Shield<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What opening the operation answered.
pub(crate) enum StartAnswer {
    /// Started: `policy_bound` and `operation_started` are durable.
    Started,
    /// The idempotency key names an earlier operation: answer from it, never invoke.
    Replay(Box<Replay>),
    /// Refused before `operation_started` (nothing is recorded as started).
    Refused(DecisionReason),
}

impl Operation<'_> {
    /// Whether a cancellation or deadline fired while evidence work was shielded.
    pub(crate) fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Stage 5: opens the operation (both receipts) or answers a replay or a refusal.
    pub(crate) async fn start(&self, start: OperationStart) -> StartAnswer {
        let _shield = Shield::enter(&self.shield);
        let operation_id = start.operation_id.clone();
        let answer = self.governance.recorder.start_operation(start).await;
        let mut st = self.state.lock().await;
        match answer {
            Ok(Started::New(handle)) => {
                let (bound, started) = handle.start_receipts();
                st.push(RecordType::PolicyBound, bound.clone());
                st.push(RecordType::OperationStarted, started.clone());
                st.operation_id = Some(operation_id);
                st.phase = Phase::Open(handle);
                StartAnswer::Started
            }
            Ok(Started::Replay(replay)) => {
                st.replay_of = Some(replay.operation.clone());
                StartAnswer::Replay(Box::new(replay))
            }
            Err(GovernanceError::StartedUnacknowledged { started, source }) => {
                // The operation started on the chain, but its start was not acknowledged: a
                // failed pre-call append, so the callable is unreachable; the closing step
                // gives the started operation its one terminal record.
                st.push(RecordType::PolicyBound, started.policy_bound.clone());
                st.push(RecordType::OperationStarted, started.started.clone());
                st.operation_id = Some(operation_id);
                st.phase = Phase::Unacknowledged(self.governance.recorder.clone());
                let e = GovernanceError::StartedUnacknowledged { started, source };
                let reason = evidence_reason(&e);
                st.fail(e);
                StartAnswer::Refused(reason)
            }
            Err(e) => {
                let reason = match &e {
                    GovernanceError::ApprovalAlreadyUsed { approval_id, .. } => {
                        DecisionReason::new(
                            ReasonCode::ApprovalRefused,
                            format!("approval receipt {approval_id} was already used"),
                        )
                    }
                    GovernanceError::IdempotencyConflict { what, .. } => DecisionReason::new(
                        ReasonCode::InvalidArguments,
                        format!("idempotency key already used with other {what}"),
                    ),
                    GovernanceError::PolicyMismatch { .. } => {
                        DecisionReason::new(ReasonCode::ContextMismatch, e.to_string())
                    }
                    _ => DecisionReason::new(
                        ReasonCode::Evidence,
                        format!("the operation could not be opened: {e}"),
                    ),
                };
                if matches!(
                    e,
                    GovernanceError::Evidence { .. }
                        | GovernanceError::Closed(_)
                        | GovernanceError::Invalid(_)
                ) {
                    st.fail(e);
                }
                StartAnswer::Refused(reason)
            }
        }
    }

    /// Appends one `gate_evaluated`; its record id (for an exception), or the refusal that
    /// makes the callable unreachable.
    pub(crate) async fn gate(
        &self,
        evaluation: GateEvaluation,
    ) -> Result<warden_contracts::RecordId, DecisionReason> {
        let _shield = Shield::enter(&self.shield);
        let mut st = self.state.lock().await;
        let Phase::Open(handle) = &mut st.phase else {
            return Err(no_operation());
        };
        match handle.gate(evaluation).await {
            Ok(receipt) => {
                let id = receipt.record_id.clone();
                st.push(RecordType::GateEvaluated, receipt);
                Ok(id)
            }
            Err(e) => {
                let reason = evidence_reason(&e);
                st.fail(e);
                Err(reason)
            }
        }
    }

    /// Appends `exception_granted` for a soft deny the exception covers.
    pub(crate) async fn exception(
        &self,
        exception: &Exception,
        gate_record_id: warden_contracts::RecordId,
        arguments_digest: Digest,
    ) -> Result<(), DecisionReason> {
        let _shield = Shield::enter(&self.shield);
        let mut st = self.state.lock().await;
        let Phase::Open(handle) = &mut st.phase else {
            return Err(no_operation());
        };
        let grant = ExceptionGrant {
            gate_record_id,
            exception_id: exception.exception_id.clone(),
            authority: exception.authority.clone(),
            granted_by: exception.granted_by.clone(),
            expires_at: exception.expires_at,
            arguments_digest,
        };
        match handle.exception(grant).await {
            Ok(receipt) => {
                st.push(RecordType::ExceptionGranted, receipt);
                Ok(())
            }
            Err(e) => {
                let reason = evidence_reason(&e);
                st.fail(e);
                Err(reason)
            }
        }
    }

    /// Stage 12: the reducer closes the pre-call checkpoint. `Ok` holds the permit; `Err` is
    /// the refusal (a denial the reducer recorded, or an evidence failure).
    pub(crate) async fn checkpoint(&self) -> Result<(), (DecisionReason, &'static str)> {
        let _shield = Shield::enter(&self.shield);
        let mut st = self.state.lock().await;
        let Phase::Open(handle) = std::mem::take(&mut st.phase) else {
            st.phase = Phase::Lost;
            return Err((no_operation(), "evidence"));
        };
        match handle.authorize(None).await {
            Ok(Authorization::Permitted(permit)) => {
                st.phase = Phase::Permitted(permit);
                Ok(())
            }
            Ok(Authorization::Denied { reduction, receipt })
            | Ok(Authorization::Escalated { reduction, receipt }) => {
                st.closed(RecordType::OperationDenied, receipt);
                Err((
                    DecisionReason::new(
                        reduction.reason_code,
                        "the governed reducer denied the call at the pre-call checkpoint",
                    ),
                    "reducer",
                ))
            }
            Err(e) => {
                let reason = evidence_reason(&e);
                st.lost(e);
                Err((reason, "evidence"))
            }
        }
    }

    /// Right before the token is minted: the permit becomes the call in flight.
    pub(crate) async fn begin(&self) -> Result<(), GovernanceError> {
        let _shield = Shield::enter(&self.shield);
        let mut st = self.state.lock().await;
        let Phase::Permitted(permit) = std::mem::take(&mut st.phase) else {
            st.phase = Phase::Lost;
            return Err(GovernanceError::Invalid(
                "no pre-call checkpoint to begin the call from".into(),
            ));
        };
        match permit.begin().await {
            Ok(call) => {
                st.phase = Phase::InFlight(call);
                Ok(())
            }
            Err(e) => {
                // `begin` closed the operation itself (`callable_failed`, not reached).
                st.phase = Phase::Closed;
                st.fail(e.clone());
                Err(e)
            }
        }
    }
}

fn no_operation() -> DecisionReason {
    DecisionReason::new(
        ReasonCode::Evidence,
        "no open governed operation to record into",
    )
}

fn evidence_reason(e: &GovernanceError) -> DecisionReason {
    DecisionReason::new(
        ReasonCode::Evidence,
        format!("governed evidence could not be recorded, so the call cannot run: {e}"),
    )
}

/// Closes the request's operation with the one terminal record its outcome requires
/// (docs/design/evidence.md#one-terminal-per-operation) and returns the outcome to report:
/// unchanged, except that an escalation whose closing record failed is a denial (no approval
/// request without its record), and a call whose terminal record failed is `failed` /
/// `evidence_unrecorded` with `call_executed = true`.
async fn close(
    st: &mut OpState,
    outcome: ExecutionOutcome,
    deadline: Option<Timestamp>,
) -> ExecutionOutcome {
    let outcome = match std::mem::take(&mut st.phase) {
        Phase::Idle => {
            st.phase = Phase::Idle;
            return outcome;
        }
        Phase::Lost => {
            st.phase = Phase::Lost;
            outcome
        }
        Phase::Closed => {
            st.phase = Phase::Closed;
            outcome
        }
        Phase::Unacknowledged(recorder) => {
            close_unacknowledged(st, &recorder, &outcome, deadline).await;
            outcome
        }
        Phase::Open(handle) => close_open(st, handle, outcome, deadline).await,
        Phase::Permitted(permit) => {
            let kind = before_call_kind(&outcome, deadline);
            st.settle(terminal_type(&kind), permit.close_before_call(kind).await);
            outcome
        }
        Phase::InFlight(call) => {
            let kind = match &outcome {
                ExecutionOutcome::Succeeded { result, .. } => match Digest::of_json(result) {
                    Ok(result_digest) => Ok(TerminalKind::Completed { result_digest }),
                    Err(e) => Err(e.to_string()),
                },
                ExecutionOutcome::Failed { failure, .. } => Ok(TerminalKind::Failed {
                    kind: failure.kind.clone(),
                    message_digest: Some(Digest::of_bytes(failure.message.as_bytes())),
                }),
                ExecutionOutcome::Cancelled { .. } => Ok(TerminalKind::Cancelled),
                ExecutionOutcome::TimedOut { .. } => Ok(TerminalKind::TimedOut { deadline }),
                ExecutionOutcome::Ambiguous { .. } => Ok(TerminalKind::Ambiguous(
                    warden_evidence::AmbiguityCause::TransportLost,
                )),
                other => Err(format!(
                    "a {} outcome cannot follow a started call",
                    other.status()
                )),
            };
            let kind = match kind {
                Ok(k) => k,
                Err(message) => {
                    // Fail closed: the call ran; record it as failed.
                    tracing::error!(%message, "no terminal for a call in flight; recording a failure");
                    TerminalKind::Failed {
                        kind: "executor".into(),
                        message_digest: Some(Digest::of_bytes(message.as_bytes())),
                    }
                }
            };
            let record_type = terminal_type(&kind);
            match call.finish(kind).await {
                Ok(r) => {
                    st.closed(record_type, r);
                    outcome
                }
                Err(e) => {
                    let message = format!(
                        "the call ran, but its terminal evidence could not be recorded ({e}); it is not retried"
                    );
                    st.lost(e);
                    unrecorded(outcome, message)
                }
            }
        }
    };
    attach(
        outcome,
        st.receipts.iter().map(RecordedReceipt::evidence_ref),
    )
}

/// Closes an operation whose start was not acknowledged: nothing ran, so its terminal is the
/// request's own (`operation_cancelled` / `operation_timed_out` when the race ended it first),
/// else `operation_denied` with the denial's reason (`evidence`). When that append fails too,
/// the operation stays open for start-up recovery (which closes it as `operation_cancelled`).
async fn close_unacknowledged(
    st: &mut OpState,
    recorder: &GovernedRecorder,
    outcome: &ExecutionOutcome,
    deadline: Option<Timestamp>,
) {
    let Some(handle) = st
        .operation_id
        .as_ref()
        .and_then(|op| recorder.take_unacknowledged(op))
    else {
        st.phase = Phase::Lost;
        return;
    };
    let (record_type, result) = match outcome {
        ExecutionOutcome::Cancelled { .. } | ExecutionOutcome::TimedOut { .. } => {
            let kind = before_call_kind(outcome, deadline);
            (terminal_type(&kind), handle.close_before_call(kind).await)
        }
        other => {
            let denial = match other {
                ExecutionOutcome::Denied {
                    reason,
                    evaluator,
                    stop,
                    ..
                } => Denial {
                    reason_code: reason.code,
                    evaluator: evaluator.clone(),
                    stop: *stop,
                },
                _ => Denial {
                    reason_code: ReasonCode::Evidence,
                    evaluator: "evidence".into(),
                    stop: false,
                },
            };
            (RecordType::OperationDenied, handle.deny(denial).await)
        }
    };
    st.settle(record_type, result);
}

async fn close_open(
    st: &mut OpState,
    handle: OperationHandle,
    outcome: ExecutionOutcome,
    deadline: Option<Timestamp>,
) -> ExecutionOutcome {
    match &outcome {
        ExecutionOutcome::Escalated { approval, .. } => {
            let escalation = Escalation {
                approval_id: approval.approval_id.clone(),
                authority: approval.authority.clone(),
            };
            let result =
                if handle.reduction(true).disposition == warden_contracts::Disposition::Escalate {
                    handle
                        .authorize(Some(escalation))
                        .await
                        .map(refusal_receipt)
                } else {
                    handle
                        .deny(Denial {
                            reason_code: approval.reason.code,
                            evaluator: "executor".into(),
                            stop: false,
                        })
                        .await
                        .map(Some)
                };
            close_escalated(st, result, outcome)
        }
        ExecutionOutcome::Denied {
            reason,
            evaluator,
            stop,
            ..
        } => {
            let reduction = handle.reduction(false);
            let result = if reduction.disposition == warden_contracts::Disposition::Deny
                && reduction.deciding_gate.is_some()
            {
                handle
                    .authorize_with(None, *stop)
                    .await
                    .map(refusal_receipt)
            } else {
                handle
                    .deny(Denial {
                        reason_code: reason.code,
                        evaluator: evaluator.clone(),
                        stop: *stop,
                    })
                    .await
                    .map(Some)
            };
            match result.transpose() {
                Some(result) => st.settle(RecordType::OperationDenied, result),
                None => st.phase = Phase::Lost,
            }
            outcome
        }
        _ => {
            let kind = before_call_kind(&outcome, deadline);
            st.settle(terminal_type(&kind), handle.close_before_call(kind).await);
            outcome
        }
    }
}

/// An escalation's closing record: `operation_denied` (`escalate`); when it fails, the outcome
/// is a denial (no approval request without its record).
fn close_escalated(
    st: &mut OpState,
    result: Result<Option<AppendReceipt>, GovernanceError>,
    outcome: ExecutionOutcome,
) -> ExecutionOutcome {
    match result {
        Ok(Some(r)) => {
            st.closed(RecordType::OperationDenied, r);
            outcome
        }
        Ok(None) => {
            // Unreachable by construction (the reduction escalates); the dropped permit
            // leaves the operation to recovery, and nothing runs.
            st.phase = Phase::Lost;
            outcome
        }
        Err(e) => {
            let reason = evidence_reason(&e);
            st.lost(e);
            ExecutionOutcome::Denied {
                request_id: outcome.request_id().clone(),
                profile: outcome.profile(),
                reason,
                evaluator: "evidence".into(),
                stop: false,
                evidence: Vec::new(),
            }
        }
    }
}

/// The `operation_denied` receipt of an authorization that refused the call (`None` when it
/// permitted it).
fn refusal_receipt(authorization: Authorization) -> Option<AppendReceipt> {
    match authorization {
        Authorization::Denied { receipt, .. } | Authorization::Escalated { receipt, .. } => {
            Some(receipt)
        }
        Authorization::Permitted(_) => None,
    }
}

/// The terminal for an operation closed before its call (nothing ran).
fn before_call_kind(outcome: &ExecutionOutcome, deadline: Option<Timestamp>) -> TerminalKind {
    match outcome {
        ExecutionOutcome::Cancelled { .. } => TerminalKind::Cancelled,
        ExecutionOutcome::TimedOut { .. } => TerminalKind::TimedOut { deadline },
        ExecutionOutcome::Failed { failure, .. } => TerminalKind::Failed {
            kind: failure.kind.clone(),
            message_digest: Some(Digest::of_bytes(failure.message.as_bytes())),
        },
        // A denial after the reducer allowed (a panic between the checkpoint and the call),
        // or anything else that ended the request before its call.
        other => TerminalKind::Failed {
            kind: "not_started".into(),
            message_digest: Some(Digest::of_bytes(other.status().as_bytes())),
        },
    }
}

fn terminal_type(kind: &TerminalKind) -> RecordType {
    match kind {
        TerminalKind::Completed { .. } => RecordType::CallableCompleted,
        TerminalKind::Failed { .. } => RecordType::CallableFailed,
        TerminalKind::Cancelled => RecordType::OperationCancelled,
        TerminalKind::TimedOut { .. } => RecordType::OperationTimedOut,
        TerminalKind::Ambiguous(_) => RecordType::ExternalResultAmbiguous,
    }
}

/// A call that ran but whose terminal record failed: `call_executed = true`, never retried.
fn unrecorded(outcome: ExecutionOutcome, message: String) -> ExecutionOutcome {
    ExecutionOutcome::Failed {
        request_id: outcome.request_id().clone(),
        profile: outcome.profile(),
        failure: Failure {
            kind: "evidence_unrecorded".into(),
            message,
        },
        call_executed: true,
        evidence: Vec::new(),
        degradations: outcome.degradations().to_vec(),
    }
}

/// The outcome with these evidence references, on the variants that carry them.
fn attach(
    mut outcome: ExecutionOutcome,
    refs: impl Iterator<Item = EvidenceRef>,
) -> ExecutionOutcome {
    match &mut outcome {
        ExecutionOutcome::Succeeded { evidence, .. }
        | ExecutionOutcome::Denied { evidence, .. }
        | ExecutionOutcome::Escalated { evidence, .. }
        | ExecutionOutcome::Failed { evidence, .. }
        | ExecutionOutcome::Cancelled { evidence, .. }
        | ExecutionOutcome::TimedOut { evidence, .. }
        | ExecutionOutcome::Ambiguous { evidence, .. } => evidence.extend(refs),
        ExecutionOutcome::Deferred { .. } => {}
    }
    outcome
}

/// The outcome an idempotent replay answers from the record alone (evidence holds the
/// result's digest, never the result: a completed call answers `failed` / `idempotent_replay`
/// with `call_executed = true`, naming the digest). An operation still open (running
/// elsewhere, or crashed and not yet recovered) answers `deferred`.
fn replay_outcome(
    replay: &Replay,
    request_id: &RequestId,
    profile: RuntimeProfile,
) -> ExecutionOutcome {
    let op = &replay.operation.operation_id;
    let evidence: Vec<EvidenceRef> = replay.terminal_record.iter().cloned().collect();
    let Some(terminal) = replay.terminal else {
        return ExecutionOutcome::Deferred {
            request_id: request_id.clone(),
            profile,
            reason: DecisionReason::new(
                ReasonCode::Capacity,
                format!("a request with this idempotency key is in flight (operation {op})"),
            ),
            retry_at: None,
        };
    };
    let replayed = |kind: &str, message: String, call_executed: bool| ExecutionOutcome::Failed {
        request_id: request_id.clone(),
        profile,
        failure: Failure {
            kind: kind.into(),
            message,
        },
        call_executed,
        evidence: evidence.clone(),
        degradations: Vec::new(),
    };
    match terminal {
        RecordType::CallableCompleted => replayed(
            "idempotent_replay",
            format!(
                "idempotency key already used by operation {op}, which completed (result {}); evidence keeps only the result's digest",
                replay
                    .result_digest
                    .as_ref()
                    .map_or_else(|| "unknown".to_owned(), ToString::to_string)
            ),
            true,
        ),
        RecordType::CallableFailed => replayed(
            replay
                .failure_kind
                .as_deref()
                .unwrap_or("idempotent_replay"),
            format!("idempotency key already used by operation {op}, which failed"),
            replay.call_executed.unwrap_or(true),
        ),
        RecordType::OperationCancelled => ExecutionOutcome::Cancelled {
            request_id: request_id.clone(),
            profile,
            call_executed: replay.call_executed.unwrap_or(true),
            evidence,
            degradations: Vec::new(),
        },
        RecordType::OperationTimedOut => ExecutionOutcome::TimedOut {
            request_id: request_id.clone(),
            profile,
            call_executed: replay.call_executed.unwrap_or(true),
            evidence,
            degradations: Vec::new(),
        },
        RecordType::OperationDenied => ExecutionOutcome::Denied {
            request_id: request_id.clone(),
            profile,
            reason: DecisionReason::new(
                replay.reason_code.unwrap_or(ReasonCode::PolicyRule),
                if replay.escalated {
                    format!(
                        "idempotency key already used by operation {op}, which was escalated; an approval runs as a new attempt with its receipt"
                    )
                } else {
                    format!("idempotency key already used by operation {op}, which was denied")
                },
            ),
            evaluator: "idempotency".into(),
            stop: false,
            evidence,
        },
        _ => ExecutionOutcome::Ambiguous {
            request_id: request_id.clone(),
            profile,
            message: format!(
                "idempotency key already used by operation {op}, whose result is unknown; it is not run again"
            ),
            evidence,
            degradations: Vec::new(),
        },
    }
}
