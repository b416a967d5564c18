//! The shell splitter held to real bash (the oracle in `oracle.rs`): for every command Warden
//! allows — the corpora's, generated ones and mutations of allowed ones — what bash ran and
//! wrote is covered by the allow verdict's subjects.

use std::path::PathBuf;
use std::sync::OnceLock;

use warden_policy::{Format, LoadedPolicy, PathEnv, PolicySnapshot};

use super::oracle::{Checked, Oracle};

/// The oracle, contained by the `warden` binary built with these tests, or by the one
/// `WARDEN_SANDBOX_HELPER` names (a long run uses a copy, so rebuilding does not disturb it).
fn oracle() -> &'static Oracle {
    static ORACLE: OnceLock<Oracle> = OnceLock::new();
    ORACLE.get_or_init(|| {
        let helper = std::env::var_os("WARDEN_SANDBOX_HELPER").map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_warden")),
            PathBuf::from,
        );
        Oracle::new(helper).unwrap()
    })
}

/// A policy from TOML text.
fn policy(text: &str) -> PolicySnapshot {
    let file =
        LoadedPolicy::from_text(text.into(), Format::Toml, "oracle.toml", "oracle", None).unwrap();
    PolicySnapshot::from_files(
        &[file],
        PathEnv {
            project_root: "/".into(),
            home: None,
        },
    )
    .unwrap()
}

/// Default allow, with deny rules for what an attacker wants: whatever Warden allows here, it
/// saw every command of, so bash must run nothing else.
const PERMISSIVE: &str = "default = \"allow\"\ndeny = [\"bash(rm:*)\", \"write(.git/**)\"]\n";

/// The oracle sees what bash does, through each of its channels, including what a command
/// tries to hide: traced builtins and functions, programs looked up on `PATH` (even under
/// `set +x`), nested shells, and files changed through a symlink.
#[test]
fn the_oracle_sees_what_bash_runs_and_writes() {
    let ran = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
    let cases: [(&str, Vec<String>, &str); 7] = [
        ("eval 'rm -rf x'", ran(&["rm", "-rf", "x"]), ""),
        ("set +x; rm x", ran(&["rm", "x"]), ""),
        ("bash -c 'git status'", ran(&["git", "status"]), ""),
        ("trap 'rm a.txt' EXIT", ran(&["rm", "a.txt"]), ""),
        ("f() { echo hi; }; f", ran(&["echo", "hi"]), ""),
        ("source a.txt", ran(&["a"]), ""),
        (
            "echo pwned > link",
            ran(&["echo", "pwned"]),
            ".git/hooks/pre-commit",
        ),
    ];
    for (command, expected, changed) in cases {
        let (commands, changes) = oracle().observe(command).unwrap();
        assert!(
            commands.contains(&expected),
            "{command:?}: expected {expected:?} among {commands:?}"
        );
        if changed.is_empty() {
            assert!(changes.is_empty(), "{command:?}: {changes:?}");
        } else {
            assert!(
                changes.contains(&PathBuf::from(changed)),
                "{command:?}: {changes:?}"
            );
        }
    }
}

/// What the oracle concludes for commands of each kind: allowed ones it runs and finds
/// covered; ones Warden refuses it does not run.
#[test]
fn the_oracle_holds_allowed_commands_and_skips_refused_ones() {
    let p = policy(PERMISSIVE);
    for covered in [
        "echo hi",
        "echo hi > out.txt",
        "f() { ls; }; f",
        "x=$(echo a); echo \"$x\"",
        // A sourced file's commands are the file's: covered by the subject that runs it.
        "source a.txt",
    ] {
        assert!(
            matches!(oracle().check(&p, covered), Ok(Checked::Covered { .. })),
            "{covered:?}: {:?}",
            oracle().check(&p, covered)
        );
    }
    for refused in [
        "rm -rf x",
        "bash -c 'rm x'",
        "echo \\ #; rm -rf x",
        "trap 'rm -rf x' EXIT",
    ] {
        assert!(
            matches!(oracle().check(&p, refused), Ok(Checked::NotAllowed(_))),
            "{refused:?}: {:?}",
            oracle().check(&p, refused)
        );
    }
}

/// The shell corpus's commands.
fn corpus() -> Vec<serde_json::Value> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/shell/cases.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn toml_list(v: &serde_json::Value) -> String {
    serde_json::to_string(v.as_array().unwrap()).unwrap()
}

