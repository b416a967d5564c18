//! The subprocess effect backend: every process runs through the re-exec helper under the
//! containment its probes proved.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use async_trait::async_trait;
use warden_contracts::{
    BackendError, BackendRef, Capability, CapabilityEntry, CapabilityReport, CapabilityStatus,
    Digest, EffectBackend, ProcessOutput, ProcessSpec,
};

use crate::error::SandboxError;
use crate::helper::{
    self, CANARY, EXEC_MODE, IsolationProbe, LandlockProbe, PROBE_MODE, ProbeResult, unsupported,
};
use crate::records::{ProcessRecords, RECORD_VARIABLE, Record};
use crate::spec::{ResourceLimits, SandboxSpec};

/// The name this backend reports.
pub const SUBPROCESS: &str = "subprocess";

/// Default resource limits for contained processes.
pub const DEFAULT_LIMITS: ResourceLimits = ResourceLimits {
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
    limits: ResourceLimits,
    records: Option<ProcessRecords>,
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
    /// A user, mount and PID namespace of its own, with its own `/proc`.
    ProcessIsolation,
    /// Every descriptor but the standard streams closed before the program runs.
    Descriptors,
    /// The seccomp filter that refuses UNIX sockets (with the network namespace).
    UnixSockets,
}

impl Mechanism {
    /// Every mechanism.
    pub const ALL: [Mechanism; 7] = [
        Self::Landlock,
        Self::NetworkNamespace,
        Self::Environment,
        Self::Rlimits,
        Self::ProcessIsolation,
        Self::Descriptors,
        Self::UnixSockets,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Landlock => "landlock",
            Self::NetworkNamespace => "network_namespace",
            Self::Environment => "environment",
            Self::Rlimits => "rlimits",
            Self::ProcessIsolation => "process_isolation",
            Self::Descriptors => "descriptors",
            Self::UnixSockets => "unix_sockets",
        }
    }

    /// The capability its probe proves.
    pub fn capability(self) -> Capability {
        match self {
            Self::Landlock => Capability::FilesystemWriteRoots,
            Self::NetworkNamespace => Capability::NetworkOff,
            Self::Environment => Capability::EnvAllowlist,
            Self::Rlimits => Capability::ResourceLimits,
            Self::ProcessIsolation => Capability::ProcessIsolation,
            Self::Descriptors => Capability::DescriptorIsolation,
            Self::UnixSockets => Capability::UnixSocketsOff,
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
                unsupported(format!("{} simulated as unavailable", m.name()))
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
        let isolation = simulated(Mechanism::ProcessIsolation, probe_processes(&helper));
        let descriptors = simulated(Mechanism::Descriptors, probe_descriptors(&helper));
        let unix = simulated(Mechanism::UnixSockets, probe_unix(&helper));
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
                entry(Capability::DescriptorIsolation, &descriptors),
                entry(Capability::UnixSocketsOff, &unix),
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
            records: None,
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
                let (ok, detail) = of(m.capability());
                (m, ok, detail)
            })
            .collect()
    }

    /// The same backend recording each process it starts without processes of its own (no
    /// PID namespace: it need not die with this process) in `records`; such a process gets the
    /// record's token in [`RECORD_VARIABLE`](crate::RECORD_VARIABLE), beside the allowlisted
    /// variables. An isolated process is not recorded: it dies with this process
    /// (docs/sandbox.md).
    pub fn with_process_records(mut self, records: ProcessRecords) -> Self {
        self.records = Some(records);
        self
    }

    /// The same backend with other resource limits.
    pub fn with_limits(mut self, limits: ResourceLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Starts `spec` contained exactly as [`EffectBackend::run`] would, but long-lived, with
    /// its standard input and output piped to the caller (a server speaking over stdio, such
    /// as an MCP server) and its standard error discarded. It runs until it exits or the
    /// returned [`PipedProcess`] is dropped, which kills it; `spec.stdin` and
    /// `spec.timeout_ms` do not apply.
    pub fn spawn_piped(&self, spec: &ProcessSpec) -> Result<PipedProcess, BackendError> {
        let mut child = self.spawn_helper(spec, [Stdio::piped(), Stdio::piped(), Stdio::null()])?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(spawn_failed(spec, "no pipes"));
        };
        Ok(PipedProcess {
            child,
            stdin: Some(stdin),
            stdout: Some(stdout),
        })
    }

    /// Runs `spec` contained exactly as [`EffectBackend::run`] would, but attached to this
    /// process's standard input, output and error (a terminal, for an interactive program
    /// such as a coding agent), and waits for it: its exit code, or `None` when a signal ended
    /// it. `spec.stdin` and `spec.max_output_bytes` do not apply; `spec.timeout_ms` does.
    pub async fn run_attached(&self, spec: &ProcessSpec) -> Result<Option<i32>, BackendError> {
        let mut child =
            self.spawn_helper(spec, [Stdio::inherit(), Stdio::inherit(), Stdio::inherit()])?;
        let waited = match spec.timeout_ms {
            Some(ms) => tokio::time::timeout(std::time::Duration::from_millis(ms), child.wait())
                .await
                .map_err(|_| spawn_failed(spec, format!("still running after {ms} ms, killed")))?,
            None => child.wait().await,
        };
        let status = waited.map_err(|e| spawn_failed(spec, e))?;
        Ok(status.code())
    }

    /// [`Self::helper_command`] spawned, with its standard input, output and error `stdio`.
    fn spawn_helper(
        &self,
        spec: &ProcessSpec,
        [stdin, stdout, stderr]: [Stdio; 3],
    ) -> Result<tokio::process::Child, BackendError> {
        self.helper_command(spec)?
            .stdin(stdin)
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|e| spawn_failed(spec, e))
    }

    /// The helper's command that runs `spec` contained (its exec mode, the spec, this
    /// process's id to die with), with an empty environment, killed when dropped; the caller
    /// sets its standard streams.
    fn helper_command(&self, spec: &ProcessSpec) -> Result<tokio::process::Command, BackendError> {
        let sandbox = self.sandbox_spec(spec)?;
        let json = serde_json::to_string(&sandbox).map_err(|e| BackendError::Spawn {
            message: e.to_string(),
        })?;
        let mut command = tokio_command(&self.helper);
        command
            .arg(EXEC_MODE)
            .arg(json)
            .arg(std::process::id().to_string())
            .env_clear()
            .kill_on_drop(true);
        Ok(command)
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
        // Descriptors are closed whatever the report says; claiming it needs the probe.
        usable(Capability::DescriptorIsolation, "descriptor isolation")?;
        let isolate_processes = usable(
            Capability::ProcessIsolation,
            "process isolation (a PID namespace of its own)",
        )?;
        let unix_sockets_off = !network
            && usable(
                Capability::UnixSocketsOff,
                "the host's UNIX sockets off (seccomp)",
            )?;
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
            isolate_processes,
            unix_sockets_off,
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
        let mut sandbox = self.sandbox_spec(&spec)?;
        let record = match &self.records {
            Some(records) if !sandbox.isolate_processes => Some(records.starting()?),
            _ => None,
        };
        if let Some(record) = &record {
            sandbox
                .env
                .insert(RECORD_VARIABLE.to_owned(), record.token().to_owned());
        }
        let json = serde_json::to_string(&sandbox).map_err(|e| BackendError::Spawn {
            message: e.to_string(),
        })?;
        run_helper(&self.helper, &json, &spec, record).await
    }
}

