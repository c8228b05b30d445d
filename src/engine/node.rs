//! One resource's turn: plan it, and in apply mode carry the change out with its provider.
//!
//! Runs on a worker thread. Owns the per-resource protocol sequence (conform the config to the
//! schema, validate, upgrade and refresh stored state, ProposedNew, plan, filter
//! requires_replace, pick the action, apply, check the result) and turns results into state
//! changes. Every state change is handed back to the owner thread (progress reports for the
//! intermediate steps of a replace), which records it; nothing here touches the store. The turn
//! of a resource whose provider has no schemas is `untyped`'s.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value as Json;

use super::events::{Action, AttrChange, Event};
use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::{IgnorePath, Lifecycle, NodeKind};
use crate::objchange;
use crate::provider::{ApplyRequest, Capabilities, PlanRequest, Provider};
use crate::schema::Block;
use crate::state::{Change, DeposedObject, ResourceKind, ResourceState, ResourceStatus};
use crate::value::{self, PathStep, Type, Value};

/// Plan only, or plan and apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Decide the action, change nothing.
    Plan,
    /// Carry the change out.
    Apply,
}

/// Everything a worker needs for one resource, prepared by the owner.
pub struct NodeInput {
    pub id: String,
    pub kind: NodeKind,
    pub type_name: String,
    pub provider_id: String,
    pub provider_source: String,
    pub provider: Arc<dyn Provider>,
    /// What the provider's kind can do: without schemas the turn is `untyped`'s.
    pub capabilities: Capabilities,
    /// The configuration with references resolved; unknown where not yet known (plan only).
    pub config: Value,
    /// Build outputs to realise before apply: (path, drv path).
    pub builds: Vec<(String, Option<String>)>,
    /// Top-level attributes set from sensitive outputs: recorded as sensitive.
    pub sensitive_inputs: Vec<String>,
    pub prior: Option<ResourceState>,
    pub lifecycle: Lifecycle,
    pub dependencies: Vec<String>,
    pub mode: Mode,
    pub refresh: bool,
    pub build: bool,
}

/// What a worker reports before it is done.
pub enum NodeProgress {
    /// The plan is made and the change is about to be carried out.
    Applying(Action),
    /// A state change that must be recorded now (e.g. the old object of a replace is gone).
    Commit(Box<Change>),
    /// A deposed object was deleted: record the resource without it now.
    DeposedGone(DeposedGone),
}

/// A deposed object deleted: its key, the record without it, and how long the delete took.
pub struct DeposedGone {
    pub key: String,
    pub record: Box<ResourceState>,
    pub took: std::time::Duration,
}

impl DeposedGone {
    /// The `finished` event that reports it, and the state change that records it.
    pub fn into_event_and_change(self, phase: u32) -> (Event, Change) {
        let event = Event::Finished {
            phase,
            id: self.record.id.clone(),
            action: Action::Delete,
            duration: self.took,
            deposed: Some(self.key),
        };
        (event, Change::Put(*self.record))
    }
}

/// The result of one resource's turn.
pub struct NodeOutput {
    /// The decided action (None if it failed before deciding).
    pub action: Option<Action>,
    /// Changed attributes, for display.
    pub changes: Vec<AttrChange>,
    /// The final state change to record (none for plan mode or a no-op with nothing new).
    pub commit: Option<Change>,
    /// Refresh found the stored object different: (changes, gone).
    pub drift: Option<Drift>,
    /// Warnings and errors.
    pub diagnostics: Diagnostics,
    /// Whether it succeeded.
    pub ok: bool,
    /// How long the provider work took.
    pub elapsed: std::time::Duration,
    /// Keys of deposed objects planned for destruction (plan) or destroyed (apply).
    pub deposed: Vec<String>,
}

impl NodeOutput {
    pub(super) fn failed(diagnostics: Diagnostics, action: Option<Action>) -> Self {
        NodeOutput {
            action,
            changes: Vec::new(),
            commit: None,
            drift: None,
            diagnostics,
            ok: false,
            elapsed: Default::default(),
            deposed: Vec::new(),
        }
    }
}

