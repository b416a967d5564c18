//! What the lifecycle check and the stores' indexes need from a payload ([`Facts`]), and the
//! append path's payload check that yields them without building the typed payload.
//!
//! [`check`] reads the borrowed JSON value once and allocates nothing. It is written to accept
//! only what [`payload::parse`] accepts: when it cannot vouch for a payload it returns nothing
//! and the typed parse decides (with its error message), so a payload the fast check does not
//! know how to read costs time, never correctness. Debug builds run the typed parse after every
//! accepted payload and assert agreement; a property test compares the two on generated
//! payloads, valid and broken.

use serde::Deserialize;
use serde_json::{Map, Value};
use warden_contracts::{
    Digest, PrincipalKind, ReasonCode, RecordId, RecordType, RuntimeProfile, Stage,
};

use crate::payload::{
    self, CloseDisposition, DenialKind, GateLevel, GateVerdict, MAX_LABEL_LEN, MAX_RULE_LEN,
    Payload, TerminalCounts,
};

/// What the lifecycle rules and the indexes read from a payload; `S` is `&str` (borrowed from
/// the payload) or `String` (an append on its way to the SQLite writer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Facts<S> {
    /// `policy_bound`.
    PolicyBound {
        boundary: S,
        digest: S,
        has_snapshot: bool,
    },
    /// `operation_started`.
    OperationStarted {
        idempotency_key_digest: Option<S>,
        approval_id: Option<S>,
    },
    /// `gate_evaluated`.
    Gate {
        level: GateLevel,
        verdict: GateVerdict,
    },
    /// `exception_granted`.
    Exception { gate_record_id: S },
    /// One of the six terminal types.
    Terminal,
    /// `task_closed`.
    TaskClosed {
        boundary: S,
        disposition: CloseDisposition,
        operations: u64,
        terminals: TerminalCounts,
        exceptions: u64,
    },
    /// `record_superseded`.
    Superseded {
        sequence: u64,
        record_type: RecordType,
    },
}

impl<S: AsRef<str>> Facts<S> {
    /// Borrowed.
    pub(crate) fn as_str(&self) -> Facts<&str> {
        match self {
            Self::PolicyBound {
                boundary,
                digest,
                has_snapshot,
            } => Facts::PolicyBound {
                boundary: boundary.as_ref(),
                digest: digest.as_ref(),
                has_snapshot: *has_snapshot,
            },
            Self::OperationStarted {
                idempotency_key_digest,
                approval_id,
            } => Facts::OperationStarted {
                idempotency_key_digest: idempotency_key_digest.as_ref().map(AsRef::as_ref),
                approval_id: approval_id.as_ref().map(AsRef::as_ref),
            },
            Self::Gate { level, verdict } => Facts::Gate {
                level: *level,
                verdict: *verdict,
            },
            Self::Exception { gate_record_id } => Facts::Exception {
                gate_record_id: gate_record_id.as_ref(),
            },
            Self::Terminal => Facts::Terminal,
            Self::TaskClosed {
                boundary,
                disposition,
                operations,
                terminals,
                exceptions,
            } => Facts::TaskClosed {
                boundary: boundary.as_ref(),
                disposition: *disposition,
                operations: *operations,
                terminals: *terminals,
                exceptions: *exceptions,
            },
            Self::Superseded {
                sequence,
                record_type,
            } => Facts::Superseded {
                sequence: *sequence,
                record_type: *record_type,
            },
        }
    }

