//! The executor end to end: the runtime bypass matrix (no bypass), re-authorization after
//! transforms (no stale authorization), one distinct outcome per lifecycle case (typed lifecycle),
//! trusted context (docs/design/executor.md#trusted-context), the registry, admission (leases never
//! leak; limits hold under 1,000 concurrent requests), approvals and the denial bound, the LionAGI
//! callback, `stop`, idempotency and bad input; governed execution on real SQLite evidence
//! (`governed`) and crash injection with SIGKILLed child processes (`governed_crash`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use warden_contracts::*;
use warden_executor::*;
use warden_policy::{Format, LoadedPolicy, PathEnv, PolicyBuilder, PolicySnapshot};

#[path = "executor/governed.rs"]
mod governed;
#[path = "executor/governed_crash.rs"]
mod governed_crash;
#[path = "executor/runtime.rs"]
mod runtime;

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

/// How a test tool behaves.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Behaviour {
    Echo,
    Null,
    Fail,
    Panic,
    Ambiguous,
    Slow(u64),
    /// Returns a GitHub token that was not in its arguments.
    Leak,
}

/// A GitHub token, assembled so this file holds none.
fn github_token() -> String {
    format!("gh{}_{}", "p", "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5")
}

/// A test tool: counts invocations and the highest concurrency it saw.
struct TestTool {
    descriptor: ActionDescriptor,
    behaviour: Behaviour,
    calls: AtomicUsize,
    running: AtomicUsize,
    peak: AtomicUsize,
    seen: Mutex<Vec<Value>>,
}

impl TestTool {
    fn new(name: &str, behaviour: Behaviour) -> Arc<Self> {
        Self::with_schema(name, behaviour, json!({"type": "object"}))
    }

    fn with_schema(name: &str, behaviour: Behaviour, schema: Value) -> Arc<Self> {
        let descriptor = ActionDescriptor::new(
            name,
            "1",
            ActionSource::Plugin {
                plugin: "test".into(),
            },
        )
        .unwrap()
        .with_input_schema(schema)
        .unwrap();
        Arc::new(Self {
            descriptor,
            behaviour,
            calls: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

struct Running<'a>(&'a TestTool);
impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl Tool for TestTool {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.descriptor
    }

    async fn invoke(&self, token: InvocationToken, arguments: Value) -> Result<Value, ToolError> {
        assert_eq!(token.action(), self.descriptor.name());
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let _running = Running(self);
        self.seen.lock().unwrap().push(arguments.clone());
        match self.behaviour {
            Behaviour::Echo => {
                tokio::task::yield_now().await;
                Ok(arguments)
            }
            Behaviour::Null => Ok(Value::Null),
            Behaviour::Fail => Err(ToolError::Failed {
                kind: "boom".into(),
                message: "it broke".into(),
            }),
            Behaviour::Panic => panic!("tool exploded"),
            Behaviour::Ambiguous => Err(ToolError::Ambiguous {
                message: "connection lost after send".into(),
            }),
            Behaviour::Leak => Ok(json!({"stdout": format!("GITHUB_TOKEN={}\n", github_token())})),
            Behaviour::Slow(ms) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(json!("slow done"))
            }
        }
    }
}

const POLICY: &str = r#"
default = "deny"
allow = ["echo", "null", "fail", "panic", "ambiguous", "slow", "strict", "leak", "bash(echo:*)", "bash(ls:*)"]
ask = ["deploy", "bash(git push:*)"]
deny = ["bash(rm:*)"]
"#;

fn snapshot(text: &str) -> Arc<PolicySnapshot> {
    let file =
        LoadedPolicy::from_text(text.into(), Format::Toml, "test.toml", "test", None).unwrap();
    let env = PathEnv {
        project_root: "/tmp".into(),
        home: None,
    };
    Arc::new(PolicySnapshot::from_files(&[file], env).unwrap())
}

fn policy() -> Arc<SnapshotPolicy> {
    Arc::new(SnapshotPolicy::new(snapshot(POLICY)))
}

/// Every stage event, decision and outcome.
#[derive(Default)]
struct Recorder {
    stages: Mutex<Vec<StageEvent>>,
    decisions: Mutex<Vec<DecisionEvent>>,
    outcomes: Mutex<Vec<ExecutionOutcome>>,
}

impl Observer for Recorder {
    fn on_stage(&self, event: &StageEvent) {
        self.stages.lock().unwrap().push(event.clone());
    }
    fn on_decision(&self, event: &DecisionEvent) {
        self.decisions.lock().unwrap().push(event.clone());
    }
    fn on_outcome(&self, outcome: &ExecutionOutcome) {
        self.outcomes.lock().unwrap().push(outcome.clone());
    }
}

impl Recorder {
    fn stages_of(&self, request: &str) -> Vec<(Stage, StageStatus)> {
        self.stages
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.request_id.as_str() == request)
            .map(|e| (e.stage, e.status))
            .collect()
    }

    fn decided(&self, request: &str, stage: Stage) -> Vec<Disposition> {
        self.decisions
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.request_id.as_str() == request && e.stage == stage)
            .map(|e| e.decision.disposition())
            .collect()
    }
}

fn scope() -> ExecutionScopeRef {
    ExecutionScopeRef::Ephemeral {
        scope_id: ScopeId::new("scope-1").unwrap(),
    }
}

fn me() -> PrincipalRef {
    PrincipalRef {
        id: PrincipalId::new("alice").unwrap(),
        kind: PrincipalKind::User,
    }
}

fn context() -> ExecutionContext {
    ExecutionContext::new(
        ContextId::new("ctx-1").unwrap(),
        scope(),
        me(),
        BackendRef::new("in_process").unwrap(),
    )
}

fn request(id: &str, action: &str, args: Value) -> ExecutionRequest {
    ExecutionRequest::new(
        RequestId::new(id).unwrap(),
        ActionRef::new(action).unwrap(),
        args,
        scope(),
    )
    .unwrap()
}

struct Fixture {
    executor: Arc<ActionExecutor>,
    recorder: Arc<Recorder>,
}

fn tools() -> Vec<Arc<TestTool>> {
    vec![
        TestTool::new("echo", Behaviour::Echo),
        TestTool::new("null", Behaviour::Null),
        TestTool::new("fail", Behaviour::Fail),
        TestTool::new("panic", Behaviour::Panic),
        TestTool::new("ambiguous", Behaviour::Ambiguous),
        TestTool::new("slow", Behaviour::Slow(5_000)),
        TestTool::new("deploy", Behaviour::Echo),
        TestTool::new("leak", Behaviour::Leak),
        TestTool::with_schema(
            "bash",
            Behaviour::Echo,
            json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"], "additionalProperties": false}),
        ),
        TestTool::with_schema(
            "strict",
            Behaviour::Echo,
            json!({"type": "object", "properties": {"n": {"type": "integer", "maximum": 10}}, "required": ["n"]}),
        ),
    ]
}

fn build(
    tools: &[Arc<TestTool>],
    configure: impl FnOnce(ExecutorBuilder) -> ExecutorBuilder,
) -> Fixture {
    let mut registry = Registry::new();
    for t in tools {
        registry.register(t.clone()).unwrap();
    }
    let recorder = Arc::new(Recorder::default());
    let builder = ActionExecutor::builder(registry)
        .policy(policy())
        .observer(recorder.clone());
    let executor = Arc::new(configure(builder).build().unwrap());
    Fixture { executor, recorder }
}

fn tool<'a>(tools: &'a [Arc<TestTool>], name: &str) -> &'a Arc<TestTool> {
    tools.iter().find(|t| t.descriptor.name() == name).unwrap()
}

