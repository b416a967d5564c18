//! What is asked and under whose authority: [`ExecutionRequest`] and [`ExecutionContext`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::action::ActionRef;
use crate::error::ContractError;
use crate::ids::{ContextId, RequestId, SessionId, Timestamp};
use crate::scope::{
    BackendRef, EvidenceRef, ExecutionScopeRef, PolicySnapshotRef, PrincipalRef, TenantRef,
};

/// The longest idempotency key accepted, in bytes.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 256;

/// One request to run one action: immutable once built.
///
/// Everything in it is a claim from the caller. The principal claim is untrusted policy input
/// until an [`ExecutionContext`] binds it ([`ExecutionContext::check_request`]).
///
/// ```
/// use warden_contracts::{ActionRef, ExecutionRequest, ExecutionScopeRef, RequestId, ScopeId};
/// let req = ExecutionRequest::new(
///     RequestId::new("req-1").unwrap(),
///     ActionRef::new("bash").unwrap(),
///     serde_json::json!({"command": "git status"}),
///     ExecutionScopeRef::Ephemeral { scope_id: ScopeId::new("s-1").unwrap() },
/// )
/// .unwrap();
/// assert_eq!(req.arguments()["command"], "git status");
/// // Arguments must be a JSON object.
/// assert!(ExecutionRequest::new(
///     RequestId::new("req-2").unwrap(),
///     ActionRef::new("bash").unwrap(),
///     serde_json::json!("git status"),
///     ExecutionScopeRef::Ephemeral { scope_id: ScopeId::new("s-1").unwrap() },
/// ).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, try_from = "ExecutionRequestWire")]
pub struct ExecutionRequest {
    request_id: RequestId,
    action: ActionRef,
    arguments: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    principal_claim: Option<PrincipalRef>,
    execution_scope: ExecutionScopeRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    session_id: Option<SessionId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deadline: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    idempotency_key: Option<String>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    metadata: Map<String, Value>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ExecutionRequestWire {
    request_id: RequestId,
    action: ActionRef,
    arguments: Map<String, Value>,
    #[serde(default)]
    principal_claim: Option<PrincipalRef>,
    execution_scope: ExecutionScopeRef,
    #[serde(default)]
    session_id: Option<SessionId>,
    #[serde(default)]
    deadline: Option<Timestamp>,
    #[serde(default)]
    idempotency_key: Option<String>,
    #[serde(default)]
    metadata: Map<String, Value>,
}

impl TryFrom<ExecutionRequestWire> for ExecutionRequest {
    type Error = ContractError;
    fn try_from(w: ExecutionRequestWire) -> Result<Self, Self::Error> {
        let mut r = Self::new(
            w.request_id,
            w.action,
            Value::Object(w.arguments),
            w.execution_scope,
        )?;
        r.principal_claim = w.principal_claim;
        r.session_id = w.session_id;
        r.deadline = w.deadline;
        r.metadata = w.metadata;
        match w.idempotency_key {
            Some(k) => r.with_idempotency_key(k),
            None => Ok(r),
        }
    }
}

impl ExecutionRequest {
    /// A request; `arguments` must be a JSON object.
    pub fn new(
        request_id: RequestId,
        action: ActionRef,
        arguments: Value,
        execution_scope: ExecutionScopeRef,
    ) -> Result<Self, ContractError> {
        let Value::Object(arguments) = arguments else {
            return Err(ContractError::invalid(
                "arguments",
                &arguments.to_string(),
                "must be a JSON object",
            ));
        };
        Ok(Self {
            request_id,
            action,
            arguments,
            principal_claim: None,
            execution_scope,
            session_id: None,
            deadline: None,
            idempotency_key: None,
            metadata: Map::new(),
        })
    }

    /// The same request carrying a principal claim (untrusted until a context binds it).
    pub fn with_principal_claim(mut self, principal: PrincipalRef) -> Self {
        self.principal_claim = Some(principal);
        self
    }
    /// The same request within an agent session.
    pub fn with_session(mut self, session: SessionId) -> Self {
        self.session_id = Some(session);
        self
    }
    /// The same request with a deadline; past it the outcome is `timed_out`.
    pub fn with_deadline(mut self, deadline: Timestamp) -> Self {
        self.deadline = Some(deadline);
        self
    }
    /// The same request with an idempotency key (1–256 bytes): a repeated key returns the
    /// recorded outcome instead of running again.
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Result<Self, ContractError> {
        let key = key.into();
        if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY_LEN {
            return Err(ContractError::invalid(
                "idempotency_key",
                &key,
                "must be 1 to 256 bytes long",
            ));
        }
        self.idempotency_key = Some(key);
        Ok(self)
    }
    /// The same request with caller metadata (never used for authorization).
    pub fn with_metadata(mut self, metadata: Map<String, Value>) -> Self {
        self.metadata = metadata;
        self
    }

