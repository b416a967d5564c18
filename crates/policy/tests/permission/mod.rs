//! Programmable permissions: the three kinds, sync and async, their place in the order
//! (docs/design/policy.md#precedence), failures, `stop`, the snapshot's list and digest, and the
//! alpineagents reference cases about permission kinds, order and failures.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::PathBuf;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use serde_json::{Value, json};
use warden_policy::permission::{AsyncPermission, DecideError, PermissionFuture};
use warden_policy::*;

type CheckResult = Result<Option<Answer>, PermissionError>;

/// Drives a future to completion without an async runtime (the permissions here never pend
/// for real: an async check that awaits a ready future).
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

fn info(name: &str, kind: PermissionKind) -> PermissionInfo {
    PermissionInfo::new(name, "1", kind)
}

fn snapshot(rules: &str, set: &PermissionSet) -> PolicySnapshot {
    let file =
        LoadedPolicy::from_text(rules.into(), Format::Toml, "p.toml", "project", None).unwrap();
    PolicyBuilder::new()
        .path_env(PathEnv {
            project_root: "/repo".into(),
            home: None,
        })
        .file(&file)
        .unwrap()
        .permissions(set)
        .unwrap()
        .build()
        .unwrap()
}

fn call(tool: &str, args: Value) -> Call {
    Call::new(tool, args)
}

fn bash(command: &str) -> Call {
    call("bash", json!({"command": command}))
}

fn decide(s: &PolicySnapshot, p: &PermissionSet, c: &Call) -> PermissionVerdict {
    decide_with_permissions(s, p, c).unwrap()
}

fn always(answer: Option<Answer>) -> impl Fn(&Call) -> CheckResult + Send + Sync + 'static {
    move |_: &Call| Ok(answer.clone())
}

/// A set of one permission that always gives `answer`.
fn one(name: &str, kind: PermissionKind, answer: Option<Answer>) -> PermissionSet {
    PermissionSet::new()
        .register(info(name, kind), always(answer))
        .unwrap()
}

// ------------------------------------------------------------------ kinds and order

#[test]
fn each_kind_answers_in_its_place() {
    let set = PermissionSet::new()
        .register(
            info("no-deploy", PermissionKind::Deny),
            |c: &Call| -> CheckResult {
                Ok((c.tool == "deploy").then(|| Answer::deny("no deploys today")))
            },
        )
        .unwrap()
        .register(
            info("reads", PermissionKind::Allow),
            |c: &Call| -> CheckResult { Ok((c.tool == "read_file").then_some(Answer::Allowed)) },
        )
        .unwrap()
        .register(
            info("judge", PermissionKind::Decide),
            |c: &Call| -> CheckResult {
                Ok(match c.tool.as_str() {
                    "write_file" => Some(Answer::Allowed),
                    "delete_file" => Some(Answer::deny("judged")),
                    _ => None,
                })
            },
        )
        .unwrap();
    let s = snapshot("default = \"ask\"\n", &set);
    let v = decide(&s, &set, &call("deploy", json!({})));
    assert_eq!(v.verdict.decision, Decision::Deny);
    assert_eq!(&*v.verdict.reason, "no deploys today");
    assert_eq!(v.decided_by, Some(info("no-deploy", PermissionKind::Deny)));
    assert!(!v.stop && v.tool_error.is_none());
    assert_eq!(
        (v.verdict.rule.clone(), v.verdict.source.clone()),
        (None, None)
    );
    let v = decide(&s, &set, &call("read_file", json!({})));
    assert_eq!(v.verdict.decision, Decision::Allow);
    assert_eq!(
        v.decided_by.as_ref().map(|p| p.name.as_str()),
        Some("reads")
    );
    assert!(
        v.verdict.reason.contains("permission `reads`"),
        "{}",
        v.verdict.reason
    );
    let v = decide(&s, &set, &call("write_file", json!({})));
    assert_eq!(
        (v.verdict.decision, v.decided_by.unwrap().name),
        (Decision::Allow, "judge".into())
    );
    let v = decide(&s, &set, &call("delete_file", json!({})));
    assert_eq!(
        (v.verdict.decision, v.decided_by.unwrap().name),
        (Decision::Deny, "judge".into())
    );
    // Nobody answers: the rules and the default decide.
    let v = decide(&s, &set, &call("other", json!({})));
    assert_eq!(v.verdict.decision, s.default_decision());
    assert_eq!(v.verdict.rule, None);
    assert_eq!(v.decided_by, None);
    // Deciding without the permissions fails closed: nothing a permission would deny slips
    // through a caller that forgot them.
    let forgot = s.decide(&call("write_file", json!({})));
    assert_eq!(forgot.decision, Decision::Deny);
    assert!(
        forgot.reason.contains("decide_with_permissions"),
        "{}",
        forgot.reason
    );
}

