//! `warden harness plan|probe|run` with fake provider executables (shell scripts that answer
//! `--version` like the real ones and record how they were launched): golden plans per
//! provider, exit 3 and nothing spawned when a required control is not enforced, the spawn
//! path's argv, environment and settings files (secrets passed by name, never written), and
//! honest probes of what is missing.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use super::{warden, write};

/// A fake provider: `--version` prints `version`; anything else records its arguments, its
/// environment and every file it was pointed at, in `record.txt` in its working folder.
fn fake(dir: &Path, name: &str, version: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nif [ \"$1\" = \"--version\" ]; then echo '{version}'; exit 0; fi\n\
             {{ for a in \"$@\"; do printf 'arg %s\\n' \"$a\"; done; env | sort | sed 's/^/env /'; \
             for a in \"$@\"; do case \"$a\" in /*.json) printf 'file %s\\n' \"$a\"; cat \"$a\";; esac; done; \
             [ -n \"$GEMINI_CLI_HOME\" ] && cat \"$GEMINI_CLI_HOME/.gemini/settings.json\"; true; }} > record.txt\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

const VERSIONS: [(&str, &str); 3] = [
    ("claude-code", "2.1.240 (Claude Code)"),
    ("codex", "codex-cli 0.130.0"),
    ("gemini", "0.56.0"),
];

/// A workspace with a policy and a spec asking for every control.
fn workspace(required: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "policy.toml",
        "default = \"ask\"\nallow = [\"read\", \"bash(git status:*)\"]\ndeny = [\"bash(rm:*)\"]\n",
    );
    write(
        dir.path(),
        "spec.toml",
        &format!(
            "model = \"m-1\"\ntools = \"policy.toml\"\nnetwork = \"off\"\napproval = \"prompt\"\n\
             environment = [\"OPENAI_API_KEY\"]\nmcp_servers = [\"github\"]\nrequired = {required}\n\
             [filesystem]\nwrite = [\"out\"]\n"
        ),
    );
    std::fs::create_dir(dir.path().join("out")).unwrap();
    dir
}

fn plan(provider: &str, dir: &Path, exe: &Path) -> Output {
    plan_with(provider, dir, exe, &[])
}

/// `warden harness plan … --format json`, with `extra` after `--` when there is any.
fn plan_with(provider: &str, dir: &Path, exe: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "harness",
        "plan",
        "--provider",
        provider,
        "--spec",
        "spec.toml",
        "--executable",
        exe.to_str().unwrap(),
        "--format",
        "json",
    ];
    if !extra.is_empty() {
        args.push("--");
        args.extend(extra);
    }
    warden(&args, dir)
}

/// The plan with this run's paths replaced by placeholders, and the digest (which covers
/// them) by one too.
fn normalized(out: &Output, dir: &Path) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let dir = dir.canonicalize().unwrap();
    let warden = PathBuf::from(env!("CARGO_BIN_EXE_warden"))
        .canonicalize()
        .unwrap();
    let mut text = text
        .replace(warden.to_str().unwrap(), "$WARDEN")
        .replace(dir.to_str().unwrap(), "$WORKSPACE");
    // Gemini's hook is named after its command, which holds this run's paths.
    let named = "\\\"name\\\": \\\"warden-";
    if let Some(at) = text.find(named) {
        let start = at + named.len();
        text.replace_range(start..start + 12, "$NAME");
    }
    let mut v: Value = serde_json::from_str(&text).unwrap();
    assert!(v["plan_digest"].as_str().unwrap().starts_with("blake3:"));
    v["plan_digest"] = Value::String("$DIGEST".into());
    // What the OS backend's probe says is this machine's, not the plan's.
    for status in ["enforced", "degraded", "unsupported"] {
        for entry in v["report"][status].as_array_mut().unwrap() {
            if entry["basis"] == "os_evidence" {
                assert!(entry["evidence"].as_str().unwrap().contains("landlock"));
                entry["evidence"] = Value::String("$OS_EVIDENCE".into());
            }
        }
    }
    v
}

#[test]
fn golden_plans_per_provider() {
    let golden = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/harness");
    for (provider, version) in VERSIONS {
        let dir = workspace("[]");
        let exe = fake(dir.path(), &format!("fake-{provider}"), version);
        let out = plan(provider, dir.path(), &exe);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{provider}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = normalized(&out, dir.path());
        let path = golden.join(format!("{provider}.json"));
        if std::env::var_os("WARDEN_BLESS").is_some() {
            std::fs::write(&path, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
        }
        let want: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            got,
            want,
            "{provider}: the plan differs from {} (WARDEN_BLESS=1 rewrites it after a deliberate change)",
            path.display()
        );
        // The contract's keys, exactly.
        let keys: Vec<&str> = got
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "argv",
                "env_allow",
                "files",
                "plan_digest",
                "provider",
                "provider_version",
                "report"
            ]
        );
        // The same spec planned twice is the same plan.
        let again = plan(provider, dir.path(), &exe);
        assert_eq!(again.stdout, out.stdout);
    }
}

