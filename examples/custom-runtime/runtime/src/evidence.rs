//! After the turn: the evidence chain verified against the head the runtime closed it at (a
//! head kept apart from the store), then certified: what `warden evidence verify
//! --expected-head` and `warden evidence certify` do, here through the library. The store is
//! opened read-only.

use std::path::Path;

use warden_contracts::{AppendReceipt, ChainHead};
use warden_evidence::{Expected, Grade, SqliteReader, certify_records};
use warden_executor::{Clock, SystemClock};

use crate::script::Turn;

/// Verifies and certifies the chain `head` closed, and checks that the certificate agrees with
/// what the turn saw. `Ok(false)` when anything does not hold; `Err` when the store cannot be
/// read.
pub fn verify_and_certify(
    store: &Path,
    head: &AppendReceipt,
    turn: &Turn,
) -> Result<bool, Box<dyn std::error::Error>> {
    println!("\nevidence:");
    let reader = SqliteReader::open(store)?;
    let chain = head.chain_id.clone();
    let expected = ChainHead {
        chain_id: chain.clone(),
        sequence: head.sequence,
        chain_hash: head.chain_hash.clone(),
    };
    let mut ok = true;

    let report = reader.verify(&chain, &Expected::Head(expected.clone()))?;
    match &report.failure {
        None => println!(
            "  ok    chain {chain}: {} records, head {} {}",
            report.result.checked_records, expected.sequence, expected.chain_hash
        ),
        Some(f) => {
            println!(
                "  FAIL  chain {chain}: {} at sequence {:?}: {}",
                warden_evidence::failure_code_str(f.code),
                f.sequence,
                f.detail
            );
            ok = false;
        }
    }

    let records = reader.read(&chain, None, usize::MAX)?;
    match certify_records(&chain, &records, &expected, SystemClock.now()) {
        Ok(cert) => {
            let g = &cert.gate_summary;
            println!(
                "  ok    certificate {}: grade {:?}, policy {}, {} operations ({} completed, {} denied), {} hard denies",
                cert.certificate_id,
                cert.grade,
                cert.policy_digest,
                g.operations,
                g.terminals.completed,
                g.terminals.denied,
                g.hard_denies
            );
            if cert.grade != Grade::Full {
                println!("  FAIL  the certificate is not FULL");
                ok = false;
            }
            if g.terminals.completed != turn.succeeded {
                println!(
                    "  FAIL  the certificate counts {} completed calls, the turn saw {}",
                    g.terminals.completed, turn.succeeded
                );
                ok = false;
            }
        }
        Err(refusal) => {
            println!("  FAIL  certification refused: {refusal}");
            ok = false;
        }
    }
    Ok(ok)
}
