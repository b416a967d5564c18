//! The edge: the one place in this crate that touches the file system around a decision, and
//! only before it, never during one (the only other file-system access is
//! [`crate::LoadedPolicy::read`], which reads a policy file). It resolves symlinks in a call's
//! paths so the pure engine can match both the lexical and the resolved path (deny and ask
//! match either; allow needs both).

use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

use crate::compile::PolicySnapshot;
use crate::engine::Call;
use crate::matcher::{MatcherKind, Value};
use crate::shell::{self, ShellSubject};

/// The most symlinks one path may pass through (the kernel's own bound, `ELOOP`).
const MAX_LINKS: usize = 40;

/// Resolves symlinks in `path` (absolute) as the kernel would to open it for writing: each
/// component in turn, a symlink replaced by its target (relative to the link's folder) and
/// resolved again, **including a final symlink whose target does not exist yet** (a write
/// creates the target: `src/link → ../.git/hooks/pre-commit` writes the hook); a component
/// that does not exist is kept as written, with the rest. Returns `None` for a link loop
/// (more than 40 links), which no write gets through.
///
/// One `lstat` per component, until one is missing: nothing beneath a missing component exists
/// either, so the components after it are kept as written without asking the file system again
/// (unless a `..` climbs back above it).
pub fn resolve_existing(path: &Path) -> Option<PathBuf> {
    let mut current = PathBuf::with_capacity(path.as_os_str().len() + 1);
    current.push("/");
    // The components of symlink targets still to walk, the next one last; they come before
    // the rest of `path`.
    let mut pending: Vec<OsString> = Vec::new();
    let mut rest = path.components();
    let mut depth = 0usize;
    // The depth of a component found missing, while `current` is beneath it.
    let mut missing: Option<usize> = None;
    let mut links = 0;
    loop {
        let owned;
        let part: &OsStr = match pending.pop() {
            Some(p) => {
                owned = p;
                &owned
            }
            None => match rest.next() {
                Some(Component::Normal(p)) => p,
                Some(Component::ParentDir) => OsStr::new(".."),
                Some(_) => continue,
                None => break,
            },
        };
        if part == ".." {
            if current.pop() {
                depth -= 1;
            }
            if missing.is_some_and(|m| depth < m) {
                missing = None;
            }
            continue;
        }
        if part == "." {
            continue;
        }
        current.push(part);
        depth += 1;
        if missing.is_some() {
            continue;
        }
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > MAX_LINKS {
                    return None;
                }
                let target = std::fs::read_link(&current).ok()?;
                current.pop();
                depth -= 1;
                if target.is_absolute() {
                    current.as_mut_os_string().clear();
                    current.push("/");
                    depth = 0;
                }
                for c in target.components().rev() {
                    match c {
                        Component::Normal(p) => pending.push(p.to_owned()),
                        Component::ParentDir => pending.push("..".into()),
                        _ => {}
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing = Some(depth),
            _ => {}
        }
    }
    Some(current)
}

/// Fills `call.resolved_paths` for the call's path argument, when its tool matches paths, and
/// for the redirect targets of a shell command (`> out`, `< in`), which the engine decides as
/// `write` and `read` subjects.
pub fn resolve_call_paths(snapshot: &PolicySnapshot, call: &mut Call) {
    let Some(profile) = snapshot.profiles().get(&call.tool) else {
        return;
    };
    let cwd = call
        .cwd
        .as_deref()
        .unwrap_or(&snapshot.path_env().project_root);
    match profile.matcher {
        MatcherKind::Path => {
            if let Some((lexical, resolved)) =
                resolved_form(snapshot, call.args.get(&profile.field), cwd)
            {
                call.resolved_paths.insert(lexical, resolved);
            }
        }
        MatcherKind::Shell if call.tool == "bash" => {
            let Some(command) = call.args.get(&profile.field).and_then(|c| c.as_str()) else {
                return;
            };
            // A command that does not split is denied by the engine; nothing to resolve.
            let Ok(subjects) = shell::split_command(command) else {
                return;
            };
            let mut found = Vec::new();
            for subject in subjects {
                let (tool, target) = match subject {
                    ShellSubject::Write(r) => ("write", r),
                    ShellSubject::Read(r) => ("read", r),
                    ShellSubject::Command(_) => continue,
                };
                if target.unknown.is_some()
                    || snapshot
                        .profiles()
                        .get(tool)
                        .is_some_and(|p| p.matcher != MatcherKind::Path)
                {
                    continue;
                }
                let field = serde_json::Value::String(target.path);
                found.extend(resolved_form(snapshot, Some(&field), cwd));
            }
            call.resolved_paths.extend(found);
        }
        _ => {}
    }
}

/// Resolves the path of every subject a caller split itself (a patch's files), as
/// [`resolve_call_paths`] does for the call's own paths: a subject whose tool matches paths
/// is decided on where its path really leads too.
pub fn resolve_subject_paths(
    snapshot: &PolicySnapshot,
    call: &mut Call,
    subjects: &[crate::engine::Subject],
) {
    let cwd = call
        .cwd
        .as_deref()
        .unwrap_or(&snapshot.path_env().project_root);
    let mut found = Vec::new();
    for subject in subjects {
        let Some(profile) = snapshot
            .profiles()
            .get(&subject.tool)
            .filter(|p| p.matcher == MatcherKind::Path)
        else {
            continue;
        };
        found.extend(resolved_form(
            snapshot,
            subject.args.get(&profile.field),
            cwd,
        ));
    }
    call.resolved_paths.extend(found);
}

/// One path argument's lexical form and, when it differs, where its symlinks lead.
fn resolved_form(
    snapshot: &PolicySnapshot,
    field: Option<&serde_json::Value>,
    cwd: &Path,
) -> Option<(String, String)> {
    let Value::Path { lexical, .. } =
        Value::prepare(MatcherKind::Path, field, cwd, snapshot.path_env(), None)
    else {
        return None;
    };
    let resolved = resolve_existing(Path::new(&lexical))?;
    let resolved = resolved
        .into_os_string()
        .into_string()
        .unwrap_or_else(|s| s.to_string_lossy().into_owned());
    (resolved != lexical).then_some((lexical, resolved))
}

/// The forms of a path Warden protects from the governed agent: the absolute path as given
/// (joined to the current directory, `..` and `.` resolved lexically) and, when it differs,
/// the path with every symlink resolved (a write through a link lands there).
pub fn protected_forms(path: &Path) -> Vec<String> {
    let Ok(absolute) = std::path::absolute(path) else {
        return vec![path.display().to_string()];
    };
    let lexical = lexically_normal(&absolute);
    let mut forms = vec![lexical.display().to_string()];
    if let Some(resolved) = resolve_existing(&lexical) {
        let resolved = resolved.display().to_string();
        if !forms.contains(&resolved) {
            forms.push(resolved);
        }
    }
    forms
}

/// `path` (absolute) with `.` and `..` resolved without reading the file system.
fn lexically_normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::VecDeque;
    use std::ffi::OsString;

    use super::*;

    /// The walk as first written: every component asked of the file system in turn. The fast
    /// walk must agree with it on every path.
    fn reference(path: &Path) -> Option<PathBuf> {
        let mut pending: VecDeque<OsString> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(p) => Some(p.to_owned()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect();
        let mut current = PathBuf::from("/");
        let mut links = 0;
        while let Some(part) = pending.pop_front() {
            if part == ".." {
                current.pop();
                continue;
            }
            let candidate = current.join(&part);
            match std::fs::symlink_metadata(&candidate) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    links += 1;
                    if links > MAX_LINKS {
                        return None;
                    }
                    let target = std::fs::read_link(&candidate).ok()?;
                    if target.is_absolute() {
                        current = PathBuf::from("/");
                    }
                    for c in target.components().rev() {
                        match c {
                            Component::Normal(p) => pending.push_front(p.to_owned()),
                            Component::ParentDir => pending.push_front("..".into()),
                            _ => {}
                        }
                    }
                }
                _ => current = candidate,
            }
        }
        Some(current)
    }

    #[test]
    fn the_walk_that_stops_asking_beneath_a_missing_component_agrees_with_the_full_walk() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("dir")).unwrap();
        std::fs::write(root.join("dir/file"), "").unwrap();
        std::fs::write(root.join("file"), "").unwrap();
        let link = |target: &Path, name: &str| std::os::unix::fs::symlink(target, root.join(name));
        link(&root.join("dir"), "abs").unwrap();
        link(Path::new("dir"), "rel").unwrap();
        link(Path::new(".."), "up").unwrap();
        link(&root.join("gone/x"), "dangling").unwrap();
        link(Path::new("missing/../dir"), "through_missing").unwrap();
        link(Path::new("loop2"), "loop1").unwrap();
        link(Path::new("loop1"), "loop2").unwrap();
        let parts = [
            "dir",
            "file",
            "abs",
            "rel",
            "up",
            "dangling",
            "through_missing",
            "loop1",
            "missing",
            "..",
        ];
        let mut checked = 0;
        let mut paths = vec![root.to_path_buf()];
        for _ in 0..3 {
            let mut next = Vec::new();
            for p in &paths {
                for part in parts {
                    let path = p.join(part);
                    assert_eq!(
                        resolve_existing(&path),
                        reference(&path),
                        "{}",
                        path.display()
                    );
                    checked += 1;
                    next.push(path);
                }
            }
            paths = next;
        }
        assert_eq!(checked, 10 + 100 + 1000);
        assert_eq!(
            resolve_existing(&root.join("missing/x/../../rel/file")),
            Some(root.canonicalize().unwrap().join("dir/file"))
        );
    }
}
