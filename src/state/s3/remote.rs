//! [`Remote`]: the objects of one remote state (snapshot, journal segments) and the conditional
//! reads and writes on them, with [`Position`], where a writer stands in them.
//!
//! Owns: object names, sealing/opening bodies with the optional cipher, loading snapshot plus
//! journal, creating a segment (settling a retried create), replacing the snapshot after sealing
//! the namespace, deleting an old namespace. Not: the lock, fencing, poisoning or rescue files
//! (`store`, `lock`).

use std::path::Path;

use super::client::{Client, Condition, S3Error};
use super::config::S3Backend;
use super::crypt::Cipher;
use super::RemoteError;
use crate::state::audit::Record;
use crate::state::file::parse_snapshot;
use crate::state::journal;
use crate::state::lost::{self, LostState};
use crate::state::{StateError, StateFile};

/// The body of a seal segment: the namespace it ends takes no more records.
pub(super) const SEAL: &[u8] = b"nivis-sealed\n";

/// Turning an existing state's encryption on or off (`nivis state migrate --encrypt` /
/// `--decrypt`): while it runs, objects are read whether sealed or not, and written as the
/// conversion says. Outside a conversion a plaintext object under a key is refused (someone
/// may have swapped it in), and so is a sealed one without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Conversion {
    /// Write every object sealed with the configured key.
    Encrypt,
    /// Write every object in plain text (the configured key still opens sealed ones).
    Decrypt,
}

/// The objects of one remote state and how to read and write them.
pub(super) struct Remote {
    pub(super) client: Client,
    pub(super) cipher: Option<Cipher>,
    pub(super) conversion: Option<Conversion>,
    pub(super) key: String,
    pub(super) url: String,
}

impl Remote {
    pub(super) fn new(backend: &S3Backend) -> Result<Remote, StateError> {
        Ok(Remote {
            client: backend.client()?,
            cipher: backend.cipher()?,
            conversion: None,
            key: backend.key(),
            url: backend.url(),
        })
    }

    /// Whether objects are written in plain text.
    pub(super) fn writes_plaintext(&self) -> bool {
        self.cipher.is_none() || self.conversion == Some(Conversion::Decrypt)
    }

    pub(super) fn lock_key(&self) -> String {
        format!("{}.lock", self.key)
    }

    pub(super) fn namespace(&self, serial: u64) -> String {
        format!("{}.journal/{serial:012}/", self.key)
    }

    pub(super) fn segment(&self, serial: u64, seq: u64) -> String {
        format!("{}{seq:012}", self.namespace(serial))
    }

    pub(super) fn seal_body(&self, name: &str, plain: &[u8]) -> Vec<u8> {
        match &self.cipher {
            Some(c) if !self.writes_plaintext() => c.seal(name, plain),
            _ => plain.to_vec(),
        }
    }

    pub(super) fn open_body(&self, name: &str, body: Vec<u8>) -> Result<Vec<u8>, StateError> {
        let sealed = super::crypt::is_sealed(&body);
        match &self.cipher {
            // Converting: plain text is what is being turned into sealed objects (or back).
            Some(_) if !sealed && self.conversion.is_some() => Ok(body),
            Some(c) => c
                .open(name, &body)
                .map_err(|e| RemoteError::Invalid(e.to_string()).into()),
            None if sealed => Err(RemoteError::Invalid(format!(
                "{name} is encrypted; configure its key (encryptionKeyEnv or encryptionKeyFile; \
                 to turn the state back to plain text, `nivis state migrate --decrypt` with the \
                 key configured)"
            ))
            .into()),
            None => Ok(body),
        }
    }

    pub(super) fn fail(&self, what: &str, e: S3Error) -> StateError {
        RemoteError::s3(format!("{what} {}", self.url), e).into()
    }

    /// Reads snapshot and journal, retrying when a writer's clean-up removed a segment between
    /// our listing and our read.
    pub(super) fn load(&self) -> Result<Loaded, StateError> {
        let mut attempt = 0;
        loop {
            match self.load_once() {
                Err(LoadError::Vanished(_)) if attempt < 3 => attempt += 1,
                Err(LoadError::Vanished(name)) => {
                    return Err(StateError::corrupt(
                        &self.url,
                        None,
                        format!("journal segment {name} keeps disappearing while being read"),
                    ))
                }
                Err(LoadError::State(e)) => return Err(e),
                Ok(loaded) => return Ok(loaded),
            }
        }
    }

