//! The registry and resolver (docs/design/executor.md#registry-and-resolution): canonical identity,
//! aliases, version and source provenance, input schema and hints. It resolves a declared
//! [`ActionRef`] to one registered action; it never invokes anything (it has no way to: invoking
//! needs a token only the executor mints).
//!
//! Collisions are refused at registration: a name (canonical or alias) already taken, or one
//! that differs from a taken name only by letter case (`Bash` against `bash`), so a model can
//! never reach a different tool by changing case, and no later registration silently shadows an
//! earlier one.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};
use warden_contracts::{ActionDescriptor, ActionRef, Hints};

use crate::error::ExecutorError;
use crate::tool::Tool;

/// One registered action: the callable, its descriptor and its compiled input schema.
pub(crate) struct Entry {
    pub(crate) tool: Arc<dyn Tool>,
    pub(crate) descriptor: ActionDescriptor,
    pub(crate) validator: jsonschema::Validator,
}

/// A resolved action, as the registry describes it: the descriptor, never the callable.
#[derive(Clone)]
pub struct Resolved {
    pub(crate) entry: Arc<Entry>,
}

impl Resolved {
    /// The resolved descriptor (canonical name, aliases, version, provenance, hints, schema).
    pub fn descriptor(&self) -> &ActionDescriptor {
        &self.entry.descriptor
    }

    /// The tool's hints for one call ([`Tool::hints_for`]). Arguments that fail the input
    /// schema get the descriptor's static hints: a tool only refines hints for a call it could
    /// run.
    pub fn hints_for(&self, arguments: &Map<String, Value>) -> Hints {
        let value = Value::Object(arguments.clone());
        if self.entry.validator.is_valid(&value) {
            self.entry.tool.hints_for(arguments)
        } else {
            self.entry.descriptor.hints()
        }
    }
}

impl fmt::Debug for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Resolved")
            .field(&self.entry.descriptor.name())
            .finish()
    }
}

/// Registered actions, by canonical name and alias. Build it, then hand it to the executor,
/// which freezes it: a tool registered after that would have no plan, so there is no way to.
///
/// ```
/// use std::sync::Arc;
/// use warden_contracts::{ActionDescriptor, ActionRef, ActionSource};
/// use warden_executor::{InvocationToken, Registry, Tool, ToolError};
///
/// struct Echo(ActionDescriptor);
/// #[async_trait::async_trait]
/// impl Tool for Echo {
///     fn descriptor(&self) -> &ActionDescriptor { &self.0 }
///     async fn invoke(&self, _: InvocationToken, args: serde_json::Value)
///         -> Result<serde_json::Value, ToolError> { Ok(args) }
/// }
/// let echo = ActionDescriptor::new("echo", "1", ActionSource::Builtin {})?.with_aliases(["say"])?;
/// let mut registry = Registry::new();
/// registry.register(Arc::new(Echo(echo.clone())))?;
/// assert_eq!(registry.resolve(&ActionRef::new("say")?)?.descriptor().name(), "echo");
/// // A name differing only by case is a collision.
/// let clash = ActionDescriptor::new("Echo", "1", ActionSource::Builtin {})?;
/// assert!(registry.register(Arc::new(Echo(clash))).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Default)]
pub struct Registry {
    /// Every name (canonical and alias), exactly as registered → entry.
    by_name: HashMap<String, Arc<Entry>>,
    /// Lower-cased name → the name as registered, for case collisions.
    folded: HashMap<String, String>,
    /// Canonical names in registration order.
    order: Vec<String>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("actions", &self.order)
            .finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a tool under its descriptor's canonical name and aliases. Refuses a taken
    /// name (also up to letter case) and an input schema that does not compile; on refusal
    /// nothing is registered.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), ExecutorError> {
        let descriptor = tool.descriptor().clone();
        let names: Vec<&str> = std::iter::once(descriptor.name())
            .chain(descriptor.aliases().iter().map(String::as_str))
            .collect();
        for name in &names {
            let folded = name.to_lowercase();
            if let Some(existing) = self.folded.get(&folded) {
                let owner = self
                    .by_name
                    .get(existing)
                    .map(|e| e.descriptor.name().to_owned())
                    .unwrap_or_else(|| existing.clone());
                return Err(ExecutorError::Collision {
                    name: (*name).to_owned(),
                    existing: existing.clone(),
                    owner,
                });
            }
        }
        // Aliases that collide with each other only by case (`ls`, `LS`).
        let mut seen = std::collections::HashSet::new();
        for name in &names {
            if !seen.insert(name.to_lowercase()) {
                return Err(ExecutorError::Collision {
                    name: (*name).to_owned(),
                    existing: (*name).to_owned(),
                    owner: descriptor.name().to_owned(),
                });
            }
        }
        let validator = jsonschema::validator_for(descriptor.input_schema()).map_err(|e| {
            ExecutorError::InvalidSchema {
                action: descriptor.name().to_owned(),
                message: e.to_string(),
            }
        })?;
        let names: Vec<String> = names.into_iter().map(str::to_owned).collect();
        let canonical = descriptor.name().to_owned();
        let entry = Arc::new(Entry {
            tool,
            descriptor,
            validator,
        });
        for name in names {
            self.folded.insert(name.to_lowercase(), name.clone());
            self.by_name.insert(name, entry.clone());
        }
        tracing::debug!(action = %canonical, "registered action");
        self.order.push(canonical);
        Ok(())
    }

    /// Resolves a reference (canonical name or alias, exact case; optional version) to its
    /// action.
    pub fn resolve(&self, action: &ActionRef) -> Result<Resolved, ExecutorError> {
        self.entry(action).map(|entry| Resolved { entry })
    }

    pub(crate) fn entry(&self, action: &ActionRef) -> Result<Arc<Entry>, ExecutorError> {
        let entry =
            self.by_name
                .get(action.name())
                .ok_or_else(|| ExecutorError::UnknownAction {
                    name: action.name().to_owned(),
                })?;
        if let Some(v) = action.version()
            && v != entry.descriptor.version()
        {
            return Err(ExecutorError::VersionMismatch {
                name: action.name().to_owned(),
                requested: v.to_owned(),
                registered: entry.descriptor.version().to_owned(),
            });
        }
        Ok(entry.clone())
    }

    /// Every registered action's descriptor, in registration order.
    pub fn descriptors(&self) -> impl Iterator<Item = &ActionDescriptor> {
        self.order
            .iter()
            .filter_map(|n| self.by_name.get(n))
            .map(|e| &e.descriptor)
    }

    /// How many actions are registered.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}
