//! Warden against Cedar and Rego on the same generated policies (tooling, outside the runtime
//! layers: no runtime crate may depend on it).
//!
//! # The policies
//!
//! [`rules`] generates `n` rules as `crates/policy/benches/decide.rs` does: a quarter each of
//! shell, path, domain and tool-name rules, spread over deny, ask and allow (rule `i` is a
//! shell rule when `i % 4 == 0`, …; it is allowed when `i % 3 == 0`, denied when `i % 3 == 1`,
//! asked otherwise, a tool-name glob never allowed), plus `bash(git status:*)` and
//! `read(/repo/src/**)` allowed and `bash(rm:*)` and `read(/repo/.env)` denied. The default is
//! `ask`. Each rule is written three ways:
//!
//! | rule | Warden | Cedar (`context.arg`, `context.tool`) | Rego (`input.arg`, `input.tool`) |
//! |---|---|---|---|
//! | [`Matcher::Shell`] | `bash(tool4 sub4:*)` | `resource == Tool::"bash"` and `arg == "tool4 sub4" \|\| arg like "tool4 sub4 *"` | `input.tool == "bash"`, then `==` or `startswith(…, "tool4 sub4 ")` |
//! | [`Matcher::Beneath`] | `read(/data/d1/**)` | `resource == Tool::"read"` and `arg like "/data/d1/*"` | `startswith(input.arg, "/data/d1/")` |
//! | [`Matcher::Path`] | `read(/repo/.env)` | `arg == "/repo/.env" \|\| arg like "/repo/.env/*"` | `==` or `startswith(…, "/repo/.env/")` |
//! | [`Matcher::Subdomain`] | `web_fetch(domain:*.host2.example)` | `resource == Tool::"web_fetch"` and `arg like "*.host2.example"` (`arg` is the URL's host) | `endswith(input.arg, ".host2.example")` |
//! | [`Matcher::ToolPrefix`] | `mcp3__*` | `context.tool like "mcp3__*"` | `startswith(input.tool, "mcp3__")` |
//!
//! Every Warden rule is one Cedar `permit` whose `@list` annotation names its list; Cedar has
//! no *ask*, so the Cedar answer is the strictest list among the policies the diagnostics name
//! as determining (every satisfied `permit`: deny > ask > allow), else the default; no
//! `forbid` is used. Rego has one boolean rule per list and
//! `decision := "deny" if { deny } else := "ask" if { ask } else := "allow" if { allow }`,
//! `default decision := "ask"`. So the three engines answer the same question: which list's
//! rules match the call, strictest first, else the default.
//!
//! # What Cedar and Rego cannot express, and what the calls are restricted to
//!
//! Neither has Warden's shell splitting (compound commands, substitutions, redirects,
//! wrappers such as `sudo` or `env`, quoting, a program path reduced to its name), path
//! normalisation (`..`, `//`, `~`, relative paths against a working directory, symlinks) or
//! URL parsing (userinfo, IDNA, letter case, a trailing dot). So [`calls`] generates only
//! calls on which those readings are the identity: a command of plain lower-case words
//! separated by single spaces, a normalised absolute path, an `https://` URL with a
//! lower-case ASCII host, whose host the Cedar and Rego request builders cut out of the URL
//! (the one preparation they get; Warden parses the URL itself). Within that, the calls cover
//! every rule kind, matching (exactly, with more words, deeper paths, deeper subdomains) and
//! not matching (a longer word, a sibling folder, the bare domain, a near tool name).
//!
//! # Measuring
//!
//! `benches/compare.rs` decides a cycle of these calls with each engine at 10, 1,000 and
//! 10,000 rules; the `policy-compare` program writes the same policy as `warden.toml`,
//! `policy.cedar` and `policy.rego` with a calls file, and decides that file with Cedar or
//! Rego as a whole process, the peer of `warden check --calls` (`cargo xtask bench` runs
//! both and writes docs/benchmarks.md).
//!
//! **Invariant:** the three encodings of a generated policy answer every generated call alike
//! (the differential test, and `policy-compare agree` at every size), so a per-call figure
//! compares the same question.
//!
//! **Must never:** be a dependency of a runtime crate (it is tooling outside the layers, and
//! Cedar and Rego are never part of Warden); generate a call whose answer depends on what the
//! peers cannot express.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use cedar_policy::{
    Authorizer, Context, Entities, EntityId, EntityTypeName, EntityUid, PolicySet, Request,
    RestrictedExpression,
};
use serde_json::json;
pub use warden_policy::Decision;
use warden_policy::{Call, PathEnv, PolicyBuilder, PolicySnapshot, Rule, RuleSet, Source};

