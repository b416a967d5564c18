//! [`Runtime`]: the composition entry point. A compiled policy goes in, and everything it
//! declares is installed, or the runtime refuses to start with a typed [`ComposeError`].
//!
//! | the policy declares | the runtime installs |
//! |---|---|
//! | rules, default, presets, sources, `[tools]`, `[hints]`, `[paths]`, `[modes]` | the snapshot as the executor's policy evaluator (modes cap its decisions) |
//! | `[guards]` | a transform on every call's final arguments and a post handler on every result |
//! | `[containment]` | the containment preflight on each tool named by [`RuntimeBuilder::effect_backend`] |
//! | `[approvers]` | receipt checking: only a receipt signed by a declared approver answers an escalation |
//! | programmable permissions | the supplied [`PermissionSet`], which must be exactly the declared one |
//!
//! Governance ([`Governed`]) is asked for, not declared: with it, start-up recovers what a
//! crash left open before the first call (see [`Governed`]).
//!
//! Key design decision: the low-level [`crate::ExecutorBuilder`] stays public for evaluators
//! that are not Warden policies, but a [`SnapshotPolicy`] whose policy declares `[guards]` only
//! decides when this module installed them: composed by hand, its every call is refused, so
//! a forgotten table is never a silent no-op.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use warden_contracts::{
    ActionRef, BackendRef, CapabilityReport, ChainId, ContextId, DecisionReason, ExecutionContext,
    ExecutionOutcome, ExecutionRequest, ExecutionScopeRef, Observer, PrincipalId, PrincipalKind,
    PrincipalRef, ReasonCode, RequestId, RuntimeProfile, ScopeId,
};
use warden_evidence::payload::CloseDisposition;
use warden_evidence::{
    GovernanceBinding, GovernanceError, GovernedStore, PolicySnapshotBytes, Recovered, TaskBoundary,
};
use warden_policy::permission::{PermissionInfo, PermissionSet};
use warden_policy::{GuardSet, Guards, PolicySnapshot, SecretAction};

use crate::admission::{Clock, SystemClock};
use crate::approval::ReviewLoop;
use crate::cancel::CancelToken;
use crate::content::ContentGuard;
use crate::error::{ApprovalError, ExecutorError};
use crate::executor::{ActionExecutor, ExecuteOptions};
use crate::governed::{ExecutionReport, Governance};
use crate::interceptor::Handlers;
use crate::policy::SnapshotPolicy;
use crate::registry::Registry;

/// Why a runtime refused to start. Nothing ran, and nothing was appended to evidence except
/// what start-up recovery closed before the error.
#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
    /// The policy declares a programmable permission that no supplied implementation provides.
    #[error(
        "the policy declares permission `{name}` (version {version}), but no implementation was supplied (RuntimeBuilder::permissions)"
    )]
    MissingPermission {
        /// The declared name.
        name: String,
        /// The declared version.
        version: String,
    },
    /// A supplied permission the policy does not declare (its digest would not cover it).
    #[error(
        "permission `{name}` (version {version}) was supplied, but the policy does not declare it: declare the set with PolicyBuilder::permissions"
    )]
    UndeclaredPermission {
        /// The supplied name.
        name: String,
        /// The supplied version.
        version: String,
    },
    /// The supplied permissions are the declared ones in another order or of another kind.
    #[error("the supplied permissions differ from the declared ones: {detail}")]
    PermissionMismatch {
        /// What differs.
        detail: String,
    },
    /// A policy table this composition cannot enforce.
    #[error("the policy's [{table}] cannot be enforced by this runtime: {why}")]
    Unenforceable {
        /// The table's name.
        table: &'static str,
        /// Why, and what would make it enforceable.
        why: String,
    },
    /// [`RuntimeBuilder::effect_backend`] names a tool the registry does not hold.
    #[error("effect_backend names `{name}`, which no registered tool answers to")]
    UnknownTool {
        /// The name given.
        name: String,
    },
    /// An identifier given to the builder is not valid.
    #[error("invalid {what}: {message}")]
    Invalid {
        /// Which identifier.
        what: &'static str,
        /// Why.
        message: String,
    },
    /// The executor refused the composition.
    #[error(transparent)]
    Executor(#[from] ExecutorError),
    /// Governed start-up failed (a chain that does not verify, a store that cannot be read).
    #[error("governed start-up, chain {chain}: {source}")]
    Governance {
        /// The chain concerned.
        chain: String,
        /// What failed.
        #[source]
        source: Box<GovernanceError>,
    },
    /// The runtime's own chain is closed: a closed task boundary is never reopened.
    #[error("chain {chain} is closed: a runtime continues an open chain or starts a new one")]
    ChainClosed {
        /// The chain.
        chain: String,
    },
}

