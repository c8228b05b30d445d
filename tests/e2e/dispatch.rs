//! Dispatch around a state write (DESIGN §85): an operation that depends on nothing in the
//! batch of results being written starts while that write is made durable; one that depends
//! on a result in it starts only once the result is recorded.

use crate::util::*;

/// `a` and `b` independent; `c` reads `a`'s id (so a destroy deletes `c` before `a`).
const PLAN: &str = "ledger: let \
    a = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"a\"; config.label = \"a\"; }; \
    b = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"b\"; config.label = \"b\"; }; \
    c = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"c\"; config.label = a.refAttr \"id\"; }; \
    in lib.toIR { providers.alpha = lib.mkProvider { source = \"provider-alpha\"; }; \
    resources = [ a b c ]; inherit ledger; }";

/// Where the first event of `kind` about resource `name` is in `events`.
fn at(events: &[serde_json::Value], kind: &str, name: &str) -> usize {
    let id = format!("alpha.alpha_token.{name}");
    events
        .iter()
        .position(|e| e["type"] == kind && e["id"] == id.as_str())
        .unwrap_or_else(|| panic!("no {kind} event for {id}: {events:?}"))
}

#[test]
fn an_independent_operation_starts_while_a_result_is_recorded_a_dependent_one_after() {
    let p = Project::new(PLAN);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let out = p.run(
        &["destroy"],
        &["--auto-approve", "--json", "--parallelism", "1"],
    );
    assert_success(&out);
    let events = events(&out);
    // One worker: `b` and `c` are ready at once (nothing waits on `b`, `a` waits for `c`).
    // The second of them starts before the first one's deletion is announced, i.e. while it
    // was being recorded.
    let first_finished = events
        .iter()
        .position(|e| e["type"] == "finished")
        .expect("a finished event");
    let started_before = events[..first_finished]
        .iter()
        .filter(|e| e["type"] == "started")
        .count();
    assert_eq!(started_before, 2, "{events:?}");
    // `a` starts only once the deletion of `c`, which read it, is recorded.
    assert!(
        at(&events, "started", "a") > at(&events, "finished", "c"),
        "{events:?}"
    );
    let listed = stdout(&p.state_cmd(&["state", "list"]));
    assert!(listed.trim().is_empty(), "{listed}");
}
