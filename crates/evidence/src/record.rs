//! Sealing records: record ids, `payload_digest`, and `chain_hash` over every other field.
//!
//! `chain_hash` is `blake3:<hex>` of the RFC 8785 canonical JSON of the record's object with
//! `chain_hash` left out (absent optional fields are absent keys, exactly as the record
//! serializes). [`hash_input`] writes that text directly, without building a `serde_json::Value`
//! (the in-memory chain's throughput depends on it); a test proves it equal to
//! `warden_contracts::canonical::to_canonical_string` of the serialized record.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warden_contracts::canonical::{self, MAX_SAFE_INTEGER};
use warden_contracts::{
    AppendReceipt, ChainHead, ChainId, Digest, EvidenceAppend, EvidenceError, EvidenceRecord,
    HASH_ALGORITHM, OperationId, RecordId, RecordType, Timestamp,
};

use crate::facts::{self, Checked, Facts};
use crate::payload::{self, Payload};

/// The two record families. Both chain the same way; only evidence is ever certified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// Governed evidence (`records` table): the twelve record types.
    Evidence,
    /// The journal (`journal` table): decisions made for, and observations reported by, a
    /// provider that runs the call itself. Never certified.
    Journal,
}

impl Family {
    fn id_domain(self) -> &'static str {
        match self {
            Self::Evidence => "warden-evidence record id v1",
            Self::Journal => "warden-journal record id v1",
        }
    }

    /// The family's name, as printed (`evidence`, `journal`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Evidence => "evidence",
            Self::Journal => "journal",
        }
    }
}

/// Lower-case hex digits.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// The two lower-case hex digits of every byte.
const HEX_PAIRS: [[u8; 2]; 256] = {
    let mut t = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [HEX[i >> 4], HEX[i & 0x0f]];
        i += 1;
    }
    t
};

/// A digest's text (`blake3:` and 64 hex digits) on the stack (aligned, so reading it as a
/// `str` checks whole words from its first byte), with the hash's bytes it was written from.
#[derive(Clone, Copy)]
#[repr(align(8))]
pub(crate) struct DigestText {
    text: [u8; 71],
    hash: [u8; 32],
}

impl DigestText {
    fn of_hash(hash: &blake3::Hash) -> Self {
        let mut text = [0u8; 71];
        text[..7].copy_from_slice(b"blake3:");
        for (pair, b) in text[7..].chunks_exact_mut(2).zip(hash.as_bytes()) {
            pair.copy_from_slice(&HEX_PAIRS[usize::from(*b)]);
        }
        Self {
            text,
            hash: *hash.as_bytes(),
        }
    }

    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        // ASCII by construction.
        std::str::from_utf8(&self.text).unwrap_or("")
    }

    /// The hash's bytes.
    pub(crate) fn hash(&self) -> &[u8; 32] {
        &self.hash
    }

    /// As a [`Digest`] (its one allocation, from the hash's bytes: no text re-validated).
    pub(crate) fn to_digest(self) -> Digest {
        Digest::from_hash_bytes(&self.hash)
    }
}

impl fmt::Debug for DigestText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text of `blake3:<hex>` of `bytes`, without allocating.
pub(crate) fn digest_text(bytes: &[u8]) -> DigestText {
    DigestText::of_hash(&blake3::hash(bytes))
}

/// `blake3:<hex>` of `bytes`: `Digest::of_bytes`.
pub(crate) fn digest_of(bytes: &[u8]) -> Digest {
    Digest::of_bytes(bytes)
}

/// A record id's text (`rec_` and 32 hex digits) on the stack.
#[derive(Clone, Copy)]
#[repr(align(8))]
pub(crate) struct RecordIdText([u8; 36]);

impl RecordIdText {
    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        // ASCII by construction.
        std::str::from_utf8(&self.0).unwrap_or("")
    }
}

impl fmt::Debug for RecordIdText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The 16 hex digits every record id of `chain` in `family` starts with (after `rec_`): the
/// stores bind each to one chain, so no two chains' record ids can collide.
pub(crate) fn record_id_prefix(family: Family, chain: &str) -> [u8; 16] {
    CHAIN_PREFIX.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some((f, c, prefix)) = cache.as_ref()
            && *f == family
            && c == chain
        {
            return *prefix;
        }
        let mut h = blake3::Hasher::new();
        h.update(family.id_domain().as_bytes());
        h.update(&[0]);
        h.update(chain.as_bytes());
        let hash = h.finalize();
        let mut prefix = [0u8; 16];
        for (i, b) in hash.as_bytes()[..8].iter().enumerate() {
            prefix[2 * i] = HEX[usize::from(b >> 4)];
            prefix[2 * i + 1] = HEX[usize::from(b & 0x0f)];
        }
        *cache = Some((family, chain.to_owned(), prefix));
        prefix
    })
}

/// [`record_id_for`] without allocating: verification compares it with the stored id.
pub(crate) fn record_id_text(family: Family, chain: &ChainId, sequence: u64) -> RecordIdText {
    let prefix = record_id_prefix(family, chain.as_str());
    let mut text = [0u8; 36];
    text[..4].copy_from_slice(b"rec_");
    text[4..20].copy_from_slice(&prefix);
    for (i, shift) in (0..16).rev().enumerate() {
        text[20 + i] = HEX[((sequence >> (4 * shift)) & 0x0f) as usize];
    }
    RecordIdText(text)
}

/// The record id a store assigns at `sequence` of `chain`: `rec_`, 16 hex digits of a BLAKE3
/// hash of the family and the chain id, and the sequence as 16 hex digits. Deterministic, so
/// every backend assigns the same ids and a verifier can check them; unique per family and chain.
pub fn record_id_for(
    family: Family,
    chain: &ChainId,
    sequence: u64,
) -> Result<RecordId, EvidenceError> {
    // `rec_` and 32 hex digits: always a valid identifier.
    RecordId::new(record_id_text(family, chain, sequence).as_str())
        .map_err(|e| invalid(e.to_string()))
}

thread_local! {
    /// The last chain's id prefix: appends and verification walk one chain at a time.
    static CHAIN_PREFIX: std::cell::RefCell<Option<(Family, String, [u8; 16])>> =
        const { std::cell::RefCell::new(None) };
    /// Text buffers (the hash input, a payload's escaped text, its canonical text), reused
    /// from record to record.
    static BUFFERS: std::cell::RefCell<(String, String, String)> =
        const { std::cell::RefCell::new((String::new(), String::new(), String::new())) };
}

/// The fields of one record, borrowed: shared by evidence and journal records.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a> {
    /// `record_id`.
    pub record_id: &'a str,
    /// `record_type` as serialized (`policy_bound`, `hook_verdict`, …).
    pub record_type: &'a str,
    /// `chain_id`.
    pub chain_id: &'a str,
    /// `operation_id`.
    pub operation_id: Option<&'a str>,
    /// `sequence`.
    pub sequence: u64,
    /// `policy_id`.
    pub policy_id: &'a str,
    /// `policy_version`.
    pub policy_version: &'a str,
    /// `payload_json`.
    pub payload_json: &'a str,
    /// `payload_digest`.
    pub payload_digest: &'a str,
    /// `previous_chain_hash`.
    pub previous_chain_hash: Option<&'a str>,
    /// `supersedes_record_id`.
    pub supersedes_record_id: Option<&'a str>,
    /// `created_at` (milliseconds).
    pub created_at: u64,
    /// `hash_algorithm`.
    pub hash_algorithm: &'a str,
}

