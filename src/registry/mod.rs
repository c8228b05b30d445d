//! Provider installation: from a registry address to a verified provider executable on disk,
//! with or without a network.
//!
//! A provider given as `[HOST/]NAMESPACE/TYPE` plus a version constraint is resolved by
//! [`install`] from these places, in this order:
//! 1. filesystem mirrors ([`InstallOptions::fs_mirrors`], packed or unpacked layout, exactly as
//!    `tofu providers mirror` writes them);
//! 2. the per-user cache ([`InstallOptions::cache_dir`]), only for the version the lock file
//!    selects and only if the cached package matches a locked hash;
//! 3. network mirrors ([`InstallOptions::net_mirrors`], the `index.json`/`VERSION.json`
//!    protocol);
//! 4. the provider's origin registry (service discovery, versions, signed download).
//!
//! (OpenTofu's documented order puts network mirrors before the cache; a cache hit is verified
//! against the lock file, so consulting it first gives the same package without a request.)
//! With [`InstallOptions::offline`] only 1 and 2 are used and nothing touches the network.
//!
//! Nothing unverified is ever installed: registry downloads must pass size, sha256, SHA256SUMS
//! and OpenPGP checks; network-mirror packages must match the hashes the mirror lists; every
//! package must match the lock file's hashes for its version when there is an entry; a package
//! that nothing vouches for (a mirror that lists no hashes, with no lock entry) is refused.
//! Filesystem mirrors are trusted as the operator placed them, and their packages are recorded
//! in the lock file on first use. A successful install records the version and hashes in the
//! lock file (`.terraform.lock.hcl` format, read as OpenTofu writes it, written byte-stable);
//! [`lock`] fills it for several platforms and [`mirror`] writes a mirror directory for an
//! air-gapped network.
//!
//! Module map: `address` (addresses, versions, constraints, platforms), `hash` (`h1:`/`zh:`),
//! `lockfile` + `lockfile_hcl` (model and syntax), `fsmirror`, `netmirror` and `registry` (the
//! three `Source`s), `http` (the only network access), `package` (unzip, executable lookup),
//! `cache` (concurrency-safe unpacked cache), `mirror_write`, `resolve` (the order above, and
//! the lock-file checks). This module does not spawn providers, does not read Nivis's plan or
//! configuration, and does not print: warnings are returned in [`Installed::warnings`].

mod address;
mod cache;
mod credentials;
mod error;
mod fsmirror;
mod hash;
mod http;
mod lockfile;
mod lockfile_hcl;
mod mirror_write;
mod netmirror;
mod package;
#[allow(
    clippy::module_inception,
    reason = "registry::registry is the registry protocol client, one job among the folder's others"
)]
mod registry;
mod resolve;

use std::fmt;
use std::path::{Path, PathBuf};

pub(crate) use address::is_registry_address;
pub use {
    address::{NotationError, Platform, ProviderAddr, Version},
    error::{Check, InstallError, PackageRef},
    hash::{h1_of_dir, h1_of_zip_package, Hash, HashError},
    lockfile::LockFile,
};

/// Where and how to install providers.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    /// The per-user cache (unpacked layout); created if missing. See [`default_cache_dir`].
    pub cache_dir: PathBuf,
    /// The lock file (`.terraform.lock.hcl` format); created on first install. Its directory
    /// must exist.
    pub lock_file: PathBuf,
    /// Filesystem mirror base directories, searched in order.
    pub fs_mirrors: Vec<PathBuf>,
    /// Network mirror base URLs (https), searched in order after the cache.
    pub net_mirrors: Vec<String>,
    /// Never touch the network: only filesystem mirrors and the cache are used.
    pub offline: bool,
    /// The platform to install for.
    pub platform: Platform,
    /// Ignore the lock file's selections and hashes and record new ones (like
    /// `tofu init -upgrade`).
    pub update_lock: bool,
    /// Allow plain `http://` to loopback hosts (registries and mirrors on 127.0.0.1 in tests);
    /// set from `NIVIS_REGISTRY_INSECURE_HTTP=1` by [`InstallOptions::new`].
    pub insecure_loopback_http: bool,
}

