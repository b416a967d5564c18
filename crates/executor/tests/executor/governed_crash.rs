//! Crash injection through the governed executor (evidence before the call; projection and
//! recovery): this test binary re-invokes itself as a child process that runs one governed call
//! through `ActionExecutor` against a real SQLite store (its callable appends a line to
//! `effects.txt` and fsyncs), projects the chain and closes the task. The child is SIGKILLed at
//! every named fault point (each evidence append and commit, before and after the invocation,
//! around the projection commit), or the point fails (`error`). A second child then restarts: the
//! executor's start-up `Governance::resume` verifies the chain and recovers open operations, and
//! the same request (same idempotency key) runs again. Afterwards the chain verifies, the
//! projection converges to the projection of the whole chain, the task certifies, and the callable
//! ran at most once: exactly once when the crash came before the operation started or after the
//! call, never when it came in between (recovery closes the operation and the retry replays it).

use std::io::Write as _;
use std::path::Path;

use warden_evidence::payload::CloseDisposition;
use warden_evidence::test_util::{Action, Case, CrashHarness, child, record_effect};
use warden_evidence::{
    Expected, GovernedStore, ProjectionTarget, Projector, SqliteProjection, SqliteReader,
    SqliteStore, certify_records, fault, head_of, project_from_scratch, record_type_str,
};

use super::*;

const CHAIN: &str = "crash";
const EFFECT_POLICY: &str = "default = \"deny\"\nallow = [\"effect\"]\n";

/// The shared harness (warden_evidence::test_util), re-invoking `child_process` below.
const HARNESS: CrashHarness = CrashHarness::new("governed_crash::child_process");

/// The callable: one line in the case's `effects.txt` per run, durable before it returns.
struct Effect {
    descriptor: ActionDescriptor,
    dir: std::path::PathBuf,
}

#[async_trait]
impl Tool for Effect {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.descriptor
    }
    async fn invoke(&self, _: InvocationToken, _: Value) -> Result<Value, ToolError> {
        record_effect(&self.dir);
        Ok(json!({"ok": true}))
    }
}

fn line(o: &ExecutionOutcome) -> String {
    let call = match o.call_executed() {
        Some(true) => "true",
        Some(false) => "false",
        None => "unknown",
    };
    format!("{} call_executed={call}", o.status())
}

/// The child's work; does nothing unless the harness started this process as a child.
#[test]
fn child_process() {
    child(|dir| rt().block_on(run_child(dir)));
}

async fn run_child(dir: &Path) -> String {
    let sqlite = Arc::new(SqliteStore::open(dir.join("evidence.db")).unwrap());
    let store: Arc<dyn GovernedStore> = sqlite.clone();
    let chain = ChainId::new(CHAIN).unwrap();
    let snap = snapshot(EFFECT_POLICY);
    let clock = || -> Arc<dyn warden_evidence::Clock> { Arc::new(warden_evidence::SystemClock) };
    // Start-up: resume and recover an existing boundary, or open a new one.
    let governance = if store.head(&chain).await.unwrap().is_some() {
        let (g, recovered) = Governance::resume(
            store.clone(),
            chain.clone(),
            RuntimeProfile::Certifiable,
            clock(),
        )
        .await
        .unwrap();
        let mut log = std::fs::File::create(dir.join("recovered.log")).unwrap();
        for r in recovered {
            writeln!(log, "{}", record_type_str(r.terminal)).unwrap();
        }
        g
    } else {
        let binding = GovernanceBinding {
            task_boundary: TaskBoundary::new("task-crash").unwrap(),
            chain_id: chain.clone(),
            policy: snap.reference(),
            profile: RuntimeProfile::Certifiable,
        };
        let bytes = PolicySnapshotBytes::new(snap.reference(), snap.canonical_json()).unwrap();
        match Governance::open(store.clone(), binding, &bytes, clock()).await {
            Ok(g) => g,
            Err(e) => return format!("open failed call_executed={}", e.call_executed()),
        }
    };
    let mut registry = Registry::new();
    registry
        .register(Arc::new(Effect {
            descriptor: ActionDescriptor::new("effect", "1", ActionSource::Builtin {}).unwrap(),
            dir: dir.to_path_buf(),
        }))
        .unwrap();
    let executor = ActionExecutor::builder(registry)
        .policy(Arc::new(SnapshotPolicy::new(snap)))
        .governance(governance.clone())
        .build()
        .unwrap();
    let req = request(
        &format!("crash-{}", std::process::id()),
        "effect",
        json!({}),
    )
    .with_idempotency_key("the-one-request")
    .unwrap();
    let report = executor
        .execute_reported(req, &context(), ExecuteOptions::new())
        .await;
    let mut target = SqliteProjection::open(dir.join("projection.db")).unwrap();
    let projected = Projector::default()
        .drain(sqlite.as_ref(), &mut target, &chain)
        .await;
    let recorder = governance.recorder();
    if recorder.open_operations().is_empty() {
        let _ = recorder.close(CloseDisposition::Completed).await;
    }
    let _ = Projector::default()
        .drain(sqlite.as_ref(), &mut target, &chain)
        .await;
    format!(
        "{}; replay={}; evidence_error_call_executed={:?}; projection={}",
        line(&report.outcome),
        report.replay_of.is_some(),
        report
            .evidence_error
            .as_ref()
            .map(GovernanceError::call_executed),
        projected.is_ok()
    )
}

