//! The phase loop: `plan` (phase 1 in full, later phases as waits) and `apply` (evaluate,
//! analyse, plan and apply what is ready, record, evaluate again, to a fixpoint), and the
//! scheduler owner that turns one phase's node results into events and state changes.

#[allow(unused_imports)]
use super::*;
use crate::value::json::from_plain_json;
use crate::value::Value;

impl Engine<'_> {
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

    /// Plans and (in apply mode) applies the nodes of `analysis.run`.
    // Long because it builds the phase's owner (index, dependencies, providers), runs the scheduler
    // and folds the statuses back; split, a dozen locals would travel between the parts.
    pub(super) fn run_nodes(
        &mut self,
        ir: &Ir,
        analysis: &Analysis<'_>,
        holder: &mut dyn LockedStore,
        phase: u32,
        mode: Mode,
    ) -> Result<PhaseResult, EngineError> {
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
        let mut providers: HashMap<String, Arc<dyn Provider>> = HashMap::new();
        for id in ids {
            let node = analysis.nodes[id].node;
            if !providers.contains_key(&node.provider) {
                let decl = &ir.providers[&node.provider];
                let p = self
                    .providers
                    .get(&node.provider, decl)
                    .map_err(EngineError::Diagnostics)?;
                providers.insert(node.provider.clone(), p);
            }
        }
        let mut owner = PhaseOwner {
            ir,
            analysis,
            holder,
            providers,
            sink: &mut self.sink,
            phase,
            mode,
            opts: &self.opts,
            result: PhaseResult::default(),
            recorder: Recorder::default(),
            running: ids.iter().cloned().collect(),
            unchanged: BTreeSet::new(),
            staleness: stale::Staleness::new(ir),
            stale: HashMap::new(),
            planned: HashMap::new(),
            replace_now: self
                .opts
                .replace
                .iter()
                .filter(|id| !self.settled.contains_key(*id))
                .cloned()
                .collect(),
            listing: Vec::new(),
            drifted: BTreeSet::new(),
            read_by_others: deps.iter().flatten().map(|&d| ids[d].clone()).collect(),
            old_objects: Vec::new(),
            earlier_reads: if mode.applies() {
                std::mem::take(&mut self.data_reads)
            } else {
                HashMap::new()
            },
        };
        let workers = self.opts.parallelism;
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
                    self.sink.event(Event::Skipped {
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
        for id in &result.settled {
            if let Some(fp) = resolved_fingerprint(analysis.nodes[id].node, holder.state()) {
                self.settled.insert(id.clone(), fp);
            }
        }
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

    /// `nivis plan`: what the next apply would do, phase 1 in full and later phases as waits.
    pub fn plan(&mut self) -> Result<Report, EngineError> {
        let mut holder = self.open_state(false)?;
        if self.opts.save {
            self.providers.identify = true;
            self.sink.keep();
        }
        let mut ir = self.evaluate(holder.state(), 0)?;
        let basis = match self.opts.save {
            true => Some(self.basis(&ir, holder.state())?),
            false => None,
        };
        let renames = self.resolve_moves(&ir, holder.state())?;
        if !renames.is_empty() {
            // Plan against the moved records (an in-memory copy), with Nix seeing them.
            self.commit_moves(&renames, &mut *holder, 1, false)?;
            ir = self.evaluate(holder.state(), 0)?;
        }
        let analysis = self.analyse(&ir, holder.state())?;
        self.prepare_providers(&ir, holder.state(), &analysis.run, true)?;
        self.check_references(&ir)?;
        self.announce_open_set(&ir, holder.state());
        let imports = self.fetch_imports(&ir, &analysis, holder.state())?;
        self.commit_imports(&imports, &mut *holder, 1, false)?;
        let result = self.run_nodes(&ir, &analysis, &mut *holder, 1, Mode::Plan)?;
        self.emit_deferred(&analysis, holder.state(), 1);
        if self.opts.targets.is_empty() {
            self.emit_orphans(&ir, holder.state(), 1);
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
            let mut plan = crate::savedplan::SavedPlan::new(b, &kept);
            plan.data_reads = saved::data_read_records(&result.reads);
            plan
        });
        Ok(Report {
            evaluations: 1,
            nix_time: self.nix_time,
            saved,
            ..Report::default()
        })
    }

    /// `nivis apply`: phases until the fixpoint; `confirm` sees the phase-1 plan.
    pub fn apply(&mut self, confirm: Confirm<'_>) -> Result<Report, EngineError> {
        self.mutating(confirm, Self::apply_phases)
    }

    // Long because it is the phase loop itself: its exits (phase limit, fixpoint, unresolved waits,
    // failures, interruption) read best in one place.
    pub(super) fn apply_phases(
        &mut self,
        holder: &mut dyn LockedStore,
        mut confirm: Confirm<'_>,
        mutation: Mutation,
    ) -> Result<Report, EngineError> {
        let mut report = Report::default();
        let mut phase = 0u32;
        let mut moves_checked = false;
        // Asked for confirmation: create nothing the plan did not show.
        let mut announced: Option<announced::Announced> = None;
        loop {
            report.evaluations += 1;
            let ir = self.evaluate(holder.state(), phase)?;
            if let Some(shown) = &announced {
                shown.check(&ir, holder.state())?;
            }
            if report.evaluations == 1 {
                if let Some(saved) = self.opts.saved.clone() {
                    self.check_basis(&saved, &ir, holder.state())?;
                }
            }
            if !moves_checked {
                moves_checked = true;
                if self.apply_moves(&ir, holder, &mut confirm)? {
                    continue; // evaluate again: Nix sees the records at their new addresses
                }
            }
            let analysis = self.analyse(&ir, holder.state())?;
            if let Some(limit) = self.opts.max_phases {
                if report.apply_phases >= limit
                    && (!analysis.run.is_empty() || !analysis.deferred.is_empty())
                {
                    report.pending = pending(&ir, &analysis, true);
                    self.sink.event(Event::PhaseLimit {
                        apply_phases: report.apply_phases,
                    });
                    report.nix_time = self.nix_time;
                    return Ok(report);
                }
            }
            if analysis.run.is_empty() {
                let unresolved = pending(&ir, &analysis, true);
                if !unresolved.is_empty() {
                    return self.incomplete(unresolved, report);
                }
                self.sink.event(Event::Fixpoint {
                    evaluations: report.evaluations,
                    apply_phases: report.apply_phases,
                });
                if self.opts.targets.is_empty() {
                    let removed = self.destroy_orphans(&ir, holder, phase + 1, mutation)?;
                    report.changed.extend(removed);
                }
                report.nix_time = self.nix_time;
                return Ok(report);
            }
            phase += 1;
            self.prepare_providers(&ir, holder.state(), &analysis.run, true)?;
            self.check_references(&ir)?;
            let imports = self.fetch_imports(&ir, &analysis, holder.state())?;
            let saved = self.opts.saved.clone().filter(|_| phase == 1);
            if confirm.is_some() || saved.is_some() {
                // Show the first phase's plan (compared with the saved one) and ask once.
                if saved.is_some() {
                    self.sink.keep();
                }
                let listed = self.sink.listed();
                self.preview_phase(&ir, &analysis, holder, phase, &imports)?;
                if let Some(saved) = &saved {
                    self.check_replan(saved)?;
                }
                if let Some(ask) = confirm.take() {
                    let open = self.announce_open_set(&ir, holder.state());
                    if open {
                        announced = Some(announced::Announced::new(&ir, holder.state()));
                    }
                    // A preview that lists (or announces) nothing has nothing to ask about.
                    let anything = self.sink.listed() > listed;
                    if (anything || open) && !ask() {
                        return Err(EngineError::Declined);
                    }
                }
            }
            if !imports.is_empty() {
                self.commit_imports(&imports, holder, phase, true)?;
            }
            let result = self.run_nodes(&ir, &analysis, holder, phase, Mode::Apply(mutation))?;
            let changed_here = result.changed.len();
            report.changed.extend(result.changed.iter().cloned());
            self.sink.event(Event::PhaseDone {
                phase,
                changed: changed_here,
            });
            if result.interrupted || interrupt_flag().load(Ordering::SeqCst) {
                return Err(EngineError::Interrupted);
            }
            if result.failed > 0 {
                return Err(EngineError::OperationsFailed(result.failed));
            }
            if changed_here > 0 || result.outputs_changed {
                report.apply_phases += 1;
            }
            if let Some(limit) = self.opts.max_phases {
                let waiting = pending(&ir, &analysis, false);
                if report.apply_phases >= limit && !waiting.is_empty() {
                    // Stop without the next evaluation: report what this one left waiting.
                    report.pending = waiting;
                    self.sink.event(Event::PhaseLimit {
                        apply_phases: report.apply_phases,
                    });
                    report.nix_time = self.nix_time;
                    return Ok(report);
                }
            }
            if !result.outputs_changed && analysis.deferred.is_empty() {
                // Nothing new for Nix to see: the next evaluation would be the same.
                self.sink.event(Event::Fixpoint {
                    evaluations: report.evaluations,
                    apply_phases: report.apply_phases,
                });
                if self.opts.targets.is_empty() {
                    let removed = self.destroy_orphans(&ir, holder, phase, mutation)?;
                    report.changed.extend(removed);
                }
                report.nix_time = self.nix_time;
                return Ok(report);
            }
            if !result.outputs_changed {
                return self.incomplete(pending(&ir, &analysis, false), report);
            }
        }
    }
}

impl Engine<'_> {
    /// The fixpoint leaves values unresolved. Without `--target` that is an error; with it,
    /// what waits on resources outside the target is expected: a warning, and the run
    /// succeeds (as Terraform's "changes may be incomplete").
    fn incomplete(
        &mut self,
        unresolved: Vec<(String, Vec<Wait>)>,
        mut report: Report,
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
        report.nix_time = self.nix_time;
        Ok(report)
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
        self.commit_imports(imports, &mut copy, phase, false)?;
        self.preview(ir, analysis, &mut copy, phase)
    }

    /// The first phase's plan, as events, without changing anything.
    fn preview(
        &mut self,
        ir: &Ir,
        analysis: &Analysis<'_>,
        holder: &mut dyn LockedStore,
        phase: u32,
    ) -> Result<(), EngineError> {
        let mut preview = self.run_nodes(ir, analysis, holder, phase, Mode::Plan)?;
        // The apply of this phase uses what the preview read: the values just shown.
        self.data_reads = std::mem::take(&mut preview.reads);
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
    ) -> Result<bool, EngineError> {
        let renames = self.resolve_moves(ir, holder.state())?;
        if let Some(saved) = &self.opts.saved {
            let now: Vec<Json> = renames
                .iter()
                .map(|r| serde_json::json!({"from": r.from, "to": r.to}))
                .collect();
            if now != saved.moved {
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
            self.commit_moves(&renames, &mut copy, 1, false)?;
            let moved_ir = self.evaluate(copy.state(), 0)?;
            let analysis = self.analyse(&moved_ir, copy.state())?;
            if !analysis.run.is_empty() {
                self.prepare_providers(&moved_ir, copy.state(), &analysis.run, true)?;
                self.check_references(&moved_ir)?;
            }
            self.preview(&moved_ir, &analysis, &mut copy, 1)?;
            if !ask() {
                return Err(EngineError::Declined);
            }
        }
        self.commit_moves(&renames, holder, 1, true)?;
        Ok(true)
    }
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
    fn resolve_config(&self, node: &Node) -> resolve::Resolved {
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
