//! Projection (docs/design/evidence.md#projection-and-recovery): run and attempt state projected
//! from evidence records.
//!
//! The source is any evidence store (at-least-once: everything after the durable cursor is
//! delivered, again after a crash). Each record is applied under the idempotency key
//! `(chain_id, record_id, projection_version)`; the projection rows and the advanced cursor
//! commit in one transaction. A record delivered again is a no-op once its digest (its chain
//! hash) matches the one applied; a different digest under the same key is a conflict: the
//! projection fails closed, records the conflict for an operator, and applies nothing more of
//! that chain.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warden_contracts::{
    ChainHead, ChainId, EvidenceError, EvidenceRecord, EvidenceStore, OperationId, RecordId,
};

use crate::fault;
use crate::payload::{self, CloseDisposition, DenialKind, GateVerdict, Payload};
use crate::record::{self, Fields};
use crate::store::GovernedStore;

/// The projection's version: part of every idempotency key. Bump it when the projection's
/// meaning changes; a new version projects every chain again from its start.
pub const PROJECTION_VERSION: u32 = 1;

/// An attempt's (operation's) projected state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptState {
    /// Started; no terminal record yet.
    Started,
    /// `operation_denied` (deny).
    Denied,
    /// `operation_denied` (escalate).
    Escalated,
    /// `callable_completed`.
    Completed,
    /// `callable_failed`.
    Failed,
    /// `operation_cancelled`.
    Cancelled,
    /// `operation_timed_out`.
    TimedOut,
    /// `external_result_ambiguous`.
    Ambiguous,
}

/// A run's (task boundary's) projected state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Not closed.
    Open,
    /// Closed as completed.
    Closed,
    /// Closed as abandoned.
    Abandoned,
}

/// One run (chain) as projected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectedRun {
    /// The chain.
    pub chain_id: ChainId,
    /// Its task boundary.
    pub task_boundary_id: String,
    /// Open, closed or abandoned.
    pub state: RunState,
    /// Operations started.
    pub operations: u64,
    /// Operations without a terminal record.
    pub open_operations: u64,
    /// Exceptions granted.
    pub exceptions: u64,
    /// The last projected record's sequence.
    pub last_sequence: u64,
}

/// One attempt (governed operation) as projected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectedAttempt {
    /// The chain.
    pub chain_id: ChainId,
    /// The operation.
    pub operation_id: OperationId,
    /// Its request.
    pub request_id: String,
    /// Its action.
    pub action: String,
    /// Its state.
    pub state: AttemptState,
    /// Gate evaluations.
    pub gates: u64,
    /// Of which denies.
    pub denies: u64,
    /// Exceptions granted.
    pub exceptions: u64,
    /// Whether the callable was reached (`None`: unknown or not yet).
    pub call_executed: Option<bool>,
    /// Its terminal record.
    pub terminal_record_id: Option<RecordId>,
    /// Its `operation_started` sequence.
    pub started_sequence: u64,
    /// The last sequence that changed it.
    pub updated_sequence: u64,
}

/// What a projection pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProjectionReport {
    /// Records applied.
    pub applied: u64,
    /// Records delivered again and skipped after their digest matched.
    pub duplicates: u64,
}

impl ProjectionReport {
    fn add(&mut self, o: Self) {
        self.applied += o.applied;
        self.duplicates += o.duplicates;
    }
}

/// Why a projection pass stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProjectionError {
    /// A record was already projected with another digest: fail closed, operator attention.
    #[error(
        "projection conflict on chain {chain_id}, record {record_id}: projected with digest {stored}, offered {offered}"
    )]
    Conflict {
        /// The chain.
        chain_id: ChainId,
        /// The record.
        record_id: RecordId,
        /// The digest projected earlier.
        stored: String,
        /// The digest offered now.
        offered: String,
    },
    /// A source record does not chain onto what was projected (altered or out of order).
    #[error(
        "record at sequence {sequence} of chain {chain_id} does not chain onto the projection: {detail}"
    )]
    Broken {
        /// The chain.
        chain_id: ChainId,
        /// The sequence.
        sequence: u64,
        /// Why.
        detail: String,
    },
    /// The source failed.
    #[error("evidence source: {0}")]
    Source(#[from] EvidenceError),
    /// The projection store failed (nothing of the pass was committed).
    #[error("projection store: {0}")]
    Store(String),
}

