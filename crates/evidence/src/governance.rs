//! Governed execution's evidence: the API the executor drives (docs/evidence.md, "The
//! executor-facing API").
//!
//! Evidence here is control flow, not logging. The types walk one operation through its
//! lifecycle, and each step is reachable only after the receipts of the previous ones:
//!
//! ```text
//! GovernedRecorder::start_operation   policy_bound + operation_started (receipts)  → OperationHandle
//! OperationHandle::gate / ::exception gate_evaluated / exception_granted (receipts)
//! OperationHandle::authorize          the reducer: Deny/Escalate → operation_denied (terminal)
//!                                                  Allow         → InvocationPermit
//! InvocationPermit::begin             (pre-call checkpoint complete)              → InFlight
//! InFlight::completed / failed / …    exactly one terminal record (call_executed = true)
//! ```
//!
//! A terminal method consumes its handle, so a second terminal does not compile; the store's
//! [`crate::ChainTracker`] refuses one at run time too. A failed append before the call is a
//! [`GovernanceError`] with `call_executed() == false` and no permit exists to invoke with; a
//! failed append after the call reports `call_executed() == true` and nothing is retried.
//!
//! An append can fail *after* its record became durable (the `governed.after_append` fault
//! point, or a store that committed and then lost the acknowledgement; the recorder reads the
//! record's sequence back to tell). The recorder's own state then follows the chain, not the
//! error: a durable terminal closes its operation, a durable gate or exception counts. A durable
//! `operation_started` whose acknowledgement failed is [`GovernanceError::StartedUnacknowledged`]:
//! the operation is open on the chain but no [`OperationHandle`] exists, so no permit and no call
//! can follow; [`GovernedRecorder::take_unacknowledged`] closes it with its one terminal record
//! (or [`GovernedRecorder::recover`] does, after a restart).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use serde_json::{Value, json};
use warden_contracts::{
    AppendReceipt, ApprovalId, ApprovalReceipt, ChainHead, ChainId, Digest, Disposition,
    EvidenceError, EvidenceRef, ExecutionContext, ExecutionOutcome, ExecutionRequest,
    ExecutionScopeRef, OperationId, PolicySnapshotRef, PrincipalRef, ReasonCode, RecordId,
    RecordType, RequestId, RuntimeProfile, SessionId, Stage, TenantId, Timestamp,
};

use crate::fault;
use crate::operation_set::OperationSet;
use crate::payload::{
    self, CloseDisposition, DenialKind, GateLevel, GateVerdict, Label, Payload, RuleText,
    TerminalCounts,
};
use crate::store::{GovernedStore, OperationRef, TypedAppend};
use crate::verify::{ChainTracker, Expected};

pub use warden_contracts::Clock;

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Timestamp(ms)
    }
}

/// A clock for tests: starts at a fixed time and advances one millisecond per reading.
#[derive(Debug, Default)]
pub struct FixedClock(AtomicU64);

impl FixedClock {
    /// A clock starting at `start` milliseconds.
    pub fn new(start: u64) -> Self {
        Self(AtomicU64::new(start))
    }
}

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.fetch_add(1, Ordering::Relaxed))
    }
}

/// Why governed evidence could not be recorded, or refused a step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GovernanceError {
    /// An append failed. Before the call: the callable must not run (`call_executed = false`).
    /// After the call: it ran (`call_executed = true`) and must not be retried.
    #[error("governed evidence append failed (call_executed = {call_executed}): {source}")]
    Evidence {
        /// Whether the callable was reached.
        call_executed: bool,
        /// The store's error.
        source: EvidenceError,
    },
    /// The request's policy snapshot is not the one this boundary is bound to.
    #[error("policy mismatch: the boundary is bound to {bound}, the context carries {given}")]
    PolicyMismatch {
        /// The boundary's policy digest.
        bound: Digest,
        /// The context's (or `none`).
        given: String,
    },
    /// An approval receipt is single use and was already used.
    #[error("approval {approval_id} was already used by operation {} (chain {})", used_by.operation_id, used_by.chain_id)]
    ApprovalAlreadyUsed {
        /// The approval.
        approval_id: ApprovalId,
        /// The operation that used it.
        used_by: OperationRef,
    },
    /// An idempotency key is bound to an operation of another action or other arguments.
    #[error("idempotency key already bound to operation {} with other {what}", existing.operation_id)]
    IdempotencyConflict {
        /// The operation the key is bound to.
        existing: OperationRef,
        /// What differs (`action`, `arguments`).
        what: String,
    },
    /// The task boundary is closed: nothing more can be recorded on it.
    #[error("task boundary {0} is closed")]
    Closed(String),
    /// The boundary cannot close while operations are open.
    #[error("{} operation(s) have no terminal record: {}", operations.len(), operations.iter().map(OperationId::as_str).collect::<Vec<_>>().join(", "))]
    OpenOperations {
        /// The open operations.
        operations: Vec<OperationId>,
    },
    /// A chain already exists under this id (use [`GovernedRecorder::resume`]).
    #[error("chain {0} already exists")]
    ChainExists(ChainId),
    /// The chain does not verify; nothing is appended to it.
    #[error("chain {chain} does not verify: {detail}")]
    ChainInvalid {
        /// The chain.
        chain: ChainId,
        /// The failure.
        detail: String,
    },
    /// The input is invalid (a label too long, an exception for a gate that is not a soft deny).
    #[error("invalid governed evidence input: {0}")]
    Invalid(String),
    /// `operation_started` is durable but its append was not acknowledged (a failure after the
    /// record was stored). The operation is started on the chain and needs its one terminal
    /// record; the callable is unreachable (`call_executed = false`: no [`OperationHandle`],
    /// hence no permit, exists for it). Close it through
    /// [`GovernedRecorder::take_unacknowledged`]; until it is closed the boundary cannot close
    /// (`OpenOperations`), and [`GovernedRecorder::recover`] closes it after a restart.
    #[error("operation {} started (record {}) but the append was not acknowledged, so the call cannot run: {source}", started.operation_id, started.started.record_id)]
    StartedUnacknowledged {
        /// The operation and the receipts of its durable records.
        started: Box<UnacknowledgedStart>,
        /// The failure that followed the durable append.
        source: EvidenceError,
    },
}

/// The durable records of an operation whose `operation_started` was not acknowledged
/// ([`GovernanceError::StartedUnacknowledged`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnacknowledgedStart {
    /// The operation.
    pub operation_id: OperationId,
    /// Its `policy_bound` record's receipt.
    pub policy_bound: AppendReceipt,
    /// Its durable `operation_started` record, as read back from the store (or as the store
    /// acknowledged it before the failure).
    pub started: AppendReceipt,
}

impl GovernanceError {
    /// Whether the callable was reached. Always `false` except for an append that failed after
    /// the call.
    pub fn call_executed(&self) -> bool {
        matches!(
            self,
            Self::Evidence {
                call_executed: true,
                ..
            }
        )
    }
}

fn label(s: &str) -> Result<Label, GovernanceError> {
    Label::new(s).map_err(GovernanceError::Invalid)
}

/// The `operation_denied` payload of a caller's denial (no deciding gate, no escalation).
fn denial_payload(denial: &Denial, gates_evaluated: u64) -> Result<Payload, GovernanceError> {
    Ok(Payload::OperationDenied(payload::OperationDenied {
        disposition: DenialKind::Deny,
        reason_code: denial.reason_code,
        evaluator: label(&denial.evaluator)?,
        deciding_gate_record_id: None,
        approval_id: None,
        authority: None,
        gates_evaluated,
        stop: denial.stop,
    }))
}

/// A task boundary's id: a [`Label`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TaskBoundary(Label);

