//! Subagent scopes: inheritance, ancestor deny rules first, stricter-of,
//! `expands_parent` with a named authority, the `[scope]` table, the alpineagents subagent
//! reference cases, and the property that a child never allows what an ancestor's deny rules
//! deny.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};
use warden_policy::permission::DecideError;
use warden_policy::*;

fn env() -> PathEnv {
    PathEnv {
        project_root: "/repo".into(),
        home: None,
    }
}

/// A snapshot from TOML; its own source is named `name`.
fn policy(name: &str, toml: &str) -> Arc<PolicySnapshot> {
    let file = loaded(name, toml);
    Arc::new(PolicySnapshot::from_files(&[file], env()).unwrap())
}

fn loaded(name: &str, toml: &str) -> LoadedPolicy {
    LoadedPolicy::from_text(
        toml.into(),
        Format::Toml,
        &format!("{name}.toml"),
        name,
        None,
    )
    .unwrap()
}

/// A child that expands its parent with its own policy, on `authority`'s word.
fn expand(name: &str, toml: &str, authority: &str) -> ChildPolicy {
    ChildPolicy::Expand {
        policy: policy(name, toml),
        authority: authority.into(),
    }
}

/// The reference's expectation `key` says `needle`.
fn says(expect: &Value, key: &str, needle: &str) {
    let text = expect[key].as_str().unwrap_or_default();
    assert!(text.contains(needle), "{key}: {text}");
}

fn call(tool: &str, args: Value) -> Call {
    Call::new(tool, args)
}

fn reference() -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/reference/alpineagents.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "the corpus is part of the repository ({}): {e}",
            path.display()
        )
    });
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

// ------------------------------------------------------------------ semantics

#[test]
fn a_child_without_a_policy_inherits_its_parent() {
    let root = Scope::root(
        "main",
        policy(
            "main",
            "default = \"ask\"\nallow = [\"read\"]\ndeny = [\"bash(rm:*)\"]",
        ),
    )
    .unwrap();
    let child = root.child("helper", ChildPolicy::Inherit).unwrap();
    let v = child.decide(&call("read", json!({"path": "/repo/a"})));
    assert_eq!(v.decision(), Decision::Allow);
    assert_eq!(
        (&*v.scope, &*v.caller, v.stage),
        ("main", "helper", ScopeStage::Inherited)
    );
    assert!(v.reason.contains("inherited by `helper`"), "{}", v.reason);
    let v = child.decide(&call("bash", json!({"command": "rm -rf /"})));
    assert_eq!(v.decision(), Decision::Deny);
    assert_eq!(v.stage, ScopeStage::AncestorDeny);
    assert_eq!(v.verdict.rule.as_deref(), Some("bash(rm:*)"));
    assert_eq!(
        v.verdict,
        root.decide(&call("bash", json!({"command": "rm -rf /"})))
            .verdict
    );
    // Inheriting twice is inheriting.
    let grand = child.child("grand", ChildPolicy::Inherit).unwrap();
    assert_eq!(
        grand
            .decide(&call("write", json!({"path": "/repo/a"})))
            .decision(),
        Decision::Ask
    );
}

#[test]
fn ancestor_deny_rules_come_first_outermost_first_and_name_the_ancestor() {
    let root = Scope::root(
        "root",
        policy("root", "default = \"allow\"\ndeny = [\"bash(rm -rf:*)\"]"),
    )
    .unwrap();
    let mid = root
        .child(
            "mid",
            ChildPolicy::Own(policy(
                "mid",
                "default = \"allow\"\ndeny = [\"bash(rm:*)\"]",
            )),
        )
        .unwrap();
    let leaf = mid
        .child(
            "leaf",
            ChildPolicy::Own(policy("leaf", "default = \"allow\"\ndeny = [\"bash\"]")),
        )
        .unwrap();
    let v = leaf.decide(&call("bash", json!({"command": "rm -rf /"})));
    assert_eq!((&*v.scope, v.stage), ("root", ScopeStage::AncestorDeny));
    assert_eq!(v.verdict.rule.as_deref(), Some("bash(rm -rf:*)"));
    assert_eq!(v.verdict.source.as_deref(), Some("root"));
    assert!(
        v.reason
            .contains("scope `root`, whose deny rules bind its subagent `leaf`"),
        "{}",
        v.reason
    );
    let v = leaf.decide(&call("bash", json!({"command": "rm x"})));
    assert_eq!((&*v.scope, v.stage), ("mid", ScopeStage::AncestorDeny));
    let v = leaf.decide(&call("bash", json!({"command": "ls"})));
    assert_eq!((&*v.scope, v.stage), ("leaf", ScopeStage::Own));
    assert_eq!(v.decision(), Decision::Deny);
    // A compound command names the denied part.
    let v = leaf.decide(&call("bash", json!({"command": "ls && rm -rf /tmp/x"})));
    assert_eq!((&*v.scope, v.stage), ("root", ScopeStage::AncestorDeny));
    assert_eq!(v.verdict.subject.as_deref(), Some("rm -rf /tmp/x"));
}

