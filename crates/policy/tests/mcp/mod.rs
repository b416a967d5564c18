//! The `[mcp]` table: declared servers compile with their transports; several files merge to
//! the strictest settings; a server name is declared once; an untrusted file cannot declare
//! servers; and the digest covers what is declared.

use warden_policy::mcp::{DEFAULT_ENV_DENY, Transport};
use warden_policy::*;

fn file(text: &str, name: &str, role: Role) -> LoadedPolicy {
    LoadedPolicy::from_text(
        text.into(),
        Format::Toml,
        &format!("{name}.toml"),
        name,
        None,
    )
    .unwrap()
    .with_role(role)
}

fn compile(files: &[LoadedPolicy]) -> Result<PolicySnapshot, PolicyError> {
    PolicySnapshot::from_files(
        files,
        PathEnv {
            project_root: "/repo".into(),
            home: None,
        },
    )
}

const PROJECT: &str = r#"
default = "ask"
[mcp]
allow_commands = true
command_allowlist = ["node", "python3"]
env_allow = ["PATH", "HOME"]
max_connections_per_server = 5

[mcp.servers.fs]
command = "node"
args = ["server.js", "sandbox"]

[mcp.servers.remote]
url = "https://mcp.example.com/mcp"
trusted = true
"#;

#[test]
fn declared_servers_compile_with_their_transports() {
    let s = compile(&[file(PROJECT, "project", Role::Project)]).unwrap();
    let mcp = s.mcp();
    assert!(mcp.declared);
    assert!(mcp.settings.allow_commands && !mcp.settings.allow_urls);
    assert_eq!(mcp.settings.env_deny, DEFAULT_ENV_DENY.map(str::to_owned));
    let names: Vec<&str> = mcp.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["fs", "remote"]);
    assert!(matches!(
        &mcp.servers[0].transport,
        Transport::Command { command, args, .. } if command == "node" && args == &["server.js", "sandbox"]
    ));
    assert_eq!(
        mcp.servers[1].transport,
        Transport::Url("https://mcp.example.com/mcp".into())
    );
    assert!(mcp.servers[1].trusted);
    // Without [mcp], nothing is declared and the settings fail closed.
    let none = compile(&[file("default = \"ask\"\n", "p", Role::Project)]).unwrap();
    assert!(!none.mcp().declared && !none.mcp().settings.allow_commands);
    assert_ne!(none.digest(), s.digest());
}

#[test]
fn several_files_merge_to_the_strictest_settings() {
    let managed = r#"
[mcp]
allow_commands = true
command_allowlist = ["node"]
env_allow = ["PATH"]
env_deny = ["GITHUB"]
max_connections_per_server = 2
redact_results = true
"#;
    let s = compile(&[
        file(managed, "managed", Role::Managed),
        file(PROJECT, "project", Role::Project),
    ])
    .unwrap();
    let m = &s.mcp().settings;
    assert_eq!(
        m.command_allowlist.as_deref(),
        Some(&["node".to_owned()][..])
    );
    assert_eq!(m.env_allow, ["PATH"]);
    assert!(m.env_deny.iter().any(|d| d == "GITHUB"));
    assert_eq!(m.max_connections_per_server, 2);
    assert!(m.redact_results);
    // A file that leaves commands off turns them off for every file.
    let off = compile(&[
        file("[mcp]\nallow_commands = false\n", "managed", Role::Managed),
        file(PROJECT, "project", Role::Project),
    ])
    .unwrap();
    assert!(!off.mcp().settings.allow_commands);
}

#[test]
fn a_server_is_declared_once_and_never_by_an_untrusted_file() {
    let again = "[mcp.servers.fs]\ncommand = \"python3\"\n";
    let e = compile(&[
        file(PROJECT, "project", Role::Project),
        file(again, "user", Role::User),
    ])
    .unwrap_err();
    assert!(
        e.to_string().contains("already declared in project.toml"),
        "{e}"
    );
    let e = compile(&[
        file(PROJECT, "project", Role::Project),
        file(again, "repo", Role::Untrusted),
    ])
    .unwrap_err();
    assert!(e.to_string().contains("`mcp` could widen"), "{e}");
    for (text, needle) in [
        (
            "[mcp.servers.x]\nargs = [\"a\"]\n",
            "exactly one of `command` and `url`",
        ),
        (
            "[mcp.servers.x]\ncommand = \"node\"\nurl = \"https://h/\"\n",
            "exactly one of",
        ),
        ("[mcp.servers.a__b]\ncommand = \"node\"\n", "`__`"),
    ] {
        let e = compile(&[file(text, "p", Role::Project)]).unwrap_err();
        assert!(e.to_string().contains(needle), "{text}: {e}");
    }
    let e = LoadedPolicy::from_text(
        "[mcp]\nallow_command = true\n".into(),
        Format::Toml,
        "p.toml",
        "p",
        None,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("unknown field `allow_command`"),
        "{e}"
    );
}
