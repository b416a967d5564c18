//! Canonical JSON per RFC 8785 (JSON Canonicalization Scheme).
//!
//! The canonical form is what digests are computed over, so two values that mean the same thing
//! always hash the same, whatever the key order or whitespace of their source:
//!
//! - object members are sorted by their keys' UTF-16 code units (not UTF-8 bytes: the two orders
//!   differ for characters above U+FFFF against U+E000..U+FFFF);
//! - numbers are written in ECMAScript's `Number.prototype.toString` form (shortest round-trip
//!   digits, exponent only below 1e-6 or from 1e21 on, `-0` written as `0`);
//! - strings use the minimal JSON escapes (`\b \t \n \f \r \" \\`, other controls as `\u00xx`
//!   in lower-case hex), everything else as UTF-8;
//! - no insignificant whitespace.
//!
//! Numbers are IEEE doubles (I-JSON). An integer outside ±(2^53 − 1) is accepted only when its
//! digits are already the ECMAScript form of the double nearest it (so the double holds it
//! exactly and canonicalization stays idempotent: a large double prints without an exponent
//! below 1e21 and reads back as the same integer); any other is refused rather than silently
//! rounded.
//!
//! # One writer
//!
//! One serde `Serializer` writes every canonical text, straight from a value's `Serialize`
//! implementation: a `serde_json::Value` is one such value ([`to_canonical_string`]), a typed
//! value another ([`to_canonical_string_of`]). It reads serde's calls as `serde_json::to_value`
//! does, so a value's text and error are always those of its `Value` tree, without building that
//! tree: bytes are an array of numbers; map keys may be strings, chars, integers, booleans,
//! finite floats and unit variants, each written as the text `to_value` gives it; a repeated key
//! keeps its last value; enums are externally tagged; a NaN or infinite float is `null`;
//! `i128`/`u128` must fit in 64 bits. (Were serde_json's `arbitrary_precision` feature turned on
//! by another crate of the build, the writer would read numbers, `f32`s and 128-bit integers as
//! `to_value` then does, through their text.)
//!
//! An object's members are written in the order they come, each one recorded (where its text
//! starts and ends, where its key is). Members that came sorted stay where they are; when they
//! did not (or a key repeats), the object's members are copied in order after its text, which
//! then moves down over it: no other buffer, and the records are reused by every object of the
//! call. A number with no canonical form does not stop the writer, since a later error of the
//! value's own `Serialize` still wins (as it does in `to_value`) and a repeated key may yet drop
//! it: it is written as a marker that no canonical text contains (a NUL byte, which strings
//! always escape), and the first marker left in the finished text is the error, with the JSON
//! pointer of where it stands (so it is the first such number in canonical order).

use std::fmt::{self, Write as _};

use serde::Serialize;
use serde_json::Value;

mod serializer;

/// The largest integer magnitude that an IEEE double represents exactly (2^53 − 1).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Why a value has no canonical form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalError {
    /// An integer that no IEEE double holds exactly, which I-JSON cannot carry.
    #[error("integer {value} at {pointer} cannot be represented exactly as an I-JSON number")]
    IntegerOutOfRange {
        /// The number as written.
        value: String,
        /// JSON pointer to the number.
        pointer: String,
    },
    /// A number that is not finite (serde_json cannot normally produce one).
    #[error("number at {pointer} is not finite")]
    NotFinite {
        /// JSON pointer to the number.
        pointer: String,
    },
}

/// Writes `value` in RFC 8785 canonical form.
///
/// ```
/// use warden_contracts::canonical::to_canonical_string;
/// let v = serde_json::json!({"b": [1.0, 1e21, 0.000001], "a": "\u{1f600}"});
/// assert_eq!(to_canonical_string(&v).unwrap(), r#"{"a":"😀","b":[1,1e+21,0.000001]}"#);
/// ```
pub fn to_canonical_string(value: &Value) -> Result<String, CanonicalError> {
    let mut out = String::with_capacity(256);
    match serializer::write(&mut out, value) {
        Ok(()) => Ok(out),
        Err(OfError::Canonical(e)) => Err(e),
        // A `Value`'s keys are strings and its numbers valid: its `Serialize` cannot fail.
        Err(OfError::Serialize(message)) => {
            unreachable!("a serde_json::Value failed to serialize: {message}")
        }
    }
}

/// The canonical form of any serializable value: exactly
/// `to_canonical_string(&serde_json::to_value(value)?)`, text and errors alike, written straight
/// from the value without building the `Value` tree.
///
/// ```
/// use warden_contracts::canonical::{to_canonical_string, to_canonical_string_of};
/// #[derive(serde::Serialize)]
/// struct Call<'a> { tool: &'a str, args: serde_json::Value, retries: Option<u32> }
/// let call = Call { tool: "bash", args: serde_json::json!({"z": 1, "a": [true, null]}), retries: None };
/// let text = to_canonical_string_of(&call).unwrap();
/// assert_eq!(text, r#"{"args":{"a":[true,null],"z":1},"retries":null,"tool":"bash"}"#);
/// assert_eq!(text, to_canonical_string(&serde_json::to_value(&call).unwrap()).unwrap());
/// ```
pub fn to_canonical_string_of<T: Serialize + ?Sized>(value: &T) -> Result<String, OfError> {
    let mut out = String::with_capacity(256);
    serializer::write(&mut out, value)?;
    Ok(out)
}

/// [`to_canonical_string_of`] into `out`, whose contents it replaces (its capacity is kept, so
/// a caller writing many texts reuses one buffer). On an error `out` holds no meaningful text.
///
/// ```
/// use warden_contracts::canonical::{to_canonical_string_of, write_canonical_of};
/// let mut out = String::from("old text");
/// write_canonical_of(&mut out, &serde_json::json!({"b": 1, "a": 2})).unwrap();
/// assert_eq!(out, to_canonical_string_of(&serde_json::json!({"a": 2, "b": 1})).unwrap());
/// ```
pub fn write_canonical_of<T: Serialize + ?Sized>(
    out: &mut String,
    value: &T,
) -> Result<(), OfError> {
    out.clear();
    serializer::write(out, value)
}

