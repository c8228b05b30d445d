//! One change to a state: what a commit holds, a journal line lists and `StateFile::apply`
//! carries out. Not: how a store writes it (`file`, `s3`, `journal`).

use serde::{Deserialize, Serialize};

use super::model::ResourceState;
use super::pending::PendingOperation;

/// One change to a state; a store commits a batch of them at once.
#[allow(
    clippy::large_enum_variant,
    reason = "changes live briefly in small batches: boxing `Put` would cost an allocation per resource"
)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Insert or replace the resource under its id.
    Put(ResourceState),
    /// Forget the resource with this id (nothing happens if it is absent).
    Remove(String),
    /// An operation is about to be sent to a provider: remember it until its result is
    /// recorded (DESIGN §97).
    Intend(PendingOperation),
    /// The operation pending on this id ended without an object to record (it failed with the
    /// provider's answer, or the user said the object does not exist).
    Settle(String),
}

impl Change {
    /// Whether it records an object (a put or a removal), not a note of a pending operation:
    /// what a rescue file counts and lists as results.
    pub(crate) fn is_record(&self) -> bool {
        matches!(self, Change::Put(_) | Change::Remove(_))
    }

    /// The resource id this change touches.
    pub(crate) fn id(&self) -> &str {
        match self {
            Change::Put(resource) => &resource.id,
            Change::Remove(id) | Change::Settle(id) => id,
            Change::Intend(operation) => &operation.address,
        }
    }
}
