//! The gRPC side of a provider: one channel per provider process and the shared call sequence.
//!
//! Owns: connecting to the plugin's socket, making the unary calls, turning transport failures
//! into diagnostics that name the provider (with its crash trace), encoding and decoding
//! `DynamicValue`s with the schema's implied types, and subscribing to the plugin's stdio stream.
//! Version differences live in [`super::protocol`]; nothing here branches on 5 vs 6 except the
//! method table it is handed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use grpcio::{CallOption, ChannelBuilder, Client, Environment, Marshaller, Method, MethodType};
use protobuf::{Message, MessageField};

mod ephemeral;
mod transport;

use super::call_clock::InFlight;
use super::launch::{LaunchError, LaunchSpec, PluginProcess, SpawnedPlugin};
use super::protocol::{self, Methods};
use super::validation_cache::{Subject, ValidationCache};
use super::wire::plugin as go_plugin;
use super::wire::tfplugin6 as pb;
use crate::diag::{Diagnostic, Diagnostics};
use crate::provider::{
    ApplyRequest, ApplyResponse, CallResult, ImportedResource, OpenedEphemeral, PlanRequest,
    PlanResponse, Provider, ReadResponse, RenewedEphemeral,
};
use crate::schema::ProviderSchema;
use crate::value::{self, Type, Value};

/// The terraform_version string sent to providers, as OpenTofu does (some providers gate
/// features on it).
const TERRAFORM_VERSION: &str = "1.13.0";

/// Largest message accepted from a provider (schemas of big providers exceed 4 MiB).
const MAX_MESSAGE_BYTES: i32 = 256 * 1024 * 1024;

fn grpc_env() -> Arc<Environment> {
    static ENV: OnceLock<Arc<Environment>> = OnceLock::new();
    // One completion queue, so one polling thread: every call's completion crosses to the
    // worker waiting for it anyway, and a second poller only adds hand-offs between threads
    // (DESIGN §85: nivis's CPU per 1000-resource step −7 to −10%).
    Arc::clone(ENV.get_or_init(|| Arc::new(Environment::new(1))))
}

/// Why a provider could not be started and connected.
#[derive(Debug)]
pub enum StartError {
    /// The process did not start or handshake.
    Launch(LaunchError),
    /// The schema call failed.
    Schema {
        /// The provider's name in the plan.
        name: String,
        /// What the provider (or the schema conversion) said.
        diagnostics: Diagnostics,
    },
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Launch(e) => write!(f, "{e}"),
            StartError::Schema { name, diagnostics } => {
                write!(
                    f,
                    "provider {name}: could not read its schema:\n{diagnostics}"
                )
            }
        }
    }
}

impl std::error::Error for StartError {}

/// A provider reached over gRPC, speaking tfplugin5 or tfplugin6.
pub struct GrpcProvider {
    name: String,
    protocol: u32,
    methods: &'static Methods,
    process: Mutex<PluginProcess>,
    client: Client,
    schema: ProviderSchema,
    resource_types: HashMap<String, Type>,
    data_types: HashMap<String, Type>,
    provider_type: Type,
    /// Clean validation verdicts remembered for this binary and schema (`None`: no cache).
    validation: Option<ValidationCache>,
    /// [`Provider::binary_mark`]: digest of the binary's sha256 and the schema model digest.
    mark: Option<String>,
    /// See [`LaunchSpec::operation_timeout`].
    operation_timeout: Option<Duration>,
}

fn method<Req: Message, Resp: Message>(ty: MethodType, path: &'static str) -> Method<Req, Resp> {
    Method {
        ty,
        name: path,
        req_mar: Marshaller {
            ser: grpcio::pb_ser,
            de: grpcio::pb_de,
        },
        resp_mar: Marshaller {
            ser: grpcio::pb_ser,
            de: grpcio::pb_de,
        },
    }
}

