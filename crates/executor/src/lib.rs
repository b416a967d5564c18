//! The action executor: the one authoritative path from a tool call to its effect.
//!
//! Every invocation of a tool callable goes through here. A callable implements [`Tool`], whose
//! [`Tool::invoke`] takes an [`InvocationToken`]: a value only this crate can mint, that cannot be
//! cloned, and that `invoke` consumes. So holding a tool is not enough to run it; only the
//! executor, after every stage has passed, can.
//!
//! **Invariant:** a tool's `invoke` runs only with a token minted here, once per token.
//!
//! **Must never:** be bypassable: no public item mints a token or calls `invoke` on a caller's
//! behalf outside the executor's stage order. `cargo xtask bypass-check` proves it statically.
#![forbid(unsafe_code)]

mod token;
mod tool;

pub use token::InvocationToken;
pub use tool::{Tool, ToolError};
