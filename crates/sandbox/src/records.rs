//! Process records: a backend writes one file for each process it starts without the guarantee
//! that the process dies with its starter (no PID namespace of its own), so that after a crash
//! a later run can tell whether anything of it may still be running before it closes the
//! operation the process belonged to.
//!
//! Each record has a token, unique on the machine, that names it: its file is `TOKEN.process`
//! and the process gets `WARDEN_PROCESS_RECORD=TOKEN` in its environment, which what it starts
//! inherits. The file is written (atomically: a temporary file renamed into place) *before*
//! the process starts, saying `starting`, then rewritten with the process id and its start time
//! (field 22 of `/proc/PID/stat`, clock ticks since boot, so a reused id is told apart), and
//! removed once the process has been waited for.
//!
//! A record's survivors are the recorded process if it is still alive (even after an `exec`
//! that dropped the variable: its id and start time stay), and every live process whose
//! environment carries the token: its descendants, and the process itself when its starter died
//! before writing its id. Not found: a descendant that dropped the variable, and a process that
//! dropped it within the instant before its id was written, while its starter was being
//! killed. Only process isolation contains everything a call starts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use warden_contracts::BackendError;

use crate::error::SandboxError;

/// The variable that carries a record's token into the recorded process's environment.
pub const RECORD_VARIABLE: &str = "WARDEN_PROCESS_RECORD";

const SUFFIX: &str = "process";
const STARTING: &str = "starting";

/// The folder a backend records its processes in (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRecords {
    dir: PathBuf,
}

/// A recorded process, or one of its descendants, that may still be running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Survivor {
    /// A live process: the recorded one (same id, same start time, not a zombie) or one whose
    /// environment carries the record's token.
    Running {
        /// Its process id.
        pid: u32,
        /// The record it belongs to.
        record: PathBuf,
    },
    /// A record that cannot be read: nothing tells that its process has ended.
    Unreadable {
        /// The record.
        record: PathBuf,
    },
}

impl Survivor {
    /// The record it belongs to.
    pub fn record(&self) -> &Path {
        match self {
            Self::Running { record, .. } | Self::Unreadable { record } => record,
        }
    }
}

impl std::fmt::Display for Survivor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Running { pid, record } => {
                write!(f, "process {pid} is still running ({})", record.display())
            }
            Self::Unreadable { record } => {
                write!(f, "the process record {} cannot be read", record.display())
            }
        }
    }
}

impl ProcessRecords {
    /// Records in `dir` (created with the first record).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What of the recorded processes may still be running (see the module documentation),
    /// ordered by record. A missing folder has none.
    pub fn survivors(&self) -> Result<Vec<Survivor>, SandboxError> {
        let io = |e: std::io::Error| SandboxError::Spawn(format!("{}: {e}", self.dir.display()));
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(e)),
        };
        // token → (record, what it says)
        let mut records = BTreeMap::new();
        for entry in entries {
            let path = entry.map_err(io)?.path();
            if path.extension().and_then(|e| e.to_str()) != Some(SUFFIX) {
                continue; // a temporary file never renamed into place
            }
            let Some(token) = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else {
                continue;
            };
            let text = std::fs::read_to_string(&path).ok();
            records.insert(token, (path, text));
        }
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let carriers = carriers_of(&records);
        let mut out = Vec::new();
        for (token, (record, text)) in &records {
            let mut pids: Vec<u32> = carriers.get(token).cloned().unwrap_or_default();
            match text.as_deref().map(parse) {
                Some(Some((pid, start))) => {
                    if alive(pid, start) {
                        pids.push(pid);
                    }
                }
                Some(None) if text.as_deref().map(str::trim) == Some(STARTING) => {}
                // Unreadable, or neither `starting` nor an id: it cannot be ruled out.
                _ => {
                    out.push(Survivor::Unreadable {
                        record: record.clone(),
                    });
                    continue;
                }
            }
            pids.sort_unstable();
            pids.dedup();
            out.extend(pids.into_iter().map(|pid| Survivor::Running {
                pid,
                record: record.clone(),
            }));
        }
        Ok(out)
    }

    /// Writes the record of a process about to start; `Err` means it must not start.
    pub(crate) fn starting(&self) -> Result<Record, BackendError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let fail = |e: std::io::Error| BackendError::Spawn {
            message: format!("cannot record the process in {}: {e}", self.dir.display()),
        };
        std::fs::create_dir_all(&self.dir).map_err(fail)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let token = format!(
            "{}-{nanos}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let record = Record {
            path: self.dir.join(format!("{token}.{SUFFIX}")),
            token,
        };
        record.write(STARTING).map_err(fail)?;
        Ok(record)
    }
}

/// One process's record; dropping it removes the file (once the process was waited for).
#[derive(Debug)]
pub(crate) struct Record {
    path: PathBuf,
    token: String,
}

impl Record {
    /// The value of [`RECORD_VARIABLE`] for the recorded process.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// Replaces `starting` with the process's id and start time. If that fails the record
    /// keeps saying `starting`, and the process is still found by its token.
    pub(crate) fn started(&self, pid: u32) {
        if let Some((_, start)) = stat(pid) {
            let _ = self.write(&format!("pid {pid} start {start}\n"));
        }
    }

    fn write(&self, text: &str) -> std::io::Result<()> {
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &self.path)
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `pid N start T` → (N, T).
fn parse(text: &str) -> Option<(u32, u64)> {
    let mut words = text.split_whitespace();
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some("pid"), Some(pid), Some("start"), Some(start)) => {
            Some((pid.parse().ok()?, start.parse().ok()?))
        }
        _ => None,
    }
}

/// A process's state letter and start time, from `/proc/PID/stat`.
fn stat(pid: u32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`: the name may hold spaces and parentheses. After it, the state
    // is the first field and the start time the twentieth.
    let (_, rest) = text.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// Whether the process that had id `pid` and started at `start` still runs (a zombie has
/// ended; another process with the same id started at another time).
fn alive(pid: u32, start: u64) -> bool {
    matches!(stat(pid), Some((state, s)) if s == start && !ended(state))
}

fn ended(state: char) -> bool {
    matches!(state, 'Z' | 'X')
}

/// The live processes whose environment carries one of `records`' tokens, by token. Processes
/// whose environment cannot be read (another user's) are not ours.
fn carriers_of<T>(records: &BTreeMap<String, T>) -> BTreeMap<String, Vec<u32>> {
    let mut out: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    let prefix = format!("{RECORD_VARIABLE}=");
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let token = environ
            .split(|&b| b == 0)
            .find_map(|var| var.strip_prefix(prefix.as_bytes()))
            .and_then(|t| std::str::from_utf8(t).ok());
        if let Some(token) = token
            && records.contains_key(token)
            && stat(pid).is_some_and(|(state, _)| !ended(state))
        {
            out.entry(token.to_owned()).or_default().push(pid);
        }
    }
    out
}
