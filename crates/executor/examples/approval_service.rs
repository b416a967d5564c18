//! An async programmable permission that asks an approval service, composed into a `Runtime`.
//!
//! The approval service is a tokio task that receives requests over an `mpsc` channel and
//! answers each on its own `oneshot`. The permission (`register_async`, declared in the policy
//! with `PolicyBuilder::permissions` so the policy's digest covers it) sends it every `deploy`
//! call and awaits the answer, with a timeout. The service approves staging deploys, refuses
//! production ones, and leaves anything else unanswered: the timeout then denies the call
//! (fail closed), and the model hears why.
//!
//! Run it (it exits non-zero if a call is not decided as shown, or a refused call ran):
//!
//! ```text
//! cargo run -p warden-executor --example approval_service
//! ```
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use warden_contracts::{ActionDescriptor, ActionSource, ExecutionOutcome, ReasonCode};
use warden_executor::{InvocationToken, Registry, Runtime, Tool, ToolError};
use warden_policy::permission::{
    Answer, AsyncPermission, PermissionError, PermissionFuture, PermissionInfo, PermissionKind,
    PermissionSet,
};
use warden_policy::{Call, Format, LoadedPolicy, PathEnv, PolicyBuilder};

/// `status` is allowed by a rule; `deploy` is named by no rule, so the default would deny it:
/// the permission answers in its place.
const POLICY: &str = r#"
default = "deny"
allow = ["status"]
"#;

/// How long a call waits for the service before it is denied.
const APPROVAL_TIMEOUT: Duration = Duration::from_millis(300);

/// One question to the approval service: the call, and where to answer (`Err` = refused, why).
struct ApprovalRequest {
    tool: String,
    arguments: Value,
    reply: oneshot::Sender<Result<(), String>>,
}

/// The service: in a real deployment, a ticketing system or a person behind a UI.
async fn approval_service(mut requests: mpsc::Receiver<ApprovalRequest>) {
    // Requests for a human who never comes: their replies are kept open, never answered.
    let mut unanswered = Vec::new();
    while let Some(request) = requests.recv().await {
        let answer = match request.arguments["target"].as_str() {
            Some("staging") => Ok(()),
            Some("prod") => Err(format!(
                "the approval service refused {} to prod: no change ticket",
                request.tool
            )),
            _ => {
                unanswered.push(request.reply);
                continue;
            }
        };
        // The caller may have timed out and gone: nothing to do then.
        let _ = request.reply.send(answer);
    }
}

/// The permission: asks the service about `deploy` calls, has no opinion on any other.
struct AskTheService {
    requests: mpsc::Sender<ApprovalRequest>,
}

impl AsyncPermission for AskTheService {
    fn check<'a>(&'a self, call: &'a Call) -> PermissionFuture<'a> {
        Box::pin(async move {
            if call.tool != "deploy" {
                return Ok(None); // the rules and the default decide
            }
            // A `Tool` error denies the call with its message and lets the turn go on: a
            // service that is down or slow is never an allow.
            let unavailable =
                |why: &str| PermissionError::Tool(format!("approval service {why}: denied"));
            let (reply, answer) = oneshot::channel();
            let request = ApprovalRequest {
                tool: call.tool.clone(),
                arguments: call.args.clone(),
                reply,
            };
            self.requests
                .send(request)
                .await
                .map_err(|_| unavailable("is down"))?;
            match tokio::time::timeout(APPROVAL_TIMEOUT, answer).await {
                Ok(Ok(Ok(()))) => Ok(Some(Answer::Allowed)),
                Ok(Ok(Err(why))) => Ok(Some(Answer::deny(why))),
                Ok(Err(_)) => Err(unavailable("dropped the request")),
                Err(_) => Err(unavailable("did not answer in time")),
            }
        })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (requests, inbox) = mpsc::channel(16);
    tokio::spawn(approval_service(inbox));

    let permissions = PermissionSet::new().register_async(
        PermissionInfo::new("approval-service", "1", PermissionKind::Decide),
        AskTheService { requests },
    )?;
    let file =
        LoadedPolicy::from_text(POLICY.into(), Format::Toml, "policy.toml", "project", None)?;
    let policy = PolicyBuilder::new()
        .path_env(PathEnv {
            project_root: "/repo".into(),
            home: None,
        })
        .file(&file)?
        .permissions(&permissions)?
        .build()?;

    let deploy = Counted::new("deploy")?;
    let mut tools = Registry::new();
    tools.register(Counted::new("status")?)?;
    tools.register(deploy.clone())?;
    // The runtime refuses to build unless the supplied set is exactly the declared one.
    let runtime = Runtime::builder(Arc::new(policy))
        .tools(tools)
        .permissions(Arc::new(permissions))
        .build()
        .await?;

    let cases = [
        ("status", json!({}), true),
        ("deploy", json!({"target": "staging"}), true),
        ("deploy", json!({"target": "prod"}), false),
        ("deploy", json!({"target": "dr-site"}), false),
    ];
    for (tool, arguments, should_run) in cases {
        let ran_before = deploy.calls();
        let outcome = runtime.execute(tool, arguments.clone()).await;
        println!("{tool} {arguments}: {}", describe(&outcome));
        if outcome.is_success() != should_run {
            return Err(format!("{tool} {arguments}: unexpected {outcome:?}").into());
        }
        // A denial came from the permission, and nothing ran.
        if let ExecutionOutcome::Denied { reason, .. } = &outcome
            && (reason.code != ReasonCode::Permission || deploy.calls() != ran_before)
        {
            return Err(format!("{tool} {arguments}: not the permission's denial").into());
        }
    }
    if deploy.calls() != 1 {
        return Err(format!("deploy ran {} times, expected once", deploy.calls()).into());
    }
    Ok(())
}

fn describe(outcome: &ExecutionOutcome) -> String {
    match outcome {
        ExecutionOutcome::Denied { reason, .. } => {
            format!("denied ({:?}): {}", reason.code, reason.message)
        }
        other => other.status().to_owned(),
    }
}

/// A tool built into this program that counts its calls.
struct Counted {
    descriptor: ActionDescriptor,
    calls: AtomicUsize,
}

impl Counted {
    fn new(name: &str) -> Result<Arc<Self>, warden_contracts::ContractError> {
        Ok(Arc::new(Self {
            descriptor: ActionDescriptor::new(name, "1", ActionSource::Builtin {})?,
            calls: AtomicUsize::new(0),
        }))
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
        Ok(json!({ "done": arguments }))
    }
}