impl GrpcProvider {
    /// Starts the provider binary, connects, and fetches its schema.
    pub fn start(spec: &LaunchSpec) -> Result<GrpcProvider, StartError> {
        let _in_flight = InFlight::lifecycle();
        GrpcProvider::spawn(spec)?.finish()
    }

    /// Starts the provider binary without waiting for it: the handshake, connection and schema
    /// are [`SpawnedProvider::finish`]'s, which may run on another thread. Call it from the
    /// thread that owns the run (the parent-death signal is tied to it).
    pub(crate) fn spawn(spec: &LaunchSpec) -> Result<SpawnedProvider, StartError> {
        let process = PluginProcess::spawn(spec).map_err(StartError::Launch)?;
        Ok(SpawnedProvider {
            spec: spec.clone(),
            process,
        })
    }
}

/// A provider process spawned by [`GrpcProvider::spawn`], not yet spoken to.
pub(crate) struct SpawnedProvider {
    spec: LaunchSpec,
    process: SpawnedPlugin,
}

impl SpawnedProvider {
    /// Completes the start: the handshake, the transport, the gRPC channel, the schema (from
    /// the cache or the provider) and the validation verdicts. Sends nothing of any
    /// configuration.
    pub(crate) fn finish(self) -> Result<GrpcProvider, StartError> {
        let SpawnedProvider { spec, process } = self;
        let spec = &spec;
        let process = process.finish().map_err(StartError::Launch)?;
        let handshake = process.handshake().clone();
        let channel = ChannelBuilder::new(grpc_env())
            .max_receive_message_len(MAX_MESSAGE_BYTES)
            .max_send_message_len(MAX_MESSAGE_BYTES)
            .connect(&process.target());
        let client = Client::new(channel);
        let methods = protocol::methods(handshake.protocol);
        let mut provider = GrpcProvider {
            name: spec.name.clone(),
            protocol: handshake.protocol,
            methods,
            process: Mutex::new(process),
            client,
            schema: ProviderSchema::default(),
            resource_types: HashMap::new(),
            data_types: HashMap::new(),
            provider_type: Type::Object {
                attrs: Default::default(),
                optional: Default::default(),
            },
            validation: None,
            mark: None,
            operation_timeout: spec.operation_timeout,
        };
        provider.subscribe_stdio();
        let schema_error = |diagnostics| StartError::Schema {
            name: spec.name.clone(),
            diagnostics,
        };
        let cache = super::schema_cache::cache_dir().and_then(|dir| {
            super::schema_cache::binary_hash(&dir, &spec.path).map(|hash| (dir, hash))
        });
        let cached = cache
            .as_ref()
            .and_then(|(dir, hash)| super::schema_cache::load(dir, hash));
        // The schema, and the digest of the converted model (which keys the validations).
        let (schema, model) = match cached {
            // The provider says it needs no schema call, and the cache has its schema.
            Some(entry) if entry.schema.get_provider_schema_optional => {
                (entry.schema, Some(entry.model))
            }
            cached => {
                let known = cached.as_ref().map(|entry| entry.model.clone());
                let (schema, digest) = provider
                    .fetch_schema(spec.start_timeout, cached)
                    .map_err(schema_error)?;
                match (&cache, digest) {
                    (Some((dir, hash)), Some(response)) => {
                        let model = super::schema_cache::model_digest(&schema);
                        let entry = super::schema_cache::Entry {
                            response,
                            model,
                            schema,
                        };
                        super::schema_cache::store(dir, hash, &entry);
                        (entry.schema, Some(entry.model))
                    }
                    // Converted afresh but not cached: no key for the validations either.
                    (_, Some(_)) => (schema, None),
                    // The cached entry's schema, unchanged.
                    (_, None) => (schema, known),
                }
            }
        };
        if let (Some((dir, hash)), Some(model)) = (&cache, model) {
            provider.mark = Some(super::schema_cache::binary_mark(hash, &model));
            let scope = spec.validation_scope.as_deref();
            provider.validation = ValidationCache::open(dir, hash, &model, scope);
        }
        provider.set_schema(schema);
        Ok(provider)
    }
}

