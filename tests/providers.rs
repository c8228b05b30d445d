//! The provider client against real binaries (terraform-provider-null 2.1.2 over tfplugin5,
//! terraform-provider-workato 0.16.0 over tfplugin6) and the fakes, through the same
//! `Provider` trait the engine uses.

use std::time::Instant;

use nivis::objchange;
use nivis::plugin::{GrpcProvider, LaunchError, LaunchSpec, StartError};
use nivis::provider::{ApplyRequest, PlanRequest, Provider};
use nivis::schema::AttrType;
use nivis::value::{PathStep, Value};

use crate::util::*;

fn start(name: &str, path: &std::path::Path) -> GrpcProvider {
    GrpcProvider::start(&LaunchSpec::new(name, path)).unwrap_or_else(|e| panic!("{e}"))
}

fn triggers(pairs: &[(&str, &str)]) -> Value {
    Value::object([
        ("id", Value::Null),
        (
            "triggers",
            Value::Map(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
                    .collect(),
            ),
        ),
    ])
}

/// Plans and applies a change; returns (new state, private).
fn plan_apply(
    p: &dyn Provider,
    prior: &Value,
    prior_private: &[u8],
    config: &Value,
) -> (Value, Vec<u8>, Vec<Vec<PathStep>>) {
    let block = &p.schema().resources["null_resource"].block;
    let config = block.conform_config(config).unwrap();
    let proposed = objchange::proposed_new(block, prior, &config);
    let plan = p
        .plan_resource_change(PlanRequest {
            type_name: "null_resource",
            prior_state: prior,
            proposed_new_state: &proposed,
            config: &config,
            prior_private,
        })
        .unwrap();
    assert!(!plan.diagnostics.has_errors(), "{}", plan.diagnostics);
    let replace =
        objchange::filter_requires_replace(prior, &plan.planned_state, &plan.requires_replace);
    let apply = p
        .apply_resource_change(ApplyRequest {
            type_name: "null_resource",
            prior_state: prior,
            planned_state: &plan.planned_state,
            config: &config,
            planned_private: &plan.planned_private,
        })
        .unwrap();
    assert!(!apply.diagnostics.has_errors(), "{}", apply.diagnostics);
    (apply.new_state, apply.private, replace)
}

