//! A provider package on local disk, and what can be said about it.
//!
//! Owns [`Package`] (a zip or an unpacked directory, with the source's word on it: which
//! hashes it vouches for and how), the cheap checks a zip passes before any entry is
//! decompressed ([`check_shape`]), measuring a package's `h1:`/`zh:` hashes, safe unzipping,
//! finding the provider executable in an unpacked package, and temporary files and
//! directories that clean up after themselves. Does not fetch anything and does not decide
//! where packages are kept.

use std::fmt;
use std::fs;
use std::io::{self, Read};

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::hash::{self, Hash};
use super::Origin;

/// Why a package zip is refused or cannot be measured or unpacked.
#[derive(Debug)]
pub(crate) enum PackageError {
    /// A file or directory cannot be read or written.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The zip is larger than any provider package.
    ArchiveTooLarge {
        /// Its size in bytes.
        bytes: u64,
    },
    /// The file is not a zip archive.
    NotZip {
        /// What the zip reader said.
        source: zip::result::ZipError,
    },
    /// The zip has more entries than any provider package.
    TooManyEntries {
        /// How many it has.
        count: usize,
    },
    /// An entry's header cannot be read.
    Entry {
        /// The entry's index in the archive.
        index: usize,
        /// What the zip reader said.
        source: zip::result::ZipError,
    },
    /// Two entries share compressed data.
    Overlap {
        /// The index of the first entry.
        first: usize,
        /// The index of the second entry.
        second: usize,
    },
    /// The entries declare more unpacked bytes than the archive's size makes plausible.
    Expands {
        /// The declared unpacked total.
        declared: u64,
        /// The limit for this archive.
        limit: u64,
        /// The archive's size in bytes.
        archive_len: u64,
    },
    /// An entry is encrypted, a symlink, or has an absolute or escaping path.
    UnsafeEntry {
        /// The entry's name as stored.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// An entry's data cannot be decompressed.
    EntryData {
        /// The entry's name as stored.
        name: String,
        /// What the reader said.
        source: io::Error,
    },
    /// The zip unpacks to more than [`UNZIP_LIMIT`] bytes.
    Unpacks,
    /// The package's hash cannot be computed.
    Hash(hash::HashError),
}

impl fmt::Display for PackageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PackageError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            PackageError::ArchiveTooLarge { bytes } => write!(
                f,
                "the archive has {bytes} bytes, more than the {ARCHIVE_LIMIT} accepted"
            ),
            PackageError::NotZip { source } => write!(f, "not a valid zip: {source}"),
            PackageError::TooManyEntries { count } => write!(
                f,
                "the archive has {count} entries; a provider package has a few (at most \
                 {MAX_ENTRIES} are accepted)"
            ),
            PackageError::Entry { index, source } => write!(f, "entry {index}: {source}"),
            PackageError::Overlap { first, second } => write!(
                f,
                "entries {first} and {second} overlap: they share compressed data (a zip bomb)"
            ),
            PackageError::Expands {
                declared,
                limit,
                archive_len,
            } => write!(
                f,
                "its entries declare {declared} bytes unpacked, more than the {limit} a \
                 {archive_len}-byte archive may expand to (a decompression bomb?)"
            ),
            PackageError::UnsafeEntry { name, why } => write!(f, "entry {name:?} {why}"),
            PackageError::EntryData { name, source } => write!(f, "entry {name:?}: {source}"),
            PackageError::Unpacks => write!(f, "unpacks to more than {UNZIP_LIMIT} bytes"),
            PackageError::Hash(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for PackageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PackageError::Io { source, .. } | PackageError::EntryData { source, .. } => {
                Some(source)
            }
            PackageError::NotZip { source } | PackageError::Entry { source, .. } => Some(source),
            PackageError::Hash(e) => Some(e),
            _ => None,
        }
    }
}

impl From<hash::HashError> for PackageError {
    fn from(e: hash::HashError) -> Self {
        PackageError::Hash(e)
    }
}

/// A closure turning an io::Error about `path` into a [`PackageError`].
fn io_at(path: &Path) -> impl Fn(io::Error) -> PackageError + '_ {
    move |source| PackageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where a package is.
#[derive(Debug, Clone)]
pub(crate) enum Location {
    /// A release zip.
    Zip(PathBuf),
    /// An unpacked package directory.
    Dir(PathBuf),
}

/// How the source vouches for the package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Trust {
    /// The zip's sha256 is in a SHA256SUMS signed by the registry's key (fingerprint).
    Signed(String),
    /// The package matched a hash the (network) source listed for it.
    Listed,
    /// A local filesystem mirror: trusted as the operator placed it.
    Local,
    /// Nothing: acceptable only if a lock entry verifies it.
    Unverified,
}

