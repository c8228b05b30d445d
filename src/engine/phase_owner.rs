//! One phase: [`run_phase`] runs the nodes of an analysis on the scheduler, from a
//! [`PhaseInput`] to a [`PhaseResult`]; its owner turns the node results into events (held in
//! one stable listing order in plan mode), state changes (through the recorder) and what the
//! next phase needs (settled, planned and drifted resources, data reads, old objects to delete).
//! In apply mode, when an output that a deferred resource waits on is recorded while other
//! nodes still run, the owner has Nix evaluate again (through its [`PhaseHost`]) and adds the
//! nodes that evaluation made ready to the running phase: an evaluation wave (DESIGN §89).
//!
//! Not: the phase loop (`phases`), starting providers (`providers`), evaluating or checking
//! policies (the host's), nor what a node does with its provider (`node`).

use std::cell::OnceCell;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value as Json;

use super::analysis::{resolved_fingerprint, Analysis};
use super::error::EngineError;
use super::events::{Action, Event, Wait};
use super::node::{self, Mode, NodeInput, NodeOutput, NodeProgress};
use super::record::Recorder;
use super::{deposed, interrupt_flag, stale};
use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::{Ir, Node, NodeKind};
use crate::provider::{Capabilities, Provider};
use crate::sched::{self, Reporter, Status};
use crate::state::{Change, LockedStore, Mutation};
use crate::value::json::from_plain_json;
use crate::value::Value;

mod host;
mod lookup;
mod order;
mod waves;
pub(super) use host::{Admitted, PhaseHost};
use order::former_readers_first;
use waves::{awaited_by_deferred, wave_slots};

/// What one phase runs with: the IR and its analysis (the nodes of `analysis.run` run), the
/// started providers they need, the run's options, and what the run carries into the phase.
pub(super) struct PhaseInput<'a, 'ir> {
    pub(super) ir: &'ir Ir,
    pub(super) analysis: &'a Analysis<'ir>,
    /// The running providers of the nodes, by IR provider id.
    pub(super) providers: HashMap<String, Arc<dyn Provider>>,
    pub(super) phase: u32,
    /// Plan only, or plan and apply.
    pub(super) mode: Mode,
    /// `--replace` resources not replaced yet in this run.
    pub(super) replace_now: BTreeSet<String>,
    /// Apply mode: what this phase's plan read and planned (DESIGN §106).
    pub(super) previewed: node::Previewed,
}

