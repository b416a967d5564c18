//! Policy compiler and decision engine: one rule grammar (`bash(git status:*)`), deny > ask >
//! allow > default, ranked sources merged into an immutable, digested `PolicySnapshot`.
//!
//! The core decides pure values: reading policy files, resolving symlinks and reading clocks
//! happen at its edge, never while deciding.
//!
//! **Invariant:** a decision is a pure, deterministic function of the snapshot and the call.
//!
//! **Must never:** invoke a tool, or touch files, clocks or sockets while deciding.
#![forbid(unsafe_code)]
