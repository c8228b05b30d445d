//! The engine in process: canned IR documents instead of Nix, the fakes of `fakes/kit` as
//! in-process providers, the state in memory. No Nix, no child process, no gRPC: the phase loop,
//! cycles, waits, lifecycle rules, destroy order, failure skipping and `--target` are tested in
//! well under a second each.
//!
//! A test describes the plan as a function from the ledger to an IR document, which is what the
//! Nix plan is: a reference Nix would resolve once an output is in the ledger is written as the
//! value when the ledger has it and as `__derived` before.

mod lifecycle;
mod phases;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use nivis::diag::Diagnostics;
use nivis::engine::{
    Action, Engine, EngineError, Evaluator, Event, Launcher, Options, Report, Seams, StartInfo,
    StateAccess, Wait,
};
use nivis::ir::ProviderDecl;
use nivis::ledger::Ledger;
use nivis::provider::Provider;
use nivis::state::{LockHolder, LockedStore, MemoryStore, Mirror, StateError, StateFile};
use serde_json::{json, Value as Json};

#[path = "../../fakes/kit/mod.rs"]
#[allow(clippy::all)]
mod kit;

/// The plan: the IR for a ledger.
type Plan = Box<dyn FnMut(&Ledger) -> Json + Send>;

/// An [`Evaluator`] that calls the test's plan function.
struct Canned(Plan);

impl Evaluator for Canned {
    fn evaluate(&mut self, ledger: &Ledger) -> Result<(Vec<u8>, Duration), EngineError> {
        let doc = (self.0)(ledger);
        Ok((
            serde_json::to_vec(&doc).expect("IR serialises"),
            Duration::ZERO,
        ))
    }
}

/// A [`Launcher`] handing out in-process fakes: `alpha` and `beta`, with the test's knobs.
struct InProcess(kit::Knobs);

impl Launcher for InProcess {
    fn launch(
        &mut self,
        id: &str,
        decl: &ProviderDecl,
    ) -> Result<(Arc<dyn Provider>, StartInfo), Diagnostics> {
        let knobs = self.0.clone();
        let provider: Arc<dyn Provider> = match decl.source.as_str() {
            "provider-alpha" => Arc::new(kit::FakeProvider::new(
                "alpha",
                kit::alpha::Alpha::new(&knobs),
                knobs,
            )),
            "provider-beta" => Arc::new(kit::FakeProvider::new("beta", kit::beta::Beta, knobs)),
            other => panic!("provider {id}: no in-process fake for {other}"),
        };
        let info = StartInfo {
            path: "in-process".into(),
            protocol: "in-process".into(),
            startup: Duration::ZERO,
        };
        Ok((provider, info))
    }
}

/// State kept in memory across the runs of one test.
#[derive(Clone, Default)]
struct Memory(Mirror);

impl Memory {
    fn snapshot(&self) -> StateFile {
        self.0
            .lock()
            .unwrap()
            .clone()
            .unwrap_or_else(StateFile::empty)
    }

    /// The recorded attributes of `id`.
    fn attributes(&self, id: &str) -> Json {
        self.snapshot()
            .get(id)
            .unwrap_or_else(|| panic!("{id} is not in state"))
            .attributes
            .clone()
    }

    fn ids(&self) -> Vec<String> {
        self.snapshot().ids().map(str::to_string).collect()
    }
}

impl StateAccess for Memory {
    fn open_locked(
        &self,
        _holder: LockHolder,
        _wait: Option<Duration>,
    ) -> Result<Box<dyn LockedStore>, StateError> {
        Ok(Box::new(MemoryStore::mirrored(
            self.snapshot(),
            self.0.clone(),
        )))
    }

    fn read_only(&self) -> Result<StateFile, StateError> {
        Ok(self.snapshot())
    }

    fn env(&self) -> &str {
        "default"
    }
}

/// One test's world: its state, knobs and options; each command gets a fresh engine.
struct World {
    state: Memory,
    knobs: kit::Knobs,
    targets: Vec<String>,
}

/// What a command did: its result and every event.
struct Run {
    result: Result<Report, EngineError>,
    events: Vec<Event>,
}

impl Run {
    /// `(phase, id, action)` of every `finished` event, in order.
    fn finished(&self) -> Vec<(u32, String, String)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Finished {
                    phase, id, action, ..
                } => Some((*phase, id.clone(), action_name(action))),
                _ => None,
            })
            .collect()
    }

    /// `(id, action)` of every `planned` event, in order.
    fn planned(&self) -> Vec<(String, String)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Planned { id, action, .. } => Some((id.clone(), action_name(action))),
                _ => None,
            })
            .collect()
    }

    fn report(&self) -> &Report {
        match &self.result {
            Ok(r) => r,
            Err(e) => panic!("the command failed: {e}\nevents: {:#?}", self.events),
        }
    }

    fn error(&self) -> &EngineError {
        match &self.result {
            Ok(_) => panic!("the command succeeded; events: {:#?}", self.events),
            Err(e) => e,
        }
    }
}

