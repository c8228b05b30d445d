//! Which store holds the state — the local file (no backend configured) or S3 — and the one
//! interface the engine and the CLI use to open it, whatever it is.
//!
//! Owns: the backend configuration (`nivis.backend` from the flake, then `--backend-config
//! KEY=VALUE` overrides), environments (`--env`: the local file's or the object key's variant),
//! and dispatching open / read / force-unlock / environment listing to the right store. Not:
//! evaluating Nix (the CLI hands in the flake's value) nor any store's internals.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value as Json};

use super::s3::config::ConfigError;
use super::s3::{Conversion, S3Backend, S3Store};
use super::{
    Change, ForceUnlock, IfLost, LockHolder, LostState, Mutation, StateError, StateFile,
    StateStore, Store,
};

pub(crate) use super::s3::config::DEFAULT_ENV;

/// A state store opened for writing and locked until `close` (or drop): what the engine and the
/// CLI hold, whichever backend it is.
///
/// When a commit fails, the store refuses writes until [`recommit`](LockedStore::recommit)
/// succeeds; the caller retries, then hands the changes to [`rescue`](LockedStore::rescue),
/// which the store's next open records before anything else. Like `commit`, every method that
/// writes records takes the [`Mutation`] token.
pub trait LockedStore: StateStore {
    /// Finishes (compacts, releases the lock); reports what could not be finished.
    fn close(self: Box<Self>) -> Result<(), StateError>;
    /// Retries a batch after a failed commit (a passing failure); on a store that is not
    /// refusing writes this is `commit`.
    fn recommit(&mut self, changes: &[Change], mutation: Mutation) -> Result<(), StateError>;
    /// Keeps `changes`, which the state could not take, in the store's rescue file, and returns
    /// its path.
    fn rescue(&mut self, changes: &[Change], mutation: Mutation) -> Result<PathBuf, StateError>;
    /// Replaces the whole state by `next` (`state push`, `state migrate`): a new snapshot with
    /// a serial above both.
    fn replace(&mut self, next: StateFile, mutation: Mutation) -> Result<(), StateError>;
    /// Why the store cannot promise room for the results of operations already running (the
    /// local filesystem is full), if so: start nothing new.
    fn space_error(&self) -> Option<&StateError> {
        None
    }
    /// Things worth telling the user about the open store: a failed compaction, results an
    /// earlier run left in the rescue file and that opening recorded.
    fn warnings(&self) -> Vec<String>;
    /// What the user should do after a write failed, once the results are recorded, rescued or
    /// listed.
    fn remedy(&self) -> String;
    /// Why to start nothing more because this run's lock was taken away (forced open while it
    /// was paused), if so. Cheap: the store reads its lock only once a bound has passed.
    fn lock_lost(&self) -> Option<String> {
        None
    }
}

/// The warning for results recorded from a rescue file at open.
fn recovered_warning(ids: &[String], rescue: &Path, state: &str) -> Option<String> {
    (!ids.is_empty()).then(|| {
        format!(
            "recorded first in {state}: {} result(s) an earlier run could not record and kept \
             in the rescue file {}: {}",
            ids.len(),
            rescue.display(),
            ids.join(", ")
        )
    })
}

impl LockedStore for Store {
    fn close(self: Box<Self>) -> Result<(), StateError> {
        Store::close(*self)
    }

    fn recommit(&mut self, changes: &[Change], mutation: Mutation) -> Result<(), StateError> {
        Store::recommit(self, changes, mutation)
    }

    fn rescue(&mut self, changes: &[Change], mutation: Mutation) -> Result<PathBuf, StateError> {
        Store::rescue(self, changes, mutation)
    }

    fn replace(&mut self, next: StateFile, mutation: Mutation) -> Result<(), StateError> {
        Store::replace(self, next, mutation)
    }

    fn space_error(&self) -> Option<&StateError> {
        Store::space_error(self)
    }

    fn warnings(&self) -> Vec<String> {
        let state = self.path().display().to_string();
        let compaction = self
            .compaction_error()
            .map(|e| format!("state compaction failed (the journal keeps everything): {e}"));
        let from = self.recovered_from().first().map(PathBuf::as_path);
        recovered_warning(self.recovered(), from.unwrap_or(self.rescue_path()), &state)
            .into_iter()
            .chain(compaction)
            .collect()
    }