#[test]
fn deny_permissions_run_first_then_the_others_in_registration_order() {
    let asked = Arc::new(Mutex::new(Vec::<String>::new()));
    let recorder = |name: &'static str, answer: Option<Answer>| {
        let asked = asked.clone();
        move |_: &Call| -> CheckResult {
            asked.lock().unwrap().push(name.into());
            Ok(answer.clone())
        }
    };
    // alpineagents `order`: "deny permissions are asked first wherever they are".
    let set = PermissionSet::new()
        .register(
            info("allow1", PermissionKind::Allow),
            recorder("allow1", None),
        )
        .unwrap()
        .register(info("deny1", PermissionKind::Deny), recorder("deny1", None))
        .unwrap()
        .register(
            info("decide", PermissionKind::Decide),
            recorder("decide", None),
        )
        .unwrap()
        .register(info("deny2", PermissionKind::Deny), recorder("deny2", None))
        .unwrap()
        .register(
            info("allow2", PermissionKind::Allow),
            recorder("allow2", Some(Answer::Allowed)),
        )
        .unwrap();
    let s = snapshot("default = \"deny\"\n", &set);
    let v = decide(&s, &set, &call("read_file", json!({"path": "a"})));
    assert_eq!(v.verdict.decision, Decision::Allow);
    assert_eq!(
        *asked.lock().unwrap(),
        ["deny1", "deny2", "allow1", "decide", "allow2"]
    );
}

#[test]
fn deny_rules_beat_a_permissions_allow_and_ask_rules_come_before_allow_permissions() {
    let asked = Arc::new(Mutex::new(0));
    let counted = {
        let asked = asked.clone();
        move |_: &Call| -> CheckResult {
            *asked.lock().unwrap() += 1;
            Ok(Some(Answer::Allowed))
        }
    };
    let set = PermissionSet::new()
        .register(info("yes", PermissionKind::Allow), counted)
        .unwrap();
    let s = snapshot(
        "default = \"deny\"\ndeny = [\"bash(rm:*)\"]\nask = [\"bash(git push:*)\"]\n",
        &set,
    );
    // A deny rule decides before any permission is asked.
    let v = decide(&s, &set, &bash("rm -rf /"));
    assert_eq!(v.verdict.decision, Decision::Deny);
    assert_eq!(v.verdict.rule.as_deref(), Some("bash(rm:*)"));
    assert_eq!(v.decided_by, None);
    assert_eq!(*asked.lock().unwrap(), 0);
    // In a compound command too.
    let v = decide(&s, &set, &bash("ls && rm -rf /"));
    assert_eq!(
        (v.verdict.decision, v.decided_by.clone()),
        (Decision::Deny, None)
    );
    // An ask rule stands over an allow permission.
    let v = decide(&s, &set, &bash("git push"));
    assert_eq!(v.verdict.decision, Decision::Ask);
    assert_eq!(v.verdict.rule.as_deref(), Some("bash(git push:*)"));
    assert_eq!(v.decided_by, None);
    // The permission still answers for the rest of a compound command: `ls` (default deny)
    // becomes allowed, so the call asks instead of being denied.
    assert_eq!(s.decide(&bash("git push && ls")).decision, Decision::Deny);
    let v = decide(&s, &set, &bash("git push && ls"));
    assert_eq!(v.verdict.decision, Decision::Ask);
    assert_eq!(v.verdict.subject.as_deref(), Some("git push"));
    assert_eq!(v.decided_by, None);
    // A call the rules leave to the default: the permission decides.
    let v = decide(&s, &set, &bash("ls"));
    assert_eq!(
        (v.verdict.decision, v.decided_by.is_some()),
        (Decision::Allow, true)
    );
    // Unknown programs are refused without a rule, before permissions.
    let v = decide(&s, &set, &bash("$CMD"));
    assert_eq!(
        (v.verdict.decision, v.decided_by.clone()),
        (Decision::Deny, None)
    );
    // So is a call that cannot be split.
    let v = decide(&s, &set, &bash("echo 'unterminated"));
    assert_eq!((v.verdict.decision, v.decided_by), (Decision::Deny, None));
}

#[test]
fn a_deny_permission_beats_an_ask_rule_and_a_decide_permission_beats_an_allow_rule() {
    let set = PermissionSet::new()
        .register(
            info("no-push", PermissionKind::Deny),
            |c: &Call| -> CheckResult {
                Ok(c.args["command"]
                    .as_str()
                    .is_some_and(|s| s.contains("push"))
                    .then(|| Answer::deny("no pushing")))
            },
        )
        .unwrap()
        .register(
            info("no-cat", PermissionKind::Decide),
            |c: &Call| -> CheckResult {
                Ok(c.args["command"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("cat"))
                    .then(|| Answer::deny("no cat")))
            },
        )
        .unwrap();
    let s = snapshot(
        "default = \"ask\"\nask = [\"bash(git push:*)\"]\nallow = [\"bash(cat:*)\"]\n",
        &set,
    );
    let v = decide(&s, &set, &bash("git push"));
    assert_eq!(
        (v.verdict.decision, &*v.verdict.reason),
        (Decision::Deny, "no pushing")
    );
    let v = decide(&s, &set, &bash("cat a"));
    assert_eq!(
        (v.verdict.decision, &*v.verdict.reason),
        (Decision::Deny, "no cat")
    );
    // The subjects say who decided each.
    let v = decide(&s, &set, &bash("git push && cat a"));
    assert_eq!(v.verdict.decision, Decision::Deny);
    assert!(
        v.verdict
            .subjects
            .iter()
            .all(|s| s.decision == Decision::Deny && s.rule.is_none())
    );
}

