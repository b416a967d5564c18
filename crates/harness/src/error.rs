//! The harness's error type.

/// What can go wrong translating to or from a provider.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A provider file (settings, transcript) is not what it should be.
    #[error("{file}: {message}")]
    Input {
        /// The file, as the caller named it.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// The policy could not be read back from its snapshot, or the result does not build.
    #[error("{0}")]
    Policy(String),
    /// Writing the translated file failed.
    #[error("cannot write the {what}: {message}")]
    Write {
        /// What was being written.
        what: &'static str,
        /// Why it failed.
        message: String,
    },
}
