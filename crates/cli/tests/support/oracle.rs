//! The bash oracle: real bash decides what a command runs.
//!
//! For a command Warden **allows**, the oracle runs it with the machine's `bash --norc
//! --noprofile -c` inside Warden's own containment (writes only under a throwaway folder, no
//! network, processes of its own), and observes what bash did:
//!
//! - every simple command it ran, builtins and functions included, from `set -x` written to a
//!   descriptor of the oracle's (`BASH_XTRACEFD`, a per-run marker in `PS4`);
//! - every program it ran, from `command_not_found_handle`: `PATH` holds no program but the
//!   shells (which are the real bash, instrumented the same way through `BASH_ENV`), so every
//!   other program is logged with its exact argv and does nothing — a second channel that
//!   `set +x` cannot hide;
//! - every file created, changed or deleted in the folder, by comparing it before and after.
//!
//! Then every command bash ran must be one of the allow verdict's command subjects (its
//! program and every literal word; a word with an expansion may stand for any words), and every
//! file it changed must be the target of one of its write subjects. Anything else is a
//! [`Finding`]: a command Warden allowed while bash ran something else.
//!
//! The same module drives the fuzz target `fuzz/fuzz_targets/shell_oracle.rs`.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use warden_contracts::{EffectBackend, ProcessSpec};
use warden_policy::shell::{ShellSubject, split_command};
use warden_policy::{Call, Decision, PolicySnapshot};
use warden_sandbox::SubprocessBackend;

/// What checking one command found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Checked {
    /// Warden does not allow it: nothing to hold it to.
    NotAllowed(Decision),
    /// Warden allows it and bash did nothing else: how many commands and file changes were
    /// observed (and whether bash was stopped at the time limit).
    Covered {
        commands: usize,
        files: usize,
        timed_out: bool,
    },
}

/// A command Warden allowed while bash ran something its subjects do not cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    /// The command.
    pub(crate) command: String,
    /// What bash did that no subject covers.
    pub(crate) uncovered: Vec<String>,
    /// Warden's subjects, as text.
    pub(crate) subjects: Vec<String>,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?}: bash did {:?}, Warden's subjects were {:?}",
            self.command, self.uncovered, self.subjects
        )
    }
}

/// The oracle: a contained backend and a folder per run.
pub(crate) struct Oracle {
    backend: SubprocessBackend,
    runs: AtomicU64,
    bash: PathBuf,
}

/// Programs whose names run the real (instrumented) bash: every shell a payload could name.
const SHELLS: [&str; 9] = [
    "bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "yash", "rbash",
];

/// Files every run starts with, relative to the workspace (`ws`): content, or `->target` for a
/// symlink.
const SEED: [(&str, &str); 6] = [
    ("a.txt", "a\n"),
    ("src/main.rs", "fn main() {}\n"),
    (".git/hooks/.keep", ""),
    (".env", "SECRET=1\n"),
    ("x", "x\n"),
    ("link", "->.git/hooks/pre-commit"),
];

