//! The durable file store: snapshot `P`, append-only journal `P.journal`, lock `P.lock`.
//!
//! The format, the durability promise and the compaction rule are described in the module doc of
//! [`crate::state`]; this file implements them, with the journal's record format and replay rules
//! in `journal.rs`, the rescue file in `rescue.rs` and the lock in `lock.rs`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::durable::sync_parent;
use super::error::StateError;
use super::holder::ForceUnlock;
use super::holder::LockHolder;
use super::journal::{self, ReplayError};
use super::lock::{self, FileLock};
use super::lost::{self, IfLost};
use super::model::{declared_version, Change, StateFile, SCHEMA_VERSION};
use super::mutation::Mutation;
use super::rescue;
use super::StateStore;

mod gone;

/// The state path used when none is given.
pub(crate) const DEFAULT_PATH: &str = "nivis.state.json";

/// The journal is compacted after a commit once it reaches this size or the snapshot's size,
/// whichever is larger.
pub(crate) const COMPACT_MIN_JOURNAL_BYTES: u64 = 4 << 20;

/// Space kept allocated past the end of the journal, so that when the filesystem fills up, the
/// results of operations already running still fit (see [`Store::space_error`]).
pub(crate) const JOURNAL_RESERVE_BYTES: u64 = 256 << 10;

/// Why the store refuses writes.
#[derive(Debug)]
enum Poison {
    /// A journal append failed and the journal was cut back to its last whole record: the
    /// files are as they were before it, so [`Store::recommit`] may try again.
    Append(String),
    /// Anything else (a failed cut-back, a compaction that stopped after its rename).
    Other(String),
}

impl Poison {
    fn cause(&self) -> &str {
        match self {
            Poison::Append(c) | Poison::Other(c) => c,
        }
    }
}

/// A state kept on disk: snapshot plus journal, locked for this value's whole life.
///
/// Dropping it releases the lock without compacting; [`close`](Store::close) compacts first.
#[derive(Debug)]
pub struct Store {
    paths: StatePaths,
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
    /// Why [`JOURNAL_RESERVE_BYTES`] could not be kept free past the journal, if so.
    space_error: Option<StateError>,
    /// Set when a write failed; refuses further writes.
    poisoned: Option<Poison>,
    /// Ids whose changes an earlier run left in the rescue file and this open recorded.
    recovered: Vec<String>,
    /// The rescue files those changes came from.
    recovered_from: Vec<PathBuf>,
    /// Whether this open has kept the snapshot it found as `P.backup` (before its first
    /// compaction replaced it).
    backed_up: bool,
    /// The journal is no longer the file at its path: the state directory was removed or
    /// moved while this store held it, taking every record with it.
    gone: bool,
    /// After `gone`: where [`rescue`](Store::rescue) saved every record this store held, and
    /// their ids.
    rescued_whole: Option<(PathBuf, Vec<String>)>,
    _lock: FileLock,
}

impl Store {
    /// Opens (or starts) the state at `path`, taking its lock for the life of the `Store`.
    ///
    /// If the lock is busy, retries until `wait` has passed (`None`: fail at once) and then fails
    /// with [`StateError::Locked`]. A missing state file is an empty state with a new lineage.
    /// The journal is replayed over the snapshot (a torn final line is dropped and truncated
    /// away), a rescue file left by a failed run is folded in, and if the journal then holds
    /// anything it is compacted; a failed compaction here is not fatal (see
    /// [`compaction_error`](Store::compaction_error)). A state path that is a symlink is
    /// followed: every file lives beside its target.
    ///
    /// A missing state beside evidence that one existed (its backup, audit records of runs
    /// with a serial) is refused with [`StateError::Lost`]; see [`Store::open_as`].
    pub(crate) fn open(
        path: impl AsRef<Path>,
        holder: LockHolder,
        wait: Option<Duration>,
    ) -> Result<Store, StateError> {
        Store::open_as(path, holder, wait, IfLost::Refuse)
    }

