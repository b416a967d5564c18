//! The stage plan, one stage per file (docs/executor.md, "The stage order"): every request
//! passes the stages of [`STAGE_ORDER`] in that order, each at most once; a refusal ends the
//! request at the stage that refused, with a typed outcome; only `invoke` reaches the callable,
//! with a token minted there, once.
//!
//! | # | stage | file |
//! |---|---|---|
//! | 1 | `resolve` | `resolve.rs` |
//! | 2 | `validate` | `validate.rs` |
//! | 3 | `bind_context` | `bind_context.rs` |
//! | 4 | `admit` | `admit.rs` |
//! | 5 | `evidence_start` | `evidence_start.rs` |
//! | 6 | `session_gate` | `session_gate.rs` |
//! | 7 | `preconditions` | `preconditions.rs` |
//! | 8 | `authorize` | `authorize.rs` (the security pass: `security.rs`) |
//! | 9 | `transform` | `transform.rs` |
//! | 10 | `revalidate` | `revalidate.rs` |
//! | 11 | `reauthorize` | `reauthorize.rs` |
//! | 12 | `evidence_invoke` | `evidence_invoke.rs` |
//! | 13 | `invoke` | `invoke.rs` |
//! | 14 | `handlers` | `handlers.rs` |
//! | 15 | `outcome` | `outcome.rs` |
//!
//! Stages 1–14 share one signature, `async fn(&mut Run<'_>) -> Flow` ([`Flow`]: a
//! `ControlFlow` whose `Break` holds the boxed `ExecutionOutcome`): a stage reads and advances
//! the request's state ([`Run`]); `Continue` hands it to the next stage, `Break` ends the
//! request with its outcome. [`run`] runs them in [`STAGE_ORDER`]'s
//! order. The last stage, `outcome`, runs after the pipeline, outside the race with
//! cancellation and deadlines (a cancelled request still gets its outcome, its governed
//! terminal record and its events), so it takes what outlives the pipeline instead of a
//! [`Run`].
//!
//! Governed evidence is reached through one interface, [`Operation`] (crate::governed): the
//! stages call it at their checkpoints (`evidence_start`, each gate evaluation of stages 6–11
//! through a [`GateSite`], `evidence_invoke`), and know nothing else of governance.

mod admit;
mod authorize;
mod bind_context;
mod evidence_invoke;
mod evidence_start;
mod handlers;
mod invoke;
mod outcome;
mod preconditions;
mod reauthorize;
mod resolve;
mod revalidate;
mod security;
mod session_gate;
mod transform;
mod validate;

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};
use warden_contracts::{
    AdmissionDecision, ApprovalId, ApprovalReceipt, CapabilityEntry, CapacityLease, DecisionReason,
    Digest, Disposition, ExecutionContext, ExecutionOutcome, ExecutionRequest, ReasonCode,
    RecordId, Stage,
};
use warden_evidence::GateEvaluation;
use warden_evidence::payload::{GateLevel, GateVerdict};

pub(crate) use self::outcome::outcome;
use crate::executor::{ActionExecutor, arguments_digest};
use crate::governed::Operation;
use crate::idempotency::IdemGuard;
use crate::interceptor::CallView;
use crate::plan::{ExecutionPlan, STAGE_ORDER};
use crate::registry::Entry;
use crate::tool::ToolError;
use crate::trace::Trace;

/// What a stage answers: `Continue` hands the request to the next stage, `Break` ends it with
/// its outcome (boxed: every stage's answer moves through the pipeline, so it stays one
/// pointer wide).
pub(crate) type Flow<T = ()> = ControlFlow<Box<ExecutionOutcome>, T>;

/// Ends the request with `outcome`.
pub(crate) fn end<T>(outcome: ExecutionOutcome) -> Flow<T> {
    ControlFlow::Break(Box::new(outcome))
}

/// The stage a check reports at: its own (`first`), or `reauthorize` in the final pass.
pub(crate) fn pass_stage(first: Stage, final_pass: bool) -> Stage {
    if final_pass {
        Stage::Reauthorize
    } else {
        first
    }
}

