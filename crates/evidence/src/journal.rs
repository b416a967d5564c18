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
    ChainHead, ChainId, Digest, EvidenceError, OperationId, ReasonCode, RecordId, SessionId,
};

use crate::payload::{Label, RuleText};
use crate::record::{self, AppendFields, Family, Prepared, Record, RecordKind};
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

impl RecordKind for JournalRecordType {
    const FAMILY: Family = Family::Journal;
    fn name(self) -> &'static str {
        self.as_str()
    }
    fn from_name(name: &str) -> Option<Self> {
        Self::parse(name)
    }
}

/// One journal record: the fields of an evidence record, with a journal record type
/// (`supersedes_record_id` is always absent: journals are not corrected).
pub type JournalRecord = Record<JournalRecordType>;

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

impl JournalAppend {
    pub(crate) fn fields(&self) -> AppendFields<'_> {
        AppendFields {
            family: Family::Journal,
            record_type: self.record_type.as_str(),
            chain_id: &self.chain_id,
            operation_id: self.operation_id.as_ref(),
            expected_sequence: self.expected_sequence,
            policy_id: &self.policy_id,
            policy_version: &self.policy_version,
            supersedes_record_id: None,
            created_at: self.created_at,
        }
    }
}

/// Checks a journal append's payload against its type's schema and canonicalizes it.
pub(crate) fn prepare_journal(entry: &JournalAppend) -> Result<Prepared, EvidenceError> {
    validate(entry.record_type, &entry.payload)
        .map_err(|e| record::invalid(format!("{} payload: {e}", entry.record_type.as_str())))?;
    Prepared::of_value(&entry.fields(), &entry.payload)
}

/// Builds the journal record an append becomes on `head`.
pub fn seal_journal(
    entry: &JournalAppend,
    head: Option<&ChainHead>,
) -> Result<JournalRecord, EvidenceError> {
    let prepared = prepare_journal(entry);
    let a = entry.fields();
    let seal = record::seal_on(&a, prepared.as_ref(), head)?;
    Ok(seal.into_record(&a, entry.record_type, prepared?))
}
