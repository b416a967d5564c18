//! Parsing with `tree-sitter-bash`: one parser per thread, a work budget, line continuations
//! joined inside words, and every `ERROR`/`MISSING` node turned into a [`SplitError`].

use std::cell::RefCell;

use tree_sitter::{Node, ParseOptions, ParseState, Parser, Tree, TreeCursor};

use super::{MAX_COMMAND_BYTES, MAX_HEREDOCS, SplitError};

thread_local! {
    /// One parser per thread, created on first use.
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// A parsed command: its (continuation-joined) text and its tree, free of errors.
pub(super) struct Parsed {
    pub(super) text: String,
    pub(super) tree: Tree,
}

/// Progress callbacks allowed per input byte (and a floor): tree-sitter calls back every
/// hundred or so parse operations, and a linear parse of real commands needs far fewer than
/// this, so only pathological error recovery ever hits the budget. Counting calls (not time)
/// keeps the decision a pure function of its input.
const CALLBACKS_PER_BYTE_DIVISOR: usize = 4;
const CALLBACKS_FLOOR: usize = 4096;

/// Parses `text` (a command or a payload); `context` names the payload in errors.
pub(super) fn parse(text: &str, context: &str) -> Result<Parsed, SplitError> {
    if text.len() > MAX_COMMAND_BYTES {
        return Err(SplitError::TooLarge {
            bytes: text.len(),
            max: MAX_COMMAND_BYTES,
        });
    }
    if let Some(at) = text.find('\0') {
        return Err(SplitError::Unsupported(format!(
            "a NUL byte (at byte {at}), which would cut the command short"
        )));
    }
    // tree-sitter-bash's scanner copies its list of pending heredocs at every token, so many
    // heredocs cost quadratic time: bound them before parsing.
    let heredocs = text.matches("<<").count();
    if heredocs > MAX_HEREDOCS {
        return Err(SplitError::Unsupported(format!(
            "{heredocs} heredoc operators (`<<`), more than the {MAX_HEREDOCS} the splitter reads"
        )));
    }
    let tree = parse_raw(&ascii_stand_in(text))?;
    let parsed = match join_continuations(text, &tree) {
        Some(joined) => {
            let tree = parse_raw(&ascii_stand_in(&joined))?;
            Parsed { text: joined, tree }
        }
        None => Parsed {
            text: text.to_owned(),
            tree,
        },
    };
    check_errors(&parsed, context)?;
    check_coverage(&parsed, context)?;
    check_heredocs(&parsed, context)?;
    Ok(parsed)
}

/// Every heredoc ends where bash ends it: at the first line that is exactly its delimiter as
/// bash reads the delimiter word (quotes removed, `\x` as `x`, `$'…'` decoded; leading tabs
/// stripped from each line with `<<-`). tree-sitter-bash and bash disagree on some quoting
/// forms (`<<$'EOF'`); a body that does not end where bash's does is refused.
fn check_heredocs(parsed: &Parsed, context: &str) -> Result<(), SplitError> {
    let src = parsed.text.as_bytes();
    let mut stack = vec![parsed.tree.root_node()];
    while let Some(node) = stack.pop() {
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
        if node.kind() != "heredoc_redirect" {
            continue;
        }
        let mut cursor = node.walk();
        let parts: Vec<Node<'_>> = node.children(&mut cursor).collect();
        let dash = parts.iter().any(|p| p.kind() == "<<-");
        let (Some(start), Some(body)) = (
            parts.iter().find(|p| p.kind() == "heredoc_start"),
            parts.iter().find(|p| p.kind() == "heredoc_body"),
        ) else {
            continue;
        };
        let word = String::from_utf8_lossy(src.get(start.byte_range()).unwrap_or_default());
        let delimiter = bash_delimiter(&word);
        let end = parts.iter().find(|p| p.kind() == "heredoc_end");
        let body_from = src[..body.start_byte()]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        let body_to = end.map_or(src.len(), |e| e.start_byte());
        let strip = |line: &[u8]| -> Vec<u8> {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let line = if dash {
                let tabs = line.iter().take_while(|&&b| b == b'\t').count();
                &line[tabs..]
            } else {
                line
            };
            line.to_vec()
        };
        let ends_early = src[body_from..body_to]
            .split(|&b| b == b'\n')
            .any(|line| strip(line) == delimiter.as_bytes());
        let ends_wrong = end.is_some_and(|e| {
            let line_start = src[..e.start_byte()]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1);
            let line_end = src[e.end_byte()..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(src.len(), |p| e.end_byte() + p);
            src[line_start..line_end] != *delimiter.as_bytes()
                && strip(&src[line_start..line_end]) != delimiter.as_bytes()
        });
        if ends_early || ends_wrong {
            let at = start.start_position();
            return Err(syntax(
                format!(
                    "a heredoc whose end bash reads differently (its delimiter `{word}` is `{delimiter}` to bash)"
                ),
                at,
                context,
            ));
        }
    }
    Ok(())
}

/// A heredoc delimiter word as bash reads it: quote removal (`'…'`, `"…"`, `\x`), and `$'…'`
/// decoded, `$"…"` as its text.
pub(super) fn bash_delimiter(word: &str) -> String {
    let chars: Vec<char> = word.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                if let Some(&c) = chars.get(i + 1) {
                    out.push(c);
                }
                i += 2;
            }
            '\'' => {
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    out.push(chars[i]);
                    i += 1;
                }
                i += 1;
            }
            '$' if chars.get(i + 1) == Some(&'\'') => {
                let mut j = i + 2;
                let mut raw = String::new();
                while j < chars.len() && chars[j] != '\'' {
                    if chars[j] == '\\' && j + 1 < chars.len() {
                        raw.push(chars[j]);
                        j += 1;
                    }
                    raw.push(chars[j]);
                    j += 1;
                }
                out.push_str(&super::word::decode_ansi_c(&raw));
                i = j + 1;
            }
            '$' if chars.get(i + 1) == Some(&'"') => i += 1,
            '"' => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\'
                        && chars
                            .get(i + 1)
                            .is_some_and(|c| matches!(c, '$' | '`' | '"' | '\\'))
                    {
                        i += 1;
                    }
                    out.push(chars[i]);
                    i += 1;
                }
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// The text tree-sitter is given: every non-ASCII character replaced by as many `x` as it has
/// bytes, so byte offsets are unchanged (words are read from the original text).
///
/// tree-sitter-bash 0.25.1's external scanner calls the C `isdigit` on the lookahead code
/// point, which is undefined behaviour past 255 and crashes the process for some (`{` followed
/// by U+70000 segfaults). Bash (like tree-sitter in the C locale) treats non-ASCII characters
/// as word characters, and so does `x`; where the stand-in could read differently (`$é` becomes
/// the expansion `$xx`, two different heredoc delimiters become equal) it only ever reads more
/// as dynamic or as commands, never less.
fn ascii_stand_in(text: &str) -> std::borrow::Cow<'_, str> {
    if text.is_ascii() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            out.extend(std::iter::repeat_n('x', c.len_utf8()));
        }
    }
    std::borrow::Cow::Owned(out)
}

