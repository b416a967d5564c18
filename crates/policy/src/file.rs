//! The policy file (docs/design/policy.md#the-policy-file, a contract): TOML or JSON of the same
//! shape, read strictly.
//!
//! Unknown keys are errors, and a reserved key this version does not implement yet is refused
//! by name, never silently ignored. Errors carry the file, the line (TOML and JSON) and the JSON
//! pointer of the offending value.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::decl::{Decision, Role, ToolProfile};
use crate::error::{Location, PolicyError};

/// The file formats a policy can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.toml`
    Toml,
    /// `.json`
    Json,
}

impl Format {
    /// The format of a path, from its extension.
    pub fn of_path(path: &Path) -> Option<Self> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => Some(Self::Toml),
            Some("json") => Some(Self::Json),
            _ => None,
        }
    }
}

/// A rule list as written: an array of rule strings, or one string of whitespace-separated
/// rules. Kept as written so a file round-trips losslessly.
#[derive(Debug, Clone, PartialEq, Eq, JsonSchema)]
#[schemars(untagged)]
pub enum RuleList {
    /// One string of whitespace-separated rules.
    One(String),
    /// One rule per element.
    Many(Vec<String>),
}

impl Default for RuleList {
    fn default() -> Self {
        Self::Many(Vec::new())
    }
}

impl RuleList {
    /// Whether the list holds no text at all.
    pub fn is_empty(&self) -> bool {
        match self {
            Self::One(s) => s.trim().is_empty(),
            Self::Many(v) => v.is_empty(),
        }
    }
}

impl Serialize for RuleList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::One(s) => serializer.serialize_str(s),
            Self::Many(v) => v.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for RuleList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RuleList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string of rules or an array of rule strings")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RuleList, E> {
                Ok(RuleList::One(v.to_owned()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RuleList, A::Error> {
                let mut out = Vec::new();
                while let Some(s) = seq.next_element::<String>()? {
                    out.push(s);
                }
                Ok(RuleList::Many(out))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// The `[source]` table: this file's own source. Its lists are trusted.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OwnSource {
    /// The source's name (default: the file stem).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its rank (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<i64>,
}

/// One `[[sources]]` entry: a ranked source merged into this policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceDecl {
    /// Unique, non-empty name.
    pub name: String,
    /// Authority; higher first (default 0).
    #[serde(default)]
    pub rank: i64,
    /// Whether its allow rules count (default false).
    #[serde(default)]
    pub trusted: bool,
    /// Where it came from (metadata, not an include).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Its content hash (metadata).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// Allow rules (withheld when untrusted).
    #[serde(default, skip_serializing_if = "RuleList::is_empty")]
    pub allow: RuleList,
    /// Ask rules.
    #[serde(default, skip_serializing_if = "RuleList::is_empty")]
    pub ask: RuleList,
    /// Deny rules.
    #[serde(default, skip_serializing_if = "RuleList::is_empty")]
    pub deny: RuleList,
    /// Notes keyed by rule as written; shown after the rule in reasons (trusted sources only).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub notes: BTreeMap<String, String>,
}

/// The `[paths]` table: how path rules compare paths.
///
/// ```toml
/// [paths]
/// case_insensitive = true   # for a case-insensitive file system (macOS, Windows)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathsDecl {
    /// Compare paths without regard to letter case, as a case-insensitive file system opens
    /// them: `deny = ["write(.git/**)"]` then also denies `.GIT/hooks/x`. Path rules are
    /// case-sensitive without it. With several files, any file turning it on turns it on.
    #[serde(default)]
    pub case_insensitive: bool,
}

