//! Unit tests of the state document's model (`model.rs`), kept apart for its size.

use super::*;
use serde_json::json;

fn sample() -> ResourceState {
    let mut r = ResourceState::new(
        "web",
        ResourceKind::Managed,
        "null",
        "registry.terraform.io/hashicorp/null",
        "null_resource",
        json!({"id": "123", "triggers": {"a": "1"}, "big": 12345678901234567890123u128}),
    );
    r.private = Some(vec![0, 1, 2, 0xff]);
    r.sensitive_paths = vec![json!(["triggers", "a"])];
    r.status = ResourceStatus::Tainted;
    r.deposed = vec![DeposedObject::new(
        "00000001",
        json!({"id": "old"}),
        None,
        1,
    )];
    r
}

#[test]
fn json_shape_is_camel_case_with_base64_private() {
    let v = serde_json::to_value(sample()).unwrap();
    assert_eq!(v["kind"], "managed");
    assert_eq!(v["status"], "tainted");
    assert_eq!(v["typeName"], "null_resource");
    assert_eq!(v["providerSource"], "registry.terraform.io/hashicorp/null");
    assert_eq!(v["schemaVersion"], 0);
    assert_eq!(v["sensitivePaths"], json!([["triggers", "a"]]));
    assert_eq!(v["private"], "AAEC/w==");
    assert_eq!(v["createBeforeDestroy"], false);
    assert_eq!(v["deposed"][0]["private"], Value::Null);
    assert_eq!(v["deposed"][0]["schemaVersion"], 1);
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert!(keys.iter().all(|k| !k.contains('_')), "{keys:?}");
    let change = serde_json::to_value(Change::Remove("web".into())).unwrap();
    assert_eq!(change, json!({"remove": "web"}));
    assert!(serde_json::to_value(Change::Put(sample())).unwrap()["put"].is_object());
}

#[test]
fn round_trips_and_keeps_big_numbers_exact() {
    let mut state = StateFile::empty();
    state.apply(&Change::Put(sample()));
    let text = serde_json::to_string(&state).unwrap();
    assert!(text.contains("12345678901234567890123"));
    let back: StateFile = serde_json::from_str(&text).unwrap();
    assert_eq!(back, state);
}

#[test]
fn keeps_unknown_fields_and_rejects_bad_base64() {
    let mut v = serde_json::to_value(sample()).unwrap();
    // One accepted spelling per value: no missing padding, whitespace or stray bits.
    for bad in ["not base64!", "Zg=", "Zm9v\n", "Zh==", "Zm-v", "Zg==Zg=="] {
        v["private"] = json!(bad);
        assert!(
            serde_json::from_value::<ResourceState>(v.clone()).is_err(),
            "{bad:?}"
        );
    }
    v["private"] = json!("Zm9vYg==");
    let r: ResourceState = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(r.private.as_deref(), Some(&b"foob"[..]));
    v["private"] = Value::Null;
    assert!(serde_json::from_value::<ResourceState>(v.clone()).is_ok());
    // Added by a newer release of the same format version: kept, and written back.
    v["surprise"] = json!({"n": 12345678901234567890123u128});
    v["deposed"][0]["later"] = json!(true);
    let r: ResourceState = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(r.extra["surprise"], v["surprise"]);
    assert_eq!(r.deposed[0].extra["later"], json!(true));
    assert_eq!(
        serde_json::to_value(&r).unwrap(),
        v,
        "round trip, exact numbers"
    );
    v.as_object_mut().unwrap().remove("status");
    let err = serde_json::from_value::<ResourceState>(v).unwrap_err();
    assert!(err.to_string().contains("missing field `status`"), "{err}");
}

