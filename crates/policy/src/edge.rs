//! The edge: the one place in this crate that touches the file system, and only before a
//! decision, never during one. It resolves symlinks in a call's paths so the pure engine can
//! match both the lexical and the resolved path (deny and ask match either; allow needs both).

use std::path::{Component, Path, PathBuf};

use crate::compile::PolicySnapshot;
use crate::engine::Call;
use crate::matcher::{MatcherKind, Value};
use crate::shell::{self, ShellSubject};

/// Resolves symlinks in `path` (absolute): the longest existing ancestor is canonicalized and
/// the rest is appended. Returns `None` when nothing along the path exists or resolves.
pub fn resolve_existing(path: &Path) -> Option<PathBuf> {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(resolved) = std::fs::canonicalize(&existing) {
            let mut out = resolved;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return Some(out);
        }
        let name = existing.file_name()?.to_owned();
        rest.push(name);
        if !existing.pop() {
            return None;
        }
        if existing
            .components()
            .all(|c| matches!(c, Component::RootDir))
        {
            return None;
        }
    }
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
