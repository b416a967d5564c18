//! The differential test: Warden, Cedar and Rego give the same answer on the generated calls
//! (every rule kind, matching and not matching; the crate docs say which calls the peers can
//! express). Cedar and Rego are linear in the rules and slow in a debug build, so the larger
//! policies are checked on evenly spread samples here; `policy-compare agree` checks every
//! call at every size in a release build (`cargo xtask bench` runs it).
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use warden_policy_compare::{Decision, GenCall, Peers, WardenEngine, agree, calls, rules};

const BOTH: Peers = Peers {
    cedar: true,
    rego: true,
};

/// Every `step`th generated call at `n` rules.
fn sample(n: usize, step: usize) -> Vec<GenCall> {
    calls(n).into_iter().step_by(step).collect()
}

fn assert_agree(n: usize, calls: &[GenCall], peers: Peers) -> [usize; 3] {
    let found = agree(n, calls, peers).unwrap();
    assert!(
        found.disagreements.is_empty(),
        "{} of {} calls at {n} rules disagree:\n{}",
        found.disagreements.len(),
        calls.len(),
        found.disagreements.join("\n")
    );
    found.answers
}

#[test]
fn the_engines_agree_on_every_call_at_10_rules() {
    let answers = assert_agree(10, &calls(10), BOTH);
    // The calls reach every list and the default.
    assert!(answers.iter().all(|&c| c > 0), "{answers:?}");
}

#[test]
fn the_engines_agree_at_1000_rules() {
    // Cedar on every 13th call (a step prime to the 4 rule kinds and the 4 or 5 calls per rule,
    // so the sample walks through every kind and every variant), Rego on every 53rd.
    let cedar = sample(1_000, 13);
    assert!(cedar.len() > 300, "{}", cedar.len());
    let answers = assert_agree(
        1_000,
        &cedar,
        Peers {
            cedar: true,
            rego: false,
        },
    );
    assert!(answers.iter().all(|&c| c > 0), "{answers:?}");
    assert_agree(
        1_000,
        &sample(1_000, 53),
        Peers {
            cedar: false,
            rego: true,
        },
    );
}

#[test]
fn warden_and_cedar_agree_at_10000_rules() {
    let calls = sample(10_000, 211);
    assert!(calls.len() > 20, "{}", calls.len());
    assert_agree(
        10_000,
        &calls,
        Peers {
            cedar: true,
            rego: false,
        },
    );
}

#[test]
fn the_policy_answers_each_list_where_the_generator_says() {
    let warden = WardenEngine::new(&rules(10)).unwrap();
    let decide = |tool: &str, field: &'static str, value: &str| {
        warden.decide(
            &GenCall {
                tool: tool.into(),
                arg: Some((field, value.into())),
            }
            .warden(),
        )
    };
    assert_eq!(decide("bash", "command", "tool0 sub0 -x"), Decision::Allow);
    assert_eq!(decide("bash", "command", "tool4 sub4x"), Decision::Ask);
    assert_eq!(decide("read", "path", "/data/d1/x"), Decision::Deny);
    assert_eq!(decide("bash", "command", "rm -rf build"), Decision::Deny);
    assert_eq!(decide("read", "path", "/repo/.env/x"), Decision::Deny);
}
