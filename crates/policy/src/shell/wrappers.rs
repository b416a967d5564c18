//! Wrappers and other programs whose arguments are commands: what kind each is and how its
//! options are read.

use super::word::Word;

/// What a program does with the command in its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Runs its inner command unchanged (`timeout`, `nice`, …): the inner command is the subject
    /// for every rule, allow included.
    Transparent,
    /// Runs its inner command in another context (`sudo`, `env X=1`, …): deny and ask see the
    /// inner command, allow sees the words as written.
    Context,
    /// Runs its inner command with arguments appended (`xargs`): only `x:*` allow rules reach
    /// the inner command.
    Extending,
    /// Runs a command somewhere in its arguments, with options this table does not model
    /// (`devbox run`, `ssh`, `docker exec`, …): deny and ask try every later word as the start
    /// of the inner command; allow sees the words as written.
    Runner,
}

/// How a wrapper's options are read.
#[derive(Debug, Clone, Copy)]
pub(super) struct Spec {
    pub(super) kind: Kind,
    /// Short options without an argument.
    flags: &'static str,
    /// Short options with an argument (the rest of the cluster, or the next word).
    with_arg: &'static str,
    /// Short options whose argument is optional and only in the cluster (`xargs -i{}`).
    optional_arg: &'static str,
    /// Long options without an argument (`--x=v` is accepted too).
    long_flags: &'static [&'static str],
    /// Long options with an argument (`--x=v` or `--x v`).
    long_with_arg: &'static [&'static str],
    /// Operands before the inner command (`timeout DURATION`, `chroot NEWROOT`).
    operands: usize,
    /// Whether `-N` (a number) is an option (`nice -10`).
    numeric: bool,
    /// `NAME=value` words after the options belong to the wrapper (`env`).
    assignments: bool,
}

const fn spec(kind: Kind) -> Spec {
    Spec {
        kind,
        flags: "",
        with_arg: "",
        optional_arg: "",
        long_flags: &[],
        long_with_arg: &[],
        operands: 0,
        numeric: false,
        assignments: false,
    }
}

