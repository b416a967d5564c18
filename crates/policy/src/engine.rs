//! The decision engine: a call → subjects → one decision per subject (deny, ask, allow, default)
//! → the fold (deny > ask > allow), citing the rule, its source and the deciding subject.
//!
//! Everything here is pure: a verdict is a function of the snapshot and the call. Paths in the
//! call are resolved against the call's working directory lexically; symlink resolution is the
//! edge's job ([`crate::edge`]) and arrives in [`Call::resolved_paths`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value as Json;
use warden_contracts::Digest;

use crate::compile::{CompiledRule, PolicySnapshot, ToolIndex};
use crate::decl::{Decision, ListKind};
use crate::matcher::{MatcherKind, Value, View};
use crate::shell;

/// One tool call to decide.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The tool's name.
    pub tool: String,
    /// Its arguments (a JSON object; anything else has no fields).
    pub args: Json,
    /// The working directory relative paths in the arguments resolve against (default: the
    /// project root).
    pub cwd: Option<PathBuf>,
    /// Symlink-resolved forms of lexical paths, filled in by the edge: lexical → resolved.
    pub resolved_paths: BTreeMap<String, String>,
    /// The containment the call runs under, when the backend proves one (`landlock+netns`;
    /// empty when unnamed): bare ask rules do not ask for it (agentpolicy's confinement).
    pub confined: Option<String>,
    /// What the tool says the call does (its registry entry, an MCP server's annotations):
    /// believed by hint rules only for a tool of a trusted MCP server ([`crate::hints`]),
    /// or when `hints_vouched`.
    pub hints: Option<crate::hints::EffectiveHints>,
    /// The embedding runtime vouches for `hints`: they come from its own tool's code (a tool
    /// registered as built into the runtime), not from a server or the model. Built-in
    /// Warden tool names and `bash` keep their own hints whatever is vouched.
    pub hints_vouched: bool,
}

impl Call {
    /// A call with no working directory and no resolved paths.
    pub fn new(tool: impl Into<String>, args: Json) -> Self {
        Self {
            tool: tool.into(),
            args,
            cwd: None,
            resolved_paths: BTreeMap::new(),
            confined: None,
            hints: None,
            hints_vouched: false,
        }
    }

    /// The same call, with the hints its tool declares.
    pub fn with_hints(mut self, hints: crate::hints::EffectiveHints) -> Self {
        self.hints = Some(hints);
        self
    }

    /// The same call, with hints the embedding runtime vouches for (its own tool's).
    pub fn with_vouched_hints(mut self, hints: crate::hints::EffectiveHints) -> Self {
        self.hints = Some(hints);
        self.hints_vouched = true;
        self
    }

    /// The hints believed for a subject of `tool` of this call under `rules`.
    pub(crate) fn believed_hints(
        &self,
        rules: &crate::hints::HintRules,
        tool: &str,
        shell_read_only: bool,
    ) -> crate::hints::EffectiveHints {
        let declared = self.hints.filter(|_| self.tool == tool);
        match declared {
            Some(h)
                if self.hints_vouched
                    && tool != "bash"
                    && crate::hints::builtin(tool).is_none() =>
            {
                h
            }
            _ => rules.believed(tool, shell_read_only, declared),
        }
    }

    /// The same call, running confined by `mechanism` (proven by the backend).
    pub fn confined_by(mut self, mechanism: impl Into<String>) -> Self {
        self.confined = Some(mechanism.into());
        self
    }

    /// The same call with a working directory.
    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }
}

/// One thing a call is decided on: by default the call itself; a shell command's simple
/// commands; a redirect target (which names another tool).
#[derive(Debug, Clone, PartialEq)]
pub struct Subject {
    /// The tool whose rules decide it.
    pub tool: String,
    /// What a prompt shows.
    pub text: String,
    /// The arguments its tool's matcher reads.
    pub args: Json,
    /// A constraint: deny and ask rules can match it, but it never needs (or gets) an allow.
    pub constrain: bool,
}

/// The decision on one subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubjectVerdict {
    /// The subject's text.
    pub text: String,
    /// Its tool.
    pub tool: String,
    /// Its decision.
    pub decision: Decision,
    /// The rule that decided it, or `None` for the default or a refusal without a rule.
    pub rule: Option<Arc<str>>,
    /// The rule's source.
    pub source: Option<Arc<str>>,
    /// Why, for a person.
    pub reason: Arc<str>,
    /// A constraint that matched no deny or ask rule: it takes no part in the fold.
    #[serde(skip)]
    pub neutral: bool,
}

