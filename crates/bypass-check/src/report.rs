//! What a check found: the [`BypassReport`], its [`Summary`] of what was checked, and each [`Violation`].

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// The kind of a violation. Its [`name`](BypassRule::name) is the `rule` field of an output line and
/// is stable: scripts and downstream tests match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum BypassRule {
    /// A runtime crate's normal or build dependency points to its own layer, a higher layer, or a
    /// tooling crate.
    Layering,
    /// A workspace crate is neither in the layer table nor in `boundary.tooling`.
    UnlayeredCrate,
    /// Code outside the executor crates constructs the invocation token.
    TokenMint,
    /// Code outside the executor crates calls the callable trait's invoke method.
    InvokeCall,
    /// A workspace crate re-exports (`pub use`, `pub type`) a raw transport path.
    RawTransportReexport,
    /// `unsafe` code outside the crates allowed it.
    UnsafeCode,
    /// A crate root outside the crates allowed `unsafe` lacks `#![forbid(unsafe_code)]`.
    MissingForbidUnsafe,
    /// A test-only feature (of an executor or a workspace crate) can be enabled in a normal build.
    TestOnlyFeature,
}

impl BypassRule {
    /// Every rule, in output order.
    pub const ALL: [BypassRule; 8] = [
        BypassRule::Layering,
        BypassRule::UnlayeredCrate,
        BypassRule::TokenMint,
        BypassRule::InvokeCall,
        BypassRule::RawTransportReexport,
        BypassRule::UnsafeCode,
        BypassRule::MissingForbidUnsafe,
        BypassRule::TestOnlyFeature,
    ];

    /// The rule's stable name, as printed (`layering`, `token-mint`, …).
    pub fn name(self) -> &'static str {
        match self {
            BypassRule::Layering => "layering",
            BypassRule::UnlayeredCrate => "unlayered-crate",
            BypassRule::TokenMint => "token-mint",
            BypassRule::InvokeCall => "invoke-call",
            BypassRule::RawTransportReexport => "raw-transport-reexport",
            BypassRule::UnsafeCode => "unsafe-code",
            BypassRule::MissingForbidUnsafe => "missing-forbid-unsafe",
            BypassRule::TestOnlyFeature => "test-only-feature",
        }
    }
}

impl fmt::Display for BypassRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One finding: printed as `path:line: rule: explanation`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Violation {
    /// The file, relative to the workspace root when it lies inside it (else absolute).
    pub path: PathBuf,
    /// The 1-based line in `path`.
    pub line: usize,
    /// What kind of violation.
    pub rule: BypassRule,
    /// What is wrong and which rule of the boundary it breaks, naming the crates involved.
    pub explanation: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {}: {}",
            self.path.display(),
            self.line,
            self.rule,
            self.explanation
        )
    }
}

/// What a check covered, so that a clean result can be told apart from a check that saw nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Workspace packages.
    pub crates: usize,
    /// Of those, packages with a layer.
    pub layered: usize,
    /// Of those, tooling packages (outside the runtime layers).
    pub tooling: usize,
    /// Distinct normal or build dependency edges between workspace packages.
    pub dependency_edges: usize,
    /// Distinct Rust source files parsed and scanned.
    pub files_scanned: usize,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bypass-check: {} crates ({} layered, {} tooling), {} dependency edges, {} files scanned",
            self.crates, self.layered, self.tooling, self.dependency_edges, self.files_scanned
        )
    }
}

/// The result of a check: what was checked and every violation, sorted by path, line and rule.
///
/// Its `Display` is the tool's whole output: the summary line, one line per violation, and a
/// closing line (`bypass-check: ok` or `bypass-check: N violations (…)`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BypassReport {
    /// What was checked.
    pub checked: Summary,
    /// Every violation found; empty when the workspace is clean.
    pub violations: Vec<Violation>,
}

impl BypassReport {
    /// True when no violation was found.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }

    /// The violations of one rule.
    pub fn of_rule(&self, rule: BypassRule) -> impl Iterator<Item = &Violation> {
        self.violations.iter().filter(move |v| v.rule == rule)
    }
}

impl fmt::Display for BypassReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.checked)?;
        for violation in &self.violations {
            writeln!(f, "{violation}")?;
        }
        if self.violations.is_empty() {
            return writeln!(f, "bypass-check: ok, no violations");
        }
        let mut counts: BTreeMap<BypassRule, usize> = BTreeMap::new();
        for violation in &self.violations {
            *counts.entry(violation.rule).or_default() += 1;
        }
        let parts: Vec<String> = counts
            .iter()
            .map(|(rule, count)| format!("{count} {rule}"))
            .collect();
        let noun = if self.violations.len() == 1 {
            "violation"
        } else {
            "violations"
        };
        writeln!(
            f,
            "bypass-check: {} {noun} ({})",
            self.violations.len(),
            parts.join(", ")
        )
    }
}
