//! The ports: traits every other layer implements. Contracts define them; nothing here does I/O.
//!
//! | port | implemented by | used by |
//! |---|---|---|
//! | [`Executor`] | `warden-executor` | every composition root (CLI, MCP proxy, a user's runtime) |
//! | [`EvidenceStore`] | `warden-evidence` (memory, SQLite) | the executor's governed profiles |
//! | [`Reviewer`] | a human front, an LLM reviewer, a receipt verifier | the executor on escalation |
//! | [`Observer`] | journals, metrics, tracing | the executor and the policy engine |
//! | [`EffectBackend`] | `warden-sandbox` backends (in-process, subprocess) | tools, via the executor |

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::approval::{ApprovalReceipt, ApprovalRequest};
use crate::capability::{CapabilityReport, ProcessOutput, ProcessSpec};
use crate::decision::{AdmissionDecision, DecisionReason};
use crate::evidence::{
    AppendReceipt, ChainHead, EvidenceAppend, EvidenceRecord, VerificationResult,
};
use crate::ids::{ChainId, RequestId};
use crate::outcome::ExecutionOutcome;
use crate::request::{ExecutionContext, ExecutionRequest};
use crate::scope::BackendRef;

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
    /// Intrinsic guards.
    Guards,
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

/// Observes decisions and outcomes. Observation never vetoes or changes anything, and an
/// observer must not block.
pub trait Observer: Send + Sync {
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
