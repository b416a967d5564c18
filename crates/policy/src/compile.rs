//! The compiler: declarations (files or library rule sets) → an immutable [`PolicySnapshot`].
//!
//! Compilation validates everything a decision could trip on later (grammar, matchers, globs,
//! aliases, sources, the default), expands aliases, withholds untrusted allow rules, orders
//! rules (merged sources highest rank first, then the files' own lists) and indexes them by
//! tool and by each pattern's literal prefix, so a decision never scans every rule.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

// The index maps are probed several times per decision with short keys: FxHash is several
// times faster than SipHash there, and the keys come from the policy author, not the caller.
use rustc_hash::{FxHashMap, FxHashSet};

use serde::Serialize;
use serde_json::{Value, json};
use warden_contracts::{Digest, PolicySnapshotRef};

use crate::containment::Containment;
use crate::decl::{
    Decision, ListKind, MAX_RANK, Role, RuleSet, Source, ToolProfile, builtin_aliases,
    builtin_profiles,
};
use crate::error::{Location, PolicyError, RuleErrorKind};
use crate::file::{FileText, LoadedPolicy, RuleList};
use crate::guard::GuardSet;
use crate::hints::HintRules;
pub(crate) use crate::image::RuleTable;
use crate::matcher::{PathEnv, Pattern};
use crate::mode::Mode;
use crate::preset::Preset;
use crate::receipt::Approvers;
use crate::rule::Rule;
use crate::wildcard::Wildcard;

/// The format tag of a snapshot's canonical form; part of the digest.
pub const SNAPSHOT_FORMAT: &str = "warden.policy-snapshot/1";

/// A rule as declared, with where it was declared.
#[derive(Debug, Clone)]
pub(crate) struct RuleDecl {
    pub(crate) text: String,
    pub(crate) at: DeclAt,
}

impl RuleDecl {
    /// A declaration at `at`.
    pub(crate) fn new(text: String, at: Location) -> Self {
        Self {
            text,
            at: DeclAt::Given(at),
        }
    }
}

/// Where a rule was declared.
#[derive(Debug, Clone)]
pub(crate) enum DeclAt {
    /// Where the library (or a grant) says.
    Given(Location),
    /// In a list of its set's file: element `index` of an array, or the list's one string
    /// (`None`). The file, line and pointer are made only when an error names the rule
    /// ([`SetDecl::locate`]): making them for every rule as it is read costs an allocation or
    /// two per rule, and looking the line up scans the text once per rule.
    InFile {
        /// Its index in the array.
        index: Option<usize>,
    },
}

/// One source's declared rules.
#[derive(Debug, Clone)]
pub(crate) struct SetDecl {
    pub(crate) source: Source,
    /// The file's own lists (ordered after every merged source).
    pub(crate) own: bool,
    /// Which declaration it came with: 0 for the library's own sources, `n` for the `n`th
    /// file. At an equal standing, a carve-out reaches only sources of its own group.
    pub(crate) group: usize,
    pub(crate) lists: [Vec<RuleDecl>; 3],
    pub(crate) notes: BTreeMap<String, (String, Location)>,
    pub(crate) at: Location,
    /// The text of the file it was read from (none for the library's own sets): the lines
    /// of its rules and notes are looked up there when an error names one.
    pub(crate) text: Option<FileText>,
    /// The JSON pointer of its table in that file (`""` for the file's own lists,
    /// `/sources/N` for a `[[sources]]` entry).
    pub(crate) pointer: String,
}

impl SetDecl {
    /// Where `decl`, one of this set's declarations in list `kind`, was written.
    fn locate(&self, decl: &RuleDecl, kind: ListKind) -> Location {
        match &decl.at {
            DeclAt::Given(at) => at.clone(),
            DeclAt::InFile { index } => {
                let at = Location {
                    file: self.at.file.clone(),
                    line: None,
                    pointer: Some(match index {
                        Some(i) => format!("{}/{}/{i}", self.pointer, kind.as_str()),
                        None => format!("{}/{}", self.pointer, kind.as_str()),
                    }),
                };
                FileText::locate(self.text.as_ref(), &at, &decl.text)
            }
        }
    }

    /// Where the note for `key` was written, its line looked up now.
    fn locate_note(&self, at: &Location, key: &str) -> Location {
        FileText::locate(self.text.as_ref(), at, key)
    }
}

pub(crate) fn list_slot(kind: ListKind) -> usize {
    match kind {
        ListKind::Deny => 0,
        ListKind::Ask => 1,
        ListKind::Allow => 2,
    }
}

/// Builds a [`PolicySnapshot`] from policy files and/or rule sets.
///
/// ```
/// use warden_policy::{Decision, PolicyBuilder, Rule, RuleSet, Source, Call};
/// let snapshot = PolicyBuilder::new()
///     .default(Decision::Ask)
///     .own(Source::trusted("project"), RuleSet {
///         allow: Rule::parse_list("read bash(git status:*)").unwrap(),
///         deny: Rule::parse_list("bash(rm:*)").unwrap(),
///         ..RuleSet::default()
///     })
///     .build()
///     .unwrap();
/// let v = snapshot.decide(&Call::new("bash", serde_json::json!({"command": "rm -rf /"})));
/// assert_eq!(v.decision, Decision::Deny);
/// assert_eq!(v.rule.as_deref(), Some("bash(rm:*)"));
/// ```
#[derive(Debug, Clone)]
pub struct PolicyBuilder {
    id: Option<String>,
    version: Option<String>,
    default: Option<Decision>,
    pub(crate) sets: Vec<SetDecl>,
    pub(crate) profiles: BTreeMap<String, ToolProfile>,
    profile_origin: BTreeMap<String, Location>,
    pub(crate) aliases: BTreeMap<String, Vec<String>>,
    pub(crate) env: PathEnv,
    first_label: Option<String>,
    /// Files added so far (each file's sets get the next group).
    files: usize,
    /// Where the strictest default was set (a file's label, or `<library>`), and whether a
    /// preset implied it.
    default_from: Option<DefaultOrigin>,
    /// The highest role of the files that named the preset (its deny rules speak for it).
    pub(crate) preset_role: Role,
    /// Files the governed agent may not write: the policy files, and what the runtime adds.
    protected: Vec<Protected>,
    /// The `[mcp]` tables, merged strictest-wins.
    mcp: crate::mcp::McpConfig,
    containment: Option<Containment>,
    /// Path rules compare paths without regard to case (`[paths] case_insensitive`).
    pub(crate) case_insensitive_paths: bool,
    /// Prompt directives (text only; see `crate::directives`).
    pub(crate) directives: crate::directives::Directives,
    guards: Option<GuardSet>,
    approvers: Approvers,
    pub(crate) preset: Option<(Preset, Location)>,
    hints: Option<HintRules>,
    modes: Vec<Mode>,
    /// Programmable permissions declared (`crate::permission`): listed and digested.
    pub(crate) permissions: Vec<crate::permission::PermissionInfo>,
}

impl Default for PolicyBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl PolicyBuilder {
    /// A builder with the built-in tool profiles and aliases, and paths anchored at `/`.
    pub fn new() -> Self {
        Self {
            id: None,
            version: None,
            default: None,
            sets: Vec::new(),
            profiles: builtin_profiles(),
            profile_origin: BTreeMap::new(),
            aliases: builtin_aliases(),
            env: PathEnv {
                project_root: "/".into(),
                home: None,
            },
            first_label: None,
            files: 0,
            default_from: None,
            preset_role: Role::Untrusted,
            protected: Vec::new(),
            mcp: crate::mcp::McpConfig::default(),
            containment: None,
            case_insensitive_paths: false,
            directives: Default::default(),
            guards: None,
            approvers: Approvers::new(),
            preset: None,
            hints: None,
            modes: Vec::new(),
            permissions: Vec::new(),
        }
    }