#[test]
fn only_neutral_constraints_leave_the_call_to_permissions() {
    // A redirect input (`< file`) is a constraint: with no deny or ask rule on it, the call
    // itself is left to the permissions, then to the default.
    let set = one("yes", PermissionKind::Allow, Some(Answer::Allowed));
    let s = snapshot("default = \"deny\"\n", &set);
    let c = bash("< /repo/a");
    let rules = s.decide(&c);
    assert_eq!(rules.decision, Decision::Deny);
    assert!(rules.subjects.iter().all(|s| s.neutral));
    let v = decide(&s, &set, &c);
    assert_eq!(
        (v.verdict.decision, v.decided_by.is_some()),
        (Decision::Allow, true)
    );
    // A deny rule on the redirect target is not neutral: it decides first.
    let s = snapshot("default = \"deny\"\ndeny = [\"read(/repo/a)\"]\n", &set);
    let v = decide(&s, &set, &c);
    assert_eq!((v.verdict.decision, v.decided_by), (Decision::Deny, None));
}

#[test]
fn operating_modes_cap_a_permissions_answer() {
    let set = one("yes", PermissionKind::Allow, Some(Answer::Allowed));
    let s = snapshot(
        "default = \"deny\"\n[modes]\nactive = [\"plan_only\"]\n",
        &set,
    );
    let v = decide(&s, &set, &call("read", json!({"path": "/repo/a"})));
    assert_eq!(
        (v.verdict.decision, v.decided_by.is_some()),
        (Decision::Allow, true)
    );
    let v = decide(&s, &set, &call("write", json!({"path": "/repo/a"})));
    assert_eq!(
        (v.verdict.decision, v.decided_by.clone()),
        (Decision::Deny, None)
    );
    assert!(
        v.verdict.reason.contains("plan_only"),
        "{}",
        v.verdict.reason
    );
    let s = snapshot(
        "default = \"deny\"\n[modes]\nactive = [\"apply_approved\"]\n",
        &set,
    );
    let v = decide(&s, &set, &bash("rm -rf build"));
    assert_eq!((v.verdict.decision, v.decided_by), (Decision::Ask, None));
}

// ------------------------------------------------------------------ errors and failures

#[test]
fn an_answer_of_the_wrong_kind_is_an_error() {
    for (kind, answer) in [
        (PermissionKind::Deny, Answer::Allowed),
        (PermissionKind::Allow, Answer::deny("no")),
    ] {
        let set = one("wrong", kind, Some(answer.clone()));
        let s = snapshot("default = \"ask\"\n", &set);
        let e = decide_with_permissions(&s, &set, &call("read_file", json!({}))).unwrap_err();
        assert!(
            matches!(&e, DecideError::WrongKind { answer: a, .. } if *a == answer),
            "{e}"
        );
        let text = e.to_string();
        assert!(
            text.contains("wrong@1") && text.contains("may answer only"),
            "{text}"
        );
    }
    // A decide permission may answer either.
    for answer in [Answer::Allowed, Answer::deny("no")] {
        let set = one("judge", PermissionKind::Decide, Some(answer));
        let s = snapshot("default = \"ask\"\n", &set);
        assert!(decide_with_permissions(&s, &set, &call("x", json!({}))).is_ok());
    }
}

#[test]
fn a_failing_permission_denies_with_a_tool_error_and_propagates_any_other() {
    let set = PermissionSet::new()
        .register(
            info("checker", PermissionKind::Allow),
            |c: &Call| -> CheckResult {
                match c.tool.as_str() {
                    "bash" => Err(PermissionError::Tool("Could not check this command".into())),
                    "deploy" => Err(PermissionError::other("checker broke")),
                    _ => Ok(Some(Answer::Allowed)),
                }
            },
        )
        .unwrap();
    let s = snapshot("default = \"allow\"\n", &set);
    // The model hears why; the turn goes on (no stop).
    let v = decide(&s, &set, &bash("ls"));
    assert_eq!(v.verdict.decision, Decision::Deny);
    assert_eq!(&*v.verdict.reason, "Could not check this command");
    assert_eq!(
        v.tool_error.as_deref(),
        Some("Could not check this command")
    );
    assert_eq!(
        v.decided_by.as_ref().map(|p| p.name.as_str()),
        Some("checker")
    );
    assert!(!v.stop);
    // Any other error is the caller's, never an allow (the default here is allow).
    let e = decide_with_permissions(&s, &set, &call("deploy", json!({}))).unwrap_err();
    assert!(
        matches!(&e, DecideError::Failed { tool, .. } if tool == "deploy"),
        "{e}"
    );
    assert!(e.to_string().contains("checker broke"), "{e}");
    assert_eq!(
        decide(&s, &set, &call("read_file", json!({})))
            .verdict
            .decision,
        Decision::Allow
    );
}

