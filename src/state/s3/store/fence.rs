//! Fencing (DESIGN §58): a writer reads its S3 lock after every journal segment it writes and,
//! past [`FENCE_BOUND`] on the boot clock, before a write or a dispatch, so that a writer paused
//! while its lock was forced open writes and starts nothing more.
//!
//! Not: taking or releasing the lock (`s3::lock`), nor what is rescued (`store`).

use std::sync::PoisonError;
use std::time::Duration;

use super::super::lock;
use super::super::RemoteError;
use super::S3Store;
use crate::state::{LockHolder, StateError};

/// How long a writer may go without seeing its lock before it reads the lock again before
/// dispatching or writing (it always reads it after a write). Measured on the boot clock, which
/// keeps counting while the process is stopped (SIGSTOP) or the machine suspended: a writer
/// that was paused longer than this looks again before it starts anything.
const FENCE_BOUND: Duration = Duration::from_millis(250);

/// The fencing state of a writer (see [`S3Store::fence`]).
#[derive(Debug, Default)]
pub(super) struct Fence {
    /// Boot-clock time at which the last successful lock check started.
    pub(super) checked: Duration,
    /// The lock was found taken away, and by whom (`Some(None)`: nobody holds it now).
    pub(super) lost: Option<Option<LockHolder>>,
}

/// The boot clock (`CLOCK_BOOTTIME`): monotonic, and counts suspend and stopped time.
pub(super) fn boot_clock() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own; CLOCK_BOOTTIME exists on Linux >= 2.6.39.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

impl S3Store {
    /// Whether the lock was found taken away, and by whom.
    pub(super) fn lost(&self) -> Option<Option<LockHolder>> {
        self.fence
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .lost
            .clone()
    }

    /// The fencing check: once [`FENCE_BOUND`] has passed since the lock was last seen to be ours
    /// (or `always`), reads it again. Fails with [`RemoteError::LockLost`] from the moment it is
    /// not ours any more.
    pub(crate) fn fence(&self, always: bool) -> Result<(), StateError> {
        let mut fence = self.fence.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(held) = &self.lock else {
            return Ok(());
        };
        let lost = |now: &Option<LockHolder>| -> StateError {
            RemoteError::LockLost {
                state: self.remote.url.clone(),
                id: held.holder.id.clone(),
                now: now.clone().map(Box::new),
            }
            .into()
        };
        if let Some(now) = &fence.lost {
            return Err(lost(now));
        }
        let started = boot_clock();
        if !always && started.saturating_sub(fence.checked) < FENCE_BOUND {
            return Ok(());
        }
        let found =
            lock::still_ours(&self.remote.client, held).map_err(|e| self.fence_unreadable(e))?;
        log::debug!(
            "fence: lock {} of {} checked after {:?}: {}",
            held.holder.id,
            self.remote.url,
            started.saturating_sub(fence.checked),
            if found.is_ok() { "ours" } else { "lost" }
        );
        match found {
            Ok(()) => {
                fence.checked = started;
                Ok(())
            }
            Err(now) => {
                let e = lost(&now);
                fence.lost = Some(now);
                Err(e)
            }
        }
    }

    /// A lock that could not be read while fencing a write: the bucket is unreachable, so the
    /// results cannot be recorded, said the way a failed segment write says it (whichever of the
    /// two requests the outage hit first, the user reads one message and gets one remedy).
    fn fence_unreadable(&self, e: StateError) -> StateError {
        match e {
            StateError::Remote(r) => match *r {
                RemoteError::S3 { what, error } => RemoteError::s3(
                    format!("record results in {} ({what})", self.remote.url),
                    error,
                )
                .into(),
                other => StateError::Remote(Box::new(other)),
            },
            other => other,
        }
    }

    /// Why to start nothing more: the lock was taken away (checked as [`S3Store::fence`]
    /// does; a failed check is left to the next write).
    pub fn lock_lost(&self) -> Option<String> {
        if let Some(vanished) = &self.vanished {
            return Some(vanished.clone());
        }
        match self.fence(false) {
            Err(e @ StateError::Remote(_)) if self.lost().is_some() => Some(e.to_string()),
            _ => None,
        }
    }
}
