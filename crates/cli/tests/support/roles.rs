//! Who a policy file speaks for, end to end: the command line gives each file its role
//! (`--managed`, `--policy`, `--user`, `--untrusted`); a repository file can neither cancel
//! nor outrank the managed file's deny through `warden check`, `explain`, `replay` or the hook;
//! and the files Warden relies on (the policy files, the hook's journal) are protected from
//! the agent.

use std::path::Path;

use serde_json::{Value, json};

use super::hook::{decision, hook_with, pre};
use super::{lines, warden, write};

const MANAGED: &str = "default = \"ask\"\ndeny = [\"bash(rm:*)\"]\n";
/// The attack: the same rank as the managed file, a carve-out of its deny, and an allow.
const REPO: &str =
    "default = \"allow\"\nallow = [\"bash\"]\ndeny = [\"bash(!rm:*)\"]\n[source]\nrank = 0\n";

fn check(args: &[&str], command: &str, dir: &Path) -> Value {
    let mut all: Vec<&str> = vec!["check", "--format", "json", "--tool", "bash", "--args"];
    let call = json!({ "command": command }).to_string();
    all.push(&call);
    all.extend_from_slice(args);
    let out = warden(&all, dir);
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lines(&out).remove(0)
}

#[test]
fn a_repository_file_cannot_cancel_the_managed_deny_through_check_or_the_hook() {
    let dir = tempfile::tempdir().unwrap();
    let managed = write(dir.path(), "managed.toml", MANAGED);
    let repo = write(dir.path(), "repo.toml", REPO);
    let untrusted = write(
        dir.path(),
        "untrusted.toml",
        "deny = [\"bash(!rm:*)\"]\nallow = [\"bash\"]\n",
    );
    for args in [
        vec!["--managed", &managed, "--policy", &repo],
        vec!["--policy", &repo, "--managed", &managed],
        vec!["--managed", &managed, "--user", &repo],
        vec!["--managed", &managed, "--untrusted", &untrusted],
        // Loaded as peers, the tie never lets one file's carve-out reach the other's deny.
        vec!["--policy", &managed, "--policy", &repo],
        vec!["--policy", &repo, "--policy", &managed],
    ] {
        let v = check(&args, "rm -rf src", dir.path());
        assert_eq!(v["decision"], "deny", "{args:?}: {v}");
        assert_eq!(v["source"], "managed", "{args:?}");
        let mut hook_args = vec!["hook", "claude-code"];
        hook_args.extend(args.iter().copied());
        let out = hook_with(
            &hook_args,
            &pre("Bash", json!({"command": "rm -rf src"}), dir.path()),
            dir.path(),
            &[],
        );
        assert_eq!(decision(&out).0, "deny", "{args:?}");
        // `warden explain` and `warden replay` load the files the same way.
        let mut explain = vec!["explain", "--format", "json", "--tool", "bash", "--args"];
        let call = json!({ "command": "rm -rf src" }).to_string();
        explain.push(&call);
        explain.extend(args.iter().copied());
        let out = warden(&explain, dir.path());
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        assert!(
            v.to_string().contains("\"decision\":\"deny\""),
            "{args:?}: {v}"
        );
        let calls = write(
            dir.path(),
            "calls.jsonl",
            "{\"tool\":\"bash\",\"args\":{\"command\":\"rm -rf src\"}}\n",
        );
        let mut replay = vec!["replay", calls.as_str(), "--format", "json"];
        replay.extend(args.iter().copied());
        let out = warden(&replay, dir.path());
        assert_eq!(lines(&out)[0]["decision"], "deny", "{args:?}");
    }
}

#[test]
fn a_file_that_raises_its_rank_or_an_untrusted_file_that_widens_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let raised = write(
        dir.path(),
        "raised.toml",
        "default = \"ask\"\n[source]\nrank = 7\n",
    );
    let out = warden(&["policy", "compile", "--policy", &raised], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("raised.toml") && stderr.contains("may only lower its standing"),
        "{stderr}"
    );
    let widening = write(dir.path(), "w.toml", "default = \"allow\"\n");
    let out = warden(&["policy", "compile", "--untrusted", &widening], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`default` could widen"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = warden(&["policy", "compile"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no policy file given"));
}

