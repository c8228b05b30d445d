//! Plan fidelity in process: what `plan` promises covers what `apply` does, and apply acts on
//! a resource at most once. The plans here are written as Nix writes them once outputs are in
//! the ledger (a reference becomes the value and keeps its edge), which is where a plan that
//! only looks at `__ref` markers goes wrong.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::*;

const A: &str = "alpha.alpha_token.a";
const B: &str = "beta.beta_record.b";
const C: &str = "alpha.alpha_token.c";

/// a (keeper from the "variable") → c (TF→TF: `keeper = a.id`) and → b (through Nix:
/// `from = "rec-" + a.id`).
fn chain(keeper: &str) -> impl FnMut(&Ledger) -> Json + Send + 'static {
    let keeper = keeper.to_string();
    move |ledger: &Ledger| {
        ir(vec![
            token("a", json!({"label": "a", "keeper": keeper})),
            token(
                "c",
                json!({"label": "c", "keeper": nix_ref(ledger, A, "id")}),
            ),
            resource(
                "beta",
                "beta_record",
                "b",
                json!({"from": derived_from(ledger, &[(A, "id")], |v| json!(format!("rec-{}", v[0].as_str().unwrap())))}),
                json!({}),
            ),
        ])
    }
}

/// `(id, action)` of every `deferred` event with what it waits on, rendered.
fn deferred(run: &Run) -> Vec<(String, bool, String)> {
    run.events
        .iter()
        .filter_map(|e| match e {
            Event::Deferred {
                id,
                in_state,
                waits,
                ..
            } => Some((id.clone(), *in_state, nivis::engine::describe_waits(waits))),
            _ => None,
        })
        .collect()
}

#[test]
fn a_replacement_plans_its_tf_dependents_and_defers_its_nix_dependents() {
    let mut world = World::new();
    world.apply(chain("k1")).report();
    // Each command starts the fake afresh: a later counter gives the new object a new id.
    world.knobs.counter_seed = 10;
    let plan = world.plan(chain("k2"));
    plan.report();
    assert_eq!(
        plan.planned(),
        [(A.to_string(), "replace".to_string()), (C.to_string(), "replace".to_string())],
        "c reads a.id, which the replacement makes unknown: its ForceNew keeper forces a replacement"
    );
    assert_eq!(
        deferred(&plan),
        [(B.to_string(), true, format!("{A} (Nix re-evaluation)"))]
    );
    let c_keeper = plan.events.iter().find_map(|e| match e {
        Event::Planned { id, changes, .. } if id == C => Some(changes.clone()),
        _ => None,
    });
    let keeper = c_keeper
        .unwrap()
        .into_iter()
        .find(|c| nivis::value::render_path(&c.path) == "keeper")
        .expect("c's keeper is shown changing");
    assert_eq!(
        keeper.after,
        Some(nivis::value::Value::Unknown),
        "known after apply: {keeper:?}"
    );

    let apply = world.apply(chain("k2"));
    apply.report();
    assert_eq!(
        changed(&apply),
        [
            (1, A.to_string(), "replace".to_string()),
            (1, C.to_string(), "replace".to_string()),
            (2, B.to_string(), "update".to_string()),
        ],
        "c in the same phase as a (TF→TF), b after Nix saw the new id, each once: {:#?}",
        apply.events
    );
    let c = world.state.attributes(C);
    assert_eq!(c["keeper"], world.state.attributes(A)["id"]);
    assert!(world.plan(chain("k2")).planned().is_empty(), "converged");
}

#[test]
fn an_in_place_update_leaves_readers_of_unchanged_outputs_alone() {
    // a's label changes in place: its id stays, so c (keeper = a.id) has nothing to do and b
    // (from a.id) is not deferred... but a's `value` becomes unknown; nobody reads it.
    let world = World::new();
    let plan_with = |label: &'static str| {
        move |ledger: &Ledger| {
            ir(vec![
                token("a", json!({"label": label, "keeper": "k"})),
                token(
                    "c",
                    json!({"label": "c", "keeper": nix_ref(ledger, A, "id")}),
                ),
            ])
        }
    };
    world.apply(plan_with("one")).report();
    let plan = world.plan(plan_with("two"));
    assert_eq!(plan.planned(), [(A.to_string(), "update".to_string())]);
    let apply = world.apply(plan_with("two"));
    assert_eq!(changed(&apply), [(1, A.to_string(), "update".to_string())]);
}

