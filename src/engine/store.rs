//! Where a run's state comes from and how it is let go: the [`StateAccess`] seam (the
//! configured backend in production, memory in the engine's unit tests), and closing a store
//! after a run without hiding the run's own error.
//!
//! A run holds its state as a `LockedStore`: the backend's store, locked, for commands that
//! change things; an in-memory copy (a `MemoryStore`) for `plan` and `validate`, which hold no
//! `Mutation` and so commit nothing: a plan previews moves and imports on the copy
//! (`record::Destination::Previewed`), which never reaches disk.

use std::time::Duration;

use super::EngineError;
use crate::state::{Backend, LockHolder, LockedStore, StateError, StateFile};

/// Opens the state a run works on.
pub trait StateAccess {
    /// The state locked for writing by `holder`, waiting up to `wait` for the lock.
    fn open_locked(
        &self,
        holder: LockHolder,
        wait: Option<Duration>,
    ) -> Result<Box<dyn LockedStore>, StateError>;
    /// A snapshot, read without locking.
    fn read_only(&self) -> Result<StateFile, StateError>;
    /// The environment the plan sees as `ledger.env`.
    fn env(&self) -> &str;
}

impl StateAccess for Backend {
    fn open_locked(
        &self,
        holder: LockHolder,
        wait: Option<Duration>,
    ) -> Result<Box<dyn LockedStore>, StateError> {
        self.open(holder, wait)
    }

    fn read_only(&self) -> Result<StateFile, StateError> {
        Backend::read_only(self)
    }

    fn env(&self) -> &str {
        Backend::env(self)
    }
}

/// Closes the state after a run: a run that failed keeps its own error (the close error is
/// logged); a run that succeeded fails if the close does.
pub(super) fn close_after<T>(
    store: Box<dyn LockedStore>,
    result: Result<T, EngineError>,
) -> Result<T, EngineError> {
    match (result, store.close()) {
        (Ok(v), Ok(())) => Ok(v),
        (Ok(_), Err(e)) => Err(EngineError::State(e)),
        (Err(e), closed) => {
            match closed {
                // The store refuses writes because of the failure the error already reports.
                Err(StateError::Poisoned { .. }) if matches!(e, EngineError::StateWrite(_)) => {}
                Err(c) => log::warn!("closing the state: {c}"),
                Ok(()) => {}
            }
            Err(e)
        }
    }
}
