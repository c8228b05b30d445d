//! [`S3Store`]: the state kept as snapshot + journal segments in a bucket, locked by an object.
//!
//! The layout, the fencing rules and the fault handling are described in the module doc of
//! [`crate::state::s3`]; this file implements them. Reading (`load`) needs no lock; every write
//! happens under the lock and is conditional.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

mod fence;
mod recovery;
pub(super) mod repair;

use super::config::S3Backend;
use super::lock::{self, HeldLock};
use super::remote::{Conversion, Position, Remote};
use super::RemoteError;
use crate::state::journal;
use crate::state::rescue;
// A compaction is due once the journal reaches this size or the snapshot's, whichever is larger:
// the local store's rule, so commits stay amortised O(batch).
use crate::state::COMPACT_MIN_JOURNAL_BYTES;
use crate::state::{
    Change, ForceUnlock, IfLost, KeptFor, LockHolder, Mutation, StateError, StateFile, StateStore,
};

/// Why this store refuses writes.
#[derive(Debug, Clone)]
enum Poison {
    /// A journal segment could not be written (an outage, a refusal): nothing of it is
    /// recorded unless it landed unseen, so [`S3Store::recommit`] may try again.
    Retryable {
        cause: String,
        /// The segment that failed, to recognise it if it landed after all.
        line: Vec<u8>,
    },
    /// Someone else wrote, or a compaction stopped after sealing the journal: never write
    /// again in this run.
    Final(String),
}

impl Poison {
    fn cause(&self) -> &str {
        match self {
            Poison::Retryable { cause, .. } | Poison::Final(cause) => cause,
        }
    }
}

/// A remote state opened for writing: loaded, locked, and appended to by [`commit`].
///
/// [`commit`]: StateStore::commit
pub struct S3Store {
    remote: Remote,
    state: StateFile,
    pos: Position,
    /// The lock, until released.
    lock: Option<HeldLock>,
    rescue_path: PathBuf,
    /// A rescue file of this state is waiting on this machine: the lock must outlive this
    /// store, so that no other machine works from a state that lacks its results.
    rescue_pending: bool,
    /// Ids recorded at open from an earlier run's rescue file.
    recovered: Vec<String>,
    /// Whether this open has kept the snapshot it found as `KEY.backup`.
    backed_up: bool,
    /// Warnings from open (a stale rescue file kept aside).
    notes: Vec<String>,
    poisoned: Option<Poison>,
    /// The plain-text warning was given (at open, or at the first commit of a secret): once
    /// per state and run.
    warned_plaintext: bool,
    /// When the lock was last seen to be ours, and whether it was lost.
    fence: Mutex<fence::Fence>,
    /// Commits since the last look for vanished objects (see [`VANISH_CHECK_EVERY`]).
    since_vanish_check: u32,
    /// Objects of the state vanished mid-run (what was done about it): start nothing more.
    vanished: Option<String>,
}

/// Every this many commits a writer lists its state's objects (one LIST) to find a snapshot or
/// journal namespace that vanished under its lock (a lifecycle rule, `aws s3 rm`) before it
/// dispatches more; the close looks once more.
const VANISH_CHECK_EVERY: u32 = 8;

impl std::fmt::Debug for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Store")
            .field("url", &self.remote.url)
            .field("serial", &self.state.serial)
            .field("next_seq", &self.pos.next_seq)
            .finish_non_exhaustive()
    }
}

impl S3Store {
    /// Locks and loads the state of `backend`, first recording what an earlier run from this
    /// machine left in the rescue file (taking over the lock it kept, once it is gone). `local`
    /// is the local state file that a project moving to this backend would still have: if the
    /// remote state does not exist yet and `local` holds resources, opening is refused (migrate
    /// explicitly, never silently).
    pub fn open(
        backend: &S3Backend,
        holder: LockHolder,
        wait: Option<Duration>,
        local: Option<&Path>,
    ) -> Result<S3Store, StateError> {
        S3Store::open_as(backend, holder, wait, local, IfLost::Refuse)
    }

