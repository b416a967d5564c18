//! The crate-graph rules, from `cargo metadata`: layering, unlayered crates and test-only
//! features (of the executors and of every workspace crate) reaching a normal build through
//! feature unification.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use cargo_metadata::{Dependency, DependencyKind, Metadata, Package};

use crate::manifest::Manifest;
use crate::{BypassError, BypassRule, Config, Violation, relative};

/// Counts for the report's summary.
pub(crate) struct GraphCounts {
    pub(crate) crates: usize,
    pub(crate) layered: usize,
    pub(crate) tooling: usize,
    pub(crate) edges: usize,
}

/// A workspace package with its manifest text parsed for line lookup.
struct Member<'a> {
    package: &'a Package,
    manifest: Manifest,
}

impl Member<'_> {
    fn violation(
        &self,
        root: &Path,
        line: Option<usize>,
        rule: BypassRule,
        text: String,
    ) -> Violation {
        Violation {
            path: relative(root, self.package.manifest_path.as_std_path()),
            line: line.unwrap_or(1),
            rule,
            explanation: text,
        }
    }

    fn dependency_line(&self, dep: &Dependency) -> Option<usize> {
        let key = dep.rename.as_deref().unwrap_or(&dep.name);
        let target = dep.target.as_ref().map(ToString::to_string);
        self.manifest
            .dependency_line(key, dep.kind, target.as_deref())
            .or_else(|| self.manifest.dependency_line(key, dep.kind, None))
    }
}

fn is_shipped(dep: &Dependency) -> bool {
    matches!(dep.kind, DependencyKind::Normal | DependencyKind::Build)
}

fn kind_words(dep: &Dependency) -> &'static str {
    match dep.kind {
        DependencyKind::Build => "has a build dependency on",
        _ => "depends on",
    }
}

/// Runs the graph rules over the workspace's packages.
pub(crate) fn check(
    metadata: &Metadata,
    config: &Config,
    out: &mut Vec<Violation>,
) -> Result<GraphCounts, BypassError> {
    let root = metadata.workspace_root.as_std_path();
    let mut members: BTreeMap<&str, Member<'_>> = BTreeMap::new();
    for package in metadata.workspace_packages() {
        let path = package.manifest_path.as_std_path();
        let text = std::fs::read_to_string(path).map_err(|source| BypassError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        members.insert(
            package.name.as_str(),
            Member {
                package,
                manifest: Manifest::parse(&text),
            },
        );
    }
    let workspace_dep = |dep: &Dependency| -> Option<&Member<'_>> {
        if dep.source.is_some() {
            return None;
        }
        members.get(dep.name.as_str())
    };

    let mut edges = BTreeSet::new();
    let mut counts = GraphCounts {
        crates: members.len(),
        layered: 0,
        tooling: 0,
        edges: 0,
    };
    for member in members.values() {
        let name = member.package.name.as_str();
        let layer = config.layers.get(name).copied();
        if layer.is_some() {
            counts.layered += 1;
        } else if config.tooling.contains(name) {
            counts.tooling += 1;
        } else {
            out.push(member.violation(
                root,
                member.manifest.package_name_line(),
                BypassRule::UnlayeredCrate,
                format!(
                    "{name} is in neither [workspace.metadata.warden.layers] nor \
                     boundary.tooling; give it a layer"
                ),
            ));
        }
        for dep in member.package.dependencies.iter().filter(|d| is_shipped(d)) {
            let Some(target) = workspace_dep(dep) else {
                continue;
            };
            let target_name = target.package.name.as_str();
            edges.insert((name, target_name));
            let Some(layer) = layer else {
                continue;
            };
            let message = if config.tooling.contains(target_name) {
                format!(
                    "{name} (layer {layer}) {} tooling crate {target_name}; runtime crates must \
                     not depend on tooling crates",
                    kind_words(dep)
                )
            } else if let Some(target_layer) = config.layers.get(target_name) {
                if *target_layer < layer {
                    continue;
                }
                format!(
                    "{name} (layer {layer}) {} {target_name} (layer {target_layer}); a crate may \
                     depend only on lower layers",
                    kind_words(dep)
                )
            } else {
                // The unlayered crate is reported on its own.
                continue;
            };
            out.push(member.violation(
                root,
                member.dependency_line(dep),
                BypassRule::Layering,
                message,
            ));
        }
    }
    counts.edges = edges.len();

    check_test_only_features(&members, config, root, out);
    Ok(counts)
}

