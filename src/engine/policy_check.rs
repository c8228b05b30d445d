//! Policy checks in the phase loop: the static rules on each evaluation's resources before its
//! phase calls a provider, the plan and phase rules on each phase's planned changes before the
//! phase applies anything (a later phase's changes are checked when that phase is planned).
//!
//! Owns: when a check runs, the violations as events, and the refusal when a mandatory rule
//! does not hold and no `--override` covers it. Not: running the rules or what they see (see
//! `policy`).

use super::events::{Event, Sink};
use super::{Engine, EngineError};
use crate::ir::Ir;
use crate::policy::{self, PlannedChange};

impl Engine<'_> {
    /// Checks the static rules on `ir`, the IR phase `phase` plans from.
    pub(super) fn check_static_policies(&mut self, ir: &Ir, phase: u32) -> Result<(), EngineError> {
        self.forget_placeless_policies();
        if self.policies.is_none()
            || self
                .policy_rules
                .is_some_and(|(static_rules, _)| static_rules == 0)
        {
            return Ok(());
        }
        self.check_policies(&policy::static_input(ir), phase)
    }

    /// Drops the runner of a plan with no place for policies beside it (a plain file read
    /// without `--attr`) before any input is built for it: without this the first check wrote
    /// every resource's configuration to a run directory only to learn there was nothing to run.
    fn forget_placeless_policies(&mut self) {
        if self.policies.as_ref().is_some_and(|r| !r.has_place()) {
            self.no_policies();
        }
    }

    /// The plan has no policies: no check runs again in this run, and an `--override` is
    /// said to override nothing.
    fn no_policies(&mut self) {
        self.policies = None;
        if !self.opts.overrides.rules.is_empty() {
            self.sink
                .event(Event::Warning(crate::diag::Diagnostic::warning(
                    "--override: this plan has no policies (a plain file read without --attr \
                     has nothing beside its plan function)",
                )));
        }
    }

    /// Whether the plan rules need phase `phase`'s changes (a silent preview when the apply
    /// would not show them anyway).
    pub(super) fn wants_plan_policies(&self) -> bool {
        self.policies.is_some()
            && self
                .policy_rules
                .is_none_or(|(_, plan_rules)| plan_rules > 0)
    }

    /// Checks the plan and phase rules on `planned`, the `Planned` events of phase `phase`.
    pub(super) fn check_plan_policies(
        &mut self,
        planned: &[Event],
        phase: u32,
    ) -> Result<(), EngineError> {
        self.forget_placeless_policies();
        if !self.wants_plan_policies() {
            return Ok(());
        }
        let changes: Vec<PlannedChange<'_>> = planned
            .iter()
            .filter_map(|e| match e {
                Event::Planned {
                    id,
                    type_name,
                    action,
                    changes,
                    ..
                } => Some(PlannedChange {
                    address: id,
                    type_name,
                    action: *action,
                    changes,
                }),
                _ => None,
            })
            .collect();
        let input = policy::plan_input(phase, &changes);
        self.check_policies(&input, phase)
    }

    /// Runs the policies on `input`; reports every violation, and refuses when a mandatory one
    /// is not overridden. A project without rules is not checked again in this run.
    fn check_policies(&mut self, input: &serde_json::Value, phase: u32) -> Result<(), EngineError> {
        let Some(runner) = &mut self.policies else {
            return Ok(());
        };
        let Some((mut verdict, took)) = runner.check(input).map_err(EngineError::Eval)? else {
            self.no_policies();
            return Ok(());
        };
        self.nix_time += took;
        if self.policy_rules.is_none() {
            self.warn_unknown_overrides(&verdict);
        }
        self.policy_rules = Some((verdict.static_rules, verdict.plan_rules));
        if verdict.static_rules + verdict.plan_rules == 0 {
            self.policies = None;
        }
        self.opts.overrides.apply(&mut verdict);
        let refusing: Vec<String> = (verdict.violations.iter())
            .filter(|v| v.refuses())
            .map(ToString::to_string)
            .collect();
        for violation in verdict.violations {
            self.sink.event(Event::PolicyViolation { phase, violation });
        }
        if refusing.is_empty() {
            return Ok(());
        }
        Err(EngineError::Refused(format!(
            "refused by policy before phase {phase} changed anything ({} mandatory \
             violation(s)):\n  {}\nChange the plan so the rules hold, or run again with \
             --override RULE --reason TEXT (the reason is reported with the run)",
            refusing.len(),
            refusing.join("\n  ")
        )))
    }

    /// Warns, once per run, of each `--override` naming no rule of the project.
    fn warn_unknown_overrides(&mut self, verdict: &policy::Verdict) {
        let unknown = self.opts.overrides.unknown(verdict);
        if unknown.is_empty() {
            return;
        }
        let known = match verdict.names.len() {
            0 => "it has none".to_string(),
            _ => format!("its rules: {}", verdict.names.join(", ")),
        };
        let message = format!(
            "--override {}: the project has no such policy rule ({known}); check the spelling",
            unknown.join(", ")
        );
        self.sink
            .event(Event::Warning(crate::diag::Diagnostic::warning(message)));
    }
}
