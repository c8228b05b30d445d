//! Which of a provider's `requires_replace` paths really force a replacement.

use super::values_equal;
use crate::value::{PathStep, Value};

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
