//! A stored object brought to the provider's current schema: through `UpgradeResourceState`,
//! or, when the record is the same binary's own answer at the same schema version, by decoding
//! it here (DESIGN §79).
//!
//! Owns: the rule that spares the call, and the one place every upgrade of a stored object goes
//! through (plan, refresh, destroy). Not: writing the mark on records (`record`, `refresh`) or
//! computing it (the plugin client, from the schema cache's keys).

use serde_json::Value as Json;

use crate::diag::Diagnostics;
use crate::provider::{CallResult, Provider};
use crate::state::ResourceState;
use crate::value::{self, Value};

/// A stored object as its record holds it.
pub(super) struct StoredObject<'a> {
    /// The resource type.
    pub(crate) type_name: &'a str,
    /// The schema version the attributes were written at.
    pub(crate) schema_version: i64,
    /// The attributes as state JSON.
    pub(crate) attributes: &'a Json,
    /// The record's [`Provider::binary_mark`] (`None`: not known to be a provider's answer).
    pub(crate) written_by: Option<&'a str>,
}

impl<'a> StoredObject<'a> {
    /// The current object of `record`.
    pub(super) fn of(record: &'a ResourceState) -> StoredObject<'a> {
        StoredObject {
            type_name: &record.type_name,
            schema_version: record.schema_version,
            attributes: &record.attributes,
            written_by: record.written_by.as_deref(),
        }
    }
}

/// The stored object as the provider's current schema reads it, and the upgrade's diagnostics.
pub(super) fn upgrade(
    provider: &dyn Provider,
    stored: &StoredObject<'_>,
) -> CallResult<(Value, Diagnostics)> {
    if let Some(current) = already_current(provider, stored) {
        return Ok((current, Diagnostics::new()));
    }
    let raw = serde_json::to_vec(stored.attributes).expect("state attributes serialise");
    provider.upgrade_resource_state(stored.type_name, stored.schema_version, &raw)
}

/// The object decoded here, when the upgrade would be the identity: the record carries this
/// provider's mark (same binary, same schema), was written at the schema's current version,
/// and its JSON is exactly what recording the decoded value writes (so nothing in it is
/// foreign to the schema: no unknown attribute, no missing one, no other spelling). Anything
/// else (`None`) goes to the provider.
fn already_current(provider: &dyn Provider, stored: &StoredObject<'_>) -> Option<Value> {
    let mark = provider.binary_mark()?;
    if stored.written_by != Some(mark) {
        return None;
    }
    let schema = provider.schema().resources.get(stored.type_name)?;
    if schema.version != stored.schema_version {
        return None;
    }
    let ty = schema.block.implied_type();
    let decoded = value::json::from_state_json(stored.attributes, &ty).ok()?;
    let recorded = value::json::to_state_json(&decoded, &ty).ok()?;
    (recorded == *stored.attributes).then_some(decoded)
}