/// Features that are, or transitively enable, a test-only feature of a workspace or executor
/// crate.
fn tainted_features(
    members: &BTreeMap<&str, Member<'_>>,
    config: &Config,
) -> HashMap<String, BTreeSet<String>> {
    let mut tainted: HashMap<String, BTreeSet<String>> = HashMap::new();
    // The executors may come from a registry (a downstream workspace), the members are the
    // workspace's own crates (warden-evidence's `test-util` and `fault-injection`).
    let owners = config
        .executors
        .iter()
        .map(String::as_str)
        .chain(members.keys().copied());
    for owner in owners {
        tainted.insert(owner.to_owned(), config.test_only_features.clone());
    }
    loop {
        let mut changed = false;
        for member in members.values() {
            let package = member.package;
            for (feature, enables) in &package.features {
                let already = tainted
                    .get(package.name.as_str())
                    .is_some_and(|set| set.contains(feature));
                if already {
                    continue;
                }
                let taints = enables.iter().any(|entry| {
                    if entry.starts_with("dep:") {
                        return false;
                    }
                    match entry.split_once('/') {
                        Some((key, dep_feature)) => {
                            let key = key.trim_end_matches('?');
                            package
                                .dependencies
                                .iter()
                                .filter(|d| d.rename.as_deref().unwrap_or(&d.name) == key)
                                .any(|d| {
                                    tainted
                                        .get(d.name.as_str())
                                        .is_some_and(|set| set.contains(dep_feature))
                                })
                        }
                        None => tainted
                            .get(package.name.as_str())
                            .is_some_and(|set| set.contains(entry)),
                    }
                });
                if taints {
                    tainted
                        .entry(package.name.to_string())
                        .or_default()
                        .insert(feature.clone());
                    changed = true;
                }
            }
        }
        if !changed {
            return tainted;
        }
    }
}

fn check_test_only_features(
    members: &BTreeMap<&str, Member<'_>>,
    config: &Config,
    root: &Path,
    out: &mut Vec<Violation>,
) {
    if config.test_only_features.is_empty() {
        return;
    }
    let tainted = tainted_features(members, config);
    let listed = |set: &BTreeSet<String>| {
        set.iter()
            .filter(|f| config.test_only_features.contains(*f))
            .map(|f| format!("`{f}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for member in members.values() {
        let name = member.package.name.as_str();
        if let Some(set) = tainted.get(name)
            && set.contains("default")
        {
            out.push(member.violation(
                root,
                member.manifest.feature_line("default"),
                BypassRule::TestOnlyFeature,
                format!(
                    "the default features of {name} enable a test-only feature \
                     (boundary.test-only-features: {}); every normal dependent would enable it",
                    listed(&config.test_only_features)
                ),
            ));
        }
        for dep in member.package.dependencies.iter().filter(|d| is_shipped(d)) {
            let Some(set) = tainted.get(dep.name.as_str()) else {
                continue;
            };
            for feature in dep.features.iter().filter(|f| set.contains(*f)) {
                let what = if !config.test_only_features.contains(feature) {
                    format!(
                        "feature `{feature}` of {}, which enables a test-only feature",
                        dep.name
                    )
                } else if config.executors.contains(dep.name.as_str()) {
                    format!(
                        "test-only feature `{feature}` of executor crate {}",
                        dep.name
                    )
                } else {
                    format!("test-only feature `{feature}` of {}", dep.name)
                };
                out.push(member.violation(
                    root,
                    member.dependency_line(dep),
                    BypassRule::TestOnlyFeature,
                    format!(
                        "{name} {} {} with {what}; only dev-dependencies may enable it (feature \
                         unification would turn it on in production builds)",
                        kind_words(dep),
                        dep.name
                    ),
                ));
            }
        }
    }
}
