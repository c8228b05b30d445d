//! The rescue file `P.rescue`: where results go when the journal cannot take them.
//!
//! After a journal write fails and a retry fails too, the changes that record operations already
//! carried out are written here, in the journal's line format, so that no object that exists is
//! forgotten. The file is created new (never over an existing file, never through a symlink),
//! mode 0600 like every state file, and synced with its directory. Opening the store folds it
//! into the journal before anything else and then removes it; a read-only reader applies it in
//! memory. Not: deciding when to rescue (the engine), the journal itself (`journal.rs`).

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::error::StateError;
use super::journal::{self, BadLine};
use super::model::{Change, StateFile, SCHEMA_VERSION};

/// Writes `changes` (extending `state`) to the new file `path`. Fails if it exists.
pub(super) fn write(path: &Path, state: &StateFile, changes: &[Change]) -> Result<(), StateError> {
    let line = journal::encode(&state.lineage, state.serial, changes)
        .map_err(|e| StateError::io(path, "encode", io::Error::other(e)))?;
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(path)
        .map_err(|e| StateError::io(path, "create", e))?;
    let written = file.write_all(&line).and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = fs::remove_file(path);
        return Err(StateError::io(path, "write", e));
    }
    super::file::sync_parent(path)
}

/// The changes recorded in the rescue file at `path`, if there is one. Their lineage must be
/// `state`'s, except for a state that has recorded nothing yet (`fresh`), which adopts it.
pub(super) fn read(
    path: &Path,
    state: &mut StateFile,
    fresh: bool,
) -> Result<Option<Vec<Change>>, StateError> {
    let mut file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StateError::io(path, "open", e)),
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| StateError::io(path, "read", e))?;
    let mut changes = Vec::new();
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    for (i, line) in lines.iter().enumerate() {
        if line.is_empty() {
            continue;
        }
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
            Err(BadLine::Garbled(e)) => {
                return Err(StateError::corrupt(path, Some(i + 1), e.to_string()))
            }
            Err(BadLine::Invalid(e)) => return Err(StateError::corrupt(path, Some(i + 1), e)),
        };
        if fresh && changes.is_empty() {
            state.lineage = record.lineage.clone();
        }
        if record.lineage != state.lineage {
            return Err(StateError::corrupt(
                path,
                Some(i + 1),
                format!(
                    "the rescued changes belong to state lineage {} but the state has lineage \
                     {}; it was written for another state: move it aside",
                    record.lineage, state.lineage
                ),
            ));
        }
        changes.extend(record.changes);
    }
    Ok(Some(changes))
}

/// Removes the rescue file once its changes are durable in the journal.
pub(super) fn remove(path: &Path) -> Result<(), StateError> {
    fs::remove_file(path).map_err(|e| StateError::io(path, "remove", e))?;
    super::file::sync_parent(path)
}
