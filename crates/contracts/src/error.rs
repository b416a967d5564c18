//! The crate's one error type.

use crate::canonical::CanonicalError;

/// A value that breaks a contract: which value, what was wrong, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    /// A field or value does not satisfy its invariant.
    #[error("invalid {what} `{value}`: {why}")]
    Invalid {
        /// What kind of value (for example `digest`, `request_id`).
        what: &'static str,
        /// The offending value (never a secret: secrets never reach contracts in clear).
        value: String,
        /// The rule it breaks.
        why: &'static str,
    },
    /// Two values that must agree do not.
    #[error("{what} mismatch: request has {request}, context has {context}")]
    Mismatch {
        /// What disagrees (for example `execution_scope`).
        what: &'static str,
        /// The request's side.
        request: String,
        /// The trusted context's side.
        context: String,
    },
    /// A combination of fields that the type does not allow.
    #[error("{0}")]
    Inconsistent(String),
    /// A value has no canonical JSON form.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
    /// A value could not be turned into JSON.
    #[error("cannot serialize value: {message}")]
    Serialize {
        /// The serializer's message.
        message: String,
    },
}

impl ContractError {
    pub(crate) fn invalid(what: &'static str, value: &str, why: &'static str) -> Self {
        Self::Invalid {
            what,
            value: value.to_owned(),
            why,
        }
    }
}
