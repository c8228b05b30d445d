//! [`Nixops4Provider`]: the [`Provider`] interface over a NixOps4 resource provider process.
//!
//! Owns: translating the engine's calls into protocol v0 requests and the answers back, one
//! request at a time, and turning every way a conversation can fail (an `errorResponse`, a
//! malformed line, an unknown response type, an early exit, no answer in time) into diagnostics
//! that name the provider and what it was asked. Not: the process itself (`process`), message
//! shapes (`wire`), or deciding what to do with a resource (the engine).
//!
//! What protocol v0 has, and how each engine call maps onto it:
//! - create and update: `apply_resource_change` with no prior object sends
//!   `createResourceRequest` (`isStateful` is false exactly for the provider's declared
//!   `statelessTypes`); with one, `updateResourceRequest` carrying the inputs and outputs last
//!   recorded.
//! - no plan request: `plan_resource_change` is answered here. Unchanged inputs plan a no-op
//!   (the recorded outputs); anything else plans an object that is wholly unknown until
//!   applied, and a stateless type asks for replacement (the engine re-creates it).
//! - no schema, validation, configuration, read, import, data source or delete: the schema is
//!   empty, the configuration must be empty, reading returns the recorded object, and the rest
//!   are errors the engine never provokes for this kind.
//!
//! The private bytes of an object are the JSON object of inputs it was last applied with
//! (the contract for providers without schemas, see [`crate::provider::Capabilities`]).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value as Json;

use super::process::{ProviderProcess, Reply, SpawnError, MAX_RESPONSE_LINE};
use super::wire::{self, Properties, Request, Response};
use crate::diag::{Diagnostic, Diagnostics};
use crate::plugin::InFlight;
use crate::provider::{
    ApplyRequest, ApplyResponse, CallResult, ImportedResource, PlanRequest, PlanResponse, Provider,
    ReadResponse,
};
use crate::schema::ProviderSchema;
use crate::value::{self, Value};

/// How long a request may go unanswered by default; `NIVIS_NIXOPS4_TIMEOUT_SECS` overrides it.
/// Generous: an `exec` resource may legitimately run for a long time.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);

/// The environment variable that sets the request timeout, in seconds.
pub(crate) const TIMEOUT_ENV: &str = "NIVIS_NIXOPS4_TIMEOUT_SECS";

/// A NixOps4 resource provider speaking protocol v0.
pub struct Nixops4Provider {
    name: String,
    stateless_types: BTreeSet<String>,
    schema: ProviderSchema,
    process: ProviderProcess,
    /// Held for a whole request/response exchange: protocol v0 answers one request at a time.
    /// Holds why the process can no longer be used, once it cannot.
    conversation: Mutex<Option<String>>,
    timeout: Duration,
    /// Set by Ctrl-C: nothing new is sent.
    stopped: AtomicBool,
}

/// The request timeout from the environment, or the default.
pub(crate) fn request_timeout() -> Duration {
    match std::env::var(TIMEOUT_ENV) {
        Err(_) => DEFAULT_TIMEOUT,
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(secs) if secs > 0 => Duration::from_secs(secs),
            _ => {
                log::warn!(
                    "{TIMEOUT_ENV}={v:?} is not a positive number of seconds; using {}",
                    DEFAULT_TIMEOUT.as_secs()
                );
                DEFAULT_TIMEOUT
            }
        },
    }
}

impl Nixops4Provider {
    /// Starts the provider binary. Protocol v0 has no handshake: the process is ready once it
    /// runs. Call from the thread that owns the run (see [`ProviderProcess::spawn`]).
    pub fn start(
        name: &str,
        path: &Path,
        stateless_types: &BTreeSet<String>,
        timeout: Duration,
    ) -> Result<Nixops4Provider, SpawnError> {
        let _in_flight = InFlight::lifecycle();
        let process = ProviderProcess::spawn(name, path)?;
        Ok(Nixops4Provider {
            name: name.to_string(),
            stateless_types: stateless_types.clone(),
            schema: ProviderSchema::default(),
            process,
            conversation: Mutex::new(None),
            timeout,
            stopped: AtomicBool::new(false),
        })
    }