    fn remedy(&self) -> String {
        Store::remedy(self)
    }
}

impl LockedStore for S3Store {
    fn close(self: Box<Self>) -> Result<(), StateError> {
        S3Store::close(*self)
    }

    fn recommit(&mut self, changes: &[Change], mutation: Mutation) -> Result<(), StateError> {
        S3Store::recommit(self, changes, mutation)
    }

    fn rescue(&mut self, changes: &[Change], mutation: Mutation) -> Result<PathBuf, StateError> {
        S3Store::rescue(self, changes, mutation)
    }

    fn replace(&mut self, next: StateFile, mutation: Mutation) -> Result<(), StateError> {
        S3Store::replace(self, next, mutation)
    }

    fn warnings(&self) -> Vec<String> {
        recovered_warning(self.recovered(), self.rescue_path(), self.url())
            .into_iter()
            .chain(self.notes().iter().cloned())
            .chain(self.plaintext_warning())
            .collect()
    }

    fn remedy(&self) -> String {
        S3Store::remedy(self)
    }

    fn lock_lost(&self) -> Option<String> {
        S3Store::lock_lost(self)
    }
}

/// Why the backend cannot be configured, or cannot do what was asked of it.
#[derive(Debug)]
pub(crate) enum BackendError {
    /// A field of the backend, or the environment name, is wrong.
    Config(ConfigError),
    /// `nivis.backend` is not an attribute set.
    NotAnAttrSet {
        /// What it is.
        found: Json,
    },
    /// A `--backend-config` item without `KEY=`.
    BadOverride {
        /// The item as given.
        item: String,
    },
    /// The local backend was given fields besides `type`.
    LocalTakesNoFields {
        /// The fields given.
        fields: Vec<String>,
    },
    /// Fields without a `type`.
    NoType,
    /// A `type` that is not `s3` or `local`.
    UnknownType {
        /// The type as given (quoted when it is a string).
        found: String,
    },
    /// `state migrate` to the local backend.
    NotRemote,
    /// `--encrypt` / `--decrypt` of the local backend.
    NeverEncrypted,
    /// The store failed.
    State(StateError),
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BackendError::Config(e) => e.fmt(f),
            BackendError::NotAnAttrSet { found } => {
                write!(f, "nivis.backend must be an attribute set, not {found}")
            }
            BackendError::BadOverride { item } => {
                write!(f, "--backend-config {item:?}: expected KEY=VALUE")
            }
            BackendError::LocalTakesNoFields { fields } => write!(
                f,
                "the local backend takes no fields but `type` (the path is --state), got {}",
                fields.join(", ")
            ),
            BackendError::NoType => {
                f.write_str("the backend configuration needs `type` (\"s3\" or \"local\")")
            }
            BackendError::UnknownType { found } => write!(
                f,
                "backend type {found}: known types are \"s3\" and \"local\""
            ),
            BackendError::NotRemote => f.write_str(
                "no remote backend is configured: set nivis.backend (or --backend-config \
                 type=s3 ...) to the backend to migrate to",
            ),
            BackendError::NeverEncrypted => f.write_str(
                "the local backend is never encrypted (the state file is mode 0600): \
                 --encrypt and --decrypt concern a remote (S3) state; set nivis.backend",
            ),
            BackendError::State(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BackendError::Config(e) => Some(e),
            BackendError::State(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ConfigError> for BackendError {
    fn from(e: ConfigError) -> BackendError {
        BackendError::Config(e)
    }
}

impl From<StateError> for BackendError {
    fn from(e: StateError) -> BackendError {
        BackendError::State(e)
    }
}

/// The local state file of environment `env` for the default environment's `path`: `path`
/// itself, or `nivis.env.d/ENV/` beside it (an environment name is checked first, so it never
/// leaves that directory).
pub(crate) fn env_state_path(path: &Path, env: &str) -> Result<PathBuf, ConfigError> {
    super::s3::config::check_env_name(env)?;
    if env == DEFAULT_ENV {
        return Ok(path.to_path_buf());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default();
    Ok(dir.join("nivis.env.d").join(env).join(name))
}

/// Where the state of one environment lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// The local file store at `path` (the environment already applied).
    Local {
        /// The state file of the environment.
        path: PathBuf,
        /// The environment (`--env`).
        env: String,
    },
    /// An S3 bucket; `local` is the local state path (of the environment) a project moving to
    /// S3 would still have.
    S3 {
        /// The bucket, key and keys of the environment's state.
        backend: Box<S3Backend>,
        /// The local state path the environment would have without S3.
        local: PathBuf,
    },
}

impl Backend {
    /// The backend from the flake's `nivis.backend` (`None`: not set) with `overrides`
    /// (`KEY=VALUE`; VALUE is JSON when it parses as JSON) for environment `env`; `local` is
    /// the `--state` path; `redactor` (the run's) learns the secrets a remote backend reads
    /// (credentials, the encryption key).
    pub(crate) fn configure(
        flake: Option<&Json>,
        overrides: &[String],
        env: &str,
        local: &Path,
        redactor: &crate::secrets::Redactor,
    ) -> Result<Backend, BackendError> {
        let mut fields = match flake {
            None | Some(Json::Null) => Map::new(),
            Some(Json::Object(m)) => m.clone(),
            Some(other) => {
                return Err(BackendError::NotAnAttrSet {
                    found: other.clone(),
                })
            }
        };
        for item in overrides {
            let (k, v) = item
                .split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| BackendError::BadOverride { item: item.clone() })?;
            let value = serde_json::from_str(v).unwrap_or_else(|_| Json::String(v.to_string()));
            fields.insert(k.to_string(), value);
        }
        super::s3::config::check_env_name(env)?;
        match fields.get("type").map(|t| t.as_str()) {
            None if fields.is_empty() => Backend::local(local, env),
            Some(Some("local")) if fields.len() == 1 => Backend::local(local, env),
            Some(Some("local")) => Err(BackendError::LocalTakesNoFields {
                fields: fields.keys().cloned().collect(),
            }),
            Some(Some("s3")) => Ok(Backend::S3 {
                backend: Box::new(S3Backend::from_fields(&fields, env, redactor)?),
                local: env_state_path(local, env)?,
            }),
            None => Err(BackendError::NoType),
            Some(other) => Err(BackendError::UnknownType {
                found: other.map_or_else(|| fields["type"].to_string(), |t| format!("{t:?}")),
            }),
        }
    }

    fn local(path: &Path, env: &str) -> Result<Backend, BackendError> {
        Ok(Backend::Local {
            path: env_state_path(path, env)?,
            env: env.to_string(),
        })
    }

    /// The selected environment.
    pub(crate) fn env(&self) -> &str {
        match self {
            Backend::Local { env, .. } => env,
            Backend::S3 { backend, .. } => &backend.env,
        }
    }

    /// The local state file of the selected environment: the state itself, or the one a
    /// project moving to the remote backend would still have (`state migrate` copies it).
    pub(crate) fn local_path(&self) -> &Path {
        match self {
            Backend::Local { path, .. } => path,
            Backend::S3 { local, .. } => local,
        }
    }

    /// Where the state is, for messages: a path or `s3://bucket/key`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Backend::Local { path, .. } => path.display().to_string(),
            Backend::S3 { backend, .. } => backend.url(),
        }
    }

