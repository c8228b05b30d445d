//! Evaluation waves (DESIGN §89, §101): when a deferred node of the latest evaluation is ripe
//! and a wave is due, the phase's owner has its host start Nix's evaluation with the committed
//! records beside the running phase. While Nix runs, the owner keeps taking results, committing
//! them and starting the ready nodes; when it ends, the nodes it made ready join the phase.
//!
//! Owns the ripeness rule, when a wave's evaluation starts, how many waves a phase has room
//! for, and the joining of a wave's nodes; not evaluating, analysing or admitting a wave (the
//! host's), nor running nodes (the owner's).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use serde_json::Value as Json;

use super::{PhaseOwner, Wave};
use crate::engine::analysis::Analysis;
use crate::engine::error::EngineError;
use crate::engine::evaluate::Beside;
use crate::engine::events::{Event, Wait};
use crate::engine::stale;
use crate::ir::Ir;
use crate::sched::{Load, Waker};
use crate::value::json::from_plain_json;
use crate::value::Value;

/// How many IR nodes (resources and data sources) the IRs of the waves that join one phase
/// may hold together: each wave's IR is kept until the phase ends (its nodes may still run),
/// so this bounds the memory waves add to a phase, about one IR of the 100k-resource benchmark
/// (DESIGN §82, §104). A phase that would need more lets the rest wait for its end, as without
/// waves.
const HELD_WAVE_NODES: usize = 100_000;

/// The most waves one phase allocates room for (an empty slot costs a few hundred bytes),
/// whatever the phase's size: more than a phase of a few hundred resources has used.
const MAX_WAVE_SLOTS: usize = 1024;

/// How many waves may join a phase whose own IR has `nodes` nodes: as many as
/// [`HELD_WAVE_NODES`] holds of IRs that size, at most [`MAX_WAVE_SLOTS`].
pub(super) fn wave_slots(nodes: usize) -> usize {
    (HELD_WAVE_NODES / nodes.max(1)).min(MAX_WAVE_SLOTS)
}

/// For each resource a deferred node of `analysis` waits on through Nix (or a value Nix must
/// compute again), the nodes waiting on it: the outputs whose recording may make a wave.
pub(super) fn awaited_by_deferred(analysis: &Analysis<'_>) -> Vec<BTreeSet<String>> {
    (analysis.deferred.values())
        .map(|waits| {
            (waits.iter())
                .filter_map(|w| match w {
                    Wait::Nix { resource, .. } | Wait::Recomputed(resource) => {
                        Some(resource.clone())
                    }
                    Wait::Resource(_) | Wait::ProviderConfig(_) => None,
                })
                .collect::<BTreeSet<String>>()
        })
        .filter(|set| !set.is_empty())
        .collect()
}

/// The evaluation waves' side of a phase (DESIGN §89, §101), changing together as outputs are
/// recorded and evaluations start and end: what the deferred nodes of the latest evaluation wait
/// on, the evaluation running beside the phase, the one waiting to join, and the timing that
/// decides when the next is due.
pub(super) struct Stream {
    /// Whether evaluation waves may join the phase.
    pub(super) streams: bool,
    /// For each deferred node of the latest evaluation, the resources it waits on through Nix.
    pub(super) awaited: Vec<BTreeSet<String>>,
    /// Every resource in `awaited`: its job goes before those nothing waits on.
    pub(super) awaited_ids: HashSet<String>,
    /// Resources whose recorded outputs changed since the latest evaluation.
    pub(super) changed_since_evaluation: BTreeSet<String>,
    /// How many of `result.settled` the host was told of (see [`super::PhaseHost::settled`]).
    told_settled: usize,
    /// Why a wave could not join (its evaluation failed, a policy refused it): nothing more
    /// starts, what runs ends and is recorded, and the phase fails with it.
    pub(super) wave_error: Option<EngineError>,
    /// The evaluation running beside the phase, if any (never more than one).
    pub(super) evaluating: Option<Evaluating>,
    /// An evaluation that ended, with its IR, waiting to join.
    pub(super) evaluated: Option<(Started, Ir)>,
    /// What decides when a wave's evaluation starts: how long jobs and evaluations take.
    pub(super) timing: Timing,
}

