//! `cargo xtask` end to end: two checkouts that share one target directory each check their own
//! tree.
//!
//! Cargo builds `xtask` once for both checkouts when they share `CARGO_TARGET_DIR` (worktrees, CI
//! caches) and runs that one binary in either, so the workspace must be found when it runs, never
//! from the folder it was built in.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace this test belongs to.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The target directory the tests were built in (shared with the copies, as CI caches share it).
fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    // …/target/debug/deps/xtask-<hash>
    std::env::current_exe()
        .unwrap()
        .ancestors()
        .nth(3)
        .unwrap()
        .to_path_buf()
}

/// Copies the workspace's sources (not its build output, git data or installed tools) to `to`.
fn copy_sources(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if matches!(name.as_ref(), "target" | ".git" | ".tools" | "node_modules") {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            copy_sources(&path, &to.join(&*name));
        } else {
            std::fs::copy(&path, to.join(&*name)).unwrap();
        }
    }
}

/// Runs `cargo xtask tidy` in `checkout` with the shared target directory.
fn tidy(checkout: &Path, target: &Path) -> (Option<i32>, String) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["xtask", "tidy"])
        .current_dir(checkout)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("CARGO_MANIFEST_DIR")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn two_checkouts_sharing_a_target_directory_each_check_their_own_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    copy_sources(&workspace(), &a);
    copy_sources(&workspace(), &b);
    // Only checkout b breaks a convention: a file without its `//!` header.
    std::fs::write(
        b.join("crates/contracts/src/planted.rs"),
        "fn planted() {}\n",
    )
    .unwrap();
    let target = target_dir();

    let (code_a, report_a) = tidy(&a, &target);
    let (code_b, report_b) = tidy(&b, &target);

    assert!(!report_a.contains("planted.rs"), "{report_a}");
    assert_eq!(code_a, Some(0), "checkout a is tidy:\n{report_a}");
    assert!(
        report_b.contains("crates/contracts/src/planted.rs:1: tidy: a Rust file starts with"),
        "{report_b}"
    );
    assert_eq!(code_b, Some(1), "{report_b}");
}

#[test]
fn outside_a_workspace_xtask_says_where_it_looked() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("tidy")
        .current_dir(tmp.path())
        .env_remove("CARGO_MANIFEST_DIR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no Cargo workspace at or above") && stderr.contains("run `cargo xtask`"),
        "{stderr}"
    );
}
