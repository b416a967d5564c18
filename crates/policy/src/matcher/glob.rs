//! The `prefix`, `glob` and `shell` matchers: a greedy, backtracking-free `*`-only wildcard
//! engine over text or over words joined by single spaces (without joining them), and their index
//! keys and probes.

/// How many spaces deep text probes (and so keys) go.
const MAX_SPACES: usize = 8;
/// How many bytes of the first word are probed character by character.
const FIRST_WORD_CAP: usize = 32;

/// The six ASCII whitespace characters of the rule grammar (docs/design/policy.md#rule-grammar).
pub(super) fn is_shell_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{b}' | '\u{c}' | '\r')
}

/// A compiled `prefix` spec.
#[derive(Debug, Clone)]
pub(super) enum PrefixPattern {
    /// Any spec but `x:*`: exact equality.
    Exact(String),
    /// `x:*`: the text starts with `x` (a plain string prefix).
    Starts(String),
}

impl PrefixPattern {
    /// Compiles a `prefix` spec; returns the pattern and its index key.
    pub(super) fn compile(spec: &str) -> (PrefixPattern, String) {
        match spec.strip_suffix(":*") {
            Some(prefix) => (
                PrefixPattern::Starts(prefix.to_owned()),
                starts_key(prefix).to_owned(),
            ),
            None => (PrefixPattern::Exact(spec.to_owned()), spec.to_owned()),
        }
    }

    pub(super) fn matches(&self, text: &str) -> bool {
        match self {
            PrefixPattern::Exact(s) => text == s,
            PrefixPattern::Starts(s) => text.starts_with(s.as_str()),
        }
    }
}

/// A compiled `glob` (or `shell`) spec.
#[derive(Debug, Clone)]
pub(super) enum GlobPattern {
    /// `:*` alone.
    Any,
    /// A plain glob.
    One(Wild),
    /// `x:*`: `x`, or `x *`.
    Word(Wild, Wild),
}

impl GlobPattern {
    /// Compiles a `glob` spec; returns the pattern and its index key.
    pub(super) fn compile(spec: &str) -> (GlobPattern, String) {
        match spec.strip_suffix(":*") {
            Some("") => (GlobPattern::Any, String::new()),
            Some(base) => {
                let key = match base.find('*') {
                    Some(star) => starts_key(&base[..star]),
                    None => word_key(base),
                };
                let pattern = GlobPattern::Word(Wild::new(base), Wild::new(&format!("{base} *")));
                (pattern, key.to_owned())
            }
            None => {
                let key = match spec.find('*') {
                    Some(star) => starts_key(&spec[..star]),
                    None => spec,
                };
                (GlobPattern::One(Wild::new(spec)), key.to_owned())
            }
        }
    }

    /// Compiles a `shell` spec: its words (split at whitespace outside quotes) joined by single
    /// spaces, then the `glob` rules.
    pub(super) fn compile_shell(spec: &str) -> (GlobPattern, String) {
        let trimmed = spec.trim_matches(is_shell_space);
        let (base, word) = match trimmed.strip_suffix(":*") {
            Some(base) => (base, true),
            None => (trimmed, false),
        };
        let mut canonical = shell_words(base).join(" ");
        if word {
            canonical.push_str(":*");
        }
        GlobPattern::compile(&canonical)
    }

    pub(super) fn matches_text(&self, text: &str) -> bool {
        let hay = || text.bytes();
        match self {
            GlobPattern::Any => true,
            GlobPattern::One(w) => w.matches(hay(), text.len()),
            GlobPattern::Word(a, b) => a.matches(hay(), text.len()) || b.matches(hay(), text.len()),
        }
    }

    pub(super) fn matches_words(&self, words: &[String]) -> bool {
        let len = words.iter().map(String::len).sum::<usize>() + words.len().saturating_sub(1);
        let hay = || Joined::new(words);
        match self {
            GlobPattern::Any => true,
            GlobPattern::One(w) => w.matches(hay(), len),
            GlobPattern::Word(a, b) => a.matches(hay(), len) || b.matches(hay(), len),
        }
    }
}

/// Splits a shell spec at whitespace outside `'…'`, `"…"` and backslash escapes; the words keep
/// their quotes.
fn shell_words(spec: &str) -> Vec<&str> {
    split_quoted(spec, is_shell_space)
}

