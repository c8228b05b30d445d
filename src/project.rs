//! Where a project's state lives, so that Nix never copies it into the world-readable store.
//!
//! Owns: the default state location (one directory per project under `$XDG_STATE_HOME`), the
//! refusal of a state path inside a directory Nix copies when it evaluates the plan, and moving
//! a state that older versions kept in the working directory. Not: the state's format, journal
//! or lock (`state`, used only through its public API), nor evaluating the plan (`nixeval`), nor
//! printing: a move made, a shallow clone or a large copy comes back as a note the caller prints.
//!
//! What Nix copies into `/nix/store` when it evaluates a plan (checked with Nix 2.8):
//!
//! | plan given as                       | copied                                        |
//! |-------------------------------------|-----------------------------------------------|
//! | a directory outside any git work tree | the whole directory (a `path:` flake)       |
//! | `path:DIR`                          | the whole directory, git or not               |
//! | a directory in a git work tree, or `git+file:` | the repository's tracked files (a flake in a subdirectory: the whole repository's) |
//! | `--file plan.nix`                   | nothing (only what the plan itself copies, e.g. `${./.}`) |
//! | `github:…` and other remote refs    | the remote source, never local files          |
//!
//! So the state defaults to `$XDG_STATE_HOME/nivis/projects/<name>-<hash>/nivis.state.json`
//! (`~/.local/state/…` without XDG_STATE_HOME), outside every copied tree, keyed by the
//! project's identity (`identity`: the name the flake declares, else its git history, else its
//! canonical path), so that a moved, renamed or cloned project keeps its state; states kept
//! under an earlier key are moved to it. A `--state` inside a tree Nix copies whole is refused;
//! inside a git work tree it is accepted only when git ignores it (an ignored file is never
//! tracked, so never copied nor committed). Finding `flake.nix` before Nix runs, and the size of
//! what it would copy: `find`.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::nixeval::{git_root, PlanSource};
use crate::state::{audit, LockHolder, StatePaths, Store, DEFAULT_PATH};
use crate::xdg::{state_home, NoStateHome};

mod error;
mod find;
mod identity;
mod placement;
mod trust;

pub(crate) use error::{CopiedBy, PrivateFile, ProjectError};
pub(crate) use find::{large_copy_warning, require_flake, search_upward};
use identity::GitLineage;
pub(crate) use identity::{Identity, IdentityKind};
pub(crate) use placement::{declared_state_path, known_state_path, place, Placement};
pub(crate) use trust::{check_code, check_secret_file};

/// The tree Nix copies into the store for a plan source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Copied {
    /// Everything under this directory.
    Whole(PathBuf),
    /// The tracked files of the git work tree rooted here.
    GitTracked(PathBuf),
    /// No local files (a plan file, a remote flake).
    Nothing,
}

/// A local directory named by a flake reference (`DIR`, `path:DIR`, `git+file://DIR`), and
/// whether it was asked for as `path:`.
fn flake_dir(flake: &str) -> Option<(PathBuf, bool)> {
    let strip_query = |s: &str| s.split(['?', '#']).next().unwrap_or_default().to_string();
    let (text, is_path) = if let Some(rest) = flake.strip_prefix("path:") {
        (strip_query(rest), true)
    } else if let Some(rest) = flake.strip_prefix("git+file://") {
        (strip_query(rest), false)
    } else if flake.starts_with('/') || flake.starts_with('.') {
        (flake.to_string(), false)
    } else {
        return None;
    };
    let dir = std::fs::canonicalize(&text).ok()?;
    dir.is_dir().then_some((dir, is_path))
}

/// What Nix copies for `source`.
pub(crate) fn copied_tree(source: &PlanSource) -> Copied {
    match source {
        PlanSource::File { .. } => Copied::Nothing,
        // A directory without flake.nix is not a flake (yet): nothing is copied, and a state
        // command may run there.
        PlanSource::Flake { flake, .. } => {
            match flake_dir(flake).filter(|(dir, _)| dir.join("flake.nix").is_file()) {
                None => Copied::Nothing,
                Some((dir, true)) => Copied::Whole(dir),
                Some((dir, false)) => match git_root(&dir) {
                    Some(root) => Copied::GitTracked(root),
                    None => Copied::Whole(dir),
                },
            }
        }
    }
}

