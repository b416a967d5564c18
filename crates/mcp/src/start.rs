//! Starting an admitted server: admission first, then a connection slot held for as long as it
//! runs, then either the command started contained by `warden-sandbox` (environment exactly as
//! admitted, writes only under the declaring policy file's folder, no network) and an MCP
//! connection over its pipes, or the admitted URL dialled over Streamable HTTP.

use std::path::PathBuf;
use std::time::Duration;

use warden_contracts::ProcessSpec;
use warden_policy::mcp::{McpServer, McpSettings};
use warden_sandbox::{PipedProcess, SubprocessBackend};

use crate::admission::{AdmissionError, ConnectionLimiter, ConnectionPermit, Launch, admit};
use crate::client::ClientError;
use crate::discovery::ServerConnection;

/// Why a server did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Admission refused it; nothing was started.
    #[error(transparent)]
    Refused(#[from] AdmissionError),
    /// It was admitted but could not be started contained.
    #[error("MCP server `{server}` could not start: {message}")]
    Spawn {
        /// The server.
        server: String,
        /// What failed.
        message: String,
    },
    /// It started (or was dialled) but did not speak MCP.
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// A running, connected server. Dropping it ends the connection, kills the process (a
/// command server's) and frees its connection slot.
#[derive(Debug)]
pub struct StartedServer {
    /// The MCP connection.
    pub connection: ServerConnection,
    _process: Option<PipedProcess>,
    _permit: ConnectionPermit,
}

/// What keeps a started server running (its process, if it has one here, and connection
/// slot) once its connection is handed on. Dropping it kills the process and frees the slot.
#[derive(Debug)]
pub struct Running {
    _process: Option<PipedProcess>,
    _permit: ConnectionPermit,
}

impl StartedServer {
    /// The connection, and what keeps the server running.
    pub fn into_parts(self) -> (ServerConnection, Running) {
        (
            self.connection,
            Running {
                _process: self._process,
                _permit: self._permit,
            },
        )
    }
}

/// Admits `server` under `settings`, takes a connection slot from `limiter`, and connects: a
/// command server started contained by `backend` with its environment drawn from `host_env`,
/// a URL server dialled over Streamable HTTP.
pub async fn start(
    server: &McpServer,
    settings: &McpSettings,
    backend: &SubprocessBackend,
    limiter: &ConnectionLimiter,
    host_env: impl IntoIterator<Item = (String, String)>,
    timeout: Duration,
) -> Result<StartedServer, StartError> {
    let launch = admit(settings, server, host_env)?;
    let (program, args, cwd, env) = match launch {
        Launch::Command {
            program,
            args,
            cwd,
            env,
        } => (program, args, cwd, env),
        Launch::Url(url) => {
            let permit = limiter.acquire(&server.name)?;
            let connection = ServerConnection::dial(server, &url, timeout).await?;
            return Ok(StartedServer {
                connection,
                _process: None,
                _permit: permit,
            });
        }
    };
    let permit = limiter.acquire(&server.name)?;
    let spawn_err = |message: String| StartError::Spawn {
        server: server.name.clone(),
        message,
    };
    let cwd: PathBuf = match cwd {
        Some(dir) => dir,
        None => std::env::current_dir().map_err(|e| spawn_err(e.to_string()))?,
    };
    let spec = ProcessSpec {
        program,
        args,
        cwd: cwd.display().to_string(),
        env_allowlist: Vec::new(),
        env_set: env,
        stdin: None,
        write_roots: vec![cwd.display().to_string()],
        read_roots: None,
        network: false,
        timeout_ms: None,
        max_output_bytes: None,
        degradable: Vec::new(),
    };
    let mut process = backend
        .spawn_piped(&spec)
        .map_err(|e| spawn_err(e.to_string()))?;
    let (stdin, stdout) = process
        .take_pipes()
        .ok_or_else(|| spawn_err("no pipes".into()))?;
    let connection = ServerConnection::over(server, stdout, stdin, timeout).await?;
    Ok(StartedServer {
        connection,
        _process: Some(process),
        _permit: permit,
    })
}
