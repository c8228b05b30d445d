//! The wire model of a plan: the typed records the `--json` stream (`render::jsonl`), saved
//! plans (`plan_file`) and the saved-plan check (`saved`) all write and read, so a planned
//! change is spelled once. Reading is strict: an unknown action or wait kind is an error, never
//! a guess.
//!
//! Owns: the records ([`ChangeRecord`], [`PlannedChange`], [`DeferredRow`], [`MoveRecord`],
//! [`ImportRecord`]), their conversion from and back to engine [`Event`]s, and the JSON of a
//! [`Wait`]. Not: the saved plan's envelope and checks (`plan_file`, `saved`), the stream's
//! frame and the other events (`render::jsonl`), printing.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::events::{Action, AttrChange, Event, Wait};
pub(crate) use crate::plan::{ChangeRecord, WireError};

/// The records of a list of changes.
pub(crate) fn change_records(changes: &[AttrChange]) -> Vec<ChangeRecord> {
    changes.iter().map(ChangeRecord::from).collect()
}

/// A resource's planned action (an `Event::Planned` without its phase).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedChange {
    /// The resource's address.
    pub(crate) id: String,
    /// The resource type.
    pub(crate) resource_type: String,
    /// What the plan does to it.
    pub(crate) action: Action,
    /// Its changed attributes.
    pub(crate) changes: Vec<ChangeRecord>,
    /// The deposed object the action is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) deposed: Option<String>,
    /// The drifted resources that caused it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) drifted: Vec<String>,
    /// The `lifecycle.replaceTriggeredBy` triggers that made it a replacement.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) triggered_by: Vec<String>,
}

/// A resource a phase cannot decide (an `Event::Deferred` without its phase), as the `--json`
/// stream spells it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DeferredRow {
    /// The resource's address.
    pub(crate) id: String,
    /// The resource type.
    pub(crate) resource_type: String,
    /// Whether state records it already (then a later phase updates or replaces it).
    pub(crate) in_state: bool,
    /// What it waits on.
    pub(crate) waits_on: Vec<Wait>,
}

impl DeferredRow {
    /// The action classes a later phase may take: update or replace a recorded object,
    /// create a new one.
    pub(crate) fn possible_actions(&self) -> Vec<String> {
        let classes: &[&str] = if self.in_state {
            &["update", "replace"]
        } else {
            &["create"]
        };
        classes.iter().map(|c| c.to_string()).collect()
    }
}

/// A planned rename (an `Event::Moved` without its phase and `recorded`). `resourceType` was
/// added within saved-plan schema version 1: a plan file written before has none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MoveRecord {
    /// The old address.
    pub(crate) from: String,
    /// The new address.
    pub(crate) to: String,
    /// The resource type; empty in plans written before it was recorded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) resource_type: String,
}

/// A planned adoption (an `Event::Imported` without its phase and `recorded`); `resourceType`
/// as for [`MoveRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ImportRecord {
    /// The address the object is adopted at.
    pub(crate) id: String,
    /// The resource type; empty in plans written before it was recorded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) resource_type: String,
    /// The provider's id of the object.
    pub(crate) import_id: String,
}

/// One row of a plan: what `nivis plan` lists and a saved plan keeps.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PlanRow {
    /// A resource's planned action.
    Planned(PlannedChange),
    /// A resource a later phase decides.
    Deferred(DeferredRow),
    /// With whether the move is recorded in state already.
    Moved(MoveRecord, bool),
    /// With whether the import is recorded in state already.
    Imported(ImportRecord, bool),
}

impl PlanRow {
    /// The row of a plan event (planned, deferred, moved, imported); `None` for any other.
    pub(crate) fn of(event: &Event) -> Option<PlanRow> {
        Some(match event.clone() {
            Event::Planned {
                id,
                type_name,
                action,
                changes,
                deposed,
                drifted,
                triggered_by,
                ..
            } => PlanRow::Planned(PlannedChange {
                id,
                resource_type: type_name,
                action,
                changes: change_records(&changes),
                deposed,
                drifted,
                triggered_by,
            }),
            Event::Deferred {
                id,
                type_name,
                in_state,
                waits,
                ..
            } => PlanRow::Deferred(DeferredRow {
                id,
                resource_type: type_name,
                in_state,
                waits_on: waits,
            }),
            Event::Moved {
                from,
                to,
                type_name,
                recorded,
                ..
            } => PlanRow::Moved(
                MoveRecord {
                    from,
                    to,
                    resource_type: type_name,
                },
                recorded,
            ),
            Event::Imported {
                id,
                type_name,
                import_id,
                recorded,
                ..
            } => PlanRow::Imported(
                ImportRecord {
                    id,
                    resource_type: type_name,
                    import_id,
                },
                recorded,
            ),
            _ => return None,
        })
    }

