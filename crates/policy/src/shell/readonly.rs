//! Read-only classification: an allowlist of (program, option set) pairs that only read.
//!
//! Each program below either takes **any** option (it has none that writes a file or runs a
//! command: `cat`, `wc`, `grep`, …) or a stated set: every option outside the set, or an
//! operand count past the stated one, makes the command not read-only. A program not listed
//! is never read-only. What a hint rule allows on `read_only` is exactly this table.

use super::word::Word;

/// Which options of a program keep it read-only.
enum Options {
    /// Every option: the program has none that writes or runs anything.
    Any,
    /// Every option but these (by name, `--name=value` included; a short one also inside a
    /// cluster such as `-so`), and at most `operands` operands when set.
    Except {
        long: &'static [&'static str],
        short: &'static str,
        operands: Option<usize>,
    },
    /// No argument at all.
    NoArgs,
}

/// The programs that only read, with the options that keep them so.
fn options(program: &str) -> Option<Options> {
    use Options::{Any, Except, NoArgs};
    Some(match program {
        "ls" | "cat" | "head" | "tail" | "wc" | "grep" | "egrep" | "fgrep" | "pwd" | "echo"
        | "true" | "false" | "test" | "[" | "[[" | "which" | "type" | "whoami" | "id" | "uname"
        | "stat" | "du" | "df" | "cmp" | "comm" | "cut" | "tr" | "basename" | "dirname"
        | "realpath" | "readlink" | "jq" | "nl" | "od" | "hexdump" | "md5sum" | "sha1sum"
        | "sha256sum" | "sha512sum" | "b2sum" | "cksum" | "column" | "fold" | "rev" | "tac"
        | "seq" | "printenv" | "zcat" | "groups" | "locale" | "nproc" | "tty" => Any,
        // `-v` assigns a variable (and can evaluate a subscript).
        "printf" => Except {
            long: &[],
            short: "v",
            operands: None,
        },
        // Commands given with `+cmd` or bound by a key file run at start (`+!` runs a shell);
        // `-o`/`-O` copy the input to a log file.
        "less" | "more" => Except {
            long: &[
                "--log-file",
                "--LOG-FILE",
                "--lesskey-file",
                "--lesskey-src",
            ],
            short: "oOk",
            operands: None,
        },
        // A preprocessor, decompressors and a program for the host name run commands.
        "rg" => Except {
            long: &["--pre", "--pre-glob", "--search-zip", "--hostname-bin"],
            short: "z",
            operands: None,
        },
        "fd" | "fdfind" => Except {
            long: &["--exec", "--exec-batch"],
            short: "xX",
            operands: None,
        },
        "file" => Except {
            long: &["--compile"],
            short: "C",
            operands: None,
        },
        "sort" => Except {
            long: &["--output", "--compress-program"],
            short: "o",
            operands: None,
        },
        "uniq" => Except {
            long: &[],
            short: "",
            operands: Some(1),
        },
        "xxd" => Except {
            long: &["-revert"],
            short: "r",
            operands: Some(1),
        },
        "tree" => Except {
            long: &[],
            short: "o",
            operands: None,
        },
        "date" => Except {
            long: &["--set"],
            short: "s",
            operands: None,
        },
        "diff" => Except {
            long: &["--output"],
            short: "",
            operands: None,
        },
        "hostname" | "env" => NoArgs,
        _ => return None,
    })
}

/// Whether a simple command (its words, run directly) is a known read-only (program, options)
/// pair. The program must be a bare, unquoted name (no path).
pub(super) fn is_read_only_argv(words: &[Word]) -> bool {
    let Some((program, args)) = words.split_first() else {
        return false;
    };
    if program.quoted || program.dynamic.is_some() || program.value.contains('/') {
        return false;
    }
    let args: Vec<&str> = args.iter().map(|w| w.value.as_str()).collect();
    match program.value.as_str() {
        "find" => return find_read_only(&args),
        "sed" => return sed_read_only(&args),
        "git" => return git_read_only(&args),
        // `+cmd` runs a less command at start (`+!cmd` a shell command).
        "less" | "more" if args.iter().any(|a| a.starts_with('+')) => return false,
        _ => {}
    }
    match options(&program.value) {
        Some(Options::Any) => true,
        Some(Options::NoArgs) => args.is_empty(),
        Some(Options::Except {
            long,
            short,
            operands,
        }) => {
            let mut after_options = false;
            let mut count = 0;
            for a in &args {
                if after_options || !a.starts_with('-') || *a == "-" {
                    count += 1;
                    continue;
                }
                if *a == "--" {
                    after_options = true;
                    continue;
                }
                if let Some(l) = a.strip_prefix("--") {
                    let name = l.split('=').next().unwrap_or(l);
                    if long.contains(&format!("--{name}").as_str()) {
                        return false;
                    }
                } else if a[1..].chars().any(|c| short.contains(c)) || long.contains(a) {
                    return false;
                }
            }
            operands.is_none_or(|max| count <= max)
        }
        None => false,
    }
}

