//! Token construction outside the executor, in every form the brief names.

use warden_bypass_check::BypassRule;

use crate::fixture::{Fixture, line_of};

const PLANTED: &str = "crates/tools/src/planted.rs";

/// Plants `text` as module `planted` of the tools crate and expects one token-mint on the line
/// holding `marker`.
#[track_caller]
fn assert_mint(text: &str, marker: &str) {
    let line = line_of(text, marker);
    let report = Fixture::base()
        .module("tools", "planted", text)
        .assert_violations(&[(PLANTED, line, BypassRule::TokenMint)]);
    assert!(
        report.violations[0].explanation.contains(
            "constructs the invocation token warden_executor::InvocationToken in warden-tools"
        ),
        "{report}"
    );
}

#[test]
fn an_associated_function_through_a_plain_import() {
    assert_mint(
        "//! Planted.\nuse warden_executor::InvocationToken;\n\n\
         pub fn forge() -> InvocationToken {\n    InvocationToken::mint(\"read\")\n}\n",
        "InvocationToken::mint",
    );
}

#[test]
fn any_associated_function_counts() {
    assert_mint(
        "//! Planted.\nuse warden_executor::InvocationToken;\n\n\
         pub fn forge() -> InvocationToken {\n    InvocationToken::new()\n}\n",
        "InvocationToken::new",
    );
}

#[test]
fn a_renamed_import() {
    assert_mint(
        "//! Planted.\nuse warden_executor::InvocationToken as T;\n\n\
         pub fn forge() -> T {\n    T::mint(\"read\")\n}\n",
        "T::mint",
    );
}

#[test]
fn a_renamed_import_inside_a_group() {
    assert_mint(
        "//! Planted.\nuse warden_executor::{Tool, InvocationToken as Ticket};\n\n\
         pub fn forge() -> Ticket {\n    Ticket::mint(\"read\")\n}\n",
        "Ticket::mint",
    );
}

#[test]
fn a_renamed_crate() {
    assert_mint(
        "//! Planted.\nuse warden_executor as exec;\n\n\
         pub fn forge() -> exec::InvocationToken {\n    exec::InvocationToken::mint(\"read\")\n}\n",
        "exec::InvocationToken::mint",
    );
}

#[test]
fn a_fully_qualified_path() {
    assert_mint(
        "//! Planted.\n\npub fn forge() -> warden_executor::InvocationToken {\n    \
         ::warden_executor::InvocationToken::mint(\"read\")\n}\n",
        "::warden_executor::InvocationToken::mint",
    );
}

#[test]
fn a_qualified_self_type() {
    assert_mint(
        "//! Planted.\nuse warden_executor::InvocationToken;\n\n\
         pub fn forge() -> InvocationToken {\n    <InvocationToken as Default>::default()\n}\n",
        "<InvocationToken as Default>",
    );
}

#[test]
fn a_glob_import() {
    assert_mint(
        "//! Planted.\nuse warden_executor::*;\n\n\
         pub fn forge() -> InvocationToken {\n    InvocationToken::mint(\"read\")\n}\n",
        "InvocationToken::mint",
    );
}

#[test]
fn a_struct_literal() {
    assert_mint(
        "//! Planted.\nuse warden_executor::InvocationToken;\n\n\
         pub fn forge() -> InvocationToken {\n    InvocationToken {\n        action: String::new(),\n    }\n}\n",
        "    InvocationToken {",
    );
}

#[test]
fn a_function_pointer_to_the_constructor() {
    assert_mint(
        "//! Planted.\n\npub fn forge() {\n    let f = warden_executor::InvocationToken::mint;\n    let _ = f;\n}\n",
        "let f =",
    );
}

#[test]
fn inside_vec_and_println() {
    let text = "//! Planted.\nuse warden_executor::InvocationToken as T;\n\n\
                pub fn forge() {\n    let v = vec![\n        T::mint(\"a\"),\n    ];\n    \
                println!(\"{:?}\", T::mint(\"b\"));\n    let _ = v;\n}\n";
    let report = Fixture::base()
        .module("tools", "planted", text)
        .assert_violations(&[
            (
                PLANTED,
                line_of(text, "T::mint(\"a\")"),
                BypassRule::TokenMint,
            ),
            (
                PLANTED,
                line_of(text, "T::mint(\"b\")"),
                BypassRule::TokenMint,
            ),
        ]);
    assert_eq!(report.violations.len(), 2);
}

#[test]
fn inside_a_macro_rules_body() {
    assert_mint(
        "//! Planted.\n\nmacro_rules! forge {\n    ($a:expr) => {\n        \
         warden_executor::InvocationToken::mint($a)\n    };\n}\n\npub fn f() {\n    let _ = forge!(\"x\");\n}\n",
        "warden_executor::InvocationToken::mint($a)",
    );
}

#[test]
fn inside_a_custom_macro_with_its_own_syntax() {
    assert_mint(
        "//! Planted.\nuse warden_executor::InvocationToken;\n\n\
         pub fn f() {\n    my_dsl!(token => InvocationToken::mint(\"x\"); done);\n}\n",
        "my_dsl!",
    );
}