/// The wrapper named `program` (a normalized program name), if it is one.
pub(super) fn wrapper(program: &str) -> Option<Spec> {
    use Kind::*;
    let s = match program {
        "timeout" => Spec {
            flags: "v",
            with_arg: "ks",
            long_flags: &["--preserve-status", "--foreground", "--verbose"],
            long_with_arg: &["--kill-after", "--signal"],
            operands: 1,
            ..spec(Transparent)
        },
        "time" => Spec {
            flags: "pvaq",
            with_arg: "f",
            long_flags: &["--portability", "--verbose", "--append", "--quiet"],
            long_with_arg: &["--format"],
            ..spec(Transparent)
        },
        "nice" => Spec {
            with_arg: "n",
            long_with_arg: &["--adjustment"],
            numeric: true,
            ..spec(Transparent)
        },
        "nohup" | "builtin" | "noglob" | "busybox" => spec(Transparent),
        "stdbuf" => Spec {
            with_arg: "ioe",
            long_with_arg: &["--input", "--output", "--error"],
            ..spec(Transparent)
        },
        "command" => Spec {
            flags: "p",
            ..spec(Transparent)
        },
        "exec" => Spec {
            flags: "cl",
            with_arg: "a",
            ..spec(Transparent)
        },
        // `env` without options or assignments is transparent; the caller upgrades it.
        "env" => Spec {
            flags: "i0v",
            with_arg: "uC",
            long_flags: &["--ignore-environment", "--null", "--debug"],
            long_with_arg: &["--unset", "--chdir"],
            assignments: true,
            ..spec(Transparent)
        },
        "sudo" => Spec {
            flags: "AbEeHiKklnPSsVv",
            with_arg: "CDghprtTUuR",
            long_flags: &[
                "--askpass",
                "--background",
                "--preserve-env",
                "--edit",
                "--set-home",
                "--login",
                "--remove-timestamp",
                "--reset-timestamp",
                "--list",
                "--non-interactive",
                "--preserve-groups",
                "--stdin",
                "--shell",
                "--version",
                "--validate",
                "--help",
            ],
            long_with_arg: &[
                "--close-from",
                "--chdir",
                "--group",
                "--host",
                "--prompt",
                "--role",
                "--type",
                "--command-timeout",
                "--other-user",
                "--user",
                "--chroot",
            ],
            ..spec(Context)
        },
        "doas" => Spec {
            flags: "Lns",
            with_arg: "Cu",
            ..spec(Context)
        },
        "setsid" => Spec {
            flags: "cfw",
            long_flags: &["--ctty", "--fork", "--wait"],
            ..spec(Context)
        },
        "ionice" => Spec {
            flags: "t",
            with_arg: "cnpPu",
            long_flags: &["--ignore"],
            long_with_arg: &["--class", "--classdata", "--pid", "--pgid", "--uid"],
            ..spec(Context)
        },
        "chroot" => Spec {
            long_flags: &["--skip-chdir"],
            long_with_arg: &["--userspec", "--groups"],
            operands: 1,
            ..spec(Context)
        },
        "watch" => Spec {
            flags: "bcegtxprw",
            with_arg: "nq",
            optional_arg: "d",
            long_flags: &[
                "--beep",
                "--color",
                "--no-color",
                "--errexit",
                "--chgexit",
                "--no-title",
                "--exec",
                "--precise",
                "--no-wrap",
                "--differences",
                "--no-linewrap",
            ],
            long_with_arg: &["--interval", "--equexit"],
            ..spec(Context)
        },
        "xargs" => Spec {
            flags: "0prtx",
            with_arg: "aEdILnPs",
            optional_arg: "iel",
            long_flags: &[
                "--null",
                "--interactive",
                "--no-run-if-empty",
                "--verbose",
                "--exit",
                "--open-tty",
                "--replace",
                "--eof",
                "--max-lines",
            ],
            long_with_arg: &[
                "--arg-file",
                "--delimiter",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--process-slot-var",
            ],
            ..spec(Extending)
        },
        "flock" | "ssh" | "nsenter" | "unshare" | "taskset" | "numactl" | "chrt" | "prlimit"
        | "systemd-run" | "runuser" | "sg" | "firejail" | "bwrap" | "proot" | "fakeroot"
        | "faketime" | "torsocks" | "proxychains" | "proxychains4" | "pkexec" | "unbuffer"
        | "rlwrap" | "caffeinate" | "xvfb-run" | "dbus-run-session" | "strace" | "ltrace"
        | "valgrind" | "gdb" | "perf" | "parallel" | "entr" | "script" | "coproc" | "npx"
        | "bunx" | "pnpx" | "with-contenv" | "catchsegv" | "cpulimit" | "nocache" | "chpst"
        | "setpriv" | "setarch" | "linux32" | "linux64" | "su" => spec(Runner),
        _ => return None,
    };
    Some(s)
}

/// Environment runners: `<program> <subcommand> …` runs a command (`devbox run rm -rf .`).
pub(super) fn runner_subcommand(program: &str, sub: &str) -> bool {
    matches!(
        (program, sub),
        (
            "devbox" | "uv" | "poetry" | "pipenv" | "pdm" | "hatch" | "rye" | "pixi",
            "run"
        ) | ("conda" | "mamba" | "micromamba" | "cargo" | "bun", "run")
            | (
                "bundle" | "npm" | "pnpm" | "yarn" | "mise" | "rtx" | "asdf" | "direnv",
                "exec"
            )
            | ("pnpm" | "yarn", "dlx")
            | ("mise", "x")
            | ("bun", "x")
            | ("nix", "develop" | "shell" | "run")
            | ("nix-shell", _)
            | ("docker" | "podman" | "nerdctl", "run" | "exec")
            | ("kubectl" | "oc", "exec")
            | ("uvx" | "pipx", _)
            | ("toolbox" | "distrobox", "run" | "enter")
    )
}