/// Runs one resource's turn.
pub fn run(input: NodeInput, report: &dyn Fn(NodeProgress)) -> NodeOutput {
    let started = Instant::now();
    let id = input.id.clone();
    let mut out = match input.kind {
        NodeKind::Data => run_data(&input, report),
        NodeKind::Managed if input.capabilities.schemas => run_managed(&input, report),
        NodeKind::Managed => super::untyped::run_managed(&input, report),
    };
    out.diagnostics = std::mem::take(&mut out.diagnostics).for_resource(&id);
    out.elapsed = started.elapsed();
    out
}

fn err(summary: impl Into<String>) -> Diagnostics {
    Diagnostic::error(summary).into()
}

fn conform(block: &Block, config: &Value) -> Result<Value, Diagnostics> {
    block.conform_config(config).map_err(|errors| {
        Diagnostics(
            errors
                .into_iter()
                .map(|e| {
                    Diagnostic::error(format!("invalid configuration: {}", e.message)).at(e.path)
                })
                .collect(),
        )
    })
}

pub(super) fn realise_builds(input: &NodeInput) -> Result<(), Diagnostics> {
    if input.mode != Mode::Apply || !input.build {
        return Ok(());
    }
    for (path, drv) in &input.builds {
        crate::nixeval::realise(path, drv.as_deref())
            .map_err(|e| err(format!("could not realise build output {path}: {e}")))?;
    }
    Ok(())
}

fn run_data(input: &NodeInput, report: &dyn Fn(NodeProgress)) -> NodeOutput {
    let schema = input.provider.schema();
    let Some(s) = schema.data_sources.get(&input.type_name) else {
        return NodeOutput::failed(
            err(format!(
                "provider {} has no data source {:?}",
                input.provider_id, input.type_name
            )),
            None,
        );
    };
    let config = match conform(&s.block, &input.config) {
        Ok(c) => c,
        Err(d) => return NodeOutput::failed(d, None),
    };
    let mut diags = match input
        .provider
        .validate_data_config(&input.type_name, &config)
    {
        Ok(d) => d,
        Err(d) => return NodeOutput::failed(d, None),
    };
    if diags.has_errors() {
        return NodeOutput::failed(diags, None);
    }
    if !config.is_known() {
        // Read later, once the configuration is known.
        let planned = objchange::planned_unknown_for_data(&s.block, &config);
        let changes = display_changes(
            &s.block,
            &Value::Null,
            &planned,
            &[],
            &marked_sensitive(input),
        );
        return NodeOutput {
            action: Some(Action::Read),
            changes,
            commit: None,
            drift: None,
            diagnostics: diags,
            ok: true,
            elapsed: Default::default(),
            deposed: Vec::new(),
        };
    }
    if input.mode == Mode::Apply {
        report(NodeProgress::Applying(Action::Read));
    }
    let (state, read_diags) = match input.provider.read_data_source(&input.type_name, &config) {
        Ok(r) => r,
        Err(d) => return NodeOutput::failed(d, Some(Action::Read)),
    };
    diags.extend(read_diags);
    if diags.has_errors() {
        return NodeOutput::failed(diags, Some(Action::Read));
    }
    if state.is_null() {
        diags.push(Diagnostic::error(
            "provider returned no object for the data source",
        ));
        return NodeOutput::failed(diags, Some(Action::Read));
    }
    if !state.is_known() {
        diags.push(Diagnostic::error(
            "provider returned unknown values for the data source",
        ));
        return NodeOutput::failed(diags, Some(Action::Read));
    }
    let ty = s.block.implied_type();
    let record = match record(
        input,
        &s.block,
        &ty,
        &state,
        &[],
        s.version,
        ResourceKind::Data,
    ) {
        Ok(r) => r,
        Err(d) => return NodeOutput::failed(d, Some(Action::Read)),
    };
    // A read with a known configuration happens now, during plan too; only reads deferred to
    // apply (unknown configuration) are shown as planned actions.
    let action = if input.mode == Mode::Plan {
        Action::NoOp
    } else {
        Action::Read
    };
    NodeOutput {
        action: Some(action),
        changes: Vec::new(),
        commit: Some(Change::Put(record)),
        drift: None,
        diagnostics: diags,
        ok: true,
        elapsed: Default::default(),
        deposed: Vec::new(),
    }
}

