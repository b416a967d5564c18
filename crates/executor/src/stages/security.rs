//! The security pass of `authorize` (stage 8) and `reauthorize` (stage 11): the policy, then
//! every security hook in order, then the soft denies (an escalation or a soft hook's
//! denial): an approval receipt bound to exactly this call resolves the escalations, a
//! recorded exception (governed) covers a soft deny, anything unresolved escalates (or denies,
//! when no authority could approve it). In the final pass a hook may not change the
//! arguments. Governed, every evaluation is recorded with its level as it is produced (at the
//! run's gate site); soft denies once their resolution is known, at the end of the pass.

use std::ops::ControlFlow;
use std::sync::PoisonError;

use serde_json::{Map, Value};
use warden_contracts::{
    ApprovalId, DecisionReason, Digest, Disposition, PolicyQuery, ReasonCode, Stage, Timestamp,
};
use warden_evidence::payload::{GateLevel, GateVerdict};

use super::{Run, evidence_digest, pass_stage};
use crate::executor::arguments_digest;
use crate::interceptor::{SecurityHook, SecurityVerdict};
use crate::plan::ExecutionPlan;
use crate::unwind::caught;

/// What one security pass concluded.
pub(crate) enum Security {
    Allow {
        replacement: Option<Map<String, Value>>,
        approved_by: Option<ApprovalId>,
    },
    Deny {
        reason: DecisionReason,
        evaluator: String,
        stop: bool,
    },
    Escalate {
        reason: DecisionReason,
        evaluator: String,
        authority: String,
        /// The arguments the escalating pass evaluated, when a security hook replaced them.
        replaced: Option<Map<String, Value>>,
    },
}

/// One security pass over the run's arguments (`final_pass`: in `reauthorize`).
pub(crate) async fn pass(run: &Run<'_>, plan: &ExecutionPlan, final_pass: bool) -> Security {
    let pass = Pass {
        run,
        plan,
        final_pass,
        stage: pass_stage(Stage::Authorize, final_pass),
    };
    match pass.evaluate().await {
        ControlFlow::Continue(s) | ControlFlow::Break(s) => s,
    }
}

/// A soft deny waiting for its resolution at the end of a security pass: an escalation (with
/// its authority) or a soft-level hook's denial (no authority can approve it).
struct SoftDeny {
    gate: String,
    reason: DecisionReason,
    evaluator: String,
    authority: Option<String>,
    stop: bool,
    /// The arguments it evaluated, when a hook had replaced them.
    digest: Option<Digest>,
}

/// The pass in progress; `Break` is its conclusion, reached early.
struct Pass<'p, 'a> {
    run: &'p Run<'a>,
    plan: &'p ExecutionPlan,
    final_pass: bool,
    stage: Stage,
}

fn evidence_failed(reason: DecisionReason) -> Security {
    Security::Deny {
        reason,
        evaluator: "evidence".into(),
        stop: false,
    }
}

impl Pass<'_, '_> {
    async fn evaluate(&self) -> ControlFlow<Security, Security> {
        let mut pending: Vec<SoftDeny> = self.policy().await?.into_iter().collect();
        let current = self.hooks(&mut pending).await?;
        if pending.is_empty() {
            return ControlFlow::Continue(Security::Allow {
                replacement: current,
                approved_by: None,
            });
        }
        self.resolve(pending, current).await
    }

    /// Records one evaluation when governed.
    async fn record(
        &self,
        gate: &str,
        level: GateLevel,
        verdict: GateVerdict,
        reason: &DecisionReason,
        digest: Option<&Digest>,
    ) -> ControlFlow<Security> {
        let Some(site) = &self.run.site else {
            return ControlFlow::Continue(());
        };
        match site
            .record(gate, self.stage, level, verdict, reason, digest)
            .await
        {
            Ok(_) => ControlFlow::Continue(()),
            Err(r) => ControlFlow::Break(evidence_failed(r)),
        }
    }

