//! The in-process effect backend: processes run directly, with the caller's full authority.
//!
//! It is honest about it: its capability report lists every containment capability as
//! `unsupported`, so an executor that *requires* containment denies before anything starts.
//! It applies none of a spec's containment fields (write roots, read roots, network, the
//! environment allowlist); it only honours the working directory, extra variables, standard
//! input, the wall-time limit and the output cap.

use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use warden_contracts::{
    BackendError, BackendRef, Capability, CapabilityEntry, CapabilityReport, CapabilityStatus,
    EffectBackend, ProcessOutput, ProcessSpec,
};

/// The name this backend reports.
pub const IN_PROCESS: &str = "in_process";

/// The default output cap per stream when a spec gives none (16 MiB).
const DEFAULT_OUTPUT_CAP: usize = 16 << 20;

/// Runs processes with no containment at all, and says so.
///
/// ```
/// use warden_contracts::{Capability, CapabilityStatus, EffectBackend};
/// let backend = warden_sandbox::InProcessBackend::new();
/// assert_eq!(backend.backend_ref().name(), "in_process");
/// assert!(backend.capabilities().entries.iter().all(|e| e.status == CapabilityStatus::Unsupported));
/// assert_eq!(backend.capabilities().status(Capability::NetworkOff), CapabilityStatus::Unsupported);
/// ```
#[derive(Debug, Clone)]
pub struct InProcessBackend {
    report: CapabilityReport,
}

impl Default for InProcessBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl InProcessBackend {
    /// The backend, with its (all-unsupported) report.
    pub fn new() -> Self {
        let reference = BackendRef::new(IN_PROCESS)
            .unwrap_or_else(|e| unreachable!("`{IN_PROCESS}` is a valid backend name: {e}"));
        let entries = [
            Capability::FilesystemWriteRoots,
            Capability::FilesystemReadRoots,
            Capability::NetworkOff,
            Capability::EnvAllowlist,
            Capability::ResourceLimits,
            Capability::ProcessIsolation,
        ]
        .into_iter()
        .map(|capability| CapabilityEntry {
            capability,
            status: CapabilityStatus::Unsupported,
            detail:
                "in-process backend: runs with the caller's full authority; enforces no containment"
                    .into(),
        })
        .collect();
        Self {
            report: CapabilityReport {
                backend: reference,
                entries,
            },
        }
    }
}

// This crate owns subprocesses: the one place the in-process backend spawns one.
#[allow(clippy::disallowed_methods)]
fn command(program: &str) -> tokio::process::Command {
    tokio::process::Command::new(program)
}

#[async_trait]
impl EffectBackend for InProcessBackend {
    fn backend_ref(&self) -> BackendRef {
        self.report.backend.clone()
    }

    fn capabilities(&self) -> &CapabilityReport {
        &self.report
    }

    async fn run(&self, spec: ProcessSpec) -> Result<ProcessOutput, BackendError> {
        let spawn_err = |e: std::io::Error| BackendError::Spawn {
            message: format!("{}: {e}", spec.program),
        };
        let mut child = command(&spec.program)
            .args(&spec.args)
            .current_dir(&spec.cwd)
            .envs(&spec.env_set)
            .stdin(if spec.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(spawn_err)?;
        if let (Some(input), Some(mut stdin)) = (spec.stdin.clone(), child.stdin.take()) {
            tokio::spawn(async move {
                let _ = stdin.write_all(input.as_bytes()).await;
            });
        }
        let cap = spec
            .max_output_bytes
            .and_then(|b| usize::try_from(b).ok())
            .unwrap_or(DEFAULT_OUTPUT_CAP);
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let run = async {
            let ((out, out_cut), (err, err_cut)) =
                tokio::join!(read_capped(stdout, cap), read_capped(stderr, cap));
            (out, err, out_cut || err_cut)
        };
        let (stdout, stderr, truncated, timed_out) = match spec.timeout_ms {
            Some(ms) => match tokio::time::timeout(Duration::from_millis(ms), run).await {
                Ok((o, e, t)) => (o, e, t, false),
                Err(_) => (Vec::new(), Vec::new(), false, true),
            },
            None => {
                let (o, e, t) = run.await;
                (o, e, t, false)
            }
        };
        if timed_out || truncated {
            let _ = child.start_kill();
        }
        let status = child.wait().await.map_err(spawn_err)?;
        use std::os::unix::process::ExitStatusExt as _;
        Ok(ProcessOutput {
            exit_code: status.code(),
            signal: status.signal(),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            truncated,
            timed_out,
        })
    }
}

/// Reads a pipe to its end or until `cap` bytes; returns what was read and whether it was cut.
async fn read_capped(pipe: Option<impl AsyncRead + Unpin>, cap: usize) -> (Vec<u8>, bool) {
    let Some(mut pipe) = pipe else {
        return (Vec::new(), false);
    };
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return (buf, false),
            Ok(n) => {
                let room = cap.saturating_sub(buf.len());
                if n > room {
                    buf.extend_from_slice(&chunk[..room]);
                    return (buf, true);
                }
                buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
}
