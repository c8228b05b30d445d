//! Where a resource or attribute value comes from: the node and attribute an address names,
//! the outputs it was computed from (and theirs, back to nodes that read nothing), what was
//! recorded for them, where each node and attribute was written, and what reads the node.
//!
//! Owns: that provenance, from one IR (its edges say which node and output each value was
//! read from), the ledger's outputs and the positions the Nix library gives. Not: evaluating,
//! printing. A sensitive output is never kept: it is [`Shown::Sensitive`].

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value as Json};

use crate::ir::{parse_path, render_path, Edge, Ir, PathStep, Tree};
use crate::ledger::Outputs;
use crate::review::diff::Shown;

/// What an address names: a node, and an attribute path inside its config (maybe empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// The node's id.
    pub(crate) node: String,
    /// The attribute path inside its configuration; empty for the whole node.
    pub(crate) attr: Vec<PathStep>,
}

/// How a value depends on another node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// A plain reference to one output: the executor reads it (same phase).
    Reference,
    /// A value Nix computes from outputs (`lib.str`, `lib.compute`): a later evaluation.
    Nix,
    /// `dependsOn`: order only, no value.
    DependsOn,
}

impl Via {
    /// The kind's name in text and JSON.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Via::Reference => "reference",
            Via::Nix => "computed by Nix",
            Via::DependsOn => "dependsOn",
        }
    }

    fn of(edge: &Edge) -> Via {
        match (&edge.reference, edge.via.as_str()) {
            (Some(_), _) => Via::Reference,
            (None, "dependsOn") => Via::DependsOn,
            (None, _) => Via::Nix,
        }
    }
}

/// A node a value was computed from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Origin {
    /// The node's address.
    pub(crate) address: String,
    /// How the value depends on it.
    pub(crate) via: Via,
    /// Where in the reading node (`label`, `dependsOn`).
    pub(crate) at: String,
    /// The outputs read and what the state records for each (empty: any output).
    pub(crate) outputs: Vec<(String, Shown)>,
    /// Where the node was written (file, line, column), when Nix knows.
    pub(crate) defined_at: Option<Json>,
    /// What this node's own configuration was computed from.
    pub(crate) origins: Vec<Origin>,
}

/// A node that reads the target's node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reader {
    /// The reading node's address.
    pub(crate) address: String,
    /// How it reads the target's node.
    pub(crate) via: Via,
    /// Where in the reading node (`label`, `dependsOn`).
    pub(crate) at: String,
    /// The target node's outputs it reads (empty: any output).
    pub(crate) reads: Vec<String>,
    /// Where the reading node was written (file, line, column), when Nix knows.
    pub(crate) defined_at: Option<Json>,
}

/// The provenance of one address.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Why {
    /// The node and attribute asked about.
    pub(crate) target: Target,
    /// The attribute's value in the IR (markers for outputs not recorded yet).
    pub(crate) value: Shown,
    /// Where the attribute was written (the closest enclosing attribute Nix knows).
    pub(crate) defined_at: Option<Json>,
    /// Where the node was written.
    pub(crate) node_defined_at: Option<Json>,
    /// The nodes the value was computed from, each with its own origins.
    pub(crate) origins: Vec<Origin>,
    /// The nodes that read the target's node.
    pub(crate) readers: Vec<Reader>,
}

/// Why an address does not name an attribute of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TargetError {
    /// No resource or data source id is a prefix of the address.
    NoSuchNode {
        /// The address as given.
        address: String,
    },
    /// What follows the node's id is not an attribute path.
    NotAPath {
        /// The address as given.
        address: String,
        /// The part after the node's id.
        rest: String,
    },
    /// The node's configuration has no attribute at that path.
    NoAttribute {
        /// The address as given.
        address: String,
        /// The node's id.
        node: String,
        /// The attribute path, rendered.
        path: String,
    },
}

impl std::fmt::Display for TargetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetError::NoSuchNode { address } => write!(
                f,
                "{address}: the plan declares no such resource or data source (`nivis graph` \
                 lists them)"
            ),
            TargetError::NotAPath { address, rest } => write!(
                f,
                "{address}: {rest:?} is not an attribute path like label or tags.env"
            ),
            TargetError::NoAttribute {
                address,
                node,
                path,
            } => write!(
                f,
                "{address}: {node} has no attribute {path} in its configuration"
            ),
        }
    }
}

impl std::error::Error for TargetError {}

