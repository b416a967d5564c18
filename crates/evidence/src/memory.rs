//! The in-memory store: the reference backend (and the fastest), nothing durable.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};

use async_trait::async_trait;
use foldhash::HashMap;
use warden_contracts::{
    AppendReceipt, ApprovalId, ChainHead, ChainId, Digest, EvidenceAppend, EvidenceError,
    EvidenceRecord, EvidenceStore, HASH_ALGORITHM, OperationId, RecordId, RecordType, Timestamp,
    VerificationResult,
};

use crate::facts::HasFacts;
use crate::journal::{self, JournalAppend, JournalRecord};
use crate::record::{self, AppendFields, Family, Prefix, PrefixState, Prepared};
use crate::store::{
    self, AppendFuture, GovernedStore, JournalStore, OperationRef, PreparedAppend, TypedAppend,
};
use crate::verify::{self, ChainTracker, Expected, Report, View};

#[derive(Debug)]
struct Chain {
    records: Chunked<Stored>,
    /// Each run of records with the same policy id and version, its pair once.
    policies: Vec<(String, String)>,
    /// Each run of records of the same operation, its id once.
    operations: Vec<OperationId>,
    tracker: ChainTracker,
}

/// A stored evidence record, without what its place in the chain implies (its id, its chain,
/// its predecessor's hash, the hash algorithm) and with its policy and operation as indexes
/// into its chain's lists: [`Chain::record`] rebuilds the full record, equal to what
/// [`record::seal`] returns. Nothing in it is shared (no reference counts to touch on an
/// append).
#[derive(Debug)]
struct Stored {
    record_type: RecordType,
    /// Index into [`Chain::operations`].
    operation: Option<usize>,
    /// Index into [`Chain::policies`].
    policy: usize,
    payload_json: String,
    /// The payload digest's and the chain hash's bytes (their text is written when the record
    /// is read).
    payload_digest: [u8; 32],
    chain_hash: [u8; 32],
    supersedes_record_id: Option<RecordId>,
    created_at: Timestamp,
}

/// Records per chunk of a chain's list.
const CHUNK: usize = 4096;

/// A list that grows a chunk at a time: appending to a long chain never copies its records (a
/// `Vec` doubling under the chain's lock copies them all while every appender of the chain
/// waits).
#[derive(Debug)]
struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Chunked<T> {
    fn new() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i / CHUNK)?.get(i % CHUNK)
    }

    fn push(&mut self, value: T) {
        match self.chunks.last_mut() {
            Some(chunk) if chunk.len() < CHUNK => chunk.push(value),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(value);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }
}

impl Chain {
    /// Records from index `start`, at most `limit`, rebuilt.
    fn records(&self, chain_id: &ChainId, start: usize, limit: usize) -> Vec<EvidenceRecord> {
        let end = start.saturating_add(limit).min(self.records.len());
        let mut out = Vec::with_capacity(end.saturating_sub(start));
        let mut previous = start
            .checked_sub(1)
            .and_then(|p| self.records.get(p))
            .map(|p| Digest::from_hash_bytes(&p.chain_hash));
        for i in start..end {
            let Some(r) = self.records.get(i) else { break };
            let chain_hash = Digest::from_hash_bytes(&r.chain_hash);
            if let Ok(record) =
                self.record(r, chain_id, i as u64, previous.take(), chain_hash.clone())
            {
                out.push(record);
            }
            previous = Some(chain_hash);
        }
        out
    }

    /// The full record of `r`, at `sequence`.
    fn record(
        &self,
        r: &Stored,
        chain_id: &ChainId,
        sequence: u64,
        previous_chain_hash: Option<Digest>,
        chain_hash: Digest,
    ) -> Result<EvidenceRecord, EvidenceError> {
        let missing =
            || record::invalid("a stored record names a policy or operation its chain lacks");
        let (policy_id, policy_version) = self.policies.get(r.policy).ok_or_else(missing)?.clone();
        let operation_id = match r.operation {
            Some(i) => Some(self.operations.get(i).ok_or_else(missing)?.clone()),
            None => None,
        };
        Ok(EvidenceRecord {
            record_id: record::record_id_for(Family::Evidence, chain_id, sequence)?,
            record_type: r.record_type,
            chain_id: chain_id.clone(),
            operation_id,
            sequence,
            policy_id,
            policy_version,
            payload_json: r.payload_json.clone(),
            payload_digest: Digest::from_hash_bytes(&r.payload_digest),
            previous_chain_hash,
            chain_hash,
            supersedes_record_id: r.supersedes_record_id.clone(),
            created_at: r.created_at,
            hash_algorithm: HASH_ALGORITHM.to_owned(),
        })
    }
}

