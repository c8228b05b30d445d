//! State: the durable record of what Nivis has applied — the state model, its stores (the local
//! file, or S3) and the state lock.
//!
//! # In scope
//!
//! - **Model**: [`StateFile`] holds [`ResourceState`]s by id; [`Change`] is one put or removal.
//! - **Persistence**: [`Store`] keeps a snapshot plus an append-only journal, commits batches of
//!   changes with one `fdatasync` each, recovers from crashes at any instant, and compacts.
//! - **Locking**: one writer per state at a time; a refused opener learns who holds the lock
//!   ([`LockHolder`], with the lock id `force-unlock` must name, and whether it still runs:
//!   [`Liveness`]). This is the only module that takes file locks. A run that only reads
//!   (`plan`) may hold the same lock without opening the store: [`ReadLock`].
//! - **Contract**: the [`StateStore`] trait, an in-memory [`MemoryStore`], and [`conformance`],
//!   one test every store must pass. Every call that writes records takes the [`Mutation`]
//!   token, which only the mutating paths make (DESIGN §39).
//! - **Backends**: [`Backend`] chooses the local file store or the S3 store ([`s3`]) and the
//!   environment; a writer holds either as a [`LockedStore`]. Both share the formats below, the
//!   lock record ([`LockHolder`]), `force-unlock`'s checks and the rescue file (`rescue.rs`).
//!
//! # Out of scope
//!
//! - **Providers**: attributes and private bytes are opaque here; schema upgrades happen in the
//!   engine, with the provider.
//! - **The graph**: `dependencies` is stored, never interpreted.
//! - **Rendering**: nothing here prints; errors carry the facts in fields and advice in `Display`.
//! - **Async**: every call blocks; waiting for the disk is the point.
//!
//! # Files
//!
//! For a state path `P` (default [`DEFAULT_PATH`]) the store uses, all created with mode 0600
//! (never group- or world-readable, since attributes may hold secrets):
//!
//! | file          | content                                                            |
//! |---------------|--------------------------------------------------------------------|
//! | `P`           | snapshot: one [`StateFile`] as pretty-printed JSON                 |
//! | `P.journal`   | changes since the snapshot: one JSON object per line, one per commit |
//! | `P.lock`      | the lock; while held, a [`LockHolder`] record as JSON               |
//! | `P.tmp`       | exists only during compaction                                       |
//! | `P.backup`    | the snapshot before the last run that replaced it (`backup.rs`)      |
//! | `P.audit`     | the audit log: one hash-chained record per mutating run (`audit.rs`) |
//! | `P.rescue`    | exists only after a run could not write its journal (see below; its  |
//! |               | format, shared with the S3 store, is described in `rescue.rs`)       |
//!
//! If `P` is a symlink it is followed (through any chain of links, a dangling last one naming
//! where the state is created): every file lives beside the link's target, and the link is
//! never replaced.
//!
//! A snapshot (format version [`SCHEMA_VERSION`] = 3):
//!
//! ```json
//! {
//!   "schemaVersion": 3,
//!   "serial": 4,
//!   "lineage": "6f1c0e2a-93b4-4c1d-8e5f-0a7b3c2d1e9f",
//!   "resources": {
//!     "web": {
//!       "id": "web",
//!       "kind": "managed",
//!       "provider": "null",
//!       "providerSource": "registry.terraform.io/hashicorp/null",
//!       "typeName": "null_resource",
//!       "schemaVersion": 0,
//!       "attributes": { "id": "5577006791947779410", "triggers": null },
//!       "private": "eyJzY2hlbWFfdmVyc2lvbiI6IjAifQ==",
//!       "dependencies": [],
//!       "sensitivePaths": [["triggers", "password"]],
//!       "status": "ready",
//!       "createBeforeDestroy": false,
//!       "deposed": []
//!     }
//!   }
//! }
//! ```
//!
//! A snapshot may also hold `pendingOperations` (absent when empty): by address, each
//! operation sent to a provider whose result no commit recorded yet (`pending.rs`, DESIGN §97).
//! A journal line's changes may then also be `{"intend": {…an operation…}}` and
//! `{"settle": "ADDRESS"}`; a `put` of an address settles what was pending on it.
//!
//! `kind` is `managed` or `data`; `status` is `ready` or `tainted`; `private` is standard padded
//! base64 or `null`; each `sensitivePaths` entry is a JSON array of keys and indices; `deposed`
//! holds objects `{"key", "attributes", "private", "schemaVersion"}` (a resource's or deposed
//! object's own `schemaVersion` is its provider schema's version, not the format's).
//!
//! Versioning, by the rule for versioned artifacts: `schemaVersion` is the format's major
//! version. Within it fields may be added: a field this build does not know, at the top, in a
//! resource or in a deposed object, is kept and written back unchanged by every rewrite. A file
//! (or journal line) of a newer major version is refused with [`StateError::UnsupportedVersion`]
//! naming it, and left untouched. Version 2 spelled the resource keys in snake_case
//! (`provider_source`, `type_name`, `schema_version`, `sensitive_paths`,
//! `create_before_destroy`, and a deposed object's `schema_version`); they are renamed on read,
//! any other key kept as it is spelled. Version 1, written by the first release, differs from 2
//! in spelling the top key `schema_version` and in having no journal-line version. Both are
//! read and rewritten as version 3 at the next compaction (the next run that changes the state).
//!
//! A journal line (shown wrapped) records one commit against the snapshot `serial` it extends:
//!
//! ```json
//! {"schemaVersion": 3, "lineage": "6f1c0e2a-…", "serial": 4,
//!  "changes": [{"put": { …a resource as above… }}, {"remove": "old-web"}]}
//! ```
//!
//! # Durability and cost
//!
//! [`Store::commit`] writes the batch as one journal line with one `write`, calls `fdatasync`
//! once, and only then applies the batch in memory and returns. Once it returns, the batch
//! survives kill -9 and power loss; a batch is all-or-nothing. The cost is O(size of the batch),
//! never O(size of the state): this is the difference from Terraform, which rewrites the whole
//! state after each resource (1000 `null_resource`s take 30–40 s to apply). Callers that finish
//! several resources at once should commit them in one batch (group commit).
//!
//! Opening replays the journal over the snapshot. A crash during a commit can leave only the last
//! line damaged (a prefix of it, or blocks written out of order, which is never valid JSON); that
//! commit never returned, so the line is dropped and truncated away. Damage anywhere else, or a
//! whole JSON line that is not a usable record, is reported as [`StateError::Corrupt`] naming the
//! line, and nothing is truncated. Records whose `serial` is older than the snapshot's were
//! already folded in by a compaction that stopped before emptying the journal, and are skipped.
//!
//! # A full disk, a failed write
//!
//! After every commit the store keeps [`JOURNAL_RESERVE_BYTES`] allocated past the end of the
//! journal (`fallocate` with `KEEP_SIZE`; skipped where unsupported). When that fails, the
//! filesystem is full: [`Store::space_error`] says so while commits still land in the space kept,
//! so the engine starts nothing new and records what is running. A commit that fails anyway
//! cuts the journal back to its last whole record and poisons the store; [`Store::recommit`]
//! retries the batch, and [`Store::rescue`] writes it to `P.rescue` (created new, 0600, never
//! through a symlink, synced), which the next [`Store::open`] commits before anything else and
//! then removes ([`Store::read_only`] applies it in memory). A state that recorded nothing yet
//! adopts the rescue file's lineage; otherwise the lineages must match.
//!
//! Compaction writes the whole state to `P.tmp`, fsyncs it, renames it over `P`, fsyncs the
//! directory, then empties the journal; the snapshot `serial` goes up by one. It runs on open
//! (when the journal is not empty), on [`Store::close`], on [`Store::compact`], and after a commit
//! once the journal reaches [`COMPACT_MIN_JOURNAL_BYTES`] (4 MiB) or the snapshot's size,
//! whichever is larger. The second bound keeps commits amortised O(batch size): a compaction
//! writing S bytes happens only after at least S bytes of journal, and replay reads at most about
//! twice the state. Dropping a [`Store`] without `close` skips compaction; the journal keeps every
//! committed change.
//!
//! # Locking
//!
//! [`Store::open`] takes an exclusive `flock` on `P.lock` for the store's whole life, waiting up to
//! the caller's limit, and fails with [`StateError::Locked`] naming the holder. The kernel releases
//! the lock when its holder exits, however it exits; see [`Store::force_unlock`] for the
//! network-filesystem case. [`Store::read_only`] takes no lock and writes nothing.

