//! Matcher tests: the agentpolicy conformance corpus, path and domain tables, and the index
//! invariant (a match implies the value probes the pattern's key) as property tests.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;

fn env() -> PathEnv {
    PathEnv {
        project_root: PathBuf::from("/repo"),
        home: Some(PathBuf::from("/home/u")),
    }
}

fn compile(kind: MatcherKind, spec: &str) -> Pattern {
    match Pattern::compile(kind, spec, &env()) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

fn probes(value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    value.for_each_probe(&mut |p| out.push(p.to_owned()));
    out
}

/// Asserts the index invariant for one pattern and value, in both views.
/// `pattern` (compiled from `spec`) matches `value` as `restrict` in the restricting view and as
/// `permit` in the permitting one, and its index finds it ([`assert_indexed`]).
fn assert_views(spec: &str, pattern: &Pattern, value: &Value, restrict: bool, permit: bool) {
    assert_eq!(
        pattern.matches(value, View::Restrict),
        restrict,
        "{spec:?} restrict {value:?}"
    );
    assert_eq!(
        pattern.matches(value, View::Permit),
        permit,
        "{spec:?} permit {value:?}"
    );
    assert_indexed(pattern, value);
}

fn assert_indexed(pattern: &Pattern, value: &Value) {
    let probes = probes(value);
    let mut unique = probes.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), probes.len(), "duplicate probes {probes:?}");
    assert_eq!(probes.first().map(String::as_str), Some(""));
    // The length-filtered probes the engine uses are exactly the probes of those lengths.
    let key_len = pattern.index_key().len();
    for lens in [
        u64::MAX,
        1 << key_len.min(63),
        (1 << key_len.min(63)) | 1,
        0,
    ] {
        let mut filtered = Vec::new();
        value.for_each_probe_of_lengths(lens, &mut |p| filtered.push(p.to_owned()));
        filtered.sort();
        filtered.dedup();
        let want: Vec<String> = unique
            .iter()
            .filter(|p| lens & (1 << p.len().min(63)) != 0)
            .cloned()
            .collect();
        assert_eq!(filtered, want, "lengths {lens:#x} of {value:?}");
    }
    for view in [View::Restrict, View::Permit] {
        if pattern.matches(value, view) {
            assert!(
                probes.iter().any(|p| p == pattern.index_key()),
                "{:?} {:?} matches {value:?} ({view:?}) but key {:?} is not in {probes:?}",
                pattern.kind(),
                pattern.spec(),
                pattern.index_key(),
            );
        }
    }
}

#[test]
fn kinds_parse_and_name() {
    for kind in MatcherKind::ALL {
        assert_eq!(MatcherKind::parse(kind.name()), Ok(kind));
        let json = serde_json::to_string(&kind).unwrap();
        assert_eq!(json, format!("\"{}\"", kind.name()));
    }
    let err = MatcherKind::parse("SHELL").unwrap_err();
    assert_eq!(err.hint, Some("shell"));
    let err = MatcherKind::parse("regex").unwrap_err();
    assert_eq!(err.hint, None);
    assert_eq!(err.to_string(), r#"unknown matcher kind "regex""#);
}

#[test]
fn agentpolicy_matchers_corpus() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/corpus/agentpolicy/matchers.json"
    );
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("the conformance corpus {path} must exist: {e}"));
    let corpus: serde_json::Value = serde_json::from_str(&text).unwrap();
    let cases = corpus["cases"].as_array().unwrap();
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    for case in cases {
        let kind = MatcherKind::parse(case["matcher"].as_str().unwrap()).unwrap();
        let spec = case["spec"].as_str().unwrap();
        let want = case["match"].as_bool().unwrap();
        let args = match (&case.get("args"), case.get("raw")) {
            (Some(args), _) => Some((*args).clone()),
            (None, Some(raw)) => serde_json::from_str(raw.as_str().unwrap()).ok(),
            (None, None) => panic!("case without args or raw: {case}"),
        };
        let field = args.as_ref().and_then(|a| a.get("command"));
        let value = Value::prepare(kind, field, Path::new("/repo"), &env(), None);
        let pattern = compile(kind, spec);
        for view in [View::Restrict, View::Permit] {
            assert_eq!(pattern.matches(&value, view), want, "{case}");
        }
        assert_indexed(&pattern, &value);
    }
}

