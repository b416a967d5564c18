//! `warden replay` end to end: the sample transcripts in `examples/transcripts/` give the
//! documented output (`examples/expected/`), `--against`
//! lists exactly the calls whose decision changes, a malformed or truncated line is reported
//! with its line number and the rest evaluated, and a file that cannot be read or recognized is
//! exit 2 with nothing printed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

use super::hook::hook_with;
use super::write;

/// The sample transcripts in the order `examples/transcripts/*.jsonl` expands to.
const SAMPLES: [&str; 3] = [
    "examples/transcripts/calls.jsonl",
    "examples/transcripts/claude-code-session.jsonl",
    "examples/transcripts/codex-session.jsonl",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// `warden replay` run from the repository root as the guide documents it.
fn replay(extra: &[&str]) -> Output {
    let mut args = vec!["replay"];
    args.extend(SAMPLES);
    args.extend([
        "--policy",
        "examples/policies/claude-code.toml",
        "--project-root",
        "/home/dev/shop",
        "--cwd",
        "/home/dev/shop",
    ]);
    args.extend(extra);
    hook_with(&args, "", &repo(), &[])
}

fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn key(v: &Value) -> (String, u64, String) {
    (
        v["file"].as_str().unwrap().to_owned(),
        v["line"].as_u64().unwrap(),
        v["input"].to_string(),
    )
}

#[test]
fn the_sample_transcripts_give_the_documented_output() {
    let out = replay(&["--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = std::fs::read_to_string(repo().join("examples/expected/replay.jsonl")).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);

    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let all: Vec<&str> = text.lines().collect();
    let (summary, calls) = all.split_last().unwrap();
    assert_eq!(calls.len(), 28);
    // The contract's key order, on every call line.
    for line in calls {
        let mut at = 0;
        for k in [
            "file", "line", "time", "tool", "input", "decision", "rule", "source",
        ] {
            let needle = format!("\"{k}\":");
            let pos = line[at..].find(&needle).map(|p| p + at);
            assert!(pos.is_some(), "{k} after byte {at} in {line}");
            at = pos.unwrap() + needle.len();
        }
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 8, "{line}");
        assert!(v["input"].is_object());
    }
    let s: Value = serde_json::from_str(summary).unwrap();
    assert_eq!(
        s.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["summary"]
    );
    let s = &s["summary"];
    assert!(s.get("decision").is_none());
    assert_eq!(s["calls"], 28);
    assert_eq!(
        s["decisions"],
        serde_json::json!({"allow": 16, "ask": 6, "deny": 6})
    );
    assert_eq!(s["uncovered"].as_array().unwrap().len(), 3);
    assert!(s["never_fired"].as_array().unwrap().is_empty());

    // The mapping, per format.
    let v: Vec<Value> = calls
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let at = |file: &str, line: u64| -> Vec<&Value> {
        v.iter()
            .filter(|c| c["file"].as_str().unwrap().ends_with(file) && c["line"] == line)
            .collect()
    };
    let grep = at("claude-code-session.jsonl", 7)[0];
    assert_eq!(
        (grep["tool"].as_str(), grep["input"]["path"].as_str()),
        (Some("read"), Some("/home/dev/shop"))
    );
    let two = at("claude-code-session.jsonl", 21);
    assert_eq!(
        two.len(),
        2,
        "two tool_use blocks in one message are two calls"
    );
    assert_eq!(two[1]["input"]["path"], "/home/dev/shop/CHANGELOG.md");
    let pr = at("claude-code-session.jsonl", 26)[0];
    assert_eq!(pr["tool"], "github__create_pull_request");
    let patch = at("codex-session.jsonl", 10)[0];
    assert_eq!(
        (patch["tool"].as_str(), patch["decision"].as_str()),
        (Some("edit"), Some("allow"))
    );
    assert_eq!(
        patch["input"]["paths"],
        serde_json::json!(["src/shipping.ts", "src/shipping.test.ts"])
    );
    assert_eq!(
        at("codex-session.jsonl", 5)[0]["input"]["command"],
        "ls -la src"
    );
    assert_eq!(
        at("codex-session.jsonl", 7)[0]["input"]["command"],
        "rg -n FREE_SHIPPING src"
    );
    assert_eq!(
        at("codex-session.jsonl", 16)[0]["input"]["command"],
        "git status --short"
    );
    assert_eq!(at("codex-session.jsonl", 17)[0]["decision"], "ask");
    assert_eq!(at("calls.jsonl", 1)[0]["time"], "2026-11-29T11:00:00Z");
    assert_eq!(
        at("codex-session.jsonl", 5)[0]["time"],
        "2026-11-29T10:02:14.300Z"
    );
}

#[test]
fn against_lists_exactly_the_changed_calls() {
    let out = replay(&[
        "--format",
        "json",
        "--against",
        "examples/policies/project.toml",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected =
        std::fs::read_to_string(repo().join("examples/expected/replay-against-project.jsonl"))
            .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
    let mut got = json_lines(&out);
    let summary = got.pop().unwrap();

    // Each policy on its own, then the difference by hand.
    let now = json_lines(&replay(&["--format", "json"]));
    let mut args = vec!["replay"];
    args.extend(SAMPLES);
    args.extend([
        "--policy",
        "examples/policies/project.toml",
        "--cwd",
        "/home/dev/shop",
        "--format",
        "json",
    ]);
    let before = json_lines(&hook_with(
        &args,
        "",
        &repo(),
        &[("CLAUDE_PROJECT_DIR", "/home/dev/shop")],
    ));
    assert_eq!(now.len(), before.len());
    let before: BTreeMap<_, _> = before[..before.len() - 1]
        .iter()
        .map(|v| (key(v), v.clone()))
        .collect();
    let changed: Vec<(String, u64, String)> = now[..now.len() - 1]
        .iter()
        .filter(|v| before[&key(v)]["decision"] != v["decision"])
        .map(key)
        .collect();
    assert!(!changed.is_empty());
    assert_eq!(got.iter().map(key).collect::<Vec<_>>(), changed);
    for v in &got {
        let b = &before[&key(v)];
        assert_eq!(v["against_decision"], b["decision"]);
        assert_eq!(v["against_rule"], b["rule"]);
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert!(keys.contains(&"against_decision") && keys.contains(&"against_rule"));
    }
    assert_eq!(summary["summary"]["against"]["changed"], changed.len());
}

#[test]
fn a_malformed_or_truncated_line_is_reported_and_the_rest_evaluated() {
    let dir = tempfile::tempdir().unwrap();
    let sample =
        std::fs::read_to_string(repo().join("examples/transcripts/claude-code-session.jsonl"))
            .unwrap();
    let mut lines: Vec<String> = sample.lines().map(str::to_owned).collect();
    // Line 4 becomes garbage, line 11 (the `npm test` call) is cut in half, and a tool_use
    // without a name replaces line 13.
    lines[3] = "{not json".into();
    let half = lines[10].len() / 2;
    lines[10].truncate(half);
    lines[12] = r#"{"type":"assistant","uuid":"u","message":{"content":[{"type":"tool_use","id":"t","input":{}}]}}"#.into();
    let file = write(dir.path(), "session.jsonl", &(lines.join("\n") + "\n"));
    let policy = repo().join("examples/policies/claude-code.toml");
    let out = hook_with(
        &[
            "replay",
            &file,
            "--policy",
            policy.to_str().unwrap(),
            "--format",
            "json",
        ],
        "",
        dir.path(),
        &[("CLAUDE_PROJECT_DIR", "/home/dev/shop")],
    );
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    for n in [4, 11, 13] {
        assert!(
            err.contains(&format!("{file}:{n}: malformed line skipped")),
            "line {n}: {err}"
        );
    }
    assert_eq!(err.lines().count(), 3, "{err}");
    let got = json_lines(&out);
    let (summary, calls) = got.split_last().unwrap();
    assert_eq!(
        calls.len(),
        13 - 2,
        "every call but the two on broken lines"
    );
    assert!(
        calls
            .iter()
            .all(|c| ![4, 11, 13].contains(&c["line"].as_u64().unwrap()))
    );
    assert_eq!(summary["summary"]["malformed_lines"], 3);

    // A Warden calls file with a bad line.
    let calls = write(
        dir.path(),
        "calls.jsonl",
        "{\"tool\":\"bash\",\"args\":{\"command\":\"ls\"}}\n{\"tool\":7,\"args\":{}}\n{\"tool\":\"read\",\"args\":[]}\n{\"tool\":\"read\",\"args\":{\"path\":\"x\"}}\n",
    );
    let out = hook_with(
        &[
            "replay",
            &calls,
            "--policy",
            policy.to_str().unwrap(),
            "--format",
            "json",
        ],
        "",
        dir.path(),
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(":2: malformed") && err.contains(":3: malformed"),
        "{err}"
    );
    assert_eq!(json_lines(&out).len(), 3);
}

#[test]
fn unreadable_or_unrecognized_files_exit_2_with_nothing_printed() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(dir.path(), "p.toml", "default = \"ask\"\n");
    let good = write(
        dir.path(),
        "good.jsonl",
        "{\"tool\":\"read\",\"args\":{\"path\":\"x\"}}\n",
    );
    let unknown = write(
        dir.path(),
        "unknown.jsonl",
        "{\"hello\":1}\n{\"world\":2}\n",
    );
    let empty = write(dir.path(), "empty.jsonl", "");
    let text = write(dir.path(), "notes.txt", "just some notes\n");
    for (what, files) in [
        (
            "a missing file",
            vec![good.as_str(), "/nonexistent/x.jsonl"],
        ),
        (
            "an unrecognized format",
            vec![good.as_str(), unknown.as_str()],
        ),
        ("an empty file", vec![empty.as_str()]),
        ("plain text", vec![text.as_str()]),
        ("a folder", vec![dir.path().to_str().unwrap()]),
    ] {
        let mut args = vec!["replay"];
        args.extend(files);
        args.extend(["--policy", &policy, "--format", "json"]);
        let out = hook_with(&args, "", dir.path(), &[]);
        assert_eq!(out.status.code(), Some(2), "{what}");
        assert!(out.stdout.is_empty(), "{what}: nothing printed");
        assert!(
            String::from_utf8_lossy(&out.stderr).starts_with("error: "),
            "{what}"
        );
    }
    // A broken policy is exit 2 too.
    let out = hook_with(
        &["replay", &good, "--policy", &unknown],
        "",
        dir.path(),
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_table_shows_the_same_and_no_progress_bar_when_piped() {
    let out = replay(&[]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("CALL "), "{text}");
    assert!(
        text.contains(
            "28 calls in 3 file(s): allow 16, ask 6, deny 6; 0 malformed line(s) skipped"
        ),
        "{text}"
    );
    assert!(
        text.contains("deny      bash(rm -rf:*) [project]"),
        "{text}"
    );
    for stream in [&out.stdout, &out.stderr] {
        let s = String::from_utf8_lossy(stream);
        assert!(
            !s.contains('\r') && !s.contains('\u{1b}'),
            "no terminal control when piped: {s:?}"
        );
    }
    assert!(out.stderr.is_empty());
}