impl TaskBoundary {
    /// A task boundary id (1 to 256 bytes, no control characters).
    pub fn new(id: &str) -> Result<Self, GovernanceError> {
        label(id).map(Self)
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

/// A policy snapshot's canonical bytes with its reference; the digest must match the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySnapshotBytes {
    reference: PolicySnapshotRef,
    canonical_json: String,
}

impl PolicySnapshotBytes {
    /// Pairs a reference with the canonical bytes it digests (as `warden-policy`'s
    /// `PolicySnapshot::canonical_json` gives them). Refused unless the bytes hash to the digest.
    pub fn new(
        reference: PolicySnapshotRef,
        canonical_json: impl Into<String>,
    ) -> Result<Self, GovernanceError> {
        let canonical_json = canonical_json.into();
        let digest = Digest::of_bytes(canonical_json.as_bytes());
        if digest != reference.digest {
            return Err(GovernanceError::Invalid(format!(
                "the snapshot bytes hash to {digest}, not to the reference's {}",
                reference.digest
            )));
        }
        Ok(Self {
            reference,
            canonical_json,
        })
    }

    /// The reference.
    pub fn reference(&self) -> &PolicySnapshotRef {
        &self.reference
    }
}

/// What a governed composition root binds: one task boundary, its one chain, its policy and
/// the profile (`governed` or `certifiable`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GovernanceBinding {
    /// The task boundary.
    pub task_boundary: TaskBoundary,
    /// Its chain.
    pub chain_id: ChainId,
    /// The policy in force.
    pub policy: PolicySnapshotRef,
    /// `governed` or `certifiable`.
    pub profile: RuntimeProfile,
}

/// What the executor knows when it opens a governed operation (stage 4), from its six trusted
/// inputs. Build it with [`OperationStart::from_request`].
#[derive(Debug, Clone, PartialEq)]
pub struct OperationStart {
    /// The operation's id (minted by the executor).
    pub operation_id: OperationId,
    /// The request (one attempt).
    pub request_id: RequestId,
    /// The attempt number, from 1.
    pub attempt: u32,
    /// The action's canonical name.
    pub action: String,
    /// The action's version.
    pub action_version: Option<String>,
    /// Digest of the request.
    pub request_digest: Digest,
    /// Digest of the validated arguments.
    pub arguments_digest: Digest,
    /// The authenticated principal.
    pub principal: PrincipalRef,
    /// The tenant.
    pub tenant_id: Option<TenantId>,
    /// The session.
    pub session_id: Option<SessionId>,
    /// The execution scope.
    pub scope: ExecutionScopeRef,
    /// The effect backend's name.
    pub backend: String,
    /// Its capability digest.
    pub capability_digest: Option<Digest>,
    /// The context's policy snapshot (must be the boundary's).
    pub policy: Option<PolicySnapshotRef>,
    /// The idempotency key (only its digest is stored).
    pub idempotency_key: Option<String>,
    /// The approval receipt this attempt uses (single use).
    pub approval: Option<ApprovalReceipt>,
}

impl OperationStart {
    /// From the request and its trusted context.
    pub fn from_request(
        operation_id: OperationId,
        request: &ExecutionRequest,
        context: &ExecutionContext,
    ) -> Result<Self, GovernanceError> {
        let request_digest =
            Digest::of_serialize(request).map_err(|e| GovernanceError::Invalid(e.to_string()))?;
        let arguments_digest = Digest::of_serialize(request.arguments())
            .map_err(|e| GovernanceError::Invalid(e.to_string()))?;
        Ok(Self {
            operation_id,
            request_id: request.request_id().clone(),
            attempt: 1,
            action: request.action().name().to_owned(),
            action_version: None,
            request_digest,
            arguments_digest,
            principal: context.authenticated_principal().clone(),
            tenant_id: context.tenant().map(|t| t.id.clone()),
            session_id: request.session_id().cloned(),
            scope: context.execution_scope().clone(),
            backend: context.effect_backend().name().to_owned(),
            capability_digest: context.effect_backend().capability_digest().cloned(),
            policy: context.policy_snapshot().cloned(),
            idempotency_key: request.idempotency_key().map(str::to_owned),
            approval: None,
        })
    }

    /// The same start, using an approval receipt (an approved retry: a new operation).
    pub fn with_approval(mut self, receipt: ApprovalReceipt, attempt: u32) -> Self {
        self.approval = Some(receipt);
        self.attempt = attempt;
        self
    }

    /// The digest an idempotency key is indexed under: the key scoped to the principal and
    /// tenant, so one principal can never replay another's operation.
    pub fn idempotency_key_digest(&self) -> Option<Digest> {
        let key = self.idempotency_key.as_ref()?;
        Digest::of_json(&json!({
            "idempotency_key": key,
            "principal": self.principal.id.as_str(),
            "tenant": self.tenant_id.as_ref().map(TenantId::as_str),
        }))
        .ok()
    }
}

/// One gate evaluation, as the executor reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateEvaluation {
    /// The evaluator (`session_gate`, `precondition.tool`, `policy`, …).
    pub gate: String,
    /// Its stage.
    pub stage: Stage,
    /// Its level.
    pub level: GateLevel,
    /// Its verdict.
    pub verdict: GateVerdict,
    /// The reason code.
    pub reason_code: ReasonCode,
    /// The rule that decided, as written.
    pub rule: Option<String>,
    /// The rule's source.
    pub source: Option<String>,
    /// Digest of the arguments it evaluated.
    pub arguments_digest: Digest,
    /// Whether this re-evaluates after a transform.
    pub recheck: bool,
}

/// A recorded exception for one soft deny.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExceptionGrant {
    /// The soft deny's `gate_evaluated` record.
    pub gate_record_id: RecordId,
    /// The exception's id.
    pub exception_id: String,
    /// The granting authority.
    pub authority: String,
    /// Who granted it.
    pub granted_by: Option<PrincipalRef>,
    /// When it expires.
    pub expires_at: Option<Timestamp>,
    /// Digest of the arguments it covers.
    pub arguments_digest: Digest,
}

/// One recorded gate, as the reducer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct GateFact {
    record_id: RecordId,
    level: GateLevel,
    verdict: GateVerdict,
    reason_code: ReasonCode,
}

/// What the reducer made of an operation's gates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reduction {
    /// `Allow`, `Deny` or `Escalate` (never `Defer`: capacity is not a gate).
    pub disposition: Disposition,
    /// The gate record that decided a deny or an escalation.
    pub deciding_gate: Option<RecordId>,
    /// The deciding gate's reason code (`evaluator_failed` when no gate ran at all).
    pub reason_code: ReasonCode,
    /// Whether an exception let a soft deny through (any certificate is then degraded).
    pub degraded: bool,
    /// Advisory denies let through; their records are the evidence the outcome carries.
    pub advisory_denials: Vec<RecordId>,
}

/// The reducer (docs/design/executor.md#gate-levels-and-the-reducer) over one operation's gate
/// evaluations.
///
/// - any hard deny → `Deny`;
/// - an unresolved soft deny → `Escalate` when a named approval authority exists, else `Deny`;
/// - soft denies each overridden by a recorded exception → `Allow`, degraded;
/// - advisory denies → `Allow`, carrying their records;
/// - all allows → `Allow`; no gate at all → `Deny` (fail closed).
pub fn reduce(
    gates: &[(RecordId, GateLevel, GateVerdict, ReasonCode)],
    excepted: &[RecordId],
    approval_authority: bool,
) -> Reduction {
    let deny = |gate: Option<&RecordId>, code, d| Reduction {
        disposition: d,
        deciding_gate: gate.cloned(),
        reason_code: code,
        degraded: false,
        advisory_denials: Vec::new(),
    };
    if gates.is_empty() {
        return deny(None, ReasonCode::EvaluatorFailed, Disposition::Deny);
    }
    if let Some((id, _, _, code)) = gates
        .iter()
        .find(|(_, l, v, _)| *l == GateLevel::Hard && *v == GateVerdict::Deny)
    {
        return deny(Some(id), *code, Disposition::Deny);
    }
    let soft: Vec<_> = gates
        .iter()
        .filter(|(_, l, v, _)| *l == GateLevel::Soft && *v == GateVerdict::Deny)
        .collect();
    if let Some((id, _, _, code)) = soft.iter().find(|(id, ..)| !excepted.contains(id)) {
        let d = if approval_authority {
            Disposition::Escalate
        } else {
            Disposition::Deny
        };
        return deny(Some(id), *code, d);
    }
    Reduction {
        disposition: Disposition::Allow,
        deciding_gate: None,
        reason_code: ReasonCode::PolicyRule,
        degraded: !soft.is_empty(),
        advisory_denials: gates
            .iter()
            .filter(|(_, l, v, _)| *l == GateLevel::Advisory && *v == GateVerdict::Deny)
            .map(|(id, ..)| id.clone())
            .collect(),
    }
}

