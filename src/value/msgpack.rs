//! The msgpack codec for DynamicValues, byte-compatible with cty/msgpack.
//!
//! Owns the wire rules of section 3.2 of the protocol notes: every object attribute present and
//! written in bytewise key order, null as `c0`, unknown as `d4 00 00`, integers in their most
//! compact form, exact non-integer floats as float64, every other number as decimal text, and a
//! `dynamic` slot as `[bin(type JSON), value]`. The decoder is as strict as cty: an object must
//! carry exactly its attributes, and the error names the missing and unexpected ones.
//!
//! Not: choosing the type (callers pass a schema's implied type), nor deciding what an empty
//! DynamicValue means (callers treat absent bytes as null before calling [`decode`]).

use std::collections::BTreeMap;

use rmp::Marker;

use super::number::{number_from_f64, parse_number, wire_number, WireNumber};
use super::{describe, quote, PathStep, Type, Value, ValueError};

/// Encodes `value` as a value of type `ty`.
///
/// A value at a `dynamic` slot that is not a [`Value::Dynamic`] gets the type cty would infer
/// for it (lists become tuples, maps objects); a wholly unknown one is a bare `d4 00 00` and a
/// null one a bare `c0`. Errors name the path of the first value that does not fit its type.
pub fn encode(value: &Value, ty: &Type) -> Result<Vec<u8>, ValueError> {
    let mut out = Vec::with_capacity(128);
    encode_into(&mut out, value, ty)?;
    Ok(out)
}

fn mismatch(ty: &Type, value: &Value) -> ValueError {
    ValueError::new(format!(
        "expected {}, got {}",
        ty.friendly_name(),
        describe(value)
    ))
}

// Long because it has one arm per type, the encoding table in one place.
fn encode_into(out: &mut Vec<u8>, value: &Value, ty: &Type) -> Result<(), ValueError> {
    match value {
        Value::Null => {
            rmp::encode::write_nil(out).expect(VEC_WRITE);
            return Ok(());
        }
        Value::Unknown => {
            out.extend_from_slice(&UNKNOWN);
            return Ok(());
        }
        Value::Dynamic {
            ty: dty,
            value: inner,
        } => {
            if *ty != Type::Dynamic || *dty == Type::Dynamic {
                return encode_into(out, inner, ty);
            }
            write_array_len(out, 2)?;
            write_bin(out, &dty.to_json_bytes())?;
            return encode_into(out, inner, dty);
        }
        _ => {}
    }
    match (ty, value) {
        (Type::Dynamic, v) => {
            let concrete = v.infer_type();
            write_array_len(out, 2)?;
            write_bin(out, &concrete.to_json_bytes())?;
            encode_into(out, v, &concrete)
        }
        (Type::String, Value::String(s)) => {
            write_str(out, s)?;
            Ok(())
        }
        (Type::Number, Value::Number(n)) => {
            match wire_number(n) {
                WireNumber::Int(i) => write_int(out, i),
                WireNumber::Float(f) => write_f64(out, f),
                WireNumber::Text(t) => write_str(out, &t)?,
            }
            Ok(())
        }
        (Type::Bool, Value::Bool(b)) => {
            rmp::encode::write_bool(out, *b).expect(VEC_WRITE);
            Ok(())
        }
        (Type::List(elem) | Type::Set(elem), Value::List(items)) => {
            write_array_len(out, items.len())?;
            for (i, item) in items.iter().enumerate() {
                encode_into(out, item, elem).map_err(|e| e.within(PathStep::Index(i as u64)))?;
            }
            Ok(())
        }
        (Type::Tuple(elems), Value::List(items)) => {
            if elems.len() != items.len() {
                return Err(ValueError::new(format!(
                    "a tuple of {} elements is required ({} given)",
                    elems.len(),
                    items.len()
                )));
            }
            write_array_len(out, items.len())?;
            for (i, (item, t)) in items.iter().zip(elems).enumerate() {
                encode_into(out, item, t).map_err(|e| e.within(PathStep::Index(i as u64)))?;
            }
            Ok(())
        }
        (Type::Map(elem), Value::Map(map)) => {
            write_map_len(out, map.len())?;
            for (k, v) in map {
                write_str(out, k)?;
                encode_into(out, v, elem).map_err(|e| e.within(PathStep::Key(k.clone())))?;
            }
            Ok(())
        }
        (Type::Object { attrs, .. }, Value::Map(map)) => {
            // Both maps iterate in the same (bytewise) order, so one pass checks the shape.
            if map.len() != attrs.len() || !map.keys().eq(attrs.keys()) {
                return Err(object_shape_error(attrs, map.keys(), map.len()));
            }
            write_map_len(out, attrs.len())?;
            for ((k, t), v) in attrs.iter().zip(map.values()) {
                write_str(out, k)?;
                encode_into(out, v, t).map_err(|e| e.within(PathStep::Attr(k.clone())))?;
            }
            Ok(())
        }
        (ty, v) => Err(mismatch(ty, v)),
    }
}

