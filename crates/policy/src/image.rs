//! Policy images: a compiled policy's rules kept as bytes, so a short-lived process (a
//! provider hook, one call per process) can skip compiling them again.
//!
//! An image holds what compiling the rules produced and nothing the builder has anyway: every
//! compiled rule (list, tool, specifier, the rule as written, note, source, index key), each
//! source's report (withheld rules, counts, derived rules) and the canonical text of the
//! rules' member. The rest of the snapshot (default, sources, guards, `[mcp]`, approvers,
//! modes, …) comes from the builder, which is made from the policy files as always: the files
//! are still read and parsed, which is cheap; validating and compiling their rules is what
//! costs, and what an image saves.
//!
//! An image is filed under a key, [`PolicyBuilder::image_key`]: a digest of everything the
//! compiled rules depend on (every set's source and declarations, notes, tool profiles,
//! aliases, preset, path environment), this crate's version, the image format and a caller's
//! salt. [`PolicyBuilder::build_with_image`] uses an image only when its magic, format, key
//! and checksum (BLAKE3 over its body) match and every record reads back within bounds, with
//! tools and sources that exist; anything else is [`ImageLoad::Refused`] and the policy is
//! compiled from its declarations instead. So a stale, truncated, corrupt or foreign image
//! costs a compile, never a decision. The digest of the snapshot is computed over the
//! canonical form as always, so it is the digest a fresh compile gives.
//!
//! Rules are materialized from an image when a decision first reaches them (most decisions
//! look at a handful), each once per snapshot: a snapshot built from an image keeps one
//! `OnceLock` per rule, which after that first reach is read without a lock or a write, like
//! any other field. A snapshot compiled from declarations holds its rules in a plain vector.
//!
//! **Trust.** An image is as trustworthy as the place it is read from: it is checked against
//! corruption and staleness, not forgery (someone able to write it, and to compute the key
//! from the policy files, could make one that decides differently). Callers keep images where
//! only those who could change the policy files themselves can write (the `warden` command
//! writes them under `.warden/cache/`, only for policy files owned by the user running it, and
//! protects them from the governed agent like the policy files: docs/policy.md, "The compiled
//! policy cache").

use std::collections::BTreeMap;
use std::ops::Index;
use std::sync::{Arc, OnceLock};

use warden_contracts::Digest;

use crate::DerivedRule;
use crate::compile::{
    CompiledRule, IndexEntry, Plan, PolicyBuilder, PolicySnapshot, SourceReport, index, list_slot,
    preset_set_of,
};
use crate::decl::{ListKind, ToolProfile};
use crate::error::PolicyError;
use crate::matcher::{PathEnv, Pattern};
use crate::rule::Rule;
use crate::wildcard::Wildcard;

/// The first bytes of every image.
const MAGIC: &[u8] = b"warden-policy-image\n";
/// The image format: part of the key and of the header; a change of layout bumps it.
pub const IMAGE_FORMAT: u32 = 1;

/// What [`PolicyBuilder::build_with_image`] did with the image it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageLoad {
    /// The snapshot's rules come from the image.
    Loaded,
    /// No image was given: the policy was compiled.
    Absent,
    /// The image was not used (why), and the policy was compiled.
    Refused(String),
}