/// Where projections are committed: rows and cursor in one transaction.
pub trait ProjectionTarget: Send {
    /// The last record projected by the cursor (the cursor never moves backwards).
    fn cursor(&mut self, chain: &ChainId) -> Result<Option<ChainHead>, ProjectionError>;
    /// Applies consecutive records of one chain in one transaction, each under its idempotency
    /// key; moves the cursor to the last one when `advance_cursor`. A conflict applies nothing.
    fn apply(
        &mut self,
        chain: &ChainId,
        records: &[EvidenceRecord],
        advance_cursor: bool,
    ) -> Result<ProjectionReport, ProjectionError>;
    /// Every projected run, by chain.
    fn runs(&mut self) -> Result<Vec<ProjectedRun>, ProjectionError>;
    /// Every projected attempt, by chain and operation.
    fn attempts(&mut self) -> Result<Vec<ProjectedAttempt>, ProjectionError>;
    /// Conflicts recorded for an operator: (chain, record, stored digest, offered digest).
    fn conflicts(&mut self) -> Result<Vec<(ChainId, RecordId, String, String)>, ProjectionError>;
}

/// The projection of one record onto the current run and attempt rows.
pub(crate) fn step(
    run: Option<ProjectedRun>,
    attempt: Option<ProjectedAttempt>,
    r: &EvidenceRecord,
) -> (ProjectedRun, Option<ProjectedAttempt>) {
    let mut run = run.unwrap_or_else(|| ProjectedRun {
        chain_id: r.chain_id.clone(),
        task_boundary_id: String::new(),
        state: RunState::Open,
        operations: 0,
        open_operations: 0,
        exceptions: 0,
        last_sequence: r.sequence,
    });
    run.last_sequence = r.sequence;
    let value: Value = serde_json::from_str(&r.payload_json).unwrap_or(Value::Null);
    let Ok(parsed) = payload::parse(r.record_type, &value) else {
        return (run, attempt);
    };
    let mut attempt = attempt;
    let terminal = |a: &mut Option<ProjectedAttempt>, state, call: Option<bool>| {
        if let Some(a) = a.as_mut() {
            a.state = state;
            a.call_executed = call;
            a.terminal_record_id = Some(r.record_id.clone());
        }
    };
    match parsed {
        Payload::PolicyBound(p) if r.sequence == 0 => {
            run.task_boundary_id = p.task_boundary_id.to_string();
        }
        Payload::OperationStarted(p) => {
            run.operations += 1;
            run.open_operations += 1;
            if let Some(op) = &r.operation_id {
                attempt = Some(ProjectedAttempt {
                    chain_id: r.chain_id.clone(),
                    operation_id: op.clone(),
                    request_id: p.request_id.to_string(),
                    action: p.action.to_string(),
                    state: AttemptState::Started,
                    gates: 0,
                    denies: 0,
                    exceptions: 0,
                    call_executed: None,
                    terminal_record_id: None,
                    started_sequence: r.sequence,
                    updated_sequence: r.sequence,
                });
            }
        }
        Payload::GateEvaluated(g) => {
            if let Some(a) = attempt.as_mut() {
                a.gates += 1;
                a.denies += u64::from(g.verdict == GateVerdict::Deny);
            }
        }
        Payload::ExceptionGranted(_) => {
            run.exceptions += 1;
            if let Some(a) = attempt.as_mut() {
                a.exceptions += 1;
            }
        }
        Payload::OperationDenied(d) => {
            let s = if d.disposition == DenialKind::Escalate {
                AttemptState::Escalated
            } else {
                AttemptState::Denied
            };
            terminal(&mut attempt, s, Some(false));
        }
        Payload::CallableCompleted(_) => {
            terminal(&mut attempt, AttemptState::Completed, Some(true))
        }
        Payload::CallableFailed(f) => {
            terminal(&mut attempt, AttemptState::Failed, Some(f.call_executed));
        }
        Payload::OperationCancelled(c) => {
            terminal(&mut attempt, AttemptState::Cancelled, Some(c.call_executed));
        }
        Payload::OperationTimedOut(t) => {
            terminal(&mut attempt, AttemptState::TimedOut, Some(t.call_executed));
        }
        Payload::ExternalResultAmbiguous(_) => {
            terminal(&mut attempt, AttemptState::Ambiguous, None)
        }
        Payload::TaskClosed(c) => {
            run.state = match c.disposition {
                CloseDisposition::Completed => RunState::Closed,
                CloseDisposition::Abandoned => RunState::Abandoned,
            };
        }
        Payload::PolicyBound(_) | Payload::RecordSuperseded(_) => {}
    }
    if r.record_type.is_terminal() {
        run.open_operations = run.open_operations.saturating_sub(1);
    }
    if let Some(a) = attempt.as_mut()
        && r.operation_id.as_ref() == Some(&a.operation_id)
    {
        a.updated_sequence = r.sequence;
    }
    (run, attempt)
}