    /// [`open`](S3Store::open), with what to do when the state is missing but objects beside
    /// it show that it existed (see [`crate::state::Store::open_as`]).
    pub(crate) fn open_as(
        backend: &S3Backend,
        holder: LockHolder,
        wait: Option<Duration>,
        local: Option<&Path>,
        if_lost: IfLost,
    ) -> Result<S3Store, StateError> {
        let remote = Remote::new(backend)?;
        S3Store::open_remote(remote, backend, holder, wait, local, if_lost)
    }

    /// Locks and loads the state of `backend` to turn its encryption on or off (see
    /// [`S3Store::convert`]): objects are read sealed or not. Needs the key configured.
    pub(crate) fn open_for_conversion(
        backend: &S3Backend,
        holder: LockHolder,
        wait: Option<Duration>,
        conversion: Conversion,
    ) -> Result<S3Store, StateError> {
        let mut remote = Remote::new(backend)?;
        if remote.cipher.is_none() {
            let verb = match conversion {
                Conversion::Encrypt => "encrypt it with",
                Conversion::Decrypt => "open its objects with",
            };
            return Err(RemoteError::Invalid(format!(
                "{} has no encryption key configured to {verb}: set encryptionKeyEnv or \
                 encryptionKeyFile in nivis.backend (or pass --backend-config \
                 encryptionKeyEnv=VAR) and run again; nothing was changed",
                remote.url
            ))
            .into());
        }
        remote.conversion = Some(conversion);
        S3Store::open_remote(remote, backend, holder, wait, None, IfLost::Refuse)
    }

    fn open_remote(
        remote: Remote,
        backend: &S3Backend,
        holder: LockHolder,
        wait: Option<Duration>,
        local: Option<&Path>,
        if_lost: IfLost,
    ) -> Result<S3Store, StateError> {
        let rescue_path = backend.rescue_path()?;
        remote
            .client
            .probe(&remote.key)
            .map_err(|e| remote.fail("open", e))?;
        let lock_key = remote.lock_key();
        // Before the lock only the rescue file's existence counts; its contents are read under
        // the lock (a queued run must not replay what the run before it recorded).
        let mut taken_over = None;
        if rescue_path.symlink_metadata().is_ok() {
            // The run that rescued them kept the lock (or a later open that could not record
            // them did); once it is gone, the lock is this machine's to take.
            if let Some(gone) = lock::take_over(&remote.client, &lock_key)? {
                log::warn!(
                    "took over the lock {} of an earlier run from this machine ({gone}; gone), \
                     kept for the results in the rescue file {}",
                    gone.id,
                    rescue_path.display()
                );
                taken_over = Some(gone);
            }
        }
        let started = std::time::Instant::now();
        let held = lock::acquire(&remote.client, &lock_key, holder, wait)?;
        // Quitting at once (a second Ctrl-C) leaves this lock behind: the last line says so.
        crate::last_words::lock_held(Some((&remote.url, &held.holder.id)));
        log::info!(
            "took the lock {} of {} in {:.1} ms",
            held.holder.id,
            remote.url,
            started.elapsed().as_secs_f64() * 1000.0
        );
        let mut store = S3Store {
            remote,
            state: StateFile::empty(),
            pos: Position::default(),
            lock: Some(held),
            rescue_path,
            // Until the rescue file is read: an open that fails keeps a lock taken over for it.
            rescue_pending: taken_over.is_some(),
            recovered: Vec::new(),
            backed_up: false,
            notes: Vec::new(),
            poisoned: None,
            warned_plaintext: false,
            fence: Mutex::new(fence::Fence {
                checked: fence::boot_clock(),
                lost: None,
            }),
            since_vanish_check: 0,
            vanished: None,
        };
        let loaded = store.remote.load()?;
        let stands = (loaded.state.serial, loaded.pos.next_seq);
        let pending = store.claim_rescue(taken_over.as_ref(), stands)?;
        store.rescue_pending = pending.is_some();
        if let (false, Some(local), None) = (loaded.exists, local, &pending) {
            refuse_silent_migration(&store.remote.url, local)?;
        }
        store.state = loaded.state;
        store.pos = loaded.pos;
        let started_over = store.settle_lost(loaded.exists, if_lost, pending.as_ref())?;
        if let Some(rescued) = pending {
            store.record_rescued(rescued, !loaded.exists && !started_over)?;
        }
        if store.pos.journal_pending() {
            store.compact()?;
        }
        // Given at open when the state already holds secrets (see `LockedStore::warnings`).
        store.warned_plaintext = store.plaintext_warning().is_some();
        Ok(store)
    }

