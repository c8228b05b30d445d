//! The one error type of placing a project's state: [`ProjectError`].
//!
//! Each variant carries the facts (which file, which tree Nix would copy, which step of a move
//! failed) and its `Display` says what to do. Does not decide anything: the checks that build
//! these live in `project`, `find`, `identity` and `placement`.

use std::fmt;
use std::path::PathBuf;

use super::find::NotFound;
use crate::state::StateError;
use crate::xdg::NoStateHome;

/// A file that holds secrets and must stay out of the world-readable Nix store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PrivateFile {
    /// The state given with `--state`, with where it would live without `--state` (or why
    /// there is no such place).
    State {
        /// The project's default state path, or why it cannot be found.
        default: Result<PathBuf, NoStateHome>,
    },
    /// A copy of the state about to be written (`state pull --out`).
    StateCopy,
    /// A `--var-file`.
    VarFile {
        /// The path as the user wrote it.
        given: PathBuf,
    },
}

/// How Nix copies a local tree into the store when it evaluates the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CopiedBy {
    /// The whole directory is copied (a plain-directory or `path:` flake).
    Whole(PathBuf),
    /// The git repository's tracked files are copied (a flake in a git work tree).
    GitTracked(PathBuf),
}

/// Why the place of a state, a state copy or a variable file is refused, or why a project's
/// state cannot be placed or moved.
#[derive(Debug)]
pub(crate) enum ProjectError {
    /// The state's files cannot be found (a link loop, a directory in their place).
    State(StateError),
    /// There is no per-user place for the project's state.
    NoStateHome(NoStateHome),
    /// A file that holds secrets is inside a tree Nix copies into the store.
    InCopiedTree {
        /// Which file.
        file: PrivateFile,
        /// Where it really is.
        path: PathBuf,
        /// The tree Nix copies, and how.
        copied: CopiedBy,
    },
    /// The state's directory cannot be created.
    CreateStateDir {
        /// The directory.
        dir: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// Moving a state to the project's place failed at one step; the old state is intact.
    MoveFailed {
        /// Where the state was.
        from: PathBuf,
        /// Where it was being moved.
        to: PathBuf,
        /// The step that failed (`opening it`, `writing the copy`, …).
        step: &'static str,
        /// What went wrong in that step.
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Two different states exist at the old and the new place.
    TwoStates {
        /// The old place.
        old: PathBuf,
        /// What the old place is (`where older Nivis versions kept it`, …).
        was: &'static str,
        /// The new place.
        new: PathBuf,
    },
    /// The environment's state path cannot be derived from the default one.
    Environment(String),
    /// `nivis.project` is not a valid project name.
    BadProjectName {
        /// The declared value, as JSON.
        value: serde_json::Value,
    },
    /// The project's note cannot be written into its state directory.
    WriteNote {
        /// The note file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A local flake reference names no flake.
    NoFlake {
        /// The `--flake` reference as given.
        flake: String,
        /// What was looked for and not found.
        missing: MissingFlake,
    },
}

/// What is missing where a local flake reference points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MissingFlake {
    /// The path is not a directory.
    NotADirectory(PathBuf),
    /// The directory (named exactly, `path:` or `git+file:`) has no `flake.nix`.
    NoFlakeNix(PathBuf),
    /// No `flake.nix` in the directory nor upward to where the search stopped.
    NotFoundUpward(NotFound),
}

/// What to do about a missing flake, the same for every case.
const NO_FLAKE_TODO: &str = "Nivis stopped before running Nix, which would have copied the \
    directory into the world-readable /nix/store. Start a project there with `nix flake init -t \
    github:wearetechnative/nivis`, name the flake's directory with `--flake DIR`, or evaluate a \
    plain Nix file with `--file plan.nix`.";

impl fmt::Display for ProjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProjectError::State(e) => e.fmt(f),
            ProjectError::NoStateHome(e) => e.fmt(f),
            ProjectError::InCopiedTree { file, path, copied } => {
                write_in_copied_tree(f, file, path, copied)
            }
            ProjectError::CreateStateDir { dir, source } => write!(
                f,
                "cannot create the state directory {}: {source}",
                dir.display()
            ),
            ProjectError::MoveFailed { from, to, step, cause } => write!(
                f,
                "moving the state {} to {} failed ({step}: {cause}); nothing was lost: the old state is still there. Fix the cause, or pass --state {} to keep using it where it is.",
                from.display(),
                to.display(),
                from.display()
            ),
            ProjectError::TwoStates { old, was, new } => write!(
                f,
                "two different states: {} ({was}) and {} (where it lives now). Keep the right one: remove the other (its .journal too), or pass --state to choose.",
                old.display(),
                new.display()
            ),
            ProjectError::Environment(e) => f.write_str(e),
            ProjectError::BadProjectName { value } => {
                let fix = "declare it as a string of 1 to 64 letters, digits, '.', '_' or '-', \
                           e.g. `nivis.project = \"acme-infra\";`";
                match value.as_str() {
                    None => write!(f, "nivis.project is not a string ({value}): {fix}"),
                    Some(name) => write!(
                        f,
                        "nivis.project = {name:?} is not a valid project name: {fix} (not starting with '.')"
                    ),
                }
            }
            ProjectError::WriteNote { path, source } => {
                write!(f, "cannot write {}: {source}", path.display())
            }
            ProjectError::NoFlake { flake, missing } => write_no_flake(f, flake, missing),
        }
    }
}

