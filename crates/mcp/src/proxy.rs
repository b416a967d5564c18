//! The policy-enforcing proxy: an MCP server (over stdio) that offers the admitted servers'
//! tools and runs every `tools/call` through the executor.
//!
//! - `tools/list` offers only tools that are registered, pinned (not quarantined) and not
//!   removed by a bare deny rule. With one upstream server its tools keep their own names (a
//!   drop-in replacement in a client's configuration); with several they are
//!   `{server}__{tool}`. Policy rules always name `{server}__{tool}`.
//! - `tools/call`: deny → an `isError` result naming the rule, nothing forwarded; ask → an
//!   `isError` result saying approval is required (this version does not elicit); allow → the
//!   upstream result, secrets redacted when the policy sets `redact_results`.
//! - Upstream servers are never sent the client's roots (Warden's client declares none), so
//!   a server that would replace its own allow-list with the client's roots keeps its own.
//! - A malformed message from the client is answered with a protocol error by the SDK; the
//!   proxy keeps serving.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServiceExt};
use serde_json::{Value, json};
use warden_contracts::{
    ActionRef, BackendRef, ContextId, ExecutionContext, ExecutionOutcome, ExecutionRequest,
    ExecutionScopeRef, Executor as _, PrincipalId, PrincipalKind, PrincipalRef, RequestId, ScopeId,
};
use warden_executor::{ActionExecutor, Tool};
use warden_policy::{GuardOutcome, GuardSet, PolicySnapshot};

use crate::discovery::ServerConnection;
use crate::pins::{PinState, Pins};
use crate::tool::McpTool;

/// One tool the proxy may offer.
#[derive(Debug, Clone)]
pub struct Offered {
    /// The name the client sees.
    pub client_name: String,
    /// The tool (its descriptor names it `{server}__{tool}`).
    pub tool: Arc<McpTool>,
    /// The definition as the server sent it.
    pub definition: Value,
}

/// The proxy's state.
#[derive(Debug)]
pub struct Proxy {
    executor: Arc<ActionExecutor>,
    policy: Arc<PolicySnapshot>,
    offered: Vec<Offered>,
    redact: Option<GuardSet>,
    calls: AtomicU64,
    scope: ExecutionScopeRef,
    context: ExecutionContext,
    watch: Option<Watch>,
}

/// What the proxy re-lists when a server says its tools changed.
#[derive(Debug)]
struct Watch {
    servers: Vec<ServerConnection>,
    pins: tokio::sync::Mutex<Pins>,
}

impl Proxy {
    /// A proxy over `executor` (whose registry holds `tools`), deciding with `policy`.
    /// `single` says there is exactly one upstream server (its tools keep their own names).
    pub fn new(
        executor: Arc<ActionExecutor>,
        policy: Arc<PolicySnapshot>,
        tools: Vec<(Arc<McpTool>, Value)>,
        single: bool,
    ) -> Result<Self, String> {
        let redact = policy
            .mcp()
            .settings
            .redact_results
            .then(|| policy.guards().clone());
        let offered = tools
            .into_iter()
            .map(|(tool, definition)| {
                let qualified = tool.descriptor().name().to_owned();
                let client_name = if single {
                    definition["name"].as_str().unwrap_or(&qualified).to_owned()
                } else {
                    qualified
                };
                Offered {
                    client_name,
                    tool,
                    definition,
                }
            })
            .collect();
        let (scope, context) = context()?;
        Ok(Self {
            executor,
            policy,
            offered,
            redact,
            calls: AtomicU64::new(0),
            scope,
            context,
            watch: None,
        })
    }

    /// Watches `servers`: when one says its tools changed (`notifications/tools/list_changed`),
    /// the proxy lists them again before its next answer, and a definition that differs from
    /// its pin is quarantined (a rug pull) until `warden mcp pin` approves it; the pins are
    /// saved to their file.
    pub fn watching(mut self, servers: Vec<ServerConnection>, pins: Pins) -> Self {
        self.watch = Some(Watch {
            servers,
            pins: tokio::sync::Mutex::new(pins),
        });
        self
    }