impl Stream {
    /// A phase's wave state; `streams`: whether waves may join it at all.
    pub(super) fn new(streams: bool) -> Self {
        Stream {
            streams,
            awaited: Vec::new(),
            awaited_ids: HashSet::new(),
            changed_since_evaluation: BTreeSet::new(),
            told_settled: 0,
            wave_error: None,
            evaluating: None,
            evaluated: None,
            timing: Timing::default(),
        }
    }
}

/// A wave's evaluation running beside the phase.
pub(super) struct Evaluating {
    beside: Beside,
    started: Started,
}

impl Evaluating {
    /// `id`'s recorded outputs changed from `before` while Nix evaluates a ledger without the
    /// change: what it computes from them is stale (the first change keeps the ledger's value).
    pub(super) fn changed_since_ledger(&mut self, id: &str, before: Option<&Json>) {
        let changed = &mut self.started.changed;
        if !changed.contains_key(id) {
            changed.insert(id.to_string(), before.cloned());
        }
    }
}

/// What the owner keeps of a wave's evaluation from its start to its join.
pub(super) struct Started {
    /// The wave's number.
    number: u32,
    /// The recorded outputs that made it.
    trigger: Vec<String>,
    /// Resources whose recorded outputs changed after its ledger was built, with their
    /// record as the ledger had it (`None`: not recorded then).
    changed: HashMap<String, Option<Json>>,
    /// How many entries `awaited` had at the start (later ones: nodes found stale since).
    awaited_then: usize,
}

/// How long things take in this phase, which decides when a wave's evaluation is due.
#[derive(Default)]
pub(super) struct Timing {
    /// The latest evaluation's.
    pub(super) evaluation: Duration,
    /// The jobs finished, and their time in all.
    jobs: u32,
    job_time: Duration,
}

impl Timing {
    /// A job took `elapsed`.
    pub(super) fn job_done(&mut self, elapsed: Duration) {
        self.jobs += 1;
        self.job_time += elapsed;
    }

    fn mean_job(&self) -> Duration {
        self.job_time.checked_div(self.jobs).unwrap_or_default()
    }

    /// About how long `parallelism` workers are busy with `jobs` queued jobs.
    fn queue(&self, jobs: usize, parallelism: usize) -> Duration {
        self.mean_job()
            .mul_f64(jobs as f64 / parallelism.max(1) as f64)
    }

    /// About how long until `jobs` more jobs have all ended (at least one job's time).
    fn until_ended(&self, jobs: usize, parallelism: usize) -> Duration {
        self.mean_job() * jobs.div_ceil(parallelism.max(1)) as u32
    }
}

impl PhaseOwner<'_, '_> {
    /// What the deferred nodes of the latest evaluation wait on: `awaited`.
    pub(super) fn await_outputs(&mut self, awaited: Vec<BTreeSet<String>>) {
        self.stream.awaited_ids = awaited.iter().flatten().cloned().collect();
        self.stream.awaited = awaited;
    }

    /// The recorded outputs that make a deferred node ready for Nix: changed since the latest
    /// evaluation, and every resource that node waits on through Nix done in this phase. Empty
    /// when no deferred node is ripe (an evaluation would find it still waiting).
    pub(super) fn ripe(&self) -> Vec<String> {
        if !self.stream.streams || self.stream.changed_since_evaluation.is_empty() {
            return Vec::new();
        }
        let settled = |r: &String| self.job_of.get(r).is_none_or(|&j| self.done[j]);
        let mut trigger: BTreeSet<&String> = BTreeSet::new();
        for awaited in &self.stream.awaited {
            let changed: Vec<&String> = (awaited.iter())
                .filter(|r| self.stream.changed_since_evaluation.contains(*r))
                .collect();
            if !changed.is_empty() && awaited.iter().all(settled) {
                trigger.extend(changed);
            }
        }
        trigger.into_iter().cloned().collect()
    }