fn parse_raw(text: &str) -> Result<Tree, SplitError> {
    PARSER.with(|cell| {
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| SplitError::Parser("the parser is busy".into()))?;
        if slot.is_none() {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_bash::LANGUAGE.into())
                .map_err(|e| SplitError::Parser(e.to_string()))?;
            *slot = Some(parser);
        }
        let Some(parser) = slot.as_mut() else {
            return Err(SplitError::Parser("no parser".into()));
        };
        let budget = CALLBACKS_FLOOR + text.len() / CALLBACKS_PER_BYTE_DIVISOR;
        let mut calls = 0usize;
        let mut progress = |_: &ParseState| {
            calls += 1;
            crate::work::add(1);
            calls > budget
        };
        let options = ParseOptions::new().progress_callback(&mut progress);
        let bytes = text.as_bytes();
        let tree = parser.parse_with_options(
            &mut |i, _| bytes.get(i..).unwrap_or_default(),
            None,
            Some(options),
        );
        // A cancelled parse leaves state behind; start the next one clean.
        parser.reset();
        tree.ok_or_else(|| {
            SplitError::Parser(
                "the parser's work budget ran out (the command is too complex)".into(),
            )
        })
    })
}

/// Whether a node's text keeps backslash-newlines literal (never a line continuation).
fn keeps_continuations(node: Node<'_>, quoted_heredoc: bool) -> bool {
    match node.kind() {
        "comment" | "raw_string" | "ansi_c_string" | "heredoc_start" | "heredoc_end" => true,
        "heredoc_body" => quoted_heredoc,
        _ => false,
    }
}

