//! Verification: the incremental [`ChainTracker`] (used by verifiers *and* by the stores before
//! every append) and [`verify_records`], which walks a whole chain.
//!
//! A record is checked in this order, and the first failure is reported with its record:
//!
//! 1. `hash_algorithm` is `blake3-v1` ([`VerificationFailure::UnknownHashAlgorithm`]);
//! 2. `chain_id` is the chain's ([`VerificationFailure::MalformedRecord`]);
//! 3. genesis: sequence 0 without `previous_chain_hash` ([`VerificationFailure::InvalidGenesis`]),
//!    then consecutive sequences ([`VerificationFailure::SequenceGap`]);
//! 4. `previous_chain_hash` is the predecessor's `chain_hash` ([`VerificationFailure::BrokenLink`]);
//! 5. `payload_digest` is the digest of `payload_json` ([`VerificationFailure::PayloadDigestMismatch`]);
//! 6. `chain_hash` is the hash of every other field ([`VerificationFailure::ChainHashMismatch`]);
//! 7. the record id is the one the store assigns at that sequence, the payload is canonical JSON
//!    ([`VerificationFailure::MalformedRecord`]);
//! 8. (evidence only) the payload matches its type's schema ([`VerificationFailure::InvalidPayload`])
//!    and the lifecycle rules hold: an operation's records follow its `operation_started`
//!    ([`VerificationFailure::OrphanRecord`]), at most one terminal per operation
//!    ([`VerificationFailure::DuplicateTerminal`]), every started operation closed before
//!    `task_closed` ([`VerificationFailure::MissingTerminal`]), nothing after it
//!    ([`VerificationFailure::RecordAfterClose`]).
//!
//! Finally the expected head (kept elsewhere) must be in the chain
//! ([`VerificationFailure::HeadMismatch`]).

use foldhash::{HashMap, HashSet};
use serde_json::Value;
use warden_contracts::{
    ChainHead, ChainId, Digest, EvidenceRecord, HASH_ALGORITHM, OperationId, RecordId, RecordType,
    VerificationFailure, VerificationResult,
};

use crate::facts::Facts;
use crate::operation_set::OperationSet;
use crate::payload::{self, CloseDisposition, GateLevel, GateVerdict, Label, TerminalCounts};
use crate::record::{self, Family, Fields};

/// What the chain is checked against: a head kept elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// Nothing: the chain is only checked for internal consistency.
    Nothing,
    /// A head (from a checkpoint or a receipt): the record at its sequence must have its hash.
    Head(ChainHead),
    /// A chain hash alone: some record of the chain must have it.
    Hash(Digest),
}

impl Expected {
    /// From the port's optional head.
    pub fn from_head(head: Option<&ChainHead>) -> Self {
        head.map_or(Self::Nothing, |h| Self::Head(h.clone()))
    }
}

/// One verification failure, with where it happened and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureDetail {
    /// The closed failure code.
    pub code: VerificationFailure,
    /// The record that failed, when it has a readable id.
    pub record_id: Option<RecordId>,
    /// Its sequence, when known.
    pub sequence: Option<u64>,
    /// A human-readable explanation.
    pub detail: String,
}

impl FailureDetail {
    fn at(code: VerificationFailure, f: &Fields<'_>, detail: impl Into<String>) -> Self {
        Self {
            code,
            record_id: RecordId::new(f.record_id).ok(),
            sequence: Some(f.sequence),
            detail: detail.into(),
        }
    }
}

/// A full verification report: the port's [`VerificationResult`] and the failure's details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// What the port returns.
    pub result: VerificationResult,
    /// The failure, when there is one.
    pub failure: Option<FailureDetail>,
}

/// An operation that started and has no terminal record yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenOperation {
    /// Its `operation_started` record.
    pub started_record_id: RecordId,
    /// Its `operation_started` sequence.
    pub started_sequence: u64,
    /// Its gate evaluations so far: record, level, verdict.
    pub gates: Vec<(RecordId, GateLevel, GateVerdict)>,
    /// The gate records overridden by an exception.
    pub excepted: Vec<RecordId>,
}

