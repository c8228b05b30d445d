//! The rescue file: where results go when the state cannot take them, for every store.
//!
//! After a state write fails and a retry fails too, the changes that record operations already
//! carried out are written to a rescue file, so that no object that exists is forgotten. Each
//! store decides where it lives (the local file store: `P.rescue` beside the state; the S3
//! store: a private directory of this machine, outside any Nix-copied project), and each folds
//! it in before anything else the next time it is opened for writing, then removes it; a
//! read-only reader applies it in memory.
//!
//! The format is the journal's: one line per rescue, a journal record (`schemaVersion`,
//! `lineage`, `serial`, `changes`) read by the journal's own line parser. The file is created new
//! (never over an existing file, never through a symlink), mode 0600 like every state file, and
//! synced with its directory. Not: deciding when to rescue (the engine), where the file lives
//! (each store), the journal itself (`journal.rs`).

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::durable::sync_parent;
use super::error::StateError;
use super::journal::{self, BadLine};
use super::model::{Change, StateFile, SCHEMA_VERSION};

/// What a rescue file holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rescued {
    /// The lineage of the state the changes extend.
    pub(crate) lineage: String,
    /// The rescued changes, in order.
    pub(crate) changes: Vec<Change>,
    /// The id of the lock the changes were rescued under (S3 store; `None` for the local store,
    /// whose lock is the file system's, and for files written before rescue files named it).
    pub(crate) lock: Option<String>,
    /// Where the state stood when the changes were rescued: its snapshot serial and how many
    /// journal segments it had (S3 store; `None` for the local store and older files). A file
    /// whose lock is gone is still replayed when the state stands there yet (nobody wrote).
    pub(crate) at: Option<(u64, u64)>,
}

impl Rescued {
    /// The changes to apply to `state`, whose lineage they must extend; a state that has
    /// recorded nothing yet (`fresh`) adopts theirs. `path` names the file in errors.
    pub(crate) fn changes_for(
        self,
        path: &Path,
        state: &mut StateFile,
        fresh: bool,
    ) -> Result<Vec<Change>, StateError> {
        if fresh {
            state.lineage = self.lineage;
        } else if self.lineage != state.lineage {
            return Err(StateError::corrupt(
                path,
                None,
                format!(
                    "the rescued changes belong to state lineage {} but the state has lineage \
                     {}; it was written for another state: move it aside",
                    self.lineage, state.lineage
                ),
            ));
        }
        Ok(self.changes)
    }

    /// The resource ids the changes record, in order, each once (not the notes of pending
    /// operations, which are no results).
    pub(crate) fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        for change in self.changes.iter().filter(|c| c.is_record()) {
            if !ids.iter().any(|id| id == change.id()) {
                ids.push(change.id().to_string());
            }
        }
        ids
    }
}

/// Where this machine keeps the rescue file of the local state at `snapshot` when the state's
/// own filesystem cannot take it (full, read-only, failing): `$NIVIS_RESCUE_DIR`, else
/// `$XDG_STATE_HOME/nivis/rescue` (the S3 store's place), named after the state's absolute path.
/// `None` when there is no such place.
pub(crate) fn spare_path(snapshot: &Path) -> Option<PathBuf> {
    let dir = match std::env::var_os("NIVIS_RESCUE_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => crate::xdg::state_home().ok()?.join("nivis/rescue"),
    };
    let absolute = std::path::absolute(snapshot).ok()?;
    let name = absolute.file_name()?.to_string_lossy();
    Some(dir.join(file_name(
        &format!("local-{name}"),
        absolute.as_os_str().as_encoded_bytes(),
    )))
}

/// A rescue file's name: `readable` with anything but letters, digits, `-` and `.` replaced
/// (80 characters at most), then a digest of `key`, which tells apart the states whose
/// readable parts agree.
pub(crate) fn file_name(readable: &str, key: &[u8]) -> String {
    let readable: String = readable
        .chars()
        .map(|c| match c {
            c if c.is_ascii_alphanumeric() || c == '-' || c == '.' => c,
            _ => '_',
        })
        .take(80)
        .collect();
    format!(
        "{readable}-{}.rescue",
        hex::encode(&Sha256::digest(key)[..6])
    )
}