/// Whether a heredoc redirect's delimiter is quoted (its body is literal).
pub(super) fn redirect_is_quoted(redirect: Node<'_>, text: &[u8]) -> bool {
    let mut cursor = redirect.walk();
    redirect
        .children(&mut cursor)
        .find(|c| c.kind() == "heredoc_start")
        .and_then(|s| text.get(s.byte_range()))
        .is_some_and(|s| s.iter().any(|b| matches!(b, b'\'' | b'"' | b'\\')))
}

/// The byte ranges inside which backslash-newlines are literal, in order; one pass over the
/// tree with a cursor (no recursion, no `parent()` walks).
fn literal_ranges(tree: &Tree, text: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut cursor = tree.root_node().walk();
    // Whether the nearest heredoc redirect above the cursor is quoted, per depth.
    let mut quoted: Vec<bool> = vec![false];
    loop {
        let node = cursor.node();
        let here = quoted.last().copied().unwrap_or(false);
        if keeps_continuations(node, here) {
            out.push((node.start_byte(), node.end_byte()));
        } else if node.child_count() > 0 && cursor.goto_first_child() {
            let q = if node.kind() == "heredoc_redirect" {
                redirect_is_quoted(node, text)
            } else {
                here
            };
            quoted.push(q);
            continue;
        }
        if !past_subtree(&mut cursor, || {
            quoted.pop();
        }) {
            break;
        }
    }
    out.sort_unstable();
    out
}

/// The command with every line continuation (an unescaped backslash before a newline) removed,
/// except inside comments, single quotes, `$'…'` and quoted heredoc bodies — what bash does
/// before it splits words. `None` when there is none to remove. tree-sitter-bash would read
/// `r\⏎m` as two words; bash reads `rm`.
fn join_continuations(text: &str, tree: &Tree) -> Option<String> {
    let bytes = text.as_bytes();
    if !text.contains("\\\n") {
        return None;
    }
    let literal = literal_ranges(tree, bytes);
    let inside = |at: usize| {
        let k = literal.partition_point(|&(start, _)| start <= at);
        // The ranges never nest (a literal node is not descended into).
        literal[..k].last().is_some_and(|&(s, e)| s <= at && at < e)
    };
    let mut cut: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            if bytes.get(i + 1) == Some(&b'\n') && !inside(i) {
                cut.push(i);
            }
            // A backslash escapes the next byte (inside single quotes the pair is literal
            // either way, and protected above).
            i += 2;
            continue;
        }
        i += 1;
    }
    if cut.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut from = 0;
    for at in cut {
        out.extend_from_slice(&bytes[from..at]);
        from = at + 2;
    }
    out.extend_from_slice(&bytes[from..]);
    // Only ASCII pairs were removed, so the text is still UTF-8.
    String::from_utf8(out).ok()
}

/// Every byte bash reads is read by some token of the tree: between tokens there is only the
/// whitespace bash splits words on (space, tab, newline). tree-sitter-bash can skip text
/// without an `ERROR` node (`cat - 2>&1` loses the `-`), and a reading that skipped something
/// is not bash's reading, so it is refused. One pass over the leaves, without recursion.
fn check_coverage(parsed: &Parsed, context: &str) -> Result<(), SplitError> {
    let bytes = parsed.text.as_bytes();
    let mut read_to = 0;
    let mut cursor = parsed.tree.root_node().walk();
    loop {
        let node = cursor.node();
        match node.kind() {
            // `$⏎"x"` is no translated string to bash: `$` ends its line.
            "simple_expansion" | "concatenation" | "translated_string" => {
                split_word(node, bytes, context)?;
            }
            "file_redirect" => {
                closed_then_word(node, context)?;
                joined_words(node, bytes, context)?;
            }
            "command"
            | "declaration_command"
            | "unset_command"
            | "heredoc_redirect"
            | "herestring_redirect" => joined_words(node, bytes, context)?,
            _ => {}
        }
        if node.child_count() > 0 && cursor.goto_first_child() {
            continue;
        }
        if node.start_byte() > read_to {
            skipped(bytes, read_to, node.start_byte(), context)?;
        }
        misread(node, bytes, context)?;
        read_to = read_to.max(node.end_byte());
        if !past_subtree(&mut cursor, || {}) {
            break;
        }
    }
    skipped(bytes, read_to, bytes.len(), context)
}

