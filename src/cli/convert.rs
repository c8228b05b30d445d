//! `nivis convert terraform DIR --out OUT`: the estate written as a flake (`crate::convert`),
//! its objects recorded in OUT's new state, and the proof: a plan that must show no changes.
//!
//! Owns: the command's order (refuse a state that records anything, record, list, prove), what
//! it prints, and reading provider schemas for a state-only conversion. Not: the conversion
//! itself (`crate::convert`), nor the plan (`run::run_engine`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Write;

use super::args::{ConvertTerraformArgs, InstallArgs, RunSpec, SourceArgs, VarArgs};
use super::{absolute, audit, backend, exit, fail, run};
use crate::convert::{Request, TypeRules};
use crate::provider::Provider;
use crate::render::{self, outln, Style};
use crate::secrets::Redactor;
use crate::state::{LockHolder, Mutation};

/// The grant of `convert terraform`, which writes a new state.
const CONVERT: Mutation = Mutation::for_state_verb("convert terraform");

pub(super) fn terraform(
    args: &ConvertTerraformArgs,
    style: Style,
    redactor: &Redactor,
    audit: &audit::AuditRecord,
) -> i32 {
    let out = absolute(&args.out);
    let install_args = install_args_of(args, &out);
    let install = match install_args.options() {
        Ok(i) => i,
        Err(e) => return fail(redactor, &e),
    };
    let request = request_of(args, &out);
    let schemas = RefCell::new(BTreeMap::new());
    let rules = |source: &str, version: Option<&str>, type_name: &str| {
        type_rules(&schemas, source, version, type_name, &install, &out)
    };
    let converted = match crate::convert::convert(&request, &rules) {
        Ok(c) => c,
        Err(e) => return fail(redactor, &e),
    };
    converted.state.teach_secrets(redactor);
    let failed_lookups = schemas.borrow();
    let lookups = failed_lookups.values().filter_map(|r| r.as_ref().err());
    print_notes(converted.notes.iter().chain(lookups), redactor);
    drop(failed_lookups);
    let source = SourceArgs {
        flake: out.display().to_string(),
        file: None,
        attr: None,
        // OUT is the flake this command just wrote, as this user.
        trust_group: false,
    };
    if let Err(e) = record(args, &source, converted.state, redactor, audit) {
        return fail(redactor, &e);
    }
    for c in &converted.carried {
        outln!(
            "  {} -> {}",
            render::escape(redactor, &c.terraform),
            render::escape(redactor, &c.nivis)
        );
    }
    outln!(
        "Wrote the flake in {}.",
        render::escape(redactor, &out.display().to_string())
    );
    if !converted.problems.is_empty() {
        outln!(
            "Not translated ({}), each a `throw \"convert: ...\"` at its place in the Nix:",
            converted.problems.len()
        );
        for p in &converted.problems {
            outln!("  {}", render::escape_text(redactor, p));
        }
        outln!(
            "Write these in Nix, then run `nivis plan` in {} to prove the conversion.",
            render::escape(redactor, &out.display().to_string())
        );
        return exit::ERROR;
    }
    if args.no_plan {
        return exit::OK;
    }
    let vars = sensitive_values(&converted.sensitive_vars, redactor);
    prove(
        args,
        &source,
        &vars,
        &install_args,
        (style, redactor),
        audit,
    )
}

/// How the providers of the converted flake are installed: as the flags say, locked in OUT.
fn install_args_of(args: &ConvertTerraformArgs, out: &std::path::Path) -> InstallArgs {
    InstallArgs {
        offline: args.offline,
        mirrors: args.mirrors.clone(),
        network_mirrors: Vec::new(),
        lock_file: out.join(".terraform.lock.hcl"),
        provider_cache: args.provider_cache.clone(),
    }
}

/// Prints the converter's notes (and the schema lookups that failed) on standard error.
fn print_notes<'a>(notes: impl Iterator<Item = &'a String>, redactor: &Redactor) {
    for note in notes {
        let _ = writeln!(
            std::io::stderr(),
            "Note: {}",
            render::escape_text(redactor, note)
        );
    }
}

/// The variable files' sensitive values, for the proof plan only: in memory, as if they were
/// `NIVIS_VAR_<name>` (never a command line, never an environment a child inherits). A value
/// the user's `NIVIS_VAR_<name>` gives wins.
fn sensitive_values(values: &[(String, String)], redactor: &Redactor) -> VarArgs {
    let given: Vec<String> = crate::guard::env_variables()
        .iter()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    let mut vars = VarArgs::default();
    for (name, value) in values {
        redactor.remember(value);
        if !given.contains(&format!("{}{name}", crate::guard::ENV_PREFIX)) {
            vars.in_memory.0.push((name.clone(), value.clone()));
        }
    }
    vars
}