#[test]
fn state_versions_legacy_current_and_newer() {
    let mut state = StateFile::with_lineage("l");
    state.apply(&Change::Put(sample()));
    let mut v = serde_json::to_value(&state).unwrap();
    assert_eq!(v["schemaVersion"], json!(SCHEMA_VERSION));
    v["addedLater"] = json!([1, 2]);
    let back: StateFile = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(back.extra["addedLater"], json!([1, 2]));
    assert_eq!(serde_json::to_value(&back).unwrap(), v);

    // Version 2: the same, but snake_case resource keys; an unknown key is kept as spelled.
    let mut v2 = snake_case_resources(serde_json::to_value(&state).unwrap());
    v2["schemaVersion"] = json!(2);
    v2["resources"]["web"]["added_in_2"] = json!({"n": 12345678901234567890123u128});
    let back: StateFile = serde_json::from_value(v2.clone()).unwrap();
    assert_eq!(
        back.resources["web"].extra["added_in_2"],
        v2["resources"]["web"]["added_in_2"]
    );
    let mut without = back.clone();
    without.resources.get_mut("web").unwrap().extra.clear();
    assert_eq!(without, state, "every record intact");
    let written = serde_json::to_value(&back).unwrap();
    assert_eq!(written["schemaVersion"], json!(SCHEMA_VERSION));
    assert_eq!(written["resources"]["web"]["typeName"], "null_resource");
    assert!(written["resources"]["web"].get("type_name").is_none());
    // Both spellings of one key in an old record: which one is meant is unknowable.
    let mut both = v2.clone();
    both["resources"]["web"]["typeName"] = json!("other");
    let err = serde_json::from_value::<StateFile>(both).unwrap_err();
    assert!(
        err.to_string().contains("both `type_name` and `typeName`"),
        "{err}"
    );
    // A version 3 record is never renamed: a snake_case key there is an unknown field.
    let mut v3 = serde_json::to_value(&state).unwrap();
    v3["resources"]["web"]["type_name"] = json!("kept");
    let back: StateFile = serde_json::from_value(v3).unwrap();
    assert_eq!(back.resources["web"].extra["type_name"], "kept");

    // The first release's file: `schema_version: 1`, snake_case, read as the current version.
    let mut legacy = snake_case_resources(serde_json::to_value(&state).unwrap());
    let m = legacy.as_object_mut().unwrap();
    m.remove("schemaVersion");
    m.insert("schema_version".into(), json!(1));
    let back: StateFile = serde_json::from_value(legacy.clone()).unwrap();
    assert_eq!(back, state);
    legacy["extra"] = json!(1);
    assert!(serde_json::from_value::<StateFile>(legacy).is_err());

    v["schemaVersion"] = json!(SCHEMA_VERSION + 1);
    let err = serde_json::from_value::<StateFile>(v)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!("version {}", SCHEMA_VERSION + 1)),
        "{err}"
    );
}

/// A state as versions 1 and 2 spelled its resources: snake_case keys.
fn snake_case_resources(mut state: Value) -> Value {
    for r in state["resources"].as_object_mut().unwrap().values_mut() {
        let r = r.as_object_mut().unwrap();
        for (old, new) in RENAMED_RESOURCE_KEYS {
            let value = r.remove(new).unwrap();
            r.insert(old.into(), value);
        }
        for d in r["deposed"].as_array_mut().unwrap() {
            let d = d.as_object_mut().unwrap();
            let value = d.remove("schemaVersion").unwrap();
            d.insert("schema_version".into(), value);
        }
    }
    state
}

#[test]
fn apply_puts_replaces_and_removes() {
    let mut state = StateFile::with_lineage("l");
    let r = sample();
    state.apply(&Change::Put(r.clone()));
    assert_eq!(state.get("web"), Some(&r));
    state.apply(&Change::Remove("absent".into()));
    assert_eq!(state.len(), 1);
    state.apply(&Change::Remove("web".into()));
    assert!(state.is_empty());
}

#[test]
fn lineages_are_unique_and_uuid_shaped() {
    let a = new_lineage();
    let b = new_lineage();
    assert_ne!(a, b);
    assert_eq!(a.len(), 36);
    assert_eq!(a.matches('-').count(), 4);
}