/// An error when the parts of one word are not adjacent: bash ends a word at a blank, so `x=$
/// ls` is the assignment `x=$` and the command `ls`, not the expansion `$ ls`.
fn split_word(node: Node<'_>, bytes: &[u8], context: &str) -> Result<(), SplitError> {
    let mut cursor = node.walk();
    let mut end = node.start_byte();
    for child in node.children(&mut cursor) {
        if child.start_byte() != end {
            let at = child.start_position();
            let text = bytes.get(node.byte_range()).unwrap_or_default();
            let snippet: String = String::from_utf8_lossy(text).chars().take(24).collect();
            return Err(syntax(
                format!(
                    "a word the parser read across a blank ({snippet:?}), which bash reads as two"
                ),
                at,
                context,
            ));
        }
        end = child.end_byte();
    }
    Ok(())
}

/// An error when two of a command's words (or a redirect's) touch: bash reads them as one word
/// (`x=$(ls)\;#y` is one assignment; `A='…'rest git log` assigns `A` the whole of `'…'rest`;
/// `<'a'\n'b'` reads one file).
fn joined_words(node: Node<'_>, bytes: &[u8], context: &str) -> Result<(), SplitError> {
    let mut cursor = node.walk();
    let mut previous: Option<Node<'_>> = None;
    for child in node.children(&mut cursor) {
        let in_command = matches!(node.kind(), "command" | "declaration_command");
        if let Some(p) = previous
            && child.start_byte() == p.end_byte()
            && p.is_named()
            && child.is_named()
            && (p.kind() == "variable_assignment" || !in_command)
            && ![p.kind(), child.kind()]
                .iter()
                .any(|k| k.starts_with("heredoc_"))
        {
            let at = child.start_position();
            let text = bytes
                .get(p.start_byte()..child.end_byte())
                .unwrap_or_default();
            let snippet: String = String::from_utf8_lossy(text).chars().take(24).collect();
            return Err(syntax(
                format!("words the parser split where bash reads one ({snippet:?})"),
                at,
                context,
            ));
        }
        previous = Some(child);
    }
    Ok(())
}

/// An error when a word follows `>&-` or `<&-` inside one redirect: tree-sitter-bash reads it as
/// the redirect's target, bash closes the descriptor and reads the word as an argument of the
/// command (`find . >&- -delete` runs `find . -delete`).
fn closed_then_word(node: Node<'_>, context: &str) -> Result<(), SplitError> {
    let mut cursor = node.walk();
    let mut closed = false;
    for child in node.children(&mut cursor) {
        if matches!(child.kind(), ">&-" | "<&-") {
            closed = true;
        } else if closed && child.is_named() {
            let at = child.start_position();
            return Err(syntax(
                "a word after `>&-` or `<&-`, which bash reads as an argument of the command, not the redirect's target".into(),
                at,
                context,
            ));
        }
    }
    Ok(())
}

/// An error when a token's text is not what its kind says, as where tree-sitter-bash reads
/// text bash reads otherwise: a punctuation or keyword token holding more than itself (`$\⏎"`
/// read as an opening quote), a word or name running over a line end (bash ends a word there;
/// a comment ends there too, so the next line is a command), or a descriptor that is not a
/// number (`-2>&1` is the word `-2` and `>&1` to bash).
fn misread(node: Node<'_>, bytes: &[u8], context: &str) -> Result<(), SplitError> {
    let text = bytes.get(node.byte_range()).unwrap_or_default();
    let kind = node.kind();
    let before = bytes.get(..node.start_byte()).unwrap_or_default();
    let after = bytes.get(node.end_byte()).copied();
    let wrong = if node.is_named() {
        match kind {
            "word" | "number" | "variable_name" | "special_variable_name" => text.contains(&b'\n'),
            // A comment starts only where a word could (`a\;#b` is one word to bash).
            "comment" => text.contains(&b'\n') || !at_word_start(before),
            "file_descriptor" => !text.iter().all(u8::is_ascii_digit),
            // The delimiter word ends at a blank or an operator, and the body starts on a
            // later line (`<<'EOF'rm -rf x` is the delimiter `EOFrm`, with `-rf x` arguments).
            "heredoc_start" => !after.is_none_or(ends_word),
            "heredoc_body" => node
                .prev_sibling()
                .is_some_and(|s| !bytes[s.end_byte()..node.start_byte()].contains(&b'\n')),
            _ => false,
        }
    } else if kind == "!" {
        // `!` negates a pipeline only as a word of its own (`!'x'` is the command `!x`).
        text != b"!" || !after.is_none_or(ends_word)
    } else {
        !node.is_missing() && text != kind.as_bytes()
    };
    if !wrong {
        return Ok(());
    }
    let at = node.start_position();
    let snippet: String = String::from_utf8_lossy(text).chars().take(24).collect();
    Err(syntax(
        format!("text the parser misread ({snippet:?} as {kind}), which bash reads otherwise"),
        at,
        context,
    ))
}

