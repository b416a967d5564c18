//! What the lifecycle check and the stores' indexes need from a payload ([`Facts`]), read from
//! the typed payload that the one payload check ([`crate::payload::parse`]) yields.

use warden_contracts::RecordType;

use crate::payload::{CloseDisposition, GateLevel, GateVerdict, Payload, TerminalCounts};

/// What the lifecycle rules and the indexes read from a payload, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Facts<'a> {
    /// `policy_bound`.
    PolicyBound {
        boundary: &'a str,
        digest: &'a str,
        has_snapshot: bool,
    },
    /// `operation_started`.
    OperationStarted {
        idempotency_key_digest: Option<&'a str>,
        approval_id: Option<&'a str>,
    },
    /// `gate_evaluated`.
    Gate {
        level: GateLevel,
        verdict: GateVerdict,
    },
    /// `exception_granted`.
    Exception { gate_record_id: &'a str },
    /// One of the six terminal types.
    Terminal,
    /// `task_closed`.
    TaskClosed {
        boundary: &'a str,
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

impl Payload {
    /// The payload's facts.
    pub(crate) fn facts(&self) -> Facts<'_> {
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
