//! The SQLite store: WAL, `synchronous=FULL` by default, group commit.
//!
//! An appender's thread checks its payload against its type's schema, writes its canonical JSON
//! and runs BLAKE3 over the hash input up to `previous_chain_hash` (everything that does not
//! depend on the chain's head), then queues the append and waits. One writer thread owns the
//! write connection: it takes the queued appends (up to [`SqliteOptions::max_batch`]; while
//! fewer than its last group have come, it waits for them a moment, at most half a commit and
//! never for a lone appender), seals each on its chain's head (the rest of the hash), checks
//! it, and inserts the rows that pass eight to a statement (prepared once per transaction),
//! all inside one `BEGIN IMMEDIATE` transaction; it commits once (one fsync of the WAL) and
//! only then answers each appender with its receipt (a large group's receipts from a second
//! thread, so the writer goes on meanwhile). An append that fails its checks is answered with its error
//! and does not disturb the others; a failed commit fails them all and nothing is kept. Once a
//! group commit takes many appends (concurrent appenders), a background connection checkpoints
//! (`PASSIVE`, every 4 MiB of WAL or so) beside the writer, so commits stop waiting for
//! checkpoints; the writer's own automatic checkpoint then waits for 16 MiB of WAL and only
//! catches up with what the background has not copied, so the WAL can start over from its
//! beginning. A lone appender keeps SQLite's automatic checkpoint, every 4 MiB of WAL.
//!
//! Reads use a second connection. [`SqliteReader`] opens a store with `SQLITE_OPEN_READ_ONLY`:
//! it never creates or modifies anything. To make that true for the directory too, a closing
//! store checkpoints its WAL and switches the file back to rollback-journal mode, so reading a
//! cleanly closed store needs no `-wal`/`-shm` files (after a crash, or
//! [`SqliteStore::close_keeping_wal`], they exist and are used).
//!
//! Schema (version [`SCHEMA_VERSION`], `PRAGMA application_id` [`APPLICATION_ID`]): see
//! docs/evidence.md. The `records` table has one column per record field (*contract*).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use rusqlite::config::DbConfig;
use rusqlite::types::ValueRef;
use rusqlite::{CachedStatement, Connection, OpenFlags, OptionalExtension, Row, Statement, params};
use tokio::sync::oneshot;
use warden_contracts::{
    AppendReceipt, ApprovalId, ChainHead, ChainId, Digest, EvidenceAppend, EvidenceError,
    EvidenceRecord, EvidenceStore, OperationId, RecordId, RecordType, Timestamp,
    VerificationFailure, VerificationResult,
};

use crate::error::Error;
use crate::fault;
use crate::journal::{self, JournalAppend, JournalRecord, JournalRecordType};
use crate::payload::Payload;
use crate::record::{self, AppendFields, Family, Prepared, PreparedEvidence, Record, RecordKind};
use crate::store::{
    self, AppendFuture, GovernedStore, JournalStore, OperationRef, Sealed, TypedAppend,
};
use crate::verify::{self, ChainRecord, ChainTracker, Expected, FailureDetail, Report};

/// The embedded default store, relative to the working directory.
pub const DEFAULT_PATH: &str = ".warden/evidence.db";
/// The schema version this build writes (`PRAGMA user_version`). It reads every version from
/// [`OLDEST_SCHEMA_VERSION`] on; a writable open migrates an older store (docs/evidence.md).
pub const SCHEMA_VERSION: i64 = 3;
/// The oldest schema version this build reads (and migrates when it opens a store to write).
/// Version 1 had one more index, `records_operation`, that no query used; version 2 dropped it.
/// Version 3 keeps record ids unique with the `chains` table (one row a chain) instead of a
/// unique index on every record's id. Records, their columns and their hashes never changed.
pub const OLDEST_SCHEMA_VERSION: i64 = 1;
/// `PRAGMA application_id` of a Warden evidence store: `WARD` in ASCII.
pub const APPLICATION_ID: i64 = 0x5741_5244;

/// Which chain each record-id prefix belongs to (a chain's first record binds it). A record id
/// is its chain's prefix and its sequence, so with each prefix bound to one chain, and each
/// chain's sequences unique (the primary keys), every record id is unique.
const CHAINS: &str = r"
CREATE TABLE IF NOT EXISTS chains (
    family TEXT NOT NULL,
    chain_id TEXT NOT NULL,
    record_id_prefix TEXT NOT NULL,
    PRIMARY KEY (family, chain_id),
    UNIQUE (family, record_id_prefix)
);
";

const SCHEMA: &str = r"
CREATE TABLE idempotency_keys (
    key_digest TEXT PRIMARY KEY,
    chain_id TEXT NOT NULL,
    operation_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    sequence INTEGER NOT NULL
);
CREATE TABLE approval_uses (
    approval_id TEXT PRIMARY KEY,
    chain_id TEXT NOT NULL,
    operation_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    sequence INTEGER NOT NULL
);
CREATE TABLE projection_cursor (
    projection_version INTEGER NOT NULL,
    chain_id TEXT NOT NULL,
    last_sequence INTEGER NOT NULL,
    last_chain_hash TEXT NOT NULL,
    PRIMARY KEY (projection_version, chain_id)
);
CREATE TABLE projection_applied (
    chain_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    projection_version INTEGER NOT NULL,
    record_digest TEXT NOT NULL,
    PRIMARY KEY (chain_id, record_id, projection_version)
);
CREATE TABLE projection_runs (
    projection_version INTEGER NOT NULL,
    chain_id TEXT NOT NULL,
    task_boundary_id TEXT NOT NULL,
    state TEXT NOT NULL,
    operations INTEGER NOT NULL,
    open_operations INTEGER NOT NULL,
    exceptions INTEGER NOT NULL,
    last_sequence INTEGER NOT NULL,
    PRIMARY KEY (projection_version, chain_id)
);
CREATE TABLE projection_attempts (
    projection_version INTEGER NOT NULL,
    chain_id TEXT NOT NULL,
    operation_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    action TEXT NOT NULL,
    state TEXT NOT NULL,
    gates INTEGER NOT NULL,
    denies INTEGER NOT NULL,
    exceptions INTEGER NOT NULL,
    call_executed INTEGER,
    terminal_record_id TEXT,
    started_sequence INTEGER NOT NULL,
    updated_sequence INTEGER NOT NULL,
    PRIMARY KEY (projection_version, chain_id, operation_id)
);
CREATE TABLE projection_conflicts (
    projection_version INTEGER NOT NULL,
    chain_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    stored_digest TEXT NOT NULL,
    offered_digest TEXT NOT NULL,
    PRIMARY KEY (projection_version, chain_id, record_id)
);
";

/// The record columns, written from [`record::COLUMNS`], the one list of a record's fields.
fn columns() -> String {
    record::COLUMNS.join(", ")
}

/// The SQL type of a record column: the two counters are integers, the three optional fields
/// may be null.
fn column_type(column: &str) -> &'static str {
    match column {
        "sequence" | "created_at" => "INTEGER NOT NULL",
        "operation_id" | "previous_chain_hash" | "supersedes_record_id" => "TEXT",
        _ => "TEXT NOT NULL",
    }
}

/// The definition of a family's record table (one column per record field, keyed by chain and
/// sequence) and the triggers that make it append-only.
fn record_table(family: Family) -> String {
    let table = table_of(family);
    let columns: String = record::COLUMNS
        .iter()
        .map(|c| format!("    {c} {},\n", column_type(c)))
        .collect();
    let what = family.as_str();
    format!(
        "CREATE TABLE {table} (\n{columns}    PRIMARY KEY (chain_id, sequence)\n);\n\
         CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table}\n    \
         BEGIN SELECT RAISE(ABORT, '{what} records are append-only'); END;\n\
         CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table}\n    \
         BEGIN SELECT RAISE(ABORT, '{what} records are append-only'); END;\n"
    )
}

/// How many rows one insert statement writes: a group commit's records go in by the
/// [`ROWS_PER_INSERT`], the rest one by one (each statement's own work, opening cursors,
/// halting, resetting, is paid once per chunk). Eight measured best: the bound values of more
/// rows no longer fit SQLite's per-connection lookaside memory, and binding then allocates.
const ROWS_PER_INSERT: usize = 8;
/// Bound parameters per row: one per record field.
const FIELDS_PER_ROW: usize = record::COLUMNS.len();

/// The insert statement of `rows` rows into `table` (the same text every time, so the
/// connection's statement cache finds it prepared).
///
/// `OR FAIL`: a constraint that fails (none can: the writer checked every row) stops the
/// statement without undoing its earlier rows, and the writer then rolls the whole group back.
/// With SQLite's default (`ABORT`) a statement of several rows must be able to undo itself, so
/// SQLite keeps a statement journal in a temporary file for it, which wrote ~7 KB per record.
fn insert_sql(table: &str, rows: usize) -> String {
    let mut sql = format!("INSERT OR FAIL INTO {table} ({}) VALUES ", columns());
    for row in 0..rows {
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for field in 0..FIELDS_PER_ROW {
            if field > 0 {
                sql.push_str(", ");
            }
            sql.push('?');
            sql.push_str(&(row * FIELDS_PER_ROW + field + 1).to_string());
        }
        sql.push(')');
    }
    sql
}
const INSERT_IDEMPOTENCY_KEY: &str = "INSERT INTO idempotency_keys \
     (key_digest, chain_id, operation_id, record_id, sequence) VALUES (?1, ?2, ?3, ?4, ?5)";
