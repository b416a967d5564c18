//! What some programs and builtins do beyond their name: run a string as code, or write a file
//! named by an option or operand. Each finding is one of three: a payload (literal code, parsed
//! in turn), a write subject (its path decided like a redirect's), or a reason the command is
//! unknown (code or targets Warden cannot read).
//!
//! Code runners: `trap 'code' SIG` (a payload); `mapfile -C`/`readarray -C`, `compgen -C`/`-F`,
//! `complete -C`/`-F` (code with arguments appended or run later: unknown); a variable that
//! defines a function or startup code for child shells (`BASH_FUNC_f%%`, `BASH_ENV`, `ENV`,
//! `PS4`, `PROMPT_COMMAND`, `SHELLOPTS`, `BASHOPTS`) assigned anywhere: unknown; git's
//! `--upload-pack`, `--receive-pack`, `--exec`, `-c core.*` (beyond the payload keys), `grep
//! -O`; tar's `--to-command`, `--use-compress-program`/`-I`, `--checkpoint-action`,
//! `--info-script`/`-F`, `--new-volume-script`, `--rsh-command`, `--rmt-command`; sort's
//! `--compress-program`; sed's `e` command and `s///e` flag, and a script read from a file
//! (`-f`); `file -C`.
//!
//! Writers: git's `--output`; sort's `-o`/`--output`; sed's `w`/`W` commands, `s///w` flag and
//! `-i` (its input files); `uniq`'s and `xxd`'s second operand.

use super::word::Word;

/// What a command does beyond its name.
#[derive(Debug, Default)]
pub(super) struct Effects {
    /// Why the command cannot be known, if it cannot.
    pub(super) unknown: Option<String>,
    /// Files it writes: (path as written, how it is written).
    pub(super) writes: Vec<(String, String)>,
    /// Literal code it runs: (text, how).
    pub(super) payloads: Vec<(String, String)>,
}

impl Effects {
    fn unknown(&mut self, why: String) {
        self.unknown.get_or_insert(why);
    }
}

/// Variables that make a shell run code Warden does not see: a child shell's startup file
/// (`BASH_ENV`, `ENV`), an exported function (`BASH_FUNC_name%%`), the trace prompt (`PS4`,
/// expanded with `set -x`), the prompt command, and options that could turn either on.
pub(super) fn code_variable(name: &str) -> bool {
    name.starts_with("BASH_FUNC_")
        || matches!(
            name,
            "BASH_ENV" | "ENV" | "PS4" | "PROMPT_COMMAND" | "SHELLOPTS" | "BASHOPTS"
        )
}

/// The name a `NAME=value` (or `NAME+=value`) word assigns, if it is one.
fn assigned_name(word: &str) -> Option<&str> {
    let (name, _) = word.split_once('=')?;
    let name = name.strip_suffix('+').unwrap_or(name);
    (!name.is_empty()).then_some(name)
}

/// Why assigning `word` makes a command unknown, if it does.
pub(super) fn code_assignment(word: &Word) -> Option<String> {
    let name = assigned_name(&word.value)?;
    code_variable(name).then(|| {
        format!(
            "`{name}` makes a shell run code Warden cannot see (an exported function, a startup file or a prompt)"
        )
    })
}

