//! `warden harness plan|probe|run` (docs/harness.md): a coding agent launched under a
//! `HarnessSpec`, with a report of who enforces each control it asks for.
//!
//! ```text
//! warden harness plan --provider claude-code|codex|gemini --spec FILE [--executable PATH] [--format json] [-- ARGS…]
//! warden harness probe --provider P [--executable PATH] [--format json]
//! warden harness run --provider P --spec FILE [--executable PATH] -- ARGS…
//! ```
//!
//! `plan` prints `{"provider","provider_version","argv","files","env_allow","report":
//! {"enforced","degraded","unsupported"},"plan_digest"}` and exits 0 when every required control
//! is enforced, 3 when one is degraded or unsupported (nothing is spawned), 2 on a usage or spec
//! error. The provider is probed first: its executable (`--executable`, else found on `PATH`) runs
//! `--version` contained, with an empty `HOME` of its own and a 10-second limit; no executable,
//! no answer or an unknown or too old version is unsupported, never assumed.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand};
use serde_json::Value;
use warden_contracts::{Capability, EffectBackend, ProcessSpec};
use warden_harness::export::{Target, export};
use warden_harness::launch::{self, CompileInput, OsBackend, Plan, Probe};
use warden_harness::spec::{HarnessSpec, ProviderName};
use warden_sandbox::{Mechanism, SubprocessBackend};

use crate::error::CliError;
use crate::{OutputFormat, load};

/// How long a provider's `--version` may take.
const PROBE_TIMEOUT_MS: u64 = 10_000;

/// Exit code when a required control is not enforced (nothing spawned).
const NOT_ENFORCED: u8 = 3;

/// `warden harness`.
#[derive(Debug, Subcommand)]
pub(crate) enum HarnessCommand {
    /// Compile a spec into a launch plan for a provider and report who enforces each control.
    Plan(PlanArgs),
    /// Find a provider's executable and read its version (contained, with an empty HOME).
    Probe(ProbeArgs),
    /// Plan, then launch the provider under the plan when every required control is enforced.
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ProbeArgs {
    /// The provider: claude-code, codex or gemini.
    #[arg(long, value_parser = provider)]
    provider: ProviderName,
    /// The provider's executable (default: found on PATH).
    #[arg(long, value_name = "PATH")]
    executable: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    format: OutputFormat,
}

#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    #[command(flatten)]
    probe: ProbeArgs,
    /// The harness spec (TOML).
    #[arg(long, value_name = "FILE")]
    spec: PathBuf,
    /// Arguments for the provider, after `--` (a prompt, `exec`, `-p`): last on its command
    /// line, and part of the plan (a headless run has nobody to answer a prompt).
    #[arg(last = true)]
    args: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    plan: PlanArgs,
}

fn provider(name: &str) -> Result<ProviderName, String> {
    ProviderName::parse(name)
        .ok_or_else(|| format!("unknown provider `{name}` (claude-code, codex or gemini)"))
}

pub(crate) fn run(cmd: &HarnessCommand, out: &mut impl Write) -> Result<ExitCode, CliError> {
    match cmd {
        HarnessCommand::Probe(a) => {
            let backend = crate::sandbox_cmd::subprocess_backend()?;
            let probe = probe(&backend, a.provider, a.executable.as_deref());
            match a.format {
                OutputFormat::Json => {
                    serde_json::to_writer(&mut *out, &probe).map_err(|e| CliError::Io(e.into()))?;
                    writeln!(out)?;
                }
                OutputFormat::Text => write_probe(out, &probe)?,
            }
            Ok(if probe.unsupported.is_none() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(NOT_ENFORCED)
            })
        }
        HarnessCommand::Plan(a) => {
            let Planned { plan, spec, .. } = plan(a)?;
            print_plan(out, &plan, a.probe.format)?;
            Ok(if plan.missing(&spec.required).is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(NOT_ENFORCED)
            })
        }
        HarnessCommand::Run(a) => launch(a, out),
    }
}

