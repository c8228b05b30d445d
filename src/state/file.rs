//! The durable file store: snapshot `P`, append-only journal `P.journal`, lock `P.lock`.
//!
//! The format, the durability promise and the compaction rule are described in the module doc of
//! [`crate::state`]; this file implements them, with the journal's record format and replay rules
//! in `journal.rs` and the lock in `lock.rs`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::error::StateError;
use super::journal::{self, ReplayError};
use super::lock::{self, FileLock, ForceUnlock, LockHolder};
use super::model::{Change, StateFile, SCHEMA_VERSION};
use super::StateStore;

/// The state path used when none is given.
pub const DEFAULT_PATH: &str = "nivis.state.json";

/// The journal is compacted after a commit once it reaches this size or the snapshot's size,
/// whichever is larger.
pub const COMPACT_MIN_JOURNAL_BYTES: u64 = 4 << 20;

/// A state kept on disk: snapshot plus journal, locked for this value's whole life.
///
/// Dropping it releases the lock without compacting; [`close`](Store::close) compacts first.
#[derive(Debug)]
pub struct Store {
    paths: Paths,
    state: StateFile,
    /// Opened for append: every write lands at the end.
    journal: File,
    /// Bytes of valid records in the journal.
    journal_len: u64,
    /// Journal size at which a commit triggers compaction: the larger of
    /// [`COMPACT_MIN_JOURNAL_BYTES`] and the size of the snapshot last read or written.
    compact_at: u64,
    /// Why the last automatic compaction failed, if it did.
    compaction_error: Option<StateError>,
    /// Set when a write failed in a way that leaves the files uncertain; refuses further writes.
    poisoned: Option<String>,
    _lock: FileLock,
}

