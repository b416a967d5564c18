//! Decisions only, with `warden-policy` alone: no executor, no async runtime, no evidence.
//!
//! Compiles a policy from TOML text, decides a few tool calls and prints each decision with the
//! rule and source that decided it; then shows a compound shell command split into subjects
//! (the strictest subject decides the whole call) and the refusal of a command that does not
//! parse (denied whatever the rules and the default say).
//!
//! Run it (it exits non-zero if a decision is not the one shown):
//!
//! ```text
//! cargo run -p warden-policy --example decisions
//! cargo run -p warden-policy --no-default-features --example decisions
//! ```
//!
//! The second form builds the crate without signed receipts (no ed25519): deciding needs none.
#![forbid(unsafe_code)]

use serde_json::json;
use warden_policy::{Call, Decision, PolicySnapshot, Verdict};

/// A project policy: read and inspect freely, ask before publishing, never delete. Anything
/// else falls to the default, `ask`.
const POLICY: &str = r#"
default = "ask"
allow = ["read", "bash(git status:*)", "bash(git diff:*)", "bash(ls:*)"]
ask = ["bash(git push:*)"]
deny = ["bash(rm:*)", "read(**/.env)"]
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Relative path patterns are anchored at the project root given here; deciding never
    // touches the file system, so the folder need not exist.
    let policy = PolicySnapshot::from_toml(POLICY, "/repo")?;
    println!("policy {} (digest {})\n", policy.id(), policy.digest());

    let cases = [
        (bash("git status"), Decision::Allow),
        (bash("git push origin main"), Decision::Ask),
        (bash("rm -rf target"), Decision::Deny),
        (read("/repo/src/lib.rs"), Decision::Allow),
        (read("/repo/config/.env"), Decision::Deny),
        // No rule names `write`: the default decides, and the verdict cites no rule.
        (
            Call::new("write", json!({"path": "/repo/a.txt", "content": "hi"})),
            Decision::Ask,
        ),
    ];
    for (call, expected) in &cases {
        let verdict = policy.decide(call);
        print_verdict(call, &verdict);
        expect(&verdict, *expected)?;
    }

    // A compound command is decided per simple command: each is a subject, and the call gets
    // the strictest subject's decision. An allowed `git status` does not carry the `rm`.
    let call = bash("git status && rm -rf /");
    let verdict = policy.decide(&call);
    print_verdict(&call, &verdict);
    for s in &verdict.subjects {
        println!(
            "    subject {:<14} {:<5} rule {}",
            format!("`{}`", s.text),
            s.decision.to_string(),
            s.rule.as_deref().unwrap_or("-")
        );
    }
    expect(&verdict, Decision::Deny)?;
    if verdict.subjects.len() != 2 || verdict.subject.as_deref() != Some("rm -rf /") {
        return Err(format!("expected two subjects, `rm -rf /` deciding: {verdict:?}").into());
    }

    // What cannot be parsed cannot be checked: it is denied, even though `ls:*` allows `ls`
    // and the default would only ask.
    let call = bash("ls \"unterminated");
    let verdict = policy.decide(&call);
    print_verdict(&call, &verdict);
    expect(&verdict, Decision::Deny)?;
    if verdict.rule.is_some() {
        return Err("a refusal cites no rule".into());
    }
    Ok(())
}

fn bash(command: &str) -> Call {
    Call::new("bash", json!({ "command": command }))
}

fn read(path: &str) -> Call {
    Call::new("read", json!({ "path": path }))
}

fn print_verdict(call: &Call, v: &Verdict) {
    let what = call
        .args
        .get("command")
        .or_else(|| call.args.get("path"))
        .and_then(|a| a.as_str())
        .unwrap_or("");
    println!(
        "{:<5} {:<5} {:<28} rule {:<20} source {:<6} {}",
        v.decision.to_string(),
        call.tool,
        format!("`{what}`"),
        v.rule.as_deref().unwrap_or("-"),
        v.source.as_deref().unwrap_or("-"),
        v.reason
    );
}

fn expect(v: &Verdict, expected: Decision) -> Result<(), String> {
    if v.decision == expected {
        Ok(())
    } else {
        Err(format!(
            "expected {expected}, got {}: {}",
            v.decision, v.reason
        ))
    }
}
