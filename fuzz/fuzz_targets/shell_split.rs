//! Fuzz target: the shell splitter and a `bash` decision never panic; and a command that
//! splits, followed by a line running a denied command, is never allowed.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use warden_policy::{Call, Decision, PolicyBuilder, PolicySnapshot, Rule, RuleSet, Source};

fn policy() -> &'static PolicySnapshot {
    static POLICY: OnceLock<PolicySnapshot> = OnceLock::new();
    POLICY.get_or_init(|| {
        let set = RuleSet {
            allow: Rule::parse_list("bash edit read").unwrap_or_default(),
            deny: Rule::parse_list("bash(rm:*)").unwrap_or_default(),
            ..RuleSet::default()
        };
        match PolicyBuilder::new()
            .default(Decision::Allow)
            .own(Source::trusted("fuzz"), set)
            .build()
        {
            Ok(p) => p,
            Err(e) => panic!("the fuzz policy builds: {e}"),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(command) = std::str::from_utf8(data) else {
        return;
    };
    let split = warden_policy::shell::split_command(command);
    let _ = warden_policy::shell::is_read_only(command);
    let call = Call::new("bash", serde_json::json!({ "command": command }));
    let verdict = policy().decide(&call);
    if split.is_err() {
        assert_eq!(
            verdict.decision,
            Decision::Deny,
            "{command:?}: {}",
            verdict.reason
        );
        return;
    }
    // A trailing backslash would join the next line into the last word (bash does too).
    if command.ends_with('\\') {
        return;
    }
    let appended = format!("{command}\nrm -rf /x");
    let call = Call::new("bash", serde_json::json!({ "command": appended }));
    let verdict = policy().decide(&call);
    assert_ne!(
        verdict.decision,
        Decision::Allow,
        "{appended:?} was allowed: {}",
        verdict.reason
    );
});
