//! Optional client-side encryption of every state object (AES-256-GCM, RustCrypto `aes-gcm`).
//!
//! Owns: the key (32 bytes, standard base64, from an environment variable or a file), the
//! sealed format, and binding each object to its key name. Not: where objects go.
//!
//! A sealed object is `nivis-aes256gcm-v1\n` + a random 96-bit nonce + ciphertext with its
//! 16-byte tag. The object's key name is the associated data, so a sealed journal segment or
//! snapshot cannot be moved to another name (an older segment replayed in a newer slot, say)
//! without failing authentication. Whoever can read the bucket learns object sizes and names,
//! never attributes.

use std::path::{Path, PathBuf};

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use crate::secrets::Redactor;

const MAGIC: &[u8] = b"nivis-aes256gcm-v1\n";
const NONCE_LEN: usize = 12;

/// Where the key comes from (backend `encryptionKeyEnv` / `encryptionKeyFile`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeySource {
    /// An environment variable holding the base64 key.
    Env(String),
    /// A file holding the base64 key (must not be readable by group or others).
    File(std::path::PathBuf),
}

/// Why the encryption key cannot be loaded; the message names the source and what to do.
#[derive(Debug)]
pub(crate) enum KeyError {
    /// The configured environment variable is not set.
    EnvUnset {
        /// The variable's name.
        var: String,
    },
    /// The key file cannot be looked at or read.
    Read {
        /// The key file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The key file is not a small regular file.
    NotAFile {
        /// The key file.
        path: PathBuf,
    },
    /// The key file is readable by group or others.
    Exposed {
        /// The key file.
        path: PathBuf,
    },
    /// The key file breaks the private file rule (`privfile`): the message says how.
    Unsafe {
        /// The rule's message, naming the file.
        message: String,
    },
    /// The key is not standard base64.
    NotBase64 {
        /// Where it is: `$VAR` or the file.
        source_name: String,
        /// The decoder's complaint.
        source: base64::DecodeError,
    },
    /// The key does not have 32 bytes.
    WrongLength {
        /// Where it is: `$VAR` or the file.
        source_name: String,
        /// How many bytes it has.
        len: usize,
    },
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyError::EnvUnset { var } => write!(
                f,
                "the state is configured to be encrypted with the key in ${var}, but {var} is \
                 not set; set it to the base64 of 32 random bytes (e.g. `head -c 32 \
                 /dev/urandom | base64`)"
            ),
            KeyError::Read { path, source } => write!(
                f,
                "cannot read the state encryption key {}: {source}",
                path.display()
            ),
            KeyError::NotAFile { path } => write!(
                f,
                "the state encryption key {} is not a small regular file",
                path.display()
            ),
            KeyError::Exposed { path } => write!(
                f,
                "the state encryption key {} is readable by other users; chmod 600 it",
                path.display()
            ),
            KeyError::Unsafe { message } => f.write_str(message),
            KeyError::NotBase64 {
                source_name,
                source,
            } => write!(
                f,
                "the state encryption key in {source_name} is not base64: {source}"
            ),
            KeyError::WrongLength { source_name, len } => write!(
                f,
                "the state encryption key in {source_name} has {len} bytes; AES-256 needs 32"
            ),
        }
    }
}

impl std::error::Error for KeyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KeyError::Read { source, .. } => Some(source),
            KeyError::NotBase64 { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Why an object cannot be opened (decrypted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OpenError {
    /// The object is plain text, but the backend requires encryption.
    NotEncrypted {
        /// The object's key name.
        name: String,
    },
    /// The object is shorter than its header.
    Truncated {
        /// The object's key name.
        name: String,
    },
    /// Authentication failed: another key, or an altered or moved object.
    Undecryptable {
        /// The object's key name.
        name: String,
    },
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::NotEncrypted { name } => write!(
                f,
                "{name} is not encrypted, but this backend requires encrypted state; to \
                 encrypt the existing state, run `nivis state migrate --encrypt` with the key \
                 configured (to keep it unencrypted, remove the key from nivis.backend)"
            ),
            OpenError::Truncated { name } => {
                write!(f, "{name}: the encrypted object is truncated")
            }
            OpenError::Undecryptable { name } => write!(
                f,
                "{name} cannot be decrypted: another key was used, or the object was altered \
                 or moved"
            ),
        }
    }
}

impl std::error::Error for OpenError {}

/// An encryption key, ready to seal and open objects. `Debug` never shows it.
pub(crate) struct Cipher {
    aead: Aes256Gcm,
}

impl std::fmt::Debug for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cipher(AES-256-GCM, key hidden)")
    }
}