    /// [`open`](Store::open), with what to do when the state is missing but evidence shows it
    /// existed: refuse, or start over with an empty state (new lineage) written at once as a
    /// snapshot whose serial continues after the highest the evidence names, so the decision
    /// is made once and the serial never goes back.
    pub(crate) fn open_as(
        path: impl AsRef<Path>,
        holder: LockHolder,
        wait: Option<Duration>,
        if_lost: IfLost,
    ) -> Result<Store, StateError> {
        let paths = StatePaths::resolve(path.as_ref())?;
        let lock = FileLock::acquire(&paths.lock, holder, wait)?;
        let (snapshot, snapshot_len) = read_snapshot(&paths.snapshot)?;
        let fresh = snapshot.is_none();
        // Under the file rule (`privfile`): a journal another user created beside a state in a
        // shared directory, or a link planted at its name, is refused, never written.
        let mut journal = crate::privfile::open(
            &paths.journal,
            OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .mode(0o600),
            "the state journal",
        )
        .map_err(|e| StateError::io(&paths.journal, "open", e.into_io()))?;
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
        let lost = match fresh && replayed.valid_len == 0 {
            true => lost::local_evidence(&paths)?,
            false => None,
        };
        if let (Some(lost), IfLost::Refuse) = (&lost, if_lost) {
            return Err(StateError::Lost(Box::new(lost.clone())));
        }
        let mut store = Store {
            paths,
            state: replayed.state,
            journal,
            journal_len: replayed.valid_len,
            compact_at: compaction_threshold(snapshot_len),
            compaction_error: None,
            space_error: None,
            poisoned: None,
            recovered: Vec::new(),
            recovered_from: Vec::new(),
            backed_up: false,
            gone: false,
            rescued_whole: None,
            _lock: lock,
        };
        store.fold_rescue(fresh && store.journal_len == 0)?;
        if let (Some(lost), IfLost::StartOver) = (&lost, if_lost) {
            log::warn!("starting over with an empty state: {lost}");
            store.state.serial = store.state.serial.max(lost.serial);
            store.compact()?;
        } else if store.journal_len > 0 {
            store.compact_or_record();
        }
        store.keep_reserve();
        Ok(store)
    }

    /// Commits the changes of a rescue file, then removes it.
    /// Commits the changes of the rescue files (beside the state, then in this machine's spare
    /// place), each then removed.
    fn fold_rescue(&mut self, mut fresh: bool) -> Result<(), StateError> {
        let places = [
            Some(self.paths.rescue.clone()),
            rescue::spare_path(&self.paths.snapshot),
        ];
        for place in places.into_iter().flatten() {
            let Some(rescued) = rescue::read(&place)? else {
                continue;
            };
            let ids = rescued.ids();
            let changes = rescued.changes_for(&place, &mut self.state, fresh)?;
            self.append(&changes)?;
            rescue::remove(&place)?;
            self.recovered.extend(ids);
            self.recovered_from.push(place);
            fresh = false;
        }
        Ok(())
    }

    /// The ids whose changes an earlier run left in the rescue file and that opening this store
    /// recorded (empty if there was none).
    pub(crate) fn recovered(&self) -> &[String] {
        &self.recovered
    }