/// Plans, or plans and applies (`input.mode`), the nodes of `input.analysis.run` on the
/// scheduler, recording each result in `holder` and reporting to `sink`: the plan listing in
/// its stable order, skipped nodes, old objects of replacements deleted at the end.
// Long because it builds the phase's owner (index, dependencies), runs the scheduler and folds
// the statuses back; split, a dozen locals would travel between the parts.
pub(super) fn run_phase(
    input: PhaseInput<'_, '_>,
    holder: &mut dyn LockedStore,
    host: &mut dyn PhaseHost,
) -> Result<PhaseResult, EngineError> {
    let PhaseInput {
        ir,
        analysis,
        providers,
        phase,
        mode,
        replace_now,
        previewed,
    } = input;
    let ids = &analysis.run;
    let index: HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    // Plans follow dependency order too: a reference to a resource whose plan is a no-op
    // resolves to its recorded value instead of "known after apply" (see `SoFar::unchanged`), and
    // what a resource without a provider plan will do decides whether dependents must wait
    // (see `staleness`).
    let deps: Vec<Vec<usize>> = ids
        .iter()
        .map(|id| {
            analysis.nodes[id]
                .deps
                .iter()
                .filter_map(|d| index.get(d.as_str()).copied())
                .collect()
        })
        .collect();
    // The IRs and analyses of the waves that join this phase: kept until it ends.
    let slots = wave_slots(ir.resources.len() + ir.data.len());
    let wave_irs: Vec<OnceCell<Ir>> = (0..slots).map(|_| OnceCell::new()).collect();
    let wave_analyses: Vec<OnceCell<Analysis<'_>>> = (0..slots).map(|_| OnceCell::new()).collect();
    let streams = mode.applies() && host.streams();
    let mut owner = PhaseOwner {
        waves: vec![Wave {
            number: phase,
            ir,
            analysis,
            staleness: stale::Staleness::new(ir),
        }],
        wave_irs: &wave_irs,
        wave_analyses: &wave_analyses,
        ids: ids.clone(),
        job_wave: vec![0; ids.len()],
        job_of: index.iter().map(|(id, &i)| (id.to_string(), i)).collect(),
        done: vec![false; ids.len()],
        deps: deps.clone(),
        holder,
        providers,
        host,
        phase,
        mode,
        result: PhaseResult::default(),
        recorder: Recorder::default(),
        running: ids.iter().cloned().collect(),
        so_far: lookup::SoFar::default(),
        acted: HashMap::new(),
        fired: HashMap::new(),
        stale: HashMap::new(),
        replace_now,
        listing: Vec::new(),
        read_by_others: deps.iter().flatten().map(|&d| ids[d].clone()).collect(),
        old_objects: Vec::new(),
        previewed,
        stream: waves::Stream::new(streams),
    };
    if streams {
        owner.await_outputs(awaited_by_deferred(analysis));
        owner.stream.timing.evaluation = owner.host.evaluation_time();
    }
    let workers = owner.host.opts().parallelism;
    let order = former_readers_first(&owner.ids, &index, &deps, |id| {
        let record = owner.holder.state().get(id)?;
        Some(record.dependencies.as_slice())
    });
    let statuses = sched::run(&mut owner, &NodeWorker, &order, workers, interrupt_flag());
    let mut listing = std::mem::take(&mut owner.listing);
    let rank = listing_order(&owner.ids, &owner.deps);
    // Stable: a node's own rows keep their order.
    listing.sort_by_key(|(i, _)| rank[*i]);
    for (_, event) in listing {
        owner.host.sink().event(event);
    }
    let recorder = std::mem::take(&mut owner.recorder);
    recorder.settle_run(owner.holder, owner.host.sink(), phase, &statuses)?;
    let old_failed = match owner.mode {
        Mode::Apply(mutation) => {
            let kept = std::mem::take(&mut owner.old_objects);
            let provider_of = |at: usize| owner.providers[&owner.node(at).provider].clone();
            let kept =
                deposed::with_readers(kept, &owner.job_of, &owner.deps, &statuses, provider_of);
            let sink = owner.host.sink();
            deposed::delete_old_objects(kept, &mut *owner.holder, sink, phase, mutation)?
        }
        // Old objects are kept only while applying: a plan has none to delete.
        _ => 0,
    };
    let mut result = std::mem::take(&mut owner.result);
    // The apply summary lists changes wave by wave, each in the listing's order.
    let (job_of, job_wave) = (&owner.job_of, &owner.job_wave);
    result
        .changed
        .sort_by_key(|(id, _)| job_of.get(id.as_str()).map(|&i| (job_wave[i], rank[i])));
    result.failed += old_failed;
    for (i, s) in statuses.iter().enumerate() {
        match s {
            Status::Skipped { because } => {
                let event = Event::Skipped {
                    phase: owner.wave_number(i),
                    id: owner.ids[i].clone(),
                    because: owner.ids[*because].clone(),
                };
                owner.host.sink().event(event);
                result.failed += 1;
            }
            Status::Interrupted => result.interrupted = true,
            _ => {}
        }
    }
    result.fingerprints = owner.fingerprints(&result.settled);
    result.jobs = owner.ids.len();
    result.waves = owner.waves.len() as u32;
    result.last_wave = owner.waves.last().map_or(phase, |w| w.number);
    if let Some(e) = owner.stream.wave_error.take() {
        return Err(e);
    }
    Ok(result)
}

