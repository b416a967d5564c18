//! Sealing records: record ids, `payload_digest`, and `chain_hash` over every other field.
//!
//! `chain_hash` is `blake3:<hex>` of the RFC 8785 canonical JSON of the record's object with
//! `chain_hash` left out (absent optional fields are absent keys, exactly as the record
//! serializes). [`hash_input`] writes that text directly, without building a `serde_json::Value`
//! (the in-memory chain's throughput depends on it); a test proves it equal to
//! `warden_contracts::canonical::to_canonical_string` of the serialized record.

use std::fmt::Write as _;

use serde_json::Value;
use warden_contracts::canonical::{self, MAX_SAFE_INTEGER};
use warden_contracts::{
    ChainHead, ChainId, Digest, EvidenceAppend, EvidenceError, EvidenceRecord, HASH_ALGORITHM,
    OperationId, RecordId, RecordType, Timestamp,
};

use crate::payload;

/// The two record families. Both chain the same way; only evidence is ever certified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// Governed evidence (`records` table): the twelve record types.
    Evidence,
    /// The journal (`journal` table): decisions made for, and observations reported by, a
    /// provider that runs the call itself. Never certified.
    Journal,
}

impl Family {
    fn id_domain(self) -> &'static str {
        match self {
            Self::Evidence => "warden-evidence record id v1",
            Self::Journal => "warden-journal record id v1",
        }
    }

    /// The family's name, as printed (`evidence`, `journal`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Evidence => "evidence",
            Self::Journal => "journal",
        }
    }
}

/// The record id a store assigns at `sequence` of `chain`: `rec_`, 16 hex digits of a BLAKE3
/// hash of the family and the chain id, and the sequence as 16 hex digits. Deterministic, so
/// every backend assigns the same ids and a verifier can check them; unique per family and chain.
pub fn record_id_for(
    family: Family,
    chain: &ChainId,
    sequence: u64,
) -> Result<RecordId, EvidenceError> {
    let id = CHAIN_PREFIX.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some((f, c, prefix)) = cache.as_ref()
            && *f == family
            && c == chain.as_str()
        {
            return format!("rec_{prefix}{sequence:016x}");
        }
        let mut h = blake3::Hasher::new();
        h.update(family.id_domain().as_bytes());
        h.update(&[0]);
        h.update(chain.as_str().as_bytes());
        let prefix = h.finalize().to_hex().as_str()[..16].to_owned();
        let id = format!("rec_{prefix}{sequence:016x}");
        *cache = Some((family, chain.as_str().to_owned(), prefix));
        id
    });
    // `rec_` and 32 hex digits: always a valid identifier.
    RecordId::new(id).map_err(|e| invalid(e.to_string()))
}

thread_local! {
    /// The last chain's id prefix: appends and verification walk one chain at a time.
    static CHAIN_PREFIX: std::cell::RefCell<Option<(Family, String, String)>> =
        const { std::cell::RefCell::new(None) };
}

/// The fields of one record, borrowed: shared by evidence and journal records.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a> {
    /// `record_id`.
    pub record_id: &'a str,
    /// `record_type` as serialized (`policy_bound`, `hook_verdict`, …).
    pub record_type: &'a str,
    /// `chain_id`.
    pub chain_id: &'a str,
    /// `operation_id`.
    pub operation_id: Option<&'a str>,
    /// `sequence`.
    pub sequence: u64,
    /// `policy_id`.
    pub policy_id: &'a str,
    /// `policy_version`.
    pub policy_version: &'a str,
    /// `payload_json`.
    pub payload_json: &'a str,
    /// `payload_digest`.
    pub payload_digest: &'a str,
    /// `previous_chain_hash`.
    pub previous_chain_hash: Option<&'a str>,
    /// `supersedes_record_id`.
    pub supersedes_record_id: Option<&'a str>,
    /// `created_at` (milliseconds).
    pub created_at: u64,
    /// `hash_algorithm`.
    pub hash_algorithm: &'a str,
}

impl<'a> Fields<'a> {
    /// The fields of an evidence record.
    pub fn of(r: &'a EvidenceRecord) -> Self {
        Self {
            record_id: r.record_id.as_str(),
            record_type: record_type_str(r.record_type),
            chain_id: r.chain_id.as_str(),
            operation_id: r.operation_id.as_ref().map(OperationId::as_str),
            sequence: r.sequence,
            policy_id: &r.policy_id,
            policy_version: &r.policy_version,
            payload_json: &r.payload_json,
            payload_digest: r.payload_digest.as_str(),
            previous_chain_hash: r.previous_chain_hash.as_ref().map(Digest::as_str),
            supersedes_record_id: r.supersedes_record_id.as_ref().map(RecordId::as_str),
            created_at: r.created_at.0,
            hash_algorithm: &r.hash_algorithm,
        }
    }
}

