//! The workload both benches share: a realistic governed chain, and appenders that pipeline or
//! wait for each receipt.
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;

use serde_json::json;
use warden_contracts::*;
use warden_evidence::*;

pub(crate) const SNAPSHOT: &str =
    r#"{"default":"ask","deny":["bash(rm:*)"],"id":"bench","version":"1"}"#;

/// A realistic governed chain: genesis, then per operation `policy_bound`,
/// `operation_started`, `gate_evaluated`, `callable_completed`.
pub(crate) fn appends(chain: &str, n: usize) -> Vec<EvidenceAppend> {
    let chain_id = ChainId::new(chain).unwrap();
    let digest = Digest::of_bytes(SNAPSHOT.as_bytes());
    let args = Digest::of_bytes(b"arguments");
    let mut out = Vec::with_capacity(n);
    for seq in 0..n as u64 {
        let op = seq.div_ceil(4);
        let (t, payload) = match seq % 4 {
            0 if seq == 0 => (
                RecordType::PolicyBound,
                json!({"task_boundary_id": chain, "policy_digest": digest, "snapshot_json": SNAPSHOT}),
            ),
            1 => (
                RecordType::PolicyBound,
                json!({"task_boundary_id": chain, "policy_digest": digest}),
            ),
            2 => (
                RecordType::OperationStarted,
                json!({"request_id": format!("req-{op}"), "attempt": 1, "action": "bash",
                       "request_digest": args, "arguments_digest": args,
                       "principal": {"id": "alice", "kind": "user"},
                       "scope": {"kind": "ephemeral", "scope_id": "s-1"}, "backend": "in_process",
                       "policy_digest": digest, "profile": "governed"}),
            ),
            3 => (
                RecordType::GateEvaluated,
                json!({"gate": "policy", "stage": "authorize", "level": "hard", "verdict": "allow",
                       "reason_code": "policy_rule", "rule": "bash(git status:*)", "source": "project",
                       "arguments_digest": args}),
            ),
            _ => (
                RecordType::CallableCompleted,
                json!({"result_digest": args, "duration_ms": 3}),
            ),
        };
        out.push(EvidenceAppend {
            chain_id: chain_id.clone(),
            record_type: t,
            operation_id: (seq > 0).then(|| OperationId::new(format!("op-{op}")).unwrap()),
            expected_sequence: seq,
            policy_id: "bench".into(),
            policy_version: "1".into(),
            payload,
            supersedes_record_id: None,
            created_at: Timestamp(1_700_000_000_000 + seq),
        });
    }
    out
}

/// How many appends [`append_just_built`] copies at a time: about 100 KiB of input, which stays
/// in the cache until it is appended.
pub(crate) const JUST_BUILT_BATCH: usize = 64;

/// Appends `entries` to `store` in batches of `batch`, each batch copied just before it is
/// appended (untimed), as the recorder appends a payload it has just built; returns the time
/// the appends took. Appending `entries` as they are instead reads 10,000 payloads built long
/// before, out of the cache (≈ 1.5 KiB of scattered map nodes and strings each), which the
/// recorder never does.
pub(crate) fn append_just_built(
    store: &MemoryStore,
    entries: &[EvidenceAppend],
    batch: usize,
) -> std::time::Duration {
    let mut took = std::time::Duration::ZERO;
    for chunk in entries.chunks(batch) {
        let copy = chunk.to_vec();
        let start = std::time::Instant::now();
        for e in &copy {
            std::hint::black_box(store.append_sync(e).unwrap());
        }
        took += start.elapsed();
    }
    took
}

/// Appenders that pipeline: each queues its appends without waiting for the previous receipt
/// (as concurrent operations on one boundary do through the recorder), then awaits them all.
/// Every receipt still arrives only after its commit is durable.
pub(crate) fn pipelined(store: &Arc<SqliteStore>, work: Vec<Vec<EvidenceAppend>>) {
    std::thread::scope(|s| {
        for entries in work {
            let store = store.clone();
            s.spawn(move || {
                let pending: Vec<_> = entries
                    .into_iter()
                    .map(|e| store.append_queued(e))
                    .collect();
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    for p in pending {
                        p.await.unwrap();
                    }
                });
            });
        }
    });
}

/// Appenders that each wait for their receipt before the next append.
pub(crate) fn waiting(store: &Arc<SqliteStore>, work: Vec<Vec<EvidenceAppend>>) {
    std::thread::scope(|s| {
        for entries in work {
            let store = store.clone();
            s.spawn(move || {
                for e in entries {
                    store.append_blocking(e).unwrap();
                }
            });
        }
    });
}

