//! Governed execution (docs/design/evidence.md#governed-execution-rules) on real SQLite
//! evidence files: the profile is chosen at composition and carried on every outcome;
//! `policy_bound` and `operation_started` precede every gate; each gate is recorded with its
//! level; the reducer (hard / soft / advisory, exceptions) decides at the pre-call
//! checkpoint; every started operation closes with exactly one terminal; deferrals and
//! containment denials open nothing; escalations close as denied and their approval is a new,
//! durably single-use operation; idempotency keys replay across restarts.

use std::path::PathBuf;

use warden_evidence::payload::{CloseDisposition, GateLevel};
use warden_evidence::{
    Certificate, Denial, Expected, GateEvaluation, GovernedStore, Grade, OperationStart,
    SqliteReader, SqliteStore, Started, TerminalKind, certify_records, head_of,
};

use super::*;

const SECRET: &str = "sk-live-GOVERNED-SECRET-0123456789";

/// A governed composition over a real SQLite store in a temporary folder.
struct Gov {
    dir: tempfile::TempDir,
    snapshot: Arc<PolicySnapshot>,
}

impl Gov {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            snapshot: snapshot(POLICY),
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("evidence.db")
    }

    fn store(&self) -> Arc<SqliteStore> {
        Arc::new(SqliteStore::open(self.path()).unwrap())
    }

    fn binding(&self, chain: &str, profile: RuntimeProfile) -> GovernanceBinding {
        GovernanceBinding {
            task_boundary: TaskBoundary::new(&format!("task-{chain}")).unwrap(),
            chain_id: ChainId::new(chain).unwrap(),
            policy: self.snapshot.reference(),
            profile,
        }
    }

    fn bytes(&self) -> PolicySnapshotBytes {
        PolicySnapshotBytes::new(self.snapshot.reference(), self.snapshot.canonical_json()).unwrap()
    }

    fn open(&self, store: &Arc<SqliteStore>, chain: &str, profile: RuntimeProfile) -> Governance {
        let store: Arc<dyn warden_evidence::GovernedStore> = store.clone();
        rt().block_on(Governance::open(
            store,
            self.binding(chain, profile),
            &self.bytes(),
            Arc::new(warden_evidence::FixedClock::new(1_700_000_000_000)),
        ))
        .unwrap()
    }

    fn policy(&self) -> Arc<SnapshotPolicy> {
        Arc::new(SnapshotPolicy::new(self.snapshot.clone()))
    }

    /// An executor over `tools`, governed by `governance`.
    fn executor(
        &self,
        tools: &[Arc<TestTool>],
        governance: Governance,
        configure: impl FnOnce(ExecutorBuilder) -> ExecutorBuilder,
    ) -> Fixture {
        let mut registry = Registry::new();
        for t in tools {
            registry.register(t.clone()).unwrap();
        }
        let recorder = Arc::new(Recorder::default());
        let builder = ActionExecutor::builder(registry)
            .policy(self.policy())
            .observer(recorder.clone())
            .governance(governance);
        Fixture {
            executor: Arc::new(configure(builder).build().unwrap()),
            recorder,
        }
    }
}

fn records(store: &SqliteStore, chain: &str) -> Vec<EvidenceRecord> {
    store
        .read_sync(&ChainId::new(chain).unwrap(), None, usize::MAX)
        .unwrap()
}

fn payload(r: &EvidenceRecord) -> Value {
    serde_json::from_str(&r.payload_json).unwrap()
}

/// The records of one operation.
fn of_op<'a>(records: &'a [EvidenceRecord], op: &OperationId) -> Vec<&'a EvidenceRecord> {
    records
        .iter()
        .filter(|r| r.operation_id.as_ref() == Some(op))
        .collect()
}

fn types(records: &[&EvidenceRecord]) -> Vec<RecordType> {
    records.iter().map(|r| r.record_type).collect()
}

fn terminal_of<'a>(records: &'a [EvidenceRecord], op: &OperationId) -> &'a EvidenceRecord {
    let terminals: Vec<_> = of_op(records, op)
        .into_iter()
        .filter(|r| r.record_type.is_terminal())
        .collect();
    assert_eq!(terminals.len(), 1, "exactly one terminal for {op}");
    terminals[0]
}

/// Closes the boundary, reopens the file read-only, verifies and certifies it.
fn close_and_certify(fx: Fixture, gov: &Gov, store: Arc<SqliteStore>, chain: &str) -> Certificate {
    let g = fx.executor.governance().unwrap().clone();
    assert!(
        g.recorder().open_operations().is_empty(),
        "{:?}",
        g.recorder().open_operations()
    );
    rt().block_on(g.recorder().close(CloseDisposition::Completed))
        .unwrap();
    drop(g);
    drop(fx);
    drop(store);
    let reader = SqliteReader::open(gov.path()).unwrap();
    let chain = ChainId::new(chain).unwrap();
    let report = reader.verify(&chain, &Expected::Nothing).unwrap();
    assert!(report.result.valid, "{:?}", report.failure);
    let records = reader.read(&chain, None, usize::MAX).unwrap();
    let head = head_of(records.last().unwrap());
    certify_records(&chain, &records, &head, Timestamp(1)).unwrap()
}

/// `r` names a stored record with that chain hash, and the chain verifies with that record as
/// the expected head (so the reference proves its record against the store).
fn assert_verifies(store: &SqliteStore, r: &EvidenceRef) {
    let record = records(store, r.chain_id.as_str())
        .into_iter()
        .find(|x| x.record_id == r.record_id)
        .unwrap_or_else(|| panic!("{} is not in the store", r.record_id));
    assert_eq!(record.chain_hash, r.chain_hash, "{}", r.record_id);
    let head = |chain_hash| {
        Expected::Head(ChainHead {
            chain_id: r.chain_id.clone(),
            sequence: record.sequence,
            chain_hash,
        })
    };
    let rt = rt();
    let report = rt
        .block_on(store.verify_report(&r.chain_id, &head(r.chain_hash.clone())))
        .unwrap();
    assert!(report.result.valid, "{}: {:?}", r.record_id, report.failure);
    // A reference with another hash does not verify.
    let forged = Digest::of_bytes(b"forged");
    let report = rt
        .block_on(store.verify_report(&r.chain_id, &head(forged)))
        .unwrap();
    assert!(!report.result.valid, "{}", r.record_id);
}

/// The outcome carries exactly the request's receipts, its operation's one terminal record
/// last, and each verifies against the store.
fn assert_carries_terminal(
    store: &SqliteStore,
    report: &ExecutionReport,
    terminal: &EvidenceRecord,
) {
    let carried = report.outcome.evidence();
    assert_eq!(
        carried,
        report.evidence().as_slice(),
        "{:?}",
        report.outcome
    );
    let last = carried
        .last()
        .unwrap_or_else(|| panic!("no evidence: {:?}", report.outcome));
    assert_eq!(
        (&last.record_id, &last.chain_hash),
        (&terminal.record_id, &terminal.chain_hash),
        "{:?}",
        report.outcome
    );
    let terminals: Vec<_> = report
        .receipts
        .iter()
        .filter(|r| r.record_type.is_terminal())
        .collect();
    assert_eq!(terminals.len(), 1, "{:?}", report.receipts);
    for r in carried {
        assert_verifies(store, r);
    }
}

fn run(fx: &Fixture, req: ExecutionRequest) -> ExecutionReport {
    rt().block_on(
        fx.executor
            .execute_reported(req, &context(), ExecuteOptions::new()),
    )
}

// ---------------------------------------------------------------------------------------------
// Profiles
// ---------------------------------------------------------------------------------------------

