//! From a [`HarnessSpec`] to a launch [`Plan`] for one provider: what the provider was found to
//! be ([`Probe`]), the argv, the settings files and their contents, the environment allowlist,
//! and the [`ControlReport`]: every requested control exactly once, as enforced, degraded or
//! unsupported, with who enforces it and on what basis (docs/harness.md has the matrix and its
//! sources). A required control that is not enforced means nothing is spawned.
//!
//! Pure: the caller probes (runs `--version` contained), reads the policy and passes text in;
//! nothing here runs or writes anything. A plan is immutable and digested; it names secrets only
//! by their variable names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::json;
use warden_contracts::Digest;

use crate::hook;
use crate::spec::{Approval, Control, HarnessSpec, Network, ProviderName};

/// What probing a provider's executable found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// The provider.
    pub provider: ProviderName,
    /// The executable found, if one was.
    pub executable: Option<PathBuf>,
    /// Its version, when `--version` answered one.
    pub version: Option<String>,
    /// The digest of what `--version` printed (the evidence a report cites).
    pub output_digest: Option<Digest>,
    /// Why the provider is unsupported, if it is (not found, no answer, an unknown or too old
    /// version): never assumed to work.
    pub unsupported: Option<String>,
}

impl Probe {
    /// A probe that found nothing usable.
    pub fn missing(provider: ProviderName, why: impl Into<String>) -> Self {
        Self {
            provider,
            executable: None,
            version: None,
            output_digest: None,
            unsupported: Some(why.into()),
        }
    }

    /// Reads `--version` output: the version it names, checked against the oldest version
    /// whose hooks Warden relies on.
    pub fn from_output(provider: ProviderName, executable: PathBuf, output: &str) -> Self {
        let version = version_in(output);
        let unsupported = match &version {
            None => Some(format!(
                "`{} --version` printed no version Warden recognises",
                provider.executable()
            )),
            Some(v) if parse_semver(v) < MINIMUM[provider as usize] => Some(format!(
                "version {v} is older than {}, the first whose pre-tool hooks Warden relies on",
                semver_text(MINIMUM[provider as usize])
            )),
            Some(_) => None,
        };
        Self {
            provider,
            executable: Some(executable),
            version,
            output_digest: Some(Digest::of_bytes(output.as_bytes())),
            unsupported,
        }
    }
}

/// The oldest version of each provider (in [`ProviderName::ALL`] order) whose pre-tool hooks
/// Warden relies on: Claude Code's exit-2 block with JSON, Codex's hooks on by default and
/// covering `apply_patch` and MCP tools, Gemini CLI's hook running before its policy engine
/// with `ask` (docs/harness.md).
const MINIMUM: [(u64, u64, u64); 3] = [(2, 1, 90), (0, 124, 0), (0, 36, 0)];

fn semver_text((a, b, c): (u64, u64, u64)) -> String {
    format!("{a}.{b}.{c}")
}

/// The first `X.Y.Z` in `text`.
fn version_in(text: &str) -> Option<String> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|w| {
            let parts: Vec<&str> = w.split('.').collect();
            parts.len() == 3 && parts.iter().all(|p| !p.is_empty())
        })
        .map(str::to_owned)
}

fn parse_semver(v: &str) -> (u64, u64, u64) {
    let mut parts = v.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

/// Who enforces a control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcer {
    /// The provider itself (its settings, flags or sandbox): a provider claim.
    Provider,
    /// Warden's pre-tool hook, which the provider runs.
    WardenHook,
    /// Warden's OS backend around the provider's process (Landlock, the spawn's environment):
    /// proven by the backend's probe on this machine.
    OsBackend,
    /// Nobody.
    Nobody,
}

/// What an enforcement rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The provider's documentation and sources, for the probed version.
    ProviderClaim,
    /// A mechanism Warden's OS backend proved on this machine.
    OsEvidence,
    /// Nothing: the control is not enforced.
    None,
}

/// One control in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ControlEntry {
    /// The control.
    pub control: Control,
    /// Who enforces it.
    pub by: Enforcer,
    /// What that rests on.
    pub basis: Basis,
    /// How (the flag, setting or mechanism), and for a degraded or unsupported control, why.
    pub detail: String,
    /// What the claim rests on here: the probed provider version and the digest of its
    /// `--version` output, or the OS backend's probe of the mechanism.
    pub evidence: String,
}

/// Every requested control exactly once, by status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ControlReport {
    /// Enforced as asked.
    pub enforced: Vec<ControlEntry>,
    /// Enforced only in part.
    pub degraded: Vec<ControlEntry>,
    /// Not enforced.
    pub unsupported: Vec<ControlEntry>,
}