/// The effects of `name` run with `args`.
pub(super) fn effects(name: &str, args: &[Word]) -> Effects {
    let mut e = Effects::default();
    match name {
        "trap" => trap(&mut e, args),
        "mapfile" | "readarray" | "compgen" | "complete" => {
            if let Some(o) = args
                .iter()
                .find(|w| w.value.starts_with('-') && w.value[1..].contains(['C', 'F']))
            {
                e.unknown(format!(
                    "`{name} {}` runs code given as text, with arguments Warden cannot know",
                    o.written
                ));
            }
        }
        "env" | "export" | "declare" | "typeset" | "local" | "readonly" => {
            if let Some(why) = args.iter().find_map(code_assignment) {
                e.unknown(why);
            }
        }
        "git" => git(&mut e, args),
        "tar" | "bsdtar" | "gtar" => tar(&mut e, args),
        "sort" => sort(&mut e, args),
        "sed" | "gsed" => sed(&mut e, args),
        "file"
            if args
                .iter()
                .any(|w| w.value == "-C" || w.value == "--compile") =>
        {
            e.unknown("`file -C` writes a compiled magic file".into());
        }
        "uniq" | "xxd" => {
            let operands: Vec<&Word> = args.iter().filter(|w| !w.value.starts_with('-')).collect();
            if let Some(out) = operands.get(1) {
                e.writes.push((
                    out.value.clone(),
                    format!("{name}'s output file {}", out.written),
                ));
            }
        }
        _ => {}
    }
    e
}

/// `trap CODE SIGNAL…`: the code is a payload (run when the signal comes, or at exit).
fn trap(e: &mut Effects, args: &[Word]) {
    let mut args = args.iter().skip_while(|w| w.value == "--");
    let Some(code) = args.next() else { return };
    if matches!(code.value.as_str(), "-p" | "-l" | "-P") || code.value == "-" {
        return;
    }
    match &code.dynamic {
        Some(d) => e.unknown(format!("`trap` of code that is not a literal ({d})")),
        None if code.value.is_empty() => {}
        None => e.payloads.push((code.value.clone(), "trap".into())),
    }
}

