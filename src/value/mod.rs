//! cty-compatible values and their codecs: the pure value layer.
//!
//! Owns: the [`Type`] model (and its JSON type-constraint syntax), the [`Value`] model with
//! null and unknown, attribute paths ([`PathStep`]) and the path-carrying [`ValueError`]; the
//! codecs driven by a type: [`msgpack`] (exactly cty/msgpack, what providers receive and send),
//! [`json`] (cty/json for the state file, and plain JSON for the Nix ledger), and [`convert`]
//! (turning user configuration into a value of a given type).
//!
//! Not: schemas and blocks (`crate::schema`), the plan rules (`crate::plan`), protobuf
//! messages, any I/O. Nothing here reads files, spawns processes or logs.
//!
//! Model in brief. A `Value` is untyped in memory: lists, sets and tuples are all
//! [`Value::List`], maps and objects are [`Value::Map`]; the codecs and conversions take the
//! [`Type`] alongside. The one exception is [`Value::Dynamic`], which records the concrete type a
//! provider sent for a `dynamic` slot so that re-encoding reproduces the same bytes; every
//! comparison and path lookup looks through it. Numbers are [`serde_json::Number`]s kept as exact
//! decimal text (cty numbers are arbitrary precision); values built by this module keep them in
//! cty's canonical text (`1.5`, `100`, never `1e2`).

use std::collections::BTreeMap;
use std::fmt;

pub(crate) mod convert;
pub mod json;
pub mod msgpack;
mod number;
mod types;

pub(crate) use convert::conform;
pub use types::Type;

/// A value: known (possibly null), or unknown until apply.
#[derive(Debug, Clone, Default)]
pub enum Value {
    /// Null of whatever type the slot has.
    #[default]
    Null,
    /// Not known until apply (cty unknown; refinements are not kept).
    Unknown,
    /// A boolean.
    Bool(bool),
    /// A number, as exact decimal text.
    Number(serde_json::Number),
    /// A string.
    String(String),
    /// A list, set or tuple (the type says which).
    List(Vec<Value>),
    /// A map or object (the type says which); keys sorted bytewise.
    Map(BTreeMap<String, Value>),
    /// A value decoded from a `dynamic` slot, with the concrete type the provider sent.
    Dynamic {
        /// The concrete type of `value`.
        ty: Type,
        /// The value itself (never another `Dynamic`).
        value: Box<Value>,
    },
}

static UNKNOWN: Value = Value::Unknown;

impl Value {
    /// A string value.
    pub fn string(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }

