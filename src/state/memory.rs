//! An in-memory [`StateStore`]: for tests, and for plans that must not touch the disk. It is a
//! [`LockedStore`] too (nothing to lock, nothing that can fail), so a run can hold it where it
//! would hold a backend's store.

use super::error::StateError;
use super::model::{Change, StateFile};
use super::{LockedStore, Mutation, StateStore};

/// Where a [`MemoryStore`] copies its state after every commit, so that the state outlives the
/// store (the engine closes the store it was given; a test reads the mirror afterwards).
pub type Mirror = std::sync::Arc<std::sync::Mutex<Option<StateFile>>>;

/// A [`StateStore`] that keeps the state in memory only; commits never fail.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    state: StateFile,
    mirror: Option<Mirror>,
}

impl PartialEq for MemoryStore {
    fn eq(&self, other: &MemoryStore) -> bool {
        self.state == other.state
    }
}

impl MemoryStore {
    /// An empty store with a fresh lineage.
    pub(crate) fn new() -> MemoryStore {
        MemoryStore::from_state(StateFile::empty())
    }

    /// A store starting from `state` (e.g. one read with [`Store::read_only`](super::Store::read_only)).
    pub(crate) fn from_state(state: StateFile) -> MemoryStore {
        MemoryStore {
            state,
            mirror: None,
        }
    }

    /// A store starting from `state` whose every commit is copied to `mirror`.
    pub fn mirrored(state: StateFile, mirror: Mirror) -> MemoryStore {
        MemoryStore {
            state,
            mirror: Some(mirror),
        }
    }

    /// Gives back the state.
    #[cfg(test)] // used by the unit tests only
    pub(crate) fn into_state(self) -> StateFile {
        self.state
    }

    /// Applies `changes` to this copy only (never to the mirror): what a plan previews moves
    /// and imports on. Needs no [`Mutation`]: nothing outlives the copy.
    pub(crate) fn apply(&mut self, changes: &[Change]) {
        for change in changes {
            self.state.apply(change);
        }
    }
}

impl Default for MemoryStore {
    fn default() -> MemoryStore {
        MemoryStore::new()
    }
}

impl StateStore for MemoryStore {
    fn state(&self) -> &StateFile {
        &self.state
    }

    fn commit(&mut self, changes: &[Change], _mutation: Mutation) -> Result<(), StateError> {
        self.apply(changes);
        if let Some(mirror) = &self.mirror {
            *mirror.lock().unwrap_or_else(|e| e.into_inner()) = Some(self.state.clone());
        }
        Ok(())
    }
}

impl LockedStore for MemoryStore {
    fn close(self: Box<Self>) -> Result<(), StateError> {
        Ok(())
    }

    fn recommit(&mut self, changes: &[Change], mutation: Mutation) -> Result<(), StateError> {
        self.commit(changes, mutation)
    }

    /// Commits never fail here, so there is never anything to rescue; should it be asked, it
    /// keeps the changes the only way it can, by taking them.
    fn rescue(
        &mut self,
        changes: &[Change],
        mutation: Mutation,
    ) -> Result<std::path::PathBuf, StateError> {
        self.commit(changes, mutation)?;
        Ok(std::path::PathBuf::from("(memory)"))
    }

    fn replace(&mut self, next: StateFile, mutation: Mutation) -> Result<(), StateError> {
        let serial = self.state.serial.max(next.serial) + 1;
        self.state = next;
        self.state.serial = serial;
        self.commit(&[], mutation)
    }

    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }

    fn remedy(&self) -> String {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::conformance;

    #[test]
    fn memory_store_conforms() {
        conformance(&mut MemoryStore::new(), Mutation::for_tests());
    }

    #[test]
    fn a_preview_changes_the_copy_and_never_the_mirror() {
        let mirror = Mirror::default();
        let mut store = MemoryStore::mirrored(StateFile::empty(), mirror.clone());
        let put = |id: &str| {
            Change::Put(crate::state::ResourceState::new(
                id,
                crate::state::ResourceKind::Managed,
                "null",
                "registry.terraform.io/hashicorp/null",
                "null_resource",
                serde_json::json!({ "id": id }),
            ))
        };
        store.apply(&[put("previewed")]);
        assert!(store.state().contains("previewed"));
        assert!(
            mirror.lock().unwrap().is_none(),
            "a preview reached the mirror"
        );
        store
            .commit(&[put("recorded")], Mutation::for_tests())
            .unwrap();
        let mirrored = mirror.lock().unwrap().clone().unwrap();
        assert!(mirrored.contains("recorded"));
    }
}
