//! The vocabulary of conditions through the CLI (issue 48): variable `validation`,
//! `lifecycle.precondition`, `lifecycle.postcondition` and `lib.check`, with the fake providers
//! and their object log (what exists "remotely").

use serde_json::Value as Json;

use crate::util::*;

/// A plan of provider `alpha` (at `source`) with these resources and more `toIR` arguments.
fn plan_at(source: &str, resources: &[String], extra: &str) -> String {
    format!(
        "ledger: lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"{source}\"; }}; resources = [ {} ]; {extra} inherit ledger; }}",
        resources.join(" ")
    )
}

fn plan(resources: &[String], extra: &str) -> String {
    plan_at("provider-alpha", resources, extra)
}

/// An `alpha_token` named `name` with `label` and a `lifecycle` body.
fn token(name: &str, label: &str, lifecycle: &str) -> String {
    format!(
        "(lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"{name}\"; config.label = \"{label}\"; lifecycle = {{ {lifecycle} }}; }})"
    )
}

/// The `condition` events of a `--json` run.
fn conditions(out: &std::process::Output) -> Vec<Json> {
    events(out)
        .into_iter()
        .filter(|e| e["type"] == "condition")
        .collect()
}

const REGION: &str = "variables.region = { type = \"string\"; validation = [ { condition = v: builtins.elem v [ \"eu\" \"us\" ]; message = \"region must be eu or us\"; } ]; };";