    pub(super) fn load_once(&self) -> Result<Loaded, LoadError> {
        let snapshot = match self.client.get(&self.key) {
            Ok(Some(obj)) => {
                let plain = self.open_body(&self.key, obj.body)?;
                let state = parse_snapshot(Path::new(&self.url), &plain)?;
                Some((state, obj.etag, plain.len() as u64))
            }
            Ok(None) => None,
            Err(e) => return Err(self.fail("read the state", e).into()),
        };
        let serial = snapshot.as_ref().map_or(0, |(s, _, _)| s.serial);
        let prefix = self.namespace(serial);
        let names = self
            .client
            .list(&prefix)
            .map_err(|e| self.fail("list the journal of", e))?;
        let mut bytes = Vec::new();
        let mut sealed = false;
        for (seq, name) in names.iter().enumerate() {
            let expected = self.segment(serial, seq as u64);
            if *name != expected || sealed {
                let what = if sealed {
                    "after the seal"
                } else {
                    "out of sequence"
                };
                return Err(StateError::corrupt(
                    &self.url,
                    None,
                    format!("journal segment {name} is {what} (expected {expected}); a segment is missing or foreign: `nivis state repair --dry-run` shows what a repair would keep and lose"),
                )
                .into());
            }
            let Some(obj) = self
                .client
                .get(name)
                .map_err(|e| self.fail("read the journal of", e))?
            else {
                return Err(LoadError::Vanished(name.clone()));
            };
            if obj.body == SEAL {
                sealed = true;
                continue;
            }
            bytes.extend(self.open_body(name, obj.body)?);
        }
        let exists = snapshot.is_some() || !names.is_empty();
        let (state, etag, snapshot_len) = match snapshot {
            Some((s, etag, len)) => (Some(s), Some(etag), len),
            None => (None, None, 0),
        };
        let replayed = journal::replay(Path::new(&format!("{}.journal", self.url)), state, &bytes)
            .map_err(StateError::from)?;
        Ok(Loaded {
            state: replayed.state,
            pos: Position {
                etag,
                snapshot_len,
                next_seq: names.len() as u64,
                journal_bytes: bytes.len() as u64,
                sealed,
            },
            exists,
        })
    }

    /// Whether segment `name` holds exactly `line` (to settle a retried create).
    pub(super) fn holds(&self, name: &str, line: &[u8]) -> bool {
        match self.client.get(name) {
            Ok(Some(obj)) if obj.body == SEAL => line == SEAL,
            Ok(Some(obj)) => self.open_body(name, obj.body).is_ok_and(|b| b == line),
            _ => false,
        }
    }

    /// Creates segment `name` holding `line`; a conflict means someone else wrote it.
    pub(super) fn create(&self, name: &str, line: &[u8]) -> Result<(), StateError> {
        let body = if line == SEAL {
            SEAL.to_vec()
        } else {
            self.seal_body(name, line)
        };
        match self.client.put(name, &body, Condition::Absent) {
            Ok(_) => Ok(()),
            Err(S3Error::PreconditionFailed { attempts, .. })
                if attempts > 1 && self.holds(name, line) =>
            {
                Ok(())
            }
            Err(S3Error::PreconditionFailed { .. }) => Err(RemoteError::Conflict {
                state: self.url.clone(),
                detail: format!("journal segment {name} was written by someone else"),
            }
            .into()),
            Err(e) => Err(self.fail("record results in", e)),
        }
    }

