//! Recording results durably before announcing them, and what happens when the state cannot
//! take them.
//!
//! Owns: the changes waiting for the next commit, the events that may only be sent once those
//! changes are durable (`finished` means "done and recorded"), the call to halt dispatch when a
//! state write failed or the state's filesystem is full, and the recovery once the operations
//! already running have ended: retry the write, else write the rescue file, else name every
//! object that exists but is not recorded; all of it under the `Mutation` token the changes
//! were made with. Also [`Destination`], where moves and imports go: the locked state (with the
//! token) or the in-memory copy a plan previews on. Not: what the changes are (`node`),
//! scheduling (`sched`), the files (`state`).

use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::events::{Event, Sink};
use super::EngineError;
use crate::sched::Status;
use crate::state::{Change, PendingOperation, StateError, StateFile};
use crate::state::{LockedStore, MemoryStore, Mutation, StateStore};
use crossbeam_channel::Sender;

/// Where the changes of moves and imports go: into the run's locked state, with the token, or
/// into the in-memory copy a plan (or the preview before an apply) works on.
pub(super) enum Destination<'a> {
    /// Committed to the run's state, and reported as recorded.
    Recorded(&'a mut dyn LockedStore, Mutation),
    /// Applied to a copy that nothing outlives, and reported as planned.
    Previewed(&'a mut MemoryStore),
}

impl Destination<'_> {
    /// Commits (or applies) `changes` as one batch.
    pub(super) fn commit(&mut self, changes: &[Change]) -> Result<(), StateError> {
        match self {
            Destination::Recorded(store, mutation) => store.commit(changes, *mutation),
            Destination::Previewed(copy) => {
                copy.apply(changes);
                Ok(())
            }
        }
    }

    /// The state the changes go into.
    pub(super) fn state(&self) -> &StateFile {
        match self {
            Destination::Recorded(store, _) => store.state(),
            Destination::Previewed(copy) => copy.state(),
        }
    }

    /// Whether the changes are recorded (not only previewed).
    pub(super) fn recorded(&self) -> bool {
        matches!(self, Destination::Recorded(..))
    }
}

/// Results on their way into the state for one batch of operations.
#[derive(Default)]
pub(super) struct Recorder {
    /// Changes for the next commit.
    pending: Vec<Change>,
    /// The token the changes were recorded under (the first `record` brings it; a plan,
    /// which holds none, never records).
    grant: Option<Mutation>,
    /// Events to send once `pending` (and everything before it) is durable.
    announce: Vec<Event>,
    /// The first failed write; from then on nothing is committed until [`Recorder::settle`].
    failure: Option<StateError>,
    /// Changes not recorded since the failure, in order.
    unrecorded: Vec<Change>,
    /// Events held back with them.
    held: Vec<Event>,
    /// The turns waiting to hear whether their pending operation is durable (DESIGN §97):
    /// answered by the next flush.
    acks: Vec<Sender<bool>>,
    /// The addresses whose pending operation this run noted and has not settled.
    intended: HashSet<String>,
}

impl Recorder {
    /// Queues `change`, made under `mutation`, for the next commit.
    pub(super) fn record(&mut self, change: Change, mutation: Mutation) {
        self.grant = Some(mutation);
        self.pending.push(change);
    }

    /// Queues the note that `operation` is about to be sent; `ack` hears, once the next flush
    /// has written it, whether it is durable (the turn sends nothing otherwise).
    pub(super) fn intend(
        &mut self,
        operation: PendingOperation,
        mutation: Mutation,
        ack: Sender<bool>,
    ) {
        self.intended.insert(operation.address.clone());
        self.record(Change::Intend(operation), mutation);
        self.acks.push(ack);
    }

    /// Notes that resource `id` (of `type_name`, by `provider`), with no record, will be
    /// created with `config`: written with the next commit, which usually comes before its
    /// turn reaches the create (the flush after the batch it was dispatched with). The turn
    /// waits on the answer returned (DESIGN §97).
    pub(super) fn note_create(
        &mut self,
        id: &str,
        type_name: &str,
        provider: &str,
        config: &crate::value::Value,
        mutation: Mutation,
    ) -> crossbeam_channel::Receiver<bool> {
        let action = crate::state::PendingAction::Create;
        let operation = super::node::pending_operation(id, type_name, provider, action, config);
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.intend(operation, mutation, tx);
        rx
    }

