//! The per-file rules over the syntax tree, and over the raw tokens of macro bodies that do not
//! parse as Rust: token construction, invoke calls, raw-transport re-exports and `unsafe`.

use std::path::PathBuf;

use proc_macro2::{Delimiter, Spacing, Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};

use super::names::{Imports, Matcher, RawPath, Target, expand_use, segments};
use crate::{BypassRule, Config, Violation};

/// Checks one file of one package.
pub(crate) struct FileCheck<'a> {
    pub(crate) config: &'a Config,
    pub(crate) matcher: Matcher<'a>,
    pub(crate) package: &'a str,
    /// The package's library name, which a local path (`crate::transport`) starts with.
    pub(crate) own_lib: &'a str,
    /// The file, as reported.
    pub(crate) path: PathBuf,
    /// Whether the token and invoke rules apply (the package is not an executor).
    pub(crate) boundary: bool,
    /// Whether the unsafe rule applies (the package is not in `unsafe-allowed`).
    pub(crate) unsafe_rule: bool,
    /// Whether the callable trait is in scope in this file (method syntax can reach `invoke`).
    pub(crate) callable_in_scope: bool,
    pub(crate) out: &'a mut Vec<Violation>,
}

fn line(span: Span) -> usize {
    span.start().line
}

/// Token text without the spaces `to_string` puts between punctuation.
fn compact(tokens: &impl ToTokens) -> String {
    let text = tokens.to_token_stream().to_string();
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if *c == ' ' {
            let before = i.checked_sub(1).and_then(|j| chars.get(j));
            let after = chars.get(i + 1);
            let word = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric() || *c == '_');
            if word(before) && word(after) {
                out.push(' ');
            }
            continue;
        }
        out.push(*c);
    }
    out
}

