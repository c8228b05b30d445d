//! `alpha`: the fake behind `provider-alpha`.
//!
//! Resource `alpha_token`: inputs `label` (optional, updates in place) and `keeper` (optional,
//! forces replacement); computed `id` = `alpha-N`, `value` = `alpha:<label>:N`, and the sensitive
//! `secret` = `secret-N` (or `<prefix>-N` with the secret-prefix knob), where N is a
//! per-process counter starting at the knobs' seed,
//! incremented by every create or update. With schema version 1 (a knob), computed `revision`,
//! filled by the state upgrader from version 0. A label containing `invalid` fails validation.
//! Data source `alpha_lookup`: `key` (required) → `result` = `lookup:<key>`.
//! Resource `alpha_account`: `name` (required), the write-only `password_wo` (sensitive, never
//! returned) and `password_wo_version` (the companion that drives a change), computed `id` =
//! `account-N`. Ephemeral type `alpha_ticket`: `scope` (optional) → the sensitive `token` =
//! `<secret prefix>-ticket-<pid>-N`, a new one per open (the pid keeps them unique across runs).
//! Every fault knob is matched against `label`; with the empty-at-read knob, reads answer a
//! null `rules` as an empty list.

use std::sync::atomic::{AtomicU64, Ordering};

use nivis::schema::ProviderSchema;
use nivis::value::{PathStep, Type, Value};

use super::build::{attr, get_str, schema, set, Mode};
use super::knobs::{named, Knobs};
use super::provider::Behaviour;

/// The alpha behaviour.
pub(crate) struct Alpha {
    counter: AtomicU64,
    schema_version: i64,
    secret_prefix: String,
}

impl Alpha {
    /// An alpha whose counter and schema version come from `knobs`.
    pub(crate) fn new(knobs: &Knobs) -> Alpha {
        Alpha {
            counter: AtomicU64::new(knobs.counter_seed),
            schema_version: knobs.alpha_schema_version,
            secret_prefix: knobs
                .secret_prefix
                .clone()
                .unwrap_or_else(|| "secret".into()),
        }
    }

    /// The generated secret for counter value `n`.
    fn secret(&self, n: impl std::fmt::Display) -> String {
        format!("{}-{n}", self.secret_prefix)
    }
}

impl Alpha {
    /// Creates or updates an account; a name in the fail list fails the apply.
    fn apply_account(
        &self,
        prior: &Value,
        planned: &Value,
        knobs: &Knobs,
    ) -> Result<Value, (Option<Value>, String)> {
        if planned.is_null() {
            return Ok(Value::Null);
        }
        let name = get_str(planned, "name").unwrap_or_default();
        if named(&knobs.fail_on, &name) {
            return Err((None, format!("injected failure applying account {name:?}")));
        }
        let mut new = planned.clone();
        if prior.is_null() {
            let n = self.counter.fetch_add(1, Ordering::SeqCst);
            set(&mut new, "id", Value::String(format!("account-{n}")));
        }
        Ok(new)
    }
}

impl Behaviour for Alpha {
    fn schema(&self) -> ProviderSchema {
        let mut token = vec![
            (
                "label",
                attr(
                    Type::String,
                    Mode::Optional,
                    false,
                    "Free text; changes update in place.",
                ),
            ),
            (
                "keeper",
                attr(
                    Type::String,
                    Mode::Optional,
                    false,
                    "Changing it forces replacement.",
                ),
            ),
            ("id", attr(Type::String, Mode::Computed, false, "alpha-N")),
            (
                "value",
                attr(Type::String, Mode::Computed, false, "alpha:<label>:N"),
            ),
            (
                "secret",
                attr(Type::String, Mode::Computed, true, "A generated secret."),
            ),
            ("rules", rules_attribute()),
        ];
        if self.schema_version >= 1 {
            token.push((
                "revision",
                attr(
                    Type::Number,
                    Mode::Computed,
                    false,
                    "Set by the v0→v1 upgrader.",
                ),
            ));
        }
        let mut s = ProviderSchema {
            provider: schema(0, "The alpha fake provider.", vec![]),
            ..ProviderSchema::default()
        };
        s.resources.insert(
            "alpha_token".into(),
            schema(self.schema_version, "A token.", token),
        );
        s.resources.insert("alpha_account".into(), account_schema());
        s.ephemeral_resources
            .insert("alpha_ticket".into(), ticket_schema());
        s.data_sources.insert(
            "alpha_lookup".into(),
            schema(
                0,
                "Looks a key up.",
                vec![
                    (
                        "key",
                        attr(Type::String, Mode::Required, false, "What to look up."),
                    ),
                    (
                        "result",
                        attr(Type::String, Mode::Computed, false, "lookup:<key>"),
                    ),
                ],
            ),
        );
        s
    }