/// Decides whether an interrupted run's chain may be closed by recovery: `None` when nothing
/// of its calls can still run, or `Some(why)` to leave it open (for example a process that
/// outlived its runtime, see `warden_sandbox::ProcessRecords::survivors`).
pub type StillRunning = Arc<dyn Fn(&ChainId) -> Option<String> + Send + Sync>;

/// Governance for a runtime: where its evidence goes and what start-up recovers.
///
/// At start-up, first every *other* open chain whose name starts with one of the
/// [`Self::recover_chains`] prefixes is resumed (it must verify), its open operations closed
/// by recovery (never re-invoked), and its boundary closed as abandoned, unless the
/// [`StillRunning`] check says a call of it may still run. Then the runtime's own chain is
/// resumed the same way if it is open (a restart continues it), opened if it does not exist,
/// and refused if it is closed.
#[derive(Clone)]
pub struct Governed {
    store: Arc<dyn GovernedStore>,
    chain: String,
    profile: RuntimeProfile,
    prefixes: Vec<String>,
    still_running: Option<StillRunning>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Governed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Governed")
            .field("chain", &self.chain)
            .field("profile", &self.profile)
            .field("prefixes", &self.prefixes)
            .finish_non_exhaustive()
    }
}

impl Governed {
    /// Evidence on `store`, on the chain (and task boundary) named `chain`, in the
    /// `certifiable` profile.
    pub fn new(store: Arc<dyn GovernedStore>, chain: impl Into<String>) -> Self {
        Self {
            store,
            chain: chain.into(),
            profile: RuntimeProfile::Certifiable,
            prefixes: Vec::new(),
            still_running: None,
            clock: Arc::new(SystemClock),
        }
    }

    /// The same governance in another profile (`governed` or `certifiable`).
    pub fn profile(mut self, profile: RuntimeProfile) -> Self {
        self.profile = profile;
        self
    }

    /// At start-up, also recovers the open chains of interrupted runs whose names start with
    /// `prefix` (call once per prefix). Ask for it only when no other live runtime uses those
    /// chains (for example under a lock all runs share).
    pub fn recover_chains(mut self, prefix: impl Into<String>) -> Self {
        self.prefixes.push(prefix.into());
        self
    }

    /// The check that may keep an interrupted run's chain open (see [`StillRunning`]).
    pub fn still_running(mut self, check: StillRunning) -> Self {
        self.still_running = Some(check);
        self
    }

    /// The clock evidence timestamps come from.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}

/// What governed start-up did for one chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartupRecovery {
    /// An interrupted run's chain: its open operations closed, its boundary abandoned.
    Closed {
        /// The chain.
        chain: ChainId,
        /// The operations recovery closed (each with the terminal it was given).
        operations: Vec<Recovered>,
    },
    /// An interrupted run's chain left open, with the reason (a call may still be running).
    LeftOpen {
        /// The chain.
        chain: ChainId,
        /// Why.
        why: String,
    },
    /// The runtime's own chain was open: its open operations closed, the boundary continued.
    Resumed {
        /// The chain.
        chain: ChainId,
        /// The operations recovery closed.
        operations: Vec<Recovered>,
    },
}

/// One tool call for [`Runtime::run`]: a tool name and JSON arguments, and optionally approval
/// receipts, a cancellation token and an idempotency key. Ids are generated by the runtime.
#[derive(Debug, Clone)]
pub struct ToolCall {
    tool: String,
    arguments: Value,
    options: ExecuteOptions,
    idempotency_key: Option<String>,
}

impl ToolCall {
    /// A call of `tool` with `arguments` (a JSON object).
    pub fn new(tool: impl Into<String>, arguments: Value) -> Self {
        Self {
            tool: tool.into(),
            arguments,
            options: ExecuteOptions::new(),
            idempotency_key: None,
        }
    }

    /// Presents an approval receipt (for example a signed one from `warden approve`); it
    /// answers exactly the call it is bound to, once.
    pub fn approval(mut self, receipt: warden_contracts::ApprovalReceipt) -> Self {
        self.options = self.options.approval(receipt);
        self
    }

