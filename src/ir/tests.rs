use serde_json::{json, Value};

use super::rules::{
    expansion_message, is_data_id, is_derived_input, is_drv_path, is_node_id, BUILD_PATH_PATTERN,
    CONSUMER_ID_PATTERN, DATA_ID_PATTERN, DERIVED_INPUT_PATTERN, DRV_PATH_PATTERN, IDENT_PATTERN,
    LIFECYCLE_ON_DATA, MAX_INDEX, NODE_ID_PATTERN, PATH_BODY, PROVIDER_PATTERN,
    SCHEMA_VERSION_MESSAGE, UNKNOWN_MARKER,
};
use super::*;

fn two_nodes() -> Value {
    json!({
        "schemaVersion": 1,
        "providers": {"alpha": {"source": "provider-alpha", "config": {}}},
        "resources": [
            {"id": "alpha.alpha_token.A", "provider": "alpha", "type": "alpha_token", "name": "A", "config": {}},
            {"id": "alpha.alpha_token.B", "provider": "alpha", "type": "alpha_token", "name": "B",
             "config": {"label": {"__ref": {"resource": "alpha.alpha_token.A", "path": ["value"]}}}}
        ],
        "edges": [{"from": "alpha.alpha_token.A", "to": "alpha.alpha_token.B", "via": "label"}],
        "nixConsumers": []
    })
}

fn errors(doc: &Value) -> Vec<String> {
    match parse_value(doc) {
        Ok(_) => panic!("accepted: {doc}"),
        Err(errs) => errs.iter().map(ToString::to_string).collect(),
    }
}

fn assert_error(doc: &Value, expected: &str) {
    let errs = errors(doc);
    assert!(
        errs.iter().any(|e| e.contains(expected)),
        "expected {expected:?} in {errs:#?}"
    );
}

#[test]
fn parses_a_small_document() {
    let ir = parse_value(&two_nodes()).unwrap();
    assert_eq!(ir.resources.len(), 2);
    assert!(ir.data.is_empty() && ir.variables.is_empty());
    let b = ir.node("alpha.alpha_token.B").unwrap();
    assert_eq!(b.kind, NodeKind::Managed);
    assert_eq!(b.lifecycle, Lifecycle::default());
    let Tree::Object(config) = &b.config else {
        panic!()
    };
    assert_eq!(
        config["label"],
        Tree::Ref(Ref {
            resource: "alpha.alpha_token.A".into(),
            path: vec![PathStep::Key("value".into())]
        })
    );
    assert!(!b.config.is_known());
    assert!(!b.config.needs_nix());
    assert!(ir.node("alpha.alpha_token.A").unwrap().config.is_known());
}

#[test]
fn missing_ref_path_names_element_and_attribute() {
    let mut doc = two_nodes();
    doc["resources"][1]["config"]["label"] = json!({"__ref": {"resource": "alpha.alpha_token.A"}});
    assert_eq!(
        errors(&doc),
        ["resources[1] (alpha.alpha_token.B): config.label.__ref: 'path' is a required property"]
    );
}

#[test]
fn reports_every_structural_error() {
    let mut doc = two_nodes();
    doc["resources"][0]["meta"] = json!({"count": 2, "lifecycle": {"preventDestroy": "yes"}});
    doc["resources"][1]["config"]["label"] = json!({"__x": 1});
    doc["extra"] = json!(true);
    let errs = errors(&doc);
    assert_eq!(errs.len(), 4, "{errs:#?}");
    assert!(errs.contains(
        &"ir: Additional properties are not allowed ('extra' was unexpected)".to_string()
    ));
    assert!(errs.iter().any(
        |e| e.starts_with("resources[0] (alpha.alpha_token.A): meta.count: count is not part")
    ));
    assert!(errs.contains(
        &"resources[0] (alpha.alpha_token.A): meta.lifecycle.preventDestroy: 'yes' is not of type 'boolean'".to_string()
    ));
    assert!(errs
        .iter()
        .any(|e| e
            .starts_with("resources[1] (alpha.alpha_token.B): config.label.__x: unknown marker")));
}

