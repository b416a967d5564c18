//! Specifier matchers: how a rule's specifier (`git status:*`, `src/**`, `domain:*.example.com`)
//! is compared with one field of a call.
//!
//! A [`Pattern`] is compiled once per rule; a [`Value`] is prepared once per subject (pure: no
//! I/O — symlinks are resolved at the edge and passed in). [`Pattern::matches`] is then a pure,
//! allocation-free comparison.
//!
//! Every pattern has an [`index_key`](Pattern::index_key) and every value yields
//! [probes](Value::for_each_probe): whenever a pattern matches a value (in any [`View`]), the
//! value's probes include the pattern's key. The engine indexes rules by key, so a decision looks
//! at a handful of candidate rules rather than scanning every rule.
//!
//! Kinds:
//! - `prefix`: `x:*` is a plain string prefix (`git:*` matches `gitk`), anything else is equality.
//! - `glob`: only `*` is special; `x:*` means `x` or `x *`; `:*` alone matches everything.
//! - `path`: gitignore-style globs over a normalized absolute path (see [`Pattern::compile`]).
//! - `domain`: `domain:host` or `domain:*.suffix` over a URL's host (WHATWG, IDNA).
//! - `shell`: the glob matcher over a simple command's words joined by single spaces.

mod domain;
pub(crate) mod glob;
mod path;
#[cfg(test)]
mod tests;

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

/// The longest index key of a `path` or `domain` pattern, and so the longest probe of such a
/// value: a longer key is cut back to the longest folder or parent domain that fits (a looser
/// key: more candidates, never a missed match), which keeps the probes of a path or host
/// (one per folder or label, each hashed whole) constant work however long it is.
pub(crate) const MAX_KEY_BYTES: usize = 128;

/// How a tool's specifiers are matched.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum MatcherKind {
    /// `x:*` is a plain string prefix of the field, anything else is exact equality.
    Prefix,
    /// `*` matches any run of characters; `x:*` means `x` or `x *`.
    Glob,
    /// Gitignore-style globs over a normalized absolute path.
    Path,
    /// `domain:host` or `domain:*.suffix` over a URL's host.
    Domain,
    /// Word-level matching of a shell simple command.
    Shell,
}

impl MatcherKind {
    /// Every matcher kind, in declaration order.
    pub const ALL: [MatcherKind; 5] = [
        MatcherKind::Prefix,
        MatcherKind::Glob,
        MatcherKind::Path,
        MatcherKind::Domain,
        MatcherKind::Shell,
    ];

    /// The kind's name as written in a policy file (`"prefix"`, `"glob"`, …).
    pub fn name(self) -> &'static str {
        match self {
            MatcherKind::Prefix => "prefix",
            MatcherKind::Glob => "glob",
            MatcherKind::Path => "path",
            MatcherKind::Domain => "domain",
            MatcherKind::Shell => "shell",
        }
    }

    /// Parses a matcher name; a name differing only in case gets a hint.
    ///
    /// ```
    /// use warden_policy::matcher::MatcherKind;
    ///
    /// assert_eq!(MatcherKind::parse("glob"), Ok(MatcherKind::Glob));
    /// let err = MatcherKind::parse("Prefix").unwrap_err();
    /// assert_eq!(err.hint, Some("prefix"));
    /// assert_eq!(
    ///     err.to_string(),
    ///     r#"unknown matcher kind "Prefix" (did you mean "prefix"?)"#
    /// );
    /// ```
    pub fn parse(name: &str) -> Result<MatcherKind, UnknownMatcher> {
        if let Some(kind) = Self::ALL.into_iter().find(|k| k.name() == name) {
            return Ok(kind);
        }
        let hint = Self::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name))
            .map(MatcherKind::name);
        Err(UnknownMatcher {
            name: name.to_owned(),
            hint,
        })
    }
}

