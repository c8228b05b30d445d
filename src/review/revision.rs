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
pub enum Side {
    /// `rev` as the user gave it, and the commit it names.
    Commit { rev: String, commit: String },
    /// The project's files as they are now (for a flake in git: its tracked files).
    WorkTree,
}

impl Side {
    /// How the side is named in output: `HEAD~1 (3f2a9c1d0e4b)` or `work tree`.
    pub fn label(&self) -> String {
        match self {
            Side::Commit { rev, commit } => format!("{rev} ({})", &commit[..commit.len().min(12)]),
            Side::WorkTree => "work tree".to_string(),
        }
    }
}

/// The directory the plan is read from: a flake's directory, a plan file's parent.
fn project_dir(source: &PlanSource) -> Result<PathBuf, String> {
    match source {
        PlanSource::Flake { flake, .. } => {
            let dir = Path::new(flake.strip_prefix("path:").unwrap_or(flake));
            if dir.is_dir() {
                Ok(dir.to_path_buf())
            } else {
                Err(format!(
                    "the flake {flake} is not a local directory: comparing git revisions needs \
                     the project's git repository (give --flake DIR)"
                ))
            }
        }
        PlanSource::File { path, .. } => {
            Ok(path.parent().map(Path::to_path_buf).unwrap_or_default())
        }
    }
}

fn git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir).stdin(Stdio::null());
    cmd
}

/// Runs `cmd`; its trimmed stdout, or an error naming `what` with git's own message.
fn output_of(mut cmd: Command, what: &str) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot run git: {e}; is git installed and on PATH?"))?;
    if !out.status.success() {
        return Err(format!(
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The root of the git work tree holding the plan.
pub fn repository_root(source: &PlanSource) -> Result<PathBuf, String> {
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
pub fn resolve(root: &Path, rev: &str) -> Result<Side, String> {
    if rev.starts_with('-') {
        return Err(format!("{rev:?} is not a git revision"));
    }
    let mut cmd = git(root);
    cmd.args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(format!("{rev}^{{commit}}"));
    let commit = output_of(cmd, &format!("revision {rev}"))
        .ok()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            format!(
                "{rev} names no commit in {}: give a branch, tag or commit (git log shows them)",
                root.display()
            )
        })?;
    Ok(Side::Commit {
        rev: rev.to_string(),
        commit,
    })
}

/// Exports `commit`'s tracked files from the repository at `root` into `into` (a new
/// directory inside a private run directory) and returns `source` pointed at the same plan
/// inside the export.
pub fn export(
    source: &PlanSource,
    root: &Path,
    commit: &str,
    into: &Path,
) -> Result<PlanSource, String> {
    std::fs::create_dir(into).map_err(|e| format!("cannot create {}: {e}", into.display()))?;
    let what = format!("exporting commit {commit}");
    let mut archive = git(root)
        .args(["archive", "--format=tar", commit])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{what}: cannot run git: {e}"))?;
    let tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(into)
        .stdin(archive.stdout.take().expect("piped"))
        .output()
        .map_err(|e| format!("{what}: cannot run tar: {e}"))?;
    let archived = archive
        .wait_with_output()
        .map_err(|e| format!("{what}: {e}"))?;
    if !archived.status.success() || !tar.status.success() {
        return Err(format!(
            "{what}: {}{}",
            String::from_utf8_lossy(&archived.stderr).trim(),
            String::from_utf8_lossy(&tar.stderr).trim()
        ));
    }
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let root = &canonical(root);
    let moved = |p: &Path| -> Result<PathBuf, String> {
        let rel = p.strip_prefix(root).map_err(|_| {
            format!(
                "{} is not inside the repository {}",
                p.display(),
                root.display()
            )
        })?;
        Ok(into.join(rel))
    };
    match source {
        PlanSource::Flake { attr, .. } => {
            let dir = moved(&canonical(&project_dir(source)?))?;
            if !dir.join("flake.nix").is_file() {
                return Err(format!(
                    "{what}: the commit has no flake.nix at {}",
                    dir.display()
                ));
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
                return Err(format!("{what}: the commit has no {}", rel.display()));
            }
            Ok(PlanSource::File {
                path: file,
                attr: attr.clone(),
            })
        }
    }
}
