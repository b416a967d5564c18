//! The crate-graph rules: layering, unlayered crates, test-only features.

use warden_bypass_check::BypassRule;

use crate::fixture::{Fixture, line_of};

/// Adds `entry` to `[dependencies]` of `krate` and expects one layering violation on its line.
#[track_caller]
fn assert_layering(krate: &str, entry: &str) {
    let fixture = Fixture::base().dependency(krate, entry);
    let path = format!("crates/{krate}/Cargo.toml");
    let line = line_of(fixture.get(&path), entry);
    fixture.assert_violations(&[(&path, line, BypassRule::Layering)]);
}

#[test]
fn an_upward_dependency_is_a_violation() {
    assert_layering("policy", "warden-executor.workspace = true");
}

#[test]
fn same_layer_dependencies_are_violations() {
    assert_layering("policy", "warden-evidence.workspace = true");
    assert_layering("evidence", "warden-sandbox.workspace = true");
    assert_layering("sandbox", "warden-policy.workspace = true");
    assert_layering("tools", "warden-mcp.workspace = true");
}

#[test]
fn a_path_dependency_written_inline_is_located() {
    assert_layering("contracts", "warden-policy = { path = \"../policy\" }");
}

#[test]
fn the_violation_names_both_crates_and_layers() {
    let fixture = Fixture::base().dependency("executor", "warden-tools.workspace = true");
    let report = fixture.check();
    let explanation = &report.violations[0].explanation;
    assert_eq!(
        explanation,
        "warden-executor (layer 2) depends on warden-tools (layer 3); a crate may depend only \
         on lower layers"
    );
}

#[test]
fn a_build_dependency_must_point_downward_too() {
    let fixture = Fixture::base().append(
        "crates/policy/Cargo.toml",
        "\n[build-dependencies]\nwarden-executor.workspace = true\n",
    );
    let text = fixture.get("crates/policy/Cargo.toml");
    let line = text.lines().count();
    assert!(
        text.lines()
            .nth(line - 1)
            .unwrap()
            .starts_with("warden-executor")
    );
    let report =
        fixture.assert_violations(&[("crates/policy/Cargo.toml", line, BypassRule::Layering)]);
    assert!(
        report.violations[0]
            .explanation
            .contains("has a build dependency on")
    );
}

#[test]
fn a_target_specific_dependency_is_located() {
    let fixture = Fixture::base().append(
        "crates/policy/Cargo.toml",
        "\n[target.'cfg(unix)'.dependencies]\nwarden-mcp.workspace = true\n",
    );
    let line = fixture.get("crates/policy/Cargo.toml").lines().count();
    fixture.assert_violations(&[("crates/policy/Cargo.toml", line, BypassRule::Layering)]);
}

#[test]
fn a_runtime_crate_must_not_depend_on_tooling() {
    let fixture = Fixture::base().dependency("cli", "warden-lint.workspace = true");
    let line = line_of(fixture.get("crates/cli/Cargo.toml"), "warden-lint");
    let report =
        fixture.assert_violations(&[("crates/cli/Cargo.toml", line, BypassRule::Layering)]);
    assert!(
        report.violations[0]
            .explanation
            .contains("tooling crate warden-lint")
    );
}

#[test]
fn tooling_may_depend_on_anything() {
    Fixture::base()
        .dependency("lint", "warden-cli.workspace = true")
        .assert_violations(&[]);
}

#[test]
fn dev_dependencies_are_exempt() {
    Fixture::base()
        .append(
            "crates/policy/Cargo.toml",
            "\n[dev-dependencies]\nwarden-cli.workspace = true\nwarden-lint.workspace = true\n",
        )
        .assert_violations(&[]);
}

#[test]
fn a_crate_missing_from_the_layer_table_is_a_violation() {
    let fixture = Fixture::base()
        .write(
            "crates/extra/Cargo.toml",
            "[package]\nname = \"warden-extra\"\nversion.workspace = true\nedition.workspace = true\n",
        )
        .write("crates/extra/src/lib.rs", "//! Extra.\n#![forbid(unsafe_code)]\n");
    let report =
        fixture.assert_violations(&[("crates/extra/Cargo.toml", 2, BypassRule::UnlayeredCrate)]);
    assert!(
        report.violations[0]
            .explanation
            .starts_with("warden-extra is in neither")
    );
}

#[test]
fn a_normal_dependency_enabling_a_test_only_feature_is_a_violation() {
    let entry = "warden-executor = { workspace = true, features = [\"test-util\"] }";
    let fixture = Fixture::base().replace(
        "crates/mcp/Cargo.toml",
        "warden-executor.workspace = true",
        entry,
    );
    let line = line_of(fixture.get("crates/mcp/Cargo.toml"), entry);
    let report =
        fixture.assert_violations(&[("crates/mcp/Cargo.toml", line, BypassRule::TestOnlyFeature)]);
    assert!(
        report.violations[0]
            .explanation
            .contains("test-only feature `test-util` of executor crate warden-executor"),
        "{report}"
    );
}

