//! The private directory a run keeps its files in while it works (the ledger, the channel of
//! secrets for Nix).
//!
//! Owns: choosing where it is created, creating it so that nobody else can own, enter or
//! prepare it, writing files into it without following links, and removing it when the run
//! ends; and [`write_private_file`], the same careful write for a private file elsewhere (`state
//! pull --out`). Not: what the files contain (`ledger`).
//!
//! The directory is new for every run: `nivis-XXXXXXXX` with a random name, created with
//! `mkdir(2)` mode 0700 (which fails if the name exists, so a directory prepared by someone
//! else is never adopted), under `$XDG_RUNTIME_DIR` when it is set and else under `$TMPDIR`
//! (default `/tmp`). The parent must not let others swap our directory out: a runtime
//! directory owned by another user or writable by group or others is refused (the XDG spec
//! requires 0700); a shared temp directory must be sticky if others can write to it. After
//! creation the directory is checked again with `lstat` (ours, a real directory, mode 0700).
//! Files are created with `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600, under a temporary name,
//! written, synced, and renamed over the final name.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A private directory, removed (with everything in it) when dropped.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
}

fn uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// Why a directory may not hold private files, or `None` if it may.
fn unsafe_parent(meta: &std::fs::Metadata, runtime: bool) -> Option<String> {
    let mode = meta.mode() & 0o7777;
    if !meta.is_dir() {
        return Some("is not a directory".into());
    }
    if runtime {
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
    } else if mode & 0o002 != 0 && mode & 0o1000 == 0 {
        return Some(format!(
            "can be written by every user but is not sticky (mode {mode:o}), so they could replace what we create there"
        ));
    }
    None
}

/// 8 random bytes as hex, from the kernel.
fn random_suffix() -> std::io::Result<String> {
    let mut bytes = [0u8; 8];
    File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex::encode(bytes))
}

impl RunDir {
    /// Creates a fresh private directory where the environment says (see the module doc).
    pub fn create() -> Result<RunDir, String> {
        let runtime = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty());
        let (parent, is_runtime) = match &runtime {
            Some(dir) => (PathBuf::from(dir), true),
            None => (std::env::temp_dir(), false),
        };
        let what = if is_runtime {
            format!("XDG_RUNTIME_DIR={}", parent.display())
        } else {
            format!("the temporary directory {}", parent.display())
        };
        let meta = std::fs::metadata(&parent)
            .map_err(|e| format!("{what}: {e}; Nivis keeps its private run files there"))?;
        if let Some(problem) = unsafe_parent(&meta, is_runtime) {
            let fix = if is_runtime {
                "fix it (chown to yourself, chmod 700) or unset XDG_RUNTIME_DIR"
            } else {
                "set TMPDIR to a directory only you can write to"
            };
            return Err(format!(
                "{what} {problem}: Nivis keeps the ledger and the channel of secrets for Nix there; {fix}"
            ));
        }
        Self::create_in(&parent)
    }

    /// Creates a fresh private directory in `parent` (already judged safe).
    pub fn create_in(parent: &Path) -> Result<RunDir, String> {
        let mut last = None;
        for _ in 0..16 {
            let name = format!(
                "nivis-{}",
                random_suffix().map_err(|e| format!("reading /dev/urandom: {e}"))?
            );
            let path = parent.join(name);
            let mut builder = std::fs::DirBuilder::new();
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            match builder.create(&path) {
                Ok(()) => {
                    let dir = RunDir { path };
                    dir.verify()?;
                    return Ok(dir);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => {
                    return Err(format!(
                        "cannot create a private directory in {}: {e}",
                        parent.display()
                    ))
                }
            }
        }
        Err(format!(
            "cannot create a private directory in {}: {}",
            parent.display(),
            last.map(|e| e.to_string()).unwrap_or_default()
        ))
    }

    /// Checks, without following links, that the directory is ours, a directory, and 0700
    /// (a umask cannot widen it, but another process could have swapped it).
    fn verify(&self) -> Result<(), String> {
        let meta = std::fs::symlink_metadata(&self.path)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        let mode = meta.mode() & 0o7777;
        if !meta.is_dir() || meta.uid() != uid() || mode != 0o700 {
            return Err(format!(
                "{} is not the private directory Nivis just created (owner uid {}, mode {mode:o}); refusing to write there",
                self.path.display(),
                meta.uid()
            ));
        }
        Ok(())
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `name` (a plain file name) with mode 0600: into a new temporary file that may not
    /// exist or be a link, synced, then renamed over `name`. Returns the final path.
    pub fn write(&self, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
        let target = self.path.join(name);
        write_private_file(&target, bytes)?;
        Ok(target)
    }

    /// Removes `name` if it exists.
    pub fn remove(&self, name: &str) {
        let _ = std::fs::remove_file(self.path.join(name));
    }
}

/// Writes `bytes` to `target` (mode 0600, replacing what is there, never writing through a
/// link) through a new temporary file beside it (see [`write_private`]).
pub fn write_private_file(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
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

/// Writes `bytes` to `target` (mode 0600) through `tmp`, a new file that may neither exist
/// already nor be a link: created `O_CREAT | O_EXCL | O_NOFOLLOW`, written, synced, renamed over
/// `target`. `tmp` is removed if anything fails.
pub fn write_private(tmp: &Path, target: &Path, bytes: &[u8]) -> std::io::Result<()> {
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
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
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
    fn unsafe_parents_are_named() {
        let d = tempfile::tempdir().unwrap();
        let set = |m| std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(m));
        set(0o700).unwrap();
        let meta = || std::fs::metadata(d.path()).unwrap();
        assert!(unsafe_parent(&meta(), true).is_none());
        set(0o770).unwrap();
        assert!(unsafe_parent(&meta(), true)
            .unwrap()
            .contains("written by other users"));
        set(0o777).unwrap();
        assert!(unsafe_parent(&meta(), false)
            .unwrap()
            .contains("not sticky"));
        set(0o1777).unwrap();
        assert!(unsafe_parent(&meta(), false).is_none());
    }
}
