//! What the lifecycle check and the stores' indexes need from a payload ([`Facts`]), read from
//! the typed payload that the one payload check ([`crate::payload::parse`]) yields.

use warden_contracts::RecordType;

use crate::payload::{CloseDisposition, GateLevel, GateVerdict, Payload, TerminalCounts};

/// What the lifecycle rules and the indexes read from a payload; `S` is `&str` (borrowed from
/// the payload) or `String` (a prepared append's, owned).
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
