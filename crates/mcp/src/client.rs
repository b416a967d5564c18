//! The MCP client, private to this crate: one connection to an admitted server, with `initialize` bounded in time, `tools/list`
//! read page by page (bounded), calls (a call's progress relayed to whoever waits on it, and a
//! call abandoned by its caller cancelled on the server), and a flag a server raises with
//! `notifications/tools/list_changed`. A server is reached over its pipes or, for an admitted
//! URL, over Streamable HTTP.
//!
//! Nothing here is public: a tool call reaches a server only through [`crate::tool::McpTool`],
//! which only the executor invokes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientConfig, ClientRequest, JsonObject, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, RequestId, ServerResult,
};
use rmcp::service::{NotificationContext, Peer, PeerRequestOptions, RunningService};
use rmcp::transport::IntoTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig, StreamableHttpError,
};
use rmcp::transport::worker::WorkerQuitReason;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::pins::ToolDefinition;
use crate::relay::{self, Progress};

/// The most `tools/list` pages read from one server (a server that never stops paging is an
/// error, not a hang).
pub(crate) const MAX_PAGES: usize = 256;
/// The most tools one server may offer.
pub(crate) const MAX_TOOLS: usize = 10_000;
/// The longest message a server may send (one line of JSON-RPC). A longer one ends the
/// connection: a pending call's outcome is then ambiguous at once, instead of waiting out its
/// timeout for an answer that was dropped.
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// A server's output, cut off (end of stream) as soon as one line grows past
/// [`MAX_MESSAGE_BYTES`].
struct LineCap<R> {
    inner: R,
    line: usize,
    cut: bool,
}

impl<R: AsyncRead + Unpin> AsyncRead for LineCap<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.cut {
            return std::task::Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if let std::task::Poll::Ready(Ok(())) = &polled {
            let read = &buf.filled()[before..];
            let mut line = self.line;
            for &b in read {
                line = if b == b'\n' { 0 } else { line + 1 };
                if line > MAX_MESSAGE_BYTES {
                    self.cut = true;
                    buf.set_filled(before);
                    tracing::warn!(
                        "an MCP server sent a message over {MAX_MESSAGE_BYTES} bytes: connection closed"
                    );
                    return std::task::Poll::Ready(Ok(()));
                }
            }
            self.line = line;
        }
        polled
    }
}

/// Why a connection or a listing failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// `initialize` did not complete.
    #[error("MCP server `{server}` did not initialize: {message}")]
    Initialize {
        /// The server.
        server: String,
        /// What failed.
        message: String,
    },
    /// `initialize` was not answered in time.
    #[error("MCP server `{server}` did not answer initialize within {seconds} s")]
    InitializeTimeout {
        /// The server.
        server: String,
        /// The bound.
        seconds: u64,
    },
    /// A request failed (a protocol error, a closed transport, a timeout).
    #[error("MCP server `{server}`: {what} failed: {message}")]
    Request {
        /// The server.
        server: String,
        /// The request.
        what: &'static str,
        /// What failed.
        message: String,
    },
    /// The listing did not end within the bounds.
    #[error("MCP server `{server}` offers more than {MAX_TOOLS} tools or {MAX_PAGES} pages")]
    TooMany {
        /// The server.
        server: String,
    },
}

/// How a call ended, when it did not return a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CallError {
    /// The server answered with an error: the call did not run (or says so).
    #[error("{0}")]
    Refused(String),
    /// The request may have reached the server, and no answer came (the server died, the
    /// transport closed, the time ran out): whether it took effect is unknown.
    #[error("{0}")]
    Ambiguous(String),
}

/// Where the progress of calls in flight goes, by the progress token of their request.
type ProgressRoutes =
    Arc<Mutex<HashMap<ProgressToken, tokio::sync::mpsc::UnboundedSender<Progress>>>>;

/// Watches a server's notifications: `tools/list_changed` raises a flag; a call's
/// `notifications/progress` goes to whoever waits on that call.
#[derive(Debug, Clone, Default)]
struct Watcher {
    tools_changed: Arc<AtomicBool>,
    progress: ProgressRoutes,
}

impl ClientHandler for Watcher {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.tools_changed.store(true, Ordering::SeqCst);
        std::future::ready(())
    }

    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let routes = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        // Progress for a request nobody waits on (or with a made-up token) goes nowhere.
        if let Some(to) = routes.get(&params.progress_token) {
            let _ = to.send(Progress {
                progress: params.progress,
                total: params.total,
                message: params.message,
            });
        }
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::default();
        config.client_info.name = "warden".into();
        config.client_info.version = env!("CARGO_PKG_VERSION").into();
        config
    }
}

