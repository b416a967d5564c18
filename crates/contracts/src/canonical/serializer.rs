//! The one canonical writer: a serde `Serializer` that writes RFC 8785 text straight from a
//! value's `Serialize` implementation, reading serde's calls as `serde_json::to_value` does (the
//! parent module's docs say how).

use std::cmp::Ordering;
use std::fmt::{self, Display, Write as _};
use std::sync::OnceLock;

use serde::ser::{self, Impossible, Serialize};

use super::{
    Ascii, CanonicalError, OfError, push_decimal, push_escaped, write_es6_number, write_integer,
    write_string,
};

/// Writes `value`'s canonical text into `out` (which it leaves in any state on an error).
pub(super) fn write<T: Serialize + ?Sized>(out: &mut String, value: &T) -> Result<(), OfError> {
    let mut w = Writer::new(out);
    value
        .serialize(&mut w)
        .map_err(|Error(message)| OfError::Serialize(message))?;
    if !w.refused {
        return Ok(());
    }
    // A refused number whose member a repeated key replaced has left the text with its member.
    match w.out.bytes().position(|b| b == REFUSED) {
        None => Ok(()),
        Some(at) => Err(OfError::Canonical(refusal(w.out, at))),
    }
}

/// What a refused number is written as: a NUL byte (which no canonical text holds, strings
/// escape it), then the integer's digits as written (none for a number that is not finite).
const REFUSED: u8 = 0;

/// serde_json's messages for what `to_value` refuses (the tests hold the first three to
/// serde_json's; the fourth is `arbitrary_precision`'s, for a number struct that is not one).
const KEY_MUST_BE_A_STRING: &str = "key must be a string";
const FLOAT_KEY_MUST_BE_FINITE: &str = "float key must be finite (got NaN or +/-inf)";
const NUMBER_OUT_OF_RANGE: &str = "number out of range";
const INVALID_NUMBER: &str = "invalid number";
/// `to_value` panics with this one; the writer reports it.
const VALUE_BEFORE_KEY: &str = "serialize_value called before serialize_key";
/// `to_string` panics on a `Display` that fails; the writer reports it.
const DISPLAY_FAILED: &str = "a Display implementation returned an error unexpectedly";

/// The name under which serde_json's `arbitrary_precision` feature serializes a `Number` (a
/// struct with one field of that name, its text).
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Whether serde_json is built with `arbitrary_precision` (another crate of the build may turn it
/// on): `to_value` then keeps a number's text, and reads `f32`s and 128-bit integers through it.
fn arbitrary_precision() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        serde_json::from_str::<serde_json::Number>("1e2").is_ok_and(|n| n.to_string() == "1e2")
    })
}

/// The error of a value's own `Serialize`, or of what `to_value` refuses: its message.
#[derive(Debug)]
struct Error(String);

impl Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: Display>(message: T) -> Self {
        Self(message.to_string())
    }
}

fn error(message: &str) -> Error {
    Error(message.to_owned())
}

struct Writer<'o> {
    out: &'o mut String,
    /// The members of every object being written, the innermost object's last.
    members: Vec<Member>,
    /// The keys that are written escaped (so that `out` does not hold them as they are).
    keys: String,
    /// A key's text from its `Display`.
    scratch: String,
    /// Whether a number was refused (written as [`REFUSED`]).
    refused: bool,
}

/// An object member as written.
#[derive(Clone, Copy)]
struct Member {
    /// Where its text (its key's opening quote) starts in `out`.
    start: usize,
    /// Where its text ends in `out`; [`PENDING`] until its value is written.
    end: usize,
    key: Key,
}

const PENDING: usize = usize::MAX;

/// Where a member's key is, as it is (not escaped).
#[derive(Clone, Copy)]
enum Key {
    /// `out[from..to]`: written with no escape, between its quotes.
    Out(usize, usize),
    /// `keys[from..to]`.
    Keys(usize, usize),
}

impl Key {
    /// The key's UTF-8 bytes (compared as bytes: no character boundaries to check).
    fn text<'t>(self, out: &'t str, keys: &'t str) -> &'t [u8] {
        let (text, from, to) = match self {
            Self::Out(from, to) => (out, from, to),
            Self::Keys(from, to) => (keys, from, to),
        };
        text.as_bytes().get(from..to).unwrap_or_default()
    }
}

