//! The payload schema of every record type (docs/evidence.md, "Payloads").
//!
//! Payloads hold ids, digests, decisions, gate levels and counts: never raw arguments, results,
//! messages or secrets. Every struct refuses unknown fields, so a payload cannot smuggle a raw
//! value in under a new name; free text is limited to short labels (a gate's name, a failure
//! kind) and the policy rule as written, which is policy, not input.
//!
//! Each struct declares its fields in their keys' byte order, the order of the canonical text,
//! so the canonical writer writes a payload as it comes and never sorts it again (a test holds
//! every struct to it).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use warden_contracts::{
    ApprovalId, Digest, ExecutionScopeRef, PrincipalRef, ReasonCode, RecordId, RecordType,
    RequestId, RuntimeProfile, SessionId, Stage, TenantId, Timestamp,
};

/// The longest [`Label`], in bytes.
pub const MAX_LABEL_LEN: usize = 256;
/// The longest [`RuleText`], in bytes.
pub const MAX_RULE_LEN: usize = 1024;

macro_rules! bounded_text {
    ($(#[$doc:meta])* $name:ident, $max:expr, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Validates and wraps the text.
            pub fn new(text: impl Into<String>) -> Result<Self, String> {
                let text = text.into();
                if text.is_empty() || text.len() > $max {
                    return Err(format!(
                        "{} must be 1 to {} bytes, got {}",
                        $what,
                        $max,
                        text.len()
                    ));
                }
                if text.chars().any(char::is_control) {
                    return Err(format!("{} must not contain control characters", $what));
                }
                Ok(Self(text))
            }

            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::new(s).map_err(serde::de::Error::custom)
            }
        }
    };
}

bounded_text!(
    /// A short name: 1 to 256 bytes, no control characters (a gate, an action, a failure kind).
    Label,
    MAX_LABEL_LEN,
    "a label"
);
bounded_text!(
    /// A policy rule as written (`bash(rm:*)`): 1 to 1024 bytes, no control characters.
    RuleText,
    MAX_RULE_LEN,
    "a rule"
);

/// How much a gate's deny weighs (docs/design/executor.md#gate-levels-and-the-reducer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateLevel {
    /// A deny is final.
    Hard,
    /// A deny can be overridden by a recorded exception (degrading any certificate), or
    /// escalated to a named approval authority.
    Soft,
    /// A deny is recorded and the call proceeds.
    Advisory,
}

/// What one gate evaluation answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateVerdict {
    /// The gate lets the call through.
    Allow,
    /// The gate refuses the call (weighted by its [`GateLevel`]).
    Deny,
}

/// How an `operation_denied` closed the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DenialKind {
    /// Denied.
    Deny,
    /// Escalated to an approval authority: closed as denied; an approval is a new operation.
    Escalate,
}

/// How a task boundary closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseDisposition {
    /// The task finished; the boundary may be certified.
    Completed,
    /// The task was given up; the boundary can never be certified.
    Abandoned,
}

/// Terminal records by type, as counted in `task_closed` and certificates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TerminalCounts {
    /// `external_result_ambiguous`.
    pub ambiguous: u64,
    /// `operation_cancelled`.
    pub cancelled: u64,
    /// `callable_completed`.
    pub completed: u64,
    /// `operation_denied`.
    pub denied: u64,
    /// `callable_failed`.
    pub failed: u64,
    /// `operation_timed_out`.
    pub timed_out: u64,
}

impl TerminalCounts {
    /// Counts one terminal record of type `t` (ignores non-terminal types).
    pub fn add(&mut self, t: RecordType) {
        match t {
            RecordType::CallableCompleted => self.completed += 1,
            RecordType::CallableFailed => self.failed += 1,
            RecordType::OperationDenied => self.denied += 1,
            RecordType::OperationCancelled => self.cancelled += 1,
            RecordType::OperationTimedOut => self.timed_out += 1,
            RecordType::ExternalResultAmbiguous => self.ambiguous += 1,
            _ => {}
        }
    }

    /// The number of terminal records counted.
    pub fn total(&self) -> u64 {
        self.completed
            + self.failed
            + self.denied
            + self.cancelled
            + self.timed_out
            + self.ambiguous
    }
}