/// Runs one request's stages in [`STAGE_ORDER`]'s order until one ends it.
pub(crate) async fn run(
    exec: &ActionExecutor,
    (request, context): (&ExecutionRequest, &ExecutionContext),
    presented: &[ApprovalReceipt],
    progress: Progress<'_>,
    trace: &Trace<'_>,
) -> ExecutionOutcome {
    // What `resolve` and `bind_context` bind, for the rest of the pipeline: the stages after
    // them borrow it for as long as the pipeline runs (no reference count per stage).
    let (entry, plan) = (OnceLock::new(), OnceLock::new());
    let mut run = Run {
        exec,
        request,
        context,
        trace,
        progress,
        presented,
        entry: &entry,
        plan: &plan,
        args: Map::new(),
        lease: None,
        bound: None,
        unbound: Vec::new(),
        site: None,
        changed: false,
        approved: Vec::new(),
        result: None,
    };
    for stage in STAGE_ORDER {
        let flow = match stage {
            Stage::Resolve => resolve::resolve(&mut run).await,
            Stage::Validate => validate::validate(&mut run).await,
            Stage::BindContext => bind_context::bind_context(&mut run).await,
            Stage::Admit => admit::admit(&mut run).await,
            Stage::EvidenceStart => evidence_start::evidence_start(&mut run).await,
            Stage::SessionGate => session_gate::session_gate(&mut run).await,
            Stage::Preconditions => preconditions::preconditions(&mut run).await,
            Stage::Authorize => authorize::authorize(&mut run).await,
            Stage::Transform => transform::transform(&mut run).await,
            Stage::Revalidate => revalidate::revalidate(&mut run).await,
            Stage::Reauthorize => reauthorize::reauthorize(&mut run).await,
            Stage::EvidenceInvoke => evidence_invoke::evidence_invoke(&mut run).await,
            Stage::Invoke => invoke::invoke(&mut run).await,
            Stage::Handlers => handlers::handlers(&mut run).await,
            // After the pipeline (`outcome`).
            Stage::Outcome => break,
        };
        if let ControlFlow::Break(outcome) = flow {
            return *outcome;
        }
    }
    // `handlers` ends every request that reaches it.
    run.out_of_order(Stage::Outcome, "an outcome")
}

/// What the pipeline tells the executor while it runs (the pipeline may be dropped at a
/// deadline or a cancellation, so these live outside it).
#[derive(Clone, Copy)]
pub(crate) struct Progress<'a> {
    /// The callable was reached.
    pub(crate) invoked: &'a AtomicBool,
    /// Optional containment the backend did not prove (set at admission).
    pub(crate) degraded: &'a OnceLock<Vec<CapabilityEntry>>,
    /// The ungoverned idempotency reservation (set at context binding), completed with the
    /// outcome.
    pub(crate) idem: &'a OnceLock<IdemGuard>,
    /// The governed operation (governed and certifiable profiles).
    pub(crate) gov: Option<&'a Operation<'a>>,
}

