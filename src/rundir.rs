//! The private directory a run keeps its files in while it works (the ledger, the channel of
//! secrets for Nix).
//!
//! Owns: choosing where it is created, creating it so that nobody else can own, enter, prepare
//! or swap it, writing files into it without following links, handing Nix paths that cannot be
//! redirected, removing it when the run ends (a hang-up or termination signal included), and
//! removing what dead runs left; and [`write_private_file`], the same careful write for a
//! private file elsewhere (`state pull --out`, saved plans). Not: what the files contain
//! (`ledger`), the rule for the directories above (`privfile`).
//!
//! The directory is new for every run: `nivis-PID-XXXXXXXXXXXXXXXX` with a random suffix,
//! created with `mkdir(2)` mode 0700 (which fails if the name exists, so a directory prepared
//! by someone else is never adopted), under `$XDG_RUNTIME_DIR` when it is set and else under
//! `$TMPDIR` (default `/tmp`). The parent and every directory above it must follow the file
//! rule (`privfile::check_dirs`: owned by us or root, not writable by others unless sticky); a
//! runtime directory must moreover be ours and writable by nobody else (the XDG spec requires
//! 0700). The directory is then opened once (`O_DIRECTORY | O_NOFOLLOW`) and checked on the
//! descriptor (ours, mode 0700); every later write is relative to that descriptor (`openat`
//! with `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600, then `renameat`), and Nix is handed
//! `/proc/self/fd/N/NAME`, where N is the same descriptor, inherited by the `nix` process only
//! ([`RunDir::inherit_fd`]). Renaming or exchanging the directory's path after creation
//! (`renameat2(RENAME_EXCHANGE)` by someone who can write the parent) therefore changes
//! nothing Nivis writes or Nix reads.
//!
//! Cleanup: dropping the [`RunDir`] removes it; a second interrupt or hang-up that ends the
//! process at once first unlinks the files through [`remove_live_files`] (async-signal-safe);
//! and [`RunDir::create`] removes run directories of ours (owner, mode 0700, name) whose
//! process is gone (SIGKILL, a crash): a pid reused by a live process keeps its directory until
//! a later run.

use std::ffi::{CString, OsString};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};

/// A private directory, open, removed (with everything in it) when dropped.
#[derive(Debug)]
pub(crate) struct RunDir {
    path: PathBuf,
    dir: OwnedFd,
}

/// The descriptor of this process's live run directory (-1: none), for [`remove_live_files`].
static LIVE_DIR: AtomicI32 = AtomicI32::new(-1);
/// The names written in it (leaked C strings: a handful of constant names per process).
static LIVE_NAMES: [AtomicPtr<libc::c_char>; 4] = [
    AtomicPtr::new(std::ptr::null_mut()),
    AtomicPtr::new(std::ptr::null_mut()),
    AtomicPtr::new(std::ptr::null_mut()),
    AtomicPtr::new(std::ptr::null_mut()),
];

/// Unlinks every file written into the live run directory. Async-signal-safe: called by a
/// signal handler right before the process ends at once (the directory itself, empty, is
/// removed by the next run).
pub(crate) fn remove_live_files() {
    let fd = LIVE_DIR.load(Ordering::SeqCst);
    if fd < 0 {
        return;
    }
    for name in &LIVE_NAMES {
        let name = name.load(Ordering::SeqCst);
        if !name.is_null() {
            // SAFETY: unlinkat is async-signal-safe; `name` is a leaked, never freed C string.
            unsafe { libc::unlinkat(fd, name, 0) };
        }
    }
}

fn remember_live_name(name: &str) {
    for slot in &LIVE_NAMES {
        let current = slot.load(Ordering::SeqCst);
        if !current.is_null() {
            // SAFETY: every non-null slot holds a leaked C string.
            let known = unsafe { std::ffi::CStr::from_ptr(current) };
            if known.to_bytes() == name.as_bytes() {
                return;
            }
            continue;
        }
        if let Ok(c) = CString::new(name) {
            let raw = c.into_raw();
            if slot
                .compare_exchange(current, raw, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return;
            }
            // SAFETY: `raw` came from `into_raw` just above and was not published.
            drop(unsafe { CString::from_raw(raw) });
        }
    }
}

