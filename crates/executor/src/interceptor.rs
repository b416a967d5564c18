//! The interceptors a plan is compiled from (stages 5–10 and 13 of
//! docs/design/executor.md#the-stage-plan): the session gate, preconditions, security hooks,
//! transforms, post handlers and error handlers, and the [`Handlers`] set that scopes each to
//! actions ([`InterceptorScope`]).
//!
//! Every interceptor sees a [`CallView`]: borrowed, immutable arguments. A transform or a
//! security hook that wants other arguments returns a new mapping; nothing can mutate the
//! arguments another stage already judged.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};
use warden_contracts::{ActionDescriptor, DecisionReason, ExecutionContext, RequestId, SessionId};
use warden_evidence::payload::GateLevel;

/// What an interceptor sees of one call.
#[derive(Debug, Clone, Copy)]
pub struct CallView<'a> {
    /// The request.
    pub request_id: &'a RequestId,
    /// The resolved action.
    pub action: &'a ActionDescriptor,
    /// The arguments at this point of the plan.
    pub arguments: &'a Map<String, Value>,
    /// The trusted context.
    pub context: &'a ExecutionContext,
    /// The agent session, if any.
    pub session_id: Option<&'a SessionId>,
}

/// A failure inside an interceptor. A failing security interceptor never allows; a failing
/// error handler leaves the original error primary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct HandlerError {
    /// What failed (no secrets).
    pub message: String,
}

impl HandlerError {
    /// A handler error with a message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// The session gate (docs/design/executor.md#session-gate): may this session attempt this action
/// at all? Runs before preconditions and policy; `false` or an error denies (`gate_denied`), and
/// `true` never skips policy.
#[async_trait]
pub trait SessionGate: Send + Sync {
    /// Answers whether the call may proceed to policy.
    async fn authorize(&self, call: &CallView<'_>) -> Result<bool, HandlerError>;
}

/// A precondition owned by the executor's composition (stage `preconditions`: size limits,
/// argument checks); the tool's own ([`crate::Tool::precondition`]) runs first. Pure and
/// synchronous. Not to be confused with the policy's `[guards]` (content guards, installed as a
/// transform and a post handler: [`crate::ContentGuard`]).
pub trait Precondition: Send + Sync {
    /// Refuses with a message, or accepts.
    fn check(&self, call: &CallView<'_>) -> Result<(), String>;
}

/// A security hook's answer ([`SecurityHook::check`]).
#[derive(Debug, Clone, PartialEq)]
pub enum SecurityVerdict {
    /// No objection, arguments unchanged.
    Pass,
    /// No objection, but run with these arguments instead. In the final pass only an equal
    /// mapping is accepted (a second rewrite is unstable and fails closed).
    Replace(Map<String, Value>),
    /// Refuse; `stop` also cancels the turn's other pending calls.
    Deny {
        /// Why.
        reason: DecisionReason,
        /// Stop the turn.
        stop: bool,
    },
    /// Needs approval from `authority`.
    Escalate {
        /// Why.
        reason: DecisionReason,
        /// Whom to ask.
        authority: String,
    },
}

/// A security evaluator beside the policy (a programmable permission, a LionAGI-style
/// `PermissionPolicy` pre-hook). It runs in the authorize stage after the policy, and again on
/// the final arguments whenever anything changed them.
#[async_trait]
pub trait SecurityHook: Send + Sync {
    /// The hook's name, cited as the evaluator of its decisions.
    fn name(&self) -> &str;
    /// Judges the call. An error denies.
    async fn check(&self, call: &CallView<'_>) -> Result<SecurityVerdict, HandlerError>;
}

/// A user transformation (stage `transform`): returns replacement arguments, or `None` to keep
/// them. Its output is re-validated against the schema and re-authorized by every security
/// evaluator; an error denies the call (it never reaches error handlers).
#[async_trait]
pub trait Transform: Send + Sync {
    /// Transforms the call's arguments.
    async fn transform(
        &self,
        call: &CallView<'_>,
    ) -> Result<Option<Map<String, Value>>, HandlerError>;
}

/// A post handler: sees a successful result and may replace it (`Some`). An error goes to the
/// error handlers; the tool is never invoked again.
#[async_trait]
pub trait PostHandler: Send + Sync {
    /// Inspects (and optionally replaces) the result.
    async fn after(
        &self,
        call: &CallView<'_>,
        result: &Value,
    ) -> Result<Option<Value>, HandlerError>;
}

/// An invocation or post-handler failure, as error handlers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvocationFailure {
    /// A stable kind (`panic`, `post_handler`, or the tool's own kind).
    pub kind: String,
    /// A message safe to show.
    pub message: String,
}

/// What an error handler decided.
#[derive(Debug, Clone, PartialEq)]
pub enum ErrorDisposition {
    /// Keep the original error.
    Reraise,
    /// Turn the failure into a success with this result (the first replacement wins).
    ReplaceResult(Value),
}

/// An error handler: runs only for invocation and post-handler failures, never for a denial, a
/// gate refusal or a transform failure.
#[async_trait]
pub trait ErrorHandler: Send + Sync {
    /// Decides what to do with a failure. An error leaves the original failure primary.
    async fn on_error(
        &self,
        call: &CallView<'_>,
        failure: &InvocationFailure,
    ) -> Result<ErrorDisposition, HandlerError>;
}

/// Which actions an interceptor applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterceptorScope {
    /// Every action.
    All,
    /// Only these canonical names.
    Actions(Vec<String>),
}

impl InterceptorScope {
    /// Whether the scope covers the canonical name `action`.
    pub fn covers(&self, action: &str) -> bool {
        match self {
            Self::All => true,
            Self::Actions(names) => names.iter().any(|n| n == action),
        }
    }
}

/// The handler set: every interceptor with its scope, in registration order. The executor
/// compiles it, per action, into the plan; it is frozen when the executor is built.
#[derive(Clone, Default)]
pub struct Handlers {
    pub(crate) gate: Option<Arc<dyn SessionGate>>,
    pub(crate) preconditions: Vec<(InterceptorScope, Arc<dyn Precondition>)>,
    pub(crate) security: Vec<(InterceptorScope, Arc<dyn SecurityHook>, GateLevel)>,
    pub(crate) transforms: Vec<(InterceptorScope, Arc<dyn Transform>)>,
    pub(crate) post: Vec<(InterceptorScope, Arc<dyn PostHandler>)>,
    pub(crate) on_error: Vec<(InterceptorScope, Arc<dyn ErrorHandler>)>,
}

impl fmt::Debug for Handlers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handlers")
            .field("gate", &self.gate.is_some())
            .field("preconditions", &self.preconditions.len())
            .field("security", &self.security.len())
            .field("transforms", &self.transforms.len())
            .field("post", &self.post.len())
            .field("on_error", &self.on_error.len())
            .finish()
    }
}

