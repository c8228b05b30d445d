//! `refresh`: reconcile recorded objects with the real ones (ReadResource) and report drift;
//! and `plan --refresh-only`, which reports the same drift and changes nothing.

use super::error::EngineError;
use super::events::{Event, Sink};
use super::{node, Confirm, Engine, Report};
use crate::provider::Capabilities;
use crate::state::{Change, LockedStore};

impl Engine<'_> {
    /// `nivis refresh`: reads every recorded object, reports drift, and (once `confirm`, if
    /// given, agrees) records what was read. Nothing is asked, or written, when nothing drifted.
    pub fn refresh(&mut self, confirm: Confirm<'_>) -> Result<Report, EngineError> {
        self.mutating(confirm, |engine, holder, confirm, mutation| {
            let read = engine.read_drift(&*holder)?;
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
    pub fn plan_refresh_only(&mut self) -> Result<Report, EngineError> {
        self.reporting(|engine| {
            let holder = engine.open_copy()?;
            let read = engine.read_drift(&holder)?;
            if read.failed > 0 {
                return Err(EngineError::PlanFailed(read.failed));
            }
            Ok(read_report())
        })
    }

    /// Reads every recorded managed object (or the targets) and sends a `drift` event for each
    /// that differs.
    fn read_drift(&mut self, holder: &dyn LockedStore) -> Result<ObjectsRead, EngineError> {
        let ir = self.evaluate(holder.state(), 0)?;
        let ids: Vec<String> = holder
            .state()
            .iter()
            .filter(|r| {
                r.is_managed()
                    && (self.opts.targets.is_empty() || self.opts.targets.contains(&r.id))
                    // Without schemas there is no read either: nothing to refresh from.
                    && ir
                        .providers
                        .get(&r.provider)
                        .is_none_or(|d| Capabilities::of(&d.kind).schemas)
            })
            .map(|r| r.id.clone())
            .collect();
        self.prepare_providers(&ir, holder.state(), &ids, true)?;
        let mut read = ObjectsRead::default();
        for id in &ids {
            let r = holder.state().get(id).expect("in state").clone();
            let provider = self
                .providers
                .get(&r.provider, &ir.providers[&r.provider])
                .map_err(EngineError::Diagnostics)?;
            match node::refresh(provider.as_ref(), &r) {
                Ok((change, drift)) => {
                    if let Some((attrs, gone)) = drift {
                        read.drifted += 1;
                        self.sink.event(Event::Drift {
                            id: id.clone(),
                            changes: attrs,
                            gone,
                        });
                    }
                    read.changes.extend(change);
                }
                Err(d) => {
                    read.failed += 1;
                    self.sink.event(Event::Failed {
                        phase: 0,
                        id: id.clone(),
                        diagnostics: d.for_resource(id).0,
                    });
                }
            }
        }
        Ok(read)
    }
}

/// What reading the recorded objects found.
#[derive(Default)]
struct ObjectsRead {
    /// The state changes that record what was read.
    changes: Vec<Change>,
    /// Objects that differ from their records (or are gone).
    drifted: usize,
    /// Reads that failed.
    failed: usize,
}

/// What `refresh` and `plan --refresh-only` report: one evaluation.
fn read_report() -> Report {
    Report {
        evaluations: 1,
        ..Report::default()
    }
}
