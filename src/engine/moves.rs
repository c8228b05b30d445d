//! Moves declared in the IR (`moved[]`): the state records renamed before planning, no
//! provider called.
//!
//! Owns: turning the IR's moves and the current records into state changes, committing them,
//! and reporting each as [`Event::Moved`]; and the hint that an undeclared rename is about to
//! destroy and re-create an object. Not: the rule that picks the renames
//! (`plan::resolve_moves`), nor the record surgery (`StateFile::rename`).

use std::collections::BTreeSet;

use super::error::EngineError;
use super::events::{Event, Sink};
use super::record::Destination;
use super::Engine;
use crate::diag::Diagnostic;
use crate::ir::{Ir, Node, Tree};
use crate::plan::{self, Rename};
use crate::state::{Change, StateFile};

impl Engine<'_> {
    /// The renames the IR's moves make on `state`; an error names both ends of each move that
    /// cannot be made, and nothing is changed.
    pub(super) fn resolve_moves(
        &self,
        ir: &Ir,
        state: &StateFile,
    ) -> Result<Vec<Rename>, EngineError> {
        if ir.moved.is_empty() {
            return Ok(Vec::new());
        }
        let pairs: Vec<(String, String)> = ir
            .moved
            .iter()
            .map(|m| (m.from.clone(), m.to.clone()))
            .collect();
        let recorded: BTreeSet<String> = state.ids().map(str::to_string).collect();
        plan::resolve_moves(&pairs, &recorded).map_err(|errors| {
            let lines: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            EngineError::Refused(format!(
                "moved: {}; nothing was changed",
                lines.join("\n  ")
            ))
        })
    }

    /// Renames the records in `to` (one commit, journaled like any state change) and reports
    /// each move, as recorded or as planned (`to` says which). A record moved to a resource of
    /// another configuration of its provider (an alias, `ir` says which) is that one's now.
    pub(super) fn commit_moves(
        &mut self,
        renames: &[Rename],
        ir: &Ir,
        mut to: Destination<'_>,
        phase: u32,
    ) -> Result<(), EngineError> {
        let mut changes = Vec::new();
        let mut after = to.state().clone();
        for r in renames {
            let mut step = after.rename(&r.from, &r.to);
            if let Some(node) = ir.resources.iter().find(|n| n.id == r.to) {
                for c in &mut step {
                    match c {
                        Change::Put(moved) if moved.id == r.to => {
                            moved.provider.clone_from(&node.provider);
                        }
                        _ => {}
                    }
                }
            }
            for c in &step {
                after.apply(c);
            }
            changes.extend(step);
        }
        to.commit(&changes)?;
        let recorded = to.recorded();
        for r in renames {
            let type_name = to
                .state()
                .get(&r.to)
                .map(|s| s.type_name.clone())
                .unwrap_or_default();
            self.sink.event(Event::Moved {
                phase,
                from: r.from.clone(),
                to: r.to.clone(),
                type_name,
                recorded,
            });
        }
        Ok(())
    }

    /// Warns about each orphan that looks renamed: one new resource of the same provider and
    /// type, not in state, whose every plain top-level config value equals the orphan's
    /// recorded attribute. The plan destroys and re-creates it; the warning says how not to.
    pub(super) fn hint_renames(&mut self, ir: &Ir, state: &StateFile, orphans: &[String]) {
        let new: Vec<&Node> = ir
            .resources
            .iter()
            .filter(|n| !state.contains(&n.id))
            .collect();
        let looks_like = |r: &crate::state::ResourceState, n: &Node| {
            n.provider == r.provider
                && n.type_name == r.type_name
                && matches!(&n.config, Tree::Object(m) if m.iter().all(|(k, v)| {
                    !is_plain(v) || r.attributes.get(k) == Some(&v.to_json())
                }))
        };
        let candidates: Vec<(&str, &str)> = orphans
            .iter()
            .filter_map(|id| state.get(id).filter(|r| r.is_managed()))
            .filter_map(|r| {
                let mut matches = new.iter().filter(|n| looks_like(r, n));
                match (matches.next(), matches.next()) {
                    (Some(n), None) => Some((r.id.as_str(), n.id.as_str())),
                    _ => None,
                }
            })
            .collect();
        for (from, to) in &candidates {
            if candidates.iter().filter(|(_, t)| t == to).count() > 1 {
                continue; // two orphans match one new resource: no guess
            }
            let warning = Diagnostic::warning(format!(
                "{from} (destroy) and {to} (create) look like a rename: the plan destroys the object and creates a new one"
            ))
            .with_detail(format!(
                "To keep the object under its new address, declare the move in the plan: \
                 toIR {{ ...; moved = [ (lib.moved {{ from = \"{from}\"; to = \"{to}\"; }}) ]; }} \
                 (or, once: nivis state mv {from} {to})"
            ));
            self.sink.event(Event::Warning(warning));
        }
    }
}

/// Whether a config value is known now (no reference, derived value, build output or secret).
fn is_plain(t: &Tree) -> bool {
    match t {
        Tree::List(items) => items.iter().all(is_plain),
        Tree::Object(map) => map.values().all(is_plain),
        Tree::Ref(_)
        | Tree::SensitiveRef(_)
        | Tree::Derived(_)
        | Tree::Build(_)
        | Tree::Sensitive(_)
        | Tree::Ephemeral(_) => false,
        _ => true,
    }
}