/// Whether a byte ends a word for bash: a blank, a line end or an operator character.
fn ends_word(b: u8) -> bool {
    matches!(
        b,
        b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>'
    )
}

/// Whether a word may start after `before`: at the start, or after a blank, a line end or an
/// operator character that is not escaped.
fn at_word_start(before: &[u8]) -> bool {
    let Some((&last, rest)) = before.split_last() else {
        return true;
    };
    let escaped = rest.iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1;
    ends_word(last) && !escaped
}

/// An error when `bytes[from..to]`, text between two tokens, holds anything but word-splitting
/// whitespace.
fn skipped(bytes: &[u8], from: usize, to: usize, context: &str) -> Result<(), SplitError> {
    let gap = bytes.get(from..to).unwrap_or_default();
    let Some(at) = gap.iter().position(|b| !matches!(b, b' ' | b'\t' | b'\n')) else {
        return Ok(());
    };
    let offset = from + at;
    let before = bytes.get(..offset).unwrap_or_default();
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = offset
        - before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1)
        + 1;
    let snippet: String = String::from_utf8_lossy(&gap[at..])
        .chars()
        .take(24)
        .collect();
    Err(SplitError::Syntax {
        what: format!("text the parser skipped ({snippet:?}), which bash would read"),
        line,
        column,
        context: if context.is_empty() {
            String::new()
        } else {
            format!(" in {context}")
        },
    })
}

/// Moves a preorder walk past the subtree at `cursor`: to the next sibling, else to the next
/// sibling of the nearest ancestor that has one (`climbed` runs for each level climbed);
/// `false` when no node follows.
fn past_subtree(cursor: &mut TreeCursor<'_>, mut climbed: impl FnMut()) -> bool {
    loop {
        if cursor.goto_next_sibling() {
            return true;
        }
        if !cursor.goto_parent() {
            return false;
        }
        climbed();
    }
}

/// The first `ERROR` or `MISSING` node, as an error naming it; found without recursion.
fn check_errors(parsed: &Parsed, context: &str) -> Result<(), SplitError> {
    let root = parsed.tree.root_node();
    if !root.has_error() {
        return Ok(());
    }
    let bytes = parsed.text.as_bytes();
    let mut cursor = root.walk();
    let mut found = None;
    loop {
        let node = cursor.node();
        if node.is_missing() || node.is_error() {
            found = Some(node);
            break;
        }
        if node.has_error() && cursor.goto_first_child() {
            continue;
        }
        if !past_subtree(&mut cursor, || {}) {
            break;
        }
    }
    let context = if context.is_empty() {
        String::new()
    } else {
        format!(" in {context}")
    };
    let Some(node) = found else {
        return Err(SplitError::Syntax {
            what: "a syntax error".into(),
            line: 1,
            column: 1,
            context,
        });
    };
    let at = node.start_position();
    let what = if node.is_missing() {
        format!("a missing `{}`", node.kind())
    } else {
        let snippet: String = bytes
            .get(node.byte_range())
            .map(|b| String::from_utf8_lossy(b).chars().take(24).collect())
            .unwrap_or_default();
        describe_error(&snippet)
    };
    Err(SplitError::Syntax {
        what,
        line: at.row + 1,
        column: at.column + 1,
        context,
    })
}

fn describe_error(snippet: &str) -> String {
    let trimmed = snippet.trim_start();
    if trimmed.starts_with("<<") {
        "an unterminated or malformed heredoc".into()
    } else if trimmed.starts_with('"') {
        "an unterminated double quote".into()
    } else if trimmed.starts_with('\'') || trimmed.starts_with("$'") {
        "an unterminated single quote".into()
    } else if trimmed.is_empty() {
        "a syntax error".into()
    } else {
        format!("a syntax error near `{}`", trimmed.replace('\n', "⏎"))
    }
}

/// The error for a reading bash would not share, at `at`, naming the payload it is in.
fn syntax(what: String, at: tree_sitter::Point, context: &str) -> SplitError {
    SplitError::Syntax {
        what,
        line: at.row + 1,
        column: at.column + 1,
        context: if context.is_empty() {
            String::new()
        } else {
            format!(" in {context}")
        },
    }
}
