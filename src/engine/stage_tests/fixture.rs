//! What the stage tests that call providers share: the `alpha` fake in process, IR of
//! `alpha_token`s, the run's options, and a phase applied to put objects in a state.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::{json, Value as Json};

use super::kit::{self, Knobs};
use super::{analyse, A, B};
use crate::engine::analysis::Analysis;
use crate::engine::error::EngineError;
use crate::engine::events::Sink;
use crate::engine::events::{Collect, Event};
use crate::engine::node::Mode;
use crate::engine::phase_owner::{run_phase, PhaseHost, PhaseInput, PhaseResult};
use crate::engine::{Mutation, Options};
use crate::ir::Ir;
use crate::provider::Provider;
use crate::state::{LockedStore, MemoryStore, StateFile};

/// The running providers of a stage's input: `alpha`, a fresh in-process fake with `knobs`.
pub(super) fn providers(knobs: &Knobs) -> HashMap<String, Arc<dyn Provider>> {
    let alpha = kit::FakeProvider::new("alpha", kit::alpha::Alpha::new(knobs), knobs.clone());
    let alpha: Arc<dyn Provider> = Arc::new(alpha);
    [("alpha".to_string(), alpha)].into()
}

/// Knobs whose `set` fills one of their lists.
pub(super) fn knobs(set: impl FnOnce(&mut Knobs)) -> Knobs {
    let mut knobs = Knobs::default();
    set(&mut knobs);
    knobs
}

/// A managed `alpha_token` named `name` with `config`; `meta` holds the fields to add to its
/// `meta` (`importId`) and its lifecycle (`preventDestroy`).
pub(super) fn token_with(name: &str, config: Json, meta: Json) -> Json {
    let mut lifecycle =
        json!({"createBeforeDestroy": false, "ignoreChanges": [], "preventDestroy": false});
    let mut m = json!({"dependsOn": []});
    for (k, v) in meta.as_object().cloned().unwrap_or_default() {
        match k.as_str() {
            "preventDestroy" => lifecycle[k] = v,
            _ => m[k] = v,
        }
    }
    m["lifecycle"] = lifecycle;
    json!({
        "id": format!("alpha.alpha_token.{name}"),
        "name": name,
        "provider": "alpha",
        "type": "alpha_token",
        "config": config,
        "meta": m,
    })
}

/// The `alpha_token` `name` labelled `label`, its `keeper` (forces replacement) reading
/// `keeper` when given: a reference makes it depend on another token.
pub(super) fn labelled(name: &str, label: &str, keeper: Option<Json>) -> Json {
    let config = match keeper {
        Some(k) => json!({"label": label, "keeper": k}),
        None => json!({"label": label}),
    };
    token_with(name, config, json!({}))
}

/// The IR of `resources` (provider `alpha`) with the edges of plain references `(from, to,
/// output)`: the edge names the output it reads, as the Nix library records it, so the
/// engine resolves the reference in the same phase.
pub(super) fn ir_with_refs(resources: Vec<Json>, refs: &[(&str, &str, &str)]) -> Ir {
    let mut doc = ir_document(resources);
    doc["edges"] = refs
        .iter()
        .map(|(from, to, output)| json!({"from": from, "to": to, "via": "keeper", "ref": [output]}))
        .collect();
    crate::ir::parse(&serde_json::to_vec(&doc).unwrap()).unwrap_or_else(|e| panic!("{e:?}"))
}

/// The IR document of `resources` (provider `alpha`), without edges.
fn ir_document(resources: Vec<Json>) -> Json {
    json!({
        "schemaVersion": 1,
        "providers": {"alpha": {"source": "provider-alpha", "config": {}}},
        "resources": resources,
        "data": [],
        "edges": [],
        "nixConsumers": [],
        "variables": {},
    })
}

/// Tokens `a`, `b` (its `keeper` a plain reference to `a.id`) and `c`, labelled with their
/// names; `b`'s meta gets `b_meta`.
pub(super) fn three_tokens(b_meta: Json) -> Ir {
    let b = token_with(
        "b",
        json!({"label": "b", "keeper": super::reference(A, "id")}),
        b_meta,
    );
    let tokens = vec![labelled("a", "a", None), b, labelled("c", "c", None)];
    ir_with_refs(tokens, &[(A, B, "id")])
}

/// The options a stage reads (parallelism, and `--refresh`, `--build`, a saved plan, all off).
pub(super) fn options() -> Options {
    Options {
        source: crate::nixeval::PlanSource::File {
            path: "/nonexistent/plan.nix".into(),
            attr: None,
        },
        backend: crate::state::Backend::Local {
            path: "/nonexistent/nivis.state.json".into(),
            env: "default".into(),
        },
        parallelism: 2,
        max_phases: None,
        targets: Vec::new(),
        replace: Vec::new(),
        build: false,
        refresh: false,
        vars: BTreeMap::new(),
        var_text: BTreeMap::new(),
        flag_vars: Vec::new(),
        secret_vars: Vec::new(),
        placeholder_variables: false,
        lock_timeout: None,
        operation_timeout: None,
        command: "engine stage test".into(),
        remote_states: Default::default(),
        redactor: crate::secrets::Redactor::new(),
        install: crate::registry::InstallOptions::new("/nonexistent", "/nonexistent"),
        saved: None,
        save: false,
        overrides: crate::policy::Overrides::default(),
    }
}

/// What one phase did: its result and the events it sent.
pub(super) struct Phase {
    pub(super) result: PhaseResult,
    pub(super) events: Vec<Event>,
}

/// Runs [`run_phase`] in `mode` on what the analysis of `ir` against `store`'s state makes
/// ready, with the `alpha` fake built from `knobs`.
pub(super) fn phase(ir: &Ir, store: &mut dyn LockedStore, mode: Mode, knobs: &Knobs) -> Phase {
    let analysis = analyse(ir, store.state(), &[], &HashMap::new()).expect("analysed");
    let input = PhaseInput {
        ir,
        analysis: &analysis,
        providers: providers(knobs),
        phase: 1,
        mode,
        replace_now: BTreeSet::new(),
        previewed: Default::default(),
    };
    let mut host = Host {
        sink: Collect::default(),
        opts: options(),
    };
    let result = run_phase(input, store, &mut host).expect("the phase ran");
    Phase {
        result,
        events: host.sink.0,
    }
}

/// A phase's host that collects its events; no wave joins its phases.
struct Host {
    sink: Collect,
    opts: Options,
}

impl PhaseHost for Host {
    fn sink(&mut self) -> &mut dyn Sink {
        &mut self.sink
    }

    fn opts(&self) -> &Options {
        &self.opts
    }

    fn analyse_wave<'i>(
        &self,
        _ir: &'i Ir,
        _state: &StateFile,
    ) -> Result<Analysis<'i>, EngineError> {
        Err(EngineError::Io("no wave joins a stage test's phase".into()))
    }
}

/// Apply mode, with the permission to change things.
pub(super) fn applying() -> Mode {
    Mode::Apply(Mutation::for_tests())
}

/// A state holding the objects of `ir`, created by one applied phase of the `alpha` fake.
pub(super) fn created(ir: &Ir) -> MemoryStore {
    let mut store = MemoryStore::from_state(StateFile::empty());
    let applied = phase(ir, &mut store, applying(), &Knobs::default());
    assert_eq!(applied.result.failed, 0, "{:#?}", applied.events);
    store
}

/// The ids of `state`, in its order.
pub(super) fn ids(state: &StateFile) -> Vec<String> {
    state.ids().map(str::to_string).collect()
}
