//! `nivis console`: a Nix REPL with the plan loaded, to try expressions against real outputs.
//!
//! Owns: the REPL's file — the plan function, the ledger built from the state, the plan's IR
//! (`plan ledger`, evaluated lazily) and the flake's Nivis library — written into a private run
//! directory, and running `nix repl` on it. Secrets stay out: sensitive outputs are the
//! ledger's placeholders and no channel of secrets is written (a plan needing a sensitive
//! variable cannot evaluate `plan` here). Not: evaluating anything itself.

use std::process::Command;

use super::args::{ConsoleArgs, InstallArgs, RunSpec, VarArgs};
use super::{exit, fail, options};
use crate::ledger::Ledger;
use crate::nixsyntax::nix_string;
use crate::render::outln;
use crate::secrets::Redactor;

/// Runs `nivis console`; returns `nix repl`'s exit status.
pub(super) fn run(args: &ConsoleArgs, redactor: &Redactor) -> i32 {
    match start(args, redactor) {
        Ok(code) => code,
        Err(e) => fail(redactor, &e),
    }
}

fn start(args: &ConsoleArgs, redactor: &Redactor) -> Result<i32, String> {
    let (install, vars) = (InstallArgs::none(), VarArgs::default());
    let spec = RunSpec {
        state: Some(&args.state),
        ..RunSpec::new(&args.source, &vars, &install)
    };
    let opts = options(&spec, "console", redactor)?;
    let state = opts.backend.read_only().map_err(|e| e.to_string())?;
    let mut ledger = Ledger::default();
    ledger.env = Some(opts.backend.env().to_string());
    for r in state.iter() {
        ledger.set(&r.id, &r.attributes, &r.sensitive_paths);
    }
    let dir = crate::rundir::RunDir::create().map_err(|e| e.to_string())?;
    let ledger_path = dir
        .write("ledger.json", ledger.to_json().to_string().as_bytes())
        .map_err(|e| format!("cannot write the ledger: {e}"))?;
    let (plan, lib) = crate::nixeval::console_exprs(&opts.source);
    let text = format!(
        "# nivis console: the plan {}\nlet\n  ledger = builtins.fromJSON (builtins.readFile {});\n  \
         planFunction = {plan};\nin {{\n  inherit ledger planFunction;\n  outputs = ledger.outputs;\n  \
         plan = planFunction ledger;\n  lib = {lib};\n}}\n",
        opts.source,
        nix_string(&ledger_path.display().to_string()),
    );
    let file = dir
        .write("console.nix", text.as_bytes())
        .map_err(|e| format!("cannot write the console's file: {e}"))?;
    outln!("Loaded: outputs, ledger, plan (the IR), planFunction, lib. Sensitive outputs are placeholders. :q quits.");
    let mut cmd = Command::new(std::env::var_os("NIVIS_NIX").unwrap_or_else(|| "nix".into()));
    // The file's path is under the run directory's descriptor (`/proc/self/fd/N/…`).
    crate::nixeval::keep_open_in_child(&mut cmd, dir.inherit_fd());
    let status = cmd
        .args([
            "--extra-experimental-features",
            "nix-command flakes",
            "repl",
            "--impure",
        ])
        .arg(&file)
        .status()
        .map_err(|e| format!("cannot run nix repl: {e}; is Nix installed and on PATH?"))?;
    drop(dir);
    Ok(status.code().unwrap_or(exit::ERROR))
}