    /// Owned (only the few strings the facts hold are copied).
    pub(crate) fn to_owned(&self) -> Facts<String> {
        let own = |s: &S| s.as_ref().to_owned();
        match self {
            Self::PolicyBound {
                boundary,
                digest,
                has_snapshot,
            } => Facts::PolicyBound {
                boundary: own(boundary),
                digest: own(digest),
                has_snapshot: *has_snapshot,
            },
            Self::OperationStarted {
                idempotency_key_digest,
                approval_id,
            } => Facts::OperationStarted {
                idempotency_key_digest: idempotency_key_digest.as_ref().map(own),
                approval_id: approval_id.as_ref().map(own),
            },
            Self::Gate { level, verdict } => Facts::Gate {
                level: *level,
                verdict: *verdict,
            },
            Self::Exception { gate_record_id } => Facts::Exception {
                gate_record_id: own(gate_record_id),
            },
            Self::Terminal => Facts::Terminal,
            Self::TaskClosed {
                boundary,
                disposition,
                operations,
                terminals,
                exceptions,
            } => Facts::TaskClosed {
                boundary: own(boundary),
                disposition: *disposition,
                operations: *operations,
                terminals: *terminals,
                exceptions: *exceptions,
            },
            Self::Superseded {
                sequence,
                record_type,
            } => Facts::Superseded {
                sequence: *sequence,
                record_type: *record_type,
            },
        }
    }
}

impl Payload {
    /// The payload's facts.
    pub(crate) fn facts(&self) -> Facts<&str> {
        match self {
            Self::PolicyBound(p) => Facts::PolicyBound {
                boundary: p.task_boundary_id.as_str(),
                digest: p.policy_digest.as_str(),
                has_snapshot: p.snapshot_json.is_some(),
            },
            Self::OperationStarted(p) => Facts::OperationStarted {
                idempotency_key_digest: p.idempotency_key_digest.as_ref().map(|d| d.as_str()),
                approval_id: p.approval_id.as_ref().map(|a| a.as_str()),
            },
            Self::GateEvaluated(g) => Facts::Gate {
                level: g.level,
                verdict: g.verdict,
            },
            Self::ExceptionGranted(e) => Facts::Exception {
                gate_record_id: e.gate_record_id.as_str(),
            },
            Self::OperationDenied(_)
            | Self::CallableCompleted(_)
            | Self::CallableFailed(_)
            | Self::OperationCancelled(_)
            | Self::OperationTimedOut(_)
            | Self::ExternalResultAmbiguous(_) => Facts::Terminal,
            Self::TaskClosed(c) => Facts::TaskClosed {
                boundary: c.task_boundary_id.as_str(),
                disposition: c.disposition,
                operations: c.operations,
                terminals: c.terminals,
                exceptions: c.exceptions,
            },
            Self::RecordSuperseded(s) => Facts::Superseded {
                sequence: s.superseded_sequence,
                record_type: s.superseded_record_type,
            },
        }
    }
}

/// A checked payload: its facts borrowed from the JSON value, or (when the fast check could
/// not vouch for it) the typed payload they are read from.
#[derive(Debug)]
pub(crate) enum Checked<'a> {
    /// The fast check accepted it.
    Fast(Facts<&'a str>),
    /// The typed parse accepted it.
    Typed(Box<Payload>),
}

impl Checked<'_> {
    /// The facts.
    pub(crate) fn facts(&self) -> Facts<&str> {
        match self {
            Self::Fast(f) => *f,
            Self::Typed(p) => p.facts(),
        }
    }
}

/// What a checked payload's facts are read from: a [`Checked`] payload, or facts owned.
pub(crate) trait HasFacts {
    /// The facts.
    fn facts(&self) -> Facts<&str>;
}

impl HasFacts for Checked<'_> {
    fn facts(&self) -> Facts<&str> {
        Checked::facts(self)
    }
}

impl HasFacts for Facts<String> {
    fn facts(&self) -> Facts<&str> {
        self.as_str()
    }
}

/// Checks `value` as the payload of `record_type` (exactly what [`payload::parse`] accepts; its
/// error when refused).
pub(crate) fn check(record_type: RecordType, value: &Value) -> Result<Checked<'_>, String> {
    match fast(record_type, value) {
        Some(facts) => {
            debug_assert!(
                payload::parse(record_type, value).is_ok_and(|p| p.facts() == facts),
                "the fast payload check accepted what the typed parse refuses (or read other facts): {record_type:?} {value}"
            );
            Ok(Checked::Fast(facts))
        }
        None => payload::parse(record_type, value).map(|p| Checked::Typed(Box::new(p))),
    }
}

