//! The old objects of create-before-destroy replacements that other resources read: deleted at
//! the end of the phase, after every reader had its turn, dependents' old objects before their
//! dependencies' (Terraform's order: create B', create A', destroy A, destroy B).
//!
//! Owns only that ordering and its bookkeeping; deleting a deposed object is `node`'s, and a
//! deletion that fails leaves the object deposed in state for the next apply (see DESIGN §18).

use super::node::{self, DeposedGone, Mode};
use super::phase_owner::PhaseOwner;
use super::{EngineError, Event};
use crate::diag::Diagnostics;
use crate::sched::Status;

/// Deletes the old objects kept in this phase (`owner.old_objects`), last replaced first,
/// each once every resource of the phase that reads it succeeded (else it stays deposed, as
/// its old reader may still use it). Returns how many deletions failed.
pub(super) fn delete_old_objects(
    owner: &mut PhaseOwner<'_, '_>,
    statuses: &[Status],
) -> Result<usize, EngineError> {
    // Old objects are kept only while applying: a plan has none to delete.
    let Mode::Apply(mutation) = owner.mode else {
        return Ok(0);
    };
    let mut failed = 0;
    let kept = std::mem::take(&mut owner.old_objects);
    for id in kept.iter().rev() {
        let Some(&at) = owner.job_of.get(id) else {
            continue;
        };
        let readers_done = (owner.deps)
            .iter()
            .zip(statuses)
            .filter(|(d, _)| d.contains(&at))
            .all(|(_, s)| *s == Status::Done);
        let Some(record) = owner.holder.state().get(id).cloned() else {
            continue;
        };
        if !readers_done || record.deposed.is_empty() {
            continue;
        }
        let provider = &owner.providers[&owner.node(at).provider];
        let gone = std::cell::RefCell::new(Vec::new());
        let mut diags = Diagnostics::new();
        let collect = |g: DeposedGone| gone.borrow_mut().push(g);
        let result =
            node::destroy_deposed(provider.as_ref(), &record, &collect, &mut diags, mutation);
        for g in gone.into_inner() {
            let (event, change) = g.into_event_and_change(owner.phase);
            owner.holder.commit(&[change], mutation)?;
            owner.host.sink().event(event);
        }
        if result.is_err() {
            failed += 1;
            owner.host.sink().event(Event::Failed {
                phase: owner.phase,
                id: id.clone(),
                diagnostics: diags.for_resource(id).errors().cloned().collect(),
            });
        }
    }
    Ok(failed)
}