/// The decision on a call: the fold of its subjects, citing the first subject whose decision
/// equals the call's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// The call's decision.
    pub decision: Decision,
    /// The rule cited (`<tool>(<specifier as written>)`, or the bare tool name), or `None` when
    /// the default decided or the call could not be evaluated.
    pub rule: Option<Arc<str>>,
    /// The cited rule's source.
    pub source: Option<Arc<str>>,
    /// Why, for a person (and the model).
    pub reason: Arc<str>,
    /// The deciding subject's text, when the call has several subjects.
    pub subject: Option<String>,
    /// Every subject's decision.
    pub subjects: Vec<SubjectVerdict>,
    /// The digest of the snapshot that decided.
    pub policy_digest: Digest,
    /// The containment the call was decided under, when it runs confined.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confined: Option<String>,
}

/// How the subjects of a call were obtained.
enum Split {
    Subjects(Vec<Prepared>),
    Refused(String),
}

/// A subject with its matcher values ready.
pub(crate) struct Prepared {
    pub(crate) subject: Subject,
    pub(crate) restrict: Value,
    /// The allow-side value; `None` when it is the same as `restrict` (saves a copy).
    permit: Option<Value>,
    /// Why the program cannot be known statically.
    pub(crate) unknown: Option<String>,
    /// More readings deny and ask rules try (a shell command's literal argv, each wrapper
    /// layer, …); empty for every other subject.
    also: Vec<Value>,
    /// Extra conditions on allow rules (argument-extending inner commands, hazards).
    allow_only: AllowOnly,
    /// The shell command behind the subject, for explanations.
    pub(crate) shell: Option<shell::ShellCommand>,
    /// A shell command that is a known read-only (program, flags) pair.
    pub(crate) read_only: bool,
}

/// Conditions an allow rule must meet, besides matching, to allow a subject.
#[derive(Debug, Clone, Default)]
struct AllowOnly {
    /// Only a rule of the form `x:*` (the inner command of `xargs`, `find -exec`: arguments
    /// are appended).
    word_prefix: bool,
    /// Words the rule's specifier must spell (`find -delete`).
    hazards: Vec<String>,
}

impl AllowOnly {
    fn admits(&self, rule: &CompiledRule) -> bool {
        if !self.word_prefix && self.hazards.is_empty() {
            return true;
        }
        // A bare rule (`bash`) allows every command of its tool.
        let Some(spec) = rule.rule.pattern() else {
            return true;
        };
        let spec = spec.trim_end();
        if self.word_prefix && !spec.ends_with(":*") {
            return false;
        }
        self.hazards.iter().all(|h| {
            spec.split(|c: char| c.is_whitespace())
                .any(|w| w == h || w.trim_end_matches(":*") == h)
        })
    }
}

impl Prepared {
    /// The value allow rules (and deny/ask carve-outs) read.
    fn permit(&self) -> &Value {
        self.permit.as_ref().unwrap_or(&self.restrict)
    }
}

impl PolicySnapshot {
    /// Decides one call. Pure and deterministic.
    ///
    /// A snapshot that declares programmable permissions is decided only with them
    /// ([`crate::permission::decide_with_permissions`]): deciding it here denies, so a deny
    /// permission is never skipped by a caller that forgot it.
    pub fn decide(&self, call: &Call) -> Verdict {
        if !self.permissions.is_empty() {
            let names: Vec<&str> = self.permissions.iter().map(|p| p.name.as_str()).collect();
            let mut v = self.decide_by_rules(call);
            v.decision = Decision::Deny;
            v.rule = None;
            v.source = None;
            v.reason = format!(
                "this policy declares programmable permissions ({}), which only decide_with_permissions runs: denied",
                names.join(", ")
            )
            .into();
            return v;
        }
        self.decide_by_rules(call)
    }

    /// Decides one call by the declarative policy alone (rules, hints, preset, modes).
    pub(crate) fn decide_by_rules(&self, call: &Call) -> Verdict {
        let split = self.split(call, false);
        self.fold(call, split)
    }

    /// Decides one call on subjects a caller split itself (a product's own splitter). `Err` is
    /// a splitter failure: the call is denied, whatever the default.
    pub fn decide_subjects(&self, call: &Call, subjects: Result<Vec<Subject>, String>) -> Verdict {
        let split = match subjects {
            Err(why) => Split::Refused(why),
            Ok(subjects) => Split::Subjects(
                subjects
                    .into_iter()
                    .map(|s| self.prepare(call, s, None))
                    .collect(),
            ),
        };
        self.fold(call, split)
    }

    /// The call's prepared subjects (empty when it cannot be split).
    pub(crate) fn prepared_subjects(&self, call: &Call) -> Vec<Prepared> {
        match self.split(call, true) {
            Split::Subjects(p) => p,
            Split::Refused(_) => Vec::new(),
        }
    }

