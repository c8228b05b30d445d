//! Package hashes: the scheme-tagged strings of the lock file and how `h1:` and `zh:` are
//! computed.
//!
//! Owns [`Hash`] and the two schemes OpenTofu prefers:
//! * `zh:` is the lowercase hex sha256 of the `.zip` bytes (only checkable against a zip);
//! * `h1:` is Go's `dirhash` Hash1: for each file, sorted bytewise by its `/`-separated name,
//!   the line `hex(sha256(content)) + "  " + name + "\n"`; then `h1:` + standard padded base64
//!   of the sha256 of those lines. From a zip, [`h1_of_zip`] counts every entry as stored
//!   (directory entries as empty files, as `dirhash.HashZip` does); [`h1_of_zip_package`]
//!   counts only file entries, which is the hash of the unpacked directory ([`h1_of_dir`]) and
//!   what a lock file records. The two agree for every zip without directory entries, which is
//!   every provider release zip.
//!
//! Does not decide which hashes are acceptable for a package: that is the lock file's and the
//! sources' business.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io;
use std::path::Path;

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// Why a hash string does not parse or a zip's hash cannot be computed.
#[derive(Debug)]
pub enum HashError {
    /// The string is not `SCHEME:VALUE`.
    BadHash {
        /// The string as given.
        input: String,
    },
    /// The string is not 64 hex digits.
    BadSha256 {
        /// The string as given.
        input: String,
    },
    /// The zip cannot be opened or one of its entries cannot be read.
    Read {
        /// The zip file.
        path: std::path::PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The file is not a zip archive, or an entry of it is damaged.
    Zip {
        /// The zip file.
        path: std::path::PathBuf,
        /// Whether the archive as a whole is unreadable (rather than one entry).
        whole: bool,
        /// What the zip reader said.
        source: zip::result::ZipError,
    },
    /// A file name contains a newline, which the `h1:` scheme cannot list.
    NewlineInName {
        /// The name, lossily decoded.
        name: String,
    },
}

impl fmt::Display for HashError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HashError::BadHash { input } => write!(
                f,
                "invalid hash {input:?}: expected SCHEME:VALUE, e.g. h1:… or zh:…"
            ),
            HashError::BadSha256 { input } => {
                write!(f, "invalid sha256 {input:?}: expected 64 hex digits")
            }
            HashError::Read { path, source } => write!(f, "{}: {source}", path.display()),
            HashError::Zip {
                path,
                whole: true,
                source,
            } => write!(f, "{} is not a valid zip: {source}", path.display()),
            HashError::Zip { path, source, .. } => write!(f, "{}: {source}", path.display()),
            HashError::NewlineInName { name } => write!(
                f,
                "file name {name:?} contains a newline, which h1: does not support"
            ),
        }
    }
}

impl std::error::Error for HashError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HashError::Read { source, .. } => Some(source),
            HashError::Zip { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// A scheme-tagged package hash, `SCHEME:VALUE` (`h1:…`, `zh:…`; other schemes are kept but
/// never used to verify).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hash(String);

impl Hash {
    /// Parses `SCHEME:VALUE`, refusing strings without a scheme.
    pub(crate) fn parse(s: &str) -> Result<Hash, HashError> {
        match s.split_once(':') {
            Some((scheme, value))
                if !scheme.is_empty()
                    && !value.is_empty()
                    && scheme.chars().all(|c| c.is_ascii_alphanumeric())
                    && !s.chars().any(char::is_whitespace) =>
            {
                Ok(Hash(s.to_string()))
            }
            _ => Err(HashError::BadHash { input: s.into() }),
        }
    }

    /// `zh:` for a hex sha256 (as listed in SHA256SUMS or a registry's `shasum`); the hex is
    /// lowercased and must be 64 hex digits.
    pub(crate) fn zh_from_hex(hex: &str) -> Result<Hash, HashError> {
        if hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
            Ok(Hash(format!("zh:{}", hex.to_ascii_lowercase())))
        } else {
            Err(HashError::BadSha256 { input: hex.into() })
        }
    }

    /// The scheme, without the colon.
    pub(crate) fn scheme(&self) -> &str {
        self.0.split_once(':').map_or("", |(s, _)| s)
    }

    /// Whether the scheme is one used for verification (`h1` or `zh`).
    pub(crate) fn is_preferred(&self) -> bool {
        matches!(self.scheme(), "h1" | "zh")
    }

    /// The whole string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `zh:` of some bytes.
#[cfg(test)] // used by the unit tests only
pub(crate) fn zh_of_bytes(bytes: &[u8]) -> Hash {
    Hash(format!("zh:{}", hex::encode(Sha256::digest(bytes))))
}

/// `zh:` of a zip file's bytes.
pub(crate) fn zh_of_file(path: &Path) -> io::Result<Hash> {
    let (digest, _) = sha256_file(path)?;
    Ok(Hash(format!("zh:{}", hex::encode(digest))))
}

/// sha256 and length of a file's bytes.
pub(crate) fn sha256_file(path: &Path) -> io::Result<([u8; 32], u64)> {
    let mut f = File::open(path)?;
    let mut h = Sha256::new();
    let n = io::copy(&mut f, &mut h)?;
    Ok((h.finalize().into(), n))
}

/// `h1:` of an unpacked package directory: every non-directory below `dir`, by its path
/// relative to `dir`. Symlinks are hashed by their target's content.
pub fn h1_of_dir(dir: &Path) -> io::Result<Hash> {
    let mut files = Vec::new();
    walk(dir, &[], &mut files)?;
    h1_of_entries(files).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

fn walk(dir: &Path, prefix: &[u8], out: &mut Vec<(Vec<u8>, [u8; 32])>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let mut name = prefix.to_vec();
        if !name.is_empty() {
            name.push(b'/');
        }
        name.extend_from_slice(os_bytes(&entry.file_name()));
        let ft = entry.file_type()?;
        if ft.is_dir() {
            walk(&path, &name, out)?;
        } else {
            if ft.is_symlink() && std::fs::metadata(&path)?.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is a symlink to a directory", path.display()),
                ));
            }
            let (digest, _) = sha256_file(&path)?;
            out.push((name, digest));
        }
    }
    Ok(())
}

