//! A project's identity: what keys its default state, so that moving, renaming or cloning the
//! project keeps using the same state (DESIGN §49).
//!
//! Owns: the three kinds of identity (the name the flake declares as `nivis.project`; a git
//! repository's root commit with the flake's subdirectory; the project's location), the state
//! directory an identity names, and the `project.json` note kept in it. Not: evaluating the
//! flake (the declared name comes from `nixeval`), nor moving a state (`project::move_state`).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::ProjectError;

/// How a project is recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum IdentityKind {
    /// The name the flake declares beside its plan (`nivis.project`).
    Declared,
    /// The root commit of the git repository holding the project, and the project's path in it.
    Git,
    /// Where the project is (its canonical directory or plan file, or a remote flake
    /// reference): what every Nivis before identities used.
    Location,
}

/// What keys a project's default state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    /// How the project is recognised.
    pub(crate) kind: IdentityKind,
    /// What is hashed into the state directory's name.
    pub(crate) key: String,
    /// The readable part of the state directory's name (only for people: the hash decides).
    pub(crate) name: String,
}

/// The longest declared project name.
const MAX_NAME: usize = 64;

impl Identity {
    /// The identity a flake declares with `nivis.project = "NAME";`, checked.
    pub(crate) fn declared(value: &serde_json::Value) -> Result<Identity, ProjectError> {
        let bad = || ProjectError::BadProjectName {
            value: value.clone(),
        };
        let Some(name) = value.as_str() else {
            return Err(bad());
        };
        let valid = !name.is_empty()
            && name.len() <= MAX_NAME
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            && !name.starts_with('.');
        if !valid {
            return Err(bad());
        }
        Ok(Identity {
            kind: IdentityKind::Declared,
            key: name.to_string(),
            name: name.to_string(),
        })
    }

    /// The identity of the project at `location` (`key`: its canonical path or reference).
    pub(crate) fn location(key: String, name: String) -> Identity {
        Identity {
            kind: IdentityKind::Location,
            key,
            name,
        }
    }

    /// The part of the state directory's name that decides which state it is. A location's is
    /// the hash of the path alone, as before identities existed, so that its states stay found.
    fn digest(&self) -> String {
        let hashed = match self.kind {
            IdentityKind::Location => self.key.clone(),
            IdentityKind::Declared => format!("project:{}", self.key),
            IdentityKind::Git => format!("git:{}", self.key),
        };
        hex::encode(&Sha256::digest(hashed.as_bytes())[..8])
    }

    /// The state directory of this identity under `projects` (`$XDG_STATE_HOME/nivis/projects`):
    /// `<name>-<digest>`, or the directory already there with the same digest (its name is that
    /// of the directory the project had first: only the digest says which project it is).
    pub(crate) fn state_dir(&self, projects: &Path) -> PathBuf {
        let suffix = format!("-{}", self.digest());
        if let Ok(entries) = std::fs::read_dir(projects) {
            let mut found: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(&suffix))
                .map(|e| e.path())
                .collect();
            found.sort();
            if let Some(dir) = found.into_iter().next() {
                return dir;
            }
        }
        projects.join(format!("{}{suffix}", self.name))
    }

    /// How messages name it.
    pub(crate) fn describe(&self) -> String {
        match self.kind {
            IdentityKind::Declared => format!("project {}", self.name),
            IdentityKind::Git => format!("project {}, from git history", self.name),
            IdentityKind::Location => format!("project {}, keyed by its path", self.name),
        }
    }
}

/// What git says about the repository holding a project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum GitLineage {
    /// The root commit (the smallest, if the history has several) and the project's path in
    /// the work tree (`""` at its root).
    Rooted { commit: String, subdir: String },
    /// A shallow clone: its root commit is not the repository's.
    Shallow(PathBuf),
    /// Not in a git work tree, or no commit yet.
    None,
}

impl GitLineage {
    /// The lineage of `project` (a directory or plan file) in the work tree rooted at `root`.
    pub(super) fn of(root: &Path, project: &Path) -> GitLineage {
        let git = |args: &[&str]| {
            crate::child::git()
                .arg("-C")
                .arg(root)
                .args(args)
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        };
        if git(&["rev-parse", "--is-shallow-repository"]).as_deref() == Some("true") {
            return GitLineage::Shallow(root.to_path_buf());
        }
        let Some(roots) = git(&["rev-list", "--max-parents=0", "HEAD"]) else {
            return GitLineage::None;
        };
        let Some(commit) = roots.lines().map(str::trim).filter(|l| !l.is_empty()).min() else {
            return GitLineage::None;
        };
        let subdir = project
            .strip_prefix(root)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        GitLineage::Rooted {
            commit: commit.to_string(),
            subdir,
        }
    }

