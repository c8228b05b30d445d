//! The one error type of provider installation.
//!
//! Owns [`InstallError`]: each variant carries the facts (provider address, version, platform,
//! where the package came from, which check failed) as fields, and its `Display` says what to do
//! about it. Does not print anything or decide exit codes: that is the CLI's job.

use std::fmt;
use std::path::PathBuf;

/// Which verification step refused a package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Check {
    /// The downloaded zip's byte size differs from the registry's declared `package_size`.
    PackageSize,
    /// The downloaded zip's sha256 differs from the registry's declared `shasum`.
    Sha256,
    /// The zip's file name and sha256 are not listed in the registry's SHA256SUMS document.
    Checksums,
    /// The OpenPGP signature over SHA256SUMS does not verify with the registry's signing keys.
    Signature,
    /// The registry's download metadata is inconsistent (platform echo, `packages` block,
    /// protocol versions).
    Metadata,
    /// The package matches none of the hashes a network mirror lists for it.
    MirrorHashes,
    /// The package comes from a source that vouches for nothing and no lock entry covers it.
    Unverified,
    /// The unpacked package is malformed (bad zip, unsafe paths, no provider executable).
    Contents,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Check::PackageSize => "package size",
            Check::Sha256 => "sha256 of the package",
            Check::Checksums => "SHA256SUMS listing",
            Check::Signature => "OpenPGP signature of SHA256SUMS",
            Check::Metadata => "registry download metadata",
            Check::MirrorHashes => "network mirror hashes",
            Check::Unverified => "package authentication",
            Check::Contents => "package contents",
        })
    }
}

/// A package: provider address, version, platform, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageRef {
    /// Provider address.
    pub(crate) address: String,
    /// Version.
    pub(crate) version: String,
    /// Target platform.
    pub(crate) platform: String,
    /// Where the package came from (or was looked for).
    pub(crate) origin: String,
}

impl fmt::Display for PackageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} ({}) from {}",
            self.address, self.version, self.platform, self.origin
        )
    }
}

/// Everything that can go wrong while resolving, verifying, installing, locking or mirroring a
/// provider. Nothing is installed (and the lock file is not written) when an install returns
/// one of these.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum InstallError {
    /// The provider source string is not `[HOST/]NAMESPACE/TYPE`.
    InvalidAddress {
        /// The string as given.
        source: String,
        /// Why it does not parse.
        reason: String,
    },
    /// A version constraint or platform string does not parse.
    InvalidArgument {
        /// What was given.
        value: String,
        /// Why it does not parse.
        reason: String,
    },
    /// `offline` is set and no filesystem mirror nor the cache holds a matching package.
    NotFoundOffline {
        /// Provider address.
        address: String,
        /// The version constraint, or the locked version, that was looked for.
        wanted: String,
        /// Target platform.
        platform: String,
        /// The local places that were searched.
        searched: Vec<String>,
    },
    /// No source offers a version that satisfies the constraint (or the locked version).
    NoMatchingVersion {
        /// Provider address.
        address: String,
        /// The version constraint, or the locked version, that was looked for.
        wanted: String,
        /// Target platform.
        platform: String,
        /// For each source searched, what it offered.
        searched: Vec<String>,
    },
    /// The lock file selects a version that the configured constraint no longer allows.
    LockedVersionRejected {
        /// Provider address.
        address: String,
        /// Version in the lock file.
        locked: String,
        /// Configured constraint.
        constraint: String,
        /// The lock file.
        lock_file: PathBuf,
    },
    /// The selected version exists but not for this platform at this source.
    PlatformUnavailable {
        /// The package looked for, and where.
        package: Box<PackageRef>,
    },
    /// A verification step refused the package.
    Verification {
        /// The package refused.
        package: Box<PackageRef>,
        /// Which check failed.
        check: Check,
        /// The facts of the failure (expected and actual values).
        detail: String,
    },
    /// The package's hashes match none of the hashes the lock file records for this version.
    LockMismatch {
        /// The package refused.
        package: Box<PackageRef>,
        /// The hashes in the lock file.
        locked: Vec<String>,
        /// The hashes of the package that was offered.
        got: Vec<String>,
        /// The lock file.
        lock_file: PathBuf,
    },
    /// A network request failed (connection, TLS, proxy, timeout) or was not allowed.
    Network {
        /// The URL.
        url: String,
        /// What went wrong.
        detail: String,
    },
    /// A server answered with an unexpected status or an unreadable document.
    BadResponse {
        /// The URL.
        url: String,
        /// What was wrong with the answer.
        detail: String,
    },
    /// The lock file cannot be parsed.
    LockFile {
        /// The lock file.
        path: PathBuf,
        /// 1-based line of the problem, 0 if not about one line.
        line: usize,
        /// What is wrong.
        detail: String,
    },
    /// A filesystem operation failed.
    Io {
        /// The path involved.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        detail: String,
    },
}

/// The package a check is about: provider, version, platform. Builds the errors that name them.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    pub(crate) addr: super::address::ProviderAddr,
    pub(crate) version: super::address::Version,
    pub(crate) platform: super::address::Platform,
}

