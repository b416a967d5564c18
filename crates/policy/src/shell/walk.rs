//! The walk: a parsed tree → simple commands, redirect targets and payloads, without
//! recursion (an explicit stack, a nesting bound), then payloads parsed in turn.

use std::collections::HashMap;

use tree_sitter::Node;

use super::fast;
use super::normalize::{ShellText, SimpleCommand, Stdin, normalize, unknown_subject};
use super::parse::{self, Parsed, redirect_is_quoted};
use super::word::{Word, shorten, text_of, word_from_nodes};
use super::{
    MAX_NESTING, MAX_PAYLOAD_DEPTH, MAX_SUBJECT_TEXT_FACTOR, MAX_SUBJECTS, Redirect,
    SUBJECT_TEXT_FLOOR, ShellCommand, ShellSubject, SplitError,
};

/// What walking one tree yields, in source order.
enum Item {
    Subject(ShellSubject),
    Payload(ShellText),
}

/// Splits a command: parse, walk, then parse and walk each literal payload where it occurs,
/// to [`MAX_PAYLOAD_DEPTH`].
pub(super) fn split(command: &str) -> Result<Vec<ShellSubject>, SplitError> {
    let mut out: Vec<ShellSubject> = Vec::new();
    // Each level: the items left to emit, and whether its subjects are constraints, and how
    // its commands were reached.
    let mut stack: Vec<(std::vec::IntoIter<Item>, bool, Option<String>)> =
        vec![(walk_text(command, "")?.into_iter(), false, None)];
    while let Some((items, constraint, via)) = stack.last_mut() {
        let Some(item) = items.next() else {
            stack.pop();
            continue;
        };
        let (constraint, via) = (*constraint, via.clone());
        match item {
            Item::Subject(mut s) => {
                if let ShellSubject::Command(c) = &mut s {
                    if constraint {
                        c.constraint = true;
                    }
                    if c.via.is_none() {
                        c.via = via;
                    }
                }
                out.push(s);
                if out.len() > MAX_SUBJECTS {
                    return Err(SplitError::TooManySubjects { max: MAX_SUBJECTS });
                }
            }
            Item::Payload(p) => {
                if stack.len() > MAX_PAYLOAD_DEPTH {
                    return Err(SplitError::TooDeep {
                        what: "payloads (`bash -c`, `eval`, heredocs fed to a shell)",
                        max: MAX_PAYLOAD_DEPTH,
                    });
                }
                let context = format!("the payload of {}", p.via);
                let items = walk_text(&p.text, &context)?;
                stack.push((items.into_iter(), constraint || p.constraint, Some(p.via)));
            }
        }
    }
    follow_directory_changes(&mut out);
    Ok(out)
}

/// The most directories a relative target may be resolved against after `cd`s; past it the
/// target is unknown.
const MAX_DIRECTORIES: usize = 8;

/// After `cd DIR` (or `pushd DIR`), bash resolves a relative redirect target against `DIR`,
/// not the call's working directory: each later relative `write` or `read` subject also gets
/// a subject for every directory the shell may be in by then (the working directory stays
/// one of them: a `cd` can fail, or run in a subshell). After a `cd` whose target is not a
/// literal (`cd "$D"`, `cd -`, `popd`), a later relative target is unknown.
fn follow_directory_changes(subjects: &mut Vec<ShellSubject>) {
    let mut dirs: Vec<String> = vec![String::new()];
    let mut lost: Option<String> = None;
    let mut out = Vec::with_capacity(subjects.len());
    for s in subjects.drain(..) {
        match &s {
            ShellSubject::Command(c) => {
                if let Some(change) = directory_change(c) {
                    match change {
                        Ok(target) => {
                            let mut next = dirs.clone();
                            for d in &dirs {
                                let joined = join_dir(d, &target);
                                if !next.contains(&joined) {
                                    next.push(joined);
                                }
                            }
                            if next.len() > MAX_DIRECTORIES {
                                lost.get_or_insert(format!(
                                    "the command changes directory more than {MAX_DIRECTORIES} ways"
                                ));
                            }
                            dirs = next;
                        }
                        Err(why) => {
                            lost.get_or_insert(why);
                        }
                    }
                }
                out.push(s);
            }
            ShellSubject::Write(r) | ShellSubject::Read(r) => {
                let relative = !r.path.starts_with('/') && !r.path.starts_with('~');
                if !relative || (dirs.len() == 1 && lost.is_none()) {
                    out.push(s);
                    continue;
                }
                let write = matches!(s, ShellSubject::Write(_));
                let make = |path: String, text: String, unknown: Option<String>| {
                    let r = Redirect {
                        text,
                        path,
                        unknown,
                    };
                    if write {
                        ShellSubject::Write(r)
                    } else {
                        ShellSubject::Read(r)
                    }
                };
                let mut original = r.clone();
                if let Some(why) = &lost {
                    original.unknown.get_or_insert_with(|| {
                        format!("after a change of directory Warden cannot follow ({why}), the relative target `{}` is not known", r.path)
                    });
                }
                let extra: Vec<ShellSubject> = dirs
                    .iter()
                    .filter(|d| !d.is_empty())
                    .map(|d| {
                        make(
                            join_dir(d, &r.path),
                            format!("{} (after `cd {d}`)", r.text),
                            original.unknown.clone(),
                        )
                    })
                    .collect();
                out.push(make(
                    original.path.clone(),
                    original.text.clone(),
                    original.unknown.clone(),
                ));
                out.extend(extra);
            }
        }
    }
    *subjects = out;
}

