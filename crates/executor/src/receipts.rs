//! The approval book: the approvals this executor issued, the receipts it accepted, and
//! whether a presented receipt may answer a call (docs/executor.md "Approvals").

use std::collections::HashMap;

use warden_contracts::{ApprovalId, ApprovalReceipt, Digest, RequestId, Timestamp};

use crate::admission::Clock;
use crate::plan::ExecutionPlan;

/// Approvals this executor issued and receipts it has accepted.
#[derive(Default)]
pub(crate) struct ApprovalBook {
    /// approval id → (the escalated request, expiry).
    issued: HashMap<ApprovalId, (RequestId, Timestamp)>,
    /// approval id → expiry, for receipts already used.
    used: HashMap<ApprovalId, Timestamp>,
}

impl ApprovalBook {
    fn prune(&mut self, now: Timestamp) {
        if self.issued.len() > 4096 {
            self.issued.retain(|_, (_, exp)| *exp > now);
        }
        if self.used.len() > 4096 {
            self.used.retain(|_, exp| *exp > now);
        }
    }

    /// Whether receipt `id` was used here already.
    pub(crate) fn is_used(&self, id: &ApprovalId) -> bool {
        self.used.contains_key(id)
    }

    /// Why receipt `id` cannot answer request `request_id` here: used already, or the answer
    /// to this very request (an approval starts a new attempt).
    pub(crate) fn unusable(&self, id: &ApprovalId, request_id: &RequestId) -> Option<String> {
        if self.used.contains_key(id) {
            return Some(format!("receipt {id} was already used"));
        }
        match self.issued.get(id) {
            Some((escalated, _)) if escalated == request_id => Some(format!(
                "receipt {id} answers request {escalated}: an approval starts a new attempt with a new request id"
            )),
            _ => None,
        }
    }

    /// The first of `approvals` that approves exactly this call (arguments `digest`), or why
    /// none does.
    pub(crate) fn matching(
        &self,
        plan: &ExecutionPlan,
        request_id: &RequestId,
        digest: &Digest,
        approvals: &[ApprovalReceipt],
        now: Timestamp,
    ) -> Result<ApprovalId, String> {
        let mut why = Vec::new();
        for r in approvals {
            if let Some(m) = self.unusable(r.approval_id(), request_id) {
                why.push(m);
                continue;
            }
            match receipt_counts(plan, r, digest, now) {
                Ok(()) => return Ok(r.approval_id().clone()),
                Err(m) => why.push(format!("receipt {}: {m}", r.approval_id())),
            }
        }
        Err(why.join("; "))
    }

    /// Marks `ids` used (for `ttl_ms` from now), all or none: `Err` names one used already.
    pub(crate) fn consume(
        &mut self,
        ids: &[ApprovalId],
        clock: &dyn Clock,
        ttl_ms: u64,
    ) -> Result<(), ApprovalId> {
        if let Some(id) = ids.iter().find(|id| self.used.contains_key(*id)) {
            return Err(id.clone());
        }
        let now = clock.now();
        let expiry = Timestamp(now.unix_millis().saturating_add(ttl_ms));
        for id in ids {
            self.used.insert(id.clone(), expiry);
        }
        self.prune(now);
        Ok(())
    }

    /// Records an approval issued for an escalation of `request_id`.
    pub(crate) fn issue(
        &mut self,
        id: ApprovalId,
        request_id: RequestId,
        expires_at: Timestamp,
        now: Timestamp,
    ) {
        self.issued.insert(id, (request_id, expires_at));
        self.prune(now);
    }
}

/// Whether receipt `r` may answer a call of this plan's action with arguments `digest` at
/// `now`: bound to the action, the arguments, this plan's policy and unexpired, and
/// authenticated by the policy (with `[approvers]`, signed by a declared approver). Single use
/// is checked by the caller.
pub(crate) fn receipt_counts(
    plan: &ExecutionPlan,
    r: &ApprovalReceipt,
    digest: &Digest,
    now: Timestamp,
) -> Result<(), String> {
    let policy = &plan.policy.snapshot().digest;
    r.check_binding(plan.entry.descriptor.name(), digest, Some(policy), now)
        .map_err(|m| m.to_string())?;
    plan.policy.authenticate_receipt(r, now)
}