impl PolicyBuilder {
    /// The key an image of this builder's compiled rules is filed under: a digest of the
    /// declarations the rules are compiled from (every set's source, lists and notes; the
    /// tool profiles, aliases, preset and path environment), this crate's version, the image
    /// format, and `salt` (a caller's own version: the `warden` command adds its binary's
    /// identity, so a rebuilt binary never reads an older one's images).
    pub fn image_key(&self, salt: &str) -> String {
        let mut w = Writer::default();
        w.bytes(MAGIC);
        w.u32(IMAGE_FORMAT);
        w.str(env!("CARGO_PKG_VERSION"));
        w.str(salt);
        w.bytes(self.env.project_root.as_os_str().as_encoded_bytes());
        match &self.env.home {
            Some(home) => {
                w.u8(1);
                w.bytes(home.as_os_str().as_encoded_bytes());
            }
            None => w.u8(0),
        }
        w.u8(u8::from(self.case_insensitive_paths));
        w.u32(self.profiles.len() as u32);
        for (tool, profile) in &self.profiles {
            w.str(tool);
            w.str(profile.matcher.name());
            w.str(&profile.field);
        }
        w.u32(self.aliases.len() as u32);
        for (alias, targets) in &self.aliases {
            w.str(alias);
            w.u32(targets.len() as u32);
            for t in targets {
                w.str(t);
            }
        }
        match &self.preset {
            Some((preset, _)) => {
                w.u8(1);
                w.str(preset.name());
                w.str(self.preset_role.as_str());
            }
            None => w.u8(0),
        }
        w.u32(self.sets.len() as u32);
        for set in &self.sets {
            let s = &set.source;
            w.str(&s.name);
            w.str(s.role.as_str());
            w.u64(s.rank as u64);
            w.u8(u8::from(s.trusted));
            w.opt_str(s.path.as_deref());
            w.opt_str(s.hash.as_deref());
            w.u8(u8::from(set.own));
            w.u64(set.group as u64);
            for list in &set.lists {
                w.u32(list.len() as u32);
                for decl in list {
                    w.str(&decl.text);
                }
            }
            w.u32(set.notes.len() as u32);
            for (rule, (note, _)) in &set.notes {
                w.str(rule);
                w.str(note);
            }
        }
        Digest::of_bytes(&w.buf).to_string()
    }

    /// Builds the snapshot, its rules read from `image` when it is one of this builder's
    /// (filed under `key`, [`Self::image_key`]) and intact, else compiled (see the module
    /// documentation). Either way the snapshot decides as [`Self::build`]'s does, and has its
    /// digest; an error is the error compiling gives.
    pub fn build_with_image(
        self,
        key: &str,
        image: Option<&[u8]>,
    ) -> Result<(PolicySnapshot, ImageLoad), PolicyError> {
        let Some(bytes) = image else {
            return Ok((self.build()?, ImageLoad::Absent));
        };
        match from_image(&self, key, bytes) {
            Ok(Ok(mut snapshot)) => {
                snapshot.declared = Arc::new(self);
                Ok((snapshot, ImageLoad::Loaded))
            }
            Ok(Err(why)) => Ok((self.build()?, ImageLoad::Refused(why))),
            Err(e) => Err(e),
        }
    }
}

impl PolicySnapshot {
    /// This snapshot's rules as an image filed under `key` (the [`PolicyBuilder::image_key`] of
    /// the builder it was built from), for [`PolicyBuilder::build_with_image`].
    pub fn to_image(&self, key: &str) -> Vec<u8> {
        let mut body = Writer::default();
        body.str(&self.canonical[self.canonical_rules.clone()]);
        body.u32(self.sources.len() as u32);
        for s in &self.sources {
            for count in s.rule_counts {
                body.u64(count as u64);
            }
            body.u32(s.withheld.len() as u32);
            for w in &s.withheld {
                body.str(w);
            }
            body.u32(s.derived.len() as u32);
            for d in &s.derived {
                body.u8(list_slot(d.list) as u8);
                body.str(&d.rule);
                body.str(&d.from);
            }
        }
        let mut records = Writer::default();
        let mut offsets = Vec::with_capacity(self.rules.len());
        for r in &self.rules {
            offsets.push(records.buf.len() as u32);
            let written = r.rule.to_string();
            let mut flags = 0u8;
            if r.carve_out {
                flags |= CARVE_OUT;
            }
            if r.tool_glob.is_some() {
                flags |= TOOL_GLOB;
            }
            if r.written != written {
                flags |= EXPANDED;
            }
            records.u8(list_slot(r.list) as u8);
            records.u8(flags);
            records.u32(r.source as u32);
            records.str(r.rule.tool());
            records.opt_str(r.rule.spec());
            if flags & EXPANDED != 0 {
                records.str(&r.written);
            }
            records.opt_str(r.note.as_deref());
            records.opt_str(r.pattern.as_ref().map(Pattern::index_key));
        }
        body.u32(offsets.len() as u32);
        for o in offsets {
            body.u32(o);
        }
        body.u32(records.buf.len() as u32);
        body.bytes_raw(&records.buf);

        let mut out = Writer::default();
        out.bytes_raw(MAGIC);
        out.u32(IMAGE_FORMAT);
        out.str(key);
        out.str(&Digest::of_bytes(&body.buf).to_string());
        out.bytes_raw(&body.buf);
        out.buf
    }
}

