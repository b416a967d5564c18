//! `warden check` (docs/design/policy.md#the-warden-check-json-line, a contract) and `warden
//! explain`.
//!
//! Input is validated whole before anything is decided: an invalid `--args`, or any invalid
//! line of a `--calls` file, is exit 2 with nothing printed on stdout. A `--calls` file is
//! decided line by line as it is parsed, into one buffer that reaches stdout only after the last
//! line (a decision is pure: nothing of it leaves the process before then); when the policy does
//! not load, the file is checked first, so its bad line is the error, as when it was read whole.

use std::io::{Read as _, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;
use serde_json::{Value, json};
use warden_policy::{
    Call, PolicySnapshot, ScopeAuthority, ScopeStage, ScopeVerdict, Verdict, edge,
};

use crate::error::CliError;
use crate::{CheckArgs, ExplainArgs, OutputFormat, args_object, load};

/// One line of `warden check --format json`, as serde writes it: the contract's shape.
/// [`write_json`] writes the same bytes by hand, and a test holds it to this.
#[cfg(test)]
#[derive(Serialize)]
struct CheckLine<'a> {
    decision: &'a str,
    rule: Option<&'a str>,
    source: Option<&'a str>,
    reason: &'a str,
    subjects: SubjectLines<'a>,
    policy_digest: &'a str,
    /// With `--scope`: how the scope chain decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    scope: Option<ScopeLine<'a>>,
}

/// How a scope chain decided (`warden check --scope`).
#[derive(Serialize)]
struct ScopeLine<'a> {
    /// The scope the call was made in.
    caller: &'a str,
    /// The scope whose policy decided.
    decided_by: &'a str,
    stage: ScopeStage,
    authorities: &'a [ScopeAuthority],
    scope_digest: &'a str,
}

#[cfg(test)]
#[derive(Serialize)]
struct SubjectLine<'a> {
    text: &'a str,
    tool: &'a str,
    decision: &'a str,
    rule: Option<&'a str>,
}

fn cwd(arg: Option<&PathBuf>) -> Result<PathBuf, CliError> {
    match arg {
        Some(dir) => load::absolute(dir),
        None => {
            std::env::current_dir().map_err(|e| CliError::Input(format!("current directory: {e}")))
        }
    }
}

/// A `--calls` file (the call log `warden replay` reads too), read once into memory: every line
/// is parsed, decided and written into one output buffer, and the buffer reaches stdout only
/// when every line was valid, so a bad line prints nothing. A line is parsed straight into one
/// reused [`Call`], borrowing its strings from the line; a line that parse does not take (an
/// unknown or repeated key, an escaped key, a wrong type) goes through [`documented_call`],
/// which accepts or refuses it, with its message, exactly as the reader always has.
struct CallsFile<'p> {
    path: &'p Path,
    bytes: Vec<u8>,
    /// A read that failed after `bytes`: reported at the line after the last one read.
    read_error: Option<std::io::Error>,
}

