//! What a translation reports: every rule exactly once, as exact, approximated (always toward
//! stricter, saying how) or inexpressible (saying why).

use serde::Serialize;
use serde_json::Value;

/// How one rule translated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The target says the same thing in its own grammar.
    Exact,
    /// The target says something stricter (it denies or asks more, or allows less).
    Approximated,
    /// The target cannot say it; nothing was emitted for it.
    Inexpressible,
}

impl Status {
    /// `exact`, `approximated` or `inexpressible`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exact => "exact",
            Self::Approximated => "approximated",
            Self::Inexpressible => "inexpressible",
        }
    }
}

/// One rule (or the default) and what it became.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// `deny`, `ask`, `allow`, or `default` for the default decision.
    pub list: String,
    /// The rule as written (for the default: its decision).
    pub rule: String,
    /// The source it came from (for the default: empty).
    pub source: String,
    /// What was emitted for it, in the target's terms (empty when nothing was).
    pub to: Vec<Value>,
    /// For an approximation, how it is stricter; for an inexpressible rule, why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub how: Option<String>,
}

/// Every rule of a translation, sorted into the three outcomes, in policy order.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TranslationReport {
    /// Translated with the same meaning.
    pub exact: Vec<Entry>,
    /// Translated into something stricter.
    pub approximated: Vec<Entry>,
    /// Not translated.
    pub inexpressible: Vec<Entry>,
}

impl TranslationReport {
    /// Adds an entry under `status`.
    pub fn push(&mut self, status: Status, entry: Entry) {
        match status {
            Status::Exact => self.exact.push(entry),
            Status::Approximated => self.approximated.push(entry),
            Status::Inexpressible => self.inexpressible.push(entry),
        }
    }

    /// Every entry with its status, exact first.
    pub fn entries(&self) -> impl Iterator<Item = (Status, &Entry)> {
        self.exact
            .iter()
            .map(|e| (Status::Exact, e))
            .chain(self.approximated.iter().map(|e| (Status::Approximated, e)))
            .chain(
                self.inexpressible
                    .iter()
                    .map(|e| (Status::Inexpressible, e)),
            )
    }

    /// Every emitted item (the union of the entries' `to`), in order, without duplicates.
    pub fn emitted(&self) -> Vec<Value> {
        let mut out: Vec<Value> = Vec::new();
        for (_, e) in self.entries() {
            for v in &e.to {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
        }
        out
    }

    /// A human-readable report, one line per entry.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (status, e) in self.entries() {
            let from = if e.source.is_empty() {
                format!("{} {}", e.list, e.rule)
            } else {
                format!("{} {} [{}]", e.list, e.rule, e.source)
            };
            let to: Vec<String> = e.to.iter().map(compact).collect();
            let arrow = if to.is_empty() {
                String::new()
            } else {
                format!(" -> {}", to.join(", "))
            };
            let how = e
                .how
                .as_deref()
                .map(|h| format!(": {h}"))
                .unwrap_or_default();
            out.push_str(&format!("{:<13} {from}{arrow}{how}\n", status.as_str()));
        }
        out
    }
}

fn compact(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
