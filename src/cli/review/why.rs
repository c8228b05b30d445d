//! `nivis why ADDR[.ATTR]`: where a resource or attribute value comes from, printed.
//!
//! Owns: the evaluation of the plan and of its positions against the state's outputs (the
//! ledger written, with its channel, into a private run directory that goes when done), and
//! the text. Not: the provenance itself (`review::why`).

use serde_json::Value as Json;

use super::super::args::WhyArgs;
use super::super::{exit, fail};
use super::{evaluate, review_setup, show_ir_value};
use crate::engine::Options;
use crate::ledger::Ledger;
use crate::render::{self, outln};
use crate::review::diff::Shown;
use crate::review::why::{explain, target, Origin, Why};
use crate::secrets::Redactor;
use crate::state::StateFile;

/// Runs `nivis why`.
pub(crate) fn why(args: &WhyArgs, redactor: &Redactor) -> i32 {
    match run(args, redactor) {
        Ok(code) => code,
        Err(e) => fail(redactor, &e),
    }
}

fn run(args: &WhyArgs, redactor: &Redactor) -> Result<i32, String> {
    let (mut opts, state) = review_setup(&args.project, "why", redactor)?;
    let ir = evaluate(&opts, &state)?;
    // The positions' evaluation takes the same placeholders the engine gave (DESIGN §93).
    for (name, decl) in ir.variables.iter().filter(|(_, d)| d.sensitive) {
        if !opts.vars.contains_key(name) && !opts.var_text.contains_key(name) {
            let ty = decl.ty.as_deref().unwrap_or("any");
            opts.vars
                .insert(name.clone(), crate::engine::placeholder(ty));
        }
    }
    let target = target(&ir, &args.address).map_err(|e| e.to_string())?;
    let ledger = ledger_of(&opts, &state);
    let positions = positions_of(&opts, &ledger, redactor)?;
    let why = explain(&ir, target, &ledger.outputs, &positions);
    if args.json {
        outln!("{}", render::json_text(redactor, &why.to_json(), true));
    } else {
        print_why(&why, &args.address, positions.is_null(), redactor);
    }
    Ok(exit::OK)
}

/// The ledger `apply` would evaluate with first: the state's outputs (sensitive ones as
/// placeholders, their values in the channel), the variables and the environment.
fn ledger_of(opts: &Options, state: &StateFile) -> Ledger {
    let mut ledger = Ledger::default();
    ledger.vars = opts.vars.clone();
    ledger.vars_text = opts.var_text.clone();
    ledger.env = Some(opts.backend.env().to_string());
    ledger.remote_states = opts.remote_states.clone();
    for r in state.iter() {
        ledger.set(&r.id, &r.attributes, &r.sensitive_paths);
    }
    ledger
}

/// The Nix library's positions of the plan's nodes and attributes (`null` if it gives none).
fn positions_of(opts: &Options, ledger: &Ledger, redactor: &Redactor) -> Result<Json, String> {
    let dir = crate::rundir::RunDir::create().map_err(|e| e.to_string())?;
    let path = ledger
        .write(&dir)
        .map_err(|e| format!("cannot write the ledger in {}: {e}", dir.path().display()))?;
    let positions =
        crate::nixeval::positions(&opts.source, &path, Some(dir.inherit_fd()), redactor);
    dir.remove(crate::ledger::CHANNEL_FILE);
    positions.map_err(|e| e.to_string())
}

/// `file:line` of a position, relative to the working directory when under it.
fn place(position: &Option<Json>, redactor: &Redactor) -> String {
    let Some(p) = position else {
        return "(position unknown)".into();
    };
    let file = p["file"].as_str().unwrap_or("?");
    let cwd = std::env::current_dir().unwrap_or_default();
    let file = std::path::Path::new(file)
        .strip_prefix(&cwd)
        .map(|rel| rel.display().to_string())
        .unwrap_or_else(|_| file.to_string());
    render::escape(redactor, &format!("{file}:{}", p["line"]))
}

fn shown(s: &Shown, redactor: &Redactor) -> String {
    match s {
        Shown::Absent => "(not recorded yet)".into(),
        Shown::Sensitive => "(sensitive value)".into(),
        Shown::Value(v) => show_ir_value(v, redactor),
    }
}

fn print_why(why: &Why, address: &str, no_positions: bool, redactor: &Redactor) {
    outln!(
        "{} = {}",
        render::escape(redactor, address),
        shown(&why.value, redactor)
    );
    if why.target.attr.is_empty() {
        outln!("  defined at {}", place(&why.node_defined_at, redactor));
    } else {
        outln!(
            "  defined at {} (the resource at {})",
            place(&why.defined_at, redactor),
            place(&why.node_defined_at, redactor)
        );
    }
    if why.origins.is_empty() {
        outln!("  computed from no other resource's outputs: a value written in Nix");
    } else {
        outln!("  computed from:");
        for o in &why.origins {
            print_origin(o, 2, redactor);
        }
    }
    if why.readers.is_empty() {
        outln!("  read by no other resource");
    } else {
        outln!("  read by:");
        for r in &why.readers {
            let reads = match r.reads.as_slice() {
                [] => String::new(),
                reads => format!(", reads {}", reads.join(", ")),
            };
            outln!(
                "    {} ({} at {}{}) defined at {}",
                render::escape(redactor, &r.address),
                r.via.name(),
                render::escape(redactor, &r.at),
                render::escape(redactor, &reads),
                place(&r.defined_at, redactor)
            );
        }
    }
    if no_positions {
        outln!("The plan's Nivis library gives no positions (it is older than `nivis why`): update the nivis input.");
    }
}

fn print_origin(o: &Origin, depth: usize, redactor: &Redactor) {
    let indent = "  ".repeat(depth);
    let head = format!(
        "({} at {}) defined at {}",
        o.via.name(),
        render::escape(redactor, &o.at),
        place(&o.defined_at, redactor)
    );
    if o.outputs.is_empty() {
        outln!("{indent}{} {head}", render::escape(redactor, &o.address));
    }
    for (output, value) in &o.outputs {
        outln!(
            "{indent}{} = {} {head}",
            render::escape(redactor, &format!("{}.{output}", o.address)),
            shown(value, redactor)
        );
    }
    for inner in &o.origins {
        print_origin(inner, depth + 1, redactor);
    }
}
