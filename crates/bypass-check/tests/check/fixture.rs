//! A small Warden-shaped workspace generated into a temporary folder: clean as generated, so that
//! each test plants exactly one kind of violation and asserts exactly what is reported.
//!
//! Every crate has path dependencies only, so `cargo metadata --no-deps --offline` works with no
//! network and no registry.

use std::collections::BTreeMap;
use std::path::Path;

use warden_bypass_check::{BypassError, BypassReport, BypassRule, check_workspace};

/// The fixture's files, by path relative to its root.
#[derive(Clone)]
pub(crate) struct Fixture {
    files: BTreeMap<String, String>,
}

const ROOT_MANIFEST: &str = r#"[workspace]
resolver = "3"
members = ["crates/*", "xtask"]

[workspace.package]
version = "0.1.0"
edition = "2024"
publish = false

[workspace.metadata.warden.layers]
warden-contracts = 0
warden-policy = 1
warden-evidence = 1
warden-sandbox = 1
warden-executor = 2
warden-tools = 3
warden-mcp = 3
warden-cli = 4

[workspace.metadata.warden.boundary]
tooling = ["xtask", "warden-lint"]
executors = ["warden-executor"]
token = "warden_executor::InvocationToken"
callable = "warden_executor::Tool"
invoke = "invoke"
test-only-features = ["test-util"]
unsafe-allowed = ["warden-sandbox"]
raw-transports = ["std::process", "warden_mcp::transport"]

[workspace.dependencies]
warden-contracts = { path = "crates/contracts" }
warden-policy = { path = "crates/policy" }
warden-evidence = { path = "crates/evidence" }
warden-sandbox = { path = "crates/sandbox" }
warden-executor = { path = "crates/executor" }
warden-tools = { path = "crates/tools" }
warden-mcp = { path = "crates/mcp" }
warden-cli = { path = "crates/cli" }
warden-lint = { path = "crates/lint" }
"#;

fn manifest(name: &str, deps: &[&str], extra: &str) -> String {
    let mut text = format!(
        "[package]\nname = \"{name}\"\nversion.workspace = true\nedition.workspace = true\n\
         publish.workspace = true\n\n[dependencies]\n"
    );
    for dep in deps {
        text.push_str(&format!("{dep}.workspace = true\n"));
    }
    text.push_str(extra);
    text
}

fn lib(doc: &str, body: &str) -> String {
    format!("//! {doc}\n#![forbid(unsafe_code)]\n\n{body}")
}

