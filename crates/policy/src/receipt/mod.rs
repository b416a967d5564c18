//! Approval receipts (docs/design/policy.md#approval-receipts): an approval bound to one exact
//! call, signed by a declared approver.
//!
//! The policy file declares approver classes and their ed25519 public keys:
//!
//! ```toml
//! [approvers.release-managers]
//! keys = ["d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"]   # or SPKI PEM text
//! ```
//!
//! A [`SignedReceipt`] (JSON) names the approver class, the action (the tool name), the digest
//! of the call's final arguments (BLAKE3 over their RFC 8785 canonical JSON, as
//! [`warden_contracts::Digest::of_json`]), the digest of the policy it was issued under, when it
//! was issued and when it expires, and an ed25519 signature over the canonical JSON of every
//! other field. `SignedReceipt::verify` accepts it only if it is well formed, its approver is
//! declared, the signature verifies with one of that approver's keys, `now` is within
//! `[issued_at, expires_at)`, and it is bound to this policy, this action and these arguments —
//! checked in that order, each refusal a typed [`ReceiptError`].
//!
//! What a receipt does **not** do:
//!
//! - **It never beats a deny.** A receipt can only answer an `ask` (or the approval a mode
//!   requires); a call the policy denies stays denied whatever receipt comes with it. The
//!   engine and executor apply it after the decision, never instead of it.
//! - **It is not single-use by itself.** Verification is pure (no clock, no store: `now` is
//!   passed in); the executor records [`SignedReceipt::id`] in the evidence store and refuses a
//!   second use. A verified receipt becomes the contracts
//!   [`warden_contracts::ApprovalReceipt`] the executor takes, with the
//!   receipt's id as its `approval_id`.
//!
//! **The `receipts` feature** (on by default) compiles everything that needs ed25519: the keys
//! (`VerifyingKey`, `SigningKey`), the declared approvers' keys, `ReceiptDraft::sign`,
//! `SignedReceipt::verify` and the snapshot's `verify_receipt` and `decide_with_receipt`.
//! Without it, a [`SignedReceipt`] can still be read and converted, a policy that declares
//! `[approvers]` is refused when it compiles ([`crate::PolicyError::ReceiptsDisabled`]), and
//! [`PolicySnapshot::authenticate_receipt`] takes every receipt on the local-operator model (no
//! snapshot has an approver).
//!
//! Key files follow the evidence checkpoints' format: a signing key is PKCS#8 PEM (`openssl
//! genpkey -algorithm ed25519`) or 64 hex digits (the seed); a public key is SPKI PEM (`openssl
//! pkey -pubout`) or 64 hex digits.
//!
//! ```
//! use serde_json::json;
//! use warden_contracts::{ApprovalId, Digest, Timestamp};
//! use warden_policy::receipt::{Approvers, ReceiptDraft, ReceiptError, SigningKey};
//!
//! let key = SigningKey::from_seed(&[7; 32]);
//! let mut approvers = Approvers::new();
//! approvers.declare("release-managers", vec![key.verifying_key()])?;
//! let policy = Digest::of_bytes(b"the policy's canonical JSON");
//! let args = Digest::of_json(&json!({"command": "git push origin main"})).map_err(|e| ReceiptError::Malformed(e.to_string()))?;
//! let receipt = ReceiptDraft {
//!     id: ApprovalId::new("rcpt-1").map_err(|e| ReceiptError::Malformed(e.to_string()))?,
//!     approver: "release-managers".into(),
//!     action: "bash".into(),
//!     arguments_digest: args.clone(),
//!     policy_digest: policy.clone(),
//!     issued_at: Timestamp(1_000),
//!     expires_at: Timestamp(61_000),
//! }
//! .sign(&key)?;
//! let approval = receipt.verify(&approvers, "bash", &args, &policy, Timestamp(2_000))?;
//! assert_eq!(approval.approval_id().as_str(), "rcpt-1");
//! assert!(matches!(
//!     receipt.verify(&approvers, "bash", &args, &policy, Timestamp(61_000)),
//!     Err(ReceiptError::Expired { .. })
//! ));
//! # Ok::<(), ReceiptError>(())
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use warden_contracts::{
    ApprovalId, ApprovalReceipt, Digest, PrincipalId, PrincipalKind, PrincipalRef, Timestamp,
    canonical,
};

use crate::compile::PolicySnapshot;

#[cfg(not(feature = "receipts"))]
mod disabled;
#[cfg(feature = "receipts")]
mod ed25519;