fn uid() -> u32 {
    crate::privfile::euid()
}

/// Why a runtime directory may not hold our run directory, or `None` (the XDG spec: ours and
/// writable by nobody else; [`crate::privfile::check_dirs`] judges the rest).
fn unsafe_runtime_dir(meta: &std::fs::Metadata) -> Option<String> {
    let mode = meta.mode() & 0o7777;
    if meta.uid() != uid() {
        return Some(format!(
            "is owned by uid {}, not by you (uid {})",
            meta.uid(),
            uid()
        ));
    }
    if mode & 0o022 != 0 {
        return Some(format!("can be written by other users (mode {mode:o})"));
    }
    None
}

/// 8 random bytes as hex, from the kernel.
fn random_suffix() -> std::io::Result<String> {
    let mut bytes = [0u8; 8];
    File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex::encode(bytes))
}

/// Whether process `pid` is alive (or exists but is not ours to signal).
fn alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH))
}

/// Removes run directories in `parent` that are ours (owner, mode 0700, our name pattern) and
/// whose process is gone: what a killed run left, possibly with secrets in it.
pub(crate) fn remove_leftovers(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("nivis-"))
            .and_then(|n| n.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if meta.is_dir() && meta.uid() == uid() && meta.mode() & 0o777 == 0o700 && !alive(pid) {
            log::info!(
                "removing {}, left by a run that ended",
                entry.path().display()
            );
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Where the private run directory is made: `$XDG_RUNTIME_DIR`, else the temporary directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunParent {
    /// The directory.
    pub(crate) path: PathBuf,
    /// Whether it is `$XDG_RUNTIME_DIR` (else the temporary directory).
    pub(crate) is_runtime: bool,
}

impl std::fmt::Display for RunParent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_runtime {
            write!(f, "XDG_RUNTIME_DIR={}", self.path.display())
        } else {
            write!(f, "the temporary directory {}", self.path.display())
        }
    }
}

/// Why the private run directory cannot be made.
#[derive(Debug)]
pub(crate) enum RunDirError {
    /// The parent directory, or one above it, breaks the private-file rule.
    UnsafeParent {
        /// The parent.
        parent: RunParent,
        /// What the rule says (boxed: it is large, and rare).
        refusal: Box<crate::privfile::Refusal>,
    },
    /// `$XDG_RUNTIME_DIR` cannot be examined.
    RuntimeUnreadable {
        /// The parent.
        parent: RunParent,
        /// What the system said.
        source: std::io::Error,
    },
    /// `$XDG_RUNTIME_DIR` is not ours alone.
    RuntimeUnsafe {
        /// The parent.
        parent: RunParent,
        /// What is wrong with it (owner, mode).
        problem: String,
    },
    /// The kernel's random numbers cannot be read for the directory's name.
    Random(std::io::Error),
    /// No directory can be created in the parent.
    Create {
        /// The parent.
        parent: PathBuf,
        /// What the system said (the last name tried already existed when absent).
        source: Option<std::io::Error>,
    },
    /// What was just created is not the private directory (swapped, or a wrong owner or mode).
    NotOurs {
        /// The directory.
        path: PathBuf,
        /// What was found instead.
        found: String,
    },
}

impl std::fmt::Display for RunDirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunDirError::UnsafeParent { parent, refusal } => {
                let fix = if parent.is_runtime {
                    "unset XDG_RUNTIME_DIR or point it to a directory only you can write to"
                } else {
                    "set TMPDIR to a directory only you can write to"
                };
                write!(
                    f,
                    "{refusal} Nivis keeps the ledger and the channel of secrets for Nix there; {fix}."
                )
            }
            RunDirError::RuntimeUnreadable { parent, source } => write!(
                f,
                "{parent}: {source}; Nivis keeps its private run files there"
            ),
            RunDirError::RuntimeUnsafe { parent, problem } => write!(
                f,
                "{parent} {problem}: Nivis keeps the ledger and the channel of secrets for Nix there; fix it (chown to yourself, chmod 700) or unset XDG_RUNTIME_DIR"
            ),
            RunDirError::Random(e) => write!(f, "reading /dev/urandom: {e}"),
            RunDirError::Create { parent, source } => write!(
                f,
                "cannot create a private directory in {}: {}",
                parent.display(),
                source.as_ref().map(|e| e.to_string()).unwrap_or_default()
            ),
            RunDirError::NotOurs { path, found } => write!(
                f,
                "{} is not the private directory Nivis just created ({found}); refusing to write there",
                path.display()
            ),
        }
    }
}