/// A `cd`/`pushd`/`popd` subject's target: `Ok(dir)` for a literal one (`~` for none),
/// `Err(why)` when it cannot be known; `None` for any other command.
fn directory_change(c: &ShellCommand) -> Option<Result<String, String>> {
    let (program, args) = c.normalized.split_first()?;
    if !matches!(program.as_str(), "cd" | "pushd" | "popd") {
        return None;
    }
    let args: Vec<&String> = args
        .iter()
        .filter(|a| !matches!(a.as_str(), "-L" | "-P" | "-e" | "-@" | "--"))
        .collect();
    let dynamic = |a: &str| a.contains(['$', '`', '*', '?', '[', '{']) || a.starts_with("<(");
    Some(match (program.as_str(), args.as_slice()) {
        ("popd", _) => Err("`popd` returns to a directory of an earlier call".into()),
        (_, []) => Ok("~".into()),
        (_, [a]) if a.as_str() == "-" => Err("`cd -` returns to the previous directory".into()),
        (_, [a]) if a.starts_with('+') || a.starts_with('-') => {
            Err(format!("`{program} {a}` moves in the directory stack"))
        }
        (_, [a]) if dynamic(a) || c.unknown.is_some() => Err(format!(
            "`{program} {a}` names a directory that is not a literal"
        )),
        (_, [a]) => Ok((*a).clone()),
        _ => Err(format!("`{program}` with several arguments")),
    })
}

/// `dir` then `path`, lexically (`a/b` + `../c` = `a/c`); an absolute or home path replaces.
fn join_dir(dir: &str, path: &str) -> String {
    if path.starts_with('/') || path.starts_with('~') || dir.is_empty() {
        return path.to_owned();
    }
    let mut parts: Vec<&str> = dir
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let absolute = dir.starts_with('/');
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else if joined.is_empty() {
        ".".into()
    } else {
        joined
    }
}

fn walk_text(text: &str, context: &str) -> Result<Vec<Item>, SplitError> {
    if text.len() <= super::MAX_COMMAND_BYTES
        && let Some(pieces) = fast::split(text)
    {
        return Ok(fast_items(pieces));
    }
    walk_tree(text, context)
}

/// The fast path's pieces as the walk's items.
fn fast_items(pieces: Vec<fast::Piece>) -> Vec<Item> {
    let mut items = Vec::with_capacity(pieces.len());
    for p in pieces {
        match p {
            fast::Piece::Command(c) => push_normalized(&mut items, normalize(&c)),
            fast::Piece::Subject(s) => items.push(Item::Subject(s)),
        }
    }
    items
}

/// The tree-sitter walk alone (the fast path's reference).
fn walk_tree(text: &str, context: &str) -> Result<Vec<Item>, SplitError> {
    let parsed = parse::parse(text, context)?;
    Walker::new(&parsed).walk()
}

fn push_normalized(items: &mut Vec<Item>, n: super::normalize::Normalized) {
    for c in n.commands {
        items.push(Item::Subject(ShellSubject::Command(c)));
    }
    for w in n.writes {
        items.push(Item::Subject(ShellSubject::Write(w)));
    }
    for p in n.payloads {
        items.push(Item::Payload(p));
    }
    for c in n.unknown {
        items.push(Item::Subject(ShellSubject::Command(c)));
    }
}

/// One entry of the walk's stack: a node, the stdin its commands inherit, its nesting.
#[derive(Clone, Copy)]
struct Frame<'t> {
    node: Node<'t>,
    /// The parent's kind (`Node::parent` is not constant-time).
    parent: &'static str,
    /// Inside a heredoc redirect whose delimiter is quoted.
    quoted_heredoc: bool,
    /// Index into [`Walker::stdins`].
    stdin: usize,
    nesting: usize,
}

struct Walker<'t> {
    src: &'t [u8],
    root: Node<'t>,
    stdins: Vec<Stdin>,
    /// Words tree-sitter attached to a redirect (`echo > f a b`): they belong to the command.
    extra_words: HashMap<usize, Vec<Node<'t>>>,
    /// The stdin an input redirect gives the last command of a list or pipeline, by node:
    /// tree-sitter-bash attaches the redirect of `a && b < f` or `a | b < f` to the whole
    /// list or pipeline, while bash applies it to `b` alone.
    tail_stdin: HashMap<usize, usize>,
    items: Vec<Item>,
    /// Constructs Warden cannot know the effect of (arithmetic on something that is not a
    /// number), emitted after the commands so a deny rule that also fires is the one cited.
    unknown: Vec<Item>,
    /// How many more bytes of source text the subjects of this walk may span
    /// ([`MAX_SUBJECT_TEXT_FACTOR`]).
    span_left: usize,
}

/// Kinds whose children are not a level deeper (long `a && b && …` chains nest in the tree).
fn flat(kind: &str) -> bool {
    matches!(
        kind,
        "list" | "pipeline" | "program" | "redirected_statement"
    )
}

impl<'t> Walker<'t> {
    fn new(parsed: &'t Parsed) -> Self {
        Walker {
            src: parsed.text.as_bytes(),
            root: parsed.tree.root_node(),
            stdins: vec![Stdin::Inherited, Stdin::Pipe],
            extra_words: HashMap::new(),
            tail_stdin: HashMap::new(),
            items: Vec::new(),
            unknown: Vec::new(),
            span_left: MAX_SUBJECT_TEXT_FACTOR
                .saturating_mul(parsed.text.len())
                .saturating_add(SUBJECT_TEXT_FLOOR),
        }
    }

