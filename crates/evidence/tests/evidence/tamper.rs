//! Tampering: a byte of any field of any record flipped, records reordered, deleted, inserted,
//! truncated, the tail replaced (detected against a checkpoint): verification fails with the
//! right code and record, through the library on records and on a real SQLite file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::Connection;
use warden_contracts::*;
use warden_evidence::*;

use crate::support::*;

/// Changes one byte: the last ASCII alphanumeric, to another of its class (a hex digit stays a
/// hex digit, so digests still parse and the failure is the interesting one).
pub fn flip(s: &str) -> String {
    let mut b = s.as_bytes().to_vec();
    let i = b.iter().rposition(u8::is_ascii_alphanumeric).unwrap();
    b[i] = match b[i] {
        b'0'..=b'8' => b[i] + 1,
        b'9' => b'0',
        b'a'..=b'e' => b[i] + 1,
        b'f' => b'a',
        c if c.is_ascii_lowercase() => c.to_ascii_uppercase(),
        c => c.to_ascii_lowercase(),
    };
    String::from_utf8(b).unwrap()
}

/// Changes one byte of a record id's chain prefix (its last digits are the sequence: changing
/// them would name another record).
pub fn flip_id(s: &str) -> String {
    let (head, tail) = s.split_at(5);
    format!("{}{tail}", flip(head))
}

/// The pristine standard chain in an SQLite file; returns (dir, path, records).
pub fn pristine(chain: &str) -> (tempfile::TempDir, PathBuf, Vec<EvidenceRecord>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evidence.db");
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    let records = block_on(async {
        let rec = standard_chain(store.clone(), chain).await;
        rec.records().await.unwrap()
    });
    drop(store);
    (dir, path, records)
}

/// A raw connection to the file, with the append-only triggers dropped (as an attacker would).
pub fn raw(path: &Path) -> Connection {
    let c = Connection::open(path).unwrap();
    c.execute_batch(
        "PRAGMA synchronous=OFF; DROP TRIGGER IF EXISTS records_no_update; DROP TRIGGER IF EXISTS records_no_delete;",
    )
    .unwrap();
    c
}

fn verify_file(path: &Path, chain: &str, expected: &Expected) -> Report {
    SqliteReader::open(path)
        .unwrap()
        .verify(&ChainId::new(chain).unwrap(), expected)
        .unwrap()
}

fn expect(report: &Report, code: VerificationFailure, record: Option<&RecordId>, what: &str) {
    assert!(!report.result.valid, "{what}: tampering not detected");
    assert_eq!(
        report.result.failure_code,
        Some(code),
        "{what}: {:?}",
        report.failure
    );
    assert_eq!(
        report.result.failed_record_id.as_ref(),
        record,
        "{what}: {:?}",
        report.failure
    );
}

