//! The plan's conditions at the end of a run: the checks (`lib.check`) and postconditions
//! (`lifecycle.postcondition`) of the last IR, as Nix judged them against the outputs it was
//! given (for an apply, the fixpoint's: the final outputs).
//!
//! Owns: reporting each condition ([`Event::Condition`]) and the one rule for which failures end
//! the run: a postcondition that fails after an apply is an error (its object stays recorded,
//! as OpenTofu keeps it); a failing check, and anything failing in a plan, only warns.
//! Not: evaluating conditions (Nix does, `nix/lib/conditions.nix`), nor holding a resource back
//! on a precondition not known yet (`analysis`).

use super::error::EngineError;
use super::events::{Event, Sink};
use super::{Engine, Report};
use crate::ir::{Condition, ConditionKind, ConditionStatus};

/// Which run the conditions end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Judging {
    /// A plan: nothing was applied, so every failure is a warning.
    Plan,
    /// An apply that completed: a failing postcondition fails it.
    Apply,
}

impl Engine<'_> {
    /// Reports the latest evaluation's conditions after a completed run; with `Apply`, a
    /// failing postcondition turns the report into [`EngineError::Postconditions`].
    pub(super) fn judge_conditions(
        &mut self,
        report: Report,
        judging: Judging,
    ) -> Result<Report, EngineError> {
        let conditions = std::mem::take(&mut self.conditions);
        let mut failed = Vec::new();
        for condition in conditions {
            let fatal = judging == Judging::Apply && is_failed_postcondition(&condition);
            if fatal {
                failed.push(condition.clone());
            }
            self.sink.event(Event::Condition { condition, fatal });
        }
        match failed.is_empty() {
            true => Ok(report),
            false => Err(EngineError::Postconditions(failed)),
        }
    }
}

fn is_failed_postcondition(c: &Condition) -> bool {
    c.status == ConditionStatus::Fail && matches!(c.kind, ConditionKind::Postcondition { .. })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(kind: ConditionKind, status: ConditionStatus) -> Condition {
        Condition {
            kind,
            name: "n".into(),
            message: "m".into(),
            status,
        }
    }

    #[test]
    fn only_a_failed_postcondition_is_fatal() {
        let post = || ConditionKind::Postcondition {
            resource: "alpha.alpha_token.A".into(),
        };
        assert!(is_failed_postcondition(&condition(
            post(),
            ConditionStatus::Fail
        )));
        assert!(!is_failed_postcondition(&condition(
            post(),
            ConditionStatus::Pass
        )));
        assert!(!is_failed_postcondition(&condition(
            post(),
            ConditionStatus::Unknown
        )));
        let check = condition(ConditionKind::Check, ConditionStatus::Fail);
        assert!(!is_failed_postcondition(&check));
    }
}
