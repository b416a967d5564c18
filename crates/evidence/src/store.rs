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
use crate::record::{self, AppendFields, Prepared, PreparedEvidence, Seal};
use crate::verify::{ChainTracker, Expected, FailureDetail, Pending, Report, View};

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
/// An append is made by [`EvidenceStore::append`] with its payload parsed (a JSON value), or by
/// [`GovernedStore::append_typed`] with it typed (what the recorder makes): the same record
/// either way, through the store's one append path.
#[async_trait]
pub trait GovernedStore: EvidenceStore {
    /// Appends a typed append at `expected_sequence`: exactly the record
    /// `append(append.into_append(expected_sequence))` makes, without building the payload's
    /// value. The append is made (queued, for the SQLite store) when this is called, and the
    /// future resolves once the record is durable.
    fn append_typed(&self, append: TypedAppend, expected_sequence: u64) -> AppendFuture<'_>;
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
/// appends these ([`GovernedStore::append_typed`]); [`TypedAppend::into_append`] is the plain
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
    pub(crate) fn split(self, expected_sequence: u64) -> (EvidenceAppend, Payload) {
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

/// An evidence append sealed onto its chain's head and passed by the chain's tracker, nothing
/// changed yet: what a store checks against its indexes, applies to the tracker and stores. Both
/// stores append through it, so they refuse exactly the same appends.
pub(crate) struct Sealed {
    pub(crate) seal: Seal,
    pub(crate) payload: Prepared,
    pub(crate) index: IndexEntries,
    pending: Pending,
    typed: Payload,
}

impl Sealed {
    /// Seals a prepared `entry` onto `tracker`'s head and checks it against the chain's rules.
    pub(crate) fn check(
        tracker: &ChainTracker,
        entry: &EvidenceAppend,
        prepared: Result<PreparedEvidence, EvidenceError>,
    ) -> Result<Self, EvidenceError> {
        let a = AppendFields::evidence(entry);
        let seal = record::seal_on(&a, prepared.as_ref().map(|p| &p.payload), tracker.head())?;
        let PreparedEvidence { payload, typed } = prepared?;
        let facts = typed.facts();
        let pending = tracker
            .check_sealed(&view(entry, &seal, &payload), facts)
            .map_err(|f| refused(&f))?;
        Ok(Self {
            index: index_entries(&facts),
            seal,
            payload,
            pending,
            typed,
        })
    }

    /// The `operation_started` record this record's index entries point to.
    pub(crate) fn operation_ref(&self, entry: &EvidenceAppend) -> Option<OperationRef> {
        Some(OperationRef {
            chain_id: entry.chain_id.clone(),
            operation_id: entry.operation_id.clone()?,
            record_id: self.seal.record_id.clone(),
            sequence: self.seal.sequence,
        })
    }

    /// Applies the record to its chain's tracker: its receipt, and the parts to store (with the
    /// typed payload, for the caller to free where it chooses).
    pub(crate) fn apply(
        self,
        tracker: &mut ChainTracker,
        entry: &EvidenceAppend,
    ) -> (AppendReceipt, Seal, Prepared, Payload) {
        let view = view(entry, &self.seal, &self.payload);
        tracker.apply(&view, &self.seal.chain_hash, self.pending);
        let receipt = self.seal.receipt(&entry.chain_id);
        (receipt, self.seal, self.payload, self.typed)
    }
}

/// A sealed evidence record as the lifecycle rules see it.
fn view<'a>(entry: &'a EvidenceAppend, seal: &'a Seal, payload: &'a Prepared) -> View<'a> {
    View {
        fields: seal.fields(&AppendFields::evidence(entry), payload),
        record_id: &seal.record_id,
        record_type: entry.record_type,
        operation_id: entry.operation_id.as_ref(),
        supersedes_record_id: entry.supersedes_record_id.as_ref(),
    }
}

/// The index entries an `operation_started` record carries.
#[derive(Debug, Clone, Default)]
pub(crate) struct IndexEntries {
    pub(crate) idempotency_key_digest: Option<Digest>,
    pub(crate) approval_id: Option<ApprovalId>,
}

fn index_entries(facts: &Facts<'_>) -> IndexEntries {
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
