//! Helpers shared by the state tests.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use super::file::StatePaths;
use super::{Change, LockHolder, Mutation, ResourceKind, ResourceState, Store, DEFAULT_PATH};

/// The state tests' grant to write records.
pub(super) const GRANT: Mutation = Mutation::for_tests();

pub(super) fn res(id: &str, n: u64) -> ResourceState {
    ResourceState::new(
        id,
        ResourceKind::Managed,
        "null",
        "registry.terraform.io/hashicorp/null",
        "null_resource",
        json!({ "id": id, "n": n, "triggers": { "k": format!("value-{n}") } }),
    )
}

pub(super) fn put(id: &str, n: u64) -> Change {
    Change::Put(res(id, n))
}

pub(super) fn holder(command: &str) -> LockHolder {
    LockHolder::current(command)
}

pub(super) fn open(path: &Path) -> Store {
    Store::open(path, holder("test"), Some(Duration::from_secs(10))).unwrap()
}

pub(super) fn temp_state() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DEFAULT_PATH);
    (dir, path)
}

pub(super) fn journal_path(path: &Path) -> PathBuf {
    StatePaths::new(path).journal
}

pub(super) fn file_len(path: &Path) -> u64 {
    fs::metadata(path).unwrap().len()
}
