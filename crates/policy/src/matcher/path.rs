//! The `path` matcher: gitignore-style globs (via `globset`) over normalized absolute paths.

use std::path::Path;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use super::{MAX_KEY_BYTES, PathEnv, Value};

/// A compiled `path` spec: the pattern and "everything beneath it".
#[derive(Debug, Clone)]
pub(super) struct PathPattern {
    /// The glob engine's matcher, built only for a pattern without a fast form.
    set: Option<GlobSet>,
    /// The same match without the glob engine, for the common literal shapes.
    fast: Option<Fast>,
    /// Paths compare without regard to letter case.
    fold: bool,
}

/// A pattern whose match is a string comparison (normalized paths have no `//`, no `.` or
/// `..` segment and no trailing `/`).
#[derive(Debug, Clone)]
enum Fast {
    /// A literal path: it and everything beneath it (`/` itself: every absolute path).
    AtOrBeneath(String),
    /// `<literal>/**`: everything strictly beneath the literal folder.
    Beneath(String),
}

impl Fast {
    fn of(base: &str, any_suffix: bool) -> Option<Fast> {
        if any_suffix {
            return None;
        }
        if let Some(lit) = unescape_literal(base) {
            return Some(Fast::AtOrBeneath(lit));
        }
        let dir = base.strip_suffix("/**")?;
        let lit = if dir.is_empty() {
            String::new()
        } else {
            unescape_literal(dir)?
        };
        Some(Fast::Beneath(lit))
    }

    fn matches(&self, path: &str) -> bool {
        match self {
            Fast::AtOrBeneath(lit) if lit == "/" => path.starts_with('/'),
            Fast::AtOrBeneath(lit) => path
                .strip_prefix(lit.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/')),
            // `/**` matches `/` too.
            Fast::Beneath(lit) if lit.is_empty() => path.starts_with('/'),
            Fast::Beneath(lit) => path
                .strip_prefix(lit.as_str())
                .and_then(|rest| rest.strip_prefix('/'))
                .is_some_and(|rest| !rest.is_empty()),
        }
    }
}

/// The text an escaped glob matches, when it has no glob metacharacter.
fn unescape_literal(glob: &str) -> Option<String> {
    let mut out = String::with_capacity(glob.len());
    let mut chars = glob.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?),
            '*' | '?' | '[' | ']' | '{' | '}' => return None,
            _ => out.push(c),
        }
    }
    Some(out)
}

/// One component of an absolute pattern.
enum Comp<'a> {
    /// From the project root or home folder: every character is literal.
    Literal(&'a str),
    /// Written in the spec: glob syntax, but braces are literal.
    Glob(&'a str),
}

impl PathPattern {
    /// Compiles a `path` spec; returns the pattern and its index key.
    pub(super) fn compile(
        spec: &str,
        env: &PathEnv,
        fold: bool,
    ) -> Result<(PathPattern, String), String> {
        Self::compile_with(spec, env, fold, true)
    }

    /// [`Self::compile`]; `use_fast: false` always builds the glob engine's matcher and uses
    /// it (the tests hold the fast forms to it).
    fn compile_with(
        spec: &str,
        env: &PathEnv,
        fold: bool,
        use_fast: bool,
    ) -> Result<(PathPattern, String), String> {
        let (body, any_suffix) = match spec.strip_suffix(":*") {
            Some(body) => (body, true),
            None => (spec, false),
        };
        if body.is_empty() {
            return Err("empty path".to_owned());
        }
        let mut comps: Vec<Comp<'_>> = Vec::new();
        let rest = if body.starts_with('/') {
            body
        } else if body == "~" || body.starts_with("~/") {
            let home = env
                .home
                .as_deref()
                .ok_or_else(|| "`~/` needs a home folder, and none is known".to_owned())?;
            push_literal(&mut comps, home, "home folder")?;
            &body[1..]
        } else {
            push_literal(&mut comps, &env.project_root, "project root")?;
            let trimmed = body.trim_end_matches('/');
            let anchored = trimmed.contains('/') || trimmed == "." || trimmed == "..";
            if !anchored {
                comps.push(Comp::Glob("**"));
            }
            body
        };
        push_parts(&mut comps, rest, Comp::Glob);

        let mut base = String::new();
        for comp in &comps {
            base.push('/');
            match comp {
                Comp::Literal(s) => escape_all(s, &mut base),
                Comp::Glob(s) => escape_braces(s, &mut base),
            }
        }
        if base.is_empty() {
            base.push('/');
        }
        if any_suffix {
            base.push('*');
        }
        let key = cap_key(literal_key(&base));
        // Index keys are compared as written: a folded pattern is a candidate for every path.
        let key = if fold { String::new() } else { key };
        let fast = if !use_fast {
            None
        } else if fold {
            Fast::of(&base.to_lowercase(), any_suffix)
        } else {
            Fast::of(&base, any_suffix)
        };
        // A pattern with a fast form is a literal path (or a literal folder and `/**`), which
        // the glob engine would parse and accept: its matcher, most of the cost of compiling a
        // rule, is not built.
        let set = match fast {
            Some(_) => None,
            None => Some(glob_set(base, fold)?),
        };
        Ok((PathPattern { set, fast, fold }, key))
    }

    pub(super) fn matches(&self, path: &str) -> bool {
        match &self.fast {
            Some(fast) if self.fold => fast.matches(&path.to_lowercase()),
            Some(fast) => fast.matches(path),
            None => self.set.as_ref().is_some_and(|set| set.is_match(path)),
        }
    }
}

/// The glob engine's matcher for `base` and everything beneath it.
fn glob_set(base: String, fold: bool) -> Result<GlobSet, String> {
    let beneath = if base == "/" {
        "/**".to_owned()
    } else {
        format!("{base}/**")
    };
    let mut set = GlobSetBuilder::new();
    for glob in [base, beneath] {
        let glob = GlobBuilder::new(&glob)
            .literal_separator(true)
            .backslash_escape(true)
            .case_insensitive(fold)
            .build()
            .map_err(|e| format!("bad glob: {}", e.kind()))?;
        set.add(glob);
    }
    set.build().map_err(|e| format!("bad glob: {}", e.kind()))
}

/// Pushes the normalized components of an absolute folder from the environment.
fn push_literal<'a>(comps: &mut Vec<Comp<'a>>, dir: &'a Path, what: &str) -> Result<(), String> {
    let text = dir
        .to_str()
        .ok_or_else(|| format!("the {what} is not valid UTF-8"))?;
    if !text.starts_with('/') {
        return Err(format!("the {what} `{text}` is not absolute"));
    }
    push_parts(comps, text, Comp::Literal);
    Ok(())
}

