//! Variables whose values come from a secret store, declared in the flake beside the plan
//! (`nivis.secretSources.NAME = { sops = ./secrets.yaml; key = "db/password"; }`, or `age`,
//! `command`, `env`) and resolved here, at run time, before the first evaluation.
//!
//! Owns: reading the declarations, running `sops` / `age` / the command, and the one-line
//! error naming the variable and the source. A value lives only in memory: it is remembered as
//! a secret (masked in every printout) the moment it is read, and the caller hands it to Nix
//! through the private channel like any variable (`rundir`, DESIGN §9). Not: precedence
//! against `--var` (the caller resolves only variables nothing else gives), writing anything.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value as Json;

/// Largest value read from a source.
const VALUE_LIMIT: usize = 1 << 20;

/// Where one variable's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A sops-encrypted file and the key path inside it (`db/password`).
    Sops {
        file: PathBuf,
        key: String,
        identity: Option<PathBuf>,
    },
    /// An age-encrypted file.
    Age {
        file: PathBuf,
        identity: Option<PathBuf>,
    },
    /// A command's standard output (one trailing newline removed).
    Command(Vec<String>),
    /// An environment variable of the run.
    Env(String),
}

impl Source {
    /// The source in words, for errors: never a value.
    pub fn describe(&self) -> String {
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
pub fn parse(json: &Json, base: &Path) -> Result<BTreeMap<String, Source>, String> {
    let Some(map) = json.as_object() else {
        return Err(format!(
            "nivis.secretSources must be an attribute set of sources, not {json}"
        ));
    };
    let mut out = BTreeMap::new();
    for (name, spec) in map {
        let source =
            parse_one(spec, base).map_err(|e| format!("nivis.secretSources.{name}: {e}"))?;
        out.insert(name.clone(), source);
    }
    Ok(out)
}

const KINDS: [&str; 4] = ["sops", "age", "command", "env"];

fn parse_one(spec: &Json, base: &Path) -> Result<Source, String> {
    let fields = spec.as_object().ok_or(
        "a source is an attribute set: { sops = ./file; key = \"a/b\"; }, { age = ./file; }, \
         { command = [ \"pass\" \"show\" \"x\" ]; } or { env = \"NAME\"; }",
    )?;
    if let Some(unknown) = fields
        .keys()
        .find(|k| !KINDS.contains(&k.as_str()) && *k != "key" && *k != "identity")
    {
        return Err(format!(
            "unknown field {unknown:?} (expected one of sops, age, command, env, with key and identity)"
        ));
    }
    let kinds: Vec<&str> = KINDS
        .into_iter()
        .filter(|k| fields.contains_key(*k))
        .collect();
    let [kind] = kinds[..] else {
        return Err(format!(
            "give exactly one of sops, age, command, env (got {})",
            if kinds.is_empty() {
                "none".to_string()
            } else {
                kinds.join(", ")
            }
        ));
    };
    let text = |field: &str| -> Result<Option<String>, String> {
        match fields.get(field) {
            None => Ok(None),
            Some(Json::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
            Some(other) => Err(format!("{field} must be a non-empty string, not {other}")),
        }
    };
    let path = |field: &str| text(field).map(|t| t.map(|t| base.join(t)));
    let identity = identity(text("identity")?)?;
    Ok(match kind {
        "sops" => Source::Sops {
            file: path("sops")?.expect("present"),
            key: text("key")?.ok_or("a sops source needs `key`, the path of the value in the file (e.g. \"db/password\")")?,
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
                _ => return Err("command must be a non-empty list of strings (the program, then its arguments)".into()),
            }
        }
        _ => Source::Env(text("env")?.expect("present")),
    })
}

/// An identity (private key) file: never one in the Nix store, where every user can read it.
fn identity(given: Option<String>) -> Result<Option<PathBuf>, String> {
    match given {
        Some(p) if p.starts_with("/nix/store/") => Err(format!(
            "identity {p} is in the Nix store, readable by every user: a path literal \
             (./key.txt) is copied there. Give the key file's path as a string (\"/home/me/.config/sops/age/keys.txt\")"
        )),
        Some(p) => Ok(Some(PathBuf::from(p))),
        None => Ok(None),
    }
}

/// Resolves `sources` (in name order); each value is remembered as a secret at once. The
/// first failure is returned as one line naming the variable and the source.
pub fn resolve(sources: &BTreeMap<String, Source>) -> Result<BTreeMap<String, String>, String> {
    let mut values = BTreeMap::new();
    for (name, source) in sources {
        let value = read(source).map_err(|e| {
            format!(
                "variable {name}: cannot read it from its {}: {e}; nothing was planned or applied",
                source.describe()
            )
        })?;
        crate::secrets::remember(&value);
        values.insert(name.clone(), value);
    }
    Ok(values)
}

fn read(source: &Source) -> Result<String, String> {
    match source {
        Source::Env(var) => {
            std::env::var(var).map_err(|_| format!("{var} is not set (or not UTF-8)"))
        }
        Source::Command(argv) => run(argv.iter().map(OsString::from).collect(), Vec::new()),
        Source::Age { file, identity } => {
            exists(file)?;
            let identity = identity
                .clone()
                .or_else(|| env_path("NIVIS_AGE_IDENTITY"))
                .or_else(|| env_path("SOPS_AGE_KEY_FILE"))
                .ok_or("no age identity: set `identity` in the source, NIVIS_AGE_IDENTITY or SOPS_AGE_KEY_FILE")?;
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

fn exists(file: &Path) -> Result<(), String> {
    match std::fs::metadata(file) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(format!("{} is not a file", file.display())),
        Err(e) => Err(format!("{}: {e}", file.display())),
    }
}

/// A key file is judged like every file that drives secrets (`privfile`).
fn check_identity(path: &Path) -> Result<(), String> {
    if path.starts_with("/nix/store") {
        return Err(format!(
            "the identity {} is in the Nix store, readable by every user",
            path.display()
        ));
    }
    crate::privfile::open_read(path, "the age identity")
        .map(drop)
        .map_err(|e| e.message(path))
}

/// Runs `argv` (stdin closed) and returns its stdout without one trailing newline; a failure
/// is the first line of its stderr.
fn run(argv: Vec<OsString>, env: Vec<(&str, OsString)>) -> Result<String, String> {
    let program = argv[0].to_string_lossy().into_owned();
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        // The first line says what failed (age and sops go on with advice).
        let first = stderr
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("no message");
        return Err(format!("{program} failed ({}): {first}", out.status));
    }
    if out.stdout.len() > VALUE_LIMIT {
        return Err(format!("{program} printed more than {VALUE_LIMIT} bytes"));
    }
    let mut value = String::from_utf8(out.stdout)
        .map_err(|_| format!("{program} printed text that is not UTF-8"))?;
    if value.ends_with('\n') {
        value.pop();
        if value.ends_with('\r') {
            value.pop();
        }
    }
    if value.is_empty() {
        return Err(format!("{program} printed nothing"));
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
        let err = |j: Json| parse(&json!({ "v": j }), base).unwrap_err();
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
        let e = resolve(&sources).unwrap_err();
        assert!(
            e.starts_with("variable pw: cannot read it from its command `sh -c"),
            "{e}"
        );
        assert!(e.contains("no such entry") && !e.contains('\n'), "{e}");
        let ok = BTreeMap::from([(
            "pw".to_string(),
            Source::Command(vec!["printf".into(), "s3cret-value\\n".into()]),
        )]);
        assert_eq!(resolve(&ok).unwrap()["pw"], "s3cret-value");
        assert_eq!(
            crate::secrets::redact("x s3cret-value y"),
            "x (sensitive value) y"
        );
    }
}