impl<'p> CallsFile<'p> {
    /// Opens and reads the file; a file that does not open is an error at once.
    fn read(path: &'p Path) -> Result<Self, CliError> {
        let mut file = std::fs::File::open(path)
            .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))?;
        let mut bytes = Vec::new();
        let read_error = file.read_to_end(&mut bytes).err();
        Ok(Self {
            path,
            bytes,
            read_error,
        })
    }

    fn error(&self, line: usize, what: impl std::fmt::Display) -> CliError {
        CliError::Input(format!("{}:{line}: {what}", self.path.display()))
    }

    /// Every call in file order, each parsed into the one `call` `f` receives; the first bad
    /// line is the error, and `f` has seen only the lines before it.
    fn each_call(
        &self,
        cwd: &Path,
        mut f: impl FnMut(&mut Call) -> Result<(), CliError>,
    ) -> Result<(), CliError> {
        let mut call = Call::new(String::new(), Value::Null);
        let mut rest = self.bytes.as_slice();
        let mut number = 0;
        while !rest.is_empty() {
            number += 1;
            // As `BufRead::lines` cuts them: at `\n`, a `\r` before it dropped too.
            let line = match rest.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    let line = &rest[..end];
                    rest = &rest[end + 1..];
                    line.strip_suffix(b"\r").unwrap_or(line)
                }
                None => std::mem::take(&mut rest),
            };
            let text = std::str::from_utf8(line)
                .map_err(|_| self.error(number, "stream did not contain valid UTF-8"))?;
            if text.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<CallLine<'_>>(text) {
                Ok(line) if !line.tool.is_empty() && line.args.is_object() => {
                    call.tool.clear();
                    call.tool.push_str(line.tool);
                    call.args = line.args;
                    let dir = call.cwd.get_or_insert_with(PathBuf::new);
                    dir.as_mut_os_string().clear();
                    dir.push(cwd);
                    if let Some(relative) = line.cwd {
                        dir.push(relative);
                    }
                    call.resolved_paths.clear();
                }
                _ => call = documented_call(text, cwd).map_err(|e| self.error(number, e))?,
            }
            f(&mut call)?;
        }
        match &self.read_error {
            Some(e) => Err(self.error(number + 1, e)),
            None => Ok(()),
        }
    }

    /// Whether every line is a valid call (the error of the first that is not).
    fn validate(&self, cwd: &Path) -> Result<(), CliError> {
        self.each_call(cwd, |_| Ok(()))
    }
}

/// One line of a `--calls` file as the fast parse takes it: the four keys at most once each,
/// strings without escapes borrowed from the line. Anything else is refused (with no message:
/// [`documented_call`] says why, or accepts the line after all).
struct CallLine<'a> {
    tool: &'a str,
    args: Value,
    cwd: Option<&'a str>,
}

impl<'de> serde::Deserialize<'de> for CallLine<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(CallLineVisitor)
    }
}

struct CallLineVisitor;

impl<'de> serde::de::Visitor<'de> for CallLineVisitor {
    type Value = CallLine<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a call")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error as _;
        let (mut tool, mut args, mut time, mut cwd) = (None, None, None, None);
        while let Some(key) = map.next_key::<&'de str>()? {
            match key {
                "tool" if tool.is_none() => tool = Some(map.next_value::<&'de str>()?),
                "args" if args.is_none() => args = Some(map.next_value::<Value>()?),
                "time" if time.is_none() => time = Some(map.next_value::<Option<&'de str>>()?),
                "cwd" if cwd.is_none() => cwd = Some(map.next_value::<Option<&'de str>>()?),
                _ => return Err(A::Error::custom("not a plain call")),
            }
        }
        match (tool, args) {
            (Some(tool), Some(args)) => Ok(CallLine {
                tool,
                args,
                cwd: cwd.flatten(),
            }),
            _ => Err(A::Error::custom("not a plain call")),
        }
    }
}

/// One line as the documented reader takes it (a JSON object, then
/// `warden_harness::transcript::warden_call`), with its messages.
fn documented_call(text: &str, cwd: &Path) -> Result<Call, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    let Value::Object(obj) = value else {
        return Err("a call is a JSON object {\"tool\":…,\"args\":…}".into());
    };
    Ok(warden_harness::transcript::warden_call(&obj, Some(cwd))?.call)
}

/// What `warden check` decides: one call from `--tool`/`--args`, or a `--calls` file.
enum Input<'p> {
    One(Call),
    Calls(CallsFile<'p>),
}

impl Input<'_> {
    fn each_call(
        &self,
        cwd: &Path,
        mut f: impl FnMut(&mut Call) -> Result<(), CliError>,
    ) -> Result<(), CliError> {
        match self {
            Input::One(call) => f(&mut call.clone()),
            Input::Calls(file) => file.each_call(cwd, f),
        }
    }

    /// A policy that does not load is reported after the input's own errors, as when the
    /// input was read whole first.
    fn or_input_error<T>(&self, cwd: &Path, loaded: Result<T, CliError>) -> Result<T, CliError> {
        loaded.or_else(|e| match self {
            Input::Calls(file) => file.validate(cwd).and(Err(e)),
            Input::One(_) => Err(e),
        })
    }
}