impl<'a> Fields<'a> {
    /// The fields of an evidence record.
    pub fn of(r: &'a EvidenceRecord) -> Self {
        Self {
            record_id: r.record_id.as_str(),
            record_type: record_type_str(r.record_type),
            chain_id: r.chain_id.as_str(),
            operation_id: r.operation_id.as_ref().map(OperationId::as_str),
            sequence: r.sequence,
            policy_id: &r.policy_id,
            policy_version: &r.policy_version,
            payload_json: &r.payload_json,
            payload_digest: r.payload_digest.as_str(),
            previous_chain_hash: r.previous_chain_hash.as_ref().map(Digest::as_str),
            supersedes_record_id: r.supersedes_record_id.as_ref().map(RecordId::as_str),
            created_at: r.created_at.0,
            hash_algorithm: &r.hash_algorithm,
        }
    }
}

/// The canonical JSON text `chain_hash` is computed over: the record without `chain_hash`.
pub fn hash_input(f: &Fields<'_>) -> String {
    let mut out = String::new();
    write_hash_input(&mut out, f);
    out
}

/// The hash input's fields before `previous_chain_hash` in key order (the part that does not
/// depend on the chain's head, apart from the payload).
#[derive(Clone, Copy)]
struct PrefixFields<'a> {
    /// Whether `hash_algorithm` and the digest are known to need no escaping (sealing writes
    /// them itself; a verifier's fields can hold anything).
    sealing: bool,
    chain_id: &'a str,
    created_at: u64,
    hash_algorithm: &'a str,
    operation_id: Option<&'a str>,
    policy_id: &'a str,
    policy_version: &'a str,
}

/// Writes the hash input up to (not including) `previous_chain_hash`; `payload` writes
/// `payload_json`'s value.
fn write_prefix(
    out: &mut String,
    p: &PrefixFields<'_>,
    payload_digest: &str,
    payload: impl FnOnce(&mut String),
) {
    // Keys in RFC 8785 order (all ASCII, so UTF-16 order is byte order).
    out.push_str("{\"chain_id\":");
    write_str(out, p.chain_id);
    out.push_str(",\"created_at\":");
    push_u64(out, p.created_at);
    out.push_str(",\"hash_algorithm\":");
    write_known(out, p.hash_algorithm, p.sealing);
    if let Some(op) = p.operation_id {
        out.push_str(",\"operation_id\":");
        write_str(out, op);
    }
    out.push_str(",\"payload_digest\":");
    write_known(out, payload_digest, p.sealing);
    out.push_str(",\"payload_json\":");
    payload(out);
    out.push_str(",\"policy_id\":");
    write_str(out, p.policy_id);
    out.push_str(",\"policy_version\":");
    write_str(out, p.policy_version);
}

/// Writes the rest of the hash input, from `previous_chain_hash` on. `sealing`: the previous
/// hash (a `Digest`), the record id and the record type are known to need no escaping.
fn write_suffix(
    out: &mut String,
    sealing: bool,
    previous_chain_hash: Option<&str>,
    record_id: &str,
    record_type: &str,
    sequence: u64,
    supersedes_record_id: Option<&str>,
) {
    if let Some(prev) = previous_chain_hash {
        out.push_str(",\"previous_chain_hash\":");
        write_known(out, prev, sealing);
    }
    out.push_str(",\"record_id\":");
    write_known(out, record_id, sealing);
    out.push_str(",\"record_type\":");
    write_known(out, record_type, sealing);
    out.push_str(",\"sequence\":");
    push_u64(out, sequence);
    if let Some(sup) = supersedes_record_id {
        out.push_str(",\"supersedes_record_id\":");
        write_str(out, sup);
    }
    out.push('}');
}

fn write_hash_input(out: &mut String, f: &Fields<'_>) {
    out.reserve(320 + f.payload_json.len() * 9 / 8);
    let prefix = PrefixFields {
        sealing: false,
        chain_id: f.chain_id,
        created_at: f.created_at,
        hash_algorithm: f.hash_algorithm,
        operation_id: f.operation_id,
        policy_id: f.policy_id,
        policy_version: f.policy_version,
    };
    write_prefix(out, &prefix, f.payload_digest, |out| {
        write_str(out, f.payload_json);
    });
    write_suffix(
        out,
        false,
        f.previous_chain_hash,
        f.record_id,
        f.record_type,
        f.sequence,
        f.supersedes_record_id,
    );
}

/// The chain hash of a record's fields.
pub fn chain_hash(f: &Fields<'_>) -> Digest {
    with_buffers(|buffer, _, _| {
        write_hash_input(buffer, f);
        Digest::of_bytes(buffer.as_bytes())
    })
}

/// Runs `f` with the thread's text buffers (cleared), reused from record to record.
fn with_buffers<T>(f: impl FnOnce(&mut String, &mut String, &mut String) -> T) -> T {
    BUFFERS.with(|buffers| match buffers.try_borrow_mut() {
        Ok(mut buffers) => {
            let (a, b, c) = &mut *buffers;
            a.clear();
            b.clear();
            c.clear();
            let out = f(a, b, c);
            // Keep the buffers for the next record unless a huge payload grew them.
            for buffer in [a, b, c] {
                if buffer.capacity() > 1 << 20 {
                    *buffer = String::new();
                }
            }
            out
        }
        // Not reentrant; should it ever be, fresh buffers give the same result.
        Err(_) => f(&mut String::new(), &mut String::new(), &mut String::new()),
    })
}

/// The chain hash's text: the hash input is written into a reused buffer and hashed once.
pub(crate) fn chain_hash_text(f: &Fields<'_>) -> DigestText {
    with_buffers(|buffer, _, _| {
        write_hash_input(buffer, f);
        digest_text(buffer.as_bytes())
    })
}

/// Decimal digits of an integer, on the stack.
#[derive(Default)]
struct Digits([u8; 21]);

/// The two decimal digits of 0..100.
const PAIRS: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

impl Digits {
    /// The digits of `n` (two at a time), after a minus sign when `negative`, as bytes.
    fn bytes(&mut self, mut n: u64, negative: bool) -> &[u8] {
        let mut i = self.0.len();
        while n >= 100 {
            i -= 2;
            self.0[i..i + 2].copy_from_slice(&PAIRS[(n % 100) as usize]);
            n /= 100;
        }
        if n >= 10 {
            i -= 2;
            self.0[i..i + 2].copy_from_slice(&PAIRS[n as usize]);
        } else {
            i -= 1;
            self.0[i] = b'0' + n as u8;
        }
        if negative {
            i -= 1;
            self.0[i] = b'-';
        }
        &self.0[i..]
    }

    /// The digits of `n`, after a minus sign when `negative`.
    fn of(&mut self, n: u64, negative: bool) -> &str {
        std::str::from_utf8(self.bytes(n, negative)).unwrap_or("0")
    }
}

