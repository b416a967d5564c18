//! The invocation token: the capability to invoke a tool once.

use warden_contracts::RequestId;

/// Permission to invoke one tool once, for one request.
///
/// It has no public constructor, is neither `Clone` nor `Copy`, and [`crate::Tool::invoke`] takes
/// it by value: one token, one invocation. Only the executor mints tokens, after every stage of
/// the plan has passed.
#[derive(Debug)]
pub struct InvocationToken {
    request_id: RequestId,
    action: String,
}

impl InvocationToken {
    /// Mints a token for `action` under `request_id`. Crate-private on purpose: the executor is
    /// the only minter.
    pub(crate) fn mint(request_id: RequestId, action: impl Into<String>) -> Self {
        Self {
            request_id,
            action: action.into(),
        }
    }

    /// The request this token was minted for.
    pub fn request_id(&self) -> &RequestId {
        &self.request_id
    }

    /// The canonical name of the action this token may invoke.
    pub fn action(&self) -> &str {
        &self.action
    }
}
