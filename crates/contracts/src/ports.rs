//! The ports: traits every other layer implements. Contracts define them; nothing here does I/O.
//!
//! | port | implemented by | used by |
//! |---|---|---|
//! | [`Executor`] | `warden-executor` | every composition root (CLI, MCP proxy, a user's runtime) |
//! | [`EvidenceStore`] | `warden-evidence` (memory, SQLite) | the executor's governed profiles |
//! | [`Reviewer`] | a human front, an LLM reviewer, a receipt verifier | the executor on escalation |
//! | [`Observer`] | journals, metrics, tracing | the executor and the policy engine |
//! | [`EffectBackend`] | `warden-sandbox` backends (in-process, subprocess) | tools, via the executor |
//! | [`PolicyEvaluator`] | `warden-executor`'s adapter over a compiled `warden-policy` snapshot | the executor's authorize and re-authorize stages |
//! | [`Capacity`] | `warden-executor`'s limits (concurrency, token buckets), a user's quota service | the executor's admission stage |

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use serde_json::{Map, Value};

use crate::action::ActionDescriptor;
use crate::approval::{ApprovalReceipt, ApprovalRequest};
use crate::capability::{CapabilityReport, ProcessOutput, ProcessSpec};
use crate::decision::{AdmissionDecision, DecisionReason, Disposition};
use crate::error::ContractError;
use crate::evidence::{
    AppendReceipt, ChainHead, EvidenceAppend, EvidenceRecord, VerificationResult,
};
use crate::ids::{ChainId, RequestId, SessionId, Timestamp};
use crate::outcome::ExecutionOutcome;
use crate::request::{ExecutionContext, ExecutionRequest};
use crate::scope::{BackendRef, PolicySnapshotRef};

/// The one authoritative way to run an action.
#[async_trait]
pub trait Executor: Send + Sync {
    /// Runs `request` under the trusted `context` through the full stage order and returns its
    /// typed outcome. Never panics into the caller and never returns an untyped error.
    async fn execute(
        &self,
        request: ExecutionRequest,
        context: &ExecutionContext,
    ) -> ExecutionOutcome;
}

/// Why an evidence operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum EvidenceError {
    /// The append did not name the next sequence on the current head.
    #[error("sequence conflict on chain {chain_id}: expected {expected}, got {got}")]
    SequenceConflict {
        /// The chain.
        chain_id: ChainId,
        /// The sequence the store would assign.
        expected: u64,
        /// The sequence the caller asked for.
        got: u64,
    },
    /// The record is invalid (payload not canonical, missing policy id…).
    #[error("invalid evidence record: {message}")]
    Invalid {
        /// What is wrong.
        message: String,
    },
    /// The store could not complete the operation (I/O, corruption); nothing was appended.
    #[error("evidence store unavailable: {message}")]
    Unavailable {
        /// What failed.
        message: String,
    },
}

/// Append-only, hash-chained evidence storage.
#[async_trait]
pub trait EvidenceStore: Send + Sync {
    /// Appends one record; returns its receipt only once it is durable (for durable stores).
    async fn append(&self, entry: EvidenceAppend) -> Result<AppendReceipt, EvidenceError>;
    /// Records of `chain` with a sequence greater than `after_sequence` (all when `None`), in
    /// order, at most `limit`.
    async fn read(
        &self,
        chain: &ChainId,
        after_sequence: Option<u64>,
        limit: usize,
    ) -> Result<Vec<EvidenceRecord>, EvidenceError>;
    /// The chain's head, or `None` for an empty chain.
    async fn head(&self, chain: &ChainId) -> Result<Option<ChainHead>, EvidenceError>;
    /// Verifies the whole chain, and that `expected_head` (kept elsewhere) is in it.
    async fn verify(
        &self,
        chain: &ChainId,
        expected_head: Option<&ChainHead>,
    ) -> Result<VerificationResult, EvidenceError>;
}

