//! The plan's evaluation with the resource-set probe folded in: one `nix eval` that prints the
//! IR and says whether the plan function declares another set of nodes once every node it
//! declares has an (empty) output entry (see `engine::announced`, DESIGN §83).
//!
//! Owns: the `--apply` expression that evaluates the plan function a second time inside the same
//! evaluation, taking the verdict off what Nix printed, and the fallback when the combined
//! evaluation fails. Not: what the verdict means for the plan (`engine::announced`), nor the
//! IR's meaning (`ir`).
//!
//! Nix prints `[ IR VERDICT ]`: the IR first (the very bytes the plain evaluation prints), then
//! `true` (the set differs, or the probe threw), `false`, or `null` (more nodes than
//! [`FOLDED_UP_TO`]: not probed here). The probe forces only the node ids
//! of the second evaluation; what does not depend on the ledger (the library, imports) is
//! evaluated once for both. `builtins.tryEval` catches `throw` and `assert` only: a probe that
//! fails otherwise (a type error in a branch only the probe takes) fails the whole evaluation,
//! which is then run again without the probe: its error, if it fails, is the plan's; if it
//! succeeds, the probe failed and the set counts as open, as a separate probe's failure did.

use std::os::fd::RawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{evaluate, evaluate_applied, EvalError, PlanSource};
use crate::nixsyntax::nix_string;
use crate::secrets::Redactor;

/// The IR of one evaluation and, in the same evaluation, the probe's verdict.
#[derive(Debug)]
pub struct Probed {
    /// The IR JSON bytes, exactly as the plain evaluation prints them.
    pub(crate) ir: Vec<u8>,
    /// The time Nix took (both evaluations when the combined one failed).
    pub(crate) took: Duration,
    /// Whether the resource set reads the ledger: the probe declared another set of nodes, or
    /// failed. `None`: not probed in this evaluation (more than [`FOLDED_UP_TO`] nodes, or an
    /// evaluator that cannot probe in the same evaluation: see `engine::Evaluator`).
    pub(crate) open: Option<bool>,
}

/// Evaluates the plan with the ledger at `ledger_path` (as [`evaluate`]) and probes, in the
/// same evaluation, whether its resource set depends on the ledger.
pub(crate) fn evaluate_probing(
    source: &PlanSource,
    ledger_path: &Path,
    inherit: Option<RawFd>,
    redactor: &Redactor,
) -> Result<Probed, EvalError> {
    let ledger = ledger_path.to_str().ok_or_else(|| EvalError {
        what: source.to_string(),
        message: format!("ledger path {} is not UTF-8", ledger_path.display()),
    })?;
    let started = Instant::now();
    let combined = evaluate_applied(source, &probing_apply(ledger), inherit, redactor);
    if let Ok((printed, took)) = combined {
        let (ir, open) = split_verdict(printed).map_err(|message| EvalError {
            what: source.to_string(),
            message,
        })?;
        return Ok(Probed { ir, took, open });
    }
    // Not the error's text: the plain evaluation's error, if any, is the one to show.
    log::debug!("the evaluation with the resource-set probe failed; evaluating without it");
    let (ir, _) = evaluate(source, ledger_path, inherit, redactor)?;
    Ok(Probed {
        ir,
        took: started.elapsed(),
        open: Some(true),
    })
}

/// The most declared nodes probed inside the plan's evaluation. Both evaluations of the plan
/// function are live in one evaluator at once: at 100k null resources its peak doubled (316 →
/// 635 MB), where two evaluations one after the other each peak at the first's. Above this
/// the engine probes in an evaluation of its own, as before (DESIGN §83).
pub(crate) const FOLDED_UP_TO: usize = 10_000;

/// The `--apply` expression: the plan function applied to the ledger read from `ledger` (a
/// path), and the probe's verdict. The probe ledger is the ledger for phase 1 with an empty
/// output entry for every declared node it does not hold; without such nodes nothing is probed.
fn probing_apply(ledger: &str) -> String {
    format!(
        "plan: let \
           ledger = builtins.fromJSON (builtins.readFile {}); \
           ir = plan ledger; \
           ids = i: map (n: n.id) (i.resources ++ (i.data or [ ])); \
           declared = ids ir; \
           held = ledger.outputs; \
           missing = builtins.filter (id: !(builtins.hasAttr id held)) declared; \
           named = l: builtins.listToAttrs (map (id: {{ name = id; value = {{ }}; }}) l); \
           probe = plan (ledger // {{ phase = 1; outputs = held // named missing; }}); \
           differs = builtins.attrNames (named (ids probe)) != builtins.attrNames (named declared); \
           tried = builtins.tryEval differs; \
         in [ ir (if builtins.length declared > {FOLDED_UP_TO} then null \
                  else missing != [ ] && (!tried.success || tried.value)) ]",
        nix_string(ledger)
    )
}

/// Takes `[IR,VERDICT]` apart: the IR's bytes as printed, without copying them when Nix printed
/// the list compactly (it does), else through a JSON parse. The verdict `null`: not probed.
fn split_verdict(mut printed: Vec<u8>) -> Result<(Vec<u8>, Option<bool>), String> {
    while printed.last().is_some_and(u8::is_ascii_whitespace) {
        printed.pop();
    }
    let tails = [
        (&b",true]"[..], Some(true)),
        (b",false]", Some(false)),
        (b",null]", None),
    ];
    for (tail, open) in tails {
        if printed.first() == Some(&b'[') && printed.ends_with(tail) {
            printed.truncate(printed.len() - tail.len());
            printed.drain(..1);
            return Ok((printed, open));
        }
    }
    let not_ours = || {
        "the evaluation with the resource-set probe printed something else than [IR, verdict]"
            .to_string()
    };
    let value: serde_json::Value = serde_json::from_slice(&printed).map_err(|_| not_ours())?;
    match value {
        serde_json::Value::Array(mut pair)
            if pair.len() == 2 && (pair[1].is_boolean() || pair[1].is_null()) =>
        {
            let open = pair[1].as_bool();
            let ir = serde_json::to_vec(&pair.swap_remove(0)).map_err(|_| not_ours())?;
            Ok((ir, open))
        }
        _ => Err(not_ours()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_comes_off_what_nix_printed() {
        let ir = br#"{"resources":[],"schemaVersion":1}"#;
        for (open, word) in [(Some(true), "true"), (Some(false), "false"), (None, "null")] {
            let mut printed = b"[".to_vec();
            printed.extend_from_slice(ir);
            printed.extend_from_slice(format!(",{word}]\n").as_bytes());
            assert_eq!(split_verdict(printed).unwrap(), (ir.to_vec(), open));
        }
        // Printed another way (spaced): taken apart through a parse.
        let spaced = br#"[ {"resources": [], "schemaVersion": 1}, true ]"#.to_vec();
        assert_eq!(split_verdict(spaced).unwrap(), (ir.to_vec(), Some(true)));
        for other in [&br#"{"resources":[]}"#[..], b"[1]", b"[{}, 1]", b"not json"] {
            assert!(split_verdict(other.to_vec()).is_err(), "{other:?}");
        }
    }
}
