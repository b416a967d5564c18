//! The model-facing authorization boundary (`<authorization_boundary>`,
//! docs/design/policy.md#prompt-directives-and-the-authorization-boundary), computed from the
//! compiled rules: allowed reads, allowed writes, external actions, protected targets, required
//! approvals, and what applies to calls no rule decides.
//!
//! It is read off the snapshot the engine decides with, never off the prompt directives, so a
//! prompt built from it never claims more than is enforced:
//!
//! - an untrusted source's withheld allow rules are not in the snapshot's rules, so they are
//!   never listed;
//! - an allow rule is listed with every deny and ask rule of its tool as an exception (the
//!   engine checks those first; whether their patterns overlap is not guessed, since a symlink
//!   or a shell wrapper can make patterns that look disjoint meet), and with every allow-list
//!   carve-out that reaches it;
//! - an allow rule that a bare deny or ask rule of its tool (or a tool-name glob) always beats,
//!   with no carve-out reaching it, is not listed at all;
//! - a deny or ask rule is listed with the carve-outs that cancel it;
//! - what the hint rules, the preset or the default answer for calls no rule decides is stated
//!   per class of tool, and when that answer is allow, the class is listed as allowed, with its
//!   exceptions;
//! - operating modes only narrow: a grant a mode caps for its tool is not listed (a `bash`
//!   grant a mode caps only outside read-only commands is listed with that exception), and the
//!   caps are stated per class;
//! - programmable permissions are named with their kind (a deny or decide kind may take back
//!   what the grants claim).
//!
//! ```
//! use warden_policy::{Format, LoadedPolicy, PathEnv, PolicySnapshot};
//! let text = r#"
//! default = "deny"
//! allow = ["read", "edit(src/**)"]
//! deny = ["read(.env:*)"]
//! ask = ["bash(git push:*)"]
//! "#;
//! let file = LoadedPolicy::from_text(text.into(), Format::Toml, "p.toml", "project", None)?;
//! let env = PathEnv { project_root: "/repo".into(), home: None };
//! let boundary = PolicySnapshot::from_files(&[file], env)?.describe();
//! let md = boundary.to_markdown();
//! assert!(md.contains("- `read(.env:*)`: `read` calls on paths matching `.env:*` are denied"));
//! assert!(md.contains("- `bash(git push:*)`: `bash` commands matching `git push:*` need approval"));
//! assert!(md.contains("- `edit(src/**)`: `edit` calls on paths matching `src/**`"));
//! assert!(md.contains("Calls that no rule decides are denied (the default)."));
//! # Ok::<(), warden_policy::PolicyError>(())
//! ```

use std::fmt;

use serde::Serialize;
use warden_contracts::PolicySnapshotRef;

use crate::compile::{CompiledRule, PolicySnapshot};
use crate::decl::{Decision, ListKind};
use crate::hints::HintRules;
use crate::matcher::MatcherKind;
use crate::mode::Mode;
use crate::permission::{PermissionInfo, PermissionKind};
use crate::preset::ToolClass;

/// What a model may do under a policy, as the engine enforces it (the tool-policy guide's
/// authorization boundary). Made by [`PolicySnapshot::describe`];
/// [`AuthorizationBoundary::to_markdown`] renders it for a prompt, and it serializes as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuthorizationBoundary {
    /// The policy described.
    pub policy: PolicySnapshotRef,
    /// Where relative path patterns are anchored.
    pub project_root: String,
    /// What applies, per class of tool, to a call no rule decides.
    pub undecided: Vec<Fallback>,
    /// Allowed reads (`read`, `list`, `grep`, `glob`).
    pub reads: Vec<Grant>,
    /// Allowed writes (`edit`, `write`).
    pub writes: Vec<Grant>,
    /// Allowed commands and other tools (`bash`, `web_fetch`, MCP and product tools).
    pub external_actions: Vec<Grant>,
    /// Deny rules.
    pub protected_targets: Vec<Limit>,
    /// Ask rules.
    pub required_approvals: Vec<Limit>,
    /// Declared approver classes whose signed receipts can answer an approval.
    pub approvers: Vec<String>,
    /// The hint rules, which decide calls no rule decides, before the preset and the default.
    pub hint_rules: HintRules,
    /// Programmable permissions, in registration order: code that may deny (deny and decide
    /// kinds) what the grants above claim, or allow (allow and decide kinds) more.
    pub permissions: Vec<PermissionInfo>,
    /// The operating modes in force.
    pub modes: Vec<Mode>,
    /// Per class of call, the strictest cap the modes put on it (`decision` `deny`, or `ask`
    /// answered only by an approval receipt; `by` is `mode:NAME`); classes they leave to the
    /// policy are not listed.
    pub mode_caps: Vec<Fallback>,
}

