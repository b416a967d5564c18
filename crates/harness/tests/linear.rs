//! Linear cost (docs/design/performance.md#targets: no input whose cost grows faster than
//! linearly in its size). Every kind of input Warden reads — a policy's rules, a call's
//! arguments, a shell command, a provider's hook event — is fed at two sizes, `n` and `4n`,
//! and the work done is compared, never the time taken:
//!
//! - heap allocations and bytes allocated on this thread (a counting global allocator,
//!   `allocation-counter`, which counts per thread, so tests running alongside do not count);
//! - the work the policy crate counts where nothing is allocated (`warden_policy::work`,
//!   feature `work-counters`: each probe of the rule index and its length, each candidate rule
//!   tried, each step of the shell parser, each line scanned for an error's location).
//!
//! Each count at `4n` must be at most 4.5 × its count at `n`, plus a small constant: anything
//! quadratic (or `n log n` with a large factor) fails, whatever the machine's load. This crate
//! holds the test because it is the lowest one that sees every input kind: policies and calls
//! (through `warden-policy`) and the providers' hook events.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fmt::Write as _;

use serde_json::json;
use warden_harness::{claude_code, codex, gemini};
use warden_policy::{Call, Format, LoadedPolicy, PathEnv, PolicySnapshot};

/// What running something once cost.
#[derive(Debug, Clone, Copy)]
struct Work {
    allocations: u64,
    bytes: u64,
    units: u64,
}

fn work(f: impl FnOnce()) -> Work {
    let mut units = 0;
    let info = allocation_counter::measure(|| {
        units = warden_policy::work::measure(f).1;
    });
    Work {
        allocations: info.count_total,
        bytes: info.bytes_total,
        units,
    }
}

/// Feeds `run` the input `make` builds at size `n` and at `4n` (after a warm-up run at `n`, so
/// what is built once per thread — the shell parser, lazily compiled tables — is not counted)
/// and asserts that no count grew faster than linearly.
fn assert_linear<T>(what: &str, n: usize, make: impl Fn(usize) -> T, run: impl Fn(&T)) {
    let (small, large) = (make(n), make(4 * n));
    run(&small);
    let at_n = work(|| run(&small));
    let at_4n = work(|| run(&large));
    let counts = [
        ("allocations", at_n.allocations, at_4n.allocations, 64),
        ("bytes allocated", at_n.bytes, at_4n.bytes, 64 * 1024),
        ("work units", at_n.units, at_4n.units, 256),
    ];
    for (name, small, large, slack) in counts {
        assert!(
            large as f64 <= 4.5 * small as f64 + slack as f64,
            "{what}: {name} went from {small} at n = {n} to {large} at 4n = {}: faster than linear",
            4 * n
        );
    }
    eprintln!("{what}: n = {n}: {at_n:?}; 4n: {at_4n:?}");
}

fn env() -> PathEnv {
    PathEnv {
        project_root: "/repo".into(),
        home: Some("/home/u".into()),
    }
}

/// The decide bench's mix: a quarter each shell, path, domain and tool-name rules.
fn rule(i: usize) -> String {
    match i % 4 {
        0 => format!("bash(tool{i} sub{i}:*)"),
        1 => format!("read(/data/d{i}/**)"),
        2 => format!("web_fetch(domain:*.host{i}.example)"),
        _ => format!("mcp{i}__*"),
    }
}

/// `n` rules over deny and ask (tool-name rules are not allowed in allow lists), as TOML:
/// one rule per array element, or one string per list.
fn policy_toml(n: usize, array: bool) -> String {
    let (mut deny, mut ask) = (Vec::new(), Vec::new());
    for i in 0..n {
        if i % 2 == 0 { &mut deny } else { &mut ask }.push(rule(i));
    }
    let mut text = String::from("default = \"ask\"\nallow = [\"read\"]\n");
    for (name, rules) in [("deny", deny), ("ask", ask)] {
        if array {
            let items: Vec<String> = rules.iter().map(|r| format!("  \"{r}\",\n")).collect();
            let _ = write!(text, "{name} = [\n{}]\n", items.concat());
        } else {
            let _ = writeln!(text, "{name} = \"{}\"", rules.join(" "));
        }
    }
    text
}

