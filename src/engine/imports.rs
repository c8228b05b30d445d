//! Imports: adopting an object that exists already (made by hand or another tool) at a
//! resource's address, through the provider's ImportResourceState and then ReadResource, the
//! private data kept. Declared in Nix (`importId` on a resource with nothing recorded yet) or
//! asked for once (`nivis import ADDR ID`).
//!
//! Owns: the two calls, the checks on their answers (exactly one object of the resource's type,
//! still there when read), the record built from them, and the [`Event::Imported`] report.
//! Not: planning the difference between the imported object and the configuration (the
//! ordinary plan does that against the imported record), nor starting providers.
//!
//! The stages: [`declared_imports`] (which resources import now), [`fetch_imports`] (the
//! records, given the running providers) and [`commit_imports`]; the `Engine` methods only
//! gather the providers and the sink.

use std::collections::HashMap;
use std::sync::Arc;

use super::analysis::Analysis;
use super::error::EngineError;
use super::events::{Event, Sink};
use super::node::path_json;
use super::record::Destination;
use super::{Engine, Report};
use crate::ir::{Ir, Node, NodeKind};
use crate::provider::Provider;
use crate::secrets::Redactor;
use crate::state::{Change, StateFile};
use crate::state::{ResourceKind, ResourceState};

impl Engine<'_> {
    /// The records of the declared imports among `analysis.run`: the frame of
    /// [`fetch_imports`], which gets the running providers of the imports. Providers must be
    /// configured.
    pub(super) fn fetch_imports(
        &mut self,
        ir: &Ir,
        analysis: &Analysis<'_>,
        state: &StateFile,
    ) -> Result<Vec<(ResourceState, String)>, EngineError> {
        let requests = declared_imports(analysis, state);
        let providers = self.running(ir, requests.iter().map(|r| r.node.provider.as_str()))?;
        fetch_imports(ir, &requests, &providers, &self.opts.redactor)
    }

    /// Writes the imported records to `to` in one commit and reports each: the frame of
    /// [`commit_imports`] with the run's sink.
    pub(super) fn commit_imports(
        &mut self,
        imports: &[(ResourceState, String)],
        to: Destination<'_>,
        phase: u32,
    ) -> Result<(), EngineError> {
        commit_imports(imports, to, phase, &mut self.sink)
    }
}

/// One import to fetch: the resource to adopt the object at, the provider's id of the object,
/// and the dependencies its record gets.
pub(super) struct ImportRequest<'ir> {
    /// The declared resource (managed, nothing recorded).
    pub(super) node: &'ir Node,
    /// The provider's id of the existing object.
    pub(super) import_id: &'ir str,
    /// What the record depends on.
    pub(super) dependencies: Vec<String>,
}

/// The declared imports among `analysis.run`: managed resources with an `importId` and
/// nothing recorded in `state`, in run order.
pub(super) fn declared_imports<'ir>(
    analysis: &Analysis<'ir>,
    state: &StateFile,
) -> Vec<ImportRequest<'ir>> {
    let mut requests = Vec::new();
    for id in &analysis.run {
        let info = &analysis.nodes[id];
        let node = info.node;
        let Some(import_id) = node.import_id.as_deref() else {
            continue;
        };
        if node.kind != NodeKind::Managed || state.contains(id) {
            continue;
        }
        requests.push(ImportRequest {
            node,
            import_id,
            dependencies: info.deps.iter().cloned().collect(),
        });
    }
    requests
}