/// A contained, long-lived process with piped standard input and output
/// ([`SubprocessBackend::spawn_piped`]). Dropping it kills the process.
#[derive(Debug)]
pub struct PipedProcess {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    stdout: Option<tokio::process::ChildStdout>,
}

impl PipedProcess {
    /// Its standard input and output, once (for a protocol client to own).
    pub fn take_pipes(
        &mut self,
    ) -> Option<(
        impl tokio::io::AsyncWrite + Send + Unpin + 'static,
        impl tokio::io::AsyncRead + Send + Unpin + 'static,
    )> {
        Some((self.stdin.take()?, self.stdout.take()?))
    }

    /// Its process id while it runs.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Whether it has exited (without waiting).
    pub fn has_exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
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
    record: Option<Record>,
) -> Result<ProcessOutput, BackendError> {
    let mut command = tokio_command(helper);
    // The helper dies with this process (it is passed its id, to check it started in time).
    command
        .arg(EXEC_MODE)
        .arg(json)
        .arg(std::process::id().to_string())
        .env_clear();
    // The helper carries the token from its start, before it becomes the program.
    if let Some(record) = &record {
        command.env(RECORD_VARIABLE, record.token());
    }
    crate::capture::run(command, spec, record).await
}

fn run_probe(helper: &Path, args: &[&str], env: &[(&str, &str)]) -> ProbeResult {
    let args: Vec<&str> = [PROBE_MODE]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    probe_answer(helper_output(helper, &args, env), "probe", |e| {
        format!("probe could not start: {e}")
    })
}

