//! The plan's one-line summary and the sink that counts what it summarises.
//!
//! Owns: counting planned actions, deferred resources, moves, imports, drift and what was
//! carried out as events pass, the sentence that sums a plan up, and the counts the JSON
//! stream ends with. Not: printing the events themselves.

use serde_json::json;

use crate::engine::{Action, Event, Sink, Wait};

/// A sink that forwards to another and also counts planned actions, for summaries.
pub(crate) struct Tally<'a> {
    inner: &'a mut dyn Sink,
    /// Planned actions: (id, action).
    pub(crate) planned: Vec<(String, Action)>,
    /// Deferred resources.
    pub(crate) deferred: Vec<(String, Vec<Wait>)>,
    /// Planned moves: (from, to).
    pub(crate) moves: Vec<(String, String)>,
    /// Planned imports: ids.
    pub(crate) imports: Vec<String>,
    /// Objects refresh found different from their records (or gone).
    pub(crate) drifted: Vec<String>,
    /// Changes carried out and recorded: (id, action); data source reads and no-ops left out.
    pub(crate) applied: Vec<(String, Action)>,
    /// Where `plan --out` saved the plan, as given (`nivis show FILE`: the file shown).
    pub(crate) saved_to: Option<String>,
    /// Whether drift alone is a change (`refresh` and `plan --refresh-only`, whose business
    /// it is); elsewhere drift is reported but only what the plan acts on is a change.
    pub(crate) drift_is_change: bool,
    /// The flags that chose the plan source and the state, as the command was given them, for
    /// the next step's command line; `None` when they are not known (`nivis show FILE`).
    pub(crate) source_flags: Option<Vec<String>>,
}

impl<'a> Tally<'a> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: &'a mut dyn Sink) -> Self {
        Tally {
            inner,
            planned: Vec::new(),
            deferred: Vec::new(),
            moves: Vec::new(),
            imports: Vec::new(),
            drifted: Vec::new(),
            applied: Vec::new(),
            saved_to: None,
            drift_is_change: false,
            source_flags: Some(Vec::new()),
        }
    }

    /// Whether there is anything to do or record: planned changes, resources decided later,
    /// moves, imports, and drift where [`Tally::drift_is_change`] (`--detailed-exitcode`
    /// exits 2 then). Drift the plan does not act on is no change, as in Terraform (DESIGN §90):
    /// drift that matters shows up as a planned action.
    pub(crate) fn has_changes(&self) -> bool {
        !(self.planned.is_empty()
            && self.deferred.is_empty()
            && self.moves.is_empty()
            && self.imports.is_empty()
            && (self.drifted.is_empty() || !self.drift_is_change))
    }

    /// Whether an apply of this plan would do anything: planned changes, resources decided
    /// later, moves or imports. Drift alone is not: "No changes." is then the plan's last word.
    pub(crate) fn plans_work(&self) -> bool {
        !(self.planned.is_empty()
            && self.deferred.is_empty()
            && self.moves.is_empty()
            && self.imports.is_empty())
    }

    /// The counts the JSON stream's `summary` line carries.
    pub(crate) fn summary_json(&self) -> serde_json::Value {
        json!({
            "planned": action_counts(&self.planned),
            "deferred": self.deferred.len(),
            "moved": self.moves.len(),
            "imported": self.imports.len(),
            "drifted": self.drifted.len(),
            "applied": action_counts(&self.applied),
            "changes": self.has_changes(),
        })
    }
}

/// How many of each action: `{"create": 1, "replace": 2}` (actions with none left out).
fn action_counts(actions: &[(String, Action)]) -> serde_json::Value {
    let mut counts = serde_json::Map::new();
    for (_, action) in actions {
        let n = counts
            .get(action.class())
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        counts.insert(action.class().to_string(), json!(n + 1));
    }
    serde_json::Value::Object(counts)
}

