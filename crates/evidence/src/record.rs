//! Sealing records: record ids, `payload_digest`, and `chain_hash` over every other field.
//!
//! `chain_hash` is `blake3:<hex>` of the RFC 8785 canonical JSON of the record's object with
//! `chain_hash` left out (absent optional fields are absent keys, exactly as the record
//! serializes): [`hash_input`] is the contracts' one canonical writer run on [`Fields`].
//!
//! An append is sealed in two steps. [`prepare_parsed`] / [`prepare_typed`] do what does not
//! depend on the chain's head (the payload's check against its type, its canonical text and
//! digest, the record id at the expected sequence, the hash input's head-free part): a store
//! runs them before it takes the lock that orders the chain's appends. [`seal_on`] does the
//! rest on the chain's head: the sequence check, the previous hash and the chain hash.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warden_contracts::canonical::{self, MAX_SAFE_INTEGER};
use warden_contracts::{
    AppendReceipt, ChainHead, ChainId, Digest, EvidenceAppend, EvidenceError, EvidenceRecord,
    HASH_ALGORITHM, OperationId, RecordId, RecordType, Timestamp,
};

use crate::payload::{self, Payload};

/// The two record families. Both chain the same way; only evidence is ever certified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// Governed evidence (`records` table): the twelve record types.
    Evidence,
    /// The journal (`journal` table): decisions made for, and observations reported by, a
    /// provider that runs the call itself. Never certified.
    Journal,
}

impl Family {
    fn id_domain(self) -> &'static str {
        match self {
            Self::Evidence => "warden-evidence record id v1",
            Self::Journal => "warden-journal record id v1",
        }
    }

    /// The family's name, as printed (`evidence`, `journal`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Evidence => "evidence",
            Self::Journal => "journal",
        }
    }
}

/// The 16 hex digits every record id of `chain` in `family` starts with (after `rec_`): the
/// stores bind each to one chain, so no two chains' record ids can collide.
pub(crate) fn record_id_prefix(family: Family, chain: &str) -> [u8; 16] {
    let mut h = blake3::Hasher::new();
    h.update(family.id_domain().as_bytes());
    h.update(&[0]);
    h.update(chain.as_bytes());
    let hex = h.finalize().to_hex();
    let mut prefix = [0u8; 16];
    prefix.copy_from_slice(&hex.as_bytes()[..16]);
    prefix
}

/// The record id a store assigns at `sequence` of `chain`: `rec_`, 16 hex digits of a BLAKE3
/// hash of the family and the chain id, and the sequence as 16 hex digits. Deterministic, so
/// every backend assigns the same ids and a verifier can check them; unique per family and chain.
pub fn record_id_for(
    family: Family,
    chain: &ChainId,
    sequence: u64,
) -> Result<RecordId, EvidenceError> {
    let prefix = record_id_prefix(family, chain.as_str());
    // ASCII hex digits, so always UTF-8 and, with `rec_`, always a valid identifier.
    let prefix = std::str::from_utf8(&prefix).map_err(|e| invalid(e.to_string()))?;
    RecordId::new(format!("rec_{prefix}{sequence:016x}")).map_err(|e| invalid(e.to_string()))
}

/// The serialized name of a record type (`policy_bound`, …).
pub fn record_type_str(t: RecordType) -> &'static str {
    match t {
        RecordType::PolicyBound => "policy_bound",
        RecordType::OperationStarted => "operation_started",
        RecordType::GateEvaluated => "gate_evaluated",
        RecordType::ExceptionGranted => "exception_granted",
        RecordType::OperationDenied => "operation_denied",
        RecordType::CallableCompleted => "callable_completed",
        RecordType::CallableFailed => "callable_failed",
        RecordType::OperationCancelled => "operation_cancelled",
        RecordType::OperationTimedOut => "operation_timed_out",
        RecordType::ExternalResultAmbiguous => "external_result_ambiguous",
        RecordType::TaskClosed => "task_closed",
        RecordType::RecordSuperseded => "record_superseded",
    }
}

/// Parses a serialized record type name.
pub fn parse_record_type(s: &str) -> Option<RecordType> {
    RecordType::ALL
        .into_iter()
        .find(|t| record_type_str(*t) == s)
}

