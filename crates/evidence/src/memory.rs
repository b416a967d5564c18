//! The in-memory store: the reference backend (and the fastest), nothing durable.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use warden_contracts::{
    AppendReceipt, ApprovalId, ChainHead, ChainId, Digest, EvidenceAppend, EvidenceError,
    EvidenceRecord, EvidenceStore, VerificationResult,
};

use crate::journal::{self, JournalAppend, JournalRecord};
use crate::record::{self, Family};
use crate::store::{self, GovernedStore, JournalStore, OperationRef};
use crate::verify::{self, ChainTracker, Expected, Report};

#[derive(Debug)]
struct Chain {
    records: Vec<EvidenceRecord>,
    tracker: ChainTracker,
}

#[derive(Debug)]
struct Journal {
    records: Vec<JournalRecord>,
    tracker: ChainTracker,
}

#[derive(Debug, Default)]
struct Inner {
    chains: BTreeMap<ChainId, Chain>,
    journals: BTreeMap<ChainId, Journal>,
    idempotency: HashMap<Digest, OperationRef>,
    approvals: HashMap<ApprovalId, OperationRef>,
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
    inner: Mutex<Inner>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-appended record (the record is
        // pushed last), so a poisoned lock is still consistent.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends one record (synchronously).
    pub fn append_sync(&self, entry: &EvidenceAppend) -> Result<AppendReceipt, EvidenceError> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let chain = inner
            .chains
            .entry(entry.chain_id.clone())
            .or_insert_with(|| Chain {
                records: Vec::new(),
                tracker: ChainTracker::new(Family::Evidence, entry.chain_id.clone()),
            });
        let (record, parsed) = record::seal_parsed(entry, chain.tracker.head())?;
        let index = store::index_entries(&parsed);
        let pending = chain
            .tracker
            .check_sealed(&record, parsed)
            .map_err(|f| store::refused(&f))?;
        if let Some(key) = &index.idempotency_key_digest
            && let Some(existing) = inner.idempotency.get(key)
        {
            return Err(store::duplicate_key(existing));
        }
        if let Some(approval) = &index.approval_id
            && let Some(existing) = inner.approvals.get(approval)
        {
            return Err(store::approval_used(existing));
        }
        if let Some(op) = store::operation_ref(&record) {
            if let Some(key) = index.idempotency_key_digest {
                inner.idempotency.insert(key, op.clone());
            }
            if let Some(approval) = index.approval_id {
                inner.approvals.insert(approval, op);
            }
        }
        chain.tracker.apply(&record, pending);
        let receipt = record::receipt_of(&record);
        chain.records.push(record);
        Ok(receipt)
    }

    /// Records of a chain after `after_sequence`, at most `limit`.
    pub fn read_sync(
        &self,
        chain: &ChainId,
        after_sequence: Option<u64>,
        limit: usize,
    ) -> Vec<EvidenceRecord> {
        let inner = self.lock();
        let Some(c) = inner.chains.get(chain) else {
            return Vec::new();
        };
        let start = after_sequence.map_or(0, |s| {
            usize::try_from(s.saturating_add(1)).unwrap_or(usize::MAX)
        });
        c.records.iter().skip(start).take(limit).cloned().collect()
    }

    /// The chain's head.
    pub fn head_sync(&self, chain: &ChainId) -> Option<ChainHead> {
        self.lock()
            .chains
            .get(chain)
            .and_then(|c| c.tracker.head().cloned())
    }

    /// Every evidence chain id, sorted.
    pub fn chain_ids(&self) -> Vec<ChainId> {
        self.lock().chains.keys().cloned().collect()
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
    async fn chains(&self) -> Result<Vec<ChainId>, EvidenceError> {
        Ok(self.chain_ids())
    }

    async fn find_idempotency_key(
        &self,
        key_digest: &Digest,
    ) -> Result<Option<OperationRef>, EvidenceError> {
        Ok(self.lock().idempotency.get(key_digest).cloned())
    }

    async fn find_approval_use(
        &self,
        approval_id: &ApprovalId,
    ) -> Result<Option<OperationRef>, EvidenceError> {
        Ok(self.lock().approvals.get(approval_id).cloned())
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
        let mut inner = self.lock();
        let j = inner
            .journals
            .entry(entry.chain_id.clone())
            .or_insert_with(|| Journal {
                records: Vec::new(),
                tracker: ChainTracker::new(Family::Journal, entry.chain_id.clone()),
            });
        let r = journal::seal_journal(&entry, j.tracker.head())?;
        verify::ChainRecord::push_to(&r, &mut j.tracker).map_err(|f| store::refused(&f))?;
        let receipt = AppendReceipt {
            chain_id: r.chain_id.clone(),
            record_id: r.record_id.clone(),
            sequence: r.sequence,
            chain_hash: r.chain_hash.clone(),
        };
        j.records.push(r);
        Ok(receipt)
    }

    fn read_journal(
        &self,
        chain: &ChainId,
        after_sequence: Option<u64>,
        limit: usize,
    ) -> Result<Vec<JournalRecord>, EvidenceError> {
        let inner = self.lock();
        let start = after_sequence.map_or(0, |s| {
            usize::try_from(s.saturating_add(1)).unwrap_or(usize::MAX)
        });
        Ok(inner
            .journals
            .get(chain)
            .map(|j| j.records.iter().skip(start).take(limit).cloned().collect())
            .unwrap_or_default())
    }

    fn journal_head(&self, chain: &ChainId) -> Result<Option<ChainHead>, EvidenceError> {
        Ok(self
            .lock()
            .journals
            .get(chain)
            .and_then(|j| j.tracker.head().cloned()))
    }

    fn journal_chains(&self) -> Result<Vec<ChainId>, EvidenceError> {
        Ok(self.lock().journals.keys().cloned().collect())
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
