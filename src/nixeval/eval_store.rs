//! The private eval store: every `nix` evaluation Nivis runs writes its store objects
//! (`builtins.toFile`, `.drv` files, flake sources) into a per-user Nix store in a 0700
//! directory, `$XDG_CACHE_HOME/nivis/eval-store` (`nix eval --eval-store DIR`, a local store
//! chrooted at DIR), never into the shared, world-readable `/nix/store`. A plan that writes a
//! secret with `builtins.toFile` (a sensitive variable, or a state secret fed back by the next
//! phase) leaves it only there.
//!
//! Owns: where the store is, creating it, and refusing one another user could read or change;
//! and bringing a derivation the plan asks to be realised (`__build`) from that store into the
//! shared store, which is refused when anything in its closure holds a known secret. Not: the
//! `nix` command lines of evaluations (`nixeval`), nor which secrets are known (`secrets`).
//!
//! The store is persistent, so that flake inputs are copied into it once, not on every run. It
//! keeps what plans wrote with `toFile`, secrets included, under the 0700 directory: remove
//! it (or `nix store gc --store DIR`) to drop them.

use std::fmt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::secrets::Redactor;

/// Why the private eval store cannot be used, or a build output cannot leave it.
#[derive(Debug)]
pub(crate) enum EvalStoreError {
    /// Neither `XDG_CACHE_HOME` nor `HOME` is set.
    NoCacheHome,
    /// The store directory (or one above it) could be read or changed by someone else.
    Unsafe {
        /// The directory refused.
        path: PathBuf,
        /// What is wrong with it and the fix.
        problem: String,
    },
    /// A system call on `path` failed.
    Io {
        /// The path the call was about.
        path: PathBuf,
        /// The system's error.
        error: std::io::Error,
    },
    /// A derivation's closure in the private store holds a known secret.
    SecretInClosure {
        /// The derivation asked for.
        drv: String,
        /// The store path of the closure holding the secret.
        holder: String,
    },
    /// A derivation built in the private store (the run holds secrets) made an output holding
    /// a known secret: its .drv hid it (shell-escaped, split, encoded) and the build joined it.
    SecretInOutput {
        /// The derivation asked for.
        drv: String,
        /// The output path (or file in it) holding the secret.
        holder: String,
    },
    /// Building a derivation in the private store, to check its outputs, failed.
    PrivateBuildFailed {
        /// The derivation asked for.
        drv: String,
        /// What nix-store said.
        stderr: String,
    },
    /// A store path the plan named holds a secret, so it was not copied to the shared store.
    SecretStaysPrivate {
        /// The store path the plan named.
        path: String,
        /// The store path of its closure holding the secret.
        holder: String,
    },
    /// A `nix` command failed.
    Nix {
        /// What was run.
        what: String,
        /// Nix's error text.
        stderr: String,
    },
}

impl fmt::Display for EvalStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalStoreError::NoCacheHome => write!(
                f,
                "cannot find a place for Nivis's private Nix eval store: set XDG_CACHE_HOME or HOME"
            ),
            EvalStoreError::Unsafe { path, problem } => write!(
                f,
                "refusing the private Nix eval store {}: {problem}",
                path.display()
            ),
            EvalStoreError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            EvalStoreError::SecretInClosure { drv, holder } => write!(
                f,
                "refusing to build {drv}: {holder}, which it depends on, holds a secret (a sensitive variable or a value from the state), and building would copy it into the world-readable /nix/store. It stays in your private eval store; build the derivation without the secret (pass the secret to a resource instead)"
            ),
            // Without hashes, as below: they are computed from the secret.
            EvalStoreError::SecretInOutput { drv, holder } => write!(
                f,
                "refusing to build {} in /nix/store: built first in your private eval store (this run holds secrets), its output {} holds a secret (a sensitive variable or a value from the state) that the derivation carried in another form (escaped, split or encoded). The output stays in the private eval store. Build the derivation without the secret and pass the secret to a resource instead",
                without_hash(drv),
                without_hash(holder)
            ),
            EvalStoreError::PrivateBuildFailed { drv, stderr } => write!(
                f,
                "refusing to build {} in /nix/store: this run holds secrets, so a build is first made in your private eval store (a sandbox that sees the store, /bin, /usr and /lib) to check that its output holds none, and that build failed. Make the derivation build with its inputs from the store (its builder a store path), or keep secrets out of this run:\n{}",
                without_hash(drv),
                hashes_left_out(stderr.trim_end())
            ),
            EvalStoreError::SecretStaysPrivate { path, holder } => {
                // Without their hashes: a path made from a secret is known to the run as one
                // (and masked whole), and its hash could confirm a guess of the secret.
                let (path, holder) = (without_hash(path), without_hash(holder));
                write!(
                    f,
                    "the plan names the store path {path}, and {holder} (in its closure; hashes left out) holds a secret (a sensitive variable or a value from the state): it stays in your private eval store, not copied into the world-readable /nix/store, so a provider or build looking for it will not find it. Pass the secret itself to the resource instead of a file holding it (builtins.toFile of a secret, say)"
                )
            }
            EvalStoreError::Nix { what, stderr } => {
                write!(f, "{what} failed:\n{}", stderr.trim_end())
            }
        }
    }
}

