//! One resource's turn: plan it, and in apply mode carry the change out with its provider.
//!
//! Runs on a worker thread. Owns the per-resource protocol sequence (conform the config to the
//! schema, validate, upgrade and refresh stored state, ProposedNew, plan, filter
//! requires_replace, pick the action, apply, check the result) and turns results into state
//! changes. Every state change is handed back to the owner thread (progress reports for the
//! intermediate steps of a replace), which records it; nothing here touches the store. The turn
//! of a resource whose provider has no schemas is `untyped`'s.

mod answers;
mod data;
mod delete;
mod managed;
mod previewed;
mod record;
mod refresh;
mod untyped;
mod upgrade;
pub(super) use previewed::{DataRead, EarlierPlan, Previewed};
pub(super) use record::path_json;

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value as Json;

use super::events::{Action, AttrChange, Event};
use super::Mutation;
use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::{Lifecycle, NodeKind};
use crate::provider::{Capabilities, Provider};
use crate::schema::Block;
use crate::state::{Change, PendingAction, PendingOperation, ResourceState};
use crate::value::Value;
use crossbeam_channel::{Receiver, Sender};

use self::data::run_data;
pub(super) use self::delete::destroy;
pub(super) use self::delete::destroy_deposed;
use self::managed::run_managed;
pub(super) use self::refresh::refresh;
use self::refresh::Drift;

/// Plan only, or plan and apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Decide the action, change nothing.
    Plan,
    /// Plan only, as the preview of the apply of the same phase: what the providers answered
    /// is kept for that apply (DESIGN §106).
    Preview,
    /// Carry the change out, with the permission to.
    Apply(Mutation),
}

impl Mode {
    /// Whether changes are carried out.
    pub(super) fn applies(self) -> bool {
        matches!(self, Mode::Apply(_))
    }

    /// Whether this turn's answers are kept for the apply of the phase.
    pub(super) fn keeps_answers(self) -> bool {
        self == Mode::Preview
    }
}

/// Everything a worker needs for one resource, prepared by the owner.
pub(super) struct NodeInput {
    /// The resource's address.
    pub(crate) id: String,
    /// Managed resource or data source.
    pub(crate) kind: NodeKind,
    /// The resource type (`aws_instance`).
    pub(crate) type_name: String,
    /// The IR id of its provider.
    pub(crate) provider_id: String,
    /// Its provider's `source` as the plan gives it (recorded in state).
    pub(crate) provider_source: String,
    /// The running provider.
    pub(crate) provider: Arc<dyn Provider>,
    /// What the provider's kind can do: without schemas the turn is `untyped`'s.
    pub(crate) capabilities: Capabilities,
    /// The configuration with references resolved; unknown where not yet known (plan only).
    pub(crate) config: Value,
    /// Build outputs to realise before apply: (path, drv path).
    pub(crate) builds: Vec<(String, Option<String>)>,
    /// Top-level attributes set from sensitive outputs: recorded as sensitive.
    pub(crate) sensitive_inputs: Vec<String>,
    /// Its record in state before this turn, if any.
    pub(crate) prior: Option<ResourceState>,
    /// Its lifecycle rules (with create-before-destroy propagated).
    pub(crate) lifecycle: Lifecycle,
    /// The resources it depends on (recorded in state, for destroy order).
    pub(crate) dependencies: Vec<String>,
    /// Plan only, or plan and apply (with the mutation capability).
    pub(crate) mode: Mode,
    /// `--replace`: plan a replacement even if nothing forces one.
    pub(crate) force_replace: bool,
    /// `lifecycle.replaceTriggeredBy`: the triggers that fired (a replacement, as
    /// `--replace`) and the digests recorded with the object.
    pub(crate) triggers: super::triggers::Triggers,
    /// `apply FILE`: the action classes the saved plan allows this resource now (a no-op is
    /// always allowed); `None` without a saved plan.
    pub(crate) allowed: Option<std::collections::BTreeSet<String>>,
    /// `--refresh`: read the stored object before planning.
    pub(crate) refresh: bool,
    /// `--build`: realise `__build` outputs before apply.
    pub(crate) build: bool,
    /// A data source: a read made earlier for this phase, whose result this turn uses
    /// instead of reading again when its configuration is the same.
    pub(crate) earlier_read: Option<EarlierRead>,
    /// A managed resource in apply mode: its plan made by this phase's plan, which this turn
    /// uses instead of asking the provider again when its inputs are the same (DESIGN §106).
    pub(crate) earlier_plan: Option<Box<EarlierPlan>>,
    /// A create-before-destroy replacement keeps its old object deposed for the phase to
    /// delete after the resources that read it have their turns (Terraform's order).
    pub(crate) keep_old: bool,
    /// The run's secrets: what this turn records at sensitive paths (and the recorded values
    /// of its sensitive inputs) is taught to it.
    pub(crate) redactor: crate::secrets::Redactor,
    /// Apply mode, a resource with no record: the note that its create is about to be sent,
    /// written with the owner's next commit (DESIGN §97); the turn waits for this answer (is
    /// it durable?) before it sends the create.
    pub(crate) create_noted: Option<Receiver<bool>>,
    /// Set when a create's call to the provider failed without an answer (the provider died,
    /// or the connection broke): the object may exist, so its pending operation stays.
    pub(crate) in_doubt: std::cell::Cell<bool>,
}

