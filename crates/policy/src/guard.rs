//! Guards over content (agentpolicy's `guard`): what may enter or leave an agent's window.
//!
//! A guard looks at content, not at a call: the text a model is about to read (its input, a
//! tool's result) or the arguments it wrote for a tool (a hook payload). Three deterministic
//! checks ship here, run in this order by a [`GuardSet`]:
//!
//! 1. **size limit** (`max_bytes`): content larger than the limit is blocked (a JSON value is
//!    measured by its compact serialization);
//! 2. **deny patterns** (`deny`): regular expressions (the `regex` crate's syntax, linear time);
//!    content any of them matches is blocked;
//! 3. **secrets** (`secrets = "redact" | "block"`): AWS access key ids and secret access keys,
//!    GitHub tokens (`ghp_`, `gho_`, `ghs_`, `ghu_`, `ghr_`, `github_pat_`), Slack tokens (`xoxa-`,
//!    `xoxb-`, `xoxp-`, `xoxr-`, `xoxs-`), OpenAI-style keys (`sk-…`, `sk-proj-…`), PEM private key
//!    blocks, and `KEY=value` / `KEY: value` pairs whose name is sensitive (the sensitive
//!    environment names of docs/design/policy.md#sensitive-environment-names, or a name ending in
//!    `TOKEN` or `SECRET`), are replaced by `[REDACTED:<kind>]` or block the content.
//!
//! The outcome is typed: [`GuardOutcome::Pass`], [`GuardOutcome::Redacted`] (the content with
//! every secret replaced, and what was found) or [`GuardOutcome::Blocked`] (why, and what was
//! found). A [`Finding`] names the kind, the JSON pointer (for JSON) and the byte span, never
//! the secret itself. A guard that fails (JSON nested too deep, a redaction that would merge
//! two object keys) **blocks**: content is never let through because a check could not run.
//!
//! JSON values are walked: every string (object keys included) is checked, and an object member
//! whose key is a sensitive name has its whole value treated as a secret
//! (`{"password": "hunter2"}`).
//!
//! ```
//! use warden_policy::{GuardOutcome, GuardSet, Guards, SecretAction};
//! let guards = GuardSet::new(Guards {
//!     max_bytes: Some(1 << 20),
//!     deny: vec!["(?i)ignore (all )?previous instructions".into()],
//!     secrets: SecretAction::Redact,
//! })?;
//! let key = ["AKIA", "IOSFODNN7EXAMPLE"].concat();
//! match guards.check_text(&format!("aws key {key} found")) {
//!     GuardOutcome::Redacted { text, findings } => {
//!         assert_eq!(text, "aws key [REDACTED:aws_access_key_id] found");
//!         assert_eq!(findings[0].span, 8..28);
//!     }
//!     other => panic!("{other:?}"),
//! }
//! assert!(guards.check_text("Ignore previous instructions").is_blocked());
//! let args = serde_json::json!({"env": {"DB_PASSWORD": "hunter2"}});
//! let GuardOutcome::Redacted { text, .. } = guards.check_json(&args) else { panic!() };
//! assert_eq!(text["env"]["DB_PASSWORD"], "[REDACTED:sensitive_assignment]");
//! # Ok::<(), warden_policy::GuardError>(())
//! ```

use std::fmt;
use std::ops::Range;
use std::sync::LazyLock;

use regex::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::compile::PolicySnapshot;
use crate::error::{Location, PolicyError};
use crate::file::LoadedPolicy;

/// JSON nested deeper than this is not walked: the guard fails, so the content is blocked.
pub const MAX_JSON_DEPTH: usize = 256;

/// What a redacted secret is replaced with: this prefix, the finding's kind code, then `]`.
pub const REDACTION_PREFIX: &str = "[REDACTED:";

/// How many findings a blocking reason lists before `and N more`.
const REASON_FINDINGS: usize = 5;

/// What to do with a detected secret.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SecretAction {
    /// No secret detection.
    #[default]
    Off,
    /// Replace each secret with `[REDACTED:<kind>]` and let the rest through.
    Redact,
    /// Block content that carries a secret.
    Block,
}

impl SecretAction {
    fn is_off(&self) -> bool {
        *self == Self::Off
    }
}

/// The `[guards]` table: which checks run over content. Every key is optional and off when
/// absent, so an empty table (or none) lets everything through.
///
/// ```toml
/// [guards]
/// max_bytes = 1048576                                  # larger content is blocked
/// deny = ["(?i)ignore (all )?previous instructions"]   # a match blocks
/// secrets = "redact"                                   # off | redact | block
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Guards {
    /// Content larger than this many bytes is blocked (a JSON value: its compact serialization).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Regular expressions (the Rust `regex` crate's syntax); content any of them matches is
    /// blocked. In JSON, each string is matched on its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// What to do with a detected secret: `off` (the default), `redact` or `block`.
    #[serde(default, skip_serializing_if = "SecretAction::is_off")]
    pub secrets: SecretAction,
}

