//! ProposedNew: the merge of prior state and configuration that core sends to the provider as
//! `proposed_new_state` (section 4.3 of the protocol notes), and the all-unknown plan of a data
//! source.

use std::collections::BTreeMap;

use super::shape::{child, Shape, NULL, UNKNOWN};
use crate::schema::{
    AttrType, Attribute, Block, BlockNesting, NestedBlock, NestedObject, ObjectNesting,
};
use crate::value::{Type, Value};

/// ProposedNew(schema, prior, config): what core proposes as the new object before the provider
/// plans (section 4.3). Computed attributes left null in configuration keep their prior value;
/// every other attribute takes the configuration's value; nested blocks and nested attribute
/// objects are merged element by element (lists by index, maps by key, sets by matching each
/// configured element with a prior element that could have come from it). A null prior is a
/// create; both null gives null.
pub fn proposed_new(schema: &Block, prior: &Value, config: &Value) -> Value {
    if config.is_null() && prior.is_null() {
        return Value::Null;
    }
    proposed_new_object(Shape::Block(schema), prior, config)
}

/// The object a data source is planned as when it cannot be read yet: the configuration, with
/// every computed attribute it leaves unset unknown (ProposedNew against a wholly unknown prior).
pub(crate) fn planned_unknown_for_data(schema: &Block, config: &Value) -> Value {
    proposed_new_object(Shape::Block(schema), &UNKNOWN, config)
}

fn proposed_new_object(shape: Shape<'_>, prior: &Value, config: &Value) -> Value {
    let cfg = match config.unwrap_dynamic() {
        Value::Map(map) => map,
        // A block body is never null or unknown in a conforming config, except as a whole
        // (dynamic blocks): keep the prior object then. A nested object stays as configured.
        _ => {
            return match shape {
                Shape::Block(_) => prior.clone(),
                Shape::Object(_) => config.clone(),
            }
        }
    };
    let mut out = BTreeMap::new();
    for (name, attr) in shape.attributes() {
        let cv = cfg.get(name).unwrap_or(&NULL);
        out.insert(
            name.clone(),
            proposed_new_attribute(attr, child(prior, name), cv),
        );
    }
    for (name, nb) in shape.blocks().into_iter().flatten() {
        let cv = cfg.get(name).unwrap_or(&NULL);
        out.insert(name.clone(), proposed_new_block(nb, child(prior, name), cv));
    }
    Value::Map(out)
}

fn proposed_new_attribute(attr: &Attribute, prior: &Value, config: &Value) -> Value {
    if attr.computed && config.is_null() {
        // An optional+computed nested object whose prior holds values the provider could
        // not have computed must have been configured before: it is being removed.
        if attr.optional && has_non_computed_values(attr, prior) {
            return config.clone();
        }
        return prior.clone();
    }
    match &attr.ty {
        AttrType::Nested(obj) => proposed_new_nested_type(obj, prior, config),
        AttrType::Type(_) => config.clone(),
    }
}

/// Whether a nested attribute's value holds a non-null value of a non-computed attribute at
/// any depth (OpenTofu's `optionalValueNotComputable`).
fn has_non_computed_values(attr: &Attribute, value: &Value) -> bool {
    let AttrType::Nested(obj) = &attr.ty else {
        return false;
    };
    let mut found = false;
    for_each_object(value, obj.nesting == ObjectNesting::Single, &mut |elem| {
        for (name, a) in &obj.attributes {
            let v = child(elem, name);
            if v.is_null() {
                continue;
            }
            if !a.computed || has_non_computed_values(a, v) {
                found = true;
            }
        }
    });
    found
}

/// Calls `f` with each known, non-null object of a nested value: the value itself (`single`)
/// or the elements of a list or map of objects. Like cty's walk, unknowns are not entered.
fn for_each_object(value: &Value, single: bool, f: &mut dyn FnMut(&Value)) {
    let mut visit = |v: &Value| {
        if let v @ Value::Map(_) = v.unwrap_dynamic() {
            f(v);
        }
    };
    match value.unwrap_dynamic() {
        v if single => visit(v),
        Value::List(items) => items.iter().for_each(visit),
        Value::Map(map) => map.values().for_each(visit),
        _ => {}
    }
}

fn proposed_new_nested_type(obj: &NestedObject, prior: &Value, config: &Value) -> Value {
    if config.is_unknown() {
        return config.clone();
    }
    let shape = Shape::Object(obj);
    match obj.nesting {
        ObjectNesting::Single if config.is_null() => Value::Null,
        ObjectNesting::Single => proposed_new_object(shape, prior, config),
        ObjectNesting::List => proposed_new_list(shape, prior, config),
        ObjectNesting::Map => proposed_new_map(shape, prior, config),
        ObjectNesting::Set => proposed_new_set(shape, prior, config),
    }
}

fn proposed_new_block(nb: &NestedBlock, prior: &Value, config: &Value) -> Value {
    if config.is_unknown() {
        return config.clone();
    }
    let shape = Shape::Block(&nb.block);
    match nb.nesting {
        BlockNesting::Single if config.is_null() => Value::Null,
        BlockNesting::Single | BlockNesting::Group => proposed_new_object(shape, prior, config),
        BlockNesting::List => nb.wrap_dynamic(proposed_new_list(shape, prior, config)),
        BlockNesting::Map => nb.wrap_dynamic(proposed_new_map(shape, prior, config)),
        BlockNesting::Set => proposed_new_set(shape, prior, config),
    }
}

