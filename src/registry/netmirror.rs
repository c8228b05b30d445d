//! Network mirrors: the provider network mirror protocol (`index.json`, `VERSION.json`).
//!
//! Owns the two documents below a mirror base URL (`HOST/NS/TYPE/index.json` lists versions,
//! `HOST/NS/TYPE/VERSION.json` lists one archive URL and its hashes per platform), downloading
//! the archive and checking it against the listed hashes. A mirror that lists no hashes vouches
//! for nothing: such a package is only installed when the lock file verifies it. No service
//! discovery and no credentials are used. Does not unpack or cache anything.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use super::address::{Platform, ProviderAddr, Version};
use super::error::{Check, InstallError, Subject};
use super::hash::Hash;
use super::http::{self, Http};
use super::package::{self, Location, Package, TempPath, Trust};
use super::{Origin, Source};

/// Largest archive fetched from a mirror.
use super::package::ARCHIVE_LIMIT;

/// A network mirror at a base URL.
pub(crate) struct NetMirror {
    base: String,
    http: Arc<Http>,
}

#[derive(Deserialize)]
struct Index {
    versions: BTreeMap<String, serde_json::Value>,
}

#[derive(Deserialize)]
struct VersionDoc {
    archives: BTreeMap<String, Archive>,
}

#[derive(Deserialize)]
struct Archive {
    url: String,
    #[serde(default)]
    hashes: Vec<String>,
}

impl NetMirror {
    /// A mirror at `base` (a trailing `/` is added if missing).
    pub(crate) fn new(base: &str, http: Arc<Http>) -> NetMirror {
        let mut base = base.to_string();
        if !base.ends_with('/') {
            base.push('/');
        }
        NetMirror { base, http }
    }

    fn provider_url(&self, addr: &ProviderAddr, file: &str) -> String {
        format!(
            "{}{}/{}/{}/{file}",
            self.base, addr.host, addr.namespace, addr.type_
        )
    }
}

impl Source for NetMirror {
    fn origin(&self) -> Origin {
        Origin::NetMirror(self.base.clone())
    }

    /// The mirror's versions; which platforms each has is only known from its `VERSION.json`.
    fn versions(
        &self,
        addr: &ProviderAddr,
        _platform: &Platform,
    ) -> Result<Vec<Version>, InstallError> {
        let url = self.provider_url(addr, "index.json");
        let Some((_, index)) = self.http.get_json::<Index>(&url)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for v in index.versions.keys() {
            out.push(Version::parse(v).map_err(|e| InstallError::BadResponse {
                url: url.clone(),
                detail: e.to_string(),
            })?);
        }
        Ok(out)
    }

    fn fetch(&self, subject: &Subject, scratch: &Path) -> Result<Package, InstallError> {
        let origin = self.origin();
        let url = self.provider_url(&subject.addr, &format!("{}.json", subject.version));
        let Some((final_url, doc)) = self.http.get_json::<VersionDoc>(&url)? else {
            return Err(subject.unavailable(&origin));
        };
        let Some(archive) = doc.archives.get(&subject.platform.to_string()) else {
            return Err(subject.unavailable(&origin));
        };
        let listed: Vec<Hash> = archive
            .hashes
            .iter()
            .map(|h| Hash::parse(h))
            .collect::<Result<_, _>>()
            .map_err(|e| InstallError::BadResponse {
                url: url.clone(),
                detail: e.to_string(),
            })?;
        let zip_url =
            http::resolve(&final_url, &archive.url).map_err(|e| InstallError::BadResponse {
                url: url.clone(),
                detail: e.to_string(),
            })?;
        let dest = scratch.join(package::unique_name("mirror-archive"));
        let guard = TempPath(dest.clone());
        let Some((size, _)) = self.http.download(&zip_url, &dest, ARCHIVE_LIMIT)? else {
            return Err(InstallError::BadResponse {
                url: zip_url,
                detail: format!("the archive listed in {url} is missing (HTTP 404)"),
            });
        };
        if size > ARCHIVE_LIMIT {
            return Err(subject.refuse(
                &origin,
                Check::Contents,
                format!("the archive is larger than {ARCHIVE_LIMIT} bytes"),
            ));
        }
        let location = Location::Zip(dest);
        let measured =
            package::measure(&location).map_err(|e| subject.refuse(&origin, Check::Contents, e))?;
        let usable: Vec<&Hash> = listed.iter().filter(|h| h.is_preferred()).collect();
        let trust = if usable.is_empty() {
            Trust::Unverified
        } else if measured.all().iter().any(|h| usable.contains(&h)) {
            Trust::Listed
        } else {
            return Err(subject.refuse(
                &origin,
                Check::MirrorHashes,
                format!(
                    "the mirror lists {} but the archive hashes to {}",
                    usable
                        .iter()
                        .map(|h| h.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    measured
                        .all()
                        .iter()
                        .map(Hash::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        Ok(Package {
            location,
            origin,
            vouched: if trust == Trust::Listed {
                usable.into_iter().cloned().collect()
            } else {
                Vec::new()
            },
            trust,
            warnings: Vec::new(),
            measured: Some(measured),
            _download: Some(guard),
        })
    }
}
