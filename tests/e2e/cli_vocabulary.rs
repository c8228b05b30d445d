//! Issue 48's command-line vocabulary, through the CLI: `plan` under the state lock,
//! `apply --refresh-only`, `state replace-provider`, `nivis fmt`, bare `nivis show`, the hints
//! for Terraform's `init` and `workspace`, `--show-trace`, and the audit's smaller findings
//! (graph edges after apply, console colours, moves between two configurations of a provider,
//! a provider built by Nix).

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::util::*;

/// Three tokens; c references a.
const TOKENS: &str = "ledger: let
  t = n: lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = n; config.label = n; };
  a = t \"a\";
  c = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"c\"; config.label = a.refAttr \"id\"; };
in lib.toIR {
  providers.alpha = lib.mkProvider { source = \"provider-alpha\"; };
  resources = [ a c (t \"b\") ];
  inherit ledger;
}";

fn nivis(p: &Project, args: &[&str]) -> Output {
    let mut cmd = Command::new(nivis_bin());
    cmd.args(args)
        .current_dir(p.dir.path())
        .env("NO_COLOR", "1")
        .envs(p.env.iter().map(|(k, v)| (k, v)));
    cmd.output().expect("run nivis")
}

#[test]
fn plan_is_refused_naming_the_holder_while_an_apply_holds_the_lock() {
    let p = Project::new(TOKENS);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    p.set_plan(&TOKENS.replace("(t \"b\")", "(t \"b\") (t \"d\")"));
    let p = p.env("NIVIS_FAKE_SLOW_MS", "6000");
    let mut apply = p.spawn_apply(&[]);
    p.wait_for_lock();
    let err = refused(&p.run(&["plan"], &[]));
    assert!(err.contains(&format!("pid {}", apply.id())), "{err}");
    assert!(
        err.contains("nivis apply"),
        "names the holder's command: {err}"
    );
    assert!(
        err.contains("--lock=false"),
        "says how to plan anyway: {err}"
    );
    // Without the lock the plan reads the state as it is (the new token still to create).
    let out = succeeded(&p.run(&["plan"], &["--lock=false"]));
    assert!(out.contains("alpha.alpha_token.d"), "{out}");
    // With a wait long enough, the plan runs once the apply is done, against its result.
    let out = succeeded(&p.run(&["plan"], &["--lock-timeout", "60s"]));
    assert!(out.contains("No changes"), "{out}");
    assert!(apply.wait().unwrap().success());
}

#[test]
fn a_plan_of_a_project_never_applied_creates_no_file_beside_the_state() {
    let p = Project::new(TOKENS);
    succeeded(&p.run(&["plan"], &[]));
    let lock = p.state.with_extension("json.lock");
    assert!(!lock.exists(), "{} was created", lock.display());
}

#[test]
fn apply_refresh_only_records_drift_and_changes_nothing_else() {
    let p = Project::new(TOKENS);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    p.set_plan(&TOKENS.replace("(t \"b\")", "(t \"b\") (t \"d\")"));
    let p = p.env("NIVIS_FAKE_DRIFT_ON", "b");
    let before = p.state_json()["resources"]["alpha.alpha_token.b"]["attributes"]["value"].clone();
    // No terminal to ask on: refused before anything is recorded.
    let err = refused(&p.run(&["apply"], &["--refresh-only"]));
    assert!(err.contains("--auto-approve"), "{err}");
    let out = succeeded(&p.run(&["apply"], &["--refresh-only", "--auto-approve"]));
    assert!(
        out.contains("alpha.alpha_token.b"),
        "the drift is shown: {out}"
    );
    let state = p.state_json();
    assert_ne!(before, "changed-outside");
    assert_eq!(
        state["resources"]["alpha.alpha_token.b"]["attributes"]["value"], "changed-outside",
        "the drift is recorded"
    );
    assert!(
        state["resources"].get("alpha.alpha_token.d").is_none(),
        "the new resource is not created: {state}"
    );
    let err = refused(&p.run(
        &["apply"],
        &["--refresh-only", "--replace", "alpha.alpha_token.a"],
    ));
    assert!(err.contains("cannot be used with"), "{err}");
}

#[test]
fn state_replace_provider_changes_the_recorded_source_only() {
    let p = Project::new(TOKENS);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let before = p.state_json();
    let err = refused(&p.state_cmd(&["state", "replace-provider", "nope", "x/y"]));
    assert!(
        err.contains("the recorded sources: provider-alpha"),
        "names what is recorded: {err}"
    );
    let err = refused(&p.state_cmd(&["state", "replace-provider", "provider-alpha", "x/alpha"]));
    assert!(err.contains("--auto-approve"), "{err}");
    let out = succeeded(&p.state_cmd(&[
        "state",
        "replace-provider",
        "provider-alpha",
        "example.org/acme/alpha",
        "--auto-approve",
    ]));
    assert!(out.contains("3 resource(s)"), "{out}");
    let after = p.state_json();
    for (id, r) in after["resources"].as_object().unwrap() {
        assert_eq!(r["providerSource"], "example.org/acme/alpha", "{id}");
        let mut was = before["resources"][id].clone();
        was["providerSource"] = r["providerSource"].clone();
        assert_eq!(&was, r, "{id}: only the source changed");
    }
    let log = succeeded(&p.state_cmd(&["log", "--json"]));
    assert!(log.contains("state replace-provider"), "audited: {log}");
}

#[test]
fn fmt_check_fails_on_unformatted_files_and_fmt_keeps_the_value() {
    let p = Project::new(TOKENS);
    let before = p.eval_ir_with(&serde_json::json!({}));
    let plan = p.plan.to_str().unwrap();
    let out = nivis(&p, &["fmt", "--check", plan]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("plan.nix"), "{}", stdout(&out));
    let text = std::fs::read_to_string(&p.plan).unwrap();
    succeeded(&nivis(&p, &["fmt"]));
    let formatted = std::fs::read_to_string(&p.plan).unwrap();
    assert_ne!(text, formatted);
    assert_eq!(
        p.eval_ir_with(&serde_json::json!({})),
        before,
        "formatting changed the plan's value"
    );
    assert_success(&nivis(&p, &["fmt", "--check"]));
    // Standard input to standard output.
    let mut child = Command::new(nivis_bin())
        .args(["fmt", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(stdout(&out), formatted);
    // A syntax error names the file, and the file stays as it was.
    std::fs::write(p.dir.path().join("broken.nix"), "{ a = ; }").unwrap();
    let err = refused(&nivis(&p, &["fmt"]));
    assert!(err.contains("broken.nix: cannot format"), "{err}");
}

#[test]
fn bare_show_prints_the_state_and_terraform_verbs_get_hints() {
    let p = Project::new(TOKENS);
    let out = succeeded(&p.state_cmd(&["show", "--file", p.plan.to_str().unwrap()]));
    assert!(out.starts_with("No state"), "{out}");
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let out = succeeded(&p.state_cmd(&["show", "--file", p.plan.to_str().unwrap()]));
    for id in [
        "alpha.alpha_token.a",
        "alpha.alpha_token.b",
        "alpha.alpha_token.c",
    ] {
        assert!(out.contains(&format!("{id} (alpha_token)")), "{out}");
    }
    assert!(out.contains("label = b"), "{out}");
    let out = succeeded(&p.state_cmd(&["show", "--json", "--file", p.plan.to_str().unwrap()]));
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["resources"].as_array().unwrap().len(), 3, "{doc}");
    for (verb, hint) in [
        ("init", "nivis providers lock"),
        ("workspace", "--env NAME"),
    ] {
        let err = refused(&nivis(&p, &[verb]));
        assert!(err.contains(hint), "{verb}: {err}");
        assert!(!err.contains("unrecognized subcommand"), "{verb}: {err}");
    }
}

#[test]
fn show_trace_is_passed_to_nix() {
    let p = Project::new(
        "ledger: let f = x: builtins.throw \"boom\"; in lib.toIR { providers = {}; resources = [ (f 1) ]; inherit ledger; }",
    );
    let err = refused(&p.run(&["plan"], &[]));
    assert!(err.contains("boom"), "{err}");
    let traced = refused(&p.run(&["plan"], &["--show-trace"]));
    assert!(traced.contains("boom"), "{traced}");
    assert!(
        !traced.contains("use '--show-trace'") && traced.len() > err.len(),
        "no trace:\n{traced}\nwithout the flag:\n{err}"
    );
}

#[test]
fn graph_keeps_its_edges_after_apply() {
    let p = Project::new(TOKENS);
    let edges = |p: &Project| {
        let out = succeeded(&p.run(&["graph"], &["--json"]));
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["edges"].clone()
    };
    let before = edges(&p);
    assert_eq!(
        before,
        serde_json::json!([{"from": "alpha.alpha_token.c", "to": "alpha.alpha_token.a", "kind": "reference"}])
    );
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert_eq!(edges(&p), before);
}

/// F8: the summary counted fewer phases than the headings printed, and deferred rows showed
/// inside phase 1's progress. Checked again after the streaming fixpoint (DESIGN §89), where a
/// wave joins phase 1 while a slow create still runs: the count follows the headings.
#[test]
fn the_summary_counts_the_phases_its_headings_name() {
    let p = Project::new(
        "ledger: let
  a = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"a\"; config.label = \"x\"; };
  s = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"s\"; config.label = \"slow\"; };
  b = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"b\"; config.label = lib.str [ \"from-\" (a.refAttr \"value\") ]; };
in lib.toIR { providers.alpha = lib.mkProvider { source = \"provider-alpha\"; }; resources = [ a s b ]; inherit ledger; }",
    )
    .env("NIVIS_FAKE_LATENCY_MS", "slow=1500");
    let out = succeeded(&p.run(&["apply"], &["--auto-approve"]));
    let headings = out.lines().filter(|l| l.starts_with("Phase ")).count();
    assert_eq!(headings, 2, "{out}");
    assert!(
        out.contains("while other operations run"),
        "b's wave joined phase 1: {out}"
    );
    assert!(
        out.contains(&format!("Applied 3 resource(s) across {headings} phase(s)")),
        "{out}"
    );
    let progress = &out[out.find("Phase 1").unwrap()..];
    assert!(
        !progress.contains("later phase") && !progress.contains("+?"),
        "a deferred row inside the progress: {out}"
    );
}

#[test]
fn console_prints_no_colour_under_no_color() {
    let p = Project::new(TOKENS);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let mut child = Command::new(nivis_bin())
        .args(["console", "--file"])
        .arg(&p.plan)
        .arg("--state")
        .arg(&p.state)
        .current_dir(p.dir.path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{ n = 1; s = outputs.\"alpha.alpha_token.b\".label; }\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = stdout(&out);
    assert!(text.contains("s = \"b\""), "{text}\n{}", stderr(&out));
    assert!(!text.contains('\x1b'), "colours: {text:?}");
}

/// TOKENS with alpha's resources under a second configuration of the same provider, `eu`, and
/// the moves that keep their objects.
const TOKENS_UNDER_AN_ALIAS: &str = "ledger: let
  t = n: lib.mkResource { provider = \"eu\"; type = \"alpha_token\"; name = n; config.label = n; };
  a = t \"a\";
  c = lib.mkResource { provider = \"eu\"; type = \"alpha_token\"; name = \"c\"; config.label = a.refAttr \"id\"; };
  b = t \"b\";
in lib.toIR {
  providers.alpha = lib.mkProvider { source = \"provider-alpha\"; };
  providers.eu = lib.mkProvider { source = \"provider-alpha\"; };
  resources = [ a c b ];
  moved = map (r: lib.moved { from = \"alpha.alpha_token.${r.name}\"; to = r; }) [ a c b ];
  inherit ledger;
}";

#[test]
fn a_move_between_two_configurations_of_one_provider_keeps_the_objects() {
    let p = Project::new(TOKENS).with_object_log();
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let created = p.objects().created();
    p.set_plan(TOKENS_UNDER_AN_ALIAS);
    let out = succeeded(&p.run(&["plan"], &[]));
    assert!(
        out.contains("3 to move") && out.contains("nothing else changes"),
        "{out}"
    );
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert_eq!(p.objects().created(), created, "nothing was re-created");
    let state = p.state_json();
    for id in ["eu.alpha_token.a", "eu.alpha_token.b", "eu.alpha_token.c"] {
        assert_eq!(state["resources"][id]["provider"], "eu", "{id}: {state}");
    }
}

#[test]
fn a_provider_given_as_a_package_is_built_before_it_starts() {
    let tag = format!("nivis-e2e-provider-{}", std::process::id());
    let binary = bin_dir().join("provider-alpha");
    let package = format!(
        "(derivation {{ name = \"{tag}\"; system = builtins.currentSystem; builder = \"/bin/sh\"; \
         args = [ \"-c\" \"/bin/mkdir -p $out/bin && /bin/cp ${{builtins.path {{ path = {bin}; name = \"alpha\"; }}}} $out/bin/terraform-provider-alpha\" ]; }})",
        bin = binary.display()
    );
    let body = TOKENS.replace(
        "source = \"provider-alpha\";",
        &format!("source = lib.drv {package};"),
    );
    let p = Project::new(&body);
    let ir = p.eval_ir_with(&serde_json::json!({}));
    let out_path = ir["providers"]["alpha"]["source"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(ir["providers"]["alpha"]["drvPath"].is_string(), "{ir}");
    assert!(
        !std::path::Path::new(&out_path).exists(),
        "built before the run"
    );
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert!(std::path::Path::new(&out_path).join("bin").is_dir());
    // A store path that is not built says so, and how to build it.
    let missing = "/nix/store/00000000000000000000000000000000-terraform-provider-gone";
    p.set_plan(&TOKENS.replace(
        "source = \"provider-alpha\";",
        &format!("source = \"{missing}\";"),
    ));
    let err = refused(&p.run(&["plan"], &["--refresh=false"]));
    assert!(err.contains("never built on this machine"), "{err}");
    assert!(err.contains("lib.drv"), "{err}");
}