/// A package obtained from a source, not yet installed.
pub(crate) struct Package {
    pub(crate) location: Location,
    pub(crate) origin: Origin,
    pub(crate) trust: Trust,
    /// Hashes the source vouches for (this and other platforms of the same version): every
    /// sha256 in a signed SHA256SUMS, a registry's reported hashes, a mirror's listed hashes.
    pub(crate) vouched: Vec<Hash>,
    pub(crate) warnings: Vec<String>,
    /// The package's hashes, if the source already computed them.
    pub(crate) measured: Option<Measured>,
    /// Keeps a downloaded zip until the package is installed.
    pub(crate) _download: Option<TempPath>,
}

/// The hashes of a package.
#[derive(Debug, Clone)]
pub(crate) struct Measured {
    /// `h1:` of the unpacked package (what lock files record).
    pub(crate) h1: Hash,
    /// `zh:` of the zip, if it is one.
    pub(crate) zh: Option<Hash>,
    /// `h1:` counting a zip's directory entries, if it has any (then it differs from `h1`).
    pub(crate) h1_with_dirs: Option<Hash>,
}

impl Measured {
    /// Every hash computed, for matching and for messages.
    pub(crate) fn all(&self) -> Vec<Hash> {
        let mut v = vec![self.h1.clone()];
        v.extend(self.h1_with_dirs.clone());
        v.extend(self.zh.clone());
        v
    }

    /// The hashes to record in a lock file.
    pub(crate) fn recordable(&self) -> Vec<Hash> {
        let mut v = vec![self.h1.clone()];
        v.extend(self.zh.clone());
        v
    }
}

/// Largest zip accepted from any source (a registry may declare less).
pub(crate) const ARCHIVE_LIMIT: u64 = 4 * 1024 * 1024 * 1024;

/// Most entries a package may have: provider releases hold a binary and a few text files.
const MAX_ENTRIES: usize = 1024;

/// How much larger than its zip a package may unpack to, and the floor of that limit. Provider
/// binaries compress three to five times; a zip declaring far more is a decompression bomb.
const MAX_EXPANSION: u64 = 40;
const MIN_EXPANDED_LIMIT: u64 = 256 * 1024 * 1024;

/// Checks a zip from its size and central directory alone, before anything is decompressed:
/// its size, its number of entries, the unpacked size its entries declare (against what its
/// size makes plausible), and that no two entries share data (the overlapping-entry bomb: many
/// names for one highly compressed stream). Decompression later stops at each entry's declared
/// size (the zip reader enforces it), so the declared total bounds the work.
pub(crate) fn check_shape(zip_path: &Path) -> Result<(), PackageError> {
    let file = fs::File::open(zip_path).map_err(io_at(zip_path))?;
    let archive_len = file.metadata().map_err(io_at(zip_path))?.len();
    if archive_len > ARCHIVE_LIMIT {
        return Err(PackageError::ArchiveTooLarge { bytes: archive_len });
    }
    let mut zip = zip::ZipArchive::new(io::BufReader::new(file))
        .map_err(|source| PackageError::NotZip { source })?;
    if zip.len() > MAX_ENTRIES {
        return Err(PackageError::TooManyEntries { count: zip.len() });
    }
    let limit = archive_len
        .saturating_mul(MAX_EXPANSION)
        .clamp(MIN_EXPANDED_LIMIT, UNZIP_LIMIT);
    let mut declared = 0u64;
    let mut spans = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let entry = zip
            .by_index_raw(i)
            .map_err(|source| PackageError::Entry { index: i, source })?;
        declared = declared.saturating_add(entry.size());
        let start = entry.header_start();
        let data_start = entry.data_start().unwrap_or(start);
        let end = data_start.saturating_add(entry.compressed_size());
        spans.push((start, end, i));
    }
    spans.sort();
    for pair in spans.windows(2) {
        let ((_, end, a), (start, _, b)) = (pair[0], pair[1]);
        if start < end {
            return Err(PackageError::Overlap {
                first: a,
                second: b,
            });
        }
    }
    if declared > limit {
        return Err(PackageError::Expands {
            declared,
            limit,
            archive_len,
        });
    }
    Ok(())
}

/// The hashes of a zip: `zh:` (given, when the source already computed it), then the shape
/// checks, then `h1:` (which decompresses every entry).
pub(crate) fn measure_zip(p: &Path, zh: Option<Hash>) -> Result<Measured, PackageError> {
    let zh = match zh {
        Some(zh) => zh,
        None => hash::zh_of_file(p).map_err(io_at(p))?,
    };
    check_shape(p)?;
    let (h1, all) = hash::zip_h1s(p)?;
    Ok(Measured {
        h1_with_dirs: (all != h1).then_some(all),
        h1,
        zh: Some(zh),
    })
}

/// Computes the hashes of a package.
pub(crate) fn measure(location: &Location) -> Result<Measured, PackageError> {
    match location {
        Location::Zip(p) => measure_zip(p, None),
        Location::Dir(d) => Ok(Measured {
            h1: hash::h1_of_dir(d).map_err(io_at(d))?,
            zh: None,
            h1_with_dirs: None,
        }),
    }
}

