//! Destroy's stages: the listing (`removal_set`, `list_removals`: which records, in which
//! order, what `preventDestroy` stops) and the deletion (`delete_set`: reverse dependency
//! order, each removal committed, what a failed delete keeps).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;

use super::fixture::{created, ids, knobs, providers, three_tokens};
use super::kit::Knobs;
use super::{A, B, C};
use crate::engine::destroy::{delete_set, list_removals, removal_set, DeleteInput};
use crate::engine::error::EngineError;
use crate::engine::events::{Action, Collect, Event};
use crate::engine::Mutation;
use crate::provider::Provider;
use crate::state::{MemoryStore, StateStore};

/// `[A, B, C]` as owned ids.
fn all() -> Vec<String> {
    [A, B, C].map(String::from).into()
}

/// What a deletion returned: the removals done, or why not.
type Deleted = Result<Vec<(String, Action)>, EngineError>;

/// Runs [`delete_set`] on `ids` of `store` with `providers`; also returns the events.
fn delete(
    store: &mut MemoryStore,
    ids: &[String],
    providers: HashMap<String, Arc<dyn Provider>>,
) -> (Deleted, Vec<Event>) {
    let input = DeleteInput {
        ids,
        providers,
        parallelism: 2,
        phase: 1,
    };
    let mut sink = Collect::default();
    let result = delete_set(input, store, &mut sink, Mutation::for_tests());
    (result, sink.0)
}

/// The ids of the `finished` events, in order.
fn finished(events: &[Event]) -> Vec<&str> {
    (events.iter())
        .filter_map(|e| match e {
            Event::Finished { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn removal_set_is_every_managed_record_or_the_targets_with_their_dependents() {
    let ir = three_tokens(json!({}));
    let store = created(&ir);
    let state = store.state();
    assert_eq!(removal_set(&ir, state, &[]).unwrap(), [A, B, C]);
    // b depends on a: destroying a takes b with it; b alone is just b.
    assert_eq!(removal_set(&ir, state, &[A.into()]).unwrap(), [A, B]);
    assert_eq!(removal_set(&ir, state, &[B.into()]).unwrap(), [B]);
    let unknown = "alpha.alpha_token.nope".to_string();
    match removal_set(&ir, state, std::slice::from_ref(&unknown)) {
        Err(EngineError::UnknownTarget(t)) => assert_eq!(t, unknown),
        other => panic!("not an unknown target: {other:?}"),
    }
}

#[test]
fn list_removals_plans_a_delete_per_resource_in_the_sets_order() {
    let ir = three_tokens(json!({}));
    let store = created(&ir);
    let mut sink = Collect::default();
    list_removals(&ir, store.state(), &[C.into(), A.into()], 1, &mut sink);
    let rows: Vec<(&str, Action)> = (sink.0.iter())
        .filter_map(|e| match e {
            Event::Planned { id, action, .. } => Some((id.as_str(), *action)),
            _ => None,
        })
        .collect();
    assert_eq!(rows, [(C, Action::Delete), (A, Action::Delete)]);
    assert_eq!(sink.0.len(), 2, "{:#?}", sink.0);
}

#[test]
fn removal_set_refuses_what_prevent_destroy_guards_and_lets_the_rest_go() {
    let ir = three_tokens(json!({"preventDestroy": true}));
    let store = created(&ir);
    let state = store.state();
    // b is guarded: all of it, and a (which takes b along), are refused, naming b only.
    for targets in [Vec::new(), vec![A.to_string()], vec![B.to_string()]] {
        match removal_set(&ir, state, &targets) {
            Err(EngineError::Refused(why)) => {
                assert!(
                    why.contains(&format!("preventDestroy is set on {B}.")),
                    "{why}"
                );
                assert!(!why.contains(A) && !why.contains(C), "{why}");
            }
            other => panic!("{targets:?}: not refused: {other:?}"),
        }
    }
    assert_eq!(removal_set(&ir, state, &[C.into()]).unwrap(), [C]);
}

#[test]
fn delete_set_removes_dependents_first_and_commits_each_removal() {
    let ir = three_tokens(json!({}));
    let mut store = created(&ir);
    let (result, events) = delete(&mut store, &all(), providers(&Knobs::default()));
    // Listing order: what nothing waits on first (b, c by address), then a.
    let deleted = [B, C, A].map(|id| (id.to_string(), Action::Delete));
    assert_eq!(result.unwrap(), deleted);
    let order = finished(&events);
    let at = |id: &str| order.iter().position(|f| *f == id).unwrap();
    assert!(
        at(B) < at(A),
        "a went before b, which depends on it: {order:?}"
    );
    assert!(store.state().is_empty(), "left: {:?}", ids(store.state()));
}

#[test]
fn delete_set_keeps_what_a_failed_delete_still_depends_on() {
    let ir = three_tokens(json!({}));
    let mut store = created(&ir);
    let failing = knobs(|k| k.fail_delete_on = vec!["b".into()]);
    let (result, events) = delete(&mut store, &all(), providers(&failing));
    assert!(
        matches!(result, Err(EngineError::OperationsFailed(2))),
        "{result:?}"
    );
    let failed_b = (events.iter()).any(|e| matches!(e, Event::Failed { id, .. } if id == B));
    let skipped_a = (events.iter())
        .any(|e| matches!(e, Event::Skipped { id, because, .. } if id == A && because == B));
    assert!(failed_b && skipped_a, "{events:#?}");
    assert_eq!(finished(&events), [C]);
    assert_eq!(ids(store.state()), [A, B]);
}

#[test]
fn delete_set_forgets_a_record_whose_provider_is_not_given() {
    let ir = three_tokens(json!({}));
    let mut store = created(&ir);
    let (result, _) = delete(&mut store, &[C.into()], HashMap::new());
    assert_eq!(result.unwrap(), [(C.to_string(), Action::Forget)]);
    assert_eq!(ids(store.state()), [A, B]);
}