#[test]
fn a_denial_with_stop_marks_the_verdict() {
    // alpineagents: "a DenyPermission can stop too", and a decide permission's stop.
    for kind in [PermissionKind::Deny, PermissionKind::Decide] {
        let set = PermissionSet::new()
            .register(info("guard", kind), |c: &Call| -> CheckResult {
                Ok((c.tool == "deploy").then(|| Answer::stop("Never deploy")))
            })
            .unwrap()
            .register(
                info("rest", PermissionKind::Allow),
                always(Some(Answer::Allowed)),
            )
            .unwrap();
        let s = snapshot("default = \"deny\"\n", &set);
        let v = decide(&s, &set, &call("deploy", json!({"target": "prod"})));
        assert_eq!((v.verdict.decision, v.stop), (Decision::Deny, true));
        assert_eq!(&*v.verdict.reason, "Never deploy");
        let v = decide(&s, &set, &call("read_file", json!({})));
        assert_eq!((v.verdict.decision, v.stop), (Decision::Allow, false));
    }
    // A stop that does not decide the call does not mark it: a deny rule decided first.
    let set = one("stopper", PermissionKind::Deny, Some(Answer::stop("stop")));
    let s = snapshot("default = \"allow\"\ndeny = [\"deploy\"]\n", &set);
    let v = decide(&s, &set, &call("deploy", json!({})));
    assert_eq!((v.verdict.decision, v.stop), (Decision::Deny, false));
    // An empty reason is replaced by one naming the permission.
    let set = one("mute", PermissionKind::Deny, Some(Answer::deny(" ")));
    let s = snapshot("default = \"allow\"\n", &set);
    assert!(
        decide(&s, &set, &call("x", json!({})))
            .verdict
            .reason
            .contains("`mute`")
    );
}

// ------------------------------------------------------------------ snapshot, digest, async

#[test]
fn the_snapshot_lists_its_permissions_and_its_digest_covers_them() {
    let with = |version: &str, kind| {
        let set = PermissionSet::new()
            .register(PermissionInfo::new("p", version, kind), always(None))
            .unwrap();
        snapshot("default = \"ask\"\n", &set)
    };
    let none = snapshot("default = \"ask\"\n", &PermissionSet::new());
    let plain = PolicySnapshot::from_files(
        &[LoadedPolicy::from_text(
            "default = \"ask\"\n".into(),
            Format::Toml,
            "p.toml",
            "project",
            None,
        )
        .unwrap()],
        PathEnv {
            project_root: "/repo".into(),
            home: None,
        },
    )
    .unwrap();
    // No permissions: the digest every snapshot had before permissions existed.
    assert_eq!(none.digest(), plain.digest());
    assert!(none.permissions().is_empty());
    let v1 = with("1", PermissionKind::Allow);
    assert_eq!(
        v1.permissions(),
        [PermissionInfo::new("p", "1", PermissionKind::Allow)]
    );
    assert_ne!(v1.digest(), none.digest());
    assert_eq!(v1.digest(), with("1", PermissionKind::Allow).digest());
    assert_ne!(v1.digest(), with("2", PermissionKind::Allow).digest());
    assert_ne!(v1.digest(), with("1", PermissionKind::Decide).digest());
    assert!(v1.canonical_json().contains("\"permissions\""));
    // Registration order is part of it.
    let ab = PermissionSet::new()
        .register(info("a", PermissionKind::Allow), always(None))
        .unwrap()
        .register(info("b", PermissionKind::Allow), always(None))
        .unwrap();
    let ba = PermissionSet::new()
        .register(info("b", PermissionKind::Allow), always(None))
        .unwrap()
        .register(info("a", PermissionKind::Allow), always(None))
        .unwrap();
    assert_ne!(
        snapshot("default = \"ask\"\n", &ab).digest(),
        snapshot("default = \"ask\"\n", &ba).digest()
    );
    // A set other than the declared one is refused: a snapshot names every evaluator.
    let e = decide_with_permissions(&v1, &ab, &call("x", json!({}))).unwrap_err();
    assert!(matches!(e, DecideError::Undeclared { .. }), "{e}");
    let e = decide_with_permissions(&none, &ab, &call("x", json!({}))).unwrap_err();
    assert!(e.to_string().contains("declares (none)"), "{e}");
    // Names are unique, non-empty, and versioned.
    let dup = one("a", PermissionKind::Allow, None);
    assert!(
        dup.clone()
            .register(info("a", PermissionKind::Deny), always(None))
            .is_err()
    );
    for (name, version) in [("", "1"), ("a b", "1"), ("a", " ")] {
        let bad = PermissionInfo::new(name, version, PermissionKind::Deny);
        assert!(
            PermissionSet::new().register(bad, always(None)).is_err(),
            "{name:?} {version:?}"
        );
    }
    assert!(
        PolicyBuilder::new()
            .permissions(&dup)
            .unwrap()
            .permissions(&dup)
            .is_err()
    );
}

struct Approvals {
    asked: Arc<Mutex<Vec<String>>>,
}

impl AsyncPermission for Approvals {
    fn check<'a>(&'a self, call: &'a Call) -> PermissionFuture<'a> {
        Box::pin(async move {
            let answer = async { call.tool == "write_file" }.await;
            self.asked.lock().unwrap().push(call.tool.clone());
            Ok(Some(if answer {
                Answer::Allowed
            } else {
                Answer::stop("The user declined this call.")
            }))
        })
    }
}

