//! `nivis convert terraform`: an OpenTofu/Terraform estate (configuration, state and lock
//! file) as a Nivis flake and a Nivis state that records every managed object exactly as
//! Terraform did (DESIGN §92).
//!
//! One concern per file: [`tfstate`] reads the state (format version 4 only), [`address`]
//! names everything the way `lib.count`/`lib.forEach` do, [`record`] builds the Nivis state,
//! [`parse_hcl`] and [`parse_json`] read `.tf` and `.tf.json` into the small model of
//! [`ast`], [`expr`] and [`functions`] translate expressions, [`code`] writes each module and
//! [`flake`] the flake around them. This module loads the estate and writes OUT's files.
//!
//! Not: writing the state into a backend or running the proof plan (the CLI's `convert`,
//! through `state::Backend` and the engine's plan). Never writes to the Terraform directory.

pub(crate) mod address;
pub(crate) mod ast;
pub(crate) mod backend;
pub(crate) mod code;
pub(crate) mod expr;
pub(crate) mod flake;
pub(crate) mod functions;
pub(crate) mod parse_hcl;
pub(crate) mod parse_json;
pub(crate) mod record;
pub(crate) mod tfstate;
pub(crate) mod tfvars;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use self::address::ProviderIds;
use self::code::{Loaded, Providers};
use self::record::Carried;
use self::tfstate::{ProviderRef, TfState};
use crate::state::StateFile;

/// What to convert and where to.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// The Terraform configuration directory.
    pub(crate) dir: PathBuf,
    /// The directory the flake is written to (new, or empty).
    pub(crate) out: PathBuf,
    /// The state file (default: DIR/terraform.tfstate).
    pub(crate) tfstate: Option<PathBuf>,
    /// The lock file (default: DIR/.terraform.lock.hcl).
    pub(crate) lock_file: Option<PathBuf>,
    /// The flake reference the written flake takes Nivis from.
    pub(crate) nivis_src: String,
    /// Variable files given as Terraform's `-var-file` (after DIR's own, later winning).
    pub(crate) var_files: Vec<PathBuf>,
}

/// The outcome: the state to record, what was carried, what could not be translated.
#[derive(Debug)]
pub(crate) struct Converted {
    /// The new Nivis state (fresh lineage).
    pub(crate) state: StateFile,
    /// Each managed object's Terraform address and Nivis id.
    pub(crate) carried: Vec<Carried>,
    /// What was written as a marked `throw` (each with its place).
    pub(crate) problems: Vec<String>,
    /// Remarks for the user (no configuration found, no lock file, ...).
    pub(crate) notes: Vec<String>,
    /// Sensitive variables' values from the variable files, as `NIVIS_VAR_<name>` text: kept
    /// out of the Nix, given to the proof plan only.
    pub(crate) sensitive_vars: Vec<(String, String)>,
}

/// What a provider's schema says about a resource type's attributes, for a state-only
/// conversion: those no configuration may set, and those that hold secrets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TypeRules {
    /// Computed-only attributes (and `id`): left out of the configuration.
    pub(crate) computed_only: Vec<String>,
    /// Sensitive attributes: never written into the Nix (it is copied into the store).
    pub(crate) sensitive: Vec<String>,
}

/// The rules of a resource type, asked by provider source, locked version and type; only a
/// state-only conversion asks.
pub(crate) type ComputedOnly<'a> = &'a dyn Fn(&str, Option<&str>, &str) -> TypeRules;

/// Reads the estate at `req.dir` and writes the flake in `req.out`; returns the state to
/// record. `computed` answers for the state-only case.
pub(crate) fn convert(req: &Request, computed: ComputedOnly<'_>) -> Result<Converted, String> {
    let state_path = req
        .tfstate
        .clone()
        .unwrap_or_else(|| req.dir.join("terraform.tfstate"));
    if !state_path.exists() {
        return Err(format!(
            "no Terraform state at {}: give --tfstate FILE (for a remote backend, \
             `terraform state pull > FILE` writes one)",
            state_path.display()
        ));
    }
    let tf = tfstate::read(&state_path)?;
    let mut notes = Vec::new();
    let loaded = load_modules(&req.dir)?;
    let state_only = loaded.is_empty();
    if state_only {
        notes.push(format!(
            "{} has no .tf or .tf.json files: main.nix holds each object's recorded \
             attributes as literals",
            req.dir.display()
        ));
    }
    let (assigned, sensitive_vars) = variable_files(req, &loaded, &mut notes)?;
    let backend = backend::carry(root_module(&loaded).and_then(|m| m.backend.as_ref()));
    notes.extend(backend.notes.iter().cloned());
    let mut problems: Vec<String> = Vec::new();
    for l in &loaded {
        for (at, what) in &l.module.unsupported {
            problems.push(format!("{at}: {what} (left out of the Nix)"));
        }
    }
    let state_sources: Vec<String> = tf
        .resources
        .iter()
        .map(|r| r.provider.source.clone())
        .collect();
    let mut refs: Vec<ProviderRef> = tf.resources.iter().map(|r| r.provider.clone()).collect();
    {
        let probe = Providers {
            ids: &ProviderIds::default(),
            state_sources: state_sources.clone(),
            versions: BTreeMap::new(),
        };
        for l in &loaded {
            for r in &l.module.resources {
                refs.push(probe.resource_ref(&l.module, r));
            }
            if l.key == "root" {
                for p in &l.module.providers {
                    refs.push(probe.named_ref(&l.module, &p.name, p.alias.clone()));
                }
            }
        }
    }
    let ids = ProviderIds::new(&refs);
    // Everything that can refuse the estate does so before OUT is written.
    let (state, carried) = record::build(&tf, &ids)?;
    prepare_out(&req.out)?;
    let versions = lock_versions(req, &mut notes)?;
    let providers = Providers {
        ids: &ids,
        state_sources,
        versions,
    };
    let files = Files {
        loaded: &loaded,
        assigned: &assigned,
        backend_comment: &backend.comment,
    };
    write_files(req, &tf, &files, &providers, computed, &mut problems)?;
    Ok(Converted {
        state,
        carried,
        problems,
        notes,
        sensitive_vars,
    })
}

