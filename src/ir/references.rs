//! The referential layer, run once the structure is sound: ids match their parts and are
//! unique, providers are declared, every referenced id exists, every reference has its edge,
//! consumer ids are unique, variable defaults match their type.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::ephemeral::{check_ephemeral_nodes, ephemeral_label};
use super::model::{ConditionKind, Ir, IrError, Node, NodeKind, ProviderKind, Tree};
use super::path::render_path;
use super::path::{key, PathStep};
use super::rules::{without_module, BUILD_IN_SENSITIVE};

pub(super) fn node_label(node: &Node, index: usize) -> String {
    let section = if node.kind == NodeKind::Data {
        "data"
    } else {
        "resources"
    };
    format!("{section}[{index}] ({})", node.id)
}

pub(super) fn type_matches(ty: Option<&str>, v: &Value) -> bool {
    matches!(
        (ty, v),
        (_, Value::Null)
            | (None, _)
            | (Some("any"), _)
            | (Some("string"), Value::String(_))
            | (Some("number"), Value::Number(_))
            | (Some("bool"), Value::Bool(_))
            | (Some("list"), Value::Array(_))
            | (Some("map"), Value::Object(_))
    )
}

/// An error at `path` inside `element`: `resources[1] (id): config.label`.
pub(super) fn located(element: &str, path: &[PathStep], message: String) -> IrError {
    let location = if path.is_empty() {
        element.to_string()
    } else {
        format!("{element}: {}", render_path(path))
    };
    IrError { location, message }
}

/// `lifecycle.replaceTriggeredBy`: each trigger is another declared managed resource, with an
/// edge from it (the trigger is planned first, so its action and outputs are known).
fn trigger_errors(labelled: &[(String, &Node)], pairs: &HashSet<(&str, &str)>) -> Vec<IrError> {
    let managed: HashSet<&str> = (labelled.iter())
        .filter(|(_, n)| n.kind == NodeKind::Managed)
        .map(|(_, n)| n.id.as_str())
        .collect();
    let mut errors = Vec::new();
    for (label, node) in labelled {
        for (k, trigger) in node.lifecycle.replace_triggered_by.iter().enumerate() {
            let at = [
                key("meta"),
                key("lifecycle"),
                key("replaceTriggeredBy"),
                PathStep::Index(k as u64),
                key("resource"),
            ];
            let target = trigger.resource();
            let message = if !managed.contains(target) {
                format!("'{target}' is not a declared managed resource")
            } else if target == node.id {
                format!("'{target}' is the resource itself")
            } else if !pairs.contains(&(target, node.id.as_str())) {
                format!(
                    "is replaced when '{target}' changes but no edge goes from '{target}' to '{}'",
                    node.id
                )
            } else {
                continue;
            };
            errors.push(located(label, &at, message));
        }
    }
    errors
}

pub(super) fn missing(target: &str) -> String {
    format!("'{target}' is not a declared resource or data id")
}