/// Options of any program whose argument is a shell payload (`su -c`, `flock -c`,
/// `nix-shell --run`, `script -c`, `runuser -c`, `sg GROUP -c`).
pub(super) fn payload_option(program: &str, option: &str) -> bool {
    match program {
        "su" | "runuser" => {
            option == "-c"
                || option == "--command"
                || (option.starts_with('-')
                    && !option.starts_with("--")
                    && option.len() > 2
                    && option.ends_with('c')
                    && option[1..].chars().all(|c| "lmpfPc".contains(c)))
        }
        "flock" | "script" | "sg" => option == "-c" || option == "--command",
        "nix-shell" => option == "--run" || option == "--command",
        _ => false,
    }
}

/// Where a wrapper's inner command starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Inner {
    /// At this word.
    At(usize),
    /// Nowhere: the wrapper runs nothing given (`time`, `xargs` alone).
    None,
    /// An option this table does not know, or an option that is not static.
    Unrecognized,
}

/// Reads a wrapper's options from `words[start..]` (the wrapper's program at `start - 1`).
/// Returns where the inner command starts and whether assignments or options were seen.
pub(super) fn inner_start(spec: &Spec, words: &[Word], start: usize) -> (Inner, bool) {
    let mut i = start;
    let mut options = false;
    while let Some(w) = words.get(i) {
        let v = w.value.as_str();
        if v == "-" && spec.assignments {
            // `env -` is `env -i`.
            options = true;
            i += 1;
            continue;
        }
        if !v.starts_with('-') || v == "-" {
            break;
        }
        if w.dynamic.is_some() {
            return (Inner::Unrecognized, true);
        }
        options = true;
        if v == "--" {
            i += 1;
            break;
        }
        if let Some(long) = v.strip_prefix("--") {
            let (name, has_value) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            let name = format!("--{name}");
            if spec.long_flags.contains(&name.as_str()) {
                i += 1;
                continue;
            }
            if spec.long_with_arg.contains(&name.as_str()) {
                i += if has_value { 1 } else { 2 };
                continue;
            }
            return (Inner::Unrecognized, true);
        }
        let cluster = &v[1..];
        if spec.numeric && cluster.chars().all(|c| c.is_ascii_digit()) {
            i += 1;
            continue;
        }
        let mut next = i + 1;
        for (k, c) in cluster.char_indices() {
            if spec.flags.contains(c) {
                continue;
            }
            if spec.optional_arg.contains(c) {
                break;
            }
            if spec.with_arg.contains(c) {
                if k + c.len_utf8() == cluster.len() {
                    next = i + 2;
                }
                break;
            }
            return (Inner::Unrecognized, true);
        }
        i = next;
    }
    if spec.assignments {
        // `env` takes any word with a `=` as an assignment, whatever its name or quoting
        // (`env 'BASH_FUNC_f%%=() { …; }' bash` defines a function for bash).
        while words
            .get(i)
            .is_some_and(|w| w.is_assignment() || (w.dynamic.is_none() && w.value.contains('=')))
        {
            options = true;
            i += 1;
        }
    }
    i += spec.operands;
    if i >= words.len() {
        return (Inner::None, options);
    }
    (Inner::At(i), options)
}

/// The shells whose `-c` payload, script on standard input or heredoc is a command.
pub(super) fn is_shell(program: &str) -> bool {
    matches!(
        program,
        "bash"
            | "sh"
            | "zsh"
            | "dash"
            | "ksh"
            | "mksh"
            | "ash"
            | "yash"
            | "fish"
            | "rbash"
            | "ksh93"
    )
}

/// Reads a shell's options. `Payload(i)`: `-c` was given and the payload is word `i` (or
/// `None` when missing). `Stdin`: the shell reads its script from standard input (no operand,
/// or `-s`). `Script(i)`: word `i` names a script file. `Unrecognized`: an option this table
/// does not know. The flag says whether only harmless options were seen (so the shell itself
/// needs no allow of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ShellInvocation {
    Payload(Option<usize>),
    Stdin,
    Script(usize),
    Unrecognized,
}