/// A class of tool calls, as the default and presets see them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallClass {
    /// `read`, `list`, `grep`, `glob`.
    Reads,
    /// `edit`, `write`.
    Writes,
    /// `bash` commands.
    Commands,
    /// `bash` commands the shell splitter classifies as read-only (listed only when they are
    /// answered differently from other commands).
    ReadOnlyCommands,
    /// `web_fetch` (listed only when it is answered differently from other tools: hint rules
    /// see it as read-only and open-world).
    Fetches,
    /// Every other tool.
    OtherTools,
    /// Tools of the MCP servers whose declared hints hint rules believe (`trust_mcp`); listed
    /// only as a grant, when a hint rule allows.
    TrustedMcpTools,
}

impl CallClass {
    /// The built-in tools of the class (those `ToolClass::of` classifies); none for
    /// `OtherTools`.
    fn tools(self) -> &'static [&'static str] {
        match self {
            CallClass::Reads => &["read", "list", "grep", "glob"],
            CallClass::Writes => &["edit", "write"],
            CallClass::Commands | CallClass::ReadOnlyCommands => &["bash"],
            CallClass::Fetches => &["web_fetch"],
            CallClass::OtherTools | CallClass::TrustedMcpTools => &[],
        }
    }

    fn tool_class(self) -> (Option<ToolClass>, bool) {
        match self {
            CallClass::Reads => (Some(ToolClass::Read), false),
            CallClass::Writes => (Some(ToolClass::Edit), false),
            CallClass::Commands => (Some(ToolClass::Execute), false),
            CallClass::ReadOnlyCommands => (Some(ToolClass::Execute), true),
            CallClass::Fetches | CallClass::OtherTools | CallClass::TrustedMcpTools => {
                (None, false)
            }
        }
    }

    /// The tool whose hints stand for the class (`None`: the cautious defaults).
    fn sample_tool(self) -> Option<&'static str> {
        match self {
            CallClass::Reads => Some("read"),
            CallClass::Writes => Some("edit"),
            CallClass::Fetches => Some("web_fetch"),
            CallClass::Commands | CallClass::ReadOnlyCommands => Some("bash"),
            CallClass::OtherTools | CallClass::TrustedMcpTools => None,
        }
    }

    fn phrase(self) -> &'static str {
        match self {
            CallClass::Reads => "reads (`read`, `list`, `grep`, `glob`)",
            CallClass::Writes => "writes (`edit`, `write`)",
            CallClass::Commands => "commands (`bash`)",
            CallClass::ReadOnlyCommands => "read-only commands (`bash`)",
            CallClass::Fetches => "fetches (`web_fetch`)",
            CallClass::OtherTools => "every other tool",
            CallClass::TrustedMcpTools => "tools of trusted MCP servers",
        }
    }
}

/// What applies to a call of one class that no rule decides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fallback {
    /// The class of call.
    pub class: CallClass,
    /// The decision.
    pub decision: Decision,
    /// What decides: a hint rule (`hint:read-only`, `hint:destructive`, `hint:open-world`), the
    /// preset's source name (`preset:suggest`) or `default`, in the engine's order.
    pub by: String,
}

/// One rule, as the boundary cites it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleRef {
    /// The rule as verdicts cite it (alias-expanded: `write(/etc/**)`).
    pub rule: String,
    /// Its tool, or a glob over tool names.
    pub tool: String,
    /// Its pattern (the specifier without a carve-out's `!`); `None` for a bare rule.
    pub pattern: Option<String>,
    /// The matcher reading the pattern.
    pub matcher: Option<MatcherKind>,
    /// The argument the matcher reads.
    pub field: Option<String>,
    /// Its source's name.
    pub source: String,
    /// Its note (trusted sources only).
    pub note: Option<String>,
}

/// A deny rule (a protected target) or an ask rule (a required approval).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Limit {
    /// The rule.
    #[serde(flatten)]
    pub rule: RuleRef,
    /// The carve-outs that cancel it where they match (`read(!.env.example)`).
    pub carved_out: Vec<String>,
    /// A bare ask rule (or a tool-name glob): a call that runs confined (containment the backend
    /// proves) is allowed instead of asked about.
    pub confined_allows: bool,
    /// An ask rule whose calls an operating mode denies anyway (`mode:NAME`); for `bash`, all
    /// but read-only commands when `read_only_excepted`.
    pub denied_by_mode: Option<String>,
    /// With `denied_by_mode` on a `bash` rule: read-only commands are not denied by the mode.
    pub read_only_excepted: bool,
}

/// What a grant covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GrantScope {
    /// The calls an allow rule matches.
    Rule(RuleRef),
    /// The calls of a class that no rule decides, which the default or a preset allows.
    Undecided {
        /// The class.
        class: CallClass,
        /// Its tools that no bare deny or ask rule takes away (empty for `other_tools`; the
        /// trusted servers' `server__*` for `trusted_mcp_tools`).
        tools: Vec<String>,
        /// As [`Fallback::by`]; `hints` for `trusted_mcp_tools`.
        by: String,
    },
}

