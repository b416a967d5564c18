//! The user guide (docs/guide/) runs as written: every fenced block of every chapter is either
//! run or checked, and a block the test cannot run or check fails it.
//!
//! The convention a chapter is written in, read in document order:
//!
//! - A ```` ```toml ```` or ```` ```python ```` block starts with a comment line
//!   `# file: NAME`; the whole block is written to NAME (relative, inside the chapter's folder)
//!   when the reading reaches it, so a later block may overwrite a file and only the commands
//!   after it see the new text. Every file a block writes must be named by a later command.
//! - Every command of a ```` ```sh ```` block runs through `bash` (`\` continuations joined,
//!   comment lines skipped), in order, in the chapter's own temporary folder, which starts with a
//!   copy of the repository's `examples/` and is where the files above are written. `warden` is
//!   the binary built for these tests, first on `PATH`; `HOME` is the chapter's folder. Each
//!   command is a shell of its own: what carries over is files. A command must exit 0, or, when
//!   it ends with the marker `# exits N`, exactly N.
//! - A ```` ```text ```` block is the expected output of the ```` ```sh ```` block right before
//!   it (prose may come between, no other block), which must hold exactly one command: each
//!   non-empty line of it must appear in one line of what the command printed (its standard
//!   output, then its standard error). An `…` in an expected line stands for any text there
//!   (a digest, a temporary path, a time), and each run of white space counts as one space
//!   (table columns are as wide as their widest cell).
//! - A ```` ```json ```` block is shown, not run: it must be valid JSON.
//! - A ```` ```rust ```` block, or a ```` ```toml ```` block starting with `# from: PATH`, is
//!   quoted from a file the test suite runs: its first line is `// from: PATH` (or `# from:
//!   PATH`), PATH is a crate example (`crates/*/examples/*.rs`, run by `cargo xtask ci`, step
//!   examples) or a file of the example workspace `examples/custom-runtime/` (step
//!   custom-runtime), and the rest of the block must appear in that file verbatim.
//! - `cargo run -p PACKAGE --example NAME` is not run here (a test cannot run cargo in the
//!   build it is part of): the example must exist, and the `examples` step of `cargo xtask ci`
//!   runs it, where it fails unless what it shows holds. Commands that build or run the
//!   example workspace (`cargo … --manifest-path examples/custom-runtime/…`) are the
//!   `custom-runtime` step's.
//! - Any other block, a block without a language, or a ```` ```text ```` block that follows no
//!   single command, fails the test, naming the chapter and the line.
//!
//! What is substituted: `cargo run --release --bin warden --` runs as `warden`, and the commands
//! of [`STAND_INS`] (installs that would reach a registry or the user's `~/.cargo/bin`) are not
//! run; the test does what the table says instead (for example, `npm install` of an MCP
//! reference server becomes a link to the servers the tests install in tests/mcp, the same
//! versions, from its committed lock file).

use std::path::Path;

use super::docs::{COMMAND_TIMEOUT_SECONDS, copy_dir, repo, run};

/// The guide's folder, from the repository root.
const GUIDE: &str = "docs/guide";

/// The chapters, in the order the index (docs/guide/README.md) lists them; each has a test
/// below.
const CHAPTERS: [&str; 6] = [
    "start.md",
    "policies.md",
    "claude-code.md",
    "mcp.md",
    "evidence.md",
    "embedding.md",
];

/// Chapters the index already names that are not written yet. Once one exists it must move to
/// [`CHAPTERS`] and get a test of its own.
const PLANNED: [&str; 0] = [];

/// A command the guide quotes that the test does not run, and what it does instead.
struct StandIn {
    /// The command, as the guide writes it.
    command: &'static str,
    /// A link the test makes in the chapter's folder instead: (link name, target under the
    /// repository root).
    link: Option<(&'static str, &'static str)>,
    /// Why it is not run.
    why: &'static str,
}