// Long because it is the referential rules of check.py in the same order (ids, providers, targets,
// edges, consumers, variables), so both report the same errors in the same order; each rule is a
// few lines over shared indexes.
pub(super) fn check_references(ir: &Ir) -> Vec<IrError> {
    let mut errors = Vec::new();
    let mut first_seen: HashMap<&str, String> = HashMap::new();
    let labelled: Vec<(String, &Node)> = ir
        .resources
        .iter()
        .enumerate()
        .chain(ir.data.iter().enumerate())
        .map(|(i, n)| (node_label(n, i), n))
        .collect();

    for (label, node) in &labelled {
        let prefix = if node.kind == NodeKind::Data {
            "data."
        } else {
            ""
        };
        let module = node
            .module
            .as_ref()
            .map(|m| format!("{m}."))
            .unwrap_or_default();
        let expected = format!(
            "{prefix}{module}{}.{}.{}",
            node.provider, node.type_name, node.name
        );
        if node.id != expected {
            errors.push(located(
                label,
                &[key("id")],
                format!(
                    "'{}' does not match its parts (expected '{expected}')",
                    node.id
                ),
            ));
        }
        match first_seen.get(node.id.as_str()) {
            Some(first) => errors.push(located(
                label,
                &[key("id")],
                format!("duplicate id '{}' (first declared at {first})", node.id),
            )),
            None => {
                let short = label.split(' ').next().unwrap_or_default().to_string();
                first_seen.insert(&node.id, short);
            }
        }
        match ir.providers.get(&node.provider) {
            None => errors.push(located(
                label,
                &[key("provider")],
                format!("provider '{}' is not declared in providers", node.provider),
            )),
            Some(p) if node.kind == NodeKind::Data && p.kind != ProviderKind::Tfplugin => errors
                .push(located(
                    label,
                    &[key("provider")],
                    format!(
                        "provider '{}' is of kind {}, which has no data sources",
                        node.provider,
                        p.kind.name()
                    ),
                )),
            Some(_) => {}
        }
    }
    let ids: HashSet<&str> = first_seen.keys().copied().collect();
    let mut all_seen: HashMap<String, String> = (first_seen.iter())
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    check_ephemeral_nodes(ir, &mut all_seen, &mut errors);
    // A value computed from an ephemeral result (`__derived`) names it; nothing else may.
    let ephemeral_ids: HashSet<&str> = ir.ephemeral.iter().map(|e| e.id.as_str()).collect();

    let mut pairs: HashSet<(&str, &str)> = HashSet::new();
    for (i, edge) in ir.edges.iter().enumerate() {
        let label = format!("edges[{i}] ({} -> {})", edge.from, edge.to);
        for (end, id) in [("from", &edge.from), ("to", &edge.to)] {
            if !ids.contains(id.as_str()) {
                errors.push(located(&label, &[key(end)], missing(id)));
            }
        }
        pairs.insert((&edge.from, &edge.to));
    }

    // Reference targets in a tree; for node configs also the edge each one needs.
    let check_tree = |errors: &mut Vec<IrError>,
                      label: &str,
                      root: &str,
                      tree: &Tree,
                      node_id: Option<&str>| {
        tree.walk_sensitive_builds(&mut |at| {
            let p: Vec<PathStep> = std::iter::once(key(root))
                .chain(at.iter().cloned())
                .collect();
            errors.push(located(label, &p, BUILD_IN_SENSITIVE.into()));
        });
        tree.walk_leaves(|at, leaf| {
            let (marker, bodies): (&str, Vec<(&str, PathStep)>) = match leaf {
                Tree::Ref(r) => ("__ref", vec![(r.resource.as_str(), key("resource"))]),
                Tree::SensitiveRef(r) => ("__sensitiveRef", vec![(r.resource.as_str(), key("resource"))]),
                Tree::Derived(inputs) => (
                    "__derived",
                    inputs.iter().enumerate().map(|(k, input)| (input.resource.as_str(), PathStep::Index(k as u64))).collect(),
                ),
                _ => return,
            };
            let leaf_path: Vec<PathStep> = std::iter::once(key(root)).chain(at.iter().cloned()).collect();
            let mut targets: Vec<&str> = Vec::new();
            for (target, step) in bodies {
                if marker == "__derived" && ephemeral_ids.contains(target) {
                    continue;
                }
                if ids.contains(target) {
                    if !targets.contains(&target) {
                        targets.push(target);
                    }
                    continue;
                }
                let mut p = leaf_path.clone();
                p.push(key(marker));
                let message = match (leaf, &step) {
                    (Tree::Derived(inputs), PathStep::Index(k)) => {
                        p.extend([key("inputs"), step.clone()]);
                        format!(
                            "'{}' does not name a declared resource or data id followed by '.<attribute>'",
                            inputs[*k as usize]
                        )
                    }
                    _ => {
                        p.push(step);
                        missing(target)
                    }
                };
                errors.push(located(label, &p, message));
            }
            if let Some(to) = node_id {
                for target in targets {
                    if !pairs.contains(&(target, to)) {
                        errors.push(located(
                            label,
                            &leaf_path,
                            format!("refers to '{target}' but no edge goes from '{target}' to '{to}'"),
                        ));
                    }
                }
            }
        });
    };

    for (label, node) in &labelled {
        check_tree(&mut errors, label, "config", &node.config, Some(&node.id));
        for (k, target) in node.depends_on.iter().enumerate() {
            let at = [key("meta"), key("dependsOn"), PathStep::Index(k as u64)];
            if !ids.contains(target.as_str()) {
                errors.push(located(label, &at, missing(target)));
            } else if !pairs.contains(&(target.as_str(), node.id.as_str())) {
                errors.push(located(
                    label,
                    &at,
                    format!(
                        "depends on '{target}' but no edge goes from '{target}' to '{}'",
                        node.id
                    ),
                ));
            }
        }
    }
    errors.extend(trigger_errors(&labelled, &pairs));
    for (id, provider) in &ir.providers {
        let label = render_path(&[key("providers"), key(id)]);
        check_tree(&mut errors, &label, "config", &provider.config, None);
    }
    for (i, node) in ir.ephemeral.iter().enumerate() {
        let label = ephemeral_label(node, i);
        check_tree(&mut errors, &label, "config", &node.config, None);
    }
    let mut consumer_ids: HashMap<&str, usize> = HashMap::new();
    for (i, consumer) in ir.consumers.iter().enumerate() {
        let label = format!("nixConsumers[{i}] ({})", consumer.id);
        if let Some(first) = consumer_ids.get(consumer.id.as_str()) {
            errors.push(located(
                &label,
                &[key("id")],
                format!(
                    "duplicate consumer id '{}' (first declared at nixConsumers[{first}])",
                    consumer.id
                ),
            ));
        } else {
            consumer_ids.insert(&consumer.id, i);
        }
        check_tree(&mut errors, &label, "value", &consumer.value, None);
    }
    for (name, decl) in &ir.variables {
        if let Some(default) = &decl.default {
            if !type_matches(decl.ty.as_deref(), default) {
                let label = render_path(&[key("variables"), key(name)]);
                errors.push(located(
                    &label,
                    &[key("default")],
                    format!(
                        "default does not match type '{}'",
                        decl.ty.as_deref().unwrap_or("any")
                    ),
                ));
            }
        }
    }
    errors.extend(check_moves(ir));
    errors.extend(check_conditions(ir));
    errors.extend(check_removed(ir));
    errors
}

