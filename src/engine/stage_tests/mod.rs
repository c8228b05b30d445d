//! The engine's stages through their inputs and outputs, in process.
//!
//! Here, the pure stages: [`analysis::analyse`] (IR and state in, what runs and what waits
//! out) and the phase loop's exit ([`phases::stop_after_evaluation`],
//! [`phases::stop_after_phase`]). No providers, no Nix: the IR is a JSON document, the state a
//! value. The stages that call providers get the fakes of `fakes/kit` as in-process providers
//! (the same behaviours the end-to-end tests spawn as binaries): `phase` tests
//! `phase_owner::run_phase`, `removal` destroy's listing and deletion, `reading` refresh's
//! read of drift and the fetch of imports. Whole commands are tested in `tests/engine/`.

use std::collections::HashMap;

use serde_json::{json, Value as Json};

use super::analysis::{self, resolved_fingerprint, Analysis, Scope, Settled};
use super::error::EngineError;
use super::events::Wait;
use super::phases::{stop_after_evaluation, stop_after_phase, Stop};
use crate::ir::{self, Ir};
use crate::secrets::Redactor;
use crate::state::{Change, ResourceKind, ResourceState, StateFile};

mod fixture;
#[path = "../../../fakes/kit/mod.rs"]
#[allow(
    clippy::all,
    unreachable_pub,
    reason = "the fakes' kit is compiled again here as a test module; its lints are checked where it is a binary"
)]
mod kit;
mod phase;
mod reading;
mod removal;

/// A managed `alpha_token` named `name` with `config`.
fn token(name: &str, config: Json) -> Json {
    json!({
        "id": format!("alpha.alpha_token.{name}"),
        "name": name,
        "provider": "alpha",
        "type": "alpha_token",
        "config": config,
        "meta": {"dependsOn": [], "lifecycle": {
            "createBeforeDestroy": false, "ignoreChanges": [], "preventDestroy": false}},
    })
}

/// The IR of `resources` (provider `alpha`), with `edges` as `(from, to)`.
fn ir_of(resources: Vec<Json>, edges: &[(&str, &str)]) -> Ir {
    let edges: Vec<Json> = edges
        .iter()
        .map(|(from, to)| json!({"from": from, "to": to, "via": "input"}))
        .collect();
    let doc = json!({
        "schemaVersion": 1,
        "providers": {"alpha": {"source": "provider-alpha", "config": {}}},
        "resources": resources,
        "data": [],
        "edges": edges,
        "nixConsumers": [],
        "variables": {},
    });
    ir::parse(&serde_json::to_vec(&doc).unwrap()).unwrap_or_else(|e| panic!("{e:?}"))
}

/// A reference to `<id>.<attr>` the engine resolves itself (TF→TF, same phase).
fn reference(id: &str, attr: &str) -> Json {
    json!({"__ref": {"resource": id, "path": [attr]}})
}

/// A value Nix computes from `<id>.<attr>`, not known yet.
fn derived(id: &str, attr: &str) -> Json {
    json!({"__derived": {"inputs": [format!("{id}.{attr}")]}})
}

/// `state` with `id` recorded (attributes `attrs`).
fn recorded(mut state: StateFile, id: &str, attrs: Json) -> StateFile {
    let r = ResourceState::new(
        id,
        ResourceKind::Managed,
        "alpha",
        "provider-alpha",
        "alpha_token",
        attrs,
    );
    state.apply(&Change::Put(r));
    state
}

fn analyse<'ir>(
    ir: &'ir Ir,
    state: &StateFile,
    targets: &[String],
    settled: &Settled,
) -> Result<Analysis<'ir>, EngineError> {
    let scope = Scope {
        targets,
        replace: &[],
        settled,
        redactor: &Redactor::new(),
    };
    analysis::analyse(ir, state, &scope)
}

const A: &str = "alpha.alpha_token.a";
const B: &str = "alpha.alpha_token.b";
const C: &str = "alpha.alpha_token.c";

#[test]
fn analyse_runs_a_reference_in_the_same_phase_in_dependency_order() {
    let ir = ir_of(
        vec![
            token("b", json!({"input": reference(A, "value")})),
            token("a", json!({"input": "x"})),
        ],
        &[(A, B)],
    );
    let analysis = analyse(&ir, &StateFile::empty(), &[], &HashMap::new()).unwrap();
    assert_eq!(analysis.run, [A, B]);
    assert!(analysis.deferred.is_empty());
    assert!(analysis.nodes[B].deps.contains(A));
}

#[test]
fn analyse_defers_a_nix_derived_value_and_what_depends_on_it() {
    let ir = ir_of(
        vec![
            token("a", json!({"input": "x"})),
            token("b", json!({"input": derived(A, "value")})),
            token("c", json!({"input": reference(B, "value")})),
        ],
        &[(A, B), (B, C)],
    );
    let analysis = analyse(&ir, &StateFile::empty(), &[], &HashMap::new()).unwrap();
    assert_eq!(analysis.run, [A]);
    let nix_wait = Wait::Nix {
        resource: A.into(),
        attribute: "value".into(),
    };
    assert_eq!(analysis.deferred[B], [nix_wait]);
    assert_eq!(analysis.deferred[C], [Wait::Resource(B.into())]);
}

#[test]
fn analyse_skips_what_this_run_settled_with_the_same_configuration() {
    let ir = ir_of(vec![token("a", json!({"input": "x"}))], &[]);
    let state = recorded(StateFile::empty(), A, json!({"input": "x", "value": "v"}));
    let fingerprint = resolved_fingerprint(&ir.resources[0], &state, &Redactor::new()).unwrap();
    let settled: Settled = [(A.to_string(), fingerprint)].into();
    let analysis = analyse(&ir, &state, &[], &settled).unwrap();
    assert!(analysis.run.is_empty(), "{:?}", analysis.run);
    // Settled with another configuration: it runs again.
    let settled: Settled = [(A.to_string(), "another".to_string())].into();
    assert_eq!(analyse(&ir, &state, &[], &settled).unwrap().run, [A]);
}

