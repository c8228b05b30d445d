//! The audit trail kept with a state: one record per mutating run, hash-chained, so a record
//! deleted, edited or reordered afterwards is found by [`verify`].
//!
//! Owns the record's format (JSON, format version [`FORMAT`]), the chain (each record holds
//! its own hash and the previous record's), checking a chain, and the local log: `P.audit`
//! beside the state file `P`, JSON lines, 0600 under the file rule (`privfile`), appended under
//! an exclusive `flock` of its own. The S3 log (one object per record) is `s3::audit`. Not:
//! what a run did (the CLI fills the [`Entry`]), printing, or the state's own files.
//!
//! A record holds no value of any attribute or variable (addresses and actions only), so no
//! secret can enter it.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};
use sha2::{Digest, Sha256};

use super::backend::Backend;
use super::file::StatePaths;
use super::StateError;

/// The record format's major version.
pub(crate) const FORMAT: u32 = 1;

/// What a run did, as the CLI saw it: the part of a record the chain does not decide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Entry {
    /// When the run ended, RFC 3339 UTC.
    pub(crate) time: String,
    /// `$USER` (else `$LOGNAME`), as the machine says.
    pub(crate) user: String,
    /// The effective uid.
    pub(crate) uid: u32,
    /// The host name, as the machine says.
    pub(crate) host: String,
    /// The CI job, `VARIABLE=value` of the first standard variable set (`CI_JOB_ID`, ...).
    pub(crate) ci_job: Option<String>,
    /// The verb (`nivis apply`, `nivis state rm`, ...); never its arguments (a `--var` may
    /// hold a secret).
    pub(crate) command: String,
    /// The environment (`--env`).
    pub(crate) env: String,
    /// `apply FILE`: the saved plan's sha256.
    pub(crate) saved_plan_sha256: Option<String>,
    /// sha256 of the plan the run showed: its rows (phase, address, action) one per line; a run
    /// that showed none first (`--auto-approve`): of the operations it started.
    pub(crate) plan_digest: Option<String>,
    /// The state serial before the run (`None`: no state yet).
    pub(crate) serial_before: Option<u64>,
    /// The state serial after the run (`None`: the run wrote nothing).
    pub(crate) serial_after: Option<u64>,
    /// What changed, in order: addresses and actions only.
    pub(crate) changes: Vec<Change>,
    /// Mandatory policy rules overridden (`--override RULE --reason TEXT`), each once, with
    /// the reason given.
    pub(crate) policy_overrides: Vec<PolicyOverride>,
    /// `ok`, `failed`, `interrupted`.
    pub(crate) result: String,
}

/// One changed address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The resource address, as the plan shows it.
    pub(crate) address: String,
    /// What was done: the plan's action word (`create`, `update`, `delete`, ...).
    pub(crate) action: String,
}

/// A policy check overridden, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PolicyOverride {
    /// The rule's name, as `--override` named it.
    pub(crate) rule: String,
    /// The `--reason` given for overriding it.
    pub(crate) reason: String,
}

/// A record as stored: the entry, its place in the chain and its hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The record format version ([`FORMAT`]).
    pub(crate) format: u32,
    /// 1 for the first record, one more for each after it.
    pub(crate) seq: u64,
    /// The previous record's `hash` (none for the first).
    pub(crate) prev: Option<String>,
    #[serde(flatten)]
    /// The run this record describes.
    pub(crate) entry: Entry,
    /// sha256 (hex) of this record's bytes without this field and `mac` (see [`hash_of`]).
    pub(crate) hash: String,
    /// HMAC-SHA256 (hex) of `hash`, keyed with the state's audit key (`StateKey::Audit`, kept
    /// only in the state): a log rewritten with recomputed hashes, or a record appended by
    /// someone who cannot read the state, does not carry it. Absent in records written before
    /// the state had a key (DESIGN §93).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mac: Option<String>,
}