impl ControlReport {
    /// The required controls that are not enforced.
    pub fn missing<'a>(&'a self, required: &'a [Control]) -> Vec<&'a ControlEntry> {
        self.degraded
            .iter()
            .chain(&self.unsupported)
            .filter(|e| required.contains(&e.control))
            .collect()
    }

    /// Every control in the report, whatever its status.
    pub fn controls(&self) -> Vec<Control> {
        self.enforced
            .iter()
            .chain(&self.degraded)
            .chain(&self.unsupported)
            .map(|e| e.control)
            .collect()
    }
}

/// How a control fares with a provider.
enum Fare {
    Enforced(Enforcer, Basis, String),
    Degraded(Enforcer, Basis, String),
    Unsupported(String),
}

use Fare::{Degraded, Enforced, Unsupported};

/// What the OS backend proved on this machine (`warden sandbox probe`): the mechanisms a
/// launch can rest on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OsBackend {
    /// Writes confined to roots (Landlock).
    pub write_roots: bool,
    /// The environment cleared to an allowlist.
    pub environment: bool,
    /// The backend probe's own evidence for what it proved (cited by the report).
    pub evidence: String,
}

/// What compiling needs besides the spec: absolute paths resolved by the caller, the probe,
/// the OS backend's proof, and the provider-native prefix rules exported from the policy.
#[derive(Debug, Clone)]
pub struct CompileInput<'a> {
    /// The spec.
    pub spec: &'a HarnessSpec,
    /// The workspace (absolute).
    pub workspace: PathBuf,
    /// The Warden policy file (absolute), when the spec names one.
    pub policy: Option<PathBuf>,
    /// The write roots (absolute).
    pub write_roots: Vec<PathBuf>,
    /// The `warden` binary the hook runs (absolute).
    pub warden: PathBuf,
    /// What probing the provider found.
    pub probe: &'a Probe,
    /// What the OS backend proved.
    pub os: OsBackend,
    /// The policy exported as the provider's own rules, with whether the export was exact.
    pub prefix_rules: Option<(String, bool)>,
    /// The caller's arguments for the provider (a prompt, `exec`, `-p`), last on the command
    /// line; a headless run has nobody to answer an approval prompt.
    pub args: Vec<String>,
}

impl CompileInput<'_> {
    /// Whether the caller's arguments run the provider headless (Codex `exec`, Claude Code and
    /// Gemini CLI `-p`/`--print`/`--prompt`), where no person answers a prompt.
    fn headless(&self, provider: ProviderName) -> bool {
        match provider {
            ProviderName::Codex => self.args.first().is_some_and(|a| a == "exec" || a == "e"),
            ProviderName::ClaudeCode => self.args.iter().any(|a| a == "-p" || a == "--print"),
            ProviderName::Gemini => self.args.iter().any(|a| a == "-p" || a == "--prompt"),
        }
    }
}

/// An immutable launch plan (`warden harness plan` prints it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// The provider.
    pub provider: ProviderName,
    /// Its probed version (`None`: unknown, so unsupported).
    pub provider_version: Option<String>,
    /// The command line.
    pub argv: Vec<String>,
    /// Files written before the launch: absolute path → content.
    pub files: BTreeMap<String, String>,
    /// The environment variables passed through (by name; their values never appear here).
    pub env_allow: Vec<String>,
    /// Every requested control, by status.
    pub report: ControlReport,
    /// The digest of everything above.
    pub plan_digest: Digest,
}

impl Plan {
    /// The required controls that are not enforced (nothing may be spawned while any is).
    pub fn missing<'a>(&'a self, required: &'a [Control]) -> Vec<&'a ControlEntry> {
        self.report.missing(required)
    }
}

/// The folder a plan's files live in: `WORKSPACE/.warden/harness/PROVIDER`.
pub fn plan_dir(workspace: &Path, provider: ProviderName) -> PathBuf {
    workspace
        .join(".warden")
        .join("harness")
        .join(provider.as_str())
}

/// The environment every launch keeps at least (the provider cannot start without them).
const BASE_ENV: [&str; 4] = ["PATH", "HOME", "TERM", "LANG"];

/// Compiles a plan for `provider`.
pub fn compile(provider: ProviderName, input: &CompileInput<'_>) -> Plan {
    let dir = plan_dir(&input.workspace, provider);
    let mut files = BTreeMap::new();
    // The probed executable when there is one, so the plan names exactly what runs.
    let program = input.probe.executable.as_ref().map_or_else(
        || provider.executable().to_owned(),
        |p| p.to_string_lossy().into_owned(),
    );
    let mut argv = vec![program];
    match provider {
        ProviderName::ClaudeCode => claude_code(input, &dir, &mut argv, &mut files),
        ProviderName::Codex => codex(input, &dir, &mut argv, &mut files),
        ProviderName::Gemini => gemini(input, &dir, &mut argv, &mut files),
    }
    argv.extend(input.args.iter().cloned());
    let env_allow = env_allow(input);
    let report = report(provider, input);
    let mut plan = Plan {
        provider,
        provider_version: input.probe.version.clone(),
        argv,
        files,
        env_allow,
        report,
        plan_digest: Digest::of_bytes(b""),
    };
    plan.plan_digest = digest_of(&plan);
    plan
}

