//! One evaluation: the ledger built from state, the [`Evaluator`] that turns it into IR (Nix,
//! or canned documents in the engine's unit tests), the IR parsed, and what the first IR tells
//! about variables.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value as Json;

use super::error::EngineError;
use super::events::{Event, Sink};
use super::Engine;
use crate::diag::Diagnostic;
use crate::ir::{self, Ir, VariableDecl};
use crate::ledger::Ledger;
use crate::nixeval::{self, PlanSource, Probed};
use crate::state::{StateFile, StateStore};

/// The value a review gives a sensitive string variable nobody gave (`fill_placeholders`).
pub(crate) const PLACEHOLDER: &str = "(placeholder: not read by this command)";

/// The placeholder a review gives a sensitive variable of type `ty` nobody gave.
pub(crate) fn placeholder(ty: &str) -> Json {
    match ty {
        "number" => Json::from(0),
        "bool" => Json::Bool(false),
        "list" => Json::Array(Vec::new()),
        "map" => Json::Object(Default::default()),
        _ => Json::String(PLACEHOLDER.to_string()),
    }
}

/// Turns a ledger into the plan's IR. `Send`: an evaluation may run on a helper thread beside
/// a running phase (`Engine::evaluate_beside`).
pub trait Evaluator: Send {
    /// Evaluates the plan with `ledger` as its input; returns the IR bytes and the time taken.
    /// Takes the ledger (every recorded object's outputs, as large as the state) so that it can
    /// be gone once handed over, while Nix evaluates.
    fn evaluate(&mut self, ledger: Ledger) -> Result<(Vec<u8>, Duration), EngineError>;

    /// [`evaluate`](Self::evaluate), and in the same evaluation the resource-set probe (see
    /// `engine::announced`): `open` says whether the plan function declares another set of
    /// nodes once every node it declares has an (empty) output entry. `open` is `None` when
    /// this evaluator cannot probe in the same evaluation; the engine then probes in an
    /// evaluation of its own.
    fn evaluate_probing(&mut self, ledger: Ledger) -> Result<Probed, EngineError> {
        let (ir, took) = self.evaluate(ledger)?;
        Ok(Probed {
            ir,
            took,
            open: None,
        })
    }

    /// The names of the variables the plan declares sensitive, learnt without checking the
    /// values in `ledger` or forcing anything else; `None` when the plan cannot say (then
    /// every given value is masked until the first IR says).
    fn sensitive_variables(&mut self, _ledger: &Ledger) -> Option<BTreeSet<String>> {
        None
    }

    /// The variables the plan declares sensitive, with their declared types (as
    /// [`sensitive_variables`](Self::sensitive_variables)); `None` when the plan cannot say.
    fn sensitive_declarations(&mut self, _ledger: &Ledger) -> Option<BTreeMap<String, String>> {
        None
    }
}

/// An evaluation running on a helper thread (see [`Engine::evaluate_beside`]).
pub(super) struct Beside {
    /// The run's evaluator back, with what it evaluated.
    done: crossbeam_channel::Receiver<(Box<dyn Evaluator>, EvaluatorResult)>,
}

/// What [`Evaluator::evaluate`] returns.
type EvaluatorResult = Result<(Vec<u8>, Duration), EngineError>;

/// Wakes a phase's loop when dropped: at the end of the evaluation thread, however it ends.
struct WakesOnDrop(crate::sched::Waker);

impl Drop for WakesOnDrop {
    fn drop(&mut self) {
        self.0.wake();
    }
}

/// What the engine holds while its evaluator evaluates beside a phase: a second evaluation
/// then is refused rather than run beside the first.
struct Lent;

impl Evaluator for Lent {
    fn evaluate(&mut self, _ledger: Ledger) -> EvaluatorResult {
        Err(EngineError::Io(
            "internal error: an evaluation was asked for while another runs".into(),
        ))
    }
}

/// The production evaluator: `nix eval` of the plan, the ledger handed over in the run's
/// private directory (created at the first evaluation, removed when the evaluator goes).
pub(crate) struct NixEvaluator {
    source: PlanSource,
    run_dir: Option<crate::rundir::RunDir>,
    /// The run's secrets, kept out of Nix's error text and warnings.
    redactor: crate::secrets::Redactor,
}

impl NixEvaluator {
    /// Evaluates the plan at `source`, for the run whose secrets `redactor` knows.
    pub(crate) fn new(source: PlanSource, redactor: crate::secrets::Redactor) -> NixEvaluator {
        map_large_buffers_apart();
        NixEvaluator {
            source,
            run_dir: None,
            redactor,
        }
    }
}