/// Pushes the `/`-separated parts of `text` as `comp`s, lexically: `.` and empty parts are
/// dropped, `..` drops the component before it.
fn push_parts<'a>(comps: &mut Vec<Comp<'a>>, text: &'a str, comp: fn(&'a str) -> Comp<'a>) {
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                comps.pop();
            }
            _ => comps.push(comp(part)),
        }
    }
}

/// Escapes every glob metacharacter: the text matches itself only.
fn escape_all(text: &str, out: &mut String) {
    for c in text.chars() {
        if matches!(c, '\\' | '*' | '?' | '[' | ']' | '{' | '}') {
            out.push('\\');
        }
        out.push(c);
    }
}

/// Escapes `{` and `}` (alternation is not part of the syntax), keeping `\x` escapes as written.
fn escape_braces(text: &str, out: &mut String) {
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                out.push(c);
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            }
            '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
}

/// The index key of an (escaped) absolute glob: the whole path when it has no glob
/// metacharacter (`""` for `/`), else its literal folder before the first one, without the
/// trailing `/` (`""` at the root).
fn literal_key(glob: &str) -> String {
    let mut literal = String::new();
    let mut chars = glob.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(next) => literal.push(next),
                None => break,
            },
            '*' | '?' | '[' => {
                literal.truncate(literal.rfind('/').unwrap_or(0));
                return literal;
            }
            _ => literal.push(c),
        }
    }
    if literal == "/" {
        literal.clear();
    }
    literal
}

/// Prepares a path field: see [`Value::prepare`].
pub(super) fn prepare(text: &str, cwd: &Path, env: &PathEnv, resolved: Option<&str>) -> Value {
    if text.is_empty() {
        return Value::Missing;
    }
    let lexical = if text.starts_with('/') {
        normalize(None, text)
    } else if text == "~" || text.starts_with("~/") {
        match env.home.as_deref().and_then(Path::to_str) {
            Some(home) => normalize(Some(home), &text[1..]),
            None => return Value::Missing,
        }
    } else {
        match cwd.to_str() {
            Some(cwd) => normalize(Some(cwd), text),
            None => return Value::Missing,
        }
    };
    let resolved = match resolved {
        Some(r) if r.starts_with('/') => Some(normalize(None, r)),
        Some(r) if !r.is_empty() => match cwd.to_str() {
            Some(cwd) => Some(normalize(Some(cwd), r)),
            None => return Value::Missing,
        },
        _ => None,
    };
    Value::Path { lexical, resolved }
}