fn push_u64(out: &mut String, n: u64) {
    let mut digits = Digits::default();
    let digits = digits.bytes(n, false);
    out.reserve(digits.len());
    for &b in digits {
        out.push(char::from(b));
    }
}

/// A JSON string known to need no escaping (a digest, a record id the store assigned, a record
/// type's name, the hash algorithm) when `known`, else [`write_str`].
fn write_known(out: &mut String, s: &str, known: bool) {
    if known {
        debug_assert!(!needs_escape(s.as_bytes()));
        out.reserve(s.len() + 2);
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        write_str(out, s);
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Whether a JSON string must escape any byte of `b` (`"`, `\`, a control character below
/// 0x20): the whole-string test of the common case, where nothing needs escaping.
#[inline]
fn needs_escape(b: &[u8]) -> bool {
    flagged::<false>(b)
}

/// Whether an object key is plain: ASCII with nothing to escape, so it is written as it is and
/// sorts in byte order (UTF-16 order, for ASCII).
#[inline]
fn plain_key(k: &str) -> bool {
    !flagged::<true>(k.as_bytes())
}

/// Whether any byte of `b` must be escaped (or, with `NON_ASCII`, is not ASCII). Sixteen bytes
/// at a time (a fixed-size test the compiler turns into vector compares), shorter strings as
/// two overlapping words; the last chunk or word overlaps the ones before.
#[inline(always)]
fn flagged<const NON_ASCII: bool>(b: &[u8]) -> bool {
    #[inline(always)]
    fn byte<const NON_ASCII: bool>(c: u8) -> bool {
        (c < 0x20) | (c == b'"') | (c == b'\\') | (NON_ASCII & (c >= 0x80))
    }
    #[inline(always)]
    fn any16<const NON_ASCII: bool>(chunk: &[u8; 16]) -> bool {
        chunk
            .iter()
            .fold(false, |hit, &c| hit | byte::<NON_ASCII>(c))
    }
    #[inline(always)]
    fn hits<const NON_ASCII: bool>(w: u64) -> u64 {
        escape_hits(w) | if NON_ASCII { w & HIGHS } else { 0 }
    }
    #[inline(always)]
    fn word(b: &[u8]) -> u64 {
        <[u8; 8]>::try_from(b).map_or(0, u64::from_le_bytes)
    }
    #[inline(always)]
    fn half(b: &[u8]) -> u64 {
        // Four bytes, the upper four plain.
        <[u8; 4]>::try_from(b).map_or(0, |w| u64::from(u32::from_le_bytes(w)))
            | (ONES * u64::from(b'0')) << 32
    }
    match b.len() {
        16.. => {
            for chunk in b.chunks_exact(16) {
                if let Ok(chunk) = <&[u8; 16]>::try_from(chunk)
                    && any16::<NON_ASCII>(chunk)
                {
                    return true;
                }
            }
            match <&[u8; 16]>::try_from(&b[b.len() - 16..]) {
                Ok(last) => any16::<NON_ASCII>(last),
                Err(_) => true,
            }
        }
        8.. => hits::<NON_ASCII>(word(&b[..8])) | hits::<NON_ASCII>(word(&b[b.len() - 8..])) != 0,
        4.. => hits::<NON_ASCII>(half(&b[..4])) | hits::<NON_ASCII>(half(&b[b.len() - 4..])) != 0,
        _ => b.iter().any(|&c| byte::<NON_ASCII>(c)),
    }
}

/// The bytes of `w` a JSON string must escape, as their high bits (the lowest flagged byte is
/// always a true match: borrows only propagate upwards from one).
#[inline(always)]
fn escape_hits(w: u64) -> u64 {
    let control = w.wrapping_sub(ONES * 0x20) & !w;
    let quote = w ^ (ONES * u64::from(b'"'));
    let quote = quote.wrapping_sub(ONES) & !quote;
    let backslash = w ^ (ONES * u64::from(b'\\'));
    let backslash = backslash.wrapping_sub(ONES) & !backslash;
    (control | quote | backslash) & HIGHS
}

/// The index of the first byte at or after `i` that a JSON string must escape (`"`, `\`, a
/// control character below 0x20), or the length. Eight bytes at a time: in each word, the
/// lowest flagged byte is always a true match (borrows only propagate upwards from one).
#[inline]
fn next_escape(b: &[u8], mut i: usize) -> usize {
    let word = |chunk: &[u8]| {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        u64::from_le_bytes(word)
    };
    while let Some(chunk) = b.get(i..i + 8) {
        let hits = escape_hits(word(chunk));
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    // The last (partial) word: the string's last eight bytes when it has that many, shifted so
    // that it starts at `i` (the bytes before it may be escapes already handled), with plain
    // bytes shifted in above.
    if i < b.len()
        && let Some(start) = b.len().checked_sub(8)
        && let Some(chunk) = b.get(start..)
    {
        let shift = 8 * (i - start) as u32;
        let w = (word(chunk) >> shift) | ((ONES * u64::from(b'0')) << (64 - shift));
        let hits = escape_hits(w);
        return if hits == 0 {
            b.len()
        } else {
            (i + (hits.trailing_zeros() / 8) as usize).min(b.len())
        };
    }
    while let Some(&c) = b.get(i) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            return i;
        }
        i += 1;
    }
    i
}

/// A JSON string in RFC 8785 form (minimal escapes, lower-case `\u00xx`).
fn write_str(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    if !needs_escape(s.as_bytes()) {
        out.push_str(s);
        out.push('"');
        return;
    }
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut from = 0;
    loop {
        let i = next_escape(bytes, from);
        let Some(&b) = bytes.get(i) else { break };
        // `i` is at an ASCII byte: a character boundary.
        match b {
            // A backslash before the character itself, which then starts the next run.
            b'"' | b'\\' => {
                out.push_str(&s[start..i]);
                out.push('\\');
                start = i;
            }
            _ => {
                out.push_str(&s[start..i]);
                match b {
                    0x08 => out.push_str("\\b"),
                    b'\t' => out.push_str("\\t"),
                    b'\n' => out.push_str("\\n"),
                    0x0c => out.push_str("\\f"),
                    b'\r' => out.push_str("\\r"),
                    _ => {
                        out.push_str("\\u00");
                        out.push(char::from(HEX[usize::from(b >> 4)]));
                        out.push(char::from(HEX[usize::from(b & 0x0f)]));
                    }
                }
                start = i + 1;
            }
        }
        from = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// RFC 8785 canonical JSON, fast path: the same text as
/// `warden_contracts::canonical::to_canonical_string` (a property test holds them equal), written
/// with bulk string copies and integer formatting. Payloads carry no fractional numbers; a value
/// with one (or an integer beyond ±(2^53 − 1)) goes to the contracts implementation.
pub fn canonical_json(
    value: &Value,
) -> Result<String, warden_contracts::canonical::CanonicalError> {
    let mut out = String::with_capacity(256);
    if write_canonical(&mut out, value) {
        Ok(out)
    } else {
        canonical::to_canonical_string(value)
    }
}

/// Where the canonical writer writes.
trait Sink {
    /// Text with nothing to escape (punctuation, numbers, literals).
    fn plain(&mut self, s: &str);
    /// One byte of punctuation.
    fn byte(&mut self, b: char);
    /// A JSON string.
    fn string(&mut self, s: &str);
    /// An object member's key and the colon after it.
    fn key(&mut self, k: &str) {
        self.string(k);
        self.byte(':');
    }
    /// [`Sink::key`] for a key [`plain_key`] passed.
    fn plain_key(&mut self, k: &str) {
        self.key(k);
    }
    /// Where the output ends now.
    fn mark(&self) -> (usize, usize);
    /// Drops what was written after `mark`.
    fn reset(&mut self, mark: (usize, usize));
}

impl Sink for String {
    fn mark(&self) -> (usize, usize) {
        (self.len(), 0)
    }
    fn reset(&mut self, mark: (usize, usize)) {
        self.truncate(mark.0);
    }
    fn plain(&mut self, s: &str) {
        self.push_str(s);
    }
    fn byte(&mut self, b: char) {
        self.push(b);
    }
    fn string(&mut self, s: &str) {
        write_str(self, s);
    }
}

/// The canonical text and, at once, its contents as a JSON string (what the hash input embeds
/// as `payload_json`): no second pass over the text to escape its quotes.
struct Dual<'a> {
    text: &'a mut String,
    escaped: &'a mut String,
}

impl Dual<'_> {
    /// `s`, which needs no escaping, quoted: `"s` and `close` in the text, `\"s` and
    /// `escaped_close` (the same closing, escaped) in its escaped copy.
    #[inline(always)]
    fn quoted(&mut self, s: &str, close: &str, escaped_close: &str) {
        self.text.reserve(s.len() + 1 + close.len());
        self.text.push('"');
        self.text.push_str(s);
        self.text.push_str(close);
        self.escaped.reserve(s.len() + 2 + escaped_close.len());
        self.escaped.push_str("\\\"");
        self.escaped.push_str(s);
        self.escaped.push_str(escaped_close);
    }
}

impl Sink for Dual<'_> {
    fn key(&mut self, k: &str) {
        if needs_escape(k.as_bytes()) {
            self.string(k);
            self.byte(':');
        } else {
            self.plain_key(k);
        }
    }
    fn plain_key(&mut self, k: &str) {
        self.quoted(k, "\":", "\\\":");
    }
    fn mark(&self) -> (usize, usize) {
        (self.text.len(), self.escaped.len())
    }
    fn reset(&mut self, mark: (usize, usize)) {
        self.text.truncate(mark.0);
        self.escaped.truncate(mark.1);
    }
    fn plain(&mut self, s: &str) {
        self.text.push_str(s);
        self.escaped.push_str(s);
    }
    fn byte(&mut self, b: char) {
        self.text.push(b);
        self.escaped.push(b);
    }
    fn string(&mut self, s: &str) {
        if !needs_escape(s.as_bytes()) {
            self.quoted(s, "\"", "\\\"");
        } else {
            let start = self.text.len();
            write_str(self.text, s);
            let quoted = &self.text[start..];
            // The quoted string's own text as the contents of a JSON string: the escape of it,
            // without the surrounding quotes `write_str` adds.
            let mut again = String::with_capacity(quoted.len() * 2);
            write_str(&mut again, quoted);
            self.escaped
                .push_str(again.get(1..again.len() - 1).unwrap_or(""));
        }
    }
}

/// Writes the canonical text of `value` into `text` and its contents as a JSON string into
/// `escaped`; `false` when the fast path cannot write it.
fn canonical_json_escaped(value: &Value, text: &mut String, escaped: &mut String) -> bool {
    write_canonical(&mut Dual { text, escaped }, value)
}

/// Whether `a` sorts strictly before `b` in byte order: the first bytes decide most pairs of
/// keys without a call to compare the rest.
#[inline(always)]
fn sorts_before(a: &str, b: &str) -> bool {
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(x), Some(y)) if x != y => x < y,
        _ => a < b,
    }
}