/// Lifecycle facts of an evidence chain, kept by [`ChainTracker`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lifecycle {
    /// The task boundary (from the genesis `policy_bound`).
    pub task_boundary_id: Option<Label>,
    /// How the boundary closed, once it did.
    pub closed: Option<CloseDisposition>,
    /// Open operations.
    pub open: HashMap<OperationId, OpenOperation>,
    /// Operations bound by a `policy_bound` and not started yet.
    pub prebound: HashSet<OperationId>,
    /// Operations closed by a terminal record.
    pub terminated: OperationSet,
    /// Policy digests whose snapshot bytes the chain holds.
    pub policy_digests: HashSet<Digest>,
    /// Operations started.
    pub operations: u64,
    /// Terminal records by type.
    pub terminals: TerminalCounts,
    /// `exception_granted` records.
    pub exceptions: u64,
    /// Record types by sequence (to check `record_superseded` references).
    pub types: Vec<RecordType>,
}

/// Checks a chain one record at a time. Stores run every append through it before committing,
/// verifiers run every stored record through it.
#[derive(Debug, Clone)]
pub struct ChainTracker {
    family: Family,
    chain_id: ChainId,
    head: Option<ChainHead>,
    checked: u64,
    lifecycle: Lifecycle,
}

/// A checked record's lifecycle change, to apply once the record is stored.
pub(crate) struct Pending(Change);

/// What an accepted evidence record changes in the lifecycle (computed before anything changes,
/// so a refused record leaves the tracker untouched). The operation is the record's own.
enum Change {
    None,
    Genesis(Label, Option<Digest>),
    Bind(Option<Digest>),
    Start,
    Gate(GateLevel, GateVerdict),
    Exception(RecordId),
    Terminal,
    Close(CloseDisposition),
}

/// One evidence record as the lifecycle rules see it: its fields and its typed references.
#[derive(Debug, Clone, Copy)]
pub(crate) struct View<'a> {
    pub(crate) fields: Fields<'a>,
    /// The record's id, typed (`fields.record_id` is its text).
    pub(crate) record_id: &'a RecordId,
    pub(crate) record_type: RecordType,
    pub(crate) operation_id: Option<&'a OperationId>,
    pub(crate) supersedes_record_id: Option<&'a RecordId>,
}

impl<'a> View<'a> {
    pub(crate) fn of(r: &'a EvidenceRecord) -> Self {
        Self {
            fields: Fields::of(r),
            record_id: &r.record_id,
            record_type: r.record_type,
            operation_id: r.operation_id.as_ref(),
            supersedes_record_id: r.supersedes_record_id.as_ref(),
        }
    }
}

impl ChainTracker {
    /// A tracker for an empty chain.
    pub fn new(family: Family, chain_id: ChainId) -> Self {
        Self {
            family,
            chain_id,
            head: None,
            checked: 0,
            lifecycle: Lifecycle::default(),
        }
    }

    /// The chain.
    pub fn chain_id(&self) -> &ChainId {
        &self.chain_id
    }

    /// The last accepted record's head.
    pub fn head(&self) -> Option<&ChainHead> {
        self.head.as_ref()
    }

    /// How many records were accepted.
    pub fn checked(&self) -> u64 {
        self.checked
    }

