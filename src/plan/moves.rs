//! Moves: which recorded addresses a list of `from -> to` entries renames.
//!
//! Owns the rule (docs/IR-CONTRACT.md, "Moves"): follow each chain to its end, rename a
//! recorded `from` to that end, refuse a move onto a recorded address or one none of whose
//! addresses is recorded. Not: the state records themselves (`state::StateFile::rename`) or
//! checking the entries' form (the IR's referential layer).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One record to rename: the object at `from` becomes the object of `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rename {
    /// The address the object was recorded at.
    pub(crate) from: String,
    /// The address it moves to.
    pub(crate) to: String,
}

/// Why a move cannot be made. Both name the two addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MoveError {
    /// `from` is recorded and so is `to`: two objects would share one address.
    Occupied {
        /// The address moved from.
        from: String,
        /// The address moved to, already recorded.
        to: String,
    },
    /// Neither `from` nor any address its chain reaches is recorded.
    Missing {
        /// The address moved from, not recorded.
        from: String,
        /// The address moved to.
        to: String,
    },
}

impl fmt::Display for MoveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MoveError::Occupied { from, to } => write!(
                f,
                "cannot move {from} to {to}: {to} is already in state, so two objects would share it. \
                 Keep one: `nivis state rm` the record you no longer manage, or drop the move"
            ),
            MoveError::Missing { from, to } => write!(
                f,
                "cannot move {from} to {to}: neither is in state. If {from} is misspelt, fix it \
                 (`nivis state list` shows what is recorded); if the object never existed here, \
                 remove the move"
            ),
        }
    }
}

/// The renames `moves` make on a state holding `recorded`. An empty state moves nothing and
/// refuses nothing (a fresh deployment of a configuration that carries old moves). The
/// entries are assumed valid IR: each `from` once, no cycle.
pub(crate) fn resolve_moves(
    moves: &[(String, String)],
    recorded: &BTreeSet<String>,
) -> Result<Vec<Rename>, Vec<MoveError>> {
    if recorded.is_empty() {
        return Ok(Vec::new());
    }
    let next: BTreeMap<&str, &str> = moves
        .iter()
        .map(|(f, t)| (f.as_str(), t.as_str()))
        .collect();
    // The addresses after `from` on its chain, ending at a declared resource.
    let chain = |from: &str| {
        let mut out = Vec::new();
        let mut at = from;
        while let Some(&to) = next.get(at) {
            if out.len() > moves.len() {
                break; // a cycle: valid IR has none
            }
            out.push(to);
            at = to;
        }
        out
    };
    let mut renames = Vec::new();
    let mut errors = Vec::new();
    let mut taken: BTreeSet<&str> = BTreeSet::new();
    for (from, to) in moves {
        let after = chain(from);
        if recorded.contains(from) {
            let end = after.last().copied().unwrap_or(to);
            match after
                .iter()
                .find(|a| recorded.contains(**a) || taken.contains(**a))
            {
                Some(occupied) => errors.push(MoveError::Occupied {
                    from: from.clone(),
                    to: occupied.to_string(),
                }),
                None => {
                    taken.insert(end);
                    renames.push(Rename {
                        from: from.clone(),
                        to: end.to_string(),
                    });
                }
            }
        } else if !after.iter().any(|a| recorded.contains(*a))
            && !moves
                .iter()
                .any(|(f, _)| recorded.contains(f) && chain(f).contains(&from.as_str()))
        {
            errors.push(MoveError::Missing {
                from: from.clone(),
                to: to.clone(),
            });
        }
    }
    if errors.is_empty() {
        Ok(renames)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moves(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(f, t)| (f.to_string(), t.to_string()))
            .collect()
    }

    fn state(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn rename(from: &str, to: &str) -> Rename {
        Rename {
            from: from.into(),
            to: to.into(),
        }
    }

    #[test]
    fn a_recorded_from_is_renamed_and_a_done_move_changes_nothing() {
        let m = moves(&[("a.t.old", "a.t.new")]);
        assert_eq!(
            resolve_moves(&m, &state(&["a.t.old", "a.t.other"])),
            Ok(vec![rename("a.t.old", "a.t.new")])
        );
        assert_eq!(resolve_moves(&m, &state(&["a.t.new"])), Ok(vec![]));
    }

    #[test]
    fn chains_resolve_to_their_end_from_any_point() {
        let m = moves(&[("a.t.x", "a.t.y"), ("a.t.y", "a.t.z")]);
        assert_eq!(
            resolve_moves(&m, &state(&["a.t.x"])),
            Ok(vec![rename("a.t.x", "a.t.z")])
        );
        assert_eq!(
            resolve_moves(&m, &state(&["a.t.y"])),
            Ok(vec![rename("a.t.y", "a.t.z")])
        );
        assert_eq!(resolve_moves(&m, &state(&["a.t.z"])), Ok(vec![]));
    }

    #[test]
    fn a_move_onto_a_recorded_address_names_both() {
        let m = moves(&[("a.t.old", "a.t.new")]);
        let err = resolve_moves(&m, &state(&["a.t.old", "a.t.new"])).unwrap_err();
        assert_eq!(
            err,
            vec![MoveError::Occupied {
                from: "a.t.old".into(),
                to: "a.t.new".into()
            }]
        );
        let text = err[0].to_string();
        assert!(
            text.contains("a.t.old") && text.contains("a.t.new"),
            "{text}"
        );
    }

    #[test]
    fn two_moves_onto_one_address_are_refused() {
        let m = moves(&[("a.t.x", "a.t.z"), ("a.t.y", "a.t.z")]);
        let err = resolve_moves(&m, &state(&["a.t.x", "a.t.y"])).unwrap_err();
        assert_eq!(
            err,
            vec![MoveError::Occupied {
                from: "a.t.y".into(),
                to: "a.t.z".into()
            }]
        );
    }

    #[test]
    fn a_move_from_nothing_recorded_names_both_unless_the_state_is_empty() {
        let m = moves(&[("a.t.typo", "a.t.new")]);
        let err = resolve_moves(&m, &state(&["a.t.old"])).unwrap_err();
        assert_eq!(
            err,
            vec![MoveError::Missing {
                from: "a.t.typo".into(),
                to: "a.t.new".into()
            }]
        );
        assert_eq!(resolve_moves(&m, &state(&[])), Ok(vec![]));
    }
}
