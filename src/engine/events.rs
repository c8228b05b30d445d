//! What the engine reports while it works; renderers decide how it looks.
//!
//! The engine pushes [`Event`]s into a [`Sink`]; `render` implements human and JSON-lines
//! sinks, and tests collect events into a Vec. Nothing here formats text; the JSON spelling
//! of a change and of a wait (shared by the `--json` stream and saved plans) is `wire`'s.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::wire::WaitRecord;
use crate::diag::Diagnostic;

pub(crate) use crate::plan::{Action, AttrChange};

/// Something the engine waits on before it can decide a resource.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "WaitRecord", from = "WaitRecord")]
pub enum Wait {
    /// A Nix re-evaluation needs this output (`resource`, `attribute`).
    Nix {
        /// The resource whose output it is.
        resource: String,
        /// The output attribute.
        attribute: String,
    },
    /// A resource that is itself waiting.
    Resource(String),
    /// A value Nix computed from this resource's outputs, which change in this phase: the
    /// next evaluation computes it again.
    Recomputed(String),
    /// The provider's configuration is not known yet.
    ProviderConfig(String),
}

/// An engine event.
#[derive(Debug, Clone)]
pub enum Event {
    /// Another project's state the plan reads (`nivis.remoteStates`), read without its lock
    /// before the first evaluation.
    RemoteState {
        /// The name the plan gives it.
        name: String,
        /// Where it is: a path or `s3://bucket/key`.
        location: String,
        /// Its lineage.
        lineage: String,
        /// Its serial when read.
        serial: u64,
    },
    /// Nix evaluated the plan for this phase.
    Evaluated {
        /// The phase it happened in.
        phase: u32,
        /// How long Nix took.
        duration: Duration,
        /// Managed resources the IR declares.
        resources: usize,
        /// Data sources the IR declares.
        data: usize,
    },
    /// A resource's planned action; with `deposed`, the action is on that deposed object of
    /// the resource (an old object a create-before-destroy replace could not delete).
    Planned {
        /// The phase it happened in.
        phase: u32,
        /// The resource's address.
        id: String,
        /// The resource type.
        type_name: String,
        /// The action.
        action: Action,
        /// The attribute changes.
        changes: Vec<AttrChange>,
        /// The deposed object it is on, if any.
        deposed: Option<String>,
        /// The resources it reads that changed outside Nivis (refresh found drift): the cause
        /// of this change, as OpenTofu plans on the refreshed state.
        drifted: Vec<String>,
        /// The `lifecycle.replaceTriggeredBy` triggers that made it a replacement (DESIGN §103).
        triggered_by: Vec<String>,
    },
    /// A recorded object moves to another address (`moved` in the IR): planned, or
    /// `recorded` in state. No provider is called.
    Moved {
        /// The phase it happened in.
        phase: u32,
        /// The address it is recorded at now.
        from: String,
        /// The address it moves to.
        to: String,
        /// The resource type.
        type_name: String,
        /// Whether it is recorded in state (else only planned).
        recorded: bool,
    },
    /// An existing object is adopted at `id` (ImportResourceState + ReadResource): planned, or
    /// `recorded` in state. The ordinary plan of the resource follows.
    Imported {
        /// The phase it happened in.
        phase: u32,
        /// The resource's address.
        id: String,
        /// The resource type.
        type_name: String,
        /// The provider's id of the object.
        import_id: String,
        /// Whether it is recorded in state (else only planned).
        recorded: bool,
    },
    /// A resource cannot be decided in this phase.
    Deferred {
        /// The phase it happened in.
        phase: u32,
        /// The resource's address.
        id: String,
        /// The resource type.
        type_name: String,
        /// Whether state records it already.
        in_state: bool,
        /// What it waits on.
        waits: Vec<Wait>,
    },
    /// A Nix consumer value is still pending.
    ConsumerPending {
        /// The consumer's id.
        id: String,
        /// What it waits on.
        waits: Vec<Wait>,
    },
    /// An operation started, with the attribute changes it carries out (as decided now, in
    /// this phase: the apply log shows every phase's diff).
    Started {
        /// The phase it happened in.
        phase: u32,
        /// The resource's address.
        id: String,
        /// The action.
        action: Action,
        /// The attribute changes it carries out.
        changes: Vec<AttrChange>,
    },
    /// An operation finished; with `deposed`, on that deposed object of the resource.
    Finished {
        /// The phase it happened in.
        phase: u32,
        /// The resource's address.
        id: String,
        /// The action.
        action: Action,
        /// How long it took.
        duration: Duration,
        /// The deposed object it was on, if any.
        deposed: Option<String>,
    },
    /// An operation's provider call ended; its result is being written to the state (it is
    /// `Finished` once recorded). Progress only: the JSON lines leave it out.
    Recording {
        /// The apply phase (1-based).
        phase: u32,
        /// The resource's address.
        id: String,
    },
    /// An operation was carried out but its result could not be recorded (the state could
    /// not be written): the object exists (or, `deleted`, is gone) unlike what state says.
    Unrecorded {
        /// The phase it happened in.
        phase: u32,
        /// The resource's address.
        id: String,
        /// The provider's id of the object, when it has one.
        object_id: Option<String>,
        /// Whether the operation deleted the object.
        deleted: bool,
    },
    /// An operation failed.
    Failed {
        /// The phase it happened in.
        phase: u32,
        /// The resource's address.
        id: String,
        /// Why it failed.
        diagnostics: Vec<Diagnostic>,
    },
    /// A resource was not touched because something it depends on failed.
    Skipped {
        /// The phase it happened in.
        phase: u32,
        /// The resource's address.
        id: String,
        /// The failed resource it depends on.
        because: String,
    },
    /// Refresh found the real object different from state.
    Drift {
        /// The resource's address.
        id: String,
        /// How the real object differs from its record.
        changes: Vec<AttrChange>,
        /// Whether the real object is gone.
        gone: bool,
    },
    /// A warning from a provider or from Nivis.
    Warning(Diagnostic),
    /// The state notes an operation sent by a run that stopped before recording its result:
    /// the object may exist (DESIGN §97). Sent before anything else a plan or apply reports.
    PendingOperation(Box<crate::state::PendingOperation>),
    /// A check or postcondition of the plan, as the run's last evaluation found it; `fatal`:
    /// it fails the run (a postcondition false after an apply), else a failure only warns.
    Condition {
        /// The condition, with its status.
        condition: crate::ir::Condition,
        /// Whether it ends the run with an error.
        fatal: bool,
    },
    /// A policy rule (`nivis.policies`) does not hold, found before phase `phase` changed
    /// anything; with `violation.overridden`, the reason it does not refuse.
    PolicyViolation {
        /// The phase it happened in.
        phase: u32,
        /// The rule, the resource, and why it does not hold.
        violation: crate::policy::Violation,
    },
    /// Nix evaluated again while other operations of the phase ran, because `trigger`'s
    /// outputs were recorded, and `ready` joined the running phase as wave `phase`
    /// (DESIGN §89). Their events carry that number.
    Wave {
        /// The wave's number (phases and waves share one count).
        phase: u32,
        /// The resources whose recorded outputs the evaluation was for.
        trigger: Vec<String>,
        /// The resources that became ready and start now.
        ready: Vec<String>,
    },
    /// A phase ended.
    PhaseDone {
        /// The phase.
        phase: u32,
        /// Resources it changed.
        changed: usize,
    },
    /// No new value resolves any more.
    Fixpoint {
        /// Nix evaluations made.
        evaluations: u32,
        /// Phases that changed something.
        apply_phases: u32,
    },
    /// `--max-phases` stopped the run.
    PhaseLimit {
        /// Phases that changed something.
        apply_phases: u32,
    },
    /// `plan --out`: the plan was written to `path`; `sha256` is the content hash of its
    /// canonical bytes (what a reviewer compares). `apply FILE` announces the plan it applies
    /// the same way, with `applying`.
    PlanFile {
        /// Where the plan file is.
        path: String,
        /// The content hash of its canonical bytes.
        sha256: String,
        /// Whether `apply FILE` announces it (else `plan --out` wrote it).
        applying: bool,
    },
    /// Where the command's wall time went; the last event of a successful command.
    Timing(Timing),
    /// The command failed as a whole (the last event of a failed command); `diagnostics` is
    /// empty when `message` says it all.
    CommandFailed {
        /// What failed, as one line.
        message: String,
        /// The diagnostics behind it (empty when `message` says it all).
        diagnostics: Vec<Diagnostic>,
    },
}

