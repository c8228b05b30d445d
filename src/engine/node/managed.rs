//! A managed resource's turn: the current object (upgraded, refreshed), the plan, the action,
//! and in apply mode the change carried out; and `refresh` of a recorded object.

use std::borrow::Cow;

use serde_json::Value as Json;

use super::answers::{ask_provider, ignore_paths, PlanConfig};
use super::delete::{destroy_deposed, destroy_object};
use super::previewed::{EarlierPlan, InputsDigest};
use super::record::{
    display_changes, marked_sensitive, record, schema_sensitive_paths, write_only_sent,
};
use super::{
    check_allowed, conform, err, intend, realise_builds, Mode, NodeInput, NodeOutput, NodeProgress,
    PlannedObject,
};
use crate::diag::{Diagnostic, Diagnostics};
use crate::engine::events::Action;
use crate::engine::Mutation;
use crate::plan;
use crate::provider::{ApplyRequest, PlanRequest};
use crate::schema::Block;
use crate::state::PendingAction;
use crate::state::{Change, DeposedObject, ResourceKind, ResourceState, ResourceStatus};
use crate::value::{self, Type, Value};

/// A managed resource planned: what the apply half of its turn needs.
pub(super) struct Planned<'a> {
    schema: &'a crate::schema::Schema,
    ty: Type,
    /// The configuration the plan was asked with, and what from.
    shaped: PlanConfig,
    prior: Value,
    prior_private: Vec<u8>,
    plan: crate::provider::PlanResponse,
    action: Action,
    diags: Diagnostics,
    out: NodeOutput,
}

/// One managed resource's turn (its provider has schemas): plan it, and in apply mode carry
/// the change out.
pub(super) fn run_managed(input: &NodeInput, report: &dyn Fn(NodeProgress)) -> NodeOutput {
    let planned = match plan_managed(input) {
        Ok(p) => p,
        Err(out) => return *out,
    };
    let Mode::Apply(mutation) = input.mode else {
        let mut out = planned.out;
        out.diagnostics = planned.diags;
        return out;
    };
    apply_managed(input, planned, report, mutation)
}

/// A failed turn's output, boxed (it is the large side of `plan_managed`'s result).
fn failed(diagnostics: Diagnostics, action: Option<Action>) -> Box<NodeOutput> {
    Box::new(NodeOutput::failed(diagnostics, action))
}

