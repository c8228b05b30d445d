//! The remote state lock: an object `KEY.lock` created with `If-None-Match: *`.
//!
//! Owns: acquiring it with a wait, releasing only a lock that is still ours (checked by id,
//! deleted with `If-Match` on its ETag), removing it for `force-unlock`, taking over the lock
//! of a run on this machine that is gone when its results wait in the rescue file, the fencing
//! read (`still_ours`) and marking our lock as kept for rescued results (`keep_for`). The object holds a [`LockHolder`] as JSON, the
//! same record the local lock file holds, and `force-unlock` applies the same checks
//! ([`check_force_unlock`]): the id must match, and a holder alive on this host keeps it unless
//! forced. Not: what the lock protects (see `store`).
//!
//! Conditional creation is what OpenTofu's and Terraform's S3 backends use without DynamoDB; it
//! is atomic on AWS S3, MinIO, Ceph RGW and SeaweedFS. Unlike a `flock`, the object outlives a
//! holder that dies, so a killed run leaves its lock behind: `nivis force-unlock ID` removes it
//! after the user has checked that the holder is gone.

use std::path::PathBuf;
use std::time::Duration;

use super::client::{Client, Condition, S3Error};
use super::RemoteError;
use crate::state::holder::{
    check_force_unlock, unix_now, ForceUnlock, KeptFor, Liveness, LockWait,
};
use crate::state::{LockHolder, StateError};

/// A lock this process holds.
#[derive(Debug, Clone)]
pub(super) struct HeldLock {
    pub(crate) key: String,
    pub(crate) holder: LockHolder,
    /// The lock object's ETag as last written or seen by us.
    pub(crate) etag: String,
}

/// The lock object `key`, as found: its holder (`None`: not a lock record) and ETag.
struct Found {
    holder: Option<LockHolder>,
    etag: String,
}

/// The lock object's URL, as errors name it.
fn url(client: &Client, key: &str) -> PathBuf {
    PathBuf::from(format!("s3://{}/{key}", client.bucket()))
}

/// Creates the lock object `key`, waiting up to `wait` while someone else holds it.
pub(super) fn acquire(
    client: &Client,
    key: &str,
    mut holder: LockHolder,
    wait: Option<Duration>,
) -> Result<HeldLock, StateError> {
    let mut waiting = LockWait::new(wait, Duration::from_millis(50), Duration::from_secs(1));
    holder.since = unix_now();
    let body = serde_json::to_vec_pretty(&holder).expect("a lock holder serialises");
    loop {
        let current = match client.put(key, &body, Condition::Absent) {
            Ok(w) => {
                return Ok(HeldLock {
                    key: key.to_string(),
                    holder,
                    etag: w.etag,
                })
            }
            Err(S3Error::PreconditionFailed { attempts, .. }) => {
                let found = read(client, key)?;
                // A retried create that meets our own first attempt.
                if let Some(Found {
                    holder: Some(h),
                    etag,
                }) = &found
                {
                    if attempts > 1 && h.id == holder.id {
                        return Ok(HeldLock {
                            key: key.to_string(),
                            holder,
                            etag: etag.clone(),
                        });
                    }
                }
                found.and_then(|f| f.holder)
            }
            Err(e) => return acquire_failed(client, key, holder, e),
        };
        // Released between our create and our read: try again at once.
        let released = current.is_none() && waiting.waited() < Duration::from_secs(5);
        if !released && !waiting.pause() {
            return Err(StateError::Locked {
                path: url(client, key),
                holder: current.map(Box::new),
                waited: waiting.waited(),
            });
        }
    }
}

/// After a create that failed: its answer may have been lost while the lock object was written
/// (an outage that ate every acknowledgement). A lock object holding our record is ours; if it
/// cannot be read, the error names our lock id, so that `force-unlock` can remove what may
/// have been left behind.
fn acquire_failed(
    client: &Client,
    key: &str,
    holder: LockHolder,
    e: S3Error,
) -> Result<HeldLock, StateError> {
    match read(client, key) {
        Ok(Some(Found {
            holder: Some(h),
            etag,
        })) if h.id == holder.id => Ok(HeldLock {
            key: key.to_string(),
            holder,
            etag,
        }),
        Ok(_) => Err(RemoteError::s3(format!("take the lock {key}"), e).into()),
        Err(_) => Err(RemoteError::s3(
            format!(
                "take the lock {key} (as lock id {}: if a lock object with that id was \
                 left behind, `nivis force-unlock {}` removes it)",
                holder.id, holder.id
            ),
            e,
        )
        .into()),
    }
}

/// Checks that the lock object still holds our record: the fencing check a writer makes before
/// and after a write when it may have been paused (see `store::Fence`). `Err(Some(holder))`: the
/// lock now belongs to `holder`; `Err(None)`: there is no lock (or no readable record).
pub(super) fn still_ours(
    client: &Client,
    held: &HeldLock,
) -> Result<Result<(), Option<LockHolder>>, StateError> {
    Ok(match read(client, &held.key)? {
        Some(Found {
            holder: Some(h), ..
        }) if h.id == held.holder.id => Ok(()),
        Some(found) => Err(found.holder),
        None => Err(None),
    })
}