fn digest_of(plan: &Plan) -> Digest {
    let mut value = serde_json::to_value(plan).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.remove("plan_digest");
    }
    Digest::of_json(&value).unwrap_or_else(|_| Digest::of_bytes(value.to_string().as_bytes()))
}

fn env_allow(input: &CompileInput<'_>) -> Vec<String> {
    let mut names: Vec<String> = match &input.spec.environment {
        Some(list) => list.clone(),
        None => Vec::new(),
    };
    for base in BASE_ENV {
        if !names.iter().any(|n| n == base) {
            names.push(base.to_owned());
        }
    }
    names.sort();
    names.dedup();
    names
}

/// An allowed MCP server, started as `warden mcp proxy --policy FILE --server NAME`: admitted,
/// contained, pinned and every call decided by Warden (docs/mcp.md).
fn proxy_server(input: &CompileInput<'_>, name: &str) -> Option<(String, Vec<String>)> {
    let policy = input.policy.as_ref()?;
    Some((
        input.warden.to_string_lossy().into_owned(),
        vec![
            "mcp".into(),
            "proxy".into(),
            "--policy".into(),
            policy.to_string_lossy().into_owned(),
            "--project-root".into(),
            input.workspace.to_string_lossy().into_owned(),
            "--server".into(),
            name.into(),
        ],
    ))
}

/// The hook's command line: `warden hook PROVIDER --policy FILE`.
fn hook_args(input: &CompileInput<'_>, provider: &str) -> Option<(String, Vec<String>)> {
    let policy = input.policy.as_ref()?;
    Some((
        input.warden.to_string_lossy().into_owned(),
        vec![
            "hook".into(),
            provider.into(),
            "--policy".into(),
            policy.to_string_lossy().into_owned(),
            "--project-root".into(),
            input.workspace.to_string_lossy().into_owned(),
        ],
    ))
}

/// `env NAME=VALUE…` before the program: the plan's own variables, shown in its argv.
fn with_env(argv: &mut Vec<String>, vars: &[(&str, String)]) {
    let mut prefix = vec!["env".to_owned()];
    prefix.extend(vars.iter().map(|(k, v)| format!("{k}={v}")));
    argv.splice(0..0, prefix);
}

fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The roots writes are confined to: the workspace and the spec's write roots.
fn roots(input: &CompileInput<'_>) -> Vec<String> {
    std::iter::once(&input.workspace)
        .chain(&input.write_roots)
        .map(|p| text(p))
        .collect()
}

/// The allowed MCP servers, each as Warden's proxy: `(name, command, args)`.
fn servers(input: &CompileInput<'_>) -> Vec<(String, String, Vec<String>)> {
    input
        .spec
        .mcp_servers
        .iter()
        .flatten()
        .filter_map(|name| {
            let (command, args) = proxy_server(input, name)?;
            Some((name.clone(), command, args))
        })
        .collect()
}

