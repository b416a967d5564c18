//! Subagent scopes (docs/design/policy.md#subagent-scopes): a chain of policies,
//! one per agent, in which a child can narrow its parent but never silently widen it.
//!
//! A call made in a scope is decided like this:
//!
//! 1. **Ancestor deny rules first**, outermost first (the root, then down to the parent), the
//!    way alpineagents asks the deny permissions of the runs above a subagent "from the top". The
//!    first ancestor whose deny rules deny the call decides, and the verdict names it
//!    ([`ScopeStage::AncestorDeny`]). "Deny rules" include the refusals the engine makes in their
//!    name: a missing field under deny rules with a specifier, a call that cannot be split, and
//!    a program that cannot be known statically when the tool has deny rules.
//! 2. Then the scope's own policy. A scope with **no policy of its own inherits** its parent's
//!    verdict. A scope with its own policy gets, **by default, the stricter** of its own verdict
//!    and its parent's (recursively; on a tie its own is cited): a child cannot silently expand
//!    its parent.
//! 3. A child declared **`expands_parent`** with a named authority replaces its parent's allow
//!    rules, ask rules and default with its own (alpineagents: a subagent's own list replaces the
//!    lead's allow and decide permissions), and every verdict that relied on it (one looser than
//!    the stricter-of verdict would have been) names that authority in
//!    [`ScopeVerdict::authorities`].
//! 4. Every ancestor's operating modes (`[modes]`) still cap the verdict: an expansion replaces
//!    allow rules, ask rules and default, never the modes a run is in
//!    ([`ScopeStage::AncestorMode`]).
//!
//! 5. With programmable permissions ([`Scope::decide_with_permissions`]), ancestors are asked
//!    for their deny permissions too, after their deny rules, and each scope's own verdict runs
//!    its permissions; plain [`Scope::decide`] denies any call in a chain that declares them.
//!
//! Scopes are composed from snapshots in code ([`Scope::root`], [`Scope::child`]), or declared
//! in policy files with a `[scope]` table and composed by [`ScopeSet::from_files`].
//!
//! ```
//! use std::sync::Arc;
//! use warden_policy::*;
//! let lead = Arc::new(PolicySnapshot::builder()
//!     .default(Decision::Allow)
//!     .own(Source::trusted("lead"), RuleSet { deny: Rule::parse_list("delete")?, ..RuleSet::default() })
//!     .build()?);
//! let drafter = Arc::new(PolicySnapshot::builder()
//!     .default(Decision::Deny)
//!     .own(Source::trusted("drafter"), RuleSet { allow: Rule::parse_list("write delete")?, ..RuleSet::default() })
//!     .build()?);
//! let root = Scope::root("lead", lead)?;
//! let child = root.child("drafter", ChildPolicy::Own(drafter))?;
//!
//! let v = child.decide(&Call::new("delete", serde_json::json!({})));
//! assert_eq!(v.verdict.decision, Decision::Deny);
//! assert_eq!((&*v.scope, v.stage), ("lead", ScopeStage::AncestorDeny));
//!
//! let v = child.decide(&Call::new("read", serde_json::json!({"path": "/a"})));
//! assert_eq!(v.verdict.decision, Decision::Deny); // the drafter's own default
//! assert_eq!(&*v.scope, "drafter");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use warden_contracts::Digest;

use crate::compile::PolicySnapshot;
use crate::decl::{Decision, ListKind};
use crate::engine::{Call, Prepared, SubjectVerdict, Verdict};
use crate::error::{Location, PolicyError};
use crate::file::{LoadedPolicy, PolicyFile};
use crate::matcher::{PathEnv, Value};
use crate::permission::{
    DecideError, PermissionInfo, PermissionSet, PermissionVerdict, decide_with_permissions,
};

/// The format tag of a scope's canonical form; part of its digest.
pub const SCOPE_FORMAT: &str = "warden.scope/1";

