//! Shared helpers: runtimes, backends, requests, and the standard governed chain that exercises
//! every record type.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use warden_contracts::*;
use warden_evidence::payload::{CloseDisposition, GateLevel, GateVerdict};
use warden_evidence::*;

pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

pub const SECRET: &str = "sk-live-SUPERSECRET-0123456789";

pub fn snapshot() -> PolicySnapshotBytes {
    let json = r#"{"default":"ask","deny":["bash(rm:*)"],"id":"project","version":"7"}"#;
    PolicySnapshotBytes::new(
        PolicySnapshotRef {
            policy_id: "project".into(),
            version: "7".into(),
            digest: Digest::of_bytes(json.as_bytes()),
        },
        json,
    )
    .unwrap()
}

pub fn binding(chain: &str) -> GovernanceBinding {
    GovernanceBinding {
        task_boundary: TaskBoundary::new(&format!("task-{chain}")).unwrap(),
        chain_id: ChainId::new(chain).unwrap(),
        policy: snapshot().reference().clone(),
        profile: RuntimeProfile::Certifiable,
    }
}

pub fn clock() -> Arc<dyn Clock> {
    Arc::new(FixedClock::new(1_700_000_000_000))
}

/// The two backends every conformance test runs against.
pub enum Backend {
    Memory(Arc<MemoryStore>),
    Sqlite(Arc<SqliteStore>, #[allow(dead_code)] tempfile::TempDir),
}

impl Backend {
    pub fn all() -> Vec<Backend> {
        vec![Self::memory(), Self::sqlite()]
    }
    pub fn memory() -> Self {
        Self::Memory(Arc::new(MemoryStore::new()))
    }
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("evidence.db")).unwrap();
        Self::Sqlite(Arc::new(store), dir)
    }
    pub fn name(&self) -> &'static str {
        match self {
            Self::Memory(_) => "memory",
            Self::Sqlite(..) => "sqlite",
        }
    }
    pub fn store(&self) -> Arc<dyn GovernedStore> {
        match self {
            Self::Memory(s) => s.clone(),
            Self::Sqlite(s, _) => s.clone(),
        }
    }
    pub fn journal(&self) -> &dyn JournalStore {
        match self {
            Self::Memory(s) => s.as_ref(),
            Self::Sqlite(s, _) => s.as_ref(),
        }
    }
    pub fn path(&self) -> Option<PathBuf> {
        match self {
            Self::Memory(_) => None,
            Self::Sqlite(s, _) => Some(s.path().to_owned()),
        }
    }
}

pub fn context() -> ExecutionContext {
    ExecutionContext::new(
        ContextId::new("ctx-1").unwrap(),
        ExecutionScopeRef::Ephemeral {
            scope_id: ScopeId::new("scope-1").unwrap(),
        },
        PrincipalRef {
            id: PrincipalId::new("alice").unwrap(),
            kind: PrincipalKind::User,
        },
        BackendRef::new("in_process").unwrap(),
    )
    .with_policy_snapshot(snapshot().reference().clone())
}

pub fn request(id: &str, args: Value) -> ExecutionRequest {
    ExecutionRequest::new(
        RequestId::new(id).unwrap(),
        ActionRef::new("bash").unwrap(),
        args,
        ExecutionScopeRef::Ephemeral {
            scope_id: ScopeId::new("scope-1").unwrap(),
        },
    )
    .unwrap()
}

pub fn start(op: &str) -> OperationStart {
    let req = request(
        &format!("req-{op}"),
        json!({"command": format!("echo {SECRET}"), "op": op}),
    );
    OperationStart::from_request(OperationId::new(op).unwrap(), &req, &context()).unwrap()
}

pub fn gate(level: GateLevel, verdict: GateVerdict) -> GateEvaluation {
    GateEvaluation {
        gate: "policy".into(),
        stage: Stage::Authorize,
        level,
        verdict,
        reason_code: ReasonCode::PolicyRule,
        rule: Some("bash(echo:*)".into()),
        source: Some("project".into()),
        arguments_digest: Digest::of_bytes(b"args"),
        recheck: false,
    }
}

pub async fn new_op(rec: &GovernedRecorder, op: &str) -> OperationHandle {
    match rec.start_operation(start(op)).await.unwrap() {
        Started::New(h) => h,
        Started::Replay(r) => panic!("unexpected replay {r:?}"),
    }
}

pub async fn allowed(rec: &GovernedRecorder, op: &str) -> InvocationPermit {
    let mut h = new_op(rec, op).await;
    h.gate(gate(GateLevel::Hard, GateVerdict::Allow))
        .await
        .unwrap();
    match h.authorize(None).await.unwrap() {
        Authorization::Permitted(p) => p,
        other => panic!("not permitted: {other:?}"),
    }
}