    /// The turn of `id` ended: settles the operation it noted as pending, unless its result's
    /// record (`recorded`, a put) settles it already or the provider gave no answer
    /// (`in_doubt`: the object may exist, so the note stays for the next run).
    pub(super) fn settle_intent(
        &mut self,
        id: &str,
        in_doubt: bool,
        recorded: bool,
        mutation: Mutation,
    ) {
        if self.intended.remove(id) && !in_doubt && !recorded {
            self.record(Change::Settle(id.to_string()), mutation);
        }
    }

    /// Sends `event` once every change queued so far is durable.
    pub(super) fn announce(&mut self, event: Event) {
        self.announce.push(event);
    }

    /// Commits the queued changes as one batch (one fsync), then sends the events that waited
    /// for them. After a failed write, only collects.
    pub(super) fn flush(&mut self, holder: &mut dyn LockedStore, sink: &mut dyn Sink) {
        let ready = self.failure.is_none() && !self.pending.is_empty();
        if let Some(mutation) = self.grant.filter(|_| ready) {
            // The provider calls are over; a slow or hung state write must not read as one.
            for event in &self.announce {
                if let Event::Finished { phase, id, .. } = event {
                    sink.event(Event::Recording {
                        phase: *phase,
                        id: id.clone(),
                    });
                }
            }
            if let Err(e) = holder.commit(&self.pending, mutation) {
                self.failure = Some(e);
            }
        }
        let durable = self.failure.is_none();
        for ack in self.acks.drain(..) {
            // A turn that stopped waiting has nothing to send.
            let _ = ack.send(durable);
        }
        if !durable {
            // A note in a batch the state did not take was answered `false` above: its
            // operation is not sent. The write may still have landed (its answer lost, or the
            // lock found gone after it), so what is retried or rescued settles the note again
            // right after it: neither the state nor a replayed rescue file keeps it, and a
            // rescue file holds the landed segment's changes, which shows nobody else wrote.
            for change in self.pending.drain(..) {
                let settled = match &change {
                    Change::Intend(operation) => {
                        self.intended.remove(&operation.address);
                        Some(Change::Settle(operation.address.clone()))
                    }
                    _ => None,
                };
                self.unrecorded.push(change);
                self.unrecorded.extend(settled);
            }
            self.held.append(&mut self.announce);
            return;
        }
        self.pending.clear();
        for event in self.announce.drain(..) {
            sink.event(event);
        }
    }

    /// Whether to start nothing new: a write failed, or the state's filesystem is full (what
    /// is running still fits in the space the store keeps free).
    pub(super) fn halted(&self, holder: &dyn LockedStore) -> bool {
        self.failure.is_some() || holder.space_error().is_some() || holder.lock_lost().is_some()
    }

    /// [`Recorder::settle`] after a scheduler run whose `statuses` say what never started.
    pub(super) fn settle_run(
        self,
        holder: &mut dyn LockedStore,
        sink: &mut dyn Sink,
        phase: u32,
        statuses: &[Status],
    ) -> Result<(), EngineError> {
        let not_started = statuses.iter().filter(|s| **s == Status::Halted).count();
        match self.settle(holder, sink, phase, not_started) {
            Some(failure) => Err(EngineError::StateWrite(Box::new(failure))),
            None => Ok(()),
        }
    }

