//! Name resolution, as far as syntax allows: what a path in a file can refer to.
//!
//! The scan does not have rustc's resolver, so it answers a weaker, conservative question: *could*
//! this path name the token type or the callable trait? A path resolves to a set of candidates:
//! through the file's `use` bindings (renames included), its glob imports, the crate's other
//! bindings when the file glob-imports a local module, the extern crates the package depends on
//! (dependency renames and `extern crate … as …` included), and, failing all, the crate itself.
//! An extern candidate is the target when its crate and last segment match one of the target's
//! known export points (the defining crate, plus every workspace crate that re-exports it
//! `pub`); a local candidate is the target when its last segment is a name the crate binds to the
//! target somewhere. Over-approximating this way can only add findings, never hide one.

use std::collections::{HashMap, HashSet};

use syn::visit::Visit;

/// A path as written: `::a::b` has `leading` set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawPath {
    pub(crate) leading: bool,
    pub(crate) segs: Vec<String>,
}

/// A name a file binds: `use a::b as c;` binds `c`, `use a::b as _;` binds `_`,
/// `type T = a::B;` binds `T`.
#[derive(Debug, Clone)]
pub(crate) struct Binding {
    pub(crate) name: String,
    pub(crate) path: RawPath,
    pub(crate) public: bool,
    pub(crate) line: usize,
}

/// A glob import `use a::b::*;`.
#[derive(Debug, Clone)]
pub(crate) struct Glob {
    pub(crate) path: RawPath,
    pub(crate) public: bool,
    pub(crate) line: usize,
}

/// Every import of a file, wherever it sits in the file (module level, inline modules, function
/// bodies, macro bodies that parse as items): treating them as file-wide over-approximates scope.
#[derive(Debug, Default)]
pub(crate) struct Imports {
    pub(crate) bindings: Vec<Binding>,
    pub(crate) globs: Vec<Glob>,
    /// `extern crate a as b;`: `(b, a)`.
    pub(crate) extern_crates: Vec<(String, String)>,
}

/// Expands a use tree into its leaves, appending bindings and globs.
pub(crate) fn expand_use(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    leading: bool,
    public: bool,
    imports: &mut Imports,
) {
    let path = |prefix: &Vec<String>, last: Option<&syn::Ident>| {
        let mut segs = prefix.clone();
        if let Some(ident) = last {
            segs.push(ident.to_string());
        }
        RawPath { leading, segs }
    };
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            expand_use(&p.tree, prefix, leading, public, imports);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let is_self = n.ident == "self";
            let name = if is_self {
                prefix.last().cloned().unwrap_or_default()
            } else {
                n.ident.to_string()
            };
            imports.bindings.push(Binding {
                name,
                path: path(prefix, (!is_self).then_some(&n.ident)),
                public,
                line: n.ident.span().start().line,
            });
        }
        syn::UseTree::Rename(r) => {
            let is_self = r.ident == "self";
            imports.bindings.push(Binding {
                name: r.rename.to_string(),
                path: path(prefix, (!is_self).then_some(&r.ident)),
                public,
                line: r.ident.span().start().line,
            });
        }
        syn::UseTree::Glob(g) => imports.globs.push(Glob {
            path: path(prefix, None),
            public,
            line: g.star_token.span.start().line,
        }),
        syn::UseTree::Group(g) => {
            for item in &g.items {
                expand_use(item, prefix, leading, public, imports);
            }
        }
    }
}

/// The identifiers of a path's segments.
pub(crate) fn segments(path: &syn::Path) -> RawPath {
    RawPath {
        leading: path.leading_colon.is_some(),
        segs: path.segments.iter().map(|s| s.ident.to_string()).collect(),
    }
}

/// Collects a file's imports.
#[derive(Default)]
pub(crate) struct ImportCollector {
    pub(crate) imports: Imports,
}

impl<'ast> Visit<'ast> for ImportCollector {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let public = matches!(item.vis, syn::Visibility::Public(_));
        expand_use(
            &item.tree,
            &mut Vec::new(),
            item.leading_colon.is_some(),
            public,
            &mut self.imports,
        );
    }

    fn visit_item_type(&mut self, item: &'ast syn::ItemType) {
        if let syn::Type::Path(tp) = &*item.ty
            && tp.qself.is_none()
        {
            self.imports.bindings.push(Binding {
                name: item.ident.to_string(),
                path: segments(&tp.path),
                public: matches!(item.vis, syn::Visibility::Public(_)),
                line: item.ident.span().start().line,
            });
        }
        syn::visit::visit_item_type(self, item);
    }

    fn visit_item_extern_crate(&mut self, item: &'ast syn::ItemExternCrate) {
        if let Some((_, rename)) = &item.rename {
            self.imports
                .extern_crates
                .push((rename.to_string(), item.ident.to_string()));
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Items (imports included) written inside a macro body, when the body parses as items.
        if let Ok(file) = syn::parse2::<syn::File>(mac.tokens.clone()) {
            self.visit_file(&file);
        }
    }
}

