//! `provider-beta`: a fake tfplugin6 provider for hermetic tests.
//!
//! Resource `beta_record`: input `from` (required, updates in place); computed `endpoint` =
//! `beta://<from>`, which is also the object's identity in the object log. Fault knobs as in
//! provider-alpha, matched against `from`.

#[path = "common.rs"]
mod common;

use common::build::{attr, schema, Mode};
use common::{fault, get_str, set};
use nivis::schema::ProviderSchema;
use nivis::value::{PathStep, Type, Value};

struct Beta;

impl common::Fake for Beta {
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
    ) -> Result<Value, (Option<Value>, String)> {
        if matches!(planned, Value::Null) {
            return Ok(Value::Null);
        }
        let from = get_str(planned, "from").ok_or((None, "from is required".to_string()))?;
        if fault("NIVIS_FAKE_CRASH_ON", &from) {
            eprintln!("panic: injected crash while applying beta_record {from:?}");
            std::process::exit(2);
        }
        if fault("NIVIS_FAKE_FAIL_ON", &from) {
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

fn main() {
    common::serve("beta", Beta);
}
