//! The outputs ledger: what Nix is told about provider outputs at each evaluation.
//!
//! Owns: the ledger's shape (`{phase, outputs, vars, varsText}`), replacing sensitive outputs by
//! `__sensitiveRef` placeholders, and writing it as a private (0600) file. Not: where outputs
//! come from (the engine fills it from state and from applies), nor running Nix.
//!
//! Secret values never enter the ledger: a Nix reference to a sensitive output stays a
//! `__sensitiveRef` leaf in the IR and the executor substitutes the value from state when it
//! calls the provider.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde_json::{json, Map, Value as Json};

/// One resource's outputs: plain attributes with sensitive ones replaced by placeholders.
pub type Outputs = Map<String, Json>;

/// The ledger handed to Nix.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ledger {
    /// The phase about to be evaluated (0 before anything was applied in this run).
    pub phase: u32,
    /// Outputs per resource or data id.
    pub outputs: BTreeMap<String, Outputs>,
    /// Variable values set on the command line.
    pub vars: BTreeMap<String, Json>,
    /// The verbatim text of variable values typed as text (`--var`, environment): `lib.vars`
    /// uses it for a variable declared as a string, so `--var t=2` is "2", not 2.
    pub vars_text: BTreeMap<String, String>,
    /// The selected environment (`--env`), if the caller sets one.
    pub env: Option<String>,
}

impl Ledger {
    /// Records a resource's outputs. `attributes` is the plain JSON object of its state; each
    /// path in `sensitive` (JSON arrays of keys/indices) is replaced by a placeholder pointing at
    /// the resource and the top-level attribute.
    pub fn set(&mut self, id: &str, attributes: &Json, sensitive: &[Json]) {
        let mut outputs = match attributes {
            Json::Object(map) => map.clone(),
            _ => Map::new(),
        };
        for path in sensitive {
            let Some(first) = path
                .as_array()
                .and_then(|p| p.first())
                .and_then(Json::as_str)
            else {
                continue;
            };
            if outputs.contains_key(first) {
                outputs.insert(
                    first.to_string(),
                    json!({ "__sensitiveRef": { "resource": id, "path": [first] } }),
                );
            }
        }
        self.outputs.insert(id.to_string(), outputs);
    }

    /// Forgets a resource (destroyed).
    pub fn remove(&mut self, id: &str) {
        self.outputs.remove(id);
    }

    /// The ledger as JSON.
    pub fn to_json(&self) -> Json {
        let mut json = json!({
            "phase": self.phase,
            "outputs": self.outputs,
            "vars": self.vars,
            "varsText": self.vars_text,
        });
        if let Some(env) = &self.env {
            json["env"] = Json::String(env.clone());
        }
        json
    }

    /// Writes the ledger to `path` with mode 0600, replacing any previous file atomically.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("tmp");
        {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            serde_json::to_writer(&mut file, &self.to_json())?;
            file.write_all(b"\n")?;
        }
        std::fs::rename(&tmp, path)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn sensitive_outputs_become_placeholders_and_file_is_private() {
        let mut ledger = Ledger::default();
        ledger.set(
            "alpha.alpha_token.A",
            &json!({"id": "alpha-0", "secret": "s3cret"}),
            &[json!(["secret"])],
        );
        let text = ledger.to_json().to_string();
        assert!(!text.contains("s3cret"));
        assert!(text.contains("__sensitiveRef"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.json");
        ledger.write(&path).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let back: Json = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(back["outputs"]["alpha.alpha_token.A"]["id"], "alpha-0");
    }
}
