//! Plan variable values from the command line, files and the environment.
//!
//! Owns: precedence (declared defaults < `--var-file` files in order < `--var` flags <
//! `NIVIS_VAR_<name>` environment, as the roadmap fixes it) and what a value given as text
//! means. Not: declarations, defaults and type checks, which the Nix library applies
//! (`lib.vars`, docs/IR-CONTRACT.md).
//!
//! A value typed on a command line or in the environment is text whose meaning depends on
//! the variable's declared type, which only the evaluation knows: `--var t=2` is the string
//! "2" for a string variable and the number 2 for a number variable. So such values travel
//! twice in the ledger: in `vars` as JSON when the text parses as JSON (else as the string),
//! and verbatim in `varsText`, which `lib.vars` prefers for a string variable.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::secrets::Redactor;
use serde_json::Value as Json;

/// The environment variable prefix: `NIVIS_VAR_region=eu-west-1`.
pub(super) const ENV_PREFIX: &str = crate::guard::ENV_PREFIX;

/// `(name, value)` pairs held in memory only; `Debug` shows the names, never a value.
#[derive(Clone, Default)]
pub(crate) struct InMemoryVars(pub Vec<(String, String)>);

impl std::fmt::Debug for InMemoryVars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(n, _)| n))
            .finish()
    }
}

/// Variable values, ready for the ledger.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct VarValues {
    /// Every value as JSON.
    pub(crate) values: BTreeMap<String, Json>,
    /// The text of values given as text (flags, environment), verbatim.
    pub(crate) text: BTreeMap<String, String>,
    /// Notes for the user (an environment value overriding a flag).
    pub(crate) notes: Vec<String>,
}

impl VarValues {
    fn set_json(&mut self, name: &str, value: Json) {
        self.values.insert(name.to_string(), value);
        self.text.remove(name);
    }

    fn set_text(&mut self, name: &str, text: &str) {
        self.values.insert(name.to_string(), guess(text));
        self.text.insert(name.to_string(), text.to_string());
    }
}

/// Adds the values of the variables the flake's `secretSources` declare and nothing else
/// gives (a `--var`, `--var-file` or `NIVIS_VAR_x` wins, so CI can override a source without
/// running it), read now (`secret_sources`: each is masked from the moment it is read); returns
/// the names of those read.
pub(super) fn add_secret_sources(
    vars: &mut VarValues,
    sources: Option<&Json>,
    base: &Path,
    redactor: &Redactor,
    trust_group: bool,
) -> Result<Vec<String>, String> {
    let Some(sources) = sources else {
        return Ok(Vec::new());
    };
    let mut declared = crate::secret_sources::parse(sources, base).map_err(|e| e.to_string())?;
    declared.retain(|name, _| !vars.values.contains_key(name));
    // An encrypted file someone else can replace is a value they choose (age does not say who
    // encrypted it): the trust rule for code (DESIGN §93).
    for (name, source) in &declared {
        use crate::secret_sources::Source;
        let (Source::Sops { file, .. } | Source::Age { file, .. }) = source else {
            continue;
        };
        let what = format!("{} for the variable {name}", source.describe());
        let checked = crate::project::check_secret_file(file, &what, trust_group);
        if let Some(warning) = checked.map_err(|e| e.to_string())? {
            eprintln!(
                "Warning: {}",
                crate::render::escape_text(redactor, &warning)
            );
        }
    }
    let values = crate::secret_sources::resolve(&declared, redactor).map_err(|e| e.to_string())?;
    for (name, value) in &values {
        vars.set_json(name, Json::String(value.clone()));
    }
    Ok(values.into_keys().collect())
}

/// Largest `--var-file` read.
const VAR_FILE_LIMIT: u64 = 64 << 20;

/// Opens a `--var-file` under the file rule (`privfile`): ours, writable only by us, in
/// directories nobody else can change, never through a link at its name. A pipe
/// (`--var-file <(pass show db)`) is taken as it is: nobody else can put a file there.
fn open_var_file(path: &Path) -> Result<std::fs::File, String> {
    use std::os::unix::fs::FileTypeExt;
    if std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo()) {
        return std::fs::File::open(path)
            .map_err(|e| format!("--var-file {}: {e}", path.display()));
    }
    crate::privfile::open_read(path, "the --var-file").map_err(|e| match e {
        crate::privfile::OpenError::Refused(m) => m.to_string(),
        crate::privfile::OpenError::Io(e) => format!("--var-file {}: {e}", path.display()),
    })
}

/// Reads a text file of at most `limit` bytes (a device such as /dev/zero never ends).
fn read_bounded(path: &Path, limit: u64) -> Result<String, String> {
    use std::io::Read;
    let file = open_var_file(path)?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("--var-file {}: {e}", path.display()))?;
    let name = path.display();
    if bytes.len() as u64 > limit {
        return Err(format!(
            "--var-file {name}: larger than {} MiB",
            limit >> 20
        ));
    }
    String::from_utf8(bytes).map_err(|_| format!("--var-file {name}: not UTF-8 text"))
}

