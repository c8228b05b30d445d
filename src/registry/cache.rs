//! The per-user provider cache, in the unpacked layout `ROOT/HOST/NS/TYPE/VERSION/OS_ARCH/`.
//!
//! Owns placing a verified zip into the cache so that concurrent Nivis runs (threads or
//! processes) never see a half-written package and never write into an executable another run
//! may be executing: each entry has its own lock file, the zip is unpacked into a fresh
//! temporary directory under `ROOT/.nivis/tmp` (same filesystem), its `h1:` is checked, and the
//! directory is renamed into place in one step. An existing entry is never modified: it is
//! reused when its `h1:` matches, or (if damaged) renamed away whole before the new one goes
//! in. Bookkeeping lives under `ROOT/.nivis/`, which OpenTofu ignores, so the cache also works
//! as an OpenTofu `plugin_cache_dir`.
//!
//! Does not talk to the network, choose versions, or decide whether a hash is trustworthy: the
//! caller passes the `h1:` hashes it accepts (from the lock file or a verified download). Does
//! not choose its own location either (see `default_cache_dir` in the parent module).

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use super::address::{Platform, ProviderAddr, Version};
use super::error::{Check, InstallError, Subject};
use super::hash::{self, Hash};
use super::package::{self, TempDir};

/// A package in the cache.
#[derive(Debug, Clone)]
pub(crate) struct Cached {
    /// The package directory.
    pub(crate) dir: PathBuf,
    /// The provider executable inside it.
    pub(crate) executable: PathBuf,
    /// Its `h1:` hash.
    pub(crate) h1: Hash,
}

/// A provider cache rooted at a directory (created on first use).
pub(crate) struct Cache {
    root: PathBuf,
}

impl Cache {
    pub(crate) fn new(root: &Path) -> Cache {
        Cache {
            root: root.to_path_buf(),
        }
    }

    /// `ROOT/HOST/NS/TYPE/VERSION/OS_ARCH`.
    pub(crate) fn package_dir(
        &self,
        addr: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> PathBuf {
        self.root
            .join(addr.rel_path())
            .join(version.to_string())
            .join(platform.to_string())
    }

    fn key(addr: &ProviderAddr, version: &Version, platform: &Platform) -> String {
        format!(
            "{}_{}_{}_{version}_{platform}",
            addr.host.replace([':', '/', '[', ']'], "_"),
            addr.namespace,
            addr.type_
        )
    }

    fn tmp_root(&self) -> PathBuf {
        self.root.join(".nivis").join("tmp")
    }

    /// A fresh scratch directory on the cache's filesystem (for downloads).
    pub(crate) fn scratch(&self, prefix: &str) -> Result<TempDir, InstallError> {
        TempDir::new_in(&self.tmp_root(), prefix)
            .map_err(|e| InstallError::io(self.tmp_root(), "create scratch directory in", e))
    }

    fn lock(&self, key: &str, exclusive: bool) -> Result<File, InstallError> {
        let dir = self.root.join(".nivis").join("locks");
        fs::create_dir_all(&dir).map_err(|e| InstallError::io(&dir, "create", e))?;
        let path = dir.join(format!("{key}.lock"));
        let f = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| InstallError::io(&path, "open cache lock", e))?;
        let res = if exclusive {
            fs2::FileExt::lock_exclusive(&f)
        } else {
            fs2::FileExt::lock_shared(&f)
        };
        res.map_err(|e| InstallError::io(&path, "lock", e))?;
        Ok(f)
    }

    /// The cached package for (addr, version, platform) if it exists and its `h1:` is one of
    /// `accept`. Never returns a package that does not verify.
    pub(crate) fn lookup(
        &self,
        addr: &ProviderAddr,
        version: &Version,
        platform: &Platform,
        accept: &[Hash],
    ) -> Result<Option<Cached>, InstallError> {
        let dir = self.package_dir(addr, version, platform);
        if !dir.is_dir() || !accept.iter().any(|h| h.scheme() == "h1") {
            return Ok(None);
        }
        let _guard = self.lock(&Cache::key(addr, version, platform), false)?;
        Ok(check_entry(&dir, &addr.type_, |h| accept.contains(h)))
    }

    /// Installs the verified zip at `zip` (whose unpacked `h1:` is `h1`) and returns the cached
    /// package. Safe to call concurrently for the same entry from threads and processes.
    // Long because it is one sequence of checks on an untrusted archive, each guarding the next
    // step.
    pub(crate) fn install_zip(
        &self,
        subject: &Subject,
        origin: &impl std::fmt::Display,
        zip: &Path,
        h1: &Hash,
    ) -> Result<Cached, InstallError> {
        let Subject {
            addr,
            version,
            platform,
        } = subject;
        let key = Cache::key(addr, version, platform);
        let target = self.package_dir(addr, version, platform);
        let _guard = self.lock(&key, true)?;
        if target.exists() {
            if let Some(c) = check_entry(&target, &addr.type_, |h| h == h1) {
                return Ok(c);
            }
        }
        // Holding the entry lock, any temporary directory for this entry is left over from a
        // run that died: remove it.
        let tmp_root = self.tmp_root();
        if let Ok(entries) = fs::read_dir(&tmp_root) {
            let prefix = format!("{key}.");
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
        }
        let tmp = TempDir::new_in(&tmp_root, &key)
            .map_err(|e| InstallError::io(&tmp_root, "create temporary directory in", e))?;
        let got = package::unzip(zip, tmp.path(), &addr.type_)
            .map_err(|e| subject.refuse(origin, Check::Contents, e))?;
        if &got != h1 {
            return Err(subject.refuse(
                origin,
                Check::Contents,
                format!("the unpacked package hashes to {got}, the zip to {h1}"),
            ));
        }
        if package::find_executable(tmp.path(), &addr.type_).is_none() {
            return Err(subject.refuse(
                origin,
                Check::Contents,
                format!(
                    "no file named terraform-provider-{}[_…] in the package",
                    addr.type_
                ),
            ));
        }
        let parent = target.parent().expect("package dir has a parent");
        fs::create_dir_all(parent).map_err(|e| InstallError::io(parent, "create", e))?;
        // A damaged entry is renamed away whole (a running provider keeps its open inode),
        // never written into.
        let trash = if target.exists() {
            let t = tmp_root.join(package::unique_name(&format!("{key}-old")));
            fs::rename(&target, &t).map_err(|e| InstallError::io(&target, "move aside", e))?;
            Some(t)
        } else {
            None
        };
        fs::rename(tmp.path(), &target).map_err(|e| InstallError::io(&target, "rename into", e))?;
        tmp.keep();
        if let Ok(d) = File::open(parent) {
            let _ = d.sync_all();
        }
        if let Some(t) = trash {
            let _ = fs::remove_dir_all(t);
        }
        let executable = package::find_executable(&target, &addr.type_).ok_or_else(|| {
            InstallError::io(
                &target,
                "find the provider executable in",
                "missing after rename",
            )
        })?;
        Ok(Cached {
            dir: target,
            executable,
            h1: h1.clone(),
        })
    }
}

/// The entry at `dir` if it has an executable and its `h1:` satisfies `ok`.
fn check_entry(dir: &Path, type_: &str, ok: impl Fn(&Hash) -> bool) -> Option<Cached> {
    let h1 = hash::h1_of_dir(dir).ok()?;
    if !ok(&h1) {
        return None;
    }
    Some(Cached {
        executable: package::find_executable(dir, type_)?,
        dir: dir.to_path_buf(),
        h1,
    })
}