    /// Ends the batch once nothing runs any more; `not_started` jobs were never dispatched.
    /// Returns what went wrong, if anything did: after a failed write the results are retried,
    /// then rescued, and only if both fail reported as unrecorded (events and error).
    pub(super) fn settle(
        mut self,
        holder: &mut dyn LockedStore,
        sink: &mut dyn Sink,
        phase: u32,
        not_started: usize,
    ) -> Option<WriteFailure> {
        self.flush(holder, sink);
        let Some(failure) = self.failure.take() else {
            let cause = holder
                .lock_lost()
                .or_else(|| holder.space_error().map(|e| e.to_string()))
                .filter(|_| not_started > 0)?;
            return Some(WriteFailure {
                cause,
                outcome: Outcome::AllRecorded,
                not_started,
                remedy: holder.remedy(),
            });
        };
        let outcome = match self.grant {
            Some(mutation) => recover(holder, &self.unrecorded, mutation),
            // Nothing was recorded, so nothing failed to be.
            None => Outcome::AllRecorded,
        };
        let objects = || self.unrecorded.iter().filter_map(Unrecorded::of).collect();
        let lost: Vec<Unrecorded> = match &outcome {
            Outcome::Lost { .. } => objects(),
            _ => Vec::new(),
        };
        for event in self.held {
            // A `finished` for a change that is not recorded would be a lie.
            let about_lost =
                matches!(&event, Event::Finished { id, .. } if lost.iter().any(|u| &u.id == id));
            if !about_lost {
                sink.event(event);
            }
        }
        for u in &lost {
            sink.event(Event::Unrecorded {
                phase,
                id: u.id.clone(),
                object_id: u.object_id.clone(),
                deleted: u.deleted,
            });
        }
        let outcome = match outcome {
            Outcome::Lost { reason, .. } => Outcome::Lost {
                reason,
                objects: lost,
            },
            Outcome::Rescued { path, .. } => Outcome::Rescued {
                path,
                objects: objects(),
            },
            other => other,
        };
        Some(WriteFailure {
            cause: failure.to_string(),
            outcome,
            not_started,
            remedy: holder.remedy(),
        })
    }
}

/// Retries the write (the failure may have been passing), then writes the rescue file.
fn recover(holder: &mut dyn LockedStore, changes: &[Change], mutation: Mutation) -> Outcome {
    if changes.is_empty() {
        return Outcome::AllRecorded;
    }
    let mut last = None;
    for pause in [0, 200, 1000] {
        std::thread::sleep(Duration::from_millis(pause));
        match holder.recommit(changes, mutation) {
            Ok(()) => return Outcome::Retried,
            Err(e) => last = Some(e),
        }
    }
    match holder.rescue(changes, mutation) {
        Ok(path) => Outcome::Rescued {
            path,
            objects: Vec::new(),
        },
        Err(e) => Outcome::Lost {
            reason: format!(
                "{}; then {e}",
                last.map(|e| e.to_string()).unwrap_or_default()
            ),
            objects: Vec::new(),
        },
    }
}

/// An object a change was about, for the report when the change could not be recorded.
#[derive(Debug, Clone)]
pub(crate) struct Unrecorded {
    /// The resource id (address).
    pub(crate) id: String,
    /// The provider's id for the object (its `id` attribute), when it has one.
    pub(crate) object_id: Option<String>,
    /// The object was deleted (the state still records it) rather than created or changed.
    pub(crate) deleted: bool,
}

impl Unrecorded {
    /// The object a change would have recorded; none for the notes of pending operations.
    fn of(change: &Change) -> Option<Unrecorded> {
        match change {
            Change::Put(r) => Some(Unrecorded {
                id: r.id.clone(),
                object_id: r.attributes["id"].as_str().map(str::to_string),
                deleted: false,
            }),
            Change::Remove(id) => Some(Unrecorded {
                id: id.clone(),
                object_id: None,
                deleted: true,
            }),
            Change::Intend(_) | Change::Settle(_) => None,
        }
    }
}

/// How the results of the operations that were running ended up.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Every result is in the state (nothing failed to write, or the retry worked).
    AllRecorded,
    /// The write failed, then succeeded when retried.
    Retried,
    /// Saved to the rescue file at `path`, which the next run records first; until then the
    /// state lacks `objects`.
    Rescued {
        /// The rescue file.
        path: PathBuf,
        /// What state lacks until the next run records the rescue file.
        objects: Vec<Unrecorded>,
    },
    /// Not recorded anywhere.
    Lost {
        /// Why the retry and the rescue file failed.
        reason: String,
        /// What is not recorded.
        objects: Vec<Unrecorded>,
    },
}

