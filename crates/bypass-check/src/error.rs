//! The crate's one error type: why a check could not run (as opposed to a violation it found).

use std::path::PathBuf;

/// Why a check could not run. A violation is not an error: it is a finding in the
/// [`BypassReport`](crate::BypassReport); an `BypassError` means the workspace could not be checked at all (a
/// binary maps it to exit code 2).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BypassError {
    /// `cargo metadata` failed (no such manifest, invalid manifest, cargo missing).
    #[error("cargo metadata failed for {manifest}: {source}")]
    Metadata {
        /// The manifest `cargo metadata` was run on.
        manifest: PathBuf,
        /// What cargo reported.
        #[source]
        source: cargo_metadata::Error,
    },
    /// The root manifest has no `[workspace.metadata.warden]` table, or it has no `layers`.
    #[error("{manifest}: missing [workspace.metadata.warden{table}] table")]
    MissingConfig {
        /// The workspace's root manifest.
        manifest: PathBuf,
        /// The missing table below `workspace.metadata.warden` (empty for the table itself).
        table: String,
    },
    /// The `[workspace.metadata.warden]` table is present but does not fit the schema.
    #[error("{manifest}: invalid [workspace.metadata.warden]: {message}")]
    Config {
        /// The workspace's root manifest.
        manifest: PathBuf,
        /// What is wrong, naming the key.
        message: String,
    },
    /// A manifest or source file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A Rust source file does not parse, so it cannot be proven free of violations.
    #[error("{path}:{line}: cannot parse as Rust: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The 1-based line of the parse error.
        line: usize,
        /// The parser's message.
        message: String,
    },
}
