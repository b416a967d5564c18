//! The crate's one error type. Every error names where the problem is: the file, its line and
//! JSON pointer where known, and the rule.

use std::fmt;

use crate::rule::GrammarErrorKind;

/// Where in a policy a problem is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Location {
    /// The file (as given) or a label such as `<library>`.
    pub file: String,
    /// The 1-based line, when known.
    pub line: Option<usize>,
    /// The JSON pointer of the offending value (`/sources/0/deny/2`), when known.
    pub pointer: Option<String>,
}

impl Location {
    /// A whole file.
    pub fn file(file: &str) -> Self {
        Self {
            file: file.to_owned(),
            line: None,
            pointer: None,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        match self.pointer.as_deref() {
            Some(p) if !p.is_empty() => write!(f, " ({p})"),
            _ => Ok(()),
        }
    }
}

/// Why a rule does not build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleErrorKind {
    /// The text does not parse.
    Grammar(GrammarErrorKind),
    /// The rule has a specifier and its tool has no matcher.
    NoMatcher,
    /// A tool-name glob where none is allowed (the allow list, or with a specifier).
    ToolGlob,
    /// The rule cannot be built for another reason (an alias naming no tool, a note for a
    /// rule that is not there, several rules where one was expected).
    InvalidRule,
    /// The specifier is not a valid pattern for the tool's matcher.
    InvalidPattern,
}

impl RuleErrorKind {
    /// A stable code: the grammar codes, `no_matcher`, `tool_glob`, `invalid_rule`,
    /// `invalid_pattern`.
    pub fn code(self) -> &'static str {
        match self {
            Self::Grammar(g) => g.code(),
            Self::NoMatcher => "no_matcher",
            Self::ToolGlob => "tool_glob",
            Self::InvalidRule => "invalid_rule",
            Self::InvalidPattern => "invalid_pattern",
        }
    }
}

/// Everything that can go wrong loading or compiling a policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A file could not be read.
    #[error("{path}: {message}")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        message: String,
    },
    /// The file is not valid TOML/JSON of the policy shape (unknown keys included).
    #[error("{at}: {message}")]
    Syntax {
        /// Where.
        at: Location,
        /// What.
        message: String,
    },
    /// A rule does not build.
    #[error("{at}: rule `{rule}`: {message}")]
    Rule {
        /// Where.
        at: Location,
        /// The rule as written.
        rule: String,
        /// Why, as a code.
        kind: RuleErrorKind,
        /// Why, for a person.
        message: String,
    },
    /// A reserved key that this version does not implement yet.
    #[error("{at}: `{key}` is reserved for a later version and not supported yet; remove it")]
    Unsupported {
        /// Where.
        at: Location,
        /// The key.
        key: String,
    },
    /// No default is set anywhere.
    #[error(
        "{at}: the policy has no `default` (allow, ask or deny); a policy without one does not build"
    )]
    MissingDefault {
        /// Where.
        at: Location,
    },
    /// A source name is empty or used twice.
    #[error("{at}: {message}")]
    Source {
        /// Where.
        at: Location,
        /// What.
        message: String,
    },
    /// A `[tools.X]` table is invalid or conflicts with another file's.
    #[error("{at}: tool `{tool}`: {message}")]
    Tool {
        /// Where.
        at: Location,
        /// The tool.
        tool: String,
        /// What.
        message: String,
    },
    /// The policy declares a table this build cannot enforce: `[approvers]` when warden-policy
    /// was compiled without the `receipts` feature, so it has no ed25519 to read the keys or
    /// verify a signed receipt. The policy is refused rather than compiled with the control
    /// dropped. Only a build without the feature returns it.
    #[error(
        "{at}: the policy declares `[{table}]`, but this build of warden-policy was compiled without the `receipts` feature, so it cannot verify signed receipts; remove the table, or use a build with the feature"
    )]
    ReceiptsDisabled {
        /// Where: the file, and the table's line and pointer.
        at: Location,
        /// The table (`approvers`).
        table: String,
    },
    /// A policy could not be written out.
    #[error("cannot write policy: {message}")]
    Write {
        /// What.
        message: String,
    },
}

impl PolicyError {
    /// The rule error's kind, if this is one.
    pub fn rule_kind(&self) -> Option<RuleErrorKind> {
        match self {
            Self::Rule { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}
