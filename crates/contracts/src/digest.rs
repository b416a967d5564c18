//! `Digest`: `blake3:<64 lower-case hex>` over canonical bytes.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::{self, CanonicalError};
use crate::error::ContractError;

/// The text every digest starts with: the algorithm, then a colon.
pub const DIGEST_PREFIX: &str = "blake3:";

/// A BLAKE3 digest written as `blake3:<64 lower-case hex digits>`.
///
/// Digests of JSON values are taken over their RFC 8785 canonical form (see
/// [`crate::canonical`]), so key order and whitespace never change a digest.
///
/// ```
/// use warden_contracts::Digest;
/// let a = Digest::of_json(&serde_json::json!({"x": 1, "y": [true]})).unwrap();
/// let b = Digest::of_json(&serde_json::from_str(r#"{ "y": [true], "x": 1.0 }"#).unwrap()).unwrap();
/// assert_eq!(a, b);
/// assert!(a.as_str().starts_with("blake3:"));
/// assert_eq!(a.as_str().parse::<Digest>().unwrap(), a);
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest(std::sync::Arc<str>);

impl JsonSchema for Digest {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Digest".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A BLAKE3 digest: `blake3:` and 64 lower-case hex digits.",
            "type": "string",
            "pattern": "^blake3:[0-9a-f]{64}$"
        })
    }
}

/// The two lower-case hex digits of every byte.
const HEX_PAIRS: [[u8; 2]; 256] = {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut t = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [HEX[i >> 4], HEX[i & 0x0f]];
        i += 1;
    }
    t
};

/// The length of a digest's text: `blake3:` and 64 hex digits.
const DIGEST_LEN: usize = DIGEST_PREFIX.len() + 64;

impl Digest {
    /// The digest of raw bytes.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self::from_hash_bytes(blake3::hash(bytes).as_bytes())
    }

    /// The digest whose BLAKE3 output is `hash` (32 bytes, as `blake3::Hash::as_bytes` gives
    /// them): for a caller that ran BLAKE3 itself, incrementally or over bytes it already had.
    /// Infallible, since any 32 bytes are written as a valid digest, and it allocates only the
    /// digest's own text (no formatting, no re-validation).
    ///
    /// ```
    /// use warden_contracts::Digest;
    /// let hash = blake3::hash(b"abc");
    /// assert_eq!(Digest::from_hash_bytes(hash.as_bytes()), Digest::of_bytes(b"abc"));
    /// ```
    pub fn from_hash_bytes(hash: &[u8; 32]) -> Self {
        let mut text = [0u8; DIGEST_LEN];
        text[..DIGEST_PREFIX.len()].copy_from_slice(DIGEST_PREFIX.as_bytes());
        for (pair, b) in text[DIGEST_PREFIX.len()..].chunks_exact_mut(2).zip(hash) {
            pair.copy_from_slice(&HEX_PAIRS[usize::from(*b)]);
        }
        // ASCII by construction, so the fallback is never taken.
        Self(std::str::from_utf8(&text).unwrap_or_default().into())
    }

    /// Whether `s` is a digest's text (`blake3:` and 64 lower-case hex digits): the rule
    /// [`FromStr`] applies, without building the value.
    ///
    /// ```
    /// use warden_contracts::Digest;
    /// assert!(Digest::is_valid(Digest::of_bytes(b"x").as_str()));
    /// assert!(!Digest::is_valid("blake3:ABC"));
    /// ```
    pub fn is_valid(s: &str) -> bool {
        s.len() == DIGEST_LEN
            && s.starts_with(DIGEST_PREFIX)
            && crate::bytes::all(&s.as_bytes()[DIGEST_PREFIX.len()..], |b| {
                b.wrapping_sub(b'0') < 10 || b.wrapping_sub(b'a') < 6
            })
    }

    /// The digest of a JSON value's canonical form.
    pub fn of_json(value: &Value) -> Result<Self, CanonicalError> {
        canonical::to_canonical_vec(value).map(|bytes| Self::of_bytes(&bytes))
    }

    /// The digest of any serializable value's canonical JSON form.
    pub fn of_serialize<T: Serialize + ?Sized>(value: &T) -> Result<Self, ContractError> {
        match canonical::to_canonical_string_of(value) {
            Ok(text) => Ok(Self::of_bytes(text.as_bytes())),
            Err(canonical::OfError::Serialize(message)) => {
                Err(ContractError::Serialize { message })
            }
            Err(canonical::OfError::Canonical(e)) => Err(e.into()),
        }
    }

    /// The full text, `blake3:<hex>`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 64 hex digits without the algorithm prefix.
    pub fn hex(&self) -> &str {
        &self.0[DIGEST_PREFIX.len()..]
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Digest {
    type Err = ContractError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if !s.starts_with(DIGEST_PREFIX) {
            return Err(ContractError::invalid(
                "digest",
                s,
                "must start with `blake3:`",
            ));
        }
        if !Self::is_valid(s) {
            return Err(ContractError::invalid(
                "digest",
                s,
                "must be `blake3:` followed by 64 lower-case hex digits",
            ));
        }
        Ok(Self(s.into()))
    }
}

impl TryFrom<String> for Digest {
    type Error = ContractError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Digest> for String {
    fn from(d: Digest) -> Self {
        d.0.as_ref().to_owned()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn from_hash_bytes_is_the_formatted_hash() {
        for input in [&b""[..], b"abc", &[0xff; 2000]] {
            let hash = blake3::hash(input);
            let d = Digest::from_hash_bytes(hash.as_bytes());
            assert_eq!(d.as_str(), format!("blake3:{}", hash.to_hex()));
            assert_eq!(d.as_str().parse::<Digest>().unwrap(), d);
        }
    }

    #[test]
    fn is_valid_is_what_parsing_accepts() {
        let good = Digest::of_bytes(b"x");
        let s = good.as_str();
        let cases = [
            s.to_owned(),
            s.to_uppercase(),
            s[..70].to_owned(),
            format!("{s}0"),
            s.replace("blake3:", "blake2:"),
            format!("blake3:{}", "g".repeat(64)),
            String::new(),
            format!("blake3:{}é", &s[7..69]),
        ];
        for c in cases {
            assert_eq!(Digest::is_valid(&c), c.parse::<Digest>().is_ok(), "{c:?}");
        }
    }
}
