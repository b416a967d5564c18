//! Every attack that once got a command allowed while real bash ran something else decides
//! deny (or ask, where the policy's own rules say so) through the library, `warden check` and
//! `warden hook claude-code`. Each row is a class; the oracle (`bash_oracle.rs`) looks for the
//! next one.

use std::path::Path;

use serde_json::{Value, json};
use warden_policy::{Call, Decision, Format, LoadedPolicy, PathEnv, PolicySnapshot};

use super::hook::{decision, pre};
use super::{lines, warden, write};

/// Everything allowed by default but what an attacker wants: `rm`, and writes into `.git`.
const PERMISSIVE: &str = "default = \"allow\"\ndeny = [\"bash(rm:*)\", \"write(**/.git/**)\"]\n";

/// An allowlist with the read-only hint: what it allows must be what the rules say.
const ALLOWLIST: &str = "default = \"ask\"\nallow = [\"bash(echo:*)\", \"bash(cat:*)\", \"bash(ls:*)\", \"bash(git log:*)\", \"bash(git grep:*)\", \"bash(sort:*)\", \"bash(sed -n:*)\", \"bash(file:*)\", \"bash(uniq:*)\", \"bash(xxd:*)\", \"bash(test:*)\", \"bash(printf:*)\", \"bash(true:*)\"]\ndeny = [\"bash(rm:*)\", \"write(**/.git/**)\"]\n[hints]\nread_only = \"allow\"\n";

/// One command of each class the attack and the oracle found.
const ATTACKS: &[&str] = &[
    // Whitespace and line ends bash and tree-sitter-bash read differently.
    "echo \\ #; rm -rf x",
    "echo \\\t#; rm -rf x",
    "echo a\\\r\nrm -rf x",
    "echo a\rrm -rf x",
    "echo a\u{b}rm -rf x",
    "echo a\u{c}; rm -rf x",
    "echo a \\\r\n; rm -rf x",
    "/bin/echo #\t$(echo a)\\\r\n\\# >| .git/hooks/pre-commit",
    "cat - 2>&1 $(rm -rf x)",
    "x=$ rm -rf x",
    // A bare `$` before a line end.
    "echo hi > f$\nrm -rf x",
    "ls $\\\r\n\"\\\\; rm x\"",
    // Heredoc delimiters in every quoting form.
    "cat <<$'EOF'\nx\nEOF\nrm -rf x",
    "cat <<$\"EOF\"\nx\nEOF\nrm -rf x",
    "cat <<E\"O\"F\nx\nEOF\nrm -rf x",
    "cat <<'EOF'rm -rf x\nEOF",
    "cat <<'EOF'\t>.git/hooks/pre-commit x\nEOF",
    // Arithmetic on a string holding a command substitution, from any source.
    "echo ${x:='a[$(rm -rf y)]'} $((x))",
    "for v in 'a[$(rm -rf y)]'; do echo $((v)); done",
    "bash -c 'echo $(($1))' _ 'a[$(rm -rf y)]'",
    "declare -n r='a[$(rm -rf y)]'; echo $r",
    "export z='a[$(rm -rf y)]'; echo $((z))",
    "local -i q='a[$(rm -rf y)]'",
    "[[ 'a[$(rm -rf y)]' -eq 1 ]]",
    "test -v 'a[$(rm -rf y)]'",
    "[ -v 'a[$(rm -rf y)]' ]",
    "printf -v 'a[$(rm -rf y)]' %s 1",
    "printf -v'a[$(rm -rf y)]' %s 1",
    "read 'a[$(rm -rf y)]' <<< 1",
    // Programs that substitute input into a shell payload.
    "ls | xargs -I{} sh -c {}",
    "ls | xargs -i sh -c '{}'",
    "ls | xargs --replace sh -c 'echo {}'",
    "find . -exec sh -c {} \\;",
    // Builtins and options that run or write something.
    "trap 'rm -rf x' EXIT",
    "mapfile -C 'rm -rf x' -c 1 < a.txt",
    "compgen -C 'rm -rf x' y",
    "env 'BASH_FUNC_ls%%=() { rm -rf x; }' bash -c ls",
    "git --upload-pack='rm -rf x' ls-remote origin",
    "git -c core.hooksPath=h log",
    "git log --output=.git/hooks/pre-commit",
    "git grep -O'rm -rf x' y",
    "tar -xf a.tar --to-command='rm -rf x'",
    "tar --use-compress-program='rm -rf x' -xf a.tar",
    "sort -o .git/hooks/pre-commit a",
    "sort --output=.git/hooks/pre-commit a",
    "sort --compress-program='rm -rf x' a",
    "sed -n 'w .git/hooks/pre-commit' a",
    "sed 's/a/b/e' a",
    "sed -n '1e rm -rf x' a",
    "sed 's/a/b/w .git/hooks/pre-commit' a",
    "sed -i 's/a/b/' .git/hooks/pre-commit",
    "file -C -m magic",
    "uniq a .git/hooks/pre-commit",
    "xxd a .git/hooks/pre-commit",
    // A change of directory before a relative write.
    "cd .git/hooks && echo x > pre-commit",
    "cd .git; echo x > hooks/pre-commit",
    // A write through a symlink whose target does not exist yet.
    "echo x > src/link",
];

