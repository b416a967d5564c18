//! Who a policy file speaks for: the loader assigns each file a role (managed, project, user,
//! untrusted); a file's own `[source]` may only lower its standing within that role. A lower
//! role can neither cancel nor outrank a managed file's rules — by carve-out, rank, grant or
//! preset, in either order — and the files Warden relies on are protected from the agent.

use serde_json::json;
use warden_policy::*;

const MANAGED: &str = "default = \"ask\"\ndeny = [\"bash(rm:*)\"]\nask = [\"bash(git push:*)\"]\n";

/// The repository file of the attack: a carve-out of the managed deny, and an allow.
const REPO: &str = "default = \"allow\"\nallow = [\"bash\"]\ndeny = [\"bash(!rm:*)\"]\n";

fn file(text: &str, name: &str, role: Role) -> LoadedPolicy {
    LoadedPolicy::from_text(
        text.into(),
        Format::Toml,
        &format!("{name}.toml"),
        name,
        None,
    )
    .unwrap()
    .with_role(role)
}

fn env() -> PathEnv {
    PathEnv {
        project_root: "/repo".into(),
        home: None,
    }
}

fn compile(files: &[LoadedPolicy]) -> Result<PolicySnapshot, PolicyError> {
    PolicySnapshot::from_files(files, env())
}

fn bash(s: &PolicySnapshot, command: &str) -> Verdict {
    s.decide(&Call::new("bash", json!({ "command": command })).with_cwd("/repo"))
}

#[test]
fn a_lower_role_cannot_carve_out_a_managed_deny_in_either_order() {
    for role in [Role::Project, Role::User, Role::Untrusted] {
        let managed = file(MANAGED, "managed", Role::Managed);
        // An untrusted file may not set `default = "allow"` at all (refused below).
        let text = match role {
            Role::Untrusted => REPO.replace("default = \"allow\"\n", ""),
            _ => REPO.to_owned(),
        };
        let repo = file(&text, "repo", role);
        for files in [
            vec![managed.clone(), repo.clone()],
            vec![repo.clone(), managed.clone()],
        ] {
            let s = compile(&files).unwrap();
            let v = bash(&s, "rm -rf /repo/src");
            assert_eq!(v.decision, Decision::Deny, "{role}: {}", v.reason);
            assert_eq!(v.source.as_deref(), Some("managed"), "{role}");
        }
    }
}

#[test]
fn the_same_files_loaded_as_peers_behave_as_before() {
    // Loaded as one role, the repository file's carve-out reaches only its own rules: a tie
    // between two files never lets one file's carve-out reach the other's.
    let s = compile(&[
        file(MANAGED, "managed", Role::Project),
        file(REPO, "repo", Role::Project),
    ])
    .unwrap();
    assert_eq!(bash(&s, "rm -rf /repo/src").decision, Decision::Deny);
    // Within one file, a carve-out still reaches that file's rules.
    let own =
        "default = \"ask\"\ndeny = [\"bash(rm:*)\", \"bash(!rm -i:*)\"]\nallow = [\"bash\"]\n";
    let s = compile(&[file(own, "own", Role::Project)]).unwrap();
    assert_eq!(bash(&s, "rm -i x").decision, Decision::Allow);
    assert_eq!(bash(&s, "rm x").decision, Decision::Deny);
}

#[test]
fn a_file_may_only_lower_its_rank() {
    for text in [
        "default = \"ask\"\n[source]\nrank = 1\n",
        "default = \"ask\"\n[[sources]]\nname = \"x\"\nrank = 9007199254740991\ntrusted = true\n",
    ] {
        let e = compile(&[file(text, "repo", Role::Project)]).unwrap_err();
        let message = e.to_string();
        assert!(
            message.contains("may only lower its standing") && message.contains("repo.toml"),
            "{message}"
        );
    }
    // A negative rank places a file below its role's other files, never below the range a
    // policy holds exactly.
    let low = "default = \"ask\"\n[source]\nrank = -9007199254740992\n";
    let e = compile(&[file(low, "repo", Role::Project)]).unwrap_err();
    assert!(e.to_string().contains("below the lowest rank"), "{e}");
    let fine = "default = \"ask\"\n[source]\nrank = -5\n";
    assert!(compile(&[file(fine, "repo", Role::Project)]).is_ok());
}

