//! Readiness analysis of one evaluation: the dependency graph, cycles, `--target`, which
//! resources run in this phase and which wait (on Nix, on a resource, on a provider's
//! configuration), and the fingerprints that say a settled resource need not run again.
//! Pure reading of the IR and state (the sensitive values it resolves are taught to the run's
//! redactor, nothing else is written): no provider calls, no events.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::error::EngineError;
use super::events::{Action, Wait};
use super::resolve::{resolve, Lookup};
use crate::graph::Graph;
use crate::ir::{Ir, Node, Tree};
use crate::provider::Capabilities;
use crate::secrets::Redactor;
use crate::state::StateFile;

/// The resources settled in this run: id -> the fingerprint of the configuration they settled
/// with (see [`resolved_fingerprint`]); one with the same fingerprint now need not run again.
pub(super) type Settled = HashMap<String, String>;

/// What, besides the IR and the state, decides an analysis: the run's `--target` and
/// `--replace`, and what it has settled so far; and the run's redactor.
pub(super) struct Scope<'a> {
    /// `--target`: only these resources and what they depend on.
    pub(super) targets: &'a [String],
    /// `--replace`: each must be a managed resource of the IR.
    pub(super) replace: &'a [String],
    /// Settled earlier in this run.
    pub(super) settled: &'a Settled,
    /// The run's secrets: resolving a sensitive value teaches it the value (it decides
    /// nothing here).
    pub(super) redactor: &'a Redactor,
}

/// Works out, for one evaluation (`ir` against `state`), what runs now and what waits.
// Long because it is one pass whose steps feed each other in order (graph, cycles, targets,
// providers not yet configurable, readiness), each a few lines.
pub(super) fn analyse<'ir>(
    ir: &'ir Ir,
    state: &StateFile,
    scope: &Scope<'_>,
) -> Result<Analysis<'ir>, EngineError> {
    let mut nodes: BTreeMap<String, NodeInfo<'ir>> = BTreeMap::new();
    for node in ir.resources.iter().chain(ir.data.iter()) {
        let mut deps = BTreeSet::new();
        collect_deps(&node.config, &mut deps);
        deps.extend(node.depends_on.iter().cloned());
        nodes.insert(node.id.clone(), NodeInfo { node, deps });
    }
    // Nix resolves references it can into concrete values but keeps them as edges, so the
    // dependency survives for ordering and destroy order.
    for edge in &ir.edges {
        if let Some(info) = nodes.get_mut(&edge.to) {
            if edge.from != edge.to {
                info.deps.insert(edge.from.clone());
            }
        }
    }
    let mut graph = Graph::new();
    for (id, info) in &nodes {
        graph.add_node(id);
        for d in &info.deps {
            if nodes.contains_key(d) {
                graph.add_dependency(id, d);
            }
        }
    }
    if let Some(r) = scope
        .replace
        .iter()
        .find(|r| !ir.resources.iter().any(|n| &n.id == *r))
    {
        return Err(EngineError::UnknownReplace(r.clone()));
    }
    let cycles = graph.cycles();
    if !cycles.is_empty() {
        return Err(EngineError::Cycle(cycles));
    }
    let mut selected: BTreeSet<String> = nodes.keys().cloned().collect();
    if !scope.targets.is_empty() {
        let mut roots = Vec::new();
        for t in scope.targets {
            match graph.index_of(t) {
                Some(i) => roots.push(i),
                None if state.contains(t) => {}
                None => return Err(EngineError::UnknownTarget(t.clone())),
            }
        }
        selected = graph
            .with_dependencies(&roots)
            .into_iter()
            .map(|i| graph.id(i).to_string())
            .collect();
    }
    let order: Vec<String> = graph
        .topological_order()
        .expect("acyclic")
        .into_iter()
        .map(|i| graph.id(i).to_string())
        .filter(|id| selected.contains(id))
        .collect();

    // Providers whose configuration is not known yet.
    let unconfigurable: BTreeSet<&str> = ir
        .providers
        .iter()
        .filter(|(_, decl)| {
            let lookup = |id: &str| match state.get(id) {
                Some(rs) if !selected.contains(id) || !nodes.contains_key(id) => {
                    Lookup::Settled(&rs.attributes, &rs.sensitive_paths)
                }
                _ => Lookup::Pending,
            };
            let r = resolve(&decl.config, &lookup, scope.redactor);
            !r.waits.is_empty()
        })
        .map(|(pid, _)| pid.as_str())
        .collect();

    let mut deferred: BTreeMap<String, Vec<Wait>> = BTreeMap::new();
    let mut run: Vec<String> = Vec::new();
    let mut running: BTreeSet<String> = BTreeSet::new();
    for id in &order {
        let info = &nodes[id];
        let mut waits = Vec::new();
        if unconfigurable.contains(info.node.provider.as_str()) {
            waits.push(Wait::ProviderConfig(info.node.provider.clone()));
        }
        collect_derived(&info.node.config, &mut waits);
        // A precondition Nix could not decide yet: the resource waits for the evaluation that
        // knows the outputs it reads (nix/lib/conditions.nix).
        waits.extend(
            info.node
                .lifecycle
                .precondition_pending
                .iter()
                .map(|i| Wait::Nix {
                    resource: i.resource.clone(),
                    attribute: i.attr.clone(),
                }),
        );
        for d in &info.deps {
            if deferred.contains_key(d) {
                waits.push(Wait::Resource(d.clone()));
            }
        }
        if !waits.is_empty() {
            deferred.insert(id.clone(), tidy_waits(waits));
            continue;
        }
        let fresh = !info.deps.iter().any(|d| running.contains(d))
            && scope.settled.get(id).is_some_and(|fp| {
                Some(fp) == resolved_fingerprint(info.node, state, scope.redactor).as_ref()
            });
        if !fresh {
            running.insert(id.clone());
            run.push(id.clone());
        }
    }
    let create_before_destroy = create_before_destroy_propagated(&nodes);
    Ok(Analysis {
        nodes,
        order,
        deferred,
        run,
        create_before_destroy,
    })
}