    /// Every rule of `list` that matches the subject, in order, with the carve-out that
    /// cancelled it, if any.
    pub(crate) fn all_matches(
        &self,
        list: ListKind,
        p: &Prepared,
    ) -> Vec<crate::explain::RuleMatch> {
        let index = &self.lists[slot(list)];
        let (view, value) = match list {
            ListKind::Allow => (View::Permit, p.permit()),
            _ => (View::Restrict, &p.restrict),
        };
        let tool = p.subject.tool.as_str();
        let tool_index = index.by_tool.get(tool);
        let mut out = Vec::new();
        for rule in &self.rules {
            if rule.list != list || rule.carve_out {
                continue;
            }
            let applies = match &rule.tool_glob {
                Some(g) => g.matches(tool),
                None => rule.rule.tool() == tool,
            };
            let also: &[Value] = match view {
                View::Restrict => &p.also,
                View::Permit => &[],
            };
            if !applies
                || !rule.pattern.as_ref().is_none_or(|pat| {
                    pat.matches(value, view) || also.iter().any(|v| pat.matches(v, view))
                })
                || (list == ListKind::Allow && !p.allow_only.admits(rule))
            {
                continue;
            }
            let carved = tool_index.and_then(|t| self.carving_rule(t, rule, list, p));
            out.push(crate::explain::RuleMatch {
                list,
                rule: rule.rule.to_string(),
                written: (rule.written != rule.rule.to_string()).then(|| rule.written.clone()),
                source: self.sources[rule.source].name.clone(),
                carved_out_by: carved
                    .map(|c| (c.rule.to_string(), self.sources[c.source].name.clone())),
            });
        }
        out
    }

    /// Splits a call into prepared subjects; `keep` keeps each shell command whole for
    /// explanations.
    fn split(&self, call: &Call, keep: bool) -> Split {
        if call.tool == "bash" {
            let profile = self.profiles.get("bash");
            let field = profile.map_or("command", |p| p.field.as_str());
            if let Some(command) = call.args.get(field).and_then(Json::as_str) {
                return match shell::split_command(command) {
                    Err(e) => Split::Refused(e.to_string()),
                    Ok(subjects) => Split::Subjects(
                        subjects
                            .into_iter()
                            .map(|s| self.prepare_shell(call, s, keep))
                            .collect(),
                    ),
                };
            }
        }
        let text = self.subject_text(call);
        let subject = Subject {
            tool: call.tool.clone(),
            text,
            args: Json::Null,
            constrain: false,
        };
        Split::Subjects(vec![self.prepare_from(call, subject, &call.args, None)])
    }

    fn subject_text(&self, call: &Call) -> String {
        self.profiles
            .get(&call.tool)
            .and_then(|p| call.args.get(&p.field))
            .and_then(Json::as_str)
            .map_or_else(|| call.tool.clone(), str::to_owned)
    }

    /// Prepares one subject of a `bash` command: a simple command is a `bash` subject (allow
    /// rules see its written words, deny and ask rules every normalized reading); an output
    /// redirect target is a `write` subject; an input target is a `read` constraint, which is
    /// unknown (so never neutral) only when `read` has a deny or ask rule it could have met.
    fn prepare_shell(&self, call: &Call, s: shell::ShellSubject, keep: bool) -> Prepared {
        let c = match s {
            shell::ShellSubject::Command(c) => c,
            shell::ShellSubject::Write(r) => return self.prepare_redirect(call, r, "write", false),
            shell::ShellSubject::Read(r) => return self.prepare_redirect(call, r, "read", true),
        };
        // Explanations keep the whole command; a decision moves its parts instead of copying.
        let kept = keep.then(|| c.clone());
        let shell::ShellCommand {
            text,
            written,
            normalized,
            also,
            unknown,
            extends,
            hazards,
            constraint,
            read_only,
            ..
        } = c;
        let kind = self.profiles.get("bash").map(|p| p.matcher);
        let (restrict, permit, also) = match kind {
            Some(MatcherKind::Shell) | None => {
                // Deny and ask rules (and allow-list carve-outs) read only the normalized side,
                // allow rules (and deny/ask carve-outs) only the written one.
                let restrict = Value::Shell {
                    written: Vec::new(),
                    normalized,
                };
                let permit = Value::Shell {
                    written,
                    normalized: Vec::new(),
                };
                let also = also
                    .into_iter()
                    .map(|r| Value::Shell {
                        // Only deny and ask rules read these: the normalized side.
                        written: Vec::new(),
                        normalized: r,
                    })
                    .collect();
                (restrict, permit, also)
            }
            Some(_) => (
                Value::Text(normalized.join(" ")),
                Value::Text(written.join(" ")),
                also.iter().map(|r| Value::Text(r.join(" "))).collect(),
            ),
        };
        let field = self
            .profiles
            .get("bash")
            .map_or_else(|| "command".to_owned(), |p| p.field.clone());
        let mut args = serde_json::Map::with_capacity(1);
        args.insert(field, Json::String(text.clone()));
        let subject = Subject {
            tool: call.tool.clone(),
            text,
            args: Json::Object(args),
            constrain: constraint,
        };
        Prepared {
            subject,
            restrict,
            permit: Some(permit),
            unknown,
            also,
            allow_only: AllowOnly {
                word_prefix: extends,
                hazards,
            },
            shell: kept,
            read_only,
        }
    }

