//! `notes-runtime`: a runtime composed from Warden's parts around the notes tools, driven by a
//! scripted agent turn. It is a test as much as a demo: it exits 0 only when every call ends as
//! the script expects and the evidence verifies and certifies.
//!
//! 1. Seeds a notes folder (and a file outside it) in a fresh working folder.
//! 2. Compiles the policy it ships (`policy.toml`: reads and the list allowed, private notes
//!    denied, deletes asked about, secrets redacted, the owner's key declared as approver).
//! 3. Composes [`warden_executor::Runtime`]: the policy, the three tools, the owner as reviewer,
//!    and governance on a SQLite evidence store ([`warden_evidence::SqliteStore`]).
//! 4. Runs the turn ([`script`]), printing each call's outcome and checking it.
//! 5. Closes the task boundary, then verifies the chain against the head the close returned and
//!    certifies it, as `warden evidence verify` and `warden evidence certify` do ([`evidence`]).
//!
//! Usage: `notes-runtime [--dir DIR]`. Without `--dir` it works in a fresh folder under the
//! system's temporary folder, removed when the run passes and kept (and printed) when it does
//! not; with `--dir` (a folder that does not exist yet, or is empty) everything is kept, for
//! `warden evidence verify --store DIR/evidence.db`.
//!
//! Exit codes: 0 the script held, 1 something deviated from it, 2 the runtime could not start.
//!
//! **Invariant:** every tool call goes through `Runtime::run`; nothing here holds an invocation
//! token or calls a tool's `invoke` (the workspace's `cargo xtask bypass-check` proves it).
//!
//! **Must never:** pass when an outcome, the notes folder or the evidence differs from the
//! script, or touch files outside its working folder.

#![forbid(unsafe_code)]

mod evidence;
mod owner;
mod script;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use warden_evidence::{GovernedStore, SqliteStore};
use warden_executor::{Governed, ReviewLoop, Runtime};
use warden_policy::PolicySnapshot;

use crate::owner::{APPROVER, Owner};

/// The policy this runtime ships, compiled into the binary.
const POLICY: &str = include_str!("../policy.toml");

/// The evidence chain (and task boundary) of the turn.
const CHAIN: &str = "notes-turn";

/// Any error that stops the runtime before or after the turn.
type Error = Box<dyn std::error::Error>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let dir = match parse_args(std::env::args().skip(1)) {
        Ok(dir) => dir,
        Err(message) => {
            eprintln!("error: {message}\nusage: notes-runtime [--dir DIR]");
            return ExitCode::from(2);
        }
    };
    let work = match Workdir::create(dir) {
        Ok(work) => work,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let result = run(&work.path).await;
    let code = match &result {
        Ok(true) => {
            println!("\nnotes-runtime: the turn went as scripted");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("\nnotes-runtime: FAILED, the turn deviated from the script");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    };
    work.finish(matches!(result, Ok(true)));
    code
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<PathBuf>, String> {
    let mut dir = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--dir" => {
                let value = args.next().ok_or("--dir needs a folder")?;
                dir = Some(PathBuf::from(value));
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(dir)
}

/// Seeds the folder, composes the runtime, runs the turn and checks the evidence. `Ok(false)`
/// when anything deviated from the script.
async fn run(work: &Path) -> Result<bool, Error> {
    let notes = work.join("notes");
    script::seed(work, &notes)?;

    let policy = Arc::new(PolicySnapshot::from_toml(POLICY, &notes)?);
    let owner = Arc::new(Owner::new(["groceries.md"]));
    let declared = policy
        .approvers()
        .keys(APPROVER)
        .unwrap_or_default()
        .iter()
        .any(|k| k.to_hex() == owner.public_key());
    if !declared {
        return Err(format!(
            "policy.toml does not declare the owner's key {} under [approvers.{APPROVER}]",
            owner.public_key()
        )
        .into());
    }

    let store_path = work.join("evidence.db");
    let store: Arc<dyn GovernedStore> = Arc::new(SqliteStore::open(&store_path)?);
    let runtime = Runtime::builder(policy)
        .tools(notes_tools::registry(&notes)?)
        .reviewer(ReviewLoop::new(owner.clone()))
        .governed(Governed::new(store.clone(), CHAIN))
        .build()
        .await?;
    println!("notes-runtime: working in {}", work.display());
    println!(
        "policy {} ({} approver key {}), evidence {} chain {CHAIN}\n",
        runtime.policy().digest(),
        APPROVER,
        owner.public_key(),
        store_path.display()
    );

    let turn = script::run(&runtime, &owner, work, &notes).await;

    // The boundary closes `completed`; the receipt of that last record is the head the chain
    // is verified and certified against (a head kept apart from the store).
    let closed = runtime.close().await?;
    drop(runtime);
    drop(store); // the last handle: waits for the appends and closes the file cleanly
    let head = closed.ok_or("a governed runtime returns the head it closed")?;
    let evidence_ok = evidence::verify_and_certify(&store_path, &head, &turn)?;
    Ok(turn.passed() && evidence_ok)
}

/// The folder a run works in.
struct Workdir {
    path: PathBuf,
    /// Made by this run under the temporary folder: removed when the run passes.
    temporary: bool,
}

impl Workdir {
    fn create(dir: Option<PathBuf>) -> Result<Self, Error> {
        let (path, temporary) = match dir {
            Some(path) => (path, false),
            None => {
                let millis = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis());
                let name = format!("notes-runtime-{}-{millis}", std::process::id());
                (std::env::temp_dir().join(name), true)
            }
        };
        if path.exists() && std::fs::read_dir(&path)?.next().is_some() {
            return Err(format!("{} is not empty", path.display()).into());
        }
        std::fs::create_dir_all(&path)?;
        Ok(Self { path, temporary })
    }

    fn finish(self, passed: bool) {
        if self.temporary && passed {
            if let Err(e) = std::fs::remove_dir_all(&self.path) {
                eprintln!("warning: could not remove {}: {e}", self.path.display());
            }
        } else {
            println!(
                "notes-runtime: kept {} (warden evidence verify --store {})",
                self.path.display(),
                self.path.join("evidence.db").display()
            );
        }
    }
}
