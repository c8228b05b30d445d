//! The apply of a phase uses its preview's answers (DESIGN §106): each object is refreshed and
//! planned once per apply, as OpenTofu applies the plan it made, unless its inputs changed
//! between the preview and its turn (a reference the preview did not know yet).

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::util::*;

/// A project whose fakes log every read and plan call: `lead`, a token labelled `middle`,
/// and `follower`, whose `keeper` reads `lead`'s id (resolved in the same phase, so unknown
/// to the preview of a first apply).
fn project(middle: &str) -> Project {
    let p = Project::new(&plan(middle));
    let log = p.dir.path().join("calls.log");
    p.env("NIVIS_FAKE_CALL_LOG", log.to_str().unwrap())
}

fn plan(middle: &str) -> String {
    let alpha = bin_dir().join("provider-alpha");
    let alpha = alpha.to_str().unwrap();
    format!(
        "ledger: let lead = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"lead\"; config.label = \"lead\"; }}; in \
         lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"{alpha}\"; }}; \
         resources = [ lead \
           (lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"middle\"; config.label = \"{middle}\"; }}) \
           (lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"follower\"; config.label = \"follower\"; config.keeper = lead.refAttr \"id\"; }}) ]; \
         inherit ledger; }}"
    )
}

/// How many calls of kind `call` (`read`, `plan`) the fakes answered per label since the log
/// was last taken; the log is emptied.
fn take_calls(p: &Project) -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    let path = p.dir.path().join("calls.log");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    let (mut reads, mut plans) = (BTreeMap::new(), BTreeMap::new());
    for line in text.lines() {
        let entry: Json = serde_json::from_str(line).expect("call log line is JSON");
        let label = entry["label"].as_str().unwrap_or("(none)").to_string();
        let counts = match entry["call"].as_str() {
            Some("read") => &mut reads,
            Some("plan") => &mut plans,
            other => panic!("unexpected call {other:?} in {line}"),
        };
        *counts.entry(label).or_insert(0) += 1;
    }
    (reads, plans)
}

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn an_apply_refreshes_and_plans_each_object_once_unless_its_inputs_changed() {
    let p = project("middle");

    // First apply: nothing to read. `follower`'s keeper is unknown to the preview and known
    // at its turn, so it alone is planned again; the others use the preview's plan.
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let (reads, plans) = take_calls(&p);
    assert_eq!(reads, counts(&[]));
    assert_eq!(
        plans,
        counts(&[("lead", 1), ("middle", 1), ("follower", 2)])
    );
    let state = p.state_json();
    let lead_id = &state["resources"]["alpha.alpha_token.lead"]["attributes"]["id"];
    assert_eq!(
        &state["resources"]["alpha.alpha_token.follower"]["attributes"]["keeper"], lead_id,
        "the follower was applied with the lead's id, not the preview's unknown"
    );

    // Nothing changed: each object is read and planned once.
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let once = counts(&[("lead", 1), ("middle", 1), ("follower", 1)]);
    assert_eq!(take_calls(&p), (once.clone(), once.clone()));

    // A changed label: still once each, and the change is applied.
    p.set_plan(&plan("centre"));
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert_success(&out);
    let (reads, plans) = take_calls(&p);
    assert_eq!(reads, once);
    assert_eq!(
        plans,
        counts(&[("lead", 1), ("centre", 1), ("follower", 1)])
    );
    let state = p.state_json();
    assert_eq!(
        state["resources"]["alpha.alpha_token.middle"]["attributes"]["label"],
        "centre"
    );
}