/// A policy file. See docs/design/policy.md#the-policy-file and
/// `docs/schemas/PolicyFile.schema.json`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// The policy's id (default: the first source's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The policy's version (default `"0"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// What applies when no rule matches. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Decision>,
    /// A preset to start from (docs/design/policy.md#presets): this file's rules and sources apply
    /// on top of it, and it supplies the default unless `default` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<crate::preset::Preset>,
    /// Allow rules of this file's own source.
    #[serde(default, skip_serializing_if = "RuleList::is_empty")]
    pub allow: RuleList,
    /// Ask rules of this file's own source.
    #[serde(default, skip_serializing_if = "RuleList::is_empty")]
    pub ask: RuleList,
    /// Deny rules of this file's own source.
    #[serde(default, skip_serializing_if = "RuleList::is_empty")]
    pub deny: RuleList,
    /// Notes for this file's own rules.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub notes: BTreeMap<String, String>,
    /// This file's own source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<OwnSource>,
    /// How tools' specifiers match (overrides the built-in profiles).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, ToolProfile>,
    /// Ranked sources merged in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceDecl>,
    /// MCP servers and their admission (`[mcp]`, docs/mcp.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<crate::mcp::McpDecl>,
    /// Operating modes in force (`[modes] active = ["apply_safe"]`): layers that only narrow
    /// (docs/policy.md, "Operating modes").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modes: Option<crate::mode::Modes>,
    /// Approver classes and their ed25519 public keys (`[approvers.NAME]`), for approval
    /// receipts (docs/policy.md, "Approval receipts").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub approvers: BTreeMap<String, crate::receipt::ApproverDecl>,
    /// What tool processes must be confined to (`[containment]`); absent means full containment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<crate::containment::Containment>,
    /// Guards over content (`[guards]`: size limit, deny patterns, secrets; docs/guards.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guards: Option<crate::guard::Guards>,
    /// Hint rules (`[hints]`: decisions by what a call does; docs/policy.md, "Hint rules").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hints: Option<crate::hints::HintRules>,
    /// How path rules compare paths (`[paths]`; docs/policy.md, "Paths").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<PathsDecl>,
    /// This file is the policy of a subagent scope (`[scope]`: name, parent, `expands_parent`);
    /// composed with its parent's by `ScopeSet`, never merged as a plain policy (docs/policy.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<crate::scope::ScopeDecl>,
    /// Prompt directives (`[directives]`, docs/directives.md): text for the model's system prompt,
    /// never enforced and never parsed into rules (docs/directives.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directives: Option<crate::directives::Directives>,
}

impl PolicyFile {
    /// The reserved keys present in this file, which this version refuses (none today: a
    /// key reserved for a later version is listed here, so it is refused by name rather than
    /// ignored).
    pub fn reserved_keys_present(&self) -> Vec<&'static str> {
        Vec::new()
    }

    /// Parses policy text. `file` names it in errors.
    pub fn parse(text: &str, format: Format, file: &str) -> Result<Self, PolicyError> {
        match format {
            Format::Toml => parse_toml(text, file),
            Format::Json => parse_json(text, file),
        }
    }

    /// Writes the file in `format`.
    pub fn write(&self, format: Format) -> Result<String, PolicyError> {
        match format {
            Format::Toml => toml::to_string(self).map_err(|e| PolicyError::Write {
                message: e.to_string(),
            }),
            Format::Json => serde_json::to_string_pretty(self)
                .map(|mut s| {
                    s.push('\n');
                    s
                })
                .map_err(|e| PolicyError::Write {
                    message: e.to_string(),
                }),
        }
    }
}

fn pointer_of(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for seg in path.iter() {
        match seg {
            Segment::Seq { index } => out.push_str(&format!("/{index}")),
            Segment::Map { key } => {
                out.push_str(&format!("/{}", key.replace('~', "~0").replace('/', "~1")))
            }
            Segment::Enum { variant } => out.push_str(&format!("/{variant}")),
            Segment::Unknown => {}
        }
    }
    out
}

fn line_of_offset(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

fn parse_toml(text: &str, file: &str) -> Result<PolicyFile, PolicyError> {
    let deserializer = toml::Deserializer::parse(text).map_err(|e| PolicyError::Syntax {
        at: Location {
            file: file.to_owned(),
            line: e.span().map(|s| line_of_offset(text, s.start)),
            pointer: None,
        },
        message: first_line(e.message()),
    })?;
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let pointer = pointer_of(e.path());
        let inner = e.into_inner();
        PolicyError::Syntax {
            at: Location {
                file: file.to_owned(),
                line: inner.span().map(|s| line_of_offset(text, s.start)),
                pointer: Some(pointer),
            },
            message: first_line(inner.message()),
        }
    })
}

fn parse_json(text: &str, file: &str) -> Result<PolicyFile, PolicyError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed: PolicyFile = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let pointer = pointer_of(e.path());
        let inner = e.into_inner();
        PolicyError::Syntax {
            at: Location {
                file: file.to_owned(),
                line: Some(inner.line()),
                pointer: Some(pointer),
            },
            message: strip_json_position(&inner.to_string()),
        }
    })?;
    deserializer.end().map_err(|e| PolicyError::Syntax {
        at: Location {
            file: file.to_owned(),
            line: Some(e.line()),
            pointer: None,
        },
        message: strip_json_position(&e.to_string()),
    })?;
    Ok(parsed)
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_owned()
}