/// An option's value: `--name=value`, `--name value`, `-Xvalue`, `-X value`.
fn option_value(args: &[Word], k: usize, long: &str, short: Option<char>) -> Option<String> {
    let a = args.get(k)?.value.as_str();
    if let Some(v) = a.strip_prefix(long).and_then(|r| r.strip_prefix('=')) {
        return Some(v.to_owned());
    }
    if a == long {
        return args.get(k + 1).map(|w| w.value.clone());
    }
    let s = short?;
    let flag = format!("-{s}");
    if a == flag {
        return args.get(k + 1).map(|w| w.value.clone());
    }
    a.strip_prefix(&flag)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

fn git(e: &mut Effects, args: &[Word]) {
    for (k, w) in args.iter().enumerate() {
        let v = w.value.as_str();
        for option in ["--upload-pack", "--receive-pack", "--exec"] {
            if v == option || v.starts_with(&format!("{option}=")) {
                e.unknown(format!("`git {option}` runs the program it names"));
            }
        }
        let grep = args.iter().any(|w| w.value == "grep");
        if (grep && v.starts_with("-O"))
            || v == "--open-files-in-pager"
            || v.starts_with("--open-files-in-pager=")
        {
            e.unknown(format!("`git grep {v}` runs a pager on the matches"));
        }
        if let Some(out) = option_value(args, k, "--output", None) {
            e.writes.push((out, format!("git's {v}")));
        }
        let setting = if v == "-c" {
            args.get(k + 1).map(|w| w.value.as_str())
        } else {
            v.strip_prefix("-c").filter(|s| !s.is_empty())
        };
        if let Some((key, _)) = setting.and_then(|s| s.split_once('=')) {
            let key = key.to_ascii_lowercase();
            if key.starts_with("core.")
                && !SAFE_CORE_KEYS.contains(&key.as_str())
                && !PAYLOAD_CORE_KEYS.contains(&key.as_str())
            {
                e.unknown(format!(
                    "`git -c {key}` changes how git runs or reads the repository"
                ));
            }
        }
    }
}

/// `core.*` settings whose value is a command: parsed as a payload (its commands are subjects).
const PAYLOAD_CORE_KEYS: [&str; 4] = [
    "core.pager",
    "core.editor",
    "core.sshcommand",
    "core.fsmonitor",
];

/// `core.*` settings that only change how git prints or compares.
const SAFE_CORE_KEYS: [&str; 7] = [
    "core.quotepath",
    "core.autocrlf",
    "core.safecrlf",
    "core.eol",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.abbrev",
];

fn tar(e: &mut Effects, args: &[Word]) {
    for w in args {
        let v = w.value.as_str();
        let runs = [
            "--to-command",
            "--use-compress-program",
            "--checkpoint-action",
            "--info-script",
            "--new-volume-script",
            "--rsh-command",
            "--rmt-command",
        ]
        .iter()
        .any(|o| v == *o || v.starts_with(&format!("{o}=")));
        // `-I prog`, `-F script` (alone or at the end of a cluster, as tar reads them).
        let short = v.starts_with('-')
            && !v.starts_with("--")
            && v[1..].chars().any(|c| c == 'I' || c == 'F');
        if runs || short {
            e.unknown(format!("`tar {v}` runs a program given as text"));
        }
    }
}

fn sort(e: &mut Effects, args: &[Word]) {
    for (k, w) in args.iter().enumerate() {
        let v = w.value.as_str();
        if v == "--compress-program" || v.starts_with("--compress-program=") {
            e.unknown("`sort --compress-program` runs the program it names".into());
        }
        if let Some(out) = option_value(args, k, "--output", Some('o')) {
            e.writes.push((out, format!("sort's {v}")));
        }
    }
}

/// sed: scripts from `-e`/`--expression` or the first operand; `-f` reads one from a file
/// (unknown); `-i` writes every input file; `w`/`W` and `s///w` write files; `e` and `s///e`
/// run commands.
fn sed(e: &mut Effects, args: &[Word]) {
    let mut scripts: Vec<&Word> = Vec::new();
    let mut operands: Vec<&Word> = Vec::new();
    let mut in_place = false;
    let mut k = 0;
    while let Some(w) = args.get(k) {
        let v = w.value.as_str();
        match v {
            "-e" | "--expression" => {
                if let Some(s) = args.get(k + 1) {
                    scripts.push(s);
                }
                k += 2;
                continue;
            }
            "-f" | "--file" => {
                e.unknown("`sed -f` reads its script from a file".into());
            }
            _ if v.starts_with("--expression=") || v.starts_with("--file=") => {
                if v.starts_with("--file=") {
                    e.unknown("`sed --file` reads its script from a file".into());
                }
            }
            _ if v.starts_with("--in-place") => in_place = true,
            _ if v.starts_with('-') && v.len() > 1 && !v.starts_with("--") => {
                let flags = &v[1..];
                if let Some(i) = flags.find('i') {
                    // `-i[SUFFIX]`: the rest of the cluster is the suffix.
                    let _ = i;
                    in_place = true;
                } else if flags.contains('f') {
                    e.unknown("`sed -f` reads its script from a file".into());
                } else if flags.ends_with('e') {
                    if let Some(s) = args.get(k + 1) {
                        scripts.push(s);
                    }
                    k += 2;
                    continue;
                }
            }
            _ => operands.push(w),
        }
        k += 1;
    }
    let long_scripts: Vec<String> = args
        .iter()
        .filter_map(|w| w.value.strip_prefix("--expression=").map(str::to_owned))
        .collect();
    let mut texts: Vec<(String, bool)> = scripts
        .iter()
        .map(|w| (w.value.clone(), w.dynamic.is_some()))
        .chain(long_scripts.into_iter().map(|s| (s, false)))
        .collect();
    let mut files = operands.as_slice();
    if texts.is_empty()
        && let Some((first, rest)) = operands.split_first()
    {
        texts.push((first.value.clone(), first.dynamic.is_some()));
        files = rest;
    }
    for (text, dynamic) in &texts {
        if *dynamic {
            e.unknown("a sed script that is not a literal".into());
            continue;
        }
        match sed_script(text) {
            Ok(written) => {
                for path in written {
                    e.writes.push((path, "sed's `w`".into()));
                }
            }
            Err(why) => e.unknown(why),
        }
    }
    if in_place {
        for f in files {
            e.writes
                .push((f.value.clone(), format!("sed -i on {}", f.written)));
        }
    }
}

/// The files a sed script writes (`w file`, `W file`, `s///w file`), or why it cannot be
/// read: an `e` command or `s///e` flag (it runs commands), or anything this reader does not
/// know (fail closed).
pub(super) fn sed_script(script: &str) -> Result<Vec<String>, String> {
    let b: Vec<char> = script.chars().collect();
    let mut writes = Vec::new();
    let mut i = 0;
    let unknown = |what: &str| {
        Err(format!(
            "the sed script `{}` {what}",
            super::word::shorten(script)
        ))
    };
    let rest_of_line = |i: usize| -> (String, usize) {
        let mut j = i;
        while j < b.len() && b[j] != '\n' {
            j += 1;
        }
        (
            b[i..j].iter().collect::<String>().trim_start().to_owned(),
            j,
        )
    };
    while i < b.len() {
        while i < b.len() && matches!(b[i], ';' | '\n' | ' ' | '\t' | '{' | '}' | '!') {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        // Address: numbers, `$`, `,`, `~`, `+`, `/re/` or `\cREc`, flags `I` `M`.
        loop {
            match b.get(i) {
                Some(c) if c.is_ascii_digit() || matches!(c, '$' | ',' | '~' | '+' | ' ') => i += 1,
                Some('/') => match skip_delimited(&b, i + 1, '/') {
                    Some(end) => {
                        i = end;
                        while matches!(b.get(i), Some('I' | 'M')) {
                            i += 1;
                        }
                    }
                    None => return unknown("has an unterminated address"),
                },
                Some('\\') => {
                    let Some(&d) = b.get(i + 1) else {
                        return unknown("ends in a backslash");
                    };
                    match skip_delimited(&b, i + 2, d) {
                        Some(end) => i = end,
                        None => return unknown("has an unterminated address"),
                    }
                }
                _ => break,
            }
        }
        while matches!(b.get(i), Some('!' | ' ')) {
            i += 1;
        }
        let Some(&cmd) = b.get(i) else { break };
        i += 1;
        match cmd {
            'p' | 'P' | 'l' | '=' | 'n' | 'N' | 'd' | 'D' | '{' | '}' | 'h' | 'H' | 'g' | 'G'
            | 'x' | 'z' | 'F' => {}
            'q' | 'Q' | 'L' => {
                while b.get(i).is_some_and(char::is_ascii_digit) {
                    i += 1;
                }
            }
            ':' | 'b' | 't' | 'T' => {
                // A label runs to the end of the line (or a `;` for b/t/T in GNU sed).
                while i < b.len() && b[i] != '\n' && (cmd == ':' || b[i] != ';') {
                    i += 1;
                }
            }
            '#' => i = rest_of_line(i).1,
            'a' | 'i' | 'c' => i = rest_of_line(i).1,
            'r' | 'R' => i = rest_of_line(i).1,
            'w' | 'W' => {
                let (file, end) = rest_of_line(i);
                if file.is_empty() {
                    return unknown("has a `w` with no file");
                }
                writes.push(file);
                i = end;
            }
            'e' => return unknown("runs a command (`e`)"),
            'y' => {
                let Some(&d) = b.get(i) else {
                    return unknown("has an incomplete `y`");
                };
                let Some(mid) = skip_delimited(&b, i + 1, d) else {
                    return unknown("has an incomplete `y`");
                };
                let Some(end) = skip_delimited(&b, mid, d) else {
                    return unknown("has an incomplete `y`");
                };
                i = end;
            }
            's' => {
                let Some(&d) = b.get(i) else {
                    return unknown("has an incomplete `s`");
                };
                let Some(mid) = skip_delimited(&b, i + 1, d) else {
                    return unknown("has an incomplete `s`");
                };
                let Some(end) = skip_delimited(&b, mid, d) else {
                    return unknown("has an incomplete `s`");
                };
                i = end;
                while let Some(&f) = b.get(i) {
                    match f {
                        'g' | 'p' | 'i' | 'I' | 'm' | 'M' => i += 1,
                        f if f.is_ascii_digit() => i += 1,
                        'e' => return unknown("runs the result as a command (`s///e`)"),
                        'w' => {
                            let (file, end) = rest_of_line(i + 1);
                            if file.is_empty() {
                                return unknown("has `s///w` with no file");
                            }
                            writes.push(file);
                            i = end;
                            break;
                        }
                        ';' | '\n' | ' ' | '}' | '\t' => break,
                        _ => return unknown("has an `s` flag this reader does not know"),
                    }
                }
            }
            other => {
                return unknown(&format!(
                    "has a command (`{other}`) this reader does not know"
                ));
            }
        }
    }
    Ok(writes)
}

/// The index after the next unescaped `delim` from `from`.
fn skip_delimited(b: &[char], from: usize, delim: char) -> Option<usize> {
    let mut i = from;
    while i < b.len() {
        if b[i] == '\\' {
            i += 2;
            continue;
        }
        if b[i] == delim {
            return Some(i + 1);
        }
        if b[i] == '\n' {
            return None;
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::word::words;

    #[test]
    fn sed_scripts_are_read_for_commands_and_written_files() {
        assert_eq!(sed_script("1,5p").unwrap(), Vec::<String>::new());
        assert_eq!(sed_script("s/a/b/g;/x/d").unwrap(), Vec::<String>::new());
        assert_eq!(
            sed_script("w .git/hooks/pre-commit").unwrap(),
            [".git/hooks/pre-commit"]
        );
        assert_eq!(sed_script("s/a/b/w out.txt").unwrap(), ["out.txt"]);
        assert_eq!(sed_script("1W log;p").unwrap(), ["log;p"]);
        assert!(sed_script("1e rm x").is_err());
        assert!(sed_script("s/a/rm x/e").is_err());
        assert!(sed_script("v 4.2").is_err(), "unknown commands fail closed");
    }

    #[test]
    fn runners_and_writers() {
        assert!(effects("trap", &words("rm EXIT")).payloads == [("rm".into(), "trap".into())]);
        assert!(effects("mapfile", &words("-C cb -c 1")).unknown.is_some());
        assert!(
            effects("git", &words("clone --upload-pack=x u"))
                .unknown
                .is_some()
        );
        assert!(
            effects("git", &words("-c core.hooksPath=h status"))
                .unknown
                .is_some()
        );
        assert!(
            effects("git", &words("-c core.quotepath=off status"))
                .unknown
                .is_none()
        );
        assert_eq!(effects("git", &words("log --output=f")).writes.len(), 1);
        assert!(effects("git", &words("grep -O x")).unknown.is_some());
        assert!(
            effects("tar", &words("-xf a.tar --to-command=sh"))
                .unknown
                .is_some()
        );
        assert!(
            effects("tar", &words("-cIzstd -f a.tar ."))
                .unknown
                .is_some()
        );
        assert!(effects("tar", &words("-xzf a.tar")).unknown.is_none());
        assert_eq!(effects("sort", &words("-o out in")).writes[0].0, "out");
        assert_eq!(effects("sort", &words("-oout in")).writes[0].0, "out");
        assert!(
            effects("sort", &words("--compress-program=sh in"))
                .unknown
                .is_some()
        );
        assert_eq!(effects("sed", &words("-i s/a/b/ f g")).writes.len(), 2);
        let script = [
            Word::literal("-n"),
            Word::literal("w .git/x"),
            Word::literal("f"),
        ];
        assert_eq!(effects("sed", &script).writes[0].0, ".git/x");
        assert!(effects("sed", &words("-f script f")).unknown.is_some());
        assert!(effects("file", &words("-C -m magic")).unknown.is_some());
        assert_eq!(effects("uniq", &words("in out")).writes[0].0, "out");
        assert!(
            effects("env", &words("BASH_FUNC_ls%%=() ls"))
                .unknown
                .is_some()
        );
    }
}
