//! The typed result of one execution: the closed [`ExecutionOutcome`] and the
//! [`RuntimeProfile`] every outcome carries.
//!
//! Every variant that can follow a started call (`succeeded`, `failed`, `cancelled`,
//! `timed_out`, `ambiguous`) also carries `degradations`: the containment the call was asked to
//! run under as *optional* that the effect backend did not prove (one [`CapabilityEntry`] each,
//! with the backend's status and evidence). Empty, and then not serialized, when everything asked
//! for was proven or nothing ran.
//!
//! Every variant except `deferred` (which happens before any governed operation starts) also
//! carries `evidence` ([`ExecutionOutcome::evidence`]): for a governed request that opened an
//! operation, the references of that operation's records in order, its one terminal record
//! last; for an idempotent replay, the replayed operation's terminal record. Empty, and then not
//! serialized, in the minimal and durable profiles and wherever nothing was recorded. The field
//! came to `cancelled`, `timed_out` and `ambiguous` after the other variants; it defaults to
//! empty, so documents written before still read.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::approval::ApprovalRequest;
use crate::capability::CapabilityEntry;
use crate::decision::DecisionReason;
use crate::ids::{RequestId, Timestamp};
use crate::scope::EvidenceRef;

/// The strength of the guarantees behind an outcome, chosen by the composition root and carried
/// on every outcome, so a caller asserting on evidence asserts against the profile that produced
/// it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeProfile {
    /// Typed outcome only; nothing durable is promised.
    Minimal,
    /// Attempts and outcomes are persisted; no governance claim.
    Durable,
    /// Hash-chained evidence is control flow: no receipt, no invocation.
    Governed,
    /// Governed, and closed tasks can be certified.
    Certifiable,
}

/// A failure a tool reported, safe to show and store (no raw exception, no secret).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    /// A stable, machine-readable kind (for example `not_found`, `exit_status`).
    pub kind: String,
    /// A redacted, human-readable message.
    pub message: String,
}

