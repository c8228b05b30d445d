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

mod analysis;
mod announced;
mod conditions;
mod deposed;
mod destroy;
mod ephemeral;
mod error;
mod evaluate;
/// The events the engine reports through (`Sink`), one per step of a run.
pub(crate) mod events;
mod imports;
mod moves;
mod node;
mod phase_owner;
mod phases;
/// The saved plan (`plan --out`, `apply FILE`, `nivis show`): its file format and checks.
pub mod plan_file;
mod policy_check;
mod prestart;
mod providers;
mod providers_run;
mod record;
mod refcheck;
mod refresh;
mod resolve;
mod same_ir;
mod saved;
mod secret_addresses;
#[cfg(test)]
mod stage_tests;
mod stale;
mod store;
mod triggers;
mod validate;
pub(crate) mod wire;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value as Json;

pub(crate) use self::events::Timing;
use self::providers::ProviderSet;
use self::store::close_after;
pub(crate) use self::{
    evaluate::{placeholder, NixEvaluator, PLACEHOLDER},
    providers::{locate, resolve_source, ProcessLauncher},
};
use crate::nixeval::PlanSource;
use crate::provider::Provider;
use crate::state::{Backend, LockHolder, LockedStore, MemoryStore};
pub use {
    self::error::EngineError,
    self::evaluate::Evaluator,
    self::events::{Collect, Event, Sink, Wait},
    self::providers::{Launcher, StartInfo},
    self::store::StateAccess,
    crate::plan::{Action, AttrChange},
};

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
    /// How long a provider's apply call (create, update, delete) may go unanswered before the
    /// run gives up on it (`apply --operation-timeout`; `None`: no limit).
    pub operation_timeout: Option<Duration>,
    /// Stop after this many phases that changed something.
    pub max_phases: Option<u32>,
    /// Only these resources (and what they depend on; for destroy: what depends on them).
    pub targets: Vec<String>,
    /// Replace these managed resources even where the plan would keep them (`--replace`).
    pub replace: Vec<String>,
    /// Realise `__build` outputs before apply.
    pub build: bool,
    /// Refresh stored objects (ReadResource) before planning.
    pub refresh: bool,
    /// Variable values from the command line.
    pub vars: BTreeMap<String, Json>,
    /// The text of values given as text (`--var`, environment), for `lib.vars` to read by the
    /// declared type (see `ledger`).
    pub var_text: BTreeMap<String, String>,
    /// The names given with `--var`: the plan must declare each (an error, as in Terraform; a
    /// name only in a `--var-file` or the environment is a warning).
    pub flag_vars: Vec<String>,
    /// The variables read from secret stores (`secret_sources`): the plan must declare each
    /// sensitive.
    pub secret_vars: Vec<String>,
    /// A review (`diff`, `why`, `graph`, `validate`, `output`, `console`): every sensitive
    /// variable without a value gets a placeholder of its type, so a review needs no secret
    /// (DESIGN §93); a warning names them.
    pub placeholder_variables: bool,
    /// How long to wait for the state lock.
    pub lock_timeout: Option<Duration>,
    /// The command line, recorded in the lock.
    pub command: String,
    /// How providers given by registry address are installed (mirrors, cache, lock file).
    pub install: crate::registry::InstallOptions,
    /// `apply FILE`: the reviewed plan this apply must match, and stay within.
    pub saved: Option<std::sync::Arc<crate::engine::plan_file::SavedPlan>>,
    /// `plan --out`: build the saved plan (the report carries it).
    pub save: bool,
    /// `--override RULE --reason TEXT`: the mandatory policy rules this run may break.
    pub overrides: crate::policy::Overrides,
    /// Other projects' states the plan reads (`nivis.remoteStates`), read once before the run:
    /// every evaluation's ledger holds them, and the run reports each one's lineage and serial.
    pub remote_states: std::sync::Arc<Vec<crate::ledger::RemoteState>>,
    /// What this run knows to be secret: the engine teaches it what it learns (state,
    /// sensitive variables, values and outputs), and whoever prints for the run redacts with a
    /// clone of it (DESIGN §75).
    pub redactor: crate::secrets::Redactor,
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
            Wait::Recomputed(id) => format!("{id} (Nix re-evaluation)"),
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
    /// `plan` with `save`: the plan to write.
    pub saved: Option<crate::engine::plan_file::SavedPlan>,
}