impl Guards {
    /// The stricter of two tables: the smaller size limit, every deny pattern of both, and the
    /// stricter secret action (block > redact > off).
    pub fn strictest(&self, other: &Self) -> Self {
        let max_bytes = match (self.max_bytes, other.max_bytes) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut deny = self.deny.clone();
        for p in &other.deny {
            if !deny.contains(p) {
                deny.push(p.clone());
            }
        }
        Self {
            max_bytes,
            deny,
            secrets: self.secrets.max(other.secrets),
        }
    }
}

/// What a guard found. It names the kind and where, never the content it found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FindingKind {
    /// An AWS access key id (`AKIA…`, `ASIA…`, 20 characters).
    AwsAccessKeyId,
    /// An AWS secret access key (40 characters after an `aws_secret_access_key`-like name).
    AwsSecretAccessKey,
    /// A GitHub token (`ghp_`, `gho_`, `ghs_`, `ghu_`, `ghr_`, `github_pat_`).
    GithubToken,
    /// A Slack token (`xoxa-`, `xoxb-`, `xoxp-`, `xoxr-`, `xoxs-`).
    SlackToken,
    /// An OpenAI-style secret key (`sk-…`, `sk-proj-…`).
    OpenaiKey,
    /// A PEM private key block (from its `BEGIN` line to its `END` line, or to the end).
    PrivateKey,
    /// The value of a `KEY=value` / `KEY: value` pair (or a JSON member) with a sensitive name.
    SensitiveAssignment,
    /// A match of one of the guard's deny patterns.
    DenyPattern,
    /// The content is larger than the guard's limit.
    SizeLimit,
}

impl FindingKind {
    /// The stable code (`github_token`, `deny_pattern`, …), also used in redaction markers.
    pub fn code(self) -> &'static str {
        match self {
            Self::AwsAccessKeyId => "aws_access_key_id",
            Self::AwsSecretAccessKey => "aws_secret_access_key",
            Self::GithubToken => "github_token",
            Self::SlackToken => "slack_token",
            Self::OpenaiKey => "openai_key",
            Self::PrivateKey => "private_key",
            Self::SensitiveAssignment => "sensitive_assignment",
            Self::DenyPattern => "deny_pattern",
            Self::SizeLimit => "size_limit",
        }
    }

    /// Whether this is a secret (as opposed to a deny pattern or the size limit).
    pub fn is_secret(self) -> bool {
        !matches!(self, Self::DenyPattern | Self::SizeLimit)
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// One thing a guard found: its kind and where it is, never the content itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Finding {
    /// What was found.
    pub kind: FindingKind,
    /// The byte span in the string that holds it (the whole text, or the JSON string at
    /// `pointer`), in the content as it was given (before any redaction).
    pub span: Range<usize>,
    /// For JSON content, the JSON pointer (RFC 6901) of the string that holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
    /// Whether the string is an object key (the pointer then names that member).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub in_key: bool,
    /// What matched, when that is not a secret: the sensitive name of an assignment
    /// (`DB_PASSWORD`) or the deny pattern as declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl Finding {
    fn new(kind: FindingKind, span: Range<usize>) -> Self {
        Self {
            kind,
            span,
            pointer: None,
            in_key: false,
            label: None,
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.code())?;
        if let Some(label) = &self.label {
            if self.kind == FindingKind::DenyPattern {
                write!(f, " `{label}`")?;
            } else {
                write!(f, " ({label})")?;
            }
        }
        f.write_str(" at ")?;
        if let Some(p) = &self.pointer {
            let p = if p.is_empty() { "/" } else { p.as_str() };
            write!(f, "{p} ")?;
            if self.in_key {
                f.write_str("(key) ")?;
            }
        }
        write!(f, "bytes {}..{}", self.span.start, self.span.end)
    }
}

/// What a guard decided about content.
#[derive(Debug, Clone, PartialEq)]
pub enum GuardOutcome<T = String> {
    /// Nothing found: the content goes through unchanged.
    Pass,
    /// Secrets were found and replaced: `text` is the content to use instead (a string, or a
    /// JSON value for [`GuardSet::check_json`]); it holds no byte of any finding.
    Redacted {
        /// The redacted content.
        text: T,
        /// What was replaced.
        findings: Vec<Finding>,
    },
    /// The content must not go through.
    Blocked {
        /// Why, for a person and the model (names kinds and places, never a secret).
        reason: String,
        /// What was found (empty when the guard itself failed).
        findings: Vec<Finding>,
    },
}

impl<T> GuardOutcome<T> {
    /// Whether the content is blocked.
    pub fn is_blocked(&self) -> bool {
        matches!(self, Self::Blocked { .. })
    }