    /// Takes a subject's span from the walk's budget: a command nested in another command's
    /// words is part of that command's text too, so deep nesting makes the subjects' text (and
    /// the work of matching it) grow with the square of the command; past the budget the
    /// command is refused instead.
    fn spend(&mut self, node: Node<'_>) -> Result<(), SplitError> {
        let span = node.end_byte().saturating_sub(node.start_byte());
        self.span_left = self
            .span_left
            .checked_sub(span)
            .ok_or(SplitError::TooRepetitive {
                factor: MAX_SUBJECT_TEXT_FACTOR,
            })?;
        Ok(())
    }

    fn text(&self, node: Node<'_>) -> String {
        text_of(self.src, node.start_byte(), node.end_byte())
    }

    fn walk(mut self) -> Result<Vec<Item>, SplitError> {
        let mut stack = vec![Frame {
            node: self.root,
            parent: "",
            quoted_heredoc: false,
            stdin: 0,
            nesting: 0,
        }];
        while let Some(f) = stack.pop() {
            if f.nesting > MAX_NESTING {
                return Err(SplitError::TooDeep {
                    what: "constructs",
                    max: MAX_NESTING,
                });
            }
            let kind = f.node.kind();
            if matches!(
                kind,
                "command"
                    | "variable_assignment"
                    | "variable_assignments"
                    | "declaration_command"
                    | "unset_command"
                    | "test_command"
            ) {
                self.spend(f.node)?;
            }
            let mut child_stdin: Vec<(usize, usize)> = Vec::new(); // (child index, stdin)
            match kind {
                "comment" => continue,
                "command" => self.command(f)?,
                "variable_assignment" | "variable_assignments"
                    if !matches!(
                        f.parent,
                        "command" | "declaration_command" | "variable_assignments"
                    ) =>
                {
                    self.assignments(f);
                }
                "declaration_command" | "unset_command" => self.declaration(f),
                "test_command" => {
                    self.test_arithmetic(f.node);
                    self.test_command(f);
                }
                "arithmetic_expansion" | "c_style_for_statement" => self.arithmetic(f.node),
                "compound_statement" if f.node.child(0).is_some_and(|c| c.kind() == "((") => {
                    self.arithmetic(f.node);
                }
                "subscript" => {
                    if let Some(why) = super::arith::subscript(f.node, self.src) {
                        self.unknown_construct(f.node, why);
                    }
                }
                // tree-sitter-bash does not parse backticks inside heredoc bodies or `${…}`, nor
                // nested (escaped) backticks: read those texts as bash does.
                "heredoc_body" if !f.quoted_heredoc => {
                    self.backticks(f.node, &self.text(f.node))?;
                }
                "expansion" | "word" | "string_content" => {
                    if kind == "expansion" {
                        self.expansion_arithmetic(f.node);
                    }
                    let text = self.text(f.node);
                    let inside_expansion = kind != "expansion" && f.parent == "expansion";
                    if text.contains('`') && !inside_expansion {
                        self.backticks(f.node, &text)?;
                    }
                }
                "command_substitution" => {
                    let text = self.text(f.node);
                    if let Some(inner) = text.strip_prefix('`').and_then(|t| t.strip_suffix('`'))
                        && inner.contains('\\')
                    {
                        self.items.push(Item::Payload(ShellText {
                            text: unescape_backslashed(inner),
                            via: "a backtick substitution".into(),
                            constraint: false,
                        }));
                    }
                }
                "file_redirect" => self.file_redirect(f.node)?,
                "redirected_statement" => {
                    child_stdin = self.redirected_statement(f)?;
                }
                "pipeline" => {
                    let mut piped = false;
                    let mut cursor = f.node.walk();
                    for (i, c) in f.node.children(&mut cursor).enumerate() {
                        if !c.is_named() && matches!(c.kind(), "|" | "|&") {
                            piped = true;
                        } else if piped && c.is_named() {
                            child_stdin.push((i, 1));
                        }
                    }
                }
                _ => {}
            }
            let nesting = if flat(kind) { f.nesting } else { f.nesting + 1 };
            let quoted_heredoc = if kind == "heredoc_redirect" {
                redirect_is_quoted(f.node, self.src)
            } else {
                f.quoted_heredoc
            };
            let mut cursor = f.node.walk();
            let children: Vec<Node<'t>> = f.node.children(&mut cursor).collect();
            for (i, child) in children.into_iter().enumerate().rev() {
                if !child.is_named() {
                    continue;
                }
                let stdin = match self.tail_stdin.remove(&child.id()) {
                    Some(s) => s,
                    None => child_stdin
                        .iter()
                        .find(|(c, _)| *c == i)
                        .map_or(f.stdin, |(_, s)| *s),
                };
                stack.push(Frame {
                    node: child,
                    parent: kind,
                    quoted_heredoc,
                    stdin,
                    nesting,
                });
            }
        }
        self.items.append(&mut self.unknown);
        Ok(self.items)
    }