/// The fast check: `Some` only for a payload the typed parse accepts with these facts.
pub(crate) fn fast(record_type: RecordType, value: &Value) -> Option<Facts<&str>> {
    let Value::Object(map) = value else {
        return None;
    };
    match record_type {
        RecordType::PolicyBound => policy_bound(map),
        RecordType::OperationStarted => operation_started(map),
        RecordType::GateEvaluated => gate_evaluated(map),
        RecordType::ExceptionGranted => exception_granted(map),
        RecordType::OperationDenied => operation_denied(map),
        RecordType::CallableCompleted => callable_completed(map),
        RecordType::CallableFailed => callable_failed(map),
        RecordType::OperationCancelled => operation_cancelled(map),
        RecordType::OperationTimedOut => operation_timed_out(map),
        RecordType::ExternalResultAmbiguous => external_result_ambiguous(map),
        RecordType::TaskClosed => task_closed(map),
        RecordType::RecordSuperseded => record_superseded(map),
    }
}

// Field checks, each at least as strict as the type's own `Deserialize` (and `new`).

/// `payload::Label` / `payload::RuleText`: 1 to `max` bytes, no control characters.
fn text(v: &Value, max: usize) -> Option<&str> {
    let s = v.as_str()?;
    let ok = !s.is_empty()
        && s.len() <= max
        && if s.is_ascii() {
            !s.bytes().any(|b| b < 0x20 || b == 0x7f)
        } else {
            !s.chars().any(char::is_control)
        };
    ok.then_some(s)
}

fn label(v: &Value) -> Option<&str> {
    text(v, MAX_LABEL_LEN)
}

/// Any identifier of the contracts (`RequestId`, `RecordId`, …): their one rule, borrowed (every
/// id type shares it).
fn id(v: &Value) -> Option<&str> {
    v.as_str().filter(|s| RecordId::is_valid(s))
}

/// `Digest`: the contracts' rule, borrowed.
fn digest(v: &Value) -> Option<&str> {
    v.as_str().filter(|s| Digest::is_valid(s))
}

fn uint(v: &Value) -> Option<u64> {
    v.as_u64()
}

fn boolean(v: &Value) -> Option<bool> {
    v.as_bool()
}

/// A unit enum of the contracts or of this crate, read by its own `Deserialize` (which
/// allocates nothing for a unit variant).
fn unit<'a, T: Deserialize<'a>>(v: &'a Value) -> Option<T> {
    T::deserialize(v).ok()
}

/// An optional field's value: `null` is `None` (as serde reads an `Option`), anything else must
/// pass `f`.
fn optional<'a, T>(v: &'a Value, f: impl Fn(&'a Value) -> Option<T>) -> Option<Option<T>> {
    match v {
        Value::Null => Some(None),
        v => f(v).map(Some),
    }
}

/// Marks a required field seen (`Some(())` once its value passed).
fn seen(flag: &mut bool, ok: Option<impl Sized>) -> Option<()> {
    ok.map(|_| *flag = true)
}

fn principal(v: &Value) -> Option<()> {
    let (mut id_seen, mut kind_seen) = (false, false);
    for (k, v) in v.as_object()? {
        match k.as_str() {
            "id" => seen(&mut id_seen, id(v))?,
            "kind" => seen(&mut kind_seen, unit::<PrincipalKind>(v))?,
            _ => return None,
        }
    }
    (id_seen && kind_seen).then_some(())
}

/// `ExecutionScopeRef`, internally tagged by `kind`.
fn scope(v: &Value) -> Option<()> {
    let map = v.as_object()?;
    let durable = match map.get("kind")?.as_str()? {
        "ephemeral" => false,
        "durable_run" => true,
        _ => return None,
    };
    let mut required = false;
    for (k, v) in map {
        match (k.as_str(), durable) {
            ("kind", _) => {}
            ("scope_id", false) | ("run_id", true) => seen(&mut required, id(v))?,
            ("owner_attempt_id", true) => {
                optional(v, id)?;
            }
            _ => return None,
        }
    }
    required.then_some(())
}

