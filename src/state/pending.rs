//! Pending operations: the durable note that a create, replace or delete was about to be sent
//! to a provider (DESIGN §97).
//!
//! Owns the record's shape ([`PendingOperation`]), the action it names ([`PendingAction`]) and
//! this process's run identity ([`this_run`]). A pending operation is written into the state's
//! journal (as [`super::Change::Intend`]) before the request leaves, and cleared by the commit of
//! its result: a record of the object (a `put`) or an explicit [`super::Change::Settle`]. One
//! still there when a run opens the state means a run stopped (kill -9, power loss, a second
//! Ctrl-C, a lost lock) while the provider had the request: the object may exist, unrecorded.
//! Not here: when to write one (the engine's node code) or what the user is told (`render`).

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::holder::{format_utc, host_name, unix_now};

/// The operation that was in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PendingAction {
    /// A new object was being created.
    Create,
    /// The object was being replaced (its old object deleted and a new one created, in either
    /// order).
    Replace,
    /// The object was being deleted.
    Delete,
}

impl PendingAction {
    /// The word a message uses: `create`, `replace`, `delete`.
    pub(crate) fn word(self) -> &'static str {
        match self {
            PendingAction::Create => "create",
            PendingAction::Replace => "replace",
            PendingAction::Delete => "delete",
        }
    }
}

/// One operation sent to a provider whose result is not recorded yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingOperation {
    /// The resource's address (its state id).
    pub(crate) address: String,
    /// What was being done to it.
    pub(crate) action: PendingAction,
    /// The IR id of its provider.
    pub(crate) provider: String,
    /// The resource type (`null_resource`).
    pub(crate) type_name: String,
    /// SHA-256 of the request's planned object (canonical JSON): tells a retried request from
    /// a different one.
    pub(crate) digest: String,
    /// The run that sent it ([`this_run`]).
    pub(crate) run: RunId,
}

/// Who sent a request: an id unique to the process, its host and process id, and when it
/// started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunId {
    /// Eight hex digits, unique enough to tell runs apart in a message.
    pub(crate) id: String,
    /// The host it ran on.
    pub(crate) host: String,
    /// Its process id.
    pub(crate) pid: u32,
    /// When it started, UTC (`2026-11-28 18:50:01 UTC`).
    pub(crate) started: String,
}

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "run {} (started {} on {}, pid {})",
            self.id, self.started, self.host, self.pid
        )
    }
}

/// This process's run identity, made once.
pub(crate) fn this_run() -> &'static RunId {
    static RUN: OnceLock<RunId> = OnceLock::new();
    RUN.get_or_init(|| RunId {
        id: super::model::new_lineage()[..8].to_string(),
        host: host_name(),
        pid: std::process::id(),
        started: format_utc(unix_now()),
    })
}

impl PendingOperation {
    /// The sentence a plan or apply opens with: `a create of ADDR was in flight when run R
    /// stopped: the object may exist`.
    pub(crate) fn summary(&self) -> String {
        let what = match self.action {
            PendingAction::Delete => "the object may still exist, or be gone",
            PendingAction::Create | PendingAction::Replace => "the object may exist",
        };
        format!(
            "a {} of {} was in flight when {} stopped: {what}",
            self.action.word(),
            self.address,
            self.run
        )
    }

    /// What to do about it.
    pub(crate) fn remedy(&self) -> String {
        format!(
            "Look for the object with the provider ({} {}). If it exists, record it with `nivis \
             import {} ID` (ID as the provider names it); if it does not, say so with `nivis \
             state resolve {} --absent`. Until then Nivis does not create {} again.",
            self.provider, self.type_name, self.address, self.address, self.address
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testutil::res;
    use crate::state::{Change, StateFile};

    fn op(address: &str) -> PendingOperation {
        PendingOperation {
            address: address.into(),
            action: PendingAction::Create,
            provider: "null".into(),
            type_name: "null_resource".into(),
            digest: "ab".repeat(32),
            run: this_run().clone(),
        }
    }

    #[test]
    fn an_intent_is_cleared_by_a_record_of_its_object_or_a_settle_and_not_by_a_remove() {
        let mut state = StateFile::empty();
        state.apply(&Change::Intend(op("a")));
        state.apply(&Change::Intend(op("b")));
        assert_eq!(state.pending.len(), 2);
        // The first half of a replace (its old object gone) leaves the create pending.
        state.apply(&Change::Remove("a".into()));
        assert!(state.pending.contains_key("a"));
        state.apply(&Change::Put(res("a", 1)));
        assert!(
            !state.pending.contains_key("a"),
            "the result's record clears it"
        );
        state.apply(&Change::Settle("b".into()));
        assert!(state.pending.is_empty());
    }

    #[test]
    fn a_state_rebuilt_from_its_changes_keeps_its_records_and_its_pending_operations() {
        let mut state = StateFile::empty();
        state.apply(&Change::Put(res("kept", 1)));
        state.apply(&Change::Intend(op("in-flight")));
        let mut rebuilt = StateFile::empty();
        for change in state.rebuilding_changes() {
            rebuilt.apply(&change);
        }
        assert_eq!(rebuilt.resources, state.resources);
        assert_eq!(
            rebuilt.pending, state.pending,
            "a saved state still names them"
        );
    }

    #[test]
    fn pending_operations_round_trip_through_a_snapshot_and_a_journal_line() {
        let mut state = StateFile::empty();
        state.apply(&Change::Intend(op("a")));
        let text = serde_json::to_string(&state).unwrap();
        assert!(text.contains("\"pendingOperations\""), "{text}");
        let back: StateFile = serde_json::from_str(&text).unwrap();
        assert_eq!(back, state);
        let empty = serde_json::to_string(&StateFile::empty()).unwrap();
        assert!(
            !empty.contains("pendingOperations"),
            "absent when none: {empty}"
        );
        let line = serde_json::to_string(&Change::Intend(op("a"))).unwrap();
        assert!(line.starts_with("{\"intend\":{\"address\":\"a\""), "{line}");
        let change: Change = serde_json::from_str(&line).unwrap();
        assert_eq!(change, Change::Intend(op("a")));
        assert_eq!(change.id(), "a");
    }

    #[test]
    fn the_summary_names_the_action_the_address_and_the_run() {
        let text = op("lxd_container.c3").summary();
        assert!(
            text.starts_with("a create of lxd_container.c3 was in flight when run "),
            "{text}"
        );
        assert!(text.ends_with("stopped: the object may exist"), "{text}");
    }
}
