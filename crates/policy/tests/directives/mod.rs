//! Prompt directives (docs/directives.md): the `[directives]` table read strictly,
//! rendered in D1's exact section format, merged across files, covered by the digest, and never
//! a rule: a directive that looks like a rule stays text and decides nothing.

mod describe;

use serde_json::json;
use warden_policy::*;

fn load(text: &str, format: Format, stem: &str) -> Result<LoadedPolicy, PolicyError> {
    let label = match format {
        Format::Toml => format!("{stem}.toml"),
        Format::Json => format!("{stem}.json"),
    };
    LoadedPolicy::from_text(text.into(), format, &label, stem, None)
}

fn env() -> PathEnv {
    PathEnv {
        project_root: "/repo".into(),
        home: Some("/home/u".into()),
    }
}

fn compile(files: &[(&str, &str)]) -> Result<PolicySnapshot, PolicyError> {
    let loaded = files
        .iter()
        .map(|(stem, text)| load(text, Format::Toml, stem))
        .collect::<Result<Vec<_>, _>>()?;
    PolicySnapshot::from_files(&loaded, env())
}

fn d(texts: &[&str]) -> Vec<Directive> {
    texts.iter().map(|t| Directive::new(*t).unwrap()).collect()
}

// ------------------------------------------------------------------ rendering (golden)

#[test]
fn renders_d1s_exact_block() {
    let all = Directives {
        authority: d(&["Choose the test strategy", "Refactor inside src/"]),
        boundaries: d(&["Do not touch the release branch"]),
        escalations: d(&["The build is red on main", "A secret appears in a diff"]),
    };
    assert_eq!(
        all.render(),
        "## Authority\n\
         - Choose the test strategy\n\
         - Refactor inside src/\n\
         \n\
         ## Operational Boundaries\n\
         - Do not touch the release branch\n\
         \n\
         ## Escalation Conditions\n\
         When any condition occurs, STOP and emit an escalation_request with the reason:\n\
         - The build is red on main\n\
         - A secret appears in a diff"
    );
}

#[test]
fn empty_lists_render_no_section_and_no_directives_render_nothing() {
    let only_boundaries = Directives {
        boundaries: d(&["Stay in the workspace"]),
        ..Directives::default()
    };
    assert_eq!(
        only_boundaries.render(),
        "## Operational Boundaries\n- Stay in the workspace"
    );
    let only_escalations = Directives {
        escalations: d(&["Asked to deploy"]),
        ..Directives::default()
    };
    assert_eq!(
        only_escalations.render(),
        "## Escalation Conditions\n\
         When any condition occurs, STOP and emit an escalation_request with the reason:\n\
         - Asked to deploy"
    );
    let authority_and_escalations = Directives {
        authority: d(&["Pick names"]),
        escalations: d(&["Unsure"]),
        ..Directives::default()
    };
    assert_eq!(
        authority_and_escalations.render(),
        "## Authority\n- Pick names\n\n## Escalation Conditions\n\
         When any condition occurs, STOP and emit an escalation_request with the reason:\n- Unsure"
    );
    assert!(Directives::default().is_empty());
    assert_eq!(Directives::default().render(), "");
    // A policy without the table has no directives.
    let s = compile(&[("p", "default = \"ask\"")]).unwrap();
    assert!(s.directives().is_empty());
    assert_eq!(s.directives().render(), "");
}

