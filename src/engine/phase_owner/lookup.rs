//! How the phase's owner sees other resources at a node's turn: a referenced object (planned
//! or recorded), a configuration resolved against them, `lifecycle.replaceTriggeredBy`, and a
//! data source's read made earlier for the phase.

use std::collections::{BTreeSet, HashMap};

use super::PhaseOwner;
use crate::engine::node::{EarlierRead, PlannedObject};
use crate::engine::resolve::{resolve, Lookup, Resolved};
use crate::engine::triggers;
use crate::ir::Node;

/// What the resources of a phase that had their turn are seen as by the resources after them,
/// growing together as each turn ends.
#[derive(Default)]
pub(super) struct SoFar {
    /// Plan mode: what those planned are planned to become.
    pub(super) planned: HashMap<String, PlannedObject>,
    /// Plan mode: managed resources whose plan is a no-op, so their recorded values are what
    /// dependents will see.
    pub(super) unchanged: BTreeSet<String>,
    /// Resources whose refresh found them changed outside Nivis in this phase.
    pub(super) drifted: BTreeSet<String>,
}

impl PhaseOwner<'_, '_> {
    /// `node`'s configuration with its references resolved: in plan mode, what changes in this
    /// phase is seen as planned; otherwise as recorded.
    pub(super) fn resolve_config(&self, node: &Node) -> Resolved {
        resolve(
            &node.config,
            &|rid| self.lookup(rid),
            &self.host.opts().redactor,
        )
    }

    /// Resource `rid` as the phase sees it: in plan mode, what changes in this phase is seen
    /// as planned; otherwise as recorded.
    pub(super) fn lookup(&self, rid: &str) -> Lookup<'_> {
        if !self.mode.applies()
            && self.running.contains(rid)
            && !self.so_far.unchanged.contains(rid)
        {
            return match self.so_far.planned.get(rid) {
                Some(p) => Lookup::Planned(&p.value, &p.sensitive),
                None => Lookup::Pending,
            };
        }
        match self.holder.state().get(rid) {
            Some(rs) => Lookup::Settled(&rs.attributes, &rs.sensitive_paths),
            None => Lookup::Pending,
        }
    }

    /// `node`'s `lifecycle.replaceTriggeredBy` at its turn (DESIGN §103).
    pub(super) fn replace_triggers(&self, id: &str, node: &Node) -> triggers::Triggers {
        if node.lifecycle.replace_triggered_by.is_empty() {
            return triggers::Triggers::default();
        }
        triggers::check(
            &node.lifecycle.replace_triggered_by,
            self.holder.state().get(id),
            !self.mode.applies(),
            &self.acted,
            &|rid| self.lookup(rid),
        )
    }

    /// The read of data source `id` made earlier for this phase: by its plan (apply mode), or
    /// by the saved plan being applied (its phase 1's plan).
    pub(super) fn earlier_read(&self, id: &str) -> Option<EarlierRead> {
        if let Some(read) = self.previewed.reads.get(id) {
            return Some(EarlierRead::Here(Box::new(read.clone())));
        }
        let saved = self
            .host
            .opts()
            .saved
            .as_ref()
            .filter(|_| self.phase == 1)?;
        if self.mode.applies() {
            return None;
        }
        let record = saved.data_reads.iter().find(|r| r.id == id)?;
        Some(EarlierRead::Saved(record.clone()))
    }
}
