//! The outputs ledger: what Nix is told about provider outputs at each evaluation, and the
//! private channel that carries the secrets Nix may compute with.
//!
//! Owns: the ledger's shape (`{phase, outputs, env, remoteStates, secretsFile}`), replacing
//! sensitive outputs by `__sensitiveRef` placeholders, the channel's shape (`{outputs, vars,
//! varsText, ephemeral, remoteStates}`: the values behind the placeholders, every variable value,
//! also as typed text, the results of the ephemeral resources open in this run, and the values
//! behind other projects' sensitive outputs), and writing both as private files. Not: where
//! outputs come from (the engine fills it from state and from applies; the CLI reads other
//! projects' states), the directory they are written to (`rundir`), nor running Nix.
//!
//! Secret values never enter the ledger. The channel holds them for the length of one
//! evaluation: the engine deletes it as soon as Nix returns. The Nix library reads it (the
//! ledger names it in `secretsFile`) only when a value derived from a secret is computed, and
//! marks every such value `__sensitive` in the IR. Variables travel only in the channel: which
//! of them are sensitive is known only once the plan has been evaluated.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Map, Value as Json};

use crate::rundir::RunDir;

/// One resource's outputs: plain attributes with sensitive ones replaced by placeholders.
pub(crate) type Outputs = Map<String, Json>;

/// The file name of the ledger inside the run directory.
pub(crate) const LEDGER_FILE: &str = "ledger.json";

/// The file name of the channel of secrets inside the run directory.
pub(crate) const CHANNEL_FILE: &str = "secrets.json";

/// The ledger handed to Nix.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ledger {
    /// The phase about to be evaluated (0 before anything was applied in this run).
    pub(crate) phase: u32,
    /// Outputs per resource or data id.
    pub outputs: BTreeMap<String, Outputs>,
    /// Variable values set on the command line (they go to the channel).
    pub(crate) vars: BTreeMap<String, Json>,
    /// The verbatim text of variable values typed as text (`--var`, environment): `lib.vars`
    /// uses it for a variable declared as a string, so `--var t=2` is "2", not 2 (the channel).
    pub(crate) vars_text: BTreeMap<String, String>,
    /// The values the placeholders stand for, per id and top-level attribute (the channel).
    secrets: BTreeMap<String, Outputs>,
    /// The selected environment (`--env`), if the caller sets one.
    pub(crate) env: Option<String>,
    /// The results of the ephemeral resources open in this run, by id (the channel only:
    /// they never enter the ledger).
    pub(crate) ephemeral: BTreeMap<String, Json>,
    /// Other projects' states the plan reads (`nivis.remoteStates`), read once per run.
    pub(crate) remote_states: Arc<Vec<RemoteState>>,
}

/// Another project's state as a plan reads it (`lib.remoteState ledger NAME`): its recorded
/// outputs as the ledger shows a resource's, sensitive attributes as placeholders whose values
/// go to the channel.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteState {
    /// The name the plan gives it (`nivis.remoteStates.<name>`).
    pub(crate) name: String,
    /// Where it is, for messages: a path or `s3://bucket/key`.
    pub(crate) location: String,
    /// The other state's lineage and serial, shown in the plan.
    pub(crate) lineage: String,
    /// See `lineage`.
    pub(crate) serial: u64,
    /// Outputs per resource or data id of the other project, placeholders for its secrets.
    pub(crate) outputs: BTreeMap<String, Outputs>,
    /// The values behind the placeholders, per id and top-level attribute (the channel).
    secrets: BTreeMap<String, Outputs>,
}

impl RemoteState {
    /// A state read from `location` with its lineage and serial; fill it with [`RemoteState::set`].
    pub(crate) fn new(name: &str, location: &str, lineage: &str, serial: u64) -> RemoteState {
        RemoteState {
            name: name.to_string(),
            location: location.to_string(),
            lineage: lineage.to_string(),
            serial,
            outputs: BTreeMap::new(),
            secrets: BTreeMap::new(),
        }
    }

    /// Records one of its resources, as [`Ledger::set`] does for the project's own.
    pub(crate) fn set(&mut self, id: &str, attributes: &Json, sensitive: &[Json]) {
        let (outputs, secrets) = split_secrets(id, attributes, sensitive);
        self.outputs.insert(id.to_string(), outputs);
        if !secrets.is_empty() {
            self.secrets.insert(id.to_string(), secrets);
        }
    }
}

