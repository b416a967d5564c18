//! The half of receipts that needs ed25519 (the `receipts` feature): keys, the declared
//! approvers, signing and verification, and the snapshot's receipt-checking methods.

use std::collections::BTreeMap;

use serde_json::Value;
use warden_contracts::{ApprovalId, ApprovalReceipt, Digest, PrincipalId, Timestamp};

use super::{RECEIPT_FORMAT, ReceiptError, SignedReceipt};
use crate::compile::PolicySnapshot;
use crate::error::{Location, PolicyError};
use crate::file::LoadedPolicy;

use warden_contracts::keys::{KeyError, hex, unhex};
pub use warden_contracts::keys::{SigningKey, VerifyingKey};

impl From<KeyError> for ReceiptError {
    fn from(e: KeyError) -> Self {
        ReceiptError::Key(e.0)
    }
}

/// The declared approver classes and their keys (compiled from `[approvers]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Approvers {
    classes: BTreeMap<String, Vec<VerifyingKey>>,
}

impl Approvers {
    /// No approver: every receipt is refused as [`ReceiptError::UnknownApprover`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a class. Its name must be a valid principal id (non-empty, no whitespace); it
    /// needs at least one key; declaring it again with another key set is an error (a later
    /// policy file cannot add keys to a class another one declared).
    pub fn declare(
        &mut self,
        name: impl Into<String>,
        keys: Vec<VerifyingKey>,
    ) -> Result<(), ReceiptError> {
        let name = name.into();
        PrincipalId::new(name.as_str())
            .map_err(|e| ReceiptError::Key(format!("approver class `{name}`: {e}")))?;
        if keys.is_empty() {
            return Err(ReceiptError::Key(format!(
                "approver class `{name}` declares no key"
            )));
        }
        let mut keys = keys;
        keys.sort();
        keys.dedup();
        match self.classes.get(&name) {
            Some(existing) if *existing != keys => Err(ReceiptError::Key(format!(
                "approver class `{name}` is declared again with other keys"
            ))),
            Some(_) => Ok(()),
            None => {
                self.classes.insert(name, keys);
                Ok(())
            }
        }
    }

    /// Every class of `other` declared here too (see [`Approvers::declare`]).
    pub fn merge(&mut self, other: &Self) -> Result<(), ReceiptError> {
        for (name, keys) in &other.classes {
            self.declare(name.clone(), keys.clone())?;
        }
        Ok(())
    }

    /// The keys of a class, if it is declared.
    pub fn keys(&self, name: &str) -> Option<&[VerifyingKey]> {
        self.classes.get(name).map(Vec::as_slice)
    }

    /// The declared class names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.classes.keys().map(String::as_str)
    }

    /// Whether no class is declared.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// The canonical form the policy digest covers: class → sorted hex keys (so a key written
    /// as PEM or hex digests the same).
    pub(crate) fn canonical(&self) -> Value {
        Value::Object(
            self.classes
                .iter()
                .map(|(name, keys)| {
                    (
                        name.clone(),
                        Value::Array(keys.iter().map(|k| Value::String(k.to_hex())).collect()),
                    )
                })
                .collect(),
        )
    }
}

