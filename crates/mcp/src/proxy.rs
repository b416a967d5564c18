//! The policy-enforcing proxy: an MCP server (over stdio) that offers the admitted servers'
//! tools and runs every `tools/call` through the executor it composes from the policy.
//!
//! - `tools/list` offers only tools that are registered, pinned (not quarantined) and not
//!   removed by a bare deny rule. With one upstream server its tools keep their own names (a
//!   drop-in replacement in a client's configuration); with several they are
//!   `{server}__{tool}`. Policy rules always name `{server}__{tool}`.
//! - `tools/call`: deny → an `isError` result naming the rule, nothing forwarded; ask → the
//!   client's user is asked through elicitation when the client can be asked and the policy
//!   declares no `[approvers]` (a "yes" runs exactly that call once), otherwise an `isError`
//!   result saying approval is required; allow → the upstream result.
//! - The policy's `[guards]` check every call's arguments (a blocked one never reaches its
//!   server) and result; `redact_results = true` redacts secrets in results even when
//!   `[guards]` does not ask for it.
//! - Progress the server reports on a call reaches the client under the client's progress
//!   token; a call the client cancels is cancelled in the executor (recorded as such when
//!   governed) and on the server.
//! - Governed ([`ProxyOptions::governed`]), every call is one operation on the task
//!   boundary's chain: decided, invoked and ended, with hash-chained evidence.
//! - Upstream servers are never sent the client's roots (Warden's client declares none), so
//!   a server that would replace its own allow-list with the client's roots keeps its own.
//! - A malformed message from the client is answered with a protocol error by the SDK; the
//!   proxy keeps serving.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ServerConfig,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData, RoleServer, ServiceExt};
use serde_json::{Value, json};
use warden_contracts::{
    ExecutionOutcome, ExecutionRequest, PrincipalId, PrincipalKind, PrincipalRef,
};
use warden_executor::{
    ApprovalError, CancelToken, ExecuteOptions, Governed, Registry, ReviewLoop, Runtime, Tool,
    ToolCall,
};
use warden_policy::PolicySnapshot;

use crate::discovery::ServerConnection;
use crate::elicit::ClientApproval;
use crate::pins::{PinState, Pins};
use crate::relay;
use crate::tool::McpTool;

/// How long the client's user has to answer a question about an escalated call; no answer
/// refuses it.
pub const QUESTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

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

/// How the proxy is composed.
#[derive(Debug, Default)]
pub struct ProxyOptions {
    /// There is exactly one upstream server: its tools keep their own names.
    pub single: bool,
    /// Govern every call: one operation per call on this chain (start-up recovers as
    /// [`Governed`] says).
    pub governed: Option<Governed>,
}

/// The proxy's state.
#[derive(Debug)]
pub struct Proxy {
    runtime: Runtime,
    policy: Arc<PolicySnapshot>,
    offered: Vec<Offered>,
    watch: Option<Watch>,
    asker: Arc<ClientApproval>,
    review: ReviewLoop,
    /// Set when the client's user refused often enough that the denial bound stopped asking.
    stopped_asking: AtomicBool,
}

/// What the proxy re-lists when a server says its tools changed.
#[derive(Debug)]
struct Watch {
    servers: Vec<ServerConnection>,
    pins: tokio::sync::Mutex<Pins>,
}

