//! URL servers over Streamable HTTP: the real `server-everything` in its `streamableHttp` mode
//! behind a TLS front with a throwaway certificate authority (`tests/mcp/tls_front.py`),
//! admitted by host, dialled over https with the authority trusted through `SSL_CERT_FILE`,
//! its tools discovered and every proxied call decided; an untrusted certificate refuses the
//! server.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use super::mcp::{python, reference_server, repo};
use super::{lines, warden, write};

/// `server-everything` on a local port with a TLS front: killed when dropped.
struct HttpsServer {
    port: u16,
    ca: PathBuf,
    children: Vec<Child>,
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl HttpsServer {
    fn start(dir: &Path) -> Self {
        let everything = reference_server("server-everything");
        let python = python();
        let plain = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut node = Command::new("node")
            .arg(&everything)
            .arg("streamableHttp")
            .env("PORT", plain.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(node.stderr.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                err.read_line(&mut line).unwrap() > 0,
                "server-everything ended"
            );
            if line.contains("listening on port") {
                break;
            }
        }
        // Keep reading its stderr so it never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        let mut front = Command::new(python)
            .arg(repo().join("tests/mcp/tls_front.py"))
            .arg(dir)
            .arg(plain.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut port = String::new();
        BufReader::new(front.stdout.take().unwrap())
            .read_line(&mut port)
            .unwrap();
        Self {
            port: port.trim().parse().expect("the TLS front prints its port"),
            ca: dir.join("ca.pem"),
            children: vec![node, front],
        }
    }
}

fn policy(root: &Path, port: u16) -> String {
    let text = format!(
        r#"default = "ask"
allow = ["everything__echo"]
deny = ["everything__get-env"]
[mcp]
allow_urls = true
url_allowlist = ["localhost"]
[mcp.servers.everything]
url = "https://localhost:{port}/mcp"
"#
    );
    write(root, "policy.toml", &text)
}

fn mcp_tools(root: &Path, policy: &str, ca: Option<&Path>) -> Vec<Value> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_warden"));
    command
        .args(["mcp", "tools", "--policy", policy, "--format", "json"])
        .current_dir(root)
        .env_remove("SSL_CERT_DIR");
    match ca {
        Some(ca) => command.env("SSL_CERT_FILE", ca),
        // A file that holds no authority of ours: the machine's own roots.
        None => command.env_remove("SSL_CERT_FILE"),
    };
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lines(&out)
}

#[test]
fn a_url_server_is_dialled_over_streamable_http_and_every_call_decided() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let server = HttpsServer::start(&root);
    let policy = policy(&root, server.port);
    let report = mcp_tools(&root, &policy, Some(&server.ca));
    assert_eq!(report.len(), 1, "{report:?}");
    assert_eq!(report[0]["admitted"], true, "{report:?}");
    let tools = report[0]["tools"].as_array().expect("tools were listed");
    let echo = tools
        .iter()
        .find(|t| t["tool"] == "everything__echo")
        .unwrap_or_else(|| panic!("{report:?}"));
    assert_eq!(echo["decision"], "allow");
    let ca = server.ca.display().to_string();
    let answers = super::mcp::drive(
        &root,
        &policy,
        "everything",
        &[("SSL_CERT_FILE", ca.as_str())],
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"message": "over https"}}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "get-env", "arguments": {}}}),
        ],
    );
    let echoed = answers[0].to_string();
    assert_ne!(answers[0]["result"]["isError"], true, "{echoed}");
    assert!(echoed.contains("over https"), "{echoed}");
    assert_eq!(answers[1]["result"]["isError"], true, "{}", answers[1]);
    assert!(
        answers[1].to_string().contains("denied by Warden"),
        "{}",
        answers[1]
    );
}

#[test]
fn a_url_server_whose_certificate_is_not_trusted_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let server = HttpsServer::start(&root);
    let policy = policy(&root, server.port);
    let report = mcp_tools(&root, &policy, None);
    assert_eq!(
        report[0]["admitted"], true,
        "admission is by host: {report:?}"
    );
    let error = report[0]["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{report:?}"));
    assert!(error.contains("`everything`"), "{error}");
    assert!(error.contains("certificate"), "the cause is said: {error}");
    assert!(report[0].get("tools").is_none(), "{report:?}");
}

#[test]
fn a_plain_http_url_is_never_dialled() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let text = "default = \"ask\"\n[mcp]\nallow_urls = true\n[mcp.servers.plain]\nurl = \"http://localhost:9/mcp\"\n";
    let policy = write(&root, "policy.toml", text);
    let out = warden(
        &["mcp", "tools", "--policy", &policy, "--format", "json"],
        &root,
    );
    let report = lines(&out);
    assert_eq!(report[0]["admitted"], false, "{report:?}");
    assert!(
        report[0]["error"]
            .as_str()
            .unwrap()
            .contains("only https and wss"),
        "{report:?}"
    );
}
