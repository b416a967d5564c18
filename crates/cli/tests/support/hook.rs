//! `warden hook claude-code` driven as Claude Code drives it: the built binary as a subprocess,
//! one event on real stdin, `CLAUDE_PROJECT_DIR` in the environment. Golden output and exit
//! codes for allow, ask and deny over the shell corpus; exit 2 for every malformed-input
//! class and for a panic inside; the tool mapping; path anchoring; the journal; the settings
//! fragment.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use super::{lines, warden, write};

/// Runs the hook with `stdin` and extra environment variables (`CLAUDE_PROJECT_DIR` is removed
/// unless given).
pub(crate) fn hook_with(args: &[&str], stdin: &str, dir: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.args(args)
        .current_dir(dir)
        .env_remove("CLAUDE_PROJECT_DIR")
        .env_remove("WARDEN_HOOK_TEST_PANIC")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    {
        let mut input = child.stdin.take().unwrap();
        // A hook that fails before reading closes stdin: ignore the broken pipe.
        let _ = input.write_all(stdin.as_bytes());
    }
    child.wait_with_output().unwrap()
}

fn hook(policy: &str, stdin: &str, dir: &Path) -> Output {
    hook_with(
        &["hook", "claude-code", "--policy", policy],
        stdin,
        dir,
        &[],
    )
}

pub(super) fn pre(tool: &str, input: Value, cwd: &Path) -> String {
    json!({
        "session_id": "abc123",
        "transcript_path": "/home/user/.claude/projects/x/transcript.jsonl",
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": input,
        "tool_use_id": "toolu_01ABC",
    })
    .to_string()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The answer's decision and reason, after checking the exact contract shape: one line, the
/// compact JSON of exactly the three keys, and the exit code that goes with the decision.
pub(super) fn decision(out: &Output) -> (String, String) {
    let text = stdout(out);
    let v: Value = serde_json::from_str(text.trim_end()).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {text:?}; stderr {}",
            stderr(out)
        )
    });
    let d = v["hookSpecificOutput"]["permissionDecision"]
        .as_str()
        .unwrap()
        .to_owned();
    let reason = v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap()
        .to_owned();
    let golden = format!(
        "{{\"hookSpecificOutput\":{{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"{d}\",\"permissionDecisionReason\":{}}}}}\n",
        serde_json::to_string(&reason).unwrap()
    );
    assert_eq!(text, golden, "the exact contract output");
    match d.as_str() {
        "deny" => {
            assert_eq!(out.status.code(), Some(2), "deny exits 2");
            assert_eq!(
                stderr(out),
                format!("{reason}\n"),
                "deny puts the reason on stderr"
            );
        }
        "allow" | "ask" => {
            assert_eq!(out.status.code(), Some(0), "{d} exits 0");
            assert_eq!(stderr(out), "", "{d} prints nothing on stderr");
        }
        other => panic!("unexpected decision {other}"),
    }
    (d, reason)
}

/// Corpus cases that fail through the hook, with the reason (none: the hook decides exactly
/// as `warden check` does).
const SKIP: &[(&str, &str)] = &[];