/// `path` made absolute with `.`/`..` resolved through the parts that exist.
fn normalise(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    for ancestor in abs.ancestors() {
        if let Ok(real) = std::fs::canonicalize(ancestor) {
            let rest = abs.strip_prefix(ancestor).unwrap_or(Path::new(""));
            return if rest.as_os_str().is_empty() {
                real
            } else {
                real.join(rest)
            };
        }
    }
    abs
}

/// Whether git ignores `path` in the work tree at `root` (a tracked file is not ignored).
fn git_ignores(root: &Path, path: &Path) -> bool {
    crate::child::git()
        .arg("-C")
        .arg(root)
        .args(["check-ignore", "-q", "--"])
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The files of the state at `path`, where they really are: a state path that is a symlink
/// keeps every file beside its target (as [`Store`] does).
fn resolved_files(path: &Path) -> Result<StatePaths, ProjectError> {
    let files = StatePaths::resolve(path)?;
    Ok(StatePaths::new(&normalise(&files.snapshot)))
}

/// Refuses a state path that Nix would copy into the store when it evaluates `source`:
/// checked where its files really are (a symlink is followed), the rescue file included.
pub(crate) fn check_state_path(state: &Path, source: &PlanSource) -> Result<(), ProjectError> {
    let files = resolved_files(state)?;
    let state = files.snapshot.clone();
    match copied_tree(source) {
        Copied::Whole(dir) if state.starts_with(&dir) => Err(ProjectError::InCopiedTree {
            file: PrivateFile::State {
                default: projects_dir().map(|projects| default_state_in(&projects, source)),
            },
            path: state,
            copied: CopiedBy::Whole(dir),
        }),
        Copied::GitTracked(root) if state.starts_with(&root) => {
            // Every file that may hold secrets (the lock holds none).
            let secret_files = [
                &files.snapshot,
                &files.journal,
                &files.tmp,
                &files.rescue,
                &files.backup,
            ];
            if secret_files.iter().all(|f| git_ignores(&root, f)) {
                return Ok(());
            }
            Err(ProjectError::InCopiedTree {
                file: PrivateFile::State {
                    default: projects_dir().map(|projects| default_state_in(&projects, source)),
                },
                path: state,
                copied: CopiedBy::GitTracked(root),
            })
        }
        _ => Ok(()),
    }
}

/// Refuses `path`, a file about to receive secrets (`state pull --out`), where Nix would copy
/// it into the store when it evaluates `source` (see [`check_state_path`]).
pub(crate) fn check_private_file(path: &Path, source: &PlanSource) -> Result<(), ProjectError> {
    let path = normalise(path);
    let copied = match copied_tree(source) {
        Copied::Whole(dir) if path.starts_with(&dir) => CopiedBy::Whole(dir),
        Copied::GitTracked(root) if path.starts_with(&root) && !git_ignores(&root, &path) => {
            CopiedBy::GitTracked(root)
        }
        _ => return Ok(()),
    };
    Err(ProjectError::InCopiedTree {
        file: PrivateFile::StateCopy,
        path,
        copied,
    })
}

/// Refuses `--var-file path` where Nix would copy it into the store when it evaluates
/// `source` (a plain or `path:` flake directory, or a git flake that does not ignore it):
/// variable files hold secrets as much as the state does. Checked before any evaluation.
pub(crate) fn check_var_file(path: &Path, source: &PlanSource) -> Result<(), ProjectError> {
    let real = path.canonicalize().unwrap_or_else(|_| normalise(path));
    let copied = match copied_tree(source) {
        Copied::Whole(dir) if real.starts_with(&dir) => CopiedBy::Whole(dir),
        Copied::GitTracked(root) if real.starts_with(&root) && !git_ignores(&root, &real) => {
            CopiedBy::GitTracked(root)
        }
        _ => return Ok(()),
    };
    Err(ProjectError::InCopiedTree {
        file: PrivateFile::VarFile {
            given: path.to_path_buf(),
        },
        path: real,
        copied,
    })
}

/// What identifies a project: its canonical flake directory or plan file, or the flake
/// reference as written when it is remote.
fn project_key(source: &PlanSource) -> (String, String) {
    let (key, name) = match source {
        PlanSource::File { path, .. } => {
            let p = normalise(path);
            let name = p
                .file_stem()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (p.display().to_string(), name)
        }
        PlanSource::Flake { flake, .. } => match flake_dir(flake) {
            Some((dir, _)) => {
                let name = dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                (dir.display().to_string(), name)
            }
            None => (flake.clone(), flake.clone()),
        },
    };
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    (key, name.trim_start_matches('.').to_string())
}

/// `$XDG_STATE_HOME/nivis/projects`, where each project's state directory is.
fn projects_dir() -> Result<PathBuf, NoStateHome> {
    Ok(state_home()?.join("nivis/projects"))
}

/// The path-keyed state path of the project `source` names: where Nivis kept every state
/// before project identities, and still keeps the state of a project with no other identity.
pub(crate) fn default_state_path(source: &PlanSource) -> Result<PathBuf, ProjectError> {
    Ok(default_state_in(&projects_dir()?, source))
}

/// [`default_state_path`] below the projects directory `projects`.
fn default_state_in(projects: &Path, source: &PlanSource) -> PathBuf {
    let (key, name) = project_key(source);
    let location = Identity::location(key, name);
    location.state_dir(projects).join(DEFAULT_PATH)
}

/// The project's canonical local directory (a flake's) or plan file, if it is local.
fn local_project(source: &PlanSource) -> Option<PathBuf> {
    match source {
        PlanSource::File { path, .. } => Some(normalise(path)),
        PlanSource::Flake { flake, .. } => flake_dir(flake).map(|(dir, _)| dir),
    }
}

/// The git history of the work tree holding the project, if it is local and in one.
fn git_lineage(source: &PlanSource) -> GitLineage {
    let Some(project) = local_project(source) else {
        return GitLineage::None;
    };
    let dir = if project.is_dir() {
        project.clone()
    } else {
        project.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    match git_root(&dir) {
        Some(root) => GitLineage::of(&root, &project),
        None => GitLineage::None,
    }
}

/// Creates the directory of a default state path (mode 0700 for what is created).
pub(crate) fn create_state_dir(state: &Path) -> Result<(), ProjectError> {
    let Some(dir) = state.parent() else {
        return Ok(());
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| ProjectError::CreateStateDir {
            dir: dir.to_path_buf(),
            source,
        })
}

/// Moves a state that an older Nivis kept at `legacy` (the working directory) to `target`:
/// locked, compacted, copied (temp file, fsync, rename, fsync), checked, and only then removed
/// from the old place. Returns the message to show, or `None` if there was nothing to move.
/// A crash at any point leaves a complete state in at least one place; if both exist and hold
/// the same state, the old copy is removed; if they differ, the user decides.
///
/// A `legacy` path that is a symlink is followed: the files beside its target are moved, and
/// the link removed. A rescue file left by a failed run counts as a state (opening folds it in).
pub(crate) fn move_legacy_state(
    legacy: &Path,
    target: &Path,
) -> Result<Option<String>, ProjectError> {
    move_state(
        legacy,
        target,
        "where older Nivis versions kept it",
        "Nix copies a plain-directory or path: flake into the world-readable /nix/store, state included. Pass --state to keep it elsewhere.",
    )
}

/// Moves the state at `legacy` (`was` says what that place is) to `target`, as
/// [`move_legacy_state`] describes; the message ends with `because`.
fn move_state(
    legacy: &Path,
    target: &Path,
    was: &'static str,
    because: &str,
) -> Result<Option<String>, ProjectError> {
    let old = resolved_files(legacy)?;
    if ![&old.snapshot, &old.journal, &old.rescue]
        .iter()
        .any(|f| f.exists())
    {
        return Ok(None);
    }
    if old.snapshot == normalise(target) {
        return Ok(None);
    }
    let fail = |step: &'static str, cause: Box<dyn std::error::Error + Send + Sync>| {
        ProjectError::MoveFailed {
            from: legacy.to_path_buf(),
            to: target.to_path_buf(),
            step,
            cause,
        }
    };
    let mut store = Store::open(
        legacy,
        LockHolder::current("nivis (moving the state)"),
        None,
    )
    .map_err(|e| fail("opening it", e.into()))?;
    store
        .compact()
        .map_err(|e| fail("compacting it", e.into()))?;
    let new = StatePaths::new(target);
    if new.snapshot.exists() || new.journal.exists() || new.rescue.exists() {
        let there =
            Store::read_only(target).map_err(|e| fail("reading the new place", e.into()))?;
        if !same_state(&there, store.state()) {
            return Err(ProjectError::TwoStates {
                old: legacy.to_path_buf(),
                was,
                new: target.to_path_buf(),
            });
        }
    } else {
        create_state_dir(target)?;
        let bytes = std::fs::read(&old.snapshot).map_err(|e| fail("reading it", e.into()))?;
        copy_durably(&bytes, target).map_err(|e| fail("writing the copy", e.into()))?;
        let copied = Store::read_only(target).map_err(|e| fail("reading the copy", e.into()))?;
        if !same_state(&copied, store.state()) {
            let _ = std::fs::remove_file(target);
            return Err(fail(
                "checking the copy",
                "it differs from the original".into(),
            ));
        }
    }
    move_audit_log(&old.snapshot, target).map_err(|e| fail("moving its audit log", e.into()))?;
    remove_old_files(&old, legacy).map_err(|e| fail("removing the old files", e.into()))?;
    drop(store);
    let _ = std::fs::remove_file(&old.lock);
    Ok(Some(format!(
        "Moved the state from {} ({was}) to {}: {because}",
        legacy.display(),
        target.display()
    )))
}

/// Removes the files of the moved state `old` (the backup the open may have written too: it
/// holds the old snapshot) and `legacy` itself when it is a link; a file already gone is fine.
fn remove_old_files(old: &StatePaths, legacy: &Path) -> std::io::Result<()> {
    let link = std::fs::symlink_metadata(legacy).is_ok_and(|m| m.file_type().is_symlink());
    let link = link.then_some(legacy);
    for f in [
        &old.snapshot,
        &old.journal,
        &old.tmp,
        &old.rescue,
        &old.backup,
    ]
    .into_iter()
    .map(PathBuf::as_path)
    .chain(link)
    {
        if let Err(e) = std::fs::remove_file(f) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Moves the audit log beside the state at `from` to beside `to` (copied privately, then the
/// old one removed); when `to` already keeps a log, both stay where they are (two chains are
/// never spliced).
fn move_audit_log(from: &Path, to: &Path) -> std::io::Result<()> {
    let (old, new) = (audit::local_path(from), audit::local_path(to));
    let bytes = match std::fs::read(&old) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if new.exists() {
        return Ok(());
    }
    let tmp = PathBuf::from(format!("{}.tmp", new.display()));
    let _ = std::fs::remove_file(&tmp);
    crate::rundir::write_private(&tmp, &new, &bytes)?;
    std::fs::remove_file(&old)
}

/// The same resources in the same state (serials differ after compactions).
fn same_state(a: &crate::state::StateFile, b: &crate::state::StateFile) -> bool {
    a.lineage == b.lineage && a.resources == b.resources
}

/// Writes `bytes` to `target` through the state's temporary file (private, never a link),
/// renamed into place, and the directory synced.
fn copy_durably(bytes: &[u8], target: &Path) -> std::io::Result<()> {
    let tmp = StatePaths::new(target).tmp;
    let _ = std::fs::remove_file(&tmp);
    crate::rundir::write_private(&tmp, target, bytes)?;
    if let Some(dir) = target.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flake(dir: &Path) -> PlanSource {
        PlanSource::Flake {
            flake: dir.display().to_string(),
            attr: "nivis.plan".into(),
        }
    }

    #[test]
    fn what_nix_copies() {
        let root = tempfile::tempdir().unwrap();
        let plain = root.path().join("plain");
        let repo = root.path().join("repo");
        std::fs::create_dir_all(&plain).unwrap();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("infra")).unwrap();
        assert_eq!(
            copied_tree(&flake(&plain)),
            Copied::Nothing,
            "not a flake yet"
        );
        for d in [&plain, &repo, &repo.join("infra")] {
            std::fs::write(d.join("flake.nix"), "{ outputs = _: { }; }").unwrap();
        }
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap();
        assert_eq!(copied_tree(&flake(&plain)), Copied::Whole(canon(&plain)));
        assert_eq!(
            copied_tree(&flake(&repo.join("infra"))),
            Copied::GitTracked(canon(&repo))
        );
        let path_ref = PlanSource::Flake {
            flake: format!("path:{}?dir=x", repo.display()),
            attr: "a".into(),
        };
        assert_eq!(copied_tree(&path_ref), Copied::Whole(canon(&repo)));
        let remote = PlanSource::Flake {
            flake: "github:o/r".into(),
            attr: "a".into(),
        };
        assert_eq!(copied_tree(&remote), Copied::Nothing);
        let file = PlanSource::File {
            path: plain.join("plan.nix"),
            attr: None,
        };
        assert_eq!(copied_tree(&file), Copied::Nothing);

        let err = check_state_path(&plain.join("sub/../nivis.state.json"), &flake(&plain))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("copies") && err.contains("Omit --state"),
            "{err}"
        );
        assert!(check_state_path(&root.path().join("s.json"), &flake(&plain)).is_ok());
        assert!(check_state_path(&plain.join("s.json"), &file).is_ok());
    }

    fn state_with(path: &Path, ids: &[&str]) {
        let mut store = Store::open(path, LockHolder::current("test"), None).unwrap();
        let changes: Vec<crate::state::Change> = ids
            .iter()
            .map(|id| {
                crate::state::Change::Put(crate::state::ResourceState::new(
                    *id,
                    crate::state::ResourceKind::Managed,
                    "p",
                    "p",
                    "t",
                    serde_json::json!({"id": id}),
                ))
            })
            .collect();
        store
            .commit(&changes, crate::state::Mutation::for_tests())
            .unwrap();
        // No close: the change is only in the journal, as after a crash.
    }

    #[test]
    fn a_legacy_state_is_moved_whole_and_never_lost() {
        let root = tempfile::tempdir().unwrap();
        let legacy = root.path().join("proj/nivis.state.json");
        std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
        let target = root.path().join("home/state/p-1/nivis.state.json");
        assert_eq!(move_legacy_state(&legacy, &target).unwrap(), None);

        state_with(&legacy, &["a", "b"]);
        let before = Store::read_only(&legacy).unwrap();
        let message = move_legacy_state(&legacy, &target).unwrap().unwrap();
        assert!(message.starts_with("Moved the state"), "{message}");
        assert!(
            same_state(&Store::read_only(&target).unwrap(), &before),
            "journal included"
        );
        let old = StatePaths::new(&legacy);
        for f in [old.snapshot, old.journal, old.lock, old.tmp, old.rescue] {
            assert!(!f.exists(), "{} left behind", f.display());
        }
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        // Interrupted after the copy: both hold the same state; the old one goes.
        std::fs::copy(&target, &legacy).unwrap();
        assert!(move_legacy_state(&legacy, &target).unwrap().is_some());
        assert!(!legacy.exists());

        // Two different states: the user decides, nothing is removed.
        state_with(&legacy, &["c"]);
        let err = move_legacy_state(&legacy, &target).unwrap_err().to_string();
        assert!(err.contains("two different states"), "{err}");
        assert!(legacy.exists() && target.exists());
        assert!(same_state(&Store::read_only(&target).unwrap(), &before));
    }

    #[test]
    fn a_legacy_rescue_file_and_a_symlinked_legacy_state_are_moved_too() {
        let root = tempfile::tempdir().unwrap();
        // Only a rescue file: a run whose journal failed before anything else was written.
        let legacy = root.path().join("proj/nivis.state.json");
        std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
        let mut store = Store::open(&legacy, LockHolder::current("test"), None).unwrap();
        let rescued = crate::state::ResourceState::new(
            "r",
            crate::state::ResourceKind::Managed,
            "p",
            "p",
            "t",
            serde_json::json!({"id": "r"}),
        );
        store
            .rescue(
                &[crate::state::Change::Put(rescued.clone())],
                crate::state::Mutation::for_tests(),
            )
            .unwrap();
        drop(store);
        std::fs::remove_file(StatePaths::new(&legacy).journal).unwrap();
        assert!(!legacy.exists());
        let target = root.path().join("home/a/nivis.state.json");
        assert!(move_legacy_state(&legacy, &target).unwrap().is_some());
        assert_eq!(Store::read_only(&target).unwrap().get("r"), Some(&rescued));
        assert!(!StatePaths::new(&legacy).rescue.exists());

        // A link in the project to a state kept elsewhere: its target's files move, the link goes.
        let elsewhere = root.path().join("elsewhere/s.json");
        std::fs::create_dir_all(elsewhere.parent().unwrap()).unwrap();
        state_with(&elsewhere, &["x"]);
        std::os::unix::fs::symlink(&elsewhere, &legacy).unwrap();
        let target = root.path().join("home/b/nivis.state.json");
        assert!(move_legacy_state(&legacy, &target).unwrap().is_some());
        assert!(Store::read_only(&target).unwrap().contains("x"));
        assert!(std::fs::symlink_metadata(&legacy).is_err(), "link removed");
        let there = StatePaths::new(&elsewhere);
        for f in [there.snapshot, there.journal, there.lock] {
            assert!(!f.exists(), "{} left behind", f.display());
        }
    }

    #[test]
    fn a_state_path_is_checked_where_its_files_really_are() {
        let root = tempfile::tempdir().unwrap();
        let plain = root.path().join("plain");
        std::fs::create_dir_all(&plain).unwrap();
        std::fs::write(plain.join("flake.nix"), "{ outputs = _: { }; }").unwrap();
        // A link outside the flake to a state inside it: the files would be copied.
        let inside = root.path().join("in-flake");
        std::os::unix::fs::symlink(plain.join("nivis.state.json"), &inside).unwrap();
        let err = check_state_path(&inside, &flake(&plain))
            .unwrap_err()
            .to_string();
        assert!(err.contains("copies"), "{err}");
        // A link inside the flake to a state elsewhere: only the link is copied.
        let outside = root.path().join("kept/s.json");
        std::os::unix::fs::symlink(&outside, plain.join("link.json")).unwrap();
        assert!(check_state_path(&plain.join("link.json"), &flake(&plain)).is_ok());
    }

    #[test]
    fn default_paths_are_per_project_and_stable() {
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a b");
        std::fs::create_dir_all(&a).unwrap();
        let p1 = default_state_path(&flake(&a)).unwrap();
        let p2 = default_state_path(&flake(&a.join("."))).unwrap();
        assert_eq!(p1, p2, "keyed by the canonical path");
        let name = p1.parent().unwrap().file_name().unwrap().to_string_lossy();
        assert!(name.starts_with("a_b-"), "{name}");
        let other = default_state_path(&PlanSource::File {
            path: a.join("plan.nix"),
            attr: None,
        })
        .unwrap();
        assert_ne!(p1, other);
    }
}