    /// Adds an operating mode ([`crate::mode`]); every mode added applies (they only narrow).
    pub fn mode(mut self, mode: Mode) -> Self {
        if !self.modes.contains(&mode) {
            self.modes.push(mode);
            self.modes.sort_unstable();
        }
        self
    }

    /// Adds hint rules ([`crate::hints`]); with several calls (or files) each rule takes the
    /// stricter decision.
    pub fn hints(mut self, h: HintRules) -> Self {
        self.hints = Some(match self.hints.take() {
            None => h,
            Some(prev) => prev.strictest(&h),
        });
        self
    }

    /// Starts from a preset (docs/design/policy.md#presets): every rule and source applies on top
    /// of it, and it supplies the default unless one is set. Two different presets are an error.
    pub fn preset(self, preset: Preset) -> Result<Self, PolicyError> {
        self.preset_at(preset, Location::file("<library>"))
    }

    fn preset_at(mut self, preset: Preset, at: Location) -> Result<Self, PolicyError> {
        match &self.preset {
            Some((other, first)) if *other != preset => Err(PolicyError::Syntax {
                at,
                message: format!(
                    "preset `{preset}` conflicts with preset `{other}` set in {first}: a policy starts from one preset"
                ),
            }),
            Some(_) => Ok(self),
            None => {
                self.preset = Some((preset, at));
                Ok(self)
            }
        }
    }

    /// The policy's id (default: the first source's name).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The policy's version (default `"0"`).
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// Sets the default; with several calls (or files) the strictest wins.
    pub fn default(self, default: Decision) -> Self {
        self.default_by(default, DefaultOrigin::library())
    }

    /// Takes `default` when it is stricter than the one so far, remembering where it came from.
    fn default_by(mut self, default: Decision, from: DefaultOrigin) -> Self {
        if self.default.is_none_or(|d| default > d) {
            self.default = Some(default);
            self.default_from = Some(from);
        }
        self
    }

    /// Makes path rules compare paths without regard to letter case (for a case-insensitive
    /// file system). Once on (by any file), it stays on.
    pub fn case_insensitive_paths(mut self, on: bool) -> Self {
        self.case_insensitive_paths |= on;
        self
    }

    /// Sets the containment requirements; with several calls (or files) each mechanism takes
    /// the strictest requirement and the environment the intersection of the allowlists.
    pub fn containment(mut self, c: Containment) -> Self {
        self.containment = Some(match self.containment.take() {
            None => c,
            Some(prev) => prev.strictest(&c),
        });
        self
    }

    /// Sets the guards over content; with several calls (or files) the strictest applies
    /// (the smallest size limit, every deny pattern, the strictest secret action).
    pub fn guards(mut self, g: GuardSet) -> Self {
        self.guards = Some(match self.guards.take() {
            None => g,
            Some(prev) => prev.strictest(&g),
        });
        self
    }

    /// Adds approver classes; a class declared again must have the same keys. Only with the
    /// `receipts` feature: a build without it cannot verify a signed receipt, so it has no way
    /// to declare an approver.
    #[cfg(feature = "receipts")]
    pub fn approvers(mut self, a: &Approvers) -> Result<Self, PolicyError> {
        self.approvers.merge(a).map_err(|e| PolicyError::Syntax {
            at: Location::file("<library>"),
            message: e.to_string(),
        })?;
        Ok(self)
    }

    /// Protects `path` from the governed agent: a `write` or `edit` call, or a shell write,
    /// that resolves to it is denied whatever the rules say, and so is a shell command that
    /// names it unless the command only reads. `what` says what it is in the reason (`the
    /// evidence store`). Every policy file added with [`Self::file`] is protected already.
    /// The path is made absolute against the current directory and resolved through
    /// symlinks when it exists; protection is a property of how the policy was loaded, not of
    /// its semantics, so the digest does not cover it.
    ///
    /// ```
    /// use warden_policy::{Call, Decision, PolicyBuilder};
    /// let policy = PolicyBuilder::new()
    ///     .default(Decision::Allow)
    ///     .protect("/var/lib/warden/evidence.db", "the evidence store")
    ///     .build()?;
    /// let write = Call::new("write", serde_json::json!({"path": "/var/lib/warden/evidence.db"}));
    /// assert_eq!(policy.decide(&write).decision, Decision::Deny);
    /// # Ok::<(), warden_policy::PolicyError>(())
    /// ```
    pub fn protect(mut self, path: impl AsRef<std::path::Path>, what: impl Into<String>) -> Self {
        let what = what.into();
        for form in crate::edge::protected_forms(path.as_ref()) {
            if !self.protected.iter().any(|p| p.path == form) {
                self.protected.push(Protected {
                    path: form,
                    what: what.clone(),
                });
            }
        }
        self
    }

    /// Where relative path patterns are anchored and what `~/` means.
    pub fn path_env(mut self, env: PathEnv) -> Self {
        self.env = env;
        self
    }

    /// Replaces every tool profile (the built-ins included). An empty map means no tool has a
    /// matcher, so only bare rules build.
    pub fn tool_profiles(mut self, profiles: BTreeMap<String, ToolProfile>) -> Self {
        self.profiles = profiles;
        self
    }

    /// Sets one tool's profile.
    pub fn tool_profile(mut self, tool: impl Into<String>, profile: ToolProfile) -> Self {
        self.profiles.insert(tool.into(), profile);
        self
    }

    /// Replaces the alias table (the built-in `edit` → `edit`, `write` included).
    pub fn aliases(mut self, aliases: BTreeMap<String, Vec<String>>) -> Self {
        self.aliases = aliases;
        self
    }

    /// Adds a merged source (evaluated before every file's own lists, highest rank first).
    pub fn source(mut self, source: Source, rules: RuleSet) -> Self {
        let at = Location::file("<library>");
        self.sets.push(set_from_rules(source, rules, false, at));
        self
    }

    /// Adds a policy's own lists (evaluated after every merged source of the same role).
    pub fn own(mut self, source: Source, rules: RuleSet) -> Self {
        let at = Location::file("<library>");
        self.sets.push(set_from_rules(source, rules, true, at));
        self
    }

