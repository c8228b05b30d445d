//! Safe conversion of user configuration into a value of a given type (cty/convert, trimmed).
//!
//! Owns [`conform`]: the conversions cty applies when configuration meets a type constraint.
//! Numbers and bools become strings and back (`"12"` to `12`, `"true"` to `true`), lists, sets
//! and tuples convert into each other, maps and objects too; missing optional object attributes
//! become null. Unknown and null pass through anywhere. Unlike cty, an object attribute the type
//! does not declare is an error (naming it and suggesting the nearest declared name), because in
//! Nivis it is almost always a typo. Numbers come out in canonical text and sets without
//! duplicate known elements.
//!
//! Not: schema rules (required, computed, nested blocks: `crate::schema::Block::conform_config`),
//! unsafe conversions (string to list, lossy number formats), or type unification.

use std::collections::BTreeMap;

use super::number::{canonicalize, parse_number};
use super::{describe, quote, PathStep, Type, Value, ValueError};

/// Converts `value` into a value of type `ty`, or says where and why it cannot.
// Long because it has one arm per target type, the conversion table in one place.
pub(crate) fn conform(value: &Value, ty: &Type) -> Result<Value, ValueError> {
    match value {
        Value::Null => return Ok(Value::Null),
        Value::Unknown => return Ok(Value::Unknown),
        Value::Dynamic { value: inner, .. } if *ty != Type::Dynamic => return conform(inner, ty),
        _ => {}
    }
    let mismatch = || {
        ValueError::new(format!(
            "expected {}, got {}",
            ty.friendly_name(),
            describe(value)
        ))
    };
    match ty {
        Type::Dynamic => Ok(canonical_numbers(value)),
        Type::String => match value {
            Value::String(s) => Ok(Value::String(s.clone())),
            Value::Number(n) => Ok(Value::String(
                canonicalize(n).as_ref().unwrap_or(n).as_str().to_owned(),
            )),
            Value::Bool(b) => Ok(Value::String(b.to_string())),
            _ => Err(mismatch()),
        },
        Type::Number => match value {
            Value::Number(n) => Ok(Value::Number(canonicalize(n).unwrap_or_else(|| n.clone()))),
            Value::String(s) => parse_number(s).map(Value::Number).ok_or_else(mismatch),
            _ => Err(mismatch()),
        },
        Type::Bool => match value {
            Value::Bool(b) => Ok(Value::Bool(*b)),
            Value::String(s) if s == "true" => Ok(Value::Bool(true)),
            Value::String(s) if s == "false" => Ok(Value::Bool(false)),
            _ => Err(mismatch()),
        },
        Type::List(elem) | Type::Set(elem) => {
            let items = match value {
                Value::List(items) => items,
                _ => return Err(mismatch()),
            };
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                out.push(conform(item, elem).map_err(|e| e.within(PathStep::Index(i as u64)))?);
            }
            if matches!(ty, Type::Set(_)) {
                dedup_set(&mut out);
            }
            Ok(Value::List(out))
        }
        Type::Tuple(elems) => match value {
            Value::List(items) if items.len() == elems.len() => items
                .iter()
                .zip(elems)
                .enumerate()
                .map(|(i, (v, t))| conform(v, t).map_err(|e| e.within(PathStep::Index(i as u64))))
                .collect::<Result<_, _>>()
                .map(Value::List),
            Value::List(items) => Err(ValueError::new(format!(
                "expected a tuple of {} elements, got {}",
                elems.len(),
                items.len()
            ))),
            _ => Err(mismatch()),
        },
        Type::Map(elem) => match value {
            Value::Map(map) => {
                let mut out = BTreeMap::new();
                for (k, v) in map {
                    out.insert(
                        k.clone(),
                        conform(v, elem).map_err(|e| e.within(PathStep::Key(k.clone())))?,
                    );
                }
                Ok(Value::Map(out))
            }
            _ => Err(mismatch()),
        },
        Type::Object { attrs, optional } => {
            let map = match value {
                Value::Map(map) => map,
                _ => return Err(mismatch()),
            };
            if let Some(extra) = map.keys().find(|k| !attrs.contains_key(*k)) {
                return Err(ValueError::at(
                    vec![PathStep::Attr(extra.clone())],
                    unsupported_message(extra, attrs.keys().map(String::as_str)),
                ));
            }
            let mut out = BTreeMap::new();
            for (k, t) in attrs {
                let v = match map.get(k) {
                    Some(v) => conform(v, t).map_err(|e| e.within(PathStep::Attr(k.clone())))?,
                    None if optional.contains(k) => Value::Null,
                    None => {
                        return Err(ValueError::new(format!(
                            "attribute {} is required",
                            quote(k)
                        )))
                    }
                };
                out.insert(k.clone(), v);
            }
            Ok(Value::Map(out))
        }
    }
}