impl Record {
    /// The record following `last` (none: the first), MAC'd with `key` (the state's audit
    /// key, when it has one).
    pub(crate) fn next(last: Option<&Record>, entry: Entry, key: Option<&[u8; 32]>) -> Record {
        let mut record = Record {
            format: FORMAT,
            seq: last.map_or(1, |l| l.seq + 1),
            prev: last.map(|l| l.hash.clone()),
            entry,
            hash: String::new(),
            mac: None,
        };
        let value = serde_json::to_value(&record).expect("a record serializes");
        record.hash = hash_of(&value).expect("a record is an object");
        record.mac = key.map(|k| mac_of(k, &record.hash));
        record
    }

    /// The stored bytes: one JSON line, without the newline.
    pub(crate) fn to_line(&self) -> String {
        serde_json::to_string(self).expect("a record serializes")
    }
}

/// The hash a stored record must hold: sha256 of its JSON bytes with its `hash` and `mac`
/// fields left out (fields in their stored order, so the bytes are the ones written).
pub fn hash_of(stored: &Json) -> Option<String> {
    let mut fields: Map<String, Json> = stored.as_object()?.clone();
    fields.shift_remove("hash");
    fields.shift_remove("mac");
    let bytes = serde_json::to_vec(&Json::Object(fields)).ok()?;
    Some(hex::encode(Sha256::digest(&bytes)))
}

/// One stored record as read back: where it is (`line N` or an object key) and its bytes.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    /// Where the record is: `line N` of the local log, or the object key of a remote one.
    pub(crate) place: String,
    /// The record's stored bytes, exactly as read.
    pub(crate) bytes: Vec<u8>,
    /// The sequence number the place says (an object's key), if it says one.
    pub(crate) named_seq: Option<u64>,
}

impl Stored {
    /// The record, if the bytes are one.
    pub(crate) fn record(&self) -> Option<Record> {
        serde_json::from_slice(&self.bytes).ok()
    }
}

/// The first place the chain is broken, in words naming the record; `None`: intact.
pub(crate) fn verify(stored: &[Stored]) -> Option<String> {
    let mut last: Option<Record> = None;
    for s in stored {
        let expected = last.as_ref().map_or(1, |l| l.seq + 1);
        let Ok(value) = serde_json::from_slice::<Json>(&s.bytes) else {
            return Some(format!(
                "{}: not a record (edited or damaged): the record {expected} expected there",
                s.place
            ));
        };
        let Some(record) = s.record() else {
            return Some(format!(
                "{}: not a record of a known format (edited): the record {expected} expected there",
                s.place
            ));
        };
        let seq = record.seq;
        if hash_of(&value).as_deref() != Some(record.hash.as_str()) {
            return Some(format!(
                "record {seq} ({}) was edited: its content does not match its hash",
                s.place
            ));
        }
        if s.named_seq.is_some_and(|n| n != seq) {
            return Some(format!(
                "record {seq} is stored as {}: renamed or moved",
                s.place
            ));
        }
        if seq > expected {
            return Some(format!(
                "record {expected} is missing (deleted or moved): record {seq} ({}) follows record {}",
                s.place,
                expected - 1
            ));
        }
        if seq < expected {
            return Some(format!(
                "record {seq} ({}) is out of order: record {expected} was expected (reordered or copied)",
                s.place
            ));
        }
        if record.prev != last.as_ref().map(|l| l.hash.clone()) {
            return Some(format!(
                "record {seq} ({}) does not follow record {}: its predecessor was replaced",
                s.place,
                expected - 1
            ));
        }
        last = Some(record);
    }
    None
}