    /// Cancels the call when `token` is cancelled.
    pub fn cancel(mut self, token: CancelToken) -> Self {
        self.options = self.options.cancel(token);
        self
    }

    /// Names the request: a repeat answers the recorded outcome and never runs the call again
    /// (durably across processes when governed).
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }
}

/// Builds a [`Runtime`] from a compiled policy ([`Runtime::builder`]).
pub struct RuntimeBuilder {
    snapshot: Arc<PolicySnapshot>,
    registry: Registry,
    permissions: Option<Arc<PermissionSet>>,
    cwd: Option<PathBuf>,
    backend: Option<(CapabilityReport, Vec<String>)>,
    handlers: Handlers,
    redact_results: bool,
    reviewer: Option<ReviewLoop>,
    principal: Option<PrincipalRef>,
    scope: Option<String>,
    observers: Vec<Arc<dyn Observer>>,
    clock: Option<Arc<dyn Clock>>,
    capacity: Option<Arc<dyn warden_contracts::Capacity>>,
    governed: Option<Governed>,
}

impl std::fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("policy", &self.snapshot.digest())
            .field("registry", &self.registry)
            .field("governed", &self.governed)
            .finish_non_exhaustive()
    }
}

impl RuntimeBuilder {
    /// The tools this runtime may run (frozen at build).
    pub fn tools(mut self, registry: Registry) -> Self {
        self.registry = registry;
        self
    }

    /// The implementations of the policy's programmable permissions: exactly the set it
    /// declares (`PolicyBuilder::permissions`), or [`Self::build`] refuses.
    pub fn permissions(mut self, permissions: Arc<PermissionSet>) -> Self {
        self.permissions = Some(permissions);
        self
    }

    /// Resolves relative paths in calls against `cwd` (the workspace).
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// The effect backend the named tools run processes on, by its capability report: the
    /// policy's `[containment]` applies to each of them (a required mechanism the report does
    /// not prove denies the call before it starts; an optional one is recorded as a
    /// degradation). Calls run in the backend's context.
    pub fn effect_backend<I, S>(mut self, report: CapabilityReport, process_tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.backend = Some((report, process_tools.into_iter().map(Into::into).collect()));
        self
    }

    /// The composer's own handlers (session gate, preconditions, security hooks, transforms,
    /// post and error handlers). The policy's `[guards]` are added to them: on arguments after
    /// every transform (they check the final arguments), on results before every post
    /// handler (no handler sees what a guard withholds or redacts).
    pub fn handlers(mut self, handlers: Handlers) -> Self {
        self.handlers = handlers;
        self
    }

    /// Redacts secrets in every result at least (a policy whose guards block secrets keeps
    /// blocking them): for results that leave for a third party, as an MCP proxy's do.
    pub fn redact_results(mut self) -> Self {
        self.redact_results = true;
        self
    }

    /// Answers escalations in [`Runtime::run`] with this loop's reviewer (without one, an
    /// escalation is returned as `Escalated`). Under a policy with `[approvers]` only a
    /// receipt signed by a declared approver counts.
    pub fn reviewer(mut self, review: ReviewLoop) -> Self {
        self.reviewer = Some(review);
        self
    }

    /// Who calls run as (default: the local operator, `local`).
    pub fn principal(mut self, principal: PrincipalRef) -> Self {
        self.principal = Some(principal);
        self
    }

