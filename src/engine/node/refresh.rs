//! A stored object read back through its provider: the current object a resource's turn plans
//! from, and `nivis refresh`'s state change.
//!
//! Owns: upgrading the stored object, reading it, and turning the answer into the current
//! object, a state change and the drift to report. Not: planning or applying anything
//! (`managed`), deciding which objects to refresh or recording the change (the engine's
//! `refresh`).

use serde_json::Value as Json;

use super::err;
use super::record::{display_changes, path_json};
use super::upgrade::{upgrade, StoredObject};
use super::NodeInput;
use crate::diag::Diagnostics;
use crate::engine::events::AttrChange;
use crate::plan;
use crate::provider::Provider;
use crate::schema::Block;
use crate::secrets::Redactor;
use crate::state::{Change, ResourceState};
use crate::value;
use crate::value::Value;

/// Reads a stored object back (`nivis refresh`): the change to record, if the provider's answer
/// differs in any way (attributes, private data, schema version), and the drift to report, if
/// the object itself differs (private data and a schema upgrade are no drift).
pub(crate) fn refresh(
    provider: &dyn Provider,
    state: &ResourceState,
    redactor: &Redactor,
) -> Result<(Option<Change>, Option<Drift>), Diagnostics> {
    let schema = provider.schema();
    let s = schema.resources.get(&state.type_name).ok_or_else(|| {
        err(format!(
            "provider has no resource type {:?}",
            state.type_name
        ))
    })?;
    let ty = s.block.implied_type();
    let (current, _) = upgrade(provider, &StoredObject::of(state))?;
    let private = state.private.clone().unwrap_or_default();
    let read = provider.read_resource(&state.type_name, &current, &private)?;
    if read.diagnostics.has_errors() {
        return Err(read.diagnostics);
    }
    if read.new_state.is_null() {
        return Ok((
            Some(Change::Remove(state.id.clone())),
            Some((Vec::new(), true)),
        ));
    }
    let attributes =
        value::json::to_state_json(&read.new_state, &ty).map_err(|e| err(e.to_string()))?;
    let new_private = (!read.private.is_empty()).then_some(read.private.clone());
    let drift = crate::plan::drifted(&current, &read.new_state, &ty).then(|| {
        (
            drift_changes(&s.block, &current, &read.new_state, state),
            false,
        )
    });
    if attributes == state.attributes
        && new_private == state.private
        && state.schema_version == s.version
        && state.written_by.as_deref() == provider.binary_mark()
    {
        return Ok((None, None));
    }
    let mut rec = state.clone();
    rec.attributes = attributes;
    rec.private = new_private;
    rec.schema_version = s.version;
    rec.written_by = provider.binary_mark().map(str::to_string);
    // What the schema marks now, plus what the record marked before (values set from secrets
    // stay secret when the object is read again).
    let mut paths: Vec<Json> = s
        .block
        .sensitive_paths(&read.new_state)
        .iter()
        .map(|p| path_json(p))
        .collect();
    for p in &state.sensitive_paths {
        if !paths.contains(p) {
            paths.push(p.clone());
        }
    }
    rec.sensitive_paths = paths;
    rec.teach_secrets(redactor);
    Ok((Some(Change::Put(rec)), drift))
}

/// Attribute changes found by refresh, and whether the object is gone.
pub(super) type Drift = (Vec<AttrChange>, bool);

/// Upgrades (and optionally refreshes) the stored object: returns (object, private, drift).
pub(super) fn current_object(
    input: &NodeInput,
    block: &Block,
    prior: &ResourceState,
    diags: &mut Diagnostics,
) -> Result<(Value, Vec<u8>, Option<Drift>), Diagnostics> {
    let (upgraded, d) = upgrade(input.provider.as_ref(), &StoredObject::of(prior))?;
    diags.extend(d);
    let private = prior.private.clone().unwrap_or_default();
    if !input.refresh {
        return Ok((upgraded, private, None));
    }
    let read = input
        .provider
        .read_resource(&input.type_name, &upgraded, &private)?;
    let errors = read.diagnostics.has_errors();
    diags.extend(read.diagnostics);
    if errors {
        return Err(std::mem::take(diags));
    }
    let drift = if read.new_state.is_null() {
        Some((Vec::new(), true))
    } else if plan::drifted(&upgraded, &read.new_state, &block.implied_type()) {
        Some((
            drift_changes(block, &upgraded, &read.new_state, prior),
            false,
        ))
    } else {
        None
    };
    Ok((read.new_state, read.private, drift))
}

/// How a drifted object differs from its record, a null and an empty collection being one
/// value on either side (DESIGN §90).
pub(super) fn drift_changes(
    block: &Block,
    recorded: &Value,
    read: &Value,
    prior: &ResourceState,
) -> Vec<AttrChange> {
    let ty = block.implied_type();
    display_changes(
        block,
        &plan::empty_as_null(recorded, &ty),
        &plan::empty_as_null(read, &ty),
        &[],
        &prior.sensitive_paths,
    )
}
