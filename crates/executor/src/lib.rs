//! The action executor: the one authoritative path from a tool call to its effect.
//!
//! Compose a runtime from a compiled policy with [`Runtime`]: it installs everything the
//! policy declares (`[guards]`, `[containment]`, modes, `[approvers]`, programmable
//! permissions) or refuses to build with a typed [`ComposeError`]; then run calls by tool name
//! and JSON arguments:
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::{Value, json};
//! use warden_contracts::{ActionDescriptor, ActionSource};
//! use warden_executor::{InvocationToken, Registry, Runtime, Tool, ToolError};
//! use warden_policy::PolicySnapshot;
//!
//! struct Greet(ActionDescriptor);
//! #[async_trait::async_trait]
//! impl Tool for Greet {
//!     fn descriptor(&self) -> &ActionDescriptor { &self.0 }
//!     async fn invoke(&self, _: InvocationToken, args: Value) -> Result<Value, ToolError> {
//!         Ok(json!(format!("hello, {}", args["name"].as_str().unwrap_or("you"))))
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! let policy = PolicySnapshot::from_toml(r#"default = "deny"
//! allow = ["greet"]"#, "/work")?;
//! let mut tools = Registry::new();
//! tools.register(Arc::new(Greet(ActionDescriptor::new("greet", "1", ActionSource::Builtin {})?)))?;
//! let runtime = Runtime::builder(Arc::new(policy)).tools(tools).build().await?;
//!
//! let outcome = runtime.execute("greet", json!({"name": "Ada"})).await;
//! assert!(outcome.is_success());
//! let refused = runtime.execute("delete_everything", json!({})).await;
//! assert_eq!(refused.status(), "denied");
//! # Ok::<(), Box<dyn std::error::Error>>(()) })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Every invocation of a tool callable goes through here. A callable implements [`Tool`], whose
//! [`Tool::invoke`] takes an [`InvocationToken`]: a value only this crate can mint, that cannot be
//! cloned, and that `invoke` consumes. So holding a tool is not enough to run it; only the
//! executor, after every stage has passed, can.
//!
//! Principal types: [`Runtime`] (the composition entry point: policy tables installed,
//! governed start-up, [`ToolCall`] requests with generated ids, a reviewer for escalations),
//! [`Registry`] (resolution: canonical names, aliases, versions, provenance, schemas; it never
//! invokes), [`ActionExecutor`] (the fixed stage order, compiled per action into a cached
//! [`ExecutionPlan`]; its `execute` is inherent), [`Handlers`] (session gate, preconditions,
//! security hooks, transforms, post and error handlers), [`Limits`] (capacity admission),
//! [`SnapshotPolicy`] (a compiled `warden-policy` snapshot behind the contracts
//! `PolicyEvaluator` port), [`ReviewLoop`] (approvals and the reviewer denial bound) and
//! [`Governance`] (the governed and certifiable profiles: hash-chained evidence from
//! `warden-evidence` as control flow; [`ActionExecutor::execute_reported`] answers the
//! receipts in an [`ExecutionReport`]).
//!
//! Features: `governed` adds the durable governed runtime's dependencies (the SQLite evidence
//! store, signed checkpoints, signed approval receipts); without it the crate compiles no
//! rusqlite and no ed25519, and governance works over an in-memory or a composer's own store.
//!
//! Key design decision: the stage order is fixed in code (one function per stage, each in its
//! own file under `stages/`, run in [`STAGE_ORDER`]'s order) over an immutable plan, not a chain
//! of hooks attached at construction: a tool registered, a plugin materialized or a handler added
//! cannot change which controls stand before an invocation, because the plan is compiled from the
//! frozen registry and handler set, and the token that `invoke` needs is minted in exactly one
//! place, after the last security pass. Nothing during execution is an error: every path ends
//! in one typed `ExecutionOutcome` carrying the runtime profile.
//!
//! **Invariant:** a tool's `invoke` runs only with a token minted here, once per token, after
//! every stage of [`STAGE_ORDER`] before it has passed for the final arguments.
//!
//! **Must never:** be bypassable: no public item mints a token or calls `invoke` on a caller's
//! behalf outside the executor's stage order; and never run a Warden policy with a declared
//! table left unenforced (a hand-composed [`SnapshotPolicy`] whose policy declares `[guards]`
//! refuses every call). `cargo xtask bypass-check` proves the first statically.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod admission;
mod approval;
mod cancel;
mod content;
mod error;
mod executor;
mod governed;
mod idempotency;
mod interceptor;
mod plan;
mod policy;
mod receipts;
mod registry;
mod runtime;
mod stages;
mod token;
mod tool;
mod trace;
mod unwind;

pub use admission::{Clock, Limits, SystemClock};
pub use approval::{CallbackResult, DenialBound, EscalationCallback, ReviewLoop, local_receipt};
pub use cancel::CancelToken;
pub use content::ContentGuard;
pub use error::{ApprovalError, ExecutorError};
pub use executor::{
    ActionExecutor, DEFAULT_APPROVAL_TTL_MS, ExecuteOptions, ExecutorBuilder, arguments_digest,
};
pub use governed::{Exception, ExecutionReport, Governance, RecordedReceipt};
pub use interceptor::{
    CallView, ErrorDisposition, ErrorHandler, HandlerError, Handlers, InterceptorScope,
    InvocationFailure, PostHandler, Precondition, SecurityHook, SecurityVerdict, SessionGate,
    Transform,
};
pub use plan::{ExecutionPlan, STAGE_ORDER, StageMode};
pub use policy::SnapshotPolicy;
pub use registry::{Registry, Resolved};
pub use runtime::{
    ComposeError, Governed, Runtime, RuntimeBuilder, StartupRecovery, StillRunning, ToolCall,
};
pub use token::InvocationToken;
pub use tool::{Tool, ToolError};
/// The evidence types governed execution works with (`warden-evidence`), re-exported so a
/// composition root can govern an executor with this crate alone.
pub use warden_evidence::payload::GateLevel;
pub use warden_evidence::{
    GovernanceBinding, GovernanceError, GovernedRecorder, OperationRef, PolicySnapshotBytes,
    Recovered, TaskBoundary,
};
