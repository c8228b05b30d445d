//! The one rule for every file that holds or drives secrets: the state's snapshot, journal and
//! lock, the rescue file and its directory, the run directory and its files, `--var-file`
//! files, saved plans and encryption key files.
//!
//! Owns: deciding whether a file (or a directory for such files) may be trusted, opening it so
//! that what was checked is what is used, and the refusal, which names the path, what is wrong
//! and the fix. Not: where these files are (their owners: `state`, `rundir`, `cli::vars`,
//! `engine::plan_file`), what they hold, nor whether Nix copies them into the store (`project`).
//!
//! The rule, OpenSSH's StrictModes applied to every such file:
//! - the file is ours (owner = effective uid) and a regular file, not writable by group or
//!   others;
//! - every directory above it is owned by us or root and not writable by group or others,
//!   unless it is sticky (`/tmp`: others can add names there but cannot rename or remove ours);
//! - it is opened `O_NOFOLLOW` in its real directory (links in the directories above are
//!   resolved first, then each real directory is judged), so a link planted at its name is
//!   never followed, and the checks are made on the opened descriptor (`fstat`), never on a
//!   path that could change between the check and the use.
//!
//! Who can change a directory on the way can replace what it names; who owns the file can
//! rewrite it. Either is an attacker who can feed the victim's run their values.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The effective uid of this process: the owner every private file must have.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Why a directory that holds private files may be changed by someone else, or `None`.
pub(crate) fn unsafe_dir(meta: &Metadata) -> Option<String> {
    let mode = meta.mode() & 0o7777;
    if !meta.is_dir() {
        return Some("is not a directory".into());
    }
    if meta.uid() != euid() && meta.uid() != 0 {
        return Some(format!(
            "is owned by uid {}, not by you (uid {}) or root, so its owner could replace what is in it",
            meta.uid(),
            euid()
        ));
    }
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Some(format!(
            "can be written by other users (mode {mode:o}) and is not sticky, so they could replace what is in it"
        ));
    }
    None
}

/// Why a file that holds or drives secrets may not be trusted, or `None` (see the module doc).
pub(crate) fn unsafe_file(meta: &Metadata) -> Option<String> {
    let mode = meta.mode() & 0o7777;
    if !meta.is_file() {
        return Some("is not a regular file".into());
    }
    if meta.uid() != euid() {
        return Some(format!(
            "is owned by uid {}, not by you (uid {}), so its owner chooses what it says",
            meta.uid(),
            euid()
        ));
    }
    if mode & 0o022 != 0 {
        return Some(format!(
            "can be written by other users (mode {mode:o}), so they choose what it says"
        ));
    }
    None
}

/// Why a file that holds or drives secrets, or a directory above it, is refused or cannot be
/// judged. `what` is the file's role in the message ("the --var-file").
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The directory cannot be made real (it is missing, or a link in it dangles).
    NoDirectory {
        /// The file's role.
        what: String,
        /// The directory as given.
        dir: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// A directory above the file cannot be examined.
    Unreadable {
        /// The file's role.
        what: String,
        /// The directory or file.
        path: PathBuf,
        /// Whether `path` is the file itself rather than a directory above it.
        is_file: bool,
        /// What the system said.
        source: io::Error,
    },
    /// A directory above the file could be changed by someone else.
    UnsafeDirectory {
        /// The file's role.
        what: String,
        /// The real directory the file is in.
        real: PathBuf,
        /// The directory on the way that is unsafe.
        ancestor: PathBuf,
        /// What is wrong with it (owner, mode), as [`unsafe_dir`] says.
        problem: String,
    },
    /// The file itself may not be trusted.
    UnsafeFile {
        /// The file's role.
        what: String,
        /// The file.
        path: PathBuf,
        /// What is wrong with it (type, owner, mode), as [`unsafe_file`] says.
        problem: String,
    },
    /// The path ends in `..` or `/`, so it names no file.
    NotAFileName {
        /// The file's role.
        what: String,
        /// The path as given.
        path: PathBuf,
    },
    /// The file's name is a symbolic link, which is never followed.
    Symlink {
        /// The file's role.
        what: String,
        /// The path as given.
        path: PathBuf,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NoDirectory { what, dir, source } => {
                write!(f, "{what}: the directory {}: {source}", dir.display())
            }
            Refusal::Unreadable {
                what,
                path,
                is_file: false,
                source,
            } => write!(f, "{what}: {}: {source}", path.display()),
            Refusal::Unreadable { what, path, source, .. } => {
                write!(f, "{what} {}: {source}", path.display())
            }
            Refusal::UnsafeDirectory {
                what,
                real,
                ancestor,
                problem,
            } => write!(
                f,
                "refusing {what} in {}: the directory {} {problem}. Nivis keeps secrets there only where nobody else can swap them: fix the directory (chown it to yourself, chmod go-w) or use a directory only you can write to.",
                real.display(),
                ancestor.display()
            ),
            Refusal::UnsafeFile { what, path, problem } => write!(
                f,
                "refusing {what} {}: it {problem}. A file that holds or drives secrets must be yours and writable only by you: check what it holds, then `chown $(id -u) {}` and `chmod go-w {}`, or remove it and run again.",
                path.display(),
                path.display(),
                path.display()
            ),
            Refusal::NotAFileName { what, path } => {
                write!(f, "{what} {}: not a file name", path.display())
            }
            Refusal::Symlink { what, path } => write!(
                f,
                "refusing {what} {}: it is a symbolic link, and Nivis never follows a link at the name of a file that holds or drives secrets (another user could point it anywhere). Replace the link with the file itself.",
                path.display()
            ),
        }
    }
}