/// A connection to one server.
pub(crate) struct Connection {
    server: String,
    service: RunningService<RoleClient, Watcher>,
    tools_changed: Arc<AtomicBool>,
    progress: ProgressRoutes,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects over `reader` (the server's output) and `writer` (its input); `initialize`
    /// must complete within `timeout`.
    pub(crate) async fn connect(
        server: &str,
        reader: impl AsyncRead + Send + Unpin + 'static,
        writer: impl AsyncWrite + Send + Unpin + 'static,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        let reader = LineCap {
            inner: reader,
            line: 0,
            cut: false,
        };
        Self::initialize(server, (reader, writer), timeout).await
    }

    /// Connects to the Streamable HTTP endpoint `url` (admitted: `https`, an allowed host);
    /// `initialize` must complete within `timeout`. TLS is verified against the machine's
    /// root certificates; redirects are not followed (a redirect could leave the admitted
    /// host) and no proxy is used; a response larger than [`MAX_MESSAGE_BYTES`] ends it.
    pub(crate) async fn dial(
        server: &str,
        url: &url::Url,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        let refused = |message: String| ClientError::Initialize {
            server: server.to_owned(),
            message,
        };
        if url.scheme() != "https" {
            return Err(refused(format!(
                "`{url}`: only https URLs are dialled (Streamable HTTP); `{}` is not",
                url.scheme()
            )));
        }
        let client = http_client().map_err(refused)?;
        let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
            .max_sse_event_size(MAX_MESSAGE_BYTES)
            .max_json_response_size(MAX_MESSAGE_BYTES);
        let transport = StreamableHttpClientTransport::with_client(client, config);
        Self::initialize(server, transport, timeout).await
    }

    /// `initialize` over `transport`, within `timeout`.
    async fn initialize<T, E, A>(
        server: &str,
        transport: T,
        timeout: Duration,
    ) -> Result<Self, ClientError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let watcher = Watcher::default();
        let tools_changed = Arc::clone(&watcher.tools_changed);
        let progress = Arc::clone(&watcher.progress);
        let service = match tokio::time::timeout(timeout, watcher.serve(transport)).await {
            Err(_) => {
                return Err(ClientError::InitializeTimeout {
                    server: server.to_owned(),
                    seconds: timeout.as_secs().max(1),
                });
            }
            Ok(Err(e)) => {
                return Err(ClientError::Initialize {
                    server: server.to_owned(),
                    message: initialize_error(&e),
                });
            }
            Ok(Ok(service)) => service,
        };
        Ok(Self {
            server: server.to_owned(),
            service,
            tools_changed,
            progress,
        })
    }

    /// The server's name.
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// Whether the server said its tools changed since the last call of this (and clears it).
    pub(crate) fn take_tools_changed(&self) -> bool {
        self.tools_changed.swap(false, Ordering::SeqCst)
    }

    /// Every tool the server offers, page by page, each as the server sent it; bounded in
    /// pages and tools, and each page in time.
    pub(crate) async fn list_tools(
        &self,
        timeout: Duration,
    ) -> Result<Vec<ToolDefinition>, ClientError> {
        let fail = |message: String| ClientError::Request {
            server: self.server.clone(),
            what: "tools/list",
            message,
        };
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = cursor
                .take()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let page = tokio::time::timeout(timeout, self.service.peer().list_tools(params))
                .await
                .map_err(|_| fail(format!("no answer within {} s", timeout.as_secs())))?
                .map_err(|e| fail(e.to_string()))?;
            for tool in page.tools {
                let raw = serde_json::to_value(&tool).map_err(|e| fail(e.to_string()))?;
                out.push(ToolDefinition {
                    server: self.server.clone(),
                    name: tool.name.to_string(),
                    raw,
                });
                if out.len() > MAX_TOOLS {
                    return Err(ClientError::TooMany {
                        server: self.server.clone(),
                    });
                }
            }
            match page.next_cursor {
                Some(next) if !next.is_empty() => cursor = Some(next),
                _ => return Ok(out),
            }
        }
        Err(ClientError::TooMany {
            server: self.server.clone(),
        })
    }

    /// Calls `tool` (its name on the server) with `arguments`, waiting at most `timeout`.
    /// The server's progress on it goes to the relay of the caller's task, if it has one
    /// ([`relay::scope`]); a call dropped before its answer (its caller cancelled) is
    /// cancelled on the server with `notifications/cancelled`.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Value,
        timeout: Duration,
    ) -> Result<CallToolResult, CallError> {
        let arguments: Option<JsonObject> = match arguments {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => {
                return Err(CallError::Refused(format!(
                    "arguments must be a JSON object, not {other}"
                )));
            }
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let peer = self.service.peer();
        let handle = match peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            // Nothing was sent: the call did not reach the server.
            Err(e) => {
                return Err(CallError::Refused(format!(
                    "MCP server `{}`: the call could not be sent ({e})",
                    self.server
                )));
            }
        };
        let _route =
            relay::progress().map(|to| Route::new(&self.progress, &handle.progress_token, to));
        let mut abandoned = Abandoned {
            peer: Some(peer.clone()),
            id: handle.id.clone(),
        };
        let answer = tokio::time::timeout(timeout, handle.await_response()).await;
        if answer.is_ok() {
            abandoned.peer = None;
        }
        match answer {
            Err(_) => Err(CallError::Ambiguous(format!(
                "MCP server `{}` did not answer within {} s",
                self.server,
                timeout.as_secs()
            ))),
            Ok(Ok(ServerResult::CallToolResult(result))) => Ok(result),
            Ok(Ok(_)) => Err(CallError::Ambiguous(format!(
                "MCP server `{}` answered the call with something other than a tool result",
                self.server
            ))),
            Ok(Err(ServiceError::McpError(e))) => Err(CallError::Refused(format!(
                "MCP server `{}` answered with an error: {}",
                self.server, e.message
            ))),
            Ok(Err(e)) => Err(CallError::Ambiguous(format!(
                "MCP server `{}`: the connection failed during the call ({e})",
                self.server
            ))),
        }
    }
}