/// The plan half of a managed resource's turn: conform, the provider's answers (its
/// preview's, when this is the apply of a phase planned with the same inputs), and the action.
/// Fails with the output to report.
// Long because it turns the answers into the action and the plan row, in OpenTofu's order.
fn plan_managed(input: &NodeInput) -> Result<Planned<'_>, Box<NodeOutput>> {
    let schema = input.provider.schema();
    let Some(s) = schema.resources.get(&input.type_name) else {
        return Err(failed(
            err(format!(
                "provider {} has no resource type {:?}",
                input.provider_id, input.type_name
            )),
            None,
        ));
    };
    let block = &s.block;
    let ty = block.implied_type();
    let config = match conform(block, &input.config) {
        Ok(c) => c,
        Err(d) => return Err(failed(d, None)),
    };
    // The digest of this turn's inputs: the key of a kept plan (DESIGN §106).
    let keeps = input.mode.keeps_answers();
    let inputs = (keeps || input.earlier_plan.is_some())
        .then(|| InputsDigest::of(input, &config, &ty))
        .flatten();
    let earlier = (input.earlier_plan.as_deref())
        .filter(|e| inputs.is_some_and(|i| e.made_with(i)))
        .and_then(|e| Some((e, e.decoded(&ty)?)));
    let answers = match earlier {
        Some((earlier, decoded)) => earlier.answers(decoded, input, block, config),
        None => ask_provider(input, block, config).map_err(|d| failed(d, None))?,
    };
    let mut answered = answers.diags.clone();
    let (prior, plan) = (&answers.prior, &answers.plan);
    let (tainted, drift) = (answers.tainted, &answers.drift);
    let exists = !prior.is_null();
    let replace_paths = if exists && !tainted {
        plan::filter_requires_replace(prior, &plan.planned_state, &plan.requires_replace)
    } else {
        Vec::new()
    };
    let chosen = plan::choose_action(plan::PlanFacts {
        exists,
        tainted,
        replace_paths: &replace_paths,
        unchanged: plan::values_equal(&plan.planned_state, prior),
        create_before_destroy: input.lifecycle.create_before_destroy,
        prevent_destroy: input.lifecycle.prevent_destroy,
    });
    let action = match chosen {
        Ok(action) => action,
        Err(refused) => {
            answered.push(Diagnostic::error(refused.to_string()).with_detail(refused.advice()));
            return Err(failed(answered, Some(refused.action)));
        }
    };
    let shown_prior = if tainted {
        prior
    } else {
        &answers.shaped.plan_prior
    };
    // A replacement's new object takes the ignored attributes as written: shown so.
    let shown_planned = match (action, &answers.shaped.written) {
        (Action::Replace { .. }, Some(written)) => {
            let paths = ignore_paths(block, &input.lifecycle.ignore_changes);
            Cow::Owned(plan::apply_ignore_changes(
                &plan.planned_state,
                written,
                &paths,
            ))
        }
        _ => Cow::Borrowed(&plan.planned_state),
    };
    let mut changes = display_changes(
        block,
        shown_prior,
        &shown_planned,
        &replace_paths,
        &marked_sensitive(input),
    );
    if action.writes_object() {
        changes.extend(write_only_sent(block, &answers.shaped.config));
    }
    let planned_object = if input.mode.applies() {
        None
    } else {
        let facts = (tainted, drift.is_some());
        let new_config = answers.shaped.new_object_config();
        planned_object(input, block, action, prior, new_config, facts, plan)
    };
    let plan_made = (inputs.filter(|_| keeps))
        .and_then(|i| EarlierPlan::keep(i, &answers, &ty))
        .map(Box::new);
    let out = NodeOutput {
        action: Some(action),
        changes,
        commit: None,
        drift: drift.clone(),
        diagnostics: Diagnostics::new(),
        ok: true,
        elapsed: Default::default(),
        deposed: input
            .prior
            .iter()
            .flat_map(|p| p.deposed.iter().map(|d| d.key.clone()))
            .collect(),
        planned_object,
        plan_made,
        in_doubt: false,
    };
    Ok(Planned {
        schema: s,
        ty,
        shaped: answers.shaped,
        prior: answers.prior,
        prior_private: answers.prior_private,
        plan: answers.plan,
        action,
        diags: answered,
        out,
    })
}

/// What the resources planned after this one in the same phase see of it (plan mode): the
/// provider's planned object for a create or update; for a replacement, the new object as the
/// provider plans its creation, as OpenTofu plans a replacement (the update plan keeps the old
/// object's `id`). Unknown as a whole if that second plan fails: apply reports why. An object
/// that `drifted` is planned from its refreshed value, as OpenTofu plans on the refreshed state:
/// a no-op is then seen as that value, and its outputs count as changed (the record is older).
fn planned_object(
    input: &NodeInput,
    block: &Block,
    action: Action,
    prior: &Value,
    config: &Value,
    (tainted, drifted): (bool, bool),
    plan: &crate::provider::PlanResponse,
) -> Option<PlannedObject> {
    let value = match action {
        Action::Create | Action::Update => plan.planned_state.clone(),
        Action::NoOp if drifted && !prior.is_null() => prior.clone(),
        Action::Replace { .. } if tainted => plan.planned_state.clone(),
        Action::Replace { .. } => input
            .provider
            .plan_resource_change(PlanRequest {
                type_name: &input.type_name,
                prior_state: &Value::Null,
                proposed_new_state: &plan::proposed_new(block, &Value::Null, config),
                config,
                prior_private: &plan.planned_private,
            })
            .ok()
            .filter(|p| !p.diagnostics.has_errors())
            .map_or(Value::Unknown, |p| p.planned_state),
        _ => return None,
    };
    let mut sensitive = schema_sensitive_paths(block, &value);
    sensitive.extend(
        input
            .sensitive_inputs
            .iter()
            .map(|a| Json::Array(vec![Json::String(a.clone())])),
    );
    Some(PlannedObject {
        changes_outputs: drifted || !plan::values_equal(&value, prior),
        read_with: None,
        value,
        sensitive,
    })
}