    /// The name of the (ephemeral) scope calls run in (default `runtime`).
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    /// Adds an observer of stages, decisions and outcomes.
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observers.push(observer);
        self
    }

    /// The clock (deadlines, rates, approval expiry).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Capacity admission (for example [`crate::Limits`]).
    pub fn capacity(mut self, capacity: Arc<dyn warden_contracts::Capacity>) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// Governs every call: hash-chained evidence on the given store and chain, with start-up
    /// recovery (see [`Governed`]).
    pub fn governed(mut self, governed: Governed) -> Self {
        self.governed = Some(governed);
        self
    }

    /// Checks that the policy can be enforced, runs governed start-up, and builds the runtime.
    pub async fn build(self) -> Result<Runtime, ComposeError> {
        check_permissions(&self.snapshot, self.permissions.as_deref())?;
        let process_tools = self.process_tools()?;
        let guards = self.guards()?;
        let context = self.context()?;
        let mut policy = SnapshotPolicy::new(Arc::clone(&self.snapshot)).with_guards_installed();
        if let Some(cwd) = &self.cwd {
            policy = policy.with_cwd(cwd.clone());
        }
        if let Some(permissions) = &self.permissions {
            policy = policy.with_permissions(Arc::clone(permissions));
        }
        let handlers = self.handlers.with_policy_guards(guards);
        let mut builder = ActionExecutor::builder(self.registry)
            .policy(Arc::new(policy))
            .handlers(handlers);
        if let Some((report, _)) = self.backend {
            builder = builder.backend(report);
        }
        let containment = self.snapshot.containment();
        builder = process_tools.iter().fold(builder, |b, tool| {
            b.policy_containment_for(tool.as_str(), containment)
        });
        for observer in self.observers {
            builder = builder.observer(observer);
        }
        if let Some(clock) = self.clock {
            builder = builder.clock(clock);
        }
        if let Some(capacity) = self.capacity {
            builder = builder.capacity(capacity);
        }
        let mut recovered = Vec::new();
        if let Some(governed) = &self.governed {
            let governance = start_governed(governed, &self.snapshot, &mut recovered).await?;
            builder = builder.governance(governance);
        }
        let executor = builder.build()?;
        Ok(Runtime {
            executor,
            context,
            snapshot: self.snapshot,
            reviewer: self.reviewer,
            ids: Ids::new()?,
            recovered,
        })
    }

    /// The canonical names of the tools `[containment]` applies to; each must be registered.
    fn process_tools(&self) -> Result<Vec<String>, ComposeError> {
        let Some((_, tools)) = &self.backend else {
            return Ok(Vec::new());
        };
        if tools.is_empty() {
            return Err(ComposeError::Unenforceable {
                table: "containment",
                why: "an effect backend was given for no tool: name the tools that run processes on it".into(),
            });
        }
        tools
            .iter()
            .map(|name| {
                let action = ActionRef::new(name.as_str()).map_err(|e| ComposeError::Invalid {
                    what: "tool name",
                    message: e.to_string(),
                })?;
                self.registry
                    .resolve(&action)
                    .map(|r| r.descriptor().name().to_owned())
                    .map_err(|_| ComposeError::UnknownTool { name: name.clone() })
            })
            .collect()
    }

    /// The guards on arguments and on results.
    fn guards(&self) -> Result<(ContentGuard, ContentGuard), ComposeError> {
        let arguments = self.snapshot.guards().clone();
        let results = if self.redact_results {
            let redact = GuardSet::new(Guards {
                secrets: SecretAction::Redact,
                ..Guards::default()
            })
            .map_err(|e| ComposeError::Unenforceable {
                table: "guards",
                why: e.to_string(),
            })?;
            arguments.strictest(&redact)
        } else {
            arguments.clone()
        };
        Ok((ContentGuard::new(arguments), ContentGuard::new(results)))
    }

    /// The context every call runs in.
    fn context(&self) -> Result<ExecutionContext, ComposeError> {
        let invalid = |what: &'static str| {
            move |e: warden_contracts::ContractError| ComposeError::Invalid {
                what,
                message: e.to_string(),
            }
        };
        let scope = ExecutionScopeRef::Ephemeral {
            scope_id: ScopeId::new(self.scope.as_deref().unwrap_or("runtime"))
                .map_err(invalid("scope"))?,
        };
        let principal = match &self.principal {
            Some(p) => p.clone(),
            None => PrincipalRef {
                id: PrincipalId::new("local").map_err(invalid("principal"))?,
                kind: PrincipalKind::Local,
            },
        };
        let backend = match &self.backend {
            Some((report, _)) => report.backend.clone(),
            None => BackendRef::new("in_process").map_err(invalid("backend"))?,
        };
        Ok(ExecutionContext::new(
            ContextId::new("runtime").map_err(invalid("context"))?,
            scope,
            principal,
            backend,
        ))
    }
}

