//! `cargo xtask tidy`: the house conventions as checks (docs/conventions.md). They also run under
//! `cargo test` (see the test at the bottom), so a convention is a test.
//!
//! - every `.rs` file starts with a `//!` doc comment;
//! - `#[ignore]` and `#[should_panic]` carry a reason (`#[ignore = "…"]`,
//!   `#[should_panic(expected = "…")]`);
//! - every crate root (`lib.rs`, or `main.rs` for a binary-only crate) states its
//!   `**Invariant:**` and what it `**Must never:**` do;
//! - every workspace crate, every module of a crate's `src/` (a file or a folder) and every
//!   executor stage file appears in `docs/ARCHITECTURE.md`, by its path;
//! - no `rust-toolchain.toml` pins a toolchain the machine may not have;
//! - the repository stands alone: every path and `docs/…#anchor` its code and docs cite exists
//!   inside it, and no tracker label stands in for a name (see [`references`]);
//! - one name per concept: no public type name is declared twice in the crates (see [`names`]).

mod names;
mod references;

use std::path::{Path, PathBuf};

/// One broken convention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub(crate) path: String,
    pub(crate) line: usize,
    pub(crate) message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: tidy: {}", self.path, self.line, self.message)
    }
}

pub(crate) fn run(root: &Path) -> anyhow::Result<bool> {
    let (files, findings) = check(root)?;
    for finding in &findings {
        println!("{finding}");
    }
    println!(
        "tidy: {files} Rust files and every Markdown file checked, {} finding(s)",
        findings.len()
    );
    Ok(findings.is_empty())
}

/// Checks the workspace at `root`; returns the number of Rust files read and the findings.
pub(crate) fn check(root: &Path) -> anyhow::Result<(usize, Vec<Finding>)> {
    let mut findings = Vec::new();
    let mut files = Vec::new();
    for top in ["crates", "xtask", "tests", "examples"] {
        collect_rs(&root.join(top), &mut files)?;
    }
    files.sort();
    for file in &files {
        let rel = relative(root, file);
        if rel.contains("/fixtures/") {
            continue; // planted violations and fixture crates are data, not code
        }
        let text = std::fs::read_to_string(file)?;
        check_file(&rel, &text, &mut findings);
    }
    references::check(root, &references::files(root)?, &mut findings)?;
    names::check(root, &files, &mut findings);
    check_crate_roots(root, &mut findings)?;
    check_architecture_map(root, &mut findings)?;
    if root.join("rust-toolchain.toml").exists() || root.join("rust-toolchain").exists() {
        findings.push(Finding {
            path: "rust-toolchain.toml".into(),
            line: 1,
            message: "do not pin a toolchain: set `rust-version` in Cargo.toml instead".into(),
        });
    }
    Ok((files.len(), findings))
}

fn check_file(rel: &str, text: &str, findings: &mut Vec<Finding>) {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if !first.trim_start().starts_with("//!") {
        findings.push(Finding {
            path: rel.to_owned(),
            line: 1,
            message: "a Rust file starts with a `//!` comment saying what it holds".into(),
        });
    }
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with("#[ignore]") {
            findings.push(Finding {
                path: rel.to_owned(),
                line: i + 1,
                message: "`#[ignore]` needs a reason: `#[ignore = \"why\"]`".into(),
            });
        }
        if t.starts_with("#[should_panic]") {
            findings.push(Finding {
                path: rel.to_owned(),
                line: i + 1,
                message: "`#[should_panic]` needs `expected = \"…\"`".into(),
            });
        }
    }
}

/// Crate roots of every workspace member under `crates/` and `xtask/`.
fn crate_roots(root: &Path) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    dirs.push(root.join("xtask"));
    dirs.sort();
    for dir in dirs {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))?;
        let name = manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .map(|n| n.trim().trim_matches('"').to_owned())
            .unwrap_or_default();
        let lib = dir.join("src/lib.rs");
        let main = dir.join("src/main.rs");
        let root_file = if lib.exists() { lib } else { main };
        out.push((name, root_file));
    }
    Ok(out)
}