    fn error(&self, summary: impl std::fmt::Display) -> Diagnostics {
        Diagnostic::error(format!("provider {}: {summary}", self.name)).into()
    }

    /// `isStateful` for a type: Nivis keeps every object's inputs and outputs, and sends
    /// updates to every type but the stateless ones.
    fn is_stateful(&self, type_name: &str) -> bool {
        !self.stateless_types.contains(type_name)
    }

    /// Sends one request and reads its answer. A broken conversation (anything but a
    /// well-formed answer of the expected type) stops the process: nothing it says afterwards
    /// can be matched to a request.
    fn exchange(&self, type_name: &str, request: &Request) -> CallResult<Response> {
        let mut broken = self.conversation.lock().unwrap_or_else(|e| e.into_inner());
        let what = format!("{} (type {type_name:?})", request.name());
        if self.stopped.load(Ordering::SeqCst) {
            return Err(self.error(format!("interrupted: {what} was not sent")));
        }
        if let Some(why) = broken.as_ref() {
            return Err(self.error(format!("not running any more ({why}); {what} was not sent")));
        }
        let _in_flight = InFlight::rpc();
        let failure = match self.process.send(&request.to_line()) {
            Err(_) if self.stopped.load(Ordering::SeqCst) => {
                return Err(self.error(format!("interrupted: {what} was not sent")));
            }
            Err(e) => Failure::Exited(format!("could not send {what}: {e}")),
            Ok(()) => match self.process.receive(self.timeout) {
                Reply::Line(line) => match wire::parse_response(&line, request.expected_response())
                {
                    Ok(response) => return Ok(response),
                    Err(e) => Failure::Garbled(format!("answered {what} with {e}"), Some(line)),
                },
                Reply::TooLong(n) => Failure::Garbled(
                    format!("answered {what} with a line of {n} bytes, over the limit of {MAX_RESPONSE_LINE}"),
                    None,
                ),
                Reply::NotUtf8 => {
                    Failure::Garbled(format!("answered {what} with a line that is not UTF-8"), None)
                }
                Reply::Closed => Failure::Exited(format!("exited before answering {what}")),
                Reply::TimedOut => Failure::Hung(format!(
                    "did not answer {what} within {}s",
                    self.timeout.as_secs()
                )),
            },
        };
        let (summary, detail) = self.give_up(failure);
        *broken = Some(summary.clone());
        Err(
            Diagnostic::error(format!("provider {}: {summary}", self.name))
                .with_detail(detail)
                .into(),
        )
    }

    /// Stops the process after a failed exchange; returns the summary and the detail to show.
    fn give_up(&self, failure: Failure) -> (String, String) {
        let mut detail = String::new();
        let summary = match failure {
            Failure::Exited(summary) => {
                match self.process.wait_exit(Duration::from_secs(1)) {
                    Some(status) => detail.push_str(&format!("The provider exited ({status}).\n")),
                    None => self.process.kill(),
                }
                summary
            }
            Failure::Garbled(summary, line) => {
                self.process.kill();
                if let Some(line) = line {
                    detail.push_str(&format!("The line: {}\n", clip(&line, 300)));
                }
                detail.push_str(
                    "A NixOps4 provider must answer each request with one line of JSON on stdout \
                     (logs go to stderr). The provider was stopped.\n",
                );
                summary
            }
            Failure::Hung(summary) => {
                self.process.kill();
                detail.push_str(&format!(
                    "The provider was stopped. The operation may have taken effect without Nivis \
                     recording it. If it legitimately takes longer, set {TIMEOUT_ENV}.\n"
                ));
                summary
            }
        };
        // The process is gone or killed by now: its last stderr lines follow shortly.
        self.process.wait_stderr_closed(Duration::from_millis(500));
        let tail = self.process.stderr_tail();
        if !tail.is_empty() {
            detail.push_str("Provider stderr (last lines):\n");
            detail.push_str(&tail);
        }
        (summary, detail.trim_end().to_string())
    }