    /// A redirected statement: its stdin-affecting redirects set the body's stdin; words
    /// tree-sitter attached to a redirect target belong to a command body.
    fn redirected_statement(&mut self, f: Frame<'t>) -> Result<Vec<(usize, usize)>, SplitError> {
        let node = f.node;
        let body = node.child_by_field_name("body");
        let mut stdin = None;
        let mut extra: Vec<Node<'t>> = Vec::new();
        let mut cursor = node.walk();
        let mut body_index = None;
        for (i, c) in node.children(&mut cursor).enumerate() {
            if Some(c) == body {
                body_index = Some(i);
                continue;
            }
            if let Some(s) = self.stdin_of(c) {
                stdin = Some(s);
            }
            if c.kind() == "file_redirect" {
                extra.extend(destinations(c).into_iter().skip(1));
            }
            if c.kind() == "heredoc_redirect" {
                // Words after a heredoc's delimiter on its line are the command's arguments
                // (`cat <<'EOF' -n` or `cat <<EOF > out more`), wherever tree-sitter puts them.
                let mut hc = c.walk();
                for part in c.named_children(&mut hc) {
                    match part.kind() {
                        "heredoc_start"
                        | "heredoc_body"
                        | "heredoc_end"
                        | "file_descriptor"
                        | "herestring_redirect"
                        | "heredoc_redirect" => {}
                        "file_redirect" => extra.extend(destinations(part).into_iter().skip(1)),
                        // A pipeline or list the parser put inside the redirect
                        // (`cat <<EOF |& echo x`) is commands of its own, walked as such, not
                        // words of this command.
                        "command"
                        | "pipeline"
                        | "list"
                        | "redirected_statement"
                        | "subshell"
                        | "compound_statement"
                        | "negated_command" => {}
                        _ => extra.push(part),
                    }
                }
            }
        }
        if !extra.is_empty() {
            match body {
                Some(b) if b.kind() == "command" => {
                    self.extra_words.entry(b.id()).or_default().extend(extra);
                }
                _ => {
                    return Err(SplitError::Unsupported(
                        "words after the redirect target of a compound command".into(),
                    ));
                }
            }
        }
        Ok(match (stdin, body, body_index) {
            (Some(s), Some(body), Some(i)) => {
                self.stdins.push(s);
                let stdin = self.stdins.len() - 1;
                if matches!(body.kind(), "list" | "pipeline") {
                    let mut tail = body;
                    while matches!(tail.kind(), "list" | "pipeline")
                        && let Some(last) =
                            tail.named_child(tail.named_child_count().saturating_sub(1))
                    {
                        tail = last;
                    }
                    self.tail_stdin.insert(tail.id(), stdin);
                    Vec::new()
                } else {
                    vec![(i, stdin)]
                }
            }
            _ => Vec::new(),
        })
    }

    /// The stdin a redirect node gives, if it affects stdin.
    fn stdin_of(&self, r: Node<'_>) -> Option<Stdin> {
        // A heredoc or here-string on another descriptor (`3<<EOF`) is not stdin.
        if matches!(r.kind(), "herestring_redirect" | "heredoc_redirect")
            && r.child_by_field_name("descriptor")
                .is_some_and(|d| self.text(d) != "0")
        {
            return None;
        }
        match r.kind() {
            "herestring_redirect" => {
                let mut cursor = r.walk();
                let parts: Vec<Node<'_>> = r
                    .named_children(&mut cursor)
                    .filter(|c| c.kind() != "file_descriptor")
                    .collect();
                let w = word_from_nodes(&parts, self.src);
                Some(match w.dynamic {
                    Some(d) => Stdin::Dynamic(d),
                    None => Stdin::Literal(format!("{}\n", w.value)),
                })
            }
            "heredoc_redirect" => {
                let mut cursor = r.walk();
                let body = r.children(&mut cursor).find(|c| c.kind() == "heredoc_body");
                let dash = {
                    let mut cursor = r.walk();
                    r.children(&mut cursor).any(|c| c.kind() == "<<-")
                };
                let Some(body) = body else {
                    return Some(Stdin::Literal(String::new()));
                };
                let quoted = redirect_is_quoted(r, self.src);
                let mut text = self.text(body);
                if dash {
                    text = text
                        .split('\n')
                        .map(|l| l.trim_start_matches('\t'))
                        .collect::<Vec<_>>()
                        .join("\n");
                }
                if quoted {
                    return Some(Stdin::Literal(text));
                }
                let mut cursor = body.walk();
                let dynamic = body
                    .named_children(&mut cursor)
                    .find(|c| c.kind() != "heredoc_content");
                Some(match dynamic {
                    Some(d) => Stdin::Dynamic(format!("`{}`", shorten(&self.text(d)))),
                    // tree-sitter leaves backticks in a body unparsed: still a substitution.
                    None if backtick_segments(&text).is_none_or(|b| !b.is_empty()) => {
                        Stdin::Dynamic("a backtick substitution".into())
                    }
                    None => Stdin::Literal(unescape_backslashed(&text)),
                })
            }
            "file_redirect" => {
                let op = operator(r)?;
                let fd = r.child_by_field_name("descriptor").map(|d| self.text(d));
                let on_stdin = fd.as_deref().is_none_or(|d| d == "0");
                (on_stdin && matches!(op, "<" | "<&")).then_some(Stdin::File)
            }
            _ => None,
        }
    }

