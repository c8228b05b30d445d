//! One managed resource's turn when its provider has no schemas and cannot delete (a NixOps4
//! provider, see [`crate::provider::Capabilities`]).
//!
//! Owns the short sequence such a resource needs: ask the provider for a plan (it answers from
//! the inputs recorded last time: same inputs, nothing to do; otherwise every output is unknown
//! until apply, and a type that cannot be updated asks to be replaced), decide the action, and
//! in apply mode create, update or re-create. A re-created object's predecessor is forgotten,
//! never deleted, and its record is replaced only once the new object exists, so a failed
//! re-create leaves state as it was. Not: typed values, refresh or upgrade (there is nothing to
//! refresh from), deposed objects (nothing is ever deposed), the store (the owner records).

use serde_json::Value as Json;

use super::{check_allowed, intend, realise_builds, Mode, NodeInput, NodeOutput, NodeProgress};
use crate::diag::{Diagnostic, Diagnostics};
use crate::engine::events::{Action, AttrChange};
use crate::engine::Mutation;
use crate::ir::IgnorePath;
use crate::plan;
use crate::provider::{ApplyRequest, PlanRequest};
use crate::state::{PendingAction, ResourceKind, ResourceState};
use crate::value::{self, PathStep, Value};

/// Runs one resource's turn.
pub(super) fn run_managed(input: &NodeInput, report: &dyn Fn(NodeProgress)) -> NodeOutput {
    remember_prior_secrets(input);
    turn(input, report)
}

/// A provider's error may quote its whole request (the real one does when it cannot read it),
/// and an update request carries the inputs recorded last time too. The current values of
/// sensitive inputs are already known secrets (resolving them remembered them); the recorded
/// values of the same inputs (a rotated password) become known here, to the run's redactor,
/// so that every printout redacts them.
fn remember_prior_secrets(input: &NodeInput) {
    let Some(private) = input.prior.as_ref().and_then(|p| p.private.as_deref()) else {
        return;
    };
    let Ok(Json::Object(recorded)) = serde_json::from_slice::<Json>(private) else {
        return;
    };
    for attr in &input.sensitive_inputs {
        if let Some(v) = recorded.get(attr) {
            input.redactor.remember_json(v);
        }
    }
}

// Long because it is the NixOps4 turn in sequence (inputs, the plan by comparison, create or
// update, record), each step returning on failure.
fn turn(input: &NodeInput, report: &dyn Fn(NodeProgress)) -> NodeOutput {
    // A tainted object is never left by this sequence (a failed create records nothing), but
    // a state written otherwise is honoured: it is re-created.
    let prior = input.prior.as_ref().filter(|p| !p.is_tainted());
    let prior_outputs = prior
        .map(|p| value::json::from_plain_json(&p.attributes))
        .unwrap_or(Value::Null);
    let prior_inputs: &[u8] = prior.and_then(|p| p.private.as_deref()).unwrap_or_default();
    let config = ignore_changes(&input.config, prior_inputs, &input.lifecycle.ignore_changes);

    let plan = match input.provider.plan_resource_change(PlanRequest {
        type_name: &input.type_name,
        prior_state: &prior_outputs,
        proposed_new_state: &config,
        config: &config,
        prior_private: prior_inputs,
    }) {
        Ok(p) if !p.diagnostics.has_errors() => p,
        Ok(p) => return NodeOutput::failed(p.diagnostics, None),
        Err(d) => return NodeOutput::failed(d, None),
    };
    let action = if input.prior.is_none() {
        Action::Create
    } else if prior.is_none() || !plan.requires_replace.is_empty() {
        Action::Recreate
    } else if plan::values_equal(&plan.planned_state, &prior_outputs) {
        Action::NoOp
    } else {
        Action::Update
    };
    // Which inputs a record's secrets came from is not recorded: once any was, every recorded
    // input is masked.
    let prior_sensitive = input
        .prior
        .as_ref()
        .is_some_and(|p| !p.sensitive_paths.is_empty());
    let sensitive =
        |attr: &str| prior_sensitive || input.sensitive_inputs.iter().any(|s| s == attr);
    let mut out = NodeOutput {
        action: Some(action),
        changes: input_changes(
            prior_inputs,
            &config,
            &sensitive,
            action == Action::Recreate,
        ),
        commit: None,
        drift: None,
        diagnostics: plan.diagnostics,
        ok: true,
        elapsed: Default::default(),
        deposed: Vec::new(),
        planned_object: None,
        plan_made: None,
        in_doubt: false,
    };
    if action == Action::Recreate && input.lifecycle.prevent_destroy {
        out.ok = false;
        out.diagnostics.push(
            Diagnostic::error(
                "this change would re-create the resource and forget the old object, but \
                 lifecycle.preventDestroy is set",
            )
            .with_detail(
                "Its provider can neither update nor delete this type. Change the \
                 configuration back, or remove preventDestroy if that is intended.",
            ),
        );
        return out;
    }
    // Only an apply holds the token that changing the object takes.
    let Mode::Apply(mutation) = input.mode else {
        return out;
    };
    if action == Action::NoOp {
        return out;
    }
    let planned = Planned {
        action,
        prior_outputs: &prior_outputs,
        planned_state: &plan.planned_state,
        planned_private: &plan.planned_private,
        config: &config,
    };
    apply_object(input, &planned, out, report, mutation)
}

