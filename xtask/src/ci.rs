//! `cargo xtask ci`: everything CI runs. Every step runs, whatever an earlier one did, so one
//! run shows every failure; a table of the steps with their result and time closes the run, and
//! the exit code is 1 when any step failed.
//!
//! 1. `cargo fmt --all --check`
//! 2. `cargo clippy --workspace --all-targets -- -D warnings`
//! 3. `test-servers`: what the MCP tests run against (the reference servers from the committed
//!    npm lock file, the official Python SDK into `.tools/mcp-venv`) and the coding-agent CLIs
//!    the harness tests probe ([`provider_clis`])
//! 4. `cargo test --workspace --exclude warden-policy-compare --no-fail-fast`, then
//!    `cargo test -p warden-policy-compare` in a build of its own (its Cedar dependency turns on
//!    serde_json's `preserve_order`, which must not reach the product crates' build); bounded
//!    proptest cases when `CI` is set
//! 5. `examples`: every crate example runs and exits 0 ([`examples`])
//! 6. `feature-sets`: each documented feature set that is not the default builds clean
//!    ([`FEATURE_SETS`]: evidence without SQLite and checkpoints; the executor without
//!    `governed`; the policy crate without receipts, its unit tests included), and each
//!    promised footprint holds ([`FOOTPRINTS`]: crates a set's `cargo tree -e normal` lacks);
//!    every command runs, whatever an earlier one did
//! 7. `cargo doc --no-deps --workspace` with `RUSTDOCFLAGS=-D warnings` (API docs build clean:
//!    no broken intra-doc link)
//! 8. `bypass-check` (layering and the invocation boundary)
//! 9. `tidy` (house conventions, paths and anchors)
//! 10. `schemas --check` (checked-in JSON Schemas are current)
//! 11. `cargo deny check licenses bans sources` (installs the pinned `cargo-deny` into the
//!     workspace's `.tools/` when it is missing, and fetches every platform's dependencies from
//!     the lock file first; `advisories` needs a network these machines do not have)
//! 12. `custom-runtime`: the example workspace examples/custom-runtime, checked as its user
//!     would (fmt, clippy, build, test), its scripted runtime exits 0, its own bypass-check
//!     passes, and catches a violation planted in a copy ([`crate::custom_runtime`])

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context as _;

/// The `cargo-deny` version CI installs when it is missing.
const CARGO_DENY_VERSION: &str = "0.20.2";

/// Where tools the checks need are installed: inside the workspace (ignored by git), never in
/// the user's `~/.cargo/bin`, so a run leaves nothing behind outside the checkout.
pub(crate) const TOOLS_DIR: &str = ".tools";

/// The tests of every crate but the comparison crate, built together.
const TEST_PRODUCT: &[&str] = &[
    "test",
    "--workspace",
    "--exclude",
    "warden-policy-compare",
    "--no-fail-fast",
];
/// The comparison crate's tests, in a build of its own (see the `test` step).
const TEST_COMPARE: &[&str] = &["test", "-p", "warden-policy-compare", "--no-fail-fast"];

/// `cargo clippy` on every target of the workspace, warnings denied (this workspace's, and
/// the custom-runtime example's).
pub(crate) const CLIPPY_WORKSPACE: &[&str] = &[
    "clippy",
    "--workspace",
    "--all-targets",
    "--",
    "-D",
    "warnings",
];

/// The `feature-sets` step's cargo commands (arguments separated by spaces), one per entry:
/// every documented feature set that is not the default, linted on its own (and, for
/// warden-policy, unit-tested).
const FEATURE_SETS: &[&str] = &[
    // warden-evidence without `sqlite` and `checkpoints` (no rusqlite, no ed25519).
    "clippy -p warden-evidence --no-default-features -- -D warnings",
    // warden-executor without `governed` (no rusqlite, no ed25519).
    "clippy -p warden-executor --no-default-features -- -D warnings",
    // warden-policy without `receipts` (no ed25519): every target that builds without it...
    "clippy -p warden-policy --no-default-features --all-targets -- -D warnings",
    // ...and its unit tests, which prove a policy declaring `[approvers]` is refused.
    "test -p warden-policy --no-default-features --lib",
];