#[test]
fn a_required_control_that_is_not_enforced_exits_3_and_nothing_is_spawned() {
    for (provider, version) in VERSIONS {
        // Codex cannot hold the network to domains: asking for it and requiring it refuses.
        let dir = workspace("[\"approval.prompt@1\"]");
        let spec = std::fs::read_to_string(dir.path().join("spec.toml")).unwrap();
        write(
            dir.path(),
            "spec.toml",
            &spec
                .replace(
                    "network = \"off\"",
                    "network = \"allowlist\"\nnetwork_allowlist = [\"docs.rs\"]",
                )
                .replace(
                    "required = [\"approval.prompt@1\"]",
                    "required = [\"network.allowlist@1\"]",
                ),
        );
        let exe = fake(dir.path(), &format!("fake-{provider}"), version);
        let out = warden(
            &[
                "harness",
                "run",
                "--provider",
                provider,
                "--spec",
                "spec.toml",
                "--executable",
                exe.to_str().unwrap(),
                "--",
                "hello",
            ],
            dir.path(),
        );
        assert_eq!(out.status.code(), Some(3), "{provider}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("network.allowlist@1 is not enforced"),
            "{provider}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !dir.path().join("record.txt").exists(),
            "{provider}: nothing was spawned"
        );
        // The plan alone says the same with exit 3.
        assert_eq!(plan(provider, dir.path(), &exe).status.code(), Some(3));
    }
}