/// Commands quoted but not run, each with its stand-in.
const STAND_INS: [StandIn; 4] = [
    StandIn {
        command: "cargo install --path crates/cli --locked",
        link: None,
        why: "it installs into the user's ~/.cargo/bin; the binary it builds is the one on PATH here",
    },
    StandIn {
        command: "npm install @modelcontextprotocol/server-filesystem@2026.8.31 \
                  @modelcontextprotocol/server-everything@2026.8.31",
        link: Some(("node_modules", "tests/mcp/node_modules")),
        why: "it reaches the npm registry; the tests install the same versions from the lock file \
              of tests/mcp (`cargo xtask ci`, step test-servers)",
    },
    StandIn {
        command: "python3 -m venv .venv",
        link: Some((".venv", ".tools/mcp-venv")),
        why: "the tests' virtual environment already holds the MCP Python SDK \
              (`cargo xtask ci`, step test-servers)",
    },
    StandIn {
        command: ".venv/bin/pip install mcp==2.3.0",
        link: None,
        why: "it reaches PyPI; the environment linked above has this version, pinned by \
              tests/mcp/requirements.txt",
    },
];

/// One thing the reading of a chapter does, at a line of it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// Write a file.
    Write {
        line: usize,
        name: String,
        text: String,
    },
    /// Run a command.
    Run(Run),
    /// Check that a quoted text is part of a file the test suite runs.
    Quote {
        line: usize,
        path: String,
        text: String,
    },
}

/// A command to run and what it must do.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    line: usize,
    command: String,
    exit: i32,
    /// Lines that must appear in its output.
    expect: Vec<String>,
}

/// A fenced block: its language, the line of its opening fence and its lines (numbered).
struct Block {
    lang: String,
    line: usize,
    body: Vec<(usize, String)>,
}

fn blocks(text: &str) -> Result<Vec<Block>, String> {
    let mut out = Vec::new();
    // The block being read, and the indentation of its opening fence (stripped from its lines).
    let mut open: Option<(Block, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut open {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let block = Block {
                        lang: info.split_whitespace().next().unwrap_or("").to_owned(),
                        line: i + 1,
                        body: Vec::new(),
                    };
                    open = Some((block, line.len() - trimmed.len()));
                }
            }
            Some(_) if trimmed.trim_end() == "```" => {
                out.extend(open.take().map(|(block, _)| block));
            }
            Some((block, indent)) => {
                let strip = line.len() - line.trim_start_matches(' ').len();
                block
                    .body
                    .push((i + 1, line[strip.min(*indent)..].to_owned()));
            }
        }
    }
    match open {
        Some((block, _)) => Err(format!("line {}: a block that is never closed", block.line)),
        None => Ok(out),
    }
}

/// The commands of a `sh` block with the line each starts on: `\` continuations joined,
/// blank lines and comment lines dropped.
fn commands(body: &[(usize, String)]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut start = 0;
    for (n, line) in body {
        let line = line.trim();
        if current.is_empty() {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            start = *n;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head.trim_end());
                current.push(' ');
            }
            None => {
                current.push_str(line);
                out.push((start, std::mem::take(&mut current)));
            }
        }
    }
    out
}

/// A command and its expected exit code, from the trailing `# exits N` marker.
fn exit_marker(command: &str) -> Result<(String, i32), String> {
    match command.rsplit_once("# exits ") {
        Some((head, code)) => code
            .trim()
            .parse()
            .map(|code| (head.trim_end().to_owned(), code))
            .map_err(|_| format!("`# exits {code}` is not an exit code")),
        None => Ok((command.to_owned(), 0)),
    }
}

