//! Normalization of one simple command (docs/design/policy.md#shell-commands): the argv allow rules
//! see, every argv deny and ask rules try, and the payloads it runs.

use super::readonly;
use super::word::Word;
use super::wrappers::{
    Inner, Kind, ShellInvocation, inner_start, is_shell, payload_option, runner_subcommand,
    shell_invocation, wrapper,
};
use super::{MAX_WRAPPER_DEPTH, MAX_WRAPPER_SUFFIXES, ShellCommand};

/// Where a simple command's standard input comes from (it decides what a shell run without
/// `-c` executes).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Stdin {
    /// Whatever the agent's shell was given.
    #[default]
    Inherited,
    /// A pipe from an earlier command.
    Pipe,
    /// A file (`< file`).
    File,
    /// A literal heredoc or here-string body.
    Literal(String),
    /// A heredoc or here-string that expands something (the reason).
    Dynamic(String),
}

/// One simple command as parsed: its text, its `VAR=` prefixes, its words, its stdin.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SimpleCommand {
    /// Its source text.
    pub text: String,
    /// Leading `NAME=value` assignments.
    pub assignments: Vec<Word>,
    /// The command word and its arguments.
    pub words: Vec<Word>,
    /// Its standard input.
    pub stdin: Stdin,
}

/// A literal shell text a command runs (`bash -c '…'`, `eval '…'`, a heredoc fed to `sh`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellText {
    /// The text to parse.
    pub text: String,
    /// How it is run (`bash -c`, `eval`, `a heredoc fed to sh`).
    pub via: String,
    /// Whether its subjects are constraints (it runs inside a context-changing wrapper whose
    /// own subject, as written, is what allow rules decide).
    pub constraint: bool,
}

/// What [`normalize`] makes of one simple command.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Normalized {
    /// The command itself, then inner commands of argument-extending wrappers (`find -exec`).
    pub commands: Vec<ShellCommand>,
    /// Literal payloads to parse in turn.
    pub payloads: Vec<ShellText>,
    /// Files the program writes through an option or operand (`sort -o f`, `sed -i f`,
    /// `sed 'w f'`): `write` subjects, decided like a redirect's target.
    pub writes: Vec<super::Redirect>,
    /// Subjects for what cannot be known (input run as code), after the payloads' subjects so
    /// a deny rule that fires on a payload is the one cited.
    pub unknown: Vec<ShellCommand>,
}

/// How deeply `find -exec find -exec …` may nest before the command is unknown.
const MAX_INNER_DEPTH: usize = 16;

/// Normalizes one simple command: the one function behind every reading
/// (docs/design/policy.md#shell-commands).
///
/// - `written` (allow): the words as written, `VAR=` prefixes, quotes and program paths kept;
///   transparent wrappers (`timeout`, `time`, `nice`, `nohup`, `stdbuf`, `command` without
///   `-v`, `builtin`, `noglob`, `exec`, `env` without options or assignments) are removed, and
///   the inner command of an argument-extending one (`xargs`) replaces it, marked `extends`.
/// - `normalized` and `also` (deny, ask): the literal argv (quotes removed), and at each
///   wrapper layer the argv without `VAR=` prefixes, with the program's path removed and its
///   name lower-cased; inside context-changing wrappers (`sudo`, `doas`, `env X=1`, `setsid`,
///   `ionice`, `chroot`, `watch`) too; after a wrapper with options it does not recognise or an
///   environment runner (`devbox run`, `ssh`, `docker exec`, …), every later word as the start
///   of a command; git without its global options; `rm --recursive --force` as `rm -rf`.
/// - `unknown`: a command word that is not a literal, holds a glob or brace, or starts with
///   `=`; a shell, `eval` or `source` fed anything but a literal.
/// - payloads: the literal of `bash -c`, `eval`, `su -c`, a heredoc or here-string fed to a
///   shell.
pub fn normalize(command: &SimpleCommand) -> Normalized {
    normalize_at(command, 0)
}