fn path_value(lexical: &str, resolved: Option<&str>) -> Value {
    let field = serde_json::Value::String(lexical.to_owned());
    Value::prepare(
        MatcherKind::Path,
        Some(&field),
        Path::new("/repo/sub"),
        &env(),
        resolved,
    )
}

#[test]
fn path_values() {
    let lexical = |s: &str| match path_value(s, None) {
        Value::Path { lexical, .. } => lexical,
        other => panic!("{other:?}"),
    };
    assert_eq!(lexical("a.txt"), "/repo/sub/a.txt");
    assert_eq!(lexical("./a//b/"), "/repo/sub/a/b");
    assert_eq!(lexical("../../../../etc/passwd"), "/etc/passwd");
    assert_eq!(lexical("~/x"), "/home/u/x");
    assert_eq!(lexical("~"), "/home/u");
    assert_eq!(lexical("~user"), "/repo/sub/~user");
    assert_eq!(path_value("", None), Value::Missing);
    let no_home = PathEnv {
        home: None,
        ..env()
    };
    let field = serde_json::json!("~/x");
    let value = Value::prepare(
        MatcherKind::Path,
        Some(&field),
        Path::new("/"),
        &no_home,
        None,
    );
    assert_eq!(value, Value::Missing);
    let value = Value::prepare(
        MatcherKind::Path,
        Some(&serde_json::json!(3)),
        Path::new("/"),
        &env(),
        None,
    );
    assert_eq!(value, Value::Missing);
    assert_eq!(
        path_value("a", Some("../b")),
        Value::Path {
            lexical: "/repo/sub/a".to_owned(),
            resolved: Some("/repo/b".to_owned()),
        }
    );
}

#[test]
fn path_table() {
    // (spec, value in cwd /repo/sub, resolved, restrict, permit)
    let cases: &[(&str, &str, Option<&str>, bool, bool)] = &[
        // absolute, `//`, dir matches descendants
        ("/etc", "/etc", None, true, true),
        ("/etc", "/etc/passwd", None, true, true),
        ("/etc", "/etcetera", None, false, false),
        ("/etc/", "/etc/passwd", None, true, true),
        ("//etc/passwd", "/etc/passwd", None, true, true),
        ("/etc/*", "/etc/ssh/sshd_config", None, true, true),
        ("/etc/*.conf", "/etc/ssh/a.conf", None, false, false),
        ("/etc/**/*.conf", "/etc/ssh/a.conf", None, true, true),
        ("/", "/anything/at/all", None, true, true),
        // `~/`
        ("~/.ssh", "/home/u/.ssh/id_rsa", None, true, true),
        ("~/.ssh", "~/.ssh/id_rsa", None, true, true),
        ("~", "/home/u/x", None, true, true),
        // relative without a slash: any depth under the root
        (".env", "/repo/.env", None, true, true),
        (".env", "/repo/a/b/.env", None, true, true),
        (".env", "/elsewhere/.env", None, false, false),
        ("*.pem", "/repo/keys/k.pem", None, true, true),
        ("*.pem", "k.pem", None, true, true),
        ("build/", "/repo/x/build/out.o", None, true, true),
        // relative with a slash: anchored at the root
        ("src/*.rs", "/repo/src/a.rs", None, true, true),
        ("src/*.rs", "/repo/x/src/a.rs", None, false, false),
        ("src/*.rs", "/repo/src/a/b.rs", None, false, false),
        ("./.env", "/repo/.env", None, true, true),
        ("./.env", "/repo/a/.env", None, false, false),
        ("src/**", "/repo/src/a/b.rs", None, true, true),
        ("**/secret", "/repo/a/b/secret", None, true, true),
        ("**/secret", "/repo/secret", None, true, true),
        // `..` in the value escapes the root; in the pattern it is lexical
        ("src/**", "../../repo/src/x", None, true, true),
        ("src/**", "../../etc/passwd", None, false, false),
        ("**", "../x", None, true, true),
        ("**", "../../x", None, false, false),
        ("../outside", "/outside/f", None, true, true),
        ("src/../lib/*", "/repo/lib/a", None, true, true),
        // braces literal, `?` and `[…]` are glob syntax
        ("{a,b}.txt", "/repo/a.txt", None, false, false),
        ("{a,b}.txt", "/repo/{a,b}.txt", None, true, true),
        ("/tmp/?.txt", "/tmp/a.txt", None, true, true),
        ("/tmp/[ab].txt", "/tmp/b.txt", None, true, true),
        ("/tmp/[ab].txt", "/tmp/c.txt", None, false, false),
        ("/tmp/\\*", "/tmp/*", None, true, true),
        ("/tmp/\\*", "/tmp/x", None, false, false),
        // `:*`: any path starting with the text
        (".env:*", "/repo/.env", None, true, true),
        (".env:*", "/repo/a/.env.example", None, true, true),
        (".env:*", "/repo/.env/x", None, true, true),
        (".env:*", "/repo/x.env", None, false, false),
        ("/etc/pass:*", "/etc/passwd", None, true, true),
        // symlinks: restrict = lexical or resolved, permit = lexical and resolved
        ("src/**", "/repo/src/link", Some("/etc/shadow"), true, false),
        (
            "src/**",
            "/repo/src/link",
            Some("/repo/src/real"),
            true,
            true,
        ),
        (
            "/etc/**",
            "/repo/src/link",
            Some("/etc/shadow"),
            true,
            false,
        ),
        ("/etc/**", "/tmp/x", Some("/tmp/y"), false, false),
    ];
    for &(spec, value, resolved, restrict, permit) in cases {
        let pattern = compile(MatcherKind::Path, spec);
        let value = path_value(value, resolved);
        assert_views(spec, &pattern, &value, restrict, permit);
    }
}