    fn prepare_redirect(
        &self,
        call: &Call,
        r: shell::Redirect,
        tool: &str,
        constrain: bool,
    ) -> Prepared {
        let field = self
            .profiles
            .get(tool)
            .map_or_else(|| "path".to_owned(), |p| p.field.clone());
        let subject = Subject {
            tool: tool.to_owned(),
            text: r.text.clone(),
            args: serde_json::json!({ field: r.path }),
            constrain,
        };
        let unknown = match (&r.unknown, constrain) {
            (Some(why), true) => self.tool_has_restricting_rules(tool).then(|| why.clone()),
            (u, false) => u.clone(),
            (None, true) => None,
        };
        self.prepare(call, subject, unknown)
    }

    /// Whether any deny or ask rule (or tool glob) could apply to `tool`.
    fn tool_has_restricting_rules(&self, tool: &str) -> bool {
        [ListKind::Deny, ListKind::Ask].into_iter().any(|list| {
            let index = &self.lists[slot(list)];
            index
                .by_tool
                .get(tool)
                .is_some_and(|t| t.has_specifier_rules || !t.bare.is_empty())
                || index.any_tool_glob(&self.rules, tool)
        })
    }

    fn prepare(&self, call: &Call, mut subject: Subject, unknown: Option<String>) -> Prepared {
        let args = std::mem::take(&mut subject.args);
        self.prepare_from(call, subject, &args, unknown)
    }

    /// Prepares `subject`, whose matched arguments are `args` (kept apart so a call's own
    /// arguments are read in place, never copied).
    fn prepare_from(
        &self,
        call: &Call,
        subject: Subject,
        args: &Json,
        unknown: Option<String>,
    ) -> Prepared {
        let value = match self.profiles.get(&subject.tool) {
            None => Value::Missing,
            Some(profile) => {
                let field = args.get(&profile.field);
                let cwd = call.cwd.as_deref().unwrap_or(&self.env.project_root);
                let lexical = Value::prepare(profile.matcher, field, cwd, &self.env, None);
                match &lexical {
                    Value::Path { lexical: l, .. } if !call.resolved_paths.is_empty() => {
                        match call.resolved_paths.get(l) {
                            Some(r) if r != l => {
                                Value::prepare(profile.matcher, field, cwd, &self.env, Some(r))
                            }
                            _ => lexical,
                        }
                    }
                    _ => lexical,
                }
            }
        };
        Prepared {
            subject,
            restrict: value,
            permit: None,
            unknown,
            also: Vec::new(),
            allow_only: AllowOnly::default(),
            shell: None,
            read_only: false,
        }
    }

    /// The first rule of `list` that fires for the subject, if any: matches and is not carved out.
    pub(crate) fn first_match(&self, list: ListKind, p: &Prepared) -> Option<&CompiledRule> {
        self.first_match_where(list, p, false)
    }

    /// [`Self::first_match`], skipping bare rules (and tool-name globs) when `skip_bare`.
    fn first_match_where(
        &self,
        list: ListKind,
        p: &Prepared,
        skip_bare: bool,
    ) -> Option<&CompiledRule> {
        let index = &self.lists[slot(list)];
        let (view, value) = match list {
            ListKind::Allow => (View::Permit, p.permit()),
            _ => (View::Restrict, &p.restrict),
        };
        let tool = p.subject.tool.as_str();
        let mut candidates: Vec<u32> = Vec::new();
        let tool_index = index.by_tool.get(tool);
        let also: &[Value] = match view {
            View::Restrict => &p.also,
            View::Permit => &[],
        };
        if let Some(t) = tool_index {
            if !skip_bare {
                candidates.extend_from_slice(&t.bare);
            }
            if !t.keyed.is_empty() {
                for v in std::iter::once(value).chain(also) {
                    v.for_each_probe_of_lengths(t.key_lens, &mut |probe| {
                        if let Some(ids) = t.keyed(probe) {
                            candidates.extend_from_slice(ids);
                        }
                    });
                }
            }
        }
        if !skip_bare {
            index.for_each_tool_glob(&self.rules, tool, |id| candidates.push(id));
        }
        if candidates.len() > 1 {
            candidates.sort_unstable();
            candidates.dedup();
        }
        candidates
            .into_iter()
            .map(|id| &self.rules[id as usize])
            .find(|rule| {
                crate::work::add(1);
                let fires = rule.pattern.as_ref().is_none_or(|pat| {
                    pat.matches(value, view) || also.iter().any(|v| pat.matches(v, view))
                });
                fires
                    && (list != ListKind::Allow || p.allow_only.admits(rule))
                    && !tool_index.is_some_and(|t| self.carved_out(t, rule, list, p))
            })
    }

