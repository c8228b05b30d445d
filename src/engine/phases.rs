//! The phase loop: `plan` (phase 1 in full, later phases as waits) and `apply` (evaluate,
//! analyse, plan and apply what is ready, record, evaluate again, to a fixpoint), and the
//! scheduler owner that turns one phase's node results into events and state changes.

use std::sync::atomic::Ordering;

use super::analysis::{
    self, collect_derived, collect_refs_as_waits, pending, tidy_waits, Analysis, Scope,
};
use super::conditions::Judging;
use super::error::EngineError;
use super::evaluate::Beside;
use super::events::{Event, Sink, Wait};
use super::node::Mode;
use super::phase_owner::{run_phase, Admitted, PhaseHost, PhaseInput, PhaseResult};
use super::record::Destination;
use super::same_ir::{LoopEvaluation, PhaseFacts, Recognised};
use super::{
    announced, describe_waits, interrupt_flag, refcheck, saved, Confirm, Engine, Mutation, Report,
};
use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::Ir;
use crate::provider::Provider;
use crate::state::{LockedStore, MemoryStore, StateFile, StateStore};
use std::sync::Arc;

impl Engine<'_> {
    /// What besides IR and state decides this run's analyses.
    fn scope(&self) -> Scope<'_> {
        Scope {
            targets: &self.opts.targets,
            replace: &self.opts.replace,
            settled: &self.settled,
            redactor: &self.opts.redactor,
        }
    }

    /// References whose targets' providers are running, checked against their schemas.
    pub(super) fn reference_problems(&self, ir: &Ir) -> Diagnostics {
        refcheck::check_references(ir, &|pid| self.providers.schema(pid))
    }

    pub(super) fn check_references(&self, ir: &Ir) -> Result<(), EngineError> {
        let diags = self.reference_problems(ir);
        if diags.has_errors() {
            return Err(EngineError::Diagnostics(diags));
        }
        Ok(())
    }

    /// Plans and (in apply mode) applies the nodes of `analysis.run`: the providers they need
    /// started, the phase run ([`run_phase`]), and what it settled remembered for later
    /// analyses (a settled resource with the same configuration does not run again).
    pub(super) fn run_nodes(
        &mut self,
        ir: &Ir,
        analysis: &Analysis<'_>,
        holder: &mut dyn LockedStore,
        phase: u32,
        mode: Mode,
    ) -> Result<PhaseResult, EngineError> {
        let pids = (analysis.run.iter()).map(|id| analysis.nodes[id].node.provider.as_str());
        let providers = self.running(ir, pids)?;
        let replace_now = (self.opts.replace.iter())
            .filter(|id| !self.settled.contains_key(*id))
            .cloned()
            .collect();
        let previewed = match mode.applies() {
            true => std::mem::take(&mut self.previewed),
            false => Default::default(),
        };
        let phase_input = PhaseInput {
            ir,
            analysis,
            providers,
            phase,
            mode,
            replace_now,
            previewed,
        };
        let result = run_phase(phase_input, holder, self)?;
        let fingerprinted = result.fingerprints.len();
        self.settled.extend(result.fingerprints.iter().cloned());
        // Each node of the run settles at most once.
        self.fingerprinted_all = fingerprinted == result.jobs;
        Ok(result)
    }

    pub(super) fn emit_deferred(&mut self, analysis: &Analysis<'_>, state: &StateFile, phase: u32) {
        for (id, waits) in analysis
            .order
            .iter()
            .filter_map(|id| analysis.deferred.get(id).map(|w| (id, w)))
        {
            let node = analysis.nodes[id].node;
            self.sink.event(Event::Deferred {
                phase,
                id: id.clone(),
                type_name: node.type_name.clone(),
                in_state: state.contains(id),
                waits: waits.clone(),
            });
        }
    }

    /// Names every operation a stopped run left pending (DESIGN §97), before anything else.
    fn announce_pending(&mut self, state: &StateFile) {
        for operation in state.pending.values() {
            let event = Event::PendingOperation(Box::new(operation.clone()));
            self.sink.event(event);
        }
    }

    /// `nivis plan`: what the next apply would do, phase 1 in full and later phases as waits.
    pub fn plan(&mut self) -> Result<Report, EngineError> {
        let report = self.reporting(Self::plan_phases)?;
        self.judge_conditions(report, Judging::Plan)
    }

    /// `plan`'s run: phase 1 planned, what waits listed, the saved plan built.
    fn plan_phases(&mut self) -> Result<Report, EngineError> {
        let mut holder = self.open_copy()?;
        self.announce_pending(holder.state());
        if self.opts.save {
            self.providers.identify = true;
            self.sink.keep();
        }
        let mut ir = self.evaluate_probing(holder.state(), 0)?;
        let basis = match self.opts.save {
            true => Some(self.basis(&ir, holder.state())?),
            false => None,
        };
        let renames = self.resolve_moves(&ir, holder.state())?;
        if !renames.is_empty() {
            // Plan against the moved records (an in-memory copy), with Nix seeing them.
            self.commit_moves(&renames, &ir, Destination::Previewed(&mut holder), 1)?;
            ir = self.evaluate_probing(holder.state(), 0)?;
        }
        let analysis = analysis::analyse(&ir, holder.state(), &self.scope())?;
        self.check_static_policies(&ir, 1)?;
        self.prepare_providers(&ir, holder.state(), &analysis.run, true)?;
        self.check_references(&ir)?;
        self.announce_open_set(&ir, holder.state());
        let imports = self.fetch_imports(&ir, &analysis, holder.state())?;
        self.commit_imports(&imports, Destination::Previewed(&mut holder), 1)?;
        self.sink.collect_planned();
        let result = self.run_nodes(&ir, &analysis, &mut holder, 1, Mode::Plan)?;
        self.emit_deferred(&analysis, holder.state(), 1);
        if self.opts.targets.is_empty() {
            self.emit_orphans(&ir, holder.state(), 1);
        }
        let planned = self.sink.take_planned();
        if result.failed == 0 {
            self.check_plan_policies(&planned, 1)?;
        }
        for c in &ir.consumers {
            let mut waits = Vec::new();
            collect_derived(&c.value, &mut waits);
            collect_refs_as_waits(&c.value, &mut waits);
            if !waits.is_empty() {
                self.sink.event(Event::ConsumerPending {
                    id: c.id.clone(),
                    waits: tidy_waits(waits),
                });
            }
        }
        if result.failed > 0 {
            return Err(EngineError::PlanFailed(result.failed));
        }
        let kept = self.sink.take_kept();
        let saved = basis.map(|b| {
            let mut plan = crate::engine::plan_file::SavedPlan::new(b, &kept);
            plan.data_reads =
                saved::data_read_records(&result.previewed.reads, &self.opts.redactor);
            plan
        });
        Ok(Report {
            evaluations: 1,
            saved,
            ..Report::default()
        })
    }

    /// `nivis apply`: phases until the fixpoint; `confirm` sees the phase-1 plan.
    pub fn apply(&mut self, confirm: Confirm<'_>) -> Result<Report, EngineError> {
        let report = self.mutating(confirm, Self::apply_phases)?;
        self.judge_conditions(report, Judging::Apply)
    }

    /// The phase loop, then its one exit: the fixpoint (orphans destroyed), values left
    /// unresolved, or the phase limit.
    pub(super) fn apply_phases(
        &mut self,
        holder: &mut dyn LockedStore,
        confirm: Confirm<'_>,
        mutation: Mutation,
    ) -> Result<Report, EngineError> {
        self.announce_pending(holder.state());
        let Ended {
            stop,
            ir,
            phase,
            mut report,
        } = self.phase_loop(holder, confirm, mutation)?;
        match stop {
            Stop::Fixpoint => self.finish_at_fixpoint(ir.as_ref(), holder, phase, mutation, report),
            Stop::Unresolved(unresolved) => self.incomplete(unresolved, report),
            Stop::PhaseLimit(pending) => {
                report.pending = pending;
                Ok(self.stop_at_phase_limit(report))
            }
        }
    }

    /// Evaluates, analyses, and runs a phase, until [`stop_after_evaluation`] or
    /// [`stop_after_phase`] says to stop.
    fn phase_loop(
        &mut self,
        holder: &mut dyn LockedStore,
        confirm: Confirm<'_>,
        mutation: Mutation,
    ) -> Result<Ended, EngineError> {
        let mut report = Report::default();
        let mut phase = 0u32;
        let mut moves_checked = false;
        let mut asking = Asking {
            confirm,
            announced: None,
        };
        // What is kept of the IR the last phase ran, when it settled everything (`same_ir`).
        let mut last = None;
        loop {
            report.evaluations += 1;
            // The evaluation whose plan is confirmed also says whether more may come.
            let probe = asking.confirm.is_some();
            let evaluated = self.evaluate_in_loop(holder.state(), phase, probe, last.take())?;
            let (ir, digest) = match evaluated {
                LoopEvaluation::Parsed(ir, digest) => (*ir, digest),
                // No phase ran after this evaluation: orphans (none) in a phase of their own.
                LoopEvaluation::Same(stop) => return Ok(Ended::at(stop, None, phase + 1, report)),
            };
            if let Some(shown) = &asking.announced {
                shown.check(&ir, holder.state())?;
            }
            if report.evaluations == 1 {
                if let Some(saved) = self.opts.saved.clone() {
                    self.check_basis(&saved, &ir, holder.state(), false)?;
                }
            }
            if !moves_checked {
                moves_checked = true;
                if self.apply_moves(&ir, holder, &mut asking.confirm, mutation)? {
                    continue; // evaluate again: Nix sees the records at their new addresses
                }
            }
            let analysis = analysis::analyse(&ir, holder.state(), &self.scope())?;
            let limit = self.phase_limit_reached(&report);
            if let Some(stop) = stop_after_evaluation(&ir, &analysis, limit) {
                // No phase ran after this evaluation: orphans go in a phase of their own.
                drop(analysis);
                return Ok(Ended::at(stop, Some(ir), phase + 1, report));
            }
            phase += 1;
            // Waves join a phase unless the phases must stay whole: `--max-phases` counts
            // them, and an announced resource set is checked at each evaluation (DESIGN §89).
            self.streaming = self.opts.max_phases.is_none() && asking.announced.is_none();
            let result = self.run_apply_phase(&ir, &analysis, holder, phase, &mut asking, mutation);
            self.streaming = false;
            let result = result?;
            report.changed.extend(result.changed.iter().cloned());
            report.evaluations += result.evaluations;
            if !result.changed.is_empty() || result.outputs_changed {
                report.apply_phases += result.waves;
            }
            let joined = result.waves > 1;
            phase = result.last_wave;
            let limit = self.phase_limit_reached(&report);
            if let Some(stop) = stop_after_phase(&ir, &analysis, result.outputs_changed, limit) {
                drop(analysis);
                return Ok(Ended::at(stop, Some(ir), phase, report));
            }
            let facts = PhaseFacts {
                state: holder.state(),
                fingerprinted_all: self.fingerprinted_all,
                announced_open: asking.announced.is_some(),
                limit,
            };
            // After waves the IR Nix printed last is not the one the phase began with.
            last = Recognised::after_phase(&ir, digest, &analysis, facts).filter(|_| !joined);
            // The IR goes before Nix evaluates again (only `last`, small, is kept).
            drop(analysis);
            drop(ir);
        }
    }

    /// Whether `--max-phases` phases have changed something.
    fn phase_limit_reached(&self, report: &Report) -> bool {
        (self.opts.max_phases).is_some_and(|limit| report.apply_phases >= limit)
    }

    /// One apply phase: policies, providers, references and imports checked, the plan shown
    /// (and confirmed, or compared with the saved plan) before the first, then the nodes of
    /// `analysis.run` applied. Failures and interruption end the run.
    fn run_apply_phase(
        &mut self,
        ir: &Ir,
        analysis: &Analysis<'_>,
        holder: &mut dyn LockedStore,
        phase: u32,
        asking: &mut Asking<'_>,
        mutation: Mutation,
    ) -> Result<PhaseResult, EngineError> {
        self.check_static_policies(ir, phase)?;
        self.prepare_providers(ir, holder.state(), &analysis.run, true)?;
        self.check_references(ir)?;
        let imports = self.fetch_imports(ir, analysis, holder.state())?;
        let saved = self.opts.saved.clone().filter(|_| phase == 1);
        if asking.confirm.is_some() || saved.is_some() {
            // Show the first phase's plan (compared with the saved one) and ask once.
            if saved.is_some() {
                self.sink.keep();
            }
            let listed = self.sink.listed();
            self.sink.collect_planned();
            self.preview_phase(ir, analysis, holder, phase, &imports)?;
            let planned = self.sink.take_planned();
            if let Some(saved) = &saved {
                self.check_replan(saved)?;
            }
            self.check_plan_policies(&planned, phase)?;
            if let Some(ask) = asking.confirm.take() {
                let open = self.announce_open_set(ir, holder.state());
                if open {
                    asking.announced = Some(announced::Announced::new(ir, holder.state()));
                }
                // A preview that lists (or announces) nothing has nothing to ask about.
                let anything = self.sink.listed() > listed;
                if (anything || open) && !ask() {
                    return Err(EngineError::Declined);
                }
            }
        } else if phase == 1 || self.wants_plan_policies() {
            // Phase 1 is what `plan` shows: as there, nothing changes unless every node of it
            // can be refreshed and planned (Terraform's rule; DESIGN §91), asked or not.
            self.policy_preview(ir, analysis, holder, phase, &imports)?;
        }
        if !imports.is_empty() {
            let to = Destination::Recorded(&mut *holder, mutation);
            self.commit_imports(&imports, to, phase)?;
        }
        let result = self.run_nodes(ir, analysis, holder, phase, Mode::Apply(mutation))?;
        self.sink.event(Event::PhaseDone {
            phase: result.last_wave,
            changed: result.changed.len(),
        });
        if result.interrupted || interrupt_flag().load(Ordering::SeqCst) {
            return Err(EngineError::Interrupted);
        }
        if result.failed > 0 {
            return Err(EngineError::OperationsFailed(result.failed));
        }
        Ok(result)
    }
}