#[cfg(not(feature = "receipts"))]
pub use disabled::Approvers;
#[cfg(not(feature = "receipts"))]
pub(crate) use disabled::add_file_approvers;
#[cfg(feature = "receipts")]
pub(crate) use ed25519::add_file_approvers;
#[cfg(feature = "receipts")]
pub use ed25519::{Approvers, ReceiptDraft, SigningKey, VerifyingKey};

/// The receipt format tag; part of what is signed, so a signature made for anything else (a
/// checkpoint, another format version) never verifies as a receipt.
pub const RECEIPT_FORMAT: &str = "warden-receipt-v1";

/// Why a receipt does not authorize a call, or why a key or receipt cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReceiptError {
    /// Not a receipt: bad JSON, an unknown field, a wrong format tag, a signature that is not
    /// 64 bytes of hex, an expiry not after the issue time, an invalid action name or approver
    /// name, a time past what canonical JSON can carry.
    #[error("malformed receipt: {0}")]
    Malformed(String),
    /// The approver class is not declared in the policy's `[approvers]`.
    #[error("approver `{approver}` is not declared in the policy's [approvers]")]
    UnknownApprover {
        /// The approver the receipt names.
        approver: String,
    },
    /// The signature does not verify with any key of the approver (forged or tampered).
    #[error("the receipt's signature does not verify with any key of approver `{approver}`")]
    BadSignature {
        /// The approver the receipt names.
        approver: String,
    },
    /// `now` is at or after the receipt's expiry.
    #[error("the receipt expired at {expires_at} ms (now {now} ms)")]
    Expired {
        /// When it expired (ms since the Unix epoch).
        expires_at: u64,
        /// The time it was checked at.
        now: u64,
    },
    /// `now` is before the receipt's issue time.
    #[error("the receipt is not valid before {issued_at} ms (now {now} ms)")]
    NotYetValid {
        /// When it becomes valid (ms since the Unix epoch).
        issued_at: u64,
        /// The time it was checked at.
        now: u64,
    },
    /// The receipt approves another action (tool).
    #[error("the receipt approves `{approved}`, not `{called}`")]
    WrongAction {
        /// The action the receipt names.
        approved: String,
        /// The call's action.
        called: String,
    },
    /// The receipt approves other arguments.
    #[error("the receipt approves other arguments ({approved}), not this call's ({called})")]
    WrongArguments {
        /// The receipt's argument digest.
        approved: String,
        /// The call's argument digest (or why it has none).
        called: String,
    },
    /// The receipt was issued under another policy.
    #[error("the receipt was issued under policy {approved}, not under {current}")]
    WrongPolicy {
        /// The receipt's policy digest.
        approved: String,
        /// The current policy's digest.
        current: String,
    },
    /// A key cannot be read, written or declared (never returned by verification).
    #[error("{0}")]
    Key(String),
}

/// One `[approvers.NAME]` table: an approver class and the public keys that sign for it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproverDecl {
    /// The class's ed25519 public keys, each 64 hex digits or SPKI PEM text. Any of them may
    /// sign a receipt for this class.
    pub keys: Vec<String>,
}

/// A signed approval receipt, as exchanged in JSON. Fields are public so a receipt can be
/// inspected; changing any of them breaks its signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedReceipt {
    /// [`RECEIPT_FORMAT`].
    pub format: String,
    /// Identifies the receipt (the executor uses it once).
    pub id: ApprovalId,
    /// The approver class that signed it.
    pub approver: String,
    /// The approved action (tool name).
    pub action: String,
    /// The digest of the approved arguments.
    pub arguments_digest: Digest,
    /// The digest of the policy it was issued under.
    pub policy_digest: Digest,
    /// From when it is valid (ms since the Unix epoch).
    pub issued_at: Timestamp,
    /// From when it is no longer valid (ms since the Unix epoch).
    pub expires_at: Timestamp,
    /// The ed25519 signature over the canonical JSON of every other field (128 hex digits).
    pub signature: String,
}

impl SignedReceipt {
    /// Parses a receipt's JSON; anything that is not exactly a receipt is
    /// [`ReceiptError::Malformed`].
    pub fn from_json(text: &str) -> Result<Self, ReceiptError> {
        serde_json::from_str(text).map_err(|e| ReceiptError::Malformed(e.to_string()))
    }

    /// The receipt as pretty-printed JSON.
    pub fn to_json(&self) -> Result<String, ReceiptError> {
        serde_json::to_string_pretty(self).map_err(|e| ReceiptError::Malformed(e.to_string()))
    }

    /// The receipt's id: what the executor records so it is used only once.
    pub fn id(&self) -> &ApprovalId {
        &self.id
    }