fn terminal_counts(v: &Value) -> Option<TerminalCounts> {
    let mut c = [None; 6];
    for (k, v) in v.as_object()? {
        let i = match k.as_str() {
            "completed" => 0,
            "failed" => 1,
            "denied" => 2,
            "cancelled" => 3,
            "timed_out" => 4,
            "ambiguous" => 5,
            _ => return None,
        };
        c[i] = Some(uint(v)?);
    }
    Some(TerminalCounts {
        completed: c[0]?,
        failed: c[1]?,
        denied: c[2]?,
        cancelled: c[3]?,
        timed_out: c[4]?,
        ambiguous: c[5]?,
    })
}

// One function per record type: one pass over the payload's fields (an unknown one refuses),
// then the required ones and the type's own rules, as `payload::parse` checks them.

fn policy_bound(map: &Map<String, Value>) -> Option<Facts<&str>> {
    let (mut boundary, mut policy, mut snapshot) = (None, None, None);
    for (k, v) in map {
        match k.as_str() {
            "task_boundary_id" => boundary = Some(label(v)?),
            "policy_digest" => policy = Some(digest(v)?),
            "snapshot_json" => snapshot = optional(v, Value::as_str)?,
            _ => return None,
        }
    }
    if snapshot == Some("") {
        return None;
    }
    Some(Facts::PolicyBound {
        boundary: boundary?,
        digest: policy?,
        has_snapshot: snapshot.is_some(),
    })
}

fn operation_started(map: &Map<String, Value>) -> Option<Facts<&str>> {
    let mut required = [false; 10];
    let (mut profile, mut key, mut approval, mut receipt) = (None, None, None, None);
    for (k, v) in map {
        match k.as_str() {
            "request_id" => seen(&mut required[0], id(v))?,
            "attempt" => seen(
                &mut required[1],
                uint(v).filter(|a| *a >= 1 && *a <= u64::from(u32::MAX)),
            )?,
            "action" => seen(&mut required[2], label(v))?,
            "action_version" => {
                optional(v, label)?;
            }
            "request_digest" => seen(&mut required[3], digest(v))?,
            "arguments_digest" => seen(&mut required[4], digest(v))?,
            "principal" => seen(&mut required[5], principal(v))?,
            "tenant_id" | "session_id" => {
                optional(v, id)?;
            }
            "scope" => seen(&mut required[6], scope(v))?,
            "backend" => seen(&mut required[7], label(v))?,
            "capability_digest" => {
                optional(v, digest)?;
            }
            "policy_digest" => seen(&mut required[8], digest(v))?,
            "profile" => {
                profile = Some(unit::<RuntimeProfile>(v)?);
                required[9] = true;
            }
            "idempotency_key_digest" => key = optional(v, digest)?,
            "approval_id" => approval = optional(v, id)?,
            "approval_receipt_digest" => receipt = optional(v, digest)?,
            _ => return None,
        }
    }
    if !required.iter().all(|r| *r)
        || !matches!(
            profile,
            Some(RuntimeProfile::Governed | RuntimeProfile::Certifiable)
        )
        || approval.is_some() != receipt.is_some()
    {
        return None;
    }
    Some(Facts::OperationStarted {
        idempotency_key_digest: key,
        approval_id: approval,
    })
}

fn gate_evaluated(map: &Map<String, Value>) -> Option<Facts<&str>> {
    let mut required = [false; 4];
    let (mut level, mut verdict) = (None, None);
    for (k, v) in map {
        match k.as_str() {
            "gate" => seen(&mut required[0], label(v))?,
            "stage" => seen(&mut required[1], unit::<Stage>(v))?,
            "level" => level = Some(unit::<GateLevel>(v)?),
            "verdict" => verdict = Some(unit::<GateVerdict>(v)?),
            "reason_code" => seen(&mut required[2], unit::<ReasonCode>(v))?,
            "rule" => {
                optional(v, |v| text(v, MAX_RULE_LEN))?;
            }
            "source" => {
                optional(v, label)?;
            }
            "arguments_digest" => seen(&mut required[3], digest(v))?,
            "recheck" => {
                boolean(v)?;
            }
            _ => return None,
        }
    }
    if !required.iter().all(|r| *r) {
        return None;
    }
    Some(Facts::Gate {
        level: level?,
        verdict: verdict?,
    })
}