    /// Rewrites the whole state in the form the conversion it was opened for asks (a new
    /// snapshot), then deletes every older journal namespace, which holds the old form.
    /// Returns how many old objects were deleted.
    pub(crate) fn convert(&mut self, mutation: Mutation) -> Result<usize, StateError> {
        self.replace(self.state.clone(), mutation)?;
        // The backup (`KEY.backup`) still holds the snapshot as it was stored before: rewritten
        // from the converted one, so no copy of the state is left in the old form.
        self.remote.keep_backup()?;
        self.remote.delete_other_namespaces(self.state.serial)
    }

    /// The backup `KEY.backup` of `backend`'s state (the snapshot before the last run that
    /// replaced it) and its URL; `None`: there is none.
    pub(crate) fn read_backup(
        backend: &S3Backend,
    ) -> Result<Option<(StateFile, String)>, StateError> {
        Remote::new(backend)?.read_backup()
    }

    /// Reads the state of `backend` without locking, with the results this machine keeps in
    /// the rescue file applied in memory (as the next writer will record them first). A lost
    /// state is refused (see `state::lost`).
    pub fn read_only(backend: &S3Backend) -> Result<StateFile, StateError> {
        let remote = Remote::new(backend)?;
        let loaded = remote.load()?;
        if !loaded.exists {
            if let Some(lost) = remote.lost_evidence()? {
                return Err(StateError::Lost(Box::new(lost)));
            }
        }
        let mut state = loaded.state;
        let path = backend.rescue_path()?;
        if let Some(rescued) = rescue::read(&path)? {
            if let Some(id) = rescued.lock.as_deref() {
                if !lock::is_held_by(&remote.client, &remote.lock_key(), id)? {
                    log::warn!(
                        "the rescue file {} was written under the lock {id}, which is no longer \
                         held: it is stale and not applied (the next apply from this machine \
                         sets it aside); its resources: {}",
                        path.display(),
                        rescued.ids().join(", ")
                    );
                    return Ok(state);
                }
            }
            log::warn!(
                "{} result(s) of an earlier run from this machine are kept in the rescue file {} \
                 and not yet in {}: {}; the next apply from this machine records them first",
                rescued.ids().len(),
                path.display(),
                remote.url,
                rescued.ids().join(", ")
            );
            for change in rescued.changes_for(&path, &mut state, !loaded.exists)? {
                state.apply(&change);
            }
        }
        Ok(state)
    }

    /// `force-unlock ID` for the lock of `backend` (see `lock::force_unlock`).
    pub fn force_unlock(
        backend: &S3Backend,
        id: &str,
        force: bool,
        confirm: &mut dyn FnMut(Option<&LockHolder>) -> bool,
    ) -> Result<ForceUnlock, StateError> {
        let remote = Remote::new(backend)?;
        lock::force_unlock(&remote.client, &remote.lock_key(), id, force, confirm)
    }

    /// The state URL, `s3://bucket/key`.
    pub(crate) fn url(&self) -> &str {
        &self.remote.url
    }

    /// The current state.
    pub fn state(&self) -> &StateFile {
        &self.state
    }

    /// Where [`rescue`](S3Store::rescue) writes, on this machine.
    pub(crate) fn rescue_path(&self) -> &Path {
        &self.rescue_path
    }

