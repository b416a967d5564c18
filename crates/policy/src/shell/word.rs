//! Words: quote removal, ANSI-C decoding, and what makes a word not statically known.

use tree_sitter::Node;

/// One shell word: as written, after quote removal, and what the shell would do to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Word {
    /// The word as written (quotes and escapes kept).
    pub written: String,
    /// After quote removal, escapes and ANSI-C `$'…'` decoded; a part that is not static (an
    /// expansion, a substitution) is kept as written.
    pub value: String,
    /// Why the word is not static (`$HOME`, `$(…)`), if it is not.
    pub dynamic: Option<String>,
    /// Whether any part was quoted or escaped.
    pub quoted: bool,
    /// An unquoted glob character (`*`, `?`, `[`).
    pub glob: bool,
    /// An unquoted brace (`{a,b}`, `{1..3}`).
    pub brace: bool,
}

impl Word {
    /// A static, unquoted word (for wrappers' inner commands and tests).
    pub fn literal(text: &str) -> Word {
        Word {
            written: text.to_owned(),
            value: text.to_owned(),
            ..Word::default()
        }
    }

    /// Whether the word is a `NAME=value` assignment (as a command prefix).
    pub fn is_assignment(&self) -> bool {
        match self.written.split_once('=') {
            Some((name, _)) => {
                let name = name.strip_suffix('+').unwrap_or(name);
                !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !name.starts_with(|c: char| c.is_ascii_digit())
            }
            None => false,
        }
    }

    fn mark_dynamic(&mut self, why: impl FnOnce() -> String) {
        if self.dynamic.is_none() {
            self.dynamic = Some(why());
        }
    }
}

/// Builds one word from adjacent nodes (tree-sitter may split one shell word into several
/// nodes; bytes with no space between them are one word).
pub(super) fn word_from_nodes(nodes: &[Node<'_>], src: &[u8]) -> Word {
    let mut w = Word::default();
    let (Some(first), Some(last)) = (nodes.first(), nodes.last()) else {
        return w;
    };
    w.written = text_of(src, first.start_byte(), last.end_byte());
    // An explicit stack of (node, inside double quotes); words nest only a few levels, and any
    // construct that could nest deeply (a substitution) is not descended into.
    let mut stack: Vec<Node<'_>> = nodes.iter().rev().copied().collect();
    while let Some(node) = stack.pop() {
        let text = text_of(src, node.start_byte(), node.end_byte());
        match node.kind() {
            "word" | "number" if node.named_child_count() == 0 => {
                unquoted(&mut w, &text);
            }
            "variable_name" if node.named_child_count() == 0 => w.value.push_str(&text),
            "concatenation" | "variable_assignment" => {
                // Children in order; the bytes between them (if any) are literal text.
                let mut parts: Vec<Node<'_>> = Vec::new();
                let mut cursor = node.walk();
                parts.extend(node.children(&mut cursor));
                if gaps(node, &parts) {
                    w.mark_dynamic(|| format!("`{text}`"));
                    w.value.push_str(&text);
                } else {
                    stack.extend(parts.into_iter().rev());
                    continue;
                }
            }
            "raw_string" => {
                w.quoted = true;
                let inner = text
                    .strip_prefix('\'')
                    .and_then(|t| t.strip_suffix('\''))
                    .unwrap_or(&text);
                w.value.push_str(inner);
            }
            "ansi_c_string" => {
                w.quoted = true;
                let inner = text
                    .strip_prefix("$'")
                    .and_then(|t| t.strip_suffix('\''))
                    .unwrap_or(&text);
                w.value.push_str(&decode_ansi_c(inner));
            }
            "string" => {
                w.quoted = true;
                double_quoted(&mut w, node, src);
            }
            "$" if !node.is_named() => {
                // A lone `$` (`a$`, `$"…"` split in two): literal, unless a string follows it
                // directly, which makes a locale-translated `$"…"`.
                let next_is_string = stack
                    .last()
                    .is_some_and(|n| n.kind() == "string" && n.start_byte() == node.end_byte());
                if next_is_string {
                    w.mark_dynamic(|| "a `$\"…\"` translated string".into());
                }
                w.value.push('$');
            }
            _ if !node.is_named()
                && !matches!(node.kind(), "`" | "$(" | "${" | "$((" | "<(" | ">(") =>
            {
                // Punctuation inside a word (`=` of an assignment): literal.
                w.value.push_str(&text);
            }
            kind => {
                // Expansions, substitutions, arithmetic, brace expressions and anything else:
                // not static. Kept as written.
                if kind == "brace_expression" {
                    w.brace = true;
                }
                w.mark_dynamic(|| format!("`{}`", shorten(&text)));
                w.value.push_str(&text);
            }
        }
    }
    w
}

/// Whether a node's children leave bytes of it uncovered.
fn gaps(node: Node<'_>, parts: &[Node<'_>]) -> bool {
    let mut at = node.start_byte();
    for p in parts {
        if p.start_byte() != at {
            return true;
        }
        at = p.end_byte();
    }
    at != node.end_byte()
}

/// An unquoted word part: backslash escapes removed, glob and brace characters noted.
fn unquoted(w: &mut Word, text: &str) {
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                w.quoted = true;
                if let Some(e) = chars.next() {
                    w.value.push(e);
                }
            }
            '*' | '?' | '[' => {
                w.glob = true;
                w.value.push(c);
            }
            '{' | '}' => {
                w.brace = true;
                w.value.push(c);
            }
            '$' | '`' => {
                // tree-sitter leaves these in a plain word only when they are literal, but
                // stay careful: treat as not static.
                w.mark_dynamic(|| format!("`{}`", shorten(text)));
                w.value.push(c);
            }
            _ => w.value.push(c),
        }
    }
}

