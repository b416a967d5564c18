//! `cargo xtask bypass-check`: Warden is the first user of `warden-bypass-check`.
//!
//! Runs the library on the workspace's root manifest and prints its report: what was checked,
//! every violation as `path:line: rule: explanation`, and a summary line. A configuration or
//! metadata failure is an error (exit 2); violations are a failed check (exit 1).

use std::path::Path;

use anyhow::Context;

pub(crate) fn run(root: &Path, args: &[String]) -> anyhow::Result<bool> {
    if let Some(extra) = args.first() {
        anyhow::bail!("bypass-check takes no arguments (got {extra:?})");
    }
    let manifest = root.join("Cargo.toml");
    let report = warden_bypass_check::check_workspace(&manifest)
        .with_context(|| format!("bypass-check could not check {}", manifest.display()))?;
    print!("{report}");
    Ok(report.is_clean())
}