#[test]
fn a_flipped_byte_in_any_field_of_any_stored_record_is_detected() {
    let (_dir, path, records) = pristine("tamper");
    let n = records.len();
    let head = Expected::Head(head_of(records.last().unwrap()));
    let db = raw(&path);
    let mut cases = 0;
    for (k, r) in records.iter().enumerate() {
        for field in COLUMNS {
            let key = (r.chain_id.as_str(), i64::try_from(r.sequence).unwrap());
            let (set, revert): (String, String) = match field {
                "sequence" => (
                    "sequence = sequence + 1000".to_owned(),
                    "sequence = sequence - 1000".to_owned(),
                ),
                "created_at" => (
                    "created_at = created_at + 1".into(),
                    "created_at = created_at - 1".into(),
                ),
                _ => {
                    let old: Option<String> = db
                        .query_row(
                            &format!(
                                "SELECT {field} FROM records WHERE chain_id = ?1 AND sequence = ?2"
                            ),
                            rusqlite::params![key.0, key.1],
                            |row| row.get(0),
                        )
                        .unwrap();
                    let new = match (&old, field) {
                        (Some(v), "record_id") => flip_id(v),
                        (Some(v), _) => flip(v),
                        (None, "previous_chain_hash") => Digest::of_bytes(b"x").to_string(),
                        (None, "supersedes_record_id") => records[0].record_id.to_string(),
                        (None, _) => "op-forged".into(),
                    };
                    let q = |v: &Option<String>| {
                        v.as_ref().map_or("NULL".to_owned(), |v| {
                            format!("'{}'", v.replace('\'', "''"))
                        })
                    };
                    (
                        format!("{field} = {}", q(&Some(new))),
                        format!("{field} = {}", q(&old)),
                    )
                }
            };
            let moved_seq = if field == "sequence" {
                key.1 + 1000
            } else {
                key.1
            };
            let moved_chain = if field == "chain_id" {
                flip(key.0)
            } else {
                key.0.to_owned()
            };
            db.execute(
                &format!("UPDATE records SET {set} WHERE chain_id = ?1 AND sequence = ?2"),
                rusqlite::params![key.0, key.1],
            )
            .unwrap();
            let what = format!("record {k} ({:?}) field {field}", r.record_type);
            let report = verify_file(&path, "tamper", &head);
            let id = |i: usize| Some(&records[i].record_id);
            use VerificationFailure as V;
            match field {
                "record_id" => {
                    let flipped = RecordId::new(flip_id(r.record_id.as_str())).unwrap();
                    expect(&report, V::ChainHashMismatch, Some(&flipped), &what);
                }
                "operation_id"
                | "policy_id"
                | "policy_version"
                | "chain_hash"
                | "supersedes_record_id"
                | "created_at" => expect(&report, V::ChainHashMismatch, id(k), &what),
                "record_type" => expect(&report, V::MalformedRecord, id(k), &what),
                "payload_json" | "payload_digest" => {
                    expect(&report, V::PayloadDigestMismatch, id(k), &what)
                }
                "hash_algorithm" => expect(&report, V::UnknownHashAlgorithm, id(k), &what),
                "previous_chain_hash" if k == 0 => expect(&report, V::InvalidGenesis, id(k), &what),
                "previous_chain_hash" => expect(&report, V::BrokenLink, id(k), &what),
                "sequence" if k == 0 => expect(&report, V::InvalidGenesis, id(1), &what),
                "sequence" => expect(
                    &report,
                    V::SequenceGap,
                    id(if k + 1 < n { k + 1 } else { k }),
                    &what,
                ),
                "chain_id" => {
                    // The record left its chain: a gap (or, for the last one, a chain shorter
                    // than the head kept elsewhere)...
                    if k == 0 {
                        expect(&report, V::InvalidGenesis, id(1), &what);
                    } else if k + 1 < n {
                        expect(&report, V::SequenceGap, id(k + 1), &what);
                    } else {
                        expect(&report, V::HeadMismatch, None, &what);
                    }
                    // ... and it fails in the chain it now claims.
                    let other = verify_file(&path, &moved_chain, &Expected::Nothing);
                    let code = if k == 0 {
                        V::ChainHashMismatch
                    } else {
                        V::InvalidGenesis
                    };
                    expect(&other, code, id(k), &what);
                }
                _ => unreachable!(),
            }
            db.execute(
                &format!("UPDATE records SET {revert} WHERE chain_id = ?1 AND sequence = ?2"),
                rusqlite::params![moved_chain, moved_seq],
            )
            .unwrap();
            cases += 1;
        }
        assert!(
            verify_file(&path, "tamper", &head).result.valid,
            "reverted after record {k}"
        );
    }
    assert_eq!(cases, n * COLUMNS.len());
}

#[test]
fn a_byte_that_breaks_utf8_or_a_column_type_is_a_malformed_record() {
    let (_dir, path, records) = pristine("bytes");
    let db = raw(&path);
    db.execute(
        "UPDATE records SET payload_json = CAST(X'7BFF7D' AS TEXT) WHERE sequence = 3",
        [],
    )
    .unwrap();
    let r = verify_file(&path, "bytes", &Expected::Nothing);
    expect(
        &r,
        VerificationFailure::MalformedRecord,
        Some(&records[3].record_id),
        "invalid utf-8",
    );
    db.execute(
        "UPDATE records SET payload_json = ?1, created_at = 'soon' WHERE sequence = 3",
        [&records[3].payload_json],
    )
    .unwrap();
    let r = verify_file(&path, "bytes", &Expected::Nothing);
    expect(
        &r,
        VerificationFailure::MalformedRecord,
        Some(&records[3].record_id),
        "text in an integer column",
    );
}

fn copy_of(path: &Path, dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::copy(path, &p).unwrap();
    p
}

