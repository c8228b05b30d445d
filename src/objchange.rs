//! The plan rules core applies around a provider's answers, as pure functions on values.
//!
//! Owns what OpenTofu's `internal/plans/objchange` does (sections 4.3-4.6 of the protocol
//! notes): [`proposed_new`] (the merge of prior state and configuration sent as
//! `proposed_new_state`) and [`planned_unknown_for_data`]; the checks on a provider's answers,
//! [`assert_plan_valid`] (PlanResourceChange) and [`assert_object_compatible`]
//! (ApplyResourceChange, and a re-plan against the saved plan); [`filter_requires_replace`];
//! [`normalize_object_from_legacy_sdk`] (ReadResource); [`apply_ignore_changes`]; and the
//! helpers that compare and list changes ([`values_equal`], [`diff`]).
//!
//! Not: deciding actions or lifecycle (the engine does, from these answers), downgrading check
//! failures to warnings for `legacy_type_system` (the caller does), rendering, or any I/O.
//! Inputs are assumed to conform to the schema's implied type; where they do not, the
//! functions degrade gracefully (a missing attribute reads as null) rather than panic.

use std::collections::{BTreeMap, BTreeSet};

use crate::schema::{
    AttrType, Attribute, Block, BlockNesting, NestedBlock, NestedObject, ObjectNesting,
};
use crate::value::{render_path, untyped_step, PathStep, Type, Value};

static NULL: Value = Value::Null;
static UNKNOWN: Value = Value::Unknown;

/// An object-shaped schema: a block (attributes and nested blocks) or a nested attribute
/// object (attributes only).
#[derive(Clone, Copy)]
enum Shape<'a> {
    Block(&'a Block),
    Object(&'a NestedObject),
}

impl<'a> Shape<'a> {
    fn attributes(self) -> &'a BTreeMap<String, Attribute> {
        match self {
            Shape::Block(b) => &b.attributes,
            Shape::Object(o) => &o.attributes,
        }
    }

    fn blocks(self) -> Option<&'a BTreeMap<String, NestedBlock>> {
        match self {
            Shape::Block(b) => Some(&b.block_types),
            Shape::Object(_) => None,
        }
    }
}

/// The attribute `name` of an object value: null inside null, unknown inside unknown.
fn child<'a>(v: &'a Value, name: &str) -> &'a Value {
    match v.unwrap_dynamic() {
        Value::Map(map) => map.get(name).unwrap_or(&NULL),
        Value::Unknown => &UNKNOWN,
        _ => &NULL,
    }
}