/// The `[scope]` table: this file is the policy of a subagent scope.
///
/// ```toml
/// [scope]
/// name = "reviewer"
/// parent = "main"                                   # default: the root policy
/// expands_parent = { authority = "platform-team" }  # optional: replace the parent's allow/ask/default
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScopeDecl {
    /// The scope's name: non-empty, no whitespace, unique among the scopes composed together.
    pub name: String,
    /// The parent scope's name; absent means the root (the files without `[scope]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Replace the parent's allow rules, ask rules and default instead of taking the stricter
    /// verdict; the ancestors' deny rules still come first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expands_parent: Option<ExpandsParent>,
}

/// The authority under which a child scope expands its parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpandsParent {
    /// Who allowed the expansion (a team, a ticket, an approval id); named by every verdict
    /// that relied on it.
    pub authority: String,
}

/// What policy a child scope has.
#[derive(Debug, Clone)]
pub enum ChildPolicy {
    /// None of its own: its parent's verdict applies.
    Inherit,
    /// Its own: after the ancestors' deny rules, the stricter of its verdict and its parent's.
    Own(Arc<PolicySnapshot>),
    /// Its own, replacing the parent's allow rules, ask rules and default (after the ancestors'
    /// deny rules), under a named authority.
    Expand {
        /// The child's policy.
        policy: Arc<PolicySnapshot>,
        /// Who allowed the expansion.
        authority: String,
    },
}

/// Why a scope cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// A name that is empty, holds whitespace, or is already used up the chain.
    #[error("scope name `{name}`: {message}")]
    Name {
        /// The name.
        name: String,
        /// What is wrong with it.
        message: String,
    },
    /// An expansion without an authority.
    #[error("scope `{scope}` expands its parent without naming an authority")]
    Authority {
        /// The scope.
        scope: String,
    },
    /// The scope's digest could not be computed.
    #[error("scope `{scope}`: {message}")]
    Digest {
        /// The scope.
        scope: String,
        /// Why.
        message: String,
    },
}

/// One scope of the chain: a name, an optional policy, its parent. Cheap to share (`Arc`).
pub struct Scope {
    name: Arc<str>,
    parent: Option<Arc<Scope>>,
    policy: Option<Arc<PolicySnapshot>>,
    /// The nearest policy up the chain (its own, or an ancestor's): never missing, since a
    /// root has one.
    nearest: Arc<PolicySnapshot>,
    authority: Option<Arc<str>>,
    digest: Digest,
}

impl fmt::Debug for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("name", &self.name)
            .field("parent", &self.parent.as_ref().map(|p| p.name.clone()))
            .field("policy", &self.policy.as_ref().map(|p| p.digest().clone()))
            .field("authority", &self.authority)
            .field("digest", &self.digest)
            .finish()
    }
}

/// How a scope verdict was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeStage {
    /// An ancestor's deny rules denied the call before the scope's own policy was asked.
    AncestorDeny,
    /// The scope's own policy decided.
    Own,
    /// The scope has no policy of its own: an ancestor's verdict applies.
    Inherited,
    /// An ancestor's verdict was stricter than the scope's own (stricter-of).
    Stricter,
    /// An ancestor's operating mode (`[modes]`) narrowed the verdict of a scope below an
    /// expansion: an expansion replaces allow rules, ask rules and default, never modes.
    AncestorMode,
}

/// An expansion a verdict relied on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ScopeAuthority {
    /// The expanding scope.
    pub scope: Arc<str>,
    /// Its authority.
    pub authority: Arc<str>,
}

/// The decision on a call made in a scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScopeVerdict {
    /// The verdict of the deciding scope's policy (for [`ScopeStage::AncestorDeny`], of its
    /// deny rules alone), unchanged.
    pub verdict: Verdict,
    /// The scope whose policy decided.
    pub scope: Arc<str>,
    /// The scope the call was made in.
    pub caller: Arc<str>,
    /// How the verdict was reached.
    pub stage: ScopeStage,
    /// Every expansion the verdict relied on: it would have been stricter had that scope not
    /// expanded its parent. Empty for every verdict stricter-of alone gives.
    pub authorities: Vec<ScopeAuthority>,
    /// The verdict's reason with the scope (and any authority) named, for a person and the model.
    pub reason: Arc<str>,
    /// The digest of the calling scope's chain (every scope's name, policy digest and
    /// authority, up to the root).
    pub scope_digest: Digest,
    /// The programmable permission that decided, if one did
    /// ([`Scope::decide_with_permissions`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission: Option<PermissionInfo>,
    /// The deciding permission denied with `stop`: the runtime stops the turn.
    pub stop: bool,
}