/// A run stopped because the state could not be written (or its disk is full).
#[derive(Debug)]
pub struct WriteFailure {
    /// The failed write, or why no space could be kept free.
    pub(crate) cause: String,
    /// What became of the results of the operations that were running.
    pub(crate) outcome: Outcome,
    /// Operations never started.
    pub(crate) not_started: usize,
    /// What to do about it, from the store (it knows where the state lives).
    pub(crate) remedy: String,
}

impl fmt::Display for WriteFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stopped: the state could not be written: {}. Nothing new was started after that \
             ({} operation(s) not started); the operations already running finished. ",
            self.cause, self.not_started
        )?;
        match &self.outcome {
            Outcome::AllRecorded => write!(f, "Every operation that ran is recorded in state.")?,
            Outcome::Retried => write!(
                f,
                "Their results were recorded when the write was retried; everything that ran \
                 is in state."
            )?,
            Outcome::Rescued { path, objects } => {
                write!(
                    f,
                    "The state could not take their results, so they were saved to the rescue \
                     file {} (mode 0600).",
                    path.display()
                )?;
                write_objects(
                    f,
                    objects,
                    "are kept in the rescue file but not in the state yet",
                )?;
            }
            Outcome::Lost { reason, objects } => {
                write!(
                    f,
                    "Their results could not be recorded anywhere ({reason})."
                )?;
                write_objects(
                    f,
                    objects,
                    "exist but the state does not record them; import or delete them before \
                     the next apply, or it will create them again",
                )?;
                // The store's remedy would end in "run again", which creates them twice.
                return write_imports(f, objects);
            }
        }
        write!(f, "\n{}", self.remedy)
    }
}

/// What to do after results were recorded nowhere: make the state writable, adopt each object
/// that exists, and only then apply.
fn write_imports(f: &mut fmt::Formatter<'_>, objects: &[Unrecorded]) -> fmt::Result {
    write!(
        f,
        "\nA plain rerun would create these objects a second time. Once the state can be \
         written again, adopt each (or delete it with the provider's own tools) before the next \
         apply:"
    )?;
    for u in objects.iter().filter(|u| !u.deleted) {
        match &u.object_id {
            Some(id) => write!(f, "\n  nivis import {} {id}", u.id)?,
            None => write!(
                f,
                "\n  nivis import {} <ID> (find the id with the provider)",
                u.id
            )?,
        }
    }
    Ok(())
}

/// Lists `objects`: those that exist (`exist` says what became of them), then the deleted ones.
fn write_objects(f: &mut fmt::Formatter<'_>, objects: &[Unrecorded], exist: &str) -> fmt::Result {
    let id = |u: &Unrecorded| match &u.object_id {
        Some(o) => format!("{} (id {o})", u.id),
        None => format!("{} (no id attribute)", u.id),
    };
    let (deleted, existing): (Vec<&Unrecorded>, Vec<&Unrecorded>) =
        objects.iter().partition(|u| u.deleted);
    if !existing.is_empty() {
        write!(f, "\nThese objects {exist}:")?;
        for u in existing {
            write!(f, "\n  {}", id(u))?;
        }
    }
    if !deleted.is_empty() {
        write!(
            f,
            "\nThese objects were deleted but the state still records them (the next run \
             finds them gone):"
        )?;
        for u in deleted {
            write!(f, "\n  {}", u.id)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_recorded_nowhere_name_import_commands_never_a_plain_rerun() {
        let failure = WriteFailure {
            cause: "disk full".into(),
            outcome: Outcome::Lost {
                reason: "rescue file: read-only file system".into(),
                objects: vec![
                    Unrecorded {
                        id: "alpha.alpha_token.t__1".into(),
                        object_id: Some("alpha-7".into()),
                        deleted: false,
                    },
                    Unrecorded {
                        id: "alpha.alpha_token.t__2".into(),
                        object_id: None,
                        deleted: true,
                    },
                ],
            },
            not_started: 3,
            remedy: "Free space on the filesystem, then run again.".into(),
        };
        let text = failure.to_string();
        assert!(
            text.contains("nivis import alpha.alpha_token.t__1 alpha-7"),
            "{text}"
        );
        assert!(!text.contains("import alpha.alpha_token.t__2"), "{text}");
        assert!(!text.contains("run again"), "{text}");
    }
}