/// Projections in memory (tests, and the reference for convergence).
#[derive(Debug, Default)]
pub struct MemoryProjection {
    applied: HashMap<(ChainId, RecordId, u32), String>,
    cursors: HashMap<ChainId, ChainHead>,
    runs: BTreeMap<ChainId, ProjectedRun>,
    attempts: BTreeMap<(ChainId, OperationId), ProjectedAttempt>,
    conflicts: Vec<(ChainId, RecordId, String, String)>,
}

impl MemoryProjection {
    /// An empty projection.
    pub fn new() -> Self {
        Self::default()
    }
}

impl ProjectionTarget for MemoryProjection {
    fn cursor(&mut self, chain: &ChainId) -> Result<Option<ChainHead>, ProjectionError> {
        Ok(self.cursors.get(chain).cloned())
    }

    fn apply(
        &mut self,
        chain: &ChainId,
        records: &[EvidenceRecord],
        advance_cursor: bool,
    ) -> Result<ProjectionReport, ProjectionError> {
        // Stage every change, then commit all at once (the in-memory "transaction").
        let mut runs = self.runs.clone();
        let mut attempts: HashMap<(ChainId, OperationId), ProjectedAttempt> = HashMap::new();
        let mut applied = Vec::new();
        let mut report = ProjectionReport::default();
        for r in records {
            let key = (chain.clone(), r.record_id.clone(), PROJECTION_VERSION);
            match self.applied.get(&key) {
                Some(d) if d == r.chain_hash.as_str() => {
                    report.duplicates += 1;
                    continue;
                }
                Some(d) => {
                    let c = (
                        chain.clone(),
                        r.record_id.clone(),
                        d.clone(),
                        r.chain_hash.to_string(),
                    );
                    self.conflicts.push(c.clone());
                    return Err(ProjectionError::Conflict {
                        chain_id: c.0,
                        record_id: c.1,
                        stored: c.2,
                        offered: c.3,
                    });
                }
                None => {}
            }
            let attempt_key = r.operation_id.clone().map(|op| (chain.clone(), op));
            let current = attempt_key
                .as_ref()
                .and_then(|k| attempts.get(k).or_else(|| self.attempts.get(k)).cloned());
            let (run, attempt) = step(runs.get(chain).cloned(), current, r);
            runs.insert(chain.clone(), run);
            if let (Some(k), Some(a)) = (attempt_key, attempt) {
                attempts.insert(k, a);
            }
            applied.push((key, r.chain_hash.to_string()));
            report.applied += 1;
        }
        fault::point("projection.before_commit")
            .map_err(|f| ProjectionError::Store(format!("injected fault at {}", f.0)))?;
        self.runs = runs;
        self.attempts.extend(attempts);
        self.applied.extend(applied);
        if advance_cursor
            && let Some(last) = records.last()
            && self
                .cursors
                .get(chain)
                .is_none_or(|c| c.sequence < last.sequence)
        {
            self.cursors.insert(chain.clone(), record::head_of(last));
        }
        let _ = fault::point("projection.after_commit");
        Ok(report)
    }

