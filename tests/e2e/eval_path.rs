//! The Nix evaluation path of a run (issue 35, DESIGN §83): the resource-set probe folded into
//! the plan's own evaluation, and the evaluation after a phase that prints the very IR the
//! phase ran.

use std::os::unix::fs::PermissionsExt;

use serde_json::Value as Json;

use crate::util::*;

/// What the plan says when its resource set reads the ledger (`engine::announced::MAY_ADD`).
const MAY_ADD: &str = "resources may be added in a later phase: the plan function reads the ledger";

/// An alpha token declared in Nix, labelled with its name.
fn token(name: &str) -> String {
    format!(
        "{name} = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"{name}\"; config = {{ label = \"{name}\"; }}; }};"
    )
}

/// A plan declaring `a`, and `extra` (a Nix list expression) once the ledger holds `a`'s
/// outputs: the probe's evaluation is the only one that sees `extra`.
fn grows_with(extra: &str) -> String {
    format!(
        "ledger: let {} {} in lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; \
           resources = [ a ] ++ (if (ledger.outputs or {{ }}) ? \"alpha.alpha_token.a\" then {extra} else [ ]); inherit ledger; }}",
        token("a"),
        token("b"),
    )
}

/// A project for `body` whose `nix` is a wrapper logging the subcommand of every call (see
/// [`nix_evals`]).
fn counting_nix(body: &str) -> Project {
    let p = Project::new(body);
    let script = p.dir.path().join("nix-counting");
    let log = p.dir.path().join("nix-calls.log");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$3\" >> '{}'\nexec nix \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.env("NIVIS_NIX", script.to_str().unwrap())
}

/// How many `nix eval` calls the project's runs made since the last call, and forgets them.
fn nix_evals(p: &Project) -> usize {
    let log = p.dir.path().join("nix-calls.log");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    text.lines().filter(|l| *l == "eval").count()
}

/// Whether a `--json` run warned that resources may be added.
fn warns_may_add(out: &std::process::Output) -> bool {
    events(out)
        .into_iter()
        .any(|e| e["type"] == "warning" && e["diagnostic"].to_string().contains(MAY_ADD))
}

/// The ids the run planned (with their action), no-ops and reads left out.
fn planned(out: &std::process::Output) -> Vec<(String, Json)> {
    (actions(out, "planned").into_iter())
        .filter(|(_, a)| a != "no-op" && a != "read")
        .collect()
}

