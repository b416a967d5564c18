//! The subprocess effect backend: every process runs through the re-exec helper under the
//! containment its probes proved.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use warden_contracts::{
    BackendError, BackendRef, Capability, CapabilityEntry, CapabilityReport, CapabilityStatus,
    Digest, EffectBackend, ProcessOutput, ProcessSpec,
};

use crate::error::SandboxError;
use crate::helper::{self, CANARY, EXEC_MODE, LandlockProbe, PROBE_MODE, ProbeResult};
use crate::spec::{Limits, SandboxSpec};

/// The name this backend reports.
pub const SUBPROCESS: &str = "subprocess";

/// Default resource limits for contained processes.
pub const DEFAULT_LIMITS: Limits = Limits {
    cpu_seconds: Some(300),
    max_processes: Some(512),
    max_file_bytes: Some(1 << 30),
};

/// Runs processes through the re-exec helper, under the containment its probes proved.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use warden_contracts::{Capability, CapabilityStatus, EffectBackend, ProcessSpec};
/// use warden_sandbox::SubprocessBackend;
/// let backend = SubprocessBackend::probe("/usr/local/bin/warden-sandbox-helper".into())?;
/// assert_eq!(backend.capabilities().status(Capability::NetworkOff), CapabilityStatus::Enforced);
/// let out = backend.run(ProcessSpec {
///     program: "ls".into(), args: vec![], cwd: "/tmp".into(),
///     env_allowlist: vec!["PATH".into()], env_set: Default::default(), stdin: None,
///     write_roots: vec!["/tmp".into()], read_roots: None, network: false,
///     timeout_ms: Some(5_000), max_output_bytes: Some(1 << 20), degradable: vec![],
/// }).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SubprocessBackend {
    helper: PathBuf,
    report: CapabilityReport,
    reference: BackendRef,
    limits: Limits,
}

/// A containment mechanism the backend probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// Landlock filesystem rules.
    Landlock,
    /// A fresh user + network namespace.
    NetworkNamespace,
    /// The environment cleared to an allowlist.
    Environment,
    /// `setrlimit` limits.
    Rlimits,
}

impl Mechanism {
    /// Every mechanism.
    pub const ALL: [Mechanism; 4] = [
        Self::Landlock,
        Self::NetworkNamespace,
        Self::Environment,
        Self::Rlimits,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Landlock => "landlock",
            Self::NetworkNamespace => "network_namespace",
            Self::Environment => "environment",
            Self::Rlimits => "rlimits",
        }
    }
}

/// Options for [`SubprocessBackend::probe_with`].
#[derive(Debug, Clone, Default)]
pub struct ProbeOptions {
    /// Mechanisms to treat as missing, as on a kernel without them. For tests and for operators
    /// who want to see how a policy behaves without a mechanism; never widens anything.
    pub simulate_unavailable: Vec<Mechanism>,
}

impl SubprocessBackend {
    /// Probes every mechanism with `helper` (a binary that calls [`crate::helper::dispatch`]) and
    /// builds the backend with what the probes proved. Blocking: run it once at start.
    pub fn probe(helper: PathBuf) -> Result<Self, SandboxError> {
        Self::probe_with(helper, &ProbeOptions::default())
    }