/// Collects values from `--var-file` files, `--var NAME=VALUE` flags and `env` (the process
/// environment, as pairs), lowest precedence first.
pub(super) fn collect(
    files: &[PathBuf],
    flags: &[String],
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<VarValues, String> {
    let mut out = VarValues::default();
    for file in files {
        let text = read_bounded(file, VAR_FILE_LIMIT)?;
        let json: Json =
            serde_json::from_str(&text).map_err(|e| not_json(file, &text, &e.to_string()))?;
        let Json::Object(map) = json else {
            return Err(format!(
                "--var-file {}: must hold a JSON object of variable values",
                file.display()
            ));
        };
        for (name, value) in map {
            out.set_json(&name, value);
        }
    }
    let mut from_flags = BTreeMap::new();
    for var in flags {
        let (name, value) = var
            .split_once('=')
            .ok_or_else(|| format!("--var {var:?}: expected NAME=VALUE"))?;
        if name.is_empty() {
            return Err(format!("--var {var:?}: the variable name is empty"));
        }
        out.set_text(name, value);
        from_flags.insert(name.to_string(), value.to_string());
    }
    let mut env: Vec<(String, String)> = env.into_iter().collect();
    env.sort();
    for (key, value) in env {
        let Some(name) = key.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        if name.is_empty() {
            continue;
        }
        if let Some(flag) = from_flags.get(name) {
            if *flag != value {
                out.notes.push(format!(
                    "{key} overrides --var {name}=...: the environment wins over flags"
                ));
            }
        }
        out.set_text(name, &value);
    }
    Ok(out)
}

/// The error for a `--var-file` that is not JSON; for a Terraform `.tfvars` file (lines
/// `name = value`), the JSON it must become, with the names and without the values (a
/// variable file often holds secrets).
fn not_json(file: &Path, text: &str, error: &str) -> String {
    let names: Vec<&str> = text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, _)| name.trim())
        .filter(|name| crate::value::is_identifier(name))
        .collect();
    let tfvars = file.extension().is_some_and(|e| e == "tfvars");
    if names.is_empty() && !tfvars {
        return format!("--var-file {}: not JSON: {error}", file.display());
    }
    let shape: Vec<String> = names.iter().map(|n| format!("\"{n}\": …")).collect();
    format!(
        "--var-file {}: not JSON ({error}): Nivis reads variable files as JSON, not Terraform's \
         .tfvars syntax. Write it as JSON, e.g. {}.json:\n  {{{}}}\neach `name = value` line \
         becoming \"name\": value (strings in double quotes, numbers, true/false and [lists] \
         are the same in JSON)",
        file.display(),
        file.display(),
        shape.join(", ")
    )
}

/// The `NIVIS_VAR_*` pairs of this process's environment. Other variables may hold anything
/// (`std::env::vars` would panic on one that is not UTF-8); a `NIVIS_VAR_*` value that is not
/// UTF-8 is an error naming it, never its value.
pub(super) fn from_env() -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    // Taken out of the environment at the start (`guard`): no process Nivis starts sees them.
    for (k, v) in crate::guard::env_variables() {
        let Some(key) = k.to_str().filter(|k| k.starts_with(ENV_PREFIX)) else {
            continue;
        };
        let value = v
            .to_str()
            .map(str::to_string)
            .ok_or_else(|| format!("{key}: the value is not UTF-8"))?;
        pairs.push((key.to_string(), value));
    }
    Ok(pairs)
}

/// Text read as JSON when it is JSON (`3`, `true`, `[1,2]`, `{"a":1}`), else the string.
fn guess(text: &str) -> Json {
    serde_json::from_str(text).unwrap_or_else(|_| Json::String(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn file_then_flag_then_environment() {
        let dir = tempfile::tempdir().unwrap();
        let f1 = dir.path().join("a.json");
        let f2 = dir.path().join("b.json");
        std::fs::write(&f1, r#"{"a": 1, "b": 1, "c": 1, "d": [1]}"#).unwrap();
        std::fs::write(&f2, r#"{"a": 2, "b": 2, "c": 2}"#).unwrap();
        let flags = vec!["b=3".to_string(), "c=3".to_string()];
        let got = collect(
            &[f1, f2],
            &flags,
            env(&[("NIVIS_VAR_c", "4"), ("HOME", "/x"), ("NIVIS_VAR_e", "eu")]),
        )
        .unwrap();
        assert_eq!(got.values["a"], json!(2), "the later file wins");
        assert_eq!(got.values["b"], json!(3), "a flag beats files");
        assert_eq!(got.values["c"], json!(4), "the environment beats flags");
        assert_eq!(got.values["d"], json!([1]));
        assert_eq!(got.values["e"], json!("eu"));
        // Values from files are typed JSON: no text; flag and environment values keep theirs.
        assert!(!got.text.contains_key("a") && !got.text.contains_key("d"));
        assert_eq!(got.text["b"], "3");
        assert_eq!(got.text["c"], "4");
        assert_eq!(got.notes.len(), 1, "{:?}", got.notes);
        assert!(got.notes[0].contains("NIVIS_VAR_c overrides --var c"));
    }

    #[test]
    fn text_keeps_what_json_would_lose() {
        let flags = vec![
            "t=2.50".to_string(),
            "z=007".to_string(),
            "n=null".to_string(),
        ];
        let got = collect(&[], &flags, env(&[])).unwrap();
        assert_eq!(got.text["t"], "2.50");
        assert_eq!(got.values["z"], json!("007"), "not JSON: a string");
        assert_eq!(got.values["n"], Json::Null);
        assert_eq!(got.text["n"], "null");
    }

    #[test]
    fn malformed_flags_are_refused() {
        assert!(collect(&[], &["novalue".into()], env(&[])).is_err());
        assert!(collect(&[], &["=x".into()], env(&[])).is_err());
    }
}
