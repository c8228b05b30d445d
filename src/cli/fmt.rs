//! `nivis fmt [FILES…] [--check]`: the project's Nix files in one style (alejandra's), without
//! nixpkgs, so a user who has none (air-gapped, or before the first `nix fmt`) has a formatter
//! too (DESIGN §96).
//!
//! Owns: which files are formatted (the named ones; a directory, the default `.`, is walked for
//! `*.nix`, skipping hidden directories and never following a link), handing each text to the
//! formatter process `nivis-fmt` (installed beside `nivis`: `src/fmt_main.rs` says why it is a
//! process of its own), and the rewrite of a changed file (a new file beside it renamed over
//! it, with its mode, so a failure leaves the old text whole). `-` formats standard input to
//! standard output. Not: the formatting itself, nor what the Nix means.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::args::FmtArgs;
use super::{exit, fail};
use crate::render::{self, outln};
use crate::secrets::Redactor;

/// Runs `nivis fmt`; returns the exit status: 1 when a file cannot be formatted or, with
/// `--check`, would change.
pub(super) fn run(args: &FmtArgs, redactor: &Redactor) -> i32 {
    if args.files.iter().any(|f| f.as_os_str() == "-") {
        if args.files.len() > 1 {
            return fail(redactor, &"`-` (standard input) cannot be given with files");
        }
        return stdin_to_stdout(args.check, redactor);
    }
    let named: Vec<PathBuf> = if args.files.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.files.clone()
    };
    let mut files = Vec::new();
    for path in &named {
        if let Err(e) = collect(path, true, &mut files) {
            return fail(redactor, &e);
        }
    }
    let mut status = exit::OK;
    let mut changed = 0usize;
    for file in &files {
        match format_file(file, args.check) {
            Ok(false) => {}
            Ok(true) => {
                changed += 1;
                outln!("{}", render::escape(redactor, &file.display().to_string()));
                if args.check {
                    status = exit::ERROR;
                }
            }
            Err(e) => status = fail(redactor, &e),
        }
    }
    if args.check && changed > 0 {
        let _ = writeln!(
            std::io::stderr(),
            "{changed} file(s) above are not formatted; run `nivis fmt` to format them"
        );
    }
    status
}

/// Adds `path` (a file, or the `*.nix` files under a directory) to `files`. `named`: the user
/// gave it, so a link is followed and a file counts whatever its name; inside a directory
/// links and hidden entries are skipped.
fn collect(path: &Path, named: bool, files: &mut Vec<PathBuf>) -> Result<(), String> {
    let meta = if named {
        std::fs::metadata(path)
    } else {
        std::fs::symlink_metadata(path)
    }
    .map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.is_file() {
        let nix = path.extension().is_some_and(|e| e == "nix");
        if named || nix {
            files.push(path.to_path_buf());
        }
        return Ok(());
    }
    if !meta.is_dir() {
        // A link, a socket or a device inside a walked directory is not the project's Nix.
        return match named {
            true => Err(format!("{}: not a file or a directory", path.display())),
            false => Ok(()),
        };
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| format!("cannot read the directory {}: {e}", path.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            // .git, .direnv and the like; `result` links of builds are links, skipped below.
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
        })
        .collect();
    entries.sort();
    for entry in entries {
        collect(&entry, false, files)?;
    }
    Ok(())
}

/// The text formatted, or why it cannot be (a syntax error, with its place); `name` is what
/// the error calls the text.
fn formatted(name: &Path, text: String) -> Result<(bool, String), String> {
    let shown = name.display().to_string();
    let helper = formatter()?;
    let mut child = crate::child::command(&helper)
        .arg(&shown)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run the formatter {}: {e}", helper.display()))?;
    // It reads all of its input before it writes anything: no deadlock on full pipes.
    let written = child
        .stdin
        .take()
        .expect("piped")
        .write_all(text.as_bytes());
    let out = child
        .wait_with_output()
        .map_err(|e| format!("cannot run the formatter {}: {e}", helper.display()))?;
    if !out.status.success() || written.is_err() {
        let why = String::from_utf8_lossy(&out.stderr);
        let why = why
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("it failed");
        return Err(format!("{shown}: cannot format: {why}"));
    }
    let after = String::from_utf8(out.stdout)
        .map_err(|_| format!("{shown}: cannot format: the formatter wrote no UTF-8"))?;
    Ok((after != text, after))
}

/// `nivis-fmt`, beside this executable (as the package and `cargo build` put it).
fn formatter() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find nivis itself: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let helper = dir.join("nivis-fmt");
    match helper.is_file() {
        true => Ok(helper),
        false => Err(format!(
            "nivis fmt needs its formatter nivis-fmt beside nivis, in {}: install both (the \
             Nix package does; from a clone, `cargo build --release --bin nivis --bin nivis-fmt`)",
            dir.display()
        )),
    }
}

/// Formats one file; returns whether it changed (with `check`: would change, left alone).
fn format_file(file: &Path, check: bool) -> Result<bool, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let (changed, after) = formatted(file, text)?;
    if changed && !check {
        replace_text(file, &after)
            .map_err(|e| format!("cannot rewrite {}: {e}", file.display()))?;
    }
    Ok(changed)
}

/// Replaces the contents of `file` by `text`: a new file beside it, with its mode, renamed over
/// it (a link named on the command line is resolved first, so the link stays a link).
fn replace_text(file: &Path, text: &str) -> std::io::Result<()> {
    let target = std::fs::canonicalize(file)?;
    let mode = std::fs::metadata(&target)?.permissions().mode() & 0o7777;
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    let tmp = target.with_file_name(format!(".{name}.nivis-fmt-{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(text.as_bytes())?;
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, &target));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// `nivis fmt -`: standard input formatted to standard output (for editors); with `--check`,
/// nothing printed and exit 1 when it would change.
fn stdin_to_stdout(check: bool, redactor: &Redactor) -> i32 {
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        return fail(redactor, &format!("cannot read standard input: {e}"));
    }
    match formatted(Path::new("<stdin>"), text) {
        Ok((changed, _)) if check => match changed {
            true => exit::ERROR,
            false => exit::OK,
        },
        Ok((_, after)) => {
            let mut out = render::stdout();
            match out.write_all(after.as_bytes()).and_then(|()| out.flush()) {
                Ok(()) => exit::OK,
                Err(e) => fail(redactor, &format!("cannot write standard output: {e}")),
            }
        }
        Err(e) => fail(redactor, &e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_file_keeps_its_mode_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plan.nix");
        std::fs::write(&file, "{a=1;}\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        let link = dir.path().join("link.nix");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        replace_text(&link, "{ a = 1; }\n").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "{ a = 1; }\n");
        assert!(
            link.symlink_metadata().unwrap().file_type().is_symlink(),
            "a link stays one"
        );
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        let left = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(left, 2, "no temporary file left");
    }

    #[test]
    fn a_directory_yields_its_nix_files_skipping_hidden_ones_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::create_dir_all(d.join(".git")).unwrap();
        for f in ["a.nix", "sub/b.nix", ".git/c.nix", "notes.txt"] {
            std::fs::write(d.join(f), "1").unwrap();
        }
        std::os::unix::fs::symlink(d.join("a.nix"), d.join("link.nix")).unwrap();
        let mut files = Vec::new();
        collect(d, true, &mut files).unwrap();
        assert_eq!(files, vec![d.join("a.nix"), d.join("sub/b.nix")]);
    }
}
