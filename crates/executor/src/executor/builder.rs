//! [`ExecutorBuilder`]: composes an [`ActionExecutor`] from a registry, policy evaluators,
//! handlers, admission and governance, and freezes them.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use warden_contracts::{
    Capability, CapabilityReport, Capacity, Digest, Observer, PolicyEvaluator, RuntimeProfile,
};
use warden_policy::{Containment, NetworkRequirement, Requirement};

use super::{ActionExecutor, DEFAULT_APPROVAL_TTL_MS};
use crate::admission::{Clock, SystemClock};
use crate::error::ExecutorError;
use crate::governed::Governance;
use crate::idempotency;
use crate::interceptor::Handlers;
use crate::plan::PlanCache;
use crate::receipts::ApprovalBook;
use crate::registry::Registry;

/// Builds an [`ActionExecutor`]. A policy evaluator is required (no policy, no execution).
/// Low-level: for a Warden policy, [`crate::Runtime`] composes this builder from the policy.
pub struct ExecutorBuilder {
    registry: Registry,
    policies: Vec<Arc<dyn PolicyEvaluator>>,
    handlers: Handlers,
    capacity: Option<Arc<dyn Capacity>>,
    backend: Option<CapabilityReport>,
    containment: Vec<(Capability, Requirement)>,
    containment_for: HashMap<String, Vec<(Capability, Requirement)>>,
    observers: Vec<Arc<dyn Observer>>,
    clock: Arc<dyn Clock>,
    approval_ttl_ms: u64,
    profile: Option<RuntimeProfile>,
    governance: Option<Governance>,
}

impl fmt::Debug for ExecutorBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecutorBuilder")
            .field("registry", &self.registry)
            .field("policies", &self.policies.len())
            .field("handlers", &self.handlers)
            .finish_non_exhaustive()
    }
}

impl ExecutorBuilder {
    pub(super) fn new(registry: Registry) -> Self {
        Self {
            registry,
            policies: Vec::new(),
            handlers: Handlers::new(),
            capacity: None,
            backend: None,
            containment: Vec::new(),
            containment_for: HashMap::new(),
            observers: Vec::new(),
            clock: Arc::new(SystemClock),
            approval_ttl_ms: DEFAULT_APPROVAL_TTL_MS,
            profile: None,
            governance: None,
        }
    }