/// A call's progress route, removed when the call ends.
struct Route<'a> {
    routes: &'a ProgressRoutes,
    token: ProgressToken,
}

impl<'a> Route<'a> {
    fn new(
        routes: &'a ProgressRoutes,
        token: &ProgressToken,
        to: tokio::sync::mpsc::UnboundedSender<Progress>,
    ) -> Self {
        routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(token.clone(), to);
        Self {
            routes,
            token: token.clone(),
        }
    }
}

impl Drop for Route<'_> {
    fn drop(&mut self) {
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.token);
    }
}

/// A request still waiting for its answer when dropped (its caller was cancelled, or gave up
/// waiting) tells the server with `notifications/cancelled`.
struct Abandoned {
    peer: Option<Peer<RoleClient>>,
    id: RequestId,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let params = CancelledNotificationParam::new(
            Some(self.id.clone()),
            Some("the caller of this call cancelled it".into()),
        );
        runtime.spawn(async move {
            let _ = peer.notify_cancelled(params).await;
        });
    }
}

/// Why `initialize` failed, with the causes under a transport's error (rmcp does not chain
/// them: a TLS failure would otherwise read as "error sending request").
fn initialize_error(e: &rmcp::service::ClientInitializeError) -> String {
    match e {
        rmcp::service::ClientInitializeError::TransportError { error, context } => {
            type HttpError = StreamableHttpError<reqwest::Error>;
            let inner = error.error.as_ref();
            let http = inner.downcast_ref::<HttpError>().or_else(|| {
                match inner.downcast_ref::<WorkerQuitReason<HttpError>>() {
                    Some(WorkerQuitReason::Fatal { error, .. }) => Some(error),
                    _ => None,
                }
            });
            match http {
                Some(StreamableHttpError::Client(client)) => {
                    format!("{context}: {}", with_causes(client))
                }
                _ => format!("{context}: {}", with_causes(inner)),
            }
        }
        other => with_causes(other),
    }
}

/// An error with every cause under it (a TLS failure sits a few levels below "error sending
/// request"), each said once.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let said = c.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = c.source();
    }
    text
}

/// The HTTP client for URL servers: rustls on the ring provider, the machine's root
/// certificates (`SSL_CERT_FILE` / `SSL_CERT_DIR` when set), https only, no redirects, no
/// proxy.
fn http_client() -> Result<reqwest::Client, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
        return Err(format!(
            "no root certificate to verify the server with ({})",
            if errors.is_empty() {
                "none found".to_owned()
            } else {
                errors.join("; ")
            }
        ));
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .https_only(true)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())
}