/// Finds the node `address` names (the longest declared id it starts with) and the attribute
/// path after it (`config.` in front is optional).
pub(crate) fn target(ir: &Ir, address: &str) -> Result<Target, TargetError> {
    let node = ir
        .nodes()
        .filter(|n| {
            address == n.id
                || address
                    .strip_prefix(n.id.as_str())
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        })
        .max_by_key(|n| n.id.len())
        .ok_or_else(|| TargetError::NoSuchNode {
            address: address.into(),
        })?;
    let rest = address[node.id.len()..].trim_start_matches('.');
    if rest.is_empty() {
        return Ok(Target {
            node: node.id.clone(),
            attr: Vec::new(),
        });
    }
    let mut attr = parse_path(rest).ok_or_else(|| TargetError::NotAPath {
        address: address.into(),
        rest: rest.into(),
    })?;
    let has_config_key = matches!(&node.config, Tree::Object(m) if m.contains_key("config"));
    if attr.first() == Some(&PathStep::Key("config".into())) && !has_config_key && attr.len() > 1 {
        attr.remove(0);
    }
    if value_at(&node.config, &attr).is_none() {
        return Err(TargetError::NoAttribute {
            address: address.into(),
            node: node.id.clone(),
            path: render_path(&attr),
        });
    }
    Ok(Target {
        node: node.id.clone(),
        attr,
    })
}

fn value_at<'a>(tree: &'a Tree, path: &[PathStep]) -> Option<&'a Tree> {
    match (tree, path.split_first()) {
        (t, None) => Some(t),
        (Tree::Sensitive(inner) | Tree::Ephemeral(inner), _) => value_at(inner, path),
        (Tree::Object(m), Some((PathStep::Key(k), rest))) => value_at(m.get(k)?, rest),
        (Tree::List(items), Some((PathStep::Index(i), rest))) => {
            value_at(items.get(usize::try_from(*i).ok()?)?, rest)
        }
        _ => None,
    }
}

/// Whether a value (or the one it sits in) at `a` and one at `b` overlap.
fn overlaps(a: &[PathStep], b: &[PathStep]) -> bool {
    a.iter().zip(b).all(|(x, y)| x == y)
}

/// The provenance of `target` in `ir`, with the recorded `outputs` (sensitive ones as the
/// ledger's placeholders) and the Nix library's `positions` (`Json::Null` when unknown).
pub(crate) fn explain(
    ir: &Ir,
    target: Target,
    outputs: &BTreeMap<String, Outputs>,
    positions: &Json,
) -> Why {
    let node = ir.node(&target.node).expect("target() found it");
    let value = match value_at(&node.config, &target.attr) {
        Some(t) if t.holds_secret() => Shown::Sensitive,
        Some(t) => Shown::Value(t.to_json()),
        None => Shown::Absent,
    };
    let ctx = Context {
        ir,
        outputs,
        positions,
    };
    let mut seen = BTreeSet::from([target.node.clone()]);
    let origins = ctx.origins(&target.node, Some(&target.attr), &mut seen);
    let readers = (ir.edges.iter().filter(|e| e.from == target.node))
        .map(|e| Reader {
            address: e.to.clone(),
            via: Via::of(e),
            at: e.via.clone(),
            reads: read_paths(e),
            defined_at: ctx.definition(&e.to),
        })
        .collect();
    Why {
        defined_at: ctx.attribute_position(&target),
        node_defined_at: ctx.definition(&target.node),
        value,
        origins,
        readers,
        target,
    }
}

/// The output paths an edge reads, rendered (`value`, `net[0].ip`).
fn read_paths(e: &Edge) -> Vec<String> {
    match (&e.reference, &e.reads) {
        (Some(path), _) => vec![render_path(path)],
        (None, Some(reads)) => reads.iter().map(|p| render_path(p)).collect(),
        (None, None) => Vec::new(),
    }
}

struct Context<'a> {
    ir: &'a Ir,
    outputs: &'a BTreeMap<String, Outputs>,
    positions: &'a Json,
}

