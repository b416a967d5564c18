//! Programmable permissions (docs/design/policy.md#programmable-permissions): checks written in
//! code by a library user, of three kinds, sync or async, each registered under a name and a
//! version that the snapshot lists and its digest covers, so a snapshot names every evaluator that
//! can decide.
//!
//! | kind | may answer | runs |
//! |---|---|---|
//! | [`PermissionKind::Deny`] | [`Answer::Denied`] or nothing | after the deny rules |
//! | [`PermissionKind::Allow`] | [`Answer::Allowed`] or nothing | after the ask rules, before the allow rules |
//! | [`PermissionKind::Decide`] | either, or nothing | with the allow kind, in registration order |
//!
//! Within a phase, permissions run in registration order and the first answer decides; nothing
//! else is asked after it. Then come the allow rules and the default, as without permissions.
//! The order is per subject: a deny rule, a refusal the engine makes without a rule (a missing
//! field under deny rules, an unparseable command, a program that cannot be known statically) or
//! an ask rule stands whatever a permission says, and a permission's answer replaces what the
//! allow rules and the default would have said for the other subjects.
//!
//! Failure is closed: a check that returns [`PermissionError::Tool`] denies the call with its
//! message (the model hears it, the turn goes on); any other error, an answer the kind may not
//! give, or a sync decision over an async permission is an `Err` for the caller, never an allow.
//!
//! Key design decision: the declarative engine stays synchronous and pure; permissions are
//! evaluated around it ([`decide_with_permissions`], [`decide_with_permissions_async`]), and the
//! async variant is a plain future (boxed, `Send`), so this crate needs no async runtime.
//!
//! ```
//! use warden_policy::permission::*;
//! use warden_policy::{Call, Decision, PolicyBuilder};
//!
//! let no_prod = |call: &Call| -> Result<Option<Answer>, PermissionError> {
//!     Ok((call.args["target"] == "prod").then(|| Answer::stop("never deploy to prod")))
//! };
//! let permissions = PermissionSet::new()
//!     .register(PermissionInfo::new("no-prod", "1", PermissionKind::Deny), no_prod)?
//!     .register(PermissionInfo::new("deploys", "1", PermissionKind::Allow), |call: &Call| {
//!         Ok((call.tool == "deploy").then_some(Answer::Allowed))
//!     })?;
//! let snapshot = PolicyBuilder::new()
//!     .default(Decision::Deny)
//!     .permissions(&permissions)?
//!     .build()?;
//! assert_eq!(snapshot.permissions().len(), 2);
//!
//! let prod = Call::new("deploy", serde_json::json!({"target": "prod"}));
//! let v = decide_with_permissions(&snapshot, &permissions, &prod).unwrap();
//! assert_eq!(v.verdict.decision, Decision::Deny);
//! assert!(v.stop);
//! assert_eq!(v.decided_by.as_ref().map(|p| p.name.as_str()), Some("no-prod"));
//!
//! let staging = Call::new("deploy", serde_json::json!({"target": "staging"}));
//! let v = decide_with_permissions(&snapshot, &permissions, &staging).unwrap();
//! assert_eq!(v.verdict.decision, Decision::Allow);
//! # Ok::<(), warden_policy::PolicyError>(())
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::compile::{PolicyBuilder, PolicySnapshot};
use crate::decl::Decision;
use crate::engine::{Call, Prepared, SubjectVerdict, Verdict};
use crate::error::{Location, PolicyError};

/// What a permission may answer (docs/design/policy.md#precedence places each kind in the order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PermissionKind {
    /// Only [`Answer::Denied`] (or no answer); runs after the deny rules.
    Deny,
    /// Only [`Answer::Allowed`] (or no answer); runs after the ask rules.
    Allow,
    /// Either answer (or none); runs with the allow kind, in registration order.
    Decide,
}