/// An apply's confirmation: asked once, before the first phase changes anything (`confirm`
/// is taken then); when the plan's resource set reads the ledger, what the plan announced
/// (later evaluations may create nothing else).
struct Asking<'c> {
    confirm: Confirm<'c>,
    announced: Option<announced::Announced>,
}

/// Where the phase loop stopped (short of an error): why, the last IR and phase (the fixpoint
/// destroys orphans in that phase), and the report so far.
struct Ended {
    stop: Stop,
    /// `None` when the last evaluation printed the IR the last phase ran again, which was
    /// recognised without parsing it only because the state records nothing it does not
    /// declare (`same_ir`): there are no orphans.
    ir: Option<Ir>,
    phase: u32,
    report: Report,
}

impl Ended {
    fn at(stop: Stop, ir: Option<Ir>, phase: u32, report: Report) -> Ended {
        Ended {
            stop,
            ir,
            phase,
            report,
        }
    }
}

/// Why the phase loop stops, short of an error.
#[derive(Debug, PartialEq)]
pub(super) enum Stop {
    /// Nothing left to run and nothing waiting: the fixpoint.
    Fixpoint,
    /// Nothing new for Nix to see, but these still wait.
    Unresolved(Vec<(String, Vec<Wait>)>),
    /// `--max-phases` reached with these still to run or waiting.
    PhaseLimit(Vec<(String, Vec<Wait>)>),
}