/// Returns `false` when the fast path cannot write `v` exactly.
fn write_canonical<S: Sink>(out: &mut S, v: &Value) -> bool {
    match v {
        Value::Null => out.plain("null"),
        Value::Bool(b) => out.plain(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let mut digits = Digits::default();
            if let Some(u) = n.as_u64() {
                if u > MAX_SAFE_INTEGER {
                    return false;
                }
                out.plain(digits.of(u, false));
            } else if let Some(i) = n.as_i64() {
                if i.unsigned_abs() > MAX_SAFE_INTEGER {
                    return false;
                }
                out.plain(digits.of(i.unsigned_abs(), i < 0));
            } else {
                return false;
            }
        }
        Value::String(s) => out.string(s),
        Value::Array(items) => {
            out.byte('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.byte(',');
                }
                if !write_canonical(out, item) {
                    return false;
                }
            }
            out.byte(']');
        }
        Value::Object(map) => {
            // The map iterates in key order (a `BTreeMap`) unless serde_json's `preserve_order`
            // is on somewhere in the build; while the keys are plain (ASCII, nothing to escape)
            // and in order (UTF-16 order is byte order for ASCII), write them as they come; else
            // start the object over, sorted.
            let mark = out.mark();
            out.byte('{');
            let mut previous: Option<&str> = None;
            let mut in_order = true;
            for (k, item) in map {
                match previous {
                    None => {}
                    Some(p) if sorts_before(p, k) => out.byte(','),
                    Some(_) => {
                        in_order = false;
                        break;
                    }
                }
                if !plain_key(k) {
                    // Escapes or non-ASCII: the sorted path below writes it.
                    in_order = false;
                    break;
                }
                previous = Some(k);
                out.plain_key(k);
                if !write_canonical(out, item) {
                    return false;
                }
            }
            if !in_order {
                out.reset(mark);
                out.byte('{');
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                if entries.iter().all(|(k, _)| k.is_ascii()) {
                    entries.sort_unstable_by(|(a, _), (b, _)| a.as_bytes().cmp(b.as_bytes()));
                } else {
                    entries.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
                }
                for (i, (k, item)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.byte(',');
                    }
                    out.key(k);
                    if !write_canonical(out, item) {
                        return false;
                    }
                }
            }
            out.byte('}');
        }
    }
    true
}

/// The serialized name of a record type (`policy_bound`, …).
pub fn record_type_str(t: RecordType) -> &'static str {
    match t {
        RecordType::PolicyBound => "policy_bound",
        RecordType::OperationStarted => "operation_started",
        RecordType::GateEvaluated => "gate_evaluated",
        RecordType::ExceptionGranted => "exception_granted",
        RecordType::OperationDenied => "operation_denied",
        RecordType::CallableCompleted => "callable_completed",
        RecordType::CallableFailed => "callable_failed",
        RecordType::OperationCancelled => "operation_cancelled",
        RecordType::OperationTimedOut => "operation_timed_out",
        RecordType::ExternalResultAmbiguous => "external_result_ambiguous",
        RecordType::TaskClosed => "task_closed",
        RecordType::RecordSuperseded => "record_superseded",
    }
}