    /// Records a hook's pass when governed (the reason is built only then).
    async fn record_passed(
        &self,
        name: &str,
        level: GateLevel,
        digest: Option<&Digest>,
    ) -> ControlFlow<Security> {
        if self.run.site.is_none() {
            return ControlFlow::Continue(());
        }
        let passed = DecisionReason::new(
            ReasonCode::Permission,
            format!("security hook `{name}` passed"),
        );
        self.record(name, level, GateVerdict::Allow, &passed, digest)
            .await
    }

    /// A hard denial by `gate`: recorded, and the pass concludes with it.
    async fn deny<T>(
        &self,
        gate: &str,
        reason: DecisionReason,
        evaluator: String,
        stop: bool,
        digest: Option<&Digest>,
    ) -> ControlFlow<Security, T> {
        self.record(gate, GateLevel::Hard, GateVerdict::Deny, &reason, digest)
            .await?;
        ControlFlow::Break(Security::Deny {
            reason,
            evaluator,
            stop,
        })
    }

    /// An advisory hook's `denial` or `escalation` (`what`): logged and recorded; the call
    /// proceeds.
    async fn advisory(
        &self,
        name: &str,
        what: &str,
        reason: &DecisionReason,
        digest: Option<&Digest>,
    ) -> ControlFlow<Security> {
        let request = self.run.request.request_id();
        tracing::warn!(%request, hook = name, reason = %reason.message, "advisory {what}: the call proceeds");
        self.record(name, GateLevel::Advisory, GateVerdict::Deny, reason, digest)
            .await
    }

    /// The policy: an allow continues, a deny concludes, an escalation is a soft deny; a
    /// failing (or deferring) evaluator denies.
    async fn policy(&self) -> ControlFlow<Security, Option<SoftDeny>> {
        let run = self.run;
        let query = PolicyQuery {
            request_id: run.request.request_id(),
            action: &self.plan.entry.descriptor,
            arguments: &run.args,
            context: run.context,
            session_id: run.request.session_id(),
        };
        let failed = |message: String| DecisionReason::new(ReasonCode::EvaluatorFailed, message);
        let (reason, evaluator) = match caught!(self.plan.policy.evaluate(&query)) {
            Err(panic) => (
                failed(format!("the policy evaluator panicked: {panic}")),
                "policy".to_owned(),
            ),
            Ok(Err(e)) => (failed(e.to_string()), "policy".to_owned()),
            Ok(Ok(answer)) => match answer.disposition() {
                Disposition::Allow => {
                    let reason = answer.reason();
                    self.record("policy", GateLevel::Hard, GateVerdict::Allow, reason, None)
                        .await?;
                    return ControlFlow::Continue(None);
                }
                Disposition::Deny => {
                    let (reason, evaluator) = (answer.reason().clone(), answer.evaluator());
                    return self
                        .deny("policy", reason, evaluator.to_owned(), answer.stop(), None)
                        .await;
                }
                Disposition::Escalate => {
                    return ControlFlow::Continue(Some(SoftDeny {
                        gate: "policy".into(),
                        reason: answer.reason().clone(),
                        evaluator: answer.evaluator().to_owned(),
                        authority: Some(answer.authority().to_owned()),
                        stop: false,
                        digest: None,
                    }));
                }
                Disposition::Defer => (
                    failed("the policy answered defer, which only capacity may".to_owned()),
                    answer.evaluator().to_owned(),
                ),
            },
        };
        self.deny("policy", reason, evaluator, false, None).await
    }

