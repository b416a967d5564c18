//! Crash injection (projection and recovery; evidence before the call): this test binary re-invokes
//! itself as a child that runs one governed call (its callable appends a line to `effects.txt`),
//! projects, and closes the task. The child is SIGKILLed at every fault point (or the point fails,
//! for `error`); a second child then restarts: resumes the chain, recovers open operations, retries
//! the same request (same idempotency key). Afterwards the chain verifies, the projection
//! converges, and the callable ran at most once.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use warden_contracts::*;
use warden_evidence::payload::{CloseDisposition, GateLevel, GateVerdict};
use warden_evidence::test_util::{Action, Case, CrashHarness, child, record_effect};
use warden_evidence::*;

use crate::support::*;

const CHAIN: &str = "crash";

/// The shared harness (warden_evidence::test_util), re-invoking `crash_child` below.
const HARNESS: CrashHarness = CrashHarness::new("crash::crash_child");

/// The child's work; does nothing unless the harness started this process as a child.
#[test]
fn crash_child() {
    child(|dir| block_on(run_child(dir)));
}

async fn run_child(dir: &Path) -> String {
    let store: Arc<dyn GovernedStore> =
        Arc::new(SqliteStore::open(dir.join("evidence.db")).unwrap());
    let chain = ChainId::new(CHAIN).unwrap();
    let rec = if store.head(&chain).await.unwrap().is_some() {
        let rec = GovernedRecorder::resume(
            store.clone(),
            chain.clone(),
            RuntimeProfile::Certifiable,
            clock(),
        )
        .await
        .unwrap();
        rec.recover().await.unwrap();
        rec
    } else {
        match GovernedRecorder::open(store.clone(), binding(CHAIN), &snapshot(), clock()).await {
            Ok(r) => r,
            Err(e) => return format!("open failed: call_executed={}", e.call_executed()),
        }
    };
    let mut s = start(&format!("op-{}", std::process::id()));
    s.idempotency_key = Some("the-one-request".into());
    let outcome = match rec.start_operation(s).await {
        Ok(Started::Replay(r)) => format!("replay {:?}", r.terminal),
        Ok(Started::New(mut h)) => {
            let authorized = match h.gate(gate(GateLevel::Hard, GateVerdict::Allow)).await {
                Ok(_) => h.authorize(None).await,
                Err(e) => Err(e),
            };
            match authorized {
                Err(e) => format!("pre-call failure: call_executed={}", e.call_executed()),
                Ok(Authorization::Permitted(p)) => match p.begin().await {
                    Err(e) => format!("pre-call failure: call_executed={}", e.call_executed()),
                    Ok(call) => {
                        record_effect(dir);
                        match call.completed(&json!({"ok": true})).await {
                            Ok(_) => "completed".into(),
                            Err(e) => {
                                format!("post-call failure: call_executed={}", e.call_executed())
                            }
                        }
                    }
                },
                Ok(other) => format!("{other:?}"),
            }
        }
        Err(GovernanceError::Closed(_)) => "closed".into(),
        Err(e) => format!("start failed: call_executed={}", e.call_executed()),
    };
    let mut target = SqliteProjection::open(dir.join("projection.db")).unwrap();
    let projected = Projector::default()
        .drain(store.as_ref(), &mut target, &chain)
        .await;
    if rec.open_operations().is_empty() {
        let _ = rec.close(CloseDisposition::Completed).await;
    }
    let _ = Projector::default()
        .drain(store.as_ref(), &mut target, &chain)
        .await;
    format!("{outcome}; projection {}", projected.is_ok())
}

/// Runs one case through the harness (a child hit at `point@nth`, then a restart; the callable
/// ran at most once), then checks what must hold after any crash.
fn case(point: &str, nth: u32, action: Action) -> Case {
    let c = HARNESS.run(point, nth, action);
    let (spec, log) = (&c.spec, &c.log);
    // The chain verifies (the harness checked the callable ran at most once, and not again after
    // the restart).
    let path = c.path().join("evidence.db");
    let reader = SqliteReader::open(&path).unwrap();
    let chain = ChainId::new(CHAIN).unwrap();
    let report = reader.verify(&chain, &Expected::Nothing).unwrap();
    assert!(report.result.valid, "{spec}: {:?}", report.failure);
    // The projection converges to the projection of the whole chain.
    let records = reader.read(&chain, None, usize::MAX).unwrap();
    drop(reader);
    let mut target = SqliteProjection::open(c.path().join("projection.db")).unwrap();
    block_on(async {
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
    assert!(target.conflicts().unwrap().is_empty());
    // The task closed; every started operation has its one terminal record.
    let last = records.last().unwrap();
    assert_eq!(last.record_type, RecordType::TaskClosed, "{spec}: {log}");
    certify_records(&chain, &records, &head_of(last), Timestamp(1)).unwrap();
    c
}

#[test]
fn a_child_killed_at_every_fault_point_recovers_without_repeating_the_call() {
    // A fresh run meets: 6 appends (genesis, policy_bound, operation_started, gate_evaluated,
    // callable_completed, task_closed), each its own group commit; one invocation; two
    // projection transactions.
    let mut cases = Vec::new();
    for n in 1..=6 {
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
        // Appends: 1 genesis, 2 policy_bound, 3 operation_started, 4 gate, 5 terminal, 6 close.
        // Killed once the call ran: it ran once. Killed before operation_started was durable:
        // the restart's retry is the first attempt and runs it once. Killed between the start
        // and the call: recovery closes it as ambiguous and the retry replays it: never run.
        let started_not_called = match point {
            "governed.after_append" | "store.after_commit" => nth == 3 || nth == 4,
            "store.before_commit" => nth == 4,
            "governed.before_invoke" => true,
            _ => false,
        };
        assert_eq!(
            c.effects(),
            usize::from(!started_not_called),
            "{point}@{nth}: {}",
            c.log
        );
    }
}

#[test]
fn injected_append_failures_before_the_call_prevent_it_after_it_never_retry() {
    // Evidence before the call, through the real store: a failed commit of each pre-call append
    // leaves the callable unreachable; a failed commit of the terminal reports call_executed =
    // true.
    for n in 1..=4 {
        let c = case("store.before_commit", n, Action::Error);
        assert_eq!(c.before, 0, "append {n}: {}", c.log);
        assert!(
            c.log
                .lines()
                .next()
                .unwrap()
                .contains("call_executed=false"),
            "append {n}: {}",
            c.log
        );
    }
    let c = case("store.before_commit", 5, Action::Error);
    assert_eq!((c.before, c.effects()), (1, 1));
    assert!(
        c.log
            .lines()
            .next()
            .unwrap()
            .contains("post-call failure: call_executed=true"),
        "{}",
        c.log
    );
    let c = case("governed.before_invoke", 1, Action::Error);
    assert_eq!((c.before, c.effects()), (0, 0), "{}", c.log);
}