/// Parses a serialized record type name.
pub fn parse_record_type(s: &str) -> Option<RecordType> {
    RecordType::ALL
        .into_iter()
        .find(|t| record_type_str(*t) == s)
}

/// A record type of one family: evidence's [`RecordType`] or the journal's
/// [`crate::JournalRecordType`]. Records, row decoding and sealing are generic over it.
pub trait RecordKind: Copy + Eq + fmt::Debug + Send + Sync + 'static {
    /// The family whose records have this type.
    const FAMILY: Family;
    /// The serialized name (`policy_bound`, `hook_verdict`, …).
    fn name(self) -> &'static str;
    /// Parses a serialized name.
    fn from_name(name: &str) -> Option<Self>;
}

impl RecordKind for RecordType {
    const FAMILY: Family = Family::Evidence;
    fn name(self) -> &'static str {
        record_type_str(self)
    }
    fn from_name(name: &str) -> Option<Self> {
        parse_record_type(name)
    }
}

/// A record of either family: the fields of docs/design/evidence.md#records, generic over the
/// family's record-type enum. The journal's records are `Record<JournalRecordType>`
/// ([`crate::JournalRecord`]); evidence records are the contracts' [`EvidenceRecord`], which
/// converts to and from `Record<RecordType>` field by field. Both serialize the same way.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record<T> {
    /// The record's id.
    pub record_id: RecordId,
    /// Its type.
    pub record_type: T,
    /// The chain.
    pub chain_id: ChainId,
    /// The operation it concerns (for the journal: the provider's call id), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<OperationId>,
    /// Position in the chain, from 0.
    pub sequence: u64,
    /// The policy in force.
    pub policy_id: String,
    /// Its version.
    pub policy_version: String,
    /// The payload's canonical JSON text.
    pub payload_json: String,
    /// Digest of `payload_json`.
    pub payload_digest: Digest,
    /// The previous record's chain hash; absent only at genesis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_chain_hash: Option<Digest>,
    /// The hash over every other field.
    pub chain_hash: Digest,
    /// The record this one corrects (`record_superseded`); always absent in the journal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes_record_id: Option<RecordId>,
    /// When it was appended.
    pub created_at: Timestamp,
    /// `blake3-v1`.
    pub hash_algorithm: String,
}

impl<T: RecordKind> Record<T> {
    /// The borrowed fields the chain hash covers.
    pub fn fields(&self) -> Fields<'_> {
        Fields {
            record_id: self.record_id.as_str(),
            record_type: self.record_type.name(),
            chain_id: self.chain_id.as_str(),
            operation_id: self.operation_id.as_ref().map(OperationId::as_str),
            sequence: self.sequence,
            policy_id: &self.policy_id,
            policy_version: &self.policy_version,
            payload_json: &self.payload_json,
            payload_digest: self.payload_digest.as_str(),
            previous_chain_hash: self.previous_chain_hash.as_ref().map(Digest::as_str),
            supersedes_record_id: self.supersedes_record_id.as_ref().map(RecordId::as_str),
            created_at: self.created_at.0,
            hash_algorithm: &self.hash_algorithm,
        }
    }

    /// The record's head.
    pub fn head(&self) -> ChainHead {
        ChainHead {
            chain_id: self.chain_id.clone(),
            sequence: self.sequence,
            chain_hash: self.chain_hash.clone(),
        }
    }

    /// The receipt of the stored record.
    pub fn receipt(&self) -> AppendReceipt {
        AppendReceipt {
            chain_id: self.chain_id.clone(),
            record_id: self.record_id.clone(),
            sequence: self.sequence,
            chain_hash: self.chain_hash.clone(),
        }
    }
}

impl From<Record<RecordType>> for EvidenceRecord {
    fn from(r: Record<RecordType>) -> Self {
        Self {
            record_id: r.record_id,
            record_type: r.record_type,
            chain_id: r.chain_id,
            operation_id: r.operation_id,
            sequence: r.sequence,
            policy_id: r.policy_id,
            policy_version: r.policy_version,
            payload_json: r.payload_json,
            payload_digest: r.payload_digest,
            previous_chain_hash: r.previous_chain_hash,
            chain_hash: r.chain_hash,
            supersedes_record_id: r.supersedes_record_id,
            created_at: r.created_at,
            hash_algorithm: r.hash_algorithm,
        }
    }
}

impl From<EvidenceRecord> for Record<RecordType> {
    fn from(r: EvidenceRecord) -> Self {
        Self {
            record_id: r.record_id,
            record_type: r.record_type,
            chain_id: r.chain_id,
            operation_id: r.operation_id,
            sequence: r.sequence,
            policy_id: r.policy_id,
            policy_version: r.policy_version,
            payload_json: r.payload_json,
            payload_digest: r.payload_digest,
            previous_chain_hash: r.previous_chain_hash,
            chain_hash: r.chain_hash,
            supersedes_record_id: r.supersedes_record_id,
            created_at: r.created_at,
            hash_algorithm: r.hash_algorithm,
        }
    }
}

pub(crate) fn invalid(message: impl Into<String>) -> EvidenceError {
    EvidenceError::Invalid {
        message: message.into(),
    }
}

/// The fields of an append both families share, borrowed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AppendFields<'a> {
    pub(crate) family: Family,
    pub(crate) record_type: &'static str,
    pub(crate) chain_id: &'a ChainId,
    pub(crate) operation_id: Option<&'a OperationId>,
    pub(crate) expected_sequence: u64,
    pub(crate) policy_id: &'a str,
    pub(crate) policy_version: &'a str,
    pub(crate) supersedes_record_id: Option<&'a RecordId>,
    pub(crate) created_at: Timestamp,
}

impl<'a> AppendFields<'a> {
    /// An evidence append's fields.
    pub(crate) fn evidence(e: &'a EvidenceAppend) -> Self {
        Self {
            family: Family::Evidence,
            record_type: record_type_str(e.record_type),
            chain_id: &e.chain_id,
            operation_id: e.operation_id.as_ref(),
            expected_sequence: e.expected_sequence,
            policy_id: &e.policy_id,
            policy_version: &e.policy_version,
            supersedes_record_id: e.supersedes_record_id.as_ref(),
            created_at: e.created_at,
        }
    }
}

/// Where a prepared append keeps the hash input's prefix (every field before
/// `previous_chain_hash` in key order, known before the append takes its place in the chain)
/// until it is sealed.
pub(crate) trait PrefixState {
    /// Takes the prefix.
    fn start(&mut self, prefix: &[u8]);
    /// The hash of the prefix followed by `suffix`.
    fn finish(&mut self, suffix: &[u8]) -> blake3::Hash;
}

/// Hashed at once by a hasher the caller lends: the in-memory store prepares and seals on one
/// thread and reuses one hasher per thread (no allocation, no copy of its ~2 KiB).
impl PrefixState for &mut blake3::Hasher {
    fn start(&mut self, prefix: &[u8]) {
        self.reset();
        self.update(prefix);
    }
    fn finish(&mut self, suffix: &[u8]) -> blake3::Hash {
        self.update(suffix);
        self.finalize()
    }
}