/// The policies' default: the answer when no rule matches.
pub const DEFAULT: Decision = Decision::Ask;

/// The rule sizes the comparison runs at.
pub const SIZES: [usize; 3] = [10, 1_000, 10_000];

/// What one generated rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Matcher {
    /// `bash(WORDS:*)`: the command is `WORDS`, or `WORDS`, a space and more.
    Shell(String),
    /// `read(DIR/**)`: a path beneath `DIR`.
    Beneath(String),
    /// `read(PATH)`: `PATH` or a path beneath it.
    Path(String),
    /// `web_fetch(domain:*.SUFFIX)`: a host ending in `.SUFFIX`.
    Subdomain(String),
    /// `PREFIX*`, a tool-name glob: a tool whose name starts with `PREFIX`.
    ToolPrefix(String),
}

/// One generated rule: its list and what it matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenRule {
    /// The list: deny, ask or allow.
    pub list: Decision,
    /// What it matches.
    pub matcher: Matcher,
}

/// The `n` rules of the benchmark policy, then the four fixed ones (module docs).
pub fn rules(n: usize) -> Vec<GenRule> {
    let mut out = Vec::with_capacity(n + 4);
    for i in 0..n {
        let matcher = match i % 4 {
            0 => Matcher::Shell(format!("tool{i} sub{i}")),
            1 => Matcher::Beneath(format!("/data/d{i}")),
            2 => Matcher::Subdomain(format!("host{i}.example")),
            _ => Matcher::ToolPrefix(format!("mcp{i}__")),
        };
        let list = match i % 3 {
            0 if !matches!(matcher, Matcher::ToolPrefix(_)) => Decision::Allow,
            1 => Decision::Deny,
            _ => Decision::Ask,
        };
        out.push(GenRule { list, matcher });
    }
    let fixed = [
        (Decision::Allow, Matcher::Shell("git status".into())),
        (Decision::Allow, Matcher::Beneath("/repo/src".into())),
        (Decision::Deny, Matcher::Shell("rm".into())),
        (Decision::Deny, Matcher::Path("/repo/.env".into())),
    ];
    out.extend(fixed.map(|(list, matcher)| GenRule { list, matcher }));
    out
}

impl GenRule {
    /// The rule in Warden's grammar.
    pub fn warden(&self) -> String {
        match &self.matcher {
            Matcher::Shell(words) => format!("bash({words}:*)"),
            Matcher::Beneath(dir) => format!("read({dir}/**)"),
            Matcher::Path(path) => format!("read({path})"),
            Matcher::Subdomain(suffix) => format!("web_fetch(domain:*.{suffix})"),
            Matcher::ToolPrefix(prefix) => format!("{prefix}*"),
        }
    }

    /// The rule as one Cedar `permit`, its list in the `@list` annotation.
    pub fn cedar(&self) -> String {
        let list = self.list.as_str();
        let (resource, condition) = match &self.matcher {
            Matcher::Shell(words) => (
                " == Tool::\"bash\"",
                format!("context.arg == \"{words}\" || context.arg like \"{words} *\""),
            ),
            Matcher::Beneath(dir) => (
                " == Tool::\"read\"",
                format!("context.arg like \"{dir}/*\""),
            ),
            Matcher::Path(path) => (
                " == Tool::\"read\"",
                format!("context.arg == \"{path}\" || context.arg like \"{path}/*\""),
            ),
            Matcher::Subdomain(suffix) => (
                " == Tool::\"web_fetch\"",
                format!("context.arg like \"*.{suffix}\""),
            ),
            Matcher::ToolPrefix(prefix) => ("", format!("context.tool like \"{prefix}*\"")),
        };
        format!(
            "@list(\"{list}\")\npermit (principal, action, resource{resource})\nwhen {{ {condition} }};\n"
        )
    }

