//! Raw-transport re-exports, `unsafe` outside the allowed crates, and missing
//! `#![forbid(unsafe_code)]`.

use warden_bypass_check::BypassRule;

use crate::fixture::{Fixture, line_of};

#[test]
fn a_pub_use_of_a_raw_transport_is_a_violation() {
    let lib = "crates/mcp/src/lib.rs";
    let fixture = Fixture::base().append(lib, "pub use std::process::Command;\n");
    let line = line_of(fixture.get(lib), "pub use std::process");
    let report = fixture.assert_violations(&[(lib, line, BypassRule::RawTransportReexport)]);
    assert!(
        report.violations[0]
            .explanation
            .contains("raw transport std::process")
    );
}

#[test]
fn re_exporting_a_crate_private_transport_module_is_a_violation() {
    let lib = "crates/mcp/src/lib.rs";
    let fixture = Fixture::base()
        .replace(
            "crates/mcp/src/transport.rs",
            "pub(crate) struct Client",
            "pub struct Client",
        )
        .append(lib, "pub use transport::Client;\n");
    let line = line_of(fixture.get(lib), "pub use transport::Client");
    fixture.assert_violations(&[(lib, line, BypassRule::RawTransportReexport)]);
}

#[test]
fn renamed_grouped_and_glob_re_exports_are_violations() {
    let text = "//! Planted.\nuse std::process as proc;\n\npub use proc::Child;\n\
                pub use std::{io, process::Stdio as Pipe};\npub use std::process::*;\n";
    let path = "crates/tools/src/planted.rs";
    Fixture::base()
        .module("tools", "planted", text)
        .assert_violations(&[
            (
                path,
                line_of(text, "pub use proc::Child"),
                BypassRule::RawTransportReexport,
            ),
            (
                path,
                line_of(text, "Stdio as Pipe"),
                BypassRule::RawTransportReexport,
            ),
            (
                path,
                line_of(text, "pub use std::process::*"),
                BypassRule::RawTransportReexport,
            ),
        ]);
}

#[test]
fn a_public_type_alias_of_a_raw_transport_is_a_violation() {
    let text = "//! Planted.\n\n/// Leaks.\npub type Spawner = std::process::Command;\n";
    Fixture::base()
        .module("tools", "planted", text)
        .assert_violations(&[(
            "crates/tools/src/planted.rs",
            line_of(text, "pub type Spawner"),
            BypassRule::RawTransportReexport,
        )]);
}

#[test]
fn a_crate_private_use_is_not_a_re_export() {
    // The base mcp transport has `pub(crate) use std::process::Command as RawCommand;`.
    let fixture = Fixture::base();
    assert!(
        fixture
            .get("crates/mcp/src/transport.rs")
            .contains("pub(crate) use std::process")
    );
    fixture.assert_violations(&[]);
}

#[test]
fn an_unsafe_block_outside_the_sandbox_is_a_violation() {
    let text = "//! Planted.\n\npub fn zero() -> u64 {\n    unsafe { core::mem::zeroed() }\n}\n";
    let report = Fixture::base()
        .module("policy", "planted", text)
        .assert_violations(&[(
            "crates/policy/src/planted.rs",
            line_of(text, "unsafe {"),
            BypassRule::UnsafeCode,
        )]);
    assert!(
        report.violations[0]
            .explanation
            .contains("in warden-policy")
    );
}

#[test]
fn every_form_of_unsafe_is_a_violation() {
    let text = "//! Planted.\n\npub unsafe fn raw() {}\n\npub unsafe trait Marker {}\n\n\
                unsafe impl Marker for u8 {}\n\n#[unsafe(no_mangle)]\npub extern \"C\" fn exported() {}\n\n\
                unsafe extern \"C\" {\n    fn abs(x: i32) -> i32;\n}\n\n\
                macro_rules! sneak {\n    () => { unsafe { abs(-1) } };\n}\n";
    let path = "crates/evidence/src/planted.rs";
    Fixture::base()
        .module("evidence", "planted", text)
        .assert_violations(&[
            (path, line_of(text, "unsafe fn raw"), BypassRule::UnsafeCode),
            (path, line_of(text, "unsafe trait"), BypassRule::UnsafeCode),
            (path, line_of(text, "unsafe impl"), BypassRule::UnsafeCode),
            (path, line_of(text, "no_mangle"), BypassRule::UnsafeCode),
            (path, line_of(text, "unsafe extern"), BypassRule::UnsafeCode),
            (
                path,
                line_of(text, "() => { unsafe"),
                BypassRule::UnsafeCode,
            ),
        ]);
}

#[test]
fn unsafe_in_the_allowed_crate_is_fine() {
    let fixture = Fixture::base();
    assert!(
        fixture
            .get("crates/sandbox/src/lib.rs")
            .contains("unsafe {")
    );
    assert!(
        !fixture
            .get("crates/sandbox/src/lib.rs")
            .contains("#![forbid")
    );
    fixture.assert_violations(&[]);
}

#[test]
fn a_library_root_without_forbid_is_a_violation() {
    let lib = "crates/policy/src/lib.rs";
    let report = Fixture::base()
        .replace(lib, "#![forbid(unsafe_code)]\n", "#![deny(unsafe_code)]\n")
        .assert_violations(&[(lib, 1, BypassRule::MissingForbidUnsafe)]);
    assert!(
        report.violations[0]
            .explanation
            .contains("`warden_policy` of warden-policy")
    );
}

#[test]
fn a_binary_root_without_forbid_is_a_violation() {
    let main = "crates/cli/src/main.rs";
    Fixture::base()
        .replace(main, "#![forbid(unsafe_code)]\n", "")
        .assert_violations(&[(main, 1, BypassRule::MissingForbidUnsafe)]);
}

#[test]
fn a_build_script_without_forbid_is_a_violation() {
    Fixture::base()
        .write(
            "crates/policy/build.rs",
            "//! Build script.\n\nfn main() {}\n",
        )
        .assert_violations(&[("crates/policy/build.rs", 1, BypassRule::MissingForbidUnsafe)]);
}

#[test]
fn forbid_among_other_lints_counts() {
    let lib = "crates/policy/src/lib.rs";
    Fixture::base()
        .replace(
            lib,
            "#![forbid(unsafe_code)]\n",
            "#![forbid(missing_docs, unsafe_code)]\n",
        )
        .assert_violations(&[]);
}

#[test]
fn integration_tests_need_no_forbid_but_are_scanned() {
    // tools/tests/smoke.rs has no forbid (fine); unsafe in it is still reported.
    let path = "crates/tools/tests/smoke.rs";
    let fixture = Fixture::base().append(path, "\nfn raw() -> u8 {\n    unsafe { 0 }\n}\n");
    let line = line_of(fixture.get(path), "unsafe { 0 }");
    fixture.assert_violations(&[(path, line, BypassRule::UnsafeCode)]);
}