fn normalize_at(command: &SimpleCommand, depth: usize) -> Normalized {
    // Leading `NAME=value` words are assignments, whatever the parser called them
    // (tree-sitter-bash reads `_= rm -rf /` as a command named `_=`; bash runs `rm`).
    let lead = command
        .words
        .iter()
        .take_while(|w| w.is_assignment())
        .count();
    if lead > 0 {
        let mut moved = command.clone();
        let rest = moved.words.split_off(lead);
        moved.assignments.append(&mut moved.words);
        moved.words = rest;
        return normalize_at(&moved, depth);
    }
    let mut out = Normalized::default();
    let words = &command.words;
    // The assignments and the words from the `j`th on, as written.
    let written_from = |j: usize| -> Vec<String> {
        command
            .assignments
            .iter()
            .chain(&words[j..])
            .map(|w| w.written.clone())
            .collect()
    };
    let literal = || -> Vec<String> {
        command
            .assignments
            .iter()
            .chain(words)
            .map(|w| w.value.clone())
            .collect()
    };
    let mut c = ShellCommand {
        text: command.text.clone(),
        written: written_from(0),
        normalized: Vec::new(),
        also: Vec::new(),
        unknown: None,
        extends: false,
        hazards: Vec::new(),
        via: None,
        read_only: false,
        constraint: false,
    };
    let code_assignment = command
        .assignments
        .iter()
        .find_map(super::programs::code_assignment);
    if words.is_empty() {
        // Only assignments: they run nothing, but later commands see them.
        c.normalized = literal();
        c.unknown = command
            .assignments
            .iter()
            .find(|a| a.dynamic.is_none() && (a.value.contains("$(") || a.value.contains('`')))
            .map(|a| {
                format!(
                    "the assignment `{}` holds a command substitution as text, which arithmetic evaluation would run",
                    super::word::shorten(&a.written)
                )
            })
            .or(code_assignment);
        out.commands.push(c);
        return out;
    }
    if let Some(why) = code_assignment {
        c.unknown = Some(why);
    }

    let mut readings: Vec<Vec<String>> = Vec::new();
    let mut primary: Vec<String> = Vec::new();
    let mut context = false;
    let mut i = 0;
    let mut layers = 0;
    // Each step consumes at least one word, so this ends; each layer costs the words after
    // it, so the layers are bounded to keep the whole linear.
    while let Some(program) = words.get(i) {
        layers += 1;
        if layers > MAX_WRAPPER_DEPTH {
            c.unknown = Some(format!(
                "the command nests more than {MAX_WRAPPER_DEPTH} wrappers (`timeout`, `env`, `nice`, …)"
            ));
            break;
        }
        let name = program_name(&program.value);
        let norm: Vec<String> = std::iter::once(name.clone())
            .chain(words[i + 1..].iter().map(|w| w.value.clone()))
            .collect();
        if !primary.is_empty() {
            readings.push(std::mem::take(&mut primary));
        }
        primary = norm;
        if let Some(why) = program_unknown(program) {
            c.unknown = Some(why);
            break;
        }
        if name == "command"
            && words[i + 1..]
                .iter()
                .take_while(|w| w.value.starts_with('-') && w.value != "--")
                .any(|w| w.value.contains(['v', 'V']))
        {
            break; // `command -v x` looks a name up.
        }
        if let Some(spec) = wrapper(&name) {
            let (inner, options) = inner_start(&spec, words, i + 1);
            // `env NAME=value …` sets the inner program's environment.
            let end = match inner {
                Inner::At(j) => j,
                _ => words.len(),
            };
            if let Some(why) = words[i + 1..end]
                .iter()
                .find_map(super::programs::code_assignment)
            {
                c.unknown.get_or_insert(why);
            }
            let kind = if name == "env" && options {
                Kind::Context
            } else {
                spec.kind
            };
            match (kind, inner) {
                (Kind::Runner, _) | (_, Inner::Unrecognized) => {
                    runner(&mut c, &mut readings, &mut out, &name, words, i + 1);
                    break;
                }
                (_, Inner::None) => break,
                (Kind::Transparent, Inner::At(j)) => {
                    c.written = written_from(j);
                    i = j;
                    continue;
                }
                (Kind::Context, Inner::At(j)) => {
                    if name == "watch" {
                        watch_payload(&mut c, &mut out, &words[i + 1..j], &words[j..]);
                    }
                    context = true;
                    i = j;
                    continue;
                }
                (Kind::Extending, Inner::At(j)) => {
                    if let Some(why) = input_into_code(&name, &words[i + 1..j], &words[j..]) {
                        out.unknown.push(unknown_subject(&command.text, why));
                    }
                    c.extends = true;
                    c.via = Some(name.clone());
                    c.written = written_from(j);
                    i = j;
                    continue;
                }
            }
        }
        if words
            .get(i + 1)
            .is_some_and(|sub| runner_subcommand(&name, &sub.value))
            || runner_subcommand(&name, "")
        {
            runner(&mut c, &mut readings, &mut out, &name, words, i + 1);
            break;
        }
        if is_shell(&name) {
            shell(&mut c, &mut out, command, &name, i, context);
            break;
        }
        let effects = super::programs::effects(&name, &words[i + 1..]);
        if let Some(why) = effects.unknown {
            c.unknown.get_or_insert(why);
        }
        for (text, via) in effects.payloads {
            out.payloads.push(ShellText {
                text,
                via,
                constraint: context,
            });
        }
        for (path, how) in effects.writes {
            out.writes.push(program_write(path, &how));
        }
        match name.as_str() {
            "eval" => {
                // `eval -- x` evaluates `x`: a leading `--` ends eval's options.
                let args = match words.get(i + 1) {
                    Some(w) if w.value == "--" && w.dynamic.is_none() => &words[i + 2..],
                    _ => &words[i + 1..],
                };
                if let Some(d) = args.iter().find_map(|w| w.dynamic.as_ref()) {
                    c.unknown = Some(format!("eval of a payload that is not a literal ({d})"));
                } else {
                    let text: Vec<&str> = args.iter().map(|w| w.value.as_str()).collect();
                    out.payloads.push(ShellText {
                        text: text.join(" "),
                        via: "eval".into(),
                        constraint: context,
                    });
                    c.constraint = !context && command.assignments.is_empty();
                    c.read_only = c.constraint;
                }
            }
            "source" | "." => {
                // `source -- FILE` reads FILE: a leading `--` ends its options.
                let at = match words.get(i + 1) {
                    Some(w) if w.value == "--" && w.dynamic.is_none() => i + 2,
                    _ => i + 1,
                };
                if let Some(script) = words.get(at)
                    && let Some(why) = non_literal_script(script)
                {
                    c.unknown = Some(format!("{name} of {why}"));
                }
            }
            "find" => find(&mut c, &mut out, words, i, depth),
            "let" | "declare" | "typeset" | "local" | "export" | "readonly" | "read"
            | "mapfile" | "readarray" | "getopts" | "unset" | "printf" | "test" | "[" => {
                if let Some(why) = super::arith::command(&name, &words[i + 1..]) {
                    c.unknown = Some(why);
                }
            }
            // Commands that change what a later name runs: an alias's value is a payload
            // (zsh expands aliases in scripts); `hash -p` and `enable -f` rebind a name to
            // any file, so what later commands run cannot be known.
            "alias" => {
                for w in &words[i + 1..] {
                    if let Some((_, value)) = w.value.split_once('=') {
                        match &w.dynamic {
                            Some(d) => {
                                c.unknown =
                                    Some(format!("an alias whose value is not a literal ({d})"));
                            }
                            None => out.payloads.push(ShellText {
                                text: value.to_owned(),
                                via: "alias".into(),
                                constraint: false,
                            }),
                        }
                    }
                }
            }
            "hash" | "enable"
                if words[i + 1..]
                    .iter()
                    .any(|w| w.value.starts_with('-') && w.value.contains(['p', 'f'])) =>
            {
                c.unknown = Some(format!(
                    "`{name}` rebinds a command name to a file, so what later commands run is not known"
                ));
            }
            "git" => {
                if let Some(r) = git_without_globals(&primary) {
                    readings.push(r);
                }
                git_config_payloads(&mut out, &primary);
            }
            _ => {
                if let Some(r) = joined_flags(&primary) {
                    readings.push(r);
                }
            }
        }
        break;
    }
    if c.unknown.is_none() && !c.constraint {
        c.read_only =
            i == 0 && command.assignments.is_empty() && readonly::is_read_only_argv(&command.words);
    }
    // The literal argv (quotes removed, nothing else), unless it is the normalized one.
    let same = command.assignments.is_empty()
        && primary.len() == words.len()
        && primary.iter().zip(words).all(|(n, w)| *n == w.value);
    if !same {
        readings.push(literal());
    }
    c.normalized = primary;
    c.also = readings
        .into_iter()
        .filter(|r| *r != c.normalized)
        .fold(Vec::new(), |mut acc, r| {
            if !acc.contains(&r) {
                acc.push(r);
            }
            acc
        });
    out.commands.insert(0, c);
    out
}

