//! Putting back the references Nix resolved: a plain reference whose target is in the
//! ledger reaches the executor as the recorded value, and only its edge (with `ref`, the
//! output path it reads) says where the value came from.
//!
//! Why: within a phase the target may change (a replace gives a new `id`) before the
//! resource that reads it is planned or applied. Resolving the reference in the executor,
//! from the planned or freshly recorded object, keeps the plan truthful (the dependent is
//! planned with "known after apply") and applies the dependent once, in the same phase,
//! instead of once with the stale value and again after the next evaluation.
//!
//! Owns only the rewrite of node configurations; what a marker resolves to is `engine`'s.

use std::collections::HashMap;

use super::model::{Ir, Node, Ref, Tree};
use super::path::parse_path;
use super::path::PathStep;

impl Ir {
    /// Turns every leaf that an edge with `ref` says was read from another node back into a
    /// `__ref` marker to that output (a value computed from a secret stays inside its
    /// `__sensitive` wrapper). An edge whose leaf cannot be found (an IR made by another
    /// tool, say) loses its `ref`, so the executor treats the value as computed by Nix.
    pub(crate) fn restore_references(&mut self) {
        let Ir {
            resources,
            data,
            edges,
            ..
        } = self;
        let mut nodes: HashMap<String, &mut Node> = resources
            .iter_mut()
            .chain(data.iter_mut())
            .map(|n| (n.id.clone(), n))
            .collect();
        for edge in edges.iter_mut() {
            let Some(output) = &edge.reference else {
                continue;
            };
            let restored = match (parse_path(&edge.via), nodes.get_mut(&edge.to)) {
                (Some(at), Some(node)) => {
                    let marker = Tree::Ref(Ref {
                        resource: edge.from.clone(),
                        path: output.clone(),
                    });
                    put_marker(&mut node.config, &at, marker)
                }
                _ => false,
            };
            if !restored {
                edge.reference = None;
            }
        }
    }
}

/// Replaces the plain value at `at` with `marker`; a marker already there (the target was
/// not in the ledger, or the output is sensitive) is left as it is. Returns whether the leaf
/// exists.
fn put_marker(tree: &mut Tree, at: &[PathStep], marker: Tree) -> bool {
    match (tree, at.split_first()) {
        (Tree::Sensitive(inner) | Tree::Ephemeral(inner), _) => put_marker(inner, at, marker),
        (Tree::Ref(_) | Tree::SensitiveRef(_), None) => true,
        (Tree::Derived(_) | Tree::Build(_), None) => false,
        (leaf, None) => {
            *leaf = marker;
            true
        }
        (Tree::Object(map), Some((PathStep::Key(k), rest))) => match map.get_mut(k) {
            Some(child) => put_marker(child, rest, marker),
            None => false,
        },
        (Tree::List(items), Some((PathStep::Index(i), rest))) => {
            match usize::try_from(*i).ok().and_then(|i| items.get_mut(i)) {
                Some(child) => put_marker(child, rest, marker),
                None => false,
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ir::parse;

    fn ir_with(config: serde_json::Value, edges: serde_json::Value) -> Ir {
        let doc = json!({
            "schemaVersion": 1,
            "providers": {"alpha": {"source": "provider-alpha", "config": {}}},
            "resources": [
                {"id": "alpha.alpha_token.A", "name": "A", "provider": "alpha", "type": "alpha_token", "config": {}},
                {"id": "alpha.alpha_token.B", "name": "B", "provider": "alpha", "type": "alpha_token", "config": config},
            ],
            "edges": edges,
            "nixConsumers": [],
        });
        parse(&serde_json::to_vec(&doc).unwrap()).expect("valid IR")
    }

    fn edge(via: &str, reference: Option<serde_json::Value>) -> serde_json::Value {
        let mut e = json!({"from": "alpha.alpha_token.A", "to": "alpha.alpha_token.B", "via": via});
        if let Some(r) = reference {
            e["ref"] = r;
        }
        e
    }

    fn marker(path: serde_json::Value) -> serde_json::Value {
        json!({"__ref": {"resource": "alpha.alpha_token.A", "path": path}})
    }

    #[test]
    fn a_resolved_reference_becomes_a_marker_again() {
        let mut ir = ir_with(
            json!({"label": "alpha-1", "tags": {"k": ["x", "alpha:one:1"]}}),
            json!([
                edge("label", Some(json!(["id"]))),
                edge("tags.k[1]", Some(json!(["value"])))
            ]),
        );
        ir.restore_references();
        assert_eq!(
            ir.resources[1].config.to_json(),
            json!({"label": marker(json!(["id"])), "tags": {"k": ["x", marker(json!(["value"]))]}})
        );
        assert!(ir.edges.iter().all(|e| e.reference.is_some()));
    }

    #[test]
    fn computed_values_and_missing_leaves_stay_as_nix_made_them() {
        let mut ir = ir_with(
            json!({"label": "rec-alpha-1", "keeper": {"__derived": {"inputs": ["alpha.alpha_token.A.id"]}}}),
            json!([
                edge("label", None),
                edge("keeper", Some(json!(["id"]))),
                edge("nope[3]", Some(json!(["id"])))
            ]),
        );
        let before = ir.resources[1].config.clone();
        ir.restore_references();
        assert_eq!(ir.resources[1].config, before);
        assert!(
            ir.edges.iter().all(|e| e.reference.is_none()),
            "an edge whose leaf is not a plain value is treated as computed"
        );
    }

    #[test]
    fn a_value_inside_a_secret_stays_wrapped() {
        let mut ir = ir_with(
            json!({"conn": {"__sensitive": {"value": {"host": "alpha-1"}}}}),
            json!([edge("conn.host", Some(json!(["id"])))]),
        );
        ir.restore_references();
        assert_eq!(
            ir.resources[1].config.to_json(),
            json!({"conn": {"__sensitive": {"value": {"host": marker(json!(["id"]))}}}})
        );
    }
}