/// Builds the state record for `value`.
fn record(
    input: &NodeInput,
    block: &Block,
    ty: &Type,
    value: &Value,
    private: &[u8],
    schema_version: i64,
    kind: ResourceKind,
) -> Result<ResourceState, Diagnostics> {
    let attributes = value::json::to_state_json(value, ty)
        .map_err(|e| err(format!("cannot record the provider's answer: {e}")))?;
    let mut r = ResourceState::new(
        &input.id,
        kind,
        &input.provider_id,
        &input.provider_source,
        &input.type_name,
        attributes,
    );
    r.schema_version = schema_version;
    r.private = if private.is_empty() {
        None
    } else {
        Some(private.to_vec())
    };
    r.dependencies = input.dependencies.clone();
    r.sensitive_paths = block
        .sensitive_paths(value)
        .iter()
        .map(|p| path_json(p))
        .collect();
    for attr in input
        .sensitive_inputs
        .iter()
        .chain(&echoes_of_sensitive_inputs(input, value))
    {
        let path = Json::Array(vec![Json::String(attr.clone())]);
        if !r.sensitive_paths.contains(&path) {
            r.sensitive_paths.push(path);
        }
    }
    r.create_before_destroy = input.lifecycle.create_before_destroy;
    // Fields a newer Nivis recorded for this resource are kept across the rewrite.
    if let Some(prior) = &input.prior {
        r.extra = prior.extra.clone();
    }
    crate::secrets::remember_state_record(&r);
    Ok(r)
}

/// Top-level attributes of `value` holding a copy of a sensitive input (a provider that
/// computes `endpoint = "https://" + password + "@host"` does not mark it sensitive, but the
/// secret is in it all the same). Inputs shorter than [`crate::secrets::MIN_LEN`] are not
/// looked for: short values turn up by chance.
fn echoes_of_sensitive_inputs(input: &NodeInput, value: &Value) -> Vec<String> {
    let (Some(config), Some(attrs)) = (input.config.as_map(), value.as_map()) else {
        return Vec::new();
    };
    let mut secrets = Vec::new();
    for a in &input.sensitive_inputs {
        if let Some(v) = config.get(a) {
            crate::secrets::each_scalar_value(v, &mut |s| {
                if s.len() >= crate::secrets::MIN_LEN {
                    secrets.push(s.to_string());
                }
            });
        }
    }
    if secrets.is_empty() {
        return Vec::new();
    }
    attrs
        .iter()
        .filter(|(_, v)| {
            let mut found = false;
            crate::secrets::each_scalar_value(v, &mut |s| {
                found |= secrets.iter().any(|x| s.contains(x.as_str()))
            });
            found
        })
        .map(|(k, _)| k.clone())
        .collect()
}

/// Paths known to be sensitive for this resource besides what its schema says: what its record
/// marks (a prior value set from a secret stays masked in a diff) and the top-level attributes
/// set from sensitive inputs now.
fn marked_sensitive(input: &NodeInput) -> Vec<Json> {
    let mut out: Vec<Json> = input
        .prior
        .iter()
        .flat_map(|p| p.sensitive_paths.iter().cloned())
        .collect();
    out.extend(
        input
            .sensitive_inputs
            .iter()
            .map(|a| Json::Array(vec![Json::String(a.clone())])),
    );
    out
}

/// Whether one of two paths lies within the other: a state path (JSON keys and indices) and a
/// value path.
fn overlaps(marked: &Json, path: &[PathStep]) -> bool {
    let Some(steps) = marked.as_array() else {
        return false;
    };
    steps.iter().zip(path).all(|(m, p)| match (m, p) {
        (Json::String(a), PathStep::Attr(b) | PathStep::Key(b)) => a == b,
        (Json::Number(n), PathStep::Index(i)) => n.as_u64() == Some(*i),
        _ => false,
    })
}

fn path_json(path: &[PathStep]) -> Json {
    Json::Array(
        path.iter()
            .map(|s| match s {
                PathStep::Attr(a) | PathStep::Key(a) => Json::String(a.clone()),
                PathStep::Index(i) => Json::from(*i),
            })
            .collect(),
    )
}