/// Why an argument-extending wrapper's inner command runs its input as code, if it does: the
/// inner program is a shell, `eval` or `source`, and one of its words holds the string the
/// wrapper replaces with input (`find -exec sh -c {}`, `xargs -I{} sh -c 'echo {}'`), so the
/// payload is not known when the call is decided.
fn input_into_code(wrapper: &str, options: &[Word], inner: &[Word]) -> Option<String> {
    let replace = match wrapper {
        "find" => Some("{}".to_owned()),
        "xargs" => xargs_replace(options),
        _ => None,
    }?;
    let program = program_name(&inner.first()?.value);
    let code: Vec<&Word> = if is_shell(&program) {
        // The `-c` payload, or else the script operand; arguments after it are data.
        let args = &inner[1..];
        match args.iter().position(|w| {
            w.value.starts_with('-') && !w.value.starts_with("--") && w.value.contains('c')
        }) {
            Some(k) => args.get(k + 1).into_iter().collect(),
            None => args
                .iter()
                .find(|w| !w.value.starts_with('-'))
                .into_iter()
                .collect(),
        }
    } else if matches!(program.as_str(), "eval" | "source" | ".") {
        inner[1..].iter().collect()
    } else {
        Vec::new()
    };
    code.iter().any(|w| w.value.contains(&replace)).then(|| {
        format!(
            "`{wrapper}` puts its input where `{replace}` is, inside code `{program}` runs: the payload is not known when the call is decided"
        )
    })
}

