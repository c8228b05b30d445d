//! The one escaping function everything Nivis prints goes through: provider output, user values
//! and Nix errors may hold terminal control sequences, newlines that fake a line of ours, or
//! bidirectional overrides that make text read differently from what it is. Known secrets are
//! redacted on the way, by the run's [`Redactor`] each printing function is given.
//!
//! Owns: which characters are escaped and how. Not: what is printed, nor what is secret.

use std::borrow::Cow;

use crate::secrets::Redactor;

/// Whether `c` must not reach a terminal as itself: C0 and C1 controls and DEL (escape
/// sequences, bells, carriage returns, line breaks) and the invisible format characters that
/// change how text around them is displayed (bidirectional overrides and isolates, zero-width
/// characters, line and paragraph separators).
pub(super) fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2069}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

/// The one escaping function: `text` with every character [`needs_escape`] names written as
/// an escape (`\n`, `\r`, `\t`, else `\u{…}`). `keep_layout` leaves `\n` and `\t` alone, for
/// multi-line messages whose line structure is ours.
fn escape_with(text: &str, keep_layout: bool) -> Cow<'_, str> {
    let keep = |c: char| keep_layout && (c == '\n' || c == '\t');
    if !text.chars().any(|c| needs_escape(c) && !keep(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !needs_escape(c) || keep(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// A single value or name for a terminal: known secrets redacted, every control, line break
/// and bidirectional character escaped.
pub(crate) fn escape(redactor: &Redactor, text: &str) -> String {
    escape_with(&redactor.redact(text), false).into_owned()
}

/// [`escape`] without the redaction, only for a value the user asked to see as it is
/// (`output --raw NAME` on a terminal).
pub(crate) fn escape_unredacted(text: &str) -> String {
    escape_with(text, false).into_owned()
}

/// A message of several lines (an error, a provider's diagnostic, a log line) for a terminal:
/// like [`escape`], but line breaks and tabs are kept.
pub fn escape_text(redactor: &Redactor, text: &str) -> String {
    escape_with(&redactor.redact(text), true).into_owned()
}

/// A string value in double quotes, as a plan shows it: `\` and `"` escaped too, so the value's
/// end is unambiguous.
pub(crate) fn quote(redactor: &Redactor, text: &str) -> String {
    let inner = text.replace('\\', "\\\\").replace('"', "\\\"");
    format!("\"{}\"", escape(redactor, &inner))
}

/// JSON for a terminal or a pipe (`pretty`: indented): known secrets redacted inside strings,
/// and the characters serde_json leaves raw escaped (see [`json_text_unredacted`]).
pub fn json_text(redactor: &Redactor, value: &serde_json::Value, pretty: bool) -> String {
    if !redactor.knows_secrets() {
        return json_text_unredacted(value, pretty);
    }
    let mut value = value.clone();
    redactor.redact_json(&mut value);
    json_text_unredacted(&value, pretty)
}

/// JSON with secrets left in (only for what the user asked to see raw: `state pull --out -`),
/// and the characters serde_json leaves raw (DEL, C1 controls, bidirectional and invisible
/// format characters) written as `\uXXXX`, so the text stays the same JSON. serde_json already
/// escapes C0 controls inside strings; the only raw ones left are the layout's own newlines.
pub(crate) fn json_text_unredacted(value: &serde_json::Value, pretty: bool) -> String {
    let text = if pretty {
        serde_json::to_string_pretty(value).expect("JSON values serialise")
    } else {
        value.to_string()
    };
    let raw = |c: char| needs_escape(c) && c > '\u{1f}';
    if !text.chars().any(raw) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if raw(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{json_text, json_text_unredacted};
    use crate::secrets::Redactor;

    #[test]
    fn a_line_masks_secrets_in_values_and_keys_in_place_and_is_unchanged_without_one() {
        let redactor = Redactor::new();
        let value = json!({"b": "x s3cr3t-value y", "s3cr3t-value": [1], "a": "\u{7f}"});
        let plain = json_text(&redactor, &value, false);
        assert_eq!(plain, json_text_unredacted(&value, false));
        assert_eq!(
            plain,
            r#"{"b":"x s3cr3t-value y","s3cr3t-value":[1],"a":"\u007f"}"#
        );
        redactor.remember("s3cr3t-value");
        assert_eq!(
            json_text(&redactor, &value, false),
            r#"{"b":"x (sensitive) y","(sensitive)":[1],"a":"\u007f"}"#
        );
    }
}
