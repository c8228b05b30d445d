use super::*;

/// null_resource (hashicorp/null 3.x): `id` optional+computed string, `triggers` optional
/// map(string), driven through a create and an update the way the engine will.
#[test]
// Long because it is one create-then-update story, each step using the previous one's result.
fn null_resource_end_to_end() {
    let s = block(
        vec![
            ("id", Attribute::optional_computed(Type::String)),
            ("triggers", Attribute::optional(t(r#"["map","string"]"#))),
        ],
        vec![],
    );
    let ty = s.implied_type();
    let hex = |b: &[u8]| {
        b.iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    };

    // Create.
    let cfg = s
        .conform_config(&from_plain_json(&json!({"triggers": {"a": 1}})))
        .unwrap();
    let proposed = proposed_new(&s, &Value::Null, &cfg);
    let cfg_bytes = msgpack::encode(&cfg, &ty).unwrap();
    assert_eq!(
        hex(&cfg_bytes),
        "82 a2 69 64 c0 a8 74 72 69 67 67 65 72 73 81 a1 61 a1 31"
    );
    assert_eq!(msgpack::encode(&proposed, &ty).unwrap(), cfg_bytes);
    assert_eq!(hex(&msgpack::encode(&Value::Null, &ty).unwrap()), "c0");
    // The provider plans `id` unknown (bytes as SDKv2 sends them).
    let planned = msgpack::decode(
        &[
            0x82, 0xa2, b'i', b'd', 0xd4, 0, 0, 0xa8, b't', b'r', b'i', b'g', b'g', b'e', b'r',
            b's', 0x81, 0xa1, b'a', 0xa1, b'1',
        ],
        &ty,
    )
    .unwrap();
    assert!(assert_plan_valid(&s, &Value::Null, &cfg, &planned).is_empty());
    let id = vec![PathStep::Attr("id".into())];
    assert!(filter_requires_replace(&Value::Null, &planned, std::slice::from_ref(&id)).is_empty());
    // Apply returns a known id.
    let applied = msgpack::decode(
        &msgpack::encode(
            &Value::object([
                ("id", Value::from("42")),
                ("triggers", cfg.get_attr("triggers").unwrap().clone()),
            ]),
            &ty,
        )
        .unwrap(),
        &ty,
    )
    .unwrap();
    assert!(assert_object_compatible(&s, &planned, &applied).is_empty());
    let stored = to_state_json(&applied, &ty).unwrap();
    assert_eq!(stored, json!({"id": "42", "triggers": {"a": "1"}}));

    // Update: triggers change, id is kept by ProposedNew and the change forces replacement.
    let prior = from_state_json(&stored, &ty).unwrap();
    let cfg2 = s
        .conform_config(&from_plain_json(&json!({"triggers": {"a": "2"}})))
        .unwrap();
    let proposed2 = proposed_new(&s, &prior, &cfg2);
    assert_eq!(
        plain(&proposed2),
        json!({"id": "42", "triggers": {"a": "2"}})
    );
    let triggers = vec![PathStep::Attr("triggers".into())];
    assert_eq!(
        filter_requires_replace(&prior, &proposed2, &[id.clone(), triggers.clone()]),
        vec![triggers]
    );
    assert!(assert_plan_valid(&s, &prior, &cfg2, &proposed2).is_empty());
    // Unchanged config: NoOp (planned equals prior).
    let proposed3 = proposed_new(&s, &prior, &cfg);
    assert!(values_equal(&proposed3, &prior));
    // Typos are caught before any provider call.
    let errs = s
        .conform_config(&from_plain_json(&json!({"trigers": {}})))
        .unwrap_err();
    assert_eq!(
        errs[0].to_string(),
        r#"at trigers: unsupported attribute "trigers"; did you mean "triggers"?"#
    );
}
