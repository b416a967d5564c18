//! Fuzz target: the bash oracle. Every command Warden allows under a permissive policy (default
//! allow, `rm` and writes into `.git` denied) runs in real bash, contained; whatever bash runs
//! or writes must be among the verdict's subjects. The oracle is the one the test suite uses
//! (`crates/cli/tests/support/oracle.rs`); its helper is the `warden` binary or
//! `warden-sandbox-helper`, named by `WARDEN_SANDBOX_HELPER`.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use warden_policy::{Format, LoadedPolicy, PathEnv, PolicySnapshot};

#[path = "../../crates/cli/tests/support/oracle.rs"]
#[allow(dead_code, unreachable_pub)]
mod oracle;

fn setup() -> &'static (oracle::Oracle, PolicySnapshot) {
    static SETUP: OnceLock<(oracle::Oracle, PolicySnapshot)> = OnceLock::new();
    SETUP.get_or_init(|| {
        let helper = std::env::var_os("WARDEN_SANDBOX_HELPER")
            .unwrap_or_else(|| panic!("set WARDEN_SANDBOX_HELPER to the warden binary"));
        let oracle = oracle::Oracle::new(helper.into())
            .unwrap_or_else(|e| panic!("the oracle needs its sandbox: {e}"));
        let text = "default = \"allow\"\ndeny = [\"bash(rm:*)\", \"write(.git/**)\"]\n";
        let file = LoadedPolicy::from_text(text.into(), Format::Toml, "p.toml", "p", None)
            .unwrap_or_else(|e| panic!("{e}"));
        let env = PathEnv {
            project_root: "/".into(),
            home: None,
        };
        let policy = PolicySnapshot::from_files(&[file], env).unwrap_or_else(|e| panic!("{e}"));
        (oracle, policy)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(command) = std::str::from_utf8(data) else {
        return;
    };
    // The oracle's record markers are its own; bash is not given them.
    if command.contains(['\u{1c}', '\u{1d}', '\u{1e}', '\u{1f}', '\0']) {
        return;
    }
    let (oracle, policy) = setup();
    if let Err(finding) = oracle.check(policy, command) {
        panic!("{finding}");
    }
});