/// After an evaluation: whether the loop stops before running a phase (`limit`: the phase
/// limit is reached), and why.
pub(super) fn stop_after_evaluation(ir: &Ir, analysis: &Analysis<'_>, limit: bool) -> Option<Stop> {
    let work_left = !analysis.run.is_empty() || !analysis.deferred.is_empty();
    if limit && work_left {
        return Some(Stop::PhaseLimit(pending(ir, analysis, true)));
    }
    if !analysis.run.is_empty() {
        return None;
    }
    let unresolved = pending(ir, analysis, true);
    Some(match unresolved.is_empty() {
        true => Stop::Fixpoint,
        false => Stop::Unresolved(unresolved),
    })
}

/// After the phase run from `analysis`: whether the loop stops before evaluating again, and
/// why. `outputs_changed`: the phase changed outputs Nix can see; `limit`: the phase limit is
/// reached (then the run stops without the next evaluation, reporting what this one left).
pub(super) fn stop_after_phase(
    ir: &Ir,
    analysis: &Analysis<'_>,
    outputs_changed: bool,
    limit: bool,
) -> Option<Stop> {
    if limit {
        let waiting = pending(ir, analysis, false);
        if !waiting.is_empty() {
            return Some(Stop::PhaseLimit(waiting));
        }
    }
    if outputs_changed {
        return None;
    }
    // Nothing new for Nix to see: the next evaluation would be the same.
    Some(match analysis.deferred.is_empty() {
        true => Stop::Fixpoint,
        false => Stop::Unresolved(pending(ir, analysis, false)),
    })
}

