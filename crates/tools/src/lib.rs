//! The built-in tools (`read`, `write`, `bash`; `edit` and `list` follow), each a callable that
//! only the executor can invoke.
//!
//! Principal types: [`Workspace`] (the directory file paths resolve under), [`ReadTool`],
//! [`WriteTool`], [`BashTool`], and [`register_builtins`], which registers all three in an
//! executor's registry.
//!
//! Key design decision: every tool declares a strict JSON Schema (unknown arguments refused)
//! and honest static hints, and its path check is its intrinsic guard
//! (`warden_executor::Tool::guard`), so a path outside the workspace is refused by the executor's
//! guard stage before policy or invocation, and checked again inside `invoke`. `bash` runs
//! through the effect backend it is given and claims no containment of its own: what is
//! enforced is exactly what that backend's capability report says. This is a first version;
//! the next issue completes and hardens these tools.
//!
//! **Invariant:** every effect of a built-in tool happens inside its `invoke`, reached only through the executor.
//!
//! **Must never:** run anything except through the executor's callable trait and the selected effect backend.
//!
//! ```
//! use std::sync::Arc;
//! let dir = tempfile::tempdir().unwrap();
//! let mut registry = warden_executor::Registry::new();
//! warden_tools::register_builtins(
//!     &mut registry,
//!     dir.path(),
//!     Arc::new(warden_sandbox::InProcessBackend::new()),
//! ).unwrap();
//! let names: Vec<&str> = registry.descriptors().map(|d| d.name()).collect();
//! assert_eq!(names, ["bash", "read", "write"]);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod bash;
mod error;
mod files;
mod workspace;

use std::path::Path;
use std::sync::Arc;

use warden_contracts::EffectBackend;
use warden_executor::{Registry, Tool};

pub use bash::{BashTool, DEFAULT_BASH_TIMEOUT_MS, DEFAULT_MAX_OUTPUT_BYTES};
pub use error::ToolsError;
pub use files::{MAX_READ_BYTES, ReadTool, WriteTool};
pub use workspace::Workspace;

/// The version every built-in reports.
pub const BUILTIN_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The built-in tools over `workspace`, with `bash` running on `backend`.
pub fn builtins(
    workspace: &Path,
    backend: Arc<dyn EffectBackend>,
) -> Result<Vec<Arc<dyn Tool>>, ToolsError> {
    let workspace = Workspace::new(workspace)?;
    Ok(vec![
        Arc::new(BashTool::new(workspace.clone(), backend)?),
        Arc::new(ReadTool::new(workspace.clone())?),
        Arc::new(WriteTool::new(workspace)?),
    ])
}

/// Registers `bash`, `read` and `write` over `workspace` in `registry`.
pub fn register_builtins(
    registry: &mut Registry,
    workspace: &Path,
    backend: Arc<dyn EffectBackend>,
) -> Result<(), ToolsError> {
    for tool in builtins(workspace, backend)? {
        let name = tool.descriptor().name().to_owned();
        registry.register(tool).map_err(|e| ToolsError::Register {
            tool: name,
            message: e.to_string(),
        })?;
    }
    Ok(())
}
