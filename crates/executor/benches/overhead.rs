//! Executor overhead over a direct call of a trivial tool, minimal profile, side by side in one
//! run: the direct call (the tool's own function, awaited on the same runtime), the full stage
//! order with an allow-everything evaluator (the executor's own cost), with a compiled policy
//! snapshot deciding (executor + decision), and with capacity limits and an observer. Target
//! (docs/design/performance.md#targets): overhead < 5 µs. Also, apart from the target, the governed
//! profile over the in-memory evidence store: what a call's evidence (four records: the policy
//! binding, the start, the gate, the terminal) adds. Results: docs/benchmarks.md.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use async_trait::async_trait;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use warden_contracts::*;
use warden_evidence::{
    GovernanceBinding, GovernedStore, MemoryStore, PolicySnapshotBytes, TaskBoundary,
};
use warden_executor::{
    ActionExecutor, Governance, InvocationToken, Limits, Registry, SnapshotPolicy, Tool, ToolError,
};
use warden_policy::{Format, LoadedPolicy, PathEnv, PolicySnapshot};

/// The trivial tool: returns its `x` argument.
struct Trivial(ActionDescriptor);

impl Trivial {
    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        Ok(arguments.get("x").cloned().unwrap_or(Value::Null))
    }
}

#[async_trait]
impl Tool for Trivial {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.0
    }
    async fn invoke(&self, _token: InvocationToken, arguments: Value) -> Result<Value, ToolError> {
        self.call(arguments).await
    }
}

fn trivial() -> Arc<Trivial> {
    let d = ActionDescriptor::new("trivial", "1", ActionSource::Builtin {})
        .unwrap()
        .with_input_schema(json!({
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
            "additionalProperties": false
        }))
        .unwrap();
    Arc::new(Trivial(d))
}

/// Allows everything: isolates the executor's own cost from a policy decision.
struct AllowAll(PolicySnapshotRef);

#[async_trait]
impl PolicyEvaluator for AllowAll {
    fn snapshot(&self) -> &PolicySnapshotRef {
        &self.0
    }
    async fn evaluate(&self, _: &PolicyQuery<'_>) -> Result<PolicyAnswer, EvaluatorError> {
        PolicyAnswer::new(
            Disposition::Allow,
            DecisionReason::new(ReasonCode::PolicyDefault, "allow"),
            "allow_all",
        )
        .map_err(|e| EvaluatorError {
            message: e.to_string(),
        })
    }
}

fn snapshot_policy() -> Arc<SnapshotPolicy> {
    Arc::new(SnapshotPolicy::new(snapshot()))
}

fn snapshot() -> Arc<PolicySnapshot> {
    let text = r#"
default = "deny"
allow = ["trivial", "read", "bash(git status:*)", "bash(ls:*)"]
ask = ["bash(git push:*)", "web_fetch"]
deny = ["bash(rm:*)", "write(/etc/**)", "mcp__*", "bash(sudo:*)"]
"#;
    let file = LoadedPolicy::from_text(text.into(), Format::Toml, "b.toml", "b", None).unwrap();
    let env = PathEnv {
        project_root: "/repo".into(),
        home: None,
    };
    Arc::new(PolicySnapshot::from_files(&[file], env).unwrap())
}

/// An executor governed over a fresh in-memory store: a new task boundary.
fn governed(rt: &tokio::runtime::Runtime, snapshot: &Arc<PolicySnapshot>) -> ActionExecutor {
    let store: Arc<dyn GovernedStore> = Arc::new(MemoryStore::new());
    let binding = GovernanceBinding {
        task_boundary: TaskBoundary::new("bench").unwrap(),
        chain_id: ChainId::new("bench").unwrap(),
        policy: snapshot.reference(),
        profile: RuntimeProfile::Governed,
    };
    let bytes = PolicySnapshotBytes::new(snapshot.reference(), snapshot.canonical_json()).unwrap();
    let governance = rt
        .block_on(Governance::open(
            store,
            binding,
            &bytes,
            Arc::new(warden_evidence::SystemClock),
        ))
        .unwrap();
    let mut registry = Registry::new();
    registry.register(trivial()).unwrap();
    ActionExecutor::builder(registry)
        .policy(Arc::new(SnapshotPolicy::new(snapshot.clone())))
        .governance(governance)
        .build()
        .unwrap()
}

struct Quiet;
impl Observer for Quiet {}

fn executor(policy: Arc<dyn PolicyEvaluator>, extras: bool) -> ActionExecutor {
    let mut registry = Registry::new();
    registry.register(trivial()).unwrap();
    let mut b = ActionExecutor::builder(registry).policy(policy);
    if extras {
        b = b
            .capacity(Arc::new(
                Limits::new()
                    .max_concurrent(64)
                    .unwrap()
                    .max_concurrent_for("trivial", 16)
                    .unwrap(),
            ))
            .observer(Arc::new(Quiet));
    }
    b.build().unwrap()
}

fn overhead(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let scope = ExecutionScopeRef::Ephemeral {
        scope_id: ScopeId::new("bench").unwrap(),
    };
    let context = ExecutionContext::new(
        ContextId::new("bench").unwrap(),
        scope.clone(),
        PrincipalRef {
            id: PrincipalId::new("bench").unwrap(),
            kind: PrincipalKind::Local,
        },
        BackendRef::new("in_process").unwrap(),
    );
    let request = ExecutionRequest::new(
        RequestId::new("r-1").unwrap(),
        ActionRef::new("trivial").unwrap(),
        json!({"x": 42}),
        scope,
    )
    .unwrap();
    let args = json!({"x": 42});
    let tool = trivial();
    let allow_all = Arc::new(AllowAll(PolicySnapshotRef {
        policy_id: "allow_all".into(),
        version: "1".into(),
        digest: Digest::of_bytes(b"allow_all"),
    }));
    let bare = executor(allow_all, false);
    let with_policy = executor(snapshot_policy(), false);
    let with_extras = executor(snapshot_policy(), true);

    let mut g = c.benchmark_group("executor_overhead");
    g.bench_function("direct_call", |b| {
        b.iter(|| rt.block_on(async { black_box(tool.call(black_box(args.clone())).await) }))
    });
    g.bench_function("executor_allow_all", |b| {
        b.iter(|| rt.block_on(async { black_box(bare.execute(request.clone(), &context).await) }))
    });
    g.bench_function("executor_snapshot_policy", |b| {
        b.iter(|| {
            rt.block_on(async { black_box(with_policy.execute(request.clone(), &context).await) })
        })
    });
    g.bench_function("executor_policy_limits_observer", |b| {
        b.iter(|| {
            rt.block_on(async { black_box(with_extras.execute(request.clone(), &context).await) })
        })
    });
    // A fresh boundary every 10,000 calls, so the chain does not grow for the whole run.
    let policy = snapshot();
    g.bench_function("executor_governed_memory_store", |b| {
        b.iter_custom(|iters| {
            let mut took = std::time::Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(10_000);
                let executor = governed(&rt, &policy);
                let first = rt.block_on(executor.execute(request.clone(), &context));
                assert!(first.is_success(), "{first:?}");
                let start = std::time::Instant::now();
                for _ in 0..n {
                    rt.block_on(async {
                        black_box(executor.execute(request.clone(), &context).await)
                    });
                }
                took += start.elapsed();
                left -= n;
            }
            took
        })
    });
    g.finish();
}

criterion_group!(benches, overhead);
criterion_main!(benches);
