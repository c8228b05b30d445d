//! Remote state on S3-compatible object storage (AWS S3, MinIO, Ceph RGW, SeaweedFS).
//!
//! # Objects
//!
//! For a state key `K` (the backend's `key`, or `ENVPREFIX/ENV/key` for an environment):
//!
//! | object                         | content                                                    |
//! |--------------------------------|------------------------------------------------------------|
//! | `K`                            | snapshot: one state, as the local snapshot file            |
//! | `K.journal/SSSSSSSSSSSS/NNNNNNNNNNNN` | journal segment `N` extending snapshot serial `S`: one record of the local journal's format (one group commit) |
//! | `K.lock`                       | the lock while held: a [`LockInfo`]                         |
//!
//! Every write is conditional. A segment is created with `If-None-Match: *`, so two writers can
//! never both write segment `N`: the one that loses stops. Compaction first *seals* the
//! namespace (creates segment `N+1` as a seal), then replaces the snapshot with `If-Match` on
//! the ETag it read, so a writer whose lock was broken can neither append after the seal nor
//! replace a snapshot it has not seen. Namespaces two serials old are deleted.
//!
//! Commits are O(change): one PUT per group of finished results, never the whole state. The
//! snapshot is rewritten on open and close (when the journal holds anything) and when the
//! journal outgrows it, as for the local file store.
//!
//! # Faults
//!
//! Requests are retried with backoff (see [`client::Retry`]). When a commit still cannot be
//! recorded, its changes go to a local rescue journal (see `rescue`) and the commit fails, so
//! the engine dispatches nothing new; the next run on that machine pushes the rescue journal
//! before anything else (taking over the lock its predecessor could not release).
//!
//! # Module map
//!
//! `sigv4` signs, `client` talks HTTP, `xml` reads S3's answers, `lock` is the lock object,
//! `crypt` the optional AES-GCM sealing, `rescue` the local rescue journal, `store` the
//! [`S3Store`] itself, `config` the backend configuration.

mod client;
pub(crate) mod config;
mod crypt;
mod lock;
mod rescue;
mod sigv4;
mod store;
mod xml;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

pub use client::{Client, Condition, Retry, S3Error, Target};
pub use config::S3Backend;
pub use crypt::KeySource;
pub use lock::{LockInfo, Unlocked};
pub use sigv4::Credentials;
pub use store::S3Store;

use super::StateError;

/// Why the remote store failed, with what to do.
#[derive(Debug)]
pub enum RemoteError {
    /// A request failed.
    S3 { what: String, error: S3Error },
    /// Someone else holds the lock.
    Locked {
        key: String,
        holder: Option<Box<LockInfo>>,
        waited: Duration,
    },
    /// `force-unlock ID` named another lock than the one held.
    WrongLockId {
        given: String,
        holder: Box<LockInfo>,
    },
    /// The remote state changed under this writer (its lock was broken?).
    Conflict { state: String, detail: String },
    /// Results that are not in the remote state, only in the rescue journal (or nowhere).
    NotRecorded {
        state: String,
        ids: Vec<String>,
        rescue: Option<PathBuf>,
        cause: String,
    },
    /// Bad configuration, keys, or a rescue journal that cannot be used.
    Invalid(String),
}

impl RemoteError {
    pub(crate) fn s3(what: impl Into<String>, error: S3Error) -> RemoteError {
        RemoteError::S3 {
            what: what.into(),
            error,
        }
    }

    /// The S3 error behind this one, if any.
    pub fn s3_error(&self) -> Option<&S3Error> {
        match self {
            RemoteError::S3 { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl From<RemoteError> for StateError {
    fn from(e: RemoteError) -> StateError {
        StateError::Remote(Box::new(e))
    }
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteError::S3 { what, error } => write!(f, "cannot {what}: {error}"),
            RemoteError::Locked {
                key,
                holder,
                waited,
            } => {
                write!(f, "the state is locked ({key})")?;
                match holder {
                    Some(h) => write!(f, ": {h}")?,
                    None => write!(f, " by a run that has not written its record")?,
                }
                if !waited.is_zero() {
                    write!(f, "; gave up after waiting {} ms", waited.as_millis())?;
                }
                write!(
                    f,
                    ". Wait for it to finish and retry (or pass --lock-timeout)"
                )?;
                if let Some(h) = holder {
                    write!(
                        f,
                        "; if that run is gone (check pid {} on {}), run `nivis force-unlock {}`",
                        h.pid, h.host, h.id
                    )?;
                }
                Ok(())
            }
            RemoteError::WrongLockId { given, holder } => write!(
                f,
                "the state is locked under another id than {given}: {holder}; nothing was \
                 removed. Check that this run is gone, then `nivis force-unlock {}`",
                holder.id
            ),
            RemoteError::Conflict { state, detail } => write!(
                f,
                "{state} was changed by another writer while this run held the lock ({detail}); \
                 was the lock forced open? Nothing more is written; rerun to start from the \
                 current state"
            ),
            RemoteError::NotRecorded {
                state,
                ids,
                rescue,
                cause,
            } => {
                write!(
                    f,
                    "{} result(s) are not recorded in {state}: {}",
                    ids.len(),
                    ids.join(", ")
                )?;
                match rescue {
                    Some(path) => write!(
                        f,
                        ". They are kept in the rescue journal {}; the next run from this \
                         machine records them first. Cause: {cause}",
                        path.display()
                    ),
                    None => write!(f, ". Cause: {cause}"),
                }
            }
            RemoteError::Invalid(msg) => write!(f, "{msg}"),
        }
    }
}
