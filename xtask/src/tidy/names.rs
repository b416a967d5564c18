//! One name per concept: a public type name (`pub struct`, `enum`, `trait`, `type`) is declared
//! in one place in the workspace's library sources, so a reader never has to ask which
//! `Scope` or `Clock` a signature means. Two declarations of one name are allowed only when
//! they are the same type compiled two ways (behind opposite `cfg`s), listed in
//! [`CFG_TWINS`]; the names still declared twice while their renaming is under way are listed
//! in [`PENDING`] with what each pair is, so the list can only shrink.

use std::collections::BTreeMap;
use std::path::Path;

use super::Finding;

/// The same type behind opposite `cfg`s (one file each).
const CFG_TWINS: &[&str] = &["Approvers"];

/// Names declared twice today, each pair to be renamed or merged into one implementation.
const PENDING: &[(&str, &str)] = &[];

/// Adds a finding for every public type name declared in more than one place.
pub(super) fn check(root: &Path, files: &[std::path::PathBuf], findings: &mut Vec<Finding>) {
    let mut seen: BTreeMap<String, Vec<(String, usize)>> = BTreeMap::new();
    for file in files {
        let rel = super::relative(root, file);
        if !rel.starts_with("crates/") || !rel.contains("/src/") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            if let Some(name) = public_type(line) {
                seen.entry(name).or_default().push((rel.clone(), i + 1));
            }
        }
    }
    for (name, _) in PENDING {
        if seen.get(*name).is_none_or(|places| places.len() < 2) {
            findings.push(Finding {
                path: "xtask/src/tidy/names.rs".into(),
                line: 1,
                message: format!("`{name}` is no longer declared twice: drop it from PENDING"),
            });
        }
    }
    for (name, places) in seen {
        if places.len() < 2
            || CFG_TWINS.contains(&name.as_str())
            || PENDING.iter().any(|(n, _)| *n == name)
        {
            continue;
        }
        let others: Vec<String> = places[1..]
            .iter()
            .map(|(p, l)| format!("{p}:{l}"))
            .collect();
        findings.push(Finding {
            path: places[0].0.clone(),
            line: places[0].1,
            message: format!(
                "public type `{name}` is also declared at {}: give each concept its own name",
                others.join(", ")
            ),
        });
    }
}

/// The type a line declares publicly, if it does.
fn public_type(line: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix("pub ")?;
    let rest = ["struct ", "enum ", "trait ", "type "]
        .iter()
        .find_map(|k| rest.strip_prefix(k))?;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    name.starts_with(|c: char| c.is_ascii_uppercase())
        .then_some(name)
}