    /// What was found (empty for [`GuardOutcome::Pass`]).
    pub fn findings(&self) -> &[Finding] {
        match self {
            Self::Pass => &[],
            Self::Redacted { findings, .. } | Self::Blocked { findings, .. } => findings,
        }
    }
}

/// Why a guard could not be built or could not run. When checking, every one of these means
/// the content is blocked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    /// A deny pattern is not a valid regular expression.
    #[error("deny pattern {index} `{pattern}` is not a valid regular expression: {message}")]
    InvalidPattern {
        /// Its position in `deny`.
        index: usize,
        /// The pattern as declared.
        pattern: String,
        /// The regex compiler's message.
        message: String,
    },
    /// The JSON value is nested deeper than [`MAX_JSON_DEPTH`].
    #[error("the JSON value is nested deeper than {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// Redacting an object key would make it equal to another key of the same object.
    #[error("redacting a key of the object at {pointer} would collide with another key")]
    KeyCollision {
        /// The object (its pointer, with any secret in it redacted).
        pointer: String,
    },
    /// A guard failed inside (a built-in detector did not compile, the size could not be
    /// measured).
    #[error("{0}")]
    Internal(String),
}

/// A compiled `[guards]` table, ready to check content. Built once per policy; checking is
/// pure and deterministic. An empty set passes everything without looking.
#[derive(Debug, Clone, Default)]
pub struct GuardSet {
    declared: Guards,
    deny: Vec<Regex>,
}

impl GuardSet {
    /// Compiles a `[guards]` table (its deny patterns).
    pub fn new(guards: Guards) -> Result<Self, GuardError> {
        let deny = guards
            .deny
            .iter()
            .enumerate()
            .map(|(index, pattern)| {
                RegexBuilder::new(pattern)
                    .build()
                    .map_err(|e| GuardError::InvalidPattern {
                        index,
                        pattern: pattern.clone(),
                        message: first_line(&e.to_string()),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            declared: guards,
            deny,
        })
    }

    /// The table this set was compiled from.
    pub fn declared(&self) -> &Guards {
        &self.declared
    }

    /// Whether no check is configured (every content passes).
    pub fn is_empty(&self) -> bool {
        self.declared.max_bytes.is_none() && self.deny.is_empty() && self.declared.secrets.is_off()
    }

    /// The stricter of two sets (see [`Guards::strictest`]), without recompiling.
    pub fn strictest(&self, other: &Self) -> Self {
        let declared = self.declared.strictest(&other.declared);
        let mut deny = self.deny.clone();
        for (pattern, re) in other.declared.deny.iter().zip(&other.deny) {
            if !self.declared.deny.contains(pattern) {
                deny.push(re.clone());
            }
        }
        Self { declared, deny }
    }

    /// Checks text (a model's input, a tool's result, a message). A failure blocks.
    pub fn check_text(&self, text: &str) -> GuardOutcome<String> {
        self.try_check_text(text).unwrap_or_else(failed)
    }

    /// Checks a JSON value (a hook payload, tool arguments, a structured result): every string
    /// is checked, object keys included, and a member with a sensitive name has its whole
    /// string or number value treated as a secret. A failure blocks.
    pub fn check_json(&self, value: &Value) -> GuardOutcome<Value> {
        self.try_check_json(value).unwrap_or_else(failed)
    }

    fn try_check_text(&self, text: &str) -> Result<GuardOutcome<String>, GuardError> {
        if self.is_empty() {
            return Ok(GuardOutcome::Pass);
        }
        if let Some(blocked) = self.size_check(text.len() as u64, None) {
            return Ok(blocked);
        }
        let mut denied = Vec::new();
        self.deny_scan(text, &mut denied);
        let secrets = if self.declared.secrets.is_off() {
            Vec::new()
        } else {
            scan_secrets(text)?
        };
        if !denied.is_empty() {
            denied.extend(secrets);
            return Ok(blocked("content matches a deny pattern", denied));
        }
        if secrets.is_empty() {
            return Ok(GuardOutcome::Pass);
        }
        Ok(match self.declared.secrets {
            SecretAction::Redact => GuardOutcome::Redacted {
                text: redact(text, &secrets),
                findings: secrets,
            },
            _ => blocked("content carries a secret", secrets),
        })
    }

    fn try_check_json(&self, value: &Value) -> Result<GuardOutcome<Value>, GuardError> {
        if self.is_empty() {
            return Ok(GuardOutcome::Pass);
        }
        if self.declared.max_bytes.is_some() {
            let mut counter = ByteCounter(0);
            serde_json::to_writer(&mut counter, value)
                .map_err(|e| GuardError::Internal(format!("cannot measure the content: {e}")))?;
            if let Some(blocked) = self.size_check(counter.0, Some(String::new())) {
                return Ok(blocked);
            }
        }
        let mut walk = Walk {
            set: self,
            denied: Vec::new(),
            secrets: Vec::new(),
            redact: self.declared.secrets == SecretAction::Redact,
        };
        let mut pointer = String::new();
        let rebuilt = walk.value(value, &mut pointer, 0)?;
        if !walk.denied.is_empty() {
            let mut findings = walk.denied;
            findings.extend(walk.secrets);
            return Ok(blocked("content matches a deny pattern", findings));
        }
        if walk.secrets.is_empty() {
            return Ok(GuardOutcome::Pass);
        }
        Ok(match (self.declared.secrets, rebuilt) {
            (SecretAction::Redact, Some(text)) => GuardOutcome::Redacted {
                text,
                findings: walk.secrets,
            },
            (SecretAction::Redact, None) => {
                return Err(GuardError::Internal(
                    "secrets were found but nothing was redacted".into(),
                ));
            }
            _ => blocked("content carries a secret", walk.secrets),
        })
    }

    fn size_check<T>(&self, len: u64, pointer: Option<String>) -> Option<GuardOutcome<T>> {
        let max = self.declared.max_bytes?;
        if len <= max {
            return None;
        }
        let mut finding = Finding::new(
            FindingKind::SizeLimit,
            0..usize::try_from(len).unwrap_or(usize::MAX),
        );
        finding.pointer = pointer;
        Some(GuardOutcome::Blocked {
            reason: format!("content is {len} bytes, over the guard's limit of {max} bytes"),
            findings: vec![finding],
        })
    }

    fn deny_scan(&self, text: &str, out: &mut Vec<Finding>) {
        for (re, pattern) in self.deny.iter().zip(&self.declared.deny) {
            if let Some(m) = re.find(text) {
                let mut f = Finding::new(FindingKind::DenyPattern, m.range());
                f.label = Some(pattern.clone());
                out.push(f);
            }
        }
    }
}

/// A failed guard blocks.
fn failed<T>(e: GuardError) -> GuardOutcome<T> {
    GuardOutcome::Blocked {
        reason: format!("the guard failed ({e}), so the content is blocked"),
        findings: Vec::new(),
    }
}

fn blocked<T>(what: &str, findings: Vec<Finding>) -> GuardOutcome<T> {
    let mut listed: Vec<String> = findings
        .iter()
        .take(REASON_FINDINGS)
        .map(ToString::to_string)
        .collect();
    if findings.len() > REASON_FINDINGS {
        listed.push(format!("and {} more", findings.len() - REASON_FINDINGS));
    }
    GuardOutcome::Blocked {
        reason: format!("{what}: {}", listed.join("; ")),
        findings,
    }
}

/// Counts serialized bytes without keeping them.
struct ByteCounter(u64);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len() as u64);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One walk over a JSON value: findings with pointers, and the redacted copy when redacting.
struct Walk<'a> {
    set: &'a GuardSet,
    denied: Vec<Finding>,
    secrets: Vec<Finding>,
    redact: bool,
}