/// Claude Code: a per-run `CLAUDE_CONFIG_DIR` and `--settings` file, loaded with
/// `--setting-sources user` so the workspace's own settings cannot undo the hook.
fn claude_code(
    input: &CompileInput<'_>,
    dir: &Path,
    argv: &mut Vec<String>,
    files: &mut BTreeMap<String, String>,
) {
    let spec = input.spec;
    let mut settings = serde_json::Map::new();
    if let Some((exe, args)) = hook_args(input, "claude-code")
        && let Some(hooks) = crate::claude_code::hook_settings(&exe, &args, 10).get("hooks")
    {
        settings.insert("hooks".into(), hooks.clone());
        settings.insert("disableAllHooks".into(), json!(false));
    }
    let mut permissions = input
        .prefix_rules
        .as_ref()
        .and_then(|(rules, _)| serde_json::from_str::<serde_json::Value>(rules).ok())
        .and_then(|v| v.get("permissions").cloned())
        .unwrap_or_else(|| json!({}));
    if matches!(spec.network, Some(Network::Off))
        && let Some(obj) = permissions.as_object_mut()
    {
        let deny = obj.entry("deny").or_insert_with(|| json!([]));
        if let Some(list) = deny.as_array_mut() {
            list.extend([json!("WebFetch"), json!("WebSearch")]);
        }
    }
    if permissions.as_object().is_some_and(|o| !o.is_empty()) {
        settings.insert("permissions".into(), permissions);
    }
    if !input.write_roots.is_empty()
        || matches!(spec.network, Some(Network::Off | Network::Allowlist))
    {
        let domains = match spec.network {
            Some(Network::Allowlist) => json!(spec.network_allowlist),
            Some(Network::On) | None => json!(["*"]),
            Some(Network::Off) => json!([]),
        };
        settings.insert(
            "sandbox".into(),
            json!({
                "enabled": true,
                "failIfUnavailable": true,
                "allowUnsandboxedCommands": false,
                "filesystem": { "allowWrite": roots(input) },
                "network": { "allowedDomains": domains },
            }),
        );
    }
    let settings_path = dir.join("settings.json");
    files.insert(
        text(&settings_path),
        serde_json::to_string_pretty(&settings).unwrap_or_default() + "\n",
    );
    argv.extend([
        "--settings".into(),
        text(&settings_path),
        "--setting-sources".into(),
        "user".into(),
    ]);
    if spec.mcp_servers.is_some() {
        let mcp_path = dir.join("mcp.json");
        let entries: serde_json::Map<String, serde_json::Value> = servers(input)
            .into_iter()
            .map(|(name, command, args)| (name, json!({ "command": command, "args": args })))
            .collect();
        files.insert(
            text(&mcp_path),
            serde_json::to_string_pretty(&json!({ "mcpServers": entries })).unwrap_or_default()
                + "\n",
        );
        argv.extend([
            "--mcp-config".into(),
            text(&mcp_path),
            "--strict-mcp-config".into(),
        ]);
    }
    if let Some(model) = &spec.model {
        argv.extend(["--model".into(), model.clone()]);
    }
    if spec.approval == Some(Approval::Prompt) {
        argv.extend(["--permission-mode".into(), "default".into()]);
    }
    if let Some(turns) = spec.budget.as_ref().and_then(|b| b.max_turns) {
        argv.extend(["--max-turns".into(), turns.to_string()]);
    }
    with_env(
        argv,
        &[
            ("CLAUDE_CONFIG_DIR", text(&dir.join("config"))),
            ("CLAUDE_CODE_SUBPROCESS_ENV_SCRUB", "1".into()),
        ],
    );
}

/// Codex: a fresh `CODEX_HOME` (the plan's rules, no other servers), the hook as a session
/// override trusted for the session, the workspace-write sandbox.
fn codex(
    input: &CompileInput<'_>,
    dir: &Path,
    argv: &mut Vec<String>,
    files: &mut BTreeMap<String, String>,
) {
    let spec = input.spec;
    let home = dir.join("codex-home");
    let set = |argv: &mut Vec<String>, key: &str, value: String| {
        argv.extend(["-c".into(), format!("{key}={value}")]);
    };
    let strings = |items: &[String]| {
        toml::Value::Array(items.iter().cloned().map(toml::Value::String).collect()).to_string()
    };
    if let Some((exe, args)) = hook_args(input, "codex") {
        let command = hook::shell_command(&exe, &args);
        let group = format!(
            "[{{matcher=\"*\",hooks=[{{type=\"command\",command={},timeout=10}}]}}]",
            toml::Value::String(command)
        );
        set(argv, "hooks.PreToolUse", group);
        // Session hooks are not managed: without this they are skipped silently.
        argv.push("--dangerously-bypass-hook-trust".into());
        // OpenAI's hosted web search never reaches the hook.
        set(argv, "web_search", "\"disabled\"".into());
    }
    if let Some((rules, _)) = &input.prefix_rules {
        files.insert(
            text(&home.join("rules").join("warden.rules")),
            rules.clone(),
        );
    }
    argv.extend(["--cd".into(), text(&input.workspace)]);
    if let Some(model) = &spec.model {
        argv.extend(["--model".into(), model.clone()]);
    }
    if !input.write_roots.is_empty() || matches!(spec.network, Some(Network::Off)) {
        argv.extend(["--sandbox".into(), "workspace-write".into()]);
        set(
            argv,
            "sandbox_workspace_write.writable_roots",
            strings(&roots(input)),
        );
        set(
            argv,
            "sandbox_workspace_write.exclude_slash_tmp",
            "true".into(),
        );
        set(
            argv,
            "sandbox_workspace_write.exclude_tmpdir_env_var",
            "true".into(),
        );
        set(
            argv,
            "sandbox_workspace_write.network_access",
            (!matches!(spec.network, Some(Network::Off))).to_string(),
        );
    }
    if spec.approval == Some(Approval::Prompt) {
        argv.extend(["--ask-for-approval".into(), "on-request".into()]);
    }
    for (name, command, args) in servers(input) {
        let key = format!("mcp_servers.{}", toml::Value::String(name));
        set(
            argv,
            &format!("{key}.command"),
            toml::Value::String(command).to_string(),
        );
        set(argv, &format!("{key}.args"), strings(&args));
    }
    if let Some(names) = &spec.environment {
        set(argv, "shell_environment_policy.inherit", "\"none\"".into());
        set(
            argv,
            "shell_environment_policy.include_only",
            strings(names),
        );
    }
    with_env(argv, &[("CODEX_HOME", text(&home))]);
}