    fn validate(&self, type_name: &str, config: &Value) -> Vec<(String, Vec<PathStep>)> {
        match (type_name, get_str(config, "label")) {
            ("alpha_token", Some(label)) if label.contains("invalid") => vec![(
                "label must not contain the word \"invalid\"".into(),
                vec![PathStep::Attr("label".into())],
            )],
            _ => Vec::new(),
        }
    }

    fn plan(
        &self,
        type_name: &str,
        prior: &Value,
        proposed: &Value,
    ) -> Result<(Value, Vec<Vec<PathStep>>), String> {
        let mut planned = proposed.clone();
        if type_name == "alpha_account" {
            if prior.is_null() {
                set(&mut planned, "id", Value::Unknown);
            }
            return Ok((planned, Vec::new()));
        }
        if matches!(prior, Value::Null) {
            for computed in ["id", "value", "secret", "revision"] {
                if self.schema_version >= 1 || computed != "revision" {
                    set(&mut planned, computed, Value::Unknown);
                }
            }
            return Ok((planned, vec![vec![PathStep::Attr("id".into())]]));
        }
        let mut replace = Vec::new();
        if get_str(prior, "keeper") != get_str(proposed, "keeper") {
            replace.push(vec![PathStep::Attr("keeper".into())]);
        }
        if get_str(prior, "label") != get_str(proposed, "label") || !replace.is_empty() {
            set(&mut planned, "value", Value::Unknown);
        }
        Ok((planned, replace))
    }

    fn apply(
        &self,
        type_name: &str,
        prior: &Value,
        planned: &Value,
        knobs: &Knobs,
    ) -> Result<Value, (Option<Value>, String)> {
        if type_name == "alpha_account" {
            return self.apply_account(prior, planned, knobs);
        }
        if matches!(planned, Value::Null) {
            let label = get_str(prior, "label").unwrap_or_default();
            if named(&knobs.fail_delete_on, &label) {
                return Err((
                    Some(prior.clone()),
                    format!("injected failure deleting alpha_token with label {label:?}"),
                ));
            }
            return Ok(Value::Null);
        }
        let label = get_str(planned, "label").unwrap_or_default();
        if named(&knobs.crash_on, &label) {
            eprintln!("panic: injected crash while applying alpha_token {label:?}\n\ngoroutine 1 [running]:\nmain.apply()\n\t/fake/alpha.go:42");
            std::process::exit(2);
        }
        if named(&knobs.fail_on, &label) {
            return Err((
                None,
                format!("injected failure applying alpha_token with label {label:?}"),
            ));
        }
        if knobs.leak_label {
            let forms = super::knobs::encoded_forms(&label).join(" ");
            eprintln!("[ERROR] alpha: rejecting label: {forms}");
            return Err((None, format!("the label was rejected: {forms}")));
        }
        let n = self.counter.fetch_add(1, Ordering::SeqCst);
        let mut new = planned.clone();
        if matches!(prior, Value::Null) {
            set(&mut new, "id", Value::String(format!("alpha-{n}")));
            set(&mut new, "secret", Value::String(self.secret(n)));
            if self.schema_version >= 1 {
                set(&mut new, "revision", Value::Number(1.into()));
            }
        }
        set(
            &mut new,
            "value",
            Value::String(format!("alpha:{label}:{n}")),
        );
        if named(&knobs.partial_on, &label) {
            return Err((
                Some(new),
                format!("injected failure after creating alpha_token with label {label:?}"),
            ));
        }
        Ok(new)
    }

    fn read(&self, _type_name: &str, state: &Value, knobs: &Knobs) -> Value {
        let label = get_str(state, "label").unwrap_or_default();
        if named(&knobs.gone_on, &label) {
            return Value::Null;
        }
        let mut state = state.clone();
        if named(&knobs.drift_on, &label) {
            set(&mut state, "value", Value::String("changed-outside".into()));
        }
        if named(&knobs.empty_at_read_on, &label)
            && state.get_attr("rules").is_none_or(Value::is_null)
        {
            set(&mut state, "rules", Value::List(Vec::new()));
        }
        state
    }