/// Reads a chapter into its steps, or says which block breaks the convention.
fn steps(text: &str) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    // The runs of the previous block, when it was a `sh` block: indexes into `steps`.
    let mut previous_sh: Option<Vec<usize>> = None;
    for block in blocks(text)? {
        let at = block.line;
        let mut this_sh = None;
        match block.lang.as_str() {
            "sh" => {
                let mut runs = Vec::new();
                for (line, command) in commands(&block.body) {
                    let (command, exit) =
                        exit_marker(&command).map_err(|e| format!("line {line}: {e}"))?;
                    runs.push(steps.len());
                    steps.push(Step::Run(Run {
                        line,
                        command,
                        exit,
                        expect: Vec::new(),
                    }));
                }
                if runs.is_empty() {
                    return Err(format!("line {at}: a sh block without a command"));
                }
                this_sh = Some(runs);
            }
            "text" => {
                let runs = previous_sh.take().ok_or_else(|| {
                    format!("line {at}: a text block must directly follow the sh block whose output it shows")
                })?;
                let [index] = runs[..] else {
                    return Err(format!(
                        "line {at}: a text block shows one command's output, but the sh block before it holds {}",
                        runs.len()
                    ));
                };
                let Step::Run(run) = &mut steps[index] else {
                    unreachable!("a sh block's steps are runs")
                };
                run.expect = block
                    .body
                    .iter()
                    .map(|(_, l)| l.trim().to_owned())
                    .filter(|l| !l.is_empty())
                    .collect();
                if run.expect.is_empty() {
                    return Err(format!("line {at}: an empty text block"));
                }
            }
            "rust" | "toml" if quoted_from(&block).is_some() => {
                let path = quoted_from(&block).unwrap_or_default();
                if !runnable_source(&path) {
                    return Err(format!(
                        "line {at}: `{path}` is not a file the test suite runs (a crate example or a file of examples/custom-runtime/)"
                    ));
                }
                let text: String = block.body[1..]
                    .iter()
                    .map(|(_, l)| format!("{l}\n"))
                    .collect();
                if text.trim().is_empty() {
                    return Err(format!(
                        "line {at}: a quote of `{path}` that quotes nothing"
                    ));
                }
                steps.push(Step::Quote {
                    line: at,
                    path,
                    text,
                });
            }
            "rust" => {
                return Err(format!(
                    "line {at}: a rust block starts with `// from: PATH`, the file it quotes"
                ));
            }
            "toml" | "python" => {
                let (_, first) = block
                    .body
                    .first()
                    .ok_or_else(|| format!("line {at}: an empty {} block", block.lang))?;
                let name = first
                    .trim()
                    .strip_prefix("# file:")
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .ok_or_else(|| {
                        format!(
                            "line {at}: a {} block starts with `# file: NAME`",
                            block.lang
                        )
                    })?;
                if Path::new(name).is_absolute() || name.split('/').any(|p| p == "..") {
                    return Err(format!(
                        "line {at}: `{name}` must stay inside the chapter's folder"
                    ));
                }
                let text: String = block.body.iter().map(|(_, l)| format!("{l}\n")).collect();
                steps.push(Step::Write {
                    line: at,
                    name: name.to_owned(),
                    text,
                });
            }
            "json" => {
                let text: String = block.body.iter().map(|(_, l)| format!("{l}\n")).collect();
                serde_json::from_str::<serde_json::Value>(&text)
                    .map_err(|e| format!("line {at}: a json block that is not JSON: {e}"))?;
            }
            "" => return Err(format!("line {at}: a block without a language")),
            other => {
                return Err(format!(
                    "line {at}: a `{other}` block, which this test can neither run nor check \
                     (sh, text, toml, python, json, and rust quoting a file are known)"
                ));
            }
        }
        previous_sh = this_sh;
    }
    // A file no later command names is an example nobody ran.
    for (i, step) in steps.iter().enumerate() {
        if let Step::Write { line, name, .. } = step {
            let used = steps[i + 1..]
                .iter()
                .any(|s| matches!(s, Step::Run(run) if run.command.contains(name.as_str())));
            if !used {
                return Err(format!("line {line}: no command after it uses `{name}`"));
            }
        }
    }
    Ok(steps)
}

/// The file a quoting block names on its first line (`// from: PATH` or `# from: PATH`).
fn quoted_from(block: &Block) -> Option<String> {
    let (_, first) = block.body.first()?;
    let first = first.trim();
    let path = first
        .strip_prefix("// from:")
        .or_else(|| first.strip_prefix("# from:"))?
        .trim();
    (!path.is_empty()).then(|| path.to_owned())
}

/// Whether `path` (from the repository root) is run by the test suite: a crate example or a
/// file of the example workspace.
fn runnable_source(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let example = matches!(parts[..], ["crates", _, "examples", file] if file.ends_with(".rs"));
    let workspace = path.starts_with("examples/custom-runtime/") && !parts.contains(&"..");
    (example || workspace) && repo().join(path).is_file()
}