/// A subject that is never allowed, for a part of `text` Warden cannot know; it comes after
/// the command's own subjects, so a deny rule that also fires is the one cited.
pub(super) fn unknown_subject(text: &str, why: String) -> ShellCommand {
    ShellCommand {
        text: text.to_owned(),
        written: vec![text.to_owned()],
        normalized: vec![text.to_owned()],
        also: Vec::new(),
        unknown: Some(why),
        extends: false,
        hazards: Vec::new(),
        via: None,
        read_only: false,
        constraint: false,
    }
}

/// The string `xargs -I R` / `-i[R]` / `--replace[=R]` replaces with input.
fn xargs_replace(options: &[Word]) -> Option<String> {
    let mut k = 0;
    while let Some(w) = options.get(k) {
        let v = w.value.as_str();
        if v == "-I" {
            return options.get(k + 1).map(|w| w.value.clone());
        }
        if let Some(r) = v.strip_prefix("-I") {
            return Some(r.to_owned());
        }
        if v == "-i" || v == "--replace" {
            return Some("{}".to_owned());
        }
        if let Some(r) = v
            .strip_prefix("--replace=")
            .or_else(|| v.strip_prefix("-i"))
        {
            return Some(if r.is_empty() {
                "{}".to_owned()
            } else {
                r.to_owned()
            });
        }
        k += 1;
    }
    None
}

/// A file a program writes, as a `write` subject decided like a redirect's target.
fn program_write(path: String, how: &str) -> super::Redirect {
    let unknown = path
        .is_empty()
        .then(|| format!("{how} writes a file with an empty name"));
    super::Redirect {
        text: format!("{how}: {path}"),
        path,
        unknown,
    }
}

/// A program's normalized name: its path removed, lower-cased.
pub(super) fn program_name(value: &str) -> String {
    let base = value.rsplit('/').next().unwrap_or(value);
    let base = if base.is_empty() { value } else { base };
    base.to_lowercase()
}

/// Why a command word cannot be known statically, if it cannot.
fn program_unknown(w: &Word) -> Option<String> {
    if let Some(d) = &w.dynamic {
        return Some(format!("its command word is not a literal: {d}"));
    }
    if w.glob {
        return Some(format!(
            "its command word `{}` holds a glob pattern",
            w.written
        ));
    }
    if w.brace {
        return Some(format!(
            "its command word `{}` holds a brace expansion",
            w.written
        ));
    }
    if w.written.starts_with('=') {
        return Some(format!(
            "its command word `{}` starts with `=`, which zsh expands to a path",
            w.written
        ));
    }
    None
}

