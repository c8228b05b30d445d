//! Variables whose values come from a secret store, declared in the flake beside the plan
//! (`nivis.secretSources.NAME = { sops = ./secrets.yaml; key = "db/password"; }`, or `age`,
//! `command`, `env`) and resolved here, at run time, before the first evaluation.
//!
//! Owns: reading the declarations, running `sops` / `age` / the command, and the one-line
//! error naming the variable and the source. A value lives only in memory: the run's redactor
//! learns it (masked in every printout) the moment it is read, and the caller hands it to Nix
//! through the private channel like any variable (`rundir`, DESIGN §9). Not: precedence
//! against `--var` (the caller resolves only variables nothing else gives), writing anything.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use crate::secrets::Redactor;

mod error;

pub(crate) use error::{ReadError, ReadProblem, SpecError, SpecProblem};

/// Largest value read from a source.
const VALUE_LIMIT: usize = 1 << 20;

/// Where one variable's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// A sops-encrypted file and the key path inside it (`db/password`).
    Sops {
        /// The encrypted file.
        file: PathBuf,
        /// The `/`-separated path of the value inside it.
        key: String,
        /// The age identity to decrypt with; `None` leaves it to sops' own lookup.
        identity: Option<PathBuf>,
    },
    /// An age-encrypted file.
    Age {
        /// The encrypted file.
        file: PathBuf,
        /// The identity to decrypt with; `None` takes `$NIVIS_AGE_IDENTITY` or
        /// `$SOPS_AGE_KEY_FILE`.
        identity: Option<PathBuf>,
    },
    /// A command's standard output (one trailing newline removed).
    Command(Vec<String>),
    /// An environment variable of the run.
    Env(String),
}

impl Source {
    /// The source in words, for errors: never a value.
    pub(crate) fn describe(&self) -> String {
        match self {
            Source::Sops { file, key, .. } => format!("sops file {} key {key}", file.display()),
            Source::Age { file, .. } => format!("age file {}", file.display()),
            Source::Command(argv) => format!("command `{}`", argv.join(" ")),
            Source::Env(var) => format!("environment variable {var}"),
        }
    }
}

/// Parses `nivis.secretSources` (as `nix eval --json` gives it; a path literal is a store
/// path); relative paths are relative to `base` (the flake's directory).
pub(crate) fn parse(json: &Json, base: &Path) -> Result<BTreeMap<String, Source>, SpecError> {
    let Some(map) = json.as_object() else {
        return Err(SpecError::NotASet { got: json.clone() });
    };
    let mut out = BTreeMap::new();
    for (name, spec) in map {
        let source = parse_one(spec, base).map_err(|problem| SpecError::Source {
            name: name.clone(),
            problem,
        })?;
        out.insert(name.clone(), source);
    }
    Ok(out)
}

const KINDS: [&str; 4] = ["sops", "age", "command", "env"];

