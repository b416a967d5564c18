//! `warden evidence …` end to end on real SQLite files: verify (exit 0/1/2, read-only),
//! tampering of every field and of the chain's shape (with a checkpoint), show, certify,
//! checkpoint.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::Connection;
use serde_json::json;
use warden_contracts::*;
use warden_evidence::payload::{CloseDisposition, GateLevel, GateVerdict};
use warden_evidence::*;

use super::{lines, warden};

const SNAPSHOT: &str = r#"{"default":"ask","id":"project","version":"3"}"#;
const SEED: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";

fn policy() -> PolicySnapshotRef {
    PolicySnapshotRef {
        policy_id: "project".into(),
        version: "3".into(),
        digest: Digest::of_bytes(SNAPSHOT.as_bytes()),
    }
}

fn gate(level: GateLevel, verdict: GateVerdict) -> GateEvaluation {
    GateEvaluation {
        gate: "policy".into(),
        stage: Stage::Authorize,
        level,
        verdict,
        reason_code: ReasonCode::PolicyRule,
        rule: Some("bash(git:*)".into()),
        source: Some("project".into()),
        arguments_digest: Digest::of_bytes(b"args"),
        recheck: false,
    }
}

fn start(op: &str) -> OperationStart {
    let scope = ExecutionScopeRef::Ephemeral {
        scope_id: ScopeId::new("s").unwrap(),
    };
    let req = ExecutionRequest::new(
        RequestId::new(format!("req-{op}")).unwrap(),
        ActionRef::new("bash").unwrap(),
        json!({"command": "git status"}),
        scope.clone(),
    )
    .unwrap();
    let ctx = ExecutionContext::new(
        ContextId::new("ctx").unwrap(),
        scope,
        PrincipalRef {
            id: PrincipalId::new("alice").unwrap(),
            kind: PrincipalKind::User,
        },
        BackendRef::new("in_process").unwrap(),
    )
    .with_policy_snapshot(policy());
    OperationStart::from_request(OperationId::new(op).unwrap(), &req, &ctx).unwrap()
}

/// A store with one governed chain: a completed call, a hard deny, an exception (degraded),
/// a cancellation; closed when `close`. Returns the chain's records.
fn build(path: &Path, chain: &str, close: bool) -> Vec<EvidenceRecord> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store: Arc<dyn GovernedStore> = Arc::new(SqliteStore::open(path).unwrap());
        let binding = GovernanceBinding {
            task_boundary: TaskBoundary::new(&format!("task-{chain}")).unwrap(),
            chain_id: ChainId::new(chain).unwrap(),
            policy: policy(),
            profile: RuntimeProfile::Certifiable,
        };
        let snapshot = PolicySnapshotBytes::new(policy(), SNAPSHOT).unwrap();
        let rec = GovernedRecorder::open(
            store,
            binding,
            &snapshot,
            Arc::new(FixedClock::new(1_700_000_000_000)),
        )
        .await
        .unwrap();
        let new = |op: &'static str| {
            let rec = rec.clone();
            async move {
                match rec.start_operation(start(op)).await.unwrap() {
                    Started::New(h) => h,
                    Started::Replay(_) => panic!(),
                }
            }
        };
        let mut h = new("op-ok").await;
        h.gate(gate(GateLevel::Hard, GateVerdict::Allow))
            .await
            .unwrap();
        h.gate(gate(GateLevel::Advisory, GateVerdict::Deny))
            .await
            .unwrap();
        let Authorization::Permitted(p) = h.authorize(None).await.unwrap() else {
            panic!()
        };
        p.begin()
            .await
            .unwrap()
            .completed(&json!({"stdout": "clean"}))
            .await
            .unwrap();
        let mut h = new("op-deny").await;
        h.gate(gate(GateLevel::Hard, GateVerdict::Deny))
            .await
            .unwrap();
        h.authorize(None).await.unwrap();
        let mut h = new("op-exc").await;
        let soft = h
            .gate(gate(GateLevel::Soft, GateVerdict::Deny))
            .await
            .unwrap();
        h.exception(ExceptionGrant {
            gate_record_id: soft.record_id,
            exception_id: "exc-1".into(),
            authority: "security".into(),
            granted_by: None,
            expires_at: None,
            arguments_digest: Digest::of_bytes(b"args"),
        })
        .await
        .unwrap();
        let Authorization::Permitted(p) = h.authorize(None).await.unwrap() else {
            panic!()
        };
        p.begin()
            .await
            .unwrap()
            .completed(&json!(null))
            .await
            .unwrap();
        let h = new("op-cancel").await;
        h.close_before_call(TerminalKind::Cancelled).await.unwrap();
        if close {
            rec.close(CloseDisposition::Completed).await.unwrap();
        }
        rec.records().await.unwrap()
    })
}