/// The variables that would let a workspace's settings override Gemini's hook.
const GEMINI_TRUST_VARIABLES: [&str; 2] = [
    "GEMINI_CLI_TRUST_WORKSPACE",
    "GEMINI_CLI_TRUSTED_FOLDERS_PATH",
];

/// Gemini CLI: a fresh `GEMINI_CLI_HOME` whose settings hold the hook (named per policy, so no
/// `hooksConfig.disabled` entry elsewhere can name it), `--skip-trust`, the policy's rules as
/// the admin policy.
fn gemini(
    input: &CompileInput<'_>,
    dir: &Path,
    argv: &mut Vec<String>,
    files: &mut BTreeMap<String, String>,
) {
    let spec = input.spec;
    let home = dir.join("home");
    let mut settings = serde_json::Map::new();
    if let Some((exe, args)) = hook_args(input, "gemini") {
        let command = hook::shell_command(&exe, &args);
        let name = format!(
            "warden-{}",
            &Digest::of_bytes(command.as_bytes()).hex()[..12]
        );
        if let serde_json::Value::Object(mut fragment) =
            crate::gemini::hook_settings(&command, 10_000)
        {
            if let Some(h) = fragment
                .get_mut("hooks")
                .and_then(|h| h.get_mut(crate::gemini::EVENT))
                .and_then(|g| g.get_mut(0))
                .and_then(|g| g.get_mut("hooks"))
                .and_then(|h| h.get_mut(0))
            {
                h["name"] = json!(name);
            }
            settings.extend(fragment);
        }
    }
    let mut security = serde_json::Map::new();
    if spec.approval == Some(Approval::Prompt) {
        security.insert("disableYoloMode".into(), json!(true));
    }
    if matches!(spec.network, Some(Network::Off)) {
        security.insert("toolSandboxing".into(), json!(true));
        settings.insert(
            "tools".into(),
            json!({ "exclude": ["web_fetch", "google_web_search"] }),
        );
    }
    if spec.environment.is_some() {
        security.insert(
            "environmentVariableRedaction".into(),
            json!({ "enabled": true }),
        );
    }
    if !security.is_empty() {
        settings.insert("security".into(), serde_json::Value::Object(security));
    }
    let allowed = servers(input);
    if spec.mcp_servers.is_some() {
        let entries: serde_json::Map<String, serde_json::Value> = allowed
            .iter()
            .map(|(name, command, args)| {
                (name.clone(), json!({ "command": command, "args": args }))
            })
            .collect();
        settings.insert("mcpServers".into(), serde_json::Value::Object(entries));
    }
    files.insert(
        text(&home.join(".gemini").join("settings.json")),
        serde_json::to_string_pretty(&settings).unwrap_or_default() + "\n",
    );
    argv.push("--skip-trust".into());
    if let Some((rules, _)) = &input.prefix_rules {
        let policy = dir.join("admin-policy.toml");
        files.insert(text(&policy), rules.clone());
        argv.extend(["--admin-policy".into(), text(&policy)]);
    }
    if let Some(model) = &spec.model {
        argv.extend(["--model".into(), model.clone()]);
    }
    if spec.approval == Some(Approval::Prompt) {
        argv.extend(["--approval-mode".into(), "default".into()]);
    }
    if let Some(names) = &spec.mcp_servers {
        // An empty value crashes Gemini; a name no layer defines starts none.
        let list = if names.is_empty() {
            "warden-no-server".to_owned()
        } else {
            names.join(",")
        };
        argv.extend(["--allowed-mcp-server-names".into(), list]);
    }
    with_env(argv, &[("GEMINI_CLI_HOME", text(&home))]);
}

/// The provider evidence a claim rests on: its version and the digest of what `--version`
/// printed.
fn provider_evidence(probe: &Probe) -> String {
    match (&probe.version, &probe.output_digest) {
        (Some(v), Some(d)) => format!("{} {v}, `--version` output {d}", probe.provider),
        (None, Some(d)) => format!(
            "{} of unknown version, `--version` output {d}",
            probe.provider
        ),
        _ => format!("{} not probed", probe.provider),
    }
}

