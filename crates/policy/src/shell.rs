//! The seam where the shell splitter plugs in, and the stopgap behind it.
//!
//! Until the tree-sitter splitter lands (issue 4), a `bash` command holding any of `;`, `&`,
//! `|`, a backtick, `$(`, `<`, `>` or a newline is refused as unsplittable (ADR-0044 D2's
//! stopgap): never matched as a whole string. Anything else is one simple command, tokenized
//! with POSIX quoting. Normalization only makes deny/ask rules match more and allow rules
//! match less:
//!
//! - allow rules see the words as written (quotes and `VAR=` prefixes kept);
//! - deny and ask rules see the normalized argv: quotes removed, leading `VAR=value`
//!   assignments dropped, a program path reduced to its file name, the program name lower-cased;
//! - a program that cannot be known statically (`$` expansion anywhere, a glob or brace
//!   character or a leading `=` in the command word) is marked unknown, which is never allowed.

/// One simple command a shell string would run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellCommand {
    /// Its text, for reasons and prompts.
    pub text: String,
    /// Its words as written.
    pub written: Vec<String>,
    /// Its normalized argv.
    pub normalized: Vec<String>,
    /// Why the program cannot be known statically, if it cannot.
    pub unknown: Option<String>,
}

/// Why a command could not be split: the call is denied, whatever the default.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SplitError(pub String);

const UNSPLITTABLE: [(&str, &str); 8] = [
    (";", "`;`"),
    ("&", "`&`"),
    ("|", "`|`"),
    ("`", "a backtick"),
    ("$(", "`$(`"),
    ("<", "`<`"),
    (">", "`>`"),
    ("\n", "a newline"),
];

/// Splits a shell command into the simple commands it would run.
pub fn split_command(command: &str) -> Result<Vec<ShellCommand>, SplitError> {
    for (needle, name) in UNSPLITTABLE {
        if command.contains(needle) {
            return Err(SplitError(format!(
                "the command contains {name}, which cannot be split safely yet (compound commands wait for the shell splitter)"
            )));
        }
    }
    let words = tokenize(command)?;
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let written: Vec<String> = command
        .split_ascii_whitespace()
        .map(str::to_owned)
        .collect();
    let mut unknown = None;
    if words.iter().any(|w| w.expands) {
        unknown = Some("it uses `$` expansion".to_owned());
    }
    // Drop leading assignments for deny/ask.
    let mut argv: Vec<&Word> = words.iter().collect();
    while argv.first().is_some_and(|w| w.is_assignment()) {
        argv.remove(0);
    }
    let mut normalized: Vec<String> = argv.iter().map(|w| w.text.clone()).collect();
    if let Some(first) = argv.first() {
        if first.raw.starts_with('=') {
            unknown.get_or_insert_with(|| "its command word starts with `=`".to_owned());
        }
        if first.raw.contains(['*', '?', '[', '{', '~']) {
            unknown
                .get_or_insert_with(|| "its command word holds a glob or brace pattern".to_owned());
        }
    }
    if let Some(program) = normalized.first_mut() {
        let base = program.rsplit('/').next().unwrap_or(program).to_lowercase();
        *program = base;
    }
    if normalized.is_empty() {
        // Only assignments: nothing runs but the assignment itself.
        normalized = written.clone();
    }
    Ok(vec![ShellCommand {
        text: command.trim().to_owned(),
        written,
        normalized,
        unknown,
    }])
}

struct Word {
    /// After quote removal.
    text: String,
    /// As written.
    raw: String,
    /// Whether an unquoted or double-quoted `$` appears.
    expands: bool,
}

impl Word {
    fn is_assignment(&self) -> bool {
        match self.raw.split_once('=') {
            Some((name, _)) => {
                !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !name.starts_with(|c: char| c.is_ascii_digit())
            }
            None => false,
        }
    }
}

fn tokenize(command: &str) -> Result<Vec<Word>, SplitError> {
    let mut words = Vec::new();
    let mut chars = command.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_ascii_whitespace()).is_some() {}
        if chars.peek().is_none() {
            break;
        }
        let mut text = String::new();
        let mut raw = String::new();
        let mut expands = false;
        while let Some(&c) = chars.peek() {
            if c.is_ascii_whitespace() {
                break;
            }
            chars.next();
            raw.push(c);
            match c {
                '\'' => loop {
                    match chars.next() {
                        Some('\'') => {
                            raw.push('\'');
                            break;
                        }
                        Some(c) => {
                            raw.push(c);
                            text.push(c);
                        }
                        None => return Err(SplitError("unterminated single quote".into())),
                    }
                },
                '"' => loop {
                    match chars.next() {
                        Some('"') => {
                            raw.push('"');
                            break;
                        }
                        Some('\\') => {
                            raw.push('\\');
                            match chars.next() {
                                Some(e) => {
                                    raw.push(e);
                                    if !matches!(e, '$' | '`' | '"' | '\\') {
                                        text.push('\\');
                                    }
                                    text.push(e);
                                }
                                None => {
                                    return Err(SplitError("unterminated double quote".into()));
                                }
                            }
                        }
                        Some(c) => {
                            if c == '$' {
                                expands = true;
                            }
                            raw.push(c);
                            text.push(c);
                        }
                        None => return Err(SplitError("unterminated double quote".into())),
                    }
                },
                '\\' => match chars.next() {
                    Some(e) => {
                        raw.push(e);
                        text.push(e);
                    }
                    None => return Err(SplitError("a trailing backslash".into())),
                },
                '$' => {
                    expands = true;
                    text.push(c);
                }
                c => text.push(c),
            }
        }
        words.push(Word { text, raw, expands });
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compound_commands_are_refused() {
        for c in [
            "git status && rm -rf /",
            "a; b",
            "a | b",
            "echo `id`",
            "echo $(id)",
            "cat < x",
            "echo > x",
            "a\nb",
        ] {
            assert!(split_command(c).is_err(), "{c}");
        }
    }

    #[test]
    fn normalization_only_helps_deny() {
        let c = &split_command("FOO=1 '/bin/R''m' -rf /").unwrap()[0];
        assert_eq!(c.written, ["FOO=1", "'/bin/R''m'", "-rf", "/"]);
        assert_eq!(c.normalized, ["rm", "-rf", "/"]);
        assert!(c.unknown.is_none());
    }

    #[test]
    fn unknown_programs_are_marked() {
        for c in ["$CMD x", "r* -rf /", "=ls", "echo \"$HOME\""] {
            assert!(split_command(c).unwrap()[0].unknown.is_some(), "{c}");
        }
        assert!(split_command("echo '$HOME'").unwrap()[0].unknown.is_none());
        assert!(split_command("   ").unwrap().is_empty());
        assert!(split_command("echo 'unterminated").is_err());
    }
}
