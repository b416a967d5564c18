//! Certificates: minted for a closed boundary verified to its head; any exception degrades;
//! refused for an open or abandoned boundary, a double close, a missing or duplicate terminal,
//! policy bytes that do not recompute, and a head that is not the chain's.

use std::sync::Arc;

use serde_json::json;
use warden_contracts::*;
use warden_evidence::payload::{CloseDisposition, GateLevel, GateVerdict};
use warden_evidence::*;

use crate::support::*;

/// A closed chain of `n` completed operations; returns its records.
fn simple_chain(n: usize, close: Option<CloseDisposition>) -> Vec<EvidenceRecord> {
    let store = Arc::new(MemoryStore::new());
    block_on(async {
        let rec = GovernedRecorder::open(store.clone(), binding("cert"), &snapshot(), clock())
            .await
            .unwrap();
        for i in 0..n {
            let p = allowed(&rec, &format!("op-{i}")).await;
            p.begin().await.unwrap().completed(&json!(i)).await.unwrap();
        }
        if let Some(d) = close {
            rec.close(d).await.unwrap();
        }
        rec.records().await.unwrap()
    })
}

/// Recomputes sequences, ids, links and hashes after a forgery (an attacker with the file).
fn reseal_all(records: &mut [EvidenceRecord]) {
    let mut prev: Option<Digest> = None;
    for (i, r) in records.iter_mut().enumerate() {
        r.sequence = i as u64;
        r.record_id = record_id_for(Family::Evidence, &r.chain_id, r.sequence).unwrap();
        r.previous_chain_hash = prev.clone();
        reseal(r);
        prev = Some(r.chain_hash.clone());
    }
}

fn chain() -> ChainId {
    ChainId::new("cert").unwrap()
}

fn mint(records: &[EvidenceRecord]) -> Result<Certificate, CertificateRefusal> {
    certify_records(
        &chain(),
        records,
        &head_of(records.last().unwrap()),
        Timestamp(42),
    )
}

#[test]
fn a_closed_verified_boundary_gets_a_full_certificate() {
    let records = simple_chain(3, Some(CloseDisposition::Completed));
    let cert = mint(&records).unwrap();
    assert_eq!(cert.grade, Grade::Full);
    assert_eq!(cert.format, "warden-certificate-v1");
    assert_eq!(cert.task_boundary_id, "task-cert");
    assert_eq!(
        (cert.policy_id.as_str(), cert.policy_version.as_str()),
        ("project", "7")
    );
    assert_eq!(cert.policy_digest, snapshot().reference().digest);
    assert_eq!(cert.evidence_chain_head, head_of(records.last().unwrap()));
    assert_eq!(cert.gate_summary.operations, 3);
    assert_eq!(cert.gate_summary.terminals.completed, 3);
    assert_eq!(cert.gate_summary.gates_evaluated, 3);
    assert_eq!(cert.minted_at, Timestamp(42));
    let json = serde_json::to_value(&cert).unwrap();
    for key in [
        "certificate_id",
        "task_boundary_id",
        "policy_id",
        "policy_version",
        "evidence_chain_head",
        "gate_summary",
        "grade",
        "minted_at",
    ] {
        assert!(json.get(key).is_some(), "{key}");
    }
    assert_eq!(json["grade"], "FULL");
}

#[test]
fn any_exception_grant_degrades_the_certificate() {
    let store = Arc::new(MemoryStore::new());
    let rec = block_on(standard_chain(store.clone(), "cert"));
    let records = block_on(rec.records()).unwrap();
    let cert = mint(&records).unwrap();
    assert_eq!(cert.grade, Grade::Degraded);
    assert_eq!(cert.gate_summary.exceptions, 1);
    assert_eq!(cert.gate_summary.corrections, 1);
    assert_eq!(serde_json::to_value(&cert).unwrap()["grade"], "DEGRADED");
}

#[test]
fn an_open_or_abandoned_boundary_is_refused() {
    let open = simple_chain(2, None);
    assert!(matches!(mint(&open), Err(CertificateRefusal::NotClosed(_))));
    let abandoned = simple_chain(2, Some(CloseDisposition::Abandoned));
    assert!(matches!(
        mint(&abandoned),
        Err(CertificateRefusal::Abandoned)
    ));
    assert!(matches!(
        certify_records(&chain(), &[], &head_of(&open[0]), Timestamp(1)),
        Err(CertificateRefusal::Empty(_))
    ));
}

#[test]
fn the_expected_head_must_be_the_closing_record() {
    let records = simple_chain(2, Some(CloseDisposition::Completed));
    // An older head: the chain goes on after it.
    let older = head_of(&records[3]);
    assert!(matches!(
        certify_records(&chain(), &records, &older, Timestamp(1)),
        Err(CertificateRefusal::HeadMismatch(_))
    ));
    // A head the chain does not have.
    let mut wrong = head_of(records.last().unwrap());
    wrong.chain_hash = Digest::of_bytes(b"elsewhere");
    assert!(matches!(
        certify_records(&chain(), &records, &wrong, Timestamp(1)),
        Err(CertificateRefusal::HeadMismatch(_))
    ));
}

