//! `warden mcp …`: `tools` reports every server the policy's `[mcp]` table declares, its
//! admission result, and, for each admitted one (started contained, then asked for its
//! tools), each tool with its hints (and whether they are believed), its pin state and the
//! policy's verdict for a call of it (a refused server is reported with its reason; the others
//! are still listed); `pin` approves definitions; `proxy` serves MCP on stdio in front of the
//! servers, governed with `--evidence` (docs/mcp.md).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use warden_evidence::payload::CloseDisposition;
use warden_executor::{Governance, Registry};
use warden_mcp::admission::ConnectionLimiter;
use warden_mcp::discovery::{LIST_TIMEOUT, ServerConnection};
use warden_mcp::pins::{PinState, Pins};
use warden_mcp::proxy::{Proxy, ProxyOptions};
use warden_mcp::start::{Running, StartError, StartedServer, start};
use warden_mcp::tool::{McpTool, hints_of};
use warden_policy::mcp::{McpServer, McpSettings};
use warden_policy::{Call, PolicySnapshot};
use warden_sandbox::SubprocessBackend;

use crate::error::CliError;
use crate::governed_run::{EvidenceRun, fresh_id, open_evidence};
use crate::{OutputFormat, PolicyArgs};

/// `warden mcp …`.
#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// List every configured server's admission result and each discovered tool with its
    /// hints, pin state and verdict.
    Tools(ToolsArgs),
    /// Serve MCP on stdio: the admitted servers' tools, every call decided by the policy and
    /// run through the executor.
    Proxy(ProxyArgs),
    /// Approve a server's tool definitions as they are now (new ones, or changed ones that
    /// were quarantined).
    Pin(PinArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ToolsArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// The pins file (default `.warden/mcp-pins.json` under the project root).
    #[arg(long, value_name = "PATH")]
    pins: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    format: OutputFormat,
}

pub(crate) fn run(c: &McpCommand, out: &mut impl Write) -> Result<ExitCode, CliError> {
    match c {
        McpCommand::Tools(a) => tools(a, out),
        McpCommand::Proxy(a) => proxy(a),
        McpCommand::Pin(a) => pin(a, out),
    }
}

