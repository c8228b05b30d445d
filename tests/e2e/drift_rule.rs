//! Drift the plan does not act on is reported and is no change (DESIGN §90, issue 45 defect
//! 1): an SDKv2-style provider answering create with null and read with an empty collection
//! shows no drift at all, and a computed value changed outside Nivis that nothing reads is
//! shown but leaves `plan --detailed-exitcode` at 0. `refresh` and `--refresh-only`, whose
//! business drift is, still exit 2 on it.

use crate::util::*;

fn plan() -> String {
    "ledger: let \
       sdk = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"sdk\"; config.label = \"sdk\"; }; \
       drifty = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"drifty\"; config.label = \"drifty\"; }; \
     in lib.toIR { providers.alpha = lib.mkProvider { source = \"provider-alpha\"; }; resources = [ sdk drifty ]; inherit ledger; }"
        .to_string()
}

#[test]
fn null_read_back_as_empty_is_no_drift() {
    let p = Project::new(&plan());
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let p = p.env("NIVIS_FAKE_EMPTY_AT_READ_ON", "sdk,drifty");
    let out = p.run(&["plan"], &["--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(!text.contains("changed outside"), "{text}");
    assert!(text.contains("No changes"), "{text}");
    assert!(!text.contains("Run `nivis apply`"), "{text}");
    let out = p.run(&["refresh"], &["--json", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let drift: Vec<_> = events(&out)
        .into_iter()
        .filter(|e| e["type"] == "drift")
        .collect();
    assert!(drift.is_empty(), "{drift:?}");
}

#[test]
fn drift_nothing_acts_on_is_shown_but_is_no_change() {
    let p = Project::new(&plan());
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let p = p.env("NIVIS_FAKE_DRIFT_ON", "drifty");
    let out = p.run(&["plan"], &["--detailed-exitcode", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let (_, evs, summary) = stream(&out);
    let drift: Vec<_> = evs.iter().filter(|e| e["type"] == "drift").collect();
    assert_eq!(drift.len(), 1, "{evs:?}");
    assert_eq!(drift[0]["id"], "alpha.alpha_token.drifty");
    assert_eq!(drift[0]["changes"][0]["path"], "value");
    assert_eq!(summary["drifted"], 1, "{summary}");
    assert_eq!(summary["changes"], false, "{summary}");
    let out = p.run(&["plan"], &["--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("alpha.alpha_token.drifty changed outside Nivis"),
        "{text}"
    );
    assert!(text.contains("No changes"), "{text}");
    // Where drift is the business, it is a change.
    let out = p.run(&["plan"], &["--refresh-only", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let out = p.run(&["refresh"], &["--auto-approve", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
}
