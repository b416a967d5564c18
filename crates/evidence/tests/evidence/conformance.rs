//! The conformance suite: every test runs against every backend (memory, SQLite), and both
//! produce identical records for identical appends.

use std::sync::Arc;

use serde_json::{Value, json};
use warden_contracts::*;
use warden_evidence::payload::{self, CloseDisposition, GateLevel, GateVerdict, Payload};
use warden_evidence::*;

use crate::support::*;

fn each_backend(test: impl Fn(&Backend)) {
    for b in Backend::all() {
        eprintln!("backend: {}", b.name());
        test(&b);
    }
}

#[test]
fn the_standard_chain_verifies_on_every_backend_with_identical_records() {
    let mut all = Vec::new();
    each_backend(|b| {
        block_on(async {
            let rec = standard_chain(b.store(), "conf").await;
            let chain = ChainId::new("conf").unwrap();
            let head = rec.head().await.unwrap().unwrap();
            let r = b.store().verify(&chain, Some(&head)).await.unwrap();
            assert!(r.valid, "{r:?}");
            assert_eq!(r.verified_head.as_ref(), Some(&head));
            assert_eq!(r.checked_records, head.sequence + 1);
            assert_eq!(b.store().chains().await.unwrap(), vec![chain.clone()]);
        });
    });
    for b in Backend::all() {
        block_on(standard_chain(b.store(), "same"));
        all.push(block_on(all_records(b.store().as_ref(), "same")));
    }
    assert_eq!(
        all[0], all[1],
        "memory and SQLite must seal identical records"
    );
}

#[test]
fn read_pages_after_a_sequence() {
    each_backend(|b| {
        block_on(async {
            standard_chain(b.store(), "page").await;
            let chain = ChainId::new("page").unwrap();
            let all = b.store().read(&chain, None, usize::MAX).await.unwrap();
            let page = b.store().read(&chain, Some(4), 3).await.unwrap();
            assert_eq!(page, all[5..8].to_vec());
            assert!(
                b.store()
                    .read(&chain, Some(10_000), 3)
                    .await
                    .unwrap()
                    .is_empty()
            );
            let none = ChainId::new("nope").unwrap();
            assert!(b.store().read(&none, None, 10).await.unwrap().is_empty());
            assert_eq!(b.store().head(&none).await.unwrap(), None);
            let head = b.store().head(&chain).await.unwrap().unwrap();
            assert_eq!(head, head_of(all.last().unwrap()));
        });
    });
}

fn raw(
    chain: &str,
    seq: u64,
    t: RecordType,
    op: Option<&str>,
    payload: serde_json::Value,
) -> EvidenceAppend {
    EvidenceAppend {
        chain_id: ChainId::new(chain).unwrap(),
        record_type: t,
        operation_id: op.map(|o| OperationId::new(o).unwrap()),
        expected_sequence: seq,
        policy_id: "project".into(),
        policy_version: "7".into(),
        payload,
        supersedes_record_id: None,
        created_at: Timestamp(10 + seq),
    }
}

fn terminal_payload() -> serde_json::Value {
    json!({"call_executed": false})
}

