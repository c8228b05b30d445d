//! One phase: [`run_phase`] runs the nodes of an analysis on the scheduler, from a
//! [`PhaseInput`] to a [`PhaseResult`]; its owner turns the node results into events (held in
//! one stable listing order in plan mode), state changes (through the recorder) and what the
//! next phase needs (settled, planned and drifted resources, data reads, old objects to delete).
//!
//! Not: the phase loop (`phases`), starting providers (`providers`), nor what a node does with
//! its provider (`node`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value as Json;

use super::analysis::Analysis;
use super::error::EngineError;
use super::events::{Action, Event, Sink, Wait};
use super::node::{self, Mode, NodeInput, NodeOutput, NodeProgress};
use super::record::Recorder;
use super::resolve::{resolve, Lookup, Resolved};
use super::{deposed, interrupt_flag, stale, Options};
use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::{Ir, Node, NodeKind};
use crate::provider::{Capabilities, Provider};
use crate::sched::{self, Reporter, Status};
use crate::state::{Change, LockedStore, Mutation};
use crate::value::json::from_plain_json;
use crate::value::Value;

/// What one phase runs with: the IR and its analysis (the nodes of `analysis.run` run), the
/// started providers they need, the run's options, and what the run carries into the phase.
pub(super) struct PhaseInput<'a, 'ir> {
    pub(super) ir: &'ir Ir,
    pub(super) analysis: &'a Analysis<'ir>,
    /// The running providers of the nodes, by IR provider id.
    pub(super) providers: HashMap<String, Arc<dyn Provider>>,
    pub(super) opts: &'a Options,
    pub(super) phase: u32,
    /// Plan only, or plan and apply.
    pub(super) mode: Mode,
    /// `--replace` resources not replaced yet in this run.
    pub(super) replace_now: BTreeSet<String>,
    /// Apply mode: the data sources this phase's plan read.
    pub(super) earlier_reads: HashMap<String, node::DataRead>,
}