#[test]
fn a_data_source_whose_input_changes_feeds_its_dependent_once() {
    const D: &str = "data.alpha.alpha_lookup.d";
    const R: &str = "alpha.alpha_token.r";
    let world = World::new();
    let plan_with = |key: &'static str| {
        move |ledger: &Ledger| {
            ir(vec![
                lookup("d", json!({"key": key})),
                token(
                    "r",
                    json!({"label": "r", "keeper": nix_ref(ledger, D, "result")}),
                ),
            ])
        }
    };
    world.apply(plan_with("one")).report();
    let plan = world.plan(plan_with("two"));
    assert_eq!(plan.planned(), [(R.to_string(), "replace".to_string())]);
    let apply = world.apply(plan_with("two"));
    assert_eq!(changed(&apply), [(1, R.to_string(), "replace".to_string())]);
    assert_eq!(
        report_changed(&apply),
        [(R.to_string(), "replace".to_string())]
    );
    assert_eq!(world.state.attributes(R)["keeper"], "lookup:two");
}

/// `(phase, id, action)` of every `finished` event that changed something (not no-op, not a
/// data source read).
fn changed(run: &Run) -> Vec<(u32, String, String)> {
    run.finished()
        .into_iter()
        .filter(|(_, id, a)| a != "no-op" && !(a == "read" && id.starts_with("data.")))
        .collect()
}

fn report_changed(run: &Run) -> Vec<(String, String)> {
    run.report()
        .changed
        .iter()
        .map(|(id, a)| (id.clone(), action_name(a)))
        .collect()
}

/// One random configuration: nodes in topological order, each reading some earlier ones
/// either as a plain reference (TF→TF) or through a value Nix computes, with inputs taken
/// from `vars` (the "variables" the test changes between runs).
#[derive(Clone, Debug)]
struct Shape {
    nodes: Vec<ShapeNode>,
}

#[derive(Clone, Debug)]
struct ShapeNode {
    kind: ShapeKind,
    /// (earlier node index, through Nix?, into which input).
    reads: Vec<(usize, bool, &'static str)>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum ShapeKind {
    Token,
    Record,
    Lookup,
}

impl ShapeNode {
    fn id(&self, i: usize) -> String {
        match self.kind {
            ShapeKind::Token => format!("alpha.alpha_token.n{i}"),
            ShapeKind::Record => format!("beta.beta_record.n{i}"),
            ShapeKind::Lookup => format!("data.alpha.alpha_lookup.n{i}"),
        }
    }

    /// The output dependents read.
    fn output(&self) -> &'static str {
        match self.kind {
            ShapeKind::Token => "id",
            ShapeKind::Record => "endpoint",
            ShapeKind::Lookup => "result",
        }
    }

    /// The inputs it has, each given by a variable or read from another node.
    fn inputs(&self) -> &'static [&'static str] {
        match self.kind {
            ShapeKind::Token => &["label", "keeper"],
            ShapeKind::Record => &["from"],
            ShapeKind::Lookup => &["key"],
        }
    }
}

fn random_shape(rng: &mut StdRng) -> Shape {
    let n = rng.gen_range(2..=7);
    let mut nodes: Vec<ShapeNode> = Vec::new();
    for i in 0..n {
        let kind = match rng.gen_range(0..5) {
            0 | 1 => ShapeKind::Token,
            2 | 3 => ShapeKind::Record,
            _ => ShapeKind::Lookup,
        };
        let mut node = ShapeNode {
            kind,
            reads: Vec::new(),
        };
        for &input in node.inputs() {
            if i > 0 && rng.gen_bool(0.5) {
                node.reads
                    .push((rng.gen_range(0..i), rng.gen_bool(0.5), input));
            }
        }
        nodes.push(node);
    }
    Shape { nodes }
}