impl Store {
    /// Opens (or starts) the state at `path`, taking its lock for the life of the `Store`.
    ///
    /// If the lock is busy, retries until `wait` has passed (`None`: fail at once) and then fails
    /// with [`StateError::Locked`]. A missing state file is an empty state with a new lineage.
    /// The journal is replayed over the snapshot (a torn final line is dropped and truncated
    /// away) and, if it held anything, compacted; a failed compaction here is not fatal (see
    /// [`compaction_error`](Store::compaction_error)).
    pub fn open(
        path: impl AsRef<Path>,
        holder: LockHolder,
        wait: Option<Duration>,
    ) -> Result<Store, StateError> {
        let paths = Paths::new(path.as_ref());
        let lock = FileLock::acquire(&paths.lock, holder, wait)?;
        let (snapshot, snapshot_len) = read_snapshot(&paths.snapshot)?;
        let mut journal = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&paths.journal)
            .map_err(|e| StateError::io(&paths.journal, "open", e))?;
        lock::restrict_to_owner(&journal)
            .map_err(|e| StateError::io(&paths.journal, "chmod 0600", e))?;
        let mut bytes = Vec::new();
        journal
            .read_to_end(&mut bytes)
            .map_err(|e| StateError::io(&paths.journal, "read", e))?;
        let replayed = journal::replay(&paths.journal, snapshot, &bytes)?;
        if replayed.valid_len < bytes.len() as u64 {
            journal
                .set_len(replayed.valid_len)
                .and_then(|()| journal.sync_data())
                .map_err(|e| StateError::io(&paths.journal, "truncate the torn end of", e))?;
        }
        // Make the directory entries of a just-created journal and lock file durable.
        sync_parent(&paths.snapshot)?;
        let mut store = Store {
            paths,
            state: replayed.state,
            journal,
            journal_len: replayed.valid_len,
            compact_at: compaction_threshold(snapshot_len),
            compaction_error: None,
            poisoned: None,
            _lock: lock,
        };
        if store.journal_len > 0 {
            store.compact_or_record();
        }
        Ok(store)
    }

    /// Reads the state at `path` without locking and without writing anything, for commands
    /// such as `state list`.
    ///
    /// The journal is replayed in memory; a torn final line (a crash, or a writer in the middle of
    /// a commit) is ignored. While another process writes, the result may miss its latest
    /// commits, but it is always a state that existed.
    pub fn read_only(path: impl AsRef<Path>) -> Result<StateFile, StateError> {
        let paths = Paths::new(path.as_ref());
        let mut attempts = 0;
        loop {
            let (snapshot, _) = read_snapshot(&paths.snapshot)?;
            let bytes = match fs::read(&paths.journal) {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(StateError::io(&paths.journal, "read", e)),
            };
            match journal::replay(&paths.journal, snapshot, &bytes) {
                Ok(replayed) => return Ok(replayed.state),
                // A writer compacted between our two reads: read both again.
                Err(ReplayError::Ahead(_)) if attempts < 3 => attempts += 1,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Breaks the lock of the state at `path`, for a holder that is gone.
    ///
    /// `flock` locks die with their process, so on a local filesystem a stale lock cannot exist
    /// and this only reports [`ForceUnlock::NotLocked`]. On a network filesystem a lock can
    /// outlive a crashed client; then, if the lock cannot be taken, the lock file is removed so
    /// the next opener creates (and locks) a new one. If the holder is in fact alive, two writers
    /// can then run at once: callers must make sure it is gone.
    pub fn force_unlock(path: impl AsRef<Path>) -> Result<ForceUnlock, StateError> {
        lock::force_unlock(&Paths::new(path.as_ref()).lock)
    }

    /// The state path `P`.
    pub fn path(&self) -> &Path {
        &self.paths.snapshot
    }

    /// The current state, including every committed change.
    pub fn state(&self) -> &StateFile {
        &self.state
    }

    /// Durably records `changes` (in order, all or nothing), then applies them in memory.
    ///
    /// Writes one journal line and calls `fdatasync` once, whatever the batch size: batch the
    /// results that are ready together. After `Ok`, the changes survive kill -9 and power loss.
    /// After `Err`, they may or may not have been recorded, and the store refuses further writes
    /// ([`StateError::Poisoned`]); reopen it to learn the outcome. May compact afterwards (see the
    /// module doc); a failed compaction does not fail the commit.
    pub fn commit(&mut self, changes: &[Change]) -> Result<(), StateError> {
        self.check_poisoned()?;
        if changes.is_empty() {
            return Ok(());
        }
        let line =
            journal::encode(&self.state.lineage, self.state.serial, changes).map_err(|e| {
                StateError::io(
                    &self.paths.journal,
                    "encode a record for",
                    io::Error::other(e),
                )
            })?;
        let written = (&self.journal)
            .write_all(&line)
            .and_then(|()| self.journal.sync_data());
        if let Err(e) = written {
            // Take back any part of the record that reached the file, so that no torn record
            // ends up in the middle of the journal. After a failed write or sync the kernel's view
            // of the file cannot be trusted, so stop writing.
            let _ = self.journal.set_len(self.journal_len);
            let err = StateError::io(&self.paths.journal, "append to", e);
            self.poisoned = Some(err.to_string());
            return Err(err);
        }
        self.journal_len += line.len() as u64;
        for change in changes {
            self.state.apply(change);
        }
        if self.journal_len >= self.compact_at {
            self.compact_or_record();
        }
        Ok(())
    }

    /// Writes the whole state as a new snapshot and empties the journal; `serial` goes up by one.
    ///
    /// Crash-safe at every step: the snapshot is replaced by rename, and until the journal is
    /// emptied its records carry the old serial and are skipped on replay.
    pub fn compact(&mut self) -> Result<(), StateError> {
        self.check_poisoned()?;
        self.state.serial += 1;
        let snapshot_len = match write_snapshot(&self.paths, &self.state) {
            Ok(len) => len,
            Err(e) => {
                self.state.serial -= 1;
                return Err(e);
            }
        };
        // The new snapshot is in place. The journal must not be emptied before the rename is
        // durable; if a sync fails we cannot know what a crash would leave, so stop writing.
        let finished = sync_parent(&self.paths.snapshot).and_then(|()| {
            self.journal
                .set_len(0)
                .and_then(|()| self.journal.sync_data())
                .map_err(|e| StateError::io(&self.paths.journal, "empty", e))
        });
        if let Err(e) = finished {
            self.poisoned = Some(e.to_string());
            return Err(e);
        }
        self.journal_len = 0;
        self.compact_at = compaction_threshold(snapshot_len);
        Ok(())
    }

    /// Compacts (if the journal holds anything) and releases the lock.
    pub fn close(mut self) -> Result<(), StateError> {
        if self.journal_len > 0 || self.poisoned.is_some() {
            self.compact()?;
        }
        Ok(())
    }

    /// Why the last automatic compaction (on open or after a commit) failed, if it did. Nothing
    /// committed is lost by such a failure; the journal just grows until a later one succeeds.
    pub fn compaction_error(&self) -> Option<&StateError> {
        self.compaction_error.as_ref()
    }

    fn compact_or_record(&mut self) {
        match self.compact() {
            Ok(()) => self.compaction_error = None,
            Err(e) => {
                // Back off: try again once the journal has doubled.
                self.compact_at = self.journal_len.saturating_mul(2).max(self.compact_at);
                self.compaction_error = Some(e);
            }
        }
    }

    fn check_poisoned(&self) -> Result<(), StateError> {
        match &self.poisoned {
            Some(cause) => Err(StateError::Poisoned {
                path: self.paths.snapshot.clone(),
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }
}

impl StateStore for Store {
    fn state(&self) -> &StateFile {
        Store::state(self)
    }

    fn commit(&mut self, changes: &[Change]) -> Result<(), StateError> {
        Store::commit(self, changes)
    }
}

fn compaction_threshold(snapshot_len: u64) -> u64 {
    snapshot_len.max(COMPACT_MIN_JOURNAL_BYTES)
}

/// The files of one state.
#[derive(Debug)]
pub(super) struct Paths {
    pub(super) snapshot: PathBuf,
    pub(super) journal: PathBuf,
    pub(super) lock: PathBuf,
    pub(super) tmp: PathBuf,
}

impl Paths {
    pub(super) fn new(path: &Path) -> Paths {
        let with_suffix = |suffix: &str| {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            PathBuf::from(name)
        };
        Paths {
            snapshot: path.to_path_buf(),
            journal: with_suffix(".journal"),
            lock: with_suffix(".lock"),
            tmp: with_suffix(".tmp"),
        }
    }
}

/// Reads the snapshot; `None` if there is none yet. Also returns its size.
fn read_snapshot(path: &Path) -> Result<(Option<StateFile>, u64), StateError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((None, 0)),
        Err(e) => return Err(StateError::io(path, "read", e)),
    };
    Ok((Some(parse_snapshot(path, &bytes)?), bytes.len() as u64))
}

/// Parses snapshot bytes read from `path` (a file, or a remote object's URL).
pub(super) fn parse_snapshot(path: &Path, bytes: &[u8]) -> Result<StateFile, StateError> {
    // Check the version before the shape, so a newer format says so instead of failing to parse.
    #[derive(Deserialize)]
    struct VersionProbe {
        schema_version: u64,
    }
    let corrupt = |e: serde_json::Error| StateError::corrupt(path, None, e.to_string());
    let probe: VersionProbe = serde_json::from_slice(bytes).map_err(corrupt)?;
    if probe.schema_version != u64::from(SCHEMA_VERSION) {
        return Err(StateError::UnsupportedVersion {
            path: path.to_path_buf(),
            found: probe.schema_version,
            supported: SCHEMA_VERSION,
        });
    }
    let state: StateFile = serde_json::from_slice(bytes).map_err(corrupt)?;
    if let Some((key, resource)) = state.resources.iter().find(|(k, r)| **k != r.id) {
        return Err(StateError::corrupt(
            path,
            None,
            format!("the resource under key {key:?} has id {:?}", resource.id),
        ));
    }
    Ok(state)
}

/// Writes `state` to `P.tmp`, syncs it and renames it over `P`; returns its size. On error `P`
/// is unchanged.
fn write_snapshot(paths: &Paths, state: &StateFile) -> Result<u64, StateError> {
    let tmp = &paths.tmp;
    match fs::remove_file(tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(StateError::io(tmp, "remove the leftover", e)),
    }
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(tmp)
        .map_err(|e| StateError::io(tmp, "create", e))?;
    let len = match write_json_synced(&file, state) {
        Ok(len) => len,
        Err(e) => {
            let _ = fs::remove_file(tmp);
            return Err(StateError::io(tmp, "write", e));
        }
    };
    if let Err(e) = fs::rename(tmp, &paths.snapshot) {
        let _ = fs::remove_file(tmp);
        return Err(StateError::io(&paths.snapshot, "replace", e));
    }
    Ok(len)
}

fn write_json_synced(file: &File, state: &StateFile) -> io::Result<u64> {
    let mut out = BufWriter::new(file);
    serde_json::to_writer_pretty(&mut out, state).map_err(io::Error::other)?;
    out.write_all(b"\n")?;
    out.flush()?;
    drop(out);
    file.sync_all()?;
    Ok(file.metadata()?.len())
}

/// Fsyncs the directory holding `path`, making renames and new entries in it durable.
fn sync_parent(path: &Path) -> Result<(), StateError> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StateError::io(dir, "sync the directory", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::conformance;
    use crate::state::testutil::{file_len, holder, journal_path, open, put, res, temp_state};
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Instant;

    #[test]
    fn file_store_conforms_and_persists() {
        let (_dir, path) = temp_state();
        let mut store = open(&path);
        conformance(&mut store);
        let expected = store.state().clone();
        drop(store);
        assert_eq!(open(&path).state().resources, expected.resources);
    }

    #[test]
    fn put_and_remove_replay_across_reopen() {
        let (_dir, path) = temp_state();
        let mut store = open(&path);
        store.commit(&[put("a", 1), put("b", 2)]).unwrap();
        store.commit(&[put("c", 3)]).unwrap();
        store
            .commit(&[Change::Remove("a".into()), put("b", 20)])
            .unwrap();
        let expected = store.state().clone();
        assert!(!path.exists(), "no snapshot before the first compaction");
        drop(store);
        assert!(file_len(&journal_path(&path)) > 0, "drop does not compact");

        let read = Store::read_only(&path).unwrap();
        assert_eq!(read, expected, "read_only replays the journal in memory");
        let store = open(&path);
        assert_eq!(store.state().resources, expected.resources);
        assert_eq!(store.state().lineage, expected.lineage);
        assert_eq!(store.state().ids().collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(store.state().get("b"), Some(&res("b", 20)));
    }

    #[test]
    fn serial_and_lineage_survive_reopen() {
        let (_dir, path) = temp_state();
        let mut store = open(&path);
        let lineage = store.state().lineage.clone();
        assert_eq!(store.state().serial, 0);
        store.commit(&[put("a", 1)]).unwrap();
        store.close().unwrap();

        let mut store = open(&path);
        assert_eq!(
            (store.state().serial, &store.state().lineage),
            (1, &lineage)
        );
        store.commit(&[put("b", 2)]).unwrap();
        drop(store);

        // The journal was not empty, so opening compacts: serial 2.
        let store = open(&path);
        assert_eq!(
            (store.state().serial, &store.state().lineage),
            (2, &lineage)
        );
        assert_eq!(store.state().len(), 2);
        store.close().unwrap();
        let store = open(&path);
        assert_eq!(
            store.state().serial,
            2,
            "closing with an empty journal writes nothing"
        );
        drop(store);
        assert_eq!(Store::read_only(&path).unwrap().lineage, lineage);
    }

    #[test]
    fn compaction_empties_the_journal_and_keeps_content() {
        let (_dir, path) = temp_state();
        let mut store = open(&path);
        for i in 0..50 {
            store.commit(&[put(&format!("r{i}"), i)]).unwrap();
        }
        store.commit(&[Change::Remove("r7".into())]).unwrap();
        let journal = journal_path(&path);
        assert!(file_len(&journal) > 0);
        let before = store.state().clone();
        store.compact().unwrap();
        assert_eq!(file_len(&journal), 0);
        assert_eq!(store.state().serial, before.serial + 1);
        assert_eq!(store.state().resources, before.resources);
        assert!(!Paths::new(&path).tmp.exists());
        drop(store);
        let on_disk: StateFile = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(on_disk.resources, before.resources);
        assert_eq!(open(&path).state().resources, before.resources);
    }

    #[test]
    fn journal_threshold_triggers_compaction() {
        let (_dir, path) = temp_state();
        let journal = journal_path(&path);
        let mut store = open(&path);
        store.commit(&[put("small", 1)]).unwrap();
        assert!(file_len(&journal) > 0 && !path.exists());

        let mut big = res("big", 2);
        big.attributes["blob"] = json!("x".repeat(COMPACT_MIN_JOURNAL_BYTES as usize));
        store.commit(&[Change::Put(big.clone())]).unwrap();
        assert!(store.compaction_error().is_none());
        assert_eq!(file_len(&journal), 0, "crossing the threshold compacts");
        assert_eq!(store.state().serial, 1);
        let snapshot_len = file_len(&path);
        assert!(snapshot_len > COMPACT_MIN_JOURNAL_BYTES);
        assert_eq!(
            store.compact_at, snapshot_len,
            "a big snapshot raises the threshold"
        );

        // A journal smaller than the snapshot does not compact again.
        let mut half = res("half", 3);
        half.attributes["blob"] = json!("y".repeat(COMPACT_MIN_JOURNAL_BYTES as usize / 2));
        store.commit(&[Change::Put(half.clone())]).unwrap();
        assert!(file_len(&journal) > COMPACT_MIN_JOURNAL_BYTES / 2);
        assert_eq!(store.state().serial, 1);
        drop(store);
        let store = open(&path);
        assert_eq!(store.state().get("big"), Some(&big));
        assert_eq!(store.state().get("half"), Some(&half));
    }

    #[test]
    fn files_are_private_to_the_owner() {
        let (_dir, path) = temp_state();
        let mut store = open(&path);
        store.commit(&[put("secret", 1)]).unwrap();
        let paths = Paths::new(&path);
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&paths.journal), 0o600);
        assert_eq!(mode(&paths.lock), 0o600);
        store.compact().unwrap();
        assert_eq!(mode(&paths.snapshot), 0o600);
        drop(store);

        // Files made readable by someone else are narrowed again on open.
        for p in [&paths.journal, &paths.lock] {
            fs::set_permissions(p, fs::Permissions::from_mode(0o644)).unwrap();
        }
        let mut store = open(&path);
        store.commit(&[put("secret", 2)]).unwrap();
        store.close().unwrap();
        for p in [&paths.snapshot, &paths.journal, &paths.lock] {
            assert_eq!(mode(p), 0o600, "{}", p.display());
        }
    }

    #[test]
    fn a_second_opener_is_refused_and_told_who_holds_the_lock() {
        let (_dir, path) = temp_state();
        let first = Store::open(&path, holder("nivis apply (first)"), None).unwrap();

        let start = Instant::now();
        let err = Store::open(&path, holder("second"), None).unwrap_err();
        assert!(
            start.elapsed() < Duration::from_millis(500),
            "no wait: fails at once"
        );
        let StateError::Locked {
            holder: Some(h), ..
        } = &err
        else {
            panic!("expected Locked with a holder, got {err:?}")
        };
        assert_eq!(h.pid, std::process::id());
        assert_eq!(h.command, "nivis apply (first)");
        let text = err.to_string();
        for needle in [
            format!("pid {}", std::process::id()),
            "`nivis apply (first)`".to_string(),
            format!("host {}", h.host),
            format!("user {}", h.user),
            "since ".to_string(),
            "nivis force-unlock".to_string(),
        ] {
            assert!(text.contains(&needle), "{needle:?} missing from {text}");
        }

        let start = Instant::now();
        let wait = Duration::from_millis(300);
        let err = Store::open(&path, holder("second"), Some(wait)).unwrap_err();
        let waited = start.elapsed();
        assert!(matches!(err, StateError::Locked { .. }), "{err:?}");
        assert!(waited >= wait && waited < wait * 4, "waited {waited:?}");

        // Read-only access needs no lock.
        assert!(Store::read_only(&path).is_ok());

        drop(first);
        let second = Store::open(&path, holder("second"), None).unwrap();
        drop(second);
    }

    #[test]
    fn a_waiting_opener_gets_the_lock_when_it_is_released() {
        let (_dir, path) = temp_state();
        let first = Store::open(&path, holder("first"), None).unwrap();
        let start = Instant::now();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            drop(first);
        });
        let store = Store::open(&path, holder("second"), Some(Duration::from_secs(10))).unwrap();
        assert!(start.elapsed() >= Duration::from_millis(150));
        releaser.join().unwrap();
        drop(store);
    }

    #[test]
    fn force_unlock_reports_free_locks_and_removes_held_ones() {
        let (_dir, path) = temp_state();
        let lock_path = Paths::new(&path).lock;
        assert_eq!(Store::force_unlock(&path).unwrap(), ForceUnlock::NotLocked);

        let first = Store::open(&path, holder("stuck"), None).unwrap();
        let outcome = Store::force_unlock(&path).unwrap();
        let ForceUnlock::Removed { holder: Some(h) } = &outcome else {
            panic!("expected Removed with a holder, got {outcome:?}")
        };
        assert_eq!((h.pid, h.command.as_str()), (std::process::id(), "stuck"));
        assert!(outcome.to_string().contains("removed the lock file"));
        assert!(!lock_path.exists());

        // The next opener creates a fresh lock file, even though `first` still holds the old one.
        let second = Store::open(&path, holder("after"), None).unwrap();
        assert!(lock_path.exists());
        drop(first);
        drop(second);
        assert_eq!(
            Store::force_unlock(&path).unwrap(),
            ForceUnlock::NotLocked,
            "an existing but free lock file is left alone"
        );
        assert!(lock_path.exists());
    }
}