#[cfg(unix)]
fn os_bytes(s: &std::ffi::OsStr) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    s.as_bytes()
}

#[cfg(not(unix))]
fn os_bytes(s: &std::ffi::OsStr) -> &[u8] {
    s.to_str().unwrap_or("\u{fffd}").as_bytes()
}

/// `h1:` of a zip as `dirhash.HashZip` computes it: every entry, by its name exactly as stored;
/// directory entries count as empty files.
#[cfg(test)] // used by the unit tests only
pub(crate) fn h1_of_zip(path: &Path) -> Result<Hash, HashError> {
    zip_h1s(path).map(|(_, all)| all)
}

/// `h1:` of the package a zip unpacks to: file entries only. Equal to [`h1_of_dir`] of the
/// unpacked directory.
pub fn h1_of_zip_package(path: &Path) -> Result<Hash, HashError> {
    zip_h1s(path).map(|(package, _)| package)
}

/// Both `h1:` forms of a zip in one pass: (file entries only, every entry).
pub(crate) fn zip_h1s(path: &Path) -> Result<(Hash, Hash), HashError> {
    let read = |source| HashError::Read {
        path: path.to_path_buf(),
        source,
    };
    let zip_error = |whole| {
        move |source| HashError::Zip {
            path: path.to_path_buf(),
            whole,
            source,
        }
    };
    let file = File::open(path).map_err(read)?;
    let mut zip = zip::ZipArchive::new(io::BufReader::new(file)).map_err(zip_error(true))?;
    // dirhash.HashZip lists every entry but opens the last entry of each name.
    let mut last: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    let mut names = Vec::new();
    for i in 0..zip.len() {
        let f = zip.by_index_raw(i).map_err(zip_error(false))?;
        let name = f.name_raw().to_vec();
        last.insert(name.clone(), i);
        names.push((name, f.is_dir()));
    }
    let mut digests: BTreeMap<usize, [u8; 32]> = BTreeMap::new();
    let (mut all, mut files) = (
        Vec::with_capacity(names.len()),
        Vec::with_capacity(names.len()),
    );
    for (name, is_dir) in names {
        let i = last[&name];
        if let std::collections::btree_map::Entry::Vacant(slot) = digests.entry(i) {
            let mut f = zip.by_index(i).map_err(zip_error(false))?;
            let mut h = Sha256::new();
            io::copy(&mut f, &mut h).map_err(read)?;
            slot.insert(h.finalize().into());
        }
        if !is_dir {
            files.push((name.clone(), digests[&i]));
        }
        all.push((name, digests[&i]));
    }
    Ok((h1_of_entries(files)?, h1_of_entries(all)?))
}

