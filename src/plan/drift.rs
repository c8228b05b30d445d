//! Whether an object read back from its provider differs from its record (DESIGN §90).
//!
//! Owns: the comparison refresh uses to decide that an object changed outside Nivis, and the
//! form of both values the drift report lists. Not: whether drift makes a plan a change
//! (`render::summary`), reading objects (`engine::node`), or any rendering.
//!
//! The rule is the one Terraform applies to SDKv2 providers (`ValuesSDKEquivalent`): a null
//! collection and an empty one are the same value. An SDKv2 provider cannot tell them apart
//! (its flatmap state has no null), so it answers create with one and read with the other, and
//! that is no change to the real object. Anything else that differs is drift, values a
//! provider or the server added included; whether that drift is a change the plan must carry
//! out is decided from the plan's actions, not here.

use std::collections::BTreeMap;

use crate::value::{Type, Value};

/// Whether `read` differs from `recorded` (both of type `ty`), a null collection and an empty
/// one being the same. Unknown anywhere means "may differ", as [`super::values_equal`] says.
pub(crate) fn drifted(recorded: &Value, read: &Value, ty: &Type) -> bool {
    !super::values_equal(&empty_as_null(recorded, ty), &empty_as_null(read, ty))
}

/// `v` with every empty list, set or map (at any depth) replaced by null: the form both sides
/// of a drift comparison, and of its report, take.
pub(crate) fn empty_as_null(v: &Value, ty: &Type) -> Value {
    match (v, ty) {
        (Value::List(items), Type::List(_) | Type::Set(_)) if items.is_empty() => Value::Null,
        (Value::Map(map), Type::Map(_)) if map.is_empty() => Value::Null,
        (Value::List(items), Type::List(elem) | Type::Set(elem)) => {
            Value::List(items.iter().map(|i| empty_as_null(i, elem)).collect())
        }
        (Value::List(items), Type::Tuple(types)) => Value::List(
            items
                .iter()
                .zip(types)
                .map(|(i, t)| empty_as_null(i, t))
                .collect(),
        ),
        (Value::Map(map), Type::Map(elem)) => Value::Map(
            map.iter()
                .map(|(k, i)| (k.clone(), empty_as_null(i, elem)))
                .collect(),
        ),
        (Value::Map(map), Type::Object { attrs, .. }) => {
            let out: BTreeMap<String, Value> = map
                .iter()
                .map(|(k, i)| {
                    let t = attrs.get(k).unwrap_or(&Type::Dynamic);
                    (k.clone(), empty_as_null(i, t))
                })
                .collect();
            Value::Map(out)
        }
        (Value::Dynamic { ty, value }, _) => Value::Dynamic {
            ty: ty.clone(),
            value: Box::new(empty_as_null(value, ty)),
        },
        _ => v.clone(),
    }
}