#[test]
fn stores_refuse_what_a_verifier_would_reject() {
    each_backend(|b| {
        block_on(async {
            let store = b.store();
            let rec = GovernedRecorder::open(store.clone(), binding("life"), &snapshot(), clock())
                .await
                .unwrap();
            let p = allowed(&rec, "op-1").await;
            p.begin()
                .await
                .unwrap()
                .finish(TerminalKind::Cancelled)
                .await
                .unwrap();
            let head = rec.head().await.unwrap().unwrap();
            let next = head.sequence + 1;
            let refused = |e: Result<AppendReceipt, EvidenceError>, code: &str| {
                let msg = e.unwrap_err().to_string();
                assert!(msg.contains(code), "{} want {code}: {msg}", b.name());
            };
            // A second terminal for op-1.
            refused(
                store
                    .append(raw(
                        "life",
                        next,
                        RecordType::OperationCancelled,
                        Some("op-1"),
                        terminal_payload(),
                    ))
                    .await,
                "duplicate_terminal",
            );
            // A gate for an operation that never started.
            refused(
                store
                    .append(raw(
                        "life",
                        next,
                        RecordType::GateEvaluated,
                        Some("ghost"),
                        serde_json::to_value(payload::GateEvaluated {
                            gate: payload::Label::new("policy").unwrap(),
                            stage: Stage::Authorize,
                            level: GateLevel::Hard,
                            verdict: GateVerdict::Allow,
                            reason_code: ReasonCode::PolicyRule,
                            rule: None,
                            source: None,
                            arguments_digest: Digest::of_bytes(b"x"),
                            recheck: false,
                        })
                        .unwrap(),
                    ))
                    .await,
                "orphan_record",
            );
            // Close while an operation is open.
            let h = new_op(&rec, "op-open").await;
            let open_head = rec.head().await.unwrap().unwrap();
            refused(
                store
                    .append(raw(
                        "life",
                        open_head.sequence + 1,
                        RecordType::TaskClosed,
                        None,
                        json!({"task_boundary_id": "task-life", "disposition": "completed", "operations": 2,
                               "terminals": {"completed":0,"failed":0,"denied":0,"cancelled":1,"timed_out":0,"ambiguous":0},
                               "exceptions": 0}),
                    ))
                    .await,
                "missing_terminal",
            );
            // The recorder refuses too, naming the open operation.
            match rec.close(CloseDisposition::Completed).await {
                Err(GovernanceError::OpenOperations { operations }) => {
                    assert_eq!(operations, vec![OperationId::new("op-open").unwrap()]);
                }
                other => panic!("{other:?}"),
            }
            h.close_before_call(TerminalKind::Cancelled).await.unwrap();
            // Counts in task_closed must be the chain's.
            let h2 = rec.head().await.unwrap().unwrap();
            refused(
                store
                    .append(raw(
                        "life",
                        h2.sequence + 1,
                        RecordType::TaskClosed,
                        None,
                        json!({"task_boundary_id": "task-life", "disposition": "completed", "operations": 5,
                               "terminals": {"completed":0,"failed":0,"denied":0,"cancelled":2,"timed_out":0,"ambiguous":0},
                               "exceptions": 0}),
                    ))
                    .await,
                "invalid_payload",
            );
            rec.close(CloseDisposition::Completed).await.unwrap();
            // Nothing after the close: neither a second close nor anything else.
            let h3 = rec.head().await.unwrap().unwrap();
            refused(
                store
                    .append(raw(
                        "life",
                        h3.sequence + 1,
                        RecordType::TaskClosed,
                        None,
                        json!({"task_boundary_id": "task-life", "disposition": "completed", "operations": 2,
                               "terminals": {"completed":0,"failed":0,"denied":0,"cancelled":2,"timed_out":0,"ambiguous":0},
                               "exceptions": 0}),
                    ))
                    .await,
                "record_after_close",
            );
            assert!(matches!(
                rec.start_operation(start("late")).await,
                Err(GovernanceError::Closed(_))
            ));
            let v = store
                .verify(&ChainId::new("life").unwrap(), None)
                .await
                .unwrap();
            assert!(v.valid, "{v:?}");
        });
    });
}