fn store(dir: &Path, close: bool) -> (PathBuf, Vec<EvidenceRecord>) {
    let path = dir.join("evidence.db");
    let records = build(&path, "main", close);
    (path, records)
}

fn run(args: &[&str], dir: &Path) -> (i32, String, String) {
    let out = warden(args, dir);
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn raw(path: &Path) -> Connection {
    let c = Connection::open(path).unwrap();
    c.execute_batch("PRAGMA synchronous=OFF; DROP TRIGGER IF EXISTS records_no_update; DROP TRIGGER IF EXISTS records_no_delete;")
        .unwrap();
    c
}

fn flip(s: &str) -> String {
    let mut b = s.as_bytes().to_vec();
    let i = b.iter().rposition(u8::is_ascii_alphanumeric).unwrap();
    b[i] = match b[i] {
        b'0'..=b'8' | b'a'..=b'e' => b[i] + 1,
        b'9' => b'0',
        b'f' => b'a',
        c if c.is_ascii_lowercase() => c.to_ascii_uppercase(),
        c => c.to_ascii_lowercase(),
    };
    String::from_utf8(b).unwrap()
}

/// Changes one byte of a record id's chain prefix (its last digits are the sequence: changing
/// them would name another record).
fn flip_id(s: &str) -> String {
    let (head, tail) = s.split_at(5);
    format!("{}{tail}", flip(head))
}

#[test]
fn evidence_verify_exits_0_and_never_touches_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let (path, records) = store(dir.path(), true);
    let bytes = std::fs::read(&path).unwrap();
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    let p = path.to_str().unwrap();
    let (code, stdout, stderr) = run(&["evidence", "verify", "--store", p], dir.path());
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.starts_with("ok    evidence chain main:"), "{stdout}");
    assert!(stdout.contains(&format!("{} records", records.len())));
    let out = warden(
        &[
            "evidence", "verify", "--store", p, "--format", "json", "--chain", "main",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0));
    let v = &lines(&out)[0];
    assert_eq!(v["valid"], true);
    assert_eq!(v["checked_records"], records.len());
    let head = records.last().unwrap().chain_hash.to_string();
    let (code, ..) = run(
        &["evidence", "verify", "--store", p, "--expected-head", &head],
        dir.path(),
    );
    assert_eq!(code, 0);
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), mtime);
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    files.sort();
    assert_eq!(files, vec!["evidence.db"]);
}

#[test]
fn evidence_verify_exits_2_for_a_missing_foreign_or_unknown_store() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.db");
    let (code, stdout, stderr) = run(
        &["evidence", "verify", "--store", missing.to_str().unwrap()],
        dir.path(),
    );
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        stderr.starts_with("error: no evidence store at"),
        "{stderr}"
    );
    assert!(!missing.exists(), "verify must not create the store");
    let text = dir.path().join("text.db");
    std::fs::write(
        &text,
        "this is not an sqlite database, not at all, no no no",
    )
    .unwrap();
    let (code, _, stderr) = run(
        &["evidence", "verify", "--store", text.to_str().unwrap()],
        dir.path(),
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("is not an SQLite database"), "{stderr}");
    let (path, _) = store(dir.path(), false);
    Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = 42;")
        .unwrap();
    let (code, _, stderr) = run(
        &["evidence", "verify", "--store", path.to_str().unwrap()],
        dir.path(),
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("schema version 42"), "{stderr}");
}