impl<'o> Writer<'o> {
    fn new(out: &'o mut String) -> Self {
        Self {
            out,
            members: Vec::new(),
            keys: String::new(),
            scratch: String::new(),
            refused: false,
        }
    }

    fn integer(&mut self, magnitude: u64, negative: bool) {
        if !write_integer(self.out, magnitude, negative) {
            self.out.push(char::from(REFUSED));
            if negative {
                self.out.push('-');
            }
            push_decimal(self.out, magnitude);
            self.refused = true;
        }
    }

    fn i128(&mut self, v: i128) -> Result<(), Error> {
        if let Ok(v) = i64::try_from(v) {
            self.integer(v.unsigned_abs(), v < 0);
        } else if let Ok(v) = u64::try_from(v) {
            self.integer(v, false);
        } else if arbitrary_precision() {
            // Its text, read as a double (the nearest one, as the cast gives).
            self.float(v as f64);
        } else {
            return Err(error(NUMBER_OUT_OF_RANGE));
        }
        Ok(())
    }

    /// A float: `to_value` makes a NaN or an infinity `null`.
    fn float(&mut self, f: f64) {
        if f.is_finite() {
            write_es6_number(self.out, f);
        } else {
            self.out.push_str("null");
        }
    }

    /// A number as serde_json's `arbitrary_precision` carries it: `to_value` checks its text
    /// (JSON's number syntax); the number is then what its text reads as, a `u64`, an `i64` or a
    /// double, in that order, as `Number::as_u64`, `as_i64` and `as_f64` read it.
    fn number_text(&mut self, text: &str) -> Result<(), Error> {
        text.parse::<serde_json::Number>()
            .map_err(|e| Error(e.to_string()))?;
        if let Ok(u) = text.parse::<u64>() {
            self.integer(u, false);
        } else if let Ok(i) = text.parse::<i64>() {
            self.integer(i.unsigned_abs(), i < 0);
        } else {
            match text.parse::<f64>() {
                Ok(f) if f.is_finite() => write_es6_number(self.out, f),
                _ => {
                    self.out.push(char::from(REFUSED));
                    self.refused = true;
                }
            }
        }
        Ok(())
    }

    /// Starts an object: where its members' records and escaped keys begin.
    fn open_object(&mut self) -> (usize, usize) {
        self.out.push('{');
        if self.members.capacity() == 0 {
            // Room for a record's members at once, rather than growing to it.
            self.members.reserve(16);
        }
        (self.members.len(), self.keys.len())
    }

    /// Writes the key of a new member of the object whose members begin at `base`, and the
    /// colon.
    fn key(&mut self, base: usize, key: &str) {
        self.drop_pending(base);
        if self.members.len() > base {
            self.out.push(',');
        }
        let start = self.out.len();
        write_string(self.out, key);
        // Escaping lengthens a key: one written in its length plus the quotes is as it is.
        let key = if self.out.len() == start + key.len() + 2 {
            Key::Out(start + 1, start + 1 + key.len())
        } else {
            let from = self.keys.len();
            self.keys.push_str(key);
            Key::Keys(from, self.keys.len())
        };
        self.out.push(':');
        self.members.push(Member {
            start,
            end: PENDING,
            key,
        });
    }

    /// Writes the value of the member just keyed in the object whose members begin at `base`.
    fn value<T: Serialize + ?Sized>(&mut self, base: usize, value: &T) -> Result<(), Error> {
        if self.members.len() <= base || self.members.last().is_none_or(|m| m.end != PENDING) {
            return Err(error(VALUE_BEFORE_KEY));
        }
        value.serialize(&mut *self)?;
        if let Some(member) = self.members.last_mut() {
            member.end = self.out.len();
        }
        Ok(())
    }

    /// Forgets a key given no value (a `Serialize` that breaks serde's order): `to_value` keeps
    /// only the last key given before a value.
    #[inline]
    fn drop_pending(&mut self, base: usize) {
        if self.members.len() > base && self.members.last().is_some_and(|m| m.end == PENDING) {
            self.forget_last_key(base);
        }
    }

    #[cold]
    fn forget_last_key(&mut self, base: usize) {
        if let Some(member) = self.members.pop() {
            let comma = usize::from(self.members.len() > base);
            self.out.truncate(member.start - comma);
            if let Key::Keys(from, _) = member.key {
                self.keys.truncate(from);
            }
        }
    }

