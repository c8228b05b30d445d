//! Resource lifecycle through the CLI: update, replace, create-before-destroy, preventDestroy,
//! ignoreChanges, orphans, data sources, variables, targets.

use serde_json::Value as Json;

use crate::util::*;

fn token(name: &str, config: &str, lifecycle: &str) -> String {
    format!(
        "(lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"{name}\"; config = {{ {config} }}; lifecycle = {{ {lifecycle} }}; }})"
    )
}

fn plan_of(resources: &[String], data: &str) -> String {
    format!(
        "ledger: lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; resources = [ {} ]; data = [ {data} ]; inherit ledger; }}",
        resources.join(" ")
    )
}

#[test]
fn update_replace_and_create_before_destroy() {
    let p = Project::new(&plan_of(&[token("t", "label = \"one\"; keeper = \"k1\"; rules = [ { port = 80; } { port = 443; proto = \"tcp\"; } ];", "")], ""));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let first = p.outputs()["alpha.alpha_token.t"].clone();
    assert_eq!(first["value"], "alpha:one:0");
    // A tfplugin6 nested attribute type round-trips, unset optional members as null.
    assert_eq!(
        first["rules"],
        serde_json::json!([{"port": 80, "proto": null}, {"port": 443, "proto": "tcp"}])
    );

    // label updates in place: same id, new value.
    p.set_plan(&plan_of(&[token("t", "label = \"two\"; keeper = \"k1\"; rules = [ { port = 80; } { port = 443; proto = \"tcp\"; } ];", "")], ""));
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    assert!(
        stdout(&out).contains("~ alpha.alpha_token.t"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("label: \"one\" -> \"two\""),
        "{}",
        stdout(&out)
    );
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    assert_eq!(
        actions(&out, "finished"),
        vec![(
            "alpha.alpha_token.t".to_string(),
            serde_json::json!("update")
        )]
    );
    let o = p.outputs();
    assert_eq!(o["alpha.alpha_token.t"]["id"], first["id"]);
    assert_eq!(o["alpha.alpha_token.t"]["value"], "alpha:two:0");

    // keeper forces replacement: a new id (the fake's counter starts at 10 in this process).
    let p = p.env("NIVIS_FAKE_COUNTER", "10");
    p.set_plan(&plan_of(
        &[token("t", "label = \"two\"; keeper = \"k2\";", "")],
        "",
    ));
    let out = p.run(&["plan"], &[]);
    assert!(
        stdout(&out).contains("-/+ alpha.alpha_token.t"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("# forces replacement"),
        "{}",
        stdout(&out)
    );
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    assert_eq!(
        actions(&out, "finished")[0].1["replace"]["createBeforeDestroy"],
        false,
        "{:?}",
        actions(&out, "finished")
    );
    let replaced = p.outputs()["alpha.alpha_token.t"].clone();
    assert_ne!(replaced["id"], first["id"]);

    // With createBeforeDestroy the new object exists before the old one goes.
    let p = p.env("NIVIS_FAKE_COUNTER", "20");
    p.set_plan(&plan_of(
        &[token(
            "t",
            "label = \"two\"; keeper = \"k3\";",
            "createBeforeDestroy = true;",
        )],
        "",
    ));
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    assert_eq!(
        actions(&out, "finished")[0].1["replace"]["createBeforeDestroy"],
        true,
        "{:?}",
        actions(&out, "finished")
    );
    let state = p.state_json();
    let rec = &state["resources"]["alpha.alpha_token.t"];
    assert_eq!(
        rec["deposed"],
        serde_json::json!([]),
        "the deposed object was destroyed"
    );
    assert_ne!(rec["attributes"]["id"], replaced["id"]);
}

#[test]
fn prevent_destroy_refuses_replacement_and_destroy() {
    let p = Project::new(&plan_of(
        &[token("keep", "keeper = \"a\";", "preventDestroy = true;")],
        "",
    ));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    p.set_plan(&plan_of(
        &[token("keep", "keeper = \"b\";", "preventDestroy = true;")],
        "",
    ));
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("preventDestroy"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("alpha.alpha_token.keep"),
        "{}",
        stderr(&out)
    );
    let out = p.run(&["destroy"], &["--auto-approve"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("refusing to destroy"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        stdout(&p.state_cmd(&["state", "list"])).trim(),
        "alpha.alpha_token.keep"
    );
}

#[test]
fn ignore_changes_keeps_the_recorded_value() {
    let p = Project::new(&plan_of(
        &[token(
            "t",
            "label = \"one\";",
            "ignoreChanges = [ \"label\" ];",
        )],
        "",
    ));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    p.set_plan(&plan_of(
        &[token(
            "t",
            "label = \"two\";",
            "ignoreChanges = [ \"label\" ];",
        )],
        "",
    ));
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    assert_eq!(
        actions(&out, "finished"),
        vec![(
            "alpha.alpha_token.t".to_string(),
            serde_json::json!("no-op")
        )]
    );
    assert_eq!(p.outputs()["alpha.alpha_token.t"]["label"], "one");
}

/// Issue 50 (oracle seed 5): ignoreChanges shapes an update only. A replacement creates a new
/// object, which OpenTofu plans from the configuration as written; Nivis created it with the
/// ignored attribute's old value.
#[test]
fn a_replacement_is_created_from_the_configuration_as_written_despite_ignore_changes() {
    let version = |label: &str, keeper: &str| {
        plan_of(
            &[token(
                "t",
                &format!("label = \"{label}\"; keeper = \"{keeper}\";"),
                "ignoreChanges = [ \"label\" ];",
            )],
            "",
        )
    };
    let p = Project::new(&version("one", "k1"));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    // The label alone: ignored, nothing to do.
    p.set_plan(&version("two", "k1"));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert_eq!(p.outputs()["alpha.alpha_token.t"]["label"], "one");
    // The keeper forces a replacement: the new object has the label as written.
    p.set_plan(&version("two", "k2"));
    let plan = p.run(&["plan"], &[]);
    assert_success(&plan);
    assert!(
        stdout(&plan).contains("\"two\""),
        "the plan shows the new label: {}",
        stdout(&plan)
    );
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let finished = actions(&out, "finished");
    assert_eq!(finished.len(), 1, "{finished:?}");
    assert!(
        finished[0].1.to_string().contains("replace"),
        "{finished:?}"
    );
    assert_eq!(p.outputs()["alpha.alpha_token.t"]["label"], "two");
    assert_eq!(p.outputs()["alpha.alpha_token.t"]["keeper"], "k2");
    // And it stays so: the next plan changes nothing.
    let plan = p.run(&["plan"], &[]);
    assert_success(&plan);
    assert!(stdout(&plan).contains("No changes"), "{}", stdout(&plan));
}

#[test]
fn orphans_are_destroyed_in_reverse_dependency_order() {
    let chain = [
        token("a", "", ""),
        token("b", "label = (lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"a\"; }).refAttr \"id\";", ""),
        token("keep", "", ""),
    ];
    let p = Project::new(&plan_of(&chain, ""));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let o = p.outputs();
    assert_eq!(
        o["alpha.alpha_token.b"]["label"], o["alpha.alpha_token.a"]["id"],
        "TF→TF reference resolved in-phase"
    );
    p.set_plan(&plan_of(&[token("keep", "", "")], ""));
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let a = actions(&out, "finished");
    let order: Vec<&str> = a
        .iter()
        .filter(|(_, act)| act == "delete")
        .map(|(id, _)| id.as_str())
        .collect();
    assert_eq!(order, ["alpha.alpha_token.b", "alpha.alpha_token.a"]);
    assert_eq!(
        stdout(&p.state_cmd(&["state", "list"])).trim(),
        "alpha.alpha_token.keep"
    );
}

#[test]
fn data_sources_feed_resources() {
    let body = "ledger: let look = lib.mkData { provider = \"alpha\"; type = \"alpha_lookup\"; name = \"k\"; config.key = \"zone\"; }; \
        t = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"t\"; config.label = lib.str [ \"in-\" (look.refAttr \"result\") ]; }; \
        in lib.toIR { providers.alpha = lib.mkProvider { source = \"provider-alpha\"; }; resources = [ t ]; data = [ look ]; inherit ledger; }";
    let p = Project::new(body);
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let o = p.outputs();
    assert_eq!(o["data.alpha.alpha_lookup.k"]["result"], "lookup:zone");
    assert_eq!(o["alpha.alpha_token.t"]["label"], "in-lookup:zone");
}

#[test]
fn variables_reach_nix_from_the_command_line() {
    let body = "ledger: let v = lib.vars ledger { label = { type = \"string\"; default = \"dflt\"; }; }; \
        in lib.toIR { providers.alpha = lib.mkProvider { source = \"provider-alpha\"; }; \
        resources = [ (lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"t\"; config.label = v.label; }) ]; \
        variables = { label = { type = \"string\"; default = \"dflt\"; }; }; inherit ledger; }";
    let p = Project::new(body);
    assert_success(&p.run(&["apply"], &["--auto-approve", "--var", "label=from-cli"]));
    assert_eq!(p.outputs()["alpha.alpha_token.t"]["label"], "from-cli");
}

#[test]
fn target_limits_the_run_to_a_resource_and_its_dependencies() {
    let chain = [
        token("a", "", ""),
        token("b", "label = (lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"a\"; }).refAttr \"id\";", ""),
        token("other", "", ""),
    ];
    let p = Project::new(&plan_of(&chain, ""));
    let out = p.run(
        &["apply"],
        &["--auto-approve", "--target", "alpha.alpha_token.b"],
    );
    assert_success(&out);
    let listed = stdout(&p.state_cmd(&["state", "list"]));
    assert_eq!(
        listed.trim().lines().collect::<Vec<_>>(),
        ["alpha.alpha_token.a", "alpha.alpha_token.b"]
    );
}

#[test]
fn validate_reports_provider_diagnostics_with_the_resource_and_path() {
    let p = Project::new(&plan_of(
        &[token("bad", "label = \"an invalid label\";", "")],
        "",
    ));
    let out = p.run(&["validate"], &[]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("alpha.alpha_token.bad")
            && err.contains("at label")
            && err.contains("must not contain"),
        "{err}"
    );
    // Schema errors are caught before the provider: an unknown attribute, with a suggestion.
    p.set_plan(&plan_of(&[token("typo", "lable = \"x\";", "")], ""));
    let out = p.run(&["validate"], &[]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("alpha.alpha_token.typo") && err.contains("lable") && err.contains("label"),
        "{err}"
    );
}

#[test]
fn build_outputs_are_realised_before_apply_unless_build_is_false() {
    let tag = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let body = format!(
        "ledger: let d = derivation {{ name = \"nivis-e2e-{tag}\"; builder = \"/bin/sh\"; args = [ \"-c\" \"echo built > $out\" ]; system = builtins.currentSystem; }}; \
         in lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; \
         resources = [ (lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"img\"; config.label = lib.drv d; }}) ]; inherit ledger; }}"
    );
    // --build=false passes the path through without building it.
    let p = Project::new(&body);
    assert_success(&p.run(&["apply"], &["--auto-approve", "--build=false"]));
    let path = p.outputs()["alpha.alpha_token.img"]["label"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        path.starts_with("/nix/store/") && path.ends_with(&format!("nivis-e2e-{tag}")),
        "{path}"
    );
    assert!(
        !std::path::Path::new(&path).exists(),
        "not built with --build=false"
    );

    // A fresh project builds it right before applying the resource.
    let p = Project::new(&body);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let built = p.outputs()["alpha.alpha_token.img"]["label"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(built, path);
    assert_eq!(std::fs::read_to_string(&built).unwrap(), "built\n");
}

#[test]
fn stored_state_is_upgraded_when_the_provider_schema_version_changes() {
    let p = Project::new(&plan_of(&[token("t", "label = \"x\";", "")], ""));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let state = p.state_json();
    assert_eq!(
        state["resources"]["alpha.alpha_token.t"]["schemaVersion"],
        0
    );
    // The provider now has schema version 1 with an upgrader that fills `revision`.
    let p = p.env("NIVIS_FAKE_ALPHA_SCHEMA_VERSION", "1");
    let out = p.run(&["refresh"], &[]);
    assert_success(&out);
    let state = p.state_json();
    let r = &state["resources"]["alpha.alpha_token.t"];
    assert_eq!(r["schemaVersion"], 1);
    assert_eq!(r["attributes"]["revision"], 1);
    assert_eq!(r["attributes"]["label"], "x");
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    assert!(stdout(&out).contains("No changes"), "{}", stdout(&out));
}

#[test]
fn refresh_reports_drift_and_objects_gone_and_state_rm_forgets() {
    let p = Project::new(&plan_of(
        &[
            token("d", "label = \"drifty\";", ""),
            token("g", "label = \"gone\";", ""),
            token("k", "label = \"kept\";", ""),
        ],
        "",
    ));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let p = p
        .env("NIVIS_FAKE_DRIFT_ON", "drifty")
        .env("NIVIS_FAKE_GONE_ON", "gone");
    // The drift is shown and, with nobody to ask, nothing is recorded.
    let before = p.state_json();
    for flags in [&["--json"][..], &[]] {
        let out = p.run(&["refresh"], flags);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        assert!(stderr(&out).contains("--auto-approve"), "{}", stderr(&out));
        assert_eq!(p.state_json()["resources"], before["resources"]);
    }
    let out = p.run(&["plan"], &["--refresh-only", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Refresh-only plan: 2 object(s) differ from the state"),
        "{}",
        stdout(&out)
    );
    assert_eq!(p.state_json()["resources"], before["resources"]);
    let out = p.run(
        &["refresh"],
        &["--json", "--auto-approve", "--detailed-exitcode"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let drift: Vec<serde_json::Value> = events(&out)
        .into_iter()
        .filter(|e| e["type"] == "drift")
        .collect();
    assert_eq!(drift.len(), 2, "{drift:?}");
    let d = drift
        .iter()
        .find(|e| e["id"] == "alpha.alpha_token.d")
        .unwrap();
    assert_eq!(d["changes"][0]["path"], "value");
    assert_eq!(d["changes"][0]["after"], "changed-outside");
    assert_eq!(
        drift
            .iter()
            .find(|e| e["id"] == "alpha.alpha_token.g")
            .unwrap()["gone"],
        true
    );
    let listed = stdout(&p.state_cmd(&["state", "list"]));
    assert!(
        !listed.contains("alpha.alpha_token.g"),
        "a vanished object leaves state: {listed}"
    );
    assert_eq!(
        p.outputs()["alpha.alpha_token.d"]["value"],
        "changed-outside"
    );

    let out = p.state_cmd(&["state", "rm", "alpha.alpha_token.k"]);
    assert_success(&out);
    assert!(!stdout(&p.state_cmd(&["state", "list"])).contains("alpha.alpha_token.k"));
    let out = p.state_cmd(&["state", "rm", "alpha.alpha_token.nope"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("not in state"), "{}", stderr(&out));
}

/// A create-before-destroy replace whose old object cannot be deleted leaves it deposed in
/// state; the next plan shows it, the next apply deletes it first, and destroy deletes deposed
/// objects too: nothing is forgotten in the real world.
#[test]
fn deposed_objects_are_shown_retried_and_destroyed() {
    let tok = |label: &str, keeper: &str| {
        token(
            "t",
            &format!("label = \"{label}\"; keeper = \"{keeper}\";"),
            "createBeforeDestroy = true;",
        )
    };
    let p = Project::new(&plan_of(&[tok("one", "k1")], ""));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let old_id = p.state_json()["resources"]["alpha.alpha_token.t"]["attributes"]["id"].clone();

    // The old object (label "one") refuses to go: the new one is recorded, the old one deposed.
    // Each fake process counts ids from NIVIS_FAKE_COUNTER: new objects get new ids.
    let p = p
        .env("NIVIS_FAKE_FAIL_DELETE_ON", "one")
        .env("NIVIS_FAKE_COUNTER", "10");
    p.set_plan(&plan_of(&[tok("two", "k2")], ""));
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("injected failure deleting"),
        "{}",
        stderr(&out)
    );
    let rec = p.state_json()["resources"]["alpha.alpha_token.t"].clone();
    assert_ne!(rec["attributes"]["id"], old_id);
    assert_eq!(rec["deposed"][0]["key"], "deposed-0", "{rec}");
    assert_eq!(rec["deposed"][0]["attributes"]["id"], old_id, "{rec}");

    // Still failing: the next apply retries, fails again, keeps it, and changes nothing else.
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("deleting deposed object deposed-0"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        p.state_json()["resources"]["alpha.alpha_token.t"]["deposed"][0]["attributes"]["id"],
        old_id
    );

    // The provider recovers: plan shows the deletion, apply carries it out.
    let p = p.env("NIVIS_FAKE_FAIL_DELETE_ON", "");
    let out = p.run(&["plan"], &["--json"]);
    assert_success(&out);
    let planned: Vec<Json> = events(&out)
        .into_iter()
        .filter(|e| e["type"] == "planned")
        .collect();
    assert_eq!(planned.len(), 1, "{planned:?}");
    assert_eq!(planned[0]["action"], "delete");
    assert_eq!(planned[0]["deposed"], "deposed-0");
    let out = p.run(&["plan"], &[]);
    assert!(
        stdout(&out).contains("alpha.alpha_token.t (deposed object deposed-0)"),
        "{}",
        stdout(&out)
    );
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let gone: Vec<Json> = events(&out)
        .into_iter()
        .filter(|e| e["type"] == "finished" && e["deposed"] == "deposed-0")
        .collect();
    assert_eq!(gone.len(), 1);
    assert_eq!(
        p.state_json()["resources"]["alpha.alpha_token.t"]["deposed"],
        serde_json::json!([])
    );

    // Destroy takes deposed objects with it.
    let p = p
        .env("NIVIS_FAKE_FAIL_DELETE_ON", "two")
        .env("NIVIS_FAKE_COUNTER", "20");
    p.set_plan(&plan_of(&[tok("three", "k3")], ""));
    assert_eq!(
        p.run(&["apply"], &["--auto-approve"]).status.code(),
        Some(1)
    );
    assert_eq!(
        p.state_json()["resources"]["alpha.alpha_token.t"]["deposed"][0]["key"],
        "deposed-0"
    );
    let p = p.env("NIVIS_FAKE_FAIL_DELETE_ON", "");
    let out = p.run(&["destroy"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let deletes = events(&out)
        .into_iter()
        .filter(|e| e["type"] == "finished" && e["action"] == "delete")
        .count();
    assert_eq!(deletes, 2, "the deposed object and the current one");
    assert_eq!(p.state_json()["resources"], serde_json::json!({}));
}
