//! Crash injection (projection and recovery; evidence before the call): this test binary re-invokes
//! itself as a child that runs one governed call (its callable appends a line to `effects.txt`),
//! projects, and closes the task. The child is SIGKILLed at every fault point (or the point fails,
//! for `error`); a second child then restarts: resumes the chain, recovers open operations, retries
//! the same request (same idempotency key). Afterwards the chain verifies, the projection
//! converges, and the callable ran at most once.

use std::io::Write as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use warden_contracts::*;
use warden_evidence::payload::{CloseDisposition, GateLevel, GateVerdict};
use warden_evidence::*;

use crate::support::*;

const CHAIN: &str = "crash";

/// The child's work; does nothing unless `WARDEN_CRASH_CHILD` is set.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("WARDEN_CRASH_DIR") else {
        return;
    };
    let dir = Path::new(&dir);
    let outcome = block_on(child(dir));
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("child.log"))
        .unwrap();
    writeln!(log, "{outcome}").unwrap();
}

async fn child(dir: &Path) -> String {
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
                        let mut f = std::fs::OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(dir.join("effects.txt"))
                            .unwrap();
                        writeln!(f, "ran").unwrap();
                        f.sync_all().unwrap();
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

fn spawn(dir: &Path, fault: Option<&str>) -> std::process::Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "crash::crash_child",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("WARDEN_CRASH_DIR", dir)
    .env("WARDEN_EVIDENCE_FAULT_MARKER", dir.join("marker"))
    .env_remove("WARDEN_EVIDENCE_FAULT")
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if let Some(f) = fault {
        cmd.env("WARDEN_EVIDENCE_FAULT", f);
    }
    cmd.spawn().unwrap()
}

fn effects(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("effects.txt"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// Runs one case; returns the directory, the callable's runs before the restart, and the log.
fn case(point: &str, nth: u32, action: &str) -> (tempfile::TempDir, usize, String) {
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("{point}@{nth}:{action}");
    let mut child = spawn(dir.path(), Some(&spec));
    if action == "hang" {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let reached = std::fs::read_to_string(dir.path().join("marker")).unwrap_or_default();
            if reached.lines().any(|l| l == point) {
                break;
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("{spec}: the child exited ({status}) without reaching the point");
            }
            assert!(Instant::now() < deadline, "{spec}: never reached");
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(9), "{spec}: killed by SIGKILL");
    } else {
        let status = child.wait().unwrap();
        assert!(status.success(), "{spec}: {status}");
    }
    let first = effects(dir.path());
    assert!(first <= 1, "{spec}: ran {first} times before the restart");
    // Restart.
    let status = spawn(dir.path(), None).wait().unwrap();
    assert!(status.success(), "{spec}: the restarted child failed");
    let log = std::fs::read_to_string(dir.path().join("child.log")).unwrap_or_default();
    // The chain verifies; the callable ran at most once, and not again after the restart.
    let path = dir.path().join("evidence.db");
    let reader = SqliteReader::open(&path).unwrap();
    let chain = ChainId::new(CHAIN).unwrap();
    let report = reader.verify(&chain, &Expected::Nothing).unwrap();
    assert!(report.result.valid, "{spec}: {:?}", report.failure);
    assert!(effects(dir.path()) <= 1, "{spec}: the callable ran twice");
    assert!(effects(dir.path()) >= first);
    // The projection converges to the projection of the whole chain.
    let records = reader.read(&chain, None, usize::MAX).unwrap();
    drop(reader);
    let mut target = SqliteProjection::open(dir.path().join("projection.db")).unwrap();
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
    (dir, first, log)
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
        let (dir, _, log) = case(point, nth, "hang");
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
            effects(dir.path()),
            usize::from(!started_not_called),
            "{point}@{nth}: {log}"
        );
    }
}

#[test]
fn injected_append_failures_before_the_call_prevent_it_after_it_never_retry() {
    // Evidence before the call, through the real store: a failed commit of each pre-call append
    // leaves the callable unreachable; a failed commit of the terminal reports call_executed =
    // true.
    for n in 1..=4 {
        let (_dir, first, log) = case("store.before_commit", n, "error");
        assert_eq!(first, 0, "append {n}: {log}");
        assert!(
            log.lines().next().unwrap().contains("call_executed=false"),
            "append {n}: {log}"
        );
    }
    let (dir, first, log) = case("store.before_commit", 5, "error");
    assert_eq!((first, effects(dir.path())), (1, 1));
    assert!(
        log.lines()
            .next()
            .unwrap()
            .contains("post-call failure: call_executed=true"),
        "{log}"
    );
    let (dir, first, log) = case("governed.before_invoke", 1, "error");
    assert_eq!((first, effects(dir.path())), (0, 0), "{log}");
}