fn parse_one(spec: &Json, base: &Path) -> Result<Source, SpecProblem> {
    let fields = spec.as_object().ok_or(SpecProblem::NotASet)?;
    if let Some(unknown) = fields
        .keys()
        .find(|k| !KINDS.contains(&k.as_str()) && *k != "key" && *k != "identity")
    {
        return Err(SpecProblem::UnknownField(unknown.clone()));
    }
    let kinds: Vec<&str> = KINDS
        .into_iter()
        .filter(|k| fields.contains_key(*k))
        .collect();
    let [kind] = kinds[..] else {
        return Err(SpecProblem::Kinds(
            kinds.iter().map(|k| k.to_string()).collect(),
        ));
    };
    let text = |field: &str| -> Result<Option<String>, SpecProblem> {
        match fields.get(field) {
            None => Ok(None),
            Some(Json::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
            Some(other) => Err(SpecProblem::NotText {
                field: field.into(),
                got: other.clone(),
            }),
        }
    };
    // A path literal in the flake names its copy in the private eval store (§73).
    let path = |field: &str| {
        text(field).map(|t| t.map(|t| crate::nixeval::store_path_on_disk(&base.join(t))))
    };
    let identity = identity(text("identity")?)?;
    Ok(match kind {
        "sops" => Source::Sops {
            file: path("sops")?.expect("present"),
            key: text("key")?.ok_or(SpecProblem::SopsWithoutKey)?,
            identity,
        },
        "age" => Source::Age {
            file: path("age")?.expect("present"),
            identity,
        },
        "command" => {
            let argv: Option<Vec<String>> = fields["command"].as_array().and_then(|items| {
                items
                    .iter()
                    .map(|i| i.as_str().map(str::to_string))
                    .collect()
            });
            match argv {
                Some(argv) if !argv.is_empty() => Source::Command(argv),
                _ => return Err(SpecProblem::BadCommand),
            }
        }
        _ => Source::Env(text("env")?.expect("present")),
    })
}

/// An identity (private key) file: never one in the Nix store, where every user can read it.
fn identity(given: Option<String>) -> Result<Option<PathBuf>, SpecProblem> {
    match given {
        Some(p) if p.starts_with("/nix/store/") => Err(SpecProblem::IdentityInStore(p)),
        Some(p) => Ok(Some(PathBuf::from(p))),
        None => Ok(None),
    }
}

/// Resolves `sources` (in name order); each value is remembered by `redactor` (the run's) as a
/// secret at once. The first failure is returned as one line naming the variable and the
/// source.
pub(crate) fn resolve(
    sources: &BTreeMap<String, Source>,
    redactor: &Redactor,
) -> Result<BTreeMap<String, String>, ReadError> {
    let mut values = BTreeMap::new();
    for (name, source) in sources {
        let value = read(source).map_err(|problem| ReadError {
            name: name.clone(),
            source: source.describe(),
            problem: Box::new(problem),
        })?;
        redactor.remember(&value);
        values.insert(name.clone(), value);
    }
    Ok(values)
}

fn read(source: &Source) -> Result<String, ReadProblem> {
    match source {
        Source::Env(var) => std::env::var(var).map_err(|_| ReadProblem::EnvUnset(var.clone())),
        Source::Command(argv) => run(argv.iter().map(OsString::from).collect(), Vec::new()),
        Source::Age { file, identity } => {
            exists(file)?;
            let identity = identity
                .clone()
                .or_else(|| env_path("NIVIS_AGE_IDENTITY"))
                .or_else(|| env_path("SOPS_AGE_KEY_FILE"))
                .ok_or(ReadProblem::NoAgeIdentity)?;
            check_identity(&identity)?;
            let argv = vec![
                tool("NIVIS_AGE", "age"),
                "-d".into(),
                "-i".into(),
                identity.into(),
                file.into(),
            ];
            run(argv, Vec::new())
        }
        Source::Sops {
            file,
            key,
            identity,
        } => {
            exists(file)?;
            let mut env = Vec::new();
            if let Some(identity) = identity {
                check_identity(identity)?;
                env.push(("SOPS_AGE_KEY_FILE", identity.clone().into_os_string()));
            }
            let extract: String = key.split('/').map(|k| format!("[{k:?}]")).collect();
            let argv = vec![
                tool("NIVIS_SOPS", "sops"),
                "--disable-version-check".into(),
                "--decrypt".into(),
                "--extract".into(),
                extract.into(),
                file.into(),
            ];
            run(argv, env)
        }
    }
}

fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The program for `tool`: `$VAR` if set, else the name (looked up in PATH).
fn tool(var: &str, name: &str) -> OsString {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| name.into())
}

fn exists(file: &Path) -> Result<(), ReadProblem> {
    match std::fs::metadata(file) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(ReadProblem::NotAFile(file.to_path_buf())),
        Err(source) => Err(ReadProblem::Unreadable {
            path: file.to_path_buf(),
            source,
        }),
    }
}

/// A key file is judged like every file that drives secrets (`privfile`).
fn check_identity(path: &Path) -> Result<(), ReadProblem> {
    if path.starts_with("/nix/store") {
        return Err(ReadProblem::IdentityInStore(path.to_path_buf()));
    }
    crate::privfile::open_read(path, "the age identity")
        .map(drop)
        .map_err(|error| ReadProblem::IdentityRefused {
            path: path.to_path_buf(),
            error,
        })
}