    /// Reads the state at `path` without locking and without writing anything, for commands
    /// such as `state list`.
    ///
    /// The journal is replayed in memory; a torn final line (a crash, or a writer in the middle of
    /// a commit) is ignored. While another process writes, the result may miss its latest
    /// commits, but it is always a state that existed.
    pub fn read_only(path: impl AsRef<Path>) -> Result<StateFile, StateError> {
        let paths = StatePaths::resolve(path.as_ref())?;
        let mut attempts = 0;
        loop {
            let (snapshot, _) = read_snapshot(&paths.snapshot)?;
            let fresh = snapshot.is_none();
            let bytes = match fs::read(&paths.journal) {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(StateError::io(&paths.journal, "read", e)),
            };
            match journal::replay(&paths.journal, snapshot, &bytes) {
                Ok(mut replayed) => {
                    let mut fresh = fresh && replayed.valid_len == 0;
                    if let Some(lost) = fresh.then(|| lost::local_evidence(&paths)) {
                        if let Some(lost) = lost? {
                            return Err(StateError::Lost(Box::new(lost)));
                        }
                    }
                    let places = [
                        Some(paths.rescue.clone()),
                        rescue::spare_path(&paths.snapshot),
                    ];
                    for place in places.into_iter().flatten() {
                        if let Some(rescued) = rescue::read(&place)? {
                            let changes =
                                rescued.changes_for(&place, &mut replayed.state, fresh)?;
                            for change in &changes {
                                replayed.state.apply(change);
                            }
                            fresh = false;
                        }
                    }
                    return Ok(replayed.state);
                }
                // A writer compacted between our two reads: read both again.
                Err(ReplayError::Ahead(_)) if attempts < 3 => attempts += 1,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The serial [`Store::read_only`] would report for the state at `path`, read from the
    /// snapshot alone when it says (the journal and a rescue file never change the serial):
    /// the audit record asks it before and after every mutating run, and reading every record
    /// for it cost a 1000-resource destroy ~4% of its time.
    pub(crate) fn read_serial(path: impl AsRef<Path>) -> Result<u64, StateError> {
        let paths = StatePaths::resolve(path.as_ref())?;
        match fs::read(&paths.snapshot) {
            Ok(bytes) => {
                if let Some(serial) = super::snapshot::serial_of(&bytes) {
                    return Ok(serial);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(StateError::io(&paths.snapshot, "read", e)),
        }
        Store::read_only(path).map(|state| state.serial)
    }

    /// Breaks the lock of the state at `path`, held under lock id `id`, for a holder that is
    /// gone.
    ///
    /// `flock` locks die with their process, so on a local filesystem a stale lock cannot exist
    /// and this only reports [`ForceUnlock::NotLocked`]. On a network filesystem a lock can
    /// outlive a crashed client; then, if the lock cannot be taken, the lock file is removed so
    /// the next opener creates (and locks) a new one. Refused when `id` is not the lock's id
    /// ([`StateError::LockIdMismatch`]), and, unless `force`, when the holder runs on this host
    /// ([`StateError::LockHolderAlive`]) or recorded no id. `confirm` is asked last and may
    /// decline. If the holder is in fact alive, two writers can then run at once.
    pub(crate) fn force_unlock(
        path: impl AsRef<Path>,
        id: &str,
        force: bool,
        confirm: &mut dyn FnMut(Option<&LockHolder>) -> bool,
    ) -> Result<ForceUnlock, StateError> {
        lock::force_unlock(
            &StatePaths::resolve(path.as_ref())?.lock,
            id,
            force,
            confirm,
        )
    }

    /// The state path `P`.
    pub(crate) fn path(&self) -> &Path {
        &self.paths.snapshot
    }

    /// The rescue files whose changes [`open`](Store::open) recorded (see
    /// [`recovered`](Store::recovered)).
    pub(crate) fn recovered_from(&self) -> &[PathBuf] {
        &self.recovered_from
    }

    /// Where [`rescue`](Store::rescue) writes first: `P.rescue`.
    pub(crate) fn rescue_path(&self) -> &Path {
        &self.paths.rescue
    }

    /// The current state, including every committed change.
    pub(crate) fn state(&self) -> &StateFile {
        &self.state
    }

    /// Durably records `changes` (in order, all or nothing), then applies them in memory.
    ///
    /// Writes one journal line and calls `fdatasync` once, whatever the batch size: batch the
    /// results that are ready together. After `Ok`, the changes survive kill -9 and power loss.
    /// After `Err`, they are not recorded (the journal is cut back to its last whole record) and
    /// the store refuses further writes ([`StateError::Poisoned`]) except [`recommit`]; if even
    /// the cut-back failed, reopen the store to learn the outcome. May compact afterwards (see
    /// the module doc); a failed compaction does not fail the commit. Afterwards it tries to keep
    /// [`JOURNAL_RESERVE_BYTES`] allocated past the journal; see [`space_error`].
    ///
    /// [`recommit`]: Store::recommit
    /// [`space_error`]: Store::space_error
    pub(crate) fn commit(
        &mut self,
        changes: &[Change],
        _mutation: Mutation,
    ) -> Result<(), StateError> {
        self.append(changes)
    }

    /// [`commit`](Store::commit)'s work, for the store itself (the rescue file folded in at
    /// open: results whose run held the token).
    fn append(&mut self, changes: &[Change]) -> Result<(), StateError> {
        self.check_poisoned()?;
        if changes.is_empty() {
            return Ok(());
        }
        self.check_in_place()?;
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
            // ends up in the middle of the journal. Stop writing until `recommit`, which checks
            // that the journal is whole again before it writes.
            let err = StateError::io(&self.paths.journal, "append to", e);
            self.poisoned = Some(match self.cut_back() {
                Ok(()) => Poison::Append(err.to_string()),
                Err(_) => Poison::Other(err.to_string()),
            });
            return Err(err);
        }
        self.journal_len += line.len() as u64;
        for change in changes {
            self.state.apply(change);
        }
        if self.journal_len >= self.compact_at {
            self.compact_or_record();
        }
        self.keep_reserve();
        Ok(())
    }

    /// Checks that the journal this store holds open is still the file at its path. A state
    /// directory removed or moved mid-run would otherwise take every later commit with it,
    /// unseen, and the run would end "Applied" with no state; the store refuses writes instead.
    fn check_in_place(&mut self) -> Result<(), StateError> {
        use std::os::unix::fs::MetadataExt;
        let id = |m: std::fs::Metadata| (m.dev(), m.ino());
        let held = self.journal.metadata().map(id);
        let named = std::fs::metadata(&self.paths.journal).map(id);
        if matches!((&held, &named), (Ok(h), Ok(n)) if h == n) {
            return Ok(());
        }
        let err = StateError::io(
            &self.paths.journal,
            "record results in",
            io::Error::other(
                "it is no longer the file this run opened: the state directory was removed or \
                 moved while this run held it",
            ),
        );
        self.poisoned = Some(Poison::Other(err.to_string()));
        self.gone = true;
        Err(err)
    }

    /// Retries a batch after [`commit`](Store::commit) failed: checks that the journal is cut
    /// back to its last whole record, then commits `changes`. On a store that is not poisoned
    /// this is `commit`.
    pub(crate) fn recommit(
        &mut self,
        changes: &[Change],
        mutation: Mutation,
    ) -> Result<(), StateError> {
        match &self.poisoned {
            None => {}
            Some(Poison::Append(_)) => {
                self.cut_back()?;
                self.poisoned = None;
            }
            Some(Poison::Other(_)) => self.check_poisoned()?,
        }
        self.commit(changes, mutation)
    }

    /// Writes `changes`, which the journal could not take, to the rescue file `P.rescue` (see
    /// the module doc of [`crate::state`]) and returns its path; when the state's filesystem
    /// cannot take that either (full, read-only, failing), to this machine's spare place
    /// (`rescue::spare_path`). The next [`open`](Store::open) commits them first. Fails if a
    /// rescue file already exists.
    ///
    /// When the state directory was removed or moved while this store held it, the records it
    /// held went with it: every one of them is saved with `changes`, in the spare place (writing
    /// beside the state would recreate the directory), so the next run records the whole state
    /// again; [`remedy`](Store::remedy) lists them.
    pub(crate) fn rescue(
        &mut self,
        changes: &[Change],
        _mutation: Mutation,
    ) -> Result<PathBuf, StateError> {
        let spare = rescue::spare_path(&self.paths.snapshot);
        if self.gone {
            return self.rescue_whole(changes, spare);
        }
        rescue::write_or_spare(
            &self.paths.rescue,
            spare.as_deref(),
            &self.state,
            changes,
            None,
        )
    }

    /// Why the store could not keep [`JOURNAL_RESERVE_BYTES`] free past the journal (the
    /// filesystem is full), if so. Commits still succeed while the kept space lasts: a caller
    /// should start no new operation and record those already running.
    pub(crate) fn space_error(&self) -> Option<&StateError> {
        self.space_error.as_ref()
    }

    /// Cuts the journal back to its last whole record (if anything reached it) and syncs it.
    fn cut_back(&mut self) -> Result<(), StateError> {
        let file = &self.journal;
        file.metadata()
            .and_then(|m| match m.len() == self.journal_len {
                true => Ok(()),
                false => file.set_len(self.journal_len),
            })
            .and_then(|()| file.sync_data())
            .map_err(|e| StateError::io(&self.paths.journal, "cut back", e))
    }

    fn keep_reserve(&mut self) {
        self.space_error = reserve(&self.journal, self.journal_len)
            .err()
            .map(|e| StateError::io(&self.paths.journal, "keep room for the next records in", e));
    }

    /// Writes the whole state as a new snapshot and empties the journal; `serial` goes up by one.
    ///
    /// Crash-safe at every step: the snapshot is replaced by rename, and until the journal is
    /// emptied its records carry the old serial and are skipped on replay.
    pub(crate) fn compact(&mut self) -> Result<(), StateError> {
        self.check_poisoned()?;
        if !self.backed_up {
            super::backup::keep_local(&self.paths.snapshot)?;
            self.backed_up = true;
        }
        self.state.make_keys();
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
            self.poisoned = Some(Poison::Other(e.to_string()));
            return Err(e);
        }
        self.journal_len = 0;
        self.compact_at = compaction_threshold(snapshot_len);
        self.keep_reserve();
        Ok(())
    }

    /// Replaces the whole state by `next` (`state push`): writes it as the new snapshot, with a
    /// serial above both, and empties the journal. On error nothing changed, unless the store is
    /// poisoned (the new snapshot may be in place: reopen to learn).
    pub(crate) fn replace(
        &mut self,
        mut next: StateFile,
        _mutation: Mutation,
    ) -> Result<(), StateError> {
        self.check_poisoned()?;
        // `compact` adds one.
        next.serial = next.serial.max(self.state.serial);
        next.keep_keys_of(&self.state);
        let old = std::mem::replace(&mut self.state, next);
        let compacted = self.compact();
        if compacted.is_err() && self.poisoned.is_none() {
            self.state = old;
        }
        compacted
    }

    /// Compacts (if the journal holds anything) and releases the lock. A compaction that fails
    /// loses nothing (the journal keeps every commit; the next open compacts) and is not an
    /// error; a store poisoned by a failed write is.
    ///
    /// A state directory removed or moved since the last commit took every record with it: they
    /// are saved in the spare place (as [`rescue`](Store::rescue) does), and the error says so
    /// and lists them.
    pub(crate) fn close(mut self) -> Result<(), StateError> {
        if self.poisoned.is_none() && self.check_in_place().is_err() {
            return Err(self.save_after_gone());
        }
        if self.journal_len > 0 && self.poisoned.is_none() {
            self.compact_or_record();
        }
        self.check_poisoned()
    }

    /// Why the last automatic compaction (on open or after a commit) failed, if it did. Nothing
    /// committed is lost by such a failure; the journal just grows until a later one succeeds.
    pub(crate) fn compaction_error(&self) -> Option<&StateError> {
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
            Some(poison) => Err(StateError::Poisoned {
                path: self.paths.snapshot.clone(),
                cause: poison.cause().to_string(),
            }),
            None => Ok(()),
        }
    }
}

impl StateStore for Store {
    fn state(&self) -> &StateFile {
        Store::state(self)
    }

    fn commit(&mut self, changes: &[Change], mutation: Mutation) -> Result<(), StateError> {
        Store::commit(self, changes, mutation)
    }
}

fn compaction_threshold(snapshot_len: u64) -> u64 {
    snapshot_len.max(COMPACT_MIN_JOURNAL_BYTES)
}

/// Allocates [`JOURNAL_RESERVE_BYTES`] past `end` without changing the file's size, so the next
/// appends land in blocks already held. A filesystem that cannot do this is not an error.
fn reserve(file: &File, end: u64) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (
            libc::off_t::try_from(end),
            libc::off_t::try_from(JOURNAL_RESERVE_BYTES),
        ) else {
            return Ok(());
        };
        // SAFETY: fallocate on a descriptor we own, with a valid mode and range.
        let rc =
            unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, offset, len) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EOPNOTSUPP | libc::ENOSYS) => Ok(()),
                _ => Err(e),
            };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, end);
    Ok(())
}