/// What one scope's policy (and its permissions) said about a call.
struct Said {
    verdict: Verdict,
    permission: Option<PermissionInfo>,
    stop: bool,
}

impl Said {
    fn rules(verdict: Verdict) -> Self {
        Self {
            verdict,
            permission: None,
            stop: false,
        }
    }

    fn permission(v: PermissionVerdict) -> Self {
        Self {
            verdict: v.verdict,
            permission: v.decided_by,
            stop: v.stop,
        }
    }
}

impl ScopeVerdict {
    /// The decision.
    pub fn decision(&self) -> Decision {
        self.verdict.decision
    }
}

impl Scope {
    /// A root scope: the policy of the agent a run starts with.
    pub fn root(
        name: impl Into<String>,
        policy: Arc<PolicySnapshot>,
    ) -> Result<Arc<Self>, ScopeError> {
        let name = name.into();
        check_name(&name, None)?;
        Self::make(name, None, policy.clone(), Some(policy), None)
    }

    /// A child scope of this one (a subagent).
    pub fn child(
        self: &Arc<Self>,
        name: impl Into<String>,
        policy: ChildPolicy,
    ) -> Result<Arc<Self>, ScopeError> {
        let name = name.into();
        check_name(&name, Some(self))?;
        let (policy, authority) = match policy {
            ChildPolicy::Inherit => (None, None),
            ChildPolicy::Own(p) => (Some(p), None),
            ChildPolicy::Expand { policy, authority } => {
                if authority.trim().is_empty() {
                    return Err(ScopeError::Authority { scope: name });
                }
                (Some(policy), Some(authority))
            }
        };
        let nearest = policy.clone().unwrap_or_else(|| self.nearest.clone());
        Self::make(name, Some(self.clone()), nearest, policy, authority)
    }

