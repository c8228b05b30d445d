//! Realising `__build` outputs: the derivation the evaluation wrote into the private eval store
//! is copied into the shared store (refused when its closure holds a known secret, see
//! `eval_store`), then built there with `nix-store --realise`. When the run holds secrets, the
//! derivation is built in the private store first and its outputs checked, so a secret the
//! `.drv` hid (escaped, split) and the build joined never reaches the shared store. Owns no
//! evaluation.

use std::fmt;
use std::path::Path;
use std::process::Stdio;

use super::eval_store::{self, EvalStoreError};
use super::nix_command;
use crate::secrets::Redactor;

/// Why a build output cannot be made to exist in the store.
#[derive(Debug)]
pub(crate) enum RealiseError {
    /// The derivation could not be brought out of the private eval store (or must not be).
    EvalStore(EvalStoreError),
    /// `nix-store` cannot be started.
    NotRun(std::io::Error),
    /// `nix-store --realise` failed.
    BuildFailed {
        /// The derivation or store path built.
        target: String,
        /// What nix-store said.
        stderr: String,
    },
    /// The build succeeded and the output is still missing.
    Missing {
        /// The derivation or store path built.
        target: String,
        /// The store path that should exist.
        store_path: String,
    },
}

impl fmt::Display for RealiseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RealiseError::EvalStore(e) => write!(f, "{e}"),
            RealiseError::NotRun(e) => write!(f, "cannot run nix-store: {e}"),
            RealiseError::BuildFailed { target, stderr } => {
                write!(f, "building {target} failed:\n{stderr}")
            }
            RealiseError::Missing { target, store_path } => {
                write!(f, "{target} was built but {store_path} does not exist")
            }
        }
    }
}

impl std::error::Error for RealiseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RealiseError::NotRun(e) => Some(e),
            RealiseError::EvalStore(e) => Some(e),
            _ => None,
        }
    }
}

/// Makes sure a build output exists in the store, building its derivation if needed. The
/// evaluation wrote the derivation into the private eval store: it is copied into the shared
/// store first (refused when its closure holds a known secret), then built there.
/// `redactor`: the run's secrets, none of which may leave the private store.
pub(crate) fn realise(
    path: &str,
    drv_path: Option<&str>,
    redactor: &Redactor,
) -> Result<(), RealiseError> {
    let store_path = store_path_prefix(path);
    if Path::new(&store_path).exists() {
        return Ok(());
    }
    let target = drv_path.unwrap_or(&store_path);
    if let Some(drv) = drv_path {
        let store = eval_store::dir().map_err(RealiseError::EvalStore)?;
        // Before the copy: a .drv that hides a secret must not reach the shared store either.
        if redactor.knows_secrets() && !Path::new(drv).exists() {
            build_privately(&store, drv, redactor).map_err(RealiseError::EvalStore)?;
        }
        eval_store::copy_derivation_out(&store, drv, nix_command, redactor)
            .map_err(RealiseError::EvalStore)?;
    }
    let output = crate::child::nix_store()
        .args(["--realise", target])
        .stdin(Stdio::null())
        .output()
        .map_err(RealiseError::NotRun)?;
    if !output.status.success() {
        return Err(RealiseError::BuildFailed {
            target: target.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr)
                .trim_end()
                .to_string(),
        });
    }
    if !Path::new(&store_path).exists() {
        return Err(RealiseError::Missing {
            target: target.to_string(),
            store_path,
        });
    }
    Ok(())
}

/// Builds `drv` inside the private eval store and refuses it when an output holds a known
/// secret. The closure check of the `.drv` finds a secret written as it is; this one finds a
/// secret the derivation carried in another form (shell-escaped, split in two variables) and
/// its build joined. Nix builds in a chroot store in a sandbox (user namespaces); it is given
/// the host's `/bin`, `/usr` and `/lib*`, which an unsandboxed shared-store build sees too. Its
/// inputs come from the shared store (`substituters auto`; not signed, as they are the
/// machine's own), never from a binary cache.
fn build_privately(
    store: &Path,
    drv: &str,
    redactor: &Redactor,
) -> Result<(), eval_store::EvalStoreError> {
    let host_paths: Vec<&str> = ["/bin", "/usr", "/lib", "/lib64", "/lib32"]
        .into_iter()
        .filter(|p| Path::new(p).exists())
        .collect();
    let output = crate::child::nix_store()
        .arg("--store")
        .arg(store)
        .args(["--option", "substituters", "auto"])
        .args(["--option", "require-sigs", "false"])
        .args(["--option", "extra-sandbox-paths", &host_paths.join(" ")])
        .args(["--realise", drv])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| EvalStoreError::PrivateBuildFailed {
            drv: drv.to_string(),
            stderr: format!("cannot run nix-store: {e}"),
        })?;
    if !output.status.success() {
        return Err(EvalStoreError::PrivateBuildFailed {
            drv: drv.to_string(),
            stderr: redactor
                .redact(&String::from_utf8_lossy(&output.stderr))
                .into_owned(),
        });
    }
    let outputs = String::from_utf8_lossy(&output.stdout);
    eval_store::check_private_outputs(store, drv, &outputs, redactor)
}

/// `/nix/store/<hash>-<name>/sub/file` -> `/nix/store/<hash>-<name>`.
fn store_path_prefix(path: &str) -> String {
    let Some(rest) = path.strip_prefix("/nix/store/") else {
        return path.to_string();
    };
    match rest.find('/') {
        Some(i) => format!("/nix/store/{}", &rest[..i]),
        None => path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::store_path_prefix;

    #[test]
    fn a_file_in_a_store_path_is_realised_through_its_store_path() {
        assert_eq!(
            store_path_prefix("/nix/store/abc-img/disk.vhd"),
            "/nix/store/abc-img"
        );
        assert_eq!(
            store_path_prefix("/nix/store/abc-img"),
            "/nix/store/abc-img"
        );
        assert_eq!(store_path_prefix("/tmp/x"), "/tmp/x");
    }
}
