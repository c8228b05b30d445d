//! Adopting objects that exist already: `importId` on a resource and `nivis import ADDR ID`,
//! through the CLI with the fake providers. With an object log, the fake finds only the objects
//! alive by it, so "exists only on the provider side" is an object whose record was removed.

use crate::util::*;

fn token(name: &str, label: &str, import_id: Option<&str>) -> String {
    let import = import_id.map_or(String::new(), |id| format!("importId = \"{id}\";"));
    format!(
        "(lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"{name}\"; config.label = \"{label}\"; {import} }})"
    )
}

fn plan_of(resources: &[String]) -> String {
    format!(
        "ledger: lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; resources = [ {} ]; inherit ledger; }}",
        resources.join(" ")
    )
}

/// A project whose one object (`alpha.alpha_token.a`, label `x`) exists only on the provider
/// side; returns it with the object's provider id.
fn orphaned_object() -> (Project, String) {
    let p = Project::new(&plan_of(&[token("a", "x", None)])).with_object_log();
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let id = p.outputs()["alpha.alpha_token.a"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    forget(&p);
    (p, id)
}

fn forget(p: &Project) {
    assert_success(&p.state_cmd(&["state", "rm", "alpha.alpha_token.a"]));
}

fn assert_no_changes(p: &Project) {
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    assert!(stdout(&out).contains("No changes."), "{}", stdout(&out));
}

fn assert_fails_with(out: &std::process::Output, text: &str) {
    assert!(!out.status.success(), "{}", stdout(out));
    assert!(stderr(out).contains(text), "{}", stderr(out));
}

#[test]
fn a_declared_import_adopts_the_object_then_plans_no_op() {
    let (p, id) = orphaned_object();
    let objects = p.objects().entries.len();
    p.set_plan(&plan_of(&[token("a", "x", Some(&id))]));
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(
        text.contains(&format!(
            "<= alpha.alpha_token.a to import from id \"{id}\" (alpha_token)"
        )),
        "{text}"
    );
    assert!(
        text.contains("Plan: 0 to move, 1 to import (state only), nothing else changes."),
        "{text}"
    );

    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let imported: Vec<_> = events(&out)
        .into_iter()
        .filter(|e| e["type"] == "imported")
        .collect();
    assert_eq!(imported.len(), 1, "{}", stdout(&out));
    assert_eq!(imported[0]["importId"], id.as_str());
    assert_eq!(imported[0]["recorded"], true);
    assert_eq!(
        p.objects().entries.len(),
        objects,
        "an object was created or deleted"
    );
    assert_eq!(p.outputs()["alpha.alpha_token.a"]["id"], id.as_str());
    // The next plan refreshes the object with the private data the import recorded (the fake
    // refuses a read without it) and finds nothing to do.
    assert_no_changes(&p);
    p.assert_remote_matches_state(&[]);
}

#[test]
fn an_import_whose_config_differs_plans_the_import_then_the_update() {
    let (p, id) = orphaned_object();
    let objects = p.objects().entries.len();
    p.set_plan(&plan_of(&[token("a", "y", Some(&id))]));
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(text.contains("<= alpha.alpha_token.a to import"), "{text}");
    assert!(text.contains("~ alpha.alpha_token.a"), "{text}");
    assert!(text.contains("label: \"x\" -> \"y\""), "{text}");
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert_eq!(p.objects().entries.len(), objects);
    assert_eq!(p.outputs()["alpha.alpha_token.a"]["id"], id.as_str());
    assert_no_changes(&p);
}

#[test]
fn nivis_import_adopts_the_object_and_refuses_what_it_cannot() {
    let (mut p, id) = orphaned_object();
    let objects = p.objects().entries.len();
    p.env.push(("NIVIS_FAKE_IMPORT_MANY".into(), "1".into()));
    let out = p.run(&["import", "alpha.alpha_token.a", &id], &[]);
    assert_fails_with(&out, "the provider returned 2 objects (alpha_token, alpha_token); Nivis imports exactly one object per address");
    p.env.pop();
    let import = |addr: &str, object: &str| p.run(&["import", addr, object], &[]);

    let out = import("alpha.alpha_token.a", "alpha-99");
    assert_fails_with(&out, "cannot import \"alpha-99\" into alpha.alpha_token.a: the provider found no alpha_token with that id");
    let out = import("alpha.alpha_token.a", "zzz");
    assert_fails_with(
        &out,
        "cannot import \"zzz\" into alpha.alpha_token.a: the provider refused",
    );
    let out = import("alpha.alpha_token.b", &id);
    assert_fails_with(&out, "the plan declares no such resource");
    let out = p.state_cmd(&["state", "list"]);
    assert_eq!(
        stdout(&out).trim(),
        "",
        "a failed import recorded something"
    );

    let out = import("alpha.alpha_token.a", &id);
    assert_success(&out);
    assert!(
        stdout(&out).contains("<= alpha.alpha_token.a imported: recorded in state"),
        "{}",
        stdout(&out)
    );
    assert_no_changes(&p);
    assert_eq!(p.objects().entries.len(), objects);

    let before = std::fs::read(&p.state).unwrap();
    let out = import("alpha.alpha_token.a", &id);
    assert_fails_with(
        &out,
        "alpha.alpha_token.a is already in state; nothing was imported",
    );
    assert_eq!(std::fs::read(&p.state).unwrap(), before);
}

#[test]
fn a_declared_import_of_a_missing_object_fails_the_plan() {
    let (p, _) = orphaned_object();
    p.set_plan(&plan_of(&[token("a", "x", Some("alpha-99"))]));
    for verb in ["plan", "apply"] {
        let out = p.run(&[verb], &["--auto-approve"][..usize::from(verb == "apply")]);
        assert_fails_with(&out, "cannot import \"alpha-99\" into alpha.alpha_token.a: the provider found no alpha_token with that id");
    }
    let out = p.state_cmd(&["state", "list"]);
    assert_eq!(stdout(&out).trim(), "");
}
