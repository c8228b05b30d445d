//! [`S3Store`]: the state kept as snapshot + journal segments in a bucket, locked by an object.
//!
//! The layout, the fencing rules and the fault handling are described in the module doc of
//! [`crate::state::s3`]; this file implements them. Reading (`load`) needs no lock; every write
//! happens under the lock and is conditional.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use super::client::{Client, Condition, S3Error};
use super::config::S3Backend;
use super::crypt::Cipher;
use super::lock::{self, HeldLock, LockInfo, Unlocked};
use super::rescue::{Header, RescueFile, Rescued};
use super::RemoteError;
use crate::state::file::parse_snapshot;
use crate::state::journal;
use crate::state::{Change, LockHolder, StateError, StateFile, StateStore};

/// The body of a seal segment: the namespace it ends takes no more records.
const SEAL: &[u8] = b"nivis-sealed\n";

/// A compaction is due once the journal reaches this size or the snapshot's, whichever is
/// larger (the local store's rule: commits stay amortised O(batch)).
const COMPACT_MIN_JOURNAL_BYTES: u64 = 4 << 20;

/// The objects of one remote state and how to read and write them.
struct Remote {
    client: Client,
    cipher: Option<Cipher>,
    key: String,
    url: String,
}

impl Remote {
    fn new(backend: &S3Backend) -> Result<Remote, StateError> {
        Ok(Remote {
            client: backend.client()?,
            cipher: backend.cipher()?,
            key: backend.key(),
            url: backend.url(),
        })
    }

    fn lock_key(&self) -> String {
        format!("{}.lock", self.key)
    }

    fn namespace(&self, serial: u64) -> String {
        format!("{}.journal/{serial:012}/", self.key)
    }

    fn segment(&self, serial: u64, seq: u64) -> String {
        format!("{}{seq:012}", self.namespace(serial))
    }

    fn seal_body(&self, name: &str, plain: &[u8]) -> Vec<u8> {
        match &self.cipher {
            Some(c) => c.seal(name, plain),
            None => plain.to_vec(),
        }
    }

    fn open_body(&self, name: &str, body: Vec<u8>) -> Result<Vec<u8>, StateError> {
        match &self.cipher {
            Some(c) => c
                .open(name, &body)
                .map_err(|e| RemoteError::Invalid(e).into()),
            None if super::crypt::is_sealed(&body) => Err(RemoteError::Invalid(format!(
                "{name} is encrypted; configure its key (encryptionKeyEnv or encryptionKeyFile)"
            ))
            .into()),
            None => Ok(body),
        }
    }

    fn fail(&self, what: &str, e: S3Error) -> StateError {
        RemoteError::s3(format!("{what} {}", self.url), e).into()
    }

