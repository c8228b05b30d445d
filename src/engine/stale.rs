//! Which resources must wait for the next evaluation because Nix computed part of their
//! configuration from outputs that change earlier in the same phase.
//!
//! Why: once an object is in the ledger, Nix resolves references to it (and values derived
//! from it) into concrete values, keeping only the edge. A plain reference is put back as a
//! marker (`ir::restore`) and resolved here from the planned or new object (TF→TF), but a
//! value Nix computed (`lib.str`, `compute`) can only be computed again by Nix. So when an
//! object's outputs change (apply: its record changed; plan: its planned object differs from
//! the record), the resources holding values computed from it wait for the next evaluation
//! instead of being applied twice (once with the old values, once with the new), and the plan
//! shows them as deferred rather than promising nothing.
//!
//! Only the outputs a computation read count: an edge that names them (`reads`) makes its
//! resource stale only when one of those may differ, so a value computed from a stable output
//! of a data source whose other outputs change on every read never waits.
//!
//! Owns only that decision; the owner thread asks it before dispatching a resource.

use std::collections::{HashMap, HashSet};

use crate::ir::{parse_path, DependencyKind, Edge, Ir, Node, PathStep};
use crate::value::{self, Value};

/// How an object's outputs change in this phase.
pub(super) enum OutputChange {
    /// Any of them may (no plan to compare with).
    Any,
    /// From the recorded object to the new or planned one (unknown where not known yet).
    Between { before: Value, after: Value },
}

impl OutputChange {
    /// Whether the output at `path` may differ.
    fn at(&self, path: &[PathStep]) -> bool {
        let OutputChange::Between { before, after } = self else {
            return true;
        };
        let steps: Vec<value::PathStep> = path
            .iter()
            .map(|s| match s {
                PathStep::Key(k) => value::PathStep::Key(k.clone()),
                PathStep::Index(i) => value::PathStep::Index(*i),
            })
            .collect();
        let plain = |v: Option<&Value>| v.map(value::json::to_plain_json);
        match (
            plain(before.get_path(&steps)),
            plain(after.get_path(&steps)),
        ) {
            (Some(Ok(b)), Some(Ok(a))) => a != b,
            (None, None) => false,
            _ => true,
        }
    }
}

/// What changed so far in one phase.
pub(super) struct Staleness<'ir> {
    ir: &'ir Ir,
    /// Objects whose outputs change in this phase, and how.
    changed: HashMap<String, OutputChange>,
    /// The objects some value edge reads: only their changes can make a resource stale, so
    /// only theirs are kept (a phase of 100k independent resources keeps none, where it kept
    /// a copy of every planned or new object).
    read: HashSet<&'ir str>,
    /// Value edges (not [`Edge::orders_only`]) by target, built when first needed.
    edges_to: Option<HashMap<&'ir str, Vec<&'ir Edge>>>,
}

impl<'ir> Staleness<'ir> {
    /// Nothing changed yet.
    pub(super) fn new(ir: &'ir Ir) -> Self {
        let read = (ir.edges.iter())
            .filter(|e| !e.orders_only())
            .map(|e| e.from.as_str())
            .collect();
        Staleness {
            ir,
            changed: HashMap::new(),
            read,
            edges_to: None,
        }
    }

    /// Whether a change of `id`'s outputs can make anything stale (a value edge reads them):
    /// callers build an [`OutputChange`] only then.
    pub(super) fn watches(&self, id: &str) -> bool {
        self.read.contains(id)
    }

    /// Records that `id`'s outputs change in this phase, as `change` says (kept only when
    /// [`watches`](Self::watches) says it matters).
    pub(super) fn outputs_changed(&mut self, id: &str, change: OutputChange) {
        if self.watches(id) {
            self.changed.insert(id.to_string(), change);
        }
    }

    /// The resource whose new outputs make `node`'s configuration stale, if any.
    pub(super) fn stale_source(&mut self, node: &Node) -> Option<String> {
        if self.changed.is_empty() {
            return None;
        }
        let ir = self.ir;
        let edges_to = self.edges_to.get_or_insert_with(|| {
            let mut map: HashMap<&str, Vec<&Edge>> = HashMap::new();
            for e in ir.edges.iter().filter(|e| !e.orders_only()) {
                map.entry(e.to.as_str()).or_default().push(e);
            }
            map
        });
        let edges = edges_to.get(node.id.as_str())?;
        // Leaves that are still markers are resolved by the executor, whatever the edge says.
        let markers: Vec<(&str, Vec<PathStep>)> = node
            .config
            .dependencies()
            .into_iter()
            .filter(|d| d.kind != DependencyKind::Derived)
            .map(|d| (d.resource, d.at))
            .collect();
        edges
            .iter()
            .find(|e| {
                let Some(change) = self.changed.get(&e.from) else {
                    return false;
                };
                // Without `reads` (older IR) any output counts.
                let read_changed = e
                    .reads
                    .as_ref()
                    .is_none_or(|reads| reads.iter().any(|p| change.at(p)));
                read_changed
                    && e.reference.is_none()
                    && !parse_path(&e.via)
                        .is_some_and(|at| markers.iter().any(|(r, m)| *r == e.from && *m == at))
            })
            .map(|e| e.from.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> PathStep {
        PathStep::Key(k.into())
    }

    #[test]
    fn only_the_outputs_read_count() {
        let object = |random: Value| {
            let outputs = Value::Map([("k".to_string(), Value::string("v"))].into());
            Value::Map(
                [
                    ("outputs".to_string(), outputs),
                    ("random".to_string(), random),
                ]
                .into(),
            )
        };
        let change = OutputChange::Between {
            before: object(Value::string("1")),
            after: object(Value::string("2")),
        };
        assert!(!change.at(&[key("outputs"), key("k")]));
        assert!(change.at(&[key("random")]));
        assert!(!change.at(&[key("absent")]), "absent before and after");
        let unknown = OutputChange::Between {
            before: object(Value::string("1")),
            after: Value::Unknown,
        };
        assert!(
            unknown.at(&[key("outputs"), key("k")]),
            "unknown may differ"
        );
        assert!(OutputChange::Any.at(&[key("outputs")]));
    }
}