#[test]
fn a_workspace_dependency_enabling_a_test_only_feature_reaches_every_inheritor() {
    // Features set in [workspace.dependencies] are inherited by every `workspace = true` entry.
    let fixture = Fixture::base().replace(
        "Cargo.toml",
        "warden-executor = { path = \"crates/executor\" }",
        "warden-executor = { path = \"crates/executor\", features = [\"test-util\"] }",
    );
    let mut expected = Vec::new();
    for krate in ["tools", "mcp", "cli", "lint"] {
        let path = format!("crates/{krate}/Cargo.toml");
        let line = line_of(fixture.get(&path), "warden-executor.workspace = true");
        expected.push((path, line));
    }
    let expected: Vec<(&str, usize, BypassRule)> = expected
        .iter()
        .map(|(p, l)| (p.as_str(), *l, BypassRule::TestOnlyFeature))
        .collect();
    fixture.assert_violations(&expected);
}

#[test]
fn a_dev_dependency_may_enable_a_test_only_feature() {
    // The base fixture's tools crate does exactly this; make sure it is what we think it is.
    let fixture = Fixture::base();
    assert!(fixture.get("crates/tools/Cargo.toml").contains(
        "[dev-dependencies]\nwarden-executor = { workspace = true, features = [\"test-util\"] }"
    ));
    fixture.assert_violations(&[]);
}

#[test]
fn an_executor_whose_default_features_include_a_test_only_one_is_a_violation() {
    let fixture = Fixture::base().replace(
        "crates/executor/Cargo.toml",
        "test-util = []\n",
        "test-util = []\ndefault = [\"test-util\"]\n",
    );
    let line = line_of(fixture.get("crates/executor/Cargo.toml"), "default = ");
    fixture.assert_violations(&[(
        "crates/executor/Cargo.toml",
        line,
        BypassRule::TestOnlyFeature,
    )]);
}

#[test]
fn a_feature_forwarding_a_test_only_feature_is_followed() {
    // tools' own `testing` feature turns on the executor's `test-util`; that is fine until a
    // normal dependency enables `testing`.
    let fixture = Fixture::base()
        .append(
            "crates/tools/Cargo.toml",
            "\n[features]\ntesting = [\"warden-executor/test-util\"]\n",
        )
        .replace(
            "crates/cli/Cargo.toml",
            "warden-tools.workspace = true",
            "warden-tools = { workspace = true, features = [\"testing\"] }",
        );
    fixture
        .clone()
        .write(
            "crates/cli/Cargo.toml",
            Fixture::base().get("crates/cli/Cargo.toml"),
        )
        .assert_violations(&[]);
    let line = line_of(fixture.get("crates/cli/Cargo.toml"), "warden-tools = {");
    let report =
        fixture.assert_violations(&[("crates/cli/Cargo.toml", line, BypassRule::TestOnlyFeature)]);
    assert!(
        report.violations[0]
            .explanation
            .contains("feature `testing` of warden-tools")
    );
}

/// The fixture with warden-evidence declaring a crash harness (`test-util`) that turns on its
/// fault points (`fault-injection`), and `boundary.test-only-features` set to `listed`.
fn with_evidence_test_features(listed: &str) -> Fixture {
    Fixture::base()
        .append(
            "crates/evidence/Cargo.toml",
            "\n[features]\nfault-injection = []\ntest-util = [\"fault-injection\"]\n",
        )
        .replace(
            "Cargo.toml",
            "test-only-features = [\"test-util\"]",
            &format!("test-only-features = {listed}"),
        )
}

#[test]
fn a_normal_dependency_enabling_a_test_only_feature_of_any_workspace_crate_is_a_violation() {
    // Not only the executors: warden-evidence's test-util is as test-only as the executor's.
    let base = with_evidence_test_features("[\"test-util\", \"fault-injection\"]");
    base.assert_violations(&[]);
    for feature in ["test-util", "fault-injection"] {
        let entry = format!("warden-evidence = {{ workspace = true, features = [\"{feature}\"] }}");
        let fixture = base.clone().replace(
            "crates/cli/Cargo.toml",
            "warden-evidence.workspace = true",
            &entry,
        );
        let line = line_of(fixture.get("crates/cli/Cargo.toml"), &entry);
        let report = fixture.assert_violations(&[(
            "crates/cli/Cargo.toml",
            line,
            BypassRule::TestOnlyFeature,
        )]);
        assert!(
            report.violations[0]
                .explanation
                .contains(&format!("test-only feature `{feature}` of warden-evidence")),
            "{report}"
        );
    }
    // As a dev-dependency it is what the crash tests do.
    base.append(
        "crates/cli/Cargo.toml",
        "\n[dev-dependencies]\nwarden-evidence = { workspace = true, features = [\"test-util\"] }\n",
    )
    .assert_violations(&[]);
}

#[test]
fn a_workspace_crate_feature_turning_on_its_own_test_only_feature_is_followed() {
    // Only `fault-injection` is listed; `test-util` turns it on, so enabling `test-util` is
    // enabling it.
    let entry = "warden-evidence = { workspace = true, features = [\"test-util\"] }";
    let fixture = with_evidence_test_features("[\"fault-injection\"]").replace(
        "crates/cli/Cargo.toml",
        "warden-evidence.workspace = true",
        entry,
    );
    let line = line_of(fixture.get("crates/cli/Cargo.toml"), entry);
    let report =
        fixture.assert_violations(&[("crates/cli/Cargo.toml", line, BypassRule::TestOnlyFeature)]);
    assert!(
        report.violations[0]
            .explanation
            .contains("feature `test-util` of warden-evidence, which enables a test-only feature"),
        "{report}"
    );
}
