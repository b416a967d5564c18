//! The compiled-policy cache of `warden hook` (docs/policy.md, "The compiled policy cache"): a
//! hook is one process per tool call, and compiling a large policy's rules is most of its
//! time (and parsing its files much of the rest), so it keeps the files as parsed and a policy
//! image of their compiled rules (`warden_policy::image`) under `.warden/cache/` in the
//! project root, one file per set of policy files, and builds the snapshot from them when
//! they are intact and current.
//!
//! The parsed files are filed under a digest of the files' text, roles, paths and names, the
//! path environment, the cache format and this binary's identity (Warden's version, the
//! executable's size and modification time: a rebuilt binary never reads an older one's
//! cache), with a checksum; the image under `PolicyBuilder::image_key` of the declarations,
//! with the same identity as salt, and `PolicyBuilder::build_with_image` checks its key,
//! format and checksum. When anything is off the files are parsed and the policy compiled,
//! and this module writes a fresh cache file, atomically (a temporary file in the same
//! folder, synced, renamed over the old one). Nothing about the cache can
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
use warden_policy::{
    Format, ImageLoad, LoadedPolicy, PathEnv, PolicyBuilder, PolicyFile, PolicySnapshot, Role,
};

use crate::error::CliError;
use crate::load::{self, PolicyPath};

/// The folder, under the project root, that holds the images.
pub(crate) const CACHE_DIR: &str = ".warden/cache";

/// Reads, merges and compiles the policy files as [`load::snapshot_protecting`] does, its
/// rules from the cache when an intact, current image is there (and the cache refreshed when
/// it is not). `use_cache: false` compiles and touches no cache.
///
/// The cache file holds the policy files as parsed (JSON, filed under a digest of their text,
/// roles, paths and the environment, with a checksum) before the image of their compiled rules:
/// a warm call reads the files' text, which it must hash anyway, but parses none of it.
pub(crate) fn snapshot(
    files: &[PolicyPath],
    project_root: Option<&Path>,
    extra: &[(PathBuf, &str)],
    use_cache: bool,
) -> Result<PolicySnapshot, CliError> {
    let env = load::env_for(files, project_root)?;
    let cache = use_cache
        .then(|| cache_file(files, &env.project_root))
        .flatten();
    let eligible = cache
        .as_ref()
        .and_then(|cache| match (owned_by_us(files), binary_identity()) {
            (Ok(()), Some(salt)) => Some((cache.clone(), salt)),
            (Err(why), _) => {
                tracing::debug!("policy cache not used: {why}");
                None
            }
            (_, None) => {
                tracing::debug!("policy cache not used: this binary's identity is unknown");
                None
            }
        });
    // The files' text, read once: hashed for the cache's key, parsed only without a cache.
    let texts = eligible.as_ref().and_then(|_| read_texts(files));
    let files_key = match (&eligible, &texts) {
        (Some((_, salt)), Some(texts)) => Some(files_key(salt, &env, texts)),
        _ => None,
    };
    let bytes = match (&eligible, &files_key) {
        (Some((cache, _)), Some(_)) => read_cache(cache),
        _ => None,
    };
    let stored = match (&bytes, &files_key) {
        (Some(bytes), Some(key)) => split_cache(bytes, key),
        _ => None,
    };
    if bytes.is_some() && stored.is_none() {
        tracing::debug!("policy cache not used: stale or damaged");
    }
    let cached_files = match (&stored, &texts) {
        (Some(stored), Some(texts)) => parsed_files(stored.files_json, texts),
        _ => None,
    };
    let from_cache = cached_files.is_some();
    let loaded = match (cached_files, texts) {
        (Some(loaded), _) => loaded,
        (None, Some(texts)) => texts
            .into_iter()
            .map(|t| {
                LoadedPolicy::from_text(t.text, t.format, &t.label, &t.stem, Some(t.path))
                    .map(|p| p.with_role(t.role))
            })
            .collect::<Result<Vec<_>, _>>()?,
        (None, None) => load::read_with_env(files, project_root)?.1,
    };
    let mut builder = PolicyBuilder::new().path_env(env);
    for file in &loaded {
        builder = builder.file(file)?;
    }
    for (path, what) in extra {
        builder = builder.protect(path, *what);
    }
    if let Some(cache) = &cache {
        // Protected like the policy files, whether or not this call reads or writes it.
        builder = builder.protect(cache, "the compiled policy cache");
    }
    let (Some((cache, salt)), Some(files_key)) = (eligible, files_key) else {
        return Ok(builder.build()?);
    };
    let key = builder.image_key(&salt);
    let image = stored.as_ref().map(|s| s.image);
    let (snapshot, load) = builder.build_with_image(&key, image)?;
    match load {
        ImageLoad::Loaded if from_cache => {
            tracing::debug!("policy files and rules read from {}", cache.display());
            return Ok(snapshot);
        }
        ImageLoad::Loaded => {}
        ImageLoad::Absent => tracing::debug!("no policy image at {}", cache.display()),
        ImageLoad::Refused(why) => {
            tracing::debug!("policy image {} not used: {why}", cache.display());
        }
    }
    let written = serde_json::to_string(&loaded.iter().map(|f| &f.file).collect::<Vec<_>>())
        .map_err(std::io::Error::other)
        .and_then(|json| write_cache(&cache, &files_key, &json, &snapshot.to_image(&key)));
    if let Err(e) = written {
        tracing::debug!("policy cache {} not written: {e}", cache.display());
    }
    Ok(snapshot)
}