/// Why a cargo command the guide quotes is not run here, if it is one the CI runs instead:
/// a crate example (step examples) or the example workspace (step custom-runtime).
fn run_by_ci(command: &str) -> Option<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    if let ["cargo", "run", "-p", package, "--example", name] = words[..] {
        let dir = package.strip_prefix("warden-")?;
        let file = format!("crates/{dir}/examples/{name}.rs");
        return runnable_source(&file)
            .then(|| format!("`cargo xtask ci` (step examples) runs {file}"));
    }
    (words.first() == Some(&"cargo")
        && command.contains("--manifest-path examples/custom-runtime/Cargo.toml"))
    .then(|| "`cargo xtask ci` (step custom-runtime) runs the example workspace".to_owned())
}

/// Whether `expected` (with `…` standing for any text) appears in one line of `output`, each
/// run of white space counting as one space (so table columns may be aligned differently).
fn appears(expected: &str, output: &str) -> bool {
    let squeeze = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let expected = squeeze(expected);
    output.lines().any(|line| {
        let line = squeeze(line);
        let mut rest = line.as_str();
        expected
            .split('…')
            .filter(|p| !p.is_empty())
            .all(|piece| match rest.find(piece) {
                Some(k) => {
                    rest = &rest[k + piece.len()..];
                    true
                }
                None => false,
            })
    })
}

/// Makes the stand-in's link in `dir`.
fn stand_in(stand_in: &StandIn, dir: &Path, at: &str) {
    let Some((name, target)) = stand_in.link else {
        return;
    };
    let target = repo().join(target);
    assert!(
        target.exists(),
        "{at}: `{}` is stood in for by {}, which `cargo xtask ci` (step test-servers) installs",
        stand_in.command,
        target.display()
    );
    std::os::unix::fs::symlink(&target, dir.join(name)).unwrap();
}

/// Runs every step of one chapter in a fresh folder; panics naming the chapter, the line and
/// the command at the first step that fails.
fn run_chapter(chapter: &str) {
    let root = repo();
    let file = format!("{GUIDE}/{chapter}");
    let text = std::fs::read_to_string(root.join(&file))
        .unwrap_or_else(|e| panic!("{file}: cannot be read: {e}"));
    let steps = steps(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    copy_dir(&root.join("examples"), &dir.join("examples"));
    for step in &steps {
        match step {
            Step::Write { line, name, text } => {
                let path = dir.join(name);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, text)
                    .unwrap_or_else(|e| panic!("{file}:{line}: writing {name}: {e}"));
            }
            Step::Quote { line, path, text } => {
                let source = std::fs::read_to_string(root.join(path)).unwrap();
                assert!(
                    source.contains(text.as_str()),
                    "{file}:{line}: the block quoting {path} is not in it verbatim:\n{text}"
                );
            }
            Step::Run(step) => {
                let at = format!("{file}:{}", step.line);
                if let Some(why) = run_by_ci(&step.command) {
                    assert!(
                        step.expect.is_empty(),
                        "{at}: `{}` is run by CI, not here ({why}): show no output for it",
                        step.command
                    );
                    continue;
                }
                if let Some(s) = STAND_INS.iter().find(|s| s.command == step.command) {
                    assert!(!s.why.is_empty());
                    stand_in(s, &dir, &at);
                    continue;
                }
                let (code, stdout, stderr) = run(&step.command, &dir);
                let shown = format!(
                    "{at}: `{}`\n--- stdout\n{stdout}--- stderr\n{stderr}",
                    step.command
                );
                assert_ne!(
                    code,
                    Some(124),
                    "timed out after {COMMAND_TIMEOUT_SECONDS} s: {shown}"
                );
                assert_eq!(
                    code,
                    Some(step.exit),
                    "exited {code:?}, the guide says {}: {shown}",
                    step.exit
                );
                let output = format!("{stdout}\n{stderr}");
                for expected in &step.expect {
                    assert!(
                        appears(expected, &output),
                        "the guide shows the line {expected:?}, which it did not print: {shown}"
                    );
                }
            }
        }
    }
}

#[test]
fn guide_start_runs_as_written() {
    run_chapter("start.md");
}

#[test]
fn guide_policies_runs_as_written() {
    run_chapter("policies.md");
}

#[test]
fn guide_claude_code_runs_as_written() {
    run_chapter("claude-code.md");
}

#[test]
fn guide_mcp_runs_as_written() {
    run_chapter("mcp.md");
}

#[test]
fn guide_evidence_runs_as_written() {
    run_chapter("evidence.md");
}

