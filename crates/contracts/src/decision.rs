//! Decisions: the closed [`Disposition`], [`DecisionReason`] and [`AdmissionDecision`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::approval::ApprovalRequest;
use crate::error::ContractError;
use crate::ids::Timestamp;
use crate::scope::EvidenceRef;

/// What a stage decided about a call. Closed: there is no fifth answer.
///
/// `Defer` is capacity only (try again later); a policy "ask" is `Escalate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Disposition {
    /// The call may proceed past this stage.
    Allow,
    /// Capacity, quota or rate: not now, maybe later. Never a security verdict.
    Defer,
    /// Terminal for this attempt.
    Deny,
    /// Needs approval from a named authority; never an implicit allow, never blocks a worker.
    Escalate,
}

/// Why a decision was made, as a stable code a program can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    /// A policy rule decided.
    PolicyRule,
    /// No rule matched; the policy's default decided.
    PolicyDefault,
    /// A programmable permission decided.
    Permission,
    /// The command or arguments could not be parsed or split: denied, whatever the default.
    Unparseable,
    /// The program to run cannot be known statically.
    UnknownProgram,
    /// The session gate refused.
    GateDenied,
    /// A content guard (the policy's `[guards]`: size, deny patterns, secrets) blocked.
    Guard,
    /// A precondition (the tool's own argument check, or the composition's) refused.
    Precondition,
    /// The arguments do not match the tool's schema.
    InvalidArguments,
    /// No action answers to the requested name or version.
    UnknownAction,
    /// The request disagrees with its trusted context.
    ContextMismatch,
    /// A required containment is not proven by the selected backend.
    Containment,
    /// Capacity or rate limits.
    Capacity,
    /// An approval was granted (by a reviewer, a human or a receipt).
    Approved,
    /// An approval was refused or the reviewer's denial bound was reached.
    ApprovalRefused,
    /// A mode (plan only, audit only, …) does not allow the call.
    Mode,
    /// An evaluator failed; failures never allow.
    EvaluatorFailed,
    /// A transform changed the arguments and the re-check refused them.
    Transform,
    /// Evidence could not be recorded where the profile requires it.
    Evidence,
}

/// Why: a code, a message a person can read, and what decided.
///
/// ```
/// use warden_contracts::{DecisionReason, ReasonCode};
/// let r = DecisionReason::new(ReasonCode::PolicyRule, "denied by bash(rm:*)")
///     .with_rule("bash(rm:*)")
///     .with_source("managed");
/// assert_eq!(r.rule.as_deref(), Some("bash(rm:*)"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionReason {
    /// The stable code.
    pub code: ReasonCode,
    /// A human-readable explanation (no secrets).
    pub message: String,
    /// The rule that decided, as written (`bash(rm:*)`), if a rule did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The source of that rule, if a rule did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The subject that decided a compound call (for example one command of a pipeline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

impl DecisionReason {
    /// A reason with a code and a message.
    pub fn new(code: ReasonCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            rule: None,
            source: None,
            subject: None,
        }
    }
    /// The same reason citing a rule.
    pub fn with_rule(mut self, rule: impl Into<String>) -> Self {
        self.rule = Some(rule.into());
        self
    }
    /// The same reason citing a source.
    pub fn with_source(mut self, source: impl Into<String>) -> Self {
        self.source = Some(source.into());
        self
    }
    /// The same reason citing the deciding subject.
    pub fn with_subject(mut self, subject: impl Into<String>) -> Self {
        self.subject = Some(subject.into());
        self
    }
}