    /// Seals namespace `serial` at `seq`, then replaces the snapshot (ETag `etag`) with
    /// `state`. Returns the new ETag and the snapshot's size.
    pub(super) fn replace_snapshot(
        &self,
        serial: u64,
        seq: u64,
        etag: Option<&str>,
        state: &StateFile,
    ) -> Result<(String, u64), StateError> {
        self.create(&self.segment(serial, seq), SEAL)?;
        let mut plain = serde_json::to_vec(state).expect("state serialises");
        plain.push(b'\n');
        let body = self.seal_body(&self.key, &plain);
        let condition = etag.map_or(Condition::Absent, Condition::Matches);
        match self.client.put(&self.key, &body, condition) {
            Ok(w) => Ok((w.etag, plain.len() as u64)),
            Err(S3Error::PreconditionFailed { attempts, .. }) if attempts > 1 => {
                match self.client.get(&self.key) {
                    Ok(Some(obj))
                        if self
                            .open_body(&self.key, obj.body.clone())
                            .is_ok_and(|b| b == plain) =>
                    {
                        Ok((obj.etag, plain.len() as u64))
                    }
                    _ => Err(self.snapshot_conflict()),
                }
            }
            Err(S3Error::PreconditionFailed { .. }) => Err(self.snapshot_conflict()),
            Err(e) => Err(self.fail("write the snapshot of", e)),
        }
    }

    /// Copies the snapshot object as it is to `KEY.backup` (its bytes, sealed as they are, so
    /// copying it back over `KEY` restores it). No snapshot yet: nothing to keep.
    pub(super) fn keep_backup(&self) -> Result<(), StateError> {
        let backup = crate::state::backup::backup_name(&self.key);
        match self.client.get(&self.key) {
            Ok(Some(obj)) => self
                .client
                .put(&backup, &obj.body, Condition::Always)
                .map(|_| ())
                .map_err(|e| self.fail("write the backup of", e)),
            Ok(None) => Ok(()),
            Err(e) => Err(self.fail("read for its backup the snapshot of", e)),
        }
    }

    /// Which objects of the state this run holds vanished from the bucket (a lifecycle rule,
    /// a mistaken `aws s3 rm`), in words: the snapshot it read or wrote (if `snapshot`), the
    /// journal namespace `serial` it wrote `segments` segments to (if given; fewer there: some
    /// vanished). One LIST. Empty: all there.
    pub(super) fn vanished(
        &self,
        snapshot: bool,
        journal: Option<(u64, u64)>,
    ) -> Result<Vec<String>, StateError> {
        let names = self
            .client
            .list(&self.key)
            .map_err(|e| self.fail("list the objects of", e))?;
        let mut gone = Vec::new();
        if snapshot && !names.contains(&self.key) {
            gone.push(format!("the snapshot {}", self.key));
        }
        if let Some((serial, segments)) = journal {
            let ns = self.namespace(serial);
            let found = names.iter().filter(|n| n.starts_with(&ns)).count() as u64;
            if found < segments {
                gone.push(format!("the journal {ns}"));
            }
        }
        Ok(gone)
    }

    /// The backup `KEY.backup` (opened, parsed) and its URL; `None`: there is none.
    pub(super) fn read_backup(&self) -> Result<Option<(StateFile, String)>, StateError> {
        let name = crate::state::backup::backup_name(&self.key);
        let url = format!("{}.backup", self.url);
        let Some(object) = self
            .client
            .get(&name)
            .map_err(|e| self.fail("read the backup of", e))?
        else {
            return Ok(None);
        };
        let plain = self.open_body(&name, object.body)?;
        Ok(Some((parse_snapshot(Path::new(&url), &plain)?, url)))
    }

