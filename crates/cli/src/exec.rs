//! `warden exec`: one tool call through the full executor (the contract of the executor issue,
//! with contained execution from issue 7).
//!
//! ```text
//! warden exec --policy FILE --tool NAME --args JSON [--workspace DIR]
//!             [--backend subprocess|in-process] [--simulate-unavailable MECHANISM]...
//!             [--receipt FILE] [--evidence PATH] [--format json]
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

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use serde_json::{Map, Value, json};
use warden_contracts::{
    ActionRef, ApprovalReceipt, ContextId, EffectBackend, ExecutionContext, ExecutionOutcome,
    ExecutionRequest, ExecutionScopeRef, PrincipalId, PrincipalKind, PrincipalRef, RequestId,
    ScopeId,
};
use warden_executor::{ActionExecutor, ExecuteOptions, Registry, SnapshotPolicy};
use warden_sandbox::{InProcessBackend, Mechanism, ProbeOptions, SubprocessBackend};

use crate::error::CliError;
use crate::{OutputFormat, PolicyArgs, load};

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
}

impl MechanismChoice {
    fn mechanism(self) -> Mechanism {
        match self {
            Self::Landlock => Mechanism::Landlock,
            Self::NetworkNamespace => Mechanism::NetworkNamespace,
            Self::Environment => Mechanism::Environment,
            Self::Rlimits => Mechanism::Rlimits,
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// The tool to run (`bash`, `edit`, `list`, `read`, `write`).
    #[arg(long, value_name = "NAME")]
    tool: String,
    /// The call's arguments: a JSON object.
    #[arg(long, value_name = "JSON")]
    args: String,
    /// The workspace: relative paths resolve under it, the only place writes may happen, and
    /// where `bash` runs (default: the current directory).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// The effect backend.
    #[arg(long, value_enum, default_value_t = BackendChoice::Subprocess)]
    backend: BackendChoice,
    /// Report a containment mechanism as missing, as on a kernel without it (subprocess
    /// backend; repeatable), to see how the policy behaves. Never widens anything.
    #[arg(long, value_enum, value_name = "MECHANISM")]
    simulate_unavailable: Vec<MechanismChoice>,
    /// An approval receipt (JSON) for a call the policy escalates.
    #[arg(long, value_name = "FILE")]
    receipt: Option<PathBuf>,
    /// Where to append governed evidence (not available yet: issue 8).
    #[arg(long, value_name = "PATH")]
    evidence: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    format: OutputFormat,
}

fn args_object(text: &str) -> Result<Map<String, Value>, CliError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(CliError::Input("--args: must be a JSON object".into())),
        Err(e) => Err(CliError::Input(format!("--args: invalid JSON: {e}"))),
    }
}

fn workspace(arg: Option<&PathBuf>) -> Result<PathBuf, CliError> {
    let dir = match arg {
        Some(d) => load::absolute(d)?,
        None => std::env::current_dir()
            .map_err(|e| CliError::Input(format!("current directory: {e}")))?,
    };
    if !dir.is_dir() {
        return Err(CliError::Input(format!(
            "--workspace {}: not a directory",
            dir.display()
        )));
    }
    Ok(dir)
}

fn receipt(path: &Path) -> Result<ApprovalReceipt, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Input(format!("--receipt {}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| CliError::Input(format!("--receipt {}: {e}", path.display())))
}

/// A fresh id for this invocation (pid and time: unique enough on one machine).
fn fresh_id(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{prefix}-{}-{nanos}", std::process::id())
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
    let arguments = args_object(&a.args)?;
    if a.backend == BackendChoice::InProcess && !a.simulate_unavailable.is_empty() {
        return Err(CliError::Input(
            "--simulate-unavailable applies to --backend subprocess (the in-process backend proves nothing to begin with)".into(),
        ));
    }
    if a.evidence.is_some() {
        return Err(CliError::Input(
            "--evidence is not available yet (governed evidence lands with issue 8)".into(),
        ));
    }
    let workspace = workspace(a.workspace.as_ref())?;
    let action =
        ActionRef::new(a.tool.as_str()).map_err(|e| CliError::Input(format!("--tool: {e}")))?;
    let receipt = a.receipt.as_deref().map(receipt).transpose()?;
    let snapshot = Arc::new(load::snapshot(&a.policy.policies)?);
    let policy_digest = snapshot.digest().to_string();
    let containment = snapshot.containment().clone();

    let backend: Arc<dyn EffectBackend> = match a.backend {
        BackendChoice::InProcess => Arc::new(InProcessBackend::new()),
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
            Arc::new(
                SubprocessBackend::probe_with(exe, &options)
                    .map_err(|e| CliError::Input(e.to_string()))?,
            )
        }
    };
    let report = backend.capabilities().clone();
    let backend_ref = backend.backend_ref();
    let mut registry = Registry::new();
    warden_tools::register_builtins_with(&mut registry, &workspace, backend, &containment)
        .map_err(|e| CliError::Input(e.to_string()))?;
    if registry.resolve(&action).is_err() {
        let known: Vec<&str> = registry.descriptors().map(|d| d.name()).collect();
        return Err(CliError::Input(format!(
            "unknown tool `{}` (built-in tools: {})",
            a.tool,
            known.join(", ")
        )));
    }
    // The policy's `[containment]` applies to the tools that run processes.
    let executor = warden_tools::PROCESS_TOOLS
        .iter()
        .fold(
            ActionExecutor::builder(registry)
                .policy(Arc::new(
                    SnapshotPolicy::new(snapshot).with_cwd(workspace.clone()),
                ))
                .backend(report.clone()),
            |b, name| b.policy_containment_for(*name, &containment),
        )
        .build()
        .map_err(|e| CliError::Input(e.to_string()))?;

    let invalid = |e: warden_contracts::ContractError| CliError::Input(e.to_string());
    let scope = ExecutionScopeRef::Ephemeral {
        scope_id: ScopeId::new(fresh_id("exec")).map_err(invalid)?,
    };
    let context = ExecutionContext::new(
        ContextId::new("warden-exec").map_err(invalid)?,
        scope.clone(),
        local_principal()?,
        backend_ref,
    );
    let request = ExecutionRequest::new(
        RequestId::new(fresh_id("req")).map_err(invalid)?,
        action,
        Value::Object(arguments),
        scope,
    )
    .map_err(invalid)?;
    let mut options = ExecuteOptions::new();
    if let Some(r) = receipt {
        options = options.approval(r);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::Io)?;
    let outcome = runtime.block_on(executor.execute_with(request, &context, options));

    match a.format {
        OutputFormat::Json => {
            let mut object = render(&outcome);
            object.insert("policy_digest".into(), json!(policy_digest));
            object.insert("backend".into(), json!(report.backend.name()));
            serde_json::to_writer(&mut *out, &Value::Object(object))
                .map_err(|e| CliError::Io(e.into()))?;
            out.write_all(b"\n")?;
        }
        OutputFormat::Text => write_text(out, &outcome)?,
    }
    Ok(if outcome.is_success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
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