/// The standard chain: every record type, every terminal type, an exception (degraded), an
/// escalation, a correction; closed. Returns the recorder.
pub async fn standard_chain(store: Arc<dyn GovernedStore>, chain: &str) -> GovernedRecorder {
    let rec = GovernedRecorder::open(store, binding(chain), &snapshot(), clock())
        .await
        .unwrap();
    // op-ok: two gates (an advisory deny lets it through), completed with a secret result.
    let mut h = new_op(&rec, "op-ok").await;
    h.gate(gate(GateLevel::Hard, GateVerdict::Allow))
        .await
        .unwrap();
    h.gate(gate(GateLevel::Advisory, GateVerdict::Deny))
        .await
        .unwrap();
    let Authorization::Permitted(p) = h.authorize(None).await.unwrap() else {
        panic!()
    };
    p.begin()
        .await
        .unwrap()
        .completed(&json!({"stdout": SECRET}))
        .await
        .unwrap();
    // op-deny: a hard deny.
    let mut h = new_op(&rec, "op-deny").await;
    h.gate(gate(GateLevel::Hard, GateVerdict::Deny))
        .await
        .unwrap();
    assert!(matches!(
        h.authorize(None).await.unwrap(),
        Authorization::Denied { .. }
    ));
    // op-exc: a soft deny overridden by an exception, completed (degraded).
    let mut h = new_op(&rec, "op-exc").await;
    let soft = h
        .gate(gate(GateLevel::Soft, GateVerdict::Deny))
        .await
        .unwrap();
    h.exception(ExceptionGrant {
        gate_record_id: soft.record_id,
        exception_id: "exc-1".into(),
        authority: "security".into(),
        granted_by: None,
        expires_at: None,
        arguments_digest: Digest::of_bytes(b"args"),
    })
    .await
    .unwrap();
    let Authorization::Permitted(p) = h.authorize(None).await.unwrap() else {
        panic!()
    };
    p.begin()
        .await
        .unwrap()
        .completed(&Value::Null)
        .await
        .unwrap();
    // op-esc: a soft deny escalated.
    let mut h = new_op(&rec, "op-esc").await;
    h.gate(gate(GateLevel::Soft, GateVerdict::Deny))
        .await
        .unwrap();
    let esc = Escalation {
        approval_id: ApprovalId::new("ap-1").unwrap(),
        authority: "human".into(),
    };
    assert!(matches!(
        h.authorize(Some(esc)).await.unwrap(),
        Authorization::Escalated { .. }
    ));
    // op-fail, op-cancel, op-timeout, op-ambiguous.
    let p = allowed(&rec, "op-fail").await;
    p.begin()
        .await
        .unwrap()
        .finish(TerminalKind::Failed {
            kind: "exit_status".into(),
            message_digest: Some(Digest::of_bytes(SECRET.as_bytes())),
        })
        .await
        .unwrap();
    let p = allowed(&rec, "op-cancel").await;
    p.begin()
        .await
        .unwrap()
        .finish(TerminalKind::Cancelled)
        .await
        .unwrap();
    let p = allowed(&rec, "op-timeout").await;
    p.begin()
        .await
        .unwrap()
        .finish(TerminalKind::TimedOut {
            deadline: Some(Timestamp(5)),
        })
        .await
        .unwrap();
    let p = allowed(&rec, "op-ambiguous").await;
    p.begin()
        .await
        .unwrap()
        .finish(TerminalKind::Ambiguous(AmbiguityCause::TransportLost))
        .await
        .unwrap();
    // A correction of op-ok's advisory gate record.
    let records = rec_records(&rec).await;
    let advisory = records
        .iter()
        .find(|r| r.record_type == RecordType::GateEvaluated && r.payload_json.contains("advisory"))
        .unwrap()
        .clone();
    rec.supersede(&advisory, "wrong_rule_cited", None)
        .await
        .unwrap();
    rec.close(CloseDisposition::Completed).await.unwrap();
    rec
}

pub async fn rec_records(rec: &GovernedRecorder) -> Vec<EvidenceRecord> {
    rec.records().await.unwrap()
}

/// Every record of a chain, from any store.
/// The plain append that made `r`.
pub fn append_of(r: &EvidenceRecord) -> EvidenceAppend {
    EvidenceAppend {
        chain_id: r.chain_id.clone(),
        record_type: r.record_type,
        operation_id: r.operation_id.clone(),
        expected_sequence: r.sequence,
        policy_id: r.policy_id.clone(),
        policy_version: r.policy_version.clone(),
        payload: serde_json::from_str(&r.payload_json).unwrap(),
        supersedes_record_id: r.supersedes_record_id.clone(),
        created_at: r.created_at,
    }
}

pub async fn all_records(store: &dyn GovernedStore, chain: &str) -> Vec<EvidenceRecord> {
    store
        .read(&ChainId::new(chain).unwrap(), None, usize::MAX)
        .await
        .unwrap()
}

pub fn file_bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}
