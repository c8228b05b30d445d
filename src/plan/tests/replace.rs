use super::*;

#[test]
fn requires_replace_is_filtered() {
    let s = schema();
    let prior = prior_state(&s);
    let mut planned = prior.clone();
    *planned
        .get_path_mut(&[PathStep::Attr("name".into())])
        .unwrap() = Value::from("other");
    *planned
        .get_path_mut(&[PathStep::Attr("arn".into())])
        .unwrap() = Value::Unknown;
    let p = |s: &[&str]| {
        s.iter()
            .map(|x| PathStep::Attr((*x).to_owned()))
            .collect::<Vec<_>>()
    };
    let paths = vec![
        p(&["name"]),
        p(&["id"]),
        p(&["arn"]),
        p(&["nope"]),
        vec![
            PathStep::Attr("disk".into()),
            PathStep::Index(0),
            PathStep::Attr("size".into()),
        ],
        vec![PathStep::Attr("disk".into()), PathStep::Index(5)],
        p(&["name"]),
    ];
    assert_eq!(
        filter_requires_replace(&prior, &planned, &paths),
        vec![p(&["name"]), p(&["arn"])]
    );
    // On create nothing forces replacement (SDKv2 always lists `id`).
    assert!(filter_requires_replace(&Value::Null, &planned, &[p(&["id"])]).is_empty());
    // A path present on one side only is a change.
    let mut shorter = planned.clone();
    *shorter
        .get_path_mut(&[PathStep::Attr("disk".into())])
        .unwrap() = Value::List(vec![]);
    let disk0 = vec![PathStep::Attr("disk".into()), PathStep::Index(0)];
    assert_eq!(
        filter_requires_replace(&prior, &shorter, std::slice::from_ref(&disk0)),
        vec![disk0]
    );
    assert!(values_equal(
        &Value::from(1i64),
        &Value::Number("1.0".parse().unwrap())
    ));
    assert!(!values_equal(&Value::Unknown, &Value::Unknown));
}