#[test]
fn guide_embedding_runs_as_written() {
    run_chapter("embedding.md");
}

/// The index lists every chapter in order (the planned ones last), every page of the guide is
/// the index, a tested chapter or a planned one not written yet, the index itself has no block
/// that escapes the test, and every stand-in is still needed.
#[test]
fn guide_index_lists_every_chapter_in_order() {
    let dir = repo().join(GUIDE);
    let index = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let mut last = 0;
    for name in CHAPTERS.iter().chain(&PLANNED) {
        let at = index
            .find(name)
            .unwrap_or_else(|| panic!("{GUIDE}/README.md does not list {name}"));
        assert!(at >= last, "{GUIDE}/README.md lists {name} out of order");
        last = at;
    }
    assert_eq!(steps(&index), Ok(Vec::new()), "{GUIDE}/README.md");
    // Every stand-in stands in for a command some chapter quotes.
    let chapters: Vec<Step> = CHAPTERS
        .iter()
        .flat_map(|c| steps(&std::fs::read_to_string(dir.join(c)).unwrap()).unwrap())
        .collect();
    for stand_in in &STAND_INS {
        assert!(
            chapters
                .iter()
                .any(|s| matches!(s, Step::Run(run) if run.command == stand_in.command)),
            "no chapter quotes `{}` any more: drop its stand-in",
            stand_in.command
        );
    }
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name == "README.md" || CHAPTERS.contains(&name.as_str()) {
            continue;
        }
        assert!(
            !PLANNED.contains(&name.as_str()),
            "{GUIDE}/{name} exists now: move it from PLANNED to CHAPTERS and give it a test"
        );
        panic!("{GUIDE}/{name} is not a chapter the index lists and this test runs");
    }
}

/// The convention, on a small chapter: files in order, commands with their exit codes and
/// expected output, JSON checked, anything else refused.
#[test]
fn guide_convention_is_read_as_documented() {
    let chapter = "Intro\n\n```toml\n# file: p.toml\ndefault = \"ask\"\n```\n\n```sh\n\
        # a comment\nwarden check --policy p.toml \\\n  --tool x --args '{}'\n```\n\nprints\n\n\
        ```text\nx: ask\n```\n\n```json\n{\"a\": 1}\n```\n\n```sh\nwarden nope p.toml # exits 2\nls\n```\n";
    let got = steps(chapter).unwrap();
    assert_eq!(
        got,
        [
            Step::Write {
                line: 3,
                name: "p.toml".into(),
                text: "# file: p.toml\ndefault = \"ask\"\n".into()
            },
            Step::Run(Run {
                line: 10,
                command: "warden check --policy p.toml --tool x --args '{}'".into(),
                exit: 0,
                expect: vec!["x: ask".into()],
            }),
            Step::Run(Run {
                line: 25,
                command: "warden nope p.toml".into(),
                exit: 2,
                expect: Vec::new(),
            }),
            Step::Run(Run {
                line: 26,
                command: "ls".into(),
                exit: 0,
                expect: Vec::new(),
            }),
        ]
    );
    for (bad, why) in [
        (
            "```rust\nfn main() {}\n```\n",
            "starts with `// from: PATH`",
        ),
        (
            "```rust\n// from: crates/cli/src/main.rs\nfn main() {}\n```\n",
            "not a file the test suite runs",
        ),
        ("```\nplain\n```\n", "without a language"),
        ("```text\nout\n```\n", "must directly follow"),
        ("```sh\na\nb\n```\n```text\nout\n```\n", "holds 2"),
        ("```toml\ndefault = \"ask\"\n```\n", "# file: NAME"),
        (
            "```toml\n# file: unused.toml\n```\n",
            "no command after it uses",
        ),
        ("```json\n{not json}\n```\n", "not JSON"),
        ("```sh\nwarden x\n", "never closed"),
        ("```sh\nwarden x # exits one\n```\n", "not an exit code"),
    ] {
        let err = steps(bad).unwrap_err();
        assert!(err.contains(why), "{bad:?}: {err}");
    }
    assert!(appears(
        "a: …deny… [p]",
        "x\nok a: allow deny bash(rm) [p]\n"
    ));
    assert!(!appears("deny…allow", "allow deny"));
    assert!(appears("bash  2/0 allow", "  op-1   bash    2/0   allow"));
}