impl NixEvaluator {
    /// Writes `ledger` into the run's private directory (created at the first evaluation) and
    /// runs `eval` on the plan with the ledger's path and the descriptor Nix reaches it by;
    /// the channel of secrets is removed once `eval` returns.
    fn with_ledger<T>(
        &mut self,
        ledger: Ledger,
        eval: impl FnOnce(
            &PlanSource,
            &std::path::Path,
            std::os::fd::RawFd,
            &crate::secrets::Redactor,
        ) -> Result<T, nixeval::EvalError>,
    ) -> Result<T, EngineError> {
        if self.run_dir.is_none() {
            self.run_dir =
                Some(crate::rundir::RunDir::create().map_err(|e| EngineError::Io(e.to_string()))?);
        }
        let dir = self.run_dir.as_ref().expect("created above");
        let path = ledger.write(dir).map_err(|e| {
            EngineError::Io(format!(
                "cannot write the ledger in {}: {e}",
                dir.path().display()
            ))
        })?;
        // Written: its memory goes back to the system before Nix's grows beside it.
        drop(ledger);
        release_freed_memory();
        let evaluated = eval(&self.source, &path, dir.inherit_fd(), &self.redactor);
        // The channel of secrets lives only while Nix reads it.
        dir.remove(crate::ledger::CHANNEL_FILE);
        evaluated.map_err(EngineError::Eval)
    }
}

impl Evaluator for NixEvaluator {
    fn evaluate(&mut self, ledger: Ledger) -> Result<(Vec<u8>, Duration), EngineError> {
        self.with_ledger(ledger, |source, path, fd, redactor| {
            nixeval::evaluate(source, path, Some(fd), redactor)
        })
    }

    fn evaluate_probing(&mut self, ledger: Ledger) -> Result<Probed, EngineError> {
        self.with_ledger(ledger, |source, path, fd, redactor| {
            nixeval::evaluate_probing(source, path, Some(fd), redactor)
        })
    }

    fn sensitive_variables(&mut self, ledger: &Ledger) -> Option<BTreeSet<String>> {
        self.sensitive_declarations(ledger)
            .map(|types| types.into_keys().collect())
    }

    fn sensitive_declarations(&mut self, ledger: &Ledger) -> Option<BTreeMap<String, String>> {
        if self.run_dir.is_none() {
            self.run_dir = Some(crate::rundir::RunDir::create().ok()?);
        }
        let dir = self.run_dir.as_ref().expect("created above");
        let path = ledger.write(dir).ok();
        let names = path.and_then(|path| {
            nixeval::sensitive_declarations(
                &self.source,
                &path,
                Some(dir.inherit_fd()),
                &self.redactor,
            )
        });
        dir.remove(crate::ledger::CHANNEL_FILE);
        names
    }
}

