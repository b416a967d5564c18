//! The `[workspace.metadata.warden]` schema: the layer table and the invocation boundary.
//!
//! `layers` is required; every key of `boundary` has a default (Warden's own names), so a
//! downstream workspace that only renames nothing needs just its layer table. Unknown keys in
//! `boundary` are an error, because a misspelt key (`executor` for `executors`) would otherwise
//! silently fall back to a default and weaken the check.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use cargo_metadata::Metadata;
use serde::Deserialize;

use crate::BypassError;

/// The check's configuration, read from the workspace root's `[workspace.metadata.warden]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Package name → layer. A runtime crate may depend only on strictly lower layers.
    pub layers: BTreeMap<String, u32>,
    /// Packages outside the runtime layers (xtask, this library); no runtime crate depends on one.
    pub tooling: BTreeSet<String>,
    /// Packages that may construct the token and call the invoke method.
    pub executors: BTreeSet<String>,
    /// The token type, as `crate_name::Type` (the crate's library name, with `_`).
    pub token: ItemPath,
    /// The callable trait, as `crate_name::Trait`.
    pub callable: ItemPath,
    /// The callable trait's invoke method.
    pub invoke: String,
    /// Features that a normal or build dependency must never enable, on an executor crate or on
    /// any workspace crate that declares them.
    pub test_only_features: BTreeSet<String>,
    /// Packages allowed `unsafe` code and exempt from `#![forbid(unsafe_code)]`.
    pub unsafe_allowed: BTreeSet<String>,
    /// Path prefixes (`rmcp::transport`) that no workspace crate may re-export.
    pub raw_transports: Vec<ItemPath>,
}

/// A Rust path such as `warden_executor::InvocationToken`, split into segments.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ItemPath {
    segments: Vec<String>,
}

impl ItemPath {
    /// Parses `a::b::c` (a leading `::` is allowed); `None` unless every segment is an identifier.
    pub fn parse(text: &str) -> Option<ItemPath> {
        let text = text.trim();
        let text = text.strip_prefix("::").unwrap_or(text);
        let segments: Vec<String> = text.split("::").map(|s| s.trim().to_owned()).collect();
        let valid = segments.iter().all(|s| {
            let mut chars = s.chars();
            matches!(chars.next(), Some(c) if c == '_' || c.is_alphabetic())
                && chars.all(|c| c == '_' || c.is_alphanumeric())
        });
        valid.then_some(ItemPath { segments })
    }

    /// The segments, first (the crate) to last (the item).
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// The first segment: the crate's library name.
    pub fn krate(&self) -> &str {
        self.segments
            .first()
            .map(String::as_str)
            .unwrap_or_default()
    }

    /// The last segment: the item's name.
    pub fn name(&self) -> &str {
        self.segments.last().map(String::as_str).unwrap_or_default()
    }
}

impl std::fmt::Display for ItemPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.segments.join("::"))
    }
}

/// `[workspace.metadata.warden]`. Keys other than `layers` and `boundary` are left to other
/// tools sharing the table.
#[derive(Deserialize)]
struct RawWarden {
    layers: Option<BTreeMap<String, u32>>,
    #[serde(default)]
    boundary: RawBoundary,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawBoundary {
    #[serde(default)]
    tooling: Vec<String>,
    executors: Option<Vec<String>>,
    token: Option<String>,
    callable: Option<String>,
    invoke: Option<String>,
    test_only_features: Option<Vec<String>>,
    #[serde(default)]
    unsafe_allowed: Vec<String>,
    #[serde(default)]
    raw_transports: Vec<String>,
}

/// Default of `boundary.executors`.
pub const DEFAULT_EXECUTOR: &str = "warden-executor";
/// Default of `boundary.token`.
pub const DEFAULT_TOKEN: &str = "warden_executor::InvocationToken";
/// Default of `boundary.callable`.
pub const DEFAULT_CALLABLE: &str = "warden_executor::Tool";
/// Default of `boundary.invoke`.
pub const DEFAULT_INVOKE: &str = "invoke";
/// Default of `boundary.test-only-features`.
pub const DEFAULT_TEST_ONLY_FEATURE: &str = "test-util";

impl Config {
    /// Reads the configuration from `cargo metadata` output (its `workspace_metadata`).
    pub fn from_metadata(metadata: &Metadata) -> Result<Config, BypassError> {
        let manifest = metadata
            .workspace_root
            .join("Cargo.toml")
            .into_std_path_buf();
        match metadata.workspace_metadata.get("warden") {
            Some(value) => Config::from_value(value, manifest),
            None => Err(BypassError::MissingConfig {
                manifest,
                table: String::new(),
            }),
        }
    }

