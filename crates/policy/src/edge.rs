//! The edge: the one place in this crate that touches the file system around a decision, and
//! only before it, never during one (the only other file-system access is
//! [`crate::LoadedPolicy::read`], which reads a policy file). It resolves symlinks in a call's
//! paths so the pure engine can match both the lexical and the resolved path (deny and ask
//! match either; allow needs both).

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
pub fn resolve_existing(path: &Path) -> Option<PathBuf> {
    let mut pending: std::collections::VecDeque<std::ffi::OsString> = path
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
        if part == "." {
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

/// Fills `call.resolved_paths` for the call's path argument, when its tool matches paths, and
/// for the redirect targets of a shell command (`> out`, `< in`), which the engine decides as
/// `write` and `read` subjects.
pub fn resolve_call_paths(snapshot: &PolicySnapshot, call: &mut Call) {
    let Some(profile) = snapshot.profiles().get(&call.tool) else {
        return;
    };
    let cwd = call
        .cwd
        .clone()
        .unwrap_or_else(|| snapshot.path_env().project_root.clone());
    match profile.matcher {
        MatcherKind::Path => {
            let field = call.args.get(&profile.field).cloned();
            resolve_one(snapshot, call, field.as_ref(), &cwd);
        }
        MatcherKind::Shell if call.tool == "bash" => {
            let Some(command) = call.args.get(&profile.field).and_then(|c| c.as_str()) else {
                return;
            };
            // A command that does not split is denied by the engine; nothing to resolve.
            let Ok(subjects) = shell::split_command(command) else {
                return;
            };
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
                resolve_one(snapshot, call, Some(&field), &cwd);
            }
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
        .clone()
        .unwrap_or_else(|| snapshot.path_env().project_root.clone());
    for subject in subjects {
        let Some(profile) = snapshot
            .profiles()
            .get(&subject.tool)
            .filter(|p| p.matcher == MatcherKind::Path)
        else {
            continue;
        };
        let field = subject.args.get(&profile.field).cloned();
        resolve_one(snapshot, call, field.as_ref(), &cwd);
    }
}

/// Resolves one path argument and records it when it differs from its lexical form.
fn resolve_one(
    snapshot: &PolicySnapshot,
    call: &mut Call,
    field: Option<&serde_json::Value>,
    cwd: &Path,
) {
    if let Value::Path { lexical, .. } =
        Value::prepare(MatcherKind::Path, field, cwd, snapshot.path_env(), None)
        && let Some(resolved) = resolve_existing(Path::new(&lexical))
    {
        let resolved = resolved.to_string_lossy().into_owned();
        if resolved != lexical {
            call.resolved_paths.insert(lexical, resolved);
        }
    }
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
