//! A git revision of the project as a directory Nix can evaluate.
//!
//! Owns: resolving a revision to its commit, exporting that commit's tracked files with
//! `git archive` into a directory of the run's private directory (never a shared temporary
//! directory, never the user's work tree or `.git`), and the plan source that points at the
//! same plan inside the export. Not: evaluating it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::nixeval::PlanSource;

/// One side of a comparison: a commit, or the work tree as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Side {
    /// `rev` as the user gave it, and the commit it names.
    Commit {
        /// The revision as the user gave it (`HEAD~1`, a branch, a tag).
        rev: String,
        /// The full commit id it names.
        commit: String,
    },
    /// The project's files as they are now (for a flake in git: its tracked files).
    WorkTree,
}

impl Side {
    /// How the side is named in output: `HEAD~1 (3f2a9c1d0e4b)` or `work tree`.
    pub(crate) fn label(&self) -> String {
        match self {
            Side::Commit { rev, commit } => format!("{rev} ({})", &commit[..commit.len().min(12)]),
            Side::WorkTree => "work tree".to_string(),
        }
    }
}

/// Why a revision cannot be resolved or exported.
#[derive(Debug)]
pub(crate) enum RevisionError {
    /// The flake is not a local directory, so it has no git repository here.
    NotLocal {
        /// The flake reference.
        flake: String,
    },
    /// git cannot be started.
    GitNotRun {
        /// What was being done.
        what: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// git ran and refused.
    GitFailed {
        /// What was being done.
        what: String,
        /// git's own message.
        stderr: String,
    },
    /// The revision starts with `-`, so git would read it as an option.
    NotARevision {
        /// The revision as given.
        rev: String,
    },
    /// The revision names no commit in the repository.
    NoCommit {
        /// The revision as given.
        rev: String,
        /// The repository's root.
        root: PathBuf,
    },
    /// The export directory cannot be created.
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// `git archive` or `tar` cannot be started, or waited for.
    ExportNotRun {
        /// The commit being exported.
        commit: String,
        /// The program: `git`, `tar`, or empty when waiting for git failed.
        tool: &'static str,
        /// What the system said.
        source: std::io::Error,
    },
    /// `git archive` or `tar` failed.
    ExportFailed {
        /// The commit being exported.
        commit: String,
        /// git's and tar's messages.
        stderr: String,
    },
    /// The plan is not inside the repository it was exported from.
    OutsideRepository {
        /// The plan's path.
        path: PathBuf,
        /// The repository's root.
        root: PathBuf,
    },
    /// The exported commit has no plan where the work tree has it.
    MissingInCommit {
        /// The commit.
        commit: String,
        /// What is missing: `flake.nix at DIR`, or the plan file's relative path.
        missing: String,
    },
}

impl std::fmt::Display for RevisionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RevisionError::NotLocal { flake } => write!(
                f,
                "the flake {flake} is not a local directory: comparing git revisions needs \
                 the project's git repository (give --flake DIR)"
            ),
            RevisionError::GitNotRun { what, source } => write!(
                f,
                "{what}: cannot run git: {source}; is git installed and on PATH?"
            ),
            RevisionError::GitFailed { what, stderr } => write!(f, "{what}: {stderr}"),
            RevisionError::NotARevision { rev } => write!(f, "{rev:?} is not a git revision"),
            RevisionError::NoCommit { rev, root } => write!(
                f,
                "{rev} names no commit in {}: give a branch, tag or commit (git log shows them)",
                root.display()
            ),
            RevisionError::CreateDir { dir, source } => {
                write!(f, "cannot create {}: {source}", dir.display())
            }
            RevisionError::ExportNotRun {
                commit,
                tool: "",
                source,
            } => write!(f, "exporting commit {commit}: {source}"),
            RevisionError::ExportNotRun {
                commit,
                tool,
                source,
            } => write!(f, "exporting commit {commit}: cannot run {tool}: {source}"),
            RevisionError::ExportFailed { commit, stderr } => {
                write!(f, "exporting commit {commit}: {stderr}")
            }
            RevisionError::OutsideRepository { path, root } => write!(
                f,
                "{} is not inside the repository {}",
                path.display(),
                root.display()
            ),
            RevisionError::MissingInCommit { commit, missing } => {
                write!(f, "exporting commit {commit}: the commit has no {missing}")
            }
        }
    }
}

