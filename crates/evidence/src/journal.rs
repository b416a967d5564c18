//! The journal: a second record family, chained exactly like evidence but stored beside it
//! (its own table) and never certified.
//!
//! It holds what Warden decided for a provider that runs the call itself (the Claude Code hook:
//! the verdict) and what the provider reports it ran, labelled as the provider's observation.
//! Neither proves that Warden admitted or ran anything, so a journal chain can never satisfy a
//! governed-evidence assertion: its record types are not evidence types, its record ids come
//! from another domain, and [`crate::certify`] only reads the `records` family.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warden_contracts::{
    ChainHead, ChainId, Digest, EvidenceError, HASH_ALGORITHM, OperationId, ReasonCode, RecordId,
    SessionId,
};

use crate::payload::{Label, RuleText};
use crate::record::{self, Family, Fields};
use crate::verify::{ChainRecord, ChainTracker, FailureDetail};

/// The journal's record types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JournalRecordType {
    /// Warden's verdict for a provider-executed call (a hook answer).
    HookVerdict,
    /// What the provider reports it ran: the provider's observation, not Warden's.
    ProviderObservation,
}

impl JournalRecordType {
    /// The serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HookVerdict => "hook_verdict",
            Self::ProviderObservation => "provider_observation",
        }
    }

    /// Parses a serialized name.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::HookVerdict, Self::ProviderObservation]
            .into_iter()
            .find(|t| t.as_str() == s)
    }
}

/// One journal record: the same fields as an evidence record, with a journal record type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalRecord {
    /// The record's id.
    pub record_id: RecordId,
    /// Its type.
    pub record_type: JournalRecordType,
    /// The journal chain.
    pub chain_id: ChainId,
    /// The provider's call this concerns, if it has an id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<OperationId>,
    /// Position in the chain, from 0.
    pub sequence: u64,
    /// The policy in force.
    pub policy_id: String,
    /// Its version.
    pub policy_version: String,
    /// The payload's canonical JSON text.
    pub payload_json: String,
    /// Digest of `payload_json`.
    pub payload_digest: Digest,
    /// The previous record's chain hash; absent only at genesis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_chain_hash: Option<Digest>,
    /// The hash over every other field.
    pub chain_hash: Digest,
    /// Always absent: journals are not corrected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes_record_id: Option<RecordId>,
    /// When it was appended.
    pub created_at: warden_contracts::Timestamp,
    /// `blake3-v1`.
    pub hash_algorithm: String,
}

impl JournalRecord {
    /// The borrowed fields the chain hash covers.
    pub fn fields(&self) -> Fields<'_> {
        Fields {
            record_id: self.record_id.as_str(),
            record_type: self.record_type.as_str(),
            chain_id: self.chain_id.as_str(),
            operation_id: self.operation_id.as_ref().map(OperationId::as_str),
            sequence: self.sequence,
            policy_id: &self.policy_id,
            policy_version: &self.policy_version,
            payload_json: &self.payload_json,
            payload_digest: self.payload_digest.as_str(),
            previous_chain_hash: self.previous_chain_hash.as_ref().map(Digest::as_str),
            supersedes_record_id: self.supersedes_record_id.as_ref().map(RecordId::as_str),
            created_at: self.created_at.0,
            hash_algorithm: &self.hash_algorithm,
        }
    }
}

impl ChainRecord for JournalRecord {
    fn push_to(&self, tracker: &mut ChainTracker) -> Result<(), FailureDetail> {
        let f = self.fields();
        tracker.check_fields(&f, &self.chain_hash)?;
        let parsed: Result<(), String> = serde_json::from_str::<Value>(&self.payload_json)
            .map_err(|e| e.to_string())
            .and_then(|v| validate(self.record_type, &v));
        parsed.map_err(|e| FailureDetail {
            code: warden_contracts::VerificationFailure::InvalidPayload,
            record_id: Some(self.record_id.clone()),
            sequence: Some(self.sequence),
            detail: format!("{} payload: {e}", self.record_type.as_str()),
        })?;
        tracker.push_fields(&f, &self.chain_hash)
    }
    fn id(&self) -> &RecordId {
        &self.record_id
    }
    fn seq(&self) -> u64 {
        self.sequence
    }
    fn hash(&self) -> &Digest {
        &self.chain_hash
    }
}

