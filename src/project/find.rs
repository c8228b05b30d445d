//! Finding a plan's flake before Nix runs, and measuring what Nix would copy (DESIGN §50).
//!
//! Owns: the upward search for `flake.nix` (as Nix does it: from the directory up, stopping at
//! a git work-tree root or a filesystem boundary), the refusal to hand Nix a local flake
//! reference without `flake.nix` (Nix would copy the whole directory into the world-readable
//! store before failing), and the size warning for a tree Nix copies whole. Not: what Nix copies
//! (`project::copied_tree`), nor running Nix (`nixeval`).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::error::{MissingFlake, ProjectError};
use crate::nixeval::PlanSource;

/// Why the upward search for `flake.nix` stopped without one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotFound {
    /// The directory the search started in.
    pub(crate) start: PathBuf,
    /// The last directory searched.
    pub(crate) last: PathBuf,
    /// What stopped it there.
    pub(crate) stop: &'static str,
}

/// The nearest of `start` and its ancestors holding `flake.nix`, searched as Nix searches for
/// a path flake: a directory holding `.git` is the last one searched, and so is the last one
/// on `start`'s filesystem.
pub(crate) fn search_upward(start: &Path) -> Result<PathBuf, NotFound> {
    let device = |p: &Path| std::fs::symlink_metadata(p).map(|m| m.dev()).ok();
    let first = device(start);
    let mut last = start.to_path_buf();
    for dir in start.ancestors() {
        if device(dir) != first {
            return Err(NotFound {
                start: start.to_path_buf(),
                last,
                stop: "the filesystem boundary",
            });
        }
        if dir.join("flake.nix").is_file() {
            return Ok(dir.to_path_buf());
        }
        last = dir.to_path_buf();
        if dir.join(".git").exists() {
            return Err(NotFound {
                start: start.to_path_buf(),
                last,
                stop: "the git work-tree root",
            });
        }
    }
    Err(NotFound {
        start: start.to_path_buf(),
        last,
        stop: "the root directory",
    })
}

/// How a local flake reference names its directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    /// A bare path: Nix searches upward from it.
    Bare,
    /// `path:DIR` or `git+file://DIR`: the directory (or its `?dir=` subdirectory) itself.
    Exact,
}

/// The directory a local flake reference says holds `flake.nix`, with its `?dir=` query.
fn local_flake(flake: &str) -> Option<(PathBuf, Scheme)> {
    let split = |rest: &str| {
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let path = path.split('#').next().unwrap_or_default();
        let sub = query
            .split(['&', '#'])
            .find_map(|kv| kv.strip_prefix("dir="))
            .map(|s| s.replace("%20", " "));
        let dir = PathBuf::from(path.replace("%20", " "));
        Some((sub.map_or(dir.clone(), |s| dir.join(s)), Scheme::Exact))
    };
    if let Some(rest) = flake.strip_prefix("path:") {
        split(rest)
    } else if let Some(rest) = flake.strip_prefix("git+file://") {
        split(rest)
    } else if flake.starts_with('/') || flake.starts_with('.') {
        Some((PathBuf::from(flake), Scheme::Bare))
    } else {
        None
    }
}

/// Refuses a local flake reference without `flake.nix`, before anything reaches Nix, with what
/// to do instead. A plan file or a remote reference passes.
pub(crate) fn require_flake(source: &PlanSource) -> Result<(), ProjectError> {
    let PlanSource::Flake { flake, .. } = source else {
        return Ok(());
    };
    let Some((dir, scheme)) = local_flake(flake) else {
        return Ok(());
    };
    let missing = |missing| ProjectError::NoFlake {
        flake: flake.clone(),
        missing,
    };
    if !dir.is_dir() {
        return Err(missing(MissingFlake::NotADirectory(dir)));
    }
    if dir.join("flake.nix").is_file() {
        return Ok(());
    }
    match scheme {
        Scheme::Exact => Err(missing(MissingFlake::NoFlakeNix(dir))),
        Scheme::Bare => match search_upward(&dir) {
            Ok(_) => Ok(()),
            Err(n) => Err(missing(MissingFlake::NotFoundUpward(n))),
        },
    }
}