/// The apply half of a managed resource's turn: deposed objects first, then the planned
/// action carried out and its result checked and recorded.
// Long because it has one arm per planned action, after the deposed objects and the builds.
fn apply_managed(
    input: &NodeInput,
    planned: Planned<'_>,
    report: &dyn Fn(NodeProgress),
    mutation: Mutation,
) -> NodeOutput {
    let (s, ty, action) = (planned.schema, planned.ty, planned.action);
    let (shaped, plan) = (planned.shaped, planned.plan);
    let (config, plan_prior) = (&shaped.config, &shaped.plan_prior);
    // A replacement's new object is created from the configuration as written.
    let new_config = shaped.new_object_config();
    let (prior, prior_private) = (planned.prior, planned.prior_private);
    let (mut diags, mut out) = (planned.diags, planned.out);
    let block = &s.block;
    if let Err(d) = check_allowed(input, action) {
        diags.extend(d);
        out.ok = false;
        out.diagnostics = diags;
        return out;
    }
    // Old objects a create-before-destroy replace could not delete go first: the new record
    // written below has room for none of them.
    if let (false, Some(prior)) = (out.deposed.is_empty(), &input.prior) {
        let gone = |g| report(NodeProgress::DeposedGone(g, mutation));
        if let Err(left) = destroy_deposed(&*input.provider, prior, &gone, &mut diags, mutation) {
            out.ok = false;
            out.deposed.retain(|k| !left.keys.contains(k));
            out.diagnostics = diags;
            return out;
        }
    }
    if action != Action::NoOp {
        report(NodeProgress::Applying(action, out.changes.clone()));
    }
    if let Err(d) = realise_builds(input) {
        diags.extend(d);
        out.ok = false;
        out.diagnostics = diags;
        return out;
    }
    // A create may leave an object the state does not know if the run stops before its
    // result is recorded: the state notes it first (DESIGN §97).
    let pending = match action {
        Action::Create => Some(PendingAction::Create),
        Action::Replace { .. } => Some(PendingAction::Replace),
        _ => None,
    };
    if let Some(pending) = pending {
        if let Err(d) = intend(input, pending, &plan.planned_state, report, mutation) {
            diags.extend(d);
            out.ok = false;
            out.diagnostics = diags;
            return out;
        }
    }

    let result = match action {
        Action::NoOp => record_if_moved(input, s, &ty, &prior, &prior_private, &mut diags),
        Action::Create | Action::Update => apply_change(
            input,
            block,
            &ty,
            s.version,
            plan_prior,
            &plan.planned_state,
            config,
            &plan.planned_private,
            &mut diags,
            mutation,
        ),
        Action::Replace {
            create_before_destroy: false,
        } => {
            // Delete the old object first; record that before creating the new one.
            match destroy_object(
                &*input.provider,
                &input.type_name,
                &prior,
                &prior_private,
                &mut diags,
                mutation,
            ) {
                Ok(()) => report(NodeProgress::Commit(
                    Box::new(Change::Remove(input.id.clone())),
                    mutation,
                )),
                Err(_) => {
                    out.ok = false;
                    out.diagnostics = diags;
                    return out;
                }
            }
            create_fresh(
                input,
                block,
                &ty,
                s.version,
                new_config,
                &plan.planned_private,
                &mut diags,
                mutation,
            )
        }
        Action::Replace {
            create_before_destroy: true,
        } => {
            let old = Recorded {
                schema: s,
                ty: &ty,
                value: &prior,
                private: &prior_private,
            };
            replace_create_first(
                input,
                old,
                new_config,
                &plan.planned_private,
                &mut diags,
                report,
                mutation,
            )
        }
        Action::Delete | Action::Read | Action::Forget | Action::Recreate => {
            unreachable!("not planned for a configured resource of a provider with schemas")
        }
    };
    match result {
        Ok(commit) => out.commit = commit.map(Change::Put),
        Err(partial) => {
            out.ok = false;
            out.commit = partial.map(|r| Change::Put(*r));
        }
    }
    if diags.has_errors() {
        out.ok = false;
    }
    out.diagnostics = diags;
    out
}

