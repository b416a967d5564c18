//! `warden mcp tools`, `pin` and `proxy` end to end: the policy's `[mcp]` servers admitted or
//! refused with their reasons, the admitted ones started contained (the real reference servers
//! from the `node_modules` folder of tests/mcp, installed by `cargo xtask ci`, and the hostile
//! fixture), their tools discovered with hints, pins and verdicts, and every proxied call
//! decided by the policy.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{lines, warden, write};

pub(super) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The entry point of the reference server `name` (`server-filesystem`, `server-everything`,
/// `server-memory`) from the npm lock file of tests/mcp.
pub(super) fn reference_server(name: &str) -> PathBuf {
    let path = repo().join(format!(
        "tests/mcp/node_modules/@modelcontextprotocol/{name}/dist/index.js"
    ));
    assert!(
        path.exists(),
        "the MCP reference servers are installed by `cargo xtask ci` (npm ci in tests/mcp): {}",
        path.display()
    );
    path
}

fn filesystem_server() -> PathBuf {
    reference_server("server-filesystem")
}

/// The test virtual environment's Python, with the official MCP SDK.
pub(super) fn python() -> PathBuf {
    let python = repo().join(".tools/mcp-venv/bin/python");
    assert!(
        python.exists(),
        "the MCP Python SDK is installed by `cargo xtask ci` into .tools/mcp-venv"
    );
    python
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

/// `warden mcp proxy` in front of the real filesystem server, driven over stdio with JSON-RPC
/// lines as an MCP client sends them: one `--server`, so its tools keep their names; an
/// allowed call is forwarded; a denied one answers `isError` and leaves no file; the client's
/// roots never reach the server (it keeps its own allowed folder); a malformed line does not
/// stop the proxy.
#[test]
fn the_proxy_decides_every_call_to_the_real_filesystem_server() {
    use std::io::{BufRead as _, BufReader, Write as _};
    use std::process::{Command, Stdio};

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("sandbox")).unwrap();
    std::fs::write(root.join("sandbox/a.txt"), "hello from the sandbox\n").unwrap();
    let text = format!(
        r#"default = "ask"
allow = ["fs__read_text_file", "fs__list_allowed_directories"]
deny = ["fs__write_file"]
[mcp]
allow_commands = true
command_allowlist = ["node"]
env_allow = ["PATH"]
[mcp.servers.fs]
command = "node"
args = [{fs:?}, "sandbox"]
"#,
        fs = filesystem_server().display().to_string(),
    );
    let policy = write(&root, "policy.toml", &text);
    let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["mcp", "proxy", "--policy", &policy, "--server", "fs"])
        .current_dir(&root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |line: String| {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    let mut answer = |id: Value| -> Value {
        loop {
            let mut line = String::new();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "the proxy closed its output"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    let sandbox = root.join("sandbox").display().to_string();
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {"roots": {"listChanged": true}},
        "clientInfo": {"name": "test", "version": "0"}}})
        .to_string(),
    );
    assert_eq!(
        answer(serde_json::json!(1))["result"]["serverInfo"]["name"],
        "warden-mcp-proxy"
    );
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into());
    send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#.into());
    let listed = answer(serde_json::json!(2));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"read_text_file"), "{names:?}");
    assert!(
        !names.contains(&"write_file"),
        "a bare deny removes it: {names:?}"
    );
    send("this is not json".into());
    let parse_error = answer(Value::Null);
    assert_eq!(parse_error["error"]["code"], -32700, "{parse_error}");
    let call = |id: u64, name: &str, args: Value| {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}})
        .to_string()
    };
    send(call(
        3,
        "read_text_file",
        serde_json::json!({"path": format!("{sandbox}/a.txt")}),
    ));
    let read = answer(serde_json::json!(3));
    assert!(
        read["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hello from the sandbox"),
        "{read}"
    );
    send(call(
        4,
        "write_file",
        serde_json::json!({"path": format!("{sandbox}/b.txt"), "content": "x"}),
    ));
    let denied = answer(serde_json::json!(4));
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(denied.to_string().contains("denied by Warden"), "{denied}");
    assert!(!root.join("sandbox/b.txt").exists());
    send(call(5, "list_allowed_directories", serde_json::json!({})));
    let allowed = answer(serde_json::json!(5));
    let allowed = allowed["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(allowed.contains(&sandbox), "{allowed}");
    // The client closes the connection: the proxy exits, and its server with it.
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}

