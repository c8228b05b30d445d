//! The phase loop: evaluate Nix → ingest the IR → build the graph → plan and apply what is
//! ready → record state and ledger → evaluate again, until a fixpoint.
//!
//! This is the only module that composes the others. It decides which resources are ready in a
//! phase (their configuration is known, or only waits on resources applied earlier in the same
//! phase: TF→TF), which must wait for a Nix re-evaluation (`__derived`: *→Nix), and when nothing
//! new can resolve any more. It reports through [`events::Sink`] and never formats text.
//!
//! A fixpoint is reached when an evaluation leaves nothing to run: every resource is settled
//! with the configuration it has now. Resources still waiting then are an error naming them.

pub mod events;
mod node;
mod providers;
mod record;
mod refcheck;
mod resolve;
mod stale;
mod untyped;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value as Json;

pub use self::events::{Action, AttrChange, Collect, Event, Sink, Timing, Wait};
use self::node::{Mode, NodeInput, NodeOutput, NodeProgress};
use self::providers::ProviderSet;
pub use self::providers::{locate, resolve_source};
use self::record::Recorder;
pub use self::record::{Outcome, Unrecorded, WriteFailure};
use self::resolve::{resolve, Lookup};
use crate::diag::{Diagnostic, Diagnostics};
use crate::graph::Graph;
use crate::ir::{self, Ir, Node, NodeKind, Tree};
use crate::ledger::Ledger;
use crate::nixeval::{self, PlanSource};
use crate::provider::{Capabilities, Provider};
use crate::sched::{self, Reporter, Status};
use crate::state::{Backend, Change, LockHolder, LockedStore, StateError, StateFile};

/// How a run is set up.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where the plan function lives.
    pub source: PlanSource,
    /// Where the state lives (the local file at `--state`, or a remote store), with the
    /// environment the plan sees as `ledger.env`.
    pub backend: Backend,
    /// Worker threads for provider calls.
    pub parallelism: usize,
    /// Stop after this many phases that changed something.
    pub max_phases: Option<u32>,
    /// Only these resources (and what they depend on; for destroy: what depends on them).
    pub targets: Vec<String>,
    /// Realise `__build` outputs before apply.
    pub build: bool,
    /// Refresh stored objects (ReadResource) before planning.
    pub refresh: bool,
    /// Variable values from the command line.
    pub vars: BTreeMap<String, Json>,
    /// The text of values given as text (`--var`, environment), for `lib.vars` to read by the
    /// declared type (see `ledger`).
    pub var_text: BTreeMap<String, String>,
    /// How long to wait for the state lock.
    pub lock_timeout: Option<Duration>,
    /// The command line, recorded in the lock.
    pub command: String,
    /// How providers given by registry address are installed (mirrors, cache, lock file).
    pub install: crate::registry::InstallOptions,
}

/// Why a run did not complete.
#[derive(Debug)]
pub enum EngineError {
    /// Nix evaluation failed.
    Eval(nixeval::EvalError),
    /// The IR is malformed.
    Ir(Vec<ir::IrError>),
    /// State could not be read, locked or written.
    State(StateError),
    /// A state write failed (or the state's filesystem filled up) while operations ran: nothing
    /// new was started; what ran is recorded, rescued, or listed.
    StateWrite(Box<WriteFailure>),
    /// A dependency cycle, each as the ids on it.
    Cycle(Vec<Vec<String>>),
    /// At the fixpoint some resources or consumers still wait.
    Unresolved(Vec<(String, Vec<Wait>)>),
    /// A target names no resource.
    UnknownTarget(String),
    /// Problems with providers or configurations, before anything was changed.
    Diagnostics(Diagnostics),
    /// Some resources could not be planned (reported as events); nothing was changed.
    PlanFailed(usize),
    /// Some operations failed (reported as events); the rest completed.
    OperationsFailed(usize),
    /// The user did not confirm.
    Declined,
    /// Ctrl-C: in-flight work finished and was recorded, nothing new started.
    Interrupted,
    /// Refused before changing anything (e.g. preventDestroy).
    Refused(String),
    /// The private run directory could not be written.
    Io(String),
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::Eval(e) => write!(f, "{e}"),
            EngineError::Ir(errors) => {
                writeln!(f, "the plan's IR is invalid ({} problem(s)):", errors.len())?;
                for e in errors {
                    writeln!(f, "  {e}")?;
                }
                Ok(())
            }
            EngineError::State(e) => write!(f, "{e}"),
            EngineError::StateWrite(w) => write!(f, "{w}"),
            EngineError::Cycle(cycles) => {
                writeln!(f, "dependency cycle: these resources wait on each other (directly or through Nix-derived values) and can never resolve:")?;
                for c in cycles {
                    writeln!(f, "  {}", c.join(" <-> "))?;
                }
                write!(f, "Break the cycle by removing one of the references between them.")
            }
            EngineError::Unresolved(items) => {
                writeln!(f, "fixpoint reached with unresolved values: no further phase can resolve them:")?;
                for (id, waits) in items {
                    writeln!(f, "  {id} waits on {}", describe_waits(waits))?;
                }
                Ok(())
            }
            EngineError::UnknownTarget(t) => write!(f, "--target {t}: no such resource in the plan or state"),
            EngineError::Diagnostics(d) => write!(f, "{d}"),
            EngineError::PlanFailed(n) => write!(f, "{n} resource(s) could not be planned; nothing was changed. Fix the errors above and run again."),
            EngineError::OperationsFailed(n) => write!(f, "{n} operation(s) failed; everything else completed and is recorded in state. Fix the errors above and run again."),
            EngineError::Declined => write!(f, "cancelled: nothing was changed"),
            EngineError::Interrupted => write!(f, "interrupted: in-flight operations finished and were recorded; nothing new was started"),
            EngineError::Refused(msg) => write!(f, "{msg}"),
            EngineError::Io(msg) => write!(f, "{msg}"),
        }
    }
}

impl std::error::Error for EngineError {}

impl From<StateError> for EngineError {
    fn from(e: StateError) -> Self {
        EngineError::State(e)
    }
}

