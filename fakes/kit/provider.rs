//! [`FakeProvider`]: a fake behaviour as a `nivis::provider::Provider`.
//!
//! Owns the strictness shared by every fake, the checks a real provider makes implicitly:
//! types must exist, stored state must not be newer than the schema, the private bytes handed
//! out with a plan or an object must come back, applies must get a wholly known config. It
//! also writes the object log and honours the slow and noise knobs. The wire belongs to
//! `serve`; what a resource does belongs to the [`Behaviour`].

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Mutex;
use std::time::SystemTime;

use nivis::diag::{Diagnostic, Diagnostics};
use nivis::provider::{
    ApplyRequest, ApplyResponse, CallResult, ImportedResource, OpenedEphemeral, PlanRequest,
    PlanResponse, Provider, ReadResponse, RenewedEphemeral,
};
use nivis::schema::ProviderSchema;
use nivis::value::{self, PathStep, Value};

use super::build::get_str;
use super::knobs::{named, write_noise, Knobs};

/// Private bytes the fakes hand out from plan and expect back in apply.
pub(crate) const PLANNED_PRIVATE: &[u8] = b"{\"fake\":\"planned\"}";
/// Private bytes the fakes store with every object and expect back on read and plan.
pub(crate) const STATE_PRIVATE: &[u8] = b"{\"fake\":\"state\"}";

/// What one fake provider does with its resources; [`FakeProvider`] does the rest.
pub(crate) trait Behaviour: Send + Sync + 'static {
    /// The provider's schema.
    fn schema(&self) -> ProviderSchema;
    /// Extra validation of a resource or data source config; returns error messages with paths.
    fn validate(&self, _type_name: &str, _config: &Value) -> Vec<(String, Vec<PathStep>)> {
        Vec::new()
    }
    /// Plans a change: returns the planned state and the paths that force replacement.
    fn plan(
        &self,
        type_name: &str,
        prior: &Value,
        proposed: &Value,
    ) -> Result<(Value, Vec<Vec<PathStep>>), String>;
    /// Applies a change; `planned` is `Null` for a delete. A failure may carry the partial
    /// object that exists despite the error.
    fn apply(
        &self,
        type_name: &str,
        prior: &Value,
        planned: &Value,
        knobs: &Knobs,
    ) -> Result<Value, (Option<Value>, String)>;
    /// Refreshes an object (default: unchanged).
    fn read(&self, _type_name: &str, state: &Value, _knobs: &Knobs) -> Value {
        state.clone()
    }
    /// Upgrades stored JSON of `version` to the current schema (default: decode as is).
    fn upgrade(
        &self,
        type_name: &str,
        _version: i64,
        json: &serde_json::Value,
    ) -> Result<Value, String> {
        let schema = self.schema();
        let ty = schema.resources[type_name].block.implied_type();
        value::json::from_state_json(json, &ty).map_err(|e| e.to_string())
    }
    /// Reads a data source.
    fn read_data(&self, type_name: &str, config: &Value) -> Result<Value, String>;
    /// Imports an object by id.
    fn import(&self, type_name: &str, id: &str) -> Result<Value, String>;
    /// The remote identity of an object, for the object log (default: its `id` attribute).
    fn object_id(&self, object: &Value) -> Option<String> {
        get_str(object, "id")
    }
    /// The configuration value that names an object in tests (alpha: `label`, beta: `from`).
    fn object_label(&self, object: &Value) -> Option<String>;
    /// Opens an ephemeral resource: its ticket id (the private bytes) and its result.
    fn open(&self, type_name: &str, _config: &Value) -> Result<(String, Value), String> {
        Err(format!("fake: no ephemeral resource type {type_name}"))
    }
}

/// A fake provider: a [`Behaviour`], its schema, its name and its knobs.
pub(crate) struct FakeProvider<B: Behaviour> {
    name: &'static str,
    behaviour: B,
    schema: ProviderSchema,
    knobs: Knobs,
    /// Ephemeral tickets opened and not closed yet: Renew and Close must name one.
    open_tickets: Mutex<BTreeSet<String>>,
}

fn error(summary: impl Into<String>) -> Diagnostics {
    Diagnostics::from(Diagnostic::error(summary))
}