    /// The ids recorded at open from an earlier run's rescue file.
    pub fn recovered(&self) -> &[String] {
        &self.recovered
    }

    /// What open had to say beyond errors (a stale rescue file set aside).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// A warning when the state holds sensitive values and is stored unencrypted: whoever can
    /// read the bucket can read them.
    pub(crate) fn plaintext_warning(&self) -> Option<String> {
        let sensitive = self.state.iter().any(|r| !r.sensitive_paths.is_empty());
        (sensitive && self.remote.writes_plaintext()).then(|| self.plaintext_text())
    }

    fn plaintext_text(&self) -> String {
        format!(
            "{} holds sensitive values unencrypted: whoever can read the bucket can read them. \
             Set encryptionKeyEnv or encryptionKeyFile in nivis.backend and run `nivis state \
             migrate --encrypt` to encrypt the state on S3 (see the book, Remote state)",
            self.remote.url
        )
    }

    /// Warns, once per state and run, when `changes` write a secret in plain text to a state
    /// that held none (a later open warns by itself).
    fn warn_plaintext_once(&mut self, changes: &[Change]) {
        if self.warned_plaintext || !self.remote.writes_plaintext() {
            return;
        }
        let secret = changes
            .iter()
            .any(|c| matches!(c, Change::Put(r) if !r.sensitive_paths.is_empty()));
        if secret {
            self.warned_plaintext = true;
            log::warn!("{}", self.plaintext_text());
        }
    }

    /// Writes `changes` as the next journal segment and applies them: one PUT, whatever the
    /// batch size. After `Err` nothing is applied and the store refuses writes
    /// ([`StateError::Poisoned`]) except [`recommit`](S3Store::recommit).
    pub fn commit(&mut self, changes: &[Change], _mutation: Mutation) -> Result<(), StateError> {
        self.append(changes)
    }

    /// [`commit`](S3Store::commit)'s work, for the store itself (the rescue file recorded at
    /// open: results whose run held the token).
    fn append(&mut self, changes: &[Change]) -> Result<(), StateError> {
        self.check_poisoned()?;
        if changes.is_empty() {
            return Ok(());
        }
        let line = journal::encode(&self.state.lineage, self.state.serial, changes)
            .map_err(|e| RemoteError::Invalid(format!("cannot encode a record: {e}")))?;
        let name = self.remote.segment(self.state.serial, self.pos.next_seq);
        // Fencing: a writer looks at its lock after every write (and before it, if it may have
        // been paused), so that a segment written while the lock was someone else's is never
        // taken as recorded: nobody else ever writes our lock id, so finding it after the PUT
        // means the lock was ours throughout.
        let fenced = self
            .fence(false)
            .and_then(|()| self.remote.create(&name, &line))
            .and_then(|()| self.fence(true));
        if let Err(mut e) = fenced {
            if is_conflict(&e) {
                // Someone else wrote: most likely our lock was forced open; say so if it was.
                if let Err(lost) = self.fence(true) {
                    e = lost;
                }
            }
            self.poisoned = Some(match is_conflict(&e) {
                true => Poison::Final(e.to_string()),
                false => Poison::Retryable {
                    cause: e.to_string(),
                    line,
                },
            });
            return Err(e);
        }
        self.pos.next_seq += 1;
        self.pos.journal_bytes += line.len() as u64;
        for change in changes {
            self.state.apply(change);
        }
        self.warn_plaintext_once(changes);
        self.since_vanish_check += 1;
        if self.since_vanish_check >= VANISH_CHECK_EVERY {
            self.since_vanish_check = 0;
            // What was just committed is in memory: written back (or rescued) with the rest,
            // so this commit holds; the run starts nothing more (see `lock_lost`).
            if let Err(e) = self.check_not_vanished() {
                self.vanished = Some(e.to_string());
                if !self.rescue_pending {
                    // Written back as a new snapshot: the operations still running record
                    // into it as usual.
                    self.poisoned = None;
                }
                return Ok(());
            }
        }
        if self.pos.journal_bytes >= self.pos.snapshot_len.max(COMPACT_MIN_JOURNAL_BYTES) {
            if let Err(e) = self.compact() {
                log::warn!(
                    "could not compact {} (the journal keeps everything): {e}",
                    self.remote.url
                );
            }
        }
        Ok(())
    }