/// The rules of `moved[]`: `from` is no longer declared, `to` is a declared resource or the
/// `from` of another move (a chain), both name the same provider and type, each `from` moves
/// once, and no chain comes back to where it started.
fn check_moves(ir: &Ir) -> Vec<IrError> {
    let mut errors = Vec::new();
    let declared: HashSet<&str> = ir
        .resources
        .iter()
        .chain(&ir.data)
        .map(|n| n.id.as_str())
        .collect();
    let managed: HashSet<&str> = ir.resources.iter().map(|n| n.id.as_str()).collect();
    let mut first_from: HashMap<&str, usize> = HashMap::new();
    for (i, m) in ir.moved.iter().enumerate() {
        first_from.entry(m.from.as_str()).or_insert(i);
    }
    for (i, m) in ir.moved.iter().enumerate() {
        let label = format!("moved[{i}] ({} -> {})", m.from, m.to);
        if declared.contains(m.from.as_str()) {
            errors.push(located(&label, &[key("from")], format!("'{}' is still declared; a move's from must be an address that is no longer in the configuration", m.from)));
        }
        if !managed.contains(m.to.as_str()) && !first_from.contains_key(m.to.as_str()) {
            errors.push(located(
                &label,
                &[key("to")],
                format!(
                    "'{}' is not a declared resource nor the from of another move",
                    m.to
                ),
            ));
        }
        if let Some(problem) = kind_changed(ir, &m.from, &m.to) {
            errors.push(located(&label, &[key("to")], problem));
        }
        if let Some(&first) = first_from.get(m.from.as_str()).filter(|&&f| f != i) {
            errors.push(located(
                &label,
                &[key("from")],
                format!("'{}' is moved twice (first at moved[{first}])", m.from),
            ));
        }
        if let Some(cycle) = cycle_from(ir, &first_from, i) {
            errors.push(located(
                &label,
                &[],
                format!("the moves form a cycle: {cycle}"),
            ));
        }
    }
    errors
}