const INSERT_APPROVAL_USE: &str = "INSERT INTO approval_uses \
     (approval_id, chain_id, operation_id, record_id, sequence) VALUES (?1, ?2, ?3, ?4, ?5)";

/// The table a family's records live in.
fn table_of(family: Family) -> &'static str {
    match family {
        Family::Evidence => "records",
        Family::Journal => "journal",
    }
}

/// SQLite's `synchronous` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synchronous {
    /// `FULL`: every commit is fsynced before its receipts are answered (the default).
    Full,
    /// `NORMAL`: in WAL mode a commit survives a process crash but not a power loss. Receipts are
    /// then not durable in the power-loss sense; use only where that is acceptable.
    Normal,
}

/// How a writable store is opened.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// Durability of each commit (default [`Synchronous::Full`]).
    pub synchronous: Synchronous,
    /// The most appends one group commit takes (default 4096).
    pub max_batch: usize,
    /// How long to wait for another process's lock (default 5 s).
    pub busy_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            synchronous: Synchronous::Full,
            max_batch: 4096,
            busy_timeout: Duration::from_secs(5),
        }
    }
}

/// An append on its way to the writer. Its payload was checked and canonicalized on the
/// appender's thread (`Err`: refused, reported by the writer after the sequence check); the
/// append's `payload` value was dropped there too.
enum JobOp {
    Evidence(EvidenceAppend, Result<PreparedEvidence, EvidenceError>),
    Journal(JournalAppend, Result<Prepared, EvidenceError>),
}

impl JobOp {
    fn evidence(mut entry: EvidenceAppend) -> Self {
        let prepared = record::prepare_parsed(&entry);
        entry.payload = serde_json::Value::Null;
        Self::Evidence(entry, prepared)
    }

    fn typed(append: TypedAppend, expected_sequence: u64) -> Self {
        let (entry, payload) = append.split(expected_sequence);
        let prepared =
            record::prepare_typed(&AppendFields::evidence(&entry), entry.record_type, payload);
        Self::Evidence(entry, prepared)
    }

    fn journal(mut entry: JournalAppend) -> Self {
        let prepared = journal::prepare_journal(&entry);
        entry.payload = serde_json::Value::Null;
        Self::Journal(entry, prepared)
    }
}

/// What the store and its writer thread share: group-commit counters and how to close.
#[derive(Debug, Default)]
struct Stats {
    commits: AtomicU64,
    records: AtomicU64,
    /// Close without checkpointing the WAL ([`SqliteStore::close_keeping_wal`]).
    keep_wal: AtomicBool,
}

struct Job {
    op: JobOp,
    reply: oneshot::Sender<Result<AppendReceipt, EvidenceError>>,
}

/// A writable SQLite evidence store with group commit.
pub struct SqliteStore {
    path: PathBuf,
    stats: Arc<Stats>,
    /// Read-locked to send (concurrent appenders never wait for each other here), write-locked
    /// to close.
    sender: RwLock<Option<mpsc::Sender<Job>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    reader: Mutex<Option<Connection>>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn unavailable(message: impl Into<String>) -> EvidenceError {
    EvidenceError::Unavailable {
        message: message.into(),
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Checks that `conn` is a Warden evidence store of a known schema version and returns it;
/// `Ok(None)` when it is an empty database (no tables, application id 0), ready to initialize.
///
/// The application id, the version and the tables are read by one statement, so from one
/// snapshot: a store another process is creating reads as empty or as created, never as half
/// of each (an application id of 0 beside tables would look foreign).
fn check_schema(conn: &Connection, path: &Path) -> Result<Option<i64>, Error> {
    let classify = |e: rusqlite::Error| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) => Error::NotSqlite {
            path: path.to_owned(),
        },
        _ => Error::sqlite(path, &e),
    };
    let (app, version, tables): (i64, i64, i64) = conn
        .query_row(
            "SELECT (SELECT application_id FROM pragma_application_id), \
                    (SELECT user_version FROM pragma_user_version), \
                    (SELECT count(*) FROM sqlite_master)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .map_err(classify)?;
    if app == 0 && version == 0 && tables == 0 {
        return Ok(None);
    }
    if app != APPLICATION_ID {
        return Err(Error::NotEvidenceStore {
            path: path.to_owned(),
            why: format!("application id {app:#x}, expected {APPLICATION_ID:#x}"),
        });
    }
    if !(OLDEST_SCHEMA_VERSION..=SCHEMA_VERSION).contains(&version) {
        return Err(Error::UnknownSchemaVersion {
            path: path.to_owned(),
            found: version,
            oldest: OLDEST_SCHEMA_VERSION,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(Some(version))
}

/// Switches `conn` to WAL mode. While another connection holds a lock the switch needs (one
/// creating the store, or a closing store switching the file back to rollback-journal mode),
/// SQLite answers `SQLITE_BUSY` at once, without waiting in the busy handler; so this waits and
/// tries again, for at most `timeout`.
pub(crate) fn enable_wal(conn: &Connection, path: &Path, timeout: Duration) -> Result<(), Error> {
    let deadline = Instant::now() + timeout;
    loop {
        match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0)) {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) => {
                return Err(Error::Sqlite {
                    path: path.to_owned(),
                    message: format!("cannot enable WAL (journal mode is {mode})"),
                });
            }
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(Error::sqlite(path, &e)),
        }
    }
}

/// Creates the schema of an empty database, or migrates a store of an older version, inside one
/// `BEGIN IMMEDIATE` transaction that first checks the schema again. Writers that open one new
/// file together serialize here (each waits for the write lock, within the busy timeout): the
/// first creates the store, the others find it created and change nothing. A database that is
/// not a Warden store is refused, unchanged.
fn prepare_schema(conn: &Connection, path: &Path) -> Result<(), Error> {
    let run = || -> Result<(), Error> {
        let sqlite = |e: rusqlite::Error| Error::sqlite(path, &e);
        conn.execute_batch("BEGIN IMMEDIATE").map_err(sqlite)?;
        match check_schema(conn, path)? {
            None => conn
                .execute_batch(&format!(
                    "{}{}{SCHEMA} {CHAINS} PRAGMA application_id = {APPLICATION_ID}; \
                     PRAGMA user_version = {SCHEMA_VERSION};",
                    record_table(Family::Evidence),
                    record_table(Family::Journal)
                ))
                .map_err(sqlite)?,
            Some(version) if version < SCHEMA_VERSION => migrate(conn).map_err(sqlite)?,
            Some(_) => {}
        }
        conn.execute_batch("COMMIT").map_err(sqlite)
    };
    run().inspect_err(|_| {
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
    })
}

/// Brings a store of an older schema version to [`SCHEMA_VERSION`], inside the caller's write
/// transaction; every row, and so every chain hash, stays as it was. From version 1: drop the
/// `records_operation` index (no query used it). From versions 1 and 2: create `chains` and
/// bind every stored chain's record-id prefix (their unique index on `record_id` stays:
/// dropping it would mean copying the table, and it only costs the writer time).
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch("DROP INDEX IF EXISTS records_operation;")?;
    conn.execute_batch(CHAINS)?;
    for family in [Family::Evidence, Family::Journal] {
        let table = table_of(family);
        let chains: Vec<String> = conn
            .prepare(&format!("SELECT DISTINCT chain_id FROM {table}"))?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        // A chain bound already is left as it is; a prefix bound to another chain fails the
        // migration (it cannot happen while `record_id` is unique).
        let mut insert = conn.prepare(&format!(
            "{INSERT_CHAIN} ON CONFLICT (family, chain_id) DO NOTHING"
        ))?;
        for chain in chains {
            let prefix = record::record_id_prefix(family, &chain);
            insert.execute(params![
                family.as_str(),
                chain,
                String::from_utf8_lossy(&prefix)
            ])?;
        }
    }
    conn.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION};"))
}

const INSERT_CHAIN: &str =
    "INSERT INTO chains (family, chain_id, record_id_prefix) VALUES (?1, ?2, ?3)";