#[test]
fn a_failing_variable_validation_fails_the_plan_before_any_provider_starts() {
    // The provider cannot start at all: a run that tried would fail on it instead.
    let missing = "/nonexistent/nivis-provider-for-validation";
    let p = Project::new(&plan_at(missing, &[token("t", "x", "")], REGION));
    let out = p.run(&["plan"], &["--var", "region=mars"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("variable 'region': validation failed: region must be eu or us"),
        "{err}"
    );
    assert!(!err.contains(missing), "a provider was started: {err}");

    // A valid value passes validation (and the plan goes on to the provider).
    let p = Project::new(&plan(&[token("t", "x", "")], REGION)).with_object_log();
    assert_success(&p.run(&["apply"], &["--auto-approve", "--var", "region=eu"]));
    assert_eq!(p.objects().created(), 1);
    let out = p.run(&["apply"], &["--auto-approve", "--var", "region=us-east-1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("region must be eu or us"));
}

#[test]
fn a_failing_validation_of_a_sensitive_variable_never_prints_its_value() {
    let decl = "variables.token = { type = \"string\"; sensitive = true; validation = [ { condition = v: builtins.stringLength v >= 20; message = \"the token is too short\"; } ]; };";
    let p =
        Project::new(&plan(&[token("t", "x", "")], decl)).env("NIVIS_VAR_token", "s3cr3t-value");
    for extra in [&[][..], &["--json"][..]] {
        let out = p.run(&["plan"], extra);
        assert_eq!(out.status.code(), Some(1));
        let all = format!("{}{}", stdout(&out), stderr(&out));
        assert!(
            all.contains("variable 'token': validation failed: the token is too short"),
            "{all}"
        );
        assert!(
            !all.contains("s3cr3t-value"),
            "the secret was printed: {all}"
        );
    }
}

#[test]
fn a_false_precondition_stops_the_run_with_its_message_and_creates_nothing() {
    let guarded = token(
        "t",
        "x",
        "precondition = [ { condition = 1 > 2; message = \"one must exceed two\"; } ];",
    );
    let p = Project::new(&plan(&[token("other", "o", ""), guarded], "")).with_object_log();
    for verb in ["plan", "apply"] {
        let extra: &[&str] = if verb == "apply" {
            &["--auto-approve"]
        } else {
            &[]
        };
        let out = p.run(&[verb], extra);
        assert_eq!(out.status.code(), Some(1), "{verb}: {}", stderr(&out));
        assert!(
            stderr(&out)
                .contains("resource alpha.alpha_token.t: precondition failed: one must exceed two"),
            "{verb}: {}",
            stderr(&out)
        );
    }
    assert_eq!(p.objects().created(), 0, "nothing is created");
    assert!(!p.state.exists() || p.outputs().as_object().is_none_or(|o| o.is_empty()));
}

#[test]
fn a_precondition_on_an_output_waits_for_it_then_holds_or_stops_the_resource() {
    // B's precondition reads A's value: unknown in the plan (B waits), decided after A exists.
    let guarded = |want: &str| {
        token(
            "B",
            "b",
            &format!("precondition = [ {{ condition = lib.compute {{ v = (lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; }}).refAttr \"value\"; }} ({{ v }}: builtins.substring 0 {} v == \"{want}\"); message = \"A's value must start with {want}\"; }} ];", want.len()),
        )
    };
    let p =
        Project::new(&plan(&[token("A", "good", ""), guarded("alpha:good")], "")).with_object_log();
    let out = p.run(&["plan"], &[]);
    let text = succeeded(&out);
    assert!(
        text.contains("+? alpha.alpha_token.B"),
        "B waits on A: {text}"
    );
    assert!(text.contains("alpha.alpha_token.A.value"), "{text}");
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert_eq!(p.objects().created(), 2);

    // The same precondition, false once A's value is known: A is created, B is not.
    let p =
        Project::new(&plan(&[token("A", "bad", ""), guarded("alpha:good")], "")).with_object_log();
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("resource alpha.alpha_token.B: precondition failed: A's value must start with alpha:good"),
        "{}",
        stderr(&out)
    );
    let outputs = p.outputs();
    assert!(outputs.get("alpha.alpha_token.A").is_some());
    assert!(outputs.get("alpha.alpha_token.B").is_none(), "{outputs}");
    assert_eq!(p.objects().created(), 1);
}

#[test]
fn a_failing_check_warns_after_the_fixpoint_and_keeps_the_exit_status() {
    let check = |want: &str| {
        format!(
            "checks = [ (lib.check {{ name = \"label-is-{want}\"; \"assert\" = lib.compute {{ v = (lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; }}).refAttr \"value\"; }} ({{ v }}: builtins.substring 0 {n} v == \"alpha:{want}\"); message = \"A's label should be {want}\"; }}) ];",
            n = want.len() + 6
        )
    };
    let p = Project::new(&plan(&[token("A", "one", "")], &check("two")));
    // Before apply the check cannot be decided: no warning, an `unknown` event.
    let out = p.run(&["plan"], &["--json"]);
    assert_success(&out);
    let events = conditions(&out);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["status"], "unknown");
    assert_eq!(events[0]["kind"], "check");
    assert_eq!(events[0]["name"], "label-is-two");

    let out = p.run(&["apply"], &["--auto-approve"]);
    assert_success(&out);
    assert!(
        stderr(&out).contains("check label-is-two failed: A's label should be two"),
        "{}",
        stderr(&out)
    );
    let out = p.run(&["plan"], &["--json"]);
    assert_success(&out);
    let events = conditions(&out);
    assert_eq!(events[0]["status"], "fail");
    assert_eq!(events[0]["severity"], "warning");
    assert_eq!(events[0]["message"], "A's label should be two");

    // A check that holds prints nothing.
    p.set_plan(&plan(&[token("A", "one", "")], &check("one")));
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert_success(&out);
    assert!(
        !stderr(&out).contains("check label-is-one"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_postcondition_sees_the_applied_object_and_fails_the_apply_but_keeps_the_record() {
    let post = |want: &str| {
        format!(
            "postcondition = [ {{ condition = self: builtins.substring 0 {n} self.value == \"alpha:{want}\"; message = \"value must start with alpha:{want}\"; }} ];",
            n = want.len() + 6
        )
    };
    let p = Project::new(&plan(&[token("A", "one", &post("two"))], "")).with_object_log();
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let failed: Vec<Json> = conditions(&out);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["kind"], "postcondition");
    assert_eq!(failed[0]["resource"], "alpha.alpha_token.A");
    assert_eq!(failed[0]["status"], "fail");
    assert_eq!(failed[0]["severity"], "error");
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("alpha.alpha_token.A: value must start with alpha:two"),
        "{}",
        stderr(&out)
    );
    // The object exists and stays recorded, as OpenTofu keeps it.
    assert_eq!(p.objects().created(), 1);
    assert!(p.outputs().get("alpha.alpha_token.A").is_some());
    // A plan warns (its exit status unchanged); fixing the configuration makes it hold.
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    assert!(
        stderr(&out)
            .contains("postcondition of alpha.alpha_token.A fails against its recorded object"),
        "{}",
        stderr(&out)
    );
    p.set_plan(&plan(&[token("A", "two", &post("two"))], ""));
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert_success(&out);
    assert!(!stderr(&out).contains("postcondition"), "{}", stderr(&out));
}

#[test]
fn removed_with_destroy_false_forgets_without_a_provider_call_and_true_destroys() {
    let p = Project::new(&plan(
        &[
            token("keep", "k", ""),
            token("old", "o", ""),
            token("gone", "g", ""),
        ],
        "",
    ))
    .with_object_log();
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let live = p.objects().live();
    assert_eq!(live.len(), 3, "{live:?}");
    let removed = "removed = [ (lib.removed { from = \"alpha.alpha_token.old\"; destroy = false; }) (lib.removed { from = \"alpha.alpha_token.gone\"; destroy = true; }) ];";
    p.set_plan(&plan(&[token("keep", "k", "")], removed));
    let text = succeeded(&p.run(&["plan"], &[]));
    assert!(text.contains("alpha.alpha_token.old"), "{text}");
    assert!(
        text.contains("forget: removed from state and left as it is"),
        "{text}"
    );
    assert!(text.contains("1 to destroy, 1 to forget"), "{text}");

    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let mut finished = actions(&out, "finished");
    finished.retain(|(_, a)| a != "no-op");
    finished.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        finished,
        vec![
            (
                "alpha.alpha_token.gone".to_string(),
                serde_json::json!("delete")
            ),
            (
                "alpha.alpha_token.old".to_string(),
                serde_json::json!("forget")
            ),
        ]
    );
    // Both records are gone; only `gone`'s object was deleted: `old`'s is left as it is.
    let outputs = p.outputs();
    assert!(outputs.get("alpha.alpha_token.old").is_none(), "{outputs}");
    assert!(outputs.get("alpha.alpha_token.gone").is_none(), "{outputs}");
    let mut labels: Vec<String> = p.objects().live().into_values().collect();
    labels.sort();
    assert_eq!(labels, vec!["k".to_string(), "o".to_string()]);
    // The entries may stay in the plan: nothing more to do.
    let text = succeeded(&p.run(&["plan"], &[]));
    assert!(text.contains("No changes."), "{text}");
}

/// The module every instance evaluates: one token labelled by the instance's option.
const DB_MODULE: &str = r#"{ config, lib, ... }: {
  options.label = lib.modules.mkOption { type = lib.modules.types.str; };
  config.nivis.resources = [ (lib.mkResource { provider = "alpha"; type = "alpha_token"; name = "main"; config.label = config.label; }) ];
}
"#;