    /// Reads snapshot and journal, retrying when a writer's clean-up removed a segment between
    /// our listing and our read.
    fn load(&self) -> Result<Loaded, StateError> {
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

    fn load_once(&self) -> Result<Loaded, LoadError> {
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
                    format!("journal segment {name} is {what} (expected {expected}); a segment is missing or foreign"),
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
    fn holds(&self, name: &str, line: &[u8]) -> bool {
        match self.client.get(name) {
            Ok(Some(obj)) if obj.body == SEAL => line == SEAL,
            Ok(Some(obj)) => self.open_body(name, obj.body).is_ok_and(|b| b == line),
            _ => false,
        }
    }

    /// Creates segment `name` holding `line`; a conflict means someone else wrote it.
    fn create(&self, name: &str, line: &[u8]) -> Result<(), StateError> {
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
    fn replace_snapshot(
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

    fn snapshot_conflict(&self) -> StateError {
        RemoteError::Conflict {
            state: self.url.clone(),
            detail: "the snapshot is not the one this run read".into(),
        }
        .into()
    }

    /// Deletes namespace `serial` (best effort: leftovers are only garbage).
    fn delete_namespace(&self, serial: u64) {
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

enum LoadError {
    Vanished(String),
    State(StateError),
}

impl From<StateError> for LoadError {
    fn from(e: StateError) -> LoadError {
        LoadError::State(e)
    }
}

struct Loaded {
    state: StateFile,
    pos: Position,
    /// Whether any object of the state exists.
    exists: bool,
}

/// Where the remote state stands: the snapshot read or written last, and the journal after it.
#[derive(Debug, Default)]
struct Position {
    /// The snapshot's ETag (`None`: no snapshot object yet).
    etag: Option<String>,
    snapshot_len: u64,
    /// The next journal segment's number.
    next_seq: u64,
    journal_bytes: u64,
    /// The journal ends with a seal (a compaction stopped after sealing).
    sealed: bool,
}

impl Position {
    /// Right after a snapshot was written.
    fn after_snapshot(etag: String, snapshot_len: u64) -> Position {
        Position {
            etag: Some(etag),
            snapshot_len,
            ..Position::default()
        }
    }

    /// Whether the journal holds anything to fold into a new snapshot.
    fn journal_pending(&self) -> bool {
        self.journal_bytes > 0 || self.sealed
    }
}

/// Why this run stopped writing to the remote store.
#[derive(Debug, Clone)]
enum Stopped {
    /// A request failed (outage, refusal): the rescue journal takes over; close tries again.
    Failing(String),
    /// Someone else wrote: never write again in this run.
    Conflict(String),
}

/// A remote state opened for writing: loaded, locked, and appended to by [`commit`].
///
/// [`commit`]: StateStore::commit
pub struct S3Store {
    remote: Remote,
    state: StateFile,
    pos: Position,
    lock: Option<HeldLock>,
    rescue: RescueFile,
    rescue_header: Header,
    stopped: Option<Stopped>,
}

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
    /// machine left in the rescue journal. `local` is the local state file that a project
    /// moving to this backend would still have: if the remote state does not exist yet and
    /// `local` holds resources, opening is refused (migrate explicitly, never silently).
    pub fn open(
        backend: &S3Backend,
        holder: LockHolder,
        wait: Option<Duration>,
        local: Option<&Path>,
    ) -> Result<S3Store, StateError> {
        let remote = Remote::new(backend)?;
        let rescue = RescueFile::for_state(&remote.url);
        let pending = rescue.load().map_err(|e| {
            RemoteError::Invalid(format!(
                "the rescue journal {} cannot be read ({e}); it holds results not yet recorded \
                 in {}: repair or move it aside",
                rescue.path().display(),
                remote.url
            ))
        })?;
        remote
            .client
            .probe(&remote.key)
            .map_err(|e| remote.fail("open", e))?;
        let info = LockInfo::new(&holder, &remote.url);
        let lock_key = remote.lock_key();
        let started = std::time::Instant::now();
        let held = take_lock(
            &remote.client,
            &lock_key,
            info.clone(),
            wait,
            pending.as_ref(),
        )?;
        log::info!(
            "took the lock {} of {} in {:.1} ms",
            info.id,
            remote.url,
            started.elapsed().as_secs_f64() * 1000.0
        );
        let mut store = S3Store {
            rescue_header: Header {
                nivis_rescue: 1,
                state: remote.url.clone(),
                lock_id: info.id.clone(),
                host: info.host.clone(),
                pid: info.pid,
            },
            remote,
            state: StateFile::empty(),
            pos: Position::default(),
            lock: Some(held),
            rescue,
            stopped: None,
        };
        let loaded = store.remote.load()?;
        if let (false, Some(local), None) = (loaded.exists, local, &pending) {
            refuse_silent_migration(&store.remote.url, local)?;
        }
        store.state = loaded.state;
        store.pos = loaded.pos;
        if let Some(rescued) = pending {
            store.push_rescued(rescued, loaded.exists)?;
        }
        if store.pos.journal_pending() {
            store.compact()?;
        }
        Ok(store)
    }

    /// Reads the state of `backend` without locking.
    pub fn read_only(backend: &S3Backend) -> Result<StateFile, StateError> {
        let remote = Remote::new(backend)?;
        let rescue = RescueFile::for_state(&remote.url);
        if rescue.path().exists() {
            log::warn!(
                "results of an earlier run are waiting in the rescue journal {}: they are not in \
                 {} yet; the next apply from this machine records them first",
                rescue.path().display(),
                remote.url
            );
        }
        Ok(remote.load()?.state)
    }

    /// Removes the lock of `backend` if its id is `id`.
    pub fn force_unlock(backend: &S3Backend, id: &str) -> Result<Unlocked, StateError> {
        let remote = Remote::new(backend)?;
        lock::force_unlock(&remote.client, &remote.lock_key(), id)
    }

    /// The state URL, `s3://bucket/key`.
    pub fn url(&self) -> &str {
        &self.remote.url
    }

    /// The current state.
    pub fn state(&self) -> &StateFile {
        &self.state
    }

    /// Replaces the whole state by `next` (state push, migration): seals the journal and
    /// writes `next` as the snapshot, with a serial above both.
    pub fn replace(&mut self, mut next: StateFile) -> Result<(), StateError> {
        self.check_writable()?;
        next.serial = next.serial.max(self.state.serial) + 1;
        let (etag, len) = self
            .remote
            .replace_snapshot(
                self.state.serial,
                self.pos.next_seq,
                self.pos.etag.as_deref(),
                &next,
            )
            .inspect_err(|_| self.stop_on_failure("replace"))?;
        let old = self.state.serial;
        self.after_snapshot(next, etag, len);
        self.remote.delete_namespace(old);
        Ok(())
    }

    /// Folds the journal into a new snapshot; `serial` goes up by one.
    pub fn compact(&mut self) -> Result<(), StateError> {
        self.check_writable()?;
        let old = self.state.serial;
        self.state.serial += 1;
        let written = self.remote.replace_snapshot(
            old,
            self.pos.next_seq,
            self.pos.etag.as_deref(),
            &self.state,
        );
        self.state.serial = old;
        let (etag, len) = written.inspect_err(|_| self.stop_on_failure("compact"))?;
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

    /// Records what remains, compacts and releases the lock. Results kept in the rescue
    /// journal are tried once more; if they still cannot be recorded, the error names them and
    /// the lock stays (the next run from this machine takes it over and records them first).
    pub fn close(mut self) -> Result<(), StateError> {
        if let Some(Stopped::Failing(_)) = &self.stopped {
            self.retry_rescued()?;
        }
        if let Some(stopped) = &self.stopped {
            let cause = match stopped {
                Stopped::Failing(c) | Stopped::Conflict(c) => c.clone(),
            };
            return Err(self.not_recorded(cause));
        }
        if self.pos.journal_pending() {
            if let Err(e) = self.compact() {
                log::warn!(
                    "could not compact {} (the journal keeps everything): {e}",
                    self.remote.url
                );
            }
        }
        self.release();
        Ok(())
    }

    fn after_snapshot(&mut self, state: StateFile, etag: String, len: u64) {
        self.state = state;
        self.pos = Position::after_snapshot(etag, len);
    }

    fn check_writable(&self) -> Result<(), StateError> {
        match &self.stopped {
            None => Ok(()),
            Some(Stopped::Failing(cause) | Stopped::Conflict(cause)) => {
                Err(RemoteError::Invalid(format!(
                    "{} is not written any more in this run: {cause}",
                    self.remote.url
                ))
                .into())
            }
        }
    }

    /// After a failed snapshot replacement the namespace may be sealed: write nothing more.
    fn stop_on_failure(&mut self, what: &str) {
        self.stopped
            .get_or_insert_with(|| Stopped::Failing(format!("{what} failed")));
    }

    /// Writes `changes` as the next journal segment.
    fn append(&mut self, changes: &[Change]) -> Result<(), StateError> {
        let line = journal::encode(&self.state.lineage, self.state.serial, changes)
            .map_err(|e| RemoteError::Invalid(format!("cannot encode a record: {e}")))?;
        let name = self.remote.segment(self.state.serial, self.pos.next_seq);
        self.remote.create(&name, &line)?;
        self.pos.next_seq += 1;
        self.pos.journal_bytes += line.len() as u64;
        Ok(())
    }

    /// Keeps `changes` in the rescue journal after `cause` stopped remote writes; they are
    /// applied in memory (they happened), and the error names them.
    fn rescue_changes(&mut self, changes: &[Change], cause: String) -> StateError {
        let ids: Vec<String> = changes.iter().map(|c| c.id().to_string()).collect();
        let (lineage, serial) = (self.state.lineage.clone(), self.state.serial);
        match self
            .rescue
            .append(&self.rescue_header, &lineage, serial, changes)
        {
            Ok(()) => {
                for change in changes {
                    self.state.apply(change);
                }
                RemoteError::NotRecorded {
                    state: self.remote.url.clone(),
                    ids,
                    rescue: Some(self.rescue.path().to_path_buf()),
                    cause,
                }
                .into()
            }
            Err(e) => RemoteError::NotRecorded {
                state: self.remote.url.clone(),
                ids,
                rescue: None,
                cause: format!(
                    "{cause}; writing the rescue journal {} failed too ({e}): these objects \
                     exist but are recorded nowhere; import them or delete them by hand",
                    self.rescue.path().display()
                ),
            }
            .into(),
        }
    }

    /// Records the results an earlier run kept in the rescue journal, before anything else.
    fn push_rescued(&mut self, rescued: Rescued, remote_exists: bool) -> Result<(), StateError> {
        let ids: Vec<String> = rescued.ids().into_iter().collect();
        let path = self.rescue.path().to_path_buf();
        let url = self.remote.url.clone();
        let invalid = |why: String| -> StateError {
            RemoteError::Invalid(format!(
                "the rescue journal {} cannot be recorded in {url}: {why}; move it aside once \
                 you have dealt with its results ({})",
                path.display(),
                ids.join(", ")
            ))
            .into()
        };
        if rescued.header.state != self.remote.url {
            return Err(invalid(format!("it belongs to {}", rescued.header.state)));
        }
        let mut changes = Vec::new();
        for (lineage, _, record) in rescued.records {
            if lineage != self.state.lineage {
                if remote_exists || !changes.is_empty() {
                    return Err(invalid(format!(
                        "it extends state lineage {lineage}, the remote state has lineage {}",
                        self.state.lineage
                    )));
                }
                // The remote state was never created: the rescued results start it.
                self.state = StateFile::with_lineage(lineage);
            }
            changes.extend(record);
        }
        if !changes.is_empty() {
            self.append(&changes).map_err(|e| {
                StateError::from(RemoteError::NotRecorded {
                    state: self.remote.url.clone(),
                    ids: ids.clone(),
                    rescue: Some(path.clone()),
                    cause: e.to_string(),
                })
            })?;
            for change in &changes {
                self.state.apply(change);
            }
        }
        self.rescue
            .remove()
            .map_err(|e| invalid(format!("recorded, but removing it failed: {e}")))?;
        log::warn!(
            "recorded {} result(s) an earlier run kept in the rescue journal {}: {}",
            ids.len(),
            path.display(),
            ids.join(", ")
        );
        Ok(())
    }

    /// One more try, at close, to record what this run kept in the rescue journal.
    fn retry_rescued(&mut self) -> Result<(), StateError> {
        let Some(rescued) = self.rescue.load().ok().flatten() else {
            return Ok(());
        };
        let changes: Vec<Change> = rescued
            .records
            .into_iter()
            .flat_map(|(_, _, c)| c)
            .collect();
        if self.append(&changes).is_ok() && self.rescue.remove().is_ok() {
            self.stopped = None;
            log::warn!(
                "{} became reachable again: the results kept in the rescue journal are recorded",
                self.remote.url
            );
        }
        Ok(())
    }

    fn not_recorded(&self, cause: String) -> StateError {
        let mut ids: BTreeSet<String> = self.rescue.appended_ids().clone();
        if let Ok(Some(r)) = self.rescue.load() {
            ids.extend(r.ids());
        }
        let rescue = self
            .rescue
            .path()
            .exists()
            .then(|| self.rescue.path().to_path_buf());
        let lock = self
            .lock
            .as_ref()
            .map(|l| l.info.id.clone())
            .unwrap_or_default();
        RemoteError::NotRecorded {
            state: self.remote.url.clone(),
            ids: ids.into_iter().collect(),
            rescue,
            cause: format!(
                "{cause}. The lock {lock} stays held so that no other machine works from a \
                 state that lacks them"
            ),
        }
        .into()
    }

    fn release(&mut self) {
        if let Some(held) = self.lock.take() {
            let started = std::time::Instant::now();
            match lock::release(&self.remote.client, &held) {
                Ok(None) => log::info!(
                    "released the lock {} in {:.1} ms",
                    held.info.id,
                    started.elapsed().as_secs_f64() * 1000.0
                ),
                Ok(Some(warning)) => log::warn!("{warning}"),
                Err(e) => log::warn!(
                    "could not release the lock of {}: {e}; once this run is over, `nivis \
                     force-unlock {}` removes it",
                    self.remote.url,
                    held.info.id
                ),
            }
        }
    }
}

impl Drop for S3Store {
    fn drop(&mut self) {
        // With results only in the rescue journal, the lock stays so that nobody else works from
        // a state that lacks them; the next run from this machine takes it over.
        if !self.rescue.path().exists() {
            self.release();
        }
    }
}

impl StateStore for S3Store {
    fn state(&self) -> &StateFile {
        &self.state
    }

    /// Writes one journal segment. After `Err` the changes are in the rescue journal (named
    /// in the error) and applied in memory, or, if even that failed, the error says so; either
    /// way nothing more is written remotely in this run.
    fn commit(&mut self, changes: &[Change]) -> Result<(), StateError> {
        if changes.is_empty() {
            return Ok(());
        }
        if let Some(stopped) = &self.stopped {
            let cause = match stopped {
                Stopped::Failing(c) | Stopped::Conflict(c) => c.clone(),
            };
            return Err(self.rescue_changes(changes, cause));
        }
        if let Err(e) = self.append(changes) {
            let cause = e.to_string();
            self.stopped = Some(match &e {
                StateError::Remote(r) if matches!(**r, RemoteError::Conflict { .. }) => {
                    Stopped::Conflict(cause.clone())
                }
                _ => Stopped::Failing(cause.clone()),
            });
            return Err(self.rescue_changes(changes, cause));
        }
        for change in changes {
            self.state.apply(change);
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
}

/// Takes the lock; if it is held by this machine's earlier run whose results are in the rescue
/// journal and that process is gone, takes it over.
fn take_lock(
    client: &Client,
    key: &str,
    info: LockInfo,
    wait: Option<Duration>,
    pending: Option<&Rescued>,
) -> Result<HeldLock, StateError> {
    match lock::acquire(client, key, info.clone(), wait) {
        Err(StateError::Remote(e)) => {
            if let (
                RemoteError::Locked {
                    holder: Some(h), ..
                },
                Some(p),
            ) = (&*e, pending)
            {
                if h.id == p.header.lock_id && h.host == info.host && !process_alive(h.pid) {
                    lock::force_unlock(client, key, &h.id)?;
                    log::warn!(
                        "took over the lock {} of an earlier run from this machine (pid {}, gone)",
                        h.id,
                        h.pid
                    );
                    return lock::acquire(client, key, info, wait);
                }
            }
            Err(StateError::Remote(e))
        }
        other => other,
    }
}

fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 sends nothing; it only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
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
