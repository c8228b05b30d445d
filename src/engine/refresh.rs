//! `refresh`: reconcile recorded objects with the real ones (ReadResource) and report drift;
//! and `plan --refresh-only`, which reports the same drift and changes nothing.
//!
//! The stages: [`refresh_set`] (which records are read) and [`read_drift`] (the reads, the
//! drift reported, the changes that would record them, returned and not written). The
//! `Engine` methods are the frames: evaluating, starting providers, asking, committing.
//! Not: reading one object (`node::refresh`).

use std::collections::HashMap;
use std::sync::Arc;

use super::error::EngineError;
use super::events::{Event, Sink};
use super::{node, Confirm, Engine, Report};
use crate::ir::Ir;
use crate::provider::{Capabilities, Provider};
use crate::secrets::Redactor;
use crate::state::{Change, LockedStore, StateFile};

impl Engine<'_> {
    /// `nivis refresh`: reads every recorded object, reports drift, and (once `confirm`, if
    /// given, agrees) records what was read. Nothing is asked, or written, when nothing drifted.
    pub(crate) fn refresh(&mut self, confirm: Confirm<'_>) -> Result<Report, EngineError> {
        self.mutating(confirm, |engine, holder, confirm, mutation| {
            let read = engine.read_recorded(&*holder)?;
            if read.failed > 0 {
                return Err(EngineError::OperationsFailed(read.failed));
            }
            if read.drifted > 0 {
                if let Some(ask) = confirm {
                    if !ask() {
                        return Err(EngineError::Declined);
                    }
                }
            }
            // Without drift the changes only bring records up to date (schema upgrades,
            // private data): nothing to ask about.
            holder.commit(&read.changes, mutation)?;
            Ok(read_report())
        })
    }

    /// `nivis plan --refresh-only`: the drift `refresh` would record, with nothing written.
    pub(crate) fn plan_refresh_only(&mut self) -> Result<Report, EngineError> {
        self.reporting(|engine| {
            let holder = engine.open_copy()?;
            let read = engine.read_recorded(&holder)?;
            if read.failed > 0 {
                return Err(EngineError::PlanFailed(read.failed));
            }
            Ok(read_report())
        })
    }

    /// `refresh`'s read: the plan evaluated, the set chosen ([`refresh_set`]), its providers
    /// started and configured, and [`read_drift`] run with them.
    fn read_recorded(&mut self, holder: &dyn LockedStore) -> Result<ObjectsRead, EngineError> {
        let ir = self.evaluate(holder.state(), 0)?;
        let ids = refresh_set(&ir, holder.state(), &self.opts.targets);
        self.prepare_providers(&ir, holder.state(), &ids, true)?;
        let state = holder.state();
        let pids = ids
            .iter()
            .map(|id| state.get(id).expect("in state").provider.as_str());
        let providers = self.running(&ir, pids)?;
        let input = DriftInput {
            state,
            ids: &ids,
            providers: &providers,
            redactor: &self.opts.redactor,
        };
        Ok(read_drift(input, &mut self.sink))
    }
}

/// What `refresh` reads: every managed record in `state`, or only the `targets`, whose
/// provider can read (a provider without schemas has nothing to refresh from).
pub(super) fn refresh_set(ir: &Ir, state: &StateFile, targets: &[String]) -> Vec<String> {
    state
        .iter()
        .filter(|r| {
            r.is_managed()
                && (targets.is_empty() || targets.contains(&r.id))
                && ir
                    .providers
                    .get(&r.provider)
                    .is_none_or(|d| Capabilities::of(&d.kind).schemas)
        })
        .map(|r| r.id.clone())
        .collect()
}

/// What reading recorded objects runs with.
pub(super) struct DriftInput<'a> {
    /// The records read.
    pub(super) state: &'a StateFile,
    /// The resources to read, all in `state`.
    pub(super) ids: &'a [String],
    /// The running, configured providers of their records, by IR provider id.
    pub(super) providers: &'a HashMap<String, Arc<dyn Provider>>,
    /// The run's redactor, taught the sensitive values read.
    pub(super) redactor: &'a Redactor,
}

/// Reads each of `input.ids` through its provider (ReadResource, after the stored object's
/// upgrade) and sends a `drift` event for each that differs from its record or is gone, and
/// a `failed` event for each read that fails. Changes nothing: the result holds the state
/// changes that would record what was read.
pub(super) fn read_drift(input: DriftInput<'_>, sink: &mut dyn Sink) -> ObjectsRead {
    let mut read = ObjectsRead::default();
    for id in input.ids {
        let r = input.state.get(id).expect("in state");
        let provider = &input.providers[&r.provider];
        match node::refresh(provider.as_ref(), r, input.redactor) {
            Ok((change, drift)) => {
                if let Some((attrs, gone)) = drift {
                    read.drifted += 1;
                    sink.event(Event::Drift {
                        id: id.clone(),
                        changes: attrs,
                        gone,
                    });
                }
                read.changes.extend(change);
            }
            Err(d) => {
                read.failed += 1;
                sink.event(Event::Failed {
                    phase: 0,
                    id: id.clone(),
                    diagnostics: d.for_resource(id).0,
                });
            }
        }
    }
    read
}

/// What reading the recorded objects found.
#[derive(Default)]
pub(super) struct ObjectsRead {
    /// The state changes that record what was read.
    pub(super) changes: Vec<Change>,
    /// Objects that differ from their records (or are gone).
    pub(super) drifted: usize,
    /// Reads that failed.
    pub(super) failed: usize,
}

/// What `refresh` and `plan --refresh-only` report: one evaluation.
fn read_report() -> Report {
    Report {
        evaluations: 1,
        ..Report::default()
    }
}