/// A record type of one family: evidence's [`RecordType`] or the journal's
/// [`crate::JournalRecordType`]. Records, row decoding and sealing are generic over it.
pub trait RecordKind: Copy + Eq + fmt::Debug + Send + Sync + 'static {
    /// The family whose records have this type.
    const FAMILY: Family;
    /// The serialized name (`policy_bound`, `hook_verdict`, …).
    fn name(self) -> &'static str;
    /// Parses a serialized name.
    fn from_name(name: &str) -> Option<Self>;
}

impl RecordKind for RecordType {
    const FAMILY: Family = Family::Evidence;
    fn name(self) -> &'static str {
        record_type_str(self)
    }
    fn from_name(name: &str) -> Option<Self> {
        parse_record_type(name)
    }
}

/// The record's fields by name, in declaration order: the one list the SQLite tables' columns
/// and row reads are written from (a test holds [`Record`]'s serialized keys to it).
pub const COLUMNS: [&str; 14] = [
    "record_id",
    "record_type",
    "chain_id",
    "operation_id",
    "sequence",
    "policy_id",
    "policy_version",
    "payload_json",
    "payload_digest",
    "previous_chain_hash",
    "chain_hash",
    "supersedes_record_id",
    "created_at",
    "hash_algorithm",
];

/// A record of either family: the fields of docs/design/evidence.md#records, generic over the
/// family's record-type enum. The journal's records are `Record<JournalRecordType>`
/// ([`crate::JournalRecord`]); evidence records are the contracts' [`EvidenceRecord`], which
/// converts to and from `Record<RecordType>` field by field. Both serialize the same way.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record<T> {
    /// The record's id.
    pub record_id: RecordId,
    /// Its type.
    pub record_type: T,
    /// The chain.
    pub chain_id: ChainId,
    /// The operation it concerns (for the journal: the provider's call id), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<OperationId>,
    /// Position in the chain, from 0.
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
    /// The record this one corrects (`record_superseded`); always absent in the journal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes_record_id: Option<RecordId>,
    /// When it was appended.
    pub created_at: Timestamp,
    /// `blake3-v1`.
    pub hash_algorithm: String,
}

impl<T: RecordKind> Record<T> {
    /// The borrowed fields the chain hash covers.
    pub fn fields(&self) -> Fields<'_> {
        Fields {
            record_id: self.record_id.as_str(),
            record_type: self.record_type.name(),
            chain_id: self.chain_id.as_str(),
            operation_id: self.operation_id.as_ref().map(OperationId::as_str),
            sequence: self.sequence,
            policy_id: &self.policy_id,
            policy_version: &self.policy_version,
            payload_json: &self.payload_json,
            payload_digest: self.payload_digest.as_str(),
            previous_chain_hash: self.previous_chain_hash.as_ref().map(Digest::as_str),
            supersedes_record_id: self.supersedes_record_id.as_ref().map(RecordId::as_str),
            created_at: self.created_at.0,
            hash_algorithm: &self.hash_algorithm,
        }
    }

    /// The record's head.
    pub fn head(&self) -> ChainHead {
        ChainHead {
            chain_id: self.chain_id.clone(),
            sequence: self.sequence,
            chain_hash: self.chain_hash.clone(),
        }
    }

    /// The receipt of the stored record.
    pub fn receipt(&self) -> AppendReceipt {
        AppendReceipt {
            chain_id: self.chain_id.clone(),
            record_id: self.record_id.clone(),
            sequence: self.sequence,
            chain_hash: self.chain_hash.clone(),
        }
    }
}

/// Moves every field across: the contracts' evidence record and this crate's record are the
/// same fourteen fields.
macro_rules! same_fields {
    ($from:ty => $to:ty) => {
        impl From<$from> for $to {
            fn from(r: $from) -> Self {
                Self {
                    record_id: r.record_id,
                    record_type: r.record_type,
                    chain_id: r.chain_id,
                    operation_id: r.operation_id,
                    sequence: r.sequence,
                    policy_id: r.policy_id,
                    policy_version: r.policy_version,
                    payload_json: r.payload_json,
                    payload_digest: r.payload_digest,
                    previous_chain_hash: r.previous_chain_hash,
                    chain_hash: r.chain_hash,
                    supersedes_record_id: r.supersedes_record_id,
                    created_at: r.created_at,
                    hash_algorithm: r.hash_algorithm,
                }
            }
        }
    };
}
same_fields!(Record<RecordType> => EvidenceRecord);
same_fields!(EvidenceRecord => Record<RecordType>);

