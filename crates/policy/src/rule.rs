//! The rule grammar (docs/design/policy.md#rule-grammar, a contract): `tool` or `tool(specifier)`,
//! whitespace separated, a specifier may hold spaces and balanced parentheses, `!spec` is a
//! carve-out.
//!
//! Parsing is two passes, and the order of errors follows from it: the whole input is first cut
//! into tokens at ASCII whitespace outside parentheses (an unbalanced parenthesis anywhere is
//! reported first), then each token is split into tool and specifier.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The six ASCII whitespace characters that separate rules: space, `\t`, `\n`, `\v`, `\f`, `\r`.
pub fn is_rule_separator(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{b}' | '\u{c}' | '\r')
}

/// One rule: a tool name and an optional specifier (which, starting with `!`, is a carve-out).
///
/// `Display` prints it exactly as it is written.
///
/// ```
/// use warden_policy::Rule;
/// let rules = Rule::parse_list("read bash(git status:*) read(!.env.example)").unwrap();
/// assert_eq!(rules[1].tool(), "bash");
/// assert_eq!(rules[1].spec(), Some("git status:*"));
/// assert!(rules[2].is_carve_out());
/// assert_eq!(rules[1].to_string(), "bash(git status:*)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rule {
    tool: String,
    spec: Option<String>,
}

/// What is wrong with a rule's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrammarErrorKind {
    /// A `(` without its `)`, or a `)` without its `(`.
    UnbalancedParentheses,
    /// A token that starts with `(`.
    MissingToolName,
    /// `tool()`.
    EmptySpecifier,
    /// `tool(!)`.
    EmptyCarveOut,
    /// Anything after the closing `)`.
    TextAfterSpecifier,
}

impl GrammarErrorKind {
    /// The stable code (`unbalanced_parentheses`, …).
    pub fn code(self) -> &'static str {
        match self {
            Self::UnbalancedParentheses => "unbalanced_parentheses",
            Self::MissingToolName => "missing_tool_name",
            Self::EmptySpecifier => "empty_specifier",
            Self::EmptyCarveOut => "empty_carve_out",
            Self::TextAfterSpecifier => "text_after_specifier",
        }
    }
}

/// A rule that does not parse: the kind of problem and the token it is in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: `{token}`", describe(*kind))]
pub struct GrammarError {
    /// What is wrong.
    pub kind: GrammarErrorKind,
    /// The whole offending token.
    pub token: String,
}

fn describe(kind: GrammarErrorKind) -> &'static str {
    match kind {
        GrammarErrorKind::UnbalancedParentheses => "unbalanced parentheses",
        GrammarErrorKind::MissingToolName => "missing tool name",
        GrammarErrorKind::EmptySpecifier => "empty specifier",
        GrammarErrorKind::EmptyCarveOut => "empty carve-out",
        GrammarErrorKind::TextAfterSpecifier => "text after the specifier",
    }
}

impl Rule {
    /// A bare rule naming a tool. The name must be non-empty and hold no separator or parenthesis.
    pub fn bare(tool: impl Into<String>) -> Result<Self, GrammarError> {
        Self::parse(&tool.into())
    }

    /// Parses exactly one rule.
    pub fn parse(text: &str) -> Result<Self, GrammarError> {
        let mut rules = Self::parse_list(text)?;
        match (rules.pop(), rules.is_empty()) {
            (Some(rule), true) => Ok(rule),
            _ => Err(GrammarError {
                kind: if text.trim_matches(is_rule_separator).is_empty() {
                    GrammarErrorKind::MissingToolName
                } else {
                    GrammarErrorKind::TextAfterSpecifier
                },
                token: text.to_owned(),
            }),
        }
    }

    /// Parses a whitespace-separated list of rules. An empty or blank input is an empty list.
    pub fn parse_list(text: &str) -> Result<Vec<Self>, GrammarError> {
        tokenize(text)?.into_iter().map(parse_token).collect()
    }

    /// The tool name (possibly a glob over names, such as `github__delete_*`).
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The specifier as written, including a carve-out's `!`.
    pub fn spec(&self) -> Option<&str> {
        self.spec.as_deref()
    }