/// Something the model may do, and where it may not after all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    /// What is allowed.
    pub scope: GrantScope,
    /// Rules that take precedence where they match.
    pub exceptions: Vec<GrantOverride>,
}

/// How an exception takes a grant back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// A deny rule: the call is denied.
    Denied,
    /// An ask rule: the call needs approval.
    NeedsApproval,
    /// An allow-list carve-out: the allow rule does not cover the call.
    NotCovered,
    /// An operating mode (`rule` is `mode:NAME`) denies the grant's commands that are not
    /// read-only.
    ModeDenies,
    /// An operating mode (`rule` is `mode:NAME`) holds the grant's commands that are not
    /// read-only for an approval receipt.
    ModeNeedsReceipt,
}

/// A rule that takes precedence over a grant where it matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrantOverride {
    /// What it does.
    pub effect: Effect,
    /// The rule, as cited.
    pub rule: String,
    /// Carve-outs that cancel it (for the grant's tools).
    pub carved_out: Vec<String>,
}

/// What the operating modes leave of a tool's allowed calls.
#[derive(Clone, Copy)]
enum ToolCap {
    /// The policy decides.
    Open,
    /// Every call is capped at this decision by this mode.
    Capped(Decision, Mode),
    /// `bash`: read-only commands are left to the policy, the others capped.
    ReadOnlyOnly(Decision, Mode),
}

/// A set of tools a grant is about.
#[derive(Clone, Copy)]
enum Tools<'a> {
    One(&'a str),
    Class(&'a [&'a str]),
    /// Any tool outside the built-in classes.
    Other,
    /// Any tool at all.
    Any,
    /// Tools of these MCP servers (`server__…`).
    Servers(&'a [String]),
}

impl Tools<'_> {
    fn covers(self, tool: &str) -> bool {
        match self {
            Tools::One(t) => t == tool,
            Tools::Class(ts) => ts.contains(&tool),
            Tools::Other => ToolClass::of(tool).is_none(),
            Tools::Any => true,
            Tools::Servers(servers) => tool
                .split_once("__")
                .is_some_and(|(server, _)| servers.iter().any(|s| s == server)),
        }
    }

    /// Whether `rule` can apply to a call of one of these tools.
    fn meets(self, rule: &CompiledRule) -> bool {
        match (&rule.tool_glob, self) {
            (Some(g), Tools::One(t)) => g.matches(t),
            (Some(g), Tools::Class(ts)) => ts.iter().any(|t| g.matches(t)),
            (Some(_), Tools::Other | Tools::Any | Tools::Servers(_)) => true,
            (None, _) => self.covers(rule.rule.tool()),
        }
    }
}

impl PolicySnapshot {
    /// The authorization boundary this snapshot enforces, for a model's prompt
    /// (docs/directives.md). Computed from the compiled rules, the hint rules, the preset, the
    /// default, the operating modes and the registered permissions; never from directives. A
    /// subagent scope is narrowed further by its ancestors, which this snapshot alone does not
    /// show.
    pub fn describe(&self) -> AuthorizationBoundary {
        let undecided = self.undecided();
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        let mut external = Vec::new();
        for r in self
            .rules
            .iter()
            .filter(|r| r.list == ListKind::Allow && !r.carve_out)
        {
            let tool = r.rule.tool();
            if self.always_restricted(tool) {
                continue;
            }
            let Some(mut exceptions) = self.mode_exceptions(self.tool_cap(tool)) else {
                continue;
            };
            exceptions.extend(self.exceptions(Tools::One(tool)));
            exceptions.extend(
                self.carve_outs(r, Tools::One(tool))
                    .into_iter()
                    .map(|rule| GrantOverride {
                        effect: Effect::NotCovered,
                        rule,
                        carved_out: Vec::new(),
                    }),
            );
            let grant = Grant {
                scope: GrantScope::Rule(self.rule_ref(r)),
                exceptions,
            };
            match ToolClass::of(tool) {
                Some(ToolClass::Read) => reads.push(grant),
                Some(ToolClass::Edit) => writes.push(grant),
                _ => external.push(grant),
            }
        }
        if let Some(grant) = self.trusted_mcp_grant() {
            external.push(grant);
        }
        for f in undecided.iter().filter(|f| f.decision == Decision::Allow) {
            let Some(grant) = self.undecided_grant(f) else {
                continue;
            };
            match f.class {
                CallClass::Reads => reads.push(grant),
                CallClass::Writes => writes.push(grant),
                _ => external.push(grant),
            }
        }
        let limits = |list: ListKind| -> Vec<Limit> {
            self.rules
                .iter()
                .filter(|r| r.list == list && !r.carve_out)
                .map(|r| {
                    let cap = match (r.list, &r.tool_glob) {
                        (ListKind::Ask, None) => self.tool_cap(r.rule.tool()),
                        _ => ToolCap::Open,
                    };
                    let (denied_by_mode, read_only_excepted) = match cap {
                        ToolCap::Capped(Decision::Deny, m) => (Some(format!("mode:{m}")), false),
                        ToolCap::ReadOnlyOnly(Decision::Deny, m) => {
                            (Some(format!("mode:{m}")), true)
                        }
                        _ => (None, false),
                    };
                    Limit {
                        rule: self.rule_ref(r),
                        carved_out: self.carve_outs_any(r),
                        confined_allows: r.list == ListKind::Ask && r.pattern.is_none(),
                        denied_by_mode,
                        read_only_excepted,
                    }
                })
                .collect()
        };
        AuthorizationBoundary {
            policy: self.reference(),
            project_root: self.env.project_root.display().to_string(),
            undecided,
            reads,
            writes,
            external_actions: external,
            protected_targets: limits(ListKind::Deny),
            required_approvals: limits(ListKind::Ask),
            approvers: self.approvers.names().map(str::to_owned).collect(),
            hint_rules: self.hints.clone(),
            permissions: self.permissions.clone(),
            modes: self.modes.clone(),
            mode_caps: self.mode_caps(),
        }
    }