    /// Whether a carve-out of the same list and tool cancels `rule` for this subject (which
    /// rules a carve-out reaches: [`SourceInfo::carve_out_reaches`]).
    fn carved_out(&self, t: &ToolIndex, rule: &CompiledRule, list: ListKind, p: &Prepared) -> bool {
        !t.carve_outs.is_empty() && self.carving_rule(t, rule, list, p).is_some()
    }

    /// Whether carve-out `c` can cancel `rule` ([`SourceInfo::carve_out_reaches`]).
    pub(crate) fn carve_out_reaches(&self, c: &CompiledRule, rule: &CompiledRule) -> bool {
        self.sources[c.source].carve_out_reaches(&self.sources[rule.source])
    }

    /// The carve-out that cancels `rule` for this subject, if any.
    fn carving_rule(
        &self,
        t: &ToolIndex,
        rule: &CompiledRule,
        list: ListKind,
        p: &Prepared,
    ) -> Option<&CompiledRule> {
        // A carve-out weakens a deny or ask list (so it must match as an allow would) and
        // strengthens an allow list (so it matches as a deny would).
        let (view, value) = match list {
            ListKind::Allow => (View::Restrict, &p.restrict),
            _ => (View::Permit, p.permit()),
        };
        let target = &self.sources[rule.source];
        t.carve_outs
            .iter()
            .map(|&id| &self.rules[id as usize])
            .find(|c| {
                self.sources[c.source].carve_out_reaches(target)
                    && c.pattern
                        .as_ref()
                        .is_some_and(|pat| pat.matches(value, view))
            })
    }

    pub(crate) fn tool_has_deny_rules(&self, tool: &str, with_specifier: bool) -> bool {
        let deny = &self.lists[slot(ListKind::Deny)];
        let direct = deny.by_tool.get(tool).is_some_and(|t| {
            if with_specifier {
                t.has_specifier_rules
            } else {
                t.has_specifier_rules || !t.bare.is_empty()
            }
        });
        direct || (!with_specifier && deny.any_tool_glob(&self.rules, tool))
    }

    /// Decides one subject: by the lists, hints, preset and default, then capped by every
    /// operating mode in force.
    fn decide_subject(&self, p: &Prepared, call: &Call) -> SubjectVerdict {
        let v = self.decide_subject_by_rules(p, call);
        self.cap_by_modes(p, call, v)
    }

    /// Caps a subject's verdict by every operating mode in force (programmable permissions'
    /// answers are capped the same way).
    pub(crate) fn cap_by_modes(
        &self,
        p: &Prepared,
        call: &Call,
        v: SubjectVerdict,
    ) -> SubjectVerdict {
        if v.neutral {
            return v;
        }
        match self.mode_cap(p.subject.tool.as_str(), p.read_only, call, v.decision) {
            Some((decision, reason)) => SubjectVerdict {
                decision,
                rule: None,
                source: None,
                reason,
                ..v
            },
            None => v,
        }
    }

    /// The narrowest operating mode's cap on a subject of `tool` the policy decided
    /// `decided`, when it is stricter: the capped decision and its reason.
    fn mode_cap(
        &self,
        tool: &str,
        read_only: bool,
        call: &Call,
        decided: Decision,
    ) -> Option<(Decision, Arc<str>)> {
        if self.modes.is_empty() || decided == Decision::Deny {
            return None;
        }
        let hints = call.believed_hints(&self.hints, tool, read_only);
        let class = crate::preset::ToolClass::of(tool);
        let (ceiling, mode) = self
            .modes
            .iter()
            .map(|m| (crate::mode::Mode::ceiling(m.cap(class, &hints)), *m))
            .max_by_key(|(ceiling, _)| *ceiling)?;
        if ceiling <= decided {
            return None;
        }
        let reason = match ceiling {
            Decision::Deny => format!("the {mode} mode does not allow this {tool} call: denied"),
            _ => format!(
                "the {mode} mode needs an approval receipt for a destructive or open-world {tool} call"
            ),
        };
        Some((ceiling, reason.into()))
    }