/// Binds a new chain's record-id prefix to it (in the transaction of its first record),
/// refusing a chain whose record ids another chain's already start with.
fn claim_record_ids(conn: &Connection, family: Family, chain: &ChainId) -> Result<(), Step> {
    let prefix = record::record_id_prefix(family, chain.as_str());
    let prefix_text = String::from_utf8_lossy(&prefix);
    let owner: Option<String> = conn
        .prepare_cached("SELECT chain_id FROM chains WHERE family = ?1 AND record_id_prefix = ?2")
        .and_then(|mut s| {
            s.query_row(params![family.as_str(), prefix_text], |r| r.get(0))
                .optional()
        })
        .map_err(|e| Step::Fatal(db(&e)))?;
    match owner {
        Some(owner) if owner != chain.as_str() => Err(Step::Refused(store::record_ids_taken(
            chain, &prefix, &owner,
        ))),
        Some(_) => Ok(()),
        None => conn
            .prepare_cached(INSERT_CHAIN)
            .and_then(|mut s| s.execute(params![family.as_str(), chain.as_str(), prefix_text]))
            .map(|_| ())
            .map_err(|e| Step::Fatal(db(&e))),
    }
}

impl SqliteStore {
    /// Opens (creating the file and its folder if needed) the store at `path` with the default
    /// options (`synchronous=FULL`).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens the store at `path` with `options`.
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, Error> {
        let path = path.as_ref().to_owned();
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(|e| Error::Io {
                path: dir.to_owned(),
                message: e.to_string(),
            })?;
        }
        let conn = Connection::open(&path).map_err(|e| Error::sqlite(&path, &e))?;
        conn.busy_timeout(options.busy_timeout)
            .map_err(|e| Error::sqlite(&path, &e))?;
        let version = check_schema(&conn, &path)?;
        enable_wal(&conn, &path, options.busy_timeout)?;
        conn.pragma_update(None, "synchronous", synchronous_name(options.synchronous))
            .map_err(|e| Error::sqlite(&path, &e))?;
        // Empty (perhaps being created by another writer right now) or older: create or
        // migrate under the write lock, checking again there.
        if version != Some(SCHEMA_VERSION) {
            prepare_schema(&conn, &path)?;
        }
        let reader = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| Error::sqlite(&path, &e))?;
        reader
            .busy_timeout(options.busy_timeout)
            .map_err(|e| Error::sqlite(&path, &e))?;
        let (sender, receiver) = mpsc::channel();
        let stats = Arc::new(Stats::default());
        // A group commit's dirty pages (up to `max_batch` records and their index entries) fit
        // in the page cache, so none is spilled to the WAL early and written twice.
        conn.pragma_update(None, "cache_size", WRITER_CACHE_KIB)
            .map_err(|e| Error::sqlite(&path, &e))?;
        let page_size: i64 = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .map_err(|e| Error::sqlite(&path, &e))?;
        let page_size = u64::try_from(page_size).unwrap_or(0).max(512);
        conn.pragma_update(
            None,
            "wal_autocheckpoint",
            frames(CHECKPOINT_BYTES, page_size),
        )
        .map_err(|e| Error::sqlite(&path, &e))?;
        let writer = Writer {
            conn,
            stats: stats.clone(),
            path: path.clone(),
            options: options.clone(),
            evidence: HashMap::new(),
            journals: HashMap::new(),
            last_group: 1,
            commit_time: Duration::ZERO,
            page_size,
            wal_bytes: 0,
            checkpointer: None,
            notifier: None,
        };
        let handle = std::thread::Builder::new()
            .name("warden-evidence-writer".into())
            .spawn(move || writer.run(&receiver))
            .map_err(|e| Error::Io {
                path: path.clone(),
                message: format!("cannot start the writer thread: {e}"),
            })?;
        Ok(Self {
            path,
            stats,
            sender: RwLock::new(Some(sender)),
            writer: Mutex::new(Some(handle)),
            reader: Mutex::new(Some(reader)),
        })
    }

    /// The store's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Group-commit counters since opening: (commits, records committed). With concurrent
    /// appenders, commits are fewer than records: they shared transactions and fsyncs.
    pub fn commit_stats(&self) -> (u64, u64) {
        (
            self.stats.commits.load(Ordering::Relaxed),
            self.stats.records.load(Ordering::Relaxed),
        )
    }

    fn submit(&self, op: JobOp) -> oneshot::Receiver<Result<AppendReceipt, EvidenceError>> {
        let (reply, rx) = oneshot::channel();
        let job = Job { op, reply };
        let sender = self
            .sender
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let sent = match sender.as_ref() {
            Some(s) => s.send(job).map_err(|e| e.0),
            None => Err(job),
        };
        if let Err(job) = sent {
            let _ = job
                .reply
                .send(Err(unavailable("the evidence store is closed")));
        }
        rx
    }

    /// Queues an append *now* (the call enqueues before returning) and returns a future that
    /// resolves once the record's commit is durable. Appends queued in order by one caller are
    /// applied in that order, which lets a caller pipeline consecutive sequences of one chain.
    pub fn append_queued(
        &self,
        entry: EvidenceAppend,
    ) -> impl Future<Output = Result<AppendReceipt, EvidenceError>> + Send + 'static {
        self.queue(JobOp::evidence(entry))
    }

    /// Queues `op` now; the future resolves with its receipt once its commit is durable.
    fn queue(
        &self,
        op: JobOp,
    ) -> impl Future<Output = Result<AppendReceipt, EvidenceError>> + Send + 'static {
        let rx = self.submit(op);
        async move {
            rx.await
                .unwrap_or_else(|_| Err(unavailable("the evidence writer stopped")))
        }
    }

    /// Appends and blocks until the commit is durable (not from inside an async runtime).
    pub fn append_blocking(&self, entry: EvidenceAppend) -> Result<AppendReceipt, EvidenceError> {
        self.submit(JobOp::evidence(entry))
            .blocking_recv()
            .unwrap_or_else(|_| Err(unavailable("the evidence writer stopped")))
    }

    fn with_reader<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, EvidenceError>,
    ) -> Result<T, EvidenceError> {
        let guard = lock(&self.reader);
        let conn = guard
            .as_ref()
            .ok_or_else(|| unavailable("the evidence store is closed"))?;
        f(conn)
    }

    /// Records of a chain after `after_sequence`, at most `limit`.
    pub fn read_sync(
        &self,
        chain: &ChainId,
        after_sequence: Option<u64>,
        limit: usize,
    ) -> Result<Vec<EvidenceRecord>, EvidenceError> {
        self.with_reader(|c| read_valid(c, chain, after_sequence, limit))
    }

    /// The chain's head.
    pub fn head_sync(&self, chain: &ChainId) -> Result<Option<ChainHead>, EvidenceError> {
        self.with_reader(|c| head_of(c, "records", chain))
    }

    /// Every evidence chain.
    pub fn chain_ids(&self) -> Result<Vec<ChainId>, EvidenceError> {
        self.with_reader(|c| chain_ids(c, "records"))
    }

    /// Verifies a chain with the full report.
    pub fn verify_sync(
        &self,
        chain: &ChainId,
        expected: &Expected,
    ) -> Result<Report, EvidenceError> {
        self.with_reader(|c| verify_chain(c, Family::Evidence, chain, expected))
    }
}

impl SqliteStore {
    /// Closes the store cleanly, as dropping it does: waits for the queued appends, checkpoints
    /// the WAL into the database and switches the file back to rollback-journal mode, so a
    /// read-only open needs (and creates) no `-wal`/`-shm` files.
    pub fn close(self) {
        drop(self);
    }

    /// Closes the store without checkpointing its WAL: waits for the queued appends (each was
    /// answered only once durable in the WAL), then closes the connections and leaves the
    /// `-wal` and `-shm` files for the next open, exactly as a crash after the last commit
    /// would. Safe with WAL: every reader (the read-only [`SqliteReader`] included) reads
    /// committed records from the WAL, and the next writer checkpoints them. For a short-lived
    /// process that appends a few records (the Claude Code hook), this skips the checkpoint's
    /// fsyncs and the journal-mode switch of a clean close. Once the WAL holds 4 MiB, this close
    /// folds it into the database and empties it instead (a process that opens the store first
    /// forgets what was checkpointed, so a WAL kept by short-lived writers would otherwise only
    /// grow).
    pub fn close_keeping_wal(self) {
        self.stats.keep_wal.store(true, Ordering::Relaxed);
        drop(self);
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // Close the reader first: the writer closes last (checkpointing, or not, as the last
        // connection).
        drop(lock(&self.reader).take());
        drop(
            self.sender
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
        if let Some(handle) = lock(&self.writer).take() {
            let _ = handle.join();
        }
    }
}

#[async_trait]
impl EvidenceStore for SqliteStore {
    // Written out (not `async fn`) so that the append is queued when `append` is called, not
    // when the future is first polled: callers that serialize their calls get that order.
    fn append<'life0, 'async_trait>(
        &'life0 self,
        entry: EvidenceAppend,
    ) -> Pin<Box<dyn Future<Output = Result<AppendReceipt, EvidenceError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(self.append_queued(entry))
    }

    async fn read(
        &self,
        chain: &ChainId,
        after_sequence: Option<u64>,
        limit: usize,
    ) -> Result<Vec<EvidenceRecord>, EvidenceError> {
        self.read_sync(chain, after_sequence, limit)
    }

    async fn head(&self, chain: &ChainId) -> Result<Option<ChainHead>, EvidenceError> {
        self.head_sync(chain)
    }

