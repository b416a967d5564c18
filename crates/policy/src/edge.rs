//! The edge: the one place in this crate that touches the file system, and only before a
//! decision, never during one. It resolves symlinks in a call's paths so the pure engine can
//! match both the lexical and the resolved path (deny and ask match either; allow needs both).

use std::path::{Component, Path, PathBuf};

use crate::compile::PolicySnapshot;
use crate::engine::Call;
use crate::matcher::{MatcherKind, Value};

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

/// Fills `call.resolved_paths` for the call's path argument, when its tool matches paths.
pub fn resolve_call_paths(snapshot: &PolicySnapshot, call: &mut Call) {
    let Some(profile) = snapshot.profiles().get(&call.tool) else {
        return;
    };
    if profile.matcher != MatcherKind::Path {
        return;
    }
    let cwd = call
        .cwd
        .clone()
        .unwrap_or_else(|| snapshot.path_env().project_root.clone());
    let field = call.args.get(&profile.field);
    if let Value::Path { lexical, .. } =
        Value::prepare(MatcherKind::Path, field, &cwd, snapshot.path_env(), None)
        && let Some(resolved) = resolve_existing(Path::new(&lexical))
    {
        let resolved = resolved.to_string_lossy().into_owned();
        if resolved != lexical {
            call.resolved_paths.insert(lexical, resolved);
        }
    }
}
