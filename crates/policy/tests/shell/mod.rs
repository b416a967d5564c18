//! The shell splitter through the library: the shell corpus, adversarial cases and
//! properties.

use std::path::PathBuf;

use serde_json::{Value, json};
use warden_policy::{Call, Decision, Format, LoadedPolicy, PathEnv, PolicySnapshot, Verdict};

#[path = "adversarial.rs"]
mod adversarial;
#[path = "corpus.rs"]
mod corpus;
#[path = "hostile.rs"]
mod hostile;
#[path = "props.rs"]
mod props;

/// Where relative paths resolve in these tests.
fn env() -> PathEnv {
    PathEnv {
        project_root: "/repo".into(),
        home: Some("/home/agent".into()),
    }
}

/// A policy from rule lists and a default, as TOML text.
fn policy_text(allow: &[&str], deny: &[&str], ask: &[&str], default: &str) -> String {
    let list = |rules: &[&str]| serde_json::to_string(rules).unwrap();
    format!(
        "default = \"{default}\"\nallow = {}\ndeny = {}\nask = {}\n",
        list(allow),
        list(deny),
        list(ask)
    )
}

fn snapshot(text: &str) -> PolicySnapshot {
    let file =
        LoadedPolicy::from_text(text.into(), Format::Toml, "policy.toml", "policy", None).unwrap();
    PolicySnapshot::from_files(&[file], env()).unwrap()
}

fn policy(allow: &[&str], deny: &[&str], ask: &[&str], default: &str) -> PolicySnapshot {
    snapshot(&policy_text(allow, deny, ask, default))
}

fn bash(s: &PolicySnapshot, command: &str) -> Verdict {
    s.decide(&Call::new("bash", json!({ "command": command })).with_cwd("/repo"))
}

fn corpus_cases() -> Vec<Value> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/shell/cases.jsonl");
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn decision(s: &str) -> Decision {
    match s {
        "allow" => Decision::Allow,
        "ask" => Decision::Ask,
        "deny" => Decision::Deny,
        other => panic!("unknown decision {other}"),
    }
}
