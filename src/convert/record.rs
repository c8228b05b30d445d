//! The Nivis state an estate's Terraform state becomes: one record per managed object, with
//! its attributes, private bytes and schema version exactly as Terraform recorded them.
//!
//! Owns: turning [`TfState`] into a [`StateFile`] (ids by `address`, dependencies mapped to
//! ids, deposed objects under their current one, taint kept). Data sources are left out (Nivis
//! reads them on every plan). Not: where the state is written (the CLI, through the backend),
//! nor the code (`code`).

use std::collections::BTreeMap;

use super::address::{instance_name, managed_id, ProviderIds};
use super::tfstate::{Mode, TfResource, TfState};
use crate::state::{DeposedObject, ResourceKind, ResourceState, ResourceStatus, StateFile};

/// One managed object carried over: its Terraform address and its Nivis id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Carried {
    /// `null_resource.node[1]`.
    pub(crate) terraform: String,
    /// `null.null_resource.node__1`.
    pub(crate) nivis: String,
}

/// The records of every managed object in `tf` for a fresh state (`lineage` new), and the
/// address each came from, in state order.
// Long because every field of a Terraform object is carried over in this one place.
pub(crate) fn build(
    tf: &TfState,
    providers: &ProviderIds,
) -> Result<(StateFile, Vec<Carried>), String> {
    let managed: Vec<&TfResource> = tf
        .resources
        .iter()
        .filter(|r| r.mode == Mode::Managed)
        .collect();
    // Terraform's dependency addresses (module path without keys, type, name) -> the ids of
    // that resource's instances.
    let mut by_config_address: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut state = StateFile::empty();
    let mut carried = Vec::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for r in &managed {
        let provider = providers
            .id(&r.provider)
            .ok_or_else(|| format!("{}: provider {:?} has no id", r.address(), r.provider))?;
        for inst in r.instances.iter().filter(|i| i.deposed.is_none()) {
            let terraform = r.instance_address(inst.key.as_ref());
            let name = instance_name(&r.module, &r.name, inst.key.as_ref())
                .map_err(|e| format!("{terraform}: {e}"))?;
            let id = managed_id(provider, &r.type_name, &name);
            if let Some(other) = seen.insert(id.clone(), terraform.clone()) {
                return Err(format!(
                    "{other} and {terraform} would both be {id} in Nivis: rename one in \
                     Terraform (`terraform state mv`) first"
                ));
            }
            let mut record = ResourceState::new(
                id.clone(),
                ResourceKind::Managed,
                provider,
                &r.provider.source,
                &r.type_name,
                inst.attributes.clone(),
            );
            record.schema_version = inst.schema_version;
            record.private = inst.private.clone();
            record.sensitive_paths = inst.sensitive_paths.clone();
            record.create_before_destroy = inst.create_before_destroy;
            if inst.tainted {
                record.status = ResourceStatus::Tainted;
            }
            record.dependencies = inst.dependencies.clone();
            for old in r.instances.iter().filter(|i| i.key == inst.key) {
                if let Some(key) = &old.deposed {
                    record.deposed.push(DeposedObject::new(
                        key.clone(),
                        old.attributes.clone(),
                        old.private.clone(),
                        old.schema_version,
                    ));
                }
            }
            by_config_address
                .entry(config_address(r))
                .or_default()
                .push(id.clone());
            state.resources.insert(id.clone(), record);
            carried.push(Carried {
                terraform,
                nivis: id,
            });
        }
        for old in r.instances.iter().filter(|i| i.deposed.is_some()) {
            if !r
                .instances
                .iter()
                .any(|i| i.deposed.is_none() && i.key == old.key)
            {
                return Err(format!(
                    "{}: only a deposed object is recorded (a replacement that did not finish): \
                     run `terraform apply` to finish it, then convert again",
                    r.instance_address(old.key.as_ref())
                ));
            }
        }
    }
    // Dependencies in Nivis ids (Terraform records resource addresses; one that is gone from
    // the state orders nothing).
    for record in state.resources.values_mut() {
        let mut ids: Vec<String> = record
            .dependencies
            .iter()
            .flat_map(|d| by_config_address.get(d).cloned().unwrap_or_default())
            .collect();
        ids.sort();
        ids.dedup();
        record.dependencies = ids;
    }
    Ok((state, carried))
}

/// `module.app.null_resource.x`: the address Terraform records dependencies by (module
/// instance keys left out).
fn config_address(r: &TfResource) -> String {
    let mut out = String::new();
    for step in &r.module {
        out.push_str(&format!("module.{}.", step.name));
    }
    out.push_str(&format!("{}.{}", r.type_name, r.name));
    out
}

#[cfg(test)]
mod tests {
    use super::super::tfstate::parse;
    use super::*;

    #[test]
    fn managed_objects_are_carried_exactly_and_data_sources_left_out() {
        let tf = parse(
            br#"{"version": 4, "resources": [
              {"mode": "managed", "type": "null_resource", "name": "a",
               "provider": "provider[\"registry.terraform.io/hashicorp/null\"]",
               "instances": [{"schema_version": 1, "attributes": {"id": "1"}, "private": "eA=="}]},
              {"module": "module.m", "mode": "managed", "type": "null_resource", "name": "b",
               "each": "map", "provider": "provider[\"registry.terraform.io/hashicorp/null\"]",
               "instances": [
                 {"index_key": "web", "attributes": {"id": "2"}, "dependencies": ["null_resource.a"],
                  "status": "tainted"},
                 {"index_key": "web", "deposed": "0001", "attributes": {"id": "old"}}]},
              {"mode": "data", "type": "null_data_source", "name": "d",
               "provider": "provider[\"registry.terraform.io/hashicorp/null\"]",
               "instances": [{"attributes": {"id": "x"}}]}]}"#,
        )
        .unwrap();
        let ids = ProviderIds::new(tf.resources.iter().map(|r| &r.provider));
        let (state, carried) = build(&tf, &ids).unwrap();
        assert_eq!(
            state.ids().collect::<Vec<_>>(),
            ["null.null_resource.a", "null.null_resource.m--b__web"]
        );
        let a = state.get("null.null_resource.a").unwrap();
        assert_eq!(a.schema_version, 1);
        assert_eq!(a.private.as_deref(), Some(&b"x"[..]));
        assert_eq!(a.provider_source, "registry.terraform.io/hashicorp/null");
        let b = state.get("null.null_resource.m--b__web").unwrap();
        assert!(b.is_tainted());
        assert_eq!(b.dependencies, ["null.null_resource.a"]);
        assert_eq!(b.deposed[0].key, "0001");
        assert_eq!(carried[1].terraform, "module.m.null_resource.b[\"web\"]");
    }

    #[test]
    fn names_that_collide_are_refused() {
        let tf = parse(
            br#"{"version": 4, "resources": [
              {"mode": "managed", "type": "t_r", "name": "x__1",
               "provider": "provider[\"registry.terraform.io/h/t\"]", "instances": [{"attributes": {}}]},
              {"mode": "managed", "type": "t_r", "name": "x",
               "provider": "provider[\"registry.terraform.io/h/t\"]",
               "instances": [{"index_key": 1, "attributes": {}}]}]}"#,
        )
        .unwrap();
        let ids = ProviderIds::new(tf.resources.iter().map(|r| &r.provider));
        let e = build(&tf, &ids).unwrap_err();
        assert!(e.contains("t_r.x__1") && e.contains("t_r.x[1]"), "{e}");
    }
}
