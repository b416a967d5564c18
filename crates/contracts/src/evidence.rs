//! Evidence values: record types, records, receipts, chain heads and verification results.
//!
//! `warden-evidence` implements the store; these are the values that cross the port. A record's
//! `chain_hash` covers every other field, so a chain proves its own integrity against a head
//! kept elsewhere. Payloads hold ids, digests, decisions and counts, never raw arguments,
//! results or secrets.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::digest::Digest;
use crate::ids::{ChainId, OperationId, RecordId, Timestamp};

/// The hash algorithm tag of every record this version writes.
pub const HASH_ALGORITHM: &str = "blake3-v1";

/// The closed set of evidence record types.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RecordType {
    /// The policy snapshot (bytes and digest) a chain runs under.
    PolicyBound,
    /// A governed operation started (before any gate ran).
    OperationStarted,
    /// One gate's evaluation, with its level.
    GateEvaluated,
    /// A soft deny overridden by a recorded exception (degrades any certificate).
    ExceptionGranted,
    /// Terminal: the operation was denied (an escalation also closes this way).
    OperationDenied,
    /// Terminal: the callable completed.
    CallableCompleted,
    /// Terminal: the callable failed.
    CallableFailed,
    /// Terminal: the operation was cancelled.
    OperationCancelled,
    /// Terminal: the operation's deadline passed.
    OperationTimedOut,
    /// Terminal: the call was sent and its effect is unknown.
    ExternalResultAmbiguous,
    /// The task (the chain's boundary) closed.
    TaskClosed,
    /// A correction: supersedes an earlier record without changing it.
    RecordSuperseded,
}

impl RecordType {
    /// Every record type, in declaration order.
    pub const ALL: [RecordType; 12] = [
        Self::PolicyBound,
        Self::OperationStarted,
        Self::GateEvaluated,
        Self::ExceptionGranted,
        Self::OperationDenied,
        Self::CallableCompleted,
        Self::CallableFailed,
        Self::OperationCancelled,
        Self::OperationTimedOut,
        Self::ExternalResultAmbiguous,
        Self::TaskClosed,
        Self::RecordSuperseded,
    ];

    /// Whether this type closes an operation (exactly one per started operation).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::OperationDenied
                | Self::CallableCompleted
                | Self::CallableFailed
                | Self::OperationCancelled
                | Self::OperationTimedOut
                | Self::ExternalResultAmbiguous
        )
    }
}

/// One evidence record, as stored. Every field but `chain_hash` is covered by `chain_hash`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceRecord {
    /// The record's id.
    pub record_id: RecordId,
    /// Its type.
    pub record_type: RecordType,
    /// The chain it belongs to.
    pub chain_id: ChainId,
    /// The operation it concerns, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<OperationId>,
    /// Position in the chain, from 0 (genesis).
    pub sequence: u64,
    /// The policy in force.
    pub policy_id: String,
    /// Its version.
    pub policy_version: String,
    /// The payload's canonical JSON text.
    pub payload_json: String,
    /// Digest of `payload_json`.
    pub payload_digest: Digest,
    /// The previous record's chain hash; absent only at genesis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_chain_hash: Option<Digest>,
    /// The hash over every other field.
    pub chain_hash: Digest,
    /// The record this one corrects, for `record_superseded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes_record_id: Option<RecordId>,
    /// When it was appended.
    pub created_at: Timestamp,
    /// Always [`HASH_ALGORITHM`] for records this version writes.
    pub hash_algorithm: String,
}

/// What a caller appends: the store assigns id, sequence and hashes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceAppend {
    /// The chain to append to.
    pub chain_id: ChainId,
    /// The record's type.
    pub record_type: RecordType,
    /// The operation it concerns, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<OperationId>,
    /// The sequence the caller expects this record to get: appends are refused unless it is
    /// exactly the next one on the current head.
    pub expected_sequence: u64,
    /// The policy in force.
    pub policy_id: String,
    /// Its version.
    pub policy_version: String,
    /// The payload (ids, digests, decisions, counts: never raw arguments or secrets).
    pub payload: Value,
    /// The record this one corrects, for `record_superseded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes_record_id: Option<RecordId>,
    /// When it is appended (contracts never read clocks).
    pub created_at: Timestamp,
}

/// Proof that a record was durably appended.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendReceipt {
    /// The chain.
    pub chain_id: ChainId,
    /// The new record.
    pub record_id: RecordId,
    /// Its sequence.
    pub sequence: u64,
    /// Its chain hash: the chain's new head.
    pub chain_hash: Digest,
}

/// A chain's head: its last sequence and chain hash.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChainHead {
    /// The chain.
    pub chain_id: ChainId,
    /// The last record's sequence.
    pub sequence: u64,
    /// The last record's chain hash.
    pub chain_hash: Digest,
}

/// Why a chain failed verification. Closed and documented: a program can act on each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VerificationFailure {
    /// The first record is not a valid genesis (sequence 0, no previous hash).
    InvalidGenesis,
    /// Sequences are not consecutive.
    SequenceGap,
    /// A record's `previous_chain_hash` is not its predecessor's `chain_hash`.
    BrokenLink,
    /// A record's `payload_digest` does not match its `payload_json`.
    PayloadDigestMismatch,
    /// A record's `chain_hash` does not match its fields.
    ChainHashMismatch,
    /// A record names a hash algorithm this version does not know.
    UnknownHashAlgorithm,
    /// The expected head (kept elsewhere) is not in the chain: records were removed or replaced.
    HeadMismatch,
    /// A record is malformed (payload not canonical JSON, wrong chain id, a record id the store
    /// would not assign, a field that cannot be read).
    MalformedRecord,
    /// A record's payload does not match its record type's schema, or contradicts the chain (a
    /// `task_closed` whose counts differ from the chain's, an exception for a gate that is not a
    /// soft deny).
    InvalidPayload,
    /// A record concerns an operation that has not started (or started twice), or names a
    /// record that does not precede it.
    OrphanRecord,
    /// A second terminal record for an operation that already has one.
    DuplicateTerminal,
    /// The task closed while a started operation had no terminal record (the failed record is
    /// that operation's `operation_started`).
    MissingTerminal,
    /// A record follows the chain's `task_closed` (a double close included).
    RecordAfterClose,
}

/// The result of verifying a chain.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerificationResult {
    /// Whether the whole chain verified (and matched the expected head, if one was given).
    pub valid: bool,
    /// The last head that verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_head: Option<ChainHead>,
    /// How many records were checked.
    pub checked_records: u64,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_code: Option<VerificationFailure>,
    /// The first record that failed, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_record_id: Option<RecordId>,
}
