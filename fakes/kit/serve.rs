//! Serves any `nivis::provider::Provider` as a go-plugin provider binary over tfplugin5 or
//! tfplugin6: the handshake line, a gRPC server on a unix socket (behind go-plugin's AutoMTLS
//! when the client asks for it, `nivis::plugin::AutoMtlsServer`), and message translation.
//!
//! Owns the server side of the wire only: every request is decoded strictly with the schema
//! (a client sending partial objects fails here as it would against a real provider) and
//! every answer encoded with it. A call the provider answers with `Err(diagnostics)` becomes a
//! response carrying only those diagnostics. Each protocol is served with its own generated
//! message types, so a client that mixes them up fails here.

use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixListener;
use std::sync::{Arc, Mutex};

use grpcio::{
    Environment, Marshaller, Method, MethodType, RpcContext, RpcStatus, RpcStatusCode,
    ServerBuilder, ServerCredentials, ServiceBuilder, UnarySink,
};
use nivis::diag::{Diagnostics, Severity};
use nivis::plugin::wire::plugin as go_plugin;
use nivis::plugin::wire::{tfplugin5, tfplugin6};
use nivis::plugin::AutoMtlsServer;
use nivis::provider::{ApplyRequest, PlanRequest, Provider};
use nivis::schema::{AttrType, BlockNesting, ProviderSchema};
use nivis::value::{PathStep, Type, Value};
use protobuf::{EnumOrUnknown, Message, MessageField};

use super::knobs::env;

const MAGIC_COOKIE_VALUE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

/// The protocol to serve: `--protocol N` on the command line, else `NIVIS_FAKE_PROTOCOL`, else 6.
pub(crate) fn protocol_from_args() -> u32 {
    let args: Vec<String> = std::env::args().collect();
    let from_flag = args
        .iter()
        .position(|a| a == "--protocol")
        .and_then(|i| args.get(i + 1))
        .cloned();
    match from_flag.or_else(|| env("NIVIS_FAKE_PROTOCOL")).as_deref() {
        None | Some("6") => 6,
        Some("5") => 5,
        Some(other) => {
            eprintln!("fake: unsupported protocol {other:?} (5 or 6)");
            std::process::exit(1);
        }
    }
}

/// Serves `provider` as a go-plugin provider speaking `protocol` (5 or 6) until the client
/// shuts it down.
pub(crate) fn serve(provider: Arc<dyn Provider>, protocol: u32) -> ! {
    if std::env::var("TF_PLUGIN_MAGIC_COOKIE").ok().as_deref() != Some(MAGIC_COOKIE_VALUE) {
        eprintln!("This binary is a plugin. These are not meant to be executed directly.");
        std::process::exit(1);
    }
    let offered = std::env::var("PLUGIN_PROTOCOL_VERSIONS").unwrap_or_default();
    if !offered.split(',').any(|v| v.trim() == protocol.to_string()) {
        // Like go-plugin: announce our only version; the client will refuse it.
        println!("1|{protocol}|unix|/nonexistent|grpc|");
        std::process::exit(1);
    }
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(1);
    let env = Arc::new(Environment::new(2));
    let builder = if protocol == 5 {
        v5::register_all(ServiceBuilder::new(), provider)
    } else {
        v6::register_all(ServiceBuilder::new(), provider)
    };
    let stop = Arc::new(Mutex::new(Some(stop_tx)));
    let builder = register(
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
    let mtls = auto_mtls();
    // With TLS, gRPC listens where only this process's TLS end reaches it.
    let private = std::env::temp_dir().join(format!("nivis-fake-{}.d", std::process::id()));
    let grpc_socket = match &mtls {
        Some(_) => {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&private)
                .expect("create the fake's private directory");
            private.join("grpc.sock")
        }
        None => socket.clone(),
    };
    server
        .add_listening_port(
            format!("unix:{}", grpc_socket.display()),
            ServerCredentials::insecure(),
        )
        .expect("listen on unix socket");
    server.start();
    let cert_field = match mtls {
        Some(tls) => {
            let field = tls.handshake_cert();
            let listener = UnixListener::bind(&socket).expect("listen on unix socket");
            std::thread::spawn(move || tls.serve(listener, grpc_socket));
            field
        }
        None => String::new(),
    };
    maybe_junk_handshake();
    println!("1|{protocol}|unix|{}|grpc|{cert_field}", socket.display());
    let _ = std::io::stdout().flush();
    maybe_noise("startup");
    maybe_endless_line();

    let _ = stop_rx.recv();
    let _ = futures_executor::block_on(server.shutdown());
    let _ = std::fs::remove_file(&socket);
    let _ = std::fs::remove_dir_all(&private);
    std::process::exit(0);
}

