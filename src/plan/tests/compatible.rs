use super::*;

#[test]
// Long because it walks one planned object through every rule, each step building on the last.
fn object_compatibility() {
    let s = schema();
    let prior = prior_state(&s);
    let mut planned = prior.clone();
    let set = |v: &mut Value, path: &[PathStep], x: Value| *v.get_path_mut(path).unwrap() = x;
    set(
        &mut planned,
        &[PathStep::Attr("arn".into())],
        Value::Unknown,
    );
    set(
        &mut planned,
        &[PathStep::Attr("rule".into())],
        Value::List(vec![Value::object([
            ("port", Value::from(80i64)),
            ("rid", Value::Unknown),
        ])]),
    );
    let mut actual = prior.clone();
    set(
        &mut actual,
        &[PathStep::Attr("arn".into())],
        Value::from("arn:2"),
    );
    set(
        &mut actual,
        &[PathStep::Attr("rule".into())],
        Value::List(vec![Value::object([
            ("port", Value::from(80i64)),
            ("rid", Value::from("r")),
        ])]),
    );
    assert_eq!(
        assert_object_compatible(&s, &planned, &actual),
        Vec::<String>::new()
    );

    let mut bad = actual.clone();
    set(
        &mut bad,
        &[PathStep::Attr("name".into())],
        Value::from("renamed"),
    );
    set(
        &mut bad,
        &[PathStep::Attr("secret".into())],
        Value::from("s"),
    );
    if let Some(Value::Map(tags)) = bad.get_path_mut(&[PathStep::Attr("tags".into())]) {
        tags.insert("b".into(), Value::from("2"));
    }
    set(
        &mut bad,
        &[PathStep::Attr("disk".into())],
        Value::List(vec![]),
    );
    set(
        &mut bad,
        &[PathStep::Attr("rule".into())],
        Value::List(vec![
            Value::object([("port", Value::from(80i64)), ("rid", Value::from("r"))]),
            Value::object([("port", Value::from(81i64)), ("rid", Value::from("r"))]),
        ]),
    );
    assert_eq!(
        assert_object_compatible(&s, &planned, &bad),
        vec![
            r#"name: was "n", but now "renamed""#,
            "secret: inconsistent values for sensitive attribute",
            r#"tags: new element "b" has appeared"#,
            "disk: block count changed from 1 to 0",
            r#"rule: actual set element {port = 81, rid = "r"} does not correlate with any element in plan"#,
            "rule: block set length changed from 1 to 2",
        ]
    );
    let mut unknown_after = actual.clone();
    set(
        &mut unknown_after,
        &[PathStep::Attr("id".into())],
        Value::Unknown,
    );
    assert_eq!(
        assert_object_compatible(&s, &planned, &unknown_after),
        vec!["id: was known, but now unknown"]
    );
    assert_eq!(
        assert_object_compatible(&s, &Value::Null, &actual),
        vec!["Root object was absent, but now present"]
    );
    assert_eq!(
        assert_object_compatible(&s, &planned, &Value::Null),
        vec!["Root object was present, but now absent"]
    );
}

#[test]
fn dynamic_values_compatibility() {
    let s = block(
        vec![("d", Attribute::optional_computed(Type::Dynamic))],
        vec![],
    );
    let ty = s.implied_type();
    let decode = |v: &Value| msgpack::decode(&msgpack::encode(v, &ty).unwrap(), &ty).unwrap();
    let planned = decode(&Value::object([("d", Value::Unknown)]));
    let actual = decode(&Value::object([(
        "d",
        Value::List(vec![Value::from(1i64)]),
    )]));
    assert!(assert_object_compatible(&s, &planned, &actual).is_empty());
    let planned = decode(&Value::object([("d", Value::from("x"))]));
    let actual = decode(&Value::object([("d", Value::from(1i64))]));
    assert_eq!(
        assert_object_compatible(&s, &planned, &actual),
        vec!["d: wrong final value type: string required, got number"]
    );
}
