//! `run_phase`: one phase's nodes on the scheduler, from a `PhaseInput` (IR, analysis,
//! providers, mode) to a `PhaseResult`, the changes committed to the store and the events.

use serde_json::json;

use super::fixture::{applying, ids, ir_with_refs, knobs, labelled, phase, three_tokens};
use super::{derived, ir_of, reference, A, B, C};
use crate::engine::events::{Action, Event, Wait};
use crate::engine::node::Mode;
use crate::state::{MemoryStore, StateFile, StateStore};

/// `(id, action)` of every `finished` event, in order.
fn finished(events: &[Event]) -> Vec<(String, Action)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Finished { id, action, .. } => Some((id.clone(), *action)),
            _ => None,
        })
        .collect()
}

#[test]
fn run_phase_applies_in_dependency_order_and_commits_each_result() {
    // b's label reads a's value: resolved in the same phase, once a is created.
    let mut b = labelled("b", "unused", None);
    b["config"]["label"] = reference(A, "value");
    let ir = ir_with_refs(vec![b, labelled("a", "a", None)], &[(A, B, "value")]);
    let mut store = MemoryStore::from_state(StateFile::empty());
    let applied = phase(&ir, &mut store, applying(), &Default::default());
    let created = vec![
        (A.to_string(), Action::Create),
        (B.to_string(), Action::Create),
    ];
    assert_eq!(applied.result.changed, created);
    assert_eq!(finished(&applied.events), created);
    assert_eq!(applied.result.failed, 0);
    let mut settled = applied.result.settled.clone();
    settled.sort();
    assert_eq!(settled, [A, B]);
    let state = store.state();
    assert_eq!(ids(state), [A, B]);
    let a = &state.get(A).unwrap().attributes;
    let b = state.get(B).unwrap();
    assert_eq!(b.attributes["label"], a["value"]);
    assert!(a["value"].as_str().unwrap().starts_with("alpha:a:"), "{a}");
    assert_eq!(b.dependencies, [A]);
}

#[test]
fn run_phase_runs_only_what_the_analysis_made_ready() {
    // b waits on a value Nix computes from a: deferred, so the phase leaves it alone.
    let mut b = labelled("b", "unused", None);
    b["config"]["label"] = derived(A, "value");
    let ir = ir_of(vec![labelled("a", "a", None), b], &[(A, B)]);
    let mut store = MemoryStore::from_state(StateFile::empty());
    let applied = phase(&ir, &mut store, applying(), &Default::default());
    assert_eq!(applied.result.changed, [(A.to_string(), Action::Create)]);
    assert_eq!(ids(store.state()), [A]);
    let touched_b = applied.events.iter().any(|e| format!("{e:?}").contains(B));
    assert!(!touched_b, "{:#?}", applied.events);
}

#[test]
fn run_phase_defers_what_nix_computed_from_an_output_that_changes_in_the_phase() {
    // b's keeper is a value Nix computed from a (its edge names no output it read): a's
    // create changes a's outputs, so b waits for the next evaluation instead of running.
    let b = labelled("b", "b", Some(json!("computed from a")));
    let ir = ir_of(vec![labelled("a", "a", None), b], &[(A, B)]);
    let mut store = MemoryStore::from_state(StateFile::empty());
    let applied = phase(&ir, &mut store, applying(), &Default::default());
    assert_eq!(applied.result.changed, [(A.to_string(), Action::Create)]);
    let deferred: Vec<(&str, &[Wait])> = (applied.events.iter())
        .filter_map(|e| match e {
            Event::Deferred { id, waits, .. } => Some((id.as_str(), waits.as_slice())),
            _ => None,
        })
        .collect();
    assert_eq!(deferred, [(B, &[Wait::Recomputed(A.into())][..])]);
    assert!(!applied.result.settled.contains(&B.to_string()));
    assert_eq!(ids(store.state()), [A]);
}

#[test]
fn run_phase_in_plan_mode_lists_the_plan_and_records_nothing() {
    let ir = three_tokens(json!({}));
    let mut store = MemoryStore::from_state(StateFile::empty());
    let planned = phase(&ir, &mut store, Mode::Plan, &Default::default());
    let rows: Vec<(String, Action)> = (planned.events.iter())
        .filter_map(|e| match e {
            Event::Planned { id, action, .. } => Some((id.clone(), *action)),
            _ => None,
        })
        .collect();
    // The listing order: dependency depth, then address.
    let creates = [A, C, B].map(|id| (id.to_string(), Action::Create));
    assert_eq!(rows, creates);
    assert!(
        planned.result.changed.is_empty(),
        "{:?}",
        planned.result.changed
    );
    assert!(finished(&planned.events).is_empty());
    assert!(
        store.state().is_empty(),
        "a plan recorded {:?}",
        ids(store.state())
    );
}

#[test]
fn run_phase_skips_what_depends_on_a_failed_node_and_runs_the_rest() {
    let ir = three_tokens(json!({}));
    let mut store = MemoryStore::from_state(StateFile::empty());
    let failing = knobs(|k| k.fail_on = vec!["a".into()]);
    let applied = phase(&ir, &mut store, applying(), &failing);
    assert_eq!(applied.result.changed, [(C.to_string(), Action::Create)]);
    assert_eq!(applied.result.failed, 2, "a failed, b skipped");
    let failed: Vec<&str> = (applied.events.iter())
        .filter_map(|e| match e {
            Event::Failed { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(failed, [A]);
    let skipped = applied
        .events
        .iter()
        .any(|e| matches!(e, Event::Skipped { id, because, .. } if id == B && because == A));
    assert!(skipped, "{:#?}", applied.events);
    assert_eq!(ids(store.state()), [C]);
}