impl Fixture {
    /// The clean base workspace.
    pub(crate) fn base() -> Fixture {
        let mut files = BTreeMap::new();
        let mut put = |path: &str, text: String| {
            files.insert(path.to_owned(), text);
        };
        put("Cargo.toml", ROOT_MANIFEST.to_owned());

        put(
            "crates/contracts/Cargo.toml",
            manifest("warden-contracts", &[], ""),
        );
        put(
            "crates/contracts/src/lib.rs",
            lib("Values.", "/// An id.\npub type Id = u64;\n"),
        );
        for name in ["policy", "evidence"] {
            put(
                &format!("crates/{name}/Cargo.toml"),
                manifest(&format!("warden-{name}"), &["warden-contracts"], ""),
            );
            put(
                &format!("crates/{name}/src/lib.rs"),
                lib("A layer-1 crate.", "/// Nothing.\npub fn f() {}\n"),
            );
        }
        put(
            "crates/sandbox/Cargo.toml",
            manifest("warden-sandbox", &["warden-contracts"], ""),
        );
        put(
            "crates/sandbox/src/lib.rs",
            "//! The one crate allowed `unsafe`; it need not forbid it.\n#![deny(unsafe_code)]\n\n\
             /// Zeroed memory.\n#[allow(unsafe_code)]\npub fn zeroed() -> u64 {\n    \
             unsafe { core::mem::zeroed() }\n}\n"
                .to_owned(),
        );

        put(
            "crates/executor/Cargo.toml",
            manifest(
                "warden-executor",
                &["warden-contracts"],
                "\n[features]\ntest-util = []\n",
            ),
        );
        put(
            "crates/executor/src/lib.rs",
            lib(
                "The executor: the only minter and the only caller of `invoke`.",
                "mod token;\nmod tool;\n\npub use token::InvocationToken;\npub use tool::Tool;\n\n\
                 /// Runs a tool.\npub fn execute(tool: &dyn Tool, arguments: String) -> String {\n    \
                 let token = InvocationToken::mint(tool.name());\n    \
                 tool.invoke(token, arguments)\n}\n\n\
                 /// Forges for tests.\n#[cfg(feature = \"test-util\")]\n\
                 pub fn forge() -> InvocationToken {\n    InvocationToken { action: String::new() }\n}\n",
            ),
        );
        put(
            "crates/executor/src/token.rs",
            "//! The token.\n\n/// Permission to invoke once.\n#[derive(Debug)]\n\
             pub struct InvocationToken {\n    pub(crate) action: String,\n}\n\n\
             impl InvocationToken {\n    pub(crate) fn mint(action: &str) -> Self {\n        \
             Self { action: action.to_owned() }\n    }\n\n    /// The action.\n    \
             pub fn action(&self) -> &str {\n        &self.action\n    }\n}\n"
                .to_owned(),
        );
        put(
            "crates/executor/src/tool.rs",
            "//! The callable trait.\n\nuse crate::InvocationToken;\n\n/// A tool.\npub trait Tool {\n    \
             /// Its name.\n    fn name(&self) -> &str;\n    /// Runs it.\n    \
             fn invoke(&self, token: InvocationToken, arguments: String) -> String;\n}\n"
                .to_owned(),
        );

        put(
            "crates/tools/Cargo.toml",
            manifest(
                "warden-tools",
                &["warden-contracts", "warden-executor"],
                "\n[dev-dependencies]\nwarden-executor = { workspace = true, features = [\"test-util\"] }\n",
            ),
        );
        put(
            "crates/tools/src/lib.rs",
            lib(
                "Built-in tools.",
                "mod read;\nmod util;\n\npub use read::Read;\npub use util::Pipeline;\n",
            ),
        );
        put(
            "crates/tools/src/read.rs",
            "//! Implementing the callable trait is allowed.\n\n\
             use warden_executor::{InvocationToken, Tool};\n\n/// Reads.\npub struct Read;\n\n\
             impl Tool for Read {\n    fn name(&self) -> &str {\n        \"read\"\n    }\n\n    \
             fn invoke(&self, token: InvocationToken, arguments: String) -> String {\n        \
             format!(\"{}:{arguments}\", token.action())\n    }\n}\n"
                .to_owned(),
        );
        put(
            "crates/tools/src/util.rs",
            "//! A method named `invoke` on an unrelated type, in a file without the callable trait.\n\n\
             /// Steps.\npub struct Pipeline;\n\nimpl Pipeline {\n    /// Not a tool call.\n    \
             pub fn invoke(&self, step: u8) -> u8 {\n        step + 1\n    }\n}\n\n\
             /// Runs the pipeline.\npub fn run(pipeline: &Pipeline) -> u8 {\n    \
             pipeline.invoke(1) + Pipeline::invoke(pipeline, 2)\n}\n"
                .to_owned(),
        );
        put(
            "crates/tools/tests/smoke.rs",
            "//! Dev code: the dev-dependency enables `test-util`.\n\n#[test]\nfn forges() {\n    \
             let _ = warden_executor::forge();\n}\n"
                .to_owned(),
        );

        put(
            "crates/mcp/Cargo.toml",
            manifest("warden-mcp", &["warden-contracts", "warden-executor"], ""),
        );
        put(
            "crates/mcp/src/lib.rs",
            lib(
                "MCP, with a private raw transport.",
                "mod transport;\n\n/// Discovers.\npub fn discover() -> usize {\n    \
                 transport::Client.count()\n}\n",
            ),
        );
        put(
            "crates/mcp/src/transport.rs",
            "//! The raw transport: private to the crate.\n\n\
             pub(crate) use std::process::Command as RawCommand;\n\n\
             pub(crate) struct Client;\n\nimpl Client {\n    pub(crate) fn count(&self) -> usize {\n        \
             let _ = RawCommand::new(\"true\");\n        0\n    }\n}\n"
                .to_owned(),
        );

        put(
            "crates/cli/Cargo.toml",
            manifest(
                "warden-cli",
                &[
                    "warden-contracts",
                    "warden-policy",
                    "warden-evidence",
                    "warden-sandbox",
                    "warden-executor",
                    "warden-tools",
                    "warden-mcp",
                ],
                "",
            ),
        );
        put(
            "crates/cli/src/main.rs",
            lib(
                "The composition root.",
                "fn main() {\n    \
                 let _ = warden_executor::execute(&warden_tools::Read, String::new());\n}\n",
            ),
        );

        put(
            "crates/lint/Cargo.toml",
            manifest("warden-lint", &["warden-executor"], ""),
        );
        put(
            "crates/lint/src/lib.rs",
            lib("Tooling library.", "/// Lints.\npub fn lint() {}\n"),
        );
        put(
            "xtask/Cargo.toml",
            "[package]\nname = \"xtask\"\nversion.workspace = true\nedition.workspace = true\n\
             publish.workspace = true\n\n[dependencies]\nwarden-lint.workspace = true\n"
                .to_owned(),
        );
        put(
            "xtask/src/main.rs",
            lib("Automation.", "fn main() {\n    warden_lint::lint();\n}\n"),
        );
        Fixture { files }
    }

