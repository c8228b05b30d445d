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
