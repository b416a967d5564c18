//! `warden approve` end to end: `--keygen` writes a key pair (never over an existing file), a
//! receipt signed from that key verifies through the library for exactly the approved call
//! under exactly that policy, and every bad input is exit 2 with nothing signed.

use std::path::Path;

use serde_json::{Value, json};
use warden_contracts::Timestamp;
use warden_policy::{LoadedPolicy, PathEnv, PolicySnapshot, ReceiptError, SignedReceipt};

use super::{warden, write};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `--keygen` and returns the public key's hex.
fn keygen(dir: &Path, file: &str) -> String {
    let out = warden(&["approve", "--keygen", file, "--approver", "ops"], dir);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let hex = text
        .lines()
        .find_map(|l| l.strip_prefix("public key: "))
        .unwrap_or_else(|| panic!("{text}"))
        .to_owned();
    assert!(
        text.contains(&format!("[approvers.ops]\nkeys = [\"{hex}\"]")),
        "{text}"
    );
    hex
}

fn snapshot(path: &str) -> PolicySnapshot {
    PolicySnapshot::from_files(
        &[LoadedPolicy::read(Path::new(path)).unwrap()],
        PathEnv {
            project_root: "/".into(),
            home: None,
        },
    )
    .unwrap()
}

fn now() -> Timestamp {
    Timestamp(
        u64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis(),
        )
        .unwrap(),
    )
}

#[test]
fn keygen_writes_a_private_and_a_public_key_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let hex = keygen(dir.path(), "ops.pem");
    let private = std::fs::read_to_string(dir.path().join("ops.pem")).unwrap();
    assert!(
        private.starts_with("-----BEGIN PRIVATE KEY-----"),
        "{private}"
    );
    let public = std::fs::read_to_string(dir.path().join("ops.pem.pub")).unwrap();
    assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"), "{public}");
    assert_eq!(
        warden_policy::receipt::VerifyingKey::parse(&public)
            .unwrap()
            .to_hex(),
        hex
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join("ops.pem"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // Two keys are never the same, and an existing key is never overwritten.
    assert_ne!(keygen(dir.path(), "other.pem"), hex);
    let again = warden(&["approve", "--keygen", "ops.pem"], dir.path());
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ops.pem")).unwrap(),
        private
    );
    // --keygen takes no call.
    let mixed = warden(
        &["approve", "--keygen", "x.pem", "--tool", "bash"],
        dir.path(),
    );
    assert_eq!(mixed.status.code(), Some(2));
    assert!(!dir.path().join("x.pem").exists());
}

