//! AssertObjectCompatible: the checks core makes on an applied object against its plan.

use super::shape::child;
use super::{at, RuleViolation};
use crate::schema::{Block, BlockNesting, NestedBlock};
use crate::value::{PathStep, Type, Value};

/// Checks that an applied object keeps the promises of its plan (AssertObjectCompatible,
/// section 4.5): null-ness as planned, every known planned value unchanged, list and map
/// blocks with the same elements, set blocks no larger; unknown planned values may become
/// anything of their type. Also used between a saved plan and a re-plan at apply time.
pub(crate) fn assert_object_compatible(
    schema: &Block,
    planned: &Value,
    actual: &Value,
) -> Vec<RuleViolation> {
    let mut errs = Vec::new();
    object_compatible(schema, planned, actual, &mut Vec::new(), &mut errs);
    errs
}

fn object_compatible(
    block: &Block,
    planned: &Value,
    actual: &Value,
    path: &mut Vec<PathStep>,
    errs: &mut Vec<RuleViolation>,
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
    errs: &mut Vec<RuleViolation>,
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

// Long because it has one case per type kind, in the order of OpenTofu's assertValueCompatible, so
// the two can be compared line by line.
fn value_compatible(
    planned: &Value,
    actual: &Value,
    ty: &Type,
    path: &mut Vec<PathStep>,
    errs: &mut Vec<RuleViolation>,
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
    errs: &mut Vec<RuleViolation>,
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