impl Subject {
    pub(crate) fn package(&self, origin: &impl fmt::Display) -> Box<PackageRef> {
        Box::new(PackageRef {
            address: self.addr.to_string(),
            version: self.version.to_string(),
            platform: self.platform.to_string(),
            origin: origin.to_string(),
        })
    }

    pub(crate) fn refuse(
        &self,
        origin: &impl fmt::Display,
        check: Check,
        detail: impl fmt::Display,
    ) -> InstallError {
        InstallError::Verification {
            package: self.package(origin),
            check,
            detail: detail.to_string(),
        }
    }

    pub(crate) fn unavailable(&self, origin: &impl fmt::Display) -> InstallError {
        InstallError::PlatformUnavailable {
            package: self.package(origin),
        }
    }
}

impl InstallError {
    pub(crate) fn io(path: impl Into<PathBuf>, op: &'static str, e: impl fmt::Display) -> Self {
        InstallError::Io {
            path: path.into(),
            op,
            detail: e.to_string(),
        }
    }

    /// The check that refused a package, if this is a verification failure.
    pub fn failed_check(&self) -> Option<Check> {
        match self {
            InstallError::Verification { check, .. } => Some(*check),
            _ => None,
        }
    }
}

fn list(items: &[String]) -> String {
    items
        .iter()
        .map(|s| format!("\n  - {s}"))
        .collect::<String>()
}

impl fmt::Display for InstallError {
    // Long because it is one message per error variant, a table kept in one place.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallError::InvalidAddress { source, reason } => write!(
                f,
                "invalid provider source {source:?}: {reason}; a registry address is \
                 [HOSTNAME/]NAMESPACE/TYPE, e.g. hashicorp/null"
            ),
            InstallError::InvalidArgument { value, reason } => {
                write!(f, "invalid value {value:?}: {reason}")
            }
            InstallError::NotFoundOffline {
                address,
                wanted,
                platform,
                searched,
            } => write!(
                f,
                "provider {address} ({wanted}) for {platform} was not found locally, and offline \
                 mode does not use the network. Searched:{}\nPut the package in a filesystem \
                 mirror (`nivis providers mirror DIR` on a connected machine writes one), or run \
                 without offline mode.",
                list(searched)
            ),
            InstallError::NoMatchingVersion {
                address,
                wanted,
                platform,
                searched,
            } => write!(
                f,
                "no source offers provider {address} ({wanted}) for {platform}. Searched:{}\n\
                 Check the version constraint, the lock file and the configured mirrors.",
                list(searched)
            ),
            InstallError::LockedVersionRejected {
                address,
                locked,
                constraint,
                lock_file,
            } => write!(
                f,
                "the lock file {} selects {address} {locked}, which the configured constraint \
                 {constraint:?} does not allow. Update the lock file (`nivis providers lock \
                 --upgrade`) or change the constraint.",
                lock_file.display()
            ),
            InstallError::PlatformUnavailable { package: p } => write!(
                f,
                "provider {} {} is not available for {} from {}",
                p.address, p.version, p.platform, p.origin
            ),
            InstallError::Verification {
                package,
                check,
                detail,
            } => write!(
                f,
                "refusing provider {package}: the {check} \
                 check failed: {detail}. Nothing was installed. {}",
                match check {
                    Check::Signature =>
                        "The checksums were not signed by the provider's published key: the \
                         registry or something between it and you may have been tampered with.",
                    Check::Unverified =>
                        "Record the provider's hashes first (`nivis providers lock` on a trusted \
                         machine), or use a mirror that lists hashes.",
                    Check::Contents => "The package is damaged or not a provider package.",
                    _ => "The download was corrupted or tampered with; try again, and report it \
                          to the registry or mirror operator if it persists.",
                }
            ),
            InstallError::LockMismatch {
                package,
                locked,
                got,
                lock_file,
            } => write!(
                f,
                "refusing provider {package}: it matches \
                 none of the hashes recorded in {}.\n  locked:{}\n  package:{}\nNothing was \
                 installed. If the provider was legitimately re-released, or you are adding a \
                 platform to an entry without zh: hashes, re-record the entry from a source you \
                 trust (`nivis providers lock --upgrade`); otherwise the package was tampered with.",
                lock_file.display(),
                locked.iter().map(|h| format!("\n    {h}")).collect::<String>(),
                got.iter().map(|h| format!("\n    {h}")).collect::<String>()
            ),
            InstallError::Network { url, detail } => write!(
                f,
                "cannot reach {url}: {detail}. Check the network and proxy settings \
                 (HTTPS_PROXY, NO_PROXY), or use a filesystem mirror with offline mode."
            ),
            InstallError::BadResponse { url, detail } => {
                write!(f, "unexpected answer from {url}: {detail}")
            }
            InstallError::LockFile { path, line, detail } => {
                if *line > 0 {
                    write!(f, "{}:{line}: {detail}", path.display())
                } else {
                    write!(f, "{}: {detail}", path.display())
                }
            }
            InstallError::Io { path, op, detail } => {
                write!(f, "cannot {op} {}: {detail}", path.display())
            }
        }
    }
}

impl std::error::Error for InstallError {}

#[cfg(test)]
mod tests {
    #[test]
    fn error_stays_small() {
        assert!(std::mem::size_of::<super::InstallError>() <= 128);
    }
}