#[test]
fn every_corpus_command_warden_allows_runs_nothing_else_in_real_bash() {
    let permissive = policy(PERMISSIVE);
    let mut findings = Vec::new();
    let mut allowed = 0;
    let started = std::time::Instant::now();
    for case in corpus() {
        let own = policy(&format!(
            "default = \"{}\"\nallow = {}\ndeny = {}\nask = {}\n",
            case["default"].as_str().unwrap(),
            toml_list(&case["allow"]),
            toml_list(&case["deny"]),
            toml_list(&case["ask"]),
        ));
        let command = case["command"].as_str().unwrap();
        for p in [&own, &permissive] {
            match oracle().check(p, command) {
                Ok(Checked::Covered { .. }) => allowed += 1,
                Ok(Checked::NotAllowed(_)) => {}
                Err(f) => findings.push(f.to_string()),
            }
        }
    }
    eprintln!("{allowed} allowed checks in {:?}", started.elapsed());
    assert!(findings.is_empty(), "{}", findings.join("\n"));
}

mod generate {
    //! A grammar-aware generator of commands: words, quoting, whitespace and line ends bash and
    //! tree-sitter-bash may read differently, operators, redirects, heredocs, compound
    //! commands, builtins that run code, and a payload inserted at a random place.

    use proptest::prelude::*;

    /// What an attacker wants run: each is denied by the permissive policy's rules, so a
    /// command that hides one from Warden is allowed while bash runs it.
    pub(super) const PAYLOADS: [&str; 4] = [
        "rm -rf x",
        "rm x",
        "echo pwned > .git/hooks/pre-commit",
        "rm -f a.txt",
    ];

