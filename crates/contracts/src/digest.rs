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

impl Digest {
    /// The digest of raw bytes.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self(format!("{DIGEST_PREFIX}{}", blake3::hash(bytes).to_hex()).into())
    }

    /// The digest of a JSON value's canonical form.
    pub fn of_json(value: &Value) -> Result<Self, CanonicalError> {
        canonical::to_canonical_vec(value).map(|bytes| Self::of_bytes(&bytes))
    }

    /// The digest of any serializable value's canonical JSON form.
    pub fn of_serialize<T: Serialize + ?Sized>(value: &T) -> Result<Self, ContractError> {
        let value = serde_json::to_value(value).map_err(|e| ContractError::Serialize {
            message: e.to_string(),
        })?;
        Ok(Self::of_json(&value)?)
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
        let hex = s
            .strip_prefix(DIGEST_PREFIX)
            .ok_or_else(|| ContractError::invalid("digest", s, "must start with `blake3:`"))?;
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
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