/// Renders what something waits on, for errors and pending reports.
pub fn describe_waits(waits: &[Wait]) -> String {
    waits
        .iter()
        .map(|w| match w {
            Wait::Nix {
                resource,
                attribute,
            } => format!("{resource}.{attribute} (Nix re-evaluation)"),
            Wait::Resource(id) => id.clone(),
            Wait::ProviderConfig(p) => format!("the configuration of provider {p}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a completed run did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Phases that changed something.
    pub apply_phases: u32,
    /// Nix evaluations.
    pub evaluations: u32,
    /// Resources changed, in order: (id, action).
    pub changed: Vec<(String, Action)>,
    /// Still pending when `--max-phases` stopped the run.
    pub pending: Vec<(String, Vec<Wait>)>,
    /// Time spent in Nix.
    pub nix_time: Duration,
}

/// The interrupt flag set by Ctrl-C.
pub fn interrupt_flag() -> &'static AtomicBool {
    static FLAG: AtomicBool = AtomicBool::new(false);
    &FLAG
}

/// State held for a run: locked for writing, or a read-only snapshot.
enum StateHolder {
    Locked(Box<dyn LockedStore>),
    ReadOnly(StateFile),
}

impl StateHolder {
    fn state(&self) -> &StateFile {
        match self {
            StateHolder::Locked(s) => s.state(),
            StateHolder::ReadOnly(s) => s,
        }
    }

    fn commit(&mut self, changes: &[Change]) -> Result<(), StateError> {
        match self {
            StateHolder::Locked(s) => s.commit(changes),
            StateHolder::ReadOnly(s) => {
                for c in changes {
                    s.apply(c);
                }
                Ok(())
            }
        }
    }

    fn close(self) -> Result<(), StateError> {
        match self {
            StateHolder::Locked(s) => s.close(),
            StateHolder::ReadOnly(_) => Ok(()),
        }
    }

    /// Why the state's filesystem has no room to spare, if so.
    fn space_error(&self) -> Option<&StateError> {
        match self {
            StateHolder::Locked(s) => s.space_error(),
            StateHolder::ReadOnly(_) => None,
        }
    }

    fn recommit(&mut self, changes: &[Change]) -> Result<(), StateError> {
        match self {
            StateHolder::Locked(s) => s.recommit(changes),
            StateHolder::ReadOnly(_) => self.commit(changes),
        }
    }

    fn rescue(&mut self, changes: &[Change]) -> Result<PathBuf, StateError> {
        match self {
            StateHolder::Locked(s) => s.rescue(changes),
            StateHolder::ReadOnly(_) => unreachable!("in-memory commits cannot fail"),
        }
    }

    /// What the user should do after a failed write.
    fn remedy(&self) -> String {
        match self {
            StateHolder::Locked(s) => s.remedy(),
            StateHolder::ReadOnly(_) => String::new(),
        }
    }

    /// Closes the state after a run: a run that failed keeps its own error (the close error
    /// is logged); a run that succeeded fails if the close does.
    fn close_after<T>(self, result: Result<T, EngineError>) -> Result<T, EngineError> {
        match (result, self.close()) {
            (Ok(v), Ok(())) => Ok(v),
            (Ok(_), Err(e)) => Err(EngineError::State(e)),
            (Err(e), closed) => {
                match closed {
                    // The store refuses writes because of the failure the error already reports.
                    Err(StateError::Poisoned { .. }) if matches!(e, EngineError::StateWrite(_)) => {
                    }
                    Err(c) => log::warn!("closing the state: {c}"),
                    Ok(()) => {}
                }
                Err(e)
            }
        }
    }
}

/// One IR node with what the engine derived from it.
struct NodeInfo<'ir> {
    node: &'ir Node,
    /// IR nodes it depends on (references, derived inputs, dependsOn).
    deps: BTreeSet<String>,
}

/// The analysis of one evaluation.
struct Analysis<'ir> {
    nodes: BTreeMap<String, NodeInfo<'ir>>,
    /// Nodes in dependency order.
    order: Vec<String>,
    /// Nodes that must wait for a later phase, with what they wait on.
    deferred: BTreeMap<String, Vec<Wait>>,
    /// Nodes to run this phase.
    run: Vec<String>,
}

/// The engine: one per command invocation.
pub struct Engine<'s> {
    opts: Options,
    sink: &'s mut dyn Sink,
    providers: ProviderSet,
    live: Arc<Mutex<Vec<Arc<dyn Provider>>>>,
    /// id -> fingerprint of resources settled in this run.
    settled: HashMap<String, String>,
    nix_time: Duration,
    /// The run's private directory (ledger, channel of secrets), created at the first
    /// evaluation and removed with the engine.
    run_dir: Option<crate::rundir::RunDir>,
    /// Until the first IR says which variables are sensitive, all their values are masked.
    vars_settled: bool,
}

impl<'s> Engine<'s> {
    /// Prepares a run.
    pub fn new(opts: Options, sink: &'s mut dyn Sink) -> Self {
        let providers = ProviderSet::new(&opts.source.base_dir(), opts.install.clone());
        Engine {
            opts,
            sink,
            providers,
            live: Arc::new(Mutex::new(Vec::new())),
            settled: HashMap::new(),
            nix_time: Duration::ZERO,
            run_dir: None,
            vars_settled: false,
        }
    }

    fn open_state(&self, write: bool) -> Result<StateHolder, EngineError> {
        if write {
            let store = self.opts.backend.open(
                LockHolder::current(&self.opts.command),
                self.opts.lock_timeout,
            )?;
            for warning in store.warnings() {
                log::warn!("{warning}");
            }
            crate::secrets::remember_state(store.state());
            Ok(StateHolder::Locked(store))
        } else {
            let state = self.opts.backend.read_only()?;
            crate::secrets::remember_state(&state);
            Ok(StateHolder::ReadOnly(state))
        }
    }