/// Deserializes through [`MatcherKind::parse`], so a policy file's `match = "Prefix"` is refused
/// with the "did you mean" hint.
impl<'de> serde::Deserialize<'de> for MatcherKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        MatcherKind::parse(&name).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for MatcherKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown matcher name: `unknown matcher kind "Prefix" (did you mean "prefix"?)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown matcher kind {name:?}{}", DidYouMean(*.hint))]
pub struct UnknownMatcher {
    /// The name as written.
    pub name: String,
    /// The kind whose name differs only in letter case, if any.
    pub hint: Option<&'static str>,
}

/// Formats the optional ` (did you mean "x"?)` suffix.
struct DidYouMean(Option<&'static str>);

impl fmt::Display for DidYouMean {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(hint) => write!(f, " (did you mean {hint:?}?)"),
            None => Ok(()),
        }
    }
}

/// Where relative path patterns are anchored and `~/` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathEnv {
    /// The project root (absolute): relative path patterns are anchored here.
    pub project_root: PathBuf,
    /// The home folder (absolute) that `~/` names; `None` makes `~/` patterns an error and `~/`
    /// values [`Value::Missing`].
    pub home: Option<PathBuf>,
}

/// Which side of precedence asks.
///
/// Deny and ask rules (and allow-list carve-outs) use [`View::Restrict`]; allow rules (and
/// deny/ask-list carve-outs) use [`View::Permit`]. A restricting match may only get *easier* with
/// more information (a symlink target, a normalized argv), a permitting one only harder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The rule takes something away (deny, ask): any reading of the value may match.
    Restrict,
    /// The rule grants something (allow): every reading of the value must match.
    Permit,
}

/// One subject's matched value, prepared once per subject (pure: no I/O).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `prefix` / `glob`: the field's string.
    Text(String),
    /// `path`: the normalized absolute path and, when the edge found one, the symlink-resolved
    /// path.
    Path {
        /// Normalized absolute path: `..`/`.` resolved lexically (never above `/`), a relative
        /// path joined to the call's cwd, `~/` expanded, repeated `/` collapsed, no trailing `/`.
        lexical: String,
        /// The symlink-resolved path, when the edge resolved one: normalized the same way (a
        /// relative one joins the cwd; `~` is not expanded).
        resolved: Option<String>,
    },
    /// `domain`: the URL's host, parsed per WHATWG URL rules (IDNA → punycode, lower-case),
    /// trailing dots removed; userinfo never counts. An `http` or `https` URL.
    Host(Host),
    /// `domain`, for a URL of any other scheme (`file://good.com/…`, `ftp://…`,
    /// `javascript://…`): deny and ask rules match its host, allow rules never do, so
    /// `web_fetch(domain:good.com)` allows only web URLs of that host.
    OtherScheme(Host),
    /// `shell`: a simple command's words.
    Shell {
        /// The words as written (quotes kept): what allow rules see.
        written: Vec<String>,
        /// The normalized argv: what deny and ask rules see.
        normalized: Vec<String>,
    },
    /// The field is missing, not a string, or not parseable by this matcher (e.g. not a URL).
    /// Matches no pattern in any view.
    Missing,
}

/// A URL's host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// A domain name: ASCII (punycode), lower-case, without trailing dots.
    Domain(String),
    /// An IPv4 address (`127.0.0.1`, also written `127.1` or `0x7f.1`).
    Ipv4(Ipv4Addr),
    /// An IPv6 address (`[::1]`).
    Ipv6(Ipv6Addr),
}

