//! Turning an IR attribute tree into a provider value, resolving references from state.
//!
//! A `__ref`/`__sensitiveRef` to an object that is recorded and settled resolves to its
//! attribute (TF→TF, no Nix needed); to an object that is still pending it becomes unknown and
//! the resource waits for it. A `__derived` leaf is unknown until Nix re-evaluates with its
//! inputs (*→Nix). A `__build` leaf is its store path, realised before apply. A `__sensitive`
//! value (computed by Nix from a secret) is its inside, resolved the same way.
//!
//! Every value taken from a sensitive output or a `__sensitive` leaf makes the top-level
//! attribute holding it sensitive (recorded so in state, masked in every printout) and is
//! remembered by [`crate::secrets`] so that no copy of it is printed either.

use serde_json::Value as Json;

use super::events::Wait;
use crate::ir::{PathStep, Tree};
use crate::secrets::Redactor;
use crate::value::{self, Value};

/// What the owner knows about a referenced object.
pub(super) enum Lookup<'a> {
    /// Recorded and not about to change: its attributes and the paths marked sensitive
    /// (JSON arrays, as in state).
    Settled(&'a Json, &'a [Json]),
    /// Planned in this phase (plan mode): the planned object, unknown where the provider
    /// does not know yet, and its sensitive paths.
    Planned(&'a Value, &'a [Json]),
    /// Will be (re)applied or is itself waiting.
    Pending,
}

/// The outcome of resolving one tree.
#[derive(Debug)]
pub(super) struct Resolved {
    /// The value, unknown where not yet known.
    pub(crate) value: Value,
    /// What it waits on.
    pub(crate) waits: Vec<Wait>,
    /// Build outputs it uses: (path, drv path).
    pub(crate) builds: Vec<(String, Option<String>)>,
    /// References that point at attributes the object does not have.
    pub(crate) errors: Vec<String>,
    /// Top-level attributes whose value came from a sensitive output: they are recorded as
    /// sensitive too, so the secret never reaches Nix through the referencing resource.
    pub(crate) sensitive: Vec<String>,
    /// Set while walking when a sensitive value was substituted.
    touched_sensitive: bool,
}

/// Resolves `tree` using `lookup` for referenced ids.
pub(super) fn resolve<'a>(
    tree: &Tree,
    lookup: &dyn Fn(&str) -> Lookup<'a>,
    redactor: &Redactor,
) -> Resolved {
    let mut out = Resolved {
        value: Value::Null,
        waits: Vec::new(),
        builds: Vec::new(),
        errors: Vec::new(),
        sensitive: Vec::new(),
        touched_sensitive: false,
    };
    out.value = match tree {
        Tree::Object(map) => Value::Map(
            map.iter()
                .map(|(k, t)| {
                    out.touched_sensitive = false;
                    let v = walk(t, lookup, redactor, &mut out);
                    if out.touched_sensitive {
                        out.sensitive.push(k.clone());
                    }
                    (k.clone(), v)
                })
                .collect(),
        ),
        other => walk(other, lookup, redactor, &mut out),
    };
    out.waits.sort();
    out.waits.dedup();
    out
}

fn walk<'a>(
    tree: &Tree,
    lookup: &dyn Fn(&str) -> Lookup<'a>,
    redactor: &Redactor,
    out: &mut Resolved,
) -> Value {
    match tree {
        Tree::Null => Value::Null,
        Tree::Bool(b) => Value::Bool(*b),
        Tree::Number(n) => Value::Number(n.clone()),
        Tree::String(s) => Value::String(s.clone()),
        Tree::List(items) => Value::List(
            items
                .iter()
                .map(|t| walk(t, lookup, redactor, out))
                .collect(),
        ),
        Tree::Object(map) => Value::Map(
            map.iter()
                .map(|(k, t)| (k.clone(), walk(t, lookup, redactor, out)))
                .collect(),
        ),
        Tree::Ref(r) | Tree::SensitiveRef(r) => match lookup(&r.resource) {
            Lookup::Settled(attrs, sensitive) => match follow(attrs, &r.path) {
                Ok(json) => {
                    if matches!(tree, Tree::SensitiveRef(_)) || is_sensitive(&r.path, sensitive) {
                        out.touched_sensitive = true;
                        redactor.remember_json(json);
                    }
                    value::json::from_plain_json(json)
                }
                Err(e) => {
                    out.errors.push(format!(
                        "reference to {}{}: {e}",
                        r.resource,
                        render(&r.path)
                    ));
                    Value::Unknown
                }
            },
            Lookup::Planned(planned, sensitive) => {
                let v = follow_planned(planned, &r.path);
                if matches!(tree, Tree::SensitiveRef(_)) || is_sensitive(&r.path, sensitive) {
                    out.touched_sensitive = true;
                    redactor.remember_value(&v);
                }
                v
            }
            Lookup::Pending => {
                out.waits.push(Wait::Resource(r.resource.clone()));
                Value::Unknown
            }
        },
        Tree::Derived(inputs) => {
            for input in inputs {
                out.waits.push(Wait::Nix {
                    resource: input.resource.clone(),
                    attribute: input.attr.clone(),
                });
            }
            Value::Unknown
        }
        Tree::Build(b) => {
            out.builds.push((b.path.clone(), b.drv_path.clone()));
            Value::String(b.path.clone())
        }
        // An ephemeral value is a secret too; that it is never stored is checked before any
        // plan (`engine::ephemeral`), and write-only attributes are nulled before recording.
        Tree::Sensitive(inner) | Tree::Ephemeral(inner) => {
            out.touched_sensitive = true;
            let v = walk(inner, lookup, redactor, out);
            redactor.remember_value(&v);
            v
        }
    }
}