impl InstallOptions {
    /// Options with no mirrors, online, for the current platform, keeping the lock file's
    /// selections; `insecure_loopback_http` is taken from `NIVIS_REGISTRY_INSECURE_HTTP=1`.
    pub fn new(cache_dir: impl Into<PathBuf>, lock_file: impl Into<PathBuf>) -> InstallOptions {
        InstallOptions {
            cache_dir: cache_dir.into(),
            lock_file: lock_file.into(),
            fs_mirrors: Vec::new(),
            net_mirrors: Vec::new(),
            offline: false,
            platform: Platform::current(),
            update_lock: false,
            insecure_loopback_http: std::env::var("NIVIS_REGISTRY_INSECURE_HTTP")
                .is_ok_and(|v| v == "1"),
        }
    }
}

/// The default per-user cache: `$XDG_CACHE_HOME/nivis/providers`, else
/// `$HOME/.cache/nivis/providers`.
pub(crate) fn default_cache_dir() -> Option<PathBuf> {
    Some(crate::xdg::cache_home()?.join("nivis").join("providers"))
}

/// Where an installed provider came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A filesystem mirror (its base directory).
    FsMirror(PathBuf),
    /// A network mirror (its base URL).
    NetMirror(String),
    /// The per-user cache, verified against the lock file.
    Cache,
    /// The provider's origin registry (its host).
    Registry(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::FsMirror(p) => write!(f, "filesystem mirror {}", p.display()),
            Origin::NetMirror(u) => write!(f, "network mirror {u}"),
            Origin::Cache => f.write_str("the provider cache"),
            Origin::Registry(h) => write!(f, "registry {h}"),
        }
    }
}

/// An installed, verified provider.
#[derive(Debug, Clone)]
pub struct Installed {
    /// Normalised provider address.
    pub address: ProviderAddr,
    /// Selected version.
    pub version: Version,
    /// Platform installed for.
    pub platform: Platform,
    /// The provider executable.
    pub executable: PathBuf,
    /// The unpacked package directory holding it (in the cache or an unpacked mirror).
    pub package_dir: PathBuf,
    /// Where the package came from.
    pub from: Origin,
    /// The lock file's hashes for this provider after the install.
    pub hashes: Vec<String>,
    /// Non-fatal remarks (e.g. a registry that reports no package hashes).
    pub(crate) warnings: Vec<String>,
}

/// A place packages come from: a filesystem mirror, a network mirror or a registry.
pub(crate) trait Source {
    /// The place, for [`Installed::from`] and messages.
    fn origin(&self) -> Origin;
    /// Versions offered for `addr` that may exist for `platform` (a network mirror only knows
    /// per version). No such provider is `Ok(vec![])`.
    fn versions(
        &self,
        addr: &ProviderAddr,
        platform: &Platform,
    ) -> Result<Vec<Version>, InstallError>;
    /// Obtains the package for `subject`, checked as far as this source can vouch for it,
    /// downloading into `scratch` if needed.
    fn fetch(
        &self,
        subject: &error::Subject,
        scratch: &Path,
    ) -> Result<package::Package, InstallError>;
}

/// Installs the provider `source` (`[HOST/]NAMESPACE/TYPE`) for `opts.platform`, selecting the
/// lock file's version (or else the newest one `constraint` allows), verifying it and
/// recording it in the lock file.
pub fn install(
    source: &str,
    constraint: Option<&str>,
    opts: &InstallOptions,
) -> Result<Installed, InstallError> {
    resolve::install(source, constraint, opts)
}

/// Records in the lock file, for every provider, the selected version and the hashes of its
/// packages for every platform in `platforms` (`nivis providers lock --platform …`). Existing
/// entries keep their version; their hashes must match unless `opts.update_lock`.
pub fn lock(
    sources: &[(String, Option<String>)],
    platforms: &[Platform],
    opts: &InstallOptions,
) -> Result<(), InstallError> {
    resolve::lock(sources, platforms, opts)
}

/// Writes a mirror directory `dir` (packed zips plus network-mirror JSON) holding, for every
/// provider, the lock file's version (or else the newest allowed one) for every platform in
/// `platforms` (`nivis providers mirror DIR`). Packages are verified like installs; the lock
/// file is not changed.
pub fn mirror(
    sources: &[(String, Option<String>)],
    platforms: &[Platform],
    dir: &Path,
    opts: &InstallOptions,
) -> Result<(), InstallError> {
    resolve::mirror(sources, platforms, dir, opts)
}
