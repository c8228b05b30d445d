//! The fake providers: one behaviour, served in process and over both plugin protocols.
//!
//! `fakes/kit` implements `nivis::provider::Provider` once; `provider-alpha` serves it over
//! tfplugin6 or (with `NIVIS_FAKE_PROTOCOL=5`) tfplugin5. These tests drive the same sequence
//! of calls through all three and require the same answers, so the v5 path of the client is
//! covered hermetically and the in-process fake the engine's unit tests use is the one the
//! end-to-end tests spawn.

use nivis::plugin::{GrpcProvider, LaunchSpec};
use nivis::provider::{ApplyRequest, PlanRequest, Provider};
use nivis::value::{PathStep, Value};

use crate::util::*;

#[path = "../fakes/kit/mod.rs"]
mod kit;

/// What one provider answered to the lifecycle below, step by step.
#[derive(Debug, PartialEq)]
struct Transcript(Vec<(String, String)>);

impl Transcript {
    fn note(&mut self, step: &str, what: impl std::fmt::Debug) {
        self.0.push((step.to_string(), format!("{what:?}")));
    }
}

fn plan(
    p: &dyn Provider,
    prior: &Value,
    private: &[u8],
    config: &Value,
) -> (Value, Vec<u8>, Vec<Vec<PathStep>>) {
    let block = &p.schema().resources["alpha_token"].block;
    let config = block.conform_config(config).unwrap();
    let proposed = nivis::plan::proposed_new(block, prior, &config);
    let r = p
        .plan_resource_change(PlanRequest {
            type_name: "alpha_token",
            prior_state: prior,
            proposed_new_state: &proposed,
            config: &config,
            prior_private: private,
        })
        .unwrap();
    assert!(!r.diagnostics.has_errors(), "{}", r.diagnostics);
    (r.planned_state, r.planned_private, r.requires_replace)
}

fn apply(
    p: &dyn Provider,
    prior: &Value,
    planned: &Value,
    private: &[u8],
    config: &Value,
) -> (Value, Vec<u8>, String) {
    let block = &p.schema().resources["alpha_token"].block;
    let config = if config.is_null() {
        Value::Null
    } else {
        block.conform_config(config).unwrap()
    };
    let r = p
        .apply_resource_change(ApplyRequest {
            type_name: "alpha_token",
            prior_state: prior,
            planned_state: planned,
            config: &config,
            planned_private: private,
        })
        .unwrap();
    (r.new_state, r.private, r.diagnostics.to_string())
}

/// Validate, create, update, replace, read, import, a data source, a failing apply and a
/// delete, as the engine would make them.
fn lifecycle(p: &dyn Provider) -> Transcript {
    let mut t = Transcript(Vec::new());
    let label = |l: &str, keeper: &str| {
        Value::object([
            ("label", Value::string(l)),
            ("keeper", Value::string(keeper)),
        ])
    };
    let block = p.schema().resources["alpha_token"].block.clone();
    let bad = block.conform_config(&label("invalid one", "k")).unwrap();
    t.note(
        "validate",
        p.validate_resource_config("alpha_token", &bad).unwrap(),
    );

    let one = label("one", "k1");
    let (planned, private, replace) = plan(p, &Value::Null, &[], &one);
    t.note("plan create", (&planned, &replace));
    let (created, stored, diags) = apply(p, &Value::Null, &planned, &private, &one);
    t.note("apply create", (&created, &diags));

    let two = label("two", "k1");
    let (planned, private, replace) = plan(p, &created, &stored, &two);
    t.note("plan update", (&planned, &replace));
    let (updated, stored, diags) = apply(p, &created, &planned, &private, &two);
    t.note("apply update", (&updated, &diags));

    let (planned, _, replace) = plan(p, &updated, &stored, &label("two", "k2"));
    t.note("plan replace", (&planned, &replace));

    let read = p.read_resource("alpha_token", &updated, &stored).unwrap();
    t.note("read", (&read.new_state, read.diagnostics.to_string()));
    let (imported, diags) = p.import_resource_state("alpha_token", "alpha-7").unwrap();
    t.note(
        "import",
        (imported.iter().map(|i| &i.state).collect::<Vec<_>>(), diags),
    );
    let key = Value::object([("key", Value::string("k")), ("result", Value::Null)]);
    t.note("data", p.read_data_source("alpha_lookup", &key).unwrap());

    let failing = label("boom", "k1");
    let (planned, private, _) = plan(p, &Value::Null, &[], &failing);
    t.note(
        "failing apply",
        apply(p, &Value::Null, &planned, &private, &failing),
    );

    let (gone, _, diags) = apply(p, &updated, &Value::Null, &[], &Value::Null);
    t.note("delete", (&gone, diags));
    t
}

fn knobs() -> kit::Knobs {
    kit::Knobs {
        fail_on: vec!["boom".into()],
        counter_seed: 5,
        ..kit::Knobs::default()
    }
}

fn spawned(protocol: &str) -> GrpcProvider {
    let mut spec = LaunchSpec::new("alpha", &bin_dir().join("provider-alpha"));
    spec.env = vec![
        ("NIVIS_FAKE_PROTOCOL".into(), protocol.into()),
        ("NIVIS_FAKE_FAIL_ON".into(), "boom".into()),
        ("NIVIS_FAKE_COUNTER".into(), "5".into()),
    ];
    GrpcProvider::start(&spec).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn one_fake_behaves_the_same_in_process_and_over_tfplugin5_and_tfplugin6() {
    let in_process = kit::FakeProvider::new("alpha", kit::alpha::Alpha::new(&knobs()), knobs());
    let expected = lifecycle(&in_process);
    // The transcript says something: the steps did what alpha does.
    let text: String = expected
        .0
        .iter()
        .map(|(step, what)| format!("{step}: {what}\n"))
        .collect();
    for needle in [
        "label must not contain the word",
        "alpha:one:5",
        "alpha:two:6",
        "Attr(\"keeper\")",
        "lookup:k",
        "injected failure applying alpha_token with label \\\"boom\\\"",
    ] {
        assert!(text.contains(needle), "{needle} missing from {text}");
    }

    for protocol in ["5", "6"] {
        let p = spawned(protocol);
        assert_eq!(p.protocol().to_string(), protocol);
        assert_eq!(lifecycle(&p), expected, "over tfplugin{protocol}");
    }
}

#[test]
fn the_v5_fake_announces_v5_and_declares_nested_attributes_as_plain_types() {
    let p = spawned("5");
    let rules = &p.schema().resources["alpha_token"].block.attributes["rules"];
    assert!(
        matches!(rules.ty, nivis::schema::AttrType::Type(_)),
        "tfplugin5 has no nested attribute types: {:?}",
        rules.ty
    );
    let p = spawned("6");
    let rules = &p.schema().resources["alpha_token"].block.attributes["rules"];
    assert!(matches!(rules.ty, nivis::schema::AttrType::Nested(_)));
}