/// A reviewer's answer to an approval request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "verdict", rename_all = "snake_case", deny_unknown_fields)]
pub enum ReviewVerdict {
    /// Approved: the receipt authorizes exactly the requested call, once.
    Approved {
        /// The receipt.
        receipt: ApprovalReceipt,
    },
    /// Approved with replacement arguments: the call runs again as a new attempt with these
    /// arguments, which are re-validated and re-authorized; the receipt must bind them.
    ApprovedWithArguments {
        /// The receipt, bound to the digest of `arguments`.
        receipt: ApprovalReceipt,
        /// The arguments to run with instead (a JSON object).
        arguments: Map<String, Value>,
    },
    /// Refused.
    Refused {
        /// Why.
        reason: DecisionReason,
    },
    /// No answer yet (a human has not decided); the call stays escalated. (An empty struct
    /// variant, so that unknown fields are refused.)
    Pending {},
}

/// An approval authority: a human front, an automated reviewer, or a receipt verifier.
#[async_trait]
pub trait Reviewer: Send + Sync {
    /// Reviews one approval request. A reviewer that fails must answer `Refused`, never approve.
    async fn review(&self, request: &ApprovalRequest) -> ReviewVerdict;

    /// Reviews one approval request seeing the arguments it was raised on (the request itself
    /// carries only their digest). The default ignores them and calls [`Self::review`]; a
    /// reviewer that inspects or rewrites arguments (the LionAGI escalation callback) overrides
    /// it.
    async fn review_call(
        &self,
        request: &ApprovalRequest,
        arguments: &Map<String, Value>,
    ) -> ReviewVerdict {
        let _ = arguments;
        self.review(request).await
    }
}

/// One stage of the executor's fixed plan, in order.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Resolve the action to a descriptor.
    Resolve,
    /// Validate the arguments against the input schema.
    Validate,
    /// Bind the trusted context.
    BindContext,
    /// Capacity admission and backend preflight.
    Admit,
    /// Governed evidence checkpoint before any gate.
    EvidenceStart,
    /// The session gate.
    SessionGate,
    /// Preconditions: the tool's own argument check, then the composition's (pure checks
    /// before any policy). Journals written before the stage had this name call it `guards`,
    /// which is still read.
    #[serde(alias = "guards")]
    Preconditions,
    /// The policy.
    Authorize,
    /// User transforms.
    Transform,
    /// Re-validate transformed arguments.
    Revalidate,
    /// Re-authorize every evaluator whose input changed.
    Reauthorize,
    /// Evidence checkpoint before invocation.
    EvidenceInvoke,
    /// Consume the token and invoke once.
    Invoke,
    /// Post and error handlers.
    Handlers,
    /// The typed outcome.
    Outcome,
}

/// A decision reached at one stage, as an observer sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionEvent {
    /// The request.
    pub request_id: RequestId,
    /// The stage that decided.
    pub stage: Stage,
    /// The decision.
    pub decision: AdmissionDecision,
}

/// Whether a stage of the plan ran for one request, or was skipped (and why).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StageStatus {
    /// The stage ran.
    Ran,
    /// The stage was skipped: the plan has nothing for it (no session gate, no transform, an
    /// ungoverned profile) or its inputs did not change (re-authorization).
    Skipped,
}

/// One stage of the plan reached by one request, as an observer sees it: every stage a request
/// reaches is reported exactly once, in plan order, ran or skipped.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StageEvent {
    /// The request.
    pub request_id: RequestId,
    /// The stage.
    pub stage: Stage,
    /// Ran or skipped.
    pub status: StageStatus,
    /// Why it was skipped, or a short note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Observes decisions and outcomes. Observation never vetoes or changes anything, and an
/// observer must not block.
pub trait Observer: Send + Sync {
    /// A stage was reached (ran or skipped).
    fn on_stage(&self, event: &StageEvent) {
        let _ = event;
    }
    /// A stage decided.
    fn on_decision(&self, event: &DecisionEvent) {
        let _ = event;
    }
    /// An execution ended.
    fn on_outcome(&self, outcome: &ExecutionOutcome) {
        let _ = outcome;
    }
}

/// Why an effect backend could not run a process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum BackendError {
    /// The spec asks for containment the backend cannot prove.
    #[error("containment not available: {message}")]
    Containment {
        /// What is missing.
        message: String,
    },
    /// The process could not be started.
    #[error("spawn failed: {message}")]
    Spawn {
        /// Why.
        message: String,
    },
}

