//! The plugin side shared by the fake providers: go-plugin handshake, a tfplugin6 gRPC server on
//! a unix socket, and translation between the wire and the [`Fake`] trait.
//!
//! The fakes are real plugin binaries: Nivis (and OpenTofu) start them exactly as they start any
//! provider. They decode every request strictly with the schema, so a client that sends partial
//! objects or drops private data fails here just as it would against a real provider.
#![allow(dead_code)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use grpcio::{
    Environment, Marshaller, Method, MethodType, RpcContext, RpcStatus, RpcStatusCode,
    ServerBuilder, ServerCredentials, ServiceBuilder, UnarySink,
};
use nivis::plugin::wire::plugin as go_plugin;
use nivis::plugin::wire::tfplugin6 as pb;
use nivis::schema::{AttrType, Block, BlockNesting, ProviderSchema, Schema};
use nivis::value::{self, PathStep, Type, Value};
use protobuf::{EnumOrUnknown, Message, MessageField};

/// What a fake provider implements; the server does the wire work.
pub trait Fake: Send + Sync + 'static {
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
    ) -> Result<Value, (Option<Value>, String)>;
    /// Refreshes an object (default: unchanged).
    fn read(&self, _type_name: &str, state: &Value) -> Value {
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
}

const MAGIC_COOKIE_VALUE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";
/// Private bytes the fakes hand out from plan and expect back in apply.
const PLANNED_PRIVATE: &[u8] = b"{\"fake\":\"planned\"}";
/// Private bytes the fakes store with every object and expect back on read and plan.
const STATE_PRIVATE: &[u8] = b"{\"fake\":\"state\"}";