/// `h1:` from (name, sha256 of content) pairs; names are sorted bytewise here.
pub(crate) fn h1_of_entries(mut files: Vec<(Vec<u8>, [u8; 32])>) -> Result<Hash, HashError> {
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut summary = Sha256::new();
    for (name, digest) in &files {
        if name.contains(&b'\n') {
            return Err(HashError::NewlineInName {
                name: String::from_utf8_lossy(name).into_owned(),
            });
        }
        summary.update(hex::encode(digest).as_bytes());
        summary.update(b"  ");
        summary.update(name);
        summary.update(b"\n");
    }
    Ok(Hash(format!(
        "h1:{}",
        base64::engine::general_purpose::STANDARD.encode(summary.finalize())
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    const H1_EMPTY: &str = "h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";
    const H1_HELLO: &str = "h1:ACenfE/xHd2y4YemST5ZES8kUXdM28vrpXDNMENE90w=";

    /// A zip of `(name, content, mode)` entries; a name ending in `/` is a directory entry.
    fn make_zip(entries: &[(&str, &[u8], u32)]) -> Vec<u8> {
        use std::io::Write;
        let mut w = zip::ZipWriter::new(io::Cursor::new(Vec::new()));
        for (name, content, mode) in entries {
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated)
                .unix_permissions(*mode);
            if name.ends_with('/') {
                w.add_directory(name.trim_end_matches('/'), opts).unwrap();
            } else {
                w.start_file(*name, opts).unwrap();
                w.write_all(content).unwrap();
            }
        }
        w.finish().unwrap().into_inner()
    }

    #[test]
    fn the_zip_and_directory_forms_match_the_test_vectors() {
        let d = tempfile::tempdir().unwrap();
        let empty = d.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert_eq!(h1_of_dir(&empty).unwrap().as_str(), H1_EMPTY);
        let one = d.path().join("one");
        std::fs::create_dir(&one).unwrap();
        std::fs::write(one.join("terraform-provider-foo_v1.0.0"), b"hello\n").unwrap();
        assert_eq!(h1_of_dir(&one).unwrap().as_str(), H1_HELLO);

        let write = |name: &str, bytes: &[u8]| {
            let p = d.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        let empty_zip = write("empty.zip", &make_zip(&[]));
        assert_eq!(h1_of_zip(&empty_zip).unwrap().as_str(), H1_EMPTY);
        let zip_bytes = make_zip(&[("terraform-provider-foo_v1.0.0", b"hello\n", 0o755)]);
        let hello_zip = write("hello.zip", &zip_bytes);
        assert_eq!(h1_of_zip(&hello_zip).unwrap().as_str(), H1_HELLO);
        assert_eq!(h1_of_zip_package(&hello_zip).unwrap().as_str(), H1_HELLO);
        assert_eq!(
            zh_of_file(&hello_zip).unwrap().to_string(),
            format!("zh:{}", hex::encode(Sha256::digest(&zip_bytes)))
        );
        assert_eq!(
            zh_of_bytes(b"").as_str(),
            "zh:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );

        // Directory entries count as empty files in the zip form only; the package form equals
        // the unpacked directory.
        let with_dir = write(
            "dir.zip",
            &make_zip(&[
                ("sub/", b"", 0o755),
                ("sub/terraform-provider-foo_v1.0.0", b"hello\n", 0o755),
            ]),
        );
        let unpacked = d.path().join("unpacked");
        std::fs::create_dir_all(unpacked.join("sub")).unwrap();
        std::fs::write(
            unpacked.join("sub/terraform-provider-foo_v1.0.0"),
            b"hello\n",
        )
        .unwrap();
        let dir_h1 = h1_of_dir(&unpacked).unwrap();
        assert_eq!(h1_of_zip_package(&with_dir).unwrap(), dir_h1);
        assert_ne!(h1_of_zip(&with_dir).unwrap(), dir_h1);
    }

    #[test]
    fn test_vectors() {
        assert_eq!(
            h1_of_entries(vec![]).unwrap().as_str(),
            "h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
        let content: [u8; 32] = Sha256::digest(b"hello\n").into();
        assert_eq!(
            h1_of_entries(vec![(b"terraform-provider-foo_v1.0.0".to_vec(), content)])
                .unwrap()
                .as_str(),
            "h1:ACenfE/xHd2y4YemST5ZES8kUXdM28vrpXDNMENE90w="
        );
        assert!(h1_of_entries(vec![(b"a\nb".to_vec(), content)]).is_err());
    }

    #[test]
    fn hash_strings() {
        assert_eq!(Hash::parse("h1:abc=").unwrap().scheme(), "h1");
        assert!(Hash::parse("nocolon").is_err());
        assert!(Hash::parse(":x").is_err());
        assert!(!Hash::parse("test:x").unwrap().is_preferred());
        assert_eq!(
            Hash::zh_from_hex(&"AB".repeat(32)).unwrap().as_str(),
            format!("zh:{}", "ab".repeat(32))
        );
        assert!(Hash::zh_from_hex("abc").is_err());
    }
}