#[test]
fn reordered_deleted_inserted_truncated_and_replaced_records_are_detected() {
    let (dir, path, records) = pristine("shape");
    let n = records.len() as i64;
    let last = head_of(records.last().unwrap());
    let checkpoint = Expected::Head(last.clone());
    use VerificationFailure as V;

    // Reorder: records 5 and 9 swap places.
    let p = copy_of(&path, dir.path(), "reorder.db");
    raw(&p)
        .execute_batch(
            "UPDATE records SET sequence = -1 WHERE sequence = 5;
             UPDATE records SET sequence = 5 WHERE sequence = 9;
             UPDATE records SET sequence = 9 WHERE sequence = -1;",
        )
        .unwrap();
    expect(
        &verify_file(&p, "shape", &Expected::Nothing),
        V::BrokenLink,
        Some(&records[9].record_id),
        "reorder",
    );

    // Delete a record in the middle.
    let p = copy_of(&path, dir.path(), "delete.db");
    raw(&p)
        .execute("DELETE FROM records WHERE sequence = 7", [])
        .unwrap();
    expect(
        &verify_file(&p, "shape", &Expected::Nothing),
        V::SequenceGap,
        Some(&records[8].record_id),
        "delete",
    );

    // Insert a forged record (correctly hashed onto record 6) and renumber the rest.
    let p = copy_of(&path, dir.path(), "insert.db");
    let mut forged = records[7].clone();
    forged.created_at = Timestamp(1);
    forged.previous_chain_hash = Some(records[6].chain_hash.clone());
    reseal(&mut forged);
    let db = raw(&p);
    db.execute_batch(
        "UPDATE records SET sequence = -sequence - 1 WHERE sequence >= 7;
         UPDATE records SET sequence = -sequence WHERE sequence < 0;",
    )
    .unwrap();
    db.execute(
        "UPDATE records SET record_id = record_id || 'x' WHERE sequence = 8",
        [],
    )
    .unwrap();
    insert(&db, &forged);
    expect(
        &verify_file(&p, "shape", &Expected::Nothing),
        V::BrokenLink,
        Some(&RecordId::new(format!("{}x", records[7].record_id)).unwrap()),
        "insert",
    );

    // Truncate: the last three records removed. Consistent on its own; the checkpoint sees it.
    let p = copy_of(&path, dir.path(), "truncate.db");
    raw(&p)
        .execute("DELETE FROM records WHERE sequence >= ?1", [n - 3])
        .unwrap();
    assert!(verify_file(&p, "shape", &Expected::Nothing).result.valid);
    expect(
        &verify_file(&p, "shape", &checkpoint),
        V::HeadMismatch,
        None,
        "truncate",
    );

    // Replace the tail: the last three records forged consistently. Only the checkpoint sees it.
    let p = copy_of(&path, dir.path(), "tail.db");
    let db = raw(&p);
    db.execute("DELETE FROM records WHERE sequence >= ?1", [n - 3])
        .unwrap();
    let mut prev = records[records.len() - 4].chain_hash.clone();
    for r in &records[records.len() - 3..] {
        let mut f = r.clone();
        f.created_at = Timestamp(f.created_at.0 + 60_000);
        f.previous_chain_hash = Some(prev.clone());
        reseal(&mut f);
        prev = f.chain_hash.clone();
        insert(&db, &f);
    }
    assert!(verify_file(&p, "shape", &Expected::Nothing).result.valid);
    expect(
        &verify_file(&p, "shape", &checkpoint),
        V::HeadMismatch,
        Some(&records.last().unwrap().record_id),
        "replaced tail",
    );
}

pub fn insert(db: &Connection, r: &EvidenceRecord) {
    let f = Fields::of(r);
    db.execute(
        "INSERT INTO records (record_id, record_type, chain_id, operation_id, sequence, policy_id, policy_version, payload_json, payload_digest, previous_chain_hash, chain_hash, supersedes_record_id, created_at, hash_algorithm) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        rusqlite::params![
            f.record_id, f.record_type, f.chain_id, f.operation_id, f.sequence as i64, f.policy_id,
            f.policy_version, f.payload_json, f.payload_digest, f.previous_chain_hash,
            r.chain_hash.as_str(), f.supersedes_record_id, f.created_at as i64, f.hash_algorithm
        ],
    )
    .unwrap();
}

#[test]
fn mutations_of_records_in_memory_are_detected_too() {
    let store = Arc::new(MemoryStore::new());
    let rec = block_on(standard_chain(store.clone(), "mem"));
    let records = block_on(rec.records()).unwrap();
    let chain = ChainId::new("mem").unwrap();
    let head = Expected::Head(head_of(records.last().unwrap()));
    let run = |rs: Vec<EvidenceRecord>| {
        verify_records(Family::Evidence, &chain, rs.into_iter().map(Ok), &head)
    };
    use VerificationFailure as V;
    for k in 0..records.len() {
        let id = Some(&records[k].record_id);
        let mut m = records.clone();
        m[k].created_at = Timestamp(m[k].created_at.0 + 1);
        expect(&run(m), V::ChainHashMismatch, id, "created_at");
        let mut m = records.clone();
        m[k].chain_id = ChainId::new("elsewhere").unwrap();
        expect(&run(m), V::MalformedRecord, id, "chain_id");
        let mut m = records.clone();
        m[k].payload_json.push(' ');
        expect(&run(m), V::PayloadDigestMismatch, id, "payload_json");
        let mut m = records.clone();
        m[k].hash_algorithm = "sha1".into();
        expect(&run(m), V::UnknownHashAlgorithm, id, "hash_algorithm");
        let mut m = records.clone();
        m[k].sequence += 1;
        expect(
            &run(m),
            if k == 0 {
                V::InvalidGenesis
            } else {
                V::SequenceGap
            },
            id,
            "sequence",
        );
    }
    // Reorder, delete, truncate.
    let mut m = records.clone();
    m.swap(4, 5);
    expect(&run(m), V::SequenceGap, Some(&records[5].record_id), "swap");
    let mut m = records.clone();
    m.remove(4);
    expect(
        &run(m),
        V::SequenceGap,
        Some(&records[5].record_id),
        "remove",
    );
    let mut m = records.clone();
    m.truncate(records.len() - 1);
    expect(&run(m), V::HeadMismatch, None, "truncate");
}