#[test]
fn ancestor_deny_rules_include_the_refusals_made_in_their_name() {
    // The parent denies reads of .env; a child that allows every read cannot read a path it
    // hides (missing field) or run an unknown program the parent could not vet.
    let root = Scope::root(
        "main",
        policy(
            "main",
            "default = \"allow\"\ndeny = [\"read(.env)\", \"bash(rm:*)\"]",
        ),
    )
    .unwrap();
    let expanding = root
        .child(
            "free",
            expand(
                "free",
                "default = \"allow\"\nallow = [\"read\", \"bash\"]",
                "platform",
            ),
        )
        .unwrap();
    let v = expanding.decide(&call("read", json!({"file": "/repo/.env"})));
    assert_eq!(
        (v.decision(), v.stage),
        (Decision::Deny, ScopeStage::AncestorDeny)
    );
    assert!(v.verdict.reason.contains("missing"), "{}", v.verdict.reason);
    let v = expanding.decide(&call("bash", json!({"command": "$CMD x"})));
    assert_eq!(
        (v.decision(), v.stage),
        (Decision::Deny, ScopeStage::AncestorDeny)
    );
    let v = expanding.decide(&call("bash", json!({"command": "echo 'unterminated"})));
    assert_eq!((v.decision(), &*v.scope), (Decision::Deny, "main"));
}

#[test]
fn by_default_a_child_gets_the_stricter_of_its_own_verdict_and_its_parents() {
    let root = Scope::root(
        "main",
        policy(
            "main",
            "default = \"ask\"\nallow = [\"read\", \"bash(git:*)\"]",
        ),
    )
    .unwrap();
    let child = root
        .child(
            "reviewer",
            ChildPolicy::Own(policy(
                "reviewer",
                "default = \"deny\"\nallow = [\"read\", \"write\", \"bash(git status:*)\"]",
            )),
        )
        .unwrap();
    // Both allow: the child's own rule is cited.
    let v = child.decide(&call("read", json!({"path": "/repo/a"})));
    assert_eq!(
        (v.decision(), &*v.scope, v.stage),
        (Decision::Allow, "reviewer", ScopeStage::Own)
    );
    // The child allows, the parent asks: ask, citing the parent.
    let v = child.decide(&call("write", json!({"path": "/repo/a"})));
    assert_eq!(
        (v.decision(), &*v.scope, v.stage),
        (Decision::Ask, "main", ScopeStage::Stricter)
    );
    assert!(v.authorities.is_empty());
    assert!(
        v.reason
            .contains("stricter than the own policy of `reviewer`"),
        "{}",
        v.reason
    );
    // The parent allows, the child denies: deny, citing the child.
    let v = child.decide(&call("bash", json!({"command": "git push"})));
    assert_eq!(
        (v.decision(), &*v.scope, v.stage),
        (Decision::Deny, "reviewer", ScopeStage::Own)
    );
    // Recursively: a grandchild that allows everything is still bound by both.
    let grand = child
        .child(
            "grand",
            ChildPolicy::Own(policy("grand", "default = \"allow\"")),
        )
        .unwrap();
    let v = grand.decide(&call("bash", json!({"command": "git push"})));
    assert_eq!((v.decision(), &*v.scope), (Decision::Deny, "reviewer"));
    let v = grand.decide(&call("write", json!({"path": "/repo/a"})));
    assert_eq!((v.decision(), &*v.scope), (Decision::Ask, "main"));
}

#[test]
fn an_expanding_child_replaces_its_parents_allow_ask_and_default_and_names_the_authority() {
    let root = Scope::root(
        "main",
        policy(
            "main",
            "default = \"deny\"\nallow = [\"read\"]\nask = [\"write\"]\ndeny = [\"bash(rm:*)\"]",
        ),
    )
    .unwrap();
    let child = root
        .child(
            "drafter",
            expand(
                "drafter",
                "default = \"ask\"\nallow = [\"write(/repo/drafts/**)\", \"bash\"]",
                "platform-team#42",
            ),
        )
        .unwrap();
    assert_eq!(child.authority(), Some("platform-team#42"));
    // Looser than the parent: relied on the expansion, which the verdict names.
    let v = child.decide(&call("write", json!({"path": "/repo/drafts/a.md"})));
    assert_eq!(
        (v.decision(), &*v.scope, v.stage),
        (Decision::Allow, "drafter", ScopeStage::Own)
    );
    assert_eq!(v.authorities.len(), 1);
    assert_eq!(
        (&*v.authorities[0].scope, &*v.authorities[0].authority),
        ("drafter", "platform-team#42")
    );
    assert!(
        v.reason.contains("under the authority `platform-team#42`"),
        "{}",
        v.reason
    );
    let v = child.decide(&call("bash", json!({"command": "ls"})));
    assert_eq!(v.decision(), Decision::Allow);
    assert_eq!(v.authorities.len(), 1);
    // The parent's deny rules still come first: no authority relied on.
    let v = child.decide(&call("bash", json!({"command": "rm -rf /"})));
    assert_eq!(
        (v.decision(), v.stage),
        (Decision::Deny, ScopeStage::AncestorDeny)
    );
    assert!(v.authorities.is_empty());
    // The parent's allow does not bind: the child's own default (ask) replaces it; stricter
    // than the parent, so nothing relied on the expansion.
    let v = child.decide(&call("read", json!({"path": "/repo/a"})));
    assert_eq!((v.decision(), &*v.scope), (Decision::Ask, "drafter"));
    assert!(v.authorities.is_empty());
    // A stricter-of grandchild of an expanding scope still relies on it when it allows.
    let grand = child
        .child(
            "grand",
            ChildPolicy::Own(policy("grand", "default = \"allow\"")),
        )
        .unwrap();
    let v = grand.decide(&call("write", json!({"path": "/repo/drafts/b.md"})));
    assert_eq!((v.decision(), &*v.scope), (Decision::Allow, "grand"));
    assert_eq!(v.authorities.len(), 1);
    assert_eq!(&*v.authorities[0].scope, "drafter");
    // An inheriting grandchild too.
    let heir = child.child("heir", ChildPolicy::Inherit).unwrap();
    let v = heir.decide(&call("bash", json!({"command": "ls"})));
    assert_eq!(
        (v.decision(), v.stage, v.authorities.len()),
        (Decision::Allow, ScopeStage::Inherited, 1)
    );
}