    /// What shows that a state existed under this key although its snapshot and journal are
    /// gone (see `state::lost`): the backup `KEY.backup`, journal segments of any serial, audit
    /// records `KEY.audit/` of runs with a serial. One LIST, and a GET of the backup and of the
    /// last audit record when they exist. `None`: nothing, a new state.
    pub(super) fn lost_evidence(&self) -> Result<Option<LostState>, StateError> {
        let names = self
            .client
            .list(&self.key)
            .map_err(|e| self.fail("list the objects of", e))?;
        let mut found = Vec::new();
        let backup = crate::state::backup::backup_name(&self.key);
        let mut restore = None;
        if names.contains(&backup) {
            let body = self
                .client
                .get(&backup)
                .map_err(|e| self.fail("read the backup of", e))?;
            let serial = body
                .and_then(|o| self.open_body(&backup, o.body).ok())
                .and_then(|b| crate::state::snapshot::serial_of(&b))
                .unwrap_or(0);
            found.push((
                format!("the backup {}.backup (serial {serial})", self.url),
                serial,
            ));
            restore = Some(format!("aws s3 cp {0}.backup {0}", self.url));
        }
        let journal = format!("{}.journal/", self.key);
        let segments: Vec<u64> = names
            .iter()
            .filter_map(|n| n.strip_prefix(&journal))
            .filter_map(|rest| rest.split('/').next()?.parse().ok())
            .collect();
        if let Some(serial) = segments.iter().copied().max() {
            found.push((
                format!(
                    "{} journal segment(s) under {}.journal/, up to serial {serial}",
                    segments.len(),
                    self.url
                ),
                serial,
            ));
        }
        let audit = format!("{}.audit/", self.key);
        let records: Vec<&String> = names.iter().filter(|n| n.starts_with(&audit)).collect();
        // From the last back to one that names a serial (a refused run's record names none).
        for name in records.iter().rev() {
            let record = self
                .client
                .get(name)
                .map_err(|e| self.fail("read the audit log of", e))?
                .and_then(|o| serde_json::from_slice::<Record>(&o.body).ok());
            if let Some(serial) = record.and_then(|r| lost::highest_serial(&[r])) {
                found.push((
                    format!(
                        "{} audit record(s) under {}.audit/, the last with a serial of a run at \
                         serial {serial}",
                        records.len(),
                        self.url
                    ),
                    serial,
                ));
                break;
            }
        }
        Ok(LostState::from_evidence(self.url.clone(), found, restore))
    }

    pub(super) fn snapshot_conflict(&self) -> StateError {
        RemoteError::Conflict {
            state: self.url.clone(),
            detail: "the snapshot is not the one this run read".into(),
        }
        .into()
    }

    /// Deletes every journal namespace but `serial`'s (after a conversion, the older ones hold
    /// objects in the old form). Unlike [`delete_namespace`](Self::delete_namespace) a failure
    /// is an error: a leftover may hold secrets in plain text.
    pub(super) fn delete_other_namespaces(&self, serial: u64) -> Result<usize, StateError> {
        let keep = self.namespace(serial);
        let names = self
            .client
            .list(&format!("{}.journal/", self.key))
            .map_err(|e| self.fail("list the journal of", e))?;
        let mut deleted = 0;
        for name in names.iter().filter(|n| !n.starts_with(&keep)) {
            self.client
                .delete(name, Condition::Always)
                .map_err(|e| self.fail(&format!("delete the old segment {name} of"), e))?;
            deleted += 1;
        }
        Ok(deleted)
    }

    /// Deletes namespace `serial` (best effort: leftovers are only garbage).
    pub(super) fn delete_namespace(&self, serial: u64) {
        let prefix = self.namespace(serial);
        match self.client.list(&prefix) {
            Ok(names) => {
                for name in names {
                    if let Err(e) = self.client.delete(&name, Condition::Always) {
                        log::info!("could not delete the old journal segment {name}: {e}");
                        return;
                    }
                }
            }
            Err(e) => log::info!("could not list the old journal {prefix}: {e}"),
        }
    }
}

pub(super) enum LoadError {
    Vanished(String),
    State(StateError),
}

impl From<StateError> for LoadError {
    fn from(e: StateError) -> LoadError {
        LoadError::State(e)
    }
}

pub(super) struct Loaded {
    pub(super) state: StateFile,
    pub(super) pos: Position,
    /// Whether any object of the state exists.
    pub(super) exists: bool,
}

/// Where the remote state stands: the snapshot read or written last, and the journal after it.
#[derive(Debug, Default)]
pub(super) struct Position {
    /// The snapshot's ETag (`None`: no snapshot object yet).
    pub(super) etag: Option<String>,
    pub(super) snapshot_len: u64,
    /// The next journal segment's number.
    pub(super) next_seq: u64,
    pub(super) journal_bytes: u64,
    /// The journal ends with a seal (a compaction stopped after sealing).
    pub(super) sealed: bool,
}

impl Position {
    /// Right after a snapshot was written.
    pub(super) fn after_snapshot(etag: String, snapshot_len: u64) -> Position {
        Position {
            etag: Some(etag),
            snapshot_len,
            ..Position::default()
        }
    }

    /// Whether the journal holds anything to fold into a new snapshot.
    pub(super) fn journal_pending(&self) -> bool {
        self.journal_bytes > 0 || self.sealed
    }
}