#[test]
fn idempotency_keys_replay_the_recorded_operation() {
    each_backend(|b| {
        block_on(async {
            let rec = GovernedRecorder::open(b.store(), binding("idem"), &snapshot(), clock())
                .await
                .unwrap();
            let mut s = start("op-1");
            s.idempotency_key = Some("key-1".into());
            let Started::New(mut h) = rec.start_operation(s.clone()).await.unwrap() else {
                panic!()
            };
            h.gate(gate(GateLevel::Hard, GateVerdict::Allow))
                .await
                .unwrap();
            let Authorization::Permitted(p) = h.authorize(None).await.unwrap() else {
                panic!()
            };
            let done = p
                .begin()
                .await
                .unwrap()
                .completed(&json!({"n": 1}))
                .await
                .unwrap();
            // The same key (another operation id): a replay of op-1, nothing new appended.
            let head = rec.head().await.unwrap();
            let mut again = s.clone();
            again.operation_id = OperationId::new("op-2").unwrap();
            match rec.start_operation(again.clone()).await.unwrap() {
                Started::Replay(r) => {
                    assert_eq!(r.operation.operation_id.as_str(), "op-1");
                    assert_eq!(r.terminal, Some(RecordType::CallableCompleted));
                    assert_eq!(r.terminal_record.unwrap().record_id, done.record_id);
                    assert_eq!(
                        r.result_digest,
                        Some(Digest::of_json(&json!({"n": 1})).unwrap())
                    );
                }
                Started::New(_) => panic!("{}: the key must replay", b.name()),
            }
            assert_eq!(rec.head().await.unwrap(), head);
            // The same key with other arguments is a conflict.
            again.arguments_digest = Digest::of_bytes(b"other");
            assert!(matches!(
                rec.start_operation(again).await,
                Err(GovernanceError::IdempotencyConflict { .. })
            ));
            // Another principal's identical key is another key.
            let mut other = s.clone();
            other.operation_id = OperationId::new("op-3").unwrap();
            other.principal.id = PrincipalId::new("bob").unwrap();
            assert!(matches!(
                rec.start_operation(other).await.unwrap(),
                Started::New(_)
            ));
        });
    });
}

fn receipt(id: &str) -> ApprovalReceipt {
    ApprovalReceipt::new(
        ApprovalId::new(id).unwrap(),
        "bash",
        Digest::of_bytes(b"args"),
        None,
        PrincipalRef {
            id: PrincipalId::new("alice").unwrap(),
            kind: PrincipalKind::User,
        },
        Timestamp(1),
        Timestamp(u64::from(u32::MAX)),
    )
    .unwrap()
}

#[test]
fn approval_receipts_are_single_use() {
    each_backend(|b| {
        block_on(async {
            let rec = GovernedRecorder::open(b.store(), binding("appr"), &snapshot(), clock())
                .await
                .unwrap();
            let s = start("op-a").with_approval(receipt("ap-1"), 2);
            let Started::New(h) = rec.start_operation(s).await.unwrap() else {
                panic!()
            };
            h.close_before_call(TerminalKind::Cancelled).await.unwrap();
            let again = start("op-b").with_approval(receipt("ap-1"), 3);
            match rec.start_operation(again).await {
                Err(GovernanceError::ApprovalAlreadyUsed {
                    approval_id,
                    used_by,
                }) => {
                    assert_eq!(approval_id.as_str(), "ap-1");
                    assert_eq!(used_by.operation_id.as_str(), "op-a");
                }
                other => panic!("{}: {other:?}", b.name()),
            }
            // A raw append using the same approval is refused by the store's index too.
            let found = b
                .store()
                .find_approval_use(&ApprovalId::new("ap-1").unwrap())
                .await
                .unwrap();
            assert_eq!(found.unwrap().operation_id.as_str(), "op-a");
            // An `operation_started` binding a fresh idempotency key with the used approval is
            // refused whole: the key stays free.
            let chain = ChainId::new("appr").unwrap();
            let records = all_records(b.store().as_ref(), "appr").await;
            let started = records
                .iter()
                .find(|r| r.record_type == RecordType::OperationStarted)
                .unwrap();
            let mut payload: Value = serde_json::from_str(&started.payload_json).unwrap();
            let key = Digest::of_bytes(b"a fresh key");
            payload["idempotency_key_digest"] = json!(key);
            payload["request_id"] = json!("req-op-c");
            let head = b.store().head(&chain).await.unwrap().unwrap();
            let err = b
                .store()
                .append(EvidenceAppend {
                    chain_id: chain,
                    record_type: RecordType::OperationStarted,
                    operation_id: Some(OperationId::new("op-c").unwrap()),
                    expected_sequence: head.sequence + 1,
                    policy_id: started.policy_id.clone(),
                    policy_version: started.policy_version.clone(),
                    payload,
                    supersedes_record_id: None,
                    created_at: Timestamp(2),
                })
                .await
                .unwrap_err();
            assert!(err.to_string().contains("approval already used"), "{err}");
            assert!(
                b.store()
                    .find_idempotency_key(&key)
                    .await
                    .unwrap()
                    .is_none(),
                "{}: a refused append bound its idempotency key",
                b.name()
            );
        });
    });
}

