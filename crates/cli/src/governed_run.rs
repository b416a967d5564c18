//! A governed run of a CLI command against a SQLite evidence store (`warden exec --evidence`,
//! `warden mcp proxy --evidence`): the store, the run's task boundary (its own chain), and,
//! at start, recovery of the boundaries runs that crashed left open.
//!
//! Every run holds `PATH.exec-lock` shared for its whole life; a starting run that can take it
//! exclusively knows no run is in progress and recovers: each open boundary of a run's chain
//! (`exec-…`, `mcp-proxy-…`) is resumed (the chain must verify), its open operations closed by
//! recovery (never re-invoked), and the boundary closed as abandoned, unless a process the
//! run's backend recorded (`PATH.exec-runs/CHAIN/`) may still be running.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use warden_contracts::{ChainId, RecordType, RuntimeProfile};
use warden_evidence::payload::CloseDisposition;
use warden_evidence::{GovernedStore, SqliteStore, SystemClock, record_type_str};
use warden_executor::{Governance, GovernanceBinding, PolicySnapshotBytes, TaskBoundary};
use warden_policy::PolicySnapshot;
use warden_sandbox::{ProcessRecords, Survivor};

use crate::error::CliError;

/// The chains of CLI runs, by the prefix of their names: what start-up recovery may close.
const RUN_CHAINS: [&str; 2] = ["exec-", "mcp-proxy-"];

/// A fresh id for this invocation (pid and time: unique enough on one machine).
pub(crate) fn fresh_id(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// A governed run's store, task boundary and what start-up recovered.
pub(crate) struct EvidenceRun {
    pub(crate) path: PathBuf,
    pub(crate) chain: ChainId,
    pub(crate) governance: Governance,
    pub(crate) recovered: Vec<Value>,
    /// Held shared for the whole run: another run recovers open boundaries only when it can
    /// take it exclusively, i.e. when no run is in progress.
    _lock: std::fs::File,
}

fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".exec-lock");
    PathBuf::from(name)
}

/// `PATH.exec-runs`: one folder per run, named after its chain, where the backend records the
/// processes it starts without process isolation (warden_sandbox::ProcessRecords).
pub(crate) fn runs_dir(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".exec-runs");
    PathBuf::from(name)
}

pub(crate) fn records_dir(path: &Path, chain: &str) -> PathBuf {
    runs_dir(path).join(chain)
}

fn evidence_input(path: &Path, e: impl std::fmt::Display) -> CliError {
    CliError::Input(format!("--evidence {}: {e}", path.display()))
}

/// Opens the store, recovers crashed runs when no run is in progress, and opens this run's
/// task boundary `name` (profile `certifiable`: it is closed after the call).
pub(crate) async fn open_evidence(
    path: &Path,
    name: &str,
    snapshot: &PolicySnapshot,
) -> Result<EvidenceRun, CliError> {
    let sqlite = Arc::new(SqliteStore::open(path).map_err(|e| evidence_input(path, e))?);
    let store: Arc<dyn GovernedStore> = sqlite.clone();
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(lock_path(path))
        .map_err(|e| evidence_input(path, format!("lock file: {e}")))?;
    let recovered = match lock.try_lock() {
        Ok(()) => {
            let recovered = recover_stale(path, &sqlite, &store).await;
            lock.unlock()
                .map_err(|e| evidence_input(path, format!("lock file: {e}")))?;
            lock.lock_shared()
                .map_err(|e| evidence_input(path, format!("lock file: {e}")))?;
            recovered?
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            lock.lock_shared()
                .map_err(|e| evidence_input(path, format!("lock file: {e}")))?;
            Vec::new()
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(evidence_input(path, format!("lock file: {e}")));
        }
    };
    let chain = ChainId::new(name).map_err(|e| evidence_input(path, e))?;
    let binding = GovernanceBinding {
        task_boundary: TaskBoundary::new(name).map_err(|e| evidence_input(path, e))?,
        chain_id: chain.clone(),
        policy: snapshot.reference(),
        profile: RuntimeProfile::Certifiable,
    };
    let bytes = PolicySnapshotBytes::new(snapshot.reference(), snapshot.canonical_json())
        .map_err(|e| evidence_input(path, e))?;
    let governance = Governance::open(store, binding, &bytes, Arc::new(SystemClock))
        .await
        .map_err(|e| evidence_input(path, e))?;
    Ok(EvidenceRun {
        path: path.to_owned(),
        chain,
        governance,
        recovered,
        _lock: lock,
    })
}

