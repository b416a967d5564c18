//! A fixed workload for instruction counts (`valgrind --tool=callgrind`), which judge a change
//! on a machine where wall time is noisy (docs/benchmarks.md, "Evidence"): no timing, no
//! statistics, the same work every run.
//!
//! ```text
//! cargo bench -p warden-evidence --bench instructions --no-run
//! valgrind --tool=callgrind target/release/deps/instructions-<hash> memory 10000
//! ```
//!
//! Workloads (first argument, then N): `memory` appends N records to a `MemoryStore`
//! (`memory-time` does it in rounds and prints the median CPU and wall time per record;
//! `memory-hot` alternates such rounds with rounds whose appends were just copied,
//! `workload::append_just_built`); `verify` verifies them; `sqlite` appends N records to a
//! `SqliteStore` (`synchronous=FULL`) from 16 pipelining appenders, `sqlite-waiting` from 128
//! appenders that each wait for their receipt (a third argument sets the number of appenders),
//! `sqlite-latency` from one appender; `memory-shared` has two appenders share one chain (N
//! records each; then rounds, and `whole` or `one` for the peers of `workload::Shared`);
//! `memory-tail` times each of N appends to one chain and prints the longest. The SQLite
//! workloads also print their wall time, for a quick look without criterion.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use warden_contracts::*;
use warden_evidence::*;

#[path = "support/workload.rs"]
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

