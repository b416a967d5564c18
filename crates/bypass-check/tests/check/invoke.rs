//! Calls of the callable trait's invoke method outside the executor, in every form the brief
//! names, and the look-alikes that are not calls of it.

use warden_bypass_check::BypassRule;

use crate::fixture::{Fixture, line_of};

const PLANTED: &str = "crates/mcp/src/planted.rs";

/// Plants `text` as module `planted` of the mcp crate and expects exactly one invoke-call per
/// marker, on the marker's line.
#[track_caller]
fn assert_invokes(text: &str, markers: &[&str]) {
    let expected: Vec<(&str, usize, BypassRule)> = markers
        .iter()
        .map(|m| (PLANTED, line_of(text, m), BypassRule::InvokeCall))
        .collect();
    let report = Fixture::base()
        .module("mcp", "planted", text)
        .assert_violations(&expected);
    for violation in &report.violations {
        assert!(
            violation
                .explanation
                .contains("calls the callable's warden_executor::Tool::invoke"),
            "{report}"
        );
        assert!(violation.explanation.contains("in warden-mcp"), "{report}");
    }
}

#[test]
fn ufcs_through_the_imported_trait() {
    assert_invokes(
        "//! Planted.\nuse warden_executor::{InvocationToken, Tool};\n\n\
         pub fn call(tool: &dyn Tool, token: InvocationToken) -> String {\n    \
         Tool::invoke(tool, token, String::new())\n}\n",
        &["Tool::invoke"],
    );
}

#[test]
fn a_fully_qualified_trait_path_without_any_import() {
    assert_invokes(
        "//! Planted.\n\npub fn call(\n    tool: &dyn warden_executor::Tool,\n    \
         token: warden_executor::InvocationToken,\n) -> String {\n    \
         warden_executor::Tool::invoke(tool, token, String::new())\n}\n",
        &["warden_executor::Tool::invoke"],
    );
}

#[test]
fn a_qualified_self_with_the_trait() {
    assert_invokes(
        "//! Planted.\n\npub fn call(\n    tool: &dyn warden_executor::Tool,\n    \
         token: warden_executor::InvocationToken,\n) -> String {\n    \
         <_ as warden_executor::Tool>::invoke(tool, token, String::new())\n}\n",
        &["<_ as warden_executor::Tool>"],
    );
}

#[test]
fn a_qualified_self_with_a_dyn_trait_type() {
    assert_invokes(
        "//! Planted.\nuse warden_executor::{InvocationToken, Tool as T};\n\n\
         pub fn call(tool: &dyn T, token: InvocationToken) -> String {\n    \
         <dyn T>::invoke(tool, token, String::new())\n}\n",
        &["<dyn T>::invoke"],
    );
}

#[test]
fn a_renamed_trait_import() {
    assert_invokes(
        "//! Planted.\nuse warden_executor::Tool as Callable;\n\n\
         pub fn call(tool: &dyn Callable, token: warden_executor::InvocationToken) -> String {\n    \
         Callable::invoke(tool, token, String::new())\n}\n",
        &["Callable::invoke"],
    );
}

#[test]
fn method_syntax_with_the_trait_imported() {
    assert_invokes(
        "//! Planted.\nuse warden_executor::{InvocationToken, Tool};\n\n\
         pub fn call(tool: &dyn Tool, token: InvocationToken) -> String {\n    \
         tool.invoke(token, String::new())\n}\n",
        &["tool.invoke"],
    );
}

#[test]
fn method_syntax_with_the_trait_imported_as_underscore() {
    assert_invokes(
        "//! Planted.\nuse warden_executor::Tool as _;\n\n\
         pub fn call(tool: &warden_tools::Read, token: warden_executor::InvocationToken) -> String {\n    \
         tool.invoke(token, String::new())\n}\n",
        &["tool.invoke"],
    );
}

#[test]
fn method_syntax_with_the_trait_glob_imported() {
    assert_invokes(
        "//! Planted.\nuse warden_executor::*;\n\n\
         pub fn call(tool: &dyn Tool, token: InvocationToken) -> String {\n    \
         tool.invoke(token, String::new())\n}\n",
        &["tool.invoke"],
    );
}

#[test]
fn method_syntax_with_the_trait_imported_inside_the_function() {
    assert_invokes(
        "//! Planted.\n\npub fn call(tool: &warden_tools::Read, token: warden_executor::InvocationToken) -> String {\n    \
         use warden_executor::Tool;\n    tool.invoke(token, String::new())\n}\n",
        &["tool.invoke"],
    );
}

#[test]
fn method_syntax_on_a_fully_qualified_trait_object() {
    // Methods of `dyn Trait` are callable without importing the trait.
    assert_invokes(
        "//! Planted.\n\npub fn call(\n    tool: &dyn warden_executor::Tool,\n    \
         token: warden_executor::InvocationToken,\n) -> String {\n    \
         tool.invoke(token, String::new())\n}\n",
        &["tool.invoke"],
    );
}

#[test]
fn method_syntax_on_a_generic_with_a_fully_qualified_bound() {
    assert_invokes(
        "//! Planted.\n\npub fn call<T: warden_executor::Tool>(tool: &T, token: u8) -> String {\n    \
         tool.invoke(token, String::new())\n}\n",
        &["tool.invoke"],
    );
}

#[test]
fn method_syntax_where_only_the_token_type_is_named() {
    // The receiver's type comes from elsewhere (`&dyn Tool` returned by a registry); holding a
    // token is what makes the call possible, and its type is named.
    assert_invokes(
        "//! Planted.\n\npub fn call(registry: &crate::Registry, token: warden_executor::InvocationToken) {\n    \
         let _ = registry.get(\"read\").invoke(token, String::new());\n}\n",
        &[".invoke(token"],
    );
}