    /// The event of this row in `phase`; an error names a change that does not read back.
    pub(crate) fn to_event(&self, phase: u32) -> Result<Event, WireError> {
        Ok(match self.clone() {
            PlanRow::Planned(c) => Event::Planned {
                phase,
                changes: c
                    .changes
                    .iter()
                    .map(ChangeRecord::to_change)
                    .collect::<Result<_, _>>()
                    .map_err(|e| WireError {
                        id: Some(c.id.clone()),
                        ..e
                    })?,
                id: c.id,
                type_name: c.resource_type,
                action: c.action,
                deposed: c.deposed,
                drifted: c.drifted,
                triggered_by: c.triggered_by,
            },
            PlanRow::Deferred(d) => Event::Deferred {
                phase,
                id: d.id,
                type_name: d.resource_type,
                in_state: d.in_state,
                waits: d.waits_on,
            },
            PlanRow::Moved(m, recorded) => Event::Moved {
                phase,
                from: m.from,
                to: m.to,
                type_name: m.resource_type,
                recorded,
            },
            PlanRow::Imported(i, recorded) => Event::Imported {
                phase,
                id: i.id,
                type_name: i.resource_type,
                import_id: i.import_id,
                recorded,
            },
        })
    }
}

/// A [`Wait`] on the wire (`{"kind": ...}`); a re-computed value is a `nix` wait without an
/// attribute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub(super) enum WaitRecord {
    Nix {
        resource: String,
        attribute: Option<String>,
    },
    Resource {
        resource: String,
    },
    ProviderConfig {
        provider: String,
    },
}

impl From<Wait> for WaitRecord {
    fn from(w: Wait) -> WaitRecord {
        match w {
            Wait::Nix {
                resource,
                attribute,
            } => WaitRecord::Nix {
                resource,
                attribute: Some(attribute),
            },
            Wait::Resource(resource) => WaitRecord::Resource { resource },
            Wait::Recomputed(resource) => WaitRecord::Nix {
                resource,
                attribute: None,
            },
            Wait::ProviderConfig(provider) => WaitRecord::ProviderConfig { provider },
        }
    }
}

impl From<WaitRecord> for Wait {
    fn from(w: WaitRecord) -> Wait {
        match w {
            WaitRecord::Nix {
                resource,
                attribute: Some(attribute),
            } => Wait::Nix {
                resource,
                attribute,
            },
            WaitRecord::Nix {
                resource,
                attribute: None,
            } => Wait::Recomputed(resource),
            WaitRecord::Resource { resource } => Wait::Resource(resource),
            WaitRecord::ProviderConfig { provider } => Wait::ProviderConfig(provider),
        }
    }
}

/// `value` as a JSON object (records are structs; anything else is a bug).
pub(crate) fn object(value: &impl Serialize) -> serde_json::Map<String, Json> {
    match serde_json::to_value(value) {
        Ok(Json::Object(m)) => m,
        other => unreachable!("a wire record serialises to an object, not {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::value::Value;

    #[test]
    fn an_unknown_action_or_wait_kind_is_an_error() {
        let row = json!({"id": "a", "resourceType": "t", "action": "frobnicate", "changes": []});
        let err = serde_json::from_value::<PlannedChange>(row).unwrap_err();
        assert!(err.to_string().contains("frobnicate"), "{err}");
        let wait = json!({"kind": "telepathy", "resource": "a"});
        assert!(serde_json::from_value::<Wait>(wait).is_err());
    }

    #[test]
    fn actions_and_waits_keep_their_spelling() {
        let replace = Action::Replace {
            create_before_destroy: true,
        };
        let text = serde_json::to_string(&replace).unwrap();
        assert_eq!(text, r#"{"replace":{"createBeforeDestroy":true}}"#);
        assert_eq!(serde_json::from_str::<Action>(&text).unwrap(), replace);
        assert_eq!(
            serde_json::from_str::<Action>("\"no-op\"").unwrap(),
            Action::NoOp
        );
        let waits = [
            Wait::Nix {
                resource: "a".into(),
                attribute: "id".into(),
            },
            Wait::Recomputed("a".into()),
            Wait::Resource("b".into()),
            Wait::ProviderConfig("p".into()),
        ];
        let text = serde_json::to_string(&waits).unwrap();
        assert_eq!(
            text,
            r#"[{"kind":"nix","resource":"a","attribute":"id"},{"kind":"nix","resource":"a","attribute":null},{"kind":"resource","resource":"b"},{"kind":"provider-config","provider":"p"}]"#
        );
        assert_eq!(serde_json::from_str::<Vec<Wait>>(&text).unwrap(), waits);
    }

    #[test]
    fn a_value_with_an_unknown_part_keeps_its_known_parts() {
        let change = AttrChange {
            path: vec![crate::value::PathStep::Attr("ids".into())],
            before: None,
            after: Some(Value::List(vec![Value::String("a".into()), Value::Unknown])),
            sensitive: false,
            forces_replacement: false,
            write_only: false,
        };
        let record = ChangeRecord::from(&change);
        assert_eq!(record.after, json!(["a", {"unknown": true}]));
        assert_eq!(record.to_change().unwrap(), change);
    }

    #[test]
    fn a_path_that_does_not_parse_is_named() {
        let record = ChangeRecord {
            path: "tags[".into(),
            before: Json::Null,
            after: json!(1),
            sensitive: false,
            forces_replacement: false,
            write_only: false,
        };
        let err = record.to_change().unwrap_err();
        assert_eq!(err.path, "tags[");
        assert!(err.to_string().contains("tags["), "{err}");
    }
}
