//! The JSON Schemas of the public value types, generated with `schemars`.
//!
//! `cargo xtask schemas` writes each to `docs/schemas/<name>.schema.json`, and CI fails when a
//! checked-in schema differs from what the types generate.

use schemars::{JsonSchema, Schema, SchemaGenerator};

use crate::*;

/// One named schema.
#[derive(Debug, Clone)]
pub struct NamedSchema {
    /// The type's name; the file is `<name>.schema.json`.
    pub name: &'static str,
    /// The schema (draft 2020-12).
    pub schema: Schema,
}

fn named<T: JsonSchema>(name: &'static str) -> NamedSchema {
    NamedSchema {
        name,
        schema: SchemaGenerator::default().into_root_schema_for::<T>(),
    }
}

/// Every public value type's schema, sorted by name.
///
/// ```
/// let all = warden_contracts::schema::all();
/// assert!(all.iter().any(|s| s.name == "ExecutionRequest"));
/// ```
pub fn all() -> Vec<NamedSchema> {
    let mut v = vec![
        named::<ActionRef>("ActionRef"),
        named::<ActionDescriptor>("ActionDescriptor"),
        named::<ActionSource>("ActionSource"),
        named::<Hints>("Hints"),
        named::<EffectiveHints>("EffectiveHints"),
        named::<ExecutionScopeRef>("ExecutionScopeRef"),
        named::<PrincipalRef>("PrincipalRef"),
        named::<PrincipalKind>("PrincipalKind"),
        named::<TenantRef>("TenantRef"),
        named::<PolicySnapshotRef>("PolicySnapshotRef"),
        named::<BackendRef>("BackendRef"),
        named::<EvidenceRef>("EvidenceRef"),
        named::<ExecutionRequest>("ExecutionRequest"),
        named::<ExecutionContext>("ExecutionContext"),
        named::<Disposition>("Disposition"),
        named::<ReasonCode>("ReasonCode"),
        named::<DecisionReason>("DecisionReason"),
        named::<AdmissionDecision>("AdmissionDecision"),
        named::<ApprovalRequest>("ApprovalRequest"),
        named::<ApprovalReceipt>("ApprovalReceipt"),
        named::<ReceiptMismatch>("ReceiptMismatch"),
        named::<ExecutionOutcome>("ExecutionOutcome"),
        named::<RuntimeProfile>("RuntimeProfile"),
        named::<Failure>("Failure"),
        named::<Digest>("Digest"),
        named::<Timestamp>("Timestamp"),
        named::<RequestId>("RequestId"),
        named::<ContextId>("ContextId"),
        named::<ScopeId>("ScopeId"),
        named::<RunId>("RunId"),
        named::<AttemptId>("AttemptId"),
        named::<SessionId>("SessionId"),
        named::<PrincipalId>("PrincipalId"),
        named::<TenantId>("TenantId"),
        named::<ApprovalId>("ApprovalId"),
        named::<OperationId>("OperationId"),
        named::<ChainId>("ChainId"),
        named::<RecordId>("RecordId"),
        named::<Redacted<String>>("Redacted"),
        named::<SecretRef>("SecretRef"),
        named::<RecordType>("RecordType"),
        named::<EvidenceRecord>("EvidenceRecord"),
        named::<EvidenceAppend>("EvidenceAppend"),
        named::<AppendReceipt>("AppendReceipt"),
        named::<ChainHead>("ChainHead"),
        named::<VerificationFailure>("VerificationFailure"),
        named::<VerificationResult>("VerificationResult"),
        named::<Capability>("Capability"),
        named::<CapabilityStatus>("CapabilityStatus"),
        named::<CapabilityEntry>("CapabilityEntry"),
        named::<CapabilityReport>("CapabilityReport"),
        named::<ProcessSpec>("ProcessSpec"),
        named::<ProcessOutput>("ProcessOutput"),
        named::<Stage>("Stage"),
        named::<DecisionEvent>("DecisionEvent"),
        named::<StageStatus>("StageStatus"),
        named::<StageEvent>("StageEvent"),
        named::<PolicyAnswer>("PolicyAnswer"),
        named::<ReviewVerdict>("ReviewVerdict"),
        named::<EvidenceError>("EvidenceError"),
        named::<BackendError>("BackendError"),
    ];
    v.sort_by_key(|s| s.name);
    v
}