/// With `require_pin_approval`, a new definition waits for `warden mcp pin`; approving one tool
/// leaves the others quarantined.
#[test]
fn mcp_pin_approves_a_quarantined_definition() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"default = "ask"
[mcp]
allow_commands = true
command_allowlist = ["python3"]
require_pin_approval = true
[mcp.servers.hostile]
command = "python3"
args = [{hostile:?}]
"#,
        hostile = repo()
            .join("tests/mcp/hostile_server.py")
            .display()
            .to_string(),
    );
    let policy = write(dir.path(), "policy.toml", &text);
    let states = || {
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
        tools(&lines(&out), "hostile")
            .into_iter()
            .map(|(t, _, p)| (t, p.split(':').next().unwrap_or_default().to_owned()))
            .collect::<Vec<_>>()
    };
    assert!(
        states().iter().all(|(_, p)| p == "quarantined"),
        "{:?}",
        states()
    );
    let out = warden(
        &[
            "mcp", "pin", "--policy", &policy, "--server", "hostile", "--tool", "echo",
        ],
        dir.path(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "pinned hostile__echo\n"
    );
    let after = states();
    assert!(
        after.contains(&("hostile__echo".into(), "pinned".into())),
        "{after:?}"
    );
    assert!(
        after.contains(&("hostile__delete_all".into(), "quarantined".into())),
        "{after:?}"
    );
    let missing = warden(
        &[
            "mcp", "pin", "--policy", &policy, "--server", "hostile", "--tool", "nope",
        ],
        dir.path(),
    );
    assert_eq!(missing.status.code(), Some(2));
}

/// The official Python SDK (`mcp` from PyPI, in `.tools/mcp-venv`, installed by `cargo xtask
/// ci` from `tests/mcp/requirements.txt`) drives the proxy as its server: it lists the tools
/// the policy offers, an allowed call comes back, a denied one is an error result.
#[test]
fn the_python_sdk_client_sees_the_policy_through_the_proxy() {
    let python = python();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("sandbox")).unwrap();
    std::fs::write(root.join("sandbox/a.txt"), "read through the proxy\n").unwrap();
    let text = format!(
        r#"default = "ask"
allow = ["fs__read_text_file"]
deny = ["fs__write_file"]
[mcp]
allow_commands = true
command_allowlist = ["node"]
env_allow = ["PATH"]
[mcp.servers.fs]
command = "node"
args = [{fs:?}, "sandbox"]
"#,
        fs = filesystem_server().display().to_string(),
    );
    let policy = write(&root, "policy.toml", &text);
    let sandbox = root.join("sandbox").display().to_string();
    let calls = serde_json::json!([
        ["read_text_file", {"path": format!("{sandbox}/a.txt")}],
        ["write_file", {"path": format!("{sandbox}/b.txt"), "content": "x"}],
    ])
    .to_string();
    let out = std::process::Command::new(&python)
        .arg(repo().join("tests/mcp/python_client.py"))
        .arg(&calls)
        .args([
            "--",
            env!("CARGO_BIN_EXE_warden"),
            "mcp",
            "proxy",
            "--policy",
            &policy,
        ])
        .args(["--server", "fs"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tools: Vec<&str> = seen["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"read_text_file") && !tools.contains(&"write_file"),
        "{tools:?}"
    );
    assert_eq!(seen["calls"][0]["is_error"], false, "{seen}");
    assert_eq!(seen["calls"][0]["text"], "read through the proxy\n");
    assert_eq!(seen["calls"][1]["is_error"], true, "{seen}");
    assert!(
        seen["calls"][1]["text"]
            .as_str()
            .unwrap()
            .contains("denied by Warden")
    );
    assert!(!root.join("sandbox/b.txt").exists());
}

/// `server-everything`'s `get-env` returns its whole environment. Behind the proxy, a name with
/// a deny fragment never reaches the server (`SECRET_KEY`), an allowed name does
/// (`GITHUB_TOKEN` holds none of the fragments), and the planted fake secret in its value is
/// redacted from the result by `redact_results`.
#[test]
fn a_planted_secret_in_a_servers_environment_output_is_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let everything = reference_server("server-everything");
    let text = format!(
        r#"default = "ask"
allow = ["everything__get-env"]
[guards]
secrets = "redact"
[mcp]
allow_commands = true
command_allowlist = ["node"]
env_allow = ["PATH", "GITHUB_TOKEN", "SECRET_KEY", "PLAIN_NOTE"]
redact_results = true
[mcp.servers.everything]
command = "node"
args = [{everything:?}]
"#,
        everything = everything.display().to_string(),
    );
    let policy = write(&root, "policy.toml", &text);
    let planted = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "get-env", "arguments": {}}});
    let env = drive(
        &root,
        &policy,
        "everything",
        &[
            ("GITHUB_TOKEN", planted),
            ("SECRET_KEY", "never-sent"),
            ("PLAIN_NOTE", "visible-note"),
        ],
        &[call],
    )
    .remove(0);
    let text = env.to_string();
    assert_ne!(env["result"]["isError"], true, "{text}");
    assert!(
        text.contains("visible-note"),
        "the allowed variable reached the server: {text}"
    );
    assert!(text.contains("GITHUB_TOKEN"), "{text}");
    assert!(
        !text.contains(planted),
        "the planted secret was redacted: {text}"
    );
    assert!(
        !text.contains("never-sent"),
        "SECRET_KEY never reached the server: {text}"
    );
}