    /// An object (or map) value from `(name, value)` pairs.
    pub fn object<K: Into<String>>(pairs: impl IntoIterator<Item = (K, Value)>) -> Value {
        Value::Map(pairs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// This value with any [`Value::Dynamic`] wrapper looked through.
    pub(crate) fn unwrap_dynamic(&self) -> &Value {
        match self {
            Value::Dynamic { value, .. } => value.unwrap_dynamic(),
            v => v,
        }
    }

    /// Whether the value is null (looking through a dynamic wrapper).
    pub fn is_null(&self) -> bool {
        matches!(self.unwrap_dynamic(), Value::Null)
    }

    /// Whether the value as a whole is unknown (looking through a dynamic wrapper).
    pub fn is_unknown(&self) -> bool {
        matches!(self.unwrap_dynamic(), Value::Unknown)
    }

    /// Whether the value is wholly known: no unknown anywhere inside it.
    pub fn is_known(&self) -> bool {
        match self {
            Value::Unknown => false,
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => true,
            Value::List(items) => items.iter().all(Value::is_known),
            Value::Map(map) => map.values().all(Value::is_known),
            Value::Dynamic { value, .. } => value.is_known(),
        }
    }

    /// The string, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self.unwrap_dynamic() {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number, if this is a number.
    #[cfg(test)] // used by the unit tests only
    pub(crate) fn as_number(&self) -> Option<&serde_json::Number> {
        match self.unwrap_dynamic() {
            Value::Number(n) => Some(n),
            _ => None,
        }
    }

    /// The elements, if this is a list, set or tuple.
    pub(crate) fn as_list(&self) -> Option<&[Value]> {
        match self.unwrap_dynamic() {
            Value::List(items) => Some(items),
            _ => None,
        }
    }

    /// The entries, if this is a map or object.
    pub(crate) fn as_map(&self) -> Option<&BTreeMap<String, Value>> {
        match self.unwrap_dynamic() {
            Value::Map(map) => Some(map),
            _ => None,
        }
    }

    /// An attribute (or map element) by name. An unknown value yields unknown attributes.
    pub fn get_attr(&self, name: &str) -> Option<&Value> {
        match self.unwrap_dynamic() {
            Value::Map(map) => map.get(name),
            Value::Unknown => Some(&UNKNOWN),
            _ => None,
        }
    }

    /// The value at `path`: `None` when a step does not apply (missing key, index out of range,
    /// stepping into null or a primitive). Stepping into an unknown yields unknown. `Attr` and
    /// `Key` both look up map and object entries; `Index` counts list, set and tuple elements.
    pub fn get_path(&self, path: &[PathStep]) -> Option<&Value> {
        let mut v = self;
        for step in path {
            v = v.step(step)?;
        }
        Some(v)
    }

    fn step(&self, step: &PathStep) -> Option<&Value> {
        match (self.unwrap_dynamic(), step) {
            (Value::Unknown, _) => Some(&UNKNOWN),
            (Value::Map(map), PathStep::Attr(k) | PathStep::Key(k)) => map.get(k),
            (Value::List(items), PathStep::Index(i)) => {
                usize::try_from(*i).ok().and_then(|i| items.get(i))
            }
            _ => None,
        }
    }

    /// Mutable access to the value at `path` (see [`Value::get_path`]; unknowns are not entered).
    pub(crate) fn get_path_mut(&mut self, path: &[PathStep]) -> Option<&mut Value> {
        let mut v = self;
        for step in path {
            v = match v {
                Value::Dynamic { value, .. } => value.get_path_mut(std::slice::from_ref(step))?,
                Value::Map(map) => match step {
                    PathStep::Attr(k) | PathStep::Key(k) => map.get_mut(k)?,
                    PathStep::Index(_) => return None,
                },
                Value::List(items) => match step {
                    PathStep::Index(i) => items.get_mut(usize::try_from(*i).ok()?)?,
                    _ => return None,
                },
                _ => return None,
            };
        }
        Some(v)
    }

    /// The type cty would give this value in a `dynamic` slot: lists become tuples, maps
    /// objects, null and unknown `dynamic`; a [`Value::Dynamic`] keeps its recorded type.
    pub(crate) fn infer_type(&self) -> Type {
        match self {
            Value::Null | Value::Unknown => Type::Dynamic,
            Value::Bool(_) => Type::Bool,
            Value::Number(_) => Type::Number,
            Value::String(_) => Type::String,
            Value::List(items) => Type::Tuple(items.iter().map(Value::infer_type).collect()),
            Value::Map(map) => Type::object(
                map.iter()
                    .map(|(k, v)| (k.clone(), v.infer_type()))
                    .collect(),
            ),
            Value::Dynamic { ty, .. } => ty.clone(),
        }
    }

    /// The concrete type of this value where `template` leaves parts `dynamic`: inside objects
    /// the declared attribute types are kept and only `dynamic` attributes are inferred from
    /// the value (how cty types the elements of a tuple-typed LIST block).
    pub(crate) fn concrete_type(&self, template: &Type) -> Type {
        match (self, template) {
            (Value::Dynamic { ty, .. }, _) => ty.clone(),
            (v, Type::Dynamic) => v.infer_type(),
            (Value::Map(map), Type::Object { attrs, .. }) if template.has_dynamic() => {
                Type::object(
                    attrs
                        .iter()
                        .map(|(k, t)| {
                            (
                                k.clone(),
                                map.get(k).map_or_else(|| t.clone(), |v| v.concrete_type(t)),
                            )
                        })
                        .collect(),
                )
            }
            _ => template.clone(),
        }
    }
}

impl Value {
    /// Recomputes the type recorded by a [`Value::Dynamic`] after its content was edited
    /// (say, by `ignore_changes`): parts that still fit the old type keep it, so typed nulls
    /// stay typed, and the rest is inferred. Other values are left alone.
    pub(crate) fn refresh_dynamic_type(&mut self) {
        if let Value::Dynamic { ty, value } = self {
            *ty = retype(value, ty);
        }
    }
}

fn retype(v: &Value, old: &Type) -> Type {
    match (v, old) {
        (Value::Dynamic { ty, .. }, _) => ty.clone(),
        (Value::Null | Value::Unknown, _)
        | (Value::String(_), Type::String)
        | (Value::Number(_), Type::Number)
        | (Value::Bool(_), Type::Bool)
        | (Value::List(_), Type::List(_) | Type::Set(_))
        | (Value::Map(_), Type::Map(_)) => old.clone(),
        (Value::List(items), Type::Tuple(ts)) if items.len() == ts.len() => {
            Type::Tuple(items.iter().zip(ts).map(|(v, t)| retype(v, t)).collect())
        }
        (Value::Map(map), Type::Object { attrs, .. })
            if map.len() == attrs.len() && map.keys().eq(attrs.keys()) =>
        {
            Type::object(
                map.iter()
                    .zip(attrs.values())
                    .map(|((k, v), t)| (k.clone(), retype(v, t)))
                    .collect(),
            )
        }
        (v, _) => v.infer_type(),
    }
}

/// Structural equality as cty's `RawEquals`: unknown equals unknown, null equals null, numbers
/// compare numerically, dynamic wrappers are looked through.
impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        match (self.unwrap_dynamic(), other.unwrap_dynamic()) {
            (Value::Null, Value::Null) | (Value::Unknown, Value::Unknown) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Number(a), Value::Number(b)) => number::numbers_equal(a, b),
            (Value::String(a), Value::String(b)) => a == b,
            (Value::List(a), Value::List(b)) => a == b,
            (Value::Map(a), Value::Map(b)) => a == b,
            _ => false,
        }
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Number(n.into())
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        Value::Number(n.into())
    }
}