/// `policy_bound`: binds the chain (genesis, no operation) or one operation to a policy
/// snapshot. The first record of a digest in a chain carries the snapshot's canonical bytes, so
/// a certificate can recompute the digest without `warden-policy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyBound {
    /// The snapshot's digest (`blake3:` over `snapshot_json`'s bytes).
    pub policy_digest: Digest,
    /// The snapshot's canonical JSON text; required the first time a digest is bound in a chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_json: Option<String>,
    /// The task boundary the chain belongs to (the same in every `policy_bound` of a chain).
    pub task_boundary_id: Label,
}

/// `operation_started`: the operation's identity and bindings, before any gate runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationStarted {
    /// The action's canonical name.
    pub action: Label,
    /// The action's version, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_version: Option<Label>,
    /// The approval this operation uses (single use), for an approved retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<ApprovalId>,
    /// Digest of that approval receipt's canonical JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_receipt_digest: Option<Digest>,
    /// Digest of the validated arguments' canonical JSON.
    pub arguments_digest: Digest,
    /// The attempt number (1 for the first; an approved retry is a new operation).
    pub attempt: u32,
    /// The effect backend's name.
    pub backend: Label,
    /// Digest of the backend's capability report, when bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability_digest: Option<Digest>,
    /// Digest of the request's idempotency key (the key itself is never stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key_digest: Option<Digest>,
    /// Digest of the policy snapshot in force.
    pub policy_digest: Digest,
    /// The authenticated principal (from the trusted context).
    pub principal: PrincipalRef,
    /// `governed` or `certifiable`.
    pub profile: RuntimeProfile,
    /// Digest of the request's canonical JSON.
    pub request_digest: Digest,
    /// The request (one attempt).
    pub request_id: RequestId,
    /// The execution scope (ids only).
    pub scope: ExecutionScopeRef,
    /// The session, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// The tenant, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<TenantId>,
}

/// `gate_evaluated`: one evaluation of one gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateEvaluated {
    /// Digest of the arguments it evaluated.
    pub arguments_digest: Digest,
    /// The evaluator (`session_gate`, `precondition.tool`, `policy`, …).
    pub gate: Label,
    /// How much its deny weighs.
    pub level: GateLevel,
    /// The stable reason code.
    pub reason_code: ReasonCode,
    /// Whether this is a re-evaluation after a transform changed the arguments.
    #[serde(default)]
    pub recheck: bool,
    /// The rule that decided, as written, if a rule did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<RuleText>,
    /// The rule's source, if a rule decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Label>,
    /// The stage it ran at.
    pub stage: Stage,
    /// What it answered.
    pub verdict: GateVerdict,
}

/// `exception_granted`: a recorded exception overriding one soft deny of this operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExceptionGranted {
    /// Digest of the arguments it covers.
    pub arguments_digest: Digest,
    /// The authority that granted it.
    pub authority: Label,
    /// The exception's identity.
    pub exception_id: Label,
    /// When it expires, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// The `gate_evaluated` record (a soft deny of the same operation) it overrides.
    pub gate_record_id: RecordId,
    /// Who granted it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted_by: Option<PrincipalRef>,
}

/// `operation_denied` (terminal): a denial or an escalation closed the operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationDenied {
    /// For an escalation: the approval request's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<ApprovalId>,
    /// For an escalation: the named authority to ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<Label>,
    /// The gate record that decided, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deciding_gate_record_id: Option<RecordId>,
    /// Denied, or escalated (an approval is a new operation).
    pub disposition: DenialKind,
    /// The evaluator that decided (`reducer` when the gates' reduction did).
    pub evaluator: Label,
    /// How many gate evaluations the operation recorded.
    pub gates_evaluated: u64,
    /// The stable reason code.
    pub reason_code: ReasonCode,
    /// Whether the denial stops the turn's other pending calls.
    #[serde(default)]
    pub stop: bool,
}

/// `callable_completed` (terminal): the callable ran and returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallableCompleted {
    /// How many advisory denies were recorded and let through.
    #[serde(default)]
    pub advisory_denials: u64,
    /// Whether an exception grant let the call through (the certificate is degraded).
    #[serde(default)]
    pub degraded: bool,
    /// Wall time of the invocation, in milliseconds.
    pub duration_ms: u64,
    /// Digest of the result's canonical JSON (`null` included); never the result.
    pub result_digest: Digest,
}

