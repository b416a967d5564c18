//! The crate's error type (the port's own error is `warden_contracts::EvidenceError`).

use std::path::PathBuf;

use warden_contracts::EvidenceError;

/// Why opening a store, a key or a checkpoint failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store file does not exist (a read-only open never creates it).
    #[error("no evidence store at {path}")]
    StoreMissing {
        /// The path given.
        path: PathBuf,
    },
    /// The file exists but is not an SQLite database.
    #[error("{path} is not an SQLite database")]
    NotSqlite {
        /// The path given.
        path: PathBuf,
    },
    /// The database is not a Warden evidence store (another application id, no `records`).
    #[error("{path} is not a Warden evidence store ({why})")]
    NotEvidenceStore {
        /// The path given.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The store's schema version is not one this version reads.
    #[error(
        "{path} has evidence schema version {found}; this warden reads versions {oldest} to {supported}"
    )]
    UnknownSchemaVersion {
        /// The path given.
        path: PathBuf,
        /// The version found.
        found: i64,
        /// The oldest version this build reads.
        oldest: i64,
        /// The newest version this build reads, the one it writes.
        supported: i64,
    },
    /// SQLite failed.
    #[error("sqlite error on {path}: {message}")]
    Sqlite {
        /// The store.
        path: PathBuf,
        /// SQLite's message.
        message: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// A signing or verifying key could not be read.
    #[error("key {path}: {message}")]
    Key {
        /// The key file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A checkpoint file is malformed or its signature does not verify.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// An evidence operation failed.
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
}

impl Error {
    #[cfg(feature = "sqlite")]
    pub(crate) fn sqlite(path: &std::path::Path, e: &rusqlite::Error) -> Self {
        Self::Sqlite {
            path: path.to_owned(),
            message: e.to_string(),
        }
    }
}