pub(super) fn shell_invocation(words: &[Word], start: usize) -> (ShellInvocation, bool) {
    let mut i = start;
    let mut command = false;
    let mut stdin = false;
    let mut harmless = true;
    while let Some(w) = words.get(i) {
        let v = w.value.as_str();
        if w.dynamic.is_some() && v.starts_with(['-', '+']) {
            return (ShellInvocation::Unrecognized, false);
        }
        if v == "--" || v == "-" {
            i += 1;
            break;
        }
        if let Some(long) = v.strip_prefix("--") {
            match long {
                "login" | "noprofile" | "norc" | "posix" | "noediting" => {}
                "rcfile" | "init-file" => {
                    harmless = false;
                    i += 1;
                }
                "restricted" | "verbose" | "debugger" | "dump-strings" | "dump-po-strings"
                | "pretty-print" => harmless = false,
                _ => return (ShellInvocation::Unrecognized, false),
            }
            i += 1;
            continue;
        }
        let Some(cluster) = v.strip_prefix('-').or_else(|| v.strip_prefix('+')) else {
            break;
        };
        if cluster.is_empty() {
            break;
        }
        let mut takes = 0;
        for c in cluster.chars() {
            match c {
                'c' => command = true,
                's' => stdin = true,
                'e' | 'u' | 'x' | 'v' | 'l' | 'f' | 'h' | 'B' | 'C' | 'E' | 'H' | 'P' | 'T'
                | 'a' | 'b' | 'k' | 'm' | 'n' | 't' => {}
                'i' | 'r' | 'p' => harmless = false,
                'o' | 'O' => takes += 1,
                _ => return (ShellInvocation::Unrecognized, false),
            }
        }
        i += 1 + takes;
    }
    if command {
        return (
            ShellInvocation::Payload((i < words.len()).then_some(i)),
            harmless,
        );
    }
    if stdin || i >= words.len() {
        return (ShellInvocation::Stdin, harmless);
    }
    (ShellInvocation::Script(i), harmless)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::word::words;

    #[test]
    fn options() {
        let at = |p: &str, s: &str| {
            let w = words(s);
            inner_start(&wrapper(p).unwrap_or(spec(Kind::Runner)), &w, 1).0
        };
        assert_eq!(at("timeout", "timeout 5 rm x"), Inner::At(2));
        assert_eq!(at("timeout", "timeout -k 1 -s KILL 5 rm"), Inner::At(6));
        assert_eq!(at("timeout", "timeout --signal=KILL 5 rm"), Inner::At(3));
        assert_eq!(at("nice", "nice -n 10 rm"), Inner::At(3));
        assert_eq!(at("nice", "nice -10 rm"), Inner::At(2));
        assert_eq!(at("exec", "exec -a innocent rm"), Inner::At(3));
        assert_eq!(at("sudo", "sudo -u root -E rm"), Inner::At(4));
        assert_eq!(at("sudo", "sudo --weird rm"), Inner::Unrecognized);
        assert_eq!(at("env", "env A=1 B=2 rm"), Inner::At(3));
        assert_eq!(at("env", "env - rm"), Inner::At(2));
        assert_eq!(at("xargs", "xargs -0 -n1 -I{} rm {}"), Inner::At(4));
        assert_eq!(at("xargs", "xargs"), Inner::None);
        assert_eq!(at("time", "time"), Inner::None);
        assert_eq!(at("ionice", "ionice -c3 rm"), Inner::At(2));
        assert_eq!(at("watch", "watch -n 1 rm"), Inner::At(3));
    }

    #[test]
    fn shells() {
        let inv = |s: &str| shell_invocation(&words(s), 1);
        assert_eq!(inv("bash -c x"), (ShellInvocation::Payload(Some(2)), true));
        assert_eq!(inv("bash -lc x"), (ShellInvocation::Payload(Some(2)), true));
        assert_eq!(
            inv("bash -o pipefail -c x"),
            (ShellInvocation::Payload(Some(4)), true)
        );
        assert_eq!(inv("bash"), (ShellInvocation::Stdin, true));
        assert_eq!(inv("bash -s a"), (ShellInvocation::Stdin, true));
        assert_eq!(inv("bash script.sh"), (ShellInvocation::Script(1), true));
        assert_eq!(
            inv("bash -i -c x"),
            (ShellInvocation::Payload(Some(3)), false)
        );
        assert_eq!(inv("bash -Z"), (ShellInvocation::Unrecognized, false));
        assert!(payload_option("su", "-lc"));
        assert!(!payload_option("su", "-l"));
    }
}
