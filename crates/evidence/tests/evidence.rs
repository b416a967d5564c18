//! warden-evidence's one integration-test binary: records and hashing, the conformance suite
//! against both backends, governed execution (one terminal per operation, evidence before the
//! call), certificates, checkpoints, tampering (library and SQLite file), projection, crash
//! injection (a child process SIGKILLed at every fault point), the journal, SQLite specifics,
//! first use of one new store by many writers at once, and properties.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    clippy::panic,
    missing_docs,
    unreachable_pub
)]

#[path = "evidence/support.rs"]
mod support;

#[path = "../benches/support/workload.rs"]
mod workload;

#[path = "evidence/records.rs"]
mod records;

#[path = "evidence/conformance.rs"]
mod conformance;

#[path = "evidence/governance.rs"]
mod governance;

#[path = "evidence/certificate.rs"]
mod certificate;

#[path = "evidence/checkpoint.rs"]
mod checkpoint;

#[path = "evidence/tamper.rs"]
mod tamper;

#[path = "evidence/projection.rs"]
mod projection;

#[path = "evidence/crash.rs"]
mod crash;

#[path = "evidence/sqlite.rs"]
mod sqlite;

#[path = "evidence/props.rs"]
mod props;

#[path = "evidence/first_use.rs"]
mod first_use;