/// A copy of `value` with every number in canonical text (for `dynamic` slots).
fn canonical_numbers(value: &Value) -> Value {
    match value {
        Value::Number(n) => Value::Number(canonicalize(n).unwrap_or_else(|| n.clone())),
        Value::List(items) => Value::List(items.iter().map(canonical_numbers).collect()),
        Value::Map(map) => Value::Map(
            map.iter()
                .map(|(k, v)| (k.clone(), canonical_numbers(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Drops later duplicates of wholly known set elements (cty sets hold each value once; unknown
/// elements never compare equal).
pub(crate) fn dedup_set(items: &mut Vec<Value>) {
    if items.len() < 2 {
        return;
    }
    let mut known: Vec<usize> = Vec::with_capacity(items.len());
    let mut kept: Vec<Value> = Vec::with_capacity(items.len());
    for item in items.drain(..) {
        if item.is_known() {
            if known.iter().any(|&i| kept[i] == item) {
                continue;
            }
            known.push(kept.len());
        }
        kept.push(item);
    }
    *items = kept;
}

/// `unsupported attribute "tagz"; did you mean "tags"?` (or the list of valid names).
pub(crate) fn unsupported_message<'a>(
    name: &str,
    valid: impl Iterator<Item = &'a str> + Clone,
) -> String {
    let mut msg = format!("unsupported attribute {}", quote(name));
    if let Some(best) = suggest(name, valid.clone()) {
        msg.push_str(&format!("; did you mean {}?", quote(best)));
    } else {
        let names: Vec<&str> = valid.collect();
        if names.is_empty() {
            msg.push_str("; no attributes are expected here");
        } else if names.len() <= 12 {
            msg.push_str(&format!("; expected one of: {}", names.join(", ")));
        }
    }
    msg
}

/// The candidate nearest to `name` by edit distance, if it is close enough to be a typo.
pub(crate) fn suggest<'a>(
    name: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .map(|c| (levenshtein(name, c), c))
        .filter(|&(d, _)| d < 3)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(s: &str) -> Type {
        Type::from_json(s.as_bytes()).unwrap()
    }

    fn num(s: &str) -> Value {
        Value::Number(s.parse().unwrap())
    }

    #[test]
    fn primitives() {
        assert_eq!(
            conform(&num("12"), &Type::String).unwrap(),
            Value::from("12")
        );
        assert_eq!(
            conform(&num("1.50"), &Type::String).unwrap(),
            Value::from("1.5")
        );
        assert_eq!(
            conform(&Value::from(true), &Type::String).unwrap(),
            Value::from("true")
        );
        assert_eq!(
            conform(&Value::from("12"), &Type::Number).unwrap(),
            Value::from(12i64)
        );
        assert_eq!(
            conform(&Value::from("false"), &Type::Bool).unwrap(),
            Value::from(false)
        );
        assert_eq!(
            conform(&num("1e3"), &Type::Number)
                .unwrap()
                .as_number()
                .unwrap()
                .as_str(),
            "1000"
        );
        let err = conform(&Value::from("x"), &Type::Number).unwrap_err();
        assert_eq!(err.to_string(), r#"expected number, got string "x""#);
        let err = conform(&Value::from("yes"), &Type::Bool).unwrap_err();
        assert_eq!(err.to_string(), r#"expected bool, got string "yes""#);
        assert!(conform(&Value::List(vec![]), &Type::String).is_err());
        assert_eq!(
            conform(&Value::Unknown, &Type::Number).unwrap(),
            Value::Unknown
        );
        assert_eq!(
            conform(&Value::Null, &ty(r#"["list","string"]"#)).unwrap(),
            Value::Null
        );
    }

    #[test]
    fn collections() {
        let v = Value::List(vec![
            Value::from("a"),
            num("1"),
            Value::from("a"),
            Value::Unknown,
            Value::Unknown,
        ]);
        let set = conform(&v, &ty(r#"["set","string"]"#)).unwrap();
        assert_eq!(
            set,
            Value::List(vec![
                Value::from("a"),
                Value::from("1"),
                Value::Unknown,
                Value::Unknown
            ])
        );
        let tuple = conform(
            &Value::List(vec![num("1"), Value::from("2")]),
            &ty(r#"["tuple",["string","number"]]"#),
        )
        .unwrap();
        assert_eq!(
            tuple,
            Value::List(vec![Value::from("1"), Value::from(2i64)])
        );
        assert!(conform(
            &Value::List(vec![num("1")]),
            &ty(r#"["tuple",["string","number"]]"#)
        )
        .is_err());
        let m = conform(
            &Value::object([("k", Value::from(true))]),
            &ty(r#"["map","string"]"#),
        )
        .unwrap();
        assert_eq!(m, Value::object([("k", Value::from("true"))]));
        let err = conform(
            &Value::object([("k", Value::List(vec![]))]),
            &ty(r#"["map","string"]"#),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"at ["k"]: expected string, got list of 0 elements"#
        );
    }

    #[test]
    fn objects() {
        let t =
            ty(r#"["object",{"name":"string","size":"number","tags":["map","string"]},["tags"]]"#);
        let v = conform(
            &Value::object([("name", Value::from("a")), ("size", Value::from("5"))]),
            &t,
        )
        .unwrap();
        assert_eq!(
            v,
            Value::object([
                ("name", Value::from("a")),
                ("size", Value::from(5i64)),
                ("tags", Value::Null)
            ])
        );
        let err = conform(&Value::object([("name", Value::from("a"))]), &t).unwrap_err();
        assert_eq!(err.to_string(), r#"attribute "size" is required"#);
        let err = conform(
            &Value::object([
                ("name", Value::from("a")),
                ("size", num("1")),
                ("tagz", Value::Null),
            ]),
            &t,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"at tagz: unsupported attribute "tagz"; did you mean "tags"?"#
        );
        let deep = ty(r#"["list",["object",{"disk":["list",["object",{"size":"number"}]]}]]"#);
        let v = Value::List(vec![Value::object([(
            "disk",
            Value::List(vec![Value::object([("size", Value::from("x"))])]),
        )])]);
        assert_eq!(
            conform(&v, &deep).unwrap_err().to_string(),
            r#"at [0].disk[0].size: expected number, got string "x""#
        );
    }

    #[test]
    fn dynamic_passes_through() {
        let v = Value::List(vec![num("1.0"), Value::from("x")]);
        assert_eq!(conform(&v, &Type::Dynamic).unwrap(), v);
        let wrapped = Value::Dynamic {
            ty: Type::Number,
            value: Box::new(num("2")),
        };
        assert_eq!(conform(&wrapped, &Type::String).unwrap(), Value::from("2"));
    }

    #[test]
    fn suggestions() {
        let names = ["tags", "name", "description"];
        assert_eq!(suggest("tagz", names.iter().copied()), Some("tags"));
        assert_eq!(
            suggest("descriptoin", names.iter().copied()),
            Some("description")
        );
        assert_eq!(suggest("zzzzzz", names.iter().copied()), None);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert!(unsupported_message("zz", names.iter().copied())
            .contains("expected one of: tags, name, description"));
    }
}