/// `attributes` (a resource's state) with the top-level attribute of each `sensitive` path
/// replaced by a placeholder naming `id` and that attribute, and the values replaced.
fn split_secrets(id: &str, attributes: &Json, sensitive: &[Json]) -> (Outputs, Outputs) {
    let mut outputs = match attributes {
        Json::Object(map) => map.clone(),
        _ => Map::new(),
    };
    let mut secrets = Map::new();
    for path in sensitive {
        let Some(first) = path
            .as_array()
            .and_then(|p| p.first())
            .and_then(Json::as_str)
        else {
            continue;
        };
        if secrets.contains_key(first) {
            continue;
        }
        if let Some(value) = outputs.get_mut(first) {
            let placeholder = json!({ "__sensitiveRef": { "resource": id, "path": [first] } });
            secrets.insert(first.to_string(), std::mem::replace(value, placeholder));
        }
    }
    (outputs, secrets)
}

impl Ledger {
    /// Records a resource's outputs. `attributes` is the plain JSON object of its state; each
    /// path in `sensitive` (JSON arrays of keys/indices) makes its top-level attribute a
    /// placeholder pointing at the resource and that attribute, and its value a secret of the
    /// channel.
    pub(crate) fn set(&mut self, id: &str, attributes: &Json, sensitive: &[Json]) {
        let (outputs, secrets) = split_secrets(id, attributes, sensitive);
        self.outputs.insert(id.to_string(), outputs);
        if secrets.is_empty() {
            self.secrets.remove(id);
        } else {
            self.secrets.insert(id.to_string(), secrets);
        }
    }

    /// The ledger as JSON (without the channel's path).
    pub(crate) fn to_json(&self) -> Json {
        serde_json::to_value(self.document(None)).expect("JSON values serialise")
    }

    /// The ledger's document, borrowing the outputs: serialised straight to the file's bytes
    /// rather than through a JSON copy of every output (as large as the state).
    fn document<'a>(&'a self, secrets_file: Option<&'a str>) -> LedgerDocument<'a> {
        LedgerDocument {
            phase: self.phase,
            outputs: &self.outputs,
            env: self.env.as_deref(),
            remote_states: self
                .remote_states
                .iter()
                .map(|r| {
                    let view = RemoteView {
                        lineage: &r.lineage,
                        serial: r.serial,
                        outputs: &r.outputs,
                    };
                    (r.name.as_str(), view)
                })
                .collect(),
            secrets_file,
        }
    }

    /// The channel as JSON: secrets behind the placeholders, and the variables.
    pub(crate) fn channel_json(&self) -> Json {
        let mut json =
            json!({ "outputs": self.secrets, "vars": self.vars, "varsText": self.vars_text });
        if !self.ephemeral.is_empty() {
            json["ephemeral"] = json!(self.ephemeral);
        }
        if !self.remote_states.is_empty() {
            let secrets: BTreeMap<&str, &BTreeMap<String, Outputs>> = self
                .remote_states
                .iter()
                .map(|r| (r.name.as_str(), &r.secrets))
                .collect();
            json["remoteStates"] = json!(secrets);
        }
        json
    }

    /// Writes the channel and the ledger (naming the channel in `secretsFile`) into `dir`, both
    /// mode 0600; returns the ledger's path. Delete [`CHANNEL_FILE`] once Nix has read it.
    pub(crate) fn write(&self, dir: &RunDir) -> std::io::Result<PathBuf> {
        let channel = dir.write(CHANNEL_FILE, &line(&self.channel_json()))?;
        let channel = channel
            .to_str()
            .ok_or_else(|| std::io::Error::other("the run directory's path is not UTF-8"))?;
        dir.write(LEDGER_FILE, &line(&self.document(Some(channel))))
    }
}