#[test]
fn type_path_call_with_the_trait_in_scope() {
    assert_invokes(
        "//! Planted.\nuse warden_executor::Tool as _;\nuse warden_tools::Read;\n\n\
         pub fn call(token: warden_executor::InvocationToken) -> String {\n    \
         Read::invoke(&Read, token, String::new())\n}\n",
        &["Read::invoke"],
    );
}

#[test]
fn method_syntax_inside_a_format_macro() {
    assert_invokes(
        "//! Planted.\nuse warden_executor::{InvocationToken, Tool};\n\n\
         pub fn call(tool: &dyn Tool, token: InvocationToken) {\n    \
         println!(\"{}\", tool.invoke(token, String::new()));\n}\n",
        &["println!"],
    );
}

#[test]
fn method_syntax_inside_a_custom_macro() {
    assert_invokes(
        "//! Planted.\nuse warden_executor::{InvocationToken, Tool};\n\n\
         pub fn call(tool: &dyn Tool, token: InvocationToken) {\n    \
         run_all!(tool => tool.invoke(token, String::new()); then stop);\n}\n",
        &["run_all!"],
    );
}

#[test]
fn through_a_trait_re_exported_by_another_workspace_crate() {
    // tools re-exports the trait under another name; cli (which depends on tools) calls it.
    let main = "//! Planted.\n#![forbid(unsafe_code)]\nuse warden_tools::Callable;\n\n\
                fn call(tool: &dyn Callable, token: warden_executor::InvocationToken) -> String {\n    \
                tool.invoke(token, String::new())\n}\n\nfn main() {}\n";
    Fixture::base()
        .replace(
            "crates/tools/src/lib.rs",
            "pub use read::Read;\n",
            "pub use read::Read;\npub use warden_executor::Tool as Callable;\n",
        )
        .write("crates/cli/src/main.rs", main)
        .assert_violations(&[(
            "crates/cli/src/main.rs",
            line_of(main, "tool.invoke"),
            BypassRule::InvokeCall,
        )]);
}

#[test]
fn implementing_the_trait_is_allowed() {
    Fixture::base()
        .module(
            "mcp",
            "planted",
            "//! Planted.\nuse warden_executor::{InvocationToken, Tool};\n\n\
             /// A remote tool.\npub struct Remote;\n\nimpl Tool for Remote {\n    \
             fn name(&self) -> &str {\n        \"remote\"\n    }\n\n    \
             fn invoke(&self, token: InvocationToken, arguments: String) -> String {\n        \
             format!(\"{} {arguments}\", token.action())\n    }\n}\n",
        )
        .assert_violations(&[]);
}

#[test]
fn an_unrelated_invoke_method_without_the_trait_in_scope_is_not_a_call() {
    // The base fixture's tools/src/util.rs has `pipeline.invoke(1)` and `Pipeline::invoke(..)`.
    let fixture = Fixture::base();
    assert!(
        fixture
            .get("crates/tools/src/util.rs")
            .contains("pipeline.invoke(1)")
    );
    assert!(
        !fixture
            .get("crates/tools/src/util.rs")
            .contains("warden_executor")
    );
    fixture
        .module(
            "mcp",
            "planted",
            "//! Planted.\n\nstruct Rpc;\n\nimpl Rpc {\n    fn invoke(&self) -> u8 {\n        0\n    }\n}\n\n\
             /// Calls an RPC.\npub fn call() -> u8 {\n    Rpc.invoke() + format!(\"{}\", Rpc.invoke()).len() as u8\n}\n",
        )
        .assert_violations(&[]);
}

#[test]
fn the_executor_itself_may_invoke() {
    let fixture = Fixture::base();
    assert!(
        fixture
            .get("crates/executor/src/lib.rs")
            .contains("tool.invoke(token")
    );
    fixture.assert_violations(&[]);
}

#[test]
fn method_syntax_in_a_child_module_that_glob_imports_its_parent() {
    let lib = "crates/mcp/src/lib.rs";
    let text = "//! Planted.\nuse super::*;\n\n\
                pub fn call(tool: &dyn Tool, token: warden_executor::InvocationToken) -> String {\n    \
                tool.invoke(token, String::new())\n}\n";
    Fixture::base()
        .append(lib, "use warden_executor::Tool;\n")
        .module("mcp", "planted", text)
        .assert_violations(&[(
            PLANTED,
            line_of(text, "tool.invoke"),
            BypassRule::InvokeCall,
        )]);
}

#[test]
fn a_dependency_renamed_in_the_manifest() {
    let text = "//! Planted.\nuse exec::Tool;\n\n\
                pub fn call(tool: &dyn Tool, token: exec::InvocationToken) -> String {\n    \
                tool.invoke(token, String::new())\n}\n";
    Fixture::base()
        .replace(
            "crates/mcp/Cargo.toml",
            "warden-executor.workspace = true",
            "exec = { package = \"warden-executor\", path = \"../executor\" }",
        )
        .module("mcp", "planted", text)
        .assert_violations(&[(
            PLANTED,
            line_of(text, "tool.invoke"),
            BypassRule::InvokeCall,
        )]);
}

#[test]
fn an_extern_crate_alias() {
    let text = "//! Planted.\nextern crate warden_executor as engine;\n\n\
                pub fn call(tool: &dyn engine::Tool, token: engine::InvocationToken) -> String {\n    \
                engine::Tool::invoke(tool, token, String::new())\n}\n";
    assert_invokes(text, &["engine::Tool::invoke"]);
}
