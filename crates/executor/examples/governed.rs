//! A governed execution, verified and certified: a `Runtime` that writes hash-chained evidence
//! to a SQLite store, runs a few calls (one of them denied), and closes its task boundary. The
//! closing receipt's chain hash is the head to keep elsewhere; the store is then reopened
//! read-only, as an auditor would (`warden evidence verify` / `certify` do the same), the chain
//! is verified against that head, and a certificate is minted for the boundary.
//!
//! Run it (it exits non-zero if the chain does not verify or is not certified FULL):
//!
//! ```text
//! cargo run -p warden-executor --example governed
//! ```
//!
//! The store lives in a temporary folder, removed at exit.
#![forbid(unsafe_code)]

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use warden_contracts::{ActionDescriptor, ActionSource, ChainHead, ChainId};
use warden_evidence::{
    CertificateRefusal, Clock, Expected, Grade, SqliteReader, SqliteStore, SystemClock,
    certify_records,
};
use warden_executor::{Governed, InvocationToken, Registry, Runtime, Tool, ToolError};
use warden_policy::PolicySnapshot;

const POLICY: &str = r#"
default = "deny"
allow = ["read_note", "append_note"]
"#;

/// The chain, and the task boundary it records.
const CHAIN: &str = "task-1";

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("evidence.db");
    let policy = Arc::new(PolicySnapshot::from_toml(POLICY, "/repo")?);

    // Governed: no call runs before its start is durable in the store, and every started
    // operation gets exactly one terminal record.
    let store = Arc::new(SqliteStore::open(&path)?);
    let mut tools = Registry::new();
    for name in ["read_note", "append_note", "delete_note"] {
        tools.register(Arc::new(Note::new(name)?))?;
    }
    let runtime = Runtime::builder(policy)
        .tools(tools)
        .governed(Governed::new(store, CHAIN))
        .build()
        .await?;
    for (tool, arguments) in [
        ("read_note", json!({"id": 1})),
        ("append_note", json!({"id": 1, "text": "shipped"})),
        ("delete_note", json!({"id": 1})),
    ] {
        let outcome = runtime.execute(tool, arguments).await;
        println!(
            "{tool}: {} ({} evidence records)",
            outcome.status(),
            outcome.evidence().len()
        );
        if outcome.is_success() == (tool == "delete_note") {
            return Err(format!("{tool}: unexpected {outcome:?}").into());
        }
    }

    // Closing the boundary appends `task_closed`; its receipt is the head to keep elsewhere
    // (here, a variable; in production, another system, or a signed checkpoint).
    let closed = runtime
        .close()
        .await?
        .ok_or("the runtime is not governed")?;
    let head = ChainHead {
        chain_id: closed.chain_id,
        sequence: closed.sequence,
        chain_hash: closed.chain_hash,
    };
    println!("closed: head {} {}", head.sequence, head.chain_hash);
    // Dropping the runtime drops the last handle on the store: it flushes and closes.
    drop(runtime);

    // The auditor's side: read-only, against the head kept elsewhere.
    let reader = SqliteReader::open(&path)?;
    let chain = ChainId::new(CHAIN)?;
    let report = reader.verify(&chain, &Expected::Head(head.clone()))?;
    if !report.result.valid {
        return Err(format!("the chain does not verify: {:?}", report.failure).into());
    }
    println!(
        "verified: {} records up to the expected head",
        report.result.checked_records
    );

    let records = reader.read(&chain, None, usize::MAX)?;
    let certificate = certify_records(&chain, &records, &head, SystemClock.now())?;
    let summary = &certificate.gate_summary;
    println!(
        "certificate {}: grade {}, {} operations, {} gate evaluations, {} hard denies, policy {}",
        certificate.certificate_id,
        serde_json::to_value(certificate.grade)?,
        summary.operations,
        summary.gates_evaluated,
        summary.hard_denies,
        certificate.policy_digest
    );
    if certificate.grade != Grade::Full {
        return Err("expected a FULL certificate: no exception was granted".into());
    }

    // A head the chain does not end at (here, the one before closing) is refused: a
    // certificate covers exactly the boundary that was kept.
    let earlier = records
        .iter()
        .rev()
        .nth(1)
        .map(warden_evidence::head_of)
        .ok_or("the chain is too short")?;
    match certify_records(&chain, &records, &earlier, SystemClock.now()) {
        Err(CertificateRefusal::HeadMismatch(why)) => println!("an earlier head is refused: {why}"),
        other => return Err(format!("an earlier head was not refused: {other:?}").into()),
    }
    Ok(())
}

/// A tool built into this program: answers its arguments back.
struct Note(ActionDescriptor);

impl Note {
    fn new(name: &str) -> Result<Self, warden_contracts::ContractError> {
        Ok(Self(ActionDescriptor::new(
            name,
            "1",
            ActionSource::Builtin {},
        )?))
    }
}

#[async_trait]
impl Tool for Note {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.0
    }

    async fn invoke(&self, _: InvocationToken, arguments: Value) -> Result<Value, ToolError> {
        Ok(json!({ "note": arguments }))
    }
}