/// Result of running one phase's nodes.
#[derive(Default)]
pub(super) struct PhaseResult {
    pub(super) changed: Vec<(String, Action)>,
    pub(super) settled: Vec<String>,
    pub(super) failed: usize,
    pub(super) outputs_changed: bool,
    pub(super) interrupted: bool,
    /// Plan mode: the data sources read, with what they returned, and the managed resources
    /// planned, with what their providers answered.
    pub(super) previewed: node::Previewed,
    /// The evaluations the waves that joined the phase made.
    pub(super) evaluations: u32,
    /// The settled nodes' configuration fingerprints (see `analysis::resolved_fingerprint`).
    pub(super) fingerprints: Vec<(String, String)>,
    /// How many nodes ran, over all waves.
    pub(super) jobs: usize,
    /// How many evaluation waves the phase ran (1 when none joined it).
    pub(super) waves: u32,
    /// The number of the phase's last wave (the phase's own number when none joined it).
    pub(super) last_wave: u32,
}

/// One evaluation wave of a phase: the IR and analysis its nodes come from.
struct Wave<'a, 'ir> {
    /// Its number (the phase's for the first): events of its nodes carry it.
    number: u32,
    ir: &'ir Ir,
    analysis: &'a Analysis<'ir>,
    /// Outputs changed since this wave's evaluation, and who waits on them.
    staleness: stale::Staleness<'ir>,
}

pub(super) struct PhaseOwner<'a, 'ir> {
    /// The phase's waves, the first being the phase's own analysis.
    waves: Vec<Wave<'a, 'ir>>,
    /// Where the IRs and analyses of later waves are kept.
    wave_irs: &'ir [OnceCell<Ir>],
    wave_analyses: &'a [OnceCell<Analysis<'ir>>],
    /// The nodes run, by job index (the scheduler's), in the order they joined.
    pub(super) ids: Vec<String>,
    /// The wave (index into `waves`) each job comes from.
    job_wave: Vec<usize>,
    /// The latest job of each id.
    pub(super) job_of: HashMap<String, usize>,
    /// Which jobs have finished.
    done: Vec<bool>,
    /// What each job waits for (job indices).
    pub(super) deps: Vec<Vec<usize>>,
    pub(super) holder: &'a mut dyn LockedStore,
    pub(super) providers: HashMap<String, Arc<dyn Provider>>,
    pub(super) host: &'a mut dyn PhaseHost,
    /// The phase's number (its first wave's).
    pub(super) phase: u32,
    pub(super) mode: Mode,
    result: PhaseResult,
    /// Commits results before `finished` is announced.
    recorder: Recorder,
    /// The ids of `analysis.run`, for lookups.
    running: BTreeSet<String>,
    /// The action of each resource that had its turn in the phase (for whole-resource
    /// `replaceTriggeredBy` triggers).
    acted: HashMap<String, Action>,
    /// The `replaceTriggeredBy` triggers that fired, by resource (for its plan row).
    fired: HashMap<String, Vec<String>>,
    /// What the resources of the phase that had their turn are seen as by those after them.
    so_far: lookup::SoFar,
    /// Resources of `analysis.run` left for the next evaluation, with the resource they wait on.
    stale: HashMap<String, Wait>,
    /// `--replace` resources not replaced yet in this run (once is what was asked).
    replace_now: BTreeSet<String>,
    /// Plan mode: the plan's rows (planned, deferred, drift) by node, sent once the phase is
    /// planned in one stable order (see [`listing_order`]), not in the order workers finish.
    listing: Vec<(usize, Event)>,
    /// Apply mode: the data sources this phase's plan read, used instead of reading again.
    /// Apply mode: what this phase's plan (and its waves' plans) read and planned.
    previewed: node::Previewed,
    /// Resources of `running` that others in it read: a create-before-destroy replacement of
    /// one keeps its old object until the end of the phase.
    read_by_others: BTreeSet<String>,
    /// Apply mode: resources whose old objects wait for that, in the order they were replaced.
    pub(super) old_objects: Vec<String>,
    /// The evaluation waves' state: what the deferred nodes wait on, the evaluation running
    /// beside the phase, and when the next one is due.
    stream: waves::Stream,
}

