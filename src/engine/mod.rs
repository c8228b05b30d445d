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
mod destroy;
mod error;
mod evaluate;
pub mod events;
mod node;
mod phases;
mod providers;
mod providers_run;
mod record;
mod refcheck;
mod refresh;
mod resolve;
mod stale;
mod store;
mod untyped;
mod validate;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value as Json;

use self::analysis::*;
pub use self::error::EngineError;
pub use self::events::{Action, AttrChange, Collect, Event, Sink, Timing, Wait};
use self::node::{Mode, NodeInput, NodeOutput, NodeProgress};
use self::providers::ProviderSet;
pub use self::providers::{locate, resolve_source};
use self::record::Recorder;
pub use self::record::{Outcome, Unrecorded, WriteFailure};
use self::resolve::{resolve, Lookup};
use self::store::*;
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
    /// How long to wait for the state lock.
    pub lock_timeout: Option<Duration>,
    /// The command line, recorded in the lock.
    pub command: String,
    /// How providers given by registry address are installed (mirrors, cache, lock file).
    pub install: crate::registry::InstallOptions,
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
}
