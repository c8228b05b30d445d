//! What the IR's consumers ask of it: nodes, dependencies, whether a value is known, JSON.

use serde_json::{Map, Value};

#[cfg(test)]
use super::model::Ref;
use super::model::{
    Condition, ConditionKind, Dependency, DependencyKind, Edge, Ir, Node, NodeKind, ProviderDecl,
    ProviderKind, RemovedAction, ReplaceTrigger, Tree, VariableDecl,
};
use super::path::PathStep;
use super::SCHEMA_VERSION;

impl Ir {
    /// Managed resources, then data sources.
    pub(crate) fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.resources.iter().chain(self.data.iter())
    }

    /// The node with this id.
    pub(crate) fn node(&self, id: &str) -> Option<&Node> {
        self.nodes().find(|n| n.id == id)
    }

    /// The IR back as JSON, in its canonical form (every optional field written).
    pub fn to_json(&self) -> Value {
        let providers: Map<String, Value> = (self.providers.iter())
            .map(|(id, p)| (id.clone(), provider_json(p)))
            .collect();
        let variables: Map<String, Value> = (self.variables.iter())
            .map(|(name, d)| (name.clone(), variable_json(d)))
            .collect();
        let mut doc = serde_json::json!({
            "schemaVersion": SCHEMA_VERSION,
            "providers": providers,
            "resources": self.resources.iter().map(Node::to_json).collect::<Vec<_>>(),
            "data": self.data.iter().map(Node::to_json).collect::<Vec<_>>(),
            "edges": self.edges.iter().map(Edge::to_json).collect::<Vec<_>>(),
            "nixConsumers": self.consumers.iter().map(|c| serde_json::json!({"id": c.id, "value": c.value.to_json()})).collect::<Vec<_>>(),
            "variables": variables,
        });
        if !self.moved.is_empty() {
            // Absent when empty, as the library emits it.
            doc["moved"] = self
                .moved
                .iter()
                .map(|m| serde_json::json!({"from": m.from, "to": m.to}))
                .collect();
        }
        if self.without_ledger {
            // Absent when the ledger was given, as the library emits it.
            doc["withoutLedger"] = Value::Bool(true);
        }
        if !self.removed.is_empty() {
            doc["removed"] = (self.removed.iter())
                .map(|r| {
                    let destroy = r.action == RemovedAction::Destroy;
                    serde_json::json!({"from": r.from, "destroy": destroy})
                })
                .collect();
        }
        if !self.conditions.is_empty() {
            doc["conditions"] = self.conditions.iter().map(Condition::to_json).collect();
        }
        if !self.ephemeral.is_empty() {
            doc["ephemeral"] = (self.ephemeral.iter())
                .map(|e| {
                    serde_json::json!({"id": e.id, "provider": e.provider, "type": e.type_name,
                        "name": e.name, "config": e.config.to_json()})
                })
                .collect();
        }
        doc
    }
}

/// One provider declaration as the IR writes it.
fn provider_json(p: &ProviderDecl) -> Value {
    let mut m = Map::new();
    m.insert("source".into(), Value::String(p.source.clone()));
    if let Some(v) = &p.version {
        m.insert("version".into(), Value::String(v.clone()));
    }
    if let Some(drv) = &p.drv_path {
        m.insert("drvPath".into(), Value::String(drv.clone()));
    }
    m.insert("config".into(), p.config.to_json());
    m.insert("kind".into(), Value::String(p.kind.name().into()));
    if let ProviderKind::Nixops4 { stateless_types } = &p.kind {
        m.insert("statelessTypes".into(), serde_json::json!(stateless_types));
    }
    Value::Object(m)
}

/// One variable declaration as the IR writes it.
fn variable_json(d: &VariableDecl) -> Value {
    let mut m = Map::new();
    if let Some(t) = &d.ty {
        m.insert("type".into(), Value::String(t.clone()));
    }
    if let Some(v) = &d.default {
        m.insert("default".into(), v.clone());
    }
    if let Some(s) = &d.description {
        m.insert("description".into(), Value::String(s.clone()));
    }
    m.insert("sensitive".into(), Value::Bool(d.sensitive));
    Value::Object(m)
}

impl Condition {
    fn to_json(&self) -> Value {
        let mut c = serde_json::json!({"kind": "check", "name": self.name,
            "message": self.message, "status": self.status.name()});
        if let ConditionKind::Postcondition { resource } = &self.kind {
            c["kind"] = Value::String("postcondition".into());
            c["resource"] = Value::String(resource.clone());
        }
        c
    }
}