#[test]
fn compile_reports_roles_and_where_the_strictest_default_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let org = write(dir.path(), "org.toml", "preset = \"read_only\"\n");
    let repo = write(dir.path(), "repo.toml", "default = \"allow\"\n");
    let out = warden(
        &[
            "policy",
            "compile",
            "--format",
            "json",
            "--policy",
            &repo,
            "--managed",
            &org,
        ],
        dir.path(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = lines(&out).remove(0);
    assert_eq!(v["default"], "deny");
    assert_eq!(v["default_from"]["preset"], "read_only");
    assert!(
        v["default_from"]["file"]
            .as_str()
            .unwrap()
            .ends_with("org.toml")
    );
    let roles: Vec<(&str, &str)> = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["role"].as_str().unwrap()))
        .collect();
    assert_eq!(roles, [("org", "managed"), ("repo", "project")]);
    let text = warden(
        &["policy", "compile", "--policy", &repo, "--managed", &org],
        dir.path(),
    );
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("default deny (from") && text.contains("implied by preset `read_only`"),
        "{text}"
    );
}

#[test]
fn policy_files_and_the_journal_are_protected_from_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let policy = write(
        &root,
        "policy.toml",
        "default = \"allow\"\nallow = [\"edit\", \"write\", \"bash\"]\n",
    );
    let journal = root.join("journal.db").display().to_string();
    std::os::unix::fs::symlink(&policy, root.join("innocent")).unwrap();
    let args = [
        "hook",
        "claude-code",
        "--policy",
        policy.as_str(),
        "--journal",
        journal.as_str(),
    ];
    let decide = |tool: &str, input: Value| {
        let out = hook_with(&args, &pre(tool, input, &root), &root, &[]);
        decision(&out)
    };
    for (tool, input) in [
        (
            "Write",
            json!({"file_path": policy, "content": "default = \"allow\""}),
        ),
        (
            "Edit",
            json!({"file_path": root.join("innocent"), "old_string": "a", "new_string": "b"}),
        ),
        ("Write", json!({"file_path": journal, "content": ""})),
        (
            "Write",
            json!({"file_path": format!("{journal}-wal"), "content": ""}),
        ),
        (
            "Bash",
            json!({"command": "echo 'allow = [\"bash\"]' >> policy.toml"}),
        ),
        ("Bash", json!({"command": "rm journal.db"})),
    ] {
        let (d, reason) = decide(tool, input.clone());
        assert_eq!(d, "deny", "{tool} {input}: {reason}");
        assert!(
            reason.contains("protects from the governed agent"),
            "{reason}"
        );
    }
    assert_eq!(
        decide("Bash", json!({"command": "cat policy.toml"})).0,
        "allow"
    );
    assert_eq!(
        decide(
            "Write",
            json!({"file_path": root.join("notes.md"), "content": "x"})
        )
        .0,
        "allow"
    );
    // `warden explain` says why.
    let out = warden(
        &[
            "explain",
            "--policy",
            &policy,
            "--tool",
            "write",
            "--args",
            &json!({ "path": policy }).to_string(),
        ],
        &root,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("decision: deny") && text.contains("a policy file Warden loaded"),
        "{text}"
    );
}

#[test]
fn print_settings_keeps_each_files_role() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let managed = write(&root, "managed.toml", MANAGED);
    let repo = write(&root, "repo.toml", "default = \"ask\"\n");
    let out = warden(
        &[
            "hook",
            "claude-code",
            "--print-settings",
            "--policy",
            &repo,
            "--managed",
            &managed,
        ],
        &root,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["hooks"]["PreToolUse"][0]["hooks"][0]["args"],
        json!([
            "hook",
            "claude-code",
            "--managed",
            managed,
            "--policy",
            repo
        ])
    );
}