#[test]
fn the_profile_is_chosen_at_composition_and_never_claims_more_than_it_has() {
    let gov = Gov::new();
    let store = gov.store();
    let registry = || Registry::new();
    let err = |b: ExecutorBuilder| b.build().unwrap_err();
    // `durable` needs a Run state store Warden does not provide; `governed`/`certifiable`
    // need governance; governance contradicting the asked profile is refused.
    assert!(matches!(
        err(ActionExecutor::builder(registry())
            .policy(gov.policy())
            .profile(RuntimeProfile::Durable)),
        ExecutorError::Profile(_)
    ));
    assert!(matches!(
        err(ActionExecutor::builder(registry())
            .policy(gov.policy())
            .profile(RuntimeProfile::Governed)),
        ExecutorError::Profile(_)
    ));
    let g = gov.open(&store, "profiles", RuntimeProfile::Certifiable);
    assert!(matches!(
        err(ActionExecutor::builder(registry())
            .policy(gov.policy())
            .governance(g.clone())
            .profile(RuntimeProfile::Minimal)),
        ExecutorError::Profile(_)
    ));
    // The boundary's policy must be one the executor evaluates.
    let other = Arc::new(SnapshotPolicy::new(snapshot("default = \"allow\"\n")));
    let e = err(ActionExecutor::builder(registry())
        .policy(other)
        .governance(g.clone()));
    assert!(e.to_string().contains("no evaluator"), "{e}");
    // Chosen at composition and carried on every outcome.
    let tools = super::tools();
    let limits = Arc::new(Limits::new().rate_for("null", 1.0, 1).unwrap());
    let fx = gov.executor(&tools, g, |b| {
        b.profile(RuntimeProfile::Certifiable)
            .capacity(limits.clone())
    });
    assert_eq!(fx.executor.profile(), RuntimeProfile::Certifiable);
    let outcomes = [
        run(&fx, request("p-1", "echo", json!({}))).outcome,
        run(&fx, request("p-2", "fail", json!({}))).outcome,
        run(&fx, request("p-3", "bash", json!({"command": "rm -rf /"}))).outcome,
        run(&fx, request("p-4", "deploy", json!({}))).outcome,
        run(&fx, request("p-5", "null", json!({}))).outcome,
        run(&fx, request("p-6", "null", json!({}))).outcome,
        run(&fx, request("p-7", "ambiguous", json!({}))).outcome,
    ];
    let statuses: Vec<_> = outcomes.iter().map(ExecutionOutcome::status).collect();
    assert_eq!(
        statuses,
        [
            "succeeded",
            "failed",
            "denied",
            "escalated",
            "succeeded",
            "deferred",
            "ambiguous"
        ]
    );
    for o in &outcomes {
        assert_eq!(o.profile(), RuntimeProfile::Certifiable, "{o:?}");
    }
    close_and_certify(fx, &gov, store, "profiles");
}

// ---------------------------------------------------------------------------------------------
// The governed stage order
// ---------------------------------------------------------------------------------------------

#[test]
fn a_governed_call_binds_and_starts_before_any_gate_and_closes_once() {
    let gov = Gov::new();
    let store = gov.store();
    let tools = super::tools();
    let fx = gov.executor(
        &tools,
        gov.open(&store, "order", RuntimeProfile::Certifiable),
        |b| b,
    );
    let args = json!({"token": SECRET});
    let report = run(&fx, request("o-1", "echo", args.clone()));
    assert!(report.outcome.is_success(), "{:?}", report.outcome);
    assert_eq!(tool(&tools, "echo").calls(), 1);
    let kinds: Vec<_> = report.receipts.iter().map(|r| r.record_type).collect();
    assert_eq!(
        kinds,
        [
            RecordType::PolicyBound,
            RecordType::OperationStarted,
            RecordType::GateEvaluated,
            RecordType::GateEvaluated,
            RecordType::CallableCompleted,
        ]
    );
    // The outcome carries every receipt as an evidence reference.
    let ExecutionOutcome::Succeeded { evidence, .. } = &report.outcome else {
        panic!()
    };
    assert_eq!(evidence, &report.evidence());
    // What the SQLite file holds, in order: the genesis, then this operation.
    let all = records(&store, "order");
    let op = report.operation_id.clone().unwrap();
    assert_eq!(all.len(), 6);
    assert_eq!(all[0].record_type, RecordType::PolicyBound);
    assert!(
        all[0].operation_id.is_none(),
        "the genesis opens the boundary"
    );
    let ops = of_op(&all, &op);
    assert_eq!(
        types(&ops),
        kinds,
        "policy_bound and operation_started precede the gates"
    );
    for (r, receipt) in ops.iter().zip(&report.receipts) {
        assert_eq!(r.record_id, receipt.receipt.record_id);
        assert_eq!(r.chain_hash, receipt.receipt.chain_hash);
    }
    let started = payload(ops[1]);
    assert_eq!(started["action"], "echo");
    assert_eq!(started["action_version"], "1");
    assert_eq!(started["profile"], "certifiable");
    assert_eq!(started["principal"]["id"], "alice");
    assert_eq!(
        started["arguments_digest"],
        json!(Digest::of_json(&args).unwrap())
    );
    assert_eq!(
        started["policy_digest"],
        json!(gov.snapshot.reference().digest)
    );
    let gates: Vec<Value> = ops[2..4].iter().map(|r| payload(r)).collect();
    assert_eq!(gates[0]["gate"], "precondition.tool");
    assert_eq!(gates[0]["stage"], "preconditions");
    assert_eq!(gates[1]["gate"], "policy");
    assert_eq!(gates[1]["stage"], "authorize");
    assert_eq!(gates[1]["rule"], "echo");
    for g in &gates {
        assert_eq!(
            (g["level"].as_str(), g["verdict"].as_str()),
            (Some("hard"), Some("allow"))
        );
        assert_eq!(g["recheck"], false);
    }
    let done = payload(ops[4]);
    assert_eq!(
        done["result_digest"],
        json!(Digest::of_json(&args).unwrap())
    );
    // Never the raw arguments or result.
    for r in &all {
        assert!(!r.payload_json.contains(SECRET), "{}", r.payload_json);
    }
    // The evidence stages ran, in the fixed order.
    let stages: Vec<_> = fx.recorder.stages_of("o-1");
    assert_eq!(
        stages.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        full_order()
    );
    for stage in [Stage::EvidenceStart, Stage::EvidenceInvoke] {
        assert!(stages.contains(&(stage, StageStatus::Ran)), "{stages:?}");
    }
    let cert = close_and_certify(fx, &gov, store, "order");
    assert_eq!(cert.grade, Grade::Full);
    assert_eq!(cert.gate_summary.operations, 1);
    assert_eq!(cert.gate_summary.terminals.completed, 1);
    // Nothing raw reached the file either.
    for name in ["evidence.db", "evidence.db-wal"] {
        if let Ok(bytes) = std::fs::read(gov.dir.path().join(name)) {
            assert!(
                !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
                "{name} holds the secret"
            );
        }
    }
}

