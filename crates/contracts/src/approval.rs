//! Approvals: the request an escalation carries and the receipt that answers it.
//!
//! A receipt is bound to one exact action: the canonical action name, the digest of the final
//! arguments, the policy digest and an expiry. The executor accepts a receipt once
//! ([`ApprovalReceipt::check_binding`] is the pure part of that check; single use is the
//! executor's state).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::decision::DecisionReason;
use crate::digest::Digest;
use crate::error::ContractError;
use crate::ids::{ApprovalId, RequestId, Timestamp};
use crate::scope::PrincipalRef;

/// What an escalation asks an authority to approve.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequest {
    /// Identifies this request and any receipt answering it.
    pub approval_id: ApprovalId,
    /// The request that escalated.
    pub request_id: RequestId,
    /// The canonical name of the action.
    pub action: String,
    /// Digest of the final (post-transform) arguments' canonical JSON.
    pub arguments_digest: Digest,
    /// Digest of the policy snapshot that escalated, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_digest: Option<Digest>,
    /// The named authority to ask (for example `human`, `reviewer`, `security-team`).
    pub authority: String,
    /// Why approval is needed.
    pub reason: DecisionReason,
    /// After this time the request can no longer be approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
}

/// Why a receipt does not authorize a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptMismatch {
    /// The receipt names another action.
    Action,
    /// The arguments changed since approval.
    Arguments,
    /// The policy changed since approval.
    Policy,
    /// The receipt has expired.
    Expired,
}

impl std::fmt::Display for ReceiptMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Action => "the receipt names another action",
            Self::Arguments => "the arguments differ from the approved ones",
            Self::Policy => "the policy differs from the one the approval was given under",
            Self::Expired => "the receipt has expired",
        })
    }
}

/// An approval granted by an authority, bound to one exact action.
///
/// ```
/// use warden_contracts::*;
/// let args = Digest::of_json(&serde_json::json!({"command": "git push"})).unwrap();
/// let receipt = ApprovalReceipt::new(
///     ApprovalId::new("ap-1").unwrap(),
///     "bash",
///     args.clone(),
///     None,
///     PrincipalRef { id: PrincipalId::new("alice").unwrap(), kind: PrincipalKind::User },
///     Timestamp(1_000),
///     Timestamp(61_000),
/// ).unwrap();
/// assert!(receipt.check_binding("bash", &args, None, Timestamp(2_000)).is_ok());
/// assert_eq!(
///     receipt.check_binding("bash", &args, None, Timestamp(61_000)),
///     Err(ReceiptMismatch::Expired),
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, try_from = "ApprovalReceiptWire")]
pub struct ApprovalReceipt {
    approval_id: ApprovalId,
    action: String,
    arguments_digest: Digest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy_digest: Option<Digest>,
    approver: PrincipalRef,
    issued_at: Timestamp,
    expires_at: Timestamp,
    /// The approver's ed25519 signature (128 hex digits) over the `warden-receipt-v1` text of
    /// the other fields, when the receipt was signed (`warden approve`, `warden_policy::receipt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signature: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ApprovalReceiptWire {
    approval_id: ApprovalId,
    action: String,
    arguments_digest: Digest,
    #[serde(default)]
    policy_digest: Option<Digest>,
    approver: PrincipalRef,
    issued_at: Timestamp,
    expires_at: Timestamp,
    #[serde(default)]
    signature: Option<String>,
}

impl TryFrom<ApprovalReceiptWire> for ApprovalReceipt {
    type Error = ContractError;
    fn try_from(w: ApprovalReceiptWire) -> Result<Self, Self::Error> {
        let receipt = Self::new(
            w.approval_id,
            w.action,
            w.arguments_digest,
            w.policy_digest,
            w.approver,
            w.issued_at,
            w.expires_at,
        )?;
        match w.signature {
            Some(s) => receipt.with_signature(s),
            None => Ok(receipt),
        }
    }
}

impl ApprovalReceipt {
    /// A receipt; it must expire after it was issued.
    pub fn new(
        approval_id: ApprovalId,
        action: impl Into<String>,
        arguments_digest: Digest,
        policy_digest: Option<Digest>,
        approver: PrincipalRef,
        issued_at: Timestamp,
        expires_at: Timestamp,
    ) -> Result<Self, ContractError> {
        let action = action.into();
        crate::action::check_action_name(&action)?;
        if expires_at <= issued_at {
            return Err(ContractError::Inconsistent(
                "an approval receipt must expire after it is issued".into(),
            ));
        }
        Ok(Self {
            approval_id,
            action,
            arguments_digest,
            policy_digest,
            approver,
            issued_at,
            expires_at,
            signature: None,
        })
    }

    /// The same receipt carrying its approver's signature: 128 hex digits (an ed25519
    /// signature). Whether it verifies is the policy's question
    /// ([`crate::PolicyEvaluator::authenticate_receipt`]); here only its form is checked.
    pub fn with_signature(mut self, signature: impl Into<String>) -> Result<Self, ContractError> {
        let signature = signature.into();
        if signature.len() != 128 || !signature.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ContractError::Invalid {
                what: "receipt signature",
                value: signature.chars().take(16).collect(),
                why: "an ed25519 signature is 128 hex digits",
            });
        }
        self.signature = Some(signature.to_ascii_lowercase());
        Ok(self)
    }

    /// The approver's signature, when the receipt is signed.
    pub fn signature(&self) -> Option<&str> {
        self.signature.as_deref()
    }

    /// Checks that this receipt authorizes exactly this call at `now`.
    pub fn check_binding(
        &self,
        action: &str,
        arguments_digest: &Digest,
        policy_digest: Option<&Digest>,
        now: Timestamp,
    ) -> Result<(), ReceiptMismatch> {
        if self.action != action {
            return Err(ReceiptMismatch::Action);
        }
        if &self.arguments_digest != arguments_digest {
            return Err(ReceiptMismatch::Arguments);
        }
        if self.policy_digest.as_ref() != policy_digest {
            return Err(ReceiptMismatch::Policy);
        }
        if now >= self.expires_at {
            return Err(ReceiptMismatch::Expired);
        }
        Ok(())
    }

    /// The approval request this receipt answers.
    pub fn approval_id(&self) -> &ApprovalId {
        &self.approval_id
    }
    /// The approved action's canonical name.
    pub fn action(&self) -> &str {
        &self.action
    }
    /// Digest of the approved arguments.
    pub fn arguments_digest(&self) -> &Digest {
        &self.arguments_digest
    }
    /// Digest of the policy the approval was given under.
    pub fn policy_digest(&self) -> Option<&Digest> {
        self.policy_digest.as_ref()
    }
    /// Who approved.
    pub fn approver(&self) -> &PrincipalRef {
        &self.approver
    }
    /// When it was issued.
    pub fn issued_at(&self) -> Timestamp {
        self.issued_at
    }
    /// When it stops being valid.
    pub fn expires_at(&self) -> Timestamp {
        self.expires_at
    }
}