/// The outcome of one execution request. Closed: every path ends in exactly one variant, and
/// every variant carries the [`RuntimeProfile`].
///
/// A successful call that returned nothing is `Succeeded { result: null, .. }`, never a failure.
///
/// ```
/// use warden_contracts::*;
/// let ok = ExecutionOutcome::Succeeded {
///     request_id: RequestId::new("r-1").unwrap(),
///     profile: RuntimeProfile::Minimal,
///     result: serde_json::Value::Null,
///     evidence: vec![],
///     degradations: vec![],
/// };
/// assert!(ok.is_success());
/// assert_eq!(ok.profile(), RuntimeProfile::Minimal);
/// let json = serde_json::to_value(&ok).unwrap();
/// assert_eq!(json["status"], "succeeded");
/// assert!(json.get("result").is_some(), "a null result is still written");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum ExecutionOutcome {
    /// The tool ran and returned `result` (possibly `null`).
    Succeeded {
        /// The request.
        request_id: RequestId,
        /// The active profile.
        profile: RuntimeProfile,
        /// The tool's result; `null` is a successful empty result.
        result: Value,
        /// Evidence of the decision and the invocation.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        evidence: Vec<EvidenceRef>,
        /// Optional containment the backend did not prove, under which the call ran.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        degradations: Vec<CapabilityEntry>,
    },
    /// A policy, gate, guard, precondition or validation refused the call; nothing ran.
    Denied {
        /// The request.
        request_id: RequestId,
        /// The active profile.
        profile: RuntimeProfile,
        /// Why.
        reason: DecisionReason,
        /// Which evaluator refused.
        evaluator: String,
        /// The denial also stops the turn's other pending calls.
        #[serde(default)]
        stop: bool,
        /// Evidence of the denial.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        evidence: Vec<EvidenceRef>,
    },
    /// Capacity was full; nothing started. Retry later.
    Deferred {
        /// The request.
        request_id: RequestId,
        /// The active profile.
        profile: RuntimeProfile,
        /// Why.
        reason: DecisionReason,
        /// When to retry, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_at: Option<Timestamp>,
    },
    /// Approval is needed; nothing ran, and no worker waits. An approval starts a new attempt.
    Escalated {
        /// The request.
        request_id: RequestId,
        /// The active profile.
        profile: RuntimeProfile,
        /// What to approve, and whom to ask.
        approval: ApprovalRequest,
        /// Evidence of the escalation.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        evidence: Vec<EvidenceRef>,
    },
    /// The tool ran (or was being set up) and failed.
    Failed {
        /// The request.
        request_id: RequestId,
        /// The active profile.
        profile: RuntimeProfile,
        /// The failure, redacted.
        failure: Failure,
        /// Whether the callable was reached.
        call_executed: bool,
        /// Evidence of the failure.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        evidence: Vec<EvidenceRef>,
        /// Optional containment the backend did not prove, under which the call ran.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        degradations: Vec<CapabilityEntry>,
    },
    /// The caller cancelled.
    Cancelled {
        /// The request.
        request_id: RequestId,
        /// The active profile.
        profile: RuntimeProfile,
        /// Whether the callable was reached before cancellation.
        call_executed: bool,
        /// Evidence of the cancellation (governed: the operation's records, its one terminal
        /// `operation_cancelled` last).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        evidence: Vec<EvidenceRef>,
        /// Optional containment the backend did not prove, under which the call ran.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        degradations: Vec<CapabilityEntry>,
    },
    /// The request's deadline passed.
    TimedOut {
        /// The request.
        request_id: RequestId,
        /// The active profile.
        profile: RuntimeProfile,
        /// Whether the callable was reached before the deadline.
        call_executed: bool,
        /// Evidence of the timeout (governed: the operation's records, its one terminal
        /// `operation_timed_out` last).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        evidence: Vec<EvidenceRef>,
        /// Optional containment the backend did not prove, under which the call ran.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        degradations: Vec<CapabilityEntry>,
    },
    /// The call was sent and its effect is unknown (a transport lost after send). Never retried
    /// by the executor without reconciliation.
    Ambiguous {
        /// The request.
        request_id: RequestId,
        /// The active profile.
        profile: RuntimeProfile,
        /// What is known.
        message: String,
        /// Evidence of the ambiguous result (governed: the operation's records, its one
        /// terminal `external_result_ambiguous` last).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        evidence: Vec<EvidenceRef>,
        /// Optional containment the backend did not prove, under which the call ran.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        degradations: Vec<CapabilityEntry>,
    },
}

impl ExecutionOutcome {
    /// The profile that produced this outcome.
    pub fn profile(&self) -> RuntimeProfile {
        match self {
            Self::Succeeded { profile, .. }
            | Self::Denied { profile, .. }
            | Self::Deferred { profile, .. }
            | Self::Escalated { profile, .. }
            | Self::Failed { profile, .. }
            | Self::Cancelled { profile, .. }
            | Self::TimedOut { profile, .. }
            | Self::Ambiguous { profile, .. } => *profile,
        }
    }

    /// The request this outcome answers.
    pub fn request_id(&self) -> &RequestId {
        match self {
            Self::Succeeded { request_id, .. }
            | Self::Denied { request_id, .. }
            | Self::Deferred { request_id, .. }
            | Self::Escalated { request_id, .. }
            | Self::Failed { request_id, .. }
            | Self::Cancelled { request_id, .. }
            | Self::TimedOut { request_id, .. }
            | Self::Ambiguous { request_id, .. } => request_id,
        }
    }

