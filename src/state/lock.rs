//! The state lock: an exclusive `flock` (through `fs2`) on `P.lock`, held for a store's lifetime.
//!
//! After taking the lock the holder writes a [`LockHolder`] record (JSON) into the lock file, so a
//! refused opener can say who holds it (and its lock id, which `force-unlock` must name). The lock belongs to the open file description: a second
//! `open` of the same file, even in the same process, conflicts; the kernel drops the lock when
//! the holder closes the file or dies (kill -9 included), so on a local filesystem a lock never
//! outlives its process. A stale lock can persist only on network filesystems whose lock server
//! lost track of a dead client; [`force_unlock`] exists for that case.
//!
//! This is the only place in Nivis that takes file locks.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use super::error::StateError;
use super::holder::{check_force_unlock, unix_now, ForceUnlock, LockHolder, LockWait};

/// A held lock; released (and its holder record cleared) on drop.
#[derive(Debug)]
pub(crate) struct FileLock {
    file: File,
}

impl FileLock {
    /// Takes the lock on `path`, polling until `wait` runs out (`None`: try once).
    pub(crate) fn acquire(
        path: &Path,
        mut holder: LockHolder,
        wait: Option<Duration>,
    ) -> Result<FileLock, StateError> {
        let mut waiting = LockWait::new(wait, Duration::from_millis(5), Duration::from_millis(100));
        loop {
            let file = open_lock_file(path)?;
            match fs2::FileExt::try_lock_exclusive(&file) {
                Ok(()) => {
                    // force_unlock may have removed the file between our open and our lock: then we
                    // hold a lock nobody else will ever look at. Retry on the file now at `path`.
                    if is_same_file(path, &file)? {
                        holder.since = unix_now();
                        write_holder(&file, &holder)
                            .map_err(|e| StateError::io(path, "write the holder into", e))?;
                        return Ok(FileLock { file });
                    }
                    continue;
                }
                Err(e) if is_contended(&e) => {}
                Err(e) => return Err(StateError::io(path, "lock", e)),
            }
            drop(file);
            if !waiting.pause() {
                return Err(StateError::Locked {
                    path: path.to_path_buf(),
                    holder: read_holder(path).map(Box::new),
                    waited: waiting.waited(),
                });
            }
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        // Clear the record first so nobody reads a stale holder; closing the file unlocks anyway.
        let _ = self.file.set_len(0);
        let _ = fs2::FileExt::unlock(&self.file);
    }
}

/// Implements [`Store::force_unlock`](super::Store::force_unlock) for the lock file `path`.
pub(crate) fn force_unlock(
    path: &Path,
    id: &str,
    force: bool,
    confirm: &mut dyn FnMut(Option<&LockHolder>) -> bool,
) -> Result<ForceUnlock, StateError> {
    let file = match crate::privfile::open(
        path,
        OpenOptions::new().read(true).write(true),
        "the state lock",
    )
    .map_err(crate::privfile::OpenError::into_io)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(ForceUnlock::NotLocked),
        Err(e) => return Err(StateError::io(path, "open", e)),
    };
    match fs2::FileExt::try_lock_exclusive(&file) {
        Ok(()) => {
            let _ = fs2::FileExt::unlock(&file);
            return Ok(ForceUnlock::NotLocked);
        }
        Err(e) if is_contended(&e) => {}
        Err(e) => return Err(StateError::io(path, "lock", e)),
    }
    let holder = read_holder(path);
    check_force_unlock(path, id, force, holder.as_ref())?;
    if !confirm(holder.as_ref()) {
        return Ok(ForceUnlock::Declined);
    }
    // The lock may have changed hands while the user read the question.
    let now = read_holder(path);
    if now.as_ref().map(|h| &h.id) != holder.as_ref().map(|h| &h.id) {
        return Err(StateError::LockIdMismatch {
            path: path.to_path_buf(),
            given: id.to_string(),
            holder: now.map(Box::new),
        });
    }
    match fs::remove_file(path) {
        Ok(()) => Ok(ForceUnlock::Removed { holder }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(ForceUnlock::NotLocked),
        Err(e) => Err(StateError::io(path, "remove", e)),
    }
}

fn open_lock_file(path: &Path) -> Result<File, StateError> {
    // Under the file rule (`privfile`): never through a link (which would let the holder record
    // truncate its target), never a lock file another user created.
    let file = crate::privfile::open(
        path,
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600),
        "the state lock",
    )
    .map_err(|e| StateError::io(path, "open", e.into_io()))?;
    restrict_to_owner(&file).map_err(|e| StateError::io(path, "chmod 0600", e))?;
    Ok(file)
}

