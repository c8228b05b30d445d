use super::*;

#[test]
fn legacy_normalization() {
    let s = schema();
    let mut v = prior_state(&s);
    let set = |v: &mut Value, name: &str, x: Value| {
        *v.get_path_mut(&[PathStep::Attr(name.into())]).unwrap() = x
    };
    set(&mut v, "disk", Value::Null);
    set(&mut v, "rule", Value::Unknown);
    set(&mut v, "timeouts", Value::Null);
    set(&mut v, "boot", Value::Null);
    let n = normalize_object_from_legacy_sdk(&s, &v);
    assert_eq!(plain(n.get_attr("disk").unwrap()), json!([]));
    assert_eq!(
        plain(n.get_attr("rule").unwrap()),
        json!([{"port": "?", "rid": "?"}])
    );
    assert_eq!(
        plain(n.get_attr("timeouts").unwrap()),
        json!({"create": null})
    );
    assert_eq!(n.get_attr("boot"), Some(&Value::Null));
    assert_eq!(n.get_attr("name"), Some(&Value::from("n")));
}