    /// The jobs of this phase not ended yet whose outputs a deferred node waits on.
    fn awaited_unfinished(&self) -> usize {
        let jobs = (self.stream.awaited.iter().flatten())
            .filter_map(|r| self.job_of.get(r))
            .filter(|&&j| !self.done[j]);
        jobs.collect::<HashSet<_>>().len()
    }

    /// Starts a wave's evaluation when one is due (`added`: jobs a wave just added, not in
    /// `load` yet): something runs, some deferred node is ripe, and neither would a later
    /// evaluation serve as well nor cost less. Both are judged against how long the latest
    /// evaluation took. With more queued work than that, the workers stay busy until a later
    /// evaluation ends too, and it sees more outputs; when every other output deferred nodes
    /// wait on will be recorded within that time, one evaluation after them serves all. Jobs
    /// that take longer than an evaluation (providers' latency, not CPU, bounds the phase)
    /// make every ripe node worth an evaluation at once: its nodes then queue in the order
    /// they became ready, not behind everything that did later.
    pub(super) fn start_wave_if_due(
        &mut self,
        load: Load,
        added: usize,
        waker: &Waker,
    ) -> Result<(), EngineError> {
        let queued = load.queued + added;
        // Nothing runs: the phase ends and the loop evaluates (§6).
        if load.in_flight + queued == 0 {
            return Ok(());
        }
        let evaluation = self.stream.timing.evaluation;
        let slow_jobs = self.stream.timing.mean_job() >= evaluation;
        if !slow_jobs && self.stream.timing.queue(queued, load.parallelism) > evaluation {
            return Ok(());
        }
        let trigger = self.ripe();
        if trigger.is_empty() {
            return Ok(());
        }
        if !slow_jobs {
            let unfinished = self.awaited_unfinished();
            let soon = self.stream.timing.until_ended(unfinished, load.parallelism) <= evaluation;
            if unfinished > 0 && soon {
                return Ok(());
            }
        }
        let number = self.waves.last().map_or(self.phase, |w| w.number) + 1;
        let beside = (self.host).evaluate_wave(self.holder.state(), number, waker.clone())?;
        self.result.evaluations += 1;
        self.stream.changed_since_evaluation.clear();
        self.stream.evaluating = Some(Evaluating {
            beside,
            started: Started {
                number,
                trigger,
                changed: HashMap::new(),
                awaited_then: self.stream.awaited.len(),
            },
        });
        Ok(())
    }

    /// The evaluation beside the phase ended: its IR is kept for [`join_wave`](Self::join_wave)
    /// (the run's evaluator is back with the host whatever happened).
    pub(super) fn wave_evaluated(&mut self) -> Result<(), EngineError> {
        let Some(Evaluating { beside, started }) = self.stream.evaluating.take() else {
            return Ok(());
        };
        let ir = (self.host).wave_evaluated(beside, self.holder.state(), started.number)?;
        self.stream.timing.evaluation = self.host.evaluation_time();
        self.stream.evaluated = Some((started, ir));
        Ok(())
    }