/// What the plan half of a turn decided, for the apply half.
struct Planned<'a> {
    action: Action,
    prior_outputs: &'a Value,
    planned_state: &'a Value,
    planned_private: &'a [u8],
    config: &'a Value,
}

/// Creates, updates or re-creates the object as `planned`, under the token, and puts its new
/// record in `out`.
fn apply_object(
    input: &NodeInput,
    planned: &Planned<'_>,
    mut out: NodeOutput,
    report: &dyn Fn(NodeProgress),
    mutation: Mutation,
) -> NodeOutput {
    let Planned {
        action,
        prior_outputs,
        planned_state,
        planned_private,
        config,
    } = *planned;
    if let Err(d) = check_allowed(input, action) {
        out.diagnostics.extend(d);
        out.ok = false;
        return out;
    }
    report(NodeProgress::Applying(action, out.changes.clone()));
    if let Err(d) = realise_builds(input) {
        out.diagnostics.extend(d);
        out.ok = false;
        return out;
    }
    // A new object may be left unrecorded if the run stops before its result is: the state
    // notes it first, durably, as a typed create's (DESIGN §97).
    let pending = match action {
        Action::Create => Some(PendingAction::Create),
        Action::Recreate => Some(PendingAction::Replace),
        _ => None,
    };
    if let Some(pending) = pending {
        if let Err(d) = intend(input, pending, planned_state, report, mutation) {
            out.diagnostics.extend(d);
            out.ok = false;
            return out;
        }
    }
    // A re-create is a create: the old object stays where it is.
    let (prior_state, prior_private) = match action {
        Action::Update => (prior_outputs, planned_private),
        _ => (&Value::Null, &[][..]),
    };
    let applied = match input.provider.apply_resource_change(ApplyRequest {
        type_name: &input.type_name,
        prior_state,
        planned_state,
        config,
        planned_private: prior_private,
    }) {
        Ok(r) => r,
        Err(d) => {
            // No answer: the provider may have made the object before it died.
            input.in_doubt.set(true);
            out.diagnostics.extend(d);
            out.ok = false;
            return out;
        }
    };
    let failed = applied.diagnostics.has_errors();
    out.diagnostics.extend(applied.diagnostics);
    if failed {
        // Protocol v0 returns no partial object: nothing new exists to record.
        out.ok = false;
        return out;
    }
    match record(input, &applied.new_state, applied.private) {
        Ok(r) => out.commit = Some(crate::state::Change::Put(r)),
        Err(d) => {
            out.diagnostics.extend(d);
            out.ok = false;
        }
    }
    out
}

/// The configuration with ignored inputs taken from the recorded ones.
fn ignore_changes(config: &Value, recorded: &[u8], ignore: &[IgnorePath]) -> Value {
    if ignore.is_empty() || recorded.is_empty() {
        return config.clone();
    }
    let Ok(recorded) = serde_json::from_slice::<Json>(recorded) else {
        return config.clone();
    };
    let recorded = value::json::from_plain_json(&recorded);
    let paths: Vec<Vec<PathStep>> = ignore
        .iter()
        .flat_map(|p| match p {
            IgnorePath::All => config
                .as_map()
                .map(|m| m.keys().map(|k| vec![PathStep::Attr(k.clone())]).collect())
                .unwrap_or_default(),
            IgnorePath::Path(steps) => vec![crate::ir::value_path(steps)],
        })
        .collect();
    plan::apply_ignore_changes(config, &recorded, &paths)
}

