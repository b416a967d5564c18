//! `cargo xtask ci`: everything CI runs, in order, stopping at the first failure.
//!
//! 1. `cargo fmt --all --check`
//! 2. `cargo clippy --workspace --all-targets -- -D warnings`
//! 3. `cargo test --workspace` (bounded proptest cases when `CI` is set)
//! 4. `bypass-check` (layering and the invocation boundary)
//! 5. `tidy` (house conventions)
//! 6. `schemas --check` (checked-in JSON Schemas are current)
//! 7. `cargo deny check licenses bans sources` (installs the pinned `cargo-deny` when missing;
//!    `advisories` needs a network these machines do not have)

use std::path::Path;
use std::process::Command;

use anyhow::Context as _;

/// The `cargo-deny` version CI installs when it is missing.
const CARGO_DENY_VERSION: &str = "0.20.2";

pub(crate) fn run(root: &Path) -> anyhow::Result<bool> {
    let steps: [(&str, &dyn Fn() -> anyhow::Result<bool>); 7] = [
        ("fmt", &|| cargo(root, &["fmt", "--all", "--check"])),
        ("clippy", &|| {
            cargo(
                root,
                &[
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--",
                    "-D",
                    "warnings",
                ],
            )
        }),
        ("test", &|| cargo(root, &["test", "--workspace"])),
        ("bypass-check", &|| crate::bypass::run(root, &[])),
        ("tidy", &|| crate::tidy::run(root)),
        ("schemas", &|| {
            crate::schemas::run(root, &["--check".to_owned()])
        }),
        ("deny", &|| deny(root)),
    ];
    for (name, step) in steps {
        println!("==> ci: {name}");
        if !step()? {
            println!("==> ci: {name} FAILED");
            return Ok(false);
        }
    }
    println!("==> ci: all steps passed");
    Ok(true)
}

// xtask owns these subprocesses: it is tooling, outside the runtime layers.
#[allow(clippy::disallowed_methods)]
fn command(program: &str) -> Command {
    Command::new(program)
}

fn cargo(root: &Path, args: &[&str]) -> anyhow::Result<bool> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = command(&cargo)
        .args(args)
        .current_dir(root)
        .status()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    Ok(status.success())
}

fn deny(root: &Path) -> anyhow::Result<bool> {
    let installed = command("cargo-deny")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(CARGO_DENY_VERSION))
        .unwrap_or(false);
    if !installed {
        println!("==> ci: installing cargo-deny {CARGO_DENY_VERSION}");
        let ok = cargo(
            root,
            &[
                "install",
                "cargo-deny",
                "--version",
                CARGO_DENY_VERSION,
                "--locked",
            ],
        )?;
        if !ok {
            anyhow::bail!("could not install cargo-deny {CARGO_DENY_VERSION}");
        }
    }
    cargo(
        root,
        &["deny", "--offline", "check", "licenses", "bans", "sources"],
    )
}
