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
    /// For a shell command: how the splitter read it (what allow and deny/ask rules see).
    pub shell: Option<ShellTrace>,
}

/// How the shell splitter read one simple command (docs/design/policy.md#shell-commands).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShellTrace {
    /// The words allow rules see (as written; transparent wrappers removed).
    pub written: Vec<String>,
    /// The normalized argv deny and ask rules see first.
    pub normalized: Vec<String>,
    /// Every other argv deny and ask rules try (the literal argv, wrapper layers, …).
    pub also: Vec<Vec<String>>,
    /// Notes for a person: how it was reached (`bash -c`, `xargs`), why its program is
    /// unknown, whether it is a constraint, argument-extending, or has hazards.
    pub notes: Vec<String>,
}

impl ShellTrace {
    fn of(c: &crate::shell::ShellCommand) -> ShellTrace {
        let mut notes = Vec::new();
        if let Some(via) = &c.via {
            notes.push(format!("reached through {via}"));
        }
        if let Some(why) = &c.unknown {
            notes.push(format!("unknown program: {why}; never allowed"));
        }
        if c.constraint {
            notes.push(
                "a wrapper or shell whose inner commands are subjects of their own: deny and ask rules only".into(),
            );
        }
        if c.extends {
            notes
                .push("arguments are appended to it: only an allow rule `x:*` can allow it".into());
        }
        for h in &c.hazards {
            notes.push(format!("`{h}`: an allow rule must spell it"));
        }
        if c.read_only {
            notes.push("read-only".into());
        }
        ShellTrace {
            written: c.written.clone(),
            normalized: c.normalized.clone(),
            also: c.also.clone(),
            notes,
        }
    }
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
                shell: p.shell.as_ref().map(ShellTrace::of),
            })
            .collect();
        Explanation { verdict, subjects }
    }
}
