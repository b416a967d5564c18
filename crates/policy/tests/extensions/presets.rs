//! Presets exactly as the preset table (docs/design/policy.md#presets), through policy files, with
//! a file's own rules on top.

use serde_json::{Value, json};
use warden_policy::*;

fn snapshot(text: &str) -> PolicySnapshot {
    let file = LoadedPolicy::from_text(text.into(), Format::Toml, "p.toml", "project", None)
        .unwrap_or_else(|e| panic!("{e}"));
    let env = PathEnv {
        project_root: "/repo".into(),
        home: None,
    };
    PolicySnapshot::from_files(&[file], env).unwrap_or_else(|e| panic!("{e}"))
}

fn decide(s: &PolicySnapshot, tool: &str, args: Value) -> Verdict {
    s.decide(&Call::new(tool, args))
}

/// Each preset's answer for a read, a list, an edit, a write, a command, a read-only command,
/// an MCP tool and its default, as the table says.
#[test]
fn every_preset_follows_the_table() {
    use Decision::{Allow as A, Ask as Q, Deny as D};
    let calls: [(&str, Value); 7] = [
        ("read", json!({"path": "/repo/a"})),
        ("list", json!({"path": "/repo"})),
        ("edit", json!({"path": "/repo/a"})),
        ("write", json!({"path": "/repo/b"})),
        ("bash", json!({"command": "make build"})),
        ("bash", json!({"command": "ls -la"})),
        ("github__create_issue", json!({})),
    ];
    let table = [
        ("read_only", [A, A, D, D, D, A, D]),
        ("suggest", [A, A, Q, Q, Q, Q, Q]),
        ("auto_edit", [A, A, A, A, Q, Q, Q]),
        ("full_auto", [A, A, A, A, A, A, Q]),
        ("safe", [A, A, A, A, Q, Q, D]),
        ("allow_all", [A, A, A, A, A, A, A]),
        ("deny_all", [D, D, D, D, D, D, D]),
    ];
    for (preset, want) in table {
        let s = snapshot(&format!("preset = \"{preset}\""));
        for ((tool, args), want) in calls.iter().zip(want) {
            let v = decide(&s, tool, args.clone());
            assert_eq!(v.decision, want, "{preset}: {tool} {args}: {}", v.reason);
            assert_eq!(
                v.rule, None,
                "{preset}: a preset decides as a default, citing no rule"
            );
        }
    }
}

/// `safe` denies its dangerous commands with rules a file's allow cannot beat.
#[test]
fn safe_denies_its_commands_whatever_the_file_allows() {
    let s = snapshot("preset = \"safe\"\nallow = [\"bash\"]");
    for command in [
        "rm -rf build",
        "sudo ls",
        "chmod 777 x",
        "kill -9 1",
        "mkfs /dev/sda",
    ] {
        let v = decide(&s, "bash", json!({ "command": command }));
        assert_eq!(v.decision, Decision::Deny, "{command}");
        assert_eq!(v.source.as_deref(), Some("preset:safe"), "{command}");
    }
    let v = decide(&s, "bash", json!({"command": "make"}));
    assert_eq!(
        v.decision,
        Decision::Allow,
        "the file's allow applies on top"
    );
}

/// A file's rules apply on top of the preset, and its default replaces the preset's.
#[test]
fn a_files_rules_and_default_apply_on_top() {
    let s = snapshot(
        "preset = \"suggest\"\ndefault = \"deny\"\nallow = [\"edit(src/**)\", \"bash(cargo test:*)\"]\ndeny = [\"read(.env)\"]",
    );
    let d = |tool: &str, args: Value| decide(&s, tool, args).decision;
    assert_eq!(
        d("edit", json!({"path": "/repo/src/a.rs"})),
        Decision::Allow
    );
    assert_eq!(d("edit", json!({"path": "/repo/README"})), Decision::Ask);
    assert_eq!(
        d("bash", json!({"command": "cargo test -q"})),
        Decision::Allow
    );
    assert_eq!(d("bash", json!({"command": "cargo build"})), Decision::Ask);
    assert_eq!(d("read", json!({"path": "/repo/.env"})), Decision::Deny);
    assert_eq!(d("read", json!({"path": "/repo/a"})), Decision::Allow);
    // Tools outside the classes take the file's default, not the preset's.
    assert_eq!(
        d("web_fetch", json!({"url": "https://x.org"})),
        Decision::Deny
    );
    assert_eq!(s.default_decision(), Decision::Deny);
}