#[test]
fn a_double_close_is_refused() {
    let mut records = simple_chain(1, Some(CloseDisposition::Completed));
    let again = records.last().unwrap().clone();
    records.push(again);
    reseal_all(&mut records);
    match mint(&records) {
        Err(CertificateRefusal::ClosedMoreThanOnce(id)) => {
            assert_eq!(id, records.last().unwrap().record_id)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn each_missing_terminal_is_refused() {
    // Remove the terminal of each operation in turn (and forge a consistent close).
    let base = simple_chain(3, Some(CloseDisposition::Completed));
    let terminals: Vec<usize> = base
        .iter()
        .enumerate()
        .filter(|(_, r)| r.record_type.is_terminal())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(terminals.len(), 3);
    for t in terminals {
        let mut records = base.clone();
        let removed = records.remove(t);
        reseal_all(&mut records);
        match mint(&records) {
            Err(CertificateRefusal::MissingTerminal(op)) => {
                assert_eq!(
                    Some(op.as_str()),
                    removed.operation_id.as_ref().map(OperationId::as_str)
                );
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn each_duplicate_terminal_is_refused() {
    let base = simple_chain(3, Some(CloseDisposition::Completed));
    for t in [
        "callable_failed",
        "operation_cancelled",
        "operation_denied",
        "operation_timed_out",
        "external_result_ambiguous",
        "callable_completed",
    ] {
        let mut records = base.clone();
        let close = records.pop().unwrap();
        let first = records
            .iter()
            .find(|r| r.record_type.is_terminal())
            .unwrap()
            .clone();
        let mut dup = first.clone();
        dup.record_type = parse_record_type(t).unwrap();
        dup.payload_json = match t {
            "callable_failed" => r#"{"call_executed":true,"failure_kind":"x"}"#.into(),
            "operation_denied" => r#"{"disposition":"deny","evaluator":"policy","gates_evaluated":1,"reason_code":"policy_rule"}"#.into(),
            "external_result_ambiguous" => r#"{"cause":"transport_lost"}"#.into(),
            "callable_completed" => first.payload_json.clone(),
            _ => r#"{"call_executed":true}"#.into(),
        };
        records.push(dup);
        records.push(close);
        reseal_all(&mut records);
        match mint(&records) {
            Err(CertificateRefusal::DuplicateTerminal(op)) => {
                assert_eq!(
                    Some(op.as_str()),
                    first.operation_id.as_ref().map(OperationId::as_str),
                    "{t}"
                );
            }
            other => panic!("{t}: {other:?}"),
        }
    }
}

#[test]
fn stored_policy_bytes_must_recompute_to_their_digest() {
    let mut records = simple_chain(1, Some(CloseDisposition::Completed));
    let mut v: serde_json::Value = serde_json::from_str(&records[0].payload_json).unwrap();
    v["snapshot_json"] = json!(r#"{"default":"allow"}"#);
    records[0].payload_json = warden_contracts::canonical::to_canonical_string(&v).unwrap();
    reseal_all(&mut records);
    assert!(matches!(
        mint(&records),
        Err(CertificateRefusal::PolicyDigestMismatch { .. })
    ));
    // The recorder never writes such bytes: the reference must match them.
    let bad = PolicySnapshotBytes::new(snapshot().reference().clone(), r#"{"default":"allow"}"#);
    assert!(bad.is_err());
}

#[test]
fn a_tampered_chain_is_never_certified() {
    let mut records = simple_chain(2, Some(CloseDisposition::Completed));
    records[2].created_at = Timestamp(1);
    match mint(&records) {
        Err(CertificateRefusal::ChainInvalid { code, .. }) => {
            assert_eq!(code, VerificationFailure::ChainHashMismatch)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn certify_reads_the_chain_from_any_store() {
    for b in Backend::all() {
        block_on(async {
            let rec = GovernedRecorder::open(b.store(), binding("cert"), &snapshot(), clock())
                .await
                .unwrap();
            let mut h = new_op(&rec, "op").await;
            h.gate(gate(GateLevel::Hard, GateVerdict::Deny))
                .await
                .unwrap();
            h.authorize(None).await.unwrap();
            let close = rec.close(CloseDisposition::Completed).await.unwrap();
            let head = ChainHead {
                chain_id: chain(),
                sequence: close.sequence,
                chain_hash: close.chain_hash,
            };
            let cert = certify(b.store().as_ref(), &chain(), &head, Timestamp(3))
                .await
                .unwrap();
            assert_eq!(
                cert.gate_summary.terminals.denied, 1,
                "a faithfully denied operation is certifiable"
            );
            assert_eq!(cert.gate_summary.hard_denies, 1);
        });
    }
}
