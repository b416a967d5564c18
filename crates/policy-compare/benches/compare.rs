//! Per-call decision cost of Warden, Cedar and Rego on the same generated policy at 10, 1,000
//! and 10,000 rules (`compare/<engine>/<rules>`). Each iteration decides the next call of the
//! generated cycle (every rule kind, matching and not; see the crate docs), so a figure is the
//! mean over the mix. Warden decides a prepared `Call` and builds its full verdict; Cedar and
//! Rego build their request (context, input) from the call's tool and argument each time.
//!
//! `COMPARE_SIZES=10,1000` limits the sizes (`cargo xtask bench --quick` does).
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use warden_policy_compare::{CedarEngine, RegoEngine, SIZES, WardenEngine, calls, rules};

fn sizes() -> Vec<usize> {
    match std::env::var("COMPARE_SIZES") {
        Ok(s) => s.split(',').filter_map(|n| n.trim().parse().ok()).collect(),
        Err(_) => SIZES.to_vec(),
    }
}

fn compare(c: &mut Criterion) {
    let mut group = c.benchmark_group("compare");
    for n in sizes() {
        let rules = rules(n);
        let calls = calls(n);
        let warden_calls: Vec<_> = calls.iter().map(|c| c.warden()).collect();
        let peer_calls: Vec<(&str, &str)> = calls
            .iter()
            .map(|c| (c.tool.as_str(), c.peer_arg()))
            .collect();
        let warden = WardenEngine::new(&rules).unwrap();
        let mut i = 0;
        group.bench_function(BenchmarkId::new("warden", n), |b| {
            b.iter(|| {
                i = (i + 1) % warden_calls.len();
                warden.decide(black_box(&warden_calls[i]))
            })
        });
        let cedar = CedarEngine::new(&rules).unwrap();
        group.bench_function(BenchmarkId::new("cedar", n), |b| {
            b.iter(|| {
                i = (i + 1) % peer_calls.len();
                let (tool, arg) = peer_calls[i];
                cedar.decide(black_box(tool), black_box(arg)).unwrap()
            })
        });
        let rego = RegoEngine::new(&rules).unwrap();
        group.bench_function(BenchmarkId::new("rego", n), |b| {
            b.iter(|| {
                i = (i + 1) % peer_calls.len();
                let (tool, arg) = peer_calls[i];
                rego.decide(black_box(tool), black_box(arg)).unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, compare);
criterion_main!(benches);