#[test]
fn an_ancestors_operating_modes_bind_even_an_expanding_child() {
    let root = Scope::root(
        "main",
        policy(
            "main",
            "default = \"allow\"\n[modes]\nactive = [\"plan_only\"]\n",
        ),
    )
    .unwrap();
    let write = call("write", json!({"path": "/repo/a"}));
    let read = call("read", json!({"path": "/repo/a"}));
    let expanding = root
        .child(
            "writer",
            expand("writer", "default = \"allow\"", "platform"),
        )
        .unwrap();
    let v = expanding.decide(&write);
    assert_eq!(
        (v.decision(), &*v.scope, v.stage),
        (Decision::Deny, "main", ScopeStage::AncestorMode)
    );
    assert!(v.reason.contains("plan_only"), "{}", v.reason);
    assert!(v.authorities.is_empty());
    assert_eq!(&v.verdict.policy_digest, root.policy().unwrap().digest());
    assert_eq!(expanding.decide(&read).decision(), Decision::Allow);
    // Stricter-of already has it: the parent's own verdict is capped.
    let strict = root
        .child("s", ChildPolicy::Own(policy("s", "default = \"allow\"")))
        .unwrap();
    let v = strict.decide(&write);
    assert_eq!(
        (v.decision(), &*v.scope, v.stage),
        (Decision::Deny, "main", ScopeStage::Stricter)
    );
    // A mode that asks (apply_approved) leaves an expansion something to rely on.
    let root = Scope::root(
        "main",
        policy(
            "main",
            "default = \"deny\"\n[modes]\nactive = [\"apply_approved\"]\n",
        ),
    )
    .unwrap();
    let expanding = root
        .child(
            "writer",
            expand("writer", "default = \"allow\"", "platform"),
        )
        .unwrap();
    let v = expanding.decide(&write);
    assert_eq!(
        (v.decision(), v.stage),
        (Decision::Ask, ScopeStage::AncestorMode)
    );
    assert_eq!(v.authorities.len(), 1);
}

#[test]
fn scope_names_authorities_and_digests() {
    let main = policy("main", "default = \"ask\"");
    let root = Scope::root("main", main.clone()).unwrap();
    assert!(matches!(
        Scope::root("", main.clone()),
        Err(ScopeError::Name { .. })
    ));
    assert!(matches!(
        Scope::root("a b", main.clone()),
        Err(ScopeError::Name { .. })
    ));
    assert!(matches!(
        root.child("main", ChildPolicy::Inherit),
        Err(ScopeError::Name { .. })
    ));
    let expand = |authority: &str| ChildPolicy::Expand {
        policy: main.clone(),
        authority: authority.into(),
    };
    assert!(matches!(
        root.child("x", expand(" ")),
        Err(ScopeError::Authority { .. })
    ));
    // The digest covers the chain: names, policies, authorities.
    let a = root.child("x", expand("one")).unwrap();
    let b = root.child("x", expand("two")).unwrap();
    let c = root.child("x", ChildPolicy::Own(main.clone())).unwrap();
    let d = root.child("x", ChildPolicy::Own(main.clone())).unwrap();
    assert_ne!(a.digest(), b.digest());
    assert_ne!(a.digest(), c.digest());
    assert_eq!(c.digest(), d.digest());
    let other_root = Scope::root("main", policy("main", "default = \"deny\"")).unwrap();
    assert_ne!(
        other_root
            .child("x", ChildPolicy::Own(main.clone()))
            .unwrap()
            .digest(),
        c.digest()
    );
    let v = c.decide(&call("read", json!({"path": "/a"})));
    assert_eq!(&v.scope_digest, c.digest());
    assert_eq!(
        c.chain().iter().map(|s| s.name()).collect::<Vec<_>>(),
        ["main", "x"]
    );
}

// ------------------------------------------------------------------ programmable permissions

