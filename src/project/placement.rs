//! Where a project's default state goes (DESIGN §49): its identity chosen, the states it had
//! under earlier keys moved there, its note written, and the refusal to start a path-keyed
//! project afresh beside a state that may be its own.
//!
//! Not: what an identity is (`identity`), nor how one state moves (`project::move_state`).

use std::path::{Path, PathBuf};

use super::error::ProjectError;
use super::identity::{self, GitLineage, Identity, IdentityKind, ProjectNote};
use super::{create_state_dir, git_lineage, local_project, move_state, project_key, projects_dir};
use crate::nixeval::PlanSource;
use crate::state::{StatePaths, DEFAULT_PATH};

/// Where a project's default state is, and the states it had under earlier identities.
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    /// The identity the state is keyed by.
    pub(crate) identity: Identity,
    /// The default environment's state path.
    pub(crate) state: PathBuf,
    /// Default state paths of identities the project had before (path-keyed; a declared
    /// project's git-keyed one), with how messages name them.
    earlier: Vec<(PathBuf, &'static str)>,
    /// The project's directory, plan file or reference, for the state's note.
    directory: String,
    /// The root of the shallow clone that left the project keyed by its path.
    shallow: Option<PathBuf>,
}

/// The identity of the project `source` names, `declared` being its flake's `nivis.project`:
/// that name, else the git history it is in (a shallow clone: warned, none), else its path.
pub(crate) fn place(
    source: &PlanSource,
    declared: Option<&serde_json::Value>,
) -> Result<Placement, ProjectError> {
    let projects = projects_dir()?;
    let (key, name) = project_key(source);
    let directory = local_project(source).map_or(key.clone(), |p| p.display().to_string());
    let location = Identity::location(key, name.clone());
    let lineage = git_lineage(source);
    let from_git = lineage.identity(name);
    let identity = match (declared, &from_git) {
        (Some(value), _) => Identity::declared(value)?,
        (None, Some(git)) => git.clone(),
        (None, None) => location.clone(),
    };
    let shallow = match (&lineage, identity.kind) {
        (GitLineage::Shallow(root), IdentityKind::Location) => Some(root.clone()),
        _ => None,
    };
    let mut earlier = Vec::new();
    if identity.kind != IdentityKind::Location {
        let path = location.state_dir(&projects).join(DEFAULT_PATH);
        earlier.push((
            path,
            "keyed by the project's path, as before project identities",
        ));
    }
    if let (IdentityKind::Declared, Some(git)) = (identity.kind, &from_git) {
        let path = git.state_dir(&projects).join(DEFAULT_PATH);
        earlier.push((path, "keyed by the project's git history"));
    }
    let state = identity.state_dir(&projects).join(DEFAULT_PATH);
    Ok(Placement {
        identity,
        state,
        earlier,
        directory,
        shallow,
    })
}

impl Placement {
    /// Moves the states of earlier identities (every environment's) to this one's place;
    /// creates the state directory and records the project's note in it. Returns the notes for
    /// the user (a move made, a shallow clone, a shared state), which the caller prints.
    pub(crate) fn adopt(&self) -> Result<Vec<String>, ProjectError> {
        let mut notes = Vec::new();
        if let Some(root) = &self.shallow {
            notes.push(format!(
                "Warning: {} is a shallow git clone, whose history does not say which project \
                 it is, so its state is keyed by its path. Declare `nivis.project = \"NAME\";` \
                 beside nivis.plan in flake.nix to keep the state across clones and moves.",
                root.display()
            ));
        }
        create_state_dir(&self.state)?;
        let because = format!(
            "it belongs to {} now, and stays found when the directory is moved or cloned.",
            self.identity.describe()
        );
        for (old, was) in &self.earlier {
            let mut moves = vec![(old.clone(), self.state.clone())];
            for env in env_names(old) {
                let (from, to) = (
                    crate::state::env_state_path(old, &env)
                        .map_err(|e| ProjectError::Environment(e.to_string()))?,
                    crate::state::env_state_path(&self.state, &env)
                        .map_err(|e| ProjectError::Environment(e.to_string()))?,
                );
                moves.push((from, to));
            }
            for (from, to) in moves {
                notes.extend(move_state(&from, &to, was, &because)?);
            }
            remove_emptied_dir(old);
        }
        let dir = self.state.parent().unwrap_or(Path::new("."));
        if let Some(before) = ProjectNote::read(dir) {
            let other = Path::new(&before.directory);
            if before.directory != self.directory && other.join("flake.nix").is_file() {
                notes.push(format!(
                    "Note: {} shares this state with {} (last used from there): they are one \
                     {}. Use --env, --state or another nivis.project to keep them apart.",
                    self.directory,
                    before.directory,
                    self.identity.describe()
                ));
            }
        }
        ProjectNote::new(&self.identity, self.directory.clone()).write(dir)?;
        Ok(notes)
    }
}