#[test]
fn deferrals_and_containment_denials_happen_before_any_operation_starts() {
    let gov = Gov::new();
    let store = gov.store();
    let tools = super::tools();
    let report = CapabilityReport {
        backend: BackendRef::new("in_process").unwrap(),
        entries: vec![CapabilityEntry {
            capability: Capability::NetworkOff,
            status: CapabilityStatus::Unsupported,
            detail: "in-process".into(),
        }],
    };
    let limits = Arc::new(Limits::new().rate_for("null", 1.0, 1).unwrap());
    let fx = gov.executor(
        &tools,
        gov.open(&store, "preflight", RuntimeProfile::Governed),
        |b| {
            b.backend(report)
                .require_for("echo", Capability::NetworkOff)
                .capacity(limits.clone())
        },
    );
    let contained = run(&fx, request("c-1", "echo", json!({})));
    assert_eq!(reason(&contained.outcome).code, ReasonCode::Containment);
    assert!(contained.operation_id.is_none() && contained.receipts.is_empty());
    assert!(
        run(&fx, request("c-2", "null", json!({})))
            .outcome
            .is_success()
    );
    let before = records(&store, "preflight").len();
    let deferred = run(&fx, request("c-3", "null", json!({})));
    assert_eq!(deferred.outcome.status(), "deferred");
    assert!(deferred.operation_id.is_none() && deferred.receipts.is_empty());
    assert_eq!(
        records(&store, "preflight").len(),
        before,
        "a deferral records nothing"
    );
    let started = records(&store, "preflight")
        .iter()
        .filter(|r| r.record_type == RecordType::OperationStarted)
        .count();
    assert_eq!(started, 1, "only the admitted call opened an operation");
    assert_eq!(tool(&tools, "echo").calls(), 0);
}

// ---------------------------------------------------------------------------------------------
// One terminal per started operation, each lifecycle case
// ---------------------------------------------------------------------------------------------

struct Refusing;
impl Precondition for Refusing {
    fn check(&self, call: &CallView<'_>) -> Result<(), String> {
        if call.arguments.contains_key("forbidden") {
            Err("forbidden argument".into())
        } else {
            Ok(())
        }
    }
}

struct Failing;
#[async_trait]
impl Transform for Failing {
    async fn transform(
        &self,
        call: &CallView<'_>,
    ) -> Result<Option<Map<String, Value>>, HandlerError> {
        if call.arguments.contains_key("break") {
            Err(HandlerError::new("transform broke"))
        } else {
            Ok(None)
        }
    }
}

#[test]
fn every_lifecycle_case_closes_its_operation_with_exactly_one_terminal() {
    let gov = Gov::new();
    let store = gov.store();
    let tools = super::tools();
    let fx = gov.executor(
        &tools,
        gov.open(&store, "gate13", RuntimeProfile::Certifiable),
        |b| {
            b.handlers(
                Handlers::new()
                    .precondition(InterceptorScope::All, Arc::new(Refusing))
                    .transform(
                        InterceptorScope::Actions(vec!["null".into()]),
                        Arc::new(Failing),
                    ),
            )
        },
    );
    let rt = rt();
    let ctx = context();
    let exec = |req: ExecutionRequest, options: ExecuteOptions| {
        rt.block_on(fx.executor.execute_reported(req, &ctx, options))
    };
    let none = ExecuteOptions::new;
    // Cancelled 200 ms into a 5 s call.
    let cancelled_during_the_call = || {
        let cancel = CancelToken::new();
        let c = cancel.clone();
        rt.block_on(async {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                c.cancel();
            });
            fx.executor
                .execute_reported(
                    request("g-8", "slow", json!({})),
                    &ctx,
                    none().cancel(cancel),
                )
                .await
        })
    };
    let in_200_ms = || Timestamp(SystemClock.now().unix_millis() + 200);
    let cases: Vec<(&str, ExecutionReport, RecordType)> = vec![
        (
            "succeeded",
            exec(request("g-1", "echo", json!({})), none()),
            RecordType::CallableCompleted,
        ),
        (
            "failed",
            exec(request("g-2", "fail", json!({})), none()),
            RecordType::CallableFailed,
        ),
        (
            "panicked",
            exec(request("g-3", "panic", json!({})), none()),
            RecordType::CallableFailed,
        ),
        (
            "denied",
            exec(
                request("g-4", "bash", json!({"command": "rm -rf /"})),
                none(),
            ),
            RecordType::OperationDenied,
        ),
        (
            "escalated",
            exec(request("g-5", "deploy", json!({})), none()),
            RecordType::OperationDenied,
        ),
        (
            "precondition",
            exec(request("g-6", "echo", json!({"forbidden": 1})), none()),
            RecordType::OperationDenied,
        ),
        (
            "transform",
            exec(request("g-7", "null", json!({"break": 1})), none()),
            RecordType::OperationDenied,
        ),
        (
            "cancelled",
            cancelled_during_the_call(),
            RecordType::OperationCancelled,
        ),
        (
            "timed_out",
            exec(
                request("g-9", "slow", json!({})).with_deadline(in_200_ms()),
                none(),
            ),
            RecordType::OperationTimedOut,
        ),
        (
            "ambiguous",
            exec(request("g-10", "ambiguous", json!({})), none()),
            RecordType::ExternalResultAmbiguous,
        ),
    ];
    let all = records(&store, "gate13");
    for (name, report, want) in &cases {
        let op = report
            .operation_id
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: no operation"));
        let terminal = terminal_of(&all, op);
        assert_eq!(terminal.record_type, *want, "{name}: {:?}", report.outcome);
        assert_eq!(
            report.receipts.last().map(|r| r.record_type),
            Some(*want),
            "{name}: the report ends with the terminal"
        );
        // Every outcome, cancelled, timed out and ambiguous included, carries the receipt of
        // its one terminal record, and it verifies against the store.
        assert_carries_terminal(&store, report, terminal);
        let p = payload(terminal);
        match *name {
            "failed" | "panicked" | "cancelled" | "timed_out" => {
                assert_eq!(p["call_executed"], true, "{name}: {p}");
                assert_eq!(report.outcome.call_executed(), Some(true), "{name}");
            }
            "denied" | "precondition" => {
                assert_eq!(p["disposition"], "deny");
                assert_eq!(p["evaluator"], "reducer", "{name}: a recorded gate decided");
                let gate = p["deciding_gate_record_id"].as_str().unwrap();
                let gate = all.iter().find(|r| r.record_id.as_str() == gate).unwrap();
                assert_eq!(payload(gate)["verdict"], "deny");
                assert_eq!(payload(gate)["level"], "hard");
            }
            "escalated" => {
                let ExecutionOutcome::Escalated {
                    approval, evidence, ..
                } = &report.outcome
                else {
                    panic!("{:?}", report.outcome)
                };
                assert_eq!(p["disposition"], "escalate");
                assert_eq!(p["approval_id"], json!(approval.approval_id));
                assert_eq!(p["authority"], json!(approval.authority));
                assert_eq!(evidence, &report.evidence());
            }
            "transform" => {
                assert_eq!(p["disposition"], "deny");
                assert_eq!(p["evaluator"], "transform");
                assert_eq!(p["reason_code"], "transform");
            }
            "ambiguous" => assert_eq!(p["cause"], "transport_lost"),
            _ => {}
        }
    }
    assert_eq!(tool(&tools, "slow").calls(), 2, "both slow calls began");
    // A request cancelled before it started never opens an operation.
    let pre = CancelToken::new();
    pre.cancel();
    let report = exec(request("g-11", "echo", json!({})), none().cancel(pre));
    assert_eq!(report.outcome.status(), "cancelled");
    assert!(report.operation_id.is_none());
    let cert = close_and_certify(fx, &gov, store, "gate13");
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
        (1, 2, 4, 1, 1, 1)
    );
    assert_eq!(cert.gate_summary.operations, 10);
}

// ---------------------------------------------------------------------------------------------
// The reducer: hard, soft and advisory gates; exceptions
// ---------------------------------------------------------------------------------------------

