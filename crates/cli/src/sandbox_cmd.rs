//! `warden sandbox probe`: what the subprocess backend can prove on this machine, one entry per
//! mechanism with whether it is supported and the probe's evidence. The `warden` binary hosts
//! the re-exec helper itself, so the probe exercises exactly what `warden exec` will use.

use std::io::Write;
use std::process::ExitCode;

use serde_json::json;
use warden_sandbox::SubprocessBackend;

use crate::OutputFormat;
use crate::error::CliError;

/// The subprocess backend, probed with this binary as its helper.
pub(crate) fn subprocess_backend() -> Result<SubprocessBackend, CliError> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Input(format!("cannot find the warden binary: {e}")))?;
    SubprocessBackend::probe(exe).map_err(|e| CliError::Input(e.to_string()))
}

pub(crate) fn probe(format: OutputFormat, out: &mut impl Write) -> Result<ExitCode, CliError> {
    let backend = subprocess_backend()?;
    let mechanisms = backend.mechanisms();
    match format {
        OutputFormat::Json => {
            let entries: Vec<_> = mechanisms
                .iter()
                .map(|(m, supported, evidence)| {
                    json!({"mechanism": m.name(), "supported": supported, "evidence": evidence})
                })
                .collect();
            writeln!(
                out,
                "{}",
                json!({"backend": "subprocess", "mechanisms": entries})
            )?;
        }
        OutputFormat::Text => {
            for (m, supported, evidence) in &mechanisms {
                let mark = if *supported {
                    "supported  "
                } else {
                    "UNSUPPORTED"
                };
                writeln!(out, "{:<18} {mark} {evidence}", m.name())?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