/// Whether `name` is a provider executable name for `type_`: `terraform-provider-TYPE`,
/// optionally followed by `_…` or `.…`.
pub(crate) fn is_executable_name(name: &str, type_: &str) -> bool {
    let base = format!("terraform-provider-{type_}");
    name.strip_prefix(&base)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['_', '.']))
}

/// The provider executable in an unpacked package: the first regular file, in lexical order,
/// with an executable name.
pub(crate) fn find_executable(dir: &Path, type_: &str) -> Option<PathBuf> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| is_executable_name(n, type_))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| dir.join(n))
        .find(|p| fs::metadata(p).is_ok_and(|m| m.is_file()))
}

/// Largest total size unpacked from one zip.
const UNZIP_LIMIT: u64 = 8 * 1024 * 1024 * 1024;

/// Unpacks `zip` into the existing empty directory `dest`, refusing absolute or escaping
/// paths, symlinks and encrypted entries (and anything [`check_shape`] refuses). Files keep their unix permission bits; the provider
/// executable is made executable even if the zip records no modes. Returns the `h1:` of what
/// was written, hashed as it was written (equal to [`hash::h1_of_dir`] of `dest`).
pub(crate) fn unzip(zip_path: &Path, dest: &Path, type_: &str) -> Result<Hash, PackageError> {
    check_shape(zip_path)?;
    let file = fs::File::open(zip_path).map_err(io_at(zip_path))?;
    let mut zip = zip::ZipArchive::new(io::BufReader::new(file))
        .map_err(|source| PackageError::NotZip { source })?;
    let mut total = 0u64;
    let mut written = Vec::new();
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|source| PackageError::Entry { index: i, source })?;
        let raw = String::from_utf8_lossy(entry.name_raw()).into_owned();
        let unsafe_entry = |why| PackageError::UnsafeEntry {
            name: raw.clone(),
            why,
        };
        if entry.encrypted() {
            return Err(unsafe_entry("is encrypted"));
        }
        if entry.is_symlink() {
            return Err(unsafe_entry("is a symlink"));
        }
        let rel = match entry.enclosed_name() {
            Some(p) if !raw.contains('\\') && !raw.split('/').any(|s| s == "..") => p,
            _ => return Err(unsafe_entry("has an unsafe path")),
        };
        let out = dest.join(&rel);
        if entry.is_dir() {
            fs::create_dir_all(&out).map_err(io_at(&out))?;
            continue;
        }
        if let Some(parent) = out.parent() {
            fs::create_dir_all(parent).map_err(io_at(parent))?;
        }
        let f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&out)
            .map_err(io_at(&out))?;
        let mut w = HashingWriter(f, Sha256::new());
        let n = io::copy(&mut (&mut entry).take(UNZIP_LIMIT - total + 1), &mut w).map_err(
            |source| PackageError::EntryData {
                name: raw.clone(),
                source,
            },
        )?;
        let HashingWriter(f, sha) = w;
        let name: Vec<String> = rel
            .components()
            .filter_map(|c| match c {
                std::path::Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        written.push((name.join("/").into_bytes(), sha.finalize().into()));
        total += n;
        if total > UNZIP_LIMIT {
            return Err(PackageError::Unpacks);
        }
        f.sync_all().map_err(io_at(&out))?;
        let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let mut mode = entry.unix_mode().map_or(0o644, |m| m & 0o777);
        if is_executable_name(name, type_) {
            mode |= 0o755;
        }
        set_mode(&out, mode | 0o600)?;
    }
    Ok(hash::h1_of_entries(written)?)
}

/// Writes through to a file while hashing what is written.
struct HashingWriter(fs::File, Sha256);

impl io::Write for HashingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.0.write(buf)?;
        self.1.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(unix)]
fn set_mode(p: &Path, mode: u32) -> Result<(), PackageError> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).map_err(io_at(p))
}

#[cfg(not(unix))]
fn set_mode(_: &Path, _: u32) -> Result<(), PackageError> {
    Ok(())
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A name unique to this process and call: `PREFIX.PID.N`.
pub(crate) fn unique_name(prefix: &str) -> String {
    format!(
        "{prefix}.{}.{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A file path removed on drop.
pub(crate) struct TempPath(pub(crate) PathBuf);

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// A directory removed (recursively) on drop unless [`TempDir::keep`] was called.
pub(crate) struct TempDir(Option<PathBuf>);

impl TempDir {
    /// Creates a fresh directory `parent/NAME.PID.N`.
    pub(crate) fn new_in(parent: &Path, prefix: &str) -> io::Result<TempDir> {
        fs::create_dir_all(parent)?;
        let p = parent.join(unique_name(prefix));
        fs::create_dir(&p)?;
        Ok(TempDir(Some(p)))
    }

    pub(crate) fn path(&self) -> &Path {
        self.0.as_deref().expect("temp dir kept")
    }

    /// Stops the removal on drop (after the directory was renamed away).
    pub(crate) fn keep(mut self) -> PathBuf {
        self.0.take().expect("temp dir kept")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = fs::remove_dir_all(p);
        }
    }
}