fn reason(outcome: &ExecutionOutcome) -> &DecisionReason {
    match outcome {
        ExecutionOutcome::Denied { reason, .. } | ExecutionOutcome::Deferred { reason, .. } => {
            reason
        }
        ExecutionOutcome::Escalated { approval, .. } => &approval.reason,
        other => panic!("no reason in {other:?}"),
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn full_order() -> Vec<Stage> {
    STAGE_ORDER.to_vec()
}

// ---------------------------------------------------------------------------------------------
// Registry
// ---------------------------------------------------------------------------------------------

#[test]
fn registry_resolves_aliases_and_refuses_collisions() {
    let mut registry = Registry::new();
    let d = ActionDescriptor::new("read", "2", ActionSource::Builtin {})
        .unwrap()
        .with_aliases(["cat"])
        .unwrap();
    struct T(ActionDescriptor);
    #[async_trait]
    impl Tool for T {
        fn descriptor(&self) -> &ActionDescriptor {
            &self.0
        }
        async fn invoke(&self, _: InvocationToken, _: Value) -> Result<Value, ToolError> {
            panic!("the registry never invokes")
        }
    }
    registry.register(Arc::new(T(d))).unwrap();
    let r = registry.resolve(&ActionRef::new("cat").unwrap()).unwrap();
    assert_eq!(r.descriptor().name(), "read");
    assert_eq!(r.descriptor().version(), "2");
    // Version provenance.
    let pinned = ActionRef::new("read").unwrap().with_version("2").unwrap();
    assert!(registry.resolve(&pinned).is_ok());
    let wrong = ActionRef::new("read").unwrap().with_version("3").unwrap();
    assert!(matches!(
        registry.resolve(&wrong),
        Err(ExecutorError::VersionMismatch { .. })
    ));
    // Exact case only, and collisions up to case are refused.
    assert!(registry.resolve(&ActionRef::new("READ").unwrap()).is_err());
    for clash in ["read", "READ", "Cat"] {
        let d = ActionDescriptor::new(clash, "1", ActionSource::Builtin {}).unwrap();
        assert!(
            matches!(
                registry.register(Arc::new(T(d))),
                Err(ExecutorError::Collision { .. })
            ),
            "{clash} must collide"
        );
    }
    let alias_clash = ActionDescriptor::new("other", "1", ActionSource::Builtin {})
        .unwrap()
        .with_aliases(["CAT"])
        .unwrap();
    assert!(registry.register(Arc::new(T(alias_clash))).is_err());
    let self_clash = ActionDescriptor::new("ls", "1", ActionSource::Builtin {})
        .unwrap()
        .with_aliases(["LS"])
        .unwrap();
    assert!(registry.register(Arc::new(T(self_clash))).is_err());
    // A schema that does not compile is refused; nothing half-registered.
    let bad = ActionDescriptor::new("bad", "1", ActionSource::Builtin {})
        .unwrap()
        .with_input_schema(json!({"type": 12}))
        .unwrap();
    assert!(matches!(
        registry.register(Arc::new(T(bad))),
        Err(ExecutorError::InvalidSchema { .. })
    ));
    assert!(registry.resolve(&ActionRef::new("bad").unwrap()).is_err());
    assert_eq!(registry.len(), 1);
}

#[test]
fn an_executor_needs_a_policy() {
    let err = ActionExecutor::builder(Registry::new())
        .build()
        .unwrap_err();
    assert_eq!(err, ExecutorError::NoPolicy);
}

// ---------------------------------------------------------------------------------------------
// No bypass: the runtime bypass matrix
// ---------------------------------------------------------------------------------------------

#[test]
fn every_public_route_passes_the_full_stage_order_exactly_once() {
    let rt = rt();
    let tools = tools();
    let fx = build(&tools, |b| b);
    let echo = tool(&tools, "echo");
    let ctx = context();
    rt.block_on(async {
        // Route 1: the contracts `Executor` port, as a trait object.
        let port: &dyn Executor = fx.executor.as_ref();
        let o = port
            .execute(request("r-port", "echo", json!({"x": 1})), &ctx)
            .await;
        assert!(o.is_success(), "{o:?}");
        // Route 2: `execute_with`.
        let o = fx
            .executor
            .execute_with(
                request("r-with", "echo", json!({"x": 2})),
                &ctx,
                ExecuteOptions::new(),
            )
            .await;
        assert!(o.is_success(), "{o:?}");
        // Route 3: a turn.
        let outs = fx
            .executor
            .execute_turn(
                vec![
                    request("r-turn-1", "echo", json!({"x": 3})),
                    request("r-turn-2", "echo", json!({"x": 4})),
                ],
                &ctx,
            )
            .await;
        assert!(outs.iter().all(ExecutionOutcome::is_success), "{outs:?}");
        // Route 4: an approval loop's new attempt (policy asks for `deploy`).
        let deploy = tool(&tools, "deploy");
        let req = request("r-deploy", "deploy", json!({"to": "prod"}));
        let escalated = fx.executor.execute(req.clone(), &ctx).await;
        assert_eq!(escalated.status(), "escalated");
        let reviewer = Arc::new(Approver::new());
        let review = ReviewLoop::new(reviewer);
        let o = review
            .resolve(&fx.executor, &req, &ctx, &escalated)
            .await
            .unwrap();
        assert!(o.is_success(), "{o:?}");
        assert_eq!(deploy.calls(), 1);
        // Route 5: the registry resolves and never invokes.
        let resolved = fx
            .executor
            .registry()
            .resolve(&ActionRef::new("echo").unwrap())
            .unwrap();
        assert_eq!(resolved.descriptor().name(), "echo");
    });
    assert_eq!(echo.calls(), 4, "one invocation per request, no more");
    for id in ["r-port", "r-with", "r-turn-1", "r-turn-2", o_id(&fx)] {
        let stages: Vec<Stage> = fx
            .recorder
            .stages_of(id)
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        assert_eq!(
            stages,
            full_order(),
            "request {id} did not pass the full order once"
        );
        let invokes = fx
            .recorder
            .stages_of(id)
            .into_iter()
            .filter(|(s, st)| *s == Stage::Invoke && *st == StageStatus::Ran)
            .count();
        assert_eq!(invokes, 1);
    }
    // Skipped stages are recorded as skipped, with a reason.
    let stages = fx.recorder.stages_of("r-port");
    for skipped in [
        Stage::EvidenceStart,
        Stage::SessionGate,
        Stage::Transform,
        Stage::Revalidate,
        Stage::Reauthorize,
        Stage::EvidenceInvoke,
        Stage::Handlers,
    ] {
        assert!(
            stages.contains(&(skipped, StageStatus::Skipped)),
            "{skipped:?}"
        );
    }
    // Each decision reached once per stage, and each outcome observed once.
    assert_eq!(
        fx.recorder.decided("r-port", Stage::Authorize),
        [Disposition::Allow]
    );
    assert_eq!(fx.recorder.outcomes.lock().unwrap().len(), 6);
    // One plan per action, compiled once.
    assert_eq!(fx.executor.cached_plans(), 2);
}

/// The id of the approved attempt (the only request whose id contains `~approved-`).
fn o_id(fx: &Fixture) -> &'static str {
    let id = fx
        .recorder
        .stages
        .lock()
        .unwrap()
        .iter()
        .find(|e| e.request_id.as_str().contains("~approved-"))
        .map(|e| e.request_id.to_string())
        .unwrap();
    Box::leak(id.into_boxed_str())
}

/// Approves exactly what it is asked, with a receipt bound to it.
struct Approver {
    asked: AtomicUsize,
}

impl Approver {
    fn new() -> Self {
        Self {
            asked: AtomicUsize::new(0),
        }
    }
}

fn receipt_for(approval: &ApprovalRequest, digest: Digest, ttl: u64) -> ApprovalReceipt {
    let now = SystemClock.now();
    ApprovalReceipt::new(
        approval.approval_id.clone(),
        approval.action.clone(),
        digest,
        approval.policy_digest.clone(),
        PrincipalRef {
            id: PrincipalId::new("bob").unwrap(),
            kind: PrincipalKind::User,
        },
        now,
        Timestamp(now.unix_millis() + ttl),
    )
    .unwrap()
}

#[async_trait]
impl Reviewer for Approver {
    async fn review(&self, request: &ApprovalRequest) -> ReviewVerdict {
        self.asked.fetch_add(1, Ordering::SeqCst);
        ReviewVerdict::Approved {
            receipt: receipt_for(request, request.arguments_digest.clone(), 60_000),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// No stale authorization: changes after a decision force re-validation and re-authorization
// ---------------------------------------------------------------------------------------------

struct Rewrite(Map<String, Value>);

#[async_trait]
impl Transform for Rewrite {
    async fn transform(
        &self,
        _: &CallView<'_>,
    ) -> Result<Option<Map<String, Value>>, HandlerError> {
        Ok(Some(self.0.clone()))
    }
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

#[test]
fn a_transform_rewriting_an_allowed_echo_into_rm_is_denied() {
    let rt = rt();
    let tools = tools();
    let errors = Arc::new(CountingErrorHandler::default());
    let fx = build(&tools, |b| {
        b.handlers(
            Handlers::new()
                .transform(
                    InterceptorScope::Actions(vec!["bash".into()]),
                    Arc::new(Rewrite(obj(json!({"command": "rm -rf /"})))),
                )
                .on_error(InterceptorScope::All, errors.clone()),
        )
    });
    let o = rt.block_on(fx.executor.execute(
        request("r-1", "bash", json!({"command": "echo hi"})),
        &context(),
    ));
    match &o {
        ExecutionOutcome::Denied { reason, .. } => {
            assert_eq!(reason.rule.as_deref(), Some("bash(rm:*)"), "{reason:?}");
        }
        other => panic!("expected a denial, got {other:?}"),
    }
    assert_eq!(
        tool(&tools, "bash").calls(),
        0,
        "the rewritten call never runs"
    );
    assert_eq!(
        errors.calls.load(Ordering::SeqCst),
        0,
        "denials never reach error handlers"
    );
    let stages = fx.recorder.stages_of("r-1");
    assert!(stages.contains(&(Stage::Revalidate, StageStatus::Ran)));
    assert!(stages.contains(&(Stage::Reauthorize, StageStatus::Ran)));
    assert_eq!(
        fx.recorder.decided("r-1", Stage::Authorize),
        [Disposition::Allow]
    );
    assert_eq!(
        fx.recorder.decided("r-1", Stage::Reauthorize),
        [Disposition::Deny]
    );
    assert!(!stages.iter().any(|(s, _)| *s == Stage::Invoke));
}

#[test]
fn transformed_arguments_are_revalidated_against_the_schema() {
    let rt = rt();
    let tools = tools();
    let fx = build(&tools, |b| {
        b.handlers(Handlers::new().transform(
            InterceptorScope::All,
            Arc::new(Rewrite(obj(json!({"n": 99})))),
        ))
    });
    let o = rt.block_on(
        fx.executor
            .execute(request("r-1", "strict", json!({"n": 1})), &context()),
    );
    assert_eq!(reason(&o).code, ReasonCode::Transform, "{o:?}");
    assert_eq!(tool(&tools, "strict").calls(), 0);
}

struct FailingTransform;
#[async_trait]
impl Transform for FailingTransform {
    async fn transform(
        &self,
        _: &CallView<'_>,
    ) -> Result<Option<Map<String, Value>>, HandlerError> {
        Err(HandlerError::new("cannot"))
    }
}

/// A security hook that rewrites every call's arguments to a fixed map.
struct Rewriter(Map<String, Value>);
#[async_trait]
impl SecurityHook for Rewriter {
    fn name(&self) -> &str {
        "rewriter"
    }
    async fn check(&self, _: &CallView<'_>) -> Result<SecurityVerdict, HandlerError> {
        Ok(SecurityVerdict::Replace(self.0.clone()))
    }
}

/// A security hook that appends a marker to `command` each time (unstable).
struct Unstable;
#[async_trait]
impl SecurityHook for Unstable {
    fn name(&self) -> &str {
        "unstable"
    }
    async fn check(&self, call: &CallView<'_>) -> Result<SecurityVerdict, HandlerError> {
        let mut next = call.arguments.clone();
        let cmd = next["command"].as_str().unwrap_or_default().to_owned();
        next.insert("command".into(), json!(format!("{cmd} x")));
        Ok(SecurityVerdict::Replace(next))
    }
}

#[test]
fn transform_failures_and_unstable_security_hooks_fail_closed() {
    let rt = rt();
    let tools = tools();
    let errors = Arc::new(CountingErrorHandler::default());
    let fx = build(&tools, |b| {
        b.handlers(
            Handlers::new()
                .transform(
                    InterceptorScope::Actions(vec!["echo".into()]),
                    Arc::new(FailingTransform),
                )
                .security(
                    InterceptorScope::Actions(vec!["bash".into()]),
                    Arc::new(Unstable),
                )
                .on_error(InterceptorScope::All, errors.clone()),
        )
    });
    let o = rt.block_on(
        fx.executor
            .execute(request("r-1", "echo", json!({})), &context()),
    );
    assert_eq!(reason(&o).code, ReasonCode::Transform, "{o:?}");
    let o = rt.block_on(fx.executor.execute(
        request("r-2", "bash", json!({"command": "echo a"})),
        &context(),
    ));
    assert_eq!(o.status(), "denied", "{o:?}");
    assert!(reason(&o).message.contains("final pass"), "{o:?}");
    assert_eq!(
        tool(&tools, "echo").calls() + tool(&tools, "bash").calls(),
        0
    );
    assert_eq!(errors.calls.load(Ordering::SeqCst), 0);

    // A stable security replacement is re-checked and runs with the replaced arguments.
    let tools = self::tools();
    let fx = build(&tools, |b| {
        b.handlers(Handlers::new().security(
            InterceptorScope::Actions(vec!["bash".into()]),
            Arc::new(Rewriter(obj(json!({"command": "echo safe"})))),
        ))
    });
    let o = rt.block_on(fx.executor.execute(
        request("r-3", "bash", json!({"command": "echo a"})),
        &context(),
    ));
    assert!(o.is_success(), "{o:?}");
    assert_eq!(
        tool(&tools, "bash").seen.lock().unwrap()[0],
        json!({"command": "echo safe"})
    );
    // …and a security replacement into denied arguments is denied by the final pass.
    let tools = self::tools();
    let fx = build(&tools, |b| {
        b.handlers(Handlers::new().security(
            InterceptorScope::Actions(vec!["bash".into()]),
            Arc::new(Rewriter(obj(json!({"command": "rm -rf /"})))),
        ))
    });
    let o = rt.block_on(fx.executor.execute(
        request("r-4", "bash", json!({"command": "echo a"})),
        &context(),
    ));
    assert_eq!(reason(&o).rule.as_deref(), Some("bash(rm:*)"), "{o:?}");
    assert_eq!(tool(&tools, "bash").calls(), 0);
}

// ---------------------------------------------------------------------------------------------
// Typed lifecycle: every lifecycle case has its own outcome, each with the profile
// ---------------------------------------------------------------------------------------------

#[test]
fn each_lifecycle_case_has_a_distinct_outcome_with_its_profile() {
    let rt = rt();
    let tools = tools();
    let limits = Arc::new(Limits::new().max_concurrent_for("slow", 1).unwrap());
    let fx = build(&tools, |b| b.capacity(limits.clone()));
    let ctx = context();
    let ex = fx.executor.clone();
    let outcomes = rt.block_on(async move {
        let mut out = Vec::new();
        out.push((
            "allow",
            ex.execute(request("r-allow", "echo", json!({"a": 1})), &ctx)
                .await,
        ));
        out.push((
            "null",
            ex.execute(request("r-null", "null", json!({})), &ctx).await,
        ));
        out.push((
            "deny",
            ex.execute(
                request("r-deny", "bash", json!({"command": "rm -rf /"})),
                &ctx,
            )
            .await,
        ));
        out.push((
            "escalate",
            ex.execute(request("r-ask", "deploy", json!({})), &ctx)
                .await,
        ));
        out.push((
            "failure",
            ex.execute(request("r-fail", "fail", json!({})), &ctx).await,
        ));
        out.push((
            "ambiguous",
            ex.execute(request("r-amb", "ambiguous", json!({})), &ctx)
                .await,
        ));
        // Deadline: the slow tool runs past it.
        let deadline = Timestamp(SystemClock.now().unix_millis() + 50);
        out.push((
            "timeout",
            ex.execute(
                request("r-late", "slow", json!({})).with_deadline(deadline),
                &ctx,
            )
            .await,
        ));
        // Cancellation while the slow tool runs; a second slow call meanwhile is deferred.
        let token = CancelToken::new();
        let running = {
            let ex = ex.clone();
            let ctx = ctx.clone();
            let token = token.clone();
            tokio::spawn(async move {
                ex.execute_with(
                    request("r-cancel", "slow", json!({})),
                    &ctx,
                    ExecuteOptions::new().cancel(token),
                )
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(30)).await;
        out.push((
            "defer",
            ex.execute(request("r-defer", "slow", json!({})), &ctx)
                .await,
        ));
        token.cancel();
        out.push(("cancel", running.await.unwrap()));
        out
    });
    let mut statuses = BTreeSet::new();
    for (case, o) in &outcomes {
        assert_eq!(o.profile(), RuntimeProfile::Minimal, "{case}");
        let expected = match *case {
            "allow" | "null" => "succeeded",
            "deny" => "denied",
            "escalate" => "escalated",
            "failure" => "failed",
            "ambiguous" => "ambiguous",
            "timeout" => "timed_out",
            "defer" => "deferred",
            "cancel" => "cancelled",
            _ => unreachable!(),
        };
        assert_eq!(o.status(), expected, "{case}: {o:?}");
        statuses.insert(o.status());
        // The profile is in the serialized form too.
        assert_eq!(serde_json::to_value(o).unwrap()["profile"], "minimal");
    }
    assert_eq!(statuses.len(), 8, "eight distinct statuses");
    let by = |c: &str| &outcomes.iter().find(|(k, _)| *k == c).unwrap().1;
    assert_eq!(
        by("null"),
        &ExecutionOutcome::Succeeded {
            request_id: RequestId::new("r-null").unwrap(),
            profile: RuntimeProfile::Minimal,
            result: Value::Null,
            evidence: vec![],
            degradations: vec![],
        },
        "a null result is a success"
    );
    assert_ne!(by("null"), by("failure"));
    assert_eq!(by("timeout").call_executed(), Some(true));
    assert_eq!(by("cancel").call_executed(), Some(true));
    assert_eq!(by("ambiguous").call_executed(), None);
    assert_eq!(by("defer").call_executed(), Some(false));
    assert_eq!(
        tool(&tools, "ambiguous").calls(),
        1,
        "ambiguous results are never retried"
    );
    assert_eq!(limits.in_flight(), 0, "every lease came back");
}

#[test]
fn a_deadline_already_past_and_a_cancelled_token_never_start() {
    let rt = rt();
    let tools = tools();
    let fx = build(&tools, |b| b);
    let o = rt.block_on(fx.executor.execute(
        request("r-1", "echo", json!({})).with_deadline(Timestamp(1)),
        &context(),
    ));
    assert_eq!(o.status(), "timed_out");
    assert_eq!(o.call_executed(), Some(false));
    let token = CancelToken::new();
    token.cancel();
    let o = rt.block_on(fx.executor.execute_with(
        request("r-2", "echo", json!({})),
        &context(),
        ExecuteOptions::new().cancel(token),
    ));
    assert_eq!(o.status(), "cancelled");
    assert_eq!(o.call_executed(), Some(false));
    assert_eq!(tool(&tools, "echo").calls(), 0);
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct CountingErrorHandler {
    calls: AtomicUsize,
}
#[async_trait]
impl ErrorHandler for CountingErrorHandler {
    async fn on_error(
        &self,
        _: &CallView<'_>,
        _: &InvocationFailure,
    ) -> Result<ErrorDisposition, HandlerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(ErrorDisposition::Reraise)
    }
}

struct Replace(Value);
#[async_trait]
impl ErrorHandler for Replace {
    async fn on_error(
        &self,
        _: &CallView<'_>,
        _: &InvocationFailure,
    ) -> Result<ErrorDisposition, HandlerError> {
        Ok(ErrorDisposition::ReplaceResult(self.0.clone()))
    }
}

struct Broken;
#[async_trait]
impl ErrorHandler for Broken {
    async fn on_error(
        &self,
        _: &CallView<'_>,
        _: &InvocationFailure,
    ) -> Result<ErrorDisposition, HandlerError> {
        Err(HandlerError::new("handler broke"))
    }
}

struct Post(Option<Value>, bool);
#[async_trait]
impl PostHandler for Post {
    async fn after(&self, _: &CallView<'_>, _: &Value) -> Result<Option<Value>, HandlerError> {
        if self.1 {
            Err(HandlerError::new("post failed"))
        } else {
            Ok(self.0.clone())
        }
    }
}

#[test]
fn error_and_post_handlers_follow_the_stage_plan() {
    let rt = rt();
    // A failing error handler leaves the original failure primary; Reraise keeps it.
    let tools = tools();
    let counting = Arc::new(CountingErrorHandler::default());
    let fx = build(&tools, |b| {
        b.handlers(
            Handlers::new()
                .on_error(InterceptorScope::All, Arc::new(Broken))
                .on_error(InterceptorScope::All, counting.clone()),
        )
    });
    let o = rt.block_on(
        fx.executor
            .execute(request("r-1", "fail", json!({})), &context()),
    );
    match &o {
        ExecutionOutcome::Failed {
            failure,
            call_executed,
            ..
        } => {
            assert_eq!(failure.kind, "boom");
            assert!(call_executed);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(counting.calls.load(Ordering::SeqCst), 1);
    // A panic in the tool is an invocation failure: handlers see it, the first replacement wins.
    let tools = self::tools();
    let later = Arc::new(CountingErrorHandler::default());
    let fx = build(&tools, |b| {
        b.handlers(
            Handlers::new()
                .on_error(InterceptorScope::All, Arc::new(Replace(json!("first"))))
                .on_error(InterceptorScope::All, Arc::new(Replace(json!("second"))))
                .on_error(InterceptorScope::All, later.clone()),
        )
    });
    let o = rt.block_on(
        fx.executor
            .execute(request("r-2", "panic", json!({})), &context()),
    );
    assert_eq!(
        o,
        ExecutionOutcome::Succeeded {
            request_id: RequestId::new("r-2").unwrap(),
            profile: RuntimeProfile::Minimal,
            result: json!("first"),
            evidence: vec![],
            degradations: vec![],
        }
    );
    assert_eq!(
        later.calls.load(Ordering::SeqCst),
        1,
        "later handlers still observe"
    );
    // Error handlers never see a denial.
    let o = rt.block_on(fx.executor.execute(
        request("r-3", "bash", json!({"command": "rm x"})),
        &context(),
    ));
    assert_eq!(o.status(), "denied");
    assert_eq!(later.calls.load(Ordering::SeqCst), 1);
    // Post handlers may replace a result; a failing one goes to the error path, no re-invoke.
    let tools = self::tools();
    let fx = build(&tools, |b| {
        b.handlers(Handlers::new().post(
            InterceptorScope::Actions(vec!["echo".into()]),
            Arc::new(Post(Some(json!("replaced")), false)),
        ))
    });
    let o = rt.block_on(
        fx.executor
            .execute(request("r-4", "echo", json!({})), &context()),
    );
    assert!(o.is_success());
    assert!(
        matches!(&o, ExecutionOutcome::Succeeded { result, .. } if result == &json!("replaced"))
    );
    let tools = self::tools();
    let fx = build(&tools, |b| {
        b.handlers(Handlers::new().post(InterceptorScope::All, Arc::new(Post(None, true))))
    });
    let o = rt.block_on(
        fx.executor
            .execute(request("r-5", "echo", json!({})), &context()),
    );
    assert!(
        matches!(&o, ExecutionOutcome::Failed { failure, .. } if failure.kind == "post_handler"),
        "{o:?}"
    );
    assert_eq!(tool(&tools, "echo").calls(), 1);
}

#[test]
fn the_policys_guards_redact_or_refuse_arguments_and_results() {
    let rt = rt();
    let token = github_token();
    let guard = |secrets: &str| {
        Arc::new(ContentGuard::of(&snapshot(&format!(
            "default = \"allow\"\n[guards]\nsecrets = \"{secrets}\"\n"
        ))))
    };
    let holds_token = |v: &Value| v.to_string().contains(&token);
    // Redact: the tool sees redacted arguments (re-validated, re-authorized), the caller a
    // redacted result.
    let tools = self::tools();
    let fx = build(&tools, |b| {
        b.handlers(guard("redact").install(Handlers::new()))
    });
    let args = json!({"note": format!("Authorization: token {token}")});
    let o = rt.block_on(
        fx.executor
            .execute(request("g-1", "echo", args.clone()), &context()),
    );
    let ExecutionOutcome::Succeeded { result, .. } = &o else {
        panic!("{o:?}")
    };
    let seen = tool(&tools, "echo").seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert!(!holds_token(&seen[0]) && seen[0] != args, "{}", seen[0]);
    assert!(!holds_token(result), "{result}");
    let o = rt.block_on(
        fx.executor
            .execute(request("g-2", "leak", json!({})), &context()),
    );
    let ExecutionOutcome::Succeeded { result, .. } = &o else {
        panic!("{o:?}")
    };
    assert!(
        !holds_token(result) && result["stdout"].is_string(),
        "{result}"
    );
    // Block: a call carrying a secret is denied before it runs; a result carrying one is
    // withheld (a post-handler failure, the tool not invoked again).
    let tools = self::tools();
    let fx = build(&tools, |b| {
        b.handlers(guard("block").install(Handlers::new()))
    });
    let o = rt.block_on(
        fx.executor
            .execute(request("g-3", "echo", args), &context()),
    );
    assert_eq!(o.status(), "denied", "{o:?}");
    assert!(
        reason(&o).message.contains("a guard blocked this call"),
        "{o:?}"
    );
    assert!(!format!("{o:?}").contains(&token));
    assert_eq!(tool(&tools, "echo").calls(), 0);
    let o = rt.block_on(
        fx.executor
            .execute(request("g-4", "leak", json!({})), &context()),
    );
    let ExecutionOutcome::Failed { failure, .. } = &o else {
        panic!("{o:?}")
    };
    assert_eq!(failure.kind, "post_handler");
    assert!(
        failure.message.contains("a guard withheld the result"),
        "{failure:?}"
    );
    assert!(!format!("{o:?}").contains(&token));
    assert_eq!(tool(&tools, "leak").calls(), 1);
    // No guards: nothing changes.
    let tools = self::tools();
    let none = Arc::new(ContentGuard::of(&snapshot("default = \"allow\"\n")));
    let fx = build(&tools, |b| b.handlers(none.install(Handlers::new())));
    let o = rt.block_on(
        fx.executor
            .execute(request("g-5", "leak", json!({})), &context()),
    );
    assert!(matches!(&o, ExecutionOutcome::Succeeded { result, .. } if holds_token(result)));
}

// ---------------------------------------------------------------------------------------------
// Session gate and trusted context
// ---------------------------------------------------------------------------------------------

struct Gate(Result<bool, &'static str>, AtomicUsize);
#[async_trait]
impl SessionGate for Gate {
    async fn authorize(&self, _: &CallView<'_>) -> Result<bool, HandlerError> {
        self.1.fetch_add(1, Ordering::SeqCst);
        self.0.map_err(HandlerError::new)
    }
}

#[test]
fn the_session_gate_denies_on_false_or_error_and_never_skips_policy() {
    let rt = rt();
    for (answer, denied) in [
        (Ok(false), true),
        (Err("gate down"), true),
        (Ok(true), false),
    ] {
        let tools = tools();
        let gate = Arc::new(Gate(answer, AtomicUsize::new(0)));
        let fx = build(&tools, |b| b.handlers(Handlers::new().gate(gate.clone())));
        let o = rt.block_on(
            fx.executor
                .execute(request("r-1", "echo", json!({})), &context()),
        );
        if denied {
            assert_eq!(reason(&o).code, ReasonCode::GateDenied, "{o:?}");
            assert!(
                fx.recorder.decided("r-1", Stage::Authorize).is_empty(),
                "gate before policy"
            );
        } else {
            assert!(o.is_success());
            // An allowing gate does not skip policy.
            let o = rt.block_on(fx.executor.execute(
                request("r-2", "bash", json!({"command": "rm -rf /"})),
                &context(),
            ));
            assert_eq!(reason(&o).rule.as_deref(), Some("bash(rm:*)"));
        }
    }
}

/// Counts policy evaluations.
struct CountingPolicy {
    inner: Arc<SnapshotPolicy>,
    calls: AtomicUsize,
}
#[async_trait]
impl PolicyEvaluator for CountingPolicy {
    fn snapshot(&self) -> &PolicySnapshotRef {
        self.inner.snapshot()
    }
    async fn evaluate(&self, q: &PolicyQuery<'_>) -> Result<PolicyAnswer, EvaluatorError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.evaluate(q).await
    }
}

#[test]
fn claims_never_override_the_context_and_mismatches_fail_before_policy() {
    let rt = rt();
    let tools = tools();
    let counting = Arc::new(CountingPolicy {
        inner: policy(),
        calls: AtomicUsize::new(0),
    });
    let mut registry = Registry::new();
    for t in &tools {
        registry.register(t.clone()).unwrap();
    }
    let recorder = Arc::new(Recorder::default());
    let executor = ActionExecutor::builder(registry)
        .policy(counting.clone())
        .observer(recorder.clone())
        .backend(CapabilityReport {
            backend: BackendRef::new("in_process").unwrap(),
            entries: vec![],
        })
        .build()
        .unwrap();
    let mallory = PrincipalRef {
        id: PrincipalId::new("mallory").unwrap(),
        kind: PrincipalKind::User,
    };
    let other_scope = ExecutionScopeRef::DurableRun {
        run_id: RunId::new("run-9").unwrap(),
        owner_attempt_id: None,
    };
    let other_policy = PolicySnapshotRef {
        policy_id: "other".into(),
        version: "1".into(),
        digest: Digest::of_bytes(b"other"),
    };
    let cases: Vec<(&str, ExecutionRequest, ExecutionContext)> = vec![
        (
            "principal claim",
            request("r-1", "echo", json!({})).with_principal_claim(mallory),
            context(),
        ),
        (
            "scope",
            ExecutionRequest::new(
                RequestId::new("r-2").unwrap(),
                ActionRef::new("echo").unwrap(),
                json!({}),
                other_scope,
            )
            .unwrap(),
            context(),
        ),
        (
            "policy snapshot",
            request("r-3", "echo", json!({})),
            context().with_policy_snapshot(other_policy),
        ),
        (
            "backend",
            request("r-4", "echo", json!({})),
            ExecutionContext::new(
                ContextId::new("c").unwrap(),
                scope(),
                me(),
                BackendRef::new("subprocess").unwrap(),
            ),
        ),
    ];
    for (what, req, ctx) in cases {
        let id = req.request_id().to_string();
        let o = rt.block_on(executor.execute(req, &ctx));
        assert_eq!(
            reason(&o).code,
            ReasonCode::ContextMismatch,
            "{what}: {o:?}"
        );
        let stages: Vec<Stage> = recorder
            .stages_of(&id)
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        assert_eq!(
            stages,
            [
                Stage::Resolve,
                Stage::Validate,
                Stage::BindContext,
                Stage::Outcome
            ],
            "{what}"
        );
    }
    assert_eq!(counting.calls.load(Ordering::SeqCst), 0, "no policy ran");
    assert_eq!(tool(&tools, "echo").calls(), 0);
    // A matching claim and the exact snapshot are fine.
    let snap = counting.snapshot().clone();
    let o = rt.block_on(executor.execute(
        request("r-5", "echo", json!({})).with_principal_claim(me()),
        &context().with_policy_snapshot(snap),
    ));
    assert!(o.is_success(), "{o:?}");
}

// ---------------------------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------------------------

#[test]
fn bad_input_is_a_typed_outcome_and_nothing_runs() {
    let rt = rt();
    let tools = tools();
    let fx = build(&tools, |b| b);
    let o = rt.block_on(
        fx.executor
            .execute(request("r-1", "nope", json!({})), &context()),
    );
    assert_eq!(reason(&o).code, ReasonCode::UnknownAction);
    assert!(reason(&o).message.contains("nope"));
    let o = rt.block_on(
        fx.executor
            .execute(request("r-2", "strict", json!({"n": "ten"})), &context()),
    );
    assert_eq!(reason(&o).code, ReasonCode::InvalidArguments);
    assert!(reason(&o).message.contains("/n"), "{o:?}");
    let o = rt.block_on(fx.executor.execute(
        request("r-3", "bash", json!({"command": "echo", "extra": 1})),
        &context(),
    ));
    assert_eq!(reason(&o).code, ReasonCode::InvalidArguments);
    // Invalid JSON and non-object arguments cannot even become a request.
    assert!(serde_json::from_str::<ExecutionRequest>("{not json").is_err());
    assert!(
        ExecutionRequest::new(
            RequestId::new("r").unwrap(),
            ActionRef::new("echo").unwrap(),
            json!([1]),
            scope()
        )
        .is_err()
    );
    assert!(tools.iter().all(|t| t.calls() == 0));
}

// ---------------------------------------------------------------------------------------------
// Admission
// ---------------------------------------------------------------------------------------------

#[test]
fn containment_a_backend_does_not_prove_denies_before_anything_starts() {
    let rt = rt();
    let tools = tools();
    let report = CapabilityReport {
        backend: BackendRef::new("in_process").unwrap(),
        entries: vec![CapabilityEntry {
            capability: Capability::NetworkOff,
            status: CapabilityStatus::Unsupported,
            detail: "in-process".into(),
        }],
    };
    let limits = Arc::new(Limits::new().max_concurrent(4).unwrap());
    let fx = build(&tools, |b| {
        b.backend(report)
            .require_for("echo", Capability::NetworkOff)
            .capacity(limits.clone())
    });
    let o = rt.block_on(
        fx.executor
            .execute(request("r-1", "echo", json!({})), &context()),
    );
    assert_eq!(reason(&o).code, ReasonCode::Containment, "{o:?}");
    assert!(
        reason(&o).message.contains("network_off (in-process)"),
        "{o:?}"
    );
    assert_eq!(tool(&tools, "echo").calls(), 0);
    assert_eq!(limits.in_flight(), 0);
    // Other actions are not affected.
    assert!(
        rt.block_on(
            fx.executor
                .execute(request("r-2", "null", json!({})), &context())
        )
        .is_success()
    );
}

#[test]
fn optional_containment_not_proven_runs_and_the_outcome_records_the_degradation() {
    let rt = rt();
    let tools = tools();
    let entry = |capability, status, detail: &str| CapabilityEntry {
        capability,
        status,
        detail: detail.into(),
    };
    let report = CapabilityReport {
        backend: BackendRef::new("in_process").unwrap(),
        entries: vec![
            entry(
                Capability::FilesystemWriteRoots,
                CapabilityStatus::Enforced,
                "landlock probe passed",
            ),
            entry(
                Capability::NetworkOff,
                CapabilityStatus::Unsupported,
                "no network namespace",
            ),
            entry(
                Capability::EnvAllowlist,
                CapabilityStatus::Degraded,
                "half an allowlist",
            ),
        ],
    };
    let fx = build(&tools, |b| {
        b.backend(report)
            .require(Capability::FilesystemWriteRoots)
            .containment(Capability::NetworkOff, warden_policy::Requirement::Optional)
            .containment_for(
                "echo",
                Capability::EnvAllowlist,
                warden_policy::Requirement::Optional,
            )
            .containment_for(
                "ambiguous",
                Capability::ResourceLimits,
                warden_policy::Requirement::Optional,
            )
            // Asked for as both: the strictest wins.
            .containment_for(
                "null",
                Capability::NetworkOff,
                warden_policy::Requirement::Required,
            )
    });
    let run = |id: &str, action: &str| {
        rt.block_on(
            fx.executor
                .execute(request(id, action, json!({})), &context()),
        )
    };
    let plan = fx
        .executor
        .plan(&ActionRef::new("echo").unwrap(), &context())
        .unwrap();
    assert_eq!(
        plan.required_containment(),
        [Capability::FilesystemWriteRoots]
    );
    assert_eq!(
        plan.optional_containment(),
        [Capability::NetworkOff, Capability::EnvAllowlist]
    );

    // Proceeds, and says exactly what was not proven, with the backend's evidence.
    let o = run("r-1", "echo");
    assert!(o.is_success(), "{o:?}");
    assert_eq!(
        o.degradations(),
        [
            entry(
                Capability::NetworkOff,
                CapabilityStatus::Unsupported,
                "no network namespace"
            ),
            entry(
                Capability::EnvAllowlist,
                CapabilityStatus::Degraded,
                "half an allowlist"
            ),
        ]
    );
    let json = serde_json::to_value(&o).unwrap();
    assert_eq!(json["degradations"][0]["capability"], "network_off");
    assert_eq!(tool(&tools, "echo").calls(), 1);
    // A failure and an ambiguous result carry it too; a capability the report does not
    // mention is unsupported.
    let o = run("r-2", "fail");
    assert!(matches!(o, ExecutionOutcome::Failed { .. }), "{o:?}");
    assert_eq!(o.degradations().len(), 1);
    let o = run("r-3", "ambiguous");
    assert_eq!(o.status(), "ambiguous");
    assert_eq!(
        o.degradations()
            .iter()
            .map(|e| (e.capability, e.status))
            .collect::<Vec<_>>(),
        [
            (Capability::NetworkOff, CapabilityStatus::Unsupported),
            (Capability::ResourceLimits, CapabilityStatus::Unsupported)
        ]
    );
    // Required for this action: denied before it starts, whatever is optional elsewhere.
    let o = run("r-4", "null");
    assert_eq!(reason(&o).code, ReasonCode::Containment, "{o:?}");
    assert!(o.degradations().is_empty());
    assert_eq!(tool(&tools, "null").calls(), 0);
    // Nothing ran (the policy denied): nothing ran degraded.
    let o = run("r-5", "deploy");
    assert_eq!(o.status(), "escalated");
    assert!(o.degradations().is_empty());
    // Everything proven: no degradation.
    let fx = build(&tools, |b| {
        b.backend(CapabilityReport {
            backend: BackendRef::new("in_process").unwrap(),
            entries: vec![entry(
                Capability::NetworkOff,
                CapabilityStatus::Enforced,
                "probe passed",
            )],
        })
        .containment(Capability::NetworkOff, warden_policy::Requirement::Optional)
    });
    let o = rt.block_on(
        fx.executor
            .execute(request("r-6", "echo", json!({})), &context()),
    );
    assert!(o.is_success() && o.degradations().is_empty(), "{o:?}");
    assert!(
        !serde_json::to_string(&o).unwrap().contains("degradations"),
        "an empty list is not written"
    );
}

#[test]
fn a_deadline_during_a_degraded_call_keeps_the_degradation() {
    let rt = rt();
    let tools = tools();
    let fx = build(&tools, |b| {
        b.backend(CapabilityReport {
            backend: BackendRef::new("in_process").unwrap(),
            entries: vec![],
        })
        .containment(Capability::NetworkOff, warden_policy::Requirement::Optional)
    });
    let deadline = Timestamp(SystemClock.now().unix_millis() + 50);
    let o = rt.block_on(fx.executor.execute(
        request("r-1", "slow", json!({})).with_deadline(deadline),
        &context(),
    ));
    assert_eq!(o.status(), "timed_out");
    assert_eq!(o.call_executed(), Some(true));
    assert_eq!(o.degradations()[0].capability, Capability::NetworkOff);
    // Before the call: nothing ran, nothing degraded.
    let o = rt.block_on(fx.executor.execute(
        request("r-2", "slow", json!({})).with_deadline(Timestamp(1)),
        &context(),
    ));
    assert_eq!(o.call_executed(), Some(false));
    assert!(o.degradations().is_empty());
}

#[test]
fn a_policy_containment_table_maps_onto_per_capability_requirements() {
    use warden_policy::{Containment, NetworkRequirement, Requirement};
    let tools = tools();
    let table = Containment {
        write_roots: Requirement::Optional,
        network_off: NetworkRequirement::Allowed,
        env_allowlist: Requirement::Required,
        env: vec!["PATH".into()],
        process_isolation: Requirement::Optional,
    };
    let fx = build(&tools, |b| b.policy_containment_for("bash", &table));
    let plan = |name: &str| {
        fx.executor
            .plan(&ActionRef::new(name).unwrap(), &context())
            .unwrap()
    };
    assert_eq!(
        plan("bash").required_containment(),
        [Capability::EnvAllowlist]
    );
    assert_eq!(
        plan("bash").optional_containment(),
        [
            Capability::FilesystemWriteRoots,
            Capability::ProcessIsolation,
            Capability::DescriptorIsolation
        ]
    );
    assert!(plan("echo").required_containment().is_empty());
    assert!(plan("echo").optional_containment().is_empty());
    // The default table asks for everything, strictly.
    let fx = build(&tools, |b| {
        b.policy_containment_for("bash", &Containment::default())
    });
    let plan = fx
        .executor
        .plan(&ActionRef::new("bash").unwrap(), &context())
        .unwrap();
    assert_eq!(
        plan.required_containment(),
        [
            Capability::FilesystemWriteRoots,
            Capability::EnvAllowlist,
            Capability::ProcessIsolation,
            Capability::DescriptorIsolation,
            Capability::NetworkOff,
            Capability::UnixSocketsOff
        ]
    );
}

#[test]
fn per_call_hints_come_from_the_tool_for_valid_arguments_only() {
    struct Hinted(ActionDescriptor);
    #[async_trait]
    impl Tool for Hinted {
        fn descriptor(&self) -> &ActionDescriptor {
            &self.0
        }
        fn hints_for(&self, arguments: &Map<String, Value>) -> Hints {
            Hints {
                read_only: Some(arguments.get("mode") == Some(&json!("look"))),
                ..Hints::default()
            }
        }
        async fn invoke(&self, _: InvocationToken, _: Value) -> Result<Value, ToolError> {
            panic!("hints never invoke")
        }
    }
    let d = ActionDescriptor::new("hinted", "1", ActionSource::Builtin {})
        .unwrap()
        .with_input_schema(json!({
            "type": "object",
            "properties": {"mode": {"type": "string"}},
            "additionalProperties": false
        }))
        .unwrap();
    let mut registry = Registry::new();
    registry.register(Arc::new(Hinted(d))).unwrap();
    for t in tools() {
        registry.register(t).unwrap();
    }
    let r = registry
        .resolve(&ActionRef::new("hinted").unwrap())
        .unwrap();
    let args = |v: Value| v.as_object().unwrap().clone();
    assert!(
        r.hints_for(&args(json!({"mode": "look"})))
            .effective()
            .read_only
    );
    assert!(
        !r.hints_for(&args(json!({"mode": "touch"})))
            .effective()
            .read_only
    );
    // Arguments the tool could not run with get the static (worst-case) hints.
    assert_eq!(r.hints_for(&args(json!({"other": 1}))), Hints::UNKNOWN);
    // A tool that does not refine them reports its descriptor's.
    let echo = registry.resolve(&ActionRef::new("echo").unwrap()).unwrap();
    assert_eq!(echo.hints_for(&Map::new()), echo.descriptor().hints());
}

struct FixedClock(AtomicUsize);
impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        Timestamp(1_000_000 + self.0.load(Ordering::SeqCst) as u64)
    }
}

#[test]
fn token_buckets_defer_with_a_retry_time() {
    let rt = rt();
    let tools = tools();
    let clock = Arc::new(FixedClock(AtomicUsize::new(0)));
    let limits = Arc::new(Limits::new().rate_for("echo", 1.0, 2).unwrap());
    let fx = build(&tools, |b| b.capacity(limits.clone()).clock(clock.clone()));
    let run = |id: &str| {
        rt.block_on(
            fx.executor
                .execute(request(id, "echo", json!({})), &context()),
        )
    };
    assert!(run("r-1").is_success());
    assert!(run("r-2").is_success());
    let o = run("r-3");
    match &o {
        ExecutionOutcome::Deferred {
            retry_at, reason, ..
        } => {
            assert_eq!(*retry_at, Some(Timestamp(1_001_000)));
            assert_eq!(reason.code, ReasonCode::Capacity);
        }
        other => panic!("{other:?}"),
    }
    clock.0.store(1_000, Ordering::SeqCst);
    assert!(run("r-4").is_success());
    assert_eq!(tool(&tools, "echo").calls(), 3);
    assert!(Limits::new().max_concurrent(0).is_err());
    assert!(Limits::new().rate(0.0, 1).is_err());
}

#[test]
fn concurrency_limits_hold_under_a_thousand_concurrent_requests() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let tools = vec![
        TestTool::new("echo", Behaviour::Slow(2)),
        TestTool::new("null", Behaviour::Slow(1)),
    ];
    let limits = Arc::new(
        Limits::new()
            .max_concurrent(8)
            .unwrap()
            .max_concurrent_for("echo", 3)
            .unwrap(),
    );
    let mut registry = Registry::new();
    for t in &tools {
        registry.register(t.clone()).unwrap();
    }
    let allow = snapshot("default = \"allow\"\n");
    let executor = Arc::new(
        ActionExecutor::builder(registry)
            .policy(Arc::new(SnapshotPolicy::new(allow)))
            .capacity(limits.clone())
            .build()
            .unwrap(),
    );
    let outcomes = rt.block_on(async {
        let mut handles = Vec::new();
        for i in 0..1_000 {
            let executor = executor.clone();
            handles.push(tokio::spawn(async move {
                let action = if i % 2 == 0 { "echo" } else { "null" };
                executor
                    .execute(request(&format!("r-{i}"), action, json!({})), &context())
                    .await
            }));
        }
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.unwrap());
        }
        out
    });
    let succeeded = outcomes.iter().filter(|o| o.is_success()).count();
    let deferred = outcomes.iter().filter(|o| o.status() == "deferred").count();
    assert_eq!(succeeded + deferred, 1_000);
    assert!(succeeded >= 8, "{succeeded}");
    let echo_peak = tools[0].peak.load(Ordering::SeqCst);
    let total_peak = tools[0]
        .peak
        .load(Ordering::SeqCst)
        .max(tools[1].peak.load(Ordering::SeqCst));
    assert!(echo_peak <= 3, "per-action limit: {echo_peak}");
    assert!(total_peak <= 8, "global limit: {total_peak}");
    assert_eq!(limits.in_flight(), 0);
    assert_eq!(limits.in_flight_for("echo"), 0);
    assert_eq!(tools[0].calls() + tools[1].calls(), succeeded);
}

fn proptest_config() -> ProptestConfig {
    let cases = if std::env::var_os("CI").is_some() {
        48
    } else {
        128
    };
    ProptestConfig::with_cases(cases)
}

proptest! {
    #![proptest_config(proptest_config())]

    /// Whatever mix of successes, failures, panics, ambiguity, deadlines and cancellations
    /// runs concurrently, every lease and idempotency reservation comes back.
    #[test]
    fn leases_never_leak_under_panics_and_cancellations(
        ops in proptest::collection::vec((0u8..7, 0u64..6, any::<bool>()), 1..24),
    ) {
        let rt = rt();
        let tools = vec![
            TestTool::new("echo", Behaviour::Echo),
            TestTool::new("fail", Behaviour::Fail),
            TestTool::new("panic", Behaviour::Panic),
            TestTool::new("ambiguous", Behaviour::Ambiguous),
            TestTool::new("slow", Behaviour::Slow(3)),
        ];
        let limits = Arc::new(Limits::new().max_concurrent(4).unwrap().max_concurrent_per_action(2).unwrap());
        let mut registry = Registry::new();
        for t in &tools {
            registry.register(t.clone()).unwrap();
        }
        let executor = Arc::new(
            ActionExecutor::builder(registry)
                .policy(Arc::new(SnapshotPolicy::new(snapshot("default = \"allow\"\n"))))
                .capacity(limits.clone())
                .build()
                .unwrap(),
        );
        rt.block_on(async {
            let mut handles = Vec::new();
            for (i, (kind, delay, keyed)) in ops.iter().copied().enumerate() {
                let executor = executor.clone();
                let action = ["echo", "fail", "panic", "ambiguous", "slow", "slow", "slow"][kind as usize];
                let mut req = request(&format!("r-{i}"), action, json!({"i": i}));
                if keyed {
                    req = req.with_idempotency_key(format!("k-{}", i % 3)).unwrap();
                }
                if kind == 5 {
                    req = req.with_deadline(Timestamp(SystemClock.now().unix_millis() + delay));
                }
                let token = CancelToken::new();
                if kind == 6 {
                    let t = token.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(delay)).await;
                        t.cancel();
                    });
                }
                let h = tokio::spawn(async move {
                    executor.execute_with(req, &context(), ExecuteOptions::new().cancel(token)).await
                });
                // Sometimes abort the caller's task outright: the dropped future releases too.
                if delay == 0 && kind == 4 {
                    h.abort();
                    continue;
                }
                handles.push(h);
            }
            for h in handles {
                let o = h.await.unwrap();
                prop_assert_eq!(o.profile(), RuntimeProfile::Minimal);
            }
            // Aborted tasks finish dropping before the runtime goes idle.
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok(())
        })?;
        prop_assert_eq!(limits.in_flight(), 0);
        for t in &tools {
            prop_assert_eq!(limits.in_flight_for(t.descriptor.name()), 0);
        }
        // Keys are free again (or recorded): a fresh keyed call is never "in flight".
        let o = rt.block_on(executor.execute(
            request("r-after", "echo", json!({"i": 0})).with_idempotency_key("k-0").unwrap(),
            &context(),
        ));
        prop_assert_ne!(o.status(), "deferred");
    }
}

// ---------------------------------------------------------------------------------------------
// Approvals
// ---------------------------------------------------------------------------------------------

fn escalated_approval(o: &ExecutionOutcome) -> ApprovalRequest {
    match o {
        ExecutionOutcome::Escalated { approval, .. } => approval.clone(),
        other => panic!("expected an escalation, got {other:?}"),
    }
}

#[test]
fn receipts_are_bound_to_the_call_and_used_once() {
    let rt = rt();
    let tools = tools();
    let fx = build(&tools, |b| b);
    let ctx = context();
    let args = json!({"command": "git push origin main"});
    let o = rt.block_on(
        fx.executor
            .execute(request("r-1", "bash", args.clone()), &ctx),
    );
    let approval = escalated_approval(&o);
    assert_eq!(approval.authority, "human");
    assert_eq!(approval.arguments_digest, Digest::of_json(&args).unwrap());
    assert_eq!(
        approval.policy_digest.as_ref(),
        Some(&PolicyEvaluator::snapshot(&*policy()).digest)
    );
    assert_eq!(approval.reason.rule.as_deref(), Some("bash(git push:*)"));
    assert_eq!(
        tool(&tools, "bash").calls(),
        0,
        "escalation never runs the call"
    );
    let receipt = receipt_for(&approval, approval.arguments_digest.clone(), 60_000);
    let with = |r: &ApprovalReceipt| ExecuteOptions::new().approval(r.clone());

    // The same request id again: an approval starts a new attempt.
    let o = rt.block_on(fx.executor.execute_with(
        request("r-1", "bash", args.clone()),
        &ctx,
        with(&receipt),
    ));
    assert!(reason(&o).message.contains("new request id"), "{o:?}");
    // Other arguments: not covered.
    let o = rt.block_on(fx.executor.execute_with(
        request("r-2", "bash", json!({"command": "git push --force"})),
        &ctx,
        with(&receipt),
    ));
    assert_eq!(o.status(), "escalated");
    assert!(reason(&o).message.contains("arguments differ"), "{o:?}");
    // Expired: not covered.
    let mut expired = receipt_for(&approval, approval.arguments_digest.clone(), 1);
    std::thread::sleep(Duration::from_millis(5));
    let o = rt.block_on(fx.executor.execute_with(
        request("r-3", "bash", args.clone()),
        &ctx,
        with(&expired),
    ));
    assert!(reason(&o).message.contains("expired"), "{o:?}");
    expired = receipt.clone();
    // A new attempt with the bound receipt runs, through every stage.
    let o = rt.block_on(fx.executor.execute_with(
        request("r-4", "bash", args.clone()),
        &ctx,
        with(&expired),
    ));
    assert!(o.is_success(), "{o:?}");
    let stages: Vec<Stage> = fx
        .recorder
        .stages_of("r-4")
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert_eq!(stages, full_order());
    // Used once.
    let o = rt.block_on(fx.executor.execute_with(
        request("r-5", "bash", args.clone()),
        &ctx,
        with(&receipt),
    ));
    assert!(reason(&o).message.contains("already used"), "{o:?}");
    assert_eq!(tool(&tools, "bash").calls(), 1);
}

/// With `[approvers]` in the policy, the library takes only a receipt signed by a declared
/// approver for this policy: an unsigned one (the local-operator kind), one signed by another
/// key, or one signed for another policy answers nothing, and a reviewer's unsigned approval
/// does not either.
#[test]
fn with_declared_approvers_only_a_signed_receipt_answers_an_ask() {
    use warden_policy::receipt::SigningKey;
    let rt = rt();
    let tools = tools();
    let ops = SigningKey::from_seed(&[7; 32]);
    let intruder = SigningKey::from_seed(&[8; 32]);
    let text = format!(
        "{POLICY}\n[approvers.ops]\nkeys = [\"{}\"]\n",
        ops.verifying_key().to_hex()
    );
    let snap = snapshot(&text);
    let mut registry = Registry::new();
    for t in &tools {
        registry.register(t.clone()).unwrap();
    }
    let fx = Fixture {
        executor: Arc::new(
            ActionExecutor::builder(registry)
                .policy(Arc::new(SnapshotPolicy::new(snap.clone())))
                .build()
                .unwrap(),
        ),
        recorder: Arc::new(Recorder::default()),
    };
    let ctx = context();
    let args = json!({"command": "git push origin main"});
    let approval = escalated_approval(
        &rt.block_on(
            fx.executor
                .execute(request("s-1", "bash", args.clone()), &ctx),
        ),
    );
    let now = SystemClock.now().unix_millis();
    let signed = |key: &SigningKey, policy: &Digest, id: &str| {
        warden_policy::ReceiptDraft {
            id: ApprovalId::new(id).unwrap(),
            approver: "ops".into(),
            action: "bash".into(),
            arguments_digest: approval.arguments_digest.clone(),
            policy_digest: policy.clone(),
            issued_at: Timestamp(now - 1_000),
            expires_at: Timestamp(now + 60_000),
        }
        .sign(key)
        .unwrap()
        .to_approval()
        .unwrap()
    };
    let run = |id: &str, receipt: ApprovalReceipt| {
        rt.block_on(fx.executor.execute_with(
            request(id, "bash", args.clone()),
            &ctx,
            ExecuteOptions::new().approval(receipt),
        ))
    };
    let unsigned = receipt_for(&approval, approval.arguments_digest.clone(), 60_000);
    let o = run("s-2", unsigned);
    assert_eq!(o.status(), "escalated");
    assert!(
        reason(&o).message.contains("not signed by an approver"),
        "{o:?}"
    );
    let o = run("s-3", signed(&intruder, snap.digest(), "rcpt-intruder"));
    assert!(
        reason(&o).message.contains("signature does not verify"),
        "{o:?}"
    );
    let other = Digest::of_bytes(b"another policy");
    let o = run("s-4", signed(&ops, &other, "rcpt-other-policy"));
    assert_eq!(o.status(), "escalated", "{o:?}");
    assert_eq!(tool(&tools, "bash").calls(), 0);
    // A reviewer's unsigned approval is refused the same way.
    let reviewed = rt
        .block_on(
            ReviewLoop::new(Arc::new(Approver::new())).resolve(
                &fx.executor,
                &request("s-5", "bash", args.clone()),
                &ctx,
                &rt.block_on(
                    fx.executor
                        .execute(request("s-5", "bash", args.clone()), &ctx),
                ),
            ),
        )
        .unwrap();
    assert_ne!(reviewed.status(), "succeeded", "{reviewed:?}");
    assert_eq!(tool(&tools, "bash").calls(), 0);
    // Signed by the declared approver for this policy: it runs, once.
    let good = signed(&ops, snap.digest(), "rcpt-good");
    assert!(run("s-6", good.clone()).is_success());
    assert!(reason(&run("s-7", good)).message.contains("already used"));
    assert_eq!(tool(&tools, "bash").calls(), 1);
}

struct Refuser;
#[async_trait]
impl Reviewer for Refuser {
    async fn review(&self, _: &ApprovalRequest) -> ReviewVerdict {
        ReviewVerdict::Refused {
            reason: DecisionReason::new(ReasonCode::ApprovalRefused, "no"),
        }
    }
}

struct Sleeper;
#[async_trait]
impl Reviewer for Sleeper {
    async fn review(&self, _: &ApprovalRequest) -> ReviewVerdict {
        tokio::time::sleep(Duration::from_secs(60)).await;
        ReviewVerdict::Pending {}
    }
}

struct Waiting;
#[async_trait]
impl Reviewer for Waiting {
    async fn review(&self, _: &ApprovalRequest) -> ReviewVerdict {
        ReviewVerdict::Pending {}
    }
}

/// Approves when its flag is set, refuses otherwise.
struct Toggle(std::sync::atomic::AtomicBool);
#[async_trait]
impl Reviewer for Toggle {
    async fn review(&self, request: &ApprovalRequest) -> ReviewVerdict {
        if self.0.load(Ordering::SeqCst) {
            Approver::new().review(request).await
        } else {
            Refuser.review(request).await
        }
    }
}

#[test]
fn the_reviewer_denial_bound_stops_the_run() {
    let rt = rt();
    let tools = tools();
    let fx = build(&tools, |b| b);
    let ctx = context();
    // Three consecutive refusals.
    let review = ReviewLoop::new(Arc::new(Refuser));
    for i in 0..3 {
        let req = request(&format!("r-{i}"), "deploy", json!({}));
        let o = rt.block_on(fx.executor.execute(req.clone(), &ctx));
        let answered = rt.block_on(review.resolve(&fx.executor, &req, &ctx, &o));
        if i < 2 {
            let denied = answered.unwrap();
            assert_eq!(reason(&denied).code, ReasonCode::ApprovalRefused);
        } else {
            match answered {
                Err(ApprovalError::DenialBound {
                    consecutive,
                    outcome,
                    ..
                }) => {
                    assert_eq!(consecutive, 3);
                    assert_eq!(outcome.status(), "denied");
                }
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(tool(&tools, "deploy").calls(), 0);
    // Ten within the last fifty, never three in a row; a timeout counts as a refusal.
    let toggle = Arc::new(Toggle(std::sync::atomic::AtomicBool::new(false)));
    let review = ReviewLoop::new(toggle.clone()).with_bound(DenialBound {
        consecutive: 3,
        total: 10,
        window: 50,
    });
    let mut hit = None;
    for i in 0..40 {
        toggle.0.store(i % 3 == 2, Ordering::SeqCst); // refuse, refuse, approve, …
        let req = request(&format!("t-{i}"), "deploy", json!({"i": i}));
        let o = rt.block_on(fx.executor.execute(req.clone(), &ctx));
        if let Err(ApprovalError::DenialBound { in_window, .. }) =
            rt.block_on(review.resolve(&fx.executor, &req, &ctx, &o))
        {
            hit = Some((i, in_window));
            break;
        }
    }
    assert_eq!(
        hit,
        Some((13, 10)),
        "the tenth refusal within the window stops the run"
    );
    let review = ReviewLoop::new(Arc::new(Sleeper)).with_timeout(Duration::from_millis(10));
    let req = request("s-1", "deploy", json!({}));
    let o = rt.block_on(fx.executor.execute(req.clone(), &ctx));
    let denied = rt
        .block_on(review.resolve(&fx.executor, &req, &ctx, &o))
        .unwrap();
    assert!(reason(&denied).message.contains("timed out"));
    assert_eq!(review.consecutive_refusals(), 1);
    review.reset();
    assert_eq!(review.consecutive_refusals(), 0);
    // Pending leaves the escalation as it was; a non-escalation is refused.
    let review = ReviewLoop::new(Arc::new(Waiting));
    assert_eq!(
        rt.block_on(review.resolve(&fx.executor, &req, &ctx, &o))
            .unwrap(),
        o
    );
    let ok = rt.block_on(fx.executor.execute(request("ok", "echo", json!({})), &ctx));
    assert!(matches!(
        rt.block_on(review.resolve(&fx.executor, &req, &ctx, &ok)),
        Err(ApprovalError::NotEscalated { .. })
    ));
}

#[test]
fn the_lionagi_escalation_callback_semantics() {
    let rt = rt();
    let ctx = context();
    let run = |answer: fn(&str, &Map<String, Value>) -> CallbackResult, args: Value| {
        let tools = tools();
        let fx = build(&tools, |b| b);
        let reviewer = EscalationCallback::new(answer, me(), Arc::new(SystemClock), 60_000);
        let review = ReviewLoop::new(Arc::new(reviewer));
        let req = request("r-1", "bash", args);
        let o = rt.block_on(fx.executor.execute(req.clone(), &ctx));
        assert_eq!(o.status(), "escalated");
        let answered = rt
            .block_on(review.resolve(&fx.executor, &req, &ctx, &o))
            .unwrap();
        let seen = tool(&tools, "bash").seen.lock().unwrap().clone();
        (answered, seen)
    };
    let push = json!({"command": "git push origin"});
    // true → allow unchanged.
    let (o, seen) = run(|_, _| Ok(json!(true)), push.clone());
    assert!(o.is_success(), "{o:?}");
    assert_eq!(seen, std::slice::from_ref(&push));
    // A mapping → replace, then re-check: allowed arguments run…
    let (o, seen) = run(|_, _| Ok(json!({"command": "echo safe"})), push.clone());
    assert!(o.is_success(), "{o:?}");
    assert_eq!(seen, [json!({"command": "echo safe"})]);
    // …denied ones are denied by the re-check, schema-invalid ones by re-validation.
    let (o, seen) = run(|_, _| Ok(json!({"command": "rm -rf /"})), push.clone());
    assert_eq!(reason(&o).rule.as_deref(), Some("bash(rm:*)"), "{o:?}");
    assert!(seen.is_empty());
    let (o, _) = run(|_, _| Ok(json!({"cmd": "x"})), push.clone());
    assert_eq!(reason(&o).code, ReasonCode::InvalidArguments, "{o:?}");
    // Anything else, an exception, or a panic → deny.
    for answer in [
        (|_: &str, _: &Map<String, Value>| Ok(json!(false)))
            as fn(&str, &Map<String, Value>) -> CallbackResult,
        |_, _| Ok(json!("yes")),
        |_, _| Err("callback raised".into()),
        |_, _| panic!("callback panicked"),
    ] {
        let (o, seen) = run(answer, push.clone());
        assert_eq!(reason(&o).code, ReasonCode::ApprovalRefused, "{o:?}");
        assert!(seen.is_empty());
    }
}

// ---------------------------------------------------------------------------------------------
// Stop, idempotency
// ---------------------------------------------------------------------------------------------

struct StopOnRm;
#[async_trait]
impl SecurityHook for StopOnRm {
    fn name(&self) -> &str {
        "stop_on_rm"
    }
    async fn check(&self, call: &CallView<'_>) -> Result<SecurityVerdict, HandlerError> {
        let cmd = call
            .arguments
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if cmd.contains("shutdown") {
            return Ok(SecurityVerdict::Deny {
                reason: DecisionReason::new(ReasonCode::Permission, "never"),
                stop: true,
            });
        }
        Ok(SecurityVerdict::Pass)
    }
}

#[test]
fn a_stopping_denial_cancels_the_turns_other_pending_calls() {
    let rt = rt();
    let tools = tools();
    let fx = build(&tools, |b| {
        b.handlers(Handlers::new().security(InterceptorScope::All, Arc::new(StopOnRm)))
    });
    let outs = rt.block_on(fx.executor.execute_turn(
        vec![
            request("r-slow", "slow", json!({})),
            request("r-stop", "bash", json!({"command": "echo shutdown"})),
            request("r-slow-2", "slow", json!({})),
        ],
        &context(),
    ));
    let statuses: Vec<&str> = outs.iter().map(ExecutionOutcome::status).collect();
    assert_eq!(statuses, ["cancelled", "denied", "cancelled"]);
    assert!(matches!(
        &outs[1],
        ExecutionOutcome::Denied { stop: true, .. }
    ));
    assert_eq!(outs[0].request_id().as_str(), "r-slow");
}

#[test]
fn idempotency_keys_return_the_recorded_outcome() {
    let rt = rt();
    let tools = tools();
    let fx = build(&tools, |b| b);
    let ctx = context();
    let keyed = |id: &str, args: Value| {
        request(id, "echo", args)
            .with_idempotency_key("key-1")
            .unwrap()
    };
    let first = rt.block_on(fx.executor.execute(keyed("r-1", json!({"n": 1})), &ctx));
    let again = rt.block_on(fx.executor.execute(keyed("r-2", json!({"n": 1})), &ctx));
    assert!(first.is_success());
    assert_eq!(again, first, "the recorded outcome, not a new run");
    assert_eq!(tool(&tools, "echo").calls(), 1);
    let other = rt.block_on(fx.executor.execute(keyed("r-3", json!({"n": 2})), &ctx));
    assert_eq!(reason(&other).code, ReasonCode::InvalidArguments);
    // Outcomes where nothing ran are not recorded: a retry runs.
    let denied = |id: &str| {
        request(id, "bash", json!({"command": "rm x"}))
            .with_idempotency_key("key-2")
            .unwrap()
    };
    assert_eq!(
        rt.block_on(fx.executor.execute(denied("r-4"), &ctx))
            .status(),
        "denied"
    );
    // In flight: a concurrent duplicate is deferred, not run twice.
    let slow = |id: &str| {
        request(id, "slow", json!({}))
            .with_idempotency_key("key-3")
            .unwrap()
    };
    let ex = fx.executor.clone();
    let second = rt.block_on(async move {
        let running = ex.clone();
        let first = tokio::spawn(async move { running.execute(slow("r-5"), &context()).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let second = ex.execute(slow("r-6"), &context()).await;
        first.abort();
        second
    });
    assert_eq!(second.status(), "deferred");
    assert!(reason(&second).message.contains("in flight"));
}

// ---------------------------------------------------------------------------------------------
// Programmable permissions through the policy adapter
// ---------------------------------------------------------------------------------------------

/// A snapshot that declares programmable permissions runs them in the executor: a deny
/// permission refuses with the `permission` code, a snapshot decided without its permissions
/// denies everything, and nothing the permission refused was invoked.
#[test]
fn programmable_permissions_run_in_the_executor_and_fail_closed_without_them() {
    use warden_policy::permission::{Answer, PermissionInfo, PermissionKind, PermissionSet};
    let set = PermissionSet::default()
        .register(
            PermissionInfo::new("no-deploy", "1", PermissionKind::Deny),
            |call: &warden_policy::Call| {
                Ok(
                    (call.tool == "echo" && call.args.get("deploy").is_some()).then(|| {
                        Answer::Denied {
                            reason: "deploys go through the release train".into(),
                            stop: true,
                        }
                    }),
                )
            },
        )
        .unwrap();
    let file = LoadedPolicy::from_text(
        "default = \"allow\"\n".into(),
        Format::Toml,
        "p.toml",
        "p",
        None,
    )
    .unwrap();
    let snap = Arc::new(
        PolicyBuilder::new()
            .file(&file)
            .unwrap()
            .permissions(&set)
            .unwrap()
            .build()
            .unwrap(),
    );
    let tools = tools();
    let run = |policy: SnapshotPolicy, args: Value| {
        let mut registry = Registry::new();
        for t in &tools {
            registry.register(t.clone()).unwrap();
        }
        let executor = ActionExecutor::builder(registry)
            .policy(Arc::new(policy))
            .build()
            .unwrap();
        rt().block_on(executor.execute(request("r-perm", "echo", args), &context()))
    };
    let with = || SnapshotPolicy::new(snap.clone()).with_permissions(Arc::new(set.clone()));
    let ok = run(with(), json!({"x": 1}));
    assert!(ok.is_success(), "{ok:?}");
    let denied = run(with(), json!({"deploy": "prod"}));
    assert_eq!(denied.status(), "denied", "{denied:?}");
    assert_eq!(reason(&denied).code, ReasonCode::Permission);
    assert!(reason(&denied).message.contains("release train"));
    // Without its permissions, the snapshot denies: a forgotten deny permission never allows.
    let forgot = run(SnapshotPolicy::new(snap.clone()), json!({"x": 1}));
    assert_eq!(forgot.status(), "denied", "{forgot:?}");
    assert_eq!(tool(&tools, "echo").calls(), 1, "only the allowed call ran");
}