fn compile(text: &str) -> PolicySnapshot {
    let file = LoadedPolicy::from_text(text.to_owned(), Format::Toml, "p.toml", "p", None)
        .expect("the policy parses");
    PolicySnapshot::from_files(&[file], env()).expect("the policy compiles")
}

#[test]
fn a_policys_rules_cost_linear_time_to_load() {
    assert_linear(
        "rules, one per array element",
        500,
        |n| policy_toml(n, true),
        |t| drop(compile(t)),
    );
    assert_linear(
        "rules, one string per list",
        500,
        |n| policy_toml(n, false),
        |t| drop(compile(t)),
    );
    assert_linear(
        "rules with a note each",
        300,
        |n| {
            let mut text = String::from("default = \"ask\"\ndeny = [\n");
            for i in 0..n {
                let _ = writeln!(text, "  \"bash(tool{i}:*)\",");
            }
            text.push_str("]\n[notes]\n");
            for i in 0..n {
                let _ = writeln!(text, "\"bash(tool{i}:*)\" = \"why {i}\"");
            }
            text
        },
        |t| drop(compile(t)),
    );
    assert_linear(
        "sources, two rules each",
        100,
        |n| {
            let mut text = String::from("default = \"ask\"\n");
            for i in 0..n {
                let _ = writeln!(
                    text,
                    "[[sources]]\nname = \"s{i}\"\nrank = -{i}\ntrusted = true\n\
                     allow = [\"bash(ok{i}:*)\"]\ndeny = [\"read(/s{i}/**)\"]"
                );
            }
            text
        },
        |t| drop(compile(t)),
    );
    assert_linear(
        "the line of a rule an error names",
        500,
        |n| {
            let mut text = policy_toml(n, true);
            text.push_str("[[sources]]\nname = \"late\"\ndeny = [\"bash(\"]\n");
            text
        },
        |t| {
            let file = LoadedPolicy::from_text(t.clone(), Format::Toml, "p.toml", "p", None)
                .expect("the policy parses");
            assert!(PolicySnapshot::from_files(&[file], env()).is_err());
        },
    );
}

/// A policy of 200 rules of the mix, plus rules whose keys are long (a deep folder, a long
/// domain), so every index probe length is in use.
fn decision_policy() -> PolicySnapshot {
    let deep: String = (0..40).map(|i| format!("/deep{i}")).collect();
    let mut text = policy_toml(200, true);
    let _ = write!(
        text,
        "[[sources]]\nname = \"org\"\ntrusted = true\n\
         deny = [\"bash(rm:*)\", \"read({deep}/**)\", \"web_fetch(domain:*.{}example.com)\"]\n\
         allow = [\"bash(git status:*)\", \"bash(echo:*)\", \"read(/repo/**)\", \
         \"web_fetch(domain:*.example.com)\"]\n",
        (0..20).map(|i| format!("label{i}.")).collect::<String>(),
    );
    compile(&text)
}

#[test]
fn a_calls_arguments_cost_linear_time_to_decide() {
    let policy = decision_policy();
    assert_linear(
        "a path's folders",
        100,
        |n| {
            let path: String = (0..n).map(|i| format!("/d{i}")).collect();
            Call::new("read", json!({ "path": format!("/repo{path}/file.rs") }))
        },
        |call| drop(policy.decide(call)),
    );
    assert_linear(
        "a host's labels",
        80,
        |n| {
            let labels: String = (0..n).map(|i| format!("l{i}.")).collect();
            Call::new(
                "web_fetch",
                json!({ "url": format!("https://{labels}example.com/x") }),
            )
        },
        |call| drop(policy.decide(call)),
    );
    assert_linear(
        "a tool's argument object",
        200,
        |n| {
            let args: serde_json::Map<String, serde_json::Value> = (0..n)
                .map(|i| (format!("key{i}"), json!(format!("value {i}"))))
                .collect();
            Call::new("mcp7__tool", serde_json::Value::Object(args))
        },
        |call| drop(policy.decide(call)),
    );
}

