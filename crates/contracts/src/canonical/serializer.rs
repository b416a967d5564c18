//! Canonical JSON straight from a value's `Serialize` implementation, without building a
//! `serde_json::Value` tree first (the tree's allocations, and freeing them, cost more than
//! writing the text).
//!
//! The text is exactly `to_canonical_string(&serde_json::to_value(value)?)`. The writer covers
//! what typed values hold (strings, booleans, integers within ±(2^53 − 1), options, sequences,
//! structs, maps with plain ASCII keys, enums); for anything else (a float, a larger integer,
//! bytes, a key that needs escaping or is not ASCII, a repeated key, an error from the value's
//! own `Serialize`) it gives up, and the caller takes the `Value` route, which then decides,
//! with its own result or error.

use serde::ser::{self, Serialize};

use super::{MAX_SAFE_INTEGER, write_string};

/// The writer gave up: take the `Value` route.
#[derive(Debug)]
pub(super) struct GiveUp;

impl std::fmt::Display for GiveUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not written directly")
    }
}

impl std::error::Error for GiveUp {}

impl ser::Error for GiveUp {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Self
    }
}

/// Writes `value`'s canonical text into `out`, or gives up (leaving `out` in any state).
pub(super) fn write<T: Serialize + ?Sized>(out: &mut String, value: &T) -> Result<(), GiveUp> {
    let mut w = Writer {
        out,
        entries: Vec::new(),
        key: String::new(),
    };
    value.serialize(&mut w)
}

/// One object member as written: where it starts (its key's opening quote), where its key
/// ends (after the closing quote) and where the member ends.
#[derive(Clone, Copy)]
struct Entry {
    start: usize,
    key_end: usize,
    end: usize,
}

struct Writer<'a> {
    out: &'a mut String,
    /// The members of every object being written, innermost last.
    entries: Vec<Entry>,
    /// A map key's text, as its `Serialize` gives it.
    key: String,
}

/// Whether a serde name is one of serde_json's private markers (a raw value, an arbitrary
/// precision number), which only the `Value` route understands.
fn private(name: &str) -> bool {
    name.starts_with("$serde_json::private")
}

impl Writer<'_> {
    fn integer(&mut self, magnitude: u64, negative: bool) -> Result<(), GiveUp> {
        if magnitude > MAX_SAFE_INTEGER {
            return Err(GiveUp);
        }
        if negative && magnitude > 0 {
            self.out.push('-');
        }
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        let mut n = magnitude;
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for &d in &digits[i..] {
            self.out.push(char::from(d));
        }
        Ok(())
    }

    /// Starts an object: returns where its members' records begin.
    fn open_object(&mut self) -> usize {
        self.out.push('{');
        self.entries.len()
    }

    /// Writes a member's key (plain ASCII only) and the colon; records where it starts.
    fn key(&mut self, base: usize, key: &str) -> Result<(), GiveUp> {
        let plain = key
            .bytes()
            .all(|b| b.is_ascii() && b >= 0x20 && b != b'"' && b != b'\\');
        if !plain {
            return Err(GiveUp);
        }
        if self.entries.len() > base {
            self.out.push(',');
        }
        let start = self.out.len();
        self.out.push('"');
        self.out.push_str(key);
        self.out.push('"');
        let key_end = self.out.len();
        self.out.push(':');
        self.entries.push(Entry {
            start,
            key_end,
            end: 0,
        });
        Ok(())
    }

    /// Marks the end of the member just written.
    fn end_member(&mut self) {
        let end = self.out.len();
        if let Some(e) = self.entries.last_mut() {
            e.end = end;
        }
    }

    /// Ends an object: its members sorted by key (ASCII, so byte order is UTF-16 order); a
    /// repeated key gives up (the `Value` route keeps the last one).
    fn close_object(&mut self, base: usize) -> Result<(), GiveUp> {
        let members = &self.entries[base..];
        // A key without its value (a `Serialize` that broke serde's order): not ours to write.
        if members.iter().any(|e| e.end <= e.key_end) {
            return Err(GiveUp);
        }
        // The key's text between its quotes (with them, "a" would sort after "a!").
        let key = |e: &Entry| &self.out.as_bytes()[e.start + 1..e.key_end - 1];
        let mut sorted = true;
        for pair in members.windows(2) {
            match key(&pair[0]).cmp(key(&pair[1])) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => return Err(GiveUp),
                std::cmp::Ordering::Greater => sorted = false,
            }
        }
        if !sorted {
            let mut order: Vec<Entry> = members.to_vec();
            order.sort_unstable_by(|a, b| key(a).cmp(key(b)));
            if order.windows(2).any(|p| key(&p[0]) == key(&p[1])) {
                return Err(GiveUp);
            }
            let start = members.first().map_or(self.out.len(), |e| e.start);
            let mut text = String::with_capacity(self.out.len() - start);
            for (i, e) in order.iter().enumerate() {
                if i > 0 {
                    text.push(',');
                }
                text.push_str(&self.out[e.start..e.end]);
            }
            self.out.truncate(start);
            self.out.push_str(&text);
        }
        self.entries.truncate(base);
        self.out.push('}');
        Ok(())
    }
}