    /// Lists again every watched server that said its tools changed.
    async fn recheck(&self) {
        let Some(watch) = &self.watch else {
            return;
        };
        let require = self.policy.mcp().settings.require_pin_approval;
        for server in &watch.servers {
            if !server.tools_changed() {
                continue;
            }
            let tools: Vec<Arc<McpTool>> = self
                .offered
                .iter()
                .filter(|o| {
                    matches!(o.tool.descriptor().source(),
                        warden_contracts::ActionSource::Mcp { server: s } if *s == server.server().name)
                })
                .map(|o| Arc::clone(&o.tool))
                .collect();
            let mut pins = watch.pins.lock().await;
            if let Err(e) = server
                .recheck(&tools, &mut pins, self.policy.guards(), require)
                .await
            {
                // A server that cannot be listed again cannot be trusted to be the same.
                tracing::warn!("{e}");
                for t in &tools {
                    t.set_pin_state(PinState::Quarantined(crate::pins::Quarantine::Changed {
                        pinned: format!("could not list again: {e}"),
                    }));
                }
            }
            if let Err(e) = pins.save() {
                tracing::warn!("{e}");
            }
        }
    }

    /// What `tools/list` offers now: pinned, unquarantined, not removed by a bare deny.
    pub fn offered(&self) -> Vec<&Offered> {
        let names: Vec<&str> = self
            .offered
            .iter()
            .map(|o| o.tool.descriptor().name())
            .collect();
        let allowed = self.policy.offer(names);
        self.offered
            .iter()
            .filter(|o| !matches!(o.tool.pin_state(), PinState::Quarantined(_)))
            .filter(|o| allowed.iter().any(|a| a == o.tool.descriptor().name()))
            .collect()
    }

    /// Serves MCP on this process's standard input and output until the client closes it. A
    /// line from the client that is not JSON is answered with a JSON-RPC parse error (`-32700`)
    /// and the proxy keeps serving.
    pub async fn serve_stdio(self) -> Result<(), String> {
        let (input, output, written) = screened(tokio::io::stdin(), tokio::io::stdout());
        let served = self.serve_over(input, output).await;
        // Every answer reaches the client before the process ends.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), written).await;
        served
    }

    /// Serves MCP over `reader` and `writer` (a test's pipes).
    pub async fn serve_over<R, W>(self, reader: R, writer: W) -> Result<(), String>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let running = self
            .serve((reader, writer))
            .await
            .map_err(|e| e.to_string())?;
        running.waiting().await.map_err(|e| e.to_string())?;
        Ok(())
    }

    async fn call(&self, name: &str, arguments: Option<serde_json::Map<String, Value>>) -> Value {
        self.recheck().await;
        // Every registered tool is decided by the executor, offered or not: a bare-denied
        // one is denied naming its rule, a quarantined one refused by its guard.
        let Some(offered) = self.offered.iter().find(|o| o.client_name == name) else {
            return error_result(&format!("no tool `{name}` is offered by this proxy"));
        };
        // The policy's guards see the arguments first: a blocked one never reaches the
        // executor; a redacted one is what gets decided and sent.
        let arguments = match arguments {
            Some(map) => match self.policy.guards().check_json(&Value::Object(map.clone())) {
                GuardOutcome::Pass => Some(map),
                GuardOutcome::Redacted { text, .. } => text.as_object().cloned(),
                GuardOutcome::Blocked { reason, .. } => {
                    return error_result(&format!(
                        "the arguments were blocked by the policy's guards: {reason}"
                    ));
                }
            },
            None => None,
        };
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let outcome = match request(offered.tool.descriptor().name(), arguments, n, &self.scope) {
            Ok(req) => self.executor.execute(req, &self.context).await,
            Err(e) => return error_result(&e),
        };
        match outcome {
            ExecutionOutcome::Succeeded { result, .. } => match &self.redact {
                Some(guards) => match guards.check_json(&result) {
                    GuardOutcome::Pass => result,
                    GuardOutcome::Redacted { text, .. } => text,
                    GuardOutcome::Blocked { reason, .. } => error_result(&format!(
                        "the result was blocked by the policy's guards: {reason}"
                    )),
                },
                None => result,
            },
            other => error_result(&outcome_text(&other)),
        }
    }
}

fn error_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// What a client is told when a call did not succeed.
fn outcome_text(outcome: &ExecutionOutcome) -> String {
    let v = serde_json::to_value(outcome).unwrap_or(Value::Null);
    let status = outcome.status();
    let reason = v
        .get("reason")
        .or_else(|| v.get("approval").and_then(|a| a.get("reason")));
    match (status, reason) {
        ("denied", Some(r)) => format!(
            "denied by Warden: {}",
            r["message"]
                .as_str()
                .unwrap_or("the policy refused the call")
        ),
        ("escalated" | "deferred", Some(r)) => format!(
            "approval required by Warden ({}); this client cannot be asked, so the call did not run",
            r["message"].as_str().unwrap_or("the policy asks")
        ),
        _ => {
            let detail = v
                .get("error")
                .or_else(|| v.get("message"))
                .map(|e| e.to_string())
                .unwrap_or_default();
            format!("the call ended {status}: {detail}")
        }
    }
}