    /// The lifecycle facts so far (evidence chains).
    pub fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
    }

    /// Checks and accepts one evidence record. On failure nothing changes.
    pub fn push(&mut self, record: &EvidenceRecord) -> Result<(), FailureDetail> {
        let view = View::of(record);
        let value = self.check_integrity(&view.fields, &record.chain_hash)?;
        let change = if self.family == Family::Evidence {
            self.check_lifecycle(&view, &value)?
        } else {
            Change::None
        };
        self.accept(&view, &record.chain_hash, change);
        Ok(())
    }

    /// Accepts a record [`Self::check_sealed`] passed.
    pub(crate) fn apply(&mut self, view: &View<'_>, chain_hash: &Digest, pending: Pending) {
        self.accept(view, chain_hash, pending.0);
    }

    /// Checks one journal record's integrity without accepting it.
    pub(crate) fn check_fields(
        &self,
        f: &Fields<'_>,
        chain_hash: &Digest,
    ) -> Result<(), FailureDetail> {
        self.check_integrity(f, chain_hash).map(|_| ())
    }

    /// Checks and accepts one journal record (integrity only; journals have no lifecycle).
    pub(crate) fn push_fields(
        &mut self,
        f: &Fields<'_>,
        chain_hash: &Digest,
    ) -> Result<(), FailureDetail> {
        self.check_integrity(f, chain_hash)?;
        self.set_head(f.sequence, chain_hash);
        Ok(())
    }

    /// Checks a journal record a store just sealed onto this tracker's head (its payload was
    /// checked when it was prepared), changing nothing.
    pub(crate) fn check_sealed_journal(&self, f: &Fields<'_>) -> Result<(), FailureDetail> {
        self.check_link(f)
    }

    /// Accepts a journal record [`Self::check_sealed_journal`] passed.
    pub(crate) fn accept_sealed_journal(&mut self, f: &Fields<'_>, chain_hash: &Digest) {
        self.set_head(f.sequence, chain_hash);
    }

    fn set_head(&mut self, sequence: u64, chain_hash: &Digest) {
        match &mut self.head {
            Some(head) => {
                head.sequence = sequence;
                head.chain_hash = chain_hash.clone();
            }
            None => {
                self.head = Some(ChainHead {
                    chain_id: self.chain_id.clone(),
                    sequence,
                    chain_hash: chain_hash.clone(),
                });
            }
        }
        self.checked += 1;
    }

    fn accept(&mut self, v: &View<'_>, chain_hash: &Digest, change: Change) {
        let f = &v.fields;
        self.set_head(f.sequence, chain_hash);
        let l = &mut self.lifecycle;
        l.types.push(v.record_type);
        match change {
            Change::None => {}
            Change::Genesis(boundary, digest) => {
                l.task_boundary_id = Some(boundary);
                l.policy_digests.extend(digest);
            }
            Change::Bind(digest) => {
                l.policy_digests.extend(digest);
                if let Some(op) = v.operation_id {
                    l.prebound.insert(op.clone());
                }
            }
            Change::Start => {
                let Some(op) = v.operation_id else { return };
                let op = l.prebound.take(op).unwrap_or_else(|| op.clone());
                l.operations += 1;
                l.open.insert(
                    op,
                    OpenOperation {
                        started_record_id: v.record_id.clone(),
                        started_sequence: f.sequence,
                        gates: Vec::new(),
                        excepted: Vec::new(),
                    },
                );
            }
            Change::Gate(level, verdict) => {
                if let Some(o) = v.operation_id.and_then(|op| l.open.get_mut(op)) {
                    o.gates.push((v.record_id.clone(), level, verdict));
                }
            }
            Change::Exception(gate) => {
                l.exceptions += 1;
                if let Some(o) = v.operation_id.and_then(|op| l.open.get_mut(op)) {
                    o.excepted.push(gate);
                }
            }
            Change::Terminal => {
                if let Some(op) = v.operation_id {
                    let op = l
                        .open
                        .remove_entry(op)
                        .map_or_else(|| op.clone(), |(k, _)| k);
                    l.terminated.insert(op);
                }
                l.terminals.add(v.record_type);
            }
            Change::Close(d) => l.closed = Some(d),
        }
    }

    /// Steps 1–7: returns the parsed payload.
    fn check_integrity(&self, f: &Fields<'_>, chain_hash: &Digest) -> Result<Value, FailureDetail> {
        use VerificationFailure as V;
        if f.hash_algorithm != HASH_ALGORITHM {
            return Err(FailureDetail::at(
                V::UnknownHashAlgorithm,
                f,
                format!(
                    "hash algorithm `{}` is not `{HASH_ALGORITHM}`",
                    f.hash_algorithm
                ),
            ));
        }
        if f.chain_id != self.chain_id.as_str() {
            return Err(FailureDetail::at(
                V::MalformedRecord,
                f,
                format!(
                    "record names chain `{}`, not `{}`",
                    f.chain_id, self.chain_id
                ),
            ));
        }
        match &self.head {
            None => {
                if f.sequence != 0 || f.previous_chain_hash.is_some() {
                    return Err(FailureDetail::at(
                        V::InvalidGenesis,
                        f,
                        format!(
                            "the first record has sequence {} and {} previous hash; genesis is sequence 0 without one",
                            f.sequence,
                            if f.previous_chain_hash.is_some() {
                                "a"
                            } else {
                                "no"
                            }
                        ),
                    ));
                }
            }
            Some(head) => {
                if f.sequence != head.sequence + 1 {
                    return Err(FailureDetail::at(
                        V::SequenceGap,
                        f,
                        format!("sequence {} follows {}", f.sequence, head.sequence),
                    ));
                }
                if f.previous_chain_hash != Some(head.chain_hash.as_str()) {
                    return Err(FailureDetail::at(
                        V::BrokenLink,
                        f,
                        format!(
                            "previous_chain_hash {} is not the chain hash {} of sequence {}",
                            f.previous_chain_hash.unwrap_or("(none)"),
                            head.chain_hash,
                            head.sequence
                        ),
                    ));
                }
            }
        }
        let payload_digest = Digest::of_bytes(f.payload_json.as_bytes());
        if payload_digest.as_str() != f.payload_digest {
            return Err(FailureDetail::at(
                V::PayloadDigestMismatch,
                f,
                format!(
                    "payload_digest {} but the payload hashes to {}",
                    f.payload_digest,
                    payload_digest.as_str()
                ),
            ));
        }
        if f.created_at > warden_contracts::canonical::MAX_SAFE_INTEGER {
            return Err(FailureDetail::at(
                V::MalformedRecord,
                f,
                "created_at is out of range",
            ));
        }
        let computed = record::chain_hash(f).map_err(|e| {
            FailureDetail::at(
                V::ChainHashMismatch,
                f,
                format!("the fields cannot be hashed: {e}"),
            )
        })?;
        if computed != *chain_hash {
            return Err(FailureDetail::at(
                V::ChainHashMismatch,
                f,
                format!("chain_hash {chain_hash} but the fields hash to {computed}"),
            ));
        }
        let expected_id = record::record_id_for(self.family, &self.chain_id, f.sequence)
            .map_err(|e| FailureDetail::at(V::MalformedRecord, f, e.to_string()))?;
        if expected_id.as_str() != f.record_id {
            return Err(FailureDetail::at(
                V::MalformedRecord,
                f,
                format!(
                    "record id `{}` is not `{expected_id}`, the id of sequence {}",
                    f.record_id, f.sequence
                ),
            ));
        }
        record::parse_canonical(f.payload_json).ok_or_else(|| {
            FailureDetail::at(V::MalformedRecord, f, "payload_json is not canonical JSON")
        })
    }

    /// Step 8 for evidence records.
    fn check_lifecycle(&self, v: &View<'_>, value: &Value) -> Result<Change, FailureDetail> {
        match payload::parse(v.record_type, value) {
            Ok(payload) => self.check_parsed(v, payload.facts()),
            Err(e) => Err(FailureDetail::at(
                VerificationFailure::InvalidPayload,
                &v.fields,
                format!("{} payload: {e}", record::record_type_str(v.record_type)),
            )),
        }
    }

    /// The record was sealed onto this chain's head (its sequence, link and chain).
    fn check_link(&self, f: &Fields<'_>) -> Result<(), FailureDetail> {
        let next = self.head.as_ref().map_or(0, |h| h.sequence + 1);
        if f.sequence != next
            || f.previous_chain_hash != self.head.as_ref().map(|h| h.chain_hash.as_str())
            || f.chain_id != self.chain_id.as_str()
        {
            return Err(FailureDetail::at(
                VerificationFailure::SequenceGap,
                f,
                "the record was not sealed onto this chain's head",
            ));
        }
        Ok(())
    }

    /// Checks a record a store just sealed onto this tracker's head (so its sequence, link and
    /// hashes hold by construction) against the lifecycle rules, with its already parsed payload.
    pub(crate) fn check_sealed(
        &self,
        v: &View<'_>,
        facts: Facts<'_>,
    ) -> Result<Pending, FailureDetail> {
        self.check_link(&v.fields)?;
        self.check_parsed(v, facts).map(Pending)
    }

    fn check_parsed(&self, r: &View<'_>, facts: Facts<'_>) -> Result<Change, FailureDetail> {
        use VerificationFailure as V;
        let l = &self.lifecycle;
        let f = &r.fields;
        let fail = |code, detail: String| Err(FailureDetail::at(code, f, detail));
        if (r.record_type == RecordType::RecordSuperseded) != r.supersedes_record_id.is_some() {
            return fail(
                V::MalformedRecord,
                "supersedes_record_id is set exactly on record_superseded records".into(),
            );
        }
        if f.sequence == 0 {
            // Genesis: the boundary's `policy_bound`, without operation, with the snapshot bytes.
            return match facts {
                Facts::PolicyBound {
                    boundary,
                    digest,
                    has_snapshot,
                } if r.operation_id.is_none() => {
                    if !has_snapshot {
                        return fail(
                            V::InvalidPayload,
                            "the genesis policy_bound carries the snapshot's canonical bytes"
                                .into(),
                        );
                    }
                    let (Ok(boundary), Ok(digest)) = (Label::new(boundary), digest.parse()) else {
                        return fail(V::InvalidPayload, "unreadable genesis policy_bound".into());
                    };
                    Ok(Change::Genesis(boundary, Some(digest)))
                }
                _ => fail(
                    V::InvalidGenesis,
                    format!(
                        "genesis is a policy_bound without operation, not {}",
                        record::record_type_str(r.record_type)
                    ),
                ),
            };
        }
        if l.closed.is_some() {
            return fail(
                V::RecordAfterClose,
                format!(
                    "{} after the task boundary closed",
                    record::record_type_str(r.record_type)
                ),
            );
        }
        let op = r.operation_id;
        let needs_open = |op: Option<&OperationId>| -> Result<(), FailureDetail> {
            let Some(op) = op else {
                return Err(FailureDetail::at(
                    V::OrphanRecord,
                    f,
                    format!(
                        "{} names no operation",
                        record::record_type_str(r.record_type)
                    ),
                ));
            };
            if l.open.contains_key(op) {
                Ok(())
            } else if l.terminated.contains(op) {
                Err(FailureDetail::at(
                    if r.record_type.is_terminal() {
                        V::DuplicateTerminal
                    } else {
                        V::OrphanRecord
                    },
                    f,
                    format!(
                        "{} for operation {op}, which already has its terminal record",
                        record::record_type_str(r.record_type)
                    ),
                ))
            } else {
                Err(FailureDetail::at(
                    V::OrphanRecord,
                    f,
                    format!(
                        "{} for operation {op}, which has not started",
                        record::record_type_str(r.record_type)
                    ),
                ))
            }
        };
        match facts {
            Facts::PolicyBound {
                boundary,
                digest,
                has_snapshot,
            } => {
                if l.task_boundary_id.as_ref().map(Label::as_str) != Some(boundary) {
                    return fail(
                        V::InvalidPayload,
                        format!("policy_bound names task boundary `{boundary}`, not the chain's"),
                    );
                }
                let new_digest = !l.policy_digests.iter().any(|d| d.as_str() == digest);
                if new_digest && !has_snapshot {
                    return fail(
                        V::InvalidPayload,
                        format!(
                            "policy {digest} is bound for the first time without its snapshot bytes"
                        ),
                    );
                }
                if let Some(op) = op
                    && (l.open.contains_key(op)
                        || l.terminated.contains(op)
                        || l.prebound.contains(op))
                {
                    return fail(
                        V::OrphanRecord,
                        format!(
                            "policy_bound for operation {op}, which is already bound or started"
                        ),
                    );
                }
                let digest = if new_digest {
                    let Ok(digest) = digest.parse() else {
                        return fail(V::InvalidPayload, format!("unreadable digest {digest}"));
                    };
                    Some(digest)
                } else {
                    None
                };
                Ok(Change::Bind(digest))
            }
            Facts::OperationStarted { .. } => {
                let Some(op) = op else {
                    return fail(
                        V::OrphanRecord,
                        "operation_started names no operation".into(),
                    );
                };
                if l.open.contains_key(op) || l.terminated.contains(op) {
                    return fail(V::OrphanRecord, format!("operation {op} started twice"));
                }
                Ok(Change::Start)
            }
            Facts::Gate { level, verdict } => {
                needs_open(op)?;
                Ok(Change::Gate(level, verdict))
            }
            Facts::Exception { gate_record_id } => {
                needs_open(op)?;
                let Some((op, open)) = op.and_then(|op| l.open.get_key_value(op)) else {
                    return fail(
                        V::OrphanRecord,
                        "exception_granted names no open operation".into(),
                    );
                };
                let soft_deny = open.gates.iter().any(|(id, level, verdict)| {
                    id.as_str() == gate_record_id
                        && *level == GateLevel::Soft
                        && *verdict == GateVerdict::Deny
                });
                if !soft_deny {
                    return fail(
                        V::InvalidPayload,
                        format!(
                            "exception_granted overrides {gate_record_id}, which is not a soft deny of operation {op}"
                        ),
                    );
                }
                if open.excepted.iter().any(|e| e.as_str() == gate_record_id) {
                    return fail(
                        V::InvalidPayload,
                        format!("soft deny {gate_record_id} already has an exception"),
                    );
                }
                let Ok(gate) = RecordId::new(gate_record_id) else {
                    return fail(V::InvalidPayload, "unreadable gate_record_id".into());
                };
                Ok(Change::Exception(gate))
            }
            Facts::Terminal => {
                needs_open(op)?;
                Ok(Change::Terminal)
            }
            Facts::TaskClosed {
                boundary,
                disposition,
                operations,
                terminals,
                exceptions,
            } => {
                if op.is_some() {
                    return fail(V::MalformedRecord, "task_closed names an operation".into());
                }
                if let Some((op, open)) = l.open.iter().min_by_key(|(_, o)| o.started_sequence) {
                    return Err(FailureDetail {
                        code: V::MissingTerminal,
                        record_id: Some(open.started_record_id.clone()),
                        sequence: Some(open.started_sequence),
                        detail: format!(
                            "operation {op} started at sequence {} has no terminal record when the task closed at sequence {}",
                            open.started_sequence, f.sequence
                        ),
                    });
                }
                if l.task_boundary_id.as_ref().map(Label::as_str) != Some(boundary) {
                    return fail(
                        V::InvalidPayload,
                        "task_closed names another task boundary".into(),
                    );
                }
                if operations != l.operations
                    || terminals != l.terminals
                    || exceptions != l.exceptions
                {
                    return fail(
                        V::InvalidPayload,
                        format!(
                            "task_closed counts {} operations, {} terminals, {} exceptions; the chain has {}, {}, {}",
                            operations,
                            terminals.total(),
                            exceptions,
                            l.operations,
                            l.terminals.total(),
                            l.exceptions
                        ),
                    );
                }
                Ok(Change::Close(disposition))
            }
            Facts::Superseded {
                sequence,
                record_type,
            } => {
                let target = record::record_id_for(Family::Evidence, &self.chain_id, sequence).ok();
                if sequence >= f.sequence || target.as_ref() != r.supersedes_record_id {
                    return fail(
                        V::OrphanRecord,
                        "record_superseded must name an earlier record of the chain (id and sequence)".into(),
                    );
                }
                let actual = usize::try_from(sequence).ok().and_then(|i| l.types.get(i));
                if actual != Some(&record_type) {
                    return fail(
                        V::InvalidPayload,
                        format!(
                            "record_superseded says sequence {} is a {}",
                            sequence,
                            record::record_type_str(record_type)
                        ),
                    );
                }
                Ok(Change::None)
            }
        }
    }
}

