//! JSON forms of values: cty/json for the state file, and plain JSON for Nix and display.
//!
//! Owns two encodings. The *state* form ([`to_state_json`], [`from_state_json`]) follows
//! cty/json exactly: it is typed, a `dynamic` slot becomes `{"value":V,"type":T}`, unknown
//! values cannot be written, and reading is lenient where cty is (missing object attributes are
//! null, strings are accepted for numbers and bools). The *plain* form ([`to_plain_json`],
//! [`from_plain_json`]) is untyped JSON for the Nix ledger and for display: dynamic wrappers are
//! dropped and an unknown value is an error rather than a silent `null`.
//!
//! Not: the state file's envelope (resources, private blobs, versions), nor IR leaf markers such
//! as `__ref` (the caller decides those through [`from_plain_json_with`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value as J};

use super::number::{canonicalize, parse_number};
use super::{describe, quote, untyped_step, PathStep, Type, Value, ValueError};

/// Writes `value` of type `ty` as cty/json would (the `attributes` of a state file object).
pub fn to_state_json(value: &Value, ty: &Type) -> Result<J, ValueError> {
    match value {
        Value::Null => return Ok(J::Null),
        Value::Unknown => return Err(ValueError::new("value is not known, so it cannot be saved")),
        Value::Dynamic {
            ty: dty,
            value: inner,
        } => {
            if *ty != Type::Dynamic || *dty == Type::Dynamic {
                return to_state_json(inner, ty);
            }
            return Ok(dynamic_json(to_state_json(inner, dty)?, dty));
        }
        _ => {}
    }
    let mismatch = || {
        ValueError::new(format!(
            "expected {}, got {}",
            ty.friendly_name(),
            describe(value)
        ))
    };
    match (ty, value) {
        (Type::Dynamic, v) => {
            let concrete = v.infer_type();
            Ok(dynamic_json(to_state_json(v, &concrete)?, &concrete))
        }
        (Type::String, Value::String(s)) => Ok(J::String(s.clone())),
        (Type::Number, Value::Number(n)) => {
            Ok(J::Number(canonicalize(n).unwrap_or_else(|| n.clone())))
        }
        (Type::Bool, Value::Bool(b)) => Ok(J::Bool(*b)),
        (Type::List(elem) | Type::Set(elem), Value::List(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| to_state_json(v, elem).map_err(|e| e.within(PathStep::Index(i as u64))))
            .collect::<Result<_, _>>()
            .map(J::Array),
        (Type::Tuple(elems), Value::List(items)) if elems.len() == items.len() => items
            .iter()
            .zip(elems)
            .enumerate()
            .map(|(i, (v, t))| to_state_json(v, t).map_err(|e| e.within(PathStep::Index(i as u64))))
            .collect::<Result<_, _>>()
            .map(J::Array),
        (Type::Map(elem), Value::Map(map)) => {
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map {
                out.insert(
                    k.clone(),
                    to_state_json(v, elem).map_err(|e| e.within(PathStep::Key(k.clone())))?,
                );
            }
            Ok(J::Object(out))
        }
        (Type::Object { attrs, .. }, Value::Map(map)) => {
            if let Some(extra) = map.keys().find(|k| !attrs.contains_key(*k)) {
                return Err(ValueError::new(format!(
                    "unsupported attribute {}",
                    quote(extra)
                )));
            }
            let mut out = Map::with_capacity(attrs.len());
            for (k, t) in attrs {
                let v = map
                    .get(k)
                    .ok_or_else(|| ValueError::new(format!("missing attribute {}", quote(k))))?;
                out.insert(
                    k.clone(),
                    to_state_json(v, t).map_err(|e| e.within(PathStep::Attr(k.clone())))?,
                );
            }
            Ok(J::Object(out))
        }
        _ => Err(mismatch()),
    }
}

fn dynamic_json(value: J, ty: &Type) -> J {
    let mut out = Map::with_capacity(2);
    out.insert("value".into(), value);
    out.insert("type".into(), ty.to_json());
    J::Object(out)
}

/// Reads cty/json of type `ty` (as stored in a state file, or a provider's JSON DynamicValue).
// Long because it has one arm per target type, the decoding table in one place.
pub fn from_state_json(json: &J, ty: &Type) -> Result<Value, ValueError> {
    if json.is_null() {
        return Ok(Value::Null);
    }
    let mismatch = || {
        ValueError::new(format!(
            "expected {}, got JSON {}",
            ty.friendly_name(),
            json_kind(json)
        ))
    };
    match ty {
        Type::Dynamic => {
            let obj = json.as_object().ok_or_else(|| {
                ValueError::new(format!(
                    "expected a dynamic value {{\"value\":..,\"type\":..}}, got JSON {}",
                    json_kind(json)
                ))
            })?;
            if let Some(k) = obj.keys().find(|k| *k != "value" && *k != "type") {
                return Err(ValueError::new(format!(
                    "invalid key {} in dynamically-typed value",
                    quote(k)
                )));
            }
            let ty_json = obj
                .get("type")
                .ok_or_else(|| ValueError::new("dynamically-typed value has no \"type\""))?;
            let concrete = Type::from_json_value(ty_json)?;
            let inner = from_state_json(obj.get("value").unwrap_or(&J::Null), &concrete)?;
            Ok(Value::Dynamic {
                ty: concrete,
                value: Box::new(inner),
            })
        }
        Type::String => match json {
            J::String(s) => Ok(Value::String(s.clone())),
            J::Number(n) => Ok(Value::String(n.as_str().to_owned())),
            J::Bool(b) => Ok(Value::String(b.to_string())),
            _ => Err(mismatch()),
        },
        Type::Number => match json {
            J::Number(n) => Ok(Value::Number(canonicalize(n).unwrap_or_else(|| n.clone()))),
            J::String(s) => parse_number(s).map(Value::Number).ok_or_else(|| {
                ValueError::new(format!("a number is required, got string {}", quote(s)))
            }),
            _ => Err(mismatch()),
        },
        Type::Bool => match json {
            J::Bool(b) => Ok(Value::Bool(*b)),
            J::String(s) if s == "true" => Ok(Value::Bool(true)),
            J::String(s) if s == "false" => Ok(Value::Bool(false)),
            _ => Err(mismatch()),
        },
        Type::List(elem) | Type::Set(elem) => {
            let items = json.as_array().ok_or_else(mismatch)?;
            items
                .iter()
                .enumerate()
                .map(|(i, j)| {
                    from_state_json(j, elem).map_err(|e| e.within(PathStep::Index(i as u64)))
                })
                .collect::<Result<_, _>>()
                .map(Value::List)
        }
        Type::Tuple(elems) => {
            let items = json.as_array().ok_or_else(mismatch)?;
            if items.len() != elems.len() {
                return Err(ValueError::new(format!(
                    "a tuple of {} elements is required ({} given)",
                    elems.len(),
                    items.len()
                )));
            }
            items
                .iter()
                .zip(elems)
                .enumerate()
                .map(|(i, (j, t))| {
                    from_state_json(j, t).map_err(|e| e.within(PathStep::Index(i as u64)))
                })
                .collect::<Result<_, _>>()
                .map(Value::List)
        }
        Type::Map(elem) => {
            let obj = json.as_object().ok_or_else(mismatch)?;
            let mut map = BTreeMap::new();
            for (k, j) in obj {
                map.insert(
                    k.clone(),
                    from_state_json(j, elem).map_err(|e| e.within(PathStep::Key(k.clone())))?,
                );
            }
            Ok(Value::Map(map))
        }
        Type::Object { attrs, .. } => {
            let obj = json.as_object().ok_or_else(mismatch)?;
            if let Some(extra) = obj.keys().find(|k| !attrs.contains_key(*k)) {
                return Err(ValueError::new(format!(
                    "unsupported attribute {}",
                    quote(extra)
                )));
            }
            let mut map = BTreeMap::new();
            for (k, t) in attrs {
                let v = match obj.get(k) {
                    Some(j) => {
                        from_state_json(j, t).map_err(|e| e.within(PathStep::Attr(k.clone())))?
                    }
                    None => Value::Null,
                };
                map.insert(k.clone(), v);
            }
            Ok(Value::Map(map))
        }
    }
}

/// Writes a wholly known value as plain JSON (dynamic wrappers dropped, numbers canonical).
/// An unknown anywhere is an error naming its path: plain JSON has no way to say "unknown".
pub(crate) fn to_plain_json(value: &Value) -> Result<J, ValueError> {
    match value {
        Value::Null => Ok(J::Null),
        Value::Unknown => Err(ValueError::new("value is not known yet")),
        Value::Bool(b) => Ok(J::Bool(*b)),
        Value::Number(n) => Ok(J::Number(canonicalize(n).unwrap_or_else(|| n.clone()))),
        Value::String(s) => Ok(J::String(s.clone())),
        Value::List(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| to_plain_json(v).map_err(|e| e.within(PathStep::Index(i as u64))))
            .collect::<Result<_, _>>()
            .map(J::Array),
        Value::Map(map) => {
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map {
                out.insert(
                    k.clone(),
                    to_plain_json(v).map_err(|e| e.within(untyped_step(k)))?,
                );
            }
            Ok(J::Object(out))
        }
        Value::Dynamic { value, .. } => to_plain_json(value),
    }
}

/// Reads untyped JSON: arrays become lists, objects maps; numbers keep their text.
pub fn from_plain_json(json: &J) -> Value {
    from_plain_json_with(json, &mut |_| None)
}

/// Like [`from_plain_json`], but every JSON object is first offered to `leaf`; when it returns
/// a value (say, [`Value::Unknown`] for an IR `{"__ref": ...}` marker) that value is used in
/// place of the object.
pub(crate) fn from_plain_json_with(
    json: &J,
    leaf: &mut impl FnMut(&Map<String, J>) -> Option<Value>,
) -> Value {
    match json {
        J::Null => Value::Null,
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => Value::Number(n.clone()),
        J::String(s) => Value::String(s.clone()),
        J::Array(items) => Value::List(
            items
                .iter()
                .map(|j| from_plain_json_with(j, leaf))
                .collect(),
        ),
        J::Object(obj) => match leaf(obj) {
            Some(v) => v,
            None => Value::Map(
                obj.iter()
                    .map(|(k, j)| (k.clone(), from_plain_json_with(j, leaf)))
                    .collect(),
            ),
        },
    }
}

fn json_kind(j: &J) -> &'static str {
    match j {
        J::Null => "null",
        J::Bool(_) => "bool",
        J::Number(_) => "number",
        J::String(_) => "string",
        J::Array(_) => "array",
        J::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ty(s: &str) -> Type {
        Type::from_json(s.as_bytes()).unwrap()
    }

    #[test]
    fn state_round_trip_with_dynamic() {
        let t = ty(
            r#"["object",{"d":"dynamic","n":"number","s":["set","string"],"m":["map","bool"],"x":"dynamic"}]"#,
        );
        let v = Value::object([
            ("d", Value::List(vec![Value::from(1i64), Value::from("a")])),
            ("n", Value::Number("1.50".parse().unwrap())),
            ("s", Value::List(vec![Value::from("a")])),
            ("m", Value::object([("k", Value::from(true))])),
            ("x", Value::Null),
        ]);
        let j = to_state_json(&v, &t).unwrap();
        assert_eq!(
            serde_json::to_string(&j).unwrap(),
            r#"{"d":{"value":[1,"a"],"type":["tuple",["number","string"]]},"m":{"k":true},"n":1.5,"s":["a"],"x":null}"#
        );
        let back = from_state_json(&j, &t).unwrap();
        assert_eq!(back, v);
        assert_eq!(to_state_json(&back, &t).unwrap(), j);
    }

    #[test]
    fn state_reading_is_lenient_like_cty() {
        let t = ty(r#"["object",{"a":"string","b":"number","c":"bool","d":["list","string"]}]"#);
        let v = from_state_json(&json!({"a": 5, "b": "12", "c": "true"}), &t).unwrap();
        assert_eq!(
            v,
            Value::object([
                ("a", Value::from("5")),
                ("b", Value::from(12i64)),
                ("c", Value::from(true)),
                ("d", Value::Null)
            ])
        );
        let err = from_state_json(&json!({"zz": 1}), &t).unwrap_err();
        assert_eq!(err.message, r#"unsupported attribute "zz""#);
        let err = from_state_json(&json!({"d": [1, {}]}), &t).unwrap_err();
        assert_eq!(err.to_string(), "at d[1]: expected string, got JSON object");
        let err =
            from_state_json(&json!({"d": "x"}), &ty(r#"["object",{"d":"dynamic"}]"#)).unwrap_err();
        assert!(err.message.contains("dynamic value"), "{err}");
    }

    #[test]
    fn unknown_cannot_be_saved() {
        let t = ty(r#"["object",{"a":["list","string"]}]"#);
        let v = Value::object([("a", Value::List(vec![Value::Unknown]))]);
        assert_eq!(
            to_state_json(&v, &t).unwrap_err().to_string(),
            "at a[0]: value is not known, so it cannot be saved"
        );
        assert_eq!(
            to_plain_json(&v).unwrap_err().to_string(),
            "at a[0]: value is not known yet"
        );
    }

    #[test]
    fn plain_json() {
        let j = json!({"a": [1, 2.50, "x", null, true], "b": {"c": {"__ref": {"resource": "r"}}}});
        let v = from_plain_json_with(&j, &mut |o| {
            o.contains_key("__ref").then_some(Value::Unknown)
        });
        assert_eq!(
            v.get_path(&[PathStep::Attr("b".into()), PathStep::Attr("c".into())]),
            Some(&Value::Unknown)
        );
        let plain = from_plain_json(&j);
        let back = to_plain_json(&plain).unwrap();
        assert_eq!(
            back,
            json!({"a": [1, 2.5, "x", null, true], "b": {"c": {"__ref": {"resource": "r"}}}})
        );
        let dynv = Value::Dynamic {
            ty: Type::String,
            value: Box::new("s".into()),
        };
        assert_eq!(to_plain_json(&dynv).unwrap(), json!("s"));
    }
}