/// A command's wall time, split. The parts overlap only where Nix ran while a provider call
/// was in flight (never, today: evaluation happens between phases).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// From the engine's creation to its end, provider shutdown included.
    pub(crate) wall: Duration,
    /// Spent in Nix evaluations.
    pub(crate) nix: Duration,
    /// With at least one provider start-up, call or shutdown in flight.
    pub(crate) providers: Duration,
    /// Provider RPCs made.
    pub(crate) provider_calls: u64,
    /// Those RPCs' durations added up: with `parallelism` workers kept busy, `providers` would
    /// be about this divided by `parallelism`.
    pub(crate) provider_call_time: Duration,
    /// CPU time Nivis's own threads used (providers and Nix excluded).
    pub(crate) cpu: Duration,
}

impl Timing {
    /// Nivis's own share: neither Nix nor any provider was working for it.
    pub(crate) fn own(&self) -> Duration {
        self.wall.saturating_sub(self.nix + self.providers)
    }
}

impl Event {
    /// The planned removal of a recorded object (`deposed`: one of its deposed objects): a
    /// delete, or a forget when its provider cannot delete. Removals show no attribute changes.
    pub(crate) fn planned_removal(
        phase: u32,
        id: &str,
        type_name: &str,
        action: Action,
        deposed: Option<String>,
    ) -> Event {
        Event::Planned {
            phase,
            id: id.to_string(),
            type_name: type_name.to_string(),
            action,
            changes: Vec::new(),
            deposed,
            drifted: Vec::new(),
            triggered_by: Vec::new(),
        }
    }
}