impl PermissionKind {
    /// `deny`, `allow` or `decide`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deny => "deny",
            Self::Allow => "allow",
            Self::Decide => "decide",
        }
    }

    fn may_answer(self, answer: &Answer) -> bool {
        matches!(
            (self, answer),
            (Self::Decide, _)
                | (Self::Deny, Answer::Denied { .. })
                | (Self::Allow, Answer::Allowed)
        )
    }

    fn allowed_answers(self) -> &'static str {
        match self {
            Self::Deny => "a deny permission may answer only Denied or nothing",
            Self::Allow => "an allow permission may answer only Allowed or nothing",
            Self::Decide => "a decide permission may answer Allowed, Denied or nothing",
        }
    }
}

impl fmt::Display for PermissionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A permission's identity: what the snapshot lists and its digest covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PermissionInfo {
    /// Unique within a snapshot, non-empty, no whitespace.
    pub name: String,
    /// Its version: change it whenever the code's behaviour changes, so the digest does.
    pub version: String,
    /// Its kind.
    pub kind: PermissionKind,
}

impl PermissionInfo {
    /// A permission's identity.
    pub fn new(name: impl Into<String>, version: impl Into<String>, kind: PermissionKind) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            kind,
        }
    }

    fn validate(&self) -> Result<(), PolicyError> {
        let bad = |message: String| {
            Err(PolicyError::Syntax {
                at: Location::file("<library>"),
                message,
            })
        };
        if self.name.is_empty() || self.name.chars().any(char::is_whitespace) {
            return bad(format!(
                "permission name `{}` must be non-empty and hold no whitespace",
                self.name
            ));
        }
        if self.version.trim().is_empty() {
            return bad(format!("permission `{}` needs a version", self.name));
        }
        Ok(())
    }
}

impl fmt::Display for PermissionInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{} ({})", self.name, self.version, self.kind)
    }
}

/// A permission's answer about one call. No answer (`None`) means no opinion: the next
/// permission, then the allow rules and the default, decide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Answer {
    /// The call may run.
    Allowed,
    /// The call must not run.
    Denied {
        /// Why, for the model (an empty reason is replaced by one naming the permission).
        reason: String,
        /// Stop the turn: the executor cancels the turn's other pending calls.
        stop: bool,
    },
}

impl Answer {
    /// A denial that lets the turn go on.
    pub fn deny(reason: impl Into<String>) -> Self {
        Self::Denied {
            reason: reason.into(),
            stop: false,
        }
    }

    /// A denial that stops the turn.
    pub fn stop(reason: impl Into<String>) -> Self {
        Self::Denied {
            reason: reason.into(),
            stop: true,
        }
    }
}