/// The interrupt flag set by Ctrl-C (the ground floor's, see `crate::interrupt`).
pub(crate) use crate::interrupt::flag as interrupt_flag;

/// Where the engine meets the world; each part can be replaced (the engine's unit tests run
/// with canned IR, in-process providers and state in memory).
pub struct Seams {
    /// Turns a ledger into IR.
    pub evaluator: Box<dyn Evaluator>,
    /// Starts providers.
    pub launcher: Box<dyn Launcher>,
    /// Opens the state.
    pub state: Box<dyn StateAccess>,
}

impl Seams {
    /// Nix, provider processes and the configured backend, as `opts` says.
    pub(crate) fn production(opts: &Options) -> Seams {
        Seams {
            evaluator: Box::new(NixEvaluator::new(
                opts.source.clone(),
                opts.redactor.clone(),
            )),
            launcher: Box::new(
                ProcessLauncher::new(&opts.source.base_dir(), opts.install.clone())
                    .for_plan(&opts.source)
                    .with_operation_timeout(opts.operation_timeout),
            ),
            state: Box::new(opts.backend.clone()),
        }
    }
}

/// The permission to change real objects and the state (DESIGN §39): made for the engine only
/// by [`Engine`]'s `mutating` frame (`apply`, `destroy`, `refresh`, `import`); the calls that
/// apply, delete or commit require it, so `plan` and `validate` cannot reach them.
pub use crate::state::Mutation;

/// The confirmation callback of a mutating command: called once the plan is shown, it returns
/// whether to go ahead.
pub(crate) type Confirm<'a> = Option<&'a mut dyn FnMut() -> bool>;

/// The engine: one per command invocation. It holds what the whole run shares (options, the
/// event sink, the seams, the started providers, open ephemeral resources, what the run has
/// settled, the time spent in Nix) and runs the stages, each a function of explicit inputs
/// that its `Engine` frame gathers: evaluate, `analysis::analyse`, a phase
/// (`phase_owner::run_phase`, framed by `run_nodes`), the loop's exits
/// (`phases::stop_after_evaluation`, `phases::stop_after_phase`, carried out in
/// `apply_phases`), destroy (`destroy::removal_set`, `destroy::delete_set`), refresh
/// (`refresh::read_drift`) and imports (`imports::fetch_imports`); see DESIGN §76.
pub struct Engine<'s> {
    opts: Options,
    sink: events::Output<'s>,
    evaluator: Box<dyn Evaluator>,
    state_access: Box<dyn StateAccess>,
    /// Ephemeral resources open in this run; closed when the engine goes (before the
    /// providers, which it keeps alive until then).
    ephemerals: ephemeral::EphemeralSet,
    /// Whether evaluations open ephemeral resources (not for commands that only read the
    /// declarations, nor `validate`).
    open_ephemerals: bool,
    providers: ProviderSet,
    live: Arc<Mutex<Vec<Arc<dyn Provider>>>>,
    /// What this run has settled so far.
    settled: analysis::Settled,
    nix_time: Duration,
    /// How long the latest evaluation took (a phase's owner weighs a wave against it).
    last_evaluation: Duration,
    /// Until the first IR says which variables are sensitive, all their values are masked.
    vars_settled: bool,
    /// Whether the next evaluations fold in the resource-set probe (the plan's, and the
    /// evaluation an apply asks confirmation for: see `announced`).
    probe_next: bool,
    /// The probe's verdict from the latest evaluation, when it ran in it.
    probed: Option<bool>,
    /// Whether every node the latest phase ran (`run_nodes`) settled with a fingerprint.
    fingerprinted_all: bool,
    /// Whether evaluation waves may join the apply phase about to run (DESIGN §89).
    streaming: bool,
    /// What the preview of the coming apply phase read and planned: the apply uses it.
    previewed: node::Previewed,
    /// The project's policies (`nivis.policies`); `None` without any (or in the engine's unit
    /// tests, whose plans are canned).
    policies: Option<crate::policy::PolicyRunner>,
    /// (static, plan) rule counts, once the first check told them.
    policy_rules: Option<(usize, usize)>,
    /// Whether to start the providers the last run started before evaluating (production
    /// seams only: the record is the user's, see `prestart`).
    prestart: bool,
    /// The latest evaluation's postconditions and checks, reported when the run completes
    /// (`conditions`).
    conditions: Vec<crate::ir::Condition>,
}

