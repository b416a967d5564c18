//! Read-only classification: known (program, flags) pairs that only read.

use super::word::Word;

/// Whether a simple command (its words, run directly) is a known read-only (program, flags)
/// pair. The program must be a bare, unquoted name (no path).
pub(super) fn is_read_only_argv(words: &[Word]) -> bool {
    let Some((program, args)) = words.split_first() else {
        return false;
    };
    if program.quoted || program.dynamic.is_some() || program.value.contains('/') {
        return false;
    }
    let args: Vec<&str> = args.iter().map(|w| w.value.as_str()).collect();
    let has = |opts: &[&str]| {
        args.iter().any(|a| {
            opts.iter().any(|o| {
                *a == *o
                    || (o.starts_with("--")
                        && a.strip_prefix(*o).is_some_and(|rest| rest.starts_with('=')))
            })
        })
    };
    let operands = || args.iter().filter(|a| !a.starts_with('-')).count();
    match program.value.as_str() {
        "ls" | "cat" | "head" | "tail" | "wc" | "grep" | "egrep" | "fgrep" | "pwd" | "echo"
        | "printf" | "true" | "false" | "test" | "[" | "[[" | "which" | "type" | "whoami"
        | "id" | "uname" | "stat" | "file" | "du" | "df" | "cmp" | "comm" | "cut" | "tr"
        | "basename" | "dirname" | "realpath" | "readlink" | "jq" | "nl" | "od" | "hexdump"
        | "md5sum" | "sha1sum" | "sha256sum" | "sha512sum" | "b2sum" | "cksum" | "column"
        | "fold" | "rev" | "tac" | "seq" | "printenv" | "less" | "more" | "zcat" | "groups"
        | "locale" | "nproc" | "tty" => {
            // `less`/`more` can run commands interactively, but never without a terminal.
            !(program.value == "printf" && has(&["-v"]))
        }
        "rg" => {
            !has(&["--pre", "-z", "--search-zip"]) && !args.iter().any(|a| a.starts_with("--pre="))
        }
        "fd" | "fdfind" => !has(&["-x", "--exec", "-X", "--exec-batch"]),
        "find" => !args.iter().any(|a| {
            matches!(
                *a,
                "-exec"
                    | "-execdir"
                    | "-ok"
                    | "-okdir"
                    | "-delete"
                    | "-fprint"
                    | "-fprint0"
                    | "-fprintf"
                    | "-fls"
            )
        }),
        "sort" => !has(&["-o", "--output"]) && !args.iter().any(|a| a.starts_with("-o")),
        "uniq" => operands() <= 1,
        "xxd" => !has(&["-r", "-revert"]) && operands() <= 1,
        "tree" => !has(&["-o"]),
        "date" => !has(&["-s", "--set"]),
        "hostname" => args.is_empty(),
        "env" => args.is_empty(),
        "diff" => !args.iter().any(|a| a.starts_with("--output")),
        "sed" => sed_read_only(&args),
        "git" => git_read_only(&args),
        _ => false,
    }
}

fn git_read_only(args: &[&str]) -> bool {
    let Some((sub, rest)) = args.split_first() else {
        return false;
    };
    let writes = rest
        .iter()
        .any(|a| a.starts_with("--output") || *a == "-o" || a.starts_with("--ext-diff"));
    if writes {
        return false;
    }
    match *sub {
        "status" | "log" | "diff" | "show" | "blame" | "ls-files" | "ls-tree" | "rev-parse"
        | "describe" | "shortlog" | "grep" | "cat-file" | "rev-list" | "merge-base" => true,
        "branch" | "tag" | "remote" | "stash" => {
            rest.iter().all(|a| {
                matches!(
                    *a,
                    "-a" | "-r" | "-v" | "-vv" | "--list" | "-l" | "--all" | "--show-current"
                ) || (*sub == "stash" && *a == "list")
            }) && (*sub != "stash" || rest.first() == Some(&"list"))
        }
        _ => false,
    }
}

/// `sed -n` whose scripts have no `w`, `W`, `e` command or `s///w`/`s///e` flag, and no
/// `-i`.
fn sed_read_only(args: &[&str]) -> bool {
    let mut quiet = false;
    let mut scripts: Vec<&str> = Vec::new();
    let mut k = 0;
    let mut script_given = false;
    while let Some(a) = args.get(k) {
        match *a {
            "-n" | "--quiet" | "--silent" => quiet = true,
            "-e" | "--expression" => {
                script_given = true;
                if let Some(s) = args.get(k + 1) {
                    scripts.push(s);
                }
                k += 1;
            }
            "-E" | "-r" | "--regexp-extended" | "-s" | "--separate" | "-z" | "--null-data"
            | "-u" | "--unbuffered" | "--posix" | "--sandbox" => {}
            a if a.starts_with("-i") || a.starts_with("--in-place") || a == "-f" => return false,
            a if a.starts_with("--expression=") => {
                script_given = true;
                scripts.push(&a["--expression=".len()..]);
            }
            a if a.starts_with('-') && a.len() > 1 => {
                // A cluster such as `-nE`.
                if a[1..].chars().all(|c| "nEsruz".contains(c)) {
                    quiet |= a.contains('n');
                } else {
                    return false;
                }
            }
            a => {
                if !script_given {
                    scripts.push(a);
                    script_given = true;
                }
            }
        }
        k += 1;
    }
    quiet && !scripts.is_empty() && scripts.iter().all(|s| sed_script_reads(s))
}