/// A snapshot from TOML that declares `set`'s permissions.
fn with_permissions(name: &str, toml: &str, set: &PermissionSet) -> Arc<PolicySnapshot> {
    Arc::new(
        PolicyBuilder::new()
            .path_env(env())
            .file(&loaded(name, toml))
            .unwrap()
            .permissions(set)
            .unwrap()
            .build()
            .unwrap(),
    )
}

/// A root scope `lead` whose policy (`toml`) declares `set`.
fn lead_with(set: &PermissionSet, toml: &str) -> Arc<Scope> {
    Scope::root("lead", with_permissions("lead", toml, set)).unwrap()
}

/// A deny permission on `deploy` calls (with `stop`).
fn no_deploy() -> PermissionSet {
    PermissionSet::new()
        .register(
            PermissionInfo::new("no-deploy", "1", PermissionKind::Deny),
            |c: &Call| -> Result<Option<Answer>, PermissionError> {
                Ok((c.tool == "deploy").then(|| Answer::stop("never deploy from a subagent")))
            },
        )
        .unwrap()
}

/// An allow permission on every call.
fn yes() -> PermissionSet {
    PermissionSet::new()
        .register(
            PermissionInfo::new("yes", "1", PermissionKind::Allow),
            |_: &Call| -> Result<Option<Answer>, PermissionError> { Ok(Some(Answer::Allowed)) },
        )
        .unwrap()
}

#[test]
fn an_ancestors_deny_permissions_bind_every_child_even_an_expanding_one() {
    let lead_set = no_deploy();
    let root = lead_with(&lead_set, "default = \"ask\"");
    let builder = root
        .child(
            "builder",
            expand("builder", "default = \"allow\"", "platform"),
        )
        .unwrap();
    let sets = |name: &str| (name == "lead").then_some(&lead_set);
    let deploy = call("deploy", json!({"target": "prod"}));
    let v = builder.decide_with_permissions(&deploy, sets).unwrap();
    assert_eq!(
        (v.decision(), &*v.scope, v.stage),
        (Decision::Deny, "lead", ScopeStage::AncestorDeny)
    );
    assert_eq!(
        v.permission.as_ref().map(|p| p.name.as_str()),
        Some("no-deploy")
    );
    assert!(v.stop);
    assert!(
        v.reason.contains("never deploy from a subagent"),
        "{}",
        v.reason
    );
    // What the deny permission does not deny, the expansion decides.
    let build = call("build", json!({}));
    let v = builder.decide_with_permissions(&build, sets).unwrap();
    assert_eq!((v.decision(), v.stage), (Decision::Allow, ScopeStage::Own));
    assert_eq!((v.permission, v.stop), (None, false));
    assert_eq!(v.authorities.len(), 1);
    // Plain `decide` cannot ask the lead's permissions: it denies, even below the expansion.
    let v = builder.decide(&build);
    assert_eq!(
        (v.decision(), &*v.scope, v.stage),
        (Decision::Deny, "lead", ScopeStage::AncestorDeny)
    );
    assert!(v.reason.contains("decide_with_permissions"), "{}", v.reason);
}

#[test]
fn a_childs_allow_permission_widens_its_parent_only_through_an_expansion() {
    let child_set = yes();
    let root = Scope::root("lead", policy("lead", "default = \"ask\"")).unwrap();
    let sets = |name: &str| (name != "lead").then_some(&child_set);
    let edit = call("edit", json!({"path": "/repo/a"}));
    // Stricter-of: the child's permission allows, the lead asks.
    let own = root
        .child(
            "drafter",
            ChildPolicy::Own(with_permissions(
                "drafter",
                "default = \"deny\"",
                &child_set,
            )),
        )
        .unwrap();
    let v = own.decide_with_permissions(&edit, sets).unwrap();
    assert_eq!(
        (v.decision(), &*v.scope, v.stage),
        (Decision::Ask, "lead", ScopeStage::Stricter)
    );
    assert_eq!(v.permission, None);
    // An expansion relies on its authority, and the verdict names the permission.
    let expanding = root
        .child(
            "builder",
            ChildPolicy::Expand {
                policy: with_permissions("builder", "default = \"deny\"", &child_set),
                authority: "platform".into(),
            },
        )
        .unwrap();
    let v = expanding.decide_with_permissions(&edit, sets).unwrap();
    assert_eq!((v.decision(), v.stage), (Decision::Allow, ScopeStage::Own));
    assert_eq!(v.permission.as_ref().map(|p| p.name.as_str()), Some("yes"));
    assert_eq!(v.authorities.len(), 1);
}

#[test]
fn a_missing_or_wrong_permission_set_is_an_error_not_a_verdict() {
    let lead_set = no_deploy();
    let root = lead_with(&lead_set, "default = \"allow\"");
    let child = root
        .child("c", ChildPolicy::Own(policy("c", "default = \"allow\"")))
        .unwrap();
    let build = call("build", json!({}));
    // The lead declares a permission and no set is given for it.
    assert!(matches!(
        child.decide_with_permissions(&build, |_: &str| None),
        Err(DecideError::Undeclared { .. })
    ));
    let other = yes();
    let err = child
        .decide_with_permissions(&build, |n: &str| (n == "lead").then_some(&other))
        .unwrap_err();
    assert!(matches!(err, DecideError::Undeclared { .. }), "{err}");
    // The right set for each scope decides.
    let v = child
        .decide_with_permissions(&build, |n: &str| (n == "lead").then_some(&lead_set))
        .unwrap();
    assert_eq!(v.decision(), Decision::Allow);
}

