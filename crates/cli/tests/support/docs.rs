//! The commands the documentation quotes run as quoted: every command in a `sh` block of
//! README.md and every command in the header comment of an example file, through real `bash`
//! with the `warden` built for these tests first on `PATH`, from a copy of the repository's
//! `examples/` (so commands that write leave the checkout alone). Each must exit 0; where the
//! README says what a command prints, the output is checked too.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root.
pub(super) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Commands quoted but not run here, each with the reason.
const NOT_RUN: [(&str, &str); 2] = [
    (
        "cargo xtask ci",
        "it is the command that runs this test (CI runs it on every change)",
    ),
    (
        "cargo install --path crates/cli --locked",
        "it installs into the user's ~/.cargo/bin; the binary it builds is the one tested here",
    ),
];

/// What a command must print, where the documentation says so: a piece of the command, and
/// a piece of its standard output.
const PRINTS: [(&str, &str); 4] = [
    (
        "--args '{\"command\":\"git push origin main\"}'",
        "bash: ask bash(git push:*) [project]",
    ),
    ("--args '{\"path\":\".env\"}'", "decision: deny"),
    (
        "policy compile --policy examples/policies/project.toml",
        "allow write(src/**) (derived from edit(src/**): alias expansion)",
    ),
    (
        "--tool edit --args '{\"path\":\"src/main.rs\"}'",
        "edit: allow edit(src/**)",
    ),
];

/// Joins `\` continuations and drops blank lines and comments.
fn commands(lines: impl Iterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in lines {
        let line = line.trim();
        if current.is_empty() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head.trim_end());
                current.push(' ');
            }
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

/// Every command in a ```sh block of a Markdown text.
fn markdown_commands(text: &str) -> Vec<String> {
    let mut block = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(info) = t.strip_prefix("```") {
            inside = !inside && info.trim() == "sh";
            continue;
        }
        if inside {
            block.push(line.to_owned());
        }
    }
    commands(block.into_iter())
}

/// Every command in a file's leading comment: the indented `#   …` lines.
fn header_commands(text: &str) -> Vec<String> {
    let quoted = text
        .lines()
        .take_while(|l| l.starts_with('#'))
        .filter_map(|l| l.strip_prefix("#   "))
        .map(str::to_owned);
    commands(quoted)
}

/// The example files: everything under `examples/` that can carry a header comment. The Cargo
/// workspace `examples/custom-runtime/` is Rust sources and manifests, whose comments are not
/// commands, so it is skipped, and so is any `Cargo.toml`.
fn example_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap_or_default();
        if path.is_dir() {
            if name != "custom-runtime" && name != "target" {
                example_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "toml") && name != "Cargo.toml" {
            out.push(path);
        }
    }
    out.sort();
}

/// Copies a folder, leaving out build output: any `target` folder (the Cargo workspace under
/// `examples/custom-runtime/` builds into one).
pub(super) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// How long one documented command may take.
pub(super) const COMMAND_TIMEOUT_SECONDS: u32 = 180;

/// Runs one documented command in `dir` through bash, `warden` first on `PATH`, `HOME` the
/// folder, with a timeout (exit 124 when it runs out).
pub(super) fn run(command: &str, dir: &Path) -> (Option<i32>, String, String) {
    let command = command.replace("cargo run --release --bin warden --", "warden");
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_warden")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("timeout")
        .args(["--kill-after=10", &COMMAND_TIMEOUT_SECONDS.to_string()])
        .args(["bash", "--norc", "--noprofile", "-c", &command])
        .current_dir(dir)
        .env("PATH", path)
        .env("HOME", dir)
        .env_remove("CLAUDE_PROJECT_DIR")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_command_the_readme_and_the_examples_quote_runs_as_quoted() {
    let root = repo();
    let mut quoted: Vec<(String, String)> = Vec::new();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    quoted.extend(
        markdown_commands(&readme)
            .into_iter()
            .map(|c| ("README.md".to_owned(), c)),
    );
    let mut files = Vec::new();
    example_files(&root.join("examples"), &mut files);
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.strip_prefix(&root).unwrap().display().to_string();
        quoted.extend(
            header_commands(&text)
                .into_iter()
                .map(|c| (name.clone(), c)),
        );
    }
    // The documentation quotes these; an edit that drops them must drop this line too.
    assert!(quoted.len() >= 12, "{quoted:#?}");

    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&root.join("examples"), &tmp.path().join("examples"));
    let mut ran = 0;
    for (file, command) in &quoted {
        if let Some((_, why)) = NOT_RUN.iter().find(|(c, _)| c == command) {
            assert!(!why.is_empty());
            continue;
        }
        assert!(
            command.starts_with("warden ")
                || command.starts_with("cargo run --release --bin warden -- "),
            "{file}: a quoted command this test cannot run: {command}"
        );
        let (code, stdout, stderr) = run(command, tmp.path());
        assert_eq!(
            code,
            Some(0),
            "{file}: `{command}` exited {code:?}\nstdout: {stdout}\nstderr: {stderr}"
        );
        assert!(
            !stdout.trim().is_empty(),
            "{file}: `{command}` printed nothing"
        );
        for (piece, expected) in PRINTS {
            if command.contains(piece) {
                assert!(
                    stdout.contains(expected),
                    "{file}: `{command}` should print {expected:?}, printed:\n{stdout}"
                );
            }
        }
        if command.starts_with("warden replay examples/transcripts/*.jsonl") {
            let expected =
                std::fs::read_to_string(root.join("examples/expected/replay.jsonl")).unwrap();
            assert_eq!(stdout, expected, "{file}: `{command}`");
        }
        ran += 1;
    }
    assert!(ran + NOT_RUN.len() == quoted.len());
}

#[test]
fn continuations_and_comments_are_read_as_a_shell_reads_them() {
    let text =
        "# comment\n#   warden a \\\n#       --b c\n#\n#   warden d\n\nx = 1\n#   warden e\n";
    assert_eq!(header_commands(text), ["warden a --b c", "warden d"]);
    let md = "```sh\nwarden x \\\n  --y\n```\n```text\nwarden not-this\n```\n";
    assert_eq!(markdown_commands(md), ["warden x --y"]);
}