#[test]
fn path_pattern_errors_and_keys() {
    let no_home = PathEnv {
        home: None,
        ..env()
    };
    let err = Pattern::compile(MatcherKind::Path, "~/.ssh", &no_home).unwrap_err();
    assert_eq!(err.kind, "path");
    assert!(
        err.to_string()
            .starts_with("invalid path pattern `~/.ssh`: ")
    );
    assert!(Pattern::compile(MatcherKind::Path, "", &env()).is_err());
    assert!(Pattern::compile(MatcherKind::Path, "/tmp/[ab", &env()).is_err());
    let relative_root = PathEnv {
        project_root: PathBuf::from("repo"),
        home: None,
    };
    assert!(Pattern::compile(MatcherKind::Path, "x", &relative_root).is_err());
    // a project root with glob characters is literal
    let odd = PathEnv {
        project_root: PathBuf::from("/w/[x]*{y}"),
        home: None,
    };
    let p = Pattern::compile(MatcherKind::Path, "src/*", &odd).unwrap();
    assert_eq!(p.index_key(), "/w/[x]*{y}/src");
    assert!(p.matches(
        &Value::Path {
            lexical: "/w/[x]*{y}/src/a".into(),
            resolved: None
        },
        View::Permit
    ));
    assert!(!p.matches(
        &Value::Path {
            lexical: "/w/x/src/a".into(),
            resolved: None
        },
        View::Restrict
    ));
    for (spec, key) in [
        ("/etc", "/etc"),
        ("/", ""),
        ("src/*.rs", "/repo/src"),
        (".env", "/repo"),
        ("~/.ssh/**", "/home/u/.ssh"),
        (".env:*", "/repo"),
        ("/etc/pass:*", "/etc"),
    ] {
        assert_eq!(compile(MatcherKind::Path, spec).index_key(), key, "{spec}");
    }
}

fn host(url: &str) -> Value {
    Value::prepare(
        MatcherKind::Domain,
        Some(&serde_json::json!(url)),
        Path::new("/"),
        &env(),
        None,
    )
}

