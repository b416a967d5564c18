//! The notes workspace's automation: `cargo xtask bypass-check [--root DIR]`.
//!
//! Runs Warden's bypass-check (the `warden-bypass-check` library) on this workspace, configured
//! by the `[workspace.metadata.warden]` table of its root `Cargo.toml`: the layers point
//! downward, and no crate of ours mints an invocation token or calls a tool's `invoke` (only
//! `warden-executor` may). `--root DIR` checks the workspace at `DIR` instead (Warden's CI runs
//! it on a copy of this workspace with a planted violation, which must fail).
//!
//! Exit codes: 0 no violation, 1 violations (each printed as `path:line: rule: explanation`),
//! 2 the check could not run.
//!
//! **Invariant:** the report printed is the library's, unfiltered.
//!
//! **Must never:** be a dependency of the runtime crates (it is `tooling` in the table).

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask bypass-check [--root DIR]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["bypass-check"] => workspace_root(),
        ["bypass-check", "--root", dir] => PathBuf::from(dir),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let manifest = root.join("Cargo.toml");
    match warden_bypass_check::check_workspace(&manifest) {
        Ok(report) => {
            print!("{report}");
            if report.is_clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(error) => {
            eprintln!(
                "error: bypass-check could not check {}: {error}",
                manifest.display()
            );
            ExitCode::from(2)
        }
    }
}

/// This workspace: the parent of the folder `cargo run` says the xtask's manifest is in (read
/// at run time, so a binary built elsewhere checks the checkout it is run from), else the one
/// it was built from.
fn workspace_root() -> PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or(manifest_dir)
}
