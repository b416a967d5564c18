//! `warden mcp tools` end to end: the policy's `[mcp]` servers admitted or refused with their
//! reasons, the admitted ones started contained (the real `@modelcontextprotocol/server-filesystem`
//! from `tests/mcp/node_modules`, installed by `cargo xtask ci`, and the hostile fixture), their
//! tools discovered with hints, pins and verdicts, and the pins written.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{lines, warden, write};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn filesystem_server() -> PathBuf {
    let path =
        repo().join("tests/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        path.exists(),
        "the MCP reference servers are installed by `cargo xtask ci` (npm ci in tests/mcp): {}",
        path.display()
    );
    path
}

fn policy(dir: &Path) -> String {
    std::fs::create_dir_all(dir.join("sandbox")).unwrap();
    let text = format!(
        r#"default = "ask"
allow = ["fs__read_text_file"]
deny = ["hostile__delete_all"]
[guards]
deny = ["(?i)<important>"]
[mcp]
allow_commands = true
command_allowlist = ["python3", "node"]
env_allow = ["PATH", "HOME"]
[mcp.servers.hostile]
command = "python3"
args = [{hostile:?}, "paginate", "poison", "shadow"]
[mcp.servers.fs]
command = "node"
args = [{fs:?}, "sandbox"]
[mcp.servers.blocked]
command = "/usr/bin/python3"
[mcp.servers.remote]
url = "https://mcp.example.com/mcp"
"#,
        hostile = repo()
            .join("tests/mcp/hostile_server.py")
            .display()
            .to_string(),
        fs = filesystem_server().display().to_string(),
    );
    write(dir, "policy.toml", &text)
}

fn tools(report: &[Value], server: &str) -> Vec<(String, String, String)> {
    report.iter().find(|s| s["server"] == server).unwrap()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tool"].as_str().unwrap().to_owned(),
                t["decision"].as_str().unwrap().to_owned(),
                t["pin"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn mcp_tools_reports_admission_discovery_pins_and_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy(dir.path());
    let out = warden(
        &["mcp", "tools", "--policy", &policy, "--format", "json"],
        dir.path(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = lines(&out);
    let by = |name: &str| report.iter().find(|s| s["server"] == name).unwrap();
    // Refused before anything started, each with its reason; the others still listed.
    assert_eq!(by("blocked")["admitted"], false);
    assert!(
        by("blocked")["error"]
            .as_str()
            .unwrap()
            .contains("write `python3`")
    );
    assert_eq!(by("remote")["admitted"], false);
    assert!(
        by("remote")["error"]
            .as_str()
            .unwrap()
            .contains("allow_urls")
    );
    // The real filesystem server, started contained: its tools, the policy's verdicts.
    let fs = tools(&report, "fs");
    assert!(fs.len() >= 10, "{fs:?}");
    assert!(fs.contains(&(
        "fs__read_text_file".into(),
        "allow".into(),
        "pinned now (first sight)".into()
    )));
    assert!(
        fs.iter()
            .any(|(t, d, _)| t == "fs__write_file" && d == "ask")
    );
    assert_eq!(by("fs")["trusted"], false);
    // The hostile fixture: every page, the poisoned tool quarantined, the shadowing name
    // refused, the deny rule's verdict.
    let hostile = tools(&report, "hostile");
    let names: Vec<&str> = hostile.iter().map(|(t, _, _)| t.as_str()).collect();
    assert_eq!(
        names,
        [
            "hostile__echo",
            "hostile__rename_file",
            "hostile__delete_all",
            "hostile__notes",
            "hostile__fs__read_file"
        ]
    );
    assert!(
        hostile[3]
            .2
            .starts_with("quarantined: its description trips the policy's guards")
    );
    assert_eq!(hostile[2].1, "deny");
    let shadow = &by("hostile")["tools"][4];
    assert!(shadow["registered"].as_str().unwrap().contains("`__`"));
    // Pins were written on first sight; a second run finds them pinned.
    let pins: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join(".warden/mcp-pins.json")).unwrap(),
    )
    .unwrap();
    assert!(
        pins["pins"]["fs__read_text_file"]
            .as_str()
            .unwrap()
            .starts_with("blake3:")
    );
    let again = warden(
        &["mcp", "tools", "--policy", &policy, "--format", "json"],
        dir.path(),
    );
    let again = lines(&again);
    assert!(tools(&again, "fs").iter().all(|(_, _, p)| p == "pinned"));
}
