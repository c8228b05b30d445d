use super::*;

/// The schema's `tags` (a map) null in one record and empty in the other: no drift, as
/// Terraform's SDK equivalence says; a value added to it, or an empty nested-block list next
/// to a missing one, still compare as they are.
#[test]
fn a_null_collection_and_an_empty_one_are_no_drift() {
    let s = schema();
    let ty = s.implied_type();
    let with = |tags: serde_json::Value, disk: serde_json::Value| {
        let mut v = prior_state(&s);
        *v.get_path_mut(&[PathStep::Attr("tags".into())]).unwrap() =
            from_state_json(&tags, &t(r#"["map","string"]"#)).unwrap();
        *v.get_path_mut(&[PathStep::Attr("disk".into())]).unwrap() =
            from_state_json(&disk, &s.block_types["disk"].implied_type()).unwrap();
        v
    };
    let recorded = with(json!(null), json!([]));
    assert!(!drifted(&recorded, &with(json!({}), json!(null)), &ty));
    assert!(!drifted(&recorded, &recorded, &ty));
    // A key the server added is drift; so is a value that changed.
    assert!(drifted(
        &recorded,
        &with(json!({"volatile.x": "1"}), json!([])),
        &ty
    ));
    assert!(drifted(
        &with(json!({"a": "1"}), json!([])),
        &with(json!({"a": "2"}), json!([])),
        &ty
    ));
    // Not a collection: an empty string is not null.
    let mut named = recorded.clone();
    *named
        .get_path_mut(&[PathStep::Attr("name".into())])
        .unwrap() = Value::from("");
    let mut unnamed = recorded.clone();
    *unnamed
        .get_path_mut(&[PathStep::Attr("name".into())])
        .unwrap() = Value::Null;
    assert!(drifted(&named, &unnamed, &ty));
}

/// Nested: an empty map inside a list element is null there too, and an unknown is never
/// "no drift".
#[test]
fn empty_collections_become_null_at_any_depth() {
    let ty = t(r#"["list",["object",{"m":["map","string"],"s":["set","string"]}]]"#);
    let v = from_state_json(&json!([{"m": {}, "s": []}]), &ty).unwrap();
    assert_eq!(
        to_plain_json(&empty_as_null(&v, &ty)).unwrap(),
        json!([{"m": null, "s": null}])
    );
    assert!(drifted(&Value::Unknown, &Value::Unknown, &ty));
}