/// Why a permission's check failed.
#[derive(Debug, thiserror::Error)]
pub enum PermissionError {
    /// The check failed in a way the model should hear about (an approval service did not
    /// answer): the call is denied with this message as its reason, and the turn goes on.
    #[error("{0}")]
    Tool(String),
    /// Any other failure: it propagates to the caller as [`DecideError::Failed`].
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

impl PermissionError {
    /// Wraps any error as [`PermissionError::Other`].
    pub fn other(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Other(e.into())
    }
}

/// What [`decide_with_permissions`] refuses to turn into a verdict. The caller must not run
/// the call (fail closed).
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    /// The permission set is not the one the snapshot declares (names, versions, kinds, order).
    #[error(
        "the permissions given ({given}) are not the ones the policy snapshot declares ({declared})"
    )]
    Undeclared {
        /// What the snapshot declares.
        declared: String,
        /// What was given.
        given: String,
    },
    /// A sync decision over a set that holds an async permission.
    #[error("permission {permission} is async: decide with decide_with_permissions_async")]
    AsyncInSync {
        /// The async permission.
        permission: PermissionInfo,
    },
    /// A permission answered what its kind may not.
    #[error("permission {permission} answered {answer:?}: {}", permission.kind.allowed_answers())]
    WrongKind {
        /// The permission.
        permission: PermissionInfo,
        /// What it answered.
        answer: Answer,
    },
    /// A permission failed with an error other than [`PermissionError::Tool`].
    #[error("permission {permission} failed checking a call of {tool}: {source}")]
    Failed {
        /// The permission.
        permission: PermissionInfo,
        /// The call's tool.
        tool: String,
        /// The error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// A synchronous permission. A closure `Fn(&Call) -> Result<Option<Answer>, PermissionError>`
/// is one.
///
/// The call's arguments are the model's, before any schema validation: read them defensively.
pub trait Permission: Send + Sync {
    /// Answers about one call, or `Ok(None)` for no opinion.
    fn check(&self, call: &Call) -> Result<Option<Answer>, PermissionError>;
}

impl<F> Permission for F
where
    F: Fn(&Call) -> Result<Option<Answer>, PermissionError> + Send + Sync,
{
    fn check(&self, call: &Call) -> Result<Option<Answer>, PermissionError> {
        self(call)
    }
}

/// The future an [`AsyncPermission`] returns.
pub type PermissionFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Answer>, PermissionError>> + Send + 'a>>;

/// An asynchronous permission (an approval service over the network). Any runtime can drive
/// it; only [`decide_with_permissions_async`] can evaluate it.
///
/// ```
/// use warden_policy::Call;
/// use warden_policy::permission::{Answer, AsyncPermission, PermissionFuture};
/// struct Approvals;
/// impl AsyncPermission for Approvals {
///     fn check<'a>(&'a self, call: &'a Call) -> PermissionFuture<'a> {
///         Box::pin(async move { Ok((call.tool == "read").then_some(Answer::Allowed)) })
///     }
/// }
/// ```
pub trait AsyncPermission: Send + Sync {
    /// Answers about one call, or `Ok(None)` for no opinion.
    fn check<'a>(&'a self, call: &'a Call) -> PermissionFuture<'a>;
}

#[derive(Clone)]
enum Check {
    Sync(Arc<dyn Permission>),
    Async(Arc<dyn AsyncPermission>),
}

#[derive(Clone)]
struct Entry {
    info: PermissionInfo,
    check: Check,
}

/// The registered permissions, in registration order. Declare them in the snapshot with
/// [`PolicyBuilder::permissions`]; decide with [`decide_with_permissions`] (or its async
/// variant), which refuses a set that is not the one the snapshot declares.
#[derive(Clone, Default)]
pub struct PermissionSet {
    entries: Vec<Entry>,
}

impl fmt::Debug for PermissionSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| e.info.to_string()))
            .finish()
    }
}

impl PermissionSet {
    /// No permissions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a synchronous permission. Names are unique within a set.
    pub fn register(
        self,
        info: PermissionInfo,
        permission: impl Permission + 'static,
    ) -> Result<Self, PolicyError> {
        self.push(info, Check::Sync(Arc::new(permission)))
    }

    /// Registers an asynchronous permission. Names are unique within a set.
    pub fn register_async(
        self,
        info: PermissionInfo,
        permission: impl AsyncPermission + 'static,
    ) -> Result<Self, PolicyError> {
        self.push(info, Check::Async(Arc::new(permission)))
    }

    fn push(mut self, info: PermissionInfo, check: Check) -> Result<Self, PolicyError> {
        info.validate()?;
        if self.entries.iter().any(|e| e.info.name == info.name) {
            return Err(duplicate(&info.name));
        }
        self.entries.push(Entry { info, check });
        Ok(self)
    }

    /// The registered permissions' identities, in registration order.
    pub fn infos(&self) -> impl Iterator<Item = &PermissionInfo> {
        self.entries.iter().map(|e| &e.info)
    }

    /// How many permissions are registered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The order of docs/design/policy.md#precedence: every deny permission (in registration
    /// order), then the allow and decide permissions (in registration order).
    fn in_order(&self) -> impl Iterator<Item = &Entry> {
        let deny = |e: &&Entry| e.info.kind == PermissionKind::Deny;
        self.entries
            .iter()
            .filter(deny)
            .chain(self.entries.iter().filter(move |e| !deny(e)))
    }

    fn matches(&self, snapshot: &PolicySnapshot) -> Result<(), DecideError> {
        if self.infos().eq(snapshot.permissions.iter()) {
            return Ok(());
        }
        let list = |infos: &mut dyn Iterator<Item = &PermissionInfo>| {
            let items: Vec<String> = infos.map(ToString::to_string).collect();
            if items.is_empty() {
                "none".to_owned()
            } else {
                items.join(", ")
            }
        };
        Err(DecideError::Undeclared {
            declared: list(&mut snapshot.permissions.iter()),
            given: list(&mut self.infos()),
        })
    }
}