#[test]
fn the_spawn_path_runs_the_plan_with_the_environment_cleared_to_its_allowlist() {
    for (provider, version) in VERSIONS {
        let dir = workspace("[\"approval.prompt@1\"]");
        let exe = fake(dir.path(), &format!("fake-{provider}"), version);
        let secret = "sk-test-not-a-real-key";
        let plan_out = plan(provider, dir.path(), &exe);
        assert!(!String::from_utf8_lossy(&plan_out.stdout).contains(secret));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
            .args([
                "harness",
                "run",
                "--provider",
                provider,
                "--spec",
                "spec.toml",
                "--executable",
                exe.to_str().unwrap(),
                "--",
                "say hello",
            ])
            .current_dir(dir.path())
            .env("OPENAI_API_KEY", secret)
            .env("AWS_SECRET_ACCESS_KEY", "not-for-the-agent")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{provider}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let record = std::fs::read_to_string(dir.path().join("record.txt")).unwrap();
        let plan: Value = serde_json::from_slice(&plan_out.stdout).unwrap();
        // Exactly the plan's argv (after the program), then the caller's arguments.
        let argv: Vec<String> = plan["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect();
        let own = argv
            .iter()
            .position(|a| a == exe.to_str().unwrap())
            .unwrap();
        let args: Vec<&str> = record
            .lines()
            .filter_map(|l| l.strip_prefix("arg "))
            .collect();
        let mut want: Vec<&str> = argv[own + 1..].iter().map(String::as_str).collect();
        want.push("say hello");
        assert_eq!(args, want, "{provider}");
        // The secret passed by name; what the spec did not list did not.
        assert!(
            record.contains(&format!("env OPENAI_API_KEY={secret}")),
            "{provider}"
        );
        assert!(!record.contains("AWS_SECRET_ACCESS_KEY"), "{provider}");
        // The plan's files were written before the launch, with the hook in them.
        for (path, content) in plan["files"].as_object().unwrap() {
            assert_eq!(
                std::fs::read_to_string(path).unwrap(),
                content.as_str().unwrap()
            );
            assert!(!content.as_str().unwrap().contains(secret));
        }
        // The hook command (a shell string, or Claude Code's exec form: program and args).
        let warden = PathBuf::from(env!("CARGO_BIN_EXE_warden"))
            .canonicalize()
            .unwrap();
        let exec_form = format!("\"hook\",\n              \"{provider}\"");
        assert!(
            record.contains(warden.to_str().unwrap())
                && (record.contains(&format!("hook {provider} --policy"))
                    || record.contains(&exec_form)),
            "{provider}: the launched provider is pointed at Warden's hook:\n{}",
            record
                .lines()
                .filter(|l| !l.starts_with("env "))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

#[test]
fn a_missing_or_unknown_provider_is_unsupported_never_assumed() {
    let dir = workspace("[\"tools.policy@1\"]");
    let out = warden(
        &[
            "harness",
            "probe",
            "--provider",
            "codex",
            "--executable",
            "no-such-codex",
            "--format",
            "json",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(3));
    let probe: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        probe["unsupported"]
            .as_str()
            .unwrap()
            .contains("not a file")
    );
    let mute = fake(dir.path(), "mute", "no version here");
    let out = warden(
        &[
            "harness",
            "probe",
            "--provider",
            "gemini",
            "--executable",
            mute.to_str().unwrap(),
            "--format",
            "json",
        ],
        dir.path(),
    );
    let probe: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(
        probe["unsupported"]
            .as_str()
            .unwrap()
            .contains("no version"),
        "{probe}"
    );
    let old = fake(dir.path(), "old-codex", "codex-cli 0.118.0");
    let out = plan("codex", dir.path(), &old);
    assert_eq!(
        out.status.code(),
        Some(3),
        "required tools.policy@1 on an unsupported provider"
    );
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["report"]["enforced"].as_array().unwrap().len(), 0);
    // A bad spec is a usage error naming the file and line.
    write(
        dir.path(),
        "spec.toml",
        "tools = \"policy.toml\"\nsandbox = true\n",
    );
    let out = warden(
        &[
            "harness",
            "plan",
            "--provider",
            "codex",
            "--spec",
            "spec.toml",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("spec.toml:2"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The real Codex CLI and Gemini CLI (installed by `cargo xtask ci` from tests/providers'
/// lock file) are probed contained, offline, with an empty HOME; Claude Code, whose npm
/// package needs a newer Node than these machines have, is not installed, and its probe says
/// it is unsupported.
#[test]
fn the_real_providers_are_probed_honestly() {
    let bin =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/providers/node_modules/.bin");
    let lock: Value = serde_json::from_str(
        &std::fs::read_to_string(bin.join("../../package-lock.json")).unwrap(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (provider, package) in [("codex", "@openai/codex"), ("gemini", "@google/gemini-cli")] {
        let exe = bin.join(provider);
        assert!(
            exe.exists(),
            "{} (cargo xtask ci, step test-servers, installs it)",
            exe.display()
        );
        let out = warden(
            &[
                "harness",
                "probe",
                "--provider",
                provider,
                "--executable",
                exe.to_str().unwrap(),
                "--format",
                "json",
            ],
            dir.path(),
        );
        let probe: Value = serde_json::from_slice(&out.stdout).unwrap();
        let pinned = lock["packages"][format!("node_modules/{package}")]["version"]
            .as_str()
            .unwrap();
        assert_eq!(probe["version"], pinned, "{provider}: {probe}");
        assert_eq!(probe["unsupported"], Value::Null, "{provider}: {probe}");
        assert_eq!(out.status.code(), Some(0));
        assert!(
            probe["output_digest"]
                .as_str()
                .unwrap()
                .starts_with("blake3:")
        );
    }
    let out = warden(
        &[
            "harness",
            "probe",
            "--provider",
            "claude-code",
            "--executable",
            bin.join("claude").to_str().unwrap(),
            "--format",
            "json",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(3));
    let probe: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(probe["unsupported"].is_string(), "{probe}");
}

/// A headless run (Codex `exec`, Claude Code and Gemini CLI `-p`) has nobody to answer a
/// prompt: planned with those arguments, `approval.prompt@1` is unsupported.
#[test]
fn approval_prompts_are_unsupported_in_a_headless_run() {
    for ((provider, version), headless) in
        VERSIONS
            .into_iter()
            .zip([["-p", "hi"], ["exec", "hi"], ["-p", "hi"]])
    {
        let dir = workspace("[\"approval.prompt@1\"]");
        let exe = fake(dir.path(), &format!("fake-{provider}"), version);
        assert_eq!(
            plan(provider, dir.path(), &exe).status.code(),
            Some(0),
            "{provider}: interactive"
        );
        let out = plan_with(provider, dir.path(), &exe, &headless);
        assert_eq!(out.status.code(), Some(3), "{provider}: headless");
        let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
        let entry = plan["report"]["unsupported"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["control"] == "approval.prompt@1")
            .unwrap();
        assert!(
            entry["detail"].as_str().unwrap().contains("headless"),
            "{entry}"
        );
        let argv = plan["argv"].as_array().unwrap();
        assert_eq!(
            argv[argv.len() - 2..],
            [Value::from(headless[0]), Value::from("hi")],
            "the arguments end the command line"
        );
    }
}
