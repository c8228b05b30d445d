//! The state lock: an exclusive `flock` (through `fs2`) on `P.lock`, held for a store's lifetime.
//!
//! After taking the lock the holder writes a [`LockHolder`] record (JSON) into the lock file, so a
//! refused opener can say who holds it. The lock belongs to the open file description: a second
//! `open` of the same file, even in the same process, conflicts; the kernel drops the lock when
//! the holder closes the file or dies (kill -9 included), so on a local filesystem a lock never
//! outlives its process. A stale lock can persist only on network filesystems whose lock server
//! lost track of a dead client; [`force_unlock`] exists for that case.
//!
//! This is the only place in Nivis that takes file locks.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::error::StateError;

/// Who holds (or asks for) a state lock; written into the lock file while held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    /// Process id.
    pub pid: u32,
    /// Host name of the machine the process runs on.
    pub host: String,
    /// User name (or `uid N` when the environment names none).
    pub user: String,
    /// What the process is doing, e.g. `nivis apply`.
    pub command: String,
    /// When the lock was taken, in seconds since the Unix epoch (UTC); set on acquisition.
    pub since: u64,
}

impl LockHolder {
    /// A holder record for this process running `command`.
    pub fn current(command: impl Into<String>) -> LockHolder {
        LockHolder {
            pid: std::process::id(),
            host: host_name(),
            user: user_name(),
            command: command.into(),
            since: unix_now(),
        }
    }
}

impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pid {} on host {} (user {}), running `{}`, since {}",
            self.pid,
            self.host,
            self.user,
            self.command,
            format_utc(self.since)
        )?;
        let now = unix_now();
        if now >= self.since {
            write!(f, " ({} s ago)", now - self.since)?;
        }
        Ok(())
    }
}

/// What [`force_unlock`](super::Store::force_unlock) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForceUnlock {
    /// Nobody held the lock (or there was no lock file); nothing was changed.
    NotLocked,
    /// The lock was held, so its file was removed; the next opener creates a fresh one.
    Removed {
        /// The holder recorded in the removed file, if readable.
        holder: Option<LockHolder>,
    },
}

impl fmt::Display for ForceUnlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ForceUnlock::NotLocked => write!(f, "the state is not locked; nothing to do"),
            ForceUnlock::Removed { holder } => {
                write!(f, "removed the lock file")?;
                if let Some(holder) = holder {
                    write!(f, " held by {holder}")?;
                }
                write!(
                    f,
                    "; the next command creates a new one. If that holder is in fact still \
                     running, two commands can now write the state at once: stop it"
                )
            }
        }
    }
}

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
        let start = Instant::now();
        let deadline = wait.map(|w| start + w);
        let mut pause = Duration::from_millis(5);
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
            let now = Instant::now();
            match deadline {
                Some(deadline) if now < deadline => {
                    std::thread::sleep(pause.min(deadline - now));
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                _ => {
                    return Err(StateError::Locked {
                        path: path.to_path_buf(),
                        holder: read_holder(path).map(Box::new),
                        waited: now - start,
                    })
                }
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
pub(crate) fn force_unlock(path: &Path) -> Result<ForceUnlock, StateError> {
    let file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(ForceUnlock::NotLocked),
        Err(e) => return Err(StateError::io(path, "open", e)),
    };
    match fs2::FileExt::try_lock_exclusive(&file) {
        Ok(()) => {
            let _ = fs2::FileExt::unlock(&file);
            Ok(ForceUnlock::NotLocked)
        }
        Err(e) if is_contended(&e) => {
            let holder = read_holder(path);
            match fs::remove_file(path) {
                Ok(()) => Ok(ForceUnlock::Removed { holder }),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(ForceUnlock::NotLocked),
                Err(e) => Err(StateError::io(path, "remove", e)),
            }
        }
        Err(e) => Err(StateError::io(path, "lock", e)),
    }
}

fn open_lock_file(path: &Path) -> Result<File, StateError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| StateError::io(path, "open", e))?;
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

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the pointer and length describe `buf`, which outlives the call; gethostname writes
    // at most `len` bytes into it.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match rc {
        0 if end > 0 => String::from_utf8_lossy(&buf[..end]).into_owned(),
        _ => "unknown".to_string(),
    }
}

fn user_name() -> String {
    for var in ["USER", "LOGNAME"] {
        if let Ok(name) = std::env::var(var) {
            if !name.is_empty() {
                return name;
            }
        }
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    format!("uid {}", unsafe { libc::getuid() })
}

/// Formats seconds since the Unix epoch as RFC 3339 UTC, e.g. `2023-11-14T22:13:20Z`.
pub(crate) fn format_utc(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from a day count (H. Hinnant, "chrono-Compatible Low-Level Date Algorithms").
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_dates() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(format_utc(4_107_542_399), "2100-02-28T23:59:59Z");
    }

    #[test]
    fn current_holder_names_this_process() {
        let holder = LockHolder::current("nivis apply");
        assert_eq!(holder.pid, std::process::id());
        assert!(!holder.host.is_empty() && !holder.user.is_empty());
        let text = holder.to_string();
        assert!(text.contains(&format!("pid {}", holder.pid)), "{text}");
        assert!(text.contains("`nivis apply`"), "{text}");
    }
}