#[test]
fn inside_a_nested_macro() {
    assert_mint(
        "//! Planted.\nuse warden_executor::InvocationToken;\n\n\
         pub fn f() {\n    outer!(inner![InvocationToken::mint(\"x\")] => 1);\n}\n",
        "outer!",
    );
}

#[test]
fn in_build_rs() {
    let text = "//! Build script.\n#![forbid(unsafe_code)]\n\nfn main() {\n    \
                let _ = warden_executor::InvocationToken::mint(\"build\");\n}\n";
    Fixture::base()
        .write("crates/tools/build.rs", text)
        .assert_violations(&[(
            "crates/tools/build.rs",
            line_of(text, "InvocationToken::mint"),
            BypassRule::TokenMint,
        )]);
}

#[test]
fn in_a_path_attribute_module_outside_src() {
    let text = "//! Pulled in by #[path].\n\npub fn forge() {\n    \
                let _ = warden_executor::InvocationToken::mint(\"p\");\n}\n";
    Fixture::base()
        .write("crates/tools/elsewhere/forged.rs", text)
        .append(
            "crates/tools/src/lib.rs",
            "#[path = \"../elsewhere/forged.rs\"]\nmod forged;\n",
        )
        .assert_violations(&[(
            "crates/tools/elsewhere/forged.rs",
            line_of(text, "InvocationToken::mint"),
            BypassRule::TokenMint,
        )]);
}

#[test]
fn in_an_included_file_outside_src() {
    let text = "//! Pulled in by include!.\n\npub fn forge() {\n    \
                let _ = warden_executor::InvocationToken::mint(\"i\");\n}\n";
    Fixture::base()
        .write("crates/tools/generated/forged.rs", text)
        .append(
            "crates/tools/src/lib.rs",
            "include!(\"../generated/forged.rs\");\n",
        )
        .assert_violations(&[(
            "crates/tools/generated/forged.rs",
            line_of(text, "InvocationToken::mint"),
            BypassRule::TokenMint,
        )]);
}

#[test]
fn in_an_included_expression_using_the_includers_imports() {
    // An expression fragment parses on its own; its path is fully qualified.
    let text = "warden_executor::InvocationToken::mint(\"expr\")\n";
    Fixture::base()
        .write("crates/tools/src/fragment.in", text)
        .append(
            "crates/tools/src/lib.rs",
            "/// Forges.\npub fn forge() -> warden_executor::InvocationToken {\n    \
             include!(\"fragment.in\")\n}\n",
        )
        .assert_violations(&[("crates/tools/src/fragment.in", 1, BypassRule::TokenMint)]);
}

#[test]
fn in_a_file_no_module_reaches() {
    let text = "//! Orphan.\n\npub fn forge() {\n    \
                let _ = warden_executor::InvocationToken::mint(\"o\");\n}\n";
    Fixture::base()
        .write("crates/tools/src/orphan.rs", text)
        .assert_violations(&[(
            "crates/tools/src/orphan.rs",
            line_of(text, "InvocationToken::mint"),
            BypassRule::TokenMint,
        )]);
}

#[test]
fn through_a_re_export_in_another_workspace_crate() {
    // tools re-exports the token under another name; cli mints it through that path.
    let cli = "//! The composition root.\n#![forbid(unsafe_code)]\n\nfn main() {\n    \
               let _ = warden_tools::Ticket::mint(\"x\");\n}\n";
    Fixture::base()
        .append(
            "crates/tools/src/lib.rs",
            "pub use warden_executor::InvocationToken as Ticket;\n",
        )
        .write("crates/cli/src/main.rs", cli)
        .assert_violations(&[(
            "crates/cli/src/main.rs",
            line_of(cli, "Ticket::mint"),
            BypassRule::TokenMint,
        )]);
}

#[test]
fn through_a_local_alias_reached_by_a_glob() {
    let lib_extra = "pub(crate) use warden_executor::InvocationToken as Permit;\n";
    let text =
        "//! Planted.\nuse super::*;\n\npub fn forge() {\n    let _ = Permit::mint(\"x\");\n}\n";
    Fixture::base()
        .append("crates/tools/src/lib.rs", lib_extra)
        .module("tools", "planted", text)
        .assert_violations(&[(
            PLANTED,
            line_of(text, "Permit::mint"),
            BypassRule::TokenMint,
        )]);
}

#[test]
fn the_executor_itself_may_mint() {
    // The base executor mints in `execute` and builds a struct literal in `forge`.
    let fixture = Fixture::base();
    assert!(
        fixture
            .get("crates/executor/src/lib.rs")
            .contains("InvocationToken::mint")
    );
    fixture.assert_violations(&[]);
}

#[test]
fn naming_the_token_type_is_not_minting() {
    Fixture::base()
        .module(
            "tools",
            "planted",
            "//! Planted.\nuse warden_executor::InvocationToken;\n\n\
             pub fn action(token: &InvocationToken) -> String {\n    \
             let t: Option<&InvocationToken> = Some(token);\n    \
             t.map(|t| t.action().to_owned()).unwrap_or_default()\n}\n",
        )
        .assert_violations(&[]);
}