/// Where tools' effects happen: in-process or a contained subprocess.
#[async_trait]
pub trait EffectBackend: Send + Sync {
    /// The backend's identity (bound into the execution context).
    fn backend_ref(&self) -> BackendRef;
    /// What this backend proved it enforces on this machine.
    fn capabilities(&self) -> &CapabilityReport;
    /// Runs a process under the spec's containment.
    async fn run(&self, spec: ProcessSpec) -> Result<ProcessOutput, BackendError>;
}

/// What a policy evaluator is asked: one call, after the arguments were validated and the
/// trusted context bound. Borrowed, so evaluating costs no copies; the principal, tenant and
/// session come from the trusted context, never from the request's claims.
#[derive(Debug, Clone, Copy)]
pub struct PolicyQuery<'a> {
    /// The request being decided.
    pub request_id: &'a RequestId,
    /// The resolved action (canonical name, provenance, hints).
    pub action: &'a ActionDescriptor,
    /// The arguments this pass evaluates (the final ones when re-authorizing).
    pub arguments: &'a Map<String, Value>,
    /// The trusted context (authenticated principal, tenant, policy snapshot reference).
    pub context: &'a ExecutionContext,
    /// The agent session, if the request names one.
    pub session_id: Option<&'a SessionId>,
}

/// A policy evaluator's answer: allow, deny or escalate, never defer (capacity is not a policy
/// question). A deny may carry `stop`, which cancels the turn's other pending calls.
///
/// ```
/// use warden_contracts::*;
/// let a = PolicyAnswer::new(
///     Disposition::Escalate,
///     DecisionReason::new(ReasonCode::PolicyRule, "ask by bash(git push:*)"),
///     "policy",
/// ).unwrap();
/// assert_eq!(a.authority(), "human");
/// assert!(PolicyAnswer::new(
///     Disposition::Defer, DecisionReason::new(ReasonCode::Capacity, "full"), "policy",
/// ).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, try_from = "PolicyAnswerWire")]
pub struct PolicyAnswer {
    disposition: Disposition,
    reason: DecisionReason,
    evaluator: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    stop: bool,
    #[serde(default = "default_authority")]
    authority: String,
}