impl Node {
    fn to_json(&self) -> Value {
        let mut meta = Map::new();
        meta.insert("dependsOn".into(), serde_json::json!(self.depends_on));
        if self.kind == NodeKind::Managed {
            let mut lifecycle = serde_json::json!({
                "preventDestroy": self.lifecycle.prevent_destroy,
                "createBeforeDestroy": self.lifecycle.create_before_destroy,
                "ignoreChanges": self.lifecycle.ignore_changes.iter().map(ToString::to_string).collect::<Vec<_>>(),
            });
            if !self.lifecycle.precondition_pending.is_empty() {
                let inputs: Vec<String> = (self.lifecycle.precondition_pending.iter())
                    .map(ToString::to_string)
                    .collect();
                lifecycle["preconditionPending"] =
                    serde_json::json!({"__derived": {"inputs": inputs}});
            }
            if !self.lifecycle.replace_triggered_by.is_empty() {
                let triggers: Vec<Value> = (self.lifecycle.replace_triggered_by.iter())
                    .map(|t| match t {
                        ReplaceTrigger::Resource(id) => serde_json::json!({ "resource": id }),
                        ReplaceTrigger::Attribute(r) => serde_json::json!({
                            "resource": r.resource,
                            "path": path_json(&r.path),
                        }),
                    })
                    .collect();
                lifecycle["replaceTriggeredBy"] = Value::Array(triggers);
            }
            meta.insert("lifecycle".into(), lifecycle);
        }
        if let Some(id) = &self.import_id {
            meta.insert("importId".into(), Value::String(id.clone()));
        }
        let mut node = serde_json::json!({
            "id": self.id,
            "provider": self.provider,
            "type": self.type_name,
            "name": self.name,
            "config": self.config.to_json(),
            "meta": meta,
        });
        if let Some(module) = &self.module {
            node["module"] = Value::String(module.clone());
        }
        if let Some(k) = &self.key {
            // lib.count's indices are integers in the IR, lib.forEach's keys strings.
            node["key"] = match k.parse::<u64>() {
                Ok(index) if index.to_string() == *k => Value::from(index),
                _ => Value::String(k.clone()),
            };
        }
        node
    }
}

impl Edge {
    /// Whether the edge only orders `to` after `from` and reads no value of it: `dependsOn`,
    /// and `lifecycle.replaceTriggeredBy[i]`, whose trigger the executor itself compares
    /// (DESIGN §103). A change of `from` never makes `to`'s configuration stale.
    pub(crate) fn orders_only(&self) -> bool {
        self.via == "dependsOn" || self.via.starts_with("lifecycle.replaceTriggeredBy[")
    }

    /// The edge as the IR writes it (`ref` only on an edge made by a plain reference).
    pub(crate) fn to_json(&self) -> Value {
        let mut e = serde_json::json!({"from": self.from, "to": self.to, "via": self.via});
        if let Some(path) = &self.reference {
            e["ref"] = path_json(path);
        }
        if let Some(reads) = &self.reads {
            e["reads"] = Value::Array(reads.iter().map(|p| path_json(p)).collect());
        }
        e
    }
}

pub(super) fn path_json(path: &[PathStep]) -> Value {
    Value::Array(
        path.iter()
            .map(|s| match s {
                PathStep::Key(k) => Value::String(k.clone()),
                PathStep::Index(i) => Value::Number((*i).into()),
            })
            .collect(),
    )
}

impl Tree {
    /// Whether a secret value is inside: a `__sensitive` or `__ephemeral` marker (a
    /// `__sensitiveRef` holds no value, only where to read one).
    pub(crate) fn holds_secret(&self) -> bool {
        match self {
            Tree::Sensitive(_) | Tree::Ephemeral(_) => true,
            Tree::List(items) => items.iter().any(Tree::holds_secret),
            Tree::Object(map) => map.values().any(Tree::holds_secret),
            _ => false,
        }
    }

