//! The crash-injection harness shared by the crash tests (feature `test-util`, which turns on
//! `fault-injection`; enabled by dev-dependencies only, `cargo xtask bypass-check` refuses it in a
//! normal one).
//!
//! A case re-invokes the current test binary as a child process that runs one named test with a
//! fault point armed ([`crate::fault`]): with [`Action::Hang`] the child is SIGKILLed once it has
//! reached the point, with [`Action::Error`] the point fails and the child runs to its end. A
//! second child then restarts with nothing armed, and the [`Case`] says what the two runs did.
//! What the child does, and what is asserted about the evidence afterwards, belong to each
//! crate's tests.
//!
//! Parent and child share one temporary case directory:
//!
//! - [`DIR_VAR`] names it in the child; without it (a normal test run) [`child`] does nothing;
//! - the child's callable appends one line to `effects.txt` per run ([`record_effect`]);
//! - the child's result line is appended to `child.log` ([`child`]);
//! - a `hang` point appends its name to `marker` before it blocks;
//! - the children's stdout and stderr go to `output.txt`, quoted when a case fails.
//!
//! ```no_run
//! use warden_evidence::test_util::{Action, CrashHarness, child, record_effect};
//!
//! // The test this harness re-invokes, by its full name in the test binary.
//! const HARNESS: CrashHarness = CrashHarness::new("crash::crash_child");
//!
//! // #[test]
//! fn crash_child() {
//!     child(|dir| {
//!         // One governed call whose callable runs `record_effect(dir)`, then:
//!         record_effect(dir);
//!         "completed".to_owned()
//!     });
//! }
//!
//! // #[test]
//! fn a_child_killed_at_the_first_commit_restarts() {
//!     let case = HARNESS.run("store.before_commit", 1, Action::Hang);
//!     assert!(case.effects() <= 1, "{}: {}", case.spec, case.log);
//! }
//! ```

use std::fmt;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::fault;

/// The variable that names the case directory in the child.
pub const DIR_VAR: &str = "WARDEN_CRASH_DIR";

/// How long a child may take to reach its fault point, or to exit.
pub const TIMEOUT: Duration = Duration::from_secs(120);

const EFFECTS: &str = "effects.txt";
const LOG: &str = "child.log";
const MARKER: &str = "marker";
const OUTPUT: &str = "output.txt";

/// What an armed fault point does when it is hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The point blocks; the harness SIGKILLs the child there.
    Hang,
    /// The operation at the point fails, as an I/O error would; the child runs to its end.
    Error,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Hang => "hang",
            Action::Error => "error",
        })
    }
}

/// Runs crash cases against one child test of the current test binary.
#[derive(Debug, Clone, Copy)]
pub struct CrashHarness {
    child_test: &'static str,
}

/// What a case's two children did: the crashed (or failed) run, then the restart.
#[derive(Debug)]
pub struct Case {
    dir: tempfile::TempDir,
    /// The armed fault, as set in [`fault::VAR`]: `<point>@<n>:<action>`.
    pub spec: String,
    /// The callable's runs before the restart (at most one).
    pub before: usize,
    /// The children's result lines: the first run's (missing if it was killed), then the
    /// restart's.
    pub log: String,
}

impl Case {
    /// The case directory (the children's evidence and any files they left).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The callable's runs so far, over both children.
    pub fn effects(&self) -> usize {
        effects(self.path())
    }
}

impl CrashHarness {
    /// A harness whose children run `child_test`, the full name of a test in the current binary
    /// (`module::test`) whose body is a call to [`child`].
    pub const fn new(child_test: &'static str) -> CrashHarness {
        CrashHarness { child_test }
    }

    /// Runs one case in a new directory: a child with `point@nth` armed (one of
    /// [`fault::POINTS`]), SIGKILLed at the point
    /// ([`Action::Hang`], once the marker names it) or run to a successful exit with the point
    /// failing ([`Action::Error`]); then a restarted child with nothing armed, which must exit
    /// successfully. Panics (after killing any child still running) if a child never reaches
    /// the point, exits early, fails, outlives [`TIMEOUT`], or if the callable ran more than
    /// once over both runs.
    pub fn run(&self, point: &str, nth: u32, action: Action) -> Case {
        let dir = tempfile::tempdir()
            .unwrap_or_else(|e| panic!("crash case {point}@{nth}: no temporary directory: {e}"));
        let spec = format!("{point}@{nth}:{action}");
        assert!(
            fault::POINTS.contains(&point),
            "{spec}: no such fault point (fault::POINTS: {:?})",
            fault::POINTS
        );
        let mut child = Running::spawn(self.child_test, dir.path(), Some(&spec), &spec);
        match action {
            Action::Hang => {
                child.await_marker(point);
                let status = child.kill();
                assert_killed(&status, &child.spec, dir.path());
            }
            Action::Error => {
                let status = child.wait();
                assert!(
                    status.success(),
                    "{spec}: the child failed ({status}){}",
                    output(dir.path())
                );
            }
        }
        let before = effects(dir.path());
        assert!(
            before <= 1,
            "{spec}: the callable ran {before} times before the restart"
        );
        let restart = format!("{spec} (restart)");
        let status = Running::spawn(self.child_test, dir.path(), None, &restart).wait();
        assert!(
            status.success(),
            "{spec}: the restarted child failed ({status}){}",
            output(dir.path())
        );
        let log = std::fs::read_to_string(dir.path().join(LOG)).unwrap_or_default();
        let after = effects(dir.path());
        assert!(after <= 1, "{spec}: the callable ran twice: {log}");
        assert!(after >= before, "{spec}: effects.txt shrank");
        Case {
            dir,
            spec,
            before,
            log,
        }
    }
}