/// Whether the lock object `key` exists and holds the lock id `id` (a read-only reader asking
/// whether a rescue file is still bound to its lock).
pub(super) fn is_held_by(client: &Client, key: &str, id: &str) -> Result<bool, StateError> {
    Ok(read(client, key)?
        .and_then(|f| f.holder)
        .is_some_and(|h| h.id == id))
}

/// Rewrites our lock record to say that it is kept for `kept` (rescued results), so that every
/// other machine is told where they are and `force-unlock` refuses without `--force`.
pub(super) fn keep_for(
    client: &Client,
    held: &mut HeldLock,
    kept: KeptFor,
) -> Result<(), StateError> {
    let mut holder = held.holder.clone();
    holder.kept = Some(Box::new(kept));
    let body = serde_json::to_vec_pretty(&holder).expect("a lock holder serialises");
    let written = client
        .put(&held.key, &body, Condition::Matches(&held.etag))
        .map_err(|e| RemoteError::s3(format!("mark the lock {} as kept", held.key), e))?;
    held.holder = holder;
    held.etag = written.etag;
    Ok(())
}

/// The lock object `key`, if there is one.
fn read(client: &Client, key: &str) -> Result<Option<Found>, StateError> {
    let Some(obj) = client
        .get(key)
        .map_err(|e| RemoteError::s3(format!("read the lock {key}"), e))?
    else {
        return Ok(None);
    };
    Ok(Some(Found {
        holder: serde_json::from_slice(&obj.body).ok(),
        etag: obj.etag,
    }))
}

/// Deletes the lock if it is still ours. Returns a warning when it is not (it was forced open
/// and taken by someone else meanwhile).
pub(super) fn release(client: &Client, held: &HeldLock) -> Result<Option<String>, StateError> {
    match read(client, &held.key)? {
        Some(Found {
            holder: Some(h),
            etag,
        }) if h.id == held.holder.id => match client.delete(&held.key, Condition::Matches(&etag)) {
            Ok(()) => Ok(None),
            // A retried delete whose first attempt landed (its answer lost) finds no object to
            // match: released. Anything else there is someone else's.
            Err(S3Error::PreconditionFailed { .. }) if read(client, &held.key)?.is_none() => {
                Ok(None)
            }
            Err(e) => Err(RemoteError::s3(format!("release the lock {}", held.key), e).into()),
        },
        Some(found) => Ok(Some(format!(
            "our lock {} was removed while we ran and the state is now locked by another run \
             ({}); left it alone",
            held.holder.id,
            found
                .holder
                .map_or_else(|| "no readable record".to_string(), |h| h.to_string())
        ))),
        None => Ok(Some(format!(
            "our lock {} was removed while we ran (force-unlock?)",
            held.holder.id
        ))),
    }
}

/// `force-unlock ID` for the lock `key`: checks the id and the holder's liveness, asks
/// `confirm`, then deletes the object only if it is still the one checked (`If-Match`).
pub(super) fn force_unlock(
    client: &Client,
    key: &str,
    id: &str,
    force: bool,
    confirm: &mut dyn FnMut(Option<&LockHolder>) -> bool,
) -> Result<ForceUnlock, StateError> {
    let Some(found) = read(client, key)? else {
        return Ok(ForceUnlock::NotLocked);
    };
    check_force_unlock(&url(client, key), id, force, found.holder.as_ref())?;
    if !confirm(found.holder.as_ref()) {
        return Ok(ForceUnlock::Declined);
    }
    match client.delete(key, Condition::Matches(&found.etag)) {
        Ok(()) => Ok(ForceUnlock::Removed {
            holder: found.holder,
        }),
        // The lock changed hands while the user read the question.
        Err(S3Error::PreconditionFailed { .. }) => Err(StateError::LockIdMismatch {
            path: url(client, key),
            given: id.to_string(),
            holder: read(client, key)?.and_then(|f| f.holder).map(Box::new),
        }),
        Err(e) => Err(RemoteError::s3(format!("remove the lock {key}"), e).into()),
    }
}

/// Removes the lock `key` if its holder is gone ([`Liveness::Gone`]: on this host, no process
/// with its pid and start time runs): for a run that finds results of an earlier run in this
/// machine's rescue file, whose writer kept the lock for them. Returns the holder removed.
pub(super) fn take_over(client: &Client, key: &str) -> Result<Option<LockHolder>, StateError> {
    let Some(found) = read(client, key)? else {
        return Ok(None);
    };
    let Some(holder) = found.holder.filter(|h| h.liveness() == Liveness::Gone) else {
        return Ok(None);
    };
    match client.delete(key, Condition::Matches(&found.etag)) {
        Ok(()) => Ok(Some(holder)),
        Err(S3Error::PreconditionFailed { .. }) => Ok(None),
        Err(e) => Err(RemoteError::s3(format!("take over the lock {key}"), e).into()),
    }
}