/// The refusal of a secret-holding file inside a tree Nix copies, worded per file.
fn write_in_copied_tree(
    f: &mut fmt::Formatter<'_>,
    file: &PrivateFile,
    path: &std::path::Path,
    copied: &CopiedBy,
) -> fmt::Result {
    let p = path.display();
    match (file, copied) {
        (PrivateFile::State { default }, CopiedBy::Whole(dir)) => write!(
            f,
            "refusing --state {p}: Nix copies {} whole into the world-readable /nix/store every time it evaluates the plan, so the state and the secrets in it would land there. Omit --state (the state then lives in {}), or give a path outside {}.",
            dir.display(),
            match default {
                Ok(path) => path.display().to_string(),
                Err(e) => e.to_string(),
            },
            dir.display()
        ),
        (PrivateFile::State { .. }, CopiedBy::GitTracked(root)) => {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            write!(
                f,
                "refusing --state {p}: it is inside the git repository {} and git does not ignore it, so it could be tracked, committed, and copied by Nix into the world-readable /nix/store with the flake. Add `{name}*` to {}/.gitignore, or omit --state (the state then lives outside the repository).",
                root.display(),
                root.display()
            )
        }
        (PrivateFile::StateCopy, CopiedBy::Whole(dir)) => write!(
            f,
            "refusing to write the state to {p}: Nix copies {} whole into the world-readable /nix/store every time it evaluates the plan, and the state holds secrets. Write it outside {}.",
            dir.display(),
            dir.display()
        ),
        (PrivateFile::StateCopy, CopiedBy::GitTracked(root)) => write!(
            f,
            "refusing to write the state to {p}: it is inside the git repository {} and git does not ignore it, so it could be committed and copied by Nix into the world-readable /nix/store. Write it outside the repository, or add it to {}/.gitignore.",
            root.display(),
            root.display()
        ),
        (PrivateFile::VarFile { given }, CopiedBy::Whole(dir)) => write!(
            f,
            "refusing --var-file {}: Nix copies {} whole into the world-readable /nix/store every time it evaluates the plan, so the values in it (secrets, usually) would land there. Move the file outside {}.",
            given.display(),
            dir.display(),
            dir.display()
        ),
        (PrivateFile::VarFile { given }, CopiedBy::GitTracked(root)) => write!(
            f,
            "refusing --var-file {}: it is inside the git repository {} and git does not ignore it, so it could be committed and copied by Nix into the world-readable /nix/store with the flake. Move it outside the repository, or add it to {}/.gitignore.",
            given.display(),
            root.display(),
            root.display()
        ),
    }
}

/// The refusal of a local flake reference without `flake.nix`.
fn write_no_flake(f: &mut fmt::Formatter<'_>, flake: &str, missing: &MissingFlake) -> fmt::Result {
    match missing {
        MissingFlake::NotADirectory(dir) => write!(
            f,
            "--flake {flake}: {} is not a directory. {NO_FLAKE_TODO}",
            dir.display()
        ),
        MissingFlake::NoFlakeNix(dir) => write!(
            f,
            "--flake {flake}: there is no flake.nix in {}. {NO_FLAKE_TODO}",
            dir.display()
        ),
        MissingFlake::NotFoundUpward(n) if n.last == n.start => write!(
            f,
            "there is no flake.nix in {} (the search stopped at {}). {NO_FLAKE_TODO}",
            n.start.display(),
            n.stop
        ),
        MissingFlake::NotFoundUpward(n) => write!(
            f,
            "there is no flake.nix in {} nor in its parent directories up to {} (the search \
             stopped at {}). {NO_FLAKE_TODO}",
            n.start.display(),
            n.last.display(),
            n.stop
        ),
    }
}

impl std::error::Error for ProjectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ProjectError::State(e) => Some(e),
            ProjectError::NoStateHome(e) => Some(e),
            ProjectError::CreateStateDir { source, .. }
            | ProjectError::WriteNote { source, .. } => Some(source),
            ProjectError::MoveFailed { cause, .. } => Some(cause.as_ref()),
            _ => None,
        }
    }
}

impl From<StateError> for ProjectError {
    fn from(e: StateError) -> Self {
        ProjectError::State(e)
    }
}

impl From<NoStateHome> for ProjectError {
    fn from(e: NoStateHome) -> Self {
        ProjectError::NoStateHome(e)
    }
}
