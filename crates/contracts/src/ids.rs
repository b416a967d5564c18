//! Identifiers and timestamps.
//!
//! Every identifier is its own type, so a scope id can never be passed where a run id is
//! expected: an ephemeral scope is correlation only and can never be read as a run.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::ContractError;

/// The longest identifier accepted, in bytes.
pub const MAX_ID_LEN: usize = 256;

/// Whether `s` has an identifier's form: 1 to [`MAX_ID_LEN`] bytes, no whitespace or control
/// characters.
fn is_valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_ID_LEN
        && (printable_ascii(s.as_bytes())
            || !s.chars().any(|c| c.is_control() || c.is_whitespace()))
}

/// Whether every byte is printable ASCII other than the space (`!` to `~`): ASCII whitespace
/// and controls are exactly the bytes up to the space, and DEL.
fn printable_ascii(b: &[u8]) -> bool {
    crate::bytes::all(b, |c| c.wrapping_sub(b'!') < b'~' - b'!' + 1)
}

fn check_id(what: &'static str, s: &str) -> Result<(), ContractError> {
    if is_valid_id(s) {
        return Ok(());
    }
    if s.is_empty() {
        return Err(ContractError::invalid(what, s, "must not be empty"));
    }
    if s.len() > MAX_ID_LEN {
        return Err(ContractError::invalid(what, s, "must be at most 256 bytes"));
    }
    if s.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(ContractError::invalid(
            what,
            s,
            "must not contain whitespace or control characters",
        ));
    }
    Ok(())
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        ///
        /// Non-empty, at most [`MAX_ID_LEN`] bytes, no whitespace or control characters.
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_ID_LEN,
                    "pattern": "^\\S+$"
                })
            }
        }

        impl $name {
            /// Validates and wraps an identifier.
            pub fn new(id: impl Into<String>) -> Result<Self, ContractError> {
                let id = id.into();
                check_id($what, &id)?;
                Ok(Self(id))
            }

            /// Whether `id` would be accepted by [`Self::new`]: the same rule, borrowed, without
            /// building the value.
            pub fn is_valid(id: &str) -> bool {
                is_valid_id(id)
            }

            /// The identifier's text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<String> for $name {
            type Error = ContractError;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                Self::new(s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> Self {
                id.0
            }
        }
    };
}

id_type!(
    /// Identifies one execution request (one attempt).
    RequestId, "request_id"
);
id_type!(
    /// Identifies one trusted execution context.
    ContextId, "context_id"
);
id_type!(
    /// Correlation id of an ephemeral operation scope; never a run.
    ScopeId, "scope_id"
);
id_type!(
    /// Identifies a durable run: the only run claim a request can make.
    RunId, "run_id"
);
id_type!(
    /// Identifies an already-created operation attempt that encloses a request.
    AttemptId, "attempt_id"
);
id_type!(
    /// Identifies an agent session.
    SessionId, "session_id"
);
id_type!(
    /// Identifies a principal (a user, a service, an agent).
    PrincipalId, "principal_id"
);
id_type!(
    /// Identifies a tenant.
    TenantId, "tenant_id"
);
id_type!(
    /// Identifies an approval request and every receipt that answers it.
    ApprovalId, "approval_id"
);
id_type!(
    /// Identifies one governed operation in the evidence chain.
    OperationId, "operation_id"
);
id_type!(
    /// Identifies an evidence chain.
    ChainId, "chain_id"
);
id_type!(
    /// Identifies one evidence record.
    RecordId, "record_id"
);

/// A point in time: milliseconds since the Unix epoch, UTC.
///
/// Contracts never read a clock; whoever builds a value supplies the time.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// Milliseconds since the Unix epoch.
    pub fn unix_millis(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The rule as first written, one character at a time.
    fn naive(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= MAX_ID_LEN
            && !s.chars().any(|c| c.is_control() || c.is_whitespace())
    }

    #[test]
    fn the_ascii_fast_path_is_the_character_rule() {
        for c in (0u32..0x3100).filter_map(char::from_u32) {
            for s in [c.to_string(), format!("a{c}b"), format!("{c}\u{e9}")] {
                assert_eq!(is_valid_id(&s), naive(&s), "{s:?}");
                assert_eq!(RecordId::is_valid(&s), RecordId::new(s.as_str()).is_ok());
            }
        }
        for s in ["", &"x".repeat(256), &"x".repeat(257)] {
            assert_eq!(is_valid_id(s), naive(s));
        }
        // Every byte value at every position of words and tails.
        for len in 1..20 {
            for pos in 0..len {
                for b in 0u8..0x80 {
                    let mut bytes = vec![b'a'; len];
                    bytes[pos] = b;
                    let s = String::from_utf8(bytes).unwrap();
                    assert_eq!(is_valid_id(&s), naive(&s), "{s:?}");
                }
                let s = format!("{}\u{a0}{}", "a".repeat(pos), "b".repeat(len - pos));
                assert_eq!(is_valid_id(&s), naive(&s), "{s:?}");
                let s = format!("{}\u{e9}{}", "a".repeat(pos), "b".repeat(len - pos));
                assert_eq!(is_valid_id(&s), naive(&s), "{s:?}");
            }
        }
    }
}
