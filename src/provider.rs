//! The one provider interface the engine talks to, whatever protocol the binary speaks.
//!
//! Owns: the [`Provider`] trait and its request/response types, expressed in Nivis's own value
//! and schema model, and the [`Capabilities`] each kind of provider has. Not: gRPC, processes,
//! protobuf messages, msgpack (all in `plugin`), JSON lines (`nixops4`), nor any decision about
//! what to plan (that is `engine`'s and `plan`'s).
//!
//! Every call returns `Err(Diagnostics)` when there is no usable answer (the provider crashed,
//! the call failed, the answer could not be decoded); an `Ok` response may still carry error
//! diagnostics, e.g. an apply that failed half-way and returned a partial object.

use std::time::SystemTime;

use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::ProviderKind;
use crate::schema::ProviderSchema;
use crate::value::{PathStep, Value};

/// Result of a provider call: a response, or the diagnostics explaining why there is none.
pub type CallResult<T> = Result<T, Diagnostics>;

/// What a kind of provider can do beyond answering the calls of [`Provider`]. The engine adapts
/// its sequence to these, never to the name of a protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Capabilities {
    /// Resource types have schemas: configurations are typed and validated, plans checked,
    /// stored objects upgraded and refreshed. Without schemas (NixOps4), a configuration is sent
    /// as a JSON object of inputs, whatever the provider returns is the object's outputs, every
    /// output is unknown until applied, and an object's private bytes are the JSON object of
    /// the inputs it was last applied with.
    pub(crate) schemas: bool,
    /// Objects can be deleted. Without it, an object that leaves the plan (or is destroyed) is
    /// forgotten: removed from state and left as it is; one that must be replaced is
    /// re-created and its predecessor forgotten.
    pub(crate) delete: bool,
}

impl Capabilities {
    /// The capabilities of a provider of `kind`.
    pub(crate) fn of(kind: &ProviderKind) -> Capabilities {
        match kind {
            ProviderKind::Tfplugin => Capabilities {
                schemas: true,
                delete: true,
            },
            // Protocol v0: create and update only.
            ProviderKind::Nixops4 { .. } => Capabilities {
                schemas: false,
                delete: false,
            },
        }
    }
}

/// Inputs of PlanResourceChange.
pub struct PlanRequest<'a> {
    /// Resource type, e.g. `null_resource`.
    pub type_name: &'a str,
    /// The current (upgraded, refreshed) object, or `Value::Null` for a create.
    pub prior_state: &'a Value,
    /// ProposedNew(prior, config), computed by Nivis.
    pub proposed_new_state: &'a Value,
    /// The configuration, conforming to the schema; may contain unknowns.
    pub config: &'a Value,
    /// Opaque provider bytes from state (or from the first plan of a replace).
    pub prior_private: &'a [u8],
}

/// Outputs of PlanResourceChange.
#[derive(Debug, Clone)]
pub struct PlanResponse {
    /// What the provider expects the object to look like after apply; may hold unknowns.
    pub planned_state: Value,
    /// Attribute paths whose change forces replacement (unfiltered).
    pub requires_replace: Vec<Vec<PathStep>>,
    /// Opaque bytes to hand to apply.
    pub planned_private: Vec<u8>,
    /// The provider uses the legacy SDK type system (plan/apply checks become warnings).
    pub legacy_type_system: bool,
    /// Warnings and errors.
    pub diagnostics: Diagnostics,
}

/// Inputs of ApplyResourceChange.
pub struct ApplyRequest<'a> {
    /// Resource type.
    pub type_name: &'a str,
    /// The object before the change (`Null` for create).
    pub prior_state: &'a Value,
    /// The planned object (`Null` for delete).
    pub planned_state: &'a Value,
    /// The wholly known configuration (`Null` for delete).
    pub config: &'a Value,
    /// Bytes from the matching plan.
    pub planned_private: &'a [u8],
}

/// Outputs of ApplyResourceChange.
#[derive(Debug, Clone)]
pub struct ApplyResponse {
    /// The object after the change (`Null` after a delete); may be partial on error.
    pub new_state: Value,
    /// Opaque bytes to store.
    pub private: Vec<u8>,
    /// Legacy SDK type system flag.
    pub legacy_type_system: bool,
    /// Warnings and errors.
    pub diagnostics: Diagnostics,
}

/// Outputs of ReadResource.
#[derive(Debug, Clone)]
pub struct ReadResponse {
    /// The refreshed object, `Null` if it no longer exists.
    pub new_state: Value,
    /// Opaque bytes to store.
    pub private: Vec<u8>,
    /// Warnings and errors.
    pub diagnostics: Diagnostics,
}