/// The outcome of applying a change: `Ok(Some(record))` on success (`Ok(None)`: nothing to
/// record); `Err(partial)` on failure, with the partial object the provider returned, if any
/// (a failed create is recorded as tainted).
pub(super) type Applied = Result<Option<ResourceState>, Option<Box<ResourceState>>>;

/// Applies a create or update.
#[allow(
    clippy::too_many_arguments,
    reason = "each argument is a distinct input of the call (node, block, type, schema version, prior, planned, private data); a struct would only rename them"
)]
// Long because it is the apply call and the checks on its answer, in OpenTofu's order.
pub(super) fn apply_change(
    input: &NodeInput,
    block: &Block,
    ty: &Type,
    version: i64,
    prior: &Value,
    planned: &Value,
    config: &Value,
    planned_private: &[u8],
    diags: &mut Diagnostics,
    _mutation: Mutation,
) -> Applied {
    if !config.is_known() {
        diags.push(Diagnostic::error(
            "configuration still has unknown values at apply time (internal error)",
        ));
        return Err(None);
    }
    let resp = match input.provider.apply_resource_change(ApplyRequest {
        type_name: &input.type_name,
        prior_state: prior,
        planned_state: planned,
        config,
        planned_private,
    }) {
        Ok(r) => r,
        Err(d) => {
            // No answer: the provider may have created the object before it died.
            input.in_doubt.set(true);
            diags.extend(d);
            return Err(None);
        }
    };
    let failed = resp.diagnostics.has_errors();
    diags.extend(resp.diagnostics);
    if resp.new_state.is_null() {
        if !failed {
            diags.push(Diagnostic::error(
                "provider returned no object after apply (a bug in the provider)",
            ));
        }
        return Err(None);
    }
    let mut new_state = resp.new_state;
    // A write-only value is never stored, whatever the provider returned.
    block.null_write_only(&mut new_state);
    if !new_state.is_known() {
        diags.push(Diagnostic::error("provider returned unknown values after apply (a bug in the provider); they are recorded as null"));
        new_state = unknowns_to_null(new_state);
    }
    if !failed {
        let problems = plan::assert_object_compatible(block, planned, &new_state);
        for p in problems {
            if resp.legacy_type_system {
                log::debug!(
                    "provider produced an inconsistent result (tolerated for the legacy SDK): {p}"
                );
            } else {
                diags.push(
                    Diagnostic::error("provider produced an inconsistent result after apply")
                        .with_detail(format!("{p}\nThis is a bug in the provider.")),
                );
            }
        }
    }
    let mut rec = match record(
        input,
        block,
        ty,
        &new_state,
        &resp.private,
        version,
        ResourceKind::Managed,
    ) {
        Ok(r) => r,
        Err(d) => {
            diags.extend(d);
            return Err(None);
        }
    };
    if diags.has_errors() {
        if prior.is_null() {
            rec.status = ResourceStatus::Tainted;
        }
        return Err(Some(Box::new(rec)));
    }
    Ok(Some(rec))
}

/// Plans and applies a create with no prior object (second half of a replace).
#[allow(
    clippy::too_many_arguments,
    reason = "the same distinct inputs as apply_change, for the create half of a replace"
)]
pub(super) fn create_fresh(
    input: &NodeInput,
    block: &Block,
    ty: &Type,
    version: i64,
    config: &Value,
    first_private: &[u8],
    diags: &mut Diagnostics,
    mutation: Mutation,
) -> Applied {
    let proposed = plan::proposed_new(block, &Value::Null, config);
    let plan = match input.provider.plan_resource_change(PlanRequest {
        type_name: &input.type_name,
        prior_state: &Value::Null,
        proposed_new_state: &proposed,
        config,
        prior_private: first_private,
    }) {
        Ok(p) => p,
        Err(d) => {
            diags.extend(d);
            return Err(None);
        }
    };
    if plan.diagnostics.has_errors() {
        diags.extend(plan.diagnostics);
        return Err(None);
    }
    apply_change(
        input,
        block,
        ty,
        version,
        &Value::Null,
        &plan.planned_state,
        config,
        &plan.planned_private,
        diags,
        mutation,
    )
}

