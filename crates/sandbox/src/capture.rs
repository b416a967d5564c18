//! Running a prepared command to its end under the spec's limits, shared by both backends:
//! stdin fed in the background, stdout and stderr captured up to a cap, the wall-time limit
//! enforced, and the process killed when it passes either.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use warden_contracts::{BackendError, ProcessOutput, ProcessSpec};

use crate::records::Record;

/// The output cap when the spec sets none (per stream).
pub(crate) const DEFAULT_OUTPUT_CAP: usize = 16 << 20;

/// Spawns `command` (pipes and `kill_on_drop` are set here) and runs it under `spec`'s limits.
/// With a `record` (written before the spawn, its token already in `command`'s environment),
/// the process's id is added to it once started, and the record removed once the process has
/// been waited for (crate::records).
pub(crate) async fn run(
    mut command: tokio::process::Command,
    spec: &ProcessSpec,
    record: Option<Record>,
) -> Result<ProcessOutput, BackendError> {
    let spawn_err = |e: std::io::Error| BackendError::Spawn {
        message: format!("{}: {e}", spec.program),
    };
    let mut child = command
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
    if let (Some(record), Some(pid)) = (&record, child.id()) {
        record.started(pid);
    }
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
    let collect = async {
        let ((out, out_cut), (err, err_cut)) =
            tokio::join!(read_capped(stdout, cap), read_capped(stderr, cap));
        (out, err, out_cut || err_cut)
    };
    let (stdout, stderr, truncated, timed_out) = match spec.timeout_ms {
        Some(ms) => match tokio::time::timeout(Duration::from_millis(ms), collect).await {
            Ok((o, e, t)) => (o, e, t, false),
            Err(_) => (Vec::new(), Vec::new(), false, true),
        },
        None => {
            let (o, e, t) = collect.await;
            (o, e, t, false)
        }
    };
    if timed_out || truncated {
        let _ = child.start_kill();
    }
    let status = child.wait().await.map_err(spawn_err)?;
    drop(record);
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