fn policy(text: &str) -> PolicySnapshot {
    let file = LoadedPolicy::from_text(text.into(), Format::Toml, "p.toml", "p", None).unwrap();
    PolicySnapshot::from_files(
        &[file],
        PathEnv {
            project_root: "/".into(),
            home: None,
        },
    )
    .unwrap()
}

/// A workspace with `.git/hooks/` and `src/link → ../.git/hooks/pre-commit` (missing).
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".git/hooks")).unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::os::unix::fs::symlink("../.git/hooks/pre-commit", dir.path().join("src/link")).unwrap();
    dir
}

#[test]
fn every_known_fail_open_decides_deny_or_ask_through_the_library_check_and_the_hook() {
    let ws = workspace();
    let dir = ws.path();
    let mut failures = Vec::new();
    for (name, text) in [("permissive", PERMISSIVE), ("allowlist", ALLOWLIST)] {
        let snapshot = policy(text);
        let policy_file = write(dir, &format!("{name}.toml"), text);
        // The library, with the edge resolving paths as the CLI does.
        for command in ATTACKS {
            let mut call = Call::new("bash", json!({"command": command})).with_cwd(dir);
            warden_policy::edge::resolve_call_paths(&snapshot, &mut call);
            let v = snapshot.decide(&call);
            if v.decision == Decision::Allow {
                failures.push(format!("{name}: library allows {command:?}"));
            }
        }
        // `warden check --calls`, one verdict a line.
        let calls: String = ATTACKS
            .iter()
            .map(|c| format!("{}\n", json!({"tool": "bash", "args": {"command": c}})))
            .collect();
        let calls_file = write(dir, &format!("{name}.jsonl"), &calls);
        let out = warden(
            &[
                "check",
                "--policy",
                &policy_file,
                "--calls",
                &calls_file,
                "--format",
                "json",
            ],
            dir,
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let verdicts: Vec<Value> = lines(&out);
        assert_eq!(verdicts.len(), ATTACKS.len());
        for (command, v) in ATTACKS.iter().zip(&verdicts) {
            if v["decision"] == "allow" {
                failures.push(format!("{name}: warden check allows {command:?}"));
            }
        }
        // `warden hook claude-code`, one event each.
        for command in ATTACKS {
            let out = super::hook::hook_with(
                &["hook", "claude-code", "--policy", &policy_file],
                &pre("Bash", json!({"command": command}), dir),
                dir,
                &[],
            );
            let (d, _) = decision(&out);
            if d == "allow" {
                failures.push(format!("{name}: the hook allows {command:?}"));
            }
        }
    }
    // The write tool through the dangling link is a write into `.git`.
    let p = write(dir, "permissive.toml", PERMISSIVE);
    let out = warden(
        &[
            "check",
            "--policy",
            &p,
            "--tool",
            "write",
            "--args",
            &json!({"path": "src/link"}).to_string(),
            "--format",
            "json",
        ],
        dir,
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    if v["decision"] != "deny" {
        failures.push(format!("write through src/link: {v}"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_long_wrapper_chain_is_refused_without_reading_it_all() {
    let snapshot = policy(PERMISSIVE);
    for prefix in ["env ", "timeout 1 ", "nice ", "command "] {
        let command = format!("{}ls", prefix.repeat(12_000));
        let v = snapshot.decide(&Call::new("bash", json!({"command": command})));
        assert_eq!(v.decision, Decision::Deny, "{prefix:?}: {}", v.reason);
        assert!(
            v.reason.contains("wrappers") || v.reason.contains("bytes"),
            "{prefix:?}: {}",
            v.reason
        );
    }
    let _ = Path::new("/");
}
