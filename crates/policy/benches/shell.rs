//! Shell decision latency, parse included: a `bash` call of 1, 5 and 20 subcommands (lists,
//! pipelines, substitutions, wrappers, redirects) through the tree-sitter splitter, the
//! normalization and the rule lists; and the splitter alone, for comparison. Target: < 20 µs
//! for 5 subcommands (docs/design/performance.md#targets). Results: docs/shell.md.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;
use warden_policy::{
    Call, Decision, PathEnv, PolicyBuilder, PolicySnapshot, Rule, RuleSet, Source,
};

fn policy() -> PolicySnapshot {
    let rules = |s: &str| Rule::parse_list(s).unwrap();
    let set = RuleSet {
        allow: rules(
            "bash(git status:*) bash(git diff:*) bash(git log:*) bash(ls:*) bash(cat:*) \
             bash(grep:*) bash(head:*) bash(wc:*) bash(echo:*) bash(cargo test:*) edit(/repo/**)",
        ),
        deny: rules("bash(rm:*) bash(git push:*) bash(curl:*) edit(/etc/**)"),
        ask: rules("bash(git commit:*)"),
        ..RuleSet::default()
    };
    PolicyBuilder::new()
        .default(Decision::Ask)
        .path_env(PathEnv {
            project_root: "/repo".into(),
            home: Some("/home/agent".into()),
        })
        .own(Source::trusted("bench"), set)
        .build()
        .unwrap()
}

/// A command of `n` subcommands from `parts` joined by `&&` (a part with `|` or `$(` counts
/// two).
fn command(parts: &[&str], n: usize) -> String {
    let mut out = Vec::new();
    let mut count = 0;
    let mut i = 0;
    while count < n {
        let p = parts[i % parts.len()];
        let weight = if p.contains('|') || p.contains("$(") {
            2
        } else {
            1
        };
        if count + weight > n {
            out.push("true".to_owned());
            count += 1;
        } else {
            out.push(p.to_owned());
            count += weight;
        }
        i += 1;
    }
    out.join(" && ")
}

/// Plain lists and pipelines of words and quotes: the splitter's fast path.
const PLAIN: [&str; 5] = [
    "git status --short",
    "ls -la src | grep rs",
    "git diff --stat",
    "cargo test -q",
    "echo 'done: all checks'",
];

/// Substitutions, wrappers, redirects: tree-sitter.
const MIXED: [&str; 5] = [
    "git status --short",
    "ls -la src | grep rs",
    "echo \"$(git log --oneline -1)\"",
    "timeout 60 cargo test -q",
    "cat README.md > /repo/out.txt",
];

fn shell(c: &mut Criterion) {
    let snapshot = policy();
    for (name, parts) in [("plain", &PLAIN), ("mixed", &MIXED)] {
        let mut group = c.benchmark_group(format!("shell_decide_{name}"));
        for n in [1usize, 5, 20] {
            let command = command(parts, n);
            let subjects = warden_policy::shell::split_command(&command).unwrap();
            let commands = subjects
                .iter()
                .filter(|s| matches!(s, warden_policy::shell::ShellSubject::Command(_)))
                .count();
            assert_eq!(commands, n, "{command}");
            let call = Call::new("bash", json!({ "command": command }));
            group.bench_with_input(BenchmarkId::from_parameter(n), &call, |b, call| {
                b.iter(|| black_box(snapshot.decide(black_box(call))))
            });
        }
        group.finish();
        let mut group = c.benchmark_group(format!("shell_split_{name}"));
        for n in [1usize, 5, 20] {
            let command = command(parts, n);
            group.bench_with_input(BenchmarkId::from_parameter(n), &command, |b, command| {
                b.iter(|| black_box(warden_policy::shell::split_command(black_box(command))))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, shell);
criterion_main!(benches);
