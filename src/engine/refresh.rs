//! `refresh`: reconcile recorded objects with the real ones (ReadResource) and report drift.

#[allow(unused_imports)]
use super::*;

impl Engine<'_> {
    /// `nivis refresh`: reconcile state with the real objects and report drift.
    pub fn refresh(&mut self) -> Result<Report, EngineError> {
        let mut holder = self.open_state(true)?;
        let result = self.refresh_inner(&mut *holder, Mutation::granted());
        close_after(holder, result)
    }

    pub(super) fn refresh_inner(
        &mut self,
        holder: &mut dyn LockedStore,
        _mutation: Mutation,
    ) -> Result<Report, EngineError> {
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
        let mut failed = 0;
        let mut changes = Vec::new();
        for id in &ids {
            let r = holder.state().get(id).expect("in state").clone();
            let provider = self
                .providers
                .get(&r.provider, &ir.providers[&r.provider])
                .map_err(EngineError::Diagnostics)?;
            match node::refresh(provider.as_ref(), &r) {
                Ok((change, drift)) => {
                    if let Some((attrs, gone)) = drift {
                        self.sink.event(Event::Drift {
                            id: id.clone(),
                            changes: attrs,
                            gone,
                        });
                    }
                    changes.extend(change);
                }
                Err(d) => {
                    failed += 1;
                    self.sink.event(Event::Failed {
                        phase: 0,
                        id: id.clone(),
                        diagnostics: d.for_resource(id).0,
                    });
                }
            }
        }
        holder.commit(&changes)?;
        if failed > 0 {
            return Err(EngineError::OperationsFailed(failed));
        }
        Ok(Report {
            evaluations: 1,
            nix_time: self.nix_time,
            ..Report::default()
        })
    }
}
