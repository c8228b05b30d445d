//! Removing recorded objects: `destroy`, and orphans (in state, no longer declared) at the end
//! of an apply. Reverse dependency order; objects whose provider cannot delete are forgotten.
//!
//! The stages are functions of their inputs: [`removal_set`] (which records `destroy`
//! removes, what `preventDestroy` refuses), [`list_removals`] (the planned removals) and
//! [`delete_set`] (the removals on the scheduler, each committed). The `Engine` methods are
//! their frames: evaluating, the saved-plan checks, starting the deleting providers.
//! Not: deleting one object through its provider (`node::destroy`).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::analysis::{forgotten_by_plan, needing_delete, orphans, removal};
use super::error::EngineError;
use super::events::{Action, Event, Sink};
use super::record::Recorder;
use super::{interrupt_flag, node, Confirm, Engine, Mutation, Report};
use crate::diag::{Diagnostic, Diagnostics};
use crate::graph::Graph;
use crate::ir::Ir;
use crate::provider::Provider;
use crate::sched::{self, Reporter, Status};
use crate::state::{Change, LockedStore, StateFile, StateStore};

impl Engine<'_> {
    /// The planned removal of every managed resource in state that the plan no longer declares.
    pub(super) fn emit_orphans(&mut self, ir: &Ir, state: &StateFile, phase: u32) {
        let ids = orphans(ir, state);
        for id in &ids {
            if let Some(r) = state.get(id).filter(|r| r.is_managed()) {
                let action = removal(ir, r);
                let event = Event::planned_removal(phase, id, &r.type_name, action, None);
                self.sink.event(event);
            }
        }
        self.hint_renames(ir, state, &ids);
    }

    /// Destroys (or forgets) resources in state that the plan no longer declares.
    pub(super) fn destroy_orphans(
        &mut self,
        ir: &Ir,
        holder: &mut dyn LockedStore,
        phase: u32,
        mutation: Mutation,
    ) -> Result<Vec<(String, Action)>, EngineError> {
        let ids = orphans(ir, holder.state());
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let (data, managed): (Vec<String>, Vec<String>) = ids
            .into_iter()
            .partition(|id| holder.state().get(id).is_some_and(|r| !r.is_managed()));
        self.check_removals(&managed)?;
        // `lib.removed { destroy = false; }`: the records go in one commit, no provider called
        // (a provider running to delete other objects of the same provider must not see them).
        let (forgotten, managed): (Vec<String>, Vec<String>) =
            (managed.into_iter()).partition(|id| forgotten_by_plan(ir, id));
        let mut removed = self.forget_records(holder, &forgotten, phase, mutation)?;
        if !data.is_empty() {
            holder.commit(
                &data
                    .iter()
                    .map(|id| Change::Remove(id.clone()))
                    .collect::<Vec<_>>(),
                mutation,
            )?;
        }
        if managed.is_empty() {
            return Ok(removed);
        }
        let deleting = needing_delete(ir, holder.state(), &managed);
        self.prepare_providers(ir, holder.state(), &deleting, true)?;
        removed.extend(self.destroy_set(ir, holder, &managed, phase, mutation)?);
        Ok(removed)
    }

    /// Forgets `ids` (managed records the plan lists in `removed` with `destroy = false`): one
    /// commit, each reported as started and finished with [`Action::Forget`].
    fn forget_records(
        &mut self,
        holder: &mut dyn LockedStore,
        ids: &[String],
        phase: u32,
        mutation: Mutation,
    ) -> Result<Vec<(String, Action)>, EngineError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let started = std::time::Instant::now();
        for id in ids {
            self.sink.event(Event::Started {
                phase,
                id: id.clone(),
                action: Action::Forget,
                changes: Vec::new(),
            });
        }
        let changes: Vec<Change> = ids.iter().map(|id| Change::Remove(id.clone())).collect();
        holder.commit(&changes, mutation)?;
        for id in ids {
            self.sink.event(Event::Finished {
                phase,
                id: id.clone(),
                action: Action::Forget,
                duration: started.elapsed(),
                deposed: None,
            });
        }
        Ok(ids.iter().map(|id| (id.clone(), Action::Forget)).collect())
    }

    /// Destroys `ids` (all in state) in reverse dependency order: the frame of [`delete_set`],
    /// which gets the running providers of the objects that are deleted.
    pub(super) fn destroy_set(
        &mut self,
        ir: &Ir,
        holder: &mut dyn LockedStore,
        ids: &[String],
        phase: u32,
        mutation: Mutation,
    ) -> Result<Vec<(String, Action)>, EngineError> {
        let providers = self.deleting_providers(ir, holder.state(), ids)?;
        let input = DeleteInput {
            ids,
            providers,
            parallelism: self.opts.parallelism,
            phase,
        };
        delete_set(input, holder, &mut self.sink, mutation)
    }

    /// The running providers that delete those of `ids` whose removal is a delete, by IR
    /// provider id; a provider no longer declared is an error naming the resource.
    fn deleting_providers(
        &mut self,
        ir: &Ir,
        state: &StateFile,
        ids: &[String],
    ) -> Result<HashMap<String, Arc<dyn Provider>>, EngineError> {
        let mut providers = HashMap::new();
        for id in needing_delete(ir, state, ids) {
            let pid = state.get(&id).expect("in state").provider.clone();
            if let std::collections::hash_map::Entry::Vacant(e) = providers.entry(pid.clone()) {
                let decl = ir.providers.get(&pid).ok_or_else(|| {
                    EngineError::Diagnostics(Diagnostic::error(format!("cannot destroy {id}: its provider {pid} is not declared any more; declare it again, or forget the resource with `nivis state rm {id}`")).into())
                })?;
                e.insert(
                    self.providers
                        .get(&pid, decl)
                        .map_err(EngineError::Diagnostics)?,
                );
            }
        }
        Ok(providers)
    }

    /// `nivis destroy`: every resource in state (or the targets and what depends on them), in
    /// reverse dependency order; `confirm` sees the destroy plan.
    pub fn destroy(&mut self, confirm: Confirm<'_>) -> Result<Report, EngineError> {
        self.mutating(confirm, Self::destroy_inner)
    }

    /// `nivis plan --destroy`: what `destroy` (with the same `--target`) would remove, from an
    /// in-memory copy of the state; with `opts.save` the saved destroy plan `apply FILE` runs.
    pub(crate) fn plan_destroy(&mut self) -> Result<Report, EngineError> {
        self.reporting(Self::plan_destroy_listing)
    }

    /// `plan_destroy`'s run: the listing, and the saved destroy plan.
    fn plan_destroy_listing(&mut self) -> Result<Report, EngineError> {
        let holder = self.open_copy()?;
        if self.opts.save {
            self.providers.identify = true;
            self.sink.keep();
        }
        let (ir, _) = self.destroy_listing(holder.state())?;
        let saved = match self.opts.save {
            true => {
                let basis = self.basis(&ir, holder.state())?;
                let mut plan =
                    crate::engine::plan_file::SavedPlan::new(basis, &self.sink.take_kept());
                plan.destroy = true;
                Some(plan)
            }
            false => None,
        };
        Ok(Report {
            evaluations: 1,
            saved,
            ..Report::default()
        })
    }

    /// The destroy command top to bottom: the listing (checked against a saved destroy plan),
    /// confirmation, the deletes, the data sources.
    pub(super) fn destroy_inner(
        &mut self,
        holder: &mut dyn LockedStore,
        confirm: Confirm<'_>,
        mutation: Mutation,
    ) -> Result<Report, EngineError> {
        let (ir, ids) = self.destroy_listing(holder.state())?;
        if ids.is_empty() {
            return Ok(Report::default());
        }
        if let Some(ask) = confirm {
            if !ask() {
                return Err(EngineError::Declined);
            }
        }
        self.destroy_listed(&ir, &ids, holder, mutation)
    }

    /// `destroy`'s listing: the plan evaluated, the set chosen ([`removal_set`]), checked
    /// against a saved destroy plan when there is one, and listed ([`list_removals`]). Returns
    /// the IR and the set.
    fn destroy_listing(&mut self, state: &StateFile) -> Result<(Ir, Vec<String>), EngineError> {
        let ir = self.evaluate(state, 0)?;
        let ids = removal_set(&ir, state, &self.opts.targets)?;
        if let Some(saved) = self.opts.saved.clone() {
            self.check_basis(&saved, &ir, state, true)?;
            self.sink.keep();
        }
        list_removals(&ir, state, &ids, 1, &mut self.sink);
        if let Some(saved) = self.opts.saved.clone() {
            self.check_replan(&saved)?;
        }
        Ok((ir, ids))
    }

    /// The rest of `destroy` once the listing was shown (and confirmed).
    fn destroy_listed(
        &mut self,
        ir: &Ir,
        ids: &[String],
        holder: &mut dyn LockedStore,
        mutation: Mutation,
    ) -> Result<Report, EngineError> {
        let deleting = needing_delete(ir, holder.state(), ids);
        self.prepare_providers(ir, holder.state(), &deleting, true)?;
        let destroyed = self.destroy_set(ir, holder, ids, 1, mutation)?;
        // Data sources go with the rest when everything is destroyed.
        if self.opts.targets.is_empty() {
            let data: Vec<Change> = holder
                .state()
                .iter()
                .filter(|r| !r.is_managed())
                .map(|r| Change::Remove(r.id.clone()))
                .collect();
            holder.commit(&data, mutation)?;
        }
        Ok(Report {
            evaluations: 1,
            changed: destroyed,
            ..Report::default()
        })
    }
}