impl std::error::Error for Refusal {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Refusal::NoDirectory { source, .. } | Refusal::Unreadable { source, .. } => {
                Some(source)
            }
            _ => None,
        }
    }
}

/// Checks `dir` (made real: links resolved) and every directory above it against the rule;
/// returns the real path. `what` names the role of the file in the refusal ("the --var-file").
pub(crate) fn check_dirs(dir: &Path, what: &str) -> Result<PathBuf, Refusal> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let real = dir.canonicalize().map_err(|source| Refusal::NoDirectory {
        what: what.into(),
        dir: dir.to_path_buf(),
        source,
    })?;
    for ancestor in real.ancestors() {
        let meta = std::fs::symlink_metadata(ancestor).map_err(|source| Refusal::Unreadable {
            what: what.into(),
            path: ancestor.to_path_buf(),
            is_file: false,
            source,
        })?;
        if let Some(problem) = unsafe_dir(&meta) {
            return Err(Refusal::UnsafeDirectory {
                what: what.into(),
                real: real.clone(),
                ancestor: ancestor.to_path_buf(),
                problem,
            });
        }
    }
    Ok(real)
}

/// Refuses the opened `file` (at `path`) unless the rule allows it.
pub(crate) fn check_opened(file: &File, path: &Path, what: &str) -> Result<(), Refusal> {
    let meta = file.metadata().map_err(|source| Refusal::Unreadable {
        what: what.into(),
        path: path.to_path_buf(),
        is_file: true,
        source,
    })?;
    match unsafe_file(&meta) {
        None => Ok(()),
        Some(problem) => Err(Refusal::UnsafeFile {
            what: what.into(),
            path: path.to_path_buf(),
            problem,
        }),
    }
}

/// The real path of `path`: its directory with links resolved (and judged by [`check_dirs`]),
/// and its own name, which is never resolved.
pub(crate) fn real_path(path: &Path, what: &str) -> Result<PathBuf, Refusal> {
    let name = path.file_name().ok_or_else(|| Refusal::NotAFileName {
        what: what.into(),
        path: path.to_path_buf(),
    })?;
    let dir = check_dirs(path.parent().unwrap_or(Path::new(".")), what)?;
    Ok(dir.join(name))
}

/// Opens `path` with `options` under the rule: its directories judged, its last component
/// never followed (`O_NOFOLLOW`), the opened file judged. The error names path and fix.
pub(crate) fn open(path: &Path, options: &mut OpenOptions, what: &str) -> Result<File, OpenError> {
    // A directory that does not exist is a missing file (`NotFound`), not a refusal.
    let parent = path.parent().filter(|d| !d.as_os_str().is_empty());
    parent
        .unwrap_or(Path::new("."))
        .canonicalize()
        .map_err(OpenError::Io)?;
    let real = real_path(path, what).map_err(OpenError::Refused)?;
    let file = options
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&real)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                OpenError::Refused(Refusal::Symlink {
                    what: what.into(),
                    path: path.to_path_buf(),
                })
            } else {
                OpenError::Io(e)
            }
        })?;
    check_opened(&file, path, what).map_err(OpenError::Refused)?;
    Ok(file)
}

/// Opens the existing `path` for reading under the rule (see [`open`]).
pub(crate) fn open_read(path: &Path, what: &str) -> Result<File, OpenError> {
    open(path, OpenOptions::new().read(true), what)
}

/// Why [`open`] failed.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// The rule refuses the file or a directory above it (the message says why and the fix).
    Refused(Refusal),
    /// The system call failed (a missing file is `NotFound` here).
    Io(io::Error),
}

impl OpenError {
    /// As an `io::Error` (a refusal becomes `PermissionDenied` with its message).
    pub(crate) fn into_io(self) -> io::Error {
        match self {
            OpenError::Refused(m) => io::Error::new(io::ErrorKind::PermissionDenied, m.to_string()),
            OpenError::Io(e) => e,
        }
    }

    /// The message, prefixed with `path` when it is a system error.
    pub(crate) fn message(&self, path: &Path) -> String {
        match self {
            OpenError::Refused(m) => m.to_string(),
            OpenError::Io(e) => format!("{}: {e}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_file_writable_by_others_or_below_a_writable_directory_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("d");
        std::fs::create_dir(&dir).unwrap();
        let f = dir.join("vars.json");
        std::fs::write(&f, "{}").unwrap();
        chmod(&f, 0o600);
        assert!(open_read(&f, "the --var-file").is_ok());
        chmod(&f, 0o620);
        let e = open_read(&f, "the --var-file").unwrap_err().message(&f);
        assert!(
            e.contains("written by other users") && e.contains("chmod go-w"),
            "{e}"
        );
        chmod(&f, 0o600);
        chmod(&dir, 0o770);
        let e = open_read(&f, "the --var-file").unwrap_err().message(&f);
        assert!(
            e.contains(&dir.display().to_string()) && e.contains("not sticky"),
            "{e}"
        );
        chmod(&dir, 0o1777);
        assert!(
            open_read(&f, "the --var-file").is_ok(),
            "a sticky directory"
        );
    }

    #[test]
    fn a_link_at_the_name_is_never_followed_but_links_above_are_resolved() {
        let root = tempfile::tempdir().unwrap();
        let f = root.path().join("real.json");
        std::fs::write(&f, "{}").unwrap();
        let link = root.path().join("link.json");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        let e = open_read(&link, "the --var-file")
            .unwrap_err()
            .message(&link);
        assert!(e.contains("symbolic link"), "{e}");
        let dir_link = root.path().join("dl");
        std::os::unix::fs::symlink(root.path(), &dir_link).unwrap();
        assert!(open_read(&dir_link.join("real.json"), "x").is_ok());
    }
}