/// A feature set's dependency footprint promise: crates its normal dependency tree
/// (`cargo tree -e normal`) must not contain (docs/guide/embedding.md has the table).
struct Footprint {
    /// The package and feature flags.
    args: &'static [&'static str],
    /// Crates that must be absent.
    absent: &'static [&'static str],
}

/// The promises the guide makes about the layers a composer can take alone.
const FOOTPRINTS: &[Footprint] = &[
    Footprint {
        args: &["-p", "warden-policy", "--no-default-features"],
        absent: &["tokio", "rusqlite", "ed25519-dalek"],
    },
    Footprint {
        args: &["-p", "warden-evidence", "--no-default-features"],
        absent: &["rusqlite", "ed25519-dalek"],
    },
    Footprint {
        args: &["-p", "warden-executor"],
        absent: &["rusqlite", "ed25519-dalek"],
    },
];

impl Footprint {
    /// Whether the set's tree holds none of the absent crates (each one found is printed).
    fn holds(&self, root: &Path) -> anyhow::Result<bool> {
        let output = command(cargo_program())
            .args(["tree", "-e", "normal", "--prefix", "none"])
            .args(self.args)
            .current_dir(root)
            .output()
            .context("running cargo tree")?;
        if !output.status.success() {
            eprintln!(
                "cargo tree {} failed: {}",
                self.args.join(" "),
                String::from_utf8_lossy(&output.stderr)
            );
            return Ok(false);
        }
        let tree = String::from_utf8_lossy(&output.stdout);
        let found: Vec<&str> = self
            .absent
            .iter()
            .copied()
            .filter(|name| tree.lines().any(|l| l.split(' ').next() == Some(*name)))
            .collect();
        for name in &found {
            eprintln!(
                "footprint: `cargo tree -e normal {}` contains {name}, which the guide promises it does not",
                self.args.join(" ")
            );
        }
        Ok(found.is_empty())
    }
}

/// Runs every crate example (`crates/*/examples/*.rs`): each exits non-zero when what it
/// shows does not hold, so the examples the guide quotes are tests too.
fn examples(root: &Path) -> anyhow::Result<bool> {
    let mut passed = true;
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    crates.sort();
    for dir in crates {
        let Ok(entries) = std::fs::read_dir(dir.join("examples")) else {
            continue;
        };
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))
            .with_context(|| format!("reading {}", dir.join("Cargo.toml").display()))?;
        let package = manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = \"")?.strip_suffix('"'))
            .with_context(|| format!("{}: no package name", dir.display()))?
            .to_owned();
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "rs"))
            .filter_map(|p| Some(p.file_stem()?.to_str()?.to_owned()))
            .collect();
        names.sort();
        for name in names {
            println!("==> example {package}/{name}");
            passed &= cargo(root, &["run", "-q", "-p", &package, "--example", &name])?;
        }
    }
    Ok(passed)
}

/// One step of the run.
struct Step<'a> {
    name: &'static str,
    run: Box<dyn Fn() -> anyhow::Result<bool> + 'a>,
}

/// How a step ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StepResult {
    Passed,
    Failed,
    /// The step could not run at all (a missing program, an unreadable file): the message.
    Error(String),
}

impl StepResult {
    fn label(&self) -> &'static str {
        match self {
            StepResult::Passed => "pass",
            StepResult::Failed => "FAIL",
            StepResult::Error(_) => "ERROR",
        }
    }
}

pub(crate) fn run(root: &Path) -> anyhow::Result<bool> {
    let steps = steps(root);
    let mut results = Vec::with_capacity(steps.len());
    for step in &steps {
        println!("==> ci: {}", step.name);
        let start = Instant::now();
        let result = match (step.run)() {
            Ok(true) => StepResult::Passed,
            Ok(false) => StepResult::Failed,
            Err(e) => {
                eprintln!("error: {e:#}");
                StepResult::Error(format!("{e:#}"))
            }
        };
        let elapsed = start.elapsed();
        if result != StepResult::Passed {
            println!("==> ci: {} {}", step.name, result.label());
        }
        results.push((step.name, result, elapsed));
    }
    print!("{}", summary(&results));
    Ok(results.iter().all(|(_, r, _)| *r == StepResult::Passed))
}