impl Context<'_> {
    /// The origins of `node`'s value at `attr` (all of its config when `None` or empty),
    /// each with its own origins; a node already on the path is not followed again.
    fn origins(
        &self,
        node: &str,
        attr: Option<&[PathStep]>,
        seen: &mut BTreeSet<String>,
    ) -> Vec<Origin> {
        let edges: Vec<&Edge> = (self.ir.edges.iter())
            .filter(|e| e.to == node)
            .filter(|e| match (attr, parse_path(&e.via)) {
                (None, _) | (Some([]), _) => true,
                (Some(attr), Some(via)) => e.via != "dependsOn" && overlaps(attr, &via),
                (Some(_), None) => false,
            })
            .collect();
        let mut out = Vec::new();
        for e in edges {
            let first = seen.insert(e.from.clone());
            let origins = if first {
                self.origins(&e.from, None, seen)
            } else {
                Vec::new()
            };
            out.push(Origin {
                address: e.from.clone(),
                via: Via::of(e),
                at: e.via.clone(),
                outputs: self.recorded(e),
                defined_at: self.definition(&e.from),
                origins,
            });
            if first {
                seen.remove(&e.from);
            }
        }
        out
    }

    /// What the state records for each output `e` reads.
    fn recorded(&self, e: &Edge) -> Vec<(String, Shown)> {
        let paths: Vec<Vec<PathStep>> = match (&e.reference, &e.reads) {
            (Some(path), _) => vec![path.clone()],
            (None, Some(reads)) => reads.clone(),
            (None, None) => Vec::new(),
        };
        let outputs = self.outputs.get(&e.from);
        paths
            .iter()
            .map(|p| {
                let shown = match outputs.and_then(|o| json_at(o, p)) {
                    None => Shown::Absent,
                    Some(v) if holds_placeholder(v) => Shown::Sensitive,
                    Some(v) => Shown::Value(v.clone()),
                };
                (render_path(p), shown)
            })
            .collect()
    }

    fn definition(&self, node: &str) -> Option<Json> {
        Some(self.positions.get(node)?.get("definition")?.clone()).filter(|p| !p.is_null())
    }

    /// The position of the attribute, or of the closest enclosing one Nix recorded.
    fn attribute_position(&self, target: &Target) -> Option<Json> {
        let known = self.positions.get(&target.node)?.get("attributes")?;
        (1..=target.attr.len())
            .rev()
            .find_map(|n| known.get(render_path(&target.attr[..n])).cloned())
    }
}

fn json_at<'a>(outputs: &'a Outputs, path: &[PathStep]) -> Option<&'a Json> {
    let (first, rest) = path.split_first()?;
    let PathStep::Key(k) = first else {
        return None;
    };
    let mut at = outputs.get(k)?;
    for step in rest {
        if holds_placeholder(at) {
            return Some(at);
        }
        at = match step {
            PathStep::Key(k) => at.get(k)?,
            PathStep::Index(i) => at.get(usize::try_from(*i).ok()?)?,
        };
    }
    Some(at)
}

fn holds_placeholder(v: &Json) -> bool {
    match v {
        Json::Object(m) => m.contains_key("__sensitiveRef") || m.values().any(holds_placeholder),
        Json::Array(items) => items.iter().any(holds_placeholder),
        _ => false,
    }
}

fn shown_json(s: &Shown) -> Json {
    match s {
        Shown::Absent => Json::Null,
        Shown::Sensitive => json!("(sensitive)"),
        Shown::Value(v) => v.clone(),
    }
}

impl Origin {
    fn to_json(&self) -> Json {
        let outputs: Vec<Json> = (self.outputs.iter())
            .map(|(path, v)| {
                json!({"output": path, "recorded": shown_json(v), "sensitive": *v == Shown::Sensitive, "known": *v != Shown::Absent})
            })
            .collect();
        json!({
            "address": self.address,
            "kind": self.via.name(),
            "at": self.at,
            "outputs": outputs,
            "definedAt": self.defined_at,
            "origins": self.origins.iter().map(Origin::to_json).collect::<Vec<_>>(),
        })
    }
}

impl Why {
    /// `nivis why --json`.
    pub(crate) fn to_json(&self) -> Json {
        let readers: Vec<Json> = (self.readers.iter())
            .map(|r| json!({"address": r.address, "kind": r.via.name(), "at": r.at, "reads": r.reads, "definedAt": r.defined_at}))
            .collect();
        json!({
            "format": "nivis-why/1",
            "node": self.target.node,
            "attribute": (!self.target.attr.is_empty()).then(|| render_path(&self.target.attr)),
            "value": shown_json(&self.value),
            "sensitive": self.value == Shown::Sensitive,
            "definedAt": self.defined_at,
            "nodeDefinedAt": self.node_defined_at,
            "origins": self.origins.iter().map(Origin::to_json).collect::<Vec<_>>(),
            "readers": readers,
        })
    }
}

#[cfg(test)]
#[path = "why_tests.rs"]
mod tests;