    /// The text the signature covers: the canonical JSON (RFC 8785) of every field but
    /// `signature`.
    pub fn signed_text(&self) -> Result<String, ReceiptError> {
        let v = json!({
            "format": self.format,
            "id": self.id.as_str(),
            "approver": self.approver,
            "action": self.action,
            "arguments_digest": self.arguments_digest.as_str(),
            "policy_digest": self.policy_digest.as_str(),
            "issued_at": self.issued_at.0,
            "expires_at": self.expires_at.0,
        });
        canonical::to_canonical_string(&v).map_err(|e| ReceiptError::Malformed(e.to_string()))
    }

    fn check_shape(&self) -> Result<(), ReceiptError> {
        if self.format != RECEIPT_FORMAT {
            return Err(ReceiptError::Malformed(format!(
                "format `{}`, expected `{RECEIPT_FORMAT}`",
                self.format
            )));
        }
        if self.expires_at <= self.issued_at {
            return Err(ReceiptError::Malformed(
                "a receipt must expire after it is issued".into(),
            ));
        }
        warden_contracts::check_action_name(&self.action)
            .map_err(|e| ReceiptError::Malformed(e.to_string()))?;
        PrincipalId::new(self.approver.as_str())
            .map_err(|e| ReceiptError::Malformed(format!("approver: {e}")))?;
        Ok(())
    }

    /// The contracts receipt the executor takes, carrying this receipt's signature, **without
    /// verifying it**: the executor asks the policy ([`PolicySnapshot::authenticate_receipt`])
    /// before the receipt counts. Its approver is a [`PrincipalKind::User`] named after the
    /// class.
    pub fn to_approval(&self) -> Result<ApprovalReceipt, ReceiptError> {
        self.check_shape()?;
        let malformed = |e: warden_contracts::ContractError| ReceiptError::Malformed(e.to_string());
        let approver = PrincipalRef {
            id: PrincipalId::new(self.approver.as_str()).map_err(malformed)?,
            kind: PrincipalKind::User,
        };
        ApprovalReceipt::new(
            self.id.clone(),
            self.action.clone(),
            self.arguments_digest.clone(),
            Some(self.policy_digest.clone()),
            approver,
            self.issued_at,
            self.expires_at,
        )
        .and_then(|r| r.with_signature(self.signature.clone()))
        .map_err(malformed)
    }

    /// The signed receipt a contracts receipt carries: its fields and signature, ready to
    /// verify. [`ReceiptError::Malformed`] when it is unsigned or names no policy digest.
    pub fn from_approval(receipt: &ApprovalReceipt) -> Result<Self, ReceiptError> {
        let signature = receipt.signature().ok_or_else(|| {
            ReceiptError::Malformed("the receipt is not signed by an approver".into())
        })?;
        let policy_digest = receipt.policy_digest().ok_or_else(|| {
            ReceiptError::Malformed("a signed receipt names the policy it was issued under".into())
        })?;
        Ok(Self {
            format: RECEIPT_FORMAT.into(),
            id: receipt.approval_id().clone(),
            approver: receipt.approver().id.as_str().to_owned(),
            action: receipt.action().to_owned(),
            arguments_digest: receipt.arguments_digest().clone(),
            policy_digest: policy_digest.clone(),
            issued_at: receipt.issued_at(),
            expires_at: receipt.expires_at(),
            signature: signature.to_owned(),
        })
    }
}

impl PolicySnapshot {
    /// The approver classes declared by the policy (`[approvers]`).
    pub fn approvers(&self) -> &Approvers {
        &self.approvers
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use crate::{Format, LoadedPolicy, PathEnv, PolicySnapshot};

    /// `approvers` is the only part of the canonical form the `receipts` feature touches: a
    /// policy without `[approvers]` digests `"approvers":{}` either way, so it has one digest
    /// whichever way warden-policy was built (this test runs in both builds).
    #[test]
    fn a_policy_without_approvers_digests_the_same_with_or_without_the_feature() {
        let file = LoadedPolicy::from_text(
            "default = \"ask\"\nallow = [\"read\"]\n".into(),
            Format::Toml,
            "p.toml",
            "project",
            None,
        )
        .unwrap();
        let env = PathEnv {
            project_root: "/repo".into(),
            home: None,
        };
        let policy = PolicySnapshot::from_files(&[file], env).unwrap();
        assert!(policy.approvers().is_empty());
        assert!(
            policy.canonical_json().contains(r#""approvers":{}"#),
            "{}",
            policy.canonical_json()
        );
    }
}
