//! The composition entry point: a runtime built from a policy enforces every table the policy
//! declares, or refuses to start with a typed error naming what is missing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use serde_json::{Value, json};
use warden_contracts::*;
use warden_evidence::{FixedClock, GovernedStore, MemoryStore};
use warden_executor::*;
use warden_policy::permission::{Answer, PermissionInfo, PermissionKind, PermissionSet};
use warden_policy::receipt::{ReceiptDraft, SigningKey};
use warden_policy::{Call, Decision, PolicyBuilder, PolicySnapshot};

/// A tool built into the runtime, with the hints its code vouches for; counts its calls.
struct Counted {
    descriptor: ActionDescriptor,
    calls: AtomicUsize,
}

impl Counted {
    fn new(name: &str, read_only: bool) -> Arc<Self> {
        let hints = if read_only {
            Hints {
                read_only: Some(true),
                open_world: Some(false),
                ..Hints::default()
            }
        } else {
            Hints {
                destructive: Some(true),
                open_world: Some(false),
                ..Hints::default()
            }
        };
        Arc::new(Self {
            descriptor: ActionDescriptor::new(name, "1", ActionSource::Builtin {})
                .unwrap()
                .with_hints(hints),
            calls: AtomicUsize::new(0),
        })
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Tool for Counted {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.descriptor
    }
    async fn invoke(&self, _: InvocationToken, arguments: Value) -> Result<Value, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(json!({"echo": arguments}))
    }
}

struct Tools {
    read: Arc<Counted>,
    delete: Arc<Counted>,
    shell: Arc<Counted>,
}

impl Tools {
    fn new() -> Self {
        Self {
            read: Counted::new("read_note", true),
            delete: Counted::new("delete_note", false),
            shell: Counted::new("shell", false),
        }
    }

    fn registry(&self) -> Registry {
        let mut registry = Registry::new();
        registry.register(self.read.clone()).unwrap();
        registry.register(self.delete.clone()).unwrap();
        registry.register(self.shell.clone()).unwrap();
        registry
    }
}

fn key() -> SigningKey {
    SigningKey::from_seed(&[9; 32])
}

/// Every table the acceptance names: guards, containment, modes, approvers.
fn policy() -> Arc<PolicySnapshot> {
    let text = format!(
        r#"
default = "deny"
allow = ["read_note", "delete_note", "shell"]

[guards]
secrets = "block"

[containment]
network_off = "required"

[modes]
active = ["apply_approved"]

[approvers.maintainers]
keys = ["{}"]
"#,
        key().verifying_key().to_hex()
    );
    Arc::new(PolicySnapshot::from_toml(&text, "/repo").unwrap())
}