/// The child's side: in a child (with [`DIR_VAR`] set) runs `work` in the case directory and
/// appends the line it returns to the log ([`Case::log`]); in a normal test run does nothing.
pub fn child(work: impl FnOnce(&Path) -> String) {
    let Some(dir) = std::env::var_os(DIR_VAR) else {
        return;
    };
    let dir = Path::new(&dir);
    let line = work(dir);
    append_line(&dir.join(LOG), &line);
}

/// Records one run of the child's callable: a line appended to `effects.txt`, synced before it
/// returns, so a SIGKILL right after cannot lose it.
pub fn record_effect(dir: &Path) {
    append_line(&dir.join(EFFECTS), "ran");
}

/// The callable's runs recorded in `dir` ([`record_effect`]).
pub fn effects(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join(EFFECTS))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

fn append_line(path: &Path, line: &str) {
    let written = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| {
            writeln!(f, "{line}")?;
            f.sync_all()
        });
    if let Err(e) = written {
        panic!("cannot append to {}: {e}", path.display());
    }
}

/// The children's output, for a failure message.
fn output(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join(OUTPUT)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(40)..].join("\n");
    format!("\n--- child output (last 40 lines) ---\n{tail}")
}

#[cfg(unix)]
fn assert_killed(status: &ExitStatus, spec: &str, dir: &Path) {
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(
        status.signal(),
        Some(9),
        "{spec}: killed by SIGKILL{}",
        output(dir)
    );
}

#[cfg(not(unix))]
fn assert_killed(status: &ExitStatus, spec: &str, dir: &Path) {
    assert!(!status.success(), "{spec}: killed{}", output(dir));
}

/// A running child, killed and reaped if the harness panics while it runs.
struct Running {
    child: Option<Child>,
    dir: std::path::PathBuf,
    spec: String,
    deadline: Instant,
}

impl Running {
    // The harness re-invokes its own test binary as the child to crash: a test process, not an
    // effect (spawning is otherwise left to warden-sandbox).
    #[allow(clippy::disallowed_methods)]
    fn spawn(child_test: &str, dir: &Path, fault: Option<&str>, label: &str) -> Running {
        let spec = label.to_owned();
        let fail = |what: &str, e: std::io::Error| -> ! { panic!("{spec}: {what}: {e}") };
        let exe = std::env::current_exe().unwrap_or_else(|e| fail("no test binary", e));
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(OUTPUT))
            .unwrap_or_else(|e| fail("cannot open the output file", e));
        let err = out
            .try_clone()
            .unwrap_or_else(|e| fail("cannot open the output file", e));
        let mut cmd = Command::new(exe);
        cmd.args(["--exact", child_test, "--nocapture", "--test-threads=1"])
            .env(DIR_VAR, dir)
            .env(fault::MARKER_VAR, dir.join(MARKER))
            .env_remove(fault::VAR)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        if let Some(f) = fault {
            cmd.env(fault::VAR, f);
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| fail("cannot spawn the child", e));
        Running {
            child: Some(child),
            dir: dir.to_path_buf(),
            spec,
            deadline: Instant::now() + TIMEOUT,
        }
    }

    fn child(&mut self) -> &mut Child {
        match self.child.as_mut() {
            Some(c) => c,
            None => panic!("{}: the child was already reaped", self.spec),
        }
    }

    /// Polls until the marker names `point`; panics if the child exits first or never gets
    /// there.
    fn await_marker(&mut self, point: &str) {
        let marker = self.dir.join(MARKER);
        loop {
            let reached = std::fs::read_to_string(&marker).unwrap_or_default();
            if reached.lines().any(|l| l == point) {
                return;
            }
            if let Some(status) = self.try_wait() {
                panic!(
                    "{}: the child exited ({status}) without reaching the point{}",
                    self.spec,
                    output(&self.dir)
                );
            }
            assert!(
                Instant::now() < self.deadline,
                "{}: never reached within {TIMEOUT:?}{}",
                self.spec,
                output(&self.dir)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn try_wait(&mut self) -> Option<ExitStatus> {
        let spec = self.spec.clone();
        let status = self
            .child()
            .try_wait()
            .unwrap_or_else(|e| panic!("{spec}: cannot wait for the child: {e}"));
        if status.is_some() {
            self.child = None;
        }
        status
    }

    /// Waits for the child to exit; panics (the drop kills it) past the deadline.
    fn wait(mut self) -> ExitStatus {
        loop {
            if let Some(status) = self.try_wait() {
                return status;
            }
            assert!(
                Instant::now() < self.deadline,
                "{}: the child did not exit within {TIMEOUT:?}{}",
                self.spec,
                output(&self.dir)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGKILLs the child and reaps it.
    fn kill(&mut self) -> ExitStatus {
        let spec = self.spec.clone();
        let mut child = match self.child.take() {
            Some(c) => c,
            None => panic!("{spec}: the child was already reaped"),
        };
        child
            .kill()
            .unwrap_or_else(|e| panic!("{spec}: cannot kill the child: {e}"));
        child
            .wait()
            .unwrap_or_else(|e| panic!("{spec}: cannot reap the child: {e}"))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