    /// The strictest cap the active modes put on a subject of `tool` (`None`: not a built-in
    /// tool, the cautious hints), if any is stricter than allow, and the mode.
    fn mode_ceiling(&self, tool: Option<&str>, read_only: bool) -> Option<(Decision, Mode)> {
        let hints = match tool {
            Some(t) => self.hints.believed(t, read_only, None),
            None => crate::hints::cautious(),
        };
        let class = tool.and_then(ToolClass::of);
        self.modes
            .iter()
            .map(|m| (Mode::ceiling(m.cap(class, &hints)), *m))
            .max_by_key(|(ceiling, _)| *ceiling)
            .filter(|(ceiling, _)| *ceiling > Decision::Allow)
    }

    /// What the modes leave of `tool`'s calls. A tool outside the built-ins is capped as its
    /// cautious hints are (a trusted MCP tool declaring itself read-only may get more).
    fn tool_cap(&self, tool: &str) -> ToolCap {
        let known = crate::hints::builtin(tool).is_some() || tool == "bash";
        let tool = known.then_some(tool);
        match self.mode_ceiling(tool, false) {
            None => ToolCap::Open,
            Some((d, m)) if tool == Some("bash") && self.mode_ceiling(tool, true).is_none() => {
                ToolCap::ReadOnlyOnly(d, m)
            }
            Some((d, m)) => ToolCap::Capped(d, m),
        }
    }

    /// A grant's exceptions for a cap; `None` when the cap takes the whole grant away.
    fn mode_exceptions(&self, cap: ToolCap) -> Option<Vec<GrantOverride>> {
        match cap {
            ToolCap::Open => Some(Vec::new()),
            ToolCap::Capped(..) => None,
            ToolCap::ReadOnlyOnly(d, m) => Some(vec![GrantOverride {
                effect: if d == Decision::Deny {
                    Effect::ModeDenies
                } else {
                    Effect::ModeNeedsReceipt
                },
                rule: format!("mode:{m}"),
                carved_out: Vec::new(),
            }]),
        }
    }

    /// Per class, the strictest cap the modes put on it.
    fn mode_caps(&self) -> Vec<Fallback> {
        [
            CallClass::Reads,
            CallClass::Writes,
            CallClass::ReadOnlyCommands,
            CallClass::Commands,
            CallClass::Fetches,
            CallClass::OtherTools,
        ]
        .into_iter()
        .filter_map(|class| {
            let read_only = class == CallClass::ReadOnlyCommands;
            let (decision, mode) = self.mode_ceiling(class.sample_tool(), read_only)?;
            Some(Fallback {
                class,
                decision,
                by: format!("mode:{mode}"),
            })
        })
        .collect()
    }

    /// What the preset or the default answers for each class of call no rule decides.
    fn undecided(&self) -> Vec<Fallback> {
        let answer = |class: CallClass| {
            let (tool_class, read_only) = class.tool_class();
            let hints = match class.sample_tool() {
                Some(tool) => self.hints.believed(tool, read_only, None),
                None => crate::hints::cautious(),
            };
            if let Some((decision, name)) = self.hints.decide(&hints) {
                return Fallback {
                    class,
                    decision,
                    by: format!("hint:{name}"),
                };
            }
            let (decision, by) = match self
                .preset
                .and_then(|p| Some((p, p.class_decision(tool_class, read_only)?)))
            {
                Some((p, d)) => (d, p.source_name()),
                None => (self.default, "default".to_owned()),
            };
            Fallback {
                class,
                decision,
                by,
            }
        };
        let commands = answer(CallClass::Commands);
        let read_only = answer(CallClass::ReadOnlyCommands);
        let mut out = vec![answer(CallClass::Reads), answer(CallClass::Writes)];
        if read_only.decision != commands.decision {
            out.push(read_only);
        }
        out.push(commands);
        let fetches = answer(CallClass::Fetches);
        let other = answer(CallClass::OtherTools);
        if (fetches.decision, &fetches.by) != (other.decision, &other.by) {
            out.push(fetches);
        }
        out.push(other);
        out
    }