/// Where a resolved path starts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Root {
    /// An extern crate, by its canonical library name.
    Extern(String),
    /// The crate being checked.
    Local,
}

/// One candidate meaning of a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Resolved {
    pub(crate) root: Root,
    pub(crate) segs: Vec<String>,
}

impl Resolved {
    fn join(&self, rest: &[String]) -> Resolved {
        let mut segs = self.segs.clone();
        segs.extend_from_slice(rest);
        Resolved {
            root: self.root.clone(),
            segs,
        }
    }

    fn local(segs: &[String]) -> Resolved {
        Resolved {
            root: Root::Local,
            segs: segs.to_vec(),
        }
    }

    /// The full path with the crate first, for an extern path.
    pub(crate) fn extern_path(&self) -> Option<Vec<String>> {
        match &self.root {
            Root::Extern(krate) => {
                let mut full = vec![krate.clone()];
                full.extend(self.segs.iter().cloned());
                Some(full)
            }
            Root::Local => None,
        }
    }

    /// The same path without its last segment (`A::f` → `A`).
    pub(crate) fn parent(&self) -> Option<Resolved> {
        let (_, rest) = self.segs.split_last()?;
        Some(Resolved {
            root: self.root.clone(),
            segs: rest.to_vec(),
        })
    }
}

const LOCAL_KEYWORDS: [&str; 4] = ["crate", "self", "super", "Self"];
const DEPTH: usize = 4;

/// Resolves raw paths of one file of a package.
pub(crate) struct FileResolver<'a> {
    /// Code name of an extern crate → canonical library name.
    pub(crate) externs: &'a HashMap<String, String>,
    pub(crate) imports: &'a Imports,
}

impl FileResolver<'_> {
    /// Candidates for `path` as written in this file (a `use` path, a type or an expression).
    pub(crate) fn resolve(&self, path: &RawPath) -> Vec<Resolved> {
        let mut out = Vec::new();
        self.resolve_into(path, 0, &mut out);
        dedup(&mut out);
        out
    }

    fn canonical(&self, name: &str) -> String {
        self.externs
            .get(name)
            .cloned()
            .unwrap_or_else(|| name.to_owned())
    }

    fn resolve_into(&self, path: &RawPath, depth: usize, out: &mut Vec<Resolved>) {
        let Some((first, rest)) = path.segs.split_first() else {
            return;
        };
        if path.leading {
            out.push(Resolved {
                root: Root::Extern(self.canonical(first)),
                segs: rest.to_vec(),
            });
            return;
        }
        if LOCAL_KEYWORDS.contains(&first.as_str()) {
            let skip = path
                .segs
                .iter()
                .take_while(|s| LOCAL_KEYWORDS.contains(&s.as_str()))
                .count();
            out.push(Resolved::local(&path.segs[skip..]));
            return;
        }
        let krate = self.externs.get(first);
        if depth < DEPTH {
            let mut bound = false;
            for binding in &self.imports.bindings {
                if binding.name == *first && binding.path != *path {
                    bound = true;
                    let mut inner = Vec::new();
                    self.resolve_into(&binding.path, depth + 1, &mut inner);
                    out.extend(inner.iter().map(|r| r.join(rest)));
                }
            }
            // A name neither bound nor an extern crate may come from any glob import.
            if !bound && krate.is_none() {
                for glob in self.imports.globs.iter().filter(|g| g.path != *path) {
                    let mut inner = Vec::new();
                    self.resolve_into(&glob.path, depth + 1, &mut inner);
                    out.extend(inner.iter().map(|r| r.join(&path.segs)));
                }
            }
        }
        match krate {
            Some(krate) => out.push(Resolved {
                root: Root::Extern(krate.clone()),
                segs: rest.to_vec(),
            }),
            None => out.push(Resolved::local(&path.segs)),
        }
    }
}