// ------------------------------------------------------------------ [scope] in files

#[test]
fn scope_tables_in_policy_files_compose_into_a_scope_set() {
    let main = loaded(
        "main",
        "id = \"main\"\ndefault = \"ask\"\nallow = [\"read\"]\ndeny = [\"bash(rm:*)\"]\n",
    );
    let reviewer = loaded(
        "reviewer",
        "default = \"deny\"\nallow = [\"read\", \"write\"]\n\n[scope]\nname = \"reviewer\"\nparent = \"main\"\n",
    );
    let drafter = loaded(
        "drafter",
        "default = \"ask\"\nallow = [\"write\"]\n\n[scope]\nname = \"drafter\"\nparent = \"reviewer\"\nexpands_parent = { authority = \"platform-team\" }\n",
    );
    let helper = loaded("helper", "[scope]\nname = \"helper\"\n");
    let set =
        ScopeSet::from_files(&[drafter, main.clone(), helper, reviewer.clone()], env()).unwrap();
    assert_eq!(set.root().name(), "main");
    assert_eq!(
        set.children().map(|s| s.name()).collect::<Vec<_>>(),
        ["drafter", "helper", "reviewer"]
    );
    let write = call("write", json!({"path": "/repo/a"}));
    let reviewer_scope = set.get("reviewer").unwrap();
    assert_eq!(reviewer_scope.parent().unwrap().name(), "main");
    let v = reviewer_scope.decide(&write);
    assert_eq!((v.decision(), &*v.scope), (Decision::Ask, "main"));
    let drafter_scope = set.get("drafter").unwrap();
    assert_eq!(drafter_scope.authority(), Some("platform-team"));
    let v = drafter_scope.decide(&write);
    assert_eq!((v.decision(), &*v.scope), (Decision::Allow, "drafter"));
    assert_eq!(&*v.authorities[0].authority, "platform-team");
    let v = drafter_scope.decide(&call("bash", json!({"command": "rm x"})));
    assert_eq!(
        (v.decision(), &*v.scope, v.stage),
        (Decision::Deny, "main", ScopeStage::AncestorDeny)
    );
    // A `[scope]` file with nothing else inherits; its parent defaults to the root.
    let helper_scope = set.get("helper").unwrap();
    assert!(helper_scope.policy().is_none());
    assert_eq!(helper_scope.decide(&write).stage, ScopeStage::Inherited);
    // The same declarations give the same digests.
    let again = ScopeSet::from_files(&[main.clone(), reviewer.clone()], env()).unwrap();
    assert_eq!(
        again.get("reviewer").unwrap().digest(),
        reviewer_scope.digest()
    );
    // Round trip: the table is written back out.
    let text = reviewer.file.write(Format::Toml).unwrap();
    assert!(text.contains("[scope]"), "{text}");
    assert_eq!(
        PolicyFile::parse(&text, Format::Toml, "r.toml").unwrap(),
        reviewer.file
    );
    let json_text = reviewer.file.write(Format::Json).unwrap();
    assert_eq!(
        PolicyFile::parse(&json_text, Format::Json, "r.json").unwrap(),
        reviewer.file
    );
}

#[test]
fn scope_tables_are_checked() {
    let main = loaded("main", "default = \"ask\"\n");
    let err = |files: &[LoadedPolicy]| ScopeSet::from_files(files, env()).unwrap_err().to_string();
    let scoped = |text: &str| loaded("child", text);
    // Unknown keys are refused by name.
    let e = LoadedPolicy::from_text(
        "default = \"ask\"\n[scope]\nname = \"x\"\nparnet = \"main\"\n".into(),
        Format::Toml,
        "x.toml",
        "x",
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("parnet") && e.contains("/scope"), "{e}");
    let e = LoadedPolicy::from_text(
        "default = \"ask\"\n[scope]\nname = \"x\"\nexpands_parent = { authorty = \"a\" }\n".into(),
        Format::Toml,
        "x.toml",
        "x",
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("authorty"), "{e}");
    // A scope file cannot be merged as a plain policy (it would widen its parent).
    let child = scoped("default = \"allow\"\n[scope]\nname = \"child\"\n");
    let e = PolicySnapshot::from_files(&[main.clone(), child.clone()], env())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("subagent scope `child`") && e.contains("child.toml:2"),
        "{e}"
    );
    // No root.
    assert!(err(std::slice::from_ref(&child)).contains("no root policy"));
    // Unknown parent, duplicate names, cycles, an expansion with nothing to expand with.
    assert!(
        err(&[
            main.clone(),
            scoped("default = \"allow\"\n[scope]\nname = \"c\"\nparent = \"nobody\"\n")
        ])
        .contains("`nobody`")
    );
    assert!(err(&[main.clone(), child.clone(), child.clone()]).contains("declared twice"));
    assert!(
        err(&[
            main.clone(),
            scoped("default = \"allow\"\n[scope]\nname = \"main\"\n")
        ])
        .contains("names the root")
    );
    let a = loaded(
        "a",
        "default = \"allow\"\n[scope]\nname = \"a\"\nparent = \"b\"\n",
    );
    let b = loaded(
        "b",
        "default = \"allow\"\n[scope]\nname = \"b\"\nparent = \"a\"\n",
    );
    assert!(err(&[main.clone(), a, b]).contains("its own ancestor"));
    assert!(
        err(&[
            main.clone(),
            scoped("[scope]\nname = \"c\"\nexpands_parent = { authority = \"x\" }\n")
        ])
        .contains("no policy of its own")
    );
    assert!(err(&[main.clone(), scoped("default = \"allow\"\n[scope]\nname = \"c\"\nexpands_parent = { authority = \"\" }\n")]).contains("authority"));
    // A scope file's own policy must build (a default is still required).
    assert!(
        err(&[
            main.clone(),
            scoped("allow = [\"read\"]\n[scope]\nname = \"c\"\n")
        ])
        .contains("no `default`")
    );
}

