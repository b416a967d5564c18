//! Policy compiler and decision engine: one rule grammar (`bash(git status:*)`), deny > ask >
//! allow > default, ranked sources merged into an immutable, digested [`PolicySnapshot`].
//!
//! Principal types: [`Rule`] (the grammar), [`PolicyFile`] / [`LoadedPolicy`] (the file, read
//! strictly), [`PolicyBuilder`] (declarations → snapshot), [`PolicySnapshot`] (compiled,
//! indexed, `(id, version, digest)`), [`Call`] → [`Verdict`], and [`Engine`] (a snapshot with a
//! verdict journal).
//!
//! Key design decision: the engine is pure and synchronous. Reading files happens when a
//! policy is loaded, symlinks are resolved at the edge ([`edge`]) before a decision, and
//! nothing in [`PolicySnapshot::decide`] touches files, clocks or sockets, so a decision is a
//! deterministic function of the snapshot and the call, and a decisions-only user (or the
//! Claude Code hook) needs no async runtime.
//!
//! Features: `receipts` (default) compiles signed approval receipts and their ed25519
//! ([`receipt`]); without it the crate has no ed25519-dalek, and a policy that declares
//! `[approvers]` is refused ([`PolicyError::ReceiptsDisabled`]), never compiled without them.
//!
//! **Invariant:** a decision is a pure, deterministic function of the snapshot and the call; an
//! error, an unparseable command or zero subjects is never an allow.
//!
//! **Must never:** invoke a tool, or touch files, clocks or sockets while deciding.
//!
//! ```
//! use warden_policy::{Call, Decision, Format, LoadedPolicy, PathEnv, PolicySnapshot};
//! let text = r#"
//! default = "ask"
//! allow = ["read", "bash(git status:*)"]
//! deny = "bash(rm:*)"
//! "#;
//! let file = LoadedPolicy::from_text(text.into(), Format::Toml, "project.toml", "project", None)?;
//! let env = PathEnv { project_root: "/repo".into(), home: None };
//! let policy = PolicySnapshot::from_files(&[file], env)?;
//! let verdict = policy.decide(&Call::new("bash", serde_json::json!({"command": "git status -s"})));
//! assert_eq!(verdict.decision, Decision::Allow);
//! assert_eq!(verdict.rule.as_deref(), Some("bash(git status:*)"));
//! assert_eq!(verdict.source.as_deref(), Some("project"));
//! # Ok::<(), warden_policy::PolicyError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod compile;
pub mod containment;
mod decl;
pub mod describe;
pub mod directives;
pub mod edge;
mod engine;
mod error;
mod explain;
mod file;
pub mod grant;
pub mod guard;
pub mod hints;
pub mod image;
pub mod matcher;
pub mod mcp;
pub mod mode;
pub mod offer;
pub mod permission;
pub mod preset;
pub mod receipt;
mod rule;
pub mod scope;
pub mod shell;
mod wildcard;
#[doc(hidden)]
pub mod work;

pub use compile::{
    DefaultOrigin, DerivedRule, PolicyBuilder, PolicySnapshot, Protected, SNAPSHOT_FORMAT,
    SourceInfo,
};
pub use containment::{Containment, NetworkRequirement, Requirement};
pub use decl::{
    Decision, ListKind, MAX_RANK, Role, RuleSet, Source, ToolProfile, builtin_aliases,
    builtin_profiles,
};
pub use describe::AuthorizationBoundary;
pub use directives::{Directive, DirectiveError, Directives};
pub use engine::{Call, Engine, Subject, SubjectVerdict, Verdict, VerdictObserver};
pub use error::{Location, PolicyError, RuleErrorKind};
pub use explain::{Explanation, RuleMatch, ShellTrace, SubjectTrace};
pub use file::{Format, LoadedPolicy, OwnSource, PathsDecl, PolicyFile, RuleList, SourceDecl};
pub use grant::{DeclaredSet, GrantChange, GrantRefusal, GrantReport, GrantSet};
pub use guard::{Finding, FindingKind, GuardError, GuardOutcome, GuardSet, Guards, SecretAction};
pub use image::ImageLoad;
pub use matcher::{MatcherKind, PathEnv};
pub use mode::{Mode, Modes};
pub use offer::BatchVerdict;
pub use permission::{
    Answer, Permission, PermissionError, PermissionInfo, PermissionKind, PermissionSet,
    PermissionVerdict, decide_with_permissions, decide_with_permissions_async,
};
pub use preset::{Preset, ToolClass};
#[cfg(feature = "receipts")]
pub use receipt::ReceiptDraft;
pub use receipt::{ApproverDecl, Approvers, ReceiptError, SignedReceipt};
pub use rule::{GrammarError, GrammarErrorKind, Rule, is_rule_separator};
pub use scope::{
    ChildPolicy, Scope, ScopeAuthority, ScopeDecl, ScopeError, ScopeSet, ScopeStage, ScopeVerdict,
};
pub use wildcard::Wildcard;

/// The JSON Schema of the policy file (`docs/schemas/PolicyFile.schema.json`).
pub fn policy_file_schema() -> schemars::Schema {
    schemars::SchemaGenerator::default().into_root_schema_for::<PolicyFile>()
}
