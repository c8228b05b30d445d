//! The provider registry protocol: service discovery, available versions, download metadata,
//! and the verification of what a registry serves.
//!
//! Owns, for one registry host: `/.well-known/terraform.json` discovery of `providers.v1`,
//! `NS/TYPE/versions`, `NS/TYPE/VERSION/download/OS/ARCH`, and the checks every download must
//! pass before it is handed on:
//! 1. the metadata echoes the platform, offers protocol 5 or 6, and (when the registry reports
//!    `packages`) declares for this platform a positive size and a `zh:` equal to `shasum`;
//! 2. the OpenPGP detached signature of SHA256SUMS verifies with one of the registry's keys
//!    (primary keys or bound subkeys; expired keys are tolerated, as OpenTofu does);
//! 3. SHA256SUMS lists `filename` with exactly `shasum`;
//! 4. the zip's size equals `package_size` and its sha256 equals `shasum`.
//!
//! Unlike OpenTofu, a registry that supplies no signing keys is refused for every host. Every
//! sha256 in the signed SHA256SUMS (and every hash the registry reports) becomes a vouched
//! hash for the lock file. Does not pick versions, unpack, cache, or know where anything is
//! stored: it downloads into a scratch directory the caller owns.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey};
use pgp::types::KeyDetails;
use serde::Deserialize;

use super::address::{Platform, ProviderAddr, Version};
use super::error::{Check, InstallError, Subject};
use super::hash::Hash;
use super::http::{self, Http, SMALL_LIMIT};
use super::package::{self, Location, Package, TempPath, Trust};
use super::{Origin, Source};

/// The client for one registry host.
pub(crate) struct Registry {
    host: String,
    http: Arc<Http>,
    insecure_loopback: bool,
    memo: Mutex<Memo>,
}

#[derive(Default)]
struct Memo {
    base: Option<String>,
    versions: HashMap<ProviderAddr, Vec<VersionEntry>>,
}

#[derive(Deserialize)]
struct Discovery {
    #[serde(rename = "providers.v1")]
    providers_v1: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Versions {
    versions: Vec<VersionEntry>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Deserialize, Clone)]
struct VersionEntry {
    version: String,
    #[serde(default)]
    protocols: Vec<String>,
    #[serde(default)]
    platforms: Vec<PlatformEntry>,
}

#[derive(Deserialize, Clone)]
struct PlatformEntry {
    os: String,
    arch: String,
}

#[derive(Deserialize)]
struct Download {
    #[serde(default)]
    protocols: Vec<String>,
    os: String,
    arch: String,
    filename: String,
    download_url: String,
    shasums_url: String,
    shasums_signature_url: String,
    shasum: String,
    #[serde(default)]
    signing_keys: SigningKeys,
    packages: Option<BTreeMap<String, PackageInfo>>,
}

#[derive(Deserialize, Default)]
struct SigningKeys {
    #[serde(default)]
    gpg_public_keys: Vec<GpgKey>,
}

#[derive(Deserialize)]
struct GpgKey {
    #[serde(default)]
    key_id: String,
    ascii_armor: String,
}

#[derive(Deserialize)]
struct PackageInfo {
    #[serde(default)]
    hashes: Vec<String>,
    #[serde(default)]
    package_size: u64,
}

/// Whether protocol list `protocols` (`MAJOR.MINOR`) offers a major version Nivis speaks.
fn protocols_supported(protocols: &[String]) -> bool {
    protocols.iter().any(|p| {
        p.split('.')
            .next()
            .and_then(|m| m.parse::<u32>().ok())
            .is_some_and(|m| (5..=6).contains(&m))
    })
}

impl Registry {
    /// The registry at `host`; `insecure_loopback` lets a loopback host be reached by http.
    pub(crate) fn new(host: &str, http: Arc<Http>, insecure_loopback: bool) -> Registry {
        Registry {
            host: host.to_string(),
            http,
            insecure_loopback,
            memo: Mutex::new(Memo::default()),
        }
    }

