//! Saved plans (`nivis plan --out FILE`, `nivis apply FILE`, `nivis show FILE`): the artifact
//! that lets a plan reviewed in a pull request be applied exactly.
//!
//! Owns the artifact's model, its canonical bytes (camelCase keys, sorted, no insignificant
//! white space; `meta.schemaVersion`), its content hash, the comparison of a fresh run's facts
//! with the saved ones (each difference named), and what the saved plan allows each resource
//! to do. No secret is in it: sensitive values are `"(sensitive)"`, sensitive variables are
//! digests, and every known secret inside a string is redacted.
//!
//! Not: planning or applying (the engine asks this module), reading or writing files (the CLI),
//! printing (`render`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};
use sha2::{Digest, Sha256};

use crate::engine::{Action, AttrChange, Event, Wait};
use crate::value::Value;

/// The artifact's format version: fields may be added within it, never changed.
pub const SCHEMA_VERSION: u64 = 1;

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
    pub replace: Vec<String>,
}

/// The state a plan was made against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateBasis {
    pub lineage: String,
    pub serial: u64,
    pub env: String,
}

/// One variable as the plan recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum VariableRecord {
    /// Its value (JSON; the text given on the command line is a string).
    Value(Json),
    /// `hmac-sha256:<hex>` of a sensitive variable's canonical value, keyed with
    /// [`variable_key`] (what only the state holds): a plan file that leaks (into the store, a
    /// CI artifact) gives nothing to guess a weak password against.
    Hmac(String),
    /// A sensitive variable of a plan made against a state that holds no secret, so that no
    /// key only the state holds exists: nothing is recorded, and apply takes the value again
    /// unchecked (a note says so).
    Unrecorded,
}

/// Which provider binary a plan was made with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderIdentity {
    /// The declared source (registry address or path).
    pub source: String,
    /// The declared version constraint, if any.
    pub version: Option<String>,
    /// `sha256:<hex>` of the binary that ran.
    pub sha256: String,
    /// `tfplugin5`, `tfplugin6` or `nixops4 v0`.
    pub protocol: String,
}

/// The saved plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedPlan {
    pub meta: Meta,
    pub basis: Basis,
    /// Phase 1's changes: `{id, resourceType, action, changes[, deposed]}`, in plan order.
    pub changes: Vec<Json>,
    /// What later phases decide: `{id, resourceType, inState, possibleActions, waitsOn}`.
    pub deferred: Vec<Json>,
    /// Renames (`lib.moved`): `{from, to}`.
    pub moved: Vec<Json>,
    /// Adoptions (`importId`): `{id, importId}`.
    pub imported: Vec<Json>,
    /// The data sources phase 1 read, for apply to use what the plan showed (added within
    /// schema version 1: absent when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_reads: Vec<DataReadRecord>,
    /// A destroy plan (`plan --destroy --out`): `changes` are the removals `nivis destroy`
    /// listed, and `apply FILE` destroys exactly them (added within schema version 1: absent
    /// when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub destroy: bool,
}

/// One data source's read as a saved plan carries it: its result when nothing in it is
/// secret, else only a digest that a fresh read must match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataReadRecord {
    pub id: String,
    /// `sha256:<hex>` of the canonical configuration it was read with.
    pub config_sha256: String,
    /// The result as state records it (apply uses it instead of reading again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Json>,
    /// `sha256:<hex>` of the canonical result, when it holds a sensitive value or a known
    /// secret: apply reads again and refuses a different answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_sha256: Option<String>,
}

impl DataReadRecord {
    /// The record of a read of `id` with `config` (plain JSON) that returned `attributes` (as
    /// state records them); `sensitive`: the schema or the inputs mark part of it sensitive.
    pub fn new(id: &str, config: &Json, attributes: &Json, sensitive: bool) -> DataReadRecord {
        let plain = !sensitive && redacted(attributes.clone()) == *attributes;
        DataReadRecord {
            id: id.to_string(),
            config_sha256: sha256(canonical(config).as_bytes()),
            result: plain.then(|| attributes.clone()),
            result_sha256: (!plain).then(|| result_digest(attributes)),
        }
    }
}

/// The digest a data source's result (as state records it) is compared by.
pub fn result_digest(attributes: &Json) -> String {
    sha256(canonical(attributes).as_bytes())
}