// ---------------------------------------------------------------------------------------------
// ProposedNew

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
pub fn planned_unknown_for_data(schema: &Block, config: &Value) -> Value {
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

// ---------------------------------------------------------------------------------------------
// Comparisons, requires_replace, ignore_changes, diff

/// Whether two values are known to be equal: both wholly known and equal (cty
/// `Equals(...).True()`). An unknown anywhere means "may differ".
pub fn values_equal(a: &Value, b: &Value) -> bool {
    a.is_known() && b.is_known() && a == b
}

/// Keeps the requires_replace paths whose value actually changes: it differs between prior and
/// planned, is unknown in the plan, or exists on one side only. Paths valid in neither are
/// dropped. For a create (null prior) nothing requires replacement.
pub fn filter_requires_replace(
    prior: &Value,
    planned: &Value,
    paths: &[Vec<PathStep>],
) -> Vec<Vec<PathStep>> {
    if prior.is_null() {
        return Vec::new();
    }
    let mut out: Vec<Vec<PathStep>> = Vec::new();
    for path in paths {
        let keep = match (prior.get_path(path), planned.get_path(path)) {
            (None, None) => false,
            (Some(a), Some(b)) => !values_equal(a, b),
            _ => true,
        };
        if keep && !out.contains(path) {
            out.push(path.clone());
        }
    }
    out
}

/// Reverts the `ignore_changes` paths of `config` to their prior values, as core does before
/// ProposedNew and before sending the configuration. A map key that the prior lacks is removed
/// from the configuration; an empty path ignores everything. With a null prior (a create) the
/// configuration is returned unchanged.
pub fn apply_ignore_changes(config: &Value, prior: &Value, paths: &[Vec<PathStep>]) -> Value {
    let mut out = config.clone();
    if prior.is_null() || config.is_null() || paths.is_empty() {
        return out;
    }
    for path in paths {
        let Some((last, parent_path)) = path.split_last() else {
            return prior.clone();
        };
        let prior_value = prior.get_path(path).cloned();
        let prior_parent_is_map = prior
            .get_path(parent_path)
            .is_some_and(|p| p.as_map().is_some());
        let Some(parent) = out.get_path_mut(parent_path) else {
            continue;
        };
        let parent = match parent {
            Value::Dynamic { value, .. } => value.as_mut(),
            p => p,
        };
        match (parent, last, prior_value) {
            (Value::Map(map), PathStep::Attr(k) | PathStep::Key(k), Some(v)) => {
                map.insert(k.clone(), v);
            }
            (Value::Map(map), PathStep::Attr(k) | PathStep::Key(k), None)
                if prior_parent_is_map =>
            {
                map.remove(k);
            }
            (Value::List(items), PathStep::Index(i), Some(v)) => {
                if let Some(slot) = usize::try_from(*i).ok().and_then(|i| items.get_mut(i)) {
                    *slot = v;
                }
            }
            _ => continue,
        }
        // Dynamic wrappers on the way down may now record a stale type.
        for len in (0..path.len()).rev() {
            if let Some(v) = out.get_path_mut(&path[..len]) {
                v.refresh_dynamic_type();
            }
        }
    }
    out
}

/// One changed leaf: its path, the prior value and the planned value (`None` when absent or
/// null on that side; an unknown planned value is `Some(Value::Unknown)`).
pub type Change = (Vec<PathStep>, Option<Value>, Option<Value>);

/// Lists the leaves that differ between `prior` and `planned`, without type information (map
/// keys render as attributes when they look like identifiers, sets compare by position).
pub fn diff(prior: &Value, planned: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    diff_walk(Some(prior), Some(planned), None, &mut Vec::new(), &mut out);
    out
}

/// Lists the leaves that differ between `prior` and `planned` of type `ty` (e.g. a block's
/// implied type): object attributes render as `.a`, map keys as `["k"]`, and a changed set is
/// one leaf (set elements have no identity to correlate).
pub fn diff_typed(prior: &Value, planned: &Value, ty: &Type) -> Vec<Change> {
    let mut out = Vec::new();
    diff_walk(
        Some(prior),
        Some(planned),
        Some(ty),
        &mut Vec::new(),
        &mut out,
    );
    out
}

fn diff_walk(
    a: Option<&Value>,
    b: Option<&Value>,
    ty: Option<&Type>,
    path: &mut Vec<PathStep>,
    out: &mut Vec<Change>,
) {
    let a = a.map(Value::unwrap_dynamic).filter(|v| !v.is_null());
    let b = b.map(Value::unwrap_dynamic).filter(|v| !v.is_null());
    let ty = ty.filter(|t| **t != Type::Dynamic);
    match (a, b) {
        (None, None) => return,
        (Some(x), Some(y)) if x == y => return,
        _ => {}
    }
    // Some(true): recurse as maps, Some(false): as lists, None: report a leaf. An empty
    // collection against an absent value is a leaf too, so that it is not lost.
    let kind = |v: &Value| match v {
        Value::Map(m) => Some(true).filter(|_| !m.is_empty()),
        Value::List(l) => Some(false).filter(|_| !l.is_empty()),
        _ => None,
    };
    let recurse = match (a, b) {
        (Some(Value::Map(_)), Some(Value::Map(_))) => Some(true),
        (Some(Value::List(_)), Some(Value::List(_))) => Some(false),
        (Some(x), None) | (None, Some(x)) => kind(x),
        _ => None,
    }
    .filter(|_| !matches!(ty, Some(Type::Set(_))));
    match recurse {
        None => out.push((path.clone(), a.cloned(), b.cloned())),
        Some(true) => {
            let empty = BTreeMap::new();
            let am = a.and_then(Value::as_map).unwrap_or(&empty);
            let bm = b.and_then(Value::as_map).unwrap_or(&empty);
            let keys: BTreeSet<&String> = am.keys().chain(bm.keys()).collect();
            for k in keys {
                let (step, elem_ty) = match ty {
                    Some(Type::Object { attrs, .. }) => (PathStep::Attr(k.clone()), attrs.get(k)),
                    Some(Type::Map(t)) => (PathStep::Key(k.clone()), Some(t.as_ref())),
                    _ => (untyped_step(k), None),
                };
                path.push(step);
                diff_walk(am.get(k), bm.get(k), elem_ty, path, out);
                path.pop();
            }
        }
        Some(false) => {
            let al = a.and_then(Value::as_list).unwrap_or(&[]);
            let bl = b.and_then(Value::as_list).unwrap_or(&[]);
            for i in 0..al.len().max(bl.len()) {
                let elem_ty = match ty {
                    Some(Type::List(t)) => Some(t.as_ref()),
                    Some(Type::Tuple(ts)) => ts.get(i),
                    _ => None,
                };
                path.push(PathStep::Index(i as u64));
                diff_walk(al.get(i), bl.get(i), elem_ty, path, out);
                path.pop();
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// AssertPlanValid

fn at(path: &[PathStep], msg: impl AsRef<str>) -> String {
    if path.is_empty() {
        msg.as_ref().to_owned()
    } else {
        format!("{}: {}", render_path(path), msg.as_ref())
    }
}

/// Checks a provider's planned object against the prior state and configuration (the main
/// rules of AssertPlanValid, section 4.4 item 2). Returns one human message per problem, each
/// starting with the attribute path; sensitive values are not shown. Callers turn these into
/// warnings when the provider reports `legacy_type_system`.
pub fn assert_plan_valid(
    schema: &Block,
    prior: &Value,
    config: &Value,
    planned: &Value,
) -> Vec<String> {
    let mut errs = Vec::new();
    plan_valid_block(schema, prior, config, planned, &mut Vec::new(), &mut errs);
    errs
}

fn plan_valid_block(
    block: &Block,
    prior: &Value,
    config: &Value,
    planned: &Value,
    path: &mut Vec<PathStep>,
    errs: &mut Vec<String>,
) {
    if planned.is_null() && !config.is_null() {
        errs.push(at(path, "planned for absence but config wants existence"));
        return;
    }
    if config.is_null() && !planned.is_null() {
        errs.push(at(path, "planned for existence but config wants absence"));
        return;
    }
    if planned.is_null() {
        return;
    }
    plan_valid_attrs(&block.attributes, prior, config, planned, path, errs);
    for (name, nb) in &block.block_types {
        let (pv, cv, plv) = (
            child(prior, name),
            child(config, name),
            child(planned, name),
        );
        path.push(PathStep::Attr(name.clone()));
        plan_valid_nested_block(nb, pv, cv, plv, path, errs);
        path.pop();
    }
}

fn plan_valid_nested_block(
    nb: &NestedBlock,
    prior: &Value,
    config: &Value,
    planned: &Value,
    path: &mut Vec<PathStep>,
    errs: &mut Vec<String>,
) {
    if planned == config {
        return;
    }
    if config.is_unknown() {
        errs.push(at(
            path,
            format!("planned value {planned} for unknown dynamic block"),
        ));
        return;
    }
    if planned.is_unknown() {
        errs.push(at(
            path,
            "attribute representing nested block must not be unknown itself; set nested attribute values to unknown instead",
        ));
        return;
    }
    const ELEMENT_UNKNOWN: &str = "element representing nested block must not be unknown itself; set nested attribute values to unknown instead";
    let kind = match nb.nesting {
        BlockNesting::Single | BlockNesting::Group => {
            return plan_valid_block(&nb.block, prior, config, planned, path, errs);
        }
        BlockNesting::List => "list",
        BlockNesting::Set => "set",
        BlockNesting::Map => "map",
    };
    if planned.is_null() {
        errs.push(at(
            path,
            format!("attribute representing a {kind} of nested blocks must be empty to indicate no blocks, not null"),
        ));
        return;
    }
    match nb.nesting {
        BlockNesting::List => {
            let planned_items = planned.as_list().unwrap_or(&[]);
            let config_items = config.as_list().unwrap_or(&[]);
            if planned_items.len() != config_items.len() {
                errs.push(at(
                    path,
                    format!(
                        "block count in plan ({}) disagrees with count in config ({})",
                        planned_items.len(),
                        config_items.len()
                    ),
                ));
                return;
            }
            let prior_items = prior.as_list().unwrap_or(&[]);
            for (i, (plv, cv)) in planned_items.iter().zip(config_items).enumerate() {
                path.push(PathStep::Index(i as u64));
                if plv.is_unknown() {
                    errs.push(at(path, ELEMENT_UNKNOWN));
                } else {
                    plan_valid_block(
                        &nb.block,
                        prior_items.get(i).unwrap_or(&NULL),
                        cv,
                        plv,
                        path,
                        errs,
                    );
                }
                path.pop();
            }
        }
        BlockNesting::Map => {
            let empty = BTreeMap::new();
            let planned_map = planned.as_map().unwrap_or(&empty);
            let config_map = config.as_map().unwrap_or(&empty);
            let prior_map = prior.as_map();
            for (k, plv) in planned_map {
                let Some(cv) = config_map.get(k) else {
                    errs.push(at(
                        path,
                        format!(
                            "block key {} from plan is not present in config",
                            crate::value::quote(k)
                        ),
                    ));
                    continue;
                };
                path.push(PathStep::Key(k.clone()));
                if plv.is_unknown() {
                    errs.push(at(path, ELEMENT_UNKNOWN));
                } else {
                    let pv = prior_map.and_then(|m| m.get(k)).unwrap_or(&NULL);
                    plan_valid_block(&nb.block, pv, cv, plv, path, errs);
                }
                path.pop();
            }
            for k in config_map.keys().filter(|k| !planned_map.contains_key(*k)) {
                errs.push(at(
                    path,
                    format!(
                        "block key {} from config is not present in plan",
                        crate::value::quote(k)
                    ),
                ));
            }
        }
        _ => {
            // Set elements have no identity to correlate; only require them to be known.
            for (i, plv) in planned.as_list().unwrap_or(&[]).iter().enumerate() {
                if plv.is_unknown() {
                    path.push(PathStep::Index(i as u64));
                    errs.push(at(path, ELEMENT_UNKNOWN));
                    path.pop();
                }
            }
        }
    }
}

fn plan_valid_attrs(
    attrs: &BTreeMap<String, Attribute>,
    prior: &Value,
    config: &Value,
    planned: &Value,
    path: &mut Vec<PathStep>,
    errs: &mut Vec<String>,
) {
    for (name, attr) in attrs {
        path.push(PathStep::Attr(name.clone()));
        plan_valid_value(
            attr,
            child(prior, name),
            child(config, name),
            child(planned, name),
            path,
            errs,
        );
        path.pop();
    }
}

fn plan_valid_value(
    attr: &Attribute,
    prior: &Value,
    config: &Value,
    planned: &Value,
    path: &mut Vec<PathStep>,
    errs: &mut Vec<String>,
) {
    if planned == config {
        return;
    }
    if planned == prior && !prior.is_null() && !config.is_null() {
        // The provider kept an equivalent prior value in favour of the configuration's.
        return;
    }
    if attr.is_computed_only() || (config.is_null() && attr.computed) {
        return;
    }
    if attr.write_only && planned.is_null() {
        return;
    }
    if config.is_null() && !planned.is_null() {
        errs.push(at(
            path,
            if attr.sensitive {
                "planned value for a non-computed attribute".to_owned()
            } else {
                format!("planned value {planned} for a non-computed attribute")
            },
        ));
        return;
    }
    if let AttrType::Nested(obj) = &attr.ty {
        return plan_valid_nested_object(obj, prior, config, planned, path, errs);
    }
    let msg = match (attr.sensitive, prior.is_null()) {
        (true, true) => "sensitive planned value does not match config value".to_owned(),
        (true, false) => {
            "sensitive planned value does not match config value nor prior value".to_owned()
        }
        (false, true) => format!("planned value {planned} does not match config value {config}"),
        (false, false) => {
            format!("planned value {planned} does not match config value {config} nor prior value {prior}")
        }
    };
    errs.push(at(path, msg));
}

fn plan_valid_nested_object(
    obj: &NestedObject,
    prior: &Value,
    config: &Value,
    planned: &Value,
    path: &mut Vec<PathStep>,
    errs: &mut Vec<String>,
) {
    if planned.is_null() && !config.is_null() {
        errs.push(at(path, "planned for absence but config wants existence"));
        return;
    }
    if config.is_null() && !planned.is_null() {
        errs.push(at(path, "planned for existence but config wants absence"));
        return;
    }
    if planned.is_null() {
        return;
    }
    let count = |v: &Value| match v.unwrap_dynamic() {
        Value::List(l) => Some(l.len()),
        Value::Map(m) => Some(m.len()),
        _ => None,
    };
    if obj.nesting != ObjectNesting::Single {
        let (pc, cc) = (count(planned), count(config));
        if pc.is_none() && cc.is_none() {
            return;
        }
        if pc.is_none() || pc != cc {
            let show = |c: Option<usize>| c.map_or_else(|| "unknown".to_owned(), |n| n.to_string());
            errs.push(at(
                path,
                format!(
                    "count in plan ({}) disagrees with count in config ({})",
                    show(pc),
                    show(cc)
                ),
            ));
            return;
        }
    }
    match obj.nesting {
        ObjectNesting::Single => {
            plan_valid_attrs(&obj.attributes, prior, config, planned, path, errs)
        }
        ObjectNesting::List => {
            let prior_items = prior.as_list().unwrap_or(&[]);
            let config_items = config.as_list().unwrap_or(&[]);
            for (i, plv) in planned.as_list().unwrap_or(&[]).iter().enumerate() {
                let Some(cv) = config_items.get(i) else {
                    continue;
                };
                path.push(PathStep::Index(i as u64));
                plan_valid_attrs(
                    &obj.attributes,
                    prior_items.get(i).unwrap_or(&NULL),
                    cv,
                    plv,
                    path,
                    errs,
                );
                path.pop();
            }
        }
        ObjectNesting::Map => {
            let empty = BTreeMap::new();
            let planned_map = planned.as_map().unwrap_or(&empty);
            let config_map = config.as_map().unwrap_or(&empty);
            let prior_map = prior.as_map();
            for (k, plv) in planned_map {
                let Some(cv) = config_map.get(k) else {
                    errs.push(at(
                        path,
                        format!(
                            "map key {} from plan is not present in config",
                            crate::value::quote(k)
                        ),
                    ));
                    continue;
                };
                path.push(PathStep::Key(k.clone()));
                let pv = prior_map.and_then(|m| m.get(k)).unwrap_or(&NULL);
                plan_valid_attrs(&obj.attributes, pv, cv, plv, path, errs);
                path.pop();
            }
            for k in config_map.keys().filter(|k| !planned_map.contains_key(*k)) {
                errs.push(at(
                    path,
                    format!(
                        "map key {} from config is not present in plan",
                        crate::value::quote(k)
                    ),
                ));
            }
        }
        // Sets: the count check above is all that can be done.
        ObjectNesting::Set => {}
    }
}

// ---------------------------------------------------------------------------------------------
// AssertObjectCompatible

/// Checks that an applied object keeps the promises of its plan (AssertObjectCompatible,
/// section 4.5): null-ness as planned, every known planned value unchanged, list and map
/// blocks with the same elements, set blocks no larger; unknown planned values may become
/// anything of their type. Also used between a saved plan and a re-plan at apply time.
pub fn assert_object_compatible(schema: &Block, planned: &Value, actual: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    object_compatible(schema, planned, actual, &mut Vec::new(), &mut errs);
    errs
}

fn object_compatible(
    block: &Block,
    planned: &Value,
    actual: &Value,
    path: &mut Vec<PathStep>,
    errs: &mut Vec<String>,
) {
    let root = if path.is_empty() { "Root object " } else { "" };
    if planned.is_null() && !actual.is_null() {
        errs.push(at(path, format!("{root}was absent, but now present")));
        return;
    }
    if actual.is_null() && !planned.is_null() {
        errs.push(at(path, format!("{root}was present, but now absent")));
        return;
    }
    if planned.is_null() {
        return;
    }
    for (name, attr) in &block.attributes {
        let (pv, av) = (child(planned, name), child(actual, name));
        path.push(PathStep::Attr(name.clone()));
        let start = errs.len();
        value_compatible(pv, av, &attr.implied_type(), path, errs);
        if attr.sensitive && errs.len() > start {
            errs.truncate(start);
            errs.push(at(path, "inconsistent values for sensitive attribute"));
        }
        path.pop();
    }
    for (name, nb) in &block.block_types {
        let (pv, av) = (child(planned, name), child(actual, name));
        path.push(PathStep::Attr(name.clone()));
        block_compatible(nb, pv, av, path, errs);
        path.pop();
    }
}

fn block_compatible(
    nb: &NestedBlock,
    planned: &Value,
    actual: &Value,
    path: &mut Vec<PathStep>,
    errs: &mut Vec<String>,
) {
    match nb.nesting {
        BlockNesting::Single | BlockNesting::Group => {
            // An unknown placeholder block may turn out to be no block at all.
            if planned.is_unknown() && actual.is_null() {
                return;
            }
            object_compatible(&nb.block, planned, actual, path, errs);
        }
        BlockNesting::List => {
            let (Some(p), Some(a)) = (planned.as_list(), actual.as_list()) else {
                return;
            };
            if p.len() != a.len() {
                errs.push(at(
                    path,
                    format!("block count changed from {} to {}", p.len(), a.len()),
                ));
                return;
            }
            for (i, (pv, av)) in p.iter().zip(a).enumerate() {
                path.push(PathStep::Index(i as u64));
                object_compatible(&nb.block, pv, av, path, errs);
                path.pop();
            }
        }
        BlockNesting::Map => {
            let (Some(p), Some(a)) = (planned.as_map(), actual.as_map()) else {
                return;
            };
            for (k, pv) in p {
                let Some(av) = a.get(k) else {
                    errs.push(at(
                        path,
                        format!("block key {} has vanished", crate::value::quote(k)),
                    ));
                    continue;
                };
                path.push(PathStep::Key(k.clone()));
                object_compatible(&nb.block, pv, av, path, errs);
                path.pop();
            }
            for k in a.keys().filter(|k| !p.contains_key(*k)) {
                errs.push(at(
                    path,
                    format!("new block key {} has appeared", crate::value::quote(k)),
                ));
            }
        }
        BlockNesting::Set => {
            let (Some(p), Some(a)) = (planned.as_list(), actual.as_list()) else {
                return;
            };
            set_compatible(p, a, path, errs, &|pv, av| {
                let mut scratch = Vec::new();
                object_compatible(&nb.block, pv, av, &mut Vec::new(), &mut scratch);
                scratch.is_empty()
            });
            if p.len() < a.len() {
                errs.push(at(
                    path,
                    format!("block set length changed from {} to {}", p.len(), a.len()),
                ));
            }
        }
    }
}

fn value_compatible(
    planned: &Value,
    actual: &Value,
    ty: &Type,
    path: &mut Vec<PathStep>,
    errs: &mut Vec<String>,
) {
    let mut ty = ty;
    if *ty == Type::Dynamic {
        // A bare null or unknown planned in a dynamic slot has no type yet: anything goes.
        let Value::Dynamic { ty: planned_ty, .. } = planned else {
            if planned.is_null() || planned.is_unknown() {
                return;
            }
            let inferred = planned.infer_type();
            return value_compatible(planned, actual, &inferred, path, errs);
        };
        if let Value::Dynamic { ty: actual_ty, .. } = actual {
            if actual_ty != planned_ty {
                errs.push(at(
                    path,
                    format!(
                        "wrong final value type: {} required, got {}",
                        planned_ty.friendly_name(),
                        actual_ty.friendly_name()
                    ),
                ));
                return;
            }
        }
        ty = planned_ty;
    }
    let (planned, actual) = (planned.unwrap_dynamic(), actual.unwrap_dynamic());
    if planned.is_unknown() {
        return;
    }
    if planned.is_null() {
        if !actual.is_null() {
            errs.push(at(path, format!("was null, but now {actual}")));
        }
        return;
    }
    if actual.is_null() {
        errs.push(at(path, format!("was {planned}, but now null")));
        return;
    }
    if actual.is_unknown() {
        errs.push(at(path, "was known, but now unknown"));
        return;
    }
    match (ty, planned, actual) {
        (Type::List(_) | Type::Tuple(_), Value::List(p), Value::List(a)) => {
            for (i, pv) in p.iter().enumerate() {
                let elem_ty = match ty {
                    Type::List(t) => t.as_ref(),
                    Type::Tuple(ts) => ts.get(i).unwrap_or(&Type::Dynamic),
                    _ => &Type::Dynamic,
                };
                match a.get(i) {
                    Some(av) => {
                        path.push(PathStep::Index(i as u64));
                        value_compatible(pv, av, elem_ty, path, errs);
                        path.pop();
                    }
                    None => errs.push(at(path, format!("element {i} has vanished"))),
                }
            }
            for i in p.len()..a.len() {
                errs.push(at(path, format!("new element {i} has appeared")));
            }
        }
        (Type::Map(elem_ty), Value::Map(p), Value::Map(a)) => {
            for (k, pv) in p {
                match a.get(k) {
                    Some(av) => {
                        path.push(PathStep::Key(k.clone()));
                        value_compatible(pv, av, elem_ty, path, errs);
                        path.pop();
                    }
                    None => errs.push(at(
                        path,
                        format!("element {} has vanished", crate::value::quote(k)),
                    )),
                }
            }
            for k in a.keys().filter(|k| !p.contains_key(*k)) {
                errs.push(at(
                    path,
                    format!("new element {} has appeared", crate::value::quote(k)),
                ));
            }
        }
        (Type::Object { attrs, .. }, Value::Map(_), Value::Map(_)) => {
            for (name, attr_ty) in attrs {
                path.push(PathStep::Attr(name.clone()));
                value_compatible(
                    child(planned, name),
                    child(actual, name),
                    attr_ty,
                    path,
                    errs,
                );
                path.pop();
            }
        }
        (Type::Set(elem_ty), Value::List(p), Value::List(a)) => {
            set_compatible(p, a, path, errs, &|pv, av| {
                let mut scratch = Vec::new();
                value_compatible(pv, av, elem_ty, &mut Vec::new(), &mut scratch);
                scratch.is_empty()
            });
        }
        _ => {
            if planned != actual {
                errs.push(at(path, format!("was {planned}, but now {actual}")));
            }
        }
    }
}

/// Each planned set element must correlate with some actual element and vice versa.
fn set_compatible(
    planned: &[Value],
    actual: &[Value],
    path: &[PathStep],
    errs: &mut Vec<String>,
    compatible: &dyn Fn(&Value, &Value) -> bool,
) {
    let mut p_ok = vec![false; planned.len()];
    let mut a_ok = vec![false; actual.len()];
    for (i, pv) in planned.iter().enumerate() {
        for (j, av) in actual.iter().enumerate() {
            if compatible(pv, av) {
                p_ok[i] = true;
                a_ok[j] = true;
            }
        }
    }
    let before = errs.len();
    for (i, ok) in p_ok.iter().enumerate() {
        if !ok {
            errs.push(at(
                path,
                format!(
                    "planned set element {} does not correlate with any element in actual",
                    planned[i]
                ),
            ));
        }
    }
    if errs.len() > before {
        return;
    }
    for (j, ok) in a_ok.iter().enumerate() {
        if !ok {
            errs.push(at(
                path,
                format!(
                    "actual set element {} does not correlate with any element in plan",
                    actual[j]
                ),
            ));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Legacy SDK normalization

/// Replaces null (and unknown) nested-block collections in an object from a legacy SDK
/// provider with what they mean (NormalizeObjectFromLegacySDK, applied to ReadResource
/// results): a null LIST or SET block is empty, a null GROUP block is its empty block, an
/// unknown LIST/SET block is one block of unknown attributes. Blocks with dynamic attributes
/// and MAP blocks are left as they are.
pub fn normalize_object_from_legacy_sdk(schema: &Block, value: &Value) -> Value {
    let map = match value.unwrap_dynamic() {
        Value::Map(map) => map,
        _ => return value.clone(),
    };
    let mut out = BTreeMap::new();
    for name in schema.attributes.keys() {
        out.insert(name.clone(), map.get(name).cloned().unwrap_or(Value::Null));
    }
    for (name, nb) in &schema.block_types {
        let lv = map.get(name).unwrap_or(&NULL);
        let v = if nb.block.implied_type().has_dynamic() {
            lv.clone()
        } else {
            match (nb.nesting, lv.unwrap_dynamic()) {
                (BlockNesting::Single | BlockNesting::Group, Value::Unknown) => {
                    unknown_block_stub(&nb.block)
                }
                (BlockNesting::Group, Value::Null) => nb.empty_value(),
                (BlockNesting::Single | BlockNesting::Group, v) => {
                    normalize_object_from_legacy_sdk(&nb.block, v)
                }
                (BlockNesting::List | BlockNesting::Set, Value::Unknown) => {
                    Value::List(vec![unknown_block_stub(&nb.block)])
                }
                (BlockNesting::List | BlockNesting::Set, Value::List(items)) => Value::List(
                    items
                        .iter()
                        .map(|v| normalize_object_from_legacy_sdk(&nb.block, v))
                        .collect(),
                ),
                (BlockNesting::List | BlockNesting::Set, _) => Value::List(Vec::new()),
                (BlockNesting::Map, _) => lv.clone(),
            }
        };
        out.insert(name.clone(), v);
    }
    Value::Map(out)
}

/// A known block object whose leaf attributes are all unknown.
fn unknown_block_stub(block: &Block) -> Value {
    let mut out: BTreeMap<String, Value> = block
        .attributes
        .keys()
        .map(|k| (k.clone(), Value::Unknown))
        .collect();
    for (name, nb) in &block.block_types {
        let v = match nb.nesting {
            BlockNesting::Single | BlockNesting::Group => unknown_block_stub(&nb.block),
            BlockNesting::List | BlockNesting::Set => {
                Value::List(vec![unknown_block_stub(&nb.block)])
            }
            BlockNesting::Map => Value::Map(BTreeMap::new()),
        };
        out.insert(name.clone(), v);
    }
    Value::Map(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::json::{from_plain_json, from_state_json, to_plain_json, to_state_json};
    use crate::value::msgpack;
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
                Value::Map(map) => {
                    Value::Map(map.iter().map(|(k, v)| (k.clone(), mark(v))).collect())
                }
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

    #[test]
    fn proposed_new_create() {
        let s = schema();
        let cfg = config(
            &s,
            json!({"name": "n", "disk": [{"size": 1}], "rule": [{"port": 22}], "named": {"k": {}}}),
        );
        let p = proposed_new(&s, &Value::Null, &cfg);
        // Core inserts no unknowns: computed attributes stay null on create.
        assert_eq!(
            plain(&p),
            json!({
                "arn": null, "boot": null, "disk": [{"label": null, "size": 1, "uuid": null}], "id": null,
                "name": "n", "named": {"k": {"c": null, "v": null}}, "ports": null, "rule": [{"port": 22, "rid": null}],
                "secret": null, "size": null, "tags": null, "timeouts": {"create": null}, "wo": null,
            })
        );
        assert_eq!(proposed_new(&s, &Value::Null, &Value::Null), Value::Null);
    }

    #[test]
    fn proposed_new_update_keeps_computed_and_correlates_blocks() {
        let s = schema();
        let prior = prior_state(&s);
        let cfg = config(
            &s,
            json!({
                "name": "n2",
                "ports": [{"port": 8080}],
                "disk": [{"size": 20}, {"size": 30}],
                "rule": [{"port": 443}, {"port": 22}],
                "named": {"a": {"v": "y"}, "b": {"v": "z"}},
                "boot": {"dev": "sdb"},
            }),
        );
        let p = proposed_new(&s, &prior, &cfg);
        assert_eq!(
            plain(&p),
            json!({
                "arn": "arn:1", "id": "i-1", "name": "n2", "size": 5, "tags": null, "secret": null, "wo": null,
                "ports": [{"port": 8080, "proto": "tcp"}],
                "disk": [{"label": null, "size": 20, "uuid": "u1"}, {"label": null, "size": 30, "uuid": null}],
                "rule": [{"port": 443, "rid": "r443"}, {"port": 22, "rid": null}],
                "named": {"a": {"c": "cx", "v": "y"}, "b": {"c": null, "v": "z"}},
                "boot": {"c": "cb", "dev": "sdb"},
                "timeouts": {"create": null},
            })
        );
        // A configured optional+computed value wins over the prior one.
        let cfg2 = config(&s, json!({"name": "n", "size": 7}));
        assert_eq!(
            proposed_new(&s, &prior, &cfg2).get_attr("size"),
            Some(&Value::from(7i64))
        );
    }

    #[test]
    fn proposed_new_optional_computed_nested_attribute() {
        let s = schema();
        let prior = prior_state(&s);
        // The prior holds a configured (non-computed) port: unsetting `ports` removes it.
        let cfg = config(&s, json!({"name": "n"}));
        assert_eq!(
            proposed_new(&s, &prior, &cfg).get_attr("ports"),
            Some(&Value::Null)
        );
        // Only computed leaves in the prior: the provider chose it, keep it.
        let mut prior2 = prior.clone();
        *prior2
            .get_path_mut(&[PathStep::Attr("ports".into())])
            .unwrap() = state(
            &s,
            json!({"ports": [{"port": null, "proto": "udp"}], "name": "n"}),
        )
        .get_attr("ports")
        .unwrap()
        .clone();
        assert_eq!(
            plain(proposed_new(&s, &prior2, &cfg).get_attr("ports").unwrap()),
            json!([{"port": null, "proto": "udp"}])
        );
    }

    #[test]
    fn proposed_new_unknown_blocks_and_sets() {
        let s = schema();
        let prior = prior_state(&s);
        let mut cfg = config(&s, json!({"name": "n"}));
        if let Value::Map(m) = &mut cfg {
            m.insert("disk".into(), Value::Unknown);
        }
        let p = proposed_new(&s, &prior, &cfg);
        assert_eq!(p.get_attr("disk"), Some(&Value::Unknown));
        // Set elements match prior elements by their configured leaves: an unknown configured
        // leaf matches nothing, a known one picks up the prior's computed leaves.
        let cfg = config(
            &s,
            json!({"name": "n", "rule": [{"port": "?"}, {"port": 80}]}),
        );
        let p = proposed_new(&s, &prior, &cfg);
        assert_eq!(
            plain(p.get_attr("rule").unwrap()),
            json!([{"port": "?", "rid": null}, {"port": 80, "rid": "r80"}])
        );
    }

    #[test]
    fn data_source_unknown_plan() {
        let s = schema();
        let cfg = config(
            &s,
            json!({"name": "n", "size": 3, "disk": [{"size": 1}], "boot": {"dev": "x"}}),
        );
        let p = planned_unknown_for_data(&s, &cfg);
        assert_eq!(
            plain(&p),
            json!({
                "arn": "?", "id": "?", "name": "n", "size": 3, "tags": null, "secret": null, "wo": null, "ports": "?",
                "disk": [{"label": null, "size": 1, "uuid": "?"}], "rule": [], "named": {},
                "boot": {"c": "?", "dev": "x"}, "timeouts": {"create": null},
            })
        );
    }

    #[test]
    fn unknown_prior_nested_single_stays_unknown() {
        let obj = NestedObject {
            attributes: [("a".to_owned(), Attribute::optional(Type::String))].into(),
            nesting: ObjectNesting::Single,
        };
        let s = block(
            vec![(
                "o",
                Attribute {
                    ty: AttrType::Nested(obj),
                    ..Attribute::optional_computed(Type::String)
                },
            )],
            vec![],
        );
        let cfg = s
            .conform_config(&Value::object([("o", Value::Null)]))
            .unwrap();
        assert_eq!(
            planned_unknown_for_data(&s, &cfg).get_attr("o"),
            Some(&Value::Unknown)
        );
        let prior = Value::object([("o", Value::object([("a", Value::from("x"))]))]);
        assert_eq!(
            proposed_new(&s, &prior, &cfg).get_attr("o"),
            Some(&Value::Null)
        );
    }

    #[test]
    fn requires_replace_is_filtered() {
        let s = schema();
        let prior = prior_state(&s);
        let mut planned = prior.clone();
        *planned
            .get_path_mut(&[PathStep::Attr("name".into())])
            .unwrap() = Value::from("other");
        *planned
            .get_path_mut(&[PathStep::Attr("arn".into())])
            .unwrap() = Value::Unknown;
        let p = |s: &[&str]| {
            s.iter()
                .map(|x| PathStep::Attr((*x).to_owned()))
                .collect::<Vec<_>>()
        };
        let paths = vec![
            p(&["name"]),
            p(&["id"]),
            p(&["arn"]),
            p(&["nope"]),
            vec![
                PathStep::Attr("disk".into()),
                PathStep::Index(0),
                PathStep::Attr("size".into()),
            ],
            vec![PathStep::Attr("disk".into()), PathStep::Index(5)],
            p(&["name"]),
        ];
        assert_eq!(
            filter_requires_replace(&prior, &planned, &paths),
            vec![p(&["name"]), p(&["arn"])]
        );
        // On create nothing forces replacement (SDKv2 always lists `id`).
        assert!(filter_requires_replace(&Value::Null, &planned, &[p(&["id"])]).is_empty());
        // A path present on one side only is a change.
        let mut shorter = planned.clone();
        *shorter
            .get_path_mut(&[PathStep::Attr("disk".into())])
            .unwrap() = Value::List(vec![]);
        let disk0 = vec![PathStep::Attr("disk".into()), PathStep::Index(0)];
        assert_eq!(
            filter_requires_replace(&prior, &shorter, std::slice::from_ref(&disk0)),
            vec![disk0]
        );
        assert!(values_equal(
            &Value::from(1i64),
            &Value::Number("1.0".parse().unwrap())
        ));
        assert!(!values_equal(&Value::Unknown, &Value::Unknown));
    }

    #[test]
    fn plan_validity() {
        let s = schema();
        let prior = prior_state(&s);
        let cfg = config(
            &s,
            json!({"name": "n2", "disk": [{"size": 20}], "secret": "s", "wo": "w"}),
        );
        let proposed = proposed_new(&s, &prior, &cfg);
        assert_eq!(
            assert_plan_valid(&s, &prior, &cfg, &proposed),
            Vec::<String>::new()
        );
        // The provider may mark computed values unknown and drop write-only values.
        let mut planned = proposed.clone();
        *planned
            .get_path_mut(&[PathStep::Attr("arn".into())])
            .unwrap() = Value::Unknown;
        *planned
            .get_path_mut(&[PathStep::Attr("size".into())])
            .unwrap() = Value::Unknown;
        *planned
            .get_path_mut(&[PathStep::Attr("wo".into())])
            .unwrap() = Value::Null;
        let uuid = [
            PathStep::Attr("disk".into()),
            PathStep::Index(0),
            PathStep::Attr("uuid".into()),
        ];
        *planned.get_path_mut(&uuid).unwrap() = Value::Unknown;
        assert_eq!(
            assert_plan_valid(&s, &prior, &cfg, &planned),
            Vec::<String>::new()
        );

        let mut bad = planned.clone();
        let set = |v: &mut Value, path: &[PathStep], x: Value| *v.get_path_mut(path).unwrap() = x;
        set(
            &mut bad,
            &[PathStep::Attr("name".into())],
            Value::from("zz"),
        );
        set(
            &mut bad,
            &[PathStep::Attr("tags".into())],
            Value::object([("k", Value::from("v"))]),
        );
        set(
            &mut bad,
            &[PathStep::Attr("secret".into())],
            Value::from("leak"),
        );
        set(
            &mut bad,
            &[
                PathStep::Attr("disk".into()),
                PathStep::Index(0),
                PathStep::Attr("size".into()),
            ],
            Value::from(1i64),
        );
        set(&mut bad, &[PathStep::Attr("named".into())], Value::Null);
        assert_eq!(
            assert_plan_valid(&s, &prior, &cfg, &bad),
            vec![
                r#"name: planned value "zz" does not match config value "n2" nor prior value "n""#,
                "secret: sensitive planned value does not match config value",
                r#"tags: planned value {k = "v"} for a non-computed attribute"#,
                "disk[0].size: planned value 1 does not match config value 20 nor prior value 10",
                "named: attribute representing a map of nested blocks must be empty to indicate no blocks, not null",
            ]
        );
        let mut bad = planned.clone();
        set(
            &mut bad,
            &[PathStep::Attr("disk".into())],
            Value::List(vec![]),
        );
        set(
            &mut bad,
            &[PathStep::Attr("rule".into())],
            Value::List(vec![Value::Unknown]),
        );
        set(&mut bad, &[PathStep::Attr("boot".into())], Value::Unknown);
        assert_eq!(
            assert_plan_valid(&s, &prior, &cfg, &bad),
            vec![
                "boot: attribute representing nested block must not be unknown itself; set nested attribute values to unknown instead",
                "disk: block count in plan (0) disagrees with count in config (1)",
                "rule[0]: element representing nested block must not be unknown itself; set nested attribute values to unknown instead",
            ]
        );
        assert_eq!(
            assert_plan_valid(&s, &prior, &cfg, &Value::Null),
            vec!["planned for absence but config wants existence"]
        );
        assert!(assert_plan_valid(&s, &prior, &Value::Null, &Value::Null).is_empty());
    }

    #[test]
    fn nested_attribute_plan_validity() {
        let s = schema();
        let prior = prior_state(&s);
        let cfg = config(
            &s,
            json!({"name": "n", "ports": [{"port": 1}, {"port": 2}]}),
        );
        let planned = state(
            &s,
            json!({"id": "i-1", "arn": "arn:1", "name": "n", "size": 5, "ports": [{"port": 1, "proto": "?"}, {"port": 3, "proto": "tcp"}],
                   "disk": [], "rule": [], "named": {}, "timeouts": {"create": null}}),
        );
        assert_eq!(
            assert_plan_valid(&s, &prior, &cfg, &planned),
            vec!["ports[1].port: planned value 3 does not match config value 2"]
        );
        let planned = state(
            &s,
            json!({"id": "i-1", "arn": "arn:1", "name": "n", "size": 5, "ports": [{"port": 1, "proto": "?"}],
                   "disk": [], "rule": [], "named": {}, "timeouts": {"create": null}}),
        );
        assert_eq!(
            assert_plan_valid(&s, &prior, &cfg, &planned),
            vec!["ports: count in plan (1) disagrees with count in config (2)"]
        );
    }

    #[test]
    fn object_compatibility() {
        let s = schema();
        let prior = prior_state(&s);
        let mut planned = prior.clone();
        let set = |v: &mut Value, path: &[PathStep], x: Value| *v.get_path_mut(path).unwrap() = x;
        set(
            &mut planned,
            &[PathStep::Attr("arn".into())],
            Value::Unknown,
        );
        set(
            &mut planned,
            &[PathStep::Attr("rule".into())],
            Value::List(vec![Value::object([
                ("port", Value::from(80i64)),
                ("rid", Value::Unknown),
            ])]),
        );
        let mut actual = prior.clone();
        set(
            &mut actual,
            &[PathStep::Attr("arn".into())],
            Value::from("arn:2"),
        );
        set(
            &mut actual,
            &[PathStep::Attr("rule".into())],
            Value::List(vec![Value::object([
                ("port", Value::from(80i64)),
                ("rid", Value::from("r")),
            ])]),
        );
        assert_eq!(
            assert_object_compatible(&s, &planned, &actual),
            Vec::<String>::new()
        );

        let mut bad = actual.clone();
        set(
            &mut bad,
            &[PathStep::Attr("name".into())],
            Value::from("renamed"),
        );
        set(
            &mut bad,
            &[PathStep::Attr("secret".into())],
            Value::from("s"),
        );
        if let Some(Value::Map(tags)) = bad.get_path_mut(&[PathStep::Attr("tags".into())]) {
            tags.insert("b".into(), Value::from("2"));
        }
        set(
            &mut bad,
            &[PathStep::Attr("disk".into())],
            Value::List(vec![]),
        );
        set(
            &mut bad,
            &[PathStep::Attr("rule".into())],
            Value::List(vec![
                Value::object([("port", Value::from(80i64)), ("rid", Value::from("r"))]),
                Value::object([("port", Value::from(81i64)), ("rid", Value::from("r"))]),
            ]),
        );
        assert_eq!(
            assert_object_compatible(&s, &planned, &bad),
            vec![
                r#"name: was "n", but now "renamed""#,
                "secret: inconsistent values for sensitive attribute",
                r#"tags: new element "b" has appeared"#,
                "disk: block count changed from 1 to 0",
                r#"rule: actual set element {port = 81, rid = "r"} does not correlate with any element in plan"#,
                "rule: block set length changed from 1 to 2",
            ]
        );
        let mut unknown_after = actual.clone();
        set(
            &mut unknown_after,
            &[PathStep::Attr("id".into())],
            Value::Unknown,
        );
        assert_eq!(
            assert_object_compatible(&s, &planned, &unknown_after),
            vec!["id: was known, but now unknown"]
        );
        assert_eq!(
            assert_object_compatible(&s, &Value::Null, &actual),
            vec!["Root object was absent, but now present"]
        );
        assert_eq!(
            assert_object_compatible(&s, &planned, &Value::Null),
            vec!["Root object was present, but now absent"]
        );
    }

    #[test]
    fn dynamic_values_compatibility() {
        let s = block(
            vec![("d", Attribute::optional_computed(Type::Dynamic))],
            vec![],
        );
        let ty = s.implied_type();
        let decode = |v: &Value| msgpack::decode(&msgpack::encode(v, &ty).unwrap(), &ty).unwrap();
        let planned = decode(&Value::object([("d", Value::Unknown)]));
        let actual = decode(&Value::object([(
            "d",
            Value::List(vec![Value::from(1i64)]),
        )]));
        assert!(assert_object_compatible(&s, &planned, &actual).is_empty());
        let planned = decode(&Value::object([("d", Value::from("x"))]));
        let actual = decode(&Value::object([("d", Value::from(1i64))]));
        assert_eq!(
            assert_object_compatible(&s, &planned, &actual),
            vec!["d: wrong final value type: string required, got number"]
        );
    }

    #[test]
    fn ignore_changes() {
        let s = schema();
        let prior = prior_state(&s);
        let cfg = config(
            &s,
            json!({"name": "new", "tags": {"a": "2", "b": "3"}, "disk": [{"size": 99}]}),
        );
        let tag = |k: &str| vec![PathStep::Attr("tags".into()), PathStep::Key(k.into())];
        let out = apply_ignore_changes(
            &cfg,
            &prior,
            &[
                vec![PathStep::Attr("name".into())],
                tag("a"),
                tag("b"),
                vec![
                    PathStep::Attr("disk".into()),
                    PathStep::Index(0),
                    PathStep::Attr("size".into()),
                ],
            ],
        );
        assert_eq!(out.get_attr("name"), Some(&Value::from("n")));
        assert_eq!(plain(out.get_attr("tags").unwrap()), json!({"a": "1"}));
        assert_eq!(
            plain(out.get_attr("disk").unwrap()),
            json!([{"label": null, "size": 10, "uuid": null}])
        );
        // Creates are untouched; an empty path ignores everything.
        assert_eq!(
            apply_ignore_changes(&cfg, &Value::Null, &[vec![PathStep::Attr("name".into())]]),
            cfg
        );
        assert_eq!(apply_ignore_changes(&cfg, &prior, &[vec![]]), prior);
    }

    #[test]
    fn ignore_changes_inside_dynamic_list_block() {
        let inner = block(
            vec![
                ("name", Attribute::optional(Type::String)),
                ("v", Attribute::optional(Type::Dynamic)),
            ],
            vec![],
        );
        let s = block(vec![], vec![("item", BlockNesting::List, inner)]);
        let ty = s.implied_type();
        let prior_cfg = s
            .conform_config(&from_plain_json(
                &json!({"item": [{"name": "a", "v": "str"}]}),
            ))
            .unwrap();
        let prior = msgpack::decode(&msgpack::encode(&prior_cfg, &ty).unwrap(), &ty).unwrap();
        let cfg = s
            .conform_config(&from_plain_json(&json!({"item": [{"name": "b", "v": 5}]})))
            .unwrap();
        let path = vec![
            PathStep::Attr("item".into()),
            PathStep::Index(0),
            PathStep::Attr("v".into()),
        ];
        let out = apply_ignore_changes(&cfg, &prior, &[path]);
        let Some(Value::Dynamic { ty: item_ty, .. }) = out.get_attr("item") else {
            panic!("{out:?}")
        };
        assert_eq!(
            item_ty,
            &t(r#"["tuple",[["object",{"name":"string","v":"string"}]]]"#)
        );
        let bytes = msgpack::encode(&out, &ty).unwrap();
        assert_eq!(
            plain(&msgpack::decode(&bytes, &ty).unwrap()),
            json!({"item": [{"name": "b", "v": "str"}]})
        );
        // ProposedNew keeps the block a correctly typed tuple.
        let p = proposed_new(&s, &prior, &cfg);
        let Some(Value::Dynamic { ty: p_ty, .. }) = p.get_attr("item") else {
            panic!("{p:?}")
        };
        assert_eq!(
            p_ty,
            &t(r#"["tuple",[["object",{"name":"string","v":"number"}]]]"#)
        );
        assert!(msgpack::encode(&p, &ty).is_ok());
    }

    #[test]
    fn diffs() {
        let s = schema();
        let prior = prior_state(&s);
        let cfg = config(
            &s,
            json!({"name": "n2", "tags": {"a": "1", "b c": "2"}, "disk": [{"size": 10, "label": "L"}]}),
        );
        let mut planned = proposed_new(&s, &prior, &cfg);
        *planned
            .get_path_mut(&[PathStep::Attr("arn".into())])
            .unwrap() = Value::Unknown;
        let changes: Vec<(String, Option<String>, Option<String>)> =
            diff_typed(&prior, &planned, &s.implied_type())
                .into_iter()
                .map(|(p, a, b)| {
                    (
                        render_path(&p),
                        a.map(|v| v.to_string()),
                        b.map(|v| v.to_string()),
                    )
                })
                .collect();
        let c = |p: &str, a: Option<&str>, b: Option<&str>| {
            (p.to_owned(), a.map(str::to_owned), b.map(str::to_owned))
        };
        assert_eq!(
            changes,
            vec![
                c("arn", Some(r#""arn:1""#), Some("(known after apply)")),
                c("boot.c", Some(r#""cb""#), None),
                c("boot.dev", Some(r#""sda""#), None),
                c("disk[0].label", None, Some(r#""L""#)),
                c("name", Some(r#""n""#), Some(r#""n2""#)),
                c(r#"named["a"].c"#, Some(r#""cx""#), None),
                c(r#"named["a"].v"#, Some(r#""x""#), None),
                c("ports[0].port", Some("80"), None),
                c("ports[0].proto", Some(r#""tcp""#), None),
                c(
                    "rule",
                    Some(r#"[{port = 80, rid = "r80"}, {port = 443, rid = "r443"}]"#),
                    Some("[]")
                ),
                c(r#"tags["b c"]"#, None, Some(r#""2""#)),
            ]
        );
        // Untyped diff of a create lists every non-null leaf.
        let created = diff(
            &Value::Null,
            &Value::object([
                ("a", Value::from(1i64)),
                ("m", Value::object([("x y", Value::from(true))])),
            ]),
        );
        let paths: Vec<String> = created.iter().map(|(p, _, _)| render_path(p)).collect();
        assert_eq!(paths, vec!["a", r#"m["x y"]"#]);
        assert!(diff(&prior, &prior).is_empty());
    }

    #[test]
    fn legacy_normalization() {
        let s = schema();
        let mut v = prior_state(&s);
        let set = |v: &mut Value, name: &str, x: Value| {
            *v.get_path_mut(&[PathStep::Attr(name.into())]).unwrap() = x
        };
        set(&mut v, "disk", Value::Null);
        set(&mut v, "rule", Value::Unknown);
        set(&mut v, "timeouts", Value::Null);
        set(&mut v, "boot", Value::Null);
        let n = normalize_object_from_legacy_sdk(&s, &v);
        assert_eq!(plain(n.get_attr("disk").unwrap()), json!([]));
        assert_eq!(
            plain(n.get_attr("rule").unwrap()),
            json!([{"port": "?", "rid": "?"}])
        );
        assert_eq!(
            plain(n.get_attr("timeouts").unwrap()),
            json!({"create": null})
        );
        assert_eq!(n.get_attr("boot"), Some(&Value::Null));
        assert_eq!(n.get_attr("name"), Some(&Value::from("n")));
    }

    /// null_resource (hashicorp/null 3.x): `id` optional+computed string, `triggers` optional
    /// map(string), driven through a create and an update the way the engine will.
    #[test]
    fn null_resource_end_to_end() {
        let s = block(
            vec![
                ("id", Attribute::optional_computed(Type::String)),
                ("triggers", Attribute::optional(t(r#"["map","string"]"#))),
            ],
            vec![],
        );
        let ty = s.implied_type();
        let hex = |b: &[u8]| {
            b.iter()
                .map(|x| format!("{x:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        };

        // Create.
        let cfg = s
            .conform_config(&from_plain_json(&json!({"triggers": {"a": 1}})))
            .unwrap();
        let proposed = proposed_new(&s, &Value::Null, &cfg);
        let cfg_bytes = msgpack::encode(&cfg, &ty).unwrap();
        assert_eq!(
            hex(&cfg_bytes),
            "82 a2 69 64 c0 a8 74 72 69 67 67 65 72 73 81 a1 61 a1 31"
        );
        assert_eq!(msgpack::encode(&proposed, &ty).unwrap(), cfg_bytes);
        assert_eq!(hex(&msgpack::encode(&Value::Null, &ty).unwrap()), "c0");
        // The provider plans `id` unknown (bytes as SDKv2 sends them).
        let planned = msgpack::decode(
            &[
                0x82, 0xa2, b'i', b'd', 0xd4, 0, 0, 0xa8, b't', b'r', b'i', b'g', b'g', b'e', b'r',
                b's', 0x81, 0xa1, b'a', 0xa1, b'1',
            ],
            &ty,
        )
        .unwrap();
        assert!(assert_plan_valid(&s, &Value::Null, &cfg, &planned).is_empty());
        let id = vec![PathStep::Attr("id".into())];
        assert!(
            filter_requires_replace(&Value::Null, &planned, std::slice::from_ref(&id)).is_empty()
        );
        // Apply returns a known id.
        let applied = msgpack::decode(
            &msgpack::encode(
                &Value::object([
                    ("id", Value::from("42")),
                    ("triggers", cfg.get_attr("triggers").unwrap().clone()),
                ]),
                &ty,
            )
            .unwrap(),
            &ty,
        )
        .unwrap();
        assert!(assert_object_compatible(&s, &planned, &applied).is_empty());
        let stored = to_state_json(&applied, &ty).unwrap();
        assert_eq!(stored, json!({"id": "42", "triggers": {"a": "1"}}));

        // Update: triggers change, id is kept by ProposedNew and the change forces replacement.
        let prior = from_state_json(&stored, &ty).unwrap();
        let cfg2 = s
            .conform_config(&from_plain_json(&json!({"triggers": {"a": "2"}})))
            .unwrap();
        let proposed2 = proposed_new(&s, &prior, &cfg2);
        assert_eq!(
            plain(&proposed2),
            json!({"id": "42", "triggers": {"a": "2"}})
        );
        let triggers = vec![PathStep::Attr("triggers".into())];
        assert_eq!(
            filter_requires_replace(&prior, &proposed2, &[id.clone(), triggers.clone()]),
            vec![triggers]
        );
        assert!(assert_plan_valid(&s, &prior, &cfg2, &proposed2).is_empty());
        // Unchanged config: NoOp (planned equals prior).
        let proposed3 = proposed_new(&s, &prior, &cfg);
        assert!(values_equal(&proposed3, &prior));
        // Typos are caught before any provider call.
        let errs = s
            .conform_config(&from_plain_json(&json!({"trigers": {}})))
            .unwrap_err();
        assert_eq!(
            errs[0].to_string(),
            r#"at trigers: unsupported attribute "trigers"; did you mean "triggers"?"#
        );
    }
}
