//! The compiled-policy cache of `warden hook` (docs/policy.md, "The compiled policy cache"): a
//! hook is one process per tool call, and compiling a large policy's rules is most of its
//! time, so it keeps a policy image (`warden_policy::image`) under `.warden/cache/` in the
//! project root, one file per set of policy files, and builds the snapshot from it when it
//! is intact and current.
//!
//! The image is filed under a key covering the policy files' declarations (what they say,
//! their roles and paths), the path environment, Warden's version and this binary's identity
//! (its size and modification time: a rebuilt binary never reads an older one's image);
//! `PolicyBuilder::build_with_image` checks key, format and checksum and compiles the policy
//! when anything is off, and this module then writes a fresh image, atomically (a temporary
//! file in the same folder, synced, renamed over the old one). Nothing about the cache can
//! fail the hook: a missing, unreadable or read-only folder only costs the compile (logged at
//! debug level).
//!
//! An image is checked against corruption and staleness, not forgery, so it is used only
//! where forging it gains nothing: when every policy file is owned by the user running the
//! hook (who, like the agent running as that user, could rewrite the policy files
//! themselves), read from a regular file of that user that no one else may write; and the
//! cache file is protected from the governed agent like the policy files. A policy with a
//! file owned by someone else (a root-owned managed policy) is compiled on every call.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use warden_contracts::Digest;
use warden_policy::{ImageLoad, LoadedPolicy, PolicyBuilder, PolicySnapshot};

use crate::error::CliError;
use crate::load::{self, PolicyPath};

/// The folder, under the project root, that holds the images.
pub(crate) const CACHE_DIR: &str = ".warden/cache";

/// Reads, merges and compiles the policy files as [`load::snapshot_protecting`] does, its
/// rules from the cache when an intact, current image is there (and the cache refreshed when
/// it is not). `use_cache: false` compiles and touches no cache.
pub(crate) fn snapshot(
    files: &[PolicyPath],
    project_root: Option<&Path>,
    extra: &[(PathBuf, &str)],
    use_cache: bool,
) -> Result<PolicySnapshot, CliError> {
    let (env, loaded) = load::read_with_env(files, project_root)?;
    let cache = use_cache
        .then(|| cache_file(files, &env.project_root))
        .flatten();
    let mut builder = PolicyBuilder::new().path_env(env);
    for file in &loaded {
        builder = builder.file(file)?;
    }
    for (path, what) in extra {
        builder = builder.protect(path, *what);
    }
    let Some(cache) = cache else {
        return Ok(builder.build()?);
    };
    // Protected like the policy files, whether or not this call reads or writes it.
    builder = builder.protect(&cache, "the compiled policy cache");
    let salt = match (owned_by_us(&loaded), binary_identity()) {
        (Ok(()), Some(salt)) => salt,
        (Err(why), _) => {
            tracing::debug!("policy cache not used: {why}");
            return Ok(builder.build()?);
        }
        (_, None) => {
            tracing::debug!("policy cache not used: this binary's identity is unknown");
            return Ok(builder.build()?);
        }
    };
    let key = builder.image_key(&salt);
    let image = read_image(&cache);
    let (snapshot, load) = builder.build_with_image(&key, image.as_deref())?;
    match load {
        ImageLoad::Loaded => {
            tracing::debug!("policy rules read from {}", cache.display());
            return Ok(snapshot);
        }
        ImageLoad::Absent => tracing::debug!("no policy image at {}", cache.display()),
        ImageLoad::Refused(why) => {
            tracing::debug!("policy image {} not used: {why}", cache.display());
        }
    }
    if let Err(e) = write_image(&cache, &snapshot.to_image(&key)) {
        tracing::debug!("policy image {} not written: {e}", cache.display());
    }
    Ok(snapshot)
}

/// The cache file of these policy files: one per set of files (their roles and absolute
/// paths, in order) and project root, so hooks of different policies never overwrite each
/// other's image; `None` when a path cannot be made absolute or the project root is not an
/// existing folder (a cache never creates one).
fn cache_file(files: &[PolicyPath], project_root: &Path) -> Option<PathBuf> {
    if !project_root.is_dir() {
        tracing::debug!(
            "policy cache not used: the project root {} is not a folder",
            project_root.display()
        );
        return None;
    }
    let mut id = Vec::new();
    for f in files {
        let path = load::absolute(&f.path).ok()?;
        id.extend_from_slice(f.flag().as_bytes());
        id.push(0);
        id.extend_from_slice(path.as_os_str().as_encoded_bytes());
        id.push(0);
    }
    id.extend_from_slice(project_root.as_os_str().as_encoded_bytes());
    let digest = Digest::of_bytes(&id).to_string();
    let hex = digest.strip_prefix("blake3:").unwrap_or(&digest);
    Some(
        project_root
            .join(CACHE_DIR)
            .join(format!("policy-{}.image", &hex[..32])),
    )
}

/// The user this process runs as: the owner of its `/proc/self`.
fn our_uid() -> Option<u32> {
    fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// Whether every policy file is owned by the user running the hook.
fn owned_by_us(loaded: &[LoadedPolicy]) -> Result<(), String> {
    let uid = our_uid().ok_or("the user running this process is unknown")?;
    for file in loaded {
        let Some(path) = &file.path else {
            return Err(format!("{} was not read from a file", file.label));
        };
        let meta = fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if meta.uid() != uid {
            return Err(format!(
                "{} belongs to another user (uid {}), who the cache would speak for",
                path.display(),
                meta.uid()
            ));
        }
    }
    Ok(())
}

/// This binary's identity for the key: Warden's version, and the executable's size and
/// modification time.
fn binary_identity() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let meta = fs::metadata(exe).ok()?;
    Some(format!(
        "warden {} {} {}.{}",
        env!("CARGO_PKG_VERSION"),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec()
    ))
}

/// The image's bytes: only a regular file (not a link) of this user that no one else may
/// write.
fn read_image(path: &Path) -> Option<Vec<u8>> {
    let meta = fs::symlink_metadata(path).ok()?;
    let uid = our_uid()?;
    if !meta.file_type().is_file() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        tracing::debug!(
            "policy image {} not read: not a regular file of this user, or writable by others",
            path.display()
        );
        return None;
    }
    fs::read(path).ok()
}

/// Writes the image atomically: a temporary file beside it (mode 0600), synced, renamed over
/// it, the folder synced.
fn write_image(path: &Path, image: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("the cache file has no folder"))?;
    fs::create_dir_all(dir)?;
    // The cache is never part of the project's history.
    let ignore = dir.join(".gitignore");
    if !ignore.exists() {
        fs::write(&ignore, "*\n")?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(image)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}