#[test]
fn hook_answers_every_shell_corpus_case_with_the_exact_contract_output() {
    let dir = tempfile::tempdir().unwrap();
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/shell/cases.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    let cases: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, case) in cases.iter().enumerate() {
        let id = case["id"].as_str().unwrap();
        if SKIP.iter().any(|(s, _)| *s == id) {
            continue;
        }
        let policy = super::shell::case_policy(dir.path(), i, case);
        let command = case["command"].as_str().unwrap();
        let out = hook(
            &policy,
            &pre(
                "Bash",
                json!({"command": command, "description": "x"}),
                dir.path(),
            ),
            dir.path(),
        );
        let (got, reason) = decision(&out);
        let want = case["expect"].as_str().unwrap();
        seen.insert(got.clone());
        if got != want {
            failures.push(format!("{id}: got {got} want {want}: {reason}"));
            continue;
        }
        // The reason names the rule and its source, and the deciding subject of a compound
        // command, exactly as `warden check` cites them.
        let call = json!({"tool": "bash", "args": {"command": command}});
        let calls = write(dir.path(), &format!("case{i}.jsonl"), &format!("{call}\n"));
        let check = warden(
            &[
                "check", "--policy", &policy, "--calls", &calls, "--format", "json",
            ],
            dir.path(),
        );
        let c = &lines(&check)[0];
        assert!(reason.starts_with("Warden: "), "{id}: {reason}");
        assert!(
            reason.contains(c["reason"].as_str().unwrap()),
            "{id}: the engine's reason in {reason}"
        );
        if let (Some(rule), Some(source)) = (c["rule"].as_str(), c["source"].as_str()) {
            assert!(
                reason.contains(&format!("rule {rule} from source {source}")),
                "{id}: {reason}"
            );
        }
        let subjects = c["subjects"].as_array().unwrap();
        if subjects.len() > 1 && c["rule"].is_string() {
            let deciding = subjects
                .iter()
                .find(|s| s["decision"] == c["decision"] && s["rule"] == c["rule"])
                .unwrap();
            assert!(
                reason.contains(&format!(
                    "deciding subject \"{}\"",
                    deciding["text"].as_str().unwrap()
                )),
                "{id}: {reason}"
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} corpus case(s) decided differently through the hook:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["allow", "ask", "deny"],
        "the corpus exercises all three answers"
    );
}

#[test]
fn golden_answers_for_allow_ask_and_deny() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        dir.path(),
        "project.toml",
        "default = \"ask\"\nallow = [\"bash(git status:*)\"]\ndeny = [\"bash(rm:*)\"]\n",
    );
    let cases = [
        (
            "git status -s",
            0,
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"Warden: allowed by bash(git status:*) [rule bash(git status:*) from source project]"}}"#,
        ),
        (
            "npm test",
            0,
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"Warden: no rule allows bash: approval required by default [no rule matched: the policy's default decided]"}}"#,
        ),
        (
            "git status && rm -rf /tmp/x",
            2,
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"Warden: denied by bash(rm:*) on \"rm -rf /tmp/x\"; nothing in this command ran, including \"git status\" [rule bash(rm:*) from source project; deciding subject \"rm -rf /tmp/x\"]"}}"#,
        ),
    ];
    for (command, code, golden) in cases {
        let out = hook(
            &policy,
            &pre("Bash", json!({"command": command}), dir.path()),
            dir.path(),
        );
        assert_eq!(stdout(&out), format!("{golden}\n"), "{command}");
        assert_eq!(out.status.code(), Some(code), "{command}");
    }
}