    /// [`Self::probe`] with options.
    pub fn probe_with(helper: PathBuf, options: &ProbeOptions) -> Result<Self, SandboxError> {
        if !helper::is_executable(&helper) {
            return Err(SandboxError::Helper(format!(
                "{} is not an executable file",
                helper.display()
            )));
        }
        let simulated = |m: Mechanism, r: ProbeResult| {
            if options.simulate_unavailable.contains(&m) {
                ProbeResult {
                    status: "unsupported".into(),
                    detail: format!("{} simulated as unavailable", m.name()),
                }
            } else {
                r
            }
        };
        let landlock = simulated(Mechanism::Landlock, probe_landlock(&helper));
        let netns = simulated(
            Mechanism::NetworkNamespace,
            run_probe(&helper, &["netns"], &[]),
        );
        let env = simulated(Mechanism::Environment, probe_env(&helper));
        let entry = |capability, r: &ProbeResult| CapabilityEntry {
            capability,
            status: match r.status.as_str() {
                "enforced" => CapabilityStatus::Enforced,
                "degraded" => CapabilityStatus::Degraded,
                _ => CapabilityStatus::Unsupported,
            },
            detail: r.detail.clone(),
        };
        let reads = ProbeResult {
            status: landlock.status.clone(),
            detail: format!(
                "read roots use the same landlock ruleset: {}",
                landlock.detail
            ),
        };
        let limits = simulated(
            Mechanism::Rlimits,
            ProbeResult {
                status: "enforced".into(),
                detail: "setrlimit(CPU, NPROC, FSIZE) in the helper before exec; wall time and output bytes by the parent".into(),
            },
        );
        let isolation = ProbeResult {
            status: "enforced".into(),
            detail: "every call runs in its own process".into(),
        };
        let report = CapabilityReport {
            backend: BackendRef::new(SUBPROCESS)
                .map_err(|e| SandboxError::Helper(e.to_string()))?,
            entries: vec![
                entry(Capability::FilesystemWriteRoots, &landlock),
                entry(Capability::FilesystemReadRoots, &reads),
                entry(Capability::NetworkOff, &netns),
                entry(Capability::EnvAllowlist, &env),
                entry(Capability::ResourceLimits, &limits),
                entry(Capability::ProcessIsolation, &isolation),
            ],
        };
        let digest =
            Digest::of_serialize(&report).map_err(|e| SandboxError::Helper(e.to_string()))?;
        let reference = report.backend.clone().with_capability_digest(digest);
        Ok(Self {
            helper,
            report,
            reference,
            limits: DEFAULT_LIMITS,
        })
    }

    /// Each mechanism with whether it is supported and the probe's evidence (for
    /// `warden sandbox probe`).
    pub fn mechanisms(&self) -> Vec<(Mechanism, bool, String)> {
        let of = |c| {
            self.report
                .entries
                .iter()
                .find(|e| e.capability == c)
                .map_or((false, String::new()), |e| {
                    (e.status == CapabilityStatus::Enforced, e.detail.clone())
                })
        };
        Mechanism::ALL
            .into_iter()
            .map(|m| {
                let (ok, detail) = of(match m {
                    Mechanism::Landlock => Capability::FilesystemWriteRoots,
                    Mechanism::NetworkNamespace => Capability::NetworkOff,
                    Mechanism::Environment => Capability::EnvAllowlist,
                    Mechanism::Rlimits => Capability::ResourceLimits,
                });
                (m, ok, detail)
            })
            .collect()
    }

    /// The same backend with other resource limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    fn proven(&self, capability: Capability) -> bool {
        self.report.status(capability) == CapabilityStatus::Enforced
    }

    /// Turns a contracts `ProcessSpec` into the helper's spec, refusing what is not proven.
    fn sandbox_spec(&self, spec: &ProcessSpec) -> Result<SandboxSpec, BackendError> {
        let containment = |what: &str| BackendError::Containment {
            message: format!("{what} is not proven on this machine"),
        };
        // A mechanism that is not proven runs only if the caller listed it as degradable.
        let usable = |capability: Capability, what: &str| -> Result<bool, BackendError> {
            if self.proven(capability) {
                Ok(true)
            } else if spec.degradable.contains(&capability) {
                Ok(false)
            } else {
                Err(containment(what))
            }
        };
        let landlock = usable(
            Capability::FilesystemWriteRoots,
            "filesystem write roots (landlock)",
        )?;
        let network = spec.network
            || !usable(
                Capability::NetworkOff,
                "network off (user+network namespace)",
            )?;
        usable(Capability::EnvAllowlist, "the environment allowlist")?;
        let mut env = BTreeMap::new();
        for name in &spec.env_allowlist {
            if let Some(v) = std::env::var_os(name) {
                env.insert(name.clone(), v.to_string_lossy().into_owned());
            }
        }
        env.extend(spec.env_set.clone());
        Ok(SandboxSpec {
            program: spec.program.clone(),
            args: spec.args.clone(),
            cwd: PathBuf::from(&spec.cwd),
            env,
            write_roots: spec.write_roots.iter().map(PathBuf::from).collect(),
            read_roots: spec
                .read_roots
                .as_ref()
                .map(|r| r.iter().map(PathBuf::from).collect()),
            network,
            landlock,
            limits: self.limits.clone(),
        })
    }
}

