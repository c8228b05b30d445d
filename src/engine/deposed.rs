//! The old objects of create-before-destroy replacements that other resources read: deleted at
//! the end of the phase, after every reader had its turn, dependents' old objects before their
//! dependencies' (Terraform's order: create B', create A', destroy A, destroy B).
//!
//! Owns only that ordering and its bookkeeping; deleting a deposed object is `node`'s, and a
//! deletion that fails leaves the object deposed in state for the next apply (see DESIGN §18).

use std::collections::HashMap;
use std::sync::Arc;

use super::events::Sink;
use super::node::{self, DeposedGone};
use super::{EngineError, Event};
use crate::diag::Diagnostics;
use crate::provider::Provider;
use crate::sched::Status;
use crate::state::{LockedStore, Mutation};

/// An old object kept in this phase: whose it is, the provider that deletes it, and whether
/// every resource of the phase that reads it succeeded.
pub(super) struct OldObject {
    pub(super) id: String,
    pub(super) provider: Arc<dyn Provider>,
    pub(super) readers_done: bool,
}

/// The old objects kept in this phase (`kept`: ids, in the order they were replaced), each
/// with its provider (`provider_of` its job) and whether every job that reads it (`deps`)
/// ended `Done` (`statuses`).
pub(super) fn with_readers(
    kept: Vec<String>,
    job_of: &HashMap<String, usize>,
    deps: &[Vec<usize>],
    statuses: &[Status],
    provider_of: impl Fn(usize) -> Arc<dyn Provider>,
) -> Vec<OldObject> {
    let old_object = |id: String| {
        let at = *job_of.get(&id)?;
        let readers_done = (deps.iter().zip(statuses))
            .filter(|(d, _)| d.contains(&at))
            .all(|(_, s)| *s == Status::Done);
        let provider = provider_of(at);
        Some(OldObject {
            id,
            provider,
            readers_done,
        })
    };
    kept.into_iter().filter_map(old_object).collect()
}

/// Deletes the old objects kept in this phase (`kept`, in the order they were replaced), last
/// replaced first, each once its readers succeeded (else it stays deposed, as its old reader
/// may still use it). Returns how many deletions failed.
pub(super) fn delete_old_objects(
    kept: Vec<OldObject>,
    holder: &mut dyn LockedStore,
    sink: &mut dyn Sink,
    phase: u32,
    mutation: Mutation,
) -> Result<usize, EngineError> {
    let mut failed = 0;
    for old in kept.iter().rev() {
        let Some(record) = holder.state().get(&old.id).cloned() else {
            continue;
        };
        if !old.readers_done || record.deposed.is_empty() {
            continue;
        }
        let gone = std::cell::RefCell::new(Vec::new());
        let mut diags = Diagnostics::new();
        let collect = |g: DeposedGone| gone.borrow_mut().push(g);
        let result = node::destroy_deposed(
            old.provider.as_ref(),
            &record,
            &collect,
            &mut diags,
            mutation,
        );
        for g in gone.into_inner() {
            let (event, change) = g.into_event_and_change(phase);
            holder.commit(&[change], mutation)?;
            sink.event(event);
        }
        if result.is_err() {
            failed += 1;
            sink.event(Event::Failed {
                phase,
                id: old.id.clone(),
                diagnostics: diags.for_resource(&old.id).errors().cloned().collect(),
            });
        }
    }
    Ok(failed)
}
