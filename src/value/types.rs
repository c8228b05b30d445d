//! cty types and their JSON type-constraint syntax (`"string"`, `["list","number"]`, ...).
//!
//! Owns [`Type`], parsing and writing type constraints (including the exact bytes cty puts in
//! a msgpack dynamic wrapper), and the small questions asked of types (friendly names, whether
//! `dynamic` occurs). Not: values, conversions between types, or capsule types (which have no
//! JSON form and never cross the plugin protocol).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ValueError;

/// A cty type, as providers declare attributes and as values are encoded.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Type {
    /// A UTF-8 string.
    String,
    /// An arbitrary-precision number.
    Number,
    /// A boolean.
    Bool,
    /// `DynamicPseudoType`: the concrete type travels with the value.
    Dynamic,
    /// A list of one element type.
    List(Box<Type>),
    /// A set of one element type.
    Set(Box<Type>),
    /// A map from strings to one element type.
    Map(Box<Type>),
    /// A fixed-length sequence of per-position types.
    Tuple(Vec<Type>),
    /// An object with named attributes. `optional` names attributes a conversion may leave
    /// out (type constraints only; the wire always carries every attribute).
    Object {
        /// Attribute types by name.
        attrs: BTreeMap<String, Type>,
        /// Names of optional attributes.
        optional: BTreeSet<String>,
    },
}

impl Type {
    /// An object type without optional attributes.
    pub(crate) fn object(attrs: BTreeMap<String, Type>) -> Type {
        Type::Object {
            attrs,
            optional: BTreeSet::new(),
        }
    }

    /// Parses a JSON type constraint (the bytes of a schema Attribute.type).
    pub(crate) fn from_json(bytes: &[u8]) -> Result<Type, ValueError> {
        let json: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|e| ValueError::new(format!("invalid type constraint JSON: {e}")))?;
        Type::from_json_value(&json)
    }

    /// Parses an already-parsed JSON type constraint.
    pub(crate) fn from_json_value(json: &serde_json::Value) -> Result<Type, ValueError> {
        use serde_json::Value as J;
        let bad = |what: &str| ValueError::new(format!("invalid type constraint: {what}"));
        match json {
            J::String(s) => match s.as_str() {
                "string" => Ok(Type::String),
                "number" => Ok(Type::Number),
                "bool" => Ok(Type::Bool),
                "dynamic" => Ok(Type::Dynamic),
                other => Err(bad(&format!("unknown primitive type {other:?}"))),
            },
            J::Array(items) => {
                let kind = items
                    .first()
                    .and_then(J::as_str)
                    .ok_or_else(|| bad("expected a type kind string"))?;
                match (kind, items.len()) {
                    ("list", 2) => Ok(Type::List(Box::new(Type::from_json_value(&items[1])?))),
                    ("set", 2) => Ok(Type::Set(Box::new(Type::from_json_value(&items[1])?))),
                    ("map", 2) => Ok(Type::Map(Box::new(Type::from_json_value(&items[1])?))),
                    ("tuple", 2) => {
                        let elems = items[1]
                            .as_array()
                            .ok_or_else(|| bad("tuple needs an array of types"))?;
                        Ok(Type::Tuple(
                            elems
                                .iter()
                                .map(Type::from_json_value)
                                .collect::<Result<_, _>>()?,
                        ))
                    }
                    ("object", 2 | 3) => {
                        let map = items[1]
                            .as_object()
                            .ok_or_else(|| bad("object needs a map of types"))?;
                        let mut attrs = BTreeMap::new();
                        for (name, t) in map {
                            attrs.insert(name.clone(), Type::from_json_value(t)?);
                        }
                        let mut optional = BTreeSet::new();
                        if let Some(opt) = items.get(2) {
                            let opt = opt
                                .as_array()
                                .ok_or_else(|| bad("optional attributes must be an array"))?;
                            for name in opt {
                                let name = name.as_str().ok_or_else(|| {
                                    bad("optional attribute names must be strings")
                                })?;
                                if !attrs.contains_key(name) {
                                    return Err(bad(&format!(
                                        "optional attribute {name:?} is not an attribute"
                                    )));
                                }
                                optional.insert(name.to_owned());
                            }
                        }
                        Ok(Type::Object { attrs, optional })
                    }
                    (other, n) => Err(bad(&format!(
                        "unsupported type kind {other:?} with {n} elements"
                    ))),
                }
            }
            other => Err(bad(&format!("unexpected JSON {other}"))),
        }
    }

    /// The JSON type constraint of this type (object attributes in sorted order).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        let tagged = |kind: &str, inner: J| J::Array(vec![J::String(kind.to_owned()), inner]);
        match self {
            Type::String => J::String("string".into()),
            Type::Number => J::String("number".into()),
            Type::Bool => J::String("bool".into()),
            Type::Dynamic => J::String("dynamic".into()),
            Type::List(t) => tagged("list", t.to_json()),
            Type::Set(t) => tagged("set", t.to_json()),
            Type::Map(t) => tagged("map", t.to_json()),
            Type::Tuple(ts) => tagged("tuple", J::Array(ts.iter().map(Type::to_json).collect())),
            Type::Object { attrs, optional } => {
                let map = attrs
                    .iter()
                    .map(|(k, t)| (k.clone(), t.to_json()))
                    .collect();
                let mut out = vec![J::String("object".into()), J::Object(map)];
                if !optional.is_empty() {
                    out.push(J::Array(
                        optional.iter().map(|k| J::String(k.clone())).collect(),
                    ));
                }
                J::Array(out)
            }
        }
    }

    /// The compact JSON bytes cty writes for this type (Go `encoding/json` string escaping),
    /// as carried in the first element of a msgpack dynamic wrapper.
    pub(crate) fn to_json_bytes(&self) -> Vec<u8> {
        let mut out = String::with_capacity(16);
        self.write_json(&mut out);
        out.into_bytes()
    }

    fn write_json(&self, out: &mut String) {
        match self {
            Type::String => out.push_str("\"string\""),
            Type::Number => out.push_str("\"number\""),
            Type::Bool => out.push_str("\"bool\""),
            Type::Dynamic => out.push_str("\"dynamic\""),
            Type::List(t) | Type::Set(t) | Type::Map(t) => {
                out.push_str(match self {
                    Type::List(_) => "[\"list\",",
                    Type::Set(_) => "[\"set\",",
                    _ => "[\"map\",",
                });
                t.write_json(out);
                out.push(']');
            }
            Type::Tuple(ts) => {
                out.push_str("[\"tuple\",[");
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    t.write_json(out);
                }
                out.push_str("]]");
            }
            Type::Object { attrs, optional } => {
                out.push_str("[\"object\",{");
                for (i, (name, t)) in attrs.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_go_json_string(out, name);
                    out.push(':');
                    t.write_json(out);
                }
                out.push('}');
                if !optional.is_empty() {
                    out.push_str(",[");
                    for (i, name) in optional.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        write_go_json_string(out, name);
                    }
                    out.push(']');
                }
                out.push(']');
            }
        }
    }

    /// A short human name: `string`, `map of string`, `list of object`, `tuple`.
    pub(crate) fn friendly_name(&self) -> String {
        match self {
            Type::String => "string".into(),
            Type::Number => "number".into(),
            Type::Bool => "bool".into(),
            Type::Dynamic => "dynamic".into(),
            Type::List(t) => format!("list of {}", t.friendly_name()),
            Type::Set(t) => format!("set of {}", t.friendly_name()),
            Type::Map(t) => format!("map of {}", t.friendly_name()),
            Type::Tuple(_) => "tuple".into(),
            Type::Object { .. } => "object".into(),
        }
    }

    /// Whether `dynamic` appears anywhere in this type (cty `HasDynamicTypes`).
    pub(crate) fn has_dynamic(&self) -> bool {
        match self {
            Type::Dynamic => true,
            Type::String | Type::Number | Type::Bool => false,
            Type::List(t) | Type::Set(t) | Type::Map(t) => t.has_dynamic(),
            Type::Tuple(ts) => ts.iter().any(Type::has_dynamic),
            Type::Object { attrs, .. } => attrs.values().any(Type::has_dynamic),
        }
    }
}