/// Splits `text` at characters `is_space` accepts, outside `'…'`, `"…"` and backslash escapes;
/// the words keep their quotes. Shared by shell specs and the splitter's written words.
pub(crate) fn split_quoted(text: &str, is_space: impl Fn(char) -> bool) -> Vec<&str> {
    let mut words = Vec::new();
    let mut start = None;
    let (mut single, mut double, mut escaped) = (false, false, false);
    for (i, c) in text.char_indices() {
        let quoted = single || double || escaped;
        if !quoted && is_space(c) {
            if let Some(s) = start.take() {
                words.push(&text[s..i]);
            }
            continue;
        }
        start.get_or_insert(i);
        if escaped {
            escaped = false;
        } else if single {
            single = c != '\'';
        } else if c == '\\' {
            escaped = true;
        } else if double {
            double = c != '"';
        } else if c == '\'' {
            single = true;
        } else if c == '"' {
            double = true;
        }
    }
    if let Some(s) = start {
        words.push(&text[s..]);
    }
    words
}

/// A `*`-only wildcard: the literal parts between the stars.
#[derive(Debug, Clone)]
pub(super) struct Wild {
    /// `parts.len()` = number of stars + 1; no star means exact equality.
    parts: Box<[Box<[u8]>]>,
    /// The sum of the parts' lengths: a shorter text cannot match.
    min_len: usize,
}

impl Wild {
    fn new(spec: &str) -> Wild {
        let parts: Box<[Box<[u8]>]> = spec.split('*').map(|p| p.as_bytes().into()).collect();
        let min_len = parts.iter().map(|p| p.len()).sum();
        Wild { parts, min_len }
    }

    /// Greedy leftmost matching, which is exact for `*`-only patterns: the first part must start
    /// the text, the last must end it, and each middle part is taken at its leftmost occurrence.
    /// `len` is the number of bytes `hay` yields. Never allocates.
    fn matches<I: Iterator<Item = u8> + Clone>(&self, mut hay: I, len: usize) -> bool {
        if len < self.min_len {
            return false;
        }
        let Some((first, rest)) = self.parts.split_first() else {
            return len == 0;
        };
        let Some((last, middle)) = rest.split_last() else {
            return len == first.len() && eat(&mut hay, first);
        };
        if !eat(&mut hay, first) {
            return false;
        }
        let mut pos = first.len();
        let end = len - last.len();
        for part in middle.iter().filter(|p| !p.is_empty()) {
            loop {
                if pos + part.len() > end {
                    return false;
                }
                let mut probe = hay.clone();
                if eat(&mut probe, part) {
                    hay = probe;
                    pos += part.len();
                    break;
                }
                hay.next();
                pos += 1;
            }
        }
        if end > pos {
            hay.nth(end - pos - 1);
        }
        eat(&mut hay, last)
    }
}

/// Consumes `needle.len()` bytes of `hay`; true if they equal `needle`.
fn eat<I: Iterator<Item = u8>>(hay: &mut I, needle: &[u8]) -> bool {
    needle.iter().all(|&b| hay.next() == Some(b))
}

/// The bytes of words joined by single spaces, without joining them.
#[derive(Clone)]
struct Joined<'a> {
    current: std::slice::Iter<'a, u8>,
    rest: &'a [String],
}

impl<'a> Joined<'a> {
    fn new(words: &'a [String]) -> Joined<'a> {
        match words.split_first() {
            Some((first, rest)) => Joined {
                current: first.as_bytes().iter(),
                rest,
            },
            None => Joined {
                current: [].iter(),
                rest: &[],
            },
        }
    }
}

impl Iterator for Joined<'_> {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        if let Some(&b) = self.current.next() {
            return Some(b);
        }
        let (word, rest) = self.rest.split_first()?;
        self.current = word.as_bytes().iter();
        self.rest = rest;
        Some(b' ')
    }
}

/// Calls `f(end)` for every non-empty probe `text[..end]` of a text, each once: the prefixes of
/// the first word (up to [`FIRST_WORD_CAP`] bytes, at character boundaries), the text before
/// each of its first [`MAX_SPACES`] spaces, and the whole text.
pub(super) fn text_probes(text: &str, f: &mut dyn FnMut(usize)) {
    text_probes_of_lengths(text, u64::MAX, f);
}