#[test]
fn approvals_and_keys_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.db");
    block_on(async {
        let store: Arc<dyn GovernedStore> = Arc::new(SqliteStore::open(&path).unwrap());
        let rec = GovernedRecorder::open(store, binding("reopen"), &snapshot(), clock())
            .await
            .unwrap();
        let Started::New(h) = rec
            .start_operation(start("op-a").with_approval(receipt("ap-9"), 2))
            .await
            .unwrap()
        else {
            panic!()
        };
        h.close_before_call(TerminalKind::Cancelled).await.unwrap();
    });
    block_on(async {
        let store: Arc<dyn GovernedStore> = Arc::new(SqliteStore::open(&path).unwrap());
        let rec = GovernedRecorder::resume(
            store,
            ChainId::new("reopen").unwrap(),
            RuntimeProfile::Certifiable,
            clock(),
        )
        .await
        .unwrap();
        assert!(matches!(
            rec.start_operation(start("op-b").with_approval(receipt("ap-9"), 3))
                .await,
            Err(GovernanceError::ApprovalAlreadyUsed { .. })
        ));
    });
}

#[test]
fn verification_against_heads_kept_elsewhere() {
    each_backend(|b| {
        block_on(async {
            let rec = standard_chain(b.store(), "heads").await;
            let chain = ChainId::new("heads").unwrap();
            let records = rec.records().await.unwrap();
            let mid = head_of(&records[10]);
            assert!(b.store().verify(&chain, Some(&mid)).await.unwrap().valid);
            let mut wrong = mid.clone();
            wrong.chain_hash = records[11].chain_hash.clone();
            let r = b.store().verify(&chain, Some(&wrong)).await.unwrap();
            assert_eq!(r.failure_code, Some(VerificationFailure::HeadMismatch));
            assert_eq!(r.failed_record_id.as_ref(), Some(&records[10].record_id));
            let mut beyond = mid.clone();
            beyond.sequence = 10_000;
            let r = b.store().verify(&chain, Some(&beyond)).await.unwrap();
            assert_eq!(r.failure_code, Some(VerificationFailure::HeadMismatch));
            assert_eq!(r.failed_record_id, None);
            let report = b
                .store()
                .verify_report(&chain, &Expected::Hash(records[3].chain_hash.clone()))
                .await
                .unwrap();
            assert!(report.result.valid);
            let report = b
                .store()
                .verify_report(&chain, &Expected::Hash(Digest::of_bytes(b"nope")))
                .await
                .unwrap();
            assert_eq!(
                report.result.failure_code,
                Some(VerificationFailure::HeadMismatch)
            );
        });
    });
}

fn hook(seq: u64, decision: &str) -> JournalAppend {
    JournalAppend {
        chain_id: ChainId::new("session-1").unwrap(),
        record_type: JournalRecordType::HookVerdict,
        operation_id: Some(OperationId::new(format!("toolu_{seq}")).unwrap()),
        expected_sequence: seq,
        policy_id: "project".into(),
        policy_version: "7".into(),
        payload: json!({
            "provider": "claude-code", "event": "PreToolUse", "tool": "Bash",
            "arguments_digest": Digest::of_bytes(b"a"), "decision": decision,
            "policy_digest": snapshot().reference().digest,
        }),
        created_at: Timestamp(100 + seq),
    }
}

