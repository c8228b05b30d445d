//! The on-disk cache of provider schemas, keyed by the provider binary's sha256.
//!
//! Large providers ship schemas of several MiB; converting them on every run costs time. The
//! cache stores the converted model as JSON under `$XDG_CACHE_HOME/nivis/schemas/<sha256>.json`
//! (0600 files in a 0700 directory) with the digest of the raw answer it came from: a provider
//! whose answer changes (some read their environment) is converted afresh. Only a provider that
//! declares `get_provider_schema_optional` is spared the schema call altogether. Hashing a big binary is itself slow, so the hash is
//! remembered per (path, size, modification time). Any read or write problem simply means no
//! cache: correctness never depends on it.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::schema::ProviderSchema;

/// Where schemas are cached, or `None` when caching is off (`NIVIS_SCHEMA_CACHE=off`).
pub(super) fn cache_dir() -> Option<PathBuf> {
    if std::env::var("NIVIS_SCHEMA_CACHE").is_ok_and(|v| v == "off") {
        return None;
    }
    Some(crate::xdg::cache_home()?.join("nivis").join("schemas"))
}

/// The sha256 of the binary at `path`, memoised by path, size and modification time.
pub(super) fn binary_hash(dir: &Path, path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    let canonical = std::fs::canonicalize(path).ok()?;
    let memo_key = hex::encode(Sha256::digest(
        format!(
            "{}|{}|{}.{}",
            canonical.display(),
            meta.len(),
            meta.mtime(),
            meta.mtime_nsec()
        )
        .as_bytes(),
    ));
    let memo = dir.join("by-path").join(memo_key);
    if let Ok(known) = std::fs::read_to_string(&memo) {
        if known.len() == 64 {
            return Some(known);
        }
    }
    let mut file = std::fs::File::open(path).ok()?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let hash = hex::encode(hasher.finalize());
    let _ = crate::rundir::write_private_file_in_private_dir(&memo, hash.as_bytes());
    Some(hash)
}

/// A cached schema: the converted model and the digest of the raw answer it came from.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Entry {
    /// sha256 of the encoded GetSchema/GetProviderSchema response.
    pub(crate) response: String,
    /// [`model_digest`] of the converted schema: stable where the raw answer is not (providers
    /// encode their schema maps in random order), so it keys remembered validations.
    pub(crate) model: String,
    /// The converted schema.
    pub(crate) schema: ProviderSchema,
}

/// The digest of a converted schema (its JSON; every map in it is ordered).
pub(super) fn model_digest(schema: &ProviderSchema) -> String {
    hex::encode(Sha256::digest(
        serde_json::to_vec(schema).unwrap_or_default(),
    ))
}

/// The mark recorded on the objects a provider returns (DESIGN §79): 128 bits of the sha256 of
/// the binary's sha256 and its schema model digest, so the same binary serving another schema
/// (some read their environment) marks differently.
pub(super) fn binary_mark(binary: &str, model: &str) -> String {
    let digest = Sha256::digest(format!("nivis-binary-mark-v1|{binary}|{model}").as_bytes());
    hex::encode(&digest[..16])
}

/// The digest recorded for a raw schema answer.
pub(super) fn response_digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The cache file for a binary. The name carries the entry format's version: a Nivis that
/// wrote another format never reads this one as something it is not.
fn entry_path(dir: &Path, hash: &str) -> PathBuf {
    dir.join(format!("{hash}.{FORMAT}.json"))
}

/// Version of the cache entry format; bump it whenever [`Entry`] or the schema model changes.
const FORMAT: &str = "v4";

/// The cached schema of the binary with this hash.
pub(super) fn load(dir: &Path, hash: &str) -> Option<Entry> {
    let bytes = std::fs::read(entry_path(dir, hash)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Stores a schema for the binary with this hash.
pub(super) fn store(dir: &Path, hash: &str, entry: &Entry) {
    if let Ok(bytes) = serde_json::to_vec(entry) {
        if let Err(e) =
            crate::rundir::write_private_file_in_private_dir(&entry_path(dir, hash), &bytes)
        {
            log::debug!(
                "could not cache a provider schema in {}: {e}",
                dir.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn hashes_are_memoised_and_schemas_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("provider");
        std::fs::write(&bin, b"hello\n").unwrap();
        let cache = dir.path().join("cache");
        let h = binary_hash(&cache, &bin).unwrap();
        assert_eq!(
            h,
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
        );
        assert_eq!(binary_hash(&cache, &bin).unwrap(), h);
        assert!(load(&cache, &h).is_none());
        let schema = ProviderSchema {
            get_provider_schema_optional: true,
            ..ProviderSchema::default()
        };
        store(
            &cache,
            &h,
            &Entry {
                response: response_digest(b"answer"),
                model: "m".into(),
                schema,
            },
        );
        let entry = load(&cache, &h).unwrap();
        assert!(entry.schema.get_provider_schema_optional);
        assert_eq!(entry.response, response_digest(b"answer"));
        let mode = std::fs::metadata(entry_path(&cache, &h))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