/// A stored record of either family, as verifiers see it.
pub trait ChainRecord {
    /// Checks the record and, if it passes, accepts it into `tracker`.
    fn push_to(&self, tracker: &mut ChainTracker) -> Result<(), FailureDetail>;
    /// The record's id.
    fn id(&self) -> &RecordId;
    /// The record's sequence.
    fn seq(&self) -> u64;
    /// The record's chain hash.
    fn hash(&self) -> &Digest;
}

impl ChainRecord for EvidenceRecord {
    fn push_to(&self, tracker: &mut ChainTracker) -> Result<(), FailureDetail> {
        tracker.push(self)
    }
    fn id(&self) -> &RecordId {
        &self.record_id
    }
    fn seq(&self) -> u64 {
        self.sequence
    }
    fn hash(&self) -> &Digest {
        &self.chain_hash
    }
}

/// Walks records of one chain (in stored order), checking each and the expected head.
///
/// `records` yields `Err(failure)` for a stored row that cannot even be read as a record
/// (a byte flipped into invalid UTF-8, a number stored as text); that is a
/// [`VerificationFailure::MalformedRecord`] of that row.
pub fn verify_records<R, I>(
    family: Family,
    chain: &ChainId,
    records: I,
    expected: &Expected,
) -> Report
where
    R: ChainRecord,
    I: IntoIterator<Item = Result<R, FailureDetail>>,
{
    let mut tracker = ChainTracker::new(family, chain.clone());
    let mut checked = 0u64;
    let mut hash_seen = false;
    for item in records {
        checked += 1;
        let pushed = item.and_then(|r| {
            r.push_to(&mut tracker)?;
            if let Expected::Hash(d) = expected {
                hash_seen |= r.hash() == d;
            }
            check_expected(r.id(), r.seq(), r.hash(), expected)
        });
        if let Err(failure) = pushed {
            return failed(&tracker, checked, failure);
        }
    }
    finish(&tracker, checked, expected, hash_seen)
}