impl Value {
    /// Prepares a subject's field for `kind`.
    ///
    /// `cwd` (absolute) resolves relative paths in the call's arguments; `resolved` is the edge's
    /// symlink-resolved path (path matcher only, ignored otherwise). A field that is missing, not
    /// a string, or not parseable by the matcher gives [`Value::Missing`].
    ///
    /// - `prefix`, `glob`: [`Value::Text`] (an empty string included).
    /// - `path`: [`Value::Path`]; an empty string, or `~/` without a home folder, is missing.
    /// - `domain`: [`Value::Host`] of `url::Url::parse(field)`; no host (`mailto:`), or not a URL
    ///   (`example.com` without a scheme) is missing.
    /// - `shell`: a fallback (the engine builds real shell values from the parser): the words
    ///   split at ASCII whitespace, both written and normalized; no words is missing.
    pub fn prepare(
        kind: MatcherKind,
        field: Option<&serde_json::Value>,
        cwd: &Path,
        env: &PathEnv,
        resolved: Option<&str>,
    ) -> Value {
        let Some(serde_json::Value::String(text)) = field else {
            return Value::Missing;
        };
        match kind {
            MatcherKind::Prefix | MatcherKind::Glob => Value::Text(text.clone()),
            MatcherKind::Path => path::prepare(text, cwd, env, resolved),
            MatcherKind::Domain => domain::prepare(text),
            MatcherKind::Shell => {
                let words: Vec<String> = text
                    .split(glob::is_shell_space)
                    .filter(|w| !w.is_empty())
                    .map(str::to_owned)
                    .collect();
                if words.is_empty() {
                    Value::Missing
                } else {
                    Value::Shell {
                        written: words.clone(),
                        normalized: words,
                    }
                }
            }
        }
    }

    /// Calls `f` with every index probe of this value (see [`Pattern::index_key`]), each once;
    /// `""` always comes first.
    ///
    /// - Text and shell (over each joined text): `""`, the whole text, the text before each of its
    ///   first 8 spaces, and the prefixes of its first word up to 32 bytes.
    /// - Path: `""` and, for the lexical and the resolved path, the path before each `/` and the
    ///   whole path.
    /// - Host: `""`, the domain and each parent suffix (`a.b.c` → `a.b.c`, `b.c`, `c`), or the
    ///   IP address's text (IPv6 without brackets).
    pub fn for_each_probe(&self, f: &mut dyn FnMut(&str)) {
        f("");
        match self {
            Value::Text(text) => glob::text_probes(text, &mut |end| f(&text[..end])),
            Value::Shell {
                written,
                normalized,
            } => {
                let written = written.join(" ");
                let normalized = normalized.join(" ");
                let mut seen = Vec::new();
                glob::text_probes(&written, &mut |end| {
                    seen.push(end);
                    f(&written[..end]);
                });
                glob::text_probes(&normalized, &mut |end| {
                    let dup = written
                        .as_bytes()
                        .starts_with(&normalized.as_bytes()[..end])
                        && seen.contains(&end);
                    if !dup {
                        f(&normalized[..end]);
                    }
                });
            }
            Value::Path { lexical, resolved } => {
                path::probes(lexical, &mut |end| f(&lexical[..end]));
                if let Some(resolved) = resolved {
                    path::probes(resolved, &mut |end| {
                        let dup = lexical.as_bytes().starts_with(&resolved.as_bytes()[..end])
                            && path::is_probe_end(lexical, end);
                        if !dup {
                            f(&resolved[..end]);
                        }
                    });
                }
            }
            Value::Host(host) | Value::OtherScheme(host) => domain::probes(host, f),
            Value::Missing => {}
        }
    }

    /// The probes of [`Value::for_each_probe`] whose length's bit is set in `lens` (bit `n` for
    /// length `n`, bit 63 for 63 and longer), perhaps some twice: what an index whose keys
    /// have only those lengths needs, at a fraction of the cost.
    pub(crate) fn for_each_probe_of_lengths(&self, lens: u64, f: &mut dyn FnMut(&str)) {
        let want = |end: usize| lens & (1 << end.min(63)) != 0;
        if want(0) {
            f("");
        }
        match self {
            Value::Text(text) => {
                glob::text_probes_of_lengths(text, lens, &mut |end| f(&text[..end]));
            }
            Value::Shell {
                written,
                normalized,
            } => {
                for words in [written, normalized] {
                    if !words.is_empty() {
                        let text = words.join(" ");
                        glob::text_probes_of_lengths(&text, lens, &mut |end| f(&text[..end]));
                    }
                }
            }
            Value::Path { lexical, resolved } => {
                for path in std::iter::once(lexical).chain(resolved) {
                    path::probes(path, &mut |end| {
                        if want(end) {
                            f(&path[..end]);
                        }
                    });
                }
            }
            Value::Host(host) | Value::OtherScheme(host) => domain::probes(host, &mut |probe| {
                if want(probe.len()) {
                    f(probe);
                }
            }),
            Value::Missing => {}
        }
    }
}