impl Engine<'_> {
    /// Every variable value as given: read as JSON, and as typed text (the two can differ:
    /// `--var pw=1.50` is the number 1.5 and the text "1.50"), for redaction.
    pub(super) fn variable_values(&self) -> [BTreeMap<String, Json>; 2] {
        let text = self.opts.var_text.iter();
        let text = text.map(|(k, v)| (k.clone(), Json::String(v.clone())));
        [self.opts.vars.clone(), text.collect()]
    }

    /// The ledger of `phase` built from `state`.
    pub(super) fn ledger_from(&self, state: &StateFile, phase: u32) -> Ledger {
        let mut ledger = Ledger::default();
        ledger.phase = phase;
        ledger.vars = self.opts.vars.clone();
        ledger.vars_text = self.opts.var_text.clone();
        ledger.env = Some(self.state_access.env().to_string());
        ledger.remote_states = self.opts.remote_states.clone();
        for r in state.iter() {
            ledger.set(&r.id, &r.attributes, &r.sensitive_paths);
        }
        ledger.ephemeral = self.ephemerals.results();
        ledger
    }

    /// Evaluates the plan with a ledger built from `state`, opening the ephemeral resources it
    /// declares as they become ready (see `ephemeral`).
    pub(super) fn evaluate(&mut self, state: &StateFile, phase: u32) -> Result<Ir, EngineError> {
        self.evaluate_with_ephemerals(state, phase)
    }

    /// One evaluation of the plan with a ledger built from `state`.
    pub(super) fn evaluate_once(
        &mut self,
        state: &StateFile,
        phase: u32,
    ) -> Result<Ir, EngineError> {
        let (bytes, took) = self.nix_evaluation(state, phase)?;
        let ir = parse_releasing(bytes)?;
        self.accept_evaluated(ir, took, phase)
    }

    /// Nix's evaluation of the plan with a ledger built from `state`: the IR's bytes and the
    /// time taken (added to the run's Nix time), the probe's verdict kept when it was asked
    /// for (`probe_next`).
    pub(super) fn nix_evaluation(
        &mut self,
        state: &StateFile,
        phase: u32,
    ) -> Result<(Vec<u8>, Duration), EngineError> {
        let ledger = self.ledger_for_evaluation(state, phase);
        self.probed = None;
        let (bytes, took) = match self.probe_next {
            true => {
                let evaluation = self.evaluator.evaluate_probing(ledger)?;
                self.probed = evaluation.open;
                (evaluation.ir, evaluation.took)
            }
            false => self.evaluator.evaluate(ledger)?,
        };
        self.nix_time += took;
        Ok((bytes, took))
    }

    /// The ledger of an evaluation of `phase` built from `state`, once the variables are
    /// settled (before the first evaluation: which are sensitive, and a review's placeholders).
    fn ledger_for_evaluation(&mut self, state: &StateFile, phase: u32) -> Ledger {
        let mut ledger = self.ledger_from(state, phase);
        if self.opts.placeholder_variables {
            self.opts.placeholder_variables = false;
            self.fill_placeholders(&ledger);
            ledger = self.ledger_from(state, phase);
        }
        if !self.vars_settled {
            self.settle_variables_before(&ledger);
        }
        ledger
    }

    /// Starts Nix's evaluation of `phase` with a ledger built from `state` on a helper thread,
    /// so that the caller (a phase's owner) keeps taking results and starting work meanwhile
    /// (DESIGN §101). The thread holds the run's evaluator, and nothing else of the engine,
    /// until [`evaluated_beside`](Self::evaluated_beside) gives it back; meanwhile another
    /// evaluation is refused (never two at once). `waker` is woken when the evaluation ends,
    /// also when it panics.
    pub(super) fn evaluate_beside(
        &mut self,
        state: &StateFile,
        phase: u32,
        waker: crate::sched::Waker,
    ) -> Result<Beside, EngineError> {
        let ledger = self.ledger_for_evaluation(state, phase);
        let (job_tx, job_rx) = crossbeam_channel::bounded::<(Box<dyn Evaluator>, Ledger)>(1);
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        std::thread::Builder::new()
            .name("nivis-evaluation".into())
            .spawn(move || {
                // Dropped last: the result is sent before the owner is woken.
                let _wakes = WakesOnDrop(waker);
                if let Ok((mut evaluator, ledger)) = job_rx.recv() {
                    let result = evaluator.evaluate(ledger);
                    let _ = done_tx.send((evaluator, result));
                }
            })
            .map_err(|e| EngineError::Io(format!("cannot start a thread to evaluate on: {e}")))?;
        // Handed over only once the thread runs, so a failed start keeps the evaluator here.
        let evaluator = std::mem::replace(&mut self.evaluator, Box::new(Lent));
        job_tx
            .send((evaluator, ledger))
            .expect("the evaluation thread waits for its job");
        Ok(Beside { done: done_rx })
    }

    /// The IR of the evaluation `beside` of `phase` (waiting for it if it still runs), the run's
    /// evaluator taken back; as [`evaluate`](Self::evaluate) from there on: parsed, accepted,
    /// and the ephemeral resources it declares ready opened (with `state`).
    pub(super) fn evaluated_beside(
        &mut self,
        beside: Beside,
        state: &StateFile,
        phase: u32,
    ) -> Result<Ir, EngineError> {
        let (evaluator, result) = beside.done.recv().map_err(|_| {
            EngineError::Io("the evaluation beside the running operations ended without a result (its thread failed); run `nivis apply` again".into())
        })?;
        self.evaluator = evaluator;
        let (bytes, took) = result?;
        self.nix_time += took;
        let ir = parse_releasing(bytes)?;
        let ir = self.accept_evaluated(ir, took, phase)?;
        self.with_ephemerals_open(ir, state, phase)
    }

    /// What every evaluation's IR goes through once parsed: the providers to keep, the
    /// references Nix resolved restored, the variables checked, and the `evaluated` event.
    pub(super) fn accept_evaluated(
        &mut self,
        mut ir: Ir,
        took: Duration,
        phase: u32,
    ) -> Result<Ir, EngineError> {
        self.providers.settle_prestarted(&ir.providers);
        // References Nix resolved are resolved here again, from what this phase plans or
        // records (see `ir::restore`).
        ir.restore_references();
        if !self.vars_settled {
            self.vars_settled = true;
            for values in self.variable_values() {
                self.opts.redactor.settle_variables(&values, &|name| {
                    ir.variables.get(name).is_some_and(|d| d.sensitive)
                });
            }
        }
        self.check_variable_names(&ir.variables)?;
        self.refuse_secret_addresses(&ir)?;
        refuse_without_ledger(&ir)?;
        self.conditions.clone_from(&ir.conditions);
        self.last_evaluation = took;
        self.sink.event(Event::Evaluated {
            phase,
            duration: took,
            resources: ir.resources.len(),
            data: ir.data.len(),
        });
        Ok(ir)
    }

    /// A review: every sensitive variable the plan declares and nobody gave gets a placeholder
    /// of its type, and a warning names them (see `Options::placeholder_variables`).
    fn fill_placeholders(&mut self, ledger: &Ledger) {
        let Some(declared) = self.evaluator.sensitive_declarations(ledger) else {
            return;
        };
        let mut filled = Vec::new();
        for (name, ty) in declared {
            if self.opts.vars.contains_key(&name) || self.opts.var_text.contains_key(&name) {
                continue;
            }
            self.opts.vars.insert(name.clone(), placeholder(&ty));
            filled.push(name);
        }
        // Once per process (`diff` evaluates two revisions).
        static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !filled.is_empty() && !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
            self.sink.event(Event::Warning(Diagnostic::warning(format!(
                "the sensitive variables {} have no value here, and no secret source was read: \
                 placeholders stand in for them (a review needs no secret; values computed \
                 from them are not the real ones)",
                filled.join(", ")
            ))));
        }
    }

    /// Before the first evaluation sees the given values (and may fail quoting one), learns
    /// which variables are sensitive from the declarations alone, so that only their values
    /// are masked; when the plan cannot say, masks every value until the first IR says.
    fn settle_variables_before(&mut self, ledger: &Ledger) {
        let values = self.variable_values();
        if values.iter().all(BTreeMap::is_empty) {
            self.vars_settled = true;
            return;
        }
        match self.evaluator.sensitive_variables(ledger) {
            Some(sensitive) => {
                self.vars_settled = true;
                for values in &values {
                    self.opts
                        .redactor
                        .settle_variables(values, &|name| sensitive.contains(name));
                }
            }
            None => values
                .iter()
                .for_each(|v| self.opts.redactor.remember_variables_provisionally(v)),
        }
    }

    /// A `--var` the plan does not declare is an error, before anything is planned or
    /// applied; a value from a `--var-file` or the environment the plan does not declare is a
    /// warning (when the plan declares variables at all).
    pub(super) fn check_variable_names(
        &mut self,
        variables: &BTreeMap<String, VariableDecl>,
    ) -> Result<(), EngineError> {
        let declared = || match variables.len() {
            0 => "it declares none".to_string(),
            _ => format!(
                "declared: {}",
                variables.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        };
        // A value from a secret store must never be recorded in plain text (a saved plan
        // keeps non-sensitive variables' values).
        if let Some(name) = (self.opts.secret_vars.iter())
            .find(|name| !variables.get(*name).is_some_and(|d| d.sensitive))
        {
            return Err(EngineError::Diagnostics(
                Diagnostic::error(format!(
                    "variable {name} is read from a secret store (secretSources.{name}), but                      the plan {}: declare it in the plan's `variables` with sensitive = true",
                    if variables.contains_key(name) {
                        "does not declare it sensitive"
                    } else {
                        "declares no such variable"
                    }
                ))
                .into(),
            ));
        }
        let undeclared: Vec<&String> = (self.opts.flag_vars.iter())
            .filter(|name| !variables.contains_key(*name))
            .collect();
        if let Some(name) = undeclared.first() {
            return Err(EngineError::Diagnostics(
                Diagnostic::error(format!(
                    "--var {name}: the plan declares no such variable ({}); check the \
                     spelling, or declare it in the plan's `variables`",
                    declared()
                ))
                .into(),
            ));
        }
        // Once per process (every phase evaluates again).
        static ARGV_WARNED: std::sync::atomic::AtomicBool =
            std::sync::atomic::AtomicBool::new(false);
        let in_argv: Vec<&String> = (self.opts.flag_vars.iter())
            .filter(|name| variables.get(*name).is_some_and(|d| d.sensitive))
            .collect();
        if !in_argv.is_empty() && !ARGV_WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            for name in in_argv {
                self.sink.event(Event::Warning(Diagnostic::warning(format!(
                    "--var {name}: the variable is sensitive, and a command's arguments can be \
                     read by every local user while it runs (ps, /proc/PID/cmdline); pass it \
                     as NIVIS_VAR_{name}=VALUE in the environment, in a --var-file only you \
                     can read, or from nivis.secretSources"
                ))));
            }
        }
        for name in self.opts.vars.keys() {
            if !variables.is_empty() && !variables.contains_key(name) {
                self.sink.event(Event::Warning(Diagnostic::warning(format!(
                    "variable {name} (from --var-file or NIVIS_VAR_{name}): the plan declares \
                     no such variable ({})",
                    declared()
                ))));
            }
        }
        Ok(())
    }

    /// Evaluates the plan once (phase 0, ledger from state) and returns its IR; for commands
    /// that only need the declarations (`providers lock|mirror|list`).
    pub(crate) fn declarations(&mut self) -> Result<Ir, EngineError> {
        self.open_ephemerals = false;
        let holder = self.open_copy()?;
        self.evaluate(holder.state(), 0)
    }

    /// Evaluates the plan once against no recorded outputs (`nivis graph`): every reference
    /// between resources is still one, where after an apply the ledger would resolve it to a
    /// value and the IR would have no edge left to show. The state is not read.
    pub(crate) fn declarations_unapplied(&mut self) -> Result<Ir, EngineError> {
        self.open_ephemerals = false;
        self.evaluate(&StateFile::empty(), 0)
    }

    /// Evaluates the plan once with the ledger built from `state` (read by the caller, so
    /// several plans can be evaluated against the very same outputs: `nivis diff`).
    pub(crate) fn declarations_from(&mut self, state: &StateFile) -> Result<Ir, EngineError> {
        state.teach_secrets(&self.opts.redactor);
        self.evaluate(state, 0)
    }
}