#[test]
fn two_instances_of_one_module_take_over_a_flat_state_with_moves_and_plan_no_changes() {
    // Before modules: two flat resources.
    let p = Project::new(&plan(
        &[token("main", "e", ""), token("main_us", "u", "")],
        "",
    ))
    .with_object_log();
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let objects = p.objects().entries.len();
    let before = p.outputs();

    // The same estate as two instances of one module file, the records moved into them.
    std::fs::write(p.dir.path().join("db.nix"), DB_MODULE).unwrap();
    p.set_plan(
        r#"ledger: lib.modules.toIR { inherit ledger; modules = [ ({ lib, ... }: {
  options.db = lib.modules.mkOption { type = lib.modules.types.attrsOf (lib.modules.types.submodule ./db.nix); };
  config = {
    nivis.providers.alpha = lib.mkProvider { source = "provider-alpha"; };
    db.eu.label = "e";
    db.us.label = "u";
    nivis.moved = [
      (lib.moved { from = "alpha.alpha_token.main"; to = "module.db__eu.alpha.alpha_token.main"; })
      (lib.moved { from = "alpha.alpha_token.main_us"; to = "module.db__us.alpha.alpha_token.main"; })
    ];
  };
}) ]; }"#,
    );
    let text = succeeded(&p.run(&["plan"], &[]));
    assert!(
        text.contains("Plan: 2 to move, 0 to import (state only), nothing else changes."),
        "{text}"
    );
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert_eq!(
        p.objects().entries.len(),
        objects,
        "no provider created or deleted anything"
    );
    let ids = succeeded(&p.state_cmd(&["state", "list"]));
    assert!(
        ids.contains("module.db__eu.alpha.alpha_token.main"),
        "{ids}"
    );
    assert!(
        ids.contains("module.db__us.alpha.alpha_token.main"),
        "{ids}"
    );
    let after = p.outputs();
    assert_eq!(
        after["module.db__eu.alpha.alpha_token.main"]["id"],
        before["alpha.alpha_token.main"]["id"]
    );
    assert_eq!(
        after["module.db__us.alpha.alpha_token.main"]["id"],
        before["alpha.alpha_token.main_us"]["id"]
    );
    let text = succeeded(&p.run(&["plan"], &[]));
    assert!(text.contains("No changes."), "{text}");
}