#[test]
fn every_malformed_input_class_exits_2_with_the_reason_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(dir.path(), "p.toml", "default = \"allow\"\n");
    let broken = write(dir.path(), "broken.toml", "allow = [\"read\"]\n");
    let ok_event = pre("Bash", json!({"command": "ls"}), dir.path());
    let cases: Vec<(&str, String, &str, &str)> = vec![
        ("empty stdin", String::new(), &policy, "not JSON"),
        ("not JSON", "git status".into(), &policy, "not JSON"),
        (
            "truncated JSON",
            ok_event[..ok_event.len() / 2].into(),
            &policy,
            "not JSON",
        ),
        ("a JSON array", "[1,2]".into(), &policy, "not a JSON object"),
        (
            "a JSON string",
            "\"PreToolUse\"".into(),
            &policy,
            "not a JSON object",
        ),
        (
            "no event name",
            r#"{"tool_name":"Bash","tool_input":{}}"#.into(),
            &policy,
            "unknown hook event",
        ),
        (
            "an unknown event",
            r#"{"hook_event_name":"Stop"}"#.into(),
            &policy,
            "unknown hook event `Stop`",
        ),
        (
            "PermissionRequest",
            r#"{"hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{}}"#.into(),
            &policy,
            "unknown hook event",
        ),
        (
            "no tool_name",
            r#"{"hook_event_name":"PreToolUse","tool_input":{"command":"ls"}}"#.into(),
            &policy,
            "without `tool_name`",
        ),
        (
            "tool_name not a string",
            r#"{"hook_event_name":"PreToolUse","tool_name":7,"tool_input":{}}"#.into(),
            &policy,
            "`tool_name` must be a string",
        ),
        (
            "empty tool_name",
            r#"{"hook_event_name":"PreToolUse","tool_name":"","tool_input":{}}"#.into(),
            &policy,
            "non-empty",
        ),
        (
            "no tool_input",
            r#"{"hook_event_name":"PreToolUse","tool_name":"Bash"}"#.into(),
            &policy,
            "without `tool_input`",
        ),
        (
            "tool_input not an object",
            r#"{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":"ls"}"#.into(),
            &policy,
            "`tool_input` must be an object",
        ),
        (
            "cwd not a string",
            r#"{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{},"cwd":1}"#.into(),
            &policy,
            "`cwd` must be a string",
        ),
        (
            "a policy without a default",
            ok_event.clone(),
            &broken,
            "default",
        ),
        (
            "a missing policy file",
            ok_event.clone(),
            "/nonexistent/p.toml",
            "p.toml",
        ),
    ];
    for (what, stdin, policy, needle) in cases {
        let out = hook(policy, &stdin, dir.path());
        assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr(&out));
        assert!(
            out.stdout.is_empty(),
            "{what}: nothing on stdout: {}",
            stdout(&out)
        );
        let err = stderr(&out);
        assert!(err.starts_with("error: "), "{what}: {err}");
        assert!(err.contains(needle), "{what}: {err} (want {needle})");
        assert!(err.contains("the call is blocked"), "{what}: {err}");
    }
    // A usage error (no --policy) is clap's exit 2, never 1.
    let out = hook_with(&["hook", "claude-code"], &ok_event, dir.path(), &[]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_panic_inside_the_hook_exits_2_and_prints_nothing_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(dir.path(), "p.toml", "default = \"allow\"\n");
    let out = hook_with(
        &["hook", "claude-code", "--policy", &policy],
        &pre("Bash", json!({"command": "ls"}), dir.path()),
        dir.path(),
        &[("WARDEN_HOOK_TEST_PANIC", "1")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert!(
        stderr(&out).contains("panic: injected by WARDEN_HOOK_TEST_PANIC"),
        "{}",
        stderr(&out)
    );
    // Without the switch the same event is allowed.
    let out = hook(
        &policy,
        &pre("Bash", json!({"command": "ls"}), dir.path()),
        dir.path(),
    );
    assert_eq!(decision(&out).0, "allow");
}

#[test]
fn unknown_fields_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        dir.path(),
        "p.toml",
        "default = \"deny\"\nallow = [\"bash(npm test)\"]\n",
    );
    let mut event: Value = serde_json::from_str(&pre(
        "Bash",
        json!({"command": "npm test", "timeout": 120000, "run_in_background": false, "brand_new": [1]}),
        dir.path(),
    ))
    .unwrap();
    event["prompt_id"] = json!("550e8400-e29b-41d4-a716-446655440000");
    event["effort"] = json!({"level": "high"});
    event["some_future_field"] = json!({"nested": true});
    let out = hook(&policy, &event.to_string(), dir.path());
    assert_eq!(decision(&out).0, "allow");
}

