//! Other projects' states a plan reads (`nivis.remoteStates`, DESIGN §98): the declarations
//! beside the plan checked, and each state read once, before the first evaluation, into the
//! form the ledger gives Nix (`ledger::RemoteState`).
//!
//! Owns: the declaration's shape (`{ backend = …; env ? "default"; }`, the backend spelled as
//! `nivis.backend` is, a local one by `path` or by the other project's declared name), the
//! refusal of a state that holds nothing yet, and teaching the run's redactor the other state's
//! secrets. Not: how a backend reads (`state::Backend::read_only`, which takes no lock and
//! writes nothing), nor what Nix does with the outputs (`nix/lib/remote.nix`).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value as Json};

use crate::ledger::RemoteState;
use crate::secrets::Redactor;
use crate::state::{Backend, BackendError, StateError, DEFAULT_ENV};

/// One declared state, ready to read.
#[derive(Debug)]
struct Declaration {
    name: String,
    backend: Backend,
}

/// Why a remote state cannot be read.
#[derive(Debug)]
pub(super) enum RemoteStateError {
    /// `nivis.remoteStates` (or one entry, or its backend) is not an attribute set.
    NotAnAttrSet {
        /// `remoteStates` or `remoteStates.NAME` (`.backend`).
        at: String,
        /// What it is, as JSON text.
        found: String,
    },
    /// A name that is not an identifier.
    BadName {
        /// The name as given.
        name: String,
    },
    /// A field the declaration does not take, or one of the wrong kind.
    BadField {
        /// The state's name.
        name: String,
        /// What is wrong.
        problem: String,
    },
    /// The backend's configuration is wrong.
    Backend {
        /// The state's name.
        name: String,
        /// Why (boxed: a backend error is large).
        source: Box<BackendError>,
    },
    /// The state cannot be read.
    Read {
        /// The state's name.
        name: String,
        /// Where it is.
        location: String,
        /// Why (boxed: a state error is large).
        source: Box<StateError>,
    },
    /// Nothing was ever recorded there.
    Empty {
        /// The state's name.
        name: String,
        /// Where it is.
        location: String,
    },
}

impl std::fmt::Display for RemoteStateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteStateError::NotAnAttrSet { at, found } => write!(
                f,
                "nivis.{at} must be an attribute set, not {found}: `remoteStates.NAME = {{ backend = \
                 {{ type = \"s3\"; … }}; }}` (the book's chapter on modules)"),
            RemoteStateError::BadName { name } => write!(
                f,
                "nivis.remoteStates: {name:?} is not a valid name (a letter or '_', then letters, \
                 digits, '_' or '-')"
            ),
            RemoteStateError::BadField { name, problem } => {
                write!(f, "nivis.remoteStates.{name}: {problem}")
            }
            RemoteStateError::Backend { name, source } => {
                write!(f, "nivis.remoteStates.{name}.backend: {source}")
            }
            RemoteStateError::Read {
                name,
                location,
                source,
            } => write!(
                f,
                "remote state {name} ({location}) cannot be read: {source}"
            ),
            RemoteStateError::Empty { name, location } => write!(
                f,
                "remote state {name} ({location}) holds no state: nothing was ever applied there. \
                 Apply that project first, or check its backend (path, bucket, key, env) in \
                 nivis.remoteStates.{name}"
            ),
        }
    }
}

impl std::error::Error for RemoteStateError {}

/// Reads every state `declared` (the flake's `nivis.remoteStates`; `None`: none) without a lock,
/// in name order; their secrets (and the credentials read for them) are taught to `redactor`.
pub(super) fn read_all(
    declared: Option<&Json>,
    redactor: &Redactor,
) -> Result<Vec<RemoteState>, RemoteStateError> {
    parse(declared, redactor)?
        .iter()
        .map(|d| read(d, redactor))
        .collect()
}

fn parse(
    declared: Option<&Json>,
    redactor: &Redactor,
) -> Result<Vec<Declaration>, RemoteStateError> {
    let entries = match declared {
        None | Some(Json::Null) => return Ok(Vec::new()),
        Some(Json::Object(m)) => m,
        Some(other) => {
            return Err(RemoteStateError::NotAnAttrSet {
                at: "remoteStates".into(),
                found: other.to_string(),
            })
        }
    };
    let mut declarations = Vec::new();
    for (name, entry) in entries {
        if !is_name(name) {
            return Err(RemoteStateError::BadName { name: name.clone() });
        }
        declarations.push(Declaration {
            name: name.clone(),
            backend: backend_of(name, entry, redactor)?,
        });
    }
    Ok(declarations)
}

fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The backend of one declaration `{ backend; env ? "default"; }`.
fn backend_of(name: &str, entry: &Json, redactor: &Redactor) -> Result<Backend, RemoteStateError> {
    let bad = |problem: String| RemoteStateError::BadField {
        name: name.to_string(),
        problem,
    };
    let Json::Object(entry) = entry else {
        return Err(RemoteStateError::NotAnAttrSet {
            at: format!("remoteStates.{name}"),
            found: entry.to_string(),
        });
    };
    if let Some(unknown) = entry
        .keys()
        .find(|k| !["backend", "env"].contains(&k.as_str()))
    {
        return Err(bad(format!(
            "unknown field {unknown:?} (a remote state is {{ backend = {{ … }}; env ? \"default\"; }})"
        )));
    }
    let env = match entry.get("env") {
        None | Some(Json::Null) => DEFAULT_ENV,
        Some(Json::String(env)) => env.as_str(),
        Some(other) => return Err(bad(format!("env must be a string, not {other}"))),
    };
    let fields = match entry.get("backend") {
        Some(Json::Object(fields)) => fields,
        None => {
            return Err(bad(
                "`backend` is required (spelled as nivis.backend is)".into()
            ))
        }
        Some(other) => {
            return Err(RemoteStateError::NotAnAttrSet {
                at: format!("remoteStates.{name}.backend"),
                found: other.to_string(),
            })
        }
    };
    let backend_error = |source| RemoteStateError::Backend {
        name: name.to_string(),
        source: Box::new(source),
    };
    match fields.get("type").and_then(Json::as_str) {
        Some("local") => {
            let path = local_path(fields).map_err(bad)?;
            Backend::configure(None, &[], env, &path, redactor).map_err(backend_error)
        }
        // The S3 fields are `nivis.backend`'s, checked by the same code; a read never needs the
        // local path a project moving to S3 would have.
        _ => Backend::configure(
            Some(&Json::Object(fields.clone())),
            &[],
            env,
            Path::new("/"),
            redactor,
        )
        .map_err(backend_error),
    }
}

/// A local state's file: `path` (absolute), or the default state of the project that declares
/// `nivis.project = NAME` on this machine (`project`).
fn local_path(fields: &Map<String, Json>) -> Result<PathBuf, String> {
    let usage = "a local remote state is { type = \"local\"; path = \"/abs/nivis.state.json\"; } \
                 or { type = \"local\"; project = \"NAME\"; } (the other project's nivis.project)";
    if let Some(unknown) = fields
        .keys()
        .find(|k| !["type", "path", "project"].contains(&k.as_str()))
    {
        return Err(format!("backend: unknown field {unknown:?}: {usage}"));
    }
    match (fields.get("path"), fields.get("project")) {
        (Some(Json::String(path)), None) if Path::new(path).is_absolute() => Ok(PathBuf::from(path)),
        (Some(Json::String(path)), None) => Err(format!(
            "backend.path {path:?} is relative; give an absolute path (the plan is evaluated from a copy \
             in the Nix store, so nothing is relative to it)"
        )),
        (None, Some(project)) => {
            crate::project::declared_state_path(project).map_err(|e| format!("backend.project: {e}"))
        }
        _ => Err(format!("backend: {usage}")),
    }
}

/// Reads one state without its lock.
fn read(declaration: &Declaration, redactor: &Redactor) -> Result<RemoteState, RemoteStateError> {
    let location = declaration.backend.describe();
    let state = declaration
        .backend
        .read_only()
        .map_err(|source| RemoteStateError::Read {
            name: declaration.name.clone(),
            location: location.clone(),
            source: Box::new(source),
        })?;
    if state.serial == 0 && state.resources.is_empty() {
        return Err(RemoteStateError::Empty {
            name: declaration.name.clone(),
            location,
        });
    }
    state.teach_secrets(redactor);
    let mut remote = RemoteState::new(&declaration.name, &location, &state.lineage, state.serial);
    for r in state.iter() {
        remote.set(&r.id, &r.attributes, &r.sensitive_paths);
    }
    Ok(remote)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refusal(declared: Json) -> String {
        parse(Some(&declared), &Redactor::new())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn declarations_are_checked_field_by_field() {
        let ok = parse(
            Some(
                &json!({"net": {"backend": {"type": "local", "path": "/x/s.json"}, "env": "prod"}}),
            ),
            &Redactor::new(),
        )
        .unwrap();
        assert_eq!(ok[0].name, "net");
        assert_eq!(
            ok[0].backend.local_path(),
            Path::new("/x/nivis.env.d/prod/s.json")
        );
        assert!(refusal(json!(["net"])).contains("nivis.remoteStates must be an attribute set"));
        assert!(refusal(json!({"a b": {}})).contains("\"a b\" is not a valid name"));
        assert!(
            refusal(json!({"net": {"backend": {"type": "local"}, "lock": true}}))
                .contains("unknown field \"lock\"")
        );
        assert!(refusal(json!({"net": {}})).contains("`backend` is required"));
        assert!(
            refusal(json!({"net": {"backend": {"type": "local", "path": "s.json"}}}))
                .contains("is relative")
        );
        assert!(
            refusal(json!({"net": {"backend": {"type": "local", "project": "no/slash"}}}))
                .contains("backend.project")
        );
        let s3 = refusal(
            json!({"net": {"backend": {"type": "s3", "bucket": "b", "key": "k", "lockTable": "t"}}}),
        );
        assert!(s3.starts_with("nivis.remoteStates.net.backend: "), "{s3}");
        assert!(s3.contains("lockTable"), "{s3}");
    }

    #[test]
    fn a_state_never_applied_is_refused_and_a_missing_file_counts_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nothing.json");
        let declared = json!({"net": {"backend": {"type": "local", "path": path}}});
        let e = read_all(Some(&declared), &Redactor::new()).unwrap_err();
        assert!(e.to_string().contains("holds no state"), "{e}");
    }
}