#[test]
fn a_shell_commands_cost_linear_time_to_split_and_decide() {
    let policy = decision_policy();
    let bash = |command: &String| Call::new("bash", json!({ "command": command }));
    /// A shape of command: what it is, its size `n`, and the command of size `n`.
    type Case = (&'static str, usize, fn(usize) -> String);
    let cases: [Case; 6] = [
        ("a list of commands", 50, |n| {
            (0..n)
                .map(|i| format!("tool{i} sub{i} --flag x"))
                .collect::<Vec<_>>()
                .join(" && ")
        }),
        ("a pipeline", 50, |n| {
            (0..n)
                .map(|i| format!("grep -v pattern{i}"))
                .collect::<Vec<_>>()
                .join(" | ")
        }),
        ("one command's words", 200, |n| {
            let words: Vec<String> = (0..n).map(|i| format!("word{i}")).collect();
            format!("echo {}", words.join(" "))
        }),
        ("one quoted word", 2_000, |n| {
            format!("echo '{}'", "x".repeat(n))
        }),
        ("nested substitutions", 12, |n| {
            let mut command = String::from("echo done");
            for i in 0..n {
                command = format!("echo {i} $({command})");
            }
            command
        }),
        ("redirects", 40, |n| {
            (0..n)
                .map(|i| format!("echo {i} > out{i}.txt"))
                .collect::<Vec<_>>()
                .join("; ")
        }),
    ];
    for (what, n, make) in cases {
        assert_linear(
            what,
            n,
            |n| bash(&make(n)),
            |call| drop(policy.decide(call)),
        );
    }
}

#[test]
fn a_hook_events_cost_linear_time_to_parse_and_map() {
    let policy = decision_policy();
    assert_linear(
        "a Claude Code Write event's content",
        10_000,
        |n| {
            json!({
                "session_id": "s", "cwd": "/repo", "hook_event_name": "PreToolUse",
                "tool_name": "Write", "tool_use_id": "t",
                "tool_input": {"file_path": "/repo/src/a.rs", "content": "x".repeat(n)},
            })
            .to_string()
        },
        |text| {
            let event = claude_code::parse_event(text).expect("the event parses");
            let claude_code::HookEvent::PreToolUse(e) = event else {
                panic!("a PreToolUse event")
            };
            let input = e.tool_input.as_ref().expect("tool_input");
            let call = claude_code::to_call(
                e.tool_name.as_deref().unwrap_or_default(),
                input,
                e.cwd.as_deref(),
            );
            drop(policy.decide(&call));
        },
    );
    assert_linear(
        "a Codex patch's files",
        50,
        |n| {
            let mut patch = String::from("*** Begin Patch\n");
            for i in 0..n {
                let _ = write!(patch, "*** Update File: src/f{i}.rs\n@@\n-a\n+b\n");
            }
            patch.push_str("*** End Patch\n");
            json!({
                "session_id": "s", "turn_id": "1", "cwd": "/repo",
                "hook_event_name": "PreToolUse", "model": "m", "permission_mode": "default",
                "tool_name": "apply_patch", "tool_use_id": "c",
                "tool_input": {"command": patch},
            })
            .to_string()
        },
        |text| {
            let request = codex::parse_event(text).expect("the event parses");
            let mapped = codex::to_call(&request).expect("the call maps");
            let verdict = match mapped.subjects {
                None => policy.decide(&mapped.call),
                Some(subjects) => policy.decide_subjects(&mapped.call, subjects),
            };
            drop(verdict);
        },
    );
    assert_linear(
        "a Gemini shell event's command",
        50,
        |n| {
            let command = (0..n)
                .map(|i| format!("echo {i}"))
                .collect::<Vec<_>>()
                .join(" && ");
            json!({
                "session_id": "s", "transcript_path": "", "cwd": "/repo",
                "hook_event_name": "BeforeTool", "timestamp": "2026-08-21T16:16:56.123Z",
                "tool_name": "run_shell_command", "tool_input": {"command": command},
            })
            .to_string()
        },
        |text| {
            let request = gemini::parse_event(text).expect("the event parses");
            let mapped = gemini::to_call(&request).expect("the call maps");
            drop(policy.decide(&mapped.call));
        },
    );
}
