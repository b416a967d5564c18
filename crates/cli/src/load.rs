//! Loading policies the way the `warden` command does: files merged as sources, relative path
//! patterns anchored at `$CLAUDE_PROJECT_DIR` when set, else the first policy file's folder.

use std::path::{Path, PathBuf};

use warden_policy::{LoadedPolicy, PathEnv, PolicySnapshot};

use crate::error::CliError;

/// An absolute form of `path` (joined to the current directory; not resolved).
pub(crate) fn absolute(path: &Path) -> Result<PathBuf, CliError> {
    std::path::absolute(path).map_err(|e| CliError::Input(format!("{}: {e}", path.display())))
}

/// The path environment for these policy files.
pub(crate) fn path_env(policies: &[PathBuf]) -> Result<PathEnv, CliError> {
    let project_root = match std::env::var_os("CLAUDE_PROJECT_DIR") {
        Some(dir) if !dir.is_empty() => absolute(Path::new(&dir))?,
        _ => {
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
pub(crate) fn snapshot(policies: &[PathBuf]) -> Result<PolicySnapshot, CliError> {
    let env = path_env(policies)?;
    let loaded = policies
        .iter()
        .map(|p| LoadedPolicy::read(p))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PolicySnapshot::from_files(&loaded, env)?)
}