/// The envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    pub schema_version: u64,
    /// The Nivis that wrote it.
    pub nivis: String,
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
        for e in events {
            match e {
                Event::Planned { .. } => plan.changes.extend(change_json(e)),
                Event::Deferred { .. } => plan.deferred.extend(change_json(e)),
                Event::Moved {
                    from,
                    to,
                    recorded: false,
                    ..
                } => plan.moved.push(json!({"from": from, "to": to})),
                Event::Imported {
                    id,
                    import_id,
                    recorded: false,
                    ..
                } => plan.imported.push(json!({"id": id, "importId": import_id})),
                _ => {}
            }
        }
        plan
    }

    /// The canonical bytes: what is written, and what the content hash is of.
    pub fn to_canonical(&self) -> String {
        let value = serde_json::to_value(self).expect("a saved plan serialises");
        canonical(&redacted(value))
    }

    /// Reads a saved plan, refusing another format version.
    pub fn parse(bytes: &[u8]) -> Result<SavedPlan, String> {
        let value: Json = serde_json::from_slice(bytes)
            .map_err(|e| format!("not a saved plan (invalid JSON: {e})"))?;
        let version = value["meta"]["schemaVersion"].as_u64();
        if version != Some(SCHEMA_VERSION) {
            return Err(format!(
                "not a saved plan this Nivis reads: meta.schemaVersion is {}, expected {SCHEMA_VERSION}",
                value["meta"]["schemaVersion"]
            ));
        }
        serde_json::from_value(value).map_err(|e| format!("not a saved plan: {e}"))
    }

    /// Whether the plan changes anything.
    pub fn has_changes(&self) -> bool {
        !(self.changes.is_empty()
            && self.deferred.is_empty()
            && self.moved.is_empty()
            && self.imported.is_empty())
    }

    /// What the plan allows `id` to do in `phase`: phase 1 exactly its planned action, later
    /// phases the possible actions of a deferred resource; nothing else (a no-op is always
    /// allowed).
    pub fn allowed(&self, id: &str, phase: u32) -> BTreeSet<String> {
        let of = |list: &[Json], key: &str| -> BTreeSet<String> {
            list.iter()
                .filter(|c| c["id"] == id && c.get("deposed").is_none())
                .flat_map(|c| match &c[key] {
                    Json::Array(items) => items.iter().filter_map(action_class).collect::<Vec<_>>(),
                    single => action_class(single).into_iter().collect(),
                })
                .collect()
        };
        let mut allowed = of(&self.deferred, "possibleActions");
        if phase <= 1 {
            allowed.extend(of(&self.changes, "action"));
        }
        allowed
    }
}

