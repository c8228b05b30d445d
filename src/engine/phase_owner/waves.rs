//! Evaluation waves (DESIGN §89): when a deferred node of the latest evaluation is ripe, the
//! phase's owner has its host evaluate again with the committed records and adds the nodes
//! that became ready to the running phase.
//!
//! Owns the ripeness rule and the joining of a wave's nodes; not evaluating, analysing or
//! admitting a wave (the host's), nor running nodes (the owner's).

use std::collections::{BTreeSet, HashSet};

use super::{PhaseOwner, Wave};
use crate::engine::analysis::Analysis;
use crate::engine::error::EngineError;
use crate::engine::events::{Event, Wait};
use crate::engine::stale;
use crate::ir::Ir;

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

impl PhaseOwner<'_, '_> {
    /// The recorded outputs that make a deferred node ready for Nix: changed since the latest
    /// evaluation, and every resource that node waits on through Nix done in this phase. Empty
    /// when no deferred node is ripe (an evaluation would find it still waiting).
    pub(super) fn ripe(&self) -> Vec<String> {
        if !self.streams || self.changed_since_evaluation.is_empty() {
            return Vec::new();
        }
        let settled = |r: &String| self.job_of.get(r).is_none_or(|&j| self.done[j]);
        let mut trigger: BTreeSet<&String> = BTreeSet::new();
        for awaited in &self.awaited {
            let changed: Vec<&String> = (awaited.iter())
                .filter(|r| self.changed_since_evaluation.contains(*r))
                .collect();
            if !changed.is_empty() && awaited.iter().all(settled) {
                trigger.extend(changed);
            }
        }
        trigger.into_iter().cloned().collect()
    }

    /// Evaluates with the records committed so far and adds the nodes that became ready (and
    /// are not already in the phase) as wave `trigger` made: returns their dependencies for
    /// the scheduler. Nothing joins when the evaluation made nothing new ready.
    pub(super) fn next_wave(
        &mut self,
        trigger: Vec<String>,
    ) -> Result<Vec<Vec<usize>>, EngineError> {
        // What settled since the last wave is fresh for the analysis (it does not run again).
        let settled = std::mem::take(&mut self.result.settled);
        for (id, fp) in self.fingerprints(&settled[self.told_settled..]) {
            self.host.settled(&id, fp);
        }
        self.told_settled = settled.len();
        self.result.settled = settled;
        let number = self.waves.last().map_or(self.phase, |w| w.number) + 1;
        let evaluated = self.host.evaluate_wave(self.holder.state(), number)?;
        self.result.evaluations += 1;
        self.changed_since_evaluation.clear();
        let joining = {
            let analysis = self.host.analyse_wave(&evaluated, self.holder.state())?;
            self.awaited = awaited_by_deferred(&analysis);
            self.joining(&analysis)
        };
        if joining.is_empty() {
            return Ok(Vec::new());
        }
        let slot = self.waves.len() - 1;
        let (wave_irs, wave_analyses) = (self.wave_irs, self.wave_analyses);
        let ir: &Ir = wave_irs[slot].get_or_init(|| evaluated);
        let mut analysis = self.host.analyse_wave(ir, self.holder.state())?;
        analysis.run.retain(|id| joining.contains(id));
        let analysis = wave_analyses[slot].get_or_init(|| analysis);
        let admitted = self.host.admit_wave(ir, analysis, self.holder, number)?;
        self.providers.extend(admitted.0);
        self.earlier_reads.extend(admitted.1);
        self.waves.push(Wave {
            number,
            ir,
            analysis,
            staleness: stale::Staleness::new(ir),
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
            trigger,
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