fn non_literal_script(w: &Word) -> Option<String> {
    if let Some(d) = &w.dynamic {
        return Some(format!("a script that is not a literal ({d})"));
    }
    let v = w.value.as_str();
    if v == "-" || v == "/dev/stdin" || v.starts_with("/dev/fd/") || v.starts_with("/proc/self/fd/")
    {
        return Some(format!("`{v}`, a script read from a stream"));
    }
    None
}

/// A wrapper whose inner command cannot be located: every later word is tried as its start by
/// deny and ask rules; `-c`-style payload options are parsed.
fn runner(
    c: &mut ShellCommand,
    readings: &mut Vec<Vec<String>>,
    out: &mut Normalized,
    name: &str,
    words: &[Word],
    from: usize,
) {
    let later = words.len().saturating_sub(from);
    if later > MAX_WRAPPER_SUFFIXES {
        c.unknown = Some(format!(
            "`{name}` runs a command somewhere in its {later} arguments, more than the {MAX_WRAPPER_SUFFIXES} the splitter tries"
        ));
        return;
    }
    for k in from..words.len() {
        let reading: Vec<String> = std::iter::once(program_name(&words[k].value))
            .chain(words[k + 1..].iter().map(|w| w.value.clone()))
            .collect();
        readings.push(reading);
        if payload_option(name, &words[k].value)
            && let Some(p) = words.get(k + 1)
        {
            match &p.dynamic {
                Some(d) => {
                    c.unknown = Some(format!(
                        "`{name} {}` runs a payload that is not a literal ({d})",
                        words[k].value
                    ));
                }
                None => out.payloads.push(ShellText {
                    text: p.value.clone(),
                    via: format!("{name} {}", words[k].value),
                    constraint: true,
                }),
            }
        }
    }
}

fn shell(
    c: &mut ShellCommand,
    out: &mut Normalized,
    command: &SimpleCommand,
    name: &str,
    i: usize,
    context: bool,
) {
    let words = &command.words;
    let (invocation, harmless) = shell_invocation(words, i + 1);
    let quiet = harmless && !context && command.assignments.is_empty();
    match invocation {
        ShellInvocation::Payload(Some(k)) => match &words[k].dynamic {
            Some(d) => {
                c.unknown = Some(format!(
                    "{name} -c of a payload that is not a literal ({d})"
                ));
            }
            None => {
                out.payloads.push(ShellText {
                    text: words[k].value.clone(),
                    via: format!("{name} -c"),
                    constraint: context,
                });
                c.constraint = quiet;
                c.read_only = quiet;
            }
        },
        ShellInvocation::Payload(None) => {}
        ShellInvocation::Stdin => match &command.stdin {
            Stdin::Literal(text) => {
                out.payloads.push(ShellText {
                    text: text.clone(),
                    via: format!("a heredoc or here-string fed to {name}"),
                    constraint: context,
                });
                c.constraint = quiet;
                c.read_only = quiet;
            }
            Stdin::Dynamic(why) => {
                c.unknown = Some(format!(
                    "{name} runs a heredoc or here-string that is not a literal ({why})"
                ));
            }
            Stdin::Pipe => {
                c.unknown = Some(format!("{name} runs commands read from a pipe"));
            }
            Stdin::File => {
                c.unknown = Some(format!("{name} runs commands read from a file"));
            }
            Stdin::Inherited => {
                c.unknown = Some(format!("{name} runs commands read from standard input"));
            }
        },
        ShellInvocation::Script(k) => {
            if let Some(why) = non_literal_script(&words[k]) {
                c.unknown = Some(format!("{name} runs {why}"));
            }
        }
        ShellInvocation::Unrecognized => {
            c.unknown = Some(format!(
                "{name} is given options the splitter does not know, so what it runs is not known"
            ));
        }
    }
}

/// `watch` runs its arguments joined by spaces through `sh -c` (unless `-x`): when they are
/// literal, that text is a payload whose subjects deny and ask rules see.
fn watch_payload(c: &mut ShellCommand, out: &mut Normalized, options: &[Word], inner: &[Word]) {
    if options.iter().any(|w| {
        w.value == "--exec"
            || (!w.value.starts_with("--") && w.value.starts_with('-') && w.value.contains('x'))
    }) {
        return;
    }
    if let Some(d) = inner.iter().find_map(|w| w.dynamic.as_ref()) {
        c.unknown = Some(format!("watch runs a command that is not a literal ({d})"));
        return;
    }
    let text: Vec<&str> = inner.iter().map(|w| w.value.as_str()).collect();
    out.payloads.push(ShellText {
        text: text.join(" "),
        via: "watch".into(),
        constraint: true,
    });
}