/// HMAC-SHA256 (hex) of a record's `hash` under the audit key `key`.
fn mac_of(key: &[u8; 32], hash: &str) -> String {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(hash.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// What the state says about its log: its audit key and its serial (`None`: no state yet).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Anchor {
    /// The state's audit key, if it has one yet.
    pub(crate) key: Option<[u8; 32]>,
    /// The state's serial, if a state exists.
    pub(crate) serial: Option<u64>,
}

impl Anchor {
    /// The anchor of `state` (`exists`: whether a state was ever written).
    pub(crate) fn of(state: &super::StateFile, exists: bool) -> Anchor {
        Anchor {
            key: state.key(super::StateKey::Audit),
            serial: exists.then_some(state.serial),
        }
    }
}

/// [`verify`], then the log against the state both ways: every record after the first MAC'd
/// one carries a MAC made with the state's key (a forged append or a log rewritten with
/// recomputed hashes does not), and the last record leaves the state at the serial it is at
/// (a deleted tail, or a deleted log, leaves the state ahead of it). `None`: consistent.
pub(crate) fn verify_with_state(stored: &[Stored], anchor: &Anchor) -> Option<String> {
    if let Some(problem) = verify(stored) {
        return Some(problem);
    }
    let records: Vec<(Record, &str)> = stored
        .iter()
        .filter_map(|s| s.record().map(|r| (r, s.place.as_str())))
        .collect();
    let mut signed: Option<u64> = None;
    for (record, place) in &records {
        match (&record.mac, &anchor.key) {
            (Some(mac), Some(key)) if *mac == mac_of(key, &record.hash) => {
                signed.get_or_insert(record.seq);
            }
            (Some(_), Some(_)) => {
                return Some(format!(
                    "record {} ({place}) is not signed with this state's audit key: it was \
                     forged, or the log rewritten with recomputed hashes",
                    record.seq
                ))
            }
            (Some(_), None) => {
                return Some(format!(
                    "record {} ({place}) is signed, but the state holds no audit key: the state \
                     was replaced by one this log does not belong to",
                    record.seq
                ))
            }
            (None, _) if signed.is_some() => {
                return Some(format!(
                    "record {} ({place}) is not signed, though record {} before it is: it was \
                     appended by someone who cannot read the state",
                    record.seq,
                    signed.unwrap_or_default()
                ))
            }
            (None, _) => {}
        }
    }
    let serial = anchor.serial?;
    if anchor.key.is_some() && signed.is_none() {
        return Some(match records.len() {
            0 => format!(
                "the log holds no record, but the state (serial {serial}) was written by runs \
                 that keep one: it was deleted"
            ),
            _ => "no record is signed with the state's audit key, which every run since the \
                  state has had one signs with: the log was replaced or rewritten"
                .to_string(),
        });
    }
    let last = records
        .iter()
        .rev()
        .find_map(|(r, _)| r.entry.serial_after.map(|s| (r.seq, s)));
    match last {
        Some((seq, after)) if after < serial => Some(format!(
            "the state is at serial {serial}, but the last record that changed it (record \
             {seq}) leaves it at {after}: the records after it were deleted (or a run that \
             changed the state was killed before it could write its record)"
        )),
        Some((seq, after)) if after > serial => Some(format!(
            "record {seq} leaves the state at serial {after}, but the state is at {serial}: the \
             state was rolled back, or the record forged"
        )),
        _ => None,
    }
}

/// The audit key of the state `backend` names, if it has one: read from a local snapshot
/// without building the state (its other fields are skipped), or from the S3 state.
pub(crate) fn key_of(backend: &Backend) -> Option<[u8; 32]> {
    match backend {
        Backend::Local { path, .. } => {
            let paths = StatePaths::resolve(path).ok()?;
            let file = crate::privfile::open_read(&paths.snapshot, "the state").ok()?;
            super::keys::key_in_snapshot(std::io::BufReader::new(file), super::StateKey::Audit)
        }
        Backend::S3 { .. } => backend.read_only().ok()?.key(super::StateKey::Audit),
    }
}

/// Why the audit log cannot be opened, read or appended to.
#[derive(Debug)]
pub(crate) enum AuditError {
    /// The state's place cannot be resolved, or its S3 backend cannot be used.
    State(StateError),
    /// A local file operation failed.
    Io {
        /// What was being done: `read`, `lock`, `append to`, ...
        what: &'static str,
        /// The local log (or its directory).
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The local log breaks the private file rule (`privfile`): the message says how.
    Unsafe {
        /// The rule's message, naming the file.
        message: String,
    },
    /// An S3 request on the remote log failed.
    S3 {
        /// What was being done: `list`, `read`, `append to`.
        what: &'static str,
        /// The log, `s3://bucket/KEY.audit/`.
        log: String,
        /// Why.
        source: super::s3::S3Error,
    },
    /// A record object was listed but gone when read.
    Vanished {
        /// The object's key.
        name: String,
    },
    /// The last record object is not a record (so the next cannot chain onto it).
    NotARecord {
        /// The object's key.
        name: String,
        /// The parser's complaint.
        source: serde_json::Error,
    },
    /// Other runs kept writing the next record first, through every try.
    Contended {
        /// The log, `s3://bucket/KEY.audit/`.
        log: String,
    },
}

impl std::fmt::Display for AuditError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuditError::State(e) => e.fmt(f),
            AuditError::Io { what, path, source } => {
                write!(f, "cannot {what} {}: {source}", path.display())
            }
            AuditError::Unsafe { message } => f.write_str(message),
            AuditError::S3 { what, log, source } => {
                write!(f, "cannot {what} the audit log {log}: {source}")
            }
            AuditError::Vanished { name } => write!(f, "{name} vanished while it was read"),
            AuditError::NotARecord { name, source } => write!(
                f,
                "the last record {name} of the audit log is not a record ({source}): run \
                 `nivis log --verify` to see what was changed"
            ),
            AuditError::Contended { log } => write!(
                f,
                "cannot append to the audit log {log}: other runs kept writing the next record \
                 first"
            ),
        }
    }
}