    fn make(
        name: String,
        parent: Option<Arc<Scope>>,
        nearest: Arc<PolicySnapshot>,
        policy: Option<Arc<PolicySnapshot>>,
        authority: Option<String>,
    ) -> Result<Arc<Self>, ScopeError> {
        let canonical = json!({
            "format": SCOPE_FORMAT,
            "name": name,
            "policy": policy.as_ref().map(|p| p.digest().to_string()),
            "expands_parent": authority.as_ref().map(|a| json!({"authority": a})),
            "parent": parent.as_ref().map(|p| p.digest.to_string()),
        });
        let digest = Digest::of_json(&canonical).map_err(|e| ScopeError::Digest {
            scope: name.clone(),
            message: e.to_string(),
        })?;
        Ok(Arc::new(Self {
            name: name.into(),
            parent,
            policy,
            nearest,
            authority: authority.map(Into::into),
            digest,
        }))
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its parent, unless it is a root.
    pub fn parent(&self) -> Option<&Arc<Scope>> {
        self.parent.as_ref()
    }

    /// Its own policy, unless it inherits.
    pub fn policy(&self) -> Option<&Arc<PolicySnapshot>> {
        self.policy.as_ref()
    }

    /// The authority it expands its parent under, if it does.
    pub fn authority(&self) -> Option<&str> {
        self.authority.as_deref()
    }

    /// The digest of its chain: every scope's name, policy digest and authority, up to the
    /// root. Evidence binds a scoped decision to it.
    pub fn digest(&self) -> &Digest {
        &self.digest
    }

    /// The chain from the root down to this scope.
    pub fn chain(&self) -> Vec<&Scope> {
        let mut chain = vec![self];
        let mut at = self;
        while let Some(p) = &at.parent {
            chain.push(p);
            at = p;
        }
        chain.reverse();
        chain
    }

    /// Decides a call made in this scope. Pure and deterministic, like
    /// [`PolicySnapshot::decide`]. A call in a chain where any scope's policy declares
    /// programmable permissions is denied here (as [`PolicySnapshot::decide`] denies): decide
    /// with [`Scope::decide_with_permissions`].
    pub fn decide(&self, call: &Call) -> ScopeVerdict {
        let decided = self.decide_by(
            call,
            // An ancestor whose policy declares permissions cannot be asked for its deny
            // permissions here: it denies (fails closed), even below an expansion.
            |_, p| {
                Ok::<_, std::convert::Infallible>(if p.permissions().is_empty() {
                    p.deny_rules_verdict(call).map(Said::rules)
                } else {
                    Some(Said::rules(p.decide(call)))
                })
            },
            |_, p| Ok(Said::rules(p.decide(call))),
        );
        match decided {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }

    /// Decides a call made in this scope with each scope's programmable permissions
    /// (`permissions(name)`: the set the scope's policy declares; `None` for a scope that
    /// declares none). Ancestors are asked for their denials only, deny rules then deny
    /// permissions, outermost first; each scope's own verdict runs its permissions in their
    /// place (docs/design/policy.md#precedence); the fold, the expansions and the modes are
    /// [`Scope::decide`]'s. Sync permissions only.
    ///
    /// Errors: a scope's set is not the one its policy declares (or is missing), holds an
    /// async permission, or a permission fails ([`DecideError`]): the runtime must not run
    /// the call.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use warden_policy::*;
    /// let lead_set = PermissionSet::new().register(
    ///     PermissionInfo::new("no-deploy", "1", PermissionKind::Deny),
    ///     |c: &Call| -> Result<Option<Answer>, PermissionError> {
    ///         Ok((c.tool == "deploy").then(|| Answer::deny("no deploys from a subagent")))
    ///     },
    /// )?;
    /// let lead = PolicySnapshot::builder()
    ///     .default(Decision::Allow)
    ///     .permissions(&lead_set)?
    ///     .build()?;
    /// let root = Scope::root("lead", Arc::new(lead))?;
    /// let helper = root.child("helper", ChildPolicy::Inherit)?;
    /// let sets = |name: &str| (name == "lead").then_some(&lead_set);
    /// let deploy = Call::new("deploy", serde_json::json!({}));
    /// let v = helper.decide_with_permissions(&deploy, sets)?;
    /// assert_eq!((v.decision(), v.stage), (Decision::Deny, ScopeStage::AncestorDeny));
    /// // Without the permissions, the chain fails closed.
    /// assert_eq!(helper.decide(&Call::new("read", serde_json::json!({}))).decision(), Decision::Deny);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn decide_with_permissions<'p>(
        &self,
        call: &Call,
        permissions: impl Fn(&str) -> Option<&'p PermissionSet>,
    ) -> Result<ScopeVerdict, DecideError> {
        let empty = PermissionSet::new();
        let set = |s: &Scope| permissions(&s.name).unwrap_or(&empty);
        self.decide_by(
            call,
            |s, p| {
                if let Some(v) = p.deny_rules_verdict(call) {
                    return Ok(Some(Said::rules(v)));
                }
                Ok(
                    crate::permission::deny_permissions_verdict(p, set(s), call)?
                        .map(Said::permission),
                )
            },
            |s, p| Ok(Said::permission(decide_with_permissions(p, set(s), call)?)),
        )
    }

    /// The order of a scope decision, with how an ancestor's denials (`deny`) and a scope's
    /// own verdict (`own_verdict`) are reached.
    fn decide_by<E>(
        &self,
        call: &Call,
        deny: impl Fn(&Scope, &PolicySnapshot) -> Result<Option<Said>, E>,
        own_verdict: impl Fn(&Scope, &PolicySnapshot) -> Result<Said, E>,
    ) -> Result<ScopeVerdict, E> {
        let chain = self.chain();
        let n = chain.len() - 1;
        let verdict = |said: Said, at: usize, stage, authorities: Vec<ScopeAuthority>| {
            let scope = chain[at].name.clone();
            let reason = scope_reason(
                &said.verdict.reason,
                &scope,
                &self.name,
                stage,
                &authorities,
            );
            ScopeVerdict {
                verdict: said.verdict,
                scope,
                caller: self.name.clone(),
                stage,
                authorities,
                reason,
                scope_digest: self.digest.clone(),
                permission: said.permission,
                stop: said.stop,
            }
        };
        // 1. Every ancestor's deny rules, outermost first.
        for (i, s) in chain[..n].iter().enumerate() {
            if let Some(p) = &s.policy
                && let Some(said) = deny(s, p)?
            {
                return Ok(verdict(said, i, ScopeStage::AncestorDeny, Vec::new()));
            }
        }
        // 2. Each scope's own verdict (the root always has a policy), then the fold down the
        // chain: a scope without a policy keeps its parent's verdict, an expanding scope
        // replaces it, any other takes the stricter (its own on a tie).
        let mut said: Vec<(usize, Said)> = Vec::new();
        for (i, s) in chain.iter().enumerate() {
            if let Some(p) = &s.policy {
                said.push((i, own_verdict(s, p)?));
            }
        }
        let own: Vec<(usize, &Verdict)> = said.iter().map(|(i, s)| (*i, &s.verdict)).collect();
        let fold = |ignore: Option<usize>| -> Option<usize> {
            let mut at: Option<usize> = None;
            for (k, (i, v)) in own.iter().enumerate() {
                let expands = chain[*i].authority.is_some() && ignore != Some(*i);
                if at.is_none_or(|a| expands || v.decision >= own[a].1.decision) {
                    at = Some(k);
                }
            }
            at
        };
        let Some(at) = fold(None) else {
            // Never reached (a root has a policy); keeps this total without a panic.
            let said = own_verdict(self, &self.nearest)?;
            return Ok(verdict(said, n, ScopeStage::Own, Vec::new()));
        };
        let (index, decided) = &own[at];
        // 3. Every ancestor's operating modes still cap the verdict: an expansion replaces a
        // parent's allow rules, ask rules and default, not the modes the run is in. (Without an
        // expansion this never binds: every scope's own verdict is capped by its own modes.)
        let ceiling = chain[..n]
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i, s.policy.as_ref()?.modes_ceiling(call)?)))
            .fold(None::<(usize, SubjectVerdict)>, |best, (i, c)| match best {
                Some((_, ref b)) if b.decision >= c.decision => best,
                _ => Some((i, c)),
            });
        let floor = ceiling
            .as_ref()
            .map_or(Decision::Allow, |(_, c)| c.decision);
        // 4. The expansions the verdict relied on: without each, would it be stricter?
        let authorities = chain
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let authority = s.authority.as_ref()?;
                let without = fold(Some(i)).map(|k| own[k].1.decision)?;
                (without.max(floor) > decided.decision.max(floor)).then(|| ScopeAuthority {
                    scope: s.name.clone(),
                    authority: authority.clone(),
                })
            })
            .collect();
        if let Some((i, capped)) = ceiling.filter(|(_, c)| c.decision > decided.decision) {
            let mut v = (*decided).clone();
            v.decision = capped.decision;
            v.rule = None;
            v.source = None;
            v.reason = capped.reason.clone();
            v.subject = (v.subjects.len() > 1).then(|| capped.text.clone());
            if let Some(p) = &chain[i].policy {
                v.policy_digest = p.digest().clone();
            }
            return Ok(verdict(
                Said::rules(v),
                i,
                ScopeStage::AncestorMode,
                authorities,
            ));
        }
        let stage = if *index == n {
            ScopeStage::Own
        } else if chain[n].policy.is_none() {
            ScopeStage::Inherited
        } else {
            ScopeStage::Stricter
        };
        let chosen = &said[at].1;
        let chosen = Said {
            verdict: chosen.verdict.clone(),
            permission: chosen.permission.clone(),
            stop: chosen.stop,
        };
        Ok(verdict(chosen, *index, stage, authorities))
    }
}