impl<B: Behaviour> FakeProvider<B> {
    /// The fake `name` (as the object log names it) doing what `behaviour` does.
    pub(crate) fn new(name: &'static str, behaviour: B, knobs: Knobs) -> Self {
        FakeProvider {
            name,
            schema: behaviour.schema(),
            behaviour,
            knobs,
            open_tickets: Mutex::new(BTreeSet::new()),
        }
    }

    /// The knobs this fake runs with.
    pub(crate) fn knobs(&self) -> &Knobs {
        &self.knobs
    }

    fn validate(&self, type_name: &str, config: &Value, known: bool) -> Diagnostics {
        self.log_validation(type_name, config);
        if !known {
            return error(format!("fake: unknown type {type_name}"));
        }
        Diagnostics(
            self.behaviour
                .validate(type_name, config)
                .into_iter()
                .map(|(msg, path)| Diagnostic::error(msg).at(path))
                .collect(),
        )
    }

    /// Appends `{"provider", "type", "label"}` to the validation log, if there is one.
    fn log_validation(&self, type_name: &str, config: &Value) {
        let label = label_of(config);
        let line = serde_json::json!({"provider": self.name, "type": type_name, "label": label});
        append_line(self.knobs.validate_log.as_deref(), &line);
    }

    /// Appends `{"call": "read"|"plan", "provider", "type", "label"}` to the call log, if there
    /// is one; `object` is the object read, or the configuration planned.
    fn log_call(&self, call: &str, type_name: &str, object: &Value) {
        let line = serde_json::json!({
            "call": call, "provider": self.name, "type": type_name, "label": label_of(object),
        });
        append_line(self.knobs.call_log.as_deref(), &line);
    }

    /// Appends `{"provider", "type", "version", "label"}` to the upgrade log, if there is one.
    fn log_upgrade(&self, type_name: &str, version: i64, stored: &serde_json::Value) {
        let line = serde_json::json!({
            "provider": self.name, "type": type_name, "version": version, "label": stored["label"],
        });
        append_line(self.knobs.upgrade_log.as_deref(), &line);
    }

    /// Writes the noise the knobs ask for (see [`write_noise`]).
    pub(crate) fn noise(&self, tag: &str) {
        if let Some(kib) = self.knobs.noise_kib {
            write_noise(kib, tag);
        }
    }

    /// Appends one line to the object log, if there is one: a JSON object `{"op":
    /// "create"|"delete", "provider", "type", "id", "label"}`, one per remote object created or
    /// deleted, written before the answer leaves the provider (the object exists, or is gone,
    /// from that moment). Tests compare the objects alive by this log with what state records.
    fn log_object(&self, op: &str, type_name: &str, id: &str, label: Option<&str>) {
        self.log_line(serde_json::json!({
            "op": op, "provider": self.name, "type": type_name, "id": id, "label": label,
        }));
    }

    /// Appends one JSON line to the object log, if there is one. Besides creates and deletes:
    /// `open`/`renew`/`close` of an ephemeral ticket (`id`; an open also gives the `token` it
    /// issued) and `write-only` (`id` of the object, `attr`, and the `value` received), the
    /// provider's view of the remote world.
    fn log_line(&self, line: serde_json::Value) {
        let Some(path) = &self.knobs.object_log else {
            return;
        };
        let mut line = line.to_string();
        line.push('\n');
        // One write with O_APPEND: lines from concurrent handlers and processes never interleave.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            eprintln!(
                "fake: cannot append to the object log {}: {e}",
                path.display()
            );
            std::process::exit(3);
        }
    }

    /// Logs each write-only value an apply received in its configuration (the remote object
    /// takes it; state never sees it).
    fn log_write_only(&self, type_name: &str, config: &Value, new: &Value) {
        let Some(block) = self.schema.resources.get(type_name).map(|s| &s.block) else {
            return;
        };
        for path in block.write_only_paths(config) {
            let received = config.get_path(&path).and_then(Value::as_str);
            self.log_line(serde_json::json!({
                "op": "write-only", "provider": self.name, "type": type_name,
                "id": self.behaviour.object_id(new), "attr": value::render_path(&path),
                "value": received,
            }));
        }
    }

    /// The time to ask for a renewal at, if the knobs want renewals.
    fn renew_at(&self) -> Option<SystemTime> {
        self.knobs.renew_after.map(|d| SystemTime::now() + d)
    }

    /// Checks that `private` names an open ticket (and forgets it when `closing`).
    fn ticket(&self, rpc: &str, private: Option<&[u8]>, closing: bool) -> CallResult<String> {
        let id = String::from_utf8_lossy(private.unwrap_or_default()).into_owned();
        let mut open = self.open_tickets.lock().unwrap_or_else(|p| p.into_inner());
        let known = if closing {
            open.remove(&id)
        } else {
            open.contains(&id)
        };
        if known {
            Ok(id)
        } else {
            Err(error(format!(
                "fake: {rpc} for ticket {id:?}, which is not open (private data lost?)"
            )))
        }
    }

    /// Logs what an apply did to the remote object: a create (no prior object), a delete (no
    /// new one), or, when the identity changed in an update, both.
    fn log_apply(&self, type_name: &str, prior: &Value, new: &Value) {
        let id = |v: &Value| self.behaviour.object_id(v).filter(|_| !v.is_null());
        let (old_id, new_id) = (id(prior), id(new));
        if old_id == new_id {
            return;
        }
        if let Some(id) = &old_id {
            let label = self.behaviour.object_label(prior);
            self.log_object("delete", type_name, id, label.as_deref());
        }
        if let Some(id) = &new_id {
            let label = self.behaviour.object_label(new);
            self.log_object("create", type_name, id, label.as_deref());
        }
    }
}

