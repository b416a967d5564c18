//! Discovery: an admitted server's tools into the executor's registry.
//!
//! [`ServerConnection::over`] connects to a server over its pipes (the caller spawned it,
//! contained, from an admitted [`crate::admission::Launch`]), [`ServerConnection::dial`] to an
//! admitted URL over Streamable HTTP; [`ServerConnection::discover`]
//! lists every page of its tools, checks each definition against the pins and the policy's
//! guards, and registers each as `{server}__{tool}` with the executor. A tool name holding
//! `__` (which would read as another server's tool) and a name already registered are refused,
//! each with its reason; the rest of the server's tools are registered.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use warden_executor::Registry;
use warden_policy::GuardSet;
use warden_policy::mcp::McpServer;

use crate::client::{ClientError, Connection};
use crate::pins::{PinState, Pins, ToolDefinition};
use crate::tool::McpTool;

/// How long `initialize` and each `tools/list` page may take.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a tool call may take before its outcome is ambiguous.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// A connection to one admitted server.
#[derive(Debug)]
pub struct ServerConnection {
    server: McpServer,
    connection: Arc<Connection>,
}

/// What discovery did with one tool definition.
#[derive(Debug, Clone)]
pub struct Discovered {
    /// The definition as the server sent it.
    pub definition: ToolDefinition,
    /// Its pin state.
    pub state: PinState,
    /// Whether it was registered, or why not.
    pub registered: Result<(), String>,
    /// The tool, when registered.
    pub tool: Option<Arc<McpTool>>,
}

impl ServerConnection {
    /// Connects to `server` over its output (`reader`) and input (`writer`); `initialize`
    /// must complete within `timeout` ([`LIST_TIMEOUT`] is the usual bound).
    pub async fn over<R, W>(
        server: &McpServer,
        reader: R,
        writer: W,
        timeout: Duration,
    ) -> Result<Self, ClientError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let connection = Connection::connect(&server.name, reader, writer, timeout).await?;
        Ok(Self::of(server, connection))
    }

    /// Connects to `server` at its Streamable HTTP endpoint `url` (admitted by
    /// [`crate::admission::admit`]: only an `https` URL is dialled); `initialize` must complete
    /// within `timeout`.
    pub async fn dial(
        server: &McpServer,
        url: &url::Url,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        let connection = Connection::dial(&server.name, url, timeout).await?;
        Ok(Self::of(server, connection))
    }

    fn of(server: &McpServer, connection: Connection) -> Self {
        Self {
            server: server.clone(),
            connection: Arc::new(connection),
        }
    }

    /// The server.
    pub fn server(&self) -> &McpServer {
        &self.server
    }

    /// Whether the server said its tools changed since the last check (then list again).
    pub fn tools_changed(&self) -> bool {
        self.connection.take_tools_changed()
    }

    /// Lists the server's tools and registers each offerable one with `registry`: pinned (or
    /// quarantined) through `pins`, its description checked by `guards`.
    pub async fn discover(
        &self,
        registry: &mut Registry,
        pins: &mut Pins,
        guards: &GuardSet,
        require_approval: bool,
    ) -> Result<Vec<Discovered>, ClientError> {
        let definitions = self.connection.list_tools(LIST_TIMEOUT).await?;
        let mut out = Vec::with_capacity(definitions.len());
        for definition in definitions {
            let state = pins.check(&definition, guards, require_approval);
            let mut tool = None;
            let registered = if definition.name.contains("__") || definition.name.is_empty() {
                Err(format!(
                    "tool name `{}` holds `__` (or is empty): it would read as another server's tool",
                    definition.name
                ))
            } else {
                McpTool::new(
                    &definition,
                    Arc::clone(&self.connection),
                    self.server.trusted,
                    state.clone(),
                    CALL_TIMEOUT,
                )
                .map_err(|e| e.to_string())
                .and_then(|t| {
                    let t = Arc::new(t);
                    registry
                        .register(Arc::clone(&t) as Arc<dyn warden_executor::Tool>)
                        .map_err(|e| e.to_string())?;
                    tool = Some(t);
                    Ok(())
                })
            };
            out.push(Discovered {
                definition,
                state,
                registered,
                tool,
            });
        }
        debug_assert_eq!(self.connection.server(), self.server.name);
        Ok(out)
    }

    /// Lists the tools again after `notifications/tools/list_changed` and updates the pin
    /// state of each registered tool: a changed definition is quarantined (a rug pull) until
    /// approved. Returns the definitions as listed now.
    pub async fn recheck(
        &self,
        tools: &[Arc<McpTool>],
        pins: &mut Pins,
        guards: &GuardSet,
        require_approval: bool,
    ) -> Result<Vec<(ToolDefinition, PinState)>, ClientError> {
        let definitions = self.connection.list_tools(LIST_TIMEOUT).await?;
        let mut out = Vec::with_capacity(definitions.len());
        for definition in definitions {
            let state = pins.check(&definition, guards, require_approval);
            if let Some(t) = tools.iter().find(|t| {
                warden_executor::Tool::descriptor(t.as_ref()).name() == definition.qualified()
            }) {
                t.set_pin_state(state.clone());
            }
            out.push((definition, state));
        }
        // A tool the server no longer lists is quarantined: calling it would reach whatever
        // the server now does under that name.
        for t in tools {
            let name = warden_executor::Tool::descriptor(t.as_ref()).name();
            if !out.iter().any(|(d, _)| d.qualified() == name) {
                t.set_pin_state(PinState::Quarantined(crate::pins::Quarantine::Changed {
                    pinned: "no longer listed".into(),
                }));
            }
        }
        Ok(out)
    }
}