impl std::error::Error for RevisionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RevisionError::GitNotRun { source, .. }
            | RevisionError::CreateDir { source, .. }
            | RevisionError::ExportNotRun { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The directory the plan is read from: a flake's directory, a plan file's parent.
fn project_dir(source: &PlanSource) -> Result<PathBuf, RevisionError> {
    match source {
        PlanSource::Flake { flake, .. } => {
            let dir = Path::new(flake.strip_prefix("path:").unwrap_or(flake));
            if dir.is_dir() {
                Ok(dir.to_path_buf())
            } else {
                Err(RevisionError::NotLocal {
                    flake: flake.clone(),
                })
            }
        }
        PlanSource::File { path, .. } => {
            Ok(path.parent().map(Path::to_path_buf).unwrap_or_default())
        }
    }
}

fn git(dir: &Path) -> Command {
    let mut cmd = crate::child::git();
    cmd.arg("-C").arg(dir).stdin(Stdio::null());
    cmd
}

/// Runs `cmd`; its trimmed stdout, or an error naming `what` with git's own message.
fn output_of(mut cmd: Command, what: &str) -> Result<String, RevisionError> {
    let out = cmd.output().map_err(|source| RevisionError::GitNotRun {
        what: what.into(),
        source,
    })?;
    if !out.status.success() {
        return Err(RevisionError::GitFailed {
            what: what.into(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The root of the git work tree holding the plan.
pub(crate) fn repository_root(source: &PlanSource) -> Result<PathBuf, RevisionError> {
    let dir = project_dir(source)?;
    let mut cmd = git(&dir);
    cmd.args(["rev-parse", "--show-toplevel"]);
    let root = output_of(
        cmd,
        &format!("{} is not in a git repository", dir.display()),
    )?;
    Ok(PathBuf::from(root))
}

/// The commit `rev` names in the repository at `root`.
pub(crate) fn resolve(root: &Path, rev: &str) -> Result<Side, RevisionError> {
    if rev.starts_with('-') {
        return Err(RevisionError::NotARevision { rev: rev.into() });
    }
    let mut cmd = git(root);
    cmd.args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(format!("{rev}^{{commit}}"));
    let commit = output_of(cmd, &format!("revision {rev}"))
        .ok()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| RevisionError::NoCommit {
            rev: rev.into(),
            root: root.to_path_buf(),
        })?;
    Ok(Side::Commit {
        rev: rev.to_string(),
        commit,
    })
}

/// Exports `commit`'s tracked files from the repository at `root` into `into` (a new
/// directory inside a private run directory) and returns `source` pointed at the same plan
/// inside the export.
pub(crate) fn export(
    source: &PlanSource,
    root: &Path,
    commit: &str,
    into: &Path,
) -> Result<PlanSource, RevisionError> {
    std::fs::create_dir(into).map_err(|source| RevisionError::CreateDir {
        dir: into.to_path_buf(),
        source,
    })?;
    let not_run = |tool| {
        move |source| RevisionError::ExportNotRun {
            commit: commit.into(),
            tool,
            source,
        }
    };
    let missing = |missing| RevisionError::MissingInCommit {
        commit: commit.into(),
        missing,
    };
    let mut archive = git(root)
        .args(["archive", "--format=tar", commit])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(not_run("git"))?;
    let tar = crate::child::command("tar")
        .arg("-x")
        .arg("-C")
        .arg(into)
        .stdin(archive.stdout.take().expect("piped"))
        .output()
        .map_err(not_run("tar"))?;
    let archived = archive.wait_with_output().map_err(not_run(""))?;
    if !archived.status.success() || !tar.status.success() {
        return Err(RevisionError::ExportFailed {
            commit: commit.into(),
            stderr: format!(
                "{}{}",
                String::from_utf8_lossy(&archived.stderr).trim(),
                String::from_utf8_lossy(&tar.stderr).trim()
            ),
        });
    }
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let root = &canonical(root);
    let moved = |p: &Path| -> Result<PathBuf, RevisionError> {
        let rel = p
            .strip_prefix(root)
            .map_err(|_| RevisionError::OutsideRepository {
                path: p.to_path_buf(),
                root: root.clone(),
            })?;
        Ok(into.join(rel))
    };
    match source {
        PlanSource::Flake { attr, .. } => {
            let dir = moved(&canonical(&project_dir(source)?))?;
            if !dir.join("flake.nix").is_file() {
                return Err(missing(format!("flake.nix at {}", dir.display())));
            }
            Ok(PlanSource::Flake {
                flake: dir.display().to_string(),
                attr: attr.clone(),
            })
        }
        PlanSource::File { path, attr } => {
            let file = moved(&canonical(path))?;
            if !file.is_file() {
                let rel = file.strip_prefix(into).unwrap_or(&file);
                return Err(missing(rel.display().to_string()));
            }
            Ok(PlanSource::File {
                path: file,
                attr: attr.clone(),
            })
        }
    }
}