/// Plans, or plans and applies (`input.mode`), the nodes of `input.analysis.run` on the
/// scheduler, recording each result in `holder` and reporting to `sink`: the plan listing in
/// its stable order, skipped nodes, old objects of replacements deleted at the end.
// Long because it builds the phase's owner (index, dependencies), runs the scheduler and folds
// the statuses back; split, a dozen locals would travel between the parts.
pub(super) fn run_phase(
    input: PhaseInput<'_, '_>,
    holder: &mut dyn LockedStore,
    sink: &mut dyn Sink,
) -> Result<PhaseResult, EngineError> {
    let PhaseInput {
        ir,
        analysis,
        providers,
        opts,
        phase,
        mode,
        replace_now,
        earlier_reads,
    } = input;
    let ids = &analysis.run;
    let index: HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    // Plans follow dependency order too: a reference to a resource whose plan is a no-op
    // resolves to its recorded value instead of "known after apply" (see `unchanged`), and
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
    let mut owner = PhaseOwner {
        ir,
        analysis,
        holder,
        providers,
        sink,
        phase,
        mode,
        opts,
        result: PhaseResult::default(),
        recorder: Recorder::default(),
        running: ids.iter().cloned().collect(),
        unchanged: BTreeSet::new(),
        staleness: stale::Staleness::new(ir),
        stale: HashMap::new(),
        planned: HashMap::new(),
        replace_now,
        listing: Vec::new(),
        drifted: BTreeSet::new(),
        read_by_others: deps.iter().flatten().map(|&d| ids[d].clone()).collect(),
        old_objects: Vec::new(),
        earlier_reads,
    };
    let workers = opts.parallelism;
    let statuses = sched::run(&mut owner, &NodeWorker, &deps, workers, interrupt_flag());
    let mut listing = std::mem::take(&mut owner.listing);
    let rank = listing_order(ids, &deps);
    // Stable: a node's own rows keep their order.
    listing.sort_by_key(|(i, _)| rank[*i]);
    for (_, event) in listing {
        owner.sink.event(event);
    }
    let recorder = std::mem::take(&mut owner.recorder);
    recorder.settle_run(owner.holder, owner.sink, phase, &statuses)?;
    let old_failed = deposed::delete_old_objects(&mut owner, &deps, &statuses)?;
    let mut result = std::mem::take(&mut owner.result);
    // The apply summary lists changes in the listing's order too.
    result
        .changed
        .sort_by_key(|(id, _)| index.get(id.as_str()).map(|&i| rank[i]));
    result.failed += old_failed;
    for (i, s) in statuses.iter().enumerate() {
        match s {
            Status::Skipped { because } => {
                owner.sink.event(Event::Skipped {
                    phase,
                    id: ids[i].clone(),
                    because: ids[*because].clone(),
                });
                result.failed += 1;
            }
            Status::Interrupted => result.interrupted = true,
            _ => {}
        }
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
    /// Plan mode: the data sources read, with what they returned.
    pub(super) reads: HashMap<String, node::DataRead>,
}

pub(super) struct PhaseOwner<'a, 'ir> {
    ir: &'ir Ir,
    pub(super) analysis: &'a Analysis<'ir>,
    pub(super) holder: &'a mut dyn LockedStore,
    pub(super) providers: HashMap<String, Arc<dyn Provider>>,
    pub(super) sink: &'a mut dyn Sink,
    pub(super) phase: u32,
    pub(super) mode: Mode,
    opts: &'a Options,
    result: PhaseResult,
    /// Commits results before `finished` is announced.
    recorder: Recorder,
    /// The ids of `analysis.run`, for lookups.
    running: BTreeSet<String>,
    /// Plan mode: managed resources of `running` whose plan is a no-op, so their recorded
    /// values are what dependents will see.
    unchanged: BTreeSet<String>,
    /// Outputs changed this phase by providers without a plan, and who waits on them.
    staleness: stale::Staleness<'ir>,
    /// Resources of `analysis.run` left for the next evaluation, with the resource they wait on.
    stale: HashMap<String, Wait>,
    /// Plan mode: what the resources planned so far in this phase are planned to become.
    planned: HashMap<String, node::PlannedObject>,
    /// `--replace` resources not replaced yet in this run (once is what was asked).
    replace_now: BTreeSet<String>,
    /// Plan mode: the plan's rows (planned, deferred, drift) by node, sent once the phase is
    /// planned in one stable order (see [`listing_order`]), not in the order workers finish.
    listing: Vec<(usize, Event)>,
    /// Resources whose refresh found them changed outside Nivis in this phase.
    drifted: BTreeSet<String>,
    /// Apply mode: the data sources this phase's plan read, used instead of reading again.
    earlier_reads: HashMap<String, node::DataRead>,
    /// Resources of `running` that others in it read: a create-before-destroy replacement of
    /// one keeps its old object until the end of the phase.
    read_by_others: BTreeSet<String>,
    /// Apply mode: resources whose old objects wait for that, in the order they were replaced.
    pub(super) old_objects: Vec<String>,
}

impl PhaseOwner<'_, '_> {
    /// A row of the plan listing of node `i`: kept for [`listing_order`] in plan mode, sent at
    /// once (as progress) otherwise.
    fn list(&mut self, i: usize, event: Event) {
        match self.mode {
            Mode::Plan => self.listing.push((i, event)),
            Mode::Apply(_) => self.sink.event(event),
        }
    }

    fn flush_commits(&mut self) {
        self.recorder.flush(self.holder, self.sink);
    }

    /// Queues `change`, made under `mutation`, for the next commit.
    fn record(&mut self, change: Change, mutation: Mutation) {
        let before = (self.holder.state().get(change.id())).map(|r| &r.attributes);
        let after = match &change {
            Change::Put(r) => Some(&r.attributes),
            Change::Remove(_) => None,
        };
        if before != after {
            self.result.outputs_changed = true;
            // What Nix computed from the old outputs is stale now (copies of both kept only
            // when something reads them).
            if self.staleness.watches(change.id()) {
                let plain = |v: Option<&Json>| v.map_or(Value::Null, from_plain_json);
                let (before, after) = (plain(before), plain(after));
                let how = stale::OutputChange::Between { before, after };
                self.staleness.outputs_changed(change.id(), how);
            }
        }
        // Commit at once: a completed provider operation must be durable before anything
        // that depends on it starts. The scheduler's flush batches several into one fsync.
        self.recorder.record(change, mutation);
    }
}

impl PhaseOwner<'_, '_> {
    /// `node`'s configuration with its references resolved: in plan mode, what changes in this
    /// phase is seen as planned; otherwise as recorded.
    fn resolve_config(&self, node: &Node) -> Resolved {
        let state = self.holder.state();
        let (running, unchanged, planned) = (&self.running, &self.unchanged, &self.planned);
        let mode = self.mode;
        let lookup = |rid: &str| {
            if mode == Mode::Plan && running.contains(rid) && !unchanged.contains(rid) {
                return match planned.get(rid) {
                    Some(p) => Lookup::Planned(&p.value, &p.sensitive),
                    None => Lookup::Pending,
                };
            }
            match state.get(rid) {
                Some(rs) => Lookup::Settled(&rs.attributes, &rs.sensitive_paths),
                None => Lookup::Pending,
            }
        };
        resolve(&node.config, &lookup, &self.opts.redactor)
    }
}

impl PhaseOwner<'_, '_> {
    /// The read of data source `id` made earlier for this phase: by its plan (apply mode), or
    /// by the saved plan being applied (its phase 1's plan).
    fn earlier_read(&self, id: &str) -> Option<node::EarlierRead> {
        if let Some(read) = self.earlier_reads.get(id) {
            return Some(node::EarlierRead::Here(Box::new(read.clone())));
        }
        let saved = self.opts.saved.as_ref().filter(|_| self.phase == 1)?;
        if self.mode != Mode::Plan {
            return None;
        }
        let record = saved.data_reads.iter().find(|r| r.id == id)?;
        Some(node::EarlierRead::Saved(record.clone()))
    }
}

impl sched::Owner for PhaseOwner<'_, '_> {
    type Input = NodeInput;
    type Progress = NodeProgress;
    type Output = NodeOutput;

    fn prepare(&mut self, i: usize) -> Result<NodeInput, NodeOutput> {
        let id = &self.analysis.run[i];
        let node = self.analysis.nodes[id].node;
        if let Some(source) = self.staleness.stale_source(node) {
            // `finish` reports it as deferred. In apply, the changed outputs guarantee another
            // phase; in a plan, that phase is the apply's.
            self.stale.insert(id.clone(), Wait::Recomputed(source));
            return Err(NodeOutput::failed(Diagnostics::new(), None));
        }
        if let Some(dep) = self.analysis.nodes[id]
            .deps
            .iter()
            .find(|d| self.stale.contains_key(*d))
        {
            // What it reads waits for the next evaluation, so it does too.
            self.stale.insert(id.clone(), Wait::Resource(dep.clone()));
            return Err(NodeOutput::failed(Diagnostics::new(), None));
        }
        let state = self.holder.state();
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
            return Err(NodeOutput {
                action: None,
                changes: Vec::new(),
                commit: None,
                drift: None,
                diagnostics: diags,
                ok: false,
                elapsed: Duration::ZERO,
                deposed: Vec::new(),
                planned_object: None,
            });
        }
        let decl = &self.ir.providers[&node.provider];
        Ok(NodeInput {
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
                create_before_destroy: self.analysis.create_before_destroy.contains(id),
                ..node.lifecycle.clone()
            },
            dependencies: self.analysis.nodes[id].deps.iter().cloned().collect(),
            mode,
            force_replace: self.replace_now.contains(id),
            allowed: self
                .opts
                .saved
                .as_ref()
                .filter(|_| mode.applies())
                .map(|s| s.allowed(id, self.phase)),
            refresh: self.opts.refresh,
            redactor: self.opts.redactor.clone(),
            build: self.opts.build,
            earlier_read: (node.kind == NodeKind::Data)
                .then(|| self.earlier_read(id))
                .flatten(),
            keep_old: self.read_by_others.contains(id),
        })
    }

    fn progress(&mut self, i: usize, progress: NodeProgress) {
        match progress {
            NodeProgress::Applying(action, changes) => self.sink.event(Event::Started {
                phase: self.phase,
                id: self.analysis.run[i].clone(),
                action,
                changes,
            }),
            NodeProgress::DeposedGone(gone, mutation) => {
                let (event, change) = gone.into_event_and_change(self.phase);
                self.record(change, mutation);
                self.recorder.announce(event);
                self.flush_commits();
            }
            NodeProgress::Commit(change, mutation) => {
                self.record(*change, mutation);
                self.flush_commits();
            }
        }
    }

    // Long because it has one branch per outcome of a turn (stale, failed, planned, applied), each
    // sending its events.
    fn finish(&mut self, i: usize, mut out: NodeOutput) -> bool {
        let id = self.analysis.run[i].clone();
        let type_name = self.analysis.nodes[&id].node.type_name.clone();
        if let Some(wait) = self.stale.get(&id) {
            // Not settled: the next evaluation runs it with fresh values. What depends on it
            // reads its current record meanwhile.
            let wait = wait.clone();
            self.list(
                i,
                Event::Deferred {
                    phase: self.phase,
                    id: id.clone(),
                    type_name,
                    in_state: self.holder.state().contains(&id),
                    waits: vec![wait],
                },
            );
            return true;
        }
        for w in out.diagnostics.warnings() {
            self.sink.event(Event::Warning(w.clone()));
        }
        if let Some((changes, gone)) = &out.drift {
            self.drifted.insert(id.clone());
            self.list(
                i,
                Event::Drift {
                    id: id.clone(),
                    changes: changes.clone(),
                    gone: *gone,
                },
            );
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
                    self.result.reads.insert(id.clone(), read);
                }
            }
        }
        if !out.ok {
            self.result.failed += 1;
            self.sink.event(Event::Failed {
                phase: self.phase,
                id,
                diagnostics: out.diagnostics.errors().cloned().collect(),
            });
            return false;
        }
        let action = out.action.unwrap_or(Action::NoOp);
        if self.mode == Mode::Plan {
            let provider = &self.analysis.nodes[&id].node.provider;
            let no_plan = !Capabilities::of(&self.ir.providers[provider].kind).schemas;
            let may_change = match &out.planned_object {
                Some(p) => p.changes_outputs,
                // Without a plan its outputs are unknown until applied.
                None => no_plan && action != Action::NoOp,
            };
            if may_change && self.staleness.watches(&id) {
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
                self.staleness.outputs_changed(&id, how);
            }
            if let Some(p) = out.planned_object.take() {
                self.planned.insert(id.clone(), p);
            }
            for key in &out.deposed {
                let deposed = Some(key.clone());
                let event =
                    Event::planned_removal(self.phase, &id, &type_name, Action::Delete, deposed);
                self.list(i, event);
            }
        }
        match self.mode {
            Mode::Plan => {
                // A no-op that drifted is planned from its refreshed object (in `planned`):
                // its record is not what dependents will see.
                if action == Action::NoOp
                    && self.analysis.nodes[&id].node.kind == NodeKind::Managed
                    && !self.planned.contains_key(&id)
                {
                    self.unchanged.insert(id.clone());
                }
                if action != Action::NoOp {
                    let drifted = self.analysis.nodes[&id]
                        .deps
                        .iter()
                        .filter(|d| self.drifted.contains(*d))
                        .cloned()
                        .collect();
                    self.list(
                        i,
                        Event::Planned {
                            phase: self.phase,
                            id: id.clone(),
                            type_name,
                            action,
                            changes: out.changes,
                            deposed: None,
                            drifted,
                        },
                    );
                }
            }
            Mode::Apply(_) => {
                if action != Action::NoOp
                    && !(action == Action::Read
                        && self.analysis.nodes[&id].node.kind == NodeKind::Data)
                {
                    self.result.changed.push((id.clone(), action));
                }
                // "finished" means recorded: sent once the commit of this batch returns.
                self.recorder.announce(Event::Finished {
                    phase: self.phase,
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
        self.recorder.halted(self.holder)
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
