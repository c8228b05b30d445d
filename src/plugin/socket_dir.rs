//! The private directory a provider process lives in: its socket (go-plugin creates it in
//! `PLUGIN_UNIX_SOCKET_DIR`, or in `TMPDIR` for releases before that variable), anything it puts
//! in `TMPDIR`, and the TLS bridge's socket.
//!
//! Owns: creating the directory (mode 0700, a fresh name, `mkdir` failing if it exists, then
//! checked on an opened descriptor), where (`$XDG_RUNTIME_DIR`, else `$TMPDIR` or `/tmp`, and
//! the directories above it judged by `privfile`), and removing it with its contents when
//! dropped or, for one still held when the process exits (providers live until then), at exit.
//! Not: the run directory (`rundir`), which is separate because a provider outlives
//! no run but a run may start several providers; its name follows the run directory's pattern
//! (`nivis-PID-…`), so what a killed run leaves is removed by the next run's
//! `rundir::remove_leftovers`.
//!
//! Nobody but us (and root) can enter the directory, so nobody else can connect to a provider's
//! socket in it, whatever the umask; that holds for providers that serve plaintext too.

use std::fmt;
use std::fs::OpenOptions;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

use ring::rand::{SecureRandom, SystemRandom};

/// A provider's private directory, removed with everything in it when dropped.
#[derive(Debug)]
pub(crate) struct SocketDir {
    path: PathBuf,
}

/// The directories of this process not yet removed, for [`remove_at_exit`].
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes every live directory; registered with `atexit(3)`, which `std::process::exit` runs
/// (the engine keeps providers until the process ends; `PR_SET_DEATHSIG` then ends them).
extern "C" fn remove_at_exit() {
    if let Ok(live) = LIVE.try_lock() {
        for path in live.iter() {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

fn register(path: &Path) {
    static AT_EXIT: Once = Once::new();
    // SAFETY: registers a function without arguments that touches no state torn down before it.
    AT_EXIT.call_once(|| unsafe {
        libc::atexit(remove_at_exit);
    });
    if let Ok(mut live) = LIVE.lock() {
        live.push(path.to_path_buf());
    }
}

/// Why a provider's private directory could not be made.
#[derive(Debug)]
pub(crate) struct SocketDirError(String);

impl fmt::Display for SocketDirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::error::Error for SocketDirError {}

impl SocketDir {
    /// Creates a fresh private directory where the environment says (see the module doc).
    pub(crate) fn create() -> Result<SocketDir, SocketDirError> {
        let parent = std::env::var_os("XDG_RUNTIME_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let role = format!(
            "the private directory for provider sockets (in {})",
            parent.display()
        );
        let parent = crate::privfile::check_dirs(&parent, &role).map_err(|e| {
            SocketDirError(format!(
                "{e} Providers listen there; set TMPDIR (or XDG_RUNTIME_DIR) to a directory only you can write to."
            ))
        })?;
        let rng = SystemRandom::new();
        for _ in 0..16 {
            let mut suffix = [0u8; 6];
            rng.fill(&mut suffix)
                .map_err(|_| SocketDirError("cannot read the system random source".to_string()))?;
            // Short: the socket path inside must stay under 108 bytes.
            let path = parent.join(format!(
                "nivis-{}-p{}",
                std::process::id(),
                hex::encode(suffix)
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Self::check_created(path),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(SocketDirError(format!(
                        "cannot create a private directory for provider sockets in {}: {e}",
                        parent.display()
                    )))
                }
            }
        }
        Err(SocketDirError(format!(
            "cannot create a private directory for provider sockets in {}: every name tried exists",
            parent.display()
        )))
    }

    /// Checks, on an opened descriptor, that what is at `path` is the directory just made:
    /// ours and 0700 (a umask cannot widen it, but someone could have swapped the name).
    fn check_created(path: PathBuf) -> Result<SocketDir, SocketDirError> {
        let opened = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .and_then(|f| f.metadata());
        let problem = match opened {
            Ok(meta) if meta.uid() == crate::privfile::euid() && meta.mode() & 0o7777 == 0o700 => {
                register(&path);
                return Ok(SocketDir { path });
            }
            Ok(meta) => format!("owner uid {}, mode {:o}", meta.uid(), meta.mode() & 0o7777),
            Err(e) => e.to_string(),
        };
        let _ = std::fs::remove_dir(&path);
        Err(SocketDirError(format!(
            "{} is not the private directory Nivis just created ({problem}); refusing to start providers there",
            path.display()
        )))
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
        if let Ok(mut live) = LIVE.lock() {
            live.retain(|p| p != &self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_is_private_and_removed_with_its_contents() {
        let dir = SocketDir::create().unwrap();
        let meta = std::fs::symlink_metadata(dir.path()).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o700);
        let name = dir
            .path()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            name.starts_with(&format!("nivis-{}-p", std::process::id())),
            "{name}"
        );
        std::fs::write(dir.path().join("left"), "x").unwrap();
        let path = dir.path().to_path_buf();
        drop(dir);
        assert!(!path.exists());
    }
}