impl<'s> Engine<'s> {
    /// Prepares a run against Nix, provider processes and the configured state.
    pub fn new(opts: Options, sink: &'s mut dyn Sink) -> Self {
        let seams = Seams::production(&opts);
        let policies = crate::policy::PolicyRunner::new(opts.source.clone());
        let mut engine = Engine::with_seams(opts, sink, seams);
        engine.policies = Some(policies);
        engine.prestart = true;
        engine
    }

    /// Prepares a run whose evaluator, providers and state come from `seams`.
    pub fn with_seams(opts: Options, sink: &'s mut dyn Sink, seams: Seams) -> Self {
        let expected = opts.saved.as_ref().map(|s| s.basis.providers.clone());
        Engine {
            opts,
            sink: events::Output::new(sink),
            evaluator: seams.evaluator,
            state_access: seams.state,
            ephemerals: ephemeral::EphemeralSet::default(),
            open_ephemerals: true,
            providers: ProviderSet::new(seams.launcher, expected),
            live: Arc::new(Mutex::new(Vec::new())),
            settled: HashMap::new(),
            nix_time: Duration::ZERO,
            last_evaluation: Duration::ZERO,
            vars_settled: false,
            probe_next: false,
            probed: None,
            fingerprinted_all: false,
            streaming: false,
            previewed: Default::default(),
            policies: None,
            policy_rules: None,
            prestart: false,
            conditions: Vec::new(),
        }
    }

    /// The frame of a command that changes things (apply, destroy): the state locked, Ctrl-C
    /// forwarded to the providers, the mutation capability granted to `run`, and the state closed
    /// after it. `confirm` sees the plan (as events already sent) and returns whether to go ahead;
    /// `None` means no confirmation needed.
    fn mutating(
        &mut self,
        confirm: Confirm<'_>,
        run: impl FnOnce(
            &mut Self,
            &mut dyn LockedStore,
            Confirm<'_>,
            Mutation,
        ) -> Result<Report, EngineError>,
    ) -> Result<Report, EngineError> {
        self.reporting(|engine| {
            let mut store = engine.open_locked()?;
            let done = engine.watch_interrupts();
            let result = run(engine, &mut *store, confirm, Mutation::for_engine_run());
            done.store(true, Ordering::SeqCst);
            close_after(store, result)
        })
    }

    /// The frame of every command that reports: `run`, then the time the run spent in Nix (the
    /// one place a report gets it).
    fn reporting(
        &mut self,
        run: impl FnOnce(&mut Self) -> Result<Report, EngineError>,
    ) -> Result<Report, EngineError> {
        // The providers the last run of this plan started start now, while Nix evaluates.
        if std::mem::take(&mut self.prestart) {
            if let Some(memory) = prestart::Memory::open(&self.opts.source) {
                self.providers.prestart(memory);
            }
        }
        for remote in self.opts.remote_states.iter() {
            self.sink.event(Event::RemoteState {
                name: remote.name.clone(),
                location: remote.location.clone(),
                lineage: remote.lineage.clone(),
                serial: remote.serial,
            });
        }
        let mut report = run(self)?;
        report.nix_time = self.nix_time;
        Ok(report)
    }

    /// The state for this run, locked for writing: only `mutating` opens it, and only the
    /// token it makes commits to it.
    fn open_locked(&self) -> Result<Box<dyn LockedStore>, EngineError> {
        let store = self.state_access.open_locked(
            LockHolder::current(&self.opts.command),
            self.opts.lock_timeout,
        )?;
        for warning in store.warnings() {
            log::warn!("{warning}");
        }
        store.state().teach_secrets(&self.opts.redactor);
        Ok(store)
    }

    /// The state for a run that changes nothing: an in-memory copy, which plans preview moves
    /// and imports on ([`MemoryStore::apply`]).
    fn open_copy(&self) -> Result<MemoryStore, EngineError> {
        let state = self.state_access.read_only()?;
        state.teach_secrets(&self.opts.redactor);
        Ok(MemoryStore::from_state(state))
    }
}
