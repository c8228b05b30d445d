//! What a run knows to be secret, and keeping it out of everything it prints.
//!
//! Owns: the set of secret values a run has seen so far (a [`Redactor`]) — values at the
//! state's sensitive paths, sensitive variables, values Nix marked sensitive, sensitive inputs
//! of a resource — and redacting them from text and JSON; masking the sensitive paths of an
//! attribute tree.
//! Not: deciding what is sensitive (provider schemas, the IR and the engine do), escaping for
//! terminals (`render`), or storing secrets (`state`, `ledger`). Nor holding any secret in a
//! global: there is no process-wide redactor. `cli` makes one `Redactor` per command and hands
//! it (or a clone, which shares what it learns) to whatever learns secrets (the engine through
//! `engine::Options`, the state backend, `secret_sources`) and whatever prints (the logger,
//! `render`'s printers, `nixeval`'s error text); two runs in one process share nothing
//! (DESIGN §75).
//!
//! Redaction is the second line of defence. The first is structural: a value known to be
//! sensitive is never rendered at all (plan changes, `state show`, the ledger carry a mask or a
//! placeholder). Redaction catches the copies nobody marked: a provider that echoes a password
//! in an error or a log line (raw or JSON-escaped), Nix quoting a value in an evaluation error,
//! a computed attribute that embeds its sensitive input, a NixOps4 provider quoting the request
//! that carried a secret input. Values shorter than [`MIN_LEN`] bytes are not redacted by
//! content (masking every `"1"` or `"true"` would make output unreadable); structural masking
//! still covers them.

use std::collections::HashMap;

use serde_json::Value as Json;

use crate::value::Value;

mod redactor;

pub use self::redactor::Redactor;

/// The shortest value redacted wherever it appears.
pub(crate) const MIN_LEN: usize = 6;

/// What replaces a secret in human output.
pub const MASK: &str = "(sensitive value)";

/// What replaces a secret in JSON output.
pub(crate) const JSON_MASK: &str = "(sensitive)";

/// A set of secrets indexed by their first [`MIN_LEN`] bytes, so that finding every secret in a
/// text costs one hash lookup per byte of the text, however many secrets there are (a plan of
/// 10000 resources may know 10000 of them).
#[derive(Default)]
struct SecretSet {
    /// First bytes -> the secrets starting with them, longest first.
    by_prefix: Option<HashMap<[u8; MIN_LEN], Vec<String>>>,
}

impl SecretSet {
    fn is_empty(&self) -> bool {
        self.by_prefix.is_none()
    }

    /// Every form of every secret held.
    fn iter(&self) -> impl Iterator<Item = &String> {
        self.by_prefix.iter().flat_map(|m| m.values().flatten())
    }

    /// Adds `s` in every form it may take in what we print (see [`encoded_forms`]), unless it
    /// is one of Nivis's own words (see [`OWN_WORDS`]).
    fn insert(&mut self, s: &str) {
        if is_own_word(s) {
            return;
        }
        for form in encoded_forms(s) {
            self.insert_one(&form);
        }
    }

    fn insert_one(&mut self, s: &str) {
        let Some(key) = prefix(s.as_bytes()) else {
            return;
        };
        let bucket = self
            .by_prefix
            .get_or_insert_with(HashMap::new)
            .entry(key)
            .or_default();
        if !bucket.iter().any(|k| k == s) {
            let at = bucket.partition_point(|k| k.len() >= s.len());
            bucket.insert(at, s.to_string());
        }
    }

    /// The longest secret starting at the beginning of `rest`.
    fn longest_at(&self, rest: &[u8]) -> Option<usize> {
        let bucket = self.by_prefix.as_ref()?.get(&prefix(rest)?)?;
        bucket
            .iter()
            .find(|k| rest.starts_with(k.as_bytes()))
            .map(String::len)
    }

    fn clear(&mut self) {
        self.by_prefix = None;
    }
}