/// How long a secret source's command may run: long enough for an agent's passphrase prompt
/// on the terminal, not forever (a command waiting for input it never gets would hang the run).
const COMMAND_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

/// Runs `argv` (stdin closed) and returns its stdout without one trailing newline; a failure
/// is the first line of its stderr. Its output is read up to [`VALUE_LIMIT`] and its run up to
/// [`COMMAND_DEADLINE`] (`child::run_bounded`).
fn run(argv: Vec<OsString>, env: Vec<(&str, OsString)>) -> Result<String, ReadProblem> {
    let program = argv[0].to_string_lossy().into_owned();
    let mut cmd = crate::child::command(&argv[0]);
    cmd.args(&argv[1..]).envs(env);
    let out =
        crate::child::run_bounded(cmd, VALUE_LIMIT, COMMAND_DEADLINE).map_err(|e| match e {
            crate::child::RunError::NotStarted(source) => ReadProblem::NotRun {
                program: program.clone(),
                source,
            },
            crate::child::RunError::TimedOut(after) => ReadProblem::TimedOut {
                program: program.clone(),
                after,
            },
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        // The first line says what failed (age and sops go on with advice).
        let first = stderr
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("no message");
        return Err(ReadProblem::Failed {
            program,
            status: out.status,
            first_line: first.to_string(),
        });
    }
    if out.stdout_over_limit {
        return Err(ReadProblem::TooLong {
            program,
            limit: VALUE_LIMIT,
        });
    }
    let mut value =
        String::from_utf8(out.stdout).map_err(|_| ReadProblem::NotUtf8(program.clone()))?;
    if value.ends_with('\n') {
        value.pop();
        if value.ends_with('\r') {
            value.pop();
        }
    }
    if value.is_empty() {
        return Err(ReadProblem::Empty(program));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sources_parse_and_bad_ones_say_what_is_wrong() {
        let base = Path::new("/p");
        let parsed = parse(
            &json!({
                "a": {"sops": "/nix/store/x-source/s.yaml", "key": "db/password"},
                "b": {"age": "db.age", "identity": "/home/me/key.txt"},
                "c": {"command": ["pass", "show", "db"]},
                "d": {"env": "DB"},
            }),
            base,
        )
        .unwrap();
        assert_eq!(
            parsed["b"],
            Source::Age {
                file: "/p/db.age".into(),
                identity: Some("/home/me/key.txt".into())
            }
        );
        assert_eq!(
            parsed["c"],
            Source::Command(vec!["pass".into(), "show".into(), "db".into()])
        );
        let err = |j: Json| parse(&json!({ "v": j }), base).unwrap_err().to_string();
        assert!(err(json!({"sops": "s.yaml"})).contains("needs `key`"));
        assert!(err(json!({"sops": "s", "age": "a"})).contains("exactly one"));
        assert!(err(json!({"age": "a", "identity": "/nix/store/k"})).contains("Nix store"));
        assert!(err(json!({"command": []})).contains("non-empty list"));
        assert!(err(json!({"vault": "x"})).contains("unknown field \"vault\""));
    }

    #[test]
    fn a_failing_command_and_a_missing_variable_are_one_line_errors() {
        let sources = BTreeMap::from([(
            "pw".to_string(),
            Source::Command(vec![
                "sh".into(),
                "-c".into(),
                "echo no such entry >&2; exit 3".into(),
            ]),
        )]);
        let redactor = Redactor::new();
        let e = resolve(&sources, &redactor).unwrap_err().to_string();
        assert!(
            e.starts_with("variable pw: cannot read it from its command `sh -c"),
            "{e}"
        );
        assert!(e.contains("no such entry") && !e.contains('\n'), "{e}");
        let ok = BTreeMap::from([(
            "pw".to_string(),
            Source::Command(vec!["printf".into(), "s3cret-value\\n".into()]),
        )]);
        assert_eq!(resolve(&ok, &redactor).unwrap()["pw"], "s3cret-value");
        assert_eq!(redactor.redact("x s3cret-value y"), "x (sensitive value) y");
    }
}