/// The hash input's prefix as a prepared append keeps it until it is sealed.
#[derive(Debug, Clone)]
pub(crate) enum Prefix {
    /// The prefix's text, hashed when the append is sealed, by the sealing thread's hasher: an
    /// append queued for the SQLite writer holds its ~600 bytes, not a ~2 KiB hasher state (a
    /// burst of thousands of queued appends touches a third of the memory; docs/benchmarks.md).
    Text(Vec<u8>),
    /// The prefix already hashed, on the thread that prepared the append: the in-memory store
    /// prepares outside the lock that orders a chain's appends, so that under it only the
    /// suffix is hashed.
    Hashed(Box<blake3::Hasher>),
}

impl Default for Prefix {
    fn default() -> Self {
        Self::Text(Vec::new())
    }
}

impl Prefix {
    /// A prefix to be hashed when it is taken.
    pub(crate) fn hashed() -> Self {
        Self::Hashed(Box::default())
    }
}

impl PrefixState for Prefix {
    fn start(&mut self, prefix: &[u8]) {
        match self {
            Self::Text(text) => {
                text.clear();
                text.extend_from_slice(prefix);
            }
            Self::Hashed(hasher) => {
                hasher.reset();
                hasher.update(prefix);
            }
        }
    }
    fn finish(&mut self, suffix: &[u8]) -> blake3::Hash {
        match self {
            Self::Text(text) => with_hasher(|hasher| {
                hasher.reset();
                hasher.update(text);
                hasher.update(suffix);
                hasher.finalize()
            }),
            Self::Hashed(hasher) => {
                hasher.update(suffix);
                hasher.finalize()
            }
        }
    }
}

thread_local! {
    /// This thread's hasher, reused from record to record (it is ~2 KiB).
    static HASHER: std::cell::RefCell<blake3::Hasher> =
        std::cell::RefCell::new(blake3::Hasher::new());
}

/// Runs `f` with this thread's hasher (in whatever state the last use left it).
pub(crate) fn with_hasher<T>(f: impl FnOnce(&mut blake3::Hasher) -> T) -> T {
    HASHER.with(|hasher| match hasher.try_borrow_mut() {
        Ok(mut hasher) => f(&mut hasher),
        // Not reentrant; should it ever be, a fresh hasher gives the same result.
        Err(_) => f(&mut blake3::Hasher::new()),
    })
}

/// The part of sealing an append that depends neither on the chain's head nor on the append's
/// sequence: its payload's canonical JSON text and digest, and the hash input's prefix in `H`
/// ([`PrefixState`]). It can be made before the append has its place in the chain, outside any
/// lock ([`crate::PreparedAppend`]).
#[derive(Debug, Clone)]
pub(crate) struct Canonical<H = Prefix> {
    pub(crate) json: String,
    pub(crate) digest: DigestText,
    prefix: H,
}

impl<H: PrefixState> Canonical<H> {
    /// Canonicalizes `value` and takes the hash input's prefix into `hasher` (reset first).
    pub(crate) fn new(
        a: &AppendFields<'_>,
        value: &Value,
        hasher: H,
    ) -> Result<Self, EvidenceError> {
        with_buffers(|buffer, escaped, text| {
            // Written into a reused buffer, then copied into a string of its exact size: the
            // record keeps no unused capacity, and a large payload is never copied as it grows.
            Ok(if canonical_json_escaped(value, text, escaped) {
                Self::with_text(
                    a,
                    String::from(text.as_str()),
                    Some(escaped),
                    buffer,
                    hasher,
                )
            } else {
                let json =
                    canonical::to_canonical_string(value).map_err(|e| invalid(e.to_string()))?;
                Self::with_text(a, json, None, buffer, hasher)
            })
        })
    }

    /// Takes `json`, a payload's canonical text, and the hash input's prefix into `hasher`
    /// (reset first).
    pub(crate) fn of_text(a: &AppendFields<'_>, json: String, hasher: H) -> Self {
        with_buffers(|buffer, _, _| Self::with_text(a, json, None, buffer, hasher))
    }

    /// Digests `json` and writes the hash input's prefix into `buffer` (with `escaped`, the
    /// text's contents as a JSON string, when the writer made it), then into `hasher`.
    #[inline(always)]
    fn with_text(
        a: &AppendFields<'_>,
        json: String,
        escaped: Option<&str>,
        buffer: &mut String,
        mut hasher: H,
    ) -> Self {
        let digest = digest_text(json.as_bytes());
        let fields = PrefixFields {
            sealing: true,
            chain_id: a.chain_id.as_str(),
            created_at: a.created_at.0,
            hash_algorithm: HASH_ALGORITHM,
            operation_id: a.operation_id.map(OperationId::as_str),
            policy_id: a.policy_id,
            policy_version: a.policy_version,
        };
        buffer.reserve(256 + json.len() * 9 / 8);
        write_prefix(buffer, &fields, digest.as_str(), |out| match escaped {
            Some(escaped) => {
                out.push('"');
                out.push_str(escaped);
                out.push('"');
            }
            None => write_str(out, &json),
        });
        hasher.start(buffer.as_bytes());
        Self {
            json,
            digest,
            prefix: hasher,
        }
    }

    /// Gives the append the id of the record at its sequence.
    pub(crate) fn place(self, record_id: RecordId) -> Prepared<H> {
        Prepared {
            json: self.json,
            digest: self.digest,
            prefix: self.prefix,
            record_id,
        }
    }
}

/// The head-independent part of sealing an append ([`Canonical`]) with the id of the record at
/// the append's expected sequence. The SQLite store prepares on the appender's thread, so its
/// single writer only writes and hashes what depends on the chain's head.
#[derive(Debug, Clone)]
pub(crate) struct Prepared<H = Prefix> {
    pub(crate) json: String,
    pub(crate) digest: DigestText,
    prefix: H,
    /// The id of the record at the append's expected sequence (sealing refuses any other).
    pub(crate) record_id: RecordId,
}

impl Prepared {
    pub(crate) fn new(a: &AppendFields<'_>, value: &Value) -> Result<Self, EvidenceError> {
        Self::with_hasher(a, value, Prefix::default())
    }
}

impl<H: PrefixState> Prepared<H> {
    /// Prepares with `hasher`, which is reset first.
    pub(crate) fn with_hasher(
        a: &AppendFields<'_>,
        value: &Value,
        hasher: H,
    ) -> Result<Self, EvidenceError> {
        let canonical = Canonical::new(a, value, hasher)?;
        Ok(canonical.place(record_id_for(a.family, a.chain_id, a.expected_sequence)?))
    }
}

/// An evidence append prepared on the appender's thread for the SQLite writer: its payload
/// checked against its type's schema (the facts the lifecycle check and the indexes read, owned)
/// and sealed as far as it can be without the chain's head.
pub(crate) type PreparedEvidence = Result<(Prepared, Facts<String>), EvidenceError>;

/// An evidence append's payload checked and canonicalized before the append has a sequence.
pub(crate) type CanonicalEvidence = Result<(Canonical, Facts<String>), EvidenceError>;

