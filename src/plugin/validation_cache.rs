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
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

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
    /// The file, read (or started) at the first validation: a run that validates nothing (a
    /// destroy) never reads it, and at 100k remembered verdicts reading it is most of a small
    /// run's own CPU. `None` inside: the file could not be used (no cache this run).
    verdicts: OnceLock<Option<Verdicts>>,
}

/// The salt and the clean keys read from (or started in) the file.
struct Verdicts {
    salt: String,
    clean: Mutex<KeySet>,
}

impl ValidationCache {
    /// The verdicts of the binary with sha256 `binary` whose schema answer had digest
    /// `schema`, under the schema cache directory `dir`, for the plan named by the hex digest
    /// `scope` (`None`: the binary's shared file); the file is read at the first
    /// [`ValidationCache::key`]. `None` when the cache is off (`NIVIS_VALIDATION_CACHE=off`)
    /// or the names cannot key a file.
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
        Some(ValidationCache {
            path: dir.join("validated").join(name),
            verdicts: OnceLock::new(),
        })
    }

    /// The file's verdicts, read or started on first use (concurrent first users wait for one
    /// read); `None` when the file cannot be used.
    fn verdicts(&self) -> Option<&Verdicts> {
        self.verdicts
            .get_or_init(|| match read(&self.path) {
                Some((salt, clean)) => Some(Verdicts {
                    salt,
                    clean: Mutex::new(clean),
                }),
                None => start(&self.path).map(|salt| Verdicts {
                    salt,
                    clean: Mutex::new(KeySet::default()),
                }),
            })
            .as_ref()
    }

    /// The key of one validation request: `encoded` is the configuration as sent (msgpack).
    /// `None` when the file cannot be used (then nothing is looked up or remembered).
    pub(super) fn key(
        &self,
        subject: Subject,
        type_name: &str,
        encoded: &[u8],
    ) -> Option<[u8; 32]> {
        let verdicts = self.verdicts()?;
        let mut h = Sha256::new();
        h.update(verdicts.salt.as_bytes());
        h.update([0, subject as u8, 0]);
        h.update(type_name.as_bytes());
        h.update([0]);
        h.update(encoded);
        Some(h.finalize().into())
    }

    /// Whether this request was answered with no diagnostics before.
    pub(super) fn is_clean(&self, key: &[u8; 32]) -> bool {
        self.verdicts()
            .is_some_and(|v| v.clean.lock().is_ok_and(|c| c.contains(&Key::of(key))))
    }

    /// Remembers that this request was answered with no diagnostics.
    pub(super) fn remember_clean(&self, key: [u8; 32]) {
        let Some(verdicts) = self.verdicts() else {
            return;
        };
        let Ok(mut clean) = verdicts.clean.lock() else {
            return;
        };
        if !clean.insert(Key::of(&key)) {
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

/// A remembered key: the first 128 bits of a salted sha256 (as `Provider::binary_mark` keeps
/// 128 bits, §79: with 10^5 verdicts a lookup matches a wrong one by a 2^-111 chance). Half
/// the width halves the decoding and the table's cache misses, which were the whole cost of
/// reading a 100k-line file (DESIGN §81). The bits are already uniform: their own hash.
#[derive(PartialEq, Eq)]
struct Key(u128);

impl Key {
    fn of(digest: &[u8; 32]) -> Key {
        let mut first = [0u8; 16];
        first.copy_from_slice(&digest[..16]);
        Key(u128::from_be_bytes(first))
    }
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0 as u64);
    }
}

/// The [`Hasher`] of [`Key`]s: passes the `u64` a key writes through.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used by `Key`; anything else still hashes every byte.
        for b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type KeySet = HashSet<Key, BuildHasherDefault<KeyHasher>>;

/// Each byte's value as a hex digit, or 0xff.
const HEX_DIGITS: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// One line's key: a line of exactly 64 characters whose first 32 are hex digits (the line
/// holds the whole digest; the key is its first half), else `None` (a torn or foreign line).
fn decode_key(line: &[u8]) -> Option<Key> {
    if line.len() != 64 {
        return None;
    }
    let mut key = 0u128;
    for digit in &line[..32] {
        let value = HEX_DIGITS[usize::from(*digit)];
        if value & 0xf0 != 0 {
            return None;
        }
        key = key << 4 | u128::from(value);
    }
    Some(Key(key))
}

