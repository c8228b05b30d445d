//! Where the plan's nodes and attributes were written, for `nivis why`.
//!
//! Owns: the evaluation that asks the Nix library for positions instead of the IR (the
//! ledger's `positions = true`, added by the `--apply` expression, so the ledger file stays the
//! contract's), and pointing the file names at the user's files. Not: what `why` makes of
//! them.

use std::os::fd::RawFd;
use std::path::Path;

use super::{evaluate_applied, EvalError, PlanSource};
use crate::nixsyntax::nix_string;
use crate::secrets::Redactor;

/// Per node id, `{definition, attributes}` with `{file, line, column}` positions (files of a
/// flake's store copy pointed back at the project's own files); `null` when the plan's Nivis
/// library does not give positions (older than `nivis why`).
pub(crate) fn positions(
    source: &PlanSource,
    ledger_path: &Path,
    inherit: Option<RawFd>,
    redactor: &Redactor,
) -> Result<serde_json::Value, EvalError> {
    let ledger = ledger_path.to_str().ok_or_else(|| EvalError {
        what: source.to_string(),
        message: format!("ledger path {} is not UTF-8", ledger_path.display()),
    })?;
    let apply = format!(
        "plan: (plan ((builtins.fromJSON (builtins.readFile {})) // {{ positions = true; }})).positions or null",
        nix_string(ledger)
    );
    let (bytes, _) = evaluate_applied(source, &apply, inherit, redactor)?;
    let mut value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| EvalError {
        what: source.to_string(),
        message: format!("the positions Nix returned are not JSON: {e}"),
    })?;
    point_at_project(&mut value, source);
    Ok(value)
}

/// Rewrites every `file` that names a flake's store copy to the project's own file.
fn point_at_project(value: &mut serde_json::Value, source: &PlanSource) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                match v {
                    serde_json::Value::String(file) if k == "file" => {
                        *file = source.located(file);
                    }
                    other => point_at_project(other, source),
                }
            }
        }
        serde_json::Value::Array(items) => {
            items.iter_mut().for_each(|v| point_at_project(v, source));
        }
        _ => {}
    }
}