impl std::error::Error for RunDirError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunDirError::UnsafeParent { refusal, .. } => Some(refusal.as_ref()),
            RunDirError::RuntimeUnreadable { source, .. } | RunDirError::Random(source) => {
                Some(source)
            }
            RunDirError::Create { source, .. } => source.as_ref().map(|e| e as _),
            _ => None,
        }
    }
}

impl RunDir {
    /// Creates a fresh private directory where the environment says (see the module doc).
    pub(crate) fn create() -> Result<RunDir, RunDirError> {
        let runtime = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty());
        let parent = match &runtime {
            Some(dir) => RunParent {
                path: PathBuf::from(dir),
                is_runtime: true,
            },
            None => RunParent {
                path: std::env::temp_dir(),
                is_runtime: false,
            },
        };
        let role = format!("the private run directory (in {parent})");
        let real = match crate::privfile::check_dirs(&parent.path, &role) {
            Ok(real) => real,
            Err(refusal) => {
                return Err(RunDirError::UnsafeParent {
                    parent,
                    refusal: Box::new(refusal),
                })
            }
        };
        if parent.is_runtime {
            let meta = match std::fs::metadata(&real) {
                Ok(meta) => meta,
                Err(source) => return Err(RunDirError::RuntimeUnreadable { parent, source }),
            };
            if let Some(problem) = unsafe_runtime_dir(&meta) {
                return Err(RunDirError::RuntimeUnsafe { parent, problem });
            }
        }
        // Once per process: a run's later directories (a policy check, a probe) would only
        // read the whole parent again (thousands of entries in a busy `/tmp`).
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| remove_leftovers(&real));
        Self::create_in(&real)
    }

    /// Creates a fresh private directory in `parent` (already judged safe) and opens it.
    pub(crate) fn create_in(parent: &Path) -> Result<RunDir, RunDirError> {
        let mut last = None;
        for _ in 0..16 {
            let name = format!(
                "nivis-{}-{}",
                std::process::id(),
                random_suffix().map_err(RunDirError::Random)?
            );
            let path = parent.join(name);
            let mut builder = std::fs::DirBuilder::new();
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            match builder.create(&path) {
                Ok(()) => return Self::open_created(path),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => {
                    return Err(RunDirError::Create {
                        parent: parent.to_path_buf(),
                        source: Some(e),
                    })
                }
            }
        }
        Err(RunDirError::Create {
            parent: parent.to_path_buf(),
            source: last,
        })
    }

    /// Opens the directory just created at `path` and checks, on the descriptor, that it is
    /// ours and 0700 (a umask cannot widen it, but another process could have swapped it).
    fn open_created(path: PathBuf) -> Result<RunDir, RunDirError> {
        let refuse = |found: String| {
            let _ = std::fs::remove_dir(&path);
            RunDirError::NotOurs {
                path: path.clone(),
                found,
            }
        };
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| refuse(e.to_string()))?;
        let meta = file.metadata().map_err(|e| refuse(e.to_string()))?;
        let mode = meta.mode() & 0o7777;
        if !meta.is_dir() || meta.uid() != uid() || mode != 0o700 {
            return Err(refuse(format!("owner uid {}, mode {mode:o}", meta.uid())));
        }
        let dir = OwnedFd::from(file);
        LIVE_DIR.store(dir.as_raw_fd(), Ordering::SeqCst);
        Ok(RunDir { path, dir })
    }

    /// The directory, where it was created (for messages; never used to reach the files).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The descriptor of the directory, which the `nix` process must inherit for the paths
    /// [`write`](Self::write) returns to work there (see `nixeval`).
    pub(crate) fn inherit_fd(&self) -> RawFd {
        self.dir.as_raw_fd()
    }

    /// Writes `name` (a plain file name) with mode 0600 into the directory through its
    /// descriptor: into a new temporary file that may not exist or be a link, then renamed
    /// over `name` (a reader never sees it half written). Returns the path Nix reads it by:
    /// `/proc/self/fd/N/name`, valid in a process that inherited
    /// [`inherit_fd`](Self::inherit_fd).
    ///
    /// Not synced: what the directory holds is input for a child process of this run, read
    /// back through the page cache, never data that must survive a crash (a crash ends the run,
    /// and the next run removes the directory). Durable files take [`write_private_file`].
    pub(crate) fn write(&self, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
        remember_live_name(name);
        let tmp = CString::new(format!(".{name}.{}.tmp", random_suffix()?))?;
        let target = CString::new(name)?;
        let fd = self.dir.as_raw_fd();
        // SAFETY: plain system calls on a descriptor we own and NUL-terminated names.
        let raw = unsafe {
            libc::openat(
                fd,
                tmp.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600 as libc::c_uint,
            )
        };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor nobody else owns.
        let mut file = unsafe { File::from_raw_fd(raw) };
        let written = (|| {
            if file.metadata()?.permissions().mode() & 0o077 != 0 {
                return Err(std::io::Error::other(
                    "a new private file is readable by others",
                ));
            }
            file.write_all(bytes)?;
            // SAFETY: as above.
            if unsafe { libc::renameat(fd, tmp.as_ptr(), fd, target.as_ptr()) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })();
        if written.is_err() {
            // SAFETY: as above.
            unsafe { libc::unlinkat(fd, tmp.as_ptr(), 0) };
        }
        written?;
        Ok(PathBuf::from(format!("/proc/self/fd/{fd}/{name}")))
    }

    /// Removes `name` if it exists.
    pub(crate) fn remove(&self, name: &str) {
        if let Ok(c) = CString::new(name) {
            // SAFETY: a plain system call on a descriptor we own.
            unsafe { libc::unlinkat(self.dir.as_raw_fd(), c.as_ptr(), 0) };
        }
    }
}