fn check_expected(
    record_id: &RecordId,
    sequence: u64,
    chain_hash: &Digest,
    expected: &Expected,
) -> Result<(), FailureDetail> {
    if let Expected::Head(h) = expected
        && h.sequence == sequence
        && &h.chain_hash != chain_hash
    {
        return Err(FailureDetail {
            code: VerificationFailure::HeadMismatch,
            record_id: Some(record_id.clone()),
            sequence: Some(sequence),
            detail: format!(
                "the expected head has chain hash {} at sequence {sequence}; the stored record has {chain_hash}: it was changed or replaced",
                h.chain_hash
            ),
        });
    }
    Ok(())
}

fn failed(tracker: &ChainTracker, checked: u64, failure: FailureDetail) -> Report {
    Report {
        result: VerificationResult {
            valid: false,
            verified_head: tracker.head().cloned(),
            checked_records: checked,
            failure_code: Some(failure.code),
            failed_record_id: failure.record_id.clone(),
        },
        failure: Some(failure),
    }
}

fn finish(tracker: &ChainTracker, checked: u64, expected: &Expected, hash_seen: bool) -> Report {
    let head = tracker.head();
    let missing = match expected {
        Expected::Nothing => None,
        Expected::Head(h) => {
            if &h.chain_id != tracker.chain_id() {
                Some(format!(
                    "the expected head is of chain {}, not {}",
                    h.chain_id,
                    tracker.chain_id()
                ))
            } else if head.is_none_or(|head| head.sequence < h.sequence) {
                Some(format!(
                    "the expected head is at sequence {} but the chain ends at {}: records were removed",
                    h.sequence,
                    head.map_or_else(|| "nothing (empty)".to_owned(), |h| h.sequence.to_string())
                ))
            } else {
                None
            }
        }
        Expected::Hash(d) => (!hash_seen).then(|| {
            format!("no record of the chain has the expected chain hash {d}: records were removed or replaced")
        }),
    };
    match missing {
        Some(detail) => failed(
            tracker,
            checked,
            FailureDetail {
                code: VerificationFailure::HeadMismatch,
                record_id: None,
                sequence: None,
                detail,
            },
        ),
        None => Report {
            result: VerificationResult {
                valid: true,
                verified_head: head.cloned(),
                checked_records: checked,
                failure_code: None,
                failed_record_id: None,
            },
            failure: None,
        },
    }
}
