//! Approvals: the loop that answers an escalation with a [`Reviewer`], the reviewer denial
//! bound, and the LionAGI escalation-callback adapter.
//!
//! Escalation never blocks a worker: `execute` returns `Escalated` at once. An approval is a
//! *new attempt*: [`ReviewLoop::resolve`] asks the reviewer, and on approval re-submits the call
//! with a new request id and the receipt, through every stage again (the receipt is bound to the
//! action, the final-argument digest, the policy digest and an expiry, and is used once).
//! Replacement arguments from a reviewer are re-validated and re-authorized like any others.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use warden_contracts::{
    AdmissionDecision, ApprovalReceipt, ApprovalRequest, DecisionReason, Disposition,
    ExecutionContext, ExecutionOutcome, ExecutionRequest, PrincipalRef, ReasonCode, RequestId,
    ReviewVerdict, Reviewer, Timestamp,
};

use crate::admission::Clock;
use crate::cancel::CancelToken;
use crate::error::ApprovalError;
use crate::executor::{ActionExecutor, ExecuteOptions, arguments_digest};
use crate::governed::ExecutionReport;

/// A report for an outcome no new attempt produced (a refusal by the reviewer).
pub(crate) fn outcome_report(outcome: ExecutionOutcome) -> ExecutionReport {
    ExecutionReport {
        outcome,
        operation_id: None,
        receipts: Vec::new(),
        replay_of: None,
        evidence_error: None,
    }
}

/// When the approval loop stops answering: after `consecutive` refusals in a row, or `total`
/// refusals within the last `window` reviews. A zero field means no bound on that axis. Every
/// answer that is not an approval counts as a refusal (a timeout and a failed review
/// included); a reviewer that has not answered yet (`Pending`) counts as nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DenialBound {
    /// Refusals in a row.
    pub consecutive: usize,
    /// Refusals within the window.
    pub total: usize,
    /// The window, in reviews.
    pub window: usize,
}

impl Default for DenialBound {
    /// Three in a row, or ten within the last fifty (Codex's bound).
    fn default() -> Self {
        Self {
            consecutive: 3,
            total: 10,
            window: 50,
        }
    }
}

#[derive(Debug, Default)]
struct History {
    /// `true` for a refusal, newest last, at most `window` entries.
    reviews: VecDeque<bool>,
    consecutive: usize,
}

/// Answers escalations with a reviewer, bounded by a [`DenialBound`]. One loop per run (the
/// bound counts across calls until [`Self::reset`]).
pub struct ReviewLoop {
    reviewer: Arc<dyn Reviewer>,
    bound: DenialBound,
    timeout: Option<Duration>,
    history: Mutex<History>,
    attempts: AtomicU64,
    max_rounds: usize,
}

impl std::fmt::Debug for ReviewLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReviewLoop")
            .field("bound", &self.bound)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// What one review concluded.
enum Answer {
    Approve {
        receipt: ApprovalReceipt,
        arguments: Option<Map<String, Value>>,
    },
    Refuse(String),
    Pending,
}

impl ReviewLoop {
    /// A loop over `reviewer` with the default bound and no timeout.
    pub fn new(reviewer: Arc<dyn Reviewer>) -> Self {
        Self {
            reviewer,
            bound: DenialBound::default(),
            timeout: None,
            history: Mutex::new(History::default()),
            attempts: AtomicU64::new(0),
            max_rounds: 3,
        }
    }

    /// The same loop with another bound.
    pub fn with_bound(mut self, bound: DenialBound) -> Self {
        self.bound = bound;
        self
    }

    /// The same loop giving the reviewer at most `timeout` per review (a timeout is a refusal).
    /// Needs a Tokio runtime with its timer enabled.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Forgets the refusals the bound counts (at the start of a new user turn).
    pub fn reset(&self) {
        *self.history.lock().unwrap_or_else(PoisonError::into_inner) = History::default();
    }