    /// Ends the object whose members and escaped keys begin at `base` and `keys_base`.
    fn close_object(&mut self, base: usize, keys_base: usize) {
        self.drop_pending(base);
        if let Some(members) = self.members.get_mut(base..) {
            order(self.out, members, &self.keys);
        }
        self.members.truncate(base);
        self.keys.truncate(keys_base);
        self.out.push('}');
    }
}

/// Puts an object's members (written in the order they came) in canonical order: sorted by key,
/// a repeated key's last value kept. Members that came sorted (a `BTreeMap`'s, a `Value`'s, a
/// struct's whose fields are declared in order) stay where they are; others are copied in order
/// after the object's text, which then moves down over it.
fn order(out: &mut String, members: &mut [Member], keys: &str) {
    let Some(first) = members.first().map(|m| m.start) else {
        return;
    };
    {
        let text = out.as_str();
        let key = |m: &Member| m.key.text(text, keys);
        if members
            .windows(2)
            .all(|p| cmp_utf16(key(&p[0]), key(&p[1])) == Ordering::Less)
        {
            return;
        }
        // Stable: members with one key stay in the order they came.
        members.sort_by(|a, b| cmp_utf16(key(a), key(b)));
        // Of members with one key, now in the order they came, the last is kept; the others are
        // dropped (left with no text).
        for i in 1..members.len() {
            if key(&members[i - 1]) == key(&members[i]) {
                members[i - 1].end = members[i - 1].start;
            }
        }
    }
    let end = out.len();
    let mut any = false;
    for m in members.iter() {
        if m.end > m.start && m.end <= end {
            if any {
                out.push(',');
            }
            out.extend_from_within(m.start..m.end);
            any = true;
        }
    }
    out.drain(first..end);
}

/// Orders two keys by their UTF-16 code units. UTF-8's byte order is code point order, which is
/// UTF-16's but between a character above U+FFFF (a surrogate pair: 0xD800..) and one in
/// U+E000..U+FFFF. So the bytes decide, except where they first differ in a four-byte lead
/// (0xF0..) against the lead of U+E000..U+FFFF (0xEE, 0xEF): the first sorts first. (A difference
/// inside a character is between characters of one length, which both orders agree on.)
fn cmp_utf16(a: &[u8], b: &[u8]) -> Ordering {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        None => a.len().cmp(&b.len()),
        Some(i) => match (a[i], b[i]) {
            (0xF0.., 0xEE | 0xEF) => Ordering::Less,
            (0xEE | 0xEF, 0xF0..) => Ordering::Greater,
            (x, y) => x.cmp(&y),
        },
    }
}

/// The error of the refused number marked at `at` in the finished text.
fn refusal(text: &str, at: usize) -> CanonicalError {
    let rest = &text[at + 1..];
    let value = &rest[..rest.find([',', ']', '}']).unwrap_or(rest.len())];
    let pointer = pointer_at(text, at);
    if value.is_empty() {
        CanonicalError::NotFinite { pointer }
    } else {
        CanonicalError::IntegerOutOfRange {
            value: value.to_owned(),
            pointer,
        }
    }
}

/// The JSON pointer (`/` for the whole value) of the value that starts at `at` in canonical
/// text, found by reading the text up to there.
fn pointer_at(text: &str, at: usize) -> String {
    enum Step {
        Index(usize),
        Key(String),
    }
    let mut path = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < at {
        match bytes[i] {
            b'[' => path.push(Step::Index(0)),
            b'{' => path.push(Step::Key(String::new())),
            b']' | b'}' => {
                path.pop();
            }
            b',' => {
                if let Some(Step::Index(n)) = path.last_mut() {
                    *n += 1;
                }
            }
            b'"' => {
                let (string, end) = read_string(text, i + 1);
                // Canonical text has no whitespace: a key is followed by its colon.
                if bytes.get(end) == Some(&b':')
                    && let Some(Step::Key(key)) = path.last_mut()
                {
                    *key = string;
                }
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    let mut pointer = String::new();
    for step in &path {
        pointer.push('/');
        match step {
            Step::Index(n) => {
                let _ = write!(pointer, "{n}");
            }
            Step::Key(key) => {
                for c in key.chars() {
                    match c {
                        '~' => pointer.push_str("~0"),
                        '/' => pointer.push_str("~1"),
                        c => pointer.push(c),
                    }
                }
            }
        }
    }
    if pointer.is_empty() {
        pointer.push('/');
    }
    pointer
}

/// The JSON string whose content starts at `from` (after its opening quote), unescaped, and
/// where it ends (after its closing quote).
fn read_string(text: &str, from: usize) -> (String, usize) {
    let mut string = String::new();
    let mut chars = text[from..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (string, from + i + 1),
            '\\' => match chars.next().map(|(_, e)| e) {
                Some('b') => string.push('\u{8}'),
                Some('f') => string.push('\u{c}'),
                Some('n') => string.push('\n'),
                Some('r') => string.push('\r'),
                Some('t') => string.push('\t'),
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).map(|(_, h)| h).collect();
                    let unit = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32);
                    string.push(unit.unwrap_or(char::REPLACEMENT_CHARACTER));
                }
                Some(e) => string.push(e),
                None => {}
            },
            c => string.push(c),
        }
    }
    (string, text.len())
}

