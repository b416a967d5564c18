//! [`HarnessSpec`]: one provider-neutral description of how to launch a coding agent (docs/harness.md):
//! the provider and model, the workspace, the Warden policy its tools are decided by, where it
//! may write, its network, its environment, its MCP servers, its approval mode, its budget, and
//! which controls are `required`. Each setting asks for one or more [`Control`]s; the provider's
//! adapter reports who enforces each.
//!
//! ```
//! use warden_harness::spec::{Control, HarnessSpec};
//! let spec = HarnessSpec::parse(r#"
//! provider = "codex"
//! tools = "policy.toml"
//! network = "off"
//! required = ["tools.policy@1", "network.off@1"]
//! "#, "spec.toml")?;
//! assert!(spec.requested().contains(&Control::HookPreTool));
//! # Ok::<(), warden_harness::spec::SpecError>(())
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A coding agent Warden can launch.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderName {
    /// Anthropic's Claude Code (`claude`).
    ClaudeCode,
    /// OpenAI's Codex CLI (`codex`).
    Codex,
    /// Google's Gemini CLI (`gemini`).
    Gemini,
}

impl ProviderName {
    /// Every provider.
    pub const ALL: [ProviderName; 3] = [Self::ClaudeCode, Self::Codex, Self::Gemini];

    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude-code",
            Self::Codex => "codex",
            Self::Gemini => "gemini",
        }
    }

    /// The provider from its name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// The executable the provider installs.
    pub fn executable(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude",
            Self::Codex => "codex",
            Self::Gemini => "gemini",
        }
    }
}

impl fmt::Display for ProviderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A control a spec can ask for, by its namespaced, versioned name.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum Control {
    /// A Warden policy decides every tool call (through the provider's pre-tool hook).
    #[serde(rename = "tools.policy@1")]
    ToolsPolicy,
    /// Shell commands are also held to the provider's own prefix rules, exported from the
    /// policy (defence in depth, and a fallback when the hook does not run).
    #[serde(rename = "shell.prefix_rules@1")]
    ShellPrefixRules,
    /// Writes only under the spec's write roots.
    #[serde(rename = "filesystem.write_roots@1")]
    FilesystemWriteRoots,
    /// The tools' network is off.
    #[serde(rename = "network.off@1")]
    NetworkOff,
    /// The tools reach only the listed domains.
    #[serde(rename = "network.allowlist@1")]
    NetworkAllowlist,
    /// The provider asks a person before consequential actions.
    #[serde(rename = "approval.prompt@1")]
    ApprovalPrompt,
    /// Only the listed MCP servers are started.
    #[serde(rename = "mcp.server_allowlist@1")]
    McpServerAllowlist,
    /// The agent and its tools see only the listed environment variables.
    #[serde(rename = "environment.allowlist@1")]
    EnvironmentAllowlist,
    /// The provider runs Warden's pre-tool hook before tool calls.
    #[serde(rename = "hook.pre_tool@1")]
    HookPreTool,
}

impl Control {
    /// Every control, in report order.
    pub const ALL: [Control; 9] = [
        Self::ToolsPolicy,
        Self::HookPreTool,
        Self::ShellPrefixRules,
        Self::FilesystemWriteRoots,
        Self::NetworkOff,
        Self::NetworkAllowlist,
        Self::ApprovalPrompt,
        Self::McpServerAllowlist,
        Self::EnvironmentAllowlist,
    ];

    /// The namespaced, versioned name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ToolsPolicy => "tools.policy@1",
            Self::ShellPrefixRules => "shell.prefix_rules@1",
            Self::FilesystemWriteRoots => "filesystem.write_roots@1",
            Self::NetworkOff => "network.off@1",
            Self::NetworkAllowlist => "network.allowlist@1",
            Self::ApprovalPrompt => "approval.prompt@1",
            Self::McpServerAllowlist => "mcp.server_allowlist@1",
            Self::EnvironmentAllowlist => "environment.allowlist@1",
            Self::HookPreTool => "hook.pre_tool@1",
        }
    }
}

impl fmt::Display for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The tools' network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// No network for the tools (`network.off@1`).
    Off,
    /// Only `network_allowlist`'s domains (`network.allowlist@1`).
    Allowlist,
    /// The network is not restricted (no control asked for).
    On,
}

/// When the provider asks a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    /// Before consequential actions (`approval.prompt@1`).
    Prompt,
    /// Never (the policy and the sandbox are all there is; no control asked for).
    Never,
}

/// Where the agent may read and write.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Filesystem {
    /// Extra folders it may read (the workspace always).
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// The folders it may write (`filesystem.write_roots@1`); relative to the spec's folder.
    #[serde(default)]
    pub write: Vec<PathBuf>,
}

/// Limits on a run, passed to the provider where it takes them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// The most model turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
}

/// How to launch a coding agent under Warden.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HarnessSpec {
    /// The provider (the command line's `--provider` must agree when both are given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderName>,
    /// The model, passed to the provider as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The workspace the agent works in (default: the spec's folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// When the provider asks a person (`prompt` asks for `approval.prompt@1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    /// A Warden policy file every tool call is decided by (asks for `tools.policy@1`,
    /// `hook.pre_tool@1` and `shell.prefix_rules@1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<PathBuf>,
    /// Read and write roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<Filesystem>,
    /// The tools' network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// The domains the tools may reach when `network = "allowlist"`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_allowlist: Vec<String>,
    /// The environment variables the agent and its tools see (asks for
    /// `environment.allowlist@1`); named, never valued: secrets pass by name at spawn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Vec<String>>,
    /// The MCP servers (of the policy's `[mcp]` table) it may start (asks for
    /// `mcp.server_allowlist@1`; an empty list starts none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<Vec<String>>,
    /// Limits on the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// Controls that must be enforced, or nothing is spawned.
    #[serde(default)]
    pub required: Vec<Control>,
}