    /// Adds the nodes the evaluation `started` made ready (and not already in the phase) as
    /// its wave: returns their dependencies for the scheduler. Nothing joins when it made
    /// nothing new ready.
    pub(super) fn join_wave(
        &mut self,
        started: Started,
        evaluated: Ir,
    ) -> Result<Vec<Vec<usize>>, EngineError> {
        // What settled since the last wave is fresh for the analysis (it does not run again).
        let settled = std::mem::take(&mut self.result.settled);
        for (id, fp) in self.fingerprints(&settled[self.stream.told_settled..]) {
            self.host.settled(&id, fp);
        }
        self.stream.told_settled = settled.len();
        self.result.settled = settled;
        let joining = {
            let analysis = self.host.analyse_wave(&evaluated, self.holder.state())?;
            let mut awaited = awaited_by_deferred(&analysis);
            awaited.extend(self.stream.awaited.drain(started.awaited_then..));
            self.await_outputs(awaited);
            self.joining(&analysis)
        };
        if joining.is_empty() {
            return Ok(Vec::new());
        }
        let number = started.number;
        let slot = self.waves.len() - 1;
        let (wave_irs, wave_analyses) = (self.wave_irs, self.wave_analyses);
        let ir: &Ir = wave_irs[slot].get_or_init(|| evaluated);
        let mut analysis = self.host.analyse_wave(ir, self.holder.state())?;
        analysis.run.retain(|id| joining.contains(id));
        let analysis = wave_analyses[slot].get_or_init(|| analysis);
        let admitted = self.host.admit_wave(ir, analysis, self.holder, number)?;
        self.providers.extend(admitted.0);
        self.previewed.extend(admitted.1);
        let mut staleness = stale::Staleness::new(ir);
        let plain = |v: Option<&Json>| v.map_or(Value::Null, from_plain_json);
        for (id, before) in &started.changed {
            if staleness.watches(id) {
                let now = self.holder.state().get(id).map(|r| &r.attributes);
                let (before, after) = (plain(before.as_ref()), plain(now));
                let how = stale::OutputChange::Between { before, after };
                staleness.outputs_changed(id, how);
            }
        }
        self.waves.push(Wave {
            number,
            ir,
            analysis,
            staleness,
        });
        let w = self.waves.len() - 1;
        let first = self.ids.len();
        for (k, id) in analysis.run.iter().enumerate() {
            self.stale.remove(id);
            self.job_of.insert(id.clone(), first + k);
            self.ids.push(id.clone());
            self.job_wave.push(w);
            self.done.push(false);
            self.running.insert(id.clone());
        }
        let mut added = Vec::new();
        for id in &analysis.run {
            let deps: Vec<usize> = (analysis.nodes[id].deps.iter())
                .filter_map(|d| self.job_of.get(d).copied())
                .collect();
            self.read_by_others
                .extend(deps.iter().map(|&d| self.ids[d].clone()));
            self.deps.push(deps.clone());
            added.push(deps);
        }
        self.host.sink().event(Event::Wave {
            phase: number,
            trigger: started.trigger,
            ready: analysis.run.clone(),
        });
        Ok(added)
    }

    /// Of `analysis.run`, the nodes that join the phase: those it does not run already (a
    /// node left stale for a new evaluation joins again).
    fn joining(&self, analysis: &Analysis<'_>) -> HashSet<String> {
        (analysis.run.iter())
            .filter(|id| match self.job_of.get(*id) {
                None => true,
                Some(&j) => self.done[j] && self.stale.contains_key(*id),
            })
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{wave_slots, HELD_WAVE_NODES, MAX_WAVE_SLOTS};

    #[test]
    fn waves_are_bounded_by_the_nodes_their_irs_hold() {
        // The random 200-resource DAG of the latency benchmark wants ~40-60 waves (§101).
        assert_eq!(wave_slots(200), 500);
        assert_eq!(wave_slots(10_000), 10);
        assert!(wave_slots(10_000) * 10_000 <= HELD_WAVE_NODES);
        // At 100k one wave may join; beyond, one more IR would outgrow the budget: none.
        assert_eq!(wave_slots(100_000), 1);
        assert_eq!(wave_slots(200_000), 0);
        assert_eq!(wave_slots(3), MAX_WAVE_SLOTS);
        assert_eq!(wave_slots(0), MAX_WAVE_SLOTS);
    }
}