struct Objects(&'static str, bool);
#[async_trait]
impl SecurityHook for Objects {
    fn name(&self) -> &str {
        self.0
    }
    async fn check(&self, _: &CallView<'_>) -> Result<SecurityVerdict, HandlerError> {
        Ok(if self.1 {
            SecurityVerdict::Escalate {
                reason: DecisionReason::new(ReasonCode::Permission, format!("{} asks", self.0)),
                authority: "reviewer".into(),
            }
        } else {
            SecurityVerdict::Deny {
                reason: DecisionReason::new(ReasonCode::Permission, format!("{} objects", self.0)),
                stop: false,
            }
        })
    }
}

fn levelled() -> Handlers {
    Handlers::new()
        .security_at(
            InterceptorScope::Actions(vec!["echo".into()]),
            Arc::new(Objects("lint", false)),
            GateLevel::Advisory,
        )
        .security_at(
            InterceptorScope::Actions(vec!["null".into()]),
            Arc::new(Objects("budget", false)),
            GateLevel::Soft,
        )
}

#[test]
fn the_reducer_weighs_hard_soft_and_advisory_gates_and_exceptions_degrade() {
    let gov = Gov::new();
    let store = gov.store();
    let tools = super::tools();
    // Without an exception: the advisory deny lets the call through, the soft deny denies.
    let fx = gov.executor(
        &tools,
        gov.open(&store, "levels", RuntimeProfile::Certifiable),
        |b| b.handlers(levelled()),
    );
    let advisory = run(&fx, request("l-1", "echo", json!({})));
    assert!(advisory.outcome.is_success(), "{:?}", advisory.outcome);
    let soft = run(&fx, request("l-2", "null", json!({})));
    assert_eq!(soft.outcome.status(), "denied");
    assert_eq!(tool(&tools, "null").calls(), 0);
    let all = records(&store, "levels");
    let gate = |op: &OperationId, name: &str| {
        of_op(&all, op)
            .into_iter()
            .map(payload)
            .find(|p| p["gate"] == name)
            .unwrap()
    };
    let lint = gate(advisory.operation_id.as_ref().unwrap(), "lint");
    assert_eq!(
        (lint["level"].as_str(), lint["verdict"].as_str()),
        (Some("advisory"), Some("deny"))
    );
    let done = payload(terminal_of(&all, advisory.operation_id.as_ref().unwrap()));
    assert_eq!(done["advisory_denials"], 1);
    assert_eq!(done["degraded"], false);
    let budget = gate(soft.operation_id.as_ref().unwrap(), "budget");
    assert_eq!(
        (budget["level"].as_str(), budget["verdict"].as_str()),
        (Some("soft"), Some("deny"))
    );
    let denied = terminal_of(&all, soft.operation_id.as_ref().unwrap());
    assert_eq!(payload(denied)["evaluator"], "reducer");
    let cert = close_and_certify(fx, &gov, store, "levels");
    assert_eq!(cert.grade, Grade::Full, "no exception: full grade");
    assert_eq!(cert.gate_summary.advisory_denies, 1);
    assert_eq!(cert.gate_summary.soft_denies, 1);

    // With recorded exceptions: the soft deny (a hook's, and the policy's `ask`) is let
    // through, `exception_granted` names it, and the certificate is degraded for good.
    let gov = Gov::new();
    let store = gov.store();
    let tools = super::tools();
    let governance = gov
        .open(&store, "excepted", RuntimeProfile::Certifiable)
        .exception(Exception::new("ex-budget", "finance", "null").for_gate("budget"))
        .exception(
            Exception::new("ex-deploy", "release-manager", "deploy")
                .for_gate("policy")
                .for_arguments(Digest::of_json(&json!({"env": "staging"})).unwrap()),
        );
    let fx = gov.executor(&tools, governance, |b| b.handlers(levelled()));
    let excepted = run(&fx, request("x-1", "null", json!({})));
    assert!(excepted.outcome.is_success(), "{:?}", excepted.outcome);
    let staging = run(&fx, request("x-2", "deploy", json!({"env": "staging"})));
    assert!(staging.outcome.is_success(), "{:?}", staging.outcome);
    // The exception covers exactly its arguments.
    let prod = run(&fx, request("x-3", "deploy", json!({"env": "prod"})));
    assert_eq!(prod.outcome.status(), "escalated");
    assert_eq!(tool(&tools, "deploy").calls(), 1);
    let all = records(&store, "excepted");
    for (report, exception) in [(&excepted, "ex-budget"), (&staging, "ex-deploy")] {
        let op = report.operation_id.as_ref().unwrap();
        let ops = of_op(&all, op);
        let soft = ops
            .iter()
            .find(|r| r.record_type == RecordType::GateEvaluated && payload(r)["level"] == "soft")
            .unwrap();
        assert_eq!(payload(soft)["verdict"], "deny");
        let grant = ops
            .iter()
            .find(|r| r.record_type == RecordType::ExceptionGranted)
            .unwrap();
        assert_eq!(payload(grant)["gate_record_id"], json!(soft.record_id));
        assert_eq!(payload(grant)["exception_id"], exception);
        assert_eq!(payload(terminal_of(&all, op))["degraded"], true);
        assert!(
            report
                .receipts
                .iter()
                .any(|r| r.record_type == RecordType::ExceptionGranted)
        );
    }
    let cert = close_and_certify(fx, &gov, store, "excepted");
    assert_eq!(cert.grade, Grade::Degraded);
    assert_eq!(cert.gate_summary.exceptions, 2);

    // The levels hold in the minimal profile too (without evidence, without exceptions).
    let tools = super::tools();
    let fx = build(&tools, |b| b.handlers(levelled()));
    let rt = rt();
    assert!(
        rt.block_on(
            fx.executor
                .execute(request("m-1", "echo", json!({})), &context())
        )
        .is_success()
    );
    assert_eq!(
        rt.block_on(
            fx.executor
                .execute(request("m-2", "null", json!({})), &context())
        )
        .status(),
        "denied"
    );
}

// ---------------------------------------------------------------------------------------------
// Escalation, approvals: a new operation, single use made durable by the store
// ---------------------------------------------------------------------------------------------

fn approval_of(o: &ExecutionOutcome) -> ApprovalRequest {
    match o {
        ExecutionOutcome::Escalated { approval, .. } => approval.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_approval_is_a_new_operation_and_its_receipt_is_used_once_even_after_a_restart() {
    let gov = Gov::new();
    let store = gov.store();
    let tools = super::tools();
    let fx = gov.executor(
        &tools,
        gov.open(&store, "approvals", RuntimeProfile::Certifiable),
        |b| b,
    );
    let rt = rt();
    let ctx = context();
    let args = json!({"command": "git push origin main"});
    let keyed = |id: &str| {
        request(id, "bash", args.clone())
            .with_idempotency_key("push-1")
            .unwrap()
    };
    let escalated = rt.block_on(fx.executor.execute_reported(
        keyed("a-1"),
        &ctx,
        ExecuteOptions::new(),
    ));
    let approval = approval_of(&escalated.outcome);
    let receipt = receipt_for(&approval, approval.arguments_digest.clone(), 60_000);
    let with = || ExecuteOptions::new().approval(receipt.clone());
    // The approved attempt: a new request id, a new operation bound to the receipt. Its
    // idempotency key is scoped to the approval, so the escalation does not replay it.
    let approved = rt.block_on(fx.executor.execute_reported(keyed("a-2"), &ctx, with()));
    assert!(approved.outcome.is_success(), "{:?}", approved.outcome);
    assert_eq!(tool(&tools, "bash").calls(), 1);
    assert_ne!(approved.operation_id, escalated.operation_id);
    let all = records(&store, "approvals");
    let op = approved.operation_id.clone().unwrap();
    let ops = of_op(&all, &op);
    let started = payload(
        ops.iter()
            .find(|r| r.record_type == RecordType::OperationStarted)
            .unwrap(),
    );
    assert_eq!(started["approval_id"], json!(approval.approval_id));
    assert_eq!(started["attempt"], 2);
    let policy_gate = ops
        .iter()
        .map(|r| payload(r))
        .find(|p| p["gate"] == "policy")
        .unwrap();
    assert_eq!(
        (
            policy_gate["level"].as_str(),
            policy_gate["verdict"].as_str(),
            policy_gate["reason_code"].as_str()
        ),
        (Some("soft"), Some("allow"), Some("approved"))
    );
    // The escalated operation's record is untouched: still denied (escalate).
    let first = terminal_of(&all, escalated.operation_id.as_ref().unwrap());
    assert_eq!(payload(first)["disposition"], "escalate");
    // Durable single use: the executor-side API answers which operation consumed it.
    let used = rt
        .block_on(fx.executor.approval_use(&approval.approval_id))
        .unwrap()
        .unwrap();
    assert_eq!(used.operation_id, op);
    // A repeat of the approved attempt (same key, same receipt) replays it: nothing runs.
    let again = rt.block_on(fx.executor.execute_reported(keyed("a-3"), &ctx, with()));
    assert_eq!(again.replay_of.as_ref().map(|r| &r.operation_id), Some(&op));
    assert_eq!(again.outcome, approved.outcome, "the recorded outcome");
    // The same receipt on another request: refused (escalated again), nothing runs.
    let reuse = rt.block_on(fx.executor.execute_reported(
        request("a-4", "bash", args.clone()),
        &ctx,
        with(),
    ));
    assert_eq!(reuse.outcome.status(), "escalated");
    assert!(
        reason(&reuse.outcome).message.contains("already used"),
        "{:?}",
        reuse.outcome
    );
    assert_eq!(tool(&tools, "bash").calls(), 1);
    close_and_certify(fx, &gov, store, "approvals");

    // After a restart (a fresh executor and boundary, nothing in memory), the store still
    // refuses the receipt.
    let store = gov.store();
    let tools = super::tools();
    let fx = gov.executor(
        &tools,
        gov.open(&store, "approvals-2", RuntimeProfile::Certifiable),
        |b| b,
    );
    assert!(!fx.executor.approval_used_here(&approval.approval_id));
    let after = rt.block_on(fx.executor.execute_reported(
        request("a-5", "bash", args.clone()),
        &ctx,
        with(),
    ));
    assert_eq!(after.outcome.status(), "escalated");
    assert!(
        reason(&after.outcome)
            .message
            .contains(&format!("already used by operation {op}")),
        "{:?}",
        after.outcome
    );
    assert_eq!(tool(&tools, "bash").calls(), 0);
    close_and_certify(fx, &gov, store, "approvals-2");
}

#[test]
fn the_review_loop_runs_the_approved_attempt_as_a_new_governed_operation() {
    let gov = Gov::new();
    let store = gov.store();
    let tools = super::tools();
    let fx = gov.executor(
        &tools,
        gov.open(&store, "review", RuntimeProfile::Certifiable),
        |b| b,
    );
    let rt = rt();
    let req = request("v-1", "deploy", json!({"env": "prod"}));
    let escalated = rt.block_on(fx.executor.execute(req.clone(), &context()));
    let review = ReviewLoop::new(Arc::new(Approver::new()));
    let done = rt
        .block_on(review.resolve(&fx.executor, &req, &context(), &escalated))
        .unwrap();
    assert!(done.is_success(), "{done:?}");
    let all = records(&store, "review");
    let started: Vec<_> = all
        .iter()
        .filter(|r| r.record_type == RecordType::OperationStarted)
        .map(payload)
        .collect();
    assert_eq!(started.len(), 2, "the approval is a new operation");
    assert!(started[0].get("approval_id").is_none());
    assert_eq!(
        started[1]["approval_id"],
        json!(approval_of(&escalated).approval_id)
    );
    close_and_certify(fx, &gov, store, "review");
}

// ---------------------------------------------------------------------------------------------
// Durable idempotency
// ---------------------------------------------------------------------------------------------

#[test]
fn idempotency_keys_replay_the_recorded_outcome_also_after_a_restart() {
    let gov = Gov::new();
    let rt = rt();
    let keyed = |id: &str, action: &str, args: Value, key: &str| {
        request(id, action, args).with_idempotency_key(key).unwrap()
    };
    let (first, denied, first_op) = {
        let store = gov.store();
        let tools = super::tools();
        let fx = gov.executor(
            &tools,
            gov.open(&store, "idem-1", RuntimeProfile::Certifiable),
            |b| b,
        );
        let first = run(&fx, keyed("i-1", "echo", json!({"n": 1}), "k-echo"));
        assert!(first.outcome.is_success());
        // In this process: the full recorded outcome (the result included), nothing runs.
        let again = run(&fx, keyed("i-2", "echo", json!({"n": 1}), "k-echo"));
        assert_eq!(again.outcome, first.outcome);
        assert_eq!(
            again.replay_of.as_ref().map(|r| &r.operation_id),
            first.operation_id.as_ref()
        );
        assert!(again.operation_id.is_none() && again.receipts.is_empty());
        // A denial is recorded under its key too.
        let denied = run(
            &fx,
            keyed("i-3", "bash", json!({"command": "rm x"}), "k-rm"),
        );
        assert_eq!(denied.outcome.status(), "denied");
        // The same key with other arguments: refused before anything starts.
        let other = run(&fx, keyed("i-4", "echo", json!({"n": 2}), "k-echo"));
        assert_eq!(reason(&other.outcome).code, ReasonCode::InvalidArguments);
        assert!(other.operation_id.is_none());
        // In flight: a concurrent duplicate is deferred, never run twice.
        let cancel = CancelToken::new();
        let ex = fx.executor.clone();
        let c = cancel.clone();
        let second = rt.block_on(async move {
            let running = ex.clone();
            let first = tokio::spawn(async move {
                running
                    .execute_with(
                        request("i-5", "slow", json!({}))
                            .with_idempotency_key("k-slow")
                            .unwrap(),
                        &context(),
                        ExecuteOptions::new().cancel(c),
                    )
                    .await
            });
            tokio::time::sleep(Duration::from_millis(100)).await;
            let second = ex
                .execute(
                    request("i-6", "slow", json!({}))
                        .with_idempotency_key("k-slow")
                        .unwrap(),
                    &context(),
                )
                .await;
            cancel.cancel();
            (second, first.await.unwrap())
        });
        assert_eq!(second.0.status(), "deferred", "{:?}", second.0);
        assert_eq!(second.1.status(), "cancelled");
        assert_eq!(tool(&tools, "echo").calls(), 1);
        assert_eq!(tool(&tools, "slow").calls(), 1);
        let op = first.operation_id.clone().unwrap();
        close_and_certify(fx, &gov, store, "idem-1");
        (first, denied, op)
    };
    // A restart: a new process's executor, a new boundary on the same store, nothing in
    // memory. The keys still name the recorded operations; nothing runs again.
    let store = gov.store();
    let tools = super::tools();
    let fx = gov.executor(
        &tools,
        gov.open(&store, "idem-2", RuntimeProfile::Certifiable),
        |b| b,
    );
    let replay = run(&fx, keyed("i-7", "echo", json!({"n": 1}), "k-echo"));
    assert_eq!(
        replay.replay_of.as_ref().map(|r| &r.operation_id),
        Some(&first_op)
    );
    match &replay.outcome {
        ExecutionOutcome::Failed {
            failure,
            call_executed,
            evidence,
            ..
        } => {
            assert_eq!(failure.kind, "idempotent_replay");
            assert!(*call_executed, "the call ran once, before the restart");
            let ExecutionOutcome::Succeeded { result, .. } = &first.outcome else {
                panic!()
            };
            assert!(
                failure
                    .message
                    .contains(&Digest::of_json(result).unwrap().to_string())
            );
            // The reference is the first run's terminal record.
            assert_eq!(evidence.len(), 1);
            assert_eq!(
                evidence[0].record_id,
                first.receipts.last().unwrap().receipt.record_id
            );
        }
        other => panic!("{other:?}"),
    }
    let denied_again = run(
        &fx,
        keyed("i-8", "bash", json!({"command": "rm x"}), "k-rm"),
    );
    assert_eq!(denied_again.outcome.status(), "denied");
    assert_eq!(
        reason(&denied_again.outcome).code,
        reason(&denied.outcome).code
    );
    assert_eq!(
        tool(&tools, "echo").calls() + tool(&tools, "bash").calls(),
        0
    );
    assert!(
        records(&store, "idem-2").len() == 1,
        "replays open no operation"
    );
    close_and_certify(fx, &gov, store, "idem-2");
}

// ---------------------------------------------------------------------------------------------
// Concurrency: cancellations and deadlines never leave an operation open
// ---------------------------------------------------------------------------------------------

#[test]
fn concurrent_governed_calls_with_cancellations_and_deadlines_each_close_exactly_once() {
    let gov = Gov::new();
    let store = gov.store();
    let mut tools = tools();
    tools.push(TestTool::new("quick", Behaviour::Slow(20)));
    let fx = gov.executor(
        &tools,
        gov.open(&store, "race", RuntimeProfile::Certifiable),
        |b| b,
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let outcomes = rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..48u64 {
            let ex = fx.executor.clone();
            tasks.push(tokio::spawn(async move {
                let (action, args) = match i % 6 {
                    0 => ("echo", json!({"i": i})),
                    1 => ("quick", json!({})),
                    2 => ("fail", json!({})),
                    3 => ("deploy", json!({})),
                    4 => ("bash", json!({"command": "rm x"})),
                    _ => ("quick", json!({})),
                };
                let mut req = request(&format!("race-{i}"), action, args);
                let cancel = CancelToken::new();
                if i % 4 == 1 {
                    req = req.with_deadline(Timestamp(SystemClock.now().unix_millis() + i % 7 * 3));
                }
                if i % 4 == 2 {
                    let c = cancel.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(i % 5 * 4)).await;
                        c.cancel();
                    });
                }
                ex.execute_reported(req, &context(), ExecuteOptions::new().cancel(cancel))
                    .await
            }));
        }
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    });
    let all = records(&store, "race");
    for r in &outcomes {
        assert!(r.evidence_error.is_none(), "{:?}", r.evidence_error);
        if let Some(op) = &r.operation_id {
            let t = terminal_of(&all, op);
            let last = r.outcome.evidence().last().map(|e| &e.record_id);
            assert_eq!(last, Some(&t.record_id), "{:?}", r.outcome);
            let want = warden_evidence::terminal_for_outcome(&r.outcome).unwrap();
            assert_eq!(t.record_type, want, "{:?}", r.outcome);
            if let Some(executed) = r.outcome.call_executed()
                && matches!(
                    t.record_type,
                    RecordType::OperationCancelled | RecordType::OperationTimedOut
                )
            {
                assert_eq!(payload(t)["call_executed"], executed, "{:?}", r.outcome);
            }
        }
    }
    drop(rt);
    let cert = close_and_certify(fx, &gov, store, "race");
    assert_eq!(
        cert.gate_summary.operations,
        outcomes.iter().filter(|r| r.operation_id.is_some()).count() as u64
    );
}

