//! A state directory removed or moved while a [`Store`] held it (DESIGN §94): every record the
//! store held is saved to this machine's spare rescue place, and the remedy lists them.
//!
//! Owns: saving the whole state after the journal went, and saying so. Not: noticing it
//! (`Store::check_in_place`), nor reading the spare place back (`Store::open`).

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

use super::super::rescue;
use super::{Change, StateError, Store};

impl Store {
    /// [`rescue`](Store::rescue) after the state directory went: every record held, then
    /// `changes`, to the spare place.
    pub(super) fn rescue_whole(
        &mut self,
        changes: &[Change],
        spare: Option<PathBuf>,
    ) -> Result<PathBuf, StateError> {
        let Some(spare) = spare else {
            return Err(StateError::io(
                &self.paths.rescue,
                "write the rescue file",
                io::Error::other("the state directory is gone and there is no spare place"),
            ));
        };
        let mut all = self.state.rebuilding_changes();
        all.extend_from_slice(changes);
        if let Some(dir) = spare.parent() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| StateError::io(dir, "create the directory", e))?;
        }
        rescue::write(&spare, &self.state, &all, None)?;
        let mut ids: Vec<String> = self.state.ids().map(str::to_string).collect();
        // Records only: a note of a pending operation is not one (DESIGN §97).
        let recorded = changes.iter().filter(|c| c.is_record());
        ids.extend(recorded.map(|c| c.id().to_string()));
        ids.sort();
        ids.dedup();
        self.rescued_whole = Some((spare.clone(), ids));
        Ok(spare)
    }

    /// What to do after a write failed: free space or repair the filesystem; after the state
    /// directory went, every record this run held and where they are.
    pub(crate) fn remedy(&self) -> String {
        let state = self.paths.snapshot.display();
        match &self.rescued_whole {
            Some((spare, ids)) => format!(
                "The state directory of {state} was removed or moved while this run held it, \
                 with every record in it; all {} record(s) this run held were saved to the \
                 rescue file {} (mode 0600), which the next run of this state from this machine \
                 records first: {}. If the directory was moved, move it back first.",
                ids.len(),
                spare.display(),
                ids.join(", ")
            ),
            None if self.gone => format!(
                "The state directory of {state} was removed or moved while this run held it, \
                 with every record in it: {} record(s) this run held were saved nowhere: {}. \
                 Import each object that exists before the next apply.",
                self.state.len(),
                self.state.ids().collect::<Vec<_>>().join(", ")
            ),
            None => {
                format!("Free space on (or repair) the filesystem holding {state}, then run again.")
            }
        }
    }

    /// [`close`](Store::close) after the state directory went: the records held are saved to
    /// the spare place; the error says where and lists them.
    pub(super) fn save_after_gone(&mut self) -> StateError {
        let spare = rescue::spare_path(&self.paths.snapshot);
        let saved = self.rescue_whole(&[], spare);
        StateError::io(
            &self.paths.snapshot,
            "close",
            io::Error::other(match saved {
                Ok(_) => self.remedy(),
                Err(e) => format!("{}; {e}", self.remedy()),
            }),
        )
    }
}