/// "an object with 3 attributes is required (2 given); missing "id"; unexpected "idd"".
fn object_shape_error<'a>(
    attrs: &BTreeMap<String, Type>,
    given: impl Iterator<Item = &'a String> + Clone,
    given_len: usize,
) -> ValueError {
    let missing: Vec<String> = attrs
        .keys()
        .filter(|k| !given.clone().any(|g| g == *k))
        .map(|k| quote(k))
        .collect();
    let extra: Vec<String> = given
        .filter(|g| !attrs.contains_key(*g))
        .map(|g| quote(g))
        .collect();
    let mut msg = format!(
        "an object with {} attributes is required ({} given)",
        attrs.len(),
        given_len
    );
    if !missing.is_empty() {
        msg.push_str(&format!("; missing {}", missing.join(", ")));
    }
    if !extra.is_empty() {
        msg.push_str(&format!("; unexpected {}", extra.join(", ")));
    }
    ValueError::new(msg)
}

// The bytes of each item are rmp's (DESIGN §2): it picks the most compact form, as cty's
// encoder does. Writing into a `Vec` cannot fail, so its errors are unreachable here.
const VEC_WRITE: &str = "writing msgpack into a Vec cannot fail";

/// cty's unknown value: a fixext1 of type 0 with a zero byte.
const UNKNOWN: [u8; 3] = [0xd4, 0, 0];

fn write_int(out: &mut Vec<u8>, n: i64) {
    rmp::encode::write_sint(out, n).expect(VEC_WRITE);
}

fn write_f64(out: &mut Vec<u8>, f: f64) {
    rmp::encode::write_f64(out, f).expect(VEC_WRITE);
}

/// A length as msgpack carries it (at most 32 bits), or the error naming what is too long.
fn wire_len(len: usize, what: &str) -> Result<u32, ValueError> {
    u32::try_from(len)
        .map_err(|_| ValueError::new(format!("{what} of {len} is too long for msgpack")))
}

fn write_str(out: &mut Vec<u8>, s: &str) -> Result<(), ValueError> {
    rmp::encode::write_str_len(out, wire_len(s.len(), "a string")?).expect(VEC_WRITE);
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn write_bin(out: &mut Vec<u8>, b: &[u8]) -> Result<(), ValueError> {
    rmp::encode::write_bin_len(out, wire_len(b.len(), "a type")?).expect(VEC_WRITE);
    out.extend_from_slice(b);
    Ok(())
}

fn write_array_len(out: &mut Vec<u8>, len: usize) -> Result<(), ValueError> {
    rmp::encode::write_array_len(out, wire_len(len, "a collection")?).expect(VEC_WRITE);
    Ok(())
}

fn write_map_len(out: &mut Vec<u8>, len: usize) -> Result<(), ValueError> {
    rmp::encode::write_map_len(out, wire_len(len, "a map or object")?).expect(VEC_WRITE);
    Ok(())
}

/// Decodes msgpack `bytes` as a value of type `ty`.
///
/// nil is null for any type; every ext (plain `d4 00 00`, refined ext 12, anything else) is
/// unknown; numbers may arrive as any msgpack int, float32, float64 or decimal string. A
/// `dynamic` slot decodes to [`Value::Dynamic`] with the type the provider sent. Objects must
/// carry exactly their attributes. Trailing bytes are an error.
pub fn decode(bytes: &[u8], ty: &Type) -> Result<Value, ValueError> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let v = r.value(ty)?;
    if r.pos != bytes.len() {
        return Err(ValueError::new(format!(
            "{} unexpected bytes after the value",
            bytes.len() - r.pos
        )));
    }
    Ok(v)
}

