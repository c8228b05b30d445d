//! A dependency graph over string ids: ordering, cycles, and reachability.
//!
//! Owns: nodes and "depends on" edges, cycle search that names every member of each cycle,
//! topological order, and the closure of dependencies (for `--target`) or of dependents.
//! Not: what a node means, nor where edges come from (the engine builds them from the IR and
//! from state).

use std::collections::{BTreeMap, BTreeSet};

/// A directed graph in which an edge `a -> b` means "a depends on b".
#[derive(Debug, Clone, Default)]
pub(crate) struct Graph {
    index: BTreeMap<String, usize>,
    ids: Vec<String>,
    deps: Vec<BTreeSet<usize>>,
    dependents: Vec<BTreeSet<usize>>,
}

impl Graph {
    /// An empty graph.
    pub(crate) fn new() -> Self {
        Graph::default()
    }

    /// Adds a node (idempotent) and returns its index.
    pub(crate) fn add_node(&mut self, id: &str) -> usize {
        if let Some(&i) = self.index.get(id) {
            return i;
        }
        let i = self.ids.len();
        self.index.insert(id.to_string(), i);
        self.ids.push(id.to_string());
        self.deps.push(BTreeSet::new());
        self.dependents.push(BTreeSet::new());
        i
    }

    /// Records that `from` depends on `on`. Both are added if missing. Self-edges are kept
    /// (they are cycles of one).
    pub(crate) fn add_dependency(&mut self, from: &str, on: &str) {
        let a = self.add_node(from);
        let b = self.add_node(on);
        self.deps[a].insert(b);
        self.dependents[b].insert(a);
    }

    /// The index of an id.
    pub(crate) fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// The id at an index.
    pub(crate) fn id(&self, i: usize) -> &str {
        &self.ids[i]
    }

    /// Every cycle (strongly connected component of more than one node, or a self-loop),
    /// each as sorted ids. Empty when the graph is acyclic.
    pub(crate) fn cycles(&self) -> Vec<Vec<String>> {
        // Tarjan's algorithm, iterative so deep chains cannot overflow the stack.
        let n = self.ids.len();
        let mut index = vec![usize::MAX; n];
        let mut low = vec![0; n];
        let mut on_stack = vec![false; n];
        let mut stack = Vec::new();
        let mut next = 0;
        let mut out = Vec::new();
        for root in 0..n {
            if index[root] != usize::MAX {
                continue;
            }
            let mut work: Vec<(usize, Vec<usize>)> = Vec::new();
            index[root] = next;
            low[root] = next;
            next += 1;
            stack.push(root);
            on_stack[root] = true;
            work.push((root, self.deps[root].iter().copied().collect()));
            while let Some((v, pending)) = work.last_mut() {
                let v = *v;
                if let Some(w) = pending.pop() {
                    if index[w] == usize::MAX {
                        index[w] = next;
                        low[w] = next;
                        next += 1;
                        stack.push(w);
                        on_stack[w] = true;
                        work.push((w, self.deps[w].iter().copied().collect()));
                    } else if on_stack[w] {
                        low[v] = low[v].min(index[w]);
                    }
                    continue;
                }
                work.pop();
                if let Some((parent, _)) = work.last() {
                    low[*parent] = low[*parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut component = Vec::new();
                    loop {
                        let w = stack.pop().expect("tarjan stack");
                        on_stack[w] = false;
                        component.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if component.len() > 1 || self.deps[v].contains(&v) {
                        let mut ids: Vec<String> =
                            component.iter().map(|&i| self.ids[i].clone()).collect();
                        ids.sort();
                        out.push(ids);
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// Nodes in an order where every node comes after its dependencies (ties broken by id, so
    /// the order is deterministic). `None` if there is a cycle.
    pub(crate) fn topological_order(&self) -> Option<Vec<usize>> {
        let n = self.ids.len();
        let mut remaining: Vec<usize> = (0..n).map(|i| self.deps[i].len()).collect();
        let mut ready: BTreeSet<(String, usize)> = (0..n)
            .filter(|&i| remaining[i] == 0)
            .map(|i| (self.ids[i].clone(), i))
            .collect();
        let mut order = Vec::with_capacity(n);
        while let Some(first) = ready.iter().next().cloned() {
            ready.remove(&first);
            let i = first.1;
            order.push(i);
            for &d in &self.dependents[i] {
                remaining[d] -= 1;
                if remaining[d] == 0 {
                    ready.insert((self.ids[d].clone(), d));
                }
            }
        }
        (order.len() == n).then_some(order)
    }

    /// The given nodes plus everything they depend on, transitively.
    pub(crate) fn with_dependencies(&self, roots: &[usize]) -> BTreeSet<usize> {
        self.closure(roots, &self.deps)
    }

    /// The given nodes plus everything that depends on them, transitively.
    pub(crate) fn with_dependents(&self, roots: &[usize]) -> BTreeSet<usize> {
        self.closure(roots, &self.dependents)
    }

    fn closure(&self, roots: &[usize], edges: &[BTreeSet<usize>]) -> BTreeSet<usize> {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<usize> = roots.to_vec();
        while let Some(i) = todo.pop() {
            if seen.insert(i) {
                todo.extend(edges[i].iter().copied());
            }
        }
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain() -> Graph {
        let mut g = Graph::new();
        g.add_dependency("c", "b");
        g.add_dependency("b", "a");
        g.add_node("x");
        g
    }

    #[test]
    fn topological_order_puts_dependencies_first() {
        let g = chain();
        let order: Vec<&str> = g
            .topological_order()
            .unwrap()
            .into_iter()
            .map(|i| g.id(i))
            .collect();
        assert_eq!(order, ["a", "b", "c", "x"]);
    }

    #[test]
    fn cycles_name_every_member() {
        let mut g = chain();
        g.add_dependency("a", "c");
        g.add_dependency("y", "y");
        assert_eq!(g.cycles(), vec![vec!["a", "b", "c"], vec!["y"]]);
        assert!(g.topological_order().is_none());
        assert!(chain().cycles().is_empty());
    }

    #[test]
    fn closures() {
        let g = chain();
        let b = g.index_of("b").unwrap();
        let deps: BTreeSet<&str> = g
            .with_dependencies(&[b])
            .into_iter()
            .map(|i| g.id(i))
            .collect();
        assert_eq!(deps, ["a", "b"].into_iter().collect());
        let dependents: BTreeSet<&str> = g
            .with_dependents(&[b])
            .into_iter()
            .map(|i| g.id(i))
            .collect();
        assert_eq!(dependents, ["b", "c"].into_iter().collect());
    }

    #[test]
    fn deep_chain_has_no_stack_overflow() {
        let mut g = Graph::new();
        for i in 1..100_000 {
            g.add_dependency(&format!("n{i}"), &format!("n{}", i - 1));
        }
        assert!(g.cycles().is_empty());
        assert_eq!(g.topological_order().unwrap().len(), 100_000);
    }
}