impl<B: Behaviour> Provider for FakeProvider<B> {
    fn schema(&self) -> &ProviderSchema {
        &self.schema
    }

    fn validate_provider_config(&self, _config: &Value) -> CallResult<Diagnostics> {
        Ok(Diagnostics::new())
    }

    fn configure(&self, _config: &Value) -> CallResult<Diagnostics> {
        Ok(Diagnostics::new())
    }

    fn validate_resource_config(&self, type_name: &str, config: &Value) -> CallResult<Diagnostics> {
        let known = self.schema.resources.contains_key(type_name);
        Ok(self.validate(type_name, config, known))
    }

    fn validate_data_config(&self, type_name: &str, config: &Value) -> CallResult<Diagnostics> {
        let known = self.schema.data_sources.contains_key(type_name);
        Ok(self.validate(type_name, config, known))
    }

    fn upgrade_resource_state(
        &self,
        type_name: &str,
        schema_version: i64,
        raw_json: &[u8],
    ) -> CallResult<(Value, Diagnostics)> {
        let Some(s) = self.schema.resources.get(type_name) else {
            return Err(error(format!("fake: unknown resource type {type_name}")));
        };
        if schema_version > s.version {
            return Err(error(format!(
                "fake: state version {schema_version} is newer than schema version {}",
                s.version
            )));
        }
        let json: serde_json::Value = serde_json::from_slice(raw_json)
            .map_err(|e| error(format!("fake: raw state is not JSON: {e}")))?;
        self.log_upgrade(type_name, schema_version, &json);
        match self.behaviour.upgrade(type_name, schema_version, &json) {
            Ok(v) => Ok((v, Diagnostics::new())),
            Err(e) => Err(error(format!("fake: cannot upgrade state: {e}"))),
        }
    }

    fn read_resource(
        &self,
        type_name: &str,
        current: &Value,
        private: &[u8],
    ) -> CallResult<ReadResponse> {
        self.log_call("read", type_name, current);
        let mut diagnostics = Diagnostics::new();
        if private != STATE_PRIVATE {
            diagnostics.push(Diagnostic::error(
                "fake: ReadResource did not receive the private data stored with the object",
            ));
        }
        // Objects are named by their label (alpha) or `from` (beta), as every knob names them.
        let name = get_str(current, "label").or_else(|| get_str(current, "from"));
        if let Some(name) = name.filter(|n| named(&self.knobs.fail_read_on, n)) {
            diagnostics.push(Diagnostic::error(format!(
                "fake: cannot read {name}: the API refused (NIVIS_FAKE_FAIL_READ_ON)"
            )));
            return Ok(ReadResponse {
                new_state: current.clone(),
                private: STATE_PRIVATE.to_vec(),
                diagnostics,
            });
        }
        Ok(ReadResponse {
            new_state: self.behaviour.read(type_name, current, &self.knobs),
            private: STATE_PRIVATE.to_vec(),
            diagnostics,
        })
    }