/// The fields of one record that its chain hash covers (every field but `chain_hash`),
/// borrowed: shared by evidence and journal records. It serializes as the hash input; its
/// fields are declared in canonical (sorted) order, so the writer never reorders them.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Fields<'a> {
    /// `chain_id`.
    pub chain_id: &'a str,
    /// `created_at` (milliseconds).
    pub created_at: u64,
    /// `hash_algorithm`.
    pub hash_algorithm: &'a str,
    /// `operation_id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<&'a str>,
    /// `payload_digest`.
    pub payload_digest: &'a str,
    /// `payload_json`.
    pub payload_json: &'a str,
    /// `policy_id`.
    pub policy_id: &'a str,
    /// `policy_version`.
    pub policy_version: &'a str,
    /// `previous_chain_hash`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_chain_hash: Option<&'a str>,
    /// `record_id`.
    pub record_id: &'a str,
    /// `record_type` as serialized (`policy_bound`, `hook_verdict`, …).
    pub record_type: &'a str,
    /// `sequence`.
    pub sequence: u64,
    /// `supersedes_record_id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supersedes_record_id: Option<&'a str>,
}

impl<'a> Fields<'a> {
    /// The fields of an evidence record.
    pub fn of(r: &'a EvidenceRecord) -> Self {
        Self {
            record_id: r.record_id.as_str(),
            record_type: record_type_str(r.record_type),
            chain_id: r.chain_id.as_str(),
            operation_id: r.operation_id.as_ref().map(OperationId::as_str),
            sequence: r.sequence,
            policy_id: &r.policy_id,
            policy_version: &r.policy_version,
            payload_json: &r.payload_json,
            payload_digest: r.payload_digest.as_str(),
            previous_chain_hash: r.previous_chain_hash.as_ref().map(Digest::as_str),
            supersedes_record_id: r.supersedes_record_id.as_ref().map(RecordId::as_str),
            created_at: r.created_at.0,
            hash_algorithm: &r.hash_algorithm,
        }
    }
}

/// The canonical JSON text `chain_hash` is computed over: the record without `chain_hash`.
/// Refused only for a number no I-JSON number holds (a `sequence` or `created_at` beyond
/// 2^53 − 1, which no store writes).
pub fn hash_input(f: &Fields<'_>) -> Result<String, EvidenceError> {
    canonical::to_canonical_string_of(f).map_err(|e| invalid(format!("record fields: {e}")))
}

/// The chain hash of a record's fields.
pub fn chain_hash(f: &Fields<'_>) -> Result<Digest, EvidenceError> {
    with_text(|text| {
        canonical::write_canonical_of(text, f)
            .map_err(|e| invalid(format!("record fields: {e}")))?;
        Ok(Digest::of_bytes(text.as_bytes()))
    })
}

/// Runs `f` with this thread's text buffer, reused from record to record (the SQLite writer
/// seals every record of its store on one thread).
fn with_text<T>(f: impl FnOnce(&mut String) -> T) -> T {
    thread_local! {
        static TEXT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
    }
    TEXT.with(|text| match text.try_borrow_mut() {
        Ok(mut text) => f(&mut text),
        // Not reentrant; should it ever be, a fresh buffer gives the same text.
        Err(_) => f(&mut String::new()),
    })
}

pub(crate) fn invalid(message: impl Into<String>) -> EvidenceError {
    EvidenceError::Invalid {
        message: message.into(),
    }
}

/// The fields of an append both families share, borrowed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AppendFields<'a> {
    pub(crate) family: Family,
    pub(crate) record_type: &'static str,
    pub(crate) chain_id: &'a ChainId,
    pub(crate) operation_id: Option<&'a OperationId>,
    pub(crate) expected_sequence: u64,
    pub(crate) policy_id: &'a str,
    pub(crate) policy_version: &'a str,
    pub(crate) supersedes_record_id: Option<&'a RecordId>,
    pub(crate) created_at: Timestamp,
}