    async fn verify(
        &self,
        chain: &ChainId,
        expected_head: Option<&ChainHead>,
    ) -> Result<VerificationResult, EvidenceError> {
        self.verify_sync(chain, &Expected::from_head(expected_head))
            .map(|r| r.result)
    }
}

#[async_trait]
impl GovernedStore for SqliteStore {
    /// Prepares on the caller's thread (the payload's check, canonical text and digest), so the
    /// writer only seals and writes.
    fn append_typed(&self, append: TypedAppend, expected_sequence: u64) -> AppendFuture<'_> {
        Box::pin(self.queue(JobOp::typed(append, expected_sequence)))
    }

    async fn chains(&self) -> Result<Vec<ChainId>, EvidenceError> {
        self.chain_ids()
    }

    async fn find_idempotency_key(
        &self,
        key_digest: &Digest,
    ) -> Result<Option<OperationRef>, EvidenceError> {
        self.with_reader(|c| find_index(c, "idempotency_keys", "key_digest", key_digest.as_str()))
    }

    async fn find_approval_use(
        &self,
        approval_id: &ApprovalId,
    ) -> Result<Option<OperationRef>, EvidenceError> {
        self.with_reader(|c| find_index(c, "approval_uses", "approval_id", approval_id.as_str()))
    }

    async fn verify_report(
        &self,
        chain: &ChainId,
        expected: &Expected,
    ) -> Result<Report, EvidenceError> {
        self.verify_sync(chain, expected)
    }
}

impl JournalStore for SqliteStore {
    fn append_journal(&self, entry: JournalAppend) -> Result<AppendReceipt, EvidenceError> {
        self.submit(JobOp::journal(entry))
            .blocking_recv()
            .unwrap_or_else(|_| Err(unavailable("the evidence writer stopped")))
    }

    fn read_journal(
        &self,
        chain: &ChainId,
        after_sequence: Option<u64>,
        limit: usize,
    ) -> Result<Vec<JournalRecord>, EvidenceError> {
        self.with_reader(|c| read_journal_valid(c, chain, after_sequence, limit))
    }

    fn journal_head(&self, chain: &ChainId) -> Result<Option<ChainHead>, EvidenceError> {
        self.with_reader(|c| head_of(c, "journal", chain))
    }

    fn journal_chains(&self) -> Result<Vec<ChainId>, EvidenceError> {
        self.with_reader(|c| chain_ids(c, "journal"))
    }

    fn verify_journal(
        &self,
        chain: &ChainId,
        expected: &Expected,
    ) -> Result<Report, EvidenceError> {
        self.with_reader(|c| verify_chain(c, Family::Journal, chain, expected))
    }
}

/// A store opened read-only (`SQLITE_OPEN_READ_ONLY`): it never creates or changes a file.
pub struct SqliteReader {
    path: PathBuf,
    conn: Connection,
}

impl std::fmt::Debug for SqliteReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteReader")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteReader {
    /// Opens an existing store read-only. A missing path is [`Error::StoreMissing`] (and is not
    /// created), a file that is not SQLite [`Error::NotSqlite`], another schema
    /// [`Error::NotEvidenceStore`] or [`Error::UnknownSchemaVersion`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref().to_owned();
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => {}
            Ok(_) => {
                return Err(Error::NotSqlite { path });
            }
            Err(_) => return Err(Error::StoreMissing { path }),
        }
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase) => Error::NotSqlite { path: path.clone() },
            _ => Error::sqlite(&path, &e),
        })?;
        if check_schema(&conn, &path)?.is_none() {
            return Err(Error::NotEvidenceStore {
                path,
                why: "the database is empty".into(),
            });
        }
        Ok(Self { path, conn })
    }

    /// The store's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every evidence chain.
    pub fn chain_ids(&self) -> Result<Vec<ChainId>, EvidenceError> {
        chain_ids(&self.conn, "records")
    }

    /// Every journal chain.
    pub fn journal_chain_ids(&self) -> Result<Vec<ChainId>, EvidenceError> {
        chain_ids(&self.conn, "journal")
    }

    /// Records of a chain (all must be readable).
    pub fn read(
        &self,
        chain: &ChainId,
        after_sequence: Option<u64>,
        limit: usize,
    ) -> Result<Vec<EvidenceRecord>, EvidenceError> {
        read_valid(&self.conn, chain, after_sequence, limit)
    }

    /// Journal records of a chain.
    pub fn read_journal(
        &self,
        chain: &ChainId,
        after_sequence: Option<u64>,
        limit: usize,
    ) -> Result<Vec<JournalRecord>, EvidenceError> {
        read_journal_valid(&self.conn, chain, after_sequence, limit)
    }

    /// A chain's head.
    pub fn head(&self, chain: &ChainId) -> Result<Option<ChainHead>, EvidenceError> {
        head_of(&self.conn, "records", chain)
    }

    /// A journal chain's head.
    pub fn journal_head(&self, chain: &ChainId) -> Result<Option<ChainHead>, EvidenceError> {
        head_of(&self.conn, "journal", chain)
    }

    /// Verifies an evidence chain.
    pub fn verify(&self, chain: &ChainId, expected: &Expected) -> Result<Report, EvidenceError> {
        verify_chain(&self.conn, Family::Evidence, chain, expected)
    }

    /// Verifies a journal chain.
    pub fn verify_journal(
        &self,
        chain: &ChainId,
        expected: &Expected,
    ) -> Result<Report, EvidenceError> {
        verify_chain(&self.conn, Family::Journal, chain, expected)
    }
}

// ---------------------------------------------------------------------------------------------
// Reading rows

fn db(e: &rusqlite::Error) -> EvidenceError {
    unavailable(format!("sqlite: {e}"))
}

fn chain_ids(conn: &Connection, table: &str) -> Result<Vec<ChainId>, EvidenceError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT DISTINCT chain_id FROM {table} ORDER BY chain_id"
        ))
        .map_err(|e| db(&e))?;
    let rows = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(|e| db(&e))?;
    let mut out = Vec::new();
    for row in rows {
        let id = row.map_err(|e| db(&e))?;
        // A chain id that is not a valid id still names a chain to verify: it fails there.
        out.push(
            ChainId::new(id.clone())
                .map_err(|_| unavailable(format!("invalid chain id `{id}` in {table}")))?,
        );
    }
    Ok(out)
}

fn head_of(
    conn: &Connection,
    table: &str,
    chain: &ChainId,
) -> Result<Option<ChainHead>, EvidenceError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT sequence, chain_hash FROM {table} WHERE chain_id = ?1 ORDER BY sequence DESC LIMIT 1"
        ))
        .map_err(|e| db(&e))?;
    let row = stmt
        .query_row([chain.as_str()], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })
        .optional()
        .map_err(|e| db(&e))?;
    row.map(|(seq, hash)| {
        Ok(ChainHead {
            chain_id: chain.clone(),
            sequence: u64::try_from(seq).map_err(|_| unavailable("negative sequence"))?,
            chain_hash: hash
                .parse()
                .map_err(|_| unavailable("malformed chain hash at the head"))?,
        })
    })
    .transpose()
}

fn find_index(
    conn: &Connection,
    table: &str,
    key_column: &str,
    key: &str,
) -> Result<Option<OperationRef>, EvidenceError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT chain_id, operation_id, record_id, sequence FROM {table} WHERE {key_column} = ?1"
        ))
        .map_err(|e| db(&e))?;
    let row = stmt
        .query_row([key], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
            ))
        })
        .optional()
        .map_err(|e| db(&e))?;
    row.map(|(c, o, r, s)| {
        Ok(OperationRef {
            chain_id: ChainId::new(c).map_err(|e| unavailable(e.to_string()))?,
            operation_id: OperationId::new(o).map_err(|e| unavailable(e.to_string()))?,
            record_id: RecordId::new(r).map_err(|e| unavailable(e.to_string()))?,
            sequence: u64::try_from(s).map_err(|_| unavailable("negative sequence"))?,
        })
    })
    .transpose()
}

/// One stored row, every column checked; a bad column is a `MalformedRecord` of that row.
struct RawRow {
    record_id: String,
    record_type: String,
    chain_id: String,
    operation_id: Option<String>,
    sequence: u64,
    policy_id: String,
    policy_version: String,
    payload_json: String,
    payload_digest: String,
    previous_chain_hash: Option<String>,
    chain_hash: String,
    supersedes_record_id: Option<String>,
    created_at: u64,
    hash_algorithm: String,
}

fn text(row: &Row<'_>, i: usize, name: &str) -> Result<Option<String>, String> {
    match row.get_ref(i).map_err(|e| e.to_string())? {
        ValueRef::Null => Ok(None),
        ValueRef::Text(b) => String::from_utf8(b.to_vec())
            .map(Some)
            .map_err(|_| format!("{name} is not valid UTF-8")),
        other => Err(format!(
            "{name} is stored as {:?}, not text",
            other.data_type()
        )),
    }
}

fn required(v: Option<String>, name: &str) -> Result<String, String> {
    v.ok_or_else(|| format!("{name} is null"))
}