/// The preset is part of the policy's meaning: its digest changes with it, and it survives a
/// round trip through the file format.
#[test]
fn the_preset_is_in_the_digest_and_round_trips() {
    let a = snapshot("preset = \"suggest\"");
    let b = snapshot("preset = \"auto_edit\"");
    let c = snapshot("default = \"ask\"");
    assert_ne!(a.digest(), b.digest());
    assert_ne!(a.digest(), c.digest());
    assert_eq!(a.preset(), Some(Preset::Suggest));
    let file = PolicyFile::parse("preset = \"suggest\"", Format::Toml, "p.toml").unwrap();
    let json = file.write(Format::Json).unwrap();
    assert_eq!(
        PolicyFile::parse(&json, Format::Json, "p.json").unwrap(),
        file
    );
}

/// An unknown preset names the key and the choices; two files with different presets are
/// refused.
#[test]
fn bad_presets_are_refused() {
    let err = LoadedPolicy::from_text(
        "preset = \"yolo\"".into(),
        Format::Toml,
        "p.toml",
        "project",
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("p.toml") && err.contains("yolo"), "{err}");
    let a = LoadedPolicy::from_text(
        "preset = \"suggest\"".into(),
        Format::Toml,
        "a.toml",
        "a",
        None,
    )
    .unwrap();
    let b = LoadedPolicy::from_text(
        "preset = \"safe\"".into(),
        Format::Toml,
        "b.toml",
        "b",
        None,
    )
    .unwrap();
    let env = PathEnv {
        project_root: "/repo".into(),
        home: None,
    };
    let err = PolicySnapshot::from_files(&[a, b], env)
        .unwrap_err()
        .to_string();
    assert!(err.contains("b.toml") && err.contains("conflicts"), "{err}");
}

/// LionAGI's preset cases (`corpus/reference/lionagi_permission_policy.jsonl`), with its tool
/// names mapped to ours (`reader` → `read`, `search` → `grep`, `editor` → `write`). Its
/// `context` and `web` tools have no class here, so they take the preset's default; LionAGI's
/// `escalate` is our `ask`. Rule texts differ (LionAGI cites `*`), the decisions must not.
#[test]
fn lionagi_preset_cases() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/reference/lionagi_permission_policy.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut ran = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let case: Value = serde_json::from_str(line).unwrap();
        let Some(preset) = case["policy"].as_str().and_then(|p| p.strip_suffix("()")) else {
            continue;
        };
        let Some(behavior) = case["expect"]["behavior"].as_str() else {
            continue;
        };
        let tool = match case["call"]["tool"].as_str().unwrap() {
            "reader" => "read",
            "search" => "grep",
            "editor" => "write",
            "bash" => "bash",
            _ => continue,
        };
        let mut args = case["call"]["args"].clone();
        if tool == "write" {
            args = json!({"path": args["file_path"]});
        }
        let mut want = match behavior {
            "allow" => Decision::Allow,
            "deny" => Decision::Deny,
            _ => Decision::Ask,
        };
        // The preset table: `read_only` lets a read-only command run where LionAGI denies every
        // command (docs/policy.md, "Presets").
        if preset == "read_only"
            && tool == "bash"
            && shell::is_read_only(args["command"].as_str().unwrap_or(""))
        {
            want = Decision::Allow;
        }
        // `bash(rm:*)` also matches a bare `rm` (the rule grammar), where LionAGI's `rm *`
        // needs an argument: stricter here.
        if preset == "safe" && args["command"] == "rm" {
            want = Decision::Deny;
        }
        let s = snapshot(&format!("preset = \"{preset}\""));
        let v = decide(&s, tool, args.clone());
        assert_eq!(v.decision, want, "{preset}: {tool} {args}: {}", v.reason);
        ran += 1;
    }
    assert!(ran >= 20, "only {ran} LionAGI preset cases ran");
}