#[test]
fn evidence_verify_exits_1_naming_the_code_and_record_of_any_flipped_field() {
    let dir = tempfile::tempdir().unwrap();
    let (path, records) = store(dir.path(), true);
    let p = path.to_str().unwrap();
    let head = records.last().unwrap().chain_hash.to_string();
    let db = raw(&path);
    let fields = [
        ("record_id", "chain_hash_mismatch"),
        ("record_type", "malformed_record"),
        ("operation_id", "chain_hash_mismatch"),
        ("policy_id", "chain_hash_mismatch"),
        ("policy_version", "chain_hash_mismatch"),
        ("payload_json", "payload_digest_mismatch"),
        ("payload_digest", "payload_digest_mismatch"),
        ("previous_chain_hash", "broken_link"),
        ("chain_hash", "chain_hash_mismatch"),
        ("supersedes_record_id", "chain_hash_mismatch"),
        ("created_at", "chain_hash_mismatch"),
        ("hash_algorithm", "unknown_hash_algorithm"),
        ("sequence", "sequence_gap"),
        ("chain_id", "sequence_gap"),
    ];
    for k in [1, records.len() / 2, records.len() - 2] {
        let r = &records[k];
        for (field, code) in fields {
            let seq = r.sequence as i64;
            let (set, revert, at_seq, at_chain): (String, String, i64, String) = match field {
                "sequence" => (
                    "sequence = sequence + 1000".into(),
                    "sequence = sequence - 1000".into(),
                    seq + 1000,
                    "main".into(),
                ),
                "created_at" => (
                    "created_at = created_at + 1".into(),
                    "created_at = created_at - 1".into(),
                    seq,
                    "main".into(),
                ),
                _ => {
                    let old: Option<String> = db
                        .query_row(
                            &format!("SELECT {field} FROM records WHERE sequence = ?1"),
                            [seq],
                            |x| x.get(0),
                        )
                        .unwrap();
                    let new = match old.as_deref() {
                        Some(v) if field == "record_id" => flip_id(v),
                        Some(v) => flip(v),
                        None => "op-forged".to_owned(),
                    };
                    let q = |v: Option<&str>| v.map_or("NULL".to_owned(), |v| format!("'{v}'"));
                    let chain = if field == "chain_id" {
                        new.clone()
                    } else {
                        "main".into()
                    };
                    (
                        format!("{field} = {}", q(Some(&new))),
                        format!("{field} = {}", q(old.as_deref())),
                        seq,
                        chain,
                    )
                }
            };
            db.execute(
                &format!("UPDATE records SET {set} WHERE chain_id = 'main' AND sequence = ?1"),
                [seq],
            )
            .unwrap();
            let (exit, stdout, stderr) = run(
                &[
                    "evidence",
                    "verify",
                    "--store",
                    p,
                    "--chain",
                    "main",
                    "--expected-head",
                    &head,
                ],
                dir.path(),
            );
            assert_eq!(exit, 1, "{field} of record {k}: {stdout}{stderr}");
            assert!(
                stdout.contains(&format!("FAIL  evidence chain main: {code} at record ")),
                "{field} of record {k}: {stdout}"
            );
            let failed = match field {
                "sequence" | "chain_id" => records[k + 1].record_id.to_string(),
                "record_id" => flip_id(r.record_id.as_str()),
                _ => r.record_id.to_string(),
            };
            assert!(stdout.contains(&failed), "{field} of record {k}: {stdout}");
            db.execute(
                &format!("UPDATE records SET {revert} WHERE chain_id = ?1 AND sequence = ?2"),
                rusqlite::params![at_chain, at_seq],
            )
            .unwrap();
        }
    }
    let (exit, ..) = run(&["evidence", "verify", "--store", p], dir.path());
    assert_eq!(exit, 0, "every change was reverted");
}

