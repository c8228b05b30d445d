use serde_json::json;

use super::*;
use crate::ir::parse_value;

/// A and B feed C.label (computed by Nix); D references C's value; E waits on A.
fn plan() -> Ir {
    let token = |name: &str, config: Json| json!({"id": format!("alpha.alpha_token.{name}"), "provider": "alpha", "type": "alpha_token", "name": name, "config": config});
    let edge = |from: &str, to: &str, via: &str, extra: Json| {
        let mut e = json!({"from": format!("alpha.alpha_token.{from}"), "to": format!("alpha.alpha_token.{to}"), "via": via});
        e.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        e
    };
    parse_value(&json!({
        "schemaVersion": 1,
        "providers": {"alpha": {"source": "provider-alpha", "config": {}}},
        "resources": [
            token("A", json!({})),
            token("B", json!({"label": "b"})),
            token("C", json!({"label": "x::y", "tags": {"env": "dev"}})),
            token("D", json!({"label": "z"})),
            {"id": "alpha.alpha_token.E", "provider": "alpha", "type": "alpha_token", "name": "E", "config": {},
             "meta": {"dependsOn": ["alpha.alpha_token.A"]}},
        ],
        "edges": [
            edge("A", "C", "label", json!({"reads": [["value"]]})),
            edge("B", "C", "label", json!({"reads": [["id"]]})),
            edge("A", "B", "label", json!({"reads": [["secret"]]})),
            edge("C", "D", "label", json!({"ref": ["value"]})),
            edge("A", "E", "dependsOn", json!({})),
        ],
        "nixConsumers": []
    }))
    .expect("valid IR")
}

#[test]
fn an_address_names_the_longest_node_and_an_attribute_path() {
    let ir = plan();
    let t = target(&ir, "alpha.alpha_token.C.tags.env").unwrap();
    assert_eq!(t.node, "alpha.alpha_token.C");
    assert_eq!(
        t.attr,
        [PathStep::Key("tags".into()), PathStep::Key("env".into())]
    );
    // `config.` in front is optional.
    assert_eq!(
        target(&ir, "alpha.alpha_token.C.config.label")
            .unwrap()
            .attr,
        [PathStep::Key("label".into())]
    );
    assert!(target(&ir, "alpha.alpha_token.C").unwrap().attr.is_empty());
    assert!(target(&ir, "alpha.alpha_token.Q")
        .unwrap_err()
        .to_string()
        .contains("no such resource"));
    assert!(target(&ir, "alpha.alpha_token.C.nope")
        .unwrap_err()
        .to_string()
        .contains("has no attribute nope"));
}

#[test]
fn origins_follow_the_edges_back_and_secrets_stay_placeholders() {
    let ir = plan();
    let mut outputs = BTreeMap::new();
    let mut ledger = crate::ledger::Ledger::default();
    ledger.set(
        "alpha.alpha_token.A",
        &json!({"value": "x", "secret": "s3cret"}),
        &[json!(["secret"])],
    );
    ledger.set("alpha.alpha_token.B", &json!({"id": "y"}), &[]);
    outputs.extend(ledger.outputs);
    let t = target(&ir, "alpha.alpha_token.C.label").unwrap();
    let why = explain(&ir, t, &outputs, &Json::Null);
    let origins: Vec<&str> = (why.origins.iter()).map(|o| o.address.as_str()).collect();
    assert_eq!(
        origins,
        ["alpha.alpha_token.A", "alpha.alpha_token.B"],
        "{why:#?}"
    );
    assert_eq!(why.origins[0].via, Via::Nix);
    assert_eq!(
        why.origins[0].outputs,
        [("value".to_string(), Shown::Value(json!("x")))]
    );
    // B was computed from A's secret: the recorded value is never kept.
    assert_eq!(
        why.origins[1].origins[0].outputs,
        [("secret".to_string(), Shown::Sensitive)]
    );
    assert!(!why.to_json().to_string().contains("s3cret"));
    // Readers: D references C's value.
    assert_eq!(why.readers.len(), 1);
    assert_eq!(
        (why.readers[0].address.as_str(), why.readers[0].via),
        ("alpha.alpha_token.D", Via::Reference)
    );
    // An attribute no edge reaches was written in Nix; dependsOn is no origin of a value.
    let plain = explain(
        &ir,
        target(&ir, "alpha.alpha_token.C.tags").unwrap(),
        &outputs,
        &Json::Null,
    );
    assert!(plain.origins.is_empty());
    let e = explain(
        &ir,
        target(&ir, "alpha.alpha_token.E").unwrap(),
        &outputs,
        &Json::Null,
    );
    assert_eq!(e.origins[0].via, Via::DependsOn);
}