// ------------------------------------------------------------------ alpineagents reference

/// Runs a child's calls as alpineagents' `subagent_run` cases do and returns what ran
/// (`tool value`), in call order.
fn ran(scope: &Scope, calls: &Value) -> Vec<String> {
    calls
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| {
            let tool = c["name"].as_str().unwrap();
            let v = scope.decide(&call(tool, c["args"].clone()));
            let first = c["args"]
                .get("command")
                .or_else(|| c["args"].get("path"))
                .unwrap();
            (v.decision() == Decision::Allow).then(|| format!("{tool} {}", first.as_str().unwrap()))
        })
        .collect()
}

/// The alpineagents permission lists of the subagent cases, as Warden policies: a
/// `DenyByName` is a deny rule, an `AllowByName` an allow rule, `AllowByDefault()` last the
/// default allow; a list that decides nothing denies (default deny), and `None` (no checks) is
/// a policy that allows everything.
fn as_policy(list: &str) -> Option<&'static str> {
    Some(match list {
        "[DenyByName([\"bash\"]), AllowByName([\"helper\",\"read_file\"])]" => {
            "default = \"deny\"\ndeny = [\"bash\"]\nallow = [\"helper\", \"read_file\"]"
        }
        "[DenyByName([\"bash\"]), AllowByDefault()]" => "default = \"allow\"\ndeny = [\"bash\"]",
        "[AllowByDefault()]" => "default = \"allow\"",
        "[AllowByName([\"helper\",\"read_file\"])]" => {
            "default = \"deny\"\nallow = [\"helper\", \"read_file\"]"
        }
        "[AllowByName([\"write_file\"])]" => "default = \"deny\"\nallow = [\"write_file\"]",
        "[]" => "default = \"deny\"",
        "[DenyByName([\"write_file\"]), AllowByDefault()]" => {
            "default = \"allow\"\ndeny = [\"write_file\"]"
        }
        _ => return None,
    })
}

#[test]
fn alpineagents_subagent_reference_cases() {
    let cases: Vec<Value> = reference()
        .into_iter()
        .filter(|c| matches!(c["kind"].as_str(), Some("subagent_run" | "subagent_rules")))
        .collect();
    assert_eq!(cases.len(), 9);
    let mut ran_cases = BTreeSet::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap_or("subagent_rules");
        match name {
            "three levels: deny permissions asked top run first" => {
                three_levels();
            }
            "subagent stopped by permission" => {
                // Discussed in docs/policy.md ("Scopes and the alpineagents reference"): the
                // text the parent sees for a stopped subagent is the runtime's, and a
                // permission's stop flag is tested with permissions.
                assert_eq!(
                    case["expect"]["parent_tool_result_for_helper"],
                    "(helper was stopped by the user: no way)"
                );
            }
            "subagent_rules" => subagent_rules(&case["expect"]),
            _ => {
                let parent_list = case["parent_permissions"].as_str().unwrap();
                let child_list = case["child_permissions"].as_str().unwrap();
                let parent = match parent_list {
                    "None" => policy("parent", "default = \"allow\""),
                    list => policy(
                        "parent",
                        as_policy(list).unwrap_or_else(|| panic!("{name}: {list}")),
                    ),
                };
                let root = Scope::root("parent", parent).unwrap();
                let want: Vec<String> = {
                    let mut w: Vec<String> = case["expect"]["ran_in_child"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|s| s.as_str().unwrap().to_owned())
                        .collect();
                    w.sort();
                    w
                };
                let sorted = |mut v: Vec<String>| {
                    v.sort();
                    v
                };
                let calls = &case["child_calls"];
                match child_list {
                    "(not given)" | "None" => {
                        let child = root.child("helper", ChildPolicy::Inherit).unwrap();
                        assert_eq!(sorted(ran(&child, calls)), want, "{name}");
                    }
                    list => {
                        let own = policy(
                            "helper",
                            as_policy(list).unwrap_or_else(|| panic!("{name}: {list}")),
                        );
                        // alpineagents' own-list semantics: replacement, under a named authority.
                        let expand = root
                            .child(
                                "helper",
                                ChildPolicy::Expand {
                                    policy: own.clone(),
                                    authority: "alpineagents".into(),
                                },
                            )
                            .unwrap();
                        assert_eq!(sorted(ran(&expand, calls)), want, "{name} (expands_parent)");
                        // Warden's default: stricter-of. It differs only where the child
                        // allows what the parent's allow list or default refuses.
                        let strict = root.child("helper", ChildPolicy::Own(own)).unwrap();
                        let strict_ran = sorted(ran(&strict, calls));
                        if name.contains("parent's allow/decide permissions do not apply") {
                            assert_eq!(strict_ran, Vec::<String>::new(), "{name} (stricter-of)");
                            let v = strict
                                .decide(&call("write_file", json!({"path": "w", "content": "x"})));
                            assert_eq!((&*v.scope, v.stage), ("parent", ScopeStage::Stricter));
                            let v = expand
                                .decide(&call("write_file", json!({"path": "w", "content": "x"})));
                            assert_eq!(&*v.authorities[0].authority, "alpineagents");
                        } else {
                            assert_eq!(strict_ran, want, "{name} (stricter-of)");
                        }
                    }
                }
            }
        }
        ran_cases.insert(name.to_owned());
    }
    assert_eq!(ran_cases.len(), 9, "{ran_cases:?}");
}