/// Why [`to_canonical_string_of`] has no text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OfError {
    /// The value's `Serialize` failed (as `serde_json::to_value` reports it).
    #[error("{0}")]
    Serialize(String),
    /// Its JSON has no canonical form.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
}

/// [`to_canonical_string`] as bytes (UTF-8), the input of every [`crate::Digest`].
pub fn to_canonical_vec(value: &Value) -> Result<Vec<u8>, CanonicalError> {
    to_canonical_string(value).map(String::into_bytes)
}

/// Writes an integer (its magnitude, and whether it is negative) as I-JSON carries it, or
/// refuses it (`false`, nothing written). One within ±(2^53 − 1) is its digits; a larger one is
/// accepted only when its digits are already the ECMAScript form of the double nearest it.
#[inline]
fn write_integer(out: &mut String, magnitude: u64, negative: bool) -> bool {
    if magnitude <= MAX_SAFE_INTEGER {
        if negative && magnitude != 0 {
            out.push('-');
        }
        push_decimal(out, magnitude);
        return true;
    }
    let start = out.len();
    let near = magnitude as f64;
    write_es6_number(out, if negative { -near } else { near });
    let written = &out.as_bytes()[start + usize::from(negative)..];
    if written != decimal(&mut [0; 20], magnitude) {
        out.truncate(start);
        return false;
    }
    true
}

/// Appends `n`'s decimal digits.
#[inline]
fn push_decimal(out: &mut String, n: u64) {
    out.extend(decimal(&mut [0; 20], n).iter().map(|&d| char::from(d)));
}

/// `n`'s decimal digits (ASCII), written at the end of `buf`.
#[inline]
fn decimal(buf: &mut [u8; 20], mut n: u64) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

/// ECMAScript `Number.prototype.toString` for a finite double.
fn write_es6_number(out: &mut String, f: f64) {
    if f == 0.0 {
        out.push('0');
        return;
    }
    if f < 0.0 {
        out.push('-');
    }
    let (digits, exp) = shortest_digits(f.abs());
    let digits = digits.as_str();
    let k = digits.len() as i32; // number of significant digits
    let n = exp + 1; // position of the decimal point relative to the digits
    if k <= n && n <= 21 {
        out.push_str(digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if n > 0 { '+' } else { '-' });
        let _ = write!(out, "{}", (n - 1).abs());
    }
}

/// The shortest digits that round-trip to `f` (positive, finite) and the decimal exponent of the
/// first digit, with ECMAScript's tie rule: when two shortest candidates are equally near the
/// exact value, the even one wins. Rust's shortest formatting picks the other one in that case,
/// so the tie is detected from the exact expansion and corrected. A tie needs an exact expansion
/// of one digit more than the shortest (so at most 18 digits); most doubles have far longer ones
/// and skip the check.
fn shortest_digits(f: f64) -> (Ascii, i32) {
    // Rust's `{:e}` gives the shortest round-trip digits: "d.ddddde±x".
    let (digits, exp) = scientific(format_args!("{f:e}"));
    if !exact_in_18_digits(f) {
        return (digits, exp);
    }
    // Exact: the expansion has no more digits than these.
    let (exact, exact_exp) = scientific(format_args!("{f:.17e}"));
    let exact = exact.as_str().trim_end_matches('0');
    let k = digits.as_str().len();
    if exact_exp == exp && exact.len() == k + 1 && exact.ends_with('5') {
        let lower = &exact[..k];
        let even = lower
            .bytes()
            .last()
            .is_some_and(|b| (b - b'0').is_multiple_of(2));
        let mut candidate = Ascii::default();
        let _ = write!(candidate, "{}.{}e{exp}", &lower[..1], &lower[1..]);
        let round_trips = candidate
            .as_str()
            .parse::<f64>()
            .is_ok_and(|back| back == f);
        if even && round_trips && lower != digits.as_str() {
            let mut lower_digits = Ascii::default();
            let _ = lower_digits.write_str(lower);
            return (lower_digits, exp);
        }
    }
    (digits, exp)
}

/// A number formatted in scientific notation: its significant digits and its exponent.
fn scientific(number: fmt::Arguments<'_>) -> (Ascii, i32) {
    let mut text = Ascii::default();
    let _ = text.write_fmt(number);
    let (mantissa, exp) = text
        .as_str()
        .split_once('e')
        .unwrap_or((text.as_str(), "0"));
    let mut digits = Ascii::default();
    for c in mantissa.chars().filter(char::is_ascii_digit) {
        let _ = digits.write_char(c);
    }
    (digits, exp.parse().unwrap_or(0))
}

/// Whether the exact decimal expansion of `f` (positive, finite) has at most 18 significant
/// digits. With `f = m · 2^e`, `m` odd: for `e < 0` the expansion is `m · 5^−e / 10^−e`, whose
/// digits are those of `m · 5^−e` (odd, so without trailing zeros); for `e ≥ 0` it is the integer
/// `m · 2^e`, which ends in `min(e, factors of 5 in m)` zeros.
fn exact_in_18_digits(f: f64) -> bool {
    const LIMIT: u128 = 1_000_000_000_000_000_000;
    let bits = f.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    let (m, e) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1 << 52), biased - 1075)
    };
    if m == 0 {
        return true;
    }
    let zeros = m.trailing_zeros();
    let (mut m, e) = (u128::from(m >> zeros), e + zeros as i32);
    if e < 0 {
        let k = e.unsigned_abs();
        k <= 26 && m * 5u128.pow(k) < LIMIT
    } else {
        let mut e = e.unsigned_abs();
        while e > 0 && m % 5 == 0 {
            m /= 5;
            e -= 1;
        }
        e < 64 && (m << e) < LIMIT
    }
}

