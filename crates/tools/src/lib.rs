//! The built-in tools (`read`, `write`, `edit`, `list`, `bash`), each a callable that only the
//! executor can invoke.
//!
//! Principal types: [`Workspace`] (the directory relative paths resolve under and the only
//! place `write` and `edit` may change), [`ReadTool`], [`ListTool`], [`WriteTool`],
//! [`EditTool`], [`BashTool`], and [`register_builtins_with`], which registers all five in an
//! executor's registry with the policy's `[containment]` table.
//!
//! Key design decision: every tool declares a strict JSON Schema (unknown arguments refused)
//! and honest static hints, and its path check is its precondition
//! (`warden_executor::Tool::precondition`), so a write or an edit outside the workspace is
//! refused by the executor's `preconditions` stage before policy or invocation, and checked
//! again inside `invoke`.
//! Reads go anywhere: which paths may be read is the policy's to decide, as it is for `bash`,
//! whose processes read everywhere too. The file tools work in this process (they spawn
//! nothing); `bash` is the one tool that runs processes, only through the effect backend it is
//! given, and claims no containment of its own: what is enforced is exactly what that
//! backend's capability report says, and the executor's preflight compares it with the policy
//! ([`PROCESS_TOOLS`] names the tools that need it). Outputs past a budget end with a marker
//! starting [`TRUNCATION_MARKER`].
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
//! assert_eq!(names, ["bash", "edit", "list", "read", "write"]);
//! // `bash` says, per call, whether a command only reads.
//! let bash = registry.resolve(&warden_contracts::ActionRef::new("bash").unwrap()).unwrap();
//! let args = |c: &str| serde_json::json!({"command": c}).as_object().unwrap().clone();
//! assert!(bash.hints_for(&args("git status && ls")).effective().read_only);
//! assert!(!bash.hints_for(&args("rm -rf build")).effective().read_only);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod bash;
mod error;
mod files;
mod output;
mod workspace;

use std::path::Path;
use std::sync::Arc;

use warden_contracts::EffectBackend;
use warden_executor::{Registry, Tool};
use warden_policy::Containment;

pub use bash::{BashTool, DEFAULT_BASH_TIMEOUT_MS, DEFAULT_MAX_OUTPUT_BYTES, MAX_BASH_TIMEOUT_MS};
pub use error::ToolsError;
pub use files::{
    DEFAULT_READ_LINES, EditTool, ListTool, MAX_LIST_ENTRIES, MAX_READ_OUTPUT_BYTES,
    MAX_WRITE_BYTES, ReadTool, WriteTool,
};
pub use output::TRUNCATION_MARKER;
pub use workspace::Workspace;

/// The version every built-in reports.
pub const BUILTIN_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The built-ins that run processes through the effect backend, and so the ones the policy's
/// `[containment]` requirements apply to (`ExecutorBuilder::policy_containment_for`).
pub const PROCESS_TOOLS: [&str; 1] = ["bash"];

/// The built-in tools over `workspace`, with `bash` running on `backend` and asking for the
/// containment `table` describes.
pub fn builtins(
    workspace: &Path,
    backend: Arc<dyn EffectBackend>,
    table: &Containment,
) -> Result<Vec<Arc<dyn Tool>>, ToolsError> {
    let workspace = Workspace::new(workspace)?;
    Ok(vec![
        Arc::new(BashTool::new(workspace.clone(), backend)?.with_containment(table.clone())),
        Arc::new(EditTool::new(workspace.clone())?),
        Arc::new(ListTool::new(workspace.clone())?),
        Arc::new(ReadTool::new(workspace.clone())?),
        Arc::new(WriteTool::new(workspace)?),
    ])
}

/// Registers `bash`, `edit`, `list`, `read` and `write` over `workspace` in `registry`, with
/// `bash` asking for the containment `table` describes.
pub fn register_builtins_with(
    registry: &mut Registry,
    workspace: &Path,
    backend: Arc<dyn EffectBackend>,
    table: &Containment,
) -> Result<(), ToolsError> {
    for tool in builtins(workspace, backend, table)? {
        let name = tool.descriptor().name().to_owned();
        registry.register(tool).map_err(|e| ToolsError::Register {
            tool: name,
            message: e.to_string(),
        })?;
    }
    Ok(())
}

/// [`register_builtins_with`] asking for full containment (the default `[containment]` table).
pub fn register_builtins(
    registry: &mut Registry,
    workspace: &Path,
    backend: Arc<dyn EffectBackend>,
) -> Result<(), ToolsError> {
    register_builtins_with(registry, workspace, backend, &Containment::default())
}