/// Receives events.
pub trait Sink {
    /// Handles one event.
    fn event(&mut self, event: Event);
}

/// The engine's sink: forwards every event, and while asked to, also keeps the plan's own
/// (planned, deferred, moved, imported), for a saved plan to be written from or compared with.
pub(super) struct Output<'s> {
    inner: &'s mut dyn Sink,
    kept: Option<Vec<Event>>,
    /// Plan rows (planned, deferred, moved, imported) sent so far: a prompt after a preview
    /// that listed none has nothing to ask about.
    listed: usize,
    /// While collecting, the `Planned` events sent (a phase's changes, for its policy check).
    planned: Option<Vec<Event>>,
    /// Plan rows are collected but not sent, nor drift (the silent preview of a phase, planned
    /// for its policy check and, in phase 1, to stop before any change when a node cannot be
    /// planned).
    quiet: bool,
}

impl<'s> Output<'s> {
    pub(super) fn new(inner: &'s mut dyn Sink) -> Self {
        Output {
            inner,
            kept: None,
            listed: 0,
            planned: None,
            quiet: false,
        }
    }

    /// Starts collecting `Planned` events (dropping any collected before).
    pub(super) fn collect_planned(&mut self) {
        self.planned = Some(Vec::new());
    }

    /// The `Planned` events collected since [`Output::collect_planned`]; collecting stops.
    pub(super) fn take_planned(&mut self) -> Vec<Event> {
        self.planned.take().unwrap_or_default()
    }

    /// While `quiet`, plan rows and drift are not sent on (nor counted as listed).
    pub(super) fn set_quiet(&mut self, quiet: bool) {
        self.quiet = quiet;
    }

    /// How many plan rows were sent so far.
    pub(super) fn listed(&self) -> usize {
        self.listed
    }

    /// Starts keeping plan events (dropping any kept before).
    pub(super) fn keep(&mut self) {
        self.kept = Some(Vec::new());
    }

    /// The plan events kept since [`Output::keep`]; keeping stops.
    pub(super) fn take_kept(&mut self) -> Vec<Event> {
        self.kept.take().unwrap_or_default()
    }
}

impl Sink for Output<'_> {
    fn event(&mut self, event: Event) {
        let row = matches!(
            event,
            Event::Planned { .. }
                | Event::Deferred { .. }
                | Event::Moved { .. }
                | Event::Imported { .. }
        );
        if let (Some(planned), Event::Planned { .. }) = (&mut self.planned, &event) {
            planned.push(event.clone());
        }
        // A quiet preview's drift is reported again by the apply that follows it.
        if self.quiet && (row || matches!(event, Event::Drift { .. })) {
            return;
        }
        if row {
            self.listed += 1;
            if let Some(kept) = &mut self.kept {
                kept.push(event.clone());
            }
        }
        self.inner.event(event);
    }
}

/// A sink that keeps every event (tests, summaries).
#[derive(Default)]
pub struct Collect(pub Vec<Event>);

impl Sink for Collect {
    fn event(&mut self, event: Event) {
        self.0.push(event);
    }
}