impl GrpcProvider {
    /// The negotiated protocol major (5 or 6).
    pub fn protocol(&self) -> u32 {
        self.protocol
    }

    /// The operating-system process id of the provider.
    pub fn pid(&self) -> u32 {
        self.process.lock().map(|p| p.pid()).unwrap_or(0)
    }

    fn set_schema(&mut self, schema: ProviderSchema) {
        self.provider_type = schema.provider.block.implied_type();
        self.resource_types = schema
            .resources
            .iter()
            .map(|(k, s)| (k.clone(), s.block.implied_type()))
            .collect();
        self.data_types = schema
            .data_sources
            .iter()
            .map(|(k, s)| (k.clone(), s.block.implied_type()))
            .collect();
        self.schema = schema;
    }

    /// Makes the schema call (providers expect one per process). If `cached` came from the
    /// same answer (same digest) it is used as is; otherwise the answer is converted. Returns
    /// the schema and, when it was converted afresh, the answer's digest for the cache.
    fn fetch_schema(
        &self,
        timeout: Duration,
        cached: Option<super::schema_cache::Entry>,
    ) -> CallResult<(ProviderSchema, Option<String>)> {
        let opt = CallOption::default().wait_for_ready(true).timeout(timeout);
        let describe = |e: protocol::SchemaError| {
            Diagnostics::from(Diagnostic::error(format!("provider {}: {e}", self.name)))
        };
        let (digest, converted) = if self.protocol == 5 {
            let req = super::wire::tfplugin5::get_provider_schema::Request::new();
            let resp: super::wire::tfplugin5::get_provider_schema::Response =
                self.call_with(self.methods.get_schema, &req, opt)?;
            let digest =
                super::schema_cache::response_digest(&resp.write_to_bytes().unwrap_or_default());
            match cached {
                Some(entry) if entry.response == digest => return Ok((entry.schema, None)),
                _ => (digest, protocol::schema_from_v5(&resp).map_err(describe)?),
            }
        } else {
            let req = pb::get_provider_schema::Request::new();
            let resp: pb::get_provider_schema::Response =
                self.call_with(self.methods.get_schema, &req, opt)?;
            let digest =
                super::schema_cache::response_digest(&resp.write_to_bytes().unwrap_or_default());
            match cached {
                Some(entry) if entry.response == digest => return Ok((entry.schema, None)),
                _ => (digest, protocol::schema_from_v6(&resp).map_err(describe)?),
            }
        };
        let (schema, diags) = converted;
        if diags.has_errors() {
            return Err(diags);
        }
        for d in diags.warnings() {
            log::warn!("provider {}: {d}", self.name);
        }
        Ok((schema, Some(digest)))
    }