impl Oracle {
    /// An oracle whose bash runs under `helper`'s containment (a binary hosting Warden's
    /// sandbox helper; the `warden` binary does).
    pub(crate) fn new(helper: PathBuf) -> Result<Self, String> {
        let backend = SubprocessBackend::probe(helper).map_err(|e| e.to_string())?;
        let bash = ["/bin/bash", "/usr/bin/bash"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .ok_or("no bash on this machine")?;
        Ok(Self {
            backend,
            runs: AtomicU64::new(0),
            bash,
        })
    }

    /// Decides `command` under `policy` and, when it is allowed, runs it through real bash and
    /// holds what bash did to the verdict's subjects.
    pub(crate) fn check(&self, policy: &PolicySnapshot, command: &str) -> Result<Checked, Finding> {
        let run = Run::new(self.runs.fetch_add(1, Ordering::Relaxed))
            .map_err(|e| self.broken(command, e))?;
        let mut call =
            Call::new("bash", serde_json::json!({"command": command})).with_cwd(run.ws.clone());
        warden_policy::edge::resolve_call_paths(policy, &mut call);
        let verdict = policy.decide(&call);
        if verdict.decision != Decision::Allow {
            return Ok(Checked::NotAllowed(verdict.decision));
        }
        let subjects = split_command(command)
            .map_err(|e| self.broken(command, format!("allowed, yet it does not split: {e}")))?;
        let before = snapshot(&run.root);
        let timed_out = self
            .run_bash(&run, command)
            .map_err(|e| self.broken(command, e))?;
        let after = snapshot(&run.root);
        let log = std::fs::read(&run.log).unwrap_or_default();
        let records = records(&log, &run.nonce);
        let mut uncovered = Vec::new();
        for r in &records {
            if !command_covered(r, &subjects, &run) {
                uncovered.push(format!("ran {r:?}"));
            }
        }
        let changes = changes(&before, &after);
        for path in &changes {
            if !file_covered(path, &subjects, &run, &records) {
                uncovered.push(format!("changed {}", path.display()));
            }
        }
        if uncovered.is_empty() {
            Ok(Checked::Covered {
                commands: records.len(),
                files: changes.len(),
                timed_out,
            })
        } else {
            Err(Finding {
                command: command.to_owned(),
                uncovered,
                subjects: subjects.iter().map(|s| s.text().to_owned()).collect(),
            })
        }
    }

    /// What bash did with `command`, no verdict asked: the words of every command it ran and
    /// every path it created, changed or deleted (relative to the working directory). The
    /// oracle's own tests use it to show it sees what it must.
    pub(crate) fn observe(
        &self,
        command: &str,
    ) -> Result<(Vec<Vec<String>>, Vec<PathBuf>), String> {
        let run = Run::new(self.runs.fetch_add(1, Ordering::Relaxed))?;
        let before = snapshot(&run.root);
        self.run_bash(&run, command)?;
        let after = snapshot(&run.root);
        let log = std::fs::read(&run.log).unwrap_or_default();
        let ran = records(&log, &run.nonce)
            .into_iter()
            .map(|r| r.words)
            .collect();
        let changed = changes(&before, &after)
            .into_iter()
            .map(|p| p.strip_prefix(&run.ws).map(Path::to_path_buf).unwrap_or(p))
            .collect();
        Ok((ran, changed))
    }

    fn broken(&self, command: &str, why: String) -> Finding {
        Finding {
            command: command.to_owned(),
            uncovered: vec![format!("the oracle could not run: {why}")],
            subjects: Vec::new(),
        }
    }

    /// Runs bash in the run's folder, contained; returns whether it was stopped at its limit.
    fn run_bash(&self, run: &Run, command: &str) -> Result<bool, String> {
        let env: BTreeMap<String, String> = [
            ("PATH", run.bin.display().to_string()),
            ("HOME", run.home.display().to_string()),
            ("BASH_ENV", run.env_file.display().to_string()),
            ("WARDEN_ORACLE_LOG", run.log.display().to_string()),
            ("WARDEN_ORACLE_NONCE", run.nonce.clone()),
            ("LC_ALL", "C".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let spec = ProcessSpec {
            program: self.bash.display().to_string(),
            args: vec![
                "--norc".into(),
                "--noprofile".into(),
                "-c".into(),
                command.into(),
            ],
            cwd: run.ws.display().to_string(),
            env_allowlist: Vec::new(),
            env_set: env,
            stdin: None,
            write_roots: vec![run.root.display().to_string()],
            read_roots: None,
            network: false,
            timeout_ms: Some(3_000),
            max_output_bytes: Some(64 * 1024),
            degradable: Vec::new(),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let out = rt
            .block_on(self.backend.run(spec))
            .map_err(|e| e.to_string())?;
        Ok(out.timed_out)
    }
}

/// One run's throwaway folder: `bin/` (the shells), `home/`, `ws/` (the working directory,
/// seeded), the instrumentation and the log.
struct Run {
    _dir: tempfile::TempDir,
    root: PathBuf,
    bin: PathBuf,
    home: PathBuf,
    ws: PathBuf,
    env_file: PathBuf,
    log: PathBuf,
    nonce: String,
}

impl Run {
    fn new(n: u64) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let root = dir.path().canonicalize().map_err(|e| e.to_string())?;
        let (bin, home, ws) = (root.join("bin"), root.join("home"), root.join("ws"));
        for d in [&bin, &home, &ws] {
            std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
        }
        let nonce = format!(
            "W{}x{n}x{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        );
        // Every shell name runs the real bash, instrumented through BASH_ENV.
        let bash = ["/bin/bash", "/usr/bin/bash"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .ok_or("no bash")?;
        // `bash` is the real one; other shell names a script that runs it (under `-p`, the
        // script itself reads no BASH_ENV, so only the bash it runs is instrumented).
        std::os::unix::fs::symlink(bash, bin.join("bash")).map_err(|e| e.to_string())?;
        for shell in SHELLS.iter().filter(|s| **s != "bash") {
            let path = bin.join(shell);
            std::fs::write(&path, format!("#!{bash} -p\nexec {bash} \"$@\"\n"))
                .map_err(|e| e.to_string())?;
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| e.to_string())?;
        }
        for (path, content) in SEED {
            let path = ws.join(path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
            }
            match content.strip_prefix("->") {
                Some(target) => std::os::unix::fs::symlink(target, &path),
                None => std::fs::write(&path, content),
            }
            .map_err(|e| e.to_string())?;
        }
        let env_file = root.join("instrument.sh");
        let log = root.join("trace.log");
        std::fs::write(&env_file, instrumentation()).map_err(|e| e.to_string())?;
        Ok(Self {
            _dir: dir,
            root,
            bin,
            home,
            ws,
            env_file,
            log,
            nonce,
        })
    }
}

/// The instrumentation every bash of a run reads first (`BASH_ENV`). Its own commands carry
/// the run's marker, so their trace records are dropped.
fn instrumentation() -> &'static str {
    r#"exec {__warden_oracle_fd}>>"$WARDEN_ORACLE_LOG"
command_not_found_handle() {
  printf '\034%s\035@%s\035%s\036\n' "$WARDEN_ORACLE_NONCE" "${BASH_SOURCE[1]}" "$(printf '%s\035' "$@")" >&"$__warden_oracle_fd"
}
BASH_XTRACEFD=$__warden_oracle_fd
PS4=$'\037'"$WARDEN_ORACLE_NONCE"'@${BASH_SOURCE[0]}@'$'\037'
set -x
"#
}

/// One command bash ran: its words, and the file bash read it from when it was not the
/// command itself (a sourced file, a script a shell ran: `BASH_SOURCE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    words: Vec<String>,
    source: Option<String>,
}

/// The commands in a run's log, without the instrumentation's own.
fn records(log: &[u8], nonce: &str) -> Vec<Record> {
    let text = String::from_utf8_lossy(log);
    let mut out = Vec::new();
    // Programs looked up, one record each, taken out of the text before the traces are read:
    // \034 nonce \035 arg \035 arg \035 … \036 \n.
    let start = format!("\u{1c}{nonce}\u{1d}");
    let mut traces = String::with_capacity(text.len());
    let mut rest: &str = &text;
    while let Some(i) = rest.find(&start) {
        traces.push_str(&rest[..i]);
        let after = &rest[i + start.len()..];
        let end = after.find("\u{1e}\n").unwrap_or(after.len());
        let mut words: Vec<String> = after[..end]
            .split('\u{1d}')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect();
        let source = match words.first() {
            Some(w) if w.starts_with('@') => Some(words.remove(0)[1..].to_owned()),
            _ => None,
        }
        .filter(|s| !s.is_empty());
        // A record holding another's marker ran into it (a word with a line end): dropped,
        // as the trace holds the same command.
        if !words.is_empty()
            && !words
                .iter()
                .any(|w| w.contains(nonce) || w.contains('\u{1f}'))
        {
            out.push(Record { words, source });
        }
        rest = after.get(end + 2..).unwrap_or("");
    }
    traces.push_str(rest);
    // Traced commands: a line starting with \037 nonce @source@ \037 (repeated \037s for
    // nesting).
    let marker = format!("{nonce}@");
    let mut current: Option<(String, Option<String>)> = None;
    let mut traced = Vec::new();
    for line in traces.split_inclusive('\n') {
        let head = line.trim_start_matches('\u{1f}');
        let opened = (head.len() < line.len())
            .then(|| head.strip_prefix(&marker))
            .flatten()
            .and_then(|rest| rest.split_once("@\u{1f}"));
        if let Some((source, command)) = opened {
            traced.extend(current.take());
            let source = (!source.is_empty()).then(|| source.to_owned());
            current = Some((command.to_owned(), source));
        } else if let Some((c, _)) = current.as_mut() {
            c.push_str(line);
        }
    }
    traced.extend(current);
    for (t, source) in traced {
        let t = t.strip_suffix('\n').unwrap_or(&t);
        // The instrumentation's own commands (their text holds the marker; a word with a
        // line end can run a record into the handler's, and programs are logged apart).
        if t.contains(nonce) || t.contains(['\u{1c}', '\u{1d}', '\u{1e}', '\u{1f}']) {
            continue;
        }
        let words = xtrace_words(t);
        if words
            .iter()
            .any(|w| w.contains(['\u{1c}', '\u{1d}', '\u{1e}']) || w.contains("\\035"))
        {
            continue; // the instrumentation's own commands (their formats hold the markers)
        }
        if let Some(mut r) = command_record(words) {
            r.source = source;
            out.push(r);
        }
    }
    out
}

/// The words of one `set -x` record, as bash quotes them: `'…'` (with `'\''`), `$'…'` with
/// escapes, and bare words.
fn xtrace_words(text: &str) -> Vec<String> {
    let b: Vec<char> = text.chars().collect();
    let mut words = Vec::new();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i] == ' ' {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let mut w = String::new();
        while i < b.len() && b[i] != ' ' {
            match b[i] {
                '\'' => {
                    i += 1;
                    while i < b.len() && b[i] != '\'' {
                        w.push(b[i]);
                        i += 1;
                    }
                    i += 1;
                }
                '$' if b.get(i + 1) == Some(&'\'') => {
                    i += 2;
                    while i < b.len() && b[i] != '\'' {
                        if b[i] == '\\' && i + 1 < b.len() {
                            i += 1;
                            let (c, used) = ansi_escape(&b[i..]);
                            w.push_str(&c);
                            i += used;
                        } else {
                            w.push(b[i]);
                            i += 1;
                        }
                    }
                    i += 1;
                }
                '\\' if i + 1 < b.len() => {
                    w.push(b[i + 1]);
                    i += 2;
                }
                c => {
                    w.push(c);
                    i += 1;
                }
            }
        }
        words.push(w);
    }
    words
}

/// One `$'…'` escape after its backslash: the text it stands for and how many characters it
/// used.
fn ansi_escape(s: &[char]) -> (String, usize) {
    let simple = |c: char| (c.to_string(), 1);
    match s.first().copied() {
        Some('n') => simple('\n'),
        Some('t') => simple('\t'),
        Some('r') => simple('\r'),
        Some('v') => simple('\u{b}'),
        Some('f') => simple('\u{c}'),
        Some('a') => simple('\u{7}'),
        Some('b') => simple('\u{8}'),
        Some('e' | 'E') => simple('\u{1b}'),
        Some('x') => {
            let digits: String = s[1..]
                .iter()
                .take(2)
                .take_while(|c| c.is_ascii_hexdigit())
                .collect();
            let v = u32::from_str_radix(&digits, 16).unwrap_or(0);
            (
                char::from_u32(v).unwrap_or('?').to_string(),
                1 + digits.len(),
            )
        }
        Some(c) if c.is_digit(8) => {
            let digits: String = s.iter().take(3).take_while(|c| c.is_digit(8)).collect();
            let v = u32::from_str_radix(&digits, 8).unwrap_or(0);
            (char::from_u32(v).unwrap_or('?').to_string(), digits.len())
        }
        Some(c) => simple(c),
        None => (String::new(), 0),
    }
}

/// Whether a word is an assignment (`NAME=…`, `NAME[i]=…`, `NAME+=…`).
fn is_assignment(word: &str) -> bool {
    let Some(eq) = word.find('=') else {
        return false;
    };
    let name = word[..eq].trim_end_matches('+');
    let name = name.split('[').next().unwrap_or("");
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The command a traced record ran, if it ran one: leading assignments dropped (an array value
/// `a=(1 2)` spans words), keyword records (`for`, `case`, `((`, `[[`, …) and pure assignments
/// are not commands.
fn command_record(words: Vec<String>) -> Option<Record> {
    let mut i = 0;
    while i < words.len() && is_assignment(&words[i]) {
        if words[i].contains("=(") && !words[i].ends_with(')') {
            while i < words.len() && !words[i].ends_with(')') {
                i += 1;
            }
        }
        i += 1;
    }
    let words: Vec<String> = words.into_iter().skip(i).collect();
    match words.first().map(String::as_str) {
        None | Some("for" | "select" | "case" | "((" | "[[" | "]]") => None,
        Some(w) if w.starts_with("((") => None,
        Some(_) => Some(Record {
            words,
            source: None,
        }),
    }
}

/// A program word's name as readings compare it: its last path component, lower case.
fn program(word: &str) -> String {
    word.rsplit('/').next().unwrap_or(word).to_ascii_lowercase()
}

/// Whether a reading's word may stand for any words bash made of it (an expansion, a glob, a
/// brace or tilde, a substitution).
fn dynamic(word: &str) -> bool {
    word.contains(['$', '`', '*', '?', '[', '{', '~']) || word.contains("<(") || word.contains(">(")
}

/// Whether `executed` is what `reading` would run: the same program, and the words matching,
/// a dynamic word of the reading standing for any number of executed words.
fn reading_matches(reading: &[String], executed: &[String]) -> bool {
    // A reading's leading `NAME=value` words are assignments, unless the word was quoted or
    // escaped as written (`\ls=` runs a program named `ls=`): try both.
    let all: Vec<&String> = reading.iter().collect();
    let skipped: Vec<&String> = reading.iter().skip_while(|w| is_assignment(w)).collect();
    reading_words_match(&all, executed) || reading_words_match(&skipped, executed)
}

fn reading_words_match(reading: &[&String], executed: &[String]) -> bool {
    let (Some(first), Some(ran)) = (reading.first(), executed.first()) else {
        return false;
    };
    if dynamic(first) {
        return true;
    }
    if program(first) != program(ran) {
        return false;
    }
    words_match(&reading[1..], &executed[1..])
}

fn words_match(pattern: &[&String], words: &[String]) -> bool {
    match pattern.split_first() {
        None => words.is_empty(),
        Some((p, rest)) if dynamic(p) => (0..=words.len()).any(|k| words_match(rest, &words[k..])),
        Some((p, rest)) => words.first().is_some_and(|w| w == *p) && words_match(rest, &words[1..]),
    }
}

/// Whether some command subject of the verdict has a reading that runs what bash ran.
fn command_covered(record: &Record, subjects: &[ShellSubject], run: &Run) -> bool {
    subjects.iter().any(|s| match s {
        ShellSubject::Command(c) => std::iter::once(&c.normalized)
            .chain(c.also.iter())
            .any(|r| reading_matches(r, &record.words)),
        _ => false,
    }) || from_a_file_a_subject_runs(record, subjects, run)
}

/// A command bash read from a file (a sourced file, a script a shell ran) is that file's: a
/// file's contents are opaque to Warden by design (docs/shell.md, known limits), so such a
/// command is covered by a subject that runs a file (`source`, `.`, a shell with a script
/// operand). Only a file that exists in the run counts (`BASH_SOURCE` says `environment` for
/// a function the command string defines, which stays checked).
fn from_a_file_a_subject_runs(record: &Record, subjects: &[ShellSubject], run: &Run) -> bool {
    let Some(file) = &record.source else {
        return false;
    };
    if !run.ws.join(file).is_file() || run.ws.join(file) == run.env_file {
        return false;
    }
    subjects.iter().any(|s| match s {
        ShellSubject::Command(c) => c.normalized.first().is_some_and(|p| {
            let p = program(p);
            p == "source" || p == "." || SHELLS.contains(&p.as_str())
        }),
        _ => false,
    })
}

/// Whether a file change is a write subject's target (relative targets against the working
/// directory, `~/` against the home, the final symlink followed), or was made by a real
/// program the verdict allowed (one run by its path).
fn file_covered(changed: &Path, subjects: &[ShellSubject], run: &Run, records: &[Record]) -> bool {
    let by_program = records
        .iter()
        .any(|r| r.words.first().is_some_and(|w| w.contains('/')));
    by_program
        || subjects.iter().any(|s| match s {
            ShellSubject::Write(w) => {
                let target = match w.path.strip_prefix("~/") {
                    Some(rest) => run.home.join(rest),
                    None => run.ws.join(&w.path),
                };
                let lexical = normalize(&target);
                lexical == changed
                    || std::fs::read_link(&lexical)
                        .map(|t| normalize(&lexical.parent().unwrap_or(&run.ws).join(t)))
                        .is_ok_and(|t| t == changed)
            }
            _ => false,
        })
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every file and folder under `root` but the run's own files: kind, content and link target.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path == root.join("trace.log") || path.starts_with(root.join("bin")) {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let state = if meta.file_type().is_symlink() {
                format!("link {:?}", std::fs::read_link(&path).ok())
            } else if meta.is_dir() {
                stack.push(path.clone());
                "dir".to_owned()
            } else {
                format!(
                    "file {:?}",
                    blake3::hash(&std::fs::read(&path).unwrap_or_default()).to_hex()
                )
            };
            out.insert(path, state);
        }
    }
    out
}

/// Paths created, changed or deleted between two snapshots.
fn changes(before: &BTreeMap<PathBuf, String>, after: &BTreeMap<PathBuf, String>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = after
        .iter()
        .filter(|(p, s)| before.get(*p) != Some(s))
        .map(|(p, _)| p.clone())
        .collect();
    out.extend(before.keys().filter(|p| !after.contains_key(*p)).cloned());
    out.sort();
    out.dedup();
    out
}
