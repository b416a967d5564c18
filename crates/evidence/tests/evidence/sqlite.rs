//! SQLite specifics: the `records` contract, read-only opening that never creates or changes a
//! file, refusing what is not a store of a known schema, append-only triggers, group commit.

use std::path::Path;
use std::sync::Arc;

use rusqlite::Connection;
use serde_json::json;
use warden_contracts::*;
use warden_evidence::*;

use crate::support::*;

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn closed_store(chain: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evidence.db");
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    block_on(standard_chain(store.clone(), chain));
    drop(store);
    (dir, path)
}

#[test]
fn the_records_table_has_one_column_per_record_field() {
    let (_dir, path) = closed_store("schema");
    let c = Connection::open(&path).unwrap();
    let mut stmt = c.prepare("PRAGMA table_info(records)").unwrap();
    let cols: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let names: Vec<&str> = cols.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, warden_evidence::COLUMNS.to_vec());
    assert!(cols.contains(&("payload_json".into(), "TEXT".into())));
    // Every field of the contract type is a column.
    let record = serde_json::to_value(
        SqliteReader::open(&path)
            .unwrap()
            .read(&ChainId::new("schema").unwrap(), None, 1)
            .unwrap()[0]
            .clone(),
    )
    .unwrap();
    for key in record.as_object().unwrap().keys() {
        assert!(names.contains(&key.as_str()), "{key}");
    }
    let version: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    let app: i64 = c
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .unwrap();
    assert_eq!((version, app), (SCHEMA_VERSION, APPLICATION_ID));
    assert_eq!(DEFAULT_PATH, ".warden/evidence.db");
}

#[test]
fn a_store_is_in_wal_mode_while_open_and_records_are_append_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/dir/evidence.db");
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    block_on(standard_chain(store.clone(), "wal"));
    let c = Connection::open(&path).unwrap();
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let err = c
        .execute("UPDATE records SET created_at = 0", [])
        .unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
    let err = c.execute("DELETE FROM records", []).unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
}

#[test]
fn reading_a_store_never_creates_or_changes_a_file() {
    let (dir, path) = closed_store("ro");
    let before = listing(dir.path());
    assert_eq!(
        before,
        vec!["evidence.db"],
        "a closed store leaves no -wal/-shm"
    );
    let bytes = file_bytes(&path);
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let reader = SqliteReader::open(&path).unwrap();
    let chain = ChainId::new("ro").unwrap();
    assert_eq!(reader.chain_ids().unwrap(), vec![chain.clone()]);
    assert!(
        reader
            .verify(&chain, &Expected::Nothing)
            .unwrap()
            .result
            .valid
    );
    assert!(reader.head(&chain).unwrap().is_some());
    assert!(reader.journal_chain_ids().unwrap().is_empty());
    drop(reader);
    assert_eq!(file_bytes(&path), bytes);
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), mtime);
    assert_eq!(listing(dir.path()), before);
}

#[test]
fn a_missing_store_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    for p in [
        dir.path().join("missing.db"),
        dir.path().join("no/such/dir/e.db"),
    ] {
        assert!(matches!(
            SqliteReader::open(&p),
            Err(Error::StoreMissing { .. })
        ));
        assert!(!p.exists());
    }
    assert!(listing(dir.path()).is_empty());
}

#[test]
fn only_warden_stores_of_a_known_schema_version_open() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("text.db");
    std::fs::write(
        &text,
        "not a database, just words that go on for a while....",
    )
    .unwrap();
    assert!(matches!(
        SqliteReader::open(&text),
        Err(Error::NotSqlite { .. })
    ));
    assert!(matches!(
        SqliteStore::open(&text),
        Err(Error::NotSqlite { .. })
    ));
    assert!(matches!(
        SqliteReader::open(dir.path()),
        Err(Error::NotSqlite { .. })
    ));
    let other = dir.path().join("other.db");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t(x);")
        .unwrap();
    assert!(matches!(
        SqliteReader::open(&other),
        Err(Error::NotEvidenceStore { .. })
    ));
    assert!(matches!(
        SqliteStore::open(&other),
        Err(Error::NotEvidenceStore { .. })
    ));
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, "").unwrap();
    assert!(matches!(
        SqliteReader::open(&empty),
        Err(Error::NotEvidenceStore { .. })
    ));
    let (_d, path) = closed_store("ver");
    Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99;")
        .unwrap();
    match SqliteReader::open(&path) {
        Err(Error::UnknownSchemaVersion {
            found, supported, ..
        }) => assert_eq!((found, supported), (99, SCHEMA_VERSION)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        SqliteStore::open(&path),
        Err(Error::UnknownSchemaVersion { .. })
    ));
}