impl Proxy {
    /// A proxy over the tools in `registry` (`tools`: the ones it may offer, each with its
    /// definition as the server sent it), deciding with `policy`. The executor is composed
    /// here, from the policy: every table the proxy honours is installed, none is left to the
    /// caller.
    pub async fn new(
        registry: Registry,
        policy: Arc<PolicySnapshot>,
        tools: Vec<(Arc<McpTool>, Value)>,
        options: ProxyOptions,
    ) -> Result<Self, String> {
        let runtime = compose(registry, &policy, options.governed).await?;
        let offered = tools
            .into_iter()
            .map(|(tool, definition)| {
                let qualified = tool.descriptor().name().to_owned();
                let client_name = if options.single {
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
        let asker = Arc::new(ClientApproval::new());
        let review = ReviewLoop::new(Arc::clone(&asker) as _).with_timeout(QUESTION_TIMEOUT);
        Ok(Self {
            runtime,
            policy,
            offered,
            watch: None,
            asker,
            review,
            stopped_asking: AtomicBool::new(false),
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

    /// The runtime every call goes through (its governance, to close the session's boundary).
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
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

    /// One `tools/call`: through the executor (cancelled when the client cancels it, its
    /// server's progress relayed), an escalation asked of the client's user when it can be.
    async fn call(
        &self,
        name: &str,
        arguments: Option<serde_json::Map<String, Value>>,
        client: &RequestContext<RoleServer>,
    ) -> Value {
        self.recheck().await;
        // Every registered tool is decided by the executor, offered or not: a bare-denied
        // one is denied naming its rule, a quarantined one refused by its precondition.
        let Some(offered) = self.offered.iter().find(|o| o.client_name == name) else {
            return error_result(&format!("no tool `{name}` is offered by this proxy"));
        };
        let call = ToolCall::new(
            offered.tool.descriptor().name(),
            Value::Object(arguments.unwrap_or_default()),
        );
        let request = match self.runtime.request(&call) {
            Ok(req) => req,
            Err(refused) => return error_result(&outcome_text(&refused)),
        };
        let cancel = CancelToken::new();
        let cancelled = client.ct.clone();
        let on_cancel = {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                cancelled.cancelled().await;
                cancel.cancel();
            })
        };
        let (progress, forwarded) = forward_progress(client);
        let outcome = relay::scope(progress.clone(), async {
            let outcome = self
                .runtime
                .executor()
                .execute_with(
                    request.clone(),
                    self.runtime.context(),
                    ExecuteOptions::new().cancel(cancel.clone()),
                )
                .await;
            self.answer_escalation(&request, outcome, client, &cancel)
                .await
        })
        .await;
        on_cancel.abort();
        drop(progress);
        if let Some(forwarded) = forwarded {
            // Progress sent before the answer reaches the client before it.
            let _ = forwarded.await;
        }
        match outcome {
            ExecutionOutcome::Succeeded { result, .. } => result,
            other => error_result(&outcome_text(&other)),
        }
    }

    /// An escalated call is asked of the client's user, when the client can be asked and the
    /// policy accepts the local operator's approval; anything else stays as it is.
    async fn answer_escalation(
        &self,
        request: &ExecutionRequest,
        outcome: ExecutionOutcome,
        client: &RequestContext<RoleServer>,
        cancel: &CancelToken,
    ) -> ExecutionOutcome {
        if !matches!(outcome, ExecutionOutcome::Escalated { .. }) || !self.can_ask(&client.peer) {
            return outcome;
        }
        self.asker.connect(&client.peer);
        match self
            .review
            .resolve_cancellable(
                self.runtime.executor(),
                request,
                self.runtime.context(),
                &outcome,
                Some(cancel),
            )
            .await
        {
            Ok(answered) => answered,
            Err(ApprovalError::DenialBound { .. }) => {
                self.stopped_asking.store(true, Ordering::Relaxed);
                outcome
            }
            Err(e) => {
                tracing::warn!("approval: {e}");
                outcome
            }
        }
    }

    /// Whether an escalation may be asked of the client: it declared elicitation, the policy
    /// declares no `[approvers]` (whose signed receipts alone would count), and its user has
    /// not refused often enough to stop the asking.
    fn can_ask(&self, peer: &Peer<RoleServer>) -> bool {
        !self.stopped_asking.load(Ordering::Relaxed)
            && self.policy.approvers().is_empty()
            && peer
                .peer_info()
                .is_some_and(|info| info.capabilities.elicitation.is_some())
    }
}

/// The proxy's runtime: everything the policy declares installed (its `[guards]` on
/// arguments and results), with secrets redacted in results under `redact_results`; calls run
/// as the MCP client, an agent; governed when asked.
async fn compose(
    registry: Registry,
    policy: &Arc<PolicySnapshot>,
    governed: Option<Governed>,
) -> Result<Runtime, String> {
    let client = PrincipalRef {
        id: PrincipalId::new("mcp-client").map_err(|e| e.to_string())?,
        kind: PrincipalKind::Agent,
    };
    let mut builder = Runtime::builder(Arc::clone(policy))
        .tools(registry)
        .principal(client)
        .scope("mcp-proxy");
    if policy.mcp().settings.redact_results {
        builder = builder.redact_results();
    }
    if let Some(governed) = governed {
        builder = builder.governed(governed);
    }
    builder.build().await.map_err(|e| e.to_string())
}

/// Where a call's upstream progress goes: to the client under its own token, when it sent
/// one; otherwise nowhere. The task ends when the sender is dropped.
fn forward_progress(
    client: &RequestContext<RoleServer>,
) -> (
    tokio::sync::mpsc::UnboundedSender<relay::Progress>,
    Option<tokio::task::JoinHandle<()>>,
) {
    let (to, mut from) = tokio::sync::mpsc::unbounded_channel::<relay::Progress>();
    let Some(token) = client.meta.get_progress_token() else {
        return (to, None);
    };
    let peer = client.peer.clone();
    let task = tokio::spawn(async move {
        while let Some(p) = from.recv().await {
            let _ = peer.notify_progress(progress_param(&token, p)).await;
        }
    });
    (to, Some(task))
}

fn progress_param(token: &ProgressToken, p: relay::Progress) -> ProgressNotificationParam {
    let mut param = ProgressNotificationParam::new(token.clone(), p.progress);
    param.total = p.total;
    param.message = p.message;
    param
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
            "approval required by Warden ({}); the call did not run: this client cannot be asked, the policy accepts only its [approvers]' signed receipts, or its user refused too often",
            r["message"].as_str().unwrap_or("the policy asks")
        ),
        _ => {
            let detail = v
                .get("error")
                .or_else(|| v.get("failure").and_then(|f| f.get("message")))
                .or_else(|| v.get("message"))
                .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_owned))
                .unwrap_or_default();
            format!("the call ended {status}: {detail}")
        }
    }
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
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let result = self.call(&request.name, request.arguments, &context).await;
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