    fn program() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "echo",
            "ls",
            "cat",
            "git",
            "true",
            ":",
            "printf",
            "x",
            "\"e\"cho",
            "'ls'",
            "\\ls",
            "/bin/echo",
            "cd",
            "trap",
            "eval",
            "mapfile",
            "declare",
            "export",
            "local",
            "read",
            "test",
            "[",
            "command",
            "builtin",
            "exec",
            "env",
            "timeout 1",
            "nice",
            "xargs",
            "find .",
            "sed",
            "sort",
            "git -c x=y",
            "bash -c",
            "sh -c",
            "source",
            ".",
            "alias",
            "printf -v v",
            "let",
            "shift",
            "unset",
            "compgen -C",
        ])
        .prop_map(str::to_owned)
    }

    fn argument() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "a",
            "b",
            "\"a b\"",
            "'q'",
            "$x",
            "${x}",
            "\"$x\"",
            "$(echo a)",
            "`echo b`",
            "$((1+2))",
            "~/f",
            "*.txt",
            "{a,b}",
            "-n",
            "--",
            "-",
            "x$",
            "$'\\n'",
            "'#'",
            "\\#",
            "#",
            "\"\\\\\"",
            "a.txt",
            "'a[$(rm x)]'",
            "${x:=b}",
            "$1",
            "$@",
            "'rm x'",
            "\"rm -rf x\"",
            "EXIT",
            "-C",
            "-c",
            "1",
            "'%s'",
            "=",
            "%s",
            "\\",
            "$",
            "\\$",
        ])
        .prop_map(str::to_owned)
    }

    fn blank() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            " ", " ", " ", "  ", "\t", "\\ ", "\\\t", "\r", "\u{b}", "\u{c}", "\\\r\n", "\\\n",
            "\\\r",
        ])
    }

    fn operator() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "; ", " && ", " || ", " | ", " & ", "\n", "\r\n", ";", " |& ", "\n\n",
        ])
    }

    fn redirect() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "> f",
            ">> f",
            "< a.txt",
            "2>&1",
            ">&2",
            "> .git/hooks/pre-commit",
            ">| f",
            "&> f",
            "> link",
            "<<< w",
            "<<EOF\nbody $x\nEOF\n",
            "<<'EOF'\nrm x\nEOF\n",
            "<<\\EOF\nrm x\nEOF\n",
            "<<\"EOF\"\nrm x\nEOF\n",
            "<<$'EOF'\nrm x\nEOF\n",
            "<<-EOF\n\trm x\n\tEOF\n",
            "<<E\"O\"F\nrm x\nEOF\n",
            "> f$",
            "2>f",
            "<>f",
        ])
    }

    fn simple() -> impl Strategy<Value = String> {
        (
            program(),
            prop::collection::vec((blank(), argument()), 0..4),
            prop::option::of((blank(), redirect())),
        )
            .prop_map(|(p, args, r)| {
                let mut s = p;
                for (b, a) in args {
                    s.push_str(b);
                    s.push_str(&a);
                }
                if let Some((b, r)) = r {
                    s.push_str(b);
                    s.push_str(r);
                }
                s
            })
    }

    fn compound() -> impl Strategy<Value = String> {
        let inner = simple();
        (inner, 0..9usize).prop_map(|(c, shape)| match shape {
            0 => format!("{{ {c}; }}"),
            1 => format!("( {c} )"),
            2 => format!("if true; then {c}; fi"),
            3 => format!("for i in 1; do {c}; done"),
            4 => format!("f() {{ {c}; }}; f"),
            5 => format!("case a in a) {c};; esac"),
            6 => format!("x=$({c})"),
            7 => format!("eval '{c}'"),
            _ => c,
        })
    }

    /// Shapes that feed a string to something that runs it.
    fn runner() -> impl Strategy<Value = String> {
        (prop::sample::select(PAYLOADS.to_vec()), 0..12usize).prop_map(|(p, shape)| match shape {
            0 => format!("trap '{p}' EXIT"),
            1 => format!("x='a[$({p})]'; echo $((x))"),
            2 => format!("declare -i y='a[$({p})]'"),
            3 => format!("printf -v 'a[$({p})]' %s 1"),
            4 => format!("mapfile -C '{p}' -c 1 < a.txt"),
            5 => format!("[[ 'a[$({p})]' -eq 1 ]]"),
            6 => format!("test -v 'a[$({p})]'"),
            7 => format!("for v in 'a[$({p})]'; do echo $((v)); done"),
            8 => format!("bash -c 'echo $(($1))' _ 'a[$({p})]'"),
            9 => format!("declare -n r='a[$({p})]'; echo $r"),
            10 => format!("export z='a[$({p})]'; echo $((z))"),
            _ => "cd .git/hooks && echo x > pre-commit".to_owned(),
        })
    }

    /// A command: pieces joined by operators, maybe with a payload inserted at a random
    /// character boundary.
    pub(super) fn command() -> impl Strategy<Value = String> {
        (
            prop::collection::vec(
                prop_oneof![4 => simple(), 2 => compound(), 1 => runner()],
                1..4,
            ),
            prop::collection::vec(operator(), 3),
            prop::option::of((
                any::<prop::sample::Index>(),
                prop::sample::select(PAYLOADS.to_vec()),
                operator(),
            )),
        )
            .prop_map(|(pieces, ops, payload)| {
                let mut s = String::new();
                for (i, p) in pieces.iter().enumerate() {
                    if i > 0 {
                        s.push_str(ops[i - 1]);
                    }
                    s.push_str(p);
                }
                if let Some((at, p, op)) = payload {
                    let cuts: Vec<usize> =
                        (0..=s.len()).filter(|&i| s.is_char_boundary(i)).collect();
                    let at = cuts[at.index(cuts.len())];
                    let insert = if at == 0 {
                        format!("{p}{op}")
                    } else {
                        format!("{op}{p}")
                    };
                    s.insert_str(at, &insert);
                }
                s
            })
    }
}