fn check_name(name: &str, parent: Option<&Arc<Scope>>) -> Result<(), ScopeError> {
    let bad = |message: &str| {
        Err(ScopeError::Name {
            name: name.to_owned(),
            message: message.to_owned(),
        })
    };
    if name.is_empty() || name.chars().any(char::is_whitespace) {
        return bad("a scope name is non-empty and holds no whitespace");
    }
    if parent.is_some_and(|p| p.chain().iter().any(|s| &*s.name == name)) {
        return bad("already names a scope up the chain");
    }
    Ok(())
}

fn scope_reason(
    reason: &str,
    scope: &str,
    caller: &str,
    stage: ScopeStage,
    authorities: &[ScopeAuthority],
) -> Arc<str> {
    let mut out = format!("{reason} (scope `{scope}`");
    match stage {
        ScopeStage::AncestorDeny => {
            out.push_str(&format!(", whose deny rules bind its subagent `{caller}`"))
        }
        ScopeStage::Inherited => out.push_str(&format!(", inherited by `{caller}`")),
        ScopeStage::AncestorMode => out.push_str(&format!(
            ", whose operating mode binds its subagent `{caller}`"
        )),
        ScopeStage::Stricter => {
            out.push_str(&format!(", stricter than the own policy of `{caller}`"))
        }
        ScopeStage::Own => {}
    }
    for a in authorities {
        out.push_str(&format!(
            "; `{}` expands its parent under the authority `{}`",
            a.scope, a.authority
        ));
    }
    out.push(')');
    out.into()
}