#[derive(Debug)]
struct Journal {
    records: Vec<JournalRecord>,
    tracker: ChainTracker,
}

/// The indexes every chain's appends check and fill.
#[derive(Debug, Default)]
struct Indexes {
    idempotency: HashMap<Digest, OperationRef>,
    approvals: HashMap<ApprovalId, OperationRef>,
    /// Each record-id prefix and the one chain whose records it starts (bound by its first
    /// record).
    record_ids: HashMap<(Family, [u8; 16]), ChainId>,
}

impl Indexes {
    /// Binds `chain`'s record-id prefix to it, refusing a chain whose record ids another
    /// chain's already start with.
    fn claim_record_ids(&mut self, family: Family, chain: &ChainId) -> Result<(), EvidenceError> {
        let prefix = record::record_id_prefix(family, chain.as_str());
        match self.record_ids.get(&(family, prefix)) {
            Some(owner) if owner != chain => {
                Err(store::record_ids_taken(chain, &prefix, owner.as_str()))
            }
            Some(_) => Ok(()),
            None => {
                self.record_ids.insert((family, prefix), chain.clone());
                Ok(())
            }
        }
    }
}

/// Evidence in memory. Appends are checked exactly as the SQLite store checks them; nothing
/// survives the process.
///
/// Each chain has its own lock, so appenders of different chains (concurrent tasks) append in
/// parallel; an append's payload check, canonical text and most of its hashing happen before it
/// takes its chain's lock. Locks are taken in one order: the chain map, a chain, the indexes.
///
/// ```
/// use warden_evidence::{MemoryStore, TaskBoundary};
/// let store = MemoryStore::new();
/// assert!(store.chain_ids().is_empty());
/// # let _ = TaskBoundary::new("t-1");
/// ```
#[derive(Debug, Default)]
pub struct MemoryStore {
    /// Each chain's state in its own allocation, so appenders of neighbouring chains do not
    /// write to the same cache lines.
    chains: RwLock<BTreeMap<ChainId, Box<Mutex<Chain>>>>,
    journals: Mutex<BTreeMap<ChainId, Journal>>,
    indexes: Mutex<Indexes>,
}