/// The terminal record type an outcome closes its operation with
/// (docs/design/evidence.md#one-terminal-per-operation). `Deferred` has none: a deferral happens
/// before `operation_started`.
pub fn terminal_for_outcome(outcome: &ExecutionOutcome) -> Result<RecordType, GovernanceError> {
    Ok(match outcome {
        ExecutionOutcome::Succeeded { .. } => RecordType::CallableCompleted,
        ExecutionOutcome::Failed { .. } => RecordType::CallableFailed,
        ExecutionOutcome::Denied { .. } | ExecutionOutcome::Escalated { .. } => {
            RecordType::OperationDenied
        }
        ExecutionOutcome::Cancelled { .. } => RecordType::OperationCancelled,
        ExecutionOutcome::TimedOut { .. } => RecordType::OperationTimedOut,
        ExecutionOutcome::Ambiguous { .. } => RecordType::ExternalResultAmbiguous,
        ExecutionOutcome::Deferred { .. } => {
            return Err(GovernanceError::Invalid(
                "a deferral happens before operation_started and has no terminal record".into(),
            ));
        }
    })
}

/// Why an operation's result is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmbiguityCause {
    /// The transport was lost after the call was sent.
    TransportLost,
    /// Recovery found the operation open after a crash.
    RecoveredUnterminated,
}

impl AmbiguityCause {
    fn as_str(self) -> &'static str {
        match self {
            Self::TransportLost => "transport_lost",
            Self::RecoveredUnterminated => "recovered_unterminated",
        }
    }
}

/// How an in-flight operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalKind {
    /// The callable returned this result's digest.
    Completed {
        /// Digest of the result's canonical JSON.
        result_digest: Digest,
    },
    /// The callable failed.
    Failed {
        /// A stable failure kind.
        kind: String,
        /// Digest of the redacted message.
        message_digest: Option<Digest>,
    },
    /// Cancelled during the call.
    Cancelled,
    /// The deadline passed during the call.
    TimedOut {
        /// The deadline.
        deadline: Option<Timestamp>,
    },
    /// The result is unknown.
    Ambiguous(AmbiguityCause),
}

/// An operation an idempotency key already names: the executor answers with its recorded
/// status and never invokes again. (Evidence holds the result's digest, never the result.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    /// The recorded operation.
    pub operation: OperationRef,
    /// Its terminal record's type; `None` while it is open (running elsewhere, or crashed and
    /// not yet recovered).
    pub terminal: Option<RecordType>,
    /// Its terminal record.
    pub terminal_record: Option<EvidenceRef>,
    /// The recorded result's digest, for a completed call.
    pub result_digest: Option<Digest>,
    /// Whether the recorded call reached the callable: `Some(true)` for a completed call,
    /// the recorded flag for a failed, cancelled or timed-out one, `Some(false)` for a denial,
    /// `None` while open or when ambiguous.
    pub call_executed: Option<bool>,
    /// The recorded failure kind, for `callable_failed`.
    pub failure_kind: Option<String>,
    /// The recorded reason code, for `operation_denied`.
    pub reason_code: Option<ReasonCode>,
    /// Whether the recorded denial was an escalation (its approval is a new operation).
    pub escalated: bool,
}

/// What [`GovernedRecorder::start_operation`] answered.
#[derive(Debug)]
pub enum Started {
    /// A new operation: `policy_bound` and `operation_started` are durable.
    New(OperationHandle),
    /// The idempotency key names an earlier operation: do not invoke.
    Replay(Replay),
}

/// An operation crash recovery closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The operation.
    pub operation_id: OperationId,
    /// The terminal type recovery chose (`operation_cancelled` when no gate was recorded,
    /// `operation_denied` when the recorded gates deny, otherwise
    /// `external_result_ambiguous`).
    pub terminal: RecordType,
    /// Its receipt.
    pub receipt: AppendReceipt,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    closed: bool,
    open: HashMap<OperationId, Vec<GateFact>>,
    /// Open operations whose `operation_started` was durable but not acknowledged, and whose
    /// closing handle nobody holds.
    unacknowledged: HashSet<OperationId>,
    excepted: HashMap<OperationId, Vec<RecordId>>,
    terminated: OperationSet,
    operations: u64,
    terminals: TerminalCounts,
    exceptions: u64,
}

struct Inner {
    store: Arc<dyn GovernedStore>,
    clock: Arc<dyn Clock>,
    binding: GovernanceBinding,
    state: Mutex<State>,
    resync: AtomicBool,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GovernedRecorder")
            .field("binding", &self.binding)
            .finish_non_exhaustive()
    }
}