    /// Adds a policy evaluator. The first is used when a context names no snapshot; a context
    /// naming a snapshot gets exactly that one (or a denial, before policy runs).
    pub fn policy(mut self, policy: Arc<dyn PolicyEvaluator>) -> Self {
        self.policies.push(policy);
        self
    }
    /// Sets the handler set (session gate, preconditions, security hooks, transforms,
    /// handlers).
    pub fn handlers(mut self, handlers: Handlers) -> Self {
        self.handlers = handlers;
        self
    }
    /// Sets the capacity admission port (for example [`crate::Limits`]).
    pub fn capacity(mut self, capacity: Arc<dyn Capacity>) -> Self {
        self.capacity = Some(capacity);
        self
    }
    /// Sets the effect backend's capability report; contexts must name this backend.
    pub fn backend(mut self, report: CapabilityReport) -> Self {
        self.backend = Some(report);
        self
    }
    /// Requires a containment capability for every action: a backend that does not enforce it
    /// denies before anything starts. Same as `containment(capability, Requirement::Required)`.
    pub fn require(self, capability: Capability) -> Self {
        self.containment(capability, Requirement::Required)
    }
    /// Requires a containment capability for one action (canonical name).
    pub fn require_for(self, action: impl Into<String>, capability: Capability) -> Self {
        self.containment_for(action, capability, Requirement::Required)
    }
    /// Asks for a containment capability for every action: `Required` → a backend that does
    /// not enforce it denies (`containment`) before anything starts; `Optional` → the call
    /// proceeds and its outcome records the capability in `degradations`. Asked for several
    /// times (here or per action), the strictest requirement wins.
    pub fn containment(mut self, capability: Capability, requirement: Requirement) -> Self {
        self.containment.push((capability, requirement));
        self
    }
    /// [`Self::containment`] for one action (canonical name).
    pub fn containment_for(
        mut self,
        action: impl Into<String>,
        capability: Capability,
        requirement: Requirement,
    ) -> Self {
        self.containment_for
            .entry(action.into())
            .or_default()
            .push((capability, requirement));
        self
    }
    /// A policy's `[containment]` table for one action (canonical name; the actions that run
    /// processes through the effect backend): `write_roots` → `filesystem_write_roots`,
    /// `network_off` → `network_off` and `unix_sockets_off` (nothing when `allowed`),
    /// `env_allowlist` → `env_allowlist`, `process_isolation` → `process_isolation` and
    /// `descriptor_isolation`, each with the table's requirement.
    pub fn policy_containment_for(self, action: impl Into<String>, table: &Containment) -> Self {
        let action = action.into();
        let mut b = self
            .containment_for(
                action.clone(),
                Capability::FilesystemWriteRoots,
                table.write_roots,
            )
            .containment_for(
                action.clone(),
                Capability::EnvAllowlist,
                table.env_allowlist,
            )
            .containment_for(
                action.clone(),
                Capability::ProcessIsolation,
                table.process_isolation,
            )
            .containment_for(
                action.clone(),
                Capability::DescriptorIsolation,
                table.process_isolation,
            );
        let network = match table.network_off {
            NetworkRequirement::Required => Some(Requirement::Required),
            NetworkRequirement::Optional => Some(Requirement::Optional),
            NetworkRequirement::Allowed => None,
        };
        if let Some(requirement) = network {
            b = b
                .containment_for(action.clone(), Capability::NetworkOff, requirement)
                .containment_for(action, Capability::UnixSocketsOff, requirement);
        }
        b
    }
    /// Adds an observer of stages, decisions and outcomes.
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observers.push(observer);
        self
    }
    /// Sets the clock (deadlines, rates, approval expiry).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
    /// Sets how long an approval request stays answerable.
    pub fn approval_ttl_ms(mut self, ttl: u64) -> Self {
        self.approval_ttl_ms = ttl.max(1);
        self
    }
    /// Governs the executor: every request that passes admission opens an operation on the
    /// task boundary's chain, records each gate, and invokes only through the reducer's permit
    /// (docs/executor.md, "Governed execution"). The executor's profile becomes the
    /// boundary's (`governed` or `certifiable`). The boundary's policy must be one of the
    /// executor's evaluators.
    pub fn governance(mut self, governance: Governance) -> Self {
        self.governance = Some(governance);
        self
    }
    /// Asserts the runtime profile this composition must run under; `build` refuses a profile
    /// the composition does not back: `governed`/`certifiable` need [`Self::governance`] with
    /// that profile, `minimal` none, and `durable` (a Run state store) is not provided by
    /// Warden yet. Without it the profile follows from the governance (or is `minimal`).
    pub fn profile(mut self, profile: RuntimeProfile) -> Self {
        self.profile = Some(profile);
        self
    }

    /// Freezes the registry and handler set into an executor.
    pub fn build(self) -> Result<ActionExecutor, ExecutorError> {
        if self.policies.is_empty() {
            return Err(ExecutorError::NoPolicy);
        }
        let mut seen = std::collections::HashSet::new();
        for p in &self.policies {
            if !seen.insert(p.snapshot().digest.clone()) {
                return Err(ExecutorError::DuplicatePolicy {
                    digest: p.snapshot().digest.to_string(),
                });
            }
        }
        let profile = match (self.profile, &self.governance) {
            (Some(RuntimeProfile::Durable), _) => {
                return Err(ExecutorError::Profile(
                    "`durable` needs a Run state store, which this composition does not provide"
                        .into(),
                ));
            }
            (None | Some(RuntimeProfile::Minimal), None) => RuntimeProfile::Minimal,
            (Some(p), None) => {
                return Err(ExecutorError::Profile(format!(
                    "`{}` needs governance (a task boundary's evidence recorder)",
                    profile_name(p)
                )));
            }
            (None, Some(g)) => g.profile(),
            (Some(p), Some(g)) => {
                if p != g.profile() {
                    return Err(ExecutorError::Profile(format!(
                        "asked for `{}`, the governance records `{}`",
                        profile_name(p),
                        profile_name(g.profile())
                    )));
                }
                p
            }
        };
        if let Some(g) = &self.governance {
            let bound = &g.recorder().binding().policy;
            if !self.policies.iter().any(|p| p.snapshot() == bound) {
                return Err(ExecutorError::Profile(format!(
                    "the task boundary is bound to policy {}, which no evaluator of this executor holds",
                    bound.digest
                )));
            }
        }
        let backend_digest = match &self.backend {
            Some(report) => Some(Digest::of_serialize(report).map_err(|e| {
                ExecutorError::InvalidLimit(format!("backend report has no digest: {e}"))
            })?),
            None => None,
        };
        Ok(ActionExecutor {
            plans: PlanCache::new(self.policies.len()),
            registry: self.registry,
            policies: self.policies,
            handlers: self.handlers,
            capacity: self.capacity,
            backend: self.backend,
            backend_digest,
            containment: self.containment,
            containment_for: self.containment_for,
            observers: self.observers,
            clock: self.clock,
            approval_ttl_ms: self.approval_ttl_ms,
            profile,
            governance: self.governance,
            approvals: Mutex::new(ApprovalBook::default()),
            idempotency: idempotency::Table::default(),
            replays: Mutex::new(HashMap::new()),
            seq: AtomicU64::new(0),
        })
    }
}

fn profile_name(p: RuntimeProfile) -> &'static str {
    match p {
        RuntimeProfile::Minimal => "minimal",
        RuntimeProfile::Durable => "durable",
        RuntimeProfile::Governed => "governed",
        RuntimeProfile::Certifiable => "certifiable",
    }
}
