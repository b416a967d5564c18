//! Properties: the splitter never panics and terminates; normalization is monotone (a deny
//! rule that matches the literal argv matches a normalized reading; allow sees the words as
//! written but for the stated wrapper exceptions); operators around a denied command never
//! yield allow. Bound to 48 cases when `CI` is set.

use proptest::prelude::*;
use warden_policy::matcher::{MatcherKind, Pattern, Value as MValue, View};
use warden_policy::shell::{SimpleCommand, Stdin, Word, normalize, split_command};

use super::*;

fn config() -> ProptestConfig {
    let cases = match std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
    {
        Some(n) => n,
        None if std::env::var_os("CI").is_some() => 48,
        None => 256,
    };
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

/// Shell-ish fragments, so generated strings reach deep into the grammar.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("rm -rf /x".to_owned()),
        Just("git status".to_owned()),
        Just(";".to_owned()),
        Just("&&".to_owned()),
        Just("|".to_owned()),
        Just("$(".to_owned()),
        Just(")".to_owned()),
        Just("`".to_owned()),
        Just("'".to_owned()),
        Just("\"".to_owned()),
        Just("<<EOF\n".to_owned()),
        Just("\nEOF\n".to_owned()),
        Just("\\\n".to_owned()),
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just(" > out".to_owned()),
        Just(" < in".to_owned()),
        Just("bash -c ".to_owned()),
        Just("eval ".to_owned()),
        Just("sudo ".to_owned()),
        Just("xargs ".to_owned()),
        Just("$'\\x72m'".to_owned()),
        Just("${X:-`id`}".to_owned()),
        Just("if true; then ".to_owned()),
        Just("; fi".to_owned()),
        Just("#".to_owned()),
        "[a-z =$-]{0,6}",
        any::<char>().prop_map(String::from),
    ]
}

fn words() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop_oneof![
            Just("rm".to_owned()),
            Just("RM".to_owned()),
            Just("/bin/rm".to_owned()),
            Just("git".to_owned()),
            Just("-C".to_owned()),
            Just("push".to_owned()),
            Just("-rf".to_owned()),
            Just("--force".to_owned()),
            Just("sudo".to_owned()),
            Just("timeout".to_owned()),
            Just("5".to_owned()),
            Just("env".to_owned()),
            Just("A=1".to_owned()),
            Just("nice".to_owned()),
            Just("xargs".to_owned()),
            Just("find".to_owned()),
            Just("-exec".to_owned()),
            Just(";".to_owned()),
            Just("command".to_owned()),
            Just("devbox".to_owned()),
            Just("run".to_owned()),
            Just("/x".to_owned()),
            "[a-z]{1,4}",
        ],
        1..8,
    )
}

fn literal_words(ws: &[String]) -> Vec<Word> {
    ws.iter().map(|w| Word::literal(w)).collect()
}

fn command(ws: &[String]) -> SimpleCommand {
    let split = ws
        .iter()
        .take_while(|w| Word::literal(w).is_assignment())
        .count();
    SimpleCommand {
        text: ws.join(" "),
        assignments: literal_words(&ws[..split]),
        words: literal_words(&ws[split..]),
        stdin: Stdin::Inherited,
    }
}

fn matches(spec: &str, written: &[String], reading: &[String], view: View) -> bool {
    let env = super::env();
    let p = Pattern::compile(MatcherKind::Shell, spec, &env).unwrap();
    let v = MValue::Shell {
        written: written.to_vec(),
        normalized: reading.to_vec(),
    };
    p.matches(&v, view)
}

