//! `lifecycle.ignoreChanges`: reverting ignored paths of a configuration to their prior values.

use crate::value::{PathStep, Value};

/// ProposedNew and before sending the configuration. A map key that the prior lacks is removed
/// from the configuration; an empty path ignores everything. With a null prior (a create) the
/// configuration is returned unchanged.
pub(crate) fn apply_ignore_changes(
    config: &Value,
    prior: &Value,
    paths: &[Vec<PathStep>],
) -> Value {
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