/// Item 1: the probe that finds a resource set read from the ledger costs the plan no
/// evaluation of its own: one `nix eval`, the warning, the plan of what exists so far. Once
/// every declared node is recorded nothing is probed (and nothing warned).
#[test]
fn the_probe_runs_in_the_plans_own_evaluation() {
    let p = counting_nix(&grows_with("[ b ]"));
    let out = p.run(&["plan"], &["--json"]);
    assert_success(&out);
    assert!(warns_may_add(&out), "{}", stdout(&out));
    assert_eq!(
        planned(&out),
        [("alpha.alpha_token.a".into(), "create".into())]
    );
    assert_eq!(nix_evals(&p), 1, "{}", stderr(&out));

    // A set that does not read the ledger: no warning, one evaluation.
    p.set_plan(&grows_with("[ ]"));
    let out = p.run(&["plan"], &["--json"]);
    assert_success(&out);
    assert!(!warns_may_add(&out), "{}", stdout(&out));
    assert_eq!(nix_evals(&p), 1);

    // Applied (the auto-approved apply goes on to b), the set is settled: a no-op plan.
    p.set_plan(&grows_with("[ b ]"));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let _ = nix_evals(&p);
    let out = p.run(&["plan"], &["--json", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(!warns_may_add(&out), "{}", stdout(&out));
    assert_eq!(nix_evals(&p), 1);
}

/// Item 1: a probe that fails still gives the plan, with the warning: one that throws
/// (caught inside the evaluation) and one that fails in a way `builtins.tryEval` cannot catch
/// (a type error only the probe's branch reaches: the combined evaluation fails, the plan's
/// own evaluation runs again without the probe and succeeds).
#[test]
fn a_failing_probe_still_plans_with_the_warning() {
    for (extra, evals) in [
        ("[ (throw \"only the probe gets here\") ]", 1),
        ("[ (1 + \"x\") ]", 2),
    ] {
        let p = counting_nix(&grows_with(extra));
        let out = p.run(&["plan"], &["--json"]);
        assert_success(&out);
        assert!(warns_may_add(&out), "{extra}: {}", stdout(&out));
        assert_eq!(
            planned(&out),
            [("alpha.alpha_token.a".into(), "create".into())]
        );
        assert_eq!(nix_evals(&p), evals, "{extra}");
    }
}

/// Item 1: a plan whose own evaluation fails reports its own error (not the probe's
/// expression), as without the probe.
#[test]
fn a_plan_that_fails_reports_its_own_error() {
    let p = Project::new(&grows_with("[ b ]").replace(
        "resources = [ a ]",
        "resources = [ (throw \"the plan's own error\") a ]",
    ));
    let err = refused(&p.run(&["plan"], &[]));
    assert!(err.contains("the plan's own error"), "{err}");
    assert!(!err.contains("tryEval"), "{err}");
}

/// A plan of `a` (label `a_label`, a Nix expression) and the data source `l`.
fn tokens_and_lookup(a_label: &str) -> String {
    format!(
        "ledger: let \
           a = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"a\"; config = {{ label = {a_label}; }}; }}; \
           {} \
           l = lib.mkData {{ provider = \"alpha\"; type = \"alpha_lookup\"; name = \"l\"; config.key = \"k\"; }}; \
         in lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; resources = [ a b ]; data = [ l ]; inherit ledger; }}",
        token("b"),
    )
}

/// The run's course without what varies between runs (times, the order of parallel work):
/// the evaluations, phases and the fixpoint in order, what finished (sorted), and the summary.
fn course(out: &std::process::Output) -> (Vec<Json>, Vec<(String, Json)>, Json) {
    let (_, events, mut summary) = stream(out);
    let steps = (events.iter())
        .filter(|e| ["evaluated", "phase-done", "fixpoint"].contains(&e["type"].as_str().unwrap()))
        .map(|e| {
            let mut e = e.clone();
            e.as_object_mut()
                .unwrap()
                .retain(|k, _| k != "timestamp" && k != "seconds");
            e
        })
        .collect();
    let mut finished = actions(out, "finished");
    finished.sort_by(|x, y| x.0.cmp(&y.0));
    summary
        .as_object_mut()
        .unwrap()
        .retain(|k, _| k != "timestamp" && k != "seconds");
    (steps, finished, summary)
}

/// Item 3: the evaluation after a phase that settled everything prints the very IR the phase
/// ran; the run reaches the fixpoint with that IR, not parsed or analysed again (said at -vv),
/// with the events and summary a full analysis gives.
#[test]
fn the_same_ir_after_a_phase_is_the_fixpoint() {
    let p = Project::new(&tokens_and_lookup("\"a\""));
    let out = p.run(&["apply"], &["--auto-approve", "--json", "-vv"]);
    assert_success(&out);
    let (steps, finished, summary) = course(&out);
    let expected_steps: Vec<Json> = vec![
        serde_json::json!({"type": "evaluated", "phase": 0, "resources": 2, "data": 1}),
        serde_json::json!({"type": "phase-done", "phase": 1, "changed": 2}),
        serde_json::json!({"type": "evaluated", "phase": 1, "resources": 2, "data": 1}),
        serde_json::json!({"type": "fixpoint", "evaluations": 2, "applyPhases": 1}),
    ];
    assert_eq!(steps, expected_steps, "{}", stdout(&out));
    assert_eq!(
        finished,
        [
            ("alpha.alpha_token.a".to_string(), Json::from("create")),
            ("alpha.alpha_token.b".to_string(), Json::from("create")),
            ("data.alpha.alpha_lookup.l".to_string(), Json::from("read")),
        ]
    );
    let expected_summary = serde_json::json!({
        "type": "summary", "command": "apply", "exitStatus": 0, "changes": false,
        "planned": {}, "applied": {"create": 2},
        "deferred": 0, "moved": 0, "imported": 0, "drifted": 0,
    });
    assert_eq!(summary, expected_summary);
    let err = stderr(&out);
    assert!(
        err.contains("phase 1's evaluation printed the IR the last phase ran"),
        "{err}"
    );
    // Nothing left to do: a no-op plan.
    let out = p.run(&["plan"], &["--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

/// Item 3: a plan whose IR changes once the first phase's outputs are in the ledger (`a`'s
/// label reads `b`'s id through the ledger, nothing deferred) gets its second phase.
#[test]
fn an_ir_that_changes_after_a_phase_gets_the_next_phase() {
    let label = "(if (ledger.outputs or { }) ? \"alpha.alpha_token.b\" then \"after-${ledger.outputs.\"alpha.alpha_token.b\".id}\" else \"before\")";
    let p = Project::new(&tokens_and_lookup(label));
    let out = p.run(&["apply"], &["--auto-approve", "--json", "-vv"]);
    assert_success(&out);
    let (steps, finished, _) = course(&out);
    let last = steps.last().unwrap();
    assert_eq!(last["type"], "fixpoint", "{steps:?}");
    assert_eq!(
        (last["evaluations"].as_u64(), last["applyPhases"].as_u64()),
        (Some(3), Some(2)),
        "{steps:?}"
    );
    assert!(
        finished.contains(&("alpha.alpha_token.a".to_string(), Json::from("update"))),
        "{finished:?}"
    );
    let b_id = p.outputs()["alpha.alpha_token.b"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        p.outputs()["alpha.alpha_token.a"]["label"],
        format!("after-{b_id}")
    );
    // The third evaluation printed the second phase's IR again.
    let err = stderr(&out);
    assert!(
        !err.contains("phase 1's evaluation printed the IR the last phase ran"),
        "{err}"
    );
    assert!(
        err.contains("phase 2's evaluation printed the IR the last phase ran"),
        "{err}"
    );
}

/// Item 3: the IR printed again is recognised without parsing only when the fixpoint needs no
/// IR: with a recorded resource the plan no longer declares, the evaluation after the phase is
/// parsed, and the orphan destroyed at the fixpoint.
#[test]
fn an_orphan_is_destroyed_at_the_fixpoint_after_a_settled_phase() {
    let with = |names: &[&str]| {
        format!(
            "ledger: let {} in lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; resources = [ {} ]; inherit ledger; }}",
            names.iter().map(|n| token(n)).collect::<String>(),
            names.join(" ")
        )
    };
    let p = Project::new(&with(&["a", "b"]));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    p.set_plan(&with(&["a", "c"]));
    let out = p.run(&["apply"], &["--auto-approve", "--json", "-vv"]);
    assert_success(&out);
    let (steps, mut finished, _) = course(&out);
    finished.retain(|(_, a)| a != "no-op");
    assert_eq!(
        finished,
        [
            ("alpha.alpha_token.b".to_string(), Json::from("delete")),
            ("alpha.alpha_token.c".to_string(), Json::from("create")),
        ],
        "{steps:?}"
    );
    assert!(!stderr(&out).contains("printed the IR the last phase ran"));
    let listed = stdout(&p.state_cmd(&["state", "list"]));
    assert!(!listed.contains("alpha.alpha_token.b"), "{listed}");
}

/// Item 1: above `nixeval::probe::FOLDED_UP_TO` (10000) declared nodes the probe is not folded
/// in (both evaluations live in one evaluator would double its peak): the plan's evaluation
/// says "not probed" and the engine probes in an evaluation of its own, as before.
#[test]
fn a_large_plan_probes_in_an_evaluation_of_its_own() {
    let many = "lib.count 10000 (i: lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"many\"; config.label = toString i; })";
    let p = counting_nix(&grows_with("[ b ]").replace(
        "resources = [ a ] ++",
        &format!("resources = [ a ] ++ {many} ++"),
    ));
    let out = p.run(&["plan"], &["--json", "--target", "alpha.alpha_token.a"]);
    assert_success(&out);
    assert!(warns_may_add(&out), "{}", stdout(&out));
    assert_eq!(nix_evals(&p), 2, "{}", stderr(&out));
}
