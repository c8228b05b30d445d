//! Nix's error text, pointed back at the user's own files.
//!
//! Owns: rewriting `/nix/store/HASH-source/REL` in a Nix error to the project's `./REL` when the
//! project directory holds that very file, and the hint for a file Nix could not find because
//! git does not track it (Nix copies only tracked files of a git flake into the store, and
//! Debian's Nix 2.8 then reports a store path that does not exist). Not: running Nix, nor
//! deciding what failed (`nixeval`).

use std::path::{Path, PathBuf};

/// `message` with each store path of the flake's copied source that names a file of `project`
/// (same relative path, same bytes) replaced by that file's path as the user would type it
/// (relative to the working directory when under it); then a `git add` hint for a file that
/// exists in `project` but is missing from the copy.
pub(super) fn in_project(message: &str, project: &Path) -> String {
    let mut out = String::with_capacity(message.len());
    let mut untracked: Vec<String> = Vec::new();
    let mut rest = message;
    while let Some(at) = rest.find("/nix/store/") {
        // A store chrooted elsewhere (Nivis's private eval store, §73) prints its real path,
        // `DIR/nix/store/...`: the copy is at DIR's path, and the whole token is replaced.
        let token = rest[..at].rfind(is_delimiter).map_or(0, |d| d + 1);
        let root = &rest[token..at];
        let (before, root) = if root.starts_with('/') {
            (&rest[..token], root)
        } else {
            (&rest[..at], "")
        };
        out.push_str(before);
        let tail = &rest[at..];
        let end = tail.find(is_delimiter).unwrap_or(tail.len());
        let (path, after) = tail.split_at(end);
        let whole = format!("{root}{path}");
        match source_relative(path) {
            Some((rel, position)) => {
                let user = user_file(project, rel);
                let copied = whole.strip_suffix(position).unwrap_or(&whole);
                let copied = Path::new(copied);
                if same_file(copied, &user) {
                    out.push_str(&shown(&user));
                    out.push_str(position);
                } else if !copied.exists() && user.is_file() {
                    untracked.push(rel.to_string());
                    out.push_str(&whole);
                } else {
                    out.push_str(&whole);
                }
            }
            None => out.push_str(&whole),
        }
        rest = after;
    }
    out.push_str(rest);
    untracked.dedup();
    for rel in untracked {
        out.push_str(&format!(
            "\nhint: {rel} exists in {} but git does not track it, and Nix sees only tracked \
             files of a flake in a git repository: run `git add {rel}` (no commit needed)",
            shown(project)
        ));
    }
    out
}

/// Whether `c` ends a path in Nix's messages.
fn is_delimiter(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\'' | '"' | ',' | '`' | '(' | ')')
}

/// For `/nix/store/HASH-source/REL[:LINE:COL]`: REL and the `:LINE:COL` suffix (maybe empty).
fn source_relative(path: &str) -> Option<(&str, &str)> {
    let name = path.strip_prefix("/nix/store/")?;
    let (entry, rel) = name.split_once('/')?;
    if !entry.ends_with("-source") || rel.is_empty() || rel.split('/').any(|c| c == "..") {
        return None;
    }
    // A trailing `:LINE:COL` (or `:LINE`, or the message's own `:`) is not part of the name.
    let mut file_end = rel.len();
    while let Some(colon) = rel[..file_end].rfind(':') {
        let after = &rel[colon + 1..file_end];
        if after.chars().all(|c| c.is_ascii_digit()) {
            file_end = colon;
        } else {
            break;
        }
    }
    Some((&rel[..file_end], &rel[file_end..]))
}

/// The project's file for a store copy's REL: Nix copies a git flake's whole repository, so
/// for a flake in a subdirectory REL starts at the repository's root.
fn user_file(project: &Path, rel: &str) -> PathBuf {
    let direct = project.join(rel);
    if direct.exists() {
        return direct;
    }
    let root = project.ancestors().find(|d| d.join(".git").exists());
    match root {
        Some(root) if root.join(rel).exists() => root.join(rel),
        _ => direct,
    }
}

/// Whether `copied` (in the store) and `user` (in the project) hold the same bytes.
fn same_file(copied: &Path, user: &Path) -> bool {
    match (std::fs::read(copied), std::fs::read(user)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// `path` as the user would type it: `./REL` under the working directory, else as it is.
fn shown(path: &Path) -> String {
    let cwd: Option<PathBuf> = std::env::current_dir().ok();
    match cwd.as_deref().and_then(|c| path.strip_prefix(c).ok()) {
        Some(rel) if rel.as_os_str().is_empty() => ".".to_string(),
        Some(rel) => format!("./{}", rel.display()),
        None => path.display().to_string(),
    }
}

/// `text` without Nix's "warning: Git tree '…' is dirty" lines: every evaluation of a git
/// flake with uncommitted changes prints one, which says nothing about why it failed.
pub(super) fn without_dirty_tree_warnings(text: &str) -> String {
    let noise = |line: &str| {
        let line = line.trim_end();
        line.contains("warning: Git tree '") && line.ends_with("' is dirty")
    };
    let kept: Vec<&str> = text.lines().filter(|l| !noise(l)).collect();
    kept.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_paths_with_positions_split() {
        assert_eq!(
            source_relative("/nix/store/abc-source/flake.nix:4:3:"),
            Some(("flake.nix", ":4:3:"))
        );
        assert_eq!(
            source_relative("/nix/store/abc-source/a/b.nix"),
            Some(("a/b.nix", ""))
        );
        assert_eq!(source_relative("/nix/store/abc-nixpkgs/a.nix"), None);
        assert_eq!(source_relative("/nix/store/abc-source/../etc"), None);
    }

    #[test]
    fn a_copied_file_is_named_in_the_project_and_an_untracked_one_gets_the_hint() {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("fake-store");
        std::fs::create_dir_all(&store).unwrap();
        let project = tmp.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(project.join("flake.nix"), "{ x = 1 }").unwrap();
        // Only real store paths are rewritten; the copy's content must match.
        let message = "error: syntax error\n  at /nix/store/0000-source/flake.nix:4:3:\n";
        let out = in_project(message, &project);
        assert!(
            out.contains("/nix/store/0000-source/flake.nix:4:3:"),
            "{out}"
        );
        assert!(
            out.contains("git add flake.nix"),
            "missing from the copy: {out}"
        );
        let other = "error: at /nix/store/0000-source/other.nix:1:1";
        assert_eq!(in_project(other, &project), other, "no such project file");
    }

    #[test]
    fn a_copy_in_a_chrooted_eval_store_is_named_in_the_project() {
        let tmp = tempfile::tempdir().unwrap();
        let copy = tmp.path().join("eval-store/nix/store/0000-source");
        std::fs::create_dir_all(&copy).unwrap();
        std::fs::write(copy.join("flake.nix"), "{ x = 1 }").unwrap();
        let project = tmp.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(project.join("flake.nix"), "{ x = 1 }").unwrap();
        let message = format!("error: at {}/flake.nix:4:3:", copy.display());
        let out = in_project(&message, &project);
        assert_eq!(
            out,
            format!("error: at {}:4:3:", shown(&project.join("flake.nix"))),
            "the whole store token is the user's file"
        );
        assert!(!out.contains("git add"), "{out}");
    }
}