    /// Adds a loaded policy file: its `[[sources]]`, its own lists (trusted, named by
    /// `[source]` or the file stem), its default, `[tools]`, `id` and `version`.
    pub fn file(mut self, policy: &LoadedPolicy) -> Result<Self, PolicyError> {
        let f = &policy.file;
        crate::scope::refuse_scoped_file(policy)?;
        if let Some(key) = f.reserved_keys_present().first() {
            return Err(PolicyError::Unsupported {
                at: Location {
                    file: policy.label.clone(),
                    line: policy.line_of(key),
                    pointer: Some(format!("/{key}")),
                },
                key: (*key).to_owned(),
            });
        }
        let role = policy.role;
        if !role.may_be_trusted() {
            refuse_widening_tables(policy)?;
        }
        if let Some(path) = &policy.path {
            self = self.protect(path, "a policy file Warden loaded");
        }
        self.files += 1;
        let group = self.files;
        if self.first_label.is_none() {
            self.first_label = Some(policy.label.clone());
            if self.id.is_none() {
                self.id = f.id.clone();
            }
            if self.version.is_none() {
                self.version = f.version.clone();
            }
        }
        // A file's default, or the default its preset implies when it sets none, takes part
        // in "the strictest default applies".
        match (f.default, f.preset) {
            (Some(d), _) => {
                self = self.default_by(d, DefaultOrigin::file(&policy.label, None));
            }
            (None, Some(p)) => {
                self = self.default_by(
                    p.default_decision(),
                    DefaultOrigin::file(&policy.label, Some(p)),
                );
            }
            (None, None) => {}
        }
        if let Some(m) = &f.modes {
            for mode in &m.active {
                self = self.mode(*mode);
            }
        }
        if let Some(h) = &f.hints {
            self = self.hints(h.clone());
        }
        if let Some(p) = f.preset {
            let at = Location {
                file: policy.label.clone(),
                line: policy.line_of("preset"),
                pointer: Some("/preset".into()),
            };
            self = self.preset_at(p, at)?;
            self.preset_role = self.preset_role.max(role);
        }
        if let Some(c) = &f.containment {
            self = self.containment(c.clone());
        }
        if f.paths.is_some_and(|p| p.case_insensitive) {
            self = self.case_insensitive_paths(true);
        }
        if let Some(d) = &f.directives {
            self = self.directives(d);
        }
        if let Some(g) = &f.guards {
            self = self.guards(crate::guard::compile_file_guards(policy, g)?);
        }
        if let Some(m) = &f.mcp {
            let dir = policy
                .path
                .as_deref()
                .and_then(|p| std::path::absolute(p).ok())
                .and_then(|p| p.parent().map(std::path::Path::to_path_buf));
            self.mcp
                .merge(m, &policy.label, dir, role)
                .map_err(|message| PolicyError::Source {
                    at: Location {
                        file: policy.label.clone(),
                        line: policy.line_of("mcp"),
                        pointer: Some("/mcp".into()),
                    },
                    message,
                })?;
        }
        crate::receipt::add_file_approvers(&mut self.approvers, policy)?;
        for (tool, profile) in &f.tools {
            let at = Location {
                file: policy.label.clone(),
                line: policy.line_of(&format!("tools.{tool}")),
                pointer: Some(format!("/tools/{tool}")),
            };
            if profile.field.trim().is_empty() {
                return Err(PolicyError::Tool {
                    at,
                    tool: tool.clone(),
                    message: "`field` must name an argument".into(),
                });
            }
            if let Some(previous) = self.profile_origin.get(tool)
                && self.profiles.get(tool) != Some(profile)
            {
                return Err(PolicyError::Tool {
                    at,
                    tool: tool.clone(),
                    message: format!("conflicts with the profile set in {previous}"),
                });
            }
            self.profiles.insert(tool.clone(), profile.clone());
            self.profile_origin.insert(tool.clone(), at);
        }
        let text = policy.shared_text();
        for (i, s) in f.sources.iter().enumerate() {
            let pointer = format!("/sources/{i}");
            let source = Source {
                name: s.name.clone(),
                role,
                rank: file_rank(policy, s.rank, &format!("{pointer}/rank"))?,
                trusted: s.trusted && role.may_be_trusted(),
                path: s.path.clone(),
                hash: s.hash.clone(),
            };
            let mut set = set_from_decl(
                policy,
                &text,
                source,
                false,
                &pointer,
                [&s.deny, &s.ask, &s.allow],
                &s.notes,
            );
            set.group = group;
            self.sets.push(set);
        }
        let own = Source {
            name: f
                .source
                .as_ref()
                .and_then(|s| s.name.clone())
                .unwrap_or_else(|| policy.stem.clone()),
            role,
            rank: match f.source.as_ref().and_then(|s| s.rank) {
                Some(rank) => file_rank(policy, rank, "/source/rank")?,
                None => 0,
            },
            trusted: role.may_be_trusted(),
            path: policy.path.as_ref().map(|p| p.display().to_string()),
            hash: Some(policy.hash.clone()),
        };
        let mut set = set_from_decl(
            policy,
            &text,
            own,
            true,
            "",
            [&f.deny, &f.ask, &f.allow],
            &f.notes,
        );
        set.group = group;
        self.sets.push(set);
        Ok(self)
    }

    /// Compiles the declarations into a snapshot.
    pub fn build(self) -> Result<PolicySnapshot, PolicyError> {
        let mut snapshot = compile(&self)?;
        snapshot.declared = Arc::new(self);
        Ok(snapshot)
    }
}

/// A file the governed agent may not write (see [`PolicyBuilder::protect`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Protected {
    /// Its absolute path (one entry per form: as given, and with symlinks resolved).
    pub path: String,
    /// What it is, for the reason (`a policy file Warden loaded`).
    pub what: String,
}

/// Where the policy's default came from, as `warden policy compile` reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DefaultOrigin {
    /// The file that set it (its label), or `<library>`.
    pub file: String,
    /// The preset that implied it, when the file set no `default` of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset: Option<Preset>,
}

impl DefaultOrigin {
    fn library() -> Self {
        Self {
            file: "<library>".into(),
            preset: None,
        }
    }

    fn file(label: &str, preset: Option<Preset>) -> Self {
        Self {
            file: label.to_owned(),
            preset,
        }
    }
}

impl std::fmt::Display for DefaultOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.preset {
            Some(p) => write!(f, "{} (implied by preset `{p}`)", self.file),
            None => f.write_str(&self.file),
        }
    }
}

/// A rank a policy file declares for one of its sources: at most 0, since a file may only
/// lower its standing within the role it was loaded with, and no lower than `-MAX_RANK`.
fn file_rank(policy: &LoadedPolicy, rank: i64, pointer: &str) -> Result<i64, PolicyError> {
    let at = Location {
        file: policy.label.clone(),
        line: policy.line_of("rank"),
        pointer: Some(pointer.to_owned()),
    };
    if rank > 0 {
        return Err(PolicyError::Source {
            at,
            message: format!(
                "rank {rank} would raise this file above its role ({}): a policy file may only lower its standing (rank <= 0); its role comes from how it is loaded (--managed, --policy, --user, --untrusted)",
                policy.role
            ),
        });
    }
    if rank < -MAX_RANK {
        return Err(PolicyError::Source {
            at,
            message: format!("rank {rank} is below the lowest rank, -{MAX_RANK}"),
        });
    }
    Ok(rank)
}

/// An untrusted file can only add deny and ask rules (and narrow: modes, guards,
/// containment): every table that could widen what is allowed, or speak to the model, is
/// refused with its name rather than ignored.
fn refuse_widening_tables(policy: &LoadedPolicy) -> Result<(), PolicyError> {
    let f = &policy.file;
    let present: [(&str, bool); 8] = [
        ("default", f.default == Some(Decision::Allow)),
        ("preset", f.preset.is_some()),
        ("tools", !f.tools.is_empty()),
        ("approvers", !f.approvers.is_empty()),
        ("hints", f.hints.is_some()),
        ("paths", f.paths.is_some()),
        ("directives", f.directives.is_some()),
        ("mcp", f.mcp.is_some()),
    ];
    match present.iter().find(|(_, here)| *here) {
        Some((key, _)) => Err(PolicyError::Source {
            at: Location {
                file: policy.label.clone(),
                line: policy.line_of(key),
                pointer: Some(format!("/{key}")),
            },
            message: format!(
                "an untrusted policy file may only add deny and ask rules (and narrow modes, guards and containment); `{key}` could widen what is allowed, so it is refused"
            ),
        }),
        None => Ok(()),
    }
}