impl<'a> AppendFields<'a> {
    /// An evidence append's fields.
    pub(crate) fn evidence(e: &'a EvidenceAppend) -> Self {
        Self {
            family: Family::Evidence,
            record_type: record_type_str(e.record_type),
            chain_id: &e.chain_id,
            operation_id: e.operation_id.as_ref(),
            expected_sequence: e.expected_sequence,
            policy_id: &e.policy_id,
            policy_version: &e.policy_version,
            supersedes_record_id: e.supersedes_record_id.as_ref(),
            created_at: e.created_at,
        }
    }
}

/// The hash input's fields that do not depend on the chain's head: in canonical order, every
/// key of [`Fields`] before `previous_chain_hash`.
#[derive(Serialize)]
struct HeadFree<'a> {
    chain_id: &'a str,
    created_at: u64,
    hash_algorithm: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    operation_id: Option<&'a str>,
    payload_digest: &'a str,
    payload_json: &'a str,
    policy_id: &'a str,
    policy_version: &'a str,
}

/// The rest of the hash input, known once the append has its place on the head: every key of
/// [`Fields`] from `previous_chain_hash` on.
#[derive(Serialize)]
struct OnHead<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    previous_chain_hash: Option<&'a str>,
    record_id: &'a str,
    record_type: &'a str,
    sequence: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    supersedes_record_id: Option<&'a str>,
}

/// A payload ready to be sealed: its canonical JSON text, that text's digest, and the canonical
/// text of the hash input's head-free part ([`HeadFree`]).
///
/// The hash input is one canonical object whose keys sort into a head-free part and an on-head
/// part, so its text is the head-free object's text without its closing brace, a comma, and the
/// on-head object's text without its opening one. The head-free text (the longer part, the
/// payload escaped in it) is written when the append is prepared, on the appender's thread; the
/// SQLite store's single writer then writes only the on-head part. The sealed hash is exactly
/// [`chain_hash`] of the record's [`Fields`] (a property test holds it there).
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub(crate) json: String,
    pub(crate) digest: Digest,
    head_free: String,
    /// The id of the record at the append's expected sequence (sealing refuses any other).
    record_id: RecordId,
}

impl Prepared {
    /// Canonicalizes a parsed payload of the append `a`.
    pub(crate) fn of_value(a: &AppendFields<'_>, value: &Value) -> Result<Self, EvidenceError> {
        let json = canonical::to_canonical_string(value).map_err(|e| invalid(e.to_string()))?;
        Self::of_text(a, json)
    }

    /// Takes the canonical text of the append `a`'s payload.
    fn of_text(a: &AppendFields<'_>, json: String) -> Result<Self, EvidenceError> {
        let digest = Digest::of_bytes(json.as_bytes());
        let head_free = canonical::to_canonical_string_of(&HeadFree {
            chain_id: a.chain_id.as_str(),
            created_at: a.created_at.0,
            hash_algorithm: HASH_ALGORITHM,
            operation_id: a.operation_id.map(OperationId::as_str),
            payload_digest: digest.as_str(),
            payload_json: &json,
            policy_id: a.policy_id,
            policy_version: a.policy_version,
        })
        .map_err(|e| invalid(format!("record fields: {e}")))?;
        Ok(Self {
            json,
            digest,
            head_free,
            record_id: record_id_for(a.family, a.chain_id, a.expected_sequence)?,
        })
    }

    /// The chain hash of this payload's record with its on-head fields.
    fn chain_hash(&self, on_head: &OnHead<'_>) -> Result<Digest, EvidenceError> {
        with_text(|text| {
            canonical::write_canonical_of(text, on_head)
                .map_err(|e| invalid(format!("record fields: {e}")))?;
            let (head_free, on_head) = (self.head_free.as_bytes(), text.as_bytes());
            let mut hasher = blake3::Hasher::new();
            hasher.update(&head_free[..head_free.len().saturating_sub(1)]);
            hasher.update(b",");
            hasher.update(on_head.get(1..).unwrap_or_default());
            Ok(Digest::from_hash_bytes(hasher.finalize().as_bytes()))
        })
    }
}

