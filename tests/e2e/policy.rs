//! Policy as code through the CLI: plan rules checked on each phase's changes before the phase
//! applies anything (mandatory refuses, advisory warns, an override passes with its reason in
//! the stream), static rules checked before any provider starts, saved plans checked again at
//! apply time.

use serde_json::Value as Json;

use crate::util::*;

/// A plan file `{ plan; policies; }`: token `a` (label `label`) and token `b`, whose keeper
/// (which forces replacement) Nix builds from `a`'s value: when `a` changes in phase 1, `b` is
/// replaced in phase 2.
fn chained_tokens(label: &str, policies: &str) -> String {
    format!(
        r#"{{
  plan = ledger:
    let
      a = lib.mkResource {{ provider = "alpha"; type = "alpha_token"; name = "a"; config.label = "{label}"; }};
      b = lib.mkResource {{ provider = "alpha"; type = "alpha_token"; name = "b";
        config = {{ label = "b"; keeper = lib.str [ "k-" (a.refAttr "value") ]; }}; }};
    in
    lib.toIR {{ providers.alpha = lib.mkProvider {{ source = "provider-alpha"; }}; resources = [ a b ]; inherit ledger; }};
  policies = [ {policies} ];
}}"#
    )
}

/// "Never replace an alpha_token", at `level`.
fn never_replace(level: &str) -> String {
    format!(
        r#"(lib.policy.plan {{
      name = "never-replace-tokens";
      level = "{level}";
      check = change: !(change.type == "alpha_token" && change.action == "replace");
      message = change: "${{change.address}} would be replaced (keeper: ${{change.after.keeper or "?"}})";
    }})"#
    )
}

fn violations(out: &std::process::Output) -> Vec<Json> {
    events(out)
        .into_iter()
        .filter(|e| e["type"] == "policy-violation")
        .collect()
}

fn run_plan(p: &Project, verb: &[&str], extra: &[&str]) -> std::process::Output {
    let mut args = vec!["--attr", "plan"];
    args.extend_from_slice(extra);
    p.run(verb, &args)
}