/// `lifecycle.replaceTriggeredBy` (DESIGN §103): B follows the whole of A, C (create before
/// destroy) A's label, F A's value (unknown in the plan once A changes), D only E.
fn triggered_estate(a_label: &str) -> String {
    let a = "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; })";
    let e = "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"E\"; })";
    plan(
        &[
            token("A", a_label, ""),
            token("E", "e", ""),
            token("B", "b", &format!("replaceTriggeredBy = [ {a} ];")),
            token(
                "C",
                "c",
                &format!(
                    "createBeforeDestroy = true; replaceTriggeredBy = [ ({a}.refAttr \"label\") ];"
                ),
            ),
            token(
                "F",
                "f",
                &format!("replaceTriggeredBy = [ ({a}.refAttr \"value\") ];"),
            ),
            token(
                "D",
                "d",
                &format!("replaceTriggeredBy = [ {e} ({e}.refAttr \"value\") ];"),
            ),
        ],
        "",
    )
}

/// The object log's operations after the first `skip` entries, as (op, label).
fn log_ops(p: &Project, skip: usize) -> Vec<(String, String)> {
    let entries = p.objects().entries;
    // A deleted object's label is its latest create's (a fake reuses ids across runs).
    let label = |i: usize| {
        (entries[..=i].iter().rev())
            .find(|c| c["op"] == "create" && c["id"] == entries[i]["id"])
            .and_then(|c| c["label"].as_str().map(str::to_string))
            .unwrap_or_default()
    };
    (skip..entries.len())
        .map(|i| {
            (
                entries[i]["op"].as_str().unwrap_or("").to_string(),
                label(i),
            )
        })
        .collect()
}