/// Deleting every record of a chain is tampering when a head of that chain is kept elsewhere:
/// exit 1 (not "no such chain", exit 2), with or without `--chain`, and in JSON too.
#[test]
fn evidence_verify_exits_1_when_every_record_of_a_vouched_chain_was_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let (path, records) = store(dir.path(), true);
    let head = records.last().unwrap().chain_hash.to_string();
    raw(&path)
        .execute("DELETE FROM records WHERE chain_id = 'main'", [])
        .unwrap();
    let p = path.to_str().unwrap();
    let (code, stdout, stderr) = run(
        &[
            "evidence",
            "verify",
            "--store",
            p,
            "--chain",
            "main",
            "--expected-head",
            &head,
        ],
        dir.path(),
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("FAIL") && stdout.contains("head_mismatch"),
        "{stdout}"
    );
    let (code, stdout, stderr) = run(
        &[
            "evidence",
            "verify",
            "--store",
            p,
            "--expected-head",
            &head,
            "--format",
            "json",
        ],
        dir.path(),
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    let line: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(line["valid"], false);
    assert_eq!(line["failure_code"], "head_mismatch");
    // Without a head kept elsewhere, a missing chain is a usage error.
    let (code, _, stderr) = run(
        &["evidence", "verify", "--store", p, "--chain", "main"],
        dir.path(),
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no chain `main`"), "{stderr}");
}

fn insert(db: &Connection, r: &EvidenceRecord) {
    let f = Fields::of(r);
    db.execute(
        "INSERT INTO records VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        rusqlite::params![
            f.record_id,
            f.record_type,
            f.chain_id,
            f.operation_id,
            f.sequence as i64,
            f.policy_id,
            f.policy_version,
            f.payload_json,
            f.payload_digest,
            f.previous_chain_hash,
            r.chain_hash.as_str(),
            f.supersedes_record_id,
            f.created_at as i64,
            f.hash_algorithm
        ],
    )
    .unwrap();
}

#[test]
fn a_checkpoint_catches_reordering_deletion_insertion_truncation_and_a_replaced_tail() {
    let dir = tempfile::tempdir().unwrap();
    let (path, records) = store(dir.path(), true);
    let key = dir.path().join("key");
    std::fs::write(&key, SEED).unwrap();
    let cp = dir.path().join("cp.json");
    let p = path.to_str().unwrap();
    let (code, _, stderr) = run(
        &[
            "evidence",
            "checkpoint",
            "--store",
            p,
            "--key",
            key.to_str().unwrap(),
            "--out",
            cp.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{stderr}");
    let pubkey = dir.path().join("key.pub");
    std::fs::write(
        &pubkey,
        SigningKey::from_seed(&[0x9d; 32]).verifying_key().to_hex(),
    )
    .unwrap();
    let truthful = dir.path().join("true.pub");
    let seed: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&SEED[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    std::fs::write(
        &truthful,
        SigningKey::from_seed(&seed.try_into().unwrap())
            .verifying_key()
            .to_hex(),
    )
    .unwrap();
    let verify = |db: &Path, public: &Path| {
        run(
            &[
                "evidence",
                "verify",
                "--store",
                db.to_str().unwrap(),
                "--checkpoint",
                cp.to_str().unwrap(),
                "--public-key",
                public.to_str().unwrap(),
            ],
            dir.path(),
        )
    };
    let (code, stdout, _) = verify(&path, &truthful);
    assert_eq!(code, 0, "{stdout}");
    // A checkpoint checked against another key fails.
    let (code, stdout, _) = verify(&path, &pubkey);
    assert_eq!(code, 1);
    assert!(stdout.contains("FAIL  checkpoint"), "{stdout}");
    let n = records.len() as i64;
    let case =
        |name: &str, sql: &str, forged: &[EvidenceRecord], code: &str, record: Option<String>| {
            let copy = dir.path().join(format!("{name}.db"));
            std::fs::copy(&path, &copy).unwrap();
            let db = raw(&copy);
            db.execute_batch(sql).unwrap();
            for r in forged {
                insert(&db, r);
            }
            drop(db);
            let (exit, stdout, stderr) = verify(&copy, &truthful);
            assert_eq!(exit, 1, "{name}: {stdout}{stderr}");
            assert!(
                stdout.contains(&format!("FAIL  evidence chain main: {code} at record ")),
                "{name}: {stdout}"
            );
            if let Some(r) = record {
                assert!(stdout.contains(&r), "{name}: {stdout}");
            }
        };
    case(
        "reorder",
        "UPDATE records SET sequence = -1 WHERE sequence = 3; UPDATE records SET sequence = 3 WHERE sequence = 6; UPDATE records SET sequence = 6 WHERE sequence = -1;",
        &[],
        "broken_link",
        Some(records[6].record_id.to_string()),
    );
    case(
        "delete",
        "DELETE FROM records WHERE sequence = 4",
        &[],
        "sequence_gap",
        Some(records[5].record_id.to_string()),
    );
    let mut forged = records[4].clone();
    forged.created_at = Timestamp(7);
    forged.previous_chain_hash = Some(records[3].chain_hash.clone());
    reseal(&mut forged);
    case(
        "insert",
        "UPDATE records SET sequence = -sequence - 1 WHERE sequence >= 4; UPDATE records SET sequence = -sequence WHERE sequence < 0; UPDATE records SET record_id = record_id || 'x' WHERE sequence = 5;",
        &[forged],
        "broken_link",
        None,
    );
    case(
        "truncate",
        &format!("DELETE FROM records WHERE sequence >= {}", n - 2),
        &[],
        "head_mismatch",
        None,
    );
    let mut tail = Vec::new();
    let mut prev = records[records.len() - 3].chain_hash.clone();
    for r in &records[records.len() - 2..] {
        let mut f = r.clone();
        f.created_at = Timestamp(f.created_at.0 + 5);
        f.previous_chain_hash = Some(prev.clone());
        reseal(&mut f);
        prev = f.chain_hash.clone();
        tail.push(f);
    }
    case(
        "tail",
        &format!("DELETE FROM records WHERE sequence >= {}", n - 2),
        &tail,
        "head_mismatch",
        Some(records.last().unwrap().record_id.to_string()),
    );
}

#[test]
fn evidence_show_prints_operations_decisions_and_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = store(dir.path(), true);
    let p = path.to_str().unwrap();
    let (code, stdout, stderr) = run(&["evidence", "show", "--store", p], dir.path());
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("chain main (task task-main): Closed, 4 operations (0 open), 1 exceptions"),
        "{stdout}"
    );
    assert!(stdout.contains("OPERATION"), "{stdout}");
    let row = |op: &str| {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with(op))
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        row("op-ok"),
        ["op-ok", "bash", "2/1", "0", "allow", "completed", "true"]
    );
    assert_eq!(
        row("op-deny"),
        ["op-deny", "bash", "1/1", "0", "deny", "denied", "false"]
    );
    assert_eq!(
        row("op-exc"),
        ["op-exc", "bash", "1/1", "1", "allow", "completed", "true"]
    );
    assert_eq!(
        row("op-cancel"),
        [
            "op-cancel",
            "bash",
            "0/0",
            "0",
            "allow",
            "cancelled",
            "false"
        ]
    );
    let out = warden(
        &["evidence", "show", "--store", p, "--format", "json"],
        dir.path(),
    );
    let got = lines(&out);
    assert_eq!(got.len(), 5);
    assert_eq!(got[0]["kind"], "chain");
    assert!(got.iter().any(|v| v["operation_id"] == "op-deny"
        && v["decision"] == "deny"
        && v["outcome"] == "denied"));
}