/// Runs the helper with `args` and nothing of this process's environment but `env`, to its end.
fn helper_output(
    helper: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> std::io::Result<std::process::Output> {
    helper::command(helper)
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .output()
}

/// What a probe the helper ran answered (`output`): what it printed, else unsupported, saying
/// how `probe` failed; `not_started` words a helper that could not start.
fn probe_answer(
    output: std::io::Result<std::process::Output>,
    probe: &str,
    not_started: impl FnOnce(std::io::Error) -> String,
) -> ProbeResult {
    match output {
        Ok(o) if o.status.success() => serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| unsupported(format!("probe answered nonsense: {e}"))),
        Ok(o) => unsupported(format!(
            "{probe} failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => unsupported(not_started(e)),
    }
}

fn probe_landlock(helper: &Path) -> ProbeResult {
    let base = probe_path("landlock");
    let probe = LandlockProbe {
        allowed: base.join("allowed"),
        forbidden: base.join("forbidden"),
    };
    let made = std::fs::create_dir_all(&probe.allowed)
        .and_then(|()| std::fs::create_dir_all(&probe.forbidden));
    let result = match (made, serde_json::to_string(&probe)) {
        (Ok(()), Ok(json)) => run_probe(helper, &["landlock", &json], &[]),
        (Err(e), _) => unsupported(format!("cannot create probe folders: {e}")),
        (_, Err(e)) => unsupported(e.to_string()),
    };
    let escaped = probe.forbidden.join("probe").exists();
    let _ = std::fs::remove_dir_all(&base);
    if escaped {
        return unsupported("the probe wrote outside its write root".into());
    }
    result
}

/// `spec`'s program did not start or end as asked (`why`).
fn spawn_failed(spec: &ProcessSpec, why: impl std::fmt::Display) -> BackendError {
    BackendError::Spawn {
        message: format!("{}: {why}", spec.program),
    }
}

/// A spec that runs the helper's probe `name` (with `arg`) as the contained program, with no
/// confinement but what the caller turns on.
fn probe_spec(helper: &Path, name: &str, arg: Option<String>) -> SandboxSpec {
    SandboxSpec {
        program: helper.to_string_lossy().into_owned(),
        args: [PROBE_MODE.to_owned(), name.to_owned()]
            .into_iter()
            .chain(arg)
            .collect(),
        cwd: std::env::temp_dir(),
        env: BTreeMap::new(),
        write_roots: Vec::new(),
        read_roots: None,
        network: true,
        landlock: false,
        limits: ResourceLimits::default(),
        isolate_processes: false,
        unix_sockets_off: false,
    }
}

/// Runs the helper in exec mode on itself with a canary in the helper's environment: the
/// program must not see it.
fn probe_env(helper: &Path) -> ProbeResult {
    run_contained_probe(helper, &probe_spec(helper, "env", None), &[(CANARY, "1")])
}

/// Runs `spec` (a probe as the contained program) through the exec mode, the path every real
/// call takes, and reads the probe's answer.
fn run_contained_probe(helper: &Path, spec: &SandboxSpec, env: &[(&str, &str)]) -> ProbeResult {
    let Ok(json) = serde_json::to_string(spec) else {
        return unsupported("cannot encode the probe".into());
    };
    let pid = std::process::id().to_string();
    let output = helper_output(helper, &[EXEC_MODE, &json, &pid], env);
    let probe = format!("{} probe", spec.args.get(1).map_or("the", String::as_str));
    probe_answer(output, &probe, |e| e.to_string())
}

/// A fresh folder for one probe's files.
fn probe_dir(name: &str) -> std::io::Result<PathBuf> {
    let dir = probe_path(name);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Where probe `name` of this process keeps its files, unique to this moment.
fn probe_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "warden-{name}-probe-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ))
}

fn encode(probe: &IsolationProbe) -> Option<String> {
    serde_json::to_string(probe).ok()
}

/// Leaves a descriptor open on a file outside, as a caller might (`exec 7>>file`), runs the
/// probe program through the exec mode, and checks that nothing was written through it.
fn probe_descriptors(helper: &Path) -> ProbeResult {
    use std::os::fd::AsRawFd as _;
    let result = (|| {
        let dir = probe_dir("descriptors").map_err(|e| format!("probe folder: {e}"))?;
        let path = dir.join("outside");
        let file = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        nix::fcntl::fcntl(
            &file,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
        )
        .map_err(|e| format!("keep the descriptor open across exec: {e}"))?;
        let probe = IsolationProbe {
            descriptor: Some(file.as_raw_fd()),
            ..IsolationProbe::default()
        };
        let spec = probe_spec(helper, "descriptors", encode(&probe));
        let result = run_contained_probe(helper, &spec, &[]);
        drop(file);
        let written = std::fs::metadata(&path).map_or(0, |m| m.len());
        let _ = std::fs::remove_dir_all(&dir);
        Ok(if written > 0 {
            unsupported(format!(
                "{written} bytes reached the file through the inherited descriptor"
            ))
        } else {
            result
        })
    })();
    result.unwrap_or_else(unsupported)
}

/// Runs the probe program isolated, telling it this process's id: it must be PID 1 of its own
/// namespace and unable to see or signal this process.
fn probe_processes(helper: &Path) -> ProbeResult {
    let probe = IsolationProbe {
        host_pid: i32::try_from(std::process::id()).ok(),
        ..IsolationProbe::default()
    };
    let mut spec = probe_spec(helper, "processes", encode(&probe));
    spec.isolate_processes = true;
    run_contained_probe(helper, &spec, &[])
}

/// Listens on a socket file and an abstract socket, runs the probe program with the network and
/// UNIX sockets off, and checks that neither listener saw a connection.
fn probe_unix(helper: &Path) -> ProbeResult {
    use std::os::linux::net::SocketAddrExt as _;
    use std::os::unix::net::{SocketAddr, UnixListener};
    let result = (|| {
        let dir = probe_dir("unix").map_err(|e| format!("probe folder: {e}"))?;
        let path = dir.join("host.sock");
        let by_path = UnixListener::bind(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let name = dir.file_name().map_or_else(
            || "warden-unix-probe".into(),
            |n| n.to_string_lossy().into_owned(),
        );
        let by_name = SocketAddr::from_abstract_name(name.as_bytes())
            .and_then(|addr| UnixListener::bind_addr(&addr))
            .map_err(|e| format!("abstract socket @{name}: {e}"))?;
        let probe = IsolationProbe {
            socket_path: Some(path.clone()),
            abstract_name: Some(name.clone()),
            ..IsolationProbe::default()
        };
        let mut spec = probe_spec(helper, "unix", encode(&probe));
        spec.network = false;
        spec.unix_sockets_off = true;
        let result = run_contained_probe(helper, &spec, &[]);
        let mut reached = Vec::new();
        for (listener, what) in [
            (&by_path, "the socket file"),
            (&by_name, "the abstract socket"),
        ] {
            listener
                .set_nonblocking(true)
                .map_err(|e| format!("{what}: {e}"))?;
            if listener.accept().is_ok() {
                reached.push(what);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        Ok(if reached.is_empty() {
            result
        } else {
            unsupported(format!(
                "the contained program connected to {}",
                reached.join(" and ")
            ))
        })
    })();
    result.unwrap_or_else(unsupported)
}