fn check_crate_roots(root: &Path, findings: &mut Vec<Finding>) -> anyhow::Result<()> {
    for (name, file) in crate_roots(root)? {
        let rel = relative(root, &file);
        let Ok(text) = std::fs::read_to_string(&file) else {
            findings.push(Finding {
                path: rel,
                line: 1,
                message: format!("crate {name} has no lib.rs or main.rs"),
            });
            continue;
        };
        let header: String = text
            .lines()
            .take_while(|l| l.trim_start().starts_with("//!") || l.trim().is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        for (needle, what) in [
            ("**Invariant:**", "its invariant"),
            ("**Must never:**", "what it must never do"),
        ] {
            if !header.contains(needle) {
                findings.push(Finding {
                    path: rel.clone(),
                    line: 1,
                    message: format!("crate {name}'s root docs must state {what} (`{needle} …`)"),
                });
            }
        }
    }
    Ok(())
}

fn check_architecture_map(root: &Path, findings: &mut Vec<Finding>) -> anyhow::Result<()> {
    let path = root.join("docs/ARCHITECTURE.md");
    let Ok(map) = std::fs::read_to_string(&path) else {
        findings.push(Finding {
            path: "docs/ARCHITECTURE.md".into(),
            line: 1,
            message: "the architecture map is missing".into(),
        });
        return Ok(());
    };
    for (name, crate_root) in crate_roots(root)? {
        if !map.contains(&format!("`{name}`")) {
            findings.push(Finding {
                path: "docs/ARCHITECTURE.md".into(),
                line: 1,
                message: format!("crate `{name}` is not in the code map"),
            });
        }
        if let Some(src) = crate_root.parent() {
            for module in modules(root, src)? {
                if !map.contains(&format!("`{module}")) {
                    findings.push(Finding {
                        path: "docs/ARCHITECTURE.md".into(),
                        line: 1,
                        message: format!("module `{module}` is not in the code map"),
                    });
                }
            }
        }
    }
    for stage in modules(root, &root.join("crates/executor/src/stages"))? {
        if !stage.ends_with("/mod.rs") && !map.contains(&format!("`{stage}`")) {
            findings.push(Finding {
                path: "docs/ARCHITECTURE.md".into(),
                line: 1,
                message: format!("executor stage `{stage}` is not in the code map"),
            });
        }
    }
    Ok(())
}

/// The modules directly in `src`, as paths from the root: each `.rs` file but the crate root
/// (`name.rs`), and each folder (`name/`).
fn modules(root: &Path, src: &Path) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(src)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            out.push(format!("{}/", relative(root, &path)));
        } else if name.ends_with(".rs") && name != "lib.rs" && name != "main.rs" {
            out.push(relative(root, &path));
        }
    }
    out.sort();
    Ok(out)
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                collect_rs(&path, out)?;
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
    Ok(())
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_is_tidy() {
        let root = crate::workspace_root().unwrap();
        let (files, findings) = check(&root).unwrap();
        assert!(files > 10);
        let listed: Vec<String> = findings.iter().map(ToString::to_string).collect();
        assert!(listed.is_empty(), "{}", listed.join("\n"));
    }

    #[test]
    fn findings_name_the_file_and_line() {
        let mut findings = Vec::new();
        check_file(
            "a.rs",
            "fn main() {}\n#[test]\n#[ignore]\nfn t() {}\n",
            &mut findings,
        );
        let lines: Vec<String> = findings.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "a.rs:1: tidy: a Rust file starts with a `//!` comment saying what it holds",
                "a.rs:3: tidy: `#[ignore]` needs a reason: `#[ignore = \"why\"]`",
            ]
        );
        findings.clear();
        check_file(
            "b.rs",
            "//! ok\n#[ignore = \"slow\"]\n#[should_panic(expected = \"x\")]\n",
            &mut findings,
        );
        assert!(findings.is_empty());
    }
}