impl std::error::Error for EvalStoreError {}

/// `/nix/store/HASH-NAME` as `/nix/store/…-NAME` (another text unchanged).
fn without_hash(path: &str) -> String {
    match path
        .strip_prefix("/nix/store/")
        .and_then(|rest| rest.split_once('-'))
    {
        Some((_, name)) => format!("/nix/store/…-{name}"),
        None => path.to_string(),
    }
}

/// `text` with every store path's hash left out (`/nix/store/…-NAME`): the hashes of what a
/// secret went into are computed from it and could confirm a guess.
fn hashes_left_out(text: &str) -> String {
    const PREFIX: &str = "/nix/store/";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        let (before, from) = rest.split_at(at + PREFIX.len());
        out.push_str(before);
        let hash_len = from
            .bytes()
            .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            .count();
        if hash_len == 32 && from[32..].starts_with('-') {
            out.push('…');
            rest = &from[32..];
        } else {
            rest = from;
        }
    }
    out.push_str(rest);
    out
}

/// What Nix says when a write to a store failed for want of space (its SQLite database says
/// "disk I/O error" or "database or disk is full" rather than the system's words).
const FULL_DISK_SIGNS: [&str; 3] = [
    "No space left on device",
    "disk I/O error",
    "database or disk is full",
];

/// When Nix's error text says a write failed for want of space, the advice to append: the eval
/// store every evaluation writes to, how to free it, and that no state was written by the
/// evaluation. `None` when the error is about something else.
pub(crate) fn full_disk_advice(nix_stderr: &str) -> Option<String> {
    if !FULL_DISK_SIGNS.iter().any(|sign| nix_stderr.contains(sign)) {
        return None;
    }
    let store = match dir() {
        Ok(dir) => dir.display().to_string(),
        Err(_) => "$XDG_CACHE_HOME/nivis/eval-store".to_string(),
    };
    Some(format!(
        "Nix could not write to a store: the filesystem of Nivis's private Nix eval store \
         {store}, where every evaluation writes, is most likely full. Free space there (`nix \
         store gc --store {store}` drops what Nivis evaluated), then run again. An evaluation \
         writes no state: every operation this run applied before it is recorded."
    ))
}

/// The private eval store's directory, created mode 0700 when missing; refused unless it is a
/// real directory (not a link), ours, and neither readable nor writable by anyone else, with
/// every directory above it under the file rule (`privfile`).
pub(crate) fn dir() -> Result<PathBuf, EvalStoreError> {
    let cache = crate::xdg::cache_home().ok_or(EvalStoreError::NoCacheHome)?;
    let nivis = cache.join("nivis");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&nivis)
        .map_err(|error| EvalStoreError::Io {
            path: nivis.clone(),
            error,
        })?;
    let nivis =
        crate::privfile::check_dirs(&nivis, "the private Nix eval store").map_err(|problem| {
            EvalStoreError::Unsafe {
                path: nivis.join("eval-store"),
                problem: problem.to_string(),
            }
        })?;
    let store = nivis.join("eval-store");
    match std::fs::DirBuilder::new().mode(0o700).create(&store) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(EvalStoreError::Io { path: store, error }),
    }
    let meta = std::fs::symlink_metadata(&store).map_err(|error| EvalStoreError::Io {
        path: store.clone(),
        error,
    })?;
    match unsafe_store_dir(&meta) {
        None => Ok(store),
        Some(problem) => Err(EvalStoreError::Unsafe {
            problem: format!(
                "it {problem}. It holds what plans write to the store, secrets included, so it must be a directory only you can read: check who made it, then remove it (`rm -rf {}`) and run again; Nivis creates it mode 0700",
                store.display()
            ),
            path: store,
        }),
    }
}

