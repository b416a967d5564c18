//! Operating modes: the intersection of authorities, `apply_approved`'s receipts, and the
//! invariant that a mode never widens.

use proptest::prelude::*;
use serde_json::{Value, json};
use warden_contracts::{ApprovalId, Digest, Timestamp};
use warden_policy::receipt::SigningKey;
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

fn calls() -> Vec<(&'static str, Value)> {
    vec![
        ("read", json!({"path": "/repo/a"})),
        ("web_fetch", json!({"url": "https://docs.rs/x"})),
        ("edit", json!({"path": "/repo/a"})),
        ("bash", json!({"command": "cargo test"})),
        ("bash", json!({"command": "ls -la"})),
        ("github__create_issue", json!({})),
    ]
}

/// Under `allow_all`, each mode alone lets through exactly what its table says.
#[test]
fn each_mode_narrows_as_its_table_says() {
    use Decision::{Allow as A, Ask as Q, Deny as D};
    let table = [
        ("audit_only", [A, D, D, D, A, D]),
        ("plan_only", [A, A, D, D, A, D]),
        ("draft_only", [A, A, A, D, A, D]),
        ("verify_only", [A, A, D, A, A, D]),
        ("apply_safe", [A, D, A, A, A, D]),
        ("apply_approved", [A, Q, Q, Q, A, Q]),
    ];
    for (mode, want) in table {
        let s = snapshot(&format!(
            "preset = \"allow_all\"\n[modes]\nactive = [\"{mode}\"]"
        ));
        for ((tool, args), want) in calls().into_iter().zip(want) {
            let v = s.decide(&Call::new(tool, args.clone()));
            assert_eq!(v.decision, want, "{mode}: {tool} {args}: {}", v.reason);
            if want != A {
                assert!(
                    v.reason.contains(mode),
                    "{mode}: the reason names the mode: {}",
                    v.reason
                );
            }
        }
    }
}

/// Several modes intersect; a deny of the policy stays a deny.
#[test]
fn modes_intersect_and_never_lift_a_deny() {
    let s = snapshot(
        "default = \"allow\"\ndeny = [\"read(.env)\"]\n[modes]\nactive = [\"plan_only\", \"audit_only\"]",
    );
    assert_eq!(s.modes(), [Mode::AuditOnly, Mode::PlanOnly]);
    let d = |tool: &str, args: Value| s.decide(&Call::new(tool, args)).decision;
    assert_eq!(
        d("web_fetch", json!({"url": "https://docs.rs"})),
        Decision::Deny
    );
    assert_eq!(d("read", json!({"path": "/repo/a"})), Decision::Allow);
    assert_eq!(d("read", json!({"path": "/repo/.env"})), Decision::Deny);
}

/// Under `apply_approved`, a destructive call asks, and only a receipt bound to it answers.
#[test]
fn apply_approved_needs_a_receipt_bound_to_the_call() {
    let key = SigningKey::from_seed(&[7; 32]);
    let text = format!(
        "default = \"allow\"\ndeny = [\"bash(rm:*)\"]\n[modes]\nactive = [\"apply_approved\"]\n[approvers.ops]\nkeys = [\"{}\"]\n",
        key.verifying_key().to_hex()
    );
    let s = snapshot(&text);
    let push = Call::new("bash", json!({"command": "git push origin main"}));
    let receipt_for = |args: &Value| {
        ReceiptDraft {
            id: ApprovalId::new("r-1").unwrap(),
            approver: "ops".into(),
            action: "bash".into(),
            arguments_digest: Digest::of_json(args).unwrap(),
            policy_digest: s.digest().clone(),
            issued_at: Timestamp(10),
            expires_at: Timestamp(100),
        }
        .sign(&key)
        .unwrap()
    };
    assert_eq!(s.decide(&push).decision, Decision::Ask);
    let receipt = receipt_for(&push.args);
    let (v, approval) = s
        .decide_with_receipt(&push, &receipt, Timestamp(50))
        .unwrap();
    assert_eq!(v.decision, Decision::Allow, "{}", v.reason);
    assert_eq!(approval.unwrap().approval_id().as_str(), "r-1");
    // Bound to other arguments, or expired: refused, nothing allowed.
    let other = receipt_for(&json!({"command": "git push --force"}));
    assert!(s.decide_with_receipt(&push, &other, Timestamp(50)).is_err());
    assert!(
        s.decide_with_receipt(&push, &receipt, Timestamp(500))
            .is_err()
    );
    // A receipt never beats a deny.
    let rm = Call::new("bash", json!({"command": "rm -rf /"}));
    let (v, used) = s
        .decide_with_receipt(&rm, &receipt_for(&rm.args), Timestamp(50))
        .unwrap();
    assert_eq!(v.decision, Decision::Deny);
    assert!(used.is_none());
}

fn config() -> ProptestConfig {
    ProptestConfig::with_cases(if std::env::var_os("CI").is_some() {
        32
    } else {
        128
    })
}

proptest! {
    #![proptest_config(config())]

    /// Adding any operating modes to any policy never makes a call's decision less strict.
    #[test]
    fn a_mode_never_widens(
        preset in prop::sample::select(vec!["allow_all", "full_auto", "suggest", "safe", "read_only"]),
        modes in prop::collection::vec(prop::sample::select(vec![
            "audit_only", "plan_only", "draft_only", "verify_only", "apply_safe", "apply_approved",
        ]), 1..4),
        call in prop::sample::select((0..6usize).collect::<Vec<_>>()),
    ) {
        let plain = snapshot(&format!("preset = \"{preset}\""));
        let active: Vec<String> = modes.iter().map(|m| format!("\"{m}\"")).collect();
        let moded = snapshot(&format!(
            "preset = \"{preset}\"\n[modes]\nactive = [{}]",
            active.join(", ")
        ));
        let (tool, args) = calls()[call].clone();
        let c = Call::new(tool, args);
        prop_assert!(moded.decide(&c).decision >= plain.decide(&c).decision);
    }
}