fn integer(row: &Row<'_>, i: usize, name: &str) -> Result<u64, String> {
    match row.get_ref(i).map_err(|e| e.to_string())? {
        ValueRef::Integer(n) => u64::try_from(n).map_err(|_| format!("{name} is negative")),
        other => Err(format!(
            "{name} is stored as {:?}, not an integer",
            other.data_type()
        )),
    }
}

fn raw_row(row: &Row<'_>) -> Result<RawRow, (Option<String>, Option<u64>, String)> {
    let id = text(row, 0, "record_id").ok().flatten();
    let seq = integer(row, 4, "sequence").ok();
    let wrap = |e: String| (id.clone(), seq, e);
    Ok(RawRow {
        record_id: required(text(row, 0, "record_id").map_err(wrap)?, "record_id").map_err(wrap)?,
        record_type: required(text(row, 1, "record_type").map_err(wrap)?, "record_type")
            .map_err(wrap)?,
        chain_id: required(text(row, 2, "chain_id").map_err(wrap)?, "chain_id").map_err(wrap)?,
        operation_id: text(row, 3, "operation_id").map_err(wrap)?,
        sequence: integer(row, 4, "sequence").map_err(wrap)?,
        policy_id: required(text(row, 5, "policy_id").map_err(wrap)?, "policy_id").map_err(wrap)?,
        policy_version: required(
            text(row, 6, "policy_version").map_err(wrap)?,
            "policy_version",
        )
        .map_err(wrap)?,
        payload_json: required(text(row, 7, "payload_json").map_err(wrap)?, "payload_json")
            .map_err(wrap)?,
        payload_digest: required(
            text(row, 8, "payload_digest").map_err(wrap)?,
            "payload_digest",
        )
        .map_err(wrap)?,
        previous_chain_hash: text(row, 9, "previous_chain_hash").map_err(wrap)?,
        chain_hash: required(text(row, 10, "chain_hash").map_err(wrap)?, "chain_hash")
            .map_err(wrap)?,
        supersedes_record_id: text(row, 11, "supersedes_record_id").map_err(wrap)?,
        created_at: integer(row, 12, "created_at").map_err(wrap)?,
        hash_algorithm: required(
            text(row, 13, "hash_algorithm").map_err(wrap)?,
            "hash_algorithm",
        )
        .map_err(wrap)?,
    })
}

fn malformed(id: Option<String>, seq: Option<u64>, detail: String) -> FailureDetail {
    FailureDetail {
        code: VerificationFailure::MalformedRecord,
        record_id: id.and_then(|i| RecordId::new(i).ok()),
        sequence: seq,
        detail,
    }
}

fn parse_field<T: std::str::FromStr>(v: &str, name: &str) -> Result<T, String> {
    v.parse().map_err(|_| format!("{name} `{v}` is malformed"))
}

/// Decodes a stored row of either family; a column that does not parse as its field is a
/// `MalformedRecord` of that row.
fn decode<T: RecordKind>(raw: RawRow) -> Result<Record<T>, FailureDetail> {
    let id = raw.record_id.clone();
    let seq = raw.sequence;
    let bad = |e: String| malformed(Some(id.clone()), Some(seq), e);
    let opt_id = |v: Option<String>, name: &str| -> Result<Option<String>, String> {
        match v {
            Some(s) if s.is_empty() => Err(format!("{name} is empty")),
            other => Ok(other),
        }
    };
    Ok(Record {
        record_id: RecordId::new(raw.record_id).map_err(|e| bad(e.to_string()))?,
        record_type: T::from_name(&raw.record_type).ok_or_else(|| {
            bad(format!(
                "unknown {} record type `{}`",
                T::FAMILY.as_str(),
                raw.record_type
            ))
        })?,
        chain_id: ChainId::new(raw.chain_id).map_err(|e| bad(e.to_string()))?,
        operation_id: opt_id(raw.operation_id, "operation_id")
            .map_err(&bad)?
            .map(OperationId::new)
            .transpose()
            .map_err(|e| bad(e.to_string()))?,
        sequence: raw.sequence,
        policy_id: raw.policy_id,
        policy_version: raw.policy_version,
        payload_json: raw.payload_json,
        payload_digest: parse_field(&raw.payload_digest, "payload_digest").map_err(&bad)?,
        previous_chain_hash: raw
            .previous_chain_hash
            .map(|h| parse_field::<Digest>(&h, "previous_chain_hash"))
            .transpose()
            .map_err(&bad)?,
        chain_hash: parse_field(&raw.chain_hash, "chain_hash").map_err(&bad)?,
        supersedes_record_id: raw
            .supersedes_record_id
            .map(RecordId::new)
            .transpose()
            .map_err(|e| bad(e.to_string()))?,
        created_at: Timestamp(raw.created_at),
        hash_algorithm: raw.hash_algorithm,
    })
}

fn to_evidence(raw: RawRow) -> Result<EvidenceRecord, FailureDetail> {
    decode::<RecordType>(raw).map(EvidenceRecord::from)
}

fn to_journal(raw: RawRow) -> Result<JournalRecord, FailureDetail> {
    decode::<JournalRecordType>(raw)
}

/// Streams the rows of one chain into `f`, each as a record or the failure reading it.
fn for_each_row<R>(
    conn: &Connection,
    table: &str,
    chain: &ChainId,
    after_sequence: Option<u64>,
    limit: usize,
    convert: fn(RawRow) -> Result<R, FailureDetail>,
    mut f: impl FnMut(Result<R, FailureDetail>) -> bool,
) -> Result<(), EvidenceError> {
    let after = after_sequence.map_or(-1, |s| i64::try_from(s).unwrap_or(i64::MAX));
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {} FROM {table} WHERE chain_id = ?1 AND sequence > ?2 ORDER BY sequence LIMIT ?3",
            columns()
        ))
        .map_err(|e| db(&e))?;
    let mut rows = stmt
        .query(params![chain.as_str(), after, limit])
        .map_err(|e| db(&e))?;
    while let Some(row) = rows.next().map_err(|e| db(&e))? {
        let item = raw_row(row)
            .map_err(|(id, seq, e)| malformed(id, seq, e))
            .and_then(convert);
        if !f(item) {
            break;
        }
    }
    Ok(())
}

/// Records of a chain, every one readable (a row that is not is an error).
fn read_rows<R>(
    conn: &Connection,
    family: Family,
    chain: &ChainId,
    after_sequence: Option<u64>,
    limit: usize,
    convert: fn(RawRow) -> Result<R, FailureDetail>,
) -> Result<Vec<R>, EvidenceError> {
    let mut out = Vec::new();
    let mut bad = None;
    for_each_row(
        conn,
        table_of(family),
        chain,
        after_sequence,
        limit,
        convert,
        |r| match r {
            Ok(r) => {
                out.push(r);
                true
            }
            Err(f) => {
                bad = Some(f);
                false
            }
        },
    )?;
    match bad {
        Some(f) => Err(unavailable(format!(
            "stored {} record {} cannot be read: {}",
            family.as_str(),
            f.sequence.map_or_else(|| "?".to_owned(), |s| s.to_string()),
            f.detail
        ))),
        None => Ok(out),
    }
}

fn read_valid(
    conn: &Connection,
    chain: &ChainId,
    after_sequence: Option<u64>,
    limit: usize,
) -> Result<Vec<EvidenceRecord>, EvidenceError> {
    read_rows(
        conn,
        Family::Evidence,
        chain,
        after_sequence,
        limit,
        to_evidence,
    )
}

fn read_journal_valid(
    conn: &Connection,
    chain: &ChainId,
    after_sequence: Option<u64>,
    limit: usize,
) -> Result<Vec<JournalRecord>, EvidenceError> {
    read_rows(
        conn,
        Family::Journal,
        chain,
        after_sequence,
        limit,
        to_journal,
    )
}

fn verify_chain(
    conn: &Connection,
    family: Family,
    chain: &ChainId,
    expected: &Expected,
) -> Result<Report, EvidenceError> {
    // Read in pages so a long chain is never held in memory at once.
    const PAGE: usize = 10_000;
    match family {
        Family::Evidence => {
            verify_paged(conn, "records", chain, expected, PAGE, to_evidence, family)
        }
        Family::Journal => verify_paged(conn, "journal", chain, expected, PAGE, to_journal, family),
    }
}