    fn plan_resource_change(&self, r: PlanRequest<'_>) -> CallResult<PlanResponse> {
        self.noise("plan");
        self.log_call("plan", r.type_name, r.config);
        if !r.prior_state.is_null()
            && r.prior_private != STATE_PRIVATE
            && r.prior_private != PLANNED_PRIVATE
        {
            return Err(error(
                "fake: PlanResourceChange did not receive the object's private data",
            ));
        }
        let Some(block) = self.schema.resources.get(r.type_name).map(|s| &s.block) else {
            return Err(error(format!(
                "fake: unknown resource type {}",
                r.type_name
            )));
        };
        if let Some(path) = block.write_only_paths(r.prior_state).first() {
            return Err(error(format!(
                "fake: the prior state holds the write-only attribute {}: it was stored",
                value::render_path(path)
            )));
        }
        let (mut planned_state, requires_replace) = self
            .behaviour
            .plan(r.type_name, r.prior_state, r.proposed_new_state)
            .map_err(error)?;
        block.null_write_only(&mut planned_state);
        // The empty-at-read knob makes the fake an SDKv2 provider for that object: its plan
        // keeps the empty collections its read returned where the configuration says null
        // (the SDK cannot tell them apart), which the legacy type system allows.
        let sdk_like = self
            .behaviour
            .object_label(r.prior_state)
            .is_some_and(|l| super::knobs::named(&self.knobs.empty_at_read_on, &l));
        if sdk_like {
            keep_empty_collections(&mut planned_state, r.prior_state);
        }
        Ok(PlanResponse {
            planned_state,
            requires_replace,
            planned_private: PLANNED_PRIVATE.to_vec(),
            legacy_type_system: sdk_like,
            diagnostics: Diagnostics::new(),
        })
    }

    fn apply_resource_change(&self, r: ApplyRequest<'_>) -> CallResult<ApplyResponse> {
        if let Some(slow) = self.knobs.slow {
            std::thread::sleep(slow);
        }
        let label = (self.behaviour.object_label(r.planned_state))
            .or_else(|| self.behaviour.object_label(r.prior_state));
        if let Some(latency) = self.knobs.latency_of(label.as_deref()) {
            std::thread::sleep(latency);
        }
        self.knobs.hold(label.as_deref());
        self.noise("apply");
        if !r.config.is_known() {
            return Err(error(
                "fake: bad apply request: config holds unknown values at apply",
            ));
        }
        let (prior, planned) = (r.prior_state, r.planned_state);
        if !planned.is_null() && r.planned_private != PLANNED_PRIVATE {
            return Ok(ApplyResponse {
                new_state: prior.clone(),
                private: Vec::new(),
                legacy_type_system: false,
                diagnostics: error(
                    "fake: ApplyResourceChange did not receive the planned private data",
                ),
            });
        }
        let (new_state, diagnostics) =
            match self
                .behaviour
                .apply(r.type_name, prior, planned, &self.knobs)
            {
                Ok(new) => (new, Diagnostics::new()),
                Err((partial, e)) => (partial.unwrap_or_else(|| prior.clone()), error(e)),
            };
        let mut new_state = new_state;
        self.log_write_only(r.type_name, r.config, &new_state);
        if let Some(s) = self.schema.resources.get(r.type_name) {
            s.block.null_write_only(&mut new_state);
        }
        self.log_apply(r.type_name, prior, &new_state);
        let private = if new_state.is_null() {
            Vec::new()
        } else {
            STATE_PRIVATE.to_vec()
        };
        Ok(ApplyResponse {
            new_state,
            private,
            legacy_type_system: false,
            diagnostics,
        })
    }

    fn import_resource_state(
        &self,
        type_name: &str,
        id: &str,
    ) -> CallResult<(Vec<ImportedResource>, Diagnostics)> {
        let mut state = self.behaviour.import(type_name, id).map_err(error)?;
        // With an object log, only objects alive by the log exist: another id is not found
        // (no object, no error, as real providers answer), and the object keeps its label.
        if let Some(path) = &self.knobs.object_log {
            match live_label(path, self.name, id) {
                None => return Ok((Vec::new(), Diagnostics::new())),
                Some(label) => {
                    if let (Value::Map(m), Some(label)) = (&mut state, label) {
                        m.insert("label".into(), Value::String(label));
                    }
                }
            }
        }
        let imported = ImportedResource {
            type_name: type_name.to_string(),
            state,
            private: STATE_PRIVATE.to_vec(),
        };
        // NIVIS_FAKE_IMPORT_MANY: the answer holds the object twice (a provider that imports
        // related objects along with the one asked for).
        let copies = if super::knobs::env("NIVIS_FAKE_IMPORT_MANY").is_some() {
            2
        } else {
            1
        };
        Ok((vec![imported; copies], Diagnostics::new()))
    }