/// `base/text`, with `.`, `..` and repeated `/` resolved lexically; always absolute, never above
/// `/`, no trailing `/` (except `/` itself).
fn normalize(base: Option<&str>, text: &str) -> String {
    if base.is_none() && is_normal(text) {
        return text.to_owned();
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in base.into_iter().chain([text]).flat_map(|s| s.split('/')) {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    if parts.is_empty() {
        return "/".to_owned();
    }
    let mut out = String::with_capacity(text.len() + base.map_or(0, str::len) + 1);
    for part in parts {
        out.push('/');
        out.push_str(part);
    }
    out
}

/// Whether `path` is already what [`normalize`] makes of it: absolute, and no segment empty,
/// `.` or `..` (so no `//` and no trailing `/`, except `/` itself).
fn is_normal(path: &str) -> bool {
    if path == "/" {
        return true;
    }
    path.strip_prefix('/')
        .is_some_and(|rest| rest.split('/').all(|seg| !matches!(seg, "" | "." | "..")))
}

/// Calls `f(end)` for every non-empty probe `path[..end]` of at most [`MAX_KEY_BYTES`]: the
/// path before each `/` and the whole path. Keys are never longer (see [`cap_key`]), and the
/// bound keeps a value's probes constant work: a probe costs its length to hash, and a path
/// of `d` folders has `d` of them, so unbounded probes would cost a deep path's length squared.
pub(super) fn probes(path: &str, f: &mut dyn FnMut(usize)) {
    let head = &path.as_bytes()[..path.len().min(MAX_KEY_BYTES + 1)];
    for (i, &b) in head.iter().enumerate().skip(1) {
        if b == b'/' {
            f(i);
        }
    }
    if !path.is_empty() && path.len() <= MAX_KEY_BYTES {
        f(path.len());
    }
}

/// A path key cut to at most [`MAX_KEY_BYTES`]: the longest of its folders that fits (`""` for
/// none). Every path under the key is under that folder too, so it still probes the key.
fn cap_key(key: String) -> String {
    if key.len() <= MAX_KEY_BYTES {
        return key;
    }
    let end = key.as_bytes()[..=MAX_KEY_BYTES]
        .iter()
        .rposition(|&b| b == b'/')
        .unwrap_or(0);
    key[..end].to_owned()
}

/// Whether `end` is one of the probe ends of `path` (see [`probes`]).
pub(super) fn is_probe_end(path: &str, end: usize) -> bool {
    end > 0 && (end == path.len() || path.as_bytes().get(end) == Some(&b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes() {
        assert_eq!(normalize(Some("/a/b"), "../c/./d//e/"), "/a/c/d/e");
        assert_eq!(normalize(Some("/a"), "../../.."), "/");
        assert_eq!(normalize(None, "//x"), "/x");
        for p in ["/", "/a", "/a/b.c", "/a/..b/.c"] {
            assert!(is_normal(p), "{p}");
            assert_eq!(normalize(None, p), p);
        }
        for p in ["//a", "/a/", "/a/./b", "/a/../b", "/.", "/..", "a/b", ""] {
            assert!(!is_normal(p), "{p}");
        }
    }

    /// The fast path agrees with the glob engine on every shape it takes over.
    #[test]
    fn fast_path_agrees_with_globset() {
        let env = PathEnv {
            project_root: "/repo".into(),
            home: Some("/home/u".into()),
        };
        let specs = [
            "/",
            "/**",
            "/etc",
            "/etc/**",
            "src",
            "src/**",
            "/repo/a b/**",
            "//abs/x",
            "~/.ssh",
            "~/.ssh/**",
            "/r/\\*x",
            "/r/\\*x/**",
            "/r/a\\{b\\}",
            "./docs",
            "../up/**",
        ];
        let paths = [
            "/",
            "/etc",
            "/etc/passwd",
            "/etcx",
            "/etc/a/b",
            "/repo/src",
            "/repo/src/lib.rs",
            "/repo/srcx",
            "/repo/a b/c",
            "/repo/a b",
            "/abs/x",
            "/abs/x/y",
            "/home/u/.ssh",
            "/home/u/.ssh/id",
            "/r/*x",
            "/r/*x/y",
            "/r/ax",
            "/r/a{b}",
            "/repo/docs/a",
            "/up/z",
            "/up",
        ];
        let mut fast_seen = 0;
        for spec in specs {
            let (pattern, _) = PathPattern::compile(spec, &env, false).unwrap();
            let Some(fast) = &pattern.fast else {
                continue;
            };
            let (slow, _) = PathPattern::compile_with(spec, &env, false, false).unwrap();
            fast_seen += 1;
            for path in paths {
                assert_eq!(
                    fast.matches(path),
                    slow.matches(path),
                    "{spec} on {path}: {fast:?}"
                );
            }
        }
        assert!(fast_seen >= 12, "only {fast_seen} specs took the fast path");
    }

    #[test]
    fn keys() {
        assert_eq!(literal_key("/etc"), "/etc");
        assert_eq!(literal_key("/"), "");
        assert_eq!(literal_key("/**"), "");
        assert_eq!(literal_key("/r/src/*.rs"), "/r/src");
        assert_eq!(literal_key("/r/\\*x/a*"), "/r/*x");
        assert_eq!(literal_key("/r/a\\{b\\}"), "/r/a{b}");
    }
}
