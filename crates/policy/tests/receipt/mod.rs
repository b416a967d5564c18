//! Approval receipts (docs/policy.md, "Approval receipts"): the `[approvers]` table, and every
//! way a receipt can fail — forged, tampered, expired, early, replayed for other arguments or
//! another action, bound to another policy, from an undeclared approver, malformed — each
//! refused with its own error; a valid one verifies.

use serde_json::{Value, json};
use warden_contracts::{ApprovalId, Digest, Timestamp};
use warden_policy::receipt::{RECEIPT_FORMAT, SigningKey, VerifyingKey};
use warden_policy::*;

fn key(n: u8) -> SigningKey {
    SigningKey::from_seed(&[n; 32])
}

/// SPKI PEM of a key, as `openssl pkey -pubout` writes it.
fn pem_of(k: &SigningKey) -> String {
    k.verifying_key().to_pem().unwrap()
}

fn policy_text(extra: &str) -> String {
    format!(
        "default = \"ask\"\nask = [\"bash\"]\n\n[approvers.release-managers]\nkeys = [\"{}\"]\n\n[approvers.security]\nkeys = [\"\"\"\n{}\"\"\"]\n{extra}",
        key(1).verifying_key().to_hex(),
        pem_of(&key(2)),
    )
}

fn load(text: &str, format: Format, stem: &str) -> LoadedPolicy {
    let label = match format {
        Format::Toml => format!("{stem}.toml"),
        Format::Json => format!("{stem}.json"),
    };
    LoadedPolicy::from_text(text.into(), format, &label, stem, None).unwrap()
}

fn snapshot_of(text: &str) -> PolicySnapshot {
    try_snapshot(text).unwrap()
}

fn try_snapshot(text: &str) -> Result<PolicySnapshot, PolicyError> {
    PolicySnapshot::from_files(
        &[load(text, Format::Toml, "policy")],
        PathEnv {
            project_root: "/repo".into(),
            home: None,
        },
    )
}

fn args() -> Value {
    json!({"command": "git push origin main"})
}

fn draft(policy: &PolicySnapshot, approver: &str) -> ReceiptDraft {
    ReceiptDraft {
        id: ApprovalId::new("rcpt-1").unwrap(),
        approver: approver.into(),
        action: "bash".into(),
        arguments_digest: Digest::of_json(&args()).unwrap(),
        policy_digest: policy.digest().clone(),
        issued_at: Timestamp(1_000),
        expires_at: Timestamp(61_000),
    }
}

const NOW: Timestamp = Timestamp(2_000);

