//! Every case of `tests/corpus/shell/cases.jsonl` through the library.

use super::*;

/// Corpus cases that cannot pass, each with its reason (also in docs/shell.md). Empty: every
/// case passes, the stretch cases included.
const SKIP: &[(&str, &str)] = &[];

#[test]
fn every_shell_corpus_case_through_the_library() {
    let cases = corpus_cases();
    assert_eq!(cases.len(), 112, "the corpus README says 112 cases");
    let mut failures = Vec::new();
    let mut ran = 0;
    for case in &cases {
        let id = case["id"].as_str().unwrap();
        if let Some((_, why)) = SKIP.iter().find(|(s, _)| *s == id) {
            eprintln!("skipped {id}: {why}");
            continue;
        }
        let s = policy(
            &strings(&case["allow"]),
            &strings(&case["deny"]),
            &strings(&case["ask"]),
            case["default"].as_str().unwrap(),
        );
        let command = case["command"].as_str().unwrap();
        let v = bash(&s, command);
        ran += 1;
        let want = decision(case["expect"].as_str().unwrap());
        if v.decision != want {
            failures.push(format!(
                "{id}: {command:?} → {} (want {want}): {}\n   subjects: {:?}",
                v.decision,
                v.reason,
                v.subjects
                    .iter()
                    .map(|s| format!("{} [{}] {} {:?}", s.text, s.tool, s.decision, s.rule))
                    .collect::<Vec<_>>()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(ran + SKIP.len(), cases.len());
}
