//! Declarations: the policy as written, before it is compiled. Sources, rule sets, decisions
//! and tool profiles.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::matcher::MatcherKind;
use crate::rule::Rule;

/// What a policy answers for one call (or one subject of it).
///
/// Ordered by strictness: `Allow < Ask < Deny`, so the fold of several subjects is their `max`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// The call may run.
    Allow,
    /// A person (or reviewer) must approve first.
    Ask,
    /// The call must not run.
    Deny,
}

impl Decision {
    /// `allow`, `ask` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One of the three rule lists, in precedence order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ListKind {
    /// Checked first.
    Deny,
    /// Checked second.
    Ask,
    /// Checked third, then the default applies.
    Allow,
}

impl ListKind {
    /// The lists in precedence order.
    pub const ORDER: [ListKind; 3] = [Self::Deny, Self::Ask, Self::Allow];

    /// `deny`, `ask` or `allow`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deny => "deny",
            Self::Ask => "ask",
            Self::Allow => "allow",
        }
    }

    /// The decision a rule of this list gives.
    pub fn decision(self) -> Decision {
        match self {
            Self::Deny => Decision::Deny,
            Self::Ask => Decision::Ask,
            Self::Allow => Decision::Allow,
        }
    }
}

/// Who a policy file speaks for, assigned by whoever loads it (the command line, the
/// composer), never by the file: a file an agent can edit must not be able to promote itself.
///
/// Ordered by authority: `Untrusted < User < Project < Managed`. A source's standing is its
/// role first and its rank within the role second, so no rank lifts a source above another
/// role. `Untrusted` sources are never trusted: their allow rules are withheld and their
/// carve-outs reach only their own rules.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A file nobody vouches for (a repository's policy the agent may have written): it can
    /// only add deny and ask rules.
    Untrusted,
    /// The user's own policy.
    User,
    /// The project's policy (what `--policy` loads).
    #[default]
    Project,
    /// The organisation's managed policy: outranks every other role, and no lower role's
    /// carve-out, grant or preset reaches its rules.
    Managed,
}

impl Role {
    /// `untrusted`, `user`, `project` or `managed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Untrusted => "untrusted",
            Self::User => "user",
            Self::Project => "project",
            Self::Managed => "managed",
        }
    }

    /// Whether sources of this role may be trusted (every role but `Untrusted`).
    pub fn may_be_trusted(self) -> bool {
        self != Self::Untrusted
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The largest rank a source may declare (and the negation of the smallest, above the preset
/// rank): every rank is an integer a canonical JSON number holds exactly.
pub const MAX_RANK: i64 = (1 << 53) - 2;

/// Where a set of rules comes from: a settings file, a managed policy, a skill, the session.
///
/// Its standing is `(role, rank)`: the role first, then the rank within the role. Merged rules
/// are evaluated highest standing first; a trusted carve-out reaches rules of its own source
/// and of sources standing strictly below it (at an equal standing, only sources declared
/// together with it: the same file, or the library's own sources). An untrusted source's
/// allow rules are withheld, its carve-outs reach only its own rules, and its notes are never
/// shown to the model.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// Unique, non-empty name; verdicts cite it.
    pub name: String,
    /// Who it speaks for (default `project`).
    #[serde(default)]
    pub role: Role,
    /// Authority within its role; higher first (at most [`MAX_RANK`] either way).
    #[serde(default)]
    pub rank: i64,
    /// Whether its allow rules count. Defaults to false: a source is untrusted until it says so.
    #[serde(default)]
    pub trusted: bool,
    /// Where it was read from (metadata; not covered by the digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A hash of its content (metadata; not covered by the digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
}

impl Source {
    /// A trusted source of rank 0.
    pub fn trusted(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            role: Role::Project,
            rank: 0,
            trusted: true,
            path: None,
            hash: None,
        }
    }

    /// An untrusted source of rank 0.
    pub fn untrusted(name: impl Into<String>) -> Self {
        Self {
            trusted: false,
            ..Self::trusted(name)
        }
    }

    /// The same source with another rank.
    pub fn with_rank(mut self, rank: i64) -> Self {
        self.rank = rank;
        self
    }

    /// The same source speaking for another role (an `Untrusted` one is never trusted).
    pub fn with_role(mut self, role: Role) -> Self {
        self.role = role;
        self.trusted &= role.may_be_trusted();
        self
    }

    /// Its standing: role first, then rank.
    pub fn standing(&self) -> (Role, i64) {
        (self.role, self.rank)
    }
}

/// The rules one source contributes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuleSet {
    /// Allow rules, in order.
    pub allow: Vec<Rule>,
    /// Ask rules, in order.
    pub ask: Vec<Rule>,
    /// Deny rules, in order.
    pub deny: Vec<Rule>,
    /// Notes keyed by a rule as written; a trusted source's note follows its rule in reasons.
    pub notes: BTreeMap<String, String>,
}

impl RuleSet {
    /// The list of `kind`.
    pub fn list(&self, kind: ListKind) -> &[Rule] {
        match kind {
            ListKind::Deny => &self.deny,
            ListKind::Ask => &self.ask,
            ListKind::Allow => &self.allow,
        }
    }
}

/// How a tool's specifiers are matched: the matcher and the argument it reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolProfile {
    /// The matcher.
    #[serde(rename = "match")]
    pub matcher: MatcherKind,
    /// The argument the matcher reads.
    pub field: String,
}

impl ToolProfile {
    /// A profile.
    pub fn new(matcher: MatcherKind, field: impl Into<String>) -> Self {
        Self {
            matcher,
            field: field.into(),
        }
    }
}

/// The built-in profiles used when a policy gives no `[tools.X]` table: `bash` → shell on
/// `command`; `read`, `write`, `edit`, `list` → path on `path`; `web_fetch` → domain on `url`.
pub fn builtin_profiles() -> BTreeMap<String, ToolProfile> {
    let mut m = BTreeMap::new();
    m.insert(
        "bash".into(),
        ToolProfile::new(MatcherKind::Shell, "command"),
    );
    for tool in ["read", "write", "edit", "list"] {
        m.insert(tool.into(), ToolProfile::new(MatcherKind::Path, "path"));
    }
    m.insert(
        "web_fetch".into(),
        ToolProfile::new(MatcherKind::Domain, "url"),
    );
    m
}

/// The built-in aliases: `edit` names every file-modifying tool (`edit`, `write`).
pub fn builtin_aliases() -> BTreeMap<String, Vec<String>> {
    let mut m = BTreeMap::new();
    m.insert("edit".into(), vec!["edit".into(), "write".into()]);
    m
}
