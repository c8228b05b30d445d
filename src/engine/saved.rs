//! Saved plans in the engine: what `plan --out` records (the basis and the plan's events), and
//! what `apply FILE` proves before it changes anything (same state, variables, IR, provider
//! binaries, and a re-plan of phase 1 equal to the saved one) and while it applies (each
//! resource within what the saved plan allows it; see `plan_file::SavedPlan::allowed`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value as Json;

use super::error::EngineError;
use super::plan_file::{self, Basis, DeferredChange, SavedPlan, StateBasis, VariableRecord};
use super::wire::PlanRow;
use super::{node, Engine};
use crate::ir::Ir;
use crate::secrets::Redactor;
use crate::state::{StateFile, StateKey};

impl Engine<'_> {
    /// What the plan is made from: the first evaluation's IR, the state, the variables, and
    /// every provider of a declared resource (started now if phase 1 did not need it).
    pub(super) fn basis(&mut self, first: &Ir, state: &StateFile) -> Result<Basis, EngineError> {
        let everything: Vec<String> = first.nodes().map(|n| n.id.clone()).collect();
        self.prepare_providers(first, state, &everything, false)?;
        Ok(Basis {
            ir_digest: plan_file::ir_digest(&first.to_json()),
            state: StateBasis {
                lineage: lineage_of(state),
                serial: state.serial,
                env: self.state_access.env().to_string(),
            },
            variables: self.variable_records(first, state),
            providers: self.providers.identities(),
            targets: self.opts.targets.clone(),
            replace: self.opts.replace.clone(),
        })
    }

    /// Every variable given to the run; a sensitive one (or one the plan does not declare) as
    /// a digest keyed with the random key only `state` holds (`StateKey::SavedPlan`).
    fn variable_records(&self, ir: &Ir, state: &StateFile) -> BTreeMap<String, VariableRecord> {
        let key = state.key(StateKey::SavedPlan);
        let given = self
            .opts
            .vars
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain(
                self.opts
                    .var_text
                    .iter()
                    .map(|(k, t)| (k.clone(), Json::String(t.clone()))),
            );
        given
            .map(|(name, value)| {
                let sensitive = ir.variables.get(&name).is_none_or(|d| d.sensitive);
                let record = plan_file::variable_record(
                    &value,
                    sensitive,
                    key.as_ref(),
                    &self.opts.redactor,
                );
                (name, record)
            })
            .collect()
    }

    /// Refuses a saved plan made against another state, other variables or another IR, or
    /// one of the other kind (`destroying`: the run destroys; a destroy plan only destroys).
    pub(super) fn check_basis(
        &self,
        saved: &SavedPlan,
        first: &Ir,
        state: &StateFile,
        destroying: bool,
    ) -> Result<(), EngineError> {
        let was = &saved.basis;
        let stale = |why: String| Err(refused(why));
        if saved.destroy != destroying {
            return stale(match saved.destroy {
                true => "it is a destroy plan (`plan --destroy`), which only `nivis apply FILE` carries out".into(),
                false => "it is not a destroy plan: apply it with `nivis apply FILE`".into(),
            });
        }
        let now_lineage = lineage_of(state);
        let both_written = !was.state.lineage.is_empty() && !now_lineage.is_empty();
        if (both_written && was.state.lineage != now_lineage)
            || was.state.env != self.state_access.env()
        {
            return stale(format!(
                "it was made against another state (lineage {:?}, environment {}); this one is lineage {:?}, environment {}",
                was.state.lineage,
                was.state.env,
                now_lineage,
                self.state_access.env()
            ));
        }
        if was.state.serial != state.serial || was.state.lineage != now_lineage {
            return stale(format!(
                "the state changed since it was made (serial {} then, {} now)",
                was.state.serial, state.serial
            ));
        }
        if let Some(name) = was.variables.iter().find_map(|(name, record)| {
            matches!(record, VariableRecord::Hmac(d) if !d.starts_with(plan_file::DIGEST_PREFIX))
                .then_some(name)
        }) {
            return stale(format!(
                "it was made by an earlier Nivis, whose digest of the sensitive variable {name} \
                 could be checked against guesses by anyone able to rebuild this state (issue \
                 47); make the plan again with `nivis plan --out`"
            ));
        }
        let now = self.variable_records(first, state);
        let names: BTreeSet<&String> = was.variables.keys().chain(now.keys()).collect();
        if let Some(name) = names
            .into_iter()
            .find(|n| was.variables.get(*n) != now.get(*n))
        {
            return stale(format!(
                "variable {name} is not what it was when the plan was made"
            ));
        }
        if (&was.targets, &was.replace) != (&self.opts.targets, &self.opts.replace) {
            return stale("--target or --replace differ from the plan's".into());
        }
        let ir_digest = plan_file::ir_digest(&first.to_json());
        if was.ir_digest != ir_digest {
            return stale(format!(
                "the plan's configuration (its IR) changed: {} then, {ir_digest} now",
                was.ir_digest
            ));
        }
        Ok(())
    }

    /// Compares what was just planned again (the events kept since `sink.keep()`) with the
    /// saved plan's phase 1.
    pub(super) fn check_replan(&mut self, saved: &SavedPlan) -> Result<(), EngineError> {
        let (mut changes, mut deferred) = (Vec::new(), Vec::new());
        for row in self.sink.take_kept().iter().filter_map(PlanRow::of) {
            match row {
                PlanRow::Planned(c) => changes.push(c),
                PlanRow::Deferred(d) => deferred.push(DeferredChange::from(d)),
                PlanRow::Moved(..) | PlanRow::Imported(..) => {}
            }
        }
        let redactor = &self.opts.redactor;
        let difference = plan_file::first_difference(&saved.changes, &changes, redactor)
            .or_else(|| plan_file::first_difference(&saved.deferred, &deferred, redactor));
        difference.map_or(Ok(()), |why| Err(refused(why)))
    }

    /// With a saved plan, refuses to remove an object the plan did not show removed.
    pub(super) fn check_removals(&self, ids: &[String]) -> Result<(), EngineError> {
        let Some(saved) = &self.opts.saved else {
            return Ok(());
        };
        for id in ids {
            if !saved.removes(id) {
                return Err(EngineError::StalePlan(format!(
                    "{id} would be removed, which the saved plan does not show"
                )));
            }
        }
        Ok(())
    }
}

/// What a saved plan records of the data sources its phase 1 read, in address order.
pub(super) fn data_read_records(
    reads: &HashMap<String, node::DataRead>,
    redactor: &Redactor,
) -> Vec<plan_file::DataReadRecord> {
    let mut records: Vec<plan_file::DataReadRecord> = reads
        .iter()
        .map(|(id, read)| {
            let config = crate::value::json::to_plain_json(&read.config).unwrap_or(Json::Null);
            plan_file::DataReadRecord::new(id, &config, &read.attributes, read.sensitive, redactor)
        })
        .collect();
    records.sort_by(|a, b| a.id.cmp(&b.id));
    records
}

/// A saved plan refused before anything was changed.
pub(super) fn refused(why: impl std::fmt::Display) -> EngineError {
    EngineError::StalePlan(format!("{why}; nothing was changed"))
}

/// The lineage a plan records: none (`""`) for a state never written yet, whose lineage is
/// made afresh each time it is read.
fn lineage_of(state: &StateFile) -> String {
    if state.serial == 0 && state.is_empty() {
        String::new()
    } else {
        state.lineage.clone()
    }
}
