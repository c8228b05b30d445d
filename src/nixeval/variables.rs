//! The plan's variable declarations alone, for knowing which values to mask before the plan
//! is evaluated with them.
//!
//! Owns: the evaluation that asks the Nix library for the declarations only (the ledger's
//! `variablesOnly = true`, added by the `--apply` expression as `positions` is), so no value is
//! checked and nothing else of the plan is forced. Not: what the engine makes of them.

use std::collections::BTreeMap;
use std::os::fd::RawFd;
use std::path::Path;

use super::{evaluate_applied, EvalError, PlanSource};
use crate::nixsyntax::nix_string;
use crate::secrets::Redactor;

/// The variables the plan declares sensitive, each with its declared type (`any` when it
/// declares none); `None` when the plan cannot say (its evaluation failed, or it gave no
/// declarations in the contract's shape), and every given value must then be taken for a secret.
pub(crate) fn sensitive_declarations(
    source: &PlanSource,
    ledger_path: &Path,
    inherit: Option<RawFd>,
    redactor: &Redactor,
) -> Option<BTreeMap<String, String>> {
    let ledger = ledger_path.to_str()?;
    let apply = format!(
        "plan: (plan ((builtins.fromJSON (builtins.readFile {})) // {{ variablesOnly = true; }})).variables or {{ }}",
        nix_string(ledger)
    );
    let (bytes, _) = evaluate_applied(source, &apply, inherit, redactor)
        .map_err(|_: EvalError| {
            // Not the error's text: it may quote a value not yet known to be secret.
            log::debug!("the plan's variable declarations could not be read alone");
        })
        .ok()?;
    sensitive_types(&serde_json::from_slice(&bytes).ok()?)
}

/// The sensitive names in IR `variables` (`{name: {sensitive?: bool, type?: ...}}`), with
/// their types.
fn sensitive_types(variables: &serde_json::Value) -> Option<BTreeMap<String, String>> {
    let mut names = BTreeMap::new();
    for (name, decl) in variables.as_object()? {
        match decl.as_object()?.get("sensitive") {
            Some(serde_json::Value::Bool(true)) => {
                let ty = decl.get("type").and_then(|t| t.as_str()).unwrap_or("any");
                names.insert(name.clone(), ty.to_string());
            }
            None | Some(serde_json::Value::Bool(false)) => {}
            Some(_) => return None,
        }
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_well_formed_declarations_say_what_is_sensitive() {
        let names = sensitive_types(&json!({
            "a": {"sensitive": true}, "b": {}, "c": {"sensitive": false},
            "d": {"sensitive": true, "type": "number"}
        }));
        assert_eq!(
            names,
            Some(BTreeMap::from([
                ("a".to_string(), "any".to_string()),
                ("d".to_string(), "number".to_string())
            ]))
        );
        assert_eq!(sensitive_types(&json!({"a": {"sensitive": "yes"}})), None);
        assert_eq!(sensitive_types(&json!({"a": 1})), None);
        assert_eq!(sensitive_types(&json!(null)), None);
    }
}