pub(crate) fn run_check(a: &CheckArgs, out: &mut impl Write) -> Result<ExitCode, CliError> {
    let cwd = cwd(a.cwd.as_ref())?;
    let input = match (&a.tool, &a.args, &a.calls) {
        (Some(tool), Some(args), None) => {
            Input::One(Call::new(tool.clone(), Value::Object(args_object(args)?)).with_cwd(&cwd))
        }
        (None, None, Some(path)) => Input::Calls(CallsFile::read(path)?),
        _ => {
            return Err(CliError::Input(
                "give either --tool NAME --args JSON, or --calls FILE.jsonl".into(),
            ));
        }
    };
    // Every verdict goes into one buffer that reaches stdout only once every line was valid.
    let mut buf = Vec::with_capacity(match &input {
        Input::One(_) => 512,
        Input::Calls(file) => file.bytes.len().saturating_mul(4),
    });
    if let Some(name) = &a.scope {
        let loaded = load::scope(&a.policy.files(), a.policy.project_root.as_deref(), name);
        let scope = input.or_input_error(&cwd, loaded)?;
        let chain = scope.chain();
        // Every scope shares the path environment: the root's policy resolves the paths.
        let root = chain.first().and_then(|s| s.policy());
        input.each_call(&cwd, |call| {
            if let Some(root) = root {
                edge::resolve_call_paths(root, call);
            }
            let sv = scope.decide(call);
            match a.format {
                OutputFormat::Json => write_json(&mut buf, &sv.verdict, Some(&sv)),
                OutputFormat::Text => write_text(&mut buf, call, &sv.verdict, &sv.reason),
            }
        })?;
    } else {
        let snapshot = input.or_input_error(&cwd, a.policy.snapshot())?;
        input.each_call(&cwd, |call| {
            edge::resolve_call_paths(&snapshot, call);
            let verdict = snapshot.decide(call);
            match a.format {
                OutputFormat::Json => write_json(&mut buf, &verdict, None),
                OutputFormat::Text => write_text(&mut buf, call, &verdict, &verdict.reason),
            }
        })?;
    }
    out.write_all(&buf)?;
    Ok(ExitCode::SUCCESS)
}

/// A verdict's subjects, serialized as the JSON line's `subjects` array.
#[cfg(test)]
struct SubjectLines<'a>(&'a [warden_policy::SubjectVerdict]);

#[cfg(test)]
impl Serialize for SubjectLines<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|s| SubjectLine {
            text: &s.text,
            tool: &s.tool,
            decision: s.decision.as_str(),
            rule: s.rule.as_deref(),
        }))
    }
}

/// How a scope chain decided, for the JSON line.
fn scope_line(s: &ScopeVerdict) -> ScopeLine<'_> {
    ScopeLine {
        caller: &s.caller,
        decided_by: &s.scope,
        stage: s.stage,
        authorities: &s.authorities,
        scope_digest: s.scope_digest.as_str(),
    }
}

/// One JSON line (the fields of `CheckLine`); with `--scope`, the reason is the scope verdict's (it names
/// the deciding scope) and a `scope` object says how the chain decided. Written by hand, the
/// strings escaped eight bytes at a time ([`json_str`]): serde's escaping, a byte at a time,
/// was most of the cost of a line.
fn write_json(
    out: &mut Vec<u8>,
    v: &Verdict,
    scope: Option<&ScopeVerdict>,
) -> Result<(), CliError> {
    out.extend_from_slice(b"{\"decision\":");
    json_word(out, v.decision.as_str());
    out.extend_from_slice(b",\"rule\":");
    json_opt_str(out, v.rule.as_deref());
    out.extend_from_slice(b",\"source\":");
    json_opt_str(out, v.source.as_deref());
    out.extend_from_slice(b",\"reason\":");
    json_str(out, scope.map_or(&v.reason, |s| &s.reason));
    out.extend_from_slice(b",\"subjects\":[");
    for (i, s) in v.subjects.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"text\":");
        json_str(out, &s.text);
        out.extend_from_slice(b",\"tool\":");
        json_str(out, &s.tool);
        out.extend_from_slice(b",\"decision\":");
        json_word(out, s.decision.as_str());
        out.extend_from_slice(b",\"rule\":");
        json_opt_str(out, s.rule.as_deref());
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"policy_digest\":");
    json_str(out, v.policy_digest.as_str());
    if let Some(s) = scope {
        out.extend_from_slice(b",\"scope\":");
        serde_json::to_writer(&mut *out, &scope_line(s)).map_err(|e| CliError::Io(e.into()))?;
    }
    out.extend_from_slice(b"}\n");
    Ok(())
}