fn duplicate(name: &str) -> PolicyError {
    PolicyError::Syntax {
        at: Location::file("<library>"),
        message: format!("permission `{name}` is registered twice"),
    }
}

impl PolicyBuilder {
    /// Declares every permission of `set` (name, version, kind, in registration order): the
    /// snapshot lists them ([`PolicySnapshot::permissions`]) and its digest covers them. A
    /// snapshot without permissions keeps the digest it had before permissions existed.
    pub fn permissions(mut self, set: &PermissionSet) -> Result<Self, PolicyError> {
        for info in set.infos() {
            info.validate()?;
            if self.permissions.iter().any(|p| p.name == info.name) {
                return Err(duplicate(&info.name));
            }
            self.permissions.push(info.clone());
        }
        Ok(self)
    }
}

impl PolicySnapshot {
    /// The programmable permissions this snapshot declares, in registration order.
    pub fn permissions(&self) -> &[PermissionInfo] {
        &self.permissions
    }
}

/// Adds the declared permissions to a snapshot's canonical form (only when there are some, so
/// every digest made before permissions existed stays the same).
pub(crate) fn cover(mut canonical: Json, permissions: &[PermissionInfo]) -> Json {
    if let (false, Some(map)) = (permissions.is_empty(), canonical.as_object_mut()) {
        let list = permissions
            .iter()
            .map(|p| serde_json::json!({"name": p.name, "version": p.version, "kind": p.kind.as_str()}))
            .collect();
        map.insert("permissions".into(), Json::Array(list));
    }
    canonical
}

/// A decision reached with programmable permissions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PermissionVerdict {
    /// The verdict. When a permission decided, `rule` and `source` are `None` and `reason` is
    /// the permission's (a denial's reason, or a [`PermissionError::Tool`] message, verbatim).
    pub verdict: Verdict,
    /// The permission that decided, or `None` when the rules or the default did.
    pub decided_by: Option<PermissionInfo>,
    /// The deciding permission denied with `stop`: the executor stops the turn.
    pub stop: bool,
    /// The message of the [`PermissionError::Tool`] that denied the call, if one did.
    pub tool_error: Option<String>,
}

/// Decides `call` with the snapshot's rules and the registered permissions, in the order of
/// docs/design/policy.md#precedence. `permissions` must be the set the snapshot declares, and sync
/// only.
pub fn decide_with_permissions(
    snapshot: &PolicySnapshot,
    permissions: &PermissionSet,
    call: &Call,
) -> Result<PermissionVerdict, DecideError> {
    permissions.matches(snapshot)?;
    if let Some(e) = permissions
        .entries
        .iter()
        .find(|e| matches!(e.check, Check::Async(_)))
    {
        return Err(DecideError::AsyncInSync {
            permission: e.info.clone(),
        });
    }
    let run = Run::new(snapshot, call);
    match run_sync(&run, permissions, call, false)? {
        Some(done) => Ok(done),
        None => Ok(run.finish()),
    }
}

/// Asks the sync permissions in order (only the deny ones when `deny_only`) until one decides.
fn run_sync(
    run: &Run<'_>,
    permissions: &PermissionSet,
    call: &Call,
    deny_only: bool,
) -> Result<Option<PermissionVerdict>, DecideError> {
    for e in permissions
        .in_order()
        .filter(|e| !deny_only || e.info.kind == PermissionKind::Deny)
    {
        if !run.asks(e.info.kind) {
            break;
        }
        let result = match &e.check {
            Check::Sync(p) => p.check(call),
            Check::Async(_) => {
                return Err(DecideError::AsyncInSync {
                    permission: e.info.clone(),
                });
            }
        };
        if let Some(done) = run.absorb(&e.info, result)? {
            return Ok(Some(done));
        }
    }
    Ok(None)
}