/// One request's state as it moves through the plan.
pub(crate) struct Run<'a> {
    pub(crate) exec: &'a ActionExecutor,
    pub(crate) request: &'a ExecutionRequest,
    pub(crate) context: &'a ExecutionContext,
    pub(crate) trace: &'a Trace<'a>,
    pub(crate) progress: Progress<'a>,
    /// The approval receipts presented with the request.
    presented: &'a [ApprovalReceipt],
    /// The resolved action (`resolve`).
    pub(crate) entry: &'a OnceLock<Arc<Entry>>,
    /// Its compiled plan under the context's policy (`bind_context`).
    pub(crate) plan: &'a OnceLock<Arc<ExecutionPlan>>,
    /// The arguments: the request's (`validate`), then as security hooks and transforms leave
    /// them; the callable gets them (`invoke`).
    pub(crate) args: Map<String, Value>,
    /// The capacity lease (`admit`), held to the end of the pipeline.
    pub(crate) lease: Option<CapacityLease>,
    /// Governed: the receipts bound to the operation (`evidence_start`), the only ones the
    /// security passes may use; `None` (ungoverned): every presented receipt.
    pub(crate) bound: Option<Vec<ApprovalReceipt>>,
    /// Governed: why presented receipts were not bound (told with an escalation).
    pub(crate) unbound: Vec<String>,
    /// Governed: where the current security pass records its gate evaluations (opened by
    /// `session_gate`, again by `reauthorize`).
    pub(crate) site: Option<GateSite<'a>>,
    /// Whether anything changed the arguments since the first security pass.
    pub(crate) changed: bool,
    /// The receipts that approved the call, used once at the end of the last security pass.
    pub(crate) approved: Vec<ApprovalId>,
    /// What the callable answered, a panic caught (`invoke`), for `handlers`.
    pub(crate) result: Option<Result<Result<Value, ToolError>, String>>,
}

impl<'a> Run<'a> {
    /// The resolved action (set by `resolve`).
    pub(crate) fn entry(&self, stage: Stage) -> Flow<&'a Arc<Entry>> {
        match self.entry.get() {
            Some(entry) => ControlFlow::Continue(entry),
            None => end(self.out_of_order(stage, "a resolved action")),
        }
    }

    /// The compiled plan (set by `bind_context`).
    pub(crate) fn plan(&self, stage: Stage) -> Flow<&'a ExecutionPlan> {
        match self.plan.get() {
            Some(plan) => ControlFlow::Continue(plan),
            None => end(self.out_of_order(stage, "a compiled plan")),
        }
    }

    /// A governed-only stage's plan and operation, the stage traced as ran; `None` when the
    /// run is not governed (the stage traced as its plan planned it).
    pub(crate) fn governed(
        &self,
        stage: Stage,
    ) -> Flow<Option<(&'a ExecutionPlan, &'a Operation<'a>)>> {
        let plan = self.plan(stage)?;
        let Some(operation) = self.progress.gov else {
            self.trace.planned(plan, stage);
            return ControlFlow::Continue(None);
        };
        self.trace.ran(stage);
        ControlFlow::Continue(Some((plan, operation)))
    }

    /// The receipts a security pass may use.
    pub(crate) fn receipts(&self) -> &[ApprovalReceipt] {
        self.bound.as_deref().unwrap_or(self.presented)
    }

    /// What interceptors see of the call, with `arguments`.
    pub(crate) fn view<'v>(
        &'v self,
        plan: &'v ExecutionPlan,
        arguments: &'v Map<String, Value>,
    ) -> CallView<'v> {
        CallView {
            request_id: self.request.request_id(),
            action: &plan.entry.descriptor,
            arguments,
            context: self.context,
            session_id: self.request.session_id(),
        }
    }

    /// A refusal at `stage`: reported to observers, then the typed outcome ends the request.
    pub(crate) fn refuse<T>(
        &self,
        stage: Stage,
        reason: DecisionReason,
        evaluator: &str,
        stop: bool,
    ) -> Flow<T> {
        tracing::debug!(request = %self.request.request_id(), ?stage, reason = %reason.message, "denied");
        self.trace.decision(stage, || {
            AdmissionDecision::new(Disposition::Deny, reason.clone(), evaluator).ok()
        });
        end(self.exec.denied(self.request, reason, evaluator, stop))
    }

    /// A stage reached without what an earlier stage sets: impossible in the plan's order;
    /// fails closed (as a panic would).
    fn out_of_order(&self, stage: Stage, missing: &str) -> ExecutionOutcome {
        let message = format!("stage {stage:?} was reached without {missing}");
        tracing::error!(request = %self.request.request_id(), %message, "stage plan out of order");
        if self.progress.invoked.load(Ordering::Acquire) {
            self.exec.failed(self.request, "executor".into(), message)
        } else {
            self.exec.denied(
                self.request,
                DecisionReason::new(ReasonCode::EvaluatorFailed, message),
                "executor",
                false,
            )
        }
    }
}