/// The supplied permissions must be exactly the declared ones: a declared permission without
/// an implementation would deny every call it is asked about, an undeclared one would decide
/// outside the digest.
fn check_permissions(
    snapshot: &PolicySnapshot,
    supplied: Option<&PermissionSet>,
) -> Result<(), ComposeError> {
    let declared: Vec<&PermissionInfo> = snapshot.permissions().iter().collect();
    let supplied: Vec<&PermissionInfo> = supplied.map(|s| s.infos().collect()).unwrap_or_default();
    if let Some(missing) = first_unnamed(&declared, &supplied) {
        return Err(ComposeError::MissingPermission {
            name: missing.name.clone(),
            version: missing.version.clone(),
        });
    }
    if let Some(extra) = first_unnamed(&supplied, &declared) {
        return Err(ComposeError::UndeclaredPermission {
            name: extra.name.clone(),
            version: extra.version.clone(),
        });
    }
    if declared.iter().zip(&supplied).any(|(d, s)| d != s) {
        let show = |list: &[&PermissionInfo]| {
            list.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(ComposeError::PermissionMismatch {
            detail: format!(
                "declared [{}], supplied [{}]",
                show(&declared),
                show(&supplied)
            ),
        });
    }
    Ok(())
}

/// The first permission of `these` that `others` does not name.
fn first_unnamed<'p>(
    these: &[&'p PermissionInfo],
    others: &[&PermissionInfo],
) -> Option<&'p PermissionInfo> {
    these
        .iter()
        .copied()
        .find(|t| !others.iter().any(|o| o.name == t.name))
}

/// Governed start-up: recovers interrupted runs' chains, then opens or resumes this one.
async fn start_governed(
    governed: &Governed,
    snapshot: &PolicySnapshot,
    recovered: &mut Vec<StartupRecovery>,
) -> Result<Governance, ComposeError> {
    let chain = ChainId::new(governed.chain.as_str()).map_err(|e| ComposeError::Invalid {
        what: "chain",
        message: e.to_string(),
    })?;
    if !governed.prefixes.is_empty() {
        recover_interrupted(governed, &chain, recovered).await?;
    }
    let exists = governed
        .store
        .head(&chain)
        .await
        .map_err(store_failed(&chain))?
        .is_some();
    if exists {
        if !is_open(governed, &chain).await? {
            return Err(ComposeError::ChainClosed {
                chain: chain.to_string(),
            });
        }
        let (governance, operations) = resume(governed, &chain).await?;
        recovered.push(StartupRecovery::Resumed { chain, operations });
        return Ok(governance);
    }
    let binding = GovernanceBinding {
        task_boundary: TaskBoundary::new(governed.chain.as_str()).map_err(failed(&chain))?,
        chain_id: chain.clone(),
        policy: snapshot.reference(),
        profile: governed.profile,
    };
    let bytes = PolicySnapshotBytes::new(snapshot.reference(), snapshot.canonical_json())
        .map_err(failed(&chain))?;
    Governance::open(
        Arc::clone(&governed.store),
        binding,
        &bytes,
        Arc::clone(&governed.clock),
    )
    .await
    .map_err(failed(&chain))
}

/// Closes the open chains of interrupted runs (other chains whose names start with a
/// `recover_chains` prefix), unless the `still_running` check says a call of one may still run.
async fn recover_interrupted(
    governed: &Governed,
    chain: &ChainId,
    recovered: &mut Vec<StartupRecovery>,
) -> Result<(), ComposeError> {
    for other in governed.store.chains().await.map_err(store_failed(chain))? {
        let interrupted = other != *chain
            && governed
                .prefixes
                .iter()
                .any(|p| other.as_str().starts_with(p.as_str()));
        if !interrupted || !is_open(governed, &other).await? {
            continue;
        }
        if let Some(why) = governed.still_running.as_ref().and_then(|c| c(&other)) {
            tracing::warn!(chain = %other, %why, "an interrupted run's chain stays open");
            recovered.push(StartupRecovery::LeftOpen { chain: other, why });
            continue;
        }
        let (governance, operations) = resume(governed, &other).await?;
        governance
            .recorder()
            .close(CloseDisposition::Abandoned)
            .await
            .map_err(failed(&other))?;
        recovered.push(StartupRecovery::Closed {
            chain: other,
            operations,
        });
    }
    Ok(())
}

/// Resumes `chain`'s open boundary, recovering the operations a crash left open.
async fn resume(
    governed: &Governed,
    chain: &ChainId,
) -> Result<(Governance, Vec<Recovered>), ComposeError> {
    Governance::resume(
        Arc::clone(&governed.store),
        chain.clone(),
        governed.profile,
        Arc::clone(&governed.clock),
    )
    .await
    .map_err(failed(chain))
}