    /// The rule as Rego bodies of its list's boolean rule.
    pub fn rego(&self) -> String {
        let list = self.list.as_str();
        match &self.matcher {
            Matcher::Shell(words) => format!(
                "{list} if {{ input.tool == \"bash\"; input.arg == \"{words}\" }}\n\
                 {list} if {{ input.tool == \"bash\"; startswith(input.arg, \"{words} \") }}\n"
            ),
            Matcher::Beneath(dir) => {
                format!(
                    "{list} if {{ input.tool == \"read\"; startswith(input.arg, \"{dir}/\") }}\n"
                )
            }
            Matcher::Path(path) => format!(
                "{list} if {{ input.tool == \"read\"; input.arg == \"{path}\" }}\n\
                 {list} if {{ input.tool == \"read\"; startswith(input.arg, \"{path}/\") }}\n"
            ),
            Matcher::Subdomain(suffix) => format!(
                "{list} if {{ input.tool == \"web_fetch\"; endswith(input.arg, \".{suffix}\") }}\n"
            ),
            Matcher::ToolPrefix(prefix) => {
                format!("{list} if startswith(input.tool, \"{prefix}\")\n")
            }
        }
    }
}

/// The rules as a Warden policy file (TOML), for `warden check --calls`.
pub fn warden_toml(rules: &[GenRule]) -> String {
    let list = |d: Decision| {
        let items: Vec<String> = rules
            .iter()
            .filter(|r| r.list == d)
            .map(|r| format!("\"{}\"", r.warden()))
            .collect();
        format!("{} = [{}]\n", d.as_str(), items.join(", "))
    };
    format!(
        "default = \"{}\"\n{}{}{}",
        DEFAULT.as_str(),
        list(Decision::Allow),
        list(Decision::Deny),
        list(Decision::Ask)
    )
}

/// The rules as a Cedar policy set.
pub fn cedar_text(rules: &[GenRule]) -> String {
    rules.iter().map(GenRule::cedar).collect()
}

/// The rules as a Rego module (package `warden`, the answer `data.warden.decision`).
pub fn rego_text(rules: &[GenRule]) -> String {
    let mut out = format!(
        "package warden\n\nimport rego.v1\n\ndefault decision := \"{}\"\n\n\
         decision := \"deny\" if {{ deny }} else := \"ask\" if {{ ask }} else := \"allow\" if {{ allow }}\n\n",
        DEFAULT.as_str()
    );
    for r in rules {
        out.push_str(&r.rego());
    }
    out
}

/// One generated call: a tool and, for a tool that has one, its one argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenCall {
    /// The tool's name.
    pub tool: String,
    /// The argument's field and value (`command`, `path`, `url`), or `None` (a tool-name call).
    pub arg: Option<(&'static str, String)>,
}

impl GenCall {
    fn new(tool: &str, arg: Option<(&'static str, String)>) -> Self {
        Self {
            tool: tool.to_owned(),
            arg,
        }
    }

    /// The call as Warden takes it.
    pub fn warden(&self) -> Call {
        let args = match &self.arg {
            Some((field, value)) => json!({ *field: value }),
            None => json!({}),
        };
        Call::new(self.tool.clone(), args)
    }

    /// The call as one line of a `warden check --calls` file.
    pub fn json_line(&self) -> String {
        let call = self.warden();
        json!({"tool": call.tool, "args": call.args}).to_string()
    }

    /// What Cedar's `context.arg` and Rego's `input.arg` hold: the argument, a URL's host.
    pub fn peer_arg(&self) -> &str {
        peer_arg(&self.tool, self.arg.as_ref().map(|(_, v)| v.as_str()))
    }
}

/// A call's argument as the peers see it: a `web_fetch` URL cut to its host (the generated URLs
/// are `https://HOST/…` with a lower-case ASCII host), anything else as it is, `""` for none.
pub fn peer_arg<'a>(tool: &str, value: Option<&'a str>) -> &'a str {
    let Some(value) = value else { return "" };
    if tool != "web_fetch" {
        return value;
    }
    let rest = value.split_once("://").map_or(value, |(_, rest)| rest);
    rest.split(['/', '?', '#']).next().unwrap_or(rest)
}

