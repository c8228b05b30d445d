//! Saved plans (`nivis plan --out FILE`, `nivis apply FILE`, `nivis show FILE`): the artifact
//! that lets a plan reviewed in a pull request be applied exactly.
//!
//! Owns the artifact's model, its canonical bytes (camelCase keys, sorted, no insignificant
//! white space; `meta.schemaVersion`), its content hash, the comparison of a fresh run's facts
//! with the saved ones (each difference named), and what the saved plan allows each resource
//! to do. No secret is in it: sensitive values are `"(sensitive)"`, sensitive variables are
//! digests, and every known secret inside a string is redacted.
//!
//! Its rows are the typed records of `wire` (the `--json` stream's spelling); reading a file
//! that holds an unknown action or wait is an error.
//!
//! Not: planning or applying (the engine asks this module), reading or writing files (the CLI),
//! printing (`render`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};
use sha2::{Digest, Sha256};

use super::events::{Action, Event};
use super::wire::{DeferredRow, ImportRecord, MoveRecord, PlanRow, PlannedChange, WireError};
use crate::secrets::Redactor;

/// The artifact's format version: fields may be added within it, never changed.
pub(crate) const SCHEMA_VERSION: u64 = 1;

/// What a plan was made from: apply proves it is applying against the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Basis {
    /// `sha256:<hex>` of the first evaluation's IR, canonical, sensitive values blanked.
    pub ir_digest: String,
    /// The state it was planned against.
    pub state: StateBasis,
    /// Every variable given to the run: its value, or for a sensitive one its digest.
    pub variables: BTreeMap<String, VariableRecord>,
    /// Every provider the plan started, by IR provider id.
    pub providers: BTreeMap<String, ProviderIdentity>,
    /// `--target` and `--replace`, which change what apply may do.
    pub targets: Vec<String>,
    /// `--replace`.
    pub replace: Vec<String>,
}

/// The state a plan was made against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateBasis {
    /// The state's lineage (which state it is).
    pub lineage: String,
    /// The state's serial (which version of it).
    pub serial: u64,
    /// The state environment (`--env`).
    pub env: String,
}

/// One variable as the plan recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum VariableRecord {
    /// Its value (JSON; the text given on the command line is a string).
    Value(Json),
    /// `hmac-sha256-statekey:<hex>` of a sensitive variable's canonical value, keyed with the
    /// state's random saved-plan key (only the state holds it): a plan file that leaks (into
    /// the store, a CI artifact) gives nothing to guess a weak password against.
    /// `hmac-sha256:<hex>` is an earlier release's digest, refused.
    Hmac(String),
    /// A sensitive variable of a plan made against a state that holds no key yet (never
    /// written, or last written before keys existed): nothing is recorded, and apply takes the
    /// value again unchecked (a note says so).
    Unrecorded,
}

/// Which provider binary a plan was made with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderIdentity {
    /// The declared source (registry address or path).
    pub(crate) source: String,
    /// The declared version constraint, if any.
    pub(crate) version: Option<String>,
    /// `sha256:<hex>` of the binary that ran.
    pub(crate) sha256: String,
    /// `tfplugin5`, `tfplugin6` or `nixops4 v0`.
    pub(crate) protocol: String,
}

/// The saved plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedPlan {
    /// The envelope: format version, writer, time.
    pub(crate) meta: Meta,
    /// What the plan was made against (state, variables, providers, options).
    pub(crate) basis: Basis,
    /// Phase 1's changes, in plan order.
    pub changes: Vec<PlannedChange>,
    /// What later phases decide.
    pub(crate) deferred: Vec<DeferredChange>,
    /// Renames (`lib.moved`).
    pub(crate) moved: Vec<MoveRecord>,
    /// Adoptions (`importId`).
    pub(crate) imported: Vec<ImportRecord>,
    /// The data sources phase 1 read, for apply to use what the plan showed (added within
    /// schema version 1: absent when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) data_reads: Vec<DataReadRecord>,
    /// A destroy plan (`plan --destroy --out`): `changes` are the removals `nivis destroy`
    /// listed, and `apply FILE` destroys exactly them (added within schema version 1: absent
    /// when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) destroy: bool,
}