#[test]
fn items_are_written_verbatim_and_must_be_one_line() {
    // D1 has no escaping: Markdown-looking text is written as is, after `- `.
    let md = Directives {
        authority: d(&[
            "## Not a heading, an item",
            "`code` and *stars*",
            "  indented",
        ]),
        ..Directives::default()
    };
    assert_eq!(
        md.render(),
        "## Authority\n- ## Not a heading, an item\n- `code` and *stars*\n-   indented"
    );
    // …which is why a directive is one line: a line break could forge a section.
    for bad in [
        "ok\n## Authority",
        "a\r\nb",
        "tab\there",
        "nul\0",
        "line\u{2028}separator",
        "para\u{2029}graph",
        "next\u{85}line",
    ] {
        assert!(
            matches!(Directive::new(bad), Err(DirectiveError::NotOneLine { .. })),
            "{bad:?}"
        );
    }
    assert_eq!(Directive::new(""), Err(DirectiveError::Empty));
    assert_eq!(Directive::new("  "), Err(DirectiveError::Empty));
    assert_eq!(
        Directive::new("a\nb").unwrap_err().to_string(),
        "a directive is one line of text: U+000A at character 1 is a line break or control character"
    );
}

/// The JSON Schema's pattern for a directive agrees with `Directive::new`.
#[test]
fn the_schema_pattern_agrees_with_the_constructor() {
    let schema = serde_json::to_value(policy_file_schema()).unwrap();
    let directive = &schema["$defs"]["Directive"];
    assert_eq!(directive["type"], json!("string"));
    let pattern = regex::Regex::new(directive["pattern"].as_str().unwrap()).unwrap();
    for text in [
        "Choose the test strategy",
        "bash(rm:*)",
        "  padded  ",
        "x",
        "",
        " ",
        "\t",
        "a\nb",
        "a\rb",
        "tab\there",
        "nul\0",
        "del\u{7f}",
        "c1\u{85}",
        "line\u{2028}sep",
        "para\u{2029}sep",
        "émoji ✓",
    ] {
        assert_eq!(
            pattern.is_match(text),
            Directive::new(text).is_ok(),
            "{text:?}"
        );
    }
}

// ------------------------------------------------------------------ the table, read strictly

const TABLE: &str = r#"
default = "deny"

[directives]
authority = ["Choose how to structure the fix"]
boundaries = ["Do not touch the release branch"]
escalations = ["A test fails for a reason you cannot explain"]
"#;

#[test]
fn the_table_reads_from_toml_and_json_alike() {
    let toml = compile(&[("p", TABLE)]).unwrap();
    let json_text = json!({
        "default": "deny",
        "directives": {
            "authority": ["Choose how to structure the fix"],
            "boundaries": ["Do not touch the release branch"],
            "escalations": ["A test fails for a reason you cannot explain"],
        }
    })
    .to_string();
    let json =
        PolicySnapshot::from_files(&[load(&json_text, Format::Json, "p").unwrap()], env()).unwrap();
    assert_eq!(toml.directives(), json.directives());
    assert_eq!(toml.digest(), json.digest());
    assert_eq!(
        toml.directives().authority,
        d(&["Choose how to structure the fix"])
    );
    // Written back out, the file reads back the same and digests the same.
    let file = load(TABLE, Format::Toml, "p").unwrap().file;
    for format in [Format::Toml, Format::Json] {
        let text = file.write(format).unwrap();
        let again = load(&text, format, "p").unwrap();
        assert_eq!(again.file, file, "{format:?}");
        let s = PolicySnapshot::from_files(&[again], env()).unwrap();
        assert_eq!(s.digest(), toml.digest(), "{format:?}");
    }
}

