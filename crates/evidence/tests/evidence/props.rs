//! Properties (at most 48 cases when `CI` is set): any sequence of governed appends verifies;
//! any single mutation of a stored chain is detected; the hash input is canonical JSON; an
//! append split in two seals what the plain append seals.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::json;
use warden_contracts::canonical::to_canonical_string;
use warden_contracts::*;
use warden_evidence::payload::{CloseDisposition, GateLevel, GateVerdict};
use warden_evidence::*;

use crate::support::*;

fn config() -> ProptestConfig {
    let cases = if std::env::var_os("CI").is_some() {
        48
    } else {
        128
    };
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

#[derive(Debug, Clone)]
struct OpPlan {
    gates: Vec<(GateLevel, GateVerdict)>,
    exception: bool,
    escalate: bool,
    end: u8,
}

fn level() -> impl Strategy<Value = GateLevel> {
    prop_oneof![
        Just(GateLevel::Hard),
        Just(GateLevel::Soft),
        Just(GateLevel::Advisory)
    ]
}

fn verdict() -> impl Strategy<Value = GateVerdict> {
    prop_oneof![3 => Just(GateVerdict::Allow), 1 => Just(GateVerdict::Deny)]
}

fn op_plan() -> impl Strategy<Value = OpPlan> {
    (
        prop::collection::vec((level(), verdict()), 0..4),
        any::<bool>(),
        any::<bool>(),
        0u8..6,
    )
        .prop_map(|(gates, exception, escalate, end)| OpPlan {
            gates,
            exception,
            escalate,
            end,
        })
}

/// Runs a plan through the recorder; returns the records.
fn run_plan(
    store: Arc<dyn GovernedStore>,
    plan: &[OpPlan],
    close: Option<bool>,
    corrections: bool,
) -> Vec<EvidenceRecord> {
    block_on(async {
        let rec = GovernedRecorder::open(store, binding("prop"), &snapshot(), clock())
            .await
            .unwrap();
        for (i, op) in plan.iter().enumerate() {
            let mut h = new_op(&rec, &format!("op-{i}")).await;
            let mut first_soft = None;
            for (l, v) in &op.gates {
                let r = h.gate(gate(*l, *v)).await.unwrap();
                if *l == GateLevel::Soft && *v == GateVerdict::Deny && first_soft.is_none() {
                    first_soft = Some(r.record_id);
                }
            }
            if op.exception
                && let Some(g) = first_soft
            {
                h.exception(ExceptionGrant {
                    gate_record_id: g,
                    exception_id: "e".into(),
                    authority: "sec".into(),
                    granted_by: None,
                    expires_at: None,
                    arguments_digest: Digest::of_bytes(b"a"),
                })
                .await
                .unwrap();
            }
            let esc = op.escalate.then(|| Escalation {
                approval_id: ApprovalId::new(format!("ap-{i}")).unwrap(),
                authority: "human".into(),
            });
            if let Authorization::Permitted(p) = h.authorize(esc).await.unwrap() {
                let kind = match op.end {
                    0 => TerminalKind::Completed {
                        result_digest: Digest::of_bytes(b"r"),
                    },
                    1 => TerminalKind::Failed {
                        kind: "boom".into(),
                        message_digest: None,
                    },
                    2 => TerminalKind::Cancelled,
                    3 => TerminalKind::TimedOut { deadline: None },
                    4 => TerminalKind::Ambiguous(AmbiguityCause::TransportLost),
                    _ => {
                        p.close_before_call(TerminalKind::Cancelled).await.unwrap();
                        continue;
                    }
                };
                p.begin().await.unwrap().finish(kind).await.unwrap();
            }
        }
        if corrections {
            let records = rec.records().await.unwrap();
            let target = records[records.len() / 2].clone();
            rec.supersede(&target, "correction", None).await.unwrap();
        }
        if let Some(abandoned) = close {
            rec.close(if abandoned {
                CloseDisposition::Abandoned
            } else {
                CloseDisposition::Completed
            })
            .await
            .unwrap();
        }
        rec.records().await.unwrap()
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_sequence_of_governed_appends_verifies(
        plan in prop::collection::vec(op_plan(), 0..6),
        close in proptest::option::of(any::<bool>()),
        corrections in any::<bool>(),
    ) {
        let store = Arc::new(MemoryStore::new());
        let records = run_plan(store.clone(), &plan, close, corrections);
        let chain = ChainId::new("prop").unwrap();
        let head = head_of(records.last().unwrap());
        let report = store.verify_sync(&chain, &Expected::Head(head.clone()));
        prop_assert!(report.result.valid, "{:?}", report.failure);
        prop_assert_eq!(report.result.checked_records, records.len() as u64);
        // Closed and not abandoned: certifiable, degraded exactly when an exception was granted.
        if close == Some(false) {
            let cert = certify_records(&chain, &records, &head, Timestamp(1)).unwrap();
            let exceptions = records.iter().filter(|r| r.record_type == RecordType::ExceptionGranted).count();
            prop_assert_eq!(cert.grade == Grade::Degraded, exceptions > 0);
            prop_assert_eq!(cert.gate_summary.operations, plan.len() as u64);
        }
        // The projection of the records agrees with the chain.
        let (runs, attempts) = project_from_scratch(&records);
        prop_assert_eq!(attempts.len(), plan.len());
        prop_assert_eq!(runs[0].open_operations, 0);
    }

    #[test]
    fn any_single_mutation_is_detected(
        plan in prop::collection::vec(op_plan(), 1..4),
        pick in any::<prop::sample::Index>(),
        field in 0usize..17,
    ) {
        let store = Arc::new(MemoryStore::new());
        let records = run_plan(store, &plan, Some(false), true);
        let chain = ChainId::new("prop").unwrap();
        let expected = Expected::Head(head_of(records.last().unwrap()));
        let i = pick.index(records.len());
        let mut m = records.clone();
        let r = &mut m[i];
        match field {
            0 => r.record_id = RecordId::new(format!("{}x", r.record_id)).unwrap(),
            1 => {
                let next = RecordType::ALL[(RecordType::ALL.iter().position(|t| *t == r.record_type).unwrap() + 1) % 12];
                r.record_type = next;
            }
            2 => r.chain_id = ChainId::new("other").unwrap(),
            3 => r.operation_id = match &r.operation_id {
                Some(_) => None,
                None => Some(OperationId::new("forged").unwrap()),
            },
            4 => r.sequence += 1,
            5 => r.policy_id.push('x'),
            6 => r.policy_version.push('x'),
            7 => r.payload_json.push(' '),
            8 => r.payload_digest = Digest::of_bytes(b"forged"),
            9 => r.previous_chain_hash = match &r.previous_chain_hash {
                Some(_) => None,
                None => Some(Digest::of_bytes(b"forged")),
            },
            10 => r.chain_hash = Digest::of_bytes(b"forged"),
            11 => r.supersedes_record_id = match &r.supersedes_record_id {
                Some(_) => None,
                None => Some(RecordId::new("rec_forged").unwrap()),
            },
            12 => r.created_at = Timestamp(r.created_at.0 + 1),
            13 => r.hash_algorithm = "blake3-v2".into(),
            14 => { m.remove(i); }
            15 => {
                let j = if i + 1 < m.len() { i + 1 } else { i - 1 };
                m.swap(i, j);
            }
            _ => m.truncate(i),
        }
        let report = verify_records(Family::Evidence, &chain, m.into_iter().map(Ok), &expected);
        prop_assert!(!report.result.valid, "mutation {} of record {} not detected", field, i);
    }

    #[test]
    fn a_typed_append_seals_what_the_plain_append_seals(
        plan in prop::collection::vec(op_plan(), 0..4),
        corrections in any::<bool>(),
    ) {
        let records = run_plan(Arc::new(MemoryStore::new()), &plan, Some(false), corrections);
        let fresh = MemoryStore::new();
        for r in &records {
            let e = append_of(r);
            let typed = crate::workload::typed_of(&e);
            let receipt = block_on(fresh.append_typed(typed, r.sequence));
            prop_assert_eq!(receipt.unwrap(), receipt_of(r));
        }
        prop_assert_eq!(fresh.read_sync(&ChainId::new("prop").unwrap(), None, usize::MAX), records);
    }

    #[test]
    fn the_hash_input_is_canonical_json_for_any_text(
        policy_id in "\\PC{1,20}",
        version in "[\\x00-\\x7f]{1,12}",
        op in "[a-zA-Z0-9_.:-]{1,20}",
        created in 0u64..(1 << 53),
    ) {
        let mut r = EvidenceRecord {
            record_id: RecordId::new("rec_x").unwrap(),
            record_type: RecordType::GateEvaluated,
            chain_id: ChainId::new("c").unwrap(),
            operation_id: Some(OperationId::new(op).unwrap()),
            sequence: 3,
            policy_id,
            policy_version: version,
            payload_json: to_canonical_string(&json!({"k": "\u{1f600}\n\u{7f}"})).unwrap(),
            payload_digest: Digest::of_bytes(b""),
            previous_chain_hash: Some(Digest::of_bytes(b"p")),
            chain_hash: Digest::of_bytes(b""),
            supersedes_record_id: None,
            created_at: Timestamp(created),
            hash_algorithm: HASH_ALGORITHM.into(),
        };
        reseal(&mut r);
        let mut v = serde_json::to_value(&r).unwrap();
        v.as_object_mut().unwrap().remove("chain_hash");
        prop_assert_eq!(hash_input(&Fields::of(&r)).unwrap(), to_canonical_string(&v).unwrap());
    }
}
