//! The policy's `[guards]` (docs/guards.md) in the executor. [`ContentGuard`] checks what goes
//! into a tool and what comes out of it: as a [`Transform`] it redacts secrets in a call's
//! arguments (the redacted arguments are then re-validated and re-authorized, like any
//! transform's) or refuses the call before it runs; as a [`PostHandler`] it redacts a tool's
//! result or withholds it (a `post_handler` failure; the tool is never invoked again). Its
//! messages name kinds and places, never a secret.

use async_trait::async_trait;
use serde_json::{Map, Value};
use warden_policy::{GuardOutcome, GuardSet, PolicySnapshot};

use crate::interceptor::{
    CallView, HandlerError, Handlers, InterceptorScope, PostHandler, Transform,
};

/// A policy's content guards as executor handlers.
///
/// ```
/// use std::sync::Arc;
/// use warden_executor::{ContentGuard, Handlers};
/// use warden_policy::{Format, LoadedPolicy, PathEnv, PolicySnapshot};
/// let file = LoadedPolicy::from_text(
///     "default = \"allow\"\n[guards]\nsecrets = \"redact\"\n".into(),
///     Format::Toml, "p.toml", "p", None,
/// )?;
/// let env = PathEnv { project_root: "/repo".into(), home: None };
/// let snapshot = PolicySnapshot::from_files(&[file], env)?;
/// let handlers = Arc::new(ContentGuard::of(&snapshot)).install(Handlers::new());
/// # let _ = handlers;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ContentGuard {
    set: GuardSet,
}

impl ContentGuard {
    /// Guards from a compiled `[guards]` table.
    pub fn new(set: GuardSet) -> Self {
        Self { set }
    }

    /// The snapshot's guards (the strictest of its files').
    pub fn of(snapshot: &PolicySnapshot) -> Self {
        Self::new(snapshot.guards().clone())
    }

    /// Adds the guard to `handlers` for every action: a transform on arguments and a post
    /// handler on results.
    pub fn install(self: std::sync::Arc<Self>, handlers: Handlers) -> Handlers {
        handlers
            .transform(InterceptorScope::All, self.clone())
            .post(InterceptorScope::All, self)
    }
}

#[async_trait]
impl Transform for ContentGuard {
    async fn transform(
        &self,
        call: &CallView<'_>,
    ) -> Result<Option<Map<String, Value>>, HandlerError> {
        if self.set.is_empty() {
            return Ok(None);
        }
        match self.set.check_json(&Value::Object(call.arguments.clone())) {
            GuardOutcome::Pass => Ok(None),
            GuardOutcome::Redacted {
                text: Value::Object(args),
                ..
            } => Ok(Some(args)),
            GuardOutcome::Redacted { .. } => Err(HandlerError::new(
                "a guard's redaction of the arguments is not an object",
            )),
            GuardOutcome::Blocked { reason, .. } => Err(HandlerError::new(format!(
                "a guard blocked this call: {reason}"
            ))),
        }
    }
}

#[async_trait]
impl PostHandler for ContentGuard {
    async fn after(
        &self,
        _call: &CallView<'_>,
        result: &Value,
    ) -> Result<Option<Value>, HandlerError> {
        if self.set.is_empty() {
            return Ok(None);
        }
        match self.set.check_json(result) {
            GuardOutcome::Pass => Ok(None),
            GuardOutcome::Redacted { text, .. } => Ok(Some(text)),
            GuardOutcome::Blocked { reason, .. } => Err(HandlerError::new(format!(
                "a guard withheld the result: {reason}"
            ))),
        }
    }
}