#[test]
fn referential_rules_run_after_structure() {
    let mut doc = two_nodes();
    doc["edges"] = json!([]);
    assert_error(
        &doc,
        "config.label: refers to 'alpha.alpha_token.A' but no edge goes from",
    );
    doc["resources"][0]["name"] = json!("Z");
    assert_error(
        &doc,
        "id: 'alpha.alpha_token.A' does not match its parts (expected 'alpha.alpha_token.Z')",
    );
    // A structural error hides the referential ones.
    doc["schemaVersion"] = json!(2);
    assert_eq!(
        errors(&doc),
        [format!("schemaVersion: {SCHEMA_VERSION_MESSAGE}")]
    );
}

#[test]
fn derived_inputs_split_at_the_longest_declared_id() {
    let doc = json!({
        "schemaVersion": 1,
        "providers": {"a.b": {"source": "x", "config": {}}, "a": {"source": "x", "config": {}}},
        "resources": [
            {"id": "a.b.c.d", "provider": "a.b", "type": "c", "name": "d", "config": {}},
            {"id": "a.b.c", "provider": "a", "type": "b", "name": "c",
             "config": {"x": {"__derived": {"inputs": ["a.b.c.d.value", "a.b.c.d"]}}}}
        ],
        "edges": [{"from": "a.b.c.d", "to": "a.b.c", "via": "x"}, {"from": "a.b.c", "to": "a.b.c", "via": "x"}],
        "nixConsumers": []
    });
    let ir = parse_value(&doc).unwrap();
    let Tree::Object(config) = &ir.resources[1].config else {
        panic!()
    };
    assert_eq!(
        config["x"],
        Tree::Derived(vec![
            DerivedInput {
                resource: "a.b.c.d".into(),
                attr: "value".into()
            },
            DerivedInput {
                resource: "a.b.c".into(),
                attr: "d".into()
            },
        ])
    );
    assert!(config["x"].needs_nix());
}

#[test]
fn sensitive_refs_and_builds() {
    let mut doc = two_nodes();
    doc["resources"][1]["config"] = json!({
        "pw": {"__sensitiveRef": {"resource": "alpha.alpha_token.A", "path": ["secret", 0]}},
        "img": {"__build": {"path": "/nix/store/x-img", "drvPath": "/nix/store/x-img.drv"}}
    });
    doc["edges"][0]["via"] = json!("pw");
    let ir = parse_value(&doc).unwrap();
    let config = &ir.resources[1].config;
    let deps = config.dependencies();
    assert_eq!(deps.len(), 1);
    assert_eq!(deps[0].kind, DependencyKind::SensitiveRef);
    assert_eq!(render_path(&deps[0].at), "pw");
    assert_eq!(
        config.refs()[0].1.to_string(),
        "alpha.alpha_token.A.secret[0]"
    );
    let Tree::Object(map) = config else { panic!() };
    assert_eq!(
        map["img"],
        Tree::Build(Build {
            path: "/nix/store/x-img".into(),
            drv_path: Some("/nix/store/x-img.drv".into())
        })
    );
    assert!(map["img"].is_known());
}

#[test]
fn sensitive_values_keep_their_inside_and_its_edges() {
    let mut doc = two_nodes();
    doc["resources"][1]["config"] = json!({
        "conn": {"__sensitive": {"value": {"url": "postgres://x", "pw": {"__ref": {"resource": "alpha.alpha_token.A", "path": ["value"]}}}}}
    });
    doc["edges"][0]["via"] = json!("conn");
    let ir = parse_value(&doc).unwrap();
    let config = &ir.resources[1].config;
    let Tree::Object(map) = config else { panic!() };
    assert!(matches!(&map["conn"], Tree::Sensitive(inner) if matches!(**inner, Tree::Object(_))));
    let deps = config.dependencies();
    assert_eq!(deps.len(), 1);
    assert_eq!(
        render_path(&deps[0].at),
        "conn.pw",
        "inside, walked in place"
    );
    assert!(!config.is_known());
    assert_eq!(
        Tree::Sensitive(Box::new(config.clone())).to_json()["__sensitive"]["value"],
        config.to_json()
    );

    // A build output inside is refused; so is a marker with another key.
    doc["resources"][1]["config"] =
        json!({"conn": {"__sensitive": {"value": [{"__build": {"path": "/nix/store/x"}}]}}});
    let errors = parse_value(&doc).unwrap_err();
    assert!(
        errors.iter().any(|e| e
            .to_string()
            .contains("config.conn[0]: __build inside __sensitive")),
        "{errors:?}"
    );
    doc["resources"][1]["config"] = json!({"conn": {"__sensitive": {"value": 1, "why": 2}}});
    assert!(parse_value(&doc).is_err());
}