#[test]
fn domain_values() {
    let d = |s: &str| Value::Host(Host::Domain(s.to_owned()));
    assert_eq!(host("https://Example.COM./x"), d("example.com"));
    assert_eq!(host("https://example.com@evil.com/"), d("evil.com"));
    assert_eq!(host("https://bücher.example/"), d("xn--bcher-kva.example"));
    assert_eq!(host("https://example.com:8443/a?b#c"), d("example.com"));
    // Another scheme keeps its host, marked: deny and ask rules match it, allow rules never.
    assert_eq!(
        host("ssh://git@GitHub.COM/x"),
        Value::OtherScheme(Host::Domain("github.com".into()))
    );
    assert_eq!(
        host("http://127.1/"),
        Value::Host(Host::Ipv4(Ipv4Addr::new(127, 0, 0, 1)))
    );
    assert_eq!(
        host("http://[::1]:80/"),
        Value::Host(Host::Ipv6(Ipv6Addr::LOCALHOST))
    );
    assert_eq!(host("mailto:a@example.com"), Value::Missing);
    assert_eq!(host("example.com"), Value::Missing);
    assert_eq!(host("file:///etc/passwd"), Value::Missing);
    let value = Value::prepare(MatcherKind::Domain, None, Path::new("/"), &env(), None);
    assert_eq!(value, Value::Missing);
    assert_eq!(
        probes(&host("https://a.b.example.com/")),
        ["", "a.b.example.com", "b.example.com", "example.com", "com"]
    );
}

#[test]
fn domain_table() {
    let cases: &[(&str, &str, bool)] = &[
        ("domain:example.com", "https://example.com/", true),
        ("domain:example.com", "https://www.example.com/", false),
        ("domain:example.com", "https://example.com.evil.net/", false),
        ("domain:example.com", "https://EXAMPLE.com/", true),
        ("domain:EXAMPLE.COM", "https://example.com/", true),
        ("domain:example.com", "https://example.com./", true),
        ("domain:example.com.", "https://example.com/", true),
        ("domain:example.com", "https://example.com:8443/x", true),
        ("domain:example.com", "https://example.com@evil.com/", false),
        ("domain:evil.com", "https://example.com@evil.com/", true),
        ("domain:*.example.com", "https://a.example.com/", true),
        ("domain:*.example.com", "https://a.b.example.com/", true),
        ("domain:*.example.com", "https://example.com/", false),
        ("domain:*.example.com", "https://badexample.com/", false),
        (
            "domain:bücher.example",
            "https://xn--bcher-kva.example/",
            true,
        ),
        (
            "domain:xn--bcher-kva.example",
            "https://BÜCHER.example/",
            true,
        ),
        (
            "domain:*.bücher.example",
            "https://a.xn--bcher-kva.example/",
            true,
        ),
        ("domain:127.0.0.1", "http://127.0.0.1:8080/", true),
        ("domain:127.0.0.1", "http://127.1/", true),
        ("domain:127.0.0.1", "http://[::ffff:127.0.0.1]/", true),
        ("domain:[::1]", "http://[::1]/", true),
        ("domain:[::1]", "http://127.0.0.1/", false),
        ("domain:localhost", "http://127.0.0.1/", false),
        ("domain:example.com", "not a url", false),
    ];
    for &(spec, url, want) in cases {
        let pattern = compile(MatcherKind::Domain, spec);
        let value = host(url);
        for view in [View::Restrict, View::Permit] {
            assert_eq!(pattern.matches(&value, view), want, "{spec} vs {url}");
        }
        assert_indexed(&pattern, &value);
    }
}