/// Cases a property runs: `WARDEN_ORACLE_CASES` when set (the long run), a bounded number
/// under `CI`, more locally.
fn cases() -> u32 {
    match std::env::var("WARDEN_ORACLE_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
    {
        Some(n) => n,
        None if std::env::var_os("CI").is_some() => 150,
        None => 400,
    }
}

/// The long run (`WARDEN_ORACLE_CASES=N`, or `WARDEN_ORACLE_SECONDS=S`): every generated case,
/// findings collected rather than shrunk, and a summary on stderr (the figures in
/// docs/shell.md come from it).
fn long_run(
    permissive: &PolicySnapshot,
    strategy: &impl proptest::strategy::Strategy<Value = String>,
    what: &str,
) -> Option<Vec<String>> {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let seconds: Option<u64> = std::env::var("WARDEN_ORACLE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok());
    let cases: Option<u64> = std::env::var("WARDEN_ORACLE_CASES")
        .ok()
        .and_then(|s| s.parse().ok());
    if seconds.is_none() && cases.is_none() {
        return None;
    }
    let started = std::time::Instant::now();
    let mut runner = TestRunner::deterministic();
    let (mut run, mut allowed) = (0u64, 0u64);
    let mut findings = Vec::new();
    loop {
        if cases.is_some_and(|n| run >= n)
            || seconds.is_some_and(|s| started.elapsed().as_secs() >= s)
        {
            break;
        }
        let command = strategy.new_tree(&mut runner).unwrap().current();
        run += 1;
        match oracle().check(permissive, &command) {
            Ok(Checked::Covered { .. }) => allowed += 1,
            Ok(Checked::NotAllowed(_)) => {}
            Err(f) => findings.push(f.to_string()),
        }
    }
    eprintln!(
        "oracle long run: {run} {what} in {:?}, {allowed} allowed and run in bash, {} finding(s)",
        started.elapsed(),
        findings.len()
    );
    Some(findings)
}

#[test]
fn generated_commands_warden_allows_run_nothing_else_in_real_bash() {
    use proptest::test_runner::{Config, TestRunner};
    let permissive = policy(PERMISSIVE);
    if let Some(findings) = long_run(&permissive, &generate::command(), "generated commands") {
        assert!(findings.is_empty(), "{}", findings.join("\n"));
        return;
    }
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&generate::command(), |command| {
        match oracle().check(&permissive, &command) {
            Ok(_) => Ok(()),
            Err(f) => Err(proptest::test_runner::TestCaseError::fail(f.to_string())),
        }
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Commands Warden allows under the permissive policy, to mutate: the corpus's and a few of
/// every shape.
fn allowed_seeds() -> Vec<String> {
    let permissive = policy(PERMISSIVE);
    let mut seeds: Vec<String> = corpus()
        .iter()
        .map(|c| c["command"].as_str().unwrap().to_owned())
        .collect();
    seeds.extend(
        [
            "echo hi > out.txt",
            "git status && git diff | cat",
            "cat <<'EOF'\nbody\nEOF\necho done",
            "for f in a b; do echo \"$f\"; done",
            "x=$(ls); echo \"$x\"",
            "if true; then ls; else pwd; fi",
            "f() { echo in; }; f",
            "echo $((1 + 2))",
            "bash -c 'echo nested'",
            "ls -la | grep x | wc -l",
            "printf '%s\\n' a b > f",
            "case a in a) echo a;; esac",
        ]
        .map(str::to_owned),
    );
    seeds.retain(|s| {
        let mut call = warden_policy::Call::new("bash", serde_json::json!({"command": s}));
        call.cwd = Some("/tmp".into());
        permissive.decide(&call).decision == warden_policy::Decision::Allow
    });
    seeds
}

#[test]
fn mutations_of_allowed_commands_run_nothing_else_in_real_bash() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let permissive = policy(PERMISSIVE);
    let seeds = allowed_seeds();
    assert!(seeds.len() > 20, "{seeds:?}");
    // Bytes and fragments bash and tree-sitter-bash may read differently.
    let pieces = prop::sample::select(vec![
        " ",
        "\t",
        "\r",
        "\u{b}",
        "\u{c}",
        "\\",
        "\\\n",
        "\\\r\n",
        "\n",
        "#",
        "$",
        "'",
        "\"",
        "`",
        ";",
        "&",
        "|",
        "(",
        ")",
        "{",
        "}",
        "<",
        ">",
        "-",
        "=",
        "$(",
        "\\ ",
        "<<E\nrm x\nE\n",
        "; rm x",
        "\nrm x",
        "$'\\n'",
        "${x}",
        "[",
        "]",
        "!",
        "~",
        "*",
    ]);
    let mutation = (
        prop::sample::select(seeds),
        prop::collection::vec((any::<prop::sample::Index>(), 0..3usize, pieces), 1..4),
    )
        .prop_map(|(seed, edits)| {
            let mut s = seed;
            for (at, kind, piece) in edits {
                let cuts: Vec<usize> = (0..=s.len()).filter(|&i| s.is_char_boundary(i)).collect();
                let i = cuts[at.index(cuts.len())];
                match kind {
                    0 => s.insert_str(i, piece),
                    1 if i < s.len() => {
                        let end = cuts.iter().copied().find(|&c| c > i).unwrap_or(s.len());
                        s.replace_range(i..end, piece);
                    }
                    _ => {
                        let end = cuts.iter().copied().find(|&c| c > i).unwrap_or(s.len());
                        s.replace_range(i..end, "");
                    }
                }
            }
            s
        });
    if let Some(findings) = long_run(&permissive, &mutation, "mutations of allowed commands") {
        assert!(findings.is_empty(), "{}", findings.join("\n"));
        return;
    }
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&mutation, |command| {
        match oracle().check(&permissive, &command) {
            Ok(_) => Ok(()),
            Err(f) => Err(proptest::test_runner::TestCaseError::fail(f.to_string())),
        }
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// What the one-hour long runs found (docs/shell.md, "The bash oracle"): each is now
/// covered (bash runs only what Warden saw, or what a file a subject runs holds) or refused.
#[test]
fn the_long_run_findings_are_covered_or_refused() {
    let permissive = policy(PERMISSIVE);
    let mut findings = Vec::new();
    for command in LONG_RUN_FINDINGS {
        if let Err(f) = oracle().check(&permissive, command) {
            findings.push(f.to_string());
        }
    }
    assert!(findings.is_empty(), "{}", findings.join("\n"));
}

/// The commands of the long runs' findings, as they printed them (the first run's generated
/// commands, then the second run's mutations).
const LONG_RUN_FINDINGS: [&str; 41] = [
    "npm un buil>&--watch",
    "git status >&-2",
    "ls >&-la",
    "( source\ta.txt ) && command",
    "source  *.txt\nexec;source -n\t$\\\nb\t2>&1",
    "for i in 1; do . *.txt; done & sh -c\t<<-EOF\n\trm x |& echo pwned > .git/hooks/pre-commit\n\tEOF\n",
    "\\ls\\\n= EXIT",
    "case a in a) \\ls\\\n=;; esac",
    "let >| f\n.\ta.txt \"rm -rf x\"",
    "source a.txt",
    "source *.txt || builtin | x\\ > .git/hooks/pre-commit",
    "read > f |& eval '\"e\"cho  *.txt'; eval '. a.txt'",
    "eval --  '%s'",
    "source *.txt",
    "( source a.txt \"a b\"  >| f )",
    "test <<-EOF |& echo pwned > .git/hooks/pre-commit\n\trm x\n\tEOF\n",
    "\\ls\n\nsource  a.txt",
    "x=$(.  a.txt  b)",
    "( source\ta.txt )",
    "( . )\n\n\\ls\\\n=",
    "( source  a.txt );trap 'echo pwned > .git/hooks/pre-commit' EXIT",
    "\\ls\\\n=\\\n<<< w",
    "case a in a) xargs;; esac |& .\t*.txt ${x:=b}\t$@\t> link",
    ".\ta.txt \"rm -rf x\" > lin |& echo pwned > .git/hooks/pre-commitk",
    ". a.txt  -C",
    "unset x$\n\"e\"cho -C\\\n${x:=b}",
    "'ls'\\\n= - || eval 'nice  'q'\\ '%s''",
    "source a.txt\\\n> .git/hooks/pre-commit",
    "{ cat; } |& . a.txt -n \\#",
    "( . a.txt a.txt 'rm x' )",
    "source\ta.txt $\necho pwned > .git/hooks/pre-commit \\# > link",
    ". *.txt  `echo b`",
    "eval -- a.txt  2>&1",
    "\"e\"cho\\\n=\t\"rm -rf x\"\t'q'\\\n<<\"EOF\"\nrm x\nEOF\n",
    "( \"e\"cho\t<<\"EOF\" |& echo pwned > .git/hooks/pre-commit\nrm x\nEOF\n )",
    ". *.txt |& \\ls\\ -C > f$",
    "{ source *.txt > .git/hooks/pre-commit; }",
    "eval 'source\t*.txt\t$(echo a) 'rm x' <<< w'",
    "x=$(.\t*.txt \"rm -rf x\")",
    "declare a.txt &> f\neval\t-- %s",
    "true  ${x:=b}\t-  \"rm -rf x\"\\\n2>f; .\ta.txt\t%s  > f",
];