impl<'a, 'o> ser::Serializer for &'a mut Writer<'o> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Seq<'a, 'o>;
    type SerializeTuple = Seq<'a, 'o>;
    type SerializeTupleStruct = Seq<'a, 'o>;
    type SerializeTupleVariant = Seq<'a, 'o>;
    type SerializeMap = Object<'a, 'o>;
    type SerializeStruct = Object<'a, 'o>;
    type SerializeStructVariant = Object<'a, 'o>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out.push_str(if v { "true" } else { "false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.integer(v.unsigned_abs(), v < 0);
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.i128(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.integer(v, false);
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        match u64::try_from(v) {
            Ok(v) => self.serialize_u64(v),
            Err(_) if arbitrary_precision() => {
                self.float(v as f64);
                Ok(())
            }
            Err(_) => Err(error(NUMBER_OUT_OF_RANGE)),
        }
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        if v.is_finite() && arbitrary_precision() {
            // Its shortest `f32` text, read as a double.
            let text = float_text(v)?;
            self.float(text.as_str().parse().unwrap_or(f64::NAN));
        } else {
            self.float(f64::from(v));
        }
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.float(v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_string(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_string(self.out, v);
        Ok(())
    }
    /// An array of numbers, as `to_value` makes bytes.
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        self.out.push('[');
        for (i, b) in v.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            push_decimal(self.out, u64::from(*b));
        }
        self.out.push(']');
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.out.push_str("null");
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    /// `{"variant":value}`: one member, nothing to sort.
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        open_variant(self.out, variant);
        value.serialize(&mut *self)?;
        self.out.push('}');
        Ok(())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Seq<'a, 'o>, Error> {
        self.out.push('[');
        Ok(Seq {
            w: self,
            first: true,
            variant: false,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a, 'o>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Seq<'a, 'o>, Error> {
        self.serialize_seq(Some(len))
    }
    /// `{"variant":[…]}`.
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Seq<'a, 'o>, Error> {
        open_variant(self.out, variant);
        self.out.push('[');
        Ok(Seq {
            w: self,
            first: true,
            variant: true,
        })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Object<'a, 'o>, Error> {
        Ok(Object::open(self, Kind::Map))
    }
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Object<'a, 'o>, Error> {
        if name == NUMBER_TOKEN && arbitrary_precision() {
            return Ok(Object {
                w: self,
                base: 0,
                keys_base: 0,
                kind: Kind::Number { written: false },
            });
        }
        Ok(Object::open(self, Kind::Map))
    }
    /// `{"variant":{…}}`.
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Object<'a, 'o>, Error> {
        open_variant(self.out, variant);
        Ok(Object::open(self, Kind::Variant))
    }
    /// The text straight into the string, escaped as it comes.
    fn collect_str<T: Display + ?Sized>(self, value: &T) -> Result<(), Error> {
        struct Escaped<'s>(&'s mut String);
        impl fmt::Write for Escaped<'_> {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                push_escaped(self.0, s);
                Ok(())
            }
        }
        self.out.push('"');
        write!(Escaped(self.out), "{value}").map_err(|_| error(DISPLAY_FAILED))?;
        self.out.push('"');
        Ok(())
    }
}

/// Opens an enum variant's one-member object: `{"variant":`.
fn open_variant(out: &mut String, variant: &str) {
    out.push('{');
    write_string(out, variant);
    out.push(':');
}

/// A finite float's text as serde_json writes it (its shortest digits; the text `to_value` gives
/// a float map key).
fn float_text<F: Serialize>(f: F) -> Result<Ascii, Error> {
    let mut text = Ascii::default();
    serde_json::to_writer(&mut text, &f).map_err(|e| Error(e.to_string()))?;
    Ok(text)
}

/// An array being written (for a tuple variant, inside its one-member object).
struct Seq<'a, 'o> {
    w: &'a mut Writer<'o>,
    first: bool,
    variant: bool,
}

impl Seq<'_, '_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        if !self.first {
            self.w.out.push(',');
        }
        self.first = false;
        value.serialize(&mut *self.w)
    }

    fn close(self) -> Result<(), Error> {
        self.w.out.push(']');
        if self.variant {
            self.w.out.push('}');
        }
        Ok(())
    }
}