/// The canonical JSON text `chain_hash` is computed over: the record without `chain_hash`.
pub fn hash_input(f: &Fields<'_>) -> String {
    let mut out = String::with_capacity(256 + f.payload_json.len() * 11 / 10);
    // Keys in RFC 8785 order (all ASCII, so UTF-16 order is byte order).
    out.push_str("{\"chain_id\":");
    write_str(&mut out, f.chain_id);
    let _ = write!(out, ",\"created_at\":{}", f.created_at);
    out.push_str(",\"hash_algorithm\":");
    write_str(&mut out, f.hash_algorithm);
    if let Some(op) = f.operation_id {
        out.push_str(",\"operation_id\":");
        write_str(&mut out, op);
    }
    out.push_str(",\"payload_digest\":");
    write_str(&mut out, f.payload_digest);
    out.push_str(",\"payload_json\":");
    write_str(&mut out, f.payload_json);
    out.push_str(",\"policy_id\":");
    write_str(&mut out, f.policy_id);
    out.push_str(",\"policy_version\":");
    write_str(&mut out, f.policy_version);
    if let Some(prev) = f.previous_chain_hash {
        out.push_str(",\"previous_chain_hash\":");
        write_str(&mut out, prev);
    }
    out.push_str(",\"record_id\":");
    write_str(&mut out, f.record_id);
    out.push_str(",\"record_type\":");
    write_str(&mut out, f.record_type);
    let _ = write!(out, ",\"sequence\":{}", f.sequence);
    if let Some(sup) = f.supersedes_record_id {
        out.push_str(",\"supersedes_record_id\":");
        write_str(&mut out, sup);
    }
    out.push('}');
    out
}

/// The chain hash of a record's fields.
pub fn chain_hash(f: &Fields<'_>) -> Digest {
    Digest::of_bytes(hash_input(f).as_bytes())
}

/// A JSON string in RFC 8785 form (minimal escapes, lower-case `\u00xx`).
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: Option<&str> = match b {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            0x08 => Some("\\b"),
            b'\t' => Some("\\t"),
            b'\n' => Some("\\n"),
            0x0c => Some("\\f"),
            b'\r' => Some("\\r"),
            0..=0x1f => None,
            _ => continue,
        };
        out.push_str(&s[start..i]);
        match esc {
            Some(e) => out.push_str(e),
            None => {
                let _ = write!(out, "\\u{b:04x}");
            }
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// RFC 8785 canonical JSON, fast path: the same text as
/// `warden_contracts::canonical::to_canonical_string` (a property test holds them equal), written
/// with bulk string copies and integer formatting. Payloads carry no fractional numbers; a value
/// with one (or an integer beyond ±(2^53 − 1)) goes to the contracts implementation.
pub fn canonical_json(
    value: &Value,
) -> Result<String, warden_contracts::canonical::CanonicalError> {
    let mut out = String::with_capacity(256);
    if write_canonical(&mut out, value) {
        Ok(out)
    } else {
        canonical::to_canonical_string(value)
    }
}

/// Returns `false` when the fast path cannot write `v` exactly.
fn write_canonical(out: &mut String, v: &Value) -> bool {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                if u > MAX_SAFE_INTEGER {
                    return false;
                }
                let _ = write!(out, "{u}");
            } else if let Some(i) = n.as_i64() {
                if i.unsigned_abs() > MAX_SAFE_INTEGER {
                    return false;
                }
                let _ = write!(out, "{i}");
            } else {
                return false;
            }
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if !write_canonical(out, item) {
                    return false;
                }
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            if entries.iter().all(|(k, _)| k.is_ascii()) {
                entries.sort_unstable_by(|(a, _), (b, _)| a.as_bytes().cmp(b.as_bytes()));
            } else {
                entries.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
            }
            out.push('{');
            for (i, (k, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_str(out, k);
                out.push(':');
                if !write_canonical(out, item) {
                    return false;
                }
            }
            out.push('}');
        }
    }
    true
}

/// The serialized name of a record type (`policy_bound`, …).
pub fn record_type_str(t: RecordType) -> &'static str {
    match t {
        RecordType::PolicyBound => "policy_bound",
        RecordType::OperationStarted => "operation_started",
        RecordType::GateEvaluated => "gate_evaluated",
        RecordType::ExceptionGranted => "exception_granted",
        RecordType::OperationDenied => "operation_denied",
        RecordType::CallableCompleted => "callable_completed",
        RecordType::CallableFailed => "callable_failed",
        RecordType::OperationCancelled => "operation_cancelled",
        RecordType::OperationTimedOut => "operation_timed_out",
        RecordType::ExternalResultAmbiguous => "external_result_ambiguous",
        RecordType::TaskClosed => "task_closed",
        RecordType::RecordSuperseded => "record_superseded",
    }
}

/// Parses a serialized record type name.
pub fn parse_record_type(s: &str) -> Option<RecordType> {
    RecordType::ALL
        .into_iter()
        .find(|t| record_type_str(*t) == s)
}

pub(crate) fn invalid(message: impl Into<String>) -> EvidenceError {
    EvidenceError::Invalid {
        message: message.into(),
    }
}

