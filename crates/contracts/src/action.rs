//! What an action is: a reference to it, its resolved descriptor, and its hints.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ContractError;

/// The longest action name accepted, in bytes.
pub const MAX_ACTION_NAME_LEN: usize = 128;

/// Checks an action name: 1–128 bytes of ASCII letters, digits, `_`, `-` and `.`.
///
/// MCP tools are named `{server}__{tool}`, which this alphabet covers.
pub fn check_action_name(name: &str) -> Result<(), ContractError> {
    if name.is_empty() || name.len() > MAX_ACTION_NAME_LEN {
        return Err(ContractError::invalid(
            "action name",
            name,
            "must be 1 to 128 bytes long",
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Err(ContractError::invalid(
            "action name",
            name,
            "may contain only ASCII letters, digits, `_`, `-` and `.`",
        ));
    }
    Ok(())
}

/// A declared reference to an action, as a caller names it: a name (canonical or alias) and,
/// optionally, the version it expects. The registry resolves it to an [`ActionDescriptor`].
///
/// ```
/// use warden_contracts::ActionRef;
/// let r = ActionRef::new("bash").unwrap();
/// assert_eq!(r.name(), "bash");
/// assert!(ActionRef::new("not a name").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, try_from = "ActionRefWire")]
pub struct ActionRef {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ActionRefWire {
    name: String,
    #[serde(default)]
    version: Option<String>,
}

impl TryFrom<ActionRefWire> for ActionRef {
    type Error = ContractError;
    fn try_from(w: ActionRefWire) -> Result<Self, Self::Error> {
        let r = Self::new(w.name)?;
        match w.version {
            Some(v) => r.with_version(v),
            None => Ok(r),
        }
    }
}

impl ActionRef {
    /// A reference by name, any version.
    pub fn new(name: impl Into<String>) -> Result<Self, ContractError> {
        let name = name.into();
        check_action_name(&name)?;
        Ok(Self {
            name,
            version: None,
        })
    }

    /// The same reference, pinned to `version` (non-empty).
    pub fn with_version(mut self, version: impl Into<String>) -> Result<Self, ContractError> {
        let version = version.into();
        if version.trim().is_empty() {
            return Err(ContractError::invalid(
                "action version",
                &version,
                "must not be empty",
            ));
        }
        self.version = Some(version);
        Ok(self)
    }

    /// The name as the caller wrote it (canonical or alias).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The version the caller expects, if any.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }
}

/// Where an action comes from. MCP provenance names the server, so a server's trust decides
/// whether its hints are believed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ActionSource {
    /// Shipped with Warden. (An empty struct variant, so that unknown fields are refused.)
    Builtin {},
    /// Registered by a plugin (a library user's own tool).
    Plugin {
        /// The plugin's name.
        plugin: String,
    },
    /// Discovered from an MCP server.
    Mcp {
        /// The server's configured name.
        server: String,
    },
}

/// What a tool says about the effects of a call. Every hint is optional, and a hint left out
/// assumes the worst: not read-only, destructive, not idempotent, open-world.
///
/// `read_only` implies not destructive and idempotent; contradictory hints (read-only *and*
/// destructive) resolve to the worst case. [`Hints::effective`] applies these rules.
///
/// ```
/// use warden_contracts::Hints;
/// assert!(Hints::default().effective().destructive);
/// let ro = Hints { read_only: Some(true), ..Hints::default() }.effective();
/// assert!(ro.read_only && !ro.destructive && ro.idempotent);
/// let both = Hints { read_only: Some(true), destructive: Some(true), ..Hints::default() };
/// assert!(!both.effective().read_only && both.effective().destructive);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Hints {
    /// The call does not modify its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// The call may perform destructive updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// Repeating the call with the same arguments has no additional effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// The call may interact with an open world of external entities (the network).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

/// [`Hints`] with the worst-case rules applied: every field is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EffectiveHints {
    /// Known not to modify anything.
    pub read_only: bool,
    /// May destroy data.
    pub destructive: bool,
    /// Safe to repeat.
    pub idempotent: bool,
    /// May reach beyond the local machine.
    pub open_world: bool,
}

impl Hints {
    /// Resolves missing and contradictory hints to the worst case.
    pub fn effective(&self) -> EffectiveHints {
        let contradictory = self.read_only == Some(true) && self.destructive == Some(true);
        let read_only = self.read_only == Some(true) && !contradictory;
        EffectiveHints {
            read_only,
            destructive: !read_only && self.destructive != Some(false),
            idempotent: read_only || (self.idempotent == Some(true) && !contradictory),
            open_world: self.open_world != Some(false),
        }
    }

    /// Hints that claim nothing (everything assumed worst).
    pub const UNKNOWN: Hints = Hints {
        read_only: None,
        destructive: None,
        idempotent: None,
        open_world: None,
    };
}

/// A resolved action: its canonical identity, aliases, version, provenance, hints and input
/// schema. Produced by the executor's registry; it describes a callable and never invokes one.
///
/// ```
/// use warden_contracts::{ActionDescriptor, ActionSource, Hints};
/// let d = ActionDescriptor::new("read", "1", ActionSource::Builtin {})
///     .unwrap()
///     .with_aliases(["cat"])
///     .unwrap()
///     .with_hints(Hints { read_only: Some(true), ..Hints::default() });
/// assert!(d.answers_to("cat") && d.answers_to("read") && !d.answers_to("write"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, try_from = "ActionDescriptorWire")]
pub struct ActionDescriptor {
    name: String,
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    aliases: BTreeSet<String>,
    version: String,
    source: ActionSource,
    #[serde(default)]
    hints: Hints,
    #[serde(default = "any_object_schema")]
    input_schema: Value,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    description: String,
}

fn any_object_schema() -> Value {
    serde_json::json!({"type": "object"})
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ActionDescriptorWire {
    name: String,
    #[serde(default)]
    aliases: BTreeSet<String>,
    version: String,
    source: ActionSource,
    #[serde(default)]
    hints: Hints,
    #[serde(default = "any_object_schema")]
    input_schema: Value,
    #[serde(default)]
    description: String,
}

impl TryFrom<ActionDescriptorWire> for ActionDescriptor {
    type Error = ContractError;
    fn try_from(w: ActionDescriptorWire) -> Result<Self, Self::Error> {
        Ok(Self::new(w.name, w.version, w.source)?
            .with_aliases(w.aliases)?
            .with_hints(w.hints)
            .with_input_schema(w.input_schema)?
            .with_description(w.description))
    }
}

impl ActionDescriptor {
    /// A descriptor with no aliases, unknown hints and a schema accepting any object.
    pub fn new(
        name: impl Into<String>,
        version: impl Into<String>,
        source: ActionSource,
    ) -> Result<Self, ContractError> {
        let name = name.into();
        check_action_name(&name)?;
        let version = version.into();
        if version.trim().is_empty() {
            return Err(ContractError::invalid(
                "action version",
                &version,
                "must not be empty",
            ));
        }
        Ok(Self {
            name,
            aliases: BTreeSet::new(),
            version,
            source,
            hints: Hints::UNKNOWN,
            input_schema: any_object_schema(),
            description: String::new(),
        })
    }

    /// Adds aliases; each must be a valid action name other than the canonical one.
    pub fn with_aliases<I, S>(mut self, aliases: I) -> Result<Self, ContractError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for alias in aliases {
            let alias = alias.into();
            check_action_name(&alias)?;
            if alias == self.name {
                return Err(ContractError::invalid(
                    "alias",
                    &alias,
                    "must differ from the canonical name",
                ));
            }
            self.aliases.insert(alias);
        }
        Ok(self)
    }

    /// Sets the static hints.
    pub fn with_hints(mut self, hints: Hints) -> Self {
        self.hints = hints;
        self
    }

    /// Sets the JSON Schema of the arguments; it must be a JSON object (or `true`).
    pub fn with_input_schema(mut self, schema: Value) -> Result<Self, ContractError> {
        match schema {
            Value::Object(_) | Value::Bool(true) => {
                self.input_schema = schema;
                Ok(self)
            }
            other => Err(ContractError::invalid(
                "input schema",
                &other.to_string(),
                "must be a JSON Schema object",
            )),
        }
    }

    /// Sets the human description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// The canonical name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Other names that resolve to this action.
    pub fn aliases(&self) -> &BTreeSet<String> {
        &self.aliases
    }
    /// The version.
    pub fn version(&self) -> &str {
        &self.version
    }
    /// Where the action comes from.
    pub fn source(&self) -> &ActionSource {
        &self.source
    }
    /// The static hints.
    pub fn hints(&self) -> Hints {
        self.hints
    }
    /// The JSON Schema of the arguments.
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }
    /// The human description.
    pub fn description(&self) -> &str {
        &self.description
    }
    /// Whether `name` is the canonical name or one of the aliases.
    pub fn answers_to(&self, name: &str) -> bool {
        self.name == name || self.aliases.contains(name)
    }
}