/// What a journal caller appends.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalAppend {
    /// The journal chain (for example one per provider session).
    pub chain_id: ChainId,
    /// The record's type.
    pub record_type: JournalRecordType,
    /// The provider's call id, if it has one.
    pub operation_id: Option<OperationId>,
    /// The next sequence on the chain's head.
    pub expected_sequence: u64,
    /// The policy in force.
    pub policy_id: String,
    /// Its version.
    pub policy_version: String,
    /// The payload ([`HookVerdict`] or [`ProviderObservation`]).
    pub payload: Value,
    /// When.
    pub created_at: warden_contracts::Timestamp,
}

/// What Warden answered a provider's hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookDecision {
    /// Allowed.
    Allow,
    /// Asked the user (the provider's prompt).
    Ask,
    /// Denied.
    Deny,
}

/// `hook_verdict`: Warden's verdict for a provider-executed call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookVerdict {
    /// The provider (`claude-code`).
    pub provider: Label,
    /// The hook event (`PreToolUse`).
    pub event: Label,
    /// The provider's session, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// The tool the provider asked about.
    pub tool: Label,
    /// Digest of the arguments' canonical JSON; never the arguments.
    pub arguments_digest: Digest,
    /// The verdict.
    pub decision: HookDecision,
    /// Its reason code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_code: Option<ReasonCode>,
    /// The deciding rule as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<RuleText>,
    /// The rule's source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Label>,
    /// The policy snapshot that decided.
    pub policy_digest: Digest,
}

/// Who reported an observation: only ever the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reporter {
    /// The provider (its stream or its post-call hook): an observation, not proof.
    Provider,
}

/// `provider_observation`: what the provider reports it ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderObservation {
    /// The provider.
    pub provider: Label,
    /// Who reports it: always `provider`.
    pub reported_by: Reporter,
    /// The provider's event id, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_event_id: Option<Label>,
    /// The tool the provider says ran.
    pub tool: Label,
    /// Digest of the reported arguments, if reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_digest: Option<Digest>,
    /// Digest of the reported result, if reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_digest: Option<Digest>,
    /// The reported status (`succeeded`, `failed`, …).
    pub status: Label,
}

fn validate(t: JournalRecordType, v: &Value) -> Result<(), String> {
    match t {
        JournalRecordType::HookVerdict => HookVerdict::deserialize(v).map(|_| ()),
        JournalRecordType::ProviderObservation => ProviderObservation::deserialize(v).map(|_| ()),
    }
    .map_err(|e| e.to_string())
}

/// Builds the journal record an append becomes on `head`.
pub fn seal_journal(
    entry: &JournalAppend,
    head: Option<&ChainHead>,
) -> Result<JournalRecord, EvidenceError> {
    let next = head.map_or(0, |h| h.sequence + 1);
    if entry.expected_sequence != next {
        return Err(EvidenceError::SequenceConflict {
            chain_id: entry.chain_id.clone(),
            expected: next,
            got: entry.expected_sequence,
        });
    }
    record::check_append_fields(&entry.policy_id, &entry.policy_version, entry.created_at)?;
    validate(entry.record_type, &entry.payload)
        .map_err(|e| record::invalid(format!("{} payload: {e}", entry.record_type.as_str())))?;
    let payload_json =
        record::canonical_json(&entry.payload).map_err(|e| record::invalid(e.to_string()))?;
    let mut r = JournalRecord {
        record_id: record::record_id_for(Family::Journal, &entry.chain_id, next)?,
        record_type: entry.record_type,
        chain_id: entry.chain_id.clone(),
        operation_id: entry.operation_id.clone(),
        sequence: next,
        policy_id: entry.policy_id.clone(),
        policy_version: entry.policy_version.clone(),
        payload_digest: Digest::of_bytes(payload_json.as_bytes()),
        payload_json,
        previous_chain_hash: head.map(|h| h.chain_hash.clone()),
        chain_hash: Digest::of_bytes(b""),
        supersedes_record_id: None,
        created_at: entry.created_at,
        hash_algorithm: HASH_ALGORITHM.to_owned(),
    };
    r.chain_hash = record::chain_hash(&r.fields());
    Ok(r)
}
