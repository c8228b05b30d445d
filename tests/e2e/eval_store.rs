//! Issue 27 case 10: a secret the plan's own code writes with `builtins.toFile` (a sensitive
//! variable, or a state secret fed back by the next phase) never reaches the shared
//! `/nix/store`: every evaluation writes into Nivis's private eval store
//! (`$XDG_CACHE_HOME/nivis/eval-store`, mode 0700), which is refused when someone else could
//! read or change it; and a `__build` output is still realised into the shared store.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::sandbox::*;
use crate::util::*;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

/// The files of the private eval store at `store` that hold `needle`.
fn store_files_holding(store: &Path, needle: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    walk(store, &mut files);
    files.retain(|f| std::fs::read(f).is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle)));
    files
}

/// A plan whose own code puts a sensitive variable (`token`, into B) and the state secret of A
/// (fed back in the next phase, into C) into `builtins.toFile`, passing on the file's path.
fn to_file_plan() -> String {
    let a = "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; config.label = \"a\"; })";
    let b = "(lib.mkResource { provider = \"beta\"; type = \"beta_record\"; name = \"B\"; \
             config.from = lib.compute vars.token (t: builtins.unsafeDiscardStringContext (builtins.toFile \"nv-var\" t)); })";
    let c = "(lib.mkResource { provider = \"beta\"; type = \"beta_record\"; name = \"C\"; \
             config.from = lib.compute (a.refAttr \"secret\") (pw: builtins.unsafeDiscardStringContext (builtins.toFile \"nv-state\" pw)); })";
    Sandbox::plan_let(
        &format!(
            "decls = {{ token = {{ type = \"string\"; sensitive = true; }}; }}; \
             vars = lib.vars ledger decls; a = {a}; b = {b}; c = {c};"
        ),
        "a b c",
        "variables = decls;",
    )
}

#[test]
fn a_secret_the_plan_writes_with_to_file_stays_in_the_private_eval_store() {
    let mut s = Sandbox::new();
    let value = unique_token("nvvar");
    Sandbox::write_flake(&s.proj, &to_file_plan());
    s.set_env("NIVIS_VAR_token", Some(&value));
    let plan = succeeded(&s.nivis(&["plan"]));
    assert!(plan.contains("beta.beta_record.B"), "{plan}");
    let applied = s.nivis(&["apply", "--auto-approve"]);
    succeeded(&applied);
    // Each file is warned about once in the run (every phase evaluates the plan again), by
    // its name: the hash is left out, the path itself being masked as made from a secret.
    let warned = stderr(&applied);
    for name in ["/nix/store/…-nv-var", "/nix/store/…-nv-state"] {
        let told = warned
            .lines()
            .filter(|l| l.contains(&format!("the store path {name},")))
            .count();
        assert_eq!(told, 1, "{name} in:\n{warned}");
    }
    // Evaluated again with the state's secret of A known (the fixpoint's second phase, and
    // this plan).
    let again = succeeded(&s.nivis(&["plan"]));
    assert!(again.contains("No changes"), "{again}");

    let store = s.path("cache/nivis/eval-store");
    assert_eq!(mode(&store), 0o700, "the private eval store's mode");
    // The plan's toFile ran: both secrets are in the private store, and only there.
    assert!(
        !store_files_holding(&store, &value).is_empty(),
        "the sensitive variable's toFile is not in {}",
        store.display()
    );
    assert!(
        !store_files_holding(&store, &s.secret).is_empty(),
        "the state secret's toFile is not in {}",
        store.display()
    );
    // Nothing in a new /nix/store path, any output or any other file (raw, base64, hex).
    s.hunt_all(&[&value, &s.secret.clone()], &[]);
}

#[test]
fn a_build_output_is_still_realised_into_the_shared_store() {
    let s = Sandbox::new();
    let tag = unique_token("nvbuild");
    let plan = Sandbox::plan_fn(
        &format!(
            "(lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"img\"; \
             config.label = lib.drv (derivation {{ name = \"{tag}\"; builder = \"/bin/sh\"; \
               args = [ \"-c\" \"echo {tag} > $out\" ]; system = builtins.currentSystem; }}); }})"
        ),
        "",
    );
    Sandbox::write_flake(&s.proj, &plan);
    succeeded(&s.nivis(&["apply", "--auto-approve"]));
    let state: serde_json::Value =
        serde_json::from_str(&succeeded(&s.nivis(&["output", "--json"]))).expect("output --json");
    let built = state["resources"]["alpha.alpha_token.img"]["label"]
        .as_str()
        .unwrap_or_else(|| panic!("{state}"))
        .to_string();
    assert!(built.starts_with("/nix/store/"), "{built}");
    assert_eq!(std::fs::read_to_string(&built).unwrap(), format!("{tag}\n"));
    // The derivation was written to the private store by the evaluation, then copied out.
    let drvs: Vec<_> = std::fs::read_dir(s.path("cache/nivis/eval-store/nix/store"))
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .ends_with(&format!("{tag}.drv"))
        })
        .collect();
    assert_eq!(drvs.len(), 1, "the .drv in the private eval store");
}