/// The plan of `shape` with input values from `vars` (one per node and input).
fn shape_plan(shape: Shape, vars: Vec<String>) -> impl FnMut(&Ledger) -> Json + Send + 'static {
    move |ledger: &Ledger| {
        let mut nodes = Vec::new();
        for (i, node) in shape.nodes.iter().enumerate() {
            let mut config = serde_json::Map::new();
            for (k, &input) in node.inputs().iter().enumerate() {
                let var = &vars[i * 2 + k];
                let value = match node.reads.iter().find(|r| r.2 == input) {
                    Some(&(from, false, _)) => {
                        let source = &shape.nodes[from];
                        nix_ref(ledger, &source.id(from), source.output())
                    }
                    Some(&(from, true, _)) => {
                        let source = &shape.nodes[from];
                        let var = var.clone();
                        derived_from(ledger, &[(&source.id(from), source.output())], move |v| {
                            json!(format!("{var}+{}", v[0].as_str().unwrap()))
                        })
                    }
                    None => json!(var),
                };
                config.insert(input.to_string(), value);
            }
            let config = Json::Object(config);
            nodes.push(match node.kind {
                ShapeKind::Token => token(&format!("n{i}"), config),
                ShapeKind::Record => {
                    resource("beta", "beta_record", &format!("n{i}"), config, json!({}))
                }
                ShapeKind::Lookup => lookup(&format!("n{i}"), config),
            });
        }
        ir(nodes)
    }
}

/// What a plan allows each resource: the actions it may take.
fn promises(plan: &Run) -> BTreeMap<String, Vec<&'static str>> {
    let mut out = BTreeMap::new();
    for e in &plan.events {
        match e {
            Event::Planned {
                id,
                action,
                deposed: None,
                ..
            } => {
                let allowed: Vec<&str> = match action_name(action).as_str() {
                    "create" => vec!["create"],
                    "update" => vec!["update"],
                    "replace" => vec!["update", "replace"],
                    "delete" => vec!["delete"],
                    "read" => vec!["read"],
                    other => panic!("unexpected planned action {other}"),
                };
                out.insert(id.clone(), allowed);
            }
            Event::Deferred { id, in_state, .. } => {
                let allowed = if *in_state {
                    vec!["update", "replace", "read"]
                } else {
                    vec!["create", "read"]
                };
                out.insert(id.clone(), allowed);
            }
            _ => {}
        }
    }
    out
}

#[test]
fn property_what_apply_does_the_plan_promised_and_nothing_twice() {
    let mut rng = StdRng::seed_from_u64(0x5eed_0015);
    for round in 0..60 {
        let shape = random_shape(&mut rng);
        let vars: Vec<String> = (0..shape.nodes.len() * 2)
            .map(|k| format!("v{k}"))
            .collect();
        let mut world = World::new();
        world
            .apply(shape_plan(shape.clone(), vars.clone()))
            .report();
        // Each command starts the fakes afresh: a later counter gives new objects new ids.
        world.knobs.counter_seed = 1000;
        let mut changed_vars = vars.clone();
        for v in changed_vars.iter_mut() {
            if rng.gen_bool(0.3) {
                v.push('\'');
            }
        }
        let context = format!("round {round}: {shape:?}, vars {changed_vars:?}");
        let plan = world.plan(shape_plan(shape.clone(), changed_vars.clone()));
        if let Err(e) = &plan.result {
            panic!("{context}: plan failed: {e}\n{:#?}", plan.events);
        }
        let promised = promises(&plan);
        let apply = world.apply(shape_plan(shape.clone(), changed_vars.clone()));
        if let Err(e) = &apply.result {
            panic!("{context}: apply failed: {e}\n{:#?}", apply.events);
        }
        let mut seen = BTreeSet::new();
        for (phase, id, action) in changed(&apply) {
            assert!(
                seen.insert(id.clone()),
                "{context}: {id} acted on twice ({action} in phase {phase})\nplan: {:#?}\napply: {:#?}",
                plan.events,
                apply.events
            );
            let allowed = promised.get(&id).unwrap_or_else(|| {
                panic!("{context}: apply did {action} to {id} in phase {phase}, which the plan did not show\nplan: {:#?}", plan.events)
            });
            assert!(
                allowed.contains(&action.as_str()),
                "{context}: apply did {action} to {id}, the plan allowed {allowed:?}"
            );
        }
        let again = world.plan(shape_plan(shape, changed_vars));
        assert!(
            again.planned().is_empty(),
            "{context}: not converged: {:?}",
            again.planned()
        );
    }
}

use std::collections::BTreeSet;