/// Whether `path` lies within (or contains) one of the sensitive paths.
fn is_sensitive(path: &[PathStep], sensitive: &[Json]) -> bool {
    sensitive.iter().filter_map(Json::as_array).any(|s| {
        s.iter().zip(path).all(|(a, b)| match (a, b) {
            (Json::String(x), PathStep::Key(y)) => x == y,
            (Json::Number(x), PathStep::Index(y)) => x.as_u64() == Some(*y),
            _ => false,
        })
    })
}

/// The planned value at `path`: unknown where the plan does not know it, or where the path
/// leads nowhere yet (the object is not made; a wrong path is reported once it is).
fn follow_planned(value: &Value, path: &[PathStep]) -> Value {
    if let Value::Dynamic { value: inner, .. } = value {
        return follow_planned(inner, path);
    }
    let Some((step, rest)) = path.split_first() else {
        return value.clone();
    };
    match (step, value) {
        (_, Value::Null) => Value::Null,
        (PathStep::Key(k), Value::Map(m)) => {
            m.get(k).map_or(Value::Unknown, |v| follow_planned(v, rest))
        }
        (PathStep::Index(n), Value::List(items)) => items
            .get(*n as usize)
            .map_or(Value::Unknown, |v| follow_planned(v, rest)),
        _ => Value::Unknown,
    }
}

/// The value at `path` in an object as `found`: unknown while it is pending or where a plan does
/// not know it yet; null where a recorded object has nothing there.
pub(super) fn output_at(found: Lookup<'_>, path: &[PathStep]) -> Value {
    match found {
        Lookup::Settled(attrs, _) => {
            follow(attrs, path).map_or(Value::Null, value::json::from_plain_json)
        }
        Lookup::Planned(planned, _) => follow_planned(planned, path),
        Lookup::Pending => Value::Unknown,
    }
}

static NULL: Json = Json::Null;

/// Why a recorded value has nothing at a reference's path.
#[derive(Debug)]
enum FollowError {
    /// An object without the key.
    NoKey(String),
    /// A list shorter than the index.
    OutOfRange { index: u64, len: usize },
    /// A value that cannot be stepped into that way.
    WrongKind { step: PathStep, found: &'static str },
}

impl std::fmt::Display for FollowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FollowError::NoKey(k) => write!(f, "it has no attribute or key {k:?}"),
            FollowError::OutOfRange { index, len } => {
                write!(f, "index {index} is out of range (it has {len} elements)")
            }
            FollowError::WrongKind { step, found } => write!(
                f,
                "cannot apply {} to a {found}",
                render(std::slice::from_ref(step))
            ),
        }
    }
}

fn follow<'j>(mut json: &'j Json, path: &[PathStep]) -> Result<&'j Json, FollowError> {
    for (i, step) in path.iter().enumerate() {
        if json.is_null() {
            return Ok(&NULL);
        }
        json = match (step, json) {
            (PathStep::Key(k), Json::Object(m)) => match m.get(k) {
                Some(v) => v,
                // cty/json wraps dynamic values as {"value":…, "type":…}.
                None => match (m.get("value"), m.get("type")) {
                    (Some(inner), Some(_)) if m.len() == 2 => follow(inner, &path[i..])?,
                    _ => return Err(FollowError::NoKey(k.clone())),
                },
            },
            (PathStep::Index(n), Json::Array(items)) => {
                items.get(*n as usize).ok_or(FollowError::OutOfRange {
                    index: *n,
                    len: items.len(),
                })?
            }
            (step, other) => {
                return Err(FollowError::WrongKind {
                    step: step.clone(),
                    found: kind(other),
                })
            }
        };
    }
    Ok(json)
}