/// Runs `warden mcp proxy` for `server` with `env`, sends the JSON-RPC `requests` (after
/// `initialize`), and returns the answers by id.
pub(super) fn drive(
    root: &Path,
    policy: &str,
    server: &str,
    env: &[(&str, &str)],
    requests: &[Value],
) -> Vec<Value> {
    use std::io::{BufRead as _, BufReader, Write as _};
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["mcp", "proxy", "--policy", policy, "--server", server])
        .current_dir(root)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let mut answers = Vec::new();
    let mut send = |v: &Value| {
        stdin.write_all(v.to_string().as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    let mut read = |id: &Value| loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the proxy closed its output"
        );
        let v: Value = serde_json::from_str(&line).unwrap();
        if &v["id"] == id {
            return v;
        }
    };
    send(&init);
    read(&serde_json::json!(0));
    send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    for r in requests {
        send(r);
        answers.push(read(&r["id"]));
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    answers
}

/// `server-memory` behind the proxy: an allowed call changes its graph, a denied one does not.
#[test]
fn the_memory_server_changes_only_through_allowed_calls() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let memory = reference_server("server-memory");
    let text = format!(
        r#"default = "ask"
allow = ["memory__create_entities", "memory__read_graph"]
deny = ["memory__delete_entities"]
[mcp]
allow_commands = true
command_allowlist = ["node"]
env_allow = ["PATH", "MEMORY_FILE_PATH"]
[mcp.servers.memory]
command = "node"
args = [{memory:?}]
"#,
        memory = memory.display().to_string(),
    );
    let policy = write(&root, "policy.toml", &text);
    let store = root.join("memory.jsonl").display().to_string();
    let call = |id: u64, name: &str, args: Value| {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}})
    };
    let answers = drive(
        &root,
        &policy,
        "memory",
        &[("MEMORY_FILE_PATH", store.as_str())],
        &[
            call(
                1,
                "create_entities",
                serde_json::json!({"entities": [
                {"name": "warden", "entityType": "project", "observations": ["governs tool calls"]}]}),
            ),
            call(
                2,
                "delete_entities",
                serde_json::json!({"entityNames": ["warden"]}),
            ),
            call(3, "read_graph", serde_json::json!({})),
        ],
    );
    assert_ne!(answers[0]["result"]["isError"], true, "{}", answers[0]);
    assert_eq!(answers[1]["result"]["isError"], true, "{}", answers[1]);
    assert!(answers[1].to_string().contains("denied by Warden"));
    assert!(
        answers[2].to_string().contains("governs tool calls"),
        "{}",
        answers[2]
    );
    assert!(std::fs::read_to_string(&store).unwrap().contains("warden"));
}
