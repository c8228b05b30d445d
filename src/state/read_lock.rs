//! The state lock taken by a run that only reads: `plan` holds it so that it never plans
//! against a state an apply is changing, and is refused naming the holder while one runs (as
//! Terraform's and OpenTofu's `plan` lock the state).
//!
//! Owns: taking the backend's lock without opening its store for writing (no journal replayed,
//! no rescue folded, no compaction: a plan writes nothing but the lock record) and letting it go
//! on drop. Not: the lock's rules (`lock`, `s3::lock`), reading the state (`Backend::read_only`).

use std::time::Duration;

use super::file::StatePaths;
use super::lock::FileLock;
use super::{Backend, LockHolder, StateError};

/// A lock held for reading; released when dropped. Neither is held when no run ever opened
/// this local state for writing (it has no lock file): there is neither a state to protect nor
/// a writer to wait for, and a plan creates no file beside it.
pub(crate) struct ReadLock {
    _local: Option<FileLock>,
    _remote: Option<super::s3::HeldAlone>,
}

impl Backend {
    /// Takes the state's lock for `holder`, who reads, waiting up to `wait` while a writer
    /// holds it (`None`: try once, refused with the holder named).
    pub(crate) fn lock_to_read(
        &self,
        holder: LockHolder,
        wait: Option<Duration>,
    ) -> Result<ReadLock, StateError> {
        let (mut local, mut remote) = (None, None);
        match self {
            Backend::Local { path, .. } => {
                let paths = StatePaths::resolve(path)?;
                if paths.lock.symlink_metadata().is_ok() {
                    local = Some(FileLock::acquire(&paths.lock, holder, wait)?);
                }
            }
            Backend::S3 { backend, .. } => {
                remote = Some(super::s3::HeldAlone::acquire(backend, holder, wait)?);
            }
        }
        Ok(ReadLock {
            _local: local,
            _remote: remote,
        })
    }
}
