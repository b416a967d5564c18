//! `warden evidence verify | show | certify | checkpoint`: read an evidence store (always
//! read-only: nothing is created or modified) and verify, display, certify or sign its chains.
//!
//! Exit codes: 0 every chain verifies (a certificate was minted); 1 a record failed (a
//! certificate was refused, a checkpoint's signature did not verify); 2 the store is missing,
//! not SQLite or of an unknown schema version, or the input is invalid.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::json;
use warden_contracts::{ChainHead, ChainId, Digest, EvidenceRecord, Timestamp};
use warden_evidence::{
    AttemptState, Checkpoint, Expected, Report, SqliteReader, certify_records, failure_code_str,
    project_from_scratch, read_signing_key, read_verifying_key,
};

use crate::OutputFormat;
use crate::error::CliError;

/// Evidence store commands.
#[derive(Debug, Subcommand)]
pub(crate) enum EvidenceCommand {
    /// Verify every chain (or one) of a store; exit 1 when any record fails.
    Verify(VerifyArgs),
    /// Show operations, their decisions and outcomes.
    Show(ShowArgs),
    /// Mint a certificate for a closed task boundary verified to its expected head.
    Certify(CertifyArgs),
    /// Sign a chain's head with an ed25519 key (a checkpoint to keep elsewhere).
    Checkpoint(CheckpointArgs),
}

#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    /// The evidence store (SQLite), opened read-only.
    #[arg(long, value_name = "PATH")]
    store: PathBuf,
    /// Only this chain.
    #[arg(long, value_name = "ID")]
    chain: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The chain hash of a head kept elsewhere; the chain must contain it.
    #[arg(long, value_name = "DIGEST", conflicts_with = "checkpoint")]
    expected_head: Option<String>,
    /// A signed checkpoint file: no record at or before its head may have changed.
    #[arg(long, value_name = "FILE")]
    checkpoint: Option<PathBuf>,
    /// The public key the checkpoint must be signed with (SPKI PEM or 64 hex digits).
    #[arg(long, value_name = "FILE", requires = "checkpoint")]
    public_key: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    format: OutputFormat,
}

#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    format: OutputFormat,
}

#[derive(Debug, Args)]
pub(crate) struct CertifyArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The chain hash the boundary must end at (its `task_closed` record).
    #[arg(long, value_name = "DIGEST", required_unless_present = "checkpoint")]
    expected_head: Option<String>,
    /// Or: a signed checkpoint of that head.
    #[arg(long, value_name = "FILE", conflicts_with = "expected_head")]
    checkpoint: Option<PathBuf>,
    /// Write the certificate here instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct CheckpointArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The ed25519 signing key (PKCS#8 PEM or a 64-hex-digit seed).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// Write the checkpoint here instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Runs one evidence command.
pub(crate) fn run(cmd: &EvidenceCommand, out: &mut dyn Write) -> Result<ExitCode, CliError> {
    match cmd {
        EvidenceCommand::Verify(a) => verify(a, out),
        EvidenceCommand::Show(a) => show(a, out),
        EvidenceCommand::Certify(a) => certify(a, out),
        EvidenceCommand::Checkpoint(a) => checkpoint(a, out),
    }
}

fn input(e: impl std::fmt::Display) -> CliError {
    CliError::Input(e.to_string())
}

fn open(path: &Path) -> Result<SqliteReader, CliError> {
    SqliteReader::open(path).map_err(input)
}

fn now() -> Timestamp {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    Timestamp(ms)
}

fn chain_id(s: &str) -> Result<ChainId, CliError> {
    ChainId::new(s).map_err(input)
}

