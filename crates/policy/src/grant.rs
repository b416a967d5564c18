//! Grants (docs/design/policy.md#sources-carve-outs-and-grants): "always allow" at runtime.
//!
//! A grant adds allow rules under its own source and never beats a deny. Over an ask rule,
//! precedence alone would let the ask fire again, so a grant also keeps that rule from firing
//! for the calls it covers: a grant with a specifier writes the carve-out `tool(!spec)` beside
//! the ask rule, under the ask rule's own source; a bare grant removes the ask rule. It may do
//! so only from a source ranking at or above the ask rule's, and says why when it cannot, in
//! stable text a front can show (and drop its "always" option for a one-time approval).
//!
//! A grant is pure: it returns a new snapshot (new digest) and a report of what it changed;
//! [`PolicySnapshot::declared_sets`] reads back every rule the policy now holds, so a product
//! persists a grant by writing them. [`crate::Engine::grant`] swaps its snapshot and journals
//! the report to its observers.

use serde::Serialize;

use crate::compile::{PolicySnapshot, RuleDecl, SetDecl, list_slot};
use crate::decl::{Decision, ListKind, RuleSet, Source};
use crate::engine::Verdict;
use crate::error::{Location, PolicyError};
use crate::rule::Rule;
use crate::wildcard::Wildcard;

/// A set of rules granted at runtime by one source (a skill, the session, a person's "always
/// allow"): its allow rules are granted one by one; its deny and ask rules apply at once.
#[derive(Debug, Clone, PartialEq)]
pub struct GrantSet {
    /// Who grants: an untrusted source's allow rules are withheld.
    pub source: Source,
    /// The rules.
    pub rules: RuleSet,
}

/// One allow rule a grant could not add, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrantRefusal {
    /// The rule as written.
    pub rule: String,
    /// Stable text a front can show.
    pub reason: String,
}

/// What one change to the policy was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum GrantChange {
    /// An allow rule added under the grant's source.
    Allowed {
        /// The rule.
        rule: String,
        /// Its source.
        source: String,
    },
    /// A carve-out written beside an ask rule, under that rule's source.
    CarvedOut {
        /// The carve-out (`tool(!spec)`).
        rule: String,
        /// The ask rule's source.
        source: String,
    },
    /// A bare grant removed an ask rule.
    RemovedAsk {
        /// The ask rule.
        rule: String,
        /// Its source.
        source: String,
    },
    /// A deny or ask rule of the grant set, applied at once.
    Restricted {
        /// The list (`deny` or `ask`).
        list: ListKind,
        /// The rule.
        rule: String,
        /// Its source.
        source: String,
    },
}

/// What a grant did: the rules granted, those refused and every change to the policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrantReport {
    /// The granting source's name.
    pub source: String,
    /// The allow rules granted, as written.
    pub granted: Vec<String>,
    /// The allow rules refused.
    pub refused: Vec<GrantRefusal>,
    /// Every change, in order.
    pub changes: Vec<GrantChange>,
}

/// One declared set of rules, as [`PolicySnapshot::declared_sets`] reads it back.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredSet {
    /// Its source.
    pub source: Source,
    /// Whether these are a policy file's own lists (evaluated after every merged source).
    pub own: bool,
    /// Its rules.
    pub rules: RuleSet,
}

impl PolicySnapshot {
    /// Every declared set of rules, grants included, in declaration order: what a product
    /// writes to persist the policy in force.
    pub fn declared_sets(&self) -> Vec<DeclaredSet> {
        self.declared
            .sets
            .iter()
            .map(|set| {
                let list = |kind: ListKind| {
                    set.lists[list_slot(kind)]
                        .iter()
                        .flat_map(|d| Rule::parse_list(&d.text).unwrap_or_default())
                        .collect()
                };
                DeclaredSet {
                    source: set.source.clone(),
                    own: set.own,
                    rules: RuleSet {
                        allow: list(ListKind::Allow),
                        ask: list(ListKind::Ask),
                        deny: list(ListKind::Deny),
                        notes: set
                            .notes
                            .iter()
                            .map(|(k, (v, _))| (k.clone(), v.clone()))
                            .collect(),
                    },
                }
            })
            .collect()
    }