impl Walk<'_> {
    /// Checks `v`; returns its redacted copy when redacting changed something under it.
    fn value(
        &mut self,
        v: &Value,
        pointer: &mut String,
        depth: usize,
    ) -> Result<Option<Value>, GuardError> {
        if depth > MAX_JSON_DEPTH {
            return Err(GuardError::TooDeep {
                limit: MAX_JSON_DEPTH,
            });
        }
        match v {
            Value::String(s) => Ok(self.string(s, pointer)?.map(Value::String)),
            Value::Array(items) => {
                let mut changed: Vec<(usize, Value)> = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&i.to_string());
                    let new = self.value(item, pointer, depth + 1)?;
                    pointer.truncate(len);
                    if let Some(new) = new {
                        changed.push((i, new));
                    }
                }
                if changed.is_empty() {
                    return Ok(None);
                }
                let mut out = items.clone();
                for (i, new) in changed {
                    out[i] = new;
                }
                Ok(Some(Value::Array(out)))
            }
            Value::Object(members) => self.object(members, pointer, depth),
            Value::Null | Value::Bool(_) | Value::Number(_) => Ok(None),
        }
    }

    fn object(
        &mut self,
        members: &Map<String, Value>,
        pointer: &mut String,
        depth: usize,
    ) -> Result<Option<Value>, GuardError> {
        let mut any = false;
        let mut out: Vec<(String, Value)> = Vec::with_capacity(members.len());
        for (key, item) in members {
            // The key first: a secret in it is redacted in every pointer under it too, so no
            // finding or reason ever spells it out.
            let mut key_denied = Vec::new();
            self.set.deny_scan(key, &mut key_denied);
            let key_secrets = if self.set.declared.secrets.is_off() {
                Vec::new()
            } else {
                scan_secrets(key)?
            };
            let safe_key = (!key_secrets.is_empty()).then(|| redact(key, &key_secrets));
            let len = pointer.len();
            pointer.push('/');
            push_escaped(pointer, safe_key.as_deref().unwrap_or(key));
            for mut f in key_denied {
                f.pointer = Some(pointer.clone());
                f.in_key = true;
                self.denied.push(f);
            }
            for mut f in key_secrets {
                f.pointer = Some(pointer.clone());
                f.in_key = true;
                self.secrets.push(f);
            }
            let new_item = match self.sensitive_member(key, item, pointer) {
                Some(whole) => {
                    // Deny patterns still see the value; its secret is the whole value.
                    if let Value::String(s) = item {
                        self.deny_only(s, pointer);
                    }
                    whole
                }
                None => self.value(item, pointer, depth + 1)?,
            };
            pointer.truncate(len);
            let new_key = if self.redact { safe_key } else { None };
            any |= new_key.is_some() || new_item.is_some();
            let key_out = match new_key {
                Some(k) => {
                    if members.contains_key(&k) || out.iter().any(|(o, _)| *o == k) {
                        return Err(GuardError::KeyCollision {
                            pointer: if pointer.is_empty() {
                                "/".into()
                            } else {
                                pointer.clone()
                            },
                        });
                    }
                    k
                }
                None => key.clone(),
            };
            out.push((key_out, new_item.unwrap_or_else(|| item.clone())));
        }
        if !any {
            return Ok(None);
        }
        Ok(Some(Value::Object(out.into_iter().collect())))
    }

    /// A member whose key is a sensitive name and whose value is a plausible literal: the
    /// whole value is one finding. Returns the replacement when redacting.
    fn sensitive_member(
        &mut self,
        key: &str,
        item: &Value,
        pointer: &str,
    ) -> Option<Option<Value>> {
        if self.set.declared.secrets.is_off() || !is_sensitive_name(key) {
            return None;
        }
        let text = match item {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => return None,
        };
        if !is_plausible_value(&text) {
            return None;
        }
        let mut f = Finding::new(FindingKind::SensitiveAssignment, 0..text.len());
        f.pointer = Some(pointer.to_owned());
        f.label = Some(key.to_owned());
        self.secrets.push(f);
        Some(
            self.redact
                .then(|| Value::String(marker(FindingKind::SensitiveAssignment))),
        )
    }

    fn deny_only(&mut self, s: &str, pointer: &str) {
        let mut found = Vec::new();
        self.set.deny_scan(s, &mut found);
        for mut f in found {
            f.pointer = Some(pointer.to_owned());
            self.denied.push(f);
        }
    }

    /// Checks one string value; returns its redacted form when redacting changed it.
    fn string(&mut self, s: &str, pointer: &str) -> Result<Option<String>, GuardError> {
        self.deny_only(s, pointer);
        if self.set.declared.secrets.is_off() {
            return Ok(None);
        }
        let found = scan_secrets(s)?;
        if found.is_empty() {
            return Ok(None);
        }
        let redacted = self.redact.then(|| redact(s, &found));
        for mut f in found {
            f.pointer = Some(pointer.to_owned());
            self.secrets.push(f);
        }
        Ok(redacted)
    }
}

