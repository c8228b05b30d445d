//! The scheduler's order for one phase beyond the references: a resource runs before another
//! that its record depends on and its configuration no longer reads (DESIGN §110).
//!
//! Not: the references themselves (the analysis's `deps`), which also decide skipping,
//! recorded dependencies, waves and the listing; this only orders.

use std::collections::HashMap;

/// The scheduler's order: the references (`deps`), and one edge that is not a reference
/// (DESIGN §110). A resource whose record depends on another that its configuration no longer
/// reads runs before that other one, so a destroy-first replacement deletes the old object
/// only after its former reader has stopped using it (LXD refuses to delete a profile a
/// container still names), as an orphan is deleted only at the fixpoint. No edge where the
/// reader reaches the other (through references or edges added before): that would close a
/// cycle.
/// `ids` are the phase's jobs, `index` each one's position; `recorded` gives the dependencies a
/// resource's record holds (none for a new resource).
pub(super) fn former_readers_first<'a>(
    ids: &[String],
    index: &HashMap<&str, usize>,
    deps: &[Vec<usize>],
    recorded: impl Fn(&str) -> Option<&'a [String]>,
) -> Vec<Vec<usize>> {
    let mut order = deps.to_vec();
    for (reader, id) in ids.iter().enumerate() {
        let Some(was_read_all) = recorded(id) else {
            continue;
        };
        for was_read in was_read_all {
            let Some(&read) = index.get(was_read.as_str()) else {
                continue;
            };
            // A reader that still reads it directly (most records) needs no search. Checked
            // against the edges added so far too: records written by different runs could
            // otherwise ask for a cycle.
            let still_reads = order[reader].contains(&read);
            if read != reader
                && !still_reads
                && !reaches(&order, reader, read)
                && !order[read].contains(&reader)
            {
                order[read].push(reader);
            }
        }
    }
    order
}

/// Whether `from` depends on `to` through `deps`, directly or not.
fn reaches(deps: &[Vec<usize>], from: usize, to: usize) -> bool {
    let mut seen = vec![false; deps.len()];
    let mut todo = vec![from];
    while let Some(i) = todo.pop() {
        if i == to {
            return true;
        }
        if !std::mem::replace(&mut seen[i], true) {
            todo.extend(deps[i].iter().copied());
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `former_readers_first` over the jobs `names` with references `deps`, whose records
    /// depend on what `records` lists.
    fn order_of(
        names: &[&str],
        deps: &[Vec<usize>],
        records: &[(&str, &[&str])],
    ) -> Vec<Vec<usize>> {
        let ids: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let index: HashMap<&str, usize> = (ids.iter().enumerate())
            .map(|(i, id)| (id.as_str(), i))
            .collect();
        let records: Vec<(&str, Vec<String>)> = (records.iter())
            .map(|(id, read)| (*id, read.iter().map(|r| r.to_string()).collect()))
            .collect();
        let recorded = |id: &str| {
            (records.iter())
                .find(|(r, _)| *r == id)
                .map(|(_, d)| d.as_slice())
        };
        former_readers_first(&ids, &index, deps, recorded)
    }

    #[test]
    fn a_former_reader_runs_first_and_a_current_one_keeps_its_order() {
        // b no longer reads a; c still does.
        let records: [(&str, &[&str]); 2] = [("b", &["a"]), ("c", &["a"])];
        let order = order_of(&["a", "b", "c"], &[vec![], vec![], vec![0]], &records);
        assert_eq!(order, [vec![1], vec![], vec![0]]);
    }

    #[test]
    fn no_edge_closes_a_cycle() {
        // b reads a through c now: a cannot wait for b.
        let deps = [vec![], vec![2], vec![0]];
        assert_eq!(order_of(&["a", "b", "c"], &deps, &[("b", &["a"])]), deps);
        // Records of different runs that read each other: one edge, not two.
        let records: [(&str, &[&str]); 2] = [("a", &["b"]), ("b", &["a"])];
        let order = order_of(&["a", "b"], &[vec![], vec![]], &records);
        assert_eq!(order.iter().map(Vec::len).sum::<usize>(), 1, "{order:?}");
    }
}