fn verify_paged<R: ChainRecord>(
    conn: &Connection,
    table: &str,
    chain: &ChainId,
    expected: &Expected,
    page: usize,
    convert: fn(RawRow) -> Result<R, FailureDetail>,
    family: Family,
) -> Result<Report, EvidenceError> {
    // The verifier consumes an iterator; pages are fetched lazily as it advances.
    let mut error = None;
    let mut buffer: std::collections::VecDeque<Result<R, FailureDetail>> =
        std::collections::VecDeque::new();
    let mut after: Option<u64> = None;
    let mut exhausted = false;
    let iter = std::iter::from_fn(|| {
        if buffer.is_empty() && !exhausted && error.is_none() {
            let mut got = 0usize;
            let mut last = after;
            let r = for_each_row(conn, table, chain, after, page, convert, |item| {
                got += 1;
                match &item {
                    Ok(r) => last = Some(r.seq()),
                    Err(f) => last = f.sequence.or(last),
                }
                buffer.push_back(item);
                true
            });
            if let Err(e) = r {
                error = Some(e);
                return None;
            }
            if got < page || last == after {
                exhausted = true;
            }
            after = last;
        }
        buffer.pop_front()
    });
    let report = verify::verify_records(family, chain, iter, expected);
    match error {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

// ---------------------------------------------------------------------------------------------
// The writer

struct Writer {
    /// Delivers the receipts of large groups (started with the first one).
    notifier: Option<Notifier>,
    conn: Connection,
    stats: Arc<Stats>,
    path: PathBuf,
    options: SqliteOptions,
    evidence: HashMap<ChainId, ChainTracker>,
    journals: HashMap<ChainId, ChainTracker>,
    /// How many appends the last group commit took: appenders that each wait for their receipt
    /// come back together, and the next group waits a moment for them.
    last_group: usize,
    /// A moving average of how long a commit (the WAL write and its fsync) takes.
    commit_time: Duration,
    /// The store's page size.
    page_size: u64,
    /// WAL bytes written since the last checkpoint (an estimate).
    wal_bytes: u64,
    checkpointer: Option<Checkpointer>,
}

/// What a record adds to the WAL, its row and its index entries (an estimate).
const RECORD_WAL_BYTES: u64 = 1400;
/// The partly filled pages (table and index leaves, their parents) every commit rewrites.
const PAGES_PER_COMMIT: u64 = 8;

/// The writer's page cache: `PRAGMA cache_size` (negative: KiB), 32 MiB.
const WRITER_CACHE_KIB: i64 = -32 * 1024;
/// The longest a group commit waits for the appenders of the previous group to come back.
const MAX_GATHER: Duration = Duration::from_millis(2);
/// WAL bytes between background checkpoints, and between SQLite's automatic ones for a lone
/// appender (`wal_autocheckpoint`, set in pages): SQLite's default of a thousand 4 KiB pages,
/// whatever the store's page size.
const CHECKPOINT_BYTES: u64 = 4 << 20;
/// A group commit of at least this many appends starts the background checkpointer.
const BACKGROUND_GROUP: u64 = 32;
/// Once the background checkpointer runs, the writer's own automatic checkpoint
/// (`wal_autocheckpoint`, counted by SQLite over the whole WAL, every process's frames) waits
/// until the WAL holds this many bytes: it then only copies what the background has not, and its
/// next transaction starts the WAL over from its beginning. (A WAL restarts only when a write
/// transaction begins with every frame checkpointed, which a checkpoint running beside a busy
/// writer never sees; without the restart the WAL would grow for ever.)
const RESTART_BYTES: u64 = 16 << 20;
/// The WAL size past which [`SqliteStore::close_keeping_wal`] empties it.
const KEEP_WAL_LIMIT: u64 = CHECKPOINT_BYTES;

/// `bytes` of WAL in frames of `page_size` (for `wal_autocheckpoint`).
fn frames(bytes: u64, page_size: u64) -> i64 {
    i64::try_from(bytes / page_size.max(1)).unwrap_or(i64::MAX)
}

/// The store's WAL file (`<path>-wal`).
fn wal_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

/// Pulls the appends of one group commit from the queue: whatever is queued, up to
/// `max_batch`; while fewer than the last group have come, it waits for more until a deadline
/// (at most half a commit, at most [`MAX_GATHER`]). A lone appender never waits: its last group
/// was itself.
struct Group<'a> {
    receiver: &'a mpsc::Receiver<Job>,
    first: Option<Job>,
    taken: usize,
    max: usize,
    target: usize,
    deadline: Instant,
}

impl Iterator for Group<'_> {
    type Item = Job;

    fn next(&mut self) -> Option<Job> {
        if self.taken >= self.max {
            return None;
        }
        let job = match self.first.take() {
            Some(job) => Some(job),
            None => match self.receiver.try_recv() {
                Ok(job) => Some(job),
                Err(_) if self.taken < self.target => {
                    let now = Instant::now();
                    if now >= self.deadline {
                        None
                    } else {
                        self.receiver.recv_timeout(self.deadline - now).ok()
                    }
                }
                Err(_) => None,
            },
        };
        self.taken += usize::from(job.is_some());
        job
    }
}

/// An append that passed every check, waiting in its transaction for its chunk's insert.
struct PendingRow {
    append: OwnedAppend,
    payload: Prepared,
    seal: record::Seal,
    /// An evidence record's typed payload, kept so that it is freed with the spent rows (for a
    /// large group, off the writer).
    _typed: Option<Payload>,
}

/// The append a pending row came from (its `payload` value already dropped).
enum OwnedAppend {
    Evidence(EvidenceAppend),
    Journal(JournalAppend),
}

impl OwnedAppend {
    fn fields(&self) -> AppendFields<'_> {
        match self {
            Self::Evidence(e) => AppendFields::evidence(e),
            Self::Journal(j) => j.fields(),
        }
    }
}

