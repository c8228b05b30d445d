//! The local rescue journal: results a run could not record in the remote store.
//!
//! Owns: where it lives (outside any project directory, so a `path:` flake never copies it into
//! the Nix store), its format, and durable appends. Not: deciding when to use it or pushing it
//! (see `store`).
//!
//! One file per remote state, `$NIVIS_RESCUE_DIR` or `$XDG_STATE_HOME/nivis/rescue` (default
//! `~/.local/state/nivis/rescue`), directory 0700, file 0600: it holds attributes, so secrets.
//! The first line is a [`Header`]; every further line is one journal record (the local journal's
//! format: lineage, serial, changes), appended with one write and `fdatasync`.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::state::journal;
use crate::state::Change;

/// The first line of a rescue file: whose results these are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// Always 1.
    pub nivis_rescue: u32,
    /// The remote state (`s3://bucket/key`).
    pub state: String,
    /// The id of the lock the writing run held (its next run may take that lock over).
    pub lock_id: String,
    /// Host and pid of the writing run.
    pub host: String,
    pub pid: u32,
}

/// What a rescue file holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Rescued {
    pub header: Header,
    /// (lineage, serial, changes) per record, in order.
    pub records: Vec<(String, u64, Vec<Change>)>,
}

impl Rescued {
    /// The ids the records touch, sorted.
    pub fn ids(&self) -> BTreeSet<String> {
        self.records
            .iter()
            .flat_map(|(_, _, changes)| changes.iter().map(|c| c.id().to_string()))
            .collect()
    }
}

/// The rescue file of one remote state.
#[derive(Debug)]
pub struct RescueFile {
    path: PathBuf,
    file: Option<File>,
    /// Ids appended by this process.
    ids: BTreeSet<String>,
}

impl RescueFile {
    /// The rescue file for the remote state `url`.
    pub fn for_state(url: &str) -> RescueFile {
        RescueFile {
            path: rescue_dir().join(file_name(url)),
            file: None,
            ids: BTreeSet::new(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Ids appended by this process.
    pub fn appended_ids(&self) -> &BTreeSet<String> {
        &self.ids
    }

    /// Reads the file left by an earlier run, if any.
    pub fn load(&self) -> io::Result<Option<Rescued>> {
        let bytes = match fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut lines = bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty());
        let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
        let header: Header = serde_json::from_slice(lines.next().unwrap_or_default())
            .map_err(|e| bad(format!("bad header: {e}")))?;
        let mut records = Vec::new();
        let lines: Vec<&[u8]> = lines.collect();
        for (i, line) in lines.iter().enumerate() {
            match journal::decode(line) {
                Ok(record) => records.push(record),
                // Only a last line cut short by a crash can be damaged; that append never
                // returned, so its results were reported as not recorded anywhere.
                Err(_) if i + 1 == lines.len() => break,
                Err(e) => return Err(bad(format!("line {}: {e}", i + 2))),
            }
        }
        Ok(Some(Rescued { header, records }))
    }

    /// Durably appends one record, creating the file (with `header`) if needed.
    pub fn append(
        &mut self,
        header: &Header,
        lineage: &str,
        serial: u64,
        changes: &[Change],
    ) -> io::Result<()> {
        let line = journal::encode(lineage, serial, changes).map_err(io::Error::other)?;
        if self.file.is_none() {
            let dir = self
                .path
                .parent()
                .expect("rescue files live in a directory");
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
            let existed = self.path.exists();
            let mut file = OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .open(&self.path)?;
            if !existed {
                let mut first = serde_json::to_vec(header).map_err(io::Error::other)?;
                first.push(b'\n');
                file.write_all(&first)?;
            }
            self.file = Some(file);
        }
        let file = self.file.as_mut().expect("opened above");
        file.write_all(&line)?;
        file.sync_data()?;
        self.ids.extend(changes.iter().map(|c| c.id().to_string()));
        Ok(())
    }

    /// Removes the file once everything in it is recorded remotely.
    pub fn remove(&mut self) -> io::Result<()> {
        self.file = None;
        match fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        self.ids.clear();
        Ok(())
    }
}

fn rescue_dir() -> PathBuf {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = var("NIVIS_RESCUE_DIR") {
        return dir;
    }
    let state_home = var("XDG_STATE_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| var("HOME").map(|h| h.join(".local/state")))
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("nivis-{}", unsafe { libc::getuid() }))
        });
    state_home.join("nivis/rescue")
}

/// A readable, unique file name for `url`.
fn file_name(url: &str) -> String {
    let readable: String = url
        .trim_start_matches("s3://")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    let digest = hex::encode(&Sha256::digest(url.as_bytes())[..6]);
    format!("{readable}-{digest}.journal")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{ResourceKind, ResourceState};
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn appends_durably_and_reads_back_with_private_modes() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = RescueFile {
            path: dir.path().join("r/x.journal"),
            file: None,
            ids: BTreeSet::new(),
        };
        assert_eq!(file.load().unwrap(), None);
        let header = Header {
            nivis_rescue: 1,
            state: "s3://b/k".into(),
            lock_id: "L".into(),
            host: "h".into(),
            pid: 7,
        };
        let put = |id: &str| {
            Change::Put(ResourceState::new(
                id,
                ResourceKind::Managed,
                "p",
                "src",
                "t",
                serde_json::json!({"id": id}),
            ))
        };
        file.append(&header, "lin", 3, &[put("a"), put("b")])
            .unwrap();
        file.append(&header, "lin", 3, &[Change::Remove("c".into())])
            .unwrap();
        // A torn last line (crash mid-append) is dropped.
        fs::OpenOptions::new()
            .append(true)
            .open(&file.path)
            .unwrap()
            .write_all(b"{\"lineage\":")
            .unwrap();
        let back = file.load().unwrap().unwrap();
        assert_eq!(back.header, header);
        assert_eq!(back.records.len(), 2);
        assert_eq!(back.ids().into_iter().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(file.appended_ids().len(), 3);
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file.path), 0o600);
        assert_eq!(mode(file.path.parent().unwrap()), 0o700);
        file.remove().unwrap();
        assert_eq!(file.load().unwrap(), None);
    }

    #[test]
    fn names_are_readable_and_distinct() {
        let a = file_name("s3://bucket/env:/dev/k");
        assert!(a.starts_with("bucket_env__dev_k-"), "{a}");
        assert_ne!(a, file_name("s3://bucket/env:/dev/k2"));
    }
}