fn proposed_new_list(shape: Shape<'_>, prior: &Value, config: &Value) -> Value {
    let items = match config.unwrap_dynamic() {
        Value::List(items) if !items.is_empty() => items,
        _ => return config.clone(),
    };
    let prior = prior.unwrap_dynamic();
    let out = items
        .iter()
        .enumerate()
        .map(|(i, cv)| match prior {
            Value::Unknown => proposed_new_object(shape, &UNKNOWN, cv),
            Value::List(p) if i < p.len() => proposed_new_object(shape, &p[i], cv),
            _ => cv.clone(),
        })
        .collect();
    Value::List(out)
}

fn proposed_new_map(shape: Shape<'_>, prior: &Value, config: &Value) -> Value {
    let map = match config.unwrap_dynamic() {
        Value::Map(map) if !map.is_empty() => map,
        _ => return config.clone(),
    };
    let prior = prior.as_map();
    let out = map
        .iter()
        .map(|(k, cv)| {
            let v = match prior.and_then(|p| p.get(k)) {
                Some(pv) => proposed_new_object(shape, pv, cv),
                None => cv.clone(),
            };
            (k.clone(), v)
        })
        .collect();
    Value::Map(out)
}

fn proposed_new_set(shape: Shape<'_>, prior: &Value, config: &Value) -> Value {
    let items = match config.unwrap_dynamic() {
        Value::List(items) if !items.is_empty() => items,
        _ => return config.clone(),
    };
    let prior_items = prior.as_list().unwrap_or(&[]);
    let mut used = vec![false; prior_items.len()];
    let out = items
        .iter()
        .map(|cv| {
            let mut matched = &NULL;
            for (i, pv) in prior_items.iter().enumerate() {
                if !used[i] && valid_prior_from_config(shape, pv, cv) {
                    used[i] = true;
                    matched = pv;
                    break;
                }
            }
            proposed_new_object(shape, matched, cv)
        })
        .collect();
    Value::List(out)
}

/// Whether a prior set element could have been produced from a configured one: they differ
/// only in computed attributes that the configuration leaves null (nested sets must be equal).
fn valid_prior_from_config(shape: Shape<'_>, prior: &Value, config: &Value) -> bool {
    if prior == config {
        return true;
    }
    let Value::Map(pm) = prior.unwrap_dynamic() else {
        return true;
    };
    let cm = match config.unwrap_dynamic() {
        Value::Map(map) => Some(map),
        Value::Unknown => None,
        _ => return false,
    };
    let cfg_child = |name: &str| cm.map_or(&UNKNOWN, |m| m.get(name).unwrap_or(&NULL));
    for (name, attr) in shape.attributes() {
        let (pv, cv) = (pm.get(name).unwrap_or(&NULL), cfg_child(name));
        if pv == cv {
            continue;
        }
        let ok = match &attr.ty {
            AttrType::Type(Type::Set(_)) => false,
            AttrType::Type(_) => attr.computed && cv.is_null(),
            AttrType::Nested(obj) => match obj.nesting {
                ObjectNesting::Set => false,
                ObjectNesting::Single => valid_prior_from_config(Shape::Object(obj), pv, cv),
                ObjectNesting::List | ObjectNesting::Map => {
                    valid_prior_elements(Shape::Object(obj), pv, cv)
                }
            },
        };
        if !ok {
            return false;
        }
    }
    for (name, nb) in shape.blocks().into_iter().flatten() {
        let (pv, cv) = (pm.get(name).unwrap_or(&NULL), cfg_child(name));
        if pv == cv {
            continue;
        }
        let shape = Shape::Block(&nb.block);
        let ok = match nb.nesting {
            BlockNesting::Set => false,
            BlockNesting::Single | BlockNesting::Group => valid_prior_from_config(shape, pv, cv),
            BlockNesting::List | BlockNesting::Map => valid_prior_elements(shape, pv, cv),
        };
        if !ok {
            return false;
        }
    }
    true
}

/// [`valid_prior_from_config`] over correlated elements of a list or map of objects; a prior
/// element with no counterpart in the configuration makes the match invalid.
fn valid_prior_elements(shape: Shape<'_>, prior: &Value, config: &Value) -> bool {
    let config = config.unwrap_dynamic();
    match prior.unwrap_dynamic() {
        Value::List(p) => p.iter().enumerate().all(|(i, pv)| {
            let cv = match config {
                Value::Unknown => &UNKNOWN,
                Value::List(c) => match c.get(i) {
                    Some(cv) => cv,
                    None => return false,
                },
                _ => return false,
            };
            valid_prior_from_config(shape, pv, cv)
        }),
        Value::Map(p) => p.iter().all(|(k, pv)| {
            let cv = match config {
                Value::Unknown => &UNKNOWN,
                Value::Map(c) => match c.get(k) {
                    Some(cv) => cv,
                    None => return false,
                },
                _ => return false,
            };
            valid_prior_from_config(shape, pv, cv)
        }),
        _ => true,
    }
}