/// The inserts of one transaction: sealed rows are buffered per table and written
/// [`ROWS_PER_INSERT`] at a time (statements prepared once per transaction), and whatever is
/// left before the commit. Nothing reads a chain's rows while the transaction appends to it
/// (its tracker holds its head), so buffering changes nothing another statement sees; a failed
/// insert fails the whole group, which rolls back.
struct Statements<'c> {
    conn: &'c Connection,
    records: Vec<PendingRow>,
    journal: Vec<PendingRow>,
    /// Rows inserted, kept until the commit so that freeing them (a dozen allocations each, made
    /// on the appenders' threads) happens off the writer for large groups.
    spent: Vec<PendingRow>,
    /// Prepared statements: (table, rows) for the chunk and the single-row inserts.
    chunk: [Option<CachedStatement<'c>>; 2],
    single: [Option<CachedStatement<'c>>; 2],
}

impl<'c> Statements<'c> {
    fn new(conn: &'c Connection) -> Self {
        Self {
            conn,
            records: Vec::with_capacity(ROWS_PER_INSERT),
            journal: Vec::new(),
            spent: Vec::new(),
            chunk: [None, None],
            single: [None, None],
        }
    }

    /// Queues a sealed row; writes its table's chunk once it is full.
    fn push(&mut self, family: Family, row: PendingRow) -> rusqlite::Result<()> {
        let rows = match family {
            Family::Evidence => &mut self.records,
            Family::Journal => &mut self.journal,
        };
        rows.push(row);
        if rows.len() >= ROWS_PER_INSERT {
            self.flush(family)?;
        }
        Ok(())
    }

    /// Writes every queued row (before the commit).
    fn finish(&mut self) -> rusqlite::Result<()> {
        self.flush(Family::Evidence)?;
        self.flush(Family::Journal)
    }

    fn flush(&mut self, family: Family) -> rusqlite::Result<()> {
        let (rows, slot) = match family {
            Family::Evidence => (std::mem::take(&mut self.records), 0),
            Family::Journal => (std::mem::take(&mut self.journal), 1),
        };
        let table = table_of(family);
        let conn = self.conn;
        let mut chunks = rows.chunks_exact(ROWS_PER_INSERT);
        for chunk in chunks.by_ref() {
            let stmt = match &mut self.chunk[slot] {
                Some(stmt) => stmt,
                empty => empty.insert(conn.prepare_cached(&insert_sql(table, ROWS_PER_INSERT))?),
            };
            for (i, row) in chunk.iter().enumerate() {
                bind_row(stmt, i * FIELDS_PER_ROW, row)?;
            }
            stmt.raw_execute()?;
        }
        for row in chunks.remainder() {
            let stmt = match &mut self.single[slot] {
                Some(stmt) => stmt,
                empty => empty.insert(conn.prepare_cached(&insert_sql(table, 1))?),
            };
            bind_row(stmt, 0, row)?;
            stmt.raw_execute()?;
        }
        // Keep the buffer's allocation for the next chunk.
        let mut rows = rows;
        self.spent.append(&mut rows);
        match family {
            Family::Evidence => self.records = rows,
            Family::Journal => self.journal = rows,
        }
        Ok(())
    }
}

/// Binds one row's fields from parameter `offset + 1` on.
fn bind_row(stmt: &mut Statement<'_>, offset: usize, row: &PendingRow) -> rusqlite::Result<()> {
    let a = row.append.fields();
    let f = row.seal.fields(&a, &row.payload);
    let at = |i: usize| offset + i;
    stmt.raw_bind_parameter(at(1), f.record_id)?;
    stmt.raw_bind_parameter(at(2), f.record_type)?;
    stmt.raw_bind_parameter(at(3), f.chain_id)?;
    stmt.raw_bind_parameter(at(4), f.operation_id)?;
    stmt.raw_bind_parameter(at(5), seq_i64(f.sequence))?;
    stmt.raw_bind_parameter(at(6), f.policy_id)?;
    stmt.raw_bind_parameter(at(7), f.policy_version)?;
    stmt.raw_bind_parameter(at(8), f.payload_json)?;
    stmt.raw_bind_parameter(at(9), f.payload_digest)?;
    stmt.raw_bind_parameter(at(10), f.previous_chain_hash)?;
    stmt.raw_bind_parameter(at(11), row.seal.chain_hash.as_str())?;
    stmt.raw_bind_parameter(at(12), f.supersedes_record_id)?;
    stmt.raw_bind_parameter(at(13), seq_i64(f.created_at))?;
    stmt.raw_bind_parameter(at(14), f.hash_algorithm)
}

/// Checkpoints the WAL from its own connection and thread (`PRAGMA wal_checkpoint(PASSIVE)`:
/// it copies committed pages into the database without blocking the writer), so no commit
/// waits for a checkpoint.
struct Checkpointer {
    signal: mpsc::SyncSender<()>,
    handle: JoinHandle<()>,
}

impl Checkpointer {
    fn start(path: &Path, options: &SqliteOptions) -> Result<Self, String> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| e.to_string())?;
        conn.busy_timeout(options.busy_timeout)
            .map_err(|e| e.to_string())?;
        // The checkpoint syncs the WAL before copying and the database after, as the store's
        // own setting says.
        conn.pragma_update(None, "synchronous", synchronous_name(options.synchronous))
            .map_err(|e| e.to_string())?;
        let (signal, wake) = mpsc::sync_channel::<()>(1);
        let store = path.to_owned();
        let handle = std::thread::Builder::new()
            .name("warden-evidence-checkpoint".into())
            .spawn(move || {
                while wake.recv().is_ok() {
                    if let Err(e) = passive_checkpoint(&conn) {
                        tracing::warn!(store = %store.display(), error = %e, "evidence checkpoint failed");
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(Self { signal, handle })
    }

    fn stop(self) {
        drop(self.signal);
        let _ = self.handle.join();
    }
}

/// A group's appenders and their answers, in order.
type Answers = Vec<(
    oneshot::Sender<Result<AppendReceipt, EvidenceError>>,
    Result<AppendReceipt, EvidenceError>,
)>;

/// Sends each answer to its appender.
fn answer(answers: Answers) {
    for (reply, result) in answers {
        let _ = reply.send(result);
    }
}

/// Sends the answers of large group commits from its own thread, in the order the groups
/// committed, and then frees the groups' rows; the writer hands it each group once the group's
/// commit is durable.
struct Notifier {
    sender: mpsc::Sender<(Answers, Vec<PendingRow>)>,
    handle: JoinHandle<()>,
}

impl Notifier {
    fn start() -> std::io::Result<Self> {
        let (sender, groups) = mpsc::channel::<(Answers, Vec<PendingRow>)>();
        let handle = std::thread::Builder::new()
            .name("warden-evidence-receipts".into())
            .spawn(move || {
                while let Ok((answers, spent)) = groups.recv() {
                    answer(answers);
                    drop(spent);
                }
            })?;
        Ok(Self { sender, handle })
    }

    /// Answers a group's appenders, then frees its inserted rows.
    fn deliver(&self, answers: Answers, spent: Vec<PendingRow>) {
        if let Err(e) = self.sender.send((answers, spent)) {
            // The thread is gone (it cannot be while the writer runs): answer here.
            answer(e.0.0);
        }
    }

    /// Delivers what is pending, then ends the thread.
    fn stop(self) {
        drop(self.sender);
        let _ = self.handle.join();
    }
}

fn passive_checkpoint(conn: &Connection) -> rusqlite::Result<()> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
}

fn synchronous_name(s: Synchronous) -> &'static str {
    match s {
        Synchronous::Full => "FULL",
        Synchronous::Normal => "NORMAL",
    }
}

impl Writer {
    fn run(mut self, receiver: &mpsc::Receiver<Job>) {
        let max = self.options.max_batch.max(1);
        while let Ok(first) = receiver.recv() {
            let window = (self.commit_time / 2).min(MAX_GATHER);
            let mut group = Group {
                receiver,
                first: Some(first),
                taken: 0,
                max,
                target: self.last_group.min(max),
                deadline: Instant::now() + window,
            };
            self.commit_group(&mut group);
            self.last_group = group.taken.max(1);
        }
        self.close();
    }

    fn close(mut self) {
        // Every receipt out before the store is closed.
        if let Some(notifier) = self.notifier.take() {
            notifier.stop();
        }
        if let Some(checkpointer) = self.checkpointer.take() {
            checkpointer.stop();
        }
        if self.stats.keep_wal.load(Ordering::Relaxed) {
            // A process that opens the store first recovers the WAL and forgets how much of it
            // was checkpointed, so a WAL kept by short-lived writers never starts over by
            // itself (and SQLite's automatic checkpoints copy it all again, every time): once
            // it holds 4 MiB, fold it into the database and empty it.
            let wal = std::fs::metadata(wal_path(&self.path)).map_or(0, |m| m.len());
            if wal >= KEEP_WAL_LIMIT {
                let _ = self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);");
            }
            // The last connection would checkpoint and delete the WAL when it closes: not this
            // one.
            let _ = self
                .conn
                .set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true);
            return;
        }
        // Leave a cleanly closed store in rollback-journal mode, so read-only opens need (and
        // create) no -wal/-shm files. Fails harmlessly while another connection is open.
        let _ = self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);");
        let _ = self
            .conn
            .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get::<_, String>(0));
    }

    /// One group commit: every append of the group inside one `BEGIN IMMEDIATE` transaction,
    /// one `COMMIT` (one fsync of the WAL), then every receipt.
    fn commit_group(&mut self, jobs: &mut Group<'_>) {
        if let Err(e) = self.conn.execute_batch("BEGIN IMMEDIATE") {
            let err = unavailable(format!("sqlite: cannot begin: {e}"));
            for job in jobs {
                let _ = job.reply.send(Err(err.clone()));
            }
            return;
        }
        let mut replies = Vec::new();
        let mut results: Vec<Result<AppendReceipt, EvidenceError>> = Vec::new();
        let mut touched_evidence: HashSet<ChainId> = HashSet::new();
        let mut touched_journal: HashSet<ChainId> = HashSet::new();
        let first_use = |touched: &mut HashSet<ChainId>, chain: &ChainId| {
            !touched.contains(chain) && touched.insert(chain.clone())
        };
        let mut fatal: Option<EvidenceError> = None;
        let spent = {
            let mut statements = Statements::new(&self.conn);
            for job in jobs {
                let r = match job.op {
                    JobOp::Evidence(entry, prepared) => {
                        let fresh = first_use(&mut touched_evidence, &entry.chain_id);
                        append_evidence(&mut statements, &mut self.evidence, entry, prepared, fresh)
                    }
                    JobOp::Journal(entry, prepared) => {
                        let fresh = first_use(&mut touched_journal, &entry.chain_id);
                        append_journal(&mut statements, &mut self.journals, entry, prepared, fresh)
                    }
                };
                replies.push(job.reply);
                match r {
                    Ok(receipt) => results.push(Ok(receipt)),
                    Err(Step::Refused(e)) => results.push(Err(e)),
                    Err(Step::Fatal(e)) => {
                        fatal = Some(e);
                        break;
                    }
                }
            }
            if fatal.is_none()
                && let Err(e) = statements.finish()
            {
                fatal = Some(db(&e));
            }
            std::mem::take(&mut statements.spent)
        };
        let started = Instant::now();
        let committed = match fatal {
            Some(e) => Err(e),
            None => fault::point("store.before_commit")
                .map_err(|f| unavailable(format!("injected fault at {}", f.0)))
                .and_then(|()| {
                    self.conn
                        .execute_batch("COMMIT")
                        .map_err(|e| unavailable(format!("sqlite: commit failed: {e}")))
                }),
        };
        if let Err(e) = committed {
            let _ = self.conn.execute_batch("ROLLBACK");
            // The trackers saw records that are not stored: reload them on next use.
            for c in &touched_evidence {
                self.evidence.remove(c);
            }
            for c in &touched_journal {
                self.journals.remove(c);
            }
            tracing::error!(store = %self.path.display(), error = %e, "evidence commit failed");
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
            return;
        }
        self.commit_time = (self.commit_time * 7 + started.elapsed()) / 8;
        let ok = results.iter().filter(|r| r.is_ok()).count() as u64;
        self.stats.commits.fetch_add(1, Ordering::Relaxed);
        self.stats.records.fetch_add(ok, Ordering::Relaxed);
        let _ = fault::point("store.after_commit");
        let answers: Answers = replies
            .into_iter()
            .zip(results.into_iter().chain(std::iter::repeat_with(|| {
                Err(unavailable("internal: missing result"))
            })))
            .collect();
        // Every receipt of the group is durable now. A large group's receipts go out from the
        // notifier thread: each wakes a waiting appender (a system call), and the writer goes on
        // with the next group meanwhile. A small group's go out here (a lone appender's latency
        // gains no thread hop).
        if answers.len() >= BACKGROUND_GROUP as usize && self.notifier.is_none() {
            self.notifier = Notifier::start().ok();
        }
        match &self.notifier {
            Some(n) if answers.len() >= BACKGROUND_GROUP as usize => n.deliver(answers, spent),
            _ => {
                answer(answers);
                drop(spent);
            }
        }
        // Groups of many appends (concurrent appenders): checkpoint in the background from now
        // on, so commits stop paying for checkpoints. A lone appender's small commits keep
        // SQLite's own automatic checkpoint (every 4 MiB, then the WAL starts over), which costs
        // them less than a WAL growing to 16 MiB beside a checkpointer.
        if self.checkpointer.is_none() && ok < BACKGROUND_GROUP {
            return;
        }
        // Each record adds its row and its index entries; each commit rewrites a few partly
        // filled pages.
        self.wal_bytes += ok * RECORD_WAL_BYTES + PAGES_PER_COMMIT * self.page_size;
        if self.wal_bytes >= CHECKPOINT_BYTES || self.checkpointer.is_none() {
            self.wal_bytes = 0;
            self.checkpoint();
        }
    }

    /// Asks the checkpointer for a checkpoint (started on first use; if it cannot start, the
    /// writer checkpoints itself, so the WAL never grows without bound).
    fn checkpoint(&mut self) {
        if self.checkpointer.is_none() {
            match Checkpointer::start(&self.path, &self.options) {
                Ok(c) => {
                    self.checkpointer = Some(c);
                    if let Err(e) = self.conn.pragma_update(
                        None,
                        "wal_autocheckpoint",
                        frames(RESTART_BYTES, self.page_size),
                    ) {
                        tracing::warn!(store = %self.path.display(), error = %e, "cannot defer the automatic checkpoint");
                    }
                }
                Err(e) => {
                    tracing::warn!(store = %self.path.display(), error = %e, "no background checkpointer; checkpointing inline");
                }
            }
        }
        match &self.checkpointer {
            // A checkpoint already pending covers this one too.
            Some(c) => {
                let _ = c.signal.try_send(());
            }
            None => {
                if let Err(e) = passive_checkpoint(&self.conn) {
                    tracing::warn!(store = %self.path.display(), error = %e, "evidence checkpoint failed");
                }
            }
        }
    }
}