/// The record-id prefixes a store has bound, by family: (family, chain, prefix).
fn bound_chains(path: &Path) -> Vec<(String, String, String)> {
    let c = Connection::open(path).unwrap();
    let mut s = c
        .prepare("SELECT family, chain_id, record_id_prefix FROM chains ORDER BY family, chain_id")
        .unwrap();
    s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A store of schema version 1 (this one's tables without `chains`, which version 3 added, and
/// with the `records_operation` index version 2 dropped) is read as it is, and migrated in
/// place by a writable open: no record changes, every stored chain's record ids are bound.
#[test]
fn a_version_1_store_is_read_and_migrated_without_changing_a_record() {
    let (_d, path) = closed_store("v1");
    let expected = bound_chains(&path);
    assert_eq!(expected.len(), 1, "{expected:?}");
    let c = Connection::open(&path).unwrap();
    c.execute_batch(
        "DROP TABLE chains; CREATE INDEX records_operation ON records (chain_id, operation_id); PRAGMA user_version = 1;",
    )
    .unwrap();
    drop(c);
    let chain = ChainId::new("v1").unwrap();
    let index_count = |path: &Path| -> i64 {
        Connection::open(path)
            .unwrap()
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'records_operation'",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    let version = |path: &Path| -> i64 {
        Connection::open(path)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    };
    // Read-only: read and verified as version 1, and left as it was.
    let bytes = file_bytes(&path);
    let reader = SqliteReader::open(&path).unwrap();
    let before = reader.read(&chain, None, usize::MAX).unwrap();
    let head = head_of(before.last().unwrap());
    assert!(
        reader
            .verify(&chain, &Expected::Head(head.clone()))
            .unwrap()
            .result
            .valid
    );
    drop(reader);
    assert_eq!(file_bytes(&path), bytes);
    assert_eq!((version(&path), index_count(&path)), (1, 1));
    // A writable open migrates: the index is gone, the version is the current one, the stored
    // chain's record ids are bound, every record (and so every chain hash) is byte-identical,
    // and appends go on.
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    assert_eq!(store.read_sync(&chain, None, usize::MAX).unwrap(), before);
    assert_eq!(bound_chains(&path), expected);
    block_on(standard_chain(store.clone(), "v2"));
    drop(store);
    assert_eq!((version(&path), index_count(&path)), (SCHEMA_VERSION, 0));
    let reader = SqliteReader::open(&path).unwrap();
    assert_eq!(reader.read(&chain, None, usize::MAX).unwrap(), before);
    for c in reader.chain_ids().unwrap() {
        assert!(
            reader.verify(&c, &Expected::Nothing).unwrap().result.valid,
            "{c}"
        );
    }
    assert!(
        reader
            .verify(&chain, &Expected::Head(head))
            .unwrap()
            .result
            .valid
    );
    // Below the oldest version this build reads: refused, by readers and writers alike.
    Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = 0;")
        .unwrap();
    assert!(matches!(
        SqliteReader::open(&path),
        Err(Error::UnknownSchemaVersion { found: 0, .. })
    ));
    assert!(matches!(
        SqliteStore::open(&path),
        Err(Error::UnknownSchemaVersion { found: 0, .. })
    ));
}

fn append(chain: &str, seq: u64) -> EvidenceAppend {
    let s = snapshot();
    if seq == 0 {
        return EvidenceAppend {
            chain_id: ChainId::new(chain).unwrap(),
            record_type: RecordType::PolicyBound,
            operation_id: None,
            expected_sequence: 0,
            policy_id: "project".into(),
            policy_version: "7".into(),
            payload: json!({"task_boundary_id": chain, "policy_digest": s.reference().digest,
                            "snapshot_json": r#"{"default":"ask","deny":["bash(rm:*)"],"id":"project","version":"7"}"#}),
            supersedes_record_id: None,
            created_at: Timestamp(1),
        };
    }
    EvidenceAppend {
        chain_id: ChainId::new(chain).unwrap(),
        record_type: RecordType::PolicyBound,
        operation_id: Some(OperationId::new(format!("op-{seq}")).unwrap()),
        expected_sequence: seq,
        policy_id: "project".into(),
        policy_version: "7".into(),
        payload: json!({"task_boundary_id": chain, "policy_digest": s.reference().digest}),
        supersedes_record_id: None,
        created_at: Timestamp(1 + seq),
    }
}

#[test]
fn concurrent_appenders_share_commits_and_every_receipt_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gc.db");
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    let threads = 16;
    let per = 100;
    let receipts: Vec<Vec<AppendReceipt>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let store = store.clone();
                s.spawn(move || {
                    (0..per)
                        .map(|i| store.append_blocking(append(&format!("c{t}"), i)).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let (commits, records) = store.commit_stats();
    assert_eq!(records, threads * per);
    assert!(
        commits < records,
        "group commit: {commits} commits for {records} records"
    );
    drop(store);
    // After reopening, every receipt is there.
    let reader = SqliteReader::open(&path).unwrap();
    for (t, rs) in receipts.iter().enumerate() {
        let chain = ChainId::new(format!("c{t}")).unwrap();
        let stored = reader.read(&chain, None, usize::MAX).unwrap();
        assert_eq!(stored.len(), rs.len());
        for (r, s) in rs.iter().zip(&stored) {
            assert_eq!((&r.record_id, &r.chain_hash), (&s.record_id, &s.chain_hash));
        }
        assert!(
            reader
                .verify(&chain, &Expected::Head(head_of(stored.last().unwrap())))
                .unwrap()
                .result
                .valid
        );
    }
}

#[test]
fn pipelined_appends_of_one_chain_commit_in_order() {
    // `append` queues when called: consecutive sequences queued by one caller share commits.
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("p.db")).unwrap();
    let futures: Vec<_> = (0..200)
        .map(|i| store.append_queued(append("pipe", i)))
        .collect();
    let receipts = block_on(async {
        let mut out = Vec::new();
        for f in futures {
            out.push(f.await.unwrap());
        }
        out
    });
    assert_eq!(receipts.last().unwrap().sequence, 199);
    let (commits, _) = store.commit_stats();
    assert!(commits < 200, "{commits}");
    // A gap in the queue is refused alone; the others commit.
    let bad = store.append_queued(append("pipe", 500));
    let good = store.append_queued(append("pipe", 200));
    assert!(matches!(
        block_on(bad),
        Err(EvidenceError::SequenceConflict { .. })
    ));
    assert_eq!(block_on(good).unwrap().sequence, 200);
}

#[test]
fn another_process_appending_is_seen_before_the_next_append() {
    // Two stores (as two processes would) on one file append to one chain in turn.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.db");
    let a = SqliteStore::open(&path).unwrap();
    let b = SqliteStore::open(&path).unwrap();
    a.append_blocking(append("shared", 0)).unwrap();
    b.append_blocking(append("shared", 1)).unwrap();
    a.append_blocking(append("shared", 2)).unwrap();
    assert!(matches!(
        b.append_blocking(append("shared", 2)),
        Err(EvidenceError::SequenceConflict { .. })
    ));
    b.append_blocking(append("shared", 3)).unwrap();
    let r = a
        .verify_sync(&ChainId::new("shared").unwrap(), &Expected::Nothing)
        .unwrap();
    assert!(r.result.valid && r.result.checked_records == 4, "{r:?}");
}

#[test]
fn closing_keeping_the_wal_leaves_it_for_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keep.db");
    let store = SqliteStore::open(&path).unwrap();
    for i in 0..3 {
        store.append_blocking(append("keep", i)).unwrap();
    }
    store.close_keeping_wal();
    // The records are in the WAL, as after a crash right after the last commit.
    assert_eq!(
        listing(dir.path()),
        vec!["keep.db", "keep.db-shm", "keep.db-wal"]
    );
    let chain = ChainId::new("keep").unwrap();
    let reader = SqliteReader::open(&path).unwrap();
    let r = reader.verify(&chain, &Expected::Nothing).unwrap();
    assert!(r.result.valid && r.result.checked_records == 3, "{r:?}");
    drop(reader);
    // The next writer sees them, appends after them, and a clean close folds the WAL back.
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(
        store.append_blocking(append("keep", 3)).unwrap().sequence,
        3
    );
    store.close();
    assert_eq!(listing(dir.path()), vec!["keep.db"]);
    let r = SqliteReader::open(&path)
        .unwrap()
        .verify(&chain, &Expected::Nothing)
        .unwrap();
    assert!(r.result.valid && r.result.checked_records == 4, "{r:?}");
}

#[test]
fn checkpoints_run_beside_the_writer() {
    // The writer never checkpoints on its commits; a background connection copies the WAL into
    // the database once enough was written, so the database file grows while the store is open.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ckpt.db");
    let store = SqliteStore::open(&path).unwrap();
    let initial = std::fs::metadata(&path).unwrap().len();
    let n = 5000;
    let pending: Vec<_> = (0..n)
        .map(|i| store.append_queued(append("ckpt", i)))
        .collect();
    block_on(async {
        for p in pending {
            p.await.unwrap();
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::metadata(&path).unwrap().len() <= initial {
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint within a minute"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let r = store
        .verify_sync(&ChainId::new("ckpt").unwrap(), &Expected::Nothing)
        .unwrap();
    assert!(r.result.valid && r.result.checked_records == n, "{r:?}");
    drop(store);
    assert_eq!(listing(dir.path()), vec!["ckpt.db"]);
}

#[test]
fn the_wal_stays_bounded_across_short_lived_writers() {
    // The Claude Code hook's pattern: one append per process, closed keeping the WAL. SQLite's
    // automatic checkpoint (the whole WAL's frames, every process's) still runs, so the WAL
    // starts over instead of growing with every session.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hooks.db");
    let wal = dir.path().join("hooks.db-wal");
    let mut largest = 0;
    for i in 0..400 {
        let store = SqliteStore::open(&path).unwrap();
        store.append_blocking(append("sessions", i)).unwrap();
        store.close_keeping_wal();
        largest = largest.max(std::fs::metadata(&wal).unwrap().len());
    }
    // 400 sessions write well over a thousand frames; the WAL holds about a thousand at most.
    assert!(largest < 6 << 20, "the WAL grew to {largest} bytes");
    let r = SqliteReader::open(&path)
        .unwrap()
        .verify(&ChainId::new("sessions").unwrap(), &Expected::Nothing)
        .unwrap();
    assert!(r.result.valid && r.result.checked_records == 400, "{r:?}");
}

#[test]
fn a_busy_writer_restarts_its_wal() {
    // With the background checkpointer running beside a writer that never pauses, the writer's
    // own checkpoint catches up past a few thousand frames so the WAL starts over: its file
    // stops growing.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("busy.db");
    let store = SqliteStore::open(&path).unwrap();
    for i in 0..3000 {
        store.append_blocking(append("busy", i)).unwrap();
    }
    let wal = std::fs::metadata(dir.path().join("busy.db-wal"))
        .unwrap()
        .len();
    // Without restarts 3000 commits of a few pages each write well over 40 MB of frames.
    assert!(wal < 24 << 20, "the WAL grew to {wal} bytes");
}

/// A new chain whose record ids would start like another chain's is refused (a 64-bit prefix
/// collision needs a chain id chosen for it; here the other chain's binding is written by hand),
/// so record ids stay unique; the other chains append on.
#[test]
fn a_chain_whose_record_ids_another_chain_owns_is_refused() {
    let (_d, path) = closed_store("owner");
    let victim = ChainId::new("victim").unwrap();
    let prefix = record_id_for(Family::Evidence, &victim, 0)
        .unwrap()
        .as_str()[4..20]
        .to_owned();
    Connection::open(&path)
        .unwrap()
        .execute(
            "INSERT INTO chains (family, chain_id, record_id_prefix) VALUES ('evidence', 'squatter', ?1)",
            [&prefix],
        )
        .unwrap();
    let store = SqliteStore::open(&path).unwrap();
    let err = store.append_blocking(append("victim", 0)).unwrap_err();
    assert!(
        err.to_string().contains(&format!(
            "(rec_{prefix}…) would collide with those of chain squatter"
        )),
        "{err}"
    );
    assert_eq!(store.head_sync(&victim).unwrap(), None);
    // Refused whole: nothing of the victim was bound or written, and other chains append.
    store.append_blocking(append("bystander", 0)).unwrap();
    drop(store);
    let bound = bound_chains(&path);
    assert!(bound.iter().all(|(_, c, _)| c != "victim"), "{bound:?}");
    assert!(
        bound
            .iter()
            .any(|(f, c, _)| f == "evidence" && c == "bystander"),
        "{bound:?}"
    );
}
