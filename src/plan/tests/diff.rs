use super::*;

#[test]
fn diffs() {
    let s = schema();
    let prior = prior_state(&s);
    let cfg = config(
        &s,
        json!({"name": "n2", "tags": {"a": "1", "b c": "2"}, "disk": [{"size": 10, "label": "L"}]}),
    );
    let mut planned = proposed_new(&s, &prior, &cfg);
    *planned
        .get_path_mut(&[PathStep::Attr("arn".into())])
        .unwrap() = Value::Unknown;
    let changes: Vec<(String, Option<String>, Option<String>)> =
        diff_typed(&prior, &planned, &s.implied_type())
            .into_iter()
            .map(|(p, a, b)| {
                (
                    render_path(&p),
                    a.map(|v| v.to_string()),
                    b.map(|v| v.to_string()),
                )
            })
            .collect();
    let c = |p: &str, a: Option<&str>, b: Option<&str>| {
        (p.to_owned(), a.map(str::to_owned), b.map(str::to_owned))
    };
    assert_eq!(
        changes,
        vec![
            c("arn", Some(r#""arn:1""#), Some("(known after apply)")),
            c("boot.c", Some(r#""cb""#), None),
            c("boot.dev", Some(r#""sda""#), None),
            c("disk[0].label", None, Some(r#""L""#)),
            c("name", Some(r#""n""#), Some(r#""n2""#)),
            c(r#"named["a"].c"#, Some(r#""cx""#), None),
            c(r#"named["a"].v"#, Some(r#""x""#), None),
            c("ports[0].port", Some("80"), None),
            c("ports[0].proto", Some(r#""tcp""#), None),
            c(
                "rule",
                Some(r#"[{port = 80, rid = "r80"}, {port = 443, rid = "r443"}]"#),
                Some("[]")
            ),
            c(r#"tags["b c"]"#, None, Some(r#""2""#)),
        ]
    );
    // Untyped diff of a create lists every non-null leaf.
    let created = diff(
        &Value::Null,
        &Value::object([
            ("a", Value::from(1i64)),
            ("m", Value::object([("x y", Value::from(true))])),
        ]),
    );
    let paths: Vec<String> = created.iter().map(|(p, _, _)| render_path(p)).collect();
    assert_eq!(paths, vec!["a", r#"m["x y"]"#]);
    assert!(diff(&prior, &prior).is_empty());
}
