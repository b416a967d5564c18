//! The in-process effect backend: processes run directly, with the caller's full authority.
//!
//! It is honest about it: its capability report lists every containment capability as
//! `unsupported`, so an executor that *requires* containment denies before anything starts.
//! It applies none of a spec's containment fields (write roots, read roots, network, the
//! environment allowlist); it only honours the working directory, extra variables, standard
//! input, the wall-time limit and the output cap.

use async_trait::async_trait;
use warden_contracts::{
    BackendError, BackendRef, Capability, CapabilityEntry, CapabilityReport, CapabilityStatus,
    EffectBackend, ProcessOutput, ProcessSpec,
};

use crate::records::{ProcessRecords, RECORD_VARIABLE};

/// The name this backend reports.
pub const IN_PROCESS: &str = "in_process";

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
    records: Option<ProcessRecords>,
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
        let entries = Capability::ALL
            .into_iter()
            .map(|capability| {
                CapabilityEntry {
            capability,
            status: CapabilityStatus::Unsupported,
            detail:
                "in-process backend: runs with the caller's full authority; enforces no containment"
                    .into(),
        }
            })
            .collect();
        Self {
            report: CapabilityReport {
                backend: reference,
                entries,
            },
            records: None,
        }
    }

    /// The same backend recording every process it starts in `records` (none of them dies
    /// with this process: see [`ProcessRecords`]); each gets the record's token in
    /// [`RECORD_VARIABLE`](crate::RECORD_VARIABLE).
    pub fn with_process_records(mut self, records: ProcessRecords) -> Self {
        self.records = Some(records);
        self
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
        let mut cmd = command(&spec.program);
        cmd.args(&spec.args)
            .current_dir(&spec.cwd)
            .envs(&spec.env_set);
        let record = self
            .records
            .as_ref()
            .map(ProcessRecords::starting)
            .transpose()?;
        if let Some(record) = &record {
            cmd.env(RECORD_VARIABLE, record.token());
        }
        crate::capture::run(cmd, &spec, record).await
    }
}
