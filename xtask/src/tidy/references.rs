//! The repository stands alone: what its code and docs cite exists inside it.
//!
//! - every relative link in a Markdown file, and every repository path mentioned in a `.md` file
//!   or a Rust comment (`docs/…`, `crates/…`, `tests/…`, `examples/…`, `xtask/…`, `fuzz/…`), exists;
//!   a `file.md#anchor` names a heading of that file (GitHub's anchor for it); paths in fenced
//!   blocks of sample output (```` ```text ````) are examples and not checked;
//! - nothing points outside the repository: no `../` path that leaves it, no architecture brief
//!   or corpus kept beside the checkout;
//! - no tracker labels (an issue, item, gate or seed number) in code, test names or docs: cite
//!   the capability or the page in `docs/` instead.
//!
//! The tests below spell the strings they plant in pieces (`concat!`), so that a plain `grep` of
//! the repository for outside references finds none here either.

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

use regex::Regex;

use super::Finding;

/// The patterns the checks look for, built once a run.
struct Patterns {
    /// A repository path in prose: a top-level folder of the repository, then a path, then an
    /// optional `#anchor`.
    mention: Regex,
    /// A Markdown link's target: `[text](target)`.
    link: Regex,
    /// Tracker labels: a number after `issue`, `item`, `gate` or `seed`.
    label: Regex,
    /// A brief that lives outside the repository.
    outside: Regex,
}

impl Patterns {
    fn new() -> Result<Patterns, regex::Error> {
        Ok(Patterns {
            mention: Regex::new(
                r"(?:^|[^A-Za-z0-9_./-])((?:\.\./)*(?:docs|crates|tests|examples|xtask|fuzz)/[A-Za-z0-9_./-]*[A-Za-z0-9_])(#[A-Za-z0-9_-]+)?",
            )?,
            link: Regex::new(r"\]\(([^)\s]+)\)")?,
            label: Regex::new(r"(?i)\b(issues?|items?|gates?|seeds?)[ _]#?(\d+)(?:_|\b)")?,
            outside: Regex::new(
                r"\bdesign\.md\b|\.\./shared\b|\bshared/(corpus|reference|seeds)\b|\bstyle\.md\b",
            )?,
        })
    }
}

/// This file: its tests plant every kind of finding as data.
const SELF: &str = "xtask/src/tidy/references.rs";

/// The files these checks read: Markdown and Rust, outside build output, hidden folders and
/// fixture workspaces (planted data, not code).
pub(crate) fn files(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    walk(root, root, &mut out)?;
    out.sort();
    Ok(out)
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            let skip =
                name.starts_with('.') || matches!(name, "target" | "node_modules" | "fixtures");
            if !skip {
                walk(root, &path, out)?;
            }
        } else if (name.ends_with(".rs") || name.ends_with(".md")) && path != root.join(SELF) {
            out.push(path);
        }
    }
    Ok(())
}

/// Runs every reference check over `files` (paths under `root`).
pub(crate) fn check(
    root: &Path,
    files: &[PathBuf],
    findings: &mut Vec<Finding>,
) -> anyhow::Result<()> {
    let patterns = Patterns::new()?;
    let mut anchors = Anchors::default();
    for file in files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let rel = super::relative(root, file);
        let markdown = rel.ends_with(".md");
        // Inside a fenced block of sample output (```text), paths are examples, not citations.
        let mut sample = false;
        for (n, line) in text.lines().enumerate() {
            if markdown && let Some(info) = line.trim_start().strip_prefix("```") {
                sample = !sample && info.trim() == "text";
            }
            let at = |message: String| Finding {
                path: rel.clone(),
                line: n + 1,
                message,
            };
            if let Some(m) = patterns.outside.find(line) {
                findings.push(at(format!(
                    "`{}` is outside the repository: cite the page in docs/ that holds it",
                    m.as_str()
                )));
            }
            if let Some(c) = patterns.label.captures(line)
                && !is_allowed_label(line, &c)
            {
                findings.push(at(format!(
                    "tracker label `{}`: name the capability or the docs/ page instead",
                    &c[0]
                )));
            }
            let prose = if markdown {
                (!sample).then_some(line)
            } else {
                rust_comment(line)
            };
            let Some(prose) = prose else { continue };
            for target in mentions(&patterns, prose, markdown) {
                if let Some(message) = anchors.resolve(root, file, &target) {
                    findings.push(at(message));
                }
            }
        }
    }
    Ok(())
}