fn steps(root: &Path) -> Vec<Step<'_>> {
    vec![
        Step {
            name: "fmt",
            run: Box::new(move || cargo(root, &["fmt", "--all", "--check"])),
        },
        Step {
            name: "clippy",
            run: Box::new(move || cargo(root, CLIPPY_WORKSPACE)),
        },
        Step {
            name: "test-servers",
            run: Box::new(move || {
                let servers = test_servers(root)?;
                let providers = provider_clis(root)?;
                Ok(servers && providers)
            }),
        },
        Step {
            name: "test",
            run: Box::new(move || {
                // The comparison crate's Cedar turns on serde_json's `preserve_order`, which
                // would change the key order of every JSON the product crates write if the two
                // were built together: it is tested in a build of its own.
                let product = cargo(root, TEST_PRODUCT)?;
                let compare = cargo(root, TEST_COMPARE)?;
                Ok(product && compare)
            }),
        },
        Step {
            name: "examples",
            run: Box::new(move || examples(root)),
        },
        Step {
            name: "feature-sets",
            run: Box::new(move || {
                let mut passed = true;
                for line in FEATURE_SETS {
                    let args: Vec<&str> = line.split_whitespace().collect();
                    passed &= cargo(root, &args)?;
                }
                for footprint in FOOTPRINTS {
                    passed &= footprint.holds(root)?;
                }
                Ok(passed)
            }),
        },
        Step {
            name: "doc",
            run: Box::new(move || doc(root)),
        },
        Step {
            name: "bypass-check",
            run: Box::new(move || crate::bypass::run(root, &[])),
        },
        Step {
            name: "tidy",
            run: Box::new(move || crate::tidy::run(root)),
        },
        Step {
            name: "schemas",
            run: Box::new(move || crate::schemas::run(root, &["--check".to_owned()])),
        },
        Step {
            name: "deny",
            run: Box::new(move || deny(root)),
        },
        Step {
            name: "custom-runtime",
            run: Box::new(move || crate::custom_runtime::run(root)),
        },
    ]
}

/// The closing table: each step, its result and its time, then the overall line.
pub(crate) fn summary(results: &[(&str, StepResult, Duration)]) -> String {
    let mut out = String::from("\n==> ci: summary\n\n| step | result | time |\n|---|---|---|\n");
    for (name, result, elapsed) in results {
        out.push_str(&format!(
            "| {name} | {} | {:.1} s |\n",
            result.label(),
            elapsed.as_secs_f64()
        ));
    }
    let failed: Vec<&str> = results
        .iter()
        .filter(|(_, r, _)| *r != StepResult::Passed)
        .map(|(name, _, _)| *name)
        .collect();
    let total: Duration = results.iter().map(|(_, _, d)| *d).sum();
    if failed.is_empty() {
        out.push_str(&format!(
            "\n==> ci: all {} steps passed in {:.0} s\n",
            results.len(),
            total.as_secs_f64()
        ));
    } else {
        out.push_str(&format!(
            "\n==> ci: {} of {} steps failed ({}) in {:.0} s\n",
            failed.len(),
            results.len(),
            failed.join(", "),
            total.as_secs_f64()
        ));
    }
    out
}

// xtask owns these subprocesses: it is tooling, outside the runtime layers.
#[allow(clippy::disallowed_methods)]
pub(crate) fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    Command::new(program)
}

pub(crate) fn cargo_program() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

fn cargo(root: &Path, args: &[&str]) -> anyhow::Result<bool> {
    let status = command(cargo_program())
        .args(args)
        .current_dir(root)
        .status()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    Ok(status.success())
}

/// The API docs of every workspace crate, warnings denied (a broken link fails the run).
fn doc(root: &Path) -> anyhow::Result<bool> {
    let status = command(cargo_program())
        .args(["doc", "--no-deps", "--workspace"])
        .env("RUSTDOCFLAGS", "-D warnings")
        .current_dir(root)
        .status()
        .context("running cargo doc --no-deps --workspace")?;
    Ok(status.success())
}