/// One IR node with what the engine derived from it.
pub(super) struct NodeInfo<'ir> {
    pub(super) node: &'ir Node,
    /// IR nodes it depends on (references, derived inputs, dependsOn).
    pub(super) deps: BTreeSet<String>,
}

/// The analysis of one evaluation.
pub(super) struct Analysis<'ir> {
    pub(super) nodes: BTreeMap<String, NodeInfo<'ir>>,
    /// Nodes in dependency order.
    pub(super) order: Vec<String>,
    /// Nodes that must wait for a later phase, with what they wait on.
    pub(super) deferred: BTreeMap<String, Vec<Wait>>,
    /// Nodes to run this phase.
    pub(super) run: Vec<String>,
    /// Resources replaced create-before-destroy: their own lifecycle says so, or something
    /// that does depends on them (directly or not).
    pub(super) create_before_destroy: BTreeSet<String>,
}

/// Terraform propagates `create_before_destroy` to a resource's dependencies: a dependency
/// replaced destroy-first would be deleted while the old dependent still uses it. As in
/// Terraform, where the setting belongs to a resource block, it reaches every instance of a
/// `lib.count` / `lib.forEach` block when it reaches one (DESIGN §100): a dependent of `c__0`
/// makes all of `c` create-before-destroy, and what any of them depends on.
fn create_before_destroy_propagated(nodes: &BTreeMap<String, NodeInfo<'_>>) -> BTreeSet<String> {
    let mut blocks: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (id, info) in nodes {
        if let Some(block) = info.node.block() {
            blocks.entry(block).or_default().push(id.as_str());
        }
    }
    let mut marked: BTreeSet<String> = nodes
        .iter()
        .filter(|(_, info)| info.node.lifecycle.create_before_destroy)
        .map(|(id, _)| id.clone())
        .collect();
    let mut todo: Vec<String> = marked.iter().cloned().collect();
    while let Some(id) = todo.pop() {
        let info = &nodes[&id];
        let siblings = info.node.block().map_or(&[][..], |b| &blocks[b][..]);
        let next = info
            .deps
            .iter()
            .map(String::as_str)
            .chain(siblings.iter().copied());
        for dep in next {
            if nodes.contains_key(dep) && marked.insert(dep.to_string()) {
                todo.push(dep.to_string());
            }
        }
    }
    marked
}