fn exception_granted(map: &Map<String, Value>) -> Option<Facts<&str>> {
    let mut required = [false; 3];
    let mut gate = None;
    for (k, v) in map {
        match k.as_str() {
            "gate_record_id" => gate = Some(id(v)?),
            "exception_id" => seen(&mut required[0], label(v))?,
            "authority" => seen(&mut required[1], label(v))?,
            "granted_by" => {
                optional(v, principal)?;
            }
            "expires_at" => {
                optional(v, uint)?;
            }
            "arguments_digest" => seen(&mut required[2], digest(v))?,
            _ => return None,
        }
    }
    if !required.iter().all(|r| *r) {
        return None;
    }
    Some(Facts::Exception {
        gate_record_id: gate?,
    })
}

fn operation_denied(map: &Map<String, Value>) -> Option<Facts<&str>> {
    let mut required = [false; 3];
    let (mut disposition, mut approval, mut authority) = (None, None, None);
    for (k, v) in map {
        match k.as_str() {
            "disposition" => disposition = Some(unit::<DenialKind>(v)?),
            "reason_code" => seen(&mut required[0], unit::<ReasonCode>(v))?,
            "evaluator" => seen(&mut required[1], label(v))?,
            "deciding_gate_record_id" => {
                optional(v, id)?;
            }
            "approval_id" => approval = optional(v, id)?,
            "authority" => authority = optional(v, label)?,
            "gates_evaluated" => seen(&mut required[2], uint(v))?,
            "stop" => {
                boolean(v)?;
            }
            _ => return None,
        }
    }
    if !required.iter().all(|r| *r)
        || (disposition? == DenialKind::Escalate && (approval.is_none() || authority.is_none()))
    {
        return None;
    }
    Some(Facts::Terminal)
}

fn callable_completed(map: &Map<String, Value>) -> Option<Facts<&str>> {
    let mut required = [false; 2];
    for (k, v) in map {
        match k.as_str() {
            "result_digest" => seen(&mut required[0], digest(v))?,
            "duration_ms" => seen(&mut required[1], uint(v))?,
            "degraded" => {
                boolean(v)?;
            }
            "advisory_denials" => {
                uint(v)?;
            }
            _ => return None,
        }
    }
    required.iter().all(|r| *r).then_some(Facts::Terminal)
}

fn callable_failed(map: &Map<String, Value>) -> Option<Facts<&str>> {
    let mut required = [false; 2];
    for (k, v) in map {
        match k.as_str() {
            "failure_kind" => seen(&mut required[0], label(v))?,
            "call_executed" => seen(&mut required[1], boolean(v))?,
            "message_digest" => {
                optional(v, digest)?;
            }
            "duration_ms" => {
                uint(v)?;
            }
            _ => return None,
        }
    }
    required.iter().all(|r| *r).then_some(Facts::Terminal)
}

fn operation_cancelled(map: &Map<String, Value>) -> Option<Facts<&str>> {
    let mut executed = false;
    for (k, v) in map {
        match k.as_str() {
            "call_executed" => seen(&mut executed, boolean(v))?,
            _ => return None,
        }
    }
    executed.then_some(Facts::Terminal)
}

fn operation_timed_out(map: &Map<String, Value>) -> Option<Facts<&str>> {
    let mut executed = false;
    for (k, v) in map {
        match k.as_str() {
            "call_executed" => seen(&mut executed, boolean(v))?,
            "deadline" => {
                optional(v, uint)?;
            }
            _ => return None,
        }
    }
    executed.then_some(Facts::Terminal)
}

