//! Contained process spawning: Landlock write roots, a network namespace, an environment allowlist
//! and resource limits, each proven by a probe before it is claimed.
//!
//! **Invariant:** a capability is reported as enforced only after a probe proved it on this machine.
//!
//! **Must never:** hold or invoke a tool. This is the only crate allowed `unsafe` (the pre-exec
//! helper); it carries none yet.
#![deny(unsafe_code)]
