//! Transport admission: whether a declared server may be started or dialled, decided before
//! anything is spawned or connected, and failing closed.
//!
//! - A command needs `allow_commands`; with a `command_allowlist`, an exact bare-name match (a
//!   path is refused, naming the bare name to allow instead).
//! - A URL needs `allow_urls`, the `https` or `wss` scheme, and, with a `url_allowlist`, an
//!   exact host match (case-insensitive, port ignored).
//! - A started server's environment starts empty, gets the `env_allow` names present in the
//!   host's environment, and loses every name that contains a deny fragment
//!   (case-insensitive), even one `env_allow` names.
//! - Connections per server are capped: [`ConnectionLimiter`] hands out permits and refuses
//!   past the cap.
//!
//! Admission and tool permission are independent both ways: an admitted server's tools are
//! still decided call by call, and a policy that allows a tool does not admit its server.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use warden_policy::mcp::{McpServer, McpSettings, Transport};

/// Why a server is not admitted. Each names the server and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    /// Commands are disabled.
    #[error(
        "MCP server `{server}`: starting commands is disabled (set `allow_commands = true` in [mcp]); refused `{command}`"
    )]
    CommandsDisabled {
        /// The server.
        server: String,
        /// Its command.
        command: String,
    },
    /// A command given as a path while an allowlist names bare commands.
    #[error(
        "MCP server `{server}`: `{command}` is a path; the command allowlist names bare commands: write `{bare}` (found on PATH)"
    )]
    PathNotBare {
        /// The server.
        server: String,
        /// Its command.
        command: String,
        /// The bare name the allowlist holds.
        bare: String,
    },
    /// A command not in the allowlist.
    #[error("MCP server `{server}`: command `{command}` is not in the allowlist {allowed:?}")]
    CommandNotAllowed {
        /// The server.
        server: String,
        /// Its command.
        command: String,
        /// The allowlist.
        allowed: Vec<String>,
    },
    /// URLs are disabled.
    #[error(
        "MCP server `{server}`: dialling URLs is disabled (set `allow_urls = true` in [mcp]); refused `{url}`"
    )]
    UrlsDisabled {
        /// The server.
        server: String,
        /// Its URL.
        url: String,
    },
    /// A URL that does not parse or has no host.
    #[error("MCP server `{server}`: `{url}` is not a URL with a host")]
    BadUrl {
        /// The server.
        server: String,
        /// Its URL.
        url: String,
    },
    /// A scheme other than `https` or `wss`.
    #[error("MCP server `{server}`: `{url}` uses `{scheme}`; only https and wss are dialled")]
    Scheme {
        /// The server.
        server: String,
        /// Its URL.
        url: String,
        /// The scheme.
        scheme: String,
    },
    /// A host not in the allowlist.
    #[error("MCP server `{server}`: host `{host}` is not in the allowlist {allowed:?}")]
    HostNotAllowed {
        /// The server.
        server: String,
        /// The URL's host.
        host: String,
        /// The allowlist.
        allowed: Vec<String>,
    },
    /// The connection cap is reached.
    #[error(
        "MCP server `{server}`: {max} connection(s) already open, the most `max_connections_per_server` allows"
    )]
    ConnectionCap {
        /// The server.
        server: String,
        /// The cap.
        max: u32,
    },
}

/// What an admitted server is reached by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// Start `program` with `args` in `cwd`, with exactly `env` as its environment.
    Command {
        /// The program as declared.
        program: String,
        /// Its arguments.
        args: Vec<String>,
        /// Its working directory (the declaring file's folder), if known.
        cwd: Option<PathBuf>,
        /// Its whole environment.
        env: BTreeMap<String, String>,
    },
    /// Dial this Streamable HTTP endpoint.
    Url(url::Url),
}

/// Decides whether `server` may be started or dialled under `settings`, and how. `host_env`
/// is the environment the server's would be drawn from (the caller's own).
///
/// ```
/// use warden_mcp::admission::{admit, AdmissionError};
/// use warden_policy::mcp::{McpServer, McpSettings, Transport};
/// let server = McpServer {
///     name: "fs".into(),
///     transport: Transport::Command { command: "node".into(), args: vec![], cwd: None },
///     trusted: false,
///     declared_in: "policy.toml".into(),
/// };
/// // Fail closed: by default nothing is started.
/// let refused = admit(&McpSettings::default(), &server, std::iter::empty());
/// assert!(matches!(refused, Err(AdmissionError::CommandsDisabled { .. })));
/// let settings = McpSettings { allow_commands: true, ..McpSettings::default() };
/// assert!(admit(&settings, &server, std::iter::empty()).is_ok());
/// ```
pub fn admit(
    settings: &McpSettings,
    server: &McpServer,
    host_env: impl IntoIterator<Item = (String, String)>,
) -> Result<Launch, AdmissionError> {
    match &server.transport {
        Transport::Command { command, args, cwd } => {
            check_command(settings, &server.name, command)?;
            Ok(Launch::Command {
                program: command.clone(),
                args: args.clone(),
                cwd: cwd.clone(),
                env: filter_env(settings, host_env),
            })
        }
        Transport::Url(url) => check_url(settings, &server.name, url).map(Launch::Url),
    }
}

