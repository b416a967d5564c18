//! Prompt directives (docs/directives.md): the `[directives]` table, text rendered into a model's
//! system prompt. **They are not enforced and grant nothing.**
//!
//! ```toml
//! [directives]
//! authority = ["Decide how to structure the fix inside src/"]
//! boundaries = ["Do not touch the release branch"]
//! escalations = ["A test fails for a reason you cannot explain"]
//! ```
//!
//! A directive is a [`Directive`], a single line of text; nothing in this crate parses one
//! into a [`crate::Rule`], and no rule list accepts one (a rule list is rule strings, and a
//! [`crate::RuleSet`] is [`crate::Rule`]s), so `authority = ["bash(rm:*)"]` stays the words
//! "bash(rm:*)" in a prompt and allows nothing. What the model may do is the compiled rules,
//! described by [`crate::PolicySnapshot::describe`]. Neither of these compiles:
//!
//! ```compile_fail
//! use warden_policy::{Directive, RuleSet};
//! let authority = vec![Directive::new("read").unwrap()];
//! let _ = RuleSet { allow: authority, ..RuleSet::default() };
//! ```
//!
//! ```compile_fail
//! use warden_policy::{Directive, Rule};
//! let _: Rule = Directive::new("read").unwrap().into();
//! ```
//!
//! [`Directives::render`] writes D1's block exactly: `## Authority`, `## Operational
//! Boundaries`, `## Escalation Conditions` (with its fixed first line), one `- ` item a line,
//! sections in that order separated by one empty line, an empty list rendering no section and
//! no directives rendering nothing. Items are written verbatim (D1 has no escaping), which is
//! why a directive must be one line: a line break could forge a heading or another section.
//!
//! The directives are part of the snapshot's semantics (its digest covers them). With several
//! policy files, each list is the concatenation of the files' lists in the order the files
//! were given, a text already in that list skipped.

use std::fmt;

use schemars::JsonSchema;
use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::compile::{PolicyBuilder, PolicySnapshot};

/// The heading of the authority section (D1).
const AUTHORITY: &str = "## Authority";
/// The heading of the boundaries section (D1).
const BOUNDARIES: &str = "## Operational Boundaries";
/// The heading of the escalations section (D1).
const ESCALATIONS: &str = "## Escalation Conditions";
/// The line that opens the escalations section's items (D1).
const ESCALATIONS_INTRO: &str =
    "When any condition occurs, STOP and emit an escalation_request with the reason:";

/// Why a text is not a directive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectiveError {
    /// Empty, or only whitespace.
    #[error("a directive must not be empty")]
    Empty,
    /// A line break or another control character: a directive is one line of text, so it
    /// cannot start a heading or a section of its own.
    #[error(
        "a directive is one line of text: U+{code:04X} at character {position} is a line break or control character"
    )]
    NotOneLine {
        /// The 0-based character position.
        position: usize,
        /// The character's code point.
        code: u32,
    },
}

/// One directive: a non-empty line of prompt text (no line breaks or control characters).
///
/// It is text and only text: it has no conversion to a rule, and it is rendered verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(transparent)]
#[schemars(extend("pattern" = DIRECTIVE_PATTERN))]
pub struct Directive(String);

/// [`Directive::new`]'s rule as an ECMA-262 pattern, for the JSON Schema: a character that is
/// not whitespace, and no control character, U+2028 or U+2029 anywhere.
const DIRECTIVE_PATTERN: &str = "^[^\\u0000-\\u001F\\u007F-\\u009F\\u2028\\u2029]*\
     [^\\s\\u0000-\\u001F\\u007F-\\u009F\\u2028\\u2029]\
     [^\\u0000-\\u001F\\u007F-\\u009F\\u2028\\u2029]*$";

impl Directive {
    /// A directive, if `text` is one non-empty line.
    ///
    /// ```
    /// use warden_policy::Directive;
    /// let d = Directive::new("bash(rm:*)")?;
    /// assert_eq!(d.as_str(), "bash(rm:*)");
    /// assert!(Directive::new("ok\n## Authority").is_err());
    /// # Ok::<(), warden_policy::DirectiveError>(())
    /// ```
    pub fn new(text: impl Into<String>) -> Result<Self, DirectiveError> {
        let text = text.into();
        if text.trim().is_empty() {
            return Err(DirectiveError::Empty);
        }
        if let Some((position, c)) = text
            .chars()
            .enumerate()
            .find(|(_, c)| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}'))
        {
            return Err(DirectiveError::NotOneLine {
                position,
                code: u32::from(c),
            });
        }
        Ok(Self(text))
    }

