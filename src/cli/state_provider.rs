//! `nivis state replace-provider FROM TO`: the provider source address recorded with each
//! resource, changed from FROM to TO (a provider that moved to another namespace, registry or
//! fork), as Terraform's verb of that name.
//!
//! Owns: choosing the records, the confirmation, the one journaled commit. Not: where the state
//! is (`cli::backend`), the real objects (never touched), the plan (its `providers` must name
//! TO for the next run to start it).

use std::io::IsTerminal;
use std::time::Duration;

use super::args::StateTarget;
use super::{exit, fail};
use crate::render::{self, outln};
use crate::secrets::Redactor;
use crate::state::{Change, Mutation};

/// What `state replace-provider` was asked.
pub(super) struct Replacement<'a> {
    pub(crate) from: &'a str,
    pub(crate) to: &'a str,
    pub(crate) auto_approve: bool,
    pub(crate) wait: Option<Duration>,
    /// The command's audit record.
    pub(crate) audit: &'a super::audit::AuditRecord,
}

/// Runs `state replace-provider`; returns the exit status.
pub(super) fn run(ask: &Replacement<'_>, target: &StateTarget, redactor: &Redactor) -> i32 {
    match replace(ask, target, redactor) {
        Ok(status) => status,
        Err(e) => fail(redactor, &e),
    }
}

fn replace(ask: &Replacement<'_>, target: &StateTarget, r: &Redactor) -> Result<i32, String> {
    let (from, to) = (ask.from, ask.to);
    if to.trim().is_empty() || to.chars().any(char::is_control) {
        return Err(format!("{to:?} is not a provider source address"));
    }
    if from == to {
        return Err(format!("FROM and TO are both {from}: nothing to replace"));
    }
    let command = "nivis state replace-provider";
    let mut store = super::backend::open_locked(target, command, ask.wait, r, ask.audit)?;
    let state = store.state();
    let changes: Vec<Change> = state
        .iter()
        .filter(|rec| rec.provider_source == from)
        .map(|rec| {
            let mut next = rec.clone();
            next.provider_source = to.to_string();
            Change::Put(next)
        })
        .collect();
    if changes.is_empty() {
        let mut sources: Vec<&str> = state.iter().map(|r| r.provider_source.as_str()).collect();
        sources.sort_unstable();
        sources.dedup();
        return Err(format!(
            "no resource in state is recorded with the provider {from}; the recorded sources: {}; \
             nothing was changed",
            if sources.is_empty() {
                "none (the state is empty)".to_string()
            } else {
                sources.join(", ")
            }
        ));
    }
    outln!(
        "The provider of {} resource(s) is recorded as {} and becomes {}:",
        changes.len(),
        render::escape(r, from),
        render::escape(r, to)
    );
    for c in &changes {
        outln!("  {}", render::escape(r, c.id()));
    }
    if !ask.auto_approve {
        if !std::io::stdin().is_terminal() {
            return Err(
                "there is no terminal to ask on: run with --auto-approve; nothing was changed"
                    .into(),
            );
        }
        if !render::confirm_plan("Replace the provider of these resources in the state?") {
            outln!("Nothing was changed.");
            return Ok(exit::ERROR);
        }
    }
    store
        .commit(&changes, Mutation::for_state_verb("state replace-provider"))
        .map_err(|e| e.to_string())?;
    for c in &changes {
        ask.audit
            .change(c.id(), &format!("provider {from} -> {to}"));
    }
    store.close().map_err(|e| e.to_string())?;
    outln!(
        "Replaced the provider of {} resource(s) in the state (the real objects were not \
         touched); the plan's providers must now name {}.",
        changes.len(),
        render::escape(r, to)
    );
    Ok(exit::OK)
}
