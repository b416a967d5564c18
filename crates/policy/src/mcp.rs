//! The `[mcp]` table: which MCP servers may be started or dialled, and how (docs/mcp.md).
//!
//! Declarations only, and no I/O: the `warden-mcp` crate admits, spawns, dials and proxies.
//! Admission is fail-closed: without `allow_commands` no server is started, without
//! `allow_urls` none is dialled. With several files declaring `[mcp]`, the strictest settings
//! apply (both must allow a transport, allowlists intersect, the smallest connection cap wins)
//! and server names must be unique.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::decl::Role;

/// The connection cap per server when a file sets none.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 5;

/// Environment variable name fragments that are never passed to an MCP server, even when
/// `env_allow` names them: a variable whose upper-cased name contains one is removed. The same
/// list as the guards' sensitive names (docs/design/policy.md, "Sensitive environment names").
pub const DEFAULT_ENV_DENY: [&str; 15] = crate::guard::SENSITIVE_NAMES;

fn default_max_connections() -> u32 {
    DEFAULT_MAX_CONNECTIONS
}

/// The `[mcp]` table as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpDecl {
    /// Whether servers may be started as local commands (default false: none is).
    #[serde(default)]
    pub allow_commands: bool,
    /// The bare command names that may be started; absent, any (a path is never admitted
    /// when a list is given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_allowlist: Option<Vec<String>>,
    /// Whether servers may be dialled by URL (default false: none is).
    #[serde(default)]
    pub allow_urls: bool,
    /// The hosts that may be dialled, compared exactly (case-insensitively); absent, any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_allowlist: Option<Vec<String>>,
    /// Environment variables a started server gets (its environment starts empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_allow: Vec<String>,
    /// More name fragments to remove from a server's environment, beside
    /// [`DEFAULT_ENV_DENY`] (compared case-insensitively).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_deny: Vec<String>,
    /// Connections open at once to one server (default 5); more are refused.
    #[serde(default = "default_max_connections")]
    pub max_connections_per_server: u32,
    /// Redact secrets in tool results (through the `[guards]` secret detectors).
    #[serde(default)]
    pub redact_results: bool,
    /// Quarantine a tool definition not seen before until `warden mcp pin` approves it.
    #[serde(default)]
    pub require_pin_approval: bool,
    /// The servers, by name (`[mcp.servers.NAME]`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub servers: BTreeMap<String, ServerDecl>,
}

/// One `[mcp.servers.NAME]` table: a command to start or a URL to dial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerDecl {
    /// The command to start (a bare name, looked up on `PATH`, or a path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments; it runs in the policy file's folder, so relative paths resolve there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The Streamable HTTP endpoint to dial (`https://…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Whether its tools' annotations (read-only, destructive, …) are believed as hints.
    #[serde(default)]
    pub trusted: bool,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// A local command over stdio.
    Command {
        /// The command as written.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// The folder it runs in: the declaring policy file's (absent for text policies).
        cwd: Option<PathBuf>,
    },
    /// A Streamable HTTP endpoint.
    Url(String),
}

/// A declared server, compiled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpServer {
    /// Its name: its tools are `{name}__{tool}`.
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// Whether its annotations are believed.
    pub trusted: bool,
    /// The file that declared it.
    pub declared_in: String,
}

/// The admission settings every file's `[mcp]` table agreed to: the strictest of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpSettings {
    /// Whether local commands may be started.
    pub allow_commands: bool,
    /// The bare command names that may be started (`None`: any).
    pub command_allowlist: Option<Vec<String>>,
    /// Whether URLs may be dialled.
    pub allow_urls: bool,
    /// The hosts that may be dialled (`None`: any), lower-cased.
    pub url_allowlist: Option<Vec<String>>,
    /// What a started server's environment may hold.
    pub env_allow: Vec<String>,
    /// Name fragments removed from it even when allowed (upper-cased).
    pub env_deny: Vec<String>,
    /// Connections open at once to one server.
    pub max_connections_per_server: u32,
    /// Whether tool results are redacted.
    pub redact_results: bool,
    /// Whether a definition not seen before is quarantined until approved.
    pub require_pin_approval: bool,
}

impl Default for McpSettings {
    /// Fail closed: nothing is started or dialled.
    fn default() -> Self {
        Self {
            allow_commands: false,
            command_allowlist: None,
            allow_urls: false,
            url_allowlist: None,
            env_allow: Vec::new(),
            env_deny: DEFAULT_ENV_DENY.iter().map(|s| (*s).to_owned()).collect(),
            max_connections_per_server: DEFAULT_MAX_CONNECTIONS,
            redact_results: false,
            require_pin_approval: false,
        }
    }
}