/// Reads an environment knob.
pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Sleeps if `NIVIS_FAKE_SLOW_MS` asks for it.
pub fn maybe_slow() {
    if let Some(ms) = env("NIVIS_FAKE_SLOW_MS").and_then(|v| v.parse::<u64>().ok()) {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// Writes `NIVIS_FAKE_NOISE` KiB to stdout and stderr, to prove a chatty provider never blocks.
pub fn maybe_noise(tag: &str) {
    if let Some(kib) = env("NIVIS_FAKE_NOISE").and_then(|v| v.parse::<usize>().ok()) {
        let line = format!("{tag}: {}\n", "noise ".repeat(20));
        let mut err = std::io::stderr().lock();
        let mut out = std::io::stdout().lock();
        let mut written = 0;
        while written < kib * 1024 {
            let _ = err.write_all(line.as_bytes());
            let _ = out.write_all(line.as_bytes());
            written += line.len();
        }
    }
}

/// Appends one line to the object log named by `NIVIS_FAKE_OBJECT_LOG`, if set: a JSON object
/// `{"op": "create"|"delete", "provider", "type", "id", "label"}`, one per remote object created
/// or deleted, written before the answer leaves the provider (the object exists, or is gone,
/// from that moment). Tests compare the objects alive by this log with what state records.
pub fn log_object(op: &str, provider: &str, type_name: &str, id: &str, label: Option<&str>) {
    let Some(path) = env("NIVIS_FAKE_OBJECT_LOG") else {
        return;
    };
    let mut line = serde_json::json!({
        "op": op, "provider": provider, "type": type_name, "id": id, "label": label,
    })
    .to_string();
    line.push('\n');
    // One write with O_APPEND: lines from concurrent handlers and processes never interleave.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        eprintln!("fake: cannot append to the object log {path}: {e}");
        std::process::exit(3);
    }
}

/// Logs what an apply did to the remote object: a create (no prior object), a delete (no new
/// one), or, when the identity changed in an update, both.
fn log_apply<F: Fake>(fake: &F, provider: &str, type_name: &str, prior: &Value, new: &Value) {
    let old_id = fake
        .object_id(prior)
        .filter(|_| !matches!(prior, Value::Null));
    let new_id = fake.object_id(new).filter(|_| !matches!(new, Value::Null));
    if old_id == new_id {
        return;
    }
    if let Some(id) = &old_id {
        log_object(
            "delete",
            provider,
            type_name,
            id,
            fake.object_label(prior).as_deref(),
        );
    }
    if let Some(id) = &new_id {
        log_object(
            "create",
            provider,
            type_name,
            id,
            fake.object_label(new).as_deref(),
        );
    }
}

/// Prints a first stdout line of `NIVIS_FAKE_HANDSHAKE_JUNK` bytes (no `|`) before the real
/// handshake, as a hostile or broken wrapper would.
fn maybe_junk_handshake() {
    if let Some(n) = env("NIVIS_FAKE_HANDSHAKE_JUNK").and_then(|v| v.parse::<usize>().ok()) {
        let mut out = std::io::stdout().lock();
        let chunk = [b'x'; 8192];
        let mut left = n;
        while left > 0 {
            let k = left.min(chunk.len());
            let _ = out.write_all(&chunk[..k]);
            left -= k;
        }
        let _ = out.write_all(b"\n");
    }
}

/// With `NIVIS_FAKE_ENDLESS=stdout` (or `stderr`), writes one line that never ends to that
/// stream for the rest of the process's life, as fast as the reader takes it.
fn maybe_endless_line() {
    let Some(stream) = env("NIVIS_FAKE_ENDLESS") else {
        return;
    };
    std::thread::spawn(move || {
        let chunk = [b'y'; 65536];
        loop {
            let written = if stream == "stdout" {
                std::io::stdout().lock().write_all(&chunk)
            } else {
                std::io::stderr().lock().write_all(&chunk)
            };
            if written.is_err() {
                return;
            }
        }
    });
}

/// Serves `fake` as a go-plugin tfplugin6 provider until the client shuts it down.
pub fn serve<F: Fake>(name: &'static str, fake: F) -> ! {
    if std::env::var("TF_PLUGIN_MAGIC_COOKIE").ok().as_deref() != Some(MAGIC_COOKIE_VALUE) {
        eprintln!("This binary is a plugin. These are not meant to be executed directly.");
        std::process::exit(1);
    }
    let offered = std::env::var("PLUGIN_PROTOCOL_VERSIONS").unwrap_or_default();
    if !offered.split(',').any(|v| v.trim() == "6") {
        // Like go-plugin: announce our only version; the client will refuse it.
        println!("1|6|unix|/nonexistent|grpc|");
        std::process::exit(1);
    }
    let fake = Arc::new(fake);
    let schema = Arc::new(fake.schema());
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(1);

    let env = Arc::new(Environment::new(2));
    let mut builder = ServiceBuilder::new();
    builder = register(builder, "/tfplugin6.Provider/GetProviderSchema", {
        let schema = Arc::clone(&schema);
        move |_req: pb::get_provider_schema::Request| Ok(schema_response(&schema))
    });
    builder = register(builder, "/tfplugin6.Provider/ValidateProviderConfig", {
        move |_req: pb::validate_provider_config::Request| {
            Ok(pb::validate_provider_config::Response::new())
        }
    });
    builder = register(builder, "/tfplugin6.Provider/ConfigureProvider", {
        let schema = Arc::clone(&schema);
        move |req: pb::configure_provider::Request| {
            let mut resp = pb::configure_provider::Response::new();
            if let Err(e) = decode(&req.config, &schema.provider.block.implied_type()) {
                resp.diagnostics
                    .push(diag(&format!("fake: bad provider config: {e}"), &[]));
            }
            Ok(resp)
        }
    });
    builder = register(builder, "/tfplugin6.Provider/ValidateResourceConfig", {
        let (fake, schema) = (Arc::clone(&fake), Arc::clone(&schema));
        move |req: pb::validate_resource_config::Request| {
            let mut resp = pb::validate_resource_config::Response::new();
            let Some(s) = schema.resources.get(&req.type_name) else {
                resp.diagnostics.push(diag(
                    &format!("fake: unknown resource type {}", req.type_name),
                    &[],
                ));
                return Ok(resp);
            };
            match decode(&req.config, &s.block.implied_type()) {
                Ok(config) => {
                    for (msg, path) in fake.validate(&req.type_name, &config) {
                        resp.diagnostics.push(diag(&msg, &path));
                    }
                }
                Err(e) => resp
                    .diagnostics
                    .push(diag(&format!("fake: bad config: {e}"), &[])),
            }
            Ok(resp)
        }
    });
    builder = register(builder, "/tfplugin6.Provider/ValidateDataResourceConfig", {
        let (fake, schema) = (Arc::clone(&fake), Arc::clone(&schema));
        move |req: pb::validate_data_resource_config::Request| {
            let mut resp = pb::validate_data_resource_config::Response::new();
            let Some(s) = schema.data_sources.get(&req.type_name) else {
                resp.diagnostics.push(diag(
                    &format!("fake: unknown data source {}", req.type_name),
                    &[],
                ));
                return Ok(resp);
            };
            match decode(&req.config, &s.block.implied_type()) {
                Ok(config) => {
                    for (msg, path) in fake.validate(&req.type_name, &config) {
                        resp.diagnostics.push(diag(&msg, &path));
                    }
                }
                Err(e) => resp
                    .diagnostics
                    .push(diag(&format!("fake: bad config: {e}"), &[])),
            }
            Ok(resp)
        }
    });
    builder = register(builder, "/tfplugin6.Provider/UpgradeResourceState", {
        let (fake, schema) = (Arc::clone(&fake), Arc::clone(&schema));
        move |req: pb::upgrade_resource_state::Request| {
            let mut resp = pb::upgrade_resource_state::Response::new();
            let Some(s) = schema.resources.get(&req.type_name) else {
                resp.diagnostics.push(diag(
                    &format!("fake: unknown resource type {}", req.type_name),
                    &[],
                ));
                return Ok(resp);
            };
            if req.version > s.version {
                resp.diagnostics.push(diag(
                    &format!(
                        "fake: state version {} is newer than schema version {}",
                        req.version, s.version
                    ),
                    &[],
                ));
                return Ok(resp);
            }
            let json: serde_json::Value = match serde_json::from_slice(&req.raw_state.json) {
                Ok(j) => j,
                Err(e) => {
                    resp.diagnostics
                        .push(diag(&format!("fake: raw state is not JSON: {e}"), &[]));
                    return Ok(resp);
                }
            };
            match fake.upgrade(&req.type_name, req.version, &json) {
                Ok(v) => resp.upgraded_state = encode(&v, &s.block.implied_type()),
                Err(e) => resp
                    .diagnostics
                    .push(diag(&format!("fake: cannot upgrade state: {e}"), &[])),
            }
            Ok(resp)
        }
    });
    builder = register(builder, "/tfplugin6.Provider/ReadResource", {
        let (fake, schema) = (Arc::clone(&fake), Arc::clone(&schema));
        move |req: pb::read_resource::Request| {
            let mut resp = pb::read_resource::Response::new();
            let ty = schema.resources[&req.type_name].block.implied_type();
            match decode(&req.current_state, &ty) {
                Ok(state) => {
                    if req.private != STATE_PRIVATE {
                        resp.diagnostics.push(diag("fake: ReadResource did not receive the private data stored with the object", &[]));
                    }
                    resp.new_state = encode(&fake.read(&req.type_name, &state), &ty);
                    resp.private = STATE_PRIVATE.to_vec();
                }
                Err(e) => resp
                    .diagnostics
                    .push(diag(&format!("fake: bad current state: {e}"), &[])),
            }
            Ok(resp)
        }
    });
    builder = register(builder, "/tfplugin6.Provider/PlanResourceChange", {
        let (fake, schema) = (Arc::clone(&fake), Arc::clone(&schema));
        move |req: pb::plan_resource_change::Request| {
            maybe_noise("plan");
            let mut resp = pb::plan_resource_change::Response::new();
            let ty = schema.resources[&req.type_name].block.implied_type();
            let decoded = (|| -> Result<_, String> {
                let prior =
                    decode(&req.prior_state, &ty).map_err(|e| format!("prior_state: {e}"))?;
                let proposed = decode(&req.proposed_new_state, &ty)
                    .map_err(|e| format!("proposed_new_state: {e}"))?;
                decode(&req.config, &ty).map_err(|e| format!("config: {e}"))?;
                Ok((prior, proposed))
            })();
            match decoded {
                Ok((prior, proposed)) => {
                    if !matches!(prior, Value::Null)
                        && req.prior_private != STATE_PRIVATE
                        && req.prior_private != PLANNED_PRIVATE
                    {
                        resp.diagnostics.push(diag(
                            "fake: PlanResourceChange did not receive the object's private data",
                            &[],
                        ));
                        return Ok(resp);
                    }
                    match fake.plan(&req.type_name, &prior, &proposed) {
                        Ok((planned, replace)) => {
                            resp.planned_state = encode(&planned, &ty);
                            resp.requires_replace =
                                replace.iter().map(|p| attribute_path(p)).collect();
                            resp.planned_private = PLANNED_PRIVATE.to_vec();
                        }
                        Err(e) => resp.diagnostics.push(diag(&e, &[])),
                    }
                }
                Err(e) => resp
                    .diagnostics
                    .push(diag(&format!("fake: bad plan request: {e}"), &[])),
            }
            Ok(resp)
        }
    });
    builder = register(builder, "/tfplugin6.Provider/ApplyResourceChange", {
        let (fake, schema) = (Arc::clone(&fake), Arc::clone(&schema));
        move |req: pb::apply_resource_change::Request| {
            maybe_slow();
            maybe_noise("apply");
            let mut resp = pb::apply_resource_change::Response::new();
            let ty = schema.resources[&req.type_name].block.implied_type();
            let decoded = (|| -> Result<_, String> {
                let prior =
                    decode(&req.prior_state, &ty).map_err(|e| format!("prior_state: {e}"))?;
                let planned =
                    decode(&req.planned_state, &ty).map_err(|e| format!("planned_state: {e}"))?;
                let config = decode(&req.config, &ty).map_err(|e| format!("config: {e}"))?;
                if !config.is_known() {
                    return Err("config holds unknown values at apply".into());
                }
                Ok((prior, planned))
            })();
            match decoded {
                Ok((prior, planned)) => {
                    let is_delete = matches!(planned, Value::Null);
                    if !is_delete && req.planned_private != PLANNED_PRIVATE {
                        resp.diagnostics.push(diag(
                            "fake: ApplyResourceChange did not receive the planned private data",
                            &[],
                        ));
                        resp.new_state = encode(&prior, &ty);
                        return Ok(resp);
                    }
                    match fake.apply(&req.type_name, &prior, &planned) {
                        Ok(new) => {
                            log_apply(&*fake, name, &req.type_name, &prior, &new);
                            resp.new_state = encode(&new, &ty);
                            if !is_delete {
                                resp.private = STATE_PRIVATE.to_vec();
                            }
                        }
                        Err((partial, e)) => {
                            let now = partial.as_ref().unwrap_or(&prior);
                            log_apply(&*fake, name, &req.type_name, &prior, now);
                            resp.new_state = encode(now, &ty);
                            resp.private = STATE_PRIVATE.to_vec();
                            resp.diagnostics.push(diag(&e, &[]));
                        }
                    }
                }
                Err(e) => resp
                    .diagnostics
                    .push(diag(&format!("fake: bad apply request: {e}"), &[])),
            }
            Ok(resp)
        }
    });
    builder = register(builder, "/tfplugin6.Provider/ImportResourceState", {
        let (fake, schema) = (Arc::clone(&fake), Arc::clone(&schema));
        move |req: pb::import_resource_state::Request| {
            let mut resp = pb::import_resource_state::Response::new();
            let ty = schema.resources[&req.type_name].block.implied_type();
            match fake.import(&req.type_name, &req.id) {
                Ok(state) => {
                    let mut imported = pb::import_resource_state::ImportedResource::new();
                    imported.type_name = req.type_name.clone();
                    imported.state = encode(&state, &ty);
                    imported.private = STATE_PRIVATE.to_vec();
                    resp.imported_resources.push(imported);
                }
                Err(e) => resp.diagnostics.push(diag(&e, &[])),
            }
            Ok(resp)
        }
    });
    builder = register(builder, "/tfplugin6.Provider/ReadDataSource", {
        let (fake, schema) = (Arc::clone(&fake), Arc::clone(&schema));
        move |req: pb::read_data_source::Request| {
            let mut resp = pb::read_data_source::Response::new();
            let ty = schema.data_sources[&req.type_name].block.implied_type();
            match decode(&req.config, &ty) {
                Ok(config) => match fake.read_data(&req.type_name, &config) {
                    Ok(state) => resp.state = encode(&state, &ty),
                    Err(e) => resp.diagnostics.push(diag(&e, &[])),
                },
                Err(e) => resp
                    .diagnostics
                    .push(diag(&format!("fake: bad data source config: {e}"), &[])),
            }
            Ok(resp)
        }
    });
    builder = register(
        builder,
        "/tfplugin6.Provider/StopProvider",
        move |_req: pb::stop_provider::Request| Ok(pb::stop_provider::Response::new()),
    );
    let stop = Arc::new(Mutex::new(Some(stop_tx)));
    builder = register(
        builder,
        "/plugin.GRPCController/Shutdown",
        move |_req: go_plugin::Empty| {
            if let Some(tx) = stop.lock().unwrap().take() {
                let _ = tx.send(());
            }
            Ok(go_plugin::Empty::new())
        },
    );

    let mut server = ServerBuilder::new(env)
        .register_service(builder.build())
        .build()
        .expect("build gRPC server");
    let socket = std::env::temp_dir().join(format!("nivis-fake-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    server
        .add_listening_port(
            format!("unix:{}", socket.display()),
            ServerCredentials::insecure(),
        )
        .expect("listen on unix socket");
    server.start();
    maybe_junk_handshake();
    println!("1|6|unix|{}|grpc|", socket.display());
    let _ = std::io::stdout().flush();
    maybe_noise("startup");
    maybe_endless_line();

    let _ = stop_rx.recv();
    let _ = futures_executor::block_on(server.shutdown());
    let _ = std::fs::remove_file(&socket);
    std::process::exit(0);
}

fn register<Req, Resp, F>(builder: ServiceBuilder, path: &'static str, f: F) -> ServiceBuilder
where
    Req: Message + 'static,
    Resp: Message + 'static,
    F: Fn(Req) -> Result<Resp, String> + Send + Sync + Clone + 'static,
{
    let method: Method<Req, Resp> = Method {
        ty: MethodType::Unary,
        name: path,
        req_mar: Marshaller {
            ser: grpcio::pb_ser,
            de: grpcio::pb_de,
        },
        resp_mar: Marshaller {
            ser: grpcio::pb_ser,
            de: grpcio::pb_de,
        },
    };
    builder.add_unary_handler(
        &method,
        move |ctx: RpcContext, req: Req, sink: UnarySink<Resp>| {
            let f = f.clone();
            // Handlers may block (slow applies); run them off the completion-queue thread.
            std::thread::spawn(move || {
                let result = f(req);
                let fut = match result {
                    Ok(resp) => sink.success(resp),
                    Err(e) => sink.fail(RpcStatus::with_message(RpcStatusCode::INTERNAL, e)),
                };
                let _ = futures_executor::block_on(fut);
            });
            let _ = ctx;
        },
    )
}

fn decode(dv: &MessageField<pb::DynamicValue>, ty: &Type) -> Result<Value, String> {
    match dv.as_ref() {
        None => Err("DynamicValue missing (must always be set, null is c0)".into()),
        Some(dv) if dv.msgpack.is_empty() => Err("DynamicValue has no msgpack bytes".into()),
        Some(dv) => value::msgpack::decode(&dv.msgpack, ty).map_err(|e| e.to_string()),
    }
}

fn encode(v: &Value, ty: &Type) -> MessageField<pb::DynamicValue> {
    let mut dv = pb::DynamicValue::new();
    dv.msgpack =
        value::msgpack::encode(v, ty).expect("fake produced a value that does not fit its schema");
    MessageField::some(dv)
}

fn attribute_path(path: &[PathStep]) -> pb::AttributePath {
    use pb::attribute_path::step::Selector;
    let mut out = pb::AttributePath::new();
    for step in path {
        let mut s = pb::attribute_path::Step::new();
        s.selector = Some(match step {
            PathStep::Attr(n) => Selector::AttributeName(n.clone()),
            PathStep::Key(k) => Selector::ElementKeyString(k.clone()),
            PathStep::Index(i) => Selector::ElementKeyInt(*i as i64),
        });
        out.steps.push(s);
    }
    out
}

fn diag(summary: &str, path: &[PathStep]) -> pb::Diagnostic {
    let mut d = pb::Diagnostic::new();
    d.severity = EnumOrUnknown::new(pb::diagnostic::Severity::ERROR);
    d.summary = summary.to_string();
    if !path.is_empty() {
        d.attribute = MessageField::some(attribute_path(path));
    }
    d
}

fn attributes_to_wire(
    attributes: &std::collections::BTreeMap<String, nivis::schema::Attribute>,
) -> Vec<pb::schema::Attribute> {
    let mut out = Vec::new();
    for (name, attr) in attributes {
        let mut a = pb::schema::Attribute::new();
        a.name = name.clone();
        match &attr.ty {
            AttrType::Type(t) => a.type_ = serde_json::to_vec(&t.to_json()).unwrap(),
            AttrType::Nested(object) => {
                use pb::schema::object::NestingMode as M;
                let mut o = pb::schema::Object::new();
                o.attributes = attributes_to_wire(&object.attributes);
                o.nesting = EnumOrUnknown::new(match object.nesting {
                    nivis::schema::ObjectNesting::Single => M::SINGLE,
                    nivis::schema::ObjectNesting::List => M::LIST,
                    nivis::schema::ObjectNesting::Set => M::SET,
                    nivis::schema::ObjectNesting::Map => M::MAP,
                });
                a.nested_type = MessageField::some(o);
            }
        }
        a.description = attr.description.clone();
        a.required = attr.required;
        a.optional = attr.optional;
        a.computed = attr.computed;
        a.sensitive = attr.sensitive;
        out.push(a);
    }
    out
}

fn block_to_wire(block: &Block) -> pb::schema::Block {
    let mut out = pb::schema::Block::new();
    out.description = block.description.clone();
    out.attributes = attributes_to_wire(&block.attributes);
    for (name, nb) in &block.block_types {
        use pb::schema::nested_block::NestingMode as M;
        let mut b = pb::schema::NestedBlock::new();
        b.type_name = name.clone();
        b.block = MessageField::some(block_to_wire(&nb.block));
        b.nesting = EnumOrUnknown::new(match nb.nesting {
            BlockNesting::Single => M::SINGLE,
            BlockNesting::Group => M::GROUP,
            BlockNesting::List => M::LIST,
            BlockNesting::Set => M::SET,
            BlockNesting::Map => M::MAP,
        });
        b.min_items = nb.min_items;
        b.max_items = nb.max_items;
        out.block_types.push(b);
    }
    out
}

fn schema_to_wire(schema: &Schema) -> pb::Schema {
    let mut out = pb::Schema::new();
    out.version = schema.version;
    out.block = MessageField::some(block_to_wire(&schema.block));
    out
}

fn schema_response(schema: &ProviderSchema) -> pb::get_provider_schema::Response {
    let mut resp = pb::get_provider_schema::Response::new();
    resp.provider = MessageField::some(schema_to_wire(&schema.provider));
    for (name, s) in &schema.resources {
        resp.resource_schemas
            .insert(name.clone(), schema_to_wire(s));
    }
    for (name, s) in &schema.data_sources {
        resp.data_source_schemas
            .insert(name.clone(), schema_to_wire(s));
    }
    let mut caps = pb::ServerCapabilities::new();
    caps.plan_destroy = false;
    resp.server_capabilities = MessageField::some(caps);
    resp
}

/// Shorthand for building fake schemas.
pub mod build {
    use std::collections::BTreeMap;

    use nivis::schema::{AttrType, Attribute, Block, Schema};
    use nivis::value::Type;

    /// How an attribute may be set.
    pub enum Mode {
        Required,
        Optional,
        Computed,
        OptionalComputed,
    }

    /// One attribute.
    pub fn attr(ty: Type, mode: Mode, sensitive: bool, description: &str) -> Attribute {
        let (required, optional, computed) = match mode {
            Mode::Required => (true, false, false),
            Mode::Optional => (false, true, false),
            Mode::Computed => (false, false, true),
            Mode::OptionalComputed => (false, true, true),
        };
        Attribute {
            ty: AttrType::Type(ty),
            required,
            optional,
            computed,
            sensitive,
            write_only: false,
            description: description.to_string(),
            deprecated: false,
            deprecation_message: String::new(),
        }
    }

    /// A schema from attributes.
    pub fn schema(version: i64, description: &str, attrs: Vec<(&str, Attribute)>) -> Schema {
        Schema {
            version,
            block: Block {
                attributes: attrs
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect::<BTreeMap<_, _>>(),
                block_types: BTreeMap::new(),
                description: description.to_string(),
                deprecated: false,
            },
        }
    }
}

/// Reads a string attribute of an object value.
pub fn get_str(v: &Value, key: &str) -> Option<String> {
    match v {
        Value::Map(m) => match m.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// Sets an attribute of an object value.
pub fn set(v: &mut Value, key: &str, new: Value) {
    if let Value::Map(m) = v {
        m.insert(key.to_string(), new);
    }
}

/// Whether `value` (a label, a `from`) is named by the fault-injection variable `var`.
pub fn fault(var: &str, value: &str) -> bool {
    env(var).is_some_and(|wanted| wanted.split(',').any(|w| w == value))
}

/// The per-process counter, seeded from the environment so runs are reproducible.
pub fn counter_seed() -> u64 {
    env("NIVIS_FAKE_COUNTER")
        .or_else(|| env("TERRAE_NIVIS_FAKE_COUNTER"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