#[test]
fn null_provider_full_lifecycle_over_tfplugin5() {
    let path = real_provider("null");
    let started = Instant::now();
    let p = start("null", &path);
    eprintln!(
        "null: start + handshake + schema in {:?}",
        started.elapsed()
    );
    assert_eq!(p.protocol(), 5);
    let schema = p.schema();
    let res = &schema.resources["null_resource"].block;
    assert!(res.attributes["triggers"].optional);
    assert!(res.attributes["id"].computed, "SDKv2 injects id");
    assert!(schema.data_sources.contains_key("null_data_source"));

    let empty = p
        .schema()
        .provider
        .block
        .conform_config(&Value::object::<&str>([]))
        .unwrap();
    assert!(!p.validate_provider_config(&empty).unwrap().has_errors());
    assert!(!p.configure(&empty).unwrap().has_errors());

    // Create.
    let (created, private, _) = plan_apply(&p, &Value::Null, &[], &triggers(&[("a", "1")]));
    let id = created
        .get_attr("id")
        .and_then(Value::as_str)
        .expect("id")
        .to_string();
    assert!(!id.is_empty());

    // Read back through UpgradeResourceState + ReadResource.
    let ty = res.implied_type();
    let stored = nivis::value::json::to_state_json(&created, &ty).unwrap();
    let (upgraded, _) = p
        .upgrade_resource_state("null_resource", 0, stored.to_string().as_bytes())
        .unwrap();
    let read = p
        .read_resource("null_resource", &upgraded, &private)
        .unwrap();
    assert!(!read.diagnostics.has_errors());
    assert_eq!(
        read.new_state.get_attr("id").and_then(Value::as_str),
        Some(id.as_str())
    );

    // Changing a trigger forces replacement (requires_replace names triggers, not id).
    let config = res.conform_config(&triggers(&[("a", "2")])).unwrap();
    let proposed = objchange::proposed_new(res, &read.new_state, &config);
    let plan = p
        .plan_resource_change(PlanRequest {
            type_name: "null_resource",
            prior_state: &read.new_state,
            proposed_new_state: &proposed,
            config: &config,
            prior_private: &read.private,
        })
        .unwrap();
    let replace = objchange::filter_requires_replace(
        &read.new_state,
        &plan.planned_state,
        &plan.requires_replace,
    );
    assert_eq!(replace, vec![vec![PathStep::Attr("triggers".into())]]);

    // Destroy: apply with a null plan returns null.
    let gone = p
        .apply_resource_change(ApplyRequest {
            type_name: "null_resource",
            prior_state: &read.new_state,
            planned_state: &Value::Null,
            config: &Value::Null,
            planned_private: &read.private,
        })
        .unwrap();
    assert!(!gone.diagnostics.has_errors(), "{}", gone.diagnostics);
    assert!(gone.new_state.is_null());

    // Data source.
    let ds = &p.schema().data_sources["null_data_source"].block;
    let cfg = ds
        .conform_config(&Value::object([(
            "inputs",
            Value::Map(
                [("x".to_string(), Value::String("y".into()))]
                    .into_iter()
                    .collect(),
            ),
        )]))
        .unwrap();
    let (state, diags) = p.read_data_source("null_data_source", &cfg).unwrap();
    assert!(!diags.has_errors(), "{diags}");
    assert_eq!(
        state
            .get_attr("outputs")
            .and_then(|o| o.get_attr("x"))
            .and_then(Value::as_str),
        Some("y")
    );
    let pid = p.pid();
    drop(p);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.contains(") Z "))
                .unwrap_or(true),
        "provider {pid} survived shutdown"
    );
}

#[test]
fn workato_schema_and_validation_over_tfplugin6() {
    let path = real_provider("workato");
    let started = Instant::now();
    let p = start("workato", &path);
    eprintln!(
        "workato: start + handshake + schema in {:?}",
        started.elapsed()
    );
    assert_eq!(p.protocol(), 6);
    let schema = p.schema();
    assert!(
        schema.resources.len() > 3,
        "{:?}",
        schema.resources.keys().collect::<Vec<_>>()
    );
    // Framework nested blocks and object-typed attributes decode with their structure.
    let table = &schema.resources["workato_data_table"].block;
    assert!(
        table.block_types.contains_key("column"),
        "{:?}",
        table.block_types.keys().collect::<Vec<_>>()
    );
    let mcp = &schema.resources["workato_mcp_server"].block;
    assert!(
        matches!(&mcp.attributes["tool_details"].ty, AttrType::Type(nivis::value::Type::List(inner)) if matches!(**inner, nivis::value::Type::Object { .. }))
    );
    assert!(
        matches!(&mcp.attributes["tools"].ty, AttrType::Type(nivis::value::Type::List(inner)) if matches!(**inner, nivis::value::Type::Map(_)))
    );

    // An empty provider configuration gets the provider's own diagnostics, or none; an
    // attribute of the wrong type is caught by Nivis before the provider sees it.
    let block = &schema.provider.block;
    if let Some((name, _)) = block
        .attributes
        .iter()
        .find(|(_, a)| matches!(&a.ty, AttrType::Type(nivis::value::Type::String)))
    {
        let bad = Value::object([(name.as_str(), Value::List(vec![Value::Bool(true)]))]);
        let errs = block.conform_config(&bad).unwrap_err();
        assert!(
            errs.iter()
                .any(|e| nivis::value::render_path(&e.path).contains(name.as_str())),
            "{errs:?}"
        );
    }
    // A resource config missing required attributes: the provider (or the schema) says which.
    let (rtype, rschema) = schema
        .resources
        .iter()
        .find(|(_, s)| s.block.attributes.values().any(|a| a.required))
        .expect("a resource with required attributes");
    let required: Vec<&String> = rschema
        .block
        .attributes
        .iter()
        .filter(|(_, a)| a.required)
        .map(|(n, _)| n)
        .collect();
    let errs = rschema
        .block
        .conform_config(&Value::object::<&str>([]))
        .unwrap_err();
    for r in &required {
        assert!(
            errs.iter().any(|e| e.message.contains(r.as_str())
                || nivis::value::render_path(&e.path).contains(r.as_str())),
            "{rtype}: {errs:?}"
        );
    }
    // With unknowns where required values go, the provider validates what it can.
    let mut cfg = std::collections::BTreeMap::new();
    for r in &required {
        cfg.insert(r.to_string(), Value::Unknown);
    }
    let conformed = rschema.block.conform_config(&Value::Map(cfg)).unwrap();
    let diags = p.validate_resource_config(rtype, &conformed).unwrap();
    assert!(!diags.has_errors(), "{rtype}: {diags}");
}