/// `three levels`: the deny rules of the runs above are asked top run first. Rules are pure
/// (nothing records who was asked), so the observable order is which scope a denial names.
fn three_levels() {
    let scopes = |parent_denies: bool, child_denies: bool| {
        let deny = |yes: bool| {
            if yes {
                "default = \"allow\"\ndeny = [\"w\"]"
            } else {
                "default = \"allow\""
            }
        };
        let parent = Scope::root("parent", policy("parent", deny(parent_denies))).unwrap();
        let child = parent
            .child(
                "child",
                ChildPolicy::Own(policy("child", deny(child_denies))),
            )
            .unwrap();
        child
            .child(
                "grand",
                ChildPolicy::Own(policy("grand", "default = \"allow\"\ndeny = [\"w\"]")),
            )
            .unwrap()
    };
    let w = call("w", json!({"x": 1}));
    let v = scopes(true, true).decide(&w);
    assert_eq!((&*v.scope, v.stage), ("parent", ScopeStage::AncestorDeny));
    let v = scopes(false, true).decide(&w);
    assert_eq!((&*v.scope, v.stage), ("child", ScopeStage::AncestorDeny));
    let v = scopes(false, false).decide(&w);
    assert_eq!((&*v.scope, v.stage), ("grand", ScopeStage::Own));
}

/// `subagent_rules`: the rules alpineagents' docstrings state, where Warden has them.
fn subagent_rules(expect: &Value) {
    let parent = Scope::root(
        "lead",
        policy(
            "lead",
            "default = \"deny\"\ndeny = [\"delete_*\"]\nallow = [\"read_file\"]",
        ),
    )
    .unwrap();
    let read = call("read_file", json!({"path": "a"}));
    let delete = call("delete_file", json!({"path": "a"}));
    let write = call("write_file", json!({"path": "a"}));
    // "child permissions not given (or None)": the parent's whole effective list.
    says(
        expect,
        "child permissions not given (or None)",
        "whole effective list",
    );
    let heir = parent.child("editor", ChildPolicy::Inherit).unwrap();
    assert_eq!(heir.decide(&read).decision(), Decision::Allow);
    assert_eq!(heir.decide(&write).decision(), Decision::Deny);
    // "child has own list": the parent's denials (top run first), then the child's own list;
    // the parent's allow permissions are not asked.
    says(expect, "child has own list", "NOT asked");
    let own = parent
        .child(
            "drafter",
            expand(
                "drafter",
                "default = \"deny\"\nallow = [\"write_file\", \"delete_file\"]",
                "lead",
            ),
        )
        .unwrap();
    assert_eq!(own.decide(&delete).stage, ScopeStage::AncestorDeny);
    assert_eq!(own.decide(&write).decision(), Decision::Allow);
    assert_eq!(own.decide(&read).decision(), Decision::Deny);
    // "another Agent … with no list of its own: denials then an implicit AllowByDefault": an
    // expanding scope whose policy allows everything.
    says(
        expect,
        "another Agent checking/running inside a subagent's run",
        "implicit AllowByDefault",
    );
    let other = own
        .child("other", expand("other", "default = \"allow\"", "lead"))
        .unwrap();
    assert_eq!(other.decide(&delete).decision(), Decision::Deny);
    assert_eq!(other.decide(&read).decision(), Decision::Allow);
    // "human asked by DecideByHuman" and "StoppedByPermission in a subagent" are the
    // runtime's (docs/policy.md).
    assert!(expect.get("human asked by DecideByHuman").is_some());
    assert!(expect.get("StoppedByPermission in a subagent").is_some());
}

// ------------------------------------------------------------------ property