/// [`decide_with_permissions`] for sets holding async permissions (sync ones are called
/// inline, so keep them quick). Runtime-agnostic: any executor can drive the future.
pub async fn decide_with_permissions_async(
    snapshot: &PolicySnapshot,
    permissions: &PermissionSet,
    call: &Call,
) -> Result<PermissionVerdict, DecideError> {
    permissions.matches(snapshot)?;
    let run = Run::new(snapshot, call);
    for e in permissions.in_order() {
        if !run.asks(e.info.kind) {
            break;
        }
        let result = match &e.check {
            Check::Sync(p) => p.check(call),
            Check::Async(p) => p.check(call).await,
        };
        if let Some(done) = run.absorb(&e.info, result)? {
            return Ok(done);
        }
    }
    Ok(run.finish())
}

/// The verdict of the deny permissions alone, when one denies `call`: how a scope's ancestors
/// are asked (for their denials only, [`crate::Scope::decide_with_permissions`]). `permissions`
/// must be the set the snapshot declares, and sync only.
pub(crate) fn deny_permissions_verdict(
    snapshot: &PolicySnapshot,
    permissions: &PermissionSet,
    call: &Call,
) -> Result<Option<PermissionVerdict>, DecideError> {
    permissions.matches(snapshot)?;
    // A deny permission answers only a denial (or nothing).
    run_sync(&Run::new(snapshot, call), permissions, call, true)
}

/// Where a subject stands before permissions run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Decided before permissions: a deny or ask rule, or a refusal without a rule.
    Fixed,
    /// A constraint no deny or ask rule matched: no part in the fold.
    Neutral,
    /// Left to the allow rules and the default: a permission's answer replaces them.
    Open,
}

/// One evaluation: the rules' verdict, where each subject stands, and which phase is next.
struct Run<'a> {
    snapshot: &'a PolicySnapshot,
    call: &'a Call,
    prepared: Vec<Prepared>,
    verdict: Verdict,
    stages: Vec<Stage>,
    /// Nothing a permission says can change the verdict (a subject is denied already, or the
    /// call could not be split).
    settled: bool,
    /// Some subject (or, with only neutral constraints, the call) is left to permissions.
    open: bool,
}

impl<'a> Run<'a> {
    fn new(snapshot: &'a PolicySnapshot, call: &'a Call) -> Self {
        let mut verdict = snapshot.decide_by_rules(call);
        let prepared = snapshot.prepared_subjects(call);
        if verdict.subjects.is_empty() || prepared.len() != verdict.subjects.len() {
            // A call that could not be split is denied whatever a permission says; the two
            // splits of one call cannot disagree, but if they did, fail closed.
            if verdict.decision != Decision::Deny {
                verdict.decision = Decision::Deny;
                verdict.rule = None;
                verdict.source = None;
                verdict.reason =
                    "the call's subjects could not be matched with permissions: denied".into();
            }
            return Self {
                snapshot,
                call,
                prepared: Vec::new(),
                verdict,
                stages: Vec::new(),
                settled: true,
                open: false,
            };
        }
        let stages: Vec<Stage> = verdict
            .subjects
            .iter()
            .zip(&prepared)
            .map(|(s, p)| {
                if s.neutral {
                    Stage::Neutral
                } else if s.rule.is_some() {
                    if s.decision == Decision::Allow {
                        Stage::Open
                    } else {
                        Stage::Fixed
                    }
                } else if snapshot.refuses_without_rule(p) {
                    Stage::Fixed
                } else {
                    Stage::Open
                }
            })
            .collect();
        let settled = verdict
            .subjects
            .iter()
            .zip(&stages)
            .any(|(s, st)| *st == Stage::Fixed && s.decision == Decision::Deny);
        let open = stages.contains(&Stage::Open) || stages.iter().all(|s| *s == Stage::Neutral);
        Self {
            snapshot,
            call,
            prepared,
            verdict,
            stages,
            settled,
            open,
        }
    }

    /// Whether a permission of `kind` is asked now.
    fn asks(&self, kind: PermissionKind) -> bool {
        !self.settled && (kind == PermissionKind::Deny || self.open)
    }