pub mod audit;
mod backend;
pub(crate) mod backup;
mod change;
#[cfg(test)]
mod crash_tests;
mod durable;
mod error;
mod file;
mod holder;
mod journal;
mod keys;
mod lock;
mod lost;
mod memory;
mod model;
mod mutation;
mod pending;
mod read_lock;
mod rescue;
pub mod s3;
mod sensitive;
mod snapshot;
#[cfg(test)]
mod testutil;

pub(crate) use file::{COMPACT_MIN_JOURNAL_BYTES, DEFAULT_PATH};
pub(crate) use holder::{format_utc, host_name, unix_now, user_name};
pub(crate) use pending::{this_run, PendingAction, PendingOperation};
pub(crate) use read_lock::ReadLock;
pub(crate) use s3::config::DEFAULT_ENV;
pub(crate) use {
    backend::{env_state_path, BackendError},
    file::{parse_snapshot, StatePaths},
    holder::{KeptFor, Liveness},
    keys::StateKey,
    lost::IfLost,
    model::{ResourceStatus, SCHEMA_VERSION},
};
pub use {
    backend::{Backend, LockedStore},
    change::Change,
    error::StateError,
    file::Store,
    holder::{ForceUnlock, LockHolder},
    lost::LostState,
    memory::{MemoryStore, Mirror},
    model::{DeposedObject, FormatError, ResourceKind, ResourceState, StateFile},
    mutation::Mutation,
};