impl Engine<'_> {
    /// The fixpoint leaves values unresolved. Without `--target` that is an error; with it,
    /// what waits on resources outside the target is expected: a warning, and the run
    /// succeeds (as Terraform's "changes may be incomplete").
    fn incomplete(
        &mut self,
        unresolved: Vec<(String, Vec<Wait>)>,
        report: Report,
    ) -> Result<Report, EngineError> {
        if self.opts.targets.is_empty() {
            return Err(EngineError::Unresolved(unresolved));
        }
        let waiting: Vec<String> = unresolved
            .iter()
            .map(|(id, waits)| format!("{id} waits on {}", describe_waits(waits)))
            .collect();
        self.sink.event(Event::Warning(Diagnostic::warning(format!(
            "--target is in effect: changes may be incomplete: {}; run `nivis apply` without \
             --target to complete them",
            waiting.join("; ")
        ))));
        Ok(report)
    }

    /// The fixpoint: reported, and then (without `--target`) the recorded resources the plan no
    /// longer declares are destroyed, in `phase`.
    fn finish_at_fixpoint(
        &mut self,
        ir: Option<&Ir>,
        holder: &mut dyn LockedStore,
        phase: u32,
        mutation: Mutation,
        mut report: Report,
    ) -> Result<Report, EngineError> {
        self.sink.event(Event::Fixpoint {
            evaluations: report.evaluations,
            apply_phases: report.apply_phases,
        });
        // Without the IR there is no orphan (see `Ended`).
        if let Some(ir) = ir.filter(|_| self.opts.targets.is_empty()) {
            let removed = self.destroy_orphans(ir, holder, phase, mutation)?;
            report.changed.extend(removed);
        }
        Ok(report)
    }

    /// `--max-phases` reached with work left: reported; `report.pending` says what waits.
    fn stop_at_phase_limit(&mut self, report: Report) -> Report {
        self.sink.event(Event::PhaseLimit {
            apply_phases: report.apply_phases,
        });
        report
    }

    /// The first phase's plan, as events, without changing anything; imports are previewed
    /// on a copy of the state.
    fn preview_phase(
        &mut self,
        ir: &Ir,
        analysis: &Analysis<'_>,
        holder: &mut dyn LockedStore,
        phase: u32,
        imports: &[(crate::state::ResourceState, String)],
    ) -> Result<(), EngineError> {
        if imports.is_empty() {
            return self.preview(ir, analysis, holder, phase);
        }
        let mut copy = MemoryStore::from_state(holder.state().clone());
        self.commit_imports(imports, Destination::Previewed(&mut copy), phase)?;
        self.preview(ir, analysis, &mut copy, phase)
    }

    /// Phase `phase`'s plan, made for the policy check and, in phase 1, so that a node that
    /// cannot be planned stops the run before anything changes (not shown: the apply shows
    /// each change as it starts), then checked. What the run settled so far stays settled.
    fn policy_preview(
        &mut self,
        ir: &Ir,
        analysis: &Analysis<'_>,
        holder: &mut dyn LockedStore,
        phase: u32,
        imports: &[(crate::state::ResourceState, String)],
    ) -> Result<(), EngineError> {
        let settled = self.settled.clone();
        self.sink.collect_planned();
        self.sink.set_quiet(true);
        let previewed = self.preview_phase(ir, analysis, holder, phase, imports);
        self.sink.set_quiet(false);
        let planned = self.sink.take_planned();
        self.settled = settled;
        previewed?;
        self.check_plan_policies(&planned, phase)
    }

    /// The first phase's plan, as events, without changing anything.
    fn preview(
        &mut self,
        ir: &Ir,
        analysis: &Analysis<'_>,
        holder: &mut dyn LockedStore,
        phase: u32,
    ) -> Result<(), EngineError> {
        let mut preview = self.run_nodes(ir, analysis, holder, phase, Mode::Preview)?;
        // The apply of this phase uses what the preview read and planned: the values just
        // shown, each resource refreshed and planned once (DESIGN §106).
        self.previewed = std::mem::take(&mut preview.previewed);
        self.emit_deferred(analysis, holder.state(), phase);
        // As `plan` shows it: with `--target`, nothing outside the targets is removed.
        if self.opts.targets.is_empty() {
            self.emit_orphans(ir, holder.state(), phase);
        }
        if preview.failed > 0 {
            return Err(EngineError::PlanFailed(preview.failed));
        }
        self.settled.clear();
        Ok(())
    }

    /// Records the IR's moves before anything else; returns whether any record moved. With a
    /// confirmation pending, the plan is previewed first on a copy with the moves made, and
    /// nothing is written unless the user agrees.
    fn apply_moves(
        &mut self,
        ir: &Ir,
        holder: &mut dyn LockedStore,
        confirm: &mut Confirm<'_>,
        mutation: Mutation,
    ) -> Result<bool, EngineError> {
        let renames = self.resolve_moves(ir, holder.state())?;
        if let Some(saved) = &self.opts.saved {
            let now = renames.iter().map(|r| (&r.from, &r.to));
            if !now.eq(saved.moved.iter().map(|m| (&m.from, &m.to))) {
                return Err(saved::refused(
                    "the moves (lib.moved) differ from the saved plan's",
                ));
            }
        }
        if renames.is_empty() {
            return Ok(false);
        }
        if let Some(ask) = confirm.take() {
            let mut copy = MemoryStore::from_state(holder.state().clone());
            self.commit_moves(&renames, ir, Destination::Previewed(&mut copy), 1)?;
            let moved_ir = self.evaluate(copy.state(), 0)?;
            let analysis = analysis::analyse(&moved_ir, copy.state(), &self.scope())?;
            if !analysis.run.is_empty() {
                self.prepare_providers(&moved_ir, copy.state(), &analysis.run, true)?;
                self.check_references(&moved_ir)?;
            }
            self.preview(&moved_ir, &analysis, &mut copy, 1)?;
            if !ask() {
                return Err(EngineError::Declined);
            }
        }
        self.commit_moves(&renames, ir, Destination::Recorded(holder, mutation), 1)?;
        Ok(true)
    }
}