#[test]
fn extreme_ranks_never_lift_a_lower_role() {
    // Through the library a source may take any exact rank; the role still decides.
    let s = PolicyBuilder::new()
        .default(Decision::Allow)
        .source(
            Source::trusted("managed")
                .with_role(Role::Managed)
                .with_rank(-MAX_RANK),
            RuleSet {
                deny: Rule::parse_list("bash(rm:*)").unwrap(),
                ..RuleSet::default()
            },
        )
        .source(
            Source::trusted("project").with_rank(MAX_RANK),
            RuleSet {
                deny: Rule::parse_list("bash(!rm:*)").unwrap(),
                allow: Rule::parse_list("bash").unwrap(),
                ..RuleSet::default()
            },
        )
        .build()
        .unwrap();
    assert_eq!(bash(&s, "rm x").decision, Decision::Deny);
    // A rank a canonical JSON number cannot hold exactly is refused, not compiled.
    let e = PolicyBuilder::new()
        .default(Decision::Allow)
        .source(
            Source::trusted("huge").with_rank(i64::MAX),
            RuleSet::default(),
        )
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("beyond the ranks"), "{e}");
}

#[test]
fn a_lower_role_grant_cannot_remove_a_managed_ask() {
    let s = compile(&[file(MANAGED, "managed", Role::Managed)]).unwrap();
    let v = bash(&s, "git push origin main");
    assert_eq!(v.decision, Decision::Ask);
    let rule = Rule::parse("bash(git push:*)").unwrap();
    let refused = s
        .grant_over(&v, &rule, &Source::trusted("session").with_rank(MAX_RANK))
        .unwrap_err();
    assert!(
        refused.reason.contains("outranks the grant"),
        "{}",
        refused.reason
    );
    // A managed-role grant may.
    let (granted, _) = s
        .grant_over(
            &v,
            &rule,
            &Source::trusted("admin").with_role(Role::Managed),
        )
        .unwrap();
    assert_eq!(
        bash(&granted, "git push origin main").decision,
        Decision::Allow
    );
}

#[test]
fn a_managed_preset_cannot_be_carved_out_by_a_lower_role() {
    let managed = file("preset = \"safe\"\n", "managed", Role::Managed);
    let repo = file(
        "default = \"allow\"\nallow = [\"bash\"]\ndeny = [\"bash(!sudo:*)\"]\n",
        "repo",
        Role::Project,
    );
    let s = compile(&[repo.clone(), managed]).unwrap();
    let v = bash(&s, "sudo ls");
    assert_eq!(v.decision, Decision::Deny, "{}", v.reason);
    assert_eq!(v.source.as_deref(), Some("preset:safe"));
    // The same preset named by the project file itself can be carved out by it.
    let own = file(
        "preset = \"safe\"\nallow = [\"bash\"]\ndeny = [\"bash(!sudo:*)\"]\n",
        "own",
        Role::Project,
    );
    let s = compile(&[own]).unwrap();
    assert_eq!(bash(&s, "sudo ls").decision, Decision::Allow);
}

#[test]
fn an_untrusted_file_only_adds_deny_and_ask_rules() {
    let managed = file("default = \"allow\"\n", "managed", Role::Managed);
    let repo = file(
        "deny = [\"bash(curl:*)\"]\nallow = [\"bash\"]\n[[sources]]\nname = \"claims\"\ntrusted = true\nallow = [\"read\"]\n",
        "repo",
        Role::Untrusted,
    );
    let s = compile(&[managed.clone(), repo]).unwrap();
    assert_eq!(bash(&s, "curl x").decision, Decision::Deny);
    for name in ["repo", "claims"] {
        let info = s.sources().iter().find(|i| i.name == name).unwrap();
        assert!(!info.trusted, "{name} claims trust it was not given");
        assert_eq!(info.role, Role::Untrusted);
    }
    // Tables that could widen what is allowed are refused by name, never ignored.
    for (text, key) in [
        ("default = \"allow\"\n", "default"),
        ("preset = \"allow_all\"\n", "preset"),
        (
            "[tools.bash]\nmatch = \"prefix\"\nfield = \"command\"\n",
            "tools",
        ),
        ("[hints]\nread_only = \"allow\"\n", "hints"),
        ("[paths]\ncase_insensitive = true\n", "paths"),
    ] {
        let e = compile(&[managed.clone(), file(text, "repo", Role::Untrusted)]).unwrap_err();
        assert!(
            e.to_string().contains(&format!("`{key}` could widen")),
            "{key}: {e}"
        );
    }
}

