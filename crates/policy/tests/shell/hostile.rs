//! Hostile input: every bound fails closed (deny), fast and without a stack overflow. The
//! verdict is asserted, not the time (docs/shell.md records the times).

use std::time::Instant;

use super::*;

fn denied(command: &str, reason: &str) {
    denied_any(command, &[reason]);
}

fn denied_any(command: &str, reasons: &[&str]) {
    let s = policy(
        &["bash", "bash(echo:*)", "bash(true)"],
        &["bash(rm:*)"],
        &[],
        "allow",
    );
    let start = Instant::now();
    let v = bash(&s, command);
    eprintln!(
        "{} bytes: {} in {:?} ({})",
        command.len(),
        v.decision,
        start.elapsed(),
        v.reason
    );
    assert_eq!(v.decision, Decision::Deny, "{}", v.reason);
    assert!(
        reasons.iter().any(|r| v.reason.contains(r)),
        "{} (want one of {reasons:?})",
        v.reason
    );
}

#[test]
fn a_one_mebibyte_command_is_denied() {
    denied(
        &format!("echo {}", "a".repeat(1 << 20)),
        "bytes the splitter reads",
    );
    denied(
        &"(){}[]$'\"`|&;<>".repeat(70_000),
        "bytes the splitter reads",
    );
}

#[test]
fn ten_thousand_nested_substitutions_are_denied() {
    // Each level is a command whose text holds every level inside it: the subjects' text
    // bound (16 × the command) or the nesting bound, whichever the walk meets first.
    let closed = format!("echo {}x{}", "$(".repeat(10_000), ")".repeat(10_000));
    denied_any(
        &closed,
        &["nests constructs more than", "repeat its text more than"],
    );
    let words = format!("echo {}x{}", "$(echo a ".repeat(100), ")".repeat(100));
    denied(&words, "repeat its text more than 16 times");
    let open = format!("echo {}x", "$(".repeat(10_000));
    denied(&open, "does not parse");
    let subshells = format!("{}true{}", "(".repeat(10_000), ")".repeat(10_000));
    denied(&subshells, "nests constructs more than");
    let groups = format!("{}true;{}", "{ ".repeat(5_000), " }".repeat(5_000));
    denied_any(&groups, &["nests constructs more than", "does not parse"]);
}

#[test]
fn payloads_nest_to_a_bound() {
    denied(
        &format!("{}rm -rf /x", "eval ".repeat(20)),
        "nests payloads",
    );
    denied(
        &format!("{}rm -rf /x", "eval ".repeat(5)),
        "denied by bash(rm:*)",
    );
    denied(&format!("echo {}", "`echo \\".repeat(3)), "does not parse");
}

#[test]
fn many_subjects_are_denied_never_capped() {
    let many = "true; ".repeat(5_000) + "true";
    denied(&many, "more than 4096 subjects");
    let chain = "true && ".repeat(10_000) + "true";
    denied(&chain, "more than 4096 subjects");
    // Under the bound, the last subject is still checked (corpus B18, at scale).
    let last = "true; ".repeat(4_000) + "rm -rf /x";
    denied(&last, "denied by bash(rm:*)");
}

#[test]
fn a_wrapper_with_too_many_words_is_unknown() {
    let words = "x ".repeat(300);
    denied(&format!("sudo --bogus {words}"), "more than the 256");
}

#[test]
fn non_ascii_never_crashes_the_parser() {
    // tree-sitter-bash's scanner calls C `isdigit` on the code point after `{`: U+70000 there
    // segfaulted the process (found by the shellish-strings property test). Words are parsed
    // from an ASCII stand-in and read from the original text.
    let s = policy(&["bash"], &["bash(rm:*)"], &[], "allow");
    for c in [
        '\u{e9}',
        '\u{ffff}',
        '\u{10000}',
        '\u{65e20}',
        '\u{70000}',
        '\u{10ffff}',
    ] {
        for command in [
            format!("{{{c}"),
            format!("echo {{1..{c}}}"),
            format!(")\n; fi{{{c}"),
        ] {
            let _ = bash(&s, &command);
        }
        for command in [
            format!("echo {c} && rm -rf /x"),
            format!("{c}=1 rm -rf /x"),
            format!("cat <<{c}\n{c}\nrm -rf /x"),
            format!("echo {{{c} ; rm -rf /x"),
        ] {
            let v = bash(&s, &command);
            assert_eq!(v.decision, Decision::Deny, "{command:?}: {}", v.reason);
        }
    }
    let v = bash(&s, "echo 'é' \u{70000} && rm -rf /x");
    assert_eq!(v.rule.as_deref(), Some("bash(rm:*)"), "{}", v.reason);
    let subjects = warden_policy::shell::split_command("echo 'é' ü").unwrap_or_default();
    assert_eq!(subjects[0].text(), "echo 'é' ü");
}

#[test]
fn garbage_is_denied_quickly() {
    for command in [
        "\"'".repeat(50_000),
        "((((".repeat(20_000),
        "$(".repeat(40_000),
        "<<".repeat(40_000),
        "`".repeat(100_001),
        "\\\n".repeat(40_000),
        "echo a\u{0}; rm -rf /".to_owned(),
    ] {
        let s = policy(&["bash"], &["bash(rm:*)"], &[], "allow");
        let start = Instant::now();
        let v = bash(&s, &command);
        eprintln!(
            "{} bytes of garbage: {} in {:?}",
            command.len(),
            v.decision,
            start.elapsed()
        );
        let head: String = command.chars().take(20).collect();
        assert_ne!(v.decision, Decision::Allow, "{head:?}: {}", v.reason);
    }
}