/// A deferred resource as a saved plan keeps it: the `--json` stream's row and the action
/// classes apply may take for it later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DeferredChange {
    /// The row as the plan listed it.
    #[serde(flatten)]
    pub(crate) row: DeferredRow,
    /// The action classes a later phase may take for it (`create`, `update`, `replace`).
    pub(crate) possible_actions: Vec<String>,
}

impl From<DeferredRow> for DeferredChange {
    fn from(row: DeferredRow) -> DeferredChange {
        DeferredChange {
            possible_actions: row.possible_actions(),
            row,
        }
    }
}

/// One data source's read as a saved plan carries it: its result when nothing in it is
/// secret, else only a digest that a fresh read must match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DataReadRecord {
    /// The data source's address.
    pub(crate) id: String,
    /// `sha256:<hex>` of the canonical configuration it was read with.
    pub(crate) config_sha256: String,
    /// The result as state records it (apply uses it instead of reading again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<Json>,
    /// `sha256:<hex>` of the canonical result, when it holds a sensitive value or a known
    /// secret: apply reads again and refuses a different answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) result_sha256: Option<String>,
}

impl DataReadRecord {
    /// The record of a read of `id` with `config` (plain JSON) that returned `attributes` (as
    /// state records them); `sensitive`: the schema or the inputs mark part of it sensitive.
    /// A result in which `redactor` finds a known secret is kept as a digest only.
    pub(crate) fn new(
        id: &str,
        config: &Json,
        attributes: &Json,
        sensitive: bool,
        redactor: &Redactor,
    ) -> DataReadRecord {
        let plain = !sensitive && redacted(redactor, attributes.clone()) == *attributes;
        DataReadRecord {
            id: id.to_string(),
            config_sha256: sha256(canonical(config).as_bytes()),
            result: plain.then(|| attributes.clone()),
            result_sha256: (!plain).then(|| result_digest(attributes)),
        }
    }
}

/// The digest a data source's result (as state records it) is compared by.
pub(crate) fn result_digest(attributes: &Json) -> String {
    sha256(canonical(attributes).as_bytes())
}

/// The envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Meta {
    /// The saved-plan format version (`SCHEMA_VERSION`).
    pub(crate) schema_version: u64,
    /// The Nivis that wrote it.
    pub(crate) nivis: String,
}

impl SavedPlan {
    /// A saved plan from the basis and a plan's events (planned, deferred, moved, imported).
    pub fn new(basis: Basis, events: &[Event]) -> SavedPlan {
        let mut plan = SavedPlan {
            meta: Meta {
                schema_version: SCHEMA_VERSION,
                nivis: env!("CARGO_PKG_VERSION").to_string(),
            },
            basis,
            changes: Vec::new(),
            deferred: Vec::new(),
            moved: Vec::new(),
            imported: Vec::new(),
            data_reads: Vec::new(),
            destroy: false,
        };
        for row in events.iter().filter_map(PlanRow::of) {
            match row {
                PlanRow::Planned(c) => plan.changes.push(c),
                PlanRow::Deferred(d) => plan.deferred.push(d.into()),
                PlanRow::Moved(m, false) => plan.moved.push(m),
                PlanRow::Imported(i, false) => plan.imported.push(i),
                PlanRow::Moved(..) | PlanRow::Imported(..) => {}
            }
        }
        plan
    }

    /// The canonical bytes: what is written, and what the content hash is of; every secret
    /// `redactor` knows (the run's) redacted.
    pub fn to_canonical(&self, redactor: &Redactor) -> String {
        let value = serde_json::to_value(self).expect("a saved plan serialises");
        canonical(&redacted(redactor, value))
    }

    /// Reads a saved plan, refusing another format version.
    pub fn parse(bytes: &[u8]) -> Result<SavedPlan, PlanFileError> {
        let value: Json = serde_json::from_slice(bytes).map_err(PlanFileError::Json)?;
        let version = value["meta"]["schemaVersion"].as_u64();
        if version != Some(SCHEMA_VERSION) {
            let found = value["meta"]["schemaVersion"].clone();
            return Err(PlanFileError::Version(found));
        }
        let plan: SavedPlan = serde_json::from_value(value).map_err(PlanFileError::Shape)?;
        plan.events().map_err(PlanFileError::Row)?;
        Ok(plan)
    }