impl std::error::Error for AuditError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AuditError::State(e) => Some(e),
            AuditError::Io { source, .. } => Some(source),
            AuditError::S3 { source, .. } => Some(source),
            AuditError::NotARecord { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<StateError> for AuditError {
    fn from(e: StateError) -> AuditError {
        AuditError::State(e)
    }
}

/// The audit log of the state `backend` names.
pub(crate) enum Log {
    /// `P.audit` beside a local state.
    Local(PathBuf),
    /// Objects under `KEY.audit/` beside an S3 state.
    S3(Box<super::s3::audit::ObjectLog>),
}

impl Log {
    /// The log kept with `backend`'s state.
    pub(crate) fn of(backend: &Backend) -> Result<Log, AuditError> {
        match backend {
            Backend::Local { path, .. } => {
                let paths = StatePaths::resolve(path)?;
                Ok(Log::Local(local_path(&paths.snapshot)))
            }
            Backend::S3 { backend, .. } => Ok(Log::S3(Box::new(super::s3::audit::ObjectLog::new(
                backend,
            )?))),
        }
    }

    /// Where the log is, for messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Log::Local(path) => path.display().to_string(),
            Log::S3(log) => log.describe(),
        }
    }

    /// Appends `entry` as the next record, MAC'd with `key` (the state's audit key, when it
    /// has one); returns it.
    pub(crate) fn append(
        &self,
        entry: Entry,
        key: Option<&[u8; 32]>,
    ) -> Result<Record, AuditError> {
        match self {
            Log::Local(path) => append_local(path, entry, key),
            Log::S3(log) => log.append(entry, key),
        }
    }

    /// Every stored record, in order.
    pub(crate) fn read(&self) -> Result<Vec<Stored>, AuditError> {
        match self {
            Log::Local(path) => read_local(path),
            Log::S3(log) => log.read(),
        }
    }
}

/// The local log of the snapshot `P`: `P.audit`.
pub(crate) fn local_path(snapshot: &Path) -> PathBuf {
    PathBuf::from(format!("{}.audit", snapshot.display()))
}

fn open_local(path: &Path, create: bool) -> Result<std::fs::File, crate::privfile::OpenError> {
    let mut options = OpenOptions::new();
    options.read(true);
    if create {
        options.append(true).create(true).mode(0o600);
    }
    crate::privfile::open(path, &mut options, "the audit log")
}

