//! Subagent scopes: a lead agent's policy, and subagents whose scopes inherit it, narrow it,
//! or expand it under a named authority. The same calls are decided in each scope, and each
//! verdict names the scope whose policy decided and how (docs/design/policy.md#subagent-scopes).
//!
//! What it shows:
//! - `helper` has no policy of its own and inherits the lead's verdicts;
//! - `reviewer` has its own, stricter policy: it gets the stricter of its own verdict and the
//!   lead's, so it can narrow the lead but never widen it;
//! - `release` expands the lead under the authority `release-team`: its allow rules replace the
//!   lead's asks, and every verdict that relied on that names the authority;
//! - in every scope, the lead's deny rules are asked first: no child allows what they deny.
//!
//! Run it (it exits non-zero if a verdict is not the one shown):
//!
//! ```text
//! cargo run -p warden-policy --example subagent_scope
//! ```
#![forbid(unsafe_code)]

use std::sync::Arc;

use serde_json::json;
use warden_policy::{Call, ChildPolicy, Decision, PolicySnapshot, Scope, ScopeStage};

const LEAD: &str = r#"
default = "ask"
allow = ["read", "edit", "bash(git:*)", "bash(cargo test:*)"]
ask = ["bash(cargo publish:*)"]
deny = ["bash(rm:*)", "bash(git push --force:*)"]
"#;

/// Reads and inspects; nothing else. (It also allows `cat`, which the lead only asks for.)
const REVIEWER: &str = r#"
default = "deny"
allow = ["read", "bash(git diff:*)", "bash(git log:*)", "bash(cat:*)"]
"#;

/// Publishes, and may force-push: the lead's deny rules still bind it.
const RELEASE: &str = r#"
default = "deny"
allow = ["read", "bash(cargo publish:*)", "bash(git push:*)"]
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let policy = |text: &str| PolicySnapshot::from_toml(text, "/repo").map(Arc::new);
    let lead = Scope::root("lead", policy(LEAD)?)?;
    let helper = lead.child("helper", ChildPolicy::Inherit)?;
    let reviewer = lead.child("reviewer", ChildPolicy::Own(policy(REVIEWER)?))?;
    let release = lead.child(
        "release",
        ChildPolicy::Expand {
            policy: policy(RELEASE)?,
            authority: "release-team".into(),
        },
    )?;

    use Decision::{Allow, Ask, Deny};
    // For each call, the expected decision in lead, helper, reviewer and release.
    let cases = [
        (read("/repo/src/lib.rs"), [Allow, Allow, Allow, Allow]),
        // An expansion replaces the lead's allow rules, it does not add to them: `release`
        // may not edit.
        (edit("/repo/src/lib.rs"), [Allow, Allow, Deny, Deny]),
        (bash("git diff HEAD~1"), [Allow, Allow, Allow, Deny]),
        // The reviewer allows `cat`, but the lead asks: the stricter verdict stands.
        (bash("cat README.md"), [Ask, Ask, Ask, Deny]),
        (bash("cargo publish"), [Ask, Ask, Deny, Allow]),
        (bash("rm -rf target"), [Deny, Deny, Deny, Deny]),
        (
            bash("git push --force origin main"),
            [Deny, Deny, Deny, Deny],
        ),
    ];
    let scopes = [&lead, &helper, &reviewer, &release];
    for (call, expected) in &cases {
        println!("{} {}", call.tool, call.args);
        for (scope, want) in scopes.iter().zip(expected) {
            let v = scope.decide(call);
            let authorities: Vec<&str> = v.authorities.iter().map(|a| &*a.authority).collect();
            println!(
                "  in {:<8} {:<5} decided by {:<8} ({:?}){}",
                scope.name(),
                v.decision().to_string(),
                v.scope,
                v.stage,
                if authorities.is_empty() {
                    String::new()
                } else {
                    format!(", relying on {}", authorities.join(", "))
                }
            );
            if v.decision() != *want {
                return Err(format!("in {}: expected {want}: {}", scope.name(), v.reason).into());
            }
        }
    }

    // How a few of them were reached.
    let checks = [
        // The lead's deny rule decides before the reviewer's own policy is asked.
        (&reviewer, bash("rm -rf target"), ScopeStage::AncestorDeny),
        // No policy of its own: the lead's verdict, inherited.
        (&helper, bash("cargo publish"), ScopeStage::Inherited),
        // The reviewer's own allow does not lift the lead's ask.
        (&reviewer, bash("cat README.md"), ScopeStage::Stricter),
        // The reviewer's own default denies what the lead allows.
        (&reviewer, edit("/repo/src/lib.rs"), ScopeStage::Own),
    ];
    for (scope, call, want) in &checks {
        let got = scope.decide(call).stage;
        if got != *want {
            return Err(
                format!("in {}: expected stage {want:?}, got {got:?}", scope.name()).into(),
            );
        }
    }
    // The release scope's allow of `cargo publish` replaced the lead's ask: the verdict says so.
    let v = release.decide(&bash("cargo publish"));
    println!("\nrelease, cargo publish: {}", v.reason);
    if !v
        .authorities
        .iter()
        .any(|a| &*a.authority == "release-team")
    {
        return Err("the expansion's authority is not named".into());
    }
    Ok(())
}

fn bash(command: &str) -> Call {
    Call::new("bash", json!({ "command": command }))
}

fn read(path: &str) -> Call {
    Call::new("read", json!({ "path": path }))
}

fn edit(path: &str) -> Call {
    Call::new("edit", json!({ "path": path, "old": "a", "new": "b" }))
}
