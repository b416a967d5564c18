//! The crate's one error type.

/// What went wrong setting up or running a contained process.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// A confinement step failed; the program did not run.
    #[error("confinement failed: {0}")]
    Confine(String),
    /// The helper could not be started or answered nonsense.
    #[error("sandbox helper: {0}")]
    Helper(String),
    /// The spec asks for containment this backend has not proven.
    #[error("containment not proven: {0}")]
    NotProven(String),
    /// The process could not be run.
    #[error("spawn failed: {0}")]
    Spawn(String),
}
