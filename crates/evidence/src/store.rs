//! What both backends offer beyond the contracts port: chain enumeration, the durable indexes
//! governed execution needs (idempotency keys, single-use approvals) and the journal.

use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use warden_contracts::{
    AppendReceipt, ApprovalId, ChainHead, ChainId, Digest, EvidenceAppend, EvidenceError,
    EvidenceStore, OperationId, RecordId, Timestamp,
};

use crate::facts::Facts;
use crate::journal::{JournalAppend, JournalRecord};
use crate::payload::{self, Payload};
use crate::record::{self, CanonicalEvidence, Family, Prefix, PreparedEvidence};
use crate::verify::{Expected, FailureDetail, Report};

/// The `operation_started` record an idempotency key or an approval is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OperationRef {
    /// The chain.
    pub chain_id: ChainId,
    /// The operation.
    pub operation_id: OperationId,
    /// Its `operation_started` record.
    pub record_id: RecordId,
    /// That record's sequence.
    pub sequence: u64,
}

/// The future an append returns: its receipt, once the record is durable.
pub type AppendFuture<'a> =
    Pin<Box<dyn Future<Output = Result<AppendReceipt, EvidenceError>> + Send + 'a>>;

/// The evidence-store port plus what governed execution and the CLI need from a backend.
///
/// Both indexes are written in the same transaction as the `operation_started` record that
/// carries them, and a second use of either is refused at append ([`EvidenceError::Invalid`]),
/// so they are exactly as durable as the evidence.
///
/// Appenders that share a chain can split an append in two: [`GovernedStore::prepare`] outside
/// the lock that orders their appends (the payload's check, canonical text and digest, and for
/// the in-memory store most of the chain hash), then [`GovernedStore::append_prepared`] under it,
/// at the sequence the lock assigns. The result is the same record as [`EvidenceStore::append`]
/// makes; only the serial part is shorter.
#[async_trait]
pub trait GovernedStore: EvidenceStore {
    /// Prepares an append before it has a place in its chain (its `expected_sequence` is
    /// ignored). A store without a prepare step defers the work to
    /// [`GovernedStore::append_prepared`].
    fn prepare(&self, entry: EvidenceAppend) -> PreparedAppend {
        PreparedAppend::deferred(entry)
    }
    /// [`GovernedStore::prepare`] for an append whose payload is typed (what the recorder
    /// appends): the same record, without building the payload's `Value`. A store without a
    /// typed path prepares its value.
    fn prepare_typed(&self, append: TypedAppend) -> PreparedAppend {
        self.prepare(append.into_append(0))
    }
    /// Appends a prepared append at `expected_sequence`, exactly as [`EvidenceStore::append`]
    /// appends it: the append is made (queued, for the SQLite store) when this is called, and the
    /// future resolves once the record is durable.
    fn append_prepared(&self, append: PreparedAppend, expected_sequence: u64) -> AppendFuture<'_> {
        self.append(append.into_append(expected_sequence))
    }
    /// Every evidence chain, sorted.
    async fn chains(&self) -> Result<Vec<ChainId>, EvidenceError>;
    /// The operation an idempotency key (its digest) is bound to.
    async fn find_idempotency_key(
        &self,
        key_digest: &Digest,
    ) -> Result<Option<OperationRef>, EvidenceError>;
    /// The operation that used an approval, if one did.
    async fn find_approval_use(
        &self,
        approval_id: &ApprovalId,
    ) -> Result<Option<OperationRef>, EvidenceError>;
    /// Verifies a chain with the full report (failure detail included).
    async fn verify_report(
        &self,
        chain: &ChainId,
        expected: &Expected,
    ) -> Result<Report, EvidenceError>;
}

/// An evidence append whose payload is typed: its record type is the payload's. The recorder
/// appends these ([`GovernedStore::prepare_typed`]); [`TypedAppend::into_append`] is the plain
/// append of the same record.
///
/// ```
/// use warden_contracts::{ChainId, RecordType, Timestamp};
/// use warden_evidence::TypedAppend;
/// use warden_evidence::payload::{OperationCancelled, Payload};
///
/// let append = TypedAppend {
///     chain_id: ChainId::new("task-1").unwrap(),
///     operation_id: None,
///     policy_id: "p".into(),
///     policy_version: "1".into(),
///     payload: Payload::OperationCancelled(OperationCancelled { call_executed: false }),
///     supersedes_record_id: None,
///     created_at: Timestamp(1),
/// };
/// let plain = append.into_append(4);
/// assert_eq!(plain.record_type, RecordType::OperationCancelled);
/// assert_eq!(plain.expected_sequence, 4);
/// assert_eq!(plain.payload, serde_json::json!({"call_executed": false}));
/// ```
#[derive(Debug, Clone)]
pub struct TypedAppend {
    /// The chain.
    pub chain_id: ChainId,
    /// The operation, if the record belongs to one.
    pub operation_id: Option<OperationId>,
    /// The policy in force.
    pub policy_id: String,
    /// Its version.
    pub policy_version: String,
    /// The payload (and so the record type).
    pub payload: Payload,
    /// The record a `record_superseded` corrects.
    pub supersedes_record_id: Option<RecordId>,
    /// When the record was made.
    pub created_at: Timestamp,
}