/// Closes the boundaries crashed `warden exec` runs left open: resume (the chain must
/// verify), recover every open operation (never re-invoked), close as abandoned. Fails closed
/// on a chain that does not verify. A boundary whose call may still be running (a process the
/// backend recorded, or one carrying its record's token, is alive) is left open, and said so: an
/// operation is never closed while its process may still have effects.
async fn recover_stale(
    path: &Path,
    sqlite: &SqliteStore,
    store: &Arc<dyn GovernedStore>,
) -> Result<Vec<Value>, CliError> {
    let mut out = Vec::new();
    for chain in sqlite.chain_ids().map_err(|e| evidence_input(path, e))? {
        if !RUN_CHAINS.iter().any(|p| chain.as_str().starts_with(p)) {
            continue;
        }
        let Some(head) = sqlite
            .head_sync(&chain)
            .map_err(|e| evidence_input(path, e))?
        else {
            continue;
        };
        let last = sqlite
            .read_sync(&chain, head.sequence.checked_sub(1), 1)
            .map_err(|e| evidence_input(path, e))?;
        if last
            .first()
            .is_some_and(|r| r.record_type == RecordType::TaskClosed)
        {
            continue;
        }
        let records = ProcessRecords::new(records_dir(path, chain.as_str()));
        let survivors = records
            .survivors()
            .map_err(|e| format!("cannot read its process records: {e}"));
        match survivors {
            Ok(survivors) if survivors.is_empty() => {}
            other => {
                let why = match other {
                    Ok(survivors) => survivors
                        .iter()
                        .map(survivor_text)
                        .collect::<Vec<_>>()
                        .join("; "),
                    Err(e) => e,
                };
                eprintln!(
                    "warden: chain {chain}, left open by an interrupted run, stays open: its call may still be running ({why})"
                );
                continue;
            }
        }
        let (governance, recovered) = Governance::resume(
            store.clone(),
            chain.clone(),
            RuntimeProfile::Certifiable,
            Arc::new(SystemClock),
        )
        .await
        .map_err(|e| evidence_input(path, format!("cannot recover chain {chain}: {e}")))?;
        governance
            .recorder()
            .close(CloseDisposition::Abandoned)
            .await
            .map_err(|e| evidence_input(path, format!("cannot close chain {chain}: {e}")))?;
        // Its records name only processes that have ended.
        let _ = std::fs::remove_dir_all(records.dir());
        eprintln!(
            "warden: recovered chain {chain} left open by an interrupted run: {} operation(s) closed, boundary abandoned",
            recovered.len()
        );
        if recovered.is_empty() {
            out.push(json!({"chain_id": chain, "operation_id": null, "terminal": null}));
        }
        for r in recovered {
            out.push(json!({
                "chain_id": chain,
                "operation_id": r.operation_id,
                "terminal": record_type_str(r.terminal),
            }));
        }
    }
    Ok(out)
}

/// A survivor, and what lets recovery close its chain.
fn survivor_text(survivor: &Survivor) -> String {
    match survivor {
        Survivor::Running { .. } => {
            format!("{survivor}; recovery closes the chain once it has ended")
        }
        Survivor::Unreadable { record } => format!(
            "{survivor}; once sure nothing of the call runs, delete it and run again ({})",
            record.display()
        ),
    }
}
