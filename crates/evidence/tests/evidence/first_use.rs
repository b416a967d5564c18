//! First use of a store by many at once: writers that open the same not-yet-existing file
//! together (threads of one process, and separate processes: this test binary re-invoked as
//! children) all get the one store, each chain verifies, and a foreign SQLite file opened the
//! same way is still refused and left as it was.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::json;
use warden_contracts::*;
use warden_evidence::payload::CloseDisposition;
use warden_evidence::*;

use crate::support::*;

const WRITERS: usize = 8;

/// One writer's work on a store it opens itself: a governed chain of its own (bound policy,
/// one call that completed, closed), then a clean close.
fn write_one_chain(path: &Path, chain: &str) -> Result<(), Error> {
    let store = Arc::new(SqliteStore::open(path)?);
    block_on(async {
        let rec = GovernedRecorder::open(store.clone(), binding(chain), &snapshot(), clock())
            .await
            .unwrap();
        allowed(&rec, &format!("op-{chain}"))
            .await
            .begin()
            .await
            .unwrap()
            .completed(&json!({"writer": chain}))
            .await
            .unwrap();
        rec.close(CloseDisposition::Completed).await.unwrap();
    });
    drop(store);
    Ok(())
}

/// Every writer's chain is in the store, whole, and verifies.
fn assert_every_chain_verifies(path: &Path) {
    let reader = SqliteReader::open(path).unwrap();
    let mut chains: Vec<String> = reader
        .chain_ids()
        .unwrap()
        .into_iter()
        .map(|c| c.as_str().to_owned())
        .collect();
    chains.sort();
    let mut expected: Vec<String> = (0..WRITERS).map(|i| format!("writer-{i}")).collect();
    expected.sort();
    assert_eq!(chains, expected);
    for chain in &chains {
        let report = reader
            .verify(&ChainId::new(chain.as_str()).unwrap(), &Expected::Nothing)
            .unwrap();
        assert!(report.result.valid, "{chain}: {report:?}");
        // Bound, started, gate, authorized, began, completed, closed: nothing lost.
        assert!(report.result.checked_records >= 5, "{chain}: {report:?}");
    }
}

#[test]
fn writers_in_threads_that_create_one_store_together_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh/evidence.db");
    let start = Barrier::new(WRITERS);
    let results: Vec<Result<(), Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..WRITERS)
            .map(|i| {
                let (path, start) = (&path, &start);
                s.spawn(move || {
                    start.wait();
                    write_one_chain(path, &format!("writer-{i}"))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, r) in results.iter().enumerate() {
        assert!(r.is_ok(), "writer {i}: {r:?}");
    }
    assert_every_chain_verifies(&path);
}

/// The child's work: waits for the `go` file, then writes its chain to `store.db` and reports
/// the outcome in `writer-N.out`. Does nothing unless `WARDEN_FIRST_USE_DIR` is set.
#[test]
fn first_use_child() {
    let (Ok(dir), Ok(name)) = (
        std::env::var("WARDEN_FIRST_USE_DIR"),
        std::env::var("WARDEN_FIRST_USE_CHAIN"),
    ) else {
        return;
    };
    let dir = Path::new(&dir);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("go").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let outcome = match write_one_chain(&dir.join("store.db"), &name) {
        Ok(()) => "ok".to_owned(),
        Err(e) => format!("error: {e}"),
    };
    std::fs::write(dir.join(format!("{name}.out")), outcome).unwrap();
}

#[test]
fn processes_that_create_one_store_together_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let children: Vec<_> = (0..WRITERS)
        .map(|i| {
            Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "first_use::first_use_child",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("WARDEN_FIRST_USE_DIR", dir.path())
                .env("WARDEN_FIRST_USE_CHAIN", format!("writer-{i}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    // Every child is started and polling before any of them may open the store.
    std::fs::write(dir.path().join("go"), "").unwrap();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    for i in 0..WRITERS {
        let out = std::fs::read_to_string(dir.path().join(format!("writer-{i}.out"))).unwrap();
        assert_eq!(out, "ok", "writer-{i}");
    }
    assert_every_chain_verifies(&dir.path().join("store.db"));
}

#[test]
fn a_foreign_database_opened_by_many_writers_at_once_is_refused_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE notes(text); INSERT INTO notes VALUES ('mine');")
        .unwrap();
    let before = file_bytes(&path);
    let start = Barrier::new(WRITERS);
    let results: Vec<Result<SqliteStore, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..WRITERS)
            .map(|_| {
                let (path, start) = (&path, &start);
                s.spawn(move || {
                    start.wait();
                    SqliteStore::open(path)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &results {
        match r {
            Err(Error::NotEvidenceStore { why, .. }) => {
                assert!(why.contains("application id 0x0"), "{why}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
    assert_eq!(file_bytes(&path), before);
    let tables: Vec<String> = Connection::open(&path)
        .unwrap()
        .prepare("SELECT name FROM sqlite_master")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(tables, vec!["notes"]);
}
