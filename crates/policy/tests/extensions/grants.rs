//! Grants beyond the corpus: grant-over a verdict, the journal, what a product persists, and
//! the invariant that a grant never turns a deny into an allow.

use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use serde_json::json;
use warden_policy::*;

fn policy() -> PolicySnapshot {
    PolicyBuilder::new()
        .default(Decision::Ask)
        .source(
            Source::trusted("managed").with_rank(3),
            RuleSet {
                deny: Rule::parse_list("bash(rm:*)").unwrap(),
                ask: Rule::parse_list("web_fetch").unwrap(),
                ..RuleSet::default()
            },
        )
        .source(
            Source::trusted("project").with_rank(1),
            RuleSet {
                ask: Rule::parse_list("bash(git push:*)").unwrap(),
                ..RuleSet::default()
            },
        )
        .build()
        .unwrap()
}

fn bash(c: &str) -> Call {
    Call::new("bash", json!({ "command": c }))
}

#[test]
fn grant_over_carves_out_the_ask_rule_and_persists() {
    let p = policy();
    let v = p.decide(&bash("git push origin main"));
    assert_eq!(v.decision, Decision::Ask);
    let rule = Rule::parse("bash(git push origin:*)").unwrap();
    let user = Source::trusted("user").with_rank(1);
    let (granted, report) = p.grant_over(&v, &rule, &user).unwrap();
    assert_eq!(
        granted.decide(&bash("git push origin main")).decision,
        Decision::Allow
    );
    assert_eq!(
        granted.decide(&bash("git push upstream")).decision,
        Decision::Ask
    );
    assert_ne!(granted.digest(), p.digest());
    assert!(report.changes.contains(&GrantChange::CarvedOut {
        rule: "bash(!git push origin:*)".into(),
        source: "project".into(),
    }));
    // What a product persists: the carve-out sits in the ask rule's own source.
    let project = granted
        .declared_sets()
        .into_iter()
        .find(|s| s.source.name == "project")
        .unwrap();
    assert!(
        project
            .rules
            .ask
            .iter()
            .any(|r| r.to_string() == "bash(!git push origin:*)")
    );
}

#[test]
fn grant_over_says_why_it_cannot() {
    let p = policy();
    let low = Source::trusted("session").with_rank(0);
    let v = p.decide(&bash("git push"));
    let refusal = p
        .grant_over(&v, &Rule::parse("bash(git push:*)").unwrap(), &low)
        .unwrap_err();
    assert_eq!(
        refusal.reason,
        "bash(git push:*) from project outranks the grant"
    );
    let v = p.decide(&bash("rm -rf x"));
    assert!(
        p.grant_over(&v, &Rule::parse("bash").unwrap(), &low)
            .is_err()
    );
    let v = p.decide(&Call::new("web_fetch", json!({"url": "https://x.org"})));
    let refusal = p
        .grant_over(&v, &Rule::parse("read").unwrap(), &low)
        .unwrap_err();
    assert!(
        refusal.reason.contains("does not name the tool"),
        "{}",
        refusal.reason
    );
}

#[derive(Default)]
struct Journal(Mutex<Vec<GrantReport>>);
impl VerdictObserver for Journal {
    fn observe(&self, _: &Call, _: &Verdict, _: Option<&SourceInfo>) {}
    fn granted(&self, report: &GrantReport) {
        self.0.lock().unwrap().push(report.clone());
    }
}

#[test]
fn the_engine_journals_every_grant_and_refusal() {
    let journal = Arc::new(Journal::default());
    let mut engine = Engine::new(Arc::new(policy())).with_observer(journal.clone());
    let set = GrantSet {
        source: Source::trusted("skill").with_rank(5),
        rules: RuleSet {
            allow: Rule::parse_list("web_fetch bash(rm:*)").unwrap(),
            ..RuleSet::default()
        },
    };
    let report = engine.grant(&set).unwrap();
    assert_eq!(report.granted, ["web_fetch"]);
    assert_eq!(report.refused[0].rule, "bash(rm:*)");
    assert_eq!(
        engine
            .decide(&Call::new("web_fetch", json!({"url": "https://x.org"})))
            .decision,
        Decision::Allow
    );
    let v = engine.decide(&bash("git status"));
    let _ = engine.grant_over(&v, &Rule::parse("read").unwrap(), &Source::trusted("u"));
    assert_eq!(journal.0.lock().unwrap().len(), 2, "one grant, one refusal");
}

fn config() -> ProptestConfig {
    ProptestConfig::with_cases(if std::env::var_os("CI").is_some() {
        32
    } else {
        128
    })
}

proptest! {
    #![proptest_config(config())]

    /// A grant of any rules from any source never turns a denied call into an allowed one.
    #[test]
    fn a_grant_never_turns_a_deny_into_allow(
        grants in prop::collection::vec(prop::sample::select(vec![
            "bash", "bash(rm:*)", "bash(rm -rf:*)", "bash(git:*)", "read", "web_fetch",
            "bash(!rm:*)", "mcp__*",
        ]), 0..5),
        rank in -2i64..6,
        trusted in any::<bool>(),
        command in prop::sample::select(vec![
            "rm -rf /", "rm x", "git status", "git push", "ls && rm -r y", "make",
        ]),
    ) {
        let p = policy();
        let before = p.decide(&bash(command)).decision;
        let source = Source { trusted, ..Source::trusted("grant").with_rank(rank) };
        let set = GrantSet {
            source,
            rules: RuleSet {
                allow: grants.iter().map(|g| Rule::parse(g).unwrap()).collect(),
                ..RuleSet::default()
            },
        };
        let (granted, _) = p.grant(&set).unwrap();
        let after = granted.decide(&bash(command)).decision;
        if before == Decision::Deny {
            prop_assert_eq!(after, Decision::Deny);
        }
    }
}