/// find's predicates and options that only read or print (to standard output).
const FIND_READ: [&str; 64] = [
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
    "-regextype",
    "-type",
    "-xtype",
    "-size",
    "-empty",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-newer",
    "-anewer",
    "-cnewer",
    "-newermt",
    "-newerct",
    "-newerat",
    "-used",
    "-user",
    "-group",
    "-uid",
    "-gid",
    "-nouser",
    "-nogroup",
    "-perm",
    "-links",
    "-inum",
    "-samefile",
    "-lname",
    "-ilname",
    "-readable",
    "-writable",
    "-executable",
    "-fstype",
    "-maxdepth",
    "-mindepth",
    "-depth",
    "-prune",
    "-xdev",
    "-mount",
    "-follow",
    "-daystart",
    "-noleaf",
    "-ignore_readdir_race",
    "-print",
    "-print0",
    "-printf",
    "-ls",
    "-quit",
    "-true",
    "-false",
    "-not",
    "-o",
    "-a",
    "-or",
    "-and",
];

/// `find` whose every option is one that only reads or prints (not `-exec`, `-delete`,
/// `-fprint`, …); numeric values such as `-1` or `-5k` are values.
fn find_read_only(args: &[&str]) -> bool {
    args.iter().all(|a| {
        !a.starts_with('-')
            || matches!(*a, "-" | "-L" | "-H" | "-P" | "-O1" | "-O2" | "-O3")
            || FIND_READ.contains(a)
            || a[1..].chars().next().is_some_and(|c| c.is_ascii_digit())
    })
}

fn git_read_only(args: &[&str]) -> bool {
    let Some((sub, rest)) = args.split_first() else {
        return false;
    };
    // Writing a file, running a program (an external diff, a text converter, a pager).
    let writes_or_runs = rest.iter().any(|a| {
        a.starts_with("--output")
            || *a == "-o"
            || a.starts_with("--ext-diff")
            || a.starts_with("--textconv")
            || *a == "-O"
            || a.starts_with("--open-files-in-pager")
    });
    if writes_or_runs {
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

/// `sed -n` with only read-only options, whose scripts write no file and run no command
/// (the script reader of `programs` decides), and no `-i` or `-f`.
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
            a if a.starts_with("--expression=") => {
                script_given = true;
                scripts.push(&a["--expression=".len()..]);
            }
            a if a.starts_with('-') && a.len() > 1 => {
                // A cluster such as `-nE`; anything else (`-i`, `-f`, `-l N`) is not read-only.
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
    quiet
        && !scripts.is_empty()
        && scripts
            .iter()
            .all(|s| super::programs::sed_script(s).is_ok_and(|w| w.is_empty()))
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
            "sort -r x",
            "file x",
            "less -N f",
            "find . -type f -mtime -1 -print",
            "xxd a",
            "head -n -5 f",
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
            "git grep -O x",
            "git log --output=f",
            "git diff --textconv",
            "file -C -m magic",
            "sort --compress-program=sh x",
            "sort -so out in",
            "less +!rm f",
            "less -o log f",
            "xxd a b",
            "rg --hostname-bin=x y",
            "sed -n w.git/x f",
            "sed -n 1e f",
            "find . -newer x -fls out",
            "find . -unknown-predicate",
            "printf -v x %s y",
            "env X=1",
            "tar -tf a.tar",
        ] {
            assert!(!ro(no), "{no}");
        }
    }
}