/// Writes `s` as a JSON string the way Go's `encoding/json` does (HTML-safe escaping).
fn write_go_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

impl Serialize for Type {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Type {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Type, D::Error> {
        let json = serde_json::Value::deserialize(deserializer)?;
        Type::from_json_value(&json).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip() {
        let cases = [
            r#""string""#,
            r#""dynamic""#,
            r#"["list","number"]"#,
            r#"["set",["map","bool"]]"#,
            r#"["tuple",["string",["list","dynamic"]]]"#,
            r#"["object",{"a":"string","b":["list","number"]}]"#,
            r#"["object",{"a":"string","b":"number"},["b"]]"#,
            r#"["object",{}]"#,
            r#"["tuple",[]]"#,
        ];
        for case in cases {
            let t = Type::from_json(case.as_bytes()).unwrap();
            assert_eq!(String::from_utf8(t.to_json_bytes()).unwrap(), case);
            assert_eq!(serde_json::to_string(&t.to_json()).unwrap(), case);
            let back: Type = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
            assert_eq!(back, t);
        }
    }

    #[test]
    fn object_keys_are_sorted() {
        let t = Type::from_json(br#"["object",{"b":"string","a":"number"}]"#).unwrap();
        assert_eq!(
            t.to_json_bytes(),
            br#"["object",{"a":"number","b":"string"}]"#
        );
    }

    #[test]
    fn go_escaping() {
        let t = Type::object([("a<b".to_owned(), Type::String)].into());
        assert_eq!(t.to_json_bytes(), br#"["object",{"a\u003cb":"string"}]"#);
    }

    #[test]
    fn bad_types() {
        for bad in [
            r#""strin""#,
            r#"["list"]"#,
            r#"["object",{"a":"string"},["b"]]"#,
            "3",
            "{",
            r#"["capsule","x"]"#,
        ] {
            let err = Type::from_json(bad.as_bytes()).unwrap_err();
            assert!(err.message.contains("type constraint"), "{bad}: {err}");
        }
    }

    #[test]
    fn names() {
        let t = Type::Map(Box::new(Type::String));
        assert_eq!(t.friendly_name(), "map of string");
        let t = Type::List(Box::new(Type::object(BTreeMap::new())));
        assert_eq!(t.friendly_name(), "list of object");
        assert!(Type::List(Box::new(Type::Dynamic)).has_dynamic());
        assert!(!Type::Set(Box::new(Type::String)).has_dynamic());
    }
}