fn action_name(a: &nivis::engine::Action) -> String {
    serde_json::to_value(a)
        .unwrap()
        .to_string()
        .replace('"', "")
}

impl World {
    fn new() -> World {
        World {
            state: Memory::default(),
            knobs: kit::Knobs::default(),
            targets: Vec::new(),
        }
    }

    fn options(&self) -> Options {
        Options {
            source: nivis::nixeval::PlanSource::File {
                path: "/nonexistent/plan.nix".into(),
                attr: None,
            },
            backend: nivis::state::Backend::Local {
                path: "/nonexistent/nivis.state.json".into(),
                env: "default".into(),
            },
            parallelism: 2,
            max_phases: None,
            targets: self.targets.clone(),
            build: false,
            refresh: false,
            vars: BTreeMap::new(),
            var_text: BTreeMap::new(),
            lock_timeout: None,
            command: "engine unit test".into(),
            install: nivis::registry::InstallOptions::new("/nonexistent", "/nonexistent"),
        }
    }

    /// Runs `command` on a fresh engine whose plan is `plan`.
    fn run(
        &self,
        plan: impl FnMut(&Ledger) -> Json + Send + 'static,
        command: impl FnOnce(&mut Engine<'_>) -> Result<Report, EngineError>,
    ) -> Run {
        let mut sink = nivis::engine::Collect::default();
        let seams = Seams {
            evaluator: Box::new(Canned(Box::new(plan))),
            launcher: Box::new(InProcess(self.knobs.clone())),
            state: Box::new(self.state.clone()),
        };
        let result = {
            let mut engine = Engine::with_seams(self.options(), &mut sink, seams);
            command(&mut engine)
        };
        Run {
            result,
            events: sink.0,
        }
    }

    fn apply(&self, plan: impl FnMut(&Ledger) -> Json + Send + 'static) -> Run {
        self.run(plan, |e| e.apply(None))
    }

    fn plan(&self, plan: impl FnMut(&Ledger) -> Json + Send + 'static) -> Run {
        self.run(plan, |e| e.plan())
    }

    fn destroy(&self, plan: impl FnMut(&Ledger) -> Json + Send + 'static) -> Run {
        self.run(plan, |e| e.destroy(None))
    }
}

/// An IR document with the fakes as providers, its edges found in the configurations (as
/// the Nix library records them).
fn ir(resources: Vec<Json>) -> Json {
    let mut edges = Vec::new();
    for r in &resources {
        for (attr, value) in r["config"].as_object().into_iter().flatten() {
            for from in targets(value) {
                let edge = json!({"from": from, "to": r["id"], "via": attr});
                if !edges.contains(&edge) {
                    edges.push(edge);
                }
            }
        }
    }
    json!({
        "schemaVersion": 1,
        "providers": {
            "alpha": {"source": "provider-alpha", "config": {}},
            "beta": {"source": "provider-beta", "config": {}},
        },
        "resources": resources,
        "data": [],
        "edges": edges,
        "nixConsumers": [],
        "variables": {},
    })
}

/// The resources a value refers to (`__ref`, `__derived`).
fn targets(value: &Json) -> Vec<String> {
    if let Some(r) = value.get("__ref") {
        return vec![r["resource"].as_str().unwrap().to_string()];
    }
    if let Some(d) = value.get("__derived") {
        return d["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                let i = i.as_str().unwrap();
                i[..i.rfind('.').unwrap()].to_string()
            })
            .collect();
    }
    match value {
        Json::Object(m) => m.values().flat_map(targets).collect(),
        Json::Array(a) => a.iter().flat_map(targets).collect(),
        _ => Vec::new(),
    }
}

/// A resource of the IR; `lifecycle` holds the fields to set.
fn resource(provider: &str, type_name: &str, name: &str, config: Json, lifecycle: Json) -> Json {
    let mut l = json!({"createBeforeDestroy": false, "ignoreChanges": [], "preventDestroy": false});
    for (k, v) in lifecycle.as_object().cloned().unwrap_or_default() {
        l[k] = v;
    }
    json!({
        "id": format!("{provider}.{type_name}.{name}"),
        "name": name,
        "provider": provider,
        "type": type_name,
        "config": config,
        "meta": {"dependsOn": [], "lifecycle": l},
    })
}

fn token(name: &str, config: Json) -> Json {
    resource("alpha", "alpha_token", name, config, json!({}))
}

/// What Nix would put for `<id>.<attr>`: the output once the ledger has it, else `__derived`.
fn derived(ledger: &Ledger, id: &str, attr: &str) -> Json {
    match ledger.outputs.get(id).and_then(|o| o.get(attr)) {
        Some(v) if !v.is_null() => v.clone(),
        _ => json!({"__derived": {"inputs": [format!("{id}.{attr}")]}}),
    }
}

/// A reference the executor resolves itself (TF→TF, same phase).
fn reference(id: &str, attr: &str) -> Json {
    json!({"__ref": {"resource": id, "path": [attr]}})
}
