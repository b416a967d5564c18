//! The fast path: a command made only of plain words (a conservative character set and `*`,
//! `'…'`, and `"…"` without `$`, `` ` `` or `\`), whole-word command substitutions (`$(…)`,
//! `"$(…)"`) whose contents are again such a list, whole-word parameter expansions as
//! arguments (`$NAME`, `${NAME}`, quoted or not), and simple file redirects after a
//! command's words (`>`, `>>`, `<`, a one-digit descriptor before `>`, `N>&M`), separated by
//! `&&`, `||`, `;` and `|`, is split without tree-sitter. It yields exactly what the
//! tree-sitter walk yields for the same text, in the same order (two differential property
//! tests hold it to that); anything else (any other character, a reserved word, an empty
//! command between operators, a word after a redirect, a substitution inside a larger word)
//! goes to tree-sitter.

use super::ShellSubject;
use super::normalize::{SimpleCommand, Stdin};
use super::walk::redirect_subject;
use super::word::{Word, shorten};

/// One thing the fast path yields, in the tree-sitter walk's order.
pub(super) enum Piece {
    /// A simple command, to be normalized.
    Command(SimpleCommand),
    /// A redirect's subject.
    Subject(ShellSubject),
}

/// How deeply substitutions may nest on the fast path (deeper goes to tree-sitter, which
/// has its own bound).
const MAX_DEPTH: usize = 4;

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
fn command_word_ok(w: &Word) -> bool {
    let b = w.written.as_bytes();
    if w.dynamic.is_some()
        || !b.first().is_some_and(|&c| {
            c.is_ascii_alphabetic() || matches!(c, b'_' | b'.' | b'/' | b'\'' | b'"')
        })
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

/// The subjects of `text` in the walk's order, or `None` when it is not for the fast path.
pub(super) fn split(text: &str) -> Option<Vec<Piece>> {
    let mut p = Parser {
        text,
        b: text.as_bytes(),
        i: 0,
    };
    let mut out = Vec::new();
    p.list(&mut out, &Stdin::Inherited, 0)?;
    (p.i == p.b.len()).then_some(out)
}

struct Parser<'a> {
    text: &'a str,
    b: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    /// Whether a word may end at `i`: the end, a blank, an operator, or the `)` closing a
    /// substitution.
    fn boundary(&self, i: usize, depth: usize) -> bool {
        match self.b.get(i) {
            None => true,
            Some(b' ' | b'\t' | b'&' | b'|' | b';') => true,
            Some(b')') => depth > 0,
            Some(_) => false,
        }
    }

    /// A list of commands separated by `&&`, `||`, `;` and `|`, up to the end (or to the `)`
    /// closing a substitution when `depth > 0`). Commands not after a `|` read `stdin`.
    fn list(&mut self, out: &mut Vec<Piece>, stdin: &Stdin, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut piped = false;
        let mut commands = 0;
        loop {
            let this = if piped { &Stdin::Pipe } else { stdin };
            let read = self.command(out, this, depth)?;
            self.skip_blanks();
            let op: &'static str = match (self.peek(), self.b.get(self.i + 1).copied()) {
                (Some(b'&'), Some(b'&')) => "&&",
                (Some(b'|'), Some(b'|')) => "||",
                (Some(b'|'), next) if next != Some(b'&') => "|",
                (Some(b';'), next) if next != Some(b';') => ";",
                (None, _) => {
                    return (read || (commands > 0 && depth == 0 && !piped)).then_some(());
                }
                (Some(b')'), _) if depth > 0 => return read.then_some(()),
                _ => return None,
            };
            if !read {
                return None; // an operator with no command before it
            }
            commands += 1;
            self.i += op.len();
            piped = op == "|";
            if op != ";" {
                // A trailing `&&`, `||` or `|` is not for the fast path (a trailing `;` is).
                self.skip_blanks();
                self.peek()?;
            }
        }
    }

    /// One simple command: words, then redirects. `Some(false)` when there is none here.
    fn command(&mut self, out: &mut Vec<Piece>, stdin: &Stdin, depth: usize) -> Option<bool> {
        let mut words: Vec<Word> = Vec::new();
        let mut subs: Vec<Piece> = Vec::new();
        let mut redirects: Vec<Piece> = Vec::new();
        let mut redirected = false;
        let mut reads_file = false;
        let (mut start, mut end) = (None, 0);
        loop {
            self.skip_blanks();
            let Some(c) = self.peek() else { break };
            if matches!(c, b'&' | b'|' | b';') || (c == b')' && depth > 0) {
                break;
            }
            let fd = c.is_ascii_digit() && self.b.get(self.i + 1) == Some(&b'>');
            if fd || matches!(c, b'>' | b'<') {
                if words.is_empty() {
                    return None; // a redirect before the command
                }
                if fd && words.last().is_some_and(|w| w.written == "-") {
                    // tree-sitter-bash skips a bare `-` before `N>`; the walk refuses that.
                    return None;
                }
                redirected = true;
                let (subject, on_stdin) = self.redirect(depth)?;
                reads_file |= on_stdin;
                redirects.extend(subject.map(Piece::Subject));
                continue;
            }
            if redirected {
                return None; // a word after a redirect: tree-sitter attaches it oddly
            }
            let at = self.i;
            let w = self.word(depth, stdin, &mut subs)?;
            start.get_or_insert(at);
            end = self.i;
            words.push(w);
        }
        let Some(start) = start else {
            return Some(false);
        };
        if reads_file && !subs.is_empty() {
            return None; // which stdin a substitution sees: left to the walk
        }
        let mut assignments = words;
        let split = assignments.iter().take_while(|w| w.is_assignment()).count();
        let words = assignments.split_off(split);
        match words.first() {
            Some(first)
                if RESERVED.contains(&first.written.as_str()) || !command_word_ok(first) =>
            {
                return None;
            }
            Some(_) => {}
            None if redirected || !subs.is_empty() => return None,
            None => {}
        }
        out.push(Piece::Command(SimpleCommand {
            text: self.text.get(start..end)?.to_owned(),
            assignments,
            words,
            stdin: if reads_file {
                Stdin::File
            } else {
                stdin.clone()
            },
        }));
        out.append(&mut subs);
        out.append(&mut redirects);
        Some(true)
    }

    /// A redirect at the cursor: its subject (none for a descriptor duplication or a device
    /// such as `/dev/null`) and whether it sets the command's stdin.
    fn redirect(&mut self, depth: usize) -> Option<(Option<ShellSubject>, bool)> {
        let start = self.i;
        let fd = self.peek().filter(u8::is_ascii_digit);
        if fd.is_some() {
            self.i += 1;
        }
        let op = match (self.peek()?, self.b.get(self.i + 1).copied()) {
            (b'>', Some(b'>')) => ">>",
            (b'>', Some(b'&')) => ">&",
            (b'>', Some(b'|' | b'(')) | (b'<', Some(b'<' | b'&' | b'>' | b'(')) => return None,
            (b'>', _) => ">",
            // tree-sitter-bash reads `0<f` as a word `0` and `<f`: left to it.
            (b'<', _) if fd.is_none() => "<",
            _ => return None,
        };
        self.i += op.len();
        if op == ">&" {
            // Only `N>&M`: a duplication, not a subject.
            let digits = self.i;
            while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.i += 1;
            }
            return (self.i > digits && self.boundary(self.i, depth)).then_some((None, false));
        }
        self.skip_blanks();
        let w = self.word(depth, &Stdin::Inherited, &mut Vec::new())?;
        if w.dynamic.is_some() {
            return None;
        }
        let text = self.text.get(start..self.i)?.to_owned();
        let on_stdin = op == "<";
        Some((redirect_subject(op, &w, text), on_stdin))
    }

    /// A whole-word parameter expansion at the cursor: `$NAME`, `${NAME}`, `"$NAME"` or
    /// `"${NAME}"` (a name of letters, digits and `_`, not starting with a digit). Not static:
    /// the word is dynamic, as the walk reads it. The cursor moves only on success.
    fn variable(&mut self, depth: usize) -> Option<Word> {
        let start = self.i;
        let b = self.b;
        let quoted = b.get(start) == Some(&b'"');
        let mut i = start + usize::from(quoted);
        if b.get(i) != Some(&b'$') {
            return None;
        }
        i += 1;
        let braced = b.get(i) == Some(&b'{');
        i += usize::from(braced);
        let name = i;
        if !b
            .get(i)
            .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
        {
            return None;
        }
        while b
            .get(i)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            i += 1;
        }
        if i == name {
            return None;
        }
        if braced {
            if b.get(i) != Some(&b'}') {
                return None;
            }
            i += 1;
        }
        if quoted {
            if b.get(i) != Some(&b'"') {
                return None;
            }
            i += 1;
        }
        if !self.boundary(i, depth) {
            return None;
        }
        let written = self.text.get(start..i)?;
        let value = if quoted {
            written.get(1..written.len() - 1)?
        } else {
            written
        };
        self.i = i;
        Some(Word {
            written: written.to_owned(),
            value: value.to_owned(),
            dynamic: Some(format!("`{}`", shorten(value))),
            quoted,
            ..Word::default()
        })
    }

    /// A word at the cursor: plain characters and quotes, or a whole-word substitution
    /// (`$(…)` or `"$(…)"`) whose commands are pushed to `subs` (they read `stdin`).
    fn word(&mut self, depth: usize, stdin: &Stdin, subs: &mut Vec<Piece>) -> Option<Word> {
        let start = self.i;
        let b = self.b;
        if let Some(w) = self.variable(depth) {
            return Some(w);
        }
        let quoted_sub = b.get(start..start + 3) == Some(b"\"$(");
        if quoted_sub || b.get(start..start + 2) == Some(b"$(") {
            self.i += if quoted_sub { 3 } else { 2 };
            self.list(subs, stdin, depth + 1)?;
            if self.peek() != Some(b')') {
                return None;
            }
            self.i += 1;
            if quoted_sub {
                if self.peek() != Some(b'"') {
                    return None;
                }
                self.i += 1;
            }
            if !self.boundary(self.i, depth) {
                return None;
            }
            let written = self.text.get(start..self.i)?;
            let value = if quoted_sub {
                written.get(1..written.len() - 1)?
            } else {
                written
            };
            return Some(Word {
                written: written.to_owned(),
                value: value.to_owned(),
                dynamic: Some(format!("`{}`", shorten(value))),
                quoted: quoted_sub,
                ..Word::default()
            });
        }
        // A word starts with a letter, digit, `_`, `.`, `/`, `~`, `-` or a quote (tree-sitter
        // reads some words that start otherwise differently from bash: those go to it).
        let first = self.peek()?;
        if !(first.is_ascii_alphanumeric()
            || matches!(
                first,
                b'_' | b'.' | b'/' | b'~' | b'-' | b'*' | b'\'' | b'"'
            ))
        {
            return None;
        }
        let mut w = Word::default();
        w.value.reserve(16);
        while let Some(c) = self.peek() {
            match c {
                c if plain(c) => {
                    w.value.push(c as char);
                    self.i += 1;
                }
                b'*' => {
                    w.glob = true;
                    w.value.push('*');
                    self.i += 1;
                }
                q @ (b'\'' | b'"') => {
                    let ok = if q == b'\'' { in_single } else { in_double };
                    let close = b[self.i + 1..].iter().position(|&c| c == q)? + self.i + 1;
                    if !b[self.i + 1..close].iter().all(|&c| ok(c)) {
                        return None;
                    }
                    w.value.push_str(self.text.get(self.i + 1..close)?);
                    w.quoted = true;
                    self.i = close + 1;
                }
                _ if self.boundary(self.i, depth) => break,
                _ => return None,
            }
        }
        w.written = self.text.get(start..self.i)?.to_owned();
        Some(w)
    }
}
