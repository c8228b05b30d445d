//! Renames without destroying: `lib.moved` in the plan and `nivis state mv`, through the CLI
//! with the fake providers; the fakes' object log shows that no real object was touched.

use serde_json::Value as Json;

use crate::util::*;

fn token(name: &str, label: &str) -> String {
    format!(
        "(lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"{name}\"; config.label = \"{label}\"; }})"
    )
}

/// A plan with these resources (Nix expressions) and moves (`from`, `to` Nix expressions).
fn plan_of(resources: &[String], moves: &[(&str, &str)]) -> String {
    let moved: Vec<String> = moves
        .iter()
        .map(|(f, t)| format!("(lib.moved {{ from = {f}; to = {t}; }})"))
        .collect();
    format!(
        "ledger: lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; resources = [ {} ]; moved = [ {} ]; inherit ledger; }}",
        resources.join(" "),
        moved.join(" ")
    )
}

fn ids(p: &Project) -> Vec<String> {
    let out = p.state_cmd(&["state", "list", "--json"]);
    assert_success(&out);
    serde_json::from_str::<Vec<String>>(&stdout(&out)).expect("state list --json")
}

/// The `finished` operations that changed something.
fn changed(out: &std::process::Output) -> Vec<(String, Json)> {
    let mut ops = actions(out, "finished");
    ops.retain(|(_, action)| action != "no-op");
    ops
}

fn assert_no_changes(p: &Project) {
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    assert!(stdout(&out).contains("No changes."), "{}", stdout(&out));
}

/// Applies `old` (and a dependent `user`), then renames it to `new` in Nix.
fn applied_then_renamed() -> (Project, Json) {
    let user = "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"user\"; config.label = \"u\"; dependsOn = [ \"alpha.alpha_token.old\" ]; })";
    let user_new = user.replace("alpha.alpha_token.old", "alpha.alpha_token.new");
    let p = Project::new(&plan_of(&[token("old", "db"), user.into()], &[])).with_object_log();
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let before = p.outputs()["alpha.alpha_token.old"].clone();
    p.set_plan(&plan_of(
        &[token("new", "db"), user_new],
        &[("\"alpha.alpha_token.old\"", "\"alpha.alpha_token.new\"")],
    ));
    (p, before)
}

#[test]
fn a_declared_move_plans_only_the_move_and_touches_no_provider() {
    let (p, before) = applied_then_renamed();
    let objects_before = p.objects().entries.len();

    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(
        text.contains("-> alpha.alpha_token.old moved to alpha.alpha_token.new (alpha_token)"),
        "{text}"
    );
    assert!(
        text.contains("Plan: 1 to move, 0 to import (state only), nothing else changes."),
        "{text}"
    );
    assert!(
        !text.contains("+ alpha") && !text.contains("- alpha"),
        "{text}"
    );
    // plan changes nothing
    assert!(ids(&p).contains(&"alpha.alpha_token.old".to_string()));

    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let moved: Vec<Json> = events(&out)
        .into_iter()
        .filter(|e| e["type"] == "moved")
        .collect();
    assert_eq!(moved.len(), 1, "{}", stdout(&out));
    assert_eq!(moved[0]["from"], "alpha.alpha_token.old");
    assert_eq!(moved[0]["to"], "alpha.alpha_token.new");
    assert_eq!(moved[0]["recorded"], true);
    assert!(changed(&out).is_empty(), "{}", stdout(&out));
    assert_eq!(
        p.objects().entries.len(),
        objects_before,
        "a provider object was created or deleted"
    );
    assert_eq!(p.outputs()["alpha.alpha_token.new"]["id"], before["id"]);
    assert_eq!(
        ids(&p),
        vec!["alpha.alpha_token.new", "alpha.alpha_token.user"]
    );
    // The dependent's recorded dependency follows the rename (destroy order).
    let state = p.state_json();
    let deps = &state["resources"]["alpha.alpha_token.user"]["dependencies"];
    assert_eq!(
        deps,
        &serde_json::json!(["alpha.alpha_token.new"]),
        "{state}"
    );

    // The move stays declared: the next plan is a no-op.
    assert_no_changes(&p);
    p.assert_remote_matches_state(&[]);
}