/// Canonicalizes an append's payload after checking it against its record type's schema.
pub(crate) fn canonical_payload(
    entry: &EvidenceAppend,
) -> Result<(String, payload::Payload), EvidenceError> {
    let parsed = payload::parse(entry.record_type, &entry.payload).map_err(|e| {
        invalid(format!(
            "{} payload: {e}",
            record_type_str(entry.record_type)
        ))
    })?;
    let text = canonical_json(&entry.payload).map_err(|e| invalid(e.to_string()))?;
    Ok((text, parsed))
}

/// Checks the fields of an append that do not depend on the chain's state.
pub(crate) fn check_append_fields(
    policy_id: &str,
    policy_version: &str,
    created_at: Timestamp,
) -> Result<(), EvidenceError> {
    if policy_id.is_empty() || policy_version.is_empty() {
        return Err(invalid("policy_id and policy_version must not be empty"));
    }
    if created_at.0 > MAX_SAFE_INTEGER {
        return Err(invalid("created_at is beyond 2^53 - 1 milliseconds"));
    }
    Ok(())
}

/// Builds the record an append becomes on `head` (`None`: the chain is empty).
///
/// Checks that the append names the next sequence, that its payload matches its type's schema,
/// and computes `payload_digest` and `chain_hash`. It does not check the chain's lifecycle rules
/// (that is [`crate::ChainTracker`]'s job).
pub fn seal(
    entry: &EvidenceAppend,
    head: Option<&ChainHead>,
) -> Result<EvidenceRecord, EvidenceError> {
    seal_parsed(entry, head).map(|(r, _)| r)
}

/// [`seal`], also returning the parsed payload (stores check the lifecycle with it).
pub(crate) fn seal_parsed(
    entry: &EvidenceAppend,
    head: Option<&ChainHead>,
) -> Result<(EvidenceRecord, payload::Payload), EvidenceError> {
    let next = head.map_or(0, |h| h.sequence + 1);
    if entry.expected_sequence != next {
        return Err(EvidenceError::SequenceConflict {
            chain_id: entry.chain_id.clone(),
            expected: next,
            got: entry.expected_sequence,
        });
    }
    if next > MAX_SAFE_INTEGER {
        return Err(invalid("the chain is full (2^53 - 1 records)"));
    }
    check_append_fields(&entry.policy_id, &entry.policy_version, entry.created_at)?;
    let (payload_json, parsed) = canonical_payload(entry)?;
    seal_parts(
        entry.record_type,
        &entry.chain_id,
        entry.operation_id.clone(),
        next,
        entry.policy_id.clone(),
        entry.policy_version.clone(),
        payload_json,
        head.map(|h| h.chain_hash.clone()),
        entry.supersedes_record_id.clone(),
        entry.created_at,
    )
    .map(|r| (r, parsed))
}

/// Builds a sealed record from already-canonical parts (no schema check).
#[allow(clippy::too_many_arguments)]
pub(crate) fn seal_parts(
    record_type: RecordType,
    chain_id: &ChainId,
    operation_id: Option<OperationId>,
    sequence: u64,
    policy_id: String,
    policy_version: String,
    payload_json: String,
    previous_chain_hash: Option<Digest>,
    supersedes_record_id: Option<RecordId>,
    created_at: Timestamp,
) -> Result<EvidenceRecord, EvidenceError> {
    let payload_digest = Digest::of_bytes(payload_json.as_bytes());
    let record_id = record_id_for(Family::Evidence, chain_id, sequence)?;
    let mut record = EvidenceRecord {
        record_id,
        record_type,
        chain_id: chain_id.clone(),
        operation_id,
        sequence,
        policy_id,
        policy_version,
        payload_json,
        payload_digest,
        previous_chain_hash,
        // Placeholder, replaced below: the hash covers every other field.
        chain_hash: Digest::of_bytes(b""),
        supersedes_record_id,
        created_at,
        hash_algorithm: HASH_ALGORITHM.to_owned(),
    };
    record.chain_hash = chain_hash(&Fields::of(&record));
    Ok(record)
}

/// Recomputes a record's `chain_hash` after its fields were set by hand (tests and tools that
/// build chains without a store, for example to exercise a verifier).
pub fn reseal(record: &mut EvidenceRecord) {
    record.payload_digest = Digest::of_bytes(record.payload_json.as_bytes());
    record.chain_hash = chain_hash(&Fields::of(record));
}

/// A record's head.
pub fn head_of(record: &EvidenceRecord) -> ChainHead {
    ChainHead {
        chain_id: record.chain_id.clone(),
        sequence: record.sequence,
        chain_hash: record.chain_hash.clone(),
    }
}

/// The receipt of a stored record.
pub fn receipt_of(record: &EvidenceRecord) -> warden_contracts::AppendReceipt {
    warden_contracts::AppendReceipt {
        chain_id: record.chain_id.clone(),
        record_id: record.record_id.clone(),
        sequence: record.sequence,
        chain_hash: record.chain_hash.clone(),
    }
}

/// Parses a payload and re-canonicalizes it: `Some(value)` when `text` is canonical JSON.
pub(crate) fn parse_canonical(text: &str) -> Option<Value> {
    let value: Value = serde_json::from_str(text).ok()?;
    let again = canonical_json(&value).ok()?;
    (again == text).then_some(value)
}
