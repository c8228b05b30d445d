use super::*;

#[test]
// Long because it walks one planned object through every rule, each step building on the last.
fn plan_validity() {
    let s = schema();
    let prior = prior_state(&s);
    let cfg = config(
        &s,
        json!({"name": "n2", "disk": [{"size": 20}], "secret": "s", "wo": "w"}),
    );
    let proposed = proposed_new(&s, &prior, &cfg);
    assert_eq!(
        assert_plan_valid(&s, &prior, &cfg, &proposed),
        Vec::<String>::new()
    );
    // The provider may mark computed values unknown and drop write-only values.
    let mut planned = proposed.clone();
    *planned
        .get_path_mut(&[PathStep::Attr("arn".into())])
        .unwrap() = Value::Unknown;
    *planned
        .get_path_mut(&[PathStep::Attr("size".into())])
        .unwrap() = Value::Unknown;
    *planned
        .get_path_mut(&[PathStep::Attr("wo".into())])
        .unwrap() = Value::Null;
    let uuid = [
        PathStep::Attr("disk".into()),
        PathStep::Index(0),
        PathStep::Attr("uuid".into()),
    ];
    *planned.get_path_mut(&uuid).unwrap() = Value::Unknown;
    assert_eq!(
        assert_plan_valid(&s, &prior, &cfg, &planned),
        Vec::<String>::new()
    );

    let mut bad = planned.clone();
    let set = |v: &mut Value, path: &[PathStep], x: Value| *v.get_path_mut(path).unwrap() = x;
    set(
        &mut bad,
        &[PathStep::Attr("name".into())],
        Value::from("zz"),
    );
    set(
        &mut bad,
        &[PathStep::Attr("tags".into())],
        Value::object([("k", Value::from("v"))]),
    );
    set(
        &mut bad,
        &[PathStep::Attr("secret".into())],
        Value::from("leak"),
    );
    set(
        &mut bad,
        &[
            PathStep::Attr("disk".into()),
            PathStep::Index(0),
            PathStep::Attr("size".into()),
        ],
        Value::from(1i64),
    );
    set(&mut bad, &[PathStep::Attr("named".into())], Value::Null);
    assert_eq!(
        assert_plan_valid(&s, &prior, &cfg, &bad),
        vec![
            r#"name: planned value "zz" does not match config value "n2" nor prior value "n""#,
            "secret: sensitive planned value does not match config value",
            r#"tags: planned value {k = "v"} for a non-computed attribute"#,
            "disk[0].size: planned value 1 does not match config value 20 nor prior value 10",
            "named: attribute representing a map of nested blocks must be empty to indicate no blocks, not null",
        ]
    );
    // Each violation carries its path as steps, apart from the problem.
    let typed = super::super::assert_plan_valid(&s, &prior, &cfg, &bad);
    assert_eq!(
        typed[3].path,
        [
            PathStep::Attr("disk".into()),
            PathStep::Index(0),
            PathStep::Attr("size".into())
        ]
    );
    assert_eq!(
        typed[3].problem,
        "planned value 1 does not match config value 20 nor prior value 10"
    );
    let mut bad = planned.clone();
    set(
        &mut bad,
        &[PathStep::Attr("disk".into())],
        Value::List(vec![]),
    );
    set(
        &mut bad,
        &[PathStep::Attr("rule".into())],
        Value::List(vec![Value::Unknown]),
    );
    set(&mut bad, &[PathStep::Attr("boot".into())], Value::Unknown);
    assert_eq!(
        assert_plan_valid(&s, &prior, &cfg, &bad),
        vec![
            "boot: attribute representing nested block must not be unknown itself; set nested attribute values to unknown instead",
            "disk: block count in plan (0) disagrees with count in config (1)",
            "rule[0]: element representing nested block must not be unknown itself; set nested attribute values to unknown instead",
        ]
    );
    assert_eq!(
        assert_plan_valid(&s, &prior, &cfg, &Value::Null),
        vec!["planned for absence but config wants existence"]
    );
    assert!(assert_plan_valid(&s, &prior, &Value::Null, &Value::Null).is_empty());
}

#[test]
fn nested_attribute_plan_validity() {
    let s = schema();
    let prior = prior_state(&s);
    let cfg = config(
        &s,
        json!({"name": "n", "ports": [{"port": 1}, {"port": 2}]}),
    );
    let planned = state(
        &s,
        json!({"id": "i-1", "arn": "arn:1", "name": "n", "size": 5, "ports": [{"port": 1, "proto": "?"}, {"port": 3, "proto": "tcp"}],
               "disk": [], "rule": [], "named": {}, "timeouts": {"create": null}}),
    );
    assert_eq!(
        assert_plan_valid(&s, &prior, &cfg, &planned),
        vec!["ports[1].port: planned value 3 does not match config value 2"]
    );
    let planned = state(
        &s,
        json!({"id": "i-1", "arn": "arn:1", "name": "n", "size": 5, "ports": [{"port": 1, "proto": "?"}],
               "disk": [], "rule": [], "named": {}, "timeouts": {"create": null}}),
    );
    assert_eq!(
        assert_plan_valid(&s, &prior, &cfg, &planned),
        vec!["ports: count in plan (1) disagrees with count in config (2)"]
    );
}