/// Past this size, a tree Nix copies whole earns a warning.
pub(super) const COPY_WARN_BYTES: u64 = 100 * 1000 * 1000;

/// The number of bytes in the regular files under `dir` (links not followed), or `None` once
/// past `bound` bytes (counting stops there) or past `max_entries` files and directories.
pub(super) fn tree_size(dir: &Path, bound: u64, max_entries: usize) -> Option<u64> {
    let (mut total, mut entries) = (0u64, 0usize);
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let Ok(read) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in read.flatten() {
            entries += 1;
            let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if meta.is_dir() {
                pending.push(e.path());
            } else if meta.is_file() {
                total += meta.len();
            }
            if total > bound || entries > max_entries {
                return None;
            }
        }
    }
    Some(total)
}

static WARNED: AtomicBool = AtomicBool::new(false);

/// The warning (given once per process) when Nix is about to copy a large tree whole for
/// `source`: a `path:` flake or a flake directory outside any git work tree. The caller prints
/// it (project prints nothing).
pub(crate) fn large_copy_warning(source: &PlanSource) -> Option<String> {
    let super::Copied::Whole(dir) = super::copied_tree(source) else {
        return None;
    };
    if WARNED.load(Ordering::Relaxed) || tree_size(&dir, COPY_WARN_BYTES, 200_000).is_some() {
        return None;
    }
    WARNED.store(true, Ordering::Relaxed);
    Some(format!(
        "Warning: Nix is about to copy {} whole (more than {} MB) into the world-readable \
         /nix/store to evaluate the plan, build output and all. Make the project a git \
         repository (Nix then copies only tracked files; list build output in .gitignore) and \
         name it as a directory or `git+file://` reference, not `path:`.",
        dir.display(),
        COPY_WARN_BYTES / 1000 / 1000
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flake(f: &str) -> PlanSource {
        PlanSource::Flake {
            flake: f.into(),
            attr: "nivis.plan".into(),
        }
    }

    #[test]
    fn the_search_stops_at_a_git_root_and_finds_parents() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let repo = root.join("repo");
        let deep = repo.join("infra/modules");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        // A flake above the work tree is not found, as Nix does not find it.
        std::fs::write(root.join("flake.nix"), "{}").unwrap();
        let n = search_upward(&deep).unwrap_err();
        assert_eq!(
            (n.last.as_path(), n.stop),
            (repo.as_path(), "the git work-tree root")
        );
        let err = require_flake(&flake(deep.to_str().unwrap()))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("parent directories up to") && err.contains("--file"),
            "{err}"
        );
        std::fs::write(repo.join("infra/flake.nix"), "{}").unwrap();
        assert_eq!(search_upward(&deep).unwrap(), repo.join("infra"));
        assert!(require_flake(&flake(deep.to_str().unwrap())).is_ok());
        // path: and git+file: name the directory itself.
        let exact = format!("path:{}", deep.display());
        assert!(require_flake(&flake(&exact))
            .unwrap_err()
            .to_string()
            .contains("no flake.nix in"));
        let sub = format!("git+file://{}?dir=infra", repo.display());
        assert!(require_flake(&flake(&sub)).is_ok());
        assert!(require_flake(&flake("github:o/r")).is_ok());
    }

    #[test]
    fn sizes_stop_counting_past_the_bound() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("a/b")).unwrap();
        std::fs::write(tmp.path().join("a/b/f"), vec![0u8; 1000]).unwrap();
        std::fs::write(tmp.path().join("g"), vec![0u8; 24]).unwrap();
        assert_eq!(tree_size(tmp.path(), 2000, 100), Some(1024));
        assert_eq!(tree_size(tmp.path(), 1000, 100), None);
        assert_eq!(tree_size(tmp.path(), 2000, 2), None);
    }
}