/// A backend that proves nothing but the environment allowlist.
fn backend() -> CapabilityReport {
    CapabilityReport {
        backend: BackendRef::new("test_backend").unwrap(),
        entries: vec![CapabilityEntry {
            capability: Capability::NetworkOff,
            status: CapabilityStatus::Unsupported,
            detail: "no network namespace here".into(),
        }],
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn code(o: &ExecutionOutcome) -> ReasonCode {
    let v = serde_json::to_value(o).unwrap();
    let reason = v.get("reason").or_else(|| v["approval"].get("reason"));
    serde_json::from_value(reason.unwrap()["code"].clone()).unwrap()
}

/// A receipt signed by a declared approver for exactly `tool` with `arguments`.
fn signed(
    runtime: &Runtime,
    id: &str,
    tool: &str,
    arguments: &Value,
    key: &SigningKey,
) -> ApprovalReceipt {
    let Value::Object(args) = arguments else {
        panic!("arguments are an object")
    };
    let now = SystemClock.now().unix_millis();
    ReceiptDraft {
        id: ApprovalId::new(id).unwrap(),
        approver: "maintainers".into(),
        action: tool.into(),
        arguments_digest: arguments_digest(args).unwrap(),
        policy_digest: runtime.policy().digest().clone(),
        issued_at: Timestamp(now),
        expires_at: Timestamp(now + 60_000),
    }
    .sign(key)
    .unwrap()
    .to_approval()
    .unwrap()
}

#[test]
fn a_runtime_enforces_guards_containment_modes_and_approvers_from_its_policy() {
    let rt = rt();
    let tools = Tools::new();
    let runtime = rt
        .block_on(
            Runtime::builder(policy())
                .tools(tools.registry())
                .effect_backend(backend(), ["shell"])
                .build(),
        )
        .unwrap();

    // Modes: `apply_approved` lets a local read run as the policy decides.
    let o = rt.block_on(runtime.execute("read_note", json!({"id": 1})));
    assert!(o.is_success(), "{o:?}");
    assert_eq!(tools.read.calls(), 1);

    // Guards: a secret in the arguments blocks the call before it runs.
    let token = format!("gh{}_{}", "p", "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5");
    let o = rt.block_on(runtime.execute("read_note", json!({"id": token})));
    assert_eq!(o.status(), "denied", "{o:?}");
    assert_eq!(code(&o), ReasonCode::Transform, "{o:?}");
    assert_eq!(tools.read.calls(), 1);

    // Modes: a destructive call the rules allow is capped to an escalation...
    let args = json!({"id": 7});
    let o = rt.block_on(runtime.execute("delete_note", args.clone()));
    assert_eq!(o.status(), "escalated", "{o:?}");
    assert_eq!(tools.delete.calls(), 0);

    // ...that only a receipt signed by a declared approver answers (approvers).
    let stranger = SigningKey::from_seed(&[3; 32]);
    let forged = signed(&runtime, "rcpt-forged", "delete_note", &args, &stranger);
    let o = rt
        .block_on(runtime.run(ToolCall::new("delete_note", args.clone()).approval(forged)))
        .outcome;
    assert_ne!(o.status(), "succeeded", "{o:?}");
    assert_eq!(tools.delete.calls(), 0);
    let receipt = signed(&runtime, "rcpt-1", "delete_note", &args, &key());
    let o = rt
        .block_on(runtime.run(ToolCall::new("delete_note", args.clone()).approval(receipt.clone())))
        .outcome;
    assert!(o.is_success(), "{o:?}");
    assert_eq!(tools.delete.calls(), 1);
    // Used once.
    let o = rt
        .block_on(runtime.run(ToolCall::new("delete_note", args).approval(receipt)))
        .outcome;
    assert_ne!(o.status(), "succeeded", "{o:?}");
    assert_eq!(tools.delete.calls(), 1);

    // Containment: the process tool's backend does not prove the network off, which the
    // policy requires: denied before it starts, even with a valid receipt.
    let args = json!({"command": "make"});
    let receipt = signed(&runtime, "rcpt-2", "shell", &args, &key());
    let o = rt
        .block_on(runtime.run(ToolCall::new("shell", args).approval(receipt)))
        .outcome;
    assert_eq!(code(&o), ReasonCode::Containment, "{o:?}");
    assert_eq!(tools.shell.calls(), 0);
}

#[test]
fn a_policy_naming_a_permission_that_was_not_supplied_is_refused_at_build() {
    let rt = rt();
    let no_prod =
        |call: &Call| Ok((call.args["target"] == "prod").then(|| Answer::deny("never prod")));
    let set = PermissionSet::new()
        .register(
            PermissionInfo::new("no-prod", "1", PermissionKind::Deny),
            no_prod,
        )
        .unwrap();
    let snapshot = Arc::new(
        PolicyBuilder::new()
            .default(Decision::Allow)
            .permissions(&set)
            .unwrap()
            .build()
            .unwrap(),
    );
    let err = rt
        .block_on(Runtime::builder(snapshot.clone()).build())
        .unwrap_err();
    assert!(
        matches!(&err, ComposeError::MissingPermission { name, version } if name == "no-prod" && version == "1"),
        "{err}"
    );
    assert!(err.to_string().contains("no-prod"), "{err}");

    // A supplied permission the policy does not declare is refused too.
    let plain = Arc::new(
        PolicyBuilder::new()
            .default(Decision::Allow)
            .build()
            .unwrap(),
    );
    let err = rt
        .block_on(Runtime::builder(plain).permissions(Arc::new(set)).build())
        .unwrap_err();
    assert!(
        matches!(err, ComposeError::UndeclaredPermission { .. }),
        "{err}"
    );

    // Supplied, it decides.
    let set = PermissionSet::new()
        .register(
            PermissionInfo::new("no-prod", "1", PermissionKind::Deny),
            no_prod,
        )
        .unwrap();
    let tools = Tools::new();
    let runtime = rt
        .block_on(
            Runtime::builder(snapshot)
                .tools(tools.registry())
                .permissions(Arc::new(set))
                .build(),
        )
        .unwrap();
    let o = rt.block_on(runtime.execute("read_note", json!({"target": "prod"})));
    assert_eq!(code(&o), ReasonCode::Permission, "{o:?}");
    assert!(
        rt.block_on(runtime.execute("read_note", json!({"target": "dev"})))
            .is_success()
    );
}

#[test]
fn an_effect_backend_for_no_registered_tool_is_refused() {
    let rt = rt();
    let tools = Tools::new();
    let err = rt
        .block_on(
            Runtime::builder(policy())
                .tools(tools.registry())
                .effect_backend(backend(), ["bash"])
                .build(),
        )
        .unwrap_err();
    assert!(
        matches!(&err, ComposeError::UnknownTool { name } if name == "bash"),
        "{err}"
    );
    let err = rt
        .block_on(
            Runtime::builder(policy())
                .tools(tools.registry())
                .effect_backend(backend(), Vec::<String>::new())
                .build(),
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            ComposeError::Unenforceable {
                table: "containment",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn guards_composed_by_hand_refuse_every_call_instead_of_doing_nothing() {
    let rt = rt();
    let tools = Tools::new();
    let executor = ActionExecutor::builder(tools.registry())
        .policy(Arc::new(SnapshotPolicy::new(policy())))
        .build()
        .unwrap();
    let scope = ExecutionScopeRef::Ephemeral {
        scope_id: ScopeId::new("s").unwrap(),
    };
    let me = PrincipalRef {
        id: PrincipalId::new("me").unwrap(),
        kind: PrincipalKind::Local,
    };
    let context = ExecutionContext::new(
        ContextId::new("c").unwrap(),
        scope.clone(),
        me,
        BackendRef::new("in_process").unwrap(),
    );
    let request = ExecutionRequest::new(
        RequestId::new("r-1").unwrap(),
        ActionRef::new("read_note").unwrap(),
        json!({"id": 1}),
        scope,
    )
    .unwrap();
    let o = rt.block_on(executor.execute(request, &context));
    assert_eq!(o.status(), "denied", "{o:?}");
    assert_eq!(code(&o), ReasonCode::EvaluatorFailed, "{o:?}");
    assert_eq!(tools.read.calls(), 0);
}

#[test]
fn a_reviewer_answers_escalations_and_its_denial_bound_stops_the_turn() {
    let rt = rt();
    let tools = Tools::new();
    let snapshot = Arc::new(
        PolicySnapshot::from_toml(
            "default = \"deny\"\nallow = [\"read_note\"]\nask = [\"delete_note\"]\n",
            "/repo",
        )
        .unwrap(),
    );
    let answers = Arc::new(std::sync::Mutex::new(vec![true, false, false, false]));
    let callback = {
        let answers = answers.clone();
        move |_: &str, _: &serde_json::Map<String, Value>| -> CallbackResult {
            Ok(Value::Bool(answers.lock().unwrap().remove(0)))
        }
    };
    let me = PrincipalRef {
        id: PrincipalId::new("reviewer").unwrap(),
        kind: PrincipalKind::Local,
    };
    let reviewer = EscalationCallback::new(callback, me, Arc::new(SystemClock), 60_000);
    let runtime = rt
        .block_on(
            Runtime::builder(snapshot)
                .tools(tools.registry())
                .reviewer(ReviewLoop::new(Arc::new(reviewer)).with_bound(DenialBound {
                    consecutive: 3,
                    total: 0,
                    window: 0,
                }))
                .build(),
        )
        .unwrap();
    let o = rt.block_on(runtime.execute("delete_note", json!({"id": 1})));
    assert!(o.is_success(), "{o:?}");
    assert_eq!(tools.delete.calls(), 1);
    for expect_stop in [false, false, true] {
        let o = rt.block_on(runtime.execute("delete_note", json!({"id": 2})));
        assert!(
            matches!(&o, ExecutionOutcome::Denied { stop, .. } if *stop == expect_stop),
            "{o:?}"
        );
    }
    assert_eq!(tools.delete.calls(), 1);
}

#[test]
fn a_governed_runtime_resumes_its_open_chain_and_recovers_interrupted_runs() {
    let rt = rt();
    let store: Arc<dyn GovernedStore> = Arc::new(MemoryStore::new());
    let clock = Arc::new(FixedClock::new(1_700_000_000_000));
    let snapshot = Arc::new(PolicySnapshot::from_toml("default = \"allow\"\n", "/repo").unwrap());
    let governed = |chain: &str| Governed::new(store.clone(), chain).clock(clock.clone());
    let tools = Tools::new();
    // An interrupted run: its boundary left open.
    let crashed = rt
        .block_on(
            Runtime::builder(snapshot.clone())
                .tools(tools.registry())
                .governed(governed("run-1"))
                .build(),
        )
        .unwrap();
    assert!(
        rt.block_on(crashed.execute("read_note", json!({})))
            .is_success()
    );
    drop(crashed);
    // One whose run is still going (the check says so): left open.
    let running = rt
        .block_on(
            Runtime::builder(snapshot.clone())
                .tools(tools.registry())
                .governed(governed("run-2"))
                .build(),
        )
        .unwrap();
    drop(running);

    let still_running: StillRunning = Arc::new(|chain: &ChainId| {
        (chain.as_str() == "run-2").then(|| "its process is alive".to_owned())
    });
    let runtime = rt
        .block_on(
            Runtime::builder(snapshot.clone())
                .tools(tools.registry())
                .governed(
                    governed("run-3")
                        .recover_chains("run-")
                        .still_running(still_running),
                )
                .build(),
        )
        .unwrap();
    let recovered = runtime.recovered();
    assert!(
        recovered.iter().any(
            |r| matches!(r, StartupRecovery::Closed { chain, .. } if chain.as_str() == "run-1")
        ),
        "{recovered:?}"
    );
    assert!(
        recovered.iter().any(
            |r| matches!(r, StartupRecovery::LeftOpen { chain, .. } if chain.as_str() == "run-2")
        ),
        "{recovered:?}"
    );
    let o = rt.block_on(runtime.execute("read_note", json!({})));
    assert!(o.is_success(), "{o:?}");
    assert_eq!(runtime.executor().profile(), RuntimeProfile::Certifiable);
    // The evidence of the call is on run-3's chain, which verifies.
    let ExecutionOutcome::Succeeded { evidence, .. } = &o else {
        panic!("{o:?}")
    };
    assert!(evidence.iter().all(|e| e.chain_id.as_str() == "run-3"));
    rt.block_on(runtime.close()).unwrap();
    // A closed chain is never reopened; an open one is continued.
    let err = rt
        .block_on(
            Runtime::builder(snapshot.clone())
                .governed(governed("run-3"))
                .build(),
        )
        .unwrap_err();
    assert!(matches!(err, ComposeError::ChainClosed { .. }), "{err}");
    let again = rt
        .block_on(
            Runtime::builder(snapshot)
                .tools(tools.registry())
                .governed(governed("run-2"))
                .build(),
        )
        .unwrap();
    assert!(
        matches!(again.recovered(), [StartupRecovery::Resumed { chain, .. }] if chain.as_str() == "run-2"),
        "{:?}",
        again.recovered()
    );
    let report = rt
        .block_on(again.governance().unwrap().recorder().records())
        .unwrap();
    assert!(!report.is_empty());
}

#[test]
fn the_hints_of_the_runtimes_own_tools_are_believed_by_modes() {
    let rt = rt();
    let tools = Tools::new();
    let snapshot = Arc::new(
        PolicySnapshot::from_toml(
            "default = \"allow\"\n[modes]\nactive = [\"plan_only\"]\n",
            "/repo",
        )
        .unwrap(),
    );
    let runtime = rt
        .block_on(Runtime::builder(snapshot).tools(tools.registry()).build())
        .unwrap();
    // Read-only by its own descriptor: plan_only lets it run.
    assert!(
        rt.block_on(runtime.execute("read_note", json!({"id": 1})))
            .is_success()
    );
    // Destructive: plan_only denies it, naming the mode.
    let o = rt.block_on(runtime.execute("delete_note", json!({"id": 1})));
    assert_eq!(o.status(), "denied", "{o:?}");
    assert!(format!("{o:?}").contains("plan_only"), "{o:?}");
    assert_eq!(tools.delete.calls(), 0);
}
