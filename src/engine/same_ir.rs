//! The apply loop's evaluations, and the one after a phase that settled everything: when Nix
//! prints the very bytes of the IR that phase ran, the loop stops where that IR's analysis
//! would stop it (nothing to run, nothing waiting), without parsing or analysing it again
//! (DESIGN §83).
//!
//! Owns: the IR's digest, the rule that decides whether a phase's IR may be recognised in the
//! next evaluation ([`Recognised::after_phase`]), what is kept of it meanwhile (a summary: the
//! IR itself is gone before Nix runs), and the evaluation that compares. Not: the phase loop
//! (`phases`), the analysis (`analysis`).

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use super::analysis::{orphans, Analysis};
use super::error::EngineError;
use super::evaluate::parse_releasing;
use super::events::{Event, Sink};
use super::phases::{stop_after_evaluation, Stop};
use super::Engine;
use crate::ir::{Ir, ProviderDecl, VariableDecl};
use crate::state::StateFile;

/// The SHA-256 of the bytes Nix printed for an IR.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct IrDigest([u8; 32]);

impl IrDigest {
    fn of(bytes: &[u8]) -> IrDigest {
        IrDigest(Sha256::digest(bytes).into())
    }
}

/// What the apply loop keeps of the IR a phase ran, when that phase settled everything
/// ([`Recognised::after_phase`]): enough to take the next evaluation, if it prints the same
/// bytes, to its stop. Small: no node, no configuration.
pub(super) struct Recognised {
    digest: IrDigest,
    /// Where the loop stops on this IR printed again: the fixpoint, or values of consumers
    /// still unresolved.
    stop: Stop,
    /// The declarations an evaluation checks every time.
    providers: BTreeMap<String, ProviderDecl>,
    variables: BTreeMap<String, VariableDecl>,
    /// The `evaluated` event's counts.
    resources: usize,
    data: usize,
}

impl Recognised {
    /// What to keep of `ir` (parsed from bytes with `digest`, `None` when it was not) after a
    /// phase that ran `analysis` of it and succeeded, leaving `state`; `fingerprinted_all`:
    /// every node the phase ran settled with a fingerprint (`run_nodes`). `None` unless the
    /// analysis of the same IR against `state` would run nothing and defer nothing, and the
    /// fixpoint would destroy nothing:
    /// - nothing was deferred (no wait on Nix, a provider's configuration or a deferred node);
    /// - every node the phase ran settled with a fingerprint: a node left stale, or whose
    ///   references could not be resolved from the state, runs again;
    /// - the IR declares no ephemeral resource (opening them can evaluate again);
    /// - the state records nothing the IR does not declare (no orphan to destroy: the
    ///   fixpoint needs no IR then);
    /// - no confirmed plan announced an open resource set (its check needs the IR's ids).
    ///
    /// The nodes the phase did not run were settled already with the fingerprint they still
    /// have (nothing they reference ran in this phase, else they would have run), and the
    /// state does not change before the next evaluation: every node is settled with its
    /// current fingerprint, so the next analysis finds nothing to run.
    pub(super) fn after_phase(
        ir: &Ir,
        digest: Option<IrDigest>,
        analysis: &Analysis<'_>,
        facts: PhaseFacts<'_>,
    ) -> Option<Recognised> {
        let digest = digest?;
        let settled = facts.fingerprinted_all
            && !facts.announced_open
            && analysis.deferred.is_empty()
            && ir.ephemeral.is_empty()
            && orphans(ir, facts.state).is_empty();
        if !settled {
            return None;
        }
        let stop = stop_after_evaluation(ir, &nothing_to_run(), facts.limit)?;
        Some(Recognised {
            digest,
            stop,
            providers: ir.providers.clone(),
            variables: ir.variables.clone(),
            resources: ir.resources.len(),
            data: ir.data.len(),
        })
    }
}

/// What the phase loop knows after a phase, for [`Recognised::after_phase`].
pub(super) struct PhaseFacts<'a> {
    /// The state the phase left.
    pub(super) state: &'a StateFile,
    /// Every node the phase ran settled with a fingerprint.
    pub(super) fingerprinted_all: bool,
    /// A confirmed plan announced an open resource set.
    pub(super) announced_open: bool,
    /// `--max-phases` is reached.
    pub(super) limit: bool,
}

/// The analysis of an IR whose every node is settled with its current fingerprint and waits on
/// nothing: nothing to run, nothing deferred.
fn nothing_to_run() -> Analysis<'static> {
    Analysis {
        nodes: BTreeMap::new(),
        order: Vec::new(),
        deferred: BTreeMap::new(),
        run: Vec::new(),
        create_before_destroy: BTreeSet::new(),
    }
}

/// One evaluation of the apply loop.
pub(super) enum LoopEvaluation {
    /// A new IR, and the digest of the bytes it was parsed from (`None` when ephemeral
    /// resources opened and the plan was evaluated again: the IR is not those bytes').
    Parsed(Box<Ir>, Option<IrDigest>),
    /// The IR the last phase ran, printed again: where the loop stops.
    Same(Stop),
}

impl Engine<'_> {
    /// An evaluation of the apply loop (`probe`: with the resource-set probe, see
    /// `announced`). When `last` is given and Nix prints the bytes it was taken of, the
    /// evaluation is [`LoopEvaluation::Same`], not parsed.
    pub(super) fn evaluate_in_loop(
        &mut self,
        state: &StateFile,
        phase: u32,
        probe: bool,
        last: Option<Recognised>,
    ) -> Result<LoopEvaluation, EngineError> {
        self.probe_next = probe;
        let evaluated = self.nix_evaluation(state, phase);
        self.probe_next = false;
        let (bytes, took) = evaluated?;
        let digest = IrDigest::of(&bytes);
        if let Some(last) = last.filter(|last| last.digest == digest) {
            drop(bytes);
            log::debug!(
                "phase {phase}'s evaluation printed the IR the last phase ran: not parsed or \
                 analysed again"
            );
            // What every evaluation checks (see `accept_evaluated`); the `withoutLedger`
            // check passed on these very bytes.
            self.providers.settle_prestarted(&last.providers);
            self.check_variable_names(&last.variables)?;
            self.sink.event(Event::Evaluated {
                phase,
                duration: took,
                resources: last.resources,
                data: last.data,
            });
            return Ok(LoopEvaluation::Same(last.stop));
        }
        let ir = parse_releasing(bytes)?;
        let ir = self.accept_evaluated(ir, took, phase)?;
        let digest = ir.ephemeral.is_empty().then_some(digest);
        let ir = self.with_ephemerals_open(ir, state, phase)?;
        Ok(LoopEvaluation::Parsed(Box::new(ir), digest))
    }
}