/// Probes the provider: its executable runs `--version` contained, with an empty `HOME`.
fn probe(backend: &SubprocessBackend, provider: ProviderName, executable: Option<&Path>) -> Probe {
    let found = match executable {
        Some(path) => load::absolute(path).ok().filter(|p| p.is_file()),
        None => on_path(provider.executable()),
    };
    let Some(exe) = found else {
        return Probe::missing(
            provider,
            match executable {
                Some(p) => format!("{} is not a file", p.display()),
                None => format!("`{}` is not on PATH", provider.executable()),
            },
        );
    };
    let Ok(home) = tempfile::tempdir() else {
        return Probe::missing(provider, "cannot make a temporary HOME for the probe");
    };
    let home_dir = home.path().to_string_lossy().into_owned();
    let spec = ProcessSpec {
        program: exe.to_string_lossy().into_owned(),
        args: vec!["--version".into()],
        cwd: home_dir.clone(),
        env_allowlist: vec!["PATH".into()],
        env_set: BTreeMap::from([("HOME".into(), home_dir.clone())]),
        stdin: None,
        write_roots: vec![home_dir],
        read_roots: None,
        network: false,
        timeout_ms: Some(PROBE_TIMEOUT_MS),
        max_output_bytes: Some(64 * 1024),
        // A version probe is contained as far as this machine allows; it reads a version.
        degradable: Capability::ALL.to_vec(),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return Probe::missing(provider, format!("cannot start the probe: {e}")),
    };
    match runtime.block_on(backend.run(spec)) {
        Ok(output) if output.exit_code == Some(0) => Probe::from_output(
            provider,
            exe,
            &format!("{}{}", output.stdout, output.stderr),
        ),
        Ok(output) => Probe {
            unsupported: Some(format!(
                "`{} --version` failed (exit {:?}, signal {:?}): {}",
                exe.display(),
                output.exit_code,
                output.signal,
                output.stderr.trim()
            )),
            ..Probe::from_output(provider, exe.clone(), &output.stdout)
        },
        Err(e) => Probe::missing(provider, format!("`{} --version`: {e}", exe.display())),
    }
}

/// `name` found on this process's `PATH`, as an executable file.
fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| {
                p.metadata()
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    })
}

/// A compiled plan with what launching it needs.
struct Planned {
    plan: Plan,
    spec: HarnessSpec,
    workspace: PathBuf,
    write_roots: Vec<PathBuf>,
}

/// Reads the spec, probes the provider and compiles the plan.
fn plan(a: &PlanArgs) -> Result<Planned, CliError> {
    let spec_path = load::absolute(&a.spec)?;
    let text = std::fs::read_to_string(&spec_path)
        .map_err(|e| CliError::Input(format!("--spec {}: {e}", a.spec.display())))?;
    let label = a.spec.display().to_string();
    let spec = HarnessSpec::parse(&text, &label).map_err(|e| CliError::Input(e.to_string()))?;
    let provider = a.probe.provider;
    if let Some(named) = spec.provider
        && named != provider
    {
        return Err(CliError::Input(format!(
            "{label}: the spec is for {named}, not {provider}"
        )));
    }
    let dir = spec_path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let at = |p: &Path| load::absolute(&dir.join(p));
    let workspace = match &spec.workspace {
        Some(w) => at(w)?,
        None => dir.clone(),
    };
    if !workspace.is_dir() {
        return Err(CliError::Input(format!(
            "{label}: workspace {} is not a folder",
            workspace.display()
        )));
    }
    let policy = spec.tools.as_deref().map(at).transpose()?;
    let prefix_rules = match &policy {
        Some(path) => Some(prefix_rules(path, &workspace, provider, &label)?),
        None => None,
    };
    let write_roots: Vec<PathBuf> = spec
        .filesystem
        .as_ref()
        .map(|f| f.write.iter().map(|w| at(w)).collect::<Result<_, _>>())
        .transpose()?
        .unwrap_or_default();
    let backend = crate::sandbox_cmd::subprocess_backend()?;
    let probe = probe(&backend, provider, a.probe.executable.as_deref());
    let proven = |m: Mechanism| backend.mechanisms().iter().any(|(x, ok, _)| *x == m && *ok);
    let warden = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| CliError::Input(format!("cannot find the warden binary: {e}")))?;
    let input = CompileInput {
        spec: &spec,
        workspace: workspace.clone(),
        policy,
        write_roots: write_roots.clone(),
        warden,
        probe: &probe,
        os: OsBackend {
            write_roots: proven(Mechanism::Landlock),
            environment: proven(Mechanism::Environment),
            evidence: os_evidence(&backend),
        },
        prefix_rules,
        args: a.args.clone(),
    };
    let plan = launch::compile(provider, &input);
    Ok(Planned {
        plan,
        spec,
        workspace,
        write_roots,
    })
}