    /// Visit every leaf (scalars, empty containers and markers) with its path.
    pub(crate) fn walk_leaves<'a, F: FnMut(&[PathStep], &'a Tree)>(&'a self, mut f: F) {
        self.visit(&mut Vec::new(), &mut f);
    }

    fn visit<'a, F: FnMut(&[PathStep], &'a Tree)>(&'a self, path: &mut Vec<PathStep>, f: &mut F) {
        match self {
            // A sensitive or ephemeral value sits where the marker is; its inside is walked in
            // place.
            Tree::Sensitive(inner) | Tree::Ephemeral(inner) => inner.visit(path, f),
            Tree::List(items) if !items.is_empty() => {
                for (i, item) in items.iter().enumerate() {
                    path.push(PathStep::Index(i as u64));
                    item.visit(path, f);
                    path.pop();
                }
            }
            Tree::Object(map) if !map.is_empty() => {
                for (k, v) in map {
                    path.push(PathStep::Key(k.clone()));
                    v.visit(path, f);
                    path.pop();
                }
            }
            leaf => f(path, leaf),
        }
    }

    /// Every use of another node's output: one per `__ref` / `__sensitiveRef`
    /// leaf and one per `__derived` input.
    pub(crate) fn dependencies(&self) -> Vec<Dependency<'_>> {
        let mut out = Vec::new();
        self.walk_leaves(|at, leaf| {
            let uses: Vec<(&str, DependencyKind)> = match leaf {
                Tree::Ref(r) => vec![(&r.resource, DependencyKind::Ref)],
                Tree::SensitiveRef(r) => vec![(&r.resource, DependencyKind::SensitiveRef)],
                Tree::Derived(inputs) => inputs
                    .iter()
                    .map(|i| (i.resource.as_str(), DependencyKind::Derived))
                    .collect(),
                _ => return,
            };
            for (resource, kind) in uses {
                out.push(Dependency {
                    at: at.to_vec(),
                    resource,
                    kind,
                });
            }
        });
        out
    }

    /// Calls `f` with the path of every `__build` leaf inside a `__sensitive` value.
    pub(crate) fn walk_sensitive_builds(&self, f: &mut dyn FnMut(&[PathStep])) {
        fn go(t: &Tree, inside: bool, path: &mut Vec<PathStep>, f: &mut dyn FnMut(&[PathStep])) {
            match t {
                Tree::Build(_) if inside => f(path),
                Tree::Sensitive(inner) | Tree::Ephemeral(inner) => go(inner, true, path, f),
                Tree::List(items) => {
                    for (i, item) in items.iter().enumerate() {
                        path.push(PathStep::Index(i as u64));
                        go(item, inside, path, f);
                        path.pop();
                    }
                }
                Tree::Object(map) => {
                    for (k, v) in map {
                        path.push(PathStep::Key(k.clone()));
                        go(v, inside, path, f);
                        path.pop();
                    }
                }
                _ => {}
            }
        }
        go(self, false, &mut Vec::new(), f);
    }

    /// The `__ref` and `__sensitiveRef` leaves with their paths.
    #[cfg(test)] // used by the unit tests only
    pub(crate) fn refs(&self) -> Vec<(Vec<PathStep>, &Ref)> {
        let mut out = Vec::new();
        self.walk_leaves(|at, leaf| {
            if let Tree::Ref(r) | Tree::SensitiveRef(r) = leaf {
                out.push((at.to_vec(), r));
            }
        });
        out
    }

    /// True when the tree holds no `__ref`, `__sensitiveRef` or `__derived`
    /// (a `__build` leaf is known: its path is fixed at evaluation).
    pub(crate) fn is_known(&self) -> bool {
        match self {
            Tree::Ref(_) | Tree::SensitiveRef(_) | Tree::Derived(_) => false,
            Tree::Sensitive(inner) | Tree::Ephemeral(inner) => inner.is_known(),
            Tree::List(items) => items.iter().all(Tree::is_known),
            Tree::Object(map) => map.values().all(Tree::is_known),
            _ => true,
        }
    }

    /// True when some value here can only be produced by re-evaluating Nix.
    pub(crate) fn needs_nix(&self) -> bool {
        match self {
            Tree::Derived(_) => true,
            Tree::Sensitive(inner) | Tree::Ephemeral(inner) => inner.needs_nix(),
            Tree::List(items) => items.iter().any(Tree::needs_nix),
            Tree::Object(map) => map.values().any(Tree::needs_nix),
            _ => false,
        }
    }

    /// The tree as IR JSON, markers included.
    pub(crate) fn to_json(&self) -> Value {
        match self {
            Tree::Null => Value::Null,
            Tree::Bool(b) => Value::Bool(*b),
            Tree::Number(n) => Value::Number(n.clone()),
            Tree::String(s) => Value::String(s.clone()),
            Tree::List(items) => Value::Array(items.iter().map(Tree::to_json).collect()),
            Tree::Object(map) => {
                Value::Object(map.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
            Tree::Ref(r) => {
                serde_json::json!({"__ref": {"resource": r.resource, "path": path_json(&r.path)}})
            }
            Tree::SensitiveRef(r) => {
                serde_json::json!({"__sensitiveRef": {"resource": r.resource, "path": path_json(&r.path)}})
            }
            Tree::Derived(inputs) => {
                serde_json::json!({"__derived": {"inputs": inputs.iter().map(ToString::to_string).collect::<Vec<_>>()}})
            }
            Tree::Build(b) => {
                let mut body = Map::new();
                body.insert("path".into(), Value::String(b.path.clone()));
                if let Some(d) = &b.drv_path {
                    body.insert("drvPath".into(), Value::String(d.clone()));
                }
                serde_json::json!({ "__build": body })
            }
            Tree::Sensitive(inner) => {
                serde_json::json!({"__sensitive": {"value": inner.to_json()}})
            }
            Tree::Ephemeral(inner) => {
                serde_json::json!({"__ephemeral": {"value": inner.to_json()}})
            }
        }
    }

    /// The paths of the `__ephemeral` values in this tree (outermost only).
    pub(crate) fn ephemeral_paths(&self) -> Vec<Vec<PathStep>> {
        fn go(t: &Tree, path: &mut Vec<PathStep>, out: &mut Vec<Vec<PathStep>>) {
            match t {
                Tree::Ephemeral(_) => out.push(path.clone()),
                Tree::Sensitive(inner) => go(inner, path, out),
                Tree::List(items) => {
                    for (i, item) in items.iter().enumerate() {
                        path.push(PathStep::Index(i as u64));
                        go(item, path, out);
                        path.pop();
                    }
                }
                Tree::Object(map) => {
                    for (k, v) in map {
                        path.push(PathStep::Key(k.clone()));
                        go(v, path, out);
                        path.pop();
                    }
                }
                _ => {}
            }
        }
        let mut out = Vec::new();
        go(self, &mut Vec::new(), &mut out);
        out
    }
}
