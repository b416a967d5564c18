//! The projection in SQLite (the tables of docs/evidence.md, in the evidence store's file or
//! another); behind the `sqlite` feature, like the store.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};
use warden_contracts::{ChainHead, ChainId, EvidenceRecord, OperationId, RecordId};

use crate::fault;
use crate::projection::*;

/// The states as the projection tables spell them.
impl AttemptState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::Denied => "denied",
            Self::Escalated => "escalated",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::TimedOut => "timed_out",
            Self::Ambiguous => "ambiguous",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        [
            Self::Started,
            Self::Denied,
            Self::Escalated,
            Self::Completed,
            Self::Failed,
            Self::Cancelled,
            Self::TimedOut,
            Self::Ambiguous,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }
}

impl RunState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Closed => "closed",
            Self::Abandoned => "abandoned",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        [Self::Open, Self::Closed, Self::Abandoned]
            .into_iter()
            .find(|x| x.as_str() == s)
    }
}

/// Projections in SQLite (the tables of docs/evidence.md; the evidence store's file or another).
pub struct SqliteProjection {
    path: PathBuf,
    conn: Connection,
}

impl std::fmt::Debug for SqliteProjection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteProjection")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn store_err(e: &rusqlite::Error) -> ProjectionError {
    ProjectionError::Store(e.to_string())
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn u64_of(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl SqliteProjection {
    /// Opens (creating if needed) a projection store at `path`: an evidence store file (the
    /// tables live beside the records) or a file of its own.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, crate::Error> {
        let path = path.as_ref().to_owned();
        // Creating a store initializes the schema (projection tables included).
        drop(crate::SqliteStore::open(&path)?);
        let conn = Connection::open(&path).map_err(|e| crate::Error::sqlite(&path, &e))?;
        let timeout = std::time::Duration::from_secs(5);
        conn.busy_timeout(timeout)
            .map_err(|e| crate::Error::sqlite(&path, &e))?;
        crate::sqlite::enable_wal(&conn, &path, timeout)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(|e| crate::Error::sqlite(&path, &e))?;
        Ok(Self { path, conn })
    }

    fn load_run(&self, chain: &ChainId) -> Result<Option<ProjectedRun>, ProjectionError> {
        self.conn
            .prepare_cached(
                "SELECT task_boundary_id, state, operations, open_operations, exceptions, last_sequence \
                 FROM projection_runs WHERE projection_version = ?1 AND chain_id = ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![PROJECTION_VERSION, chain.as_str()], |row| {
                    Ok(ProjectedRun {
                        chain_id: chain.clone(),
                        task_boundary_id: row.get(0)?,
                        state: RunState::parse(&row.get::<_, String>(1)?).unwrap_or(RunState::Open),
                        operations: u64_of(row.get(2)?),
                        open_operations: u64_of(row.get(3)?),
                        exceptions: u64_of(row.get(4)?),
                        last_sequence: u64_of(row.get(5)?),
                    })
                })
                .optional()
            })
            .map_err(|e| store_err(&e))
    }

    fn load_attempt(
        &self,
        chain: &ChainId,
        op: &OperationId,
    ) -> Result<Option<ProjectedAttempt>, ProjectionError> {
        self.conn
            .prepare_cached(
                "SELECT request_id, action, state, gates, denies, exceptions, call_executed, \
                 terminal_record_id, started_sequence, updated_sequence FROM projection_attempts \
                 WHERE projection_version = ?1 AND chain_id = ?2 AND operation_id = ?3",
            )
            .and_then(|mut s| {
                s.query_row(
                    params![PROJECTION_VERSION, chain.as_str(), op.as_str()],
                    |row| Ok(attempt_row(chain.clone(), op.clone(), row)),
                )
                .optional()
            })
            .map_err(|e| store_err(&e))?
            .transpose()
    }

    fn apply_in_tx(
        &self,
        chain: &ChainId,
        records: &[EvidenceRecord],
        advance_cursor: bool,
    ) -> Result<ProjectionReport, ProjectionError> {
        let mut report = ProjectionReport::default();
        for r in records {
            let stored: Option<String> = self
                .conn
                .prepare_cached(
                    "SELECT record_digest FROM projection_applied WHERE chain_id = ?1 AND record_id = ?2 AND projection_version = ?3",
                )
                .and_then(|mut s| {
                    s.query_row(
                        params![chain.as_str(), r.record_id.as_str(), PROJECTION_VERSION],
                        |row| row.get(0),
                    )
                    .optional()
                })
                .map_err(|e| store_err(&e))?;
            match stored {
                Some(d) if d == r.chain_hash.as_str() => {
                    report.duplicates += 1;
                    continue;
                }
                Some(d) => {
                    return Err(ProjectionError::Conflict {
                        chain_id: chain.clone(),
                        record_id: r.record_id.clone(),
                        stored: d,
                        offered: r.chain_hash.to_string(),
                    });
                }
                None => {}
            }
            let current = match &r.operation_id {
                Some(op) => self.load_attempt(chain, op)?,
                None => None,
            };
            let (run, attempt) = step(self.load_run(chain)?, current, r);
            self.conn
                .prepare_cached(
                    "INSERT OR REPLACE INTO projection_runs (projection_version, chain_id, task_boundary_id, state, operations, open_operations, exceptions, last_sequence) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        PROJECTION_VERSION,
                        chain.as_str(),
                        run.task_boundary_id,
                        run.state.as_str(),
                        i64_of(run.operations),
                        i64_of(run.open_operations),
                        i64_of(run.exceptions),
                        i64_of(run.last_sequence),
                    ])
                })
                .map_err(|e| store_err(&e))?;
            if let Some(a) = attempt {
                self.conn
                    .prepare_cached(
                        "INSERT OR REPLACE INTO projection_attempts (projection_version, chain_id, operation_id, request_id, action, state, gates, denies, exceptions, call_executed, terminal_record_id, started_sequence, updated_sequence) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                    )
                    .and_then(|mut s| {
                        s.execute(params![
                            PROJECTION_VERSION,
                            chain.as_str(),
                            a.operation_id.as_str(),
                            a.request_id,
                            a.action,
                            a.state.as_str(),
                            i64_of(a.gates),
                            i64_of(a.denies),
                            i64_of(a.exceptions),
                            a.call_executed,
                            a.terminal_record_id.as_ref().map(RecordId::as_str),
                            i64_of(a.started_sequence),
                            i64_of(a.updated_sequence),
                        ])
                    })
                    .map_err(|e| store_err(&e))?;
            }
            self.conn
                .prepare_cached(
                    "INSERT INTO projection_applied (chain_id, record_id, projection_version, record_digest) VALUES (?1, ?2, ?3, ?4)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        chain.as_str(),
                        r.record_id.as_str(),
                        PROJECTION_VERSION,
                        r.chain_hash.as_str()
                    ])
                })
                .map_err(|e| store_err(&e))?;
            report.applied += 1;
        }
        if advance_cursor && let Some(last) = records.last() {
            self.conn
                .prepare_cached(
                    "INSERT INTO projection_cursor (projection_version, chain_id, last_sequence, last_chain_hash) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (projection_version, chain_id) DO UPDATE SET last_sequence = excluded.last_sequence, last_chain_hash = excluded.last_chain_hash \
                     WHERE excluded.last_sequence > projection_cursor.last_sequence",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        PROJECTION_VERSION,
                        chain.as_str(),
                        i64_of(last.sequence),
                        last.chain_hash.as_str()
                    ])
                })
                .map_err(|e| store_err(&e))?;
        }
        Ok(report)
    }
}