#[test]
fn replace_triggered_by_replaces_a_resource_when_its_trigger_changes_and_only_then() {
    let mut p = Project::new(&triggered_estate("a1")).with_object_log();
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert_eq!(p.objects().created(), 6);
    let state = p.state_json();
    let triggers = &state["resources"]["alpha.alpha_token.C"]["replaceTriggers"];
    assert!(
        triggers["alpha.alpha_token.A.label"].is_string(),
        "the trigger's digest is recorded: {state}"
    );
    assert!(
        state["resources"]["alpha.alpha_token.A"]
            .get("replaceTriggers")
            .is_none(),
        "none without triggers: {state}"
    );
    // An unchanged trigger replaces nothing.
    let text = succeeded(&p.run(&["plan"], &[]));
    assert!(text.contains("No changes."), "{text}");

    p.set_plan(&triggered_estate("a2"));
    let text = succeeded(&p.run(&["plan"], &[]));
    for (id, cause) in [
        ("B", "alpha.alpha_token.A"),
        ("C", "alpha.alpha_token.A.label"),
        ("F", "alpha.alpha_token.A.value (known after apply)"),
    ] {
        // The resource's row: its heading and the indented lines under it.
        let mut lines = text
            .lines()
            .skip_while(|l| !l.contains(&format!("alpha.alpha_token.{id} (")));
        let heading = lines.next().unwrap_or_default();
        assert!(
            heading.starts_with("-/+") || heading.starts_with("+/-"),
            "{id}: {text}"
        );
        let row = lines
            .take_while(|l| l.starts_with("      "))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            row.contains(&format!("(replace triggered by {cause})")),
            "{id}: {text}"
        );
    }
    assert!(
        !text.contains("alpha.alpha_token.D"),
        "D's trigger is E: {text}"
    );
    assert!(!text.contains("alpha.alpha_token.E"), "{text}");
    let out = p.run(&["plan"], &["--json"]);
    assert_success(&out);
    let b = events(&out)
        .into_iter()
        .find(|e| e["type"] == "planned" && e["id"] == "alpha.alpha_token.B")
        .expect("B is planned");
    assert_eq!(
        b["action"],
        serde_json::json!({"replace": {"createBeforeDestroy": false}}),
        "{b}"
    );
    assert_eq!(b["triggeredBy"], serde_json::json!(["alpha.alpha_token.A"]));

    let before = p.objects().entries.len();
    // The fake numbers its objects per process: new ones must not reuse the first run's ids.
    p.env.push(("NIVIS_FAKE_COUNTER".into(), "100".into()));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let ops = log_ops(&p, before);
    let at = |op: &str, label: &str, nth: usize| {
        (ops.iter().enumerate())
            .filter(|(_, o)| o.0 == op && o.1 == label)
            .nth(nth)
            .map(|(i, _)| i)
            .unwrap_or_else(|| panic!("no {op} of {label} in {ops:?}"))
    };
    // B: the old object deleted, then the new one created; C: created before the old is deleted.
    assert!(at("delete", "b", 0) < at("create", "b", 0), "{ops:?}");
    assert!(at("create", "c", 0) < at("delete", "c", 0), "{ops:?}");
    assert!(at("delete", "f", 0) < at("create", "f", 0), "{ops:?}");
    assert!(
        !ops.iter().any(|o| o.1 == "d" || o.1 == "e"),
        "D and E untouched: {ops:?}"
    );
    assert_eq!(p.objects().live().len(), 6);
    let text = succeeded(&p.run(&["plan"], &[]));
    assert!(text.contains("No changes."), "{text}");
}

#[test]
fn a_replace_trigger_that_is_not_a_resource_of_the_plan_is_named_with_its_path() {
    let ghost =
        "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"ghost\"; })";
    let p = Project::new(&plan(
        &[token(
            "B",
            "b",
            &format!("replaceTriggeredBy = [ ({ghost}.refAttr \"id\") ];"),
        )],
        "",
    ));
    let out = p.run(&["plan"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("resource alpha.alpha_token.B: lifecycle.replaceTriggeredBy[0] refers to alpha.alpha_token.ghost, which is not a managed resource in toIR's resources"),
        "{}",
        stderr(&out)
    );
}
