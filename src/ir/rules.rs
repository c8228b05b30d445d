//! The contract's patterns (docs/ir-schema.json) and their matchers, and values rendered in
//! messages the way the reference checker (Python) renders them, so both report alike.

use serde_json::{Number, Value};

// Patterns as docs/ir-schema.json spells them; they appear in error messages
// (and a test checks that the schema still contains each one). The matchers
// below implement them by hand.
pub(super) const PROVIDER_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_./-]*$";
pub(super) const NODE_ID_PATTERN: &str =
    r"^[A-Za-z0-9][A-Za-z0-9_./-]*\.[A-Za-z_][A-Za-z0-9_-]*\.[A-Za-z_][A-Za-z0-9_-]*$";
pub(super) const DATA_ID_PATTERN: &str =
    r"^data\.[A-Za-z0-9][A-Za-z0-9_./-]*\.[A-Za-z_][A-Za-z0-9_-]*\.[A-Za-z_][A-Za-z0-9_-]*$";
pub(super) const IDENT_PATTERN: &str = "^[A-Za-z_][A-Za-z0-9_-]*$";
/// The keys a managed or data node may have.
pub(super) const NODE_KEYS: &[&str] = &[
    "id", "provider", "type", "name", "module", "key", "config", "meta",
];
/// An instance key (`lib.forEach`'s keys; `lib.count`'s indices are integers).
pub(super) const INSTANCE_KEY_PATTERN: &str = "^[A-Za-z0-9_-]+$";
pub(super) const MODULE_PATTERN: &str = r"^module\.[A-Za-z0-9_-]+(?:\.module\.[A-Za-z0-9_-]+)*$";
pub(super) const DERIVED_INPUT_PATTERN: &str = r"^[A-Za-z0-9][A-Za-z0-9_./-]*\.[A-Za-z_][A-Za-z0-9_-]*\.[A-Za-z_][A-Za-z0-9_-]*\.[A-Za-z0-9_-]+$";
pub(super) const CONSUMER_ID_PATTERN: &str = "^[A-Za-z0-9_][A-Za-z0-9_.-]*$";
pub(super) const BUILD_PATH_PATTERN: &str = "^/";
pub(super) const DRV_PATH_PATTERN: &str = r"^/[^\n]*\.drv$";
pub(super) const PATH_BODY: &str = r#"(?:[A-Za-z_][A-Za-z0-9_-]*|\["(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9A-Fa-f]{4})*"\])(?:\.[A-Za-z_][A-Za-z0-9_-]*|\[(?:0|[1-9][0-9]*)\]|\["(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9A-Fa-f]{4})*"\])*"#;
/// Largest list index a path may hold (2^53 - 1, exact in every JSON reader).
pub(super) const MAX_INDEX: u64 = 9_007_199_254_740_991;

pub(super) const UNKNOWN_MARKER: &str = "unknown marker: keys starting with '__' are reserved for __ref, __sensitiveRef, __derived, __build, __sensitive and __ephemeral";
pub(super) const BUILD_IN_SENSITIVE: &str = "__build inside __sensitive: a build output computed from a secret would put the secret in the world-readable Nix store";
pub(super) const SCHEMA_VERSION_MESSAGE: &str =
    "unsupported schemaVersion: this IR reader understands schemaVersion 1";
pub(super) const LIFECYCLE_ON_DATA: &str = "lifecycle is not allowed on a data source";
pub(super) const KIND_MESSAGE: &str = "kind must be \"tfplugin\" (the default: the Terraform plugin protocol) or \"nixops4\" (the NixOps4 resource provider protocol)";
pub(super) const NIXOPS4_VERSION: &str =
    "a nixops4 provider has no version: its source is a path or a binary name";
pub(super) const NIXOPS4_CONFIG: &str =
    "a nixops4 provider takes no configuration: protocol v0 has none";
pub(super) const STATELESS_NOT_NIXOPS4: &str =
    "statelessTypes is only for providers of kind \"nixops4\"";
pub(super) const VARIABLE_TYPES: [&str; 6] = ["string", "number", "bool", "list", "map", "any"];

pub(super) fn expansion_message(key: &str) -> Option<&'static str> {
    match key {
        "count" => {
            Some("count is not part of the IR: expand instances in Nix (ids <base>__<index>)")
        }
        "for_each" => {
            Some("for_each is not part of the IR: expand instances in Nix (ids <base>__<key>)")
        }
        "forEach" => {
            Some("forEach is not part of the IR: expand instances in Nix (ids <base>__<key>)")
        }
        _ => None,
    }
}

// --- pattern matchers (docs/ir-schema.json) ---------------------------------------

/// `IDENT_PATTERN`: the one identifier rule (see [`crate::value::is_identifier`]).
pub(super) fn is_ident(s: &str) -> bool {
    crate::value::is_identifier(s)
}

pub(super) fn is_provider_id(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphanumeric())
        && b.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'/' | b'-'))
}

/// `<provider>.<type>.<name>`; type and name hold no dots, the provider may.
pub(super) fn is_node_id(s: &str) -> bool {
    let mut parts = s.rsplitn(3, '.');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(name), Some(ty), Some(provider)) => {
            is_ident(name) && is_ident(ty) && is_provider_id(provider)
        }
        _ => false,
    }
}

/// `MODULE_PATTERN`: `module.<key>` pairs, dot-separated.
pub(super) fn is_module_prefix(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len().is_multiple_of(2)
        && parts
            .chunks(2)
            .all(|pair| pair[0] == "module" && is_attr_name(pair[1]))
}

/// A resource id without its module instance prefix (`module.<key>.` pairs), as far as what
/// is left is still an id.
pub(super) fn without_module(id: &str) -> &str {
    let mut rest = id;
    while let Some(after) = rest.strip_prefix("module.") {
        match after.split_once('.') {
            Some((_, tail)) if tail.split('.').count() >= 3 => rest = tail,
            _ => break,
        }
    }
    rest
}

pub(super) fn is_data_id(s: &str) -> bool {
    s.strip_prefix("data.").is_some_and(is_node_id)
}

pub(super) fn is_attr_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

pub(super) fn is_derived_input(s: &str) -> bool {
    s.rsplit_once('.')
        .is_some_and(|(id, attr)| is_attr_name(attr) && is_node_id(id))
}

pub(super) fn is_consumer_id(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphanumeric() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

pub(super) fn is_drv_path(s: &str) -> bool {
    s.len() >= 5 && s.starts_with('/') && s.ends_with(".drv") && !s.contains('\n')
}

// --- Python-compatible rendering of values in messages ----------------------------------

/// A value as Python's repr() shows it, so messages read like check.py's.
pub(super) fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => py_str(s),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(py_repr).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", py_str(k), py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

pub(super) fn py_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::new();
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

pub(super) fn not_of_type(v: &Value, types: &str) -> String {
    format!("{} is not of type {types}", py_repr(v))
}

pub(super) fn no_match(s: &str, pattern: &str) -> String {
    format!("{} does not match {}", py_str(s), py_str(pattern))
}

/// JSON Schema "integer": a number with no fractional part (1.0 counts).
pub(super) fn integer_value(n: &Number) -> Option<i128> {
    if let Some(i) = n.as_i64() {
        return Some(i.into());
    }
    if let Some(u) = n.as_u64() {
        return Some(u.into());
    }
    if let Ok(i) = n.to_string().parse::<i128>() {
        return Some(i);
    }
    let f = n.as_f64()?;
    // Saturating cast: huge integral floats stay beyond every bound we check.
    (f.is_finite() && f.fract() == 0.0).then_some(f as i128)
}