#[test]
fn launch_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    match GrpcProvider::start(&LaunchSpec::new("x", &missing)) {
        Err(StartError::Launch(LaunchError::NotFound { .. })) => {}
        other => panic!(
            "expected NotFound, got {:?}",
            other.err().map(|e| e.to_string())
        ),
    }
    let junk = dir.path().join("junk.sh");
    std::fs::write(
        &junk,
        "#!/bin/sh\necho hello world\necho oops >&2\nsleep 5\n",
    )
    .unwrap();
    std::fs::set_permissions(&junk, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let err = GrpcProvider::start(&LaunchSpec::new("junk", &junk))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("unrecognised plugin handshake") && err.contains("hello world"),
        "{err}"
    );
    // A provider that exits early may leave up to a pipe's worth of stderr unread when its exit
    // is seen; its last words come last.
    let early = dir.path().join("early.sh");
    std::fs::write(
        &early,
        "#!/bin/sh\ni=0; while [ $i -lt 3000 ]; do echo \"starting up $i\" >&2; i=$((i+1)); done\n\
         echo 'This binary is a plugin' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&early, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let err = GrpcProvider::start(&LaunchSpec::new("early", &early))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("exited before") && err.contains("This binary is a plugin"),
        "{err}"
    );
    let v4 = dir.path().join("v4.sh");
    std::fs::write(&v4, "#!/bin/sh\necho '1|4|unix|/tmp/x|grpc|'\nsleep 5\n").unwrap();
    std::fs::set_permissions(&v4, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let err = GrpcProvider::start(&LaunchSpec::new("v4", &v4))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("protocol version 4"), "{err}");
    let noexec = dir.path().join("noexec");
    std::fs::write(&noexec, "data").unwrap();
    let err = GrpcProvider::start(&LaunchSpec::new("noexec", &noexec))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("cannot execute"), "{err}");
}

#[test]
fn a_chatty_provider_never_blocks() {
    // 2 MiB of stdout and stderr noise per call would fill any pipe nobody drains.
    std::env::set_var("NIVIS_FAKE_NOISE", "2048");
    let p = start("alpha", &bin_dir().join("provider-alpha"));
    std::env::remove_var("NIVIS_FAKE_NOISE");
    let block = p.schema().resources["alpha_token"].block.clone();
    let config = block
        .conform_config(&Value::object([("label", Value::String("x".into()))]))
        .unwrap();
    for _ in 0..3 {
        let proposed = objchange::proposed_new(&block, &Value::Null, &config);
        let plan = p
            .plan_resource_change(PlanRequest {
                type_name: "alpha_token",
                prior_state: &Value::Null,
                proposed_new_state: &proposed,
                config: &config,
                prior_private: &[],
            })
            .unwrap();
        assert!(!plan.diagnostics.has_errors(), "{}", plan.diagnostics);
    }
}