impl Placement {
    /// Why planning here must not start from an empty state: this path-keyed project has none,
    /// but a state of a project moved away from a directory, or of another checkout with this
    /// directory's name, exists (see [`identity::path_keyed_relative`]).
    pub(crate) fn unclaimed_relative(&self) -> Option<String> {
        if self.identity.kind != IdentityKind::Location {
            return None;
        }
        let own = StatePaths::new(&self.state);
        if [&own.snapshot, &own.journal, &own.rescue]
            .iter()
            .any(|f| f.exists())
        {
            return None;
        }
        let projects = projects_dir().ok()?;
        let own_dir = self.state.parent()?;
        let here = Path::new(&self.directory);
        let (dir, note) = identity::path_keyed_relative(&projects, here, own_dir)?;
        let why = if Path::new(&note.directory).exists() {
            "another directory of the same name: another checkout of this project?"
        } else {
            "which no longer exists: was this project moved from there?"
        };
        Some(format!(
            "{} has no state yet, and its state is keyed by its path, but {} holds the state of \
             a project last used from {} ({why}). Nothing was planned, so that no object is \
             created twice. To use that state, pass --state {}; to start a separate project \
             here, declare `nivis.project = \"NAME\";` beside nivis.plan (or make it a git \
             repository with a commit), pass --state PATH or --env NAME, or configure a remote \
             backend.",
            self.directory,
            dir.display(),
            note.directory,
            dir.join(DEFAULT_PATH).display()
        ))
    }
}

/// The default state path of the project `source` names as far as it is known without
/// evaluating the flake (for shell completion): the state last used from the project's
/// directory, else the one of its git history or path.
pub(crate) fn known_state_path(source: &PlanSource) -> Result<PathBuf, ProjectError> {
    let projects = projects_dir()?;
    if let Some(here) = local_project(source) {
        let here = here.display().to_string();
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&projects)
            .map(|e| e.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        dirs.sort();
        let used = dirs
            .into_iter()
            .find(|d| ProjectNote::read(d).is_some_and(|n| n.directory == here));
        if let Some(dir) = used {
            return Ok(dir.join(DEFAULT_PATH));
        }
    }
    Ok(place(source, None)?.state)
}

/// The default state path of the project that declares `nivis.project = NAME` (`name`, checked
/// as the declaration is), on this machine and for this user: how another project finds it to
/// read its outputs (`remote_state`).
pub(crate) fn declared_state_path(name: &serde_json::Value) -> Result<PathBuf, ProjectError> {
    let identity = Identity::declared(name)?;
    Ok(identity.state_dir(&projects_dir()?).join(DEFAULT_PATH))
}

/// The environments with a state directory beside the default state path `state`.
fn env_names(state: &Path) -> Vec<String> {
    let dir = state.with_file_name("nivis.env.d");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Removes the state directory of `state` once its states have moved away (only empty
/// directories and the project note go; anything else keeps the directory).
fn remove_emptied_dir(state: &Path) {
    let Some(dir) = state.parent() else {
        return;
    };
    let envs = dir.join("nivis.env.d");
    for env in env_names(state) {
        let _ = std::fs::remove_dir(envs.join(env));
    }
    let _ = std::fs::remove_dir(&envs);
    let only_note = std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .all(|e| e.file_name() == identity::NOTE_FILE)
    });
    if only_note {
        let _ = std::fs::remove_file(dir.join(identity::NOTE_FILE));
        let _ = std::fs::remove_dir(dir);
    }
}