/// Up to 48 bytes of text on the stack: a number formatted without allocating.
struct Ascii {
    bytes: [u8; 48],
    len: usize,
}

impl Default for Ascii {
    fn default() -> Self {
        Self {
            bytes: [0; 48],
            len: 0,
        }
    }
}

impl Ascii {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }

    fn push(&mut self, b: &[u8]) -> Option<()> {
        let end = self.len + b.len();
        self.bytes.get_mut(self.len..end)?.copy_from_slice(b);
        self.len = end;
        Some(())
    }
}

impl fmt::Write for Ascii {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s.as_bytes()).ok_or(fmt::Error)
    }
}

/// For serde_json's own float formatting (`serde_json::to_writer`).
impl std::io::Write for Ascii {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.push(b)
            .map(|()| b.len())
            .ok_or_else(|| std::io::Error::other("a number longer than 48 bytes"))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes `s` as a JSON string.
#[inline]
fn write_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    push_escaped(out, s);
    out.push('"');
}

/// Appends the content of a JSON string: `s` with the minimal escapes.
#[inline(always)]
fn push_escaped(out: &mut String, s: &str) {
    // The common case, nothing to escape: one copy.
    if crate::bytes::all(s.as_bytes(), |b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push_str(s);
    } else {
        push_with_escapes(out, s);
    }
}

