//! Governed execution: the reducer, the one-terminal rule, the pre-call and post-call
//! append failures, recovery and resume.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use serde_json::json;
use warden_contracts::*;
use warden_evidence::payload::{CloseDisposition, GateLevel, GateVerdict};
use warden_evidence::*;

use crate::support::*;

fn id(s: &str) -> RecordId {
    RecordId::new(s).unwrap()
}

#[test]
fn the_reducer_follows_the_gate_levels() {
    use GateLevel::*;
    use GateVerdict::*;
    let g = |i: &str, l, v| (id(i), l, v, ReasonCode::PolicyRule);
    // All allows.
    let r = reduce(&[g("a", Hard, Allow), g("b", Soft, Allow)], &[], true);
    assert_eq!((r.disposition, r.degraded), (Disposition::Allow, false));
    // A hard deny wins over everything.
    let r = reduce(&[g("a", Soft, Deny), g("b", Hard, Deny)], &[id("a")], true);
    assert_eq!(
        (r.disposition, r.deciding_gate),
        (Disposition::Deny, Some(id("b")))
    );
    // An unresolved soft deny escalates when an authority exists, else denies.
    let r = reduce(&[g("a", Soft, Deny)], &[], true);
    assert_eq!(r.disposition, Disposition::Escalate);
    let r = reduce(&[g("a", Soft, Deny)], &[], false);
    assert_eq!(r.disposition, Disposition::Deny);
    // A soft deny with a recorded exception allows, degraded.
    let r = reduce(
        &[g("a", Soft, Deny), g("b", Hard, Allow)],
        &[id("a")],
        false,
    );
    assert_eq!((r.disposition, r.degraded), (Disposition::Allow, true));
    // An exception for one soft deny does not cover another.
    let r = reduce(&[g("a", Soft, Deny), g("b", Soft, Deny)], &[id("a")], false);
    assert_eq!(
        (r.disposition, r.deciding_gate),
        (Disposition::Deny, Some(id("b")))
    );
    // An advisory deny allows, carrying its record.
    let r = reduce(&[g("a", Advisory, Deny), g("b", Hard, Allow)], &[], false);
    assert_eq!(r.disposition, Disposition::Allow);
    assert_eq!(r.advisory_denials, vec![id("a")]);
    // No gate at all fails closed.
    assert_eq!(reduce(&[], &[], true).disposition, Disposition::Deny);
}

fn outcome(status: &str) -> ExecutionOutcome {
    let req = RequestId::new("r").unwrap();
    let p = RuntimeProfile::Certifiable;
    let reason = DecisionReason::new(ReasonCode::PolicyRule, "no");
    match status {
        "succeeded" => ExecutionOutcome::Succeeded {
            degradations: vec![],
            request_id: req,
            profile: p,
            result: json!(null),
            evidence: vec![],
        },
        "failed" => ExecutionOutcome::Failed {
            degradations: vec![],
            request_id: req,
            profile: p,
            failure: Failure {
                kind: "exit_status".into(),
                message: SECRET.into(),
            },
            call_executed: true,
            evidence: vec![],
        },
        "denied" => ExecutionOutcome::Denied {
            request_id: req,
            profile: p,
            reason,
            evaluator: "policy".into(),
            stop: false,
            evidence: vec![],
        },
        "cancelled" => ExecutionOutcome::Cancelled {
            degradations: vec![],
            request_id: req,
            profile: p,
            call_executed: true,
            evidence: vec![],
        },
        "timed_out" => ExecutionOutcome::TimedOut {
            degradations: vec![],
            request_id: req,
            profile: p,
            call_executed: true,
            evidence: vec![],
        },
        "ambiguous" => ExecutionOutcome::Ambiguous {
            degradations: vec![],
            request_id: req,
            profile: p,
            message: "lost".into(),
            evidence: vec![],
        },
        "deferred" => ExecutionOutcome::Deferred {
            request_id: req,
            profile: p,
            reason,
            retry_at: None,
        },
        other => panic!("{other}"),
    }
}

