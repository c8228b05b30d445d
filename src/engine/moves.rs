//! Moves declared in the IR (`moved[]`): the state records renamed before planning, no
//! provider called.
//!
//! Owns: turning the IR's moves and the current records into state changes, committing them,
//! and reporting each as [`Event::Moved`]. Not: the rule that picks the renames
//! (`plan::resolve_moves`), nor the record surgery (`StateFile::rename`).

#[allow(unused_imports)]
use super::*;
use crate::plan::{self, Rename};

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

    /// Renames the records in `store` (one commit, journaled like any state change) and reports
    /// each move, as planned or as `recorded`.
    pub(super) fn commit_moves(
        &mut self,
        renames: &[Rename],
        store: &mut dyn LockedStore,
        phase: u32,
        recorded: bool,
    ) -> Result<(), EngineError> {
        let mut changes = Vec::new();
        let mut after = store.state().clone();
        for r in renames {
            let step = after.rename(&r.from, &r.to);
            for c in &step {
                after.apply(c);
            }
            changes.extend(step);
        }
        store.commit(&changes)?;
        for r in renames {
            let type_name = store
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
}
