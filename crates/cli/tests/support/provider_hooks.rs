//! `warden hook codex` and `warden hook gemini` driven as Codex and Gemini CLI drive them: the
//! built binary as a subprocess, one event on stdin. Each answer is checked in the shape the
//! provider reads (Codex: nothing and exit 0 to let its own flow go on, exit 2 with the reason
//! on stderr to block, ask included; Gemini: nothing to let its policy decide,
//! `{"decision":"ask",…}` to force its prompt, `{"decision":"deny",…}` plus exit 2 to block),
//! over the fixtures in tests/corpus/hooks/ and the whole shell corpus; every failure class
//! ends in the provider's blocking answer; the settings fragments install exactly this hook.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use super::hook::hook_with;
use super::{warden, write};

fn corpus(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/hooks")
        .join(name)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The decision a Codex answer expresses, after checking its exact shape: allow is silence
/// and exit 0; ask and deny are exit 2, nothing on stdout, the reason on stderr (an ask says
/// approval is required).
fn codex_decision(out: &Output) -> (String, String) {
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(
        stdout, "",
        "Codex reads stdout only to rewrite or deny in JSON: nothing"
    );
    match out.status.code() {
        Some(0) => {
            assert_eq!(stderr, "", "an allow prints nothing");
            ("allow".into(), String::new())
        }
        Some(2) => {
            let reason = stderr.trim_end().to_owned();
            assert!(
                !reason.is_empty(),
                "Codex ignores an exit 2 with an empty stderr"
            );
            assert_eq!(stderr, format!("{reason}\n"), "one reason line");
            let d = if reason.starts_with("approval required") {
                "ask"
            } else {
                "deny"
            };
            (d.into(), reason)
        }
        other => panic!("Codex fails open on exit {other:?}: stderr {stderr}"),
    }
}

/// The decision a Gemini answer expresses, after checking its exact shape.
fn gemini_decision(out: &Output) -> (String, String) {
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    if stdout.is_empty() {
        assert_eq!(
            out.status.code(),
            Some(0),
            "silence is an allow only with exit 0"
        );
        assert_eq!(stderr, "", "an allow prints nothing");
        return ("allow".into(), String::new());
    }
    let v: Value = serde_json::from_str(stdout.trim_end())
        .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}): {stdout:?}"));
    let d = v["decision"].as_str().unwrap().to_owned();
    let reason = v["reason"].as_str().unwrap().to_owned();
    assert!(!reason.is_empty());
    match d.as_str() {
        "ask" => {
            let golden = json!({"decision": "ask", "reason": reason, "systemMessage": reason});
            assert_eq!(stdout, format!("{golden}\n"));
            assert_eq!((out.status.code(), stderr.as_str()), (Some(0), ""));
        }
        "deny" => {
            assert_eq!(
                stdout,
                format!("{}\n", json!({"decision": "deny", "reason": reason}))
            );
            assert_eq!(out.status.code(), Some(2), "a deny also exits 2");
            assert_eq!(stderr, format!("{reason}\n"), "and says why on stderr");
        }
        other => panic!("unexpected decision {other}"),
    }
    (d, reason)
}

/// Runs one provider hook on `event` under `policy`, with the project root at `/repo`.
fn run(provider: &str, policy: &str, event: &str, dir: &Path) -> Output {
    hook_with(
        &[
            "hook",
            provider,
            "--policy",
            policy,
            "--project-root",
            "/repo",
        ],
        event,
        dir,
        &[],
    )
}

fn fixtures(name: &str) -> Vec<Value> {
    std::fs::read_to_string(corpus(name))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn run_fixtures(provider: &str, decide: fn(&Output) -> (String, String)) {
    let dir = tempfile::tempdir().unwrap();
    let policy = corpus("policy.toml");
    let cases = fixtures(&format!("{provider}.jsonl"));
    assert!(cases.len() >= 10);
    let mut failures = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for case in &cases {
        let id = case["id"].as_str().unwrap();
        let out = run(
            provider,
            policy.to_str().unwrap(),
            &case["event"].to_string(),
            dir.path(),
        );
        let (got, reason) = decide(&out);
        seen.insert(got.clone());
        if got != case["expect"].as_str().unwrap() {
            failures.push(format!("{id}: got {got} ({reason}); {}", case["why"]));
        }
    }
    assert!(failures.is_empty(), "{provider}:\n{}", failures.join("\n"));
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["allow", "ask", "deny"]
    );
}

