//! Which providers to start before the first evaluation, so that their start (process,
//! handshake, mutual TLS, schema) runs while Nix evaluates: the providers the last run of the
//! same plan started, remembered per user.
//!
//! Owns the record `$XDG_CACHE_HOME/nivis/prestart/<key>.v1.json` (0600, directory 0700, read
//! under the rule of `privfile`): the id, `source` and `version` of each gRPC provider the last
//! run of this plan started, `<key>` the sha256 of the plan's source (file or flake, attribute,
//! directory). Nothing else: no configuration, no environment, nothing from the state (a state
//! shared with others could name any binary; this record only ever names what this user's own
//! evaluations declared). Must not: decide that a provider is needed — the evaluation does
//! (`ProviderSet::start` adopts a started one only when the evaluated declaration is the very
//! same, and stops it otherwise); send anything of a configuration.
//!
//! `NIVIS_PRESTART=off` turns it off. Any read or write problem means no record: correctness
//! never depends on it.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::ir::{ProviderDecl, ProviderKind};
use crate::nixeval::PlanSource;

/// A provider the last run started: enough to start it again before the evaluation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Remembered {
    /// The provider's id in the plan.
    pub(super) id: String,
    /// Its `source`, as declared.
    pub(super) source: String,
    /// Its `version`, as declared.
    pub(super) version: Option<String>,
}

impl Remembered {
    /// What a declaration gives to remember: only gRPC providers (NixOps4 providers start in
    /// milliseconds and take their types from the declaration).
    pub(super) fn of(id: &str, decl: &ProviderDecl) -> Option<Remembered> {
        (decl.kind == ProviderKind::Tfplugin).then(|| Remembered {
            id: id.to_string(),
            source: decl.source.clone(),
            version: decl.version.clone(),
        })
    }

    /// The declaration to start it with (no configuration: none is sent before evaluation).
    pub(super) fn decl(&self) -> ProviderDecl {
        ProviderDecl {
            source: self.source.clone(),
            version: self.version.clone(),
            config: crate::ir::Tree::Object(Default::default()),
            kind: ProviderKind::Tfplugin,
            drv_path: None,
        }
    }

    /// Whether the evaluated `decl` declares the very provider that was started.
    pub(super) fn matches(&self, decl: &ProviderDecl) -> bool {
        Remembered::of(&self.id, decl).as_ref() == Some(self)
    }
}

/// The record of one plan.
pub(super) struct Memory {
    path: PathBuf,
    remembered: Vec<Remembered>,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    providers: Vec<Remembered>,
}

impl Memory {
    /// The record for the plan at `source` (empty when there is none yet); `None` when
    /// prestarting is off or there is no cache directory.
    pub(super) fn open(source: &PlanSource) -> Option<Memory> {
        if std::env::var("NIVIS_PRESTART").is_ok_and(|v| v == "off") {
            return None;
        }
        let dir = crate::xdg::cache_home()?.join("nivis").join("prestart");
        let path = dir.join(format!("{}.v1.json", plan_key(source)));
        let remembered = read(&path).unwrap_or_default();
        Some(Memory { path, remembered })
    }

    /// The providers the last run started.
    pub(super) fn remembered(&self) -> &[Remembered] {
        &self.remembered
    }

    /// Records what this run started, when it started something and it differs.
    pub(super) fn remember(&self, mut started: Vec<Remembered>) {
        started.sort();
        if started.is_empty() || started == self.remembered {
            return;
        }
        let Ok(bytes) = serde_json::to_vec(&Record { providers: started }) else {
            return;
        };
        if let Err(e) = crate::rundir::write_private_file_in_private_dir(&self.path, &bytes) {
            log::debug!(
                "could not remember the providers started in {}: {e}",
                self.path.display()
            );
        }
    }
}

/// A name for the plan at `source`: the sha256 of its source and the directory it is resolved
/// in (this record's name, and the scope of the plan's validation verdicts).
pub(super) fn plan_key(source: &PlanSource) -> String {
    let base = source.base_dir();
    let base = std::fs::canonicalize(&base).unwrap_or(base);
    hex::encode(Sha256::digest(
        format!("nivis-plan-key-v1|{source:?}|{}", base.display()).as_bytes(),
    ))
}

fn read(path: &Path) -> Option<Vec<Remembered>> {
    let mut file = crate::privfile::open_read(path, "the record of started providers").ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    let record: Record = serde_json::from_slice(&bytes).ok()?;
    Some(record.providers)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn only_the_same_declaration_matches() {
        let decl = ProviderDecl {
            source: "/bin/p".into(),
            version: None,
            config: crate::ir::Tree::Object(Default::default()),
            kind: ProviderKind::Tfplugin,
            drv_path: None,
        };
        let r = Remembered::of("p", &decl).unwrap();
        assert!(r.matches(&decl));
        assert!(r.matches(&r.decl()));
        let other = ProviderDecl {
            source: "/bin/q".into(),
            ..decl.clone()
        };
        assert!(!r.matches(&other));
        let versioned = ProviderDecl {
            version: Some("1.0".into()),
            ..decl.clone()
        };
        assert!(!r.matches(&versioned));
        let nixops4 = ProviderDecl {
            kind: ProviderKind::Nixops4 {
                stateless_types: Default::default(),
            },
            ..decl
        };
        assert!(!r.matches(&nixops4));
        assert!(Remembered::of("p", &nixops4).is_none());
    }

    #[test]
    fn the_record_round_trips_privately() {
        let dir = tempfile::tempdir().unwrap();
        let memory = Memory {
            path: dir.path().join("prestart").join("k.v1.json"),
            remembered: Vec::new(),
        };
        let r = Remembered {
            id: "null".into(),
            source: "/bin/null".into(),
            version: None,
        };
        memory.remember(vec![r.clone()]);
        assert_eq!(read(&memory.path), Some(vec![r]));
        let mode = std::fs::metadata(&memory.path)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
