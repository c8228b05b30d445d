//! The dependency lock file model: which exact version of each provider, under which
//! constraints, with which acceptable package hashes.
//!
//! Owns [`LockFile`] and [`LockedProvider`], the rules for merging hashes into an entry, and
//! the serialised read-modify-write of the file on disk ([`update`]: a lock on the directory,
//! then write-to-temp and rename). The `.terraform.lock.hcl` syntax itself lives in
//! `lockfile_hcl`. Does not decide whether a package is acceptable beyond "does it match a
//! recorded hash" ([`LockedProvider::accepts`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Write;
use std::path::Path;

use super::address::{ProviderAddr, Version};
use super::error::InstallError;
use super::hash::Hash;
use super::lockfile_hcl;

/// The tool named in the header comment of files Nivis creates.
pub(crate) const NIVIS_HEADER_TOOL: &str = "nivis providers lock";

/// The lock file: one entry per provider, kept sorted by address.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LockFile {
    /// The tool named in the header comment (`tofu init`, `terraform init`, …), kept so that
    /// rewriting a file another tool wrote changes no bytes. `None` for a new file.
    pub header_tool: Option<String>,
    /// Entries by provider address.
    pub providers: BTreeMap<ProviderAddr, LockedProvider>,
    /// Non-fatal remarks from reading (ignored `module` blocks).
    pub warnings: Vec<String>,
}

/// One provider's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedProvider {
    /// The exact selected version.
    pub version: Version,
    /// The constraint string in force when the version was selected, if any.
    pub constraints: Option<String>,
    /// Acceptable package hashes, any scheme, sorted and deduplicated.
    pub hashes: BTreeSet<Hash>,
}

impl LockedProvider {
    /// The `h1:`/`zh:` hashes (the only ones used to verify).
    pub(crate) fn preferred_hashes(&self) -> impl Iterator<Item = &Hash> {
        self.hashes.iter().filter(|h| h.is_preferred())
    }

    /// Whether the entry has any hash that can verify a package.
    pub(crate) fn has_preferred_hashes(&self) -> bool {
        self.preferred_hashes().next().is_some()
    }

    /// Whether any of `package_hashes` is recorded here (as `h1:`/`zh:`).
    pub(crate) fn accepts(&self, package_hashes: &[Hash]) -> bool {
        package_hashes
            .iter()
            .any(|h| h.is_preferred() && self.hashes.contains(h))
    }
}

impl LockFile {
    /// Parses lock file text; `path` is only used in error messages.
    pub fn parse(text: &str, path: &Path) -> Result<LockFile, InstallError> {
        lockfile_hcl::parse(text).map_err(|(line, detail)| InstallError::LockFile {
            path: path.to_path_buf(),
            line,
            detail,
        })
    }

    /// Reads the file at `path`; a missing file is an empty lock file.
    pub fn read(path: &Path) -> Result<LockFile, InstallError> {
        match read_text(path) {
            Ok(text) => LockFile::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(LockFile::default()),
            Err(e) => Err(InstallError::io(path, "read lock file", e)),
        }
    }

    /// The canonical text: header, then providers sorted by address, hashes sorted. The same
    /// model always gives the same bytes.
    pub fn to_hcl(&self) -> String {
        lockfile_hcl::write(self)
    }

    /// The entry for `addr`.
    pub fn get(&self, addr: &ProviderAddr) -> Option<&LockedProvider> {
        self.providers.get(addr)
    }

    /// Records `version` for `addr`. Hashes already recorded for the same version are kept
    /// (only `h1:`/`zh:` ones; other schemes are not carried forward, as OpenTofu does), those
    /// of another version are dropped; `new_hashes` are added.
    pub fn record(
        &mut self,
        addr: &ProviderAddr,
        version: &Version,
        constraints: Option<String>,
        new_hashes: impl IntoIterator<Item = Hash>,
    ) {
        let mut hashes: BTreeSet<Hash> = match self.providers.get(addr) {
            Some(old) if &old.version == version => old.preferred_hashes().cloned().collect(),
            _ => BTreeSet::new(),
        };
        hashes.extend(new_hashes.into_iter().filter(Hash::is_preferred));
        self.providers.insert(
            addr.clone(),
            LockedProvider {
                version: version.clone(),
                constraints,
                hashes,
            },
        );
    }
}

/// Reads the lock file at `path`, lets `f` change it, and writes it back if its text changed,
/// all while holding an exclusive lock on the file's directory, so that concurrent Nivis runs
/// (and threads) never lose each other's entries. The write goes to a temporary file that is
/// renamed over the old one, so readers see the old or the new file, never a torn one.
pub(crate) fn update<T>(
    path: &Path,
    f: impl FnOnce(&mut LockFile) -> Result<T, InstallError>,
) -> Result<T, InstallError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let guard = File::open(&dir).map_err(|e| InstallError::io(&dir, "open directory of", e))?;
    fs2::FileExt::lock_exclusive(&guard).map_err(|e| InstallError::io(&dir, "lock", e))?;
    let old_text = match read_text(path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(InstallError::io(path, "read lock file", e)),
    };
    let mut lock = match &old_text {
        Some(t) => LockFile::parse(t, path)?,
        None => LockFile::default(),
    };
    let out = f(&mut lock)?;
    let new_text = lock.to_hcl();
    if old_text.as_deref() != Some(new_text.as_str()) {
        write_atomic(path, new_text.as_bytes())?;
    }
    drop(guard);
    Ok(out)
}

/// Writes `bytes` to a temporary file next to `path`, syncs it, and renames it over `path`.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), InstallError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{}.tmp", super::package::unique_name(&name)));
    let res = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(InstallError::io(path, "write", e));
    }
    Ok(())
}

/// Largest lock file read (they hold a few hashes per provider).
const LOCK_FILE_LIMIT: u64 = 16 << 20;

/// Reads a lock file, refusing one larger than [`LOCK_FILE_LIMIT`] (or a device that never
/// ends) instead of reading without bound.
fn read_text(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(LOCK_FILE_LIMIT + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > LOCK_FILE_LIMIT {
        return Err(std::io::Error::other(format!(
            "larger than {} MiB: not a lock file",
            LOCK_FILE_LIMIT >> 20
        )));
    }
    Ok(text)
}
