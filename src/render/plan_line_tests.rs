//! How a plan's lines read (issue 45, defect 5; issue 48, F18): the marks of an attribute's
//! change, and the row of a resource decided in a later phase.

use super::{object_new, show_change, Human, Style};
use crate::engine::wire::ChangeRecord;
use crate::engine::{Action, AttrChange, Event, Wait};
use crate::secrets::Redactor;
use crate::value::{PathStep, Value};

/// Issue 45, defect 5: in an update, null (or absent) to a value is an addition and a
/// value to null a removal, marked as Terraform marks them; a create marks nothing (its
/// line says the whole object is new); `--json` keeps `before: null`.
#[test]
fn an_update_marks_additions_and_removals() {
    let r = &Redactor::new();
    let attr = |name: &str, before: Option<Value>, after: Option<Value>| AttrChange {
        path: vec![PathStep::Attr(name.into())],
        before,
        after,
        sensitive: false,
        forces_replacement: false,
        write_only: false,
    };
    let from_null = attr(
        "start_container",
        Some(Value::Null),
        Some(Value::Bool(true)),
    );
    assert_eq!(
        show_change(r, &from_null, object_new(Action::Update)),
        "+ start_container = true"
    );
    let absent = attr("image", None, Some(Value::String(String::new())));
    assert_eq!(
        show_change(r, &absent, object_new(Action::Update)),
        "+ image = \"\""
    );
    let replaced = Action::Replace {
        create_before_destroy: false,
    };
    assert_eq!(
        show_change(r, &from_null, object_new(replaced)),
        "+ start_container = true"
    );
    assert_eq!(
        show_change(r, &from_null, object_new(Action::Create)),
        "start_container = true"
    );
    let to_null = attr(
        "image",
        Some(Value::String("busybox".into())),
        Some(Value::Null),
    );
    assert_eq!(
        show_change(r, &to_null, object_new(Action::Update)),
        "- image = \"busybox\" -> null"
    );
    let changed = attr(
        "image",
        Some(Value::String("a".into())),
        Some(Value::String("b".into())),
    );
    assert_eq!(
        show_change(r, &changed, object_new(Action::Update)),
        "image: \"a\" -> \"b\""
    );
    let wire = serde_json::to_value(ChangeRecord::from(&from_null)).unwrap();
    assert_eq!(wire["before"], serde_json::Value::Null, "{wire}");
    assert_eq!(wire["after"], serde_json::json!(true), "{wire}");
}

/// Issue 48, F18: a deferred data source will be read, not created.
#[test]
fn a_deferred_data_source_will_be_read() {
    let mut human = Human::new(Style { color: false }, Redactor::new());
    let mut lines = |id: &str, in_state: bool| {
        let mut buf = Vec::new();
        let waits = vec![Wait::Resource("alpha.alpha_token.a".into())];
        human.write_event(
            &mut buf,
            Event::Deferred {
                phase: 1,
                id: id.into(),
                type_name: "t".into(),
                in_state,
                waits,
            },
        );
        String::from_utf8(buf).unwrap()
    };
    let data = lines("data.alpha.alpha_lookup.x", false);
    assert!(
        data.starts_with("<=? data.alpha.alpha_lookup.x (t)\n"),
        "{data}"
    );
    assert!(data.contains("will be read in a later phase"), "{data}");
    let new = lines("alpha.alpha_token.b", false);
    assert!(
        new.starts_with("+? ") && new.contains("will be created"),
        "{new}"
    );
    let kept = lines("alpha.alpha_token.c", true);
    assert!(
        kept.starts_with("~? ") && kept.contains("may be updated"),
        "{kept}"
    );
}