impl Sink for Tally<'_> {
    fn event(&mut self, event: Event) {
        match &event {
            Event::Planned { id, action, .. } => self.planned.push((id.clone(), *action)),
            Event::Deferred { id, waits, .. } => self.deferred.push((id.clone(), waits.clone())),
            Event::Moved {
                from,
                to,
                recorded: false,
                ..
            } => self.moves.push((from.clone(), to.clone())),
            Event::Imported {
                id,
                recorded: false,
                ..
            } => self.imports.push(id.clone()),
            Event::Drift { id, .. } => self.drifted.push(id.clone()),
            Event::PlanFile {
                path,
                applying: false,
                ..
            } => self.saved_to = Some(path.clone()),
            Event::Finished {
                id,
                action,
                deposed: None,
                ..
            } if *action != Action::NoOp
                && !(*action == Action::Read && id.starts_with("data.")) =>
            {
                self.applied.push((id.clone(), *action))
            }
            _ => {}
        }
        self.inner.event(event);
    }
}

/// The one-line plan summary.
pub(crate) fn plan_summary(
    planned: &[(String, Action)],
    deferred: usize,
    moves: usize,
    imports: usize,
) -> String {
    let count = |f: &dyn Fn(&Action) -> bool| planned.iter().filter(|(_, a)| f(a)).count();
    let create = count(&|a| *a == Action::Create);
    let update = count(&|a| *a == Action::Update);
    let replace = count(&|a| matches!(a, Action::Replace { .. }));
    let delete = count(&|a| *a == Action::Delete);
    let read = count(&|a| *a == Action::Read);
    let recreate = count(&|a| *a == Action::Recreate);
    let forget = count(&|a| *a == Action::Forget);
    if create + update + replace + delete + read + recreate + forget + deferred == 0 {
        if moves + imports > 0 {
            return format!(
                "Plan: {moves} to move, {imports} to import (state only), nothing else changes."
            );
        }
        return "No changes. The infrastructure matches the plan.".into();
    }
    let mut s = format!(
        "Plan: {create} to create, {update} to update, {replace} to replace, {delete} to destroy"
    );
    if recreate > 0 {
        s.push_str(&format!(", {recreate} to re-create"));
    }
    if forget > 0 {
        s.push_str(&format!(", {forget} to forget"));
    }
    if moves > 0 {
        s.push_str(&format!(", {moves} to move"));
    }
    if imports > 0 {
        s.push_str(&format!(", {imports} to import"));
    }
    if read > 0 {
        s.push_str(&format!(", {read} to read"));
    }
    if deferred > 0 {
        s.push_str(&format!(
            "; {deferred} decided in later phases (after Nix re-evaluates with new outputs)"
        ));
    }
    s.push('.');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_counts() {
        let planned = vec![
            ("a".to_string(), Action::Create),
            (
                "b".to_string(),
                Action::Replace {
                    create_before_destroy: false,
                },
            ),
        ];
        assert_eq!(plan_summary(&planned, 2, 0, 0), "Plan: 1 to create, 0 to update, 1 to replace, 0 to destroy; 2 decided in later phases (after Nix re-evaluates with new outputs).");
        assert_eq!(
            plan_summary(&[], 0, 0, 0),
            "No changes. The infrastructure matches the plan."
        );
        let forgetting = vec![
            ("f".to_string(), Action::Forget),
            ("g".to_string(), Action::Recreate),
        ];
        assert_eq!(
            plan_summary(&forgetting, 0, 0, 0),
            "Plan: 0 to create, 0 to update, 0 to replace, 0 to destroy, 1 to re-create, 1 to forget."
        );
        // A move alone is not "no changes": the state changes.
        assert_eq!(
            plan_summary(&[], 0, 1, 0),
            "Plan: 1 to move, 0 to import (state only), nothing else changes."
        );
        assert_eq!(
            plan_summary(&forgetting[..1], 0, 2, 0),
            "Plan: 0 to create, 0 to update, 0 to replace, 0 to destroy, 1 to forget, 2 to move."
        );
        assert_eq!(
            serde_json::to_value(Action::Recreate).unwrap(),
            serde_json::json!("recreate")
        );
        assert_eq!(
            serde_json::to_value(Action::Forget).unwrap(),
            serde_json::json!("forget")
        );
    }
}
