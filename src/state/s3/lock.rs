//! The remote state lock: an object `KEY.lock` created with `If-None-Match: *`.
//!
//! Owns: the lock record ([`LockInfo`]: id, who, host, pid, operation, Nivis version, since),
//! acquiring with a wait, releasing only a lock that is still ours (checked by id, deleted with
//! `If-Match` on its ETag), and `force-unlock ID`. Not: what the lock protects (see `store`).
//!
//! Conditional creation is what OpenTofu's and Terraform's S3 backends use without DynamoDB; it
//! is atomic on AWS S3, MinIO, Ceph RGW and SeaweedFS. Unlike a `flock`, the object outlives a
//! holder that dies, so a killed run leaves its lock behind: `nivis force-unlock ID` removes it
//! after the user has checked that the holder is gone.

use std::fmt;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::client::{Client, Condition, S3Error};
use super::RemoteError;
use crate::state::{format_utc, LockHolder, StateError};

/// The content of a lock object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockInfo {
    /// Unique id of this acquisition; `force-unlock` takes it.
    pub id: String,
    /// User name of the holder.
    pub who: String,
    /// Host name of the holder.
    pub host: String,
    /// Process id of the holder, on `host`.
    pub pid: u32,
    /// What the holder runs, e.g. `nivis apply`.
    pub operation: String,
    /// The holder's Nivis version.
    pub version: String,
    /// When it was taken, seconds since the Unix epoch (UTC).
    pub since: u64,
    /// The state it locks (`s3://bucket/key`).
    pub path: String,
}

impl LockInfo {
    /// A fresh record for `holder` locking `path`.
    pub fn new(holder: &LockHolder, path: &str) -> LockInfo {
        LockInfo {
            id: crate::state::new_lineage(),
            who: holder.user.clone(),
            host: holder.host.clone(),
            pid: holder.pid,
            operation: holder.command.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            since: holder.since,
            path: path.to_string(),
        }
    }
}

impl fmt::Display for LockInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "lock {} held by {} on host {} (pid {}), running `{}` with nivis {}, since {}",
            self.id,
            self.who,
            self.host,
            self.pid,
            self.operation,
            self.version,
            format_utc(self.since)
        )
    }
}

/// A lock this process holds.
#[derive(Debug, Clone)]
pub struct HeldLock {
    pub key: String,
    pub info: LockInfo,
}

/// What `force-unlock` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unlocked {
    /// No lock object existed.
    NotLocked,
    /// The lock with the given id was removed.
    Removed(LockInfo),
}

/// Creates the lock object `key`, waiting up to `wait` while someone else holds it.
pub fn acquire(
    client: &Client,
    key: &str,
    info: LockInfo,
    wait: Option<Duration>,
) -> Result<HeldLock, StateError> {
    let start = Instant::now();
    let body = serde_json::to_vec_pretty(&info).expect("lock info serialises");
    let mut pause = Duration::from_millis(50);
    loop {
        let holder = match client.put(key, &body, Condition::Absent) {
            Ok(_) => {
                return Ok(HeldLock {
                    key: key.to_string(),
                    info,
                })
            }
            Err(S3Error::PreconditionFailed { attempts, .. }) => {
                let current = read(client, key)?;
                // A retried create that meets our own first attempt.
                if attempts > 1
                    && current
                        .as_ref()
                        .is_some_and(|(found, _)| found.id == info.id)
                {
                    return Ok(HeldLock {
                        key: key.to_string(),
                        info,
                    });
                }
                current.map(|(found, _)| found)
            }
            Err(e) => return Err(RemoteError::s3(format!("take the lock {key}"), e).into()),
        };
        let waited = start.elapsed();
        match wait {
            Some(wait) if waited < wait => {
                std::thread::sleep(pause.min(wait - waited));
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            // Released between our create and our read: try again at once.
            _ if holder.is_none() && waited < Duration::from_secs(5) => {}
            _ => {
                return Err(RemoteError::Locked {
                    key: format!("s3://{}/{key}", client.bucket()),
                    holder: holder.map(Box::new),
                    waited,
                }
                .into())
            }
        }
    }
}

/// The lock record under `key` and its ETag, if there is one.
pub fn read(client: &Client, key: &str) -> Result<Option<(LockInfo, String)>, StateError> {
    let Some(obj) = client
        .get(key)
        .map_err(|e| RemoteError::s3(format!("read the lock {key}"), e))?
    else {
        return Ok(None);
    };
    match serde_json::from_slice::<LockInfo>(&obj.body) {
        Ok(info) => Ok(Some((info, obj.etag))),
        Err(e) => Err(StateError::corrupt(
            format!("s3://{}/{key}", client.bucket()),
            None,
            format!("the lock object is not a Nivis lock record ({e}); if no Nivis run holds it, remove it by hand"),
        )),
    }
}

/// Deletes the lock if it is still ours. Returns a warning when it is not (it was forced open
/// and taken by someone else meanwhile).
pub fn release(client: &Client, held: &HeldLock) -> Result<Option<String>, StateError> {
    match read(client, &held.key)? {
        Some((info, etag)) if info.id == held.info.id => {
            client
                .delete(&held.key, Condition::Matches(&etag))
                .map_err(|e| RemoteError::s3(format!("release the lock {}", held.key), e))?;
            Ok(None)
        }
        Some((info, _)) => Ok(Some(format!(
            "our lock {} was removed while we ran and the state is now locked by another run \
             ({info}); left it alone",
            held.info.id
        ))),
        None => Ok(Some(format!(
            "our lock {} was removed while we ran (force-unlock?)",
            held.info.id
        ))),
    }
}

/// Removes the lock `key` if its id is `id`.
pub fn force_unlock(client: &Client, key: &str, id: &str) -> Result<Unlocked, StateError> {
    let Some((info, etag)) = read(client, key)? else {
        return Ok(Unlocked::NotLocked);
    };
    if info.id != id {
        return Err(RemoteError::WrongLockId {
            given: id.to_string(),
            holder: Box::new(info),
        }
        .into());
    }
    client
        .delete(key, Condition::Matches(&etag))
        .map_err(|e| RemoteError::s3(format!("remove the lock {key}"), e))?;
    Ok(Unlocked::Removed(info))
}
