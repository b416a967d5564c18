//! The workspace: the one directory the file tools may change. Relative paths in arguments
//! resolve under it. Writes and edits must stay inside it: `..` climbing out, an absolute path
//! elsewhere and a symlink pointing out are refused, before the tool runs (its precondition) and again
//! when it runs. Reads and listings go anywhere, like the subprocess backend's read roots: which
//! paths may be read is the policy's to decide (`read(...)` rules).

use std::path::{Component, Path, PathBuf};

use crate::error::ToolsError;

/// A workspace root, canonical (absolute, symlinks resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// Opens `root`, which must be an existing directory.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, ToolsError> {
        let root = root.as_ref();
        let canonical = std::fs::canonicalize(root).map_err(|e| ToolsError::Workspace {
            path: root.display().to_string(),
            message: e.to_string(),
        })?;
        if !canonical.is_dir() {
            return Err(ToolsError::Workspace {
                path: root.display().to_string(),
                message: "not a directory".into(),
            });
        }
        Ok(Self { root: canonical })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path a read or a listing of `path` touches: relative to the root, or absolute,
    /// normalized lexically (`.` and `..` folded). Never refused for leaving the workspace;
    /// only an empty path or a NUL byte is.
    pub fn resolve_read(&self, path: &str) -> Result<PathBuf, String> {
        self.lexical(path)
    }

    /// Resolves a path to be written or edited to a path inside the workspace, or says why it
    /// is outside. Lexical first (`..` may not climb out, an absolute path must lie under the
    /// root), then the longest existing ancestor is canonicalized, so a symlink anywhere on the
    /// way (the target itself included) that points out is refused too. A dangling symlink as
    /// the last component resolves to the link itself, which a write replaces.
    pub fn resolve_write(&self, path: &str) -> Result<PathBuf, String> {
        let lexical = self.lexical(path)?;
        if !lexical.starts_with(&self.root) {
            return Err(format!(
                "`{path}` is outside the workspace {}",
                self.root.display()
            ));
        }
        let mut existing = lexical.clone();
        let mut rest = Vec::new();
        let resolved = loop {
            match std::fs::canonicalize(&existing) {
                Ok(r) => break r,
                Err(_) => {
                    let Some(name) = existing.file_name().map(ToOwned::to_owned) else {
                        return Err(format!("`{path}` cannot be resolved"));
                    };
                    rest.push(name);
                    if !existing.pop() {
                        return Err(format!("`{path}` cannot be resolved"));
                    }
                }
            }
        };
        if !resolved.starts_with(&self.root) {
            return Err(format!(
                "`{path}` resolves (through a symlink) outside the workspace {}",
                self.root.display()
            ));
        }
        let mut out = resolved;
        for part in rest.iter().rev() {
            out.push(part);
        }
        Ok(out)
    }

    fn lexical(&self, path: &str) -> Result<PathBuf, String> {
        if path.is_empty() {
            return Err("the path is empty".into());
        }
        if path.contains('\0') {
            return Err("the path contains a NUL byte".into());
        }
        let given = Path::new(path);
        let joined = if given.is_absolute() {
            given.to_path_buf()
        } else {
            self.root.join(given)
        };
        let mut lexical = PathBuf::new();
        for c in joined.components() {
            match c {
                Component::Prefix(_) | Component::RootDir => lexical.push(c.as_os_str()),
                Component::CurDir => {}
                Component::ParentDir => {
                    if !lexical.pop() {
                        return Err(format!("`{path}` climbs above the file-system root"));
                    }
                }
                Component::Normal(n) => lexical.push(n),
            }
        }
        Ok(lexical)
    }
}
