//! The fast path: a command made only of plain words (a conservative character set, `'…'`,
//! and `"…"` without `$`, `` ` `` or `\`), separated by `&&`, `||`, `;` and `|`, is split
//! without tree-sitter. It yields exactly what the tree-sitter walk yields for the same text
//! (a differential property test holds it to that); anything else — any other character, a
//! reserved word, an empty command between operators — goes to tree-sitter.

use super::normalize::{SimpleCommand, Stdin};
use super::word::Word;

/// Characters of an unquoted word on the fast path.
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'_' | b'.' | b'/' | b':' | b',' | b'@' | b'+' | b'=' | b'-' | b'~'
        )
}

/// Characters inside `"…"` on the fast path (no `$`, backtick, backslash, `"` or `!`).
fn in_double(b: u8) -> bool {
    (b == b' ' || b.is_ascii_graphic()) && !matches!(b, b'$' | b'`' | b'\\' | b'"' | b'!')
}

/// Characters inside `'…'` on the fast path.
fn in_single(b: u8) -> bool {
    (b == b' ' || b.is_ascii_graphic()) && b != b'\''
}

/// Words bash treats specially at the start of a command.
const RESERVED: [&str; 22] = [
    "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until", "do",
    "done", "in", "function", "time", "coproc", "{", "}", "!", "[[", "]]",
];

/// A command word the fast path reads as tree-sitter does: it starts with a letter, `_`, `.`,
/// `/` or a quote, and outside quotes holds only letters, digits, `_`, `.`, `/`, `-`, `+`
/// (tree-sitter-bash misreads command words such as `_=`, `a@`, `1@`, `a%` or `-`).
fn command_word_ok(written: &str) -> bool {
    let b = written.as_bytes();
    if !b
        .first()
        .is_some_and(|&c| c.is_ascii_alphabetic() || matches!(c, b'_' | b'.' | b'/' | b'\'' | b'"'))
    {
        return false;
    }
    let mut quote: Option<u8> = None;
    b.iter().all(|&c| match quote {
        Some(q) => {
            if c == q {
                quote = None;
            }
            true
        }
        None if c == b'\'' || c == b'"' => {
            quote = Some(c);
            true
        }
        None => c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'/' | b'-' | b'+'),
    })
}

enum Tok {
    Word(Word),
    /// `&&`, `||`, `;`, `|`.
    Op(&'static str),
}

/// The simple commands of `text`, or `None` when it is not for the fast path.
pub(super) fn split(text: &str) -> Option<Vec<SimpleCommand>> {
    let toks = tokenize(text.as_bytes())?;
    let mut out: Vec<SimpleCommand> = Vec::new();
    let mut current: Vec<Word> = Vec::new();
    let mut start: Option<usize> = None;
    let mut end = 0;
    let mut piped = false;
    let mut prev_op: Option<&str> = None;
    let finish = |current: &mut Vec<Word>,
                  start: &mut Option<usize>,
                  end: usize,
                  piped: bool,
                  out: &mut Vec<SimpleCommand>|
     -> Option<()> {
        let s = start.take()?;
        let mut assignments = std::mem::take(current);
        let split = assignments.iter().take_while(|w| w.is_assignment()).count();
        let words = assignments.split_off(split);
        if let Some(first) = words.first()
            && (RESERVED.contains(&first.written.as_str()) || !command_word_ok(&first.written))
        {
            return None;
        }
        out.push(SimpleCommand {
            text: text.get(s..end)?.to_owned(),
            assignments,
            words,
            stdin: if piped { Stdin::Pipe } else { Stdin::Inherited },
        });
        Some(())
    };
    for (tok, at, to) in toks {
        match tok {
            Tok::Word(w) => {
                start.get_or_insert(at);
                end = to;
                current.push(w);
                prev_op = None;
            }
            Tok::Op(op) => {
                if current.is_empty() {
                    return None; // an operator with no command before it
                }
                finish(&mut current, &mut start, end, piped, &mut out)?;
                // The command after a `|` reads the pipe.
                piped = op == "|";
                prev_op = Some(op);
            }
        }
    }
    match prev_op {
        // A trailing `;` is fine (`git status ;`); a trailing `&&`, `||` or `|` is not.
        Some(";") | None => {}
        Some(_) => return None,
    }
    if !current.is_empty() {
        finish(&mut current, &mut start, end, piped, &mut out)?;
    }
    if out.is_empty() {
        return None;
    }
    Some(out)
}

/// Tokens with their byte ranges; `None` on any character outside the fast path.
fn tokenize(b: &[u8]) -> Option<Vec<(Tok, usize, usize)>> {
    let mut toks = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' => i += 1,
            b'&' if b.get(i + 1) == Some(&b'&') => {
                toks.push((Tok::Op("&&"), i, i + 2));
                i += 2;
            }
            b'|' if b.get(i + 1) == Some(&b'|') => {
                toks.push((Tok::Op("||"), i, i + 2));
                i += 2;
            }
            b'|' if b.get(i + 1) != Some(&b'&') => {
                toks.push((Tok::Op("|"), i, i + 1));
                i += 1;
            }
            b';' if b.get(i + 1) != Some(&b';') => {
                toks.push((Tok::Op(";"), i, i + 1));
                i += 1;
            }
            // A word starts with a letter, digit, `_`, `.`, `/`, `~`, `-` or a quote (tree-sitter
            // reads some words that start otherwise differently from bash: those go to it).
            c if c.is_ascii_alphanumeric()
                || matches!(c, b'_' | b'.' | b'/' | b'~' | b'-' | b'\'' | b'"') =>
            {
                let start = i;
                let mut w = Word::default();
                w.value.reserve(16);
                while i < b.len() {
                    match b[i] {
                        c if plain(c) => {
                            w.value.push(c as char);
                            i += 1;
                        }
                        q @ (b'\'' | b'"') => {
                            let ok = if q == b'\'' { in_single } else { in_double };
                            let close = b[i + 1..].iter().position(|&c| c == q)? + i + 1;
                            if !b[i + 1..close].iter().all(|&c| ok(c)) {
                                return None;
                            }
                            w.value
                                .push_str(std::str::from_utf8(&b[i + 1..close]).ok()?);
                            w.quoted = true;
                            i = close + 1;
                        }
                        b' ' | b'\t' | b'&' | b'|' | b';' => break,
                        _ => return None,
                    }
                }
                w.written = std::str::from_utf8(&b[start..i]).ok()?.to_owned();
                toks.push((Tok::Word(w), start, i));
            }
            _ => return None,
        }
    }
    Some(toks)
}