    /// The current text of `path`.
    pub(crate) fn get(&self, path: &str) -> &str {
        match self.files.get(path) {
            Some(text) => text,
            None => panic!("fixture has no {path}"),
        }
    }

    /// Writes (or overwrites) `path`.
    pub(crate) fn write(mut self, path: &str, text: &str) -> Fixture {
        self.files.insert(path.to_owned(), text.to_owned());
        self
    }

    /// Replaces the one occurrence of `from` in `path` with `to`.
    pub(crate) fn replace(self, path: &str, from: &str, to: &str) -> Fixture {
        let text = self.get(path);
        assert_eq!(text.matches(from).count(), 1, "{from:?} in {path}");
        let text = text.replacen(from, to, 1);
        self.write(path, &text)
    }

    /// Adds `text` to the end of `path`.
    pub(crate) fn append(self, path: &str, text: &str) -> Fixture {
        let whole = format!("{}{text}", self.get(path));
        self.write(path, &whole)
    }

    /// Adds a dependency entry line to `[dependencies]` of crate folder `krate`.
    pub(crate) fn dependency(self, krate: &str, entry: &str) -> Fixture {
        let path = format!("crates/{krate}/Cargo.toml");
        self.replace(
            &path,
            "[dependencies]\n",
            &format!("[dependencies]\n{entry}\n"),
        )
    }

    /// Adds module `name` with `text` to the library of crate folder `krate`.
    pub(crate) fn module(self, krate: &str, name: &str, text: &str) -> Fixture {
        let lib = format!("crates/{krate}/src/lib.rs");
        self.write(&format!("crates/{krate}/src/{name}.rs"), text)
            .append(&lib, &format!("mod {name};\n"))
    }

    /// Writes the workspace to a temporary folder and checks it.
    pub(crate) fn try_check(&self) -> Result<BypassReport, BypassError> {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in &self.files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, text).unwrap();
        }
        check_workspace(&dir.path().join("Cargo.toml"))
    }

    /// Checks, panicking on an error.
    pub(crate) fn check(&self) -> BypassReport {
        match self.try_check() {
            Ok(report) => report,
            Err(error) => panic!("check failed to run: {error}"),
        }
    }

    /// Checks and asserts that exactly `expected` (path, line, rule) were reported.
    #[track_caller]
    pub(crate) fn assert_violations(&self, expected: &[(&str, usize, BypassRule)]) -> BypassReport {
        let report = self.check();
        let mut got: Vec<(String, usize, BypassRule)> = report
            .violations
            .iter()
            .map(|v| (v.path.to_string_lossy().replace('\\', "/"), v.line, v.rule))
            .collect();
        let mut want: Vec<(String, usize, BypassRule)> = expected
            .iter()
            .map(|(p, l, r)| ((*p).to_owned(), *l, *r))
            .collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "report:\n{report}");
        report
    }
}

/// The 1-based line of the first occurrence of `needle` in `text`.
#[track_caller]
pub(crate) fn line_of(text: &str, needle: &str) -> usize {
    match text.lines().position(|l| l.contains(needle)) {
        Some(index) => index + 1,
        None => panic!("{needle:?} not found in:\n{text}"),
    }
}

/// The workspace this crate lives in.
pub(crate) fn warden_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}