    /// Starts a thread that calls StopProvider on every live provider when Ctrl-C is pressed.
    fn watch_interrupts(&self) -> Arc<AtomicBool> {
        let done = Arc::new(AtomicBool::new(false));
        let live = Arc::clone(&self.live);
        let done2 = Arc::clone(&done);
        std::thread::spawn(move || {
            while !done2.load(Ordering::SeqCst) {
                if interrupt_flag().load(Ordering::SeqCst) {
                    for p in live.lock().map(|l| l.clone()).unwrap_or_default() {
                        let _ = p.stop();
                    }
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        done
    }

    /// Every variable value as given: read as JSON, and as typed text (the two can differ:
    /// `--var pw=1.50` is the number 1.5 and the text "1.50"), for redaction.
    fn variable_values(&self) -> [BTreeMap<String, Json>; 2] {
        let text = self.opts.var_text.iter();
        let text = text.map(|(k, v)| (k.clone(), Json::String(v.clone())));
        [self.opts.vars.clone(), text.collect()]
    }

    /// Evaluates the plan with a ledger built from `state`.
    fn evaluate(&mut self, state: &StateFile, phase: u32) -> Result<Ir, EngineError> {
        let mut ledger = Ledger::default();
        ledger.phase = phase;
        ledger.vars = self.opts.vars.clone();
        ledger.vars_text = self.opts.var_text.clone();
        ledger.env = Some(self.opts.backend.env().to_string());
        for r in state.iter() {
            ledger.set(&r.id, &r.attributes, &r.sensitive_paths);
        }
        if !self.vars_settled {
            for values in self.variable_values() {
                crate::secrets::remember_variables_provisionally(&values);
            }
        }
        if self.run_dir.is_none() {
            self.run_dir = Some(crate::rundir::RunDir::create().map_err(EngineError::Io)?);
        }
        let dir = self.run_dir.as_ref().expect("created above");
        let path = ledger.write(dir).map_err(|e| {
            EngineError::Io(format!(
                "cannot write the ledger in {}: {e}",
                dir.path().display()
            ))
        })?;
        let evaluated = nixeval::evaluate(&self.opts.source, &path);
        // The channel of secrets lives only while Nix reads it.
        dir.remove(crate::ledger::CHANNEL_FILE);
        let (bytes, took) = evaluated.map_err(EngineError::Eval)?;
        self.nix_time += took;
        let ir = ir::parse(&bytes).map_err(EngineError::Ir)?;
        if !self.vars_settled {
            self.vars_settled = true;
            for values in self.variable_values() {
                crate::secrets::settle_variables(&values, &|name| {
                    ir.variables.get(name).is_some_and(|d| d.sensitive)
                });
            }
        }
        for name in self.opts.vars.keys() {
            if !ir.variables.is_empty() && !ir.variables.contains_key(name) {
                self.sink.event(Event::Warning(Diagnostic::warning(format!(
                    "--var {name}: the plan declares no such variable (declared: {})",
                    ir.variables.keys().cloned().collect::<Vec<_>>().join(", ")
                ))));
            }
        }
        self.sink.event(Event::Evaluated {
            phase,
            duration: took,
            resources: ir.resources.len(),
            data: ir.data.len(),
        });
        Ok(ir)
    }

    /// Works out, for one evaluation, what runs now and what waits.
    fn analyse<'ir>(&self, ir: &'ir Ir, state: &StateFile) -> Result<Analysis<'ir>, EngineError> {
        let mut nodes: BTreeMap<String, NodeInfo<'ir>> = BTreeMap::new();
        for node in ir.resources.iter().chain(ir.data.iter()) {
            let mut deps = BTreeSet::new();
            collect_deps(&node.config, &mut deps);
            deps.extend(node.depends_on.iter().cloned());
            nodes.insert(node.id.clone(), NodeInfo { node, deps });
        }
        // Nix resolves references it can into concrete values but keeps them as edges, so the
        // dependency survives for ordering and destroy order.
        for edge in &ir.edges {
            if let Some(info) = nodes.get_mut(&edge.to) {
                if edge.from != edge.to {
                    info.deps.insert(edge.from.clone());
                }
            }
        }
        let mut graph = Graph::new();
        for (id, info) in &nodes {
            graph.add_node(id);
            for d in &info.deps {
                if nodes.contains_key(d) {
                    graph.add_dependency(id, d);
                }
            }
        }
        let cycles = graph.cycles();
        if !cycles.is_empty() {
            return Err(EngineError::Cycle(cycles));
        }
        let mut selected: BTreeSet<String> = nodes.keys().cloned().collect();
        if !self.opts.targets.is_empty() {
            let mut roots = Vec::new();
            for t in &self.opts.targets {
                match graph.index_of(t) {
                    Some(i) => roots.push(i),
                    None if state.contains(t) => {}
                    None => return Err(EngineError::UnknownTarget(t.clone())),
                }
            }
            selected = graph
                .with_dependencies(&roots)
                .into_iter()
                .map(|i| graph.id(i).to_string())
                .collect();
        }
        let order: Vec<String> = graph
            .topological_order()
            .expect("acyclic")
            .into_iter()
            .map(|i| graph.id(i).to_string())
            .filter(|id| selected.contains(id))
            .collect();

        // Providers whose configuration is not known yet.
        let unconfigurable: BTreeSet<&str> = ir
            .providers
            .iter()
            .filter(|(_, decl)| {
                let r = resolve(&decl.config, &|id| match state.get(id) {
                    Some(rs) if !selected.contains(id) || !nodes.contains_key(id) => {
                        Lookup::Settled(&rs.attributes, &rs.sensitive_paths)
                    }
                    _ => Lookup::Pending,
                });
                !r.waits.is_empty()
            })
            .map(|(pid, _)| pid.as_str())
            .collect();

        let mut deferred: BTreeMap<String, Vec<Wait>> = BTreeMap::new();
        let mut run: Vec<String> = Vec::new();
        let mut running: BTreeSet<String> = BTreeSet::new();
        for id in &order {
            let info = &nodes[id];
            let mut waits = Vec::new();
            if unconfigurable.contains(info.node.provider.as_str()) {
                waits.push(Wait::ProviderConfig(info.node.provider.clone()));
            }
            collect_derived(&info.node.config, &mut waits);
            for d in &info.deps {
                if deferred.contains_key(d) {
                    waits.push(Wait::Resource(d.clone()));
                }
            }
            if !waits.is_empty() {
                deferred.insert(id.clone(), tidy_waits(waits));
                continue;
            }
            let fresh = !info.deps.iter().any(|d| running.contains(d))
                && self
                    .settled
                    .get(id)
                    .is_some_and(|fp| Some(fp) == resolved_fingerprint(info.node, state).as_ref());
            if !fresh {
                running.insert(id.clone());
                run.push(id.clone());
            }
        }
        Ok(Analysis {
            nodes,
            order,
            deferred,
            run,
        })
    }

    /// Starts and configures the providers the given nodes use.
    fn prepare_providers(
        &mut self,
        ir: &Ir,
        state: &StateFile,
        ids: &[String],
        configure: bool,
    ) -> Result<(), EngineError> {
        let wanted: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
        let needed: BTreeSet<&str> = ir
            .resources
            .iter()
            .chain(ir.data.iter())
            .filter(|n| wanted.contains(n.id.as_str()))
            .map(|n| n.provider.as_str())
            .chain(
                ids.iter()
                    .filter_map(|id| state.get(id).map(|r| r.provider.as_str())),
            )
            .collect();
        let mut diags = Diagnostics::new();
        for pid in needed {
            let Some(decl) = ir.providers.get(pid) else {
                diags.push(Diagnostic::error(format!(
                    "provider {pid} is no longer declared, but resources in state use it; declare it again or remove them with `nivis state rm`"
                )));
                continue;
            };
            match self.providers.start(pid, decl) {
                Ok((p, info)) => {
                    if info.is_some() {
                        self.live.lock().expect("live providers").push(p);
                    }
                }
                Err(d) => {
                    diags.extend(d);
                    continue;
                }
            }
            if !configure || self.providers.is_configured(pid) {
                continue;
            }
            let resolved = resolve(&decl.config, &|id| match state.get(id) {
                Some(rs) => Lookup::Settled(&rs.attributes, &rs.sensitive_paths),
                None => Lookup::Pending,
            });
            let provider = self
                .providers
                .get(pid, decl)
                .map_err(EngineError::Diagnostics)?;
            let block = provider.schema().provider.block.clone();
            match block.conform_config(&resolved.value) {
                Ok(config) => {
                    if let Err(d) = self.providers.configure(pid, &config) {
                        diags.extend(d);
                    }
                }
                Err(errors) => {
                    for e in errors {
                        diags.push(
                            Diagnostic::error(format!(
                                "provider {pid}: invalid configuration: {}",
                                e.message
                            ))
                            .at(e.path),
                        );
                    }
                }
            }
        }
        if diags.has_errors() {
            return Err(EngineError::Diagnostics(diags));
        }
        for w in diags.warnings() {
            self.sink.event(Event::Warning(w.clone()));
        }
        Ok(())
    }

    /// References whose targets' providers are running, checked against their schemas.
    fn reference_problems(&self, ir: &Ir) -> Diagnostics {
        refcheck::check_references(ir, &|pid| self.providers.schema(pid))
    }

    fn check_references(&self, ir: &Ir) -> Result<(), EngineError> {
        let diags = self.reference_problems(ir);
        if diags.has_errors() {
            return Err(EngineError::Diagnostics(diags));
        }
        Ok(())
    }

    /// Plans and (in apply mode) applies the nodes of `analysis.run`.
    fn run_nodes(
        &mut self,
        ir: &Ir,
        analysis: &Analysis<'_>,
        holder: &mut StateHolder,
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
            sink: &mut *self.sink,
            phase,
            mode,
            opts: &self.opts,
            result: PhaseResult::default(),
            recorder: Recorder::default(),
            running: ids.iter().cloned().collect(),
            unchanged: BTreeSet::new(),
            staleness: stale::Staleness::new(ir),
            stale: HashMap::new(),
        };
        let statuses = sched::run(
            &mut owner,
            &NodeWorker,
            &deps,
            self.opts.parallelism,
            interrupt_flag(),
        );
        let not_started = statuses.iter().filter(|s| **s == Status::Halted).count();
        let recorder = std::mem::take(&mut owner.recorder);
        if let Some(failure) = recorder.settle(owner.holder, owner.sink, phase, not_started) {
            return Err(EngineError::StateWrite(Box::new(failure)));
        }
        let mut result = std::mem::take(&mut owner.result);
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

    fn emit_deferred(&mut self, analysis: &Analysis<'_>, state: &StateFile, phase: u32) {
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

    /// Evaluates the plan once (phase 0, ledger from state) and returns its IR; for commands
    /// that only need the declarations (`providers lock|mirror|list`).
    pub fn declarations(&mut self) -> Result<Ir, EngineError> {
        let holder = self.open_state(false)?;
        self.evaluate(holder.state(), 0)
    }

    /// `nivis plan`: what the next apply would do, phase 1 in full and later phases as waits.
    pub fn plan(&mut self) -> Result<Report, EngineError> {
        let mut holder = self.open_state(false)?;
        let ir = self.evaluate(holder.state(), 0)?;
        let analysis = self.analyse(&ir, holder.state())?;
        self.prepare_providers(&ir, holder.state(), &analysis.run, true)?;
        self.check_references(&ir)?;
        let result = self.run_nodes(&ir, &analysis, &mut holder, 1, Mode::Plan)?;
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
        Ok(Report {
            evaluations: 1,
            nix_time: self.nix_time,
            ..Report::default()
        })
    }

    /// `nivis apply`: phases until the fixpoint. `confirm` sees the phase-1 plan (as events
    /// already sent) and returns whether to go ahead; `None` means no confirmation needed.
    pub fn apply(
        &mut self,
        confirm: Option<&mut dyn FnMut() -> bool>,
    ) -> Result<Report, EngineError> {
        let mut holder = self.open_state(true)?;
        let done = self.watch_interrupts();
        let result = self.apply_phases(&mut holder, confirm);
        done.store(true, Ordering::SeqCst);
        holder.close_after(result)
    }

    fn apply_phases(
        &mut self,
        holder: &mut StateHolder,
        mut confirm: Option<&mut dyn FnMut() -> bool>,
    ) -> Result<Report, EngineError> {
        let mut report = Report::default();
        let mut phase = 0u32;
        loop {
            report.evaluations += 1;
            let ir = self.evaluate(holder.state(), phase)?;
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
                    return Err(EngineError::Unresolved(unresolved));
                }
                self.sink.event(Event::Fixpoint {
                    evaluations: report.evaluations,
                    apply_phases: report.apply_phases,
                });
                if self.opts.targets.is_empty() {
                    let removed = self.destroy_orphans(&ir, holder, phase + 1)?;
                    report.changed.extend(removed);
                }
                report.nix_time = self.nix_time;
                return Ok(report);
            }
            phase += 1;
            self.prepare_providers(&ir, holder.state(), &analysis.run, true)?;
            self.check_references(&ir)?;
            if let Some(ask) = confirm.take() {
                // Show the first phase's plan and ask once.
                let preview = self.run_nodes(&ir, &analysis, holder, phase, Mode::Plan)?;
                self.emit_deferred(&analysis, holder.state(), phase);
                self.emit_orphans(&ir, holder.state(), phase);
                if preview.failed > 0 {
                    return Err(EngineError::PlanFailed(preview.failed));
                }
                self.settled.clear();
                if !ask() {
                    return Err(EngineError::Declined);
                }
            }
            let result = self.run_nodes(&ir, &analysis, holder, phase, Mode::Apply)?;
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
                    let removed = self.destroy_orphans(&ir, holder, phase)?;
                    report.changed.extend(removed);
                }
                report.nix_time = self.nix_time;
                return Ok(report);
            }
            if !result.outputs_changed {
                return Err(EngineError::Unresolved(pending(&ir, &analysis, false)));
            }
        }
    }

    /// The planned removal of every managed resource in state that the plan no longer declares.
    fn emit_orphans(&mut self, ir: &Ir, state: &StateFile, phase: u32) {
        for id in orphans(ir, state) {
            if let Some(r) = state.get(&id).filter(|r| r.is_managed()) {
                self.sink.event(Event::Planned {
                    phase,
                    id: id.clone(),
                    type_name: r.type_name.clone(),
                    action: removal(ir, r),
                    changes: Vec::new(),
                    deposed: None,
                });
            }
        }
    }

    /// Destroys (or forgets) resources in state that the plan no longer declares.
    fn destroy_orphans(
        &mut self,
        ir: &Ir,
        holder: &mut StateHolder,
        phase: u32,
    ) -> Result<Vec<(String, Action)>, EngineError> {
        let ids = orphans(ir, holder.state());
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let (data, managed): (Vec<String>, Vec<String>) = ids
            .into_iter()
            .partition(|id| holder.state().get(id).is_some_and(|r| !r.is_managed()));
        if !data.is_empty() {
            holder.commit(
                &data
                    .iter()
                    .map(|id| Change::Remove(id.clone()))
                    .collect::<Vec<_>>(),
            )?;
        }
        let deleting = needing_delete(ir, holder.state(), &managed);
        self.prepare_providers(ir, holder.state(), &deleting, true)?;
        self.destroy_set(ir, holder, &managed, phase)
    }

    /// Destroys `ids` (all in state) in reverse dependency order; objects whose provider cannot
    /// delete are forgotten in the same order, without a provider call. Returns what was done.
    fn destroy_set(
        &mut self,
        ir: &Ir,
        holder: &mut StateHolder,
        ids: &[String],
        phase: u32,
    ) -> Result<Vec<(String, Action)>, EngineError> {
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
        let mut providers = HashMap::new();
        for id in needing_delete(ir, holder.state(), ids) {
            let pid = holder.state().get(&id).expect("in state").provider.clone();
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
        let mut owner = DestroyOwner {
            ids,
            holder,
            providers,
            sink: &mut *self.sink,
            phase,
            destroyed: Vec::new(),
            failed: 0,
            recorder: Recorder::default(),
        };
        let statuses = sched::run(
            &mut owner,
            &DestroyWorker,
            &deps,
            self.opts.parallelism,
            interrupt_flag(),
        );
        let not_started = statuses.iter().filter(|s| **s == Status::Halted).count();
        let recorder = std::mem::take(&mut owner.recorder);
        if let Some(failure) = recorder.settle(owner.holder, owner.sink, phase, not_started) {
            return Err(EngineError::StateWrite(Box::new(failure)));
        }
        let destroyed = std::mem::take(&mut owner.destroyed);
        let mut failed = owner.failed;
        for (i, s) in statuses.iter().enumerate() {
            if let Status::Skipped { because } = s {
                self.sink.event(Event::Skipped {
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

    /// `nivis destroy`: every resource in state (or the targets and what depends on them), in
    /// reverse dependency order.
    pub fn destroy(
        &mut self,
        confirm: Option<&mut dyn FnMut() -> bool>,
    ) -> Result<Report, EngineError> {
        let mut holder = self.open_state(true)?;
        let done = self.watch_interrupts();
        let result = self.destroy_inner(&mut holder, confirm);
        done.store(true, Ordering::SeqCst);
        holder.close_after(result)
    }

    fn destroy_inner(
        &mut self,
        holder: &mut StateHolder,
        confirm: Option<&mut dyn FnMut() -> bool>,
    ) -> Result<Report, EngineError> {
        let ir = self.evaluate(holder.state(), 0)?;
        let state = holder.state();
        let mut ids: Vec<String> = state
            .iter()
            .filter(|r| r.is_managed())
            .map(|r| r.id.clone())
            .collect();
        if !self.opts.targets.is_empty() {
            let mut graph = Graph::new();
            for r in state.iter() {
                graph.add_node(&r.id);
                for d in &r.dependencies {
                    graph.add_dependency(&r.id, d);
                }
            }
            let mut roots = Vec::new();
            for t in &self.opts.targets {
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
        for id in &ids {
            let r = state.get(id).expect("in state");
            self.sink.event(Event::Planned {
                phase: 1,
                id: id.clone(),
                type_name: r.type_name.clone(),
                action: removal(&ir, r),
                changes: Vec::new(),
                deposed: None,
            });
        }
        if ids.is_empty() {
            return Ok(Report::default());
        }
        if let Some(ask) = confirm {
            if !ask() {
                return Err(EngineError::Declined);
            }
        }
        let deleting = needing_delete(&ir, holder.state(), &ids);
        self.prepare_providers(&ir, holder.state(), &deleting, true)?;
        let destroyed = self.destroy_set(&ir, holder, &ids, 1)?;
        // Data sources go with the rest when everything is destroyed.
        if self.opts.targets.is_empty() {
            let data: Vec<Change> = holder
                .state()
                .iter()
                .filter(|r| !r.is_managed())
                .map(|r| Change::Remove(r.id.clone()))
                .collect();
            holder.commit(&data)?;
        }
        Ok(Report {
            evaluations: 1,
            changed: destroyed,
            nix_time: self.nix_time,
            ..Report::default()
        })
    }

    /// `nivis refresh`: reconcile state with the real objects and report drift.
    pub fn refresh(&mut self) -> Result<Report, EngineError> {
        let mut holder = self.open_state(true)?;
        let result = self.refresh_inner(&mut holder);
        holder.close_after(result)
    }

    fn refresh_inner(&mut self, holder: &mut StateHolder) -> Result<Report, EngineError> {
        let ir = self.evaluate(holder.state(), 0)?;
        let ids: Vec<String> = holder
            .state()
            .iter()
            .filter(|r| {
                r.is_managed()
                    && (self.opts.targets.is_empty() || self.opts.targets.contains(&r.id))
                    // Without schemas there is no read either: nothing to refresh from.
                    && ir
                        .providers
                        .get(&r.provider)
                        .is_none_or(|d| Capabilities::of(&d.kind).schemas)
            })
            .map(|r| r.id.clone())
            .collect();
        self.prepare_providers(&ir, holder.state(), &ids, true)?;
        let mut failed = 0;
        let mut changes = Vec::new();
        for id in &ids {
            let r = holder.state().get(id).expect("in state").clone();
            let provider = self
                .providers
                .get(&r.provider, &ir.providers[&r.provider])
                .map_err(EngineError::Diagnostics)?;
            match node::refresh(provider.as_ref(), &r) {
                Ok((change, drift)) => {
                    if let Some((attrs, gone)) = drift {
                        self.sink.event(Event::Drift {
                            id: id.clone(),
                            changes: attrs,
                            gone,
                        });
                    }
                    changes.extend(change);
                }
                Err(d) => {
                    failed += 1;
                    self.sink.event(Event::Failed {
                        phase: 0,
                        id: id.clone(),
                        diagnostics: d.for_resource(id).0,
                    });
                }
            }
        }
        holder.commit(&changes)?;
        if failed > 0 {
            return Err(EngineError::OperationsFailed(failed));
        }
        Ok(Report {
            evaluations: 1,
            nix_time: self.nix_time,
            ..Report::default()
        })
    }

    /// `nivis validate`: the IR, then every provider's own validation of every configuration,
    /// without configuring providers or touching state.
    pub fn validate(&mut self) -> Result<Diagnostics, EngineError> {
        let holder = StateHolder::ReadOnly(StateFile::empty());
        let ir = self.evaluate(holder.state(), 0)?;
        let mut all = Diagnostics::new();
        let ids: Vec<String> = ir
            .resources
            .iter()
            .chain(ir.data.iter())
            .map(|n| n.id.clone())
            .collect();
        self.prepare_providers(&ir, holder.state(), &ids, false)?;
        all.extend(self.reference_problems(&ir));
        for (pid, decl) in &ir.providers {
            let provider = self
                .providers
                .get(pid, decl)
                .map_err(EngineError::Diagnostics)?;
            let resolved = resolve(&decl.config, &|_| Lookup::Pending);
            match provider
                .schema()
                .provider
                .block
                .conform_config(&resolved.value)
            {
                Ok(config) => match provider.validate_provider_config(&config) {
                    Ok(d) => all.extend(Diagnostics(
                        d.0.into_iter()
                            .map(|mut d| {
                                d.summary = format!("provider {pid}: {}", d.summary);
                                d
                            })
                            .collect(),
                    )),
                    Err(d) => all.extend(d),
                },
                Err(errors) => {
                    for e in errors {
                        all.push(
                            Diagnostic::error(format!(
                                "provider {pid}: invalid configuration: {}",
                                e.message
                            ))
                            .at(e.path),
                        );
                    }
                }
            }
        }
        for node in ir.resources.iter().chain(ir.data.iter()) {
            let decl = &ir.providers[&node.provider];
            if !Capabilities::of(&decl.kind).schemas {
                // No schema and no validation request: the provider checks inputs on create.
                continue;
            }
            let provider = self
                .providers
                .get(&node.provider, decl)
                .map_err(EngineError::Diagnostics)?;
            let resolved = resolve(&node.config, &|_| Lookup::Pending);
            let schema = provider.schema();
            let block = match node.kind {
                NodeKind::Managed => schema.resources.get(&node.type_name).map(|s| &s.block),
                NodeKind::Data => schema.data_sources.get(&node.type_name).map(|s| &s.block),
            };
            let Some(block) = block else {
                let kind = if node.kind == NodeKind::Data {
                    "data source"
                } else {
                    "resource type"
                };
                let known: Vec<&String> = match node.kind {
                    NodeKind::Managed => schema.resources.keys().collect(),
                    NodeKind::Data => schema.data_sources.keys().collect(),
                };
                all.push(
                    Diagnostic::error(format!(
                        "provider {} has no {kind} {:?}",
                        node.provider, node.type_name
                    ))
                    .with_detail(format!(
                        "It offers: {}",
                        known
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                    .for_resource(&node.id),
                );
                continue;
            };
            match block.conform_config(&resolved.value) {
                Ok(config) => {
                    let d = match node.kind {
                        NodeKind::Managed => {
                            provider.validate_resource_config(&node.type_name, &config)
                        }
                        NodeKind::Data => provider.validate_data_config(&node.type_name, &config),
                    };
                    match d {
                        Ok(d) | Err(d) => all.extend(d.for_resource(&node.id)),
                    }
                }
                Err(errors) => {
                    for e in errors {
                        all.push(
                            Diagnostic::error(format!("invalid configuration: {}", e.message))
                                .at(e.path)
                                .for_resource(&node.id),
                        );
                    }
                }
            }
        }
        Ok(all)
    }
}

/// Result of running one phase's nodes.
#[derive(Default)]
struct PhaseResult {
    changed: Vec<(String, Action)>,
    settled: Vec<String>,
    failed: usize,
    outputs_changed: bool,
    interrupted: bool,
}

struct PhaseOwner<'a, 'ir> {
    ir: &'ir Ir,
    analysis: &'a Analysis<'ir>,
    holder: &'a mut StateHolder,
    providers: HashMap<String, Arc<dyn Provider>>,
    sink: &'a mut dyn Sink,
    phase: u32,
    mode: Mode,
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
    stale: HashMap<String, String>,
}

impl PhaseOwner<'_, '_> {
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
            let no_plan = self
                .analysis
                .nodes
                .get(change.id())
                .and_then(|n| self.ir.providers.get(&n.node.provider))
                .is_some_and(|p| !Capabilities::of(&p.kind).schemas);
            if no_plan {
                self.staleness.outputs_changed(change.id());
            }
        }
        // Commit at once: a completed provider operation must be durable before anything
        // that depends on it starts. The scheduler's flush batches several into one fsync.
        self.recorder.record(change);
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
            self.stale.insert(id.clone(), source);
            return Err(NodeOutput::failed(Diagnostics::new(), None));
        }
        let state = self.holder.state();
        let (running, unchanged) = (&self.running, &self.unchanged);
        let mode = self.mode;
        let resolved = resolve(&node.config, &|rid| match state.get(rid) {
            // In plan mode, anything that will change this phase is not settled yet.
            Some(_) if mode == Mode::Plan && running.contains(rid) && !unchanged.contains(rid) => {
                Lookup::Pending
            }
            Some(rs) => Lookup::Settled(&rs.attributes, &rs.sensitive_paths),
            None => Lookup::Pending,
        });
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
            prior: if node.kind == NodeKind::Managed {
                state.get(id).cloned()
            } else {
                None
            },
            lifecycle: node.lifecycle.clone(),
            dependencies: self.analysis.nodes[id].deps.iter().cloned().collect(),
            mode,
            refresh: self.opts.refresh,
            build: self.opts.build,
        })
    }

    fn progress(&mut self, i: usize, progress: NodeProgress) {
        match progress {
            NodeProgress::Applying(action) => self.sink.event(Event::Started {
                phase: self.phase,
                id: self.analysis.run[i].clone(),
                action,
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

    fn finish(&mut self, i: usize, out: NodeOutput) -> bool {
        let id = self.analysis.run[i].clone();
        let type_name = self.analysis.nodes[&id].node.type_name.clone();
        if let Some(source) = self.stale.get(&id) {
            // Not settled: the next evaluation runs it with fresh values. What depends on it
            // reads its current record meanwhile.
            self.sink.event(Event::Deferred {
                phase: self.phase,
                id: id.clone(),
                type_name,
                in_state: self.holder.state().contains(&id),
                waits: vec![Wait::Resource(source.clone())],
            });
            return true;
        }
        for w in out.diagnostics.warnings() {
            self.sink.event(Event::Warning(w.clone()));
        }
        if let Some((changes, gone)) = &out.drift {
            self.sink.event(Event::Drift {
                id: id.clone(),
                changes: changes.clone(),
                gone: *gone,
            });
        }
        if let Some(change) = out.commit {
            if self.mode == Mode::Apply {
                self.record(change);
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
            if action != Action::NoOp
                && !Capabilities::of(&self.ir.providers[provider].kind).schemas
            {
                // Its outputs are unknown until applied: what Nix computed from them is stale.
                self.staleness.outputs_changed(&id);
            }
            for key in &out.deposed {
                self.sink.event(Event::Planned {
                    phase: self.phase,
                    id: id.clone(),
                    type_name: type_name.clone(),
                    action: Action::Delete,
                    changes: Vec::new(),
                    deposed: Some(key.clone()),
                });
            }
        }
        match self.mode {
            Mode::Plan => {
                if action == Action::NoOp && self.analysis.nodes[&id].node.kind == NodeKind::Managed
                {
                    self.unchanged.insert(id.clone());
                }
                if action != Action::NoOp {
                    self.sink.event(Event::Planned {
                        phase: self.phase,
                        id: id.clone(),
                        type_name,
                        action,
                        changes: out.changes,
                        deposed: None,
                    });
                }
            }
            Mode::Apply => {
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

struct NodeWorker;

impl<'a, 'ir> sched::Worker<PhaseOwner<'a, 'ir>> for NodeWorker {
    fn run(&self, _i: usize, input: NodeInput, reporter: &Reporter<NodeProgress>) -> NodeOutput {
        node::run(input, &|p| reporter.report(p))
    }
}

struct DestroyOwner<'a> {
    ids: &'a [String],
    holder: &'a mut StateHolder,
    /// The providers that delete; a resource whose provider is not here is forgotten.
    providers: HashMap<String, Arc<dyn Provider>>,
    sink: &'a mut dyn Sink,
    phase: u32,
    destroyed: Vec<(String, Action)>,
    failed: usize,
    /// Removals not yet committed; [`sched::Owner::flush`] commits them as one batch before
    /// anything that waited on them is dispatched, then announces them.
    recorder: Recorder,
}

/// A removal to carry out: delete with this provider, or (`None`) forget.
type Removal = (Option<Arc<dyn Provider>>, crate::state::ResourceState);

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
        });
        Ok((provider, r))
    }

    fn progress(&mut self, _i: usize, gone: node::DeposedGone) {
        let (event, change) = gone.into_event_and_change(self.phase);
        // A deleted object must be recorded as gone before anything else happens.
        self.recorder.record(change);
        self.recorder.announce(event);
        sched::Owner::flush(self);
    }

    fn finish(&mut self, _i: usize, (id, action, result, took): Self::Output) -> bool {
        match result {
            Ok(warnings) => {
                for w in warnings.warnings() {
                    self.sink.event(Event::Warning(w.clone().for_resource(&id)));
                }
                self.recorder.record(Change::Remove(id.clone()));
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

struct DestroyWorker;

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
        let result = node::destroy(provider.as_ref(), &state, &|g| reporter.report(g));
        (state.id, Action::Delete, result, started.elapsed())
    }
}

/// What removing a recorded object does: delete it, or forget it when its provider's kind
/// cannot delete. An undeclared provider counts as deleting: removing its objects then fails,
/// saying it is undeclared.
fn removal(ir: &Ir, r: &crate::state::ResourceState) -> Action {
    match ir.providers.get(&r.provider) {
        Some(decl) if !Capabilities::of(&decl.kind).delete => Action::Forget,
        _ => Action::Delete,
    }
}

/// Those of `ids` (all in state) whose removal is a delete, which needs their provider.
fn needing_delete(ir: &Ir, state: &StateFile, ids: &[String]) -> Vec<String> {
    ids.iter()
        .filter(|id| removal(ir, state.get(id).expect("in state")) == Action::Delete)
        .cloned()
        .collect()
}

/// Resources in state that the IR does not declare.
fn orphans(ir: &Ir, state: &StateFile) -> Vec<String> {
    let declared: BTreeSet<&str> = ir
        .resources
        .iter()
        .chain(ir.data.iter())
        .map(|n| n.id.as_str())
        .collect();
    state
        .ids()
        .filter(|id| !declared.contains(id))
        .map(str::to_string)
        .collect()
}

/// Everything still waiting: deferred resources and consumers with unresolved leaves.
/// Everything still waiting after `analysis`; `include_ready` adds the resources that were
/// ready to run (when the run stops before running them).
fn pending(ir: &Ir, analysis: &Analysis<'_>, include_ready: bool) -> Vec<(String, Vec<Wait>)> {
    let mut out: Vec<(String, Vec<Wait>)> = analysis
        .order
        .iter()
        .filter_map(|id| analysis.deferred.get(id).map(|w| (id.clone(), w.clone())))
        .collect();
    if include_ready {
        for id in &analysis.run {
            out.push((id.clone(), Vec::new()));
        }
    }
    for c in &ir.consumers {
        let mut waits = Vec::new();
        collect_derived(&c.value, &mut waits);
        collect_refs_as_waits(&c.value, &mut waits);
        if !waits.is_empty() {
            out.push((c.id.clone(), tidy_waits(waits)));
        }
    }
    out
}

/// Sorts and dedups waits, dropping a plain wait on a resource already named by a Nix wait.
fn tidy_waits(mut waits: Vec<Wait>) -> Vec<Wait> {
    waits.sort();
    waits.dedup();
    let via_nix: BTreeSet<String> = waits
        .iter()
        .filter_map(|w| match w {
            Wait::Nix { resource, .. } => Some(resource.clone()),
            _ => None,
        })
        .collect();
    waits.retain(|w| !matches!(w, Wait::Resource(r) if via_nix.contains(r)));
    waits
}

fn collect_deps(tree: &Tree, out: &mut BTreeSet<String>) {
    match tree {
        Tree::Ref(r) | Tree::SensitiveRef(r) => {
            out.insert(r.resource.clone());
        }
        Tree::Sensitive(inner) => collect_deps(inner, out),
        Tree::Derived(inputs) => out.extend(inputs.iter().map(|i| i.resource.clone())),
        Tree::List(items) => items.iter().for_each(|t| collect_deps(t, out)),
        Tree::Object(map) => map.values().for_each(|t| collect_deps(t, out)),
        _ => {}
    }
}

fn collect_derived(tree: &Tree, out: &mut Vec<Wait>) {
    match tree {
        Tree::Derived(inputs) => out.extend(inputs.iter().map(|i| Wait::Nix {
            resource: i.resource.clone(),
            attribute: i.attr.clone(),
        })),
        Tree::Sensitive(inner) => collect_derived(inner, out),
        Tree::List(items) => items.iter().for_each(|t| collect_derived(t, out)),
        Tree::Object(map) => map.values().for_each(|t| collect_derived(t, out)),
        _ => {}
    }
}

fn collect_refs_as_waits(tree: &Tree, out: &mut Vec<Wait>) {
    match tree {
        Tree::Ref(r) => out.push(Wait::Resource(r.resource.clone())),
        Tree::Sensitive(inner) => collect_refs_as_waits(inner, out),
        Tree::List(items) => items.iter().for_each(|t| collect_refs_as_waits(t, out)),
        Tree::Object(map) => map.values().for_each(|t| collect_refs_as_waits(t, out)),
        _ => {}
    }
}

/// What a resource's turn depends on, with references resolved from `state`: two equal
/// fingerprints mean running it again would send the provider the same thing. `None` while
/// something it references is not recorded yet.
fn resolved_fingerprint(node: &Node, state: &StateFile) -> Option<String> {
    let resolved = resolve(&node.config, &|id| match state.get(id) {
        Some(r) => Lookup::Settled(&r.attributes, &r.sensitive_paths),
        None => Lookup::Pending,
    });
    if !resolved.waits.is_empty() {
        return None;
    }
    Some(format!(
        "{:?}|{:?}|{:?}|{}",
        resolved.value, node.depends_on, node.lifecycle, node.provider
    ))
}