/// Writes `changes` like [`write`] to `path`, or, when `path`'s filesystem fails (full,
/// read-only, out of quota, I/O error), to `spare` (created with a private directory). Returns
/// where they went; on failure, both reasons.
pub(crate) fn write_or_spare(
    path: &Path,
    spare: Option<&Path>,
    state: &StateFile,
    changes: &[Change],
    lock: Option<&str>,
) -> Result<PathBuf, StateError> {
    let first = match write(path, state, changes, lock) {
        Ok(()) => return Ok(path.to_path_buf()),
        Err(e) => e,
    };
    let (Some(spare), true) = (spare, filesystem_failed(&first)) else {
        return Err(first);
    };
    let written = match spare.parent() {
        Some(dir) => fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| StateError::io(dir, "create the directory", e)),
        None => Ok(()),
    }
    .and_then(|()| write(spare, state, changes, lock));
    match written {
        Ok(()) => Ok(spare.to_path_buf()),
        Err(second) => Err(StateError::io(
            path,
            "write the rescue file",
            io::Error::other(format!("{first}; and in the spare place: {second}")),
        )),
    }
}

/// Whether a failed rescue write is its filesystem's fault, so that another filesystem may
/// take it (never for a file that already exists, or a state directory that is gone).
fn filesystem_failed(e: &StateError) -> bool {
    let StateError::Io { source, .. } = e else {
        return false;
    };
    matches!(
        source.raw_os_error(),
        Some(libc::ENOSPC | libc::EROFS | libc::EDQUOT | libc::EIO)
    )
}

/// Writes `changes` (extending `state`, rescued under the lock `lock`) to the new file `path`.
/// Fails if it exists.
pub(crate) fn write(
    path: &Path,
    state: &StateFile,
    changes: &[Change],
    lock: Option<&str>,
) -> Result<(), StateError> {
    write_at(path, state, changes, lock, None)
}

/// [`write`], noting that the state had `segments` journal segments (see [`Rescued::at`]).
pub(crate) fn write_at(
    path: &Path,
    state: &StateFile,
    changes: &[Change],
    lock: Option<&str>,
    segments: Option<u64>,
) -> Result<(), StateError> {
    let line = journal::encode_under(&state.lineage, state.serial, changes, lock, segments)
        .map_err(|e| StateError::io(path, "encode", io::Error::other(e)))?;
    create(path, &line)
}

/// Binds the rescue file `path` to the lock `lock` (a later run that could not record it keeps
/// its own lock for it): rewritten beside it, then renamed over it.
pub(crate) fn rebind(path: &Path, lock: &str) -> Result<(), StateError> {
    let Some(rescued) = read(path)? else {
        return Ok(());
    };
    let (serial, segments) = match rescued.at {
        Some((serial, segments)) => (serial, Some(segments)),
        None => (0, None),
    };
    let line = journal::encode_under(
        &rescued.lineage,
        serial,
        &rescued.changes,
        Some(lock),
        segments,
    )
    .map_err(|e| StateError::io(path, "encode", io::Error::other(e)))?;
    let next = path.with_extension("rescue.next");
    let _ = fs::remove_file(&next);
    create(&next, &line)?;
    fs::rename(&next, path).map_err(|e| StateError::io(path, "replace", e))?;
    sync_parent(path)
}

/// Moves the rescue file `path` aside (to `PATH.stale-UNIXTIME`), where no run replays it, and
/// returns the new path.
pub(crate) fn set_aside(path: &Path) -> Result<std::path::PathBuf, StateError> {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".stale-{}", super::holder::unix_now()));
    let aside = std::path::PathBuf::from(name);
    fs::rename(path, &aside).map_err(|e| StateError::io(path, "set aside", e))?;
    sync_parent(path)?;
    Ok(aside)
}

/// Creates `path` new (never through a symlink), 0600, holding `line`, synced with its directory.
fn create(path: &Path, line: &[u8]) -> Result<(), StateError> {
    let mut file = crate::privfile::open(
        path,
        OpenOptions::new().write(true).create_new(true).mode(0o600),
        "the rescue file",
    )
    .map_err(|e| StateError::io(path, "create", e.into_io()))?;
    let written = file.write_all(line).and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = fs::remove_file(path);
        return Err(StateError::io(path, "write", e));
    }
    sync_parent(path)
}

