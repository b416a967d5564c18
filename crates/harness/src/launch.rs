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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OsBackend {
    /// Writes confined to roots (Landlock).
    pub write_roots: bool,
    /// The environment cleared to an allowlist.
    pub environment: bool,
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
        ProviderName::Codex => codex(input, &mut argv),
        ProviderName::Gemini => gemini(input, &dir, &mut argv, &mut files),
    }
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
    }
    if let Some((rules, _)) = &input.prefix_rules
        && let Ok(permissions) = serde_json::from_str::<serde_json::Value>(rules)
        && let Some(p) = permissions.get("permissions")
    {
        settings.insert("permissions".into(), p.clone());
    }
    let settings_path = dir.join("settings.json");
    files.insert(
        settings_path.to_string_lossy().into_owned(),
        serde_json::to_string_pretty(&settings).unwrap_or_default() + "\n",
    );
    argv.extend([
        "--settings".into(),
        settings_path.to_string_lossy().into_owned(),
    ]);
    if let Some(servers) = &spec.mcp_servers {
        let mcp_path = dir.join("mcp.json");
        let entries: serde_json::Map<String, serde_json::Value> = servers
            .iter()
            .filter_map(|name| {
                let (command, args) = proxy_server(input, name)?;
                Some((name.clone(), json!({ "command": command, "args": args })))
            })
            .collect();
        files.insert(
            mcp_path.to_string_lossy().into_owned(),
            serde_json::to_string_pretty(&json!({ "mcpServers": entries })).unwrap_or_default()
                + "\n",
        );
        argv.extend([
            "--mcp-config".into(),
            mcp_path.to_string_lossy().into_owned(),
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
}

fn codex(input: &CompileInput<'_>, argv: &mut Vec<String>) {
    let spec = input.spec;
    let override_ = |argv: &mut Vec<String>, key: &str, value: String| {
        argv.extend(["-c".into(), format!("{key}={value}")]);
    };
    if let Some((exe, args)) = hook_args(input, "codex") {
        let command = hook::shell_command(&exe, &args);
        let group = format!(
            "[{{matcher=\"*\",hooks=[{{type=\"command\",command={},timeout=10}}]}}]",
            toml::Value::String(command)
        );
        override_(argv, "hooks.PreToolUse", group);
        // The session-flag layer needs trust; these hooks are the plan's own.
        argv.push("--dangerously-bypass-hook-trust".into());
    }
    argv.extend([
        "--cd".into(),
        input.workspace.to_string_lossy().into_owned(),
    ]);
    if let Some(model) = &spec.model {
        argv.extend(["--model".into(), model.clone()]);
    }
    if !input.write_roots.is_empty() || spec.network.is_some() {
        argv.extend(["--sandbox".into(), "workspace-write".into()]);
        let roots: Vec<toml::Value> = input
            .write_roots
            .iter()
            .map(|r| toml::Value::String(r.to_string_lossy().into_owned()))
            .collect();
        override_(
            argv,
            "sandbox_workspace_write.writable_roots",
            toml::Value::Array(roots).to_string(),
        );
        override_(
            argv,
            "sandbox_workspace_write.network_access",
            (spec.network == Some(Network::On)).to_string(),
        );
    }
    match spec.approval {
        Some(Approval::Prompt) => argv.extend(["--ask-for-approval".into(), "on-request".into()]),
        Some(Approval::Never) => argv.extend(["--ask-for-approval".into(), "never".into()]),
        None => {}
    }
    if let Some(servers) = &spec.mcp_servers {
        let mut table = toml::Table::new();
        for name in servers {
            if let Some((command, args)) = proxy_server(input, name) {
                let mut server = toml::Table::new();
                server.insert("command".into(), toml::Value::String(command));
                server.insert(
                    "args".into(),
                    toml::Value::Array(args.into_iter().map(toml::Value::String).collect()),
                );
                table.insert(name.clone(), toml::Value::Table(server));
            }
        }
        override_(argv, "mcp_servers", inline_table(&table));
    }
}

/// A TOML table as one inline table (what `-c key=value` reads).
fn inline_table(table: &toml::Table) -> String {
    let items: Vec<String> = table
        .iter()
        .map(|(k, v)| {
            let value = match v {
                toml::Value::Table(t) => inline_table(t),
                other => other.to_string(),
            };
            format!("{}={value}", toml::Value::String(k.clone()))
        })
        .collect();
    format!("{{{}}}", items.join(","))
}

fn gemini(
    input: &CompileInput<'_>,
    dir: &Path,
    argv: &mut Vec<String>,
    files: &mut BTreeMap<String, String>,
) {
    let spec = input.spec;
    let mut settings = serde_json::Map::new();
    if let Some((exe, args)) = hook_args(input, "gemini") {
        let command = hook::shell_command(&exe, &args);
        if let serde_json::Value::Object(fragment) = crate::gemini::hook_settings(&command, 10_000)
        {
            settings.extend(fragment);
        }
    }
    if let Some(servers) = &spec.mcp_servers {
        let entries: serde_json::Map<String, serde_json::Value> = servers
            .iter()
            .filter_map(|name| {
                let (command, args) = proxy_server(input, name)?;
                Some((name.clone(), json!({ "command": command, "args": args })))
            })
            .collect();
        settings.insert("mcpServers".into(), serde_json::Value::Object(entries));
    }
    let settings_path = dir.join("settings.json");
    files.insert(
        settings_path.to_string_lossy().into_owned(),
        serde_json::to_string_pretty(&settings).unwrap_or_default() + "\n",
    );
    // The plan's settings as Gemini's system settings (the highest scope), set on the command
    // line so the plan shows it.
    argv.insert(0, "env".into());
    argv.insert(
        1,
        format!(
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH={}",
            settings_path.to_string_lossy()
        ),
    );
    if let Some(model) = &spec.model {
        argv.extend(["--model".into(), model.clone()]);
    }
    if spec.approval == Some(Approval::Prompt) {
        argv.extend(["--approval-mode".into(), "default".into()]);
    }
    if let Some(servers) = &spec.mcp_servers {
        argv.push("--allowed-mcp-server-names".into());
        argv.push(if servers.is_empty() {
            String::new()
        } else {
            servers.join(",")
        });
    }
}

/// The report: each requested control, as the provider fares with it.
fn report(provider: ProviderName, input: &CompileInput<'_>) -> ControlReport {
    let mut report = ControlReport::default();
    for control in input.spec.requested() {
        let fare = match &input.probe.unsupported {
            Some(why) => Unsupported(format!("{provider} is unsupported here: {why}")),
            None => fare(provider, control, input),
        };
        let (list, by, basis, detail) = match fare {
            Enforced(by, basis, d) => (&mut report.enforced, by, basis, d),
            Degraded(by, basis, d) => (&mut report.degraded, by, basis, d),
            Unsupported(d) => (&mut report.unsupported, Enforcer::Nobody, Basis::None, d),
        };
        list.push(ControlEntry {
            control,
            by,
            basis,
            detail,
        });
    }
    report
}

/// How `provider` fares with `control` (docs/harness.md, the matrix).
fn fare(provider: ProviderName, control: Control, input: &CompileInput<'_>) -> Fare {
    use Basis::{OsEvidence, ProviderClaim};
    use Enforcer::{OsBackend, Provider, WardenHook};
    match control {
        Control::ToolsPolicy => match provider {
            ProviderName::Codex => Degraded(
                WardenHook,
                ProviderClaim,
                "`warden hook codex` decides shell commands, apply_patch and MCP tools; Codex's web search and other built-in tools emit no PreToolUse".into(),
            ),
            _ => Enforced(
                WardenHook,
                ProviderClaim,
                format!("`warden hook {provider}` decides every tool call (matcher `*`)"),
            ),
        },
        Control::HookPreTool => match provider {
            ProviderName::ClaudeCode => Enforced(
                Provider,
                ProviderClaim,
                "PreToolUse hook in the plan's `--settings` file (never launched with `--bare`, which skips hooks)".into(),
            ),
            ProviderName::Codex => Enforced(
                Provider,
                ProviderClaim,
                "PreToolUse hook as a `-c hooks.PreToolUse` override, trusted for this session with `--dangerously-bypass-hook-trust`".into(),
            ),
            ProviderName::Gemini => Degraded(
                Provider,
                ProviderClaim,
                "BeforeTool hook in the plan's settings; Gemini loads settings hooks only in a trusted folder, and skips them in an untrusted one".into(),
            ),
        },
        Control::ShellPrefixRules => match (&input.prefix_rules, provider) {
            (Some((_, true)), ProviderName::ClaudeCode) => Enforced(
                Provider,
                ProviderClaim,
                "the policy exported as Claude Code `permissions` in the plan's settings".into(),
            ),
            (Some((_, false)), ProviderName::ClaudeCode) => Degraded(
                Provider,
                ProviderClaim,
                "the policy exported as Claude Code `permissions`, some rules approximated (toward stricter) or inexpressible".into(),
            ),
            (None, ProviderName::ClaudeCode) => Unsupported("the policy could not be exported".into()),
            (_, other) => Degraded(
                WardenHook,
                ProviderClaim,
                format!("{other}'s own rules are not installed by the plan; shell commands are held to the policy by the hook alone"),
            ),
        },
        Control::FilesystemWriteRoots => {
            if input.os.write_roots {
                Enforced(
                    OsBackend,
                    OsEvidence,
                    "Landlock around the provider's process and everything it starts: writes only under the write roots and the provider's own state folders".into(),
                )
            } else {
                match provider {
                    ProviderName::Codex => Enforced(
                        Provider,
                        ProviderClaim,
                        "`--sandbox workspace-write` with `sandbox_workspace_write.writable_roots`".into(),
                    ),
                    ProviderName::ClaudeCode => Degraded(
                        WardenHook,
                        ProviderClaim,
                        "Landlock is not proven here; the hook decides Edit/Write paths, and Claude Code's sandbox covers Bash only".into(),
                    ),
                    ProviderName::Gemini => Degraded(
                        WardenHook,
                        ProviderClaim,
                        "Landlock is not proven here; the hook decides write_file/replace paths only".into(),
                    ),
                }
            }
        }
        Control::NetworkOff => match provider {
            ProviderName::Codex => Enforced(
                Provider,
                ProviderClaim,
                "`--sandbox workspace-write` with `sandbox_workspace_write.network_access=false`: commands run without network".into(),
            ),
            ProviderName::ClaudeCode => Degraded(
                WardenHook,
                ProviderClaim,
                "the agent needs the network for its model; the hook decides web fetches and shell commands, but no OS mechanism cuts the tools' network".into(),
            ),
            ProviderName::Gemini => Unsupported(
                "Gemini's sandbox leaves the network on, and the agent needs it for its model".into(),
            ),
        },
        Control::NetworkAllowlist => match provider {
            ProviderName::ClaudeCode | ProviderName::Gemini => Degraded(
                WardenHook,
                ProviderClaim,
                "the hook holds web fetches to the policy's domain rules; shell commands can still reach any host".into(),
            ),
            ProviderName::Codex => Unsupported(
                "Codex's sandbox turns the network on or off, never per domain".into(),
            ),
        },
        Control::ApprovalPrompt => Enforced(
            Provider,
            ProviderClaim,
            match provider {
                ProviderName::ClaudeCode => "`--permission-mode default`",
                ProviderName::Codex => "`--ask-for-approval on-request`",
                ProviderName::Gemini => "`--approval-mode default`",
            }
            .into(),
        ),
        Control::McpServerAllowlist => match provider {
            ProviderName::ClaudeCode => Enforced(
                Provider,
                ProviderClaim,
                "`--mcp-config` with the plan's servers and `--strict-mcp-config`".into(),
            ),
            ProviderName::Gemini => Enforced(
                Provider,
                ProviderClaim,
                "`--allowed-mcp-server-names`".into(),
            ),
            ProviderName::Codex => Degraded(
                Provider,
                ProviderClaim,
                "`-c mcp_servers` replaces the user's servers, but a project's `.codex/config.toml` can add more; the hook still decides their calls".into(),
            ),
        },
        Control::EnvironmentAllowlist => {
            if input.os.environment {
                Enforced(
                    OsBackend,
                    OsEvidence,
                    "the launch clears the environment to the allowlist".into(),
                )
            } else {
                Unsupported("the OS backend did not prove its environment allowlist".into())
            }
        }
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
                os: OsBackend { write_roots, environment },
                prefix_rules: Some(("{\"permissions\":{}}".into(), exact)),
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
