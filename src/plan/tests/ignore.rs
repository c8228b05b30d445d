use super::*;

#[test]
fn ignore_changes() {
    let s = schema();
    let prior = prior_state(&s);
    let cfg = config(
        &s,
        json!({"name": "new", "tags": {"a": "2", "b": "3"}, "disk": [{"size": 99}]}),
    );
    let tag = |k: &str| vec![PathStep::Attr("tags".into()), PathStep::Key(k.into())];
    let out = apply_ignore_changes(
        &cfg,
        &prior,
        &[
            vec![PathStep::Attr("name".into())],
            tag("a"),
            tag("b"),
            vec![
                PathStep::Attr("disk".into()),
                PathStep::Index(0),
                PathStep::Attr("size".into()),
            ],
        ],
    );
    assert_eq!(out.get_attr("name"), Some(&Value::from("n")));
    assert_eq!(plain(out.get_attr("tags").unwrap()), json!({"a": "1"}));
    assert_eq!(
        plain(out.get_attr("disk").unwrap()),
        json!([{"label": null, "size": 10, "uuid": null}])
    );
    // Creates are untouched; an empty path ignores everything.
    assert_eq!(
        apply_ignore_changes(&cfg, &Value::Null, &[vec![PathStep::Attr("name".into())]]),
        cfg
    );
    assert_eq!(apply_ignore_changes(&cfg, &prior, &[vec![]]), prior);
}

#[test]
fn ignore_changes_inside_dynamic_list_block() {
    let inner = block(
        vec![
            ("name", Attribute::optional(Type::String)),
            ("v", Attribute::optional(Type::Dynamic)),
        ],
        vec![],
    );
    let s = block(vec![], vec![("item", BlockNesting::List, inner)]);
    let ty = s.implied_type();
    let prior_cfg = s
        .conform_config(&from_plain_json(
            &json!({"item": [{"name": "a", "v": "str"}]}),
        ))
        .unwrap();
    let prior = msgpack::decode(&msgpack::encode(&prior_cfg, &ty).unwrap(), &ty).unwrap();
    let cfg = s
        .conform_config(&from_plain_json(&json!({"item": [{"name": "b", "v": 5}]})))
        .unwrap();
    let path = vec![
        PathStep::Attr("item".into()),
        PathStep::Index(0),
        PathStep::Attr("v".into()),
    ];
    let out = apply_ignore_changes(&cfg, &prior, &[path]);
    let Some(Value::Dynamic { ty: item_ty, .. }) = out.get_attr("item") else {
        panic!("{out:?}")
    };
    assert_eq!(
        item_ty,
        &t(r#"["tuple",[["object",{"name":"string","v":"string"}]]]"#)
    );
    let bytes = msgpack::encode(&out, &ty).unwrap();
    assert_eq!(
        plain(&msgpack::decode(&bytes, &ty).unwrap()),
        json!({"item": [{"name": "b", "v": "str"}]})
    );
    // ProposedNew keeps the block a correctly typed tuple.
    let p = proposed_new(&s, &prior, &cfg);
    let Some(Value::Dynamic { ty: p_ty, .. }) = p.get_attr("item") else {
        panic!("{p:?}")
    };
    assert_eq!(
        p_ty,
        &t(r#"["tuple",[["object",{"name":"string","v":"number"}]]]"#)
    );
    assert!(msgpack::encode(&p, &ty).is_ok());
}