/// git's `-c` settings that run commands (`alias.x=!cmd`, `core.pager`, `core.sshCommand`,
/// …): their literal values are payloads whose subjects deny and ask rules see.
fn git_config_payloads(out: &mut Normalized, argv: &[String]) {
    let mut k = 1;
    while let Some(a) = argv.get(k) {
        let setting = if a == "-c" {
            k += 1;
            argv.get(k).map(String::as_str)
        } else {
            a.strip_prefix("-c").filter(|s| !s.is_empty())
        };
        let Some(setting) = setting else {
            if a.starts_with('-') {
                k += 1;
                continue;
            }
            break;
        };
        k += 1;
        let Some((key, value)) = setting.split_once('=') else {
            continue;
        };
        let key = key.to_ascii_lowercase();
        let command = if key.starts_with("alias.") {
            value.strip_prefix('!')
        } else if matches!(
            key.as_str(),
            "core.pager"
                | "core.editor"
                | "core.sshcommand"
                | "core.fsmonitor"
                | "core.hookspath"
                | "sequence.editor"
                | "diff.external"
                | "gpg.program"
                | "credential.helper"
        ) || key.starts_with("pager.")
            || key.ends_with(".textconv")
            || key.ends_with(".command")
        {
            Some(value.strip_prefix('!').unwrap_or(value))
        } else {
            None
        };
        if let Some(command) = command {
            out.payloads.push(ShellText {
                text: command.to_owned(),
                via: format!("git -c {key}"),
                constraint: true,
            });
        }
    }
}

/// `find`: the commands of `-exec`, `-execdir`, `-ok`, `-okdir` are argument-extending
/// subjects; `-delete`, `-fprint*` and `-fls` are hazards an allow rule must spell.
fn find(c: &mut ShellCommand, out: &mut Normalized, words: &[Word], i: usize, depth: usize) {
    let mut k = i + 1;
    while let Some(w) = words.get(k) {
        let v = w.value.as_str();
        match v {
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let start = k + 1;
                let end = words[start..]
                    .iter()
                    .position(|w| w.value == ";" || w.value == "+")
                    .map_or(words.len(), |p| start + p);
                if start >= end {
                    k = end + 1;
                    continue;
                }
                if depth >= MAX_INNER_DEPTH {
                    c.unknown = Some(format!("`find {v}` nests more than {MAX_INNER_DEPTH} deep"));
                    return;
                }
                if let Some(why) = input_into_code("find", &[], &words[start..end]) {
                    out.unknown.push(unknown_subject(&c.text, why));
                }
                let inner_words = words[start..end].to_vec();
                let text: Vec<&str> = inner_words.iter().map(|w| w.written.as_str()).collect();
                let inner = SimpleCommand {
                    text: text.join(" "),
                    assignments: Vec::new(),
                    words: inner_words,
                    stdin: Stdin::Inherited,
                };
                let mut n = normalize_at(&inner, depth + 1);
                for (idx, cmd) in n.commands.iter_mut().enumerate() {
                    if idx == 0 {
                        cmd.extends = true;
                        cmd.via = Some(format!("find {v}"));
                    }
                    cmd.read_only = false;
                }
                out.commands.append(&mut n.commands);
                out.payloads.append(&mut n.payloads);
                out.writes.append(&mut n.writes);
                out.unknown.append(&mut n.unknown);
                k = end + 1;
            }
            "-delete" | "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                if !c.hazards.iter().any(|h| h == v) {
                    c.hazards.push(v.to_owned());
                }
                k += 1;
            }
            _ => k += 1,
        }
    }
}

/// git's global options, which come before the subcommand.
const GIT_GLOBAL_WITH_ARG: [&str; 6] = [
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
];
const GIT_GLOBAL_FLAGS: [&str; 15] = [
    "-p",
    "-P",
    "--paginate",
    "--no-pager",
    "--bare",
    "--no-replace-objects",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--no-lazy-fetch",
    "--no-advice",
    "--exec-path",
    "--super-prefix",
];