    fn memo(&self) -> std::sync::MutexGuard<'_, Memo> {
        self.memo.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The `providers.v1` base URL, ending in `/`.
    fn base(&self) -> Result<String, InstallError> {
        if let Some(b) = &self.memo().base {
            return Ok(b.clone());
        }
        let scheme = if self.insecure_loopback && super::address::host_is_loopback(&self.host) {
            "http"
        } else {
            "https"
        };
        let url = format!("{scheme}://{}/.well-known/terraform.json", self.host);
        let Some((final_url, doc)) = self.http.get_json::<Discovery>(&url)? else {
            return Err(InstallError::BadResponse {
                url,
                detail: format!(
                    "{} does not offer service discovery (HTTP 404): it is not a provider registry",
                    self.host
                ),
            });
        };
        let rel = match doc.providers_v1 {
            Some(serde_json::Value::String(s)) => s,
            _ => {
                return Err(InstallError::BadResponse {
                    url,
                    detail: format!("{} does not offer the providers.v1 service", self.host),
                })
            }
        };
        let mut base = http::resolve(&final_url, &rel).map_err(|e| InstallError::BadResponse {
            url: url.clone(),
            detail: e.to_string(),
        })?;
        if !base.ends_with('/') {
            base.push('/');
        }
        self.memo().base = Some(base.clone());
        Ok(base)
    }

    fn version_entries(&self, addr: &ProviderAddr) -> Result<Vec<VersionEntry>, InstallError> {
        if let Some(v) = self.memo().versions.get(addr) {
            return Ok(v.clone());
        }
        let url = format!("{}{}/{}/versions", self.base()?, addr.namespace, addr.type_);
        let entries = match self.http.get_json::<Versions>(&url)? {
            Some((_, doc)) => {
                let _ = doc.warnings;
                doc.versions
            }
            None => Vec::new(),
        };
        self.memo().versions.insert(addr.clone(), entries.clone());
        Ok(entries)
    }
}

impl Source for Registry {
    fn origin(&self) -> Origin {
        Origin::Registry(self.host.clone())
    }

    /// Versions the registry lists for `platform` with a protocol Nivis speaks.
    fn versions(
        &self,
        addr: &ProviderAddr,
        platform: &Platform,
    ) -> Result<Vec<Version>, InstallError> {
        Ok(self
            .version_entries(addr)?
            .into_iter()
            .filter(|e| e.protocols.is_empty() || protocols_supported(&e.protocols))
            .filter(|e| {
                e.platforms
                    .iter()
                    .any(|p| p.os == platform.os && p.arch == platform.arch)
            })
            .filter_map(|e| Version::parse(&e.version).ok())
            .collect())
    }