/// A word that needs no escaping (`allow`, `ask`, `deny`) as a JSON string.
fn json_word(out: &mut Vec<u8>, word: &'static str) {
    debug_assert!(word.bytes().all(|b| b.is_ascii_alphabetic()));
    out.push(b'"');
    out.extend_from_slice(word.as_bytes());
    out.push(b'"');
}

fn json_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => json_str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// `s` as a JSON string, escaped exactly as serde_json escapes it: `"` and `\`, the control
/// characters below U+0020 (`\b`, `\t`, `\n`, `\f`, `\r` by name, the others as `\u00xx`),
/// nothing else. Eight bytes at a time are tested at once and copied whole when none needs
/// escaping.
fn json_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut words {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        if needs_escape(u64::from_le_bytes(word)) {
            escape_bytes(out, bytes, at, chunk, &mut start);
        }
        at += 8;
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        // Padded with a byte that needs no escaping.
        let mut word = [b'a'; 8];
        word[..tail.len()].copy_from_slice(tail);
        if needs_escape(u64::from_le_bytes(word)) {
            escape_bytes(out, bytes, at, tail, &mut start);
        }
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Whether any of the eight bytes of `w` needs escaping in a JSON string: below 0x20, `"` or
/// `\` (exact for the word as a whole; a byte of 0x80 or more never counts).
fn needs_escape(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let below = |w: u64, n: u64| w.wrapping_sub(ONES * n) & !w & HIGHS != 0;
    below(w, 0x20)
        || below(w ^ (ONES * u64::from(b'"')), 1)
        || below(w ^ (ONES * u64::from(b'\\')), 1)
}

/// Escapes the bytes of `chunk` (at `at` in `bytes`) that need it, copying what came before
/// each since `start`.
fn escape_bytes(out: &mut Vec<u8>, bytes: &[u8], at: usize, chunk: &[u8], start: &mut usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (j, &b) in chunk.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..0x20 => &[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ],
            _ => continue,
        };
        let i = at + j;
        out.extend_from_slice(&bytes[*start..i]);
        out.extend_from_slice(escape);
        *start = i + 1;
    }
}

fn write_text(out: &mut Vec<u8>, call: &Call, v: &Verdict, reason: &str) -> Result<(), CliError> {
    write!(out, "{}: {}", call.tool, v.decision)?;
    match (&v.rule, &v.source) {
        (Some(r), Some(s)) => write!(out, " {r} [{s}]")?,
        (Some(r), None) => write!(out, " {r}")?,
        _ => {}
    }
    writeln!(out, ": {reason}")?;
    Ok(())
}