/// Replaces unknown values (a provider bug after apply) by null, as OpenTofu does.
pub(super) fn unknowns_to_null(value: Value) -> Value {
    match value {
        Value::Unknown => Value::Null,
        Value::List(items) => Value::List(items.into_iter().map(unknowns_to_null).collect()),
        Value::Map(m) => Value::Map(
            m.into_iter()
                .map(|(k, v)| (k, unknowns_to_null(v)))
                .collect(),
        ),
        Value::Dynamic { ty, value } => Value::Dynamic {
            ty,
            value: Box::new(unknowns_to_null(*value)),
        },
        other => other,
    }
}

/// A stored object as the apply half sees it: its schema, its type, its (upgraded, refreshed)
/// value and its private bytes.
#[derive(Clone, Copy)]
pub(super) struct Recorded<'a> {
    schema: &'a crate::schema::Schema,
    ty: &'a Type,
    value: &'a Value,
    private: &'a Vec<u8>,
}

/// A no-op: nothing to apply, but the refreshed or upgraded object is recorded if it moved.
fn record_if_moved(
    input: &NodeInput,
    s: &crate::schema::Schema,
    ty: &Type,
    prior: &Value,
    prior_private: &[u8],
    diags: &mut Diagnostics,
) -> Applied {
    let stored_same = input.prior.as_ref().is_some_and(|p| {
        p.schema_version == s.version
            && p.written_by.as_deref() == input.provider.binary_mark()
            && value::json::to_state_json(prior, ty)
                .map(|j| j == p.attributes)
                .unwrap_or(false)
            && p.private.clone().unwrap_or_default() == prior_private
            && p.replace_triggers == input.triggers.digests
    });
    if stored_same {
        return Ok(None);
    }
    record(
        input,
        &s.block,
        ty,
        prior,
        prior_private,
        s.version,
        ResourceKind::Managed,
    )
    .map(Some)
    .map_err(|d| {
        diags.extend(d);
        None
    })
}

/// A create-before-destroy replacement: the new object first, recorded with the old one
/// deposed, then the old one deleted (it stays deposed if that fails).
fn replace_create_first(
    input: &NodeInput,
    old: Recorded<'_>,
    config: &Value,
    planned_private: &[u8],
    diags: &mut Diagnostics,
    report: &dyn Fn(NodeProgress),
    mutation: Mutation,
) -> Applied {
    let (s, ty, prior, prior_private) = (old.schema, old.ty, old.value, old.private);
    let block = &s.block;
    let created = create_fresh(
        input,
        block,
        ty,
        s.version,
        config,
        planned_private,
        diags,
        mutation,
    );
    match created {
        Ok(Some(mut new_record)) => {
            // The old object is deposed until it is destroyed.
            let old_attrs = value::json::to_state_json(prior, ty).unwrap_or(Json::Null);
            new_record.deposed.push(DeposedObject::new(
                "deposed-0",
                old_attrs,
                (!prior_private.is_empty()).then(|| prior_private.clone()),
                s.version,
            ));
            report(NodeProgress::Commit(
                Box::new(Change::Put(new_record.clone())),
                mutation,
            ));
            if input.keep_old {
                // Deleted by the phase once its readers have moved to the new object.
                return Ok(Some(new_record));
            }
            if destroy_object(
                &*input.provider,
                &input.type_name,
                prior,
                prior_private,
                diags,
                mutation,
            )
            .is_ok()
            {
                new_record.deposed.clear();
            }
            Ok(Some(new_record))
        }
        other => other,
    }
}