/// `callable_failed` (terminal): the callable (or its setup after start) failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallableFailed {
    /// Whether the callable was reached.
    pub call_executed: bool,
    /// Wall time of the invocation, in milliseconds (0 when not reached).
    #[serde(default)]
    pub duration_ms: u64,
    /// A stable failure kind (`exit_status`, `not_found`, `evidence`…); never the message.
    pub failure_kind: Label,
    /// Digest of the redacted failure message, if there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_digest: Option<Digest>,
}

/// `operation_cancelled` (terminal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationCancelled {
    /// Whether the callable was reached before the cancellation.
    pub call_executed: bool,
}

/// `operation_timed_out` (terminal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationTimedOut {
    /// Whether the callable was reached before the deadline.
    pub call_executed: bool,
    /// The deadline that passed, if the request had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
}

/// `external_result_ambiguous` (terminal): the effect is unknown; never retried without
/// reconciliation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalResultAmbiguous {
    /// Why (`transport_lost`, `recovered_unterminated`, …).
    pub cause: Label,
    /// Whether this record was written by crash recovery rather than by the running operation.
    #[serde(default)]
    pub recovered: bool,
}

/// `task_closed`: the task boundary closed. Its counts must equal the chain's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskClosed {
    /// Completed, or abandoned (never certifiable).
    pub disposition: CloseDisposition,
    /// `exception_granted` records in the chain.
    pub exceptions: u64,
    /// Operations started in the chain.
    pub operations: u64,
    /// The boundary closed (the genesis `policy_bound`'s).
    pub task_boundary_id: Label,
    /// Their terminal records, by type.
    pub terminals: TerminalCounts,
}

/// `record_superseded`: a correction of an earlier record, which stays unchanged.
/// Corrections annotate; they never change the lifecycle facts (starts, terminals, closes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordSuperseded {
    /// The corrected payload, valid for the superseded record's type, if the correction has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrected_payload: Option<Value>,
    /// Why (`correction`, `wrong_level`, …).
    pub reason: Label,
    /// The corrected record's type.
    pub superseded_record_type: RecordType,
    /// The corrected record's sequence (its id is the record's `supersedes_record_id`).
    pub superseded_sequence: u64,
}

/// A payload parsed according to its record type, or built by the recorder. It serializes as
/// its record type's payload (the variant's struct, untagged).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Payload {
    /// `policy_bound`.
    PolicyBound(PolicyBound),
    /// `operation_started`.
    OperationStarted(Box<OperationStarted>),
    /// `gate_evaluated`.
    GateEvaluated(GateEvaluated),
    /// `exception_granted`.
    ExceptionGranted(ExceptionGranted),
    /// `operation_denied`.
    OperationDenied(OperationDenied),
    /// `callable_completed`.
    CallableCompleted(CallableCompleted),
    /// `callable_failed`.
    CallableFailed(CallableFailed),
    /// `operation_cancelled`.
    OperationCancelled(OperationCancelled),
    /// `operation_timed_out`.
    OperationTimedOut(OperationTimedOut),
    /// `external_result_ambiguous`.
    ExternalResultAmbiguous(ExternalResultAmbiguous),
    /// `task_closed`.
    TaskClosed(TaskClosed),
    /// `record_superseded`.
    RecordSuperseded(RecordSuperseded),
}

fn from<'a, T: Deserialize<'a>>(v: &'a Value) -> Result<T, String> {
    T::deserialize(v).map_err(|e| e.to_string())
}

/// Parses `value` as the payload of `record_type`, checking the type's own rules
/// ([`Payload::check`]).
pub fn parse(record_type: RecordType, value: &Value) -> Result<Payload, String> {
    let p = match record_type {
        RecordType::PolicyBound => Payload::PolicyBound(from(value)?),
        RecordType::OperationStarted => Payload::OperationStarted(Box::new(from(value)?)),
        RecordType::GateEvaluated => Payload::GateEvaluated(from(value)?),
        RecordType::ExceptionGranted => Payload::ExceptionGranted(from(value)?),
        RecordType::OperationDenied => Payload::OperationDenied(from(value)?),
        RecordType::CallableCompleted => Payload::CallableCompleted(from(value)?),
        RecordType::CallableFailed => Payload::CallableFailed(from(value)?),
        RecordType::OperationCancelled => Payload::OperationCancelled(from(value)?),
        RecordType::OperationTimedOut => Payload::OperationTimedOut(from(value)?),
        RecordType::ExternalResultAmbiguous => Payload::ExternalResultAmbiguous(from(value)?),
        RecordType::TaskClosed => Payload::TaskClosed(from(value)?),
        RecordType::RecordSuperseded => Payload::RecordSuperseded(from(value)?),
    };
    p.check()?;
    Ok(p)
}

