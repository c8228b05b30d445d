//! The one error type of the state store: facts in fields, advice in `Display`.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use super::holder::{Liveness, LockHolder};

/// Why a state operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum StateError {
    /// A file operation failed: reading, writing, syncing or renaming a state, journal or lock
    /// file (or syncing their directory).
    Io {
        /// The file (or directory) operated on.
        path: PathBuf,
        /// What was being done, as a verb phrase ("append to", "rename", ...).
        op: &'static str,
        /// The operating system's error.
        source: io::Error,
    },
    /// A state or journal file cannot be understood. A torn final journal line (left by a crash
    /// mid-commit) is never reported; it is dropped.
    Corrupt {
        /// The file that is corrupt.
        path: PathBuf,
        /// 1-based line number, when known.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// Another process (or another `Store` in this one) holds the state lock.
    Locked {
        /// The lock file.
        path: PathBuf,
        /// Who holds it, as the holder wrote it into the lock file; `None` if the file did not
        /// hold a readable record (the holder may be between locking and writing it).
        holder: Option<Box<LockHolder>>,
        /// How long this opener waited before giving up.
        waited: Duration,
    },
    /// The state file (or a journal line) was written by a newer (or unknown) format version.
    UnsupportedVersion {
        /// The state or journal file.
        path: PathBuf,
        /// 1-based journal line, for a journal record.
        line: Option<usize>,
        /// The version found in the file.
        found: u64,
        /// The version this build reads and writes.
        supported: u32,
    },
    /// `force-unlock` named a lock id that is not the one held (or the lock file records no
    /// id to check).
    LockIdMismatch {
        /// The lock file.
        path: PathBuf,
        /// The id given.
        given: String,
        /// The holder the lock file records, if readable.
        holder: Option<Box<LockHolder>>,
    },
    /// `force-unlock` without `--force` while the holder still runs on this host.
    LockHolderAlive {
        /// The lock file.
        path: PathBuf,
        /// The live holder.
        holder: Box<LockHolder>,
    },
    /// `force-unlock` without `--force` of a lock kept for rescued results (its record says
    /// where they are).
    LockKeptForRescue {
        /// The lock.
        path: PathBuf,
        /// The holder that kept it, with [`LockHolder::kept`] set.
        holder: Box<LockHolder>,
    },
    /// The remote (S3) store failed or refused; the error names what and what to do.
    Remote(Box<super::s3::RemoteError>),
    /// An earlier write to this store failed in a way that leaves the file contents uncertain
    /// (a failed fsync, say), so the store refuses further writes until it is reopened.
    Poisoned {
        /// The state file.
        path: PathBuf,
        /// The earlier failure.
        cause: String,
    },
    /// The state is missing, but what a state leaves beside it shows that one existed (a
    /// backup, audit records of runs with a serial, journal segments): refused rather than
    /// treated as a new, empty state.
    Lost(Box<super::lost::LostState>),
}

impl StateError {
    pub(crate) fn io(path: impl Into<PathBuf>, op: &'static str, source: io::Error) -> StateError {
        StateError::Io {
            path: path.into(),
            op,
            source,
        }
    }