#[test]
fn async_permissions_run_in_the_async_variant_only() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let set = PermissionSet::new()
        .register(
            info("no-rm", PermissionKind::Deny),
            |c: &Call| -> CheckResult {
                Ok((c.tool == "rm").then(|| Answer::deny("rm is not allowed.")))
            },
        )
        .unwrap()
        .register_async(
            info("human", PermissionKind::Decide),
            Approvals {
                asked: asked.clone(),
            },
        )
        .unwrap();
    let s = snapshot("default = \"deny\"\n", &set);
    let write = call("write_file", json!({"path": "a"}));
    // A sync decision refuses before asking anything.
    let e = decide_with_permissions(&s, &set, &write).unwrap_err();
    assert!(
        matches!(&e, DecideError::AsyncInSync { permission } if permission.name == "human"),
        "{e}"
    );
    assert!(asked.lock().unwrap().is_empty());
    let v = block_on(decide_with_permissions_async(&s, &set, &write)).unwrap();
    assert_eq!((v.verdict.decision, v.stop), (Decision::Allow, false));
    let v = block_on(decide_with_permissions_async(
        &s,
        &set,
        &call("deploy", json!({})),
    ))
    .unwrap();
    assert_eq!((v.verdict.decision, v.stop), (Decision::Deny, true));
    let v = block_on(decide_with_permissions_async(
        &s,
        &set,
        &call("rm", json!({})),
    ))
    .unwrap();
    assert_eq!(&*v.verdict.reason, "rm is not allowed.");
    assert_eq!(*asked.lock().unwrap(), ["write_file", "deploy"]);
    // Sync-only sets work in the async variant too, with the same verdicts.
    let sync_only = one("yes", PermissionKind::Allow, Some(Answer::Allowed));
    let s = snapshot("default = \"deny\"\n", &sync_only);
    assert_eq!(
        block_on(decide_with_permissions_async(&s, &sync_only, &write)).unwrap(),
        decide(&s, &sync_only, &write)
    );
}

#[test]
fn permissions_see_the_raw_arguments() {
    // alpineagents `order`: "permissions get raw (unvalidated) arguments".
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = {
        let seen = seen.clone();
        move |c: &Call| -> CheckResult {
            seen.lock().unwrap().push(c.args.clone());
            Ok(None)
        }
    };
    let set = PermissionSet::new()
        .register(info("look", PermissionKind::Allow), recorder)
        .unwrap();
    let s = snapshot("default = \"deny\"\n", &set);
    decide(&s, &set, &call("read_file", json!({"path": 42})));
    assert_eq!(*seen.lock().unwrap(), [json!({"path": 42})]);
}

// ------------------------------------------------------------------ alpineagents reference

fn reference() -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/reference/alpineagents.jsonl");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| {
            panic!(
                "the corpus is part of the repository ({}): {e}",
                path.display()
            )
        })
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// alpineagents' built-in permissions, written with this API (the reference's lists run
/// through it; Warden's own equivalents are rules, see docs/policy.md).
fn deny_by_name(names: &'static [&'static str], reason: Option<&'static str>) -> impl Permission {
    move |c: &Call| -> CheckResult {
        let hit = names.iter().any(|n| Wildcard::new(n).matches(&c.tool));
        Ok(hit.then(|| {
            Answer::deny(
                reason.map_or_else(|| format!("{} is not allowed.", c.tool), str::to_owned),
            )
        }))
    }
}

fn allow_by_name(names: &'static [&'static str]) -> impl Permission {
    move |c: &Call| -> CheckResult {
        Ok(names
            .iter()
            .any(|n| Wildcard::new(n).matches(&c.tool))
            .then_some(Answer::Allowed))
    }
}

/// `AllowByReadOnly()` over the reference's tools: `read_file` is read-only, and `bash` per
/// call by the shell splitter's classification.
fn allow_by_read_only() -> impl Permission {
    |c: &Call| -> CheckResult {
        let read_only = match c.tool.as_str() {
            "read_file" => true,
            "bash" => c.args["command"].as_str().is_some_and(shell::is_read_only),
            _ => false,
        };
        Ok(read_only.then_some(Answer::Allowed))
    }
}

/// A list of permissions in alpineagents' order, with nothing else: no rules, and a call
/// nobody decides is refused (default deny).
struct List {
    set: PermissionSet,
}

impl List {
    fn new() -> Self {
        Self {
            set: PermissionSet::new(),
        }
    }
    fn add(mut self, name: &str, kind: PermissionKind, p: impl Permission + 'static) -> Self {
        self.set = self.set.register(info(name, kind), p).unwrap();
        self
    }
    /// Each call's outcome: `("done", tool)` or `("denied", reason)`.
    fn run(&self, calls: &[Call]) -> Vec<(String, String)> {
        let s = snapshot("default = \"deny\"\n", &self.set);
        calls
            .iter()
            .map(|c| {
                let v = decide(&s, &self.set, c);
                match v.verdict.decision {
                    Decision::Allow => ("done".into(), c.tool.clone()),
                    _ => ("denied".into(), v.verdict.reason.to_string()),
                }
            })
            .collect()
    }
}