#[test]
fn domain_spec_errors() {
    for spec in [
        "example.com",
        "domain:",
        "domain:*.",
        "domain:*",
        "domain:a.*.com",
        "domain:example.com:443",
        "domain:example.com/path",
        "domain:user@example.com",
        "domain:example.com?q",
        "domain:::1",
        "domain:*.127.0.0.1",
        "domain:*.0.0.1",
        "domain:exa mple.com",
        "domain:.",
    ] {
        let err = Pattern::compile(MatcherKind::Domain, spec, &env());
        assert!(
            err.is_err(),
            "{spec} compiled: {:?}",
            err.map(|p| p.index_key().to_owned())
        );
    }
    let err = Pattern::compile(MatcherKind::Domain, "domain:a.com:80", &env()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid domain pattern `domain:a.com:80`: a port is not allowed (write an IPv6 address in brackets)"
    );
    assert_eq!(
        compile(MatcherKind::Domain, "domain:*.Example.com").index_key(),
        "example.com"
    );
    assert_eq!(
        compile(MatcherKind::Domain, "domain:[::1]").index_key(),
        "::1"
    );
}

fn shell(written: &[&str], normalized: &[&str]) -> Value {
    Value::Shell {
        written: written.iter().map(|s| (*s).to_owned()).collect(),
        normalized: normalized.iter().map(|s| (*s).to_owned()).collect(),
    }
}

#[test]
fn shell_table() {
    // (spec, written words, normalized words, restrict, permit)
    type Case<'a> = (&'a str, &'a [&'a str], &'a [&'a str], bool, bool);
    let cases: &[Case<'_>] = &[
        (
            "git status:*",
            &["git", "status"],
            &["git", "status"],
            true,
            true,
        ),
        (
            "git status:*",
            &["git", "status", "-s"],
            &["git", "status", "-s"],
            true,
            true,
        ),
        ("ls:*", &["lsof"], &["lsof"], false, false),
        (
            "git  status",
            &["git", "status"],
            &["git", "status"],
            true,
            true,
        ),
        (
            "rm:*",
            &["/bin/rm", "-rf", "x"],
            &["rm", "-rf", "x"],
            true,
            false,
        ),
        ("rm:*", &["'r''m'", "x"], &["rm", "x"], true, false),
        (
            "git push * main",
            &["git", "push", "-f", "origin", "main"],
            &["git", "push", "-f", "origin", "main"],
            true,
            true,
        ),
        (
            "echo 'a b'",
            &["echo", "'a b'"],
            &["echo", "a b"],
            false,
            true,
        ),
        (
            "echo a b",
            &["echo", "'a b'"],
            &["echo", "a b"],
            true,
            false,
        ),
        (":*", &["anything"], &["anything"], true, true),
    ];
    for &(spec, written, normalized, restrict, permit) in cases {
        let pattern = compile(MatcherKind::Shell, spec);
        let value = shell(written, normalized);
        assert_views(spec, &pattern, &value, restrict, permit);
    }
    let field = serde_json::json!(" git\tstatus  -s ");
    let value = Value::prepare(
        MatcherKind::Shell,
        Some(&field),
        Path::new("/"),
        &env(),
        None,
    );
    assert_eq!(
        value,
        shell(&["git", "status", "-s"], &["git", "status", "-s"])
    );
    let field = serde_json::json!(" \n ");
    let value = Value::prepare(
        MatcherKind::Shell,
        Some(&field),
        Path::new("/"),
        &env(),
        None,
    );
    assert_eq!(value, Value::Missing);
    // kinds never cross
    let text = Value::Text("git status".to_owned());
    assert!(!compile(MatcherKind::Shell, "git:*").matches(&text, View::Restrict));
    let words = shell(&["git"], &["git"]);
    assert!(!compile(MatcherKind::Glob, "git:*").matches(&words, View::Restrict));
    assert!(!compile(MatcherKind::Prefix, "git:*").matches(&Value::Missing, View::Restrict));
}

fn cases() -> u32 {
    if std::env::var_os("CI").is_some() {
        64
    } else {
        256
    }
}

/// Text over a small alphabet (spaces, a multi-byte letter) so that patterns derived from it
/// match often; up to 80 characters to cross the 8-space and 32-byte index limits.
fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![4 => Just('a'), 2 => Just(' '), 1 => Just('b'), 1 => Just('é')],
        0..80,
    )
    .prop_map(|cs| cs.into_iter().collect())
}