#[test]
fn the_tool_mapping_decides_claude_code_tools_as_warden_tools() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let policy = write(
        &root,
        "p.toml",
        "default = \"ask\"\n\
         allow = [\"read(src/**)\", \"web_fetch(domain:docs.rs)\", \"github__list_issues\", \"TodoWrite\"]\n\
         deny = [\"edit(/etc/**)\", \"read(.env:*)\", \"github__delete_*\", \"WebSearch\"]\n",
    );
    let r = root.to_string_lossy().into_owned();
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "Read",
            json!({"file_path": format!("{r}/src/main.rs")}),
            "allow",
        ),
        (
            "Read",
            json!({"file_path": format!("{r}/.env.local")}),
            "deny",
        ),
        (
            "Edit",
            json!({"file_path": "/etc/hosts", "old_string": "a", "new_string": "b"}),
            "deny",
        ),
        (
            "MultiEdit",
            json!({"file_path": "/etc/hosts", "edits": []}),
            "deny",
        ),
        (
            "Write",
            json!({"file_path": "/etc/motd", "content": "x"}),
            "deny",
        ),
        (
            "NotebookEdit",
            json!({"notebook_path": "/etc/n.ipynb", "new_source": "x"}),
            "deny",
        ),
        (
            "Write",
            json!({"file_path": format!("{r}/src/new.rs"), "content": "x"}),
            "ask",
        ),
        (
            "Glob",
            json!({"pattern": "**/*.rs", "path": format!("{r}/src/lib")}),
            "allow",
        ),
        // `src/**` covers what is under src/, not the folder itself (gitignore semantics).
        (
            "Glob",
            json!({"pattern": "**/*.rs", "path": format!("{r}/src")}),
            "ask",
        ),
        // A missing `path` is the event's cwd: the project root, which src/** does not cover.
        ("Grep", json!({"pattern": "TODO"}), "ask"),
        (
            "WebFetch",
            json!({"url": "https://docs.rs/serde", "prompt": "x"}),
            "allow",
        ),
        (
            "WebFetch",
            json!({"url": "https://evil.example/", "prompt": "x"}),
            "ask",
        ),
        ("mcp__github__list_issues", json!({"repo": "a/b"}), "allow"),
        ("mcp__github__delete_repo", json!({"repo": "a/b"}), "deny"),
        ("WebSearch", json!({"query": "x"}), "deny"),
        ("TodoWrite", json!({"todos": []}), "allow"),
        ("Task", json!({"prompt": "x"}), "ask"),
    ];
    for (tool, input, want) in cases {
        let out = hook(&policy, &pre(tool, input.clone(), &root), &root);
        assert_eq!(decision(&out).0, want, "{tool} {input}");
    }
    // With a cwd under src/, Grep's missing path is covered by the allow rule.
    let out = hook(
        &policy,
        &pre("Grep", json!({"pattern": "x"}), &root.join("src/lib")),
        &root,
    );
    assert_eq!(decision(&out).0, "allow");
}

#[test]
fn a_missing_mapped_field_is_decided_never_refused_and_never_allowed_by_a_specifier() {
    let dir = tempfile::tempdir().unwrap();
    let allow_only = write(
        dir.path(),
        "a.toml",
        "default = \"ask\"\nallow = [\"read(/**)\", \"bash(ls:*)\"]\n",
    );
    let with_deny = write(
        dir.path(),
        "d.toml",
        "default = \"allow\"\ndeny = [\"read(/etc/**)\", \"bash(rm:*)\"]\n",
    );
    for (tool, input) in [
        ("Read", json!({"offset": 1})),
        ("Bash", json!({"description": "x"})),
        ("Read", json!({"file_path": 7})),
    ] {
        let out = hook(
            &allow_only,
            &pre(tool, input.clone(), dir.path()),
            dir.path(),
        );
        assert_eq!(
            decision(&out).0,
            "ask",
            "{tool} {input}: an allow rule with a specifier never allows it"
        );
        let out = hook(
            &with_deny,
            &pre(tool, input.clone(), dir.path()),
            dir.path(),
        );
        let (d, reason) = decision(&out);
        assert_eq!(
            d, "deny",
            "{tool} {input}: the tool has deny rules with a specifier"
        );
        assert!(reason.contains("missing or not a string"), "{reason}");
    }
}

#[test]
fn relative_patterns_anchor_at_the_project_dir_and_relative_paths_at_the_event_cwd() {
    let policy_dir = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let project = project.path().canonicalize().unwrap();
    std::fs::create_dir_all(project.join("sub")).unwrap();
    let policy = write(
        policy_dir.path(),
        "p.toml",
        "default = \"allow\"\ndeny = [\"edit(secrets/**)\"]\n",
    );
    let env = [("CLAUDE_PROJECT_DIR", project.to_str().unwrap())];
    let run = |file_path: &str, cwd: &Path, env: &[(&str, &str)]| {
        let out = hook_with(
            &["hook", "claude-code", "--policy", &policy],
            &pre(
                "Write",
                json!({"file_path": file_path, "content": "x"}),
                cwd,
            ),
            policy_dir.path(),
            env,
        );
        decision(&out).0
    };
    let p = project.to_string_lossy();
    // Anchored at $CLAUDE_PROJECT_DIR, not at the policy's folder.
    assert_eq!(run(&format!("{p}/secrets/k"), &project, &env), "deny");
    let pd = policy_dir.path().to_string_lossy();
    assert_eq!(run(&format!("{pd}/secrets/k"), &project, &env), "allow");
    // The event's cwd moves with `cd`; the anchor does not.
    assert_eq!(
        run("secrets/k", &project.join("sub"), &env),
        "allow",
        "sub/secrets/k is not under <project>/secrets"
    );
    assert_eq!(run("../secrets/k", &project.join("sub"), &env), "deny");
    // Without CLAUDE_PROJECT_DIR the policy file's folder is the anchor.
    assert_eq!(run(&format!("{pd}/secrets/k"), &project, &[]), "deny");
    assert_eq!(run(&format!("{p}/secrets/k"), &project, &[]), "allow");
}

