//! `nivis graph`: the plan's dependency graph, to look at instead of read.
//!
//! Owns: turning one evaluation's IR into nodes (resources, data sources, consumers) and edges
//! labelled by kind — a provider reference the executor resolves within a phase, a value Nix
//! re-evaluates (a later phase), `dependsOn` — with each node's estimated phase, printed as
//! DOT (phases as clusters) or JSON. Not: planning, nor starting a provider.

use std::collections::BTreeMap;

use serde_json::{json, Value as Json};

use super::args::{GraphArgs, InstallArgs, RunSpec};
use super::{exit, fail, options};
use crate::engine::{Collect, Engine};
use crate::ir::{DependencyKind, Ir};
use crate::render::{self, outln};
use crate::secrets::Redactor;

/// What an edge means for when its dependent can be planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum EdgeKind {
    /// A provider reference (`refAttr`): resolved by the executor in the same phase.
    Reference,
    /// A value Nix computes from another node's output: needs a Nix re-evaluation.
    Nix,
    /// `dependsOn`: order only.
    DependsOn,
}

impl EdgeKind {
    fn name(self) -> &'static str {
        match self {
            EdgeKind::Reference => "reference",
            EdgeKind::Nix => "nix re-evaluation",
            EdgeKind::DependsOn => "dependsOn",
        }
    }
}

/// The graph: nodes by id (with their kind), and edges `dependent -> dependency`.
struct PlanGraph {
    nodes: BTreeMap<String, &'static str>,
    edges: BTreeMap<(String, String), EdgeKind>,
}

/// Runs `nivis graph`.
pub(super) fn run(args: &GraphArgs, redactor: &Redactor) -> i32 {
    let install = InstallArgs::none();
    let spec = RunSpec::for_project(&args.project, &install);
    let opts = match options(&spec, "graph", redactor, None) {
        Ok(o) => o,
        Err(e) => return fail(redactor, &e),
    };
    let mut sink = Collect::default();
    // The graph of the plan's references: with the state's outputs in the ledger, an applied
    // plan's references are values and its edges gone.
    let ir = match Engine::new(opts, &mut sink).declarations_unapplied() {
        Ok(ir) => ir,
        Err(e) => return fail(redactor, &e),
    };
    super::say_warnings(&sink.0, redactor);
    let graph = PlanGraph::of(&ir);
    if args.json {
        outln!("{}", render::json_text(redactor, &graph.to_json(), false));
    } else {
        outln!("{}", render::escape_text(redactor, &graph.to_dot()));
    }
    exit::OK
}

impl PlanGraph {
    fn of(ir: &Ir) -> PlanGraph {
        let mut nodes = BTreeMap::new();
        for n in &ir.resources {
            nodes.insert(n.id.clone(), "resource");
        }
        for n in &ir.data {
            nodes.insert(n.id.clone(), "data");
        }
        let mut edges = BTreeMap::new();
        let mut add = |to: &str, from: &str, kind: EdgeKind| {
            // The strongest reason wins: a Nix edge delays more than a reference.
            let e = edges
                .entry((to.to_string(), from.to_string()))
                .or_insert(kind);
            if kind == EdgeKind::Nix {
                *e = kind;
            }
        };
        for e in &ir.edges {
            let kind = match (&e.reference, e.via.as_str()) {
                (Some(_), _) => EdgeKind::Reference,
                (None, "dependsOn") => EdgeKind::DependsOn,
                (None, _) => EdgeKind::Nix,
            };
            add(&e.to, &e.from, kind);
        }
        for c in &ir.consumers {
            nodes.insert(c.id.clone(), "consumer");
            for d in c.value.dependencies() {
                let kind = match d.kind {
                    DependencyKind::Ref | DependencyKind::SensitiveRef => EdgeKind::Reference,
                    DependencyKind::Derived => EdgeKind::Nix,
                };
                add(&c.id, d.resource, kind);
            }
        }
        PlanGraph { nodes, edges }
    }

    /// The phase each node is first applied in, estimated from the graph alone: one more than
    /// a dependency it reads through Nix, the same as one it references.
    fn phases(&self) -> BTreeMap<&str, u32> {
        let mut phase: BTreeMap<&str, u32> = self.nodes.keys().map(|n| (n.as_str(), 1)).collect();
        // Longest path by relaxation; a cycle (reported by plan) stops at the node count.
        for _ in 0..self.nodes.len() {
            let mut changed = false;
            for ((to, from), kind) in &self.edges {
                let step = u32::from(*kind == EdgeKind::Nix);
                let want = phase.get(from.as_str()).copied().unwrap_or(1) + step;
                if let Some(p) = phase.get_mut(to.as_str()).filter(|p| **p < want) {
                    *p = want;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        phase
    }

    fn to_dot(&self) -> String {
        let phases = self.phases();
        let mut by_phase: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
        for (id, p) in &phases {
            by_phase.entry(*p).or_default().push(id);
        }
        let mut out = String::from("digraph nivis {\n  rankdir=RL;\n  node [shape=box];\n");
        for (p, ids) in &by_phase {
            out.push_str(&format!(
                "  subgraph cluster_phase{p} {{\n    label={};\n",
                dot_id(&format!("phase {p}"))
            ));
            for id in ids {
                let shape = match self.nodes[*id] {
                    "data" => " [shape=ellipse]",
                    "consumer" => " [shape=note]",
                    _ => "",
                };
                out.push_str(&format!("    {}{shape};\n", dot_id(id)));
            }
            out.push_str("  }\n");
        }
        for ((to, from), kind) in &self.edges {
            let style = match kind {
                EdgeKind::Reference => "solid",
                EdgeKind::Nix => "dashed",
                EdgeKind::DependsOn => "dotted",
            };
            out.push_str(&format!(
                "  {} -> {} [label={} style={style}];\n",
                dot_id(to),
                dot_id(from),
                dot_id(kind.name())
            ));
        }
        out.push('}');
        out
    }

    fn to_json(&self) -> Json {
        let phases = self.phases();
        let nodes: Vec<Json> = self
            .nodes
            .iter()
            .map(|(id, kind)| json!({"id": id, "kind": kind, "phase": phases[id.as_str()]}))
            .collect();
        let edges: Vec<Json> = self
            .edges
            .iter()
            .map(|((to, from), kind)| json!({"from": to, "to": from, "kind": kind.name()}))
            .collect();
        json!({"nodes": nodes, "edges": edges})
    }
}

/// A DOT quoted identifier.
fn dot_id(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}
