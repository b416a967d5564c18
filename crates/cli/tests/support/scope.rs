//! `warden check --scope NAME`: the `--policy` files composed as subagent scopes (a file with a
//! `[scope]` table is a subagent's policy, the others merge into the root's), and a call decided
//! as that scope would: ancestors' deny rules first, stricter-of by default, an expansion naming
//! its authority. The JSON line is `warden check`'s, plus a `scope` object.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use super::{lines, warden, write};

/// The lead (root), a drafter under it, and a builder that expands the drafter.
fn scopes(dir: &Path) -> Vec<String> {
    vec![
        write(
            dir,
            "lead.toml",
            "id = \"lead\"\ndefault = \"ask\"\nallow = [\"read\"]\ndeny = [\"bash(rm:*)\"]\n",
        ),
        write(
            dir,
            "drafter.toml",
            "default = \"deny\"\nallow = [\"read\", \"write(drafts/**)\", \"bash(rm:*)\"]\n\n[scope]\nname = \"drafter\"\n",
        ),
        write(
            dir,
            "builder.toml",
            "default = \"allow\"\n\n[scope]\nname = \"builder\"\nparent = \"drafter\"\nexpands_parent = { authority = \"platform-team\" }\n",
        ),
    ]
}

/// `warden <command>` with `--policy` for each of `policies`, then `rest`.
fn run(dir: &Path, command: &str, policies: &[String], rest: &[&str]) -> Output {
    let mut argv = vec![command];
    for p in policies {
        argv.extend(["--policy", p.as_str()]);
    }
    argv.extend_from_slice(rest);
    warden(&argv, dir)
}

/// `warden check --scope scope --format json` of one call; the line.
fn check(dir: &Path, scope: &str, tool: &str, args: &str) -> Value {
    let rest = [
        "--scope", scope, "--tool", tool, "--args", args, "--format", "json",
    ];
    let out = run(dir, "check", &scopes(dir), &rest);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = lines(&out);
    assert_eq!(got.len(), 1);
    got[0].clone()
}

#[test]
fn check_scope_an_ancestors_deny_rules_bind_every_subagent_below_it() {
    let dir = tempfile::tempdir().unwrap();
    for caller in ["drafter", "builder"] {
        let v = check(dir.path(), caller, "bash", r#"{"command":"rm -rf build"}"#);
        assert_eq!(v["decision"], "deny", "{v}");
        assert_eq!(v["rule"], "bash(rm:*)");
        assert_eq!(v["source"], "lead");
        assert_eq!(v["scope"]["caller"], caller);
        assert_eq!(v["scope"]["decided_by"], "lead");
        assert_eq!(v["scope"]["stage"], "ancestor_deny");
        let reason = v["reason"].as_str().unwrap();
        assert!(reason.contains("scope `lead`"), "{reason}");
        assert!(reason.contains(caller), "{reason}");
    }
}

#[test]
fn check_scope_a_child_gets_the_stricter_verdict_and_an_expansion_names_its_authority() {
    let dir = tempfile::tempdir().unwrap();
    // The drafter allows writing drafts, the lead would ask: stricter-of asks, citing the lead.
    let v = check(dir.path(), "drafter", "write", r#"{"path":"drafts/a.md"}"#);
    assert_eq!(v["decision"], "ask", "{v}");
    assert_eq!(v["scope"]["stage"], "stricter");
    assert_eq!(v["scope"]["decided_by"], "lead");
    assert_eq!(v["scope"]["authorities"], Value::Array(vec![]));
    // The builder expands the drafter under an authority: its own default allows, and the
    // verdict names the expansion it relied on.
    let v = check(
        dir.path(),
        "builder",
        "bash",
        r#"{"command":"cargo build"}"#,
    );
    assert_eq!(v["decision"], "allow", "{v}");
    assert_eq!(v["scope"]["stage"], "own");
    assert_eq!(
        v["scope"]["authorities"],
        serde_json::json!([{"scope": "builder", "authority": "platform-team"}])
    );
    // Every scope's chain has its own digest; the root decides as plain `check` would.
    let root = check(dir.path(), "lead", "read", r#"{"path":"a"}"#);
    assert_eq!(root["decision"], "allow");
    assert_eq!(root["scope"]["stage"], "own");
    assert_ne!(root["scope"]["scope_digest"], v["scope"]["scope_digest"]);
}

#[test]
fn check_scope_an_unknown_scope_is_an_input_error_naming_the_scopes() {
    let dir = tempfile::tempdir().unwrap();
    let policies = scopes(dir.path());
    let args = ["--scope", "nobody", "--tool", "read", "--args", "{}"];
    let out = run(dir.path(), "check", &policies, &args);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--scope nobody: no such scope"), "{err}");
    assert!(
        err.contains("lead") && err.contains("drafter") && err.contains("builder"),
        "{err}"
    );
    // Without --scope a subagent's file is refused, and the error says where it belongs.
    let out = run(dir.path(), "check", &policies[..2], &args[2..]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("warden check --scope"), "{err}");
}

#[test]
fn explain_scope_shows_the_chain_the_deciding_scope_and_its_policy() {
    let dir = tempfile::tempdir().unwrap();
    let rest = [
        "--scope",
        "builder",
        "--tool",
        "bash",
        "--args",
        r#"{"command":"cargo build"}"#,
    ];
    let out = run(dir.path(), "explain", &scopes(dir.path()), &rest);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "scope    builder (chain lead > drafter > builder)",
        "decision: allow",
        "decided by scope builder (its own policy)",
        "relies on scope builder expanding its parent under the authority platform-team",
        "the policy of scope builder:",
        "subject 1: cargo build [bash] → allow",
    ] {
        assert!(text.contains(needle), "{needle:?} in:\n{text}");
    }
}
