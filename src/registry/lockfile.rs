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
    pub(crate) fn parse(text: &str, path: &Path) -> Result<LockFile, InstallError> {
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
    pub(crate) fn to_hcl(&self) -> String {
        lockfile_hcl::write(self)
    }

    /// The entry for `addr`.
    pub(crate) fn get(&self, addr: &ProviderAddr) -> Option<&LockedProvider> {
        self.providers.get(addr)
    }

    /// Records `version` for `addr`. Hashes already recorded for the same version are kept
    /// (only `h1:`/`zh:` ones; other schemes are not carried forward, as OpenTofu does), those
    /// of another version are dropped; `new_hashes` are added.
    pub(crate) fn record(
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

#[cfg(test)]
mod tests {
    use super::super::hash::zh_of_bytes;
    use super::*;

    const H1_EMPTY: &str = "h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";
    const H1_HELLO: &str = "h1:ACenfE/xHd2y4YemST5ZES8kUXdM28vrpXDNMENE90w=";

    #[test]
    // Long because its fixtures are whole lock files written out (tofu's, a careless one,
    // Terraform's, Nivis's own), each read back beside the one before.
    fn reads_tofu_output_and_writes_byte_stable() {
        let mut zh: Vec<String> = ["a", "b", "c"]
            .iter()
            .map(|s| zh_of_bytes(s.as_bytes()).to_string())
            .collect();
        zh.sort();
        // Exactly as `tofu providers lock` writes it.
        let tofu = format!(
            r#"# This file is maintained automatically by "tofu init".
# Manual edits may be lost in future updates.

provider "registry.opentofu.org/hashicorp/aws" {{
  version     = "5.0.0"
  constraints = ">= 4.0.0"
  hashes = [
    "{H1_EMPTY}",
    "{z0}",
  ]
}}

provider "registry.opentofu.org/hashicorp/null" {{
  version = "3.2.1"
  hashes = [
    "{H1_HELLO}",
    "{z1}",
    "{z2}",
  ]
}}
"#,
            z0 = zh[0],
            z1 = zh[1],
            z2 = zh[2]
        );
        let path = Path::new(".terraform.lock.hcl");
        let lock = LockFile::parse(&tofu, path).unwrap();
        assert_eq!(lock.header_tool.as_deref(), Some("tofu init"));
        assert_eq!(lock.providers.len(), 2);
        let aws = lock.get(&"hashicorp/aws".parse().unwrap()).unwrap();
        assert_eq!(aws.version.to_string(), "5.0.0");
        assert_eq!(aws.constraints.as_deref(), Some(">= 4.0.0"));
        assert_eq!(aws.hashes.len(), 2);
        let null = lock.get(&"hashicorp/null".parse().unwrap()).unwrap();
        assert_eq!(null.constraints, None);
        assert_eq!(
            lock.to_hcl(),
            tofu,
            "rewriting a tofu-written file changes no byte"
        );
        assert_eq!(LockFile::parse(&lock.to_hcl(), path).unwrap(), lock);

        // The same content written carelessly reads the same and is written canonically.
        let messy = format!(
            "# This file is maintained automatically by \"tofu init\".\n# Manual edits may be lost in future updates.\n\n\
             // a comment\nprovider \"registry.opentofu.org/hashicorp/null\" {{\n  hashes = [\"{z2}\", \"{H1_HELLO}\",\n \"{z1}\", \"{z2}\"]\n  version=\"3.2.1\" # trailing\n}}\n\
             /* a\n   block comment */\nmodule \"old\" {{\n  source = \"x\"\n}}\n\
             provider \"registry.opentofu.org/hashicorp/aws\" {{\n\tconstraints = \">= 4.0.0\"\n\tversion = \"5.0.0\"\n\thashes = [\n\t\t\"{z0}\",\n\t\t\"{H1_EMPTY}\"\n\t]\n}}\n",
            z0 = zh[0],
            z1 = zh[1],
            z2 = zh[2]
        );
        let lock2 = LockFile::parse(&messy, path).unwrap();
        assert_eq!(lock2.warnings.len(), 1, "the module block is reported");
        assert_eq!(lock2.to_hcl(), tofu);

        // Terraform's header and host survive a round trip too.
        let tf = tofu
            .replace("tofu init", "terraform init")
            .replace("registry.opentofu.org", "registry.terraform.io");
        assert_eq!(LockFile::parse(&tf, path).unwrap().to_hcl(), tf);

        // A file Nivis creates: sorted whatever the insertion order, stable on rewrite.
        let mut ours = LockFile::default();
        for (addr, hashes) in [
            ("hashicorp/null", vec![H1_HELLO]),
            ("example.com/acme/thing", vec![H1_EMPTY, H1_HELLO]),
        ] {
            let hashes = hashes.into_iter().map(|h| Hash::parse(h).unwrap());
            ours.record(
                &addr.parse().unwrap(),
                &"1.0.0".parse().unwrap(),
                None,
                hashes.rev(),
            );
        }
        let text = ours.to_hcl();
        assert!(text
            .starts_with("# This file is maintained automatically by \"nivis providers lock\".\n"));
        assert!(
            text.find("example.com/acme/thing").unwrap() < text.find("hashicorp/null").unwrap()
        );
        let reread = LockFile::parse(&text, path).unwrap();
        assert_eq!(reread.to_hcl(), text);

        // Broken files say where.
        let err = LockFile::parse(
            "provider \"registry.opentofu.org/a/b\" {\n  version = 1\n}\n",
            path,
        )
        .unwrap_err();
        assert!(err.to_string().contains(".terraform.lock.hcl:2"), "{err}");
    }
}