    /// Subscribes to the plugin's stdio stream and logs what arrives. Old plugins without the
    /// service answer Unimplemented, which ends the thread quietly.
    fn subscribe_stdio(&self) {
        let m = method::<go_plugin::Empty, go_plugin::StdioData>(
            MethodType::ServerStreaming,
            "/plugin.GRPCStdio/StreamStdio",
        );
        let Ok(stream) = self.client.server_streaming(
            &m,
            &go_plugin::Empty::new(),
            CallOption::default().wait_for_ready(true),
        ) else {
            return;
        };
        let name = self.name.clone();
        let _ = std::thread::Builder::new()
            .name(format!("{name}-stdio"))
            .spawn(move || {
                for item in futures_executor::block_on_stream(stream) {
                    match item {
                        Ok(data) => {
                            let text = String::from_utf8_lossy(&data.data);
                            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                                log::debug!(target: "provider", "{name}: {line}");
                            }
                        }
                        Err(_) => break,
                    }
                }
            });
    }

    /// ApplyResourceChange under the operation timeout, if one is set: past it the call fails
    /// saying so (the provider may still finish the change).
    fn timed_apply(
        &self,
        req: &pb::apply_resource_change::Request,
    ) -> CallResult<pb::apply_resource_change::Response> {
        let path = self.methods.apply_resource_change;
        let Some(limit) = self.operation_timeout else {
            return self.call(path, req);
        };
        let started = std::time::Instant::now();
        let answer = self.call_with(path, req, CallOption::default().timeout(limit));
        answer.map_err(|d| match started.elapsed() >= limit {
            true => Diagnostic::error(format!(
                "provider {} did not answer ApplyResourceChange within the operation timeout \
                 of {} (--operation-timeout)",
                self.name,
                humantime::format_duration(limit)
            ))
            .with_detail(
                "The provider may still make the change. A create is left pending: the next \
                 plan names it, and `nivis import ADDRESS ID` or `nivis state resolve ADDRESS \
                 --absent` settles it; an update or delete is read back by the next refresh. \
                 Raise --operation-timeout if the operation needs longer.",
            )
            .into(),
            false => d,
        })
    }

    fn call<Req: Message, Resp: Message + Unpin>(
        &self,
        path: &'static str,
        req: &Req,
    ) -> CallResult<Resp> {
        self.call_with(path, req, CallOption::default())
    }

    fn call_with<Req: Message, Resp: Message + Unpin>(
        &self,
        path: &'static str,
        req: &Req,
        opt: CallOption,
    ) -> CallResult<Resp> {
        let m = method::<Req, Resp>(MethodType::Unary, path);
        // A call made to a provider already dead never reached it: nothing it asked was done.
        let gone_before = self.process.lock().is_ok_and(|p| p.has_exited());
        let _in_flight = InFlight::rpc();
        self.client
            .unary_call(&m, req, opt)
            .map_err(|e| self.transport_error(path, e, gone_before).into())
    }

    /// A validation call spared when this binary already found the same wholly known
    /// configuration clean (see [`super::validation_cache`]); otherwise made, and remembered
    /// when its answer holds no diagnostics at all.
    fn remembered_validation(
        &self,
        subject: Subject,
        type_name: &str,
        config: &Value,
        encoded: &MessageField<pb::DynamicValue>,
        call: impl FnOnce() -> CallResult<Diagnostics>,
    ) -> CallResult<Diagnostics> {
        let key = match (&self.validation, encoded.as_ref()) {
            (Some(cache), Some(dv)) if config.is_known() => cache
                .key(subject, type_name, &dv.msgpack)
                .map(|key| (cache, key)),
            _ => None,
        };
        if let Some((cache, key)) = &key {
            if cache.is_clean(key) {
                return Ok(Diagnostics::new());
            }
        }
        let verdict = call()?;
        if let (Some((cache, key)), true) = (key, verdict.0.is_empty()) {
            cache.remember_clean(key);
        }
        Ok(verdict)
    }

    fn decode_error(&self, what: &str, e: value::ValueError) -> Diagnostics {
        Diagnostic::error(format!(
            "provider {} returned an invalid {what}: {e}",
            self.name
        ))
        .into()
    }

    fn resource_type(&self, type_name: &str) -> CallResult<&Type> {
        self.resource_types.get(type_name).ok_or_else(|| {
            Diagnostic::error(format!(
                "provider {} has no resource type {type_name:?}",
                self.name
            ))
            .into()
        })
    }

    fn data_type(&self, type_name: &str) -> CallResult<&Type> {
        self.data_types.get(type_name).ok_or_else(|| {
            Diagnostic::error(format!(
                "provider {} has no data source {type_name:?}",
                self.name
            ))
            .into()
        })
    }

    fn encode(
        &self,
        value: &Value,
        ty: &Type,
        what: &str,
    ) -> CallResult<MessageField<pb::DynamicValue>> {
        let bytes = value::msgpack::encode(value, ty).map_err(|e| {
            Diagnostics::from(Diagnostic::error(format!(
                "cannot encode {what} for provider {}: {e}",
                self.name
            )))
        })?;
        let mut dv = pb::DynamicValue::new();
        dv.msgpack = bytes;
        Ok(MessageField::some(dv))
    }

    fn decode(
        &self,
        dv: &MessageField<pb::DynamicValue>,
        ty: &Type,
        what: &str,
    ) -> CallResult<Value> {
        let Some(dv) = dv.as_ref() else {
            return Ok(Value::Null);
        };
        if !dv.msgpack.is_empty() {
            return value::msgpack::decode(&dv.msgpack, ty).map_err(|e| self.decode_error(what, e));
        }
        if !dv.json.is_empty() {
            let json: serde_json::Value = serde_json::from_slice(&dv.json).map_err(|e| {
                Diagnostics::from(Diagnostic::error(format!(
                    "provider {} returned invalid JSON {what}: {e}",
                    self.name
                )))
            })?;
            return value::json::from_state_json(&json, ty).map_err(|e| self.decode_error(what, e));
        }
        Ok(Value::Null)
    }

    fn capabilities() -> MessageField<pb::ClientCapabilities> {
        // Write-only attributes are allowed: Nivis nulls them before anything is persisted
        // (`engine::write_only`). Deferral stays off because Nivis does not handle Deferred
        // answers (protocol facts §6).
        let mut caps = pb::ClientCapabilities::new();
        caps.write_only_attributes_allowed = true;
        MessageField::some(caps)
    }

    /// Asks the provider to exit (GRPCController.Shutdown), waits up to two seconds, then kills it.
    pub(crate) fn shutdown(&self) {
        let _in_flight = InFlight::lifecycle();
        let m = method::<go_plugin::Empty, go_plugin::Empty>(
            MethodType::Unary,
            "/plugin.GRPCController/Shutdown",
        );
        let _ = self.client.unary_call(
            &m,
            &go_plugin::Empty::new(),
            CallOption::default().timeout(Duration::from_secs(2)),
        );
        if let Ok(mut p) = self.process.lock() {
            if p.wait_exit(Duration::from_secs(2)).is_none() {
                p.kill();
            }
        }
    }
}

