//! MCP integration: transport admission (which servers may be spawned or dialled), tool discovery into the executor's registry, and a policy-enforcing MCP proxy.
//!
//! **Invariant:** every MCP tool call goes through the executor; transports are admitted fail-closed.
//!
//! **Must never:** expose a raw MCP client call or transport outside this crate.
#![forbid(unsafe_code)]