/// The compiled `[mcp]` tables of a policy: settings and servers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct McpConfig {
    /// The strictest settings.
    pub settings: McpSettings,
    /// The servers, in name order.
    pub servers: Vec<McpServer>,
    /// Whether any file declared `[mcp]`.
    pub declared: bool,
}

/// Intersects two optional lists (`None` is "any").
fn intersect(a: Option<Vec<String>>, b: Option<Vec<String>>) -> Option<Vec<String>> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(a), Some(b)) => Some(a.into_iter().filter(|x| b.contains(x)).collect()),
    }
}

impl McpConfig {
    /// Merges one file's `[mcp]` table: the strictest settings, and its servers (a name
    /// already declared is an error naming the file that declared it first).
    pub(crate) fn merge(
        &mut self,
        decl: &McpDecl,
        file: &str,
        dir: Option<PathBuf>,
        role: Role,
    ) -> Result<(), String> {
        let s = &mut self.settings;
        let lower = |l: &Option<Vec<String>>| {
            l.as_ref()
                .map(|v| v.iter().map(|h| h.to_ascii_lowercase()).collect::<Vec<_>>())
        };
        if self.declared {
            s.allow_commands &= decl.allow_commands;
            s.allow_urls &= decl.allow_urls;
            s.command_allowlist =
                intersect(s.command_allowlist.take(), decl.command_allowlist.clone());
            s.url_allowlist = intersect(s.url_allowlist.take(), lower(&decl.url_allowlist));
            s.env_allow.retain(|v| decl.env_allow.contains(v));
            s.max_connections_per_server = s
                .max_connections_per_server
                .min(decl.max_connections_per_server);
        } else {
            s.allow_commands = decl.allow_commands;
            s.allow_urls = decl.allow_urls;
            s.command_allowlist.clone_from(&decl.command_allowlist);
            s.url_allowlist = lower(&decl.url_allowlist);
            s.env_allow.clone_from(&decl.env_allow);
            s.max_connections_per_server = decl.max_connections_per_server;
        }
        for d in &decl.env_deny {
            let d = d.to_ascii_uppercase();
            if !s.env_deny.contains(&d) {
                s.env_deny.push(d);
            }
        }
        s.redact_results |= decl.redact_results;
        s.require_pin_approval |= decl.require_pin_approval;
        self.declared = true;
        for (name, server) in &decl.servers {
            if name.is_empty() || name.contains("__") || name.contains(char::is_whitespace) {
                return Err(format!(
                    "server name `{name}` must be non-empty, without spaces or `__` (its tools are `{{server}}__{{tool}}`)"
                ));
            }
            if let Some(first) = self.servers.iter().find(|x| &x.name == name) {
                return Err(format!(
                    "server `{name}` is already declared in {}",
                    first.declared_in
                ));
            }
            let transport = match (&server.command, &server.url) {
                (Some(command), None) => Transport::Command {
                    command: command.clone(),
                    args: server.args.clone(),
                    cwd: dir.clone(),
                },
                (None, Some(url)) if server.args.is_empty() => Transport::Url(url.clone()),
                (None, Some(_)) => {
                    return Err(format!(
                        "server `{name}`: `args` go with `command`, not `url`"
                    ));
                }
                _ => {
                    return Err(format!(
                        "server `{name}` needs exactly one of `command` and `url`"
                    ));
                }
            };
            self.servers.push(McpServer {
                name: name.clone(),
                transport,
                trusted: server.trusted && role.may_be_trusted(),
                declared_in: file.to_owned(),
            });
        }
        self.servers.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(())
    }

    /// The semantics the policy digest covers (not where a server runs).
    pub(crate) fn canonical(&self) -> serde_json::Value {
        if !self.declared {
            return serde_json::Value::Null;
        }
        let servers: Vec<serde_json::Value> = self
            .servers
            .iter()
            .map(|s| {
                let transport = match &s.transport {
                    Transport::Command { command, args, .. } => {
                        serde_json::json!({"command": command, "args": args})
                    }
                    Transport::Url(url) => serde_json::json!({ "url": url }),
                };
                serde_json::json!({"name": s.name, "transport": transport, "trusted": s.trusted})
            })
            .collect();
        serde_json::json!({"settings": self.settings, "servers": servers})
    }
}