    /// The request's id.
    pub fn request_id(&self) -> &RequestId {
        &self.request_id
    }
    /// The action asked for.
    pub fn action(&self) -> &ActionRef {
        &self.action
    }
    /// The arguments (a JSON object).
    pub fn arguments(&self) -> &Map<String, Value> {
        &self.arguments
    }
    /// The caller's principal claim, untrusted.
    pub fn principal_claim(&self) -> Option<&PrincipalRef> {
        self.principal_claim.as_ref()
    }
    /// The scope that owns this operation.
    pub fn execution_scope(&self) -> &ExecutionScopeRef {
        &self.execution_scope
    }
    /// The agent session, if any.
    pub fn session_id(&self) -> Option<&SessionId> {
        self.session_id.as_ref()
    }
    /// The deadline, if any.
    pub fn deadline(&self) -> Option<Timestamp> {
        self.deadline
    }
    /// The idempotency key, if any.
    pub fn idempotency_key(&self) -> Option<&str> {
        self.idempotency_key.as_deref()
    }
    /// Caller metadata.
    pub fn metadata(&self) -> &Map<String, Value> {
        &self.metadata
    }
}

/// The trusted side of an execution: who is authenticated, for which tenant, under which policy
/// snapshot and effect backend, in which scope.
///
/// A trusted ingress or composition root builds it; it is never taken from the request it
/// authorizes. (It deserializes so that a trusted configuration can carry it, not so that a
/// caller can.) [`Self::check_request`] refuses a request whose scope or principal claim
/// disagrees with it, before any policy is evaluated.
///
/// ```
/// use warden_contracts::*;
/// let scope = ExecutionScopeRef::Ephemeral { scope_id: ScopeId::new("s-1").unwrap() };
/// let me = PrincipalRef { id: PrincipalId::new("alice").unwrap(), kind: PrincipalKind::User };
/// let ctx = ExecutionContext::new(
///     ContextId::new("ctx-1").unwrap(), scope.clone(), me.clone(), BackendRef::new("in_process").unwrap(),
/// );
/// let req = ExecutionRequest::new(
///     RequestId::new("r-1").unwrap(), ActionRef::new("read").unwrap(), serde_json::json!({}), scope,
/// ).unwrap();
/// assert!(ctx.check_request(&req).is_ok());
/// let other = ExecutionRequest::new(
///     RequestId::new("r-2").unwrap(), ActionRef::new("read").unwrap(), serde_json::json!({}),
///     ExecutionScopeRef::Ephemeral { scope_id: ScopeId::new("s-2").unwrap() },
/// ).unwrap();
/// assert!(ctx.check_request(&other).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutionContext {
    context_id: ContextId,
    execution_scope: ExecutionScopeRef,
    authenticated_principal: PrincipalRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tenant: Option<TenantRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy_snapshot: Option<PolicySnapshotRef>,
    effect_backend: BackendRef,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    authentication_evidence: Vec<EvidenceRef>,
}

impl ExecutionContext {
    /// A context with no tenant, policy snapshot or authentication evidence.
    pub fn new(
        context_id: ContextId,
        execution_scope: ExecutionScopeRef,
        authenticated_principal: PrincipalRef,
        effect_backend: BackendRef,
    ) -> Self {
        Self {
            context_id,
            execution_scope,
            authenticated_principal,
            tenant: None,
            policy_snapshot: None,
            effect_backend,
            authentication_evidence: Vec::new(),
        }
    }

    /// The same context for a tenant.
    pub fn with_tenant(mut self, tenant: TenantRef) -> Self {
        self.tenant = Some(tenant);
        self
    }
    /// The same context bound to an exact policy snapshot.
    pub fn with_policy_snapshot(mut self, snapshot: PolicySnapshotRef) -> Self {
        self.policy_snapshot = Some(snapshot);
        self
    }
    /// The same context with references to the evidence of authentication.
    pub fn with_authentication_evidence(mut self, evidence: Vec<EvidenceRef>) -> Self {
        self.authentication_evidence = evidence;
        self
    }

    /// Checks that `request` may run under this context: the scopes are identical and a
    /// principal claim, if the request makes one, names the authenticated principal. A claim can
    /// never override the context.
    pub fn check_request(&self, request: &ExecutionRequest) -> Result<(), ContractError> {
        if request.execution_scope() != &self.execution_scope {
            return Err(ContractError::Mismatch {
                what: "execution_scope",
                request: request.execution_scope().describe(),
                context: self.execution_scope.describe(),
            });
        }
        if let Some(claim) = request.principal_claim()
            && claim != &self.authenticated_principal
        {
            return Err(ContractError::Mismatch {
                what: "principal",
                request: claim.id.to_string(),
                context: self.authenticated_principal.id.to_string(),
            });
        }
        Ok(())
    }

    /// The context's id.
    pub fn context_id(&self) -> &ContextId {
        &self.context_id
    }
    /// The scope this context executes in.
    pub fn execution_scope(&self) -> &ExecutionScopeRef {
        &self.execution_scope
    }
    /// The authenticated principal.
    pub fn authenticated_principal(&self) -> &PrincipalRef {
        &self.authenticated_principal
    }
    /// The tenant, if any.
    pub fn tenant(&self) -> Option<&TenantRef> {
        self.tenant.as_ref()
    }
    /// The exact policy snapshot, if bound.
    pub fn policy_snapshot(&self) -> Option<&PolicySnapshotRef> {
        self.policy_snapshot.as_ref()
    }
    /// The selected effect backend.
    pub fn effect_backend(&self) -> &BackendRef {
        &self.effect_backend
    }
    /// Evidence of authentication.
    pub fn authentication_evidence(&self) -> &[EvidenceRef] {
        &self.authentication_evidence
    }
}