/// Locks `m`. A panic while holding a lock cannot leave a half-appended record (a record is
/// pushed last, after every check), so a poisoned lock is still consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `f` on the chain, created empty if it does not exist.
    fn with_chain<T>(&self, chain_id: &ChainId, f: impl FnOnce(&mut Chain) -> T) -> T {
        {
            let chains = self.chains.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(chain) = chains.get(chain_id) {
                return f(&mut lock(chain));
            }
        }
        let mut chains = self.chains.write().unwrap_or_else(PoisonError::into_inner);
        let chain = chains.entry(chain_id.clone()).or_insert_with(|| {
            Box::new(Mutex::new(Chain {
                records: Chunked::new(),
                policies: Vec::new(),
                operations: Vec::new(),
                tracker: ChainTracker::new(Family::Evidence, chain_id.clone()),
            }))
        });
        f(chain.get_mut().unwrap_or_else(PoisonError::into_inner))
    }

    /// Runs `f` on the chain if it exists.
    fn read_chain<T>(&self, chain_id: &ChainId, f: impl FnOnce(&Chain) -> T) -> Option<T> {
        let chains = self.chains.read().unwrap_or_else(PoisonError::into_inner);
        chains.get(chain_id).map(|chain| f(&lock(chain)))
    }

    /// Appends one record (synchronously).
    pub fn append_sync(&self, entry: &EvidenceAppend) -> Result<AppendReceipt, EvidenceError> {
        // One hasher per thread, reused from append to append.
        record::with_hasher(|hasher| self.append_with(entry, hasher))
    }

    fn append_with(
        &self,
        entry: &EvidenceAppend,
        hasher: &mut blake3::Hasher,
    ) -> Result<AppendReceipt, EvidenceError> {
        // The payload's schema check and canonical form do not depend on the chain: outside the
        // lock.
        let prepared = record::prepare_evidence_with(entry, hasher);
        self.with_chain(&entry.chain_id, |chain| {
            self.append_to(chain, entry, prepared)
        })
    }

    /// Appends an append prepared by [`GovernedStore::prepare`] at `expected_sequence`
    /// (synchronously): only sealing and the chain's checks hold the chain's lock.
    ///
    /// ```
    /// use serde_json::json;
    /// use warden_contracts::{ChainId, Digest, EvidenceAppend, RecordType, Timestamp};
    /// use warden_evidence::{Expected, GovernedStore, MemoryStore};
    ///
    /// let store = MemoryStore::new();
    /// let snapshot = r#"{"default":"ask","id":"p","version":"1"}"#;
    /// let genesis = EvidenceAppend {
    ///     chain_id: ChainId::new("task-1").unwrap(),
    ///     record_type: RecordType::PolicyBound,
    ///     operation_id: None,
    ///     expected_sequence: 0, // ignored by `prepare`: the sequence is given when appending
    ///     policy_id: "p".into(),
    ///     policy_version: "1".into(),
    ///     payload: json!({"task_boundary_id": "task-1",
    ///                     "policy_digest": Digest::of_bytes(snapshot.as_bytes()),
    ///                     "snapshot_json": snapshot}),
    ///     supersedes_record_id: None,
    ///     created_at: Timestamp(1),
    /// };
    /// // Outside whatever lock orders the chain's appends:
    /// let prepared = store.prepare(genesis);
    /// // Under it, at the sequence it assigns:
    /// let receipt = store.append_prepared_sync(prepared, 0).unwrap();
    /// assert_eq!(receipt.sequence, 0);
    /// assert!(store.verify_sync(&receipt.chain_id, &Expected::Nothing).result.valid);
    /// ```
    pub fn append_prepared_sync(
        &self,
        append: PreparedAppend,
        expected_sequence: u64,
    ) -> Result<AppendReceipt, EvidenceError> {
        self.append_placed(append, expected_sequence).0
    }

    /// Appends a prepared append at `expected_sequence`; also returns what is left of it, for
    /// the caller to free where it chooses.
    fn append_placed(
        &self,
        append: PreparedAppend,
        expected_sequence: u64,
    ) -> (Result<AppendReceipt, EvidenceError>, EvidenceAppend) {
        let (entry, prepared) = append.place(expected_sequence);
        let result = self.with_chain(&entry.chain_id, |chain| {
            self.append_to(chain, &entry, prepared)
        });
        (result, entry)
    }

    /// The part of an append that holds its chain's lock.
    fn append_to<H: PrefixState, F: HasFacts>(
        &self,
        chain: &mut Chain,
        entry: &EvidenceAppend,
        mut prepared: Result<(Prepared<H>, F), EvidenceError>,
    ) -> Result<AppendReceipt, EvidenceError> {
        let a = AppendFields::evidence(entry);
        let seal = record::seal_on(
            &a,
            prepared.as_mut().map(|(p, _)| p).map_err(|e| &*e),
            chain.tracker.head(),
        )?;
        let (payload, checked) = prepared?;
        let facts = checked.facts();
        let view = View {
            fields: seal.fields(&a, &payload),
            record_id: &payload.record_id,
            record_type: entry.record_type,
            operation_id: entry.operation_id.as_ref(),
            supersedes_record_id: entry.supersedes_record_id.as_ref(),
        };
        let index = store::index_entries(&facts);
        let pending = chain
            .tracker
            .check_sealed(&view, facts)
            .map_err(|f| store::refused(&f))?;
        if seal.sequence == 0 {
            lock(&self.indexes).claim_record_ids(Family::Evidence, &entry.chain_id)?;
        }
        if !index.is_empty() {
            let mut indexes = lock(&self.indexes);
            if let Some(key) = &index.idempotency_key_digest
                && let Some(existing) = indexes.idempotency.get(key)
            {
                return Err(store::duplicate_key(existing));
            }
            if let Some(approval) = &index.approval_id
                && let Some(existing) = indexes.approvals.get(approval)
            {
                return Err(store::approval_used(existing));
            }
            if let Some(op) = store::operation_ref(
                &entry.chain_id,
                entry.operation_id.as_ref(),
                view.fields.record_id,
                seal.sequence,
            ) {
                if let Some(key) = index.idempotency_key_digest {
                    indexes.idempotency.insert(key, op.clone());
                }
                if let Some(approval) = index.approval_id {
                    indexes.approvals.insert(approval, op);
                }
            }
        }
        chain.tracker.apply(&view, &seal.chain_hash, pending);
        let policy = match chain.policies.last() {
            Some((id, version)) if *id == entry.policy_id && *version == entry.policy_version => {
                chain.policies.len() - 1
            }
            _ => {
                chain
                    .policies
                    .push((entry.policy_id.clone(), entry.policy_version.clone()));
                chain.policies.len() - 1
            }
        };
        let operation = match (chain.operations.last(), &entry.operation_id) {
            (_, None) => None,
            (Some(last), Some(op)) if last == op => Some(chain.operations.len() - 1),
            (_, Some(op)) => {
                chain.operations.push(op.clone());
                Some(chain.operations.len() - 1)
            }
        };
        let chain_hash = seal.hash;
        let receipt = seal.into_receipt(&entry.chain_id, payload.record_id);
        chain.records.push(Stored {
            record_type: entry.record_type,
            operation,
            policy,
            payload_json: payload.json,
            payload_digest: *payload.digest.hash(),
            chain_hash,
            supersedes_record_id: entry.supersedes_record_id.clone(),
            created_at: entry.created_at,
        });
        Ok(receipt)
    }

    /// Records of a chain after `after_sequence`, at most `limit`.
    pub fn read_sync(
        &self,
        chain: &ChainId,
        after_sequence: Option<u64>,
        limit: usize,
    ) -> Vec<EvidenceRecord> {
        let start = after_sequence.map_or(0, |s| {
            usize::try_from(s.saturating_add(1)).unwrap_or(usize::MAX)
        });
        self.read_chain(chain, |c| c.records(chain, start, limit))
            .unwrap_or_default()
    }

    /// The chain's head.
    pub fn head_sync(&self, chain: &ChainId) -> Option<ChainHead> {
        self.read_chain(chain, |c| c.tracker.head().cloned())
            .flatten()
    }

    /// Every evidence chain id, sorted.
    pub fn chain_ids(&self) -> Vec<ChainId> {
        self.chains
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// Verifies a chain with the full report.
    pub fn verify_sync(&self, chain: &ChainId, expected: &Expected) -> Report {
        let records = self.read_sync(chain, None, usize::MAX);
        verify::verify_records(
            Family::Evidence,
            chain,
            records.into_iter().map(Ok),
            expected,
        )
    }
}

