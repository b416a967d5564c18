//! Warden's contracts: the immutable typed values every layer exchanges, canonical JSON and
//! digests, and the ports (traits) the other layers implement.
//!
//! Principal types: [`ExecutionRequest`] (what is asked, untrusted), [`ExecutionContext`] (under
//! whose authority, trusted), [`AdmissionDecision`] (what a stage decided), [`ExecutionOutcome`]
//! (what happened, closed, carrying the [`RuntimeProfile`]), [`Digest`] (`blake3:<hex>` over
//! RFC 8785 canonical JSON), and the ports in [`ports`].
//!
//! Key design decision: values validate their invariants when built *and* when deserialized (a
//! private wire struct feeds the same constructor), and reject unknown fields naming them, so an
//! invalid value cannot exist anywhere, whether built in code or read from JSON.
//!
//! **Invariant:** a value of a contracts type satisfies its invariants; two equal values have
//! the same canonical JSON and the same digest.
//!
//! **Must never:** do I/O, spawn, read a clock, or know any policy: it holds references to policy
//! snapshots (`policy_id`, `version`, `digest`), never declarations.
//!
//! ```
//! use warden_contracts::*;
//! let scope = ExecutionScopeRef::Ephemeral { scope_id: ScopeId::new("s-1")? };
//! let request = ExecutionRequest::new(
//!     RequestId::new("r-1")?,
//!     ActionRef::new("bash")?,
//!     serde_json::json!({"command": "git status"}),
//!     scope.clone(),
//! )?;
//! let text = serde_json::to_string(&request).unwrap();
//! let back: ExecutionRequest = serde_json::from_str(&text).unwrap();
//! assert_eq!(back, request);
//! let err = serde_json::from_str::<ExecutionRequest>(
//!     &text.replacen('{', r#"{"surprise":1,"#, 1),
//! ).unwrap_err();
//! assert!(err.to_string().contains("unknown field `surprise`"));
//! # Ok::<(), ContractError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod action;
mod approval;
mod bytes;
pub mod canonical;
mod capability;
mod decision;
mod digest;
mod error;
mod evidence;
mod ids;
#[cfg(feature = "ed25519")]
pub mod keys;
mod outcome;
pub mod ports;
mod redact;
mod request;
pub mod schema;
mod scope;

pub use action::{
    ActionDescriptor, ActionRef, ActionSource, EffectiveHints, Hints, MAX_ACTION_NAME_LEN,
    check_action_name,
};
pub use approval::{ApprovalReceipt, ApprovalRequest, ReceiptMismatch};
pub use capability::{
    Capability, CapabilityEntry, CapabilityReport, CapabilityStatus, ProcessOutput, ProcessSpec,
};
pub use decision::{AdmissionDecision, DecisionReason, Disposition, ReasonCode};
pub use digest::{DIGEST_PREFIX, Digest};
pub use error::ContractError;
pub use evidence::{
    AppendReceipt, ChainHead, EvidenceAppend, EvidenceRecord, HASH_ALGORITHM, RecordType,
    VerificationFailure, VerificationResult,
};
pub use ids::{
    ApprovalId, AttemptId, ChainId, ContextId, MAX_ID_LEN, OperationId, PrincipalId, RecordId,
    RequestId, RunId, ScopeId, SessionId, TenantId, Timestamp,
};
pub use outcome::{ExecutionOutcome, Failure, RuntimeProfile};
pub use ports::{
    BackendError, Capacity, CapacityFull, CapacityLease, Clock, DecisionEvent, EffectBackend,
    EvaluatorError, EvidenceError, EvidenceStore, Executor, Observer, PolicyAnswer,
    PolicyEvaluator, PolicyQuery, ReviewVerdict, Reviewer, Stage, StageEvent, StageStatus,
};
pub use redact::{REDACTED, Redacted, SecretRef};
pub use request::{ExecutionContext, ExecutionRequest, MAX_IDEMPOTENCY_KEY_LEN};
pub use scope::{
    BackendRef, EvidenceRef, ExecutionScopeRef, PolicySnapshotRef, PrincipalKind, PrincipalRef,
    TenantRef,
};