/// The files of one state (see the module doc of [`crate::state`]), all in one directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StatePaths {
    /// `P`, the snapshot.
    pub(crate) snapshot: PathBuf,
    /// `P.journal`.
    pub(crate) journal: PathBuf,
    /// `P.lock`.
    pub(crate) lock: PathBuf,
    /// `P.tmp`, during compaction.
    pub(crate) tmp: PathBuf,
    /// `P.rescue`, after a failed journal write.
    pub(crate) rescue: PathBuf,
    /// `P.backup`, the snapshot before the last run that replaced it (`state::backup`).
    pub(crate) backup: PathBuf,
}

impl StatePaths {
    /// The files of the state at `path`, following symlinks: a snapshot is replaced by renaming
    /// a new file over it, which would replace a link instead of the file it points to. A
    /// dangling link names where the state will be created. A directory, device or pipe is
    /// refused (it could be read forever, and files would be created beside it).
    pub(crate) fn resolve(path: &Path) -> Result<StatePaths, StateError> {
        let mut real = path.to_path_buf();
        for _ in 0..40 {
            match fs::symlink_metadata(&real) {
                Ok(m) if m.file_type().is_symlink() => {
                    let target =
                        fs::read_link(&real).map_err(|e| StateError::io(&real, "read link", e))?;
                    // A relative target is relative to the link's directory (an absolute one
                    // replaces it in `join`).
                    real = match real.parent() {
                        Some(dir) => dir.join(target),
                        None => target,
                    };
                }
                Ok(m) if m.is_dir() => {
                    return Err(StateError::io(
                        path,
                        "use as the state file",
                        io::Error::other("it is a directory; name a file"),
                    ))
                }
                Ok(m) if !m.is_file() => {
                    return Err(StateError::io(
                        path,
                        "use as the state file",
                        io::Error::other("it is not a regular file (a device or a pipe?)"),
                    ))
                }
                _ => return Ok(StatePaths::new(&real)),
            }
        }
        Err(StateError::io(
            path,
            "follow",
            io::Error::other("more than 40 levels of symbolic links"),
        ))
    }

