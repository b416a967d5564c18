//! The notes' owner: the approver key the policy declares, and a reviewer that signs receipts
//! with it.
//!
//! Under a policy with `[approvers]`, only a receipt signed by a declared approver answers an
//! escalation: an unsigned receipt (what `EscalationCallback` gives) would not count. So the
//! reviewer here signs, with the same key that signs receipts handed out ahead of a call.

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use serde_json::{Map, Value};
use warden_contracts::{
    ApprovalId, ApprovalReceipt, ApprovalRequest, DecisionReason, Digest, ReasonCode,
    ReviewVerdict, Reviewer, Timestamp,
};
use warden_executor::{Clock, SystemClock, arguments_digest};
use warden_policy::receipt::{ReceiptDraft, SigningKey};

/// The approver class `policy.toml` declares under `[approvers]`.
pub const APPROVER: &str = "notes-owners";

/// How long a receipt this owner signs stays valid.
const RECEIPT_TTL_MS: u64 = 60_000;

/// EXAMPLE KEY, PUBLIC ON PURPOSE: the 32 bytes the owner's ed25519 signing key is made from.
/// Its public half is the key `policy.toml` declares. A real deployment keeps its signing key
/// out of the source (`warden approve --keygen` writes one to a file) and declares only the
/// public key in its policy.
const EXAMPLE_KEY_BYTES: [u8; 32] = *b"notes-runtime-example-key-DEMO!!";

/// The notes' owner: approves deleting the notes it was told it may lose, refuses the rest,
/// and counts how often it was asked.
pub struct Owner {
    key: SigningKey,
    deletable: Vec<String>,
    asked: AtomicUsize,
}

impl Owner {
    /// The owner with the example key, who agrees to delete exactly the `deletable` notes.
    pub fn new<I: IntoIterator<Item = &'static str>>(deletable: I) -> Self {
        Self {
            key: SigningKey::from_seed(&EXAMPLE_KEY_BYTES),
            deletable: deletable.into_iter().map(str::to_owned).collect(),
            asked: AtomicUsize::new(0),
        }
    }

    /// The owner's public key, as `policy.toml` declares it (64 hex digits).
    pub fn public_key(&self) -> String {
        self.key.verifying_key().to_hex()
    }

    /// How many escalations the owner was asked to review.
    pub fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }

    /// A receipt signed by `key` for exactly `tool` with `arguments` under the policy whose
    /// digest is `policy`, valid from now for a minute.
    pub fn sign_with(
        key: &SigningKey,
        id: &str,
        tool: &str,
        arguments: &Map<String, Value>,
        policy: &Digest,
    ) -> Result<ApprovalReceipt, String> {
        let digest = arguments_digest(arguments).map_err(|e| e.to_string())?;
        sign(key, id, tool, digest, policy)
    }

    /// A receipt signed by this owner (see [`Self::sign_with`]): what the owner hands out ahead
    /// of a call, for the agent to present with it.
    pub fn sign(
        &self,
        id: &str,
        tool: &str,
        arguments: &Map<String, Value>,
        policy: &Digest,
    ) -> Result<ApprovalReceipt, String> {
        Self::sign_with(&self.key, id, tool, arguments, policy)
    }
}

fn sign(
    key: &SigningKey,
    id: &str,
    tool: &str,
    arguments_digest: Digest,
    policy: &Digest,
) -> Result<ApprovalReceipt, String> {
    let now = SystemClock.now().unix_millis();
    ReceiptDraft {
        id: ApprovalId::new(id).map_err(|e| e.to_string())?,
        approver: APPROVER.to_owned(),
        action: tool.to_owned(),
        arguments_digest,
        policy_digest: policy.clone(),
        issued_at: Timestamp(now),
        expires_at: Timestamp(now.saturating_add(RECEIPT_TTL_MS)),
    }
    .sign(key)
    .and_then(|signed| signed.to_approval())
    .map_err(|e| e.to_string())
}

fn refused(message: impl Into<String>) -> ReviewVerdict {
    ReviewVerdict::Refused {
        reason: DecisionReason::new(ReasonCode::ApprovalRefused, message),
    }
}

#[async_trait]
impl Reviewer for Owner {
    async fn review(&self, _request: &ApprovalRequest) -> ReviewVerdict {
        refused("the owner reviews a call only with its arguments")
    }

    async fn review_call(
        &self,
        request: &ApprovalRequest,
        arguments: &Map<String, Value>,
    ) -> ReviewVerdict {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let name = arguments.get("name").and_then(Value::as_str);
        let agrees = request.action == "delete_note"
            && name.is_some_and(|n| self.deletable.iter().any(|d| d == n));
        if !agrees {
            return refused(format!("the owner keeps `{}`", name.unwrap_or("(no name)")));
        }
        let Some(policy) = &request.policy_digest else {
            return refused("the escalation names no policy to bind the receipt to");
        };
        // Bound to the approval request: its id, its action and the digest of the final
        // arguments the executor escalated on.
        match sign(
            &self.key,
            request.approval_id.as_str(),
            &request.action,
            request.arguments_digest.clone(),
            policy,
        ) {
            Ok(receipt) => ReviewVerdict::Approved { receipt },
            Err(e) => refused(format!("cannot sign the receipt: {e}")),
        }
    }
}
