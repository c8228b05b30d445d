//! Turning a provider's object into a state record: attributes as state JSON, private bytes,
//! and the paths recorded as sensitive (the schema's, and those set from sensitive inputs).

use serde_json::Value as Json;

use super::{err, NodeInput};
use crate::diag::Diagnostics;
use crate::engine::events::AttrChange;
use crate::plan;
use crate::schema::Block;
use crate::state::{ResourceKind, ResourceState};
use crate::value::{self, PathStep, Type, Value};

/// Builds the state record for `value`.
pub(super) fn record(
    input: &NodeInput,
    block: &Block,
    ty: &Type,
    value: &Value,
    private: &[u8],
    schema_version: i64,
    kind: ResourceKind,
) -> Result<ResourceState, Diagnostics> {
    let attributes = value::json::to_state_json(value, ty)
        .map_err(|e| err(format!("cannot record the provider's answer: {e}")))?;
    let mut r = ResourceState::new(
        &input.id,
        kind,
        &input.provider_id,
        &input.provider_source,
        &input.type_name,
        attributes,
    );
    r.schema_version = schema_version;
    r.written_by = input.provider.binary_mark().map(str::to_string);
    r.private = if private.is_empty() {
        None
    } else {
        Some(private.to_vec())
    };
    r.dependencies = input.dependencies.clone();
    r.sensitive_paths = schema_sensitive_paths(block, value);
    for attr in input
        .sensitive_inputs
        .iter()
        .chain(&echoes_of_sensitive_inputs(input, value))
    {
        let path = Json::Array(vec![Json::String(attr.clone())]);
        if !r.sensitive_paths.contains(&path) {
            r.sensitive_paths.push(path);
        }
    }
    r.create_before_destroy = input.lifecycle.create_before_destroy;
    // Fields a newer Nivis recorded for this resource are kept across the rewrite.
    if let Some(prior) = &input.prior {
        r.extra = prior.extra.clone();
    }
    r.replace_triggers = input.triggers.digests.clone();
    r.teach_secrets(&input.redactor);
    Ok(r)
}

/// The paths `block` marks sensitive in `value`, as state records them (JSON arrays).
pub(super) fn schema_sensitive_paths(block: &Block, value: &Value) -> Vec<Json> {
    block
        .sensitive_paths(value)
        .iter()
        .map(|p| path_json(p))
        .collect()
}

/// Top-level attributes of `value` holding a copy of a sensitive input (a provider that
/// computes `endpoint = "https://" + password + "@host"` does not mark it sensitive, but the
/// secret is in it all the same). Inputs shorter than [`crate::secrets::MIN_LEN`] are not
/// looked for: short values turn up by chance.
pub(super) fn echoes_of_sensitive_inputs(input: &NodeInput, value: &Value) -> Vec<String> {
    let (Some(config), Some(attrs)) = (input.config.as_map(), value.as_map()) else {
        return Vec::new();
    };
    let mut secrets = Vec::new();
    for a in &input.sensitive_inputs {
        if let Some(v) = config.get(a) {
            crate::secrets::each_scalar_value(v, &mut |s| {
                if s.len() >= crate::secrets::MIN_LEN {
                    secrets.push(s.to_string());
                }
            });
        }
    }
    if secrets.is_empty() {
        return Vec::new();
    }
    attrs
        .iter()
        .filter(|(_, v)| {
            let mut found = false;
            crate::secrets::each_scalar_value(v, &mut |s| {
                found |= secrets.iter().any(|x| s.contains(x.as_str()))
            });
            found
        })
        .map(|(k, _)| k.clone())
        .collect()
}

/// Paths known to be sensitive for this resource besides what its schema says: what its record
/// marks (a prior value set from a secret stays masked in a diff) and the top-level attributes
/// set from sensitive inputs now.
pub(super) fn marked_sensitive(input: &NodeInput) -> Vec<Json> {
    let mut out: Vec<Json> = input
        .prior
        .iter()
        .flat_map(|p| p.sensitive_paths.iter().cloned())
        .collect();
    out.extend(
        input
            .sensitive_inputs
            .iter()
            .map(|a| Json::Array(vec![Json::String(a.clone())])),
    );
    out
}

/// Whether one of two paths lies within the other: a state path (JSON keys and indices) and a
/// value path.
pub(super) fn overlaps(marked: &Json, path: &[PathStep]) -> bool {
    let Some(steps) = marked.as_array() else {
        return false;
    };
    steps.iter().zip(path).all(|(m, p)| match (m, p) {
        (Json::String(a), PathStep::Attr(b) | PathStep::Key(b)) => a == b,
        (Json::Number(n), PathStep::Index(i)) => n.as_u64() == Some(*i),
        _ => false,
    })
}

pub(in crate::engine) fn path_json(path: &[PathStep]) -> Json {
    Json::Array(
        path.iter()
            .map(|s| match s {
                PathStep::Attr(a) | PathStep::Key(a) => Json::String(a.clone()),
                PathStep::Index(i) => Json::from(*i),
            })
            .collect(),
    )
}

/// The write-only attributes `config` sets, as the plan lists them: sent to the provider with
/// the change, never planned or stored, so no value on either side.
pub(super) fn write_only_sent(block: &Block, config: &Value) -> Vec<AttrChange> {
    (block.write_only_paths(config).into_iter())
        .map(|path| AttrChange {
            path,
            before: None,
            after: None,
            sensitive: false,
            forces_replacement: false,
            write_only: true,
        })
        .collect()
}

/// The changed attributes between two objects, with sensitivity and replacement marks.
/// `marked` adds paths known to be sensitive beyond the schema (JSON arrays, as in state).
pub(super) fn display_changes(
    block: &Block,
    before: &Value,
    after: &Value,
    replace: &[Vec<PathStep>],
    marked: &[Json],
) -> Vec<AttrChange> {
    let sensitive: Vec<Vec<PathStep>> = block
        .sensitive_paths(before)
        .into_iter()
        .chain(block.sensitive_paths(after))
        .collect();
    let sensitive_top: Vec<&str> = block
        .attributes
        .iter()
        .filter(|(_, a)| a.sensitive)
        .map(|(n, _)| n.as_str())
        .collect();
    plan::diff_typed(before, after, &block.implied_type())
        .into_iter()
        .map(|(path, b, a)| {
            let is_sensitive = sensitive.iter().any(|s| path.starts_with(s))
                || matches!(path.first(), Some(PathStep::Attr(n)) if sensitive_top.contains(&n.as_str()))
                || marked.iter().any(|m| overlaps(m, &path));
            let forces = replace.iter().any(|r| path.starts_with(r) || r.starts_with(&path));
            AttrChange { path, before: b, after: a, sensitive: is_sensitive, forces_replacement: forces, write_only: false }
        })
        .collect()
}
