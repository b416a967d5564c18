//! Governed evidence: append-only, hash-chained (blake3) records with receipts, verification and certificates; SQLite is the embedded default store.
//!
//! **Invariant:** a chain only grows: append accepts the next sequence on the current head, nothing is updated or deleted.
//!
//! **Must never:** decide policy: it stores a policy snapshot's bytes and digest and never interprets them.
#![forbid(unsafe_code)]
