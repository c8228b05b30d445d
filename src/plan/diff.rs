//! Listing the leaves that differ between two objects, for plan output and drift reports.

use std::collections::{BTreeMap, BTreeSet};

use crate::value::{untyped_step, PathStep, Type, Value};

/// One changed leaf: its path, the prior value and the planned value (`None` when absent or
/// null on that side; an unknown planned value is `Some(Value::Unknown)`). Not to be confused
/// with a state mutation (`state::Change`) nor an event's attribute change.
pub(crate) type LeafDiff = (Vec<PathStep>, Option<Value>, Option<Value>);

/// Lists the leaves that differ between `prior` and `planned`, without type information (map
/// keys render as attributes when they look like identifiers, sets compare by position).
pub fn diff(prior: &Value, planned: &Value) -> Vec<LeafDiff> {
    let mut out = Vec::new();
    diff_walk(Some(prior), Some(planned), None, &mut Vec::new(), &mut out);
    out
}

/// Lists the leaves that differ between `prior` and `planned` of type `ty` (e.g. a block's
/// implied type): object attributes render as `.a`, map keys as `["k"]`, and a changed set is
/// one leaf (set elements have no identity to correlate).
pub(crate) fn diff_typed(prior: &Value, planned: &Value, ty: &Type) -> Vec<LeafDiff> {
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
    out: &mut Vec<LeafDiff>,
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
