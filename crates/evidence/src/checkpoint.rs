//! Checkpoints: a chain head (chain id, sequence, hash, time) signed with ed25519, so a head can
//! be kept elsewhere and later prove that no record at or before it was changed, removed or
//! reordered.
//!
//! The signature covers the canonical JSON of every field but `signature`. Keys are read from
//! files: a signing key as PKCS#8 PEM (`openssl genpkey -algorithm ed25519`) or 64 hex digits
//! (the 32-byte seed); a verifying key as SPKI PEM (`openssl pkey -pubout`) or 64 hex digits.
//! The checkpoint carries its public key; verify against a key you trust (`--public-key`), or
//! the signature only proves the checkpoint is intact, not who made it.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::json;
use warden_contracts::{ChainHead, ChainId, Digest, Timestamp, canonical};

use crate::error::Error;

/// The checkpoint format tag.
pub const CHECKPOINT_FORMAT: &str = "warden-checkpoint-v1";

pub use warden_contracts::keys::{SigningKey, VerifyingKey};
use warden_contracts::keys::{hex, unhex};

fn read_text(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| Error::Key {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// Reads a signing key: PKCS#8 PEM or a 64-hex-digit seed.
pub fn read_signing_key(path: &Path) -> Result<SigningKey, Error> {
    SigningKey::parse(&read_text(path)?).map_err(|e| Error::Key {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// Reads a verifying key: SPKI PEM or 64 hex digits.
pub fn read_verifying_key(path: &Path) -> Result<VerifyingKey, Error> {
    VerifyingKey::parse(&read_text(path)?).map_err(|e| Error::Key {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// A signed chain head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// `warden-checkpoint-v1`.
    pub format: String,
    /// The chain.
    pub chain_id: ChainId,
    /// The head's sequence.
    pub sequence: u64,
    /// The head's chain hash.
    pub chain_hash: Digest,
    /// When the checkpoint was taken.
    pub created_at: Timestamp,
    /// The signer's public key (64 hex digits).
    pub public_key: String,
    /// The ed25519 signature over the other fields' canonical JSON (128 hex digits).
    pub signature: String,
}

impl Checkpoint {
    /// Signs `head`.
    pub fn sign(head: &ChainHead, created_at: Timestamp, key: &SigningKey) -> Self {
        let mut c = Self {
            format: CHECKPOINT_FORMAT.into(),
            chain_id: head.chain_id.clone(),
            sequence: head.sequence,
            chain_hash: head.chain_hash.clone(),
            created_at,
            public_key: key.verifying_key().to_hex(),
            signature: String::new(),
        };
        c.signature = hex(&key.sign(c.signed_text().as_bytes()));
        c
    }

    /// The text the signature covers: canonical JSON of every field but `signature`.
    pub fn signed_text(&self) -> String {
        let v = json!({
            "format": self.format,
            "chain_id": self.chain_id.as_str(),
            "sequence": self.sequence,
            "chain_hash": self.chain_hash.as_str(),
            "created_at": self.created_at.0,
            "public_key": self.public_key,
        });
        canonical::to_canonical_string(&v).unwrap_or_default()
    }

    /// Checks the signature, against `trusted` when given (the checkpoint's own key must then be
    /// that key), otherwise against the key the checkpoint carries.
    pub fn verify_signature(&self, trusted: Option<&VerifyingKey>) -> Result<(), Error> {
        if self.format != CHECKPOINT_FORMAT {
            return Err(Error::Checkpoint(format!(
                "unknown format `{}`",
                self.format
            )));
        }
        let own = VerifyingKey::from_hex(&self.public_key)
            .map_err(|e| Error::Checkpoint(format!("public_key: {e}")))?;
        if let Some(t) = trusted
            && t != &own
        {
            return Err(Error::Checkpoint(format!(
                "signed by {}, not by the trusted key {}",
                own.to_hex(),
                t.to_hex()
            )));
        }
        let sig: [u8; 64] = unhex(&self.signature)
            .ok_or_else(|| Error::Checkpoint("signature: not hex".into()))?
            .try_into()
            .map_err(|_| Error::Checkpoint("a signature is 64 bytes".into()))?;
        own.verify(self.signed_text().as_bytes(), &sig)
            .map_err(|e| Error::Checkpoint(e.to_string()))
    }

    /// The head it vouches for.
    pub fn head(&self) -> ChainHead {
        ChainHead {
            chain_id: self.chain_id.clone(),
            sequence: self.sequence,
            chain_hash: self.chain_hash.clone(),
        }
    }

    /// Reads a checkpoint file.
    pub fn read(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        serde_json::from_str(&text)
            .map_err(|e| Error::Checkpoint(format!("{}: {e}", path.display())))
    }
}