    fn command(&mut self, f: Frame<'t>) -> Result<(), SplitError> {
        let node = f.node;
        let mut assignments: Vec<Word> = Vec::new();
        let mut groups: Vec<Vec<Node<'t>>> = Vec::new();
        let mut stdin = self.stdins.get(f.stdin).cloned().unwrap_or_default();
        let mut own_stdin: Option<Stdin> = None;
        let mut cursor = node.walk();
        let children: Vec<(Option<&'static str>, Node<'t>)> = node
            .children(&mut cursor)
            .enumerate()
            .map(|(i, c)| (node.field_name_for_child(i as u32), c))
            .collect();
        let push_word = |groups: &mut Vec<Vec<Node<'t>>>, n: Node<'t>| match groups.last_mut() {
            Some(g) if g.last().is_some_and(|l| l.end_byte() == n.start_byte()) => g.push(n),
            _ => groups.push(vec![n]),
        };
        for (field, c) in children {
            match (field, c.kind()) {
                (None, "variable_assignment") if groups.is_empty() => {
                    assignments.push(word_from_nodes(&[c], self.src));
                }
                (Some("name"), _) => {
                    let mut cursor = c.walk();
                    let parts: Vec<Node<'t>> = c.children(&mut cursor).collect();
                    if parts.is_empty() {
                        push_word(&mut groups, c);
                    }
                    for p in parts {
                        push_word(&mut groups, p);
                    }
                }
                (Some("argument"), _) => push_word(&mut groups, c),
                (Some("redirect"), _) => {
                    if let Some(s) = self.stdin_of(c) {
                        own_stdin = Some(s);
                    }
                    if c.kind() == "file_redirect" {
                        for extra in destinations(c).into_iter().skip(1) {
                            push_word(&mut groups, extra);
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(extra) = self.extra_words.remove(&node.id()) {
            for n in extra {
                push_word(&mut groups, n);
            }
        }
        if let Some(s) = own_stdin {
            stdin = s;
        }
        let words: Vec<Word> = groups
            .iter()
            .map(|g| word_from_nodes(g, self.src))
            .collect();
        if words.is_empty() && assignments.is_empty() {
            return Ok(());
        }
        let simple = SimpleCommand {
            text: self.text(node).trim().to_owned(),
            assignments,
            words,
            stdin,
        };
        self.emit(normalize(&simple));
        Ok(())
    }

    fn emit(&mut self, n: super::normalize::Normalized) {
        push_normalized(&mut self.items, n);
    }

    /// Every backtick substitution in a text tree-sitter leaves unparsed: each is a payload.
    fn backticks(&mut self, node: Node<'_>, text: &str) -> Result<(), SplitError> {
        for inner in backtick_segments(text).ok_or_else(|| SplitError::Syntax {
            what: "an unterminated backtick".into(),
            line: node.start_position().row + 1,
            column: node.start_position().column + 1,
            context: String::new(),
        })? {
            self.items.push(Item::Payload(ShellText {
                text: unescape_backslashed(&inner),
                via: "a backtick substitution".into(),
                constraint: false,
            }));
        }
        Ok(())
    }

    /// A construct Warden cannot know the effect of: an unknown command subject naming it.
    fn unknown_construct(&mut self, node: Node<'_>, why: String) {
        let text = shorten(&self.text(node));
        self.unknown
            .push(Item::Subject(ShellSubject::Command(unknown_subject(
                &text, why,
            ))));
    }

    /// `$((…))`, `$[…]`, `((…))`, the header of `for ((…))`: every operand a number.
    fn arithmetic(&mut self, node: Node<'t>) {
        let mut cursor = node.walk();
        let parts: Vec<Node<'t>> = node
            .named_children(&mut cursor)
            .filter(|c| !matches!(c.kind(), "do_group" | "compound_statement"))
            .collect();
        if let Some(why) = parts
            .into_iter()
            .find_map(|p| super::arith::expression(p, self.src))
        {
            self.unknown_construct(node, why);
        }
    }

    /// `[[ a -eq b ]]` (and `-ne`, `-lt`, `-le`, `-gt`, `-ge`) evaluates both operands;
    /// `[[ -v a[i] ]]` evaluates the subscript.
    fn test_arithmetic(&mut self, node: Node<'t>) {
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            let mut cursor = n.walk();
            let children: Vec<Node<'t>> = n.named_children(&mut cursor).collect();
            let op = children
                .iter()
                .find(|c| c.kind() == "test_operator")
                .map(|c| self.text(*c));
            let why = match (n.kind(), op.as_deref()) {
                ("binary_expression", Some("-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge")) => {
                    children
                        .iter()
                        .filter(|c| c.kind() != "test_operator")
                        .find_map(|c| super::arith::expression(*c, self.src))
                }
                ("unary_expression", Some("-v")) => children
                    .iter()
                    .filter(|c| c.kind() != "test_operator")
                    .find(|c| self.text(**c).contains('['))
                    .map(|c| {
                        format!(
                            "`-v {}` evaluates the subscript of a variable name, and a subscript can run a command (`a[$(…)]`)",
                            shorten(&self.text(*c))
                        )
                    }),
                _ => None,
            };
            if let Some(why) = why {
                self.unknown_construct(node, why);
                return;
            }
            stack.extend(children);
        }
    }

    /// `${s:offset:length}` evaluates its offsets; `${!name}` reads a variable named by a
    /// value (which can name `a[$(…)]`). `${!prefix*}` and `${!a[@]}` list names and keys.
    fn expansion_arithmetic(&mut self, node: Node<'t>) {
        let text = self.text(node);
        if let Some(rest) = text.strip_prefix("${!")
            && !rest.ends_with("*}")
            && !rest.ends_with("@}")
            && !rest.ends_with("[@]}")
            && !rest.ends_with("[*]}")
        {
            self.unknown_construct(
                node,
                format!(
                    "`{}` expands a variable named by a value, which can name an array element with a command in its subscript",
                    shorten(&text)
                ),
            );
            return;
        }
        let mut cursor = node.walk();
        let children: Vec<Node<'t>> = node.children(&mut cursor).collect();
        let Some(colon) = children.iter().position(|c| c.kind() == ":") else {
            return;
        };
        if let Some(why) = children[colon + 1..]
            .iter()
            .filter(|c| c.is_named())
            .find_map(|c| super::arith::expression(*c, self.src))
        {
            self.unknown_construct(node, why);
        }
    }

    /// A statement of assignments only (`X=1`, `X=$(…)`).
    fn assignments(&mut self, f: Frame<'t>) {
        let node = f.node;
        let assignments: Vec<Word> = if node.kind() == "variable_assignments" {
            let mut cursor = node.walk();
            node.named_children(&mut cursor)
                .filter(|c| c.kind() == "variable_assignment")
                .map(|c| word_from_nodes(&[c], self.src))
                .collect()
        } else {
            vec![word_from_nodes(&[node], self.src)]
        };
        let simple = SimpleCommand {
            text: self.text(node).trim().to_owned(),
            assignments,
            words: Vec::new(),
            stdin: Stdin::Inherited,
        };
        self.emit(normalize(&simple));
    }

    /// `export`, `declare`, `local`, `readonly`, `typeset`, `unset`: a command whose words are
    /// its keyword and its arguments.
    fn declaration(&mut self, f: Frame<'t>) {
        let node = f.node;
        let mut groups: Vec<Vec<Node<'t>>> = Vec::new();
        let mut cursor = node.walk();
        for c in node.children(&mut cursor) {
            if c.kind() == "comment" {
                continue;
            }
            match groups.last_mut() {
                Some(g) if g.last().is_some_and(|l| l.end_byte() == c.start_byte()) => g.push(c),
                _ => groups.push(vec![c]),
            }
        }
        let words: Vec<Word> = groups
            .iter()
            .map(|g| {
                // The keyword is an anonymous node; everything else is a word.
                if g.len() == 1 && !g[0].is_named() {
                    Word::literal(&self.text(g[0]))
                } else {
                    word_from_nodes(g, self.src)
                }
            })
            .collect();
        let simple = SimpleCommand {
            text: self.text(node).trim().to_owned(),
            assignments: Vec::new(),
            words,
            stdin: Stdin::Inherited,
        };
        // An assignment holding a substitution as text is as suspicious here as bare.
        let literal_subst = simple.words.iter().skip(1).find(|w| {
            w.dynamic.is_none()
                && w.is_assignment()
                && (w.value.contains("$(") || w.value.contains('`'))
        });
        let reason = literal_subst.map(|w| {
            format!(
                "the assignment `{}` holds a command substitution as text, which arithmetic evaluation would run",
                shorten(&w.written)
            )
        });
        let mut n = normalize(&simple);
        if let (Some(r), Some(c)) = (reason, n.commands.first_mut()) {
            c.unknown.get_or_insert(r);
        }
        self.emit(n);
    }

    /// `[ … ]`, `[[ … ]]`: a command whose words are its tokens as written.
    fn test_command(&mut self, f: Frame<'t>) {
        let text = self.text(f.node);
        let words: Vec<Word> = split_written(&text)
            .into_iter()
            .map(Word::literal)
            .collect();
        let simple = SimpleCommand {
            text: text.trim().to_owned(),
            assignments: Vec::new(),
            words,
            stdin: Stdin::Inherited,
        };
        let mut n = normalize(&simple);
        if let Some(c) = n.commands.first_mut() {
            c.read_only = c.unknown.is_none();
        }
        self.emit(n);
    }

    /// An output target is a `write` subject, an input target a `read` constraint; fd
    /// duplications, `/dev/null` and process substitutions are not subjects; `/dev/tcp|udp`
    /// makes an unknown command subject.
    fn file_redirect(&mut self, r: Node<'t>) -> Result<(), SplitError> {
        let Some(op) = operator(r) else {
            return Ok(());
        };
        let dests = destinations(r);
        let Some(dest) = dests.first().copied() else {
            return Ok(()); // `>&-`
        };
        let w = word_from_nodes(&[dest], self.src);
        let text = text_of(self.src, r.start_byte(), dest.end_byte());
        if matches!(op, ">&" | "<&" | ">&-" | "<&-")
            && (w.value == "-" || w.value.chars().all(|c| c.is_ascii_digit()))
            && w.dynamic.is_none()
        {
            return Ok(()); // fd duplication or close
        }
        if dest.kind() == "process_substitution" {
            return Ok(()); // a pipe to a command the walk visits
        }
        if let Some(subject) = redirect_subject(op, &w, text) {
            self.items.push(Item::Subject(subject));
        }
        Ok(())
    }
}

/// The subject of a file redirect `op` to the word `w` (`text` as written), if it has one
/// (`/dev/null` and the standard streams are none; `/dev/tcp/…` is a command that is never
/// allowed). Shared by the walk and the fast path.
pub(super) fn redirect_subject(op: &str, w: &Word, text: String) -> Option<ShellSubject> {
    let v = w.value.as_str();
    if w.dynamic.is_none()
        && matches!(
            v,
            "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/stdin"
        )
    {
        return None;
    }
    if v.starts_with("/dev/tcp/") || v.starts_with("/dev/udp/") {
        return Some(ShellSubject::Command(ShellCommand {
            text: text.clone(),
            written: vec![text.clone()],
            normalized: vec![text.clone()],
            also: Vec::new(),
            unknown: Some(format!("`{text}` opens a network connection")),
            extends: false,
            hazards: Vec::new(),
            via: None,
            read_only: false,
            constraint: false,
        }));
    }
    let mut unknown = w
        .dynamic
        .as_ref()
        .map(|d| format!("the redirect target is not a literal: {d}"));
    if unknown.is_none() && (w.glob || w.brace) {
        unknown = Some(format!(
            "the redirect target `{}` holds a glob or brace pattern",
            w.written
        ));
    }
    let mut path = w.value.clone();
    if path.starts_with('~') {
        if w.written.starts_with('~') {
            let user = path[1..].split('/').next().unwrap_or_default();
            if !user.is_empty() {
                unknown.get_or_insert_with(|| {
                    format!(
                        "the redirect target `{}` names another user's home",
                        w.written
                    )
                });
            } else if path == "~" {
                path = "~/".into();
            }
        } else {
            path = format!("./{path}"); // a quoted `~` is a file named `~`
        }
    }
    if path.is_empty() {
        unknown.get_or_insert_with(|| "the redirect target is empty".into());
    }
    let redirect = Redirect {
        text,
        path,
        unknown,
    };
    Some(if matches!(op, "<" | "<&") {
        ShellSubject::Read(redirect)
    } else {
        ShellSubject::Write(redirect)
    })
}

/// A file redirect's operator (`>`, `>>`, `<`, `&>`, `>&`, …).
fn operator(r: Node<'_>) -> Option<&'static str> {
    let mut cursor = r.walk();
    r.children(&mut cursor)
        .find(|c| !c.is_named())
        .map(|c| c.kind())
}

fn destinations(r: Node<'_>) -> Vec<Node<'_>> {
    let mut cursor = r.walk();
    r.children_by_field_name("destination", &mut cursor)
        .collect()
}

/// The raw contents of each backtick substitution in `text` (outside them a backslash escapes
/// the next character; inside, `` \` `` is a nested backtick); `None` when one is unterminated.
fn backtick_segments(text: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '`' => {
                let mut inner = String::new();
                loop {
                    match chars.next()? {
                        '\\' => {
                            inner.push('\\');
                            inner.push(chars.next()?);
                        }
                        '`' => break,
                        c => inner.push(c),
                    }
                }
                out.push(inner);
            }
            _ => {}
        }
    }
    Some(out)
}

/// Text as the shell passes on a command inside backticks or an unquoted heredoc body: `\$`,
/// `` \` `` and `\\` lose their backslash.
fn unescape_backslashed(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&n) = chars.peek()
            && matches!(n, '$' | '`' | '\\')
        {
            out.push(n);
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}

/// Splits text at whitespace outside quotes, keeping the quotes.
fn split_written(text: &str) -> Vec<&str> {
    crate::matcher::glob::split_quoted(text, char::is_whitespace)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn subjects(items: Vec<Item>) -> Vec<String> {
        items
            .into_iter()
            .map(|i| match i {
                Item::Subject(s) => format!("{s:?}"),
                Item::Payload(p) => format!("{p:?}"),
            })
            .collect()
    }

    fn token() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("git".to_owned()),
            Just("status".to_owned()),
            Just("rm".to_owned()),
            Just("-rf".to_owned()),
            Just("&&".to_owned()),
            Just("||".to_owned()),
            Just(";".to_owned()),
            Just("|".to_owned()),
            Just("A=1".to_owned()),
            Just("B=".to_owned()),
            Just("'a b'".to_owned()),
            Just("\"c 'd'\"".to_owned()),
            Just("'r''m'".to_owned()),
            Just("x\"y\"z".to_owned()),
            Just("~/x".to_owned()),
            Just("sudo".to_owned()),
            Just("timeout".to_owned()),
            Just("5".to_owned()),
            Just("xargs".to_owned()),
            Just("bash".to_owned()),
            Just("-c".to_owned()),
            Just("eval".to_owned()),
            Just("if".to_owned()),
            Just("=x".to_owned()),
            Just("a=b=c".to_owned()),
            Just("-".to_owned()),
            Just("@x:,+.".to_owned()),
            Just("a%b".to_owned()),
            Just("a@'x'".to_owned()),
            Just("\"x\"y".to_owned()),
            Just("'a'@".to_owned()),
            Just("x=\"a b\"".to_owned()),
            Just("_x=1".to_owned()),
            Just("9".to_owned()),
            Just(">".to_owned()),
            Just(">>".to_owned()),
            Just("<".to_owned()),
            Just("2>&1".to_owned()),
            Just(">&2".to_owned()),
            Just("2>/dev/null".to_owned()),
            Just(">out.txt".to_owned()),
            Just("0<in".to_owned()),
            Just("2<in".to_owned()),
            Just(">~".to_owned()),
            Just(">~/x".to_owned()),
            Just(">'~'".to_owned()),
            Just("/dev/tcp/h/80".to_owned()),
            Just("$(".to_owned()),
            Just("\"$(".to_owned()),
            Just(")".to_owned()),
            Just(")\"".to_owned()),
            Just("$(git log -1)".to_owned()),
            Just("\"$(ls -la | grep x)\"".to_owned()),
            Just("\"$(a && b; c)\"".to_owned()),
            Just("$(bash -c 'rm x')".to_owned()),
            Just("$HOME".to_owned()),
            Just("${X}".to_owned()),
            Just("\"$PATH\"".to_owned()),
            Just("\"${a_1}\"".to_owned()),
            Just("$1".to_owned()),
            Just("$?".to_owned()),
            Just("${X".to_owned()),
            Just("$X/y".to_owned()),
            Just("x$Y".to_owned()),
            Just("*".to_owned()),
            Just("*.rs".to_owned()),
            Just("src/*".to_owned()),
            Just("a*b".to_owned()),
            Just("'*'x*".to_owned()),
            Just("x=*".to_owned()),
            Just("-*".to_owned()),
            Just("~*".to_owned()),
            "[a-z0-9_./:,@%+=~*-]{1,5}",
        ]
    }

    /// A list of simple commands with substitutions and redirects in the shapes the fast path
    /// takes (and near misses), so most cases exercise it.
    fn structured() -> impl Strategy<Value = String> {
        let word = || {
            prop::sample::select(vec![
                "git", "status", "ls", "-la", "cat", "rm", "-rf", "x", "'a b'", "\"c d\"", "A=1",
                "sudo", "timeout", "5", "bash", "-c", "xargs", "~/f", "/tmp/x", "2", "if", "eval",
                "'rm x'", "a@b", "*.rs", "src/*", "*", "a=*", "r*", "$HOME", "\"${X}\"", "$X_1",
                "A=$B",
            ])
        };
        let op = || prop::sample::select(vec![" && ", " || ", "; ", " | ", "|", "&&", " ;"]);
        let plain = move || prop::collection::vec(word(), 1..4).prop_map(|w| w.join(" "));
        let inner = prop::collection::vec((plain(), op()), 1..3).prop_map(|cs| joined(&cs));
        let sub = (inner, any::<bool>()).prop_map(|(l, q)| {
            if q {
                format!("\"$({l})\"")
            } else {
                format!("$({l})")
            }
        });
        let redirect = prop::sample::select(vec![
            "> f",
            ">> f",
            "< f",
            ">f",
            "2>&1",
            "2>/dev/null",
            "> /dev/null",
            "> ~/x",
            ">'~'",
            "<f",
            "> /dev/tcp/h/1",
            "> *.txt",
            "< *",
            "1>f",
            ">&2",
            "2> f",
            "> ~",
            ">\"o p\"",
        ]);
        let command = (
            plain(),
            prop::option::of(sub),
            plain(),
            prop::collection::vec(redirect, 0..3),
        )
            .prop_map(|(a, sub, b, rs)| {
                let mut s = a;
                if let Some(sub) = sub {
                    s.push(' ');
                    s.push_str(&sub);
                    s.push(' ');
                    s.push_str(&b);
                }
                for r in rs {
                    s.push(' ');
                    s.push_str(r);
                }
                s
            });
        prop::collection::vec((command, op()), 1..4).prop_map(|cs| joined(&cs))
    }

    /// Commands joined by the operator after each (the last one's is dropped).
    fn joined(commands: &[(String, &str)]) -> String {
        let mut s = String::new();
        for (i, (c, op)) in commands.iter().enumerate() {
            s.push_str(c);
            if i + 1 < commands.len() {
                s.push_str(op);
            }
        }
        s
    }

    /// The fast path, when it takes `text`, yields what the tree-sitter walk yields.
    fn agrees(text: &str) -> Result<(), TestCaseError> {
        if let Some(pieces) = fast::split(text) {
            let slow = walk_tree(text, "");
            prop_assert!(slow.is_ok(), "{text:?}: {:?}", slow.err());
            let slow = slow.unwrap_or_default();
            prop_assert_eq!(subjects(fast_items(pieces)), subjects(slow), "{:?}", text);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: match std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()) {
                Some(n) => n,
                None if std::env::var_os("CI").is_some() => 48,
                None => 512,
            },
            ..ProptestConfig::default()
        })]