/// Nivis's own words in what it prints: action names, event types, field names of events and
/// summaries, the default environment. A "secret" equal to one of them is never redacted by
/// content: masking it would rewrite Nivis's own output (every `"action": "create"` turning
/// into `"(sensitive)"`, a saved plan showing no changes) and, by the pattern of what got
/// masked, tell the value anyway. Structural masking (sensitive paths) still hides it.
pub(crate) const OWN_WORDS: &[&str] = &[
    "action",
    "applied",
    "applyPhases",
    "attributes",
    "because",
    "change",
    "changed",
    "changes",
    "command",
    "config",
    "consumer-pending",
    "cpuSeconds",
    "create",
    "createBeforeDestroy",
    "decided",
    "default",
    "deferred",
    "delete",
    "deleted",
    "destroy",
    "detail",
    "diagnostic",
    "diagnostics",
    "drifted",
    "errors",
    "evaluated",
    "evaluations",
    "eventsVersion",
    "failed",
    "finished",
    "fixpoint",
    "forget",
    "importId",
    "import",
    "imported",
    "inState",
    "lineage",
    "message",
    "no-op",
    "nixSeconds",
    "objectId",
    "ownSeconds",
    "phase-done",
    "phase-limit",
    "planned",
    "possibleActions",
    "providerCallSecondsSummed",
    "providerCalls",
    "providerSeconds",
    "re-create",
    "recorded",
    "recreate",
    "refresh",
    "replace",
    "resource",
    "resourceType",
    "resources",
    "schemaVersion",
    "seconds",
    "severity",
    "skipped",
    "started",
    "summary",
    "timing",
    "unrecorded",
    "update",
    "version",
    "waitsOn",
    "warning",
];

fn is_own_word(s: &str) -> bool {
    OWN_WORDS.contains(&s)
}

/// The forms a secret takes where a provider, a log or Nix may print it: itself; inside a JSON
/// string (`pa\"ss`), also as Go escapes `<`, `>` and `&` (`\u0026`); URL-encoded (`%20` or
/// `+` for a space, either case of hex digits); its bytes in hex (either case); and base64
/// (standard and URL-safe alphabets) at each of the three alignments it can start at, each
/// without the characters at its ends that its neighbours change. Forms shorter than
/// [`MIN_LEN`] are left out by the caller.
fn encoded_forms(s: &str) -> Vec<String> {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    let mut forms = vec![s.to_string()];
    let quoted = Json::String(s.to_string()).to_string();
    let inner = quoted[1..quoted.len() - 1].to_string();
    let go = inner
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    forms.extend([inner, go]);
    let url: String = s
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    let lower_hex_escapes = {
        let mut out = String::new();
        let mut rest = url.as_str();
        while let Some(at) = rest.find('%') {
            out.push_str(&rest[..at]);
            out.push_str(&rest[at..at + 3].to_ascii_lowercase());
            rest = &rest[at + 3..];
        }
        out + rest
    };
    forms.extend([
        url.replace("%20", "+"),
        lower_hex_escapes.replace("%20", "+"),
        lower_hex_escapes,
        url,
    ]);
    let hex = hex::encode(s.as_bytes());
    forms.extend([hex.to_ascii_uppercase(), hex]);
    for offset in 0..3 {
        let mut bytes = vec![0u8; offset];
        bytes.extend_from_slice(s.as_bytes());
        let text = STANDARD.encode(&bytes);
        // Only whole groups of three secret bytes encode the same whatever surrounds them.
        let start = 4 * offset.div_ceil(3);
        let end = 4 * ((offset + s.len()) / 3);
        if let Some(stable) = text.get(start..end.max(start)) {
            forms.push(stable.replace('+', "-").replace('/', "_"));
            forms.push(stable.to_string());
        }
    }
    forms.sort();
    forms.dedup();
    forms
}

fn prefix(bytes: &[u8]) -> Option<[u8; MIN_LEN]> {
    bytes.get(..MIN_LEN)?.try_into().ok()
}

/// Calls `f` with every string and number (as written) inside a JSON tree.
pub(crate) fn each_scalar_json(json: &Json, f: &mut dyn FnMut(&str)) {
    match json {
        Json::String(s) => f(s),
        Json::Number(n) => f(&n.to_string()),
        Json::Array(items) => items.iter().for_each(|j| each_scalar_json(j, f)),
        Json::Object(m) => m.values().for_each(|j| each_scalar_json(j, f)),
        Json::Bool(_) | Json::Null => {}
    }
}