#[test]
fn the_strictest_default_counts_a_presets_implied_default() {
    let preset = file("preset = \"read_only\"\n", "org", Role::Managed);
    let loose = file("default = \"allow\"\n", "repo", Role::Project);
    for files in [
        vec![preset.clone(), loose.clone()],
        vec![loose.clone(), preset.clone()],
    ] {
        let s = compile(&files).unwrap();
        assert_eq!(s.default_decision(), Decision::Deny);
        let origin = s.default_origin();
        assert_eq!(
            (origin.file.as_str(), origin.preset),
            ("org.toml", Some(Preset::ReadOnly))
        );
        let v = s.decide(&Call::new("mcp__db__drop", json!({})));
        assert_eq!(v.decision, Decision::Deny, "{}", v.reason);
    }
    // Within one file, its own `default` still overrides its preset's.
    let own = file(
        "preset = \"read_only\"\ndefault = \"ask\"\n",
        "own",
        Role::Project,
    );
    let s = compile(&[own]).unwrap();
    assert_eq!(s.default_decision(), Decision::Ask);
    assert_eq!(s.default_origin().preset, None);
}

mod protection {
    use super::*;

    fn write(s: &PolicySnapshot, tool: &str, path: &str) -> Verdict {
        let mut call = Call::new(tool, json!({ "path": path })).with_cwd("/repo");
        edge::resolve_call_paths(s, &mut call);
        s.decide(&call)
    }

    #[test]
    fn writes_to_a_loaded_policy_file_are_denied_whatever_the_rules_say() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let path = root.join("policy.toml");
        std::fs::write(&path, "default = \"allow\"\nallow = [\"edit\", \"bash\"]\n").unwrap();
        std::os::unix::fs::symlink(&path, root.join("link")).unwrap();
        let s = PolicySnapshot::from_files(
            &[LoadedPolicy::read(&path).unwrap()],
            PathEnv {
                project_root: root.clone(),
                home: None,
            },
        )
        .unwrap();
        let target = path.display().to_string();
        let link = root.join("link").display().to_string();
        for tool in ["write", "edit"] {
            for p in [&target, &link] {
                let v = write(&s, tool, p);
                assert_eq!(v.decision, Decision::Deny, "{tool} {p}: {}", v.reason);
                assert!(
                    v.reason.contains("protects from the governed agent"),
                    "{}",
                    v.reason
                );
                assert_eq!(v.rule, None);
            }
        }
        let shell = |command: &str| {
            let mut call = Call::new("bash", json!({ "command": command })).with_cwd(root.clone());
            edge::resolve_call_paths(&s, &mut call);
            s.decide(&call)
        };
        for command in [
            "echo x > policy.toml",
            "echo x >> ./link",
            "rm policy.toml",
            "cp /tmp/x policy.toml",
            "sed -i s/deny/allow/ policy.toml",
            "some-tool --config=policy.toml",
        ] {
            let v = shell(command);
            assert_eq!(v.decision, Decision::Deny, "{command}: {}", v.reason);
        }
        for command in [
            "cat policy.toml",
            "grep deny policy.toml",
            "echo x > other.txt",
        ] {
            assert_eq!(shell(command).decision, Decision::Allow, "{command}");
        }
        // Another file is written as the rules say.
        assert_eq!(
            write(&s, "write", &root.join("src.rs").display().to_string()).decision,
            Decision::Allow
        );
    }

    #[test]
    fn a_runtime_protects_its_evidence_and_journal_too() {
        let s = PolicyBuilder::new()
            .default(Decision::Allow)
            .protect("/var/lib/warden/evidence.db", "the evidence store")
            .protect("/var/lib/warden/journal.db", "the hook's journal")
            .build()
            .unwrap();
        let v = write(&s, "write", "/var/lib/warden/evidence.db");
        assert!(v.reason.contains("the evidence store"), "{}", v.reason);
        assert_eq!(
            write(&s, "edit", "/var/lib/warden/../warden/journal.db").decision,
            Decision::Deny
        );
        assert_eq!(
            s.protected().len(),
            2,
            "a path that does not exist has one form"
        );
        let v = bash(&s, "truncate -s0 /var/lib/warden/journal.db");
        assert_eq!(v.decision, Decision::Deny, "{}", v.reason);
        // The digest covers semantics, not where the runtime keeps its files.
        let plain = PolicyBuilder::new()
            .default(Decision::Allow)
            .build()
            .unwrap();
        assert_eq!(plain.digest(), s.digest());
    }
}