fn default_authority() -> String {
    "human".to_owned()
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PolicyAnswerWire {
    disposition: Disposition,
    reason: DecisionReason,
    evaluator: String,
    #[serde(default)]
    stop: bool,
    #[serde(default = "default_authority")]
    authority: String,
}

impl TryFrom<PolicyAnswerWire> for PolicyAnswer {
    type Error = ContractError;
    fn try_from(w: PolicyAnswerWire) -> Result<Self, Self::Error> {
        let mut a = Self::new(w.disposition, w.reason, w.evaluator)?.with_authority(w.authority)?;
        if w.stop {
            a = a.with_stop()?;
        }
        Ok(a)
    }
}

impl PolicyAnswer {
    /// An answer; `disposition` must not be `Defer`, and `evaluator` must name who decided.
    /// An escalation asks the `human` authority unless [`Self::with_authority`] names another.
    pub fn new(
        disposition: Disposition,
        reason: DecisionReason,
        evaluator: impl Into<String>,
    ) -> Result<Self, ContractError> {
        let evaluator = evaluator.into();
        if disposition == Disposition::Defer {
            return Err(ContractError::Inconsistent(
                "a policy never defers: capacity is the admission stage's question".into(),
            ));
        }
        crate::decision::check_evaluator(&evaluator)?;
        Ok(Self {
            disposition,
            reason,
            evaluator,
            stop: false,
            authority: default_authority(),
        })
    }

    /// The same deny, also stopping the turn's other pending calls. Only a deny stops.
    pub fn with_stop(mut self) -> Result<Self, ContractError> {
        if self.disposition != Disposition::Deny {
            return Err(ContractError::Inconsistent(
                "only a deny can stop the turn".into(),
            ));
        }
        self.stop = true;
        Ok(self)
    }

    /// The same answer naming the authority an escalation asks (non-empty).
    pub fn with_authority(mut self, authority: impl Into<String>) -> Result<Self, ContractError> {
        let authority = authority.into();
        if authority.trim().is_empty() {
            return Err(ContractError::invalid(
                "authority",
                &authority,
                "must name an approval authority",
            ));
        }
        self.authority = authority;
        Ok(self)
    }

    /// Allow, deny or escalate.
    pub fn disposition(&self) -> Disposition {
        self.disposition
    }
    /// Why.
    pub fn reason(&self) -> &DecisionReason {
        &self.reason
    }
    /// Who decided (`policy`, a permission's name…).
    pub fn evaluator(&self) -> &str {
        &self.evaluator
    }
    /// Whether a deny stops the turn.
    pub fn stop(&self) -> bool {
        self.stop
    }
    /// The authority an escalation asks.
    pub fn authority(&self) -> &str {
        &self.authority
    }
}

/// An evaluator that could not answer. The executor treats it as a deny (an evaluator failure
/// never allows).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("evaluator failed: {message}")]
pub struct EvaluatorError {
    /// What failed (no secrets).
    pub message: String,
}

/// The compiled policy (declarative rules and programmable permissions) as the executor sees
/// it: one pinned snapshot that answers allow, deny or escalate for a call.
#[async_trait]
pub trait PolicyEvaluator: Send + Sync {
    /// The exact snapshot this evaluator decides with; a context bound to another snapshot is
    /// refused before any policy runs.
    fn snapshot(&self) -> &PolicySnapshotRef;
    /// Decides one call. Must be deterministic for a given snapshot and query.
    async fn evaluate(&self, query: &PolicyQuery<'_>) -> Result<PolicyAnswer, EvaluatorError>;
    /// Whether `receipt` comes from an approver this policy recognizes, at `now`; the executor
    /// asks before a receipt answers an escalation, besides checking its binding (action,
    /// arguments, policy digest, expiry) and single use itself.
    ///
    /// A policy that declares approvers accepts only a receipt signed by one of them; `Err`
    /// says why not. The default (`Ok`) is the local-operator model of a policy that declares
    /// none: receipts come from the runtime's own composition (its reviewer, or the code that
    /// presents them), which is trusted as the operator. An evaluator whose policy names
    /// approvers must override it.
    fn authenticate_receipt(
        &self,
        receipt: &ApprovalReceipt,
        now: Timestamp,
    ) -> Result<(), String> {
        let _ = (receipt, now);
        Ok(())
    }
}

/// A capacity lease: while it lives, the admitted call holds its slot; dropping it releases the
/// slot, on every path (success, failure, panic, cancellation).
pub struct CapacityLease {
    _guard: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl std::fmt::Debug for CapacityLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapacityLease")
            .field("holds_slot", &self._guard.is_some())
            .finish()
    }
}

impl CapacityLease {
    /// A lease whose `guard` releases the slot when dropped.
    pub fn new(guard: impl std::any::Any + Send + Sync) -> Self {
        Self {
            _guard: Some(Box::new(guard)),
        }
    }

    /// A lease that holds nothing (no limit applies).
    pub fn unlimited() -> Self {
        Self { _guard: None }
    }
}

/// Capacity is full: not now. Never a security verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityFull {
    /// Which limit is full (no secrets).
    pub reason: String,
    /// When a retry may succeed, if known.
    pub retry_at: Option<Timestamp>,
}

/// Capacity and rate admission, separate from security: it answers "not now", never "no".
pub trait Capacity: Send + Sync {
    /// Reserves a slot for one call of `action` at `now`, or says when to retry.
    fn try_acquire(&self, action: &str, now: Timestamp) -> Result<CapacityLease, CapacityFull>;
}

/// Where time comes from: the executor's deadlines, rates and approval expiry, and evidence
/// timestamps. A port: contracts never read a clock themselves (the system clock and a test
/// clock are `warden_evidence::SystemClock` and `warden_evidence::FixedClock`).
pub trait Clock: Send + Sync {
    /// Now, in milliseconds since the Unix epoch.
    fn now(&self) -> crate::Timestamp;
}
