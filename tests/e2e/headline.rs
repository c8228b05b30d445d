//! The headline test of TESTING.md: A →(Nix)→ B →(Nix)→ C across two providers.

use serde_json::Value as Json;

use crate::util::*;

fn finished(events: &[Json]) -> Vec<(u64, String, String)> {
    events
        .iter()
        .filter(|e| e["type"] == "finished")
        .map(|e| {
            (
                e["phase"].as_u64().unwrap(),
                e["id"].as_str().unwrap().to_string(),
                e["action"].to_string(),
            )
        })
        .collect()
}

#[test]
fn three_phases_to_a_fixpoint_then_refresh_and_destroy_in_reverse_order() {
    let p = Project::two_providers(false);

    // plan: A now; B and C wait on Nix re-evaluation with named outputs.
    let out = p.run(&["plan"], &["--json"]);
    assert_success(&out);
    let ev = events(&out);
    let planned: Vec<&str> = ev
        .iter()
        .filter(|e| e["type"] == "planned")
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(planned, ["alpha.alpha_token.A"]);
    let deferred: Vec<&Json> = ev.iter().filter(|e| e["type"] == "deferred").collect();
    assert_eq!(deferred.len(), 2, "{ev:?}");
    let b = deferred
        .iter()
        .find(|e| e["id"] == "beta.beta_record.B")
        .expect("B deferred");
    assert_eq!(
        b["waitsOn"][0],
        serde_json::json!({"kind": "nix", "resource": "alpha.alpha_token.A", "attribute": "value"})
    );

    // apply: exactly three apply phases, A then B then C, then a detected fixpoint.
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let ev = events(&out);
    assert_eq!(
        finished(&ev),
        vec![
            (1, "alpha.alpha_token.A".into(), "\"create\"".into()),
            (2, "beta.beta_record.B".into(), "\"create\"".into()),
            (3, "alpha.alpha_token.C".into(), "\"create\"".into()),
        ]
    );
    let fix = ev
        .iter()
        .find(|e| e["type"] == "fixpoint")
        .expect("fixpoint event");
    assert_eq!(fix["applyPhases"], 3);
    assert_eq!(
        fix["evaluations"], 4,
        "the fourth evaluation finds nothing new"
    );

    // The ledger holds every output, with the exact deterministic values.
    let o = p.outputs();
    assert_eq!(o["alpha.alpha_token.A"]["id"], "alpha-0");
    assert_eq!(o["alpha.alpha_token.A"]["value"], "alpha::0");
    assert_eq!(o["beta.beta_record.B"]["endpoint"], "beta://rec-alpha::0");
    assert_eq!(o["alpha.alpha_token.C"]["id"], "alpha-1");
    assert_eq!(
        o["alpha.alpha_token.C"]["label"],
        "beta://rec-alpha::0::alpha::0"
    );
    assert_eq!(
        o["alpha.alpha_token.C"]["value"],
        "alpha:beta://rec-alpha::0::alpha::0:1"
    );
    // Sensitive outputs reach Nix only as placeholders.
    assert!(
        o["alpha.alpha_token.A"]["secret"]
            .get("__sensitiveRef")
            .is_some(),
        "{o}"
    );

    // systemConfig, a Nix consumer, is concrete with values from both providers.
    let ir = p.eval_ir();
    let consumers = ir["nixConsumers"].as_array().unwrap();
    let sys = consumers
        .iter()
        .find(|c| c["id"] == "systemConfig")
        .unwrap();
    assert_eq!(
        sys["value"],
        serde_json::json!({
            "recordEndpoint": "beta://rec-alpha::0",
            "tokenValue": "alpha::0",
            "combined": "beta://rec-alpha::0::alpha::0"
        })
    );

    // state show renders C's Nix-built label.
    let out = p.state_cmd(&["state", "show", "alpha.alpha_token.C"]);
    assert_success(&out);
    assert!(
        stdout(&out).contains("label = beta://rec-alpha::0::alpha::0"),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains("secret = (sensitive value)"));

    // A second apply changes nothing and stops at once.
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let ev = events(&out);
    assert!(
        finished(&ev).iter().all(|(_, _, a)| a == "\"no-op\""),
        "{ev:?}"
    );
    assert_eq!(
        ev.iter().find(|e| e["type"] == "fixpoint").unwrap()["applyPhases"],
        0
    );

    // refresh reconciles via ReadResource and finds no drift; the plan stays empty.
    let out = p.run(&["refresh"], &["--json"]);
    assert_success(&out);
    assert!(!events(&out).iter().any(|e| e["type"] == "drift"));
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    assert!(stdout(&out).contains("No changes"), "{}", stdout(&out));

    // destroy tears down C, B, A in that order.
    let out = p.run(&["destroy"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let order: Vec<String> = finished(&events(&out))
        .into_iter()
        .map(|(_, id, _)| id)
        .collect();
    assert_eq!(
        order,
        [
            "alpha.alpha_token.C",
            "beta.beta_record.B",
            "alpha.alpha_token.A"
        ]
    );
    let out = p.state_cmd(&["state", "list"]);
    assert_success(&out);
    assert_eq!(stdout(&out).trim(), "");
    p.assert_no_leftover_processes();
}

#[test]
fn human_output_shows_phases() {
    let p = Project::two_providers(false);
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(
        text.contains("Applied 3 resource(s) across 3 phase(s):"),
        "{text}"
    );
    for id in [
        "alpha.alpha_token.A",
        "beta.beta_record.B",
        "alpha.alpha_token.C",
    ] {
        assert!(text.contains(&format!("✓ {id}")), "{text}");
    }
    assert!(
        text.contains(
            "Phase 3 (Nix re-evaluated with phase 2's outputs)\n  + alpha.alpha_token.C: creating…"
        ),
        "{text}"
    );
}

#[test]
fn a_two_phase_cap_leaves_c_and_system_config_pending() {
    let p = Project::two_providers(false);
    let out = p.run(&["apply"], &["--auto-approve", "--max-phases", "2"]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(text.contains("Stopped after 2 phase(s)"), "{text}");
    let c = text
        .lines()
        .find(|l| l.contains("alpha.alpha_token.C waits on"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        c.contains("beta.beta_record.B.endpoint (Nix re-evaluation)")
            && c.contains("alpha.alpha_token.A.value"),
        "{c}"
    );
    let sys = text
        .lines()
        .find(|l| l.contains("systemConfig waits on"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(sys.contains("beta.beta_record.B.endpoint"), "{sys}");
    let o = p.outputs();
    assert!(o.get("alpha.alpha_token.C").is_none());
    assert_eq!(o["beta.beta_record.B"]["endpoint"], "beta://rec-alpha::0");
    // Continuing without the cap finishes the job.
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    assert_eq!(
        p.outputs()["alpha.alpha_token.C"]["label"],
        "beta://rec-alpha::0::alpha::0"
    );
}

#[test]
fn the_cycle_variant_is_rejected_naming_a_and_c() {
    let p = Project::two_providers(true);
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("cycle"), "{err}");
    assert!(
        err.contains("alpha.alpha_token.A") && err.contains("alpha.alpha_token.C"),
        "{err}"
    );
    // Nothing was applied.
    let out = p.state_cmd(&["state", "list"]);
    assert_eq!(stdout(&out).trim(), "");
}

/// The `--json` stream a CI consumer reads: each change is announced (`started`) before it is
/// reported done (`finished`), and the last line splits the wall time (`timing`).
#[test]
fn json_stream_pairs_started_with_finished_and_ends_with_timing() {
    let p = Project::two_providers(false);
    let check_timing = |ev: &[Json], verb: &str| {
        let last = ev.last().unwrap_or_else(|| panic!("{verb}: no events"));
        assert_eq!(last["type"], "timing", "{verb}: {last}");
        let secs = |k: &str| {
            last[k]
                .as_f64()
                .unwrap_or_else(|| panic!("{verb}: {k} in {last}"))
        };
        assert!(secs("nixSeconds") > 0.0, "{verb}: {last}");
        assert!(secs("providerSeconds") > 0.0, "{verb}: {last}");
        assert!(
            last["providerCalls"].as_u64().unwrap() > 0,
            "{verb}: {last}"
        );
        let parts = secs("nixSeconds") + secs("providerSeconds") + secs("ownSeconds");
        assert!(
            (parts - secs("seconds")).abs() < 1e-3,
            "{verb}: parts do not add up: {last}"
        );
        assert!(secs("providerCallSecondsSummed") > 0.0, "{verb}: {last}");
    };
    let out = p.run(&["plan"], &["--json"]);
    assert_success(&out);
    check_timing(&events(&out), "plan");

    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let ev = events(&out);
    check_timing(&ev, "apply");
    let key = |e: &Json| (e["phase"].clone(), e["id"].clone(), e["action"].clone());
    let mut open = Vec::new();
    let mut done = 0;
    for e in &ev {
        match e["type"].as_str() {
            Some("started") => open.push(key(e)),
            Some("finished") if e["action"] != "no-op" => {
                let k = key(e);
                let at = open.iter().position(|o| *o == k);
                assert!(at.is_some(), "finished without started: {e}");
                open.remove(at.unwrap());
                done += 1;
            }
            _ => {}
        }
    }
    assert_eq!(done, 3, "{ev:?}");
    assert!(open.is_empty(), "started but never finished: {open:?}");

    let out = p.run(&["destroy"], &["--auto-approve", "--json"]);
    assert_success(&out);
    check_timing(&events(&out), "destroy");
}

/// A failed command ends its `--json` stream with an `error` line saying what failed, so CI
/// does not have to parse stderr; a plan that fails says nothing was changed.
#[test]
fn json_stream_ends_with_an_error_line_when_the_command_fails() {
    let p = Project::two_providers(false);
    let last = |out: &std::process::Output| events(out).last().cloned().expect("an event");

    p.set_plan("ledger: { resources = [ ");
    let out = p.run(&["plan"], &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let e = last(&out);
    assert_eq!(e["type"], "error", "{e}");
    assert!(e["message"].as_str().unwrap().contains("plan.nix"), "{e}");

    p.set_plan(
        r#"ledger: lib.toIR {
          providers.alpha = lib.mkProvider { source = "provider-alpha"; };
          resources = [ (lib.mkResource { provider = "alpha"; type = "alpha_token"; name = "A";
                                          config.label = "invalid-label"; }) ];
          inherit ledger;
        }"#,
    );
    let out = p.run(&["plan"], &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let ev = events(&out);
    assert!(
        ev.iter()
            .any(|e| e["type"] == "failed" && e["id"] == "alpha.alpha_token.A"),
        "{ev:?}"
    );
    let e = ev.last().unwrap();
    assert_eq!(e["type"], "error", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("could not be planned; nothing was changed"),
        "{e}"
    );

    // Failing before the engine starts still frames the stream: version, error, summary.
    let out = p.run(&["apply"], &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let (version, ev, summary) = stream(&out);
    assert_eq!(version["command"], "apply");
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["type"], "error");
    assert!(
        ev[0]["message"]
            .as_str()
            .unwrap()
            .contains("--auto-approve"),
        "{}",
        ev[0]
    );
    assert_eq!(summary["changes"], false, "{summary}");
}

/// The summary line counts what was planned and what was done; `--detailed-exitcode` answers
/// "anything to do?" with 2, then 0 once applied.
#[test]
fn the_json_summary_counts_and_detailed_exitcode_tells_changes() {
    let p = Project::two_providers(false);
    let out = p.run(&["plan"], &["--json", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let (_, _, summary) = stream(&out);
    assert_eq!(summary["planned"]["create"], 1, "{summary}");
    assert_eq!(summary["deferred"], 2, "{summary}");
    assert_eq!(summary["changes"], true, "{summary}");
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let (_, _, summary) = stream(&out);
    assert_eq!(summary["applied"]["create"], 3, "{summary}");
    let out = p.run(&["plan"], &["--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("No changes."), "{}", stdout(&out));
}

/// The headline run with both fakes serving tfplugin5: the v5 method names, the v5 schema
/// messages and PrepareProviderConfig carry the same three phases, refresh and destroy.
#[test]
fn the_headline_runs_the_same_when_the_providers_speak_tfplugin5() {
    let p = Project::two_providers(false).env("NIVIS_FAKE_PROTOCOL", "5");
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    assert_eq!(
        finished(&events(&out)),
        vec![
            (1, "alpha.alpha_token.A".into(), "\"create\"".into()),
            (2, "beta.beta_record.B".into(), "\"create\"".into()),
            (3, "alpha.alpha_token.C".into(), "\"create\"".into()),
        ]
    );
    let o = p.outputs();
    assert_eq!(o["beta.beta_record.B"]["endpoint"], "beta://rec-alpha::0");
    assert_eq!(
        o["alpha.alpha_token.C"]["value"],
        "alpha:beta://rec-alpha::0::alpha::0:1"
    );
    let out = p.run(&["refresh"], &["--json"]);
    assert_success(&out);
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    assert!(stdout(&out).contains("No changes"), "{}", stdout(&out));
    let out = p.run(&["destroy"], &["--auto-approve", "--json"]);
    assert_success(&out);
    assert_eq!(finished(&events(&out)).len(), 3);
    assert!(p.state_json()["resources"]
        .as_object()
        .is_none_or(|r| r.is_empty()));
}