fn attempt_row(
    chain: ChainId,
    op: OperationId,
    row: &rusqlite::Row<'_>,
) -> Result<ProjectedAttempt, ProjectionError> {
    let get = |e: rusqlite::Error| store_err(&e);
    Ok(ProjectedAttempt {
        chain_id: chain,
        operation_id: op,
        request_id: row.get(0).map_err(get)?,
        action: row.get(1).map_err(get)?,
        state: AttemptState::parse(&row.get::<_, String>(2).map_err(get)?)
            .ok_or_else(|| ProjectionError::Store("unknown attempt state".into()))?,
        gates: u64_of(row.get(3).map_err(get)?),
        denies: u64_of(row.get(4).map_err(get)?),
        exceptions: u64_of(row.get(5).map_err(get)?),
        call_executed: row.get(6).map_err(get)?,
        terminal_record_id: row
            .get::<_, Option<String>>(7)
            .map_err(get)?
            .map(RecordId::new)
            .transpose()
            .map_err(|e| ProjectionError::Store(e.to_string()))?,
        started_sequence: u64_of(row.get(8).map_err(get)?),
        updated_sequence: u64_of(row.get(9).map_err(get)?),
    })
}

impl ProjectionTarget for SqliteProjection {
    fn cursor(&mut self, chain: &ChainId) -> Result<Option<ChainHead>, ProjectionError> {
        let row: Option<(i64, String)> = self
            .conn
            .prepare_cached(
                "SELECT last_sequence, last_chain_hash FROM projection_cursor WHERE projection_version = ?1 AND chain_id = ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![PROJECTION_VERSION, chain.as_str()], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()
            })
            .map_err(|e| store_err(&e))?;
        row.map(|(s, h)| {
            Ok(ChainHead {
                chain_id: chain.clone(),
                sequence: u64_of(s),
                chain_hash: h
                    .parse()
                    .map_err(|_| ProjectionError::Store("malformed cursor hash".into()))?,
            })
        })
        .transpose()
    }

    fn apply(
        &mut self,
        chain: &ChainId,
        records: &[EvidenceRecord],
        advance_cursor: bool,
    ) -> Result<ProjectionReport, ProjectionError> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| store_err(&e))?;
        let result = self
            .apply_in_tx(chain, records, advance_cursor)
            .and_then(|r| {
                fault::point("projection.before_commit")
                    .map_err(|f| ProjectionError::Store(format!("injected fault at {}", f.0)))?;
                self.conn
                    .execute_batch("COMMIT")
                    .map_err(|e| store_err(&e))?;
                Ok(r)
            });
        match result {
            Ok(r) => {
                let _ = fault::point("projection.after_commit");
                Ok(r)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                if let ProjectionError::Conflict {
                    chain_id,
                    record_id,
                    stored,
                    offered,
                } = &e
                {
                    // Recorded for an operator, outside the rolled-back transaction.
                    let _ = self.conn.execute(
                        "INSERT OR REPLACE INTO projection_conflicts (projection_version, chain_id, record_id, stored_digest, offered_digest) VALUES (?1, ?2, ?3, ?4, ?5)",
                        params![PROJECTION_VERSION, chain_id.as_str(), record_id.as_str(), stored, offered],
                    );
                    tracing::error!(chain = %chain_id, record = %record_id, "projection conflict: failing closed");
                }
                Err(e)
            }
        }
    }

    fn runs(&mut self) -> Result<Vec<ProjectedRun>, ProjectionError> {
        let chains: Vec<String> = self
            .conn
            .prepare("SELECT chain_id FROM projection_runs WHERE projection_version = ?1 ORDER BY chain_id")
            .and_then(|mut s| {
                s.query_map([PROJECTION_VERSION], |r| r.get(0))?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|e| store_err(&e))?;
        let mut out = Vec::new();
        for c in chains {
            let chain = ChainId::new(c).map_err(|e| ProjectionError::Store(e.to_string()))?;
            out.extend(self.load_run(&chain)?);
        }
        Ok(out)
    }

    fn attempts(&mut self) -> Result<Vec<ProjectedAttempt>, ProjectionError> {
        let keys: Vec<(String, String)> = self
            .conn
            .prepare("SELECT chain_id, operation_id FROM projection_attempts WHERE projection_version = ?1 ORDER BY chain_id, operation_id")
            .and_then(|mut s| {
                s.query_map([PROJECTION_VERSION], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|e| store_err(&e))?;
        let mut out = Vec::new();
        for (c, o) in keys {
            let chain = ChainId::new(c).map_err(|e| ProjectionError::Store(e.to_string()))?;
            let op = OperationId::new(o).map_err(|e| ProjectionError::Store(e.to_string()))?;
            out.extend(self.load_attempt(&chain, &op)?);
        }
        Ok(out)
    }

    fn conflicts(&mut self) -> Result<Vec<(ChainId, RecordId, String, String)>, ProjectionError> {
        let rows: Vec<(String, String, String, String)> = self
            .conn
            .prepare("SELECT chain_id, record_id, stored_digest, offered_digest FROM projection_conflicts WHERE projection_version = ?1 ORDER BY chain_id, record_id")
            .and_then(|mut s| {
                s.query_map([PROJECTION_VERSION], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|e| store_err(&e))?;
        rows.into_iter()
            .map(|(c, r, s, o)| {
                Ok((
                    ChainId::new(c).map_err(|e| ProjectionError::Store(e.to_string()))?,
                    RecordId::new(r).map_err(|e| ProjectionError::Store(e.to_string()))?,
                    s,
                    o,
                ))
            })
            .collect()
    }
}