/// Fetches the object of each request through its provider in `providers` (running and
/// configured, by IR provider id), as the record to write with the import id. An answer that
/// cannot be adopted is an error naming the resource and the id; nothing is recorded then.
/// `redactor` learns each record's sensitive values.
pub(super) fn fetch_imports(
    ir: &Ir,
    requests: &[ImportRequest<'_>],
    providers: &HashMap<String, Arc<dyn Provider>>,
    redactor: &Redactor,
) -> Result<Vec<(ResourceState, String)>, EngineError> {
    let mut out = Vec::new();
    for r in requests {
        let provider = providers[&r.node.provider].as_ref();
        let record = import_object(ir, r.node, r.import_id, r.dependencies.clone(), provider)?;
        record.teach_secrets(redactor);
        out.push((record, r.import_id.to_string()));
    }
    Ok(out)
}

/// ImportResourceState + ReadResource for `node` with `provider`, as the record to write.
pub(super) fn import_object(
    ir: &Ir,
    node: &Node,
    import_id: &str,
    dependencies: Vec<String>,
    provider: &dyn Provider,
) -> Result<ResourceState, EngineError> {
    let fail = |why: String| {
        EngineError::Refused(format!(
            "cannot import {import_id:?} into {}: {why}; nothing was recorded",
            node.id
        ))
    };
    let decl = &ir.providers[&node.provider];
    let Some(schema) = provider.schema().resources.get(&node.type_name).cloned() else {
        return Err(fail(format!(
            "provider {} has no resource type {}",
            node.provider, node.type_name
        )));
    };
    let (objects, diags) = provider
        .import_resource_state(&node.type_name, import_id)
        .map_err(|e| fail(format!("ImportResourceState failed: {e}")))?;
    if diags.has_errors() {
        return Err(fail(format!("the provider refused: {diags}")));
    }
    let object = match objects.as_slice() {
        [] => {
            return Err(fail(format!(
                "the provider found no {} with that id; check the id",
                node.type_name
            )))
        }
        [one] if one.type_name == node.type_name => one,
        [one] => {
            return Err(fail(format!(
                "the provider returned a {}, not a {}",
                one.type_name, node.type_name
            )))
        }
        many => {
            let types: Vec<&str> = many.iter().map(|o| o.type_name.as_str()).collect();
            return Err(fail(format!(
                "the provider returned {} objects ({}); Nivis imports exactly one object per address",
                many.len(),
                types.join(", ")
            )));
        }
    };
    let read = provider
        .read_resource(&node.type_name, &object.state, &object.private)
        .map_err(|e| fail(format!("ReadResource failed: {e}")))?;
    if read.diagnostics.has_errors() {
        return Err(fail(format!(
            "reading the object failed: {}",
            read.diagnostics
        )));
    }
    if read.new_state.is_null() {
        return Err(fail(format!(
            "the provider found no {} with that id (ReadResource returned nothing); check the id",
            node.type_name
        )));
    }
    imported_record(node, &decl.source, &schema, &read, dependencies)
        .map_err(|e| fail(format!("cannot record the provider's answer: {e}")))
}

/// Writes the imported records to `to` in one commit and reports each to `sink`, as recorded
/// or as planned (`to` says which: the run's state under the token, or a preview's copy).
pub(super) fn commit_imports(
    imports: &[(ResourceState, String)],
    mut to: Destination<'_>,
    phase: u32,
    sink: &mut dyn Sink,
) -> Result<(), EngineError> {
    if imports.is_empty() {
        return Ok(());
    }
    let changes: Vec<Change> = imports
        .iter()
        .map(|(r, _)| Change::Put(r.clone()))
        .collect();
    to.commit(&changes)?;
    let recorded = to.recorded();
    for (r, import_id) in imports {
        sink.event(Event::Imported {
            phase,
            id: r.id.clone(),
            type_name: r.type_name.clone(),
            import_id: import_id.clone(),
            recorded,
        });
    }
    Ok(())
}

impl Engine<'_> {
    /// `nivis import ADDR ID`: adopts the object with the provider's id `import_id` at the
    /// resource `addr`, which the plan declares and the state does not hold yet. The state is
    /// locked; on any error nothing is recorded.
    pub(crate) fn import(&mut self, addr: &str, import_id: &str) -> Result<Report, EngineError> {
        self.mutating(None, |engine, store, _confirm, mutation| {
            let ir = engine.evaluate(store.state(), 0)?;
            if store.state().contains(addr) {
                return Err(EngineError::Refused(format!(
                    "cannot import {import_id:?} into {addr}: {addr} is already in state; nothing was imported. \
                     To adopt another object there, forget the recorded one first (`nivis state rm {addr}`)"
                )));
            }
            let Some(node) = ir.resources.iter().find(|n| n.id == addr) else {
                return Err(EngineError::Refused(format!(
                    "cannot import {import_id:?} into {addr}: the plan declares no such resource; \
                     declare it (mkResource) first, then import"
                )));
            };
            engine.prepare_providers(&ir, store.state(), &[addr.to_string()], true)?;
            let request = ImportRequest {
                node,
                import_id,
                dependencies: node.depends_on.clone(),
            };
            let providers = engine.running(&ir, [node.provider.as_str()])?;
            let imported = fetch_imports(&ir, &[request], &providers, &engine.opts.redactor)?;
            engine.commit_imports(&imported, Destination::Recorded(store, mutation), 1)?;
            Ok(Report {
                evaluations: 1,
                ..Report::default()
            })
        })
    }
}

/// The state record of an imported object, built as an apply would build it: state JSON by the
/// schema's implied type, schema version, private bytes, sensitive paths.
fn imported_record(
    node: &Node,
    source: &str,
    schema: &crate::schema::Schema,
    read: &crate::provider::ReadResponse,
    dependencies: Vec<String>,
) -> Result<ResourceState, crate::value::ValueError> {
    let ty = schema.block.implied_type();
    let attributes = crate::value::json::to_state_json(&read.new_state, &ty)?;
    let mut record = ResourceState::new(
        &node.id,
        ResourceKind::Managed,
        &node.provider,
        source,
        &node.type_name,
        attributes,
    );
    record.schema_version = schema.version;
    record.private = (!read.private.is_empty()).then(|| read.private.clone());
    record.dependencies = dependencies;
    record.sensitive_paths = schema
        .block
        .sensitive_paths(&read.new_state)
        .iter()
        .map(|p| path_json(p))
        .collect();
    record.create_before_destroy = node.lifecycle.create_before_destroy;
    Ok(record)
}