/// Attribute changes found by refresh, and whether the object is gone.
/// What changed outside Nivis: the attribute changes, and whether the object is gone.
pub type Drift = (Vec<AttrChange>, bool);

/// Upgrades (and optionally refreshes) the stored object: returns (object, private, drift).
fn current_object(
    input: &NodeInput,
    block: &Block,
    prior: &ResourceState,
    diags: &mut Diagnostics,
) -> Result<(Value, Vec<u8>, Option<Drift>), Diagnostics> {
    let raw = serde_json::to_vec(&prior.attributes).expect("state attributes serialise");
    let (upgraded, d) =
        input
            .provider
            .upgrade_resource_state(&input.type_name, prior.schema_version, &raw)?;
    diags.extend(d);
    let private = prior.private.clone().unwrap_or_default();
    if !input.refresh {
        return Ok((upgraded, private, None));
    }
    let read = input
        .provider
        .read_resource(&input.type_name, &upgraded, &private)?;
    let errors = read.diagnostics.has_errors();
    diags.extend(read.diagnostics);
    if errors {
        return Err(std::mem::take(diags));
    }
    let drift = if read.new_state.is_null() {
        Some((Vec::new(), true))
    } else if !objchange::values_equal(&upgraded, &read.new_state) {
        Some((
            display_changes(
                block,
                &upgraded,
                &read.new_state,
                &[],
                &prior.sensitive_paths,
            ),
            false,
        ))
    } else {
        None
    };
    Ok((read.new_state, read.private, drift))
}