/// Where one security pass records its gate evaluations (governed profiles).
pub(crate) struct GateSite<'a> {
    operation: &'a Operation<'a>,
    recheck: bool,
    /// The pass's arguments.
    digest: Digest,
}

impl<'a> GateSite<'a> {
    /// The site of a pass over `args` when governed (`recheck`: the re-authorization pass).
    pub(crate) fn open(
        gov: Option<&'a Operation<'a>>,
        args: &Map<String, Value>,
        recheck: bool,
    ) -> Result<Option<Self>, DecisionReason> {
        match gov {
            None => Ok(None),
            Some(operation) => Ok(Some(Self {
                operation,
                recheck,
                digest: evidence_digest(args)?,
            })),
        }
    }

    /// The governed operation.
    pub(crate) fn operation(&self) -> &'a Operation<'a> {
        self.operation
    }

    /// The digest of the pass's arguments.
    pub(crate) fn digest(&self) -> &Digest {
        &self.digest
    }

    /// Records one evaluation (`digest`: of the arguments it evaluated, when a hook replaced
    /// the pass's); its record id, or the refusal that makes the callable unreachable.
    pub(crate) async fn record(
        &self,
        gate: &str,
        stage: Stage,
        level: GateLevel,
        verdict: GateVerdict,
        reason: &DecisionReason,
        digest: Option<&Digest>,
    ) -> Result<RecordId, DecisionReason> {
        let evaluation = GateEvaluation {
            gate: gate.to_owned(),
            stage,
            level,
            verdict,
            reason_code: reason.code,
            rule: reason.rule.clone(),
            source: reason.source.clone(),
            arguments_digest: digest.unwrap_or(&self.digest).clone(),
            recheck: self.recheck,
        };
        // Boxed, and bound before the await: the append's future stays out of the stages'.
        let recorded = Box::pin(self.operation.gate(evaluation));
        recorded.await
    }
}

/// The digest of arguments a gate evaluated, for the evidence (none: the call cannot run).
pub(crate) fn evidence_digest(args: &Map<String, Value>) -> Result<Digest, DecisionReason> {
    arguments_digest(args).map_err(|e| {
        DecisionReason::new(
            ReasonCode::Evidence,
            format!("the arguments have no canonical digest to record: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `` `name` `` cells of the first column holding stage names in the table that
    /// follows `heading` in docs/executor.md, in order.
    fn documented(doc: &str, heading: &str) -> Vec<(String, String)> {
        let start = doc
            .find(heading)
            .expect("the heading is in docs/executor.md");
        doc[start..]
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .filter_map(|row| {
                let cells: Vec<&str> = row.split('|').map(str::trim).collect();
                let name = cells.get(2)?.strip_prefix('`')?.strip_suffix('`')?;
                Some((name.to_owned(), cells.get(3)?.to_string()))
            })
            .collect()
    }

    fn names() -> Vec<String> {
        STAGE_ORDER
            .iter()
            .map(|s| {
                serde_json::to_value(s)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn stage_order_matches_the_docs_with_one_file_per_stage() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let doc = std::fs::read_to_string(root.join("../../docs/executor.md")).unwrap();
        let order: Vec<String> = documented(&doc, "## The stage order")
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert_eq!(order, names(), "docs/executor.md, \"The stage order\"");
        let files = documented(&doc, "### Where each stage lives");
        let named: Vec<&String> = files.iter().map(|(name, _)| name).collect();
        assert_eq!(
            named,
            names().iter().collect::<Vec<_>>(),
            "the stage → file table"
        );
        for (name, file) in &files {
            // Each stage's file is named after it, and exists.
            let expected = format!("`{name}.rs`");
            assert!(file.starts_with(&expected), "{name}: {file}");
            let path = root.join("src/stages").join(format!("{name}.rs"));
            assert!(path.is_file(), "{}", path.display());
        }
    }
}