#[test]
fn data_nodes_and_variables() {
    let mut doc = two_nodes();
    doc["data"] = json!([{"id": "data.alpha.zone.z", "provider": "alpha", "type": "zone", "name": "z", "config": {},
                           "meta": {"dependsOn": ["alpha.alpha_token.A"]}}]);
    doc["edges"].as_array_mut().unwrap().push(
        json!({"from": "alpha.alpha_token.A", "to": "data.alpha.zone.z", "via": "dependsOn"}),
    );
    doc["variables"] =
        json!({"region": {"type": "string", "default": "eu"}, "any": {"default": null}});
    let ir = parse_value(&doc).unwrap();
    assert_eq!(ir.data[0].kind, NodeKind::Data);
    assert_eq!(ir.data[0].depends_on, ["alpha.alpha_token.A"]);
    assert_eq!(ir.variables["region"].default, Some(json!("eu")));
    assert_eq!(ir.variables["any"].default, Some(Value::Null));
    assert_eq!(ir.nodes().count(), 3);

    doc["data"][0]["meta"]["lifecycle"] = json!({});
    assert_error(
        &doc,
        "data[0] (data.alpha.zone.z): meta.lifecycle: lifecycle is not allowed on a data source",
    );
}

#[test]
fn numbers_in_paths_follow_json_schema_integers() {
    let mut doc = two_nodes();
    doc["resources"][1]["config"]["label"] =
        json!({"__ref": {"resource": "alpha.alpha_token.A", "path": ["net", 1.0]}});
    let ir = parse_value(&doc).unwrap();
    assert_eq!(
        ir.resources[1].config.refs()[0].1.path[1],
        PathStep::Index(1)
    );
    for (bad, message) in [
        (json!(-1), "-1 is less than the minimum of 0"),
        (json!(1.5), "1.5 is not of type 'string', 'integer'"),
        (json!(true), "True is not of type 'string', 'integer'"),
        (
            json!(9_007_199_254_740_992u64),
            "9007199254740992 is greater than the maximum of 9007199254740991",
        ),
    ] {
        doc["resources"][1]["config"]["label"]["__ref"]["path"] = json!(["net", bad]);
        assert_error(&doc, &format!("config.label.__ref.path[1]: {message}"));
    }
    // arbitrary precision: larger than u64, still an integer
    let text = two_nodes().to_string().replace(
        r#""path":["value"]"#,
        r#""path":[123456789012345678901234567890]"#,
    );
    assert!(parse(text.as_bytes()).unwrap_err()[0]
        .message
        .contains("greater than the maximum"));
}

#[test]
fn schema_version_accepts_only_one() {
    for (v, ok) in [
        (json!(1), true),
        (json!(1.0), true),
        (json!(true), false),
        (json!("1"), false),
        (json!(2), false),
    ] {
        let mut doc = two_nodes();
        doc["schemaVersion"] = v.clone();
        assert_eq!(parse_value(&doc).is_ok(), ok, "schemaVersion {v}");
    }
}

#[test]
fn non_objects_and_bad_json() {
    assert_eq!(errors(&json!([])), ["ir: [] is not of type 'object'"]);
    let errs = parse(b"{\"schemaVersion\": 1,").unwrap_err();
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].to_string().starts_with("ir: invalid JSON: "),
        "{errs:?}"
    );
}