// ---------------------------------------------------------------------------------------------
// Cancelled, timed out and ambiguous outcomes carry their evidence
// ---------------------------------------------------------------------------------------------

/// A security hook that takes its time (so a deadline or a cancellation lands before the call).
struct Sluggish;
#[async_trait]
impl SecurityHook for Sluggish {
    fn name(&self) -> &str {
        "sluggish"
    }
    async fn check(&self, _: &CallView<'_>) -> Result<SecurityVerdict, HandlerError> {
        tokio::time::sleep(Duration::from_secs(2)).await;
        Ok(SecurityVerdict::Pass)
    }
}

#[test]
fn cancelled_timed_out_and_ambiguous_outcomes_carry_their_terminal_receipt_before_during_and_on_replay()
 {
    let gov = Gov::new();
    let store = gov.store();
    let tools = super::tools();
    let fx = gov.executor(
        &tools,
        gov.open(&store, "carry", RuntimeProfile::Governed),
        |b| {
            b.handlers(Handlers::new().security(
                InterceptorScope::Actions(vec!["null".into()]),
                Arc::new(Sluggish),
            ))
        },
    );
    let rt = rt();
    let ctx = context();
    // Long enough for the pre-call appends (each an fsync), well before the 2 s hook or the
    // 5 s call ends.
    let soon = || Timestamp(SystemClock.now().unix_millis() + 1_000);
    let cancel_soon = || {
        let cancel = CancelToken::new();
        let c = cancel.clone();
        rt.spawn(async move {
            tokio::time::sleep(Duration::from_millis(1_000)).await;
            c.cancel();
        });
        cancel
    };
    // `null` is allowed by the hook only after 2 s: a 1 s deadline or cancellation ends it
    // before its call; `slow` runs 5 s: they end it during the call.
    #[derive(Clone, Copy)]
    enum End {
        Deadline,
        Cancel,
        Itself,
    }
    // (name, request, what ends it, status, terminal, call_executed)
    type Case = (
        &'static str,
        ExecutionRequest,
        End,
        &'static str,
        RecordType,
        Option<bool>,
    );
    let cases: Vec<Case> = vec![
        (
            "timed out before the call",
            request("c-1", "null", json!({})),
            End::Deadline,
            "timed_out",
            RecordType::OperationTimedOut,
            Some(false),
        ),
        (
            "cancelled before the call",
            request("c-2", "null", json!({})),
            End::Cancel,
            "cancelled",
            RecordType::OperationCancelled,
            Some(false),
        ),
        (
            "timed out during the call",
            request("c-3", "slow", json!({}))
                .with_idempotency_key("key-timed-out")
                .unwrap(),
            End::Deadline,
            "timed_out",
            RecordType::OperationTimedOut,
            Some(true),
        ),
        (
            "cancelled during the call",
            request("c-4", "slow", json!({"n": 1}))
                .with_idempotency_key("key-cancelled")
                .unwrap(),
            End::Cancel,
            "cancelled",
            RecordType::OperationCancelled,
            Some(true),
        ),
        (
            "ambiguous",
            request("c-5", "ambiguous", json!({}))
                .with_idempotency_key("key-ambiguous")
                .unwrap(),
            End::Itself,
            "ambiguous",
            RecordType::ExternalResultAmbiguous,
            None,
        ),
    ];
    let mut replays = Vec::new();
    for (name, req, end, status, want, executed) in cases {
        let (req, options) = match end {
            End::Deadline => (req.with_deadline(soon()), ExecuteOptions::new()),
            End::Cancel => (req, ExecuteOptions::new().cancel(cancel_soon())),
            End::Itself => (req, ExecuteOptions::new()),
        };
        let key = req.idempotency_key().map(str::to_owned);
        let action = req.action().name().to_owned();
        let arguments = Value::Object(req.arguments().clone());
        let report = rt.block_on(fx.executor.execute_reported(req, &ctx, options));
        assert_eq!(
            report.outcome.status(),
            status,
            "{name}: {:?}",
            report.outcome
        );
        assert_eq!(report.outcome.call_executed(), executed, "{name}");
        assert_eq!(report.outcome.profile(), RuntimeProfile::Governed, "{name}");
        let op = report.operation_id.clone().unwrap();
        let all = records(&store, "carry");
        let terminal = terminal_of(&all, &op);
        assert_eq!(terminal.record_type, want, "{name}");
        assert_carries_terminal(&store, &report, terminal);
        // The wire form names the references.
        let json = serde_json::to_value(&report.outcome).unwrap();
        assert_eq!(
            json["evidence"].as_array().map(Vec::len),
            Some(report.receipts.len()),
            "{name}: {json}"
        );
        if let Some(key) = key {
            replays.push((name, key, action, arguments, status, terminal.clone()));
        }
    }
    // A repeated idempotency key answers with the same status, carrying the replayed
    // operation's terminal record last; nothing runs again. In this process the executor
    // answers with the outcome it returned; after a restart, from the record alone (which
    // names just the terminal).
    let slow_calls = tool(&tools, "slow").calls();
    let replay = |fx: &Fixture, restarted: bool| {
        for (i, (name, key, action, arguments, status, terminal)) in replays.iter().enumerate() {
            let req = request(
                &format!("c-replay-{restarted}-{i}"),
                action,
                arguments.clone(),
            )
            .with_idempotency_key(key)
            .unwrap();
            let report = run(fx, req);
            assert!(report.replay_of.is_some(), "{name}: {:?}", report.outcome);
            assert_eq!(report.outcome.status(), *status, "{name}");
            let carried = report.outcome.evidence();
            let last = carried.last().unwrap();
            assert_eq!(last.record_id, terminal.record_id, "{name}");
            if restarted {
                assert_eq!(carried.len(), 1, "{name}: {:?}", report.outcome);
            }
            for r in carried {
                assert_verifies(&store, r);
            }
        }
    };
    replay(&fx, false);
    drop(fx);
    let (governance, recovered) = rt
        .block_on(Governance::resume(
            store.clone(),
            ChainId::new("carry").unwrap(),
            RuntimeProfile::Governed,
            Arc::new(warden_evidence::FixedClock::new(1_700_000_100_000)),
        ))
        .unwrap();
    assert!(recovered.is_empty());
    let fx = gov.executor(&tools, governance, |b| b);
    replay(&fx, true);
    assert_eq!(
        tool(&tools, "slow").calls(),
        slow_calls,
        "replays never run"
    );
    assert_eq!(tool(&tools, "null").calls(), 0, "never reached");
    let cert = close_and_certify(fx, &gov, store, "carry");
    let t = cert.gate_summary.terminals;
    assert_eq!((t.cancelled, t.timed_out, t.ambiguous), (2, 2, 1));
}