/// The calls the comparison decides at `n` rules: for every rule kind, matching and not
/// matching, over a sample of the rules (every rule up to 1,000, then evenly spread), plus
/// calls on the four fixed rules and calls no rule matches.
pub fn calls(n: usize) -> Vec<GenCall> {
    let step = n.div_ceil(1_000).max(1);
    let mut out = Vec::new();
    let bash = |c: String| GenCall::new("bash", Some(("command", c)));
    let read = |p: String| GenCall::new("read", Some(("path", p)));
    let fetch = |u: String| GenCall::new("web_fetch", Some(("url", u)));
    for i in (0..n).step_by(step) {
        match i % 4 {
            0 => out.extend([
                bash(format!("tool{i} sub{i}")),
                bash(format!("tool{i} sub{i} --flag{i} x")),
                bash(format!("tool{i} sub{i}x")),
                bash(format!("tool{i}")),
                bash(format!("tool{i} other")),
            ]),
            1 => out.extend([
                read(format!("/data/d{i}/f{i}.rs")),
                read(format!("/data/d{i}/a/b/c.txt")),
                read(format!("/data/d{i}x/f.rs")),
                read(format!("/data/e{i}/f.rs")),
            ]),
            2 => out.extend([
                fetch(format!("https://a.host{i}.example/x")),
                fetch(format!("https://b.c.host{i}.example/")),
                fetch(format!("https://host{i}.example/")),
                fetch(format!("https://a.host{i}.examples/x")),
            ]),
            _ => out.extend([
                GenCall::new(&format!("mcp{i}__op"), None),
                GenCall::new(&format!("mcp{i}__"), None),
                GenCall::new(&format!("mcp{i}_op"), None),
                GenCall::new(&format!("mcpx{i}__op"), None),
            ]),
        }
    }
    out.extend([
        bash("git status".into()),
        bash("git status --short".into()),
        bash("git push origin main".into()),
        bash("rm -rf build".into()),
        bash("rm".into()),
        bash("rmdir x".into()),
        read("/repo/src/lib.rs".into()),
        read("/repo/src".into()),
        read("/repo/.env".into()),
        read("/repo/.env/x".into()),
        read("/repo/.envrc".into()),
        read("/elsewhere/x".into()),
        fetch("https://docs.rs/x".into()),
        GenCall::new("mcp__other", None),
        GenCall::new("unknown_tool", None),
    ]);
    out
}

/// Warden deciding the generated policy: a compiled snapshot.
pub struct WardenEngine {
    snapshot: PolicySnapshot,
}

impl WardenEngine {
    /// Compiles the rules (the project root is `/repo`).
    pub fn new(rules: &[GenRule]) -> Result<Self, String> {
        let mut set = RuleSet::default();
        for r in rules {
            let rule = Rule::parse(&r.warden()).map_err(|e| e.to_string())?;
            match r.list {
                Decision::Allow => set.allow.push(rule),
                Decision::Ask => set.ask.push(rule),
                Decision::Deny => set.deny.push(rule),
            }
        }
        let snapshot = PolicyBuilder::new()
            .default(DEFAULT)
            .path_env(PathEnv {
                project_root: "/repo".into(),
                home: None,
            })
            .own(Source::trusted("compare"), set)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self { snapshot })
    }

    /// Decides a call as Warden takes it (the full verdict is built; its decision returned).
    pub fn decide(&self, call: &Call) -> Decision {
        self.snapshot.decide(call).decision
    }
}

/// Cedar deciding the generated policy set.
pub struct CedarEngine {
    policies: PolicySet,
    authorizer: Authorizer,
    entities: Entities,
    principal: EntityUid,
    action: EntityUid,
    tool: EntityTypeName,
}

impl CedarEngine {
    /// Parses the rules' Cedar text.
    pub fn new(rules: &[GenRule]) -> Result<Self, String> {
        Self::from_text(&cedar_text(rules))
    }

    /// Parses a policy set written by [`cedar_text`].
    pub fn from_text(text: &str) -> Result<Self, String> {
        let policies: PolicySet = text.parse().map_err(|e| format!("{e}"))?;
        let uid = |s: &str| s.parse::<EntityUid>().map_err(|e| format!("{e}"));
        Ok(Self {
            policies,
            authorizer: Authorizer::new(),
            entities: Entities::empty(),
            principal: uid("Agent::\"agent\"")?,
            action: uid("Action::\"call\"")?,
            tool: "Tool".parse().map_err(|e| format!("{e}"))?,
        })
    }

