//! Tests of the plan rules: shared fixtures here, one file per rule set.

mod compatible;
mod diff;
mod drift;
mod end_to_end;
mod ignore;
mod legacy;
mod proposed;
mod replace;
mod validity;

use super::*;
pub(super) use crate::schema::{
    AttrType, Attribute, Block, BlockNesting, NestedBlock, NestedObject, ObjectNesting,
};
use crate::value::json::{from_plain_json, from_state_json, to_plain_json, to_state_json};
use crate::value::msgpack;
pub(super) use crate::value::{render_path, PathStep, Type, Value};
use serde_json::json;

fn t(s: &str) -> Type {
    Type::from_json(s.as_bytes()).unwrap()
}

fn block(attrs: Vec<(&str, Attribute)>, blocks: Vec<(&str, BlockNesting, Block)>) -> Block {
    Block {
        attributes: attrs.into_iter().map(|(k, a)| (k.to_owned(), a)).collect(),
        block_types: blocks
            .into_iter()
            .map(|(k, nesting, block)| {
                (
                    k.to_owned(),
                    NestedBlock {
                        block,
                        nesting,
                        min_items: 0,
                        max_items: 0,
                    },
                )
            })
            .collect(),
        ..Block::default()
    }
}

// Long because it is one literal schema covering every attribute and nesting kind the tests use.
fn schema() -> Block {
    let ports = NestedObject {
        attributes: [
            ("port".to_owned(), Attribute::optional(Type::Number)),
            (
                "proto".to_owned(),
                Attribute::optional_computed(Type::String),
            ),
        ]
        .into(),
        nesting: ObjectNesting::List,
    };
    block(
        vec![
            ("id", Attribute::computed(Type::String)),
            ("arn", Attribute::computed(Type::String)),
            ("name", Attribute::required(Type::String)),
            ("size", Attribute::optional_computed(Type::Number)),
            ("tags", Attribute::optional(t(r#"["map","string"]"#))),
            (
                "secret",
                Attribute {
                    sensitive: true,
                    ..Attribute::optional(Type::String)
                },
            ),
            (
                "wo",
                Attribute {
                    write_only: true,
                    ..Attribute::optional(Type::String)
                },
            ),
            (
                "ports",
                Attribute {
                    ty: AttrType::Nested(ports),
                    ..Attribute::optional_computed(Type::String)
                },
            ),
        ],
        vec![
            (
                "disk",
                BlockNesting::List,
                block(
                    vec![
                        ("size", Attribute::required(Type::Number)),
                        ("uuid", Attribute::computed(Type::String)),
                        ("label", Attribute::optional(Type::String)),
                    ],
                    vec![],
                ),
            ),
            (
                "rule",
                BlockNesting::Set,
                block(
                    vec![
                        ("port", Attribute::required(Type::Number)),
                        ("rid", Attribute::computed(Type::String)),
                    ],
                    vec![],
                ),
            ),
            (
                "named",
                BlockNesting::Map,
                block(
                    vec![
                        ("v", Attribute::optional(Type::String)),
                        ("c", Attribute::computed(Type::String)),
                    ],
                    vec![],
                ),
            ),
            (
                "boot",
                BlockNesting::Single,
                block(
                    vec![
                        ("dev", Attribute::optional(Type::String)),
                        ("c", Attribute::computed(Type::String)),
                    ],
                    vec![],
                ),
            ),
            (
                "timeouts",
                BlockNesting::Group,
                block(vec![("create", Attribute::optional(Type::String))], vec![]),
            ),
        ],
    )
}

/// A conforming config from plain JSON; the string "?" stands for an unknown.
fn config(s: &Block, j: serde_json::Value) -> Value {
    let v = crate::value::json::from_plain_json_with(&j, &mut |_| None);
    s.conform_config(&unknowns(v)).unwrap()
}

/// A state-shaped value (all attributes present) from plain JSON; "?" is unknown.
fn state(s: &Block, j: serde_json::Value) -> Value {
    let v = from_state_json(&j, &s.implied_type()).unwrap();
    unknowns(v)
}

fn unknowns(v: Value) -> Value {
    match v {
        Value::String(s) if s == "?" => Value::Unknown,
        Value::List(items) => Value::List(items.into_iter().map(unknowns).collect()),
        Value::Map(map) => Value::Map(map.into_iter().map(|(k, v)| (k, unknowns(v))).collect()),
        Value::Dynamic { ty, value } => Value::Dynamic {
            ty,
            value: Box::new(unknowns(*value)),
        },
        v => v,
    }
}

fn plain(v: &Value) -> serde_json::Value {
    // Unknowns shown as "?" for compact assertions.
    fn mark(v: &Value) -> Value {
        match v.unwrap_dynamic() {
            Value::Unknown => Value::from("?"),
            Value::List(items) => Value::List(items.iter().map(mark).collect()),
            Value::Map(map) => Value::Map(map.iter().map(|(k, v)| (k.clone(), mark(v))).collect()),
            v => v.clone(),
        }
    }
    to_plain_json(&mark(v)).unwrap()
}

fn prior_state(s: &Block) -> Value {
    state(
        s,
        json!({
            "id": "i-1", "arn": "arn:1", "name": "n", "size": 5, "tags": {"a": "1"},
            "ports": [{"port": 80, "proto": "tcp"}],
            "disk": [{"size": 10, "uuid": "u1", "label": null}],
            "rule": [{"port": 80, "rid": "r80"}, {"port": 443, "rid": "r443"}],
            "named": {"a": {"v": "x", "c": "cx"}},
            "boot": {"dev": "sda", "c": "cb"},
            "timeouts": {"create": null},
        }),
    )
}

/// The rule's answer as text, as the engine shows it.
pub(super) fn assert_plan_valid(
    schema: &Block,
    prior: &Value,
    config: &Value,
    planned: &Value,
) -> Vec<String> {
    texts(super::assert_plan_valid(schema, prior, config, planned))
}

/// The rule's answer as text, as the engine shows it.
pub(super) fn assert_object_compatible(
    schema: &Block,
    planned: &Value,
    actual: &Value,
) -> Vec<String> {
    texts(super::assert_object_compatible(schema, planned, actual))
}

fn texts(violations: Vec<RuleViolation>) -> Vec<String> {
    violations.iter().map(ToString::to_string).collect()
}