/// The one evidence chain a command works on: `--chain`, or the store's only chain.
fn single_chain(reader: &SqliteReader, chain: Option<&str>) -> Result<ChainId, CliError> {
    let chains = reader.chain_ids().map_err(input)?;
    match chain {
        Some(c) => {
            let c = chain_id(c)?;
            if chains.contains(&c) {
                Ok(c)
            } else {
                Err(input(format!(
                    "no evidence chain `{c}` in {}",
                    reader.path().display()
                )))
            }
        }
        None => match chains.as_slice() {
            [only] => Ok(only.clone()),
            [] => Err(input(format!(
                "{} has no evidence chain",
                reader.path().display()
            ))),
            _ => Err(input(format!(
                "{} has {} chains: name one with --chain",
                reader.path().display(),
                chains.len()
            ))),
        },
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fam {
    Evidence,
    Journal,
}

impl Fam {
    fn as_str(self) -> &'static str {
        match self {
            Self::Evidence => "evidence",
            Self::Journal => "journal",
        }
    }
}

fn print_report(
    out: &mut dyn Write,
    format: OutputFormat,
    fam: Fam,
    chain: &ChainId,
    report: &Report,
) -> Result<(), CliError> {
    let r = &report.result;
    let f = report.failure.as_ref();
    match format {
        OutputFormat::Json => {
            let line = json!({
                "family": fam.as_str(),
                "chain_id": chain,
                "valid": r.valid,
                "checked_records": r.checked_records,
                "verified_head": r.verified_head,
                "failure_code": r.failure_code,
                "failed_record_id": r.failed_record_id,
                "failed_sequence": f.and_then(|f| f.sequence),
                "detail": f.map(|f| f.detail.clone()),
            });
            writeln!(out, "{line}")?;
        }
        OutputFormat::Text => match f {
            None => {
                let head = r.verified_head.as_ref().map_or_else(
                    || "empty".to_owned(),
                    |h| format!("head {} {}", h.sequence, h.chain_hash),
                );
                writeln!(
                    out,
                    "ok    {} chain {chain}: {} records, {head}",
                    fam.as_str(),
                    r.checked_records
                )?;
            }
            Some(f) => {
                let record = f.record_id.as_ref().map_or_else(
                    || "(none)".to_owned(),
                    |id| {
                        f.sequence
                            .map_or_else(|| id.to_string(), |s| format!("{id} (sequence {s})"))
                    },
                );
                writeln!(
                    out,
                    "FAIL  {} chain {chain}: {} at record {record}: {}",
                    fam.as_str(),
                    failure_code_str(f.code),
                    f.detail
                )?;
            }
        },
    }
    Ok(())
}

fn verify(a: &VerifyArgs, out: &mut dyn Write) -> Result<ExitCode, CliError> {
    let reader = open(&a.store.store)?;
    let mut chains: Vec<(Fam, ChainId)> = reader
        .chain_ids()
        .map_err(input)?
        .into_iter()
        .map(|c| (Fam::Evidence, c))
        .chain(
            reader
                .journal_chain_ids()
                .map_err(input)?
                .into_iter()
                .map(|c| (Fam::Journal, c)),
        )
        .collect();
    if let Some(c) = &a.store.chain {
        let c = chain_id(c)?;
        chains.retain(|(_, id)| id == &c);
        if chains.is_empty() {
            if a.expected_head.is_none() && a.checkpoint.is_none() {
                return Err(input(format!(
                    "no chain `{c}` in {}",
                    a.store.store.display()
                )));
            }
            // A head kept elsewhere vouches for records of this chain, and none is left: every
            // record was deleted. Verifying the empty chain against the head reports it.
            chains.push((Fam::Evidence, c));
        }
    }
    // What the chain is checked against.
    let mut expected: Option<(ChainId, Expected)> = None;
    let mut failed = false;
    if let Some(d) = &a.expected_head {
        let digest: Digest = d.parse().map_err(input)?;
        let target = match (&a.store.chain, chains.as_slice()) {
            (Some(c), _) => chain_id(c)?,
            (None, [(_, only)]) => only.clone(),
            (None, []) => {
                // The store holds no chain at all, yet a head was expected: everything is gone.
                match a.format {
                    OutputFormat::Json => writeln!(
                        out,
                        "{}",
                        json!({"valid": false, "failure_code": "head_mismatch", "detail": "the store holds no chain, but a head was expected: every record was deleted"})
                    )?,
                    OutputFormat::Text => writeln!(
                        out,
                        "FAIL  the store holds no chain, but a head was expected: every record was deleted"
                    )?,
                }
                return Ok(ExitCode::from(1));
            }
            _ => {
                return Err(input(
                    "--expected-head needs --chain when the store has several chains",
                ));
            }
        };
        expected = Some((target, Expected::Hash(digest)));
    }
    if let Some(path) = &a.checkpoint {
        let cp = Checkpoint::read(path).map_err(input)?;
        let trusted = a
            .public_key
            .as_deref()
            .map(read_verifying_key)
            .transpose()
            .map_err(input)?;
        if let Err(e) = cp.verify_signature(trusted.as_ref()) {
            match a.format {
                OutputFormat::Json => writeln!(
                    out,
                    "{}",
                    json!({"checkpoint": path, "valid": false, "failure_code": "checkpoint_signature", "detail": e.to_string()})
                )?,
                OutputFormat::Text => writeln!(out, "FAIL  checkpoint {}: {e}", path.display())?,
            }
            failed = true;
        }
        if trusted.is_none() && a.format == OutputFormat::Text {
            writeln!(
                out,
                "note: checkpoint signature checked against its own key {}; pass --public-key to check who signed it",
                cp.public_key
            )?;
        }
        if let Some(c) = &a.store.chain
            && c != cp.chain_id.as_str()
        {
            return Err(input(format!(
                "the checkpoint is of chain {}, not {c}",
                cp.chain_id
            )));
        }
        if !chains
            .iter()
            .any(|(f, c)| *f == Fam::Evidence && c == &cp.chain_id)
        {
            // The whole chain is gone: everything the checkpoint vouched for was removed.
            chains.push((Fam::Evidence, cp.chain_id.clone()));
        }
        expected = Some((cp.chain_id.clone(), Expected::Head(cp.head())));
    }
    if chains.is_empty() && a.format == OutputFormat::Text {
        writeln!(out, "no chains in {}", a.store.store.display())?;
    }
    for (fam, chain) in &chains {
        let exp = match &expected {
            Some((c, e)) if c == chain && *fam == Fam::Evidence => e.clone(),
            _ => Expected::Nothing,
        };
        let report = match fam {
            Fam::Evidence => reader.verify(chain, &exp),
            Fam::Journal => reader.verify_journal(chain, &exp),
        }
        .map_err(input)?;
        failed |= !report.result.valid;
        print_report(out, a.format, *fam, chain, &report)?;
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn decision(state: AttemptState) -> &'static str {
    match state {
        AttemptState::Started => "pending",
        AttemptState::Denied => "deny",
        AttemptState::Escalated => "escalate",
        _ => "allow",
    }
}

fn outcome(state: AttemptState) -> &'static str {
    match state {
        AttemptState::Started => "open",
        AttemptState::Denied | AttemptState::Escalated => "denied",
        AttemptState::Completed => "completed",
        AttemptState::Failed => "failed",
        AttemptState::Cancelled => "cancelled",
        AttemptState::TimedOut => "timed_out",
        AttemptState::Ambiguous => "ambiguous",
    }
}

fn show(a: &ShowArgs, out: &mut dyn Write) -> Result<ExitCode, CliError> {
    let reader = open(&a.store.store)?;
    let mut chains = reader.chain_ids().map_err(input)?;
    let mut journals = reader.journal_chain_ids().map_err(input)?;
    if let Some(c) = &a.store.chain {
        let c = chain_id(c)?;
        chains.retain(|x| x == &c);
        journals.retain(|x| x == &c);
        if chains.is_empty() && journals.is_empty() {
            return Err(input(format!(
                "no chain `{c}` in {}",
                a.store.store.display()
            )));
        }
    }
    for chain in &chains {
        let records: Vec<EvidenceRecord> = reader.read(chain, None, usize::MAX).map_err(input)?;
        let (runs, attempts) = project_from_scratch(&records);
        let head = records.last().map(warden_evidence::head_of);
        match a.format {
            OutputFormat::Json => {
                for run in &runs {
                    writeln!(
                        out,
                        "{}",
                        json!({"kind": "chain", "family": "evidence", "chain_id": chain, "task_boundary_id": run.task_boundary_id,
                               "state": run.state, "operations": run.operations, "open_operations": run.open_operations,
                               "exceptions": run.exceptions, "records": records.len(), "head": head})
                    )?;
                }
                for at in &attempts {
                    writeln!(
                        out,
                        "{}",
                        json!({"kind": "operation", "chain_id": chain, "operation_id": at.operation_id, "request_id": at.request_id,
                               "action": at.action, "decision": decision(at.state), "outcome": outcome(at.state),
                               "gates": at.gates, "denies": at.denies, "exceptions": at.exceptions,
                               "call_executed": at.call_executed, "terminal_record_id": at.terminal_record_id})
                    )?;
                }
            }
            OutputFormat::Text => {
                for run in &runs {
                    writeln!(
                        out,
                        "chain {chain} (task {}): {:?}, {} operations ({} open), {} exceptions, {} records, head {}",
                        run.task_boundary_id,
                        run.state,
                        run.operations,
                        run.open_operations,
                        run.exceptions,
                        records.len(),
                        head.as_ref().map_or_else(
                            || "-".to_owned(),
                            |h| format!("{} {}", h.sequence, h.chain_hash)
                        ),
                    )?;
                }
                let rows: Vec<[String; 7]> = attempts
                    .iter()
                    .map(|at| {
                        [
                            at.operation_id.to_string(),
                            at.action.clone(),
                            format!("{}/{}", at.gates, at.denies),
                            at.exceptions.to_string(),
                            decision(at.state).to_owned(),
                            outcome(at.state).to_owned(),
                            at.call_executed
                                .map_or_else(|| "unknown".to_owned(), |c| c.to_string()),
                        ]
                    })
                    .collect();
                let header = [
                    "OPERATION",
                    "ACTION",
                    "GATES/DENIES",
                    "EXCEPTIONS",
                    "DECISION",
                    "OUTCOME",
                    "CALLED",
                ];
                let mut widths = header.map(str::len);
                for row in &rows {
                    for (w, cell) in widths.iter_mut().zip(row) {
                        *w = (*w).max(cell.len());
                    }
                }
                let line = |cells: Vec<&str>| {
                    cells
                        .iter()
                        .zip(widths)
                        .map(|(c, w)| format!("{c:<w$}"))
                        .collect::<Vec<_>>()
                        .join("  ")
                        .trim_end()
                        .to_owned()
                };
                writeln!(out, "  {}", line(header.to_vec()))?;
                for row in &rows {
                    writeln!(out, "  {}", line(row.iter().map(String::as_str).collect()))?;
                }
            }
        }
    }
    for chain in &journals {
        let records = reader
            .read_journal(chain, None, usize::MAX)
            .map_err(input)?;
        let verdicts = records
            .iter()
            .filter(|r| r.record_type == warden_evidence::JournalRecordType::HookVerdict)
            .count();
        match a.format {
            OutputFormat::Json => writeln!(
                out,
                "{}",
                json!({"kind": "chain", "family": "journal", "chain_id": chain, "records": records.len(),
                       "hook_verdicts": verdicts, "provider_observations": records.len() - verdicts, "certifiable": false})
            )?,
            OutputFormat::Text => writeln!(
                out,
                "journal {chain}: {} records ({verdicts} hook verdicts, {} provider observations); never certified",
                records.len(),
                records.len() - verdicts
            )?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn write_output(text: &str, to: Option<&Path>, out: &mut dyn Write) -> Result<(), CliError> {
    match to {
        Some(p) => std::fs::write(p, format!("{text}\n"))
            .map_err(|e| input(format!("cannot write {}: {e}", p.display()))),
        None => writeln!(out, "{text}").map_err(CliError::from),
    }
}

fn certify(a: &CertifyArgs, out: &mut dyn Write) -> Result<ExitCode, CliError> {
    let reader = open(&a.store.store)?;
    let chain = single_chain(&reader, a.store.chain.as_deref())?;
    let records = reader.read(&chain, None, usize::MAX).map_err(input)?;
    let expected = match (&a.expected_head, &a.checkpoint) {
        (Some(d), _) => {
            let digest: Digest = d.parse().map_err(input)?;
            // The head's sequence: where the chain has that hash (if nowhere, the expected head
            // is beyond or beside the chain: refused below as a head mismatch).
            let sequence = records
                .iter()
                .find(|r| r.chain_hash == digest)
                .map_or(u64::MAX, |r| r.sequence);
            ChainHead {
                chain_id: chain.clone(),
                sequence,
                chain_hash: digest,
            }
        }
        (None, Some(p)) => {
            let cp = Checkpoint::read(p).map_err(input)?;
            if let Err(e) = cp.verify_signature(None) {
                writeln!(out, "refused: checkpoint {}: {e}", p.display())?;
                return Ok(ExitCode::from(1));
            }
            cp.head()
        }
        (None, None) => return Err(input("--expected-head or --checkpoint is required")),
    };
    match certify_records(&chain, &records, &expected, now()) {
        Ok(cert) => {
            let text = serde_json::to_string_pretty(&cert).map_err(input)?;
            write_output(&text, a.out.as_deref(), out)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(refusal) => {
            writeln!(out, "refused: {refusal}")?;
            Ok(ExitCode::from(1))
        }
    }
}

fn checkpoint(a: &CheckpointArgs, out: &mut dyn Write) -> Result<ExitCode, CliError> {
    let reader = open(&a.store.store)?;
    let chain = single_chain(&reader, a.store.chain.as_deref())?;
    let key = read_signing_key(&a.key).map_err(input)?;
    let head = reader
        .head(&chain)
        .map_err(input)?
        .ok_or_else(|| input(format!("chain {chain} is empty")))?;
    let cp = Checkpoint::sign(&head, now(), &key);
    let text = serde_json::to_string_pretty(&cp).map_err(input)?;
    write_output(&text, a.out.as_deref(), out)?;
    Ok(ExitCode::SUCCESS)
}