impl<'ir> PhaseOwner<'_, 'ir> {
    /// Job `i`'s wave.
    fn wave_of(&self, i: usize) -> &Wave<'_, 'ir> {
        &self.waves[self.job_wave[i]]
    }

    /// The number of job `i`'s wave: its events carry it.
    fn wave_number(&self, i: usize) -> u32 {
        self.wave_of(i).number
    }

    /// Job `i`'s IR node.
    pub(super) fn node(&self, i: usize) -> &'ir Node {
        let wave = &self.waves[self.job_wave[i]];
        wave.analysis.nodes[&self.ids[i]].node
    }

    /// Job `i`'s analysed node.
    fn info(&self, i: usize) -> &super::analysis::NodeInfo<'ir> {
        &self.wave_of(i).analysis.nodes[&self.ids[i]]
    }

    /// The configuration fingerprints of the `settled` nodes, in their latest wave.
    fn fingerprints(&self, settled: &[String]) -> Vec<(String, String)> {
        let state = self.holder.state();
        let redactor = &self.host.opts().redactor;
        (settled.iter())
            .filter_map(|id| {
                let node = self.node(self.job_of[id]);
                resolved_fingerprint(node, state, redactor).map(|fp| (id.clone(), fp))
            })
            .collect()
    }
}

impl PhaseOwner<'_, '_> {
    /// A row of the plan listing of node `i`: kept for [`listing_order`] in plan mode, sent at
    /// once (as progress) otherwise.
    fn list(&mut self, i: usize, event: Event) {
        match self.mode {
            Mode::Plan | Mode::Preview => self.listing.push((i, event)),
            Mode::Apply(_) => self.host.sink().event(event),
        }
    }

    fn flush_commits(&mut self) {
        self.recorder.flush(self.holder, self.host.sink());
    }

    /// Queues `change`, made under `mutation`, for the next commit.
    fn record(&mut self, change: Change, mutation: Mutation) {
        let before = (self.holder.state().get(change.id())).map(|r| &r.attributes);
        let after = match &change {
            Change::Put(r) => Some(&r.attributes),
            // Notes of pending operations go to the recorder directly.
            _ => None,
        };
        if before != after {
            self.result.outputs_changed = true;
            if self.stream.streams {
                self.stream
                    .changed_since_evaluation
                    .insert(change.id().to_string());
                if let Some(evaluating) = &mut self.stream.evaluating {
                    // Not in the ledger it evaluates: what Nix computes from it is stale.
                    evaluating.changed_since_ledger(change.id(), before);
                }
            }
            // What Nix computed from the old outputs is stale now (copies of both kept only
            // when something reads them), in every wave's IR.
            let plain = |v: Option<&Json>| v.map_or(Value::Null, from_plain_json);
            for wave in &mut self.waves {
                if wave.staleness.watches(change.id()) {
                    let (before, after) = (plain(before), plain(after));
                    let how = stale::OutputChange::Between { before, after };
                    wave.staleness.outputs_changed(change.id(), how);
                }
            }
        }
        // Commit at once: a completed provider operation must be durable before anything
        // that depends on it starts. The scheduler's flush batches several into one fsync.
        self.recorder.record(change, mutation);
    }
}

impl sched::Owner for PhaseOwner<'_, '_> {
    type Input = NodeInput;
    type Progress = NodeProgress;
    type Output = NodeOutput;