/// The IR of `bytes`, whose memory (and the parse's) goes back to the system once parsed.
pub(super) fn parse_releasing(bytes: Vec<u8>) -> Result<Ir, EngineError> {
    let parsed = ir::parse(&bytes);
    drop(bytes);
    release_freed_memory();
    parsed.map_err(EngineError::Ir)
}

/// Hands the heap pages freed since the last call back to the system. Building and writing a
/// ledger, and parsing an IR, allocate much that is freed at once; glibc keeps freed memory for
/// reuse, so without this nivis stays at that peak while the providers and the next Nix
/// evaluation run beside it.
pub(super) fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns the allocator's own free pages; it touches no live
    // allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Makes every allocation of 1 MiB or more a mapping of its own, for the rest of the process.
/// glibc otherwise raises that threshold to the largest buffer freed so far (up to 32 MiB): once
/// the state's or an IR's bytes are freed, the next IR read from Nix grows inside the heap,
/// copied at each doubling, and what it leaves there stays resident beside the next Nix
/// evaluation (at 100k resources, 23 MB of an apply's second evaluation; DESIGN §84). Mapped,
/// a buffer grows in place and goes back to the system when freed.
fn map_large_buffers_apart() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; it touches no allocation.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// A plan whose `toIR` got no ledger (`withoutLedger`) and computes a value in Nix from
/// another node's outputs can never finish: Nix never sees the outputs, so the value stays
/// unknown after the nodes it reads are applied. Refused before any provider is called.
fn refuse_without_ledger(ir: &Ir) -> Result<(), EngineError> {
    if !ir.without_ledger {
        return Ok(());
    }
    let nodes = (ir.resources.iter().chain(&ir.data)).map(|n| (n.id.as_str(), &n.config));
    let ephemeral = ir.ephemeral.iter().map(|n| (n.id.as_str(), &n.config));
    let providers = ir.providers.iter().map(|(id, p)| (id.as_str(), &p.config));
    let consumers = ir.consumers.iter().map(|c| (c.id.as_str(), &c.value));
    let Some((id, _)) = (nodes.chain(ephemeral).chain(providers).chain(consumers))
        .find(|(_, tree)| tree.needs_nix())
    else {
        return Ok(());
    };
    Err(EngineError::Diagnostics(
        Diagnostic::error(format!(
            "the plan's toIR was called without the outputs ledger, but {id} has a value Nix \
             computes from another resource's outputs, which Nix can only see through the \
             ledger: add `inherit ledger;` to the toIR call (`lib.toIR {{ ...; inherit ledger; \
             }}`, where `ledger` is the plan function's argument). Nothing was applied"
        ))
        .into(),
    ))
}
