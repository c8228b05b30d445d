//! The backup of a state: the snapshot as it was before a run first replaced it, kept as
//! `P.backup` beside a local state (and as the object `KEY.backup` beside an S3 one).
//!
//! Owns the backup's name and writing it for the local store; it never reads a backup back (a
//! user restores one by hand, which the "corrupt" message says how) and never decides when one
//! is due (the stores do: once per open, before their first compaction).

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::error::StateError;

/// The backup's name for the state a file or object belongs to: `P.backup` for the snapshot
/// `P`, its journal `P.journal` or a journal segment `KEY.journal/N`.
pub(crate) fn backup_name(of: &str) -> String {
    let base = of.rfind(".journal").map_or(of, |at| &of[..at]);
    format!("{base}.backup")
}

/// Copies the snapshot at `snapshot` to `P.backup` (0600, under the file rule, replaced by
/// rename so a crash leaves the old backup or the new one, never half of one). No snapshot yet:
/// nothing to keep.
pub(crate) fn keep_local(snapshot: &Path) -> Result<(), StateError> {
    let bytes = match fs::read(snapshot) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StateError::io(snapshot, "read for its backup", e)),
    };
    let backup = Path::new(&backup_name(&snapshot.to_string_lossy())).to_path_buf();
    let tmp = Path::new(&format!("{}.tmp", backup.display())).to_path_buf();
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(StateError::io(&tmp, "remove the leftover", e)),
    }
    let mut file = crate::privfile::open(
        &tmp,
        OpenOptions::new().write(true).create_new(true).mode(0o600),
        "the state backup",
    )
    .map_err(|e| StateError::io(&tmp, "create", e.into_io()))?;
    let written = file.write_all(&bytes).and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(StateError::io(&tmp, "write", e));
    }
    fs::rename(&tmp, &backup).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        StateError::io(&backup, "replace", e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backup_is_named_after_the_snapshot_whatever_file_is_named() {
        assert_eq!(
            backup_name("/s/nivis.state.json"),
            "/s/nivis.state.json.backup"
        );
        assert_eq!(
            backup_name("/s/nivis.state.json.journal"),
            "/s/nivis.state.json.backup"
        );
        assert_eq!(
            backup_name("s3://b/team/x.state.journal/000003"),
            "s3://b/team/x.state.backup"
        );
    }

    #[test]
    fn the_backup_is_the_old_snapshot_private_to_its_owner() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let snapshot = dir.path().join("s.json");
        keep_local(&snapshot).unwrap();
        assert!(
            !dir.path().join("s.json.backup").exists(),
            "nothing to keep"
        );
        fs::write(&snapshot, b"old").unwrap();
        keep_local(&snapshot).unwrap();
        let backup = dir.path().join("s.json.backup");
        assert_eq!(fs::read(&backup).unwrap(), b"old");
        assert_eq!(
            fs::metadata(&backup).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}