    /// The identity this lineage gives, named `name`.
    pub(super) fn identity(&self, name: String) -> Option<Identity> {
        match self {
            GitLineage::Rooted { commit, subdir } => Some(Identity {
                kind: IdentityKind::Git,
                key: format!("{commit}:{subdir}"),
                name,
            }),
            _ => None,
        }
    }
}

/// `project.json` in a state directory: which project the state belongs to and where it was
/// last used from (for messages; it holds no secret, but lives among files that do, so 0600).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProjectNote {
    /// How the project is recognised.
    pub(crate) kind: IdentityKind,
    /// What identifies the project: its declared name, its first commit, or its path.
    pub(crate) key: String,
    /// The name the state directory is named after.
    pub(crate) name: String,
    /// The project's directory (or plan file, or flake reference) last time.
    pub(crate) directory: String,
    /// A digest of its `flake.nix` (or plan file) then: recognises a moved and renamed
    /// path-keyed project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) plan_digest: Option<String>,
}

/// A digest of the plan at `project` (a flake directory's `flake.nix`, or a plan file).
pub(super) fn plan_digest(project: &Path) -> Option<String> {
    let file = if project.is_dir() {
        project.join("flake.nix")
    } else {
        project.to_path_buf()
    };
    let bytes = std::fs::read(file).ok()?;
    Some(hex::encode(&Sha256::digest(&bytes)[..16]))
}

/// The note's file name.
pub(super) const NOTE_FILE: &str = "project.json";

impl ProjectNote {
    /// The note for a project of `identity` used from `directory`.
    pub(crate) fn new(identity: &Identity, directory: String) -> ProjectNote {
        ProjectNote {
            kind: identity.kind,
            key: identity.key.clone(),
            name: identity.name.clone(),
            plan_digest: plan_digest(Path::new(&directory)),
            directory,
        }
    }

    /// The note in state directory `dir`, if there is a readable one.
    pub(crate) fn read(dir: &Path) -> Option<ProjectNote> {
        let bytes = std::fs::read(dir.join(NOTE_FILE)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Writes the note into `dir` unless it already says the same.
    pub(crate) fn write(&self, dir: &Path) -> Result<(), ProjectError> {
        if ProjectNote::read(dir).as_ref() == Some(self) {
            return Ok(());
        }
        let mut text = serde_json::to_string_pretty(self).expect("a note serialises");
        text.push('\n');
        let path = dir.join(NOTE_FILE);
        crate::rundir::write_private_file(&path, text.as_bytes())
            .map_err(|source| ProjectError::WriteNote { path, source })
    }
}

/// A path-keyed state that may be the one of the project at `here` (whose own state directory
/// is `own`): another path-keyed project's, beside a state, last used from a directory with the
/// same name as `here` (another checkout, or moved elsewhere), or from a directory that is gone
/// and had the same plan (moved and renamed). Returns that state directory and its note.
pub(super) fn path_keyed_relative(
    projects: &Path,
    here: &Path,
    own: &Path,
) -> Option<(PathBuf, ProjectNote)> {
    let name = here.file_name()?;
    let digest = plan_digest(here);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(projects)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|d| d != own)
        .collect();
    dirs.sort();
    dirs.into_iter().find_map(|dir| {
        let note = ProjectNote::read(&dir)?;
        let other = Path::new(&note.directory);
        let moved = !other.exists() && digest.is_some() && note.plan_digest == digest;
        let related = moved || other.file_name() == Some(name);
        let held = dir.join(crate::state::DEFAULT_PATH).exists();
        (note.kind == IdentityKind::Location && other != here && related && held)
            .then_some((dir, note))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_name_is_checked() {
        let ok = Identity::declared(&serde_json::json!("acme-infra_2.prod")).unwrap();
        assert_eq!(ok.kind, IdentityKind::Declared);
        for bad in [
            serde_json::json!(""),
            serde_json::json!("a/b"),
            serde_json::json!(".hidden"),
            serde_json::json!("x".repeat(65)),
            serde_json::json!(3),
        ] {
            let err = Identity::declared(&bad).unwrap_err().to_string();
            assert!(err.contains("nivis.project"), "{err}");
        }
    }

    #[test]
    fn an_identity_keeps_the_directory_it_had_first() {
        let tmp = tempfile::tempdir().unwrap();
        let lineage = GitLineage::Rooted {
            commit: "abc".into(),
            subdir: "infra".into(),
        };
        let first = lineage.identity("infra".into()).unwrap();
        let dir = first.state_dir(tmp.path());
        assert!(dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("infra-"));
        std::fs::create_dir_all(&dir).unwrap();
        let renamed = lineage.identity("infra-renamed".into()).unwrap();
        assert_eq!(renamed.state_dir(tmp.path()), dir);
        let declared = Identity::declared(&serde_json::json!("infra")).unwrap();
        assert_ne!(declared.state_dir(tmp.path()), dir, "kinds never collide");
    }
}