/// Narrows an existing file's mode to 0600 if it allows group or other access.
pub(crate) fn restrict_to_owner(file: &File) -> io::Result<()> {
    let mode = file.metadata()?.permissions().mode();
    if mode & 0o077 != 0 {
        file.set_permissions(fs::Permissions::from_mode(mode & 0o700))?;
    }
    Ok(())
}

fn is_same_file(path: &Path, file: &File) -> Result<bool, StateError> {
    let held = file
        .metadata()
        .map_err(|e| StateError::io(path, "stat", e))?;
    match fs::metadata(path) {
        Ok(now) => Ok(now.dev() == held.dev() && now.ino() == held.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StateError::io(path, "stat", e)),
    }
}

fn is_contended(e: &io::Error) -> bool {
    e.raw_os_error().is_some() && e.raw_os_error() == fs2::lock_contended_error().raw_os_error()
}

fn write_holder(file: &File, holder: &LockHolder) -> io::Result<()> {
    let mut text = serde_json::to_vec(holder).map_err(io::Error::other)?;
    text.push(b'\n');
    file.set_len(0)?;
    std::os::unix::fs::FileExt::write_all_at(file, &text, 0)?;
    file.sync_all()
}

fn read_holder(path: &Path) -> Option<LockHolder> {
    serde_json::from_slice(&fs::read(path).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locked_by(path: &Path, holder: LockHolder) -> FileLock {
        FileLock::acquire(path, holder, None).unwrap()
    }

    #[test]
    fn force_unlock_checks_the_id_and_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.lock");
        let yes = &mut |_: Option<&LockHolder>| true;
        assert_eq!(
            force_unlock(&path, "x", false, yes).unwrap(),
            ForceUnlock::NotLocked
        );

        // Held by this (live) process.
        let me = LockHolder::current("nivis apply");
        let held = locked_by(&path, me.clone());
        let err = force_unlock(&path, &me.id, false, yes).unwrap_err();
        assert!(matches!(err, StateError::LockHolderAlive { .. }), "{err}");
        let err = force_unlock(&path, "wrong", true, yes).unwrap_err();
        assert!(err.to_string().contains(&me.id), "{err}");
        let no = &mut |_: Option<&LockHolder>| false;
        assert_eq!(
            force_unlock(&path, &me.id, true, no).unwrap(),
            ForceUnlock::Declined
        );
        assert!(path.exists());
        drop(held);

        // Held, but the record names a process that has exited (a stale lock on a network
        // filesystem looks like this): the right id is enough.
        let mut child = crate::child::command("true").spawn().unwrap();
        let dead = LockHolder {
            pid: child.id(),
            ..LockHolder::current("nivis apply")
        };
        child.wait().unwrap();
        let held = locked_by(&path, dead.clone());
        let removed = force_unlock(&path, &dead.id, false, yes).unwrap();
        assert!(matches!(removed, ForceUnlock::Removed { holder: Some(ref h) } if h.id == dead.id));
        assert!(removed
            .to_string()
            .contains(&format!("removed the lock {}", dead.id)));
        assert!(!path.exists());
        drop(held);
    }
}