fn set_from_rules(source: Source, rules: RuleSet, own: bool, at: Location) -> SetDecl {
    let mut lists: [Vec<RuleDecl>; 3] = Default::default();
    for kind in ListKind::ORDER {
        lists[list_slot(kind)] = rules
            .list(kind)
            .iter()
            .enumerate()
            .map(|(i, r)| {
                RuleDecl::new(
                    r.to_string(),
                    Location {
                        pointer: Some(format!("/sources/{}/{}/{i}", source.name, kind.as_str())),
                        ..at.clone()
                    },
                )
            })
            .collect();
    }
    let notes = rules
        .notes
        .into_iter()
        .map(|(k, v)| (k, (v, at.clone())))
        .collect();
    SetDecl {
        source,
        own,
        group: 0,
        lists,
        notes,
        at,
        text: None,
        pointer: String::new(),
    }
}

fn set_from_decl(
    policy: &LoadedPolicy,
    text: &FileText,
    source: Source,
    own: bool,
    pointer: &str,
    lists_in: [&RuleList; 3],
    notes_in: &BTreeMap<String, String>,
) -> SetDecl {
    let mut lists: [Vec<RuleDecl>; 3] = Default::default();
    for (list, given) in lists.iter_mut().zip(lists_in) {
        // Where each rule is is worked out when an error names it (`SetDecl::locate`).
        *list = match given {
            RuleList::One(text) => vec![RuleDecl {
                text: text.clone(),
                at: DeclAt::InFile { index: None },
            }],
            RuleList::Many(items) => items
                .iter()
                .enumerate()
                .map(|(i, text)| RuleDecl {
                    text: text.clone(),
                    at: DeclAt::InFile { index: Some(i) },
                })
                .collect(),
        };
    }
    let notes = notes_in
        .iter()
        .map(|(k, v)| {
            let at = Location {
                file: policy.label.clone(),
                line: None,
                pointer: Some(format!("{pointer}/notes/{k}")),
            };
            (k.clone(), (v.clone(), at))
        })
        .collect();
    SetDecl {
        source,
        own,
        group: 0,
        lists,
        notes,
        text: Some(text.clone()),
        pointer: pointer.to_owned(),
        at: Location {
            file: policy.label.clone(),
            line: None,
            pointer: Some(if pointer.is_empty() {
                "/".into()
            } else {
                pointer.into()
            }),
        },
    }
}

/// Information about one source, as a snapshot reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SourceInfo {
    /// Its name.
    pub name: String,
    /// Who it speaks for.
    pub role: Role,
    /// Its rank within the role.
    pub rank: i64,
    /// Which declaration it came with (0: the library's own sources; `n`: the `n`th file).
    #[serde(skip)]
    pub(crate) group: usize,
    /// Whether it is trusted.
    pub trusted: bool,
    /// Whether these are a policy file's own lists.
    pub own: bool,
    /// Where it was read from.
    pub path: Option<String>,
    /// Its content hash.
    pub hash: Option<String>,
    /// Its allow rules that were withheld because it is untrusted.
    pub withheld: Vec<String>,
    /// How many rules it contributes, per list (deny, ask, allow), after alias expansion.
    pub rule_counts: [usize; 3],
    /// The rules alias expansion added beyond those written (`write(src/**)` from
    /// `edit(src/**)`), in compile order: the difference between `rule_counts` and the file.
    pub derived: Vec<DerivedRule>,
}

impl SourceInfo {
    /// Its standing: role first, then rank.
    pub fn standing(&self) -> (Role, i64) {
        (self.role, self.rank)
    }

    /// Whether a carve-out of this source can cancel a rule of `target`: always its own
    /// rules; a trusted source's also reaches sources standing strictly below it, and at an
    /// equal standing only sources declared with it (the same file, or the library's own), so
    /// a tie between two files never lets one file's carve-out reach the other's rules.
    pub fn carve_out_reaches(&self, target: &SourceInfo) -> bool {
        if self.name == target.name {
            return true;
        }
        if !self.trusted {
            return false;
        }
        match self.standing().cmp(&target.standing()) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal => self.group == target.group,
            std::cmp::Ordering::Less => false,
        }
    }
}

/// A rule alias expansion derived from a written one: an alias names several tools, and each
/// gets its own rule (the built-in alias `edit` names `edit` and `write`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DerivedRule {
    /// The list it is in.
    pub list: ListKind,
    /// The derived rule, as verdicts cite it.
    pub rule: String,
    /// The rule as written, which it was derived from.
    pub from: String,
}

/// A compiled rule.
#[derive(Debug, Clone)]
pub(crate) struct CompiledRule {
    pub(crate) list: ListKind,
    /// The expanded rule (cited by verdicts).
    pub(crate) rule: Rule,
    /// The rule as written, before alias expansion.
    pub(crate) written: String,
    pub(crate) source: usize,
    pub(crate) pattern: Option<Pattern>,
    pub(crate) carve_out: bool,
    pub(crate) tool_glob: Option<Wildcard>,
    /// The source's note, only when the source is trusted.
    pub(crate) note: Option<String>,
    /// What a verdict cites and says, computed once when the snapshot is built so a decision
    /// allocates nothing for them: the rule as cited, its source's name, and the reason.
    pub(crate) cited: Arc<str>,
    pub(crate) source_name: Arc<str>,
    pub(crate) reason: Arc<str>,
}

impl CompiledRule {
    /// Fills in what verdicts cite, once the rule's note and source are final.
    pub(crate) fn finish(&mut self, source_name: &Arc<str>) {
        let cited = self.rule.to_string();
        self.source_name = Arc::clone(source_name);
        let what = match self.list {
            ListKind::Deny => "denied by ",
            ListKind::Ask => "approval required by ",
            ListKind::Allow => "allowed by ",
        };
        let note = self.note.as_deref();
        let mut reason =
            String::with_capacity(what.len() + cited.len() + note.map_or(0, |n| n.len() + 2));
        reason.push_str(what);
        reason.push_str(&cited);
        if let Some(note) = note {
            reason.push_str(": ");
            reason.push_str(note);
        }
        self.reason = reason.into();
        self.cited = cited.into();
    }
}

/// The rules of one list for one tool.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolIndex {
    pub(crate) bare: Vec<u32>,
    pub(crate) keyed: FxHashMap<String, Vec<u32>>,
    /// Which key lengths `keyed` holds (bit `n` for length `n`, bit 63 for 63 and longer): a
    /// probe of a length no key has is skipped without hashing it.
    pub(crate) key_lens: u64,
    pub(crate) carve_outs: Vec<u32>,
    pub(crate) has_specifier_rules: bool,
}

impl ToolIndex {
    fn len_bit(len: usize) -> u64 {
        1 << len.min(63)
    }

    /// The rules keyed under `probe`, if any.
    pub(crate) fn keyed(&self, probe: &str) -> Option<&[u32]> {
        crate::work::add(1);
        if self.key_lens & Self::len_bit(probe.len()) == 0 {
            return None;
        }
        crate::work::add(probe.len());
        self.keyed.get(probe).map(Vec::as_slice)
    }
}

/// One list's index.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListIndex {
    pub(crate) by_tool: FxHashMap<String, ToolIndex>,
    /// Tool-name glob rules keyed by their literal prefix (the text before the first `*`), so
    /// a decision probes a few prefixes of the tool name instead of trying every glob.
    pub(crate) globs_by_prefix: FxHashMap<String, Vec<u32>>,
    /// The distinct lengths of those prefixes, ascending.
    pub(crate) glob_prefix_lens: Vec<usize>,
}