/// An evidence append's payload checked against its type and canonicalized, with the typed
/// payload the lifecycle rules and the indexes read their facts from.
#[derive(Debug, Clone)]
pub(crate) struct PreparedEvidence {
    pub(crate) payload: Prepared,
    pub(crate) typed: Payload,
}

fn refused(record_type: RecordType, e: impl fmt::Display) -> EvidenceError {
    invalid(format!("{} payload: {e}", record_type_str(record_type)))
}

/// Prepares an append's parsed payload: checked by the one payload check ([`payload::parse`])
/// and canonicalized from the value as given.
pub(crate) fn prepare_parsed(entry: &EvidenceAppend) -> Result<PreparedEvidence, EvidenceError> {
    let typed = payload::parse(entry.record_type, &entry.payload)
        .map_err(|e| refused(entry.record_type, e))?;
    Ok(PreparedEvidence {
        payload: Prepared::of_value(&AppendFields::evidence(entry), &entry.payload)?,
        typed,
    })
}

/// Prepares a typed payload for an append of `record_type`: held to its type's rules
/// ([`Payload::check`], as a parsed one is) and canonicalized straight from its `Serialize`.
pub(crate) fn prepare_typed(
    a: &AppendFields<'_>,
    record_type: RecordType,
    payload: Payload,
) -> Result<PreparedEvidence, EvidenceError> {
    if payload.record_type() != record_type {
        let other = record_type_str(payload.record_type());
        return Err(refused(record_type, format!("a {other} payload")));
    }
    payload.check().map_err(|e| refused(record_type, e))?;
    let json = canonical::to_canonical_string_of(&payload).map_err(|e| invalid(e.to_string()))?;
    Ok(PreparedEvidence {
        payload: Prepared::of_text(a, json)?,
        typed: payload,
    })
}

/// Checks the fields of an append that do not depend on the chain's state.
pub(crate) fn check_append_fields(
    policy_id: &str,
    policy_version: &str,
    created_at: Timestamp,
) -> Result<(), EvidenceError> {
    if policy_id.is_empty() || policy_version.is_empty() {
        return Err(invalid("policy_id and policy_version must not be empty"));
    }
    if created_at.0 > MAX_SAFE_INTEGER {
        return Err(invalid("created_at is beyond 2^53 - 1 milliseconds"));
    }
    Ok(())
}

/// The head-dependent part of a sealed record: its place in the chain, its id and its hash.
#[derive(Debug, Clone)]
pub(crate) struct Seal {
    pub(crate) sequence: u64,
    pub(crate) record_id: RecordId,
    pub(crate) previous: Option<Digest>,
    pub(crate) chain_hash: Digest,
}

/// Seals an append onto `head` (`None`: the chain is empty): checks that it names the next
/// sequence and that its fields are in range, then reports a payload refused earlier (so a wrong
/// sequence is reported first, whatever the payload), and computes the record id and the chain
/// hash. It does not check the chain's lifecycle rules (that is [`crate::ChainTracker`]'s job).
pub(crate) fn seal_on(
    a: &AppendFields<'_>,
    prepared: Result<&Prepared, &EvidenceError>,
    head: Option<&ChainHead>,
) -> Result<Seal, EvidenceError> {
    let next = head.map_or(0, |h| h.sequence + 1);
    if a.expected_sequence != next {
        return Err(EvidenceError::SequenceConflict {
            chain_id: a.chain_id.clone(),
            expected: next,
            got: a.expected_sequence,
        });
    }
    if next > MAX_SAFE_INTEGER {
        return Err(invalid("the chain is full (2^53 - 1 records)"));
    }
    check_append_fields(a.policy_id, a.policy_version, a.created_at)?;
    let payload = prepared.map_err(Clone::clone)?;
    // The append names the next sequence (checked above): its id was made when it was prepared.
    let record_id = payload.record_id.clone();
    let previous = head.map(|h| h.chain_hash.clone());
    let chain_hash = payload.chain_hash(&OnHead {
        previous_chain_hash: previous.as_ref().map(Digest::as_str),
        record_id: record_id.as_str(),
        record_type: a.record_type,
        sequence: next,
        supersedes_record_id: a.supersedes_record_id.map(RecordId::as_str),
    })?;
    Ok(Seal {
        sequence: next,
        record_id,
        previous,
        chain_hash,
    })
}