    /// Takes one permission's result: `Some` when it decided.
    fn absorb(
        &self,
        info: &PermissionInfo,
        result: Result<Option<Answer>, PermissionError>,
    ) -> Result<Option<PermissionVerdict>, DecideError> {
        let (decision, reason, stop, tool_error) = match result {
            Ok(None) => return Ok(None),
            Err(PermissionError::Other(source)) => {
                return Err(DecideError::Failed {
                    permission: info.clone(),
                    tool: self.call.tool.clone(),
                    source,
                });
            }
            Err(PermissionError::Tool(message)) => {
                let reason = if message.trim().is_empty() {
                    format!("permission `{}` failed: denied", info.name)
                } else {
                    message.clone()
                };
                (Decision::Deny, reason, false, Some(message))
            }
            Ok(Some(answer)) if !info.kind.may_answer(&answer) => {
                return Err(DecideError::WrongKind {
                    permission: info.clone(),
                    answer,
                });
            }
            Ok(Some(Answer::Allowed)) => (
                Decision::Allow,
                format!(
                    "allowed by permission `{}` (version {})",
                    info.name, info.version
                ),
                false,
                None,
            ),
            Ok(Some(Answer::Denied { reason, stop })) => {
                let reason = if reason.trim().is_empty() {
                    format!("denied by permission `{}`", info.name)
                } else {
                    reason
                };
                (Decision::Deny, reason, stop, None)
            }
        };
        Ok(Some(self.decide(
            info,
            decision,
            reason.into(),
            stop,
            tool_error,
        )))
    }

    /// The verdict once a permission answered `decision` for every subject it reaches.
    fn decide(
        &self,
        info: &PermissionInfo,
        decision: Decision,
        reason: Arc<str>,
        stop: bool,
        tool_error: Option<String>,
    ) -> PermissionVerdict {
        let mut verdict = self.verdict.clone();
        // A deny-kind permission runs before the ask rules, so it reaches every subject no
        // deny rule decided; an allow or decide permission runs after them, so it reaches only
        // the subjects left to the allow rules and the default.
        let before_ask = info.kind == PermissionKind::Deny;
        let reaches = |stage: Stage, s: &SubjectVerdict| match stage {
            Stage::Open => true,
            Stage::Fixed => before_ask && s.decision != Decision::Deny,
            Stage::Neutral => false,
        };
        let mut by_permission = vec![false; verdict.subjects.len()];
        for (i, (s, stage)) in verdict.subjects.iter_mut().zip(&self.stages).enumerate() {
            if reaches(*stage, s) {
                let answered = SubjectVerdict {
                    decision,
                    rule: None,
                    source: None,
                    reason: reason.clone(),
                    ..s.clone()
                };
                // Operating modes cap a permission's answer as they cap the rules': a mode
                // only narrows, whoever allowed.
                *s = self
                    .snapshot
                    .cap_by_modes(&self.prepared[i], self.call, answered);
                by_permission[i] = s.decision == decision;
            }
        }
        let deciding = verdict
            .subjects
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.neutral)
            .max_by(|(ia, a), (ib, b)| a.decision.cmp(&b.decision).then(ib.cmp(ia)))
            .map(|(i, _)| i);
        let several = verdict.subjects.len() > 1;
        let decided = match deciding {
            // Only neutral constraints: the permission answered for the call itself.
            None => true,
            Some(i) => by_permission[i],
        };
        match deciding {
            Some(i) if !decided => {
                // A subject the rules decided is stricter than the permission's answer.
                let s = &verdict.subjects[i];
                verdict.decision = s.decision;
                verdict.rule = s.rule.clone();
                verdict.source = s.source.clone();
                verdict.reason = s.reason.clone();
                verdict.subject = several.then(|| s.text.clone());
            }
            _ => {
                verdict.decision = decision;
                verdict.rule = None;
                verdict.source = None;
                verdict.reason = reason;
                verdict.subject = match deciding {
                    Some(i) if several => Some(verdict.subjects[i].text.clone()),
                    _ => None,
                };
            }
        }
        PermissionVerdict {
            verdict,
            decided_by: decided.then(|| info.clone()),
            stop: decided && stop,
            tool_error: if decided { tool_error } else { None },
        }
    }

    /// No permission answered: the rules' verdict.
    fn finish(self) -> PermissionVerdict {
        PermissionVerdict {
            verdict: self.verdict,
            decided_by: None,
            stop: false,
            tool_error: None,
        }
    }
}