/// `destroy`'s set: every managed resource in `state`, or (with `targets`) the targets and
/// what depends on them, in the state's order. Refused, naming them, when
/// `lifecycle.preventDestroy` guards any; an unknown target is an error.
pub(super) fn removal_set(
    ir: &Ir,
    state: &StateFile,
    targets: &[String],
) -> Result<Vec<String>, EngineError> {
    let mut ids: Vec<String> = state
        .iter()
        .filter(|r| r.is_managed())
        .map(|r| r.id.clone())
        .collect();
    if !targets.is_empty() {
        let mut graph = Graph::new();
        for r in state.iter() {
            graph.add_node(&r.id);
            for d in &r.dependencies {
                graph.add_dependency(&r.id, d);
            }
        }
        let mut roots = Vec::new();
        for t in targets {
            roots.push(
                graph
                    .index_of(t)
                    .ok_or_else(|| EngineError::UnknownTarget(t.clone()))?,
            );
        }
        let keep: BTreeSet<String> = graph
            .with_dependents(&roots)
            .into_iter()
            .map(|i| graph.id(i).to_string())
            .collect();
        ids.retain(|id| keep.contains(id));
    }
    let guarded: BTreeSet<&str> = ir
        .resources
        .iter()
        .filter(|n| n.lifecycle.prevent_destroy)
        .map(|n| n.id.as_str())
        .collect();
    let protected: Vec<&String> = ids
        .iter()
        .filter(|id| guarded.contains(id.as_str()))
        .collect();
    if !protected.is_empty() {
        return Err(EngineError::Refused(format!(
            "refusing to destroy: lifecycle.preventDestroy is set on {}. Nothing was destroyed. Remove preventDestroy from the plan first if you really mean it.",
            protected.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(ids)
}

/// Lists `ids` (all in state) as planned removals of `phase`: a delete, or a forget where the
/// provider cannot delete.
pub(super) fn list_removals(
    ir: &Ir,
    state: &StateFile,
    ids: &[String],
    phase: u32,
    sink: &mut dyn Sink,
) {
    for id in ids {
        let r = state.get(id).expect("in state");
        let action = removal(ir, r);
        sink.event(Event::planned_removal(
            phase,
            id,
            &r.type_name,
            action,
            None,
        ));
    }
}

/// What deleting a set of recorded objects runs with.
pub(super) struct DeleteInput<'a> {
    /// The resources to remove, all in state.
    pub(super) ids: &'a [String],
    /// The running providers that delete, by IR provider id; a resource whose provider is not
    /// here is forgotten (its record goes, its object stays).
    pub(super) providers: HashMap<String, Arc<dyn Provider>>,
    /// Worker threads for the provider calls.
    pub(super) parallelism: usize,
    /// The phase the events report.
    pub(super) phase: u32,
}

/// Removes `input.ids` in reverse dependency order (what depends on an object goes before
/// it), each removal committed to `holder` before what waited on it starts, reported to
/// `sink`. Returns what was done, in listing order; a failed removal keeps what it depends on
/// (skipped) and fails the whole with [`EngineError::OperationsFailed`].
pub(super) fn delete_set(
    input: DeleteInput<'_>,
    holder: &mut dyn LockedStore,
    sink: &mut dyn Sink,
    mutation: Mutation,
) -> Result<Vec<(String, Action)>, EngineError> {
    let DeleteInput {
        ids,
        providers,
        parallelism,
        phase,
    } = input;
    let index: HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    // i must wait until everything depending on it is gone.
    let mut deps: Vec<Vec<usize>> = vec![Vec::new(); ids.len()];
    for (i, id) in ids.iter().enumerate() {
        let r = holder.state().get(id).expect("destroy target in state");
        for d in &r.dependencies {
            if let Some(&j) = index.get(d.as_str()) {
                deps[j].push(i);
            }
        }
    }
    let mut owner = DestroyOwner {
        ids,
        holder,
        providers,
        sink,
        phase,
        destroyed: Vec::new(),
        failed: 0,
        recorder: Recorder::default(),
        mutation,
    };
    let worker = DestroyWorker(mutation);
    let statuses = sched::run(&mut owner, &worker, &deps, parallelism, interrupt_flag());
    let recorder = std::mem::take(&mut owner.recorder);
    recorder.settle_run(owner.holder, owner.sink, phase, &statuses)?;
    let mut destroyed = std::mem::take(&mut owner.destroyed);
    // The summary lists in one order, not the order the workers finished in.
    let rank = super::phase_owner::listing_order(ids, &deps);
    let position: HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), rank[i]))
        .collect();
    destroyed.sort_by_key(|(id, _)| position.get(id.as_str()).copied());
    let mut failed = owner.failed;
    for (i, s) in statuses.iter().enumerate() {
        if let Status::Skipped { because } = s {
            owner.sink.event(Event::Skipped {
                phase,
                id: ids[i].clone(),
                because: ids[*because].clone(),
            });
            failed += 1;
        }
    }
    if interrupt_flag().load(Ordering::SeqCst) {
        return Err(EngineError::Interrupted);
    }
    if failed > 0 {
        return Err(EngineError::OperationsFailed(failed));
    }
    Ok(destroyed)
}