/// A compiled specifier (without the leading `!` of a carve-out).
#[derive(Debug, Clone)]
pub struct Pattern {
    kind: MatcherKind,
    spec: String,
    key: String,
    imp: Imp,
}

/// The compiled form of each kind.
#[derive(Debug, Clone)]
enum Imp {
    Prefix(glob::PrefixPattern),
    /// `glob` and `shell`.
    Glob(glob::GlobPattern),
    Path(path::PathPattern),
    Domain(domain::DomainPattern),
}

impl Pattern {
    /// Compiles `spec` for `kind`; `env` anchors relative and `~/` path patterns.
    ///
    /// - `prefix`: `x:*` matches text starting with `x`; any other spec is exact equality.
    /// - `glob`: `*` is any run (spaces and `/` included); `?` and `[` are literal; `x:*` means
    ///   `x` or `x *`; `:*` alone matches everything. Case-sensitive.
    /// - `shell`: the glob rules over the command's words joined by single spaces; runs of
    ///   whitespace outside quotes in the spec count as one space. Allow rules
    ///   ([`View::Permit`]) see the words as written, deny and ask rules the normalized argv.
    /// - `path`: gitignore-style globs (`*`, `?` and `[…]` stay within one component, `**` crosses
    ///   components, `\` escapes, braces are literal) over a normalized absolute path. `/x` and
    ///   `//x` are absolute, `~/x` is under [`PathEnv::home`], anything else is relative to
    ///   [`PathEnv::project_root`]: a pattern without a `/` (but for a trailing one) matches at any
    ///   depth (`*.pem` = `<root>/**/*.pem`), one with a `/` is anchored at the root (a leading
    ///   `./` is dropped). A trailing `/` is ignored (no pattern can tell folders from files). A
    ///   pattern also matches everything beneath what it matches (`/etc` matches `/etc/passwd`).
    ///   A trailing `:*` means "any path starting with this text": `.env:*` matches `.env`,
    ///   `.env.example` and `.env/x`. `.` and `..` in the pattern are resolved lexically.
    ///   Deny/ask ([`View::Restrict`]) match if the lexical *or* the resolved path matches; allow
    ///   ([`View::Permit`]) needs the lexical *and* the resolved path (when known) to match.
    /// - `domain`: `domain:host` is that exact host, `domain:*.suffix` any host strictly below
    ///   `suffix` (`*.example.com` matches `a.example.com` and `a.b.example.com`, **not**
    ///   `example.com`). Hosts are normalized as in URLs (IDNA → punycode, lower-case, trailing
    ///   dot ignored). An IP spec (`domain:127.0.0.1`, `domain:[::1]`) matches only that IP, and a
    ///   domain spec never matches an IP host. A port, path, userinfo or empty host is an error.
    ///
    /// ```
    /// use std::path::PathBuf;
    /// use warden_policy::matcher::{MatcherKind, PathEnv, Pattern, Value, View};
    ///
    /// let env = PathEnv { project_root: PathBuf::from("/repo"), home: None };
    /// let rule = Pattern::compile(MatcherKind::Glob, "git push * main", &env)?;
    /// let call = Value::Text("git push --force origin main".to_owned());
    /// assert!(rule.matches(&call, View::Restrict));
    ///
    /// let rule = Pattern::compile(MatcherKind::Path, "*.pem", &env)?;
    /// let call = Value::Path { lexical: "/repo/keys/a.pem".to_owned(), resolved: None };
    /// assert!(rule.matches(&call, View::Permit));
    ///
    /// assert!(Pattern::compile(MatcherKind::Domain, "domain:example.com:443", &env).is_err());
    /// # Ok::<(), warden_policy::matcher::PatternError>(())
    /// ```
    pub fn compile(kind: MatcherKind, spec: &str, env: &PathEnv) -> Result<Pattern, PatternError> {
        Self::compile_folded(kind, spec, env, false)
    }