/// Records one task boundary's governed evidence: the executor's handle on its chain.
///
/// Appends from concurrent operations are pipelined: the recorder assigns sequences under a
/// short lock and hands each append to the store there ([`GovernedStore::append_typed`]), and the
/// store commits them in order (with group commit on SQLite), so concurrent operations share
/// fsyncs.
#[derive(Debug, Clone)]
pub struct GovernedRecorder {
    inner: Arc<Inner>,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl GovernedRecorder {
    /// Opens a new task boundary: appends the genesis `policy_bound` (with the snapshot's bytes).
    pub async fn open(
        store: Arc<dyn GovernedStore>,
        binding: GovernanceBinding,
        snapshot: &PolicySnapshotBytes,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, GovernanceError> {
        if snapshot.reference != binding.policy {
            return Err(GovernanceError::PolicyMismatch {
                bound: binding.policy.digest.clone(),
                given: snapshot.reference.digest.to_string(),
            });
        }
        if !matches!(
            binding.profile,
            RuntimeProfile::Governed | RuntimeProfile::Certifiable
        ) {
            return Err(GovernanceError::Invalid(
                "only the governed and certifiable profiles record evidence".into(),
            ));
        }
        let head = store.head(&binding.chain_id).await.map_err(pre_call)?;
        if head.is_some() {
            return Err(GovernanceError::ChainExists(binding.chain_id.clone()));
        }
        let recorder = Self {
            inner: Arc::new(Inner {
                store,
                clock,
                binding,
                state: Mutex::new(State::default()),
                resync: AtomicBool::new(false),
            }),
        };
        let b = &recorder.inner.binding;
        let payload = Payload::PolicyBound(payload::PolicyBound {
            task_boundary_id: b.task_boundary.0.clone(),
            policy_digest: b.policy.digest.clone(),
            snapshot_json: Some(snapshot.canonical_json.clone()),
        });
        recorder.append(None, payload, false).await?;
        Ok(recorder)
    }

    /// Resumes an existing boundary (after a restart): verifies the chain and rebuilds the
    /// state, including operations left open by a crash (close them with [`Self::recover`]).
    pub async fn resume(
        store: Arc<dyn GovernedStore>,
        chain_id: ChainId,
        profile: RuntimeProfile,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, GovernanceError> {
        let report = store
            .verify_report(&chain_id, &Expected::Nothing)
            .await
            .map_err(pre_call)?;
        if let Some(f) = report.failure {
            return Err(GovernanceError::ChainInvalid {
                chain: chain_id,
                detail: format!("{}: {}", crate::failure_code_str(f.code), f.detail),
            });
        }
        let records = store
            .read(&chain_id, None, usize::MAX)
            .await
            .map_err(pre_call)?;
        let mut tracker = ChainTracker::new(crate::Family::Evidence, chain_id.clone());
        let mut reasons: HashMap<RecordId, ReasonCode> = HashMap::new();
        for r in &records {
            tracker.push(r).map_err(|f| GovernanceError::ChainInvalid {
                chain: chain_id.clone(),
                detail: f.detail,
            })?;
            if r.record_type == RecordType::GateEvaluated
                && let Ok(v) = serde_json::from_str::<Value>(&r.payload_json)
                && let Ok(Payload::GateEvaluated(g)) = payload::parse(r.record_type, &v)
            {
                reasons.insert(r.record_id.clone(), g.reason_code);
            }
        }
        let Some(genesis) = records.first() else {
            return Err(GovernanceError::Invalid(format!(
                "chain {chain_id} is empty"
            )));
        };
        let g: payload::PolicyBound = serde_json::from_str(&genesis.payload_json)
            .map_err(|e| GovernanceError::Invalid(e.to_string()))?;
        let l = tracker.lifecycle();
        let state = State {
            next: tracker.head().map_or(0, |h| h.sequence + 1),
            closed: l.closed.is_some(),
            open: l
                .open
                .iter()
                .map(|(op, o)| {
                    let gates = o
                        .gates
                        .iter()
                        .map(|(id, level, verdict)| GateFact {
                            record_id: id.clone(),
                            level: *level,
                            verdict: *verdict,
                            reason_code: reasons.get(id).copied().unwrap_or(ReasonCode::PolicyRule),
                        })
                        .collect();
                    (op.clone(), gates)
                })
                .collect(),
            excepted: l
                .open
                .iter()
                .map(|(op, o)| (op.clone(), o.excepted.clone()))
                .collect(),
            // After a restart every open operation is recover()'s to close.
            unacknowledged: HashSet::new(),
            terminated: l.terminated.clone(),
            operations: l.operations,
            terminals: l.terminals,
            exceptions: l.exceptions,
        };
        let binding = GovernanceBinding {
            task_boundary: TaskBoundary(g.task_boundary_id),
            chain_id,
            policy: PolicySnapshotRef {
                policy_id: genesis.policy_id.clone(),
                version: genesis.policy_version.clone(),
                digest: g.policy_digest,
            },
            profile,
        };
        Ok(Self {
            inner: Arc::new(Inner {
                store,
                clock,
                binding,
                state: Mutex::new(state),
                resync: AtomicBool::new(false),
            }),
        })
    }

    /// The binding.
    pub fn binding(&self) -> &GovernanceBinding {
        &self.inner.binding
    }

    fn is_open(&self, op: &OperationId) -> bool {
        lock(&self.inner.state).open.contains_key(op)
    }

    /// Operations started and not yet closed by a terminal record.
    pub fn open_operations(&self) -> Vec<OperationId> {
        let mut v: Vec<_> = lock(&self.inner.state).open.keys().cloned().collect();
        v.sort();
        v
    }

    /// The store the recorder appends to.
    pub fn store(&self) -> &Arc<dyn GovernedStore> {
        &self.inner.store
    }

    /// Every record of the boundary's chain, in order.
    pub async fn records(&self) -> Result<Vec<warden_contracts::EvidenceRecord>, GovernanceError> {
        self.inner
            .store
            .read(&self.inner.binding.chain_id, None, usize::MAX)
            .await
            .map_err(pre_call)
    }

    /// The chain's head, as the store has it.
    pub async fn head(&self) -> Result<Option<ChainHead>, GovernanceError> {
        self.inner
            .store
            .head(&self.inner.binding.chain_id)
            .await
            .map_err(pre_call)
    }

    async fn append(
        &self,
        operation_id: Option<&OperationId>,
        payload: Payload,
        call_executed: bool,
    ) -> Result<AppendReceipt, GovernanceError> {
        self.append_raw(operation_id, payload, None, call_executed)
            .await
            .map_err(|u| u.error)
    }

    /// Appends one record. A failure says whether the record is durable nonetheless: the
    /// store's receipt arrived before a later failure (`governed.after_append`), or the store
    /// reported an error and reading the sequence back finds the record.
    async fn append_raw(
        &self,
        operation_id: Option<&OperationId>,
        payload: Payload,
        supersedes: Option<RecordId>,
        call_executed: bool,
    ) -> Result<AppendReceipt, Unrecorded> {
        let inner = &self.inner;
        let fail = |source| GovernanceError::Evidence {
            call_executed,
            source,
        };
        let lost = |error| Unrecorded {
            error,
            durable: None,
        };
        let record_type = payload.record_type();
        if inner.resync.swap(false, Ordering::SeqCst) {
            let head = inner
                .store
                .head(&inner.binding.chain_id)
                .await
                .map_err(|e| lost(fail(e)))?;
            lock(&inner.state).next = head.map_or(0, |h| h.sequence + 1);
        }
        // The time is read before the record has its sequence, so two concurrent operations'
        // records can be a few microseconds out of time order.
        let b = &inner.binding;
        let append = TypedAppend {
            chain_id: b.chain_id.clone(),
            operation_id: operation_id.cloned(),
            policy_id: b.policy.policy_id.clone(),
            policy_version: b.policy.version.clone(),
            payload,
            supersedes_record_id: supersedes,
            created_at: inner.clock.now(),
        };
        let (pending, sequence) = {
            let mut st = lock(&inner.state);
            if st.closed {
                return Err(lost(GovernanceError::Closed(
                    inner.binding.task_boundary.as_str().to_owned(),
                )));
            }
            let sequence = st.next;
            st.next += 1;
            (inner.store.append_typed(append, sequence), sequence)
        };
        match pending.await {
            Ok(receipt) => match fault::point("governed.after_append") {
                Ok(()) => Ok(receipt),
                Err(f) => {
                    tracing::error!(chain = %inner.binding.chain_id, record = %receipt.record_id, call_executed, "governed evidence append failed after the record was stored");
                    Err(Unrecorded {
                        error: fail(EvidenceError::Unavailable {
                            message: format!("injected fault at {}", f.0),
                        }),
                        durable: Some(receipt),
                    })
                }
            },
            Err(e) => {
                inner.resync.store(true, Ordering::SeqCst);
                let durable = self.read_back(sequence, record_type, operation_id).await;
                tracing::error!(chain = %inner.binding.chain_id, error = %e, call_executed, durable = durable.is_some(), "governed evidence append failed");
                Err(Unrecorded {
                    error: fail(e),
                    durable,
                })
            }
        }
    }

    /// After a failed append: the record at `sequence`, if it is durable and is this append's
    /// (same type and operation; sequences are assigned by this recorder, and nothing else
    /// records this operation's record of this type at that sequence). `None` when it is not
    /// there or the store cannot be read (then only a restart's `resume` can tell).
    async fn read_back(
        &self,
        sequence: u64,
        record_type: RecordType,
        operation_id: Option<&OperationId>,
    ) -> Option<AppendReceipt> {
        let records = self
            .inner
            .store
            .read(&self.inner.binding.chain_id, sequence.checked_sub(1), 1)
            .await
            .ok()?;
        let r = records.into_iter().next()?;
        (r.sequence == sequence
            && r.record_type == record_type
            && r.operation_id.as_ref() == operation_id)
            .then_some(AppendReceipt {
                chain_id: r.chain_id,
                record_id: r.record_id,
                sequence: r.sequence,
                chain_hash: r.chain_hash,
            })
    }

    /// Stage 4: checks the idempotency key and the approval's single use, then appends
    /// `policy_bound` and `operation_started` and returns the handle, only with both receipts.
    ///
    /// When `operation_started` is durable but its append failed afterwards, the answer is
    /// [`GovernanceError::StartedUnacknowledged`]: the operation counts as open (the boundary
    /// cannot close before it is closed), no handle exists to gate or invoke with, and
    /// [`Self::take_unacknowledged`] gives the one handle that can close it.
    pub async fn start_operation(&self, start: OperationStart) -> Result<Started, GovernanceError> {
        let inner = &self.inner;
        let b = &inner.binding;
        if start.policy.as_ref() != Some(&b.policy) {
            return Err(GovernanceError::PolicyMismatch {
                bound: b.policy.digest.clone(),
                given: start
                    .policy
                    .as_ref()
                    .map_or_else(|| "none".to_owned(), |p| p.digest.to_string()),
            });
        }
        let key_digest = start.idempotency_key_digest();
        if let Some(key) = &key_digest
            && let Some(replay) = self.replay(key, &start).await?
        {
            return Ok(Started::Replay(replay));
        }
        let approval = match &start.approval {
            Some(receipt) => {
                if let Some(used_by) = inner
                    .store
                    .find_approval_use(receipt.approval_id())
                    .await
                    .map_err(pre_call)?
                {
                    return Err(GovernanceError::ApprovalAlreadyUsed {
                        approval_id: receipt.approval_id().clone(),
                        used_by,
                    });
                }
                let digest = Digest::of_serialize(receipt)
                    .map_err(|e| GovernanceError::Invalid(e.to_string()))?;
                Some((receipt.approval_id().clone(), digest))
            }
            None => None,
        };
        let started = payload::OperationStarted {
            request_id: start.request_id.clone(),
            attempt: start.attempt.max(1),
            action: label(&start.action)?,
            action_version: start.action_version.as_deref().map(label).transpose()?,
            request_digest: start.request_digest.clone(),
            arguments_digest: start.arguments_digest.clone(),
            principal: start.principal.clone(),
            tenant_id: start.tenant_id.clone(),
            session_id: start.session_id.clone(),
            scope: start.scope.clone(),
            backend: label(&start.backend)?,
            capability_digest: start.capability_digest.clone(),
            policy_digest: b.policy.digest.clone(),
            profile: b.profile,
            idempotency_key_digest: key_digest.clone(),
            approval_id: approval.as_ref().map(|(id, _)| id.clone()),
            approval_receipt_digest: approval.map(|(_, d)| d),
        };
        let op = &start.operation_id;
        let bound = Payload::PolicyBound(payload::PolicyBound {
            task_boundary_id: b.task_boundary.0.clone(),
            policy_digest: b.policy.digest.clone(),
            snapshot_json: None,
        });
        let policy_receipt = self.append(Some(op), bound, false).await?;
        let receipt = match self
            .append_raw(
                Some(op),
                Payload::OperationStarted(Box::new(started)),
                None,
                false,
            )
            .await
        {
            Ok(r) => r,
            Err(Unrecorded {
                error,
                durable: Some(started),
            }) => {
                // The operation started on the chain: it is open and needs its one terminal,
                // but the caller holds no handle, so nothing can invoke for it.
                {
                    let mut st = lock(&inner.state);
                    st.open.insert(op.clone(), Vec::new());
                    st.unacknowledged.insert(op.clone());
                    st.operations += 1;
                }
                let source = match error {
                    GovernanceError::Evidence { source, .. } => source,
                    other => EvidenceError::Unavailable {
                        message: other.to_string(),
                    },
                };
                return Err(GovernanceError::StartedUnacknowledged {
                    started: Box::new(UnacknowledgedStart {
                        operation_id: op.clone(),
                        policy_bound: policy_receipt,
                        started,
                    }),
                    source,
                });
            }
            Err(Unrecorded { error: e, .. }) => {
                // A concurrent start with the same key won the race: answer with its replay.
                if let Some(key) = &key_digest
                    && let Some(replay) = self.replay(key, &start).await?
                {
                    return Ok(Started::Replay(replay));
                }
                if let GovernanceError::Evidence {
                    source: EvidenceError::Invalid { message },
                    ..
                } = &e
                    && message.starts_with("approval already used")
                    && let Some(receipt) = &start.approval
                    && let Some(used_by) = inner
                        .store
                        .find_approval_use(receipt.approval_id())
                        .await
                        .map_err(pre_call)?
                {
                    return Err(GovernanceError::ApprovalAlreadyUsed {
                        approval_id: receipt.approval_id().clone(),
                        used_by,
                    });
                }
                return Err(e);
            }
        };
        {
            let mut st = lock(&inner.state);
            st.open.insert(op.clone(), Vec::new());
            st.operations += 1;
        }
        Ok(Started::New(OperationHandle {
            recorder: self.clone(),
            operation_id: op.clone(),
            policy_bound: policy_receipt,
            started: receipt,
            arguments_digest: start.arguments_digest,
            gates: Vec::new(),
            excepted: Vec::new(),
            done: false,
        }))
    }

    async fn replay(
        &self,
        key: &Digest,
        start: &OperationStart,
    ) -> Result<Option<Replay>, GovernanceError> {
        let store = &self.inner.store;
        let Some(existing) = store.find_idempotency_key(key).await.map_err(pre_call)? else {
            return Ok(None);
        };
        let after = existing.sequence.checked_sub(1);
        let records = store
            .read(&existing.chain_id, after, usize::MAX)
            .await
            .map_err(pre_call)?;
        let mut replay = Replay {
            operation: existing.clone(),
            terminal: None,
            terminal_record: None,
            result_digest: None,
            call_executed: None,
            failure_kind: None,
            reason_code: None,
            escalated: false,
        };
        for r in &records {
            if r.operation_id.as_ref() != Some(&existing.operation_id) {
                continue;
            }
            if r.record_type == RecordType::OperationStarted {
                let v: Value = serde_json::from_str(&r.payload_json)
                    .map_err(|e| GovernanceError::Invalid(e.to_string()))?;
                if let Ok(Payload::OperationStarted(p)) = payload::parse(r.record_type, &v) {
                    if p.action.as_str() != start.action {
                        return Err(GovernanceError::IdempotencyConflict {
                            existing,
                            what: "action".into(),
                        });
                    }
                    if p.arguments_digest != start.arguments_digest {
                        return Err(GovernanceError::IdempotencyConflict {
                            existing,
                            what: "arguments".into(),
                        });
                    }
                }
            } else if r.record_type.is_terminal() {
                replay.terminal = Some(r.record_type);
                replay.terminal_record = Some(EvidenceRef {
                    chain_id: r.chain_id.clone(),
                    record_id: r.record_id.clone(),
                    chain_hash: r.chain_hash.clone(),
                });
                let parsed = serde_json::from_str::<Value>(&r.payload_json)
                    .ok()
                    .and_then(|v| payload::parse(r.record_type, &v).ok());
                match parsed {
                    Some(Payload::CallableCompleted(c)) => {
                        replay.result_digest = Some(c.result_digest);
                        replay.call_executed = Some(true);
                    }
                    Some(Payload::CallableFailed(f)) => {
                        replay.call_executed = Some(f.call_executed);
                        replay.failure_kind = Some(f.failure_kind.as_str().to_owned());
                    }
                    Some(Payload::OperationCancelled(c)) => {
                        replay.call_executed = Some(c.call_executed);
                    }
                    Some(Payload::OperationTimedOut(t)) => {
                        replay.call_executed = Some(t.call_executed);
                    }
                    Some(Payload::OperationDenied(d)) => {
                        replay.call_executed = Some(false);
                        replay.reason_code = Some(d.reason_code);
                        replay.escalated = d.disposition == DenialKind::Escalate;
                    }
                    _ => {}
                }
                break;
            }
        }
        Ok(Some(replay))
    }

    fn note_terminal(&self, op: &OperationId, t: RecordType) {
        let mut st = lock(&self.inner.state);
        st.open.remove(op);
        st.excepted.remove(op);
        st.unacknowledged.remove(op);
        st.terminated.insert(op.clone());
        st.terminals.add(t);
    }

    /// Closes `op` before its call ran: the terminal record for `kind`, `call_executed = false`.
    async fn close_unrun(
        &self,
        op: &OperationId,
        kind: &TerminalKind,
    ) -> Result<AppendReceipt, GovernanceError> {
        self.terminal(op, terminal_payload(kind, false, 0)?, false)
            .await
    }

    async fn terminal(
        &self,
        op: &OperationId,
        payload: Payload,
        call_executed: bool,
    ) -> Result<AppendReceipt, GovernanceError> {
        let t = payload.record_type();
        {
            let st = lock(&self.inner.state);
            if st.terminated.contains(op) {
                return Err(GovernanceError::Invalid(format!(
                    "operation {op} already has its terminal record"
                )));
            }
        }
        match self
            .append_raw(Some(op), payload, None, call_executed)
            .await
        {
            Ok(r) => {
                self.note_terminal(op, t);
                Ok(r)
            }
            Err(u) => {
                if u.durable.is_some() {
                    // The terminal is on the chain: the operation is closed, whatever the error.
                    self.note_terminal(op, t);
                }
                Err(u.error)
            }
        }
    }

    /// The one handle that can close an operation whose `operation_started` was durable but
    /// not acknowledged ([`GovernanceError::StartedUnacknowledged`]); `None` when the operation
    /// is not such an operation, is already closed, or its handle is taken. The handle can
    /// only close the operation before any call (`call_executed = false`).
    pub fn take_unacknowledged(
        &self,
        operation_id: &OperationId,
    ) -> Option<UnacknowledgedOperation> {
        let mut st = lock(&self.inner.state);
        (st.open.contains_key(operation_id) && st.unacknowledged.remove(operation_id)).then(|| {
            UnacknowledgedOperation {
                recorder: self.clone(),
                operation_id: operation_id.clone(),
                done: false,
            }
        })
    }

    /// Closes every open operation (after a crash), never re-invoking anything:
    ///
    /// - no gate recorded: `operation_cancelled` with `call_executed = false` (the reducer
    ///   denies an operation without gates, so no permit to invoke can have existed);
    /// - recorded gates that reduce to a denial: `operation_denied` (evaluator `recovery`; the
    ///   call certainly did not run);
    /// - otherwise `external_result_ambiguous` (`recovered_unterminated`): the pre-call
    ///   checkpoint may have completed and the call may have run; it is never retried without
    ///   reconciliation.
    ///
    /// Call it at start-up, before any new operation: it closes *every* open operation of
    /// the boundary, including ones this process would still be running.
    pub async fn recover(&self) -> Result<Vec<Recovered>, GovernanceError> {
        let open: Vec<(OperationId, Vec<GateFact>, Vec<RecordId>)> = {
            let st = lock(&self.inner.state);
            let mut v: Vec<_> = st
                .open
                .iter()
                .map(|(op, gates)| {
                    (
                        op.clone(),
                        gates.clone(),
                        st.excepted.get(op).cloned().unwrap_or_default(),
                    )
                })
                .collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        let mut out = Vec::new();
        for (op, gates, excepted) in open {
            let facts: Vec<_> = gates
                .iter()
                .map(|g| (g.record_id.clone(), g.level, g.verdict, g.reason_code))
                .collect();
            let reduction = reduce(&facts, &excepted, false);
            let payload = if gates.is_empty() {
                Payload::OperationCancelled(payload::OperationCancelled {
                    call_executed: false,
                })
            } else if reduction.disposition == Disposition::Deny {
                Payload::OperationDenied(payload::OperationDenied {
                    disposition: DenialKind::Deny,
                    reason_code: reduction.reason_code,
                    evaluator: label("recovery")?,
                    deciding_gate_record_id: reduction.deciding_gate,
                    approval_id: None,
                    authority: None,
                    gates_evaluated: gates.len() as u64,
                    stop: false,
                })
            } else {
                Payload::ExternalResultAmbiguous(payload::ExternalResultAmbiguous {
                    cause: label(AmbiguityCause::RecoveredUnterminated.as_str())?,
                    recovered: true,
                })
            };
            let t = payload.record_type();
            let receipt = self.terminal(&op, payload, false).await?;
            out.push(Recovered {
                operation_id: op,
                terminal: t,
                receipt,
            });
        }
        Ok(out)
    }

    /// Closes the task boundary with `task_closed`. Refused while any operation is open.
    pub async fn close(
        &self,
        disposition: CloseDisposition,
    ) -> Result<AppendReceipt, GovernanceError> {
        let payload = {
            let st = lock(&self.inner.state);
            if !st.open.is_empty() {
                let mut operations: Vec<_> = st.open.keys().cloned().collect();
                operations.sort();
                return Err(GovernanceError::OpenOperations { operations });
            }
            Payload::TaskClosed(payload::TaskClosed {
                task_boundary_id: self.inner.binding.task_boundary.0.clone(),
                disposition,
                operations: st.operations,
                terminals: st.terminals,
                exceptions: st.exceptions,
            })
        };
        match self.append_raw(None, payload, None, false).await {
            Ok(r) => {
                lock(&self.inner.state).closed = true;
                Ok(r)
            }
            Err(u) => {
                if u.durable.is_some() {
                    lock(&self.inner.state).closed = true;
                }
                Err(u.error)
            }
        }
    }

    /// Appends a correction of an earlier record (which stays unchanged).
    pub async fn supersede(
        &self,
        superseded: &warden_contracts::EvidenceRecord,
        reason: &str,
        corrected_payload: Option<Value>,
    ) -> Result<AppendReceipt, GovernanceError> {
        let payload = Payload::RecordSuperseded(payload::RecordSuperseded {
            superseded_sequence: superseded.sequence,
            superseded_record_type: superseded.record_type,
            reason: label(reason)?,
            corrected_payload,
        });
        self.append_raw(
            superseded.operation_id.as_ref(),
            payload,
            Some(superseded.record_id.clone()),
            false,
        )
        .await
        .map_err(|u| u.error)
    }
}

fn pre_call(source: EvidenceError) -> GovernanceError {
    GovernanceError::Evidence {
        call_executed: false,
        source,
    }
}

/// A failed append, and its record if it is durable nonetheless.
struct Unrecorded {
    error: GovernanceError,
    durable: Option<AppendReceipt>,
}

/// An operation whose `operation_started` is durable but was not acknowledged
/// ([`GovernedRecorder::take_unacknowledged`]). It can only be closed, before any call: it has no
/// gates and no permit, so the callable is unreachable (evidence before the call: a failed pre-call
/// append makes the callable unreachable; every started operation gets exactly one terminal
/// record). Dropped without closing, it stays open and can be taken again, or recovered.
#[derive(Debug)]
pub struct UnacknowledgedOperation {
    recorder: GovernedRecorder,
    operation_id: OperationId,
    done: bool,
}

impl UnacknowledgedOperation {
    /// The operation.
    pub fn operation_id(&self) -> &OperationId {
        &self.operation_id
    }

    /// Closes it as `operation_denied` (no gate was recorded: `gates_evaluated = 0`).
    pub async fn deny(mut self, denial: Denial) -> Result<AppendReceipt, GovernanceError> {
        let payload = denial_payload(&denial, 0)?;
        let r = self
            .recorder
            .terminal(&self.operation_id, payload, false)
            .await;
        self.done = r.is_ok() || !self.recorder.is_open(&self.operation_id);
        r
    }

    /// Closes it as cancelled, timed out or failed, not reached (`call_executed = false`).
    /// `Completed` and `Ambiguous` are refused: the call cannot have run.
    pub async fn close_before_call(
        mut self,
        kind: TerminalKind,
    ) -> Result<AppendReceipt, GovernanceError> {
        if matches!(
            kind,
            TerminalKind::Completed { .. } | TerminalKind::Ambiguous(_)
        ) {
            return Err(GovernanceError::Invalid(format!(
                "operation {} was never acknowledged as started, so its call cannot have run",
                self.operation_id
            )));
        }
        let r = self.recorder.close_unrun(&self.operation_id, &kind).await;
        self.done = r.is_ok() || !self.recorder.is_open(&self.operation_id);
        r
    }
}

impl Drop for UnacknowledgedOperation {
    fn drop(&mut self) {
        if !self.done {
            let mut st = lock(&self.recorder.inner.state);
            if st.open.contains_key(&self.operation_id) {
                st.unacknowledged.insert(self.operation_id.clone());
                tracing::warn!(operation = %self.operation_id, "unacknowledged operation left open; take_unacknowledged() or recover() closes it");
            }
        }
    }
}

/// An open governed operation before its call: gates and exceptions are appended here, and
/// [`Self::authorize`] runs the reducer.
#[derive(Debug)]
pub struct OperationHandle {
    recorder: GovernedRecorder,
    operation_id: OperationId,
    policy_bound: AppendReceipt,
    started: AppendReceipt,
    arguments_digest: Digest,
    gates: Vec<GateFact>,
    excepted: Vec<RecordId>,
    done: bool,
}

/// A closing denial or escalation outside the reducer (an evaluator error, a failed re-check).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The reason code.
    pub reason_code: ReasonCode,
    /// The evaluator.
    pub evaluator: String,
    /// Whether it stops the turn's other calls.
    pub stop: bool,
}

/// What [`OperationHandle::authorize`] decided.
#[derive(Debug)]
pub enum Authorization {
    /// Allowed: the pre-call checkpoint is complete; invoke through the permit.
    Permitted(InvocationPermit),
    /// Denied: `operation_denied` (terminal) is durable.
    Denied {
        /// The reduction.
        reduction: Reduction,
        /// The terminal record's receipt.
        receipt: AppendReceipt,
    },
    /// Escalated: closed as `operation_denied` (escalate); an approval starts a new operation.
    Escalated {
        /// The reduction.
        reduction: Reduction,
        /// The terminal record's receipt.
        receipt: AppendReceipt,
    },
}

/// Where an escalation goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escalation {
    /// The approval request's id.
    pub approval_id: ApprovalId,
    /// The named authority.
    pub authority: String,
}

impl OperationHandle {
    /// The operation's id.
    pub fn operation_id(&self) -> &OperationId {
        &self.operation_id
    }

    /// Digest of the validated arguments the operation started with.
    pub fn arguments_digest(&self) -> &Digest {
        &self.arguments_digest
    }

    /// The receipts of `policy_bound` and `operation_started`.
    pub fn start_receipts(&self) -> (&AppendReceipt, &AppendReceipt) {
        (&self.policy_bound, &self.started)
    }

    fn recorder(&self) -> &GovernedRecorder {
        &self.recorder
    }

    /// Appends one of this operation's non-terminal records. A record that is durable although
    /// its append reported an error still counts (for the reducer, recovery and the boundary's
    /// counts): it comes back with that error, for the caller to report once it has counted it.
    async fn append_counted(
        &self,
        payload: Payload,
    ) -> Result<(AppendReceipt, Option<GovernanceError>), GovernanceError> {
        match self
            .recorder()
            .append_raw(Some(&self.operation_id), payload, None, false)
            .await
        {
            Ok(r) => Ok((r, None)),
            Err(Unrecorded {
                error,
                durable: Some(r),
            }) => Ok((r, Some(error))),
            Err(Unrecorded { error, .. }) => Err(error),
        }
    }

    /// Appends one `gate_evaluated` (stage 11: as each evaluation is produced).
    pub async fn gate(&mut self, g: GateEvaluation) -> Result<AppendReceipt, GovernanceError> {
        let payload = Payload::GateEvaluated(payload::GateEvaluated {
            gate: label(&g.gate)?,
            stage: g.stage,
            level: g.level,
            verdict: g.verdict,
            reason_code: g.reason_code,
            rule: g
                .rule
                .as_deref()
                .map(RuleText::new)
                .transpose()
                .map_err(GovernanceError::Invalid)?,
            source: g.source.as_deref().map(label).transpose()?,
            arguments_digest: g.arguments_digest.clone(),
            recheck: g.recheck,
        });
        // A durable gate counts for the reducer and recovery even when its append failed.
        let (r, failed) = self.append_counted(payload).await?;
        let fact = GateFact {
            record_id: r.record_id.clone(),
            level: g.level,
            verdict: g.verdict,
            reason_code: g.reason_code,
        };
        self.gates.push(fact.clone());
        if let Some(v) = lock(&self.recorder.inner.state)
            .open
            .get_mut(&self.operation_id)
        {
            v.push(fact);
        }
        failed.map_or(Ok(r), Err)
    }

    /// Appends `exception_granted` for one of this operation's soft denies.
    pub async fn exception(&mut self, e: ExceptionGrant) -> Result<AppendReceipt, GovernanceError> {
        let soft_deny = self.gates.iter().any(|g| {
            g.record_id == e.gate_record_id
                && g.level == GateLevel::Soft
                && g.verdict == GateVerdict::Deny
        });
        if !soft_deny || self.excepted.contains(&e.gate_record_id) {
            return Err(GovernanceError::Invalid(format!(
                "{} is not an un-excepted soft deny of operation {}",
                e.gate_record_id, self.operation_id
            )));
        }
        let payload = Payload::ExceptionGranted(payload::ExceptionGranted {
            gate_record_id: e.gate_record_id.clone(),
            exception_id: label(&e.exception_id)?,
            authority: label(&e.authority)?,
            granted_by: e.granted_by.clone(),
            expires_at: e.expires_at,
            arguments_digest: e.arguments_digest.clone(),
        });
        // A durable exception counts (the boundary's `task_closed` counts it) even when its
        // append failed.
        let (r, failed) = self.append_counted(payload).await?;
        self.excepted.push(e.gate_record_id.clone());
        let mut st = lock(&self.recorder.inner.state);
        st.exceptions += 1;
        st.excepted
            .entry(self.operation_id.clone())
            .or_default()
            .push(e.gate_record_id);
        failed.map_or(Ok(r), Err)
    }

    /// The reducer over the gates recorded so far.
    pub fn reduction(&self, approval_authority: bool) -> Reduction {
        let facts: Vec<_> = self
            .gates
            .iter()
            .map(|g| (g.record_id.clone(), g.level, g.verdict, g.reason_code))
            .collect();
        reduce(&facts, &self.excepted, approval_authority)
    }

    /// Runs the reducer and closes the pre-call checkpoint: a denial or escalation appends
    /// `operation_denied` (terminal); an allow returns the permit to invoke with.
    pub async fn authorize(
        self,
        escalation: Option<Escalation>,
    ) -> Result<Authorization, GovernanceError> {
        self.authorize_with(escalation, false).await
    }

    /// [`Self::authorize`], recording `stop` on a denial (the denial also cancels the turn's
    /// other pending calls).
    pub async fn authorize_with(
        mut self,
        escalation: Option<Escalation>,
        stop: bool,
    ) -> Result<Authorization, GovernanceError> {
        let reduction = self.reduction(escalation.is_some());
        match reduction.disposition {
            Disposition::Allow => {
                self.done = true;
                Ok(Authorization::Permitted(InvocationPermit {
                    recorder: self.recorder.clone(),
                    operation_id: self.operation_id.clone(),
                    reduction,
                    done: false,
                }))
            }
            d => {
                let escalate = d == Disposition::Escalate;
                let esc = escalation.filter(|_| escalate);
                let payload = Payload::OperationDenied(payload::OperationDenied {
                    disposition: if escalate {
                        DenialKind::Escalate
                    } else {
                        DenialKind::Deny
                    },
                    reason_code: reduction.reason_code,
                    evaluator: label("reducer")?,
                    deciding_gate_record_id: reduction.deciding_gate.clone(),
                    approval_id: esc.as_ref().map(|e| e.approval_id.clone()),
                    authority: esc.as_ref().map(|e| label(&e.authority)).transpose()?,
                    gates_evaluated: self.gates.len() as u64,
                    stop: stop && !escalate,
                });
                let receipt = self
                    .recorder
                    .terminal(&self.operation_id, payload, false)
                    .await?;
                self.done = true;
                Ok(if escalate {
                    Authorization::Escalated { reduction, receipt }
                } else {
                    Authorization::Denied { reduction, receipt }
                })
            }
        }
    }

    /// Closes the operation as denied for a reason outside the gates' reduction.
    pub async fn deny(mut self, denial: Denial) -> Result<AppendReceipt, GovernanceError> {
        let payload = denial_payload(&denial, self.gates.len() as u64)?;
        let r = self
            .recorder
            .terminal(&self.operation_id, payload, false)
            .await?;
        self.done = true;
        Ok(r)
    }

    /// Closes the operation before its call: cancelled, timed out, or failed (call not reached).
    pub async fn close_before_call(
        mut self,
        kind: TerminalKind,
    ) -> Result<AppendReceipt, GovernanceError> {
        let r = self.recorder.close_unrun(&self.operation_id, &kind).await?;
        self.done = true;
        Ok(r)
    }
}

impl Drop for OperationHandle {
    fn drop(&mut self) {
        if !self.done {
            tracing::warn!(operation = %self.operation_id, "governed operation dropped without a terminal record; recover() closes it");
        }
    }
}

fn terminal_payload(
    kind: &TerminalKind,
    call_executed: bool,
    duration_ms: u64,
) -> Result<Payload, GovernanceError> {
    Ok(match kind {
        TerminalKind::Completed { result_digest } => {
            Payload::CallableCompleted(payload::CallableCompleted {
                result_digest: result_digest.clone(),
                duration_ms,
                degraded: false,
                advisory_denials: 0,
            })
        }
        TerminalKind::Failed {
            kind,
            message_digest,
        } => Payload::CallableFailed(payload::CallableFailed {
            failure_kind: label(kind)?,
            call_executed,
            message_digest: message_digest.clone(),
            duration_ms,
        }),
        TerminalKind::Cancelled => {
            Payload::OperationCancelled(payload::OperationCancelled { call_executed })
        }
        TerminalKind::TimedOut { deadline } => {
            Payload::OperationTimedOut(payload::OperationTimedOut {
                call_executed,
                deadline: *deadline,
            })
        }
        TerminalKind::Ambiguous(cause) => {
            Payload::ExternalResultAmbiguous(payload::ExternalResultAmbiguous {
                cause: label(cause.as_str())?,
                recovered: false,
            })
        }
    })
}

/// The pre-call checkpoint is complete: the only way to [`InvocationPermit::begin`] the call.
#[derive(Debug)]
pub struct InvocationPermit {
    recorder: GovernedRecorder,
    operation_id: OperationId,
    reduction: Reduction,
    done: bool,
}

impl InvocationPermit {
    /// The reduction that allowed the call (degraded, advisory denials).
    pub fn reduction(&self) -> &Reduction {
        &self.reduction
    }

    /// The operation.
    pub fn operation_id(&self) -> &OperationId {
        &self.operation_id
    }

    /// Marks the call as starting; invoke right after. Nothing is appended here (the
    /// checkpoint is already durable).
    pub async fn begin(mut self) -> Result<InFlight, GovernanceError> {
        if let Err(f) = fault::point("governed.before_invoke") {
            // An injected failure before the call: close it as failed, not reached.
            let failed = TerminalKind::Failed {
                kind: "injected_fault".into(),
                message_digest: None,
            };
            self.recorder
                .close_unrun(&self.operation_id, &failed)
                .await?;
            self.done = true;
            return Err(pre_call(EvidenceError::Unavailable {
                message: format!("injected fault at {}", f.0),
            }));
        }
        self.done = true;
        Ok(InFlight {
            recorder: self.recorder.clone(),
            operation_id: self.operation_id.clone(),
            reduction: self.reduction.clone(),
            started: Instant::now(),
            done: false,
        })
    }

    /// Closes the operation without calling (cancelled or timed out while waiting).
    pub async fn close_before_call(
        mut self,
        kind: TerminalKind,
    ) -> Result<AppendReceipt, GovernanceError> {
        let r = self.recorder.close_unrun(&self.operation_id, &kind).await?;
        self.done = true;
        Ok(r)
    }
}

impl Drop for InvocationPermit {
    fn drop(&mut self) {
        if !self.done {
            tracing::warn!(operation = %self.operation_id, "invocation permit dropped without a terminal record");
        }
    }
}

/// A call in flight: close it with exactly one terminal record. Errors here always report
/// `call_executed = true`, and the call is never retried.
#[derive(Debug)]
pub struct InFlight {
    recorder: GovernedRecorder,
    operation_id: OperationId,
    reduction: Reduction,
    started: Instant,
    done: bool,
}

impl InFlight {
    /// The operation.
    pub fn operation_id(&self) -> &OperationId {
        &self.operation_id
    }

    /// Appends the terminal record for how the call ended.
    pub async fn finish(mut self, kind: TerminalKind) -> Result<AppendReceipt, GovernanceError> {
        self.done = true;
        let duration_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        fault::point("governed.after_invoke").map_err(|f| GovernanceError::Evidence {
            call_executed: true,
            source: EvidenceError::Unavailable {
                message: format!("injected fault at {}", f.0),
            },
        })?;
        let mut payload = terminal_payload(&kind, true, duration_ms)?;
        if let Payload::CallableCompleted(p) = &mut payload {
            p.degraded = self.reduction.degraded;
            p.advisory_denials = self.reduction.advisory_denials.len() as u64;
        }
        self.recorder
            .terminal(&self.operation_id, payload, true)
            .await
    }

    /// The call returned `result`: `callable_completed` with the result's digest.
    pub async fn completed(self, result: &Value) -> Result<AppendReceipt, GovernanceError> {
        let result_digest = Digest::of_json(result).map_err(|e| GovernanceError::Evidence {
            call_executed: true,
            source: EvidenceError::Invalid {
                message: e.to_string(),
            },
        })?;
        self.finish(TerminalKind::Completed { result_digest }).await
    }

    /// Closes the call with the terminal record its outcome requires (one terminal per operation).
    pub async fn finish_outcome(
        self,
        outcome: &ExecutionOutcome,
    ) -> Result<AppendReceipt, GovernanceError> {
        let kind = match outcome {
            ExecutionOutcome::Succeeded { result, .. } => {
                return self.completed(result).await;
            }
            ExecutionOutcome::Failed { failure, .. } => TerminalKind::Failed {
                kind: failure.kind.clone(),
                message_digest: Some(Digest::of_bytes(failure.message.as_bytes())),
            },
            ExecutionOutcome::Cancelled { .. } => TerminalKind::Cancelled,
            ExecutionOutcome::TimedOut { .. } => TerminalKind::TimedOut { deadline: None },
            ExecutionOutcome::Ambiguous { .. } => {
                TerminalKind::Ambiguous(AmbiguityCause::TransportLost)
            }
            other => {
                return Err(GovernanceError::Invalid(format!(
                    "a {} outcome cannot close a call in flight",
                    other.status()
                )));
            }
        };
        self.finish(kind).await
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.done {
            tracing::warn!(operation = %self.operation_id, "call in flight dropped without a terminal record; recover() closes it as ambiguous");
        }
    }
}
