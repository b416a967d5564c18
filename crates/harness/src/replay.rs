//! What a replay counts: decisions, the rules that decided, the rules that never fired, the
//! calls no rule covered, and (against a second policy) the calls whose decision changed.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;
use warden_policy::{Decision, PolicySnapshot, Rule, Verdict, builtin_aliases};

use crate::error::HarnessError;

/// A rule as declared in a policy, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct DeclaredRule {
    /// `deny`, `ask` or `allow`.
    pub list: String,
    /// As written.
    pub rule: String,
    /// Its source.
    pub source: String,
}

/// One rule as the snapshot evaluates it.
#[derive(Debug, Clone)]
struct Evaluated {
    declared: DeclaredRule,
    /// The rule texts a verdict cites for it (its alias expansions).
    cited_as: Vec<String>,
}

/// Every rule a snapshot evaluates, in evaluation order: carve-outs (which never decide) and
/// the withheld allow rules of untrusted sources left out. Read from the snapshot's canonical
/// form (`warden.policy-snapshot/1`).
pub fn declared_rules(snapshot: &PolicySnapshot) -> Result<Vec<DeclaredRule>, HarnessError> {
    Ok(evaluated(snapshot)?
        .into_iter()
        .map(|e| e.declared)
        .collect())
}

fn evaluated(snapshot: &PolicySnapshot) -> Result<Vec<Evaluated>, HarnessError> {
    let aliases = builtin_aliases();
    let untrusted: BTreeSet<&str> = snapshot
        .sources()
        .iter()
        .filter(|s| !s.trusted)
        .map(|s| s.name.as_str())
        .collect();
    let mut out = Vec::new();
    for declared in snapshot_rules(snapshot)? {
        let Ok(rule) = Rule::parse(&declared.rule) else {
            continue;
        };
        if rule.is_carve_out()
            || (declared.list == "allow" && untrusted.contains(declared.source.as_str()))
        {
            continue;
        }
        let cited_as = match aliases.get(rule.tool()) {
            Some(targets) if !rule.is_tool_glob() => targets
                .iter()
                .map(|t| rule.with_tool(t).to_string())
                .collect(),
            _ => vec![rule.to_string()],
        };
        out.push(Evaluated { declared, cited_as });
    }
    Ok(out)
}

/// Every rule of `snapshot`'s canonical form (`warden.policy-snapshot/1`), in evaluation order
/// and as written (carve-outs and untrusted allow rules included); an entry without its list,
/// text or source is passed over.
pub(crate) fn snapshot_rules(snapshot: &PolicySnapshot) -> Result<Vec<DeclaredRule>, HarnessError> {
    let canonical: Value = serde_json::from_str(snapshot.canonical_json())
        .map_err(|e| HarnessError::Policy(format!("the snapshot's canonical form: {e}")))?;
    if canonical.get("format").and_then(Value::as_str) != Some(warden_policy::SNAPSHOT_FORMAT) {
        return Err(HarnessError::Policy(format!(
            "unknown snapshot format (this build reads {})",
            warden_policy::SNAPSHOT_FORMAT
        )));
    }
    let rules = canonical
        .get("rules")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    Ok(rules
        .iter()
        .filter_map(|r| {
            let field = |name: &str| r.get(name).and_then(Value::as_str).map(str::to_owned);
            Some(DeclaredRule {
                list: field("list")?,
                rule: field("rule")?,
                source: field("source")?,
            })
        })
        .collect())
}

/// A reference to one replayed call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallRef {
    /// The file it came from.
    pub file: String,
    /// Its line.
    pub line: usize,
    /// Its Warden tool.
    pub tool: String,
}

/// How often one rule decided a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleCount {
    /// The rule as the verdicts cite it.
    pub rule: String,
    /// Its source.
    pub source: String,
    /// How many calls it decided.
    pub calls: u64,
}