// --------------------------------------------------------------------------------------------- A
// started operation whose start was not acknowledged (evidence before the call: a failed pre-call
// append makes the callable unreachable; every started operation has exactly one terminal record)
// ---------------------------------------------------------------------------------------------

/// What the wrapped store does to one append.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// Commit it, then report an error (the acknowledgement is lost).
    AckLost,
    /// Refuse it (nothing is stored).
    Refuse,
}

/// A store that fails chosen appends (counted from 1 over the store's life).
struct Faulty {
    inner: Arc<SqliteStore>,
    faults: Vec<(usize, Fault)>,
    count: AtomicUsize,
}

impl Faulty {
    fn new(inner: Arc<SqliteStore>, faults: Vec<(usize, Fault)>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            faults,
            count: AtomicUsize::new(0),
        })
    }
}

#[async_trait]
impl EvidenceStore for Faulty {
    async fn append(&self, entry: EvidenceAppend) -> Result<AppendReceipt, EvidenceError> {
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        let fault = self.faults.iter().find(|(k, _)| *k == n).map(|(_, f)| *f);
        match fault {
            None => self.inner.append(entry).await,
            Some(Fault::Refuse) => Err(EvidenceError::Unavailable {
                message: format!("disk full at append {n}"),
            }),
            Some(Fault::AckLost) => {
                self.inner.append(entry).await?;
                Err(EvidenceError::Unavailable {
                    message: format!("connection lost after append {n} committed"),
                })
            }
        }
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
impl GovernedStore for Faulty {
    fn append_typed(
        &self,
        append: warden_evidence::TypedAppend,
        expected_sequence: u64,
    ) -> warden_evidence::AppendFuture<'_> {
        self.append(append.into_append(expected_sequence))
    }
    async fn chains(&self) -> Result<Vec<ChainId>, EvidenceError> {
        self.inner.chains().await
    }
    async fn find_idempotency_key(
        &self,
        k: &Digest,
    ) -> Result<Option<warden_evidence::OperationRef>, EvidenceError> {
        self.inner.find_idempotency_key(k).await
    }
    async fn find_approval_use(
        &self,
        a: &ApprovalId,
    ) -> Result<Option<warden_evidence::OperationRef>, EvidenceError> {
        self.inner.find_approval_use(a).await
    }
    async fn verify_report(
        &self,
        c: &ChainId,
        e: &Expected,
    ) -> Result<warden_evidence::Report, EvidenceError> {
        self.inner.verify_report(c, e).await
    }
}

impl Gov {
    /// A boundary opened on `store` (appends count from its genesis).
    fn open_on(&self, store: Arc<dyn GovernedStore>, chain: &str) -> Governance {
        rt().block_on(Governance::open(
            store,
            self.binding(chain, RuntimeProfile::Certifiable),
            &self.bytes(),
            Arc::new(warden_evidence::FixedClock::new(1_700_000_000_000)),
        ))
        .unwrap()
    }
}

/// Checks a report for a request whose `operation_started` (append 3 of a fresh boundary) was
/// stored but not acknowledged: denied for evidence, nothing ran, the started operation named.
fn assert_unacknowledged(report: &ExecutionReport) -> OperationId {
    let ExecutionOutcome::Denied {
        reason, evaluator, ..
    } = &report.outcome
    else {
        panic!("{:?}", report.outcome)
    };
    assert_eq!(reason.code, ReasonCode::Evidence, "{reason:?}");
    assert_eq!(evaluator, "evidence");
    assert_eq!(report.outcome.call_executed(), Some(false));
    let error = report.evidence_error.as_ref().unwrap();
    assert!(!error.call_executed(), "{error}");
    let GovernanceError::StartedUnacknowledged { started, .. } = error else {
        panic!("{error:?}")
    };
    let op = report.operation_id.clone().unwrap();
    assert_eq!(started.operation_id, op);
    assert_eq!(
        report.receipts[..2]
            .iter()
            .map(|r| (r.record_type, r.receipt.clone()))
            .collect::<Vec<_>>(),
        [
            (RecordType::PolicyBound, started.policy_bound.clone()),
            (RecordType::OperationStarted, started.started.clone()),
        ]
    );
    op
}

#[test]
fn an_unacknowledged_start_never_runs_the_callable_and_is_closed_by_the_executor() {
    let gov = Gov::new();
    let sqlite = gov.store();
    // Appends: 1 genesis, 2 policy_bound, 3 operation_started (stored, acknowledgement lost).
    let faulty = Faulty::new(sqlite.clone(), vec![(3, Fault::AckLost)]);
    let tools = super::tools();
    let fx = gov.executor(&tools, gov.open_on(faulty, "unack"), |b| b);
    let req = request("u-1", "echo", json!({"x": 1}))
        .with_idempotency_key("unack-key")
        .unwrap();
    let report = run(&fx, req.clone());
    let op = assert_unacknowledged(&report);
    assert_eq!(tool(&tools, "echo").calls(), 0, "the callable never ran");
    // The executor closed the started operation with its one terminal: denied, no gate, by
    // the evidence failure; the outcome carries it.
    let all = records(&sqlite, "unack");
    assert_eq!(
        types(&of_op(&all, &op)),
        [
            RecordType::PolicyBound,
            RecordType::OperationStarted,
            RecordType::OperationDenied
        ]
    );
    let terminal = terminal_of(&all, &op);
    let p = payload(terminal);
    assert_eq!(
        (&p["evaluator"], &p["reason_code"], &p["gates_evaluated"]),
        (&json!("evidence"), &json!("evidence"), &json!(0)),
        "{p}"
    );
    assert_carries_terminal(&sqlite, &report, terminal);
    let recorder = fx.executor.governance().unwrap().recorder().clone();
    assert!(recorder.open_operations().is_empty());
    assert!(
        recorder.take_unacknowledged(&op).is_none(),
        "already closed"
    );
    // The key is bound to the durable, denied operation: a retry answers from it and never runs.
    let mut retry = request("u-2", "echo", json!({"x": 1}));
    retry = retry.with_idempotency_key("unack-key").unwrap();
    let replayed = run(&fx, retry);
    assert_eq!(
        replayed.outcome.status(),
        "denied",
        "{:?}",
        replayed.outcome
    );
    assert_eq!(
        replayed.replay_of.as_ref().map(|r| &r.operation_id),
        Some(&op)
    );
    // The boundary goes on: the next call runs, and the task certifies (FULL: the operation
    // was faithfully denied).
    let ok = run(&fx, request("u-3", "echo", json!({"x": 2})));
    assert!(ok.outcome.is_success(), "{:?}", ok.outcome);
    assert_eq!(tool(&tools, "echo").calls(), 1);
    let cert = close_and_certify(fx, &gov, sqlite, "unack");
    assert_eq!(cert.grade, Grade::Full);
    assert_eq!(cert.gate_summary.operations, 2);
    assert_eq!(cert.gate_summary.terminals.denied, 1);
    assert_eq!(cert.gate_summary.terminals.completed, 1);
}

#[test]
fn an_unacknowledged_start_whose_close_fails_too_is_closed_by_recovery_and_certifies() {
    let gov = Gov::new();
    let sqlite = gov.store();
    // 3: operation_started stored, acknowledgement lost; 4: the closing operation_denied is
    // refused. The operation stays open, the boundary cannot close, and start-up recovery
    // closes it.
    let faulty = Faulty::new(
        sqlite.clone(),
        vec![(3, Fault::AckLost), (4, Fault::Refuse)],
    );
    let tools = super::tools();
    let fx = gov.executor(&tools, gov.open_on(faulty, "unack-rec"), |b| b);
    let report = run(&fx, request("v-1", "echo", json!({})));
    let op = assert_unacknowledged(&report);
    assert_eq!(tool(&tools, "echo").calls(), 0, "the callable never ran");
    assert_eq!(
        report.receipts.len(),
        2,
        "no terminal receipt: {:?}",
        report.receipts
    );
    let recorder = fx.executor.governance().unwrap().recorder().clone();
    assert_eq!(recorder.open_operations(), std::slice::from_ref(&op));
    let refused = rt().block_on(recorder.close(CloseDisposition::Completed));
    assert!(
        matches!(&refused, Err(GovernanceError::OpenOperations { operations }) if operations == std::slice::from_ref(&op)),
        "{refused:?}"
    );
    drop(recorder);
    drop(fx);
    // Restart on the real store: resume verifies the chain and recovery closes the operation
    // (no gate was recorded, so no permit can have existed: cancelled, not executed).
    let store: Arc<dyn GovernedStore> = sqlite.clone();
    let (governance, recovered) = rt()
        .block_on(Governance::resume(
            store,
            ChainId::new("unack-rec").unwrap(),
            RuntimeProfile::Certifiable,
            Arc::new(warden_evidence::FixedClock::new(1_700_000_100_000)),
        ))
        .unwrap();
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].operation_id, op);
    assert_eq!(recovered[0].terminal, RecordType::OperationCancelled);
    let all = records(&sqlite, "unack-rec");
    assert_eq!(payload(terminal_of(&all, &op))["call_executed"], false);
    let fx = gov.executor(&tools, governance, |b| b);
    let cert = close_and_certify(fx, &gov, sqlite, "unack-rec");
    assert_eq!(cert.gate_summary.operations, 1);
    assert_eq!(cert.gate_summary.terminals.cancelled, 1);
    assert_eq!(tool(&tools, "echo").calls(), 0);
}

