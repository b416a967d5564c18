//! `warden exec`: one tool call through the full executor (the contract of the executor issue,
//! with contained execution).
//!
//! ```text
//! warden exec --policy FILE --tool NAME --args JSON [--cwd DIR]
//!             [--backend subprocess|in-process] [--simulate-unavailable MECHANISM]...
//!             [--receipt FILE] [--evidence PATH] [--idempotency-key KEY] [--format json]
//! ```
//!
//! The built-in tools (`bash`, `edit`, `list`, `read`, `write`) work in the workspace (default:
//! the current directory). With `--backend subprocess` (the default) `bash` runs contained: the
//! workspace is the only write root, reads are allowed everywhere, the network is off and the
//! environment keeps only the policy's `[containment].env` allowlist; each is required unless
//! the policy's `[containment]` table makes it optional (or `network_off = "allowed"`). A
//! required mechanism the backend's probe did not prove denies the call (`containment`) before
//! it starts; an optional one lets it run and the outcome lists it in `degradations`. With
//! `--backend in-process` child processes run uncontained and the capability report says so,
//! so required containment denies `bash` there. `--simulate-unavailable` makes the probe report
//! a mechanism missing, as on a kernel without it (it never widens anything).
//!
//! `--format json` prints one object: `outcome` (`succeeded`, `denied`, `escalated`, `deferred`,
//! `failed`, `cancelled`, `timed_out`, `ambiguous`), `profile`, `reason` unless it succeeded,
//! `result` when it did, `degradations` when containment was degraded. Exit 0 when it
//! succeeded, 1 for every other outcome, 2 for a usage or input error (unknown tool, invalid
//! JSON, a bad policy or receipt, a helper that cannot be probed), with nothing run.
//!
//! `--evidence PATH` runs the call governed (profile `certifiable`) against the SQLite evidence
//! store at `PATH` (created if missing): each invocation opens its own task boundary (chain
//! `exec-…`), runs the call through the governed executor and closes the boundary, so
//! `warden evidence verify` and `warden evidence certify --chain ID --expected-head HEAD` work
//! on it at once. Before that, when no other `warden exec` is using the store (an exclusive
//! lock on `PATH.exec-lock`; running ones hold it shared), boundaries a crashed `warden exec`
//! left open are resumed, their open operations closed by recovery (never re-invoked) and the
//! boundaries closed as abandoned; a boundary whose call may still be running (a process the
//! backend recorded in `PATH.exec-runs/CHAIN/` because it had no PID namespace of its own, or
//! one that inherited its record's token, is alive) stays open until it has ended. The output adds
//! `call_executed` and `evidence` (store, chain, operation, every receipt, the closing head,
//! what was recovered).
//! `--idempotency-key` names the request: governed, a repeat answers the recorded outcome
//! (also from another process) and never runs the call again.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use serde_json::{Map, Value, json};
use warden_contracts::{
    ActionRef, AppendReceipt, ApprovalReceipt, EffectBackend, ExecutionOutcome, PrincipalId,
    PrincipalKind, PrincipalRef, RecordType,
};
use warden_evidence::record_type_str;
use warden_executor::{ExecutionReport, Registry, Runtime, ToolCall};
use warden_policy::PolicySnapshot;
use warden_policy::receipt::SignedReceipt;
use warden_sandbox::{
    InProcessBackend, Mechanism, ProbeOptions, ProcessRecords, SubprocessBackend,
};

use crate::error::CliError;
use crate::governed_run::{EvidenceRun, fresh_id, open_evidence, records_dir, runs_dir};
use crate::{CallArgs, OutputFormat, PolicyArgs, load};

/// Where tool effects happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum BackendChoice {
    /// Contained subprocesses (Landlock, network namespace, environment allowlist, limits),
    /// each mechanism proven by a probe at start.
    Subprocess,
    /// In this process's authority, with no containment (the capability report says so).
    InProcess,
}

/// A containment mechanism to report as missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum MechanismChoice {
    /// Landlock (write roots).
    Landlock,
    /// The user + network namespace (network off).
    NetworkNamespace,
    /// The environment allowlist.
    Environment,
    /// Resource limits.
    Rlimits,
    /// Processes of its own (PID namespace).
    ProcessIsolation,
    /// Inherited descriptors closed.
    Descriptors,
    /// The host's UNIX sockets off (seccomp).
    UnixSockets,
}