impl FileCheck<'_> {
    fn executors(&self) -> String {
        let names: Vec<&str> = self.config.executors.iter().map(String::as_str).collect();
        names.join(", ")
    }

    fn report(&mut self, line: usize, rule: BypassRule, explanation: String) {
        self.out.push(Violation {
            path: self.path.clone(),
            line,
            rule,
            explanation,
        });
    }

    fn mint(&mut self, line: usize, text: &str) {
        let explanation = format!(
            "`{text}` constructs the invocation token {} in {} (only the executor crates, {}, \
             may mint it)",
            self.config.token,
            self.package,
            self.executors()
        );
        self.report(line, BypassRule::TokenMint, explanation);
    }

    fn invoke(&mut self, line: usize, text: &str, how: &str) {
        let explanation = format!(
            "`{text}` calls the callable's {}::{} {how} in {} (only the executor crates, {}, \
             may invoke a tool)",
            self.config.callable,
            self.config.invoke,
            self.package,
            self.executors()
        );
        self.report(line, BypassRule::InvokeCall, explanation);
    }

    /// Unsafe code at `span` (`what` says which), reported when the unsafe rule applies.
    fn unsafe_code(&mut self, span: Span, what: impl FnOnce() -> String) {
        if !self.unsafe_rule {
            return;
        }
        let explanation = format!(
            "{} in {}, which is not in boundary.unsafe-allowed",
            what(),
            self.package
        );
        self.report(line(span), BypassRule::UnsafeCode, explanation);
    }

    fn is_invoke(&self, name: &str) -> bool {
        name == self.config.invoke
    }

    /// Whether a type (`X`, `dyn X`, `&X`) could name `target`.
    fn type_names(&self, ty: &syn::Type, target: Target) -> bool {
        match ty {
            syn::Type::Path(tp) if tp.qself.is_none() => {
                self.matcher.names(&segments(&tp.path), target)
            }
            syn::Type::TraitObject(to) => to.bounds.iter().any(|b| match b {
                syn::TypeParamBound::Trait(t) => self.matcher.names(&segments(&t.path), target),
                _ => false,
            }),
            syn::Type::Paren(p) => self.type_names(&p.elem, target),
            syn::Type::Group(g) => self.type_names(&g.elem, target),
            syn::Type::Reference(r) => self.type_names(&r.elem, target),
            _ => false,
        }
    }

    /// The rules for an expression path `a::b::c` or `<T as Tr>::f`.
    fn check_expr_path(&mut self, qself: Option<&syn::QSelf>, path: &syn::Path, text: &str) {
        let raw = segments(path);
        let at = path
            .segments
            .first()
            .map(|s| line(s.ident.span()))
            .unwrap_or(1);
        match qself {
            Some(q) => {
                let at = line(q.lt_token.span);
                let (trait_part, rest) = raw.segs.split_at(q.position.min(raw.segs.len()));
                if self.type_names(&q.ty, Target::Token) {
                    self.mint(at, text);
                } else if rest.first().is_some_and(|m| self.is_invoke(m)) {
                    let via_trait = !trait_part.is_empty()
                        && self.matcher.names(
                            &RawPath {
                                leading: raw.leading,
                                segs: trait_part.to_vec(),
                            },
                            Target::Callable,
                        );
                    let via_type =
                        trait_part.is_empty() && self.type_names(&q.ty, Target::Callable);
                    if via_trait || via_type {
                        self.invoke(at, text, "by a qualified path");
                    } else if trait_part.is_empty() && self.callable_in_scope {
                        self.invoke(at, text, "with the callable trait in scope");
                    }
                }
            }
            None => self.check_plain_path(&raw, at, text, true),
        }
    }

    /// `value_position`: the path is a value (so the token's own path is a constructor).
    fn check_plain_path(&mut self, raw: &RawPath, at: usize, text: &str, value_position: bool) {
        if (value_position && self.matcher.names(raw, Target::Token))
            || self.matcher.parent_names(raw, Target::Token)
        {
            self.mint(at, text);
        } else if raw.segs.len() >= 2 && raw.segs.last().is_some_and(|m| self.is_invoke(m)) {
            if self.matcher.parent_names(raw, Target::Callable) {
                self.invoke(at, text, "by path");
            } else if self.callable_in_scope {
                self.invoke(at, text, "with the callable trait in scope");
            }
        }
    }

    fn check_reexport(&mut self, path: &RawPath, at: usize, shown: &str) {
        for candidate in self.matcher.candidates(path) {
            let full = candidate.extern_path().unwrap_or_else(|| {
                let mut full = vec![self.own_lib.to_owned()];
                full.extend(candidate.segs.iter().cloned());
                full
            });
            let hit = self.config.raw_transports.iter().find(|prefix| {
                let p = prefix.segments();
                let n = p.len().min(full.len());
                p[..n] == full[..n]
            });
            if let Some(prefix) = hit {
                let explanation = format!(
                    "`{shown}` re-exports {} from {}, exposing raw transport {prefix}; raw \
                     transports stay private to their crate",
                    full.join("::"),
                    self.package
                );
                self.report(at, BypassRule::RawTransportReexport, explanation);
                return;
            }
        }
    }

    /// A macro body: as Rust when it parses (expressions, statements or items), else as tokens.
    fn check_macro_tokens(&mut self, tokens: &TokenStream) {
        let exprs = Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        if let Ok(parsed) = exprs.parse2(tokens.clone()) {
            for expr in &parsed {
                self.visit_expr(expr);
            }
        } else if let Ok(stmts) = syn::Block::parse_within.parse2(tokens.clone()) {
            for stmt in &stmts {
                self.visit_stmt(stmt);
            }
        } else if let Ok(file) = syn::parse2::<syn::File>(tokens.clone()) {
            self.visit_file(&file);
        } else {
            self.scan_tokens(tokens.clone());
        }
    }

    /// The fallback for macro bodies that are not Rust (`macro_rules!` arms, custom syntax):
    /// looks for path-shaped token sequences, `. invoke (`, `<… as Trait>::f` and `unsafe`.
    fn scan_tokens(&mut self, stream: TokenStream) {
        let trees: Vec<TokenTree> = stream.into_iter().collect();
        let punct = |i: usize, c: char| matches!(trees.get(i), Some(TokenTree::Punct(p)) if p.as_char() == c);
        let ident = |i: usize| match trees.get(i) {
            Some(TokenTree::Ident(id)) => Some(id.clone()),
            _ => None,
        };
        let path_sep = |i: usize| {
            matches!(trees.get(i), Some(TokenTree::Punct(p)) if p.as_char() == ':' && p.spacing() == Spacing::Joint)
                && punct(i + 1, ':')
        };
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(group) => {
                    self.scan_tokens(group.stream());
                    i += 1;
                }
                TokenTree::Ident(id) if id == "unsafe" => {
                    self.unsafe_code(id.span(), || "`unsafe` in a macro body".into());
                    i += 1;
                }
                TokenTree::Punct(p) if p.as_char() == '$' => {
                    // `$x` is a metavariable; `$crate` starts a path into the defining crate.
                    let dollar_crate = ident(i + 1).is_some_and(|id| id == "crate");
                    i += if dollar_crate { 1 } else { 2 };
                }
                TokenTree::Punct(p) if p.as_char() == '.' && !punct(i + 1, '.') => {
                    if let Some(method) = ident(i + 1)
                        && self.is_invoke(&method.to_string())
                        && (matches!(trees.get(i + 2), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis)
                            || path_sep(i + 2))
                    {
                        i += 2;
                        if self.boundary && self.callable_in_scope {
                            let text = format!(".{method}(…)");
                            self.invoke(
                                line(method.span()),
                                &text,
                                "by method syntax with the callable trait in scope",
                            );
                        }
                    } else {
                        i += 1;
                    }
                }
                _ => {
                    let leading = path_sep(i);
                    let start = if leading { i + 2 } else { i };
                    let Some(first) = ident(start) else {
                        i += 1;
                        continue;
                    };
                    let mut segs = vec![first.to_string()];
                    let mut j = start + 1;
                    while path_sep(j) {
                        match ident(j + 2) {
                            Some(next) => {
                                segs.push(next.to_string());
                                j += 3;
                            }
                            None => break,
                        }
                    }
                    if self.boundary {
                        self.check_token_path(
                            &trees,
                            i,
                            j,
                            RawPath { leading, segs },
                            line(first.span()),
                        );
                    }
                    i = j.max(i + 1);
                }
            }
        }
    }

    /// Rules for a path found in raw tokens, occupying `trees[start..end]`.
    fn check_token_path(
        &mut self,
        trees: &[TokenTree],
        start: usize,
        end: usize,
        raw: RawPath,
        at: usize,
    ) {
        let text = format!(
            "{}{}",
            if raw.leading { "::" } else { "" },
            raw.segs.join("::")
        );
        let prev = start.checked_sub(1).and_then(|p| trees.get(p));
        let prev_is = |s: &str| match prev {
            Some(TokenTree::Ident(id)) => id == s,
            Some(TokenTree::Punct(p)) => s.len() == 1 && s.starts_with(p.as_char()),
            _ => false,
        };
        let arrow = start >= 2
            && matches!(trees.get(start - 2), Some(TokenTree::Punct(p)) if p.as_char() == '-')
            && prev_is(">");
        let is_punct = |i: usize, c: char| matches!(trees.get(i), Some(TokenTree::Punct(p)) if p.as_char() == c);
        // `<T as Trait>::f` or `<T>::f`.
        if is_punct(end, '>') && is_punct(end + 1, ':') && is_punct(end + 2, ':') {
            let method = match trees.get(end + 3) {
                Some(TokenTree::Ident(id)) => id.to_string(),
                _ => String::new(),
            };
            let shown = format!("<… {text}>::{method}");
            if prev_is("as") {
                if self.is_invoke(&method) && self.matcher.names(&raw, Target::Callable) {
                    self.invoke(at, &shown, "by a qualified path");
                }
            } else if prev_is("<") {
                if self.matcher.names(&raw, Target::Token) {
                    self.mint(at, &shown);
                } else if self.is_invoke(&method)
                    && (self.callable_in_scope || self.matcher.names(&raw, Target::Callable))
                {
                    self.invoke(at, &shown, "by a qualified path");
                }
            }
            return;
        }
        let declaration = arrow
            || [
                "impl", "for", "struct", "enum", "union", "trait", "mod", "fn", "type", "dyn",
                "as", "use",
            ]
            .iter()
            .any(|k| prev_is(k))
            || prev_is(":");
        let constructor = !declaration
            && matches!(trees.get(end), Some(TokenTree::Group(g))
                if matches!(g.delimiter(), Delimiter::Brace | Delimiter::Parenthesis));
        self.check_plain_path(&raw, at, &text, constructor);
    }
}

