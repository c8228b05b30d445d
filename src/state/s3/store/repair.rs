//! `nivis state repair` for an S3 state whose journal lost a segment in its middle: keeps the
//! records before the gap, names what is lost after it, keeps every segment of the broken
//! journal aside and writes a new snapshot, all under the lock.
//!
//! Not: reading a healthy state (`remote`), nor what the command prints (`cli`).

use std::path::Path;

use super::super::client::Condition;
use super::super::config::S3Backend;
use super::super::lock;
use super::super::remote::Remote;
use super::super::RemoteError;
use crate::state::file::parse_snapshot;
use crate::state::journal;
use crate::state::{LockHolder, Mutation, StateError, StateFile};

/// What a repair found (and, unless a dry run, did).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Repair {
    /// The journal segment missing, by name (`None`: the journal is whole; nothing to do).
    pub(crate) missing: Option<String>,
    /// Segments kept (before the gap).
    pub(crate) kept: usize,
    /// Segments after the gap, whose records are lost.
    pub(crate) lost_segments: Vec<String>,
    /// Resource addresses the lost segments wrote or removed, where readable.
    pub(crate) lost_addresses: Vec<String>,
    /// Resources in the repaired state.
    pub(crate) resources: usize,
    /// Where the broken journal's segments were copied (the prefix).
    pub(crate) backup: String,
}

/// Finds the first missing segment of the journal of `backend`'s state and, given `write` (the
/// token; `None` is a dry run), repairs the state as the module doc says. Under the lock,
/// waiting up to `wait`.
pub(crate) fn repair(
    backend: &S3Backend,
    holder: LockHolder,
    wait: Option<std::time::Duration>,
    write: Option<Mutation>,
) -> Result<Repair, StateError> {
    let remote = Remote::new(backend)?;
    let held = lock::acquire(&remote.client, &remote.lock_key(), holder, wait)?;
    let result = repair_locked(&remote, write);
    if let Err(e) = lock::release(&remote.client, &held) {
        log::warn!("could not release the lock of {}: {e}", remote.url);
    }
    result
}

fn repair_locked(remote: &Remote, write: Option<Mutation>) -> Result<Repair, StateError> {
    let fail = |what: &str, e| remote.fail(what, e);
    let snapshot = match remote
        .client
        .get(&remote.key)
        .map_err(|e| fail("read", e))?
    {
        Some(obj) => {
            let plain = remote.open_body(&remote.key, obj.body)?;
            Some((parse_snapshot(Path::new(&remote.url), &plain)?, obj.etag))
        }
        None => None,
    };
    let serial = snapshot.as_ref().map_or(0, |(s, _)| s.serial);
    let names = remote
        .client
        .list(&remote.namespace(serial))
        .map_err(|e| fail("list the journal of", e))?;
    let gap = names
        .iter()
        .enumerate()
        .find(|(seq, name)| **name != remote.segment(serial, *seq as u64));
    let backup = format!("{}.repair/{serial:012}/", remote.key);
    let Some((at, _)) = gap else {
        return Ok(Repair {
            missing: None,
            kept: names.len(),
            lost_segments: Vec::new(),
            lost_addresses: Vec::new(),
            resources: 0,
            backup,
        });
    };
    let missing = remote.segment(serial, at as u64);
    let mut kept_bytes = Vec::new();
    for name in &names[..at] {
        kept_bytes.extend(read_segment(remote, name)?);
    }
    let lost_addresses = addresses_in(remote, &names[at..]);
    let journal_path = format!("{}.journal", remote.url);
    let state = journal::replay(
        Path::new(&journal_path),
        snapshot.as_ref().map(|(s, _)| s.clone()),
        &kept_bytes,
    )
    .map_err(StateError::from)?
    .state;
    let repair = Repair {
        missing: Some(missing),
        kept: at,
        lost_segments: names[at..].to_vec(),
        lost_addresses,
        resources: state.resources.len(),
        backup,
    };
    if let Some(mutation) = write {
        rewrite(
            remote,
            &names,
            serial,
            snapshot.map(|(_, e)| e),
            &repair,
            state,
            mutation,
        )?;
    }
    Ok(repair)
}

/// The writing half of a repair: every segment of namespace `serial` (`names`) kept aside,
/// the snapshot (ETag `etag`) kept as the backup, then `state` written as the next snapshot
/// and the old namespace deleted.
fn rewrite(
    remote: &Remote,
    names: &[String],
    serial: u64,
    etag: Option<String>,
    repair: &Repair,
    state: StateFile,
    _mutation: Mutation,
) -> Result<(), StateError> {
    let fail = |what: &str, e| remote.fail(what, e);
    // Every object of the broken journal aside first: nothing is deleted before it is kept.
    for name in names {
        let Some(obj) = remote.client.get(name).map_err(|e| fail("read", e))? else {
            continue;
        };
        let aside = format!(
            "{}{}",
            repair.backup,
            name.rsplit('/').next().unwrap_or(name)
        );
        remote
            .client
            .put(&aside, &obj.body, Condition::Always)
            .map_err(|e| fail(&format!("keep {name} aside as {aside} for"), e))?;
    }
    remote.keep_backup()?;
    let next_seq = names
        .last()
        .and_then(|n| n.rsplit('/').next())
        .and_then(|n| n.parse::<u64>().ok())
        .map_or(0, |n| n + 1);
    let next = StateFile {
        serial: serial + 1,
        ..state
    };
    remote.replace_snapshot(serial, next_seq, etag.as_deref(), &next)?;
    remote.delete_namespace(serial);
    Ok(())
}

/// The resource addresses the segments `names` record changes of, sorted. Best effort: a
/// segment that cannot be read or parsed still counts as lost, only unnamed.
fn addresses_in(remote: &Remote, names: &[String]) -> Vec<String> {
    let mut addresses = Vec::new();
    for name in names {
        let Ok(bytes) = read_segment(remote, name) else {
            continue;
        };
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            if let Ok(record) = journal::parse_line(line) {
                addresses.extend(record.changes.iter().map(|c| c.id().to_string()));
            }
        }
    }
    addresses.sort();
    addresses.dedup();
    addresses
}

/// A segment's records (empty for a seal).
fn read_segment(remote: &Remote, name: &str) -> Result<Vec<u8>, StateError> {
    let Some(obj) = remote
        .client
        .get(name)
        .map_err(|e| remote.fail("read the journal of", e))?
    else {
        return Err(RemoteError::Invalid(format!("{name} vanished while being read")).into());
    };
    if obj.body == super::super::remote::SEAL {
        return Ok(Vec::new());
    }
    remote.open_body(name, obj.body)
}