/// A spec that cannot be used, with where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Not TOML, or not a spec (an unknown key, a wrong type, an unknown control).
    #[error("{file}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Syntax {
        /// The spec file.
        file: String,
        /// The line, when known.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// The settings contradict each other or leave something out.
    #[error("{file}: {message}")]
    Invalid {
        /// The spec file.
        file: String,
        /// What is wrong.
        message: String,
    },
}

impl HarnessSpec {
    /// Parses and checks a spec (`file` names it in errors).
    pub fn parse(text: &str, file: &str) -> Result<Self, SpecError> {
        let spec: Self = toml::from_str(text).map_err(|e| SpecError::Syntax {
            file: file.to_owned(),
            line: e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1),
            message: e.message().to_owned(),
        })?;
        spec.check(file)?;
        Ok(spec)
    }

    fn check(&self, file: &str) -> Result<(), SpecError> {
        let invalid = |message: String| SpecError::Invalid {
            file: file.to_owned(),
            message,
        };
        match (self.network, self.network_allowlist.is_empty()) {
            (Some(Network::Allowlist), true) => {
                return Err(invalid(
                    "`network = \"allowlist\"` needs `network_allowlist` (the domains)".into(),
                ));
            }
            (Some(Network::Off | Network::On) | None, false) => {
                return Err(invalid(
                    "`network_allowlist` is only read with `network = \"allowlist\"`".into(),
                ));
            }
            _ => {}
        }
        let requested = self.requested();
        let mut seen = BTreeSet::new();
        for control in &self.required {
            if !seen.insert(*control) {
                return Err(invalid(format!("`{control}` is required twice")));
            }
            if !requested.contains(control) {
                return Err(invalid(format!(
                    "`{control}` is required, but nothing in the spec asks for it ({})",
                    what_asks(*control)
                )));
            }
        }
        if self.model.as_deref().is_some_and(str::is_empty) {
            return Err(invalid("`model` is empty".into()));
        }
        Ok(())
    }

    /// The controls this spec asks for, in report order.
    pub fn requested(&self) -> Vec<Control> {
        Control::ALL
            .into_iter()
            .filter(|c| match c {
                Control::ToolsPolicy | Control::HookPreTool | Control::ShellPrefixRules => {
                    self.tools.is_some()
                }
                Control::FilesystemWriteRoots => self
                    .filesystem
                    .as_ref()
                    .is_some_and(|f| !f.write.is_empty()),
                Control::NetworkOff => self.network == Some(Network::Off),
                Control::NetworkAllowlist => self.network == Some(Network::Allowlist),
                Control::ApprovalPrompt => self.approval == Some(Approval::Prompt),
                Control::McpServerAllowlist => self.mcp_servers.is_some(),
                Control::EnvironmentAllowlist => self.environment.is_some(),
            })
            .collect()
    }
}

/// The setting that asks for `control`.
fn what_asks(control: Control) -> &'static str {
    match control {
        Control::ToolsPolicy | Control::HookPreTool | Control::ShellPrefixRules => {
            "set `tools` to a Warden policy file"
        }
        Control::FilesystemWriteRoots => "list `filesystem.write` roots",
        Control::NetworkOff => "set `network = \"off\"`",
        Control::NetworkAllowlist => "set `network = \"allowlist\"` and `network_allowlist`",
        Control::ApprovalPrompt => "set `approval = \"prompt\"`",
        Control::McpServerAllowlist => "list `mcp_servers`",
        Control::EnvironmentAllowlist => "list `environment`",
    }
}

/// The spec's JSON Schema (published in docs/schemas/).
pub fn schema() -> schemars::Schema {
    schemars::schema_for!(HarnessSpec)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn bad_specs_name_the_problem_and_the_line() {
        for (text, says) in [
            ("provider = \"cursor\"\n", "spec.toml:1"),
            (
                "tools = \"p.toml\"\nsandbox = true\n",
                "unknown field `sandbox`",
            ),
            ("required = [\"network.off@2\"]\n", "spec.toml:1"),
            (
                "required = [\"network.off@1\"]\n",
                "nothing in the spec asks for it",
            ),
            ("network = \"allowlist\"\n", "needs `network_allowlist`"),
            (
                "network = \"off\"\nnetwork_allowlist = [\"a\"]\n",
                "only read with",
            ),
            (
                "network = \"off\"\nrequired = [\"network.off@1\", \"network.off@1\"]\n",
                "required twice",
            ),
        ] {
            let err = HarnessSpec::parse(text, "spec.toml")
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{text:?}: {err}");
        }
    }

    #[test]
    fn each_setting_asks_for_its_controls() {
        let spec = HarnessSpec::parse(
            "tools = \"p.toml\"\nnetwork = \"allowlist\"\nnetwork_allowlist = [\"docs.rs\"]\napproval = \"prompt\"\nenvironment = [\"PATH\"]\nmcp_servers = []\n[filesystem]\nwrite = [\".\"]\n",
            "s.toml",
        )
        .unwrap();
        assert_eq!(
            spec.requested(),
            Control::ALL
                .into_iter()
                .filter(|c| *c != Control::NetworkOff)
                .collect::<Vec<_>>()
        );
        assert!(
            HarnessSpec::parse("", "s.toml")
                .unwrap()
                .requested()
                .is_empty()
        );
    }
}