/// Appends `key` to a JSON pointer, escaped per RFC 6901.
fn push_escaped(pointer: &mut String, key: &str) {
    for c in key.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

fn marker(kind: FindingKind) -> String {
    format!("{REDACTION_PREFIX}{}]", kind.code())
}

/// `text` with every finding's span replaced by its marker (overlapping spans merged; the
/// earliest finding names the marker).
fn redact(text: &str, findings: &[Finding]) -> String {
    let mut spans: Vec<(Range<usize>, FindingKind)> =
        findings.iter().map(|f| (f.span.clone(), f.kind)).collect();
    spans.sort_by(|a, b| {
        a.0.start
            .cmp(&b.0.start)
            .then_with(|| b.0.end.cmp(&a.0.end))
    });
    let mut merged: Vec<(Range<usize>, FindingKind)> = Vec::new();
    for (span, kind) in spans {
        match merged.last_mut() {
            Some((last, _)) if span.start < last.end => last.end = last.end.max(span.end),
            _ => merged.push((span, kind)),
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (span, kind) in merged {
        out.push_str(text.get(at..span.start).unwrap_or(""));
        out.push_str(&marker(kind));
        at = span.end;
    }
    out.push_str(text.get(at..).unwrap_or(""));
    out
}

fn first_line(s: &str) -> String {
    // The regex crate's messages are several lines with a caret diagram; keep the last line,
    // which says what is wrong.
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .trim_start_matches("error: ")
        .to_owned()
}

// ---------------------------------------------------------------------------------------------
// Secret detection.

/// The sensitive environment names (docs/design/policy.md#sensitive-environment-names): a name
/// containing any of these is sensitive.
pub const SENSITIVE_NAMES: [&str; 15] = [
    "API_KEY",
    "API_SECRET",
    "API_TOKEN",
    "ACCESS_TOKEN",
    "AUTH_TOKEN",
    "AWS_SECRET",
    "AWS_SESSION_TOKEN",
    "CREDENTIAL",
    "DATABASE_URL",
    "DB_PASSWORD",
    "PASSWORD",
    "PRIVATE_KEY",
    "REFRESH_TOKEN",
    "SECRET_KEY",
    "SERVICE_TOKEN",
];

/// A name's canonical spelling: camelCase split at case changes, `-`, `.` and spaces as `_`,
/// upper case (`apiKey` and `api-key` → `API_KEY`).
fn normalize_name(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
            if prev.is_ascii_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_ascii_uppercase() && next_lower)
            {
                out.push('_');
            }
        }
        match c {
            '-' | '.' | ' ' => out.push('_'),
            c => out.push(c.to_ascii_uppercase()),
        }
    }
    out
}