fn external_result_ambiguous(map: &Map<String, Value>) -> Option<Facts<&str>> {
    let mut cause = false;
    for (k, v) in map {
        match k.as_str() {
            "cause" => seen(&mut cause, label(v))?,
            "recovered" => {
                boolean(v)?;
            }
            _ => return None,
        }
    }
    cause.then_some(Facts::Terminal)
}

fn task_closed(map: &Map<String, Value>) -> Option<Facts<&str>> {
    let (mut boundary, mut disposition, mut operations, mut terminals, mut exceptions) =
        (None, None, None, None, None);
    for (k, v) in map {
        match k.as_str() {
            "task_boundary_id" => boundary = Some(label(v)?),
            "disposition" => disposition = Some(unit::<CloseDisposition>(v)?),
            "operations" => operations = Some(uint(v)?),
            "terminals" => terminals = Some(terminal_counts(v)?),
            "exceptions" => exceptions = Some(uint(v)?),
            _ => return None,
        }
    }
    Some(Facts::TaskClosed {
        boundary: boundary?,
        disposition: disposition?,
        operations: operations?,
        terminals: terminals?,
        exceptions: exceptions?,
    })
}

fn record_superseded(map: &Map<String, Value>) -> Option<Facts<&str>> {
    let (mut sequence, mut record_type, mut reason, mut corrected) = (None, None, false, None);
    for (k, v) in map {
        match k.as_str() {
            "superseded_sequence" => sequence = Some(uint(v)?),
            "superseded_record_type" => record_type = Some(unit::<RecordType>(v)?),
            "reason" => seen(&mut reason, label(v))?,
            "corrected_payload" => corrected = optional(v, Some)?,
            _ => return None,
        }
    }
    let record_type = record_type?;
    if let Some(corrected) = corrected {
        fast(record_type, corrected)?;
    }
    reason.then_some(Facts::Superseded {
        sequence: sequence?,
        record_type,
    })
}