    /// Refusals in a row so far.
    pub fn consecutive_refusals(&self) -> usize {
        self.history
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .consecutive
    }

    /// Answers the escalation `outcome` of `request`: asks the reviewer and, on approval, runs
    /// the call again as a new attempt (new request id, the receipt, every stage). A refusal
    /// answers `Denied` (`approval_refused`); `Pending` returns the escalation unchanged. Errs
    /// with [`ApprovalError::DenialBound`] when this refusal reaches the bound.
    pub async fn resolve(
        &self,
        executor: &ActionExecutor,
        request: &ExecutionRequest,
        context: &ExecutionContext,
        outcome: &ExecutionOutcome,
    ) -> Result<ExecutionOutcome, ApprovalError> {
        self.resolve_cancellable(executor, request, context, outcome, None)
            .await
    }

    /// [`Self::resolve`], with each new attempt cancelled by `cancel` (the caller's
    /// cancellation reaches the approved call too).
    pub async fn resolve_cancellable(
        &self,
        executor: &ActionExecutor,
        request: &ExecutionRequest,
        context: &ExecutionContext,
        outcome: &ExecutionOutcome,
        cancel: Option<&CancelToken>,
    ) -> Result<ExecutionOutcome, ApprovalError> {
        let answered = self
            .resolve_reported(executor, request, context, outcome, cancel)
            .await?;
        Ok(answered.map_or_else(|| outcome.clone(), |report| report.outcome))
    }