/// A governance failure on `chain`, as a composition error.
fn failed(chain: &ChainId) -> impl Fn(GovernanceError) -> ComposeError {
    let chain = chain.to_string();
    move |source: GovernanceError| ComposeError::Governance {
        chain: chain.clone(),
        source: Box::new(source),
    }
}

/// A store failure on `chain` (nothing ran), as a composition error.
fn store_failed(chain: &ChainId) -> impl Fn(warden_contracts::EvidenceError) -> ComposeError {
    let chain = chain.to_string();
    move |source: warden_contracts::EvidenceError| ComposeError::Governance {
        chain: chain.clone(),
        source: Box::new(GovernanceError::Evidence {
            call_executed: false,
            source,
        }),
    }
}

/// Whether `chain`'s last record leaves its task boundary open.
async fn is_open(governed: &Governed, chain: &ChainId) -> Result<bool, ComposeError> {
    let failed = store_failed(chain);
    let Some(head) = governed.store.head(chain).await.map_err(&failed)? else {
        return Ok(false);
    };
    let last = governed
        .store
        .read(chain, head.sequence.checked_sub(1), 1)
        .await
        .map_err(&failed)?;
    Ok(last
        .first()
        .is_none_or(|r| r.record_type != warden_contracts::RecordType::TaskClosed))
}

/// Request ids: this runtime's start time and a counter.
#[derive(Debug)]
struct Ids {
    base: String,
    next: AtomicU64,
    /// The first id, checked at build: every later one differs only in its digits.
    first: RequestId,
}

impl Ids {
    fn new() -> Result<Self, ComposeError> {
        let base = format!("req-{}", SystemClock.now().unix_millis());
        let first = RequestId::new(format!("{base}-0")).map_err(|e| ComposeError::Invalid {
            what: "request id",
            message: e.to_string(),
        })?;
        Ok(Self {
            base,
            next: AtomicU64::new(1),
            first,
        })
    }

    fn next(&self) -> RequestId {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        RequestId::new(format!("{}-{n}", self.base)).unwrap_or_else(|_| self.first.clone())
    }
}

