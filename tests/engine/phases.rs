//! The phase loop in process: phases to a fixpoint, waits, cycles, failures, targets.

use serde_json::json;

use super::*;

/// The headline shape: A; B from A's value (through Nix); C from B's endpoint and A's value.
fn chain(ledger: &Ledger) -> Json {
    let text = |v: &Json| v.as_str().unwrap().to_string();
    let from = derived_from(ledger, &[("alpha.alpha_token.A", "value")], |v| {
        json!(format!("rec-{}", text(&v[0])))
    });
    let label = derived_from(
        ledger,
        &[
            ("beta.beta_record.B", "endpoint"),
            ("alpha.alpha_token.A", "value"),
        ],
        |v| json!(format!("{}::{}", text(&v[0]), text(&v[1]))),
    );
    ir(vec![
        token("A", json!({})),
        resource("beta", "beta_record", "B", json!({"from": from}), json!({})),
        token("C", json!({"label": label})),
    ])
}

#[test]
fn three_phases_reach_the_fixpoint_and_a_rerun_changes_nothing() {
    let world = World::new();
    let run = world.apply(chain);
    let report = run.report();
    assert_eq!(
        run.finished(),
        vec![
            (1, "alpha.alpha_token.A".into(), "create".into()),
            (2, "beta.beta_record.B".into(), "create".into()),
            (3, "alpha.alpha_token.C".into(), "create".into()),
        ]
    );
    assert_eq!((report.apply_phases, report.evaluations), (3, 4));
    assert_eq!(
        world.state.attributes("alpha.alpha_token.C")["label"],
        "beta://rec-alpha::0::alpha::0"
    );
    let again = world.apply(chain);
    assert_eq!(again.report().apply_phases, 0);
    assert!(again.finished().iter().all(|(_, _, a)| a == "no-op"));
}

#[test]
fn a_plan_shows_phase_one_and_names_what_later_resources_wait_on() {
    let world = World::new();
    let run = world.plan(chain);
    run.report();
    assert_eq!(
        run.planned(),
        vec![("alpha.alpha_token.A".to_string(), "create".to_string())]
    );
    let waits: Vec<(String, Vec<Wait>)> = run
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Deferred { id, waits, .. } => Some((id.clone(), waits.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        waits[0],
        (
            "beta.beta_record.B".to_string(),
            vec![Wait::Nix {
                resource: "alpha.alpha_token.A".into(),
                attribute: "value".into()
            }]
        )
    );
    assert_eq!(waits.len(), 2);
    assert!(world.state.ids().is_empty(), "a plan records nothing");
}

#[test]
fn a_cycle_through_nix_is_refused_naming_its_members() {
    let world = World::new();
    let run = world.apply(|ledger: &Ledger| {
        ir(vec![
            token(
                "A",
                json!({"label": derived(ledger, "alpha.alpha_token.C", "value")}),
            ),
            token(
                "C",
                json!({"label": derived(ledger, "alpha.alpha_token.A", "value")}),
            ),
        ])
    });
    match run.error() {
        EngineError::Cycle(cycles) => {
            let members: Vec<&String> = cycles.iter().flatten().collect();
            assert!(
                members.contains(&&"alpha.alpha_token.A".to_string()),
                "{cycles:?}"
            );
            assert!(
                members.contains(&&"alpha.alpha_token.C".to_string()),
                "{cycles:?}"
            );
        }
        other => panic!("expected a cycle, got {other}"),
    }
    assert!(world.state.ids().is_empty());
}

#[test]
fn a_reference_inside_one_phase_is_applied_in_order() {
    let world = World::new();
    let run = world.apply(|_: &Ledger| {
        ir(vec![
            token("A", json!({"label": "a"})),
            token(
                "B",
                json!({"label": reference("alpha.alpha_token.A", "value")}),
            ),
        ])
    });
    assert_eq!(
        run.finished(),
        vec![
            (1, "alpha.alpha_token.A".into(), "create".into()),
            (1, "alpha.alpha_token.B".into(), "create".into()),
        ]
    );
    assert_eq!(
        world.state.attributes("alpha.alpha_token.B")["label"],
        "alpha:a:0"
    );
}

#[test]
fn a_failure_skips_its_dependents_and_leaves_the_rest_applied() {
    let mut world = World::new();
    world.knobs.fail_on = vec!["bad".into()];
    let run = world.apply(|_: &Ledger| {
        ir(vec![
            token("A", json!({"label": "bad"})),
            token(
                "B",
                json!({"label": reference("alpha.alpha_token.A", "value")}),
            ),
            token("C", json!({"label": "fine"})),
        ])
    });
    assert!(
        matches!(run.error(), EngineError::OperationsFailed(2)),
        "{}",
        run.error()
    );
    let skipped: Vec<(String, String)> = run
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Skipped { id, because, .. } => Some((id.clone(), because.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        skipped,
        vec![(
            "alpha.alpha_token.B".to_string(),
            "alpha.alpha_token.A".to_string()
        )]
    );
    assert_eq!(world.state.ids(), vec!["alpha.alpha_token.C".to_string()]);
}

#[test]
fn a_target_runs_only_it_and_what_it_depends_on() {
    let mut world = World::new();
    world.targets = vec!["alpha.alpha_token.B".into()];
    let plan = |_: &Ledger| {
        ir(vec![
            token("A", json!({"label": "a"})),
            token(
                "B",
                json!({"label": reference("alpha.alpha_token.A", "value")}),
            ),
            token("C", json!({"label": "c"})),
        ])
    };
    world.apply(plan).report();
    assert_eq!(
        world.state.ids(),
        vec![
            "alpha.alpha_token.A".to_string(),
            "alpha.alpha_token.B".to_string()
        ]
    );
}