/// The root module (none: a state-only conversion).
fn root_module(loaded: &[Loaded]) -> Option<&ast::Module> {
    loaded.iter().find(|l| l.key == "root").map(|l| &l.module)
}

/// The variable files' values (none for a state-only conversion) and, apart, the sensitive
/// variables' among them.
type Assignments = (BTreeMap<String, tfvars::Assigned>, Vec<(String, String)>);

fn variable_files(
    req: &Request,
    loaded: &[Loaded],
    notes: &mut Vec<String>,
) -> Result<Assignments, String> {
    let Some(root) = root_module(loaded) else {
        return Ok((BTreeMap::new(), Vec::new()));
    };
    let assigned = tfvars::read(&req.dir, &req.var_files)?;
    let sensitive = sensitive_values(&root.variables, &assigned, notes);
    Ok((assigned, sensitive))
}

/// The variable files' values of sensitive variables as `NIVIS_VAR_<name>` text (a string as it is, a
/// number or bool as written); notes for those that cannot be passed so and for values of
/// undeclared variables (Terraform warns about those, and ignores them).
fn sensitive_values(
    vars: &[ast::Variable],
    assigned: &BTreeMap<String, tfvars::Assigned>,
    notes: &mut Vec<String>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, a) in assigned {
        let Some(v) = vars.iter().find(|v| &v.name == name) else {
            notes.push(format!(
                "{} sets {name}, which the configuration does not declare: ignored",
                a.from
            ));
            continue;
        };
        if !v.sensitive {
            continue;
        }
        let text = match &a.value {
            hcl::Expression::String(s) => Some(s.clone()),
            hcl::Expression::Number(n) => Some(n.to_string()),
            hcl::Expression::Bool(b) => Some(b.to_string()),
            _ => None,
        };
        notes.push(format!(
            "the sensitive variable {name} (set in {}) is not written into the Nix, which Nix \
             copies into the store: give it to `nivis plan` as NIVIS_VAR_{name} or in a \
             --var-file outside the flake",
            a.from
        ));
        match text {
            Some(t) => out.push((name.clone(), t)),
            None => notes.push(format!(
                "the proof plan has no value for {name}: only a string, number or bool \
                 sensitive value is passed on"
            )),
        }
    }
    out
}

/// Refuses an OUT that holds files already (convert never overwrites).
fn prepare_out(out: &Path) -> Result<(), String> {
    if out.exists() {
        let mut entries = std::fs::read_dir(out)
            .map_err(|e| format!("cannot read --out {}: {e}", out.display()))?;
        if entries.next().is_some() {
            return Err(format!(
                "--out {} is not empty: convert writes a new flake, never over existing files",
                out.display()
            ));
        }
    }
    std::fs::create_dir_all(out.join("modules"))
        .map_err(|e| format!("cannot create {}: {e}", out.display()))
}

/// The locked versions by source, and the lock file copied into OUT (where `nivis plan`
/// reads it, verifying the same hashes Terraform recorded).
fn lock_versions(
    req: &Request,
    notes: &mut Vec<String>,
) -> Result<BTreeMap<String, String>, String> {
    let path = req
        .lock_file
        .clone()
        .unwrap_or_else(|| req.dir.join(".terraform.lock.hcl"));
    if !path.exists() {
        if req.lock_file.is_some() {
            return Err(format!("no lock file at {}", path.display()));
        }
        notes.push(format!(
            "no lock file at {}: the providers are declared without versions; run \
             `nivis providers lock` in the new project",
            path.display()
        ));
        return Ok(BTreeMap::new());
    }
    let lock = crate::registry::LockFile::read(&path).map_err(|e| e.to_string())?;
    let text = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let target = req.out.join(".terraform.lock.hcl");
    std::fs::write(&target, text).map_err(|e| format!("cannot write {}: {e}", target.display()))?;
    Ok(lock
        .providers
        .iter()
        .map(|(addr, locked)| (addr.to_string(), locked.version.to_string()))
        .collect())
}