/// The report: each requested control, as the provider fares with it.
fn report(provider: ProviderName, input: &CompileInput<'_>) -> ControlReport {
    let mut report = ControlReport::default();
    for control in input.spec.requested() {
        let fare = match &input.probe.unsupported {
            Some(why) => Unsupported(format!("{provider} is unsupported here: {why}")),
            None if control == Control::ApprovalPrompt && input.headless(provider) => Unsupported(
                format!("the arguments run {provider} headless, where nobody answers a prompt"),
            ),
            None => match provider {
                ProviderName::ClaudeCode => claude_code_fare(control, input),
                ProviderName::Codex => codex_fare(control, input),
                ProviderName::Gemini => gemini_fare(control, input),
            },
        };
        let (list, by, basis, detail) = match fare {
            Enforced(by, basis, d) => (&mut report.enforced, by, basis, d),
            Degraded(by, basis, d) => (&mut report.degraded, by, basis, d),
            Unsupported(d) => (&mut report.unsupported, Enforcer::Nobody, Basis::None, d),
        };
        let evidence = match basis {
            Basis::ProviderClaim => provider_evidence(input.probe),
            Basis::OsEvidence => input.os.evidence.clone(),
            Basis::None => match &input.probe.unsupported {
                Some(_) => provider_evidence(input.probe),
                None => String::new(),
            },
        };
        list.push(ControlEntry {
            control,
            by,
            basis,
            detail,
            evidence,
        });
    }
    report
}

/// Write roots and the environment: Warden's OS backend around the provider's process when
/// this machine proved the mechanism.
fn os_fare(control: Control, input: &CompileInput<'_>) -> Option<Fare> {
    let proven = match control {
        Control::FilesystemWriteRoots => input.os.write_roots,
        Control::EnvironmentAllowlist => input.os.environment,
        _ => false,
    };
    proven.then(|| {
        Enforced(
            Enforcer::OsBackend,
            Basis::OsEvidence,
            match control {
                Control::FilesystemWriteRoots => {
                    "Landlock around the provider's process and everything it starts: writes only under the workspace, the write roots and the plan's folders"
                }
                _ => "the launch clears the environment to the allowlist",
            }
            .into(),
        )
    })
}

/// The prefix rules: enforced when the export was exact, degraded when it approximated.
fn exported(input: &CompileInput<'_>, how: &str) -> Fare {
    match &input.prefix_rules {
        Some((_, true)) => Enforced(Enforcer::Provider, Basis::ProviderClaim, how.into()),
        Some((_, false)) => Degraded(
            Enforcer::Provider,
            Basis::ProviderClaim,
            format!("{how}; some rules approximated (toward stricter) or inexpressible"),
        ),
        None => Unsupported("the policy could not be exported".into()),
    }
}

/// Claude Code (docs/harness.md, "Claude Code").
fn claude_code_fare(control: Control, input: &CompileInput<'_>) -> Fare {
    use Basis::ProviderClaim;
    use Enforcer::{Provider, WardenHook};
    if let Some(fare) = os_fare(control, input) {
        return fare;
    }
    match control {
        Control::ToolsPolicy => Enforced(WardenHook, ProviderClaim, "`warden hook claude-code` decides every tool call (matcher `*`), MCP tools included".into()),
        Control::HookPreTool => Enforced(Provider, ProviderClaim, "PreToolUse hook in the `--settings` file with `disableAllHooks: false`, `--setting-sources user` and a per-run `CLAUDE_CONFIG_DIR` (the workspace's settings are not loaded); never `--bare`".into()),
        Control::ShellPrefixRules => exported(input, "the policy exported as `permissions` in the `--settings` file"),
        Control::FilesystemWriteRoots => Degraded(Provider, ProviderClaim, "Landlock is not proven here; Claude Code's sandbox (`sandbox.filesystem.allowWrite`) covers Bash only, and the hook decides Edit/Write paths".into()),
        Control::NetworkOff => Degraded(Provider, ProviderClaim, "`sandbox.network.allowedDomains = []` for Bash and `WebFetch`/`WebSearch` denied; a new domain prompts instead of failing, and MCP servers are outside the sandbox".into()),
        Control::NetworkAllowlist => Degraded(Provider, ProviderClaim, "`sandbox.network.allowedDomains` for Bash; other domains prompt, MCP servers are unrestricted".into()),
        Control::ApprovalPrompt => Enforced(Provider, ProviderClaim, "`--permission-mode default` (interactive; with `-p` nobody answers a prompt)".into()),
        Control::McpServerAllowlist => Enforced(Provider, ProviderClaim, "`--mcp-config` with the plan's servers (each behind `warden mcp proxy`) and `--strict-mcp-config`".into()),
        Control::EnvironmentAllowlist => Degraded(Provider, ProviderClaim, "the OS backend did not prove its environment allowlist; `CLAUDE_CODE_SUBPROCESS_ENV_SCRUB` strips only credentials from Bash, hook and MCP environments".into()),
    }
}

