//! The scheduler's owner of one phase: turns the phase's node results into events (held in one
//! stable listing order in plan mode), state changes (through the recorder) and what the next
//! phase needs (settled, planned and drifted resources, data reads, old objects to delete).
//!
//! Not: the phase loop (`phases`), nor what a node does with its provider (`node`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value as Json;

use super::analysis::Analysis;
use super::events::{Action, Event, Sink, Wait};
use super::node::{self, Mode, NodeInput, NodeOutput, NodeProgress};
use super::record::Recorder;
use super::resolve::{resolve, Lookup, Resolved};
use super::{stale, Options};
use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::{Ir, Node, NodeKind};
use crate::provider::{Capabilities, Provider};
use crate::sched::{self, Reporter};
use crate::state::{Change, LockedStore};
use crate::value::json::from_plain_json;
use crate::value::Value;

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
    pub(super) ir: &'ir Ir,
    pub(super) analysis: &'a Analysis<'ir>,
    pub(super) holder: &'a mut dyn LockedStore,
    pub(super) providers: HashMap<String, Arc<dyn Provider>>,
    pub(super) sink: &'a mut dyn Sink,
    pub(super) phase: u32,
    pub(super) mode: Mode,
    pub(super) opts: &'a Options,
    pub(super) result: PhaseResult,
    /// Commits results before `finished` is announced.
    pub(super) recorder: Recorder,
    /// The ids of `analysis.run`, for lookups.
    pub(super) running: BTreeSet<String>,
    /// Plan mode: managed resources of `running` whose plan is a no-op, so their recorded
    /// values are what dependents will see.
    pub(super) unchanged: BTreeSet<String>,
    /// Outputs changed this phase by providers without a plan, and who waits on them.
    pub(super) staleness: stale::Staleness<'ir>,
    /// Resources of `analysis.run` left for the next evaluation, with the resource they wait on.
    pub(super) stale: HashMap<String, Wait>,
    /// Plan mode: what the resources planned so far in this phase are planned to become.
    pub(super) planned: HashMap<String, node::PlannedObject>,
    /// `--replace` resources not replaced yet in this run (once is what was asked).
    pub(super) replace_now: BTreeSet<String>,
    /// Plan mode: the plan's rows (planned, deferred, drift) by node, sent once the phase is
    /// planned in one stable order (see [`listing_order`]), not in the order workers finish.
    pub(super) listing: Vec<(usize, Event)>,
    /// Resources whose refresh found them changed outside Nivis in this phase.
    pub(super) drifted: BTreeSet<String>,
    /// Apply mode: the data sources this phase's plan read, used instead of reading again.
    pub(super) earlier_reads: HashMap<String, node::DataRead>,
    /// Resources of `running` that others in it read: a create-before-destroy replacement of
    /// one keeps its old object until the end of the phase.
    pub(super) read_by_others: BTreeSet<String>,
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

    fn record(&mut self, change: Change) {
        let before = self
            .holder
            .state()
            .get(change.id())
            .map(|r| r.attributes.clone());
        let after = match &change {
            Change::Put(r) => Some(r.attributes.clone()),
            Change::Remove(_) => None,
        };
        if before != after {
            self.result.outputs_changed = true;
            // What Nix computed from the old outputs is stale now.
            let plain = |v: Option<Json>| v.map_or(Value::Null, |j| from_plain_json(&j));
            let (before, after) = (plain(before), plain(after));
            let how = stale::OutputChange::Between { before, after };
            self.staleness.outputs_changed(change.id(), how);
        }
        // Commit at once: a completed provider operation must be durable before anything
        // that depends on it starts. The scheduler's flush batches several into one fsync.
        self.recorder.record(change);
    }
}

impl PhaseOwner<'_, '_> {
    /// `node`'s configuration with its references resolved: in plan mode, what changes in this
    /// phase is seen as planned; otherwise as recorded.
    fn resolve_config(&self, node: &Node) -> Resolved {
        let state = self.holder.state();
        let (running, unchanged, planned) = (&self.running, &self.unchanged, &self.planned);
        let mode = self.mode;
        resolve(&node.config, &|rid| {
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
        })
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
            NodeProgress::DeposedGone(gone) => {
                let (event, change) = gone.into_event_and_change(self.phase);
                self.record(change);
                self.recorder.announce(event);
                self.flush_commits();
            }
            NodeProgress::Commit(change) => {
                self.record(*change);
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
            if self.mode.applies() {
                let kept_old = matches!(&change, Change::Put(r) if !r.deposed.is_empty());
                if kept_old && self.read_by_others.contains(&id) {
                    self.old_objects.push(id.clone());
                }
                self.record(change);
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
            if may_change {
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
