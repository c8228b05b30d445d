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
            out.push(0xc0);
            return Ok(());
        }
        Value::Unknown => {
            out.extend_from_slice(&[0xd4, 0, 0]);
            return Ok(());
        }
        Value::Dynamic {
            ty: dty,
            value: inner,
        } => {
            if *ty != Type::Dynamic || *dty == Type::Dynamic {
                return encode_into(out, inner, ty);
            }
            write_array_len(out, 2);
            write_bin(out, &dty.to_json_bytes());
            return encode_into(out, inner, dty);
        }
        _ => {}
    }
    match (ty, value) {
        (Type::Dynamic, v) => {
            let concrete = v.infer_type();
            write_array_len(out, 2);
            write_bin(out, &concrete.to_json_bytes());
            encode_into(out, v, &concrete)
        }
        (Type::String, Value::String(s)) => {
            write_str(out, s);
            Ok(())
        }
        (Type::Number, Value::Number(n)) => {
            match wire_number(n) {
                WireNumber::Int(i) => write_int(out, i),
                WireNumber::Float(f) => {
                    out.push(0xcb);
                    out.extend_from_slice(&f.to_be_bytes());
                }
                WireNumber::Text(t) => write_str(out, &t),
            }
            Ok(())
        }
        (Type::Bool, Value::Bool(b)) => {
            out.push(if *b { 0xc3 } else { 0xc2 });
            Ok(())
        }
        (Type::List(elem) | Type::Set(elem), Value::List(items)) => {
            write_array_len(out, items.len());
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
            write_array_len(out, items.len());
            for (i, (item, t)) in items.iter().zip(elems).enumerate() {
                encode_into(out, item, t).map_err(|e| e.within(PathStep::Index(i as u64)))?;
            }
            Ok(())
        }
        (Type::Map(elem), Value::Map(map)) => {
            write_map_len(out, map.len());
            for (k, v) in map {
                write_str(out, k);
                encode_into(out, v, elem).map_err(|e| e.within(PathStep::Key(k.clone())))?;
            }
            Ok(())
        }
        (Type::Object { attrs, .. }, Value::Map(map)) => {
            // Both maps iterate in the same (bytewise) order, so one pass checks the shape.
            if map.len() != attrs.len() || !map.keys().eq(attrs.keys()) {
                return Err(object_shape_error(attrs, map.keys(), map.len()));
            }
            write_map_len(out, attrs.len());
            for ((k, t), v) in attrs.iter().zip(map.values()) {
                write_str(out, k);
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

fn write_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        let u = n as u64;
        if u <= 0x7f {
            out.push(u as u8);
        } else if u <= 0xff {
            out.extend_from_slice(&[0xcc, u as u8]);
        } else if u <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(u as u16).to_be_bytes());
        } else if u <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(u as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&u.to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as u8);
    } else if n >= i64::from(i8::MIN) {
        out.extend_from_slice(&[0xd0, n as u8]);
    } else if n >= i64::from(i16::MIN) {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= i64::from(i32::MIN) {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn write_len(
    out: &mut Vec<u8>,
    len: usize,
    fix: Option<(u8, usize)>,
    m8: Option<u8>,
    m16: u8,
    m32: u8,
) {
    if let Some((base, max)) = fix {
        if len < max {
            out.push(base | len as u8);
            return;
        }
    }
    if let Some(m8) = m8 {
        if len <= 0xff {
            out.extend_from_slice(&[m8, len as u8]);
            return;
        }
    }
    if len <= 0xffff {
        out.push(m16);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(m32);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    write_len(out, s.len(), Some((0xa0, 32)), Some(0xd9), 0xda, 0xdb);
    out.extend_from_slice(s.as_bytes());
}

fn write_bin(out: &mut Vec<u8>, b: &[u8]) {
    write_len(out, b.len(), None, Some(0xc4), 0xc5, 0xc6);
    out.extend_from_slice(b);
}

fn write_array_len(out: &mut Vec<u8>, len: usize) {
    write_len(out, len, Some((0x90, 16)), None, 0xdc, 0xdd);
}

fn write_map_len(out: &mut Vec<u8>, len: usize) {
    write_len(out, len, Some((0x80, 16)), None, 0xde, 0xdf);
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

    fn peek(&self) -> Result<u8, ValueError> {
        self.buf.get(self.pos).copied().ok_or_else(Self::eof)
    }

    fn byte(&mut self) -> Result<u8, ValueError> {
        let b = self.peek()?;
        self.pos += 1;
        Ok(b)
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

    /// The length of an ext at the current marker, or `None` when it is not an ext.
    fn ext_len(&mut self, marker: u8) -> Result<Option<usize>, ValueError> {
        Ok(Some(match marker {
            0xd4 => 1,
            0xd5 => 2,
            0xd6 => 4,
            0xd7 => 8,
            0xd8 => 16,
            0xc7 => self.len8()?,
            0xc8 => self.len16()?,
            0xc9 => self.len32()?,
            _ => return Ok(None),
        }))
    }

    /// If the next item is an ext, consumes it (type byte and payload) and returns true.
    fn skip_ext(&mut self) -> Result<bool, ValueError> {
        let marker = self.peek()?;
        if !matches!(marker, 0xd4..=0xd8 | 0xc7..=0xc9) {
            return Ok(false);
        }
        self.pos += 1;
        let len = self.ext_len(marker)?.unwrap_or(0);
        self.take(1 + len)?;
        Ok(true)
    }

    fn str_len(&mut self, marker: u8) -> Option<Result<usize, ValueError>> {
        Some(match marker {
            0xa0..=0xbf => Ok(usize::from(marker & 0x1f)),
            0xd9 | 0xc4 => self.len8(),
            0xda | 0xc5 => self.len16(),
            0xdb | 0xc6 => self.len32(),
            _ => return None,
        })
    }

    /// A str (or bin, as Go's msgpack accepts both) as raw bytes.
    fn bytes(&mut self, what: &str) -> Result<&'a [u8], ValueError> {
        let marker = self.byte()?;
        match self.str_len(marker) {
            Some(len) => {
                let len = len?;
                self.take(len)
            }
            None => Err(ValueError::new(format!(
                "expected {what}, got {}",
                marker_name(marker)
            ))),
        }
    }

    fn string(&mut self, what: &str) -> Result<String, ValueError> {
        let b = self.bytes(what)?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| ValueError::new(format!("{what} is not valid UTF-8")))
    }

    fn array_len(&mut self, what: &str) -> Result<usize, ValueError> {
        let marker = self.byte()?;
        match marker {
            0x90..=0x9f => Ok(usize::from(marker & 0x0f)),
            0xdc => self.len16(),
            0xdd => self.len32(),
            _ => Err(ValueError::new(format!(
                "expected {what}, got {}",
                marker_name(marker)
            ))),
        }
    }

    fn map_len(&mut self, what: &str) -> Result<usize, ValueError> {
        let marker = self.byte()?;
        match marker {
            0x80..=0x8f => Ok(usize::from(marker & 0x0f)),
            0xde => self.len16(),
            0xdf => self.len32(),
            _ => Err(ValueError::new(format!(
                "expected {what}, got {}",
                marker_name(marker)
            ))),
        }
    }

    fn number(&mut self) -> Result<serde_json::Number, ValueError> {
        let marker = self.byte()?;
        let n = match marker {
            0x00..=0x7f => serde_json::Number::from(marker),
            0xe0..=0xff => serde_json::Number::from(marker as i8),
            0xcc => serde_json::Number::from(self.byte()?),
            0xcd => serde_json::Number::from(u16::from_be_bytes(self.be()?)),
            0xce => serde_json::Number::from(u32::from_be_bytes(self.be()?)),
            0xcf => serde_json::Number::from(u64::from_be_bytes(self.be()?)),
            0xd0 => serde_json::Number::from(self.byte()? as i8),
            0xd1 => serde_json::Number::from(i16::from_be_bytes(self.be()?)),
            0xd2 => serde_json::Number::from(i32::from_be_bytes(self.be()?)),
            0xd3 => serde_json::Number::from(i64::from_be_bytes(self.be()?)),
            0xca | 0xcb => {
                let x = if marker == 0xca {
                    f64::from(f32::from_be_bytes(self.be()?))
                } else {
                    f64::from_be_bytes(self.be()?)
                };
                number_from_f64(x)
                    .ok_or_else(|| ValueError::new(format!("unsupported number {x}")))?
            }
            m if self.str_len(m).is_some() => {
                self.pos -= 1;
                let text = self.string("number")?;
                parse_number(&text).ok_or_else(|| {
                    ValueError::new(format!("invalid number text {}", quote(&text)))
                })?
            }
            m => {
                return Err(ValueError::new(format!(
                    "expected number, got {}",
                    marker_name(m)
                )))
            }
        };
        Ok(n)
    }

    // Long because it has one arm per type, the decoding table in one place.
    fn value(&mut self, ty: &Type) -> Result<Value, ValueError> {
        let marker = self.peek()?;
        if marker == 0xc0 {
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
            Type::Bool => match self.byte()? {
                0xc2 => Ok(Value::Bool(false)),
                0xc3 => Ok(Value::Bool(true)),
                m => Err(ValueError::new(format!(
                    "expected bool, got {}",
                    marker_name(m)
                ))),
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
        let marker = self.byte()?;
        let (scalar, items) = match marker {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => (0, 0),
            0xcc | 0xd0 => (1, 0),
            0xcd | 0xd1 => (2, 0),
            0xce | 0xd2 | 0xca => (4, 0),
            0xcf | 0xd3 | 0xcb => (8, 0),
            0x90..=0x9f => (0, usize::from(marker & 0x0f)),
            0xdc => (0, self.len16()?),
            0xdd => (0, self.len32()?),
            0x80..=0x8f => (0, 2 * usize::from(marker & 0x0f)),
            0xde => (0, 2 * self.len16()?),
            0xdf => (0, 2 * self.len32()?),
            m => match self.str_len(m) {
                Some(len) => (len?, 0),
                None => return Err(ValueError::new(format!("invalid msgpack marker 0x{m:02x}"))),
            },
        };
        self.take(scalar)?;
        for _ in 0..items {
            self.skip(depth + 1)?;
        }
        Ok(())
    }
}

fn marker_name(m: u8) -> String {
    match m {
        0x00..=0x7f | 0xe0..=0xff | 0xcc..=0xcf | 0xd0..=0xd3 => "an integer".into(),
        0xca | 0xcb => "a float".into(),
        0xa0..=0xbf | 0xd9..=0xdb => "a string".into(),
        0xc4..=0xc6 => "binary data".into(),
        0x90..=0x9f | 0xdc | 0xdd => "an array".into(),
        0x80..=0x8f | 0xde | 0xdf => "a map".into(),
        0xc0 => "nil".into(),
        0xc2 | 0xc3 => "a bool".into(),
        m => format!("msgpack marker 0x{m:02x}"),
    }
}

#[cfg(test)]
mod tests;