    fn decide_subject_by_rules(&self, p: &Prepared, call: &Call) -> SubjectVerdict {
        let confined = call.confined.as_deref();
        let tool = &p.subject.tool;
        let verdict = |decision, rule: Option<&CompiledRule>, reason: Arc<str>| SubjectVerdict {
            text: p.subject.text.clone(),
            tool: tool.clone(),
            decision,
            rule: rule.map(|r| r.cited.clone()),
            source: rule.map(|r| r.source_name.clone()),
            reason,
            neutral: false,
        };
        let cite = |rule: &CompiledRule| rule.reason.clone();
        if let Some(reason) = self.protected_target(p, call) {
            return verdict(Decision::Deny, None, reason.into());
        }
        if let Some(rule) = self.first_match(ListKind::Deny, p) {
            return verdict(Decision::Deny, Some(rule), cite(rule));
        }
        if matches!(p.restrict, Value::Missing) && self.tool_has_deny_rules(tool, true) {
            let field = self
                .profiles
                .get(tool)
                .map_or("the matched field", |pr| pr.field.as_str());
            return verdict(
                Decision::Deny,
                None,
                format!(
                    "`{field}` is missing or not a string, and {tool} has deny rules with a specifier: denied"
                )
                .into(),
            );
        }
        // A confined call skips bare ask rules (agentpolicy): containment the backend proves
        // stands in for the approval a bare rule asks for; an ask with a specifier still asks.
        if let Some(rule) = self.first_match_where(ListKind::Ask, p, confined.is_some()) {
            return verdict(Decision::Ask, Some(rule), cite(rule));
        }
        let bare_ask = match confined {
            Some(_) => self.first_match(ListKind::Ask, p),
            None => None,
        };
        if let Some(why) = &p.unknown {
            let decision =
                if self.tool_has_deny_rules(tool, false) || self.default == Decision::Deny {
                    Decision::Deny
                } else {
                    Decision::Ask
                };
            let outcome = match decision {
                Decision::Deny => "denied",
                _ => "approval required",
            };
            return verdict(
                decision,
                None,
                format!(
                    "the program cannot be known statically ({why}), so no rule can allow it: {outcome}"
                )
                .into(),
            );
        }
        if let (Some(rule), Some(by)) = (bare_ask, confined) {
            let reason = if by.is_empty() {
                format!("confined, so {} does not ask", rule.rule)
            } else {
                format!("confined by {by}, so {} does not ask", rule.rule)
            };
            return verdict(Decision::Allow, Some(rule), reason.into());
        }
        if p.subject.constrain {
            let mut v = verdict(
                Decision::Allow,
                None,
                "no deny or ask rule matches; a constraint needs no allow".into(),
            );
            v.neutral = true;
            return v;
        }
        if let Some(rule) = self.first_match(ListKind::Allow, p) {
            return verdict(Decision::Allow, Some(rule), cite(rule));
        }
        if !self.hints.is_empty() {
            let hints = call.believed_hints(&self.hints, tool, p.read_only);
            if let Some((decision, name)) = self.hints.decide(&hints) {
                let outcome = match decision {
                    Decision::Allow => "allowed",
                    Decision::Ask => "approval required",
                    Decision::Deny => "denied",
                };
                let reason = format!("no rule decides {tool}; {name} by its hints: {outcome}");
                return verdict(decision, None, reason.into());
            }
        }
        let (decision, reason) = self.fallback(tool, p.read_only);
        verdict(decision, None, reason)
    }

    /// Why the subject touches a file Warden protects from the governed agent, if it does: a
    /// writing tool's path (lexical or resolved) is one, or a shell command that does not only
    /// read names one among its arguments (`rm policy.toml`, `cp x policy.toml`,
    /// `--out=policy.toml`).
    fn protected_target(&self, p: &Prepared, call: &Call) -> Option<String> {
        if self.protected.is_empty() {
            return None;
        }
        let fold = |s: &str| {
            if self.fold_paths {
                s.to_lowercase()
            } else {
                s.to_owned()
            }
        };
        let hit = |path: &str| {
            let path = fold(path);
            self.protected.iter().find(|pr| fold(&pr.path) == path)
        };
        let reason = |pr: &crate::compile::Protected, how: &str| {
            format!(
                "{how} `{}`, {}, which Warden protects from the governed agent: denied whatever the rules say",
                pr.path, pr.what
            )
        };
        if self.writing_tools.contains(&p.subject.tool)
            && let Value::Path { lexical, resolved } = &p.restrict
        {
            for path in std::iter::once(lexical).chain(resolved) {
                if let Some(pr) = hit(path) {
                    return Some(reason(pr, "it writes"));
                }
            }
        }
        if p.read_only || p.subject.tool != "bash" {
            return None;
        }
        let cwd = call.cwd.as_deref().unwrap_or(&self.env.project_root);
        let mut words: Vec<&str> = Vec::new();
        for reading in std::iter::once(&p.restrict).chain(&p.also) {
            match reading {
                Value::Shell { normalized, .. } => {
                    words.extend(normalized.iter().skip(1).map(String::as_str));
                }
                Value::Text(text) => words.extend(text.split_whitespace().skip(1)),
                _ => {}
            }
        }
        // Only a word whose last component is a protected file's name can resolve to it: the
        // rest are skipped before any path is built.
        let named = |text: &str| {
            let last = fold(
                text.trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .unwrap_or(text),
            );
            self.protected
                .iter()
                .any(|pr| fold(pr.path.rsplit('/').next().unwrap_or(&pr.path)) == last)
        };
        for word in words {
            let operand = word.split_once('=').map_or(word, |(_, v)| v);
            for text in [word, operand] {
                if text.is_empty() || !named(text) {
                    continue;
                }
                let json = serde_json::Value::String(text.to_owned());
                let value = Value::prepare(
                    crate::matcher::MatcherKind::Path,
                    Some(&json),
                    cwd,
                    &self.env,
                    None,
                );
                if let Value::Path { lexical, .. } = &value
                    && let Some(pr) = hit(lexical)
                {
                    return Some(reason(pr, "it names"));
                }
            }
        }
        None
    }