/// What a data source's turn has from an earlier read.
#[derive(Debug, Clone)]
pub(super) enum EarlierRead {
    /// Read by this run's plan of the phase.
    Here(Box<DataRead>),
    /// Recorded by the saved plan being applied.
    Saved(crate::engine::plan_file::DataReadRecord),
}

/// What a worker reports before it is done.
pub(super) enum NodeProgress {
    /// The plan is made and the change (with its attribute changes) is about to be carried out.
    Applying(Action, Vec<AttrChange>),
    /// A state change that must be recorded now (e.g. the old object of a replace is gone),
    /// with the token of the apply that made it.
    Commit(Box<Change>, Mutation),
    /// A deposed object was deleted: record the resource without it now (with the token).
    DeposedGone(DeposedGone, Mutation),
    /// An operation is about to be sent: record it as pending (DESIGN §97) and answer on the
    /// channel whether that is durable; the turn waits for the answer.
    Intend(Box<PendingOperation>, Mutation, Sender<bool>),
}

/// A deposed object deleted: its key, the record without it, and how long the delete took.
pub(super) struct DeposedGone {
    /// The deposed object's key.
    pub(crate) key: String,
    /// The resource's record without it.
    pub(crate) record: Box<ResourceState>,
    /// How long the delete took.
    pub(crate) took: std::time::Duration,
}

impl DeposedGone {
    /// The `finished` event that reports it, and the state change that records it.
    pub(super) fn into_event_and_change(self, phase: u32) -> (Event, Change) {
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
pub(super) struct NodeOutput {
    /// The decided action (None if it failed before deciding).
    pub(crate) action: Option<Action>,
    /// Changed attributes, for display.
    pub(crate) changes: Vec<AttrChange>,
    /// The final state change to record (none for plan mode or a no-op with nothing new).
    pub(crate) commit: Option<Change>,
    /// Refresh found the stored object different: (changes, gone).
    pub(crate) drift: Option<Drift>,
    /// Warnings and errors.
    pub(crate) diagnostics: Diagnostics,
    /// Whether it succeeded.
    pub(crate) ok: bool,
    /// How long the provider work took.
    pub(crate) elapsed: std::time::Duration,
    /// Keys of deposed objects planned for destruction (plan) or destroyed (apply).
    pub(crate) deposed: Vec<String>,
    /// Plan mode: the object as planned, for the resources planned after it in the same phase
    /// (none for a no-op, whose recorded object is what they see).
    pub(crate) planned_object: Option<PlannedObject>,
    /// Plan mode, a managed resource: its plan, for the apply of the phase (DESIGN §106).
    pub(crate) plan_made: Option<Box<EarlierPlan>>,
    /// The provider call of a create failed without an answer: the object may exist.
    pub(crate) in_doubt: bool,
}

/// What a resource is planned to become, as the resources that read it see it in the same
/// phase.
pub(super) struct PlannedObject {
    /// The planned object: unknown where the provider does not know yet.
    pub(crate) value: Value,
    /// Its sensitive paths, as state records them (JSON arrays).
    pub(crate) sensitive: Vec<Json>,
    /// Whether any attribute may differ from the recorded object: values Nix computed from
    /// it are stale then, and their resources wait for the next evaluation.
    pub(crate) changes_outputs: bool,
    /// A data source read now: the configuration it was read with.
    pub(crate) read_with: Option<Value>,
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
            planned_object: None,
            plan_made: None,
            in_doubt: false,
        }
    }
}

/// Runs one resource's turn.
pub(super) fn run(input: NodeInput, report: &dyn Fn(NodeProgress)) -> NodeOutput {
    let started = Instant::now();
    let id = input.id.clone();
    let mut out = match input.kind {
        NodeKind::Data => run_data(&input, report),
        NodeKind::Managed if input.capabilities.schemas => run_managed(&input, report),
        NodeKind::Managed => untyped::run_managed(&input, report),
    };
    out.diagnostics = std::mem::take(&mut out.diagnostics).for_resource(&id);
    out.elapsed = started.elapsed();
    out.in_doubt = input.in_doubt.get();
    out
}