/// A spec derived from `text`: a prefix with some characters replaced by `*`, then an optional
/// `:*`, or a fully random spec.
fn spec_from(text: String) -> impl Strategy<Value = String> {
    let n = text.chars().count();
    (
        0..=n,
        prop::collection::vec(0..n.max(1), 0..3),
        0..4u8,
        "[ab *é]{0,12}",
    )
        .prop_map(move |(cut, stars, tail, random)| {
            let mut chars: Vec<char> = text.chars().take(cut).collect();
            for s in stars {
                if s < chars.len() {
                    chars[s] = '*';
                }
            }
            let mut spec: String = chars.into_iter().collect();
            match tail {
                0 => {}
                1 => spec.push_str(":*"),
                2 => spec.push('*'),
                _ => spec = random,
            }
            spec
        })
}

fn text_and_spec() -> impl Strategy<Value = (String, String)> {
    text().prop_flat_map(|t| (Just(t.clone()), spec_from(t)))
}

fn words(text: &str) -> Vec<String> {
    text.split(' ').map(str::to_owned).collect()
}

fn path_comp() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "a", "b", "src", ".env", ".env.x", "..", ".", "", "x.rs", "repo",
    ])
}

fn pattern_comp() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "a", "b", "src", ".env", "*", "**", "*.rs", "..", "?", "{a}", "repo",
    ])
}