    /// The grant of a class the fallback allows, without the tools a bare deny or ask rule
    /// always takes; `None` when nothing is left.
    fn undecided_grant(&self, f: &Fallback) -> Option<Grant> {
        let cap = match f.class {
            CallClass::Commands => self.tool_cap("bash"),
            class => {
                match self.mode_ceiling(class.sample_tool(), class == CallClass::ReadOnlyCommands) {
                    Some((d, m)) => ToolCap::Capped(d, m),
                    None => ToolCap::Open,
                }
            }
        };
        let mut exceptions = self.mode_exceptions(cap)?;
        let tools: Vec<&str> = f
            .class
            .tools()
            .iter()
            .copied()
            .filter(|t| !self.always_restricted(t))
            .collect();
        let set = match f.class {
            CallClass::OtherTools => {
                if self.other_tools_always_restricted() {
                    return None;
                }
                Tools::Other
            }
            _ if tools.is_empty() => return None,
            _ => Tools::Class(&tools),
        };
        exceptions.extend(self.exceptions(set));
        Some(Grant {
            exceptions,
            scope: GrantScope::Undecided {
                class: f.class,
                tools: tools.iter().map(|t| (*t).to_owned()).collect(),
                by: f.by.clone(),
            },
        })
    }

    /// The grant of the trusted MCP servers' tools when a hint rule allows what a tool may
    /// declare of itself (its exceptions: the deny and ask rules that can apply to them).
    fn trusted_mcp_grant(&self) -> Option<Grant> {
        let allows = [
            self.hints.read_only,
            self.hints.destructive,
            self.hints.open_world,
        ]
        .contains(&Some(Decision::Allow));
        if !allows || self.hints.trust_mcp.is_empty() || self.mode_ceiling(None, false).is_some() {
            return None;
        }
        Some(Grant {
            exceptions: self.exceptions(Tools::Servers(&self.hints.trust_mcp)),
            scope: GrantScope::Undecided {
                class: CallClass::TrustedMcpTools,
                tools: self
                    .hints
                    .trust_mcp
                    .iter()
                    .map(|s| format!("{s}__*"))
                    .collect(),
                by: "hints".to_owned(),
            },
        })
    }

    /// Every deny and ask rule that can apply to a call of these tools, with its carve-outs.
    fn exceptions(&self, tools: Tools<'_>) -> Vec<GrantOverride> {
        self.rules
            .iter()
            .filter(|r| r.list != ListKind::Allow && !r.carve_out && tools.meets(r))
            .map(|r| GrantOverride {
                effect: match r.list {
                    ListKind::Deny => Effect::Denied,
                    _ => Effect::NeedsApproval,
                },
                rule: r.cited.to_string(),
                carved_out: self.carve_outs(r, tools),
            })
            .collect()
    }

    /// Whether a bare deny or ask rule (or tool-name glob) that no carve-out of `tool`
    /// reaches decides every call of `tool` before any allow rule.
    fn always_restricted(&self, tool: &str) -> bool {
        self.rules.iter().any(|r| {
            r.list != ListKind::Allow
                && !r.carve_out
                && r.pattern.is_none()
                && Tools::One(tool).meets(r)
                && self.carve_outs(r, Tools::One(tool)).is_empty()
        })
    }

    /// Whether a deny or ask rule `*` (a glob matching every name) that no carve-out of an
    /// unclassified tool reaches decides every other tool's calls.
    fn other_tools_always_restricted(&self) -> bool {
        self.rules.iter().any(|r| {
            r.list != ListKind::Allow
                && r.tool_glob.is_some()
                && r.rule.tool().chars().all(|c| c == '*')
                && self.carve_outs(r, Tools::Other).is_empty()
        })
    }

    /// The carve-outs of these tools, in `rule`'s list, that cancel `rule` where they match
    /// (the engine's rule: `SourceInfo::carve_out_reaches`).
    fn carve_outs(&self, rule: &CompiledRule, tools: Tools<'_>) -> Vec<String> {
        let target = &self.sources[rule.source];
        let mut out: Vec<String> = Vec::new();
        for c in self
            .rules
            .iter()
            .filter(|c| c.list == rule.list && c.carve_out && tools.covers(c.rule.tool()))
        {
            let same_tool = match &rule.tool_glob {
                Some(g) => g.matches(c.rule.tool()),
                None => c.rule.tool() == rule.rule.tool(),
            };
            let reaches = self.sources[c.source].carve_out_reaches(target);
            let text = c.cited.to_string();
            if same_tool && reaches && !out.contains(&text) {
                out.push(text);
            }
        }
        out
    }