/// Writes `bytes` to `target` (mode 0600, replacing what is there, never writing through a
/// link) through a new temporary file beside it (see [`write_private`]).
pub(crate) fn write_private_file(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    // Replacing a device (`--out /dev/null` as root) or a directory is never what was meant.
    if let Ok(meta) = std::fs::symlink_metadata(target) {
        if !meta.is_file() && !meta.file_type().is_symlink() {
            return Err(std::io::Error::other("it exists and is not a regular file"));
        }
    }
    let name = target
        .file_name()
        .ok_or_else(|| std::io::Error::other("not a file name"))?;
    let mut tmp_name = OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", random_suffix()?));
    write_private(&target.with_file_name(tmp_name), target, bytes)
}

/// Writes `bytes` to `target` as [`write_private_file`] does, after creating the directory it
/// goes in (and missing parents) and making that directory 0700: the per-user caches' files.
pub(crate) fn write_private_file_in_private_dir(
    target: &Path,
    bytes: &[u8],
) -> std::io::Result<()> {
    let dir = target
        .parent()
        .ok_or_else(|| std::io::Error::other("not a file name"))?;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    write_private_file(target, bytes)
}

/// Writes `bytes` to `target` (mode 0600) through `tmp`, a new file that may neither exist
/// already nor be a link: created `O_CREAT | O_EXCL | O_NOFOLLOW`, written, synced, renamed over
/// `target`. `tmp` is removed if anything fails.
pub(crate) fn write_private(tmp: &Path, target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(tmp)?;
        if file.metadata()?.permissions().mode() & 0o077 != 0 {
            return Err(std::io::Error::other(
                "a new private file is readable by others",
            ));
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(tmp, target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(tmp);
    }
    result
}

impl Drop for RunDir {
    /// Empties the directory through its descriptor, then removes it by path only if the path
    /// still names it (after a swap, what is there now is not ours to remove).
    fn drop(&mut self) {
        let fd = self.dir.as_raw_fd();
        let _ = LIVE_DIR.compare_exchange(fd, -1, Ordering::SeqCst, Ordering::SeqCst);
        if let Ok(entries) = std::fs::read_dir(format!("/proc/self/fd/{fd}")) {
            for entry in entries.flatten() {
                if let Ok(c) = CString::new(entry.file_name().as_bytes()) {
                    // SAFETY: a plain system call on a descriptor we own.
                    unsafe { libc::unlinkat(fd, c.as_ptr(), 0) };
                }
            }
        }
        // SAFETY: fstat into a zeroed struct on a descriptor we own.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } == 0 {
            let now = std::fs::symlink_metadata(&self.path);
            if now.is_ok_and(|m| m.dev() == st.st_dev && m.ino() == st.st_ino) {
                let _ = std::fs::remove_dir(&self.path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_private_directory_files_are_0600_and_links_are_not_followed() {
        let parent = tempfile::tempdir().unwrap();
        let dir = RunDir::create_in(parent.path()).unwrap();
        let meta = std::fs::symlink_metadata(dir.path()).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700);
        let p = dir.write("ledger.json", b"{}").unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read(&p).unwrap(), b"{}");
        // Overwriting replaces the file, never writes through a link planted at the name.
        let victim = parent.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        dir.write("ledger.json", b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        let path = dir.path().to_path_buf();
        drop(dir);
        assert!(!path.exists(), "removed when the run ends");
    }

    #[test]
    fn a_runtime_directory_writable_by_others_is_named() {
        let d = tempfile::tempdir().unwrap();
        let set = |m| std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(m));
        set(0o700).unwrap();
        let meta = || std::fs::metadata(d.path()).unwrap();
        assert!(unsafe_runtime_dir(&meta()).is_none());
        set(0o770).unwrap();
        assert!(unsafe_runtime_dir(&meta())
            .unwrap()
            .contains("written by other users"));
    }

    #[test]
    fn swapping_the_directory_path_changes_nothing_written_or_read() {
        let parent = tempfile::tempdir().unwrap();
        let dir = RunDir::create_in(parent.path()).unwrap();
        dir.write("secrets.json", b"mine").unwrap();
        // Someone who can write the parent moves our directory away and puts theirs in its
        // place, holding their own secrets file.
        let moved = parent.path().join("moved");
        std::fs::rename(dir.path(), &moved).unwrap();
        std::fs::create_dir(dir.path()).unwrap();
        std::fs::write(dir.path().join("secrets.json"), b"theirs").unwrap();
        let read_by_nix = dir.write("secrets.json", b"mine again").unwrap();
        assert_eq!(std::fs::read(&read_by_nix).unwrap(), b"mine again");
        assert_eq!(
            std::fs::read(moved.join("secrets.json")).unwrap(),
            b"mine again"
        );
        assert_eq!(
            std::fs::read(dir.path().join("secrets.json")).unwrap(),
            b"theirs"
        );
        let theirs = dir.path().to_path_buf();
        drop(dir);
        assert!(
            theirs.join("secrets.json").exists(),
            "theirs is not ours to remove"
        );
        assert!(!moved.join("secrets.json").exists(), "ours is emptied");
    }

    #[test]
    fn directories_of_dead_runs_are_removed_live_ones_kept() {
        let parent = tempfile::tempdir().unwrap();
        let make = |name: &str| {
            let p = parent.path().join(name);
            std::fs::create_dir(&p).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
            std::fs::write(p.join("secrets.json"), "x").unwrap();
            p
        };
        // A pid above the kernel's maximum is never alive.
        let dead = make("nivis-2147483600-00");
        let live = make(&format!("nivis-{}-00", std::process::id()));
        let other = make("unrelated-1");
        remove_leftovers(parent.path());
        assert!(!dead.exists());
        assert!(live.exists() && other.exists());
    }
}
