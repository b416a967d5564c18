//! Secrets: referenced, never serialized in clear.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a redacted value prints and serializes as.
pub const REDACTED: &str = "***";

/// A value that never shows itself: `Debug`, `Display` and `Serialize` all give `***`.
///
/// It deserializes from the clear value (so trusted configuration can supply a secret), which
/// makes it the one type in this crate that does not round-trip: serializing gives `***`.
/// [`Redacted::expose`] is the only way to the value, and its name is easy to audit.
///
/// ```
/// use warden_contracts::Redacted;
/// let token = Redacted::new(String::from("s3cr3t"));
/// assert_eq!(format!("{token:?} {token}"), "*** ***");
/// assert_eq!(serde_json::to_string(&token).unwrap(), r#""***""#);
/// assert_eq!(token.expose(), "s3cr3t");
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Redacted<T>(T);

impl<T> Redacted<T> {
    /// Wraps a secret.
    pub fn new(value: T) -> Self {
        Self(value)
    }
    /// The secret itself. Every use of this is a place a secret can leak: keep them few.
    pub fn expose(&self) -> &T {
        &self.0
    }
    /// Unwraps the secret.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> fmt::Debug for Redacted<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl<T> fmt::Display for Redacted<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl<T> Serialize for Redacted<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(REDACTED)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Redacted<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Self)
    }
}

impl<T> JsonSchema for Redacted<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Redacted".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A secret: always serialized as \"***\".",
            "const": REDACTED
        })
    }
}

/// A reference to a secret held elsewhere (an environment variable, a keychain entry). Contracts
/// carry the reference; whoever needs the value resolves it at the edge.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SecretRef {
    /// An environment variable of the process that resolves it.
    Env {
        /// The variable's name.
        name: String,
    },
    /// A named entry in a secret store.
    Store {
        /// The store.
        store: String,
        /// The entry.
        key: String,
    },
}