/// `removed[]`: each `from` is no longer declared, and removed once.
fn check_removed(ir: &Ir) -> Vec<IrError> {
    let declared: HashSet<&str> = ir.nodes().map(|n| n.id.as_str()).collect();
    let mut first: HashMap<&str, usize> = HashMap::new();
    let mut errors = Vec::new();
    for (i, r) in ir.removed.iter().enumerate() {
        let label = format!("removed[{i}] ({})", r.from);
        if declared.contains(r.from.as_str()) {
            let msg = format!("'{}' is still declared; a removal's from must be an address that is no longer in the configuration", r.from);
            errors.push(located(&label, &[key("from")], msg));
        }
        if let Some(at) = first.get(r.from.as_str()) {
            let msg = format!("'{}' is removed twice (first at removed[{at}])", r.from);
            errors.push(located(&label, &[key("from")], msg));
        }
        first.entry(r.from.as_str()).or_insert(i);
    }
    errors
}

/// `conditions[]`: a postcondition's resource is a declared managed resource.
fn check_conditions(ir: &Ir) -> Vec<IrError> {
    let managed: HashSet<&str> = ir.resources.iter().map(|n| n.id.as_str()).collect();
    let postconditions = ir
        .conditions
        .iter()
        .enumerate()
        .filter_map(|(i, c)| match &c.kind {
            ConditionKind::Postcondition { resource } => Some((i, resource)),
            ConditionKind::Check => None,
        });
    postconditions
        .filter(|(_, resource)| !managed.contains(resource.as_str()))
        .map(|(i, resource)| {
            let msg = format!("'{resource}' is not a declared resource");
            located(&format!("conditions[{i}]"), &[key("resource")], msg)
        })
        .collect()
}

/// Why a move from `from` to `to` changes what the object is, if it does. A move keeps the
/// resource type and the provider; the provider's configuration may change between two that
/// the plan declares with the same source and kind (an alias: `alpha` to `alpha_eu`).
fn kind_changed(ir: &Ir, from: &str, to: &str) -> Option<String> {
    // `PROVIDER.TYPE` of an id `PROVIDER.TYPE.NAME`.
    let kind = |id: &str| {
        without_module(id)
            .rsplit_once('.')
            .map_or(String::new(), |(k, _)| k.into())
    };
    let (from_kind, to_kind) = (kind(from), kind(to));
    if from_kind == to_kind {
        return None;
    }
    let same_provider = ir.resources.iter().find(|n| n.id == to).is_some_and(|n| {
        let from_provider = from_kind.strip_suffix(&format!(".{}", n.type_name));
        let decl = |p: &str| ir.providers.get(p).map(|d| (&d.source, &d.kind));
        from_provider
            .and_then(decl)
            .is_some_and(|d| Some(d) == decl(&n.provider))
    });
    (!same_provider).then(|| {
        format!(
            "a move keeps the provider and the type: '{from}' is of provider.type {from_kind}, \
             '{to}' of {to_kind} (two configurations of one provider, declared with the same \
             source, may exchange resources)"
        )
    })
}

/// The cycle through `moved[i]` as `a -> b -> a`, when `i` is its lowest index (so a cycle is
/// reported once).
fn cycle_from(ir: &Ir, first_from: &HashMap<&str, usize>, i: usize) -> Option<String> {
    let mut path = vec![ir.moved[i].from.as_str()];
    let mut at = i;
    for _ in 0..ir.moved.len() {
        let next = ir.moved[at].to.as_str();
        path.push(next);
        at = *first_from.get(next)?;
        if at < i {
            return None;
        }
        if at == i {
            return Some(path.join(" -> "));
        }
    }
    None
}