/// `seed` numbers a fuzzer's or a property's seed corpus legitimately; everything else is a
/// tracker label.
fn is_allowed_label(line: &str, c: &regex::Captures<'_>) -> bool {
    let word = c[1].to_ascii_lowercase();
    // `fuzz/seeds/…` paths and proptest's `seed 0x…` are not labels.
    word.starts_with("seed") && (line.contains("fuzz/seeds") || line.contains("0x"))
}

/// The comment text of a Rust line, if it has one.
fn rust_comment(line: &str) -> Option<&str> {
    let t = line.trim_start();
    t.starts_with("//").then_some(t)
}

/// A cited target: the path as written and its anchor, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    path: String,
    anchor: Option<String>,
    /// A Markdown link resolves against its file's folder; a mention in prose against the
    /// repository root (or, in Rust, the crate's folder).
    link: bool,
}

fn mentions(patterns: &Patterns, prose: &str, markdown: bool) -> Vec<Target> {
    let mut out = Vec::new();
    if markdown {
        for c in patterns.link.captures_iter(prose) {
            let raw = &c[1];
            if raw.contains("://") || raw.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match raw.split_once('#') {
                Some((p, a)) => (p, Some(a.to_owned())),
                None => (raw, None),
            };
            out.push(Target {
                path: path.to_owned(),
                anchor,
                link: true,
            });
        }
    }
    for c in patterns.mention.captures_iter(prose) {
        let path = c[1].to_owned();
        // A link target already checked as a link, or a URL's path.
        let start = c.get(1).map_or(0, |m| m.start());
        let before = &prose[..start];
        if before.ends_with("](") || before.ends_with("//") || before.ends_with('/') {
            continue;
        }
        out.push(Target {
            path,
            anchor: c.get(2).map(|a| a.as_str()[1..].to_owned()),
            link: false,
        });
    }
    out
}

/// Headings' anchors per Markdown file, read once.
#[derive(Default)]
struct Anchors {
    by_file: HashMap<PathBuf, BTreeSet<String>>,
}

impl Anchors {
    /// Checks one target cited from `file`; a message when it does not resolve.
    fn resolve(&mut self, root: &Path, file: &Path, target: &Target) -> Option<String> {
        let file_dir = file.parent().unwrap_or(root);
        let bases: Vec<PathBuf> = if target.path.is_empty() {
            vec![file.to_path_buf()]
        } else if target.link {
            vec![file_dir.join(&target.path)]
        } else {
            let mut bases = vec![root.join(&target.path)];
            if let Some(krate) = crate_dir(root, file) {
                bases.push(krate.join(&target.path));
            }
            bases.push(file_dir.join(&target.path));
            bases
        };
        let shown = if target.path.is_empty() {
            super::relative(root, file)
        } else {
            target.path.clone()
        };
        let mut inside = bases
            .iter()
            .map(|b| normalize(b))
            .filter(|p| p.starts_with(root));
        let Some(found) = inside.clone().find(|p| p.exists()) else {
            return Some(if inside.next().is_none() {
                format!("`{shown}` points outside the repository")
            } else {
                format!("`{shown}` does not exist")
            });
        };
        let anchor = target.anchor.as_deref()?;
        if found.extension().is_some_and(|e| e == "md") {
            let anchors = self
                .by_file
                .entry(found.clone())
                .or_insert_with(|| headings(&std::fs::read_to_string(&found).unwrap_or_default()));
            if !anchors.contains(anchor) {
                return Some(format!("`{shown}#{anchor}`: no such heading in {shown}"));
            }
        }
        None
    }
}

/// The folder of the crate `file` belongs to (the nearest `Cargo.toml` below `root`).
fn crate_dir(root: &Path, file: &Path) -> Option<PathBuf> {
    file.ancestors()
        .skip(1)
        .take_while(|d| d.starts_with(root) && *d != root)
        .find(|d| d.join("Cargo.toml").exists())
        .map(Path::to_path_buf)
}