/// Calls `f` with every string and number inside a provider value.
pub(crate) fn each_scalar_value(value: &Value, f: &mut dyn FnMut(&str)) {
    match value {
        Value::String(s) => f(s),
        Value::Number(n) => f(&n.to_string()),
        Value::List(items) => items.iter().for_each(|v| each_scalar_value(v, f)),
        Value::Map(m) => m.values().for_each(|v| each_scalar_value(v, f)),
        Value::Dynamic { value, .. } => each_scalar_value(value, f),
        Value::Null | Value::Bool(_) | Value::Unknown => {}
    }
}

impl Redactor {
    /// Remembers every string and number inside a JSON tree.
    pub(crate) fn remember_json(&self, json: &Json) {
        each_scalar_json(json, &mut |s| self.remember(s));
    }

    /// Remembers every string and number inside a provider value.
    pub(crate) fn remember_value(&self, value: &Value) {
        each_scalar_value(value, &mut |s| self.remember(s));
    }
}

/// The length of the fragments of a known secret [`Redactor::without_derived_lines`] looks for.
pub(crate) const FRAGMENT_LEN: usize = 8;

/// `attributes` with the value at each sensitive path (JSON arrays of keys and indices, as in
/// state) replaced by `mask`.
pub(crate) fn mask_paths(attributes: &Json, sensitive_paths: &[Json], mask: &str) -> Json {
    let mut out = attributes.clone();
    for path in sensitive_paths.iter().filter_map(Json::as_array) {
        if let Some(at) = at_path_mut(&mut out, path) {
            if !at.is_null() {
                *at = Json::String(mask.to_string());
            }
        }
    }
    out
}

fn at_path_mut<'j>(json: &'j mut Json, path: &[Json]) -> Option<&'j mut Json> {
    let mut at = json;
    for step in path {
        at = match (step, at) {
            (Json::String(k), Json::Object(m)) => m.get_mut(k)?,
            (Json::Number(n), Json::Array(items)) => items.get_mut(n.as_u64()? as usize)?,
            _ => return None,
        };
    }
    Some(at)
}