/// serde_json appends " at line L column C"; the location says it already.
fn strip_json_position(s: &str) -> String {
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_owned(),
        None => s.to_owned(),
    }
}

/// A policy file read from disk, with what is needed to name it in errors and verdicts.
#[derive(Debug, Clone)]
pub struct LoadedPolicy {
    /// The parsed file.
    pub file: PolicyFile,
    /// Its path, as given.
    pub path: Option<PathBuf>,
    /// The name used in errors (the path as given, or a label).
    pub label: String,
    /// The default source name: the file stem.
    pub stem: String,
    /// The file's text, used to find the line of a rule in errors.
    pub text: String,
    /// The blake3 digest of its bytes (source metadata).
    pub hash: String,
    /// Its format.
    pub format: Format,
    /// Who it speaks for, as whoever loaded it says (default `project`); the file's own
    /// `[source]` can only lower its rank within this role.
    pub role: Role,
}

impl LoadedPolicy {
    /// The same file, loaded as speaking for `role`.
    ///
    /// ```
    /// use warden_policy::{Format, LoadedPolicy, Role};
    /// let repo = LoadedPolicy::from_text("deny = [\"bash(curl:*)\"]".into(), Format::Toml,
    ///     "repo.toml", "repo", None)?.with_role(Role::Untrusted);
    /// assert_eq!(repo.role, Role::Untrusted);
    /// # Ok::<(), warden_policy::PolicyError>(())
    /// ```
    pub fn with_role(mut self, role: Role) -> Self {
        self.role = role;
        self
    }

    /// Reads and parses a policy file; the format comes from the extension.
    pub fn read(path: &Path) -> Result<Self, PolicyError> {
        let label = path.display().to_string();
        let format = Format::of_path(path).ok_or_else(|| PolicyError::Syntax {
            at: Location::file(&label),
            message: "a policy file ends in .toml or .json".into(),
        })?;
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError::Io {
            path: label.clone(),
            message: e.to_string(),
        })?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "policy".into());
        Self::from_text(text, format, &label, &stem, Some(path.to_path_buf()))
    }

    /// Parses policy text that did not come from a file (or did, and was read already).
    pub fn from_text(
        text: String,
        format: Format,
        label: &str,
        stem: &str,
        path: Option<PathBuf>,
    ) -> Result<Self, PolicyError> {
        let file = PolicyFile::parse(&text, format, label)?;
        let hash = warden_contracts::Digest::of_bytes(text.as_bytes()).to_string();
        Ok(Self {
            file,
            path,
            label: label.to_owned(),
            stem: stem.to_owned(),
            text,
            hash,
            format,
            role: Role::Project,
        })
    }

    /// The line on which `needle` first appears in the file's text outside a TOML comment
    /// line, if it does (a comment mentioning a key is not where the key is declared).
    pub(crate) fn line_of(&self, needle: &str) -> Option<usize> {
        line_of(&self.text, self.format, needle)
    }

    /// The file's text, shared by the declarations compiled from it.
    pub(crate) fn shared_text(&self) -> FileText {
        FileText {
            text: self.text.as_str().into(),
            format: self.format,
        }
    }
}

/// The line on which `needle` first appears in `text` outside a TOML comment line.
fn line_of(text: &str, format: Format, needle: &str) -> Option<usize> {
    let comment = |line: &str| format == Format::Toml && line.trim_start().starts_with('#');
    text.lines()
        .enumerate()
        .find(|(_, line)| {
            crate::work::add(line.len() + 1);
            !comment(line) && line.contains(needle)
        })
        .map(|(n, _)| n + 1)
}

/// A policy file's text, kept with the declarations read from it so that the line of a rule or
/// note is looked up only when an error names it. Looking it up for every rule as it is read
/// scans the text once per rule: quadratic in the rules of a list written as an array.
#[derive(Debug, Clone)]
pub(crate) struct FileText {
    text: std::sync::Arc<str>,
    format: Format,
}

impl FileText {
    /// `at`, with its line filled in from where `needle` first appears (as
    /// [`LoadedPolicy::line_of`] finds it) when it has none.
    pub(crate) fn locate(this: Option<&Self>, at: &Location, needle: &str) -> Location {
        let mut at = at.clone();
        if at.line.is_none()
            && let Some(file) = this
        {
            at.line = line_of(&file.text, file.format, needle);
        }
        at
    }
}