fn request(
    action: &str,
    arguments: Option<serde_json::Map<String, Value>>,
    n: u64,
    scope: &ExecutionScopeRef,
) -> Result<ExecutionRequest, String> {
    ExecutionRequest::new(
        RequestId::new(format!("mcp-{n}")).map_err(|e| e.to_string())?,
        ActionRef::new(action).map_err(|e| e.to_string())?,
        Value::Object(arguments.unwrap_or_default()),
        scope.clone(),
    )
    .map_err(|e| e.to_string())
}

/// The scope and context every proxied call runs in.
fn context() -> Result<(ExecutionScopeRef, ExecutionContext), String> {
    let scope = ExecutionScopeRef::Ephemeral {
        scope_id: ScopeId::new("mcp-proxy").map_err(|e| e.to_string())?,
    };
    let context = ExecutionContext::new(
        ContextId::new("mcp-proxy").map_err(|e| e.to_string())?,
        scope.clone(),
        PrincipalRef {
            id: PrincipalId::new("mcp-client").map_err(|e| e.to_string())?,
            kind: PrincipalKind::Agent,
        },
        BackendRef::new("in_process").map_err(|e| e.to_string())?,
    );
    Ok((scope, context))
}

impl ServerHandler for Proxy {
    fn get_info(&self) -> ServerConfig {
        let mut config: ServerConfig = serde_json::from_value(json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": {"name": "warden-mcp-proxy", "version": env!("CARGO_PKG_VERSION")},
            "instructions": "Tools behind a Warden policy: every call is decided before it reaches its server."
        }))
        .unwrap_or_else(|_| ServerConfig::default());
        config.server_info.name = "warden-mcp-proxy".into();
        config
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.recheck().await;
        let tools: Vec<Value> = self
            .offered()
            .into_iter()
            .map(|o| {
                let mut d = o.definition.clone();
                d["name"] = json!(o.client_name);
                d
            })
            .collect();
        serde_json::from_value(json!({ "tools": tools }))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let result = self.call(&request.name, request.arguments).await;
        let result: CallToolResult = serde_json::from_value(result)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(result.into())
    }
}

/// Puts a line filter between a client and the proxy: each line the client sends that is JSON
/// goes on to the proxy; one that is not is answered with a JSON-RPC parse error, written to
/// the client between the proxy's own lines (never inside one).
fn screened<R, W>(
    client_in: R,
    client_out: W,
) -> (
    tokio::io::DuplexStream,
    tokio::io::DuplexStream,
    tokio::task::JoinHandle<()>,
)
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
    let (proxy_in, mut to_proxy) = tokio::io::duplex(1 << 20);
    let (from_proxy, proxy_out) = tokio::io::duplex(1 << 20);
    let (lines_tx, mut lines_rx) = tokio::sync::mpsc::channel::<String>(64);
    let errors = lines_tx.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(client_in).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.trim().is_empty() {
                continue;
            }
            if serde_json::from_str::<Value>(&line).is_ok() {
                if to_proxy.write_all(line.as_bytes()).await.is_err()
                    || to_proxy.write_all(b"\n").await.is_err()
                {
                    break;
                }
            } else {
                let error = json!({"jsonrpc": "2.0", "id": null,
                    "error": {"code": -32700, "message": "parse error: the line is not JSON"}});
                if errors.send(error.to_string()).await.is_err() {
                    break;
                }
            }
        }
        // The client closed its side: so does the proxy's input.
        let _ = to_proxy.shutdown().await;
    });
    tokio::spawn(async move {
        let mut lines = BufReader::new(from_proxy).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if lines_tx.send(line).await.is_err() {
                break;
            }
        }
    });
    let written = tokio::spawn(async move {
        let mut out = client_out;
        while let Some(line) = lines_rx.recv().await {
            if out.write_all(line.as_bytes()).await.is_err()
                || out.write_all(b"\n").await.is_err()
                || out.flush().await.is_err()
            {
                break;
            }
        }
    });
    (proxy_in, proxy_out, written)
}
