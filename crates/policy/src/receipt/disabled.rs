//! Receipts in a build without the `receipts` feature: no ed25519, so no key can be read and no
//! signature verified. A policy that declares `[approvers]` is refused when it compiles
//! ([`PolicyError::ReceiptsDisabled`]) rather than compiled with the control dropped, so a
//! snapshot never has an approver and every receipt is taken on the local-operator model.

use serde_json::Value;
use warden_contracts::{ApprovalReceipt, Timestamp};

use super::ReceiptError;
use crate::compile::PolicySnapshot;
use crate::error::{Location, PolicyError};
use crate::file::LoadedPolicy;

/// The declared approver classes: always none in this build, which was compiled without the
/// `receipts` feature (a policy declaring `[approvers]` does not compile).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Approvers {
    _none: (),
}

impl Approvers {
    /// No approver (the only value this build has).
    pub fn new() -> Self {
        Self::default()
    }

    /// The declared class names: none.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        std::iter::empty()
    }

    /// Whether no class is declared: always, in this build.
    pub fn is_empty(&self) -> bool {
        true
    }

    /// The canonical form the policy digest covers: `{}`, exactly what a build with the
    /// feature digests for a policy without approvers, so such a policy has one digest
    /// whichever way warden-policy was built.
    pub(crate) fn canonical(&self) -> Value {
        Value::Object(serde_json::Map::new())
    }
}

/// Refuses a policy file that declares `[approvers]`: this build cannot verify the receipts
/// the table asks for, and a declared control is enforced or refused, never ignored.
pub(crate) fn add_file_approvers(
    _into: &mut Approvers,
    policy: &LoadedPolicy,
) -> Result<(), PolicyError> {
    if policy.file.approvers.is_empty() {
        return Ok(());
    }
    Err(PolicyError::ReceiptsDisabled {
        at: Location {
            file: policy.label.clone(),
            line: policy.line_of("approvers"),
            pointer: Some("/approvers".into()),
        },
        table: "approvers".into(),
    })
}

impl PolicySnapshot {
    /// Whether `receipt` comes from an approver this policy declares. This build was compiled
    /// without the `receipts` feature, so no snapshot declares an approver (a policy with
    /// `[approvers]` is refused when it compiles) and every receipt is authenticated: the
    /// local-operator model, where receipts come from the runtime's own composition (the
    /// executor still binds a receipt to its action, arguments, policy and lifetime, and uses
    /// it once).
    pub fn authenticate_receipt(
        &self,
        _receipt: &ApprovalReceipt,
        _now: Timestamp,
    ) -> Result<(), ReceiptError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use crate::{Format, LoadedPolicy, PathEnv, PolicyBuilder, PolicyError, PolicySnapshot};

    fn env() -> PathEnv {
        PathEnv {
            project_root: "/repo".into(),
            home: None,
        }
    }

    fn load(text: &str) -> LoadedPolicy {
        LoadedPolicy::from_text(text.into(), Format::Toml, "p.toml", "project", None)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_policy_declaring_approvers_is_refused_without_the_feature() {
        let text = "default = \"ask\"\nallow = [\"read\"]\n\n[approvers.release-managers]\nkeys = [\"d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a\"]\n";
        let err = PolicySnapshot::from_files(&[load(text)], env()).unwrap_err();
        let PolicyError::ReceiptsDisabled { at, table } = &err else {
            panic!("expected ReceiptsDisabled, got {err:?}");
        };
        assert_eq!(at.file, "p.toml");
        assert_eq!(at.line, Some(4));
        assert_eq!(at.pointer.as_deref(), Some("/approvers"));
        assert_eq!(table, "approvers");
        let message = err.to_string();
        assert!(message.starts_with("p.toml:4 (/approvers): "), "{message}");
        assert!(message.contains("`[approvers]`"), "{message}");
        assert!(
            message.contains("without the `receipts` feature"),
            "{message}"
        );
        assert!(
            message.contains("cannot verify signed receipts"),
            "{message}"
        );
        // The builder refuses it the same way.
        let built = PolicyBuilder::new().file(&load(text));
        assert!(
            matches!(built, Err(PolicyError::ReceiptsDisabled { .. })),
            "{built:?}"
        );
    }

    #[test]
    fn without_approvers_every_receipt_is_the_local_operators() {
        let policy = PolicySnapshot::from_files(&[load("default = \"ask\"\n")], env()).unwrap();
        assert!(policy.approvers().is_empty());
        assert_eq!(policy.approvers().names().count(), 0);
        let receipt = warden_contracts::ApprovalReceipt::new(
            warden_contracts::ApprovalId::new("r-1").unwrap(),
            "bash",
            warden_contracts::Digest::of_bytes(b"{}"),
            None,
            warden_contracts::PrincipalRef {
                id: warden_contracts::PrincipalId::new("operator").unwrap(),
                kind: warden_contracts::PrincipalKind::User,
            },
            warden_contracts::Timestamp(1),
            warden_contracts::Timestamp(2),
        )
        .unwrap();
        assert_eq!(
            policy.authenticate_receipt(&receipt, warden_contracts::Timestamp(1)),
            Ok(())
        );
    }
}