/// The NixOps4 adapter against the real `nixops4-resources-local`: what it sends for each call
/// of the `Provider` trait and how it reads the answers.
#[test]
fn the_nixops4_adapter_translates_against_the_real_provider() {
    use nivis::nixops4::Nixops4Provider;
    use std::collections::BTreeSet;

    let stateless: BTreeSet<String> = ["file".to_string()].into();
    let p = Nixops4Provider::start(
        "local",
        &real_provider("nixops4"),
        &stateless,
        std::time::Duration::from_secs(30),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let json = |j: serde_json::Value| nivis::value::json::from_plain_json(&j);
    let plan = |type_name: &str, prior: &Value, private: &[u8], config: &Value| {
        p.plan_resource_change(PlanRequest {
            type_name,
            prior_state: prior,
            proposed_new_state: config,
            config,
            prior_private: private,
        })
        .unwrap()
    };
    let apply =
        |type_name: &str, prior: &Value, planned: &Value, private: &[u8], config: &Value| {
            p.apply_resource_change(ApplyRequest {
                type_name,
                prior_state: prior,
                planned_state: planned,
                config,
                planned_private: private,
            })
            .unwrap()
        };

    // Create: nothing is known before; the answer's outputs and the inputs sent come back.
    let config = json(serde_json::json!({"initialize_with": {"a": [1, 2.5]}}));
    let planned = plan("memo", &Value::Null, &[], &config);
    assert!(planned.planned_state.is_unknown() && planned.requires_replace.is_empty());
    let created = apply("memo", &Value::Null, &Value::Unknown, &[], &config);
    assert!(!created.diagnostics.has_errors(), "{}", created.diagnostics);
    assert!(objchange::values_equal(
        &created.new_state,
        &json(serde_json::json!({"value": {"a": [1, 2.5]}}))
    ));
    let inputs: serde_json::Value = serde_json::from_slice(&created.private).unwrap();
    assert_eq!(
        inputs,
        serde_json::json!({"initialize_with": {"a": [1, 2.5]}})
    );

    // The same inputs plan a no-op; new ones an update of a wholly unknown object.
    let same = plan("memo", &created.new_state, &created.private, &config);
    assert!(objchange::values_equal(
        &same.planned_state,
        &created.new_state
    ));
    let changed = json(serde_json::json!({"initialize_with": "b"}));
    let update = plan("memo", &created.new_state, &created.private, &changed);
    assert!(update.planned_state.is_unknown() && update.requires_replace.is_empty());
    let updated = apply(
        "memo",
        &created.new_state,
        &Value::Unknown,
        &update.planned_private,
        &changed,
    );
    assert!(!updated.diagnostics.has_errors(), "{}", updated.diagnostics);
    assert!(
        objchange::values_equal(&updated.new_state, &created.new_state),
        "memo keeps its first value on update"
    );

    // A stateless type asks to be replaced when its inputs change.
    let file = json(serde_json::json!({"name": "/dev/null", "contents": "x"}));
    let recorded =
        serde_json::to_vec(&serde_json::json!({"name": "/dev/null", "contents": "y"})).unwrap();
    let replace = plan("file", &json(serde_json::json!({})), &recorded, &file);
    assert_eq!(replace.requires_replace, vec![Vec::<PathStep>::new()]);

    // An errorResponse is a diagnostic: its first line, without the backtrace.
    let failed = apply(
        "nope",
        &Value::Null,
        &Value::Unknown,
        &[],
        &json(serde_json::json!({})),
    );
    let error = failed.diagnostics.errors().next().expect("an error");
    assert_eq!(
        error.summary,
        "provider local: LocalResourceProvider::create: unknown resource type: nope"
    );
    assert!(!error.summary.contains("backtrace"));
    assert!(failed.new_state.is_null());

    // No configuration, no data sources, no delete.
    assert!(p
        .validate_provider_config(&json(serde_json::json!({"x": 1})))
        .is_err());
    assert!(p.validate_data_config("memo", &Value::Null).is_err());
    assert!(p
        .apply_resource_change(ApplyRequest {
            type_name: "memo",
            prior_state: &created.new_state,
            planned_state: &Value::Null,
            config: &Value::Null,
            planned_private: &created.private,
        })
        .is_err());
}