/// The median of `values`, which it sorts (so the smallest is first afterwards).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// This thread's CPU time in nanoseconds (`/proc/thread-self/schedstat`, first field).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// This process's threads named `warden-evidence…`: name, user and system CPU in milliseconds
/// (`/proc/self/task/*/stat`, in clock ticks of 10 ms), and how long each waited, runnable, for
/// a CPU (`schedstat`, second field).
fn store_threads() -> Vec<(String, u64, u64, u64)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = &stat[open + 1..close];
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        if name.starts_with("warden-evidence") && fields.len() > 12 {
            let ticks = |i: usize| fields[i].parse::<u64>().unwrap_or(0) * 10;
            let waited = std::fs::read_to_string(task.path().join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
                .unwrap_or(0)
                / 1_000_000;
            out.push((name.to_owned(), ticks(11), ticks(12), waited));
        }
    }
    out
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
        "hash-time" => {
            // The hashing floor of the same records (both BLAKE3 calls of each), timed the same
            // way as `memory-time`.
            let entries = workload::appends("mem", n);
            let store = MemoryStore::new();
            append_all(&store, &entries);
            let records = store.read_sync(&ChainId::new("mem").unwrap(), None, usize::MAX);
            let inputs: Vec<String> = records.iter().map(|r| hash_input(&Fields::of(r))).collect();
            let rounds: usize = args.next().map_or(30, |s| s.parse().unwrap());
            let mut cpu = Vec::new();
            for _ in 0..rounds {
                let c0 = thread_cpu_ns();
                for (r, i) in records.iter().zip(&inputs) {
                    black_box(blake3::hash(r.payload_json.as_bytes()));
                    black_box(blake3::hash(i.as_bytes()));
                }
                cpu.push((thread_cpu_ns() - c0) as f64 / n as f64);
            }
            let c = median(&mut cpu);
            eprintln!(
                "median per record, both hashes: {c:.0} ns CPU ({:.0} records/s)",
                1e9 / c
            );
        }
        "memory-time" => {
            // Rounds of N appends into a fresh store, as the criterion bench runs them; the
            // thread's CPU time (from the scheduler) next to the wall time, since on a shared
            // machine the wall time includes the time other processes ran.
            let entries = workload::appends("mem", n);
            let rounds: usize = args.next().map_or(30, |s| s.parse().unwrap());
            let mut cpu = Vec::new();
            let mut wall = Vec::new();
            // `KEEP`: keep every round's store until the end, as criterion's
            // `iter_with_large_drop` does within a batch (no freed memory to reuse).
            let keep = std::env::var_os("KEEP").is_some();
            let mut kept = Vec::new();
            for _ in 0..rounds {
                let store = MemoryStore::new();
                let (c0, w0) = (thread_cpu_ns(), std::time::Instant::now());
                append_all(&store, &entries);
                cpu.push((thread_cpu_ns() - c0) as f64 / n as f64);
                wall.push(w0.elapsed().as_nanos() as f64 / n as f64);
                if keep {
                    kept.push(store);
                }
            }
            drop(kept);
            if std::env::var_os("ROUNDS").is_some() {
                eprintln!(
                    "cpu ns/record by round: {:?}",
                    cpu.iter().map(|c| *c as u64).collect::<Vec<_>>()
                );
            }
            let (c, w) = (median(&mut cpu), median(&mut wall));
            eprintln!(
                "median per record: {c:.0} ns CPU ({:.0} records/s), {w:.0} ns wall ({:.0} records/s); min CPU {:.0} ns",
                1e9 / c,
                1e9 / w,
                cpu[0]
            );
        }
        "memory-hot" => {
            // Rounds as `memory-time`, alternating: the appends as built (cold: 10,000 appends
            // built before, their payloads out of the cache), and each batch of B appends (third
            // argument, default `JUST_BUILT_BATCH`) copied just before it is appended
            // (`workload::append_just_built`). Wall time of the appends alone.
            let entries = workload::appends("mem", n);
            let rounds: usize = args.next().map_or(30, |s| s.parse().unwrap());
            let batch: usize = args
                .next()
                .map_or(workload::JUST_BUILT_BATCH, |s| s.parse().unwrap());
            let (mut cold, mut hot) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                let store = MemoryStore::new();
                let start = std::time::Instant::now();
                append_all(&store, &entries);
                cold.push(start.elapsed().as_nanos() as f64 / n as f64);
                drop(store);
                let store = MemoryStore::new();
                let took = workload::append_just_built(&store, &entries, batch);
                hot.push(took.as_nanos() as f64 / n as f64);
            }
            let (c, h) = (median(&mut cold), median(&mut hot));
            eprintln!(
                "median per record: cold {c:.0} ns ({:.0} records/s), just built (batches of {batch}) {h:.0} ns ({:.0} records/s); min {:.0} / {:.0} ns",
                1e9 / c,
                1e9 / h,
                cold[0],
                hot[0]
            );
        }
        "memory-shared" => {
            // Two appenders on one chain (`workload::append_shared`), N records each, in rounds:
            // the median wall time per record. A fourth argument picks the peer: `whole` (the
            // whole append under the lock) or `one` (one thread, appends split).
            let (genesis, owners) = workload::shared_chain("mem-shared", n);
            let rounds: usize = args.next().map_or(30, |s| s.parse().unwrap());
            let how = match args.next().as_deref() {
                Some("whole") => workload::Shared::WholeUnderLock,
                Some("one") => workload::Shared::OneThread,
                _ => workload::Shared::Split,
            };
            let mut wall = Vec::new();
            for _ in 0..rounds {
                let store = MemoryStore::new();
                let took = workload::append_shared(&store, &genesis, &owners, how);
                wall.push(took.as_nanos() as f64 / (2 * n) as f64);
            }
            let w = median(&mut wall);
            eprintln!(
                "{how:?}: median per record: {w:.0} ns wall ({:.0} records/s)",
                1e9 / w
            );
        }
        "memory-tail" => {
            // N appends to one chain, each timed: the longest (a chain's storage growing under
            // its lock shows here) and the 99.9th percentile.
            let entries = workload::appends("mem", n);
            let store = MemoryStore::new();
            let mut times: Vec<std::time::Duration> = entries
                .iter()
                .map(|e| {
                    let t0 = std::time::Instant::now();
                    black_box(store.append_sync(e).unwrap());
                    t0.elapsed()
                })
                .collect();
            times.sort();
            eprintln!(
                "{n} appends: longest {:?}, p99.9 {:?}, median {:?}",
                times[n - 1],
                times[n * 999 / 1000],
                times[n / 2]
            );
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
            // The store's threads (writer, checkpointer, notifier): user and system CPU so far.
            for (name, user, system, waited) in store_threads() {
                eprintln!(
                    "{name}: {user} ms user, {system} ms system, {waited} ms runnable but waiting for a CPU"
                );
            }
            let (commits, records) = store.commit_stats();
            eprintln!(
                "{records} records in {commits} commits ({:.1} per commit), {elapsed:?}: {:.0} records/s",
                records as f64 / commits.max(1) as f64,
                records as f64 / elapsed.as_secs_f64()
            );
        }
        "sqlite-latency" => {
            // One appender, each append waiting for its receipt: the median and p90 latency.
            let dir = tempfile::tempdir().unwrap();
            let store = SqliteStore::open(dir.path().join("l.db")).unwrap();
            let mut times: Vec<std::time::Duration> = workload::appends("latency", n)
                .into_iter()
                .map(|e| {
                    let t = std::time::Instant::now();
                    store.append_blocking(e).unwrap();
                    t.elapsed()
                })
                .collect();
            times.sort();
            let wal = std::fs::metadata(dir.path().join("l.db-wal"))
                .map(|m| m.len())
                .unwrap_or(0);
            let db = std::fs::metadata(dir.path().join("l.db"))
                .map(|m| m.len())
                .unwrap_or(0);
            eprintln!("wal {wal} db {db}");
            eprintln!(
                "single append: median {:?}, p90 {:?}, min {:?}",
                times[n / 2],
                times[n * 9 / 10],
                times[0]
            );
        }
        "heads" => {
            // The chain hashes both stores seal for the bench chain and for one whose strings
            // need every kind of escaping: compared between builds, they show that a change
            // kept the hash inputs byte-identical.
            let dir = tempfile::tempdir().unwrap();
            let sqlite = SqliteStore::open(dir.path().join("h.db")).unwrap();
            for entries in [workload::appends("mem", n), workload::escaping_appends()] {
                let memory = MemoryStore::new();
                let mut last = None;
                for e in &entries {
                    let m = memory.append_sync(e).unwrap();
                    let s = sqlite.append_blocking(e.clone()).unwrap();
                    assert_eq!(m, s);
                    last = Some(m);
                }
                let last = last.unwrap();
                println!("{} {} {}", last.chain_id, last.sequence, last.chain_hash);
            }
        }
        other => panic!("unknown workload {other}"),
    }
}