#[async_trait]
impl EvidenceStore for MemoryStore {
    // Written out (not `async fn`) so the append happens when `append` is called, not when the
    // future is first polled: callers that serialize their calls get that order.
    fn append<'life0, 'async_trait>(
        &'life0 self,
        entry: EvidenceAppend,
    ) -> Pin<Box<dyn Future<Output = Result<AppendReceipt, EvidenceError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let result = self.append_sync(&entry);
        Box::pin(async move { result })
    }

    async fn read(
        &self,
        chain: &ChainId,
        after_sequence: Option<u64>,
        limit: usize,
    ) -> Result<Vec<EvidenceRecord>, EvidenceError> {
        Ok(self.read_sync(chain, after_sequence, limit))
    }

    async fn head(&self, chain: &ChainId) -> Result<Option<ChainHead>, EvidenceError> {
        Ok(self.head_sync(chain))
    }

    async fn verify(
        &self,
        chain: &ChainId,
        expected_head: Option<&ChainHead>,
    ) -> Result<VerificationResult, EvidenceError> {
        Ok(self
            .verify_sync(chain, &Expected::from_head(expected_head))
            .result)
    }
}

#[async_trait]
impl GovernedStore for MemoryStore {
    /// Prepares on the caller's thread, the prefix of the chain hash already hashed.
    fn prepare(&self, entry: EvidenceAppend) -> PreparedAppend {
        PreparedAppend::new(entry, Prefix::hashed())
    }

    fn prepare_typed(&self, append: TypedAppend) -> PreparedAppend {
        PreparedAppend::typed(append, Prefix::hashed())
    }

    fn append_prepared(&self, append: PreparedAppend, expected_sequence: u64) -> AppendFuture<'_> {
        let (result, entry) = self.append_placed(append, expected_sequence);
        // What is left of the append is freed when the future is awaited: after the caller's
        // lock (the recorder's), not under it.
        Box::pin(async move {
            drop(entry);
            result
        })
    }

    async fn chains(&self) -> Result<Vec<ChainId>, EvidenceError> {
        Ok(self.chain_ids())
    }

    async fn find_idempotency_key(
        &self,
        key_digest: &Digest,
    ) -> Result<Option<OperationRef>, EvidenceError> {
        Ok(lock(&self.indexes).idempotency.get(key_digest).cloned())
    }

    async fn find_approval_use(
        &self,
        approval_id: &ApprovalId,
    ) -> Result<Option<OperationRef>, EvidenceError> {
        Ok(lock(&self.indexes).approvals.get(approval_id).cloned())
    }

    async fn verify_report(
        &self,
        chain: &ChainId,
        expected: &Expected,
    ) -> Result<Report, EvidenceError> {
        Ok(self.verify_sync(chain, expected))
    }
}

