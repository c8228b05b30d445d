//! Resource addresses never hold a secret: an address is printed by every verb, kept in the
//! state, the audit log and saved plans unmasked (it is how each thing is named), so a
//! sensitive variable's value made into a name or a `lib.forEach` key is refused at
//! evaluation, naming the variable it came from, as Terraform refuses a sensitive value as a
//! `for_each` key (DESIGN §93).
//!
//! Not: masking values (`secrets`), the Nix library's own checks on keys (`nix/lib/nodes.nix`).

use super::error::EngineError;
use super::Engine;
use crate::diag::Diagnostic;
use crate::ir::Ir;
use crate::secrets::{MASK, MIN_LEN};
use serde_json::Value as Json;

impl Engine<'_> {
    /// Refuses an IR one of whose resource or data source addresses is built from a
    /// sensitive variable's value (or a part of one, when the value is a list or a map).
    pub(super) fn refuse_secret_addresses(&self, ir: &Ir) -> Result<(), EngineError> {
        let mut secrets: Vec<(String, String)> = Vec::new();
        for values in self.variable_values() {
            for (name, value) in values {
                if !ir.variables.get(&name).is_some_and(|d| d.sensitive) {
                    continue;
                }
                each_string(&value, &mut |text| {
                    if !text.is_empty() {
                        secrets.push((name.clone(), text.to_string()));
                    }
                });
            }
        }
        if secrets.is_empty() {
            return Ok(());
        }
        for node in ir.nodes() {
            let Some((name, text)) = secrets.iter().find(|(_, s)| holds(&node.id, s)) else {
                continue;
            };
            let source = match self.opts.secret_vars.contains(name) {
                true => format!(" (read from secretSources.{name})"),
                false => String::new(),
            };
            let masked = node.id.replace(text, MASK);
            let shown = self.opts.redactor.redact(&masked);
            return Err(EngineError::Diagnostics(
                Diagnostic::error(format!(
                    "the address {shown} is built from the value of the sensitive variable \
                     {name}{source}: an address is printed by every command and kept in the \
                     state and the audit log unmasked, so a secret cannot be part of one (a \
                     resource's name, or a key of lib.count/lib.forEach). Key the resources by \
                     something that is not secret (a name, an index) and pass the secret in \
                     their configuration"
                ))
                .into(),
            ));
        }
        Ok(())
    }
}

/// Every string in `value` (a name or a key is text: numbers and booleans are left out, as
/// `lib.count`'s indices would match them by chance).
fn each_string(value: &Json, f: &mut dyn FnMut(&str)) {
    match value {
        Json::String(s) => f(s),
        Json::Array(items) => items.iter().for_each(|v| each_string(v, f)),
        Json::Object(map) => map.values().for_each(|v| each_string(v, f)),
        _ => {}
    }
}

/// Whether the address `id` holds `secret` in its name or instance key (the part after the
/// last `.`): anywhere when the secret is long enough not to match by chance, else as the
/// whole name or key (split at `__`), never when it is digits only (an index).
fn holds(id: &str, secret: &str) -> bool {
    let last = id.rsplit('.').next().unwrap_or(id);
    if secret.len() >= MIN_LEN {
        return last.contains(secret);
    }
    !secret.bytes().all(|b| b.is_ascii_digit()) && last.split("__").any(|part| part == secret)
}

#[cfg(test)]
mod tests {
    use super::holds;

    #[test]
    fn an_address_holds_a_secret_as_its_key_or_name_never_by_chance() {
        assert!(holds("beta.beta_record.B__winter2026", "winter2026"));
        assert!(holds("beta.beta_record.winter2026", "winter2026"));
        assert!(holds(
            "data.beta.beta_record.B__x-winter2026-y",
            "winter2026"
        ));
        assert!(holds("beta.beta_record.B__ab", "ab"));
        // A short secret inside a longer key, or equal to the provider or type: not the key.
        assert!(!holds("beta.beta_record.B__abc", "ab"));
        assert!(!holds("beta.beta_record.B__x", "beta"));
        assert!(!holds("beta.beta_record.B__x", "beta_record"));
        // An index is not a secret's value.
        assert!(!holds("beta.beta_record.B__1", "1"));
    }
}
