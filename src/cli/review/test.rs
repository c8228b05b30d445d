//! `nivis test`: the plan applied against a throwaway state with local provider binaries (the
//! in-repo fakes), to its fixpoint, checked against expected phases and outputs: the
//! infrastructure equivalent of a unit test.
//!
//! Owns: the throwaway state (in the run's private directory), refusing registry providers
//! (which would create real objects), the comparison with the expectations, and destroying
//! what the run created. Not: planning or applying (`engine`).

use serde_json::Value as Json;

use super::super::args::{InstallArgs, RunSpec, TestArgs};
use super::super::{exit, fail, options};
use crate::engine::{Collect, Engine, Options};
use crate::nixeval::PlanSource;
use crate::render::{self, outln};
use crate::secrets::Redactor;
use crate::state::{Backend, DEFAULT_ENV};

/// Runs `nivis test`.
pub(crate) fn test(args: &TestArgs, redactor: &Redactor) -> i32 {
    match run(args, redactor) {
        Ok(code) => code,
        Err(e) => fail(redactor, &e),
    }
}

/// What a test expects: the number of phases that applied something, and output values.
struct Expectations {
    phases: Option<u64>,
    outputs: serde_json::Map<String, Json>,
}

/// The expectations from `--expect FILE`, or from the flake's `test` beside the plan.
fn expectations(args: &TestArgs, source: &PlanSource) -> Result<Expectations, String> {
    if let Some(path) = &args.expect {
        let what = format!("--expect {}", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| format!("{what}: {e}"))?;
        let doc: Json =
            serde_json::from_str(&text).map_err(|e| format!("{what}: not JSON: {e}"))?;
        return parse_expectations(&doc, &what);
    }
    let PlanSource::Flake { flake, attr } = source else {
        return Err("a plan file has no expectations beside it: give --expect FILE".into());
    };
    let doc = crate::nixeval::plan_sibling(flake, attr, "test")
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "{flake}#{attr} has no `test` beside it: give --expect FILE, or declare the \
                 expectations as the attribute `test` next to the plan"
            )
        })?;
    parse_expectations(&doc, &format!("the expectations `test` beside {attr}"))
}

fn parse_expectations(doc: &Json, what: &str) -> Result<Expectations, String> {
    let phases = match &doc["phases"] {
        Json::Null => None,
        p => Some(
            p.as_u64()
                .ok_or_else(|| format!("{what}: `phases` must be a whole number"))?,
        ),
    };
    let outputs = match &doc["outputs"] {
        Json::Null => serde_json::Map::new(),
        Json::Object(m) => m.clone(),
        _ => {
            return Err(format!(
                "{what}: `outputs` must be an object ADDR -> {{ATTR: VALUE}}"
            ))
        }
    };
    Ok(Expectations { phases, outputs })
}

fn run(args: &TestArgs, redactor: &Redactor) -> Result<i32, String> {
    let install = InstallArgs::none();
    let mut opts = options(
        &RunSpec::new(&args.source, &args.vars, &install),
        "test",
        redactor,
        None,
    )?;
    let expected = expectations(args, &opts.source)?;
    let dir = crate::rundir::RunDir::create().map_err(|e| e.to_string())?;
    opts.backend = Backend::configure(
        None,
        &[],
        DEFAULT_ENV,
        &dir.path().join("test.state.json"),
        redactor,
    )
    .map_err(|e| e.to_string())?;
    opts.command = "nivis test".into();
    refuse_registry_providers(&opts)?;
    let mut sink = Collect::default();
    let applied = Engine::new(opts.clone(), &mut sink).apply(None);
    let state = opts.backend.read_only().map_err(|e| e.to_string());
    // Whatever happened, what was created goes.
    let destroyed = Engine::new(opts.clone(), &mut Collect::default()).destroy(None);
    let report = applied.map_err(|e| format!("the test's apply failed: {e}"))?;
    let state = state?;
    let mut failures = Vec::new();
    if let Some(want) = expected.phases {
        if u64::from(report.apply_phases) != want {
            failures.push(format!(
                "phases: expected {want}, applied in {}",
                report.apply_phases
            ));
        }
    }
    let mut checked = 0;
    for (id, attrs) in &expected.outputs {
        let Some(record) = state.get(id) else {
            failures.push(format!("{id}: not created"));
            continue;
        };
        for (attr, want) in attrs.as_object().into_iter().flatten() {
            checked += 1;
            let got = record.attributes.get(attr).unwrap_or(&Json::Null);
            let sensitive = (record.sensitive_paths.iter())
                .any(|p| p.get(0).and_then(Json::as_str) == Some(attr.as_str()));
            if got != want && sensitive {
                failures.push(format!("{id}.{attr}: not the expected (sensitive) value"));
            } else if got != want {
                failures.push(format!("{id}.{attr}: expected {want}, got {got}"));
            }
        }
    }
    if let Err(e) = destroyed {
        failures.push(format!("destroying what the test created failed: {e}"));
    }
    if failures.is_empty() {
        outln!(
            "Test passed: {} resource(s) applied in {} phase(s); {checked} expected output value(s) match.",
            report.changed.len(),
            report.apply_phases
        );
        return Ok(exit::OK);
    }
    outln!("Test failed:");
    for f in &failures {
        outln!("  {}", render::escape(redactor, f));
    }
    Ok(exit::ERROR)
}

/// A test starts the plan's providers for real: only local binaries (the fakes) may run.
fn refuse_registry_providers(opts: &Options) -> Result<(), String> {
    let ir = Engine::new(opts.clone(), &mut Collect::default())
        .declarations()
        .map_err(|e| e.to_string())?;
    for (id, decl) in &ir.providers {
        let local = decl.source.starts_with('/') || decl.source.starts_with('.');
        if !local && crate::registry::is_registry_address(&decl.source) {
            return Err(format!(
                "provider {id} comes from a registry ({}): nivis test applies for real, so it \
                 runs only plans whose providers are local binaries, such as Nivis's fakes",
                decl.source
            ));
        }
    }
    Ok(())
}