    fn upgrade(
        &self,
        type_name: &str,
        version: i64,
        json: &serde_json::Value,
    ) -> Result<Value, String> {
        let mut json = json.clone();
        if version == 0 && self.schema_version >= 1 {
            if let serde_json::Value::Object(m) = &mut json {
                m.insert("revision".into(), serde_json::Value::from(1));
            }
        }
        let ty = self.schema().resources[type_name].block.implied_type();
        nivis::value::json::from_state_json(&json, &ty).map_err(|e| e.to_string())
    }

    fn read_data(&self, _type_name: &str, config: &Value) -> Result<Value, String> {
        let key = get_str(config, "key").ok_or("key is required")?;
        let mut out = config.clone();
        set(&mut out, "result", Value::String(format!("lookup:{key}")));
        Ok(out)
    }

    fn object_label(&self, object: &Value) -> Option<String> {
        get_str(object, "label").or_else(|| get_str(object, "name"))
    }

    fn open(&self, type_name: &str, config: &Value) -> Result<(String, Value), String> {
        if type_name != "alpha_ticket" {
            return Err(format!("fake: no ephemeral resource type {type_name}"));
        }
        let n = self.counter.fetch_add(1, Ordering::SeqCst);
        let pid = std::process::id();
        let mut result = config.clone();
        let token = format!("{}-ticket-{pid}-{n}", self.secret_prefix);
        set(&mut result, "token", Value::String(token));
        Ok((format!("ticket-{pid}-{n}"), result))
    }

    fn import(&self, _type_name: &str, id: &str) -> Result<Value, String> {
        let n = id
            .strip_prefix("alpha-")
            .ok_or_else(|| format!("cannot import {id:?}: ids look like alpha-N"))?;
        let mut m = std::collections::BTreeMap::new();
        m.insert("id".into(), Value::String(id.to_string()));
        m.insert("label".into(), Value::Null);
        m.insert("keeper".into(), Value::Null);
        m.insert("value".into(), Value::String(format!("alpha::{n}")));
        m.insert("secret".into(), Value::String(self.secret(n)));
        m.insert("rules".into(), Value::Null);
        if self.schema_version >= 1 {
            m.insert("revision".into(), Value::Number(1.into()));
        }
        Ok(Value::Map(m))
    }
}

/// A list of nested objects (tfplugin6 nested attribute type): `[{ port; proto? }]`.
fn rules_attribute() -> nivis::schema::Attribute {
    use nivis::schema::{AttrType, NestedObject, ObjectNesting};
    let mut a = attr(
        Type::String,
        Mode::Optional,
        false,
        "Firewall-style rules (a nested attribute type).",
    );
    a.ty = AttrType::Nested(NestedObject {
        attributes: [
            (
                "port".to_string(),
                attr(Type::Number, Mode::Required, false, "Port."),
            ),
            (
                "proto".to_string(),
                attr(Type::String, Mode::Optional, false, "Protocol."),
            ),
        ]
        .into_iter()
        .collect(),
        nesting: ObjectNesting::List,
    });
    a
}

/// `alpha_account`: a resource with a write-only password and its version.
fn account_schema() -> nivis::schema::Schema {
    let mut password = attr(
        Type::String,
        Mode::Optional,
        true,
        "The password; write-only: sent on create and update, never returned.",
    );
    password.write_only = true;
    schema(
        0,
        "An account with a write-only password.",
        vec![
            (
                "name",
                attr(Type::String, Mode::Required, false, "The account name."),
            ),
            ("password_wo", password),
            (
                "password_wo_version",
                attr(
                    Type::Number,
                    Mode::Optional,
                    false,
                    "Change it to send a new password.",
                ),
            ),
            ("id", attr(Type::String, Mode::Computed, false, "account-N")),
        ],
    )
}

/// `alpha_ticket`: an ephemeral resource issuing a token per open.
fn ticket_schema() -> nivis::schema::Schema {
    schema(
        0,
        "A short-lived ticket.",
        vec![
            (
                "scope",
                attr(
                    Type::String,
                    Mode::Optional,
                    false,
                    "What the ticket is for.",
                ),
            ),
            (
                "token",
                attr(
                    Type::String,
                    Mode::Computed,
                    true,
                    "The ticket's secret token.",
                ),
            ),
        ],
    )
}
