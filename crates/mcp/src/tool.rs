//! A discovered MCP tool as the executor sees it: `{server}__{tool}`, its input schema (the
//! executor's validate stage checks arguments against it), its annotations as hints (believed
//! only for a trusted server; a missing one assumes the worst), its provenance, and its pin
//! state. Invoking it is the only way to reach the server, and only the executor can.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use warden_contracts::{ActionDescriptor, ActionSource, ContractError, Hints};
use warden_executor::{InvocationToken, Tool, ToolError};

use crate::client::{CallError, Connection};
use crate::pins::{PinState, ToolDefinition};

/// A server's tool registered with the executor.
#[derive(Debug)]
pub struct McpTool {
    descriptor: ActionDescriptor,
    /// The name on the server.
    remote: String,
    connection: Arc<Connection>,
    state: RwLock<PinState>,
    timeout: Duration,
}

/// The hints an MCP tool's annotations give, if its server is trusted; otherwise none, which
/// assumes the worst (not read-only, destructive, open-world).
pub fn hints_of(definition: &ToolDefinition, trusted: bool) -> Hints {
    if !trusted {
        return Hints::default();
    }
    let annotations = definition.raw.get("annotations");
    let flag = |k: &str| annotations.and_then(|a| a.get(k)).and_then(Value::as_bool);
    Hints {
        read_only: flag("readOnlyHint"),
        destructive: flag("destructiveHint"),
        idempotent: flag("idempotentHint"),
        open_world: flag("openWorldHint"),
    }
}

impl McpTool {
    /// The tool for `definition`, offered by `connection`'s server.
    pub(crate) fn new(
        definition: &ToolDefinition,
        connection: Arc<Connection>,
        trusted: bool,
        state: PinState,
        timeout: Duration,
    ) -> Result<Self, ContractError> {
        let schema = definition
            .raw
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new()));
        let mut descriptor = ActionDescriptor::new(
            definition.qualified(),
            "1",
            ActionSource::Mcp {
                server: definition.server.clone(),
            },
        )?
        .with_input_schema(schema)?
        .with_hints(hints_of(definition, trusted));
        if let Some(d) = definition.description() {
            descriptor = descriptor.with_description(d);
        }
        Ok(Self {
            descriptor,
            remote: definition.name.clone(),
            connection,
            state: RwLock::new(state),
            timeout,
        })
    }

    /// Its pin state now.
    pub fn pin_state(&self) -> PinState {
        self.state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Changes its pin state (a rug pull found on a later listing, an approval).
    pub(crate) fn set_pin_state(&self, state: PinState) {
        *self.state.write().unwrap_or_else(PoisonError::into_inner) = state;
    }
}

#[async_trait]
impl Tool for McpTool {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.descriptor
    }

    /// A quarantined tool is refused here, before any policy is consulted and without
    /// reaching the server.
    fn precondition(&self, _arguments: &Map<String, Value>) -> Result<(), String> {
        match self.pin_state() {
            PinState::Quarantined(why) => {
                Err(format!("{} is quarantined: {why}", self.descriptor.name()))
            }
            PinState::Pinned | PinState::PinnedNow => Ok(()),
        }
    }

    async fn invoke(&self, _token: InvocationToken, arguments: Value) -> Result<Value, ToolError> {
        match self
            .connection
            .call(&self.remote, arguments, self.timeout)
            .await
        {
            Ok(result) => serde_json::to_value(&result).map_err(|e| ToolError::Failed {
                kind: "mcp_result".into(),
                message: format!("the result of {} is not JSON: {e}", self.descriptor.name()),
            }),
            Err(CallError::Refused(message)) => Err(ToolError::Failed {
                kind: "mcp_error".into(),
                message,
            }),
            Err(CallError::Ambiguous(message)) => Err(ToolError::Ambiguous { message }),
        }
    }
}
