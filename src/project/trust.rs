//! The trust rule for code: whoever can change a plan's files chooses what Nivis runs as you
//! (the providers it starts, where it sends your secrets), so the project's files are judged
//! like the files that hold secrets (`privfile`), before anything evaluates them (DESIGN §93).
//!
//! Owns: which files a plan's code is (the tree Nix copies for a flake: a plain directory's
//! every file, a git work tree's tracked files; a plain plan file; an encrypted secret file a
//! secret source names), who else can change them, and the refusal or, with `--trust-group`,
//! the warning. Not: the files that hold secrets (`privfile`), what Nix copies into the store
//! (`project`), reading secret sources (`secret_sources`).
//!
//! The rule:
//! - every directory above the tree is owned by you or root and not writable by others unless
//!   sticky (`/tmp`), as for private files;
//! - every directory and file of the tree is owned by you or root and writable by neither its
//!   group nor others (a sticky project directory still lets others add a file Nix would read);
//! - `--trust-group` accepts files and directories that their owner (another user) or their
//!   group can change, with a warning on every run; a file everyone can write is never
//!   accepted, and neither is anything another user controls when Nivis runs as root (a root
//!   run over another user's checkout would run their code as root).

use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::{copied_tree, Copied};
use crate::nixeval::PlanSource;
use crate::privfile::euid;

/// Who besides you (and root) can change a file or directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Other {
    /// Its owner, another user.
    Owner(u32),
    /// Its group's members (mode g+w).
    Group(u32),
    /// Everyone (mode o+w, not sticky).
    Everyone,
}

impl Other {
    fn describe(self, mode: u32, me: u32) -> String {
        match self {
            Other::Owner(uid) => format!("is owned by uid {uid}, not by you (uid {me})"),
            Other::Group(gid) => format!("can be written by its group (gid {gid}, mode {mode:o})"),
            Other::Everyone => format!("can be written by every user (mode {mode:o})"),
        }
    }
}

/// One file or directory of the code someone else can change.
#[derive(Debug, Clone)]
struct Finding {
    path: PathBuf,
    who: Other,
    mode: u32,
}

/// Code someone else can change, refused.
#[derive(Debug)]
pub(crate) struct Untrusted {
    /// What the code is ("the plan at /srv/infra", "the age file of secret source db").
    what: String,
    finding: Finding,
    /// How many paths in all were found.
    count: usize,
    /// The uid Nivis runs as.
    me: u32,
}

impl fmt::Display for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Finding { path, who, mode } = &self.finding;
        let more = match self.count {
            1 => String::new(),
            n => format!(" (and {} more paths)", n - 1),
        };
        let who = who.describe(*mode, self.me);
        if self.me == 0 {
            return write!(
                f,
                "refusing to run {} as root: {} {who}{more}, so another user chooses the code root \
                 would run (the providers it starts, where your secrets go). Run Nivis as that \
                 user, or copy the project to a directory root owns and `chown -R root:root` it; \
                 --trust-group is never accepted for root",
                self.what,
                path.display(),
            );
        }
        let fix = match self.finding.who {
            Other::Everyone => format!(
                "Run `chmod o-w {}` (everyone can write it: --trust-group does not accept that)",
                path.display()
            ),
            _ => format!(
                "Run `chmod -R go-w` on it (and keep the project owned by you), or, if your team \
                 shares this checkout on purpose, pass --trust-group to run code that {} can \
                 change (a warning says so each run)",
                match self.finding.who {
                    Other::Owner(_) => "its owner",
                    _ => "members of its group",
                }
            ),
        };
        write!(
            f,
            "refusing to run {}: {} {who}{more}, so someone else chooses the code Nivis runs as you \
             (the providers it starts, where your secrets go). {fix}",
            self.what,
            path.display(),
        )
    }
}

impl std::error::Error for Untrusted {}

/// Who besides you and root can change what `meta` describes; `above`: a directory above the
/// code (there a sticky bit protects what others did not create).
fn others(meta: &std::fs::Metadata, above: bool, me: u32) -> Option<Other> {
    let mode = meta.mode();
    if meta.uid() != me && meta.uid() != 0 {
        return Some(Other::Owner(meta.uid()));
    }
    if above && mode & 0o1000 != 0 {
        return None;
    }
    if mode & 0o002 != 0 {
        Some(Other::Everyone)
    } else if mode & 0o020 != 0 {
        Some(Other::Group(meta.gid()))
    } else {
        None
    }
}

/// The directories above `path` (its real location), outermost first.
fn dirs_above(path: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = path.ancestors().skip(1).map(Path::to_path_buf).collect();
    dirs.reverse();
    dirs
}

/// Judges `paths` (the code's own files and directories) and the directories above `top`.
fn judge(top: &Path, paths: &[PathBuf], me: u32) -> Vec<Finding> {
    let mut found = Vec::new();
    let mut look = |path: &Path, above: bool| {
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            // A link cannot be written, only replaced (by who can write its directory).
            if meta.file_type().is_symlink() {
                return;
            }
            if let Some(who) = others(&meta, above, me) {
                found.push(Finding {
                    path: path.to_path_buf(),
                    who,
                    mode: meta.mode() & 0o7777,
                });
            }
        }
    };
    for dir in dirs_above(top) {
        look(&dir, true);
    }
    for path in paths {
        look(path, false);
    }
    found
}

/// Every directory and file under `dir` (itself included), `.git` left out; links not
/// followed.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_path_buf());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() && entry.file_name() != ".git" => walk(&path, out),
            Ok(t) if t.is_dir() => {}
            Ok(_) => out.push(path),
            Err(_) => {}
        }
    }
}