    /// What the plan allows `id` to do in `phase`: phase 1 exactly its planned action, later
    /// phases the possible actions of a deferred resource; nothing else (a no-op is always
    /// allowed).
    pub(crate) fn allowed(&self, id: &str, phase: u32) -> BTreeSet<String> {
        let mut allowed: BTreeSet<String> = self
            .deferred
            .iter()
            .filter(|d| d.row.id == id)
            .flat_map(|d| d.possible_actions.iter().cloned())
            .collect();
        if phase <= 1 {
            allowed.extend(
                self.changes
                    .iter()
                    .filter(|c| c.id == id && c.deposed.is_none())
                    .map(|c| c.action.class().to_string()),
            );
        }
        allowed
    }

    /// Whether the plan shows `id` removed (deleted or forgotten).
    pub(crate) fn removes(&self, id: &str) -> bool {
        self.changes
            .iter()
            .any(|c| c.id == id && matches!(c.action, Action::Delete | Action::Forget))
    }
}

/// Why bytes are not a saved plan this Nivis reads.
#[derive(Debug)]
pub enum PlanFileError {
    /// Not JSON at all.
    Json(serde_json::Error),
    /// Another format version (`meta.schemaVersion`, as found).
    Version(Json),
    /// JSON of another shape (a field missing or unknown).
    Shape(serde_json::Error),
    /// A row that does not read back.
    Row(WireError),
}

impl std::fmt::Display for PlanFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanFileError::Json(e) => write!(f, "not a saved plan (invalid JSON: {e})"),
            PlanFileError::Version(found) => write!(
                f,
                "not a saved plan this Nivis reads: meta.schemaVersion is {found}, expected \
                 {SCHEMA_VERSION}"
            ),
            PlanFileError::Shape(e) => write!(f, "not a saved plan: {e}"),
            PlanFileError::Row(e) => write!(f, "not a saved plan: {e}"),
        }
    }
}

impl std::error::Error for PlanFileError {}

impl SavedPlan {
    /// The plan's events again (phase 1), for `nivis show` to print as `nivis plan` did; an
    /// error names a change that does not read back.
    pub fn events(&self) -> Result<Vec<Event>, WireError> {
        let moved = self.moved.iter().map(|m| PlanRow::Moved(m.clone(), false));
        let imported = self
            .imported
            .iter()
            .map(|i| PlanRow::Imported(i.clone(), false));
        let changes = self.changes.iter().cloned().map(PlanRow::Planned);
        let deferred = self
            .deferred
            .iter()
            .map(|d| PlanRow::Deferred(d.row.clone()));
        moved
            .chain(imported)
            .chain(changes)
            .chain(deferred)
            .map(|row| row.to_event(1))
            .collect()
    }
}

/// A saved plan's row as a re-plan is compared with it.
pub(crate) trait ComparedRow: Serialize {
    /// Its address (with the deposed object it is on).
    fn key(&self) -> String;
    /// Its action; `None`: a later phase decides.
    fn action(&self) -> Option<Action>;
}

impl ComparedRow for PlannedChange {
    fn key(&self) -> String {
        match &self.deposed {
            Some(d) => format!("{} (deposed {d})", self.id),
            None => self.id.clone(),
        }
    }
    fn action(&self) -> Option<Action> {
        Some(self.action)
    }
}

impl ComparedRow for DeferredChange {
    fn key(&self) -> String {
        self.row.id.clone()
    }
    fn action(&self) -> Option<Action> {
        None
    }
}