/// The salt and clean keys of an existing file, or `None` when it is missing, foreign, not
/// private, or too large (then it is started afresh).
fn read(path: &Path) -> Option<(String, KeySet)> {
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
    // Bytes, not a String: the keys are checked digit by digit anyway.
    let mut text = Vec::with_capacity(usize::try_from(meta.len()).ok()? + 1);
    file.read_to_end(&mut text).ok()?;
    let mut lines = text.split(|b| *b == b'\n');
    let salt = lines
        .next()?
        .strip_prefix(MAGIC.as_bytes())?
        .strip_prefix(b" ")?;
    if salt.len() != 32 || !salt.iter().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let salt = String::from_utf8(salt.to_vec()).ok()?;
    // Decoded in place (no allocation per line): at 100k resources the file has 100k lines.
    let mut clean = KeySet::with_capacity_and_hasher(text.len() / 65, Default::default());
    clean.extend(lines.filter_map(decode_key));
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
    crate::rundir::write_private_file_in_private_dir(path, format!("{MAGIC} {salt}\n").as_bytes())
        .ok()?;
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
        let key = cache
            .key(Subject::Resource, "alpha_token", b"config")
            .unwrap();
        assert!(!cache.is_clean(&key));
        cache.remember_clean(key);
        assert!(cache.is_clean(&key));
        // The same request for a data source is another key.
        assert_ne!(
            key,
            cache
                .key(Subject::DataSource, "alpha_token", b"config")
                .unwrap()
        );

        let again = ValidationCache::open(dir.path(), "ab12", "cd34", None).unwrap();
        assert!(again.is_clean(
            &again
                .key(Subject::Resource, "alpha_token", b"config")
                .unwrap()
        ));
        let other_binary = ValidationCache::open(dir.path(), "ab13", "cd34", None).unwrap();
        assert!(!other_binary.is_clean(
            &other_binary
                .key(Subject::Resource, "alpha_token", b"config")
                .unwrap()
        ));
        let other_schema = ValidationCache::open(dir.path(), "ab12", "cd35", None).unwrap();
        assert!(!other_schema.is_clean(
            &other_schema
                .key(Subject::Resource, "alpha_token", b"config")
                .unwrap()
        ));

        // Another plan's verdicts are its own.
        let other_plan = ValidationCache::open(dir.path(), "ab12", "cd34", Some("ef56")).unwrap();
        let key = other_plan
            .key(Subject::Resource, "alpha_token", b"config")
            .unwrap();
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
        let key = cache.key(Subject::Resource, "t", b"c").unwrap();
        cache.remember_clean(key);
        let file = dir.path().join("validated").join("ab12-cd34.v1");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let reopened = ValidationCache::open(dir.path(), "ab12", "cd34", None).unwrap();
        assert!(!reopened.is_clean(&reopened.key(Subject::Resource, "t", b"c").unwrap()));
    }

    #[test]
    fn the_file_is_read_or_started_only_at_the_first_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("validated").join("ab12-cd34.v1");
        let cache = ValidationCache::open(dir.path(), "ab12", "cd34", None).unwrap();
        assert!(!file.exists(), "opening must not touch the file");
        let key = cache.key(Subject::Resource, "t", b"c").unwrap();
        assert!(file.exists());
        cache.remember_clean(key);
        // Opened while the file is usable, made foreign before the first key: what the first
        // key finds is what counts (the file is started afresh, the verdict forgotten).
        let late = ValidationCache::open(dir.path(), "ab12", "cd34", None).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(!late.is_clean(&late.key(Subject::Resource, "t", b"c").unwrap()));
    }

    #[test]
    fn every_whole_line_is_read_and_torn_or_foreign_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ValidationCache::open(dir.path(), "ab12", "cd34", None).unwrap();
        let keys: Vec<[u8; 32]> = (0..1000u32)
            .map(|i| cache.key(Subject::Resource, "t", &i.to_le_bytes()).unwrap())
            .collect();
        for key in &keys {
            cache.remember_clean(*key);
        }
        let file = dir.path().join("validated").join("ab12-cd34.v1");
        let mut text = std::fs::read_to_string(&file).unwrap();
        let upper = hex::encode_upper([7u8; 32]);
        text.push_str(&format!(
            "{}\nzz{}\n{upper}\n{}",
            &upper[..40],
            &upper[2..],
            &upper[..10]
        ));
        std::fs::write(&file, text).unwrap();

        let again = ValidationCache::open(dir.path(), "ab12", "cd34", None).unwrap();
        assert_eq!(
            again.key(Subject::Resource, "t", b"x"),
            cache.key(Subject::Resource, "t", b"x")
        );
        assert!(keys.iter().all(|key| again.is_clean(key)));
        assert!(again.is_clean(&[7u8; 32]), "upper-case digits are digits");
        let verdicts = again.verdicts().unwrap();
        assert_eq!(verdicts.clean.lock().unwrap().len(), 1001);
        assert_eq!(decode_key(&upper.as_bytes()[..40]).map(|k| k.0), None);
        assert_eq!(
            decode_key(format!("zz{}", &upper[2..]).as_bytes()).map(|k| k.0),
            None
        );
        // A line read back is the key it was written as.
        let digest: [u8; 32] = std::array::from_fn(|i| (i * 37 + 11) as u8);
        assert_eq!(
            decode_key(hex::encode(digest).as_bytes()).map(|k| k.0),
            Some(Key::of(&digest).0)
        );
    }
}