/// `git` with its global options removed (`git -C x push` → `git push`), when it has any.
fn git_without_globals(argv: &[String]) -> Option<Vec<String>> {
    let mut k = 1;
    while let Some(a) = argv.get(k) {
        let name = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
        if GIT_GLOBAL_WITH_ARG.contains(&name) {
            k += if a.contains('=') || (a.starts_with("-c") && a.len() > 2) {
                1
            } else {
                2
            };
        } else if GIT_GLOBAL_FLAGS.contains(&name)
            || (a.starts_with("-C") && a.len() > 2)
            || (a.starts_with("-c") && a.len() > 2)
        {
            k += 1;
        } else {
            break;
        }
    }
    if k == 1 {
        return None;
    }
    let mut out = vec![argv[0].clone()];
    out.extend(argv.get(k..).unwrap_or_default().iter().cloned());
    Some(out)
}

/// Long options of destructive programs, spelled as their short letters.
fn short_for(program: &str, long: &str) -> Option<char> {
    let c = match (program, long) {
        ("rm", "--recursive") | ("cp", "--recursive") => 'r',
        ("rm" | "cp" | "mv" | "ln", "--force") => 'f',
        ("rm", "--dir") => 'd',
        ("rm" | "cp" | "mv" | "chmod" | "chown" | "mkdir", "--verbose") => 'v',
        ("rm" | "cp" | "mv" | "ln", "--interactive") => 'i',
        ("chmod" | "chown" | "chgrp", "--recursive") => 'R',
        ("mkdir", "--parents") => 'p',
        ("ln", "--symbolic") => 's',
        _ => return None,
    };
    Some(c)
}

/// `rm --recursive --force x` and `rm -r -f x` read as `rm -rf x`: long options spelled as
/// their short letters, and adjacent single-letter options joined in order (never reordered,
/// so `rm -fr` stays `-fr`).
fn joined_flags(argv: &[String]) -> Option<Vec<String>> {
    let program = argv.first()?.as_str();
    if short_for(program, "--force").is_none() && short_for(program, "--recursive").is_none() {
        return None;
    }
    let mut out = vec![program.to_owned()];
    let mut run = String::new();
    let mut changed = false;
    let mut ended = false;
    for a in &argv[1..] {
        let letters = if ended {
            None
        } else if a == "--" {
            ended = true;
            None
        } else if let Some(c) = a.starts_with("--").then(|| short_for(program, a)).flatten() {
            changed = true;
            Some(c.to_string())
        } else if a.len() >= 2
            && a.starts_with('-')
            && !a.starts_with("--")
            && a[1..].chars().all(|c| c.is_ascii_alphabetic())
        {
            Some(a[1..].to_owned())
        } else {
            None
        };
        match letters {
            Some(l) => {
                if !run.is_empty() {
                    changed = true;
                }
                run.push_str(&l);
            }
            None => {
                if !run.is_empty() {
                    out.push(format!("-{run}"));
                    run.clear();
                }
                out.push(a.clone());
            }
        }
    }
    if !run.is_empty() {
        out.push(format!("-{run}"));
    }
    (changed && out.as_slice() != argv).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn git_globals() {
        assert_eq!(
            git_without_globals(&argv("git -C /r push origin")),
            Some(argv("git push origin"))
        );
        assert_eq!(
            git_without_globals(&argv("git --git-dir=/r/.git --work-tree=/r push --force")),
            Some(argv("git push --force"))
        );
        assert_eq!(
            git_without_globals(&argv("git -c a=b -ccore.x=y --no-pager log")),
            Some(argv("git log"))
        );
        assert_eq!(git_without_globals(&argv("git status")), None);
    }

    #[test]
    fn flags() {
        assert_eq!(
            joined_flags(&argv("rm --recursive --force /x")),
            Some(argv("rm -rf /x"))
        );
        assert_eq!(joined_flags(&argv("rm -r -f /x")), Some(argv("rm -rf /x")));
        assert_eq!(joined_flags(&argv("rm -fr /x")), None);
        assert_eq!(joined_flags(&argv("rm -rf /x")), None);
        assert_eq!(joined_flags(&argv("ls -l -a")), None);
        assert_eq!(joined_flags(&argv("rm -- --force")), None);
    }

    #[test]
    fn names() {
        assert_eq!(program_name("/usr/bin/RM"), "rm");
        assert_eq!(program_name("../../bin/rm"), "rm");
        assert_eq!(program_name("./"), "./");
    }
}
