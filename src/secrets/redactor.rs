//! One run's knowledge of what is secret, as a value: [`Redactor`].
//!
//! Owns: the set of secret values one run has seen (and the variable values that may be secret
//! until the plan says), and replacing them in text and JSON. Not: where the secrets come from
//! (the engine, state, backends and secret sources call `remember*` on the redactor they were
//! handed), nor the forms a secret takes (`super::SecretSet`), nor who holds it: the command
//! line makes one per run and passes it down; nothing reaches one through a global.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde_json::Value as Json;

use super::{each_scalar_json, SecretSet, FRAGMENT_LEN, JSON_MASK, MASK, MIN_LEN};

/// What one run knows to be secret. Cheap to clone: the clones share one set, so a secret one
/// of them remembers is redacted by all; two redactors made with [`Redactor::new`] share
/// nothing.
#[derive(Clone, Default)]
pub struct Redactor {
    known: Arc<RwLock<Known>>,
}

#[derive(Default)]
struct Known {
    values: SecretSet,
    /// Values that may be secret until the plan says (variables before the first evaluation).
    provisional: SecretSet,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets themselves.
        f.write_str("Redactor")
    }
}

impl Redactor {
    /// A redactor that knows no secret yet.
    pub fn new() -> Redactor {
        Redactor::default()
    }

    fn write(&self) -> RwLockWriteGuard<'_, Known> {
        self.known.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> RwLockReadGuard<'_, Known> {
        self.known.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers a secret value (one shorter than [`MIN_LEN`] bytes is not redacted by content).
    pub fn remember(&self, s: &str) {
        if s.len() >= MIN_LEN {
            self.write().values.insert(s);
        }
    }

    /// Masks every variable value until [`Redactor::settle_variables`] knows which variables are
    /// sensitive.
    pub(crate) fn remember_variables_provisionally(&self, vars: &BTreeMap<String, Json>) {
        let mut known = self.write();
        for v in vars.values() {
            each_scalar_json(v, &mut |s| known.provisional.insert(s));
        }
    }

    /// Ends the provisional period: the values of the variables `sensitive` names stay
    /// secrets, the others are forgotten.
    pub(crate) fn settle_variables(
        &self,
        vars: &BTreeMap<String, Json>,
        sensitive: &dyn Fn(&str) -> bool,
    ) {
        let mut known = self.write();
        known.provisional.clear();
        for (_, v) in vars.iter().filter(|(name, _)| sensitive(name)) {
            each_scalar_json(v, &mut |s| known.values.insert(s));
        }
    }

    /// `text` with every known secret replaced by [`MASK`].
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        self.redact_with(text, MASK)
    }

    fn redact_with<'t>(&self, text: &'t str, mask: &str) -> Cow<'t, str> {
        let known = self.read();
        if known.values.is_empty() && known.provisional.is_empty() {
            return Cow::Borrowed(text);
        }
        let bytes = text.as_bytes();
        let mut out = String::new();
        let (mut copied, mut i) = (0, 0);
        while i + MIN_LEN <= bytes.len() {
            let rest = &bytes[i..];
            let found = known
                .values
                .longest_at(rest)
                .max(known.provisional.longest_at(rest));
            match found {
                // A secret starts on a character boundary (its first byte is not a UTF-8
                // continuation byte), so `i` is one too.
                Some(len) => {
                    out.push_str(&text[copied..i]);
                    out.push_str(mask);
                    i += len;
                    copied = i;
                }
                None => i += 1,
            }
        }
        if copied == 0 {
            return Cow::Borrowed(text);
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }

    /// Replaces every known secret inside the strings (and keys) of a JSON tree by
    /// [`JSON_MASK`].
    pub(crate) fn redact_json(&self, json: &mut Json) {
        match json {
            Json::String(s) => {
                if let Cow::Owned(r) = self.redact_with(s, JSON_MASK) {
                    *s = r;
                }
            }
            Json::Array(items) => items.iter_mut().for_each(|j| self.redact_json(j)),
            Json::Object(m) => {
                m.values_mut().for_each(|v| self.redact_json(v));
                // Keys are rebuilt (in order) only when one holds a secret: every event line
                // passes through here.
                let masked = |k: &String| matches!(self.redact_with(k, JSON_MASK), Cow::Owned(_));
                if m.keys().any(masked) {
                    let entries = std::mem::take(m);
                    for (k, v) in entries {
                        m.insert(self.redact_with(&k, JSON_MASK).into_owned(), v);
                    }
                }
            }
            Json::Number(_) | Json::Bool(_) | Json::Null => {}
        }
    }

    /// Whether any secret is known: without one, nothing is ever redacted.
    pub(crate) fn knows_secrets(&self) -> bool {
        let known = self.read();
        !(known.values.is_empty() && known.provisional.is_empty())
    }

    /// `text` (an error Nix printed) without the lines that quote a fragment of a known secret
    /// ([`FRAGMENT_LEN`] bytes of it anywhere), and how many lines were left out.
    pub(crate) fn without_derived_lines(&self, text: &str) -> (String, usize) {
        let known = self.read();
        let mut fragments: HashSet<&[u8]> = HashSet::new();
        for set in [&known.values, &known.provisional] {
            for secret in set.iter() {
                fragments.extend(secret.as_bytes().windows(FRAGMENT_LEN));
            }
        }
        let mut left_out = 0;
        let mut kept = Vec::new();
        for line in text.lines() {
            if line
                .as_bytes()
                .windows(FRAGMENT_LEN)
                .any(|w| fragments.contains(w))
            {
                left_out += 1;
            } else {
                kept.push(line);
            }
        }
        (kept.join("\n"), left_out)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn two_redactors_do_not_see_each_others_secrets() {
        let (one, other) = (Redactor::new(), Redactor::new());
        one.remember("secret-of-run-one");
        other.remember("secret-of-run-two");
        let text = "secret-of-run-one secret-of-run-two";
        assert_eq!(one.redact(text), "(sensitive value) secret-of-run-two");
        assert_eq!(other.redact(text), "secret-of-run-one (sensitive value)");
        // Clones share what they know.
        let clone = one.clone();
        clone.remember("learnt-by-the-clone");
        assert_eq!(one.redact("learnt-by-the-clone"), MASK);
        assert_eq!(other.redact("learnt-by-the-clone"), "learnt-by-the-clone");
        let mut j = json!({"k": "secret-of-run-two"});
        one.redact_json(&mut j);
        assert_eq!(j, json!({"k": "secret-of-run-two"}));
        let nix_error = "error: learnt-by-the\nat plan.nix:1:1";
        assert_eq!(other.without_derived_lines(nix_error).1, 0);
        assert_eq!(one.without_derived_lines(nix_error).1, 1);
        assert_eq!(format!("{one:?}"), "Redactor");
    }
}