    /// What applies to a subject of `tool` that no rule decided: the preset's answer for its
    /// class, else the default.
    fn fallback(&self, tool: &str, read_only: bool) -> (Decision, Arc<str>) {
        let class = crate::preset::ToolClass::of(tool);
        match self
            .preset
            .and_then(|p| Some((p, p.class_decision(class, read_only)?)))
        {
            Some((preset, decision)) => {
                let what = match decision {
                    Decision::Allow => "allows",
                    Decision::Ask => "asks for",
                    Decision::Deny => "denies",
                };
                let class = match (class, read_only) {
                    (Some(crate::preset::ToolClass::Execute), true)
                        if preset == crate::preset::Preset::ReadOnly =>
                    {
                        "read-only commands"
                    }
                    (Some(crate::preset::ToolClass::Read), _) => "read tools",
                    (Some(crate::preset::ToolClass::Edit), _) => "edit tools",
                    (Some(crate::preset::ToolClass::Execute), _) => "command tools",
                    (None, _) => "every tool",
                };
                let reason = format!("no rule decides {tool}; the {preset} preset {what} {class}");
                (decision, reason.into())
            }
            None => (self.default, self.default_reason(tool)),
        }
    }

    fn fold(&self, call: &Call, split: Split) -> Verdict {
        let _span = tracing::debug_span!("decide", tool = %call.tool).entered();
        let prepared = match split {
            Split::Refused(why) => {
                return self.verdict_without_subjects(
                    Decision::Deny,
                    format!("{why}; denied whatever the default").into(),
                );
            }
            Split::Subjects(p) if p.is_empty() => {
                return self.verdict_without_subjects(
                    Decision::Deny,
                    Arc::from("the call splits into no subjects: denied"),
                );
            }
            Split::Subjects(p) => p,
        };
        let subjects: Vec<SubjectVerdict> = prepared
            .iter()
            .map(|p| self.decide_subject(p, call))
            .collect();
        // The call takes the strictest decision of its counted (non-neutral) subjects and
        // cites the first subject that has it.
        let deciding = subjects
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.neutral)
            .max_by(|(ia, a), (ib, b)| a.decision.cmp(&b.decision).then(ib.cmp(ia)))
            .map(|(i, _)| i);
        let verdict = match deciding {
            None => {
                // Only constraints, none of which restricted: the call's own tool takes the
                // default.
                let (decision, reason) = self.fallback(&call.tool, false);
                let (decision, reason) = self
                    .mode_cap(&call.tool, false, call, decision)
                    .unwrap_or((decision, reason));
                self.unruled(decision, reason, subjects, call.confined.clone())
            }
            Some(i) => {
                let d = &subjects[i];
                let decision = d.decision;
                let reason = if decision == Decision::Deny && subjects.len() > 1 {
                    let others: Vec<String> = subjects
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != i)
                        .map(|(_, s)| format!("\"{}\"", s.text))
                        .collect();
                    format!(
                        "{} on \"{}\"; nothing in this command ran, including {}",
                        d.reason,
                        d.text,
                        join_and(&others)
                    )
                    .into()
                } else {
                    d.reason.clone()
                };
                let (rule, source) = (d.rule.clone(), d.source.clone());
                let subject = (subjects.len() > 1).then(|| d.text.clone());
                Verdict {
                    rule,
                    source,
                    subject,
                    ..self.unruled(decision, reason, subjects, call.confined.clone())
                }
            }
        };
        tracing::debug!(decision = %verdict.decision, rule = ?verdict.rule, "decided");
        verdict
    }

    fn verdict_without_subjects(&self, decision: Decision, reason: Arc<str>) -> Verdict {
        self.unruled(decision, reason, Vec::new(), None)
    }

    /// A verdict under this snapshot that cites no rule and no subject.
    fn unruled(
        &self,
        decision: Decision,
        reason: Arc<str>,
        subjects: Vec<SubjectVerdict>,
        confined: Option<String>,
    ) -> Verdict {
        Verdict {
            decision,
            rule: None,
            source: None,
            reason,
            subject: None,
            subjects,
            policy_digest: self.digest.clone(),
            confined,
        }
    }
}