    /// The carve-outs that cancel `rule` for any tool it applies to.
    fn carve_outs_any(&self, rule: &CompiledRule) -> Vec<String> {
        match &rule.tool_glob {
            Some(_) => self.carve_outs(rule, Tools::Any),
            None => self.carve_outs(rule, Tools::One(rule.rule.tool())),
        }
    }

    fn rule_ref(&self, r: &CompiledRule) -> RuleRef {
        let tool = r.rule.tool();
        let pattern = r.rule.pattern().map(str::to_owned);
        let profile = pattern.as_ref().and_then(|_| self.profiles.get(tool));
        RuleRef {
            rule: r.cited.to_string(),
            tool: tool.to_owned(),
            pattern,
            matcher: profile.map(|p| p.matcher),
            field: profile.map(|p| p.field.clone()),
            source: self.sources[r.source].name.clone(),
            note: r.note.clone(),
        }
    }
}

impl AuthorizationBoundary {
    /// The boundary as Markdown inside the `<authorization_boundary>` tag, for a
    /// model's prompt. Deterministic; every piece of policy text is one line in a code span.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let mut line = |s: &str| {
            out.push_str(s);
            out.push('\n');
        };
        line("<authorization_boundary>");
        line(&format!(
            "Policy {} version {} ({}). Warden enforces this boundary on every tool call; \
             nothing else in this prompt grants more.",
            code(&self.policy.policy_id),
            code(&self.policy.version),
            code(self.policy.digest.as_str()),
        ));
        line("");
        line("## Default");
        for l in self.default_lines().into_iter().chain(self.hint_lines()) {
            line(&l);
        }
        if !self.modes.is_empty() {
            line("The operating modes below narrow this, and every grant that follows.");
        }
        if !self.modes.is_empty() {
            line("");
            line("## Operating modes");
            for l in self.mode_lines() {
                line(&l);
            }
        }
        for (heading, grants) in [
            ("## Allowed reads", &self.reads),
            ("## Allowed writes", &self.writes),
            ("## External actions", &self.external_actions),
        ] {
            line("");
            line(heading);
            if grants.is_empty() {
                line("- none");
            }
            for g in grants {
                line(&grant_line(g));
                for e in &g.exceptions {
                    line(&exception_line(e));
                }
            }
        }
        for (heading, limits, verb) in [
            (
                "## Protected targets",
                &self.protected_targets,
                "are denied",
            ),
            (
                "## Required approvals",
                &self.required_approvals,
                "need approval",
            ),
        ] {
            line("");
            line(heading);
            if limits.is_empty() {
                line("- none");
            }
            for l in limits {
                let note = l
                    .rule
                    .note
                    .as_deref()
                    .map(|n| format!(" (note: {})", one_line(n)))
                    .unwrap_or_default();
                let mode = match (&l.denied_by_mode, l.read_only_excepted) {
                    (Some(m), false) => format!(" ({} denies them anyway)", by_phrase(m)),
                    (Some(m), true) => format!(
                        " ({} denies them anyway, read-only commands excepted)",
                        by_phrase(m)
                    ),
                    (None, _) => String::new(),
                };
                let confined = if l.confined_allows {
                    ", unless the call runs confined (containment the backend proves), which \
                     allows it"
                } else {
                    ""
                };
                line(&format!(
                    "- {}: {} {verb}{confined}{mode}{note}",
                    code(&l.rule.rule),
                    subject(&l.rule)
                ));
                for c in &l.carved_out {
                    line(&format!("  - except where carved out by {}", code(c)));
                }
            }
        }
        if !self.approvers.is_empty() {
            let names: Vec<String> = self.approvers.iter().map(|a| code(a)).collect();
            line(&format!(
                "An approval can be a receipt signed by a declared approver ({}) for the exact \
                 call; a receipt never overrides a denial.",
                names.join(", ")
            ));
        }
        let permissions = self.permission_lines();
        if !permissions.is_empty() {
            line("");
            line("## Programmable permissions");
            for l in permissions {
                line(&l);
            }
        }
        line("");
        line("## How calls are decided");
        line(
            "- Deny rules first, then approval rules, then allow rules, then the Default \
             above: an exception always wins over the grant it qualifies.",
        );
        line(&format!(
            "- Relative path patterns are anchored at {}. A path is allowed only when both the \
             path as written and its symlink-resolved target match an allow rule; a deny or \
             approval rule matches either.",
            code(&self.project_root)
        ));
        line(
            "- A shell command is decided per simple command (in lists, pipelines, \
             substitutions, `bash -c` payloads) and per redirect target (a `write` or `read` of \
             that path); the strictest part decides the whole command.",
        );
        line(
            "- A command that cannot be parsed is denied, and one whose program cannot be known \
             statically is never allowed.",
        );
        line("</authorization_boundary>");
        out
    }

    fn default_lines(&self) -> Vec<String> {
        let by = by_phrase;
        let uniform = self
            .undecided
            .windows(2)
            .all(|w| w[0].decision == w[1].decision && w[0].by == w[1].by);
        match (uniform, self.undecided.first()) {
            (true, Some(f)) => vec![match f.decision {
                Decision::Allow => format!(
                    "Calls that no rule denies or holds for approval are allowed ({}), for \
                     every tool, including tools this policy does not name.",
                    by(&f.by)
                ),
                Decision::Ask => {
                    format!("Calls that no rule decides need approval ({}).", by(&f.by))
                }
                Decision::Deny => {
                    format!("Calls that no rule decides are denied ({}).", by(&f.by))
                }
            }],
            _ => {
                let mut lines = vec!["Calls that no rule decides:".to_owned()];
                lines.extend(self.undecided.iter().map(|f| {
                    format!(
                        "- {}: {} ({})",
                        f.class.phrase(),
                        decision_phrase(f.decision),
                        by(&f.by)
                    )
                }));
                lines
            }
        }
    }

    /// How hint rules read calls, when there are any.
    fn hint_lines(&self) -> Vec<String> {
        let h = &self.hint_rules;
        let rules: Vec<String> = [
            ("read-only", h.read_only),
            ("destructive", h.destructive),
            ("open-world", h.open_world),
        ]
        .into_iter()
        .filter_map(|(name, d)| Some(format!("{name} → {}", decision_phrase(d?))))
        .collect();
        if rules.is_empty() {
            return Vec::new();
        }
        let mut text = format!(
            "Hint rules decide a call no rule decides by what it does, before the preset and the \
             default: {} (the strictest that applies). `read`, `list`, `grep`, `glob` are \
             read-only, `edit` and `write` destructive, `web_fetch` read-only and open-world; a \
             `bash` command is read-only only when Warden classifies it so; any other tool \
             counts as destructive and open-world",
            rules.join(", ")
        );
        if h.trust_mcp.is_empty() {
            text.push('.');
        } else {
            let servers: Vec<String> = h.trust_mcp.iter().map(|s| code(s)).collect();
            text.push_str(&format!(
                ", except the tools of trusted MCP servers ({}), whose own hints are believed.",
                servers.join(", ")
            ));
        }
        vec![text]
    }

    fn mode_lines(&self) -> Vec<String> {
        let names: Vec<String> = self.modes.iter().map(|m| code(m.name())).collect();
        let mut lines = vec![format!(
            "Active: {}. Modes only narrow: whatever the rules and the default say,",
            names.join(", ")
        )];
        if self.mode_caps.is_empty() {
            lines.push("- they cap no class of call here.".to_owned());
        }
        let read_only_open = !self
            .mode_caps
            .iter()
            .any(|c| c.class == CallClass::ReadOnlyCommands);
        lines.extend(self.mode_caps.iter().map(|c| {
            let what = match c.decision {
                Decision::Deny => "denied".to_owned(),
                _ => "at most need approval, and only an approval receipt answers".to_owned(),
            };
            let class = match c.class {
                CallClass::Commands if read_only_open => {
                    "commands (`bash`) other than read-only ones"
                }
                class => class.phrase(),
            };
            format!("- {class}: {what} ({})", by_phrase(&c.by))
        }));
        lines
    }

    fn permission_lines(&self) -> Vec<String> {
        self.permissions
            .iter()
            .map(|p| {
                let what = match p.kind {
                    PermissionKind::Deny => {
                        "may deny any call no deny rule denies, calls allowed above included"
                    }
                    PermissionKind::Allow => "may allow calls no deny or ask rule decides",
                    PermissionKind::Decide => {
                        "may allow or deny calls no deny or ask rule decides, calls allowed \
                         above included"
                    }
                };
                format!(
                    "- {} version {} ({} kind): code that {what}",
                    code(&p.name),
                    code(&p.version),
                    p.kind.as_str()
                )
            })
            .collect()
    }
}