    /// An `errorResponse` as a diagnostic: its first line is the summary; the rest (often a
    /// backtrace) is the detail at `-v`, and only mentioned otherwise.
    fn error_response(&self, message: &str) -> Diagnostic {
        let message = message.trim();
        let (first, rest) = message.split_once('\n').unwrap_or((message, ""));
        let first = if first.trim().is_empty() {
            "failed without a message"
        } else {
            first.trim()
        };
        let rest = rest.trim();
        let detail = if rest.is_empty() {
            String::new()
        } else if log::log_enabled!(log::Level::Info) {
            rest.to_string()
        } else {
            format!(
                "The provider's message has {} more line(s); run with -v to see them.",
                rest.lines().count()
            )
        };
        Diagnostic::error(format!("provider {}: {first}", self.name)).with_detail(detail)
    }

    fn inputs(&self, config: &Value) -> CallResult<Properties> {
        match value::json::to_plain_json(config) {
            Ok(Json::Object(map)) => Ok(map),
            Ok(other) => Err(self.error(format!(
                "the configuration must be an object of input properties, got {other}"
            ))),
            Err(e) => Err(self.error(format!(
                "the configuration is not known yet at apply time (internal error): {e}"
            ))),
        }
    }

    fn recorded_inputs(&self, private: &[u8]) -> CallResult<Properties> {
        match serde_json::from_slice::<Json>(private) {
            Ok(Json::Object(map)) => Ok(map),
            _ => Err(self.error(
                "the state of this resource holds no inputs it was applied with (was the state \
                 edited?); remove it with `nivis state rm` and apply again",
            )),
        }
    }

    fn recorded_outputs(&self, prior: &Value) -> CallResult<Properties> {
        match value::json::to_plain_json(prior) {
            Ok(Json::Object(map)) => Ok(map),
            _ => Err(self.error("the recorded outputs of this resource are not an object")),
        }
    }
}

/// How an exchange failed.
enum Failure {
    /// The process is gone (or its stdin is): summary.
    Exited(String),
    /// It answered with something that is not the expected message: summary, the line.
    Garbled(String, Option<String>),
    /// No answer in time: summary.
    Hung(String),
}

/// At most `max` characters of `s`, marked when cut.
fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}… ({} bytes in all)", &s[..i], s.len()),
        None => s.to_string(),
    }
}

impl Provider for Nixops4Provider {
    fn schema(&self) -> &ProviderSchema {
        &self.schema
    }

    fn validate_provider_config(&self, config: &Value) -> CallResult<Diagnostics> {
        match config.as_map() {
            Some(m) if !m.is_empty() => {
                Err(self.error("a NixOps4 provider takes no configuration"))
            }
            _ => Ok(Diagnostics::new()),
        }
    }

    fn configure(&self, config: &Value) -> CallResult<Diagnostics> {
        self.validate_provider_config(config)
    }

    fn validate_resource_config(&self, _type: &str, _config: &Value) -> CallResult<Diagnostics> {
        // Protocol v0 has no validation: the provider checks inputs when it creates.
        Ok(Diagnostics::new())
    }

    fn validate_data_config(&self, type_name: &str, _config: &Value) -> CallResult<Diagnostics> {
        Err(self.error(format!(
            "has no data source {type_name:?}: NixOps4 providers have none"
        )))
    }

    fn upgrade_resource_state(
        &self,
        _type: &str,
        _schema_version: i64,
        raw_json: &[u8],
    ) -> CallResult<(Value, Diagnostics)> {
        // No schema, no versions: the recorded outputs are current.
        let json: Json = serde_json::from_slice(raw_json)
            .map_err(|e| self.error(format!("the recorded outputs are not JSON: {e}")))?;
        Ok((value::json::from_plain_json(&json), Diagnostics::new()))
    }