/// [`text_probes`], but only the probes whose length's bit is set in `lens` (bit `n` for
/// length `n`, bit 63 for 63 and longer): the rest are never candidates, so they are not
/// produced at all.
pub(super) fn text_probes_of_lengths(text: &str, lens: u64, f: &mut dyn FnMut(usize)) {
    let want = |end: usize| lens & (1 << end.min(63)) != 0;
    let bytes = text.as_bytes();
    let first_space = bytes.iter().position(|&b| b == b' ').unwrap_or(bytes.len());
    for j in 1..first_space.min(FIRST_WORD_CAP + 1) {
        if want(j) && text.is_char_boundary(j) {
            f(j);
        }
    }
    let mut spaces = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b' ' {
            spaces += 1;
            if i > 0 && want(i) {
                f(i);
            }
            if spaces == MAX_SPACES {
                break;
            }
        }
    }
    if !text.is_empty() && want(text.len()) {
        f(text.len());
    }
}

/// The key of "the text starts with `lit`": `lit` up to its last space among its first
/// [`MAX_SPACES`], or, when it has no space, its first [`FIRST_WORD_CAP`] bytes.
fn starts_key(lit: &str) -> &str {
    match lit.match_indices(' ').take(MAX_SPACES).last() {
        Some((i, _)) => &lit[..i],
        None => {
            let mut end = lit.len().min(FIRST_WORD_CAP);
            while !lit.is_char_boundary(end) {
                end -= 1;
            }
            &lit[..end]
        }
    }
}

/// The key of "the text is `lit`, or starts with `lit` followed by a space".
fn word_key(lit: &str) -> &str {
    if lit.matches(' ').count() < MAX_SPACES {
        lit
    } else {
        starts_key(lit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(spec: &str, text: &str) -> bool {
        let (p, _) = GlobPattern::compile(spec);
        let words: Vec<String> = text.split(' ').map(str::to_owned).collect();
        let by_text = p.matches_text(text);
        assert_eq!(by_text, p.matches_words(&words), "{spec:?} vs {text:?}");
        by_text
    }

    #[test]
    fn wildcard_table() {
        for (spec, text, want) in [
            ("", "", true),
            ("", "a", false),
            ("*", "", true),
            ("**", "abc", true),
            ("a*", "a", true),
            ("*a", "a", true),
            ("a*a", "a", false),
            ("a*a", "aa", true),
            ("a*b*c", "abc", true),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "acb", false),
            ("*ab*ab*", "abab", true),
            ("*ab*ab*", "aba", false),
            ("a?c", "abc", false),
            ("a?c", "a?c", true),
            ("[a]", "a", false),
            ("[a]", "[a]", true),
            ("git push * main", "git push origin main", true),
            ("git push * main", "git push main", false),
            ("é*ü", "éaü", true),
        ] {
            assert_eq!(glob(spec, text), want, "{spec:?} vs {text:?}");
        }
    }

    #[test]
    fn shell_spec_words() {
        assert_eq!(shell_words("  git   status "), ["git", "status"]);
        assert_eq!(
            shell_words("echo 'a  b' \"c  d\" e\\ f"),
            ["echo", "'a  b'", "\"c  d\"", "e\\ f"]
        );
        let (p, key) = GlobPattern::compile_shell("git\t status :*");
        assert_eq!(key, "git status");
        let words = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        assert!(p.matches_words(&words("git status")));
        assert!(p.matches_words(&words("git status -s")));
        assert!(!p.matches_words(&words("git statusx")));
    }

    #[test]
    fn keys() {
        assert_eq!(PrefixPattern::compile("git:*").1, "git");
        assert_eq!(PrefixPattern::compile("npm run build:*").1, "npm run");
        assert_eq!(PrefixPattern::compile("git status").1, "git status");
        assert_eq!(GlobPattern::compile("git:*").1, "git");
        assert_eq!(GlobPattern::compile("git push * main").1, "git push");
        assert_eq!(GlobPattern::compile("*.env").1, "");
        assert_eq!(GlobPattern::compile("ls*").1, "ls");
        let long = "a".repeat(40);
        assert_eq!(
            PrefixPattern::compile(&format!("{long}:*")).1,
            "a".repeat(32)
        );
        assert_eq!(
            GlobPattern::compile("a b c d e f g h i j:*").1,
            "a b c d e f g h"
        );
    }

    #[test]
    fn probes_are_unique() {
        for text in [
            "",
            " ",
            "git",
            "git status -s",
            " a  b ",
            "é ü",
            &"x ".repeat(20),
        ] {
            let mut seen = Vec::new();
            text_probes(text, &mut |end| seen.push(end));
            let mut dedup = seen.clone();
            dedup.sort_unstable();
            dedup.dedup();
            assert_eq!(seen.len(), dedup.len(), "{text:?}: {seen:?}");
            assert!(!seen.contains(&0));
        }
    }
}