impl MechanismChoice {
    fn mechanism(self) -> Mechanism {
        match self {
            Self::Landlock => Mechanism::Landlock,
            Self::NetworkNamespace => Mechanism::NetworkNamespace,
            Self::Environment => Mechanism::Environment,
            Self::Rlimits => Mechanism::Rlimits,
            Self::ProcessIsolation => Mechanism::ProcessIsolation,
            Self::Descriptors => Mechanism::Descriptors,
            Self::UnixSockets => Mechanism::UnixSockets,
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    #[command(flatten)]
    call: CallArgs,
    /// The call's working folder, as for `warden check`: relative paths resolve under it, and
    /// it is the workspace, the only place writes may happen, where `bash` runs (default: the
    /// current directory). `--workspace` is accepted too.
    #[arg(long = "cwd", visible_alias = "workspace", value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// The effect backend.
    #[arg(long, value_enum, default_value_t = BackendChoice::Subprocess)]
    backend: BackendChoice,
    /// Report a containment mechanism as missing, as on a kernel without it (subprocess
    /// backend; repeatable), to see how the policy behaves. Never widens anything.
    #[arg(long, value_enum, value_name = "MECHANISM")]
    simulate_unavailable: Vec<MechanismChoice>,
    /// A signed approval receipt (`warden approve`'s output) for a call the policy escalates;
    /// needs a policy with `[approvers]` and --evidence (single use across runs).
    #[arg(long, value_name = "FILE")]
    receipt: Option<PathBuf>,
    /// Run governed: append hash-chained evidence to the SQLite store at PATH (created if
    /// missing), one task boundary per invocation, closed after the call.
    #[arg(long, value_name = "PATH")]
    evidence: Option<PathBuf>,
    /// The request's idempotency key: a repeat answers the recorded outcome and never runs
    /// the call again (durably, across processes, with --evidence).
    #[arg(long, value_name = "KEY")]
    idempotency_key: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    format: OutputFormat,
}

fn workspace(arg: Option<&PathBuf>) -> Result<PathBuf, CliError> {
    let dir = match arg {
        Some(d) => load::absolute(d)?,
        None => std::env::current_dir()
            .map_err(|e| CliError::Input(format!("current directory: {e}")))?,
    };
    if !dir.is_dir() {
        return Err(CliError::Input(format!(
            "--cwd {}: not a directory",
            dir.display()
        )));
    }
    Ok(dir)
}

/// Reads a signed receipt (`warden-receipt-v1`, what `warden approve` writes). It counts only
/// under a policy that declares approvers, and only governed: the executor verifies its
/// signature against them, and the evidence store makes its single use durable across runs.
fn receipt(
    path: &Path,
    snapshot: &PolicySnapshot,
    governed: bool,
) -> Result<ApprovalReceipt, CliError> {
    let bad =
        |e: &dyn std::fmt::Display| CliError::Input(format!("--receipt {}: {e}", path.display()));
    if snapshot.approvers().is_empty() {
        return Err(bad(
            &"the policy declares no [approvers], so no receipt can be verified (declare the approvers whose signed receipts count)",
        ));
    }
    if !governed {
        return Err(bad(
            &"a receipt is used once, and only an evidence store remembers its use across runs: add --evidence PATH",
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| bad(&e))?;
    SignedReceipt::from_json(&text)
        .and_then(|r| r.to_approval())
        .map_err(|e| bad(&e))
}

/// The effect backend `--backend` selects, recording the processes it starts in `records`
/// when governed.
fn backend(
    a: &ExecArgs,
    records: Option<ProcessRecords>,
) -> Result<Arc<dyn EffectBackend>, CliError> {
    Ok(match a.backend {
        BackendChoice::InProcess => Arc::new(match records {
            Some(records) => InProcessBackend::new().with_process_records(records),
            None => InProcessBackend::new(),
        }),
        BackendChoice::Subprocess => {
            // This binary hosts the re-exec helper (see `main`), so the probe exercises exactly
            // what the call will use.
            let exe = std::env::current_exe()
                .map_err(|e| CliError::Input(format!("cannot find the warden binary: {e}")))?;
            let options = ProbeOptions {
                simulate_unavailable: a
                    .simulate_unavailable
                    .iter()
                    .map(|m| m.mechanism())
                    .collect(),
            };
            let backend = SubprocessBackend::probe_with(exe, &options)
                .map_err(|e| CliError::Input(e.to_string()))?;
            Arc::new(match records {
                Some(records) => backend.with_process_records(records),
                None => backend,
            })
        }
    })
}

fn local_principal() -> Result<PrincipalRef, CliError> {
    let name = std::env::var("USER")
        .ok()
        .filter(|u| PrincipalId::new(u.as_str()).is_ok())
        .unwrap_or_else(|| "local".to_owned());
    let id = PrincipalId::new(name).map_err(|e| CliError::Input(e.to_string()))?;
    Ok(PrincipalRef {
        id,
        kind: PrincipalKind::Local,
    })
}

pub(crate) fn run(a: &ExecArgs, out: &mut impl Write) -> Result<ExitCode, CliError> {
    // Everything is validated before anything runs.
    let arguments = a.call.arguments()?;
    if a.backend == BackendChoice::InProcess && !a.simulate_unavailable.is_empty() {
        return Err(CliError::Input(
            "--simulate-unavailable applies to --backend subprocess (the in-process backend proves nothing to begin with)".into(),
        ));
    }
    let workspace = workspace(a.workspace.as_ref())?;
    let action = ActionRef::new(a.call.tool.as_str())
        .map_err(|e| CliError::Input(format!("--tool: {e}")))?;
    let snapshot = Arc::new(load::snapshot_protecting(
        &a.policy.files(),
        a.policy.project_root.as_deref(),
        &load::store_files(a.evidence.as_deref(), "the evidence store"),
    )?);
    let receipt = a
        .receipt
        .as_deref()
        .map(|p| receipt(p, &snapshot, a.evidence.is_some()))
        .transpose()?;
    let policy_digest = snapshot.digest().to_string();
    let containment = snapshot.containment().clone();
    // Governed: the store and this run's chain, and where the backend records the processes
    // it starts that need not die with this one (recovery reads them after a crash).
    let mut evidence = match &a.evidence {
        Some(path) => Some(open_evidence(path, &fresh_id("exec"))?),
        None => None,
    };
    let records = evidence
        .as_ref()
        .map(|ev| ProcessRecords::new(records_dir(&ev.path, ev.chain.as_str())));
    let backend = backend(a, records)?;
    let report = backend.capabilities().clone();
    let mut registry = Registry::new();
    warden_tools::register_builtins_with(&mut registry, &workspace, backend, &containment)
        .map_err(|e| CliError::Input(e.to_string()))?;
    if registry.resolve(&action).is_err() {
        let known: Vec<&str> = registry.descriptors().map(|d| d.name()).collect();
        return Err(CliError::Input(format!(
            "unknown tool `{}` (built-in tools: {})",
            a.call.tool,
            known.join(", ")
        )));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::Io)?;
    // Everything the policy declares is installed by the runtime; `[containment]` applies to
    // the tools that run processes. Governed, start-up recovers what crashed runs left open.
    let mut builder = Runtime::builder(snapshot)
        .tools(registry)
        .cwd(workspace.clone())
        .effect_backend(report.clone(), warden_tools::PROCESS_TOOLS)
        .principal(local_principal()?)
        .scope(fresh_id("exec"));
    if let Some(ev) = &evidence {
        builder = builder.governed(ev.governed());
    }
    let composed = runtime
        .block_on(builder.build())
        .map_err(|e| match &a.evidence {
            Some(path) => CliError::Input(format!("--evidence {}: {e}", path.display())),
            None => CliError::Input(e.to_string()),
        })?;
    if let Some(ev) = &mut evidence {
        ev.started(&composed)?;
    }
    let mut call = ToolCall::new(a.call.tool.as_str(), Value::Object(arguments));
    if let Some(key) = &a.idempotency_key {
        call = call.idempotency_key(key.as_str());
    }
    if let Some(r) = receipt {
        call = call.approval(r);
    }
    let executed = runtime.block_on(composed.run(call));
    // Governed: close this run's task boundary (refused while its operation is open, after
    // a terminal append failed: the next run recovers it).
    let closed = evidence
        .as_ref()
        .and_then(|_| runtime.block_on(composed.close()).transpose());
    // Every process the call started was waited for (its record removed): drop the folder.
    if let Some(ev) = &evidence {
        let _ = std::fs::remove_dir(records_dir(&ev.path, ev.chain.as_str()));
        let _ = std::fs::remove_dir(runs_dir(&ev.path));
    }
    let outcome = &executed.outcome;

    match a.format {
        OutputFormat::Json => {
            let mut object = render(outcome);
            object.insert("policy_digest".into(), json!(policy_digest));
            object.insert("backend".into(), json!(report.backend.name()));
            if let (Some(ev), Some(closed)) = (&evidence, &closed) {
                object.insert("call_executed".into(), json!(outcome.call_executed()));
                object.insert("evidence".into(), evidence_json(ev, &executed, closed));
            }
            serde_json::to_writer(&mut *out, &Value::Object(object))
                .map_err(|e| CliError::Io(e.into()))?;
            out.write_all(b"\n")?;
        }
        OutputFormat::Text => {
            write_text(out, outcome)?;
            if let (Some(ev), Some(closed)) = (&evidence, &closed) {
                write_evidence_text(out, ev, &executed, closed)?;
            }
        }
    }
    let boundary_closed = closed.as_ref().is_none_or(Result::is_ok);
    Ok(if outcome.is_success() && boundary_closed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn receipt_json(record_type: Option<RecordType>, r: &AppendReceipt) -> Value {
    json!({
        "record_type": record_type.map(record_type_str),
        "sequence": r.sequence,
        "record_id": r.record_id,
        "chain_hash": r.chain_hash,
    })
}

fn evidence_json(
    ev: &EvidenceRun,
    executed: &ExecutionReport,
    closed: &Result<AppendReceipt, warden_executor::GovernanceError>,
) -> Value {
    let receipts: Vec<Value> = executed
        .receipts
        .iter()
        .map(|r| receipt_json(Some(r.record_type), &r.receipt))
        .collect();
    let (task_closed, close_error) = match closed {
        Ok(r) => (receipt_json(Some(RecordType::TaskClosed), r), None),
        Err(e) => (Value::Null, Some(e.to_string())),
    };
    json!({
        "store": ev.path.display().to_string(),
        "chain_id": ev.chain,
        "task_boundary_id": ev.chain,
        "profile": EvidenceRun::PROFILE,
        "operation_id": executed.operation_id,
        "receipts": receipts,
        "replay_of": executed.replay_of,
        "error": executed.evidence_error.as_ref().map(ToString::to_string),
        "error_call_executed": executed.evidence_error.as_ref().map(warden_executor::GovernanceError::call_executed),
        "task_closed": task_closed,
        "close_error": close_error,
        "recovered": ev.recovered,
    })
}

fn write_evidence_text(
    out: &mut impl Write,
    ev: &EvidenceRun,
    executed: &ExecutionReport,
    closed: &Result<AppendReceipt, warden_executor::GovernanceError>,
) -> Result<(), CliError> {
    let call = match executed.outcome.call_executed() {
        Some(true) => "true",
        Some(false) => "false",
        None => "unknown",
    };
    writeln!(out, "call_executed: {call}")?;
    for r in &ev.recovered {
        writeln!(
            out,
            "recovered: chain {} operation {} closed as {}",
            r["chain_id"].as_str().unwrap_or_default(),
            r["operation_id"].as_str().unwrap_or("(none)"),
            r["terminal"].as_str().unwrap_or("(nothing open)")
        )?;
    }
    match &executed.operation_id {
        Some(op) => writeln!(
            out,
            "evidence: chain {} in {} (operation {op})",
            ev.chain,
            ev.path.display()
        )?,
        None => writeln!(
            out,
            "evidence: chain {} in {} (no operation opened)",
            ev.chain,
            ev.path.display()
        )?,
    }
    if let Some(replayed) = &executed.replay_of {
        writeln!(
            out,
            "replay of operation {} (chain {}): nothing ran",
            replayed.operation_id, replayed.chain_id
        )?;
    }
    for r in &executed.receipts {
        writeln!(
            out,
            "  {:>4}  {:<26} {}  {}",
            r.receipt.sequence,
            record_type_str(r.record_type),
            r.receipt.record_id,
            r.receipt.chain_hash
        )?;
    }
    if let Some(e) = &executed.evidence_error {
        writeln!(
            out,
            "evidence error (call_executed = {}): {e}",
            e.call_executed()
        )?;
    }
    match closed {
        Ok(r) => writeln!(
            out,
            "task closed at sequence {} head {}\n  certify: warden evidence certify --store {} --chain {} --expected-head {}",
            r.sequence,
            r.chain_hash,
            ev.path.display(),
            ev.chain,
            r.chain_hash
        )?,
        Err(e) => writeln!(
            out,
            "task boundary not closed: {e} (the next run recovers it)"
        )?,
    }
    Ok(())
}

/// The JSON object of the contract: `outcome`, `profile`, `reason` (unless succeeded),
/// `result` (when succeeded), and what else the outcome carries.
fn render(outcome: &ExecutionOutcome) -> Map<String, Value> {
    let mut o = Map::new();
    o.insert("outcome".into(), json!(outcome.status()));
    o.insert("profile".into(), json!(outcome.profile()));
    o.insert("request_id".into(), json!(outcome.request_id()));
    let reason = |o: &mut Map<String, Value>, r: &warden_contracts::DecisionReason| {
        o.insert("reason".into(), json!(r.message));
        o.insert("reason_code".into(), json!(r.code));
        o.insert("rule".into(), json!(r.rule));
        o.insert("source".into(), json!(r.source));
    };
    match outcome {
        ExecutionOutcome::Succeeded { result, .. } => {
            o.insert("result".into(), result.clone());
        }
        ExecutionOutcome::Denied {
            reason: r,
            evaluator,
            stop,
            ..
        } => {
            reason(&mut o, r);
            o.insert("evaluator".into(), json!(evaluator));
            o.insert("stop".into(), json!(stop));
        }
        ExecutionOutcome::Deferred {
            reason: r,
            retry_at,
            ..
        } => {
            reason(&mut o, r);
            o.insert("retry_at".into(), json!(retry_at));
        }
        ExecutionOutcome::Escalated { approval, .. } => {
            reason(&mut o, &approval.reason);
            o.insert("approval".into(), json!(approval));
        }
        ExecutionOutcome::Failed {
            failure,
            call_executed,
            ..
        } => {
            o.insert("reason".into(), json!(failure.message));
            o.insert("failure".into(), json!(failure));
            o.insert("call_executed".into(), json!(call_executed));
        }
        ExecutionOutcome::Cancelled { call_executed, .. } => {
            o.insert("reason".into(), json!("the call was cancelled"));
            o.insert("call_executed".into(), json!(call_executed));
        }
        ExecutionOutcome::TimedOut { call_executed, .. } => {
            o.insert("reason".into(), json!("the call's deadline passed"));
            o.insert("call_executed".into(), json!(call_executed));
        }
        ExecutionOutcome::Ambiguous { message, .. } => {
            o.insert("reason".into(), json!(message));
        }
    }
    if !outcome.degradations().is_empty() {
        o.insert("degradations".into(), json!(outcome.degradations()));
    }
    o
}

fn write_text(out: &mut impl Write, outcome: &ExecutionOutcome) -> Result<(), CliError> {
    let o = render(outcome);
    for d in outcome.degradations() {
        let name = serde_json::to_value(d.capability)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        writeln!(
            out,
            "degraded: {name} not proven ({}); the policy made it optional",
            d.detail
        )?;
    }
    match outcome {
        ExecutionOutcome::Succeeded { result, .. } => {
            writeln!(out, "succeeded")?;
            let text = serde_json::to_string_pretty(result).map_err(|e| CliError::Io(e.into()))?;
            writeln!(out, "{text}")?;
        }
        _ => {
            let reason = o.get("reason").and_then(Value::as_str).unwrap_or_default();
            writeln!(out, "{}: {reason}", outcome.status())?;
            if let ExecutionOutcome::Escalated { approval, .. } = outcome {
                let text =
                    serde_json::to_string_pretty(approval).map_err(|e| CliError::Io(e.into()))?;
                writeln!(out, "approval request:\n{text}")?;
            }
        }
    }
    Ok(())
}