/// A double-quoted string: `\$ \` \" \\` and backslash-newline unescaped; expansions and
/// substitutions make the word dynamic.
fn double_quoted(w: &mut Word, node: Node<'_>, src: &[u8]) {
    let start = node.start_byte() + 1;
    let end = node.end_byte().saturating_sub(1).max(start);
    let mut at = start;
    let mut cursor = node.walk();
    let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
    for child in children {
        if child.start_byte() > at {
            push_dq_literal(w, &text_of(src, at, child.start_byte()));
        }
        let text = text_of(src, child.start_byte(), child.end_byte());
        if child.kind() == "string_content" {
            push_dq_literal(w, &text);
        } else {
            w.mark_dynamic(|| format!("`{}`", shorten(&text)));
            w.value.push_str(&text);
        }
        at = child.end_byte().max(at);
    }
    if end > at {
        push_dq_literal(w, &text_of(src, at, end));
    }
}

fn push_dq_literal(w: &mut Word, text: &str) {
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('$' | '`' | '"' | '\\') => {
                    if let Some(e) = chars.next() {
                        w.value.push(e);
                    }
                    continue;
                }
                Some('\n') => {
                    chars.next();
                    continue;
                }
                _ => {}
            }
        }
        if c == '$' || c == '`' {
            // A literal `$` left by the grammar (`"a$"`) is harmless, but a backtick here
            // would be a substitution the grammar missed: not static.
            if c == '`' {
                w.mark_dynamic(|| "a backtick".into());
            }
        }
        w.value.push(c);
    }
}

/// Decodes the body of an ANSI-C `$'…'` string as bash does.
pub(super) fn decode_ansi_c(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let chars: Vec<char> = body.chars().collect();
    let mut i = 0;
    let hex = |c: char| c.to_digit(16);
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '\\' || i >= chars.len() {
            out.push(c);
            continue;
        }
        let e = chars[i];
        i += 1;
        match e {
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'e' | 'E' => out.push('\u{1b}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            '\\' | '\'' | '"' | '?' => out.push(e),
            '0'..='7' => {
                let mut v = e.to_digit(8).unwrap_or(0);
                let mut n = 1;
                while n < 3 && i < chars.len() {
                    match chars[i].to_digit(8) {
                        Some(d) => {
                            v = v * 8 + d;
                            i += 1;
                            n += 1;
                        }
                        None => break,
                    }
                }
                push_code(&mut out, v & 0xff);
            }
            'x' => {
                let mut v = 0;
                let mut n = 0;
                while n < 2 && i < chars.len() {
                    match hex(chars[i]) {
                        Some(d) => {
                            v = v * 16 + d;
                            i += 1;
                            n += 1;
                        }
                        None => break,
                    }
                }
                if n == 0 {
                    out.push('\\');
                    out.push('x');
                } else {
                    push_code(&mut out, v);
                }
            }
            'u' | 'U' => {
                let max = if e == 'u' { 4 } else { 8 };
                let mut v: u32 = 0;
                let mut n = 0;
                while n < max && i < chars.len() {
                    match hex(chars[i]) {
                        Some(d) => {
                            v = v.saturating_mul(16).saturating_add(d);
                            i += 1;
                            n += 1;
                        }
                        None => break,
                    }
                }
                if n == 0 {
                    out.push('\\');
                    out.push(e);
                } else {
                    out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                }
            }
            'c' => {
                // Control character: \cX.
                if i < chars.len() {
                    let x = chars[i];
                    i += 1;
                    push_code(&mut out, (x as u32) & 0x1f);
                } else {
                    out.push('\\');
                    out.push('c');
                }
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    out
}

fn push_code(out: &mut String, v: u32) {
    // Bytes above 0x7f would be raw bytes in bash; as text they become the Latin-1 character,
    // which keeps ASCII (the part rules care about) exact.
    out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
}

pub(super) fn text_of(src: &[u8], start: usize, end: usize) -> String {
    src.get(start..end)
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

pub(super) fn shorten(text: &str) -> String {
    let mut s: String = text.chars().take(40).collect();
    if s.len() < text.len() {
        s.push('…');
    }
    s.replace('\n', "⏎")
}

/// Test words: `s` split at single spaces, each a literal.
#[cfg(test)]
pub(super) fn words(s: &str) -> Vec<Word> {
    s.split(' ').map(Word::literal).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_c() {
        assert_eq!(decode_ansi_c(r"rm\x20-rf\x20/tmp"), "rm -rf /tmp");
        assert_eq!(decode_ansi_c(r"a\' ; b"), "a' ; b");
        assert_eq!(decode_ansi_c(r"\162\155"), "rm");
        assert_eq!(decode_ansi_c(r"\u0072m"), "rm");
        assert_eq!(decode_ansi_c(r"\n\t\\"), "\n\t\\");
        assert_eq!(decode_ansi_c(r"\q\x"), r"\q\x");
        assert_eq!(decode_ansi_c("\\"), "\\");
    }

    #[test]
    fn assignments() {
        assert!(Word::literal("A=1").is_assignment());
        assert!(Word::literal("A+=1").is_assignment());
        assert!(!Word::literal("1A=1").is_assignment());
        assert!(!Word::literal("=1").is_assignment());
        assert!(!Word::literal("a-b=1").is_assignment());
    }
}
