//! Who and where: execution scopes, principals, tenants, and references to a policy snapshot, an
//! effect backend and evidence.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::error::ContractError;
use crate::ids::{AttemptId, ChainId, PrincipalId, RecordId, RunId, ScopeId, TenantId};

/// The owner of an operation: a closed tagged union.
///
/// An ephemeral scope is correlation only and can never be read as a run: [`Self::run_id`]
/// returns `None` for it, and its id is a [`ScopeId`], a different type from [`RunId`]. A durable
/// scope holds the only run claim a request can make.
///
/// ```
/// use warden_contracts::{ExecutionScopeRef, ScopeId, RunId};
/// let e = ExecutionScopeRef::Ephemeral { scope_id: ScopeId::new("s-1").unwrap() };
/// assert!(e.run_id().is_none());
/// let d = ExecutionScopeRef::DurableRun { run_id: RunId::new("r-1").unwrap(), owner_attempt_id: None };
/// assert_eq!(d.run_id().map(|r| r.as_str()), Some("r-1"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ExecutionScopeRef {
    /// A one-off operation with no run: correlation only.
    Ephemeral {
        /// Correlation id; never resolvable as a run.
        scope_id: ScopeId,
    },
    /// An operation inside a durable run.
    DurableRun {
        /// The run: the sole run claim.
        run_id: RunId,
        /// The already-created attempt that encloses this operation, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner_attempt_id: Option<AttemptId>,
    },
}

impl ExecutionScopeRef {
    /// The run this scope belongs to; `None` for an ephemeral scope, always.
    pub fn run_id(&self) -> Option<&RunId> {
        match self {
            Self::Ephemeral { .. } => None,
            Self::DurableRun { run_id, .. } => Some(run_id),
        }
    }

    /// Whether this is an ephemeral (run-less) scope.
    pub fn is_ephemeral(&self) -> bool {
        matches!(self, Self::Ephemeral { .. })
    }

    /// A short stable description, used in mismatch errors.
    pub fn describe(&self) -> String {
        match self {
            Self::Ephemeral { scope_id } => format!("ephemeral scope {scope_id}"),
            Self::DurableRun {
                run_id,
                owner_attempt_id: Some(a),
            } => format!("durable run {run_id} (attempt {a})"),
            Self::DurableRun { run_id, .. } => format!("durable run {run_id}"),
        }
    }
}

/// What kind of actor a principal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PrincipalKind {
    /// A person.
    User,
    /// A service account or automation.
    Service,
    /// An AI agent acting for someone.
    Agent,
    /// A local, unauthenticated operator (a developer's own machine).
    Local,
    /// Explicitly anonymous.
    Anonymous,
}

/// A principal. In a request it is only a *claim*; only an [`crate::ExecutionContext`] built by
/// a trusted ingress makes it authenticated.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrincipalRef {
    /// The principal's id.
    pub id: PrincipalId,
    /// What kind of actor it is.
    pub kind: PrincipalKind,
}

/// A tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantRef {
    /// The tenant's id.
    pub id: TenantId,
}

/// A reference to a compiled policy snapshot. Contracts hold references, never declarations.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicySnapshotRef {
    /// The policy's id.
    pub policy_id: String,
    /// The policy's version.
    pub version: String,
    /// The digest of the snapshot's canonical form.
    pub digest: Digest,
}

/// A reference to an effect backend (where a tool's effects happen).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, try_from = "BackendRefWire")]
pub struct BackendRef {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    capability_digest: Option<Digest>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BackendRefWire {
    name: String,
    #[serde(default)]
    capability_digest: Option<Digest>,
}

impl TryFrom<BackendRefWire> for BackendRef {
    type Error = ContractError;
    fn try_from(w: BackendRefWire) -> Result<Self, Self::Error> {
        let mut b = Self::new(w.name)?;
        b.capability_digest = w.capability_digest;
        Ok(b)
    }
}

impl BackendRef {
    /// A backend by name (`in_process`, `subprocess`, …).
    pub fn new(name: impl Into<String>) -> Result<Self, ContractError> {
        let name = name.into();
        crate::action::check_action_name(&name)
            .map_err(|_| ContractError::invalid("backend name", &name, "must be a plain name"))?;
        Ok(Self {
            name,
            capability_digest: None,
        })
    }

    /// The same reference bound to the digest of the backend's capability report.
    pub fn with_capability_digest(mut self, digest: Digest) -> Self {
        self.capability_digest = Some(digest);
        self
    }

    /// The backend's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The digest of the capability report this reference was bound to, if any.
    pub fn capability_digest(&self) -> Option<&Digest> {
        self.capability_digest.as_ref()
    }
}

/// A reference to one evidence record.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceRef {
    /// The chain holding the record.
    pub chain_id: ChainId,
    /// The record.
    pub record_id: RecordId,
    /// The record's chain hash, binding the reference to its content.
    pub chain_hash: Digest,
}