    /// [`Pattern::compile`], with `path` patterns comparing without regard to letter case when
    /// `fold_case` (a case-insensitive file system).
    pub fn compile_folded(
        kind: MatcherKind,
        spec: &str,
        env: &PathEnv,
        fold_case: bool,
    ) -> Result<Pattern, PatternError> {
        let err = |why: String| PatternError {
            kind: kind.name(),
            spec: spec.to_owned(),
            why,
        };
        let (imp, key) = match kind {
            MatcherKind::Prefix => {
                let (p, key) = glob::PrefixPattern::compile(spec);
                (Imp::Prefix(p), key)
            }
            MatcherKind::Glob => {
                let (p, key) = glob::GlobPattern::compile(spec);
                (Imp::Glob(p), key)
            }
            MatcherKind::Shell => {
                let (p, key) = glob::GlobPattern::compile_shell(spec);
                (Imp::Glob(p), key)
            }
            MatcherKind::Path => {
                let (p, key) = path::PathPattern::compile(spec, env, fold_case).map_err(err)?;
                (Imp::Path(p), key)
            }
            MatcherKind::Domain => {
                let (p, key) = domain::DomainPattern::compile(spec).map_err(err)?;
                (Imp::Domain(p), key)
            }
        };
        Ok(Pattern {
            kind,
            spec: spec.to_owned(),
            key,
            imp,
        })
    }

    /// The matcher kind this pattern was compiled for.
    pub fn kind(&self) -> MatcherKind {
        self.kind
    }

    /// The specifier as written.
    pub fn spec(&self) -> &str {
        &self.spec
    }

    /// Whether the pattern matches `value`, seen from `view`. A value of another kind than the
    /// pattern's, and [`Value::Missing`], match nothing. Never allocates.
    pub fn matches(&self, value: &Value, view: View) -> bool {
        match (&self.imp, value) {
            (Imp::Prefix(p), Value::Text(text)) => p.matches(text),
            (Imp::Glob(p), Value::Text(text)) if self.kind == MatcherKind::Glob => {
                p.matches_text(text)
            }
            (
                Imp::Glob(p),
                Value::Shell {
                    written,
                    normalized,
                },
            ) if self.kind == MatcherKind::Shell => match view {
                View::Permit => p.matches_words(written),
                View::Restrict => p.matches_words(normalized),
            },
            (Imp::Path(p), Value::Path { lexical, resolved }) => {
                let resolved = resolved.as_deref();
                match view {
                    View::Restrict => p.matches(lexical) || resolved.is_some_and(|r| p.matches(r)),
                    View::Permit => p.matches(lexical) && resolved.is_none_or(|r| p.matches(r)),
                }
            }
            (Imp::Domain(p), Value::Host(host)) => p.matches(host),
            (Imp::Domain(p), Value::OtherScheme(host)) => view == View::Restrict && p.matches(host),
            _ => false,
        }
    }

    /// A literal string such that whenever [`matches`](Pattern::matches) is true (in any view),
    /// [`Value::for_each_probe`] yields this key; `""` means "always a candidate".
    ///
    /// - Text and shell: the exact text of an exact pattern; else the literal start of the
    ///   pattern up to a word boundary (at most 8 spaces deep), or up to 32 bytes of its first
    ///   word when the literal start has no space.
    /// - Path: the whole absolute path of a pattern without glob characters; else its literal
    ///   folder before the first glob character (without the trailing `/`; `""` at the root).
    /// - Domain: the host for an exact spec, the suffix for `*.suffix`, the IP's text for an IP.
    pub fn index_key(&self) -> &str {
        &self.key
    }
}

/// A specifier that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} pattern `{spec}`: {why}")]
pub struct PatternError {
    /// The matcher kind's name (`"path"`, `"domain"`, …).
    pub kind: &'static str,
    /// The specifier as written.
    pub spec: String,
    /// Why it does not compile (lower-case, no trailing period).
    pub why: String,
}
