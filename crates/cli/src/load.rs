//! Loading policies the way the `warden` command does: files merged as sources, relative path
//! patterns anchored at `--project-root` when given, else `$CLAUDE_PROJECT_DIR` when set, else the
//! first policy file's folder.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use warden_policy::{LoadedPolicy, PathEnv, PolicySnapshot, Scope, ScopeSet};

use crate::error::CliError;

/// An absolute form of `path` (joined to the current directory; not resolved).
pub(crate) fn absolute(path: &Path) -> Result<PathBuf, CliError> {
    std::path::absolute(path).map_err(|e| CliError::Input(format!("{}: {e}", path.display())))
}

/// The path environment for these policy files: relative patterns anchored at `project_root`
/// when given, else `$CLAUDE_PROJECT_DIR` when set, else the first file's folder.
pub(crate) fn path_env(
    policies: &[PathBuf],
    project_root: Option<&Path>,
) -> Result<PathEnv, CliError> {
    let from_env = std::env::var_os("CLAUDE_PROJECT_DIR").filter(|d| !d.is_empty());
    let project_root = match (project_root, from_env) {
        (Some(dir), _) => absolute(dir)?,
        (None, Some(dir)) => absolute(Path::new(&dir))?,
        (None, None) => {
            let first = policies
                .first()
                .ok_or_else(|| CliError::Input("no --policy given".into()))?;
            let abs = absolute(first)?;
            abs.parent().map(Path::to_path_buf).unwrap_or(abs)
        }
    };
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    Ok(PathEnv { project_root, home })
}

/// Reads, merges and compiles the policy files.
pub(crate) fn snapshot(
    policies: &[PathBuf],
    project_root: Option<&Path>,
) -> Result<PolicySnapshot, CliError> {
    let env = path_env(policies, project_root)?;
    Ok(PolicySnapshot::from_files(&read(policies)?, env)?)
}

/// Reads the policy files and composes them as scopes; the scope `name` (the root's id names
/// the root).
pub(crate) fn scope(
    policies: &[PathBuf],
    project_root: Option<&Path>,
    name: &str,
) -> Result<Arc<Scope>, CliError> {
    let env = path_env(policies, project_root)?;
    let set = ScopeSet::from_files(&read(policies)?, env)?;
    if let Some(scope) = set.get(name) {
        return Ok(scope.clone());
    }
    let known: Vec<&str> = std::iter::once(set.root().name())
        .chain(set.children().map(|s| s.name()))
        .collect();
    Err(CliError::Input(format!(
        "--scope {name}: no such scope (the scopes are: {})",
        known.join(", ")
    )))
}

fn read(policies: &[PathBuf]) -> Result<Vec<LoadedPolicy>, CliError> {
    Ok(policies
        .iter()
        .map(|p| LoadedPolicy::read(p))
        .collect::<Result<Vec<_>, _>>()?)
}