/// serde's four array traits, each one element at a time.
macro_rules! array_traits {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Seq<'_, '_> {
            type Ok = ();
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }
            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

array_traits!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// An object being written.
struct Object<'a, 'o> {
    w: &'a mut Writer<'o>,
    /// Where its members' records and its escaped keys begin.
    base: usize,
    keys_base: usize,
    kind: Kind,
}

enum Kind {
    Map,
    /// A struct variant's fields, inside its one-member object.
    Variant,
    /// A number under serde_json's `arbitrary_precision` (written as a number, not an object).
    Number {
        written: bool,
    },
}

impl<'a, 'o> Object<'a, 'o> {
    fn open(w: &'a mut Writer<'o>, kind: Kind) -> Self {
        let (base, keys_base) = w.open_object();
        Self {
            w,
            base,
            keys_base,
            kind,
        }
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        if let Kind::Number { written } = &mut self.kind {
            // `to_value` reads the one field of that name, a string.
            let text = match serde_json::to_value(value) {
                Ok(serde_json::Value::String(text)) if key == NUMBER_TOKEN => text,
                Ok(_) => return Err(error(INVALID_NUMBER)),
                Err(e) => return Err(Error(e.to_string())),
            };
            *written = true;
            return self.w.number_text(&text);
        }
        self.w.key(self.base, key);
        self.w.value(self.base, value)
    }

    fn close(self) -> Result<(), Error> {
        match self.kind {
            Kind::Number { written: true } => {}
            Kind::Number { written: false } => return Err(error(INVALID_NUMBER)),
            Kind::Map => self.w.close_object(self.base, self.keys_base),
            Kind::Variant => {
                self.w.close_object(self.base, self.keys_base);
                self.w.out.push('}');
            }
        }
        Ok(())
    }
}

impl ser::SerializeMap for Object<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        key.serialize(KeyWriter {
            w: &mut *self.w,
            base: self.base,
        })
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.w.value(self.base, value)
    }
    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