/// The inputs that change, one per top-level input property; `sensitive` says which are masked.
fn input_changes(
    recorded: &[u8],
    config: &Value,
    sensitive: &dyn Fn(&str) -> bool,
    forces_replacement: bool,
) -> Vec<AttrChange> {
    let before = serde_json::from_slice::<Json>(recorded)
        .map(|j| value::json::from_plain_json(&j))
        .unwrap_or(Value::Null);
    let empty = Default::default();
    let (before, after) = (
        before.as_map().unwrap_or(&empty),
        config.as_map().unwrap_or(&empty),
    );
    let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| {
            let (b, a) = (before.get(k), after.get(k));
            let same = matches!((b, a), (Some(b), Some(a)) if plan::values_equal(b, a));
            (!same).then(|| AttrChange {
                path: vec![PathStep::Attr(k.clone())],
                before: b.cloned(),
                after: a.cloned(),
                sensitive: sensitive(k),
                forces_replacement,
                write_only: false,
            })
        })
        .collect()
}

/// The state record of an applied object: its outputs as attributes, the inputs it was
/// applied with as private bytes. Every output is sensitive when any input was.
fn record(
    input: &NodeInput,
    outputs: &Value,
    inputs: Vec<u8>,
) -> Result<ResourceState, Diagnostics> {
    let attributes = match value::json::to_plain_json(outputs) {
        Ok(Json::Object(map)) => Json::Object(map),
        _ => {
            return Err(Diagnostic::error(format!(
                "provider {} returned outputs that are not a JSON object",
                input.provider_id
            ))
            .into())
        }
    };
    let mut r = ResourceState::new(
        &input.id,
        ResourceKind::Managed,
        &input.provider_id,
        &input.provider_source,
        &input.type_name,
        attributes,
    );
    r.private = Some(inputs);
    r.dependencies = input.dependencies.clone();
    if !input.sensitive_inputs.is_empty() {
        r.sensitive_paths = r
            .attributes
            .as_object()
            .into_iter()
            .flat_map(|m| m.keys())
            .map(|k| Json::Array(vec![Json::String(k.clone())]))
            .collect();
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v(j: Json) -> Value {
        value::json::from_plain_json(&j)
    }

    #[test]
    fn input_changes_list_what_differs_with_unknowns_and_removals() {
        let recorded =
            serde_json::to_vec(&json!({"name": "/tmp/a", "contents": "x", "gone": 1})).unwrap();
        let mut config = v(json!({"name": "/tmp/a", "contents": "y", "new": [1]}));
        if let Value::Map(m) = &mut config {
            m.insert("later".into(), Value::Unknown);
        }
        let changes = input_changes(&recorded, &config, &|_| false, true);
        let paths: Vec<String> = changes
            .iter()
            .map(|c| value::render_path(&c.path))
            .collect();
        assert_eq!(paths, ["contents", "gone", "later", "new"]);
        assert!(changes.iter().all(|c| c.forces_replacement && !c.sensitive));
        assert_eq!(changes[1].after, None);
        assert!(changes[2].after.as_ref().is_some_and(Value::is_unknown));
        // A create shows every input, masking the sensitive ones only.
        let created = input_changes(&[], &config, &|k| k == "contents", false);
        assert_eq!(created.len(), 4);
        let masked: Vec<bool> = created.iter().map(|c| c.sensitive).collect();
        assert_eq!(masked, [true, false, false, false]);
    }

    #[test]
    fn ignored_inputs_keep_their_recorded_values() {
        let recorded = serde_json::to_vec(&json!({"a": 1, "b": {"c": 2}})).unwrap();
        let config = v(json!({"a": 5, "b": {"c": 6}}));
        let kept = ignore_changes(
            &config,
            &recorded,
            &[IgnorePath::Path(vec![
                crate::ir::PathStep::Key("b".into()),
                crate::ir::PathStep::Key("c".into()),
            ])],
        );
        assert!(plan::values_equal(
            &kept,
            &v(json!({"a": 5, "b": {"c": 2}}))
        ));
        let all = ignore_changes(&config, &recorded, &[IgnorePath::All]);
        assert!(plan::values_equal(&all, &v(json!({"a": 1, "b": {"c": 2}}))));
    }
}
