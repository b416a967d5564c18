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