/// Codex (docs/harness.md, "Codex CLI").
fn codex_fare(control: Control, input: &CompileInput<'_>) -> Fare {
    use Basis::ProviderClaim;
    use Enforcer::{Provider, WardenHook};
    if let Some(fare) = os_fare(control, input) {
        return fare;
    }
    let servers = input
        .spec
        .mcp_servers
        .as_ref()
        .is_some_and(|s| !s.is_empty());
    let outside = "MCP server processes run outside Codex's sandbox";
    match control {
        Control::ToolsPolicy => Degraded(WardenHook, ProviderClaim, "`warden hook codex` decides shell commands, apply_patch and MCP tools (web search disabled); Codex's other built-in tools emit no PreToolUse".into()),
        Control::HookPreTool => Enforced(Provider, ProviderClaim, "`-c hooks.PreToolUse` with `--dangerously-bypass-hook-trust` (session hooks are skipped silently without it)".into()),
        Control::ShellPrefixRules => match exported(input, "") {
            Unsupported(why) => Unsupported(why),
            _ => Degraded(Provider, ProviderClaim, "the policy exported as `CODEX_HOME/rules/warden.rules`; Codex's rules are experimental and documented for commands outside its sandbox".into()),
        },
        Control::FilesystemWriteRoots if !servers => Enforced(Provider, ProviderClaim, "`--sandbox workspace-write` with `writable_roots`, `exclude_slash_tmp` and `exclude_tmpdir_env_var`".into()),
        Control::FilesystemWriteRoots => Degraded(Provider, ProviderClaim, format!("`--sandbox workspace-write` holds the tools; {outside}")),
        Control::NetworkOff if !servers => Enforced(Provider, ProviderClaim, "`--sandbox workspace-write` with `network_access = false`, and web search disabled".into()),
        Control::NetworkOff => Degraded(Provider, ProviderClaim, format!("the sandbox cuts the tools' network; {outside}")),
        Control::NetworkAllowlist => Unsupported("with `--sandbox` Codex turns the network on or off, never per domain (its per-domain permission profiles are in beta)".into()),
        Control::ApprovalPrompt => Enforced(Provider, ProviderClaim, "`--ask-for-approval on-request` (interactive `codex`; `codex exec` never asks)".into()),
        Control::McpServerAllowlist => Degraded(Provider, ProviderClaim, "a fresh `CODEX_HOME` with the plan's servers (each behind `warden mcp proxy`), but `-c mcp_servers` adds to other layers (a system or trusted project config) and the launch does not list them to check".into()),
        Control::EnvironmentAllowlist => Degraded(Provider, ProviderClaim, "the OS backend did not prove its environment allowlist; `shell_environment_policy` covers shell tools only".into()),
    }
}

