//! The shell splitter: every simple command a `bash` call would run, with the views the rules
//! see (docs/design/policy.md#shell-commands).
//!
//! A command string is parsed with `tree-sitter-bash` (one parser per thread), walked without
//! recursion into simple commands, redirect targets and literal shell payloads (which are
//! parsed in turn, to a bounded depth), and each simple command is normalized by one function
//! ([`normalize`]) into the argv allow rules see and the argv readings deny and ask rules try.
//! A plain list of words and quotes takes a fast path that yields exactly what the tree-sitter
//! walk would (a differential property test holds it to that). Anything the splitter cannot read with certainty fails closed: a parse error, an
//! `ERROR`/`MISSING` node, an input past a bound ([`MAX_COMMAND_BYTES`], [`MAX_NESTING`],
//! [`MAX_PAYLOAD_DEPTH`], [`MAX_SUBJECTS`]) is a [`SplitError`] and the call is denied; a program
//! that cannot be known statically is marked [`ShellCommand::unknown`] and is never allowed.
//!
//! Key design decision: normalization never replaces a reading, it adds readings. Deny and ask
//! rules try every reading ([`ShellCommand::normalized`] and [`ShellCommand::also`]: the literal
//! argv, the argv without `VAR=` prefixes, program path, quoting or case, the inner command of
//! each wrapper, …), while allow rules see one argv, the words as written
//! ([`ShellCommand::written`]), except that a transparent wrapper (`timeout`, `nice`, …) exposes
//! its inner command and an argument-extending one (`xargs`, `find -exec`) exposes it to `x:*`
//! rules only. So a normalization can only make a deny or ask match more and an allow match less.
//!
//! ```
//! use warden_policy::shell::{ShellSubject, split_command};
//! let subjects = split_command("FOO=1 sudo /bin/RM -rf /tmp/x && echo `id` > out.txt").unwrap();
//! let ShellSubject::Command(rm) = &subjects[0] else { panic!() };
//! assert_eq!(rm.written, ["FOO=1", "sudo", "/bin/RM", "-rf", "/tmp/x"]);
//! assert_eq!(rm.normalized, ["rm", "-rf", "/tmp/x"]);
//! assert!(subjects.iter().any(|s| matches!(s, ShellSubject::Write(w) if w.path == "out.txt")));
//! assert!(warden_policy::shell::is_read_only("git status && ls -la | grep x"));
//! assert!(!warden_policy::shell::is_read_only("find . -delete"));
//! ```

mod arith;
mod fast;
mod normalize;
mod parse;
mod programs;
mod readonly;
mod walk;
mod word;
mod wrappers;

pub use normalize::{Normalized, ShellText, SimpleCommand, Stdin, normalize};
pub use word::Word;

/// The largest command the splitter reads, in bytes; a longer one is denied.
pub const MAX_COMMAND_BYTES: usize = 128 * 1024;
/// The most heredoc operators (`<<`, counted in the text) a command may hold.
pub const MAX_HEREDOCS: usize = 64;
/// How deeply constructs may nest in one parsed command (substitutions, groups, bodies, words).
pub const MAX_NESTING: usize = 256;
/// How deeply literal payloads (`bash -c '…'`, `eval '…'`, a heredoc fed to a shell) may nest.
pub const MAX_PAYLOAD_DEPTH: usize = 8;
/// The most subjects one call may split into; past it the call is denied (never a cap that
/// stops checking).
pub const MAX_SUBJECTS: usize = 4096;
/// How many times its own length the text of a parsed command's subjects may add up to (plus
/// [`SUBJECT_TEXT_FLOOR`]): a command nested in another's words (`a $(b $(c …))`) is part of
/// each enclosing command's text, so deep nesting makes that total, and the work of matching
/// it, grow with the square of the command. Past it the command is denied.
pub const MAX_SUBJECT_TEXT_FACTOR: usize = 16;
/// The subjects' text every parsed command may span whatever its length (see
/// [`MAX_SUBJECT_TEXT_FACTOR`]).
pub const SUBJECT_TEXT_FLOOR: usize = 4096;
/// The most words after a wrapper whose options are not understood: each later word is tried
/// as the start of the inner command by deny and ask rules; past this the program is unknown.
pub const MAX_WRAPPER_SUFFIXES: usize = 256;
/// The most wrapper layers one simple command may nest (`env env … timeout 1 nice rm`): each
/// layer is another reading, so past this the program is unknown.
pub const MAX_WRAPPER_DEPTH: usize = 32;

/// One thing a shell command would do that a rule can decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShellSubject {
    /// A simple command (a `bash` subject).
    Command(ShellCommand),
    /// An output redirect target (`>`, `>>`, `>|`, `&>`, `<>`): a `write` subject.
    Write(Redirect),
    /// An input redirect target (`<`): a `read` constraint (deny and ask only).
    Read(Redirect),
}

impl ShellSubject {
    /// The subject's text, for reasons and prompts.
    pub fn text(&self) -> &str {
        match self {
            ShellSubject::Command(c) => &c.text,
            ShellSubject::Write(r) | ShellSubject::Read(r) => &r.text,
        }
    }
}

