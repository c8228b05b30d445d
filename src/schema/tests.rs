use super::*;
use crate::value::render_path;

fn t(s: &str) -> Type {
    Type::from_json(s.as_bytes()).unwrap()
}

fn block(attrs: Vec<(&str, Attribute)>, blocks: Vec<(&str, NestedBlock)>) -> Block {
    Block {
        attributes: attrs.into_iter().map(|(k, a)| (k.to_owned(), a)).collect(),
        block_types: blocks.into_iter().map(|(k, b)| (k.to_owned(), b)).collect(),
        ..Block::default()
    }
}

fn nested(block: Block, nesting: BlockNesting, min_items: i64, max_items: i64) -> NestedBlock {
    NestedBlock {
        block,
        nesting,
        min_items,
        max_items,
    }
}

fn disk_schema() -> Block {
    let disk = block(
        vec![
            ("size", Attribute::required(Type::Number)),
            ("label", Attribute::optional(Type::String)),
        ],
        vec![],
    );
    block(
        vec![
            ("id", Attribute::computed(Type::String)),
            ("name", Attribute::required(Type::String)),
            ("tags", Attribute::optional(t(r#"["map","string"]"#))),
            (
                "password",
                Attribute {
                    sensitive: true,
                    ..Attribute::optional(Type::String)
                },
            ),
        ],
        vec![
            ("disk", nested(disk.clone(), BlockNesting::List, 1, 2)),
            ("boot", nested(disk.clone(), BlockNesting::Single, 0, 0)),
            (
                "timeouts",
                nested(
                    block(vec![("create", Attribute::optional(Type::String))], vec![]),
                    BlockNesting::Group,
                    0,
                    0,
                ),
            ),
            ("rule", nested(disk.clone(), BlockNesting::Set, 0, 0)),
            ("named", nested(disk, BlockNesting::Map, 0, 0)),
        ],
    )
}

fn json(v: serde_json::Value) -> Value {
    value::json::from_plain_json(&v)
}

fn errors(b: &Block, config: serde_json::Value) -> Vec<String> {
    b.conform_config(&json(config))
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn implied_types() {
    let b = disk_schema();
    let ty = b.implied_type();
    let Type::Object { attrs, .. } = &ty else {
        panic!()
    };
    assert_eq!(attrs.len(), 9);
    assert_eq!(attrs["disk"].friendly_name(), "list of object");
    assert_eq!(attrs["rule"].friendly_name(), "set of object");
    assert_eq!(attrs["named"].friendly_name(), "map of object");
    assert_eq!(attrs["boot"].friendly_name(), "object");
    // LIST / MAP blocks containing dynamic become dynamic; SET does not.
    let dynb = block(vec![("v", Attribute::optional(Type::Dynamic))], vec![]);
    for (nesting, want) in [
        (BlockNesting::List, Type::Dynamic),
        (BlockNesting::Map, Type::Dynamic),
        (BlockNesting::Set, Type::Set(Box::new(dynb.implied_type()))),
    ] {
        assert_eq!(nested(dynb.clone(), nesting, 0, 0).implied_type(), want);
    }
    // Nested attribute objects never fall back to dynamic.
    let obj = NestedObject {
        attributes: [("v".to_owned(), Attribute::optional(Type::Dynamic))].into(),
        nesting: ObjectNesting::List,
    };
    assert_eq!(
        obj.implied_type(),
        Type::List(Box::new(t(r#"["object",{"v":"dynamic"}]"#)))
    );
}

#[test]
fn conform_fills_everything() {
    let b = disk_schema();
    let v = b
        .conform_config(&json(
            serde_json::json!({"name": "a", "disk": [{"size": "10"}]}),
        ))
        .unwrap();
    assert_eq!(
        value::json::to_plain_json(&v).unwrap(),
        serde_json::json!({
            "boot": null,
            "disk": [{"label": null, "size": 10}],
            "id": null,
            "name": "a",
            "named": {},
            "password": null,
            "rule": [],
            "tags": null,
            "timeouts": {"create": null},
        })
    );
    // And it encodes against the implied type.
    let bytes = value::msgpack::encode(&v, &b.implied_type()).unwrap();
    assert_eq!(
        value::msgpack::decode(&bytes, &b.implied_type()).unwrap(),
        v
    );
}

#[test]
fn conform_reports_every_error_with_its_path() {
    let b = disk_schema();
    let errs = errors(
        &b,
        serde_json::json!({
            "id": "x",
            "tagz": {},
            "disk": [{"size": "big", "lable": "l"}, {}, {"size": 1}],
            "boot": [{"size": 1}],
            "named": {"a": {"size": 1, "extra": true}},
        }),
    );
    assert_eq!(
        errs,
        vec![
            r#"at tagz: unsupported attribute "tagz"; did you mean "tags"?"#,
            r#"at id: "id" is computed by the provider and cannot be set"#,
            r#"at name: missing required attribute "name""#,
            r#"at boot: "boot" is a single block: give one object, not a list"#,
            r#"at disk[0].lable: unsupported attribute "lable"; did you mean "label"?"#,
            r#"at disk[0].size: expected number, got string "big""#,
            r#"at disk[1].size: missing required attribute "size""#,
            r#"at disk: at most 2 "disk" blocks allowed, got 3"#,
            r#"at named["a"].extra: unsupported attribute "extra"; expected one of: label, size"#,
        ]
    );
}

#[test]
fn conform_block_shapes() {
    let b = disk_schema();
    let errs = errors(&b, serde_json::json!({"name": "a", "disk": {"size": 1}}));
    assert_eq!(
        errs,
        vec![
            r#"at disk: "disk" takes a list of blocks: wrap the object in a list, e.g. disk = [ { ... } ]"#
        ]
    );
    let errs = errors(&b, serde_json::json!({"name": "a"}));
    assert_eq!(
        errs,
        vec![r#"at disk: at least 1 "disk" block required, got 0"#]
    );
    let errs = errors(
        &b,
        serde_json::json!({"name": "a", "disk": [{"size": 1}], "named": [1]}),
    );
    assert_eq!(
        errs,
        vec![
            r#"at named: expected "named" blocks as an object keyed by label, got list of 1 element"#
        ]
    );
}

#[test]
fn unknowns_satisfy_and_pass_through() {
    let b = disk_schema();
    let mut config =
        json(serde_json::json!({"disk": [{"size": 1}], "rule": [{"size": 1}, {"size": 1}]}));
    let Value::Map(m) = &mut config else { panic!() };
    m.insert("name".into(), Value::Unknown);
    m.insert("named".into(), Value::Unknown);
    let v = b.conform_config(&config).unwrap();
    assert_eq!(v.get_attr("name"), Some(&Value::Unknown));
    assert_eq!(v.get_attr("named"), Some(&Value::Unknown));
    // Identical set blocks collapse.
    assert_eq!(
        v.get_attr("rule").and_then(Value::as_list).map(<[_]>::len),
        Some(1)
    );
    // Unknown list of blocks: counts are not checked.
    let mut config = json(serde_json::json!({"name": "n"}));
    let Value::Map(m) = &mut config else { panic!() };
    m.insert("disk".into(), Value::Unknown);
    assert!(b.conform_config(&config).is_ok());
}

#[test]
fn nested_attribute_objects() {
    let obj = NestedObject {
        attributes: [
            ("port".to_owned(), Attribute::required(Type::Number)),
            (
                "proto".to_owned(),
                Attribute::optional_computed(Type::String),
            ),
            (
                "secret".to_owned(),
                Attribute {
                    sensitive: true,
                    ..Attribute::optional(Type::String)
                },
            ),
        ]
        .into(),
        nesting: ObjectNesting::List,
    };
    let b = block(
        vec![(
            "ports",
            Attribute {
                ty: AttrType::Nested(obj),
                ..Attribute::optional(Type::String)
            },
        )],
        vec![],
    );
    let v = b
        .conform_config(&json(
            serde_json::json!({"ports": [{"port": "80", "secret": "s"}]}),
        ))
        .unwrap();
    assert_eq!(
        value::json::to_plain_json(&v).unwrap(),
        serde_json::json!({"ports": [{"port": 80, "proto": null, "secret": "s"}]})
    );
    let paths: Vec<String> = b
        .sensitive_paths(&v)
        .iter()
        .map(|p| render_path(p))
        .collect();
    assert_eq!(paths, vec!["ports[0].secret"]);
    let errs = errors(&b, serde_json::json!({"ports": [{"prot": 1}]}));
    assert_eq!(
        errs,
        vec![
            r#"at ports[0].prot: unsupported attribute "prot"; did you mean "proto"?"#,
            r#"at ports[0].port: missing required attribute "port""#,
        ]
    );
    let errs = errors(&b, serde_json::json!({"ports": {"port": 1}}));
    assert_eq!(
        errs,
        vec!["at ports: expected a list of objects, got object"]
    );
}

#[test]
fn dynamic_list_blocks_are_wrapped_tuples() {
    let inner = block(
        vec![
            ("name", Attribute::optional(Type::String)),
            ("v", Attribute::optional(Type::Dynamic)),
        ],
        vec![],
    );
    let b = block(
        vec![],
        vec![("item", nested(inner, BlockNesting::List, 0, 0))],
    );
    let v = b
        .conform_config(&json(
            serde_json::json!({"item": [{"v": 1}, {"name": "x", "v": [true]}]}),
        ))
        .unwrap();
    let Some(Value::Dynamic { ty, .. }) = v.get_attr("item") else {
        panic!("{v:?}")
    };
    assert_eq!(
        ty,
        &t(
            r#"["tuple",[["object",{"name":"string","v":"number"}],["object",{"name":"string","v":["tuple",["bool"]]}]]]"#
        )
    );
    let bytes = value::msgpack::encode(&v, &b.implied_type()).unwrap();
    let back = value::msgpack::decode(&bytes, &b.implied_type()).unwrap();
    assert_eq!(back, v);
    assert_eq!(
        value::msgpack::encode(&back, &b.implied_type()).unwrap(),
        bytes
    );
    // Absent: an empty tuple.
    let v = b.conform_config(&json(serde_json::json!({}))).unwrap();
    assert_eq!(
        value::msgpack::encode(&v, &b.implied_type()).unwrap()[..4],
        [0x81, 0xa4, b'i', b't']
    );
}

#[test]
fn sensitive_and_write_only_paths() {
    let b = disk_schema();
    let v = b
        .conform_config(&json(
            serde_json::json!({"name": "a", "password": "p", "disk": [{"size": 1}]}),
        ))
        .unwrap();
    assert_eq!(
        b.sensitive_paths(&v),
        vec![vec![PathStep::Attr("password".into())]]
    );
    let v = b
        .conform_config(&json(
            serde_json::json!({"name": "a", "disk": [{"size": 1}]}),
        ))
        .unwrap();
    assert!(b.sensitive_paths(&v).is_empty());
    let wo = block(
        vec![(
            "token",
            Attribute {
                write_only: true,
                ..Attribute::optional(Type::String)
            },
        )],
        vec![(
            "sub",
            nested(
                block(
                    vec![(
                        "k",
                        Attribute {
                            write_only: true,
                            ..Attribute::optional(Type::String)
                        },
                    )],
                    vec![],
                ),
                BlockNesting::Map,
                0,
                0,
            ),
        )],
    );
    let v = wo
        .conform_config(&json(
            serde_json::json!({"token": "t", "sub": {"x": {"k": "v"}, "y": {}}}),
        ))
        .unwrap();
    let paths: Vec<String> = wo
        .write_only_paths(&v)
        .iter()
        .map(|p| render_path(p))
        .collect();
    assert_eq!(paths, vec!["token", r#"sub["x"].k"#]);
    // What a provider must return, and what Nivis records whatever it returned.
    let mut stored = v.clone();
    wo.null_write_only(&mut stored);
    assert!(wo.write_only_paths(&stored).is_empty());
    assert_eq!(stored.get_attr("token"), Some(&Value::Null));
    let untouched = |v: &Value| v.get_attr("sub").and_then(|s| s.get_attr("y")).cloned();
    assert_eq!(untouched(&stored), untouched(&v));
}

#[test]
fn schema_serde_round_trip() {
    let ps = ProviderSchema {
        provider: Schema {
            version: 0,
            block: block(vec![("region", Attribute::optional(Type::String))], vec![]),
        },
        resources: [(
            "thing".to_owned(),
            Schema {
                version: 2,
                block: disk_schema(),
            },
        )]
        .into(),
        plan_destroy: true,
        ..ProviderSchema::default()
    };
    let text = serde_json::to_string(&ps).unwrap();
    let back: ProviderSchema = serde_json::from_str(&text).unwrap();
    assert_eq!(back, ps);
    assert_eq!(back.resource("thing").unwrap().version, 2);
    assert!(text.contains(r#""ty":{"type":["map","string"]}"#), "{text}");
}