/// A short chain whose strings need every kind of escaping (quotes, backslashes, control
/// characters in the policy fields, non-ASCII and astral characters), with its keys given out of
/// order: sealing must write exactly the canonical JSON of the record.
pub(crate) fn escaping_appends() -> Vec<EvidenceAppend> {
    let chain = "esc\"ape\\é😀";
    let chain_id = ChainId::new(chain).unwrap();
    let snapshot = "{\"id\":\"q\\\"\",\"t\":\"\u{1}\u{1f}\u{7f}é\"}";
    let digest = Digest::of_bytes(snapshot.as_bytes());
    let args = Digest::of_bytes(b"arguments");
    let op = OperationId::new("op\"1\\😀").unwrap();
    let payloads = [
        (
            RecordType::PolicyBound,
            None,
            json!({"task_boundary_id": "t\"\\ é😀\u{e000}\u{10000}", "policy_digest": digest, "snapshot_json": snapshot}),
        ),
        (
            RecordType::OperationStarted,
            Some(op.clone()),
            json!({"request_id": "req\"1", "attempt": 4_294_967_295u64, "action": "bash \"x\" \\ é",
                   "request_digest": args, "arguments_digest": args,
                   "principal": {"id": "al\"ice", "kind": "user"},
                   "scope": {"kind": "ephemeral", "scope_id": "s\\1"}, "backend": "in_process",
                   "policy_digest": digest, "profile": "governed"}),
        ),
        (
            RecordType::GateEvaluated,
            Some(op.clone()),
            json!({"gate": "pol\"icy", "stage": "authorize", "level": "soft", "verdict": "deny",
                   "reason_code": "policy_rule", "rule": "bash(echo \"\\é😀\u{e000}\":*)", "source": "pro\\ject",
                   "arguments_digest": args}),
        ),
        (
            RecordType::CallableCompleted,
            Some(op),
            json!({"result_digest": args, "duration_ms": 0, "degraded": true, "advisory_denials": 9_007_199_254_740_991u64}),
        ),
    ];
    payloads
        .into_iter()
        .enumerate()
        .map(|(seq, (t, operation_id, payload))| EvidenceAppend {
            chain_id: chain_id.clone(),
            record_type: t,
            operation_id,
            expected_sequence: seq as u64,
            policy_id: "p\u{1}\"\\\u{1f}é".into(),
            policy_version: "v\n\t😀\u{7f}".into(),
            payload,
            supersedes_record_id: None,
            created_at: Timestamp(1 << 52),
        })
        .collect()
}

/// A chain of `2 * n + 1` records for two appenders: its genesis, and each appender's records,
/// which are whole operations (so every operation's records stay in order whatever the
/// interleaving).
pub(crate) fn shared_chain(chain: &str, n: usize) -> (EvidenceAppend, Vec<Vec<EvidenceAppend>>) {
    let mut owners: Vec<Vec<EvidenceAppend>> = vec![Vec::new(), Vec::new()];
    let mut all = appends(chain, 2 * n + 1).into_iter();
    let genesis = all.next().unwrap();
    for e in all {
        owners[(e.expected_sequence.div_ceil(4) % 2) as usize].push(e);
    }
    (genesis, owners)
}

/// The output of a future that is ready at once (as the in-memory store's appends are).
pub(crate) fn ready<T>(f: impl std::future::Future<Output = T>) -> T {
    let mut f = std::pin::pin!(f);
    match f
        .as_mut()
        .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
    {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => panic!("the in-memory store's append is ready at once"),
    }
}

/// How [`append_shared`] appends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Shared {
    /// Each appender prepares outside the lock and appends at the sequence it assigns under it
    /// (as the recorder appends).
    Split,
    /// Each appender makes its whole append under the lock, dropping the payload after it (as
    /// the recorder appended before prepared appends): the peer.
    WholeUnderLock,
    /// One thread appends every record the split way (what the split costs without a second
    /// appender).
    OneThread,
}

/// Appends the genesis, then each appender's records from its own thread, as concurrent
/// operations of one task append through the recorder: a mutex holding the next sequence (as
/// the recorder's) orders the chain's appends. Each appender first copies its appends on its
/// own thread (as an operation builds its payloads; a payload freed by another thread than the
/// one that allocated it costs glibc a lock on the other's arena), then they start together.
/// Returns the time from that start until both are done.
pub(crate) fn append_shared(
    store: &MemoryStore,
    genesis: &EvidenceAppend,
    owners: &[Vec<EvidenceAppend>],
    how: Shared,
) -> std::time::Duration {
    store.append_sync(genesis).unwrap();
    let next = std::sync::Mutex::new(1u64);
    let split = |e: EvidenceAppend| {
        let prepared = store.prepare(e);
        let appended = {
            let mut next = next.lock().unwrap();
            let appended = store.append_prepared(prepared, *next);
            *next += 1;
            appended
        };
        std::hint::black_box(ready(appended).unwrap());
    };
    let whole = |mut e: EvidenceAppend| {
        {
            let mut next = next.lock().unwrap();
            e.expected_sequence = *next;
            std::hint::black_box(store.append_sync(&e).unwrap());
            *next += 1;
        }
        drop(e);
    };
    if how == Shared::OneThread {
        let all: Vec<EvidenceAppend> = owners.iter().flatten().cloned().collect();
        let start = std::time::Instant::now();
        all.into_iter().for_each(split);
        return start.elapsed();
    }
    let ready = std::sync::Barrier::new(owners.len() + 1);
    std::thread::scope(|s| {
        let workers: Vec<_> = owners
            .iter()
            .map(|entries| {
                let (split, whole, ready) = (&split, &whole, &ready);
                s.spawn(move || {
                    let entries = entries.clone();
                    ready.wait();
                    match how {
                        Shared::WholeUnderLock => entries.into_iter().for_each(whole),
                        _ => entries.into_iter().for_each(split),
                    }
                })
            })
            .collect();
        ready.wait();
        let start = std::time::Instant::now();
        for w in workers {
            w.join().unwrap();
        }
        start.elapsed()
    })
}