/// Runs `nivis plan` with the private eval store prepared by `prepare` (given its path) and
/// returns the refusal.
fn refused_with(prepare: impl Fn(&Path)) -> (String, PathBuf) {
    let s = Sandbox::new();
    Sandbox::write_flake(&s.proj, &Sandbox::plan_fn("", ""));
    let store = s.path("cache/nivis/eval-store");
    std::fs::create_dir_all(store.parent().unwrap()).unwrap();
    prepare(&store);
    let err = refused(&s.nivis(&["plan"]));
    (err, store)
}

#[test]
fn a_private_eval_store_others_can_enter_or_a_link_is_refused() {
    let (err, store) = refused_with(|store| {
        std::fs::create_dir(store).unwrap();
        std::fs::set_permissions(store, std::fs::Permissions::from_mode(0o777)).unwrap();
    });
    assert!(
        err.contains(&store.display().to_string()) && err.contains("mode 777"),
        "{err}"
    );
    assert!(err.contains("rm -rf"), "the fix: {err}");

    let (err, store) = refused_with(|store| {
        let elsewhere = store.with_file_name("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, store).unwrap();
    });
    assert!(
        err.contains(&store.display().to_string()) && err.contains("symbolic link"),
        "{err}"
    );

    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    if !root {
        not_run("a private eval store owned by another user needs root to chown");
        return;
    }
    let (err, store) = refused_with(|store| {
        std::fs::create_dir(store).unwrap();
        std::fs::set_permissions(store, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(store, Some(65534), Some(65534)).unwrap();
    });
    assert!(
        err.contains(&store.display().to_string()) && err.contains("owned by uid 65534"),
        "{err}"
    );
}

/// The private store starts empty, so each flake input must reach it: from the shared store,
/// never from a binary cache (an air-gapped machine has none; offline, each cache costs
/// retries, and an input only the shared store held used to fail the first evaluation).
#[test]
fn inputs_reach_the_private_store_without_asking_a_binary_cache() {
    let mut s = Sandbox::new();
    let dep = s.path("dep");
    std::fs::create_dir_all(&dep).unwrap();
    std::fs::write(
        dep.join("flake.nix"),
        "{ outputs = _: { label = \"from-the-input\"; }; }\n",
    )
    .unwrap();
    let plan = Sandbox::plan_fn(
        "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; \
         config.label = dep.label; })",
        "",
    );
    std::fs::create_dir_all(&s.proj).unwrap();
    std::fs::write(
        s.proj.join("flake.nix"),
        format!(
            "{{\n  inputs.dep.url = \"path:{}\";\n  outputs = {{ self, dep }}: let lib = import {}/nix; in {{\n    nivis.plan = {plan};\n  }};\n}}\n",
            dep.display(),
            repo().display()
        ),
    )
    .unwrap();
    // A binary cache nobody answers: asking it shows in Nix's warnings.
    s.set_env(
        "NIX_CONFIG",
        Some("substituters = http://127.0.0.1:9\nconnect-timeout = 1"),
    );
    let out = s.nivis(&["plan"]);
    let (plan_out, err) = (succeeded(&out), stderr(&out));
    assert!(plan_out.contains("alpha.alpha_token.A"), "{plan_out}");
    assert!(
        !err.contains("127.0.0.1:9"),
        "an evaluation asked a binary cache:\n{err}"
    );
}

/// A path literal the plan passes to a resource (`"${./data.txt}"`) is made in the private
/// store by the evaluation; providers look in /nix/store, so it is copied there (public text
/// only: a `toFile` of a secret stays private, see the test above).
#[test]
fn a_path_literal_the_plan_names_reaches_the_shared_store() {
    let s = Sandbox::new();
    let tag = unique_token("nvpath");
    std::fs::create_dir_all(&s.proj).unwrap();
    std::fs::write(s.proj.join("data.txt"), format!("{tag}\n")).unwrap();
    let plan = Sandbox::plan_fn(
        "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; \
         config.label = \"${./data.txt}\"; })",
        "",
    );
    Sandbox::write_flake(&s.proj, &plan);
    let out = succeeded(&s.nivis(&["plan", "--json"]));
    let named = out
        .split(|c: char| c == '"' || c.is_whitespace())
        .find(|w| w.starts_with("/nix/store/") && w.ends_with("-data.txt"))
        .unwrap_or_else(|| panic!("no store path of data.txt in the plan:\n{out}"))
        .to_string();
    assert_eq!(
        std::fs::read_to_string(&named).unwrap_or_default(),
        format!("{tag}\n"),
        "{named} is not in the shared store"
    );
}
