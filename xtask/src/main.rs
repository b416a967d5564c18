//! Workspace automation for Warden: `cargo xtask <command>`.
//!
//! - `bypass-check`: layering and the invocation boundary (see `warden-bypass-check`);
//! - `tidy`: the house conventions (style.md §6);
//! - `schemas [--check]`: write or verify the JSON Schemas under `docs/schemas/`;
//! - `ci`: everything CI runs, in order.
//!
//! Exit codes: 0 ok, 1 a check failed, 2 usage error.
//!
//! **Invariant:** every check CI runs is reachable from `cargo xtask ci`, and the conventions
//! (`tidy`) also run under `cargo test`.
//!
//! **Must never:** be a dependency of a runtime crate; it is tooling outside the layers.
#![forbid(unsafe_code)]

mod bypass;
mod ci;
mod schemas;
mod tidy;

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <bypass-check | tidy | schemas [--check] | ci>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    let result = match args.first().map(String::as_str) {
        Some("bypass-check") => bypass::run(&root, &args[1..]),
        Some("tidy") => tidy::run(&root),
        Some("schemas") => schemas::run(&root, &args[1..]),
        Some("ci") => ci::run(&root),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The workspace root: the parent of this crate's folder.
fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or(manifest_dir)
}
