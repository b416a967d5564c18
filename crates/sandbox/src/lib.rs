//! Contained process spawning: Landlock write roots, a user + network namespace, processes of
//! its own (a PID namespace), no inherited descriptor, the host's UNIX sockets out of reach (a
//! seccomp filter), an environment allowlist and resource limits, each proven by a probe before
//! it is claimed.
//!
//! Principal types: [`SubprocessBackend`] (the contracts `EffectBackend` that runs processes
//! under proven containment) and the re-exec helper ([`helper::dispatch`]), which any binary can
//! host.
//!
//! Key design decision: confinement is applied by a fresh, single-threaded helper process that
//! then `exec`s the program, never in a `pre_exec` closure inside the caller's multi-threaded
//! runtime, where only async-signal-safe calls are allowed. The helper can therefore use safe
//! wrappers (`landlock`, `nix`, `seccompiler`) and report errors, and this crate needs no
//! `unsafe` at all.
//!
//! **Invariant:** a capability is reported as enforced only after a probe proved it on this
//! machine, and a process that asks for containment the backend has not proven does not run.
//!
//! **Must never:** hold or invoke a tool. It is the one crate allowed `unsafe` (for pre-exec
//! work), and it carries none.
#![deny(unsafe_code)]
#![deny(missing_docs)]

mod backend;
mod capture;
mod confine;
mod error;
pub mod helper;
mod in_process;
mod records;
mod spec;

pub use backend::{
    DEFAULT_LIMITS, Mechanism, PipedProcess, ProbeOptions, SUBPROCESS, SubprocessBackend,
};
pub use error::SandboxError;
pub use in_process::{IN_PROCESS, InProcessBackend};
pub use records::{ProcessRecords, RECORD_VARIABLE, Survivor};
pub use spec::{ResourceLimits, SandboxSpec};
