//! Deleting objects: a replaced object, the deposed objects of a create-before-destroy
//! replacement, a recorded object on `destroy`.

use std::time::Instant;

use super::upgrade::{upgrade, StoredObject};
use super::DeposedGone;
use crate::diag::Diagnostics;
use crate::engine::Mutation;
use crate::provider::{ApplyRequest, Provider};
use crate::state::ResourceState;
use crate::value::Value;

/// A delete the provider did not carry out (an error diagnostic or a failed call); the
/// diagnostics collected alongside say why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeleteFailed;

impl std::fmt::Display for DeleteFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the provider did not delete the object (its diagnostics say why)")
    }
}

impl std::error::Error for DeleteFailed {}

/// Deposed objects still there after [`destroy_deposed`]: their keys, in the record's order;
/// the diagnostics collected alongside say why each delete failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeposedLeft {
    /// The keys of the deposed objects not deleted.
    pub(crate) keys: Vec<String>,
}

impl std::fmt::Display for DeposedLeft {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "deposed objects not deleted: {} (the diagnostics say why)",
            self.keys.join(", ")
        )
    }
}

impl std::error::Error for DeposedLeft {}

/// Deletes an object (apply with a null plan).
pub(super) fn destroy_object(
    provider: &dyn Provider,
    type_name: &str,
    prior: &Value,
    private: &[u8],
    diags: &mut Diagnostics,
    _mutation: Mutation,
) -> Result<(), DeleteFailed> {
    match provider.apply_resource_change(ApplyRequest {
        type_name,
        prior_state: prior,
        planned_state: &Value::Null,
        config: &Value::Null,
        planned_private: private,
    }) {
        Ok(resp) => {
            let failed = resp.diagnostics.has_errors();
            diags.extend(resp.diagnostics);
            if failed {
                Err(DeleteFailed)
            } else {
                Ok(())
            }
        }
        Err(d) => {
            diags.extend(d);
            Err(DeleteFailed)
        }
    }
}

/// Destroys the deposed objects of `prior`, reporting each success at once (`gone`). On
/// failure, returns the keys still deposed (the diagnostics say why).
pub(in crate::engine) fn destroy_deposed(
    provider: &dyn Provider,
    prior: &ResourceState,
    gone: &dyn Fn(DeposedGone),
    diags: &mut Diagnostics,
    mutation: Mutation,
) -> Result<(), DeposedLeft> {
    let mut remaining = prior.deposed.clone();
    for old in &prior.deposed {
        let started = Instant::now();
        let mut old_diags = Diagnostics::new();
        let stored = StoredObject {
            type_name: &prior.type_name,
            schema_version: old.schema_version,
            attributes: &old.attributes,
            // Deposed objects carry no mark: always upgraded through the provider.
            written_by: None,
        };
        let destroyed = destroy_stored(
            provider,
            &stored,
            old.private.as_deref().unwrap_or_default(),
            &mut old_diags,
            mutation,
        );
        if destroyed.is_ok() {
            remaining.retain(|d| d.key != old.key);
            let mut record = prior.clone();
            record.deposed = remaining.clone();
            gone(DeposedGone {
                key: old.key.clone(),
                record: Box::new(record),
                took: started.elapsed(),
            });
        }
        for mut d in old_diags.0 {
            if d.is_error() {
                d.summary = format!(
                    "deleting deposed object {} (left by an earlier create-before-destroy replace): {}",
                    old.key, d.summary
                );
            }
            diags.push(d);
        }
    }
    if remaining.is_empty() {
        Ok(())
    } else {
        Err(DeposedLeft {
            keys: remaining.into_iter().map(|d| d.key).collect(),
        })
    }
}

/// Upgrades a stored object and deletes it (apply with a null plan).
pub(super) fn destroy_stored(
    provider: &dyn Provider,
    stored: &StoredObject<'_>,
    private: &[u8],
    diags: &mut Diagnostics,
    mutation: Mutation,
) -> Result<(), DeleteFailed> {
    let type_name = stored.type_name;
    let (current, upgrade_diags) = match upgrade(provider, stored) {
        Ok(upgraded) => upgraded,
        Err(d) => {
            diags.extend(d);
            return Err(DeleteFailed);
        }
    };
    // An upgrade that reports errors still returns an object: the delete is tried, and the
    // errors fail the result.
    let upgrade_failed = upgrade_diags.has_errors();
    diags.extend(upgrade_diags);
    let deleted = destroy_object(provider, type_name, &current, private, diags, mutation);
    if upgrade_failed {
        return Err(DeleteFailed);
    }
    deleted
}

/// Destroys the stored object of `state` with `provider`: upgrade, then apply with a null plan.
/// Deposed objects go first, each reported through `gone` as it goes.
pub(crate) fn destroy(
    provider: &dyn Provider,
    state: &ResourceState,
    gone: &dyn Fn(DeposedGone),
    mutation: Mutation,
) -> Result<Diagnostics, Diagnostics> {
    let mut diags = Diagnostics::new();
    let destroyed = destroy_deposed(provider, state, gone, &mut diags, mutation).is_ok()
        && destroy_stored(
            provider,
            &StoredObject::of(state),
            state.private.as_deref().unwrap_or_default(),
            &mut diags,
            mutation,
        )
        .is_ok();
    if destroyed {
        Ok(diags)
    } else {
        Err(diags)
    }
}
