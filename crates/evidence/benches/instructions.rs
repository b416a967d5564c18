//! A fixed workload for instruction counts (`valgrind --tool=callgrind`), which judge a change
//! on a machine where wall time is noisy (docs/benchmarks.md, "Evidence"): no timing, no
//! statistics, the same work every run.
//!
//! ```text
//! cargo bench -p warden-evidence --bench instructions --no-run
//! valgrind --tool=callgrind target/release/deps/instructions-<hash> memory 10000
//! ```
//!
//! Workloads (first argument, then N): `memory` appends N records to a `MemoryStore`; `verify`
//! verifies them; `sqlite` appends N records to a `SqliteStore` (`synchronous=FULL`) from 16
//! pipelining appenders, `sqlite-waiting` from 128 appenders that each wait for their receipt
//! (a third argument sets the number of appenders). The SQLite workloads also print their wall
//! time, for a quick look without criterion.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use warden_contracts::*;
use warden_evidence::*;

#[path = "workload.rs"]
mod workload;

#[inline(never)]
fn append_all(store: &MemoryStore, entries: &[EvidenceAppend]) {
    for e in entries {
        black_box(store.append_sync(e).unwrap());
    }
}

#[inline(never)]
fn verify_all(records: &[EvidenceRecord]) {
    let r = verify_records(
        Family::Evidence,
        &ChainId::new("mem").unwrap(),
        records.iter().cloned().map(Ok),
        &Expected::Nothing,
    );
    assert!(r.result.valid);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_else(|| "memory".into());
    let n: usize = args.next().map_or(10_000, |s| s.parse().unwrap());
    match what.as_str() {
        "memory" => {
            let entries = workload::appends("mem", n);
            append_all(&MemoryStore::new(), &entries);
        }
        "verify" => {
            let entries = workload::appends("mem", n);
            let store = MemoryStore::new();
            append_all(&store, &entries);
            let records = store.read_sync(&ChainId::new("mem").unwrap(), None, usize::MAX);
            verify_all(&records);
        }
        "sqlite" | "sqlite-waiting" => {
            // Appenders: the third argument (default 16 pipelining, 128 waiting).
            let waiting = what == "sqlite-waiting";
            let k: usize = args
                .next()
                .map_or(if waiting { 128 } else { 16 }, |s| s.parse().unwrap());
            let dir = tempfile::tempdir().unwrap();
            let store = Arc::new(SqliteStore::open(dir.path().join("i.db")).unwrap());
            let work: Vec<Vec<EvidenceAppend>> = (0..k)
                .map(|t| workload::appends(&format!("p-{t}"), n / k))
                .collect();
            let start = std::time::Instant::now();
            if waiting {
                workload::waiting(&store, work);
            } else {
                workload::pipelined(&store, work);
            }
            let elapsed = start.elapsed();
            let (commits, records) = store.commit_stats();
            eprintln!(
                "{records} records in {commits} commits ({:.1} per commit), {elapsed:?}: {:.0} records/s",
                records as f64 / commits.max(1) as f64,
                records as f64 / elapsed.as_secs_f64()
            );
        }
        other => panic!("unknown workload {other}"),
    }
}
