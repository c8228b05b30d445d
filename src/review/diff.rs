//! What differs between two IRs of the same project evaluated against the same ledger: per
//! resource or data source, added, removed, moved (`lib.moved`), attributes changed and
//! dependency edges changed; and the nodes that may change in a later phase because they
//! depend on a changed one.
//!
//! Owns: the comparison and its JSON shape (docs/diff-schema.json). Not: evaluating either
//! side, printing text (`cli::review`). A sensitive value is never kept: an attribute whose
//! value (on either side) is or holds a `__sensitive` value is reported as changed without
//! its values.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::{json, Value as Json};

use crate::ir::{render_path, Ir, Lifecycle, Node, PathStep, Tree};

/// The format tag of `nivis diff --json`.
pub(crate) const FORMAT: &str = "nivis-diff/1";

/// All differences between `before` and `after`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Diff {
    /// One entry per node that differs, by address (the new address of a moved node).
    pub(crate) nodes: Vec<NodeChange>,
    /// Nodes unchanged themselves that read, directly or through others, an output of a
    /// changed or added node.
    pub(crate) may_change_later: Vec<Dependent>,
}

/// How a node differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    /// Only the second side declares it.
    Added,
    /// Only the first side declares it.
    Removed,
    /// Renamed by `lib.moved` from this address (its attributes may differ too).
    Moved {
        /// The address it had on the first side.
        from: String,
    },
    /// Same address, different attributes or edges.
    Changed,
}

impl ChangeKind {
    /// The name `--json` uses.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Removed => "removed",
            ChangeKind::Moved { .. } => "moved",
            ChangeKind::Changed => "changed",
        }
    }
}

/// One node's differences.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NodeChange {
    /// The node's address on the second side (the first side's, for a removed node).
    pub(crate) address: String,
    /// How it differs.
    pub(crate) kind: ChangeKind,
    /// Attribute differences (`config.…` and `meta.…`); for an added or removed node, its
    /// attributes on the side it exists.
    pub(crate) attributes: Vec<AttrChange>,
    /// Edges (what this node reads or waits for) only `after` has.
    pub(crate) edges_added: Vec<EdgeEnd>,
    /// Edges only `before` has (addresses as `after` names them).
    pub(crate) edges_removed: Vec<EdgeEnd>,
}

/// One attribute's value on each side.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AttrChange {
    /// `config.label`, `config.tags.env`, `meta.lifecycle`.
    pub path: String,
    /// The value on the first side.
    pub before: Shown,
    /// The value on the second side.
    pub after: Shown,
}

/// A value as a review may show it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Shown {
    /// The attribute does not exist on this side.
    Absent,
    /// A secret (or a value holding one): never shown.
    Sensitive,
    /// The value as the IR writes it (markers included: `{"__ref": …}`).
    Value(Json),
}

/// The other end of an edge: the node read (or waited for) and where it is used.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct EdgeEnd {
    /// The node read or waited for.
    pub(crate) from: String,
    /// Where it is used: the configuration path, or `dependsOn`.
    pub(crate) via: String,
}

/// A node that may change once a changed node it depends on is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dependent {
    /// The dependent node's address.
    pub(crate) address: String,
    /// The changed or added nodes it depends on (directly or through others).
    pub(crate) because_of: Vec<String>,
}

impl Diff {
    /// Whether anything differs.
    pub(crate) fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The diff as `nivis diff --json` prints it (with `from`/`to` added by the caller).
    pub(crate) fn to_json(&self) -> Json {
        let nodes: Vec<Json> = self.nodes.iter().map(NodeChange::to_json).collect();
        let later: Vec<Json> = self
            .may_change_later
            .iter()
            .map(|d| json!({"address": d.address, "becauseOf": d.because_of}))
            .collect();
        json!({"format": FORMAT, "changes": !self.is_empty(), "resources": nodes, "mayChangeLater": later})
    }
}

impl NodeChange {
    fn to_json(&self) -> Json {
        let attrs: Vec<Json> = self.attributes.iter().map(AttrChange::to_json).collect();
        let ends = |e: &[EdgeEnd]| -> Vec<Json> {
            e.iter()
                .map(|e| json!({"from": e.from, "via": e.via}))
                .collect()
        };
        let mut out = json!({
            "address": self.address,
            "change": self.kind.name(),
            "attributes": attrs,
            "edgesAdded": ends(&self.edges_added),
            "edgesRemoved": ends(&self.edges_removed),
        });
        if let ChangeKind::Moved { from } = &self.kind {
            out["movedFrom"] = json!(from);
        }
        out
    }
}