    // Long because it checks, in order, staleness, a stale dependency and the resolved
    // configuration, then builds the node's input field by field.
    fn prepare(&mut self, i: usize) -> Result<NodeInput, NodeOutput> {
        let id = &self.ids[i];
        let node = self.node(i);
        let w = self.job_wave[i];
        if let Some(source) = self.waves[w].staleness.stale_source(node) {
            // `finish` reports it as deferred. In apply, the changed outputs guarantee another
            // phase; in a plan, that phase is the apply's.
            if self.stream.streams {
                // Nix computes it again once its source is recorded (it is, now).
                self.stream.awaited_ids.insert(source.clone());
                self.stream.awaited.push([source.clone()].into());
            }
            self.stale.insert(id.clone(), Wait::Recomputed(source));
            return Err(NodeOutput::failed(Diagnostics::new(), None));
        }
        if let Some(dep) = self
            .info(i)
            .deps
            .iter()
            .find(|d| self.stale.contains_key(*d))
        {
            // What it reads waits for the next evaluation, so it does too.
            self.stale.insert(id.clone(), Wait::Resource(dep.clone()));
            return Err(NodeOutput::failed(Diagnostics::new(), None));
        }
        let state = self.holder.state();
        if let Some(pending) = state.pending.get(id) {
            // Its object may exist: never a plain create over it (DESIGN §97).
            return Err(NodeOutput::failed(node::pending_refusal(pending), None));
        }
        let mode = self.mode;
        let resolved = self.resolve_config(node);
        if !resolved.errors.is_empty() {
            let diags = Diagnostics(
                resolved
                    .errors
                    .iter()
                    .map(|e| Diagnostic::error(e.clone()).for_resource(id))
                    .collect(),
            );
            return Err(NodeOutput::failed(diags, None));
        }
        let create_noted = match (mode, node.kind) {
            (Mode::Apply(mutation), NodeKind::Managed) if !state.contains(id) => {
                let (ty, config) = (&node.type_name, &resolved.value);
                Some(
                    self.recorder
                        .note_create(id, ty, &node.provider, config, mutation),
                )
            }
            _ => None,
        };
        let state = self.holder.state();
        let triggers = self.replace_triggers(id, node);
        let wave = self.wave_of(i);
        let decl = &wave.ir.providers[&node.provider];
        let opts = self.host.opts();
        let input = NodeInput {
            id: id.clone(),
            kind: node.kind,
            type_name: node.type_name.clone(),
            provider_id: node.provider.clone(),
            provider_source: decl.source.clone(),
            provider: Arc::clone(&self.providers[&node.provider]),
            capabilities: Capabilities::of(&decl.kind),
            config: resolved.value,
            builds: resolved.builds,
            sensitive_inputs: resolved.sensitive,
            prior: state.get(id).cloned(),
            lifecycle: crate::ir::Lifecycle {
                create_before_destroy: wave.analysis.create_before_destroy.contains(id),
                ..node.lifecycle.clone()
            },
            dependencies: self.info(i).deps.iter().cloned().collect(),
            mode,
            force_replace: self.replace_now.contains(id),
            triggers,
            allowed: (opts.saved.as_ref())
                .filter(|_| mode.applies())
                .map(|s| s.allowed(id, wave.number)),
            refresh: opts.refresh,
            redactor: opts.redactor.clone(),
            build: opts.build,
            earlier_read: (node.kind == NodeKind::Data)
                .then(|| self.earlier_read(id))
                .flatten(),
            earlier_plan: self.previewed.plans.remove(id),
            keep_old: self.read_by_others.contains(id),
            in_doubt: Default::default(),
            create_noted,
        };
        if !input.triggers.fired.is_empty() {
            // For its plan row.
            let fired = input.triggers.fired.clone();
            self.fired.insert(input.id.clone(), fired);
        }
        Ok(input)
    }

    fn progress(&mut self, i: usize, progress: NodeProgress) {
        match progress {
            NodeProgress::Applying(action, changes) => {
                let event = Event::Started {
                    phase: self.wave_number(i),
                    id: self.ids[i].clone(),
                    action,
                    changes,
                };
                self.host.sink().event(event)
            }
            NodeProgress::DeposedGone(gone, mutation) => {
                let (event, change) = gone.into_event_and_change(self.wave_number(i));
                self.record(change, mutation);
                self.recorder.announce(event);
                self.flush_commits();
            }
            NodeProgress::Commit(change, mutation) => {
                self.record(*change, mutation);
                self.flush_commits();
            }
            // Written with whatever else the scheduler's next flush takes (DESIGN §97).
            NodeProgress::Intend(operation, mutation, ack) => {
                self.recorder.intend(*operation, mutation, ack)
            }
        }
    }