    /// [`Self::resolve_cancellable`], answering the report of the last attempt (what governed
    /// evidence recorded for it), or `None` when the reviewer has not answered yet (`Pending`)
    /// and the escalation stands.
    pub async fn resolve_reported(
        &self,
        executor: &ActionExecutor,
        request: &ExecutionRequest,
        context: &ExecutionContext,
        outcome: &ExecutionOutcome,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<ExecutionReport>, ApprovalError> {
        let ExecutionOutcome::Escalated { approval, .. } = outcome else {
            return Err(ApprovalError::NotEscalated {
                status: outcome.status(),
            });
        };
        let mut approval = approval.clone();
        let mut arguments = request.arguments().clone();
        let mut receipts: Vec<ApprovalReceipt> = Vec::new();
        let mut current: Option<ExecutionReport> = None;
        for _ in 0..self.max_rounds {
            match self.ask(&approval, &arguments).await {
                Answer::Pending => return Ok(current),
                Answer::Refuse(message) => {
                    let reason = DecisionReason::new(ReasonCode::ApprovalRefused, message);
                    if let Ok(d) =
                        AdmissionDecision::new(Disposition::Deny, reason.clone(), "reviewer")
                    {
                        executor.observe_review(request.request_id(), d);
                    }
                    let denied = ExecutionOutcome::Denied {
                        request_id: request.request_id().clone(),
                        profile: executor.profile(),
                        reason,
                        evaluator: "reviewer".into(),
                        stop: false,
                        evidence: Vec::new(),
                    };
                    return self
                        .refused(denied)
                        .map(|outcome| Some(outcome_report(outcome)));
                }
                Answer::Approve {
                    receipt,
                    arguments: replacement,
                } => {
                    self.record(false);
                    if let Ok(d) = AdmissionDecision::new(
                        Disposition::Allow,
                        DecisionReason::new(
                            ReasonCode::Approved,
                            format!("approved by {}", receipt.approver().id),
                        ),
                        "reviewer",
                    ) {
                        executor.observe_review(request.request_id(), d);
                    }
                    if let Some(r) = replacement {
                        arguments = r;
                    }
                    receipts.push(receipt);
                    let retry = self.new_attempt(request, &arguments)?;
                    let mut options = ExecuteOptions::new();
                    options.approvals = receipts.clone();
                    options.cancel = cancel.cloned();
                    let report = executor.execute_reported(retry, context, options).await;
                    match &report.outcome {
                        ExecutionOutcome::Escalated { approval: next, .. } => {
                            approval = next.clone();
                            current = Some(report);
                        }
                        _ => return Ok(Some(report)),
                    }
                }
            }
        }
        Ok(current)
    }

    fn refused(&self, denied: ExecutionOutcome) -> Result<ExecutionOutcome, ApprovalError> {
        let (consecutive, in_window) = self.record(true);
        let b = self.bound;
        let hit = (b.consecutive > 0 && consecutive >= b.consecutive)
            || (b.total > 0 && in_window >= b.total);
        if hit {
            tracing::warn!(consecutive, in_window, "reviewer denial bound reached");
            return Err(ApprovalError::DenialBound {
                consecutive,
                in_window,
                window: b.window,
                outcome: Box::new(denied),
            });
        }
        Ok(denied)
    }

    /// Records one review; returns (consecutive refusals, refusals in the window).
    fn record(&self, refusal: bool) -> (usize, usize) {
        let mut h = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        h.consecutive = if refusal { h.consecutive + 1 } else { 0 };
        h.reviews.push_back(refusal);
        let window = if self.bound.window == 0 {
            usize::MAX
        } else {
            self.bound.window
        };
        while h.reviews.len() > window {
            h.reviews.pop_front();
        }
        let in_window = h.reviews.iter().filter(|r| **r).count();
        (h.consecutive, in_window)
    }

    async fn ask(&self, approval: &ApprovalRequest, arguments: &Map<String, Value>) -> Answer {
        let review = std::pin::pin!(self.reviewer.review_call(approval, arguments));
        let review = crate::unwind::CatchUnwind::new(review);
        let verdict = match self.timeout {
            None => review.await,
            Some(t) => match tokio::time::timeout(t, review).await {
                Ok(v) => v,
                Err(_) => return Answer::Refuse("the reviewer timed out".into()),
            },
        };
        match verdict {
            Err(panic) => Answer::Refuse(format!("the review failed: {panic}")),
            Ok(ReviewVerdict::Pending {}) => Answer::Pending,
            Ok(ReviewVerdict::Refused { reason }) => Answer::Refuse(reason.message),
            Ok(ReviewVerdict::Approved { receipt }) => Answer::Approve {
                receipt,
                arguments: None,
            },
            Ok(ReviewVerdict::ApprovedWithArguments { receipt, arguments }) => Answer::Approve {
                receipt,
                arguments: Some(arguments),
            },
        }
    }

    fn new_attempt(
        &self,
        request: &ExecutionRequest,
        arguments: &Map<String, Value>,
    ) -> Result<ExecutionRequest, ApprovalError> {
        let n = self.attempts.fetch_add(1, Ordering::Relaxed) + 1;
        let base: String = request.request_id().as_str().chars().take(200).collect();
        let bad = |e: warden_contracts::ContractError| ApprovalError::Attempt {
            message: e.to_string(),
        };
        let id = RequestId::new(format!("{base}~approved-{n}")).map_err(bad)?;
        let mut next = ExecutionRequest::new(
            id,
            request.action().clone(),
            Value::Object(arguments.clone()),
            request.execution_scope().clone(),
        )
        .map_err(bad)?
        .with_metadata(request.metadata().clone());
        if let Some(p) = request.principal_claim() {
            next = next.with_principal_claim(p.clone());
        }
        if let Some(s) = request.session_id() {
            next = next.with_session(s.clone());
        }
        if let Some(d) = request.deadline() {
            next = next.with_deadline(d);
        }
        if let Some(k) = request.idempotency_key() {
            next = next.with_idempotency_key(k).map_err(bad)?;
        }
        Ok(next)
    }
}

/// A LionAGI `on_escalate` callback's answer, as the adapter reads it.
pub type CallbackResult = Result<Value, String>;

/// The LionAGI escalation-callback semantics (docs/design/executor.md#escalation-and-approvals) as
/// a [`Reviewer`]: the callback sees the action and the arguments; `true` approves them unchanged,
/// a JSON object approves *those* arguments instead (they are then re-validated and re-checked like
/// any others), anything else refuses, and an error or a panic refuses.
pub struct EscalationCallback<F> {
    callback: F,
    approver: PrincipalRef,
    clock: Arc<dyn Clock>,
    ttl_ms: u64,
}

impl<F> std::fmt::Debug for EscalationCallback<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EscalationCallback")
            .field("approver", &self.approver)
            .finish_non_exhaustive()
    }
}

