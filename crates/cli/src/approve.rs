//! `warden approve`: signs an approval receipt bound to one exact call (docs/policy.md,
//! "Approval receipts"), or writes a fresh approver key pair (`--keygen`).
//!
//! The receipt logic (fields, canonical signed text, verification) is
//! `warden_policy::receipt`; this module reads files, the clock and the operating system's
//! randomness, and prints.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use serde_json::Value;
use warden_contracts::{ApprovalId, Digest, Timestamp};
use warden_policy::receipt::SigningKey;
use warden_policy::{Call, Decision, ReceiptDraft};

use crate::error::CliError;
use crate::load;

/// The default lifetime of a receipt, in seconds.
const DEFAULT_TTL_SECS: u64 = 900;

/// `warden approve`.
#[derive(Debug, Args)]
pub(crate) struct ApproveArgs {
    /// Write a fresh ed25519 key pair instead: FILE (PKCS#8 PEM, the private key, mode 0600)
    /// and FILE.pub (SPKI PEM), then print the public key to declare under `[approvers]`.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["policies", "key", "tool", "args", "ttl", "out"]
    )]
    keygen: Option<PathBuf>,
    /// The policy file(s) the receipt is issued under (its digest binds the receipt).
    #[arg(
        long = "policy",
        value_name = "FILE",
        required_unless_present = "keygen"
    )]
    policies: Vec<PathBuf>,
    /// The project root relative path patterns are anchored at, as for every command that
    /// loads policies.
    #[arg(long, value_name = "DIR", conflicts_with = "keygen")]
    project_root: Option<PathBuf>,
    /// The approver's signing key: PKCS#8 PEM or 64 hex digits.
    #[arg(long, value_name = "KEYFILE", required_unless_present = "keygen")]
    key: Option<PathBuf>,
    /// The approver class, as declared in the policy's `[approvers]`.
    #[arg(long, value_name = "NAME", required_unless_present = "keygen")]
    approver: Option<String>,
    /// The approved tool, by its Warden name (`bash`, `write`, `server__tool`).
    #[arg(long, value_name = "NAME", required_unless_present = "keygen")]
    tool: Option<String>,
    /// The call's exact final arguments: a JSON object.
    #[arg(long, value_name = "JSON", required_unless_present = "keygen")]
    args: Option<String>,
    /// How long the receipt is valid, in seconds (default 900).
    #[arg(long, value_name = "SECONDS")]
    ttl: Option<u64>,
    /// Write the receipt here instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

pub(crate) fn run(a: &ApproveArgs, out: &mut impl Write) -> Result<ExitCode, CliError> {
    match &a.keygen {
        Some(path) => keygen(path, a.approver.as_deref(), out),
        None => approve(a, out),
    }
}

fn input(e: impl std::fmt::Display) -> CliError {
    CliError::Input(e.to_string())
}

fn random<const N: usize>() -> Result<[u8; N], CliError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)
        .map_err(|e| CliError::Input(format!("cannot get randomness from the system: {e}")))?;
    Ok(bytes)
}

fn now() -> Result<Timestamp, CliError> {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| CliError::Input(format!("the clock is before 1970: {e}")))?;
    Ok(Timestamp(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)))
}

/// Creates a new file (never overwriting one), readable by its owner only when `private`.
fn create_new(path: &Path, private: bool) -> Result<std::fs::File, CliError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    options
        .open(path)
        .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))
}

fn keygen(path: &Path, approver: Option<&str>, out: &mut impl Write) -> Result<ExitCode, CliError> {
    let mut public_path = path.as_os_str().to_owned();
    public_path.push(".pub");
    let public_path = PathBuf::from(public_path);
    // Refuse before writing anything if either file exists.
    for p in [path, public_path.as_path()] {
        if p.exists() {
            return Err(CliError::Input(format!(
                "{}: already exists; a key is never overwritten",
                p.display()
            )));
        }
    }
    let key = SigningKey::from_seed(&random::<32>()?);
    let public = key.verifying_key();
    let pem = public.to_pem().map_err(input)?;
    let mut private = create_new(path, true)?;
    key.write_pkcs8_pem(&mut private)
        .and_then(|()| {
            private
                .sync_all()
                .map_err(|e| warden_contracts::keys::KeyError(e.to_string()))
        })
        .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))?;
    let mut public_file = create_new(&public_path, false)?;
    public_file
        .write_all(pem.as_bytes())
        .map_err(|e| CliError::Input(format!("{}: {e}", public_path.display())))?;
    let hex = public.to_hex();
    writeln!(
        out,
        "wrote {} (private key: keep it secret) and {}\npublic key: {hex}\ndeclare it in the policy:\n\n[approvers.{}]\nkeys = [\"{hex}\"]",
        path.display(),
        public_path.display(),
        approver.unwrap_or("NAME"),
    )?;
    Ok(ExitCode::SUCCESS)
}