/// Checks an evidence append's payload against its type's schema and canonicalizes it, taking
/// the hash input's prefix into `prefix`.
pub(crate) fn canonical_evidence(entry: &EvidenceAppend, prefix: Prefix) -> CanonicalEvidence {
    let checked = check_payload(entry)?;
    let canonical = Canonical::new(&AppendFields::evidence(entry), &entry.payload, prefix)?;
    Ok((canonical, checked.facts().to_owned()))
}

/// [`canonical_evidence`] for an append whose payload is typed (`entry.payload` is not read):
/// the payload held to its type's rules ([`Payload::check`], as a parsed one is), its canonical
/// text written straight from its `Serialize` (no `Value` built, walked and dropped) and its
/// facts read from it.
pub(crate) fn canonical_typed(
    entry: &EvidenceAppend,
    payload: &Payload,
    prefix: Prefix,
) -> CanonicalEvidence {
    let refused = |e: String| {
        invalid(format!(
            "{} payload: {e}",
            record_type_str(entry.record_type)
        ))
    };
    if payload.record_type() != entry.record_type {
        return Err(refused(format!(
            "a {} payload",
            record_type_str(payload.record_type())
        )));
    }
    payload.check().map_err(refused)?;
    let json = canonical::to_canonical_string_of(payload).map_err(|e| invalid(e.to_string()))?;
    debug_assert_eq!(
        Some(&json),
        canonical::to_canonical_string(&payload::to_value(payload))
            .ok()
            .as_ref(),
        "the typed payload's text is its value's"
    );
    let canonical = Canonical::of_text(&AppendFields::evidence(entry), json, prefix);
    Ok((canonical, payload.facts().to_owned()))
}

fn check_payload(entry: &EvidenceAppend) -> Result<Checked<'_>, EvidenceError> {
    facts::check(entry.record_type, &entry.payload).map_err(|e| {
        invalid(format!(
            "{} payload: {e}",
            record_type_str(entry.record_type)
        ))
    })
}

/// Checks an evidence append's payload against its type's schema and prepares it.
pub(crate) fn prepare_evidence(
    entry: &EvidenceAppend,
) -> Result<(Prepared, Checked<'_>), EvidenceError> {
    prepare_evidence_with(entry, Prefix::default())
}

/// [`prepare_evidence`] with a given hasher (reset first).
pub(crate) fn prepare_evidence_with<H: PrefixState>(
    entry: &EvidenceAppend,
    hasher: H,
) -> Result<(Prepared<H>, Checked<'_>), EvidenceError> {
    let checked = check_payload(entry)?;
    Ok((
        Prepared::with_hasher(&AppendFields::evidence(entry), &entry.payload, hasher)?,
        checked,
    ))
}

/// Checks the fields of an append that do not depend on the chain's state.
pub(crate) fn check_append_fields(
    policy_id: &str,
    policy_version: &str,
    created_at: Timestamp,
) -> Result<(), EvidenceError> {
    if policy_id.is_empty() || policy_version.is_empty() {
        return Err(invalid("policy_id and policy_version must not be empty"));
    }
    if created_at.0 > MAX_SAFE_INTEGER {
        return Err(invalid("created_at is beyond 2^53 - 1 milliseconds"));
    }
    Ok(())
}

/// The head-dependent part of a sealed record: its place in the chain, its id and its hash.
#[derive(Debug, Clone)]
pub(crate) struct Seal {
    pub(crate) sequence: u64,
    pub(crate) previous: Option<Digest>,
    pub(crate) chain_hash: Digest,
    /// The chain hash's bytes.
    pub(crate) hash: [u8; 32],
}

/// Seals an append onto `head` (`None`: the chain is empty): checks that it names the next
/// sequence and that its fields are in range, then reports a payload refused earlier (so a wrong
/// sequence is reported first, whatever the payload), and computes the record id and the chain
/// hash. It does not check the chain's lifecycle rules (that is [`crate::ChainTracker`]'s job).
pub(crate) fn seal_on<H: PrefixState>(
    a: &AppendFields<'_>,
    prepared: Result<&mut Prepared<H>, &EvidenceError>,
    head: Option<&ChainHead>,
) -> Result<Seal, EvidenceError> {
    let next = head.map_or(0, |h| h.sequence + 1);
    if a.expected_sequence != next {
        return Err(EvidenceError::SequenceConflict {
            chain_id: a.chain_id.clone(),
            expected: next,
            got: a.expected_sequence,
        });
    }
    if next > MAX_SAFE_INTEGER {
        return Err(invalid("the chain is full (2^53 - 1 records)"));
    }
    check_append_fields(a.policy_id, a.policy_version, a.created_at)?;
    let prepared = prepared.map_err(Clone::clone)?;
    let previous = head.map(|h| h.chain_hash.clone());
    let hash = with_buffers(|suffix, _, _| {
        write_suffix(
            suffix,
            true,
            previous.as_ref().map(Digest::as_str),
            prepared.record_id.as_str(),
            a.record_type,
            next,
            a.supersedes_record_id.map(RecordId::as_str),
        );
        *prepared.prefix.finish(suffix.as_bytes()).as_bytes()
    });
    Ok(Seal {
        sequence: next,
        previous,
        chain_hash: Digest::from_hash_bytes(&hash),
        hash,
    })
}

fn sealed_fields<'a, H>(
    a: &AppendFields<'a>,
    payload: &'a Prepared<H>,
    sequence: u64,
    previous: Option<&'a Digest>,
) -> Fields<'a> {
    Fields {
        record_id: payload.record_id.as_str(),
        record_type: a.record_type,
        chain_id: a.chain_id.as_str(),
        operation_id: a.operation_id.map(OperationId::as_str),
        sequence,
        policy_id: a.policy_id,
        policy_version: a.policy_version,
        payload_json: &payload.json,
        payload_digest: payload.digest.as_str(),
        previous_chain_hash: previous.map(Digest::as_str),
        supersedes_record_id: a.supersedes_record_id.map(RecordId::as_str),
        created_at: a.created_at.0,
        hash_algorithm: HASH_ALGORITHM,
    }
}

impl Seal {
    /// The sealed record's fields.
    pub(crate) fn fields<'a, H>(
        &'a self,
        a: &AppendFields<'a>,
        payload: &'a Prepared<H>,
    ) -> Fields<'a> {
        sealed_fields(a, payload, self.sequence, self.previous.as_ref())
    }

    /// The receipt, given the record id, taking the chain hash.
    pub(crate) fn into_receipt(self, chain_id: &ChainId, record_id: RecordId) -> AppendReceipt {
        AppendReceipt {
            chain_id: chain_id.clone(),
            record_id,
            sequence: self.sequence,
            chain_hash: self.chain_hash,
        }
    }

    /// The receipt, given the record id.
    pub(crate) fn receipt(&self, chain_id: &ChainId, record_id: RecordId) -> AppendReceipt {
        AppendReceipt {
            chain_id: chain_id.clone(),
            record_id,
            sequence: self.sequence,
            chain_hash: self.chain_hash.clone(),
        }
    }

    /// The sealed record.
    pub(crate) fn into_record<T, H>(
        self,
        a: &AppendFields<'_>,
        record_type: T,
        payload: Prepared<H>,
    ) -> Record<T> {
        Record {
            record_id: payload.record_id,
            record_type,
            chain_id: a.chain_id.clone(),
            operation_id: a.operation_id.cloned(),
            sequence: self.sequence,
            policy_id: a.policy_id.to_owned(),
            policy_version: a.policy_version.to_owned(),
            payload_digest: payload.digest.to_digest(),
            payload_json: payload.json,
            previous_chain_hash: self.previous,
            chain_hash: self.chain_hash,
            supersedes_record_id: a.supersedes_record_id.cloned(),
            created_at: a.created_at,
            hash_algorithm: HASH_ALGORITHM.to_owned(),
        }
    }
}