        /// Whatever the fast path accepts, it splits exactly as the tree-sitter walk does.
        #[test]
        fn the_fast_path_agrees_with_tree_sitter(
            toks in prop::collection::vec(token(), 1..12),
            seps in prop::collection::vec(prop_oneof![Just(" "), Just("  "), Just("\t")], 12),
        ) {
            let mut text = String::new();
            for (t, s) in toks.iter().zip(&seps) {
                text.push_str(t);
                text.push_str(s);
            }
            agrees(&text)?;
        }

        /// Redirects and substitutions: whatever the fast path accepts, it splits exactly as
        /// the tree-sitter walk does.
        #[test]
        fn the_fast_path_agrees_on_redirects_and_substitutions(text in structured()) {
            agrees(&text)?;
        }
    }

    /// tree-sitter-bash attaches the redirect of `a && b < f` to the whole list; bash feeds
    /// the file to `b` alone, and so does the walk (and the fast path).
    #[test]
    fn an_input_redirect_after_a_list_feeds_its_last_command_only() {
        for (text, first, last) in [
            ("bash && bash < f", "standard input", "a file"),
            ("bash | bash < f", "standard input", "a file"),
            ("bash < f | bash", "a file", "a pipe"),
            ("bash; bash < f", "standard input", "a file"),
        ] {
            for items in [walk_tree(text, "").unwrap(), walk_text(text, "").unwrap()] {
                let why: Vec<String> = items
                    .iter()
                    .filter_map(|i| match i {
                        Item::Subject(ShellSubject::Command(c)) => c.unknown.clone(),
                        _ => None,
                    })
                    .collect();
                assert_eq!(why.len(), 2, "{text}: {why:?}");
                assert!(why[0].ends_with(first), "{text}: {why:?}");
                assert!(why[1].ends_with(last), "{text}: {why:?}");
            }
        }
    }

    #[test]
    fn the_fast_path_takes_plain_lists_only() {
        for yes in [
            "git status",
            "a && b || c; d | e",
            "A='x y' b \"c\"",
            "git status ;",
            "cat a > b",
            "cat a >> b 2>&1 | x",
            "cat < b",
            "echo \"$(git log -1)\" $(pwd)",
            "x \"$(a | b \"$(c)\")\"",
            "ls *.rs src/* > out",
            "echo $x \"$y\" ${z} \"${w}\"",
        ] {
            assert!(fast::split(yes).is_some(), "{yes}");
        }
        for no in [
            "",
            " ",
            "a &",
            "a |& b",
            "a && ",
            "; a",
            "a;;",
            "echo $x$y",
            "echo ${x:-a}",
            "$x a",
            "echo `x`",
            "> b a",
            "a > b c",
            "a>b",
            "a >& b",
            "a &> b",
            "a >| b",
            "a << b",
            "a <<< b",
            "a 0< b",
            "a < $(b)",
            "a $(b) < c",
            "$(a) b",
            "a x$(b)",
            "a \"$(b) c\"",
            "a $(b;)",
            "a $()",
            "a $(b",
            "a )",
            "a\nb",
            "if true",
            "(a)",
            "{ a; }",
            "a # c",
            "echo \"$x y\"",
            "echo \\a",
            "echo ?",
            "echo [a]",
            "=x",
            "time a",
            "a\rb",
            "é",
        ] {
            assert!(fast::split(no).is_none(), "{no:?}");
        }
    }
}
