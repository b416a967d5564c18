//! Policy load: TOML text → parsed file → compiled, indexed, digested `PolicySnapshot`, at
//! 1,000, 10,000 and 100,000 rules of mixed kinds (the decide bench's mix: a quarter each of
//! shell, path, domain and tool-name rules over deny, ask and allow), with the lists written as
//! arrays (one rule per element) and as one whitespace-separated string. Plus decisions/s over
//! one `Arc<PolicySnapshot>` shared by 1 and 2 threads. Targets: 10,000 rules < 20 ms, 100,000
//! < 200 ms, linear (docs/design/performance.md#targets). Results: docs/benchmarks.md.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use warden_policy::{Call, Format, LoadedPolicy, PathEnv, PolicySnapshot};

/// The rules of the decide bench's policy of `n` rules, by list (deny, ask, allow).
fn lists(n: usize) -> [Vec<String>; 3] {
    let mut out: [Vec<String>; 3] = Default::default();
    for i in 0..n {
        let (rule, tool_glob) = match i % 4 {
            0 => (format!("bash(tool{i} sub{i}:*)"), false),
            1 => (format!("read(/data/d{i}/**)"), false),
            2 => (format!("web_fetch(domain:*.host{i}.example)"), false),
            _ => (format!("mcp{i}__*"), true),
        };
        match i % 3 {
            0 if !tool_glob => out[2].push(rule),
            1 => out[0].push(rule),
            _ => out[1].push(rule),
        }
    }
    out[2].push("bash(git status:*)".into());
    out[2].push("read(/repo/src/**)".into());
    out[0].push("bash(rm:*)".into());
    out[0].push("read(/repo/.env)".into());
    out
}

/// The policy of `n` rules as TOML: each list an array of rule strings (`array`), or one string
/// of space-separated rules.
fn policy_toml(n: usize, array: bool) -> String {
    let mut text = String::from("default = \"ask\"\n");
    for (name, rules) in ["deny", "ask", "allow"].iter().zip(lists(n)) {
        if array {
            text.push_str(&format!("{name} = [\n"));
            for rule in rules {
                text.push_str(&format!("  \"{rule}\",\n"));
            }
            text.push_str("]\n");
        } else {
            text.push_str(&format!("{name} = \"{}\"\n", rules.join(" ")));
        }
    }
    text
}

fn env() -> PathEnv {
    PathEnv {
        project_root: "/repo".into(),
        home: None,
    }
}

fn load(text: &str) -> PolicySnapshot {
    let file =
        LoadedPolicy::from_text(text.to_owned(), Format::Toml, "policy.toml", "policy", None)
            .unwrap();
    PolicySnapshot::from_files(&[file], env()).unwrap()
}

fn loading(c: &mut Criterion) {
    let mut group = c.benchmark_group("load");
    group.sample_size(10);
    for n in [1_000, 10_000, 100_000] {
        for (form, array) in [("array", true), ("string", false)] {
            let text = policy_toml(n, array);
            group.throughput(Throughput::Elements(n as u64));
            group.bench_with_input(BenchmarkId::new(form, n), &text, |b, text| {
                b.iter_with_large_drop(|| load(black_box(text)))
            });
        }
    }
    group.finish();
}

/// Decisions per second over one snapshot shared by `threads` threads, each deciding the same
/// mix of calls: the snapshot is immutable, so nothing on the decision path is shared mutably
/// and the rate should grow with the threads (up to the cores the machine has).
fn across_threads(c: &mut Criterion) {
    let snapshot = Arc::new(load(&policy_toml(10_000, false)));
    let calls = Arc::new([
        Call::new("read", json!({"path": "/repo/src/lib.rs"})),
        Call::new("read", json!({"path": "/repo/.env"})),
        Call::new("read", json!({"path": "/elsewhere/x"})),
        Call::new("web_fetch", json!({"url": "https://docs.rs/x"})),
        Call::new("bash", json!({"command": "git status --short"})),
        Call::new("bash", json!({"command": "rm -rf build"})),
    ]);
    let mut group = c.benchmark_group("decide_shared");
    for threads in [1usize, 2] {
        // An iteration is every thread deciding every call once: criterion's elements/s is
        // the decisions/s of all threads together.
        group.throughput(Throughput::Elements((threads * calls.len()) as u64));
        group.bench_function(BenchmarkId::new("threads", threads), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                std::thread::scope(|s| {
                    for _ in 0..threads {
                        let snapshot = Arc::clone(&snapshot);
                        let calls = Arc::clone(&calls);
                        s.spawn(move || {
                            for _ in 0..iters {
                                for call in calls.iter() {
                                    black_box(snapshot.decide(black_box(call)));
                                }
                            }
                        });
                    }
                });
                start.elapsed()
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1));
    targets = loading, across_threads
}
criterion_main!(benches);