pub(crate) fn run_explain(a: &ExplainArgs, out: &mut impl Write) -> Result<ExitCode, CliError> {
    let cwd = cwd(a.cwd.as_ref())?;
    let args = a.call.arguments()?;
    let mut call = Call::new(a.call.tool.clone(), Value::Object(args)).with_cwd(&cwd);
    let Some(name) = &a.scope else {
        let snapshot = a.policy.snapshot()?;
        edge::resolve_call_paths(&snapshot, &mut call);
        match a.format {
            OutputFormat::Text => explain(out, &snapshot, &call)?,
            OutputFormat::Json => {
                let value = json!({
                    "policy": policy_json(&snapshot),
                    "call": {"tool": call.tool, "args": call.args},
                    "explanation": snapshot.explain(&call),
                });
                writeln!(out, "{value}")?;
            }
        }
        return Ok(ExitCode::SUCCESS);
    };
    let scope = load::scope(&a.policy.files(), a.policy.project_root.as_deref(), name)?;
    let chain = scope.chain();
    if let Some(root) = chain.first().and_then(|s| s.policy()) {
        edge::resolve_call_paths(root, &mut call);
    }
    let sv = scope.decide(&call);
    let names: Vec<&str> = chain.iter().map(|s| s.name()).collect();
    let decider = chain
        .iter()
        .find(|s| s.name() == &*sv.scope)
        .and_then(|s| s.policy());
    if a.format == OutputFormat::Json {
        let value = json!({
            "scope": {"chain": names, "verdict": sv},
            "policy": decider.map(|p| policy_json(p)),
            "call": {"tool": call.tool, "args": call.args},
            "explanation": decider.map(|p| p.explain(&call)),
        });
        writeln!(out, "{value}")?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "scope    {} (chain {})", sv.caller, names.join(" > "))?;
    writeln!(out, "decision: {}", sv.decision())?;
    writeln!(out, "reason:   {}", sv.reason)?;
    writeln!(
        out,
        "decided by scope {} ({})",
        sv.scope,
        stage_name(sv.stage)
    )?;
    for a in &sv.authorities {
        writeln!(
            out,
            "relies on scope {} expanding its parent under the authority {}",
            a.scope, a.authority
        )?;
    }
    writeln!(out, "scope digest {}", sv.scope_digest)?;
    if let Some(policy) = decider {
        writeln!(out)?;
        writeln!(out, "the policy of scope {}:", sv.scope)?;
        explain(out, policy, &call)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The policy an explanation is of: id, version and digest.
fn policy_json(snapshot: &PolicySnapshot) -> Value {
    json!({
        "id": snapshot.id(),
        "version": snapshot.version(),
        "digest": snapshot.digest().as_str(),
    })
}

/// How a scope verdict was reached, in words.
fn stage_name(stage: ScopeStage) -> &'static str {
    match stage {
        ScopeStage::AncestorDeny => "an ancestor's deny rules, asked first",
        ScopeStage::Own => "its own policy",
        ScopeStage::Inherited => "inherited: the calling scope has no policy of its own",
        ScopeStage::Stricter => "stricter than the calling scope's own verdict",
        ScopeStage::AncestorMode => "an ancestor's operating mode",
    }
}

fn explain(out: &mut impl Write, snapshot: &PolicySnapshot, call: &Call) -> Result<(), CliError> {
    let e = snapshot.explain(call);
    let v = &e.verdict;
    writeln!(
        out,
        "policy {} version {} ({})",
        snapshot.id(),
        snapshot.version(),
        snapshot.digest()
    )?;
    writeln!(out, "call   {} {}", call.tool, call.args)?;
    writeln!(out)?;
    writeln!(out, "decision: {}", v.decision)?;
    writeln!(out, "reason:   {}", v.reason)?;
    if let Some(rule) = &v.rule {
        writeln!(
            out,
            "rule:     {rule} (source {})",
            v.source.as_deref().unwrap_or("-")
        )?;
    }
    writeln!(out)?;
    if e.subjects.is_empty() {
        writeln!(
            out,
            "subjects: none (the call could not be split into subjects)"
        )?;
    }
    for (i, (trace, sv)) in e.subjects.iter().zip(&v.subjects).enumerate() {
        writeln!(
            out,
            "subject {}: {} [{}] → {}",
            i + 1,
            trace.text,
            trace.tool,
            sv.decision
        )?;
        if let Some(shell) = &trace.shell {
            writeln!(
                out,
                "  written (allow rules):        {}",
                shell.written.join(" ")
            )?;
            writeln!(
                out,
                "  normalized (deny/ask rules):  {}",
                shell.normalized.join(" ")
            )?;
            for r in &shell.also {
                writeln!(out, "  also tried by deny/ask rules: {}", r.join(" "))?;
            }
            for n in &shell.notes {
                writeln!(out, "  note: {n}")?;
            }
        }
        match (&sv.rule, &sv.source) {
            (Some(r), Some(s)) => writeln!(out, "  decided by {r} [{s}]")?,
            (Some(r), None) => writeln!(out, "  decided by {r}")?,
            _ => writeln!(out, "  decided by no rule")?,
        }
        writeln!(out, "  {}", sv.reason)?;
        if trace.matches.is_empty() {
            writeln!(out, "  no rule matches it")?;
        }
        for m in &trace.matches {
            let expanded = m
                .written
                .as_deref()
                .map(|w| format!(" (written {w})"))
                .unwrap_or_default();
            match &m.carved_out_by {
                Some((c, s)) => writeln!(
                    out,
                    "  {:<5} {}{expanded} [{}]: carved out by {c} [{s}]",
                    m.list.as_str(),
                    m.rule,
                    m.source
                )?,
                None => writeln!(
                    out,
                    "  {:<5} {}{expanded} [{}]: matches",
                    m.list.as_str(),
                    m.rule,
                    m.source
                )?,
            }
        }
    }
    writeln!(out)?;
    writeln!(out, "sources (evaluation order):")?;
    for s in snapshot.sources() {
        writeln!(
            out,
            "  {} rank {} {}{}",
            s.name,
            s.rank,
            if s.trusted { "trusted" } else { "untrusted" },
            if s.own { ", the file's own lists" } else { "" }
        )?;
        for w in &s.withheld {
            writeln!(
                out,
                "    withheld allow {w}: the source is not trusted, so its allow rules never apply"
            )?;
        }
    }
    writeln!(out, "default: {}", snapshot.default_decision())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;
    use warden_policy::{Decision, PolicyBuilder, Rule, RuleSet, Source};

    use super::*;

    fn serde_line(v: &Verdict, scope: Option<&ScopeVerdict>) -> Vec<u8> {
        let line = CheckLine {
            decision: v.decision.as_str(),
            rule: v.rule.as_deref(),
            source: v.source.as_deref(),
            reason: scope.map_or(&v.reason, |s| &s.reason),
            subjects: SubjectLines(&v.subjects),
            policy_digest: v.policy_digest.as_str(),
            scope: scope.map(scope_line),
        };
        let mut out = serde_json::to_vec(&line).unwrap();
        out.push(b'\n');
        out
    }

    #[test]
    fn every_character_below_0x80_is_escaped_as_serde_escapes_it() {
        let all: String = (0u8..0x80).map(char::from).collect();
        for s in [
            all.as_str(),
            "",
            "plain ascii text",
            "é\u{2028}\"\\",
            "0123456\u{1f}",
        ] {
            let mut out = Vec::new();
            json_str(&mut out, s);
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
    }

    proptest! {
        #[test]
        fn any_string_is_escaped_as_serde_escapes_it(s in any::<String>(), t in "[ -~\t\n\u{0}-\u{1f}é]{0,40}") {
            for s in [&s, &t] {
                let mut out = Vec::new();
                json_str(&mut out, s);
                prop_assert_eq!(out, serde_json::to_vec(s).unwrap());
            }
        }
    }

    #[test]
    fn a_verdict_line_is_the_bytes_serde_writes() {
        let mut set = RuleSet::default();
        set.allow.push(Rule::parse("bash(git status:*)").unwrap());
        set.deny.push(Rule::parse("read(/etc/**)").unwrap());
        set.ask
            .push(Rule::parse("web_fetch(domain:*.example.com)").unwrap());
        let snapshot = PolicyBuilder::new()
            .default(Decision::Ask)
            .own(Source::trusted("t\"1"), set)
            .build()
            .unwrap();
        let calls = [
            Call::new(
                "bash",
                json!({"command": "git status && rm -rf \"/\"\t> out\n"}),
            ),
            Call::new("read", json!({"path": "/etc/pass\u{7}wd"})),
            Call::new("web_fetch", json!({"url": "https://a.example.com/é"})),
            Call::new("mcp__x", json!({})),
            Call::new("bash", json!({"command": ""})),
        ];
        for call in &calls {
            let v = snapshot.decide(call);
            let mut out = Vec::new();
            write_json(&mut out, &v, None).unwrap();
            assert_eq!(
                String::from_utf8(out).unwrap(),
                String::from_utf8(serde_line(&v, None)).unwrap()
            );
        }
    }
}