    /// The files of the state at `path`, taken literally (no link followed).
    pub(crate) fn new(path: &Path) -> StatePaths {
        let with_suffix = |suffix: &str| {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            PathBuf::from(name)
        };
        StatePaths {
            snapshot: path.to_path_buf(),
            journal: with_suffix(".journal"),
            lock: with_suffix(".lock"),
            tmp: with_suffix(".tmp"),
            rescue: with_suffix(".rescue"),
            backup: with_suffix(".backup"),
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

/// Parses snapshot bytes read from `path` (a state file, a remote object's URL, or a file
/// `state push` was given): the format version first, then the shape.
pub(crate) fn parse_snapshot(path: &Path, bytes: &[u8]) -> Result<StateFile, StateError> {
    // One resource at a time when it can (a large state then never sits beside its whole JSON
    // tree); everything else, errors included, is read and reported as a whole.
    let state = match super::snapshot::read_current(bytes) {
        Some(state) => state,
        None => parse_whole_snapshot(path, bytes)?,
    };
    if let Some((key, resource)) = state.resources.iter().find(|(k, r)| **k != r.id) {
        return Err(StateError::corrupt(
            path,
            None,
            format!("the resource under key {key:?} has id {:?}", resource.id),
        ));
    }
    Ok(state)
}

/// [`parse_snapshot`] through one JSON tree of the whole document: every format version, and
/// every error message.
pub(super) fn parse_whole_snapshot(path: &Path, bytes: &[u8]) -> Result<StateFile, StateError> {
    // Check the version before the shape, so a newer format says so instead of failing to parse.
    let corrupt = |e: String| StateError::corrupt(path, None, e);
    let object: Map<String, Value> =
        serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    let found = declared_version(&object).map_err(|e| corrupt(e.to_string()))?;
    if found == 0 || found > u64::from(SCHEMA_VERSION) {
        return Err(StateError::UnsupportedVersion {
            path: path.to_path_buf(),
            line: None,
            found,
            supported: SCHEMA_VERSION,
        });
    }
    StateFile::try_from(object).map_err(|e| corrupt(e.to_string()))
}

/// Writes `state` to `P.tmp`, syncs it and renames it over `P`; returns its size. On error `P`
/// is unchanged.
fn write_snapshot(paths: &StatePaths, state: &StateFile) -> Result<u64, StateError> {
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

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
