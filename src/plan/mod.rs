//! The plan rules core applies around a provider's answers, as pure functions on values.
//!
//! Owns what OpenTofu's `internal/plans/objchange` does (sections 4.3-4.6 of the protocol
//! notes): [`proposed_new`] (the merge of prior state and configuration sent as
//! `proposed_new_state`) and [`planned_unknown_for_data`]; the checks on a provider's answers,
//! [`assert_plan_valid`] (PlanResourceChange) and [`assert_object_compatible`]
//! (ApplyResourceChange, and a re-plan against the saved plan), each returning
//! [`RuleViolation`]s that carry the attribute path; [`filter_requires_replace`];
//! [`normalize_object_from_legacy_sdk`] (ReadResource); [`apply_ignore_changes`]; and the
//! helpers that compare and list changes ([`values_equal`], [`diff`], [`diff_typed`]); and
//! whether a refreshed object drifted ([`drifted`]: a null and an empty collection are one value);
//! the action choice ([`choose_action`]: one [`Action`] per resource, `preventDestroy`'s
//! refusal included); and which records a list of moves renames ([`resolve_moves`]).
//!
//! Not: providers, state, disk or any other I/O; downgrading check failures to warnings for
//! `legacy_type_system` (the caller does); rendering. Inputs are assumed to conform to the
//! schema's implied type; where they do not, the functions degrade gracefully (a missing
//! attribute reads as null) rather than panic.

mod action;
mod change;
mod compatible;
mod diff;
mod drift;
mod ignore;
mod legacy;
mod moves;
mod proposed;
mod replace;
mod shape;
mod validity;

#[cfg(test)]
mod tests;

use std::fmt;

use crate::value::{render_path, PathStep, Value};

pub(crate) use validity::assert_plan_valid;
pub use {
    action::Action,
    change::{AttrChange, WireError},
    diff::diff,
    legacy::normalize_object_from_legacy_sdk,
    proposed::proposed_new,
    replace::filter_requires_replace,
};
pub(crate) use {
    action::{choose_action, PlanFacts},
    change::ChangeRecord,
    compatible::assert_object_compatible,
    diff::diff_typed,
    drift::{drifted, empty_as_null},
    ignore::apply_ignore_changes,
    moves::{resolve_moves, Rename},
    proposed::planned_unknown_for_data,
};

/// Whether two values are known to be equal: both wholly known and equal (cty
/// `Equals(...).True()`). An unknown anywhere means "may differ".
pub fn values_equal(a: &Value, b: &Value) -> bool {
    a.is_known() && b.is_known() && a == b
}

/// One broken promise in a provider's answer: where (the attribute path within the object,
/// empty for the object itself) and what. Displays as `path: problem`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RuleViolation {
    /// The attribute the problem is about.
    pub(crate) path: Vec<PathStep>,
    /// What is wrong there, without the path; sensitive values are never shown.
    pub(crate) problem: String,
}

impl fmt::Display for RuleViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.problem)
        } else {
            write!(f, "{}: {}", render_path(&self.path), self.problem)
        }
    }
}

/// A violation at `path`.
fn at(path: &[PathStep], problem: impl Into<String>) -> RuleViolation {
    RuleViolation {
        path: path.to_vec(),
        problem: problem.into(),
    }
}