/// Adds a policy file's `[approvers]` to `into`, naming the file, line and pointer of a bad key
/// or a conflicting class.
pub(crate) fn add_file_approvers(
    into: &mut Approvers,
    policy: &LoadedPolicy,
) -> Result<(), PolicyError> {
    for (name, decl) in &policy.file.approvers {
        let at = |pointer: String, needle: &str| Location {
            file: policy.label.clone(),
            line: policy.line_of(needle),
            pointer: Some(pointer),
        };
        let keys = decl
            .keys
            .iter()
            .enumerate()
            .map(|(i, text)| {
                VerifyingKey::parse(text).map_err(|e| PolicyError::Syntax {
                    at: at(format!("/approvers/{name}/keys/{i}"), text.trim()),
                    message: format!("approver `{name}`: {e}"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        into.declare(name.clone(), keys)
            .map_err(|e| PolicyError::Syntax {
                at: at(format!("/approvers/{name}"), name),
                message: e.to_string(),
            })?;
    }
    Ok(())
}

/// The fields of a receipt before it is signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptDraft {
    /// Identifies the receipt (the executor uses it once: it is the approval id).
    pub id: ApprovalId,
    /// The approver class that signs it.
    pub approver: String,
    /// The approved action: the tool name, as the policy decides it (`bash`, `server__tool`).
    pub action: String,
    /// The digest of the call's final arguments ([`Digest::of_json`]).
    pub arguments_digest: Digest,
    /// The digest of the policy snapshot it is issued under.
    pub policy_digest: Digest,
    /// From when it is valid.
    pub issued_at: Timestamp,
    /// From when it is no longer valid (after `issued_at`).
    pub expires_at: Timestamp,
}

impl ReceiptDraft {
    /// Signs the draft.
    pub fn sign(self, key: &SigningKey) -> Result<SignedReceipt, ReceiptError> {
        let mut receipt = SignedReceipt {
            format: RECEIPT_FORMAT.into(),
            id: self.id,
            approver: self.approver,
            action: self.action,
            arguments_digest: self.arguments_digest,
            policy_digest: self.policy_digest,
            issued_at: self.issued_at,
            expires_at: self.expires_at,
            signature: String::new(),
        };
        receipt.check_shape()?;
        let signature = key.sign(receipt.signed_text()?.as_bytes());
        receipt.signature = hex(&signature);
        Ok(receipt)
    }
}

impl SignedReceipt {
    /// Checks that this receipt authorizes exactly this call under this policy at `now`, in
    /// this order: well formed ([`ReceiptError::Malformed`]), approver declared
    /// ([`ReceiptError::UnknownApprover`]), signature ([`ReceiptError::BadSignature`]), time
    /// ([`ReceiptError::NotYetValid`], [`ReceiptError::Expired`]), then the binding
    /// ([`ReceiptError::WrongPolicy`], [`ReceiptError::WrongAction`],
    /// [`ReceiptError::WrongArguments`]).
    ///
    /// On success, returns the contracts receipt the executor takes (its `approval_id` is this
    /// receipt's id, its approver a
    /// [`PrincipalKind::User`](warden_contracts::PrincipalKind::User) named after the class).
    /// It does **not** check single use, and it never turns a deny into anything else.
    pub fn verify(
        &self,
        approvers: &Approvers,
        action: &str,
        arguments_digest: &Digest,
        policy_digest: &Digest,
        now: Timestamp,
    ) -> Result<ApprovalReceipt, ReceiptError> {
        self.check_shape()?;
        let signature: [u8; 64] = unhex(&self.signature)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| {
                ReceiptError::Malformed("the signature is not 64 bytes of hex".into())
            })?;
        let text = self.signed_text()?;
        let keys = approvers
            .keys(&self.approver)
            .ok_or_else(|| ReceiptError::UnknownApprover {
                approver: self.approver.clone(),
            })?;
        let signed = keys
            .iter()
            .any(|k| k.verify(text.as_bytes(), &signature).is_ok());
        if !signed {
            return Err(ReceiptError::BadSignature {
                approver: self.approver.clone(),
            });
        }
        if now < self.issued_at {
            return Err(ReceiptError::NotYetValid {
                issued_at: self.issued_at.0,
                now: now.0,
            });
        }
        if now >= self.expires_at {
            return Err(ReceiptError::Expired {
                expires_at: self.expires_at.0,
                now: now.0,
            });
        }
        if &self.policy_digest != policy_digest {
            return Err(ReceiptError::WrongPolicy {
                approved: self.policy_digest.to_string(),
                current: policy_digest.to_string(),
            });
        }
        if self.action != action {
            return Err(ReceiptError::WrongAction {
                approved: self.action.clone(),
                called: action.to_owned(),
            });
        }
        if &self.arguments_digest != arguments_digest {
            return Err(ReceiptError::WrongArguments {
                approved: self.arguments_digest.to_string(),
                called: arguments_digest.to_string(),
            });
        }
        self.to_approval()
    }
}

impl PolicySnapshot {
    /// Decides `call` with an approval receipt in hand. The receipt answers only an `ask` (an
    /// ask rule's, or the approval `apply_approved` requires): verified for this exact call,
    /// this policy and `now`, it turns the ask into an allow and is returned so the executor
    /// records its id (single use). An allowed or denied call is returned as decided, the
    /// receipt unused: a receipt never beats a deny. A receipt that does not verify for an
    /// ask is its typed error; nothing is allowed.
    pub fn decide_with_receipt(
        &self,
        call: &crate::Call,
        receipt: &SignedReceipt,
        now: Timestamp,
    ) -> Result<(crate::Verdict, Option<ApprovalReceipt>), ReceiptError> {
        let mut verdict = self.decide(call);
        if verdict.decision != crate::Decision::Ask {
            return Ok((verdict, None));
        }
        let approval = self.verify_receipt(receipt, &call.tool, &call.args, now)?;
        verdict.decision = crate::Decision::Allow;
        verdict.reason = format!(
            "{}; approved by receipt {} from {}",
            verdict.reason, receipt.id, receipt.approver
        )
        .into();
        Ok((verdict, Some(approval)))
    }

    /// Whether `receipt` comes from an approver this policy declares: with `[approvers]`, it
    /// must carry a signature that verifies with a key of its approver class, for this policy,
    /// within its validity at `now` (and for its own action and arguments: the executor checks
    /// that these are the call's). A policy without `[approvers]` authenticates every receipt:
    /// the local-operator model, where receipts come from the runtime's own composition.
    pub fn authenticate_receipt(
        &self,
        receipt: &ApprovalReceipt,
        now: Timestamp,
    ) -> Result<(), ReceiptError> {
        if self.approvers.is_empty() {
            return Ok(());
        }
        let signed = SignedReceipt::from_approval(receipt)?;
        signed
            .verify(
                &self.approvers,
                &signed.action,
                &signed.arguments_digest,
                &self.digest,
                now,
            )
            .map(drop)
    }

    /// Verifies `receipt` for a call of `tool` with `arguments` (its final arguments) under
    /// this snapshot at `now`: [`SignedReceipt::verify`] with this policy's approvers and
    /// digest. Arguments without a canonical form cannot be bound
    /// ([`ReceiptError::WrongArguments`]). A receipt never beats a deny: check the verdict first.
    pub fn verify_receipt(
        &self,
        receipt: &SignedReceipt,
        tool: &str,
        arguments: &Value,
        now: Timestamp,
    ) -> Result<ApprovalReceipt, ReceiptError> {
        match Digest::of_json(arguments) {
            Ok(digest) => receipt.verify(&self.approvers, tool, &digest, &self.digest, now),
            Err(e) => {
                // Every other check first, so the error is the first one that applies.
                receipt.verify(
                    &self.approvers,
                    tool,
                    &receipt.arguments_digest,
                    &self.digest,
                    now,
                )?;
                Err(ReceiptError::WrongArguments {
                    approved: receipt.arguments_digest.to_string(),
                    called: format!("none ({e})"),
                })
            }
        }
    }
}
