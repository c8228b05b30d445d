//! Unit tests of `render`'s line printers, kept apart for the file's size.

use super::*;
use crate::engine::wire::ChangeRecord;
use crate::value::PathStep;

#[test]
fn changes_render_with_sensitivity_and_unknowns() {
    let c = AttrChange {
        path: vec![PathStep::Attr("label".into())],
        before: Some(Value::String("a".into())),
        after: Some(Value::String("b".into())),
        sensitive: false,
        forces_replacement: true,
        write_only: false,
    };
    assert_eq!(
        show_change(&Redactor::new(), &c, true),
        "label: \"a\" -> \"b\"  # forces replacement"
    );
    let c = AttrChange {
        path: vec![PathStep::Attr("secret".into())],
        before: None,
        after: Some(Value::String("x".into())),
        sensitive: true,
        forces_replacement: false,
        write_only: false,
    };
    assert_eq!(
        show_change(&Redactor::new(), &c, true),
        "secret = (sensitive value)"
    );
    let c = AttrChange {
        path: vec![PathStep::Attr("id".into())],
        before: Some(Value::Null),
        after: Some(Value::Unknown),
        sensitive: false,
        forces_replacement: false,
        write_only: false,
    };
    assert_eq!(
        show_change(&Redactor::new(), &c, true),
        "id = (known after apply)"
    );
    let c = AttrChange {
        path: vec![PathStep::Attr("password_wo".into())],
        before: None,
        after: None,
        sensitive: false,
        forces_replacement: false,
        write_only: true,
    };
    assert_eq!(
        show_change(&Redactor::new(), &c, true),
        "password_wo = (write-only attribute)"
    );
    let j = serde_json::to_value(ChangeRecord::from(&AttrChange {
        path: vec![PathStep::Attr("secret".into())],
        before: None,
        after: Some(Value::String("x".into())),
        sensitive: true,
        forces_replacement: false,
        write_only: false,
    }))
    .unwrap();
    assert!(!j.to_string().contains("\"x\""));
}

#[test]
fn one_escaping_for_values_messages_and_json() {
    let r = &Redactor::new();
    let nasty = "a\u{1b}[31mred\nline\u{202e}evil\u{7}\tend\u{85}\u{200b}";
    assert_eq!(
        escape(r, nasty),
        "a\\u{1b}[31mred\\nline\\u{202e}evil\\u{7}\\tend\\u{85}\\u{200b}"
    );
    assert_eq!(
        escape_text(r, nasty),
        "a\\u{1b}[31mred\nline\\u{202e}evil\\u{7}\tend\\u{85}\\u{200b}"
    );
    assert_eq!(quote(r, "say \"hi\"\\"), "\"say \\\"hi\\\"\\\\\"");
    assert_eq!(escape(r, "plain ünïcode ✓"), "plain ünïcode ✓");
    let j = serde_json::json!({"k\u{202e}": nasty, "n": [1, "\u{7f}"]});
    let text = json_text(r, &j, false);
    assert!(!text.chars().any(escape::needs_escape), "{text:?}");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), j);
    let pretty = json_text(r, &j, true);
    assert!(pretty.contains('\n'));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&pretty).unwrap(),
        j
    );
}

#[test]
fn known_secrets_are_redacted_in_every_form() {
    let r = &Redactor::new();
    r.remember("render-test-secret");
    assert_eq!(escape(r, "x render-test-secret y"), "x (sensitive value) y");
    assert_eq!(
        escape_text(r, "a\nrender-test-secret"),
        "a\n(sensitive value)"
    );
    let text = json_text(
        r,
        &serde_json::json!({"e": "beta://render-test-secret"}),
        false,
    );
    assert_eq!(text, r#"{"e":"beta://(sensitive)"}"#);
}