impl JournalStore for MemoryStore {
    fn append_journal(&self, entry: JournalAppend) -> Result<AppendReceipt, EvidenceError> {
        let mut prepared = journal::prepare_journal(&entry);
        let mut journals = lock(&self.journals);
        let j = journals
            .entry(entry.chain_id.clone())
            .or_insert_with(|| Journal {
                records: Vec::new(),
                tracker: ChainTracker::new(Family::Journal, entry.chain_id.clone()),
            });
        let a = entry.fields();
        let seal = record::seal_on(&a, prepared.as_mut().map_err(|e| &*e), j.tracker.head())?;
        let payload = prepared?;
        let fields = seal.fields(&a, &payload);
        j.tracker
            .check_sealed_journal(&fields)
            .map_err(|f| store::refused(&f))?;
        if seal.sequence == 0 {
            lock(&self.indexes).claim_record_ids(Family::Journal, &entry.chain_id)?;
        }
        j.tracker.accept_sealed_journal(&fields, &seal.chain_hash);
        let receipt = seal.receipt(&entry.chain_id, payload.record_id.clone());
        j.records
            .push(seal.into_record(&a, entry.record_type, payload));
        Ok(receipt)
    }

    fn read_journal(
        &self,
        chain: &ChainId,
        after_sequence: Option<u64>,
        limit: usize,
    ) -> Result<Vec<JournalRecord>, EvidenceError> {
        let start = after_sequence.map_or(0, |s| {
            usize::try_from(s.saturating_add(1)).unwrap_or(usize::MAX)
        });
        Ok(lock(&self.journals)
            .get(chain)
            .map(|j| j.records.iter().skip(start).take(limit).cloned().collect())
            .unwrap_or_default())
    }

    fn journal_head(&self, chain: &ChainId) -> Result<Option<ChainHead>, EvidenceError> {
        Ok(lock(&self.journals)
            .get(chain)
            .and_then(|j| j.tracker.head().cloned()))
    }

    fn journal_chains(&self) -> Result<Vec<ChainId>, EvidenceError> {
        Ok(lock(&self.journals).keys().cloned().collect())
    }

    fn verify_journal(
        &self,
        chain: &ChainId,
        expected: &Expected,
    ) -> Result<Report, EvidenceError> {
        let records = self.read_journal(chain, None, usize::MAX)?;
        Ok(verify::verify_records(
            Family::Journal,
            chain,
            records.into_iter().map(Ok),
            expected,
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;
    use warden_contracts::Timestamp;

    use super::*;

    fn genesis(chain: &str) -> EvidenceAppend {
        let snapshot = r#"{"default":"ask","id":"p","version":"1"}"#;
        EvidenceAppend {
            chain_id: ChainId::new(chain).unwrap(),
            record_type: RecordType::PolicyBound,
            operation_id: None,
            expected_sequence: 0,
            policy_id: "p".into(),
            policy_version: "1".into(),
            payload: json!({"task_boundary_id": chain,
                "policy_digest": Digest::of_bytes(snapshot.as_bytes()),
                "snapshot_json": snapshot}),
            supersedes_record_id: None,
            created_at: Timestamp(1),
        }
    }

    /// A chain whose record ids would start like another chain's is refused, as the SQLite
    /// store refuses it (a 64-bit prefix collision needs a chain id chosen for it: here the
    /// other chain's binding is made by hand).
    #[test]
    fn a_chain_whose_record_ids_another_chain_owns_is_refused() {
        let store = MemoryStore::new();
        let victim = ChainId::new("victim").unwrap();
        let prefix = record::record_id_prefix(Family::Evidence, victim.as_str());
        lock(&store.indexes).record_ids.insert(
            (Family::Evidence, prefix),
            ChainId::new("squatter").unwrap(),
        );
        let err = store.append_sync(&genesis("victim")).unwrap_err();
        assert!(
            err.to_string()
                .contains("would collide with those of chain squatter"),
            "{err}"
        );
        assert_eq!(store.head_sync(&victim), None);
        store.append_sync(&genesis("bystander")).unwrap();
        // The same chain binds its own prefix once: its later records append.
        assert!(
            lock(&store.indexes)
                .claim_record_ids(Family::Evidence, &ChainId::new("bystander").unwrap())
                .is_ok()
        );
    }
}