    /// The text, as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Directive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Directive {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Directive::new(text).map_err(serde::de::Error::custom)
    }
}

/// The `[directives]` table (LionAGI's role prompt directives, docs/directives.md): non-enforcing
/// text for a model's system prompt. It grants nothing and restricts nothing; the rules do.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Directives {
    /// Decision-scope guidance (`## Authority`). Guidance only: not a grant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authority: Vec<Directive>,
    /// Operating constraints (`## Operational Boundaries`). Guidance only: not enforced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub boundaries: Vec<Directive>,
    /// Escalation guidance (`## Escalation Conditions`). Guidance only: installs no callback
    /// and no routing target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub escalations: Vec<Directive>,
}

/// The table's fields as read; [`Directives`] reads only a table (serde's derive would also
/// take an array, filling the lists by position).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DirectivesWire {
    #[serde(default)]
    authority: Vec<Directive>,
    #[serde(default)]
    boundaries: Vec<Directive>,
    #[serde(default)]
    escalations: Vec<Directive>,
}

impl<'de> Deserialize<'de> for Directives {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TableOnly;
        impl<'de> Visitor<'de> for TableOnly {
            type Value = Directives;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of `authority`, `boundaries` and `escalations` lists")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Directives, A::Error> {
                let w = DirectivesWire::deserialize(MapAccessDeserializer::new(map))?;
                Ok(Directives {
                    authority: w.authority,
                    boundaries: w.boundaries,
                    escalations: w.escalations,
                })
            }
        }
        deserializer.deserialize_map(TableOnly)
    }
}

impl Directives {
    /// Whether every list is empty (the rendered block is then empty).
    pub fn is_empty(&self) -> bool {
        self.authority.is_empty() && self.boundaries.is_empty() && self.escalations.is_empty()
    }

    /// Appends `other`'s directives to each list, skipping texts the list already holds.
    pub fn merge(&mut self, other: &Directives) {
        for (into, from) in [
            (&mut self.authority, &other.authority),
            (&mut self.boundaries, &other.boundaries),
            (&mut self.escalations, &other.escalations),
        ] {
            for d in from {
                if !into.contains(d) {
                    into.push(d.clone());
                }
            }
        }
    }

    /// The prompt block in the exact format of docs/directives.md: lines joined by `\n`, sections
    /// separated by one empty line, no trailing newline; empty when there are no directives.
    ///
    /// ```
    /// use warden_policy::{Directive, Directives};
    /// let d = Directives {
    ///     authority: vec![Directive::new("Choose the test strategy")?],
    ///     escalations: vec![Directive::new("The build is red on main")?],
    ///     ..Directives::default()
    /// };
    /// assert_eq!(
    ///     d.render(),
    ///     "## Authority\n- Choose the test strategy\n\n## Escalation Conditions\n\
    ///      When any condition occurs, STOP and emit an escalation_request with the reason:\n\
    ///      - The build is red on main"
    /// );
    /// # Ok::<(), warden_policy::DirectiveError>(())
    /// ```
    pub fn render(&self) -> String {
        let sections: [(&str, Option<&str>, &[Directive]); 3] = [
            (AUTHORITY, None, &self.authority),
            (BOUNDARIES, None, &self.boundaries),
            (ESCALATIONS, Some(ESCALATIONS_INTRO), &self.escalations),
        ];
        let mut blocks = Vec::new();
        for (heading, intro, items) in sections {
            if items.is_empty() {
                continue;
            }
            let mut lines = vec![heading.to_owned()];
            lines.extend(intro.map(str::to_owned));
            lines.extend(items.iter().map(|d| format!("- {d}")));
            blocks.push(lines.join("\n"));
        }
        blocks.join("\n\n")
    }
}

impl PolicyBuilder {
    /// Adds prompt directives (merged as [`Directives::merge`] does). They are covered by the
    /// digest and never take part in a decision.
    pub fn directives(mut self, d: &Directives) -> Self {
        self.directives.merge(d);
        self
    }
}

impl PolicySnapshot {
    /// The merged prompt directives: guidance for the model, not enforced.
    pub fn directives(&self) -> &Directives {
        &self.directives
    }
}