impl Drop for GrpcProvider {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Provider for GrpcProvider {
    fn schema(&self) -> &ProviderSchema {
        &self.schema
    }

    fn binary_mark(&self) -> Option<&str> {
        self.mark.as_deref()
    }

    fn validate_provider_config(&self, config: &Value) -> CallResult<Diagnostics> {
        let dv = self.encode(config, &self.provider_type, "provider configuration")?;
        match self.protocol {
            5 => {
                let mut req = super::wire::tfplugin5::prepare_provider_config::Request::new();
                req.config = protocol::dv_to_v5(dv);
                let resp: super::wire::tfplugin5::prepare_provider_config::Response =
                    self.call(self.methods.validate_provider_config, &req)?;
                Ok(protocol::diagnostics_v5(&resp.diagnostics))
            }
            _ => {
                let mut req = pb::validate_provider_config::Request::new();
                req.config = dv;
                let resp: pb::validate_provider_config::Response =
                    self.call(self.methods.validate_provider_config, &req)?;
                Ok(protocol::diagnostics(&resp.diagnostics))
            }
        }
    }

    fn configure(&self, config: &Value) -> CallResult<Diagnostics> {
        let mut req = pb::configure_provider::Request::new();
        req.terraform_version = TERRAFORM_VERSION.to_string();
        req.config = self.encode(config, &self.provider_type, "provider configuration")?;
        req.client_capabilities = Self::capabilities();
        let resp: pb::configure_provider::Response = self.call(self.methods.configure, &req)?;
        Ok(protocol::diagnostics(&resp.diagnostics))
    }

