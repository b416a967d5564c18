//! The callable trait every tool implements.

use async_trait::async_trait;
use serde_json::{Map, Value};
use warden_contracts::{ActionDescriptor, Hints};

use crate::token::InvocationToken;

/// A callable: a built-in tool, a plugin's tool or an MCP operation.
///
/// Implementing it is open to every crate; calling [`Tool::invoke`] is not, because it needs an
/// [`InvocationToken`] that only the executor mints.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The tool's identity, schema and hints.
    fn descriptor(&self) -> &ActionDescriptor;

    /// The tool's precondition (stage `preconditions`): refuses arguments the tool must never
    /// run with (a path outside its workspace, an oversized input), before any policy is
    /// consulted and again on the final arguments. It must be pure and cheap: it decides, it
    /// never acts. `Err` carries a message naming the problem. The default accepts everything.
    fn precondition(&self, arguments: &Map<String, Value>) -> Result<(), String> {
        let _ = arguments;
        Ok(())
    }

    /// Hints for one call: what *these* arguments would do (for example a `bash` command the
    /// shell splitter classifies as read-only), for a front deciding what to ask about or run
    /// in parallel. Like the precondition, pure and cheap; it never acts, and it is advice, never a
    /// permission. The default is the descriptor's static hints.
    fn hints_for(&self, arguments: &Map<String, Value>) -> Hints {
        let _ = arguments;
        self.descriptor().hints()
    }

    /// Performs the call with already validated and authorized arguments. Consumes the token.
    /// A successful `null` result is `Ok(Value::Null)`, distinct from a failure.
    async fn invoke(&self, token: InvocationToken, arguments: Value) -> Result<Value, ToolError>;
}

/// A tool's own failure, as the tool reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The tool ran and failed.
    #[error("{message}")]
    Failed {
        /// A stable, machine-readable kind (for example `not_found`).
        kind: String,
        /// A message safe to show and store (no secrets).
        message: String,
    },
    /// The call was sent but whether it took effect is unknown (a transport lost after send).
    #[error("result unknown: {message}")]
    Ambiguous {
        /// What is known.
        message: String,
    },
}