#[test]
fn evidence_certify_mints_for_a_closed_boundary_and_refuses_an_open_one() {
    let dir = tempfile::tempdir().unwrap();
    let (path, records) = store(dir.path(), true);
    let p = path.to_str().unwrap();
    let head = records.last().unwrap().chain_hash.to_string();
    let out = warden(
        &[
            "evidence",
            "certify",
            "--store",
            p,
            "--expected-head",
            &head,
        ],
        dir.path(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let cert: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cert["grade"], "DEGRADED");
    assert_eq!(cert["task_boundary_id"], "task-main");
    assert_eq!(cert["evidence_chain_head"]["chain_hash"], head);
    assert_eq!(cert["gate_summary"]["operations"], 4);
    // An older head is not the closing record.
    let older = records[3].chain_hash.to_string();
    let (code, stdout, _) = run(
        &[
            "evidence",
            "certify",
            "--store",
            p,
            "--expected-head",
            &older,
        ],
        dir.path(),
    );
    assert_eq!(code, 1);
    assert!(stdout.starts_with("refused: "), "{stdout}");
    // An open boundary.
    let open_dir = tempfile::tempdir().unwrap();
    let (open, records) = store(open_dir.path(), false);
    let head = records.last().unwrap().chain_hash.to_string();
    let (code, stdout, _) = run(
        &[
            "evidence",
            "certify",
            "--store",
            open.to_str().unwrap(),
            "--expected-head",
            &head,
        ],
        dir.path(),
    );
    assert_eq!(code, 1);
    assert!(stdout.contains("not closed"), "{stdout}");
}
