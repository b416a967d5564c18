//! `warden policy describe` end to end: the authorization boundary the compiled policy
//! enforces (text and JSON), then the prompt directives, labelled as guidance; a withheld
//! untrusted allow is never claimed; a bad policy is exit 2 with nothing printed.

use serde_json::json;

use super::{assert_input_error, lines, warden, write};

const POLICY: &str = r#"
default = "ask"
allow = ["read", "edit(src/**)", "bash(git status:*)"]
ask = ["bash(git push:*)"]
deny = ["read(.env:*)", "bash(rm:*)"]

[directives]
authority = ["Choose how to structure the fix inside src/", "bash(rm:*)"]
boundaries = ["Do not touch the release branch"]
escalations = ["A test fails for a reason you cannot explain"]

[[sources]]
name = "vendor"
rank = -5
allow = ["bash(curl:*)"]
"#;

#[test]
fn describe_prints_the_boundary_then_the_directives_as_guidance() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(dir.path(), "project.toml", POLICY);
    let out = warden(&["policy", "describe", "--policy", &policy], dir.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (boundary, guidance) = text
        .split_once("</authorization_boundary>\n")
        .expect("the boundary comes first");
    assert!(boundary.starts_with("<authorization_boundary>\nPolicy `project` version `0`"));
    for line in [
        "Calls that no rule decides need approval (the default).",
        "- `read`: all `read` calls",
        "  - except where `read(.env:*)` denies",
        "- `edit(src/**)`: `edit` calls on paths matching `src/**`",
        "- `bash(git status:*)`: `bash` commands matching `git status:*`",
        "- `read(.env:*)`: `read` calls on paths matching `.env:*` are denied",
        "- `bash(git push:*)`: `bash` commands matching `git push:*` need approval",
    ] {
        assert!(
            boundary.lines().any(|l| l == line),
            "{line:?} missing from\n{boundary}"
        );
    }
    // The withheld untrusted allow is not claimed; the directives are not in the boundary.
    assert!(!text.contains("curl"), "{text}");
    assert!(!boundary.contains("Do not touch the release branch"));
    // After the boundary: the directives, in D1's format, labelled as guidance.
    assert_eq!(
        guidance,
        "\n<prompt_directives>\n\
         Guidance from the policy's [directives], not enforcement: it grants nothing and \
         restricts nothing; only the authorization boundary above is enforced.\n\
         \n\
         ## Authority\n\
         - Choose how to structure the fix inside src/\n\
         - bash(rm:*)\n\
         \n\
         ## Operational Boundaries\n\
         - Do not touch the release branch\n\
         \n\
         ## Escalation Conditions\n\
         When any condition occurs, STOP and emit an escalation_request with the reason:\n\
         - A test fails for a reason you cannot explain\n\
         </prompt_directives>\n"
    );

    // Without directives, nothing follows the boundary.
    let plain = write(
        dir.path(),
        "plain.toml",
        "default = \"deny\"\nallow = [\"read\"]\n",
    );
    let out = warden(&["policy", "describe", "--policy", &plain], dir.path());
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.ends_with("</authorization_boundary>\n"), "{text}");
    assert!(!text.contains("prompt_directives"));
}

#[test]
fn describe_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(dir.path(), "project.toml", POLICY);
    let out = warden(
        &[
            "policy", "describe", "--policy", &policy, "--format", "json",
        ],
        dir.path(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let values = lines(&out);
    assert_eq!(values.len(), 1);
    let v = &values[0];
    let b = &v["boundary"];
    assert_eq!(b["policy"]["policy_id"], json!("project"));
    assert!(
        b["policy"]["digest"]
            .as_str()
            .unwrap()
            .starts_with("blake3:")
    );
    assert_eq!(b["reads"][0]["scope"]["rule"], json!("read"));
    assert_eq!(
        b["reads"][0]["exceptions"],
        json!([{"effect": "denied", "rule": "read(.env:*)", "carved_out": []}])
    );
    assert_eq!(b["writes"][0]["scope"]["rule"], json!("edit(src/**)"));
    assert_eq!(b["protected_targets"][1]["rule"], json!("bash(rm:*)"));
    assert_eq!(
        b["required_approvals"][0]["rule"],
        json!("bash(git push:*)")
    );
    assert!(!v.to_string().contains("curl"));
    let d = &v["directives"];
    assert_eq!(d["enforced"], json!(false));
    assert_eq!(
        d["authority"],
        json!(["Choose how to structure the fix inside src/", "bash(rm:*)"])
    );
    assert_eq!(d["boundaries"], json!(["Do not touch the release branch"]));
    assert!(
        d["text"]
            .as_str()
            .unwrap()
            .starts_with("## Authority\n- Choose")
    );

    let plain = write(dir.path(), "plain.toml", "default = \"deny\"\n");
    let out = warden(
        &["policy", "describe", "--policy", &plain, "--format", "json"],
        dir.path(),
    );
    assert_eq!(lines(&out)[0]["directives"], json!(null));
}

#[test]
fn describe_refuses_a_bad_policy() {
    let dir = tempfile::tempdir().unwrap();
    let two_lines = write(
        dir.path(),
        "p.toml",
        "default = \"ask\"\n[directives]\nauthority = [\"ok\\n## Authority\"]\n",
    );
    let out = warden(&["policy", "describe", "--policy", &two_lines], dir.path());
    assert_input_error(&out, "a directive is one line of text");
    let no_default = write(dir.path(), "q.toml", "allow = [\"read\"]\n");
    let out = warden(&["policy", "describe", "--policy", &no_default], dir.path());
    assert_input_error(&out, "no `default`");
}