#[test]
fn a_symlink_cannot_dodge_a_deny() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("secrets")).unwrap();
    std::fs::write(root.join("secrets/key"), "k").unwrap();
    std::os::unix::fs::symlink(root.join("secrets/key"), root.join("innocent")).unwrap();
    let policy = write(
        &root,
        "p.toml",
        "default = \"allow\"\ndeny = [\"read(secrets/**)\"]\n",
    );
    let out = hook(
        &policy,
        &pre("Read", json!({"file_path": root.join("innocent")}), &root),
        &root,
    );
    assert_eq!(decision(&out).0, "deny");
}

#[test]
fn the_journal_records_verdicts_and_what_the_provider_reports_it_ran() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        dir.path(),
        "p.toml",
        "default = \"ask\"\nallow = [\"bash(ls:*)\"]\ndeny = [\"bash(rm:*)\"]\n",
    );
    let store = dir.path().join("journal.db");
    let args = [
        "hook",
        "claude-code",
        "--policy",
        &policy,
        "--journal",
        store.to_str().unwrap(),
    ];
    let out = hook_with(
        &args,
        &pre("Bash", json!({"command": "ls -la"}), dir.path()),
        dir.path(),
        &[],
    );
    assert_eq!(decision(&out).0, "allow");
    let post = json!({
        "session_id": "abc123", "cwd": dir.path(), "hook_event_name": "PostToolUse",
        "tool_name": "Bash", "tool_input": {"command": "ls -la"}, "tool_use_id": "toolu_01ABC",
        "tool_response": {"stdout": "total 0", "stderr": "", "interrupted": false, "isImage": false},
    });
    let out = hook_with(&args, &post.to_string(), dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "PostToolUse prints nothing");
    let out = hook_with(
        &args,
        &pre("Bash", json!({"command": "rm -rf /"}), dir.path()),
        dir.path(),
        &[],
    );
    assert_eq!(decision(&out).0, "deny");

    let conn = rusqlite::Connection::open(&store).unwrap();
    let mut stmt = conn
        .prepare("SELECT chain_id, record_type, operation_id, payload_json FROM journal ORDER BY sequence")
        .unwrap();
    let rows: Vec<(String, String, Option<String>, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let types: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(
        types,
        ["hook_verdict", "provider_observation", "hook_verdict"]
    );
    assert!(rows.iter().all(|r| r.0 == "claude-code-abc123"));
    assert_eq!(rows[1].2.as_deref(), Some("toolu_01ABC"));
    let verdict: Value = serde_json::from_str(&rows[2].3).unwrap();
    assert_eq!(verdict["decision"], "deny");
    assert_eq!(verdict["rule"], "bash(rm:*)");
    assert_eq!(verdict["tool"], "Bash");
    assert!(
        !rows[2].3.contains("rm -rf"),
        "payloads hold digests, never raw arguments"
    );
    let observed: Value = serde_json::from_str(&rows[1].3).unwrap();
    assert_eq!(observed["reported_by"], "provider");
    assert_eq!(observed["status"], "succeeded");
    drop(stmt);
    drop(conn);
    let verify = warden(
        &["evidence", "verify", "--store", store.to_str().unwrap()],
        dir.path(),
    );
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );

    // Without --journal, PostToolUse is a no-op: exit 0, nothing printed.
    let out = hook(&policy, &post.to_string(), dir.path());
    assert_eq!((out.status.code(), out.stdout.is_empty()), (Some(0), true));
}

