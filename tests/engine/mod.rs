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
mod plan_roundtrip;
mod redaction;
mod saved;
mod truth;

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
use nivis::secrets::Redactor;
use nivis::state::{LockHolder, LockedStore, MemoryStore, Mirror, StateError, StateFile};
use serde_json::{json, Value as Json};

#[path = "../../fakes/kit/mod.rs"]
#[allow(
    clippy::all,
    reason = "the fakes' kit is compiled again here as a test module; its lints are checked where it is a binary"
)]
mod kit;

/// The plan: the IR for a ledger.
type Plan = Box<dyn FnMut(&Ledger) -> Json + Send>;

/// An [`Evaluator`] that calls the test's plan function.
struct Canned(Plan);

impl Evaluator for Canned {
    fn evaluate(&mut self, ledger: Ledger) -> Result<(Vec<u8>, Duration), EngineError> {
        let doc = (self.0)(&ledger);
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
    /// `--replace`.
    replace: Vec<String>,
    /// `plan --out`: the report carries the saved plan.
    save: bool,
    /// `apply FILE`.
    saved: Option<Arc<nivis::engine::plan_file::SavedPlan>>,
    /// The run's secrets: every engine of this world is given a clone, so it sees what
    /// they learnt.
    redactor: Redactor,
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

/// The action's JSON name; a replacement is `replace`, whichever order it goes in.
fn action_name(a: &nivis::engine::Action) -> String {
    a.class().to_string()
}

impl World {
    fn new() -> World {
        World {
            state: Memory::default(),
            knobs: kit::Knobs::default(),
            targets: Vec::new(),
            replace: Vec::new(),
            save: false,
            saved: None,
            redactor: Redactor::new(),
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
            replace: self.replace.clone(),
            saved: self.saved.clone(),
            save: self.save,
            build: false,
            refresh: false,
            vars: BTreeMap::new(),
            var_text: BTreeMap::new(),
            flag_vars: Vec::new(),
            secret_vars: Vec::new(),
            placeholder_variables: false,
            lock_timeout: None,
            operation_timeout: None,
            command: "engine unit test".into(),
            install: nivis::registry::InstallOptions::new("/nonexistent", "/nonexistent"),
            overrides: Default::default(),
            remote_states: Default::default(),
            redactor: self.redactor.clone(),
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
/// the Nix library records them: a value Nix resolved keeps its edge, and a plain reference's
/// edge names the output it reads).
fn ir(mut resources: Vec<Json>) -> Json {
    let mut edges = Vec::new();
    for r in &mut resources {
        let to = r["id"].clone();
        if let Some(config) = r["config"].as_object_mut() {
            for (attr, value) in config.iter_mut() {
                *value = lower(std::mem::take(value), &mut |from, reference| {
                    let mut edge = json!({"from": from, "to": to, "via": attr});
                    if let Some(path) = reference {
                        edge["ref"] = path;
                    }
                    if !edges.contains(&edge) {
                        edges.push(edge);
                    }
                });
            }
        }
    }
    json!({
        "schemaVersion": 1,
        "providers": {
            "alpha": {"source": "provider-alpha", "config": {}},
            "beta": {"source": "provider-beta", "config": {}},
        },
        "resources": resources.iter().filter(|r| !is_data(r)).collect::<Vec<_>>(),
        "data": resources.iter().filter(|r| is_data(r)).collect::<Vec<_>>(),
        "edges": edges,
        "nixConsumers": [],
        "variables": {},
    })
}

/// Turns the test's stand-ins for Nix values into IR, reporting each edge (`from`, and the
/// output path for a plain reference).
fn lower(value: Json, edge: &mut dyn FnMut(&str, Option<Json>)) -> Json {
    if let Some(r) = value.get("__ref") {
        edge(r["resource"].as_str().unwrap(), Some(r["path"].clone()));
        return value;
    }
    if let Some(r) = value.get("__nixRef") {
        edge(r["resource"].as_str().unwrap(), Some(r["path"].clone()));
        return match &r["value"] {
            Json::Null => json!({"__ref": {"resource": r["resource"], "path": r["path"]}}),
            known => known.clone(),
        };
    }
    if let Some(d) = value.get("__nixDerived") {
        let inputs: Vec<&str> = d["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_str().unwrap())
            .collect();
        for i in &inputs {
            edge(&i[..i.rfind('.').unwrap()], None);
        }
        return match &d["value"] {
            Json::Null => json!({"__derived": {"inputs": inputs}}),
            known => known.clone(),
        };
    }
    match value {
        Json::Object(m) => Json::Object(m.into_iter().map(|(k, v)| (k, lower(v, edge))).collect()),
        Json::Array(a) => Json::Array(a.into_iter().map(|v| lower(v, edge)).collect()),
        other => other,
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

fn is_data(node: &Json) -> bool {
    node["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("data."))
}

/// A data source `alpha_lookup` (`key` → `result`); `ir` puts it in the IR's `data`.
fn lookup(name: &str, config: Json) -> Json {
    json!({
        "id": format!("data.alpha.alpha_lookup.{name}"),
        "name": name,
        "provider": "alpha",
        "type": "alpha_lookup",
        "config": config,
        "meta": {"dependsOn": []},
    })
}

fn token(name: &str, config: Json) -> Json {
    resource("alpha", "alpha_token", name, config, json!({}))
}

/// What Nix would put for a value computed from `<id>.<attr>` (`lib.str`, `compute`): the
/// output once the ledger has it, else `__derived`; the edge stays either way.
fn derived(ledger: &Ledger, id: &str, attr: &str) -> Json {
    derived_from(ledger, &[(id, attr)], |values| values[0].clone())
}

/// A value Nix computes with `f` from several outputs, once the ledger has all of them.
fn derived_from(ledger: &Ledger, inputs: &[(&str, &str)], f: impl Fn(&[Json]) -> Json) -> Json {
    let known: Option<Vec<Json>> = inputs
        .iter()
        .map(|(id, attr)| output(ledger, id, attr))
        .collect();
    let names: Vec<String> = inputs
        .iter()
        .map(|(id, attr)| format!("{id}.{attr}"))
        .collect();
    json!({"__nixDerived": {"inputs": names, "value": known.map(|v| f(&v))}})
}

/// What Nix puts for a plain reference `<id>.<attr>` (`refAttr`): the output once the ledger
/// has it, else `__ref`; its edge names the output it reads.
fn nix_ref(ledger: &Ledger, id: &str, attr: &str) -> Json {
    json!({"__nixRef": {"resource": id, "path": [attr], "value": output(ledger, id, attr)}})
}

/// The ledger's value of `<id>.<attr>`.
fn output(ledger: &Ledger, id: &str, attr: &str) -> Option<Json> {
    ledger
        .outputs
        .get(id)
        .and_then(|o| o.get(attr))
        .filter(|v| !v.is_null())
        .cloned()
}

/// A reference the executor resolves itself (TF→TF, same phase).
fn reference(id: &str, attr: &str) -> Json {
    json!({"__ref": {"resource": id, "path": [attr]}})
}