fn path_string(prefix: &'static str, comps: Vec<&'static str>) -> String {
    format!("{prefix}{}", comps.join("/"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn prefix_index_invariant((text, spec) in text_and_spec()) {
        assert_indexed(&compile(MatcherKind::Prefix, &spec), &Value::Text(text));
    }

    #[test]
    fn glob_index_invariant((text, spec) in text_and_spec()) {
        assert_indexed(&compile(MatcherKind::Glob, &spec), &Value::Text(text));
    }

    #[test]
    fn shell_index_invariant((text, spec) in text_and_spec(), other in text()) {
        let pattern = compile(MatcherKind::Shell, &spec);
        let value = Value::Shell { written: words(&other), normalized: words(&text) };
        assert_indexed(&pattern, &value);
        let value = Value::Shell { written: words(&text), normalized: words(&text) };
        assert_indexed(&pattern, &value);
    }

    #[test]
    fn glob_text_equals_words((text, spec) in text_and_spec()) {
        let glob = compile(MatcherKind::Glob, &spec);
        let shell = compile(MatcherKind::Shell, &spec);
        // A shell spec collapses whitespace runs, so compare only canonical specs.
        if !spec.contains("  ") && !spec.starts_with(' ') && !spec.ends_with(' ') && !spec.contains(" :*") {
            let value = Value::Shell { written: words(&text), normalized: words(&text) };
            prop_assert_eq!(
                glob.matches(&Value::Text(text.clone()), View::Permit),
                shell.matches(&value, View::Permit)
            );
        }
    }

    #[test]
    fn path_index_invariant(
        anchor in prop::sample::select(vec!["/", "//", "~/", "", "./", "/repo/"]),
        pat in prop::collection::vec(pattern_comp(), 1..5),
        suffix in any::<bool>(),
        lexical in prop::collection::vec(path_comp(), 0..6),
        value_anchor in prop::sample::select(vec!["/", "", "~/", "/repo/", "/home/u/"]),
        resolved in prop::option::of(prop::collection::vec(path_comp(), 0..6)),
    ) {
        let mut spec = path_string(anchor, pat);
        if suffix {
            spec.push_str(":*");
        }
        let Ok(pattern) = Pattern::compile(MatcherKind::Path, &spec, &env()) else {
            return Ok(());
        };
        let resolved = resolved.map(|r| path_string("/repo/", r));
        let value = path_value(&path_string(value_anchor, lexical), resolved.as_deref());
        assert_indexed(&pattern, &value);
    }

    #[test]
    fn domain_index_invariant(
        wild in any::<bool>(),
        spec_labels in prop::collection::vec(prop::sample::select(vec!["a", "B", "example", "com", "bücher", "xn--bcher-kva"]), 1..4),
        labels in prop::collection::vec(prop::sample::select(vec!["a", "b", "example", "com", "bücher", "xn--bcher-kva"]), 1..5),
        ip in prop::sample::select(vec!["", "127.0.0.1", "[::1]", "[::ffff:127.0.0.1]", "10.0.0.1"]),
        trailing in any::<bool>(),
    ) {
        let spec = if ip.is_empty() {
            format!("domain:{}{}", if wild { "*." } else { "" }, spec_labels.join("."))
        } else {
            format!("domain:{ip}")
        };
        let pattern = compile(MatcherKind::Domain, &spec);
        let host_text = if wild && !ip.is_empty() { ip.to_owned() } else { labels.join(".") };
        let url = format!("https://{host_text}{}/x", if trailing { "." } else { "" });
        assert_indexed(&pattern, &host(&url));
        assert_indexed(&pattern, &host(&format!("http://{ip}/")));
    }
}

/// A slow reference for `*`-only globs: dynamic programming over characters.
fn reference_glob(spec: &str, text: &str) -> bool {
    fn wild(p: &[char], t: &[char]) -> bool {
        let mut row = vec![false; t.len() + 1];
        row[0] = true;
        for &pc in p {
            let mut next = vec![false; t.len() + 1];
            if pc == '*' {
                let mut any = false;
                for j in 0..=t.len() {
                    any |= row[j];
                    next[j] = any;
                }
            } else {
                for j in 1..=t.len() {
                    next[j] = row[j - 1] && t[j - 1] == pc;
                }
            }
            row = next;
        }
        row[t.len()]
    }
    let chars = |s: &str| s.chars().collect::<Vec<_>>();
    match spec.strip_suffix(":*") {
        Some("") => true,
        Some(base) => {
            wild(&chars(base), &chars(text)) || wild(&chars(&format!("{base} *")), &chars(text))
        }
        None => wild(&chars(spec), &chars(text)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn glob_agrees_with_reference((text, spec) in text_and_spec()) {
        let pattern = compile(MatcherKind::Glob, &spec);
        prop_assert_eq!(
            pattern.matches(&Value::Text(text.clone()), View::Restrict),
            reference_glob(&spec, &text)
        );
    }
}

/// A path or host longer than any index key probes only the prefixes (suffixes) that fit in
/// `MAX_KEY_BYTES`, and a pattern whose key would be longer is keyed by a folder (parent
/// domain) that fits: it is still found, and a value's probes stay constant work.
#[test]
fn long_paths_and_hosts_probe_keys_that_fit() {
    let deep: String = (0..200).map(|i| format!("/d{i}")).collect();
    assert!(deep.len() > 2 * MAX_KEY_BYTES);
    let value = Value::Path {
        lexical: format!("{deep}/file.rs"),
        resolved: None,
    };
    assert!(probes(&value).iter().all(|p| p.len() <= MAX_KEY_BYTES));
    for spec in [
        format!("{deep}/file.rs"),
        format!("{deep}/**"),
        format!("{deep}/*.rs"),
        format!(
            "{}/**",
            (0..70).map(|i| format!("/d{i}")).collect::<String>()
        ),
        "/d0/**".to_owned(),
    ] {
        let pattern = compile(MatcherKind::Path, &spec);
        assert!(pattern.index_key().len() <= MAX_KEY_BYTES, "{spec}");
        assert!(pattern.index_key().starts_with("/d0"), "{spec}");
        assert_views(&spec, &pattern, &value, true, true);
    }
    let labels: String = (0..120).map(|i| format!("l{i}.")).collect();
    let url = format!("https://{labels}example.com/");
    let value = host(&url);
    assert!(probes(&value).iter().all(|p| p.len() <= MAX_KEY_BYTES));
    for spec in [
        format!("domain:{labels}example.com"),
        format!("domain:*.{}example.com", &labels[3..]),
        "domain:*.example.com".to_owned(),
    ] {
        let pattern = compile(MatcherKind::Domain, &spec);
        assert!(pattern.index_key().len() <= MAX_KEY_BYTES, "{spec}");
        assert!(pattern.index_key().ends_with("example.com"), "{spec}");
        assert_views(&spec, &pattern, &value, true, true);
    }
}