/// The `.tf` and `.tf.json` files of `dir`, sorted by name.
fn config_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    files_ending(dir, &[".tf", ".tf.json"])
}

/// The files of `dir` whose names end with one of `endings`, sorted by name.
fn files_ending(dir: &Path, endings: &[&str]) -> Result<Vec<PathBuf>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            endings.iter().any(|end| name.ends_with(end)) && p.is_file()
        })
        .collect();
    files.sort();
    Ok(files)
}

fn parse_dir(dir: &Path) -> Result<Option<ast::Module>, String> {
    let files = config_files(dir)?;
    if files.is_empty() {
        return Ok(None);
    }
    let mut module = ast::Module::default();
    for f in files {
        let text =
            std::fs::read_to_string(&f).map_err(|e| format!("cannot read {}: {e}", f.display()))?;
        let name = f.display().to_string();
        if name.ends_with(".tf.json") {
            parse_json::add_file(&mut module, &name, &text)?;
        } else {
            parse_hcl::add_file(&mut module, &name, &text)?;
        }
    }
    Ok(Some(module))
}

/// The root module and every local module it calls (empty: no configuration at all).
fn load_modules(dir: &Path) -> Result<Vec<Loaded>, String> {
    let Some(root) = parse_dir(dir)? else {
        return Ok(Vec::new());
    };
    let mut loaded = Vec::new();
    let mut keys_by_dir: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut queue = vec![("root".to_string(), dir.to_path_buf(), root)];
    while let Some((key, at, module)) = queue.pop() {
        let mut calls = BTreeMap::new();
        for call in &module.calls {
            let local = call.source.starts_with("./") || call.source.starts_with("../");
            if !local {
                calls.insert(call.name.clone(), None);
                continue;
            }
            let target = normalize(&at.join(&call.source));
            let callee_key = match keys_by_dir.get(&target) {
                Some(k) => k.clone(),
                None => {
                    let k = module_key(dir, &target, keys_by_dir.len());
                    keys_by_dir.insert(target.clone(), k.clone());
                    let parsed = parse_dir(&target)?.ok_or_else(|| {
                        format!(
                            "module {} calls {}, which has no .tf or .tf.json files",
                            call.name,
                            target.display()
                        )
                    })?;
                    queue.push((k.clone(), target.clone(), parsed));
                    k
                }
            };
            calls.insert(call.name.clone(), Some(callee_key));
        }
        loaded.push(Loaded { key, module, calls });
        if loaded.len() > 1000 {
            return Err("more than 1000 local modules: is a module calling itself?".into());
        }
    }
    Ok(loaded)
}

fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// A file name for a module directory: its path below the root, letters and digits kept.
fn module_key(root: &Path, target: &Path, n: usize) -> String {
    let rel = target.strip_prefix(root).unwrap_or(target);
    let mut key: String = rel
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    key = key.trim_matches('_').to_string();
    if key.is_empty() || key == "root" || !key.starts_with(|c: char| c.is_ascii_alphabetic()) {
        key = format!("module{n}_{key}");
    }
    key
}

/// What the written files are made of, besides the state.
struct Files<'a> {
    loaded: &'a [Loaded],
    assigned: &'a BTreeMap<String, tfvars::Assigned>,
    backend_comment: &'a [String],
}

fn write_files(
    req: &Request,
    tf: &TfState,
    files: &Files<'_>,
    providers: &Providers<'_>,
    computed: ComputedOnly<'_>,
    problems: &mut Vec<String>,
) -> Result<(), String> {
    let (loaded, assigned) = (files.loaded, files.assigned);
    let write = |name: &str, text: &str| {
        let path = req.out.join(name);
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    write("tf.nix", flake::TF_NIX)?;
    let all: BTreeMap<String, &Loaded> = loaded.iter().map(|l| (l.key.clone(), l)).collect();
    let mut module_keys = Vec::new();
    let mut variables = String::from("{ }");
    if loaded.is_empty() {
        write(
            "main.nix",
            &code::state_only_file(tf, providers, computed, problems),
        )?;
    }
    for l in loaded {
        let text = code::module_file(l, &all, providers, problems);
        if l.key == "root" {
            write("main.nix", &text)?;
            variables = flake::variables(&l.module.variables, assigned, problems);
        } else {
            write(&format!("modules/{}.nix", l.key), &text)?;
            module_keys.push(l.key.clone());
        }
    }
    module_keys.sort();
    write(
        "flake.nix",
        &flake::flake_nix(
            &req.nivis_src,
            &variables,
            &module_keys,
            files.backend_comment,
        ),
    )?;
    Ok(())
}