/// What removing a recorded object does: delete it, or forget it when its provider's kind
/// cannot delete. An undeclared provider counts as deleting: removing its objects then fails,
/// saying it is undeclared.
pub(super) fn removal(ir: &Ir, r: &crate::state::ResourceState) -> Action {
    if forgotten_by_plan(ir, &r.id) {
        return Action::Forget;
    }
    match ir.providers.get(&r.provider) {
        Some(decl) if !Capabilities::of(&decl.kind).delete => Action::Forget,
        _ => Action::Delete,
    }
}

/// Whether the plan forgets the record at `id` (`lib.removed { destroy = false; }`): it leaves the
/// state, no provider is called, the object is left as it is.
pub(super) fn forgotten_by_plan(ir: &Ir, id: &str) -> bool {
    (ir.removed.iter()).any(|r| r.from == id && r.action == crate::ir::RemovedAction::Forget)
}

/// Those of `ids` (all in state) whose removal is a delete, which needs their provider.
pub(super) fn needing_delete(ir: &Ir, state: &StateFile, ids: &[String]) -> Vec<String> {
    ids.iter()
        .filter(|id| removal(ir, state.get(id).expect("in state")) == Action::Delete)
        .cloned()
        .collect()
}

/// Resources in state that the IR does not declare.
pub(super) fn orphans(ir: &Ir, state: &StateFile) -> Vec<String> {
    let declared: BTreeSet<&str> = ir
        .resources
        .iter()
        .chain(ir.data.iter())
        .map(|n| n.id.as_str())
        .collect();
    state
        .ids()
        .filter(|id| !declared.contains(id))
        .map(str::to_string)
        .collect()
}

/// Everything still waiting: deferred resources and consumers with unresolved leaves.
/// Everything still waiting after `analysis`; `include_ready` adds the resources that were
/// ready to run (when the run stops before running them).
pub(super) fn pending(
    ir: &Ir,
    analysis: &Analysis<'_>,
    include_ready: bool,
) -> Vec<(String, Vec<Wait>)> {
    let mut out: Vec<(String, Vec<Wait>)> = analysis
        .order
        .iter()
        .filter_map(|id| analysis.deferred.get(id).map(|w| (id.clone(), w.clone())))
        .collect();
    if include_ready {
        for id in &analysis.run {
            out.push((id.clone(), Vec::new()));
        }
    }
    for c in &ir.consumers {
        let mut waits = Vec::new();
        collect_derived(&c.value, &mut waits);
        collect_refs_as_waits(&c.value, &mut waits);
        if !waits.is_empty() {
            out.push((c.id.clone(), tidy_waits(waits)));
        }
    }
    out
}

/// Sorts and dedups waits, dropping a plain wait on a resource already named by a Nix wait.
pub(super) fn tidy_waits(mut waits: Vec<Wait>) -> Vec<Wait> {
    waits.sort();
    waits.dedup();
    let via_nix: BTreeSet<String> = waits
        .iter()
        .filter_map(|w| match w {
            Wait::Nix { resource, .. } => Some(resource.clone()),
            _ => None,
        })
        .collect();
    waits.retain(|w| !matches!(w, Wait::Resource(r) if via_nix.contains(r)));
    waits
}

pub(super) fn collect_deps(tree: &Tree, out: &mut BTreeSet<String>) {
    match tree {
        Tree::Ref(r) | Tree::SensitiveRef(r) => {
            out.insert(r.resource.clone());
        }
        Tree::Sensitive(inner) | Tree::Ephemeral(inner) => collect_deps(inner, out),
        Tree::Derived(inputs) => out.extend(inputs.iter().map(|i| i.resource.clone())),
        Tree::List(items) => items.iter().for_each(|t| collect_deps(t, out)),
        Tree::Object(map) => map.values().for_each(|t| collect_deps(t, out)),
        _ => {}
    }
}

pub(super) fn collect_derived(tree: &Tree, out: &mut Vec<Wait>) {
    match tree {
        Tree::Derived(inputs) => out.extend(inputs.iter().map(|i| Wait::Nix {
            resource: i.resource.clone(),
            attribute: i.attr.clone(),
        })),
        Tree::Sensitive(inner) | Tree::Ephemeral(inner) => collect_derived(inner, out),
        Tree::List(items) => items.iter().for_each(|t| collect_derived(t, out)),
        Tree::Object(map) => map.values().for_each(|t| collect_derived(t, out)),
        _ => {}
    }
}

