//! Loading policies the way the `warden` command does: files merged as sources, each with the
//! role its flag gives it (`--managed`, `--policy`, `--user`, `--untrusted`), relative path
//! patterns anchored at `--project-root` when given, else `$CLAUDE_PROJECT_DIR` when set, else
//! the first project file's folder (else the first file's).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use warden_policy::{LoadedPolicy, PathEnv, PolicySnapshot, Role, Scope, ScopeSet};

/// A policy file to load and the role it speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PolicyPath {
    /// The file.
    pub(crate) path: PathBuf,
    /// Who it speaks for, as the command line says.
    pub(crate) role: Role,
}

impl PolicyPath {
    /// Each of `paths`, in order, speaking for `role`.
    pub(crate) fn each(paths: &[PathBuf], role: Role) -> impl Iterator<Item = Self> + '_ {
        paths.iter().map(move |path| Self {
            path: path.clone(),
            role,
        })
    }

    /// The command-line flag that loads a file of this role.
    pub(crate) fn flag(&self) -> &'static str {
        match self.role {
            Role::Managed => "--managed",
            Role::Project => "--policy",
            Role::User => "--user",
            Role::Untrusted => "--untrusted",
        }
    }
}

/// The folder relative patterns default to: the first project file's, else the first file's.
fn anchor(files: &[PolicyPath]) -> Option<&Path> {
    files
        .iter()
        .find(|f| f.role == Role::Project)
        .or(files.first())
        .map(|f| f.path.as_path())
}

use crate::error::CliError;

/// An absolute form of `path` (joined to the current directory; not resolved).
pub(crate) fn absolute(path: &Path) -> Result<PathBuf, CliError> {
    std::path::absolute(path).map_err(|e| CliError::Input(format!("{}: {e}", path.display())))
}

/// The path environment for these policy files: relative patterns anchored at `project_root`
/// when given, else `$CLAUDE_PROJECT_DIR` when set, else the folder of `first` (a policy file).
pub(crate) fn path_env(
    first: Option<&Path>,
    project_root: Option<&Path>,
) -> Result<PathEnv, CliError> {
    let from_env = std::env::var_os("CLAUDE_PROJECT_DIR").filter(|d| !d.is_empty());
    let project_root = match (project_root, from_env) {
        (Some(dir), _) => absolute(dir)?,
        (None, Some(dir)) => absolute(Path::new(&dir))?,
        (None, None) => {
            let first = first.ok_or_else(no_files)?;
            let abs = absolute(first)?;
            abs.parent().map(Path::to_path_buf).unwrap_or(abs)
        }
    };
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    Ok(PathEnv { project_root, home })
}

/// A SQLite store's files (the database and the journals beside it), each named `what`: the
/// files a runtime protects from the agent it governs.
pub(crate) fn store_files<'a>(path: Option<&Path>, what: &'a str) -> Vec<(PathBuf, &'a str)> {
    let Some(path) = path else {
        return Vec::new();
    };
    ["", "-wal", "-shm", "-journal"]
        .into_iter()
        .map(|suffix| {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            (PathBuf::from(p), what)
        })
        .collect()
}

fn no_files() -> CliError {
    CliError::Input(
        "no policy file given: pass --policy FILE (or --managed, --user, --untrusted)".into(),
    )
}

/// The project root these policy files resolve against (`--project-root`, else as
/// [`path_env`] finds it), without reading or compiling them.
pub(crate) fn project_root(
    files: &[PolicyPath],
    project_root: Option<&Path>,
) -> Result<PathBuf, CliError> {
    Ok(path_env(anchor(files), project_root)?.project_root)
}

/// Reads, merges and compiles the policy files.
pub(crate) fn snapshot(
    files: &[PolicyPath],
    project_root: Option<&Path>,
) -> Result<PolicySnapshot, CliError> {
    let env = path_env(anchor(files), project_root)?;
    Ok(PolicySnapshot::from_files(&read(files)?, env)?)
}

/// Reads, merges and compiles the policy files, protecting `extra` files (what the runtime
/// keeps: the evidence store, the journal) from the governed agent as it protects the
/// policy files.
pub(crate) fn snapshot_protecting(
    files: &[PolicyPath],
    project_root: Option<&Path>,
    extra: &[(PathBuf, &str)],
) -> Result<PolicySnapshot, CliError> {
    let env = path_env(anchor(files), project_root)?;
    let mut builder = warden_policy::PolicyBuilder::new().path_env(env);
    for file in read(files)? {
        builder = builder.file(&file)?;
    }
    for (path, what) in extra {
        builder = builder.protect(path, *what);
    }
    Ok(builder.build()?)
}

/// Reads the policy files and composes them as scopes; the scope `name` (the root's id names
/// the root).
pub(crate) fn scope(
    files: &[PolicyPath],
    project_root: Option<&Path>,
    name: &str,
) -> Result<Arc<Scope>, CliError> {
    let env = path_env(anchor(files), project_root)?;
    let set = ScopeSet::from_files(&read(files)?, env)?;
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

/// The path environment of these policy files (as [`path_env`] finds it).
pub(crate) fn env_for(
    files: &[PolicyPath],
    project_root: Option<&Path>,
) -> Result<PathEnv, CliError> {
    if files.is_empty() {
        return Err(no_files());
    }
    path_env(anchor(files), project_root)
}

/// The path environment of these policy files (as [`path_env`] finds it) and the files, read.
pub(crate) fn read_with_env(
    files: &[PolicyPath],
    project_root: Option<&Path>,
) -> Result<(PathEnv, Vec<LoadedPolicy>), CliError> {
    let env = path_env(anchor(files), project_root)?;
    Ok((env, read(files)?))
}

fn read(files: &[PolicyPath]) -> Result<Vec<LoadedPolicy>, CliError> {
    if files.is_empty() {
        return Err(no_files());
    }
    Ok(files
        .iter()
        .map(|f| LoadedPolicy::read(&f.path).map(|p| p.with_role(f.role)))
        .collect::<Result<Vec<_>, _>>()?)
}