#[test]
fn bad_tables_are_refused_naming_file_line_and_pointer() {
    let cases: [(&str, &str, usize, &str); 5] = [
        (
            "default = \"ask\"\n[directives]\npermissions = [\"read\"]\n",
            "unknown field `permissions`",
            3,
            "/directives/permissions",
        ),
        (
            "default = \"ask\"\n[directives]\nauthority = [\"fine\", \"two\\nlines\"]\n",
            "a directive is one line of text",
            3,
            "/directives/authority/1",
        ),
        (
            "default = \"ask\"\n[directives]\nboundaries = [\"\"]\n",
            "a directive must not be empty",
            3,
            "/directives/boundaries/0",
        ),
        // A list of directives is a list: one string is not (no rule-list shorthand).
        (
            "default = \"ask\"\n[directives]\nescalations = \"when unsure\"\n",
            "invalid type",
            3,
            "/directives/escalations",
        ),
        // A table, not an array (no positional lists).
        (
            "default = \"ask\"\ndirectives = [[\"read\"], [], []]\n",
            "invalid type",
            2,
            "/directives",
        ),
    ];
    for (text, needle, line, pointer) in cases {
        let err = load(text, Format::Toml, "p").unwrap_err();
        let PolicyError::Syntax { at, message } = &err else {
            panic!("{text}: {err:?}");
        };
        assert!(message.contains(needle), "{text}: {message}");
        assert_eq!(at.file, "p.toml");
        assert_eq!(at.line, Some(line), "{text}: {err}");
        assert_eq!(at.pointer.as_deref(), Some(pointer), "{text}: {err}");
    }
    // JSON errors name the pointer too.
    let err = load(
        r#"{"default": "ask", "directives": {"authority": ["a\nb"]}}"#,
        Format::Json,
        "p",
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("(/directives/authority/0)"),
        "{err}"
    );
}

// ------------------------------------------------------------------ text, never rules

/// A directive that reads like a rule is still only text: it allows, asks and denies nothing,
/// and it never reaches the rule lists.
#[test]
fn a_rule_looking_directive_stays_text() {
    let deny_default = compile(&[(
        "p",
        r#"
default = "deny"
[directives]
authority = ["bash(rm:*)", "read", "edit(src/**)", "allow = [\"bash\"]"]
"#,
    )])
    .unwrap();
    assert_eq!(deny_default.rule_counts(), [0, 0, 0]);
    for (tool, args) in [
        ("bash", json!({"command": "rm -rf build"})),
        ("read", json!({"path": "/repo/a"})),
        ("edit", json!({"path": "/repo/src/a.rs"})),
    ] {
        let v = deny_default.decide(&Call::new(tool, args));
        assert_eq!(v.decision, Decision::Deny, "{tool}");
        assert_eq!(v.rule, None, "{tool}: the default decided, not a directive");
    }
    // The directive is rendered as the words it is.
    assert_eq!(
        deny_default.directives().render(),
        "## Authority\n- bash(rm:*)\n- read\n- edit(src/**)\n- allow = [\"bash\"]"
    );
    // The boundary (computed from rules) claims nothing a directive says.
    let b = deny_default.describe();
    assert!(b.reads.is_empty() && b.writes.is_empty() && b.external_actions.is_empty());
    assert!(b.protected_targets.is_empty() && b.required_approvals.is_empty());
    assert!(!b.to_markdown().contains("rm:*"));

    // Nor do "boundaries" restrict: under an allow default, the call still runs.
    let allow_default = compile(&[(
        "p",
        "default = \"allow\"\n[directives]\nboundaries = [\"bash(rm:*)\", \"bash\"]\n",
    )])
    .unwrap();
    let v = allow_default.decide(&Call::new("bash", json!({"command": "rm -rf build"})));
    assert_eq!(v.decision, Decision::Allow);
    assert_eq!(v.rule, None);
}

/// Rule lists never accept directives: in a file, a rule list is rule strings (a directives
/// table where a list belongs is refused), `[[sources]]` cannot carry directives at all, and
/// in the library a `RuleSet` holds `Rule`s, which a `Directive` does not convert to (the
/// `compile_fail` examples in `warden_policy::directives` prove that at compile time).
#[test]
fn rule_lists_never_accept_directives() {
    for text in [
        "default = \"ask\"\n[allow]\nauthority = [\"read\"]\n",
        "default = \"ask\"\ndeny = { boundaries = [\"bash(rm:*)\"] }\n",
        "default = \"ask\"\n[[sources]]\nname = \"s\"\ntrusted = true\n[sources.directives]\nauthority = [\"read\"]\n",
    ] {
        let err = load(text, Format::Toml, "p").unwrap_err();
        assert!(matches!(err, PolicyError::Syntax { .. }), "{text}: {err:?}");
    }
    let err = load(
        r#"{"default": "ask", "allow": {"authority": ["read"]}}"#,
        Format::Json,
        "p",
    )
    .unwrap_err();
    assert!(err.to_string().contains("(/allow)"), "{err}");
    // The directive type only ever yields its text.
    let directive = Directive::new("bash(rm:*)").unwrap();
    assert_eq!(directive.as_str(), "bash(rm:*)");
    assert_eq!(
        serde_json::to_value(&directive).unwrap(),
        json!("bash(rm:*)")
    );
}

