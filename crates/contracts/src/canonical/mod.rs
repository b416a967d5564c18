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
//! Numbers are IEEE doubles (I-JSON). An integer outside ±(2^53 − 1) is accepted only when a
//! double holds it exactly (so canonicalization stays idempotent: a large double prints without
//! an exponent below 1e21 and reads back as an integer); any other is refused rather than
//! silently rounded.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Number, Value};

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
    // Most values are written in one pass; the general writer below (key sorting by UTF-16
    // code units, floats, large integers, the error's pointer) takes the rest.
    if serializer::write(&mut out, value).is_ok() {
        return Ok(out);
    }
    out.clear();
    let mut pointer = String::new();
    write_value(&mut out, value, &mut pointer)?;
    Ok(out)
}

/// The canonical form of any serializable value: exactly
/// `to_canonical_string(&serde_json::to_value(value)?)`, written straight from the value where
/// it can be (strings, booleans, integers within ±(2^53 − 1), options, sequences, structs, maps
/// with plain ASCII keys, enums), without building the `Value` tree; anything else (a float, a
/// larger integer, a key that needs escaping) goes through the tree, with its result or error.
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
    if serializer::write(&mut out, value).is_ok() {
        return Ok(out);
    }
    let value = serde_json::to_value(value).map_err(|e| OfError::Serialize(e.to_string()))?;
    out.clear();
    let mut pointer = String::new();
    write_value(&mut out, &value, &mut pointer)?;
    Ok(out)
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

fn write_value(
    out: &mut String,
    value: &Value,
    pointer: &mut String,
) -> Result<(), CanonicalError> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n, pointer)?,
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let len = pointer.len();
                let _ = write!(pointer, "/{i}");
                write_value(out, item, pointer)?;
                pointer.truncate(len);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                write_value(out, item, pointer)?;
                pointer.truncate(len);
            }
            out.push('}');
        }
    }
    Ok(())
}

fn write_number(out: &mut String, n: &Number, pointer: &str) -> Result<(), CanonicalError> {
    let out_of_range = || CanonicalError::IntegerOutOfRange {
        value: n.to_string(),
        pointer: pointer_or_root(pointer),
    };
    // Integers are IEEE doubles in I-JSON: small ones print as themselves. A larger one is
    // accepted only when it is already the ES6 form of its nearest double (as a large double
    // prints without an exponent below 1e21), so canonicalization is idempotent and lossless.
    let big = if let Some(u) = n.as_u64() {
        if u <= MAX_SAFE_INTEGER {
            let _ = write!(out, "{u}");
            return Ok(());
        }
        u as f64
    } else if let Some(i) = n.as_i64() {
        if i.unsigned_abs() <= MAX_SAFE_INTEGER {
            let _ = write!(out, "{i}");
            return Ok(());
        }
        i as f64
    } else {
        f64::NAN
    };
    if !big.is_nan() {
        let mut text = String::new();
        write_es6_number(&mut text, big);
        if text != n.to_string() {
            return Err(out_of_range());
        }
        out.push_str(&text);
        return Ok(());
    }
    match n.as_f64() {
        Some(f) if f.is_finite() => {
            write_es6_number(out, f);
            Ok(())
        }
        _ => Err(CanonicalError::NotFinite {
            pointer: pointer_or_root(pointer),
        }),
    }
}

fn pointer_or_root(pointer: &str) -> String {
    if pointer.is_empty() {
        "/".to_owned()
    } else {
        pointer.to_owned()
    }
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
    // Rust's `{:e}` gives the shortest round-trip digits: "d.ddddde±x".
    let (digits, exp) = shortest_digits(f.abs());
    let k = digits.len() as i32; // number of significant digits
    let n = exp + 1; // position of the decimal point relative to the digits
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
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
/// so the tie is detected from the exact expansion and corrected.
fn shortest_digits(f: f64) -> (String, i32) {
    let split = |sci: &str| -> (String, i32) {
        let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
        let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
        (digits, exp.parse().unwrap_or(0))
    };
    let (digits, exp) = split(&format!("{f:e}"));
    // Every double has a finite decimal expansion of at most 767 significant digits.
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

fn write_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    // The common case, nothing to escape: one copy.
    if crate::bytes::all(s.as_bytes(), |b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push_str(s);
        out.push('"');
        return;
    }
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The general writer alone (what every value's text is checked against).
    fn general(value: &Value) -> Result<String, CanonicalError> {
        let mut out = String::new();
        write_value(&mut out, value, &mut String::new())?;
        Ok(out)
    }

    /// Any JSON: floats, integers past 2^53, keys in any order, escaped and beyond the BMP.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-(1i64 << 53)..(1i64 << 53)).prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "\\PC{0,8}|[\\x00-\\x1f\"\\\\\u{e000}\u{1f600}]{0,3}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::vec(("[a-c !]{0,3}|\\PC{0,3}", inner), 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: if std::env::var_os("CI").is_some() { 64 } else { 512 },
            ..ProptestConfig::default()
        })]

        /// The one-pass writer gives exactly the general writer's text, or leaves the value to
        /// it (so errors are the general writer's too).
        #[test]
        fn the_one_pass_writer_is_the_general_one(v in any_json()) {
            prop_assert_eq!(to_canonical_string(&v), general(&v));
            let direct = to_canonical_string_of(&v).map_err(|e| match e {
                OfError::Canonical(c) => c,
                OfError::Serialize(m) => panic!("a Value always serializes: {m}"),
            });
            prop_assert_eq!(direct, general(&v));
        }
    }

    fn es6(f: f64) -> String {
        let mut s = String::new();
        write_es6_number(&mut s, f);
        s
    }

    /// A key sorts before every key it is a prefix of, whatever follows (the one-pass writer
    /// once compared keys with their quotes, which put `"a!"` before `"a"`).
    #[test]
    fn a_key_sorts_before_the_keys_it_is_a_prefix_of() {
        let v = serde_json::json!({"a!": 1, "a": 2, "a b": 3, " ": 4, "": 5, "ab": 6});
        let want = r#"{"":5," ":4,"a":2,"a b":3,"a!":1,"ab":6}"#;
        assert_eq!(to_canonical_string(&v).unwrap(), want);
        assert_eq!(general(&v).unwrap(), want);
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
            assert_eq!(es6(f64::from_bits(*bits)), *want, "bits {bits:#018x}");
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
        let v = serde_json::json!({"a": [1, 9007199254740993u64]});
        assert_eq!(
            to_canonical_string(&v),
            Err(CanonicalError::IntegerOutOfRange {
                value: "9007199254740993".into(),
                pointer: "/a/1".into()
            })
        );
        assert!(to_canonical_string(&serde_json::json!(-9007199254740991i64)).is_ok());
        // A large integer a double holds exactly is its own ES6 form.
        assert_eq!(
            to_canonical_string(&serde_json::json!(-1536538844847216400i64)).unwrap(),
            "-1536538844847216400"
        );
        assert!(to_canonical_string(&serde_json::json!(u64::MAX)).is_err());
    }
}