#[test]
fn state_mv_renames_the_record_locked_and_journaled() {
    let (p, before) = applied_then_renamed();
    // The rename without a declared move.
    p.set_plan(&plan_of(&[token("new", "db"), "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"user\"; config.label = \"u\"; dependsOn = [ \"alpha.alpha_token.new\" ]; })".into()], &[]));
    let objects_before = p.objects().entries.len();
    let out = p.run(&["plan"], &[]);
    assert!(
        stdout(&out).contains("- alpha.alpha_token.old"),
        "{}",
        stdout(&out)
    );
    // The destroy/create pair is named as a likely rename, with the move to declare.
    let hint =
        "alpha.alpha_token.old (destroy) and alpha.alpha_token.new (create) look like a rename";
    assert!(stderr(&out).contains(hint), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("moved = [ (lib.moved { from = \"alpha.alpha_token.old\"; to = \"alpha.alpha_token.new\"; }) ]"),
        "{}",
        stderr(&out)
    );
    // Another config is not a rename: no hint.
    let renamed = std::fs::read_to_string(&p.plan).unwrap();
    p.set_plan(&renamed.replace("config.label = \"db\"", "config.label = \"other\""));
    let out = p.run(&["plan"], &[]);
    assert!(
        stdout(&out).contains("+ alpha.alpha_token.new"),
        "{}",
        stdout(&out)
    );
    assert!(
        !stderr(&out).contains("look like a rename"),
        "{}",
        stderr(&out)
    );
    std::fs::write(&p.plan, renamed).unwrap();

    // Errors name both addresses and change nothing.
    let out = p.state_cmd(&[
        "state",
        "mv",
        "alpha.alpha_token.nope",
        "alpha.alpha_token.new",
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot move alpha.alpha_token.nope to alpha.alpha_token.new"),
        "{}",
        stderr(&out)
    );
    let out = p.state_cmd(&[
        "state",
        "mv",
        "alpha.alpha_token.old",
        "alpha.alpha_token.user",
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("alpha.alpha_token.user is already in state"),
        "{}",
        stderr(&out)
    );
    let out = p.state_cmd(&["state", "mv", "alpha.alpha_token.old", "beta.beta_record.x"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("must keep the provider and type"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        ids(&p),
        vec!["alpha.alpha_token.old", "alpha.alpha_token.user"]
    );

    let out = p.state_cmd(&[
        "state",
        "mv",
        "alpha.alpha_token.old",
        "alpha.alpha_token.new",
    ]);
    assert_success(&out);
    assert!(
        stdout(&out).contains("Moved alpha.alpha_token.old to alpha.alpha_token.new"),
        "{}",
        stdout(&out)
    );
    assert_eq!(p.outputs()["alpha.alpha_token.new"]["id"], before["id"]);
    assert_no_changes(&p);
    assert_eq!(p.objects().entries.len(), objects_before);
    p.assert_remote_matches_state(&[]);
}

#[test]
fn a_move_onto_a_recorded_address_or_from_nothing_names_both_and_changes_nothing() {
    let p = Project::new(&plan_of(&[token("old", "a"), token("new", "b")], &[])).with_object_log();
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let state_before = std::fs::read(&p.state).unwrap();

    p.set_plan(&plan_of(
        &[token("new", "b")],
        &[("\"alpha.alpha_token.old\"", "\"alpha.alpha_token.new\"")],
    ));
    for verb in ["plan", "apply"] {
        let out = p.run(&[verb], &["--auto-approve"][..usize::from(verb == "apply")]);
        assert!(!out.status.success(), "{verb}: {}", stdout(&out));
        assert!(
            stderr(&out).contains("cannot move alpha.alpha_token.old to alpha.alpha_token.new: alpha.alpha_token.new is already in state"),
            "{verb}: {}",
            stderr(&out)
        );
    }
    p.set_plan(&plan_of(
        &[token("old", "a"), token("new", "b"), token("other", "c")],
        &[("\"alpha.alpha_token.typo\"", "\"alpha.alpha_token.other\"")],
    ));
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(
            "cannot move alpha.alpha_token.typo to alpha.alpha_token.other: neither is in state"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read(&p.state).unwrap(),
        state_before,
        "the state changed"
    );
}

#[test]
fn moves_into_for_each_and_chains_resolve() {
    let p =
        Project::new(&plan_of(&[token("web", "w"), token("first", "f")], &[])).with_object_log();
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let web = p.outputs()["alpha.alpha_token.web"]["id"].clone();
    let first = p.outputs()["alpha.alpha_token.first"]["id"].clone();
    let objects_before = p.objects().entries.len();

    // web becomes the "a" instance of a forEach; first was renamed twice (first -> second ->
    // third), both moves kept.
    let webs = "(lib.forEach [ \"a\" \"b\" ] (k: v: lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"web\"; config.label = if k == \"a\" then \"w\" else \"w2\"; }))";
    p.set_plan(&plan_of(
        &[webs.into(), token("third", "f")],
        &[
            ("\"alpha.alpha_token.web\"", "\"alpha.alpha_token.web__a\""),
            (
                "\"alpha.alpha_token.first\"",
                "\"alpha.alpha_token.second\"",
            ),
            (
                "\"alpha.alpha_token.second\"",
                "\"alpha.alpha_token.third\"",
            ),
        ],
    ));
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let finished = changed(&out);
    assert_eq!(
        finished,
        vec![(
            "alpha.alpha_token.web__b".to_string(),
            serde_json::json!("create")
        )]
    );
    assert_eq!(p.outputs()["alpha.alpha_token.web__a"]["id"], web);
    assert_eq!(p.outputs()["alpha.alpha_token.third"]["id"], first);
    assert_eq!(p.objects().entries.len(), objects_before + 1);
    assert_no_changes(&p);
}