impl Cipher {
    /// Loads the key from `source` (and teaches it to `redactor`, the run's); the error names
    /// the source and what is wrong.
    pub(crate) fn load(source: &KeySource, redactor: &Redactor) -> Result<Cipher, KeyError> {
        let (text, what) = match source {
            KeySource::Env(var) => (
                std::env::var(var).map_err(|_| KeyError::EnvUnset { var: var.clone() })?,
                format!("${var}"),
            ),
            KeySource::File(path) => (read_key_file(path)?, path.display().to_string()),
        };
        // Redacted from every printout of the run from now on, like any secret.
        redactor.remember(text.trim());
        let key = STANDARD
            .decode(text.trim())
            .map_err(|source| KeyError::NotBase64 {
                source_name: what.clone(),
                source,
            })?;
        if key.len() != 32 {
            return Err(KeyError::WrongLength {
                source_name: what,
                len: key.len(),
            });
        }
        Ok(Cipher {
            aead: Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(&key)),
        })
    }

    /// Encrypts `plain` for the object named `name`.
    pub(crate) fn seal(&self, name: &str, plain: &[u8]) -> Vec<u8> {
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let sealed = self
            .aead
            .encrypt(
                &nonce,
                Payload {
                    msg: plain,
                    aad: name.as_bytes(),
                },
            )
            .expect("AES-GCM encryption of an in-memory buffer cannot fail");
        let mut out = Vec::with_capacity(MAGIC.len() + NONCE_LEN + sealed.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// Decrypts the object named `name`; fails if it is not sealed, was sealed with another
    /// key, or was altered or renamed.
    pub(crate) fn open(&self, name: &str, data: &[u8]) -> Result<Vec<u8>, OpenError> {
        let owned = || name.to_string();
        let Some(rest) = data.strip_prefix(MAGIC) else {
            return Err(OpenError::NotEncrypted { name: owned() });
        };
        if rest.len() < NONCE_LEN {
            return Err(OpenError::Truncated { name: owned() });
        }
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        self.aead
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: name.as_bytes(),
                },
            )
            .map_err(|_| OpenError::Undecryptable { name: owned() })
    }
}

/// Whether `data` is a sealed object.
pub(super) fn is_sealed(data: &[u8]) -> bool {
    data.starts_with(MAGIC)
}

fn read_key_file(path: &Path) -> Result<String, KeyError> {
    use std::os::unix::fs::PermissionsExt;
    let read = |source| KeyError::Read {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read)?;
    if !meta.is_file() || meta.len() > 4096 {
        return Err(KeyError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(KeyError::Exposed {
            path: path.to_path_buf(),
        });
    }
    // Under the file rule (`privfile`): a key file someone else owns or can change (or a link
    // at its name) would let them choose the key our secrets are sealed with.
    let mut file = crate::privfile::open_read(path, "the state encryption key").map_err(|e| {
        KeyError::Unsafe {
            message: e.message(path),
        }
    })?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut file, &mut text).map_err(read)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cipher(byte: u8) -> Cipher {
        Cipher {
            aead: Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(&[byte; 32])),
        }
    }

    #[test]
    fn round_trips_and_binds_the_name() {
        let c = cipher(7);
        let sealed = c.seal("k/a", b"{\"secret\":1}");
        assert!(is_sealed(&sealed));
        assert!(!sealed.windows(6).any(|w| w == b"secret"));
        assert_eq!(c.open("k/a", &sealed).unwrap(), b"{\"secret\":1}");
        assert_ne!(
            c.seal("k/a", b"x"),
            c.seal("k/a", b"x"),
            "fresh nonce each time"
        );
        assert!(c
            .open("k/b", &sealed)
            .unwrap_err()
            .to_string()
            .contains("moved"));
        assert!(cipher(8).open("k/a", &sealed).is_err());
        let mut flipped = sealed.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(c.open("k/a", &flipped).is_err());
        assert!(c
            .open("k/a", b"{}")
            .unwrap_err()
            .to_string()
            .contains("not encrypted"));
    }

    #[test]
    fn loads_keys_and_explains_bad_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        let key = STANDARD.encode([1u8; 32]);
        std::fs::write(&path, format!("{key}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = Cipher::load(&KeySource::File(path.clone()), &Redactor::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("chmod 600"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let c = Cipher::load(&KeySource::File(path.clone()), &Redactor::new()).unwrap();
        assert_eq!(c.open("n", &cipher(1).seal("n", b"hi")).unwrap(), b"hi");
        std::fs::write(&path, STANDARD.encode([1u8; 16])).unwrap();
        let err = Cipher::load(&KeySource::File(path), &Redactor::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("16 bytes"), "{err}");
        let err = Cipher::load(
            &KeySource::Env("NIVIS_TEST_UNSET_KEY_VAR".into()),
            &Redactor::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("NIVIS_TEST_UNSET_KEY_VAR is not set"), "{err}");
    }
}