impl AttrChange {
    fn to_json(&self) -> Json {
        let mut out = json!({"path": self.path});
        let sensitive = self.before == Shown::Sensitive || self.after == Shown::Sensitive;
        out["sensitive"] = json!(sensitive);
        for (key, side) in [("before", &self.before), ("after", &self.after)] {
            match side {
                Shown::Absent => {}
                Shown::Sensitive => out[key] = json!("(sensitive)"),
                Shown::Value(v) => out[key] = v.clone(),
            }
        }
        out
    }
}

/// Compares `before` with `after`. Addresses `after` moved (its `moved[]` entries whose `from`
/// only `before` has and whose `to` only `after` has) are compared under their new address,
/// and every reference to them in `before` is read as a reference to the new one.
pub(crate) fn compare(before: &Ir, after: &Ir) -> Diff {
    let old: BTreeMap<&str, &Node> = before.nodes().map(|n| (n.id.as_str(), n)).collect();
    let new: BTreeMap<&str, &Node> = after.nodes().map(|n| (n.id.as_str(), n)).collect();
    let renames: BTreeMap<String, String> = after
        .moved
        .iter()
        .filter(|m| {
            old.contains_key(m.from.as_str())
                && !new.contains_key(m.from.as_str())
                && new.contains_key(m.to.as_str())
                && !old.contains_key(m.to.as_str())
        })
        .map(|m| (m.from.clone(), m.to.clone()))
        .collect();
    let moved_to: BTreeMap<&str, &str> = renames
        .iter()
        .map(|(f, t)| (t.as_str(), f.as_str()))
        .collect();
    let old_edges = edge_ends(before, &renames);
    let new_edges = edge_ends(after, &BTreeMap::new());
    let mut nodes = Vec::new();
    for (id, n) in &new {
        let (kind, was) = match moved_to.get(id) {
            Some(from) => (
                ChangeKind::Moved {
                    from: from.to_string(),
                },
                old.get(from),
            ),
            None => match old.get(id) {
                Some(o) => (ChangeKind::Changed, Some(o)),
                None => (ChangeKind::Added, None),
            },
        };
        let was_id = was.map(|o| o.id.as_str());
        let empty = BTreeSet::new();
        let before_edges = was_id.and_then(|w| old_edges.get(w)).unwrap_or(&empty);
        let after_edges = new_edges.get(*id).unwrap_or(&empty);
        let change = NodeChange {
            address: id.to_string(),
            attributes: node_attributes(was.map(|o| renamed_node(o, &renames)).as_ref(), Some(n)),
            edges_added: after_edges.difference(before_edges).cloned().collect(),
            edges_removed: before_edges.difference(after_edges).cloned().collect(),
            kind,
        };
        let differs = change.kind != ChangeKind::Changed
            || !change.attributes.is_empty()
            || !change.edges_added.is_empty()
            || !change.edges_removed.is_empty();
        if differs {
            nodes.push(change);
        }
    }
    for (id, o) in &old {
        if !new.contains_key(id) && !renames.contains_key(*id) {
            nodes.push(NodeChange {
                address: id.to_string(),
                kind: ChangeKind::Removed,
                attributes: node_attributes(Some(&renamed_node(o, &renames)), None),
                edges_added: Vec::new(),
                edges_removed: old_edges.get(*id).into_iter().flatten().cloned().collect(),
            });
        }
    }
    nodes.sort_by(|a, b| a.address.cmp(&b.address));
    let may_change_later = dependents(after, &nodes);
    Diff {
        nodes,
        may_change_later,
    }
}