/// Builds the record an append becomes on `head` (`None`: the chain is empty).
///
/// Checks that the append names the next sequence, that its payload matches its type's schema,
/// and computes `payload_digest` and `chain_hash`. It does not check the chain's lifecycle rules
/// (that is [`crate::ChainTracker`]'s job).
pub fn seal(
    entry: &EvidenceAppend,
    head: Option<&ChainHead>,
) -> Result<EvidenceRecord, EvidenceError> {
    let mut prepared = prepare_evidence(entry);
    let a = AppendFields::evidence(entry);
    let seal = seal_on(&a, prepared.as_mut().map(|(p, _)| p).map_err(|e| &*e), head)?;
    let (payload, _) = prepared?;
    Ok(seal.into_record(&a, entry.record_type, payload).into())
}

/// Recomputes a record's `chain_hash` after its fields were set by hand (tests and tools that
/// build chains without a store, for example to exercise a verifier).
pub fn reseal(record: &mut EvidenceRecord) {
    record.payload_digest = digest_of(record.payload_json.as_bytes());
    record.chain_hash = chain_hash(&Fields::of(record));
}

/// A record's head.
pub fn head_of(record: &EvidenceRecord) -> ChainHead {
    ChainHead {
        chain_id: record.chain_id.clone(),
        sequence: record.sequence,
        chain_hash: record.chain_hash.clone(),
    }
}

/// The receipt of a stored record.
pub fn receipt_of(record: &EvidenceRecord) -> AppendReceipt {
    AppendReceipt {
        chain_id: record.chain_id.clone(),
        record_id: record.record_id.clone(),
        sequence: record.sequence,
        chain_hash: record.chain_hash.clone(),
    }
}

/// Parses a payload and re-canonicalizes it: `Some(value)` when `text` is canonical JSON.
pub(crate) fn parse_canonical(text: &str) -> Option<Value> {
    let value: Value = serde_json::from_str(text).ok()?;
    let again = canonical_json(&value).ok()?;
    (again == text).then_some(value)
}

#[cfg(test)]
mod tests {
    //! The fast paths against their plain definitions: the word-at-a-time escape scan and the
    //! chunked whole-string test, the canonical writer's escaped copy, and the chain hash computed in two parts.
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn naive_next_escape(b: &[u8], from: usize) -> usize {
        (from..b.len())
            .find(|&i| b[i] == b'"' || b[i] == b'\\' || b[i] < 0x20)
            .unwrap_or(b.len())
    }

    fn text() -> impl Strategy<Value = String> {
        "(\\PC|[\\x00-\\x1f\"\\\\\u{7f}\u{80}\u{2028}\u{1F600}]){0,80}"
    }

    fn config() -> ProptestConfig {
        ProptestConfig::with_cases(if std::env::var_os("CI").is_some() {
            64
        } else {
            512
        })
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn the_word_scan_finds_what_the_byte_scan_finds(s in text(), from in 0usize..90) {
            let b = s.as_bytes();
            let from = from.min(b.len());
            prop_assert_eq!(next_escape(b, from), naive_next_escape(b, from));
        }

        #[test]
        fn the_chunk_test_flags_what_the_byte_scan_finds(s in text()) {
            let b = s.as_bytes();
            prop_assert_eq!(needs_escape(b), naive_next_escape(b, 0) < b.len());
            prop_assert_eq!(plain_key(&s), s.is_ascii() && naive_next_escape(b, 0) == b.len());
        }

        #[test]
        fn strings_are_written_as_the_contracts_write_them(s in text()) {
            let mut out = String::new();
            write_str(&mut out, &s);
            prop_assert_eq!(out, canonical::to_canonical_string(&Value::String(s)).unwrap());
        }

        #[test]
        fn the_escaped_copy_is_the_canonical_text_as_a_json_string(
            keys in prop::collection::vec(text(), 0..5),
            values in prop::collection::vec(text(), 0..5),
            n in any::<i64>(),
        ) {
            let mut map = serde_json::Map::new();
            for (k, v) in keys.iter().zip(&values) {
                map.insert(k.clone(), json!([v, n % (1 << 50), {"k": v, "b": true}]));
            }
            let value = Value::Object(map);
            let (mut text, mut escaped) = (String::new(), String::new());
            prop_assert!(canonical_json_escaped(&value, &mut text, &mut escaped));
            prop_assert_eq!(&text, &canonical::to_canonical_string(&value).unwrap());
            let mut quoted = String::new();
            write_str(&mut quoted, &text);
            prop_assert_eq!(format!("\"{escaped}\""), quoted);
        }

        #[test]
        fn the_two_part_chain_hash_is_the_hash_of_the_whole_input(
            chain in "[a-z0-9-]{1,20}",
            op in proptest::option::of("[!-~]{1,20}"),
            policy_id in text().prop_filter("non-empty", |s| !s.is_empty()),
            policy_version in text().prop_filter("non-empty", |s| !s.is_empty()),
            label in text(),
            sequence in 0u64..3,
            created_at in 0u64..(1 << 53),
        ) {
            let chain_id = ChainId::new(chain).unwrap();
            let operation_id = op.map(|o| OperationId::new(o).unwrap());
            let supersedes = (sequence == 2).then(|| record_id_for(Family::Evidence, &chain_id, 1).unwrap());
            let a = AppendFields {
                family: Family::Evidence,
                record_type: "gate_evaluated",
                chain_id: &chain_id,
                operation_id: operation_id.as_ref(),
                expected_sequence: sequence,
                policy_id: &policy_id,
                policy_version: &policy_version,
                supersedes_record_id: supersedes.as_ref(),
                created_at: Timestamp(created_at),
            };
            let payload = json!({"label": label, "n": 1, "nested": {"s": label}});
            let mut prepared = Prepared::new(&a, &payload).unwrap();
            let head = (sequence > 0).then(|| ChainHead {
                chain_id: chain_id.clone(),
                sequence: sequence - 1,
                chain_hash: Digest::of_bytes(b"previous"),
            });
            let seal = seal_on(&a, Ok(&mut prepared), head.as_ref()).unwrap();
            let fields = seal.fields(&a, &prepared);
            prop_assert_eq!(prepared.json.as_str(), canonical::to_canonical_string(&payload).unwrap());
            prop_assert_eq!(seal.chain_hash.clone(), Digest::of_bytes(hash_input(&fields).as_bytes()));
            prop_assert_eq!(prepared.digest.to_digest(), Digest::of_bytes(prepared.json.as_bytes()));
        }
    }
}
