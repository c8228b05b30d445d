//! `validate`: the IR, then every provider's own validation of every configuration, without
//! configuring providers or touching state.

use super::error::EngineError;
use super::resolve::{resolve, Lookup};
use super::{node, Engine};
use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::{Ir, NodeKind};
use crate::provider::Capabilities;
use crate::state::{MemoryStore, StateStore};

impl Engine<'_> {
    /// `nivis validate`: the IR, then every provider's own validation of every configuration,
    /// without configuring providers or touching state.
    pub(crate) fn validate(&mut self) -> Result<Diagnostics, EngineError> {
        let holder = MemoryStore::new();
        self.open_ephemerals = false;
        let ir = self.evaluate(holder.state(), 0)?;
        let mut all = Diagnostics::new();
        let ids: Vec<String> = ir
            .resources
            .iter()
            .chain(ir.data.iter())
            .map(|n| n.id.clone())
            .collect();
        self.prepare_providers(&ir, holder.state(), &ids, false)?;
        all.extend(self.reference_problems(&ir));
        all.extend(self.validate_provider_configs(&ir)?);
        all.extend(self.validate_node_configs(&ir)?);
        Ok(all)
    }

    /// Every provider's own check of its configuration (not configured).
    fn validate_provider_configs(&mut self, ir: &Ir) -> Result<Diagnostics, EngineError> {
        let mut all = Diagnostics::new();
        for (pid, decl) in &ir.providers {
            let provider = self
                .providers
                .get(pid, decl)
                .map_err(EngineError::Diagnostics)?;
            let resolved = resolve(&decl.config, &|_| Lookup::Pending, &self.opts.redactor);
            let block = &provider.schema().provider.block;
            match node::conform_config(block, &resolved.value, &format!("provider {pid}: ")) {
                Ok(config) => match provider.validate_provider_config(&config) {
                    Ok(d) => all.extend(Diagnostics(
                        d.0.into_iter()
                            .map(|mut d| {
                                d.summary = format!("provider {pid}: {}", d.summary);
                                d
                            })
                            .collect(),
                    )),
                    Err(d) => all.extend(d),
                },
                Err(d) => all.extend(d),
            }
        }
        Ok(all)
    }

    /// Every resource's and data source's configuration, conformed to its schema and checked
    /// by its provider; resources of providers without schemas are checked on create instead.
    fn validate_node_configs(&mut self, ir: &Ir) -> Result<Diagnostics, EngineError> {
        let mut all = Diagnostics::new();
        for node in ir.resources.iter().chain(ir.data.iter()) {
            let decl = &ir.providers[&node.provider];
            if !Capabilities::of(&decl.kind).schemas {
                // No schema and no validation request: the provider checks inputs on create.
                continue;
            }
            let provider = self
                .providers
                .get(&node.provider, decl)
                .map_err(EngineError::Diagnostics)?;
            let resolved = resolve(&node.config, &|_| Lookup::Pending, &self.opts.redactor);
            let schema = provider.schema();
            let block = match node.kind {
                NodeKind::Managed => schema.resources.get(&node.type_name).map(|s| &s.block),
                NodeKind::Data => schema.data_sources.get(&node.type_name).map(|s| &s.block),
            };
            let Some(block) = block else {
                let kind = if node.kind == NodeKind::Data {
                    "data source"
                } else {
                    "resource type"
                };
                let known: Vec<&String> = match node.kind {
                    NodeKind::Managed => schema.resources.keys().collect(),
                    NodeKind::Data => schema.data_sources.keys().collect(),
                };
                all.push(
                    Diagnostic::error(format!(
                        "provider {} has no {kind} {:?}",
                        node.provider, node.type_name
                    ))
                    .with_detail(format!(
                        "It offers: {}",
                        known
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                    .for_resource(&node.id),
                );
                continue;
            };
            match node::conform_config(block, &resolved.value, "") {
                Ok(config) => {
                    let d = match node.kind {
                        NodeKind::Managed => {
                            provider.validate_resource_config(&node.type_name, &config)
                        }
                        NodeKind::Data => provider.validate_data_config(&node.type_name, &config),
                    };
                    match d {
                        Ok(d) | Err(d) => all.extend(d.for_resource(&node.id)),
                    }
                }
                Err(d) => all.extend(d.for_resource(&node.id)),
            }
        }
        Ok(all)
    }
}