/// The terminal types the restarted child's start-up recovery appended.
fn recovered(c: &Case) -> Vec<String> {
    std::fs::read_to_string(c.path().join("recovered.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Runs one case through the harness: a child hit at `point@nth` (`Hang`: SIGKILLed there;
/// `Error`: the point fails), then a restarted child (the callable ran at most once, and never
/// again after the restart); checks what must hold after any crash.
fn case(point: &str, nth: u32, action: Action) -> Case {
    let c = HARNESS.run(point, nth, action);
    let (spec, log) = (&c.spec, &c.log);
    // The chain verifies.
    let path = c.path().join("evidence.db");
    let reader = SqliteReader::open(&path).unwrap();
    let chain = ChainId::new(CHAIN).unwrap();
    let report = reader.verify(&chain, &Expected::Nothing).unwrap();
    assert!(report.result.valid, "{spec}: {:?}", report.failure);
    // The projection converges to the projection of the whole chain.
    let records = reader.read(&chain, None, usize::MAX).unwrap();
    drop(reader);
    let mut target = SqliteProjection::open(c.path().join("projection.db")).unwrap();
    rt().block_on(async {
        let store = SqliteStore::open(&path).unwrap();
        let again = Projector::default()
            .drain(&store, &mut target, &chain)
            .await
            .unwrap();
        assert_eq!(again.applied, 0, "{spec}: the restart drained everything");
    });
    let (runs, attempts) = project_from_scratch(&records);
    assert_eq!(target.runs().unwrap(), runs, "{spec}");
    assert_eq!(target.attempts().unwrap(), attempts, "{spec}");
    assert_eq!(
        target.cursor(&chain).unwrap(),
        Some(head_of(records.last().unwrap())),
        "{spec}"
    );
    assert!(target.conflicts().unwrap().is_empty(), "{spec}");
    // The task closed, and every started operation has exactly one terminal record.
    let last = records.last().unwrap();
    assert_eq!(last.record_type, RecordType::TaskClosed, "{spec}: {log}");
    certify_records(&chain, &records, &head_of(last), Timestamp(1))
        .unwrap_or_else(|e| panic!("{spec}: {e:?}"));
    c
}

#[test]
fn a_governed_executor_killed_at_every_fault_point_recovers_without_repeating_the_call() {
    // A fresh run appends: 1 genesis, 2 policy_bound, 3 operation_started, 4 gate precondition.tool,
    // 5 gate policy, 6 callable_completed, 7 task_closed; each its own group commit; one
    // invocation between 5 and 6; two projection transactions.
    let mut cases = Vec::new();
    for n in 1..=7 {
        cases.push(("governed.after_append", n));
        cases.push(("store.before_commit", n));
        cases.push(("store.after_commit", n));
    }
    cases.push(("governed.before_invoke", 1));
    cases.push(("governed.after_invoke", 1));
    cases.push(("projection.before_commit", 1));
    cases.push(("projection.after_commit", 1));
    for p in fault::POINTS {
        assert!(
            cases.iter().any(|(c, _)| *c == p),
            "fault point {p} is not exercised"
        );
    }
    for (point, nth) in cases {
        let c = case(point, nth, Action::Hang);
        // Durable `operation_started` (append 3) and no durable terminal yet, call not begun:
        // recovery closes the operation, the retry replays it, the callable never runs.
        let started_not_called = match point {
            "governed.after_append" | "store.after_commit" => (3..=5).contains(&nth),
            "store.before_commit" => (4..=5).contains(&nth),
            "governed.before_invoke" => true,
            _ => false,
        };
        assert_eq!(
            c.effects(),
            usize::from(!started_not_called),
            "{point}@{nth}: {}",
            c.log
        );
        // Recovery chose the terminal the evidence allows, never re-invoking: no gate
        // recorded → cancelled; gates that allowed (the call may have begun) → ambiguous.
        let no_gate = match point {
            "governed.after_append" | "store.after_commit" => nth == 3,
            "store.before_commit" => nth == 4,
            _ => false,
        };
        let call_may_have_begun = (started_not_called && !no_gate)
            || point == "governed.after_invoke"
            || (point == "store.before_commit" && nth == 6);
        let want: Vec<&str> = if no_gate {
            vec!["operation_cancelled"]
        } else if call_may_have_begun {
            vec!["external_result_ambiguous"]
        } else {
            vec![]
        };
        assert_eq!(recovered(&c), want, "{point}@{nth}: {}", c.log);
        if started_not_called || call_may_have_begun {
            let restarted = c.log.lines().last().unwrap_or_default();
            assert!(
                restarted.contains("replay=true"),
                "{point}@{nth}: {}",
                c.log
            );
        }
    }
}

#[test]
fn injected_append_failures_before_the_call_prevent_it_and_after_it_never_retry() {
    // Evidence before the call, through the executor and the real store: a failed commit of any
    // pre-call append leaves the callable unreachable (call_executed = false); a failed terminal
    // commit reports call_executed = true, and the restart never runs it again.
    for n in 1..=5 {
        let c = case("store.before_commit", n, Action::Error);
        assert_eq!(c.before, 0, "append {n}: {}", c.log);
        let first = c.log.lines().next().unwrap();
        assert!(
            first.contains("call_executed=false"),
            "append {n}: {}",
            c.log
        );
        // Only a failed genesis leaves no boundary: the restart opens one and the call runs.
        // Otherwise the first run closed its boundary after the refused call (an operation
        // already started was closed as denied), and the restart runs nothing.
        let total = usize::from(n == 1);
        assert_eq!(c.effects(), total, "append {n}: {}", c.log);
    }
    for (point, nth) in [("store.before_commit", 6), ("governed.after_invoke", 1)] {
        let c = case(point, nth, Action::Error);
        let first = c.log.lines().next().unwrap();
        assert!(
            first.starts_with("failed call_executed=true")
                && first.contains("evidence_error_call_executed=Some(true)"),
            "{point}: {}",
            c.log
        );
        assert_eq!((c.before, c.effects()), (1, 1), "{point}: {}", c.log);
        assert_eq!(recovered(&c), ["external_result_ambiguous"], "{point}");
    }
    let c = case("governed.before_invoke", 1, Action::Error);
    assert!(
        c.log
            .lines()
            .next()
            .unwrap()
            .starts_with("failed call_executed=false"),
        "{}",
        c.log
    );
    assert_eq!((c.before, c.effects()), (0, 0), "{}", c.log);
}

#[test]
fn a_pre_call_append_stored_but_unacknowledged_never_runs_the_call_and_the_run_closes_it() {
    // `governed.after_append` failing (`error`): the record is stored, then its append fails.
    // Appends: 1 genesis, 2 policy_bound, 3 operation_started, 4 gate precondition.tool, 5 gate policy.
    for n in 1..=5 {
        let c = case("governed.after_append", n, Action::Error);
        let first = c.log.lines().next().unwrap();
        assert_eq!(c.before, 0, "append {n}: {}", c.log);
        if n == 1 {
            // The boundary's genesis is stored: the restart resumes it and the call runs once.
            assert!(
                first.starts_with("open failed call_executed=false"),
                "{}",
                c.log
            );
            assert_eq!(c.effects(), 1, "{}", c.log);
            continue;
        }
        assert!(
            first.starts_with("denied call_executed=false")
                && first.contains("evidence_error_call_executed=Some(false)"),
            "append {n}: {}",
            c.log
        );
        // The first run closed its operation itself (nothing was left for recovery) and then
        // its boundary; the call never ran, before or after the restart.
        let recovered = recovered(&c);
        assert!(recovered.is_empty(), "append {n}: {recovered:?}");
        assert_eq!(c.effects(), 0, "append {n}: {}", c.log);
        let reader = SqliteReader::open(c.path().join("evidence.db")).unwrap();
        let records = reader
            .read(&ChainId::new(CHAIN).unwrap(), None, usize::MAX)
            .unwrap();
        let started: Vec<_> = records
            .iter()
            .filter(|r| r.record_type == RecordType::OperationStarted)
            .collect();
        if n == 2 {
            // Only the operation's `policy_bound` was stored: it never started.
            assert!(started.is_empty(), "append {n}");
            continue;
        }
        // The started operation's one terminal: denied for the evidence failure.
        assert_eq!(started.len(), 1, "append {n}");
        let op = started[0].operation_id.as_ref().unwrap();
        let terminals: Vec<_> = records
            .iter()
            .filter(|r| r.operation_id.as_ref() == Some(op) && r.record_type.is_terminal())
            .collect();
        assert_eq!(terminals.len(), 1, "append {n}");
        assert_eq!(terminals[0].record_type, RecordType::OperationDenied);
        let p: Value = serde_json::from_str(&terminals[0].payload_json).unwrap();
        assert_eq!(p["reason_code"], "evidence", "append {n}: {p}");
        // The restart's request (same idempotency key) answered from that record.
        let restarted = c.log.lines().last().unwrap_or_default();
        assert!(restarted.contains("replay=true"), "append {n}: {}", c.log);
    }
}
