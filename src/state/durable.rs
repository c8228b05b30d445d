//! Making a directory's new entries and renames durable: the fsync both the local state file
//! (`file`) and the rescue file (`rescue`) need after they create or rename a file.
//!
//! Owns only that call and its error; not what is written, nor the file rule (`privfile`).

use std::fs::File;
use std::path::Path;

use super::error::StateError;

/// Fsyncs the directory holding `path`, making renames and new entries in it durable.
pub(super) fn sync_parent(path: &Path) -> Result<(), StateError> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StateError::io(dir, "sync the directory", e))
}