/// The engine as the host of its phases: waves evaluate, analyse, and are admitted (policies,
/// providers, references) as the loop does for a phase (DESIGN §89).
impl PhaseHost for Engine<'_> {
    fn sink(&mut self) -> &mut dyn Sink {
        &mut self.sink
    }

    fn opts(&self) -> &super::Options {
        &self.opts
    }

    fn streams(&self) -> bool {
        self.streaming
    }

    fn evaluate_wave(
        &mut self,
        state: &StateFile,
        wave: u32,
        waker: crate::sched::Waker,
    ) -> Result<Beside, EngineError> {
        self.evaluate_beside(state, wave, waker)
    }

    fn wave_evaluated(
        &mut self,
        beside: Beside,
        state: &StateFile,
        wave: u32,
    ) -> Result<Ir, EngineError> {
        self.evaluated_beside(beside, state, wave)
    }

    fn evaluation_time(&self) -> std::time::Duration {
        self.last_evaluation
    }

    fn analyse_wave<'i>(&self, ir: &'i Ir, state: &StateFile) -> Result<Analysis<'i>, EngineError> {
        analysis::analyse(ir, state, &self.scope())
    }

    fn admit_wave(
        &mut self,
        ir: &Ir,
        analysis: &Analysis<'_>,
        holder: &mut dyn LockedStore,
        wave: u32,
    ) -> Result<Admitted, EngineError> {
        self.check_static_policies(ir, wave)?;
        self.prepare_providers(ir, holder.state(), &analysis.run, true)?;
        self.check_references(ir)?;
        if self.wants_plan_policies() {
            self.policy_preview(ir, analysis, holder, wave, &[])?;
        }
        let reads = std::mem::take(&mut self.previewed);
        let pids = (analysis.run.iter()).map(|id| analysis.nodes[id].node.provider.as_str());
        let providers: std::collections::HashMap<String, Arc<dyn Provider>> =
            self.running(ir, pids)?;
        Ok((providers, reads))
    }

    fn settled(&mut self, id: &str, fingerprint: String) {
        self.settled.insert(id.to_string(), fingerprint);
    }
}