impl ListIndex {
    /// Calls `f` with every tool-name glob rule of this list whose glob matches `tool`.
    pub(crate) fn for_each_tool_glob(&self, rules: &RuleTable, tool: &str, mut f: impl FnMut(u32)) {
        for &len in &self.glob_prefix_lens {
            let Some(prefix) = tool.get(..len) else {
                if len > tool.len() {
                    break;
                }
                continue;
            };
            crate::work::add(1 + prefix.len());
            if let Some(ids) = self.globs_by_prefix.get(prefix) {
                for &id in ids {
                    crate::work::add(1 + tool.len());
                    if rules[id as usize]
                        .tool_glob
                        .as_ref()
                        .is_some_and(|g| g.matches(tool))
                    {
                        f(id);
                    }
                }
            }
        }
    }

    /// Whether any tool-name glob rule of this list matches `tool`.
    pub(crate) fn any_tool_glob(&self, rules: &RuleTable, tool: &str) -> bool {
        let mut any = false;
        self.for_each_tool_glob(rules, tool, |_| any = true);
        any
    }
}

/// An immutable, compiled policy: `(policy_id, version, digest)`, its sources, its rules indexed
/// for decisions. Decide with [`PolicySnapshot::decide`]; it is pure and deterministic.
#[derive(Debug, Clone)]
pub struct PolicySnapshot {
    pub(crate) id: String,
    pub(crate) version: String,
    pub(crate) digest: Digest,
    pub(crate) canonical: String,
    /// Where the rules' member's value is in `canonical` (what a policy image keeps).
    pub(crate) canonical_rules: std::ops::Range<usize>,
    pub(crate) default: Decision,
    pub(crate) default_from: DefaultOrigin,
    pub(crate) protected: Vec<Protected>,
    pub(crate) mcp: crate::mcp::McpConfig,
    /// Whether paths compare without regard to letter case (`[paths] case_insensitive`).
    pub(crate) fold_paths: bool,
    /// The tools the `edit` alias names (`edit`, `write`): the ones whose path a protected
    /// file may not be.
    pub(crate) writing_tools: Vec<String>,
    pub(crate) sources: Vec<SourceInfo>,
    pub(crate) rules: RuleTable,
    pub(crate) lists: [ListIndex; 3],
    pub(crate) profiles: BTreeMap<String, ToolProfile>,
    pub(crate) env: PathEnv,
    pub(crate) containment: Containment,
    /// Prompt directives: covered by the digest, never consulted by a decision.
    pub(crate) directives: crate::directives::Directives,
    pub(crate) guards: GuardSet,
    pub(crate) approvers: Approvers,
    /// The default's reason for every tool the policy names, made once.
    pub(crate) default_reasons: FxHashMap<String, Arc<str>>,
    pub(crate) preset: Option<Preset>,
    pub(crate) hints: HintRules,
    pub(crate) modes: Vec<Mode>,
    /// The declarations it was built from, so a grant can rebuild it changed.
    pub(crate) declared: Arc<PolicyBuilder>,
    /// Programmable permissions declared (`crate::permission`), in registration order.
    pub(crate) permissions: Vec<crate::permission::PermissionInfo>,
}

impl PolicySnapshot {
    /// Starts a builder.
    pub fn builder() -> PolicyBuilder {
        PolicyBuilder::new()
    }

    /// Reads, merges and compiles policy files (each file's `[source]` names and ranks it).
    pub fn from_files(files: &[LoadedPolicy], env: PathEnv) -> Result<Self, PolicyError> {
        let mut builder = PolicyBuilder::new().path_env(env);
        for f in files {
            builder = builder.file(f)?;
        }
        builder.build()
    }

    /// Compiles one policy written in TOML (named `policy.toml` in errors), with relative path
    /// patterns anchored at `project_root` and no home folder (`~/` patterns are refused).
    ///
    /// ```
    /// use warden_policy::{Call, Decision, PolicySnapshot};
    /// let policy = PolicySnapshot::from_toml("default = \"deny\"\nallow = [\"read(src/**)\"]\n", "/repo")?;
    /// let call = Call::new("read", serde_json::json!({"path": "/repo/src/lib.rs"}));
    /// assert_eq!(policy.decide(&call).decision, Decision::Allow);
    /// # Ok::<(), warden_policy::PolicyError>(())
    /// ```
    pub fn from_toml(
        text: &str,
        project_root: impl Into<std::path::PathBuf>,
    ) -> Result<Self, PolicyError> {
        let file = LoadedPolicy::from_text(
            text.to_owned(),
            crate::file::Format::Toml,
            "policy.toml",
            "policy",
            None,
        )?;
        let env = PathEnv {
            project_root: project_root.into(),
            home: None,
        };
        Self::from_files(&[file], env)
    }

    /// The policy's id.
    pub fn id(&self) -> &str {
        &self.id
    }
    /// The policy's version.
    pub fn version(&self) -> &str {
        &self.version
    }
    /// The digest of the canonical form: covers semantics, not formatting or metadata.
    pub fn digest(&self) -> &Digest {
        &self.digest
    }
    /// The canonical JSON (RFC 8785) the digest is computed over. Evidence stores these bytes.
    pub fn canonical_json(&self) -> &str {
        &self.canonical
    }
    /// A reference for contracts (`policy_id`, `version`, `digest`).
    pub fn reference(&self) -> PolicySnapshotRef {
        PolicySnapshotRef {
            policy_id: self.id.clone(),
            version: self.version.clone(),
            digest: self.digest.clone(),
        }
    }
    /// The default decision.
    pub fn default_decision(&self) -> Decision {
        self.default
    }
    /// The files the governed agent may not write.
    pub fn protected(&self) -> &[Protected] {
        &self.protected
    }
    /// The MCP servers and their admission settings (`[mcp]`).
    pub fn mcp(&self) -> &crate::mcp::McpConfig {
        &self.mcp
    }
    /// Where the default came from: the file whose default (or preset's) was the strictest.
    pub fn default_origin(&self) -> &DefaultOrigin {
        &self.default_from
    }
    /// The operating modes in force.
    pub fn modes(&self) -> &[Mode] {
        &self.modes
    }
    /// The preset the policy starts from, if any.
    pub fn preset(&self) -> Option<Preset> {
        self.preset
    }
    /// The sources, in evaluation order.
    pub fn sources(&self) -> &[SourceInfo] {
        &self.sources
    }
    /// The effective tool profiles.
    pub fn profiles(&self) -> &BTreeMap<String, ToolProfile> {
        &self.profiles
    }
    /// What tool processes must be confined to (full containment unless the policy relaxed it).
    pub fn containment(&self) -> &Containment {
        &self.containment
    }
    /// Where relative paths are anchored.
    pub fn path_env(&self) -> &PathEnv {
        &self.env
    }
    /// How many compiled (expanded, non-withheld) rules each list holds: deny, ask, allow.
    pub fn rule_counts(&self) -> [usize; 3] {
        let mut counts = [0; 3];
        for r in &self.rules {
            counts[list_slot(r.list)] += 1;
        }
        counts
    }
}