/// Nesting depth at which skipping an unexpected value gives up (guards the stack).
const MAX_SKIP_DEPTH: usize = 256;

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn eof() -> ValueError {
        ValueError::new("unexpected end of msgpack data")
    }

    fn peek(&self) -> Result<Marker, ValueError> {
        let byte = self.buf.get(self.pos).copied().ok_or_else(Self::eof)?;
        Ok(Marker::from_u8(byte))
    }

    fn byte(&mut self) -> Result<u8, ValueError> {
        let b = self.buf.get(self.pos).copied().ok_or_else(Self::eof)?;
        self.pos += 1;
        Ok(b)
    }

    fn marker(&mut self) -> Result<Marker, ValueError> {
        Ok(Marker::from_u8(self.byte()?))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ValueError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(Self::eof)?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn be<const N: usize>(&mut self) -> Result<[u8; N], ValueError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn len8(&mut self) -> Result<usize, ValueError> {
        Ok(usize::from(self.byte()?))
    }

    fn len16(&mut self) -> Result<usize, ValueError> {
        Ok(usize::from(u16::from_be_bytes(self.be()?)))
    }

    fn len32(&mut self) -> Result<usize, ValueError> {
        Ok(u32::from_be_bytes(self.be()?) as usize)
    }

    /// The payload length of an ext at `marker`, or `None` when it is not an ext.
    fn ext_len(&mut self, marker: Marker) -> Result<Option<usize>, ValueError> {
        Ok(Some(match marker {
            Marker::FixExt1 => 1,
            Marker::FixExt2 => 2,
            Marker::FixExt4 => 4,
            Marker::FixExt8 => 8,
            Marker::FixExt16 => 16,
            Marker::Ext8 => self.len8()?,
            Marker::Ext16 => self.len16()?,
            Marker::Ext32 => self.len32()?,
            _ => return Ok(None),
        }))
    }

    /// If the next item is an ext, consumes it (type byte and payload) and returns true.
    fn skip_ext(&mut self) -> Result<bool, ValueError> {
        let marker = self.peek()?;
        if !is_ext(marker) {
            return Ok(false);
        }
        self.pos += 1;
        let len = self.ext_len(marker)?.unwrap_or(0);
        self.take(1 + len)?;
        Ok(true)
    }

    /// The length of a str or bin at `marker`, or `None` when it is neither.
    fn str_len(&mut self, marker: Marker) -> Option<Result<usize, ValueError>> {
        Some(match marker {
            Marker::FixStr(n) => Ok(usize::from(n)),
            Marker::Str8 | Marker::Bin8 => self.len8(),
            Marker::Str16 | Marker::Bin16 => self.len16(),
            Marker::Str32 | Marker::Bin32 => self.len32(),
            _ => return None,
        })
    }

    /// A str (or bin, as Go's msgpack accepts both) as raw bytes.
    fn bytes(&mut self, what: &str) -> Result<&'a [u8], ValueError> {
        let marker = self.marker()?;
        match self.str_len(marker) {
            Some(len) => {
                let len = len?;
                self.take(len)
            }
            None => Err(expected(what, marker)),
        }
    }

    fn string(&mut self, what: &str) -> Result<String, ValueError> {
        let b = self.bytes(what)?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| ValueError::new(format!("{what} is not valid UTF-8")))
    }

    fn array_len(&mut self, what: &str) -> Result<usize, ValueError> {
        match self.marker()? {
            Marker::FixArray(n) => Ok(usize::from(n)),
            Marker::Array16 => self.len16(),
            Marker::Array32 => self.len32(),
            m => Err(expected(what, m)),
        }
    }

    fn map_len(&mut self, what: &str) -> Result<usize, ValueError> {
        match self.marker()? {
            Marker::FixMap(n) => Ok(usize::from(n)),
            Marker::Map16 => self.len16(),
            Marker::Map32 => self.len32(),
            m => Err(expected(what, m)),
        }
    }

    fn number(&mut self) -> Result<serde_json::Number, ValueError> {
        let marker = self.marker()?;
        let n = match marker {
            Marker::FixPos(n) => serde_json::Number::from(n),
            Marker::FixNeg(n) => serde_json::Number::from(n),
            Marker::U8 => serde_json::Number::from(self.byte()?),
            Marker::U16 => serde_json::Number::from(u16::from_be_bytes(self.be()?)),
            Marker::U32 => serde_json::Number::from(u32::from_be_bytes(self.be()?)),
            Marker::U64 => serde_json::Number::from(u64::from_be_bytes(self.be()?)),
            Marker::I8 => serde_json::Number::from(i8::from_be_bytes(self.be()?)),
            Marker::I16 => serde_json::Number::from(i16::from_be_bytes(self.be()?)),
            Marker::I32 => serde_json::Number::from(i32::from_be_bytes(self.be()?)),
            Marker::I64 => serde_json::Number::from(i64::from_be_bytes(self.be()?)),
            Marker::F32 | Marker::F64 => {
                let x = if marker == Marker::F32 {
                    f64::from(f32::from_be_bytes(self.be()?))
                } else {
                    f64::from_be_bytes(self.be()?)
                };
                number_from_f64(x)
                    .ok_or_else(|| ValueError::new(format!("unsupported number {x}")))?
            }
            Marker::FixStr(_)
            | Marker::Str8
            | Marker::Str16
            | Marker::Str32
            | Marker::Bin8
            | Marker::Bin16
            | Marker::Bin32 => {
                // Back to the marker: the text is read as a whole string item.
                self.pos -= 1;
                let text = self.string("number")?;
                parse_number(&text).ok_or_else(|| {
                    ValueError::new(format!("invalid number text {}", quote(&text)))
                })?
            }
            m => return Err(expected("number", m)),
        };
        Ok(n)
    }

    // Long because it has one arm per type, the decoding table in one place.
    fn value(&mut self, ty: &Type) -> Result<Value, ValueError> {
        if self.peek()? == Marker::Null {
            self.pos += 1;
            return Ok(Value::Null);
        }
        if self.skip_ext()? {
            return Ok(Value::Unknown);
        }
        match ty {
            Type::Dynamic => {
                if self.array_len("dynamic value wrapper [type, value]")? != 2 {
                    return Err(ValueError::new(
                        "dynamic value wrapper must be a 2-element array [type, value]",
                    ));
                }
                let type_json = self.bytes("type JSON of dynamic value")?;
                let concrete = Type::from_json(type_json)?;
                let value = self.value(&concrete)?;
                Ok(Value::Dynamic {
                    ty: concrete,
                    value: Box::new(value),
                })
            }
            Type::String => Ok(Value::String(self.string("string")?)),
            Type::Number => Ok(Value::Number(self.number()?)),
            Type::Bool => match self.marker()? {
                Marker::False => Ok(Value::Bool(false)),
                Marker::True => Ok(Value::Bool(true)),
                m => Err(expected("bool", m)),
            },
            Type::List(elem) | Type::Set(elem) => {
                let n = self.array_len(&ty.friendly_name())?;
                let mut items = Vec::with_capacity(n.min(4096));
                for i in 0..n {
                    items.push(
                        self.value(elem)
                            .map_err(|e| e.within(PathStep::Index(i as u64)))?,
                    );
                }
                Ok(Value::List(items))
            }
            Type::Tuple(elems) => {
                let n = self.array_len("tuple")?;
                if n != elems.len() {
                    return Err(ValueError::new(format!(
                        "a tuple of {} elements is required ({n} given)",
                        elems.len()
                    )));
                }
                let mut items = Vec::with_capacity(n);
                for (i, t) in elems.iter().enumerate() {
                    items.push(
                        self.value(t)
                            .map_err(|e| e.within(PathStep::Index(i as u64)))?,
                    );
                }
                Ok(Value::List(items))
            }
            Type::Map(elem) => {
                let n = self.map_len(&ty.friendly_name())?;
                let mut map = BTreeMap::new();
                for _ in 0..n {
                    let k = self.string("map key")?;
                    let v = self
                        .value(elem)
                        .map_err(|e| e.within(PathStep::Key(k.clone())))?;
                    if map.insert(k.clone(), v).is_some() {
                        return Err(ValueError::new(format!("duplicate map key {}", quote(&k))));
                    }
                }
                Ok(Value::Map(map))
            }
            Type::Object { attrs, .. } => {
                let n = self.map_len("object")?;
                let mut map = BTreeMap::new();
                let mut unexpected = Vec::new();
                for _ in 0..n {
                    let k = self.string("attribute name")?;
                    match attrs.get(&k) {
                        Some(t) => {
                            let v = self
                                .value(t)
                                .map_err(|e| e.within(PathStep::Attr(k.clone())))?;
                            if map.insert(k.clone(), v).is_some() {
                                return Err(ValueError::new(format!(
                                    "duplicate attribute {}",
                                    quote(&k)
                                )));
                            }
                        }
                        None => {
                            self.skip(0)?;
                            unexpected.push(k);
                        }
                    }
                }
                if n != attrs.len() || !unexpected.is_empty() {
                    let given: Vec<String> = map.into_keys().chain(unexpected).collect();
                    return Err(object_shape_error(attrs, given.iter(), n));
                }
                Ok(Value::Map(map))
            }
        }
    }

    /// Skips one msgpack item of any kind.
    fn skip(&mut self, depth: usize) -> Result<(), ValueError> {
        if depth > MAX_SKIP_DEPTH {
            return Err(ValueError::new("msgpack data nested too deeply"));
        }
        if self.skip_ext()? {
            return Ok(());
        }
        let (scalar, items) = match self.marker()? {
            Marker::FixPos(_) | Marker::FixNeg(_) | Marker::Null | Marker::True | Marker::False => {
                (0, 0)
            }
            Marker::U8 | Marker::I8 => (1, 0),
            Marker::U16 | Marker::I16 => (2, 0),
            Marker::U32 | Marker::I32 | Marker::F32 => (4, 0),
            Marker::U64 | Marker::I64 | Marker::F64 => (8, 0),
            Marker::FixArray(n) => (0, usize::from(n)),
            Marker::Array16 => (0, self.len16()?),
            Marker::Array32 => (0, self.len32()?),
            Marker::FixMap(n) => (0, 2 * usize::from(n)),
            Marker::Map16 => (0, 2 * self.len16()?),
            Marker::Map32 => (0, 2 * self.len32()?),
            m => match self.str_len(m) {
                Some(len) => (len?, 0),
                None => {
                    return Err(ValueError::new(format!(
                        "invalid msgpack marker 0x{:02x}",
                        m.to_u8()
                    )))
                }
            },
        };
        self.take(scalar)?;
        for _ in 0..items {
            self.skip(depth + 1)?;
        }
        Ok(())
    }
}