#[cfg(test)]
mod tests {
    //! The fast check against the typed parse: on generated payloads (valid examples of every
    //! record type, then keys dropped, added or given other values), whatever the fast check
    //! accepts the typed parse accepts with the same facts, and it accepts the valid examples.
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    const D: &str = "blake3:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn examples() -> Vec<(RecordType, Value)> {
        let counts = json!({"completed": 1, "failed": 0, "denied": 2, "cancelled": 0, "timed_out": 0, "ambiguous": 0});
        vec![
            (
                RecordType::PolicyBound,
                json!({"task_boundary_id": "t-1", "policy_digest": D, "snapshot_json": "{\"a\":1}"}),
            ),
            (
                RecordType::OperationStarted,
                json!({"request_id": "req-1", "attempt": 2, "action": "bash", "action_version": "1",
                       "request_digest": D, "arguments_digest": D,
                       "principal": {"id": "alice", "kind": "user"}, "tenant_id": "acme",
                       "session_id": "s-1", "scope": {"kind": "durable_run", "run_id": "r-1", "owner_attempt_id": "a-1"},
                       "backend": "in_process", "capability_digest": D, "policy_digest": D,
                       "profile": "certifiable", "idempotency_key_digest": D,
                       "approval_id": "ap-1", "approval_receipt_digest": D}),
            ),
            (
                RecordType::GateEvaluated,
                json!({"gate": "policy", "stage": "authorize", "level": "soft", "verdict": "deny",
                       "reason_code": "policy_rule", "rule": "bash(rm:*)", "source": "project",
                       "arguments_digest": D, "recheck": true}),
            ),
            (
                RecordType::ExceptionGranted,
                json!({"gate_record_id": "rec_1", "exception_id": "e-1", "authority": "security",
                       "granted_by": {"id": "bob", "kind": "service"}, "expires_at": 5, "arguments_digest": D}),
            ),
            (
                RecordType::OperationDenied,
                json!({"disposition": "escalate", "reason_code": "policy_rule", "evaluator": "reducer",
                       "deciding_gate_record_id": "rec_2", "approval_id": "ap-2", "authority": "lead",
                       "gates_evaluated": 3, "stop": true}),
            ),
            (
                RecordType::CallableCompleted,
                json!({"result_digest": D, "duration_ms": 4, "degraded": true, "advisory_denials": 1}),
            ),
            (
                RecordType::CallableFailed,
                json!({"failure_kind": "exit_status", "call_executed": true, "message_digest": D, "duration_ms": 9}),
            ),
            (
                RecordType::OperationCancelled,
                json!({"call_executed": false}),
            ),
            (
                RecordType::OperationTimedOut,
                json!({"call_executed": true, "deadline": 10}),
            ),
            (
                RecordType::ExternalResultAmbiguous,
                json!({"cause": "transport_lost", "recovered": true}),
            ),
            (
                RecordType::TaskClosed,
                json!({"task_boundary_id": "t-1", "disposition": "completed", "operations": 3,
                       "terminals": counts, "exceptions": 1}),
            ),
            (
                RecordType::RecordSuperseded,
                json!({"superseded_sequence": 4, "superseded_record_type": "gate_evaluated",
                       "reason": "wrong_level",
                       "corrected_payload": {"gate": "policy", "stage": "authorize", "level": "hard",
                                             "verdict": "deny", "reason_code": "policy_rule", "arguments_digest": D}}),
            ),
        ]
    }

    /// Values a field may be given instead: every JSON type, and the edges of the field checks.
    fn replacements() -> Vec<Value> {
        let counts = json!({"completed": 0, "failed": 0, "denied": 0, "cancelled": 0, "timed_out": 0, "ambiguous": 0});
        let mut extra_count = counts.clone();
        extra_count["more"] = json!(1);
        let mut missing_count = counts.clone();
        missing_count.as_object_mut().unwrap().remove("failed");
        vec![
            Value::Null,
            json!(true),
            json!(0),
            json!(1),
            json!(-1),
            json!(4_294_967_296_u64),
            json!(u64::MAX),
            json!(1.5),
            json!(""),
            json!("x"),
            json!("a b"),
            json!("tab\there"),
            json!("bell\u{7}"),
            json!("rec_1"),
            json!(D),
            json!(D.to_uppercase()),
            json!(&D[..70]),
            json!("x".repeat(256)),
            json!("x".repeat(257)),
            json!("x".repeat(1024)),
            json!("x".repeat(1025)),
            json!("é".repeat(129)),
            json!([]),
            json!({}),
            json!(["user"]),
            json!({"id": "alice", "kind": "user"}),
            json!({"id": "alice", "kind": "robot"}),
            json!({"id": "al ice", "kind": "user"}),
            json!({"id": "alice", "kind": "user", "x": 1}),
            json!({"kind": "ephemeral", "scope_id": "s"}),
            json!({"kind": "ephemeral", "scope_id": "s", "x": 1}),
            json!({"kind": "ephemeral"}),
            json!({"kind": "durable_run", "run_id": "r"}),
            json!({"kind": "durable_run", "run_id": "r", "owner_attempt_id": null}),
            json!({"kind": "durable_run", "run_id": "r", "scope_id": "s"}),
            json!({"kind": 0, "scope_id": "s"}),
            json!("governed"),
            json!("durable"),
            json!("minimal"),
            json!("hard"),
            json!("advisory"),
            json!("allow"),
            json!("deny"),
            json!("escalate"),
            json!("abandoned"),
            json!("authorize"),
            json!("policy_default"),
            json!("policy_bound"),
            json!("callable_completed"),
            json!("user"),
            counts,
            extra_count,
            missing_count,
            json!({"call_executed": true}),
            json!({"result_digest": D, "duration_ms": 1}),
            json!({"result_digest": D}),
        ]
    }

    fn keys() -> Vec<&'static str> {
        let mut keys: Vec<&str> = vec!["unknown", "arguments", "secret"];
        for (_, v) in examples() {
            for k in v.as_object().unwrap().keys() {
                let k: &'static str = Box::leak(k.clone().into_boxed_str());
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
        keys
    }

    #[derive(Debug, Clone)]
    enum Edit {
        Remove(usize),
        Set(usize, usize),
    }

    fn edit() -> impl Strategy<Value = Edit> {
        prop_oneof![
            (0usize..64).prop_map(Edit::Remove),
            (0usize..64, 0usize..128).prop_map(|(k, v)| Edit::Set(k, v)),
        ]
    }

    fn config() -> ProptestConfig {
        ProptestConfig::with_cases(if std::env::var_os("CI").is_some() {
            256
        } else {
            4096
        })
    }

    #[test]
    fn the_valid_examples_take_the_fast_path_with_the_typed_facts() {
        for (t, v) in examples() {
            let typed = payload::parse(t, &v).unwrap();
            assert_eq!(fast(t, &v), Some(typed.facts()), "{t:?}");
            // Every optional or defaulted field may be absent.
            let required = v.as_object().unwrap().keys().filter(|k| {
                let mut w = v.clone();
                w.as_object_mut().unwrap().remove(k.as_str());
                payload::parse(t, &w).is_err()
            });
            let required: Vec<String> = required.cloned().collect();
            let mut minimal = v.clone();
            minimal
                .as_object_mut()
                .unwrap()
                .retain(|k, _| required.contains(k));
            if payload::parse(t, &minimal).is_ok() {
                assert!(fast(t, &minimal).is_some(), "{t:?} {minimal}");
            }
        }
    }

    fn agree(t: RecordType, value: &Value) {
        if let Some(facts) = fast(t, value) {
            match payload::parse(t, value) {
                Ok(p) => assert_eq!(p.facts(), facts, "{t:?} {value}"),
                Err(e) => panic!("fast accepted, typed refused: {t:?} {value}: {e}"),
            }
        }
    }

    #[test]
    fn every_single_field_edit_agrees() {
        // Exhaustive over one edit: each field of each example (and an unknown one) removed or
        // given each replacement value, checked as its own type and as every other type.
        let examples = examples();
        let pool = replacements();
        for (own, example) in &examples {
            let fields: Vec<&String> = example.as_object().unwrap().keys().collect();
            for (t, _) in &examples {
                for key in fields.iter().map(|k| k.as_str()).chain(["unknown"]) {
                    let mut removed = example.clone();
                    removed.as_object_mut().unwrap().remove(key);
                    agree(*t, &removed);
                    for v in &pool {
                        let mut set = example.clone();
                        set.as_object_mut()
                            .unwrap()
                            .insert(key.to_owned(), v.clone());
                        agree(*t, &set);
                        if t == own {
                            // The same edit inside a correction of this type.
                            let correction = json!({"superseded_sequence": 1,
                                "superseded_record_type": serde_json::to_value(t).unwrap(),
                                "reason": "r", "corrected_payload": set});
                            agree(RecordType::RecordSuperseded, &correction);
                        }
                    }
                }
            }
        }
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn what_the_fast_check_accepts_the_typed_parse_accepts(
            which in 0usize..12,
            as_type in proptest::option::of(0usize..12),
            edits in prop::collection::vec(edit(), 0..4),
        ) {
            let examples = examples();
            let (own, mut value) = examples[which].clone();
            // Sometimes check one type's payload as another's.
            let t = as_type.map_or(own, |i| examples[i].0);
            let keys = keys();
            let pool = replacements();
            let map = value.as_object_mut().unwrap();
            for e in edits {
                match e {
                    Edit::Remove(k) => {
                        map.remove(keys[k % keys.len()]);
                    }
                    Edit::Set(k, v) => {
                        map.insert(keys[k % keys.len()].to_owned(), pool[v % pool.len()].clone());
                    }
                }
            }
            if let Some(facts) = fast(t, &value) {
                match payload::parse(t, &value) {
                    Ok(p) => prop_assert_eq!(p.facts(), facts),
                    Err(e) => prop_assert!(false, "fast accepted, typed refused: {t:?} {value}: {e}"),
                }
            }
        }
    }
}
