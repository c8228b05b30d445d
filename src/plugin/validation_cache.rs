//! Remembered clean verdicts of a provider's configuration validation.
//!
//! `ValidateResourceConfig` / `ValidateDataResourceConfig` (v5: `ValidateResourceTypeConfig` /
//! `ValidateDataSourceConfig`) receive only a type name and a configuration, before the
//! provider is configured: the verdict is a function of the provider binary, its schema and the
//! configuration. A verdict with no diagnostics at all is remembered here, keyed by those three,
//! and the call is skipped the next time the same binary sees the same configuration. Never
//! remembered: a configuration holding unknown values (the provider may judge the known
//! value differently), and any verdict with an error or a warning (shown on every run).
//!
//! Owns the files `$XDG_CACHE_HOME/nivis/schemas/validated/<binary sha256>-<schema digest>[-<plan>].v1`
//! (0600, in the schema cache's 0700 directory; `<plan>` names the plan whose runs use it, so a
//! run reads only its own plan's verdicts, not those of every plan the binary ever served): a header line with a random salt, then one
//! line per clean verdict, the hex sha256 of (salt, kind, type, encoded configuration). The
//! salt keeps a digest of a configuration holding a low-entropy secret from being guessed
//! offline from this file alone. Lines are appended with one `write` under `O_APPEND`, so
//! concurrent runs never interleave; a torn or foreign line is ignored. As with the schema
//! cache, any read or write problem means no cache: correctness never depends on it.
//! Must not: decide anything about validity; a hit only spares a call whose answer is known.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

/// The header's first word; the format version is also in the file name.
const MAGIC: &str = "nivis-validated";

/// A file larger than this is started afresh (about 800 000 verdicts).
const MAX_BYTES: u64 = 64 << 20;

/// What was validated: the two calls take different schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Subject {
    /// A managed resource's configuration.
    Resource,
    /// A data source's configuration.
    DataSource,
}

/// The clean verdicts known for one provider binary and schema.
pub(super) struct ValidationCache {
    path: PathBuf,
    salt: String,
    clean: Mutex<HashSet<[u8; 32]>>,
}

impl ValidationCache {
    /// Opens (or starts) the verdicts of the binary with sha256 `binary` whose schema answer
    /// had digest `schema`, under the schema cache directory `dir`, for the plan named by the
    /// hex digest `scope` (`None`: the binary's shared file). `None` when the cache is off
    /// (`NIVIS_VALIDATION_CACHE=off`) or cannot be used.
    pub(super) fn open(
        dir: &Path,
        binary: &str,
        schema: &str,
        scope: Option<&str>,
    ) -> Option<ValidationCache> {
        if std::env::var("NIVIS_VALIDATION_CACHE").is_ok_and(|v| v == "off") {
            return None;
        }
        let hex = |s: &str| s.len() <= 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex(binary) || !hex(schema) || !scope.is_none_or(hex) {
            return None;
        }
        let name = match scope {
            Some(scope) => format!("{binary}-{schema}-{scope}.v1"),
            None => format!("{binary}-{schema}.v1"),
        };
        let path = dir.join("validated").join(name);
        match read(&path) {
            Some((salt, clean)) => Some(ValidationCache {
                path,
                salt,
                clean: Mutex::new(clean),
            }),
            None => start(&path).map(|salt| ValidationCache {
                path,
                salt,
                clean: Mutex::new(HashSet::new()),
            }),
        }
    }

    /// The key of one validation request: `encoded` is the configuration as sent (msgpack).
    pub(super) fn key(&self, subject: Subject, type_name: &str, encoded: &[u8]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.salt.as_bytes());
        h.update([0, subject as u8, 0]);
        h.update(type_name.as_bytes());
        h.update([0]);
        h.update(encoded);
        h.finalize().into()
    }

    /// Whether this request was answered with no diagnostics before.
    pub(super) fn is_clean(&self, key: &[u8; 32]) -> bool {
        self.clean.lock().is_ok_and(|c| c.contains(key))
    }

    /// Remembers that this request was answered with no diagnostics.
    pub(super) fn remember_clean(&self, key: [u8; 32]) {
        let Ok(mut clean) = self.clean.lock() else {
            return;
        };
        if !clean.insert(key) {
            return;
        }
        let line = format!("{}\n", hex::encode(key));
        let appended = OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = appended {
            log::debug!(
                "could not remember a validation in {}: {e}",
                self.path.display()
            );
        }
    }
}