/// Compiles the declarations into a snapshot, in time linear in the rules: each declaration is
/// parsed once (its rules feed the compiled lists and the canonical form alike), a line number
/// is looked up only for an error, and the builder is read, never copied.
fn compile(b: &PolicyBuilder) -> Result<PolicySnapshot, PolicyError> {
    let preset = preset_set_of(b);
    let plan = Plan::new(b, preset.as_ref())?;
    let compiled = compile_rules(b, &plan)?;
    let lists = index(compiled.rules.iter().map(IndexEntry::of));
    let sources = plan.source_infos(compiled.reports);
    plan.assemble(
        sources,
        RuleTable::Built(compiled.rules),
        lists,
        &compiled.canonical_rules,
    )
}

/// The preset's deny rules as a source of their own, when it has any.
pub(crate) fn preset_set_of(b: &PolicyBuilder) -> Option<SetDecl> {
    b.preset
        .as_ref()
        .filter(|(preset, _)| !preset.deny_rules().is_empty())
        .map(|(preset, at)| preset_set(b, *preset, at))
}

/// What compiling settles before any rule: the default, and the sets in evaluation order
/// (their names, ranks and aliases checked).
pub(crate) struct Plan<'b> {
    pub(crate) b: &'b PolicyBuilder,
    default: Decision,
    default_from: DefaultOrigin,
    /// Every set, the preset's last.
    pub(crate) sets: Vec<&'b SetDecl>,
    /// The evaluation order: indices into `sets`.
    pub(crate) order: Vec<usize>,
}

/// Whether a set's source is trusted (an untrusted role never is).
pub(crate) fn trusted(set: &SetDecl) -> bool {
    set.source.trusted && set.source.role.may_be_trusted()
}

impl<'b> Plan<'b> {
    pub(crate) fn new(
        b: &'b PolicyBuilder,
        preset_set: Option<&'b SetDecl>,
    ) -> Result<Self, PolicyError> {
        let default_at = Location::file(b.first_label.as_deref().unwrap_or("<library>"));
        // The strictest default declared, else the one the preset implies.
        let (default, default_from) = match (b.default, &b.preset) {
            (Some(d), _) => (
                d,
                b.default_from
                    .clone()
                    .unwrap_or_else(DefaultOrigin::library),
            ),
            (None, Some((p, at))) => (
                p.default_decision(),
                DefaultOrigin::file(&at.file, Some(*p)),
            ),
            (None, None) => return Err(PolicyError::MissingDefault { at: default_at }),
        };
        let sets: Vec<&SetDecl> = b.sets.iter().chain(preset_set).collect();
        // Sources: names non-empty and unique, ranks exact in canonical JSON.
        for set in &sets {
            if set.group != usize::MAX && set.source.rank.unsigned_abs() > MAX_RANK.unsigned_abs() {
                return Err(PolicyError::Source {
                    at: set.at.clone(),
                    message: format!(
                        "source `{}` has rank {}, beyond the ranks a policy holds exactly (±{MAX_RANK})",
                        set.source.name, set.source.rank
                    ),
                });
            }
        }
        let mut seen: HashMap<&str, &Location> = HashMap::with_capacity(sets.len());
        for set in &sets {
            if set.source.name.trim().is_empty() {
                return Err(PolicyError::Source {
                    at: set.at.clone(),
                    message: "a source's name must not be empty".into(),
                });
            }
            if let Some(first) = seen.insert(&set.source.name, &set.at) {
                return Err(PolicyError::Source {
                    at: set.at.clone(),
                    message: format!(
                        "source name `{}` is already used ({first})",
                        set.source.name
                    ),
                });
            }
        }
        for (alias, targets) in &b.aliases {
            if targets.is_empty() {
                return Err(PolicyError::Rule {
                    at: Location::file("<aliases>"),
                    rule: alias.clone(),
                    kind: RuleErrorKind::InvalidRule,
                    message: format!("alias `{alias}` names no tool"),
                });
            }
        }
        // Evaluation order: by role (highest first); within a role, merged sources by rank
        // (highest first), then own lists by rank.
        let mut order: Vec<usize> = (0..sets.len()).collect();
        order.sort_by_key(|&i| {
            let set = sets[i];
            (
                std::cmp::Reverse(set.source.role),
                set.own,
                std::cmp::Reverse(set.source.rank),
            )
        });
        Ok(Self {
            b,
            default,
            default_from,
            sets,
            order,
        })
    }

    /// The sets in evaluation order.
    pub(crate) fn ordered(&self) -> impl Iterator<Item = &'b SetDecl> + '_ {
        self.order.iter().map(|&i| self.sets[i])
    }

    /// Each source's report, in evaluation order, with what its set declares.
    pub(crate) fn source_infos(&self, reports: Vec<SourceReport>) -> Vec<SourceInfo> {
        self.ordered()
            .zip(reports)
            .map(|(set, r)| SourceInfo {
                name: set.source.name.clone(),
                role: set.source.role,
                rank: set.source.rank,
                group: set.group,
                trusted: trusted(set),
                own: set.own,
                path: set.source.path.clone(),
                hash: set.source.hash.clone(),
                withheld: r.withheld,
                rule_counts: r.rule_counts,
                derived: r.derived,
            })
            .collect()
    }

    /// The snapshot: its rules and index (compiled, or read from an image) with everything
    /// else the builder declares, the canonical form written around the rules' member.
    pub(crate) fn assemble(
        self,
        sources: Vec<SourceInfo>,
        rules: RuleTable,
        lists: [ListIndex; 3],
        canonical_rules: &str,
    ) -> Result<PolicySnapshot, PolicyError> {
        let b = self.b;
        let default = self.default;
        let id =
            b.id.clone()
                .or_else(|| {
                    b.sets
                        .iter()
                        .find(|s| s.own)
                        .or(b.sets.first())
                        .map(|s| s.source.name.clone())
                })
                .unwrap_or_else(|| "policy".into());
        let version = b.version.clone().unwrap_or_else(|| "0".into());
        let canonical_sources: Vec<CanonicalSource<'_>> = self
            .ordered()
            .map(|set| CanonicalSource {
                group: set.group.min(u32::MAX as usize),
                name: &set.source.name,
                own: set.own,
                rank: set.source.rank,
                role: set.source.role.as_str(),
                trusted: trusted(set),
            })
            .collect();
        let (canonical, canonical_rules) = canonical_form(
            b,
            &id,
            &version,
            default,
            &canonical_sources,
            canonical_rules,
        )?;
        let digest = Digest::of_bytes(canonical.as_bytes());
        // The default's reason for each tool the rules (of every list) or profiles name, made
        // once per tool.
        let mut default_reasons: FxHashMap<String, Arc<str>> = FxHashMap::default();
        for tool in lists
            .iter()
            .flat_map(|l| l.by_tool.keys().map(String::as_str))
            .chain(b.profiles.keys().map(String::as_str))
        {
            if !default_reasons.contains_key(tool) {
                default_reasons.insert(tool.to_owned(), default_reason(default, tool));
            }
        }
        Ok(PolicySnapshot {
            id,
            version,
            digest,
            canonical,
            canonical_rules,
            default,
            default_from: self.default_from,
            protected: b.protected.clone(),
            mcp: b.mcp.clone(),
            fold_paths: b.case_insensitive_paths,
            writing_tools: ["edit", "write"]
                .into_iter()
                .map(str::to_owned)
                .chain(b.aliases.get("edit").into_iter().flatten().cloned())
                .collect(),
            sources,
            preset: b.preset.as_ref().map(|(p, _)| *p),
            hints: b.hints.clone().unwrap_or_default(),
            modes: b.modes.clone(),
            declared: Arc::new(PolicyBuilder::new()),
            default_reasons,
            rules,
            lists,
            profiles: b.profiles.clone(),
            env: b.env.clone(),
            containment: b.containment.clone().unwrap_or_default(),
            directives: b.directives.clone(),
            guards: b.guards.clone().unwrap_or_default(),
            approvers: b.approvers.clone(),
            permissions: b.permissions.clone(),
        })
    }
}