/// [`SENSITIVE_NAMES`] without their underscores.
const SENSITIVE_SQUASHED: [&str; 15] = [
    "APIKEY",
    "APISECRET",
    "APITOKEN",
    "ACCESSTOKEN",
    "AUTHTOKEN",
    "AWSSECRET",
    "AWSSESSIONTOKEN",
    "CREDENTIAL",
    "DATABASEURL",
    "DBPASSWORD",
    "PASSWORD",
    "PRIVATEKEY",
    "REFRESHTOKEN",
    "SECRETKEY",
    "SERVICETOKEN",
];

/// Every sensitive name contains one of these, in any letter case: a cheap first filter (and
/// the assignment detector's candidates, see [`ASSIGNMENT`]).
const NAME_KEYWORDS: [&str; 6] = [
    "key",
    "token",
    "secret",
    "password",
    "credential",
    "database",
];

fn contains_keyword(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    NAME_KEYWORDS.iter().any(|k| lower.contains(k))
}

/// Whether a variable or key name is sensitive: it contains a name of [`SENSITIVE_NAMES`]
/// (with or without its underscores: `APIKEY` too) or ends in `TOKEN` or `SECRET`.
pub fn is_sensitive_name(name: &str) -> bool {
    if !contains_keyword(name) {
        return false;
    }
    let n = normalize_name(name);
    let squashed: String = n.chars().filter(|&c| c != '_').collect();
    n.ends_with("TOKEN")
        || n.ends_with("SECRET")
        || SENSITIVE_NAMES.iter().any(|s| n.contains(s))
        || SENSITIVE_SQUASHED.iter().any(|s| squashed.contains(s))
}

/// Whether an assigned value looks like a literal secret rather than a reference, a
/// placeholder, code or an earlier redaction.
fn is_plausible_value(v: &str) -> bool {
    let v = v.trim();
    if v.is_empty()
        || v.starts_with(['$', '%', '{', '<'])
        || v.starts_with(REDACTION_PREFIX)
        || v.contains('(')
        || v.chars().all(|c| matches!(c, '*' | 'x' | 'X' | '.' | '-'))
    {
        return false;
    }
    !matches!(
        v.to_ascii_lowercase().as_str(),
        "null" | "none" | "nil" | "true" | "false" | "undefined"
    )
}

fn has_digit_upper_lower(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit())
        && s.bytes().any(|b| b.is_ascii_uppercase())
        && s.bytes().any(|b| b.is_ascii_lowercase())
}

fn any_token(_: &str) -> bool {
    true
}

fn slack_ok(s: &str) -> bool {
    s.len() >= 20 && s.bytes().any(|b| b.is_ascii_digit())
}

fn openai_ok(s: &str) -> bool {
    let body = s.trim_start_matches("sk-");
    let body = ["proj-", "svcacct-", "admin-"]
        .iter()
        .find_map(|p| body.strip_prefix(p))
        .unwrap_or(body);
    has_digit_upper_lower(body)
}

/// A token detector: its kind, the regex that finds the token itself, and a filter.
struct Detector {
    kind: FindingKind,
    regex: Regex,
    accept: fn(&str) -> bool,
}

/// The built-in detectors, compiled once per process. Every regex here is only ever asked for
/// match positions (no capture groups, so matching stays on the fast DFA engines); the parts
/// around a match are read by hand.
struct Detectors {
    tokens: Vec<Detector>,
    aws_secret_name: Regex,
    assignment_head: Regex,
    pem_begin: Regex,
    pem_end: Regex,
}

/// How one token detector is declared. ASCII word boundaries: a Unicode `\b` would slow
/// matching on non-ASCII text.
struct TokenSpec {
    kind: FindingKind,
    pattern: &'static str,
    accept: fn(&str) -> bool,
}