#[async_trait]
impl EffectBackend for SubprocessBackend {
    fn backend_ref(&self) -> BackendRef {
        self.reference.clone()
    }

    fn capabilities(&self) -> &CapabilityReport {
        &self.report
    }

    async fn run(&self, spec: ProcessSpec) -> Result<ProcessOutput, BackendError> {
        let sandbox = self.sandbox_spec(&spec)?;
        let json = serde_json::to_string(&sandbox).map_err(|e| BackendError::Spawn {
            message: e.to_string(),
        })?;
        run_helper(&self.helper, &json, &spec).await
    }
}

// This crate owns subprocesses.
#[allow(clippy::disallowed_methods)]
fn tokio_command(program: &Path) -> tokio::process::Command {
    tokio::process::Command::new(program)
}

async fn run_helper(
    helper: &Path,
    json: &str,
    spec: &ProcessSpec,
) -> Result<ProcessOutput, BackendError> {
    let mut command = tokio_command(helper);
    command.arg(EXEC_MODE).arg(json).env_clear();
    crate::capture::run(command, spec).await
}

fn run_probe(helper: &Path, args: &[&str], env: &[(&str, &str)]) -> ProbeResult {
    let output = helper::command(helper)
        .arg(PROBE_MODE)
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .output();
    match output {
        Ok(o) if o.status.success() => {
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| ProbeResult {
                status: "unsupported".into(),
                detail: format!("probe answered nonsense: {e}"),
            })
        }
        Ok(o) => ProbeResult {
            status: "unsupported".into(),
            detail: format!(
                "probe failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            ),
        },
        Err(e) => ProbeResult {
            status: "unsupported".into(),
            detail: format!("probe could not start: {e}"),
        },
    }
}

fn probe_landlock(helper: &Path) -> ProbeResult {
    let base = std::env::temp_dir().join(format!(
        "warden-landlock-probe-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    let probe = LandlockProbe {
        allowed: base.join("allowed"),
        forbidden: base.join("forbidden"),
    };
    let made = std::fs::create_dir_all(&probe.allowed)
        .and_then(|()| std::fs::create_dir_all(&probe.forbidden));
    let result = match (made, serde_json::to_string(&probe)) {
        (Ok(()), Ok(json)) => run_probe(helper, &["landlock", &json], &[]),
        (Err(e), _) => ProbeResult {
            status: "unsupported".into(),
            detail: format!("cannot create probe folders: {e}"),
        },
        (_, Err(e)) => ProbeResult {
            status: "unsupported".into(),
            detail: e.to_string(),
        },
    };
    let escaped = probe.forbidden.join("probe").exists();
    let _ = std::fs::remove_dir_all(&base);
    if escaped {
        return ProbeResult {
            status: "unsupported".into(),
            detail: "the probe wrote outside its write root".into(),
        };
    }
    result
}

/// Runs the helper in exec mode on itself with a canary in the helper's environment: the
/// program must not see it.
fn probe_env(helper: &Path) -> ProbeResult {
    let spec = SandboxSpec {
        program: helper.to_string_lossy().into_owned(),
        args: vec![PROBE_MODE.into(), "env".into()],
        cwd: std::env::temp_dir(),
        env: BTreeMap::new(),
        write_roots: Vec::new(),
        read_roots: None,
        network: true,
        landlock: false,
        limits: Limits::default(),
    };
    let Ok(json) = serde_json::to_string(&spec) else {
        return ProbeResult {
            status: "unsupported".into(),
            detail: "cannot encode the probe".into(),
        };
    };
    let output = helper::command(helper)
        .arg(EXEC_MODE)
        .arg(json)
        .env_clear()
        .env(CANARY, "1")
        .output();
    match output {
        Ok(o) if o.status.success() => {
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| ProbeResult {
                status: "unsupported".into(),
                detail: format!("probe answered nonsense: {e}"),
            })
        }
        Ok(o) => ProbeResult {
            status: "unsupported".into(),
            detail: format!(
                "env probe failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
        },
        Err(e) => ProbeResult {
            status: "unsupported".into(),
            detail: e.to_string(),
        },
    }
}
