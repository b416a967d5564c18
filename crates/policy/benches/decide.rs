//! Decision latency on a compiled snapshot at 10, 100, 1,000 and 10,000 rules of mixed kinds
//! (shell, path, domain and tool-name globs), on the allow, deny and no-match paths, plus a
//! shell command through the splitter. Results: docs/benchmarks.md.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;
use warden_policy::{
    Call, Decision, PathEnv, PolicyBuilder, PolicySnapshot, Rule, RuleSet, Source,
};

/// A policy of `n` rules: a quarter each shell, path, domain and tool-name rules, spread over
/// deny, ask and allow, with the probes below hitting rules in the middle of the lists.
fn policy(n: usize) -> PolicySnapshot {
    let mut set = RuleSet::default();
    for i in 0..n {
        let rule = match i % 4 {
            0 => format!("bash(tool{i} sub{i}:*)"),
            1 => format!("read(/data/d{i}/**)"),
            2 => format!("web_fetch(domain:*.host{i}.example)"),
            _ => format!("mcp{i}__*"),
        };
        let rule = Rule::parse(&rule).unwrap();
        match i % 3 {
            0 if !rule.is_tool_glob() => set.allow.push(rule),
            1 => set.deny.push(rule),
            _ => set.ask.push(rule),
        }
    }
    set.allow.push(Rule::parse("bash(git status:*)").unwrap());
    set.allow.push(Rule::parse("read(/repo/src/**)").unwrap());
    set.deny.push(Rule::parse("bash(rm:*)").unwrap());
    set.deny.push(Rule::parse("read(/repo/.env)").unwrap());
    PolicyBuilder::new()
        .default(Decision::Ask)
        .path_env(PathEnv {
            project_root: "/repo".into(),
            home: None,
        })
        .own(Source::trusted("bench"), set)
        .build()
        .unwrap()
}

fn decisions(c: &mut Criterion) {
    let calls = [
        (
            "allow_path",
            Call::new("read", json!({"path": "/repo/src/lib.rs"})),
        ),
        (
            "deny_path",
            Call::new("read", json!({"path": "/repo/.env"})),
        ),
        (
            "nomatch_path",
            Call::new("read", json!({"path": "/elsewhere/x"})),
        ),
        (
            "nomatch_domain",
            Call::new("web_fetch", json!({"url": "https://docs.rs/x"})),
        ),
        (
            "allow_shell",
            Call::new("bash", json!({"command": "git status --short"})),
        ),
        (
            "deny_shell",
            Call::new("bash", json!({"command": "rm -rf build"})),
        ),
    ];
    let mut group = c.benchmark_group("decide");
    for n in [10, 100, 1_000, 10_000] {
        let snapshot = policy(n);
        for (name, call) in &calls {
            group.bench_with_input(BenchmarkId::new(*name, n), call, |b, call| {
                b.iter(|| snapshot.decide(black_box(call)))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, decisions);
criterion_main!(benches);