#[test]
fn codex_fixtures_are_answered_in_codex_terms() {
    run_fixtures("codex", codex_decision);
}

#[test]
fn gemini_fixtures_are_answered_in_gemini_terms() {
    run_fixtures("gemini", gemini_decision);
}

/// Every shell corpus case through both hooks decides as `warden hook claude-code` and
/// `warden check` do (the corpus's own expectations).
#[test]
fn the_shell_corpus_decides_the_same_through_codex_and_gemini() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/shell/cases.jsonl"),
    )
    .unwrap();
    let mut failures = Vec::new();
    for (i, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let case: Value = serde_json::from_str(line).unwrap();
        let policy = super::shell::case_policy(dir.path(), i, &case);
        let command = case["command"].as_str().unwrap();
        let cwd = dir.path().to_str().unwrap();
        let codex = json!({"session_id": "s", "turn_id": "1", "transcript_path": null, "cwd": cwd,
            "hook_event_name": "PreToolUse", "model": "m", "permission_mode": "default",
            "tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": "c"});
        let gemini = json!({"session_id": "s", "transcript_path": "", "cwd": cwd,
            "hook_event_name": "BeforeTool", "timestamp": "2026-08-21T16:16:56.123Z",
            "tool_name": "run_shell_command", "tool_input": {"command": command}});
        let want = case["expect"].as_str().unwrap();
        let args = |p: &'static str| ["hook", p, "--policy", policy.as_str()];
        let (c, _) = codex_decision(&hook_with(
            &args("codex"),
            &codex.to_string(),
            dir.path(),
            &[],
        ));
        let (g, _) = gemini_decision(&hook_with(
            &args("gemini"),
            &gemini.to_string(),
            dir.path(),
            &[],
        ));
        if c != want || g != want {
            failures.push(format!(
                "{}: codex {c}, gemini {g}, want {want}",
                case["id"]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every way an event can be wrong, and every failure inside Warden, is the provider's blocking
/// answer, with a reason naming the problem.
#[test]
fn every_failure_is_the_providers_blocking_answer() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(dir.path(), "p.toml", "default = \"allow\"\n");
    let broken = write(dir.path(), "broken.toml", "allow = [\"read\"]\n");
    let codex_ok = r#"{"cwd":"/repo","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}"#;
    let gemini_ok = r#"{"cwd":"/repo","hook_event_name":"BeforeTool","tool_name":"read_file","tool_input":{"file_path":"a"}}"#;
    for (provider, ok, decide) in [
        (
            "codex",
            codex_ok,
            codex_decision as fn(&Output) -> (String, String),
        ),
        ("gemini", gemini_ok, gemini_decision),
    ] {
        // The well-formed event is allowed: the failures below are the failures'.
        assert_eq!(decide(&run(provider, &policy, ok, dir.path())).0, "allow");
        let event = |tool: &str, input: &str| {
            ok.replace(
                &ok[ok.find("\"tool_name\"").unwrap()..ok.len() - 1],
                &format!("\"tool_name\":\"{tool}\",\"tool_input\":{input}"),
            )
        };
        let cases: Vec<(&str, String, &str, &str)> = vec![
            ("empty stdin", String::new(), &policy, "not JSON"),
            (
                "truncated",
                ok[..ok.len() / 2].to_owned(),
                &policy,
                "not JSON",
            ),
            ("an array", "[1]".into(), &policy, "not a JSON object"),
            (
                "another event",
                ok.replace("PreToolUse", "Stop")
                    .replace("BeforeTool", "AfterTool"),
                &policy,
                "unknown hook event",
            ),
            (
                "no tool_input",
                ok[..ok.find(",\"tool_input\"").unwrap()].to_owned() + "}",
                &policy,
                "no `tool_input`",
            ),
            (
                "a relative cwd",
                ok.replace("/repo", "repo"),
                &policy,
                "an absolute path",
            ),
            (
                "an unknown tool",
                event("frobnicate", "{}"),
                &policy,
                "unknown tool `frobnicate`",
            ),
            (
                "a policy that does not load",
                ok.to_owned(),
                &broken,
                "default",
            ),
        ];
        for (what, stdin, policy, says) in cases {
            let out = run(provider, policy, &stdin, dir.path());
            let (d, reason) = decide(&out);
            assert_eq!(d, "deny", "{provider}, {what}: {reason}");
            assert!(
                reason.contains(says),
                "{provider}, {what}: {reason:?} should say {says:?}"
            );
        }
        // A panic inside is a block too.
        let out = hook_with(
            &["hook", provider, "--policy", &policy],
            ok,
            dir.path(),
            &[("WARDEN_HOOK_TEST_PANIC", "1")],
        );
        let (d, reason) = decide(&out);
        assert_eq!(d, "deny", "{provider}: {reason}");
        assert!(reason.contains("panic"), "{reason}");
    }
    // Provider-specific shapes Warden cannot read.
    let patch = r#"{"cwd":"/repo","hook_event_name":"PreToolUse","tool_name":"apply_patch","tool_input":{"command":"rm -rf /"}}"#;
    let (d, reason) = codex_decision(&run("codex", &policy, patch, dir.path()));
    assert_eq!(d, "deny");
    assert!(reason.contains("the patch does not parse"), "{reason}");
    let mcp = r#"{"cwd":"/repo","hook_event_name":"BeforeTool","tool_name":"mcp_github_get_issue","tool_input":{}}"#;
    let (d, reason) = gemini_decision(&run("gemini", &policy, mcp, dir.path()));
    assert_eq!(
        d, "deny",
        "an MCP name without mcp_context is never guessed at: {reason}"
    );
}

/// A secret in the input blocks in both (neither provider is sure to run a rewritten input),
/// and the journal records each verdict on the provider's session chain.
#[test]
fn guards_block_and_the_journal_records_each_provider() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        dir.path(),
        "p.toml",
        "default = \"allow\"\ndeny = [\"bash(rm:*)\"]\n[guards]\nsecrets = \"redact\"\n",
    );
    let store = dir.path().join("journal.db");
    let token = format!("gh{}_{}", "p", "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5");
    for (provider, event, decide) in [
        (
            "codex",
            json!({"session_id": "s1", "cwd": "/repo", "hook_event_name": "PreToolUse",
            "tool_name": "Bash", "tool_input": {"command": format!("echo {token}")}, "tool_use_id": "c1"}),
            codex_decision as fn(&Output) -> (String, String),
        ),
        (
            "gemini",
            json!({"session_id": "s1", "cwd": "/repo", "hook_event_name": "BeforeTool",
            "tool_name": "run_shell_command", "tool_input": {"command": format!("echo {token}")}}),
            gemini_decision,
        ),
    ] {
        let args = [
            "hook",
            provider,
            "--policy",
            &policy,
            "--journal",
            store.to_str().unwrap(),
        ];
        let out = hook_with(&args, &event.to_string(), dir.path(), &[]);
        let (d, reason) = decide(&out);
        assert_eq!(d, "deny", "{provider}: {reason}");
        assert!(reason.contains("a guard blocked this call"), "{reason}");
        assert!(!reason.contains(&token) && !text(&out.stderr).contains(&token));
        let rm = event
            .to_string()
            .replace(&format!("echo {token}"), "rm -rf /");
        assert_eq!(decide(&hook_with(&args, &rm, dir.path(), &[])).0, "deny");
    }
    let conn = rusqlite::Connection::open(&store).unwrap();
    let mut stmt = conn
        .prepare("SELECT chain_id, payload_json FROM journal ORDER BY chain_id, sequence")
        .unwrap();
    let rows: Vec<(String, Value)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get::<_, String>(1)?)))
        .unwrap()
        .map(|r| {
            r.map(|(c, p)| (c, serde_json::from_str(&p).unwrap()))
                .unwrap()
        })
        .collect();
    let summary: Vec<(&str, &str, &str, &str)> = rows
        .iter()
        .map(|(c, p)| {
            (
                c.as_str(),
                p["provider"].as_str().unwrap(),
                p["event"].as_str().unwrap(),
                p["reason_code"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("codex-s1", "codex", "PreToolUse", "guard"),
            ("codex-s1", "codex", "PreToolUse", "policy_rule"),
            ("gemini-s1", "gemini", "BeforeTool", "guard"),
            ("gemini-s1", "gemini", "BeforeTool", "policy_rule"),
        ]
    );
    drop(stmt);
    drop(conn);
    let verify = warden(
        &["evidence", "verify", "--store", store.to_str().unwrap()],
        dir.path(),
    );
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify.stdout));
}