/// The command check on its own.
pub fn check_command(
    settings: &McpSettings,
    server: &str,
    command: &str,
) -> Result<(), AdmissionError> {
    if !settings.allow_commands {
        return Err(AdmissionError::CommandsDisabled {
            server: server.to_owned(),
            command: command.to_owned(),
        });
    }
    let Some(allowed) = &settings.command_allowlist else {
        return Ok(());
    };
    if allowed.iter().any(|a| a == command) && !command.contains(['/', '\\']) {
        return Ok(());
    }
    let bare = command.rsplit('/').next().unwrap_or(command);
    if command.contains('/') && allowed.iter().any(|a| a == bare) {
        return Err(AdmissionError::PathNotBare {
            server: server.to_owned(),
            command: command.to_owned(),
            bare: bare.to_owned(),
        });
    }
    Err(AdmissionError::CommandNotAllowed {
        server: server.to_owned(),
        command: command.to_owned(),
        allowed: allowed.clone(),
    })
}

/// The URL check on its own: the parsed URL when admitted.
pub fn check_url(
    settings: &McpSettings,
    server: &str,
    url: &str,
) -> Result<url::Url, AdmissionError> {
    if !settings.allow_urls {
        return Err(AdmissionError::UrlsDisabled {
            server: server.to_owned(),
            url: url.to_owned(),
        });
    }
    let bad = || AdmissionError::BadUrl {
        server: server.to_owned(),
        url: url.to_owned(),
    };
    let parsed = url::Url::parse(url).map_err(|_| bad())?;
    if !matches!(parsed.scheme(), "https" | "wss") {
        return Err(AdmissionError::Scheme {
            server: server.to_owned(),
            url: url.to_owned(),
            scheme: parsed.scheme().to_owned(),
        });
    }
    let host = parsed.host_str().ok_or_else(bad)?.to_ascii_lowercase();
    if let Some(allowed) = &settings.url_allowlist
        && !allowed.iter().any(|a| a.eq_ignore_ascii_case(&host))
    {
        return Err(AdmissionError::HostNotAllowed {
            server: server.to_owned(),
            host,
            allowed: allowed.clone(),
        });
    }
    Ok(parsed)
}

/// A started server's environment: the `env_allow` names found in `host_env`, without any
/// name that contains a deny fragment (compared upper-cased).
pub fn filter_env(
    settings: &McpSettings,
    host_env: impl IntoIterator<Item = (String, String)>,
) -> BTreeMap<String, String> {
    host_env
        .into_iter()
        .filter(|(name, _)| settings.env_allow.iter().any(|a| a == name))
        .filter(|(name, _)| !sensitive(settings, name))
        .collect()
}

/// Whether a variable name holds one of the deny fragments (case-insensitively).
pub fn sensitive(settings: &McpSettings, name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    settings
        .env_deny
        .iter()
        .any(|d| upper.contains(&d.to_ascii_uppercase()))
}

/// Counts open connections per server and refuses past the cap. Cloning shares the counts.
#[derive(Debug, Clone)]
pub struct ConnectionLimiter {
    max: u32,
    open: Arc<Mutex<HashMap<String, u32>>>,
}

/// One open connection; dropping it frees its slot.
#[derive(Debug)]
pub struct ConnectionPermit {
    server: String,
    open: Arc<Mutex<HashMap<String, u32>>>,
}

impl ConnectionLimiter {
    /// A limiter allowing `max` connections per server.
    pub fn new(max: u32) -> Self {
        Self {
            max,
            open: Arc::default(),
        }
    }

    /// A slot for one more connection to `server`, or the cap's refusal.
    ///
    /// ```
    /// use warden_mcp::admission::ConnectionLimiter;
    /// let limiter = ConnectionLimiter::new(1);
    /// let first = limiter.acquire("fs").unwrap();
    /// assert!(limiter.acquire("fs").is_err());
    /// drop(first);
    /// assert!(limiter.acquire("fs").is_ok());
    /// ```
    pub fn acquire(&self, server: &str) -> Result<ConnectionPermit, AdmissionError> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(server.to_owned()).or_insert(0);
        if *count >= self.max {
            return Err(AdmissionError::ConnectionCap {
                server: server.to_owned(),
                max: self.max,
            });
        }
        *count += 1;
        Ok(ConnectionPermit {
            server: server.to_owned(),
            open: Arc::clone(&self.open),
        })
    }

    /// Connections open to `server` now.
    pub fn open(&self, server: &str) -> u32 {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(server).copied().unwrap_or(0)
    }
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.server) {
            *count = count.saturating_sub(1);
        }
    }
}
