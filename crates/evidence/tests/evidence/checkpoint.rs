//! Checkpoints: a head signed with ed25519, keys from files (hex seed or PKCS#8 PEM).

use std::sync::Arc;

use warden_contracts::*;
use warden_evidence::*;

use crate::support::*;

pub const SEED_HEX: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";

fn b64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The PKCS#8 v1 PEM of an ed25519 seed (what `openssl genpkey -algorithm ed25519` writes).
pub fn pkcs8_pem(seed_hex: &str) -> String {
    let mut der = unhex("302e020100300506032b657004220420");
    der.extend(unhex(seed_hex));
    format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        b64(&der)
    )
}

fn head() -> ChainHead {
    ChainHead {
        chain_id: ChainId::new("c").unwrap(),
        sequence: 7,
        chain_hash: Digest::of_bytes(b"head"),
    }
}

#[test]
fn a_checkpoint_signs_a_head_and_detects_any_change() {
    let dir = tempfile::tempdir().unwrap();
    let hex_key = dir.path().join("key.hex");
    std::fs::write(&hex_key, SEED_HEX).unwrap();
    let pem_key = dir.path().join("key.pem");
    std::fs::write(&pem_key, pkcs8_pem(SEED_HEX)).unwrap();
    let a = read_signing_key(&hex_key).unwrap();
    let b = read_signing_key(&pem_key).unwrap();
    assert_eq!(
        a.verifying_key(),
        b.verifying_key(),
        "both formats read the same key"
    );
    // RFC 8032 test 1's public key.
    assert_eq!(
        a.verifying_key().to_hex(),
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    );
    let cp = Checkpoint::sign(&head(), Timestamp(5), &a);
    cp.verify_signature(None).unwrap();
    cp.verify_signature(Some(&a.verifying_key())).unwrap();
    assert_eq!(cp.head(), head());
    // Round trip through its file.
    let file = dir.path().join("cp.json");
    std::fs::write(&file, serde_json::to_string_pretty(&cp).unwrap()).unwrap();
    let back = Checkpoint::read(&file).unwrap();
    assert_eq!(back, cp);
    // Any changed field breaks the signature.
    let mut t = cp.clone();
    t.sequence = 6;
    assert!(t.verify_signature(None).is_err());
    let mut t = cp.clone();
    t.chain_hash = Digest::of_bytes(b"other");
    assert!(t.verify_signature(None).is_err());
    let mut t = cp.clone();
    t.created_at = Timestamp(6);
    assert!(t.verify_signature(None).is_err());
    // Another key: the checkpoint re-signed by an attacker verifies only against its own key.
    let other = SigningKey::from_seed(&[7; 32]);
    let forged = Checkpoint::sign(&head(), Timestamp(5), &other);
    forged.verify_signature(None).unwrap();
    assert!(forged.verify_signature(Some(&a.verifying_key())).is_err());
    // Public key files: hex.
    let pubf = dir.path().join("key.pub");
    std::fs::write(&pubf, a.verifying_key().to_hex()).unwrap();
    assert_eq!(read_verifying_key(&pubf).unwrap(), a.verifying_key());
    std::fs::write(&pubf, "nonsense").unwrap();
    assert!(read_verifying_key(&pubf).is_err());
    assert!(read_signing_key(&dir.path().join("missing")).is_err());
}

#[test]
fn a_checkpoint_proves_nothing_before_it_changed() {
    // A checkpoint taken mid-chain; later records may be added, earlier ones never changed.
    let store = Arc::new(MemoryStore::new());
    let rec = block_on(standard_chain(store.clone(), "cp"));
    let records = block_on(rec.records()).unwrap();
    let key = SigningKey::from_seed(&[1; 32]);
    let cp = Checkpoint::sign(&head_of(&records[12]), Timestamp(9), &key);
    let chain = ChainId::new("cp").unwrap();
    let ok = verify_records(
        Family::Evidence,
        &chain,
        records.iter().cloned().map(Ok),
        &Expected::Head(cp.head()),
    );
    assert!(ok.result.valid);
    // Replace the tail from record 10 on with a consistent forgery: only the checkpoint sees it.
    let mut forged = records[..10].to_vec();
    let mut prev = forged.last().map(|r| r.chain_hash.clone());
    for r in &records[10..] {
        let mut f = r.clone();
        f.created_at = Timestamp(f.created_at.0 + 1_000);
        f.previous_chain_hash = prev.clone();
        reseal(&mut f);
        prev = Some(f.chain_hash.clone());
        forged.push(f);
    }
    let plain = verify_records(
        Family::Evidence,
        &chain,
        forged.iter().cloned().map(Ok),
        &Expected::Nothing,
    );
    assert!(
        plain.result.valid,
        "a consistent forgery verifies without a head kept elsewhere"
    );
    let against = verify_records(
        Family::Evidence,
        &chain,
        forged.iter().cloned().map(Ok),
        &Expected::Head(cp.head()),
    );
    assert_eq!(
        against.result.failure_code,
        Some(VerificationFailure::HeadMismatch)
    );
    assert_eq!(
        against.result.failed_record_id.as_ref(),
        Some(&forged[12].record_id)
    );
}
