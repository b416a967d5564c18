//! Static proof of a Warden workspace's invocation boundary: layers point downward, and nothing
//! but the executor can invoke a tool.
//!
//! Warden makes "only the executor runs a tool" true by construction: the callable trait's invoke
//! method takes an invocation token that only the executor can mint. This crate proves, from
//! `cargo metadata` and a [`syn`] scan of every source file, that no workspace crate works around
//! that construction. It checks:
//!
//! - **layering**: a runtime crate's normal and build dependencies point to strictly lower layers
//!   (dev-dependencies are exempt), never to a tooling crate; every crate has a layer or is
//!   tooling;
//! - **the boundary**: outside the executor crates, no code constructs the token or calls the
//!   invoke method (renamed imports, fully qualified and `<_ as Trait>` paths, method syntax with
//!   the trait in scope, macro bodies, `build.rs`, `#[path]` modules and `include!`d files);
//! - **raw transports** are never re-exported; **`unsafe`** appears only in allowed crates, and
//!   every other crate root carries `#![forbid(unsafe_code)]`;
//! - **feature unification**: no normal or build dependency can turn on a test-only feature of
//!   an executor or of any workspace crate.
//!
//! The configuration is the workspace's `[workspace.metadata.warden]` table ([`Config`]); the
//! result is a [`BypassReport`] whose `Display` is the tool's output (`path:line: rule: explanation`).
//!
//! **Invariant:** a scan over-approximates: when syntax cannot tell whether a name is the token
//! or the callable trait, it is treated as if it were. A finding may be spurious; a missed one
//! would be a bug.
//!
//! **Must never:** run or build workspace code (no `build.rs`, no proc macros, no network:
//! `cargo metadata --no-deps --offline` is the only subprocess), or write to the workspace.
//!
//! Key design decision: the scan is syntactic, and it is a second line of defence. The token's
//! crate-private constructor already makes minting outside the executor a compile error; this
//! check catches the ways around *policy* that the compiler accepts (calling `invoke` on a token
//! obtained legitimately, a test-only feature unified into production, a re-exported transport).
//!
//! ```no_run
//! use std::path::Path;
//!
//! let report = warden_bypass_check::check_workspace(Path::new("Cargo.toml"))?;
//! print!("{report}");
//! std::process::exit(if report.is_clean() { 0 } else { 1 });
//! # Ok::<(), warden_bypass_check::BypassError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod config;
mod error;
mod graph;
mod manifest;
mod report;
mod source;

use std::path::{Path, PathBuf};

use cargo_metadata::{Metadata, MetadataCommand};

pub use config::{
    Config, DEFAULT_CALLABLE, DEFAULT_EXECUTOR, DEFAULT_INVOKE, DEFAULT_TEST_ONLY_FEATURE,
    DEFAULT_TOKEN, ItemPath,
};
pub use error::BypassError;
pub use report::{BypassReport, BypassRule, Summary, Violation};

/// Checks the workspace whose root manifest is `manifest_path`.
///
/// Runs `cargo metadata --no-deps --offline` (no dependency resolution, no network), reads the
/// configuration from its `[workspace.metadata.warden]`, and runs every rule.
pub fn check_workspace(manifest_path: &Path) -> Result<BypassReport, BypassError> {
    let metadata = MetadataCommand::new()
        .manifest_path(manifest_path)
        .no_deps()
        .other_options(vec!["--offline".to_owned()])
        .exec()
        .map_err(|source| BypassError::Metadata {
            manifest: manifest_path.to_path_buf(),
            source,
        })?;
    check_metadata(&metadata)
}

/// Checks a workspace from `cargo metadata` output already at hand, with the configuration in
/// its `[workspace.metadata.warden]`.
pub fn check_metadata(metadata: &Metadata) -> Result<BypassReport, BypassError> {
    let config = Config::from_metadata(metadata)?;
    check_with_config(metadata, &config)
}

/// Checks a workspace with an explicit configuration (for a workspace that keeps it elsewhere).
pub fn check_with_config(
    metadata: &Metadata,
    config: &Config,
) -> Result<BypassReport, BypassError> {
    let mut violations = Vec::new();
    let graph = graph::check(metadata, config, &mut violations)?;
    let files_scanned = source::check(metadata, config, &mut violations)?;
    violations.sort();
    violations.dedup();
    Ok(BypassReport {
        checked: Summary {
            crates: graph.crates,
            layered: graph.layered,
            tooling: graph.tooling,
            dependency_edges: graph.edges,
            files_scanned,
        },
        violations,
    })
}

/// `path` relative to the workspace `root` when inside it, else as is.
fn relative(root: &Path, path: &Path) -> PathBuf {
    path.strip_prefix(root)
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| path.to_path_buf())
}