/// The salt and clean keys of an existing file, or `None` when it is missing, foreign, not
/// private, or too large (then it is started afresh).
fn read(path: &Path) -> Option<(String, HashSet<[u8; 32]>)> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    use std::os::unix::fs::MetadataExt;
    if meta.len() > MAX_BYTES || meta.uid() != crate::privfile::euid() || meta.mode() & 0o077 != 0 {
        return None;
    }
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    let mut lines = text.lines();
    let salt = lines
        .next()?
        .strip_prefix(MAGIC)?
        .strip_prefix(' ')?
        .to_string();
    if salt.len() != 32 || !salt.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    // Decoded in place (no allocation per line): at 100k resources the file has 100k lines.
    let mut clean = HashSet::with_capacity(text.len() / 65);
    for line in lines {
        let mut key = [0u8; 32];
        if hex::decode_to_slice(line, &mut key).is_ok() {
            clean.insert(key);
        }
    }
    Some((salt, clean))
}

/// Writes a new file with a fresh salt (replacing a foreign or oversized one) and returns the
/// salt (written privately through the schema cache's writer: 0600, 0700 directory, renamed
/// into place). Another run starting the same file at the same moment wins or loses the
/// rename; the loser's later lines land in the winner's file under the wrong salt and are
/// never matched.
fn start(path: &Path) -> Option<String> {
    let mut bytes = [0u8; 16];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .ok()?;
    let salt = hex::encode(bytes);
    super::schema_cache::write_private(path, format!("{MAGIC} {salt}\n").as_bytes()).ok()?;
    Some(salt)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn clean_verdicts_survive_a_reopen_and_stay_per_binary_and_schema() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ValidationCache::open(dir.path(), "ab12", "cd34", None).unwrap();
        let key = cache.key(Subject::Resource, "alpha_token", b"config");
        assert!(!cache.is_clean(&key));
        cache.remember_clean(key);
        assert!(cache.is_clean(&key));
        // The same request for a data source is another key.
        assert_ne!(
            key,
            cache.key(Subject::DataSource, "alpha_token", b"config")
        );

        let again = ValidationCache::open(dir.path(), "ab12", "cd34", None).unwrap();
        assert!(again.is_clean(&again.key(Subject::Resource, "alpha_token", b"config")));
        let other_binary = ValidationCache::open(dir.path(), "ab13", "cd34", None).unwrap();
        assert!(!other_binary.is_clean(&other_binary.key(
            Subject::Resource,
            "alpha_token",
            b"config"
        )));
        let other_schema = ValidationCache::open(dir.path(), "ab12", "cd35", None).unwrap();
        assert!(!other_schema.is_clean(&other_schema.key(
            Subject::Resource,
            "alpha_token",
            b"config"
        )));

        // Another plan's verdicts are its own.
        let other_plan = ValidationCache::open(dir.path(), "ab12", "cd34", Some("ef56")).unwrap();
        let key = other_plan.key(Subject::Resource, "alpha_token", b"config");
        assert!(!other_plan.is_clean(&key));
        other_plan.remember_clean(key);
        let reopened = ValidationCache::open(dir.path(), "ab12", "cd34", Some("ef56")).unwrap();
        assert!(reopened.is_clean(&key));
        assert!(ValidationCache::open(dir.path(), "ab12", "cd34", Some("../x")).is_none());

        let file = dir.path().join("validated").join("ab12-cd34.v1");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_foreign_or_group_readable_file_is_started_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ValidationCache::open(dir.path(), "ab12", "cd34", None).unwrap();
        let key = cache.key(Subject::Resource, "t", b"c");
        cache.remember_clean(key);
        let file = dir.path().join("validated").join("ab12-cd34.v1");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let reopened = ValidationCache::open(dir.path(), "ab12", "cd34", None).unwrap();
        assert!(!reopened.is_clean(&reopened.key(Subject::Resource, "t", b"c")));
    }
}