/// The error of a resource whose operation a stopped run left pending: its summary and the
/// way on.
pub(super) fn pending_refusal(pending: &PendingOperation) -> Diagnostics {
    Diagnostic::error(pending.summary())
        .with_detail(pending.remedy())
        .into()
}

/// The note that `action` on resource `id` (of `type_name`, by provider `provider`) is about
/// to be sent with `request` (the configuration or the planned object: its digest is kept).
pub(super) fn pending_operation(
    id: &str,
    type_name: &str,
    provider: &str,
    action: PendingAction,
    request: &Value,
) -> PendingOperation {
    let plain = crate::value::json::to_plain_json(request).unwrap_or(Json::Null);
    // A plain value's maps are ordered already: its JSON is canonical as written.
    let bytes = serde_json::to_vec(&plain).unwrap_or_default();
    PendingOperation {
        address: id.to_string(),
        action,
        provider: provider.to_string(),
        type_name: type_name.to_string(),
        digest: crate::engine::plan_file::sha256(&bytes),
        run: crate::state::this_run().clone(),
    }
}

/// Makes sure the state notes that `action` on `input`'s resource is about to be sent with
/// `request`, durably, before it is: a run killed from then on leaves a note that the object
/// may exist (DESIGN §97). A create of a resource with no record was noted at dispatch (written
/// with the owner's next commit, so it usually costs no write of its own); anything else is
/// noted now, and the turn waits for the write. An error when the state could not take the
/// note: the operation is then not sent.
pub(super) fn intend(
    input: &NodeInput,
    action: PendingAction,
    request: &Value,
    report: &dyn Fn(NodeProgress),
    mutation: Mutation,
) -> Result<(), Diagnostics> {
    let durable = match (&input.create_noted, action) {
        (Some(noted), PendingAction::Create) => noted.recv(),
        _ => {
            let (id, ty) = (&input.id, &input.type_name);
            let operation = pending_operation(id, ty, &input.provider_id, action, request);
            let (tx, rx) = crossbeam_channel::bounded(1);
            report(NodeProgress::Intend(Box::new(operation), mutation, tx));
            rx.recv()
        }
    };
    match durable {
        Ok(true) => Ok(()),
        _ => Err(err(format!(
            "the {} of {} was not started: the state could not record that it was about to be \
             sent",
            action.word(),
            input.id
        ))),
    }
}

/// Refuses an action the saved plan does not allow (see [`NodeInput::allowed`]).
pub(super) fn check_allowed(input: &NodeInput, action: Action) -> Result<(), Diagnostics> {
    let Some(allowed) = &input.allowed else {
        return Ok(());
    };
    let class = action.class();
    if action == Action::NoOp || allowed.contains(class) {
        return Ok(());
    }
    let shown = if allowed.is_empty() {
        "no change".to_string()
    } else {
        allowed.iter().cloned().collect::<Vec<_>>().join(" or ")
    };
    Err(Diagnostic::error(format!(
        "unplanned change: {} would {class} here, but the saved plan shows {shown} for it; nothing was done to it",
        input.id
    ))
    .with_detail(
        "Applying a saved plan stops before anything it did not show. What was applied so far \
         is recorded. Run `nivis plan --out FILE` again, review it, and apply that.",
    )
    .into())
}

fn err(summary: impl Into<String>) -> Diagnostics {
    Diagnostic::error(summary).into()
}

/// `config` conformed to `block`, or one diagnostic per problem at its path; `whose` starts
/// each summary (e.g. `provider aws: `), the one place configurations are conformed.
pub(super) fn conform_config(
    block: &Block,
    config: &Value,
    whose: &str,
) -> Result<Value, Diagnostics> {
    block.conform_config(config).map_err(|errors| {
        Diagnostics(
            errors
                .into_iter()
                .map(|e| {
                    Diagnostic::error(format!("{whose}invalid configuration: {}", e.message))
                        .at(e.path)
                })
                .collect(),
        )
    })
}

fn conform(block: &Block, config: &Value) -> Result<Value, Diagnostics> {
    conform_config(block, config, "")
}

pub(super) fn realise_builds(input: &NodeInput) -> Result<(), Diagnostics> {
    if !input.mode.applies() || !input.build {
        return Ok(());
    }
    for (path, drv) in &input.builds {
        crate::nixeval::realise(path, drv.as_deref(), &input.redactor)
            .map_err(|e| err(format!("could not realise build output {path}: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::record::{display_changes, overlaps};
    use super::*;
    use crate::schema::Attribute;
    use crate::value::{self, PathStep, Type};

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
