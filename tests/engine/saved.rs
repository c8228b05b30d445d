//! Saved plans in process: a plan saved and applied as it is goes through; what a later phase
//! wants beyond the saved plan is refused, with what was applied before it recorded.

use serde_json::json;

use super::*;

const A: &str = "alpha.alpha_token.A";
const LATE: &str = "alpha.alpha_token.late";

/// A, and once Nix sees A's id, a resource the first evaluation did not declare at all.
fn growing(ledger: &Ledger) -> Json {
    let mut nodes = vec![token("A", json!({"label": "a"}))];
    if output(ledger, A, "id").is_some() {
        nodes.push(token("late", json!({"label": nix_ref(ledger, A, "id")})));
    }
    ir(nodes)
}

fn saved_plan(
    world: &mut World,
    plan: impl FnMut(&Ledger) -> Json + Send + 'static,
) -> Arc<nivis::engine::plan_file::SavedPlan> {
    world.save = true;
    let run = world.plan(plan);
    world.save = false;
    Arc::new(
        run.report()
            .saved
            .clone()
            .expect("plan --out carries the saved plan"),
    )
}

#[test]
fn a_saved_plan_applies_and_a_later_unplanned_change_is_refused() {
    let mut world = World::new();
    let saved = saved_plan(&mut world, |_: &Ledger| {
        ir(vec![token("A", json!({"label": "a"}))])
    });
    assert_eq!(saved.changes.len(), 1);
    world.saved = Some(saved);
    world
        .apply(|_: &Ledger| ir(vec![token("A", json!({"label": "a"}))]))
        .report();
    assert_eq!(world.state.ids(), [A]);

    // The plan knew only A; the resource Nix adds once A exists was never reviewed.
    let mut world = World::new();
    let saved = saved_plan(&mut world, growing);
    world.saved = Some(saved);
    let run = world.apply(growing);
    let failed = run.events.iter().find_map(|e| match e {
        Event::Failed {
            id, diagnostics, ..
        } if id == LATE => Some(diagnostics[0].summary.clone()),
        _ => None,
    });
    let summary = failed.unwrap_or_else(|| panic!("no refusal: {:#?}", run.events));
    assert!(summary.contains("unplanned change"), "{summary}");
    assert!(summary.contains("would create"), "{summary}");
    assert!(run.result.is_err());
    assert_eq!(
        world.state.ids(),
        [A],
        "what was applied is recorded, nothing else"
    );
}

#[test]
fn a_saved_plan_made_against_another_state_serial_is_refused() {
    let mut world = World::new();
    let plan =
        |label: &'static str| move |_: &Ledger| ir(vec![token("A", json!({"label": label}))]);
    let saved = saved_plan(&mut world, plan("a"));
    world.apply(plan("other")).report();
    let before = world.state.snapshot();
    world.saved = Some(saved);
    let run = world.apply(plan("a"));
    match run.error() {
        EngineError::StalePlan(why) => assert!(why.contains("the state changed"), "{why}"),
        other => panic!("{other}"),
    }
    assert_eq!(world.state.attributes(A), before.get(A).unwrap().attributes);
}