/// go-plugin's AutoMTLS, as a real provider does it: with `PLUGIN_CLIENT_CERT` set (Terraform
/// and Nivis set it) the fake serves TLS with a certificate of its own, printed in its
/// handshake, and accepts only the client that presented that certificate; without it,
/// plaintext. `NIVIS_FAKE_PLAINTEXT` keeps it on plaintext anyway, as a provider that predates
/// AutoMTLS does.
fn auto_mtls() -> Option<AutoMtlsServer> {
    let pem = env("PLUGIN_CLIENT_CERT")?;
    if env("NIVIS_FAKE_PLAINTEXT").is_some() {
        return None;
    }
    match AutoMtlsServer::new(&pem) {
        Ok(tls) => Some(tls),
        Err(e) => {
            eprintln!("fake: {e}");
            std::process::exit(1);
        }
    }
}

/// Writes `NIVIS_FAKE_NOISE` KiB to stdout and stderr at startup.
fn maybe_noise(tag: &str) {
    if let Some(kib) = env("NIVIS_FAKE_NOISE").and_then(|v| v.parse::<usize>().ok()) {
        super::knobs::write_noise(kib, tag);
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

/// The resource type's wire type, or a diagnostic naming the unknown type.
fn resource_type(schema: &ProviderSchema, type_name: &str) -> Result<Type, Diagnostics> {
    schema
        .resources
        .get(type_name)
        .map(|s| s.block.implied_type())
        .ok_or_else(|| fake_error(format!("fake: unknown resource type {type_name}")))
}

/// The data source's wire type, or a diagnostic naming the unknown type.
fn data_type(schema: &ProviderSchema, type_name: &str) -> Result<Type, Diagnostics> {
    schema
        .data_sources
        .get(type_name)
        .map(|s| s.block.implied_type())
        .ok_or_else(|| fake_error(format!("fake: unknown data source {type_name}")))
}

/// The ephemeral resource type's wire type, or a diagnostic naming the unknown type.
fn ephemeral_type(schema: &ProviderSchema, type_name: &str) -> Result<Type, Diagnostics> {
    schema
        .ephemeral_resources
        .get(type_name)
        .map(|s| s.block.implied_type())
        .ok_or_else(|| fake_error(format!("fake: unknown ephemeral resource type {type_name}")))
}

fn fake_error(summary: String) -> Diagnostics {
    Diagnostics::from(nivis::diag::Diagnostic::error(summary))
}

/// The handlers of one protocol, written once: the two protocols' messages have the same
/// fields under different names, so each module instantiates this with its own names.
macro_rules! protocol_server {
    (
        $prefix:literal,
        schema: $schema_rpc:literal,
        configure: $configure:ident => $configure_rpc:literal,
        validate_resource: $validate_resource:ident => $validate_resource_rpc:literal,
        validate_data: $validate_data:ident => $validate_data_rpc:literal,
        stop: $stop:ident => $stop_rpc:literal
    ) => {
        fn decode(dv: &MessageField<pb::DynamicValue>, ty: &Type) -> Result<Value, String> {
            match dv.as_ref() {
                None => Err("DynamicValue missing (must always be set, null is c0)".into()),
                Some(dv) if dv.msgpack.is_empty() => {
                    Err("DynamicValue has no msgpack bytes".into())
                }
                Some(dv) => {
                    nivis::value::msgpack::decode(&dv.msgpack, ty).map_err(|e| e.to_string())
                }
            }
        }

        fn encode(v: &Value, ty: &Type) -> MessageField<pb::DynamicValue> {
            let mut dv = pb::DynamicValue::new();
            dv.msgpack = nivis::value::msgpack::encode(v, ty)
                .expect("fake produced a value that does not fit its schema");
            MessageField::some(dv)
        }

        /// Decodes a request value, or says which one was bad.
        fn decode_as(
            dv: &MessageField<pb::DynamicValue>,
            ty: &Type,
            what: &str,
        ) -> Result<Value, Diagnostics> {
            decode(dv, ty).map_err(|e| fake_error(format!("fake: bad {what}: {e}")))
        }

        pub(super) fn attribute_path(path: &[PathStep]) -> pb::AttributePath {
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

        fn diagnostics(list: &Diagnostics) -> Vec<pb::Diagnostic> {
            list.0
                .iter()
                .map(|d| {
                    let mut out = pb::Diagnostic::new();
                    out.severity = EnumOrUnknown::new(match d.severity {
                        Severity::Error => pb::diagnostic::Severity::ERROR,
                        Severity::Warning => pb::diagnostic::Severity::WARNING,
                    });
                    out.summary = d.summary.clone();
                    out.detail = d.detail.clone();
                    if let Some(path) = d.path.as_deref().filter(|p| !p.is_empty()) {
                        out.attribute = MessageField::some(attribute_path(path));
                    }
                    out
                })
                .collect()
        }

        fn block_to_wire(block: &nivis::schema::Block) -> pb::schema::Block {
            let mut out = pb::schema::Block::new();
            out.description = block.description.clone();
            out.attributes = block
                .attributes
                .iter()
                .map(|(name, attr)| attribute_to_wire(name, attr))
                .collect();
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

        fn schema_to_wire(schema: &nivis::schema::Schema) -> pb::Schema {
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
            for (name, s) in &schema.ephemeral_resources {
                resp.ephemeral_resource_schemas
                    .insert(name.clone(), schema_to_wire(s));
            }
            let mut caps = pb::ServerCapabilities::new();
            caps.plan_destroy = false;
            resp.server_capabilities = MessageField::some(caps);
            resp
        }

        /// The ephemeral resource RPCs (the same messages in both protocols).
        fn register_ephemeral(
            b: ServiceBuilder,
            provider: &Arc<dyn Provider>,
            schema: &Arc<ProviderSchema>,
        ) -> ServiceBuilder {
            let b = register(b, concat!($prefix, "ValidateEphemeralResourceConfig"), {
                let (p, schema) = (Arc::clone(provider), Arc::clone(schema));
                move |req: pb::validate_ephemeral_resource_config::Request| {
                    let mut resp = pb::validate_ephemeral_resource_config::Response::new();
                    let result = ephemeral_type(&schema, &req.type_name)
                        .and_then(|ty| decode_as(&req.config, &ty, "config"))
                        .and_then(|c| p.validate_ephemeral_config(&req.type_name, &c));
                    resp.diagnostics = diagnostics(&result.unwrap_or_else(|d| d));
                    Ok(resp)
                }
            });
            let b = register(b, concat!($prefix, "OpenEphemeralResource"), {
                let (p, schema) = (Arc::clone(provider), Arc::clone(schema));
                move |req: pb::open_ephemeral_resource::Request| {
                    let mut resp = pb::open_ephemeral_resource::Response::new();
                    let result = ephemeral_type(&schema, &req.type_name).and_then(|ty| {
                        let config = decode_as(&req.config, &ty, "config")?;
                        Ok((ty.clone(), p.open_ephemeral(&req.type_name, &config)?))
                    });
                    match result {
                        Ok((ty, opened)) => {
                            resp.result = encode(&opened.result, &ty);
                            resp.private = opened.private;
                            resp.renew_at = timestamp(opened.renew_at);
                            resp.diagnostics = diagnostics(&opened.diagnostics);
                        }
                        Err(d) => resp.diagnostics = diagnostics(&d),
                    }
                    Ok(resp)
                }
            });
            let b = register(b, concat!($prefix, "RenewEphemeralResource"), {
                let p = Arc::clone(provider);
                move |req: pb::renew_ephemeral_resource::Request| {
                    let mut resp = pb::renew_ephemeral_resource::Response::new();
                    match p.renew_ephemeral(&req.type_name, req.private.as_deref()) {
                        Ok(r) => {
                            resp.private = r.private;
                            resp.renew_at = timestamp(r.renew_at);
                            resp.diagnostics = diagnostics(&r.diagnostics);
                        }
                        Err(d) => resp.diagnostics = diagnostics(&d),
                    }
                    Ok(resp)
                }
            });
            register(b, concat!($prefix, "CloseEphemeralResource"), {
                let p = Arc::clone(provider);
                move |req: pb::close_ephemeral_resource::Request| {
                    let mut resp = pb::close_ephemeral_resource::Response::new();
                    let d = p
                        .close_ephemeral(&req.type_name, req.private.as_deref())
                        .unwrap_or_else(|d| d);
                    resp.diagnostics = diagnostics(&d);
                    Ok(resp)
                }
            })
        }

        fn timestamp(at: Option<std::time::SystemTime>) -> MessageField<pb::Timestamp> {
            let Some(at) = at else {
                return MessageField::none();
            };
            let since = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            let mut t = pb::Timestamp::new();
            t.seconds = since.as_secs() as i64;
            t.nanos = since.subsec_nanos() as i32;
            MessageField::some(t)
        }

        /// Registers every method of the protocol, each calling `provider`.
        // Long because it registers one handler per RPC, each a few lines of decode-call-encode;
        // the list is the protocol's.
        pub(crate) fn register_all(
            builder: ServiceBuilder,
            provider: Arc<dyn Provider>,
        ) -> ServiceBuilder {
            let schema = Arc::new(provider.schema().clone());
            let mut b = builder;
            b = register(b, concat!($prefix, $schema_rpc), {
                let schema = Arc::clone(&schema);
                move |_req: pb::get_provider_schema::Request| Ok(schema_response(&schema))
            });
            b = register_provider_config(b, Arc::clone(&provider));
            b = register(b, concat!($prefix, $configure_rpc), {
                let (p, schema) = (Arc::clone(&provider), Arc::clone(&schema));
                move |req: pb::$configure::Request| {
                    let mut resp = pb::$configure::Response::new();
                    let ty = schema.provider.block.implied_type();
                    let result = decode_as(&req.config, &ty, "provider config")
                        .and_then(|config| p.configure(&config));
                    resp.diagnostics = diagnostics(&result.unwrap_or_else(|d| d));
                    Ok(resp)
                }
            });
            b = register(b, concat!($prefix, $validate_resource_rpc), {
                let (p, schema) = (Arc::clone(&provider), Arc::clone(&schema));
                move |req: pb::$validate_resource::Request| {
                    let mut resp = pb::$validate_resource::Response::new();
                    let result = resource_type(&schema, &req.type_name)
                        .and_then(|ty| decode_as(&req.config, &ty, "config"))
                        .and_then(|c| p.validate_resource_config(&req.type_name, &c));
                    resp.diagnostics = diagnostics(&result.unwrap_or_else(|d| d));
                    Ok(resp)
                }
            });
            b = register(b, concat!($prefix, $validate_data_rpc), {
                let (p, schema) = (Arc::clone(&provider), Arc::clone(&schema));
                move |req: pb::$validate_data::Request| {
                    let mut resp = pb::$validate_data::Response::new();
                    let result = data_type(&schema, &req.type_name)
                        .and_then(|ty| decode_as(&req.config, &ty, "config"))
                        .and_then(|c| p.validate_data_config(&req.type_name, &c));
                    resp.diagnostics = diagnostics(&result.unwrap_or_else(|d| d));
                    Ok(resp)
                }
            });
            b = register(b, concat!($prefix, "UpgradeResourceState"), {
                let (p, schema) = (Arc::clone(&provider), Arc::clone(&schema));
                move |req: pb::upgrade_resource_state::Request| {
                    let mut resp = pb::upgrade_resource_state::Response::new();
                    let result = resource_type(&schema, &req.type_name).and_then(|ty| {
                        let (v, d) = p.upgrade_resource_state(
                            &req.type_name,
                            req.version,
                            &req.raw_state.json,
                        )?;
                        Ok((encode(&v, &ty), d))
                    });
                    match result {
                        Ok((v, d)) => {
                            resp.upgraded_state = v;
                            resp.diagnostics = diagnostics(&d);
                        }
                        Err(d) => resp.diagnostics = diagnostics(&d),
                    }
                    Ok(resp)
                }
            });
            b = register(b, concat!($prefix, "ReadResource"), {
                let (p, schema) = (Arc::clone(&provider), Arc::clone(&schema));
                move |req: pb::read_resource::Request| {
                    let mut resp = pb::read_resource::Response::new();
                    let result = resource_type(&schema, &req.type_name).and_then(|ty| {
                        let current = decode_as(&req.current_state, &ty, "current state")?;
                        let r = p.read_resource(&req.type_name, &current, &req.private)?;
                        Ok((encode(&r.new_state, &ty), r.private, r.diagnostics))
                    });
                    match result {
                        Ok((state, private, d)) => {
                            resp.new_state = state;
                            resp.private = private;
                            resp.diagnostics = diagnostics(&d);
                        }
                        Err(d) => resp.diagnostics = diagnostics(&d),
                    }
                    Ok(resp)
                }
            });
            b = register(b, concat!($prefix, "PlanResourceChange"), {
                let (p, schema) = (Arc::clone(&provider), Arc::clone(&schema));
                move |req: pb::plan_resource_change::Request| {
                    let mut resp = pb::plan_resource_change::Response::new();
                    let result = resource_type(&schema, &req.type_name).and_then(|ty| {
                        let prior = decode_as(&req.prior_state, &ty, "prior_state")?;
                        let proposed =
                            decode_as(&req.proposed_new_state, &ty, "proposed_new_state")?;
                        let config = decode_as(&req.config, &ty, "config")?;
                        let r = p.plan_resource_change(PlanRequest {
                            type_name: &req.type_name,
                            prior_state: &prior,
                            proposed_new_state: &proposed,
                            config: &config,
                            prior_private: &req.prior_private,
                        })?;
                        Ok((ty, r))
                    });
                    match result {
                        Ok((ty, r)) => {
                            resp.planned_state = encode(&r.planned_state, &ty);
                            resp.requires_replace = r
                                .requires_replace
                                .iter()
                                .map(|p| attribute_path(p))
                                .collect();
                            resp.planned_private = r.planned_private;
                            resp.legacy_type_system = r.legacy_type_system;
                            resp.diagnostics = diagnostics(&r.diagnostics);
                        }
                        Err(d) => resp.diagnostics = diagnostics(&d),
                    }
                    Ok(resp)
                }
            });
            b = register(b, concat!($prefix, "ApplyResourceChange"), {
                let (p, schema) = (Arc::clone(&provider), Arc::clone(&schema));
                move |req: pb::apply_resource_change::Request| {
                    let mut resp = pb::apply_resource_change::Response::new();
                    let result = resource_type(&schema, &req.type_name).and_then(|ty| {
                        let prior = decode_as(&req.prior_state, &ty, "prior_state")?;
                        let planned = decode_as(&req.planned_state, &ty, "planned_state")?;
                        let config = decode_as(&req.config, &ty, "config")?;
                        let r = p.apply_resource_change(ApplyRequest {
                            type_name: &req.type_name,
                            prior_state: &prior,
                            planned_state: &planned,
                            config: &config,
                            planned_private: &req.planned_private,
                        })?;
                        Ok((ty, r))
                    });
                    match result {
                        Ok((ty, r)) => {
                            resp.new_state = encode(&r.new_state, &ty);
                            resp.private = r.private;
                            resp.legacy_type_system = r.legacy_type_system;
                            resp.diagnostics = diagnostics(&r.diagnostics);
                        }
                        Err(d) => resp.diagnostics = diagnostics(&d),
                    }
                    Ok(resp)
                }
            });
            b = register(b, concat!($prefix, "ImportResourceState"), {
                let (p, schema) = (Arc::clone(&provider), Arc::clone(&schema));
                move |req: pb::import_resource_state::Request| {
                    let mut resp = pb::import_resource_state::Response::new();
                    let result = resource_type(&schema, &req.type_name).and_then(|ty| {
                        let (objects, d) = p.import_resource_state(&req.type_name, &req.id)?;
                        Ok((ty, objects, d))
                    });
                    match result {
                        Ok((ty, objects, d)) => {
                            for o in objects {
                                let mut imported =
                                    pb::import_resource_state::ImportedResource::new();
                                imported.type_name = o.type_name;
                                imported.state = encode(&o.state, &ty);
                                imported.private = o.private;
                                resp.imported_resources.push(imported);
                            }
                            resp.diagnostics = diagnostics(&d);
                        }
                        Err(d) => resp.diagnostics = diagnostics(&d),
                    }
                    Ok(resp)
                }
            });
            b = register(b, concat!($prefix, "ReadDataSource"), {
                let (p, schema) = (Arc::clone(&provider), Arc::clone(&schema));
                move |req: pb::read_data_source::Request| {
                    let mut resp = pb::read_data_source::Response::new();
                    let result = data_type(&schema, &req.type_name).and_then(|ty| {
                        let config = decode_as(&req.config, &ty, "data source config")?;
                        let (state, d) = p.read_data_source(&req.type_name, &config)?;
                        Ok((encode(&state, &ty), d))
                    });
                    match result {
                        Ok((state, d)) => {
                            resp.state = state;
                            resp.diagnostics = diagnostics(&d);
                        }
                        Err(d) => resp.diagnostics = diagnostics(&d),
                    }
                    Ok(resp)
                }
            });
            b = register_ephemeral(b, &provider, &schema);
            b = register(b, concat!($prefix, $stop_rpc), {
                let p = Arc::clone(&provider);
                move |_req: pb::$stop::Request| {
                    let mut resp = pb::$stop::Response::new();
                    if let Err(d) = p.stop() {
                        resp.Error = d.to_string();
                    }
                    Ok(resp)
                }
            });
            b
        }
    };
}

/// tfplugin5: SDKv2-era names, no nested attribute types, a config-preparing validation call.
pub(crate) mod v5 {
    use super::*;
    use tfplugin5 as pb;

    protocol_server!(
        "/tfplugin5.Provider/",
        schema: "GetSchema",
        configure: configure => "Configure",
        validate_resource: validate_resource_type_config => "ValidateResourceTypeConfig",
        validate_data: validate_data_source_config => "ValidateDataSourceConfig",
        stop: stop => "Stop"
    );

    /// v5 has no nested attribute types: a nested attribute travels as its implied type, as
    /// an SDKv2 provider would declare a list of objects.
    fn attribute_to_wire(name: &str, attr: &nivis::schema::Attribute) -> pb::schema::Attribute {
        let mut a = pb::schema::Attribute::new();
        a.name = name.to_string();
        a.type_ = serde_json::to_vec(&attr.implied_type().to_json()).unwrap();
        a.description = attr.description.clone();
        a.required = attr.required;
        a.optional = attr.optional;
        a.computed = attr.computed;
        a.sensitive = attr.sensitive;
        a.write_only = attr.write_only;
        a
    }

    /// PrepareProviderConfig: validates and answers with the (unchanged) prepared config.
    fn register_provider_config(b: ServiceBuilder, p: Arc<dyn Provider>) -> ServiceBuilder {
        let ty = p.schema().provider.block.implied_type();
        register(
            b,
            "/tfplugin5.Provider/PrepareProviderConfig",
            move |req: pb::prepare_provider_config::Request| {
                let mut resp = pb::prepare_provider_config::Response::new();
                let result = decode_as(&req.config, &ty, "provider config")
                    .and_then(|config| p.validate_provider_config(&config));
                match result {
                    Ok(d) => {
                        resp.prepared_config = req.config.clone();
                        resp.diagnostics = diagnostics(&d);
                    }
                    Err(d) => resp.diagnostics = diagnostics(&d),
                }
                Ok(resp)
            },
        )
    }
}

/// tfplugin6: nested attribute types, plain provider-config validation.
pub(crate) mod v6 {
    use super::*;
    use tfplugin6 as pb;

    protocol_server!(
        "/tfplugin6.Provider/",
        schema: "GetProviderSchema",
        configure: configure_provider => "ConfigureProvider",
        validate_resource: validate_resource_config => "ValidateResourceConfig",
        validate_data: validate_data_resource_config => "ValidateDataResourceConfig",
        stop: stop_provider => "StopProvider"
    );

    fn attribute_to_wire(name: &str, attr: &nivis::schema::Attribute) -> pb::schema::Attribute {
        let mut a = pb::schema::Attribute::new();
        a.name = name.to_string();
        match &attr.ty {
            AttrType::Type(t) => a.type_ = serde_json::to_vec(&t.to_json()).unwrap(),
            AttrType::Nested(object) => {
                use pb::schema::object::NestingMode as M;
                let mut o = pb::schema::Object::new();
                o.attributes = object
                    .attributes
                    .iter()
                    .map(|(name, attr)| attribute_to_wire(name, attr))
                    .collect();
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
        a.write_only = attr.write_only;
        a
    }

    fn register_provider_config(b: ServiceBuilder, p: Arc<dyn Provider>) -> ServiceBuilder {
        let ty = p.schema().provider.block.implied_type();
        register(
            b,
            "/tfplugin6.Provider/ValidateProviderConfig",
            move |req: pb::validate_provider_config::Request| {
                let mut resp = pb::validate_provider_config::Response::new();
                let result = decode_as(&req.config, &ty, "provider config")
                    .and_then(|config| p.validate_provider_config(&config));
                resp.diagnostics = diagnostics(&result.unwrap_or_else(|d| d));
                Ok(resp)
            },
        )
    }
}