#[test]
fn print_settings_gives_a_paste_ready_fragment() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(dir.path(), "p.toml", "default = \"ask\"\n");
    let out = warden(
        &[
            "hook",
            "claude-code",
            "--print-settings",
            "--policy",
            "p.toml",
        ],
        dir.path(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for event in ["PreToolUse", "PostToolUse"] {
        let entry = &v["hooks"][event][0];
        assert_eq!(entry["matcher"], "*");
        let h = &entry["hooks"][0];
        assert_eq!(h["type"], "command");
        let command = Path::new(h["command"].as_str().unwrap());
        assert!(command.is_absolute() && command.exists(), "{command:?}");
        let canonical = Path::new(&policy).canonicalize().unwrap();
        assert_eq!(
            h["args"],
            json!([
                "hook",
                "claude-code",
                "--policy",
                canonical.to_str().unwrap()
            ])
        );
        assert!(h["timeout"].as_u64().unwrap() > 0);
    }
    // A policy that does not load is refused before anything is installed.
    let bad = write(dir.path(), "bad.toml", "allow = [\"read\"]\n");
    let out = warden(
        &["hook", "claude-code", "--print-settings", "--policy", &bad],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

/// The compiled-policy cache (docs/policy.md, "The compiled policy cache"): the first call
/// writes an image under `.warden/cache/`, later calls read it, and it is never trusted
/// blindly: a changed policy or a corrupt image is compiled again (and the image rewritten),
/// with the same answers as without a cache; the image is protected from the agent; and
/// `--no-cache` neither reads nor writes one.
#[test]
fn the_compiled_policy_cache_is_read_refreshed_and_never_trusted_blindly() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        dir.path(),
        "policy.toml",
        "default = \"ask\"\nallow = [\"read\", \"bash(git status:*)\"]\ndeny = [\"bash(rm:*)\"]\n",
    );
    let call = |command: &str, args: &[&str]| {
        let mut argv = vec!["hook", "claude-code", "--policy", policy.as_str()];
        argv.extend_from_slice(args);
        decision(&hook_with(
            &argv,
            &pre("Bash", json!({ "command": command }), dir.path()),
            dir.path(),
            &[],
        ))
    };
    let cache = dir.path().join(".warden/cache");
    let images = || -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(&cache)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        found.retain(|p| p.extension().is_some_and(|e| e == "image"));
        found
    };

    let first = call("git status", &[]);
    assert_eq!(first.0, "allow");
    let [image] = images().try_into().unwrap();
    assert_eq!(
        std::fs::read_to_string(cache.join(".gitignore")).unwrap(),
        "*\n"
    );
    let written = std::fs::read(&image).unwrap();
    assert_eq!(call("git status", &[]), first);
    assert_eq!(call("rm -rf x", &[]).0, "deny");
    assert_eq!(
        std::fs::read(&image).unwrap(),
        written,
        "read, not rewritten"
    );

    // A corrupt image is compiled again, the same answers, and rewritten.
    std::fs::write(&image, b"not an image").unwrap();
    assert_eq!(call("git status", &[]), first);
    assert_eq!(std::fs::read(&image).unwrap(), written);
    let mut flipped = written.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    std::fs::write(&image, &flipped).unwrap();
    assert_eq!(call("rm -rf x", &[]).0, "deny");
    assert_eq!(std::fs::read(&image).unwrap(), written);

    // A changed policy is never decided by the old image.
    std::fs::write(
        &policy,
        "default = \"ask\"\nallow = [\"read\"]\ndeny = [\"bash(rm:*)\", \"bash(git:*)\"]\n",
    )
    .unwrap();
    assert_eq!(call("git status", &[]).0, "deny");
    assert_ne!(std::fs::read(&image).unwrap(), written);

    // The agent cannot write the image.
    let out = hook_with(
        &["hook", "claude-code", "--policy", policy.as_str()],
        &pre(
            "Write",
            json!({ "file_path": image, "content": "x" }),
            dir.path(),
        ),
        dir.path(),
        &[],
    );
    let (verdict, reason) = decision(&out);
    assert_eq!(verdict, "deny");
    assert!(reason.contains("the compiled policy cache"), "{reason}");

    // `--no-cache`: no image read or written.
    std::fs::remove_dir_all(&cache).unwrap();
    assert_eq!(call("git status", &["--no-cache"]).0, "deny");
    assert!(!cache.exists());
}
