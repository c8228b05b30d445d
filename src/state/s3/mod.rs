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
//! | `K.lock`                       | the lock while held: a [`LockHolder`](crate::state::LockHolder), as in the local lock file |
//! | `K.audit/NNNNNNNNNNNN`         | audit record `N`, created with `If-None-Match: *` (`audit.rs`, `state::audit`) |
//!
//! Snapshot and segments use the local store's versioned formats (`schemaVersion`) and are read
//! by the same code (`file::parse_snapshot`, `journal::replay`).
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
//! Requests are retried with backoff (see [`client::Retry`]). When a commit still fails, the
//! store refuses writes and the engine halts dispatch, retries, then hands the unrecorded
//! changes to [`S3Store::rescue`]: the same rescue file as the local store's (`state::rescue`),
//! kept in a private directory of this machine (see [`S3Backend::rescue_path`]). The lock stays
//! held until the next run from this machine has taken it over and recorded the rescue file,
//! before anything else; the lock record says it is kept for it when the bucket takes that
//! write, and the rescue file names the lock it was written under (a file whose lock was forced
//! open since is set aside, never replayed).
//!
//! # Fencing
//!
//! A writer reads its lock after every segment it writes, and before writing or dispatching
//! once 250 ms have passed on the boot clock (which counts SIGSTOP and suspend): a writer whose
//! lock was forced open while it was paused stops before its next provider call, and a segment
//! it wrote meanwhile is never counted as recorded (DESIGN §58).
//!
//! # Module map
//!
//! `sigv4` signs, `client` talks HTTP (each attempt bounded, yielding to Ctrl-C through
//! `interrupt`), `xml` reads S3's answers, `lock` is the lock object,
//! `crypt` the optional AES-GCM sealing, `remote` the state's objects and conditional writes on
//! them, `store` the [`S3Store`] itself (lock, fencing, rescue), `config` the backend
//! configuration (and where the rescue file lives), `audit` the audit log's objects,
//! `held_alone` the lock held without the store (what `plan` holds while it reads).

pub(crate) mod audit;
mod client;
pub(crate) mod config;
mod crypt;
mod held_alone;
mod interrupt;
mod lock;
mod remote;
mod sigv4;

mod store;
mod xml;

use std::fmt;

pub use {
    client::{error::S3Error, Client, Condition, Retry, Target},
    config::{ConfigError, S3Backend},
    sigv4::Credentials,
    store::S3Store,
};
pub(crate) use {
    held_alone::HeldAlone,
    remote::Conversion,
    store::repair::{repair, Repair},
};

use super::StateError;

/// Why the remote store failed, with what to do.
#[derive(Debug)]
pub enum RemoteError {
    /// A request failed.
    S3 {
        /// What was being done (`read the state`, ...): the message says "cannot {what}".
        what: String,
        /// Why the request failed.
        error: S3Error,
    },
    /// The remote state changed under this writer (its lock was broken?).
    Conflict {
        /// The remote state (bucket and key).
        state: String,
        /// What changed.
        detail: String,
    },
    /// Bad configuration or keys, or a rescue file that cannot be recorded.
    Invalid(String),
    /// This writer's lock was taken away (forced open while it was paused or cut off): it
    /// writes nothing more.
    LockLost {
        /// The remote state (bucket and key).
        state: String,
        /// Our lock's id.
        id: String,
        /// Who holds the lock now (`None`: nobody, or no readable record).
        now: Option<Box<crate::state::LockHolder>>,
    },
}

impl RemoteError {
    pub(crate) fn s3(what: impl Into<String>, error: S3Error) -> RemoteError {
        RemoteError::S3 {
            what: what.into(),
            error,
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
            RemoteError::Conflict { state, detail } => write!(
                f,
                "{state} was changed by another writer while this run held the lock ({detail}); \
                 was the lock forced open? Nothing more is written; rerun to start from the \
                 current state"
            ),
            RemoteError::Invalid(msg) => write!(f, "{msg}"),
            RemoteError::LockLost { state, id, now } => {
                write!(f, "this run's lock {id} of {state} was taken away (")?;
                match now {
                    Some(h) => write!(
                        f,
                        "it is now held by {h}; lock id {}): the lock was forced open while this \
                         run was paused or cut off",
                        h.id
                    )?,
                    None => write!(
                        f,
                        "the lock object {state}.lock was deleted and nobody holds it now: by \
                         `nivis force-unlock`, a lifecycle rule or a hand-made delete)"
                    )?,
                }
                write!(
                    f,
                    ", and another run may have changed the state since. This run started \
                     nothing more and writes nothing more to the state"
                )
            }
        }
    }
}