    /// Grants a set of rules: returns the changed policy and what changed. Each allow rule is
    /// granted unless a deny covers it, an ask rule of a higher-ranked source covers it, it is
    /// a carve-out or a tool-name glob, or its source is untrusted; the set's deny and ask
    /// rules apply at once. Errors only when the changed policy does not build (a rule with
    /// a specifier for a tool that has no matcher).
    ///
    /// ```
    /// use warden_policy::*;
    /// let policy = PolicyBuilder::new()
    ///     .default(Decision::Ask)
    ///     .source(Source::trusted("project").with_rank(1), RuleSet {
    ///         ask: Rule::parse_list("bash").unwrap(),
    ///         ..RuleSet::default()
    ///     })
    ///     .build()?;
    /// let set = GrantSet {
    ///     source: Source::trusted("skill:commit").with_rank(1),
    ///     rules: RuleSet { allow: Rule::parse_list("bash(git commit:*)").unwrap(), ..RuleSet::default() },
    /// };
    /// let (policy, report) = policy.grant(&set)?;
    /// assert_eq!(report.granted, ["bash(git commit:*)"]);
    /// let call = |c: &str| Call::new("bash", serde_json::json!({ "command": c }));
    /// assert_eq!(policy.decide(&call("git commit -m x")).decision, Decision::Allow);
    /// assert_eq!(policy.decide(&call("git push")).decision, Decision::Ask);
    /// # Ok::<(), PolicyError>(())
    /// ```
    pub fn grant(&self, set: &GrantSet) -> Result<(PolicySnapshot, GrantReport), PolicyError> {
        let mut b = (*self.declared).clone();
        let mut report = GrantReport {
            source: set.source.name.clone(),
            granted: Vec::new(),
            refused: Vec::new(),
            changes: Vec::new(),
        };
        let at = Location::file(&format!("<grant {}>", set.source.name));
        let grant_set = match b.sets.iter().position(|s| s.source.name == set.source.name) {
            Some(i) => i,
            None => {
                b.sets.push(SetDecl {
                    source: set.source.clone(),
                    own: false,
                    group: 0,
                    lists: Default::default(),
                    notes: Default::default(),
                    at: at.clone(),
                    text: None,
                    pointer: String::new(),
                });
                b.sets.len() - 1
            }
        };
        for kind in [ListKind::Deny, ListKind::Ask] {
            for rule in set.rules.list(kind) {
                b.sets[grant_set].lists[list_slot(kind)]
                    .push(RuleDecl::new(rule.to_string(), at.clone()));
                report.changes.push(GrantChange::Restricted {
                    list: kind,
                    rule: rule.to_string(),
                    source: set.source.name.clone(),
                });
            }
        }
        for rule in &set.rules.allow {
            match plan(self, &b, &set.source, rule) {
                Err(reason) => report.refused.push(GrantRefusal {
                    rule: rule.to_string(),
                    reason,
                }),
                Ok(steps) => {
                    apply(
                        &mut b,
                        grant_set,
                        &set.source,
                        rule,
                        steps,
                        &at,
                        &mut report,
                    );
                    report.granted.push(rule.to_string());
                }
            }
        }
        let snapshot = b.build()?;
        Ok((snapshot, report))
    }

    /// Answers the prompt behind `verdict` with "always allow `rule`" from `source`. When an
    /// ask rule produced the verdict, `rule` must name that rule's tool, and the ask rule is
    /// carved out (or removed, for a bare grant) only when `source` ranks at or above it.
    /// Returns the changed policy, or the stable reason it cannot grant.
    pub fn grant_over(
        &self,
        verdict: &Verdict,
        rule: &Rule,
        source: &Source,
    ) -> Result<(PolicySnapshot, GrantReport), GrantRefusal> {
        let refuse = |reason: String| GrantRefusal {
            rule: rule.to_string(),
            reason,
        };
        if verdict.decision != Decision::Ask {
            return Err(refuse(
                "the call was not deferred, so there is no prompt to answer".into(),
            ));
        }
        if verdict
            .subjects
            .iter()
            .any(|s| s.decision == Decision::Deny)
        {
            return Err(refuse(
                "a deny rule decided part of the call: a grant never beats a deny".into(),
            ));
        }
        if let Some(asked) = verdict.rule.as_deref() {
            let ask = Rule::parse(asked).map_err(|e| refuse(e.to_string()))?;
            let in_force = self
                .rules
                .iter()
                .any(|r| r.list == ListKind::Ask && !r.carve_out && r.rule == ask);
            if !in_force {
                return Err(refuse(format!(
                    "the ask rule {ask} is no longer in the policy"
                )));
            }
            let names_it = if ask.is_tool_glob() {
                Wildcard::new(ask.tool()).matches(rule.tool())
            } else {
                ask.tool() == rule.tool()
            };
            if !names_it {
                return Err(refuse(format!(
                    "{rule} does not name the tool of the ask rule {ask}"
                )));
            }
        }
        let set = GrantSet {
            source: source.clone(),
            rules: RuleSet {
                allow: vec![rule.clone()],
                ..RuleSet::default()
            },
        };
        let (snapshot, report) = self.grant(&set).map_err(|e| refuse(e.to_string()))?;
        match report.refused.first() {
            Some(refusal) => Err(refusal.clone()),
            None => Ok((snapshot, report)),
        }
    }
}

/// What granting one allow rule changes besides adding it.
enum Step {
    /// Write `tool(!spec)` into this set's ask list.
    CarveOut(usize),
    /// Remove the ask rule at (set, index).
    Remove(usize, usize),
}