#[test]
fn the_recorder_gives_one_closing_handle_for_an_unacknowledged_start_and_keeps_its_counts() {
    let gov = Gov::new();
    let sqlite = gov.store();
    // Appends: 1 genesis; op-1: 2 policy_bound, 3 operation_started (stored, acknowledgement
    // lost), 4 its closing denial; op-2: 5 policy_bound, 6 operation_started, 7 a gate and 8
    // its terminal (both stored, acknowledgement lost).
    let faulty = Faulty::new(
        sqlite.clone(),
        vec![
            (3, Fault::AckLost),
            (7, Fault::AckLost),
            (8, Fault::AckLost),
        ],
    );
    let governance = gov.open_on(faulty, "unack-api");
    let recorder = governance.recorder().clone();
    let start = |op: &str| {
        let req = request(op, "echo", json!({}));
        let mut start =
            OperationStart::from_request(OperationId::new(op).unwrap(), &req, &context()).unwrap();
        start.policy = Some(gov.snapshot.reference());
        start
    };
    let rt = rt();
    let err = rt
        .block_on(recorder.start_operation(start("op-1")))
        .unwrap_err();
    let GovernanceError::StartedUnacknowledged { started, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(!err.call_executed());
    assert_eq!(started.started.sequence, 2);
    let op = OperationId::new("op-1").unwrap();
    assert_eq!(recorder.open_operations(), std::slice::from_ref(&op));
    // One handle; it cannot claim the call ran, and dropped or refused it stays takeable.
    let handle = recorder.take_unacknowledged(&op).unwrap();
    assert!(recorder.take_unacknowledged(&op).is_none(), "one handle");
    let refused = rt.block_on(handle.close_before_call(TerminalKind::Completed {
        result_digest: Digest::of_bytes(b"x"),
    }));
    assert!(
        matches!(refused, Err(GovernanceError::Invalid(_))),
        "{refused:?}"
    );
    assert!(
        recorder
            .take_unacknowledged(&OperationId::new("op-other").unwrap())
            .is_none()
    );
    let handle = recorder.take_unacknowledged(&op).unwrap();
    let receipt = rt
        .block_on(handle.deny(Denial {
            reason_code: ReasonCode::Evidence,
            evaluator: "evidence".into(),
            stop: false,
        }))
        .unwrap();
    assert_eq!(receipt.sequence, 3);
    assert!(recorder.open_operations().is_empty());
    // A gate and a terminal stored but not acknowledged still count: the recorder follows
    // the chain (the terminal closes its operation, `task_closed` counts match).
    let Started::New(mut h) = rt
        .block_on(recorder.start_operation(start("op-2")))
        .unwrap()
    else {
        panic!()
    };
    let gate = GateEvaluation {
        gate: "policy".into(),
        stage: Stage::Authorize,
        level: GateLevel::Hard,
        verdict: warden_evidence::payload::GateVerdict::Deny,
        reason_code: ReasonCode::PolicyRule,
        rule: None,
        source: None,
        arguments_digest: h.arguments_digest().clone(),
        recheck: false,
    };
    assert!(rt.block_on(h.gate(gate)).is_err());
    assert_eq!(
        h.reduction(false).disposition,
        Disposition::Deny,
        "the stored gate counts"
    );
    assert!(rt.block_on(h.authorize(None)).is_err());
    assert!(
        recorder.open_operations().is_empty(),
        "the stored terminal closed it"
    );
    rt.block_on(recorder.close(CloseDisposition::Completed))
        .unwrap();
    drop(rt);
    let reader = SqliteReader::open(gov.path()).unwrap();
    let chain = ChainId::new("unack-api").unwrap();
    let records = reader.read(&chain, None, usize::MAX).unwrap();
    certify_records(
        &chain,
        &records,
        &head_of(records.last().unwrap()),
        Timestamp(1),
    )
    .unwrap();
}
