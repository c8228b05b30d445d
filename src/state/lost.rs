//! A state that vanished is not a new project: before a store treats "no snapshot" as an empty
//! state, it looks for what a state leaves behind beside it, and refuses when it finds any.
//!
//! Owns: the evidence of a lost local state (its backup `P.backup`, audit records `P.audit` of
//! runs that left a serial above 0) and the refusal ([`LostState`], carried by
//! [`StateError::Lost`]) with the ways on. The S3 store gathers the same evidence from its
//! objects (`s3::remote`) and words it here too. Not: when to look (the stores do, only when
//! they find no state) nor starting over (the stores, asked by `Backend::start_over`).
//!
//! Not evidence: a journal without a snapshot (it is a state: a first run that never compacted,
//! replayed as it is; one that extends a serial above 0 is already refused as corrupt), and a
//! rescue file (its results are recorded by the next open, which is what it is for).

use std::fmt;
use std::path::Path;

use super::audit;
use super::error::StateError;
use super::file::StatePaths;

/// What opening a state for writing does when the state is missing but evidence shows that
/// one existed (see `lost.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IfLost {
    /// Refuse with [`StateError::Lost`]: nothing is planned against an empty state.
    Refuse,
    /// Open it as an empty state, writing nothing yet: for a command that replaces the whole
    /// state (`state push`, `state migrate`).
    Replace,
    /// Start over: an empty state, recorded at once with a serial after the lost one's (the
    /// user said so: `--accept-lost-state`).
    StartOver,
}

/// A state that existed where none is now: what was found, and the ways on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostState {
    /// Where the state should be: a path or `s3://bucket/key`.
    pub(crate) state: String,
    /// What shows that a state existed, one item each ("the backup P.backup (serial 3)").
    pub(crate) found: Vec<String>,
    /// The highest serial the evidence names (a new state starts after it).
    pub(crate) serial: u64,
    /// How to put the backup back, when there is one (a shell command).
    pub(crate) restore: Option<String>,
}

impl LostState {
    /// The evidence gathered so far for the state at `state`: `None` when there is none.
    pub(crate) fn from_evidence(
        state: String,
        found: Vec<(String, u64)>,
        restore: Option<String>,
    ) -> Option<LostState> {
        if found.is_empty() {
            return None;
        }
        let serial = found.iter().map(|(_, s)| *s).max().unwrap_or(0);
        Some(LostState {
            state,
            found: found.into_iter().map(|(what, _)| what).collect(),
            serial,
            restore,
        })
    }
}

impl fmt::Display for LostState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} has no state, but a state existed there: {}. Nothing was planned or created: \
             against an empty state every resource would be created again, duplicating the \
             objects that still exist. Ways on: ",
            self.state,
            self.found.join("; ")
        )?;
        if let Some(restore) = &self.restore {
            write!(f, "restore the backup (`{restore}`), then run again; or ")?;
        }
        write!(
            f,
            "push a state you have (`nivis state push FILE`); or, if the objects it recorded are \
             gone too, start over with an empty state by running again with \
             --accept-lost-state (its serial continues after {})",
            self.serial
        )
    }
}

/// What shows that a local state existed at `paths` although its snapshot is missing:
/// its backup and its audit records. `None`: nothing, a new state.
pub(super) fn local_evidence(paths: &StatePaths) -> Result<Option<LostState>, StateError> {
    let mut found = Vec::new();
    let mut restore = None;
    match std::fs::read(&paths.backup) {
        Ok(bytes) => {
            let serial = super::snapshot::serial_of(&bytes).unwrap_or(0);
            found.push((
                format!("the backup {} (serial {serial})", paths.backup.display()),
                serial,
            ));
            restore = Some(format!(
                "cp -p {} {}",
                shell_word(&paths.backup),
                shell_word(&paths.snapshot)
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(StateError::io(&paths.backup, "read", e)),
    }
    let log = audit::local_path(&paths.snapshot);
    // A log that cannot be read safely is left to `nivis log` to report; the backup decides.
    if let Ok(stored) = audit::read_local(&log) {
        let records: Vec<audit::Record> = stored.iter().filter_map(|s| s.record()).collect();
        if let Some(serial) = highest_serial(&records) {
            found.push((
                format!(
                    "{} audit record(s) in {}, of runs up to serial {serial}",
                    records.len(),
                    log.display()
                ),
                serial,
            ));
        }
    }
    Ok(LostState::from_evidence(
        paths.snapshot.display().to_string(),
        found,
        restore,
    ))
}

/// The highest serial the audit `records` name (before or after their run), if above 0.
pub(super) fn highest_serial(records: &[audit::Record]) -> Option<u64> {
    records
        .iter()
        .flat_map(|r| [r.entry.serial_before, r.entry.serial_after])
        .flatten()
        .max()
        .filter(|s| *s > 0)
}

/// `path` quoted for a shell command the user copies.
fn shell_word(path: &Path) -> String {
    let text = path.display().to_string();
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:@".contains(c))
    {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_evidence_is_a_new_state_and_evidence_names_its_highest_serial() {
        assert_eq!(LostState::from_evidence("s".into(), vec![], None), None);
        let lost = LostState::from_evidence(
            "s".into(),
            vec![("a".into(), 3), ("b".into(), 7)],
            Some("cp -p s.backup s".into()),
        )
        .unwrap();
        assert_eq!(lost.serial, 7);
        let text = lost.to_string();
        assert!(text.contains("a; b"), "{text}");
        assert!(text.contains("`cp -p s.backup s`"), "{text}");
        assert!(text.contains("--accept-lost-state"), "{text}");
        assert!(text.contains("nivis state push FILE"), "{text}");
    }

    #[test]
    fn shell_words_are_quoted_when_needed() {
        assert_eq!(shell_word(Path::new("/a/b.json")), "/a/b.json");
        assert_eq!(shell_word(Path::new("/a b/it's")), r"'/a b/it'\''s'");
    }
}