#[test]
fn paths_render_and_parse() {
    let steps = vec![
        PathStep::Key("tags".into()),
        PathStep::Key("a.b".into()),
        PathStep::Index(0),
        PathStep::Key("size".into()),
        PathStep::Key("q\"\\\n\u{1}".into()),
    ];
    let text = render_path(&steps);
    assert_eq!(text, r#"tags["a.b"][0].size["q\"\\\n\u0001"]"#);
    assert_eq!(parse_path(&text), Some(steps));
    assert_eq!(
        render_path(&[PathStep::Key("0x".into()), PathStep::Index(3)]),
        r#"["0x"][3]"#
    );
    for good in [
        "a",
        "a.b",
        "a[0]",
        "a[10].b",
        r#"a["x"]"#,
        r#"["0"]"#,
        r#"a["\u00e9\/"]"#,
        "_x-y",
    ] {
        assert!(parse_path(good).is_some(), "{good}");
    }
    for bad in [
        "",
        ".a",
        "a.",
        "a..b",
        "[0]",
        "a[01]",
        "a[x]",
        r#"a["x]"#,
        "a b",
        "*",
        "0a",
        "a[-1]",
        "a\n",
        r#"a["\x"]"#,
    ] {
        assert_eq!(parse_path(bad), None, "{bad:?}");
    }
    assert_eq!(IgnorePath::All.to_string(), "*");
}

#[test]
fn id_patterns() {
    assert!(is_node_id("alpha.alpha_token.A"));
    assert!(is_node_id("registry.opentofu.org/x/alpha.t.web__a"));
    assert!(is_node_id("data.alpha.t.n"));
    assert!(!is_node_id("alpha.t"));
    assert!(!is_node_id("alpha.t.a b"));
    assert!(!is_node_id(".t.n"));
    assert!(is_data_id("data.alpha.t.n") && !is_data_id("alpha.t.n"));
    assert!(is_derived_input("alpha.t.n.value") && !is_derived_input("alpha.t.n"));
    assert!(is_drv_path("/.drv") && !is_drv_path("/x.drv\n") && !is_drv_path("x.drv"));
}

#[test]
fn round_trips_through_json() {
    let mut doc = two_nodes();
    doc["resources"][0]["meta"] =
        json!({"lifecycle": {"ignoreChanges": ["*", "tags[\"a.b\"]"], "preventDestroy": true}});
    let ir = parse_value(&doc).unwrap();
    let again = parse_value(&ir.to_json()).unwrap();
    assert_eq!(ir, again);
    assert_eq!(
        ir.resources[0].lifecycle.ignore_changes,
        [
            IgnorePath::All,
            IgnorePath::Path(vec![
                PathStep::Key("tags".into()),
                PathStep::Key("a.b".into())
            ])
        ]
    );
}

#[test]
fn schema_file_contains_every_pattern() {
    let schema = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/ir-schema.json"));
    let value: Value = serde_json::from_str(schema).unwrap();
    let mut patterns = Vec::new();
    fn collect(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("pattern", Value::String(s)) => out.push(s.clone()),
                        _ => collect(x, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
            _ => {}
        }
    }
    collect(&value, &mut patterns);
    let ours = [
        PROVIDER_PATTERN.to_string(),
        NODE_ID_PATTERN.to_string(),
        DATA_ID_PATTERN.to_string(),
        IDENT_PATTERN.to_string(),
        DERIVED_INPUT_PATTERN.to_string(),
        CONSUMER_ID_PATTERN.to_string(),
        BUILD_PATH_PATTERN.to_string(),
        DRV_PATH_PATTERN.to_string(),
        format!("^{PATH_BODY}$"),
        format!(r"^(?:\*|{PATH_BODY})$"),
        format!("^(?:dependsOn|{PATH_BODY})$"),
    ];
    for p in &ours {
        assert!(
            patterns.contains(p),
            "docs/ir-schema.json lost the pattern {p}"
        );
    }
    assert!(
        schema.contains(UNKNOWN_MARKER)
            && schema.contains(SCHEMA_VERSION_MESSAGE)
            && schema.contains(LIFECYCLE_ON_DATA)
    );
    for k in ["count", "for_each", "forEach"] {
        assert!(schema.contains(expansion_message(k).unwrap()));
    }
    assert!(schema.contains(&MAX_INDEX.to_string()));
}

/// The value renderer (diagnostics, plan output) and the IR's path grammar agree on every key:
/// one identifier rule (ASCII, as Nix and docs/ir-schema.json have it), so a rendered path reads
/// back with `parse_path` to the same keys.
#[test]
fn one_identifier_rule_for_both_path_renderers() {
    use crate::value::{render_path as render_value_path, untyped_step, PathStep as V};
    for k in ["ok_1", "a-b", "a b", "1x", "ключ", "é", "_"] {
        let value_text = render_value_path(&[V::Attr("tags".into()), untyped_step(k)]);
        let ir_text = render_path(&[PathStep::Key("tags".into()), PathStep::Key(k.into())]);
        assert_eq!(value_text, ir_text, "key {k:?}");
        assert_eq!(
            parse_path(&value_text),
            Some(vec![PathStep::Key("tags".into()), PathStep::Key(k.into())]),
            "{value_text} reads back"
        );
    }
}
