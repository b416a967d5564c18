//! Hint rules: read-only calls allowed, destructive and open-world ones asked, MCP hints
//! believed only for trusted servers, explicit rules first.

use serde_json::json;
use warden_policy::hints;
use warden_policy::*;

fn snapshot(text: &str) -> PolicySnapshot {
    let file = LoadedPolicy::from_text(text.into(), Format::Toml, "p.toml", "project", None)
        .unwrap_or_else(|e| panic!("{e}"));
    let env = PathEnv {
        project_root: "/repo".into(),
        home: None,
    };
    PolicySnapshot::from_files(&[file], env).unwrap_or_else(|e| panic!("{e}"))
}

const HINTS: &str = r#"
default = "deny"
deny = ["bash(curl:*)"]
allow = ["bash(make:*)"]

[hints]
read_only = "allow"
destructive = "ask"
open_world = "ask"
trust_mcp = ["github"]
"#;

#[test]
fn hint_rules_decide_what_no_rule_does() {
    let s = snapshot(HINTS);
    let d = |call: Call| s.decide(&call).decision;
    let bash = |c: &str| Call::new("bash", json!({ "command": c }));
    // Built-in tools carry their own hints.
    assert_eq!(
        d(Call::new("read", json!({"path": "/repo/a"}))),
        Decision::Allow
    );
    assert_eq!(
        d(Call::new("edit", json!({"path": "/repo/a"}))),
        Decision::Ask
    );
    assert_eq!(
        d(Call::new("web_fetch", json!({"url": "https://docs.rs"}))),
        Decision::Ask,
        "read-only but open-world: the stricter hint wins"
    );
    // A shell command is read-only only when the splitter knows it.
    assert_eq!(d(bash("ls -la && git status")), Decision::Allow);
    assert_eq!(d(bash("find . -delete")), Decision::Ask);
    assert_eq!(d(bash("sed -i s/a/b/ f")), Decision::Ask);
    // Explicit rules come first.
    assert_eq!(d(bash("make build")), Decision::Allow);
    assert_eq!(d(bash("curl https://x")), Decision::Deny);
    let v = s.decide(&bash("ls"));
    assert_eq!(v.rule, None);
    assert!(v.reason.contains("read-only by its hints"), "{}", v.reason);
}

#[test]
fn mcp_hints_count_only_for_trusted_servers() {
    let s = snapshot(HINTS);
    let read_only =
        hints::from_mcp_annotations(&json!({"readOnlyHint": true, "openWorldHint": false}));
    let trusted = Call::new("github__get_issue", json!({})).with_hints(read_only);
    assert_eq!(s.decide(&trusted).decision, Decision::Allow);
    let untrusted = Call::new("files__read", json!({})).with_hints(read_only);
    assert_eq!(
        s.decide(&untrusted).decision,
        Decision::Ask,
        "an untrusted server's hints are the cautious defaults"
    );
    // A caller cannot pass a built-in tool off as read-only.
    let spoofed = Call::new("write", json!({"path": "/repo/a"})).with_hints(read_only);
    assert_eq!(s.decide(&spoofed).decision, Decision::Ask);
}

#[test]
fn hint_rules_are_in_the_digest_and_merge_strictest() {
    let a = snapshot(HINTS);
    let b = snapshot(&HINTS.replace("destructive = \"ask\"", "destructive = \"deny\""));
    assert_ne!(a.digest(), b.digest());
    assert_eq!(
        b.decide(&Call::new("edit", json!({"path": "/repo/a"})))
            .decision,
        Decision::Deny
    );
    let err = LoadedPolicy::from_text(
        "default = \"ask\"\n[hints]\nread_olny = \"allow\"\n".into(),
        Format::Toml,
        "p.toml",
        "p",
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("read_olny") && err.contains("p.toml"), "{err}");
}