/// What the MCP tests run against: the reference servers, installed with `npm ci` from the
/// committed lock file into the `node_modules` folder of tests/mcp, and the official Python
/// SDK, installed from the pinned `tests/mcp/requirements.txt` into a virtual environment in
/// `.tools/mcp-venv` (both ignored by git; the environment is rebuilt only when the
/// requirements change).
fn test_servers(root: &Path) -> anyhow::Result<bool> {
    let dir = root.join("tests/mcp");
    let npm = command("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&dir)
        .status()
        .context("running npm ci in tests/mcp (the tests need Node.js and npm)")?;
    if !npm.success() {
        return Ok(false);
    }
    let venv = root.join(TOOLS_DIR).join("mcp-venv");
    let requirements = std::fs::read_to_string(dir.join("requirements.txt"))
        .context("reading tests/mcp/requirements.txt")?;
    let stamp = venv.join("requirements.txt");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(requirements.as_str()) {
        return Ok(true);
    }
    let _ = std::fs::remove_dir_all(&venv);
    let made = command("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .context("making the Python virtual environment (the tests need Python 3 with venv)")?;
    if !made.success() {
        return Ok(false);
    }
    let installed = command(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
        .arg(dir.join("requirements.txt"))
        .status()
        .context("installing the MCP Python SDK into .tools/mcp-venv")?;
    if installed.success() {
        std::fs::write(&stamp, requirements).context("writing the venv's stamp")?;
    }
    Ok(installed.success())
}

/// What the harness tests probe: the real Codex CLI and Gemini CLI (`@openai/codex`,
/// `@google/gemini-cli`), installed with `npm ci` from the committed lock file into the
/// `node_modules` folder of tests/providers (ignored by git). Claude Code is not installed: its
/// package needs a newer Node.js than CI has (docs/harness.md).
fn provider_clis(root: &Path) -> anyhow::Result<bool> {
    let status = command("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(root.join("tests/providers"))
        .status()
        .context("running npm ci in tests/providers (the tests need Node.js and npm)")?;
    Ok(status.success())
}

/// The workspace-local `cargo-deny`, installed at the pinned version when it is missing.
fn cargo_deny(root: &Path) -> anyhow::Result<PathBuf> {
    let tools = root.join(TOOLS_DIR);
    let program = tools.join("bin").join("cargo-deny");
    let installed = command(&program)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(CARGO_DENY_VERSION))
        .unwrap_or(false);
    if installed {
        return Ok(program);
    }
    println!(
        "==> ci: installing cargo-deny {CARGO_DENY_VERSION} into {} (checks licences, bans and \
         sources against deny.toml; built once from crates.io, about 3 minutes on 2 cores, \
         then reused)",
        tools.display()
    );
    let tools_arg = tools.to_string_lossy().into_owned();
    let ok = cargo(
        root,
        &[
            "install",
            "cargo-deny",
            "--version",
            CARGO_DENY_VERSION,
            "--locked",
            "--root",
            &tools_arg,
        ],
    )?;
    if !ok {
        anyhow::bail!(
            "could not install cargo-deny {CARGO_DENY_VERSION} into {}",
            tools.display()
        );
    }
    Ok(program)
}

fn deny(root: &Path) -> anyhow::Result<bool> {
    let program = cargo_deny(root)?;
    // `cargo deny --offline` reads the metadata of every platform's dependencies (Windows ones
    // included), which a build never downloads: fetch them first (from the lock file).
    if !cargo(root, &["fetch", "--locked"])? {
        anyhow::bail!("cargo fetch --locked failed: cargo-deny needs every dependency's manifest");
    }
    let status = command(&program)
        .args(["--offline", "check", "licenses", "bans", "sources"])
        .current_dir(root)
        .status()
        .with_context(|| format!("running {}", program.display()))?;
    Ok(status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_every_step_its_result_and_the_failures() {
        let results = [
            ("fmt", StepResult::Passed, Duration::from_millis(400)),
            ("test", StepResult::Failed, Duration::from_secs(61)),
            (
                "deny",
                StepResult::Error("no cargo".into()),
                Duration::from_millis(5),
            ),
        ];
        let text = summary(&results);
        assert!(text.contains("| fmt | pass | 0.4 s |"), "{text}");
        assert!(text.contains("| test | FAIL | 61.0 s |"), "{text}");
        assert!(text.contains("| deny | ERROR | 0.0 s |"), "{text}");
        assert!(text.contains("2 of 3 steps failed (test, deny)"), "{text}");
        let passed = summary(&results[..1]);
        assert!(passed.contains("all 1 steps passed"), "{passed}");
    }
}