impl Payload {
    /// The record type whose payload this is.
    pub fn record_type(&self) -> RecordType {
        match self {
            Self::PolicyBound(_) => RecordType::PolicyBound,
            Self::OperationStarted(_) => RecordType::OperationStarted,
            Self::GateEvaluated(_) => RecordType::GateEvaluated,
            Self::ExceptionGranted(_) => RecordType::ExceptionGranted,
            Self::OperationDenied(_) => RecordType::OperationDenied,
            Self::CallableCompleted(_) => RecordType::CallableCompleted,
            Self::CallableFailed(_) => RecordType::CallableFailed,
            Self::OperationCancelled(_) => RecordType::OperationCancelled,
            Self::OperationTimedOut(_) => RecordType::OperationTimedOut,
            Self::ExternalResultAmbiguous(_) => RecordType::ExternalResultAmbiguous,
            Self::TaskClosed(_) => RecordType::TaskClosed,
            Self::RecordSuperseded(_) => RecordType::RecordSuperseded,
        }
    }

    /// The rules of its record type beyond each field's own (which its type checks when it is
    /// built or read): what [`parse`] checks after reading the fields, so a payload built in
    /// code is held to exactly what a parsed one is.
    pub fn check(&self) -> Result<(), String> {
        match self {
            Self::PolicyBound(p) => {
                if p.snapshot_json.as_ref().is_some_and(String::is_empty) {
                    return Err("snapshot_json must not be empty".into());
                }
            }
            Self::OperationStarted(p) => {
                if p.attempt == 0 {
                    return Err("attempt starts at 1".into());
                }
                if p.approval_id.is_some() != p.approval_receipt_digest.is_some() {
                    return Err("approval_id and approval_receipt_digest go together".into());
                }
                if !matches!(
                    p.profile,
                    RuntimeProfile::Governed | RuntimeProfile::Certifiable
                ) {
                    return Err("only the governed and certifiable profiles record evidence".into());
                }
            }
            Self::OperationDenied(p) => {
                if p.disposition == DenialKind::Escalate
                    && (p.approval_id.is_none() || p.authority.is_none())
                {
                    return Err("an escalation names its approval_id and authority".into());
                }
            }
            Self::RecordSuperseded(p) => {
                if let Some(corrected) = &p.corrected_payload {
                    parse(p.superseded_record_type, corrected)
                        .map_err(|e| format!("corrected_payload: {e}"))?;
                }
            }
            Self::GateEvaluated(_)
            | Self::ExceptionGranted(_)
            | Self::CallableCompleted(_)
            | Self::CallableFailed(_)
            | Self::OperationCancelled(_)
            | Self::OperationTimedOut(_)
            | Self::ExternalResultAmbiguous(_)
            | Self::TaskClosed(_) => {}
        }
        Ok(())
    }
}

/// Checks `value` against the payload schema of `record_type`.
pub fn validate(record_type: RecordType, value: &Value) -> Result<(), String> {
    parse(record_type, value).map(|_| ())
}