    fn validate_resource_config(&self, type_name: &str, config: &Value) -> CallResult<Diagnostics> {
        let ty = self.resource_type(type_name)?;
        let mut req = pb::validate_resource_config::Request::new();
        req.type_name = type_name.to_string();
        req.config = self.encode(config, ty, "resource configuration")?;
        req.client_capabilities = Self::capabilities();
        self.remembered_validation(Subject::Resource, type_name, config, &req.config, || {
            let resp: pb::validate_resource_config::Response =
                self.call(self.methods.validate_resource_config, &req)?;
            Ok(protocol::diagnostics(&resp.diagnostics))
        })
    }

    fn validate_data_config(&self, type_name: &str, config: &Value) -> CallResult<Diagnostics> {
        let ty = self.data_type(type_name)?;
        let mut req = pb::validate_data_resource_config::Request::new();
        req.type_name = type_name.to_string();
        req.config = self.encode(config, ty, "data source configuration")?;
        self.remembered_validation(Subject::DataSource, type_name, config, &req.config, || {
            let resp: pb::validate_data_resource_config::Response =
                self.call(self.methods.validate_data_config, &req)?;
            Ok(protocol::diagnostics(&resp.diagnostics))
        })
    }

    fn upgrade_resource_state(
        &self,
        type_name: &str,
        schema_version: i64,
        raw_json: &[u8],
    ) -> CallResult<(Value, Diagnostics)> {
        let ty = self.resource_type(type_name)?;
        let mut req = pb::upgrade_resource_state::Request::new();
        req.type_name = type_name.to_string();
        req.version = schema_version;
        let mut raw = pb::RawState::new();
        raw.json = raw_json.to_vec();
        req.raw_state = MessageField::some(raw);
        let resp: pb::upgrade_resource_state::Response =
            self.call(self.methods.upgrade_resource_state, &req)?;
        let diags = protocol::diagnostics(&resp.diagnostics);
        if diags.has_errors() {
            return Err(diags);
        }
        let value = self.decode(&resp.upgraded_state, ty, "upgraded state")?;
        Ok((value, diags))
    }

    fn read_resource(
        &self,
        type_name: &str,
        current: &Value,
        private: &[u8],
    ) -> CallResult<ReadResponse> {
        let ty = self.resource_type(type_name)?;
        let mut req = pb::read_resource::Request::new();
        req.type_name = type_name.to_string();
        req.current_state = self.encode(current, ty, "current state")?;
        req.private = private.to_vec();
        req.client_capabilities = Self::capabilities();
        let resp: pb::read_resource::Response = self.call(self.methods.read_resource, &req)?;
        let diagnostics = protocol::diagnostics(&resp.diagnostics);
        let new_state = self.decode(&resp.new_state, ty, "refreshed state")?;
        Ok(ReadResponse {
            new_state,
            private: resp.private,
            diagnostics,
        })
    }

    fn plan_resource_change(&self, r: PlanRequest<'_>) -> CallResult<PlanResponse> {
        let ty = self.resource_type(r.type_name)?;
        let mut req = pb::plan_resource_change::Request::new();
        req.type_name = r.type_name.to_string();
        req.prior_state = self.encode(r.prior_state, ty, "prior state")?;
        req.proposed_new_state = self.encode(r.proposed_new_state, ty, "proposed state")?;
        req.config = self.encode(r.config, ty, "configuration")?;
        req.prior_private = r.prior_private.to_vec();
        req.client_capabilities = Self::capabilities();
        let resp: pb::plan_resource_change::Response =
            self.call(self.methods.plan_resource_change, &req)?;
        let diagnostics = protocol::diagnostics(&resp.diagnostics);
        let planned_state = if diagnostics.has_errors() && resp.planned_state.is_none() {
            Value::Null
        } else {
            self.decode(&resp.planned_state, ty, "planned state")?
        };
        Ok(PlanResponse {
            planned_state,
            requires_replace: resp
                .requires_replace
                .iter()
                .map(protocol::attribute_path)
                .collect(),
            planned_private: resp.planned_private,
            legacy_type_system: resp.legacy_type_system,
            diagnostics,
        })
    }