fn tools(a: &ToolsArgs, out: &mut impl Write) -> Result<ExitCode, CliError> {
    let snapshot = a.policy.snapshot()?;
    let pins_path = pins_file(a.pins.as_ref(), &snapshot.path_env().project_root);
    let mut pins = Pins::load(&pins_path).map_err(|e| CliError::Input(e.to_string()))?;
    let (backend, rt) = contained_runtime()?;
    let servers = rt.block_on(report(&snapshot, &backend, &mut pins));
    // Definitions pinned on first sight are written back (atomically).
    pins.save().map_err(|e| CliError::Input(e.to_string()))?;
    match a.format {
        OutputFormat::Json => {
            for s in &servers {
                writeln!(out, "{s}")?;
            }
        }
        OutputFormat::Text => {
            for s in &servers {
                write_text(s, out)?;
            }
            if servers.is_empty() {
                writeln!(out, "no MCP server is declared ([mcp.servers.NAME])")?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One JSON object per declared server.
async fn report(
    snapshot: &PolicySnapshot,
    backend: &SubprocessBackend,
    pins: &mut Pins,
) -> Vec<Value> {
    let mcp = snapshot.mcp();
    let limiter = ConnectionLimiter::new(mcp.settings.max_connections_per_server);
    let mut out = Vec::new();
    for server in &mcp.servers {
        let started = start_declared(server, &mcp.settings, backend, &limiter).await;
        let started = match started {
            Ok(s) => s,
            Err(e) => {
                // Refused by admission, or admitted and then not started or not connected.
                let admitted = !matches!(e, StartError::Refused(_));
                out.push(
                    json!({"server": server.name, "admitted": admitted, "error": e.to_string()}),
                );
                continue;
            }
        };
        let mut registry = Registry::new();
        let found = started
            .connection
            .discover(
                &mut registry,
                pins,
                snapshot.guards(),
                mcp.settings.require_pin_approval,
            )
            .await;
        let found = match found {
            Ok(f) => f,
            Err(e) => {
                out.push(json!({"server": server.name, "admitted": true, "error": e.to_string()}));
                continue;
            }
        };
        let tools: Vec<Value> = found
            .iter()
            .map(|d| {
                let name = d.definition.qualified();
                let verdict = snapshot.decide(&Call::new(name.clone(), json!({})));
                json!({
                    "tool": name,
                    "registered": d.registered.as_ref().err().map_or(Value::Bool(true), |why| json!(why)),
                    "hints": hints_of(&d.definition, true),
                    "hints_believed": server.trusted,
                    "pin": pin_text(&d.state),
                    "decision": verdict.decision.as_str(),
                    "reason": &*verdict.reason,
                })
            })
            .collect();
        out.push(json!({"server": server.name, "admitted": true, "trusted": server.trusted, "tools": tools}));
    }
    out
}

fn pin_text(state: &PinState) -> String {
    match state {
        PinState::Pinned => "pinned".into(),
        PinState::PinnedNow => "pinned now (first sight)".into(),
        PinState::Quarantined(why) => format!("quarantined: {why}"),
    }
}

fn write_text(s: &Value, out: &mut impl Write) -> Result<(), CliError> {
    let name = s["server"].as_str().unwrap_or_default();
    if let Some(e) = s["error"].as_str() {
        let what = if s["admitted"] == true {
            "admitted, but failed"
        } else {
            "refused"
        };
        writeln!(out, "server {name}: {what}: {e}")?;
        return Ok(());
    }
    let trust = if s["trusted"] == true {
        "trusted: hints believed"
    } else {
        "untrusted: hints not believed"
    };
    writeln!(out, "server {name}: admitted ({trust})")?;
    for t in s["tools"].as_array().into_iter().flatten() {
        let registered = match &t["registered"] {
            Value::Bool(true) => String::new(),
            other => format!(", not registered: {}", other.as_str().unwrap_or_default()),
        };
        writeln!(
            out,
            "  {} → {} ({}){registered}\n    hints {}; {}",
            t["tool"].as_str().unwrap_or_default(),
            t["decision"].as_str().unwrap_or_default(),
            t["reason"].as_str().unwrap_or_default(),
            t["hints"],
            t["pin"].as_str().unwrap_or_default(),
        )?;
    }
    Ok(())
}

#[derive(Debug, Args)]
pub(crate) struct ProxyArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// Serve only these servers (repeatable); default: every declared server. With exactly
    /// one, its tools keep their own names.
    #[arg(long = "server", value_name = "NAME")]
    servers: Vec<String>,
    /// The pins file (default `.warden/mcp-pins.json` under the project root).
    #[arg(long, value_name = "PATH")]
    pins: Option<PathBuf>,
    /// Govern every call: append hash-chained evidence to the SQLite store at PATH (created
    /// if missing), one task boundary for the session, closed when the client disconnects.
    #[arg(long, value_name = "PATH")]
    evidence: Option<PathBuf>,
}

/// `warden mcp proxy`: serves MCP on stdio, every call through the executor.
pub(crate) fn proxy(a: &ProxyArgs) -> Result<ExitCode, CliError> {
    let files = a.policy.files();
    let root = crate::load::project_root(&files, a.policy.project_root.as_deref())?;
    let pins_path = pins_file(a.pins.as_ref(), &root);
    // The pins file and the evidence store are protected from the governed agent like the
    // policy files.
    let mut protected = vec![(pins_path.clone(), "the MCP pins file")];
    protected.extend(crate::load::store_files(
        a.evidence.as_deref(),
        "the evidence store",
    ));
    let snapshot = Arc::new(crate::load::snapshot_protecting(
        &files,
        a.policy.project_root.as_deref(),
        &protected,
    )?);
    let chosen = chosen_servers(&snapshot, &a.servers)?;
    let mut pins = Pins::load(&pins_path).map_err(|e| CliError::Input(e.to_string()))?;
    let (backend, rt) = contained_runtime()?;
    rt.block_on(async {
        let mut evidence = match &a.evidence {
            Some(path) => Some(open_evidence(path, &fresh_id("mcp-proxy"))?),
            None => None,
        };
        let mut registry = Registry::new();
        let (tools, running, connections) =
            start_all(&snapshot, &chosen, &backend, &mut registry, &mut pins).await;
        pins.save().map_err(|e| CliError::Input(e.to_string()))?;
        // The contract: own names with exactly one `--server`, `{server}__{tool}` otherwise.
        let options = ProxyOptions {
            single: a.servers.len() == 1,
            governed: evidence.as_ref().map(EvidenceRun::governed),
        };
        let proxy = Proxy::new(registry, Arc::clone(&snapshot), tools, options)
            .await
            .map_err(|e| match &a.evidence {
                Some(path) => CliError::Input(format!("--evidence {}: {e}", path.display())),
                None => CliError::Input(e),
            })?
            .watching(connections, pins);
        if let Some(ev) = &mut evidence {
            ev.started(proxy.runtime())?;
        }
        let governance = proxy.runtime().governance().cloned();
        let served = proxy.serve_stdio().await.map_err(CliError::Input);
        drop(running);
        if let (Some(ev), Some(governance)) = (&evidence, &governance) {
            close_session(ev, governance).await;
        }
        served?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The declared servers `--server` names (all of them without one); an unknown name is an
/// error naming the declared ones.
fn chosen_servers<'a>(
    snapshot: &'a PolicySnapshot,
    names: &[String],
) -> Result<Vec<&'a McpServer>, CliError> {
    let mcp = snapshot.mcp();
    for name in names {
        if !mcp.servers.iter().any(|s| &s.name == name) {
            return Err(CliError::Input(format!(
                "--server {name}: no such server in [mcp.servers] (declared: {})",
                mcp.servers
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    Ok(mcp
        .servers
        .iter()
        .filter(|s| names.is_empty() || names.contains(&s.name))
        .collect())
}

/// Starts and lists every chosen server, registering their tools. A refused or broken server
/// is reported on stderr; the others keep working.
async fn start_all(
    snapshot: &PolicySnapshot,
    chosen: &[&McpServer],
    backend: &SubprocessBackend,
    registry: &mut Registry,
    pins: &mut Pins,
) -> (
    Vec<(Arc<McpTool>, Value)>,
    Vec<Running>,
    Vec<ServerConnection>,
) {
    let mcp = snapshot.mcp();
    let limiter = ConnectionLimiter::new(mcp.settings.max_connections_per_server);
    let (mut tools, mut running, mut connections) = (Vec::new(), Vec::new(), Vec::new());
    for server in chosen {
        let started = start_declared(server, &mcp.settings, backend, &limiter).await;
        let s = match started {
            Ok(s) => s,
            Err(e) => {
                eprintln!("warden mcp proxy: {e}");
                continue;
            }
        };
        let found = s
            .connection
            .discover(
                registry,
                pins,
                snapshot.guards(),
                mcp.settings.require_pin_approval,
            )
            .await;
        match found {
            Ok(found) => {
                for d in found {
                    match (d.tool, d.registered) {
                        (Some(t), _) => tools.push((t, d.definition.raw)),
                        (None, Err(why)) => {
                            eprintln!("warden mcp proxy: {}: {why}", d.definition.qualified())
                        }
                        (None, Ok(())) => {}
                    }
                }
                let (connection, run) = s.into_parts();
                connections.push(connection);
                running.push(run);
            }
            Err(e) => eprintln!("warden mcp proxy: {e}"),
        }
    }
    (tools, running, connections)
}

/// Closes the session's task boundary and says where its evidence is (on stderr: stdout is
/// the client's). A boundary that cannot be closed (an operation still open) is recovered by
/// the next run.
async fn close_session(ev: &EvidenceRun, governance: &Governance) {
    match governance
        .recorder()
        .close(CloseDisposition::Completed)
        .await
    {
        Ok(r) => eprintln!(
            "warden mcp proxy: evidence chain {} in {} closed at sequence {} head {}",
            ev.chain,
            ev.path.display(),
            r.sequence,
            r.chain_hash
        ),
        Err(e) => eprintln!(
            "warden mcp proxy: evidence chain {} in {} not closed: {e} (the next run recovers it)",
            ev.chain,
            ev.path.display()
        ),
    }
}

#[derive(Debug, Args)]
pub(crate) struct PinArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// The server whose tool definitions to approve.
    #[arg(long = "server", value_name = "NAME")]
    server: String,
    /// Only this tool (its name on the server); default: every tool the server offers now.
    #[arg(long = "tool", value_name = "NAME")]
    tool: Option<String>,
    /// The pins file (default `.warden/mcp-pins.json` under the project root).
    #[arg(long, value_name = "PATH")]
    pins: Option<PathBuf>,
}

/// `warden mcp pin`: approves the server's tool definitions as they are now (a new one, or one
/// that changed since it was pinned), so they are offered again. A description that trips the
/// policy's guards stays quarantined whatever its pin.
fn pin(a: &PinArgs, out: &mut impl Write) -> Result<ExitCode, CliError> {
    let snapshot = a.policy.snapshot()?;
    let mcp = snapshot.mcp();
    let server = mcp
        .servers
        .iter()
        .find(|s| s.name == a.server)
        .ok_or_else(|| {
            CliError::Input(format!(
                "--server {}: no such server in [mcp.servers]",
                a.server
            ))
        })?;
    let pins_path = pins_file(a.pins.as_ref(), &snapshot.path_env().project_root);
    let mut pins = Pins::load(&pins_path).map_err(|e| CliError::Input(e.to_string()))?;
    let (backend, rt) = contained_runtime()?;
    let approved = rt.block_on(async {
        let limiter = ConnectionLimiter::new(mcp.settings.max_connections_per_server);
        let started = start_declared(server, &mcp.settings, &backend, &limiter)
            .await
            .map_err(|e| CliError::Input(e.to_string()))?;
        // Listing compares with the pins but must not pin on its own: a scratch copy.
        let mut scratch = pins.clone();
        let found = started
            .connection
            .discover(&mut Registry::new(), &mut scratch, snapshot.guards(), true)
            .await
            .map_err(|e| CliError::Input(e.to_string()))?;
        let mut approved = Vec::new();
        for d in found {
            if a.tool.as_ref().is_some_and(|t| *t != d.definition.name) {
                continue;
            }
            pins.approve(&d.definition);
            approved.push(d.definition.qualified());
        }
        Ok::<_, CliError>(approved)
    })?;
    if let Some(t) = &a.tool
        && approved.is_empty()
    {
        return Err(CliError::Input(format!(
            "--tool {t}: server `{}` offers no such tool",
            a.server
        )));
    }
    pins.save().map_err(|e| CliError::Input(e.to_string()))?;
    for name in &approved {
        writeln!(out, "pinned {name}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Starts (or dials) a declared server as `settings` admit it, the environment admission
/// filters being this process's own; `initialize` and each listing page are bounded by
/// [`LIST_TIMEOUT`].
async fn start_declared(
    server: &McpServer,
    settings: &McpSettings,
    backend: &SubprocessBackend,
    limiter: &ConnectionLimiter,
) -> Result<StartedServer, StartError> {
    start(
        server,
        settings,
        backend,
        limiter,
        std::env::vars(),
        LIST_TIMEOUT,
    )
    .await
}

/// The pins file: `--pins`, else `.warden/mcp-pins.json` under the project root.
fn pins_file(given: Option<&PathBuf>, project_root: &Path) -> PathBuf {
    given
        .cloned()
        .unwrap_or_else(|| project_root.join(".warden/mcp-pins.json"))
}

/// The sandbox the servers start in (this binary hosts its helper) and a runtime to talk to
/// them.
fn contained_runtime() -> Result<(SubprocessBackend, tokio::runtime::Runtime), CliError> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Input(format!("cannot find this binary's path: {e}")))?;
    let backend = SubprocessBackend::probe(exe).map_err(|e| CliError::Input(e.to_string()))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Input(e.to_string()))?;
    Ok((backend, rt))
}