impl fmt::Display for AuthorizationBoundary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_markdown())
    }
}

/// Who answers calls no rule decides, in words.
fn by_phrase(by: &str) -> String {
    if let Some(preset) = by.strip_prefix("preset:") {
        return format!("the {} preset", code(preset));
    }
    if let Some(mode) = by.strip_prefix("mode:") {
        return format!("the {} mode", code(mode));
    }
    if let Some(hint) = by.strip_prefix("hint:") {
        return format!("the {hint} hint rule");
    }
    match by {
        "hints" => "the hint rules, when the tool declares hints they allow".to_owned(),
        _ => "the default".to_owned(),
    }
}

fn decision_phrase(d: Decision) -> &'static str {
    match d {
        Decision::Allow => "allowed",
        Decision::Ask => "need approval",
        Decision::Deny => "denied",
    }
}

/// What a rule's calls are, in words: "`read` calls on paths matching `.env:*`".
fn subject(r: &RuleRef) -> String {
    let tool = code(&r.tool);
    let Some(pattern) = r.pattern.as_deref() else {
        return if r.tool.contains('*') {
            format!("all calls of tools matching {tool}")
        } else {
            format!("all {tool} calls")
        };
    };
    let pattern = code(pattern);
    match r.matcher {
        Some(MatcherKind::Path) => format!("{tool} calls on paths matching {pattern}"),
        Some(MatcherKind::Shell) => format!("{tool} commands matching {pattern}"),
        Some(MatcherKind::Domain) => format!("{tool} calls to hosts matching {pattern}"),
        _ => format!(
            "{tool} calls whose {} matches {pattern}",
            code(r.field.as_deref().unwrap_or("argument"))
        ),
    }
}