/// A short, HCL-like rendering for messages: `"x"`, `5`, `null`, `(known after apply)`,
/// `["a", "b"]`, `{a = 1, "b c" = true}`.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Unknown => f.write_str("(known after apply)"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Number(n) => f.write_str(n.as_str()),
            Value::String(s) => f.write_str(&quote(s)),
            Value::List(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            Value::Map(map) => {
                f.write_str("{")?;
                for (i, (k, v)) in map.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    if is_identifier(k) {
                        write!(f, "{k} = {v}")?;
                    } else {
                        write!(f, "{} = {v}", quote(k))?;
                    }
                }
                f.write_str("}")
            }
            Value::Dynamic { value, .. } => value.fmt(f),
        }
    }
}

/// One step of an attribute path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PathStep {
    /// An object attribute (or nested block type) by name.
    Attr(String),
    /// A map element (or map-block label) by key.
    Key(String),
    /// A list or tuple element by position (for sets: the position in Nivis's element order).
    Index(u64),
}

/// Renders a path as `a.b[0]["k"]`.
pub fn render_path(path: &[PathStep]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            PathStep::Attr(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            PathStep::Key(k) => {
                out.push('[');
                out.push_str(&quote(k));
                out.push(']');
            }
            PathStep::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

/// A value that does not fit its type (or a codec input that is malformed), and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueError {
    /// Where in the value the problem is (empty: the value as a whole).
    pub path: Vec<PathStep>,
    /// What is wrong, for a human.
    pub message: String,
}

impl ValueError {
    /// An error about the value as a whole.
    pub(crate) fn new(message: impl Into<String>) -> ValueError {
        ValueError {
            path: Vec::new(),
            message: message.into(),
        }
    }

    /// An error at `path`.
    pub(crate) fn at(path: Vec<PathStep>, message: impl Into<String>) -> ValueError {
        ValueError {
            path,
            message: message.into(),
        }
    }

    /// The same error one level further out: `step` is prepended to the path. Errors are built
    /// innermost first so that the success path never allocates a path.
    pub(crate) fn within(mut self, step: PathStep) -> ValueError {
        self.path.insert(0, step);
        self
    }
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "at {}: {}", render_path(&self.path), self.message)
        }
    }
}

impl std::error::Error for ValueError {}

/// A JSON-quoted string.
pub(crate) fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

/// Whether `s` is an identifier, rendered without quotes in a path (`a.b`) or an object
/// (`{b = 1}`): ASCII letters, digits, `_` and `-`, not starting with a digit or `-`. The one
/// rule for every path Nivis prints or reads: the IR's path grammar (docs/ir-schema.json) and
/// Nix attribute names have it, so a printed path reads back as the same keys.
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// The path step for a key of a map or object whose type is not at hand: `Attr` when the key
/// reads as an identifier (`a.b`), else `Key` (`a["b c"]`).
pub(crate) fn untyped_step(k: &str) -> PathStep {
    if is_identifier(k) {
        PathStep::Attr(k.to_owned())
    } else {
        PathStep::Key(k.to_owned())
    }
}