const TRANSPARENT_OR_EXTENDING: [&str; 6] = ["timeout", "nice", "env", "command", "xargs", "find"];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_splitter_never_panics_on_arbitrary_strings(s in any::<String>()) {
        let _ = split_command(&s);
    }

    #[test]
    fn the_splitter_never_panics_on_shellish_strings(parts in prop::collection::vec(fragment(), 0..24)) {
        let s: String = parts.concat();
        let _ = split_command(&s);
        let _ = warden_policy::shell::is_read_only(&s);
    }

    /// A deny rule that matches the literal argv (any word prefix, as `x:*`, or the whole argv)
    /// matches one of the readings deny rules try.
    #[test]
    fn a_deny_matching_the_literal_argv_matches_a_reading(ws in words(), cut in 1usize..8) {
        let n = normalize(&command(&ws));
        let c = &n.commands[0];
        let literal = ws.clone();
        let k = cut.min(literal.len());
        let specs = [format!("{}:*", literal[..k].join(" ")), literal.join(" ")];
        for spec in specs {
            prop_assert!(matches(&spec, &literal, &literal, View::Restrict));
            let readings = std::iter::once(&c.normalized).chain(&c.also);
            let hit = readings.clone().any(|r| matches(&spec, &c.written, r, View::Restrict));
            prop_assert!(hit, "{spec:?} misses {:?}", readings.collect::<Vec<_>>());
        }
    }

    /// An allow rule sees the words as written: normalization never changes them, except that
    /// a transparent or argument-extending wrapper exposes a suffix (its inner command).
    #[test]
    fn allow_sees_the_words_as_written_but_for_wrappers(ws in words()) {
        let n = normalize(&command(&ws));
        let c = &n.commands[0];
        let exposes = ws.iter().any(|w| TRANSPARENT_OR_EXTENDING.contains(&w.as_str()));
        if !exposes {
            prop_assert_eq!(&c.written, &ws);
        } else {
            // Assignments, then a suffix of the words.
            let split = ws.iter().take_while(|w| Word::literal(w).is_assignment()).count();
            let (assigned, rest) = c.written.split_at(split.min(c.written.len()));
            prop_assert_eq!(assigned, &ws[..split.min(c.written.len())]);
            prop_assert!(ws.ends_with(rest), "{:?} is not a suffix of {ws:?}", c.written);
        }
        // And so an allow rule matching what allow sees after normalization matched the
        // words as written, or a suffix a wrapper exposed.
        let spec = format!("{}:*", c.written.first().cloned().unwrap_or_default());
        if matches(&spec, &c.written, &c.normalized, View::Permit) && !exposes {
            prop_assert!(matches(&spec, &ws, &ws, View::Permit));
        }
    }

    /// Operators and wrappers around a denied command never yield allow, whatever else the
    /// policy allows.
    #[test]
    fn operators_around_a_denied_command_never_allow(
        args in "[a-z/ -]{0,12}",
        wrap in 0usize..22,
        other in prop_oneof![Just("ls"), Just("git status"), Just("echo hi"), Just("true")],
    ) {
        let denied = format!("rm {args}");
        let command = match wrap {
            0 => format!("{other}; {denied}"),
            1 => format!("{other} && {denied}"),
            2 => format!("{other} || {denied}"),
            3 => format!("{denied} | {other}"),
            4 => format!("{other} | {denied}"),
            5 => format!("echo $({denied})"),
            6 => format!("echo \"`{denied}`\""),
            7 => format!("( {denied} )"),
            8 => format!("{{ {denied}; }}"),
            9 => format!("if {other}; then {denied}; fi"),
            10 => format!("bash -c '{denied}'"),
            11 => format!("timeout 5 {denied}"),
            12 => format!("sudo -u root {denied}"),
            13 => format!("nohup {denied} &"),
            14 => format!("! {denied}"),
            15 => format!("{other} | xargs {denied}"),
            16 => format!("find . -exec {denied} \\;"),
            17 => format!("eval '{denied}'"),
            18 => format!("FOO=1 env {denied}"),
            19 => format!("cat <<EOF\n$({denied})\nEOF"),
            20 => format!("f() {{ {denied}; }}; f"),
            _ => format!("diff <({denied}) <({other})"),
        };
        let s = policy(
            &["bash(ls:*)", "bash(git:*)", "bash(echo:*)", "bash(true)", "bash(cat:*)", "bash(xargs:*)", "bash(find:*)", "bash(diff:*)"],
            &["bash(rm:*)"],
            &[],
            "allow",
        );
        let v = bash(&s, &command);
        prop_assert_ne!(v.decision, Decision::Allow, "{:?}: {}", command, v.reason);
    }
}
