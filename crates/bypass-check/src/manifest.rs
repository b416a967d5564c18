//! Line lookup in a `Cargo.toml`: `cargo metadata` says *what* a dependency is, this says *where*
//! it is written, so that a violation points at the entry to change.
//!
//! A line-based scan of table headers and keys is enough for manifests (every dependency entry
//! starts on its own line, as a key or a `[dependencies.name]` header); when nothing matches, the
//! caller falls back to line 1 rather than failing.

use cargo_metadata::DependencyKind;

/// Where a line of a manifest sits: the table header it belongs to, split into keys.
struct Line<'a> {
    number: usize,
    table: &'a [String],
    text: &'a str,
}

/// A manifest's text with the table of each line.
pub(crate) struct Manifest {
    lines: Vec<(usize, Vec<String>, String)>,
}

impl Manifest {
    /// Splits `text` into lines, each with the table header (as keys) it belongs to.
    pub(crate) fn parse(text: &str) -> Manifest {
        let mut table: Vec<String> = Vec::new();
        let mut lines = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if let Some(header) = header_keys(trimmed) {
                table = header;
                // The header line itself belongs to its own table (for `[dependencies.foo]`).
            }
            lines.push((index + 1, table.clone(), trimmed.to_owned()));
        }
        Manifest { lines }
    }

    fn iter(&self) -> impl Iterator<Item = Line<'_>> {
        self.lines.iter().map(|(number, table, text)| Line {
            number: *number,
            table,
            text,
        })
    }

    /// The line of the dependency entry `key` (the dependency's name, or its rename) of `kind`,
    /// for `target` (`cfg(unix)`) or for all targets when `None`.
    pub(crate) fn dependency_line(
        &self,
        key: &str,
        kind: DependencyKind,
        target: Option<&str>,
    ) -> Option<usize> {
        let wanted = |line: &Line<'_>| dependency_table(line.table, kind, target);
        let exact = self.iter().find(|line| {
            if !wanted(line) {
                return false;
            }
            let table_key = dependency_table_key(line.table);
            match table_key {
                // `[dependencies.foo]`: the header line is the entry.
                Some(name) => name == key && header_keys(line.text).is_some(),
                None => key_of(line.text).as_deref() == Some(key),
            }
        });
        exact.map(|line| line.number)
    }

    /// The line of feature `name` in `[features]`.
    pub(crate) fn feature_line(&self, name: &str) -> Option<usize> {
        self.key_line(&["features"], name)
    }

    /// The line of `name = …` in `[package]`.
    pub(crate) fn package_name_line(&self) -> Option<usize> {
        self.key_line(&["package"], "name")
            .or_else(|| self.header_line(&["package"]))
    }

    fn key_line(&self, table: &[&str], key: &str) -> Option<usize> {
        self.iter()
            .find(|line| {
                line.table
                    .iter()
                    .map(String::as_str)
                    .eq(table.iter().copied())
                    && header_keys(line.text).is_none()
                    && key_of(line.text).as_deref() == Some(key)
            })
            .map(|line| line.number)
    }

    fn header_line(&self, table: &[&str]) -> Option<usize> {
        self.iter()
            .find(|line| {
                header_keys(line.text).is_some()
                    && line
                        .table
                        .iter()
                        .map(String::as_str)
                        .eq(table.iter().copied())
            })
            .map(|line| line.number)
    }
}

/// `[a.'b c'.d]` → `["a", "b c", "d"]`; `None` for a line that is not a table header.
fn header_keys(trimmed: &str) -> Option<Vec<String>> {
    let rest = trimmed.strip_prefix('[')?;
    if rest.starts_with('[') {
        // An array of tables (`[[bin]]`): a header, but not of a table we look into.
        let inner = rest.strip_prefix('[')?;
        let end = inner.find("]]")?;
        return Some(split_keys(&inner[..end]));
    }
    let end = find_unquoted(rest, ']')?;
    Some(split_keys(&rest[..end]))
}

/// The key a `key = value` or `key.sub = value` line sets; `None` for other lines.
fn key_of(trimmed: &str) -> Option<String> {
    if trimmed.starts_with('#') || trimmed.starts_with('[') {
        return None;
    }
    let eq = find_unquoted(trimmed, '=')?;
    split_keys(&trimmed[..eq]).into_iter().next()
}

/// Splits a dotted key on unquoted dots, unquoting each part.
fn split_keys(text: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '.') => keys.push(std::mem::take(&mut current).trim().to_owned()),
            _ => current.push(c),
        }
    }
    keys.push(current.trim().to_owned());
    keys
}

fn find_unquoted(text: &str, needle: char) -> Option<usize> {
    let mut quote: Option<char> = None;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, c) if c == needle => return Some(i),
            _ => {}
        }
    }
    None
}

fn kind_table(kind: DependencyKind) -> &'static [&'static str] {
    match kind {
        DependencyKind::Development => &["dev-dependencies", "dev_dependencies"],
        DependencyKind::Build => &["build-dependencies", "build_dependencies"],
        _ => &["dependencies"],
    }
}

/// Whether `table` is (or is an entry of) a dependency table of `kind` for `target`.
fn dependency_table(table: &[String], kind: DependencyKind, target: Option<&str>) -> bool {
    let (platform, rest) = match table {
        [first, platform, rest @ ..] if first == "target" => (Some(platform.as_str()), rest),
        rest => (None, rest),
    };
    let same_target = match (platform, target) {
        (None, None) => true,
        (Some(a), Some(b)) => squash(a) == squash(b),
        _ => false,
    };
    same_target && matches!(rest, [name] | [name, _] if kind_table(kind).contains(&name.as_str()))
}

/// For `[dependencies.foo]` (any kind, any target), `Some("foo")`.
fn dependency_table_key(table: &[String]) -> Option<&str> {
    let rest = match table {
        [first, _, rest @ ..] if first == "target" => rest,
        rest => rest,
    };
    match rest {
        [_, key] => Some(key.as_str()),
        _ => None,
    }
}

fn squash(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"[package]
name = "demo"

[dependencies]
alpha.workspace = true
"beta" = { path = "../beta" }

[dependencies.gamma]
path = "../gamma"

[dev-dependencies]
alpha = { workspace = true, features = ["test-util"] }

[target.'cfg(unix)'.build-dependencies]
delta = "1"

[features]
default = ["x"] # comment
x = []
"#;

    #[test]
    fn finds_each_form_of_entry() {
        let m = Manifest::parse(TEXT);
        assert_eq!(m.package_name_line(), Some(2));
        for (name, kind, target, line) in [
            ("alpha", DependencyKind::Normal, None, 5),
            ("beta", DependencyKind::Normal, None, 6),
            ("gamma", DependencyKind::Normal, None, 8),
            ("alpha", DependencyKind::Development, None, 12),
            ("delta", DependencyKind::Build, Some("cfg(unix)"), 15),
        ] {
            assert_eq!(
                m.dependency_line(name, kind, target),
                Some(line),
                "{name} ({kind:?}, {target:?})"
            );
        }
        assert_eq!(
            m.dependency_line("delta", DependencyKind::Build, None),
            None
        );
        assert_eq!(m.feature_line("default"), Some(18));
        assert_eq!(m.feature_line("x"), Some(19));
    }
}