/// Describes a value for a type-mismatch message: `string "x"`, `number 5`, `list`, `object`.
pub(crate) fn describe(v: &Value) -> String {
    match v.unwrap_dynamic() {
        Value::Null => "null".into(),
        Value::Unknown => "an unknown value".into(),
        Value::Bool(b) => format!("bool {b}"),
        Value::Number(n) => format!("number {}", n.as_str()),
        Value::String(s) => {
            if s.chars().count() > 40 {
                let short: String = s.chars().take(37).collect();
                format!("string {}...", quote(&short))
            } else {
                format!("string {}", quote(s))
            }
        }
        Value::List(items) => format!(
            "list of {} element{}",
            items.len(),
            if items.len() == 1 { "" } else { "s" }
        ),
        Value::Map(_) => "object".into(),
        Value::Dynamic { .. } => unreachable!("unwrapped above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render() {
        let path = vec![
            PathStep::Attr("disk".into()),
            PathStep::Index(0),
            PathStep::Attr("tags".into()),
            PathStep::Key("a\"b".into()),
        ];
        assert_eq!(render_path(&path), r#"disk[0].tags["a\"b"]"#);
        let err = ValueError::new("expected number, got string \"x\"")
            .within(PathStep::Attr("size".into()))
            .within(PathStep::Index(0))
            .within(PathStep::Attr("disk".into()));
        assert_eq!(
            err.to_string(),
            "at disk[0].size: expected number, got string \"x\""
        );
        assert_eq!(ValueError::new("boom").to_string(), "boom");
    }

    #[test]
    fn equality_looks_through_dynamic_and_numbers() {
        let a = Value::Dynamic {
            ty: Type::String,
            value: Box::new("x".into()),
        };
        assert_eq!(a, Value::from("x"));
        assert_eq!(Value::Number("1.0".parse().unwrap()), Value::from(1i64));
        assert_ne!(Value::Null, Value::Unknown);
        assert_eq!(Value::Unknown, Value::Unknown);
    }

    #[test]
    fn known_and_paths() {
        let v = Value::object([
            ("a", Value::List(vec![Value::from(1i64), Value::Unknown])),
            ("m", Value::object([("k", Value::from("v"))])),
            ("u", Value::Unknown),
        ]);
        assert!(!v.is_known());
        assert!(Value::object([("a", Value::Null)]).is_known());
        let p = |s: &[PathStep]| v.get_path(s).cloned();
        assert_eq!(
            p(&[PathStep::Attr("a".into()), PathStep::Index(0)]),
            Some(Value::from(1i64))
        );
        assert_eq!(p(&[PathStep::Attr("a".into()), PathStep::Index(5)]), None);
        assert_eq!(
            p(&[PathStep::Attr("m".into()), PathStep::Key("k".into())]),
            Some(Value::from("v"))
        );
        assert_eq!(
            p(&[PathStep::Attr("u".into()), PathStep::Attr("deep".into())]),
            Some(Value::Unknown)
        );
        assert_eq!(p(&[PathStep::Attr("nope".into())]), None);
    }

    #[test]
    fn display() {
        let v = Value::object([
            ("a", Value::List(vec![Value::from(1i64), Value::Unknown])),
            ("b c", Value::Null),
            ("s", Value::from("x")),
        ]);
        assert_eq!(
            v.to_string(),
            r#"{a = [1, (known after apply)], "b c" = null, s = "x"}"#
        );
    }

    #[test]
    fn concrete_types() {
        let template = Type::object(
            [
                ("n".to_owned(), Type::String),
                ("d".to_owned(), Type::Dynamic),
            ]
            .into(),
        );
        let v = Value::object([
            ("n", Value::Null),
            ("d", Value::List(vec![Value::from(true)])),
        ]);
        assert_eq!(
            v.concrete_type(&template),
            Type::object(
                [
                    ("n".to_owned(), Type::String),
                    ("d".to_owned(), Type::Tuple(vec![Type::Bool]))
                ]
                .into()
            )
        );
        assert_eq!(Value::Null.concrete_type(&Type::Dynamic), Type::Dynamic);
    }
}