/// The git work tree's tracked files at `root`, and every directory on their way.
fn tracked(root: &Path) -> Vec<PathBuf> {
    let listed = crate::child::git()
        .arg("-C")
        .arg(root)
        .args(["ls-files", "-z"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    let Some(listed) = listed.ok().filter(|o| o.status.success()) else {
        let mut all = Vec::new();
        walk(root, &mut all);
        return all;
    };
    let mut paths = std::collections::BTreeSet::new();
    paths.insert(root.to_path_buf());
    for name in listed.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let rel = Path::new(std::ffi::OsStr::from_bytes(name));
        let path = root.join(rel);
        for dir in path.ancestors().skip(1) {
            if !paths.insert(dir.to_path_buf()) || dir == root {
                break;
            }
        }
        paths.insert(path);
    }
    paths.into_iter().collect()
}

/// Refuses (or with `trust_group` warns about) a plan whose code someone else can change:
/// `Ok` holds the warning to print, if any.
pub(crate) fn check_code(
    source: &PlanSource,
    trust_group: bool,
) -> Result<Option<String>, Untrusted> {
    check_code_as(source, trust_group, euid())
}

/// [`check_code`] for a run as the user `me`.
fn check_code_as(
    source: &PlanSource,
    trust_group: bool,
    me: u32,
) -> Result<Option<String>, Untrusted> {
    let (what, top, paths) = match (copied_tree(source), source) {
        (Copied::Whole(dir), _) => {
            let mut paths = Vec::new();
            walk(&dir, &mut paths);
            (format!("the plan at {}", dir.display()), dir, paths)
        }
        (Copied::GitTracked(root), _) => {
            let paths = tracked(&root);
            (format!("the plan at {}", root.display()), root, paths)
        }
        (Copied::Nothing, PlanSource::File { path, .. }) => {
            let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
            (
                format!("the plan file {}", real.display()),
                real.clone(),
                vec![real],
            )
        }
        // A remote flake: nothing local to judge.
        (Copied::Nothing, PlanSource::Flake { .. }) => return Ok(None),
    };
    verdict(what, judge(&top, &paths, me), trust_group, me)
}

/// Refuses (or with `trust_group` warns about) an encrypted secret file someone else can
/// change (age does not authenticate who encrypted a file: whoever can replace it chooses the
/// value). `what`: the file's role ("the age file of secret source db").
pub(crate) fn check_secret_file(
    path: &Path,
    what: &str,
    trust_group: bool,
) -> Result<Option<String>, Untrusted> {
    // A path literal names its copy in a store (read-only, judged like any file; the
    // project's original is judged with the project).
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    verdict(
        what.to_string(),
        judge(&real, std::slice::from_ref(&real), euid()),
        trust_group,
        euid(),
    )
}

fn verdict(
    what: String,
    found: Vec<Finding>,
    trust_group: bool,
    me: u32,
) -> Result<Option<String>, Untrusted> {
    let Some(first) = found.first().cloned() else {
        return Ok(None);
    };
    let everyone = found.iter().find(|f| f.who == Other::Everyone).cloned();
    if me == 0 || !trust_group || everyone.is_some() {
        return Err(Untrusted {
            what,
            finding: everyone.unwrap_or(first),
            count: found.len(),
            me,
        });
    }
    let more = match found.len() {
        1 => String::new(),
        n => format!(" (and {} more paths)", n - 1),
    };
    Ok(Some(format!(
        "--trust-group: running {what}, which others can change: {} {}{more}; they choose the \
         code Nivis runs as you",
        first.path.display(),
        first.who.describe(first.mode, me)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn group_or_world_writable_code_is_refused_and_the_opt_in_warns() {
        // Judged as a user other than root who owns nothing here: files root owns (or ours,
        // when the test runs unprivileged) are trusted as they are.
        let me = if euid() == 0 { 4242 } else { euid() };
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("proj");
        std::fs::create_dir(&dir).unwrap();
        chmod(&dir, 0o755);
        let flake = dir.join("flake.nix");
        std::fs::write(&flake, "{}").unwrap();
        chmod(&flake, 0o644);
        let source = PlanSource::Flake {
            flake: dir.display().to_string(),
            attr: "nivis.plan".into(),
        };
        assert!(check_code_as(&source, false, me).unwrap().is_none());
        chmod(&flake, 0o664);
        let err = check_code_as(&source, false, me).unwrap_err().to_string();
        assert!(
            err.contains("flake.nix") && err.contains("its group") && err.contains("--trust-group"),
            "{err}"
        );
        let warning = check_code_as(&source, true, me)
            .unwrap()
            .expect("a warning");
        assert!(warning.contains("flake.nix"), "{warning}");
        // Root never takes the opt-in.
        let err = check_code_as(&source, true, 0).unwrap_err().to_string();
        assert!(err.contains("as root"), "{err}");
        // Nobody takes a file everyone can write.
        chmod(&flake, 0o646);
        let err = check_code_as(&source, true, me).unwrap_err().to_string();
        assert!(err.contains("every user"), "{err}");
        // A directory inside the project everyone can write, sticky or not.
        chmod(&flake, 0o644);
        let sub = dir.join("modules");
        std::fs::create_dir(&sub).unwrap();
        chmod(&sub, 0o1777);
        let err = check_code_as(&source, true, me).unwrap_err().to_string();
        assert!(err.contains("modules"), "{err}");
    }
}