const CARVE_OUT: u8 = 1;
const TOOL_GLOB: u8 = 2;
/// The rule as written differs from the rule (an alias expansion).
const EXPANDED: u8 = 4;

/// The snapshot built with `image`'s rules; `Ok(Err(why))` when the image is not used, `Err`
/// when the declarations do not compile (the error [`PolicyBuilder::build`] gives).
fn from_image(
    b: &PolicyBuilder,
    key: &str,
    bytes: &[u8],
) -> Result<Result<PolicySnapshot, String>, PolicyError> {
    let preset = preset_set_of(b);
    let plan = Plan::new(b, preset.as_ref())?;
    let decoded = match decode(b, &plan, key, bytes) {
        Ok(d) => d,
        Err(why) => return Ok(Err(why)),
    };
    let lists = index(decoded.entries.iter().map(|e| IndexEntry {
        list: e.list,
        tool: e.tool,
        tool_glob: e.tool_glob,
        carve_out: e.carve_out,
        key: e.key,
    }));
    let source_names: Vec<Arc<str>> = plan
        .ordered()
        .map(|set| Arc::from(set.source.name.as_str()))
        .collect();
    let rules = RuleTable::Image(Arc::new(LazyRules {
        cells: std::iter::repeat_with(OnceLock::new)
            .take(decoded.offsets.len())
            .collect(),
        records: decoded.records.to_vec(),
        offsets: decoded.offsets,
        profiles: b.profiles.clone(),
        env: b.env.clone(),
        fold: b.case_insensitive_paths,
        source_names,
    }));
    let sources = plan.source_infos(decoded.reports);
    plan.assemble(sources, rules, lists, decoded.canonical_rules)
        .map(Ok)
}

/// A rule's record, read in place.
struct Record<'a> {
    list: ListKind,
    carve_out: bool,
    tool_glob: bool,
    source: usize,
    tool: &'a str,
    spec: Option<&'a str>,
    written: Option<&'a str>,
    note: Option<&'a str>,
    key: Option<&'a str>,
}

impl<'a> Record<'a> {
    fn read(r: &mut Reader<'a>) -> Result<Self, String> {
        let list = match r.u8()? {
            0 => ListKind::Deny,
            1 => ListKind::Ask,
            2 => ListKind::Allow,
            other => return Err(format!("a rule in list {other}")),
        };
        let flags = r.u8()?;
        let source = r.u32()? as usize;
        let tool = r.str()?;
        let spec = r.opt_str()?;
        let written = if flags & EXPANDED != 0 {
            Some(r.str()?)
        } else {
            None
        };
        let note = r.opt_str()?;
        let key = r.opt_str()?;
        Ok(Self {
            list,
            carve_out: flags & CARVE_OUT != 0,
            tool_glob: flags & TOOL_GLOB != 0,
            source,
            tool,
            spec,
            written,
            note,
            key,
        })
    }
}

/// An image's parts, checked.
struct Decoded<'a> {
    canonical_rules: &'a str,
    reports: Vec<SourceReport>,
    offsets: Vec<u32>,
    records: &'a [u8],
    entries: Vec<Record<'a>>,
}