/// Gemini CLI (docs/harness.md, "Gemini CLI").
fn gemini_fare(control: Control, input: &CompileInput<'_>) -> Fare {
    use Basis::ProviderClaim;
    use Enforcer::{Provider, WardenHook};
    if let Some(fare) = os_fare(control, input) {
        return fare;
    }
    let trust_leak = input
        .spec
        .environment
        .iter()
        .flatten()
        .any(|n| GEMINI_TRUST_VARIABLES.contains(&n.as_str()));
    match control {
        Control::ToolsPolicy => Enforced(WardenHook, ProviderClaim, "`warden hook gemini` decides every tool call (matcher `*`), MCP tools included".into()),
        Control::HookPreTool if trust_leak => Degraded(Provider, ProviderClaim, "the spec passes a folder-trust variable, which lets the workspace's settings override the hook".into()),
        Control::HookPreTool => Enforced(Provider, ProviderClaim, "a fresh `GEMINI_CLI_HOME` whose settings hold the hook under a per-policy name, hooks enabled, `--skip-trust`".into()),
        Control::ShellPrefixRules => exported(input, "the policy exported as Gemini policy TOML passed with `--admin-policy` (ignored if the system policy folder holds its own)"),
        Control::FilesystemWriteRoots => Degraded(WardenHook, ProviderClaim, "Landlock is not proven here; the hook decides write_file/replace paths, and Gemini's tool sandbox cannot list roots beyond the workspace".into()),
        Control::NetworkOff => Degraded(Provider, ProviderClaim, "`security.toolSandboxing` (needs bwrap) with web_fetch and google_web_search excluded; MCP servers are not sandboxed".into()),
        Control::NetworkAllowlist => Degraded(WardenHook, ProviderClaim, "the hook holds web_fetch URLs to the policy's domain rules; shell commands reach any host".into()),
        Control::ApprovalPrompt => Enforced(Provider, ProviderClaim, "`--approval-mode default` with `security.disableYoloMode` (interactive; headless, an ask is a refusal)".into()),
        Control::McpServerAllowlist => Enforced(Provider, ProviderClaim, "the plan's servers (each behind `warden mcp proxy`) and `--allowed-mcp-server-names`".into()),
        Control::EnvironmentAllowlist => Degraded(Provider, ProviderClaim, "the OS backend did not prove its environment allowlist; `security.environmentVariableRedaction` hides secret-like names from tools only".into()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use proptest::prelude::*;

    use super::*;
    use crate::spec::{Budget, Filesystem};

    fn spec_strategy() -> impl Strategy<Value = HarnessSpec> {
        (
            any::<bool>(),
            prop_oneof![
                Just(None),
                Just(Some(Network::Off)),
                Just(Some(Network::On)),
                Just(Some(Network::Allowlist))
            ],
            prop_oneof![
                Just(None),
                Just(Some(Approval::Prompt)),
                Just(Some(Approval::Never))
            ],
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(tools, network, approval, write, env, mcp)| HarnessSpec {
                provider: None,
                model: Some("m".into()),
                workspace: None,
                approval,
                tools: tools.then(|| "p.toml".into()),
                filesystem: write.then(|| Filesystem {
                    read: Vec::new(),
                    write: vec![".".into()],
                }),
                network,
                network_allowlist: if network == Some(Network::Allowlist) {
                    vec!["docs.rs".into()]
                } else {
                    Vec::new()
                },
                environment: env.then(|| vec!["OPENAI_API_KEY".into()]),
                mcp_servers: mcp.then(|| vec!["github".into()]),
                budget: Some(Budget { max_turns: Some(3) }),
                required: Vec::new(),
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if std::env::var_os("CI").is_some() { 64 } else { 256 }))]
        /// Every requested control appears exactly once in the report,
        /// whatever the provider, its probe and the OS backend's proof; a required control
        /// is missing exactly when it is not enforced.
        #[test]
        fn every_requested_control_appears_exactly_once(
            spec in spec_strategy(),
            provider in prop_oneof![Just(ProviderName::ClaudeCode), Just(ProviderName::Codex), Just(ProviderName::Gemini)],
            supported in any::<bool>(),
            write_roots in any::<bool>(),
            environment in any::<bool>(),
            exact in any::<bool>(),
        ) {
            let probe = if supported {
                Probe::from_output(provider, "/bin/p".into(), "9.9.9")
            } else {
                Probe::missing(provider, "not found")
            };
            let input = CompileInput {
                spec: &spec,
                workspace: "/w".into(),
                policy: spec.tools.as_ref().map(|_| PathBuf::from("/w/p.toml")),
                write_roots: vec!["/w".into()],
                warden: "/bin/warden".into(),
                probe: &probe,
                os: OsBackend { write_roots, environment, evidence: "probe".into() },
                prefix_rules: Some(("{\"permissions\":{}}".into(), exact)),
                args: Vec::new(),
            };
            let plan = compile(provider, &input);
            let requested = spec.requested();
            prop_assert_eq!(plan.report.controls().len(), requested.len());
            let mut sorted = plan.report.controls();
            sorted.sort();
            let mut want = requested.clone();
            want.sort();
            prop_assert_eq!(sorted, want);
            let missing: Vec<Control> = plan.missing(&requested).iter().map(|e| e.control).collect();
            for c in &requested {
                prop_assert_eq!(
                    missing.contains(c),
                    !plan.report.enforced.iter().any(|e| e.control == *c)
                );
            }
            if !supported {
                prop_assert!(plan.report.enforced.is_empty());
            }
            prop_assert_eq!(plan.plan_digest.clone(), digest_of(&plan));
        }
    }

    #[test]
    fn versions_are_read_and_held_to_the_minimum() {
        let p = |provider, out: &str| Probe::from_output(provider, "/bin/x".into(), out);
        assert_eq!(
            p(ProviderName::Codex, "codex-cli 0.130.0\n").unsupported,
            None
        );
        assert!(
            p(ProviderName::Codex, "codex-cli 0.118.0\n")
                .unsupported
                .unwrap()
                .contains("older")
        );
        assert!(
            p(ProviderName::Gemini, "nightly\n")
                .unsupported
                .unwrap()
                .contains("no version")
        );
        assert_eq!(
            p(ProviderName::Gemini, "0.56.0\n").version.as_deref(),
            Some("0.56.0")
        );
        assert_eq!(
            p(ProviderName::ClaudeCode, "2.1.240 (Claude Code)\n")
                .version
                .as_deref(),
            Some("2.1.240")
        );
    }
}