/// The ledger file's shape: `{phase, outputs, env?, remoteStates?, secretsFile?}`.
#[derive(Serialize)]
struct LedgerDocument<'a> {
    phase: u32,
    outputs: &'a BTreeMap<String, Outputs>,
    #[serde(skip_serializing_if = "Option::is_none")]
    env: Option<&'a str>,
    #[serde(rename = "remoteStates", skip_serializing_if = "BTreeMap::is_empty")]
    remote_states: BTreeMap<&'a str, RemoteView<'a>>,
    #[serde(rename = "secretsFile", skip_serializing_if = "Option::is_none")]
    secrets_file: Option<&'a str>,
}

/// One remote state in the ledger: `{lineage, serial, outputs}`.
#[derive(Serialize)]
struct RemoteView<'a> {
    lineage: &'a str,
    serial: u64,
    outputs: &'a BTreeMap<String, Outputs>,
}

fn line(json: &impl Serialize) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(json).expect("JSON values serialise");
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn secrets_go_to_the_channel_and_placeholders_to_the_ledger() {
        let mut ledger = Ledger {
            env: Some("staging".into()),
            ..Ledger::default()
        };
        ledger.vars.insert("token".into(), json!("var-s3cret"));
        ledger.set(
            "alpha.alpha_token.A",
            &json!({"id": "alpha-0", "secret": "s3cret", "creds": {"pw": "p4ss", "user": "u"}}),
            &[json!(["secret"]), json!(["creds", "pw"]), json!(["absent"])],
        );
        let text = ledger.to_json().to_string();
        assert!(!text.contains("s3cret") && !text.contains("p4ss"), "{text}");
        assert!(!text.contains("absent"), "{text}");
        assert_eq!(
            ledger.to_json()["outputs"]["alpha.alpha_token.A"]["creds"]["__sensitiveRef"]["path"],
            json!(["creds"])
        );
        assert_eq!(
            ledger.channel_json(),
            json!({"outputs": {"alpha.alpha_token.A": {"secret": "s3cret", "creds": {"pw": "p4ss", "user": "u"}}},
                   "vars": {"token": "var-s3cret"}, "varsText": {}})
        );

        let parent = tempfile::tempdir().unwrap();
        let dir = RunDir::create_in(parent.path()).unwrap();
        let path = ledger.write(&dir).unwrap();
        for p in [path.clone(), dir.path().join(CHANNEL_FILE)] {
            assert_eq!(
                std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
        let written = std::fs::read(&path).unwrap();
        let back: Json = serde_json::from_slice(&written).unwrap();
        // Written straight from the outputs, it is the ledger's JSON plus the channel's name.
        let mut expected = ledger.to_json();
        expected["secretsFile"] = back["secretsFile"].clone();
        assert_eq!(written, line(&expected));
        assert_eq!(back["outputs"]["alpha.alpha_token.A"]["id"], "alpha-0");
        // Named through the run directory's descriptor, which a swapped path cannot redirect.
        let through_fd = format!("/proc/self/fd/{}/{CHANNEL_FILE}", dir.inherit_fd());
        assert_eq!(back["secretsFile"], through_fd.as_str());
        assert!(
            back.get("vars").is_none(),
            "variables never enter the ledger"
        );
    }

    #[test]
    fn another_projects_secrets_go_to_the_channel_under_its_name() {
        let mut network = RemoteState::new("network", "/s/n.json", "lin-1", 7);
        network.set(
            "alpha.alpha_token.A",
            &json!({"id": "a", "password": "r3mote-pw"}),
            &[json!(["password"])],
        );
        let ledger = Ledger {
            remote_states: Arc::new(vec![network]),
            ..Ledger::default()
        };
        let shown = ledger.to_json();
        assert!(!shown.to_string().contains("r3mote-pw"), "{shown}");
        assert_eq!(
            shown["remoteStates"]["network"],
            json!({"lineage": "lin-1", "serial": 7, "outputs": {"alpha.alpha_token.A": {
                "id": "a",
                "password": {"__sensitiveRef": {"resource": "alpha.alpha_token.A", "path": ["password"]}}}}})
        );
        assert_eq!(
            ledger.channel_json()["remoteStates"],
            json!({"network": {"alpha.alpha_token.A": {"password": "r3mote-pw"}}})
        );
        // Without any, neither file has the key.
        assert!(Ledger::default().to_json().get("remoteStates").is_none());
        assert!(Ledger::default()
            .channel_json()
            .get("remoteStates")
            .is_none());
    }
}