impl<'a, 'b> ser::Serializer for &'a mut Writer<'b> {
    type Ok = ();
    type Error = GiveUp;
    type SerializeSeq = Seq<'a, 'b>;
    type SerializeTuple = Seq<'a, 'b>;
    type SerializeTupleStruct = Seq<'a, 'b>;
    type SerializeTupleVariant = Seq<'a, 'b>;
    type SerializeMap = Object<'a, 'b>;
    type SerializeStruct = Object<'a, 'b>;
    type SerializeStructVariant = Object<'a, 'b>;

    fn serialize_bool(self, v: bool) -> Result<(), GiveUp> {
        self.out.push_str(if v { "true" } else { "false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), GiveUp> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i16(self, v: i16) -> Result<(), GiveUp> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i32(self, v: i32) -> Result<(), GiveUp> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i64(self, v: i64) -> Result<(), GiveUp> {
        self.integer(v.unsigned_abs(), v < 0)
    }
    fn serialize_u8(self, v: u8) -> Result<(), GiveUp> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u16(self, v: u16) -> Result<(), GiveUp> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u32(self, v: u32) -> Result<(), GiveUp> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u64(self, v: u64) -> Result<(), GiveUp> {
        self.integer(v, false)
    }
    fn serialize_f32(self, _: f32) -> Result<(), GiveUp> {
        Err(GiveUp)
    }
    fn serialize_f64(self, _: f64) -> Result<(), GiveUp> {
        Err(GiveUp)
    }
    fn serialize_char(self, v: char) -> Result<(), GiveUp> {
        write_string(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), GiveUp> {
        write_string(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), GiveUp> {
        Err(GiveUp)
    }
    fn serialize_none(self) -> Result<(), GiveUp> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), GiveUp> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), GiveUp> {
        self.out.push_str("null");
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), GiveUp> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), GiveUp> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), GiveUp> {
        if private(name) {
            return Err(GiveUp);
        }
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), GiveUp> {
        let base = self.open_object();
        self.key(base, variant)?;
        value.serialize(&mut *self)?;
        self.end_member();
        self.close_object(base)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Seq<'a, 'b>, GiveUp> {
        self.out.push('[');
        Ok(Seq {
            w: self,
            first: true,
            variant: None,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a, 'b>, GiveUp> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, name: &'static str, len: usize) -> Result<Seq<'a, 'b>, GiveUp> {
        if private(name) {
            return Err(GiveUp);
        }
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Seq<'a, 'b>, GiveUp> {
        let base = self.open_object();
        self.key(base, variant)?;
        self.out.push('[');
        Ok(Seq {
            w: self,
            first: true,
            variant: Some(base),
        })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Object<'a, 'b>, GiveUp> {
        let base = self.open_object();
        Ok(Object {
            w: self,
            base,
            variant: None,
        })
    }
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Object<'a, 'b>, GiveUp> {
        if private(name) {
            return Err(GiveUp);
        }
        self.serialize_map(None)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Object<'a, 'b>, GiveUp> {
        let outer = self.open_object();
        self.key(outer, variant)?;
        let base = self.open_object();
        Ok(Object {
            w: self,
            base,
            variant: Some(outer),
        })
    }
}

/// An array being written (for a tuple variant, inside its one-member object).
pub(super) struct Seq<'a, 'b> {
    w: &'a mut Writer<'b>,
    first: bool,
    variant: Option<usize>,
}

impl Seq<'_, '_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GiveUp> {
        if !self.first {
            self.w.out.push(',');
        }
        self.first = false;
        value.serialize(&mut *self.w)
    }

    fn close(self) -> Result<(), GiveUp> {
        self.w.out.push(']');
        if let Some(outer) = self.variant {
            self.w.end_member();
            self.w.close_object(outer)?;
        }
        Ok(())
    }
}

/// serde's four array traits, each one element at a time.
macro_rules! array_traits {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Seq<'_, '_> {
            type Ok = ();
            type Error = GiveUp;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GiveUp> {
                self.element(value)
            }
            fn end(self) -> Result<(), GiveUp> {
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

/// An object being written (for a struct variant, inside its one-member object).
pub(super) struct Object<'a, 'b> {
    w: &'a mut Writer<'b>,
    base: usize,
    variant: Option<usize>,
}

impl Object<'_, '_> {
    fn member<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), GiveUp> {
        self.w.key(self.base, key)?;
        value.serialize(&mut *self.w)?;
        self.w.end_member();
        Ok(())
    }

    fn close(self) -> Result<(), GiveUp> {
        self.w.close_object(self.base)?;
        if let Some(outer) = self.variant {
            self.w.end_member();
            self.w.close_object(outer)?;
        }
        Ok(())
    }
}

impl ser::SerializeMap for Object<'_, '_> {
    type Ok = ();
    type Error = GiveUp;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), GiveUp> {
        let mut text = std::mem::take(&mut self.w.key);
        text.clear();
        let written = key
            .serialize(KeyText(&mut text))
            .and_then(|()| self.w.key(self.base, &text));
        self.w.key = text;
        written
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GiveUp> {
        value.serialize(&mut *self.w)?;
        self.w.end_member();
        Ok(())
    }
    fn end(self) -> Result<(), GiveUp> {
        self.close()
    }
}

/// serde's two struct traits, each one named field at a time.
macro_rules! struct_traits {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Object<'_, '_> {
            type Ok = ();
            type Error = GiveUp;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), GiveUp> {
                self.member(key, value)
            }
            fn end(self) -> Result<(), GiveUp> {
                self.close()
            }
        }
    )*};
}

struct_traits!(SerializeStruct, SerializeStructVariant);

/// Scalar `Serializer` methods that give up.
macro_rules! refuse_scalars {
    ($($method:ident: $ty:ty),*) => {$(
        fn $method(self, _: $ty) -> Result<(), GiveUp> {
            Err(GiveUp)
        }
    )*};
}

/// A map key's text: a string (or a newtype around one); any other key gives up.
struct KeyText<'k>(&'k mut String);

impl ser::Serializer for KeyText<'_> {
    type Ok = ();
    type Error = GiveUp;
    type SerializeSeq = ser::Impossible<(), GiveUp>;
    type SerializeTuple = ser::Impossible<(), GiveUp>;
    type SerializeTupleStruct = ser::Impossible<(), GiveUp>;
    type SerializeTupleVariant = ser::Impossible<(), GiveUp>;
    type SerializeMap = ser::Impossible<(), GiveUp>;
    type SerializeStruct = ser::Impossible<(), GiveUp>;
    type SerializeStructVariant = ser::Impossible<(), GiveUp>;

    fn serialize_str(self, v: &str) -> Result<(), GiveUp> {
        self.0.push_str(v);
        Ok(())
    }
    fn serialize_char(self, _: char) -> Result<(), GiveUp> {
        Err(GiveUp)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), GiveUp> {
        if private(name) {
            return Err(GiveUp);
        }
        value.serialize(self)
    }
    refuse_scalars!(
        serialize_bool: bool,
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64,
        serialize_f32: f32,
        serialize_f64: f64
    );
    fn serialize_bytes(self, _: &[u8]) -> Result<(), GiveUp> {
        Err(GiveUp)
    }
    fn serialize_none(self) -> Result<(), GiveUp> {
        Err(GiveUp)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), GiveUp> {
        Err(GiveUp)
    }
    fn serialize_unit(self) -> Result<(), GiveUp> {
        Err(GiveUp)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), GiveUp> {
        Err(GiveUp)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), GiveUp> {
        Err(GiveUp)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), GiveUp> {
        Err(GiveUp)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, GiveUp> {
        Err(GiveUp)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, GiveUp> {
        Err(GiveUp)
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, GiveUp> {
        Err(GiveUp)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, GiveUp> {
        Err(GiveUp)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, GiveUp> {
        Err(GiveUp)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, GiveUp> {
        Err(GiveUp)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, GiveUp> {
        Err(GiveUp)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn direct<T: Serialize + ?Sized>(value: &T) -> Option<String> {
        let mut out = String::new();
        write(&mut out, value).ok().map(|()| out)
    }

    /// What typed values hold is written directly; what only the `Value` route writes exactly
    /// gives up.
    #[test]
    fn writes_typed_values_directly_and_gives_up_on_the_rest() {
        #[derive(serde::Serialize)]
        struct Typed<'a> {
            zeta: Option<&'a str>,
            alpha: Vec<i64>,
            mid: std::collections::HashMap<&'a str, bool>,
        }
        let typed = Typed {
            zeta: Some("q\"\n"),
            alpha: vec![-3, 0, 9_007_199_254_740_991],
            mid: [("b", true), ("a", false)].into_iter().collect(),
        };
        assert_eq!(
            direct(&typed).unwrap(),
            r#"{"alpha":[-3,0,9007199254740991],"mid":{"a":false,"b":true},"zeta":"q\"\n"}"#
        );
        for refused in [
            json!(1.5),
            json!(9_007_199_254_740_992u64),
            json!({"é": 1}),
            json!({"a\"": 1}),
        ] {
            assert_eq!(direct(&refused), None, "{refused}");
        }
    }
}