/// A conservative reading of a sed script: each command (after its address) must be one of
/// `p`, `P`, `l`, `=`, `n`, `N`, `q`, `Q`, `d`, `D`, `{`, `}`, `!`, or `s` with flags among
/// `g`, `p`, `i`, `I`, `m`, `M` and digits.
fn sed_script_reads(script: &str) -> bool {
    let b = script.as_bytes();
    let mut i = 0;
    while i < b.len() {
        // Skip separators and whitespace.
        while i < b.len() && matches!(b[i], b';' | b'\n' | b' ' | b'\t' | b'{' | b'}' | b'!') {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        // Address: numbers, `$`, `,`, `~`, `+`, regexes `/…/` or `\c…c`.
        loop {
            match b.get(i) {
                Some(c) if c.is_ascii_digit() || matches!(c, b'$' | b',' | b'~' | b'+' | b' ') => {
                    i += 1
                }
                Some(b'/') => match skip_delimited(b, i + 1, b'/') {
                    Some(end) => {
                        i = end;
                        while matches!(b.get(i), Some(b'I' | b'M')) {
                            i += 1;
                        }
                    }
                    None => return false,
                },
                Some(b'\\') => {
                    let Some(&d) = b.get(i + 1) else {
                        return false;
                    };
                    match skip_delimited(b, i + 2, d) {
                        Some(end) => i = end,
                        None => return false,
                    }
                }
                _ => break,
            }
        }
        while matches!(b.get(i), Some(b'!' | b' ')) {
            i += 1;
        }
        let Some(&cmd) = b.get(i) else {
            break;
        };
        i += 1;
        match cmd {
            b'p' | b'P' | b'l' | b'=' | b'n' | b'N' | b'd' | b'D' | b'{' | b'}' | b'h' | b'H'
            | b'g' | b'G' | b'x' => {}
            b'q' | b'Q' => {
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
            }
            b's' => {
                let Some(&d) = b.get(i) else {
                    return false;
                };
                let Some(mid) = skip_delimited(b, i + 1, d) else {
                    return false;
                };
                let Some(end) = skip_delimited(b, mid, d) else {
                    return false;
                };
                i = end;
                while let Some(&f) = b.get(i) {
                    match f {
                        b'g' | b'p' | b'i' | b'I' | b'm' | b'M' => i += 1,
                        f if f.is_ascii_digit() => i += 1,
                        b';' | b'\n' | b' ' | b'}' => break,
                        _ => return false,
                    }
                }
            }
            _ => return false,
        }
    }
    true
}

/// The index after the next unescaped `delim` from `from`.
fn skip_delimited(b: &[u8], from: usize, delim: u8) -> Option<usize> {
    let mut i = from;
    while i < b.len() {
        if b[i] == b'\\' {
            i += 2;
            continue;
        }
        if b[i] == delim {
            return Some(i + 1);
        }
        if b[i] == b'\n' {
            return None;
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ro(s: &str) -> bool {
        let words: Vec<Word> = s.split(' ').map(Word::literal).collect();
        is_read_only_argv(&words)
    }

    #[test]
    fn table() {
        for yes in [
            "ls -la",
            "git status",
            "git log --oneline",
            "find . -name x",
            "sed -n 1,5p f",
            "sed -n /error/p f",
            "sed -n s/a/b/gp f",
            "rg foo",
            "grep -r x .",
            "git branch",
            "git stash list",
        ] {
            assert!(ro(yes), "{yes}");
        }
        for no in [
            "rm x",
            "find . -delete",
            "find . -exec rm {} ;",
            "find . -fprint out",
            "sed -n 1w/tmp/x f",
            "sed -n s/a/b/e f",
            "sed -i s/a/b/ f",
            "sed s/a/b/ f",
            "sed -n 1e f",
            "rg --pre ./x foo",
            "rg --pre=./x foo",
            "git push",
            "git diff --output=x",
            "git branch -D x",
            "sort -o x y",
            "/bin/ls",
            "uniq a b",
            "git stash",
        ] {
            assert!(!ro(no), "{no}");
        }
    }
}