fn c(tool: &str, args: Value) -> Call {
    call(tool, args)
}

#[test]
fn alpineagents_permission_reference_cases() {
    let kinds = [
        "run",
        "order",
        "wrong_verdict",
        "construction",
        "settings",
        "repr",
    ];
    let cases: Vec<Value> = reference()
        .into_iter()
        .filter(|c| kinds.contains(&c["kind"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(cases.len(), 37);
    let mut seen = BTreeSet::new();
    for case in &cases {
        let kind = case["kind"].as_str().unwrap();
        let name = case["name"].as_str().unwrap_or(kind).to_owned();
        let expect = &case["expect"];
        match (kind, name.as_str()) {
            ("run", "deny listed last still beats AllowByDefault") => {
                let list = List::new()
                    .add(
                        "default",
                        PermissionKind::Allow,
                        always(Some(Answer::Allowed)),
                    )
                    .add(
                        "deny-bash",
                        PermissionKind::Deny,
                        deny_by_name(&["bash"], None),
                    );
                let out = list.run(&[
                    c("bash", json!({"command": "rm -rf /"})),
                    c("read_file", json!({"path": "a"})),
                ]);
                assert_eq!(out[0], ("denied".into(), "bash is not allowed.".into()));
                assert_eq!(out[1].0, "done");
                assert_eq!(
                    expect["results_in_record_order"][0]["text"],
                    "bash is not allowed."
                );
            }
            (
                "run",
                "nobody decides -> denied with PermissionWarning" | "empty list denies every call",
            ) => {
                let list = if name.starts_with("nobody") {
                    List::new().add(
                        "deny-bash",
                        PermissionKind::Deny,
                        deny_by_name(&["bash"], None),
                    )
                } else {
                    List::new()
                };
                let call = c("read_file", json!({"path": "a"}));
                let out = list.run(&[call]);
                // Our reason names the default; alpineagents' text is its own.
                assert_eq!(out[0].0, "denied", "{name}");
                assert_eq!(expect["results_in_record_order"][0]["outcome"], "denied");
            }
            ("run", "None means no checks") | ("settings", _) => {
                // `permissions=None`: no checks, a policy that allows everything and no set.
                let s = snapshot("default = \"allow\"\n", &PermissionSet::new());
                let v = decide(
                    &s,
                    &PermissionSet::new(),
                    &c("bash", json!({"command": "rm"})),
                );
                assert_eq!(v.verdict.decision, Decision::Allow);
                // `permissions=[]` is the empty list: every call refused (the case above).
                assert_eq!(
                    List::new().run(&[c("write_file", json!({}))])[0].0,
                    "denied"
                );
            }
            ("run", "read-only per-call hints") => {
                let list =
                    List::new().add("read-only", PermissionKind::Allow, allow_by_read_only());
                let out = list.run(&[
                    c("bash", json!({"command": "ls"})),
                    c("bash", json!({"command": "rm"})),
                ]);
                assert_eq!((out[0].0.as_str(), out[1].0.as_str()), ("done", "denied"));
            }
            ("run", "mixed") => {
                let list = List::new()
                    .add(
                        "deny-bash",
                        PermissionKind::Deny,
                        deny_by_name(&["bash"], None),
                    )
                    .add("read-only", PermissionKind::Allow, allow_by_read_only())
                    .add("deploy", PermissionKind::Allow, allow_by_name(&["deploy"]));
                let out = list.run(&[
                    c("read_file", json!({"path": "a"})),
                    c("write_file", json!({"path": "b", "content": "x"})),
                    c("bash", json!({"command": "ls"})),
                    c("deploy", json!({"target": "prod"})),
                ]);
                let got: Vec<&str> = out.iter().map(|(o, _)| o.as_str()).collect();
                assert_eq!(got, ["done", "denied", "denied", "done"]);
                assert_eq!(out[2].1, "bash is not allowed.");
            }
            ("run", n) if n.starts_with("Denied(stop=True)") => {
                let stopper = |c: &Call| -> CheckResult {
                    Ok(Some(if c.tool == "write_file" {
                        Answer::stop("Stop right there")
                    } else {
                        Answer::Allowed
                    }))
                };
                let set = PermissionSet::new()
                    .register(info("Stopper", PermissionKind::Decide), stopper)
                    .unwrap();
                let s = snapshot("default = \"deny\"\n", &set);
                let v = decide(
                    &s,
                    &set,
                    &c("write_file", json!({"path": "b", "content": "x"})),
                );
                assert_eq!(
                    (v.verdict.decision, v.stop, &*v.verdict.reason),
                    (Decision::Deny, true, "Stop right there")
                );
                assert_eq!(v.decided_by.unwrap().name, "Stopper");
                // Cancelling the turn's other calls is the executor's (docs/policy.md).
                assert!(!decide(&s, &set, &c("read_file", json!({"path": "a"}))).stop);
            }
            ("run", "DecideByHuman yes" | "DecideByHuman no -> Denied(stop=True)") => {
                let yes = name.ends_with("yes");
                let human = move |_: &Call| -> CheckResult {
                    Ok(Some(if yes {
                        Answer::Allowed
                    } else {
                        Answer::stop("The user declined this call. Wait for their next message.")
                    }))
                };
                let list = List::new().add("DecideByHuman", PermissionKind::Decide, human);
                let out = list.run(&[c("write_file", json!({"path": "a", "content": "x"}))]);
                if yes {
                    assert_eq!(out[0].0, "done");
                } else {
                    assert_eq!(
                        out[0].1,
                        expect["results_in_record_order"][0]["text"]
                            .as_str()
                            .unwrap()
                    );
                }
            }
            ("run", "MCP tools by name and read-only trust") => {
                // The MCP server's read-only claim trusted (trust_mcp=True) for get_issue.
                let trusted_read_only = |c: &Call| -> CheckResult {
                    Ok((c.tool == "github__get_issue").then_some(Answer::Allowed))
                };
                let list = List::new()
                    .add("read-only", PermissionKind::Allow, trusted_read_only)
                    .add(
                        "deny-delete",
                        PermissionKind::Deny,
                        deny_by_name(&["github__delete_*"], None),
                    )
                    .add("label", PermissionKind::Allow, allow_by_name(&["*label"]));
                let out = list.run(&[
                    c("github__get_issue", json!({"number": 1})),
                    c("github__delete_repo", json!({"name": "x"})),
                    c("github__add_label", json!({"number": 1, "label": "bug"})),
                ]);
                assert_eq!(
                    out[1].1,
                    expect["results_in_call_order"][1].as_str().unwrap()
                );
                assert_eq!((out[0].0.as_str(), out[2].0.as_str()), ("done", "done"));
            }
            ("run", "ToolError from a permission denies the call; run continues") => {
                let raising = |c: &Call| -> CheckResult {
                    if c.tool == "bash" {
                        Err(PermissionError::Tool("Could not check this command".into()))
                    } else {
                        Ok(None)
                    }
                };
                let list = List::new()
                    .add("Raising", PermissionKind::Allow, raising)
                    .add(
                        "default",
                        PermissionKind::Allow,
                        always(Some(Answer::Allowed)),
                    );
                let out = list.run(&[
                    c("bash", json!({"command": "ls"})),
                    c("read_file", json!({"path": "a"})),
                ]);
                assert_eq!(
                    out[0],
                    ("denied".into(), "Could not check this command".into())
                );
                assert_eq!(out[1].0, "done");
            }
            ("run", "other exception from a permission propagates and closes the calls") => {
                let raising = |c: &Call| -> CheckResult {
                    if c.tool == "bash" {
                        Err(PermissionError::other("checker broke"))
                    } else {
                        Ok(None)
                    }
                };
                let set = PermissionSet::new()
                    .register(
                        info("deny-write", PermissionKind::Deny),
                        deny_by_name(&["write_file"], None),
                    )
                    .unwrap()
                    .register(info("Raising", PermissionKind::Allow), raising)
                    .unwrap()
                    .register(
                        info("default", PermissionKind::Allow),
                        always(Some(Answer::Allowed)),
                    )
                    .unwrap();
                let s = snapshot("default = \"deny\"\n", &set);
                assert_eq!(
                    &*decide(
                        &s,
                        &set,
                        &c("write_file", json!({"path": "a", "content": "x"}))
                    )
                    .verdict
                    .reason,
                    "write_file is not allowed."
                );
                let e = decide_with_permissions(&s, &set, &c("bash", json!({"command": "ls"})))
                    .unwrap_err();
                assert!(
                    e.to_string().contains("Raising@1") && e.to_string().contains("checker broke"),
                    "{e}"
                );
            }
            ("run", "a DenyPermission can stop too") => {
                let guard = |c: &Call| -> CheckResult {
                    Ok((c.tool == "deploy").then(|| Answer::stop("Never deploy")))
                };
                let set = PermissionSet::new()
                    .register(info("Guard", PermissionKind::Deny), guard)
                    .unwrap()
                    .register(
                        info("default", PermissionKind::Allow),
                        always(Some(Answer::Allowed)),
                    )
                    .unwrap();
                let s = snapshot("default = \"deny\"\n", &set);
                let v = decide(&s, &set, &c("deploy", json!({"target": "prod"})));
                assert!(v.stop && v.decided_by.unwrap().name == "Guard");
            }
            ("run", "parallel and serial groups") => {
                // The permission part: NoProd denies prod deploys only (grouping is the executor's).
                let no_prod = |c: &Call| -> CheckResult {
                    Ok((c.args["target"] == "prod").then(|| Answer::deny("Not prod")))
                };
                let list = List::new()
                    .add("NoProd", PermissionKind::Decide, no_prod)
                    .add(
                        "default",
                        PermissionKind::Allow,
                        always(Some(Answer::Allowed)),
                    );
                let out = list.run(&[
                    c("deploy", json!({"target": "prod"})),
                    c("read_file", json!({"path": "a"})),
                    c("deploy", json!({"target": "staging"})),
                    c("bash", json!({"command": "ls"})),
                ]);
                assert_eq!(
                    out[0].1,
                    expect["results_in_call_order"][0].as_str().unwrap()
                );
                assert!(out[1..].iter().all(|(o, _)| o == "done"));
            }
            ("run", "exception from hints_for follows permission rules") => {
                // A hints function is the permission's own code here: its ToolError denies,
                // any other error propagates.
                let hints = |c: &Call| -> CheckResult {
                    match c.args["command"].as_str() {
                        Some("ls") => Err(PermissionError::Tool(
                            "cannot tell what this command does".into(),
                        )),
                        _ => Err(PermissionError::other("ValueError")),
                    }
                };
                let set = PermissionSet::new()
                    .register(info("AllowByReadOnly", PermissionKind::Allow), hints)
                    .unwrap();
                let s = snapshot("default = \"deny\"\n", &set);
                assert_eq!(
                    decide(&s, &set, &bash("ls")).tool_error.as_deref(),
                    Some("cannot tell what this command does")
                );
                assert!(decide_with_permissions(&s, &set, &bash("pwd")).is_err());
            }
            ("order", "deny permissions are asked first wherever they are") => {
                // Run in deny_permissions_run_first_then_the_others_in_registration_order.
                assert_eq!(
                    expect["asked"],
                    json!(["deny1", "deny2", "allow1", "decide", "allow2"])
                );
            }
            ("order", "the first deny decides and later permissions are not asked") => {
                let asked = Arc::new(Mutex::new(Vec::<&str>::new()));
                let rec = |n: &'static str, a: Option<Answer>| {
                    let asked = asked.clone();
                    move |_: &Call| -> CheckResult {
                        asked.lock().unwrap().push(n);
                        Ok(a.clone())
                    }
                };
                let list = List::new()
                    .add(
                        "deny1",
                        PermissionKind::Deny,
                        rec("deny1", Some(Answer::deny("first"))),
                    )
                    .add(
                        "deny2",
                        PermissionKind::Deny,
                        rec("deny2", Some(Answer::deny("second"))),
                    )
                    .add(
                        "allow",
                        PermissionKind::Allow,
                        rec("allow", Some(Answer::Allowed)),
                    );
                let out = list.run(&[c("read_file", json!({"path": "a"}))]);
                assert_eq!(out[0].1, expect["result"].as_str().unwrap());
                assert_eq!(*asked.lock().unwrap(), ["deny1"]);
            }
            ("order", "the first non-None verdict wins") => {
                let asked = Arc::new(Mutex::new(Vec::<&str>::new()));
                let rec = |n: &'static str, a: Option<Answer>| {
                    let asked = asked.clone();
                    move |_: &Call| -> CheckResult {
                        asked.lock().unwrap().push(n);
                        Ok(a.clone())
                    }
                };
                let set = PermissionSet::new()
                    .register(info("abstain", PermissionKind::Allow), rec("abstain", None))
                    .unwrap()
                    .register(
                        info("decider", PermissionKind::Decide),
                        rec("decider", Some(Answer::deny("not today"))),
                    )
                    .unwrap()
                    .register(
                        info("late", PermissionKind::Allow),
                        rec("late", Some(Answer::Allowed)),
                    )
                    .unwrap();
                let s = snapshot("default = \"deny\"\n", &set);
                let v = decide(&s, &set, &c("read_file", json!({"path": "a"})));
                assert_eq!(&*v.verdict.reason, "not today");
                assert_eq!(v.decided_by.unwrap().name, "decider");
                assert_eq!(*asked.lock().unwrap(), ["abstain", "decider"]);
            }
            ("order", "permissions get raw (unvalidated) arguments and the tool") => {
                // Run in permissions_see_the_raw_arguments.
                assert_eq!(expect["permission_saw"][0], json!({"path": 42}));
            }
            (
                "order",
                "every call checked in request order before any tool runs"
                | "input errors (unknown tool, invalid JSON args) come before permissions",
            )
            | (
                "run",
                "KeyboardInterrupt from a permission"
                | "finish() before a permission stop in the same turn wins"
                | "DecideByHuman question text"
                | "DecideByHuman answer outside yes/no",
            )
            | ("construction", _)
            | ("repr", _) => {
                // The runtime's, or made impossible by Rust's types: docs/policy.md
                // ("Permissions and the alpineagents reference") says why for each.
            }
            ("wrong_verdict", _) => {
                let pk = case["permission_kind"].as_str().unwrap();
                let returns = case["returns"].as_str().unwrap();
                let (kind, answer) = match (pk, returns) {
                    ("DenyPermission", "Allowed()") => (PermissionKind::Deny, Answer::Allowed),
                    ("AllowPermission", "Denied('no')") => {
                        (PermissionKind::Allow, Answer::deny("no"))
                    }
                    // `True` and `'yes'` are not answers at all: a type error at compile time.
                    _ => continue,
                };
                let set = one("Wrong", kind, Some(answer));
                let s = snapshot("default = \"allow\"\n", &set);
                let e = decide_with_permissions(&s, &set, &c("read_file", json!({}))).unwrap_err();
                assert!(matches!(e, DecideError::WrongKind { .. }), "{e}");
            }
            _ => panic!("reference case not run and not discussed: {kind} / {name}"),
        }
        seen.insert(format!("{kind}/{name}"));
    }
    assert!(seen.len() >= 33, "{seen:?}");
}