    fn read_resource(
        &self,
        _type: &str,
        current: &Value,
        private: &[u8],
    ) -> CallResult<ReadResponse> {
        // Protocol v0 cannot read an object back: the recorded one is all there is.
        Ok(ReadResponse {
            new_state: current.clone(),
            private: private.to_vec(),
            diagnostics: Diagnostics::new(),
        })
    }

    fn plan_resource_change(&self, r: PlanRequest<'_>) -> CallResult<PlanResponse> {
        let mut plan = PlanResponse {
            planned_state: Value::Unknown,
            requires_replace: Vec::new(),
            planned_private: r.prior_private.to_vec(),
            legacy_type_system: false,
            diagnostics: Diagnostics::new(),
        };
        if r.prior_state.is_null() {
            return Ok(plan);
        }
        let recorded = self.recorded_inputs(r.prior_private)?;
        let unchanged =
            value::json::to_plain_json(r.config).is_ok_and(|now| now == Json::Object(recorded));
        if unchanged {
            plan.planned_state = r.prior_state.clone();
        } else if !self.is_stateful(r.type_name) {
            // The whole object: a stateless type cannot be updated in place.
            plan.requires_replace.push(Vec::new());
        }
        Ok(plan)
    }

    fn apply_resource_change(&self, r: ApplyRequest<'_>) -> CallResult<ApplyResponse> {
        if r.planned_state.is_null() {
            return Err(self.error(
                "protocol v0 has no delete; objects leaving the plan are forgotten (internal \
                 error: a delete was attempted)",
            ));
        }
        let inputs = self.inputs(r.config)?;
        let request = if r.prior_state.is_null() {
            Request::CreateResourceRequest(wire::CreateResourceRequest {
                type_name: r.type_name.to_string(),
                input_properties: inputs.clone(),
                is_stateful: self.is_stateful(r.type_name),
            })
        } else {
            Request::UpdateResourceRequest(wire::UpdateResourceRequest {
                resource: wire::ExtantResource {
                    type_name: r.type_name.to_string(),
                    input_properties: self.recorded_inputs(r.planned_private)?,
                    output_properties: self.recorded_outputs(r.prior_state)?,
                },
                input_properties: inputs.clone(),
            })
        };
        let mut response = ApplyResponse {
            new_state: Value::Null,
            private: Vec::new(),
            legacy_type_system: false,
            diagnostics: Diagnostics::new(),
        };
        match self.exchange(r.type_name, &request)? {
            Response::Error { message } => response.diagnostics.push(self.error_response(&message)),
            Response::Outputs { outputs, .. } => {
                response.new_state = value::json::from_plain_json(&Json::Object(outputs));
                response.private =
                    serde_json::to_vec(&Json::Object(inputs)).expect("inputs serialise");
            }
        }
        Ok(response)
    }

    fn import_resource_state(
        &self,
        type_name: &str,
        _id: &str,
    ) -> CallResult<(Vec<ImportedResource>, Diagnostics)> {
        Err(self.error(format!(
            "cannot import {type_name:?}: protocol v0 has no import"
        )))
    }

    fn read_data_source(
        &self,
        type_name: &str,
        config: &Value,
    ) -> CallResult<(Value, Diagnostics)> {
        self.validate_data_config(type_name, config)
            .map(|d| (Value::Null, d))
    }

    /// Ctrl-C: protocol v0 has no cancel, so nothing new is sent and stdin is closed, which
    /// tells the provider to exit once it has answered the request in flight (if any).
    fn stop(&self) -> CallResult<()> {
        self.stopped.store(true, Ordering::SeqCst);
        self.process.close_stdin();
        Ok(())
    }
}

impl Drop for Nixops4Provider {
    fn drop(&mut self) {
        // The process closes stdin, waits briefly and kills; count that as provider time.
        let _in_flight = InFlight::lifecycle();
        self.process.close_stdin();
        if self.process.wait_exit(Duration::from_secs(2)).is_none() {
            self.process.kill();
        }
    }
}
