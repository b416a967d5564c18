//! Task certificates: minted only for a closed task boundary whose chain verifies to the
//! expected head, whose closing record is that head, whose every started operation has exactly
//! one terminal record, and whose stored policy bytes recompute to their digests.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warden_contracts::{
    ChainHead, ChainId, Digest, EvidenceError, EvidenceRecord, OperationId, RecordId, RecordType,
    Timestamp, VerificationFailure,
};

use crate::payload::{self, CloseDisposition, GateLevel, GateVerdict, Payload, TerminalCounts};
use crate::record::Family;
use crate::store::GovernedStore;
use crate::verify::{self, Expected};

/// The certificate's grade.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Grade {
    /// Every gate held.
    Full,
    /// At least one soft deny was overridden by an exception: permanently degraded.
    Degraded,
}

/// What the gates and operations of a boundary came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateSummary {
    /// Operations started.
    pub operations: u64,
    /// Their terminal records by type.
    pub terminals: TerminalCounts,
    /// Gate evaluations recorded.
    pub gates_evaluated: u64,
    /// Hard denies.
    pub hard_denies: u64,
    /// Soft denies.
    pub soft_denies: u64,
    /// Advisory denies (let through).
    pub advisory_denies: u64,
    /// Exceptions granted.
    pub exceptions: u64,
    /// Corrections (`record_superseded`).
    pub corrections: u64,
}

/// A task certificate (JSON). It names the head it was minted at, so it is checked against the
/// chain like a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Certificate {
    /// `warden-certificate-v1`.
    pub format: String,
    /// The certificate's id (derived from the head and the minting time).
    pub certificate_id: String,
    /// The task boundary.
    pub task_boundary_id: String,
    /// The policy (from the genesis `policy_bound`).
    pub policy_id: String,
    /// Its version.
    pub policy_version: String,
    /// Its digest, recomputed from the stored bytes.
    pub policy_digest: Digest,
    /// The evidence chain head the certificate covers (the `task_closed` record).
    pub evidence_chain_head: ChainHead,
    /// The gate summary.
    pub gate_summary: GateSummary,
    /// `FULL` or `DEGRADED`.
    pub grade: Grade,
    /// When it was minted.
    pub minted_at: Timestamp,
}

/// Why a certificate was not minted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertificateRefusal {
    /// The chain is empty.
    #[error("chain {0} is empty")]
    Empty(ChainId),
    /// The chain does not verify.
    #[error("the chain does not verify: {code:?} at record {record}: {detail}")]
    ChainInvalid {
        /// The failure code.
        code: VerificationFailure,
        /// The failed record.
        record: String,
        /// Why.
        detail: String,
    },
    /// The expected head is not the chain's head.
    #[error("the chain does not end at the expected head: {0}")]
    HeadMismatch(String),
    /// The boundary never closed (an abandoned boundary).
    #[error(
        "the task boundary is not closed (its last record is {0}); an abandoned boundary cannot be certified"
    )]
    NotClosed(String),
    /// The boundary closed as abandoned.
    #[error("the task boundary closed as abandoned")]
    Abandoned,
    /// The boundary closed twice.
    #[error("the task boundary closed more than once (record {0})")]
    ClosedMoreThanOnce(RecordId),
    /// A started operation has no terminal record.
    #[error("operation {0} has no terminal record")]
    MissingTerminal(String),
    /// An operation has two terminal records.
    #[error("operation {0} has more than one terminal record")]
    DuplicateTerminal(String),
    /// Stored policy bytes do not recompute to their digest.
    #[error("policy_bound {record}: the stored snapshot bytes hash to {computed}, not {stated}")]
    PolicyDigestMismatch {
        /// The record.
        record: RecordId,
        /// The digest the record states.
        stated: Digest,
        /// The digest of its bytes.
        computed: Digest,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] EvidenceError),
}

fn op_of(records: &[EvidenceRecord], id: Option<&RecordId>) -> String {
    id.and_then(|id| records.iter().find(|r| &r.record_id == id))
        .and_then(|r| r.operation_id.as_ref().map(OperationId::to_string))
        .unwrap_or_else(|| "?".into())
}