impl<'ast> Visit<'ast> for FileCheck<'_> {
    fn visit_expr_path(&mut self, expr: &'ast syn::ExprPath) {
        if self.boundary {
            self.check_expr_path(expr.qself.as_ref(), &expr.path, &compact(expr));
        }
        visit::visit_expr_path(self, expr);
    }

    fn visit_expr_struct(&mut self, expr: &'ast syn::ExprStruct) {
        if self.boundary && self.matcher.names(&segments(&expr.path), Target::Token) {
            let at = expr
                .path
                .segments
                .first()
                .map(|s| line(s.ident.span()))
                .unwrap_or(1);
            let text = format!("{} {{ … }}", compact(&expr.path));
            self.mint(at, &text);
        }
        visit::visit_expr_struct(self, expr);
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        if self.boundary && self.callable_in_scope && self.is_invoke(&call.method.to_string()) {
            let text = format!(".{}(…)", call.method);
            self.invoke(
                line(call.method.span()),
                &text,
                "by method syntax with the callable trait in scope",
            );
        }
        visit::visit_expr_method_call(self, call);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let name = mac
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        // `include!` files are scanned as files of their own; these others only quote tokens.
        if !matches!(
            name.as_str(),
            "include" | "include_str" | "include_bytes" | "stringify" | "concat" | "env"
        ) {
            self.check_macro_tokens(&mac.tokens);
        }
        visit::visit_macro(self, mac);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if matches!(item.vis, syn::Visibility::Public(_)) {
            let mut imports = Imports::default();
            expand_use(
                &item.tree,
                &mut Vec::new(),
                item.leading_colon.is_some(),
                true,
                &mut imports,
            );
            for binding in &imports.bindings {
                let shown = format!("pub use {}", binding.path.segs.join("::"));
                self.check_reexport(&binding.path, binding.line, &shown);
            }
            for glob in &imports.globs {
                let shown = format!("pub use {}::*", glob.path.segs.join("::"));
                self.check_reexport(&glob.path, glob.line, &shown);
            }
        }
        visit::visit_item_use(self, item);
    }

    fn visit_item_type(&mut self, item: &'ast syn::ItemType) {
        if matches!(item.vis, syn::Visibility::Public(_))
            && let syn::Type::Path(tp) = &*item.ty
        {
            let shown = format!("pub type {} = {}", item.ident, compact(&tp.path));
            self.check_reexport(&segments(&tp.path), line(item.ident.span()), &shown);
        }
        visit::visit_item_type(self, item);
    }

    fn visit_item_extern_crate(&mut self, item: &'ast syn::ItemExternCrate) {
        if matches!(item.vis, syn::Visibility::Public(_)) {
            let raw = RawPath {
                leading: true,
                segs: vec![item.ident.to_string()],
            };
            let shown = format!("pub extern crate {}", item.ident);
            self.check_reexport(&raw, line(item.ident.span()), &shown);
        }
        visit::visit_item_extern_crate(self, item);
    }

    fn visit_expr_unsafe(&mut self, expr: &'ast syn::ExprUnsafe) {
        self.unsafe_code(expr.unsafe_token.span, || "`unsafe` block".into());
        visit::visit_expr_unsafe(self, expr);
    }

    fn visit_signature(&mut self, sig: &'ast syn::Signature) {
        if let Some(token) = &sig.unsafety {
            self.unsafe_code(token.span, || format!("`unsafe fn {}`", sig.ident));
        }
        visit::visit_signature(self, sig);
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if let Some(token) = &item.unsafety {
            self.unsafe_code(token.span, || "`unsafe impl`".into());
        }
        visit::visit_item_impl(self, item);
    }

    fn visit_item_trait(&mut self, item: &'ast syn::ItemTrait) {
        if let Some(token) = &item.unsafety {
            self.unsafe_code(token.span, || format!("`unsafe trait {}`", item.ident));
        }
        visit::visit_item_trait(self, item);
    }

    fn visit_item_foreign_mod(&mut self, item: &'ast syn::ItemForeignMod) {
        if let Some(token) = &item.unsafety {
            self.unsafe_code(token.span, || "`unsafe extern` block".into());
        }
        visit::visit_item_foreign_mod(self, item);
    }

    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        let path = attr.path();
        let unsafe_attr = ["unsafe", "no_mangle", "export_name", "link_section"]
            .iter()
            .any(|name| path.is_ident(name));
        if unsafe_attr {
            self.unsafe_code(attr.pound_token.span, || {
                format!("`#[{}]` (an unsafe attribute)", compact(&attr.meta))
            });
        }
        visit::visit_attribute(self, attr);
    }
}

/// Whether a crate root carries `#![forbid(unsafe_code)]`.
pub(crate) fn forbids_unsafe(file: &syn::File) -> bool {
    file.attrs.iter().any(|attr| {
        matches!(attr.style, syn::AttrStyle::Inner(_))
            && attr.path().is_ident("forbid")
            && attr
                .parse_args_with(Punctuated::<syn::Path, syn::Token![,]>::parse_terminated)
                .is_ok_and(|lints| lints.iter().any(|p| p.is_ident("unsafe_code")))
    })
}

/// Whether a file names the callable trait or the token type in any path (a type, a bound, a
/// `dyn`, an expression). Calling a trait method on `dyn Trait` or on a generic `T: Trait` needs
/// no import, but it needs the trait named somewhere or a token at hand, whose type is named.
pub(crate) struct Mentions<'a, 'm> {
    pub(crate) matcher: &'a Matcher<'m>,
    pub(crate) found: bool,
}

impl<'ast> Visit<'ast> for Mentions<'_, '_> {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        if self.found {
            return;
        }
        let raw = segments(path);
        if self.matcher.names(&raw, Target::Callable) || self.matcher.names(&raw, Target::Token) {
            self.found = true;
            return;
        }
        visit::visit_path(self, path);
    }
}