fn is_ext(m: Marker) -> bool {
    matches!(
        m,
        Marker::FixExt1
            | Marker::FixExt2
            | Marker::FixExt4
            | Marker::FixExt8
            | Marker::FixExt16
            | Marker::Ext8
            | Marker::Ext16
            | Marker::Ext32
    )
}

/// "expected WHAT, got a map".
fn expected(what: &str, got: Marker) -> ValueError {
    ValueError::new(format!("expected {what}, got {}", marker_name(got)))
}

fn marker_name(m: Marker) -> String {
    match m {
        Marker::FixPos(_)
        | Marker::FixNeg(_)
        | Marker::U8
        | Marker::U16
        | Marker::U32
        | Marker::U64
        | Marker::I8
        | Marker::I16
        | Marker::I32
        | Marker::I64 => "an integer".into(),
        Marker::F32 | Marker::F64 => "a float".into(),
        Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => "a string".into(),
        Marker::Bin8 | Marker::Bin16 | Marker::Bin32 => "binary data".into(),
        Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => "an array".into(),
        Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => "a map".into(),
        Marker::Null => "nil".into(),
        Marker::True | Marker::False => "a bool".into(),
        m => format!("msgpack marker 0x{:02x}", m.to_u8()),
    }
}

#[cfg(test)]
mod tests;