    // Long because it has one branch per outcome of a turn (stale, failed, planned, applied), each
    // sending its events.
    fn finish(&mut self, i: usize, mut out: NodeOutput) -> bool {
        self.done[i] = true;
        let id = self.ids[i].clone();
        let node = self.node(i);
        let type_name = node.type_name.clone();
        let phase = self.wave_number(i);
        if let Some(wait) = self.stale.get(&id) {
            // Not settled: the next evaluation runs it with fresh values. What depends on it
            // reads its current record meanwhile.
            let wait = wait.clone();
            self.list(
                i,
                Event::Deferred {
                    phase,
                    id: id.clone(),
                    type_name,
                    in_state: self.holder.state().contains(&id),
                    waits: vec![wait],
                },
            );
            return true;
        }
        for w in out.diagnostics.warnings() {
            self.host.sink().event(Event::Warning(w.clone()));
        }
        if let Some((changes, gone)) = &out.drift {
            self.so_far.drifted.insert(id.clone());
            self.list(
                i,
                Event::Drift {
                    id: id.clone(),
                    changes: changes.clone(),
                    gone: *gone,
                },
            );
        }
        if let Some(plan) = out.plan_made.take() {
            self.result.previewed.plans.insert(id.clone(), plan);
        }
        if let Mode::Apply(mutation) = self.mode {
            let recorded = matches!(&out.commit, Some(Change::Put(_)));
            self.recorder
                .settle_intent(&id, out.in_doubt, recorded, mutation);
        }
        if let Some(change) = out.commit {
            if let Mode::Apply(mutation) = self.mode {
                let kept_old = matches!(&change, Change::Put(r) if !r.deposed.is_empty());
                if kept_old && self.read_by_others.contains(&id) {
                    self.old_objects.push(id.clone());
                }
                self.record(change, mutation);
            } else if let (Some(p), Change::Put(r)) = (&out.planned_object, &change) {
                if let Some(config) = &p.read_with {
                    let read = node::DataRead {
                        config: config.clone(),
                        result: p.value.clone(),
                        attributes: r.attributes.clone(),
                        sensitive: !r.sensitive_paths.is_empty(),
                    };
                    self.result.previewed.reads.insert(id.clone(), read);
                }
            }
        }
        if !out.ok {
            self.result.failed += 1;
            self.host.sink().event(Event::Failed {
                phase,
                id,
                diagnostics: out.diagnostics.errors().cloned().collect(),
            });
            return false;
        }
        let action = out.action.unwrap_or(Action::NoOp);
        self.acted.insert(id.clone(), action);
        let triggered_by = match action {
            Action::Replace { .. } => self.fired.remove(&id).unwrap_or_default(),
            _ => Vec::new(),
        };
        if !self.mode.applies() {
            let wave = self.wave_of(i);
            let no_plan = !Capabilities::of(&wave.ir.providers[&node.provider].kind).schemas;
            let may_change = match &out.planned_object {
                Some(p) => p.changes_outputs,
                // Without a plan its outputs are unknown until applied.
                None => no_plan && action != Action::NoOp,
            };
            if may_change && self.waves[0].staleness.watches(&id) {
                // What Nix computed from the outputs it read may change: stale in this phase.
                let how = match &out.planned_object {
                    Some(p) => stale::OutputChange::Between {
                        before: self
                            .holder
                            .state()
                            .get(&id)
                            .map_or(Value::Null, |r| from_plain_json(&r.attributes)),
                        after: p.value.clone(),
                    },
                    None => stale::OutputChange::Any,
                };
                self.waves[0].staleness.outputs_changed(&id, how);
            }
            if let Some(p) = out.planned_object.take() {
                self.so_far.planned.insert(id.clone(), p);
            }
            for key in &out.deposed {
                let deposed = Some(key.clone());
                let event = Event::planned_removal(phase, &id, &type_name, Action::Delete, deposed);
                self.list(i, event);
            }
        }
        match self.mode {
            Mode::Plan | Mode::Preview => {
                // A no-op that drifted is planned from its refreshed object (in `planned`):
                // its record is not what dependents will see.
                if action == Action::NoOp
                    && node.kind == NodeKind::Managed
                    && !self.so_far.planned.contains_key(&id)
                {
                    self.so_far.unchanged.insert(id.clone());
                }
                if action != Action::NoOp {
                    let drifted = self
                        .info(i)
                        .deps
                        .iter()
                        .filter(|d| self.so_far.drifted.contains(*d))
                        .cloned()
                        .collect();
                    self.list(
                        i,
                        Event::Planned {
                            phase,
                            id: id.clone(),
                            type_name,
                            action,
                            changes: out.changes,
                            deposed: None,
                            drifted,
                            triggered_by,
                        },
                    );
                }
            }
            Mode::Apply(_) => {
                if action != Action::NoOp
                    && !(action == Action::Read && node.kind == NodeKind::Data)
                {
                    self.result.changed.push((id.clone(), action));
                }
                self.stream.timing.job_done(out.elapsed);
                // "finished" means recorded: sent once the commit of this batch returns.
                self.recorder.announce(Event::Finished {
                    phase,
                    id: id.clone(),
                    action,
                    duration: out.elapsed,
                    deposed: None,
                });
            }
        }
        self.result.settled.push(id);
        true
    }