    /// Decides one call (its tool and the argument as [`peer_arg`] gives it): the strictest
    /// list among the satisfied policies, else the default. An evaluation error is an `Err`.
    pub fn decide(&self, tool: &str, arg: &str) -> Result<Decision, String> {
        let context = Context::from_pairs([
            (
                "tool".to_owned(),
                RestrictedExpression::new_string(tool.to_owned()),
            ),
            (
                "arg".to_owned(),
                RestrictedExpression::new_string(arg.to_owned()),
            ),
        ])
        .map_err(|e| e.to_string())?;
        let resource = EntityUid::from_type_name_and_id(self.tool.clone(), EntityId::new(tool));
        let request = Request::new(
            self.principal.clone(),
            self.action.clone(),
            resource,
            context,
            None,
        )
        .map_err(|e| e.to_string())?;
        let response = self
            .authorizer
            .is_authorized(&request, &self.policies, &self.entities);
        if let Some(e) = response.diagnostics().errors().next() {
            return Err(e.to_string());
        }
        let mut answer: Option<Decision> = None;
        for id in response.diagnostics().reason() {
            let list = match self.policies.policy(id).and_then(|p| p.annotation("list")) {
                Some("deny") => Decision::Deny,
                Some("ask") => Decision::Ask,
                Some("allow") => Decision::Allow,
                other => return Err(format!("policy {id} has no list ({other:?})")),
            };
            answer = Some(answer.map_or(list, |a| strictest(a, list)));
        }
        Ok(answer.unwrap_or(DEFAULT))
    }
}

/// Rego (regorus) deciding the generated module, compiled for `data.warden.decision`.
pub struct RegoEngine {
    policy: regorus::CompiledPolicy,
}

impl RegoEngine {
    /// Parses and compiles the rules' Rego text.
    pub fn new(rules: &[GenRule]) -> Result<Self, String> {
        Self::from_text(&rego_text(rules))
    }

    /// Parses and compiles a module written by [`rego_text`].
    pub fn from_text(text: &str) -> Result<Self, String> {
        let mut engine = regorus::Engine::new();
        engine
            .add_policy("warden.rego".into(), text.to_owned())
            .map_err(|e| e.to_string())?;
        let policy = engine
            .compile_with_entrypoint(&"data.warden.decision".into())
            .map_err(|e| e.to_string())?;
        Ok(Self { policy })
    }

    /// Decides one call (its tool and the argument as [`peer_arg`] gives it).
    pub fn decide(&self, tool: &str, arg: &str) -> Result<Decision, String> {
        let mut input = BTreeMap::new();
        input.insert(regorus::Value::from("tool"), regorus::Value::from(tool));
        input.insert(regorus::Value::from("arg"), regorus::Value::from(arg));
        let answer = self
            .policy
            .eval_with_input(regorus::Value::from(input))
            .map_err(|e| e.to_string())?;
        match answer.as_string().map_err(|e| e.to_string())?.as_ref() {
            "deny" => Ok(Decision::Deny),
            "ask" => Ok(Decision::Ask),
            "allow" => Ok(Decision::Allow),
            other => Err(format!("unexpected decision {other:?}")),
        }
    }
}

/// The stricter of two answers: deny > ask > allow.
pub fn strictest(a: Decision, b: Decision) -> Decision {
    a.max(b)
}

/// Which peers [`agree`] asks besides Warden.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peers {
    /// Ask Cedar.
    pub cedar: bool,
    /// Ask Rego.
    pub rego: bool,
}

/// What [`agree`] found: how many calls got each answer, and every disagreement.
#[derive(Debug, Default)]
pub struct Agreement {
    /// Calls Warden allowed, asked about and denied.
    pub answers: [usize; 3],
    /// Each call on which an engine answered differently, with the three answers.
    pub disagreements: Vec<String>,
}

/// The differential check: decides `calls` at `n` rules with Warden and the chosen peers and
/// lists every call on which they differ. A peer's evaluation error is an `Err`.
pub fn agree(n: usize, calls: &[GenCall], peers: Peers) -> Result<Agreement, String> {
    let rules = rules(n);
    let warden = WardenEngine::new(&rules)?;
    let cedar = peers.cedar.then(|| CedarEngine::new(&rules)).transpose()?;
    let rego = peers.rego.then(|| RegoEngine::new(&rules)).transpose()?;
    let mut out = Agreement::default();
    for call in calls {
        let w = warden.decide(&call.warden());
        let c = cedar
            .as_ref()
            .map(|e| e.decide(&call.tool, call.peer_arg()))
            .transpose()?;
        let r = rego
            .as_ref()
            .map(|e| e.decide(&call.tool, call.peer_arg()))
            .transpose()?;
        if c.is_some_and(|c| c != w) || r.is_some_and(|r| r != w) {
            out.disagreements
                .push(format!("{call:?}: warden {w:?}, cedar {c:?}, rego {r:?}"));
        }
        out.answers[match w {
            Decision::Allow => 0,
            Decision::Ask => 1,
            Decision::Deny => 2,
        }] += 1;
    }
    Ok(out)
}
