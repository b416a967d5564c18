//! The source rules: every file of every workspace package, parsed with `syn` and checked for
//! token construction, invoke calls, raw-transport re-exports, `unsafe`, and crate roots without
//! `#![forbid(unsafe_code)]`.

mod files;
mod names;
mod visit;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use cargo_metadata::{Metadata, Package, TargetKind};
use syn::visit::Visit;

use self::files::{Ast, SourceFile};
use self::names::{
    Exports, FileResolver, ImportCollector, Imports, LocalNames, Matcher, Root, Target,
};
use self::visit::{FileCheck, Mentions, forbids_unsafe};
use crate::{BypassError, BypassRule, Config, Violation, relative};

/// A package with its files and what its names mean.
struct Unit<'a> {
    package: &'a Package,
    files: Vec<(SourceFile, Imports)>,
    externs: HashMap<String, String>,
    local: LocalNames,
}

impl Unit<'_> {
    fn resolver<'b>(&'b self, imports: &'b Imports) -> FileResolver<'b> {
        FileResolver {
            externs: &self.externs,
            imports,
        }
    }

    fn matcher<'b>(&'b self, imports: &'b Imports, exports: &'b Exports) -> Matcher<'b> {
        let resolver = self.resolver(imports);
        let local_glob = imports.globs.iter().any(|g| {
            resolver
                .resolve(&g.path)
                .iter()
                .all(|c| c.root == Root::Local)
        });
        Matcher {
            resolver,
            exports,
            local: &self.local,
            local_glob,
        }
    }
}

const BUILTIN_CRATES: [&str; 5] = ["std", "core", "alloc", "proc_macro", "test"];

/// The library name of a package (`warden_executor` for `warden-executor`).
fn lib_name(package: &Package) -> String {
    package
        .targets
        .iter()
        .find(|t| {
            t.kind.iter().any(|k| {
                matches!(
                    k,
                    TargetKind::Lib
                        | TargetKind::RLib
                        | TargetKind::DyLib
                        | TargetKind::CDyLib
                        | TargetKind::StaticLib
                        | TargetKind::ProcMacro
                )
            })
        })
        .map(|t| t.name.replace('-', "_"))
        .unwrap_or_else(|| package.name.replace('-', "_"))
}

/// Whether a target is shipped code, whose root must forbid `unsafe`.
fn is_shipped_root(kinds: &[TargetKind]) -> bool {
    kinds.iter().any(|k| {
        !matches!(
            k,
            TargetKind::Example | TargetKind::Test | TargetKind::Bench | TargetKind::Unknown(_)
        )
    })
}

/// Runs the source rules; returns the number of distinct files scanned.
pub(crate) fn check(
    metadata: &Metadata,
    config: &Config,
    out: &mut Vec<Violation>,
) -> Result<usize, BypassError> {
    let root = metadata.workspace_root.as_std_path();
    let packages = metadata.workspace_packages();
    let libs: HashMap<&str, String> = packages
        .iter()
        .map(|p| (p.name.as_str(), lib_name(p)))
        .collect();

    let mut units = Vec::new();
    for package in &packages {
        let mut files = Vec::new();
        for file in files::discover(package)? {
            let mut collector = ImportCollector::default();
            match &file.ast {
                Ast::File(f) => collector.visit_file(f),
                Ast::Expr(e) => collector.visit_expr(e),
            }
            files.push((file, collector.imports));
        }
        let mut externs: HashMap<String, String> = BUILTIN_CRATES
            .iter()
            .map(|c| ((*c).to_owned(), (*c).to_owned()))
            .collect();
        let own = lib_name(package);
        externs.insert(own.clone(), own.clone());
        for dep in &package.dependencies {
            let canonical = libs
                .get(dep.name.as_str())
                .cloned()
                .unwrap_or_else(|| dep.name.replace('-', "_"));
            let code_name = dep.rename.as_deref().unwrap_or(&dep.name).replace('-', "_");
            externs.insert(code_name, canonical);
        }
        for (_, imports) in &files {
            for (alias, krate) in &imports.extern_crates {
                let canonical = if krate == "self" {
                    own.clone()
                } else {
                    externs.get(krate).cloned().unwrap_or_else(|| krate.clone())
                };
                externs.insert(alias.clone(), canonical);
            }
        }
        units.push(Unit {
            package,
            files,
            externs,
            local: LocalNames::default(),
        });
    }

    let exports = resolve_targets(&mut units, config, &libs);

    let mut scanned: HashSet<PathBuf> = HashSet::new();
    for unit in &units {
        let name = unit.package.name.as_str();
        let own_lib = libs.get(name).map(String::as_str).unwrap_or(name);
        let boundary = !config.executors.contains(name);
        let unsafe_rule = !config.unsafe_allowed.contains(name);
        let mut roots: HashMap<PathBuf, &syn::File> = HashMap::new();
        for (file, imports) in &unit.files {
            let canonical = file
                .path
                .canonicalize()
                .unwrap_or_else(|_| file.path.clone());
            let matcher = unit.matcher(imports, &exports);
            let callable_in_scope = matcher.in_scope(Target::Callable) || {
                let mut mentions = Mentions {
                    matcher: &matcher,
                    found: false,
                };
                match &file.ast {
                    Ast::File(f) => mentions.visit_file(f),
                    Ast::Expr(e) => mentions.visit_expr(e),
                }
                mentions.found
            };
            let mut check = FileCheck {
                config,
                matcher,
                package: name,
                own_lib,
                path: relative(root, &file.path),
                boundary,
                unsafe_rule,
                callable_in_scope,
                out,
            };
            match &file.ast {
                Ast::File(f) => {
                    check.visit_file(f);
                    roots.insert(canonical.clone(), f);
                }
                Ast::Expr(e) => check.visit_expr(e),
            }
            scanned.insert(canonical);
        }
        if !unsafe_rule {
            continue;
        }
        for target in &unit.package.targets {
            if !is_shipped_root(&target.kind) {
                continue;
            }
            let path = target.src_path.as_std_path();
            let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
            let Some(file) = roots.get(&canonical) else {
                continue;
            };
            if !forbids_unsafe(file) {
                let kinds: Vec<String> = target.kind.iter().map(ToString::to_string).collect();
                out.push(Violation {
                    path: relative(root, path),
                    line: 1,
                    rule: BypassRule::MissingForbidUnsafe,
                    explanation: format!(
                        "crate root of {} target `{}` of {name} lacks `#![forbid(unsafe_code)]`; \
                         only crates in boundary.unsafe-allowed may omit it",
                        kinds.join("/"),
                        target.name
                    ),
                });
            }
        }
    }
    Ok(scanned.len())
}