// ------------------------------------------------------------------ digest and decisions

#[test]
fn the_digest_covers_directives_and_decisions_ignore_them() {
    let rules = "default = \"ask\"\nallow = [\"read\"]\ndeny = [\"bash(rm:*)\"]\n";
    let plain = compile(&[("p", rules)]).unwrap();
    let with = compile(&[(
        "p",
        format!("{rules}[directives]\nboundaries = [\"Never delete\"]\n").as_str(),
    )])
    .unwrap();
    let other = compile(&[(
        "p",
        format!("{rules}[directives]\nboundaries = [\"Never delete anything\"]\n").as_str(),
    )])
    .unwrap();
    let moved = compile(&[(
        "p",
        format!("{rules}[directives]\nescalations = [\"Never delete\"]\n").as_str(),
    )])
    .unwrap();
    assert_ne!(plain.digest(), with.digest());
    assert_ne!(with.digest(), other.digest());
    assert_ne!(
        with.digest(),
        moved.digest(),
        "the list a text is in is semantics"
    );
    assert!(with.canonical_json().contains("\"directives\""));
    for (tool, args) in [
        ("read", json!({"path": "/repo/a"})),
        ("bash", json!({"command": "rm -rf /"})),
        ("bash", json!({"command": "make"})),
    ] {
        let call = Call::new(tool, args);
        let (a, b) = (plain.decide(&call), with.decide(&call));
        assert_eq!(
            (a.decision, a.rule, a.reason),
            (b.decision, b.rule, b.reason),
            "{tool}"
        );
    }
}

/// Several files: each list is the files' lists in the order given, repeats skipped.
#[test]
fn several_files_merge_in_order_without_repeats() {
    let managed = r#"
default = "deny"
[source]
name = "managed"
[directives]
boundaries = ["Never push to main", "Keep secrets out of logs"]
escalations = ["Asked for credentials"]
"#;
    let project = r#"
default = "ask"
[directives]
authority = ["Pick the refactoring"]
boundaries = ["Keep secrets out of logs", "Stay inside src/"]
"#;
    let s = compile(&[("managed", managed), ("project", project)]).unwrap();
    assert_eq!(
        s.directives().render(),
        "## Authority\n- Pick the refactoring\n\n\
         ## Operational Boundaries\n- Never push to main\n- Keep secrets out of logs\n- Stay inside src/\n\n\
         ## Escalation Conditions\n\
         When any condition occurs, STOP and emit an escalation_request with the reason:\n\
         - Asked for credentials"
    );
    // The order of the files is the order of the text (and so part of the digest).
    let swapped = compile(&[("project", project), ("managed", managed)]).unwrap();
    assert_eq!(
        swapped.directives().boundaries,
        d(&[
            "Keep secrets out of logs",
            "Stay inside src/",
            "Never push to main"
        ])
    );
    // The library merges the same way.
    let lib = PolicyBuilder::new()
        .default(Decision::Ask)
        .directives(&Directives {
            boundaries: d(&["a", "b"]),
            ..Directives::default()
        })
        .directives(&Directives {
            boundaries: d(&["b", "c"]),
            ..Directives::default()
        })
        .build()
        .unwrap();
    assert_eq!(lib.directives().boundaries, d(&["a", "b", "c"]));
}