fn grant_line(g: &Grant) -> String {
    match &g.scope {
        GrantScope::Rule(r) => {
            let note = r
                .note
                .as_deref()
                .map(|n| format!(" (note: {})", one_line(n)))
                .unwrap_or_default();
            format!("- {}: {}{note}", code(&r.rule), subject(r))
        }
        GrantScope::Undecided { class, tools, by } => {
            let by = by_phrase(by);
            let tools: Vec<String> = tools.iter().map(|t| code(t)).collect();
            let what = match class {
                CallClass::OtherTools => "any call of another tool".to_owned(),
                CallClass::TrustedMcpTools => format!(
                    "any call of a tool of a trusted MCP server ({})",
                    tools.join(", ")
                ),
                CallClass::Fetches => format!("any {} call", tools.join(", ")),
                CallClass::ReadOnlyCommands => {
                    format!("any read-only {} command", tools.join(", "))
                }
                CallClass::Commands => format!("any {} command", tools.join(", ")),
                CallClass::Reads | CallClass::Writes => {
                    format!("any {} call", tools.join(", "))
                }
            };
            format!("- {what} that no rule decides (allowed by {by})")
        }
    }
}

fn exception_line(e: &GrantOverride) -> String {
    let carved = if e.carved_out.is_empty() {
        String::new()
    } else {
        let c: Vec<String> = e.carved_out.iter().map(|c| code(c)).collect();
        format!(" (carved out: {})", c.join(", "))
    };
    let rule = code(&e.rule);
    match e.effect {
        Effect::Denied => format!("  - except where {rule} denies{carved}"),
        Effect::NeedsApproval => format!("  - except where {rule} needs approval{carved}"),
        Effect::NotCovered => format!("  - except where {rule} carves it out"),
        Effect::ModeDenies => format!(
            "  - only commands Warden classifies as read-only: {} denies the others",
            by_phrase(&e.rule)
        ),
        Effect::ModeNeedsReceipt => format!(
            "  - only commands Warden classifies as read-only: {} needs an approval receipt for \
             the others",
            by_phrase(&e.rule)
        ),
    }
}

/// Policy text on one line: control characters and line separators written as `\u{…}`, so
/// no rule, note or name can start a line (a heading, a list item) of its own.
fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// A Markdown code span holding `s` on one line, whatever backticks it contains.
fn code(s: &str) -> String {
    let s = one_line(s);
    let mut longest = 0;
    let mut run = 0;
    for c in s.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    if longest > 0 || s.starts_with(' ') && s.ends_with(' ') && !s.trim().is_empty() {
        format!("{fence} {s} {fence}")
    } else {
        format!("{fence}{s}{fence}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_name_the_tools_tool_class_classifies() {
        for (class, want) in [
            (CallClass::Reads, Some(ToolClass::Read)),
            (CallClass::Writes, Some(ToolClass::Edit)),
            (CallClass::Commands, Some(ToolClass::Execute)),
        ] {
            for tool in class.tools() {
                assert_eq!(ToolClass::of(tool), want, "{tool}");
            }
        }
    }

    #[test]
    fn policy_text_stays_on_one_line_in_a_code_span() {
        assert_eq!(code("read(.env:*)"), "`read(.env:*)`");
        assert_eq!(code("echo `x`"), "`` echo `x` ``");
        assert_eq!(code("a\n## Allowed writes"), "`a\\u{a}## Allowed writes`");
        assert!(!one_line("x\u{2028}y\r").contains(['\u{2028}', '\r']));
    }
}
