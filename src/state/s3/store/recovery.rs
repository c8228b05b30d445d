//! What an [`S3Store`] finds when it opens: an earlier run's rescue file to replay or set
//! aside, and a state that is gone although objects beside it show it existed (DESIGN §94).
//!
//! Owns: claiming the rescue file under the lock (bound to the lock taken over, or the state
//! unmoved since), recording it, and starting over after a lost state. Not: writing a rescue
//! file (`store`), nor the lock itself (`s3::lock`).

use super::super::RemoteError;
use super::S3Store;
use crate::state::journal;
use crate::state::rescue::{self, Rescued};
use crate::state::{IfLost, LockHolder, LostState, Mutation, StateError, StateFile};

impl S3Store {
    /// A state that does not `exist`: if objects beside it show that it did, refused unless
    /// `if_lost` says otherwise; with [`IfLost::StartOver`], started over (before the rescue
    /// file `pending` is recorded). Returns whether it started over.
    pub(super) fn settle_lost(
        &mut self,
        exists: bool,
        if_lost: IfLost,
        pending: Option<&Rescued>,
    ) -> Result<bool, StateError> {
        if exists {
            return Ok(false);
        }
        let Some(lost) = self.remote.lost_evidence()? else {
            return Ok(false);
        };
        match if_lost {
            IfLost::Refuse => Err(StateError::Lost(Box::new(lost))),
            IfLost::Replace => Ok(false),
            IfLost::StartOver => self.start_over(&lost, pending).map(|()| true),
        }
    }

    /// Starts over after the state was `lost`: an empty state (of the rescue file's lineage,
    /// when one is `pending`) written as a snapshot whose serial continues after the lost
    /// one's, in a journal namespace no lost segment uses.
    fn start_over(
        &mut self,
        lost: &LostState,
        pending: Option<&Rescued>,
    ) -> Result<(), StateError> {
        let mut empty = StateFile {
            serial: lost.serial,
            ..StateFile::empty()
        };
        if let Some(rescued) = pending {
            empty.lineage = rescued.lineage.clone();
        }
        log::warn!("starting over with an empty state: {lost}");
        self.replace(empty, Mutation::for_state_verb("--accept-lost-state"))
    }

    /// Whether the state stands (`stands`: snapshot serial, journal segments) where it stood
    /// when `rescued` was written: the same, or one segment more that holds only changes the
    /// file holds too (the run wrote it, then found its lock gone, so never counted it).
    fn unmoved_since(&self, rescued: &Rescued, stands: (u64, u64)) -> bool {
        let Some((serial, segments)) = rescued.at else {
            return false;
        };
        if (serial, segments) == stands {
            return true;
        }
        if serial != stands.0 || segments + 1 != stands.1 {
            return false;
        }
        let name = self.remote.segment(serial, segments);
        let Ok(Some(object)) = self.remote.client.get(&name) else {
            return false;
        };
        let record = self
            .remote
            .open_body(&name, object.body)
            .ok()
            .and_then(|plain| journal::parse_line(plain.trim_ascii_end()).ok());
        record.is_some_and(|r| {
            r.lineage == rescued.lineage && r.changes.iter().all(|c| rescued.changes.contains(c))
        })
    }

    /// Reads this machine's rescue file, under the lock. It is replayed only if it is bound to
    /// the lock this open took over (written under that lock, or the lock was kept for it), or
    /// if it predates that binding; otherwise its lock was forced open and the state may have
    /// moved on without it, so it is set aside with a warning, never replayed.
    ///
    /// A file whose lock is gone is still replayed when the state stands where it stood when
    /// the file was written (`stands`: the snapshot serial and the journal segments now): nobody
    /// wrote since, so its results are missing from the state and nothing newer can be undone.
    pub(super) fn claim_rescue(
        &mut self,
        taken_over: Option<&LockHolder>,
        stands: (u64, u64),
    ) -> Result<Option<Rescued>, StateError> {
        let path = self.rescue_path.clone();
        let Some(rescued) = rescue::read(&path)? else {
            return Ok(None);
        };
        let Some(lock_id) = rescued.lock.clone() else {
            return Ok(Some(rescued));
        };
        let file = path.display().to_string();
        let bound = taken_over
            .is_some_and(|h| h.id == lock_id || h.kept.as_ref().is_some_and(|k| k.file == file));
        if bound {
            return Ok(Some(rescued));
        }
        if self.unmoved_since(&rescued, stands) {
            let note = format!(
                "the rescue file {file} was written under the lock {lock_id}, which is gone, but \
                 {} has not moved since (serial {}, {} journal segment(s)): its results are \
                 recorded now",
                self.remote.url, stands.0, stands.1
            );
            log::warn!("{note}");
            self.notes.push(note);
            return Ok(Some(rescued));
        }
        let aside = rescue::set_aside(&path)?;
        let note = format!(
            "the rescue file {file} was written under the lock {lock_id}, which was forced open \
             or lost since: {} may have moved on without its results, so they are not replayed. \
             It is kept as {}; these resources' objects exist but the state may not record \
             them: {}. Check each; adopt one with `nivis import ADDRESS ID` or delete it",
            self.remote.url,
            aside.display(),
            rescued.ids().join(", ")
        );
        log::warn!("{note}");
        self.notes.push(note);
        Ok(None)
    }

    /// Records the results an earlier run kept in the rescue file, before anything else.
    pub(super) fn record_rescued(
        &mut self,
        rescued: Rescued,
        fresh: bool,
    ) -> Result<(), StateError> {
        let ids = rescued.ids();
        let path = self.rescue_path.clone();
        let changes = rescued.changes_for(&path, &mut self.state, fresh)?;
        if let Err(e) = self.append(&changes) {
            // The file stays, now bound to our lock, which stays kept for it.
            let id = self.lock.as_ref().map(|l| l.holder.id.clone());
            if let Some(id) = id {
                if let Err(e) = rescue::rebind(&path, &id) {
                    log::warn!("{e}");
                }
            }
            self.keep_lock_for(ids.len());
            return Err(StateError::from(RemoteError::Invalid(format!(
                "cannot record the rescue file {} in {}: {e}; its results ({}) stay in it and \
                 the next run from this machine tries again",
                path.display(),
                self.remote.url,
                ids.join(", ")
            ))));
        }
        rescue::remove(&path)?;
        self.rescue_pending = false;
        self.recovered = ids;
        Ok(())
    }
}