/// The chain's tracker, brought up to date with the database (another process may have
/// appended) when `fresh` (first use in this transaction).
fn tracker<'a>(
    conn: &Connection,
    trackers: &'a mut HashMap<ChainId, ChainTracker>,
    family: Family,
    chain: &ChainId,
    fresh: bool,
) -> Result<&'a mut ChainTracker, Step> {
    let table = table_of(family);
    if fresh || !trackers.contains_key(chain) {
        let db_head = head_of(conn, table, chain).map_err(Step::Fatal)?;
        let cached: Option<Option<ChainHead>> = trackers.get(chain).map(|t| t.head().cloned());
        if cached.as_ref() != Some(&db_head) {
            // Catch up from the cached head when the database only grew past it; otherwise
            // (first use, or a head we do not recognize) replay the whole chain.
            let grew = matches!((cached.flatten(), &db_head), (Some(c), Some(d)) if c.sequence < d.sequence);
            if !grew {
                trackers.insert(chain.clone(), ChainTracker::new(family, chain.clone()));
            }
            let tracker = trackers
                .get_mut(chain)
                .ok_or_else(|| Step::Fatal(unavailable("internal: tracker missing")))?;
            let after = tracker.head().map(|h| h.sequence);
            let mut failure = None;
            let mut feed = |item: Result<(), FailureDetail>| match item {
                Ok(()) => true,
                Err(f) => {
                    failure = Some(f);
                    false
                }
            };
            match family {
                Family::Evidence => {
                    for_each_row(conn, table, chain, after, usize::MAX, to_evidence, |r| {
                        feed(r.and_then(|r| tracker.push(&r)))
                    })
                }
                Family::Journal => {
                    for_each_row(conn, table, chain, after, usize::MAX, to_journal, |r| {
                        feed(r.and_then(|r| r.push_to(tracker)))
                    })
                }
            }
            .map_err(Step::Fatal)?;
            if let Some(f) = failure {
                trackers.remove(chain);
                return Err(Step::Refused(unavailable(format!(
                    "chain {chain} fails verification at sequence {}: {}: {}; appends are refused",
                    f.sequence.map_or_else(|| "?".to_owned(), |s| s.to_string()),
                    crate::failure_code_str(f.code),
                    f.detail
                ))));
            }
        }
    }
    trackers
        .get_mut(chain)
        .ok_or_else(|| Step::Fatal(unavailable("internal: tracker missing")))
}

fn append_evidence(
    statements: &mut Statements<'_>,
    trackers: &mut HashMap<ChainId, ChainTracker>,
    entry: EvidenceAppend,
    prepared: Result<PreparedEvidence, EvidenceError>,
    fresh: bool,
) -> Result<AppendReceipt, Step> {
    let conn = statements.conn;
    let tracker = tracker(conn, trackers, Family::Evidence, &entry.chain_id, fresh)?;
    let sealed = Sealed::check(tracker, &entry, prepared).map_err(Step::Refused)?;
    if sealed.seal.sequence == 0 {
        claim_record_ids(conn, Family::Evidence, &entry.chain_id)?;
    }
    insert_index_entries(conn, &sealed, &entry)?;
    let (receipt, seal, payload, typed) = sealed.apply(tracker, &entry);
    statements
        .push(
            Family::Evidence,
            PendingRow {
                append: OwnedAppend::Evidence(entry),
                payload,
                seal,
                _typed: Some(typed),
            },
        )
        .map_err(|e| Step::Fatal(db(&e)))?;
    Ok(receipt)
}

fn append_journal(
    statements: &mut Statements<'_>,
    trackers: &mut HashMap<ChainId, ChainTracker>,
    entry: JournalAppend,
    prepared: Result<Prepared, EvidenceError>,
    fresh: bool,
) -> Result<AppendReceipt, Step> {
    let conn = statements.conn;
    let tracker = tracker(conn, trackers, Family::Journal, &entry.chain_id, fresh)?;
    let a = entry.fields();
    let seal = record::seal_on(&a, prepared.as_ref(), tracker.head()).map_err(Step::Refused)?;
    let payload = prepared.map_err(Step::Refused)?;
    let fields = seal.fields(&a, &payload);
    tracker
        .check_sealed_journal(&fields)
        .map_err(|f| Step::Refused(store::refused(&f)))?;
    if seal.sequence == 0 {
        claim_record_ids(conn, Family::Journal, &entry.chain_id)?;
    }
    tracker.accept_sealed_journal(&fields, &seal.chain_hash);
    let receipt = seal.receipt(&entry.chain_id);
    statements
        .push(
            Family::Journal,
            PendingRow {
                append: OwnedAppend::Journal(entry),
                payload,
                seal,
                _typed: None,
            },
        )
        .map_err(|e| Step::Fatal(db(&e)))?;
    Ok(receipt)
}

/// Writes the durable indexes an `operation_started` record carries (in its transaction),
/// refusing the append when a key or an approval was already used; nothing is written unless
/// both are free.
fn insert_index_entries(
    conn: &Connection,
    sealed: &Sealed,
    entry: &EvidenceAppend,
) -> Result<(), Step> {
    let index = &sealed.index;
    if index.idempotency_key_digest.is_none() && index.approval_id.is_none() {
        return Ok(());
    }
    let Some(op) = sealed.operation_ref(entry) else {
        return Ok(());
    };
    let key = index.idempotency_key_digest.as_ref().map(Digest::as_str);
    let approval = index.approval_id.as_ref().map(ApprovalId::as_str);
    if let Some(key) = key
        && let Some(existing) =
            find_index(conn, "idempotency_keys", "key_digest", key).map_err(Step::Fatal)?
    {
        return Err(Step::Refused(store::duplicate_key(&existing)));
    }
    if let Some(approval) = approval
        && let Some(existing) =
            find_index(conn, "approval_uses", "approval_id", approval).map_err(Step::Fatal)?
    {
        return Err(Step::Refused(store::approval_used(&existing)));
    }
    for (sql, value) in [
        (INSERT_IDEMPOTENCY_KEY, key),
        (INSERT_APPROVAL_USE, approval),
    ] {
        let Some(value) = value else { continue };
        conn.prepare_cached(sql)
            .and_then(|mut s| {
                s.execute(params![
                    value,
                    op.chain_id.as_str(),
                    op.operation_id.as_str(),
                    op.record_id.as_str(),
                    seq_i64(op.sequence)
                ])
            })
            .map_err(|e| Step::Fatal(db(&e)))?;
    }
    Ok(())
}

enum Step {
    /// This append is refused; the batch goes on.
    Refused(EvidenceError),
    /// The database failed; the whole batch is rolled back.
    Fatal(EvidenceError),
}

fn seq_i64(s: u64) -> i64 {
    i64::try_from(s).unwrap_or(i64::MAX)
}