impl Handlers {
    /// The set with a policy's `[guards]`: on arguments after every transform (they check the
    /// final arguments), on results before every post handler (none sees what a guard
    /// withholds or redacts).
    pub(crate) fn with_policy_guards(
        mut self,
        (arguments, results): (crate::ContentGuard, crate::ContentGuard),
    ) -> Self {
        self.transforms
            .push((InterceptorScope::All, Arc::new(arguments)));
        self.post
            .insert(0, (InterceptorScope::All, Arc::new(results)));
        self
    }

    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the session gate.
    pub fn gate(mut self, gate: Arc<dyn SessionGate>) -> Self {
        self.gate = Some(gate);
        self
    }
    /// Adds a precondition.
    pub fn precondition(
        mut self,
        scope: InterceptorScope,
        precondition: Arc<dyn Precondition>,
    ) -> Self {
        self.preconditions.push((scope, precondition));
        self
    }
    /// Adds a security hook whose denials are final (a `hard` gate).
    pub fn security(self, scope: InterceptorScope, hook: Arc<dyn SecurityHook>) -> Self {
        self.security_at(scope, hook, GateLevel::Hard)
    }
    /// Adds a security hook at a gate level (docs/design/executor.md#gate-levels-and-the-reducer,
    /// in every profile):
    ///
    /// - `Hard`: a `Deny` is final;
    /// - `Soft`: a `Deny` can be overridden by a recorded exception (governed profiles, see
    ///   [`crate::Exception`]; the certificate is then `DEGRADED`), otherwise it denies;
    /// - `Advisory`: a `Deny` or `Escalate` is recorded (a warning in the minimal profile, a
    ///   `gate_evaluated` advisory deny in governed ones) and the call proceeds.
    ///
    /// An `Escalate` is always a soft deny with a named approval authority (an approval
    /// receipt, or an exception, resolves it), except from an advisory hook. A hook that fails
    /// or panics denies at every level.
    pub fn security_at(
        mut self,
        scope: InterceptorScope,
        hook: Arc<dyn SecurityHook>,
        level: GateLevel,
    ) -> Self {
        self.security.push((scope, hook, level));
        self
    }
    /// Adds a transform.
    pub fn transform(mut self, scope: InterceptorScope, transform: Arc<dyn Transform>) -> Self {
        self.transforms.push((scope, transform));
        self
    }
    /// Adds a post handler.
    pub fn post(mut self, scope: InterceptorScope, handler: Arc<dyn PostHandler>) -> Self {
        self.post.push((scope, handler));
        self
    }
    /// Adds an error handler.
    pub fn on_error(mut self, scope: InterceptorScope, handler: Arc<dyn ErrorHandler>) -> Self {
        self.on_error.push((scope, handler));
        self
    }
}
