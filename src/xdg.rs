//! The per-user base directories Nivis keeps things in (the XDG Base Directory rules): state
//! under `$XDG_STATE_HOME`, caches under `$XDG_CACHE_HOME`, each with its `$HOME` default.
//!
//! Ground floor: it reads only the environment. Owns where those two bases are; not what goes
//! under them (projects' states: `project`; kept Nix errors and the private eval store:
//! `nixeval`; S3 rescue files: `state::s3`; providers: `registry`; schemas:
//! `plugin::schema_cache`). The runtime directory (`$XDG_RUNTIME_DIR`) is `rundir`'s, with
//! checks of its own.

use std::path::PathBuf;

/// Neither `$XDG_STATE_HOME` nor `$HOME` is set to an absolute path, so there is no per-user
/// place for state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NoStateHome;

impl std::fmt::Display for NoStateHome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "cannot find a place for the state: set XDG_STATE_HOME or HOME, or pass --state",
        )
    }
}

impl std::error::Error for NoStateHome {}

/// The directory per-user state goes in: `$XDG_STATE_HOME`, else `~/.local/state` (never a
/// shared temporary directory, where another user could prepare it).
pub(crate) fn state_home() -> Result<PathBuf, NoStateHome> {
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").map(PathBuf::from) {
        if dir.is_absolute() {
            return Ok(dir);
        }
    }
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .map(|h| h.join(".local/state"))
        .ok_or(NoStateHome)
}

/// The directory per-user caches go in: `$XDG_CACHE_HOME` when set and not empty, else
/// `$HOME/.cache`; `None` without either.
pub(crate) fn cache_home() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
}
