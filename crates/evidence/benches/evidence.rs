//! Evidence throughput and latency (docs/design/performance.md#targets): SQLite with
//! `synchronous=FULL` and group commit under concurrent appenders (target ≥ 50,000 durable
//! records/s) against one appender, single-append latency, verification, and the in-memory
//! reference store (≥ 150,000 records/s is enough). Results: docs/benchmarks.md.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use warden_contracts::*;
use warden_evidence::*;

#[path = "support/workload.rs"]
mod workload;
use workload::appends;

fn memory(c: &mut Criterion) {
    let n = 10_000;
    let entries = appends("mem", n);
    let mut g = c.benchmark_group("memory_chain");
    g.throughput(Throughput::Elements(n as u64));
    // The store is returned, so dropping its 10,000 records is not timed: appending is.
    g.bench_function("append_10k_records", |b| {
        b.iter_with_large_drop(|| {
            let store = MemoryStore::new();
            for e in &entries {
                black_box(store.append_sync(e).unwrap());
            }
            store
        });
    });
    let store = MemoryStore::new();
    for e in &entries {
        store.append_sync(e).unwrap();
    }
    let records = store.read_sync(&ChainId::new("mem").unwrap(), None, usize::MAX);
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("verify_10k_records", |b| {
        b.iter(|| {
            let r = verify_records(
                Family::Evidence,
                &ChainId::new("mem").unwrap(),
                records.iter().cloned().map(Ok),
                &Expected::Nothing,
            );
            assert!(r.result.valid);
        });
    });
    g.finish();
    let mut g = c.benchmark_group("single_append_latency");
    g.bench_function("memory", |b| {
        let many = appends("lat", 100_000);
        b.iter_custom(|iters| {
            let mut store = MemoryStore::new();
            let start = Instant::now();
            for i in 0..iters as usize {
                let k = i % many.len();
                if k == 0 && i > 0 {
                    store = MemoryStore::new();
                }
                black_box(store.append_sync(&many[k]).unwrap());
            }
            start.elapsed()
        });
    });
    g.finish();
}

/// The SQLite store the group-commit benches share, and the round that names their chains.
struct Sqlite<'a> {
    store: &'a Arc<SqliteStore>,
    round: &'a AtomicU64,
}

impl Sqlite<'_> {
    /// One bench of `name`, for each number of appenders in `counts`: each appender's `per(k)`
    /// appends on its own chain (`prefix`, round, appender), turned by `make` into what `run`
    /// appends; only `run` is timed.
    fn bench<T>(
        &self,
        g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
        (name, prefix): (&str, &str),
        counts: &[usize],
        per: impl Fn(usize) -> usize,
        make: impl Fn(Vec<EvidenceAppend>) -> Vec<T>,
        run: impl Fn(&Arc<SqliteStore>, Vec<Vec<T>>),
    ) {
        for &k in counts {
            let per = per(k);
            g.throughput(Throughput::Elements((k * per) as u64));
            g.bench_with_input(BenchmarkId::new(name, k), &k, |b, &k| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let r = self.round.fetch_add(1, Ordering::Relaxed);
                        let work = (0..k)
                            .map(|t| make(appends(&format!("{prefix}{r}-{t}"), per)))
                            .collect();
                        let start = Instant::now();
                        run(self.store, work);
                        total += start.elapsed();
                    }
                    total
                });
            });
        }
    }
}

fn sqlite(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("bench.db")).unwrap());
    let round = AtomicU64::new(0);
    let mut g = c.benchmark_group("sqlite_full_group_commit");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(15));
    let sqlite = Sqlite {
        store: &store,
        round: &round,
    };
    // Appenders that each wait for their receipt (`workload::waiting`).
    sqlite.bench(
        &mut g,
        ("concurrent_appenders", "c"),
        &[1, 16, 128, 512],
        |k| if k == 1 { 200 } else { 24_576 / k },
        |appends| appends,
        workload::waiting,
    );
    // Appenders that pipeline (`workload::pipelined`), with parsed appends and with typed ones
    // (what the recorder appends; made before the timed part).
    sqlite.bench(
        &mut g,
        ("pipelined_appenders", "p"),
        &[16, 64],
        |k| 32_768 / k,
        |appends| appends,
        |store, work| workload::pipelined(store, work, |s, e| Box::pin(s.append_queued(e))),
    );
    sqlite.bench(
        &mut g,
        ("pipelined_typed_appenders", "t"),
        &[16],
        |k| 32_768 / k,
        |appends| {
            appends
                .iter()
                .map(|e| (workload::typed_of(e), e.expected_sequence))
                .collect()
        },
        |store, work| workload::pipelined(store, work, |s, (t, seq)| s.append_typed(t, seq)),
    );
    g.finish();
    let (commits, records) = store.commit_stats();
    eprintln!(
        "sqlite group commit: {records} records in {commits} commits ({:.1} records/commit)",
        records as f64 / commits.max(1) as f64
    );
    let mut g = c.benchmark_group("single_append_latency");
    g.sample_size(20);
    g.bench_function("sqlite_full", |b| {
        let r = round.fetch_add(1, Ordering::Relaxed);
        let many = appends(&format!("latency-{r}"), 100_000);
        let mut i = 0usize;
        b.iter(|| {
            black_box(store.append_blocking(many[i].clone()).unwrap());
            i += 1;
        });
    });
    g.finish();
}

criterion_group!(benches, memory, sqlite);
criterion_main!(benches);