fn run_managed(input: &NodeInput, report: &dyn Fn(NodeProgress)) -> NodeOutput {
    let schema = input.provider.schema();
    let Some(s) = schema.resources.get(&input.type_name) else {
        return NodeOutput::failed(
            err(format!(
                "provider {} has no resource type {:?}",
                input.provider_id, input.type_name
            )),
            None,
        );
    };
    let block = &s.block;
    let ty = block.implied_type();
    let config = match conform(block, &input.config) {
        Ok(c) => c,
        Err(d) => return NodeOutput::failed(d, None),
    };
    let mut diags = match input
        .provider
        .validate_resource_config(&input.type_name, &config)
    {
        Ok(d) => d,
        Err(d) => return NodeOutput::failed(d, None),
    };
    if diags.has_errors() {
        return NodeOutput::failed(diags, None);
    }

    // The current object, upgraded to the provider's schema and refreshed.
    let (prior, prior_private, drift, tainted) = match &input.prior {
        Some(p) => match current_object(input, block, p, &mut diags) {
            Ok((v, private, drift)) => (v, private, drift, p.is_tainted()),
            Err(d) => {
                diags.extend(d);
                return NodeOutput::failed(diags, None);
            }
        },
        None => (Value::Null, Vec::new(), None, false),
    };
    let exists = !prior.is_null();

    let config = if exists && !input.lifecycle.ignore_changes.is_empty() {
        let paths = ignore_paths(block, &input.lifecycle.ignore_changes);
        objchange::apply_ignore_changes(&config, &prior, &paths)
    } else {
        config
    };

    let plan_prior = if tainted { Value::Null } else { prior.clone() };
    let proposed = objchange::proposed_new(block, &plan_prior, &config);
    let plan = match input.provider.plan_resource_change(PlanRequest {
        type_name: &input.type_name,
        prior_state: &plan_prior,
        proposed_new_state: &proposed,
        config: &config,
        prior_private: &prior_private,
    }) {
        Ok(p) => p,
        Err(d) => {
            diags.extend(d);
            return NodeOutput::failed(diags, None);
        }
    };
    let plan_errors = plan.diagnostics.has_errors();
    diags.extend(plan.diagnostics.clone());
    if plan_errors {
        return NodeOutput::failed(diags, None);
    }
    if let Err(d) = check_plan(
        block,
        &plan_prior,
        &config,
        &plan.planned_state,
        plan.legacy_type_system,
    ) {
        diags.extend(d);
        return NodeOutput::failed(diags, None);
    }
    let replace_paths = if exists && !tainted {
        objchange::filter_requires_replace(&prior, &plan.planned_state, &plan.requires_replace)
    } else {
        Vec::new()
    };
    let cbd = input.lifecycle.create_before_destroy;
    let action = if !exists {
        Action::Create
    } else if tainted || !replace_paths.is_empty() {
        Action::Replace {
            create_before_destroy: cbd,
        }
    } else if objchange::values_equal(&plan.planned_state, &prior) {
        Action::NoOp
    } else {
        Action::Update
    };
    let changes = display_changes(
        block,
        &if tainted {
            prior.clone()
        } else {
            plan_prior.clone()
        },
        &plan.planned_state,
        &replace_paths,
        &marked_sensitive(input),
    );

    if let Action::Replace { .. } = action {
        if input.lifecycle.prevent_destroy {
            diags.push(
                Diagnostic::error("this change would replace the resource, but lifecycle.preventDestroy is set")
                    .with_detail(format!(
                        "Attributes forcing replacement: {}. Change the configuration back, or remove preventDestroy if replacing is intended.",
                        replace_paths.iter().map(|p| value::render_path(p)).collect::<Vec<_>>().join(", ")
                    )),
            );
            return NodeOutput::failed(diags, Some(action));
        }
    }

    let mut out = NodeOutput {
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
    };
    if input.mode == Mode::Plan {
        out.diagnostics = diags;
        return out;
    }
    // Old objects a create-before-destroy replace could not delete go first: the new record
    // written below has room for none of them.
    if let (false, Some(prior)) = (out.deposed.is_empty(), &input.prior) {
        let gone = |g| report(NodeProgress::DeposedGone(g));
        if let Err(failed) = destroy_deposed(&*input.provider, prior, &gone, &mut diags) {
            out.ok = false;
            out.deposed.retain(|k| !failed.contains(k));
            out.diagnostics = diags;
            return out;
        }
    }
    if action != Action::NoOp {
        report(NodeProgress::Applying(action));
    }
    if let Err(d) = realise_builds(input) {
        diags.extend(d);
        out.ok = false;
        out.diagnostics = diags;
        return out;
    }

    let result = match action {
        Action::NoOp => {
            // Nothing to apply; record the refreshed/upgraded object if it moved.
            let stored_same = input.prior.as_ref().is_some_and(|p| {
                p.schema_version == s.version
                    && value::json::to_state_json(&prior, &ty)
                        .map(|j| j == p.attributes)
                        .unwrap_or(false)
                    && p.private.clone().unwrap_or_default() == prior_private
            });
            if stored_same {
                Ok(None)
            } else {
                record(
                    input,
                    block,
                    &ty,
                    &prior,
                    &prior_private,
                    s.version,
                    ResourceKind::Managed,
                )
                .map(Some)
                .map_err(|d| {
                    diags.extend(d);
                    None
                })
            }
        }
        Action::Create | Action::Update => apply_change(
            input,
            block,
            &ty,
            s.version,
            &plan_prior,
            &plan.planned_state,
            &config,
            &plan.planned_private,
            &mut diags,
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
            ) {
                Ok(()) => report(NodeProgress::Commit(Box::new(Change::Remove(
                    input.id.clone(),
                )))),
                Err(()) => {
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
                &config,
                &plan.planned_private,
                &mut diags,
            )
        }
        Action::Replace {
            create_before_destroy: true,
        } => {
            let created = create_fresh(
                input,
                block,
                &ty,
                s.version,
                &config,
                &plan.planned_private,
                &mut diags,
            );
            match created {
                Ok(Some(mut new_record)) => {
                    // The old object is deposed until it is destroyed.
                    let old_attrs = value::json::to_state_json(&prior, &ty).unwrap_or(Json::Null);
                    new_record.deposed.push(DeposedObject::new(
                        "deposed-0",
                        old_attrs,
                        (!prior_private.is_empty()).then(|| prior_private.clone()),
                        s.version,
                    ));
                    report(NodeProgress::Commit(Box::new(Change::Put(
                        new_record.clone(),
                    ))));
                    if destroy_object(
                        &*input.provider,
                        &input.type_name,
                        &prior,
                        &prior_private,
                        &mut diags,
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

/// Checks a plan the way OpenTofu does; with the legacy SDK type system problems are warnings.
fn check_plan(
    block: &Block,
    prior: &Value,
    config: &Value,
    planned: &Value,
    legacy: bool,
) -> Result<(), Diagnostics> {
    let problems = objchange::assert_plan_valid(block, prior, config, planned);
    if problems.is_empty() {
        return Ok(());
    }
    if legacy {
        for p in problems {
            log::debug!("provider produced an invalid plan (tolerated for the legacy SDK): {p}");
        }
        return Ok(());
    }
    Err(Diagnostics(
        problems
            .into_iter()
            .map(|p| {
                Diagnostic::error("provider produced an invalid plan").with_detail(format!(
                    "{p}\nThis is a bug in the provider; please report it to its authors."
                ))
            })
            .collect(),
    ))
}

/// The outcome of applying a change: `Ok(Some(record))` on success (`Ok(None)`: nothing to
/// record); `Err(partial)` on failure, with the partial object the provider returned, if any
/// (a failed create is recorded as tainted).
type Applied = Result<Option<ResourceState>, Option<Box<ResourceState>>>;

/// Applies a create or update.
#[allow(clippy::too_many_arguments)]
fn apply_change(
    input: &NodeInput,
    block: &Block,
    ty: &Type,
    version: i64,
    prior: &Value,
    planned: &Value,
    config: &Value,
    planned_private: &[u8],
    diags: &mut Diagnostics,
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
    if !new_state.is_known() {
        diags.push(Diagnostic::error("provider returned unknown values after apply (a bug in the provider); they are recorded as null"));
        new_state = unknowns_to_null(new_state);
    }
    if !failed {
        let problems = objchange::assert_object_compatible(block, planned, &new_state);
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
fn create_fresh(
    input: &NodeInput,
    block: &Block,
    ty: &Type,
    version: i64,
    config: &Value,
    first_private: &[u8],
    diags: &mut Diagnostics,
) -> Applied {
    let proposed = objchange::proposed_new(block, &Value::Null, config);
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
    )
}

/// Deletes an object (apply with a null plan).
fn destroy_object(
    provider: &dyn Provider,
    type_name: &str,
    prior: &Value,
    private: &[u8],
    diags: &mut Diagnostics,
) -> Result<(), ()> {
    match provider.apply_resource_change(ApplyRequest {
        type_name,
        prior_state: prior,
        planned_state: &Value::Null,
        config: &Value::Null,
        planned_private: private,
    }) {
        Ok(resp) => {
            let failed = resp.diagnostics.has_errors();
            diags.extend(resp.diagnostics);
            if failed {
                Err(())
            } else {
                Ok(())
            }
        }
        Err(d) => {
            diags.extend(d);
            Err(())
        }
    }
}

/// Destroys the deposed objects of `prior`, reporting each success at once (`gone`). On
/// failure, returns the keys still deposed (the diagnostics say why).
fn destroy_deposed(
    provider: &dyn Provider,
    prior: &ResourceState,
    gone: &dyn Fn(DeposedGone),
    diags: &mut Diagnostics,
) -> Result<(), Vec<String>> {
    let mut remaining = prior.deposed.clone();
    for old in &prior.deposed {
        let started = Instant::now();
        let mut old_diags = Diagnostics::new();
        let destroyed = destroy_stored(
            provider,
            &prior.type_name,
            &old.attributes,
            old.schema_version,
            old.private.as_deref().unwrap_or_default(),
            &mut old_diags,
        );
        if destroyed.is_ok() {
            remaining.retain(|d| d.key != old.key);
            let mut record = prior.clone();
            record.deposed = remaining.clone();
            gone(DeposedGone {
                key: old.key.clone(),
                record: Box::new(record),
                took: started.elapsed(),
            });
        }
        for mut d in old_diags.0 {
            if d.is_error() {
                d.summary = format!(
                    "deleting deposed object {} (left by an earlier create-before-destroy replace): {}",
                    old.key, d.summary
                );
            }
            diags.push(d);
        }
    }
    if remaining.is_empty() {
        Ok(())
    } else {
        Err(remaining.into_iter().map(|d| d.key).collect())
    }
}

/// Upgrades a stored object and deletes it (apply with a null plan).
fn destroy_stored(
    provider: &dyn Provider,
    type_name: &str,
    attributes: &Json,
    schema_version: i64,
    private: &[u8],
    diags: &mut Diagnostics,
) -> Result<(), ()> {
    let raw = serde_json::to_vec(attributes).expect("state attributes serialise");
    let (current, upgrade_diags) =
        match provider.upgrade_resource_state(type_name, schema_version, &raw) {
            Ok(upgraded) => upgraded,
            Err(d) => {
                diags.extend(d);
                return Err(());
            }
        };
    // An upgrade that reports errors still returns an object: the delete is tried, and the
    // errors fail the result.
    let upgrade_failed = upgrade_diags.has_errors();
    diags.extend(upgrade_diags);
    let deleted = destroy_object(provider, type_name, &current, private, diags);
    if upgrade_failed {
        return Err(());
    }
    deleted
}

/// Destroys the stored object of `state` with `provider`: upgrade, then apply with a null plan.
/// Deposed objects go first, each reported through `gone` as it goes.
pub fn destroy(
    provider: &dyn Provider,
    state: &ResourceState,
    gone: &dyn Fn(DeposedGone),
) -> Result<Diagnostics, Diagnostics> {
    let mut diags = Diagnostics::new();
    let destroyed = destroy_deposed(provider, state, gone, &mut diags).is_ok()
        && destroy_stored(
            provider,
            &state.type_name,
            &state.attributes,
            state.schema_version,
            state.private.as_deref().unwrap_or_default(),
            &mut diags,
        )
        .is_ok();
    if destroyed {
        Ok(diags)
    } else {
        Err(diags)
    }
}

/// Refreshes the stored object: `Ok(None)` if unchanged, `Ok(Some(change))` otherwise.
/// Reads a stored object back (`nivis refresh`): the change to record, if the provider's answer
/// differs in any way (attributes, private data, schema version), and the drift to report, if
/// the object itself differs (private data and a schema upgrade are no drift).
pub fn refresh(
    provider: &dyn Provider,
    state: &ResourceState,
) -> Result<(Option<Change>, Option<Drift>), Diagnostics> {
    let schema = provider.schema();
    let s = schema.resources.get(&state.type_name).ok_or_else(|| {
        err(format!(
            "provider has no resource type {:?}",
            state.type_name
        ))
    })?;
    let ty = s.block.implied_type();
    let raw = serde_json::to_vec(&state.attributes).expect("state attributes serialise");
    let (current, _) =
        provider.upgrade_resource_state(&state.type_name, state.schema_version, &raw)?;
    let private = state.private.clone().unwrap_or_default();
    let read = provider.read_resource(&state.type_name, &current, &private)?;
    if read.diagnostics.has_errors() {
        return Err(read.diagnostics);
    }
    if read.new_state.is_null() {
        return Ok((
            Some(Change::Remove(state.id.clone())),
            Some((Vec::new(), true)),
        ));
    }
    let attributes =
        value::json::to_state_json(&read.new_state, &ty).map_err(|e| err(e.to_string()))?;
    let new_private = (!read.private.is_empty()).then_some(read.private.clone());
    let drift = (!objchange::values_equal(&current, &read.new_state)).then(|| {
        let changes = display_changes(
            &s.block,
            &current,
            &read.new_state,
            &[],
            &state.sensitive_paths,
        );
        (changes, false)
    });
    if attributes == state.attributes
        && new_private == state.private
        && state.schema_version == s.version
    {
        return Ok((None, None));
    }
    let mut rec = state.clone();
    rec.attributes = attributes;
    rec.private = new_private;
    rec.schema_version = s.version;
    // What the schema marks now, plus what the record marked before (values set from secrets
    // stay secret when the object is read again).
    let mut paths: Vec<Json> = s
        .block
        .sensitive_paths(&read.new_state)
        .iter()
        .map(|p| path_json(p))
        .collect();
    for p in &state.sensitive_paths {
        if !paths.contains(p) {
            paths.push(p.clone());
        }
    }
    rec.sensitive_paths = paths;
    crate::secrets::remember_state_record(&rec);
    Ok((Some(Change::Put(rec)), drift))
}

fn ignore_paths(block: &Block, ignore: &[IgnorePath]) -> Vec<Vec<PathStep>> {
    let mut out = Vec::new();
    for p in ignore {
        match p {
            IgnorePath::All => {
                for (name, attr) in &block.attributes {
                    if attr.optional || attr.required {
                        out.push(vec![PathStep::Attr(name.clone())]);
                    }
                }
                for name in block.block_types.keys() {
                    out.push(vec![PathStep::Attr(name.clone())]);
                }
            }
            IgnorePath::Path(steps) => out.push(crate::ir::value_path(steps)),
        }
    }
    out
}

/// The changed attributes between two objects, with sensitivity and replacement marks.
/// `marked` adds paths known to be sensitive beyond the schema (JSON arrays, as in state).
pub fn display_changes(
    block: &Block,
    before: &Value,
    after: &Value,
    replace: &[Vec<PathStep>],
    marked: &[Json],
) -> Vec<AttrChange> {
    let sensitive: Vec<Vec<PathStep>> = block
        .sensitive_paths(before)
        .into_iter()
        .chain(block.sensitive_paths(after))
        .collect();
    let sensitive_top: Vec<&str> = block
        .attributes
        .iter()
        .filter(|(_, a)| a.sensitive)
        .map(|(n, _)| n.as_str())
        .collect();
    objchange::diff_typed(before, after, &block.implied_type())
        .into_iter()
        .map(|(path, b, a)| {
            let is_sensitive = sensitive.iter().any(|s| path.starts_with(s))
                || matches!(path.first(), Some(PathStep::Attr(n)) if sensitive_top.contains(&n.as_str()))
                || marked.iter().any(|m| overlaps(m, &path));
            let forces = replace.iter().any(|r| path.starts_with(r) || r.starts_with(&path));
            AttrChange { path, before: b, after: a, sensitive: is_sensitive, forces_replacement: forces }
        })
        .collect()
}

/// Replaces unknown values (a provider bug after apply) by null, as OpenTofu does.
fn unknowns_to_null(value: Value) -> Value {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::Attribute;

    fn block() -> Block {
        Block {
            attributes: [
                ("from".to_string(), Attribute::required(Type::String)),
                ("endpoint".to_string(), Attribute::computed(Type::String)),
                ("note".to_string(), Attribute::optional(Type::String)),
            ]
            .into(),
            ..Block::default()
        }
    }

    fn obj(from: &str, endpoint: Value) -> Value {
        Value::Map(
            [
                ("from".to_string(), Value::String(from.into())),
                ("endpoint".to_string(), endpoint),
                ("note".to_string(), Value::Null),
            ]
            .into(),
        )
    }

    #[test]
    fn marked_paths_mask_both_sides_of_a_change() {
        let before = obj("old-secret", Value::String("beta://old-secret".into()));
        let after = obj("new-value", Value::Unknown);
        let plain = display_changes(&block(), &before, &after, &[], &[]);
        assert!(plain.iter().all(|c| !c.sensitive));
        let marked = display_changes(&block(), &before, &after, &[], &[json!(["from"])]);
        let from = marked
            .iter()
            .find(|c| render_path(&c.path) == "from")
            .unwrap();
        assert!(
            from.sensitive,
            "a prior value set from a secret stays masked"
        );
        let endpoint = marked
            .iter()
            .find(|c| render_path(&c.path) == "endpoint")
            .unwrap();
        assert!(!endpoint.sensitive);
        assert!(overlaps(
            &json!(["tags", "k"]),
            &[PathStep::Attr("tags".into())]
        ));
        assert!(overlaps(
            &json!(["net", 0]),
            &[
                PathStep::Attr("net".into()),
                PathStep::Index(0),
                PathStep::Attr("ip".into())
            ]
        ));
        assert!(!overlaps(
            &json!(["net", 1]),
            &[PathStep::Attr("net".into()), PathStep::Index(0)]
        ));
    }

    fn render_path(p: &[PathStep]) -> String {
        value::render_path(p)
    }
}
