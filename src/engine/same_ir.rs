//! The apply loop's evaluations, and the one after a phase that settled everything: when Nix
//! prints the very bytes of the IR that phase ran, that IR is the evaluation's, not parsed
//! again, and its analysis is known without running it (nothing to run, nothing waiting):
//! the loop stops at the fixpoint (DESIGN §83).
//!
//! Owns: the IR's digest, the rule that decides whether a phase's IR is kept for the next
//! evaluation ([`settled_everything`]), and the evaluation that compares. Not: the phase
//! loop's stops (`phases`), the analysis (`analysis`).

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use super::analysis::Analysis;
use super::error::EngineError;
use super::evaluate::{parse_releasing, Parsed};
use super::Engine;
use crate::ir::Ir;
use crate::state::StateFile;

/// The SHA-256 of the bytes Nix printed for an IR.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct IrDigest([u8; 32]);

impl IrDigest {
    fn of(bytes: &[u8]) -> IrDigest {
        IrDigest(Sha256::digest(bytes).into())
    }
}

/// The IR an apply phase ran and its digest, kept for the next evaluation because the phase
/// settled everything ([`settled_everything`]).
pub(super) struct RanIr {
    ir: Ir,
    digest: IrDigest,
}

/// One evaluation of the apply loop.
pub(super) struct LoopEvaluation {
    /// Its IR.
    pub(super) ir: Ir,
    /// The digest of the bytes `ir` was parsed from; `None` when `ir` is not those bytes' IR
    /// (ephemeral resources opened and the plan evaluated again).
    pub(super) digest: Option<IrDigest>,
    /// Whether `ir` is the one the last phase ran, printed again: its analysis has nothing
    /// to run and nothing waiting ([`analysis_of_the_same`]).
    pub(super) same: bool,
}

impl LoopEvaluation {
    /// What to keep for the next evaluation once a phase ran this IR; `settled` says whether
    /// the phase settled everything ([`settled_everything`]).
    pub(super) fn keep(self, settled: bool) -> Option<RanIr> {
        match (settled, self.digest) {
            (true, Some(digest)) => Some(RanIr {
                ir: self.ir,
                digest,
            }),
            _ => None,
        }
    }
}

/// Whether, after a phase that ran `analysis` of `ir` and succeeded, the analysis of the same
/// IR against the state the phase left would run nothing and defer nothing:
/// - nothing was deferred (so no wait on Nix, a provider's configuration or a deferred node),
///   and the IR declares no ephemeral resource (opening them can evaluate again);
/// - every node the phase ran settled with a fingerprint (`all_fingerprinted`, from
///   `run_nodes`): a node left stale, or whose references could not be resolved from the
///   state, runs again.
///
/// The nodes the analysis did not run were settled already with the fingerprint they still
/// have (nothing they reference ran in this phase), and the state does not change between the
/// phase and the next evaluation; so every node is settled with its current fingerprint and
/// the next analysis finds nothing to run.
pub(super) fn settled_everything(
    ir: &Ir,
    analysis: &Analysis<'_>,
    all_fingerprinted: bool,
) -> bool {
    all_fingerprinted && analysis.deferred.is_empty() && ir.ephemeral.is_empty()
}

/// The analysis of an IR printed again after a phase that settled everything: nothing to run,
/// nothing deferred (what the full analysis finds, by [`settled_everything`]'s rule). The
/// loop's stop then depends only on the IR's consumers, as for a full analysis.
pub(super) fn analysis_of_the_same(_ir: &Ir) -> Analysis<'_> {
    Analysis {
        nodes: BTreeMap::new(),
        order: Vec::new(),
        deferred: BTreeMap::new(),
        run: Vec::new(),
        create_before_destroy: BTreeSet::new(),
    }
}

impl Engine<'_> {
    /// An evaluation of the apply loop (`probe`: with the resource-set probe, see
    /// `announced`). When `ran` is given and Nix prints the bytes it was parsed from, the
    /// evaluation's IR is `ran`'s, not parsed again.
    pub(super) fn evaluate_in_loop(
        &mut self,
        state: &StateFile,
        phase: u32,
        probe: bool,
        ran: Option<RanIr>,
    ) -> Result<LoopEvaluation, EngineError> {
        self.probe_next = probe;
        let evaluated = self.nix_evaluation(state, phase);
        self.probe_next = false;
        let (bytes, took) = evaluated?;
        let digest = IrDigest::of(&bytes);
        if let Some(ran) = ran {
            if ran.digest == digest {
                drop(bytes);
                log::debug!(
                    "phase {phase}'s evaluation printed the IR the last phase ran: not parsed \
                     or analysed again"
                );
                let ir = self.accept_evaluated(ran.ir, Parsed::Earlier, took, phase)?;
                return Ok(LoopEvaluation {
                    ir,
                    digest: Some(digest),
                    same: true,
                });
            }
        }
        let ir = parse_releasing(bytes)?;
        let ir = self.accept_evaluated(ir, Parsed::Now, took, phase)?;
        let digest = ir.ephemeral.is_empty().then_some(digest);
        let ir = self.with_ephemerals_open(ir, state, phase)?;
        Ok(LoopEvaluation {
            ir,
            digest,
            same: false,
        })
    }
}