/// [`push_escaped`] for a string with something to escape: the runs between escapes are
/// copied whole.
#[cold]
fn push_with_escapes(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut run = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0c => "\\f",
            b'\r' => "\\r",
            0..0x20 => "",
            _ => continue,
        };
        // `i` is an ASCII byte's index, so a character boundary.
        out.push_str(&s[run..i]);
        if escape.is_empty() {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push_str(escape);
        }
        run = i + 1;
    }
    out.push_str(&s[run..]);
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use proptest::prelude::*;
    use serde::ser::{Error as _, SerializeMap as _};
    use serde_json::json;

    use super::*;

    fn config() -> ProptestConfig {
        ProptestConfig::with_cases(if std::env::var_os("CI").is_some() {
            64
        } else {
            512
        })
    }

    /// The independent oracle: serde_jcs (another RFC 8785 writer, with ryu-js numbers and its own
    /// key sorting) for the text. It writes every integer as the double nearest it, so where that
    /// is not the integer's own digits (the integers I-JSON cannot carry) the oracle's answer is
    /// the first such integer in canonical order, found by walking the tree.
    fn oracle(v: &Value) -> Result<String, CanonicalError> {
        first_refused(v, &mut String::new())?;
        Ok(serde_jcs::to_string(v).unwrap())
    }

    fn first_refused(v: &Value, pointer: &mut String) -> Result<(), CanonicalError> {
        let at = |p: &str| {
            if p.is_empty() {
                "/".to_owned()
            } else {
                p.to_owned()
            }
        };
        match v {
            Value::Number(n)
                if !n.is_f64() && serde_jcs::to_string(n).unwrap() != n.to_string() =>
            {
                Err(CanonicalError::IntegerOutOfRange {
                    value: n.to_string(),
                    pointer: at(pointer),
                })
            }
            Value::Array(items) => items.iter().enumerate().try_for_each(|(i, item)| {
                let len = pointer.len();
                pointer.push_str(&format!("/{i}"));
                first_refused(item, pointer)?;
                pointer.truncate(len);
                Ok(())
            }),
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
                keys.into_iter().try_for_each(|key| {
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                    first_refused(&map[key], pointer)?;
                    pointer.truncate(len);
                    Ok(())
                })
            }
            _ => Ok(()),
        }
    }

    /// What the text of a typed value must be: that of its `serde_json::to_value` tree.
    fn via_value<T: Serialize + ?Sized>(value: &T) -> Result<String, OfError> {
        let v = serde_json::to_value(value).map_err(|e| OfError::Serialize(e.to_string()))?;
        Ok(to_canonical_string(&v)?)
    }

    /// Keys that sort differently by UTF-16 code units and by UTF-8 bytes (characters above
    /// U+FFFF against U+E000..U+FFFF), that need escaping (quotes, backslashes, controls), that
    /// JSON pointers escape (`~`, `/`), or are plain.
    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-c !]{0,3}",
            "[a-c~/\"\\\\\\x00-\\x1f\\x7f\u{e000}-\u{e002}\u{fffd}-\u{ffff}\u{10000}\u{1f600}\u{10ffff}é€]{0,3}",
            "\\PC{0,3}",
            // Few characters, so one object's keys often differ first in them.
            "[a\u{e000}\u{ffff}\u{10000}\u{1f600}]{1,2}",
        ]
    }

    /// Mostly small (so a value with many of them is usually written), sometimes any.
    fn u64_() -> impl Strategy<Value = u64> {
        prop_oneof![6 => 0..1000u64, 1 => any::<u64>()]
    }

    fn i64_() -> impl Strategy<Value = i64> {
        prop_oneof![6 => -1000..1000i64, 1 => any::<i64>()]
    }

    /// Doubles across magnitudes, around the exponent thresholds (1e-6, 1e21), with short and
    /// long exact expansions, and the special ones (-0, subnormals, the extremes).
    fn double() -> impl Strategy<Value = f64> {
        let near = |f: f64| {
            (-3i64..=3).prop_map(move |d| f64::from_bits(f.to_bits().wrapping_add_signed(d)))
        };
        prop_oneof![
            any::<f64>(),
            (-1e6..1e6f64),
            (1u64..10_000_000, -30i32..30).prop_map(|(m, e)| m as f64 * 10f64.powi(e)),
            (1u64..1_000_000, 0u32..60).prop_map(|(m, j)| m as f64 / 2f64.powi(j as i32)),
            prop_oneof![
                Just(1e21),
                Just(1e-6),
                Just(1e-7),
                Just(1e23),
                Just(5e-324),
                Just(f64::MAX)
            ]
            .prop_flat_map(near),
            Just(-0.0),
        ]
        .prop_map(|f| if f.is_finite() { f } else { 0.5 })
        .prop_flat_map(|f| prop_oneof![Just(f), Just(-f)])
    }

    /// Integers: small, any, and large ones that are their nearest double's ES6 form (accepted).
    fn integer() -> impl Strategy<Value = Value> {
        prop_oneof![
            4 => (-(1i64 << 53)..(1i64 << 53)).prop_map(Value::from),
            1 => any::<i64>().prop_map(Value::from),
            1 => any::<u64>().prop_map(Value::from),
            2 => (9.007_199_254_740_992e15..1.8e19f64)
                .prop_map(|f| Value::from(serde_jcs::to_string(&f).unwrap().parse::<u64>().unwrap())),
            2 => (-9.2e18..-9.007_199_254_740_992e15f64)
                .prop_map(|f| Value::from(serde_jcs::to_string(&f).unwrap().parse::<i64>().unwrap())),
            1 => (1u64..1 << 20, 33u32..44).prop_map(|(m, s)| Value::from(m << s)),
        ]
    }

    /// Any JSON: floats, integers past 2^53, keys in any order, escaped and beyond the BMP.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            integer(),
            double().prop_map(Value::from),
            key().prop_map(Value::from),
            "\\PC{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::vec((key(), inner), 0..7)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(config())]

        /// The writer is the independent oracle, text and error alike, whichever way the value
        /// reaches it.
        #[test]
        fn the_writer_is_the_oracle(v in any_json()) {
            let text = to_canonical_string(&v);
            prop_assert_eq!(&text, &oracle(&v));
            prop_assert_eq!(to_canonical_string_of(&v), text.clone().map_err(OfError::Canonical));
            prop_assert_eq!(to_canonical_vec(&v), text.map(String::into_bytes));
        }

        /// Every double is written as ECMAScript writes it (ryu-js through serde_jcs).
        #[test]
        fn doubles_are_written_as_ecmascript_writes_them(f in double()) {
            prop_assert_eq!(es6(f), serde_jcs::to_string(&f).unwrap());
            prop_assert_eq!(to_canonical_string_of(&f).unwrap(), es6(f));
        }

        /// Typed values of every serde shape are their `Value` tree's text, errors included;
        /// where the oracle defines them the same (no float keys, integer keys within 2^53, whose
        /// text it chooses differently: `to_value` writes `1.0`, serde_jcs `1`), its text too.
        #[test]
        fn typed_values_are_their_value_trees(zoo in zoo()) {
            let text = to_canonical_string_of(&zoo);
            prop_assert_eq!(&text, &via_value(&zoo));
            if let Ok(text) = &text && !zoo.pairs.0.iter().any(|(k, _)| k.chosen_text()) {
                prop_assert_eq!(text, &serde_jcs::to_string(&zoo).unwrap());
            }
        }

        /// The shortest digits are the old implementation's (the exact expansion always
        /// formatted), which the check on short expansions only skips where no tie can be.
        #[test]
        fn shortest_digits_skip_only_what_cannot_tie(f in double().prop_map(f64::abs).prop_filter("not 0", |f| *f > 0.0)) {
            let (digits, exp) = shortest_digits(f);
            prop_assert_eq!((digits.as_str().to_owned(), exp), reference_shortest_digits(f));
        }
    }

    /// `shortest_digits` as it was, with the 800-digit expansion of every double.
    fn reference_shortest_digits(f: f64) -> (String, i32) {
        let split = |sci: &str| -> (String, i32) {
            let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
            let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
            (digits, exp.parse().unwrap_or(0))
        };
        let (digits, exp) = split(&format!("{f:e}"));
        let (exact, exact_exp) = split(&format!("{f:.800e}"));
        let exact = exact.trim_end_matches('0');
        let k = digits.len();
        if exact_exp == exp && exact.len() == k + 1 && exact.ends_with('5') {
            let lower = &exact[..k];
            let even = lower
                .bytes()
                .last()
                .is_some_and(|b| (b - b'0').is_multiple_of(2));
            let round_trips = format!("{}.{}e{exp}", &lower[..1], &lower[1..])
                .parse::<f64>()
                .is_ok_and(|back| back == f);
            if even && round_trips && lower != digits {
                return (lower.to_owned(), exp);
            }
        }
        (digits, exp)
    }

    /// The expansion test against the expansion itself, on doubles whose expansions are short.
    #[test]
    fn exact_expansions_of_at_most_18_digits_are_found() {
        let mut checked = 0;
        for m in [
            1u64,
            3,
            5,
            7,
            25,
            99,
            125,
            999_999,
            123_456_789_012_345,
            (1 << 53) - 1,
        ] {
            for e in -80..90 {
                let f = m as f64 * 2f64.powi(e);
                let exact = format!("{f:.800e}");
                let (mantissa, _) = exact.split_once('e').unwrap();
                let digits = mantissa.replace('.', "");
                let short = digits.trim_end_matches('0').len() <= 18;
                assert_eq!(exact_in_18_digits(f), short, "{m} · 2^{e}");
                checked += usize::from(short);
            }
        }
        assert!(checked > 100, "only {checked} short expansions");
    }

    fn es6(f: f64) -> String {
        let mut s = String::new();
        write_es6_number(&mut s, f);
        s
    }

    /// A key sorts before every key it is a prefix of, whatever follows (a writer once compared
    /// keys with their quotes, which put `"a!"` before `"a"`).
    #[test]
    fn a_key_sorts_before_the_keys_it_is_a_prefix_of() {
        let v = json!({"a!": 1, "a": 2, "a b": 3, " ": 4, "": 5, "ab": 6});
        let want = r#"{"":5," ":4,"a":2,"a b":3,"a!":1,"ab":6}"#;
        assert_eq!(to_canonical_string(&v).unwrap(), want);
        let unsorted = Pairs(
            ["a!", "a", "a b", " ", "", "ab"]
                .iter()
                .zip([1, 2, 3, 4, 5, 6])
                .map(|(k, v)| (AnyKey::Str((*k).into()), json!(v)))
                .collect(),
        );
        assert_eq!(to_canonical_string_of(&unsorted).unwrap(), want);
    }

    /// The number samples of RFC 8785 Appendix B (IEEE value → canonical text).
    #[test]
    fn rfc8785_appendix_b_numbers() {
        let cases: &[(u64, &str)] = &[
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for (bits, want) in cases {
            let f = f64::from_bits(*bits);
            assert_eq!(es6(f), *want, "bits {bits:#018x}");
            assert_eq!(
                to_canonical_string(&json!(f)).unwrap(),
                *want,
                "bits {bits:#018x}"
            );
            assert_eq!(
                to_canonical_string_of(&f).unwrap(),
                *want,
                "bits {bits:#018x}"
            );
        }
    }

    /// RFC 8785 §3.2.3's sorting example: keys ordered by UTF-16 code units.
    #[test]
    fn rfc8785_sorting_example() {
        let v: Value = serde_json::from_str(
            r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}"#,
        )
        .unwrap();
        let want = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}";
        assert_eq!(to_canonical_string(&v).unwrap(), want);
        assert_eq!(serde_jcs::to_string(&v).unwrap(), want);
    }

    /// RFC 8785 §3.2.2's full example.
    #[test]
    fn rfc8785_serialization_example() {
        let v: Value = serde_json::from_str(
            r#"{
              "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
              "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
              "literals": [null, true, false]
            }"#,
        )
        .unwrap();
        assert_eq!(
            to_canonical_string(&v).unwrap(),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    #[test]
    fn large_integers_are_refused_with_their_pointer() {
        let v = json!({"a": [1, 9007199254740993u64]});
        assert_eq!(
            to_canonical_string(&v),
            Err(CanonicalError::IntegerOutOfRange {
                value: "9007199254740993".into(),
                pointer: "/a/1".into()
            })
        );
        assert!(to_canonical_string(&json!(-9007199254740991i64)).is_ok());
        // A large integer a double holds exactly is its own ES6 form.
        assert_eq!(
            to_canonical_string(&json!(-1536538844847216400i64)).unwrap(),
            "-1536538844847216400"
        );
        assert!(to_canonical_string(&json!(u64::MAX)).is_err());
        assert_eq!(
            to_canonical_string(&json!(i64::MIN)),
            Err(CanonicalError::IntegerOutOfRange {
                value: "-9223372036854775808".into(),
                pointer: "/".into()
            })
        );
    }

    /// The refused integer reported is the first in canonical order (not in the order the
    /// value gives its members), with its JSON pointer escaped; one whose member a repeated key
    /// replaced is no error; a later error of the value's own `Serialize` wins over it.
    #[test]
    fn the_first_refused_integer_in_canonical_order_is_the_error() {
        let refused = |value: &str, pointer: &str| {
            Err(OfError::Canonical(CanonicalError::IntegerOutOfRange {
                value: value.into(),
                pointer: pointer.into(),
            }))
        };
        let big = json!(u64::MAX);
        let pairs = |p: Vec<(&str, Value)>| {
            Pairs(
                p.into_iter()
                    .map(|(k, v)| (AnyKey::Str(k.into()), v))
                    .collect(),
            )
        };
        let cases: Vec<(Pairs, Result<String, OfError>)> = vec![
            (
                pairs(vec![
                    ("b", big.clone()),
                    ("a", json!(["[{\":,", -9007199254740993i64])),
                ]),
                refused("-9007199254740993", "/a/1"),
            ),
            (
                pairs(vec![
                    ("a/b~", json!({"\n\u{1f600}": [0, big.clone()]})),
                    ("b", big.clone()),
                ]),
                refused("18446744073709551615", "/a~1b~0/\n\u{1f600}/1"),
            ),
            // UTF-16 order: U+1F600 before U+E000 (UTF-8 puts it after).
            (
                pairs(vec![
                    ("\u{e000}", big.clone()),
                    ("\u{1f600}", json!(u64::MAX - 1)),
                ]),
                refused("18446744073709551614", "/\u{1f600}"),
            ),
            (
                pairs(vec![("a", big.clone()), ("a", json!(1.5))]),
                Ok(r#"{"a":1.5}"#.into()),
            ),
            (
                pairs(vec![
                    ("a", json!(2)),
                    ("c", json!({"x": big.clone(), "x": 3})),
                    ("a", big.clone()),
                ]),
                refused("18446744073709551615", "/a"),
            ),
        ];
        for (i, (value, want)) in cases.iter().enumerate() {
            assert_eq!(&to_canonical_string_of(value), want, "case {i}");
            assert_eq!(&via_value(value), want, "case {i}");
        }
        let later_error = Refuses(pairs(vec![("a", big.clone())]));
        assert_eq!(
            to_canonical_string_of(&later_error),
            Err(OfError::Serialize("refused by its own Serialize".into()))
        );
        assert_eq!(
            to_canonical_string_of(&later_error),
            via_value(&later_error)
        );
        // Inside variants of each shape.
        #[derive(Serialize)]
        enum E {
            N(u64),
            T(bool, i64),
            S { f: (u8, u64) },
        }
        for (value, pointer) in [
            (E::N(u64::MAX), "/N"),
            (E::T(true, i64::MIN), "/T/1"),
            (E::S { f: (0, u64::MAX) }, "/S/f/1"),
        ] {
            let got = to_canonical_string_of(&value);
            assert!(
                matches!(&got, Err(OfError::Canonical(CanonicalError::IntegerOutOfRange { pointer: p, .. })) if p == pointer),
                "{got:?}"
            );
            assert_eq!(got, via_value(&value));
        }
    }

    /// A map whose members come in the order given, keys of any kind, repeated or not.
    #[derive(Debug, Clone)]
    struct Pairs(Vec<(AnyKey, Value)>);

    impl Serialize for Pairs {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut map = s.serialize_map(Some(self.0.len()))?;
            for (k, v) in &self.0 {
                map.serialize_entry(k, v)?;
            }
            map.end()
        }
    }

    /// Its members, then its own `Serialize` fails.
    struct Refuses(Pairs);

    impl Serialize for Refuses {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut map = s.serialize_map(None)?;
            for (k, v) in &self.0.0 {
                map.serialize_entry(k, v)?;
            }
            Err(S::Error::custom("refused by its own Serialize"))
        }
    }

    /// A map key of each kind serde_json's `to_value` takes (and some it refuses).
    #[derive(Debug, Clone, Serialize)]
    #[serde(untagged)]
    enum AnyKey {
        Str(String),
        Char(char),
        Bool(bool),
        Int(i64),
        Wide(i128),
        Unsigned(u128),
        Float(f64),
        Single(f32),
        Variant(Color),
        Newtype(Name),
        Shown(Shown),
        // Refused: not a string.
        None(Option<u8>),
        Unit(()),
        Seq(Vec<u8>),
    }

    impl AnyKey {
        /// Whether serde_jcs writes this key's text otherwise than `to_value` (floats, integers
        /// beyond 2^53, which it writes as doubles in ES6 form), or refuses it.
        fn chosen_text(&self) -> bool {
            let big = |m: u128| m > u128::from(MAX_SAFE_INTEGER);
            match self {
                Self::Float(_)
                | Self::Single(_)
                | Self::None(_)
                | Self::Unit(())
                | Self::Seq(_) => true,
                Self::Int(i) => big(i.unsigned_abs().into()),
                Self::Wide(i) => big(i.unsigned_abs()),
                Self::Unsigned(u) => big(*u),
                _ => false,
            }
        }
    }

    #[derive(Debug, Clone, Copy, Serialize)]
    enum Color {
        Red,
        #[serde(rename = "\u{1f7e2}\"green\"")]
        Green,
    }

    #[derive(Debug, Clone, Serialize)]
    struct Name(String);

    /// A `Display` text (through `collect_str`), written in pieces that need escaping.
    #[derive(Debug, Clone)]
    struct Shown(String);

    impl std::fmt::Display for Shown {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            for c in self.0.chars() {
                write!(f, "{c}")?;
            }
            f.write_str("\"\t\u{1}")
        }
    }

    impl Serialize for Shown {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(self)
        }
    }

    fn any_key() -> impl Strategy<Value = AnyKey> {
        prop_oneof![
            4 => key().prop_map(AnyKey::Str),
            1 => any::<char>().prop_map(AnyKey::Char),
            1 => any::<bool>().prop_map(AnyKey::Bool),
            1 => i64_().prop_map(AnyKey::Int),
            1 => any::<i128>().prop_map(AnyKey::Wide),
            1 => any::<u128>().prop_map(AnyKey::Unsigned),
            1 => prop_oneof![8 => double(), 1 => Just(f64::NAN), 1 => Just(f64::INFINITY)].prop_map(AnyKey::Float),
            1 => any::<f32>().prop_map(AnyKey::Single),
            1 => prop_oneof![Just(Color::Red), Just(Color::Green)].prop_map(AnyKey::Variant),
            1 => key().prop_map(|k| AnyKey::Newtype(Name(k))),
            1 => key().prop_map(|k| AnyKey::Shown(Shown(k))),
            1 => prop_oneof![
                any::<Option<u8>>().prop_map(AnyKey::None),
                Just(AnyKey::Unit(())),
                any::<Vec<u8>>().prop_map(AnyKey::Seq),
            ],
        ]
    }

    /// `serialize_bytes`, which `to_value` makes an array of numbers.
    #[derive(Debug, Clone)]
    struct Bytes(Vec<u8>);

    impl Serialize for Bytes {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(&self.0)
        }
    }

    #[derive(Debug, Clone, Serialize)]
    struct Unit;

    #[derive(Debug, Clone, Serialize)]
    struct Pair(i16, char);

    #[derive(Debug, Clone, Serialize)]
    struct Meters(f32);

    #[derive(Debug, Clone, Serialize)]
    struct Inner {
        z: u32,
        a: Option<String>,
    }

    #[derive(Debug, Clone, Serialize)]
    enum Animal {
        Unit,
        Newtype(f64),
        Tuple(u8, String, Option<i32>),
        Struct {
            zeta: Option<Box<Animal>>,
            alpha: u64,
            mid: BTreeMap<String, f64>,
        },
        #[serde(rename = "ü\n")]
        Renamed(Inner),
        Nested(Tagged),
    }

    #[derive(Debug, Clone, Serialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Tagged {
        Plain { x: i64, y: String },
        Wrapped(Inner),
        Empty,
    }

    #[derive(Debug, Clone, Serialize)]
    #[serde(tag = "t", content = "c")]
    enum Adjacent {
        Num(f64),
        Pair(u8, u8),
    }

    #[derive(Debug, Clone, Serialize)]
    #[serde(untagged)]
    enum Untagged {
        Num(f64),
        Text(String),
        List(Vec<u32>),
    }

    /// Every serde shape at once.
    #[derive(Debug, Clone, Serialize)]
    struct Zoo {
        zeta: String,
        alpha: Option<u64>,
        big: i64,
        wide: i128,
        ratio: f64,
        small: f32,
        letter: char,
        bytes: Bytes,
        unit: Unit,
        pair: Pair,
        meters: Meters,
        animals: Vec<Animal>,
        by_name: BTreeMap<String, Animal>,
        by_id: HashMap<u32, Option<Tagged>>,
        flags: BTreeMap<bool, u8>,
        chars: BTreeMap<char, i8>,
        adjacent: Adjacent,
        untagged: Untagged,
        pairs: Pairs,
        #[serde(rename = "ünï\u{1f600}\n")]
        renamed: bool,
        // Its keys may repeat the fields' ("zeta", "alpha"): `to_value` keeps the last value.
        #[serde(flatten)]
        extra: BTreeMap<String, Value>,
    }

    fn animal() -> impl Strategy<Value = Animal> {
        let inner =
            || (any::<u32>(), proptest::option::of(key())).prop_map(|(z, a)| Inner { z, a });
        let tagged = prop_oneof![
            (i64_(), key()).prop_map(|(x, y)| Tagged::Plain { x, y }),
            inner().prop_map(Tagged::Wrapped),
            Just(Tagged::Empty),
        ];
        let leaf = prop_oneof![
            Just(Animal::Unit),
            double().prop_map(Animal::Newtype),
            (any::<u8>(), key(), any::<Option<i32>>()).prop_map(|(a, b, c)| Animal::Tuple(a, b, c)),
            inner().prop_map(Animal::Renamed),
            tagged.prop_map(Animal::Nested),
        ];
        leaf.prop_recursive(3, 12, 3, |inner| {
            (
                proptest::option::of(inner),
                u64_(),
                proptest::collection::btree_map(key(), double(), 0..3),
            )
                .prop_map(|(zeta, alpha, mid)| Animal::Struct {
                    zeta: zeta.map(Box::new),
                    alpha,
                    mid,
                })
        })
    }

    fn zoo() -> impl Strategy<Value = Zoo> {
        let numbers = (
            key(),
            proptest::option::of(u64_()),
            i64_(),
            prop_oneof![12 => -1000i128..1000, 1 => any::<i128>()],
            double(),
            any::<f32>(),
            any::<char>(),
            any::<Vec<u8>>().prop_map(Bytes),
            (any::<i16>(), any::<char>()).prop_map(|(a, b)| Pair(a, b)),
            any::<f32>().prop_map(Meters),
        );
        let tagged = prop_oneof![
            (i64_(), key()).prop_map(|(x, y)| Tagged::Plain { x, y }),
            Just(Tagged::Empty),
        ];
        let collections = (
            proptest::collection::vec(animal(), 0..3),
            proptest::collection::btree_map(key(), animal(), 0..3),
            proptest::collection::hash_map(any::<u32>(), proptest::option::of(tagged), 0..4),
            proptest::collection::btree_map(any::<bool>(), any::<u8>(), 0..2),
            proptest::collection::btree_map(any::<char>(), any::<i8>(), 0..3),
            prop_oneof![
                double().prop_map(Adjacent::Num),
                (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Adjacent::Pair(a, b)),
            ],
            prop_oneof![
                double().prop_map(Untagged::Num),
                key().prop_map(Untagged::Text),
                any::<Vec<u32>>().prop_map(Untagged::List),
            ],
            proptest::collection::vec((any_key(), any_json()), 0..4).prop_map(Pairs),
            any::<bool>(),
            proptest::collection::btree_map(
                prop_oneof![Just("zeta".to_owned()), Just("alpha".to_owned()), key()],
                any_json(),
                0..3,
            ),
        );
        (numbers, collections).prop_map(
            |(
                (zeta, alpha, big, wide, ratio, small, letter, bytes, pair, meters),
                (animals, by_name, by_id, flags, chars, adjacent, untagged, pairs, renamed, extra),
            )| Zoo {
                zeta,
                alpha,
                big,
                wide,
                ratio,
                small,
                letter,
                bytes,
                unit: Unit,
                pair,
                meters,
                animals,
                by_name,
                by_id,
                flags,
                chars,
                adjacent,
                untagged,
                pairs,
                renamed,
                extra,
            },
        )
    }

    /// Each shape alone, against its `Value` tree, with the texts spelled out where they show
    /// what `to_value` does.
    #[test]
    fn every_shape_is_its_value_tree() {
        #[derive(Serialize)]
        struct Fields {
            zeta: Option<&'static str>,
            alpha: Vec<i64>,
            mid: HashMap<&'static str, bool>,
        }
        let key = |k: AnyKey| Pairs(vec![(k, json!(1))]);
        /// A value, and its text or error message.
        type Case = (Box<dyn erased::Ser>, Result<&'static str, &'static str>);
        let cases: Vec<Case> = vec![
            (
                Box::new(Fields {
                    zeta: Some("q\"\n"),
                    alpha: vec![-3, 0, 9_007_199_254_740_991],
                    mid: [("b", true), ("a", false)].into_iter().collect(),
                }),
                Ok(
                    r#"{"alpha":[-3,0,9007199254740991],"mid":{"a":false,"b":true},"zeta":"q\"\n"}"#,
                ),
            ),
            // Once given up on by a one-pass writer, now written by the one writer.
            (Box::new(json!(1.5)), Ok("1.5")),
            (
                Box::new(json!(9_007_199_254_740_992u64)),
                Ok("9007199254740992"),
            ),
            (
                Box::new(json!({"é": 1, "a\"": 2})),
                Ok(r#"{"a\"":2,"é":1}"#),
            ),
            (Box::new(Option::<u8>::None), Ok("null")),
            (Box::new(Some(Unit)), Ok("null")),
            (Box::new(Meters(0.1)), Ok("0.10000000149011612")),
            (
                Box::new((f64::NAN, f32::INFINITY, -0.0f64)),
                Ok("[null,null,0]"),
            ),
            (Box::new(Bytes(vec![0, 7, 255])), Ok("[0,7,255]")),
            (Box::new(Pair(-1, '\u{0}')), Ok(r#"[-1,"\u0000"]"#)),
            (Box::new(Animal::Unit), Ok(r#""Unit""#)),
            (Box::new(Animal::Newtype(1e21)), Ok(r#"{"Newtype":1e+21}"#)),
            (
                Box::new(Animal::Tuple(1, "x".into(), None)),
                Ok(r#"{"Tuple":[1,"x",null]}"#),
            ),
            (
                Box::new(Animal::Renamed(Inner { z: 1, a: None })),
                Ok(r#"{"ü\n":{"a":null,"z":1}}"#),
            ),
            (
                Box::new(Tagged::Wrapped(Inner {
                    z: 2,
                    a: Some("é".into()),
                })),
                Ok(r#"{"a":"é","kind":"wrapped","z":2}"#),
            ),
            (
                Box::new(Adjacent::Pair(1, 2)),
                Ok(r#"{"c":[1,2],"t":"Pair"}"#),
            ),
            (Box::new(1u128 << 64), Err("number out of range")),
            (Box::new(-(1i128 << 63) - 1), Err("number out of range")),
            (
                Box::new((-(1i128 << 63), (1u128 << 64) - 1)),
                Err(
                    "integer -9223372036854775808 at /0 cannot be represented exactly as an I-JSON number",
                ),
            ),
            (
                Box::new(key(AnyKey::Char('\u{1f600}'))),
                Ok("{\"\u{1f600}\":1}"),
            ),
            (Box::new(key(AnyKey::Bool(false))), Ok(r#"{"false":1}"#)),
            (
                Box::new(key(AnyKey::Wide(i128::MIN))),
                Ok(r#"{"-170141183460469231731687303715884105728":1}"#),
            ),
            (Box::new(key(AnyKey::Float(1.0))), Ok(r#"{"1.0":1}"#)),
            (Box::new(key(AnyKey::Float(1e21))), Ok(r#"{"1e+21":1}"#)),
            (Box::new(key(AnyKey::Single(0.1))), Ok(r#"{"0.1":1}"#)),
            (
                Box::new(key(AnyKey::Variant(Color::Green))),
                Ok("{\"\u{1f7e2}\\\"green\\\"\":1}"),
            ),
            (
                Box::new(key(AnyKey::Newtype(Name("n".into())))),
                Ok(r#"{"n":1}"#),
            ),
            (
                Box::new(key(AnyKey::Shown(Shown("~".into())))),
                Ok(r#"{"~\"\t\u0001":1}"#),
            ),
            (
                Box::new(Shown("\u{7f}".into())),
                Ok("\"\u{7f}\\\"\\t\\u0001\""),
            ),
            (
                Box::new(key(AnyKey::Float(f64::NAN))),
                Err("float key must be finite (got NaN or +/-inf)"),
            ),
            (
                Box::new(key(AnyKey::None(None))),
                Err("key must be a string"),
            ),
            (
                Box::new(key(AnyKey::None(Some(1)))),
                Err("key must be a string"),
            ),
            (Box::new(key(AnyKey::Unit(()))), Err("key must be a string")),
            (
                Box::new(key(AnyKey::Seq(vec![]))),
                Err("key must be a string"),
            ),
            (Box::new(KeyThenKey), Ok(r#"{"a":{"y":2}}"#)),
        ];
        for (i, (case, want)) in cases.iter().enumerate() {
            let got = case.direct();
            assert_eq!(got, case.via(), "case {i}");
            match (got, want) {
                (Ok(text), Ok(want)) => assert_eq!(text, *want, "case {i}"),
                (Err(e), Err(want)) => assert_eq!(e.to_string(), *want, "case {i}"),
                (got, want) => panic!("case {i}: {got:?}, want {want:?}"),
            }
        }
        // `to_value` panics on a value before its key; the writer reports it.
        assert_eq!(
            to_canonical_string_of(&ValueWithoutKey),
            Err(OfError::Serialize(
                "serialize_value called before serialize_key".into()
            ))
        );
    }

    /// A `Serialize` that breaks serde's order: a key, then another, then one value (and, in
    /// the inner map, a key left without one at the end). `to_value` keeps the last key given.
    struct KeyThenKey;

    impl Serialize for KeyThenKey {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            struct Inner;
            impl Serialize for Inner {
                fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    let mut map = s.serialize_map(None)?;
                    map.serialize_key("x\n")?;
                    map.serialize_entry("y", &2)?;
                    map.serialize_key("z")?;
                    map.end()
                }
            }
            let mut map = s.serialize_map(None)?;
            map.serialize_key("b\u{e000}")?;
            map.serialize_key("a")?;
            map.serialize_value(&Inner)?;
            map.end()
        }
    }

    struct ValueWithoutKey;

    impl Serialize for ValueWithoutKey {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut map = s.serialize_map(None)?;
            map.serialize_value(&1)?;
            map.end()
        }
    }

    /// Object-safe access to both routes for the table above.
    mod erased {
        use super::*;

        pub(super) trait Ser {
            fn direct(&self) -> Result<String, OfError>;
            fn via(&self) -> Result<String, OfError>;
        }

        impl<T: Serialize> Ser for T {
            fn direct(&self) -> Result<String, OfError> {
                to_canonical_string_of(self)
            }
            fn via(&self) -> Result<String, OfError> {
                via_value(self)
            }
        }
    }
}
