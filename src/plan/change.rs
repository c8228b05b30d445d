//! One planned change of an attribute ([`AttrChange`]) and its record on the wire
//! ([`ChangeRecord`]: the spelling `--json`, saved plans and policy inputs share), both ways.
//!
//! Owns: the two shapes and the conversion between them (an unknown part as
//! `{"unknown": true}`, a sensitive value as `"(sensitive)"`). Not: which changes a plan has
//! (`diff`), the other plan rows (`engine::wire`), printing.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

use crate::value::{render_path, PathStep, Value};

/// One changed attribute, as planned.
#[derive(Debug, Clone, PartialEq)]
pub struct AttrChange {
    /// Where, within the object.
    pub path: Vec<PathStep>,
    /// The old value, absent for a new attribute.
    pub before: Option<Value>,
    /// The new value (`Value::Unknown` = known after apply), absent when removed.
    pub after: Option<Value>,
    /// The attribute is sensitive: show neither value.
    pub sensitive: bool,
    /// This attribute's change forces replacement.
    pub forces_replacement: bool,
    /// A write-only attribute the configuration sets: its value goes to the provider with this
    /// change and is never planned, stored or shown (both sides are absent).
    pub write_only: bool,
}

/// One changed attribute on the wire: `path` rendered, `before`/`after` plain JSON, `null`
/// when absent, `{"unknown": true}` for a value (or a part of one) known only after apply,
/// `"(sensitive)"` for a sensitive value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChangeRecord {
    /// The attribute path, rendered (`tags["env"]`); empty for the whole object.
    pub(crate) path: String,
    /// The value before, plain JSON (`null` when absent).
    pub(crate) before: Json,
    /// The value after, plain JSON (`null` when absent).
    pub(crate) after: Json,
    /// Whether the value is sensitive (then both sides read `"(sensitive)"`).
    pub(crate) sensitive: bool,
    /// Whether this change forces the resource to be replaced.
    pub(crate) forces_replacement: bool,
    /// A write-only attribute the configuration sets (sent, never shown: both sides `null`);
    /// left out when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) write_only: bool,
}

impl From<&AttrChange> for ChangeRecord {
    fn from(c: &AttrChange) -> ChangeRecord {
        let side = |v: &Option<Value>| match v {
            None => Json::Null,
            Some(_) if c.sensitive => json!("(sensitive)"),
            Some(v) => wire_value(v),
        };
        ChangeRecord {
            path: render_path(&c.path),
            before: side(&c.before),
            after: side(&c.after),
            sensitive: c.sensitive,
            forces_replacement: c.forces_replacement,
            write_only: c.write_only,
        }
    }
}

/// A plan row that does not read back: an attribute path that does not parse (in the change
/// of resource `id`, when known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// The resource whose change it is; `None` for a change read on its own.
    pub(crate) id: Option<String>,
    /// The attribute path as written.
    pub(crate) path: String,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(id) = &self.id {
            write!(f, "{id}: ")?;
        }
        write!(f, "the attribute path {:?} does not parse", self.path)
    }
}

impl std::error::Error for WireError {}

impl ChangeRecord {
    /// The change again; an error names a path that does not parse.
    pub(crate) fn to_change(&self) -> Result<AttrChange, WireError> {
        let side = |v: &Json| match v {
            Json::Null => None,
            other => Some(crate::value::json::from_plain_json_with(other, &mut |m| {
                is_unknown_marker(m).then_some(Value::Unknown)
            })),
        };
        let path = match self.path.as_str() {
            "" => Vec::new(),
            text => crate::ir::parse_path(text)
                .map(|p| crate::ir::value_path(&p))
                .ok_or_else(|| WireError {
                    id: None,
                    path: text.to_string(),
                })?,
        };
        Ok(AttrChange {
            path,
            before: side(&self.before),
            after: side(&self.after),
            sensitive: self.sensitive,
            forces_replacement: self.forces_replacement,
            write_only: self.write_only,
        })
    }
}

/// A value as plain JSON with `{"unknown": true}` wherever a part is unknown (plain JSON
/// alone would lose the whole value to one unknown element).
fn wire_value(v: &Value) -> Json {
    match v {
        Value::Unknown => json!({"unknown": true}),
        Value::List(items) => Json::Array(items.iter().map(wire_value).collect()),
        Value::Map(m) => Json::Object(m.iter().map(|(k, v)| (k.clone(), wire_value(v))).collect()),
        Value::Dynamic { value, .. } => wire_value(value),
        other => crate::value::json::to_plain_json(other).unwrap_or(Json::Null),
    }
}

fn is_unknown_marker(m: &serde_json::Map<String, Json>) -> bool {
    m.len() == 1 && m.get("unknown") == Some(&Json::Bool(true))
}