/// PEM blocks and AWS secret keys need context: [`scan_pem`], [`scan_aws_secret`].
const TOKEN_PATTERNS: [TokenSpec; 4] = [
    TokenSpec {
        kind: FindingKind::AwsAccessKeyId,
        pattern: r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z2-7]{16}(?-u:\b)",
        accept: any_token,
    },
    TokenSpec {
        kind: FindingKind::GithubToken,
        pattern: r"(?-u:\b)(?:(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9]{20,}_[A-Za-z0-9]{40,})(?-u:\b)",
        accept: any_token,
    },
    TokenSpec {
        kind: FindingKind::SlackToken,
        pattern: r"(?-u:\b)xox[abprs]-[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+",
        accept: slack_ok,
    },
    TokenSpec {
        kind: FindingKind::OpenaiKey,
        pattern: r"(?-u:\b)sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        accept: openai_ok,
    },
];

/// An AWS secret key's name and separator (`aws_secret_access_key = `, `"SecretAccessKey": "`);
/// the 40 characters after it are read by hand.
const AWS_SECRET_NAME: &str = r#"(?i-u:aws[_-]?secret(?:[_-]?access)?[_-]?key|secret[_-]?access[_-]?key)(?:\\?["'])?[ \t]*(?::=|[:=])[ \t]*(?:\\?["'])?"#;

/// The head of `NAME=value`, `NAME: value`, `NAME := value`: the name (optionally quoted, or
/// quoted with escaped quotes, as in JSON inside a string) and the separator. The value after
/// it (double-quoted, single-quoted or bare) is read by [`assignment_value`].
const ASSIGNMENT_HEAD: &str =
    r#"(?:^|[^A-Za-z0-9_.])(?:\\?["'])?[A-Za-z_][A-Za-z0-9_.\-]*(?:\\?["'])?[ \t]*(?::=|[:=])"#;

/// A PEM private key's first and last lines. A block counts when a key body (a run of 32
/// base-64 characters) starts within [`PEM_BODY_WITHIN`] bytes of its first line; it ends at
/// its last line, or at the end of the content when cut short.
const PEM_BEGIN: &str = r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----";
const PEM_END: &str = r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----";
const PEM_BODY_WITHIN: usize = 200;

fn is_base64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

/// Whether a run of 32 base-64 characters starts within the first `within` bytes of `bytes`.
fn has_key_body(bytes: &[u8], within: usize) -> bool {
    let mut run = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        if is_base64(b) {
            run += 1;
            if run >= 32 {
                return true;
            }
        } else {
            if i >= within {
                return false;
            }
            run = 0;
        }
    }
    false
}

fn scan_pem(d: &Detectors, text: &str, out: &mut Vec<Finding>) {
    let mut at = 0;
    while let Some(begin) = d.pem_begin.find_at(text, at) {
        let body = &text.as_bytes()[begin.end()..];
        if has_key_body(body, PEM_BODY_WITHIN) {
            let stop = d
                .pem_end
                .find_at(text, begin.end())
                .map_or(text.len(), |end| end.end());
            out.push(Finding::new(FindingKind::PrivateKey, begin.start()..stop));
            at = stop;
        } else {
            at = begin.end();
        }
    }
}

/// Exactly 40 base-64 characters right after an AWS secret key's name, not followed by more.
fn scan_aws_secret(d: &Detectors, text: &str, out: &mut Vec<Finding>) {
    let bytes = text.as_bytes();
    for m in d.aws_secret_name.find_iter(text) {
        let start = m.end();
        let run = bytes[start..].iter().take_while(|&&b| is_base64(b)).count();
        let next = bytes.get(start + run).copied();
        if run == 40 && next != Some(b'=') {
            out.push(Finding::new(
                FindingKind::AwsSecretAccessKey,
                start..start + 40,
            ));
        }
    }
}

/// The name in an [`ASSIGNMENT_HEAD`] match: after the prefix character and any quote.
fn assignment_name(text: &str, head: Range<usize>) -> Range<usize> {
    let bytes = text.as_bytes();
    let mut i = head.start;
    // The prefix character, unless the match starts the text with the name or its quote.
    let starts_name = |b: u8| b.is_ascii_alphabetic() || matches!(b, b'_' | b'"' | b'\'' | b'\\');
    if !(i == 0 && bytes.first().copied().is_some_and(starts_name)) {
        i += text[i..].chars().next().map_or(1, char::len_utf8);
    }
    if bytes.get(i) == Some(&b'\\') {
        i += 1;
    }
    if matches!(bytes.get(i), Some(b'"' | b'\'')) {
        i += 1;
    }
    let end = i + bytes[i..head.end]
        .iter()
        .take_while(|&&b| is_name_byte(b))
        .count();
    i..end
}

