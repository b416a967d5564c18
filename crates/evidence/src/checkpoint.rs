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

use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey};
use ed25519_dalek::{Signer, Verifier};
use serde::{Deserialize, Serialize};
use serde_json::json;
use warden_contracts::{ChainHead, ChainId, Digest, Timestamp, canonical};

use crate::error::Error;

/// The checkpoint format tag.
pub const CHECKPOINT_FORMAT: &str = "warden-checkpoint-v1";

/// An ed25519 signing key (zeroized on drop).
pub struct SigningKey(ed25519_dalek::SigningKey);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SigningKey(public {})",
            hex(self.0.verifying_key().as_bytes())
        )
    }
}

impl SigningKey {
    /// From a 32-byte seed.
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        Self(ed25519_dalek::SigningKey::from_bytes(seed))
    }

    /// The matching verifying key.
    pub fn verifying_key(&self) -> VerifyingKey {
        VerifyingKey(self.0.verifying_key())
    }
}

/// An ed25519 verifying (public) key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyingKey(ed25519_dalek::VerifyingKey);

impl VerifyingKey {
    /// The key as 64 lower-case hex digits.
    pub fn to_hex(&self) -> String {
        hex(self.0.as_bytes())
    }

    /// From 64 hex digits.
    pub fn from_hex(s: &str) -> Result<Self, String> {
        let bytes: [u8; 32] = unhex(s)?
            .try_into()
            .map_err(|_| "a public key is 32 bytes (64 hex digits)".to_owned())?;
        ed25519_dalek::VerifyingKey::from_bytes(&bytes)
            .map(Self)
            .map_err(|e| e.to_string())
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn unhex(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim();
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("not hex".into());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|e| e.to_string()))
        .collect()
}

fn read_text(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| Error::Key {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// Reads a signing key: PKCS#8 PEM or a 64-hex-digit seed.
pub fn read_signing_key(path: &Path) -> Result<SigningKey, Error> {
    let text = read_text(path)?;
    let key_err = |message: String| Error::Key {
        path: path.to_owned(),
        message,
    };
    if text.contains("-----BEGIN") {
        return ed25519_dalek::SigningKey::from_pkcs8_pem(&text)
            .map(SigningKey)
            .map_err(|e| key_err(format!("not an ed25519 PKCS#8 private key: {e}")));
    }
    let seed: [u8; 32] = unhex(&text)
        .map_err(|e| key_err(format!("expected PKCS#8 PEM or 64 hex digits: {e}")))?
        .try_into()
        .map_err(|_| key_err("a seed is 32 bytes (64 hex digits)".into()))?;
    Ok(SigningKey::from_seed(&seed))
}

/// Reads a verifying key: SPKI PEM or 64 hex digits.
pub fn read_verifying_key(path: &Path) -> Result<VerifyingKey, Error> {
    let text = read_text(path)?;
    let key_err = |message: String| Error::Key {
        path: path.to_owned(),
        message,
    };
    if text.contains("-----BEGIN") {
        return ed25519_dalek::VerifyingKey::from_public_key_pem(&text)
            .map(VerifyingKey)
            .map_err(|e| key_err(format!("not an ed25519 public key: {e}")));
    }
    VerifyingKey::from_hex(&text).map_err(key_err)
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
        let signature = key.0.sign(c.signed_text().as_bytes());
        c.signature = hex(&signature.to_bytes());
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
            .map_err(|e| Error::Checkpoint(format!("signature: {e}")))?
            .try_into()
            .map_err(|_| Error::Checkpoint("a signature is 64 bytes".into()))?;
        own.0
            .verify(
                self.signed_text().as_bytes(),
                &ed25519_dalek::Signature::from_bytes(&sig),
            )
            .map_err(|_| Error::Checkpoint("the signature does not verify".into()))
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