#[test]
fn a_signed_receipt_round_trips_and_verifies_only_for_its_call_and_policy() {
    let dir = tempfile::tempdir().unwrap();
    let hex = keygen(dir.path(), "ops.pem");
    let policy = write(
        dir.path(),
        "policy.toml",
        &format!(
            "default = \"ask\"\nask = [\"bash(git push:*)\"]\n\n[approvers.ops]\nkeys = [\"{hex}\"]\n"
        ),
    );
    let args = r#"{"command": "git push origin main"}"#;
    let before = now();
    let out = warden(
        &[
            "approve",
            "--policy",
            &policy,
            "--key",
            "ops.pem",
            "--approver",
            "ops",
            "--tool",
            "bash",
            "--args",
            args,
            "--ttl",
            "60",
            "--out",
            "receipt.json",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("written to receipt.json"),
        "{}",
        stdout(&out)
    );
    let text = std::fs::read_to_string(dir.path().join("receipt.json")).unwrap();
    let receipt = SignedReceipt::from_json(&text).unwrap();
    assert!(receipt.id().as_str().starts_with("rcpt-"));
    assert_eq!(receipt.approver, "ops");
    assert_eq!(receipt.action, "bash");
    assert!(receipt.issued_at >= before);
    assert_eq!(receipt.expires_at.0 - receipt.issued_at.0, 60_000);
    assert!(
        !text.contains("git push"),
        "a receipt holds digests, not arguments"
    );

    let snap = snapshot(&policy);
    let call: Value = serde_json::from_str(args).unwrap();
    let approval = snap
        .verify_receipt(&receipt, "bash", &call, receipt.issued_at)
        .unwrap();
    assert_eq!(approval.approval_id(), receipt.id());
    assert!(matches!(
        snap.verify_receipt(
            &receipt,
            "bash",
            &json!({"command": "git push --force"}),
            receipt.issued_at
        ),
        Err(ReceiptError::WrongArguments { .. })
    ));
    assert!(matches!(
        snap.verify_receipt(&receipt, "bash", &call, Timestamp(receipt.expires_at.0)),
        Err(ReceiptError::Expired { .. })
    ));
    // Another policy (one more rule) refuses it.
    let changed = write(
        dir.path(),
        "changed.toml",
        &std::fs::read_to_string(&policy).unwrap().replace(
            "ask = [\"bash(git push:*)\"]",
            "ask = [\"bash(git push:*)\", \"write\"]",
        ),
    );
    assert!(matches!(
        snapshot(&changed).verify_receipt(&receipt, "bash", &call, receipt.issued_at),
        Err(ReceiptError::WrongPolicy { .. })
    ));
    // A tampered file is refused.
    let tampered = text.replace("\"bash\"", "\"write\"");
    let tampered = SignedReceipt::from_json(&tampered).unwrap();
    assert!(matches!(
        snap.verify_receipt(&tampered, "write", &call, receipt.issued_at),
        Err(ReceiptError::BadSignature { .. })
    ));

    // Without --out the receipt is printed; the default lifetime is 900 seconds.
    let out = warden(
        &[
            "approve",
            "--policy",
            &policy,
            "--key",
            "ops.pem",
            "--approver",
            "ops",
            "--tool",
            "bash",
            "--args",
            args,
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let printed = SignedReceipt::from_json(&stdout(&out)).unwrap();
    assert_eq!(printed.expires_at.0 - printed.issued_at.0, 900_000);
    assert_ne!(printed.id(), receipt.id(), "every receipt has its own id");
    assert!(
        snap.verify_receipt(&printed, "bash", &call, printed.issued_at)
            .is_ok()
    );
}

#[test]
fn bad_approve_input_is_exit_2_and_signs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let hex = keygen(dir.path(), "ops.pem");
    keygen(dir.path(), "stranger.pem");
    let policy = write(
        dir.path(),
        "policy.toml",
        &format!(
            "default = \"ask\"\ndeny = [\"bash(rm:*)\"]\n[approvers.ops]\nkeys = [\"{hex}\"]\n"
        ),
    );
    let base = |over: &[(&str, &str)]| -> Vec<String> {
        let mut args: Vec<(String, String)> = [
            ("--policy", policy.as_str()),
            ("--key", "ops.pem"),
            ("--approver", "ops"),
            ("--tool", "bash"),
            ("--args", r#"{"command": "ls"}"#),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        for (k, v) in over {
            match args.iter_mut().find(|(a, _)| a == k) {
                Some(slot) => slot.1 = (*v).to_owned(),
                None => args.push(((*k).to_owned(), (*v).to_owned())),
            }
        }
        let mut out = vec!["approve".to_owned()];
        for (k, v) in args {
            out.push(k);
            out.push(v);
        }
        out
    };
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("--approver", "interns")], "not declared"),
        (
            &[("--key", "stranger.pem")],
            "is not a key of approver `ops`",
        ),
        (&[("--key", "missing.pem")], "missing.pem"),
        (&[("--key", "policy.toml")], "--key"),
        (&[("--args", "{")], "--args: invalid JSON"),
        (&[("--args", "[1]")], "must be a JSON object"),
        (&[("--ttl", "0")], "--ttl"),
        (&[("--tool", "")], "action name"),
        (&[("--tool", "two words")], "action name"),
    ];
    for (over, needle) in cases {
        let args = base(over);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = warden(&refs, dir.path());
        assert_eq!(out.status.code(), Some(2), "{over:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{over:?}");
        assert!(stderr(&out).contains(needle), "{over:?}: {}", stderr(&out));
    }
    // A call the policy denies still gets its receipt, with a warning: a receipt never beats a
    // deny, so it cannot be used.
    let args = base(&[("--args", r#"{"command": "rm -rf /"}"#)]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = warden(&refs, dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("never overrides a deny"),
        "{}",
        stderr(&out)
    );
}

/// Runs `warden exec --format json` governed (store `ev.db`, in-process backend) with
/// `policy` and `extra` arguments; returns the exit code, the outcome object and stderr.
fn exec_governed(dir: &Path, policy: &str, args: &Value, extra: &[&str]) -> (i32, Value, String) {
    let mut all = vec![
        "--backend",
        "in-process",
        "--evidence",
        "ev.db",
        "--format",
        "json",
    ];
    all.extend_from_slice(extra);
    let out = super::exec::run_exec(dir, policy, "write", args, &all);
    let v = super::lines(&out).pop().unwrap_or(Value::Null);
    (out.status.code().unwrap(), v, stderr(&out))
}

/// A receipt signed with `key_file` for approver `ops`, bound as given (the library's signing,
/// for receipts `warden approve` refuses to make: undeclared keys, past lifetimes).
fn sign_with(
    dir: &Path,
    key_file: &str,
    policy: &str,
    args: &Value,
    lifetime: (u64, u64),
) -> String {
    let key = warden_policy::receipt::SigningKey::parse(
        &std::fs::read_to_string(dir.join(key_file)).unwrap(),
    )
    .unwrap();
    let receipt = warden_policy::ReceiptDraft {
        id: warden_contracts::ApprovalId::new(format!("rcpt-{key_file}-{}", lifetime.0)).unwrap(),
        approver: "ops".into(),
        action: "write".into(),
        arguments_digest: warden_contracts::Digest::of_json(args).unwrap(),
        policy_digest: snapshot(policy).digest().clone(),
        issued_at: Timestamp(lifetime.0),
        expires_at: Timestamp(lifetime.1),
    }
    .sign(&key)
    .unwrap();
    receipt.to_json().unwrap()
}

/// The one receipt type end to end: what `warden approve` writes is what `warden exec
/// --receipt` takes, and under a policy with `[approvers]` nothing else answers an ask — not
/// a forged, unsigned, expired or replayed receipt, nor one for other arguments or another
/// policy. The file the call writes shows what ran.
#[test]
fn signed_receipts_round_trip_from_approve_to_exec_and_every_other_receipt_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hex = keygen(d, "ops.pem");
    keygen(d, "intruder.pem");
    let text = format!(
        "default = \"deny\"\nask = [\"write\"]\n\n[approvers.ops]\nkeys = [\"{hex}\"]\n\n\
         [containment]\nwrite_roots = \"optional\"\nnetwork_off = \"optional\"\nenv_allowlist = \"optional\"\nprocess_isolation = \"optional\"\n"
    );
    let policy = write(d, "policy.toml", &text);
    let ws = d.join("ws");
    let args = json!({"path": "out.txt", "content": "approved"});
    let approve = |file: &str, policy: &str, args: &Value| {
        let out = warden(
            &[
                "approve",
                "--policy",
                policy,
                "--key",
                "ops.pem",
                "--approver",
                "ops",
                "--tool",
                "write",
                "--args",
                &args.to_string(),
                "--out",
                file,
            ],
            d,
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        file.to_owned()
    };
    let refused = |receipt: &str, why: &str| {
        let (code, v, err) = exec_governed(d, &text, &args, &["--receipt", receipt]);
        assert_eq!(code, 1, "{receipt}: {v} {err}");
        assert_eq!(v["outcome"], "escalated", "{receipt}: {v}");
        assert!(
            v.to_string().contains(why),
            "{receipt}: want {why:?} in {v}"
        );
        assert!(!ws.join("out.txt").exists(), "{receipt}: the call ran");
    };

    // Without a receipt the call asks, and nothing runs.
    let (code, v, _) = exec_governed(d, &text, &args, &[]);
    assert_eq!((code, v["outcome"].as_str()), (1, Some("escalated")), "{v}");

    // Forged: signed by a key that is not the approver's.
    let now = now().0;
    let forged = write(
        d,
        "forged.json",
        &sign_with(d, "intruder.pem", &policy, &args, (now, now + 600_000)),
    );
    refused(&forged, "signature does not verify");
    // Expired.
    let expired = write(
        d,
        "expired.json",
        &sign_with(d, "ops.pem", &policy, &args, (now - 20_000, now - 10_000)),
    );
    refused(&expired, "expired");
    // Other arguments.
    let other_args = approve(
        "other-args.json",
        &policy,
        &json!({"path": "out.txt", "content": "other"}),
    );
    refused(&other_args, "arguments");
    // Another policy (one more rule).
    let other_policy = write(
        d,
        "other.toml",
        &text.replace("ask = [\"write\"]", "ask = [\"write\", \"edit\"]"),
    );
    let other_policy = approve("other-policy.json", &other_policy, &args);
    refused(&other_policy, "policy");

    // Unsigned, in the old unsigned format or with its signature stripped: not a receipt.
    let good = approve("receipt.json", &policy, &args);
    let signed: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join(&good)).unwrap()).unwrap();
    let mut stripped = signed.clone();
    stripped.as_object_mut().unwrap().remove("signature");
    let stripped = write(d, "stripped.json", &stripped.to_string());
    let legacy = write(
        d,
        "legacy.json",
        &json!({
            "approval_id": signed["id"], "action": "write",
            "arguments_digest": signed["arguments_digest"], "policy_digest": signed["policy_digest"],
            "approver": {"id": "ops", "kind": "user"}, "issued_at": 1, "expires_at": 4_000_000_000_000u64,
        })
        .to_string(),
    );
    for unsigned in [&stripped, &legacy] {
        let (code, v, err) = exec_governed(d, &text, &args, &["--receipt", unsigned]);
        assert_eq!(code, 2, "{unsigned}: {v}");
        assert!(
            err.contains("--receipt") && err.contains("malformed receipt"),
            "{err}"
        );
        assert!(!ws.join("out.txt").exists());
    }

    // The receipt `warden approve` wrote: the call runs, once.
    let (code, v, err) = exec_governed(d, &text, &args, &["--receipt", &good]);
    assert_eq!(code, 0, "{v} {err}");
    assert_eq!(v["outcome"], "succeeded", "{v}");
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "approved"
    );
    // Replayed in another process: the store remembers its use.
    std::fs::remove_file(ws.join("out.txt")).unwrap();
    refused(&good, "already used");

    // Without --evidence nothing would remember the use: refused before anything runs.
    let out = super::exec::run_exec(
        d,
        &text,
        "write",
        &args,
        &["--backend", "in-process", "--receipt", &good],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("add --evidence"), "{}", stderr(&out));
    assert!(!ws.join("out.txt").exists());
}
