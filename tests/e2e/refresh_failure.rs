//! One rule for plan and apply when a recorded object cannot be read (issue 45, defect 4):
//! Terraform's. A phase-1 resource that cannot be refreshed or planned fails `plan` and
//! `apply` alike before anything changes, with or without `--auto-approve`; through the CLI
//! with real Nix and the fake providers.

use super::state_files::tokens;
use crate::util::*;

#[test]
fn a_read_that_fails_stops_plan_and_apply_before_any_change() {
    let p = Project::new(&tokens(&["kept"])).with_object_log();
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let before = p.state_json();
    // An independent token is added while the recorded one cannot be read.
    p.set_plan(&tokens(&["kept", "fresh"]));
    let p = p.env("NIVIS_FAKE_FAIL_READ_ON", "kept");
    let nothing_changed = "could not be planned; nothing was changed";

    let plan = p.run(&["plan"], &[]);
    assert_eq!(plan.status.code(), Some(1), "{}", stdout(&plan));
    assert!(stderr(&plan).contains(nothing_changed), "{}", stderr(&plan));

    for extra in [&["--auto-approve"][..], &["--auto-approve", "--json"][..]] {
        let apply = p.run(&["apply"], extra);
        assert_eq!(apply.status.code(), Some(1), "{}", stdout(&apply));
        let all = format!("{}{}", stdout(&apply), stderr(&apply));
        assert!(all.contains(nothing_changed), "{all}");
        assert!(all.contains("cannot read kept"), "{all}");
        assert!(!all.contains("fresh: created"), "{all}");
    }
    assert_eq!(p.state_json()["resources"], before["resources"]);
    let live = p.objects().live();
    assert_eq!(
        live.values().collect::<Vec<_>>(),
        ["kept"],
        "only the first apply created an object"
    );
    assert_eq!(p.objects().created(), 1);

    // Once the object reads again, the same apply goes through.
    let p = p.env("NIVIS_FAKE_FAIL_READ_ON", "");
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert_eq!(p.outputs()["alpha.alpha_token.fresh"]["label"], "fresh");
}
