//! `warden-bypass-check` against generated fixture workspaces: the clean base passes, and each
//! planted violation is reported with its rule, file and line, and nothing else is.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns: a failed unwrap is a failed test"
)]

mod fixture;
mod graph;
mod hygiene;
mod invoke;
mod mint;

use fixture::{Fixture, warden_root};
use warden_bypass_check::{BypassError, BypassRule, check_workspace};

#[test]
fn the_clean_fixture_passes_and_says_what_it_checked() {
    let report = Fixture::base().assert_violations(&[]);
    assert_eq!(report.checked.crates, 10);
    assert_eq!(report.checked.layered, 8);
    assert_eq!(report.checked.tooling, 2);
    // policy, evidence, sandbox, executor → contracts; tools, mcp → contracts, executor;
    // cli → seven crates; lint → executor; xtask → lint.
    assert_eq!(report.checked.dependency_edges, 17);
    // contracts, policy, evidence, sandbox, cli, lint, xtask: 1 each; executor 3; tools 4; mcp 2.
    assert_eq!(report.checked.files_scanned, 16);
    let text = report.to_string();
    assert_eq!(
        text,
        "bypass-check: 10 crates (8 layered, 2 tooling), 17 dependency edges, 16 files scanned\n\
         bypass-check: ok, no violations\n"
    );
}

#[test]
fn output_is_one_line_per_violation_then_a_summary() {
    let fixture = Fixture::base().dependency("policy", "warden-evidence.workspace = true");
    let line = fixture::line_of(fixture.get("crates/policy/Cargo.toml"), "warden-evidence");
    let report = fixture.check();
    let expected = format!(
        "bypass-check: 10 crates (8 layered, 2 tooling), 18 dependency edges, 16 files scanned\n\
         crates/policy/Cargo.toml:{line}: layering: warden-policy (layer 1) depends on \
         warden-evidence (layer 1); a crate may depend only on lower layers\n\
         bypass-check: 1 violation (1 layering)\n"
    );
    assert_eq!(report.to_string(), expected);
    assert!(!report.is_clean());
}

#[test]
fn the_warden_workspace_is_clean() {
    let report = match check_workspace(&warden_root().join("Cargo.toml")) {
        Ok(report) => report,
        Err(error) => panic!("bypass-check could not run on Warden: {error}"),
    };
    assert!(report.is_clean(), "{report}");
    assert!(report.checked.crates >= 10, "{report}");
    assert!(report.checked.files_scanned > 10, "{report}");
}

#[test]
fn a_workspace_without_warden_metadata_is_a_configuration_error() {
    let fixture = Fixture::base();
    let manifest = fixture.get("Cargo.toml");
    let cut = manifest.find("[workspace.metadata.warden.layers]").unwrap();
    let end = manifest.find("[workspace.dependencies]").unwrap();
    let without = format!("{}{}", &manifest[..cut], &manifest[end..]);
    let error = fixture
        .write("Cargo.toml", &without)
        .try_check()
        .unwrap_err();
    assert!(
        matches!(error, BypassError::MissingConfig { .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains("[workspace.metadata.warden]"),
        "{error}"
    );
}

#[test]
fn a_misspelt_boundary_key_is_a_configuration_error() {
    let error = Fixture::base()
        .replace("Cargo.toml", "executors = ", "executor = ")
        .try_check()
        .unwrap_err();
    assert!(matches!(error, BypassError::Config { .. }), "{error}");
}

#[test]
fn a_missing_manifest_is_a_metadata_error() {
    let dir = tempfile::tempdir().unwrap();
    let error = check_workspace(&dir.path().join("Cargo.toml")).unwrap_err();
    assert!(matches!(error, BypassError::Metadata { .. }), "{error}");
}

#[test]
fn rule_names_are_stable() {
    let names: Vec<&str> = BypassRule::ALL.iter().map(|r| r.name()).collect();
    assert_eq!(
        names,
        [
            "layering",
            "unlayered-crate",
            "token-mint",
            "invoke-call",
            "raw-transport-reexport",
            "unsafe-code",
            "missing-forbid-unsafe",
            "test-only-feature"
        ]
    );
}