    /// Opens the state for writing, locked for `holder`, waiting up to `wait` for the lock. A
    /// state that is missing although evidence shows it existed is refused
    /// ([`StateError::Lost`]).
    pub(crate) fn open(
        &self,
        holder: LockHolder,
        wait: Option<Duration>,
    ) -> Result<Box<dyn LockedStore>, StateError> {
        self.open_as(holder, wait, IfLost::Refuse)
    }

    /// [`open`](Backend::open), with what to do when the state is lost (`state push`, which
    /// replaces it whole, and `--accept-lost-state` start over).
    pub(crate) fn open_as(
        &self,
        holder: LockHolder,
        wait: Option<Duration>,
        if_lost: IfLost,
    ) -> Result<Box<dyn LockedStore>, StateError> {
        match self {
            Backend::Local { path, .. } => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    // Private: an environment's directory holds its state (secrets).
                    std::fs::DirBuilder::new()
                        .recursive(true)
                        .mode(0o700)
                        .create(dir)
                        .map_err(|e| StateError::io(dir, "create the directory", e))?;
                }
                Ok(Box::new(Store::open_as(path, holder, wait, if_lost)?))
            }
            Backend::S3 { backend, local } => Ok(Box::new(S3Store::open_as(
                backend,
                holder,
                wait,
                Some(local),
                if_lost,
            )?)),
        }
    }

    /// Opens the (S3) state as the target of a migration: no refusal because a local state
    /// exists. The local backend cannot be a migration target.
    pub(crate) fn open_for_migration(
        &self,
        holder: LockHolder,
        wait: Option<Duration>,
    ) -> Result<Box<dyn LockedStore>, BackendError> {
        match self {
            Backend::Local { .. } => Err(BackendError::NotRemote),
            // The migrated state replaces whatever was lost there.
            Backend::S3 { backend, .. } => {
                let store = S3Store::open_as(backend, holder, wait, None, IfLost::Replace)?;
                Ok(Box::new(store))
            }
        }
    }

    /// Turns the encryption of the (S3) state on or off in place (`state migrate --encrypt` /
    /// `--decrypt`): rewrites it whole and deletes the older objects. Returns the number of
    /// resources rewritten and of old objects deleted.
    pub(crate) fn convert(
        &self,
        holder: LockHolder,
        wait: Option<Duration>,
        conversion: Conversion,
        mutation: Mutation,
    ) -> Result<(usize, usize), BackendError> {
        let Backend::S3 { backend, .. } = self else {
            return Err(BackendError::NeverEncrypted);
        };
        let mut store = S3Store::open_for_conversion(backend, holder, wait, conversion)?;
        let deleted = store.convert(mutation)?;
        let resources = store.state().len();
        store.close()?;
        Ok((resources, deleted))
    }

    /// The state's serial, as [`Backend::read_only`] would report it (a local state reads
    /// only its snapshot's head: [`Store::read_serial`]).
    pub(crate) fn serial(&self) -> Result<u64, StateError> {
        match self {
            Backend::Local { path, .. } => Store::read_serial(path),
            Backend::S3 { .. } => self.read_only().map(|state| state.serial),
        }
    }

    /// Starts over when the state is lost (`--accept-lost-state`): records an empty state
    /// whose serial continues after the lost one's, and returns what showed it was lost.
    /// `None`: the state is not lost (it exists, or never did), and nothing was written.
    pub(crate) fn start_over(
        &self,
        holder: LockHolder,
        wait: Option<Duration>,
    ) -> Result<Option<LostState>, StateError> {
        let lost = match self.read_only() {
            Err(StateError::Lost(lost)) => *lost,
            Ok(_) => return Ok(None),
            Err(e) => return Err(e),
        };
        self.open_as(holder, wait, IfLost::StartOver)?.close()?;
        Ok(Some(lost))
    }

    /// The backup kept beside the state (`P.backup`, `KEY.backup`: the snapshot before the
    /// last run that replaced it) and where it is; `None`: there is none.
    pub(crate) fn read_backup(&self) -> Result<Option<(StateFile, String)>, StateError> {
        match self {
            Backend::Local { path, .. } => {
                let paths = super::StatePaths::resolve(path)?;
                match std::fs::read(&paths.backup) {
                    Ok(bytes) => Ok(Some((
                        super::parse_snapshot(&paths.backup, &bytes)?,
                        paths.backup.display().to_string(),
                    ))),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(StateError::io(&paths.backup, "read", e)),
                }
            }
            Backend::S3 { backend, .. } => S3Store::read_backup(backend),
        }
    }

    /// Reads the state without locking.
    pub(crate) fn read_only(&self) -> Result<StateFile, StateError> {
        match self {
            Backend::Local { path, .. } => Store::read_only(path),
            Backend::S3 { backend, .. } => S3Store::read_only(backend),
        }
    }

    /// Breaks the lock of a holder that is gone, if its id is `id`: the same checks for every
    /// backend (see [`Store::force_unlock`]); `confirm` is asked last and may decline.
    pub(crate) fn force_unlock(
        &self,
        id: &str,
        force: bool,
        confirm: &mut dyn FnMut(Option<&LockHolder>) -> bool,
    ) -> Result<ForceUnlock, StateError> {
        match self {
            Backend::Local { path, .. } => Store::force_unlock(path, id, force, confirm),
            Backend::S3 { backend, .. } => S3Store::force_unlock(backend, id, force, confirm),
        }
    }

    /// The environments that have a state.
    pub(crate) fn envs(&self) -> Result<Vec<String>, StateError> {
        match self {
            Backend::S3 { backend, .. } => backend.envs(),
            Backend::Local { path, env } => {
                // Undo the environment to find the default state path.
                let base = if env == DEFAULT_ENV {
                    path.clone()
                } else {
                    let name = path.file_name().unwrap_or_default();
                    let root = path.ancestors().nth(3).unwrap_or(Path::new("."));
                    root.join(name)
                };
                let mut envs = Vec::new();
                if base.exists() {
                    envs.push(DEFAULT_ENV.to_string());
                }
                let dir = base.parent().unwrap_or(Path::new(".")).join("nivis.env.d");
                let name = base.file_name().unwrap_or_default();
                if let Ok(entries) = std::fs::read_dir(&dir) {
                    let mut found: Vec<String> = entries
                        .flatten()
                        .filter(|e| e.path().join(name).exists())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect();
                    found.sort();
                    envs.extend(found);
                }
                Ok(envs)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn no_backend_is_the_local_file_and_environments_get_their_own() {
        let local = Path::new("/p/nivis.state.json");
        assert_eq!(
            Backend::configure(
                None,
                &[],
                "default",
                local,
                &crate::secrets::Redactor::new()
            )
            .unwrap(),
            Backend::Local {
                path: local.into(),
                env: "default".into()
            }
        );
        let dev = Backend::configure(
            Some(&json!({"type": "local"})),
            &[],
            "dev",
            local,
            &crate::secrets::Redactor::new(),
        )
        .unwrap();
        assert_eq!(dev.describe(), "/p/nivis.env.d/dev/nivis.state.json");
        assert_eq!(dev.env(), "dev");
    }

    #[test]
    fn flags_override_flake_fields() {
        let flake =
            json!({"type": "s3", "bucket": "from-flake", "key": "k", "usePathStyle": false});
        let b = Backend::configure(
            Some(&flake),
            &["bucket=from-flag".into(), "usePathStyle=true".into()],
            "ci",
            Path::new("s.json"),
            &crate::secrets::Redactor::new(),
        )
        .unwrap();
        let Backend::S3 { backend, .. } = &b else {
            panic!("{b:?}")
        };
        assert_eq!(backend.target.bucket, "from-flag");
        assert!(backend.target.path_style);
        assert_eq!(b.describe(), "s3://from-flag/env:/ci/k");
        let only_flags = Backend::configure(
            None,
            &["type=s3".into(), "bucket=abc".into(), "key=x/y".into()],
            "default",
            Path::new("s.json"),
            &crate::secrets::Redactor::new(),
        )
        .unwrap();
        assert_eq!(only_flags.describe(), "s3://abc/x/y");
    }

    #[test]
    fn bad_configurations_say_what_is_wrong() {
        let err = |flake: Json, flags: &[&str]| {
            let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
            Backend::configure(
                Some(&flake),
                &flags,
                "default",
                Path::new("s"),
                &crate::secrets::Redactor::new(),
            )
            .unwrap_err()
            .to_string()
        };
        assert!(err(json!({"type": "gcs"}), &[]).contains("known types"));
        assert!(err(json!({"bucket": "abc"}), &[]).contains("needs `type`"));
        assert!(err(json!("s3"), &[]).contains("attribute set"));
        assert!(err(json!({}), &["nonsense"]).contains("KEY=VALUE"));
        assert!(err(json!({"type": "local", "path": "x"}), &[]).contains("no fields"));
    }
}