/// A named change to a signed receipt.
type Tamper = (&'static str, Box<dyn Fn(&mut SignedReceipt)>);

#[test]
fn a_valid_receipt_verifies_and_becomes_the_executor_receipt() {
    let policy = snapshot_of(&policy_text(""));
    for (approver, signer) in [("release-managers", key(1)), ("security", key(2))] {
        let receipt = draft(&policy, approver).sign(&signer).unwrap();
        assert_eq!(receipt.format, RECEIPT_FORMAT);
        assert_eq!(receipt.id().as_str(), "rcpt-1");
        let approval = policy
            .verify_receipt(&receipt, "bash", &args(), NOW)
            .unwrap();
        assert_eq!(approval.approval_id().as_str(), "rcpt-1");
        assert_eq!(approval.action(), "bash");
        assert_eq!(approval.policy_digest(), Some(policy.digest()));
        assert_eq!(approval.approver().id.as_str(), approver);
        assert_eq!(
            approval.check_binding(
                "bash",
                &Digest::of_json(&args()).unwrap(),
                Some(policy.digest()),
                NOW
            ),
            Ok(())
        );
        // Key order and whitespace in the arguments do not matter: canonical JSON.
        let reordered: Value =
            serde_json::from_str("{ \"command\" : \"git push origin main\" }").unwrap();
        assert!(
            policy
                .verify_receipt(&receipt, "bash", &reordered, NOW)
                .is_ok()
        );
        // The JSON form round-trips and still verifies.
        let again = SignedReceipt::from_json(&receipt.to_json().unwrap()).unwrap();
        assert_eq!(again, receipt);
        assert!(policy.verify_receipt(&again, "bash", &args(), NOW).is_ok());
    }
}

#[test]
fn a_forged_receipt_is_refused() {
    let policy = snapshot_of(&policy_text(""));
    // Signed by a key the class does not hold (key 2 belongs to another class).
    for forger in [key(9), key(2)] {
        let forged = draft(&policy, "release-managers").sign(&forger).unwrap();
        assert_eq!(
            policy.verify_receipt(&forged, "bash", &args(), NOW),
            Err(ReceiptError::BadSignature {
                approver: "release-managers".into()
            })
        );
    }
    // A signature copied from another receipt.
    let good = draft(&policy, "release-managers").sign(&key(1)).unwrap();
    let mut other = draft(&policy, "release-managers");
    other.id = ApprovalId::new("rcpt-2").unwrap();
    let mut other = other.sign(&key(9)).unwrap();
    other.signature = good.signature.clone();
    assert!(matches!(
        policy.verify_receipt(&other, "bash", &args(), NOW),
        Err(ReceiptError::BadSignature { .. })
    ));
}

#[test]
fn a_tampered_field_is_refused() {
    let policy = snapshot_of(&policy_text(""));
    let good = draft(&policy, "release-managers").sign(&key(1)).unwrap();
    let other_args = Digest::of_json(&json!({"command": "git push --force"})).unwrap();
    let tampers: Vec<Tamper> = vec![
        (
            "id",
            Box::new(|r| r.id = ApprovalId::new("rcpt-9").unwrap()),
        ),
        ("action", Box::new(|r| r.action = "write".into())),
        (
            "arguments",
            Box::new(move |r| r.arguments_digest = other_args.clone()),
        ),
        (
            "policy",
            Box::new(|r| r.policy_digest = Digest::of_bytes(b"other")),
        ),
        ("issued_at", Box::new(|r| r.issued_at = Timestamp(0))),
        (
            "expires_at",
            Box::new(|r| r.expires_at = Timestamp(u64::from(u32::MAX))),
        ),
        (
            "signature bit",
            Box::new(|r| {
                let last = r.signature.pop().unwrap();
                r.signature.push(if last == '0' { '1' } else { '0' });
            }),
        ),
    ];
    for (field, tamper) in tampers {
        let mut r = good.clone();
        tamper(&mut r);
        // The call and time are what the tampered field now claims, so only the signature
        // can catch it.
        let action = r.action.clone();
        let err = r
            .verify(
                policy.approvers(),
                &action,
                &r.arguments_digest,
                &r.policy_digest,
                NOW,
            )
            .unwrap_err();
        assert_eq!(
            err,
            ReceiptError::BadSignature {
                approver: "release-managers".into()
            },
            "{field}"
        );
    }
    // Claiming another approver class (whose key did not sign) fails the same way.
    let mut r = good.clone();
    r.approver = "security".into();
    assert!(matches!(
        policy.verify_receipt(&r, "bash", &args(), NOW),
        Err(ReceiptError::BadSignature { .. })
    ));
}

#[test]
fn expired_and_early_receipts_are_refused() {
    let policy = snapshot_of(&policy_text(""));
    let r = draft(&policy, "release-managers").sign(&key(1)).unwrap();
    assert!(
        policy
            .verify_receipt(&r, "bash", &args(), Timestamp(1_000))
            .is_ok()
    );
    assert!(
        policy
            .verify_receipt(&r, "bash", &args(), Timestamp(60_999))
            .is_ok()
    );
    assert_eq!(
        policy.verify_receipt(&r, "bash", &args(), Timestamp(61_000)),
        Err(ReceiptError::Expired {
            expires_at: 61_000,
            now: 61_000
        })
    );
    assert_eq!(
        policy.verify_receipt(&r, "bash", &args(), Timestamp(999)),
        Err(ReceiptError::NotYetValid {
            issued_at: 1_000,
            now: 999
        })
    );
}

#[test]
fn a_receipt_replayed_for_another_call_is_refused() {
    let policy = snapshot_of(&policy_text(""));
    let r = draft(&policy, "release-managers").sign(&key(1)).unwrap();
    assert!(matches!(
        policy.verify_receipt(
            &r,
            "bash",
            &json!({"command": "git push --force origin main"}),
            NOW
        ),
        Err(ReceiptError::WrongArguments { .. })
    ));
    assert!(matches!(
        policy.verify_receipt(
            &r,
            "bash",
            &json!({"command": "git push origin main", "timeout_ms": 1}),
            NOW
        ),
        Err(ReceiptError::WrongArguments { .. })
    ));
    assert_eq!(
        policy.verify_receipt(&r, "write", &args(), NOW),
        Err(ReceiptError::WrongAction {
            approved: "bash".into(),
            called: "write".into()
        })
    );
}

#[test]
fn a_receipt_bound_to_another_policy_is_refused() {
    let policy = snapshot_of(&policy_text(""));
    let r = draft(&policy, "release-managers").sign(&key(1)).unwrap();
    // The same approvers, one more rule: another digest.
    let changed =
        snapshot_of(&policy_text("").replace("ask = [\"bash\"]", "ask = [\"bash\", \"write\"]"));
    assert_ne!(changed.digest(), policy.digest());
    assert_eq!(
        changed.verify_receipt(&r, "bash", &args(), NOW),
        Err(ReceiptError::WrongPolicy {
            approved: policy.digest().to_string(),
            current: changed.digest().to_string()
        })
    );
}

#[test]
fn an_unknown_approver_is_refused() {
    let policy = snapshot_of(&policy_text(""));
    let r = draft(&policy, "interns").sign(&key(1)).unwrap();
    assert_eq!(
        policy.verify_receipt(&r, "bash", &args(), NOW),
        Err(ReceiptError::UnknownApprover {
            approver: "interns".into()
        })
    );
    // A policy without [approvers] accepts no receipt at all.
    let bare = snapshot_of("default = \"ask\"\n");
    assert!(bare.approvers().is_empty());
    let r = draft(&bare, "release-managers").sign(&key(1)).unwrap();
    assert!(matches!(
        bare.verify_receipt(&r, "bash", &args(), NOW),
        Err(ReceiptError::UnknownApprover { .. })
    ));
}

#[test]
fn malformed_receipts_are_refused() {
    let policy = snapshot_of(&policy_text(""));
    let good = draft(&policy, "release-managers").sign(&key(1)).unwrap();
    let good_json: Value = serde_json::from_str(&good.to_json().unwrap()).unwrap();
    let mut cases: Vec<(&str, String)> = vec![("not json", "{".into()), ("an array", "[]".into())];
    let mut extra = good_json.clone();
    extra["note"] = json!("hi");
    cases.push(("unknown field", extra.to_string()));
    let mut missing = good_json.clone();
    missing.as_object_mut().unwrap().remove("policy_digest");
    cases.push(("missing field", missing.to_string()));
    let mut bad_digest = good_json.clone();
    bad_digest["arguments_digest"] = json!("sha256:00");
    cases.push(("bad digest", bad_digest.to_string()));
    let mut bad_id = good_json.clone();
    bad_id["id"] = json!("has space");
    cases.push(("bad id", bad_id.to_string()));
    for (name, text) in cases {
        assert!(
            matches!(
                SignedReceipt::from_json(&text),
                Err(ReceiptError::Malformed(_))
            ),
            "{name}"
        );
    }
    // Parsed, but not a receipt this version accepts.
    let shapes: Vec<Tamper> = vec![
        (
            "format",
            Box::new(|r| r.format = "warden-checkpoint-v1".into()),
        ),
        ("short signature", Box::new(|r| r.signature.truncate(100))),
        (
            "signature not hex",
            Box::new(|r| r.signature = "zz".repeat(64)),
        ),
        (
            "expires before issued",
            Box::new(|r| r.expires_at = Timestamp(500)),
        ),
        ("empty action", Box::new(|r| r.action.clear())),
        (
            "timestamp past I-JSON",
            Box::new(|r| r.expires_at = Timestamp(u64::MAX)),
        ),
    ];
    for (name, shape) in shapes {
        let mut r = good.clone();
        shape(&mut r);
        assert!(
            matches!(
                policy.verify_receipt(&r, "bash", &args(), NOW),
                Err(ReceiptError::Malformed(_))
            ),
            "{name}"
        );
    }
    // A draft that could never verify is not signed.
    let mut d = draft(&policy, "release-managers");
    d.expires_at = d.issued_at;
    assert!(matches!(d.sign(&key(1)), Err(ReceiptError::Malformed(_))));
}

#[test]
fn keys_read_as_hex_or_pem_and_pem_and_hex_digest_the_same() {
    let k = key(3);
    let hex = k.verifying_key().to_hex();
    assert_eq!(hex.len(), 64);
    assert_eq!(VerifyingKey::parse(&hex).unwrap(), k.verifying_key());
    assert_eq!(VerifyingKey::parse(&pem_of(&k)).unwrap(), k.verifying_key());
    let mut pem = Vec::new();
    k.write_pkcs8_pem(&mut pem).unwrap();
    let pem = String::from_utf8(pem).unwrap();
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"), "{pem}");
    assert_eq!(
        SigningKey::parse(&pem).unwrap().verifying_key(),
        k.verifying_key()
    );
    assert_eq!(
        SigningKey::parse(&"03".repeat(32)).unwrap().verifying_key(),
        k.verifying_key()
    );
    assert!(!format!("{k:?}").contains(&"03".repeat(32)));
    for bad in [
        "",
        "zz",
        &"00".repeat(31),
        "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----",
    ] {
        assert!(
            matches!(
                VerifyingKey::parse(bad).map_err(ReceiptError::from),
                Err(ReceiptError::Key(_))
            ),
            "{bad}"
        );
    }
    // The digest covers the key set, not how each key is written.
    let as_pem = policy_text("");
    let as_hex = as_pem.replace(
        &format!("\"\"\"\n{}\"\"\"", pem_of(&key(2))),
        &format!("\"{}\"", key(2).verifying_key().to_hex()),
    );
    assert_ne!(as_pem, as_hex);
    assert_eq!(snapshot_of(&as_pem).digest(), snapshot_of(&as_hex).digest());
}

#[test]
fn approvers_are_semantics_and_round_trip() {
    let with = snapshot_of(&policy_text(""));
    let without = snapshot_of("default = \"ask\"\nask = [\"bash\"]\n");
    assert_ne!(with.digest(), without.digest());
    assert_eq!(
        with.approvers().names().collect::<Vec<_>>(),
        ["release-managers", "security"]
    );
    let other_key = policy_text("").replace(
        &key(1).verifying_key().to_hex(),
        &key(4).verifying_key().to_hex(),
    );
    assert_ne!(snapshot_of(&other_key).digest(), with.digest());
    let first = load(&policy_text(""), Format::Toml, "policy");
    for format in [Format::Toml, Format::Json] {
        let written = first.file.write(format).unwrap();
        let again = load(&written, format, "policy");
        assert_eq!(again.file, first.file, "{written}");
        let snap = PolicySnapshot::from_files(
            &[again],
            PathEnv {
                project_root: "/repo".into(),
                home: None,
            },
        )
        .unwrap();
        assert_eq!(snap.digest(), with.digest());
    }
}

#[test]
fn bad_approver_tables_are_refused_with_file_line_and_pointer() {
    let bad_key = "default = \"ask\"\n\n[approvers.ops]\nkeys = [\"not-a-key\"]\n";
    let e = try_snapshot(bad_key).unwrap_err().to_string();
    assert!(
        e.starts_with("policy.toml:4 (/approvers/ops/keys/0): approver `ops`:"),
        "{e}"
    );
    let no_key = "default = \"ask\"\n[approvers.ops]\nkeys = []\n";
    let e = try_snapshot(no_key).unwrap_err().to_string();
    assert!(
        e.contains("declares no key") && e.contains("/approvers/ops"),
        "{e}"
    );
    let e = LoadedPolicy::from_text(
        "default = \"ask\"\n[approvers.ops]\nkey = \"x\"\n".into(),
        Format::Toml,
        "policy.toml",
        "policy",
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("unknown field `key`"), "{e}");
    let spaced = format!(
        "default = \"ask\"\n[approvers.\"on call\"]\nkeys = [\"{}\"]\n",
        key(1).verifying_key().to_hex()
    );
    assert!(try_snapshot(&spaced).is_err());
    // Two files may declare the same class only with the same keys.
    let a = load(&policy_text(""), Format::Toml, "a");
    let same = load(&policy_text(""), Format::Toml, "b");
    let env = PathEnv {
        project_root: "/repo".into(),
        home: None,
    };
    assert!(PolicySnapshot::from_files(&[a.clone(), same], env.clone()).is_ok());
    let widened = load(
        &format!(
            "default = \"ask\"\n[approvers.release-managers]\nkeys = [\"{}\", \"{}\"]\n",
            key(1).verifying_key().to_hex(),
            key(9).verifying_key().to_hex()
        ),
        Format::Toml,
        "c",
    );
    let e = PolicySnapshot::from_files(&[a, widened], env)
        .unwrap_err()
        .to_string();
    assert!(e.contains("declared again with other keys"), "{e}");
}