    /// Every security hook in order, each on the arguments the hooks before it left; the
    /// replacement arguments, if a hook replaced them (first pass only).
    async fn hooks(
        &self,
        pending: &mut Vec<SoftDeny>,
    ) -> ControlFlow<Security, Option<Map<String, Value>>> {
        let mut current: Option<Map<String, Value>> = None;
        // The digest of the arguments the hooks see, once a hook replaced them.
        let mut current_digest: Option<Digest> = None;
        for (hook, level) in &self.plan.security {
            let arguments = current.as_ref().unwrap_or(&self.run.args);
            let digest = current_digest.as_ref();
            let verdict = self.check(&**hook, arguments, digest).await?;
            let Some(next) = self
                .verdict(hook.name(), *level, verdict, arguments, digest, pending)
                .await?
            else {
                continue;
            };
            if self.run.site.is_some() {
                match evidence_digest(&next) {
                    Ok(d) => current_digest = Some(d),
                    Err(r) => return ControlFlow::Break(evidence_failed(r)),
                }
            }
            current = Some(next);
        }
        ControlFlow::Continue(current)
    }

    /// One hook's verdict; a failing hook never allows, whatever its level.
    async fn check(
        &self,
        hook: &dyn SecurityHook,
        arguments: &Map<String, Value>,
        digest: Option<&Digest>,
    ) -> ControlFlow<Security, SecurityVerdict> {
        let name = hook.name();
        let call = self.run.view(self.plan, arguments);
        let message = match caught!(hook.check(&call)) {
            Ok(Ok(v)) => return ControlFlow::Continue(v),
            Ok(Err(e)) => format!("security hook `{name}` failed: {e}"),
            Err(panic) => format!("security hook `{name}` panicked: {panic}"),
        };
        let reason = DecisionReason::new(ReasonCode::EvaluatorFailed, message);
        self.deny(name, reason, name.to_owned(), false, digest)
            .await
    }

    /// What a hook's verdict does at its level: `Continue(Some(next))` replaces the arguments.
    async fn verdict(
        &self,
        name: &str,
        level: GateLevel,
        verdict: SecurityVerdict,
        arguments: &Map<String, Value>,
        digest: Option<&Digest>,
        pending: &mut Vec<SoftDeny>,
    ) -> ControlFlow<Security, Option<Map<String, Value>>> {
        match verdict {
            SecurityVerdict::Pass => self.record_passed(name, level, digest).await?,
            SecurityVerdict::Replace(next) if self.final_pass => {
                if &next != arguments {
                    let reason = DecisionReason::new(
                        ReasonCode::Transform,
                        format!(
                            "security hook `{name}` changed the arguments during the final pass"
                        ),
                    );
                    return self
                        .deny(name, reason, name.to_owned(), false, digest)
                        .await;
                }
                self.record_passed(name, level, digest).await?;
            }
            SecurityVerdict::Replace(next) => {
                self.record_passed(name, level, digest).await?;
                return ControlFlow::Continue(Some(next));
            }
            SecurityVerdict::Deny { reason, stop } => match level {
                GateLevel::Hard => {
                    return self.deny(name, reason, name.to_owned(), stop, digest).await;
                }
                GateLevel::Soft => pending.push(SoftDeny {
                    gate: name.to_owned(),
                    reason,
                    evaluator: name.to_owned(),
                    authority: None,
                    stop,
                    digest: digest.cloned(),
                }),
                GateLevel::Advisory => self.advisory(name, "denial", &reason, digest).await?,
            },
            SecurityVerdict::Escalate { reason, authority } => match level {
                GateLevel::Advisory => {
                    self.advisory(name, "escalation", &reason, digest).await?;
                }
                GateLevel::Hard | GateLevel::Soft => pending.push(SoftDeny {
                    gate: name.to_owned(),
                    reason,
                    evaluator: name.to_owned(),
                    authority: Some(authority),
                    stop: false,
                    digest: digest.cloned(),
                }),
            },
        }
        ControlFlow::Continue(None)
    }