impl<F> EscalationCallback<F>
where
    F: Fn(&str, &Map<String, Value>) -> CallbackResult + Send + Sync,
{
    /// Wraps `callback(action, arguments)`; receipts name `approver` and live `ttl_ms`.
    pub fn new(callback: F, approver: PrincipalRef, clock: Arc<dyn Clock>, ttl_ms: u64) -> Self {
        Self {
            callback,
            approver,
            clock,
            ttl_ms: ttl_ms.max(1),
        }
    }

    fn receipt(
        &self,
        request: &ApprovalRequest,
        arguments: &Map<String, Value>,
    ) -> Result<ApprovalReceipt, String> {
        local_receipt(
            request,
            arguments,
            self.approver.clone(),
            self.clock.now(),
            self.ttl_ms,
        )
    }
}

/// An unsigned receipt by `approver` for exactly `request` with `arguments` (their digest),
/// issued at `now` and valid `ttl_ms`: what a reviewer in the runtime's own composition (the
/// local-operator model) answers an escalation with. It counts only under a policy that
/// declares no `[approvers]`.
pub fn local_receipt(
    request: &ApprovalRequest,
    arguments: &Map<String, Value>,
    approver: PrincipalRef,
    now: Timestamp,
    ttl_ms: u64,
) -> Result<ApprovalReceipt, String> {
    let digest = arguments_digest(arguments).map_err(|e| e.to_string())?;
    ApprovalReceipt::new(
        request.approval_id.clone(),
        request.action.clone(),
        digest,
        request.policy_digest.clone(),
        approver,
        now,
        Timestamp(now.unix_millis().saturating_add(ttl_ms)),
    )
    .map_err(|e| e.to_string())
}

fn refused(message: impl Into<String>) -> ReviewVerdict {
    ReviewVerdict::Refused {
        reason: DecisionReason::new(ReasonCode::ApprovalRefused, message),
    }
}

#[async_trait]
impl<F> Reviewer for EscalationCallback<F>
where
    F: Fn(&str, &Map<String, Value>) -> CallbackResult + Send + Sync,
{
    async fn review(&self, _request: &ApprovalRequest) -> ReviewVerdict {
        refused("the escalation callback needs the call's arguments")
    }

    async fn review_call(
        &self,
        request: &ApprovalRequest,
        arguments: &Map<String, Value>,
    ) -> ReviewVerdict {
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            (self.callback)(&request.action, arguments)
        }));
        let answer = match answer {
            Ok(a) => a,
            Err(p) => {
                return refused(format!(
                    "the escalation callback raised: {}",
                    crate::unwind::panic_message(p.as_ref())
                ));
            }
        };
        match answer {
            Ok(Value::Bool(true)) => match self.receipt(request, arguments) {
                Ok(receipt) => ReviewVerdict::Approved { receipt },
                Err(e) => refused(format!("cannot bind the approval: {e}")),
            },
            Ok(Value::Object(replacement)) => match self.receipt(request, &replacement) {
                Ok(receipt) => ReviewVerdict::ApprovedWithArguments {
                    receipt,
                    arguments: replacement,
                },
                Err(e) => refused(format!("cannot bind the approval: {e}")),
            },
            Ok(other) => refused(format!("the escalation callback declined ({other})")),
            Err(e) => refused(format!("the escalation callback raised: {e}")),
        }
    }
}