/// One object returned by ImportResourceState.
#[derive(Debug, Clone)]
pub struct ImportedResource {
    /// Resource type of the imported object.
    pub type_name: String,
    /// Its state.
    pub state: Value,
    /// Opaque bytes to store.
    pub private: Vec<u8>,
}

/// Outputs of OpenEphemeralResource: a value for this run only, never stored.
#[derive(Debug, Clone)]
pub struct OpenedEphemeral {
    /// The value (the ephemeral type's schema object).
    pub result: Value,
    /// Opaque bytes to hand to Renew and Close (absent: the provider keeps none).
    pub private: Option<Vec<u8>>,
    /// When the provider wants RenewEphemeralResource called (absent: never).
    pub renew_at: Option<SystemTime>,
    /// Warnings and errors.
    pub diagnostics: Diagnostics,
}

/// Outputs of RenewEphemeralResource.
#[derive(Debug, Clone)]
pub struct RenewedEphemeral {
    /// Replacement private bytes (absent: the provider keeps none).
    pub private: Option<Vec<u8>>,
    /// The next renewal (absent: no more renewals).
    pub renew_at: Option<SystemTime>,
    /// Warnings and errors.
    pub diagnostics: Diagnostics,
}

fn no_ephemeral_resources() -> Diagnostics {
    Diagnostic::error("this provider has no ephemeral resource types").into()
}

/// The operations Nivis needs from a provider.
///
/// Implementations must be callable from many threads at once, as OpenTofu calls providers.
pub trait Provider: Send + Sync {
    /// The provider's schema (fetched once when the process started).
    fn schema(&self) -> &ProviderSchema;
    /// A mark naming this provider binary and the schema it serves, recorded on the objects
    /// it returns (`None`, the default: unknown, and stored objects are always upgraded
    /// through the provider). See DESIGN §79.
    fn binary_mark(&self) -> Option<&str> {
        None
    }
    /// Checks a provider configuration without configuring.
    fn validate_provider_config(&self, config: &Value) -> CallResult<Diagnostics>;
    /// Configures the provider (once per process).
    fn configure(&self, config: &Value) -> CallResult<Diagnostics>;
    /// Checks a managed resource configuration.
    fn validate_resource_config(&self, type_name: &str, config: &Value) -> CallResult<Diagnostics>;
    /// Checks a data source configuration.
    fn validate_data_config(&self, type_name: &str, config: &Value) -> CallResult<Diagnostics>;
    /// Upgrades stored state JSON (written by `schema_version`) to the current schema.
    fn upgrade_resource_state(
        &self,
        type_name: &str,
        schema_version: i64,
        raw_json: &[u8],
    ) -> CallResult<(Value, Diagnostics)>;
    /// Refreshes an object from the real world.
    fn read_resource(
        &self,
        type_name: &str,
        current: &Value,
        private: &[u8],
    ) -> CallResult<ReadResponse>;
    /// Plans a change.
    fn plan_resource_change(&self, request: PlanRequest<'_>) -> CallResult<PlanResponse>;
    /// Applies a planned change.
    fn apply_resource_change(&self, request: ApplyRequest<'_>) -> CallResult<ApplyResponse>;
    /// Imports an existing object by its provider id.
    fn import_resource_state(
        &self,
        type_name: &str,
        id: &str,
    ) -> CallResult<(Vec<ImportedResource>, Diagnostics)>;
    /// Reads a data source.
    fn read_data_source(&self, type_name: &str, config: &Value)
        -> CallResult<(Value, Diagnostics)>;
    /// Asks the provider to cancel in-flight operations (Ctrl-C).
    fn stop(&self) -> CallResult<()>;
    /// Checks an ephemeral resource configuration (default: the provider has none).
    fn validate_ephemeral_config(
        &self,
        _type_name: &str,
        _config: &Value,
    ) -> CallResult<Diagnostics> {
        Err(no_ephemeral_resources())
    }
    /// Opens an ephemeral resource: a value for this run only.
    fn open_ephemeral(&self, _type_name: &str, _config: &Value) -> CallResult<OpenedEphemeral> {
        Err(no_ephemeral_resources())
    }
    /// Renews an open ephemeral resource (at the `renew_at` it asked for).
    fn renew_ephemeral(
        &self,
        _type_name: &str,
        _private: Option<&[u8]>,
    ) -> CallResult<RenewedEphemeral> {
        Err(no_ephemeral_resources())
    }
    /// Closes an open ephemeral resource (the provider may revoke what it handed out).
    fn close_ephemeral(
        &self,
        _type_name: &str,
        _private: Option<&[u8]>,
    ) -> CallResult<Diagnostics> {
        Err(no_ephemeral_resources())
    }
}