    /// Reads the configuration from the value of the `warden` table; `manifest` names the file
    /// in errors.
    pub fn from_value(value: &serde_json::Value, manifest: PathBuf) -> Result<Config, BypassError> {
        let invalid = |message: String| BypassError::Config {
            manifest: manifest.clone(),
            message,
        };
        let raw = RawWarden::deserialize(value).map_err(|e| invalid(e.to_string()))?;
        let layers = raw.layers.ok_or_else(|| BypassError::MissingConfig {
            manifest: manifest.clone(),
            table: ".layers".to_owned(),
        })?;
        let b = raw.boundary;
        let path = |key: &str, text: Option<String>, default: &str| {
            let text = text.unwrap_or_else(|| default.to_owned());
            match ItemPath::parse(&text) {
                Some(p) if p.segments().len() >= 2 => Ok(p),
                _ => Err(invalid(format!(
                    "boundary.{key} = {text:?} is not a path of the form `crate_name::Item`"
                ))),
            }
        };
        let token = path("token", b.token, DEFAULT_TOKEN)?;
        let callable = path("callable", b.callable, DEFAULT_CALLABLE)?;
        let invoke = b.invoke.unwrap_or_else(|| DEFAULT_INVOKE.to_owned());
        if ItemPath::parse(&invoke).is_none_or(|p| p.segments().len() != 1) {
            return Err(invalid(format!(
                "boundary.invoke = {invoke:?} is not an identifier"
            )));
        }
        let mut raw_transports = Vec::new();
        for text in b.raw_transports {
            let parsed = ItemPath::parse(&text).ok_or_else(|| {
                invalid(format!("boundary.raw-transports: {text:?} is not a path"))
            })?;
            raw_transports.push(parsed);
        }
        let tooling: BTreeSet<String> = b.tooling.into_iter().collect();
        if let Some(both) = tooling.iter().find(|t| layers.contains_key(*t)) {
            return Err(invalid(format!(
                "{both} is both in layers and in boundary.tooling; a crate is one or the other"
            )));
        }
        Ok(Config {
            layers,
            tooling,
            executors: b
                .executors
                .unwrap_or_else(|| vec![DEFAULT_EXECUTOR.to_owned()])
                .into_iter()
                .collect(),
            token,
            callable,
            invoke,
            test_only_features: b
                .test_only_features
                .unwrap_or_else(|| vec![DEFAULT_TEST_ONLY_FEATURE.to_owned()])
                .into_iter()
                .collect(),
            unsafe_allowed: b.unsafe_allowed.into_iter().collect(),
            raw_transports,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_a_boundary_left_out() {
        let value = serde_json::json!({ "layers": { "a": 0 } });
        let config = Config::from_value(&value, PathBuf::from("Cargo.toml")).unwrap();
        assert_eq!(config.token.to_string(), DEFAULT_TOKEN);
        assert_eq!(config.callable.name(), "Tool");
        assert!(config.executors.contains(DEFAULT_EXECUTOR));
        assert!(
            config
                .test_only_features
                .contains(DEFAULT_TEST_ONLY_FEATURE)
        );
    }

    #[test]
    fn a_misspelt_boundary_key_is_an_error() {
        let value = serde_json::json!({ "layers": {}, "boundary": { "executor": ["x"] } });
        let err = Config::from_value(&value, PathBuf::from("Cargo.toml")).unwrap_err();
        assert!(err.to_string().contains("executor"), "{err}");
    }

    #[test]
    fn missing_layers_is_an_error() {
        let value = serde_json::json!({ "boundary": {} });
        let err = Config::from_value(&value, PathBuf::from("Cargo.toml")).unwrap_err();
        assert!(matches!(err, BypassError::MissingConfig { .. }), "{err}");
    }

    #[test]
    fn a_crate_in_layers_and_tooling_is_an_error() {
        let value = serde_json::json!({ "layers": { "a": 0 }, "boundary": { "tooling": ["a"] } });
        assert!(Config::from_value(&value, PathBuf::from("Cargo.toml")).is_err());
    }

    #[test]
    fn item_paths_reject_non_identifiers() {
        assert!(ItemPath::parse("a::b c").is_none());
        assert!(ItemPath::parse("::std::process").is_some());
        assert!(ItemPath::parse("a::").is_none());
    }
}