/// The first difference between what was saved and what a re-plan found, named. Rows are
/// compared with every secret `redactor` knows redacted, as the file keeps them.
pub(crate) fn first_difference<R: ComparedRow>(
    saved: &[R],
    now: &[R],
    redactor: &Redactor,
) -> Option<String> {
    let by_key = |list: &'_ [R]| -> BTreeMap<String, (Option<Action>, Json)> {
        let json = |r: &R| {
            redacted(
                redactor,
                serde_json::to_value(r).expect("wire records serialise"),
            )
        };
        list.iter()
            .map(|r| (r.key(), (r.action(), json(r))))
            .collect()
    };
    let (saved, now) = (by_key(saved), by_key(now));
    for (id, (action, c)) in &now {
        match saved.get(id) {
            None => {
                return Some(format!(
                    "{id} would now {}, which the saved plan does not show",
                    describe(*action)
                ))
            }
            Some((was, _)) if was != action => {
                return Some(format!(
                    "{id} was planned to {} and would now {}",
                    describe(*was),
                    describe(*action)
                ))
            }
            Some((_, s)) if s != c => {
                return Some(format!(
                    "{id}: its planned attribute changes differ from the saved plan's ({} now)",
                    describe(*action)
                ))
            }
            Some(_) => {}
        }
    }
    saved
        .iter()
        .find(|(id, _)| !now.contains_key(*id))
        .map(|(id, (was, _))| {
            format!(
                "{id} was planned to {}, and now nothing would change",
                describe(*was)
            )
        })
}

fn describe(action: Option<Action>) -> String {
    match action {
        Some(a) => a.class().into(),
        None => "be decided in a later phase".into(),
    }
}

/// `sha256:<hex>` of `text`.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The digest of an IR document: canonical JSON with every `__sensitive` value blanked, so
/// that the digest of a plan says nothing about its secrets (their variables have their own),
/// and every `__ephemeral` value too (a new one is opened for each run).
pub(crate) fn ir_digest(ir: &Json) -> String {
    fn blank(v: &Json) -> Json {
        match v {
            Json::Object(m) if m.contains_key("__sensitive") => {
                json!({"__sensitive": "(sensitive)"})
            }
            Json::Object(m) if m.contains_key("__ephemeral") => {
                json!({"__ephemeral": "(ephemeral)"})
            }
            Json::Object(m) => Json::Object(m.iter().map(|(k, v)| (k.clone(), blank(v))).collect()),
            Json::Array(a) => Json::Array(a.iter().map(blank).collect()),
            other => other.clone(),
        }
    }
    sha256(canonical(&blank(ir)).as_bytes())
}

/// The prefix of a sensitive variable's digest: keyed with the state's random saved-plan key
/// (`StateKey::SavedPlan`, DESIGN §93).
pub(crate) const DIGEST_PREFIX: &str = "hmac-sha256-statekey:";

/// A variable as a plan records it: its value, or for a sensitive one its digest keyed with
/// the state's saved-plan key, or nothing when the state holds no key yet; the secrets `redactor` knows are redacted from
/// a value.
pub(crate) fn variable_record(
    value: &Json,
    sensitive: bool,
    key: Option<&[u8; 32]>,
    redactor: &Redactor,
) -> VariableRecord {
    use hmac::Mac;
    if !sensitive {
        return VariableRecord::Value(redacted(redactor, value.clone()));
    }
    let Some(key) = key else {
        return VariableRecord::Unrecorded;
    };
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(canonical(value).as_bytes());
    VariableRecord::Hmac(format!(
        "{DIGEST_PREFIX}{}",
        hex::encode(mac.finalize().into_bytes())
    ))
}

