//! A governed run of a CLI command against a SQLite evidence store (`warden exec --evidence`,
//! `warden mcp proxy --evidence`): the store, the run's task boundary (its own chain), and,
//! at start, recovery of the boundaries runs that crashed left open.
//!
//! Every run holds `PATH.exec-lock` shared for its whole life; a starting run that can take it
//! exclusively knows no run is in progress and asks its runtime's governed start-up
//! (`warden_executor::Governed`) to recover: each open boundary of a run's chain (`exec-…`,
//! `mcp-proxy-…`) is resumed (the chain must verify), its open operations closed by recovery
//! (never re-invoked), and the boundary closed as abandoned, unless a process the run's
//! backend recorded (`PATH.exec-runs/CHAIN/`) may still be running.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use warden_contracts::{ChainId, RuntimeProfile};
use warden_evidence::{GovernedStore, SqliteStore, record_type_str};
use warden_executor::{Governed, Runtime, StartupRecovery};
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

/// A governed run's store and chain, and what its start-up recovered.
pub(crate) struct EvidenceRun {
    pub(crate) path: PathBuf,
    pub(crate) chain: ChainId,
    store: Arc<dyn GovernedStore>,
    /// No other run is in progress: this one's start-up recovers crashed runs' chains.
    recovers: bool,
    pub(crate) recovered: Vec<Value>,
    /// Held (exclusively while this run recovers, then shared) for the whole run: another run
    /// recovers open boundaries only when it can take it exclusively, i.e. when no run is in
    /// progress.
    lock: std::fs::File,
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

/// Opens the store at `path` for the run whose chain is `name`, and takes the run lock:
/// exclusively when no run is in progress (this run's start-up then recovers), else shared.
pub(crate) fn open_evidence(path: &Path, name: &str) -> Result<EvidenceRun, CliError> {
    let store: Arc<dyn GovernedStore> =
        Arc::new(SqliteStore::open(path).map_err(|e| evidence_input(path, e))?);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(lock_path(path))
        .map_err(|e| evidence_input(path, format!("lock file: {e}")))?;
    let recovers = match lock.try_lock() {
        Ok(()) => true,
        Err(std::fs::TryLockError::WouldBlock) => {
            lock.lock_shared()
                .map_err(|e| evidence_input(path, format!("lock file: {e}")))?;
            false
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(evidence_input(path, format!("lock file: {e}")));
        }
    };
    Ok(EvidenceRun {
        path: path.to_owned(),
        chain: ChainId::new(name).map_err(|e| evidence_input(path, e))?,
        store,
        recovers,
        recovered: Vec::new(),
        lock,
    })
}

impl EvidenceRun {
    /// The profile of a CLI run's boundary: closed at the end, so it can be certified.
    pub(crate) const PROFILE: RuntimeProfile = RuntimeProfile::Certifiable;

    /// The run's governance (profile `certifiable`: its boundary is closed at the end): when
    /// no other run is in progress, start-up closes the boundaries crashed runs left open
    /// (`exec-…`, `mcp-proxy-…`), except one whose call may still be running (a process the
    /// backend recorded, or one carrying its record's token, is alive): an operation is never
    /// closed while its process may still have effects.
    pub(crate) fn governed(&self) -> Governed {
        let mut governed =
            Governed::new(Arc::clone(&self.store), self.chain.as_str()).profile(Self::PROFILE);
        if self.recovers {
            let path = self.path.clone();
            governed = RUN_CHAINS
                .iter()
                .fold(governed, |g, prefix| g.recover_chains(*prefix))
                .still_running(Arc::new(move |chain: &ChainId| still_running(&path, chain)));
        }
        governed
    }

    /// After the runtime started: says what its start-up recovered, drops the process records
    /// of the chains it closed, and lets other runs start (the lock goes shared).
    pub(crate) fn started(&mut self, runtime: &Runtime) -> Result<(), CliError> {
        for r in runtime.recovered() {
            match r {
                StartupRecovery::Closed { chain, operations } => {
                    // Its records name only processes that have ended.
                    let _ = std::fs::remove_dir_all(records_dir(&self.path, chain.as_str()));
                    eprintln!(
                        "warden: recovered chain {chain} left open by an interrupted run: {} operation(s) closed, boundary abandoned",
                        operations.len()
                    );
                    if operations.is_empty() {
                        self.recovered.push(
                            json!({"chain_id": chain, "operation_id": null, "terminal": null}),
                        );
                    }
                    for o in operations {
                        self.recovered.push(json!({
                            "chain_id": chain,
                            "operation_id": o.operation_id,
                            "terminal": record_type_str(o.terminal),
                        }));
                    }
                }
                StartupRecovery::LeftOpen { chain, why } => eprintln!(
                    "warden: chain {chain}, left open by an interrupted run, stays open: its call may still be running ({why})"
                ),
                StartupRecovery::Resumed { .. } => {}
            }
        }
        if self.recovers {
            self.recovers = false;
            let path = &self.path;
            self.lock
                .unlock()
                .map_err(|e| evidence_input(path, format!("lock file: {e}")))?;
            self.lock
                .lock_shared()
                .map_err(|e| evidence_input(path, format!("lock file: {e}")))?;
        }
        Ok(())
    }
}

/// Why an interrupted run's chain must stay open, if it must: a process its backend recorded
/// may still be running, or its records cannot be read.
fn still_running(path: &Path, chain: &ChainId) -> Option<String> {
    let records = ProcessRecords::new(records_dir(path, chain.as_str()));
    match records.survivors() {
        Ok(survivors) if survivors.is_empty() => None,
        Ok(survivors) => Some(
            survivors
                .iter()
                .map(survivor_text)
                .collect::<Vec<_>>()
                .join("; "),
        ),
        Err(e) => Some(format!("cannot read its process records: {e}")),
    }
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