    // Long because it is the verification chain in order (metadata, the signature over SHA256SUMS,
    // the package's line in SHA256SUMS, the zip's hash), each step guarding the next; an auditable
    // chain reads best in one place.
    fn fetch(&self, subject: &Subject, scratch: &Path) -> Result<Package, InstallError> {
        let origin = self.origin();
        let Subject {
            addr,
            version,
            platform,
        } = subject;
        let url = format!(
            "{}{}/{}/{version}/download/{}/{}",
            self.base()?,
            addr.namespace,
            addr.type_,
            platform.os,
            platform.arch
        );
        let Some((final_url, meta)) = self.http.get_json::<Download>(&url)? else {
            return Err(subject.unavailable(&origin));
        };
        let refuse = |check, detail: String| subject.refuse(&origin, check, detail);
        let mut warnings = Vec::new();

        // 1. Metadata.
        if meta.os != platform.os || meta.arch != platform.arch {
            return Err(refuse(
                Check::Metadata,
                format!(
                    "asked for {platform}, the registry answered for {}_{}",
                    meta.os, meta.arch
                ),
            ));
        }
        if !protocols_supported(&meta.protocols) {
            return Err(refuse(
                Check::Metadata,
                format!("the package speaks plugin protocol {:?}; Nivis speaks 5 and 6: choose another version", meta.protocols),
            ));
        }
        if meta.filename.contains(['/', '\\']) || meta.filename.is_empty() {
            return Err(refuse(
                Check::Metadata,
                format!("invalid filename {:?}", meta.filename),
            ));
        }
        let shasum = Hash::zh_from_hex(&meta.shasum)
            .map_err(|e| refuse(Check::Metadata, format!("shasum: {e}")))?;
        let mut vouched = Vec::new();
        let declared_size = match &meta.packages {
            Some(pkgs) => {
                let Some(this) = pkgs.get(&platform.to_string()) else {
                    return Err(refuse(
                        Check::Metadata,
                        format!("the registry's packages list has no entry for {platform}"),
                    ));
                };
                if this.package_size == 0 {
                    return Err(refuse(
                        Check::Metadata,
                        "the registry declares package_size 0".into(),
                    ));
                }
                if !this.hashes.iter().any(|h| h == shasum.as_str()) {
                    return Err(refuse(
                        Check::Metadata,
                        format!("the registry reports hashes {:?} for {platform}, which do not include the declared shasum {shasum}", this.hashes),
                    ));
                }
                for info in pkgs.values() {
                    vouched.extend(
                        info.hashes
                            .iter()
                            .filter_map(|h| Hash::parse(h).ok())
                            .filter(Hash::is_preferred),
                    );
                }
                Some(this.package_size)
            }
            None => {
                warnings.push(format!(
                    "registry {} reports no package hashes for {addr} {version}; only this platform's checksums are recorded",
                    self.host
                ));
                None
            }
        };

        // 2. Signature over SHA256SUMS.
        let resolve = |u: &str| {
            http::resolve(&final_url, u).map_err(|e| InstallError::BadResponse {
                url: url.clone(),
                detail: e.to_string(),
            })
        };
        let sums_url = resolve(&meta.shasums_url)?;
        let sig_url = resolve(&meta.shasums_signature_url)?;
        let missing = |u: &str| InstallError::BadResponse {
            url: u.to_string(),
            detail: "not found (HTTP 404)".into(),
        };
        let (_, sums) = self
            .http
            .get_bytes(&sums_url, SMALL_LIMIT)?
            .ok_or_else(|| missing(&sums_url))?;
        let (_, sig) = self
            .http
            .get_bytes(&sig_url, SMALL_LIMIT)?
            .ok_or_else(|| missing(&sig_url))?;
        let signer = verify_signature(&meta.signing_keys.gpg_public_keys, &sums, &sig)
            .map_err(|e| refuse(Check::Signature, e.to_string()))?;

        // 3. SHA256SUMS lists the file with the declared hash.
        let text = String::from_utf8_lossy(&sums);
        let mut listed = None;
        for line in text.lines() {
            let mut parts = line.split_whitespace();
            let (Some(hex), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            let Ok(h) = Hash::zh_from_hex(hex) else {
                continue;
            };
            if name.trim_start_matches('*') == meta.filename {
                listed = Some(h.clone());
            }
            vouched.push(h);
        }
        match listed {
            None => {
                return Err(refuse(
                    Check::Checksums,
                    format!("{} does not list {}", sums_url, meta.filename),
                ))
            }
            Some(h) if h != shasum => {
                return Err(refuse(
                    Check::Checksums,
                    format!(
                        "SHA256SUMS lists {h} for {}, the registry declares {shasum}",
                        meta.filename
                    ),
                ))
            }
            Some(_) => {}
        }

        // 4. The zip itself.
        let zip_url = resolve(&meta.download_url)?;
        let dest = scratch.join(package::unique_name(&format!("dl-{}", meta.filename)));
        let guard = TempPath(dest.clone());
        let limit = declared_size.unwrap_or(package::ARCHIVE_LIMIT);
        let (size, sha) = self
            .http
            .download(&zip_url, &dest, limit)?
            .ok_or_else(|| missing(&zip_url))?;
        if let Some(want) = declared_size {
            if size != want {
                let got = if size > want {
                    format!("more than {want}")
                } else {
                    size.to_string()
                };
                return Err(refuse(
                    Check::PackageSize,
                    format!("the registry declares {want} bytes, the download has {got} bytes"),
                ));
            }
        } else if size > limit {
            return Err(refuse(
                Check::PackageSize,
                format!("the download is larger than {limit} bytes"),
            ));
        }
        let got = Hash::zh_from_hex(&hex::encode(sha)).expect("64 hex digits");
        if got != shasum {
            return Err(refuse(
                Check::Sha256,
                format!("the registry declares {shasum}, the download is {got}"),
            ));
        }
        vouched.sort();
        vouched.dedup();
        let measured = package::measure_zip(&dest, Some(got))
            .map_err(|e| refuse(Check::Contents, e.to_string()))?;
        Ok(Package {
            location: Location::Zip(dest),
            origin,
            trust: Trust::Signed(signer),
            vouched,
            warnings,
            measured: Some(measured),
            _download: Some(guard),
        })
    }
}

/// Verifies the detached signature `sig` (binary or ASCII-armored) over `data` with the
/// primary keys and validly bound subkeys of `keys`; returns the fingerprint of the key that
/// made it.
fn verify_signature(keys: &[GpgKey], data: &[u8], sig: &[u8]) -> Result<String, SignatureError> {
    if keys.is_empty() {
        return Err(SignatureError::NoKeys);
    }
    let signature = if sig.trim_ascii_start().starts_with(b"-----BEGIN") {
        let text = std::str::from_utf8(sig).map_err(|_| SignatureError::NotText)?;
        DetachedSignature::from_string(text).map(|(s, _)| s)
    } else {
        DetachedSignature::from_bytes(sig)
    }
    .map_err(SignatureError::Unparsable)?;
    let mut tried = Vec::new();
    for k in keys {
        let parsed: Vec<SignedPublicKey> = match SignedPublicKey::from_string_many(&k.ascii_armor) {
            Ok((iter, _)) => iter.filter_map(Result::ok).collect(),
            Err(e) => {
                tried.push(format!("{} (unreadable: {e})", k.key_id));
                continue;
            }
        };
        for key in parsed {
            let fpr = format!("{:X}", key.fingerprint());
            tried.push(fpr.clone());
            if signature.verify(&key, data).is_ok() {
                return Ok(fpr);
            }
            for sub in &key.public_subkeys {
                // Only subkeys bound for signing count, as in GnuPG.
                let may_sign = sub.signatures.iter().any(|s| s.key_flags().sign());
                if may_sign
                    && sub.verify_bindings(&key.primary_key).is_ok()
                    && signature.verify(sub, data).is_ok()
                {
                    return Ok(format!("{:X}", sub.key.fingerprint()));
                }
            }
        }
    }
    Err(SignatureError::NoKeyVerifies { tried })
}

/// Why the signature over a registry's SHA256SUMS does not authenticate it.
#[derive(Debug)]
enum SignatureError {
    /// The registry lists no signing keys.
    NoKeys,
    /// An ASCII-armored signature is not UTF-8.
    NotText,
    /// The signature is not an OpenPGP detached signature.
    Unparsable(pgp::errors::Error),
    /// No listed key made the signature: the fingerprints tried, or a key id and why it could
    /// not be read.
    NoKeyVerifies { tried: Vec<String> },
}

impl std::fmt::Display for SignatureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SignatureError::NoKeys => f.write_str(
                "the registry supplied no signing keys, so the checksums cannot be authenticated",
            ),
            SignatureError::NotText => f.write_str("the signature is not valid text"),
            SignatureError::Unparsable(e) => write!(f, "the signature cannot be parsed: {e}"),
            SignatureError::NoKeyVerifies { tried } => write!(
                f,
                "the signature does not verify with any of the registry's keys ({})",
                tried.join(", ")
            ),
        }
    }
}
