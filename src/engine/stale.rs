//! Which resources must wait for the next evaluation because Nix computed part of their
//! configuration from outputs that changed earlier in the same phase, outputs whose provider
//! could not announce the change (no plan: a provider without schemas, NixOps4).
//!
//! Why: once an object is in the ledger, Nix resolves references to it (and values derived
//! from it) into concrete values, keeping only the edge. When such an object is then updated
//! and returns new outputs, the concrete values its dependents were evaluated with are stale.
//! A provider with a plan tells beforehand which outputs stay; a provider without one cannot,
//! so its dependents wait for Nix to see the new outputs instead of being applied twice (once
//! with the old values, once with the new). A dependent that still holds a reference marker to
//! the object resolves it from the new state in the executor (TF→TF) and is not stale.
//!
//! Owns only that decision; the owner thread asks it before dispatching a resource.

use std::collections::{BTreeSet, HashMap};

use crate::ir::{Edge, Ir, Node};

/// What changed so far in one phase.
pub struct Staleness<'ir> {
    ir: &'ir Ir,
    /// Resources of providers without a plan whose recorded outputs changed in this phase.
    changed: BTreeSet<String>,
    /// Value edges (not `dependsOn`) by target, built when first needed.
    edges_to: Option<HashMap<&'ir str, Vec<&'ir Edge>>>,
}

impl<'ir> Staleness<'ir> {
    /// Nothing changed yet.
    pub fn new(ir: &'ir Ir) -> Self {
        Staleness {
            ir,
            changed: BTreeSet::new(),
            edges_to: None,
        }
    }

    /// Records that `id`'s outputs changed without its provider having announced it.
    pub fn outputs_changed(&mut self, id: &str) {
        self.changed.insert(id.to_string());
    }

    /// The resource whose new outputs make `node`'s configuration stale, if any.
    pub fn stale_source(&mut self, node: &Node) -> Option<String> {
        if self.changed.is_empty() {
            return None;
        }
        let ir = self.ir;
        let edges_to = self.edges_to.get_or_insert_with(|| {
            let mut map: HashMap<&str, Vec<&Edge>> = HashMap::new();
            for e in ir.edges.iter().filter(|e| e.via != "dependsOn") {
                map.entry(e.to.as_str()).or_default().push(e);
            }
            map
        });
        let edges = edges_to.get(node.id.as_str())?;
        let markers: BTreeSet<&str> = node
            .config
            .dependencies()
            .into_iter()
            .map(|d| d.resource)
            .collect();
        edges
            .iter()
            .find(|e| self.changed.contains(&e.from) && !markers.contains(e.from.as_str()))
            .map(|e| e.from.clone())
    }
}