fn approve(a: &ApproveArgs, out: &mut impl Write) -> Result<ExitCode, CliError> {
    let (Some(key_path), Some(approver), Some(tool), Some(args)) =
        (&a.key, &a.approver, &a.tool, &a.args)
    else {
        return Err(CliError::Input(
            "--key, --approver, --tool and --args are required".into(),
        ));
    };
    // Everything is validated before anything is signed.
    let arguments = Value::Object(crate::args_object(args)?);
    let ttl_ms = match a.ttl.unwrap_or(DEFAULT_TTL_SECS) {
        0 => return Err(CliError::Input("--ttl: must be at least 1 second".into())),
        secs => secs
            .checked_mul(1000)
            .ok_or_else(|| CliError::Input("--ttl: too large".into()))?,
    };
    let files: Vec<load::PolicyPath> =
        load::PolicyPath::each(&a.policies, warden_policy::Role::Project).collect();
    let snapshot = load::snapshot(&files, a.project_root.as_deref())?;
    let text = std::fs::read_to_string(key_path)
        .map_err(|e| CliError::Input(format!("--key {}: {e}", key_path.display())))?;
    let key = SigningKey::parse(&text)
        .map_err(|e| CliError::Input(format!("--key {}: {e}", key_path.display())))?;
    let Some(keys) = snapshot.approvers().keys(approver) else {
        let declared: Vec<&str> = snapshot.approvers().names().collect();
        return Err(CliError::Input(format!(
            "approver `{approver}` is not declared in the policy's [approvers] (declared: {})",
            if declared.is_empty() {
                "none".to_owned()
            } else {
                declared.join(", ")
            }
        )));
    };
    if !keys.contains(&key.verifying_key()) {
        return Err(CliError::Input(format!(
            "--key {}: public key {} is not a key of approver `{approver}`",
            key_path.display(),
            key.verifying_key().to_hex()
        )));
    }
    let arguments_digest = Digest::of_json(&arguments)
        .map_err(|e| CliError::Input(format!("--args: no canonical form: {e}")))?;
    let issued_at = now()?;
    let expires_at = Timestamp(issued_at.0.saturating_add(ttl_ms));
    let id = ApprovalId::new(format!("rcpt-{}", hex(&random::<16>()?))).map_err(input)?;
    let receipt = ReceiptDraft {
        id,
        approver: approver.clone(),
        action: tool.clone(),
        arguments_digest,
        policy_digest: snapshot.digest().clone(),
        issued_at,
        expires_at,
    }
    .sign(&key)
    .map_err(input)?;
    // A receipt that would not verify is never handed out.
    snapshot
        .verify_receipt(&receipt, tool, &arguments, issued_at)
        .map_err(|e| CliError::Input(format!("the receipt does not verify: {e}")))?;
    let cwd = std::env::current_dir().map_err(|e| CliError::Input(format!("cwd: {e}")))?;
    if snapshot
        .decide(&Call::new(tool.as_str(), arguments.clone()).with_cwd(cwd))
        .decision
        == Decision::Deny
    {
        eprintln!(
            "warning: the policy denies this call; a receipt never overrides a deny, so this one cannot be used"
        );
    }
    let json = receipt.to_json().map_err(input)?;
    match &a.out {
        None => writeln!(out, "{json}")?,
        Some(path) => {
            std::fs::write(path, format!("{json}\n"))
                .map_err(|e| CliError::Input(format!("--out {}: {e}", path.display())))?;
            writeln!(
                out,
                "receipt {} approves {tool} for approver {approver} until {} (ms since the epoch); written to {}",
                receipt.id(),
                expires_at.0,
                path.display()
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}