pub(super) fn collect_refs_as_waits(tree: &Tree, out: &mut Vec<Wait>) {
    match tree {
        Tree::Ref(r) => out.push(Wait::Resource(r.resource.clone())),
        Tree::Sensitive(inner) | Tree::Ephemeral(inner) => collect_refs_as_waits(inner, out),
        Tree::List(items) => items.iter().for_each(|t| collect_refs_as_waits(t, out)),
        Tree::Object(map) => map.values().for_each(|t| collect_refs_as_waits(t, out)),
        _ => {}
    }
}

/// What a resource's turn depends on, with references resolved from `state`: two equal
/// fingerprints mean running it again would send the provider the same thing. `None` while
/// something it references is not recorded yet.
pub(super) fn resolved_fingerprint(
    node: &Node,
    state: &StateFile,
    redactor: &Redactor,
) -> Option<String> {
    let lookup = |id: &str| match state.get(id) {
        Some(r) => Lookup::Settled(&r.attributes, &r.sensitive_paths),
        None => Lookup::Pending,
    };
    let resolved = resolve(&node.config, &lookup, redactor);
    if !resolved.waits.is_empty() {
        return None;
    }
    Some(format!(
        "{:?}|{:?}|{:?}|{}",
        resolved.value, node.depends_on, node.lifecycle, node.provider
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Alpha tokens: (name, key of a `lib.count` instance, createBeforeDestroy).
    fn nodes(spec: &[(&str, Option<u64>, bool)]) -> Vec<Node> {
        let resources: Vec<serde_json::Value> = spec
            .iter()
            .map(|(name, key, cbd)| {
                let mut n = serde_json::json!({
                    "id": format!("alpha.alpha_token.{name}"), "provider": "alpha",
                    "type": "alpha_token", "name": name, "config": {},
                    "meta": {"dependsOn": [], "lifecycle": {"createBeforeDestroy": cbd}},
                });
                if let Some(k) = key {
                    n["key"] = serde_json::json!(k);
                }
                n
            })
            .collect();
        let doc = serde_json::json!({"schemaVersion": 1,
            "providers": {"alpha": {"source": "provider-alpha", "config": {}}}, "resources": resources,
            "edges": [], "nixConsumers": []});
        crate::ir::parse_value(&doc).expect("valid IR").resources
    }

    fn propagated(nodes: &[Node], deps: &[(&str, &str)]) -> Vec<String> {
        let id = |n: &str| format!("alpha.alpha_token.{n}");
        let infos = nodes
            .iter()
            .map(|n| {
                let deps = (deps.iter().filter(|(from, _)| id(from) == n.id))
                    .map(|(_, to)| id(to))
                    .collect();
                (n.id.clone(), NodeInfo { node: n, deps })
            })
            .collect();
        let short = |s: String| s.trim_start_matches("alpha.alpha_token.").to_string();
        create_before_destroy_propagated(&infos)
            .into_iter()
            .map(short)
            .collect()
    }

    /// Issue 50 (seed 303): a create-before-destroy resource that reads one instance of a
    /// `lib.count` block makes the whole block create-before-destroy, as Terraform's resource
    /// block does, and what any instance depends on; a plain resource named like an instance
    /// (no key) is no part of the block.
    #[test]
    fn create_before_destroy_reaches_a_whole_block() {
        let n = nodes(&[
            ("c__0", Some(0), false),
            ("c__1", Some(1), false),
            ("c__2", Some(2), false),
            ("c__x", None, false),
            ("r4", None, true),
            ("d", None, false),
            ("e", None, false),
        ]);
        let deps = [("r4", "c__0"), ("c__2", "d")];
        assert_eq!(propagated(&n, &deps), ["c__0", "c__1", "c__2", "d", "r4"]);
        // Without a create-before-destroy dependent, nothing is.
        let n = nodes(&[
            ("c__0", Some(0), false),
            ("c__1", Some(1), false),
            ("r4", None, false),
        ]);
        assert!(propagated(&n, &[("r4", "c__0")]).is_empty());
        // One instance's own setting (its function chose it by index) reaches its siblings.
        let n = nodes(&[("c__0", Some(0), false), ("c__1", Some(1), true)]);
        assert_eq!(propagated(&n, &[]), ["c__0", "c__1"]);
    }
}
