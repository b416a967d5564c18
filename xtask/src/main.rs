//! Workspace automation for Warden: `cargo xtask <command>`.
//!
//! - `bypass-check`: layering and the invocation boundary (see `warden-bypass-check`);
//! - `tidy`: the house conventions (docs/conventions.md);
//! - `schemas [--check]`: write or verify the JSON Schemas under `docs/schemas/`;
//! - `custom-runtime`: the example workspace examples/custom-runtime (also a step of `ci`);
//! - `ci`: everything CI runs, in order;
//! - `bench [--quick]`: the benches behind docs/benchmarks.md, its tables rewritten from one run
//!   (not part of `ci`: figures need a quiet machine, not a test run).
//!
//! Exit codes: 0 ok, 1 a check failed, 2 usage error.
//!
//! **Invariant:** every check CI runs is reachable from `cargo xtask ci`, and the conventions
//! (`tidy`) also run under `cargo test`.
//!
//! **Must never:** be a dependency of a runtime crate; it is tooling outside the layers.
#![forbid(unsafe_code)]

mod bench;
mod bypass;
mod ci;
mod custom_runtime;
mod schemas;
mod tidy;

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <bypass-check | tidy | schemas [--check] | custom-runtime | ci | bench [--quick]>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = match workspace_root() {
        Ok(root) => root,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let result = match args.first().map(String::as_str) {
        Some("bypass-check") => bypass::run(&root, &args[1..]),
        Some("tidy") => tidy::run(&root),
        Some("schemas") => schemas::run(&root, &args[1..]),
        Some("custom-runtime") => custom_runtime::run(&root),
        Some("ci") => ci::run(&root),
        Some("bench") => bench::run(&root, &args[1..]),
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

/// The workspace this run checks, found at run time: the `CARGO_MANIFEST_DIR` that `cargo run`
/// and `cargo test` set for this process (its parent is the workspace), else the nearest folder
/// from the current one up whose `Cargo.toml` declares `[workspace]`.
///
/// Never `env!("CARGO_MANIFEST_DIR")`: that is the folder the binary was *built* from, and two
/// checkouts sharing one `CARGO_TARGET_DIR` can run a binary built from the other one.
fn workspace_root() -> anyhow::Result<PathBuf> {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    if let Some(root) = manifest_dir.as_deref().and_then(std::path::Path::parent)
        && is_workspace_root(root)
    {
        return Ok(root.to_path_buf());
    }
    let cwd = std::env::current_dir()?;
    cwd.ancestors()
        .find(|dir| is_workspace_root(dir))
        .map(PathBuf::from)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no Cargo workspace at or above {}: run `cargo xtask` inside a checkout",
                cwd.display()
            )
        })
}

fn is_workspace_root(dir: &std::path::Path) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .map(|manifest| manifest.lines().any(|l| l.trim() == "[workspace]"))
        .unwrap_or(false)
}