/// Decides whether `rule` can be granted from `source`, and what it must change.
fn plan(
    snapshot: &PolicySnapshot,
    b: &crate::compile::PolicyBuilder,
    source: &Source,
    rule: &Rule,
) -> Result<Vec<Step>, String> {
    if !source.trusted {
        return Err(format!(
            "withheld: the source {} is not trusted",
            source.name
        ));
    }
    if rule.is_carve_out() {
        return Err(format!("cannot grant a carve-out: {rule}"));
    }
    if rule.is_tool_glob() {
        return Err(format!(
            "tool-name glob: {rule} is not honoured in the allow list"
        ));
    }
    if rule.spec().is_some() && !b.profiles.contains_key(rule.tool()) {
        return Err(format!(
            "{rule} has a specifier, and {} has no matcher",
            rule.tool()
        ));
    }
    let applies = |r: &Rule| {
        if r.is_tool_glob() {
            Wildcard::new(r.tool()).matches(rule.tool())
        } else {
            r.tool() == rule.tool()
        }
    };
    // A deny that covers every call the grant would allow refuses it.
    for r in snapshot
        .rules
        .iter()
        .filter(|r| r.list == ListKind::Deny && !r.carve_out)
    {
        let covers = applies(&r.rule) && (r.rule.spec().is_none() || r.rule.spec() == rule.spec());
        if covers {
            return Err(format!("denied by {}: a grant never beats a deny", r.rule));
        }
    }
    let mut steps = Vec::new();
    let mut carved: Vec<usize> = Vec::new();
    for (si, set) in b.sets.iter().enumerate() {
        for (ri, decl) in set.lists[list_slot(ListKind::Ask)].iter().enumerate() {
            for ask in Rule::parse_list(&decl.text).unwrap_or_default() {
                if ask.is_carve_out() || !applies(&ask) {
                    continue;
                }
                // Covered for sure: a bare rule on either side, or the same specifier.
                let covers =
                    ask.spec().is_none() || rule.spec().is_none() || ask.spec() == rule.spec();
                if set.source.standing() > source.standing() {
                    if covers {
                        return Err(format!("{ask} from {} outranks the grant", set.source.name));
                    }
                    continue;
                }
                if ask.is_tool_glob() {
                    if covers {
                        return Err(format!(
                            "{ask} from {} is a tool-name glob, which a grant cannot carve out",
                            set.source.name
                        ));
                    }
                    continue;
                }
                match rule.spec() {
                    None => steps.push(Step::Remove(si, ri)),
                    Some(_) if !carved.contains(&si) => {
                        carved.push(si);
                        steps.push(Step::CarveOut(si));
                    }
                    Some(_) => {}
                }
            }
        }
    }
    Ok(steps)
}

fn apply(
    b: &mut crate::compile::PolicyBuilder,
    grant_set: usize,
    source: &Source,
    rule: &Rule,
    steps: Vec<Step>,
    at: &Location,
    report: &mut GrantReport,
) {
    let mut removals: Vec<(usize, usize)> = Vec::new();
    for step in steps {
        match step {
            Step::CarveOut(si) => {
                let carve = format!("{}(!{})", rule.tool(), rule.spec().unwrap_or_default());
                let list = &mut b.sets[si].lists[list_slot(ListKind::Ask)];
                if !list.iter().any(|d| d.text == carve) {
                    list.push(RuleDecl::new(carve.clone(), at.clone()));
                    report.changes.push(GrantChange::CarvedOut {
                        rule: carve,
                        source: b.sets[si].source.name.clone(),
                    });
                }
            }
            Step::Remove(si, ri) => removals.push((si, ri)),
        }
    }
    // Remove from the back so indices stay valid; a declaration holding several rules
    // loses only the ones the grant covers.
    removals.sort_unstable();
    removals.dedup();
    for (si, ri) in removals.into_iter().rev() {
        let decl = b.sets[si].lists[list_slot(ListKind::Ask)].remove(ri);
        let kept: Vec<String> = Rule::parse_list(&decl.text)
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.is_carve_out() || r.tool() != rule.tool())
            .map(|r| r.to_string())
            .collect();
        for r in Rule::parse_list(&decl.text).unwrap_or_default() {
            if !r.is_carve_out() && r.tool() == rule.tool() {
                report.changes.push(GrantChange::RemovedAsk {
                    rule: r.to_string(),
                    source: b.sets[si].source.name.clone(),
                });
            }
        }
        if !kept.is_empty() {
            b.sets[si].lists[list_slot(ListKind::Ask)].insert(
                ri,
                RuleDecl {
                    text: kept.join(" "),
                    ..decl
                },
            );
        }
    }
    b.sets[grant_set].lists[list_slot(ListKind::Allow)]
        .push(RuleDecl::new(rule.to_string(), at.clone()));
    report.changes.push(GrantChange::Allowed {
        rule: rule.to_string(),
        source: source.name.clone(),
    });
}