/// What compiling a source's rules reports besides the rules: its withheld allow rules, its
/// rule counts and the rules alias expansion derived.
#[derive(Debug, Clone, Default)]
pub(crate) struct SourceReport {
    pub(crate) withheld: Vec<String>,
    pub(crate) rule_counts: [usize; 3],
    pub(crate) derived: Vec<DerivedRule>,
}

/// The rules compiled, in list order (deny, ask, allow; each in evaluation order), each
/// source's report, and the canonical text of the rules' member.
pub(crate) struct CompiledRules {
    pub(crate) rules: Vec<CompiledRule>,
    pub(crate) reports: Vec<SourceReport>,
    pub(crate) canonical_rules: String,
}

/// Validates and compiles every declared rule: the part of compiling that grows with the
/// policy (and what a policy image saves).
fn compile_rules(b: &PolicyBuilder, plan: &Plan<'_>) -> Result<CompiledRules, PolicyError> {
    let mut reports = Vec::with_capacity(plan.order.len());
    let mut canonical_rules: Vec<CanonicalRule<'_>> = Vec::new();
    let mut per_list: [Vec<CompiledRule>; 3] = Default::default();
    for (pos, set) in plan.ordered().enumerate() {
        let set_trusted = trusted(set);
        let mut info = SourceReport::default();
        // The rules this source declares, as written: what its notes may name.
        let mut declared: FxHashSet<String> = FxHashSet::default();
        for kind in ListKind::ORDER {
            for decl in &set.lists[list_slot(kind)] {
                let at = || set.locate(decl, kind);
                if decl.text.trim().is_empty() {
                    return Err(PolicyError::Rule {
                        at: at(),
                        rule: decl.text.clone(),
                        kind: RuleErrorKind::InvalidRule,
                        message: format!(
                            "an empty {} rule: write a rule, or remove the entry",
                            kind.as_str()
                        ),
                    });
                }
                let parsed = Rule::parse_list(&decl.text).map_err(|e| PolicyError::Rule {
                    at: at(),
                    rule: e.token.clone(),
                    kind: RuleErrorKind::Grammar(e.kind),
                    message: e.to_string(),
                })?;
                for rule in parsed {
                    let written = rule.to_string();
                    let compiled = compile_rule(b, kind, &rule, &written, pos, &at)?;
                    let note = set.notes.get(&written).map(|(n, _)| n.as_str());
                    canonical_rules.push(CanonicalRule {
                        list: kind.as_str(),
                        note,
                        rule: written.clone(),
                        source: &set.source.name,
                    });
                    if kind == ListKind::Allow && !set_trusted {
                        info.withheld.push(written.clone());
                        declared.insert(written);
                        continue;
                    }
                    let note = if set_trusted { note } else { None };
                    for mut c in compiled {
                        c.note = note.map(str::to_owned);
                        info.rule_counts[list_slot(kind)] += 1;
                        if c.rule.tool() != rule.tool() {
                            info.derived.push(DerivedRule {
                                list: kind,
                                rule: c.rule.to_string(),
                                from: written.clone(),
                            });
                        }
                        per_list[list_slot(kind)].push(c);
                    }
                    declared.insert(written);
                }
            }
        }
        for (key, (_, at)) in &set.notes {
            if !declared.contains(key) {
                return Err(PolicyError::Rule {
                    at: set.locate_note(at, key),
                    rule: key.clone(),
                    kind: RuleErrorKind::InvalidRule,
                    message: format!(
                        "a note for a rule that source `{}` does not declare",
                        set.source.name
                    ),
                });
            }
        }
        reports.push(info);
    }
    let mut rules: Vec<CompiledRule> = Vec::with_capacity(per_list.iter().map(Vec::len).sum());
    for list in per_list {
        rules.extend(list);
    }
    // One shared name per source, not one per rule.
    let source_names: Vec<Arc<str>> = plan
        .ordered()
        .map(|set| Arc::from(set.source.name.as_str()))
        .collect();
    for rule in &mut rules {
        rule.finish(&source_names[rule.source]);
    }
    Ok(CompiledRules {
        rules,
        reports,
        canonical_rules: canonical_rules_text(&canonical_rules)?,
    })
}

/// The preset's deny rules as a source of their own, ranked below every declared source.
fn preset_set(b: &PolicyBuilder, preset: Preset, at: &Location) -> SetDecl {
    let mut set = SetDecl {
        source: Source {
            name: preset.source_name(),
            // It speaks for the highest role that named it, below every source of
            // that role: a lower role's carve-out cannot reach it.
            role: match b.preset_role {
                Role::Untrusted => Role::Project,
                named => named,
            },
            rank: crate::preset::PRESET_RANK,
            trusted: true,
            path: None,
            hash: None,
        },
        own: false,
        group: usize::MAX,
        lists: Default::default(),
        notes: BTreeMap::new(),
        at: at.clone(),
        text: None,
        pointer: String::new(),
    };
    set.lists[list_slot(ListKind::Deny)] = preset
        .deny_rules()
        .iter()
        .map(|r| RuleDecl::new((*r).to_owned(), at.clone()))
        .collect();
    set
}

/// Why the default decided a call of `tool`.
pub(crate) fn default_reason(default: Decision, tool: &str) -> Arc<str> {
    match default {
        Decision::Allow => "allowed by default".into(),
        Decision::Ask => format!("no rule allows {tool}: approval required by default").into(),
        Decision::Deny => format!("no rule allows {tool}: denied by default").into(),
    }
}

/// Did-you-mean for a tool name that differs from a known one only in case.
fn case_hint<'a>(name: &str, known: impl Iterator<Item = &'a String>) -> Option<String> {
    known
        .filter(|k| k.as_str() != name && k.eq_ignore_ascii_case(name))
        .map(|k| format!(" (did you mean `{k}`?)"))
        .next()
}

/// Compiles one rule (`written` is its text) into one compiled rule per tool its name stands
/// for; `at` says where it was declared, for an error.
fn compile_rule(
    b: &PolicyBuilder,
    kind: ListKind,
    rule: &Rule,
    written: &str,
    source: usize,
    at: &dyn Fn() -> Location,
) -> Result<Vec<CompiledRule>, PolicyError> {
    let err = |kind: RuleErrorKind, message: String| PolicyError::Rule {
        at: at(),
        rule: written.to_owned(),
        kind,
        message,
    };
    if rule.is_tool_glob() {
        if kind == ListKind::Allow {
            return Err(err(
                RuleErrorKind::ToolGlob,
                "a tool-name glob is not allowed in the allow list (it would allow tools nobody has seen)".into(),
            ));
        }
        if rule.spec().is_some() {
            return Err(err(
                RuleErrorKind::ToolGlob,
                "a tool-name glob takes no specifier".into(),
            ));
        }
        return Ok(vec![CompiledRule {
            list: kind,
            rule: rule.clone(),
            written: written.to_owned(),
            source,
            pattern: None,
            carve_out: false,
            tool_glob: Some(Wildcard::new(rule.tool())),
            note: None,
            cited: Arc::from(""),
            source_name: Arc::from(""),
            reason: Arc::from(""),
        }]);
    }
    let aliased = b.aliases.get(rule.tool());
    let targets = aliased
        .into_iter()
        .flatten()
        .map(String::as_str)
        .chain(aliased.is_none().then_some(rule.tool()));
    let mut out = Vec::with_capacity(aliased.map_or(1, Vec::len));
    for tool in targets {
        let expanded = rule.with_tool(tool);
        let pattern = match rule.pattern() {
            None => None,
            Some(spec) => {
                let Some(profile) = b.profiles.get(tool) else {
                    let hint = case_hint(tool, b.profiles.keys()).unwrap_or_default();
                    return Err(err(
                        RuleErrorKind::NoMatcher,
                        format!(
                            "tool `{tool}` has no matcher, so a specifier could never match{hint}"
                        ),
                    ));
                };
                let p = Pattern::compile_folded(
                    profile.matcher,
                    spec,
                    &b.env,
                    b.case_insensitive_paths,
                )
                .map_err(|e| err(RuleErrorKind::InvalidPattern, e.to_string()))?;
                Some(p)
            }
        };
        out.push(CompiledRule {
            list: kind,
            rule: expanded,
            written: written.to_owned(),
            source,
            pattern,
            carve_out: rule.is_carve_out(),
            tool_glob: None,
            note: None,
            cited: Arc::from(""),
            source_name: Arc::from(""),
            reason: Arc::from(""),
        });
    }
    Ok(out)
}

