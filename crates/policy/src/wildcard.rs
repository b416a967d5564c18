//! A `*`-only wildcard: `*` matches any run of characters (including none); every other
//! character, `?` and `[` included, is literal. Used for tool-name globs (`github__delete_*`).

/// A compiled `*` wildcard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wildcard {
    /// The literal pieces between stars (one piece: no star at all).
    parts: Vec<String>,
}

impl Wildcard {
    /// Compiles a pattern.
    pub fn new(pattern: &str) -> Self {
        Self {
            parts: pattern.split('*').map(str::to_owned).collect(),
        }
    }

    /// Whether the whole of `text` matches.
    pub fn matches(&self, text: &str) -> bool {
        let n = self.parts.len();
        if n == 1 {
            return text == self.parts[0];
        }
        let first = &self.parts[0];
        let last = &self.parts[n - 1];
        if !text.starts_with(first.as_str()) || text.len() < first.len() + last.len() {
            return false;
        }
        if !text.ends_with(last.as_str()) {
            return false;
        }
        // Greedy leftmost placement of the middle parts is optimal for `*`-only patterns.
        let mut rest = &text[first.len()..text.len() - last.len()];
        for part in &self.parts[1..n - 1] {
            match rest.find(part.as_str()) {
                Some(i) => rest = &rest[i + part.len()..],
                None => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::Wildcard;

    #[test]
    fn star_is_the_only_wildcard() {
        let cases = [
            ("mcp__*", "mcp__github__x", true),
            ("mcp__*", "mcp_", false),
            ("github__delete_*", "github__delete_repo", true),
            ("github__delete_*", "github__create_repo", false),
            ("a*b*c", "abc", true),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "acb", false),
            ("*", "", true),
            ("a?", "ab", false),
            ("a?", "a?", true),
            ("[x]*", "[x]y", true),
            ("ab*ba", "aba", false),
        ];
        for (pattern, text, want) in cases {
            assert_eq!(
                Wildcard::new(pattern).matches(text),
                want,
                "{pattern} ~ {text}"
            );
        }
    }
}