fn append_local(path: &Path, entry: Entry, key: Option<&[u8; 32]>) -> Result<Record, AuditError> {
    let fail = |what: &'static str, source: std::io::Error| AuditError::Io {
        what,
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // A run that failed before opening the state may come first: private, as the state's.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| fail("create the directory of", e))?;
    }
    let mut file = open_local(path, true).map_err(|e| AuditError::Unsafe {
        message: e.message(path),
    })?;
    // Two runs ending at once each chain onto the other's record, never onto the same one.
    fs2::FileExt::lock_exclusive(&file).map_err(|e| fail("lock", e))?;
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|e| fail("read", e))?;
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .and_then(|l| serde_json::from_str::<Record>(l).ok());
    let record = Record::next(last.as_ref(), entry, key);
    let mut line = record.to_line();
    line.push('\n');
    file.write_all(line.as_bytes())
        .and_then(|()| file.sync_data())
        .map_err(|e| fail("append to", e))?;
    Ok(record)
}

pub(crate) fn read_local(path: &Path) -> Result<Vec<Stored>, AuditError> {
    let mut file = match open_local(path, false) {
        Ok(f) => f,
        Err(crate::privfile::OpenError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Vec::new())
        }
        Err(e) => {
            return Err(AuditError::Unsafe {
                message: e.message(path),
            })
        }
    };
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|source| AuditError::Io {
            what: "read",
            path: path.to_path_buf(),
            source,
        })?;
    Ok(text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| Stored {
            place: format!("{} line {}", path.display(), i + 1),
            bytes: l.as_bytes().to_vec(),
            named_seq: None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(user: &str) -> Entry {
        Entry {
            time: "2026-11-25T00:00:00Z".into(),
            user: user.into(),
            uid: 1000,
            host: "h".into(),
            ci_job: None,
            command: "nivis apply".into(),
            env: "default".into(),
            saved_plan_sha256: None,
            plan_digest: None,
            serial_before: Some(1),
            serial_after: Some(2),
            changes: vec![Change {
                address: "null.null_resource.a".into(),
                action: "create".into(),
            }],
            policy_overrides: Vec::new(),
            result: "ok".into(),
        }
    }

    fn chain(n: usize) -> Vec<Stored> {
        let mut last: Option<Record> = None;
        let mut out = Vec::new();
        for i in 0..n {
            let r = Record::next(last.as_ref(), entry(&format!("u{i}")), None);
            out.push(Stored {
                place: format!("line {}", i + 1),
                bytes: r.to_line().into_bytes(),
                named_seq: None,
            });
            last = Some(r);
        }
        out
    }

    #[test]
    fn an_intact_chain_verifies_and_each_break_names_the_record() {
        assert_eq!(verify(&chain(4)), None);
        let mut deleted = chain(4);
        deleted.remove(1);
        let e = verify(&deleted).unwrap();
        assert!(e.contains("record 2 is missing (deleted or moved)"), "{e}");
        let mut edited = chain(4);
        edited[2].bytes = String::from_utf8(edited[2].bytes.clone())
            .unwrap()
            .replace("u2", "mallory")
            .into_bytes();
        let e = verify(&edited).unwrap();
        assert!(e.contains("record 3 (line 3) was edited"), "{e}");
        let mut swapped = chain(4);
        swapped.swap(1, 2);
        let e = verify(&swapped).unwrap();
        assert!(e.contains("record 2 is missing"), "{e}");
        // A record rewritten whole, with a hash of its own: the next one no longer follows.
        let mut forged = chain(4);
        let mut r = forged[1].record().unwrap();
        r.entry.user = "mallory".into();
        let first = forged[0].record().unwrap();
        let r = Record::next(Some(&first), r.entry, None);
        forged[1].bytes = r.to_line().into_bytes();
        let e = verify(&forged).unwrap();
        assert!(
            e.contains("record 3 (line 3) does not follow record 2"),
            "{e}"
        );
        let mut garbage = chain(2);
        garbage[1].bytes = b"{not json".to_vec();
        assert!(verify(&garbage).unwrap().contains("line 2: not a record"));
    }

    #[test]
    fn the_local_log_appends_a_chain_of_private_lines() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json.audit");
        append_local(&path, entry("a"), None).unwrap();
        let second = append_local(&path, entry("b"), None).unwrap();
        assert_eq!(second.seq, 2);
        let stored = read_local(&path).unwrap();
        assert_eq!(stored.len(), 2);
        assert_eq!(verify(&stored), None);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
