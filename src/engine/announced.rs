//! Plans whose resource *set* depends on apply-time outputs: a plan function that reads the
//! ledger to decide which resources exist may declare more once the first objects exist. The
//! plan says so (a probe: a second evaluation of the plan function, folded into the plan's own
//! evaluation where the evaluator can, see `nixeval::evaluate_probing`), and an apply that
//! asked for confirmation stops before creating anything its plan did not announce.
//!
//! Owns the probe and the check; not the phase loop (`phases`), nor the wording of the plan.

use std::collections::BTreeSet;

use serde_json::Value as Json;

use super::error::EngineError;
use super::events::{Event, Sink};
use super::Engine;
use crate::diag::Diagnostic;
use crate::ir::Ir;
use crate::state::StateFile;

/// What the plan says when the probe finds the resource set depends on the ledger.
pub(super) const MAY_ADD: &str =
    "resources may be added in a later phase: the plan function reads the ledger to decide which resources exist";

impl Engine<'_> {
    /// Evaluates as `evaluate` does, with the probe folded into the evaluation when the
    /// evaluator can (its verdict is what [`announce_open_set`](Self::announce_open_set) then
    /// says, without an evaluation of its own).
    pub(super) fn evaluate_probing(
        &mut self,
        state: &StateFile,
        phase: u32,
    ) -> Result<Ir, EngineError> {
        self.probe_next = true;
        let ir = self.evaluate(state, phase);
        self.probe_next = false;
        ir
    }

    /// Whether the plan function decides which resources exist from the ledger: evaluated
    /// again with an (empty) output entry for every declared node not recorded yet, it
    /// declares another set of nodes, or fails. Without such nodes there is nothing to probe.
    pub(super) fn resource_set_reads_ledger(&mut self, ir: &Ir, state: &StateFile) -> bool {
        let missing: Vec<&str> = ir
            .nodes()
            .map(|n| n.id.as_str())
            .filter(|id| !state.contains(id))
            .collect();
        if missing.is_empty() {
            return false;
        }
        let mut ledger = self.ledger_from(state, 1);
        for id in missing {
            ledger.set(id, &Json::Object(serde_json::Map::new()), &[]);
        }
        let Ok((bytes, took)) = self.evaluator.evaluate(ledger) else {
            return true;
        };
        self.nix_time += took;
        let ids = |ir: &Ir| ir.nodes().map(|n| n.id.clone()).collect::<BTreeSet<_>>();
        match super::evaluate::parse_releasing(bytes) {
            Ok(probe) => ids(&probe) != ids(ir),
            Err(_) => true,
        }
    }

    /// Warns, as part of the plan, when the resource set depends on the ledger.
    /// `ir` and `state` must be those of the latest evaluation, whose probe verdict is used
    /// when it ran in it.
    pub(super) fn announce_open_set(&mut self, ir: &Ir, state: &StateFile) -> bool {
        let open = match self.probed.take() {
            Some(open) => open,
            None => self.resource_set_reads_ledger(ir, state),
        };
        if open {
            self.sink
                .event(Event::Warning(Diagnostic::warning(MAY_ADD).with_detail(
                    "Nix declares them once the outputs they depend on exist. `nivis apply` stops \
                 before creating a resource this plan did not show (unless --auto-approve); \
                 a saved plan (`plan --out`) refuses them.",
                )));
        }
        open
    }
}

/// The resources an apply's plan showed (declared in its first evaluation, or recorded): an
/// apply that asked for confirmation creates nothing else.
pub(super) struct Announced(BTreeSet<String>);

impl Announced {
    pub(super) fn new(ir: &Ir, state: &StateFile) -> Announced {
        let declared = ir.nodes().map(|n| n.id.clone());
        Announced(declared.chain(state.iter().map(|r| r.id.clone())).collect())
    }

    /// Refuses an evaluation that declares managed resources the plan did not show.
    pub(super) fn check(&self, ir: &Ir, state: &StateFile) -> Result<(), EngineError> {
        let new: Vec<&str> = ir
            .resources
            .iter()
            .map(|n| n.id.as_str())
            .filter(|id| !self.0.contains(*id) && !state.contains(id))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        Err(EngineError::Refused(format!(
            "stopped before creating {}: the plan you confirmed did not show {} ({MAY_ADD}). \
             What it showed is applied and recorded; run `nivis apply` again to review the \
             rest, or pass --auto-approve to apply such plans without stopping",
            new.join(", "),
            if new.len() == 1 { "it" } else { "them" },
        )))
    }
}