/// What the index needs of a rule.
pub(crate) struct IndexEntry<'a> {
    pub(crate) list: ListKind,
    pub(crate) tool: &'a str,
    pub(crate) tool_glob: bool,
    pub(crate) carve_out: bool,
    /// The pattern's index key, for a rule with a specifier.
    pub(crate) key: Option<&'a str>,
}

impl<'a> IndexEntry<'a> {
    pub(crate) fn of(r: &'a CompiledRule) -> Self {
        Self {
            list: r.list,
            tool: r.rule.tool(),
            tool_glob: r.tool_glob.is_some(),
            carve_out: r.carve_out,
            key: r.pattern.as_ref().map(Pattern::index_key),
        }
    }
}

/// Indexes the rules (in id order) by list, then tool, then key.
pub(crate) fn index<'a>(rules: impl Iterator<Item = IndexEntry<'a>>) -> [ListIndex; 3] {
    let mut lists: [ListIndex; 3] = Default::default();
    for (id, r) in rules.enumerate() {
        let id = id as u32;
        let list = &mut lists[list_slot(r.list)];
        if r.tool_glob {
            let prefix = r.tool.split('*').next().unwrap_or("");
            if !list.glob_prefix_lens.contains(&prefix.len()) {
                list.glob_prefix_lens.push(prefix.len());
            }
            entry(&mut list.globs_by_prefix, prefix).push(id);
            continue;
        }
        let t = entry(&mut list.by_tool, r.tool);
        match (r.key, r.carve_out) {
            (Some(_), true) => t.carve_outs.push(id),
            (Some(key), false) => {
                t.has_specifier_rules = true;
                t.key_lens |= ToolIndex::len_bit(key.len());
                entry(&mut t.keyed, key).push(id);
            }
            (None, _) => t.bare.push(id),
        }
    }
    for list in &mut lists {
        list.glob_prefix_lens.sort_unstable();
    }
    lists
}

/// The value under `key`, inserted (default) when missing; the key is copied only then.
fn entry<'m, V: Default>(map: &'m mut FxHashMap<String, V>, key: &str) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), V::default());
    }
    map.get_mut(key)
        .unwrap_or_else(|| unreachable!("inserted above"))
}

/// A source as the canonical form lists it.
#[derive(Serialize)]
struct CanonicalSource<'a> {
    group: usize,
    name: &'a str,
    own: bool,
    rank: i64,
    role: &'static str,
    trusted: bool,
}

/// A declared rule as the canonical form lists it (every rule, withheld ones included).
#[derive(Serialize)]
struct CanonicalRule<'a> {
    list: &'static str,
    note: Option<&'a str>,
    rule: String,
    source: &'a str,
}

/// The canonical JSON of the semantics, in evaluation order: an object whose members (sorted
/// by key, as RFC 8785 orders them; every key is plain ASCII) are written one by one, so the
/// rules' member, which grows with the policy and is the costly one, can be written once and
/// reused (`rules` is its canonical text: see [`canonical_rules_text`]). The same text
/// `to_canonical_string` writes for the whole object.
fn canonical_form(
    b: &PolicyBuilder,
    id: &str,
    version: &str,
    default: Decision,
    sources: &[CanonicalSource<'_>],
    rules: &str,
) -> Result<(String, std::ops::Range<usize>), PolicyError> {
    fn text<T: Serialize + ?Sized>(value: &T) -> Result<String, PolicyError> {
        warden_contracts::canonical::to_canonical_string_of(value).map_err(|e| PolicyError::Write {
            message: e.to_string(),
        })
    }
    let permissions = match crate::permission::cover(json!({}), &b.permissions) {
        Value::Object(mut map) => map.remove("permissions"),
        _ => None,
    };
    let tools: BTreeMap<&str, Value> = b
        .profiles
        .iter()
        .map(|(k, v)| {
            (
                k.as_str(),
                json!({"match": v.matcher.name(), "field": v.field}),
            )
        })
        .collect();
    let paths = if b.case_insensitive_paths {
        json!({"case_insensitive": true})
    } else {
        Value::Null
    };
    let modes: Vec<&str> = b.modes.iter().map(|m| m.name()).collect();
    let guards = b
        .guards
        .as_ref()
        .map(|g| g.declared().clone())
        .unwrap_or_default();
    let mut members: Vec<(&str, String)> = vec![
        ("aliases", text(&b.aliases)?),
        ("approvers", text(&b.approvers.canonical())?),
        (
            "containment",
            text(&b.containment.clone().unwrap_or_default())?,
        ),
        ("default", text(default.as_str())?),
        ("directives", text(&b.directives)?),
        ("format", text(SNAPSHOT_FORMAT)?),
        ("guards", text(&guards)?),
        ("hints", text(&b.hints.clone().unwrap_or_default())?),
        ("id", text(id)?),
        ("mcp", text(&b.mcp.canonical())?),
        ("modes", text(&modes)?),
        ("paths", text(&paths)?),
    ];
    if let Some(permissions) = &permissions {
        members.push(("permissions", text(permissions)?));
    }
    members.extend([
        ("preset", text(&b.preset.as_ref().map(|(p, _)| p.name()))?),
        // The rules' text, which grows with the policy, is written below, copied once.
        ("rules", String::new()),
        ("sources", text(sources)?),
        ("tools", text(&tools)?),
        ("version", text(version)?),
    ]);
    debug_assert!(members.windows(2).all(|w| w[0].0 < w[1].0));
    let mut out = String::with_capacity(
        rules.len()
            + members
                .iter()
                .map(|(k, v)| k.len() + v.len() + 4)
                .sum::<usize>(),
    );
    let mut rules_at = 0..0;
    out.push('{');
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('"');
        out.push_str(key);
        out.push_str("\":");
        if *key == "rules" {
            rules_at = out.len()..out.len() + rules.len();
            out.push_str(rules);
        } else {
            out.push_str(value);
        }
    }
    out.push('}');
    Ok((out, rules_at))
}

/// The canonical text of the rules' member: every declared rule (withheld ones included), in
/// evaluation order.
fn canonical_rules_text(rules: &[CanonicalRule<'_>]) -> Result<String, PolicyError> {
    warden_contracts::canonical::to_canonical_string_of(rules).map_err(|e| PolicyError::Write {
        message: e.to_string(),
    })
}