    fn apply_resource_change(&self, r: ApplyRequest<'_>) -> CallResult<ApplyResponse> {
        let ty = self.resource_type(r.type_name)?;
        let mut req = pb::apply_resource_change::Request::new();
        req.type_name = r.type_name.to_string();
        req.prior_state = self.encode(r.prior_state, ty, "prior state")?;
        req.planned_state = self.encode(r.planned_state, ty, "planned state")?;
        req.config = self.encode(r.config, ty, "configuration")?;
        req.planned_private = r.planned_private.to_vec();
        let resp: pb::apply_resource_change::Response = self.timed_apply(&req)?;
        let diagnostics = protocol::diagnostics(&resp.diagnostics);
        let new_state = self.decode(&resp.new_state, ty, "new state")?;
        Ok(ApplyResponse {
            new_state,
            private: resp.private,
            legacy_type_system: resp.legacy_type_system,
            diagnostics,
        })
    }

    fn import_resource_state(
        &self,
        type_name: &str,
        id: &str,
    ) -> CallResult<(Vec<ImportedResource>, Diagnostics)> {
        self.resource_type(type_name)?;
        let mut req = pb::import_resource_state::Request::new();
        req.type_name = type_name.to_string();
        req.id = id.to_string();
        req.client_capabilities = Self::capabilities();
        let resp: pb::import_resource_state::Response =
            self.call(self.methods.import_resource_state, &req)?;
        let diagnostics = protocol::diagnostics(&resp.diagnostics);
        let mut out = Vec::new();
        for imported in &resp.imported_resources {
            let ty = self.resource_type(&imported.type_name)?;
            out.push(ImportedResource {
                type_name: imported.type_name.clone(),
                state: self.decode(&imported.state, ty, "imported state")?,
                private: imported.private.clone(),
            });
        }
        Ok((out, diagnostics))
    }

    fn read_data_source(
        &self,
        type_name: &str,
        config: &Value,
    ) -> CallResult<(Value, Diagnostics)> {
        let ty = self.data_type(type_name)?;
        let mut req = pb::read_data_source::Request::new();
        req.type_name = type_name.to_string();
        req.config = self.encode(config, ty, "data source configuration")?;
        req.client_capabilities = Self::capabilities();
        let resp: pb::read_data_source::Response =
            self.call(self.methods.read_data_source, &req)?;
        let diagnostics = protocol::diagnostics(&resp.diagnostics);
        let state = if diagnostics.has_errors() {
            Value::Null
        } else {
            self.decode(&resp.state, ty, "data source result")?
        };
        Ok((state, diagnostics))
    }

    fn stop(&self) -> CallResult<()> {
        let req = pb::stop_provider::Request::new();
        let resp: pb::stop_provider::Response = self.call_with(
            self.methods.stop,
            &req,
            CallOption::default().timeout(Duration::from_secs(5)),
        )?;
        let error = protocol::stop_error(&resp);
        if error.is_empty() {
            Ok(())
        } else {
            Err(Diagnostic::error(format!("provider {} could not stop: {error}", self.name)).into())
        }
    }

    fn validate_ephemeral_config(
        &self,
        type_name: &str,
        config: &Value,
    ) -> CallResult<Diagnostics> {
        self.validate_ephemeral_call(type_name, config)
    }

    fn open_ephemeral(&self, type_name: &str, config: &Value) -> CallResult<OpenedEphemeral> {
        self.open_ephemeral_call(type_name, config)
    }

    fn renew_ephemeral(
        &self,
        type_name: &str,
        private: Option<&[u8]>,
    ) -> CallResult<RenewedEphemeral> {
        self.renew_ephemeral_call(type_name, private)
    }

    fn close_ephemeral(&self, type_name: &str, private: Option<&[u8]>) -> CallResult<Diagnostics> {
        self.close_ephemeral_call(type_name, private)
    }
}