#[test]
fn a_mandatory_plan_rule_refuses_a_later_phase_before_it_changes_anything() {
    let p = Project::new(&chained_tokens("one", &never_replace("mandatory")));
    // Creating both passes the rule.
    let out = run_plan(&p, &["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    assert!(violations(&out).is_empty(), "{}", stdout(&out));
    let before = p.outputs();
    let b_id = before["alpha.alpha_token.b"]["id"].clone();

    // a updates in place in phase 1; phase 2 would replace b: refused before it starts.
    p.set_plan(&chained_tokens("two", &never_replace("mandatory")));
    let out = run_plan(&p, &["apply"], &["--auto-approve", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let found = violations(&out);
    assert_eq!(found.len(), 1, "{found:?}");
    let v = &found[0];
    assert_eq!(v["rule"], "never-replace-tokens");
    assert_eq!(v["level"], "mandatory");
    assert_eq!(v["phase"], 2);
    assert_eq!(v["address"], "alpha.alpha_token.b");
    assert_eq!(v["overridden"], false);
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with("alpha.alpha_token.b would be replaced (keeper: k-alpha:two"),
        "{v}"
    );
    // Phase 1 applied; nothing in phase 2 started.
    let started: Vec<(String, Json)> = actions(&out, "started");
    assert_eq!(
        started,
        vec![(
            "alpha.alpha_token.a".to_string(),
            serde_json::json!("update")
        )]
    );
    let failed = events(&out).into_iter().find(|e| e["type"] == "error");
    let failed = failed.expect("an error event");
    assert!(
        failed["message"]
            .as_str()
            .is_some_and(|m| m.contains("refused by policy before phase 2")),
        "{failed}"
    );
    // State: a updated, b as it was (same object, old keeper).
    let after = p.outputs();
    assert_eq!(after["alpha.alpha_token.a"]["value"], "alpha:two:0");
    assert_eq!(after["alpha.alpha_token.b"]["id"], b_id);
    assert_eq!(
        after["alpha.alpha_token.b"]["keeper"],
        before["alpha.alpha_token.b"]["keeper"]
    );
    // The human output names the rule, the address and what to do; a misspelt override
    // overrides nothing, and says so.
    let out = run_plan(
        &p,
        &["apply"],
        &[
            "--auto-approve",
            "--override",
            "never-replace-token",
            "--reason",
            "typo",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("--override never-replace-token: the project has no such policy rule (its rules: never-replace-tokens)"),
        "{err}"
    );
    assert!(
        err.contains(
            "Policy violation [alpha.alpha_token.b]: rule never-replace-tokens (mandatory)"
        ),
        "{err}"
    );
    assert!(err.contains("--override RULE --reason TEXT"), "{err}");
    assert_eq!(p.outputs()["alpha.alpha_token.b"]["id"], b_id);

    // Overridden with a reason: applies, the reason in the stream.
    let out = run_plan(
        &p,
        &["apply"],
        &[
            "--auto-approve",
            "--json",
            "--override",
            "never-replace-tokens",
            "--reason",
            "rotating b, ticket 42",
        ],
    );
    assert_success(&out);
    let found = violations(&out);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["overridden"], true);
    assert_eq!(found[0]["reason"], "rotating b, ticket 42");
    let finished = actions(&out, "finished");
    assert!(finished[1].1.get("replace").is_some(), "{finished:?}");
    assert_eq!(
        p.outputs()["alpha.alpha_token.b"]["keeper"],
        after["alpha.alpha_token.a"]["value"]
            .as_str()
            .map(|v| format!("k-{v}"))
            .unwrap()
    );
    // The audit trail keeps the override and its reason with the run's record.
    let log = p.state_cmd(&["log", "--json"]);
    assert_success(&log);
    let last: Json = serde_json::from_str(stdout(&log).lines().last().expect("a record"))
        .expect("a JSON record");
    assert_eq!(
        last["policyOverrides"],
        serde_json::json!([{"rule": "never-replace-tokens", "reason": "rotating b, ticket 42"}]),
        "{last}"
    );
    p.assert_no_leftover_processes();
}

#[test]
fn an_advisory_plan_rule_warns_and_applies() {
    let p = Project::new(&chained_tokens("one", &never_replace("advisory")));
    assert_success(&run_plan(&p, &["apply"], &["--auto-approve"]));
    let keeper = p.outputs()["alpha.alpha_token.b"]["keeper"].clone();
    p.set_plan(&chained_tokens("two", &never_replace("advisory")));
    let out = run_plan(&p, &["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let found = violations(&out);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["level"], "advisory");
    assert_eq!(found[0]["phase"], 2);
    let finished = actions(&out, "finished");
    assert_eq!(finished[1].0, "alpha.alpha_token.b", "{finished:?}");
    assert!(finished[1].1.get("replace").is_some(), "{finished:?}");
    assert_ne!(p.outputs()["alpha.alpha_token.b"]["keeper"], keeper);
    // Human: a warning on stderr.
    p.set_plan(&chained_tokens("three", &never_replace("advisory")));
    let out = run_plan(&p, &["apply"], &["--auto-approve"]);
    assert_success(&out);
    assert!(
        stderr(&out)
            .contains("Policy warning [alpha.alpha_token.b]: rule never-replace-tokens (advisory)"),
        "{}",
        stderr(&out)
    );
}

/// A plan whose only provider is a script that leaves `started` in the project directory
/// before it runs the fake: whether a provider process was started at all.
fn spied_keeper(p: &Project, keeper: &str) -> String {
    let spy = p.dir.path().join("provider-spy");
    let script = format!(
        "#!/bin/sh\ntouch '{}'\nexec '{}' \"$@\"\n",
        p.dir.path().join("started").display(),
        bin_dir().join("provider-alpha").display()
    );
    std::fs::write(&spy, script).unwrap();
    std::fs::set_permissions(&spy, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    format!(
        r#"{{
  plan = ledger: lib.toIR {{
    providers.alpha = lib.mkProvider {{ source = "{}"; }};
    resources = [ (lib.mkResource {{ provider = "alpha"; type = "alpha_token"; name = "t"; config = {{ label = "x"; {keeper} }}; }}) ];
    inherit ledger;
  }};
  policies = [
    (lib.policy.static {{
      name = "required-keeper";
      check = r: r.kind != "resource" || r.config ? keeper;
      message = r: "${{r.id}} has no keeper";
    }})
  ];
}}"#,
        spy.display()
    )
}

#[test]
fn a_static_rule_fails_plan_before_any_provider_starts() {
    let p = Project::new("{ }");
    p.set_plan(&spied_keeper(&p, ""));
    let started = p.dir.path().join("started");
    let out = run_plan(&p, &["plan"], &["--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let found = violations(&out);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["rule"], "required-keeper");
    assert_eq!(found[0]["address"], "alpha.alpha_token.t");
    assert_eq!(found[0]["message"], "alpha.alpha_token.t has no keeper");
    assert_eq!(found[0]["phase"], 1);
    assert!(!started.exists(), "a provider was started");
    let out = run_plan(&p, &["apply"], &["--auto-approve"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!started.exists(), "a provider was started");
    assert!(
        !p.state.exists()
            || p.state_json()["resources"]
                .as_array()
                .is_none_or(Vec::is_empty)
    );

    // With the label, the same plan starts the provider and plans.
    p.set_plan(&spied_keeper(&p, "keeper = \"infra\";"));
    let out = run_plan(&p, &["plan"], &["--json"]);
    assert_success(&out);
    assert!(violations(&out).is_empty());
    assert!(
        started.exists(),
        "the control run never started the provider"
    );
}

#[test]
fn a_saved_plan_is_checked_against_the_policies_again_at_apply_time() {
    let p = Project::new(&chained_tokens("one", ""));
    let file = p.dir.path().join("reviewed.plan");
    let out = run_plan(&p, &["plan"], &["--out", file.to_str().unwrap()]);
    assert_success(&out);
    // The rule arrives after the review: creating a token is now forbidden.
    let no_creates =
        r#"(lib.policy.plan { name = "no-new-tokens"; check = c: c.action != "create"; })"#;
    p.set_plan(&chained_tokens("one", no_creates));
    let out = p.run(
        &["apply", file.to_str().unwrap()],
        &["--attr", "plan", "--json"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let found = violations(&out);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["rule"], "no-new-tokens");
    assert!(actions(&out, "started").is_empty());
    assert!(!p.state.exists() || p.outputs().as_object().is_none_or(|o| o.is_empty()));
}

#[test]
fn policy_test_compares_fixture_verdicts() {
    let p = Project::new(&chained_tokens("one", &never_replace("mandatory")));
    let fixture = |name: &str, action: &str, expect: &str| {
        let path = p.dir.path().join(name);
        let text = format!(
            r#"{{"kind": "plan", "changes": [{{"address": "alpha.alpha_token.b", "type": "alpha_token", "action": "{action}"}}], "expect": [{expect}]}}"#
        );
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let replaced = fixture(
        "replaced.json",
        "replace",
        r#"{"rule": "never-replace-tokens", "address": "alpha.alpha_token.b"}"#,
    );
    let updated = fixture("updated.json", "update", "");
    // `policy test` reads no state: no --state, unlike `Project::run`.
    let policy_test = |fixtures: &[&str]| {
        std::process::Command::new(nivis_bin())
            .args(["policy", "test"])
            .args(fixtures)
            .arg("--file")
            .arg(&p.plan)
            .args(["--attr", "plan"])
            .current_dir(p.dir.path())
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    let out = policy_test(&[&replaced, &updated]);
    assert_success(&out);
    assert!(
        stdout(&out).contains("2 fixture(s): 2 passed, 0 failed"),
        "{}",
        stdout(&out)
    );
    // A fixture expecting nothing where the rule refuses fails, and says what was found.
    let wrong = fixture("wrong.json", "replace", "");
    let out = policy_test(&[&wrong]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("FAIL "), "{text}");
    assert!(text.contains("expected: no violation"), "{text}");
    assert!(
        text.contains("found: never-replace-tokens on alpha.alpha_token.b"),
        "{text}"
    );
}

/// A plain file read without `--attr` has no place for policies: the plan runs without any
/// policy evaluation, and an `--override` is said to override nothing.
#[test]
fn a_plan_without_a_place_for_policies_runs_none_and_says_an_override_is_void() {
    let p = Project::new(
        "ledger: lib.toIR { providers.alpha = lib.mkProvider { source = \"provider-alpha\"; }; \
         resources = [ (lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; \
         name = \"a\"; config.label = \"a\"; }) ]; inherit ledger; }",
    );
    let out = p.run(
        &["apply"],
        &["--auto-approve", "--override", "some-rule", "--reason", "r"],
    );
    assert_success(&out);
    let warning = "--override: this plan has no policies";
    assert_eq!(stderr(&out).matches(warning).count(), 1, "{}", stderr(&out));
    assert!(p.outputs()["alpha.alpha_token.a"]["id"].is_string());
}