/// What to convert, every path made absolute.
fn request_of(args: &ConvertTerraformArgs, out: &std::path::Path) -> Request {
    Request {
        dir: absolute(&args.dir),
        out: out.to_path_buf(),
        tfstate: args.tfstate.as_deref().map(absolute),
        lock_file: args.tf_lock_file.as_deref().map(absolute),
        nivis_src: args.nivis_src.clone(),
        var_files: args.tf_var_files.iter().map(|f| absolute(f)).collect(),
    }
}

/// Records the converted objects in OUT's state, which must record nothing yet.
fn record(
    args: &ConvertTerraformArgs,
    source: &SourceArgs,
    state: crate::state::StateFile,
    redactor: &Redactor,
    audit: &audit::AuditRecord,
) -> Result<(), String> {
    let backend = backend::of(source, &args.state, redactor)?;
    audit.begin(&backend, "nivis convert terraform");
    let mut store = backend
        .open(LockHolder::current("nivis convert terraform"), None)
        .map_err(|e| e.to_string())?;
    let current = store.state();
    if !current.is_empty() {
        let n = current.len();
        let _ = store.close();
        return Err(format!(
            "the state {} already records {n} resource(s): convert records an estate only in a \
             new state (give another --out, --state or --env)",
            backend.describe()
        ));
    }
    let n = state.len();
    store
        .replace(state, CONVERT)
        .and_then(|()| store.close())
        .map_err(|e| e.to_string())?;
    outln!(
        "Recorded {n} managed object(s) in {}:",
        render::escape(redactor, &backend.describe())
    );
    Ok(())
}

/// The proof: `nivis plan --detailed-exitcode` in OUT; 0 only when it shows no changes.
fn prove(
    args: &ConvertTerraformArgs,
    source: &SourceArgs,
    vars: &VarArgs,
    install: &InstallArgs,
    (style, redactor): (Style, &Redactor),
    audit: &audit::AuditRecord,
) -> i32 {
    outln!("Proving the conversion with `nivis plan`:");
    let spec = RunSpec {
        state: Some(&args.state),
        detailed_exitcode: true,
        ..RunSpec::new(source, vars, install)
    };
    match run::run_engine(&spec, style, redactor, run::Verb::Plan, audit) {
        exit::OK => {
            outln!("Adopted exactly: the plan shows no changes. Retire the Terraform state once you have checked the flake (see the book's \"Coming from Terraform or OpenTofu\").");
            exit::OK
        }
        exit::CHANGES => {
            outln!("Not adopted exactly: the plan above lists each difference by address and attribute. Adjust the Nix until `nivis plan` shows no changes.");
            exit::ERROR
        }
        other => other,
    }
}

/// A type's rules from its provider's schema (each provider started once); without a schema,
/// only `id` is left out, and the reason becomes a note.
fn type_rules(
    schemas: &RefCell<BTreeMap<String, Result<crate::schema::ProviderSchema, String>>>,
    source: &str,
    version: Option<&str>,
    type_name: &str,
    install: &crate::registry::InstallOptions,
    base: &std::path::Path,
) -> TypeRules {
    let mut cache = schemas.borrow_mut();
    let schema = cache.entry(source.to_string()).or_insert_with(|| {
        let path = crate::engine::locate(
            source,
            version.map(|v| format!("= {v}")).as_deref(),
            base,
            install,
        )
        .map_err(|e| format!("{source}: {e}"))?;
        let provider =
            crate::plugin::GrpcProvider::start(&crate::plugin::LaunchSpec::new(source, &path))
                .map_err(|e| format!("{source}: {e}"))?;
        Ok(provider.schema().clone())
    });
    let mut rules = TypeRules {
        computed_only: vec!["id".to_string()],
        sensitive: Vec::new(),
    };
    if let Some(s) = schema.as_ref().ok().and_then(|s| s.resource(type_name)) {
        for (name, a) in &s.block.attributes {
            if a.computed && !a.optional && !a.required {
                rules.computed_only.push(name.clone());
            }
            if a.sensitive {
                rules.sensitive.push(name.clone());
            }
        }
    }
    rules
}