impl PolicySnapshot {
    /// The verdict of this policy's deny rules alone (and the refusals the engine makes in
    /// their name), or `None` when they do not deny the call. What an ancestor scope applies
    /// to its subagents' calls.
    pub(crate) fn deny_rules_verdict(&self, call: &Call) -> Option<Verdict> {
        let prepared = self.prepared_subjects(call);
        if prepared.is_empty() {
            // The call cannot be split (or splits into nothing): denied whatever the rules.
            let v = self.decide(call);
            return (v.decision == Decision::Deny).then_some(v);
        }
        let subjects: Vec<SubjectVerdict> = prepared
            .iter()
            .filter_map(|p| self.deny_rule_subject(p))
            .collect();
        let first = subjects.first()?.clone();
        let several = prepared.len() > 1;
        // The policy's own verdict, narrowed to what its deny rules say (only computed when
        // they deny, so the common path pays nothing for it).
        let mut v = self.decide(call);
        v.decision = Decision::Deny;
        v.rule = first.rule;
        v.source = first.source;
        v.reason = if several {
            format!(
                "{} on \"{}\"; nothing in this command ran",
                first.reason, first.text
            )
            .into()
        } else {
            first.reason
        };
        v.subject = several.then_some(first.text);
        v.subjects = subjects;
        Some(v)
    }

    /// A subject's denial by the deny rules, if they deny it.
    fn deny_rule_subject(&self, p: &Prepared) -> Option<SubjectVerdict> {
        let tool = &p.subject.tool;
        let (rule, source, reason) = if let Some(rule) = self.first_match(ListKind::Deny, p) {
            (
                Some(rule.cited.clone()),
                Some(rule.source_name.clone()),
                rule.reason.clone(),
            )
        } else if self.denies_missing_field(p) {
            let field = self
                .profiles
                .get(tool)
                .map_or("the matched field", |pr| pr.field.as_str());
            let reason = format!(
                "`{field}` is missing or not a string, and {tool} has deny rules with a specifier: denied"
            );
            (None, None, reason.into())
        } else if let Some(why) = p
            .unknown
            .as_deref()
            .filter(|_| self.tool_has_deny_rules(tool, false))
        {
            let reason = format!(
                "the program cannot be known statically ({why}), and {tool} has deny rules: denied"
            );
            (None, None, reason.into())
        } else {
            return None;
        };
        Some(SubjectVerdict {
            text: p.subject.text.clone(),
            tool: tool.clone(),
            decision: Decision::Deny,
            rule,
            source,
            reason,
            neutral: false,
        })
    }