    fn runs(&mut self) -> Result<Vec<ProjectedRun>, ProjectionError> {
        Ok(self.runs.values().cloned().collect())
    }

    fn attempts(&mut self) -> Result<Vec<ProjectedAttempt>, ProjectionError> {
        Ok(self.attempts.values().cloned().collect())
    }

    fn conflicts(&mut self) -> Result<Vec<(ChainId, RecordId, String, String)>, ProjectionError> {
        Ok(self.conflicts.clone())
    }
}

/// Drains evidence into a projection target: everything after the durable cursor, in batches.
#[derive(Debug, Clone, Copy)]
pub struct Projector {
    /// Records per projection transaction.
    pub batch: usize,
}

impl Default for Projector {
    fn default() -> Self {
        Self { batch: 256 }
    }
}

impl Projector {
    /// Projects one chain up to its head. First checks that the record under the cursor is
    /// still the one projected (the source was not rewritten), and that every record chains
    /// onto the previous one.
    pub async fn drain(
        &self,
        source: &dyn EvidenceStore,
        target: &mut dyn ProjectionTarget,
        chain: &ChainId,
    ) -> Result<ProjectionReport, ProjectionError> {
        let mut report = ProjectionReport::default();
        let mut cursor = target.cursor(chain)?;
        if let Some(c) = &cursor {
            let at = source.read(chain, c.sequence.checked_sub(1), 1).await?;
            match at.first() {
                Some(r) if r.sequence == c.sequence && r.chain_hash == c.chain_hash => {}
                Some(r) => {
                    return Err(ProjectionError::Conflict {
                        chain_id: chain.clone(),
                        record_id: r.record_id.clone(),
                        stored: c.chain_hash.to_string(),
                        offered: r.chain_hash.to_string(),
                    });
                }
                None => {
                    return Err(ProjectionError::Broken {
                        chain_id: chain.clone(),
                        sequence: c.sequence,
                        detail: "the projected record is no longer in the source".into(),
                    });
                }
            }
        }
        loop {
            let after = cursor.as_ref().map(|c| c.sequence);
            let records = source.read(chain, after, self.batch.max(1)).await?;
            let Some(last) = records.last() else {
                break;
            };
            let mut prev = cursor.as_ref().map(|c| (c.sequence, c.chain_hash.clone()));
            for r in &records {
                let linked = match &prev {
                    None => r.sequence == 0 && r.previous_chain_hash.is_none(),
                    Some((s, h)) => {
                        r.sequence == s + 1 && r.previous_chain_hash.as_ref() == Some(h)
                    }
                };
                if !linked
                    || record::chain_hash(&Fields::of(r)).ok().as_ref() != Some(&r.chain_hash)
                {
                    return Err(ProjectionError::Broken {
                        chain_id: chain.clone(),
                        sequence: r.sequence,
                        detail: "broken link or chain hash".into(),
                    });
                }
                prev = Some((r.sequence, r.chain_hash.clone()));
            }
            report.add(target.apply(chain, &records, true)?);
            cursor = Some(record::head_of(last));
        }
        Ok(report)
    }

    /// Projects every chain of a store.
    pub async fn drain_all(
        &self,
        source: &dyn GovernedStore,
        target: &mut dyn ProjectionTarget,
    ) -> Result<ProjectionReport, ProjectionError> {
        let mut report = ProjectionReport::default();
        for chain in source.chains().await? {
            report.add(self.drain(source, target, &chain).await?);
        }
        Ok(report)
    }
}

/// The projection of a whole chain from scratch, for comparing against an incremental one.
pub fn project_from_scratch(
    records: &[EvidenceRecord],
) -> (Vec<ProjectedRun>, Vec<ProjectedAttempt>) {
    let mut p = MemoryProjection::new();
    if let Some(first) = records.first() {
        let _ = p.apply(&first.chain_id, records, true);
    }
    (
        p.runs.values().cloned().collect(),
        p.attempts.values().cloned().collect(),
    )
}
