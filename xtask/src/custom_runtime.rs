//! `cargo xtask custom-runtime`, also the `custom-runtime` step of `cargo xtask ci`: the
//! downstream example in examples/custom-runtime, a Cargo workspace of its own built on
//! Warden's crates, checked the way its user would check it.
//!
//! In the example's folder, with its own lock file and a target directory of its own inside
//! ours (`target/custom-runtime`, so its feature set never invalidates the main build): `cargo
//! fmt --check`, `cargo clippy -D warnings`, `cargo build`, `cargo test`; then the scripted
//! runtime, which must exit 0 (every call ended as scripted, the evidence verified and
//! certified); then the example's own `cargo xtask bypass-check`, which must pass; then the
//! same check on a copy of the example with a planted violation, which must fail and name it.
//! Every command runs, whatever an earlier one did.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::ci::{cargo_program, command};

/// The example workspace, relative to the repository root.
const EXAMPLE: &str = "examples/custom-runtime";

/// The planted file, relative to the example (or its copy).
const PLANTED_PATH: &str = "tools/src/planted.rs";

/// What is planted in `notes-tools`: a tool invoked around the executor, and the invocation
/// token minted outside it. (It would not compile, since the token's constructor is private;
/// the scan sees it anyway.)
const PLANTED: &str = r#"//! Planted by Warden's CI: two ways around the executor the bypass-check must catch.

use warden_executor::{InvocationToken, Tool};

pub async fn run_directly(tool: &dyn Tool, token: InvocationToken) {
    let _ = tool.invoke(token, serde_json::json!({})).await;
}

pub fn mint() -> InvocationToken {
    InvocationToken::mint()
}
"#;

/// The rules the planted file must be reported under.
const PLANTED_RULES: [&str; 2] = ["invoke-call", "token-mint"];

/// Runs every check of the example; `Ok(false)` when one failed.
pub(crate) fn run(root: &Path) -> anyhow::Result<bool> {
    let example = root.join(EXAMPLE);
    let target = target_dir(root);
    let checks: [(&str, &[&str]); 6] = [
        // Not `--all`: that would also check the path dependencies, Warden's own crates.
        ("fmt", &["fmt", "--check"]),
        ("clippy", crate::ci::CLIPPY_WORKSPACE),
        ("build", &["build", "--workspace"]),
        ("test", &["test", "--workspace"]),
        ("runtime", &["run", "--quiet", "-p", "notes-runtime"]),
        (
            "bypass-check",
            &["run", "--quiet", "-p", "xtask", "--", "bypass-check"],
        ),
    ];
    let mut passed = true;
    for (name, args) in checks {
        println!("==> custom-runtime: {name}: cargo {}", args.join(" "));
        let status = command(cargo_program())
            .args(args)
            .current_dir(&example)
            .env("CARGO_TARGET_DIR", &target)
            .status()
            .with_context(|| format!("running cargo {} in {EXAMPLE}", args.join(" ")))?;
        if !status.success() {
            println!("==> custom-runtime: {name} FAILED ({status})");
            passed = false;
        }
    }
    println!("==> custom-runtime: planted violation");
    let caught = planted_violation_is_caught(root, &example, &target)?;
    if !caught {
        println!("==> custom-runtime: planted violation NOT caught");
    }
    Ok(passed && caught)
}

/// The example's target directory: `custom-runtime` inside ours (`CARGO_TARGET_DIR` when set,
/// else `target`).
fn target_dir(root: &Path) -> PathBuf {
    let main = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || root.join("target"),
        |dir| {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                root.join(dir)
            }
        },
    );
    main.join("custom-runtime")
}

/// Copies the example into `target/planted`, plants [`PLANTED`] in `notes-tools`, and runs the
/// example's xtask on the copy (`bypass-check --root`): it must exit 1 and report the planted
/// file under each of [`PLANTED_RULES`].
fn planted_violation_is_caught(root: &Path, example: &Path, target: &Path) -> anyhow::Result<bool> {
    let copy = target.join("planted");
    if copy.exists() {
        std::fs::remove_dir_all(&copy)
            .with_context(|| format!("removing the previous copy {}", copy.display()))?;
    }
    copy_tree(example, &copy)?;
    // The copy lives elsewhere: point its path dependencies at Warden's crates again.
    let manifest = copy.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("reading {}", manifest.display()))?;
    let crates = root.join("crates").to_string_lossy().replace('\\', "/");
    let relocated = text.replace("\"../../crates/", &format!("\"{crates}/"));
    anyhow::ensure!(
        relocated != text,
        "{EXAMPLE}/Cargo.toml has no `../../crates/` path dependency to relocate"
    );
    std::fs::write(&manifest, relocated)
        .with_context(|| format!("writing {}", manifest.display()))?;
    std::fs::write(copy.join(PLANTED_PATH), PLANTED)
        .with_context(|| format!("planting {PLANTED_PATH}"))?;

    let output = command(cargo_program())
        .args([
            "run",
            "--quiet",
            "-p",
            "xtask",
            "--",
            "bypass-check",
            "--root",
        ])
        .arg(&copy)
        .current_dir(example)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .context("running the example's bypass-check on the planted copy")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    let mut caught = output.status.code() == Some(1);
    if !caught {
        println!(
            "expected exit code 1 (violations), got {:?}",
            output.status.code()
        );
    }
    for rule in PLANTED_RULES {
        let named = stdout.lines().any(|l| {
            l.starts_with(&format!("{PLANTED_PATH}:")) && l.contains(&format!(": {rule}:"))
        });
        if !named {
            println!("expected a `{rule}` violation at {PLANTED_PATH}");
            caught = false;
        }
    }
    if caught {
        std::fs::remove_dir_all(&copy).ok();
    }
    Ok(caught)
}

/// Copies the folder `from` to `to`, leaving out build output (`target`).
fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let path = entry.path();
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            if entry.file_name() != "target" {
                copy_tree(&path, &dest)?;
            }
        } else {
            std::fs::copy(&path, &dest)
                .with_context(|| format!("copying {} to {}", path.display(), dest.display()))?;
        }
    }
    Ok(())
}