/// JSON with object keys sorted (bytewise, which for the ASCII keys of the format is RFC 8785's
/// order) and no white space; numbers keep their text.
pub fn canonical(value: &Json) -> String {
    fn sorted(v: &Json) -> Json {
        match v {
            Json::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Json::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Json::Array(a) => Json::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sorted(value)).expect("JSON values serialise")
}

/// `value` with every secret `redactor` knows inside its strings redacted.
fn redacted(redactor: &Redactor, value: Json) -> Json {
    match value {
        Json::String(s) => Json::String(redactor.redact(&s).into_owned()),
        Json::Array(a) => Json::Array(a.into_iter().map(|v| redacted(redactor, v)).collect()),
        Json::Object(m) => Json::Object(
            m.into_iter()
                .map(|(k, v)| (redactor.redact(&k).into_owned(), redacted(redactor, v)))
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{AttrChange, Wait};
    use crate::value::Value;
    use serde_json::json;

    fn planned(id: &str, action: Action) -> PlannedChange {
        PlannedChange {
            id: id.into(),
            resource_type: "t".into(),
            action,
            changes: Vec::new(),
            deposed: None,
            drifted: Vec::new(),
            triggered_by: Vec::new(),
        }
    }

    fn basis() -> Basis {
        Basis {
            ir_digest: "d".into(),
            state: StateBasis {
                lineage: "l".into(),
                serial: 1,
                env: "default".into(),
            },
            variables: BTreeMap::new(),
            providers: BTreeMap::new(),
            targets: Vec::new(),
            replace: Vec::new(),
        }
    }

    #[test]
    fn events_read_back_as_they_were_written() {
        use crate::value::PathStep;
        let planned = Event::Planned {
            phase: 1,
            id: "alpha.alpha_token.a".into(),
            type_name: "alpha_token".into(),
            action: Action::Replace {
                create_before_destroy: true,
            },
            changes: vec![AttrChange {
                path: vec![PathStep::Attr("tags".into()), PathStep::Key("k v".into())],
                before: Some(Value::String("x".into())),
                after: Some(Value::Unknown),
                sensitive: false,
                forces_replacement: true,
                write_only: false,
            }],
            deposed: None,
            drifted: vec!["alpha.alpha_token.up".into()],
            triggered_by: vec!["alpha.alpha_token.up.value".into()],
        };
        let deferred = Event::Deferred {
            phase: 1,
            id: "beta.beta_record.b".into(),
            type_name: "beta_record".into(),
            in_state: true,
            waits: vec![
                Wait::Recomputed("alpha.alpha_token.a".into()),
                Wait::ProviderConfig("p".into()),
            ],
        };
        let plan = SavedPlan::new(basis(), &[planned.clone(), deferred.clone()]);
        let again = SavedPlan::parse(plan.to_canonical(&Redactor::new()).as_bytes()).unwrap();
        let events = again.events().unwrap();
        assert_eq!(
            format!("{:?}", events),
            format!("{:?}", vec![planned, deferred])
        );
    }

    #[test]
    fn a_sensitive_variable_is_only_a_digest_keyed_with_the_state() {
        let secret = json!("Winter2024!");
        let key = [7u8; 32];
        let record = variable_record(&secret, true, Some(&key), &Redactor::new());
        let VariableRecord::Hmac(digest) = &record else {
            panic!("{record:?}")
        };
        assert!(digest.starts_with(DIGEST_PREFIX) && !digest.contains("Winter"));
        // The unsalted digest of the issue (guessable from a list of passwords) is not there.
        assert!(!digest.contains(&sha256(canonical(&secret).as_bytes())[7..]));
        assert_eq!(
            record,
            variable_record(&secret, true, Some(&key), &Redactor::new())
        );
        assert_ne!(
            record,
            variable_record(&json!("other"), true, Some(&key), &Redactor::new())
        );
        assert_ne!(
            record,
            variable_record(&secret, true, Some(&[8u8; 32]), &Redactor::new())
        );
        assert_eq!(
            variable_record(&secret, true, None, &Redactor::new()),
            VariableRecord::Unrecorded
        );
        assert_eq!(
            variable_record(&json!("eu-west-1"), false, Some(&key), &Redactor::new()),
            VariableRecord::Value(json!("eu-west-1"))
        );
    }

    #[test]
    fn canonical_bytes_sort_keys_and_keep_numbers() {
        let v: Json =
            serde_json::from_str(r#"{"b": [2, {"z": 1.50, "a": null}], "a": "x"}"#).unwrap();
        assert_eq!(canonical(&v), r#"{"a":"x","b":[2,{"a":null,"z":1.50}]}"#);
    }

    #[test]
    fn the_ir_digest_ignores_secrets_but_nothing_else() {
        let a = json!({"resources": [{"config": {"pw": {"__sensitive": {"value": "hunter2"}}, "n": 1}}]});
        let b =
            json!({"resources": [{"config": {"pw": {"__sensitive": {"value": "other"}}, "n": 1}}]});
        let c = json!({"resources": [{"config": {"pw": {"__sensitive": {"value": "hunter2"}}, "n": 2}}]});
        assert_eq!(ir_digest(&a), ir_digest(&b));
        assert_ne!(ir_digest(&a), ir_digest(&c));
        assert!(ir_digest(&a).starts_with("sha256:"));
    }

    #[test]
    fn differences_are_named() {
        let saved = vec![planned("a", Action::Update)];
        let replace = vec![planned(
            "a",
            Action::Replace {
                create_before_destroy: false,
            },
        )];
        assert_eq!(
            first_difference(&saved, &replace, &Redactor::new()).unwrap(),
            "a was planned to update and would now replace"
        );
        assert!(first_difference(&saved, &saved, &Redactor::new()).is_none());
        assert_eq!(
            first_difference(&saved, &[], &Redactor::new()).unwrap(),
            "a was planned to update, and now nothing would change"
        );
        let other = vec![planned("b", Action::Create)];
        assert!(first_difference(&[], &other, &Redactor::new())
            .unwrap()
            .starts_with("b would now create"));
    }

    #[test]
    fn the_destroy_mark_is_written_only_on_a_destroy_plan_and_read_back() {
        let mut plan = SavedPlan::new(basis(), &[]);
        let plain = plan.to_canonical(&Redactor::new());
        assert!(!plain.contains("\"destroy\""), "{plain}");
        assert!(!SavedPlan::parse(plain.as_bytes()).unwrap().destroy);
        plan.destroy = true;
        let text = plan.to_canonical(&Redactor::new());
        assert!(SavedPlan::parse(text.as_bytes()).unwrap().destroy, "{text}");
    }

    #[test]
    fn what_a_saved_plan_allows() {
        let plan = SavedPlan {
            meta: Meta {
                schema_version: 1,
                nivis: "t".into(),
            },
            basis: basis(),
            changes: vec![planned(
                "a",
                Action::Replace {
                    create_before_destroy: true,
                },
            )],
            deferred: vec![DeferredRow {
                id: "b".into(),
                resource_type: "t".into(),
                in_state: true,
                waits_on: Vec::new(),
            }
            .into()],
            moved: Vec::new(),
            imported: Vec::new(),
            data_reads: Vec::new(),
            destroy: false,
        };
        assert_eq!(
            plan.allowed("a", 1),
            BTreeSet::from(["replace".to_string()])
        );
        assert!(
            plan.allowed("a", 2).is_empty(),
            "phase 1's action is phase 1's"
        );
        assert_eq!(plan.allowed("b", 2).len(), 2);
        assert!(plan.allowed("c", 1).is_empty());
        let text = plan.to_canonical(&Redactor::new());
        assert_eq!(SavedPlan::parse(text.as_bytes()).unwrap(), plan);
        let unknown = text.replacen("{\"replace\"", "{\"frobnicate\"", 1);
        let err = SavedPlan::parse(unknown.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown variant `frobnicate`"), "{err}");
        assert!(SavedPlan::parse(br#"{"meta": {"schemaVersion": 2}}"#)
            .unwrap_err()
            .to_string()
            .contains("schemaVersion is 2"));
    }

    #[test]
    fn a_data_read_is_kept_whole_only_without_secrets() {
        let config = json!({"inputs": {"k": "v"}});
        let result = json!({"id": "static", "random": "42"});
        let plain = DataReadRecord::new("d", &config, &result, false, &Redactor::new());
        assert_eq!(plain.result, Some(result.clone()));
        assert_eq!(plain.result_sha256, None);
        let secret = DataReadRecord::new("d", &config, &result, true, &Redactor::new());
        assert_eq!(secret.result, None);
        assert_eq!(secret.result_sha256, Some(result_digest(&result)));
        assert_eq!(plain.config_sha256, secret.config_sha256);
        // Absent when empty: a plan without reads keeps the bytes it had before reads existed.
        let plan = SavedPlan::new(basis(), &[]);
        assert!(!plan.to_canonical(&Redactor::new()).contains("dataReads"));
    }
}