    fn read_data_source(
        &self,
        type_name: &str,
        config: &Value,
    ) -> CallResult<(Value, Diagnostics)> {
        if !self.schema.data_sources.contains_key(type_name) {
            return Err(error(format!("fake: unknown data source {type_name}")));
        }
        let state = self.behaviour.read_data(type_name, config).map_err(error)?;
        Ok((state, Diagnostics::new()))
    }

    fn stop(&self) -> CallResult<()> {
        Ok(())
    }

    fn validate_ephemeral_config(
        &self,
        type_name: &str,
        config: &Value,
    ) -> CallResult<Diagnostics> {
        let known = self.schema.ephemeral_resources.contains_key(type_name);
        Ok(self.validate(type_name, config, known))
    }

    fn open_ephemeral(&self, type_name: &str, config: &Value) -> CallResult<OpenedEphemeral> {
        if !config.is_known() {
            return Err(error("fake: OpenEphemeralResource got an unknown config"));
        }
        let (id, result) = self.behaviour.open(type_name, config).map_err(error)?;
        self.open_tickets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone());
        let token = get_str(&result, "token");
        self.log_line(serde_json::json!({
            "op": "open", "provider": self.name, "type": type_name, "id": id, "token": token,
        }));
        Ok(OpenedEphemeral {
            result,
            private: Some(id.into_bytes()),
            renew_at: self.renew_at(),
            diagnostics: Diagnostics::new(),
        })
    }

    fn renew_ephemeral(
        &self,
        type_name: &str,
        private: Option<&[u8]>,
    ) -> CallResult<RenewedEphemeral> {
        let id = self.ticket("RenewEphemeralResource", private, false)?;
        self.log_line(serde_json::json!({
            "op": "renew", "provider": self.name, "type": type_name, "id": id,
        }));
        Ok(RenewedEphemeral {
            private: Some(id.into_bytes()),
            renew_at: self.renew_at(),
            diagnostics: Diagnostics::new(),
        })
    }

    fn close_ephemeral(&self, type_name: &str, private: Option<&[u8]>) -> CallResult<Diagnostics> {
        let id = self.ticket("CloseEphemeralResource", private, true)?;
        self.log_line(serde_json::json!({
            "op": "close", "provider": self.name, "type": type_name, "id": id,
        }));
        Ok(Diagnostics::new())
    }
}

/// The label of the object `id` of `provider` if it is alive by the object log at `path`
/// (`Some(None)`: alive without a label), `None` if it is not.
fn live_label(path: &std::path::Path, provider: &str, id: &str) -> Option<Option<String>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut alive = None;
    for line in text.lines() {
        let Ok(e) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if e["provider"] != provider || e["id"] != id {
            continue;
        }
        alive = match e["op"].as_str() {
            Some("create") => Some(e["label"].as_str().map(str::to_string)),
            _ => None,
        };
    }
    alive
}

/// Appends `line` to the call log at `path`, if there is one (one write: lines from
/// concurrent calls never interleave).
/// An object's or configuration's `label`, as the logs name it (`(unknown)` when not known).
fn label_of(object: &Value) -> Option<String> {
    match object {
        Value::Map(m) => m.get("label").and_then(|v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Unknown => Some("(unknown)".to_string()),
            _ => None,
        }),
        _ => None,
    }
}

fn append_line(path: Option<&std::path::Path>, line: &serde_json::Value) {
    let Some(path) = path else {
        return;
    };
    let mut text = line.to_string();
    text.push('\n');
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
}

/// Sets each top-level attribute of `planned` that is null to `prior`'s value where that is an
/// empty list, set or map: what an SDKv2 provider plans after reading `{}` for a null.
fn keep_empty_collections(planned: &mut Value, prior: &Value) {
    let (Value::Map(planned), Value::Map(prior)) = (planned, prior) else {
        return;
    };
    for (name, old) in prior {
        let empty = matches!(old, Value::List(v) if v.is_empty())
            || matches!(old, Value::Map(m) if m.is_empty());
        if empty && planned.get(name).is_some_and(Value::is_null) {
            planned.insert(name.clone(), old.clone());
        }
    }
}
