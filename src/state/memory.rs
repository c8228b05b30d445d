//! An in-memory [`StateStore`]: for tests, and for plans that must not touch the disk.

use super::error::StateError;
use super::model::{Change, StateFile};
use super::StateStore;

/// A [`StateStore`] that keeps the state in memory only; commits never fail.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryStore {
    state: StateFile,
}

impl MemoryStore {
    /// An empty store with a fresh lineage.
    pub fn new() -> MemoryStore {
        MemoryStore::from_state(StateFile::empty())
    }

    /// A store starting from `state` (e.g. one read with [`Store::read_only`](super::Store::read_only)).
    pub fn from_state(state: StateFile) -> MemoryStore {
        MemoryStore { state }
    }

    /// Gives back the state.
    pub fn into_state(self) -> StateFile {
        self.state
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

    fn commit(&mut self, changes: &[Change]) -> Result<(), StateError> {
        for change in changes {
            self.state.apply(change);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::conformance;

    #[test]
    fn memory_store_conforms() {
        conformance(&mut MemoryStore::new());
    }
}
