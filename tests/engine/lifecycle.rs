//! Lifecycle rules and destroy order in process.

use serde_json::json;

use super::*;

fn with(
    label: &str,
    keeper: &str,
    lifecycle: Json,
) -> impl FnMut(&Ledger) -> Json + Send + 'static {
    let (label, keeper) = (label.to_string(), keeper.to_string());
    move |_: &Ledger| {
        ir(vec![resource(
            "alpha",
            "alpha_token",
            "t",
            json!({"label": label, "keeper": keeper}),
            lifecycle.clone(),
        )])
    }
}

const T: &str = "alpha.alpha_token.t";

#[test]
fn prevent_destroy_refuses_a_replacement_and_a_destroy() {
    let world = World::new();
    world
        .apply(with("one", "k1", json!({"preventDestroy": true})))
        .report();
    let before = world.state.attributes(T);
    let run = world.apply(with("one", "k2", json!({"preventDestroy": true})));
    assert!(run.result.is_err(), "a replacement must be refused");
    let run = world.destroy(with("one", "k1", json!({"preventDestroy": true})));
    assert!(
        matches!(run.error(), EngineError::Refused(_)),
        "{}",
        run.error()
    );
    assert_eq!(world.state.attributes(T), before, "nothing was touched");
}

#[test]
fn ignore_changes_keeps_the_recorded_value() {
    let world = World::new();
    world
        .apply(with("one", "k", json!({"ignoreChanges": ["label"]})))
        .report();
    let run = world.apply(with("two", "k", json!({"ignoreChanges": ["label"]})));
    // The second apply must succeed and plan the resource: a failed one reports nothing
    // finished and leaves the label as it was too.
    run.report();
    assert_eq!(run.finished(), [(1, T.to_string(), "no-op".to_string())]);
    assert_eq!(world.state.attributes(T)["label"], "one");
}

#[test]
fn an_update_keeps_the_object_and_a_forced_replacement_makes_a_new_one() {
    let mut world = World::new();
    world.apply(with("one", "k1", json!({}))).report();
    let id = world.state.attributes(T)["id"].clone();
    let run = world.apply(with("two", "k1", json!({})));
    assert_eq!(run.finished()[0].2, "update");
    assert_eq!(world.state.attributes(T)["id"], id);
    // Each command starts the fake afresh: its counter, and so the next id, starts at 10.
    world.knobs.counter_seed = 10;
    let run = world.apply(with("two", "k2", json!({"createBeforeDestroy": true})));
    match run.events.iter().find_map(|e| match e {
        Event::Finished { action, .. } => Some(*action),
        _ => None,
    }) {
        Some(Action::Replace {
            create_before_destroy,
        }) => assert!(create_before_destroy),
        other => panic!("expected a replacement, got {other:?}"),
    }
    assert_eq!(world.state.attributes(T)["id"], "alpha-10");
    assert!(world.state.snapshot().get(T).unwrap().deposed.is_empty());
}

#[test]
fn destroy_goes_in_reverse_dependency_order() {
    let world = World::new();
    let plan = |_: &Ledger| {
        ir(vec![
            token("A", json!({"label": "a"})),
            token(
                "B",
                json!({"label": reference("alpha.alpha_token.A", "value")}),
            ),
            token(
                "C",
                json!({"label": reference("alpha.alpha_token.B", "value")}),
            ),
        ])
    };
    world.apply(plan).report();
    let run = world.destroy(plan);
    run.report();
    let order: Vec<String> = run.finished().into_iter().map(|(_, id, _)| id).collect();
    assert_eq!(
        order,
        [
            "alpha.alpha_token.C",
            "alpha.alpha_token.B",
            "alpha.alpha_token.A"
        ]
    );
    assert!(world.state.ids().is_empty());
}

#[test]
fn a_resource_gone_from_the_plan_is_destroyed_at_the_fixpoint() {
    let world = World::new();
    world
        .apply(|_: &Ledger| ir(vec![token("A", json!({})), token("B", json!({}))]))
        .report();
    let run = world.apply(|_: &Ledger| ir(vec![token("A", json!({}))]));
    assert_eq!(
        run.finished(),
        vec![
            (1, "alpha.alpha_token.A".into(), "no-op".into()),
            (1, "alpha.alpha_token.B".into(), "delete".into())
        ]
    );
    assert_eq!(world.state.ids(), vec!["alpha.alpha_token.A".to_string()]);
}

#[test]
fn replace_forces_one_replacement_and_names_what_it_cannot_find() {
    let mut world = World::new();
    world.apply(with("one", "k", json!({}))).report();
    let id = world.state.attributes(T)["id"].clone();
    world.knobs.counter_seed = 10;
    world.replace = vec![T.to_string()];
    let plan = world.plan(with("one", "k", json!({})));
    assert_eq!(plan.planned(), [(T.to_string(), "replace".to_string())]);
    let run = world.apply(with("one", "k", json!({})));
    assert_eq!(run.finished(), [(1, T.to_string(), "replace".to_string())]);
    assert_ne!(world.state.attributes(T)["id"], id, "a new object");
    world.replace = vec!["alpha.alpha_token.nope".to_string()];
    let run = world.plan(with("one", "k", json!({})));
    assert!(
        matches!(run.error(), EngineError::UnknownReplace(r) if r == "alpha.alpha_token.nope"),
        "{}",
        run.error()
    );
}

/// The LXD oracle's seed 10 (DESIGN §110): B stops reading A in the change that replaces A
/// destroy-first. A's delete must come after B's update (an LXD profile cannot be deleted
/// while a container still uses it), as an orphan's delete comes at the fixpoint; with no
/// reference between them the two ran at once. B's update is made slow, so that running them
/// at once finishes A first.
#[test]
fn a_replacement_waits_for_the_update_of_a_resource_that_stops_reading_it() {
    let mut world = World::new();
    const A: &str = "alpha.alpha_token.A";
    const B: &str = "alpha.alpha_token.B";
    world
        .apply(|_: &Ledger| {
            ir(vec![
                token("A", json!({"label": "a", "keeper": "k1"})),
                token("B", json!({"label": reference(A, "value")})),
            ])
        })
        .report();
    world.knobs.latency = vec![("slow-b".to_string(), std::time::Duration::from_millis(400))];
    let run = world.apply(|_: &Ledger| {
        ir(vec![
            token("A", json!({"label": "a", "keeper": "k2"})),
            token("B", json!({"label": "slow-b"})),
        ])
    });
    run.report();
    assert_eq!(
        run.finished(),
        [
            (1, B.to_string(), "update".to_string()),
            (1, A.to_string(), "replace".to_string())
        ]
    );
}