fn kind(json: &Json) -> &'static str {
    match json {
        Json::Null => "null",
        Json::Bool(_) => "bool",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "list",
        Json::Object(_) => "object",
    }
}

fn render(path: &[PathStep]) -> String {
    let mut s = String::new();
    for step in path {
        match step {
            PathStep::Key(k)
                if k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
            {
                s.push('.');
                s.push_str(k);
            }
            PathStep::Key(k) => s.push_str(&format!("[{k:?}]")),
            PathStep::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ir::{DerivedInput, Ref};

    #[test]
    // Long because it is one table of cases, each a few lines.
    fn refs_resolve_wait_or_fail() {
        let attrs =
            json!({"id": "a-1", "net": [{"ip": "10.0.0.1"}], "tags": {"env": "prod"}, "opt": null});
        let tree = Tree::Object(
            [
                (
                    "ip".to_string(),
                    Tree::Ref(Ref {
                        resource: "x".into(),
                        path: vec![
                            PathStep::Key("net".into()),
                            PathStep::Index(0),
                            PathStep::Key("ip".into()),
                        ],
                    }),
                ),
                (
                    "env".to_string(),
                    Tree::Ref(Ref {
                        resource: "x".into(),
                        path: vec![PathStep::Key("tags".into()), PathStep::Key("env".into())],
                    }),
                ),
                (
                    "deep".to_string(),
                    Tree::Ref(Ref {
                        resource: "x".into(),
                        path: vec![PathStep::Key("opt".into()), PathStep::Key("a".into())],
                    }),
                ),
                (
                    "later".to_string(),
                    Tree::Ref(Ref {
                        resource: "y".into(),
                        path: vec![PathStep::Key("id".into())],
                    }),
                ),
                (
                    "bad".to_string(),
                    Tree::Ref(Ref {
                        resource: "x".into(),
                        path: vec![PathStep::Key("nope".into())],
                    }),
                ),
                (
                    "nix".to_string(),
                    Tree::Derived(vec![DerivedInput {
                        resource: "y".into(),
                        attr: "id".into(),
                    }]),
                ),
            ]
            .into_iter()
            .collect(),
        );
        let redactor = Redactor::new();
        let r = resolve(
            &tree,
            &|id| {
                if id == "x" {
                    Lookup::Settled(&attrs, &[])
                } else {
                    Lookup::Pending
                }
            },
            &redactor,
        );
        let m = r.value.as_map().unwrap();
        assert_eq!(m["ip"], Value::String("10.0.0.1".into()));
        assert_eq!(m["env"], Value::String("prod".into()));
        assert_eq!(m["deep"], Value::Null);
        assert_eq!(m["later"], Value::Unknown);
        assert_eq!(m["nix"], Value::Unknown);
        assert_eq!(r.errors.len(), 1);
        assert!(r.errors[0].contains("x.nope"), "{:?}", r.errors);
        assert_eq!(
            r.waits,
            vec![
                Wait::Nix {
                    resource: "y".into(),
                    attribute: "id".into()
                },
                Wait::Resource("y".into())
            ]
        );
        assert!(r.sensitive.is_empty());
        let secret = [json!(["tags"])];
        let r = resolve(
            &tree,
            &|id| {
                if id == "x" {
                    Lookup::Settled(&attrs, &secret)
                } else {
                    Lookup::Pending
                }
            },
            &redactor,
        );
        assert_eq!(
            r.sensitive,
            ["env"],
            "a value read from a sensitive attribute stays sensitive"
        );
    }

    #[test]
    fn a_sensitive_value_is_its_inside_and_marks_its_attribute() {
        let attrs = json!({"id": "a-1"});
        let tree = Tree::Object(
            [
                (
                    "conn".to_string(),
                    Tree::Sensitive(Box::new(Tree::List(vec![
                        Tree::String("resolve-test-secret".into()),
                        Tree::Ref(Ref {
                            resource: "x".into(),
                            path: vec![PathStep::Key("id".into())],
                        }),
                    ]))),
                ),
                ("plain".to_string(), Tree::String("p".into())),
            ]
            .into_iter()
            .collect(),
        );
        let redactor = Redactor::new();
        let r = resolve(&tree, &|_| Lookup::Settled(&attrs, &[]), &redactor);
        let m = r.value.as_map().unwrap();
        assert_eq!(
            m["conn"],
            Value::List(vec![
                Value::String("resolve-test-secret".into()),
                Value::String("a-1".into())
            ])
        );
        assert_eq!(r.sensitive, ["conn"]);
        assert_eq!(
            redactor.redact("x resolve-test-secret"),
            "x (sensitive value)",
            "remembered for redaction"
        );
    }
}
