use super::*;

#[test]
fn proposed_new_create() {
    let s = schema();
    let cfg = config(
        &s,
        json!({"name": "n", "disk": [{"size": 1}], "rule": [{"port": 22}], "named": {"k": {}}}),
    );
    let p = proposed_new(&s, &Value::Null, &cfg);
    // Core inserts no unknowns: computed attributes stay null on create.
    assert_eq!(
        plain(&p),
        json!({
            "arn": null, "boot": null, "disk": [{"label": null, "size": 1, "uuid": null}], "id": null,
            "name": "n", "named": {"k": {"c": null, "v": null}}, "ports": null, "rule": [{"port": 22, "rid": null}],
            "secret": null, "size": null, "tags": null, "timeouts": {"create": null}, "wo": null,
        })
    );
    assert_eq!(proposed_new(&s, &Value::Null, &Value::Null), Value::Null);
}

#[test]
fn proposed_new_update_keeps_computed_and_correlates_blocks() {
    let s = schema();
    let prior = prior_state(&s);
    let cfg = config(
        &s,
        json!({
            "name": "n2",
            "ports": [{"port": 8080}],
            "disk": [{"size": 20}, {"size": 30}],
            "rule": [{"port": 443}, {"port": 22}],
            "named": {"a": {"v": "y"}, "b": {"v": "z"}},
            "boot": {"dev": "sdb"},
        }),
    );
    let p = proposed_new(&s, &prior, &cfg);
    assert_eq!(
        plain(&p),
        json!({
            "arn": "arn:1", "id": "i-1", "name": "n2", "size": 5, "tags": null, "secret": null, "wo": null,
            "ports": [{"port": 8080, "proto": "tcp"}],
            "disk": [{"label": null, "size": 20, "uuid": "u1"}, {"label": null, "size": 30, "uuid": null}],
            "rule": [{"port": 443, "rid": "r443"}, {"port": 22, "rid": null}],
            "named": {"a": {"c": "cx", "v": "y"}, "b": {"c": null, "v": "z"}},
            "boot": {"c": "cb", "dev": "sdb"},
            "timeouts": {"create": null},
        })
    );
    // A configured optional+computed value wins over the prior one.
    let cfg2 = config(&s, json!({"name": "n", "size": 7}));
    assert_eq!(
        proposed_new(&s, &prior, &cfg2).get_attr("size"),
        Some(&Value::from(7i64))
    );
}

#[test]
fn proposed_new_optional_computed_nested_attribute() {
    let s = schema();
    let prior = prior_state(&s);
    // The prior holds a configured (non-computed) port: unsetting `ports` removes it.
    let cfg = config(&s, json!({"name": "n"}));
    assert_eq!(
        proposed_new(&s, &prior, &cfg).get_attr("ports"),
        Some(&Value::Null)
    );
    // Only computed leaves in the prior: the provider chose it, keep it.
    let mut prior2 = prior.clone();
    *prior2
        .get_path_mut(&[PathStep::Attr("ports".into())])
        .unwrap() = state(
        &s,
        json!({"ports": [{"port": null, "proto": "udp"}], "name": "n"}),
    )
    .get_attr("ports")
    .unwrap()
    .clone();
    assert_eq!(
        plain(proposed_new(&s, &prior2, &cfg).get_attr("ports").unwrap()),
        json!([{"port": null, "proto": "udp"}])
    );
}

#[test]
fn proposed_new_unknown_blocks_and_sets() {
    let s = schema();
    let prior = prior_state(&s);
    let mut cfg = config(&s, json!({"name": "n"}));
    if let Value::Map(m) = &mut cfg {
        m.insert("disk".into(), Value::Unknown);
    }
    let p = proposed_new(&s, &prior, &cfg);
    assert_eq!(p.get_attr("disk"), Some(&Value::Unknown));
    // Set elements match prior elements by their configured leaves: an unknown configured
    // leaf matches nothing, a known one picks up the prior's computed leaves.
    let cfg = config(
        &s,
        json!({"name": "n", "rule": [{"port": "?"}, {"port": 80}]}),
    );
    let p = proposed_new(&s, &prior, &cfg);
    assert_eq!(
        plain(p.get_attr("rule").unwrap()),
        json!([{"port": "?", "rid": null}, {"port": 80, "rid": "r80"}])
    );
}

#[test]
fn data_source_unknown_plan() {
    let s = schema();
    let cfg = config(
        &s,
        json!({"name": "n", "size": 3, "disk": [{"size": 1}], "boot": {"dev": "x"}}),
    );
    let p = planned_unknown_for_data(&s, &cfg);
    assert_eq!(
        plain(&p),
        json!({
            "arn": "?", "id": "?", "name": "n", "size": 3, "tags": null, "secret": null, "wo": null, "ports": "?",
            "disk": [{"label": null, "size": 1, "uuid": "?"}], "rule": [], "named": {},
            "boot": {"c": "?", "dev": "x"}, "timeouts": {"create": null},
        })
    );
}

#[test]
fn unknown_prior_nested_single_stays_unknown() {
    let obj = NestedObject {
        attributes: [("a".to_owned(), Attribute::optional(Type::String))].into(),
        nesting: ObjectNesting::Single,
    };
    let s = block(
        vec![(
            "o",
            Attribute {
                ty: AttrType::Nested(obj),
                ..Attribute::optional_computed(Type::String)
            },
        )],
        vec![],
    );
    let cfg = s
        .conform_config(&Value::object([("o", Value::Null)]))
        .unwrap();
    assert_eq!(
        planned_unknown_for_data(&s, &cfg).get_attr("o"),
        Some(&Value::Unknown)
    );
    let prior = Value::object([("o", Value::object([("a", Value::from("x"))]))]);
    assert_eq!(
        proposed_new(&s, &prior, &cfg).get_attr("o"),
        Some(&Value::Null)
    );
}