impl Seal {
    /// The sealed record's fields.
    pub(crate) fn fields<'a>(&'a self, a: &AppendFields<'a>, payload: &'a Prepared) -> Fields<'a> {
        Fields {
            record_id: self.record_id.as_str(),
            record_type: a.record_type,
            chain_id: a.chain_id.as_str(),
            operation_id: a.operation_id.map(OperationId::as_str),
            sequence: self.sequence,
            policy_id: a.policy_id,
            policy_version: a.policy_version,
            payload_json: &payload.json,
            payload_digest: payload.digest.as_str(),
            previous_chain_hash: self.previous.as_ref().map(Digest::as_str),
            supersedes_record_id: a.supersedes_record_id.map(RecordId::as_str),
            created_at: a.created_at.0,
            hash_algorithm: HASH_ALGORITHM,
        }
    }

    /// The receipt of the sealed record.
    pub(crate) fn receipt(&self, chain_id: &ChainId) -> AppendReceipt {
        AppendReceipt {
            chain_id: chain_id.clone(),
            record_id: self.record_id.clone(),
            sequence: self.sequence,
            chain_hash: self.chain_hash.clone(),
        }
    }

    /// The sealed record.
    pub(crate) fn into_record<T>(
        self,
        a: &AppendFields<'_>,
        record_type: T,
        payload: Prepared,
    ) -> Record<T> {
        Record {
            record_id: self.record_id,
            record_type,
            chain_id: a.chain_id.clone(),
            operation_id: a.operation_id.cloned(),
            sequence: self.sequence,
            policy_id: a.policy_id.to_owned(),
            policy_version: a.policy_version.to_owned(),
            payload_json: payload.json,
            payload_digest: payload.digest,
            previous_chain_hash: self.previous,
            chain_hash: self.chain_hash,
            supersedes_record_id: a.supersedes_record_id.cloned(),
            created_at: a.created_at,
            hash_algorithm: HASH_ALGORITHM.to_owned(),
        }
    }
}

/// Builds the record an append becomes on `head` (`None`: the chain is empty).
///
/// Checks that the append names the next sequence, that its payload matches its type's schema,
/// and computes `payload_digest` and `chain_hash`. It does not check the chain's lifecycle rules
/// (that is [`crate::ChainTracker`]'s job).
pub fn seal(
    entry: &EvidenceAppend,
    head: Option<&ChainHead>,
) -> Result<EvidenceRecord, EvidenceError> {
    let prepared = prepare_parsed(entry).map(|p| p.payload);
    let a = AppendFields::evidence(entry);
    let seal = seal_on(&a, prepared.as_ref(), head)?;
    Ok(seal.into_record(&a, entry.record_type, prepared?).into())
}

/// Recomputes a record's `payload_digest` and `chain_hash` after its fields were set by hand
/// (tests and tools that build chains without a store, for example to exercise a verifier). A
/// record whose fields cannot be hashed (a number beyond 2^53 − 1) keeps its old chain hash.
pub fn reseal(record: &mut EvidenceRecord) {
    record.payload_digest = Digest::of_bytes(record.payload_json.as_bytes());
    if let Ok(hash) = chain_hash(&Fields::of(record)) {
        record.chain_hash = hash;
    }
}

/// A record's head.
pub fn head_of(record: &EvidenceRecord) -> ChainHead {
    ChainHead {
        chain_id: record.chain_id.clone(),
        sequence: record.sequence,
        chain_hash: record.chain_hash.clone(),
    }
}

/// The receipt of a stored record.
pub fn receipt_of(record: &EvidenceRecord) -> AppendReceipt {
    AppendReceipt {
        chain_id: record.chain_id.clone(),
        record_id: record.record_id.clone(),
        sequence: record.sequence,
        chain_hash: record.chain_hash.clone(),
    }
}