    pub(crate) fn corrupt(
        path: impl Into<PathBuf>,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> StateError {
        StateError::Corrupt {
            path: path.into(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for StateError {
    // Long because it is one message per error variant, a table kept in one place.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Io { path, op, source } => {
                write!(f, "cannot {op} {}: {source}", path.display())
            }
            StateError::Corrupt {
                path,
                line,
                message,
            } => {
                write!(f, "{}", path.display())?;
                if let Some(line) = line {
                    write!(f, " line {line}")?;
                }
                write!(
                    f,
                    " is corrupt: {message}. Nivis changed nothing; restore the state from its \
                     backup {} (the snapshot before the last run that replaced it) or repair \
                     it by hand, then retry",
                    super::backup::backup_name(&path.to_string_lossy())
                )
            }
            StateError::Locked {
                path,
                holder,
                waited,
            } => {
                write!(f, "the state is locked ({})", path.display())?;
                match holder {
                    Some(holder) => write!(f, " by {holder}; lock id {}", holder.id)?,
                    None => write!(f, " by a process that has not recorded who it is yet")?,
                }
                if !waited.is_zero() {
                    write!(f, "; gave up after waiting {} ms", waited.as_millis())?;
                }
                if holder.as_ref().is_some_and(|h| h.kept.is_some()) {
                    // The record already says where the results are and what to do.
                    return Ok(());
                }
                if holder
                    .as_ref()
                    .is_some_and(|h| h.liveness() == Liveness::Gone)
                {
                    // On the holder's own host a dead pid is a fact, not a guess.
                    return write!(
                        f,
                        ". That process is gone (pid {} no longer runs on this host), so \
                         nobody will release the lock: run `nivis force-unlock {}`",
                        holder.as_ref().map_or(0, |h| h.pid),
                        holder.as_ref().map_or("", |h| h.id.as_str())
                    );
                }
                write!(
                    f,
                    ". Wait for it to finish and retry (or allow a longer wait with \
                     --lock-timeout); if that process is gone, run "
                )?;
                match holder.as_ref().filter(|h| !h.id.is_empty()) {
                    Some(holder) => write!(f, "`nivis force-unlock {}`", holder.id)?,
                    None => write!(f, "`nivis force-unlock --force unknown`")?,
                }
                match holder
                    .as_ref()
                    .filter(|h| h.liveness() == Liveness::Unknown)
                {
                    Some(h) => write!(
                        f,
                        " after checking host {}: if that run ended keeping results in a rescue \
                         file there (its error named it), run the command again on {} instead, \
                         or forcing the lock leaves them unrecorded",
                        h.host, h.host
                    ),
                    None => Ok(()),
                }
            }
            StateError::UnsupportedVersion {
                path,
                line,
                found,
                supported,
            } => {
                write!(f, "{}", path.display())?;
                if let Some(line) = line {
                    write!(f, " line {line}")?;
                }
                write!(
                    f,
                    " has state format version {found}, but this nivis understands versions 1 \
                     to {supported}; nothing was changed. Use a nivis release that supports \
                     version {found}"
                )
            }
            StateError::LockIdMismatch {
                path,
                given,
                holder,
            } => {
                write!(f, "lock id {given:?} is not the lock on {}", path.display())?;
                match holder.as_deref() {
                    Some(h) if !h.id.is_empty() => write!(
                        f,
                        ", which is held by {h} with lock id {}; nothing was changed. Copy the \
                         id from the \"state is locked\" message",
                        h.id
                    ),
                    Some(h) => write!(
                        f,
                        ": its holder ({h}) recorded no lock id, so none can be checked; \
                         nothing was changed. If it is gone, `--force` removes the lock"
                    ),
                    None => write!(
                        f,
                        ": the lock file names no holder, so the id cannot be checked; nothing \
                         was changed. If no nivis runs on this state, `--force` removes the lock"
                    ),
                }
            }
            StateError::LockHolderAlive { path, holder } => write!(
                f,
                "the state lock {} is held by {holder}, which is still running on this host; \
                 nothing was changed. Let it finish or stop it first (`--force` removes the \
                 lock anyway, and then two commands can write the state at once)",
                path.display()
            ),
            StateError::LockKeptForRescue { path, holder } => write!(
                f,
                "the state lock {} was left by {holder}. Nothing was changed; `nivis \
                 force-unlock {} --force` removes it anyway",
                path.display(),
                holder.id
            ),
            StateError::Remote(e) => write!(f, "{e}"),
            StateError::Poisoned { path, cause } => write!(
                f,
                "an earlier write to the state {} failed ({cause}); this store refuses further \
                 writes. Reopen the state (rerun the command): it recovers every change that was \
                 committed",
                path.display()
            ),
            StateError::Lost(lost) => lost.fmt(f),
        }
    }
}

impl std::error::Error for StateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StateError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_small() {
        assert!(std::mem::size_of::<StateError>() <= 72);
    }

    #[test]
    fn display_is_actionable() {
        let e = StateError::corrupt("s.json.journal", Some(3), "expected value");
        let text = e.to_string();
        assert!(
            text.contains("s.json.journal line 3 is corrupt: expected value"),
            "{text}"
        );
        let e = StateError::UnsupportedVersion {
            path: "s.json".into(),
            line: None,
            found: 3,
            supported: 2,
        };
        assert!(e.to_string().contains("version 3"));
    }
}