/// The value after an assignment's separator (at `at`): `\"…\"`, `"…"`, `'…'` (none across a
/// line end) or a bare run up to whitespace, a quote, `,`, `;`, `&` or `\`. Its span, without
/// quotes.
fn assignment_value(text: &str, at: usize) -> Option<Range<usize>> {
    let bytes = text.as_bytes();
    let mut i = at;
    while matches!(bytes.get(i), Some(b' ' | b'\t')) {
        i += 1;
    }
    let quoted = |open: usize, close: &[u8], stop: &[u8]| -> Option<Range<usize>> {
        let body = bytes.get(open..)?;
        let len = body.iter().take_while(|b| !stop.contains(b)).count();
        let end = open + len;
        bytes.get(end..)?.starts_with(close).then_some(open..end)
    };
    match (bytes.get(i), bytes.get(i + 1)) {
        (Some(b'\\'), Some(b'"')) => quoted(i + 2, b"\\\"", b"\"\\\r\n"),
        (Some(b'"'), _) => quoted(i + 1, b"\"", b"\"\r\n"),
        (Some(b'\''), _) => quoted(i + 1, b"'", b"'\r\n"),
        (Some(&b), _) if !b.is_ascii_whitespace() && !b"\"',;&\\=>:".contains(&b) => {
            let len = bytes[i..]
                .iter()
                .take_while(|&&b| !b.is_ascii_whitespace() && !b"\"',;&\\".contains(&b))
                .count();
            Some(i..i + len)
        }
        _ => None,
    }
}

fn detectors() -> Result<&'static Detectors, GuardError> {
    static DETECTORS: LazyLock<Result<Detectors, String>> = LazyLock::new(|| {
        let compile = |what: &str, pattern: &str| {
            Regex::new(pattern).map_err(|e| format!("{what} detector: {e}"))
        };
        let tokens = TOKEN_PATTERNS
            .iter()
            .map(|spec| {
                Ok(Detector {
                    kind: spec.kind,
                    regex: compile(spec.kind.code(), spec.pattern)?,
                    accept: spec.accept,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Detectors {
            tokens,
            aws_secret_name: compile("aws secret key", AWS_SECRET_NAME)?,
            assignment_head: compile("assignment", ASSIGNMENT_HEAD)?,
            pem_begin: compile("private key", PEM_BEGIN)?,
            pem_end: compile("private key", PEM_END)?,
        })
    });
    DETECTORS
        .as_ref()
        .map_err(|e| GuardError::Internal(e.clone()))
}

/// Every secret in `text`, sorted by position. An assignment whose value is (or holds) a
/// token is reported once, as the token.
fn scan_secrets(text: &str) -> Result<Vec<Finding>, GuardError> {
    let d = detectors()?;
    let mut tokens: Vec<Finding> = Vec::new();
    for det in &d.tokens {
        for m in det.regex.find_iter(text) {
            if (det.accept)(m.as_str()) {
                tokens.push(Finding::new(det.kind, m.range()));
            }
        }
    }
    scan_aws_secret(d, text, &mut tokens);
    scan_pem(d, text, &mut tokens);
    let mut found = tokens.clone();
    let mut at = 0;
    while at < text.len() {
        let Some(head) = d.assignment_head.find_at(text, at) else {
            break;
        };
        let name = assignment_name(text, head.range());
        // Always past the name, so an assignment inside a value is still seen (`env: API_KEY=…`).
        at = name.end.max(at + 1);
        let name_text = &text[name.clone()];
        if !is_sensitive_name(name_text) {
            continue;
        }
        let Some(value) = assignment_value(text, head.end()) else {
            continue;
        };
        if !is_plausible_value(&text[value.clone()]) {
            continue;
        }
        at = at.max(value.end);
        if tokens
            .iter()
            .any(|t| t.span.start < value.end && value.start < t.span.end)
        {
            continue;
        }
        let mut f = Finding::new(FindingKind::SensitiveAssignment, value);
        f.label = Some(name_text.to_owned());
        found.push(f);
    }
    found.sort_by(|a, b| {
        a.span
            .start
            .cmp(&b.span.start)
            .then_with(|| b.span.end.cmp(&a.span.end))
            .then_with(|| a.kind.cmp(&b.kind))
    });
    found.dedup();
    Ok(found)
}

// ---------------------------------------------------------------------------------------------
// The policy file and the snapshot.

/// Compiles a file's `[guards]` table, naming the file, line and pointer of a bad pattern.
pub(crate) fn compile_file_guards(
    policy: &LoadedPolicy,
    guards: &Guards,
) -> Result<GuardSet, PolicyError> {
    GuardSet::new(guards.clone()).map_err(|e| {
        let (line, pointer) = match &e {
            GuardError::InvalidPattern { index, pattern, .. } => (
                policy.line_of(pattern),
                Some(format!("/guards/deny/{index}")),
            ),
            _ => (policy.line_of("guards"), Some("/guards".into())),
        };
        PolicyError::Syntax {
            at: Location {
                file: policy.label.clone(),
                line,
                pointer,
            },
            message: e.to_string(),
        }
    })
}

impl PolicySnapshot {
    /// The policy's guards over content (`[guards]`; with several files, the strictest of
    /// them). Empty when no file declares any: every content passes.
    pub fn guards(&self) -> &GuardSet {
        &self.guards
    }
}