/// Per node, the ends of the edges into it (`from` renamed by `renames`).
fn edge_ends(ir: &Ir, renames: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<EdgeEnd>> {
    let mut out: BTreeMap<String, BTreeSet<EdgeEnd>> = BTreeMap::new();
    for e in &ir.edges {
        let from = renames.get(&e.from).unwrap_or(&e.from).clone();
        out.entry(e.to.clone()).or_default().insert(EdgeEnd {
            from,
            via: e.via.clone(),
        });
    }
    out
}

/// `node` with every reference to a renamed address pointing at the new address.
fn renamed_node(node: &Node, renames: &BTreeMap<String, String>) -> Node {
    let mut node = node.clone();
    if !renames.is_empty() {
        rename_refs(&mut node.config, renames);
    }
    node
}

fn rename_refs(tree: &mut Tree, renames: &BTreeMap<String, String>) {
    let renamed = |id: &mut String| {
        if let Some(to) = renames.get(id.as_str()) {
            *id = to.clone();
        }
    };
    match tree {
        Tree::Ref(r) | Tree::SensitiveRef(r) => renamed(&mut r.resource),
        Tree::Derived(inputs) => inputs.iter_mut().for_each(|i| renamed(&mut i.resource)),
        Tree::Sensitive(inner) | Tree::Ephemeral(inner) => rename_refs(inner, renames),
        Tree::List(items) => items.iter_mut().for_each(|t| rename_refs(t, renames)),
        Tree::Object(map) => map.values_mut().for_each(|t| rename_refs(t, renames)),
        _ => {}
    }
}

/// The attribute differences between two versions of a node (either may be missing).
fn node_attributes(before: Option<&Node>, after: Option<&Node>) -> Vec<AttrChange> {
    let mut out = Vec::new();
    // A node on one side only lists each attribute it has, not one `config` object.
    let config = |n: Option<&Node>| {
        Some(n.map_or(Tree::Object(crate::ir::Fields::new()), |n| n.config.clone()))
    };
    compare_trees(
        &mut vec![PathStep::Key("config".into())],
        config(before).as_ref(),
        config(after).as_ref(),
        &mut out,
    );
    let meta = |n: Option<&Node>, name: &str| -> Option<Json> {
        let n = n?;
        match name {
            "provider" => Some(json!(n.provider)),
            "lifecycle" if n.lifecycle != Lifecycle::default() => {
                Some(lifecycle_json(&n.lifecycle))
            }
            "importId" => n.import_id.as_ref().map(|i| json!(i)),
            _ => None,
        }
    };
    for name in ["provider", "lifecycle", "importId"] {
        let (b, a) = (meta(before, name), meta(after, name));
        if b != a {
            let shown = |v: Option<Json>| v.map_or(Shown::Absent, Shown::Value);
            out.push(AttrChange {
                path: format!("meta.{name}"),
                before: shown(b),
                after: shown(a),
            });
        }
    }
    out
}

fn lifecycle_json(l: &Lifecycle) -> Json {
    json!({
        "preventDestroy": l.prevent_destroy,
        "createBeforeDestroy": l.create_before_destroy,
        "ignoreChanges": l.ignore_changes.iter().map(ToString::to_string).collect::<Vec<_>>(),
    })
}

/// Appends the differences between `a` and `b` at `path`, descending into objects and into
/// lists of the same length.
fn compare_trees(
    path: &mut Vec<PathStep>,
    a: Option<&Tree>,
    b: Option<&Tree>,
    out: &mut Vec<AttrChange>,
) {
    if a == b {
        return;
    }
    match (a, b) {
        (Some(Tree::Object(x)), Some(Tree::Object(y))) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                path.push(PathStep::Key(k.clone()));
                compare_trees(path, x.get(k), y.get(k), out);
                path.pop();
            }
        }
        (Some(Tree::List(x)), Some(Tree::List(y))) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                path.push(PathStep::Index(i as u64));
                compare_trees(path, Some(p), Some(q), out);
                path.pop();
            }
        }
        _ => out.push(AttrChange {
            path: render_path(path),
            before: shown(a),
            after: shown(b),
        }),
    }
}

fn shown(t: Option<&Tree>) -> Shown {
    match t {
        None => Shown::Absent,
        Some(t) if t.holds_secret() => Shown::Sensitive,
        Some(t) => Shown::Value(t.to_json()),
    }
}

/// The nodes of `after` not listed in `changes` that depend, through `after`'s edges, on a
/// node added or whose attributes changed (a move alone changes no output).
fn dependents(after: &Ir, changes: &[NodeChange]) -> Vec<Dependent> {
    let listed: BTreeSet<&str> = changes.iter().map(|c| c.address.as_str()).collect();
    let seeds = changes.iter().filter(|c| match c.kind {
        ChangeKind::Removed => false,
        ChangeKind::Added => true,
        _ => !c.attributes.is_empty(),
    });
    let mut readers: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for e in &after.edges {
        readers
            .entry(e.from.as_str())
            .or_default()
            .insert(e.to.as_str());
    }
    let mut found: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for seed in seeds {
        let mut queue = VecDeque::from([seed.address.as_str()]);
        let mut seen = BTreeSet::from([seed.address.as_str()]);
        while let Some(id) = queue.pop_front() {
            for next in readers.get(id).into_iter().flatten() {
                if seen.insert(next) {
                    queue.push_back(next);
                    if !listed.contains(next) {
                        found.entry(next).or_default().insert(seed.address.as_str());
                    }
                }
            }
        }
    }
    found
        .into_iter()
        .map(|(id, because)| Dependent {
            address: id.to_string(),
            because_of: because.into_iter().map(str::to_string).collect(),
        })
        .collect()
}

#[cfg(test)]
#[path = "diff_tests.rs"]
mod tests;
