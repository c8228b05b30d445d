//! The state a run holds: locked for writing, or a read-only snapshot.

#[allow(unused_imports)]
use super::*;

/// State held for a run: locked for writing, or a read-only snapshot.
pub(super) enum StateHolder {
    Locked(Box<dyn LockedStore>),
    ReadOnly(StateFile),
}

impl StateHolder {
    pub(super) fn state(&self) -> &StateFile {
        match self {
            StateHolder::Locked(s) => s.state(),
            StateHolder::ReadOnly(s) => s,
        }
    }

    pub(super) fn commit(&mut self, changes: &[Change]) -> Result<(), StateError> {
        match self {
            StateHolder::Locked(s) => s.commit(changes),
            StateHolder::ReadOnly(s) => {
                for c in changes {
                    s.apply(c);
                }
                Ok(())
            }
        }
    }

    pub(super) fn close(self) -> Result<(), StateError> {
        match self {
            StateHolder::Locked(s) => s.close(),
            StateHolder::ReadOnly(_) => Ok(()),
        }
    }

    /// Why the state's filesystem has no room to spare, if so.
    pub(super) fn space_error(&self) -> Option<&StateError> {
        match self {
            StateHolder::Locked(s) => s.space_error(),
            StateHolder::ReadOnly(_) => None,
        }
    }

    pub(super) fn recommit(&mut self, changes: &[Change]) -> Result<(), StateError> {
        match self {
            StateHolder::Locked(s) => s.recommit(changes),
            StateHolder::ReadOnly(_) => self.commit(changes),
        }
    }

    pub(super) fn rescue(&mut self, changes: &[Change]) -> Result<PathBuf, StateError> {
        match self {
            StateHolder::Locked(s) => s.rescue(changes),
            StateHolder::ReadOnly(_) => unreachable!("in-memory commits cannot fail"),
        }
    }

    /// What the user should do after a failed write.
    pub(super) fn remedy(&self) -> String {
        match self {
            StateHolder::Locked(s) => s.remedy(),
            StateHolder::ReadOnly(_) => String::new(),
        }
    }

    /// Closes the state after a run: a run that failed keeps its own error (the close error
    /// is logged); a run that succeeded fails if the close does.
    pub(super) fn close_after<T>(self, result: Result<T, EngineError>) -> Result<T, EngineError> {
        match (result, self.close()) {
            (Ok(v), Ok(())) => Ok(v),
            (Ok(_), Err(e)) => Err(EngineError::State(e)),
            (Err(e), closed) => {
                match closed {
                    // The store refuses writes because of the failure the error already reports.
                    Err(StateError::Poisoned { .. }) if matches!(e, EngineError::StateWrite(_)) => {
                    }
                    Err(c) => log::warn!("closing the state: {c}"),
                    Ok(()) => {}
                }
                Err(e)
            }
        }
    }
}
