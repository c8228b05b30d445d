//! Filesystem mirrors: directories laid out as `tofu providers mirror` writes them.
//!
//! Owns finding packages below a mirror base directory in both layouts:
//! * packed: `HOST/NS/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip` (file name matched
//!   case-insensitively);
//! * unpacked: `HOST/NS/TYPE/VERSION/OS_ARCH/` holding the extracted package.
//!
//! Host, namespace and type directories match case-insensitively; the JSON index files of a
//! network mirror are ignored. Unlike OpenTofu, symlinked directories below the base are
//! followed too, so a Nix `symlinkJoin` of providers works as a mirror. Packages found here are
//! trusted as the operator placed them; the lock file is what verifies them. Does not write
//! mirrors (see `mirror_write`) and never touches the network.

use std::fs;
use std::path::{Path, PathBuf};

use super::address::{Platform, ProviderAddr, Version};
use super::error::{InstallError, Subject};
use super::package::{Location, Package, Trust};
use super::{Origin, Source};

/// One package found in a mirror.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub(crate) version: Version,
    pub(crate) platform: Platform,
    pub(crate) location: Location,
}

/// A filesystem mirror rooted at a base directory.
pub(crate) struct FsMirror {
    base: PathBuf,
}

impl FsMirror {
    pub(crate) fn new(base: &Path) -> FsMirror {
        FsMirror {
            base: base.to_path_buf(),
        }
    }

    /// Every package for `addr` below the base, in both layouts.
    pub(crate) fn scan(&self, addr: &ProviderAddr) -> Vec<Found> {
        scan(&self.base, addr)
    }
}

/// Subdirectories of `dir` whose name equals `want` ignoring case (following symlinks).
fn matching_dirs(dir: &Path, want: &str) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.to_lowercase() == want)
        })
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

/// The directories `BASE/HOST/NS/TYPE` for `addr` (normally at most one).
pub(crate) fn provider_dirs(base: &Path, addr: &ProviderAddr) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for h in matching_dirs(base, &addr.host) {
        for n in matching_dirs(&h, &addr.namespace) {
            out.extend(matching_dirs(&n, &addr.type_));
        }
    }
    out
}

/// Parses a packed file name `terraform-provider-TYPE_VERSION_OS_ARCH.zip`.
pub(crate) fn parse_packed_name(name: &str, type_: &str) -> Option<(Version, Platform)> {
    let prefix = format!("terraform-provider-{type_}_");
    if name.len() <= prefix.len() + 4
        || !name.is_char_boundary(prefix.len())
        || !name[..prefix.len()].eq_ignore_ascii_case(&prefix)
        || !name.to_ascii_lowercase().ends_with(".zip")
    {
        return None;
    }
    let rest = &name[prefix.len()..name.len() - 4];
    let mut parts = rest.splitn(3, '_');
    let (v, os, arch) = (parts.next()?, parts.next()?, parts.next()?);
    let version = Version::parse(v).ok()?;
    let platform = Platform::parse(&format!(
        "{}_{}",
        os.to_ascii_lowercase(),
        arch.to_ascii_lowercase()
    ))
    .ok()?;
    Some((version, platform))
}

fn scan(base: &Path, addr: &ProviderAddr) -> Vec<Found> {
    let mut out = Vec::new();
    for dir in provider_dirs(base, addr) {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let path = e.path();
            let Ok(meta) = fs::metadata(&path) else {
                continue;
            };
            if meta.is_file() {
                if let Some((version, platform)) = parse_packed_name(&name, &addr.type_) {
                    out.push(Found {
                        version,
                        platform,
                        location: Location::Zip(path),
                    });
                }
            } else if meta.is_dir() {
                let Ok(version) = Version::parse(&name) else {
                    continue;
                };
                let Ok(plats) = fs::read_dir(&path) else {
                    continue;
                };
                let mut plats: Vec<_> = plats.flatten().collect();
                plats.sort_by_key(|e| e.file_name());
                for p in plats {
                    let Some(pn) = p.file_name().to_str().map(str::to_string) else {
                        continue;
                    };
                    if let (Ok(platform), true) = (Platform::parse(&pn), p.path().is_dir()) {
                        out.push(Found {
                            version: version.clone(),
                            platform,
                            location: Location::Dir(p.path()),
                        });
                    }
                }
            }
        }
    }
    out
}

impl Source for FsMirror {
    fn origin(&self) -> Origin {
        Origin::FsMirror(self.base.clone())
    }

    fn versions(
        &self,
        addr: &ProviderAddr,
        platform: &Platform,
    ) -> Result<Vec<Version>, InstallError> {
        let mut v: Vec<Version> = self
            .scan(addr)
            .into_iter()
            .filter(|f| &f.platform == platform)
            .map(|f| f.version)
            .collect();
        v.sort();
        v.dedup();
        Ok(v)
    }

    fn fetch(&self, subject: &Subject, _scratch: &Path) -> Result<Package, InstallError> {
        let found = self.scan(&subject.addr);
        // Prefer an unpacked directory (usable in place), then a zip.
        let pick = found
            .iter()
            .filter(|f| f.version == subject.version && f.platform == subject.platform)
            .min_by_key(|f| matches!(f.location, Location::Zip(_)));
        let Some(f) = pick else {
            return Err(subject.unavailable(&self.origin()));
        };
        Ok(Package {
            location: f.location.clone(),
            origin: self.origin(),
            trust: Trust::Local,
            vouched: Vec::new(),
            warnings: Vec::new(),
            measured: None,
            _download: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_names() {
        let (v, p) =
            parse_packed_name("terraform-provider-null_2.1.2_linux_amd64.zip", "null").unwrap();
        assert_eq!(
            (v.to_string(), p.to_string()),
            ("2.1.2".into(), "linux_amd64".into())
        );
        let (v, _) =
            parse_packed_name("Terraform-Provider-NULL_2.0.0-RC1_Linux_AMD64.ZIP", "null").unwrap();
        assert_eq!(v.to_string(), "2.0.0-RC1");
        assert!(parse_packed_name("terraform-provider-null_2.1.2_linux.zip", "null").is_none());
        assert!(
            parse_packed_name("terraform-provider-nullx_2.1.2_linux_amd64.zip", "null").is_none()
        );
        assert!(
            parse_packed_name("terraform-provider-null_2.1.2_linux_amd64.tar", "null").is_none()
        );
    }
}
