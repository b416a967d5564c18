//! The CLI's error type; every variant maps to exit code 2.

/// A usage or input error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// The policy does not load or compile.
    #[error(transparent)]
    Policy(#[from] warden_policy::PolicyError),
    /// Invalid input (arguments, a calls file).
    #[error("{0}")]
    Input(String),
    /// Writing output failed.
    #[error("cannot write output: {0}")]
    Io(#[from] std::io::Error),
}