fn decode<'a>(
    b: &PolicyBuilder,
    plan: &Plan<'_>,
    key: &str,
    bytes: &'a [u8],
) -> Result<Decoded<'a>, String> {
    let mut r = Reader { buf: bytes, at: 0 };
    if r.take(MAGIC.len())? != MAGIC {
        return Err("not a policy image".into());
    }
    let format = r.u32()?;
    if format != IMAGE_FORMAT {
        return Err(format!("image format {format}, not {IMAGE_FORMAT}"));
    }
    if r.str()? != key {
        return Err(
            "filed under another key (the policy, Warden or the environment changed)".into(),
        );
    }
    let checksum = r.str()?;
    let body = &bytes[r.at..];
    if Digest::of_bytes(body).to_string() != checksum {
        return Err("its checksum does not match its contents".into());
    }
    let mut r = Reader { buf: body, at: 0 };
    let canonical_rules = r.str()?;
    let sources = r.u32()? as usize;
    if sources != plan.order.len() {
        return Err(format!(
            "{sources} sources, where the policy has {}",
            plan.order.len()
        ));
    }
    let mut reports = Vec::with_capacity(sources);
    for _ in 0..sources {
        let mut report = SourceReport::default();
        for count in &mut report.rule_counts {
            *count = r.u64()? as usize;
        }
        for _ in 0..r.count()? {
            report.withheld.push(r.str()?.to_owned());
        }
        for _ in 0..r.count()? {
            let list = match r.u8()? {
                0 => ListKind::Deny,
                1 => ListKind::Ask,
                2 => ListKind::Allow,
                other => return Err(format!("a derived rule in list {other}")),
            };
            report.derived.push(DerivedRule {
                list,
                rule: r.str()?.to_owned(),
                from: r.str()?.to_owned(),
            });
        }
        reports.push(report);
    }
    let n = r.count()?;
    let mut offsets = Vec::with_capacity(n);
    for _ in 0..n {
        offsets.push(r.u32()?);
    }
    let len = r.u32()? as usize;
    let records = r.take(len)?;
    if r.at != body.len() {
        return Err("bytes after the records".into());
    }
    // Every record reads back, at its offset, in list order, naming a source that exists and
    // (for a rule with a pattern) a tool with a matcher: a rule is materialized later, when a
    // decision first reaches it, and must not fail then.
    let mut rr = Reader {
        buf: records,
        at: 0,
    };
    let mut entries = Vec::with_capacity(n);
    let mut last = 0;
    for &offset in &offsets {
        if offset as usize != rr.at {
            return Err("a record is not where its offset says".into());
        }
        let rec = Record::read(&mut rr)?;
        let slot = list_slot(rec.list);
        if slot < last {
            return Err("records out of list order".into());
        }
        last = slot;
        if rec.source >= sources {
            return Err(format!("a rule of source {}, of {sources}", rec.source));
        }
        if rec.key.is_some() != (rec.spec.is_some() && !rec.tool_glob) {
            return Err("a rule whose pattern and specifier disagree".into());
        }
        if rec.key.is_some() && !b.profiles.contains_key(rec.tool) {
            return Err(format!("a rule for `{}`, which has no matcher", rec.tool));
        }
        entries.push(rec);
    }
    if rr.at != records.len() {
        return Err("bytes after the last record".into());
    }
    Ok(Decoded {
        canonical_rules,
        reports,
        offsets,
        records,
        entries,
    })
}

/// A snapshot's compiled rules, by id (their position: list order, then evaluation order):
/// compiled from declarations, or materialized from an image when first reached.
#[derive(Debug, Clone)]
pub(crate) enum RuleTable {
    /// Compiled from declarations.
    Built(Vec<CompiledRule>),
    /// Read from an image.
    Image(Arc<LazyRules>),
}

/// Rules materialized from an image's records when first reached.
#[derive(Debug)]
pub(crate) struct LazyRules {
    cells: Vec<OnceLock<Box<CompiledRule>>>,
    records: Vec<u8>,
    offsets: Vec<u32>,
    profiles: BTreeMap<String, ToolProfile>,
    env: PathEnv,
    fold: bool,
    source_names: Vec<Arc<str>>,
}

impl LazyRules {
    fn get(&self, id: usize) -> &CompiledRule {
        self.cells[id].get_or_init(|| Box::new(self.materialize(id)))
    }