    fn flush(&mut self) {
        self.flush_commits();
    }

    fn halted(&self) -> bool {
        self.recorder.halted(self.holder) || self.stream.wave_error.is_some()
    }

    fn extend(&mut self, load: sched::Load, waker: &sched::Waker) -> Vec<Vec<usize>> {
        let added = match self.stream.evaluated.take() {
            Some((evaluating, ir)) => self.join_wave(evaluating, ir),
            None => Ok(Vec::new()),
        };
        let started = added.and_then(|added| {
            let room = self.waves.len() <= self.wave_irs.len();
            if room && self.stream.evaluating.is_none() {
                self.start_wave_if_due(load, added.len(), waker)?;
            }
            Ok(added)
        });
        started.unwrap_or_else(|e| {
            self.stream.wave_error.get_or_insert(e);
            Vec::new()
        })
    }

    fn awaited(&self, i: usize) -> bool {
        self.stream.awaited_ids.contains(&self.ids[i])
    }

    fn awaiting(&self) -> bool {
        self.stream.evaluating.is_some()
    }

    fn woken(&mut self) {
        if let Err(e) = self.wave_evaluated() {
            self.stream.wave_error.get_or_insert(e);
        }
    }
}

pub(super) struct NodeWorker;

impl<'a, 'ir> sched::Worker<PhaseOwner<'a, 'ir>> for NodeWorker {
    fn run(&self, _i: usize, input: NodeInput, reporter: &Reporter<NodeProgress>) -> NodeOutput {
        node::run(input, &|p| reporter.report(p))
    }
}

/// The position of each node (`ids[i]`, depending on `deps[i]`) in a plan listing: dependency
/// order (depth: a node after everything it depends on), ties broken by address; the same on
/// every run whatever order the workers finished in.
pub(super) fn listing_order(ids: &[String], deps: &[Vec<usize>]) -> Vec<usize> {
    fn depth(i: usize, deps: &[Vec<usize>], memo: &mut [Option<usize>]) -> usize {
        if let Some(d) = memo[i] {
            return d;
        }
        memo[i] = Some(0); // a cycle (never planned) cannot recurse forever
        let d = deps[i]
            .iter()
            .map(|&j| depth(j, deps, memo) + 1)
            .max()
            .unwrap_or(0);
        memo[i] = Some(d);
        d
    }
    let mut memo = vec![None; ids.len()];
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by_cached_key(|&i| (depth(i, deps, &mut memo), ids[i].clone()));
    let mut rank = vec![0; ids.len()];
    for (position, i) in order.into_iter().enumerate() {
        rank[i] = position;
    }
    rank
}

#[cfg(test)]
mod tests {
    use super::listing_order;

    #[test]
    fn listing_order_is_depth_then_address() {
        let ids: Vec<String> = ["z", "c", "a", "b"].map(String::from).into();
        // c depends on a; b depends on c.
        let deps = vec![vec![], vec![2], vec![], vec![1]];
        let rank = listing_order(&ids, &deps);
        let mut order: Vec<&str> = ids.iter().map(String::as_str).collect();
        order.sort_by_key(|id| rank[ids.iter().position(|x| x == id).unwrap()]);
        assert_eq!(order, ["a", "z", "c", "b"]);
    }
}