/// The backend probe's evidence for the two mechanisms a launch rests on.
fn os_evidence(backend: &SubprocessBackend) -> String {
    backend
        .mechanisms()
        .into_iter()
        .filter(|(m, _, _)| matches!(m, Mechanism::Landlock | Mechanism::Environment))
        .map(|(m, ok, evidence)| {
            format!(
                "{}: {} ({evidence})",
                m.name(),
                if ok { "proven" } else { "not proven" }
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The policy, loaded (it must), exported as Claude Code's `permissions`: the text and whether
/// every rule translated exactly.
fn prefix_rules(
    path: &Path,
    workspace: &Path,
    provider: ProviderName,
    label: &str,
) -> Result<(String, bool), CliError> {
    let file = warden_policy::LoadedPolicy::read(path)
        .map_err(|e| CliError::Input(format!("{label}: tools: {e}")))?;
    let env = warden_policy::PathEnv {
        project_root: workspace.to_path_buf(),
        home: std::env::var_os("HOME").map(PathBuf::from),
    };
    let snapshot = warden_policy::PolicySnapshot::from_files(&[file], env)
        .map_err(|e| CliError::Input(format!("{label}: tools: {e}")))?;
    let target = match provider {
        ProviderName::ClaudeCode => Target::ClaudeCode,
        ProviderName::Codex => Target::Codex,
        ProviderName::Gemini => Target::Gemini,
    };
    let exported = export(&snapshot, target).map_err(|e| CliError::Input(e.to_string()))?;
    let exact = exported.report.approximated.is_empty() && exported.report.inexpressible.is_empty();
    Ok((exported.text, exact))
}

fn write_probe(out: &mut impl Write, probe: &Probe) -> Result<(), CliError> {
    match &probe.unsupported {
        None => writeln!(
            out,
            "{} {} at {}",
            probe.provider,
            probe.version.as_deref().unwrap_or("?"),
            probe
                .executable
                .as_deref()
                .map_or(String::new(), |p| p.display().to_string())
        )?,
        Some(why) => writeln!(out, "{}: unsupported: {why}", probe.provider)?,
    }
    Ok(())
}

fn print_plan(out: &mut impl Write, plan: &Plan, format: OutputFormat) -> Result<(), CliError> {
    match format {
        OutputFormat::Json => {
            serde_json::to_writer(&mut *out, plan).map_err(|e| CliError::Io(e.into()))?;
            writeln!(out)?;
        }
        OutputFormat::Text => {
            writeln!(
                out,
                "{} {}: {}",
                plan.provider,
                plan.provider_version
                    .as_deref()
                    .unwrap_or("(version unknown)"),
                plan.argv.join(" ")
            )?;
            for (status, entries) in [
                ("enforced", &plan.report.enforced),
                ("degraded", &plan.report.degraded),
                ("unsupported", &plan.report.unsupported),
            ] {
                for e in entries {
                    let by = serde_json::to_value(e.by).unwrap_or(Value::Null);
                    writeln!(
                        out,
                        "{status:<11} {:<24} by {:<11} {}",
                        e.control.as_str(),
                        by.as_str().unwrap_or("?"),
                        e.detail
                    )?;
                }
            }
            writeln!(out, "plan {}", plan.plan_digest)?;
        }
    }
    Ok(())
}

/// `run`: refuses before spawning when a required control is not enforced; otherwise writes
/// the plan's files and runs the provider contained (writes under the workspace, the write
/// roots and the temporary folder; the environment cleared to
/// the plan's allowlist; the network on, which the agent needs for its model), attached to this
/// terminal, and exits with its code.
fn launch(a: &RunArgs, out: &mut impl Write) -> Result<ExitCode, CliError> {
    let Planned {
        plan,
        spec,
        workspace,
        write_roots,
    } = plan(&a.plan)?;
    let missing = plan.missing(&spec.required);
    if !missing.is_empty() {
        print_plan(out, &plan, a.plan.probe.format)?;
        for m in missing {
            eprintln!(
                "warden harness run: required control {} is not enforced ({}): nothing was started",
                m.control, m.detail
            );
        }
        return Ok(ExitCode::from(NOT_ENFORCED));
    }
    if let Some(why) = &launch_blocker(&plan) {
        return Err(CliError::Input(why.clone()));
    }
    for (path, content) in &plan.files {
        let path = Path::new(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, content)?;
    }
    let Some((program, args)) = plan.argv.split_first() else {
        return Err(CliError::Input("the plan has no command".into()));
    };
    let args = args.to_vec();
    // The plan's folders (the provider's per-run home and settings) are in the workspace.
    let roots = std::iter::once(workspace.clone())
        .chain(write_roots)
        .chain(std::iter::once(std::env::temp_dir()));
    let process = ProcessSpec {
        program: program.clone(),
        args,
        cwd: workspace.to_string_lossy().into_owned(),
        env_allowlist: plan.env_allow.clone(),
        env_set: BTreeMap::new(),
        stdin: None,
        write_roots: roots.map(|r| r.to_string_lossy().into_owned()).collect(),
        read_roots: None,
        network: true,
        timeout_ms: None,
        max_output_bytes: None,
        // The agent's own processes may outlive a call (a language server, a watcher).
        degradable: vec![
            Capability::ProcessIsolation,
            Capability::DescriptorIsolation,
        ],
    };
    let backend: Arc<dyn EffectBackend> = Arc::new(crate::sandbox_cmd::subprocess_backend()?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::Io)?;
    let output = runtime
        .block_on(backend.run(process))
        .map_err(|e| CliError::Input(format!("cannot launch {}: {e}", plan.provider)))?;
    out.write_all(output.stdout.as_bytes())?;
    eprint!("{}", output.stderr);
    Ok(ExitCode::from(
        output
            .exit_code
            .and_then(|c| u8::try_from(c).ok())
            .unwrap_or(1),
    ))
}

/// Why a plan that passed its required controls still cannot run: a provider that is not
/// supported here is never started.
fn launch_blocker(plan: &Plan) -> Option<String> {
    plan.provider_version.is_none().then(|| {
        format!(
            "{} is unsupported here (see `warden harness probe --provider {}`): nothing was started",
            plan.provider, plan.provider
        )
    })
}