fn slot(list: ListKind) -> usize {
    match list {
        ListKind::Deny => 0,
        ListKind::Ask => 1,
        ListKind::Allow => 2,
    }
}

impl PolicySnapshot {
    /// Why the default decided a call of `tool`.
    fn default_reason(&self, tool: &str) -> Arc<str> {
        match self.default_reasons.get(tool) {
            Some(reason) => reason.clone(),
            None => crate::compile::default_reason(self.default, tool),
        }
    }
}

fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// Receives every verdict an [`Engine`] reaches, exactly once: the verdict journal.
pub trait VerdictObserver: Send + Sync {
    /// One decision: the call, its verdict, and the cited rule's source (with path and hash).
    fn observe(&self, call: &Call, verdict: &Verdict, source: Option<&crate::compile::SourceInfo>);

    /// One grant: what it granted, refused and changed. Journaled like a verdict, exactly once.
    fn granted(&self, _report: &crate::grant::GrantReport) {}
}

/// A snapshot with observers: every decision reaches each observer exactly once.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use warden_policy::*;
/// struct Journal(Mutex<Vec<String>>);
/// impl VerdictObserver for Journal {
///     fn observe(&self, _: &Call, v: &Verdict, _: Option<&SourceInfo>) {
///         self.0.lock().unwrap().push(v.reason.to_string());
///     }
/// }
/// let snapshot = PolicyBuilder::new().default(Decision::Deny).build().unwrap();
/// let journal = Arc::new(Journal(Mutex::new(Vec::new())));
/// let engine = Engine::new(Arc::new(snapshot)).with_observer(journal.clone());
/// engine.decide(&Call::new("read", serde_json::json!({"path": "/x"})));
/// assert_eq!(journal.0.lock().unwrap().len(), 1);
/// ```
#[derive(Clone)]
pub struct Engine {
    snapshot: Arc<PolicySnapshot>,
    observers: Vec<Arc<dyn VerdictObserver>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("policy", &self.snapshot.id())
            .field("digest", self.snapshot.digest())
            .field("observers", &self.observers.len())
            .finish()
    }
}

impl Engine {
    /// An engine over a snapshot, with no observers.
    pub fn new(snapshot: Arc<PolicySnapshot>) -> Self {
        Self {
            snapshot,
            observers: Vec::new(),
        }
    }

    /// The same engine with one more observer.
    pub fn with_observer(mut self, observer: Arc<dyn VerdictObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    /// The snapshot.
    pub fn snapshot(&self) -> &Arc<PolicySnapshot> {
        &self.snapshot
    }

    /// Decides a call and journals the verdict.
    pub fn decide(&self, call: &Call) -> Verdict {
        let verdict = self.snapshot.decide(call);
        self.journal(call, &verdict);
        verdict
    }

    /// Decides a call on caller-split subjects and journals the verdict.
    pub fn decide_subjects(&self, call: &Call, subjects: Result<Vec<Subject>, String>) -> Verdict {
        let verdict = self.snapshot.decide_subjects(call, subjects);
        self.journal(call, &verdict);
        verdict
    }

    /// Grants a set of rules ([`PolicySnapshot::grant`]): the engine decides with the changed
    /// policy from now on, and every observer receives the report.
    pub fn grant(
        &mut self,
        set: &crate::grant::GrantSet,
    ) -> Result<crate::grant::GrantReport, crate::PolicyError> {
        let (snapshot, report) = self.snapshot.grant(set)?;
        self.snapshot = Arc::new(snapshot);
        for o in &self.observers {
            o.granted(&report);
        }
        Ok(report)
    }

    /// Answers the prompt behind `verdict` with "always allow" ([`PolicySnapshot::grant_over`]);
    /// a refusal is journaled too, and changes nothing.
    pub fn grant_over(
        &mut self,
        verdict: &Verdict,
        rule: &crate::Rule,
        source: &crate::Source,
    ) -> Result<crate::grant::GrantReport, crate::grant::GrantRefusal> {
        match self.snapshot.grant_over(verdict, rule, source) {
            Ok((snapshot, report)) => {
                self.snapshot = Arc::new(snapshot);
                for o in &self.observers {
                    o.granted(&report);
                }
                Ok(report)
            }
            Err(refusal) => {
                let report = crate::grant::GrantReport {
                    source: source.name.clone(),
                    granted: Vec::new(),
                    refused: vec![refusal.clone()],
                    changes: Vec::new(),
                };
                for o in &self.observers {
                    o.granted(&report);
                }
                Err(refusal)
            }
        }
    }

    fn journal(&self, call: &Call, verdict: &Verdict) {
        let source = verdict
            .source
            .as_deref()
            .and_then(|name| self.snapshot.sources().iter().find(|s| s.name == name));
        for o in &self.observers {
            o.observe(call, verdict, source);
        }
    }
}
