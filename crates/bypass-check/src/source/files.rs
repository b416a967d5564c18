//! Which files belong to a package: every target's root, every `.rs` under `src/` (so that a file
//! no `mod` reaches is still checked), and everything those reach through `mod` declarations,
//! `#[path = "…"]` and `include!("…")`, wherever it lives.

use std::collections::{HashSet, VecDeque};
use std::path::{Component, Path, PathBuf};

use cargo_metadata::Package;
use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

use crate::BypassError;

/// A parsed source file.
pub(crate) enum Ast {
    /// A file of items (the usual case).
    File(syn::File),
    /// A file holding one expression (an `include!`d fragment).
    Expr(syn::Expr),
}

/// A source file of a package.
pub(crate) struct SourceFile {
    /// Its absolute path.
    pub(crate) path: PathBuf,
    /// Its syntax tree.
    pub(crate) ast: Ast,
}

/// Finds, reads and parses every source file of `package`.
pub(crate) fn discover(package: &Package) -> Result<Vec<SourceFile>, BypassError> {
    let mut queue: VecDeque<(PathBuf, bool)> = package
        .targets
        .iter()
        .map(|t| (t.src_path.clone().into_std_path_buf(), true))
        .collect();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut files = Vec::new();
    let mut walked = false;
    loop {
        while let Some((path, mod_rs)) = queue.pop_front() {
            let path = normalize(&path);
            let Ok(canonical) = path.canonicalize() else {
                // A `mod` whose file is absent (cfg'd out, generated): nothing to scan.
                continue;
            };
            if !seen.insert(canonical) {
                continue;
            }
            let ast = parse(&path)?;
            let mut refs = References {
                file: &path,
                mod_rs,
                inline: Vec::new(),
                found: Vec::new(),
            };
            match &ast {
                Ast::File(file) => refs.visit_file(file),
                Ast::Expr(expr) => refs.visit_expr(expr),
            }
            queue.extend(refs.found);
            files.push(SourceFile { path, ast });
        }
        if walked {
            return Ok(files);
        }
        walked = true;
        if let Some(dir) = package.manifest_path.parent() {
            let mut all = Vec::new();
            walk(&dir.as_std_path().join("src"), &mut all);
            all.sort();
            for path in all {
                let mod_rs = matches!(
                    path.file_name().and_then(|n| n.to_str()),
                    Some("mod.rs" | "lib.rs" | "main.rs")
                );
                queue.push_back((path, mod_rs));
            }
        }
    }
}

/// `a/b/../c` → `a/c`, lexically (so that reported paths read as the file's place).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Reads and parses `path` as a file of items, else as one expression (an `include!` fragment).
pub(crate) fn parse(path: &Path) -> Result<Ast, BypassError> {
    let text = std::fs::read_to_string(path).map_err(|source| BypassError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    match syn::parse_file(&text) {
        Ok(file) => Ok(Ast::File(file)),
        Err(error) => match syn::parse_str::<syn::Expr>(&text) {
            Ok(expr) => Ok(Ast::Expr(expr)),
            Err(_) => Err(BypassError::Parse {
                path: path.to_path_buf(),
                line: error.span().start().line,
                message: error.to_string(),
            }),
        },
    }
}

/// Collects the files a file pulls in: `mod x;` (with or without `#[path]`) and `include!`.
struct References<'a> {
    file: &'a Path,
    /// Whether the file owns its directory (`lib.rs`, `main.rs`, `mod.rs`, a `#[path]` file).
    mod_rs: bool,
    /// Directory components of the inline modules (`mod a { … }`) we are inside.
    inline: Vec<PathBuf>,
    found: Vec<(PathBuf, bool)>,
}

impl References<'_> {
    fn dir(&self) -> PathBuf {
        self.file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    /// The directory `mod x;` resolves against, inside the current inline modules.
    fn module_dir(&self) -> PathBuf {
        let mut base = self.dir();
        if !self.mod_rs
            && let Some(stem) = self.file.file_stem()
        {
            base.push(stem);
        }
        for part in &self.inline {
            base.push(part);
        }
        base
    }
}

fn path_attribute(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| match &attr.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

impl<'ast> Visit<'ast> for References<'_> {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        let path_attr = path_attribute(&item.attrs);
        match &item.content {
            Some(_) => {
                let part = path_attr.unwrap_or_else(|| item.ident.to_string());
                self.inline.push(PathBuf::from(part));
                syn::visit::visit_item_mod(self, item);
                self.inline.pop();
            }
            None => match path_attr {
                Some(p) if self.inline.is_empty() => self.found.push((self.dir().join(p), true)),
                Some(p) => self.found.push((self.module_dir().join(p), true)),
                None => {
                    let base = self.module_dir();
                    let name = item.ident.to_string();
                    self.found.push((base.join(format!("{name}.rs")), false));
                    self.found.push((base.join(name).join("mod.rs"), true));
                }
            },
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if mac.path.is_ident("include") {
            if let Ok(lit) = syn::parse2::<syn::LitStr>(mac.tokens.clone()) {
                self.found.push((self.dir().join(lit.value()), true));
            }
        } else {
            find_includes(mac.tokens.clone(), &self.dir(), &mut self.found);
        }
    }
}

/// `include!("…")` nested in another macro's tokens.
fn find_includes(tokens: TokenStream, dir: &Path, found: &mut Vec<(PathBuf, bool)>) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, tree) in trees.iter().enumerate() {
        match tree {
            TokenTree::Ident(ident) if ident == "include" => {
                if let (Some(TokenTree::Punct(bang)), Some(TokenTree::Group(group))) =
                    (trees.get(i + 1), trees.get(i + 2))
                    && bang.as_char() == '!'
                    && let Ok(lit) = syn::parse2::<syn::LitStr>(group.stream())
                {
                    found.push((dir.join(lit.value()), true));
                }
            }
            TokenTree::Group(group) => find_includes(group.stream(), dir, found),
            _ => {}
        }
    }
}