    /// The soft denies: an approval receipt bound to exactly this call resolves every
    /// escalation; a recorded exception covers a soft deny; the rest stay unresolved, and
    /// escalate (or deny, when no authority could approve one).
    async fn resolve(
        &self,
        pending: Vec<SoftDeny>,
        current: Option<Map<String, Value>>,
    ) -> ControlFlow<Security, Security> {
        let receipts = self.run.receipts();
        let evaluated = current.as_ref().unwrap_or(&self.run.args);
        let approval = if pending.iter().any(|p| p.authority.is_some()) && !receipts.is_empty() {
            Some(self.match_receipt(evaluated))
        } else {
            None
        };
        let approved_by = approval.as_ref().and_then(|a| a.as_ref().ok()).cloned();
        let now = self.run.exec.now();
        let mut unresolved: Vec<SoftDeny> = Vec::new();
        for p in pending {
            if p.authority.is_some()
                && let Some(id) = &approved_by
            {
                let mut reason = p.reason.clone();
                reason.code = ReasonCode::Approved;
                reason.message = format!("{} (approved by receipt {id})", reason.message);
                let digest = p.digest.as_ref();
                self.record(
                    &p.gate,
                    GateLevel::Soft,
                    GateVerdict::Allow,
                    &reason,
                    digest,
                )
                .await?;
                continue;
            }
            if !self.excepted(&p, now).await? {
                unresolved.push(p);
            }
        }
        if unresolved.is_empty() {
            return ControlFlow::Continue(Security::Allow {
                replacement: current,
                approved_by,
            });
        }
        // A soft deny no authority can approve denies.
        if let Some(p) = unresolved.iter().find(|p| p.authority.is_none()) {
            return ControlFlow::Continue(Security::Deny {
                reason: p.reason.clone(),
                evaluator: p.evaluator.clone(),
                stop: p.stop,
            });
        }
        let p = unresolved.remove(0);
        let mut reason = p.reason;
        match approval {
            Some(Err(why)) => reason.message = format!("{} ({why})", reason.message),
            _ if !self.run.unbound.is_empty() => {
                reason.message = format!("{} ({})", reason.message, self.run.unbound.join("; "));
            }
            _ => {}
        }
        ControlFlow::Continue(Security::Escalate {
            reason,
            evaluator: p.evaluator,
            authority: p.authority.unwrap_or_default(),
            replaced: current,
        })
    }

    /// Governed: records the soft deny, and whether a recorded exception covers it (then
    /// `exception_granted` is recorded too, and the call proceeds degraded).
    async fn excepted(&self, p: &SoftDeny, now: Timestamp) -> ControlFlow<Security, bool> {
        let Some(site) = &self.run.site else {
            return ControlFlow::Continue(false);
        };
        let digest = p.digest.as_ref();
        let recorded = site
            .record(
                &p.gate,
                self.stage,
                GateLevel::Soft,
                GateVerdict::Deny,
                &p.reason,
                digest,
            )
            .await;
        let id = match recorded {
            Ok(id) => id,
            Err(r) => return ControlFlow::Break(evidence_failed(r)),
        };
        let covered_digest = digest.unwrap_or(site.digest()).clone();
        let action = self.plan.entry.descriptor.name();
        let operation = site.operation();
        let Some(exception) = operation.exception_for(action, &p.gate, &covered_digest, now) else {
            return ControlFlow::Continue(false);
        };
        // Boxed, and bound before the await: the unboxed future stays out of this one.
        let recorded = Box::pin(operation.exception(exception, id, covered_digest));
        if let Err(r) = recorded.await {
            return ControlFlow::Break(evidence_failed(r));
        }
        tracing::warn!(request = %self.run.request.request_id(), gate = %p.gate, exception = %exception.exception_id, "soft deny overridden by a recorded exception: any certificate is degraded");
        ControlFlow::Continue(true)
    }

    /// The first presented receipt that approves exactly this call with `args`, or why none.
    fn match_receipt(&self, args: &Map<String, Value>) -> Result<ApprovalId, String> {
        let digest = arguments_digest(args)
            .map_err(|e| format!("no receipt can bind these arguments: {e}"))?;
        let exec = self.run.exec;
        let now = exec.now();
        let book = exec
            .approvals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let request_id = self.run.request.request_id();
        book.matching(self.plan, request_id, &digest, self.run.receipts(), now)
    }
}
