//! The in-memory store: the plain reference backend, nothing durable.
//!
//! One lock over the whole store, a list of records per chain, a map per index: what every
//! backend must do, written the obvious way, so that the SQLite store's conformance tests have a
//! reference to agree with.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use warden_contracts::{
    AppendReceipt, ApprovalId, ChainHead, ChainId, Digest, EvidenceAppend, EvidenceError,
    EvidenceRecord, EvidenceStore, VerificationResult,
};

use crate::journal::{self, JournalAppend, JournalRecord};
use crate::record::{self, AppendFields, Family, PreparedEvidence};
use crate::store::{
    self, AppendFuture, GovernedStore, JournalStore, OperationRef, Sealed, TypedAppend,
};
use crate::verify::{self, ChainTracker, Expected, Report};

/// One chain: its records and the tracker that checked them.
#[derive(Debug)]
struct Chain<R> {
    records: Vec<R>,
    tracker: ChainTracker,
}

impl<R> Chain<R> {
    fn new(family: Family, chain_id: &ChainId) -> Self {
        Self {
            records: Vec::new(),
            tracker: ChainTracker::new(family, chain_id.clone()),
        }
    }
}

/// Everything the store holds, behind its one lock.
#[derive(Debug, Default)]
struct State {
    evidence: BTreeMap<ChainId, Chain<EvidenceRecord>>,
    journals: BTreeMap<ChainId, Chain<JournalRecord>>,
    idempotency: HashMap<Digest, OperationRef>,
    approvals: HashMap<ApprovalId, OperationRef>,
    /// Each record-id prefix and the one chain whose records it starts (bound by its first
    /// record).
    record_ids: HashMap<(Family, [u8; 16]), ChainId>,
}

impl State {
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

    /// Appends an evidence record: sealed on its chain's head, checked by the chain's tracker
    /// and the indexes, then stored. Nothing changes unless every check passes.
    fn append(
        &mut self,
        entry: &EvidenceAppend,
        prepared: Result<PreparedEvidence, EvidenceError>,
    ) -> Result<AppendReceipt, EvidenceError> {
        let empty;
        let tracker = match self.evidence.get(&entry.chain_id) {
            Some(chain) => &chain.tracker,
            None => {
                empty = ChainTracker::new(Family::Evidence, entry.chain_id.clone());
                &empty
            }
        };
        let sealed = Sealed::check(tracker, entry, prepared)?;
        if let Some(key) = &sealed.index.idempotency_key_digest
            && let Some(existing) = self.idempotency.get(key)
        {
            return Err(store::duplicate_key(existing));
        }
        if let Some(approval) = &sealed.index.approval_id
            && let Some(existing) = self.approvals.get(approval)
        {
            return Err(store::approval_used(existing));
        }
        if sealed.seal.sequence == 0 {
            self.claim_record_ids(Family::Evidence, &entry.chain_id)?;
        }
        if let Some(op) = sealed.operation_ref(entry) {
            if let Some(key) = sealed.index.idempotency_key_digest.clone() {
                self.idempotency.insert(key, op.clone());
            }
            if let Some(approval) = sealed.index.approval_id.clone() {
                self.approvals.insert(approval, op);
            }
        }
        let chain = self
            .evidence
            .entry(entry.chain_id.clone())
            .or_insert_with(|| Chain::new(Family::Evidence, &entry.chain_id));
        let (receipt, seal, payload, _) = sealed.apply(&mut chain.tracker, entry);
        let a = AppendFields::evidence(entry);
        chain
            .records
            .push(seal.into_record(&a, entry.record_type, payload).into());
        Ok(receipt)
    }
}

/// Evidence in memory. Appends are checked exactly as the SQLite store checks them; nothing
/// survives the process.
///
/// ```
/// use warden_evidence::{MemoryStore, TaskBoundary};
/// let store = MemoryStore::new();
/// assert!(store.chain_ids().is_empty());
/// # let _ = TaskBoundary::new("t-1");
/// ```
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
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

    /// Appends one record (synchronously).
    pub fn append_sync(&self, entry: &EvidenceAppend) -> Result<AppendReceipt, EvidenceError> {
        let prepared = record::prepare_parsed(entry);
        lock(&self.state).append(entry, prepared)
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
        lock(&self.state)
            .evidence
            .get(chain)
            .map(|c| c.records.iter().skip(start).take(limit).cloned().collect())
            .unwrap_or_default()
    }

    /// The chain's head.
    pub fn head_sync(&self, chain: &ChainId) -> Option<ChainHead> {
        lock(&self.state)
            .evidence
            .get(chain)
            .and_then(|c| c.tracker.head().cloned())
    }

    /// Every evidence chain id, sorted.
    pub fn chain_ids(&self) -> Vec<ChainId> {
        lock(&self.state).evidence.keys().cloned().collect()
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
    ) -> AppendFuture<'async_trait>
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
    fn append_typed(&self, append: TypedAppend, expected_sequence: u64) -> AppendFuture<'_> {
        let (entry, payload) = append.split(expected_sequence);
        let prepared =
            record::prepare_typed(&AppendFields::evidence(&entry), entry.record_type, payload);
        let result = lock(&self.state).append(&entry, prepared);
        Box::pin(async move { result })
    }

    async fn chains(&self) -> Result<Vec<ChainId>, EvidenceError> {
        Ok(self.chain_ids())
    }

    async fn find_idempotency_key(
        &self,
        key_digest: &Digest,
    ) -> Result<Option<OperationRef>, EvidenceError> {
        Ok(lock(&self.state).idempotency.get(key_digest).cloned())
    }

    async fn find_approval_use(
        &self,
        approval_id: &ApprovalId,
    ) -> Result<Option<OperationRef>, EvidenceError> {
        Ok(lock(&self.state).approvals.get(approval_id).cloned())
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
        let prepared = journal::prepare_journal(&entry);
        let mut state = lock(&self.state);
        let a = entry.fields();
        let head = state
            .journals
            .get(&entry.chain_id)
            .and_then(|j| j.tracker.head());
        let seal = record::seal_on(&a, prepared.as_ref(), head)?;
        let payload = prepared?;
        if seal.sequence == 0 {
            state.claim_record_ids(Family::Journal, &entry.chain_id)?;
        }
        let j = state
            .journals
            .entry(entry.chain_id.clone())
            .or_insert_with(|| Chain::new(Family::Journal, &entry.chain_id));
        let fields = seal.fields(&a, &payload);
        j.tracker
            .check_sealed_journal(&fields)
            .map_err(|f| store::refused(&f))?;
        j.tracker.accept_sealed_journal(&fields, &seal.chain_hash);
        let receipt = seal.receipt(&entry.chain_id);
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
        Ok(lock(&self.state)
            .journals
            .get(chain)
            .map(|j| j.records.iter().skip(start).take(limit).cloned().collect())
            .unwrap_or_default())
    }

    fn journal_head(&self, chain: &ChainId) -> Result<Option<ChainHead>, EvidenceError> {
        Ok(lock(&self.state)
            .journals
            .get(chain)
            .and_then(|j| j.tracker.head().cloned()))
    }

    fn journal_chains(&self) -> Result<Vec<ChainId>, EvidenceError> {
        Ok(lock(&self.state).journals.keys().cloned().collect())
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
    use warden_contracts::{RecordType, Timestamp};

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
        lock(&store.state).record_ids.insert(
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
            lock(&store.state)
                .claim_record_ids(Family::Evidence, &ChainId::new("bystander").unwrap())
                .is_ok()
        );
    }
}