/// A stage's decision about one call, with who decided, why, and its evidence.
///
/// Its invariants are checked on construction and deserialization: `retry_at` only with
/// [`Disposition::Defer`]; an approval request exactly when [`Disposition::Escalate`].
///
/// ```
/// use warden_contracts::*;
/// let d = AdmissionDecision::new(
///     Disposition::Deny,
///     DecisionReason::new(ReasonCode::PolicyRule, "denied"),
///     "policy",
/// ).unwrap();
/// assert_eq!(d.disposition(), Disposition::Deny);
/// // An escalation must say whom to ask.
/// assert!(AdmissionDecision::new(
///     Disposition::Escalate, DecisionReason::new(ReasonCode::PolicyRule, "ask"), "policy",
/// ).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, try_from = "AdmissionDecisionWire")]
pub struct AdmissionDecision {
    disposition: Disposition,
    reason: DecisionReason,
    evaluator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    evidence: Vec<EvidenceRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    approval: Option<ApprovalRequest>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AdmissionDecisionWire {
    disposition: Disposition,
    reason: DecisionReason,
    evaluator: String,
    #[serde(default)]
    evidence: Vec<EvidenceRef>,
    #[serde(default)]
    retry_at: Option<Timestamp>,
    #[serde(default)]
    approval: Option<ApprovalRequest>,
}

impl TryFrom<AdmissionDecisionWire> for AdmissionDecision {
    type Error = ContractError;
    fn try_from(w: AdmissionDecisionWire) -> Result<Self, Self::Error> {
        Self {
            evidence: w.evidence,
            retry_at: w.retry_at,
            approval: w.approval,
            ..Self::bare(w.disposition, w.reason, w.evaluator)
        }
        .validated()
    }
}

impl AdmissionDecision {
    /// A decision for `Allow` or `Deny` (use [`Self::defer`] and [`Self::escalate`] for the
    /// others, which carry more).
    pub fn new(
        disposition: Disposition,
        reason: DecisionReason,
        evaluator: impl Into<String>,
    ) -> Result<Self, ContractError> {
        Self::bare(disposition, reason, evaluator.into()).validated()
    }

    /// A decision with nothing but its disposition, reason and evaluator (not validated).
    fn bare(disposition: Disposition, reason: DecisionReason, evaluator: String) -> Self {
        Self {
            disposition,
            reason,
            evaluator,
            evidence: Vec::new(),
            retry_at: None,
            approval: None,
        }
    }

    /// The decision, once [`Self::validate`] accepts it.
    fn validated(self) -> Result<Self, ContractError> {
        self.validate()?;
        Ok(self)
    }

    /// A capacity deferral, optionally saying when to retry.
    pub fn defer(
        reason: DecisionReason,
        evaluator: impl Into<String>,
        retry_at: Option<Timestamp>,
    ) -> Result<Self, ContractError> {
        Self {
            retry_at,
            ..Self::bare(Disposition::Defer, reason, evaluator.into())
        }
        .validated()
    }

    /// An escalation carrying the approval request.
    pub fn escalate(
        reason: DecisionReason,
        evaluator: impl Into<String>,
        approval: ApprovalRequest,
    ) -> Result<Self, ContractError> {
        Self {
            approval: Some(approval),
            ..Self::bare(Disposition::Escalate, reason, evaluator.into())
        }
        .validated()
    }

    /// The same decision with evidence references.
    pub fn with_evidence(mut self, evidence: Vec<EvidenceRef>) -> Self {
        self.evidence = evidence;
        self
    }

    fn validate(&self) -> Result<(), ContractError> {
        check_evaluator(&self.evaluator)?;
        if self.retry_at.is_some() && self.disposition != Disposition::Defer {
            return Err(ContractError::Inconsistent(
                "retry_at is only allowed on a defer decision".into(),
            ));
        }
        match (self.disposition, &self.approval) {
            (Disposition::Escalate, None) => Err(ContractError::Inconsistent(
                "an escalate decision must carry its approval request".into(),
            )),
            (d, Some(_)) if d != Disposition::Escalate => Err(ContractError::Inconsistent(
                "only an escalate decision carries an approval request".into(),
            )),
            _ => Ok(()),
        }
    }

    /// What was decided.
    pub fn disposition(&self) -> Disposition {
        self.disposition
    }
    /// Why.
    pub fn reason(&self) -> &DecisionReason {
        &self.reason
    }
    /// Which evaluator decided (`policy`, `session_gate`, `admission`, a permission's name…).
    pub fn evaluator(&self) -> &str {
        &self.evaluator
    }
    /// Evidence references.
    pub fn evidence(&self) -> &[EvidenceRef] {
        &self.evidence
    }
    /// When to retry a deferral.
    pub fn retry_at(&self) -> Option<Timestamp> {
        self.retry_at
    }
    /// The approval request of an escalation.
    pub fn approval(&self) -> Option<&ApprovalRequest> {
        self.approval.as_ref()
    }
}

/// An evaluator's name must say who decided: blank is refused.
pub(crate) fn check_evaluator(evaluator: &str) -> Result<(), ContractError> {
    if evaluator.trim().is_empty() {
        return Err(ContractError::invalid(
            "evaluator",
            evaluator,
            "must name the evaluator that decided",
        ));
    }
    Ok(())
}