/// What every state store offers: read the current state, and commit a batch of changes.
///
/// Locking is not part of the trait: a [`Store`] holds its lock from `open` to drop, and a
/// [`MemoryStore`] needs none.
pub trait StateStore {
    /// The current state, including every committed change.
    fn state(&self) -> &StateFile;

    /// Records `changes` in order, all or nothing, and applies them to [`state`](Self::state).
    /// When this returns `Ok`, the changes are as durable as the store promises. An empty batch
    /// does nothing. Only a holder of the [`Mutation`] token can call it.
    fn commit(&mut self, changes: &[Change], mutation: Mutation) -> Result<(), StateError>;
}

/// The contract every [`StateStore`] must meet, as assertions; panics on the first violation.
///
/// Pass a store whose state is empty and the test's grant to change it. Run it from each
/// store's tests (and from any new store's).
pub fn conformance(store: &mut dyn StateStore, mutation: Mutation) {
    use serde_json::json;

    let sample = |id: &str, n: i64| {
        ResourceState::new(
            id,
            ResourceKind::Managed,
            "null",
            "registry.terraform.io/hashicorp/null",
            "null_resource",
            json!({ "id": id, "n": n }),
        )
    };
    let ids = |store: &dyn StateStore| store.state().ids().map(String::from).collect::<Vec<_>>();

    assert!(store.state().is_empty(), "conformance needs an empty store");
    assert_eq!(store.state().schema_version, SCHEMA_VERSION);
    let lineage = store.state().lineage.clone();
    assert!(!lineage.is_empty(), "a state has a lineage");

    store.commit(&[], mutation).expect("an empty batch commits");
    assert!(store.state().is_empty(), "an empty batch changes nothing");

    let (a, b) = (sample("a", 1), sample("b", 2));
    store
        .commit(&[Change::Put(b.clone()), Change::Put(a.clone())], mutation)
        .expect("commit two puts");
    assert_eq!(store.state().get("a"), Some(&a));
    assert_eq!(store.state().get("b"), Some(&b));
    assert_eq!(ids(store), ["a", "b"], "resources are ordered by id");

    let mut a2 = sample("a", 10);
    a2.private = Some(vec![0, 159, 255]);
    a2.status = ResourceStatus::Tainted;
    a2.sensitive_paths = vec![json!(["n"])];
    a2.deposed = vec![DeposedObject::new(
        "d1",
        json!({"id": "a-old"}),
        Some(b"old".to_vec()),
        2,
    )];
    store
        .commit(&[Change::Put(a2.clone())], mutation)
        .expect("commit a replacement");
    assert_eq!(store.state().get("a"), Some(&a2), "a put replaces");
    assert_eq!(store.state().len(), 2);

    store
        .commit(
            &[Change::Remove("b".into()), Change::Remove("missing".into())],
            mutation,
        )
        .expect("commit removals");
    assert_eq!(
        ids(store),
        ["a"],
        "remove forgets; removing an absent id is harmless"
    );

    let c = sample("c", 3);
    let a3 = sample("a", 30);
    store
        .commit(
            &[
                Change::Put(c.clone()),
                Change::Remove("c".into()),
                Change::Remove("a".into()),
                Change::Put(a3.clone()),
            ],
            mutation,
        )
        .expect("commit a mixed batch");
    assert_eq!(ids(store), ["a"], "a batch applies in order");
    assert_eq!(store.state().get("a"), Some(&a3));
    assert_eq!(store.state().lineage, lineage, "commits keep the lineage");
}