    /// Rule `id` as compiling made it. Its record was checked when the image was read; a
    /// pattern that no longer compiles means the image is not its policy's (which the key
    /// rules out), so that is a panic, which the hook answers with a block.
    fn materialize(&self, id: usize) -> CompiledRule {
        let mut r = Reader {
            buf: &self.records,
            at: self.offsets[id] as usize,
        };
        let rec = Record::read(&mut r)
            .unwrap_or_else(|e| panic!("policy image: rule {id} does not read back: {e}"));
        let rule = Rule::from_parts(rec.tool.to_owned(), rec.spec.map(str::to_owned));
        let pattern = match (rec.key, rule.pattern()) {
            (Some(_), Some(spec)) => {
                let profile = self
                    .profiles
                    .get(rec.tool)
                    .unwrap_or_else(|| panic!("policy image: rule {id}'s tool has no matcher"));
                let p = Pattern::compile_folded(profile.matcher, spec, &self.env, self.fold)
                    .unwrap_or_else(|e| {
                        panic!("policy image: rule {id} does not compile ({e}); remove the image to rebuild it")
                    });
                Some(p)
            }
            _ => None,
        };
        let written = match rec.written {
            Some(w) => w.to_owned(),
            None => rule.to_string(),
        };
        let mut c = CompiledRule {
            list: rec.list,
            tool_glob: rec.tool_glob.then(|| Wildcard::new(rule.tool())),
            rule,
            written,
            source: rec.source,
            pattern,
            carve_out: rec.carve_out,
            note: rec.note.map(str::to_owned),
            cited: Arc::from(""),
            source_name: Arc::from(""),
            reason: Arc::from(""),
        };
        c.finish(&self.source_names[rec.source]);
        c
    }
}

impl RuleTable {
    /// How many rules there are.
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Built(rules) => rules.len(),
            Self::Image(lazy) => lazy.offsets.len(),
        }
    }

    /// Every rule, in id order (an image's are all materialized).
    pub(crate) fn iter(&self) -> Rules<'_> {
        Rules {
            table: self,
            next: 0,
        }
    }
}

impl Index<usize> for RuleTable {
    type Output = CompiledRule;

    fn index(&self, id: usize) -> &CompiledRule {
        match self {
            Self::Built(rules) => &rules[id],
            Self::Image(lazy) => lazy.get(id),
        }
    }
}

/// The rules of a [`RuleTable`], in id order.
pub(crate) struct Rules<'a> {
    table: &'a RuleTable,
    next: usize,
}

impl<'a> Iterator for Rules<'a> {
    type Item = &'a CompiledRule;

    fn next(&mut self) -> Option<&'a CompiledRule> {
        if self.next >= self.table.len() {
            return None;
        }
        self.next += 1;
        Some(&self.table[self.next - 1])
    }
}

impl<'a> IntoIterator for &'a RuleTable {
    type Item = &'a CompiledRule;
    type IntoIter = Rules<'a>;

    fn into_iter(self) -> Rules<'a> {
        self.iter()
    }
}

/// Writes an image's fields: little-endian integers, length-prefixed strings.
#[derive(Default)]
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.buf.extend_from_slice(b);
    }
    fn bytes_raw(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.u8(1);
                self.str(s);
            }
            None => self.u8(0),
        }
    }
}

/// Reads what [`Writer`] wrote; every read is bounds-checked.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.buf.len())
            .ok_or("the image is truncated")?;
        let out = &self.buf[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, String> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    /// A count of items that follow, each at least a byte: never more than the bytes left.
    fn count(&mut self) -> Result<usize, String> {
        let n = self.u32()? as usize;
        if n > self.buf.len() - self.at {
            return Err("the image is truncated".into());
        }
        Ok(n)
    }
    fn str(&mut self) -> Result<&'a str, String> {
        let n = self.u32()? as usize;
        std::str::from_utf8(self.take(n)?).map_err(|_| "a string that is not UTF-8".into())
    }
    fn opt_str(&mut self) -> Result<Option<&'a str>, String> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.str()?)),
            other => Err(format!("an optional string marked {other}")),
        }
    }
}