/// One simple command a shell string would run, with every reading the rules see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellCommand {
    /// Its text, for reasons and prompts.
    pub text: String,
    /// What allow rules see: the words as written (quotes, `VAR=` prefixes and program paths
    /// kept), after transparent wrappers are removed.
    pub written: Vec<String>,
    /// The most normalized argv: what deny and ask rules see first (and what `explain` shows).
    pub normalized: Vec<String>,
    /// Every other argv deny and ask rules try (the literal argv, each wrapper layer, each
    /// later word after a wrapper with options it does not recognise, …); no duplicates.
    pub also: Vec<Vec<String>>,
    /// Why the program cannot be known statically, if it cannot: never allowed.
    pub unknown: Option<String>,
    /// The inner command of an argument-extending wrapper (`xargs`, `find -exec`): only an
    /// allow rule of the form `x:*` can allow it, since arguments are appended.
    pub extends: bool,
    /// Words that make the command more than its program's usual meaning (`find -delete`): an
    /// allow rule must spell each of them to allow it.
    pub hazards: Vec<String>,
    /// How the command was reached (`bash -c`, `xargs`, `a heredoc fed to sh`, …), if not
    /// directly.
    pub via: Option<String>,
    /// Whether it is a known read-only (program, flags) pair (see [`is_read_only`]).
    pub read_only: bool,
    /// A wrapper or shell whose inner commands are subjects of their own: deny and ask rules
    /// can match it, but it needs no allow.
    pub constraint: bool,
}

/// A redirect target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The redirect as written (`> out.txt`).
    pub text: String,
    /// The target path after quote removal (a leading `~/` left for the path matcher).
    pub path: String,
    /// Why the target cannot be known statically, if it cannot: never allowed.
    pub unknown: Option<String>,
}

/// Why a command could not be split: the call is denied, whatever the default.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// The command is longer than [`MAX_COMMAND_BYTES`].
    #[error("the command is {bytes} bytes long, more than the {max} bytes the splitter reads")]
    TooLarge {
        /// Its length.
        bytes: usize,
        /// The bound.
        max: usize,
    },
    /// Constructs nest deeper than [`MAX_NESTING`], or payloads deeper than
    /// [`MAX_PAYLOAD_DEPTH`].
    #[error("the command nests {what} more than {max} deep")]
    TooDeep {
        /// What nests.
        what: &'static str,
        /// The bound.
        max: usize,
    },
    /// More than [`MAX_SUBJECTS`] subjects.
    #[error("the command splits into more than {max} subjects")]
    TooManySubjects {
        /// The bound.
        max: usize,
    },
    /// Its subjects' text adds up to more than [`MAX_SUBJECT_TEXT_FACTOR`] times the command
    /// (commands nested too deeply in other commands' words).
    #[error(
        "the command's subjects repeat its text more than {factor} times over (commands nest too deeply inside other commands' words)"
    )]
    TooRepetitive {
        /// The bound, as a multiple of the command's length.
        factor: usize,
    },
    /// The parser gave up (its work budget ran out) or could not be set up.
    #[error("the command could not be parsed: {0}")]
    Parser(String),
    /// A syntax error, an `ERROR` node or a `MISSING` token.
    #[error("the command does not parse: {what} at line {line}, column {column}{context}")]
    Syntax {
        /// What is wrong (`a syntax error near \`;;\``, `a missing \`)\``, `an unterminated
        /// heredoc`).
        what: String,
        /// 1-based line.
        line: usize,
        /// 1-based column (in bytes).
        column: usize,
        /// ` in the payload of bash -c`, or empty.
        context: String,
    },
    /// A construct the splitter does not read with certainty.
    #[error("the command uses {0}, which the splitter does not read")]
    Unsupported(String),
}

/// Splits a shell command into the subjects it would run: every simple command (with its
/// readings), every redirect target, recursively through literal payloads. Pure.
///
/// Errors (deny, whatever the default): a command past [`MAX_COMMAND_BYTES`], a parse error
/// (`ERROR` or `MISSING` node, an unterminated quote, substitution or heredoc), nesting past
/// [`MAX_NESTING`] or [`MAX_PAYLOAD_DEPTH`], more than [`MAX_SUBJECTS`] subjects.
pub fn split_command(command: &str) -> Result<Vec<ShellSubject>, SplitError> {
    walk::split(command)
}

/// Whether a `bash` command only reads: it parses, and every subject is a simple command that
/// is a known read-only (program, flags) pair, run directly (no wrapper, no `VAR=` prefix, no
/// program path), with no output redirect to a file. Used by hint rules.
///
/// Known read-only: `ls`, `cat`, `head`, `tail`, `wc`, `grep`, `rg` (without `--pre` or
/// `-z`), `find` (without `-exec*`, `-ok*`, `-delete`, `-fprint*`, `-fls`), `sed -n` (without
/// `e`, `w` or `-i`), `git status|log|diff|show|blame|…` (without global options or
/// `--output`), `pwd`, `echo`, `test`/`[`/`[[`, `stat`, `file`, `du`, `df`, `sort` (without
/// `-o`), `diff`, `jq`, and a few more (see docs/shell.md).
///
/// ```
/// use warden_policy::shell::is_read_only;
/// assert!(is_read_only("ls -la && git log --oneline | head -5"));
/// assert!(!is_read_only("ls > listing.txt"));
/// assert!(!is_read_only("rg --pre ./x pattern"));
/// assert!(!is_read_only("ls; rm -rf /"));
/// ```
pub fn is_read_only(command: &str) -> bool {
    match split_command(command) {
        Ok(subjects) => subjects_are_read_only(&subjects),
        Err(_) => false,
    }
}

/// Whether already split subjects are all read-only (see [`is_read_only`]).
pub fn subjects_are_read_only(subjects: &[ShellSubject]) -> bool {
    !subjects.is_empty()
        && subjects.iter().all(|s| match s {
            ShellSubject::Command(c) => c.read_only && c.unknown.is_none(),
            ShellSubject::Read(r) => r.unknown.is_none(),
            ShellSubject::Write(_) => false,
        })
}
