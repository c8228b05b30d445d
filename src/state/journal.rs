//! The journal format (one JSON record per commit) and its replay over a snapshot.
//!
//! The rules, stated in the module doc of [`crate::state`]: a record is valid only whole and
//! newline-terminated; only the final line may be damaged (by a crash during the commit that wrote
//! it) and is then dropped; any other damage is an error naming the line; records extending an
//! older snapshot serial are skipped, a newer one is an error. A line that is whole JSON was
//! written completely, so it is never taken for crash damage: if it cannot be used (a newer format
//! version, a change this build does not know) opening fails naming it, and nothing is truncated.
//! Fields of a record this build does not know are ignored (they describe the commit, which
//! compaction folds away); unknown fields inside a resource are kept by the model.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::StateError;
use super::model::{
    declared_version, upgrade_change, Change, FormatError, StateFile, SCHEMA_VERSION,
};

/// Encodes one commit as a journal line, trailing newline included.
pub(super) fn encode(
    lineage: &str,
    serial: u64,
    changes: &[Change],
) -> serde_json::Result<Vec<u8>> {
    encode_under(lineage, serial, changes, None, None)
}

/// Encodes one commit as a journal line naming the lock it was written under and how many
/// journal segments the state had then (a rescue file's line: see `rescue.rs`); the journal's
/// reader ignores both fields.
pub(super) fn encode_under(
    lineage: &str,
    serial: u64,
    changes: &[Change],
    lock: Option<&str>,
    segments: Option<u64>,
) -> serde_json::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(&RecordOut {
        schema_version: SCHEMA_VERSION,
        lineage,
        serial,
        changes,
        lock,
        segments,
    })?;
    line.push(b'\n');
    Ok(line)
}

/// One journal line, as written.
#[derive(Serialize)]
struct RecordOut<'a> {
    #[serde(rename = "schemaVersion")]
    schema_version: u32,
    lineage: &'a str,
    serial: u64,
    changes: &'a [Change],
    #[serde(skip_serializing_if = "Option::is_none")]
    lock: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    segments: Option<u64>,
}

/// One journal line, as read (other fields ignored).
#[derive(Deserialize)]
pub(super) struct RecordIn {
    pub(super) lineage: String,
    pub(super) serial: u64,
    pub(super) changes: Vec<Change>,
    /// The lock the line was written under (rescue files only).
    #[serde(default)]
    pub(super) lock: Option<String>,
    /// The journal segments the state had when the line was written (S3 rescue files only).
    #[serde(default)]
    pub(super) segments: Option<u64>,
}

/// Why a whole line is not a record this build can apply.
pub(super) enum BadLine {
    /// Not JSON at all: the damage a crash mid-write leaves.
    Garbled(serde_json::Error),
    /// Written by a newer format version.
    Newer(u64),
    /// JSON, but not a record.
    Invalid(String),
}

/// Parses one line (without its newline).
pub(super) fn parse_line(line: &[u8]) -> Result<RecordIn, BadLine> {
    let invalid = |e: FormatError| BadLine::Invalid(e.to_string());
    let mut object: Map<String, Value> = serde_json::from_slice(line).map_err(BadLine::Garbled)?;
    let version = declared_version(&object).map_err(invalid)?;
    if version > u64::from(SCHEMA_VERSION) {
        return Err(BadLine::Newer(version));
    }
    // Versions 1 and 2 spelled resource keys in snake_case: rename them before parsing.
    if version < 3 {
        if let Some(Value::Array(changes)) = object.get_mut("changes") {
            for change in changes {
                upgrade_change(change).map_err(invalid)?;
            }
        }
    }
    serde_json::from_value(Value::Object(object)).map_err(|e| BadLine::Invalid(e.to_string()))
}

pub(super) struct Replayed {
    pub(super) state: StateFile,
    /// Length of the journal prefix made of whole, valid records.
    pub(super) valid_len: u64,
}

pub(super) enum ReplayError {
    /// A record extends a newer snapshot than the one read (a concurrent compaction, for a
    /// lock-free reader).
    Ahead(StateError),
    /// Any other problem.
    Other(StateError),
}

impl From<ReplayError> for StateError {
    fn from(e: ReplayError) -> StateError {
        match e {
            ReplayError::Ahead(e) | ReplayError::Other(e) => e,
        }
    }
}

/// Replays journal `bytes` over `snapshot` (`None`: no state file yet).
pub(super) fn replay(
    path: &Path,
    snapshot: Option<StateFile>,
    bytes: &[u8],
) -> Result<Replayed, ReplayError> {
    let mut state = snapshot;
    let mut valid_len = 0;
    let mut line_no = 0;
    while valid_len < bytes.len() {
        let rest = &bytes[valid_len..];
        // A line without its newline was never committed: commit writes the newline in the same
        // write, before the sync it waits for.
        let Some(newline) = rest.iter().position(|&b| b == b'\n') else {
            break;
        };
        line_no += 1;
        let end = valid_len + newline + 1;
        match parse_line(&rest[..newline]) {
            Ok(record) => apply_record(path, line_no, &mut state, record)?,
            // A crash mid-commit can also leave the final line whole in length but garbled
            // (blocks written out of order); that commit never returned either.
            Err(BadLine::Garbled(_)) if end == bytes.len() => break,
            Err(BadLine::Garbled(e)) => {
                return Err(ReplayError::Other(StateError::corrupt(
                    path,
                    Some(line_no),
                    format!("{e} (only the last line can be damaged by a crash)"),
                )))
            }
            Err(BadLine::Newer(found)) => {
                return Err(ReplayError::Other(StateError::UnsupportedVersion {
                    path: path.to_path_buf(),
                    line: Some(line_no),
                    found,
                    supported: SCHEMA_VERSION,
                }))
            }
            Err(BadLine::Invalid(e)) => {
                return Err(ReplayError::Other(StateError::corrupt(
                    path,
                    Some(line_no),
                    format!("{e} (the line is complete, so it is not crash damage)"),
                )))
            }
        }
        valid_len = end;
    }
    Ok(Replayed {
        state: state.unwrap_or_else(StateFile::empty),
        valid_len: valid_len as u64,
    })
}

fn apply_record(
    path: &Path,
    line: usize,
    state: &mut Option<StateFile>,
    record: RecordIn,
) -> Result<(), ReplayError> {
    let corrupt = |message: String| StateError::corrupt(path, Some(line), message);
    if state.is_none() && record.serial != 0 {
        return Err(ReplayError::Other(corrupt(format!(
            "the state file is missing, but the journal continues its serial {}; restore the \
             state file",
            record.serial
        ))));
    }
    let state = state.get_or_insert_with(|| StateFile::with_lineage(record.lineage.clone()));
    if record.lineage != state.lineage {
        return Err(ReplayError::Other(corrupt(format!(
            "the record belongs to state lineage {} but the state file has lineage {}; the \
             journal comes from another state, move it aside",
            record.lineage, state.lineage
        ))));
    }
    if record.serial > state.serial {
        return Err(ReplayError::Ahead(corrupt(format!(
            "the record extends serial {} but the state file has serial {}; the state file is \
             older than its journal (restored from a backup?)",
            record.serial, state.serial
        ))));
    }
    // An older serial was already folded into the snapshot by a compaction that stopped before
    // emptying the journal.
    if record.serial == state.serial {
        for change in &record.changes {
            state.apply(change);
        }
    }
    Ok(())
}