    /// The strictest cap this policy's operating modes put on the call (a subject verdict
    /// with the mode's decision and reason), or `None` when they leave it to the rules.
    pub(crate) fn modes_ceiling(&self, call: &Call) -> Option<SubjectVerdict> {
        if self.modes.is_empty() {
            return None;
        }
        let mut strictest: Option<SubjectVerdict> = None;
        for p in self.prepared_subjects(call) {
            let open = SubjectVerdict {
                text: p.subject.text.clone(),
                tool: p.subject.tool.clone(),
                decision: Decision::Allow,
                rule: None,
                source: None,
                reason: Arc::from(""),
                neutral: false,
            };
            let capped = self.cap_by_modes(&p, call, open);
            if capped.decision > strictest.as_ref().map_or(Decision::Allow, |s| s.decision) {
                strictest = Some(capped);
            }
        }
        strictest
    }

    /// A subject whose matched field is missing while its tool has deny rules with a
    /// specifier: the engine denies it without a rule.
    pub(crate) fn denies_missing_field(&self, p: &Prepared) -> bool {
        matches!(p.restrict, Value::Missing) && self.tool_has_deny_rules(&p.subject.tool, true)
    }

    /// A subject the engine decides without a rule before the allow rules (a missing field
    /// under deny rules, a program that cannot be known statically).
    pub(crate) fn refuses_without_rule(&self, p: &Prepared) -> bool {
        self.denies_missing_field(p) || p.unknown.is_some()
    }
}

/// Scopes declared in policy files: the files without `[scope]` merge into the root (named by
/// the merged policy's id); each file with `[scope]` is one child scope.
#[derive(Debug, Clone)]
pub struct ScopeSet {
    root: Arc<Scope>,
    scopes: BTreeMap<String, Arc<Scope>>,
}

impl ScopeSet {
    /// Compiles and composes the scopes of `files`. A `[scope]` file that declares nothing
    /// else (no rules, default, preset or other table) inherits its parent's policy; any other
    /// is compiled on its own, like a single `--policy` file.
    pub fn from_files(files: &[LoadedPolicy], env: PathEnv) -> Result<Self, PolicyError> {
        let (scoped, plain): (Vec<&LoadedPolicy>, Vec<&LoadedPolicy>) =
            files.iter().partition(|f| f.file.scope.is_some());
        let plain: Vec<LoadedPolicy> = plain.into_iter().cloned().collect();
        let Some(first) = plain.first() else {
            let at = scoped
                .first()
                .map_or_else(|| Location::file("<scopes>"), |f| scope_at(f));
            return Err(PolicyError::Syntax {
                at,
                message: "no root policy: at least one policy file has no `[scope]` table".into(),
            });
        };
        let root_policy = PolicySnapshot::from_files(&plain, env.clone())?;
        let root = Scope::root(root_policy.id().to_owned(), Arc::new(root_policy))
            .map_err(|e| scope_error(first, e))?;
        let mut declared: BTreeMap<&str, (&LoadedPolicy, &ScopeDecl)> = BTreeMap::new();
        for f in &scoped {
            let Some(decl) = f.file.scope.as_ref() else {
                continue;
            };
            let message = if decl.name == root.name() {
                format!("scope `{}` names the root policy (its id)", decl.name)
            } else if declared.insert(decl.name.as_str(), (f, decl)).is_some() {
                format!("scope `{}` is declared twice", decl.name)
            } else {
                continue;
            };
            return Err(PolicyError::Syntax {
                at: scope_at(f),
                message,
            });
        }
        let mut built = BTreeMap::new();
        for name in declared.keys() {
            build(name, &declared, &root, &env, &mut built, &mut Vec::new())?;
        }
        Ok(Self {
            root,
            scopes: built,
        })
    }