impl SavedPlan {
    /// The plan's events again (phase 1), for `nivis show` to print as `nivis plan` did.
    pub fn events(&self) -> Vec<Event> {
        let text = |v: &Json| v.as_str().unwrap_or_default().to_string();
        let mut out: Vec<Event> = Vec::new();
        for m in &self.moved {
            out.push(Event::Moved {
                phase: 1,
                from: text(&m["from"]),
                to: text(&m["to"]),
                type_name: String::new(),
                recorded: false,
            });
        }
        for i in &self.imported {
            out.push(Event::Imported {
                phase: 1,
                id: text(&i["id"]),
                type_name: String::new(),
                import_id: text(&i["importId"]),
                recorded: false,
            });
        }
        for c in &self.changes {
            out.push(Event::Planned {
                phase: 1,
                id: text(&c["id"]),
                type_name: text(&c["resourceType"]),
                action: action_from_json(&c["action"]),
                changes: c["changes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(change_from_json)
                    .collect(),
                deposed: c.get("deposed").map(text),
                drifted: c["drifted"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(text)
                    .collect(),
            });
        }
        for d in &self.deferred {
            out.push(Event::Deferred {
                phase: 1,
                id: text(&d["id"]),
                type_name: text(&d["resourceType"]),
                in_state: d["inState"].as_bool().unwrap_or(false),
                waits: d["waitsOn"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(wait_from_json)
                    .collect(),
            });
        }
        out
    }
}

fn action_from_json(a: &Json) -> Action {
    match a.as_str() {
        Some("create") => Action::Create,
        Some("update") => Action::Update,
        Some("delete") => Action::Delete,
        Some("forget") => Action::Forget,
        Some("recreate") => Action::Recreate,
        Some("read") => Action::Read,
        Some(_) => Action::NoOp,
        None => Action::Replace {
            create_before_destroy: a["replace"]["createBeforeDestroy"]
                .as_bool()
                .unwrap_or(false),
        },
    }
}

fn change_from_json(c: &Json) -> AttrChange {
    let sensitive = c["sensitive"].as_bool().unwrap_or(false);
    let side = |v: &Json| match v {
        Json::Null => None,
        Json::Object(m) if m.len() == 1 && m.get("unknown") == Some(&Json::Bool(true)) => {
            Some(Value::Unknown)
        }
        other => Some(crate::value::json::from_plain_json(other)),
    };
    AttrChange {
        path: crate::ir::parse_path(c["path"].as_str().unwrap_or_default())
            .map(|p| crate::ir::value_path(&p))
            .unwrap_or_default(),
        before: side(&c["before"]),
        after: side(&c["after"]),
        sensitive,
        forces_replacement: c["forcesReplacement"].as_bool().unwrap_or(false),
    }
}

fn wait_from_json(w: &Json) -> Wait {
    let text = |v: &Json| v.as_str().unwrap_or_default().to_string();
    match (w["kind"].as_str(), &w["attribute"]) {
        (Some("nix"), Json::Null) => Wait::Recomputed(text(&w["resource"])),
        (Some("nix"), attribute) => Wait::Nix {
            resource: text(&w["resource"]),
            attribute: text(attribute),
        },
        (Some("provider-config"), _) => Wait::ProviderConfig(text(&w["provider"])),
        _ => Wait::Resource(text(&w["resource"])),
    }
}

fn action_class(action: &Json) -> Option<String> {
    match action {
        Json::String(s) => Some(s.clone()),
        Json::Object(m) => m.keys().next().cloned(),
        _ => None,
    }
}

/// A planned or deferred event as a saved plan holds it (no phase: a plan's changes are all
/// phase 1, and a re-plan is compared with it).
pub fn change_json(event: &Event) -> Option<Json> {
    match event {
        Event::Planned {
            id,
            type_name,
            action,
            changes,
            deposed,
            drifted,
            ..
        } => {
            let mut c = json!({"id": id, "resourceType": type_name, "action": action,
                "changes": changes.iter().map(|c| c.to_json()).collect::<Vec<_>>()});
            if let Some(key) = deposed {
                c["deposed"] = json!(key);
            }
            if !drifted.is_empty() {
                c["drifted"] = json!(drifted);
            }
            Some(redacted(c))
        }
        Event::Deferred {
            id,
            type_name,
            in_state,
            waits,
            ..
        } => {
            let possible: &[&str] = if *in_state {
                &["update", "replace"]
            } else {
                &["create"]
            };
            Some(
                json!({"id": id, "resourceType": type_name, "inState": in_state,
                "possibleActions": possible,
                "waitsOn": waits.iter().map(|w| w.to_json()).collect::<Vec<_>>()}),
            )
        }
        _ => None,
    }
}

/// The first difference between what was saved and what a re-plan found, named.
pub fn first_difference(saved: &[Json], now: &[Json]) -> Option<String> {
    let by_id = |list: &[Json]| -> BTreeMap<String, Json> {
        list.iter()
            .map(|c| {
                let key = format!(
                    "{}{}",
                    c["id"].as_str().unwrap_or_default(),
                    c["deposed"]
                        .as_str()
                        .map(|d| format!(" (deposed {d})"))
                        .unwrap_or_default()
                );
                (key, c.clone())
            })
            .collect()
    };
    let (saved, now) = (by_id(saved), by_id(now));
    for (id, c) in &now {
        match saved.get(id) {
            None => {
                return Some(format!(
                    "{id} would now {}, which the saved plan does not show",
                    describe(c)
                ))
            }
            Some(s) if s["action"] != c["action"] => {
                return Some(format!(
                    "{id} was planned to {} and would now {}",
                    describe(s),
                    describe(c)
                ))
            }
            Some(s) if s != c => {
                return Some(format!(
                    "{id}: its planned attribute changes differ from the saved plan's ({} now)",
                    describe(c)
                ))
            }
            Some(_) => {}
        }
    }
    saved.keys().find(|id| !now.contains_key(*id)).map(|id| {
        format!(
            "{id} was planned to {}, and now nothing would change",
            describe(&saved[id])
        )
    })
}

fn describe(c: &Json) -> String {
    match c.get("action") {
        Some(a) => action_class(a).unwrap_or_default(),
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
pub fn ir_digest(ir: &Json) -> String {
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

/// The key a saved plan's sensitive variables are digested with: derived from the whole state
/// it was planned against (which apply must find unchanged), secrets included; `None` when the
/// state holds no secret (anyone could rebuild the key from what the plan file says).
/// `state_json`: the state, as JSON.
pub fn variable_key(state_json: &Json, holds_secrets: bool) -> Option<[u8; 32]> {
    holds_secrets.then(|| {
        let mut hasher = Sha256::new();
        hasher.update(b"nivis saved-plan variable key v1\0");
        hasher.update(canonical(state_json).as_bytes());
        hasher.finalize().into()
    })
}

/// A variable as a plan records it: its value, or for a sensitive one its keyed digest (see
/// [`variable_key`]), or nothing without a key.
pub fn variable_record(value: &Json, sensitive: bool, key: Option<&[u8; 32]>) -> VariableRecord {
    use hmac::Mac;
    if !sensitive {
        return VariableRecord::Value(redacted(value.clone()));
    }
    let Some(key) = key else {
        return VariableRecord::Unrecorded;
    };
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(canonical(value).as_bytes());
    VariableRecord::Hmac(format!(
        "hmac-sha256:{}",
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

/// `value` with every known secret inside its strings redacted.
fn redacted(value: Json) -> Json {
    match value {
        Json::String(s) => Json::String(crate::secrets::redact(&s).into_owned()),
        Json::Array(a) => Json::Array(a.into_iter().map(redacted).collect()),
        Json::Object(m) => Json::Object(
            m.into_iter()
                .map(|(k, v)| (crate::secrets::redact(&k).into_owned(), redacted(v)))
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            }],
            deposed: None,
            drifted: vec!["alpha.alpha_token.up".into()],
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
        let again = SavedPlan::parse(plan.to_canonical().as_bytes()).unwrap();
        let events = again.events();
        assert_eq!(
            format!("{:?}", events),
            format!("{:?}", vec![planned, deferred])
        );
    }

    #[test]
    fn a_sensitive_variable_is_only_a_digest_keyed_with_the_state() {
        let secret = json!("Winter2024!");
        let state =
            json!({"lineage": "l", "resources": {"a": {"attributes": {"pw": "generated"}}}});
        let key = variable_key(&state, true).unwrap();
        let record = variable_record(&secret, true, Some(&key));
        let VariableRecord::Hmac(digest) = &record else {
            panic!("{record:?}")
        };
        assert!(digest.starts_with("hmac-sha256:") && !digest.contains("Winter"));
        // The unsalted digest of the issue (guessable from a list of passwords) is not there.
        assert!(!digest.contains(&sha256(canonical(&secret).as_bytes())[7..]));
        assert_eq!(record, variable_record(&secret, true, Some(&key)));
        assert_ne!(record, variable_record(&json!("other"), true, Some(&key)));
        let other_state = json!({"lineage": "l", "resources": {"a": {"attributes": {"pw": "x"}}}});
        let other = variable_key(&other_state, true).unwrap();
        assert_ne!(record, variable_record(&secret, true, Some(&other)));
        assert_eq!(
            variable_key(&state, false),
            None,
            "a state without secrets: no key"
        );
        assert_eq!(
            variable_record(&secret, true, None),
            VariableRecord::Unrecorded
        );
        assert_eq!(
            variable_record(&json!("eu-west-1"), false, Some(&key)),
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
        let saved = vec![json!({"id": "a", "action": "update", "changes": []})];
        let replace = vec![
            json!({"id": "a", "action": {"replace": {"createBeforeDestroy": false}}, "changes": []}),
        ];
        assert_eq!(
            first_difference(&saved, &replace).unwrap(),
            "a was planned to update and would now replace"
        );
        assert!(first_difference(&saved, &saved).is_none());
        assert_eq!(
            first_difference(&saved, &[]).unwrap(),
            "a was planned to update, and now nothing would change"
        );
        let other = vec![json!({"id": "b", "action": "create", "changes": []})];
        assert!(first_difference(&[], &other)
            .unwrap()
            .starts_with("b would now create"));
    }

    #[test]
    fn the_destroy_mark_is_written_only_on_a_destroy_plan_and_read_back() {
        let mut plan = SavedPlan::new(basis(), &[]);
        let plain = plan.to_canonical();
        assert!(!plain.contains("\"destroy\""), "{plain}");
        assert!(!SavedPlan::parse(plain.as_bytes()).unwrap().destroy);
        plan.destroy = true;
        let text = plan.to_canonical();
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
            changes: vec![json!({"id": "a", "action": {"replace": {"createBeforeDestroy": true}}})],
            deferred: vec![json!({"id": "b", "possibleActions": ["update", "replace"]})],
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
        let text = plan.to_canonical();
        assert_eq!(SavedPlan::parse(text.as_bytes()).unwrap(), plan);
        assert!(SavedPlan::parse(br#"{"meta": {"schemaVersion": 2}}"#)
            .unwrap_err()
            .contains("schemaVersion is 2"));
    }

    #[test]
    fn a_data_read_is_kept_whole_only_without_secrets() {
        let config = json!({"inputs": {"k": "v"}});
        let result = json!({"id": "static", "random": "42"});
        let plain = DataReadRecord::new("d", &config, &result, false);
        assert_eq!(plain.result, Some(result.clone()));
        assert_eq!(plain.result_sha256, None);
        let secret = DataReadRecord::new("d", &config, &result, true);
        assert_eq!(secret.result, None);
        assert_eq!(secret.result_sha256, Some(result_digest(&result)));
        assert_eq!(plain.config_sha256, secret.config_sha256);
        // Absent when empty: a plan without reads keeps the bytes it had before reads existed.
        let plan = SavedPlan::new(basis(), &[]);
        assert!(!plan.to_canonical().contains("dataReads"));
    }
}