    /// The variant's stable name, as serialized in `status`.
    pub fn status(&self) -> &'static str {
        match self {
            Self::Succeeded { .. } => "succeeded",
            Self::Denied { .. } => "denied",
            Self::Deferred { .. } => "deferred",
            Self::Escalated { .. } => "escalated",
            Self::Failed { .. } => "failed",
            Self::Cancelled { .. } => "cancelled",
            Self::TimedOut { .. } => "timed_out",
            Self::Ambiguous { .. } => "ambiguous",
        }
    }

    /// The evidence references the outcome carries (governed: its operation's records, the
    /// terminal last). Empty for `deferred`, and whenever nothing was recorded.
    ///
    /// ```
    /// use warden_contracts::*;
    /// let cancelled = ExecutionOutcome::Cancelled {
    ///     request_id: RequestId::new("r-1").unwrap(),
    ///     profile: RuntimeProfile::Minimal,
    ///     call_executed: false,
    ///     evidence: vec![],
    ///     degradations: vec![],
    /// };
    /// assert!(cancelled.evidence().is_empty());
    /// // Written before the field existed: still reads, with no evidence.
    /// let old: ExecutionOutcome = serde_json::from_value(serde_json::json!({
    ///     "status": "timed_out", "request_id": "r-2", "profile": "governed", "call_executed": true,
    /// }))
    /// .unwrap();
    /// assert!(old.evidence().is_empty());
    /// assert!(serde_json::to_value(&cancelled).unwrap().get("evidence").is_none());
    /// ```
    pub fn evidence(&self) -> &[EvidenceRef] {
        match self {
            Self::Succeeded { evidence, .. }
            | Self::Denied { evidence, .. }
            | Self::Escalated { evidence, .. }
            | Self::Failed { evidence, .. }
            | Self::Cancelled { evidence, .. }
            | Self::TimedOut { evidence, .. }
            | Self::Ambiguous { evidence, .. } => evidence,
            Self::Deferred { .. } => &[],
        }
    }

    /// Optional containment the effect backend did not prove, under which the call ran (see
    /// the module docs). Empty for the variants where nothing ran.
    pub fn degradations(&self) -> &[CapabilityEntry] {
        match self {
            Self::Succeeded { degradations, .. }
            | Self::Failed { degradations, .. }
            | Self::Cancelled { degradations, .. }
            | Self::TimedOut { degradations, .. }
            | Self::Ambiguous { degradations, .. } => degradations,
            Self::Denied { .. } | Self::Deferred { .. } | Self::Escalated { .. } => &[],
        }
    }

    /// The same outcome with `degradations` recorded, when the callable may have been reached
    /// (a variant or an outcome where nothing ran is returned unchanged: nothing ran degraded).
    ///
    /// ```
    /// use warden_contracts::*;
    /// let entry = CapabilityEntry {
    ///     capability: Capability::NetworkOff,
    ///     status: CapabilityStatus::Unsupported,
    ///     detail: "no network namespace".into(),
    /// };
    /// let ok = ExecutionOutcome::Succeeded {
    ///     request_id: RequestId::new("r-1").unwrap(),
    ///     profile: RuntimeProfile::Minimal,
    ///     result: serde_json::Value::Null,
    ///     evidence: vec![],
    ///     degradations: vec![],
    /// }
    /// .with_degradations(vec![entry.clone()]);
    /// assert_eq!(ok.degradations(), [entry]);
    /// assert_eq!(serde_json::to_value(&ok).unwrap()["degradations"][0]["capability"], "network_off");
    /// ```
    pub fn with_degradations(mut self, entries: Vec<CapabilityEntry>) -> Self {
        if self.call_executed() == Some(false) {
            return self;
        }
        match &mut self {
            Self::Succeeded { degradations, .. }
            | Self::Failed { degradations, .. }
            | Self::Cancelled { degradations, .. }
            | Self::TimedOut { degradations, .. }
            | Self::Ambiguous { degradations, .. } => *degradations = entries,
            Self::Denied { .. } | Self::Deferred { .. } | Self::Escalated { .. } => {}
        }
        self
    }

    /// Whether the tool ran and succeeded.
    pub fn is_success(&self) -> bool {
        matches!(self, Self::Succeeded { .. })
    }

    /// Whether the callable may have been reached: `Some(true)` it was, `Some(false)` it was not,
    /// `None` unknown (ambiguous).
    pub fn call_executed(&self) -> Option<bool> {
        match self {
            Self::Succeeded { .. } => Some(true),
            Self::Denied { .. } | Self::Deferred { .. } | Self::Escalated { .. } => Some(false),
            Self::Failed { call_executed, .. }
            | Self::Cancelled { call_executed, .. }
            | Self::TimedOut { call_executed, .. } => Some(*call_executed),
            Self::Ambiguous { .. } => None,
        }
    }
}