    /// Retries a batch after [`commit`](S3Store::commit) failed. If the failed segment landed
    /// after all (its answer was lost), it is counted and `changes` follow it (replaying a put
    /// or a removal twice is harmless). Refused after a conflict.
    pub fn recommit(&mut self, changes: &[Change], mutation: Mutation) -> Result<(), StateError> {
        if let Some(Poison::Retryable { line, .. }) = &self.poisoned {
            let name = self.remote.segment(self.state.serial, self.pos.next_seq);
            if self.remote.holds(&name, line) {
                self.pos.next_seq += 1;
                self.pos.journal_bytes += line.len() as u64;
            }
            self.poisoned = None;
        }
        self.commit(changes, mutation)
    }

    /// Keeps `changes`, which the store could not take, in this machine's rescue file (see
    /// `state::rescue`; created with a private directory) and returns its path. The lock then
    /// stays held after this store is gone; the next open from this machine records them first.
    pub fn rescue(
        &mut self,
        changes: &[Change],
        _mutation: Mutation,
    ) -> Result<PathBuf, StateError> {
        self.keep_rescued(changes)
    }

    /// [`rescue`](S3Store::rescue)'s work, for the store itself (the whole state, when its
    /// objects vanished under a commit).
    fn keep_rescued(&mut self, changes: &[Change]) -> Result<PathBuf, StateError> {
        if let Some(dir) = self.rescue_path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| StateError::io(dir, "create the directory", e))?;
        }
        let lock_id = self.lock.as_ref().map(|l| l.holder.id.clone());
        let segments = Some(self.pos.next_seq);
        rescue::write_at(
            &self.rescue_path,
            &self.state,
            changes,
            lock_id.as_deref(),
            segments,
        )?;
        self.rescue_pending = true;
        if self.lost().is_none() {
            self.keep_lock_for(changes.iter().filter(|c| c.is_record()).count());
        }
        Ok(self.rescue_path.clone())
    }

    /// Marks our lock as kept for the rescue file (best effort: with the bucket unreachable the
    /// lock still says who holds it, only not why).
    fn keep_lock_for(&mut self, results: usize) {
        let Some(held) = self.lock.as_mut() else {
            return;
        };
        let kept = KeptFor {
            host: held.holder.host.clone(),
            results,
            file: self.rescue_path.display().to_string(),
        };
        if let Err(e) = lock::keep_for(&self.remote.client, held, kept) {
            log::info!("could not mark the lock as kept for the rescue file: {e}");
        }
    }

    /// What to do after a write failed (see [`LockedStore::remedy`]).
    ///
    /// [`LockedStore::remedy`]: crate::state::LockedStore::remedy
    pub(crate) fn remedy(&self) -> String {
        let url = &self.remote.url;
        if self.vanished.is_some() {
            return format!(
                "Find what deletes objects under {url} (a lifecycle rule? a script?) and stop \
                 it before the next apply from this machine, which goes on from what this run \
                 wrote back or rescued."
            );
        }
        if let Some(now) = self.lost() {
            if now.is_none() {
                return format!(
                    "This run's lock of {url} was deleted. The rescue file {} holds the results \
                     listed above: the next run from this machine records them first if nobody \
                     wrote {url} since; if somebody did, it sets the file aside and you check \
                     each object (adopt it with `nivis import ADDRESS ID`, or delete it).",
                    self.rescue_path.display()
                );
            }
            return format!(
                "This run no longer holds the lock of {url}: another run works from it now. The \
                 rescue file {} belongs to the lost lock and is replayed only if nobody wrote \
                 since (the next run from this machine sets it aside otherwise). Check each \
                 object listed above: adopt it with `nivis import ADDRESS ID` once no other run \
                 applies, or delete it.",
                self.rescue_path.display()
            );
        }
        if !self.rescue_pending {
            return format!("Once {url} can be written again, run again.");
        }
        let id = self.lock.as_ref().map_or("", |l| l.holder.id.as_str());
        format!(
            "Once {url} can be written again, run again from this machine: it records the \
             rescued results before anything else. Until then the lock {id} stays held, so that \
             no other machine works from a state that lacks them (to give them up, move the \
             rescue file aside and run `nivis force-unlock {id}`)."
        )
    }

    /// Replaces the whole state by `next` (state push, migration): seals the journal and
    /// writes `next` as the snapshot, with a serial above both.
    pub(crate) fn replace(
        &mut self,
        mut next: StateFile,
        _mutation: Mutation,
    ) -> Result<(), StateError> {
        self.check_poisoned()?;
        // The snapshot replaced is kept as the backup, as a local state's is (its `compact`).
        if !self.backed_up {
            self.remote.keep_backup()?;
            self.backed_up = true;
        }
        next.serial = next.serial.max(self.state.serial) + 1;
        next.keep_keys_of(&self.state);
        next.make_keys();
        let (etag, len) = self
            .remote
            .replace_snapshot(
                self.state.serial,
                self.pos.next_seq,
                self.pos.etag.as_deref(),
                &next,
            )
            .inspect_err(|e| self.poison_after_seal("replace the state", e))?;
        let old = self.state.serial;
        self.after_snapshot(next, etag, len);
        self.remote.delete_namespace(old);
        Ok(())
    }

    /// Folds the journal into a new snapshot; `serial` goes up by one.
    pub(crate) fn compact(&mut self) -> Result<(), StateError> {
        self.check_poisoned()?;
        if !self.backed_up {
            self.remote.keep_backup()?;
            self.backed_up = true;
        }
        let old = self.state.serial;
        self.state.make_keys();
        self.state.serial += 1;
        let written = self.remote.replace_snapshot(
            old,
            self.pos.next_seq,
            self.pos.etag.as_deref(),
            &self.state,
        );
        self.state.serial = old;
        let (etag, len) = written.inspect_err(|e| self.poison_after_seal("compact", e))?;
        let next = std::mem::replace(&mut self.state, StateFile::empty());
        self.after_snapshot(
            StateFile {
                serial: old + 1,
                ..next
            },
            etag,
            len,
        );
        if old > 0 {
            self.remote.delete_namespace(old - 1);
        }
        Ok(())
    }

    /// Compacts (if the journal holds anything) and releases the lock. A store refusing writes
    /// is an error, and keeps the lock if its results wait in the rescue file.
    pub fn close(mut self) -> Result<(), StateError> {
        self.check_poisoned()?;
        self.fence(true)?;
        self.check_not_vanished()?;
        if self.pos.journal_pending() {
            if let Err(e) = self.compact() {
                log::warn!(
                    "could not compact {} (the journal keeps everything): {e}",
                    self.remote.url
                );
            }
        }
        self.release();
        match self.vanished.take() {
            // Found mid-run: dispatch stopped then; the run must not end as a success.
            Some(vanished) => Err(RemoteError::Invalid(vanished).into()),
            None => Ok(()),
        }
    }

    /// Before the close writes a snapshot: if objects of the state vanished under our lock, the
    /// bucket no longer records what this run holds. The run writes its whole state back as a
    /// new snapshot (or, failing that, into the rescue file, the lock kept for it) and fails
    /// instead of claiming it applied.
    fn check_not_vanished(&mut self) -> Result<(), StateError> {
        let pending = self
            .pos
            .journal_pending()
            .then_some((self.state.serial, self.pos.next_seq));
        let had_snapshot = self.pos.etag.is_some();
        // A LIST that fails (an outage) tells nothing: the compaction after it finds out.
        let gone = self
            .remote
            .vanished(had_snapshot, pending)
            .unwrap_or_default();
        if gone.is_empty() {
            return Ok(());
        }
        if gone.iter().any(|g| g.starts_with("the snapshot")) {
            // The snapshot is gone: write the new one where none is.
            self.pos.etag = None;
        }
        let what = gone.join(" and ");
        let n = self.state.resources.len();
        let done = match self.compact() {
            Ok(()) => format!(
                "this run wrote its whole state ({n} resource(s)) back as a new snapshot, so \
                 nothing is lost; find what deletes objects under that key (a lifecycle rule?) \
                 before the next run"
            ),
            Err(e) => {
                let all = self.state.rebuilding_changes();
                match self.keep_rescued(&all) {
                    Ok(file) => format!(
                        "writing it back failed ({e}); its whole state ({n} resource(s)) is in \
                         the rescue file {}, the lock kept for it",
                        file.display()
                    ),
                    Err(r) => format!("writing it back failed ({e}), and rescuing it ({r})"),
                }
            }
        };
        self.poisoned = Some(Poison::Final(format!("{what} vanished")));
        Err(RemoteError::Invalid(format!(
            "{what} of {} vanished while this run held the lock (a lifecycle rule or a \
             deletion?); {done}",
            self.remote.url
        ))
        .into())
    }

    fn after_snapshot(&mut self, state: StateFile, etag: String, len: u64) {
        self.state = state;
        self.pos = Position::after_snapshot(etag, len);
    }

    fn check_poisoned(&self) -> Result<(), StateError> {
        match &self.poisoned {
            None => Ok(()),
            Some(poison) => Err(StateError::Poisoned {
                path: PathBuf::from(&self.remote.url),
                cause: poison.cause().to_string(),
            }),
        }
    }

    /// After a failed snapshot replacement the namespace may be sealed: write nothing more.
    fn poison_after_seal(&mut self, what: &str, e: &StateError) {
        self.poisoned
            .get_or_insert_with(|| Poison::Final(format!("could not {what}: {e}")));
    }

    fn release(&mut self) {
        if let Some(held) = self.lock.take() {
            crate::last_words::lock_held(None);
            let started = std::time::Instant::now();
            match lock::release(&self.remote.client, &held) {
                Ok(None) => log::info!(
                    "released the lock {} in {:.1} ms",
                    held.holder.id,
                    started.elapsed().as_secs_f64() * 1000.0
                ),
                Ok(Some(warning)) => log::warn!("{warning}"),
                Err(e) => log::warn!(
                    "could not release the lock of {}: {e}; once this run is over, `nivis \
                     force-unlock {}` removes it",
                    self.remote.url,
                    held.holder.id
                ),
            }
        }
    }
}