/// The value at a state path (JSON array of keys and indices), if there is one.
pub(crate) fn at_path<'j>(json: &'j Json, path: &Json) -> Option<&'j Json> {
    let mut at = json;
    for step in path.as_array()? {
        at = match (step, at) {
            (Json::String(k), Json::Object(m)) => m.get(k)?,
            (Json::Number(n), Json::Array(items)) => items.get(n.as_u64()? as usize)?,
            _ => return None,
        };
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    // Each test has a redactor of its own (see `redactor`'s test: they share nothing).

    #[test]
    fn redaction_replaces_known_values_longest_first_and_ignores_short_ones() {
        let r = Redactor::new();
        r.remember("red-secret-one");
        r.remember("red-secret-one-and-more");
        r.remember("short");
        assert_eq!(
            r.redact("a red-secret-one-and-more b red-secret-one c short"),
            "a (sensitive value) b (sensitive value) c short"
        );
        assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
        // At the edges, next to multi-byte characters, back to back.
        assert_eq!(
            r.redact("red-secret-oneé→red-secret-onered-secret-one"),
            "(sensitive value)é→(sensitive value)(sensitive value)"
        );
        // Many secrets sharing their first bytes.
        for i in 0..500 {
            r.remember(&format!("many-secret-{i:04}"));
        }
        assert_eq!(
            r.redact("a many-secret-0042 b many-secret-04990 c many-secret-"),
            "a (sensitive value) b (sensitive value)0 c many-secret-"
        );
        // The form a secret takes inside a JSON string (a provider quoting its request).
        r.remember("json\"quoted\\secret\n");
        assert_eq!(
            r.redact(r#"bad request {"token": "json\"quoted\\secret\n", "name": "visible"}"#),
            r#"bad request {"token": "(sensitive value)", "name": "visible"}"#
        );
        assert_eq!(
            r.redact("raw json\"quoted\\secret\n."),
            "raw (sensitive value)."
        );
        let mut j = json!({"k": ["x red-secret-one y"], "red-secret-one": 1});
        r.redact_json(&mut j);
        assert_eq!(j, json!({"k": ["x (sensitive) y"], "(sensitive)": 1}));
    }

    #[test]
    fn every_encoding_of_a_secret_is_redacted() {
        let r = Redactor::new();
        use base64::engine::general_purpose::STANDARD;
        use base64::Engine as _;
        let secret = "p@ss w&rd<1>/enc-secret";
        r.remember(secret);
        let forms = [
            "p%40ss%20w%26rd%3C1%3E%2Fenc-secret".to_string(),
            "p%40ss+w%26rd%3c1%3e%2fenc-secret".to_string(),
            "p@ss w\\u0026rd\\u003c1\\u003e/enc-secret".to_string(),
            hex::encode(secret),
            hex::encode(secret).to_uppercase(),
        ];
        for form in &forms {
            let text = format!("error: {form} rejected");
            assert_eq!(
                r.redact(&text),
                "error: (sensitive value) rejected",
                "{form}"
            );
        }
        // base64 at every alignment: nothing of the stable middle is left.
        for offset in 0..3 {
            let mut bytes = b"xyz"[..offset].to_vec();
            bytes.extend_from_slice(secret.as_bytes());
            bytes.extend_from_slice(b"tail");
            let encoded = STANDARD.encode(&bytes);
            let shown = r.redact(&encoded).into_owned();
            assert!(shown.contains(MASK), "offset {offset}: {shown}");
            // Left: what encodes the bytes around it, and at most a partial group at each end.
            assert!(shown.len() <= MASK.len() + 20, "offset {offset}: {shown}");
        }
    }

    #[test]
    fn lines_quoting_a_fragment_of_a_secret_are_left_out() {
        let r = Redactor::new();
        r.remember("derived-secret-0123456789");
        let error =
            "error: bad value derived-sec\n       at flake.nix:3:5:\nwhile evaluating 'label'";
        let (kept, left_out) = r.without_derived_lines(error);
        assert_eq!(left_out, 1);
        assert_eq!(kept, "       at flake.nix:3:5:\nwhile evaluating 'label'");
        let (same, none) = r.without_derived_lines("error: nothing secret here");
        assert_eq!((same.as_str(), none), ("error: nothing secret here", 0));
    }

    #[test]
    fn nivis_own_words_are_never_redacted_by_content() {
        let r = Redactor::new();
        r.remember("create");
        r.remember("default");
        assert_eq!(r.redact("Plan: 2 to create"), "Plan: 2 to create");
        let mut j = json!({"type": "planned", "action": "create", "env": "default"});
        let before = j.clone();
        r.redact_json(&mut j);
        assert_eq!(j, before);
        for action in [
            crate::plan::Action::Create,
            crate::plan::Action::Update,
            crate::plan::Action::Replace {
                create_before_destroy: false,
            },
            crate::plan::Action::Delete,
            crate::plan::Action::Forget,
            crate::plan::Action::Recreate,
            crate::plan::Action::NoOp,
            crate::plan::Action::Read,
        ] {
            let class = action.class();
            assert!(class.len() < MIN_LEN || is_own_word(class), "{class}");
        }
    }

    #[test]
    fn variable_values_are_redacted_until_the_plan_says_which_are_sensitive() {
        let r = Redactor::new();
        let vars: BTreeMap<String, Json> = [
            ("keep".to_string(), json!("prov-keep-me")),
            ("drop".to_string(), json!(["prov-drop-me"])),
        ]
        .into();
        r.remember_variables_provisionally(&vars);
        assert_eq!(r.redact("prov-drop-me"), MASK);
        r.settle_variables(&vars, &|name| name == "keep");
        assert_eq!(
            r.redact("prov-drop-me prov-keep-me"),
            "prov-drop-me (sensitive value)"
        );
    }

    #[test]
    fn values_at_sensitive_paths_are_masked_by_path() {
        let attributes = json!({"id": "x", "creds": {"password": "p"}, "list": ["l0", "l1"]});
        let paths = [json!(["creds", "password"]), json!(["list", 1])];
        assert_eq!(
            mask_paths(&attributes, &paths, "M"),
            json!({"id": "x", "creds": {"password": "M"}, "list": ["l0", "M"]})
        );
    }
}