fn dedup(items: &mut Vec<Resolved>) {
    let mut seen = HashSet::new();
    items.retain(|r| seen.insert(r.clone()));
}

/// Which boundary item a question is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Target {
    Token,
    Callable,
}

/// Where a target can be named from outside: `(crate, name)` pairs. Starts with the configured
/// path and grows with every workspace crate that re-exports the target.
#[derive(Debug, Default, Clone)]
pub(crate) struct Exports {
    pub(crate) token: HashSet<(String, String)>,
    pub(crate) callable: HashSet<(String, String)>,
}

impl Exports {
    pub(crate) fn of(&self, target: Target) -> &HashSet<(String, String)> {
        match target {
            Target::Token => &self.token,
            Target::Callable => &self.callable,
        }
    }

    pub(crate) fn of_mut(&mut self, target: Target) -> &mut HashSet<(String, String)> {
        match target {
            Target::Token => &mut self.token,
            Target::Callable => &mut self.callable,
        }
    }
}

/// What a package's own bindings say about the targets.
#[derive(Debug, Default, Clone)]
pub(crate) struct LocalNames {
    /// Names the crate binds (anywhere) to the target.
    pub(crate) names: HashMap<Target, HashSet<String>>,
    /// Whether the crate imports the target `as _` anywhere.
    pub(crate) underscore: HashSet<Target>,
    /// Every non-`_` binding of the crate, resolved: for files that glob-import a local module.
    pub(crate) bindings: HashMap<String, Vec<Resolved>>,
}

/// Answers "could this name the target?" for one file.
pub(crate) struct Matcher<'a> {
    pub(crate) resolver: FileResolver<'a>,
    pub(crate) exports: &'a Exports,
    pub(crate) local: &'a LocalNames,
    /// Whether the file glob-imports a local module (so any crate binding may be in scope).
    pub(crate) local_glob: bool,
}

impl Matcher<'_> {
    /// Whether a resolved candidate is the target.
    pub(crate) fn is_target(&self, candidate: &Resolved, target: Target) -> bool {
        let Some(last) = candidate.segs.last() else {
            return false;
        };
        match &candidate.root {
            Root::Extern(krate) => self
                .exports
                .of(target)
                .contains(&(krate.clone(), last.clone())),
            Root::Local => self
                .local
                .names
                .get(&target)
                .is_some_and(|names| names.contains(last)),
        }
    }

    /// Whether a glob import of `candidate` could bring the target into scope.
    pub(crate) fn glob_may_import(&self, candidate: &Resolved, target: Target) -> bool {
        match &candidate.root {
            Root::Extern(krate) => self.exports.of(target).iter().any(|(k, _)| k == krate),
            Root::Local => {
                self.local.underscore.contains(&target)
                    || self
                        .local
                        .names
                        .get(&target)
                        .is_some_and(|names| !names.is_empty())
            }
        }
    }

    /// Candidates for a path in this file, crate-wide bindings included when the file
    /// glob-imports a local module.
    pub(crate) fn candidates(&self, path: &RawPath) -> Vec<Resolved> {
        let mut out = self.resolver.resolve(path);
        if self.local_glob
            && !path.leading
            && let Some((first, rest)) = path.segs.split_first()
            && let Some(bound) = self.local.bindings.get(first)
        {
            out.extend(bound.iter().map(|r| r.join(rest)));
        }
        out
    }

    /// Whether `path` (as written in this file) could name `target`.
    pub(crate) fn names(&self, path: &RawPath, target: Target) -> bool {
        self.candidates(path)
            .iter()
            .any(|c| self.is_target(c, target))
    }

    /// Whether `path`'s parent (`A` of `A::f`) could name `target`.
    pub(crate) fn parent_names(&self, path: &RawPath, target: Target) -> bool {
        path.segs.len() >= 2
            && self
                .candidates(path)
                .iter()
                .filter_map(Resolved::parent)
                .any(|c| self.is_target(&c, target))
    }

    /// Whether the target is in scope in this file: bound by a `use` (renamed or `as _`), or
    /// possibly brought in by a glob import.
    pub(crate) fn in_scope(&self, target: Target) -> bool {
        let imports = self.resolver.imports;
        imports.bindings.iter().any(|b| {
            self.resolver
                .resolve(&b.path)
                .iter()
                .any(|c| self.is_target(c, target))
        }) || imports.globs.iter().any(|g| {
            self.resolver
                .resolve(&g.path)
                .iter()
                .any(|c| self.glob_may_import(c, target))
        })
    }
}