/// Serializes a payload struct to the JSON value an append carries.
pub fn to_value<T: Serialize>(payload: &T) -> Value {
    // Every payload type serializes to a JSON object (plain structs of strings, numbers, enums).
    serde_json::to_value(payload).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use warden_contracts::{PrincipalId, PrincipalKind, ScopeId};

    use super::*;

    /// One payload of every record type, every optional field set.
    fn every_payload() -> Vec<Payload> {
        let d = Digest::of_bytes(b"x");
        let label = |s: &str| Label::new(s).unwrap();
        let record = RecordId::new("rec-1").unwrap();
        let approval = ApprovalId::new("ap-1").unwrap();
        let principal = PrincipalRef {
            id: PrincipalId::new("alice").unwrap(),
            kind: PrincipalKind::User,
        };
        vec![
            Payload::PolicyBound(PolicyBound {
                policy_digest: d.clone(),
                snapshot_json: Some("{}".into()),
                task_boundary_id: label("t"),
            }),
            Payload::OperationStarted(Box::new(OperationStarted {
                action: label("bash"),
                action_version: Some(label("1")),
                approval_id: Some(approval.clone()),
                approval_receipt_digest: Some(d.clone()),
                arguments_digest: d.clone(),
                attempt: 1,
                backend: label("in_process"),
                capability_digest: Some(d.clone()),
                idempotency_key_digest: Some(d.clone()),
                policy_digest: d.clone(),
                principal: principal.clone(),
                profile: RuntimeProfile::Governed,
                request_digest: d.clone(),
                request_id: RequestId::new("req-1").unwrap(),
                scope: ExecutionScopeRef::Ephemeral {
                    scope_id: ScopeId::new("s-1").unwrap(),
                },
                session_id: Some(SessionId::new("sess-1").unwrap()),
                tenant_id: Some(TenantId::new("tenant-1").unwrap()),
            })),
            Payload::GateEvaluated(GateEvaluated {
                arguments_digest: d.clone(),
                gate: label("policy"),
                level: GateLevel::Hard,
                reason_code: ReasonCode::PolicyRule,
                recheck: true,
                rule: Some(RuleText::new("bash(git status:*)").unwrap()),
                source: Some(label("project")),
                stage: Stage::Authorize,
                verdict: GateVerdict::Allow,
            }),
            Payload::ExceptionGranted(ExceptionGranted {
                arguments_digest: d.clone(),
                authority: label("security"),
                exception_id: label("ex-1"),
                expires_at: Some(Timestamp(9)),
                gate_record_id: record.clone(),
                granted_by: Some(principal),
            }),
            Payload::OperationDenied(OperationDenied {
                approval_id: Some(approval),
                authority: Some(label("security")),
                deciding_gate_record_id: Some(record),
                disposition: DenialKind::Escalate,
                evaluator: label("reducer"),
                gates_evaluated: 2,
                reason_code: ReasonCode::PolicyRule,
                stop: true,
            }),
            Payload::CallableCompleted(CallableCompleted {
                advisory_denials: 1,
                degraded: true,
                duration_ms: 3,
                result_digest: d.clone(),
            }),
            Payload::CallableFailed(CallableFailed {
                call_executed: true,
                duration_ms: 3,
                failure_kind: label("exit_status"),
                message_digest: Some(d),
            }),
            Payload::OperationCancelled(OperationCancelled {
                call_executed: false,
            }),
            Payload::OperationTimedOut(OperationTimedOut {
                call_executed: true,
                deadline: Some(Timestamp(7)),
            }),
            Payload::ExternalResultAmbiguous(ExternalResultAmbiguous {
                cause: label("transport_lost"),
                recovered: true,
            }),
            Payload::TaskClosed(TaskClosed {
                disposition: CloseDisposition::Completed,
                exceptions: 1,
                operations: 2,
                task_boundary_id: label("t"),
                terminals: TerminalCounts::default(),
            }),
            Payload::RecordSuperseded(RecordSuperseded {
                corrected_payload: Some(serde_json::json!({"call_executed": true})),
                reason: label("correction"),
                superseded_record_type: RecordType::OperationCancelled,
                superseded_sequence: 4,
            }),
        ]
    }

    /// Every payload struct declares its fields in their keys' byte order, which is the order of
    /// the canonical text: the one-pass writer then writes each object as it comes, never
    /// sorting it again. (Plain serialization follows declaration order, so it equals the
    /// canonical text exactly when the declarations are in that order.)
    #[test]
    fn payload_fields_are_declared_in_canonical_order() {
        for p in every_payload() {
            p.check().unwrap();
            let value = to_value(&p);
            assert_eq!(parse(p.record_type(), &value).unwrap(), p);
            assert_eq!(
                serde_json::to_string(&p).unwrap(),
                warden_contracts::canonical::to_canonical_string(&value).unwrap(),
                "{:?}",
                p.record_type()
            );
        }
    }
}