const DENY_POOL: &[&str] = &[
    "bash(rm:*)",
    "bash",
    "bash(git push:*)",
    "read(/etc/**)",
    "read(.env)",
    "write",
    "web_fetch(domain:evil.com)",
    "mcp__*",
];
const ASK_POOL: &[&str] = &[
    "bash(git:*)",
    "write(/repo/src/**)",
    "read(.env)",
    "web_fetch",
];
const ALLOW_POOL: &[&str] = &[
    "bash",
    "bash(rm:*)",
    "bash(git:*)",
    "read",
    "write",
    "web_fetch",
    "mcp__srv__tool",
];

fn calls() -> Vec<Call> {
    let bash = |c: &str| call("bash", json!({"command": c}));
    vec![
        bash("rm -rf /"),
        bash("git status"),
        bash("git push origin main"),
        bash("ls | xargs rm"),
        bash("$CMD x"),
        bash("echo hi > /etc/passwd"),
        bash("bash -c 'rm x'"),
        bash("echo 'unterminated"),
        bash("ls"),
        call("read", json!({"path": "/etc/passwd"})),
        call("read", json!({"path": "/repo/.env"})),
        call("read", json!({"file": "/repo/.env"})),
        call("write", json!({"path": "/repo/src/a.rs"})),
        call("web_fetch", json!({"url": "https://evil.com/x"})),
        call("web_fetch", json!({"url": "https://ok.com/x"})),
        call("mcp__srv__tool", json!({})),
    ]
}

#[derive(Debug, Clone)]
struct Level {
    deny: Vec<&'static str>,
    ask: Vec<&'static str>,
    allow: Vec<&'static str>,
    default: Decision,
    /// 0: own (stricter-of), 1: expands, 2: inherits.
    mode: u8,
}

fn toml_list(rules: &[&str]) -> String {
    let quoted: Vec<String> = rules.iter().map(|r| format!("{r:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

impl Level {
    fn toml(&self) -> String {
        format!(
            "default = \"{}\"\ndeny = {}\nask = {}\nallow = {}\n",
            self.default,
            toml_list(&self.deny),
            toml_list(&self.ask),
            toml_list(&self.allow)
        )
    }
    /// This level's deny rules alone, with nothing else deciding.
    fn deny_only(&self) -> String {
        format!("default = \"allow\"\ndeny = {}\n", toml_list(&self.deny))
    }
}

fn level() -> impl Strategy<Value = Level> {
    let pick = |pool: &'static [&'static str]| proptest::sample::subsequence(pool, 0..=3);
    (
        pick(DENY_POOL),
        pick(ASK_POOL),
        pick(ALLOW_POOL),
        prop_oneof![
            Just(Decision::Allow),
            Just(Decision::Ask),
            Just(Decision::Deny)
        ],
        0u8..3,
    )
        .prop_map(|(deny, ask, allow, default, mode)| Level {
            deny,
            ask,
            allow,
            default,
            mode,
        })
}

proptest! {
    #![proptest_config(crate::config())]

    /// A child scope never allows what an ancestor's deny rules deny: the outermost ancestor
    /// whose deny rules (alone) deny the call decides, and is named.
    #[test]
    fn a_child_never_allows_what_an_ancestors_deny_rules_deny(levels in proptest::collection::vec(level(), 2..=4)) {
        let mut scope = Scope::root("s0", policy("s0", &levels[0].toml())).unwrap();
        let mut has_policy = vec![true];
        for (i, l) in levels.iter().enumerate().skip(1) {
            let name = format!("s{i}");
            let own = policy(&name, &l.toml());
            let child = match l.mode {
                0 => ChildPolicy::Own(own),
                1 => ChildPolicy::Expand { policy: own, authority: "auth".into() },
                _ => ChildPolicy::Inherit,
            };
            has_policy.push(l.mode != 2);
            scope = scope.child(name, child).unwrap();
        }
        let n = levels.len() - 1;
        let oracles: Vec<Option<Arc<PolicySnapshot>>> = levels
            .iter()
            .enumerate()
            .map(|(i, l)| has_policy[i].then(|| policy(&format!("s{i}"), &l.deny_only())))
            .collect();
        let no_expansion = levels.iter().skip(1).all(|l| l.mode != 1);
        for c in calls() {
            let v = scope.decide(&c);
            let denier = oracles[..n]
                .iter()
                .position(|o| o.as_ref().is_some_and(|o| o.decide(&c).decision == Decision::Deny));
            match denier {
                Some(i) => {
                    prop_assert_eq!(v.decision(), Decision::Deny, "{:?}: {}", c, v.reason);
                    prop_assert_eq!(v.stage, ScopeStage::AncestorDeny);
                    let want = format!("s{i}");
                    prop_assert_eq!(&*v.scope, want.as_str());
                    prop_assert!(v.authorities.is_empty());
                }
                None => prop_assert_ne!(v.stage, ScopeStage::AncestorDeny, "{:?}", c),
            }
            // Without expansions, a scope is never looser than any scope above it.
            if no_expansion {
                for (i, l) in levels.iter().enumerate() {
                    if has_policy[i] {
                        let own = policy(&format!("s{i}"), &l.toml()).decide(&c).decision;
                        prop_assert!(v.decision() >= own, "{:?}: s{} says {}, the scope {}", c, i, own, v.decision());
                    }
                }
                prop_assert!(v.authorities.is_empty());
            }
        }
    }
}