/// `--print-settings` prints what the provider reads: Codex's `config.toml` tables, Gemini's
/// `settings.json` object, each running this very hook through a shell with absolute paths.
#[test]
fn print_settings_installs_this_hook_in_each_provider() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "my policy.toml", "default = \"ask\"\n");
    let settings = |provider: &str| {
        let out = warden(
            &[
                "hook",
                provider,
                "--print-settings",
                "--policy",
                "my policy.toml",
            ],
            dir.path(),
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let codex: toml::Value = toml::from_str(&settings("codex")).unwrap();
    let group = &codex["hooks"]["PreToolUse"][0];
    assert_eq!(group["matcher"].as_str(), Some("*"));
    let handler = &group["hooks"][0];
    assert_eq!(handler["type"].as_str(), Some("command"));
    assert_eq!(handler["timeout"].as_integer(), Some(10));
    let gemini: Value = serde_json::from_str(&settings("gemini")).unwrap();
    assert_eq!(gemini["hooksConfig"]["enabled"], true);
    let gemini_handler = &gemini["hooks"]["BeforeTool"][0]["hooks"][0];
    assert_eq!(gemini["hooks"]["BeforeTool"][0]["matcher"], "*");
    assert_eq!(gemini_handler["timeout"], 10_000);
    // Each command, run by a shell as the provider runs it, is this hook on this policy.
    let policy = dir.path().join("my policy.toml").canonicalize().unwrap();
    for (provider, command, event) in [
        (
            "codex",
            handler["command"].as_str().unwrap().to_owned(),
            r#"{"cwd":"/repo","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}"#,
        ),
        (
            "gemini",
            gemini_handler["command"].as_str().unwrap().to_owned(),
            r#"{"cwd":"/repo","hook_event_name":"BeforeTool","tool_name":"run_shell_command","tool_input":{"command":"ls"}}"#,
        ),
    ] {
        assert!(
            command.contains(&format!("hook {provider} --policy '{}'", policy.display())),
            "{command}"
        );
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("printf '%s' '{event}' | {command}")])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let (d, _) = if provider == "codex" {
            codex_decision(&out)
        } else {
            gemini_decision(&out)
        };
        assert_eq!(
            d, "ask",
            "{provider}: the default of the policy the command names"
        );
    }
    // A policy that does not load is refused before anything is printed.
    write(dir.path(), "bad.toml", "allow = [\"read\"]\n");
    let out = warden(
        &["hook", "codex", "--print-settings", "--policy", "bad.toml"],
        dir.path(),
    );
    assert_eq!((out.status.code(), out.stdout.is_empty()), (Some(2), true));
}

/// The quoting of the settings' shell command survives a real shell, word for word.
#[test]
fn settings_commands_are_quoted_for_a_real_shell() {
    let words = [
        "plain",
        "with space",
        "it's",
        "$HOME",
        "a\"b",
        "",
        "*",
        "x;rm -rf /",
        "`id`",
    ];
    let mut args = vec!["%s\\n".to_owned()];
    args.extend(words.iter().map(|w| (*w).to_owned()));
    let line = warden_harness::hook::shell_command("printf", &args);
    let out = std::process::Command::new("sh")
        .args(["-c", &line])
        .output()
        .unwrap();
    assert_eq!(
        text(&out.stdout),
        words.map(|w| format!("{w}\n")).concat(),
        "{line}"
    );
}