impl Drop for S3Store {
    fn drop(&mut self) {
        // With results only in the rescue file, the lock stays so that nobody else works from a
        // state that lacks them; the next run from this machine takes it over.
        if !self.rescue_pending {
            self.release();
        }
    }
}

impl StateStore for S3Store {
    fn state(&self) -> &StateFile {
        &self.state
    }

    fn commit(&mut self, changes: &[Change], mutation: Mutation) -> Result<(), StateError> {
        S3Store::commit(self, changes, mutation)
    }
}

/// Whether `e` says that someone else wrote (or holds the lock): never retried.
fn is_conflict(e: &StateError) -> bool {
    matches!(e, StateError::Remote(r)
        if matches!(**r, RemoteError::Conflict { .. } | RemoteError::LockLost { .. }))
}

fn refuse_silent_migration(url: &str, local: &Path) -> Result<(), StateError> {
    let Ok(state) = crate::state::Store::read_only(local) else {
        return Ok(());
    };
    if state.is_empty() {
        return Ok(());
    }
    Err(RemoteError::Invalid(format!(
        "the backend {url} holds no state yet, but the local state {} has {} resource(s); run \
         `nivis state migrate` to move it to the backend, or move {} aside to start empty",
        local.display(),
        state.len(),
        local.display()
    ))
    .into())
}
