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

/// Appenders that pipeline: each queues its appends with `append` without waiting for the
/// previous receipt (as concurrent operations on one boundary do through the recorder), then
/// awaits them all. Every receipt still arrives only after its commit is durable.
pub(crate) fn pipelined<T: Send>(
    store: &Arc<SqliteStore>,
    work: Vec<Vec<T>>,
    append: for<'s> fn(&'s SqliteStore, T) -> AppendFuture<'s>,
) {
    std::thread::scope(|s| {
        for entries in work {
            let store = store.clone();
            s.spawn(move || {
                let pending: Vec<_> = entries.into_iter().map(|e| append(&store, e)).collect();
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

/// The typed append of a plain append (its payload parsed into its type), as the recorder makes
/// it.
pub(crate) fn typed_of(e: &EvidenceAppend) -> TypedAppend {
    TypedAppend {
        chain_id: e.chain_id.clone(),
        operation_id: e.operation_id.clone(),
        policy_id: e.policy_id.clone(),
        policy_version: e.policy_version.clone(),
        payload: payload::parse(e.record_type, &e.payload).unwrap(),
        supersedes_record_id: e.supersedes_record_id.clone(),
        created_at: e.created_at,
    }
}