/// `a/b/../c` → `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every heading's anchor in a Markdown text, as GitHub makes them.
fn headings(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    let mut fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        let Some(title) = line
            .strip_prefix('#')
            .map(|t| t.trim_start_matches('#'))
            .filter(|t| t.starts_with(' '))
        else {
            continue;
        };
        let slug = slug(title.trim());
        let n = seen.entry(slug.clone()).or_insert(0);
        out.insert(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    out
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, everything but letters, digits,
/// `-` and `_` dropped.
pub(crate) fn slug(title: &str) -> String {
    title
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_are_githubs() {
        assert_eq!(
            slug("The `warden check` JSON line"),
            "the-warden-check-json-line"
        );
        assert_eq!(
            slug("Sources, carve-outs and grants"),
            "sources-carve-outs-and-grants"
        );
        assert_eq!(slug("Round 5 (2026)"), "round-5-2026");
        let h = headings("# A\n## B c\n```\n# not a heading\n```\n## B c\n");
        assert_eq!(h.into_iter().collect::<Vec<_>>(), ["a", "b-c", "b-c-1"]);
    }

    #[test]
    fn tracker_labels_are_found_and_seed_corpora_are_not_labels() {
        let patterns = Patterns::new().unwrap();
        let labelled = |line: &str| {
            patterns
                .label
                .captures(line)
                .is_some_and(|c| !is_allowed_label(line, &c))
        };
        for line in [
            "// Fixed in issue 4.",
            "//! (issue 5, item 4)",
            "ADR-0121 gate 13",
            "fn gate_13_closes()",
            concat!("seed", " 004's boundary"),
            "see #8: Issue #8",
        ] {
            assert!(labelled(line), "{line}");
        }
        for line in [
            "stage 5 opens",
            "fuzz/seeds/shell 1",
            "a proptest seed 0x1f",
            "items in a list",
        ] {
            assert!(!labelled(line), "{line}");
        }
    }

    #[test]
    fn a_reference_outside_the_repository_or_missing_is_a_finding() {
        let root = tempdir();
        std::fs::create_dir_all(root.join("docs/design")).unwrap();
        std::fs::create_dir_all(root.join("crates/a/src")).unwrap();
        std::fs::write(root.join("crates/a/Cargo.toml"), "[package]\n").unwrap();
        std::fs::write(root.join("docs/design/policy.md"), "# P\n## Rule grammar\n").unwrap();
        std::fs::write(
            root.join("docs/guide.md"),
            "See [the grammar](design/policy.md#rule-grammar) and \
             [nothing](design/policy.md#no-such).\n\
             Cases: `..\
             /shared/corpus/x.json`, design\
             .md §4.1, [up](../../elsewhere.md).\n\
             Moved: `tests/shell/hostile.rs`.\n",
        )
        .unwrap();
        std::fs::write(
            root.join("crates/a/src/lib.rs"),
            "//! The grammar (docs/design/policy.md#rule-grammar), issue 4.\n\
             //! Missing: docs/design/policy.md#precedence.\n\
             let p = \"docs/not/a/comment.md\";\n",
        )
        .unwrap();
        let files = files(&root).unwrap();
        let mut findings = Vec::new();
        check(&root, &files, &mut findings).unwrap();
        let shown: Vec<String> = findings.iter().map(ToString::to_string).collect();
        let expected = [
            "crates/a/src/lib.rs:1: tidy: tracker label `issue 4`: name the capability or the docs/ page instead",
            "crates/a/src/lib.rs:2: tidy: `docs/design/policy.md#precedence`: no such heading in docs/design/policy.md",
            "docs/guide.md:1: tidy: `design/policy.md#no-such`: no such heading in design/policy.md",
            concat!(
                "docs/guide.md:2: tidy: `..",
                "/shared` is outside the repository: cite the page in docs/ that holds it"
            ),
            "docs/guide.md:2: tidy: `../../elsewhere.md` points outside the repository",
            "docs/guide.md:3: tidy: `tests/shell/hostile.rs` does not exist",
        ];
        assert_eq!(shown, expected);
        std::fs::remove_dir_all(&root).unwrap();
    }

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "xtask-references-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
