//! The stages that read objects the state does not hold as they are: refresh's
//! (`refresh_set`, `read_drift`: the drift of a changed object and of a vanished one) and the
//! imports' (`declared_imports`, `fetch_imports`: the object an id names, the error for an id
//! the provider does not know, `commit_imports`).

use std::collections::HashMap;

use serde_json::json;

use super::fixture::{created, ids, knobs, labelled, providers, three_tokens, token_with};
use super::kit::Knobs;
use super::{analyse, ir_of, A, B, C};
use crate::engine::error::EngineError;
use crate::engine::events::{Collect, Event};
use crate::engine::imports::{commit_imports, declared_imports, fetch_imports};
use crate::engine::record::Destination;
use crate::engine::refresh::{read_drift, refresh_set, DriftInput};
use crate::ir::Ir;
use crate::secrets::Redactor;
use crate::state::{Change, MemoryStore, Mutation, ResourceState, StateFile, StateStore};

#[test]
fn refresh_set_is_every_managed_record_or_only_the_targets() {
    let ir = three_tokens(json!({}));
    let store = created(&ir);
    assert_eq!(refresh_set(&ir, store.state(), &[]), [A, B, C]);
    // Unlike destroy, a target does not take what depends on it along.
    assert_eq!(refresh_set(&ir, store.state(), &[A.into()]), [A]);
}

#[test]
fn read_drift_reports_a_changed_object_and_a_vanished_one_and_changes_nothing() {
    let ir = ir_of(
        vec![
            labelled("a", "drifting", None),
            labelled("b", "vanishing", None),
            labelled("c", "steady", None),
        ],
        &[],
    );
    let store = created(&ir);
    let before = store.state().clone();
    let outside = knobs(|k| {
        k.drift_on = vec!["drifting".into()];
        k.gone_on = vec!["vanishing".into()];
    });
    let providers = providers(&outside);
    let mut sink = Collect::default();
    let all = [A, B, C].map(String::from);
    let input = DriftInput {
        state: store.state(),
        ids: &all,
        providers: &providers,
        redactor: &Redactor::new(),
    };
    let read = read_drift(input, &mut sink);
    assert_eq!((read.drifted, read.failed), (2, 0), "{:#?}", sink.0);
    let drift: Vec<(&str, bool, usize)> = (sink.0.iter())
        .filter_map(|e| match e {
            Event::Drift { id, changes, gone } => Some((id.as_str(), *gone, changes.len())),
            _ => None,
        })
        .collect();
    // a: its `value` changed (one attribute); b: gone.
    assert_eq!(drift, [(A, false, 1), (B, true, 0)]);
    let [Change::Put(a), Change::Remove(b)] = read.changes.as_slice() else {
        panic!("not a put of a and a removal of b: {:?}", read.changes);
    };
    assert_eq!((a.id.as_str(), b.as_str()), (A, B));
    assert_eq!(a.attributes["value"], "changed-outside");
    assert_eq!(store.state(), &before, "reading changed the state");
}

/// A token `a` to adopt the object `import_id` into, and the records `fetch_imports` built.
fn import(
    import_id: &str,
    knobs: &Knobs,
) -> (Ir, Result<Vec<(ResourceState, String)>, EngineError>) {
    let a = token_with("a", json!({}), json!({"importId": import_id}));
    let ir = ir_of(vec![a], &[]);
    let state = StateFile::empty();
    let analysis = analyse(&ir, &state, &[], &HashMap::new()).expect("analysed");
    let requests = declared_imports(&analysis, &state);
    let fetched = fetch_imports(&ir, &requests, &providers(knobs), &Redactor::new());
    (ir.clone(), fetched)
}

#[test]
fn fetch_imports_adopts_the_object_an_id_names() {
    let (ir, fetched) = import("alpha-7", &Knobs::default());
    let imported = fetched.expect("imported");
    let [(record, import_id)] = imported.as_slice() else {
        panic!("not one import: {imported:?}");
    };
    assert_eq!((record.id.as_str(), import_id.as_str()), (A, "alpha-7"));
    assert_eq!(record.type_name, "alpha_token");
    assert_eq!(record.attributes["id"], "alpha-7");
    assert_eq!(record.attributes["value"], "alpha::7");
    assert!(record.private.is_some(), "the private data was dropped");
    // Committed: recorded in the store and reported.
    let mut store = MemoryStore::from_state(StateFile::empty());
    let mut sink = Collect::default();
    commit_imports(
        &imported,
        Destination::Recorded(&mut store, Mutation::for_tests()),
        1,
        &mut sink,
    )
    .unwrap();
    assert_eq!(ids(store.state()), [A]);
    let reported = (sink.0.iter()).any(|e| {
        matches!(e, Event::Imported { id, import_id, recorded: true, .. } if id == A && import_id == "alpha-7")
    });
    assert!(reported, "{:#?}", sink.0);
    // Once recorded, the declaration imports nothing more.
    let analysis = analyse(&ir, store.state(), &[], &HashMap::new()).unwrap();
    assert!(declared_imports(&analysis, store.state()).is_empty());
}

#[test]
fn fetch_imports_refuses_an_id_the_provider_does_not_know() {
    // An id alpha cannot parse: its ImportResourceState fails.
    let (_, fetched) = import("nope", &Knobs::default());
    match fetched {
        Err(EngineError::Refused(why)) => {
            assert!(
                why.starts_with(&format!("cannot import \"nope\" into {A}: ")),
                "{why}"
            );
            assert!(why.contains("ImportResourceState failed"), "{why}");
            assert!(why.ends_with("nothing was recorded"), "{why}");
        }
        other => panic!("not refused: {other:?}"),
    }
    // A well-formed id of no live object (the object log holds none): found nothing.
    let log = tempfile::NamedTempFile::new().unwrap();
    let logged = knobs(|k| k.object_log = Some(log.path().to_path_buf()));
    match import("alpha-99", &logged).1 {
        Err(EngineError::Refused(why)) => assert!(
            why.contains("the provider found no alpha_token with that id; check the id"),
            "{why}"
        ),
        other => panic!("not refused: {other:?}"),
    }
}
