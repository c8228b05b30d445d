use serde_json::{json, Value as Json};

use super::*;
use crate::ir::parse_value;

fn token(name: &str, config: Json) -> Json {
    json!({"id": format!("alpha.alpha_token.{name}"), "provider": "alpha", "type": "alpha_token", "name": name, "config": config})
}

fn ir(resources: Vec<Json>, edges: Vec<Json>, moved: Vec<Json>) -> Ir {
    let mut doc = json!({
        "schemaVersion": 1,
        "providers": {"alpha": {"source": "provider-alpha", "config": {}}},
        "resources": resources,
        "edges": edges,
        "nixConsumers": [],
    });
    if !moved.is_empty() {
        doc["moved"] = json!(moved);
    }
    parse_value(&doc).expect("a valid IR")
}

fn reads(from: &str, to: &str, via: &str) -> Json {
    json!({"from": format!("alpha.alpha_token.{from}"), "to": format!("alpha.alpha_token.{to}"), "via": via,
           "ref": ["value"]})
}

fn reference(to: &str) -> Json {
    json!({"__ref": {"resource": format!("alpha.alpha_token.{to}"), "path": ["value"]}})
}

#[test]
fn the_same_plan_has_no_differences() {
    let a = ir(vec![token("A", json!({"label": "x"}))], vec![], vec![]);
    let diff = compare(&a, &a.clone());
    assert!(diff.is_empty() && diff.may_change_later.is_empty());
    assert_eq!(diff.to_json()["changes"], false);
}

#[test]
fn nested_attributes_differ_leaf_by_leaf_and_secrets_are_never_kept() {
    let before = ir(
        vec![token(
            "A",
            json!({"tags": {"env": "dev", "team": "a"}, "pw": {"__sensitive": {"value": "old-s3cret"}}}),
        )],
        vec![],
        vec![],
    );
    let after = ir(
        vec![token(
            "A",
            json!({"tags": {"env": "prod", "team": "a"}, "pw": {"__sensitive": {"value": "new-s3cret"}}}),
        )],
        vec![],
        vec![],
    );
    let diff = compare(&before, &after);
    let attrs = &diff.nodes[0].attributes;
    assert_eq!(attrs.len(), 2, "{attrs:?}");
    assert_eq!(attrs[0].path, "config.pw");
    assert_eq!(
        (&attrs[0].before, &attrs[0].after),
        (&Shown::Sensitive, &Shown::Sensitive)
    );
    assert_eq!(attrs[1].path, "config.tags.env");
    assert_eq!(attrs[1].after, Shown::Value(json!("prod")));
    let text = diff.to_json().to_string();
    assert!(!text.contains("s3cret"), "{text}");
}

#[test]
fn a_move_is_compared_under_the_new_address_and_references_follow_it() {
    // B reads A's value; A is renamed to R, so B now reads R: no change for B.
    let before = ir(
        vec![
            token("A", json!({})),
            token("B", json!({"label": reference("A")})),
        ],
        vec![reads("A", "B", "label")],
        vec![],
    );
    let after = ir(
        vec![
            token("R", json!({})),
            token("B", json!({"label": reference("R")})),
        ],
        vec![reads("R", "B", "label")],
        vec![json!({"from": "alpha.alpha_token.A", "to": "alpha.alpha_token.R"})],
    );
    let diff = compare(&before, &after);
    assert_eq!(diff.nodes.len(), 1, "{diff:#?}");
    assert_eq!(
        diff.nodes[0].kind,
        ChangeKind::Moved {
            from: "alpha.alpha_token.A".into()
        }
    );
    assert!(diff.nodes[0].attributes.is_empty());
    // A move alone changes no output: nothing may change later.
    assert!(diff.may_change_later.is_empty());
}

#[test]
fn dependents_of_a_changed_node_may_change_transitively_but_not_twice() {
    let chain = |label: &str| {
        ir(
            vec![
                token("A", json!({"label": label})),
                token("B", json!({"label": reference("A")})),
                token("C", json!({"label": reference("B")})),
            ],
            vec![reads("A", "B", "label"), reads("B", "C", "label")],
            vec![],
        )
    };
    let diff = compare(&chain("x"), &chain("y"));
    let later: Vec<(&str, &[String])> = (diff.may_change_later.iter())
        .map(|d| (d.address.as_str(), d.because_of.as_slice()))
        .collect();
    assert_eq!(
        later,
        [
            (
                "alpha.alpha_token.B",
                &["alpha.alpha_token.A".to_string()][..]
            ),
            (
                "alpha.alpha_token.C",
                &["alpha.alpha_token.A".to_string()][..]
            ),
        ]
    );
}

#[test]
fn added_and_removed_nodes_list_their_attributes_and_edges() {
    let before = ir(vec![token("A", json!({"label": "a"}))], vec![], vec![]);
    let after = ir(
        vec![
            token("N", json!({"label": "n"})),
            token("B", json!({"label": reference("N")})),
        ],
        vec![reads("N", "B", "label")],
        vec![],
    );
    let diff = compare(&before, &after);
    let kinds: Vec<(&str, &str)> = (diff.nodes.iter())
        .map(|n| (n.address.as_str(), n.kind.name()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("alpha.alpha_token.A", "removed"),
            ("alpha.alpha_token.B", "added"),
            ("alpha.alpha_token.N", "added"),
        ]
    );
    assert_eq!(diff.nodes[0].attributes[0].before, Shown::Value(json!("a")));
    assert_eq!(diff.nodes[0].attributes[0].after, Shown::Absent);
    assert_eq!(
        diff.nodes[1].edges_added,
        [EdgeEnd {
            from: "alpha.alpha_token.N".into(),
            via: "label".into()
        }]
    );
}
