//! `beta`: the fake behind `provider-beta`.
//!
//! Resource `beta_record`: input `from` (required, updates in place); computed `endpoint` =
//! `beta://<from>`, which is also the object's identity in the object log. The fail and crash
//! knobs are matched against `from`.

use nivis::schema::ProviderSchema;
use nivis::value::{PathStep, Type, Value};

use super::build::{attr, get_str, schema, set, Mode};
use super::knobs::{named, Knobs};
use super::provider::Behaviour;

/// The beta behaviour.
pub(crate) struct Beta;

impl Behaviour for Beta {
    fn schema(&self) -> ProviderSchema {
        let mut s = ProviderSchema {
            provider: schema(0, "The beta fake provider.", vec![]),
            ..ProviderSchema::default()
        };
        s.resources.insert(
            "beta_record".into(),
            schema(
                0,
                "A record pointing somewhere.",
                vec![
                    (
                        "from",
                        attr(
                            Type::String,
                            Mode::Required,
                            false,
                            "Where the record comes from.",
                        ),
                    ),
                    (
                        "endpoint",
                        attr(Type::String, Mode::Computed, false, "beta://<from>"),
                    ),
                ],
            ),
        );
        s
    }

    fn plan(
        &self,
        _type_name: &str,
        prior: &Value,
        proposed: &Value,
    ) -> Result<(Value, Vec<Vec<PathStep>>), String> {
        let mut planned = proposed.clone();
        if matches!(prior, Value::Null) || get_str(prior, "from") != get_str(proposed, "from") {
            set(&mut planned, "endpoint", Value::Unknown);
        }
        Ok((planned, Vec::new()))
    }

    fn apply(
        &self,
        _type_name: &str,
        _prior: &Value,
        planned: &Value,
        knobs: &Knobs,
    ) -> Result<Value, (Option<Value>, String)> {
        if matches!(planned, Value::Null) {
            return Ok(Value::Null);
        }
        let from = get_str(planned, "from").ok_or((None, "from is required".to_string()))?;
        if named(&knobs.crash_on, &from) {
            eprintln!("panic: injected crash while applying beta_record {from:?}");
            std::process::exit(2);
        }
        if named(&knobs.fail_on, &from) {
            return Err((
                None,
                format!("injected failure applying beta_record from {from:?}"),
            ));
        }
        let mut new = planned.clone();
        set(
            &mut new,
            "endpoint",
            Value::String(format!("beta://{from}")),
        );
        Ok(new)
    }

    fn read_data(&self, type_name: &str, _config: &Value) -> Result<Value, String> {
        Err(format!("beta has no data source {type_name}"))
    }

    fn object_id(&self, object: &Value) -> Option<String> {
        get_str(object, "endpoint")
    }

    fn object_label(&self, object: &Value) -> Option<String> {
        get_str(object, "from")
    }

    fn import(&self, _type_name: &str, id: &str) -> Result<Value, String> {
        Err(format!("beta_record cannot be imported ({id})"))
    }
}