#[test]
fn the_journal_chains_the_same_way_and_is_kept_apart() {
    each_backend(|b| {
        let j = b.journal();
        j.append_journal(hook(0, "allow")).unwrap();
        j.append_journal(hook(1, "deny")).unwrap();
        let mut obs = hook(2, "allow");
        obs.record_type = JournalRecordType::ProviderObservation;
        obs.payload = json!({"provider": "claude-code", "reported_by": "provider", "tool": "Bash",
                             "status": "succeeded", "result_digest": Digest::of_bytes(b"r")});
        j.append_journal(obs).unwrap();
        let chain = ChainId::new("session-1").unwrap();
        let report = j.verify_journal(&chain, &Expected::Nothing).unwrap();
        assert!(report.result.valid, "{report:?}");
        assert_eq!(report.result.checked_records, 3);
        assert_eq!(j.journal_chains().unwrap(), vec![chain.clone()]);
        let records = j.read_journal(&chain, None, 10).unwrap();
        assert_eq!(records.len(), 3);
        assert!(
            records[2]
                .payload_json
                .contains(r#""reported_by":"provider""#)
        );
        // Journal chains are not evidence chains, and cannot be certified.
        let evidence = block_on(b.store().chains()).unwrap();
        assert!(evidence.is_empty());
        let refused = certify_records(&chain, &[], &head_of_journal(&records[2]), Timestamp(1));
        assert!(matches!(refused, Err(CertificateRefusal::Empty(_))));
        // Raw arguments are refused; the wrong sequence too.
        let mut bad = hook(3, "allow");
        bad.payload["command"] = json!(SECRET);
        assert!(j.append_journal(bad).is_err());
        assert!(matches!(
            j.append_journal(hook(9, "allow")),
            Err(EvidenceError::SequenceConflict { .. })
        ));
        // Observations are labelled as the provider's; nothing else can report.
        let mut forged = hook(3, "allow");
        forged.record_type = JournalRecordType::ProviderObservation;
        forged.payload = json!({"provider": "claude-code", "reported_by": "warden", "tool": "Bash", "status": "succeeded"});
        assert!(j.append_journal(forged).is_err());
    });
}

fn head_of_journal(r: &JournalRecord) -> ChainHead {
    ChainHead {
        chain_id: r.chain_id.clone(),
        sequence: r.sequence,
        chain_hash: r.chain_hash.clone(),
    }
}

#[test]
fn corrections_name_an_earlier_record_of_the_chain() {
    each_backend(|b| {
        block_on(async {
            let rec = GovernedRecorder::open(b.store(), binding("fix"), &snapshot(), clock())
                .await
                .unwrap();
            let records = rec.records().await.unwrap();
            let r = rec.supersede(&records[0], "typo", None).await.unwrap();
            let all = rec.records().await.unwrap();
            assert_eq!(
                all[1].supersedes_record_id.as_ref(),
                Some(&records[0].record_id)
            );
            assert_eq!(r.sequence, 1);
            // A corrected payload must be valid for the superseded record's type.
            let err = rec
                .supersede(&records[0], "typo", Some(json!({"nonsense": true})))
                .await
                .unwrap_err();
            assert!(err.to_string().contains("invalid"), "{err}");
            // The store refuses a correction of a record that does not exist (yet).
            let err = b
                .store()
                .append(EvidenceAppend {
                    supersedes_record_id: Some(record_id_for(Family::Evidence, &ChainId::new("fix").unwrap(), 40).unwrap()),
                    ..raw(
                        "fix",
                        2,
                        RecordType::RecordSuperseded,
                        None,
                        json!({"superseded_sequence": 40, "superseded_record_type": "policy_bound", "reason": "x"}),
                    )
                })
                .await
                .unwrap_err();
            assert!(err.to_string().contains("orphan_record"), "{err}");
        });
    });
}

#[test]
fn concurrent_tasks_append_in_parallel_and_a_shared_idempotency_key_binds_one_operation() {
    // Four tasks, each on its own chain, append at once; every round they also race to start an
    // operation under one shared idempotency key. Exactly one start per key is new; the others
    // replay it or are refused by the store's index (when both checked before either appended).
    each_backend(|b| {
        let (tasks, rounds) = (4, 12);
        let new: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..tasks)
                .map(|t| {
                    let store = b.store();
                    s.spawn(move || {
                        block_on(async move {
                            let chain = format!("task-{t}");
                            let rec = GovernedRecorder::open(
                                store,
                                binding(&chain),
                                &snapshot(),
                                clock(),
                            )
                            .await
                            .unwrap();
                            let mut new = 0;
                            for i in 0..rounds {
                                let p = allowed(&rec, &format!("op-{i}")).await;
                                let call = p.begin().await.unwrap();
                                call.completed(&json!({"i": i})).await.unwrap();
                                let mut race = start(&format!("race-{i}"));
                                race.idempotency_key = Some(format!("shared-{i}"));
                                match rec.start_operation(race).await {
                                    Ok(Started::New(h)) => {
                                        new += 1;
                                        h.close_before_call(TerminalKind::Cancelled).await.unwrap();
                                    }
                                    Ok(Started::Replay(r)) => {
                                        assert_eq!(
                                            r.operation.operation_id.as_str(),
                                            format!("race-{i}")
                                        );
                                        assert_ne!(r.operation.chain_id.as_str(), chain);
                                    }
                                    Err(e) => assert!(
                                        e.to_string().contains("idempotency key already bound"),
                                        "{chain}: {e}"
                                    ),
                                }
                            }
                            rec.close(CloseDisposition::Completed).await.unwrap();
                            new
                        })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(
            new,
            rounds,
            "{}: one new operation per shared key",
            b.name()
        );
        for t in 0..tasks {
            let chain = ChainId::new(format!("task-{t}")).unwrap();
            let r = block_on(b.store().verify(&chain, None)).unwrap();
            assert!(r.valid, "{}: {chain}: {r:?}", b.name());
        }
    });
}

/// The standard chain's records (every record type) as the plain appends that made them.
async fn standard_appends(chain: &str) -> (Vec<EvidenceAppend>, Vec<EvidenceRecord>) {
    let scratch: Arc<dyn GovernedStore> = Arc::new(MemoryStore::new());
    standard_chain(scratch.clone(), chain).await;
    let records = all_records(scratch.as_ref(), chain).await;
    let appends = records.iter().map(append_of).collect();
    (appends, records)
}

/// A payload its type's schema refuses, appended plainly: a wrong sequence is reported first,
/// then the payload, and nothing is appended.
#[test]
fn a_refused_payload_is_reported_after_the_sequence_check() {
    each_backend(|b| {
        block_on(async {
            let store = b.store();
            let (appends, _) = standard_appends("refused").await;
            for e in &appends {
                store.append(e.clone()).await.unwrap();
            }
            let next = appends.len() as u64;
            let bad = raw(
                "refused",
                next,
                RecordType::CallableCompleted,
                Some("op-1"),
                json!({"result": "raw output"}),
            );
            let mut wrong = bad.clone();
            wrong.expected_sequence = 9;
            let err = store.append(wrong).await.unwrap_err();
            assert!(
                matches!(err, EvidenceError::SequenceConflict { expected, got: 9, .. } if expected == next),
                "{}: {err}",
                b.name()
            );
            let err = store.append(bad).await.unwrap_err();
            assert!(
                err.to_string().contains("callable_completed payload"),
                "{}: {err}",
                b.name()
            );
            assert_eq!(
                all_records(store.as_ref(), "refused").await.len() as u64,
                next
            );
        });
    });
}

/// A typed append (what the recorder appends: its payload never becomes a `Value`) seals exactly
/// the record the plain append of its value seals, on every backend; a payload its type's rules
/// refuse is refused after the sequence check with the plain append's error.
#[test]
fn typed_appends_seal_the_records_their_values_seal() {
    each_backend(|b| {
        block_on(async {
            let store = b.store();
            let (appends, sealed) = standard_appends("typed").await;
            for (e, expected) in appends.iter().zip(&sealed) {
                let typed = crate::workload::typed_of(e);
                assert_eq!(typed.clone().into_append(e.expected_sequence), *e);
                let receipt = store
                    .append_typed(typed, e.expected_sequence)
                    .await
                    .unwrap();
                assert_eq!(receipt, receipt_of(expected), "{}", b.name());
            }
            let records = all_records(store.as_ref(), "typed").await;
            assert_eq!(records, sealed, "{}", b.name());
            // `operation_started` with attempt 0: its type's rule, not a field's.
            let started = appends
                .iter()
                .find(|e| e.record_type == RecordType::OperationStarted)
                .unwrap();
            let mut bad = crate::workload::typed_of(started);
            let Payload::OperationStarted(p) = &mut bad.payload else {
                unreachable!()
            };
            p.attempt = 0;
            let next = records.len() as u64;
            let err = store.append_typed(bad.clone(), next + 3).await.unwrap_err();
            assert!(
                matches!(err, EvidenceError::SequenceConflict { expected, .. } if expected == next),
                "{}: {err}",
                b.name()
            );
            let typed_err = store.append_typed(bad.clone(), next).await.unwrap_err();
            let plain_err = store.append(bad.into_append(next)).await.unwrap_err();
            assert_eq!(typed_err.to_string(), plain_err.to_string(), "{}", b.name());
            assert!(
                typed_err
                    .to_string()
                    .contains("operation_started payload: attempt starts at 1"),
                "{}: {typed_err}",
                b.name()
            );
            assert_eq!(
                all_records(store.as_ref(), "typed").await.len() as u64,
                next
            );
        });
    });
}

/// Concurrent operations of one task share its chain: each prepares its records outside the
/// recorder's lock, and the chain still takes them one sequence at a time, verifies, and
/// certifies with every operation closed by exactly one terminal.
#[test]
fn concurrent_operations_of_one_task_prepare_in_parallel_and_the_chain_certifies() {
    each_backend(|b| {
        let store = b.store();
        let rec = block_on(GovernedRecorder::open(
            store.clone(),
            binding("shared"),
            &snapshot(),
            clock(),
        ))
        .unwrap();
        let (threads, ops) = (4, 16);
        std::thread::scope(|s| {
            for t in 0..threads {
                let rec = rec.clone();
                s.spawn(move || {
                    block_on(async move {
                        for i in 0..ops {
                            let p = allowed(&rec, &format!("op-{t}-{i}")).await;
                            let call = p.begin().await.unwrap();
                            call.completed(&json!({"t": t, "i": i})).await.unwrap();
                        }
                    })
                });
            }
        });
        block_on(rec.close(CloseDisposition::Completed)).unwrap();
        let chain = ChainId::new("shared").unwrap();
        let records = block_on(store.read(&chain, None, usize::MAX)).unwrap();
        // Genesis, four records per operation, the close.
        assert_eq!(records.len(), 1 + 4 * threads * ops + 1, "{}", b.name());
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r.sequence, i as u64, "{}", b.name());
        }
        let head = head_of(records.last().unwrap());
        let r = block_on(store.verify(&chain, Some(&head))).unwrap();
        assert!(r.valid, "{}: {r:?}", b.name());
        let cert = certify_records(&chain, &records, &head, Timestamp(1)).unwrap();
        assert_eq!(cert.gate_summary.operations, (threads * ops) as u64);
    });
}