#[test]
fn analyse_selects_a_target_with_what_it_depends_on_and_refuses_unknown_ones() {
    let ir = ir_of(
        vec![
            token("a", json!({"input": "x"})),
            token("b", json!({"input": reference(A, "value")})),
            token("c", json!({"input": "y"})),
        ],
        &[(A, B)],
    );
    let targets = [B.to_string()];
    let analysis = analyse(&ir, &StateFile::empty(), &targets, &HashMap::new()).unwrap();
    assert_eq!(analysis.run, [A, B]);
    let unknown = ["alpha.alpha_token.nope".to_string()];
    let err = analyse(&ir, &StateFile::empty(), &unknown, &HashMap::new()).err();
    assert!(
        matches!(&err, Some(EngineError::UnknownTarget(t)) if t == &unknown[0]),
        "{err:?}"
    );
}

#[test]
fn analyse_refuses_a_cycle_naming_its_members() {
    let ir = ir_of(
        vec![
            token("a", json!({"input": reference(B, "value")})),
            token("b", json!({"input": reference(A, "value")})),
        ],
        &[(A, B), (B, A)],
    );
    match analyse(&ir, &StateFile::empty(), &[], &HashMap::new()) {
        Err(EngineError::Cycle(cycles)) => {
            assert_eq!(cycles.len(), 1);
            assert!(cycles[0].contains(&A.to_string()) && cycles[0].contains(&B.to_string()));
        }
        Err(other) => panic!("not a cycle error: {other}"),
        Ok(_) => panic!("a cycle was analysed"),
    }
}

#[test]
fn the_loop_runs_a_phase_while_something_is_ready() {
    let ir = ir_of(vec![token("a", json!({"input": "x"}))], &[]);
    let analysis = analyse(&ir, &StateFile::empty(), &[], &HashMap::new()).unwrap();
    assert_eq!(stop_after_evaluation(&ir, &analysis, false), None);
}

#[test]
fn the_loop_converges_when_an_evaluation_leaves_nothing_to_run_or_wait_on() {
    let ir = ir_of(vec![token("a", json!({"input": "x"}))], &[]);
    let state = recorded(StateFile::empty(), A, json!({"input": "x", "value": "v"}));
    let settled: Settled = [(
        A.to_string(),
        resolved_fingerprint(&ir.resources[0], &state, &Redactor::new()).unwrap(),
    )]
    .into();
    let analysis = analyse(&ir, &state, &[], &settled).unwrap();
    assert_eq!(
        stop_after_evaluation(&ir, &analysis, false),
        Some(Stop::Fixpoint)
    );
    // The phase limit only stops a run with work left.
    assert_eq!(
        stop_after_evaluation(&ir, &analysis, true),
        Some(Stop::Fixpoint)
    );
}

#[test]
fn the_loop_stops_unresolved_when_nothing_runs_and_something_waits() {
    // `a` is settled; `b` waits on a value Nix has not computed (the ledger never had it).
    let ir = ir_of(
        vec![
            token("a", json!({"input": "x"})),
            token("b", json!({"input": derived(A, "missing")})),
        ],
        &[(A, B)],
    );
    let state = recorded(StateFile::empty(), A, json!({"input": "x", "value": "v"}));
    let settled: Settled = [(
        A.to_string(),
        resolved_fingerprint(&ir.resources[0], &state, &Redactor::new()).unwrap(),
    )]
    .into();
    let analysis = analyse(&ir, &state, &[], &settled).unwrap();
    let wait = Wait::Nix {
        resource: A.into(),
        attribute: "missing".into(),
    };
    let expected = vec![(B.to_string(), vec![wait])];
    assert_eq!(
        stop_after_evaluation(&ir, &analysis, false),
        Some(Stop::Unresolved(expected.clone()))
    );
    assert_eq!(
        stop_after_evaluation(&ir, &analysis, true),
        Some(Stop::PhaseLimit(expected))
    );
}

#[test]
fn after_a_phase_the_loop_evaluates_again_only_when_outputs_changed() {
    let ir = ir_of(
        vec![
            token("a", json!({"input": "x"})),
            token("b", json!({"input": derived(A, "value")})),
        ],
        &[(A, B)],
    );
    let analysis = analyse(&ir, &StateFile::empty(), &[], &HashMap::new()).unwrap();
    let waiting = vec![(
        B.to_string(),
        vec![Wait::Nix {
            resource: A.into(),
            attribute: "value".into(),
        }],
    )];
    assert_eq!(stop_after_phase(&ir, &analysis, true, false), None);
    assert_eq!(
        stop_after_phase(&ir, &analysis, false, false),
        Some(Stop::Unresolved(waiting.clone()))
    );
    assert_eq!(
        stop_after_phase(&ir, &analysis, true, true),
        Some(Stop::PhaseLimit(waiting))
    );
    // Nothing deferred and nothing new for Nix: the fixpoint, without another evaluation.
    let ir = ir_of(vec![token("a", json!({"input": "x"}))], &[]);
    let analysis = analyse(&ir, &StateFile::empty(), &[], &HashMap::new()).unwrap();
    assert_eq!(
        stop_after_phase(&ir, &analysis, false, false),
        Some(Stop::Fixpoint)
    );
    assert_eq!(
        stop_after_phase(&ir, &analysis, false, true),
        Some(Stop::Fixpoint)
    );
}