impl TypedAppend {
    /// The plain append of the same record at `expected_sequence` (the payload as its `Value`).
    pub fn into_append(self, expected_sequence: u64) -> EvidenceAppend {
        let (mut entry, payload) = self.split(expected_sequence);
        entry.payload = payload::to_value(&payload);
        entry
    }

    /// Every field but the payload (its value null), and the payload.
    fn split(self, expected_sequence: u64) -> (EvidenceAppend, Payload) {
        let entry = EvidenceAppend {
            chain_id: self.chain_id,
            record_type: self.payload.record_type(),
            operation_id: self.operation_id,
            expected_sequence,
            policy_id: self.policy_id,
            policy_version: self.policy_version,
            payload: serde_json::Value::Null,
            supersedes_record_id: self.supersedes_record_id,
            created_at: self.created_at,
        };
        (entry, self.payload)
    }
}

/// An evidence append prepared before it has its place in its chain
/// ([`GovernedStore::prepare`]): its payload checked against its type's schema, canonicalized and
/// digested, and the part of its chain hash that does not depend on the chain's head taken (as
/// text, or for the in-memory store already hashed). A payload the check refuses is refused when
/// the append is made, after its sequence is checked, as [`EvidenceStore::append`] refuses it.
#[derive(Debug)]
pub struct PreparedAppend {
    /// The append; its payload value is dropped once it is canonicalized.
    entry: EvidenceAppend,
    /// `None`: not prepared (the store prepares it when it is appended).
    canonical: Option<CanonicalEvidence>,
}

impl PreparedAppend {
    /// An append left for the store to prepare when it is appended.
    ///
    /// ```
    /// use serde_json::json;
    /// use warden_contracts::{ChainId, EvidenceAppend, RecordType, Timestamp};
    /// use warden_evidence::PreparedAppend;
    ///
    /// let entry = EvidenceAppend {
    ///     chain_id: ChainId::new("task-1").unwrap(),
    ///     record_type: RecordType::CallableCompleted,
    ///     operation_id: None,
    ///     expected_sequence: 0,
    ///     policy_id: "p".into(),
    ///     policy_version: "1".into(),
    ///     payload: json!({"duration_ms": 3}),
    ///     supersedes_record_id: None,
    ///     created_at: Timestamp(1),
    /// };
    /// let append = PreparedAppend::deferred(entry.clone()).into_append(7);
    /// assert_eq!(append.expected_sequence, 7);
    /// assert_eq!(append.payload, entry.payload);
    /// ```
    pub fn deferred(entry: EvidenceAppend) -> Self {
        Self {
            entry,
            canonical: None,
        }
    }

    /// Prepares `entry`, keeping the hash input's prefix as `prefix` holds it.
    pub(crate) fn new(mut entry: EvidenceAppend, prefix: Prefix) -> Self {
        let canonical = record::canonical_evidence(&entry, prefix);
        if canonical.is_ok() {
            // The canonical text stands for it from here on (`into_append` parses it back).
            entry.payload = serde_json::Value::Null;
        }
        Self {
            entry,
            canonical: Some(canonical),
        }
    }

    /// Prepares a typed append ([`record::canonical_typed`]), keeping the hash input's prefix as
    /// `prefix` holds it. A payload it refuses keeps its value, for `into_append`.
    pub(crate) fn typed(append: TypedAppend, prefix: Prefix) -> Self {
        let (mut entry, payload) = append.split(0);
        let canonical = record::canonical_typed(&entry, &payload, prefix);
        if canonical.is_err() {
            entry.payload = payload::to_value(&payload);
        }
        Self {
            entry,
            canonical: Some(canonical),
        }
    }

    /// The plain append at `expected_sequence`, its payload restored (for a store that appends
    /// it as any other). A payload the store canonicalized comes back parsed from its canonical
    /// text: the same JSON, so the same record, with its numbers in canonical form (`1.0` as
    /// `1`).
    pub fn into_append(self, expected_sequence: u64) -> EvidenceAppend {
        let mut entry = self.entry;
        entry.expected_sequence = expected_sequence;
        if let Some(Ok((canonical, _))) = &self.canonical {
            // Canonical JSON parses back to the value it was made from; should it not, a null
            // payload is refused at append (fails closed).
            entry.payload =
                record::parse_canonical(&canonical.json).unwrap_or(serde_json::Value::Null);
        }
        entry
    }