/// What the rescue file at `path` holds, if there is one.
pub(crate) fn read(path: &Path) -> Result<Option<Rescued>, StateError> {
    // Under the file rule (`privfile`): a rescue file, or a directory holding it, that someone
    // else owns or can write is refused (its changes would be recorded as ours).
    let mut file = match crate::privfile::open_read(path, "the rescue file")
        .map_err(crate::privfile::OpenError::into_io)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StateError::io(path, "open", e)),
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| StateError::io(path, "read", e))?;
    let mut rescued: Option<Rescued> = None;
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    for (i, line) in lines.iter().enumerate() {
        if line.is_empty() {
            continue;
        }
        let corrupt = |e: String| StateError::corrupt(path, Some(i + 1), e);
        let record = match journal::parse_line(line) {
            Ok(r) => r,
            // Written with one write then synced: only a crash during that write can leave a
            // broken last line, and then the rescue never completed.
            Err(BadLine::Garbled(_)) if i + 1 == lines.len() => break,
            Err(BadLine::Newer(found)) => {
                return Err(StateError::UnsupportedVersion {
                    path: path.to_path_buf(),
                    line: Some(i + 1),
                    found,
                    supported: SCHEMA_VERSION,
                })
            }
            Err(BadLine::Garbled(e)) => return Err(corrupt(e.to_string())),
            Err(BadLine::Invalid(e)) => return Err(corrupt(e)),
        };
        match &mut rescued {
            None => {
                rescued = Some(Rescued {
                    lineage: record.lineage,
                    changes: record.changes,
                    lock: record.lock,
                    at: record.segments.map(|n| (record.serial, n)),
                })
            }
            Some(r) if r.lineage == record.lineage => {
                r.changes.extend(record.changes);
                // A file holds one rescue; should it hold more, the last line's lock and
                // position count.
                if record.lock.is_some() {
                    r.lock = record.lock;
                }
                r.at = record.segments.map(|n| (record.serial, n));
            }
            Some(r) => {
                return Err(corrupt(format!(
                    "the line extends state lineage {}, the lines before it lineage {}",
                    record.lineage, r.lineage
                )))
            }
        }
    }
    Ok(rescued)
}

/// Removes the rescue file once its changes are durable in the state.
pub(crate) fn remove(path: &Path) -> Result<(), StateError> {
    fs::remove_file(path).map_err(|e| StateError::io(path, "remove", e))?;
    sync_parent(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testutil::put;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_rescue_file_is_a_private_journal_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.rescue");
        assert_eq!(read(&path).unwrap(), None);
        let state = StateFile::with_lineage("lin");
        let changes = [put("a", 1), Change::Remove("b".into()), put("a", 2)];
        write(&path, &state, &changes, None).unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(
            write(&path, &state, &changes, None).is_err(),
            "never over an existing rescue file"
        );
        let back = read(&path).unwrap().unwrap();
        assert_eq!(back.ids(), ["a", "b"]);

        // The journal's parser reads the line as a journal record.
        let bytes = fs::read(&path).unwrap();
        let replayed = journal::replay(&path, Some(state.clone()), &bytes)
            .ok()
            .unwrap();
        assert!(replayed.state.contains("a"));

        // Another state's lineage is refused; a fresh state adopts it.
        let mut other = StateFile::with_lineage("other");
        other.apply(&put("x", 1));
        let err = back.clone().changes_for(&path, &mut other, false);
        assert!(err.unwrap_err().to_string().contains("lineage lin"));
        let mut fresh = StateFile::empty();
        assert_eq!(back.changes_for(&path, &mut fresh, true).unwrap().len(), 3);
        assert_eq!(fresh.lineage, "lin");

        // A torn last line (a crash during the write) is dropped.
        fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"schemaVersion\":2,\"lin")
            .unwrap();
        assert_eq!(read(&path).unwrap().unwrap().changes.len(), 3);
        remove(&path).unwrap();
        assert!(!path.exists());
    }
}