/// Mints a certificate for a chain's records (all of them, in order).
pub fn certify_records(
    chain: &ChainId,
    records: &[EvidenceRecord],
    expected_head: &ChainHead,
    minted_at: Timestamp,
) -> Result<Certificate, CertificateRefusal> {
    let (Some(genesis), Some(last)) = (records.first(), records.last()) else {
        return Err(CertificateRefusal::Empty(chain.clone()));
    };
    let report = verify::verify_records(
        Family::Evidence,
        chain,
        records.iter().cloned().map(Ok),
        &Expected::Head(expected_head.clone()),
    );
    if let Some(f) = report.failure {
        let failed = f.record_id.as_ref();
        return Err(match f.code {
            VerificationFailure::MissingTerminal => {
                CertificateRefusal::MissingTerminal(op_of(records, failed))
            }
            VerificationFailure::DuplicateTerminal => {
                CertificateRefusal::DuplicateTerminal(op_of(records, failed))
            }
            VerificationFailure::RecordAfterClose
                if failed
                    .and_then(|id| records.iter().find(|r| &r.record_id == id))
                    .is_some_and(|r| r.record_type == RecordType::TaskClosed) =>
            {
                CertificateRefusal::ClosedMoreThanOnce(
                    failed.cloned().unwrap_or_else(|| last.record_id.clone()),
                )
            }
            VerificationFailure::HeadMismatch => CertificateRefusal::HeadMismatch(f.detail),
            code => CertificateRefusal::ChainInvalid {
                code,
                record: failed.map_or_else(|| "?".into(), RecordId::to_string),
                detail: f.detail,
            },
        });
    }
    if last.sequence != expected_head.sequence || last.chain_hash != expected_head.chain_hash {
        return Err(CertificateRefusal::HeadMismatch(format!(
            "the chain continues to sequence {} after the expected head at {}",
            last.sequence, expected_head.sequence
        )));
    }
    let mut summary = GateSummary::default();
    let mut boundary = String::new();
    let mut policy_digest = None;
    let mut closed = None;
    for r in records {
        let value: Value = serde_json::from_str(&r.payload_json).unwrap_or(Value::Null);
        let Ok(parsed) = payload::parse(r.record_type, &value) else {
            continue; // verification already parsed every payload
        };
        match parsed {
            Payload::PolicyBound(p) => {
                if let Some(bytes) = &p.snapshot_json {
                    let computed = Digest::of_bytes(bytes.as_bytes());
                    if computed != p.policy_digest {
                        return Err(CertificateRefusal::PolicyDigestMismatch {
                            record: r.record_id.clone(),
                            stated: p.policy_digest,
                            computed,
                        });
                    }
                }
                if r.sequence == 0 {
                    boundary = p.task_boundary_id.to_string();
                    policy_digest = Some(p.policy_digest);
                }
            }
            Payload::OperationStarted(_) => summary.operations += 1,
            Payload::GateEvaluated(g) => {
                summary.gates_evaluated += 1;
                if g.verdict == GateVerdict::Deny {
                    match g.level {
                        GateLevel::Hard => summary.hard_denies += 1,
                        GateLevel::Soft => summary.soft_denies += 1,
                        GateLevel::Advisory => summary.advisory_denies += 1,
                    }
                }
            }
            Payload::ExceptionGranted(_) => summary.exceptions += 1,
            Payload::RecordSuperseded(_) => summary.corrections += 1,
            Payload::TaskClosed(c) => closed = Some((r.record_id.clone(), c.disposition)),
            _ => summary.terminals.add(r.record_type),
        }
    }
    match closed {
        None => {
            return Err(CertificateRefusal::NotClosed(
                crate::record::record_type_str(last.record_type).to_owned(),
            ));
        }
        Some((id, _)) if id != last.record_id => {
            return Err(CertificateRefusal::NotClosed(format!(
                "{} (the closing record {id} is not the head)",
                crate::record::record_type_str(last.record_type)
            )));
        }
        Some((_, CloseDisposition::Abandoned)) => return Err(CertificateRefusal::Abandoned),
        Some(_) => {}
    }
    if summary.terminals.total() != summary.operations {
        return Err(CertificateRefusal::MissingTerminal(format!(
            "{} of {} operations",
            summary.operations - summary.terminals.total().min(summary.operations),
            summary.operations
        )));
    }
    let policy_digest = policy_digest.ok_or_else(|| CertificateRefusal::ChainInvalid {
        code: VerificationFailure::InvalidGenesis,
        record: genesis.record_id.to_string(),
        detail: "no genesis policy_bound".into(),
    })?;
    let head = crate::record::head_of(last);
    let mut id = blake3::Hasher::new();
    id.update(b"warden-certificate v1\0");
    id.update(head.chain_id.as_str().as_bytes());
    id.update(&[0]);
    id.update(head.chain_hash.as_str().as_bytes());
    id.update(&minted_at.0.to_be_bytes());
    Ok(Certificate {
        format: "warden-certificate-v1".into(),
        certificate_id: format!("cert_{}", &id.finalize().to_hex().as_str()[..32]),
        task_boundary_id: boundary,
        policy_id: genesis.policy_id.clone(),
        policy_version: genesis.policy_version.clone(),
        policy_digest,
        evidence_chain_head: head,
        gate_summary: summary,
        grade: if summary.exceptions > 0 {
            Grade::Degraded
        } else {
            Grade::Full
        },
        minted_at,
    })
}

/// Reads a chain from `store` and mints its certificate.
pub async fn certify(
    store: &dyn GovernedStore,
    chain: &ChainId,
    expected_head: &ChainHead,
    minted_at: Timestamp,
) -> Result<Certificate, CertificateRefusal> {
    let records = store.read(chain, None, usize::MAX).await?;
    certify_records(chain, &records, expected_head, minted_at)
}