/// A composed runtime: the executor with every table of its policy installed, the context
/// calls run in, an optional reviewer and (governed) the task boundary.
///
/// ```
/// use std::sync::Arc;
/// use serde_json::{Value, json};
/// use warden_contracts::{ActionDescriptor, ActionSource};
/// use warden_executor::{InvocationToken, Registry, Runtime, Tool, ToolError};
/// use warden_policy::PolicySnapshot;
///
/// struct Echo(ActionDescriptor);
/// #[async_trait::async_trait]
/// impl Tool for Echo {
///     fn descriptor(&self) -> &ActionDescriptor { &self.0 }
///     async fn invoke(&self, _: InvocationToken, args: Value) -> Result<Value, ToolError> { Ok(args) }
/// }
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let policy = PolicySnapshot::from_toml("default = \"deny\"\nallow = [\"echo\"]\n", "/")?;
/// let mut tools = Registry::new();
/// tools.register(Arc::new(Echo(ActionDescriptor::new("echo", "1", ActionSource::Builtin {})?)))?;
/// let runtime = Runtime::builder(Arc::new(policy)).tools(tools).build().await?;
/// let outcome = runtime.execute("echo", json!({"text": "hi"})).await;
/// assert!(outcome.is_success());
/// assert!(!runtime.execute("rm", json!({})).await.is_success());
/// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Runtime {
    executor: ActionExecutor,
    context: ExecutionContext,
    snapshot: Arc<PolicySnapshot>,
    reviewer: Option<ReviewLoop>,
    ids: Ids,
    recovered: Vec<StartupRecovery>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("policy", &self.snapshot.digest())
            .field("profile", &self.executor.profile())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Starts composing a runtime around a compiled policy.
    pub fn builder(policy: Arc<PolicySnapshot>) -> RuntimeBuilder {
        RuntimeBuilder {
            snapshot: policy,
            registry: Registry::new(),
            permissions: None,
            cwd: None,
            backend: None,
            handlers: Handlers::new(),
            redact_results: false,
            reviewer: None,
            principal: None,
            scope: None,
            observers: Vec::new(),
            clock: None,
            capacity: None,
            governed: None,
        }
    }

    /// Runs `tool` with `arguments` (a JSON object) and answers its typed outcome.
    pub async fn execute(&self, tool: &str, arguments: Value) -> ExecutionOutcome {
        self.run(ToolCall::new(tool, arguments)).await.outcome
    }

    /// Runs one call and reports what evidence recorded for it. An escalation is answered by
    /// the reviewer when there is one (the report is then the approved attempt's); when the
    /// reviewer's denial bound is reached the refusal comes back with `stop` set.
    pub async fn run(&self, call: ToolCall) -> ExecutionReport {
        let request = match self.request(&call) {
            Ok(r) => r,
            Err(outcome) => return report_of(*outcome),
        };
        let cancel = call.options.cancel.clone();
        let first = self
            .executor
            .execute_reported(request.clone(), &self.context, call.options)
            .await;
        let Some(review) = &self.reviewer else {
            return first;
        };
        if !matches!(first.outcome, ExecutionOutcome::Escalated { .. }) {
            return first;
        }
        match review
            .resolve_reported(
                &self.executor,
                &request,
                &self.context,
                &first.outcome,
                cancel.as_ref(),
            )
            .await
        {
            Ok(Some(report)) => report,
            Ok(None) => first,
            Err(ApprovalError::DenialBound { outcome, .. }) => report_of(stopped(*outcome)),
            Err(e) => {
                tracing::warn!("approval: {e}");
                first
            }
        }
    }

    /// The request a call becomes, in this runtime's scope and with a fresh id (for
    /// compositions that run requests through [`Self::executor`] themselves); an invalid
    /// tool name, arguments or idempotency key is the denial [`Self::run`] would answer.
    pub fn request(&self, call: &ToolCall) -> Result<ExecutionRequest, Box<ExecutionOutcome>> {
        let request_id = self.ids.next();
        let refuse = |code: ReasonCode, message: String| {
            Box::new(ExecutionOutcome::Denied {
                request_id: request_id.clone(),
                profile: self.executor.profile(),
                reason: DecisionReason::new(code, message),
                evaluator: "runtime".into(),
                stop: false,
                evidence: Vec::new(),
            })
        };
        let action = ActionRef::new(call.tool.as_str())
            .map_err(|e| refuse(ReasonCode::UnknownAction, format!("tool name: {e}")))?;
        let mut request = ExecutionRequest::new(
            request_id.clone(),
            action,
            call.arguments.clone(),
            self.context.execution_scope().clone(),
        )
        .map_err(|e| refuse(ReasonCode::InvalidArguments, e.to_string()))?;
        if let Some(key) = &call.idempotency_key {
            request = request.with_idempotency_key(key.as_str()).map_err(|e| {
                refuse(
                    ReasonCode::InvalidArguments,
                    format!("idempotency key: {e}"),
                )
            })?;
        }
        Ok(request)
    }

    /// The composed executor (for compositions that run requests themselves).
    pub fn executor(&self) -> &ActionExecutor {
        &self.executor
    }

    /// The context calls run in.
    pub fn context(&self) -> &ExecutionContext {
        &self.context
    }

    /// The compiled policy.
    pub fn policy(&self) -> &Arc<PolicySnapshot> {
        &self.snapshot
    }

    /// The governance, when governed.
    pub fn governance(&self) -> Option<&Governance> {
        self.executor.governance()
    }

    /// What governed start-up recovered or left open.
    pub fn recovered(&self) -> &[StartupRecovery] {
        &self.recovered
    }

    /// Ends the governed task boundary (`completed`); refused while an operation is open (the
    /// next start-up recovers it). Nothing to do when not governed.
    pub async fn close(&self) -> Result<Option<warden_contracts::AppendReceipt>, GovernanceError> {
        match self.executor.governance() {
            Some(g) => g
                .recorder()
                .close(CloseDisposition::Completed)
                .await
                .map(Some),
            None => Ok(None),
        }
    }
}

fn report_of(outcome: ExecutionOutcome) -> ExecutionReport {
    crate::approval::outcome_report(outcome)
}

/// A refusal that reached the reviewer's denial bound: it stops the turn.
fn stopped(outcome: ExecutionOutcome) -> ExecutionOutcome {
    match outcome {
        ExecutionOutcome::Denied {
            request_id,
            profile,
            reason,
            evaluator,
            evidence,
            ..
        } => ExecutionOutcome::Denied {
            request_id,
            profile,
            reason,
            evaluator,
            stop: true,
            evidence,
        },
        other => other,
    }
}