pub(super) struct DestroyOwner<'a> {
    pub(super) ids: &'a [String],
    pub(super) holder: &'a mut dyn LockedStore,
    /// The providers that delete; a resource whose provider is not here is forgotten.
    pub(super) providers: HashMap<String, Arc<dyn Provider>>,
    pub(super) sink: &'a mut dyn Sink,
    pub(super) phase: u32,
    pub(super) destroyed: Vec<(String, Action)>,
    pub(super) failed: usize,
    /// Removals not yet committed; [`sched::Owner::flush`] commits them as one batch before
    /// anything that waited on them is dispatched, then announces them.
    pub(super) recorder: Recorder,
    /// The destroy's token, which the removals are recorded under.
    pub(super) mutation: Mutation,
}

/// A removal to carry out: delete with this provider, or (`None`) forget.
pub(super) type Removal = (Option<Arc<dyn Provider>>, crate::state::ResourceState);

impl sched::Owner for DestroyOwner<'_> {
    type Input = Removal;
    type Progress = node::DeposedGone;
    type Output = (String, Action, Result<Diagnostics, Diagnostics>, Duration);

    fn prepare(&mut self, i: usize) -> Result<Self::Input, Self::Output> {
        let r = self
            .holder
            .state()
            .get(&self.ids[i])
            .expect("in state")
            .clone();
        let provider = self.providers.get(&r.provider).cloned();
        self.sink.event(Event::Started {
            phase: self.phase,
            id: r.id.clone(),
            action: if provider.is_some() {
                Action::Delete
            } else {
                Action::Forget
            },
            changes: Vec::new(),
        });
        Ok((provider, r))
    }

    fn progress(&mut self, _i: usize, gone: node::DeposedGone) {
        let (event, change) = gone.into_event_and_change(self.phase);
        // A deleted object must be recorded as gone before anything else happens.
        self.recorder.record(change, self.mutation);
        self.recorder.announce(event);
        sched::Owner::flush(self);
    }

    fn finish(&mut self, _i: usize, (id, action, result, took): Self::Output) -> bool {
        match result {
            Ok(warnings) => {
                for w in warnings.warnings() {
                    self.sink.event(Event::Warning(w.clone().for_resource(&id)));
                }
                self.recorder
                    .record(Change::Remove(id.clone()), self.mutation);
                self.recorder.announce(Event::Finished {
                    phase: self.phase,
                    id: id.clone(),
                    action,
                    duration: took,
                    deposed: None,
                });
                self.destroyed.push((id, action));
                true
            }
            Err(d) => {
                self.failed += 1;
                self.sink.event(Event::Failed {
                    phase: self.phase,
                    id: id.clone(),
                    diagnostics: d.for_resource(&id).errors().cloned().collect(),
                });
                false
            }
        }
    }

    fn flush(&mut self) {
        self.recorder.flush(self.holder, self.sink);
    }

    fn halted(&self) -> bool {
        self.recorder.halted(self.holder)
    }
}

/// Deletes one object per call, with the permission the destroy was given.
pub(super) struct DestroyWorker(Mutation);

impl<'a> sched::Worker<DestroyOwner<'a>> for DestroyWorker {
    fn run(
        &self,
        _i: usize,
        (provider, state): Removal,
        reporter: &Reporter<node::DeposedGone>,
    ) -> (String, Action, Result<Diagnostics, Diagnostics>, Duration) {
        let started = std::time::Instant::now();
        let Some(provider) = provider else {
            // Forgetting needs no provider: the record goes, the object stays.
            return (
                state.id,
                Action::Forget,
                Ok(Diagnostics::new()),
                started.elapsed(),
            );
        };
        let result = node::destroy(provider.as_ref(), &state, &|g| reporter.report(g), self.0);
        (state.id, Action::Delete, result, started.elapsed())
    }
}