/// Computes, to a fixed point, every crate's local names for the targets and every workspace
/// crate's re-exports of them.
fn resolve_targets(
    units: &mut [Unit<'_>],
    config: &Config,
    libs: &HashMap<&str, String>,
) -> Exports {
    let mut exports = Exports::default();
    for (target, item) in [
        (Target::Token, &config.token),
        (Target::Callable, &config.callable),
    ] {
        exports
            .of_mut(target)
            .insert((item.krate().to_owned(), item.name().to_owned()));
    }
    for unit in units.iter_mut() {
        let mut bindings: HashMap<String, Vec<names::Resolved>> = HashMap::new();
        for (_, imports) in &unit.files {
            let resolver = unit.resolver(imports);
            for binding in imports.bindings.iter().filter(|b| b.name != "_") {
                bindings
                    .entry(binding.name.clone())
                    .or_default()
                    .extend(resolver.resolve(&binding.path));
            }
        }
        unit.local.bindings = bindings;
    }
    loop {
        let mut new_exports: Vec<(Target, (String, String))> = Vec::new();
        let mut new_local: Vec<(usize, Target, Option<String>)> = Vec::new();
        for (index, unit) in units.iter().enumerate() {
            let own = libs
                .get(unit.package.name.as_str())
                .cloned()
                .unwrap_or_default();
            for (_, imports) in &unit.files {
                let matcher = unit.matcher(imports, &exports);
                for target in [Target::Token, Target::Callable] {
                    for binding in &imports.bindings {
                        let hit = matcher
                            .resolver
                            .resolve(&binding.path)
                            .iter()
                            .any(|c| matcher.is_target(c, target));
                        if !hit {
                            continue;
                        }
                        if binding.name == "_" {
                            if !unit.local.underscore.contains(&target) {
                                new_local.push((index, target, None));
                            }
                            continue;
                        }
                        let known = unit
                            .local
                            .names
                            .get(&target)
                            .is_some_and(|n| n.contains(&binding.name));
                        if !known {
                            new_local.push((index, target, Some(binding.name.clone())));
                        }
                        let export = (own.clone(), binding.name.clone());
                        if binding.public && !exports.of(target).contains(&export) {
                            new_exports.push((target, export));
                        }
                    }
                    for glob in imports.globs.iter().filter(|g| g.public) {
                        let hit = matcher
                            .resolver
                            .resolve(&glob.path)
                            .iter()
                            .any(|c| matcher.glob_may_import(c, target));
                        let item = match target {
                            Target::Token => &config.token,
                            Target::Callable => &config.callable,
                        };
                        let export = (own.clone(), item.name().to_owned());
                        if hit && !exports.of(target).contains(&export) {
                            new_exports.push((target, export));
                        }
                    }
                }
            }
        }
        if new_exports.is_empty() && new_local.is_empty() {
            return exports;
        }
        for (target, export) in new_exports {
            exports.of_mut(target).insert(export);
        }
        for (index, target, name) in new_local {
            if let Some(unit) = units.get_mut(index) {
                match name {
                    Some(name) => {
                        unit.local.names.entry(target).or_default().insert(name);
                    }
                    None => {
                        unit.local.underscore.insert(target);
                    }
                }
            }
        }
    }
}
