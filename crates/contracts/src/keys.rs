//! ed25519 keys (feature `ed25519`): the one implementation behind both signatures Warden
//! makes, approval receipts (`warden-policy`) and evidence checkpoints (`warden-evidence`).
//! A signing key is read from PKCS#8 PEM (`openssl genpkey -algorithm ed25519`) or 64 hex
//! digits (its 32-byte seed); a verifying key from SPKI PEM (`openssl pkey -pubout`) or 64 hex
//! digits. Parsing text is all this does: reading key files is the caller's.
//!
//! ```
//! use warden_contracts::keys::{SigningKey, VerifyingKey};
//! let key = SigningKey::from_seed(&[7; 32]);
//! let signature = key.sign(b"a chain head");
//! let public = VerifyingKey::parse(&key.verifying_key().to_hex())?;
//! assert!(public.verify(b"a chain head", &signature).is_ok());
//! assert!(public.verify(b"another head", &signature).is_err());
//! # Ok::<(), warden_contracts::keys::KeyError>(())
//! ```

use ed25519_dalek::Signer as _;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};

/// Why a key could not be read, written or a signature checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KeyError(pub String);

/// An ed25519 public key.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VerifyingKey([u8; 32]);

impl std::fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VerifyingKey({})", self.to_hex())
    }
}

impl VerifyingKey {
    /// Reads a public key: SPKI PEM (`-----BEGIN PUBLIC KEY-----`) or 64 hex digits.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let key = if text.contains("-----BEGIN") {
            ed25519_dalek::VerifyingKey::from_public_key_pem(text.trim())
                .map_err(|e| KeyError(format!("not an ed25519 public key: {e}")))?
        } else {
            let bytes: [u8; 32] = unhex(text)
                .ok_or_else(|| KeyError("a public key is SPKI PEM or 64 hex digits".into()))?
                .try_into()
                .map_err(|_| KeyError("a public key is 32 bytes (64 hex digits)".into()))?;
            ed25519_dalek::VerifyingKey::from_bytes(&bytes)
                .map_err(|e| KeyError(format!("not an ed25519 public key: {e}")))?
        };
        Ok(Self(key.to_bytes()))
    }

    /// Reads a public key from exactly 64 hex digits (where PEM is not a valid form).
    pub fn from_hex(text: &str) -> Result<Self, KeyError> {
        if text.contains("-----BEGIN") {
            return Err(KeyError("a public key here is 64 hex digits".into()));
        }
        Self::parse(text)
    }

    /// The key as 64 lower-case hex digits.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// The key as SPKI PEM.
    pub fn to_pem(&self) -> Result<String, KeyError> {
        self.dalek()?
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| KeyError(e.to_string()))
    }

    /// Checks `signature` over `message` (strict verification: no malleable signatures).
    pub fn verify(&self, message: &[u8], signature: &[u8; 64]) -> Result<(), KeyError> {
        self.dalek()?
            .verify_strict(message, &ed25519_dalek::Signature::from_bytes(signature))
            .map_err(|_| KeyError("the signature does not verify".into()))
    }

    fn dalek(&self) -> Result<ed25519_dalek::VerifyingKey, KeyError> {
        ed25519_dalek::VerifyingKey::from_bytes(&self.0).map_err(|e| KeyError(e.to_string()))
    }
}

/// An ed25519 signing key (zeroized on drop; `Debug` shows the public key only).
pub struct SigningKey(ed25519_dalek::SigningKey);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey(public {})", self.verifying_key().to_hex())
    }
}

impl SigningKey {
    /// From a 32-byte seed (give it fresh randomness to make a new key).
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        Self(ed25519_dalek::SigningKey::from_bytes(seed))
    }

    /// Reads a signing key: PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`) or 64 hex digits.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        if text.contains("-----BEGIN") {
            return ed25519_dalek::SigningKey::from_pkcs8_pem(text.trim())
                .map(Self)
                .map_err(|e| KeyError(format!("not an ed25519 PKCS#8 private key: {e}")));
        }
        let seed: [u8; 32] = unhex(text)
            .ok_or_else(|| KeyError("a signing key is PKCS#8 PEM or 64 hex digits".into()))?
            .try_into()
            .map_err(|_| KeyError("a seed is 32 bytes (64 hex digits)".into()))?;
        Ok(Self::from_seed(&seed))
    }

    /// The matching public key.
    pub fn verifying_key(&self) -> VerifyingKey {
        VerifyingKey(self.0.verifying_key().to_bytes())
    }

    /// Signs `message`.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.0.sign(message).to_bytes()
    }

    /// Writes the key as PKCS#8 PEM to `out` (the encoded text is zeroized after writing).
    pub fn write_pkcs8_pem(&self, out: &mut dyn std::io::Write) -> Result<(), KeyError> {
        let pem = self
            .0
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(|e| KeyError(e.to_string()))?;
        out.write_all(pem.as_bytes())
            .map_err(|e| KeyError(e.to_string()))
    }
}

/// Bytes as lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Hex digits (surrounding white space ignored) as bytes; `None` when they are not.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}