    /// The root scope.
    pub fn root(&self) -> &Arc<Scope> {
        &self.root
    }

    /// A scope by name (the root's included).
    pub fn get(&self, name: &str) -> Option<&Arc<Scope>> {
        if name == self.root.name() {
            return Some(&self.root);
        }
        self.scopes.get(name)
    }

    /// Every child scope, by name.
    pub fn children(&self) -> impl Iterator<Item = &Arc<Scope>> {
        self.scopes.values()
    }
}

/// Builds scope `name` after its parent, refusing unknown parents and cycles.
fn build(
    name: &str,
    declared: &BTreeMap<&str, (&LoadedPolicy, &ScopeDecl)>,
    root: &Arc<Scope>,
    env: &PathEnv,
    built: &mut BTreeMap<String, Arc<Scope>>,
    visiting: &mut Vec<String>,
) -> Result<Arc<Scope>, PolicyError> {
    if let Some(s) = built.get(name) {
        return Ok(s.clone());
    }
    let Some(&(file, decl)) = declared.get(name) else {
        return Ok(root.clone());
    };
    if visiting.iter().any(|v| v == name) {
        return Err(PolicyError::Syntax {
            at: scope_at(file),
            message: format!(
                "scope `{name}` is its own ancestor ({})",
                visiting.join(" → ")
            ),
        });
    }
    visiting.push(name.to_owned());
    let parent = match decl.parent.as_deref() {
        None => root.clone(),
        Some(p) if p == root.name() => root.clone(),
        Some(p) if declared.contains_key(p) => build(p, declared, root, env, built, visiting)?,
        Some(p) => {
            return Err(PolicyError::Syntax {
                at: scope_at(file),
                message: format!(
                    "scope `{name}` names the parent `{p}`, which is neither the root `{}` nor a declared scope",
                    root.name()
                ),
            });
        }
    };
    visiting.pop();
    let mut unscoped = file.clone();
    unscoped.file.scope = None;
    let inherits = unscoped.file == PolicyFile::default();
    let policy = if inherits {
        if decl.expands_parent.is_some() {
            return Err(PolicyError::Syntax {
                at: scope_at(file),
                message: format!(
                    "scope `{name}` expands its parent but declares no policy of its own"
                ),
            });
        }
        ChildPolicy::Inherit
    } else {
        let snapshot = Arc::new(PolicySnapshot::from_files(&[unscoped], env.clone())?);
        match &decl.expands_parent {
            None => ChildPolicy::Own(snapshot),
            Some(e) => ChildPolicy::Expand {
                policy: snapshot,
                authority: e.authority.clone(),
            },
        }
    };
    let scope = parent
        .child(name, policy)
        .map_err(|e| scope_error(file, e))?;
    built.insert(name.to_owned(), scope.clone());
    Ok(scope)
}

fn scope_at(policy: &LoadedPolicy) -> Location {
    Location {
        file: policy.label.clone(),
        line: policy.line_of("scope"),
        pointer: Some("/scope".into()),
    }
}

fn scope_error(policy: &LoadedPolicy, e: ScopeError) -> PolicyError {
    PolicyError::Syntax {
        at: scope_at(policy),
        message: e.to_string(),
    }
}

/// Refuses a `[scope]` file where policies are merged as plain sources: merging a subagent's
/// allow rules into its parent's policy would widen the parent.
pub(crate) fn refuse_scoped_file(policy: &LoadedPolicy) -> Result<(), PolicyError> {
    match &policy.file.scope {
        None => Ok(()),
        Some(decl) => Err(PolicyError::Syntax {
            at: scope_at(policy),
            message: format!(
                "`[scope]` makes this the policy of the subagent scope `{}`: it is composed with its parent's by scope (warden_policy::ScopeSet, `warden check --scope`), never merged as a plain policy file",
                decl.name
            ),
        }),
    }
}