/// serde's two struct traits, each one named field at a time.
macro_rules! struct_traits {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Object<'_, '_> {
            type Ok = ();
            type Error = Error;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Error> {
                self.field(key, value)
            }
            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

struct_traits!(SerializeStruct, SerializeStructVariant);

/// A map key, written as the text `to_value` makes of it: a string or char as it is, an
/// integer's digits, `true`/`false`, a finite float's shortest text, a unit variant's name, a
/// `Display`'s text; anything else is refused.
struct KeyWriter<'a, 'o> {
    w: &'a mut Writer<'o>,
    base: usize,
}

impl KeyWriter<'_, '_> {
    fn key(self, key: &str) -> Result<(), Error> {
        self.w.key(self.base, key);
        Ok(())
    }

    fn shown(self, key: impl Display) -> Result<(), Error> {
        let mut text = Ascii::default();
        write!(text, "{key}").map_err(|_| error(DISPLAY_FAILED))?;
        self.key(text.as_str())
    }

    fn float<F: Serialize>(self, key: F, finite: bool) -> Result<(), Error> {
        if !finite {
            return Err(error(FLOAT_KEY_MUST_BE_FINITE));
        }
        let text = float_text(key)?;
        self.key(text.as_str())
    }
}

/// Key `Serializer` methods that `to_value` refuses.
macro_rules! refuse_keys {
    ($($method:ident($($arg:ty),*) -> $ok:ty),* $(,)?) => {$(
        fn $method(self, $(_: $arg),*) -> Result<$ok, Error> {
            Err(error(KEY_MUST_BE_A_STRING))
        }
    )*};
}

impl ser::Serializer for KeyWriter<'_, '_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.key(v)
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.key(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.key(if v { "true" } else { "false" })
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.shown(v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.shown(v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.shown(v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.shown(v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.shown(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.shown(v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.shown(v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.shown(v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.shown(v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        self.shown(v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        self.float(v, v.is_finite())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.float(v, v.is_finite())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.key(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn collect_str<T: Display + ?Sized>(self, value: &T) -> Result<(), Error> {
        let mut text = std::mem::take(&mut self.w.scratch);
        text.clear();
        let shown = write!(text, "{value}");
        if shown.is_ok() {
            self.w.key(self.base, &text);
        }
        self.w.scratch = text;
        shown.map_err(|_| error(DISPLAY_FAILED))
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Error> {
        Err(error(KEY_MUST_BE_A_STRING))
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        Err(error(KEY_MUST_BE_A_STRING))
    }
    refuse_keys!(
        serialize_bytes(&[u8]) -> (),
        serialize_none() -> (),
        serialize_unit() -> (),
        serialize_unit_struct(&'static str) -> (),
        serialize_seq(Option<usize>) -> Impossible<(), Error>,
        serialize_tuple(usize) -> Impossible<(), Error>,
        serialize_tuple_struct(&'static str, usize) -> Impossible<(), Error>,
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Impossible<(), Error>,
        serialize_map(Option<usize>) -> Impossible<(), Error>,
        serialize_struct(&'static str, usize) -> Impossible<(), Error>,
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Impossible<(), Error>,
    );
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            if std::env::var_os("CI").is_some() { 64 } else { 512 },
        ))]

        /// The byte comparison with its one correction is the UTF-16 comparison.
        #[test]
        fn keys_compare_by_utf16_code_units(
            a in "[a\u{7f}\u{80}\u{d7ff}\u{e000}\u{ffff}\u{10000}\u{1f600}\u{10ffff}]{0,4}|\\PC{0,4}",
            b in "[a\u{7f}\u{80}\u{d7ff}\u{e000}\u{ffff}\u{10000}\u{1f600}\u{10ffff}]{0,4}|\\PC{0,4}",
        ) {
            prop_assert_eq!(cmp_utf16(a.as_bytes(), b.as_bytes()), a.encode_utf16().cmp(b.encode_utf16()));
            prop_assert_eq!(cmp_utf16(a.as_bytes(), a.as_bytes()), Ordering::Equal);
        }
    }

    /// A pointer is read back from the canonical text before the number, through strings that
    /// hold brackets, commas, colons and escapes.
    #[test]
    fn the_pointer_is_read_from_the_text_before_the_number() {
        for (text, want) in [
            ("\0", "/"),
            ("[1,\"],[{:\",[\0", "/2/0"),
            (
                r#"{"a\"\\\n\u0001":{"k/~":["x",{"":["#,
                "/a\"\\\n\u{1}/k~1~0/1//0",
            ),
            (r#"{"a":{"b":1},"c":[{"d":2}],"e":"#, "/e"),
        ] {
            let at = text.find('\0').unwrap_or(text.len());
            assert_eq!(pointer_at(text, at), want, "{text}");
        }
    }

    /// `arbitrary_precision` is off in this build (`to_value` keeps numbers as `u64`, `i64` or
    /// `f64`), and a number's text is read as `to_value` would read it with it on.
    #[test]
    fn arbitrary_precision_numbers_are_read_from_their_text() {
        assert!(!arbitrary_precision());
        let read = |text: &str| {
            let mut out = String::new();
            let mut w = Writer::new(&mut out);
            w.number_text(text).map(|()| out).map_err(|e| e.0)
        };
        assert_eq!(read("1e2").unwrap(), "100");
        assert_eq!(read("-0").unwrap(), "0");
        assert_eq!(read("-0.0").unwrap(), "0");
        assert_eq!(read("12.50").unwrap(), "12.5");
        assert_eq!(read("9007199254740992").unwrap(), "9007199254740992");
        assert_eq!(read("9007199254740993").unwrap(), "\09007199254740993");
        assert_eq!(
            read("-9223372036854775809").unwrap(),
            "-9223372036854776000"
        );
        // Out of a double's range: serde_json's parse refuses it here; with `arbitrary_precision`
        // the text is kept, and the number is not finite.
        assert_eq!(
            read("1e400").map_err(|e| e.contains("number out of range")),
            Err(true)
        );
        assert!(read("01").is_err());
        assert!(read("x").is_err());
    }
}