/// A policy file's text, read as `LoadedPolicy::read` reads it.
struct Text {
    path: PathBuf,
    label: String,
    stem: String,
    format: Format,
    text: String,
    role: Role,
}

/// The files' text; `None` when one cannot be read or has no policy extension (then they are
/// read the ordinary way, which names the problem).
fn read_texts(files: &[PolicyPath]) -> Option<Vec<Text>> {
    files
        .iter()
        .map(|f| {
            Some(Text {
                label: f.path.display().to_string(),
                stem: f
                    .path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "policy".into()),
                format: Format::of_path(&f.path)?,
                text: fs::read_to_string(&f.path).ok()?,
                path: f.path.clone(),
                role: f.role,
            })
        })
        .collect()
}

/// The key the parsed files are filed under: the cache format, this binary, the environment,
/// and each file's role, path, name and text.
fn files_key(salt: &str, env: &PathEnv, texts: &[Text]) -> String {
    let mut id: Vec<u8> = Vec::new();
    let mut field = |bytes: &[u8]| {
        id.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        id.extend_from_slice(bytes);
    };
    field(CACHE_MAGIC);
    field(&CACHE_FORMAT.to_le_bytes());
    field(salt.as_bytes());
    field(env.project_root.as_os_str().as_encoded_bytes());
    field(
        env.home
            .as_deref()
            .map_or(&b"\0"[..], |h| h.as_os_str().as_encoded_bytes()),
    );
    for t in texts {
        field(t.role.as_str().as_bytes());
        field(t.path.as_os_str().as_encoded_bytes());
        field(t.label.as_bytes());
        field(t.stem.as_bytes());
        field(match t.format {
            Format::Toml => b"toml",
            Format::Json => b"json",
        });
        field(t.text.as_bytes());
    }
    Digest::of_bytes(&id).to_string()
}

/// The first bytes of a cache file.
const CACHE_MAGIC: &[u8] = b"warden-hook-policy-cache\n";
/// The cache file's layout; a change bumps it.
const CACHE_FORMAT: u32 = 1;

/// A cache file's parts: the parsed files (checked) and the policy image (which
/// `build_with_image` checks).
struct Stored<'a> {
    files_json: &'a str,
    image: &'a [u8],
}

/// The cache file's bytes: only a regular file of this user that no one else may write.
fn read_cache(path: &Path) -> Option<Vec<u8>> {
    let meta = fs::symlink_metadata(path).ok()?;
    let uid = our_uid()?;
    if !meta.file_type().is_file() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        tracing::debug!(
            "policy cache {} not read: not a regular file of this user, or writable by others",
            path.display()
        );
        return None;
    }
    fs::read(path).ok()
}

/// The parts of a cache file filed under `key`, its files' checksum verified.
fn split_cache<'a>(bytes: &'a [u8], key: &str) -> Option<Stored<'a>> {
    fn field<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
        let len = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
        let len = usize::try_from(len).ok()?;
        let value = rest.get(8..8usize.checked_add(len)?)?;
        *rest = &rest[8 + len..];
        Some(value)
    }
    let mut rest = bytes.strip_prefix(CACHE_MAGIC)?;
    if field(&mut rest)? != CACHE_FORMAT.to_le_bytes() || field(&mut rest)? != key.as_bytes() {
        return None;
    }
    let checksum = field(&mut rest)?;
    let files = field(&mut rest)?;
    if Digest::of_bytes(files).to_string().as_bytes() != checksum {
        return None;
    }
    Some(Stored {
        files_json: std::str::from_utf8(files).ok()?,
        image: rest,
    })
}

/// The policy files as the cache holds them parsed, one per text.
fn parsed_files(json: &str, texts: &[Text]) -> Option<Vec<LoadedPolicy>> {
    let parsed: Vec<PolicyFile> = serde_json::from_str(json).ok()?;
    if parsed.len() != texts.len() {
        return None;
    }
    Some(
        parsed
            .into_iter()
            .zip(texts)
            .map(|(file, t)| LoadedPolicy {
                file,
                path: Some(t.path.clone()),
                label: t.label.clone(),
                stem: t.stem.clone(),
                hash: Digest::of_bytes(t.text.as_bytes()).to_string(),
                text: t.text.clone(),
                format: t.format,
                role: t.role,
            })
            .collect(),
    )
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
fn owned_by_us(files: &[PolicyPath]) -> Result<(), String> {
    let uid = our_uid().ok_or("the user running this process is unknown")?;
    for f in files {
        let meta = fs::metadata(&f.path).map_err(|e| format!("{}: {e}", f.path.display()))?;
        if meta.uid() != uid {
            return Err(format!(
                "{} belongs to another user (uid {}), who the cache would speak for",
                f.path.display(),
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

/// Writes the cache file atomically: a temporary file beside it (mode 0600), synced, renamed
/// over it, the folder synced.
fn write_cache(path: &Path, key: &str, files_json: &str, image: &[u8]) -> std::io::Result<()> {
    let mut bytes = CACHE_MAGIC.to_vec();
    for field in [
        &CACHE_FORMAT.to_le_bytes()[..],
        key.as_bytes(),
        Digest::of_bytes(files_json.as_bytes())
            .to_string()
            .as_bytes(),
        files_json.as_bytes(),
    ] {
        bytes.extend_from_slice(&(field.len() as u64).to_le_bytes());
        bytes.extend_from_slice(field);
    }
    bytes.extend_from_slice(image);
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
        f.write_all(&bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}
