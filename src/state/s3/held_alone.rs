//! The remote lock held on its own, without opening the store: what a reader that must not
//! overlap a writer (`plan`) holds while it reads the state.
//!
//! Owns: taking the lock object with the usual wait and refusal, and releasing it (only while it
//! is still ours) when dropped. Not: reading or writing the state (`store`), the lock object's
//! rules (`lock`).

use std::time::Duration;

use super::client::Client;
use super::config::S3Backend;
use super::lock::{self, HeldLock};
use super::remote::Remote;
use crate::state::{LockHolder, StateError};

/// The lock of a remote state, held until dropped.
pub(crate) struct HeldAlone {
    client: Client,
    held: HeldLock,
    url: String,
}

impl HeldAlone {
    /// Takes the lock of `backend`'s state for `holder`, waiting up to `wait` while another run
    /// holds it (`None`: try once).
    pub(crate) fn acquire(
        backend: &S3Backend,
        holder: LockHolder,
        wait: Option<Duration>,
    ) -> Result<HeldAlone, StateError> {
        let remote = Remote::new(backend)?;
        let held = lock::acquire(&remote.client, &remote.lock_key(), holder, wait)?;
        Ok(HeldAlone {
            client: remote.client,
            held,
            url: remote.url,
        })
    }
}

impl Drop for HeldAlone {
    fn drop(&mut self) {
        match lock::release(&self.client, &self.held) {
            Ok(None) => {}
            Ok(Some(warning)) => log::warn!("{warning}"),
            Err(e) => log::warn!(
                "could not release the lock of {}: {e}; `nivis force-unlock {}` removes it",
                self.url,
                self.held.holder.id
            ),
        }
    }
}
