//! Explanations: everything that went into a verdict, for a person. Not on the hot path.

use serde::Serialize;

use crate::compile::PolicySnapshot;
use crate::decl::ListKind;
use crate::engine::{Call, Verdict};

/// One rule that matched a subject, and whether a carve-out cancelled it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleMatch {
    /// The list.
    pub list: ListKind,
    /// The expanded rule.
    pub rule: String,
    /// The rule as written, when alias expansion changed it.
    pub written: Option<String>,
    /// Its source.
    pub source: String,
    /// The carve-out that cancelled it (`rule` from `source`), if one did.
    pub carved_out_by: Option<(String, String)>,
}

/// What happened to one subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubjectTrace {
    /// The subject's text.
    pub text: String,
    /// Its tool.
    pub tool: String,
    /// Every rule that matched it, in evaluation order, per list.
    pub matches: Vec<RuleMatch>,
}

/// A verdict with everything behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// The verdict.
    pub verdict: Verdict,
    /// Per subject, the rules that matched or were carved out.
    pub subjects: Vec<SubjectTrace>,
}

impl PolicySnapshot {
    /// Decides `call` and collects every rule that matched each subject, carved out or not.
    pub fn explain(&self, call: &Call) -> Explanation {
        let verdict = self.decide(call);
        let subjects = self
            .prepared_subjects(call)
            .iter()
            .map(|p| SubjectTrace {
                text: p.subject.text.clone(),
                tool: p.subject.tool.clone(),
                matches: ListKind::ORDER
                    .into_iter()
                    .flat_map(|list| self.all_matches(list, p))
                    .collect(),
            })
            .collect();
        Explanation { verdict, subjects }
    }
}
