//! MCP integration: transport admission (which servers may be spawned or dialled), tool
//! discovery into the executor's registry, and a policy-enforcing MCP proxy.
//!
//! **Invariant:** every MCP tool call goes through the executor; transports are admitted
//! fail-closed.
//!
//! **Must never:** expose a raw MCP client call or transport outside this crate.
//!
//! ```
//! use warden_mcp::admission::{admit, Launch};
//! use warden_policy::mcp::{McpServer, McpSettings, Transport};
//! let settings = McpSettings {
//!     allow_commands: true,
//!     command_allowlist: Some(vec!["node".into()]),
//!     env_allow: vec!["PATH".into(), "OPENAI_API_KEY".into()],
//!     ..McpSettings::default()
//! };
//! let server = McpServer {
//!     name: "fs".into(),
//!     transport: Transport::Command { command: "node".into(), args: vec!["server.js".into()], cwd: None },
//!     trusted: false,
//!     declared_in: "policy.toml".into(),
//! };
//! let host = [("PATH".to_owned(), "/usr/bin".to_owned()), ("OPENAI_API_KEY".to_owned(), "sk".to_owned())];
//! let Ok(Launch::Command { env, .. }) = admit(&settings, &server, host) else { panic!() };
//! // Allowed, yet removed: a name with a deny fragment never reaches a server.
//! assert_eq!(env.keys().collect::<Vec<_>>(), ["PATH"]);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod admission;
mod client;
pub mod discovery;
mod elicit;
pub mod pins;
pub mod proxy;
mod relay;
pub mod start;
pub mod tool;

pub use client::{ClientError, MAX_MESSAGE_BYTES};