/// Why `meta` (of the store directory, not followed) is not a private directory, or `None`.
fn unsafe_store_dir(meta: &std::fs::Metadata) -> Option<String> {
    if meta.file_type().is_symlink() {
        return Some("is a symbolic link".into());
    }
    if !meta.is_dir() {
        return Some("is not a directory".into());
    }
    if meta.uid() != crate::privfile::euid() {
        return Some(format!(
            "is owned by uid {}, not by you (uid {})",
            meta.uid(),
            crate::privfile::euid()
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Some(format!(
            "can be read or written by other users (mode {mode:o})"
        ));
    }
    None
}

/// Copies the derivation `drv` (and its closure: input derivations and sources) from the
/// private eval store `store` into the shared store, so that `nix-store --realise` can build
/// it; refused when a file of that closure holds a known secret. Nothing to do when `drv` is
/// already in the shared store.
pub(crate) fn copy_derivation_out(
    store: &Path,
    drv: &str,
    nix: impl Fn() -> Command,
    redactor: &Redactor,
) -> Result<(), EvalStoreError> {
    if Path::new(drv).exists() {
        return Ok(());
    }
    let store_arg = store.display().to_string();
    let closure = run(
        nix().args([
            "path-info",
            "--derivation",
            "--recursive",
            "--store",
            &store_arg,
            drv,
        ]),
        &format!("listing the closure of {drv} in {store_arg}"),
    )?;
    if let Some(holder) = secret_holder(store, &closure, redactor) {
        return Err(EvalStoreError::SecretInClosure {
            drv: drv.to_string(),
            holder,
        });
    }
    // `--derivation`: copy the .drv, not its outputs (Nix 2.8 would build them in the private
    // store first). `--no-check-sigs`: a .drv and its sources are content-addressed, so the
    // shared store accepts them unsigned (a daemon checks that for an untrusted user itself).
    run(
        nix().args([
            "copy",
            "--derivation",
            "--no-check-sigs",
            "--from",
            &store_arg,
            "--to",
            "auto",
            drv,
        ]),
        &format!("copying {drv} from {store_arg} to the Nix store"),
    )?;
    Ok(())
}

/// The store paths (`/nix/store/HASH-NAME`) named anywhere in `text`, each once.
pub(crate) fn store_paths_in(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("/nix/store/") {
        let tail = &rest[at..];
        let name_len = tail["/nix/store/".len()..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || "+-._?=".contains(c)))
            .unwrap_or(tail.len() - "/nix/store/".len());
        let path = &tail[..("/nix/store/".len() + name_len)];
        // HASH is 32 characters, then `-NAME`.
        if name_len > 33 && !found.iter().any(|p| p == path) {
            found.push(path.to_string());
        }
        rest = &tail["/nix/store/".len()..];
    }
    found
}

/// Where `path` (a `/nix/store/...` path a plan named) is on disk: in the shared store if
/// there, else in the private eval store `store` if there, else `path` itself.
pub(crate) fn on_disk(store: &Path, path: &Path) -> PathBuf {
    if path.exists() || !path.starts_with("/nix/store") {
        return path.to_path_buf();
    }
    let private = store.join(path.strip_prefix("/").unwrap_or(path));
    if private.exists() {
        private
    } else {
        path.to_path_buf()
    }
}

/// Copies each of `paths` that the evaluation made in the private store `store` (a path
/// literal `"${./script.sh}"`, a `builtins.path`, a `toFile` of public text) into the shared
/// store, where providers and builds look for it, as an evaluation against the shared store
/// would have put it there. A path whose closure holds a known secret stays private: the
/// error says so, and the caller warns (the value then names a path absent from /nix/store).
pub(crate) fn copy_paths_out(
    store: &Path,
    paths: &[String],
    nix: impl Fn() -> Command,
    redactor: &Redactor,
) -> Vec<EvalStoreError> {
    let store_arg = store.display().to_string();
    let mut problems = Vec::new();
    for path in paths {
        let private = store.join(path.trim_start_matches('/'));
        if Path::new(path).exists() || !private.exists() {
            continue;
        }
        let copied = run(
            nix().args(["path-info", "--recursive", "--store", &store_arg, path]),
            &format!("listing the closure of {path} in {store_arg}"),
        )
        .and_then(|closure| {
            if let Some(holder) = secret_holder(store, &closure, redactor) {
                return Err(EvalStoreError::SecretStaysPrivate {
                    path: path.to_string(),
                    holder,
                });
            }
            run(
                nix().args([
                    "copy",
                    "--no-check-sigs",
                    "--from",
                    &store_arg,
                    "--to",
                    "auto",
                    path,
                ]),
                &format!("copying {path} from {store_arg} to the Nix store"),
            )
        });
        if let Err(e) = copied {
            problems.push(e);
        }
    }
    problems
}

/// The first store path of `closure` (`nix path-info` lines) whose name, or a file in `store`
/// whose name or content, holds a secret `redactor` knows: names are checked like contents (a
/// `builtins.toFile` named after a secret would otherwise reach the world-readable store,
/// issue 47).
fn secret_holder(store: &Path, closure: &str, redactor: &Redactor) -> Option<String> {
    let named = |text: &str| matches!(redactor.redact(text), std::borrow::Cow::Owned(_));
    closure
        .lines()
        .filter(|l| l.starts_with('/'))
        .find(|member| {
            let mut files = Vec::new();
            files_under(&store.join(member.trim_start_matches('/')), &mut files);
            named(member)
                || files
                    .iter()
                    .any(|f| named(&f.to_string_lossy()) || holds_known_secret(f, redactor))
        })
        .map(str::to_string)
}

/// Refuses `drv` when one of `outputs` (store paths, one per line, as `nix-store --realise
/// --store DIR` prints them) holds a secret `redactor` knows, in a file's content or a name.
pub(crate) fn check_private_outputs(
    store: &Path,
    drv: &str,
    outputs: &str,
    redactor: &Redactor,
) -> Result<(), EvalStoreError> {
    match secret_holder(store, outputs, redactor) {
        Some(holder) => Err(EvalStoreError::SecretInOutput {
            drv: drv.to_string(),
            holder,
        }),
        None => Ok(()),
    }
}

/// Runs `cmd` (stdin closed); its stdout, or an error naming `what` with Nix's stderr.
fn run(cmd: &mut Command, what: &str) -> Result<String, EvalStoreError> {
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| EvalStoreError::Nix {
            what: what.to_string(),
            stderr: format!("cannot run nix: {e}"),
        })?;
    if !output.status.success() {
        return Err(EvalStoreError::Nix {
            what: what.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Whether the file at `path` holds a secret `redactor` knows (in any form it masks).
fn holds_known_secret(path: &Path, redactor: &Redactor) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    matches!(
        redactor.redact(&String::from_utf8_lossy(&bytes)),
        std::borrow::Cow::Owned(_)
    )
}

/// `path` itself when it is a regular file, else every regular file under it (links not
/// followed).
fn files_under(path: &Path, out: &mut Vec<PathBuf>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.is_file() {
        out.push(path.to_path_buf());
    } else if meta.is_dir() {
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            files_under(&entry.path(), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_a_full_disk_gets_the_eval_store_advice() {
        assert_eq!(full_disk_advice("error: undefined variable 'x'"), None);
        let advice = full_disk_advice(
            "error: executing SQLite statement 'insert into ValidPaths': disk I/O error",
        )
        .unwrap();
        assert!(advice.contains("private Nix eval store"), "{advice}");
        assert!(advice.contains("nix store gc --store"), "{advice}");
        assert!(advice.contains("applied before it is recorded"), "{advice}");
    }

    #[test]
    fn only_a_private_directory_of_ours_is_a_store() {
        let root = tempfile::tempdir().unwrap();
        let d = root.path().join("s");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        let meta = |p: &Path| std::fs::symlink_metadata(p).unwrap();
        assert_eq!(unsafe_store_dir(&meta(&d)), None);
        for mode in [0o750, 0o705, 0o777] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
            let problem = unsafe_store_dir(&meta(&d)).unwrap();
            assert!(problem.contains("other users"), "{problem}");
        }
        let link = root.path().join("l");
        std::os::unix::fs::symlink(&d, &link).unwrap();
        assert!(unsafe_store_dir(&meta(&link))
            .unwrap()
            .contains("symbolic link"));
    }

    #[test]
    fn a_derivation_whose_closure_holds_a_known_secret_stays_in_the_private_store() {
        let root = tempfile::tempdir().unwrap();
        let store = root.path().join("store");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&store)
            .unwrap();
        let secret = format!("nvclosure{:016x}", rand::random::<u64>());
        let redactor = Redactor::new();
        redactor.remember(&secret);
        let nix = || crate::child::nix();
        let expr = format!(
            "(derivation {{ name = \"leak\"; builder = \"/bin/sh\"; system = builtins.currentSystem; \
             args = [ \"-c\" \"cat ${{builtins.toFile \"pw\" \"{secret}\"}} > $out\" ]; }}).drvPath"
        );
        let drv = run(
            nix()
                .args(["eval", "--raw", "--impure", "--eval-store"])
                .arg(&store)
                .args(["--expr", &expr]),
            "eval",
        )
        .unwrap();
        let e = copy_derivation_out(&store, &drv, nix, &redactor).unwrap_err();
        assert!(
            matches!(&e, EvalStoreError::SecretInClosure { holder, .. } if holder.ends_with("-pw")),
            "{e}"
        );
        assert!(e.to_string().contains("world-readable /nix/store"), "{e}");
        assert!(!Path::new(&drv).exists(), "{drv} reached the shared store");
    }

    #[test]
    fn store_hashes_are_left_out_of_a_build_log() {
        let h = "0pqyvyw21p553pf74czgvqks0vjaqp0l";
        assert_eq!(
            super::hashes_left_out(&format!(
                "building '/nix/store/{h}-t1.drv' failed; /nix/store/short-x stays"
            )),
            "building '/nix/store/…-t1.drv' failed; /nix/store/short-x stays"
        );
    }
}
