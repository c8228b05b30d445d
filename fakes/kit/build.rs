//! Shorthand for writing the fakes' schemas and reading their values.

use std::collections::BTreeMap;

use nivis::schema::{AttrType, Attribute, Block, Schema};
use nivis::value::{Type, Value};

/// How an attribute may be set.
pub(crate) enum Mode {
    Required,
    Optional,
    Computed,
    OptionalComputed,
}

/// One attribute.
pub(crate) fn attr(ty: Type, mode: Mode, sensitive: bool, description: &str) -> Attribute {
    let (required, optional, computed) = match mode {
        Mode::Required => (true, false, false),
        Mode::Optional => (false, true, false),
        Mode::Computed => (false, false, true),
        Mode::OptionalComputed => (false, true, true),
    };
    Attribute {
        ty: AttrType::Type(ty),
        required,
        optional,
        computed,
        sensitive,
        write_only: false,
        description: description.to_string(),
        deprecated: false,
        deprecation_message: String::new(),
    }
}

/// A schema from attributes.
pub(crate) fn schema(version: i64, description: &str, attrs: Vec<(&str, Attribute)>) -> Schema {
    Schema {
        version,
        block: Block {
            attributes: attrs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect::<BTreeMap<_, _>>(),
            block_types: BTreeMap::new(),
            description: description.to_string(),
            deprecated: false,
        },
    }
}

/// Reads a string attribute of an object value.
pub(crate) fn get_str(v: &Value, key: &str) -> Option<String> {
    match v {
        Value::Map(m) => match m.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// Sets an attribute of an object value.
pub(crate) fn set(v: &mut Value, key: &str, new: Value) {
    if let Value::Map(m) = v {
        m.insert(key.to_string(), new);
    }
}
