//! Governed evidence: append-only, hash-chained (blake3) records with receipts, verification and certificates; SQLite is the embedded default store.
//!
//! **Invariant:** a chain only grows: append accepts the next sequence on the current head, nothing is updated or deleted.
//!
//! **Must never:** decide policy: it stores a policy snapshot's bytes and digest and never interprets them.
//!
//! Principal types: [`MemoryStore`] and [`SqliteStore`] implement the contracts
//! `EvidenceStore` port (plus [`GovernedStore`]); [`ChainTracker`] and [`verify_records`] check
//! chains with the closed failure codes of `VerificationFailure`; [`GovernedRecorder`] is the
//! API the executor's governed profiles drive (policy bound, operation started, gates, the
//! reducer, exactly one terminal record); [`certify`] mints a [`Certificate`] for a closed task
//! boundary; [`Checkpoint`] signs a head with ed25519; [`JournalRecord`] is the never-certified
//! journal family; [`Projector`] projects run/attempt state with a durable cursor.
//!
//! Features: `sqlite` (default) compiles [`SqliteStore`], [`SqliteReader`] and
//! [`SqliteProjection`] with bundled SQLite; without it the crate has no rusqlite.
//!
//! Key design decision: the stores run every append through the same [`ChainTracker`] that
//! verification uses, so a store refuses exactly what a verifier would reject (a second
//! terminal, a record after `task_closed`, an unknown payload field) and a chain that verified
//! when written verifies when read, unless it was tampered with.
//!
//! ```
//! use warden_contracts::*;
//! use warden_evidence::{MemoryStore, Expected, payload};
//!
//! let store = MemoryStore::new();
//! let chain = ChainId::new("task-1")?;
//! let snapshot = r#"{"rules":[]}"#;
//! let genesis = EvidenceAppend {
//!     chain_id: chain.clone(),
//!     record_type: RecordType::PolicyBound,
//!     operation_id: None,
//!     expected_sequence: 0,
//!     policy_id: "project".into(),
//!     policy_version: "1".into(),
//!     payload: payload::to_value(&payload::PolicyBound {
//!         task_boundary_id: payload::Label::new("task-1").unwrap(),
//!         policy_digest: Digest::of_bytes(snapshot.as_bytes()),
//!         snapshot_json: Some(snapshot.into()),
//!     }),
//!     supersedes_record_id: None,
//!     created_at: Timestamp(1_700_000_000_000),
//! };
//! let receipt = store.append_sync(&genesis).unwrap();
//! assert_eq!(receipt.sequence, 0);
//! // The same sequence again is refused: the chain only grows from its head.
//! assert!(matches!(store.append_sync(&genesis), Err(EvidenceError::SequenceConflict { .. })));
//! let report = store.verify_sync(&chain, &Expected::Hash(receipt.chain_hash));
//! assert!(report.result.valid);
//! # Ok::<(), ContractError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod certificate;
#[cfg(feature = "checkpoints")]
mod checkpoint;
mod error;
mod facts;
pub mod fault;
mod governance;
mod journal;
mod memory;
mod operation_set;
pub mod payload;
mod projection;
mod record;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
mod sqlite_projection;
mod store;
#[cfg(feature = "test-util")]
pub mod test_util;
mod verify;

pub use certificate::{
    Certificate, CertificateRefusal, GateSummary, Grade, certify, certify_records,
};
#[cfg(feature = "checkpoints")]
pub use checkpoint::{
    CHECKPOINT_FORMAT, Checkpoint, SigningKey, VerifyingKey, read_signing_key, read_verifying_key,
};
pub use error::Error;
pub use governance::{
    AmbiguityCause, Authorization, Clock, Denial, Escalation, ExceptionGrant, FixedClock,
    GateEvaluation, GovernanceBinding, GovernanceError, GovernedRecorder, InFlight,
    InvocationPermit, OperationHandle, OperationStart, PolicySnapshotBytes, Recovered, Reduction,
    Replay, Started, SystemClock, TaskBoundary, TerminalKind, UnacknowledgedOperation,
    UnacknowledgedStart, reduce, terminal_for_outcome,
};
pub use journal::{
    HookDecision, HookVerdict, JournalAppend, JournalRecord, JournalRecordType,
    ProviderObservation, Reporter, seal_journal,
};
pub use memory::MemoryStore;
pub use operation_set::OperationSet;
pub use projection::{
    AttemptState, MemoryProjection, PROJECTION_VERSION, ProjectedAttempt, ProjectedRun,
    ProjectionError, ProjectionReport, ProjectionTarget, Projector, RunState, project_from_scratch,
};
pub use record::{
    COLUMNS, Family, Fields, Record, RecordKind, chain_hash, hash_input, head_of,
    parse_record_type, receipt_of, record_id_for, record_type_str, reseal, seal,
};
#[cfg(feature = "sqlite")]
pub use sqlite::{
    APPLICATION_ID, DEFAULT_PATH, OLDEST_SCHEMA_VERSION, SCHEMA_VERSION, SqliteOptions,
    SqliteReader, SqliteStore, Synchronous,
};
#[cfg(feature = "sqlite")]
pub use sqlite_projection::SqliteProjection;
pub use store::{AppendFuture, GovernedStore, JournalStore, OperationRef, TypedAppend};
pub use verify::{
    ChainRecord, ChainTracker, Expected, FailureDetail, Lifecycle, OpenOperation, Report,
    verify_records,
};

use warden_contracts::VerificationFailure;

/// The stable snake_case name of a failure code, as serialized and printed.
pub fn failure_code_str(code: VerificationFailure) -> &'static str {
    match code {
        VerificationFailure::InvalidGenesis => "invalid_genesis",
        VerificationFailure::SequenceGap => "sequence_gap",
        VerificationFailure::BrokenLink => "broken_link",
        VerificationFailure::PayloadDigestMismatch => "payload_digest_mismatch",
        VerificationFailure::ChainHashMismatch => "chain_hash_mismatch",
        VerificationFailure::UnknownHashAlgorithm => "unknown_hash_algorithm",
        VerificationFailure::HeadMismatch => "head_mismatch",
        VerificationFailure::MalformedRecord => "malformed_record",
        VerificationFailure::InvalidPayload => "invalid_payload",
        VerificationFailure::OrphanRecord => "orphan_record",
        VerificationFailure::DuplicateTerminal => "duplicate_terminal",
        VerificationFailure::MissingTerminal => "missing_terminal",
        VerificationFailure::RecordAfterClose => "record_after_close",
    }
}