    /// Whether the specifier starts with `!`.
    pub fn is_carve_out(&self) -> bool {
        self.spec.as_deref().is_some_and(|s| s.starts_with('!'))
    }

    /// The pattern: the specifier without a carve-out's `!`.
    pub fn pattern(&self) -> Option<&str> {
        self.spec
            .as_deref()
            .map(|s| s.strip_prefix('!').unwrap_or(s))
    }

    /// Whether the tool name is a glob (contains `*`).
    pub fn is_tool_glob(&self) -> bool {
        self.tool.contains('*')
    }

    /// A rule from its parts, as a compiled one was (a policy image keeps them).
    pub(crate) fn from_parts(tool: String, spec: Option<String>) -> Self {
        Self { tool, spec }
    }

    /// The same rule for another tool (alias expansion).
    pub fn with_tool(&self, tool: &str) -> Self {
        Self {
            tool: tool.to_owned(),
            spec: self.spec.clone(),
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.spec {
            Some(spec) => write!(f, "{}({spec})", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}

impl std::str::FromStr for Rule {
    type Err = GrammarError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Cuts `text` into tokens at separators outside parentheses.
fn tokenize(text: &str) -> Result<Vec<&str>, GrammarError> {
    let mut tokens = Vec::new();
    let mut start: Option<usize> = None;
    let mut depth: i64 = 0;
    let mut stray = false;
    let unbalanced = |token: &str| GrammarError {
        kind: GrammarErrorKind::UnbalancedParentheses,
        token: token.to_owned(),
    };
    for (i, c) in text.char_indices() {
        if depth == 0 && is_rule_separator(c) {
            if let Some(s) = start.take() {
                if stray {
                    return Err(unbalanced(&text[s..i]));
                }
                tokens.push(&text[s..i]);
            }
            continue;
        }
        if start.is_none() {
            start = Some(i);
            stray = false;
        }
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => stray = true,
            ')' => depth -= 1,
            _ => {}
        }
    }
    if let Some(s) = start {
        if depth != 0 || stray {
            return Err(unbalanced(&text[s..]));
        }
        tokens.push(&text[s..]);
    }
    Ok(tokens)
}

/// Splits one balanced token into tool and specifier.
fn parse_token(token: &str) -> Result<Rule, GrammarError> {
    let error = |kind| GrammarError {
        kind,
        token: token.to_owned(),
    };
    let Some(open) = token.find('(') else {
        return Ok(Rule {
            tool: token.to_owned(),
            spec: None,
        });
    };
    if open == 0 {
        return Err(error(GrammarErrorKind::MissingToolName));
    }
    // The `)` that closes the first `(`.
    let mut depth = 0usize;
    let mut close = None;
    for (i, c) in token[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close.ok_or_else(|| error(GrammarErrorKind::UnbalancedParentheses))?;
    if close + 1 != token.len() {
        return Err(error(GrammarErrorKind::TextAfterSpecifier));
    }
    let spec = &token[open + 1..close];
    if spec.is_empty() {
        return Err(error(GrammarErrorKind::EmptySpecifier));
    }
    if spec == "!" {
        return Err(error(GrammarErrorKind::EmptyCarveOut));
    }
    Ok(Rule {
        tool: token[..open].to_owned(),
        spec: Some(spec.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_token() {
        let e = Rule::parse_list("read bash(git").unwrap_err();
        assert_eq!(e.kind, GrammarErrorKind::UnbalancedParentheses);
        assert_eq!(e.token, "bash(git");
        assert_eq!(e.to_string(), "unbalanced parentheses: `bash(git`");
    }

    #[test]
    fn parse_one_refuses_lists_and_blanks() {
        assert!(Rule::parse("read edit").is_err());
        assert_eq!(
            Rule::parse(" ").unwrap_err().kind,
            GrammarErrorKind::MissingToolName
        );
        assert_eq!(Rule::parse(" read ").unwrap().tool(), "read");
    }
}