#[test]
fn each_outcome_closes_with_exactly_one_allowed_terminal_record() {
    // One terminal per operation: success, failure, denial, cancellation, timeout and ambiguity
    // each close with exactly one terminal record of the allowed type; a deferral has none.
    for (status, t) in [
        ("succeeded", RecordType::CallableCompleted),
        ("failed", RecordType::CallableFailed),
        ("denied", RecordType::OperationDenied),
        ("cancelled", RecordType::OperationCancelled),
        ("timed_out", RecordType::OperationTimedOut),
        ("ambiguous", RecordType::ExternalResultAmbiguous),
    ] {
        assert_eq!(terminal_for_outcome(&outcome(status)).unwrap(), t);
    }
    assert!(terminal_for_outcome(&outcome("deferred")).is_err());
    for b in Backend::all() {
        block_on(async {
            let rec = GovernedRecorder::open(b.store(), binding("g13"), &snapshot(), clock())
                .await
                .unwrap();
            for status in ["succeeded", "failed", "cancelled", "timed_out", "ambiguous"] {
                let p = allowed(&rec, status).await;
                let receipt = p
                    .begin()
                    .await
                    .unwrap()
                    .finish_outcome(&outcome(status))
                    .await
                    .unwrap();
                let records = rec.records().await.unwrap();
                let mine: Vec<_> = records
                    .iter()
                    .filter(|r| r.operation_id.as_ref().map(OperationId::as_str) == Some(status))
                    .filter(|r| r.record_type.is_terminal())
                    .collect();
                assert_eq!(mine.len(), 1, "{status}");
                assert_eq!(mine[0].record_id, receipt.record_id);
                assert_eq!(
                    mine[0].record_type,
                    terminal_for_outcome(&outcome(status)).unwrap()
                );
            }
            // A denial after start closes as operation_denied; an escalation too, and its
            // approval is a new operation.
            let mut h = new_op(&rec, "denied").await;
            h.gate(gate(GateLevel::Hard, GateVerdict::Deny))
                .await
                .unwrap();
            let Authorization::Denied { reduction, receipt } = h.authorize(None).await.unwrap()
            else {
                panic!()
            };
            assert_eq!(reduction.disposition, Disposition::Deny);
            let mut h = new_op(&rec, "escalated").await;
            h.gate(gate(GateLevel::Soft, GateVerdict::Deny))
                .await
                .unwrap();
            let esc = Escalation {
                approval_id: ApprovalId::new("ap-e").unwrap(),
                authority: "human".into(),
            };
            let Authorization::Escalated {
                receipt: esc_receipt,
                ..
            } = h.authorize(Some(esc)).await.unwrap()
            else {
                panic!()
            };
            let records = rec.records().await.unwrap();
            let find = |r: &AppendReceipt| {
                records
                    .iter()
                    .find(|x| x.record_id == r.record_id)
                    .unwrap()
                    .clone()
            };
            assert_eq!(find(&receipt).record_type, RecordType::OperationDenied);
            let e = find(&esc_receipt);
            assert!(
                e.payload_json.contains(r#""disposition":"escalate""#),
                "{}",
                e.payload_json
            );
            assert!(e.payload_json.contains(r#""approval_id":"ap-e""#));
            let Started::New(h) = rec
                .start_operation(
                    start("approved-retry").with_approval(
                        ApprovalReceipt::new(
                            ApprovalId::new("ap-e").unwrap(),
                            "bash",
                            Digest::of_bytes(b"args"),
                            None,
                            PrincipalRef {
                                id: PrincipalId::new("alice").unwrap(),
                                kind: PrincipalKind::Local,
                            },
                            Timestamp(1),
                            Timestamp(2),
                        )
                        .unwrap(),
                        2,
                    ),
                )
                .await
                .unwrap()
            else {
                panic!()
            };
            assert_ne!(h.operation_id().as_str(), "escalated");
            h.close_before_call(TerminalKind::Cancelled).await.unwrap();
            let close = rec.close(CloseDisposition::Completed).await.unwrap();
            let cert = certify(
                rec.store().as_ref(),
                &ChainId::new("g13").unwrap(),
                &ChainHead {
                    chain_id: close.chain_id.clone(),
                    sequence: close.sequence,
                    chain_hash: close.chain_hash.clone(),
                },
                Timestamp(9),
            )
            .await
            .unwrap();
            let t = cert.gate_summary.terminals;
            assert_eq!(
                (
                    t.completed,
                    t.failed,
                    t.denied,
                    t.cancelled,
                    t.timed_out,
                    t.ambiguous
                ),
                (1, 1, 2, 2, 1, 1)
            );
            assert_eq!(cert.grade, Grade::Full);
        });
    }
}

#[test]
fn preflight_outcomes_never_open_an_operation() {
    // A deferral or a containment denial happens before operation_started: there is nothing to
    // close, and `operation_started` is refused for a profile that records no evidence.
    let b = Backend::memory();
    block_on(async {
        let mut bind = binding("pre");
        bind.profile = RuntimeProfile::Minimal;
        let err = GovernedRecorder::open(b.store(), bind, &snapshot(), clock())
            .await
            .unwrap_err();
        assert!(matches!(err, GovernanceError::Invalid(_)));
        // A context with another policy fails before operation_started.
        let rec = GovernedRecorder::open(b.store(), binding("pre"), &snapshot(), clock())
            .await
            .unwrap();
        let mut s = start("op");
        s.policy = None;
        assert!(matches!(
            rec.start_operation(s).await,
            Err(GovernanceError::PolicyMismatch { .. })
        ));
        assert_eq!(rec.records().await.unwrap().len(), 1);
    });
}

/// A store that fails chosen appends (1-based), as an I/O error would.
struct Flaky {
    inner: Arc<MemoryStore>,
    fail: Vec<usize>,
    count: AtomicUsize,
}

#[async_trait]
impl EvidenceStore for Flaky {
    fn append<'a, 'b>(
        &'a self,
        entry: EvidenceAppend,
    ) -> Pin<Box<dyn Future<Output = Result<AppendReceipt, EvidenceError>> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        let r = if self.fail.contains(&n) {
            Err(EvidenceError::Unavailable {
                message: format!("disk full at append {n}"),
            })
        } else {
            self.inner.append_sync(&entry)
        };
        Box::pin(async move { r })
    }
    async fn read(
        &self,
        c: &ChainId,
        a: Option<u64>,
        l: usize,
    ) -> Result<Vec<EvidenceRecord>, EvidenceError> {
        self.inner.read(c, a, l).await
    }
    async fn head(&self, c: &ChainId) -> Result<Option<ChainHead>, EvidenceError> {
        self.inner.head(c).await
    }
    async fn verify(
        &self,
        c: &ChainId,
        h: Option<&ChainHead>,
    ) -> Result<VerificationResult, EvidenceError> {
        self.inner.verify(c, h).await
    }
}

#[async_trait]
impl GovernedStore for Flaky {
    fn append_typed(&self, append: TypedAppend, expected_sequence: u64) -> AppendFuture<'_> {
        self.append(append.into_append(expected_sequence))
    }
    async fn chains(&self) -> Result<Vec<ChainId>, EvidenceError> {
        self.inner.chains().await
    }
    async fn find_idempotency_key(
        &self,
        k: &Digest,
    ) -> Result<Option<OperationRef>, EvidenceError> {
        self.inner.find_idempotency_key(k).await
    }
    async fn find_approval_use(
        &self,
        a: &ApprovalId,
    ) -> Result<Option<OperationRef>, EvidenceError> {
        self.inner.find_approval_use(a).await
    }
    async fn verify_report(&self, c: &ChainId, e: &Expected) -> Result<Report, EvidenceError> {
        self.inner.verify_report(c, e).await
    }
}

/// Runs one governed call (genesis, policy_bound, operation_started, gate, terminal = appends
/// 1..=5) whose callable counts its runs; returns (calls, the result).
fn governed_call(fail: Vec<usize>) -> (usize, Result<AppendReceipt, GovernanceError>) {
    let calls = AtomicUsize::new(0);
    let store = Arc::new(Flaky {
        inner: Arc::new(MemoryStore::new()),
        fail,
        count: AtomicUsize::new(0),
    });
    let r = block_on(async {
        let rec =
            GovernedRecorder::open(store.clone(), binding("flaky"), &snapshot(), clock()).await?;
        let Started::New(mut h) = rec.start_operation(start("op")).await? else {
            panic!()
        };
        h.gate(gate(GateLevel::Hard, GateVerdict::Allow)).await?;
        let Authorization::Permitted(p) = h.authorize(None).await? else {
            panic!()
        };
        let call = p.begin().await?;
        calls.fetch_add(1, Ordering::SeqCst);
        call.completed(&json!("done")).await
    });
    (calls.load(Ordering::SeqCst), r)
}

#[test]
fn a_failed_pre_call_append_makes_the_callable_unreachable() {
    // Evidence before the call: every pre-call append (genesis, policy_bound, operation_started,
    // gate_evaluated) failing prevents the invocation, with call_executed = false.
    for n in 1..=4 {
        let (calls, r) = governed_call(vec![n]);
        let err = r.unwrap_err();
        assert_eq!(calls, 0, "append {n}");
        assert!(!err.call_executed(), "append {n}: {err}");
        assert!(
            matches!(
                err,
                GovernanceError::Evidence {
                    call_executed: false,
                    ..
                }
            ),
            "{err}"
        );
    }
    let (calls, r) = governed_call(vec![]);
    assert_eq!(calls, 1);
    r.unwrap();
}

#[test]
fn a_failed_post_call_append_reports_call_executed_and_never_retries() {
    let (calls, r) = governed_call(vec![5]);
    let err = r.unwrap_err();
    assert_eq!(calls, 1, "the call ran once and is not retried");
    assert!(err.call_executed(), "{err}");
}

#[test]
fn recovery_closes_open_operations_without_running_them() {
    for b in Backend::all() {
        block_on(async {
            let rec = GovernedRecorder::open(b.store(), binding("rec"), &snapshot(), clock())
                .await
                .unwrap();
            // One crashed during its gates with a hard deny recorded, one after its permit.
            let mut h = new_op(&rec, "op-denied").await;
            h.gate(gate(GateLevel::Hard, GateVerdict::Deny))
                .await
                .unwrap();
            drop(h);
            let p = allowed(&rec, "op-inflight").await;
            let inflight = p.begin().await.unwrap();
            drop(inflight);
            // A fresh recorder (a restart) resumes the chain and sees both open.
            let resumed = GovernedRecorder::resume(
                b.store(),
                ChainId::new("rec").unwrap(),
                RuntimeProfile::Certifiable,
                clock(),
            )
            .await
            .unwrap();
            assert_eq!(resumed.open_operations().len(), 2);
            assert!(matches!(
                resumed.close(CloseDisposition::Completed).await,
                Err(GovernanceError::OpenOperations { .. })
            ));
            let recovered = resumed.recover().await.unwrap();
            let kinds: Vec<_> = recovered
                .iter()
                .map(|r| (r.operation_id.as_str().to_owned(), r.terminal))
                .collect();
            assert_eq!(
                kinds,
                vec![
                    ("op-denied".to_owned(), RecordType::OperationDenied),
                    (
                        "op-inflight".to_owned(),
                        RecordType::ExternalResultAmbiguous
                    )
                ]
            );
            resumed.close(CloseDisposition::Completed).await.unwrap();
            let v = b
                .store()
                .verify(&ChainId::new("rec").unwrap(), None)
                .await
                .unwrap();
            assert!(v.valid, "{v:?}");
        });
    }
}

#[test]
fn a_terminal_cannot_be_recorded_twice_even_by_two_handles() {
    block_on(async {
        let b = Backend::memory();
        let rec = GovernedRecorder::open(b.store(), binding("twice"), &snapshot(), clock())
            .await
            .unwrap();
        let p = allowed(&rec, "op").await;
        p.begin().await.unwrap().completed(&json!(1)).await.unwrap();
        // A second recorder on the same chain (another process) cannot add a second terminal.
        let other = GovernedRecorder::resume(
            b.store(),
            ChainId::new("twice").unwrap(),
            RuntimeProfile::Governed,
            clock(),
        )
        .await
        .unwrap();
        assert!(other.open_operations().is_empty());
        assert!(other.recover().await.unwrap().is_empty());
    });
}

#[test]
fn concurrent_operations_share_one_chain() {
    // Operations run concurrently on one boundary; appends are pipelined in order.
    let b = Backend::sqlite();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let rec = GovernedRecorder::open(b.store(), binding("conc"), &snapshot(), clock())
            .await
            .unwrap();
        let mut tasks = Vec::new();
        for i in 0..32 {
            let rec = rec.clone();
            tasks.push(tokio::spawn(async move {
                let p = allowed(&rec, &format!("op-{i:02}")).await;
                p.begin().await.unwrap().completed(&json!(i)).await.unwrap();
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let close = rec.close(CloseDisposition::Completed).await.unwrap();
        assert_eq!(close.sequence, 1 + 32 * 4);
        let v = b
            .store()
            .verify(&ChainId::new("conc").unwrap(), None)
            .await
            .unwrap();
        assert!(v.valid, "{v:?}");
    });
}