    /// The append at `expected_sequence` and its preparation, completed with the record id at
    /// that sequence (prepared now if it was deferred). The entry's payload value is still there
    /// when the preparation was deferred or refused it.
    pub(crate) fn place(self, expected_sequence: u64) -> (EvidenceAppend, PreparedEvidence) {
        let mut entry = self.entry;
        entry.expected_sequence = expected_sequence;
        let prepared = match self.canonical {
            Some(canonical) => canonical.and_then(|(canonical, facts)| {
                let id =
                    record::record_id_for(Family::Evidence, &entry.chain_id, expected_sequence)?;
                Ok((canonical.place(id), facts))
            }),
            None => record::prepare_evidence(&entry)
                .map(|(prepared, checked)| (prepared, checked.facts().to_owned())),
        };
        (entry, prepared)
    }
}

/// The journal side of a store (synchronous: its writers are short-lived hook processes).
pub trait JournalStore {
    /// Appends one journal record; returns once it is durable.
    fn append_journal(&self, entry: JournalAppend) -> Result<AppendReceipt, EvidenceError>;
    /// Journal records of `chain` after `after_sequence`, at most `limit`.
    fn read_journal(
        &self,
        chain: &ChainId,
        after_sequence: Option<u64>,
        limit: usize,
    ) -> Result<Vec<JournalRecord>, EvidenceError>;
    /// The journal chain's head.
    fn journal_head(&self, chain: &ChainId) -> Result<Option<ChainHead>, EvidenceError>;
    /// Every journal chain, sorted.
    fn journal_chains(&self) -> Result<Vec<ChainId>, EvidenceError>;
    /// Verifies a journal chain.
    fn verify_journal(&self, chain: &ChainId, expected: &Expected)
    -> Result<Report, EvidenceError>;
}

/// The index entries an `operation_started` record carries.
#[derive(Debug, Clone, Default)]
pub(crate) struct IndexEntries {
    pub(crate) idempotency_key_digest: Option<Digest>,
    pub(crate) approval_id: Option<ApprovalId>,
}

pub(crate) fn index_entries(facts: &Facts<&str>) -> IndexEntries {
    match facts {
        Facts::OperationStarted {
            idempotency_key_digest,
            approval_id,
        } => IndexEntries {
            idempotency_key_digest: idempotency_key_digest.and_then(|d| d.parse().ok()),
            approval_id: approval_id.and_then(|a| ApprovalId::new(a).ok()),
        },
        _ => IndexEntries::default(),
    }
}

impl IndexEntries {
    pub(crate) fn is_empty(&self) -> bool {
        self.idempotency_key_digest.is_none() && self.approval_id.is_none()
    }
}

/// The `operation_started` record an index entry points to.
pub(crate) fn operation_ref(
    chain_id: &ChainId,
    operation_id: Option<&OperationId>,
    record_id: &str,
    sequence: u64,
) -> Option<OperationRef> {
    Some(OperationRef {
        chain_id: chain_id.clone(),
        operation_id: operation_id?.clone(),
        record_id: RecordId::new(record_id).ok()?,
        sequence,
    })
}

pub(crate) fn refused(failure: &FailureDetail) -> EvidenceError {
    EvidenceError::Invalid {
        message: format!(
            "{}: {}",
            crate::failure_code_str(failure.code),
            failure.detail
        ),
    }
}

pub(crate) fn duplicate_key(existing: &OperationRef) -> EvidenceError {
    EvidenceError::Invalid {
        message: format!(
            "idempotency key already bound to operation {} (chain {}, record {})",
            existing.operation_id, existing.chain_id, existing.record_id
        ),
    }
}

/// A new chain whose record ids would start like another chain's (a 64-bit prefix collision,
/// which only a chain id chosen for it makes likely): refused, so record ids stay unique.
pub(crate) fn record_ids_taken(chain: &ChainId, prefix: &[u8; 16], owner: &str) -> EvidenceError {
    EvidenceError::Invalid {
        message: format!(
            "chain {chain}: its record ids (rec_{}…) would collide with those of chain {owner}; use another chain id",
            String::from_utf8_lossy(prefix)
        ),
    }
}

pub(crate) fn approval_used(existing: &OperationRef) -> EvidenceError {
    EvidenceError::Invalid {
        message: format!(
            "approval already used by operation {} (chain {}, record {})",
            existing.operation_id, existing.chain_id, existing.record_id
        ),
    }
}