/// Parses a payload and re-canonicalizes it: `Some(value)` when `text` is canonical JSON.
pub(crate) fn parse_canonical(text: &str) -> Option<Value> {
    let value: Value = serde_json::from_str(text).ok()?;
    let again = canonical::to_canonical_string(&value).ok()?;
    (again == text).then_some(value)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn text() -> impl Strategy<Value = String> {
        "(\\PC|[\\x00-\\x1f\"\\\\\u{7f}\u{80}\u{2028}\u{1F600}]){0,80}"
    }

    fn config() -> ProptestConfig {
        ProptestConfig::with_cases(if std::env::var_os("CI").is_some() {
            64
        } else {
            512
        })
    }

    #[test]
    fn the_columns_are_the_records_fields_in_order() {
        let chain = ChainId::new("c").unwrap();
        let id = record_id_for(Family::Evidence, &chain, 1).unwrap();
        let record: Record<RecordType> = Record {
            record_id: id.clone(),
            record_type: RecordType::RecordSuperseded,
            chain_id: chain,
            operation_id: Some(OperationId::new("op").unwrap()),
            sequence: 1,
            policy_id: "p".into(),
            policy_version: "1".into(),
            payload_json: "{}".into(),
            payload_digest: Digest::of_bytes(b"{}"),
            previous_chain_hash: Some(Digest::of_bytes(b"x")),
            chain_hash: Digest::of_bytes(b"y"),
            supersedes_record_id: Some(id),
            created_at: Timestamp(1),
            hash_algorithm: HASH_ALGORITHM.into(),
        };
        let Value::Object(map) = serde_json::to_value(&record).unwrap() else {
            panic!("a record serializes as an object")
        };
        fn sorted(mut keys: Vec<&str>) -> Vec<&str> {
            keys.sort_unstable();
            keys
        }
        let keys = sorted(map.keys().map(String::as_str).collect());
        assert_eq!(keys, sorted(COLUMNS.to_vec()));
        let Value::Object(fields) = serde_json::to_value(record.fields()).unwrap() else {
            panic!("fields serialize as an object")
        };
        let hashed = COLUMNS.into_iter().filter(|c| *c != "chain_hash").collect();
        assert_eq!(
            sorted(fields.keys().map(String::as_str).collect()),
            sorted(hashed)
        );
    }

    proptest! {
        #![proptest_config(config())]

        /// The hash input is the canonical text of the serialized record without its chain
        /// hash: the definition the design gives, computed the plain way.
        #[test]
        fn a_sealed_records_hash_is_the_hash_of_its_serialized_fields(
            chain in "[a-z0-9-]{1,20}",
            op in proptest::option::of("[!-~]{1,20}"),
            policy_id in text().prop_filter("non-empty", |s| !s.is_empty()),
            policy_version in text().prop_filter("non-empty", |s| !s.is_empty()),
            label in text(),
            sequence in 0u64..3,
            created_at in 0u64..(1 << 53),
        ) {
            let chain_id = ChainId::new(chain).unwrap();
            let operation_id = op.map(|o| OperationId::new(o).unwrap());
            let supersedes = (sequence == 2).then(|| record_id_for(Family::Evidence, &chain_id, 1).unwrap());
            let a = AppendFields {
                family: Family::Evidence,
                record_type: "gate_evaluated",
                chain_id: &chain_id,
                operation_id: operation_id.as_ref(),
                expected_sequence: sequence,
                policy_id: &policy_id,
                policy_version: &policy_version,
                supersedes_record_id: supersedes.as_ref(),
                created_at: Timestamp(created_at),
            };
            let payload = json!({"label": label, "n": 1, "nested": {"s": label}});
            let prepared = Prepared::of_value(&a, &payload).unwrap();
            let head = (sequence > 0).then(|| ChainHead {
                chain_id: chain_id.clone(),
                sequence: sequence - 1,
                chain_hash: Digest::of_bytes(b"previous"),
            });
            let seal = seal_on(&a, Ok(&prepared), head.as_ref()).unwrap();
            let record = seal.clone().into_record(&a, RecordType::GateEvaluated, prepared.clone());
            let mut value = serde_json::to_value(&record).unwrap();
            value.as_object_mut().unwrap().remove("chain_hash");
            let text = canonical::to_canonical_string(&value).unwrap();
            prop_assert_eq!(&seal.chain_hash, &Digest::of_bytes(text.as_bytes()));
            prop_assert_eq!(prepared.json.as_str(), canonical::to_canonical_string(&payload).unwrap());
            prop_assert_eq!(prepared.digest, Digest::of_bytes(prepared.json.as_bytes()));
            prop_assert_eq!(record.record_id.as_str().len(), 36);
        }
    }
}
