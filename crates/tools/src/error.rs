//! The crate's one error type: setting the tools up. A tool's own failures are
//! `warden_executor::ToolError`s, reported in the call's outcome.

/// Why the built-in tools could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolsError {
    /// The workspace directory is unusable.
    #[error("workspace {path}: {message}")]
    Workspace {
        /// The directory given.
        path: String,
        /// Why it is unusable.
        message: String,
    },
    /// A descriptor could not be built (a bug in a built-in's declaration).
    #[error("built-in tool `{tool}`: {message}")]
    Descriptor {
        /// The tool.
        tool: &'static str,
        /// What is wrong.
        message: String,
    },
    /// Registration refused the tool (a name collision).
    #[error("registering `{tool}`: {message}")]
    Register {
        /// The tool.
        tool: String,
        /// The registry's message.
        message: String,
    },
}