/// Counts verdicts as a replay goes.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    calls: u64,
    decisions: BTreeMap<&'static str, u64>,
    rules: BTreeMap<(String, String), u64>,
    fired: BTreeSet<(String, String)>,
    uncovered: Vec<CallRef>,
    against: Option<AgainstTally>,
}

#[derive(Debug, Clone, Default)]
struct AgainstTally {
    decisions: BTreeMap<&'static str, u64>,
    changed: u64,
    changes: BTreeMap<String, u64>,
}

impl Tally {
    /// A tally; `against` when a second policy is compared.
    pub fn new(against: bool) -> Self {
        Self {
            against: against.then(AgainstTally::default),
            ..Self::default()
        }
    }

    /// Counts one call's verdict (and, when comparing, the other policy's).
    pub fn record(&mut self, call: CallRef, verdict: &Verdict, against: Option<&Verdict>) {
        self.calls += 1;
        *self.decisions.entry(verdict.decision.as_str()).or_default() += 1;
        match (&verdict.rule, &verdict.source) {
            (Some(rule), Some(source)) => {
                *self
                    .rules
                    .entry((rule.to_string(), source.to_string()))
                    .or_default() += 1;
            }
            _ => self.uncovered.push(call),
        }
        self.fired.extend(
            verdict
                .rule
                .iter()
                .zip(verdict.source.iter())
                .map(|(r, s)| (r.to_string(), s.to_string())),
        );
        for s in &verdict.subjects {
            if let (Some(r), Some(src)) = (&s.rule, &s.source) {
                self.fired.insert((r.to_string(), src.to_string()));
            }
        }
        if let (Some(t), Some(other)) = (&mut self.against, against) {
            *t.decisions.entry(other.decision.as_str()).or_default() += 1;
            if changed(verdict, other) {
                t.changed += 1;
                *t.changes
                    .entry(format!("{} -> {}", other.decision, verdict.decision))
                    .or_default() += 1;
            }
        }
    }

    /// The summary: counts per decision and per rule, the rules that never fired, the calls no
    /// rule covered and, when comparing, the other policy's decisions and how many changed.
    pub fn summary(
        &self,
        snapshot: &PolicySnapshot,
        files: usize,
        malformed: u64,
    ) -> Result<Value, HarnessError> {
        let never: Vec<DeclaredRule> = evaluated(snapshot)?
            .into_iter()
            .filter(|e| {
                !e.cited_as
                    .iter()
                    .any(|c| self.fired.contains(&(c.clone(), e.declared.source.clone())))
            })
            .map(|e| e.declared)
            .collect();
        let mut rules: Vec<RuleCount> = self
            .rules
            .iter()
            .map(|((rule, source), n)| RuleCount {
                rule: rule.clone(),
                source: source.clone(),
                calls: *n,
            })
            .collect();
        rules.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.rule.cmp(&b.rule)));
        let decisions = |m: &BTreeMap<&'static str, u64>| {
            let mut o = serde_json::Map::new();
            for d in [Decision::Allow, Decision::Ask, Decision::Deny] {
                o.insert(
                    d.as_str().into(),
                    Value::from(m.get(d.as_str()).copied().unwrap_or(0)),
                );
            }
            Value::Object(o)
        };
        let mut summary = serde_json::json!({
            "files": files,
            "calls": self.calls,
            "malformed_lines": malformed,
            "decisions": decisions(&self.decisions),
            "rules": rules,
            "never_fired": never,
            "uncovered": self.uncovered,
        });
        if let (Some(t), Value::Object(o)) = (&self.against, &mut summary) {
            o.insert(
                "against".into(),
                serde_json::json!({
                    "decisions": decisions(&t.decisions),
                    "changed": t.changed,
                    "changes": t.changes,
                }),
            );
        }
        Ok(summary)
    }
}

/// Whether two verdicts on the same call differ in decision (what `--against` lists).
pub fn changed(verdict: &Verdict, against: &Verdict) -> bool {
    verdict.decision != against.decision
}
